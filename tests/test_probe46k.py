"""Probe 46k: jnp's and Triton's array builders (ml.stack, ml.join, ml.interleave, ml.repeat, ml.pad,
ml.expand_dims, ml.squeeze, ml.split; each was MG002 with a hint writing it out), and atomic scatters
into an SMEM buffer, a CTA's histogram `ml.atomic_add(h.at[ids], 1)` (MG003: "only GMEM refs scatter")."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct
F32, BF16, I32 = jnp.float32, jnp.bfloat16, jnp.int32


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _rand(shape, dtype, seed):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _ids(n, hi, seed, lo=0):
  return np.random.default_rng(seed).integers(lo, hi, n).astype(np.int32)


def _exports(kernel, *specs):
  """Builds for CUDA (the real Mosaic GPU module, verified) as jax.export does."""
  jax.export.export(jax.jit(lambda *a: kernel(*a)), platforms=["cuda"])(*specs)


# ---------------------------------------------------------------- stack, join, interleave
@mg.mgpu_kernel(out_shape=lambda a, b: (S(a.shape + (2,), a.dtype), S((3,) + a.shape, a.dtype),
                                        S((a.shape[0], 2, a.shape[1]), a.dtype)))
def stacks(a, b, last, first, middle):
  u, v = a[...], b[...]
  last[...] = ml.stack([u, v], axis=-1)
  first[...] = ml.stack((u, v, u - v))
  middle[...] = ml.stack([u, v], axis=1)


@mg.mgpu_kernel(out_shape=lambda a, b: (S(a.shape + (2,), a.dtype), S((a.shape[0], 2 * a.shape[1]), a.dtype)))
def join_interleave(a, b, joined, mixed):
  joined[...] = ml.join(a[...], b[...])
  mixed[...] = ml.interleave(a[...], b[...])


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0], 2 * x.shape[1]), x.dtype), S(x.shape, x.dtype)))
def rope_pairs(x, rot, back):
  """Interleaved RoPE's rotation: the pairs split (tl.split), rotated, interleaved back; and the halves."""
  v = x[...].astype(jnp.float32)
  x0, x1 = ml.split(v.reshape(x.shape[0], x.shape[1] // 2, 2))
  rot[...] = ml.concatenate([ml.interleave(-x1, x0), ml.join(x0, x1).reshape(x.shape)], axis=1).astype(x.dtype)
  lo, hi = ml.split(v, 2, axis=1)
  back[...] = ml.concatenate([-hi, lo], axis=1).astype(x.dtype)


def test_stack_join_and_interleave_are_jnp_and_tritons():
  a, b = _rand((16, 64), np.float32, 1), _rand((16, 64), np.float32, 2)
  last, first, middle = stacks(a, b, interpret=True)
  np.testing.assert_array_equal(last, np.stack([a, b], -1))
  np.testing.assert_array_equal(first, np.stack([a, b, a - b]))
  np.testing.assert_array_equal(middle, np.stack([a, b], 1))
  ab, bb = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
  joined, mixed = join_interleave(ab, bb, interpret=True)
  np.testing.assert_array_equal(np.asarray(joined, np.float32), np.stack([ab, bb], -1).astype(np.float32))
  np.testing.assert_array_equal(np.asarray(mixed, np.float32), np.stack([ab, bb], -1).reshape(16, 128).astype(np.float32))
  _exports(stacks, S((16, 64), F32), S((16, 64), F32))
  builds(join_interleave, S((16, 64), BF16), S((16, 64), BF16))


def test_split_takes_sections_indices_and_tritons_pairs():
  x = _rand((8, 64), jnp.bfloat16, 3)
  v = np.asarray(x, np.float32)
  rot, back = rope_pairs(x, interpret=True)
  p = v.reshape(8, 32, 2)
  want = np.concatenate([np.stack([-p[..., 1], p[..., 0]], -1).reshape(8, 64), v], axis=1)
  np.testing.assert_array_equal(np.asarray(rot, np.float32), want)
  np.testing.assert_array_equal(np.asarray(back, np.float32), np.concatenate([-v[:, 32:], v[:, :32]], 1))
  _exports(rope_pairs, S((8, 64), BF16))


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype))
def split_at(x, out):
  p, q, r = ml.split(x[...], [8, 40], axis=-1)
  t, u = ml.split(x[...], 2)
  out[...] = ml.concatenate([r, q, p], axis=1) + ml.concatenate([u, t], axis=0)


def test_split_at_indices_as_jnp():
  x = _rand((32, 64), np.float32, 4)
  p, q, r = np.split(x, [8, 40], axis=-1)
  t, u = np.split(x, 2)
  np.testing.assert_array_equal(split_at(x, interpret=True),
                                np.concatenate([r, q, p], 1) + np.concatenate([u, t], 0))


