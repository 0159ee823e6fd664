"""Probe 53e (serving kernels as vLLM and SGLang write them in Triton): writes at computed places through the input
of an input_output_aliases pair (rotary embedding in place on q and k, penalties in place, token counts, a paged
cache written at its slots), and the halves and GPT-J pairs of a tile of few heads computed padded (`jnp.split(v, 2,
axis=-1)`, `tl.split(tl.reshape(v, (h, d // 2, 2)))`)."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from probe_util import S, export, f32

F32, F16 = jnp.float32, jnp.float16


# ------------------------------------------------- writes at computed places through an aliased input
@mg.mgpu_kernel(out_shape=lambda q, k, pos, cs: (q, k), grid=lambda q, k, pos, cs: (q.shape[0],),
                input_output_aliases={0: 0, 1: 1})
def rope_neox_inplace(q, k, pos, cs, q_out, k_out, *, HEAD: ml.constexpr = 128):
  t = ml.program_id(0)
  half = HEAD // 2
  d = ml.arange(0, half)[None, :]
  c = ml.load(cs.at[pos[t], d])
  s = ml.load(cs.at[pos[t], half + d])
  hq = ml.arange(0, q.shape[1] // HEAD)[:, None]
  x1 = ml.load(q.at[t, hq * HEAD + d])
  x2 = ml.load(q.at[t, hq * HEAD + half + d])
  ml.store(q.at[t, hq * HEAD + d], x1 * c - x2 * s)             # tl.store(q_ptr + ..., ...): through the input
  ml.store(q.at[t, hq * HEAD + half + d], x2 * c + x1 * s)
  hk = ml.arange(0, k.shape[1] // HEAD)[:, None]
  y1 = k.at[t, hk * HEAD + d].load()
  y2 = k.at[t, hk * HEAD + half + d].load()
  k.at[t, hk * HEAD + d].store(y1 * c - y2 * s)
  k.at[t, hk * HEAD + half + d].store(y2 * c + y1 * s)


def _rope_inputs(tokens=5, hq=4, hk=2, d=128, positions=32, seed=53):
  rng = np.random.default_rng(seed)
  q = rng.standard_normal((tokens, hq * d)).astype(np.float32)
  k = rng.standard_normal((tokens, hk * d)).astype(np.float32)
  pos = rng.integers(0, positions, tokens).astype(np.int32)
  ang = np.arange(positions)[:, None] / (10000 ** (np.arange(0, d, 2) / d))[None, :]
  return q, k, pos, np.concatenate([np.cos(ang), np.sin(ang)], -1).astype(np.float32)


def _rope_reference(q, k, pos, cs, d=128):
  def rot(x):
    x = x.reshape(x.shape[0], -1, d).astype(np.float64)
    c, s = cs[pos][:, None, :d // 2], cs[pos][:, None, d // 2:]
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1).reshape(x.shape[0], -1)
  return rot(q), rot(k)


def test_rotary_embedding_is_stored_in_place_through_q_and_k():
  """vLLM's Triton rotary embedding stores through q_ptr and k_ptr; ported with input_output_aliases, a store of a
  grid of heads and columns through the input q (`ml.store(q.at[t, hq * HEAD + d], ...)`) was MG003 whose hint said
  q was read-only, though a window stored through it was taken: it writes the output's memory."""
  args = _rope_inputs()
  got = rope_neox_inplace(*args, interpret=True)
  for g, r in zip(got, _rope_reference(*args)):
    np.testing.assert_allclose(f32(g), r, rtol=1e-5, atol=1e-5)
  export(rope_neox_inplace, *args)


@mg.mgpu_kernel(out_shape=lambda l, t, rep: l, grid=lambda l, t, rep: (l.shape[0],), input_output_aliases={0: 0})
def repetition_penalty(logits, tokens, rep, out):
  r = ml.program_id(0)
  ids = ml.load(tokens.at[r, ml.arange(0, tokens.shape[1])])
  v = ml.load(logits.at[r, ids])
  ml.store(logits.at[r, ids], ml.where(v > 0, v / rep[r], v * rep[r]))


