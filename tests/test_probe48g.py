"""Probe 48g: Liger-Kernel, Unsloth, Triton-tutorial and flash-linear-attention kernels ported whole.

Masked tiles of few heads: Triton's `x.at[t, heads[:, None], d[None, :]]` loaded with `mask=(heads[:, None] < n_kh) &
(d[None, :] < hd // 2)`, a (2, 32), (3, 32) or (3, 64) tile (Liger's RoPE with 2 KV heads and a head_dim of 64, as
Qwen2-0.5B's; a GQA group of 3 query heads; a per-head QK-norm over 3 heads of 32), was MG204 wherever a row of cos, a
weight or a row statistic was broadcast along it, while the same window read whole computed padded. Such masked
loads and stores are now read and written padded in the padded trace (frontend/ops/padded_masks.py).

Triton's spellings with one meaning: `tl.math.tanh(x)`, `tl.extra.cuda.libdevice.*`, `tl.debug_barrier()` and
`x_ptr.dtype.element_ty`, which every Liger kernel writes, were MG002 hints; they are now what they mean
(frontend/triton_math.py); so was `tl.range(..., num_stages=s)` (the tutorials' persistent softmax), now stages=
where the loop makes TMA loads and nothing where it makes none; so were `tl.static_assert` and tl.load's and tl.store's
cache options (`eviction_policy=`, `cache_modifier=`), now Python's assert and dropped."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as tl
from locate import expect

S = jax.ShapeDtypeStruct
F32, F16, BF16 = jnp.float32, jnp.float16, jnp.bfloat16


def _rnd(shape, seed, dtype=np.float32):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def _export(kernel, *args, **kw):
  specs = [S(np.shape(a), a.dtype) for a in args]
  kernel.check(*specs, **kw)
  return str(jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*specs).mlir_module())


def _close(got, want, tol):
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=tol, atol=tol)


def _rope_ref(x, cos, sin, sign=1.0):
  g = jnp.asarray(x, F32)
  d = g.shape[-1] // 2
  c, s = jnp.asarray(cos, F32)[:, None, :], sign * jnp.asarray(sin, F32)[:, None, :]
  return jnp.concatenate([g[..., :d] * c - g[..., d:] * s, g[..., d:] * c + g[..., :d] * s], -1).astype(x.dtype)


# ---------------------------------------------------------------- Liger's RoPE, q and k in place, 2 KV heads of 64
@mg.mgpu_kernel(out_shape=lambda q, k, cos, sin, **kw: (q, k), grid=lambda q, k, cos, sin, **kw: (q.shape[0] * q.shape[1],),
                input_output_aliases={0: 0, 1: 1})
def liger_rope(q_ptr, k_ptr, cos_ptr, sin_ptr, qo_ptr, ko_ptr, *, pad_n_qh: tl.constexpr, pad_n_kh: tl.constexpr,
               pad_hd: tl.constexpr):
  pid = tl.program_id(0).to(tl.int64)
  sl, n_qh, n_kh, hd = q_ptr.shape[1], q_ptr.shape[2], k_ptr.shape[2], q_ptr.shape[3]
  b = pid // sl
  t = pid % sl
  cos_offsets = tl.arange(0, pad_hd // 2)
  cos_mask = cos_offsets < hd // 2
  cos_row = tl.load(cos_ptr.at[t, cos_offsets], mask=cos_mask, other=0)
  sin_row = tl.load(sin_ptr.at[t, cos_offsets], mask=cos_mask, other=0)
  qh = tl.arange(0, pad_n_qh)[:, None]
  kh = tl.arange(0, pad_n_kh)[:, None]
  d = tl.arange(0, pad_hd // 2)[None, :]
  q_mask = (qh < n_qh) & (d < hd // 2)
  k_mask = (kh < n_kh) & (d < hd // 2)
  q1 = tl.load(q_ptr.at[b, t, qh, d], mask=q_mask, other=0).to(sin_row.dtype)
  k1 = tl.load(k_ptr.at[b, t, kh, d], mask=k_mask, other=0).to(sin_row.dtype)
  q2 = tl.load(q_ptr.at[b, t, qh, d + hd // 2], mask=q_mask, other=0).to(sin_row.dtype)
  k2 = tl.load(k_ptr.at[b, t, kh, d + hd // 2], mask=k_mask, other=0).to(sin_row.dtype)
  tl.store(qo_ptr.at[b, t, qh, d], (q1 * cos_row - q2 * sin_row).to(qo_ptr.dtype), mask=q_mask)
  tl.store(qo_ptr.at[b, t, qh, d + hd // 2], (q2 * cos_row + q1 * sin_row).to(qo_ptr.dtype), mask=q_mask)
  tl.store(ko_ptr.at[b, t, kh, d], (k1 * cos_row - k2 * sin_row).to(ko_ptr.dtype), mask=k_mask)
  tl.store(ko_ptr.at[b, t, kh, d + hd // 2], (k2 * cos_row + k1 * sin_row).to(ko_ptr.dtype), mask=k_mask)


def test_liger_rope_with_two_kv_heads_of_64():
  q, k = _rnd((1, 7, 14, 64), 1, BF16), _rnd((1, 7, 2, 64), 2, BF16)       # Qwen2-0.5B: 14 query heads, 2 KV heads
  cos, sin = _rnd((7, 32), 3), _rnd((7, 32), 4)
  kw = dict(pad_n_qh=16, pad_n_kh=2, pad_hd=64)
  qo, ko = liger_rope(q, k, cos, sin, interpret=True, **kw)
  _close(qo, _rope_ref(q, cos, sin), 2e-2)
  _close(ko, _rope_ref(k, cos, sin), 2e-2)
  assert "mosaic_gpu" in _export(liger_rope, q, k, cos, sin, **kw)
  ir = liger_rope.typed_ir(*[S(a.shape, a.dtype) for a in (q, k, cos, sin)], **kw)
  assert "gather" not in ir and "atomic" not in ir


# ---------------------------------------------------------------- the backward, in place, 2 and 3 heads
@mg.mgpu_kernel(out_shape=lambda dk, cos, sin, **kw: dk, grid=lambda dk, cos, sin, **kw: (dk.shape[0],),
                input_output_aliases={0: 0})
def rope_backward(dk_ptr, cos_ptr, sin_ptr, o_ptr, *, pad_n_kh: tl.constexpr):
  t = tl.program_id(0)
  n_kh, hd = dk_ptr.shape[1], dk_ptr.shape[2]
  offs = tl.arange(0, hd // 2)
  cos_row = tl.load(cos_ptr.at[t, offs])
  sin_row = tl.load(sin_ptr.at[t, offs])
  heads = tl.arange(0, pad_n_kh)[:, None]
  m = heads < n_kh
  k1 = tl.load(dk_ptr.at[t, heads, offs[None, :]], mask=m, other=0).to(tl.float32)
  k2 = tl.load(dk_ptr.at[t, heads, offs[None, :] + hd // 2], mask=m, other=0).to(tl.float32)
  tl.store(o_ptr.at[t, heads, offs[None, :]], (k1 * cos_row + k2 * sin_row).to(o_ptr.dtype), mask=m)
  tl.store(o_ptr.at[t, heads, offs[None, :] + hd // 2], (k2 * cos_row - k1 * sin_row).to(o_ptr.dtype), mask=m)


# ---------------------------------------------------------------- a mistake still fails: a mask on past the heads
@mg.mgpu_kernel(out_shape=lambda x, c: x, grid=lambda x, c: (x.shape[0],))
def three_of_two_heads(x_ptr, c_ptr, o_ptr):
  t = tl.program_id(0)
  h = tl.arange(0, 3)
  d = tl.arange(0, 32)
  m = (h[:, None] < 3) & (d[None, :] < 32)
  c = tl.load(c_ptr.at[t, d])
  v = tl.load(x_ptr.at[t, h[:, None], d[None, :]], mask=m, other=0.0)
  tl.store(o_ptr.at[t, h[:, None], d[None, :]], v * c, mask=h[:, None] < 2)


def test_rope_backward_in_place_over_two_and_three_heads():
  for n_kh, pad, seed in ((2, 2, 5), (3, 3, 6)):
    dk, cos, sin = _rnd((6, n_kh, 64), seed, F16), _rnd((6, 32), 7), _rnd((6, 32), 8)
    _close(rope_backward(dk, cos, sin, pad_n_kh=pad, interpret=True), _rope_ref(dk, cos, sin, -1.0), 2e-2)
    assert "mosaic_gpu" in _export(rope_backward, dk, cos, sin, pad_n_kh=pad)
  # a mask on past the array's heads is still the user's mistake, at the load
  x, c = _rnd((3, 2, 32), 12), _rnd((3, 32), 13)
  expect(three_of_two_heads, [S(x.shape, F32), S(c.shape, F32)], mg.IndexOutOfBoundsError, "tl.load(x_ptr",
         "this masked load touches x_ptr[0:1, 0:3, 0:32] in program (0, 0, 0) where its mask is on, outside"
         " x_ptr's shape (3, 2, 32)",
         hint="make the mask false past x_ptr's end: compare the offsets along dimension 1 with x_ptr.shape[1]"
              " (offs < x_ptr.shape[1]), or pass a longer x_ptr")


# ---------------------------------------------------------------- a row statistic of few heads; a GQA group's softmax
@mg.mgpu_kernel(out_shape=lambda k, w, **kw: k, grid=lambda k, w, **kw: (k.shape[0],))
def qk_norm(k_ptr, w_ptr, o_ptr, *, PAD_H: tl.constexpr, eps: tl.constexpr = 1e-6):
  t = tl.program_id(0)
  nh, hd = k_ptr.shape[1], k_ptr.shape[2]
  h = tl.arange(0, PAD_H)
  d = tl.arange(0, hd)
  m = (h[:, None] < nh) & (d[None, :] < hd)
  x = tl.load(k_ptr.at[t, h[:, None], d[None, :]], mask=m, other=0.0).to(tl.float32)
  w = tl.load(w_ptr.at[d]).to(tl.float32)
  var = tl.sum(x * x, axis=1) / hd
  y = x * tl.rsqrt(var + eps)[:, None] * w[None, :]
  tl.store(o_ptr.at[t, h[:, None], d[None, :]], y.to(o_ptr.dtype), mask=m)


@mg.mgpu_kernel(out_shape=lambda s, **kw: s, grid=lambda s, **kw: (s.shape[0],))
def group_softmax(s_ptr, o_ptr, *, G: tl.constexpr, BLOCK_N: tl.constexpr):
  b = tl.program_id(0)
  g = tl.arange(0, G)
  n = tl.arange(0, BLOCK_N)
  m = (g[:, None] < s_ptr.shape[1]) & (n[None, :] < s_ptr.shape[2])
  s = tl.load(s_ptr.at[b, g[:, None], n[None, :]], mask=m, other=float("-inf"))
  p = tl.exp(s - tl.max(s, axis=1)[:, None])
  tl.store(o_ptr.at[b, g[:, None], n[None, :]], p / tl.sum(p, axis=1)[:, None], mask=m)


@mg.mgpu_kernel(out_shape=lambda x, keep: x, grid=lambda x, keep: (x.shape[0],))
def kept_heads(x_ptr, keep_ptr, o_ptr):
  t = tl.program_id(0)
  h = tl.arange(0, 2)[:, None]
  d = tl.arange(0, 32)[None, :]
  ok = tl.load(keep_ptr.at[t, h, d]) != 0          # a mask of data, read whole beside the window
  c = tl.load(x_ptr.at[t, 0, tl.arange(0, 32)])
  v = tl.load(x_ptr.at[t, h, d], mask=ok, other=0.0)
  tl.store(o_ptr.at[t, h, d], v * c)


def test_row_statistics_of_a_masked_tile_of_few_heads():
  k, w = _rnd((5, 3, 32), 9, BF16), _rnd((32,), 10, BF16)
  x = jnp.asarray(k, F32)
  want = (x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6) * jnp.asarray(w, F32)).astype(BF16)
  _close(qk_norm(k, w, PAD_H=3, interpret=True), want, 2e-2)
  assert "mosaic_gpu" in _export(qk_norm, k, w, PAD_H=3)
  s = _rnd((4, 3, 40), 11)
  got = group_softmax(s, G=3, BLOCK_N=64, interpret=True)
  np.testing.assert_allclose(np.asarray(got), jax.nn.softmax(s, -1), rtol=1e-5, atol=1e-6)
  assert "mosaic_gpu" in _export(group_softmax, s, G=3, BLOCK_N=64)
  x, keep = _rnd((4, 2, 32), 14), jnp.asarray(np.random.default_rng(15).integers(0, 2, (4, 2, 32)), jnp.int32)
  np.testing.assert_allclose(np.asarray(kept_heads(x, keep, interpret=True)), np.where(keep != 0, x, 0) * x[:, :1, :],
                             rtol=1e-6, atol=1e-7)
  assert "mosaic_gpu" in _export(kept_heads, x, keep)


# ---------------------------------------------------------------- Liger's cross-entropy as written: debug_barrier, element_ty
@mg.mgpu_kernel(out_shape=lambda X, Y, **k: (X, S((X.shape[0],), F32)), grid=lambda X, Y, **k: (X.shape[0],),
                input_output_aliases={0: 0})
def liger_cross_entropy(X_ptr, Y_ptr, dX_ptr, loss_ptr, *, n_non_ignore: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                        ignore_index: tl.constexpr = -100):
  program_id = tl.program_id(0).to(tl.int64)
  n_cols = X_ptr.shape[1]
  y = tl.load(Y_ptr.at[program_id])
  if y == ignore_index:
    for i in range(0, n_cols, BLOCK_SIZE):
      X_offsets = i + tl.arange(0, BLOCK_SIZE)
      tl.store(dX_ptr.at[program_id, X_offsets], 0.0, mask=X_offsets < n_cols)
    tl.store(loss_ptr.at[program_id], 0.0)
    return
  m = float("-inf")
  d = 0.0
  ori_X_y = tl.load(X_ptr.at[program_id, y]).to(tl.float32)
  for i in range(0, n_cols, BLOCK_SIZE):
    X_offsets = i + tl.arange(0, BLOCK_SIZE)
    X_block = tl.load(X_ptr.at[program_id, X_offsets], mask=X_offsets < n_cols, other=float("-inf")).to(tl.float32)
    m_new = tl.maximum(m, tl.max(X_block))
    d = d * tl.exp(m - m_new) + tl.sum(tl.exp(X_block - m_new))
    m = m_new
  for i in range(0, n_cols, BLOCK_SIZE):
    X_offsets = i + tl.arange(0, BLOCK_SIZE)
    X_block = tl.load(X_ptr.at[program_id, X_offsets], mask=X_offsets < n_cols, other=float("-inf")).to(tl.float32)
    X_block = tl.math.exp(X_block - m) / d / n_non_ignore
    tl.store(dX_ptr.at[program_id, X_offsets], X_block.to(dX_ptr.dtype.element_ty), mask=X_offsets < n_cols)
  tl.debug_barrier()
  X_y = tl.load(dX_ptr.at[program_id, y]).to(tl.float32) - 1.0 / n_non_ignore
  tl.store(dX_ptr.at[program_id, y], X_y.to(dX_ptr.dtype.element_ty))
  tl.store(loss_ptr.at[program_id], (m + tl.math.log(d) - ori_X_y) / n_non_ignore)


def test_liger_cross_entropy_as_written_with_debug_barrier_and_element_ty():
  X = _rnd((4, 1000), 30, BF16)
  Y = jnp.asarray([3, -100, 999, 17], jnp.int32)
  dX, loss = liger_cross_entropy(X, Y, n_non_ignore=3, BLOCK_SIZE=512, interpret=True)
  Xf, keep = jnp.asarray(X, F32), (Y != -100)[:, None]
  g = jnp.where(keep, (jax.nn.softmax(Xf, 1) - jax.nn.one_hot(jnp.maximum(Y, 0), 1000)) / 3, 0.0)
  want = jnp.where(Y != -100, jax.nn.logsumexp(Xf, 1) - jnp.take_along_axis(Xf, jnp.maximum(Y, 0)[:, None], 1)[:, 0], 0) / 3
  _close(dX, g.astype(BF16), 1e-2)
  _close(loss, want, 1e-4)
  assert "mosaic_gpu" in _export(liger_cross_entropy, X, Y, n_non_ignore=3, BLOCK_SIZE=512)


# ---------------------------------------------------------------- tl.math and libdevice namespaces: GeGLU, a retention decay
@mg.mgpu_kernel(out_shape=lambda a, b, **k: b, grid=lambda a, b, **k: (a.shape[0],))
def geglu_tanh(a_ptr, b_ptr, c_ptr, *, BLOCK_SIZE: tl.constexpr):
  row = tl.program_id(0).to(tl.int64)
  cols = tl.arange(0, BLOCK_SIZE)
  mask = cols < a_ptr.shape[1]
  a = tl.load(a_ptr.at[row, cols], mask=mask, other=0).to(tl.float32)
  b = tl.load(b_ptr.at[row, cols], mask=mask, other=0)
  t = tl.math.tanh(0.7978845608028654 * (a + 0.044715 * a * a * a))
  c = (0.5 * a * (1 + t)).cast(b.dtype) * b
  tl.store(c_ptr.at[row, cols], c, mask=mask)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def decays(x_ptr, o_ptr):
  i_h = tl.program_id(0)
  b = tl.math.log2(1 - tl.math.exp2(-5 - i_h * 1.0))       # flash-linear-attention's per-head decay
  o = tl.arange(0, x_ptr.shape[1])
  v = tl.load(x_ptr.at[i_h, o])
  w = tl.extra.cuda.libdevice.tanh(v) + tl.extra.libdevice.rsqrt(v * v + 1) + tl.libdevice.fabs(v)
  tl.store(o_ptr.at[i_h, o], w * tl.math.exp2((o + 1) * b) * (x_ptr.dtype.primitive_bitwidth / 32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def libdevice_round(x, o):
  o[...] = tl.math.round(x[...])


def test_tritons_math_namespaces_are_mls_functions():
  a, b = _rnd((3, 1000), 31, BF16), _rnd((3, 1000), 32, BF16)
  want = jax.nn.gelu(jnp.asarray(a, F32), approximate=True).astype(BF16) * b
  _close(geglu_tanh(a, b, BLOCK_SIZE=1024, interpret=True), want, 3e-2)
  assert "mosaic_gpu" in _export(geglu_tanh, a, b, BLOCK_SIZE=1024)
  x = _rnd((4, 128), 33)
  bh = np.log2(1 - np.exp2(-5.0 - np.arange(4)))[:, None]
  want = (np.tanh(x) + 1 / np.sqrt(x * x + 1) + np.abs(x)) * np.exp2((np.arange(128) + 1)[None, :] * bh)
  np.testing.assert_allclose(np.asarray(decays(x, interpret=True)), want, rtol=1e-5, atol=1e-6)
  assert "mosaic_gpu" in _export(decays, x)
  # libdevice's round differs from ml.round: halves away from zero, as lax.round's default (probe 57c; it was MG002)
  x = (np.arange(128, dtype=np.float32) - 64) / 2
  np.testing.assert_array_equal(np.asarray(libdevice_round(x, interpret=True)), np.asarray(jax.lax.round(x)))


# ---------------------------------------------------------------- tl.range(..., num_stages=): the tutorial's persistent softmax
@mg.mgpu_kernel(out_shape=lambda x, **kw: x, grid=lambda x, **kw: (kw["NP"],))
def persistent_softmax(input_ptr, output_ptr, *, NP: tl.constexpr, BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr = 2):
  row_start = tl.program_id(0)
  row_step = tl.num_programs(0)
  n_rows, n_cols = input_ptr.shape
  for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    row = tl.load(input_ptr.at[row_idx, col_offsets], mask=mask, other=-float("inf"))
    numerator = tl.exp(row - tl.max(row, axis=0))
    tl.store(output_ptr.at[row_idx, col_offsets], numerator / tl.sum(numerator, axis=0), mask=mask)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32), grid=(1,))
def staged_sum(x, out):
  buf = tl.smem((128,), F32)
  acc = tl.zeros((128,), F32)
  for k in tl.range(x.shape[0] // 128, num_stages=3):
    tl.copy(x.at[tl.ds(k * 128, 128)], buf)
    acc = acc + buf[...]
  out[...] = acc


def test_num_stages_is_stages_and_nothing_where_there_is_nothing_to_pipeline():
  x = _rnd((37, 781), 35)
  got = persistent_softmax(x, NP=8, BLOCK_SIZE=1024, interpret=True)
  np.testing.assert_allclose(np.asarray(got), jax.nn.softmax(x, 1), rtol=1e-5, atol=1e-7)
  assert "mosaic_gpu" in _export(persistent_softmax, x, NP=8, BLOCK_SIZE=1024)
  x = _rnd((1024,), 36)
  np.testing.assert_allclose(np.asarray(staged_sum(x, interpret=True)), np.asarray(x).reshape(8, 128).sum(0), rtol=1e-5)
  assert "stages=3" in staged_sum.typed_ir(S((1024,), F32))


# ---------------------------------------------------------------- cache options and tl.static_assert
@mg.mgpu_kernel(out_shape=lambda a, b, **k: b, grid=lambda a, b, **k: (a.shape[0],))
def swiglu_cached(a_ptr, b_ptr, c_ptr, *, BLOCK_SIZE: tl.constexpr):
  tl.static_assert(a_ptr.shape[1] <= BLOCK_SIZE, "one block a row")
  row = tl.program_id(0).to(tl.int64)
  cols = tl.arange(0, BLOCK_SIZE)
  mask = cols < a_ptr.shape[1]
  a = tl.load(a_ptr.at[row, cols], mask=mask, other=0, eviction_policy="evict_first").to(tl.float32)
  b = tl.load(b_ptr.at[row, cols], mask=mask, other=0, cache_modifier=".cg", volatile=False)
  tl.store(c_ptr.at[row, cols], (a * tl.sigmoid(a)).cast(b.dtype) * b, mask=mask, eviction_policy="evict_last",
           cache_modifier=".wb")


@mg.mgpu_kernel(out_shape=lambda x: x)
def volatile_load(x_ptr, o_ptr):
  o_ptr[...] = tl.load(x_ptr.at[tl.arange(0, 128)], volatile=True)


def test_cache_options_are_dropped_and_static_assert_is_assert():
  a, b = _rnd((3, 1000), 40, BF16), _rnd((3, 1000), 41, BF16)
  want = jax.nn.silu(jnp.asarray(a, F32)).astype(BF16) * b
  _close(swiglu_cached(a, b, BLOCK_SIZE=1024, interpret=True), want, 2e-2)
  assert "mosaic_gpu" in _export(swiglu_cached, a, b, BLOCK_SIZE=1024)
  expect(swiglu_cached, [S((3, 1000), BF16), S((3, 1000), BF16)], mg.StaticAssertionError, "tl.static_assert(",
         "static_assert a_ptr.shape[1] <= BLOCK_SIZE failed: one block a row", BLOCK_SIZE=512,
         hint="the kernel's own check, on the shapes, dtypes and constexprs of this call: call it with arguments that"
              " satisfy it")
  # volatile=True (a load that must not be cached: a cross-program protocol) keeps its hint
  expect(volatile_load, [S((128,), F32)], mg.KernelTypeError, "tl.load(x_ptr",
         "tl.load: got an unexpected keyword argument 'volatile'",
         hint="drop volatile= (Triton's memory options; kernels take none): tl.load(ref, mask=None, other=0,"
              " boundary_check=None, padding_option=None)")


@pytest.mark.gpu
def test_masked_tiles_of_few_heads_on_the_gpu():
  q, k = _rnd((2, 9, 14, 64), 20, BF16), _rnd((2, 9, 2, 64), 21, BF16)
  cos, sin = _rnd((9, 32), 22), _rnd((9, 32), 23)
  kw = dict(pad_n_qh=16, pad_n_kh=2, pad_hd=64)
  for g, w in zip(jax.jit(lambda *a: liger_rope(*a, **kw))(q, k, cos, sin), liger_rope(q, k, cos, sin, interpret=True, **kw)):
    _close(g, w, 2e-2)
  dk = _rnd((40, 3, 64), 24, F16)
  cos, sin = _rnd((40, 32), 25), _rnd((40, 32), 26)
  _close(rope_backward(dk, cos, sin, pad_n_kh=3), rope_backward(dk, cos, sin, pad_n_kh=3, interpret=True), 2e-2)
  kk, w = _rnd((40, 3, 32), 27, BF16), _rnd((32,), 28, BF16)
  _close(qk_norm(kk, w, PAD_H=3), qk_norm(kk, w, PAD_H=3, interpret=True), 2e-2)
  s = _rnd((40, 3, 40), 29)
  _close(group_softmax(s, G=3, BLOCK_N=64), group_softmax(s, G=3, BLOCK_N=64, interpret=True), 1e-5)
  x, keep = _rnd((40, 2, 32), 38), jnp.asarray(np.random.default_rng(39).integers(0, 2, (40, 2, 32)), jnp.int32)
  _close(kept_heads(x, keep), kept_heads(x, keep, interpret=True), 1e-6)
  X = _rnd((6, 32000), 34, BF16)
  Y = jnp.asarray([3, -100, 31999, 17, 0, -100], jnp.int32)
  for g, w in zip(liger_cross_entropy(X, Y, n_non_ignore=4, BLOCK_SIZE=4096),
                  liger_cross_entropy(X, Y, n_non_ignore=4, BLOCK_SIZE=4096, interpret=True)):
    np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=2e-2, atol=1e-6)
  x = _rnd((300, 781), 37)
  _close(persistent_softmax(x, NP=16, BLOCK_SIZE=1024), jax.nn.softmax(x, 1), 1e-5)