@mg.mgpu_kernel(out_shape=lambda a, b: (S((64, 64), F32), S((64, 256), F32)))
def swiglu_halves(a, b, act, mixed):
  """A fused gate/up matmul's halves split (tensor-core tile windows), and the tile interleaved."""
  sa, sb = ml.smem((64, 64), jnp.bfloat16), ml.smem((64, 128), jnp.bfloat16)
  ml.copy(a, sa)
  ml.copy(b, sb)
  acc = ml.dot(sa, sb)
  g, u = ml.split(acc, 2, axis=1)
  act[...] = g * ml.sigmoid(g) * u
  mixed[...] = ml.interleave(acc, -acc)


def test_split_and_interleave_of_a_dot_result():
  a, b = _rand((64, 64), jnp.bfloat16, 22), _rand((64, 128), jnp.bfloat16, 23)
  acc = np.asarray(a, np.float32) @ np.asarray(b, np.float32)
  act, mixed = swiglu_halves(a, b, interpret=True)
  g, u = acc[:, :64], acc[:, 64:]
  np.testing.assert_allclose(act, g / (1 + np.exp(-g)) * u, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(mixed, np.stack([acc, -acc], -1).reshape(64, 256), rtol=1e-5, atol=1e-5)
  _exports(swiglu_halves, S((64, 64), BF16), S((64, 128), BF16))


# ---------------------------------------------------------------- repeat, pad, expand_dims, squeeze
@mg.mgpu_kernel(out_shape=lambda x: (S((2 * x.shape[0], x.shape[1]), x.dtype), S((x.shape[0], 3 * x.shape[1]), x.dtype),
                                     S((2 * x.size,), x.dtype)))
def repeats(x, rows, cols, flat):
  v = x[...]
  rows[...] = ml.repeat(v, 2, axis=0)       # a nearest upsampling's rows
  cols[...] = v.repeat(3, axis=-1)
  flat[...] = ml.repeat(v, 2)


def test_repeat_is_jnp_repeat():
  x = _rand((16, 32), np.float32, 5)
  rows, cols, flat = repeats(x, interpret=True)
  np.testing.assert_array_equal(rows, np.repeat(x, 2, axis=0))
  np.testing.assert_array_equal(cols, np.repeat(x, 3, axis=-1))
  np.testing.assert_array_equal(flat, np.repeat(x, 2))
  _exports(repeats, S((16, 32), F32))


@mg.mgpu_kernel(out_shape=lambda x, v: (S((x.shape[0], x.shape[1] + 64), x.dtype), S((128,), v.dtype)))
def pads(x, v, wide, tail):
  wide[...] = ml.pad(x[...], ((0, 0), (16, 48)))
  tail[...] = ml.pad(v[...][:100], (3, 25), constant_values=-float("inf"))


def test_pad_is_jnp_pad_in_constant_mode():
  x, v = _rand((16, 64), np.float32, 6), _rand((128,), jnp.bfloat16, 7)
  wide, tail = pads(x, v, interpret=True)
  np.testing.assert_array_equal(wide, np.pad(x, ((0, 0), (16, 48))))
  np.testing.assert_array_equal(np.asarray(tail, np.float32),
                                np.pad(np.asarray(v, np.float32)[:100], (3, 25), constant_values=-np.inf))
  _exports(pads, S((16, 64), F32), S((128,), BF16))


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, x.dtype), S((x.shape[0],), x.dtype)))
def centred(x, out, sums):
  m = ml.max(x[...], axis=1)
  out[...] = x[...] - ml.expand_dims(m, 1)
  sums[...] = ml.squeeze(ml.sum(x[...], axis=1, keepdims=True), axis=-1) + ml.squeeze(ml.expand_dims(m, (0, 2))) * 0


def test_expand_dims_and_squeeze_are_jnps():
  x = _rand((64, 32), np.float32, 8)
  out, sums = centred(x, interpret=True)
  np.testing.assert_array_equal(out, x - x.max(1, keepdims=True))
  np.testing.assert_allclose(sums, x.sum(1), rtol=1e-5, atol=1e-5)
  builds(centred, S((64, 32), F32))


# ---------------------------------------------------------------- their mistakes
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype))
def squeeze_wide(x, out):
  out[...] = ml.squeeze(x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype))
def split_uneven(x, out):
  a, b, c = ml.split(x[...], 3, axis=1)
  out[...] = a


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype))
def stack_mixed(x, out):
  out[...] = ml.stack([x[...], x[...][:, :32]])


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype))
def pad_edge(x, out):
  out[...] = ml.pad(x[...][:, 1:], ((0, 0), (1, 0)), mode="edge")