@mg.mgpu_kernel(out_shape=lambda l, t, rep: l, grid=lambda l, t, rep: (l.shape[0],), input_output_aliases={0: 0})
def repetition_penalty_set(logits, tokens, rep, out):
  r = ml.program_id(0)
  ids = tokens[r, :]
  v = logits[r, ids]
  logits[r, ids] = ml.where(v > 0, v / rep[r], v * rep[r])


@mg.mgpu_kernel(out_shape=lambda l, t, rep: l, grid=lambda l, t, rep: (l.shape[0],), input_output_aliases={0: 0})
def repetition_penalty_out(logits, tokens, rep, out):
  r = ml.program_id(0)
  ids = tokens[r, :]
  v = logits[r, ids]
  out[r, ids] = ml.where(v > 0, v / rep[r], v * rep[r])


def _penalty_inputs(rows=3, vocab=1000, n=16, seed=7):
  rng = np.random.default_rng(seed)
  logits = rng.standard_normal((rows, vocab)).astype(np.float32)
  tokens = rng.integers(0, vocab, (rows, n)).astype(np.int32)
  return logits, tokens, np.array([1.2, 1.0, 1.5], np.float32)[:rows]


def _penalty_reference(logits, tokens, rep):
  out = logits.copy()
  for r in range(logits.shape[0]):
    ids = np.unique(tokens[r])
    v = logits[r, ids]
    out[r, ids] = np.where(v > 0, v / rep[r], v * rep[r])
  return out


@pytest.mark.parametrize("kernel", [repetition_penalty, repetition_penalty_set])
def test_penalties_scatter_into_the_logits_in_place(kernel):
  """A penalty applied in place at the sampled tokens, `ml.store(logits.at[r, ids], v)` or `logits[r, ids] = v`
  through the aliased input, was MG003 / MG303 ("inputs are read-only"): it is the scatter into the output's memory
  that `out[r, ids] = v` is, to the same Mosaic GPU module."""
  args = _penalty_inputs()
  np.testing.assert_allclose(kernel(*args, interpret=True), _penalty_reference(*args), rtol=1e-6)
  specs = [S(a.shape, a.dtype) for a in args]
  same = lambda k: re.sub(r"loc\([^)]*\)", "", k.mlir(*specs)).replace(k.__name__, "K")
  assert same(kernel) == same(repetition_penalty_out)


@mg.mgpu_kernel(out_shape=lambda c, t: c, grid=lambda c, t: (c.shape[0],), input_output_aliases={0: 0})
def count_tokens(counts, tokens, out):
  r = ml.program_id(0)
  ids = tokens[r, :]
  ml.atomic_add(counts.at[r, ids], 1, mask=ids >= 0)


@mg.mgpu_kernel(out_shape=lambda c, t: c, grid=lambda c, t: (c.shape[0],))
def count_into_input(counts, tokens, out):
  r = ml.program_id(0)
  ids = tokens[r, :]
  ml.atomic_add(counts.at[r, ids], 1, mask=ids >= 0)
  out[r, :] = counts[r, :]


def test_token_counts_are_updated_atomically_in_place():
  """vLLM's output-token counts for the frequency and presence penalties, added to in place: `ml.atomic_add` into
  the aliased input was MG303 (ml.atomic_cas into one was taken). Into an input no alias makes an output's memory
  it stays MG303."""
  rng = np.random.default_rng(3)
  counts = rng.integers(0, 3, (3, 1000)).astype(np.int32)
  tokens = rng.integers(0, 1000, (3, 40)).astype(np.int32)
  tokens[0, 30:] = -1
  want = counts.copy()
  for r in range(3):
    np.add.at(want[r], tokens[r][tokens[r] >= 0], 1)
  np.testing.assert_array_equal(count_tokens(counts, tokens, interpret=True), want)
  export(count_tokens, counts, tokens)
  expect(count_into_input, [S(counts.shape, jnp.int32), S(tokens.shape, jnp.int32)], mg.InputWriteError,
         "ml.atomic_add(counts", "ml.atomic_add updates counts, an input: inputs are read-only",
         hint="accumulate into an output (out) instead: it starts at the operation's identity, e.g. 0 for add")


