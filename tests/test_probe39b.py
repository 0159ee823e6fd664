"""Probe 39b (attention variants written from scratch: sliding windows, ALiBi, soft-capping, split-K
decode and its combine, GQA, cross attention, key padding, relative position tables, prefix-LM,
dropout, logsumexp; float32/bfloat16, head_dim 32 to 128)."""
import inspect
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _line(fn, text):
  """(line, column) of the first line of `fn` holding `text`."""
  lines, first = inspect.getsourcelines(fn)
  k = next(i for i, s in enumerate(lines) if text in s)
  return first + k, lines[k].index(text)


# ---------------------------------------------------------------- decode: g query heads against a masked K tile
@mg.mgpu_kernel(out_shape=lambda q, k, lens: S((q.shape[0], k.shape[0]), F32), grid=(1,))
def group_scores(q, k, lens, o):
  idx = ml.arange(k.shape[0])
  kt = k.at[ml.ds(0, k.shape[0]), :].load(mask=(idx < lens[0])[:, None], other=0.0)
  o[...] = ml.sum(q[...][:, None, :] * kt[None, :, :], axis=2)        # (g, keys)


def _group_scores_ref(q, k, n):
  return q @ np.where(np.arange(k.shape[0])[:, None] < n, k, 0).T


def test_tile_loaded_under_an_index_mask_broadcast_into_3d():
  """A K tile loaded under a row mask of `ml.arange` and broadcast against several query heads,
  `q[:, None, :] * kt[None, :, :]`, was MG204 at the arange ("this (64, 32) tensor is reshaped from
  or into a column vector"): the reshape of the masked load into the 3-D broadcast was not found
  through the load that joins it to its mask, so it did not go through SMEM as the unmasked one did."""
  rng = np.random.default_rng(0)
  for d in (32, 64):
    q = rng.standard_normal((8, d)).astype(np.float32)
    k = rng.standard_normal((64, d)).astype(np.float32)
    got = group_scores(q, k, np.array([45], np.int32), interpret=True)
    np.testing.assert_allclose(got, _group_scores_ref(q, k, 45), rtol=1e-5, atol=1e-5)
    group_scores.check(S((8, d), F32), S((64, d), F32), S((1,), jnp.int32))