@mg.mgpu_kernel(out_shape=lambda x: S((2 * x.shape[0], x.shape[1]), x.dtype))
def repeat_by_tensor(x, out):
  out[...] = ml.repeat(x[...], ml.full((x.shape[0],), 2, jnp.int32), axis=0)


def test_the_builders_mistakes_say_what_fits():
  spec = [S((16, 64), F32)]
  expect(squeeze_wide, spec, mg.ShapeMismatchError, "ml.squeeze(",
         "ml.squeeze: axis 1 of x[...] (16, 64) has size 64, not 1",
         hint="only size-1 axes are squeezed; a window takes part of a larger one: v[:, 0]")
  expect(split_uneven, spec, mg.ShapeMismatchError, "ml.split(",
         "ml.split of axis 1 of size 64 into 3 equal parts: 3 does not divide 64",
         hint="give the indices to split at instead: ml.split(v, [32], axis=1)")
  expect(stack_mixed, spec, mg.ShapeMismatchError, "ml.stack(",
         "ml.stack of parts of shapes (16, 64) and (16, 32): the parts need one shape",
         hint="ml.stack joins tensors of one shape; ml.concatenate joins along an existing axis")
  expect(pad_edge, spec, mg.KernelTypeError, "ml.pad(", "ml.pad supports mode='constant' only, got 'edge'",
         hint="edge and reflect padding are windows joined: ml.concatenate([v[:, :1], v], axis=1)")
  expect(repeat_by_tensor, spec, mg.KernelTypeError, "ml.repeat(",
         "ml.repeat takes a static positive int of repeats, got ml.full((x.shape[0],), 2, jnp.int32)",
         hint="ml.repeat(v, 2, axis=0); repeats that differ by element are a gather from the ref,"
              " ref[ml.arange(n * r) // r]")


