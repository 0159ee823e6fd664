"""Probe 30b (classic GPU kernels a CUDA programmer writes first: stencils, histograms, scans,
reductions with atomics, matrix-vector products, SpMV, sorts by hand, image ops, integer bit
tricks, n-body forces and distance matrices): what the probe's kernels found."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- pairwise differences of one read
@mg.mgpu_kernel(out_shape=lambda px, py, m: (px, py))
def nbody_step(px, py, m, ox, oy):
  x, y, w = px[...], py[...], m[...]
  dx = x[None, :] - x[:, None]                  # (n, 1) - (1, n) of one vector read once
  dy = y[None, :] - y[:, None]
  r2 = dx * dx + dy * dy + 1e-3
  inv = w[None, :] * ml.rsqrt(r2) / r2
  ox[...] = x + 0.01 * ml.sum(dx * inv, axis=1)
  oy[...] = y + 0.01 * ml.sum(dy * inv, axis=1)


@mg.mgpu_kernel(out_shape=lambda p: S((p.shape[0], p.shape[0]), F32),
                grid=lambda p: (ml.cdiv(p.shape[0], 64), ml.cdiv(p.shape[0], 64)))
def distances(p, out):
  i, j = ml.program_id(0), ml.program_id(1)
  n = p.shape[0]
  r = i * 64 + ml.arange(64)
  a = p.at[ml.ds(i * 64, 64)].load(mask=r < n, other=0).astype(F32)
  c = j * 64 + ml.arange(64)
  b = p.at[ml.ds(j * 64, 64)].load(mask=c < n, other=0).astype(F32)
  d = a[:, None] - b[None, :]
  out.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)].store(ml.abs(d), mask=(r[:, None] < n) & (c[None, :] < n))


@mg.mgpu_kernel(out_shape=lambda p: S((128, 128), F32))
def self_distances_masked(p, out):
  idx = ml.arange(128)
  v = p.at[ml.ds(0, 128)].load(mask=idx < p.shape[0], other=0.0)
  out[...] = ml.abs(v[:, None] - v[None, :])


def _nbody_ref(px, py, m):
  dx, dy = px[None, :] - px[:, None], py[None, :] - py[:, None]
  r2 = dx * dx + dy * dy + np.float32(1e-3)
  inv = m[None, :] / (r2 * np.sqrt(r2))
  return px + np.float32(0.01) * (dx * inv).sum(1), py + np.float32(0.01) * (dy * inv).sum(1)


def test_a_vector_read_from_an_input_broadcast_both_ways_is_read_again():
  """It was MG204 ('x is used as a row statistic ... and as a column vector'): the n-body and
  distance-matrix form `x[:, None] - x[None, :]` of one `x = px[...]`. An input is read-only, so the
  compiler reads the window again for the second orientation, as it recomputes index vectors."""
  rng = np.random.default_rng(0)
  px, py = (rng.standard_normal(128).astype(np.float32) for _ in range(2))
  m = rng.random(128).astype(np.float32)
  got = nbody_step(px, py, m, interpret=True)
  for g, r in zip(got, _nbody_ref(px, py, m)):
    np.testing.assert_allclose(np.asarray(g), r, rtol=1e-3, atol=1e-3)
  assert "stablehlo.custom_call" in _export(nbody_step, *[S((128,), F32)] * 3)
  ir_text = nbody_step.typed_ir(*[S((128,), F32)] * 3)
  px_id = re.search(r"param (%\d+) px:", ir_text).group(1)
  assert ir_text.count(f"= load ref={px_id} ") == 3    # x: its 1-D use and one read per orientation

  p = rng.standard_normal(150).astype(np.float16)
  want = np.abs(p.astype(np.float32)[:, None] - p.astype(np.float32)[None, :])
  np.testing.assert_array_equal(np.asarray(distances(p, interpret=True)), want)
  _export(distances, S((150,), jnp.float16))

  q = rng.standard_normal(100).astype(np.float32)
  qp = np.pad(q, (0, 28))
  np.testing.assert_array_equal(np.asarray(self_distances_masked(q, interpret=True)),
                                np.abs(qp[:, None] - qp[None, :]))
  _export(self_distances_masked, S((100,), F32))


@pytest.mark.gpu
def test_gpu_a_vector_read_from_an_input_broadcast_both_ways():
  rng = np.random.default_rng(1)
  px, py = (rng.standard_normal(128).astype(np.float32) for _ in range(2))
  m = rng.random(128).astype(np.float32)
  got = jax.jit(nbody_step)(px, py, m)
  for g, r in zip(got, _nbody_ref(px, py, m)):
    np.testing.assert_allclose(np.asarray(g), r, rtol=1e-3, atol=1e-3)
  q = rng.standard_normal(100).astype(np.float32)
  qp = np.pad(q, (0, 28))
  np.testing.assert_array_equal(np.asarray(jax.jit(self_distances_masked)(q)), np.abs(qp[:, None] - qp[None, :]))


# ---------------------------------------------------------------- the SMEM hint names the vector's dtype
@mg.mgpu_kernel(out_shape=lambda x: S((128, 128), F32))
def smem_vector_both_ways(x, out):
  buf = ml.smem((128,), F32)
  buf[...] = x[...] * 2.0
  idx = ml.arange(128)
  v = buf.load(mask=idx < 100, other=0.0)
  out[...] = v[:, None] - v          # (v[None, :] written out reads a copy of v: probe 33c)


@mg.mgpu_kernel(out_shape=lambda x: S((128, 128), F32))
def smem_vector_hint_followed(x, out):
  buf = ml.smem((128,), F32)
  buf[...] = x[...] * 2.0
  idx = ml.arange(128)
  v = buf.load(mask=idx < 100, other=0.0)
  tmp = ml.smem((128,), jnp.float32)
  tmp[...] = v
  out[...] = v[:, None] - tmp[...][None, :]


def test_the_smem_hint_of_a_layout_conflict_names_the_vectors_dtype_not_its_masks():
  """The hint allocated `tmp = ml.smem((128,), jnp.int32)` for a float32 vector: it took the dtype
  of the first vector of the conflict's class, here the index vector of the load's mask."""
  e = expect(smem_vector_both_ways, [S((128,), F32)], mg.LayoutError, "v[:, None] - v",
             "v is used as a column vector (one value per column) of one tile and as a row statistic (one"
             " value per row) of another: a register vector lives in one of the two layouts")
  assert "tmp = ml.smem((128,), jnp.float32); tmp[...] = v;" in e.hint
  x = np.arange(128, dtype=np.float32)
  v = np.where(x < 100, 2 * x, 0).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(smem_vector_hint_followed(x, interpret=True)), v[:, None] - v[None, :])


# ---------------------------------------------------------------- a short window of a longer SMEM buffer
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 1024,), x.dtype), grid=lambda x: (x.shape[0] // 1024,))
def tree_sum(x, out):
  i = ml.program_id(0)
  buf = ml.smem((1024,), F32)
  buf[...] = x.at[ml.ds(i * 1024, 1024)][...]
  s = 512
  while s >= 1:                                  # a CUDA tree reduction, halved while tracing
    buf.at[ml.ds(0, s)][...] = buf.at[ml.ds(0, s)][...] + buf.at[ml.ds(s, s)][...]
    s //= 2
  out[i] = buf[0]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 1024,), x.dtype), grid=lambda x: (x.shape[0] // 1024,))
def tree_sum_hint_followed(x, out):
  i = ml.program_id(0)
  buf = ml.smem((1024,), F32)
  buf[...] = x.at[ml.ds(i * 1024, 1024)][...]
  s = 512
  while s >= 1:
    if s >= 8:
      buf.at[ml.ds(0, s)][...] = buf.at[ml.ds(0, s)][...] + buf.at[ml.ds(s, s)][...]
    else:
      m = ml.arange(8) < s
      v = buf.at[ml.ds(0, 8)].load(mask=m, other=0) + buf.at[ml.ds(s, 8)].load(mask=m, other=0)
      buf.at[ml.ds(0, 8)].store(v, mask=m)
    s //= 2
  out[i] = buf[0]


def test_a_short_window_of_a_longer_smem_buffer_computes_and_its_masked_form_too():
  """The hint said 'allocate buf.at[ml.ds(0, s)] with 8 elements' (a view cannot be allocated) and to
  fill it whole; a window of 8 elements of the buffer itself, masked, is what worked. Since probe 72a (few-element
  SMEM rows read padded, design note 236) the CUDA tree reduction's windows of 4, 2 and 1 compute as written."""
  x = np.random.default_rng(2).standard_normal(4096).astype(np.float32)
  for kernel in (tree_sum, tree_sum_hint_followed):
    np.testing.assert_allclose(np.asarray(kernel(x, interpret=True)), x.reshape(4, 1024).sum(1), rtol=1e-4,
                               atol=1e-4)
    _export(kernel, S((4096,), F32))