@pytest.mark.gpu
def test_gpu_tile_loaded_under_an_index_mask_broadcast_into_3d():
  rng = np.random.default_rng(1)
  q = rng.standard_normal((8, 64)).astype(np.float32)
  k = rng.standard_normal((64, 64)).astype(np.float32)
  got = jax.jit(group_scores)(q, k, np.array([45], np.int32))
  np.testing.assert_allclose(got, _group_scores_ref(q, k, 45), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- float32 p @ v: the K-major hint
@mg.mgpu_kernel(out_shape=lambda p, v: S((p.shape[0], v.shape[1]), F32), grid=(1,))
def pv_f32(p, v, o):
  p_s = ml.smem(p.shape); v_s = ml.smem(v.shape)
  ml.copy(p, p_s); ml.copy(v, v_s)
  o[...] = ml.dot(p_s, v_s)


@mg.mgpu_kernel(out_shape=lambda p, v: S((p.shape[0], v.shape[1]), F32), grid=(1,))
def pv_f32_fixed(p, v, o):
  p_s = ml.smem(p.shape); v_s = ml.smem(v.shape)
  ml.copy(p, p_s); ml.copy(v, v_s)
  b_nk = ml.smem((64, 128)); b_nk[...] = v_s.T[...]
  o[...] = ml.dot(p_s, b_nk.T)


@mg.mgpu_kernel(out_shape=lambda p, v: S((p.shape[0], v.shape[1]), jnp.int32), grid=(1,))
def pv_i8(p, v, o):
  p_s = ml.smem(p.shape); v_s = ml.smem(v.shape)
  ml.copy(p, p_s); ml.copy(v, v_s)
  o[...] = ml.dot(p_s, v_s)


def test_k_major_hint_writes_no_accumulator_the_call_lacks():
  """An 8-bit `ml.dot(p_s, v_s)` with v stored (k, n) is MG501; its hint wrote `ml.dot(p_s, b_nk.T, acc)` where the
  call has no accumulator. (A float32 one was too, whose hint, followed as written, computes; since probe 67b the
  compiler writes that transpose itself, so pv_f32 computes as pv_f32_fixed does; since probe 68a an 8-bit one of n
  a multiple of 64 too, so the error stands at an n of 32, whose hint loads B transposed.)"""
  with pytest.raises(mg.MmaOperandError) as e:
    pv_i8.check(S((64, 128), jnp.int8), S((128, 32), jnp.int8))
  line, col = _line(pv_i8, "ml.dot(p_s, v_s)")
  assert (e.value.lineno, e.value.col_offset) == (line, col)
  assert "b must be stored (n, k) and passed transposed; v_s is stored (k, n)" in str(e.value)
  assert "ml.dot(p_s, bt_s.T)" in e.value.hint
  assert ", acc)" not in e.value.hint
  r8 = np.random.default_rng(3)
  p8, v8 = r8.integers(-128, 128, (64, 128)).astype(np.int8), r8.integers(-128, 128, (128, 64)).astype(np.int8)
  np.testing.assert_array_equal(pv_i8(p8, v8, interpret=True), p8.astype(np.int64) @ v8.astype(np.int64))
  rng = np.random.default_rng(2)
  p = rng.random((64, 128)).astype(np.float32)
  v = rng.standard_normal((128, 64)).astype(np.float32)
  for kernel in (pv_f32_fixed, pv_f32):
    np.testing.assert_allclose(kernel(p, v, interpret=True), p @ v, rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- ragged keys at head_dim 256: the padding hint
def _attn_ref(q, k, v):
  s = np.einsum("qd,kd->qk", np.float32(q), np.float32(k)) / math.sqrt(q.shape[-1])
  p = np.exp(s - s.max(1, keepdims=True))
  return (p / p.sum(1, keepdims=True)) @ np.float32(v)


@mg.mgpu_kernel(out_shape=lambda q, k, v, **kw: S(q.shape, F32), grid=lambda q, k, v, **kw: (q.shape[0] // 64,))
def ragged_keys(q, k, v, o, *, skv: ml.constexpr = 0):
  i = ml.program_id(0)
  n = skv if skv else k.shape[0]
  q_s = ml.smem((64, q.shape[1])); k_s = ml.smem((64, q.shape[1])); v_s = ml.smem((64, q.shape[1]))
  ml.copy(q.at[ml.ds(i * 64, 64), :], q_s)
  m = ml.full((64,), -1e30, F32)
  l = ml.zeros((64,), F32)
  acc = ml.zeros((64, q.shape[1]), F32)
  for j in ml.static_range(ml.cdiv(n, 64)):
    ml.copy(k.at[ml.ds(j * 64, 64), :], k_s)
    ml.copy(v.at[ml.ds(j * 64, 64), :], v_s)
    s = ml.dot(q_s, k_s.T) * (1.0 / math.sqrt(q.shape[1]))
    s = ml.where((j * 64 + ml.arange(64))[None, :] < n, s, -1e30)
    m_new = ml.maximum(m, ml.max(s, axis=1))
    alpha = ml.exp(m - m_new)
    p = ml.exp(s - m_new[:, None])
    l = l * alpha + ml.sum(p, axis=1)
    acc = ml.dot(p.astype(q.dtype), v_s, acc * alpha[:, None])
    m = m_new
  o.at[ml.ds(i * 64, 64), :][...] = acc / l[:, None]


def test_padding_hint_for_ragged_keys_says_to_mask_by_the_real_length():
  """Keys of a head_dim-256 tile (two 128-byte tiles wide) need whole 8-row tiles: MG401's hint padded
  k with zero rows, and a kernel masking by k.shape[0] then counted them (score 0, not -inf): silently
  wrong when followed. It now says to mask by the real length; followed so, the result is jnp's. (Since
  probe 46c the 150 keys are copied a row of tiles a TMA: the kernel computes unpadded too.)"""
  F16 = jnp.float16
  ragged_keys.check(S((128, 256), F16), S((150, 256), F16), S((150, 256), F16))
  rng = np.random.default_rng(3)
  q, k = ((rng.standard_normal((n, 256)) * 0.25).astype(F16) for n in (128, 150))
  v = (rng.standard_normal((150, 256)) + 4).astype(F16)       # (zero rows of v then pull the mean down)
  np.testing.assert_allclose(ragged_keys(q, k, v, interpret=True), _attn_ref(q, k, v), rtol=0, atol=1e-2)
  pad = ((0, 2), (0, 0))
  got = ragged_keys(q, np.pad(k, pad), np.pad(v, pad), skv=150, interpret=True)
  np.testing.assert_allclose(got, _attn_ref(q, k, v), rtol=0, atol=1e-2)
  wrong = ragged_keys(q, np.pad(k, pad), np.pad(v, pad), interpret=True)     # masking by k.shape[0]
  assert np.abs(np.asarray(wrong) - _attn_ref(q, k, v)).max() > 3e-2


# ---------------------------------------------------------------- float32 (TF32) flash attention: p @ v
def _flash_f32(pv):
  @mg.mgpu_kernel(out_shape=lambda q, k, v: S(q.shape, F32), grid=lambda q, k, v: (q.shape[0] // 64,))
  def flash(q, k, v, o):
    i = ml.program_id(0)
    q_s = ml.smem((64, 64)); k_s = ml.smem((64, 64)); v_s = ml.smem((64, 64))
    ml.copy(q.at[ml.ds(i * 64, 64), :], q_s)
    m = ml.full((64,), -1e30, F32)
    l = ml.zeros((64,), F32)
    acc = ml.zeros((64, 64), F32)
    for j in ml.range(k.shape[0] // 64, stages=2):
      ml.copy(k.at[ml.ds(j * 64, 64), :], k_s)
      ml.copy(v.at[ml.ds(j * 64, 64), :], v_s)
      s = ml.dot(q_s, k_s.T) * 0.125
      m_new = ml.maximum(m, ml.max(s, axis=1))
      alpha = ml.exp(m - m_new)
      p = ml.exp(s - m_new[:, None])
      l = l * alpha + ml.sum(p, axis=1)
      acc = pv(p, v_s, acc * alpha[:, None])
      m = m_new
    o.at[ml.ds(i * 64, 64), :][...] = acc / l[:, None]
  return flash


@ml.inline
def _pv_registers(p, v_s, acc):
  return ml.dot(p, v_s, acc)


@ml.inline
def _pv_as_hinted(p, v_s, acc):
  p_s = ml.smem((64, 64), F32)
  p_s[...] = p
  v_s_nk = ml.smem((64, 64), F32)
  v_s_nk[...] = v_s.T[...]
  return ml.dot(p_s, v_s_nk.T, acc)


flash_f32 = _flash_f32(_pv_registers)
flash_f32_hinted = _flash_f32(_pv_as_hinted)


def test_tf32_register_a_hint_transposes_a_k_by_n_b_once():
  """float32 p from registers was MG106, whose hint transposed v_s once into an (n, k) buffer (its earlier hint,
  ml.dot(p_s, v_s.T), computed p @ v.T, silently wrong). Since probe 51f the compiler does what that hint wrote
  (ops/dot_staging.py, k_major_b): the kernel as written and the one written from the hint both match jnp."""
  rng = np.random.default_rng(4)
  q, k, v = (rng.standard_normal((128, 64)).astype(np.float32) for _ in range(3))
  for kernel in (flash_f32, flash_f32_hinted):
    got = kernel(q, k, v, interpret=True)
    np.testing.assert_allclose(got, _attn_ref(q, k, v), rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- decode, 8 query heads as the dot's n
@mg.mgpu_kernel(out_shape=lambda q, k, v: S((q.shape[1], q.shape[0]), F32), grid=(1,))
def decode_heads_on_n(q, k, v, o):
  q_s = ml.smem(q.shape); k_s = ml.smem(k.shape); v_s = ml.smem(v.shape)
  p_s = ml.smem((q.shape[0], k.shape[0]), q.dtype)
  ml.copy(q, q_s); ml.copy(k, k_s); ml.copy(v, v_s)
  st = ml.dot(k_s, q_s.T)                         # (keys, heads): 8 heads as n, as language.md allows
  p = ml.exp(st - ml.max(st, axis=0)[None, :])
  p_s[...] = p.T.astype(q.dtype)
  o[...] = ml.dot(v_s.T, p_s.T) / ml.sum(p, axis=0)[None, :]


def test_computed_narrow_b_is_not_hinted_a_tma_fill():
  """Decode's probabilities for 8 heads, stored (8, keys) from registers into a buffer ml.dot reads,
  are MG204 (registers fill such a buffer 64 rows at a time). The hint offered a TMA fill from the
  transposed array, which a tile computed in the kernel does not have; it is offered for data read from
  memory only (test_probe37d's v_s.T[...] keeps it)."""
  with pytest.raises(mg.LayoutError) as e:
    decode_heads_on_n.check(S((8, 64), jnp.float16), S((64, 64), jnp.float16), S((64, 64), jnp.float16))
  line, col = _line(decode_heads_on_n, "p.T.astype(q.dtype)")
  assert (e.value.lineno, e.value.col_offset) == (line, col)
  assert str(e.value).splitlines()[0].endswith(
      "p.T.astype(q.dtype) of shape (8, 64) moves between registers and p_s, which ml.dot reads (tiled for the tensor cores), so"
      " it takes the tensor-core (WGMMA) layout: it must be 2-D with rows a multiple of 64 (64 per warpgroup)"
      " and columns a multiple of 8 [MG204]")
  assert e.value.hint == "give p_s a multiple of 64 rows"


@mg.mgpu_kernel(out_shape=lambda q, k, v: S((q.shape[1], q.shape[0]), F32), grid=(1,))
def decode_heads_transposed(q, k, v, o):
  q_s = ml.smem(q.shape); k_s = ml.smem(k.shape); v_s = ml.smem(v.shape)
  p_s = ml.smem((q.shape[0], k.shape[0]), q.dtype)
  ml.copy(q, q_s); ml.copy(k, k_s); ml.copy(v, v_s)
  s = ml.dot(k_s, q_s.T).T                        # (heads, keys)
  m = ml.max(s, axis=1)
  p = ml.exp(s - m[:, None])
  p_s[...] = p.astype(q.dtype)
  o[...] = ml.dot(v_s.T, p_s.T) / ml.sum(p, axis=1)[None, :]


def test_statistic_of_a_narrow_tile_stored_for_a_dot_reports_the_store():
  """The same decode with the scores transposed back, (heads, keys): MG204 named the row max m at its
  reduction, "m of shape (8,) meets a tensor-core result", with the hint "keep values that combine with
  ml.dot results in the dot's (m, n) tile shape". What ties m to the tensor cores is p's store into p_s:
  that store is reported, as when the statistic is not involved."""
  with pytest.raises(mg.LayoutError) as e:
    decode_heads_transposed.check(S((8, 64), jnp.float16), S((64, 64), jnp.float16), S((64, 64), jnp.float16))
  line, col = _line(decode_heads_transposed, "p.astype(q.dtype)")
  assert (e.value.lineno, e.value.col_offset) == (line, col)
  assert str(e.value).splitlines()[0].endswith(
      "p.astype(q.dtype) of shape (8, 64) moves between registers and p_s, which ml.dot reads (tiled for the"
      " tensor cores), so it takes the tensor-core (WGMMA) layout: it must be 2-D with rows a multiple of 64"
      " (64 per warpgroup) and columns a multiple of 8 [MG204]")
  assert e.value.hint == "give p_s a multiple of 64 rows"


# ---------------------------------------------------------------- a statistic broadcast explicitly the other way, inline
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def minus_row_max_per_column(x, o):
  t = x[...]
  o[...] = t - ml.max(t, axis=1)[None, :]


def test_statistic_written_inline_with_its_orientation_gets_a_copy():
  """`t - ml.max(t, axis=1)[None, :]` writes its orientation out, as `mx[None, :]` of a named `mx` does
  (which compiled: the use reads a copy through SMEM); inline it was MG204 with a hint to write
  `[:, None]`: the check for a written-out orientation compared the expression's spaces with a line
  stripped of them. Now both forms compile to jnp's result."""
  x = np.random.default_rng(5).standard_normal((64, 64)).astype(np.float32)
  np.testing.assert_array_equal(minus_row_max_per_column(x, interpret=True), x - x.max(1)[None, :])
  minus_row_max_per_column.check(S((64, 64), F32))


@pytest.mark.gpu
def test_gpu_statistic_written_inline_with_its_orientation_gets_a_copy():
  x = np.random.default_rng(6).standard_normal((64, 64)).astype(np.float32)
  np.testing.assert_array_equal(jax.jit(minus_row_max_per_column)(x), x - x.max(1)[None, :])


# ---------------------------------------------------------------- p @ v summed over a middle axis in registers
@mg.mgpu_kernel(out_shape=lambda p, v: S((p.shape[0], v.shape[1]), F32), grid=(1,))
def pv_middle_axis(p, v, o):
  o[...] = ml.sum(p[...][:, :, None] * v[...][None, :, :], axis=1)


def test_middle_axis_reduction_overflow_is_hinted_in_its_own_words():
  """A decode's `ml.sum(p[:, :, None] * v[None, :, :], axis=1)` over (8, 64, 128) is MG402; its hint
  said "scan fewer rows per program, or scan blocks of columns in a loop", of a scan the kernel does not
  write. It now names the middle-axis reduction and that the product is a @ b, for ml.dot; a small one
  still compiles and matches jnp."""
  with pytest.raises(mg.SmemCapacityError) as e:
    pv_middle_axis.check(S((8, 64), F32), S((64, 128), F32))
  line, col = _line(pv_middle_axis, "ml.sum(")
  assert (e.value.lineno, e.value.col_offset) == (line, col)
  assert "(middle-axis reduction scratch 258 KiB, " in str(e.value)
  assert e.value.hint.startswith("reduce fewer elements per program (a smaller tile, or one static slice of the"
                                 " leading axis at a time): a reduction over the middle axis of a 3-D tensor")
  assert "is a @ b, which ml.dot computes on the tensor cores" in e.value.hint and "scan fewer rows" not in e.value.hint
  rng = np.random.default_rng(7)
  p, v = rng.random((8, 16)).astype(np.float32), rng.standard_normal((16, 32)).astype(np.float32)
  np.testing.assert_allclose(pv_middle_axis(p, v, interpret=True), p @ v, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- head_dim 96: the padding hint keeps the scale
@mg.mgpu_kernel(out_shape=lambda q, k, v, **kw: S(q.shape, F32), grid=lambda q, k, v, **kw: (q.shape[0] // 64,))
def head_dim_scores(q, k, v, o, *, d: ml.constexpr = 0):
  i = ml.program_id(0)
  scale = 1.0 / math.sqrt(d or q.shape[1])
  q_s = ml.smem((64, q.shape[1])); k_s = ml.smem(k.shape); v_s = ml.smem(v.shape)
  ml.copy(q.at[ml.ds(i * 64, 64), :], q_s); ml.copy(k, k_s); ml.copy(v, v_s)
  s = ml.dot(q_s, k_s.T) * scale
  p = ml.exp(s - ml.max(s, axis=1)[:, None])
  o.at[ml.ds(i * 64, 64), :][...] = ml.dot(p.astype(q.dtype), v_s) / ml.sum(p, axis=1)[:, None]


def test_head_dim_padding_hint_keeps_the_real_scale():
  """A head_dim that is no multiple of 16 in bfloat16 (40) is MG501 (k a multiple of 32 bytes); its hint padded
  it with zeros, and a scale taken from the shape, 1 / math.sqrt(q.shape[-1]), then changed with it: silently
  wrong when followed. The hint now keeps 1 / math.sqrt(40) and slices the padded columns off; followed so,
  the result is jnp's. (head_dim 96, this test's case until the narrower swizzles, now computes as it is.)"""
  BF16 = jnp.bfloat16
  rng = np.random.default_rng(8)
  q, k, v = (rng.standard_normal((64, 40)).astype(BF16) for _ in range(3))
  # (the kernel as written was MG501 until probe 47e, which pads the 40 columns with zeros in registers)
  np.testing.assert_allclose(np.asarray(head_dim_scores(q, k, v, interpret=True)), _attn_ref(q, k, v),
                             rtol=3e-2, atol=3e-2)
  pad = ((0, 0), (0, 8))
  got = np.asarray(head_dim_scores(np.pad(q, pad), np.pad(k, pad), np.pad(v, pad), d=40, interpret=True))[:, :40]
  np.testing.assert_allclose(got, _attn_ref(q, k, v), rtol=3e-2, atol=3e-2)
  wrong = np.asarray(head_dim_scores(np.pad(q, pad), np.pad(k, pad), np.pad(v, pad), interpret=True))[:, :40]
  assert np.abs(wrong - _attn_ref(q, k, v)).max() > 3e-2          # the scale of the padded shape
  q, k, v = (rng.standard_normal((64, 96)).astype(BF16) for _ in range(3))
  np.testing.assert_allclose(np.asarray(head_dim_scores(q, k, v, interpret=True)), _attn_ref(q, k, v),
                             rtol=3e-2, atol=3e-2)


# ---------------------------------------------------------------- key blocks walked by a carried start
def _walk_keys(step):
  @mg.mgpu_kernel(out_shape=lambda q, k, v, lens: S(q.shape, F32), grid=lambda q, k, v, lens: (q.shape[0] // 64,))
  def walk(q, k, v, lens, o):
    i = ml.program_id(0)
    q_s = ml.smem((64, 128)); k_s = ml.smem((64, 128)); v_s = ml.smem((64, 128))
    ml.copy(q.at[ml.ds(i * 64, 64), :], q_s)
    n = lens[0]
    m = ml.full((64,), -1e30, F32)
    l = ml.zeros((64,), F32)
    acc = ml.zeros((64, 128), F32)
    start = 0
    while start < n:
      ml.copy(k.at[ml.ds(start, 64), :], k_s)
      ml.copy(v.at[ml.ds(start, 64), :], v_s)
      s = ml.dot(q_s, k_s.T) * (1.0 / math.sqrt(128))
      s = ml.where((start + ml.arange(64))[None, :] < n, s, -1e30)
      m_new = ml.maximum(m, ml.max(s, axis=1))
      alpha = ml.exp(m - m_new)
      p = ml.exp(s - m_new[:, None])
      l = l * alpha + ml.sum(p, axis=1)
      acc = ml.dot(p.astype(q.dtype), v_s, acc * alpha[:, None])
      m = m_new
      start += step
    o.at[ml.ds(i * 64, 64), :][...] = acc / l[:, None]
  return walk


walk_keys = _walk_keys(64)
walk_keys_odd = _walk_keys(60)


@mg.mgpu_kernel(out_shape=lambda k: S((64, 128), F32), grid=(1,))
def sum_key_blocks(k, o):
  k_s = ml.smem((64, 128))
  acc = ml.zeros((64, 128), F32)
  off = 0
  for _ in range(k.shape[0] // 64):
    ml.copy(k.at[ml.ds(off, 64), :], k_s)
    acc = acc + k_s[...].astype(F32)
    off = off + 64
  o[...] = acc


def test_window_start_carried_by_a_loop_is_proven_a_tile_multiple():
  """`start = 0` then `start += 64` in a while loop over key blocks (head_dim 128, a tiled K buffer) was
  MG401 "not provably a multiple of 8": the divisibility of window starts did not follow loop carries.
  A carry is now a multiple of what its start is and each update keeps; a step of 60 still is not (a for
  loop's `off + 64`, which its values over the grid proved before, still compiles): since probe 46c such a
  load goes a row of tiles a TMA, where a proven start keeps one TMA a tile."""
  F16 = jnp.float16
  rng = np.random.default_rng(9)
  q, k, v = (rng.standard_normal((128, 128)).astype(F16) for _ in range(3))
  got = walk_keys(q, k, v, np.array([100], np.int32), interpret=True)
  np.testing.assert_allclose(got, _attn_ref(q, k[:100], v[:100]), rtol=2e-2, atol=2e-2)
  walk_keys.check(S((128, 128), F16), S((128, 128), F16), S((128, 128), F16), S((1,), jnp.int32))
  kk = rng.standard_normal((256, 128)).astype(F16)
  np.testing.assert_allclose(sum_key_blocks(kk, interpret=True), np.float32(kk).reshape(4, 64, 128).sum(0), rtol=1e-5)
  sum_key_blocks.check(S((256, 128), F16))
  specs = [S((128, 128), F16)] * 3 + [S((1,), jnp.int32)]
  tma = lambda kernel: kernel.mlir(*specs).count("nvvm.cp.async.bulk.tensor.shared.cluster.global")
  assert tma(walk_keys_odd) == tma(walk_keys) + 14      # K's and V's loads by 8 rows of tiles, not one TMA each


@pytest.mark.gpu
def test_gpu_window_start_carried_by_a_loop():
  F16 = jnp.float16
  rng = np.random.default_rng(10)
  q, k, v = (rng.standard_normal((128, 128)).astype(F16) for _ in range(3))
  got = jax.jit(walk_keys)(q, k, v, np.array([100], np.int32))
  np.testing.assert_allclose(got, _attn_ref(q, k[:100], v[:100]), rtol=2e-2, atol=2e-2)
  kk = rng.standard_normal((256, 128)).astype(F16)
  np.testing.assert_allclose(jax.jit(sum_key_blocks)(kk), np.float32(kk).reshape(4, 64, 128).sum(0), rtol=1e-4)


@mg.mgpu_kernel(out_shape=lambda p, v: S((p.shape[0], v.shape[1]), F32), grid=(1,))
def pv_f32_narrow(p, v, o):
  v_s = ml.smem(v.shape)
  ml.copy(v, v_s)
  o[...] = ml.dot(p[...], v_s)


@mg.mgpu_kernel(out_shape=lambda p, vt: S((p.shape[0], vt.shape[0]), F32), grid=(1,))
def pv_f32_narrow_hinted(p, vt, o):
  p_s = ml.smem(p.shape, F32); bt_s = ml.smem(vt.shape)
  ml.copy(vt, bt_s)
  p_s[...] = p[...]
  o[...] = ml.dot(p_s, bt_s.T)


def test_tf32_hint_for_a_narrow_b_loads_it_transposed():
  """With head_dim 32 (n = 32) the transposed copy the MG106 hint had written, an (n, k) buffer filled from
  registers, is no buffer registers fill (64 rows at a time), so the hint loaded the (32, 64) tile from the
  transposed array. Since probe 51f the compiler pads v_s's tile in registers to 64 columns instead (the register-B
  path of probe 49a): the kernel as written and the one written from that hint both match jnp."""
  rng = np.random.default_rng(11)
  p, v = rng.random((64, 64)).astype(np.float32), rng.standard_normal((64, 32)).astype(np.float32)
  np.testing.assert_allclose(pv_f32_narrow(p, v, interpret=True), p @ v, rtol=2e-2, atol=2e-2)
  np.testing.assert_allclose(pv_f32_narrow_hinted(p, v.T.copy(), interpret=True), p @ v, rtol=2e-2, atol=2e-2)