# ---------------------------------------------------------------- atomic scatters into SMEM
@mg.mgpu_kernel(out_shape=lambda ids: S((ids.shape[0] // 256, 64), I32), grid=lambda ids: (ids.shape[0] // 256,))
def expert_counts(ids, out):
  """The MoE counting step: each CTA's histogram of its 256 expert ids, then their offsets."""
  i = ml.program_id(0)
  h = ml.smem((64,), jnp.int32)
  h[...] = ml.zeros((64,), jnp.int32)
  ml.atomic_add(h.at[ids.at[ml.ds(i * 256, 256)][...]], 1)
  c = h[...]
  out.at[i][...] = ml.cumsum(c) - c


@mg.mgpu_kernel(out_shape=lambda topk, w: (S((16,), F32), S((16,), I32), S((16,), I32)))
def routed(topk, w, load, top, low):
  """Top-2 routing: the weight each expert gets (ids outside 0..15 dropped, as jnp's .at[].add), and
  the largest and smallest token position routed to each."""
  t = topk[...]
  s = ml.smem((16,), jnp.float32)
  hi = ml.smem((16,), jnp.int32)
  lo = ml.smem((16,), jnp.int32)
  s[...] = ml.zeros((16,), jnp.float32)
  hi[...] = ml.full((16,), -1, jnp.int32)
  lo[...] = ml.full((16,), 1 << 30, jnp.int32)
  ml.atomic_add(s.at[t], w[...])
  pos = ml.broadcast_to(ml.arange(t.shape[0])[:, None], t.shape)
  ml.atomic_max(hi.at[t], pos)
  ml.atomic_min(lo.at[t], pos)
  load[...] = s[...]
  top[...] = hi[...]
  low[...] = lo[...]


@mg.mgpu_kernel(out_shape=lambda ids: S((8,), I32), block=256)
def two_warpgroups(ids, out):
  h = ml.smem((8,), jnp.int32)
  h[...] = ml.zeros((8,), jnp.int32)
  ml.atomic_add(h.at[ids[...]], 1)
  out[...] = h[...]


def _routed_reference(topk, w):
  """jnp's scatters (a negative id counts from the end, as in NumPy; ids past the end are dropped)."""
  pos = np.broadcast_to(np.arange(topk.shape[0])[:, None], topk.shape)
  load = jnp.zeros(16, F32).at[topk].add(w)
  top = jnp.full(16, -1, I32).at[topk].max(pos)
  low = jnp.full(16, 1 << 30, I32).at[topk].min(pos)
  return load, top, low


def test_a_ctas_histogram_counts_with_smem_atomics():
  ids = _ids(1024, 64, 9)
  counts = np.stack([np.bincount(b, minlength=64) for b in ids.reshape(4, 256)])
  np.testing.assert_array_equal(expert_counts(ids, interpret=True), np.cumsum(counts, 1) - counts)
  few = _ids(512, 8, 24)
  np.testing.assert_array_equal(two_warpgroups(few, interpret=True), np.bincount(few, minlength=8))
  builds(two_warpgroups, S((512,), I32))
  txt = expert_counts.mlir(S((1024,), I32))
  assert "red.shared::cta.relaxed.cta.add.s32" in txt
  _exports(expert_counts, S((1024,), I32))


def test_smem_atomic_add_max_and_min_drop_ids_outside():
  topk = _ids(256, 20, 10, lo=-2).reshape(128, 2)        # repeated ids, some outside the buffer
  w = _rand((128, 2), np.float32, 11)
  got = routed(topk, w, interpret=True)
  for g, want in zip(got, _routed_reference(topk, w)):
    np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(want, np.float64), rtol=1e-5, atol=1e-5)
  txt = routed.mlir(S((128, 2), I32), S((128, 2), F32))
  for op in ("add.f32", "max.s32", "min.s32"):
    assert f"red.shared::cta.relaxed.cta.{op}" in txt, op
  _exports(routed, S((128, 2), I32), S((128, 2), F32))


@mg.mgpu_kernel(out_shape=lambda ids, x: S((8,), x.dtype))
def bf16_sums(ids, x, out):
  h = ml.smem((8,), jnp.bfloat16)
  h[...] = ml.zeros((8,), jnp.bfloat16)
  ml.atomic_add(h.at[ids[...]], x[...])
  out[...] = h[...]


@mg.mgpu_kernel(out_shape=lambda ids: S((4, 8), I32))
def table_counts(ids, out):
  h = ml.smem((4, 8), jnp.int32)
  h[...] = ml.zeros((4, 8), jnp.int32)
  ml.atomic_add(h.at[ml.arange(256) % 4, ids[...]], 1)
  out[...] = h[...]


def test_smem_scatters_of_bfloat16_and_of_two_axes():
  ids, x = _ids(256, 8, 27), _rand((256,), np.float32, 28)     # (a 16-bit float was MG106 until probe 47d)
  got = np.asarray(bf16_sums(ids, x.astype(BF16), interpret=True), np.float32)
  np.testing.assert_allclose(got, np.bincount(ids, weights=x.astype(BF16).astype(np.float32), minlength=8),
                             rtol=5e-2, atol=0.25)
  ids = _ids(256, 8, 26)          # (a buffer of two axes was MG003 here until probe 47d)
  want = np.zeros((4, 8), np.int32)
  np.add.at(want, (np.arange(256) % 4, ids), 1)
  np.testing.assert_array_equal(table_counts(ids, interpret=True), want)


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_smem_atomics_on_the_gpu():
  ids = _ids(1024, 64, 12)
  np.testing.assert_array_equal(jax.jit(expert_counts)(ids), expert_counts(ids, interpret=True))
  few = _ids(512, 8, 25)
  np.testing.assert_array_equal(jax.jit(two_warpgroups)(few), np.bincount(few, minlength=8))
  topk, w = _ids(256, 20, 13, lo=-2).reshape(128, 2), _rand((128, 2), np.float32, 14)
  for g, want in zip(jax.jit(routed)(topk, w), _routed_reference(topk, w)):
    np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(want, np.float64), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_array_builders_on_the_gpu():
  a, b = _rand((16, 64), np.float32, 15), _rand((16, 64), np.float32, 16)
  for g, i in zip(jax.jit(stacks)(a, b), stacks(a, b, interpret=True)):
    np.testing.assert_array_equal(g, i)
  ab, bb = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
  for g, i in zip(jax.jit(join_interleave)(ab, bb), join_interleave(ab, bb, interpret=True)):
    np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(i, np.float32))
  x = _rand((8, 64), jnp.bfloat16, 17)
  for g, i in zip(jax.jit(rope_pairs)(x), rope_pairs(x, interpret=True)):
    np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(i, np.float32))
  x = _rand((16, 32), np.float32, 18)
  for g, i in zip(jax.jit(repeats)(x), repeats(x, interpret=True)):
    np.testing.assert_array_equal(g, i)
  x, v = _rand((16, 64), np.float32, 19), _rand((128,), jnp.bfloat16, 20)
  for g, i in zip(jax.jit(pads)(x, v), pads(x, v, interpret=True)):
    np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(i, np.float32))
  x = _rand((32, 64), np.float32, 21)
  np.testing.assert_array_equal(jax.jit(split_at)(x), split_at(x, interpret=True))
  a, b = _rand((64, 64), jnp.bfloat16, 22), _rand((64, 128), jnp.bfloat16, 23)
  for g, i in zip(jax.jit(swiglu_halves)(a, b), swiglu_halves(a, b, interpret=True)):
    np.testing.assert_allclose(g, i, rtol=1e-4, atol=1e-4)