# ---------------------------------------------------------------- a TMA reduction too narrow for the TMA
@mg.mgpu_kernel(out_shape=lambda x: S((2,), F32), grid=lambda x: (x.shape[0] // 128,))
def two_sums(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  buf = ml.smem((2,), F32)
  buf[0] = ml.sum(v)
  buf[1] = ml.sum(v * v)
  ml.copy(buf, out, reduce="add")


@mg.mgpu_kernel(out_shape=lambda x: S((2,), F32), grid=lambda x: (x.shape[0] // 128,))
def two_sums_hint_followed(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  ml.atomic_add(out.at[0], ml.sum(v))
  ml.atomic_add(out.at[1], ml.sum(v * v))


@mg.mgpu_kernel(out_shape=lambda x: S((1,), jnp.int64), grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def argmax_key(x, out):
  i = ml.program_id(0)
  idx = i * 128 + ml.arange(128)
  v = x.at[ml.ds(i * 128, 128)].load(mask=idx < x.shape[0], other=0).astype(jnp.int64)
  buf = ml.smem((1,), jnp.int64)
  buf[0] = ml.max(v * 4096 + (4095 - idx).astype(jnp.int64))     # the first index of the largest value
  ml.copy(buf, out, reduce="max")


@mg.mgpu_kernel(out_shape=lambda x: S((2,), jnp.int64), grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def argmax_key_hint_followed(x, out):
  i = ml.program_id(0)
  idx = i * 128 + ml.arange(128)
  v = x.at[ml.ds(i * 128, 128)].load(mask=idx < x.shape[0], other=0).astype(jnp.int64)
  buf = ml.smem((2,), jnp.int64)
  buf[0] = ml.max(v * 4096 + (4095 - idx).astype(jnp.int64))
  buf[1] = ml.full((), -2 ** 63, jnp.int64)
  ml.copy(buf, out, reduce="max")


def test_a_tma_reduction_of_rows_under_16_bytes_hints_an_atomic_not_a_plain_store():
  """The hint said to 'store the value from registers instead (out[...] = value)': every program
  would overwrite the others' sums (a RaceError). It now names the atomic, or, for a dtype `red`
  does not take (int64), rows widened to 16 bytes whose extra elements hold the identity."""
  expect(two_sums, [S((1024,), F32)], mg.TmaLimitError, 'ml.copy(buf, out, reduce="add")',
         "TMA copies need the last dimension to span a multiple of 16 bytes; 2 x 4 bytes = 8",
         hint="out's rows are 8 bytes, so no window of them is: combine it from registers instead,"
              " ml.atomic_add(out.at[...], value) (a plain store would overwrite what the other programs combine)")
  x = np.random.default_rng(3).standard_normal(1024).astype(np.float32)
  np.testing.assert_allclose(np.asarray(two_sums_hint_followed(x, interpret=True)), [x.sum(), (x * x).sum()],
                             rtol=1e-4)
  jax.config.update("jax_enable_x64", True)
  try:
    expect(argmax_key, [S((1000,), jnp.int32)], mg.TmaLimitError, 'ml.copy(buf, out, reduce="max")',
           "TMA copies need the last dimension to span a multiple of 16 bytes; 1 x 8 bytes = 8",
           hint="out's rows are 8 bytes, so no window of them is: combine it from registers instead,"
                " ml.atomic_max(out.at[...], value) (a plain store would overwrite what the other programs combine)")
    # (int64 atomic_max of registers exists since probe 50c; the padded-rows form below stays right too)
    x = np.random.default_rng(4).integers(0, 100, 1000).astype(np.int32)
    got = np.asarray(argmax_key_hint_followed(x, interpret=True))
    assert got[0] == x.max() * 4096 + 4095 - np.argmax(x) and got[1] == -2 ** 63
    _export(argmax_key_hint_followed, S((1000,), jnp.int32))
  finally:
    jax.config.update("jax_enable_x64", False)


# ---------------------------------------------------------------- a shift by a loop index
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def bit_reverse(x, out):
  i = ml.program_id(0)
  idx = i * 128 + ml.arange(128)
  v = x.at[ml.ds(i * 128, 128)].load(mask=idx < x.shape[0], other=0)
  r = ml.zeros((128,), jnp.uint32)
  for b in range(32):                            # b: a weakly typed int32 scalar (probe 57g)
    r = r | (((v >> b) & 1) << (31 - b))
  out.at[ml.ds(i * 128, 128)].store(r, mask=idx < x.shape[0])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def bit_reverse_hint_followed(x, out):
  i = ml.program_id(0)
  idx = i * 128 + ml.arange(128)
  v = x.at[ml.ds(i * 128, 128)].load(mask=idx < x.shape[0], other=0)
  r = ml.zeros((128,), jnp.uint32)
  for b in range(32):
    r = r | (((v >> b.astype(jnp.uint32)) & 1) << (31 - b).astype(jnp.uint32))
  out.at[ml.ds(i * 128, 128)].store(r, mask=idx < x.shape[0])


def test_a_shift_by_a_loop_index_computes_and_so_does_the_old_hint():
  """The hint converted both sides to int64 (jnp's promotion): followed, the shifted value became int64 and met
  the uint32 accumulator in a second MG104. Since probe 57g a static range's index is weakly typed, as Python's
  int in jnp (and jax's fori_loop counter): `v >> b` of a uint32 v keeps uint32 and computes; the converted form
  the old hint wrote gives the same numbers."""
  x = np.random.default_rng(5).integers(0, 2 ** 32, 300, dtype=np.uint64).astype(np.uint32)
  want = np.array([int(f"{int(a):032b}"[::-1], 2) for a in x], np.uint32)
  for k in (bit_reverse, bit_reverse_hint_followed):
    np.testing.assert_array_equal(np.asarray(k(x, interpret=True)), want)
    _export(k, S((300,), jnp.uint32))


# ---------------------------------------------------------------- a register slice that does not start at 0
@mg.mgpu_kernel(out_shape=lambda x: S((263,), x.dtype))
def neighbour_differences(x, out):
  v = x.at[ml.ds(0, 264)].load(mask=ml.arange(264) < x.shape[0], other=0.0)
  out[...] = v[1:] - v[:-1]                      # out: (263,)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] - 1,), x.dtype))
def neighbour_differences_hint_followed(x, out):
  v = x.at[ml.ds(0, 264)].load(mask=ml.arange(264) < x.shape[0], other=0.0)
  nxt = x.at[ml.ds(0 + 1, 264)].load(mask=ml.arange(264) < x.shape[0] - 1, other=0.0)
  out.at[ml.ds(0, 264)].store(nxt - v, mask=ml.arange(264) < x.shape[0] - 1)


@mg.mgpu_kernel(out_shape=lambda x: S((4,), x.dtype))
def middle_four(x, out):
  v = x[...]
  out[...] = v[8:12] * 2.0


def test_a_short_register_slice_that_does_not_start_at_0_computes():
  """The hint said 'slice 264 elements instead (e.g. v[:264])' for v[1:] of 264 elements (the unshifted vector)
  and v[:8] for v[8:12]; then (MG204) it kept the slice's start. Since probe 47a such a slice is computed padded,
  and the hint followed computes the same."""
  x = np.random.default_rng(6).standard_normal(257).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(neighbour_differences_hint_followed(x, interpret=True)), np.diff(x))
  np.testing.assert_array_equal(np.asarray(neighbour_differences(x, interpret=True)),
                                np.diff(np.concatenate([x, np.zeros(7, np.float32)])))
  x = np.random.default_rng(7).standard_normal(128).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(middle_four(x, interpret=True)), x[8:12] * 2)


# ---------------------------------------------------------------- a constant vector of the wrong length
@mg.mgpu_kernel(out_shape=lambda x: x)
def odd_even_sort_setup(x, out):
  n = x.shape[0]
  buf = ml.smem((n + 2,), F32)                   # a sentinel on each side
  buf[...] = ml.full((n + 2,), float("inf"), F32)
  buf.at[ml.ds(1, n)][...] = x[...]
  out[...] = buf.at[ml.ds(1, n)][...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def odd_even_sort_setup_scaled(x, out):
  n = x.shape[0]
  buf = ml.smem((n + 2,), F32)
  buf[...] = ml.full((n + 2,), float("inf"), F32) * 2      # (stored whole, ml.full is its number: probe 46a)
  buf.at[ml.ds(1, n)][...] = x[...]
  out[...] = buf.at[ml.ds(1, n)][...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def odd_even_sort_setup_hint_followed(x, out):
  n = x.shape[0]
  buf = ml.smem((136,), F32)
  buf[...] = ml.full((136,), float("inf"), F32)
  buf.at[ml.ds(1, n)][...] = x[...]
  out[...] = buf.at[ml.ds(1, n)][...]


def test_a_constant_vector_of_an_odd_length_computes():
  """The hint was 'pad it with a masked window: ref.at[ml.ds(start, 136)].load(...)', for a vector made by ml.full,
  which reads no memory; then a hint to make it 136 long. Since probe 46a a constant stored whole is its number, and
  since probe 59a a (130,) vector computed on (`ml.full(...) * 2`) is stored into its SMEM buffer through the
  compiler's scratch (design note 193): all three forms compute, and export for CUDA."""
  x = np.arange(128, dtype=np.float32)
  for k in (odd_even_sort_setup_scaled, odd_even_sort_setup_hint_followed, odd_even_sort_setup):
    np.testing.assert_array_equal(np.asarray(k(x, interpret=True)), x)
    assert "mosaic_gpu" in jax.export.export(jax.jit(k), platforms=["cuda"])(S((128,), F32)).mlir_module()


# ---------------------------------------------------------------- one channel of (H, W, 3) pixels
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:2], jnp.uint8), grid=lambda x: (x.shape[0],))
def red_channel(x, out):
  r = ml.program_id(0)
  out.at[r][...] = x.at[r, :, 0][...]


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:2], jnp.uint8), grid=lambda x: (x.shape[0],))
def red_channel_hint_followed(x, out):
  r = ml.program_id(0)
  v = x.at[r, ml.ds(0, 256), 0].load(mask=ml.arange(256) < 200, other=0)
  out.at[r, ml.ds(0, 256)].store(v, mask=ml.arange(256) < 200)


def test_a_strided_window_of_an_odd_length_computes_as_its_hint_did():
  """The hint said only 'move a window of a multiple of 128 elements (more rows at once)'; then it read a row of
  200 pixels' red channel as a masked window of 256, which runs past the row's end; since probe 51g the compiler
  reads it so itself: both forms give the channel."""
  x = np.random.default_rng(7).integers(0, 256, (4, 200, 3)).astype(np.uint8)
  np.testing.assert_array_equal(np.asarray(red_channel(x, interpret=True)), x[:, :, 0])
  np.testing.assert_array_equal(np.asarray(red_channel_hint_followed(x, interpret=True)), x[:, :, 0])
  _export(red_channel, S((4, 200, 3), jnp.uint8))
  _export(red_channel_hint_followed, S((4, 200, 3), jnp.uint8))


# ---------------------------------------------------------------- a hash mixing an int32 seed into uint32 bits
@mg.mgpu_kernel(out_shape=lambda seed, *, n: S((n,), jnp.uint32), grid=lambda seed, *, n: (n // 128,))
def index_hash(seed: ml.scalar, out, *, n: ml.constexpr):
  i = ml.program_id(0)
  idx = (i * 128 + ml.arange(128)).astype(jnp.uint32)
  v = (idx ^ seed) * 0x9E3779B1
  out.at[ml.ds(i * 128, 128)][...] = v ^ (v >> 15)


@mg.mgpu_kernel(out_shape=lambda seed, *, n: S((n,), jnp.uint32), grid=lambda seed, *, n: (n // 128,))
def index_hash_hint_followed(seed: ml.scalar, out, *, n: ml.constexpr):
  i = ml.program_id(0)
  idx = (i * 128 + ml.arange(128)).astype(jnp.uint32)
  v = (idx ^ seed.astype(jnp.uint32)) * 0x9E3779B1
  out.at[ml.ds(i * 128, 128)][...] = v ^ (v >> 15)


def test_a_bitwise_op_of_uint32_and_int32_hints_the_same_bits_as_uint32():
  """The hint converted both sides to int64 (jnp's promotion): followed, the hash's product and
  shifts ran in int64 and the uint32 store met a second MG102. For &, | and ^ the signed side's bits
  as uint32 give the low half of jnp's int64 result, in the kernel's own type."""
  expect(index_hash, [S((), jnp.int32)], mg.DtypeMismatchError, "idx ^ seed",
         "^ on idx (uint32) and seed (int32): dtypes differ and are never converted implicitly",
         hint="convert seed to uint32, the same bits: idx ^ seed.astype(jnp.uint32) is the low 32 bits of jnp's"
              " int64 result (with jax_enable_x64)", n=256)
  idx = np.arange(256, dtype=np.uint32)
  v = (idx ^ np.int32(-12345).astype(np.uint32)) * np.uint32(0x9E3779B1)
  np.testing.assert_array_equal(np.asarray(index_hash_hint_followed(-12345, n=256, interpret=True)),
                                v ^ (v >> np.uint32(15)))