@mg.mgpu_kernel(out_shape=lambda l, t, b: l, grid=lambda l, t, b: (l.shape[0],), input_output_aliases={0: 0})
def logit_bias_augmented(logits, tokens, bias, out):
  r = ml.program_id(0)
  logits[r, tokens[r, :]] += bias[r, :]


@mg.mgpu_kernel(out_shape=lambda l, t, b: l, grid=lambda l, t, b: (l.shape[0],), input_output_aliases={0: 0})
def logit_bias_atomic(logits, tokens, bias, out):
  r = ml.program_id(0)
  ml.atomic_add(logits.at[r, tokens[r, :]], bias[r, :])


def test_logit_bias_added_in_place_and_the_hint_of_its_augmented_assignment():
  """`logits[r, ids] += b` at computed places is MG001, whose hint writes the atomic add; its words said the
  logits "start at 0", which an aliased input does not: they keep their values. The atomic add it writes computes
  through the aliased input (it was MG303)."""
  rng = np.random.default_rng(5)
  logits = rng.standard_normal((3, 1000)).astype(np.float32)
  tokens = np.stack([rng.permutation(1000)[:16] for _ in range(3)]).astype(np.int32)
  bias = rng.standard_normal((3, 16)).astype(np.float32)
  want = logits.copy()
  for r in range(3):
    want[r, tokens[r]] += bias[r]
  np.testing.assert_allclose(logit_bias_atomic(logits, tokens, bias, interpret=True), want, rtol=1e-6)
  expect(logit_bias_augmented, [S(a.shape, a.dtype) for a in (logits, tokens, bias)], mg.UnsupportedSyntaxError,
         "logits[r, tokens[r, :]]", "an augmented assignment at a tensor of indices is not supported in a kernel",
         hint="accumulate with ml.atomic_add(logits.at[r, tokens[r, :]], bias[r, :]) (jnp's"
              " logits.at[r, tokens[r, :]].add; repeated indices add up; the elements it does not update keep"
              " logits's values)")


@mg.mgpu_kernel(out_shape=lambda k, v, kc, vc, s: (kc, vc), grid=lambda k, v, kc, vc, s: (k.shape[0], k.shape[1]),
                input_output_aliases={2: 0, 3: 1})
def reshape_and_cache(key, value, key_cache, value_cache, slot_mapping, kc_out, vc_out):
  t = ml.program_id(0)
  h = ml.program_id(1)
  slot = slot_mapping[t]
  if slot < 0:
    return
  block_size, x = key_cache.shape[3], key_cache.shape[4]
  blk, off = slot // block_size, slot % block_size
  d = ml.arange(0, key.shape[2])
  key_cache[blk, h, d // x, off, d % x] = key[t, h, :]       # [blocks, heads, d // x, block_size, x]
  value_cache[blk, h, d, off] = value[t, h, :]               # [blocks, heads, d, block_size]


def test_reshape_and_cache_writes_the_paged_cache_through_its_inputs():
  """vLLM's reshape_and_cache into the paged layout ([blocks, heads, d // x, block_size, x] keys, [blocks, heads, d,
  block_size] values), the caches updated in place through their own parameters and slot -1 skipped: the scatters
  were MG303."""
  rng = np.random.default_rng(11)
  t, h, d, blocks, bs, x = 5, 2, 128, 4, 16, 8
  key, value = (rng.standard_normal((t, h, d)).astype(np.float16) for _ in range(2))
  kc = rng.standard_normal((blocks, h, d // x, bs, x)).astype(np.float16)
  vc = rng.standard_normal((blocks, h, d, bs)).astype(np.float16)
  slots = np.array([3, -1, 17, 40, 63], np.int32)
  want_k, want_v = kc.copy(), vc.copy()
  for i, s in enumerate(slots):
    if s >= 0:
      want_k[s // bs, :, :, s % bs, :] = key[i].reshape(h, d // x, x)
      want_v[s // bs, :, :, s % bs] = value[i]
  got_k, got_v = reshape_and_cache(key, value, kc, vc, slots, interpret=True)
  np.testing.assert_array_equal(f32(got_k), f32(want_k))
  np.testing.assert_array_equal(f32(got_v), f32(want_v))
  export(reshape_and_cache, key, value, kc, vc, slots)


@pytest.mark.gpu
def test_in_place_writes_through_inputs_on_the_gpu():
  args = _rope_inputs()
  for g, r in zip(jax.jit(rope_neox_inplace)(*args), _rope_reference(*args)):
    np.testing.assert_allclose(f32(g), r, rtol=1e-4, atol=1e-4)
  args = _penalty_inputs()
  np.testing.assert_allclose(np.asarray(repetition_penalty(*args)), _penalty_reference(*args), rtol=1e-6)
  np.testing.assert_allclose(np.asarray(repetition_penalty_set(*args)), _penalty_reference(*args), rtol=1e-6)
  rng = np.random.default_rng(3)
  counts = rng.integers(0, 3, (3, 1000)).astype(np.int32)
  tokens = rng.integers(0, 1000, (3, 40)).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(count_tokens(counts, tokens)),
                                np.asarray(count_tokens(counts, tokens, interpret=True)))


# ------------------------------------------------- the halves and pairs of a tile of few heads computed padded
@mg.mgpu_kernel(out_shape=lambda q, pos, c, s: q, grid=lambda q, pos, c, s: (q.shape[0],))
def rope_split_halves(q, pos, cos_cache, sin_cache, out):
  t = ml.program_id(0)
  c = cos_cache[pos[t]][None, :]
  s = sin_cache[pos[t]][None, :]
  x1, x2 = jnp.split(q[t], 2, axis=-1)
  out[t] = jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


@mg.mgpu_kernel(out_shape=lambda q, pos, c, s: q, grid=lambda q, pos, c, s: (q.shape[0],))
def rope_ml_split(q, pos, cos_cache, sin_cache, out):
  t = ml.program_id(0)
  c = cos_cache[pos[t]][None, :]
  s = sin_cache[pos[t]][None, :]
  x1, x2 = ml.split(q[t].astype(jnp.float32), 2, axis=1)
  out[t] = ml.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=1).astype(out.dtype)


def _heads(tokens, heads, d, seed, dtype=np.float32, positions=16):
  rng = np.random.default_rng(seed)
  q = rng.standard_normal((tokens, heads, d)).astype(dtype)
  pos = rng.integers(0, positions, tokens).astype(np.int32)
  ang = rng.standard_normal((positions, d // 2))
  return q, pos, np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def _halves_reference(q, pos, c, s):
  q = f32(q)
  h = q.shape[-1] // 2
  c, s = c[pos][:, None, :], s[pos][:, None, :]
  return np.concatenate([q[..., :h] * c - q[..., h:] * s, q[..., h:] * c + q[..., :h] * s], -1)


@pytest.mark.parametrize("kernel, heads, d, dtype", [(rope_split_halves, 3, 80, np.float32),
                                                     (rope_split_halves, 6, 80, np.float32),
                                                     (rope_ml_split, 3, 80, jnp.bfloat16)])
def test_equal_split_of_a_padded_tile_cuts_at_its_own_middle(kernel, heads, d, dtype):
  """`jnp.split(x, 2, axis=-1)` (or `ml.split`) of a token's (3, 80) tile of heads (phi's head_dim of 80), computed
  padded, cut the padded columns in two, so the halves were 48 columns wide and MG204 at the rotation; slices and
  `jnp.split(x, [40])` were taken. The equal parts are those of the tile's own shape."""
  args = _heads(5, heads, d, seed=heads)
  tol = 2e-2 if dtype == jnp.bfloat16 else 1e-6
  args = (args[0].astype(dtype),) + args[1:]
  np.testing.assert_allclose(f32(kernel(*args, interpret=True)), _halves_reference(*args), rtol=tol, atol=tol)
  export(kernel, *args)


@mg.mgpu_kernel(out_shape=lambda q, pos, c, s: q, grid=lambda q, pos, c, s: (q.shape[0],))
def rope_gptj_tl_split(q, pos, cos_cache, sin_cache, out):
  t = ml.program_id(0)
  c = cos_cache[pos[t]][None, :]
  s = sin_cache[pos[t]][None, :]
  x = q[t]
  x1, x2 = ml.split(x.reshape(x.shape[0], x.shape[1] // 2, 2))       # tl.split(tl.reshape(x, (H, D // 2, 2)))
  out[t] = ml.interleave(x1 * c - x2 * s, x2 * c + x1 * s)


@mg.mgpu_kernel(out_shape=lambda q, pos, c, s: q, grid=lambda q, pos, c, s: (q.shape[0],))
def rope_gptj_pairs(q, pos, cos_cache, sin_cache, out):
  t = ml.program_id(0)
  c = cos_cache[pos[t]][None, :]
  s = sin_cache[pos[t]][None, :]
  x = q[t]
  pairs = x.reshape(x.shape[0], -1, 2)
  x1, x2 = pairs[..., 0], pairs[:, :, 1]
  out[t] = jnp.stack([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1).reshape(x.shape)


def _pairs_reference(q, pos, c, s):
  q = f32(q)
  c, s = c[pos][:, None, :], s[pos][:, None, :]
  x1, x2 = q[..., 0::2], q[..., 1::2]
  out = np.empty_like(q)
  out[..., 0::2], out[..., 1::2] = x1 * c - x2 * s, x2 * c + x1 * s
  return out


@pytest.mark.parametrize("kernel, heads, d", [(rope_gptj_tl_split, 3, 80), (rope_gptj_tl_split, 2, 80),
                                              (rope_gptj_pairs, 3, 96)])
def test_gptj_pairs_of_a_padded_tile_by_reshape(kernel, heads, d):
  """GPT-J's interleaved rotation written Triton's way, the pairs split off a reshape to (heads, d // 2, 2) and
  joined back (`ml.interleave`, `jnp.stack(..., -1).reshape`), of a tile of few heads computed padded: the reshape
  was refused there (MG204 at the join); `x.reshape(h, d // 2, 2)[..., j]` is `x[..., j::2]`, which it holds."""
  args = _heads(4, heads, d, seed=d + heads)
  np.testing.assert_allclose(kernel(*args, interpret=True), _pairs_reference(*args), rtol=1e-6, atol=1e-6)
  export(kernel, *args)


@mg.mgpu_kernel(out_shape=lambda q, k, pos, c, s: (q, k), grid=lambda q, k, pos, c, s: (q.shape[0],),
                input_output_aliases={0: 0, 1: 1})
def rope_neox_qk(q, k, pos, cos_cache, sin_cache, q_out, k_out):
  t = ml.program_id(0)
  c = cos_cache[pos[t]][None, :]
  s = sin_cache[pos[t]][None, :]
  for x, o in ((q, q_out), (k, k_out)):
    v = x[t].astype(jnp.float32)
    h = v.shape[-1] // 2
    x1, x2 = v[:, :h], v[:, h:]
    o[t] = jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, pos, c, s: q, grid=lambda q, pos, c, s: (q.shape[0],))
def rope_partial(q, pos, cos_cache, sin_cache, out):
  t = ml.program_id(0)
  c = cos_cache[pos[t]][None, :]
  s = sin_cache[pos[t]][None, :]
  v = q[t]
  r = c.shape[-1]
  x1, x2 = v[:, :r], v[:, r:2 * r]
  out[t] = jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s, v[:, 2 * r:]], axis=-1)


@pytest.mark.parametrize("heads, kv_heads, dtype", [(7, 1, np.float32), (5, 2, jnp.bfloat16), (3, 3, np.float32)])
def test_neox_halves_of_an_odd_number_of_128_wide_heads(heads, kv_heads, dtype):
  """A token's tile of 7 heads of 128 (Qwen2-7B's 28 over 4 GPUs; 5 of Qwen2.5-32B's 40 over 8) is held as read, but
  its NeoX halves (7, 64) are not, beside a row of cos: MG204 at `x1 * c`, where 6 or 8 heads, or 7 of 64, were
  taken. Such a tile is now read padded to 8 rows when the other traces fail."""
  q, pos, c, s = _heads(4, heads, 128, seed=heads)
  k = np.random.default_rng(kv_heads).standard_normal((4, kv_heads, 128)).astype(np.float32)
  q, k = q.astype(dtype), k.astype(dtype)
  tol = 2e-2 if dtype == jnp.bfloat16 else 1e-6
  got_q, got_k = rope_neox_qk(q, k, pos, c, s, interpret=True)
  np.testing.assert_allclose(f32(got_q), _halves_reference(q, pos, c, s), rtol=tol, atol=tol)
  np.testing.assert_allclose(f32(got_k), _halves_reference(k, pos, c, s), rtol=tol, atol=tol)
  export(rope_neox_qk, q, k, pos, c, s)


def test_partial_rotary_and_splits_of_seven_heads():
  """The same tile of 7 heads rotated on its first 64 columns only (a partial rotary dim), and split by
  `jnp.split` or GPT-J's reshaped pairs."""
  q, pos, c, s = _heads(4, 7, 128, seed=9)
  c32, s32 = c[:, :32].copy(), s[:, :32].copy()
  want = q.copy()
  want[..., :64] = _halves_reference(q[..., :64], pos, c32, s32)
  np.testing.assert_allclose(rope_partial(q, pos, c32, s32, interpret=True), want, rtol=1e-6, atol=1e-6)
  export(rope_partial, q, pos, c32, s32)
  np.testing.assert_allclose(rope_split_halves(q, pos, c, s, interpret=True), _halves_reference(q, pos, c, s),
                             rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(rope_gptj_tl_split(q, pos, c, s, interpret=True), _pairs_reference(q, pos, c, s),
                             rtol=1e-6, atol=1e-6)
  export(rope_gptj_tl_split, q, pos, c, s)


@pytest.mark.gpu
def test_padded_halves_and_pairs_on_the_gpu():
  for kernel, heads, d, ref in [(rope_split_halves, 3, 80, _halves_reference),
                                (rope_gptj_tl_split, 3, 80, _pairs_reference),
                                (rope_gptj_pairs, 6, 96, _pairs_reference),
                                (rope_split_halves, 7, 128, _halves_reference)]:
    args = _heads(4, heads, d, seed=d)
    np.testing.assert_allclose(np.asarray(jax.jit(kernel)(*args)), ref(*args), rtol=1e-5, atol=1e-5)
  q, pos, c, s = _heads(4, 7, 128, seed=7)
  k = np.random.default_rng(1).standard_normal((4, 2, 128)).astype(np.float32)
  want = _halves_reference(q, pos, c, s), _halves_reference(k, pos, c, s)
  for g, r in zip(jax.jit(rope_neox_qk)(q, k, pos, c, s), want):
    np.testing.assert_allclose(np.asarray(g), r, rtol=1e-5, atol=1e-5)
