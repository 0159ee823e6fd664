"""Probe 47d: atomics and data-dependent writes as Triton users write them. Masked atomics
(`tl.atomic_add(ptr, v, mask=m)`: scatter-adds with repeated indices at a tail, histograms, a window
past the array's end, max and min) were MG003 "takes no mask="; atomic scatters into an SMEM buffer
of two axes were MG003 too."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, F16, I32 = jnp.float32, jnp.float16, jnp.int32


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _exports(kernel, *specs, **constexprs):
  """Builds for CUDA (the real Mosaic GPU module, verified) as jax.export does."""
  jax.export.export(jax.jit(lambda *a: kernel(*a, **constexprs)), platforms=["cuda"])(*specs)


def _rng(seed):
  return np.random.default_rng(seed)


# ---------------------------------------------------------------- masked atomics
@mg.mgpu_kernel(out_shape=lambda x, idx, *, n: S((n,), x.dtype), grid=lambda x, idx, *, n: (ml.cdiv(x.shape[0], 128),))
def scatter_add_tail(x, idx, out, *, n: ml.constexpr):
  """Triton's scatter-add: a tail program's lanes past the end are masked off (their index reads 0)."""
  pid = ml.program_id(0)
  offs = pid * 128 + ml.arange(128)
  m = offs < x.shape[0]
  v = ml.load(x.at[offs], mask=m, other=0.0)
  i = ml.load(idx.at[offs], mask=m, other=0)
  ml.atomic_add(out.at[i], v, mask=m)


@mg.mgpu_kernel(out_shape=lambda x, *, bins: S((bins,), I32), grid=lambda x, *, bins: (ml.cdiv(x.shape[0], 256),))
def histogram(x, h, *, bins: ml.constexpr):
  pid = ml.program_id(0)
  offs = pid * 256 + ml.arange(256)
  v = ml.load(x.at[offs], mask=offs < x.shape[0], other=0)
  ml.atomic_add(h.at[v], 1, mask=offs < x.shape[0])


@mg.mgpu_kernel(out_shape=lambda x, seg: S((10,), F32), grid=lambda x, seg: (ml.cdiv(x.shape[0], 128),))
def segment_max(x, seg, out):
  pid = ml.program_id(0)
  offs = pid * 128 + ml.arange(128)
  m = offs < x.shape[0]
  ml.atomic_max(out.at[ml.load(seg.at[offs], mask=m, other=0)], ml.load(x.at[offs], mask=m, other=0.0), mask=m)


def test_masked_scatters_skip_the_lanes_the_mask_keeps_off():
  rng = _rng(0)
  x, idx = rng.standard_normal(300).astype(np.float32), rng.integers(0, 40, 300).astype(np.int32)
  want = np.zeros(40, np.float64)
  np.add.at(want, idx, x)
  np.testing.assert_allclose(scatter_add_tail(x, idx, interpret=True, n=40), want, rtol=1e-5, atol=1e-5)
  v = rng.integers(0, 64, 1000).astype(np.int32)
  np.testing.assert_array_equal(histogram(v, interpret=True, bins=64), np.bincount(v, minlength=64))
  y, seg = rng.standard_normal(300).astype(np.float32) - 3, rng.integers(0, 10, 300).astype(np.int32)
  top = np.full(10, -np.inf, np.float32)
  np.maximum.at(top, seg, y)
  np.testing.assert_array_equal(segment_max(y, seg, interpret=True), top)
  _exports(scatter_add_tail, S((300,), F32), S((300,), I32), n=40)
  _exports(segment_max, S((300,), F32), S((300,), I32))


@mg.mgpu_kernel(out_shape=lambda p: S((p.shape[1], 32), F32), grid=lambda p: (ml.cdiv(p.shape[1], 64),))
def rows_past_the_end(p, dw):
  """Layer norm's dw as Triton writes it: the last program's window runs past dw's end, under the mask."""
  j = ml.program_id(0)
  cols = j * 64 + ml.arange(64)
  t = p.at[:, ml.ds(j * 64, 64)].load(mask=cols[None, :] < p.shape[1], other=0.0).T
  ml.atomic_add(dw.at[ml.ds(j * 64, 64), :], t, mask=(cols < p.shape[1])[:, None])


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32),
                grid=lambda a, b: (ml.cdiv(a.shape[0], 64), ml.cdiv(b.shape[1], 64), 2))
def split_k(a, b, c):
  """Split-K: two programs add their partial products into each tile, whose windows leave c along both axes."""
  i, j, k = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  half = a.shape[1] // 2
  a_s, b_s = ml.smem((64, half), a.dtype), ml.smem((half, 64), b.dtype)
  ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * half, half)], a_s)
  ml.copy(b.at[ml.ds(k * half, half), ml.ds(j * 64, 64)], b_s)
  rows, cols = i * 64 + ml.arange(64), j * 64 + ml.arange(64)
  ml.atomic_add(c.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)], ml.dot(a_s, b_s),
                mask=(rows[:, None] < c.shape[0]) & (cols[None, :] < c.shape[1]))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 64), F32), grid=lambda x: (ml.cdiv(x.shape[0], 64),))
def row_tiles_past_the_end(x, out):
  """Tiles of rows whose last one runs past the end: each row's consecutive elements go in vector `red`s."""
  j = ml.program_id(0)
  r = j * 64 + ml.arange(64)
  v = x.at[ml.ds(j * 64, 64), :].load(mask=(r < x.shape[0])[:, None], other=0.0)
  ml.atomic_add(out.at[ml.ds(j * 64, 64), :], v * 2.0, mask=(r < x.shape[0])[:, None])


@mg.mgpu_kernel(out_shape=lambda x, *, n: S((n,), F16), grid=lambda x, *, n: (ml.cdiv(n, 128), x.shape[0] // n))
def f16_tail(x, out, *, n: ml.constexpr):
  pid, r = ml.program_id(0), ml.program_id(1)
  offs = pid * 128 + ml.arange(128)
  ml.atomic_add(out.at[ml.ds(pid * 128, 128)], ml.load(x.at[r * n + offs], mask=offs < n, other=0.0), mask=offs < n)


@mg.mgpu_kernel(out_shape=lambda x, s: S((128,), F32))
def at_a_start_from_data(x, s, out):
  """A window at a start read from memory, maybe negative: no position below 0 is updated (jnp's scatter
  would count it from the end)."""
  ml.atomic_add(out.at[ml.ds(s[0], 64)], x[...], mask=x[...] > -1.0)


def _at_start(x, s):
  out = np.zeros(128, np.float64)
  for k in range(64):
    if 0 <= s + k < 128 and x[k] > -1:
      out[s + k] += x[k]
  return out


def test_a_masked_window_may_run_past_the_arrays_end():
  rng = _rng(1)
  p = rng.standard_normal((32, 130)).astype(np.float32)
  np.testing.assert_allclose(rows_past_the_end(p, interpret=True), p.T, rtol=1e-6, atol=1e-6)
  x = rng.standard_normal(600).astype(np.float16)
  np.testing.assert_allclose(np.asarray(f16_tail(x, interpret=True, n=200), np.float32),
                             x.astype(np.float32).reshape(3, 200).sum(0), rtol=1e-2, atol=1e-2)
  y = rng.standard_normal(64).astype(np.float32)
  for s in (-10, 30, 100):
    np.testing.assert_allclose(at_a_start_from_data(y, np.array([s], np.int32), interpret=True), _at_start(y, s),
                               rtol=1e-6, atol=1e-6)
  y2 = rng.standard_normal((150, 64)).astype(np.float32)
  np.testing.assert_allclose(row_tiles_past_the_end(y2, interpret=True), 2 * y2, rtol=1e-6, atol=1e-6)
  assert "red.relaxed.gpu.global.add.v2.f32" in row_tiles_past_the_end.mlir(S((150, 64), F32))
  a, b = rng.standard_normal((100, 128)).astype(jnp.bfloat16), rng.standard_normal((128, 96)).astype(jnp.bfloat16)
  np.testing.assert_allclose(split_k(a, b, interpret=True), np.asarray(a, np.float32) @ np.asarray(b, np.float32),
                             rtol=1e-4, atol=1e-3)
  _exports(rows_past_the_end, S((32, 130), F32))
  _exports(split_k, S((100, 128), jnp.bfloat16), S((128, 96), jnp.bfloat16))
  _exports(f16_tail, S((600,), F16), n=200)
  _exports(at_a_start_from_data, S((64,), F32), S((1,), I32))


@mg.mgpu_kernel(out_shape=lambda e, *, n: S((n,), I32), grid=lambda e, *, n: (e.shape[0],))
def valid_counts(e, out, *, n: ml.constexpr):
  """Per-expert token counts, one token a program: an id outside 0..n-1 is masked off, and no update reaches
  outside out (the element's index where the mask is off was out[9] here: past the end)."""
  b = e[ml.program_id(0)]
  ml.atomic_add(out.at[b], 1, mask=(b >= 0) & (b < n))


@mg.mgpu_kernel(out_shape=lambda g, e, *, n: S((n, g.shape[1]), F32), grid=lambda g, e, *, n: (g.shape[0],))
def rows_by_id(g, e, out, *, n: ml.constexpr):
  """index_add_ of one row a program at a row read from memory, masked at the end only: a negative row is not
  counted from the end (a window never is), so it is dropped too."""
  b = e[ml.program_id(0)]
  ml.atomic_add(out.at[b, :], g.at[ml.program_id(0)][...], mask=b < n)


@mg.mgpu_kernel(out_shape=lambda lens: S((256,), I32), grid=lambda lens: (lens.shape[0],))
def coverage(lens, out):
  """How many sequences cover each position: windows at a loop's run-time starts, the last one masked."""
  n = lens[ml.program_id(0)]
  for s in range(0, n, 64):
    ml.atomic_add(out.at[ml.ds(s, 64)], 1, mask=s + ml.arange(64) < n)


def test_masked_elements_and_rows_at_indices_read_from_memory():
  rng = _rng(5)
  e = rng.integers(-2, 10, 64).astype(np.int32)
  np.testing.assert_array_equal(valid_counts(e, interpret=True, n=8), np.bincount(e[(e >= 0) & (e < 8)], minlength=8))
  g, rows = rng.standard_normal((32, 64)).astype(np.float32), rng.integers(-3, 10, 32).astype(np.int32)
  want = np.zeros((8, 64), np.float64)
  np.add.at(want, rows[(rows >= 0) & (rows < 8)], g[(rows >= 0) & (rows < 8)])
  np.testing.assert_allclose(rows_by_id(g, rows, interpret=True, n=8), want, rtol=1e-6, atol=1e-6)
  lens = rng.integers(0, 257, 8).astype(np.int32)
  np.testing.assert_array_equal(coverage(lens, interpret=True), (np.arange(256)[None, :] < lens[:, None]).sum(0))
  _exports(valid_counts, S((64,), I32), n=8)
  _exports(rows_by_id, S((32, 64), F32), S((32,), I32), n=8)
  _exports(coverage, S((8,), I32))


@mg.mgpu_kernel(out_shape=lambda x: S((300,), F16), grid=lambda x: (2,))
def half_max_tail(x, out):
  j = ml.program_id(0)
  offs = j * 256 + ml.arange(256)
  ml.atomic_max(out.at[ml.ds(j * 256, 256)], ml.load(x.at[offs], mask=offs < 300, other=0.0), mask=offs < 300)


def test_a_16_bit_max_past_the_end_says_it_goes_one_element_at_a_time():
  # (it was MG106, whose hint made the output float32; since probe 56b one element at a time is a loop of
  # atom.cas.b16 an element)
  x = _rng(3).standard_normal(300).astype(np.float16)
  np.testing.assert_array_equal(np.asarray(half_max_tail(x, interpret=True)), x)
  _exports(half_max_tail, S((300,), F16))


@mg.mgpu_kernel(out_shape=lambda x: (S((128,), F32), S((), I32), S((128,), F32)), grid=lambda x: (x.shape[0] // 128,))
def inside_windows(x, pos, even, kept):
  """Windows inside their arrays: the mask's elements, a scalar mask on one element, and an SMEM buffer."""
  pid = ml.program_id(0)
  v = x.at[ml.ds(pid * 128, 128)][...]
  ml.atomic_add(pos, v, mask=v > 0)
  ml.atomic_add(even, ml.sum((v > 0).astype(jnp.int32)), mask=pid % 2 == 0)
  b = ml.smem((128,), jnp.float32)
  b[...] = ml.zeros((128,), jnp.float32)
  ml.atomic_add(b, v, mask=v < 0)
  ml.atomic_add(kept, b[...])


def test_masked_windows_inside_their_arrays():
  x = _rng(2).standard_normal(512).astype(np.float32)
  pos, even, kept = inside_windows(x, interpret=True)
  r = x.reshape(4, 128)
  np.testing.assert_allclose(pos, np.where(r > 0, r, 0).sum(0), rtol=1e-5, atol=1e-6)
  assert int(even) == int((r[::2] > 0).sum())
  np.testing.assert_allclose(kept, np.where(r < 0, r, 0).sum(0), rtol=1e-5, atol=1e-6)
  _exports(inside_windows, S((512,), F32))


@mg.mgpu_kernel(out_shape=lambda x, i: (S((128,), F32), S((40,), F32)), grid=lambda x, i: (2,))
def constant_masks(x, i, out, top, *, on: ml.constexpr = True):
  """A mask known while tracing (a constexpr flag): True updates, False leaves memory as it is."""
  pid = ml.program_id(0)
  ml.atomic_add(out, x.at[ml.ds(pid * 128, 128)][...], mask=on)
  ml.atomic_add(out, x.at[ml.ds(pid * 128, 128)][...], mask=not on)
  ml.atomic_max(top.at[i.at[ml.ds(pid * 128, 128)][...]], x.at[ml.ds(pid * 128, 128)][...], mask=on)


def test_a_mask_known_while_tracing():
  """mask=False was MG003 "ml.where's condition cond is a Python bool", in the compiler's words."""
  rng = _rng(6)
  x, i = rng.standard_normal(256).astype(np.float32), rng.integers(0, 40, 256).astype(np.int32)
  top = np.full(40, -np.inf, np.float32)
  np.maximum.at(top, i, x)
  for on in (True, False):
    s, t = constant_masks(x, i, interpret=True, on=on)
    np.testing.assert_allclose(s, x.reshape(2, 128).sum(0), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(t, top if on else np.full(40, -np.inf, np.float32))
  _exports(constant_masks, S((256,), F32), S((256,), I32), on=False)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32))
def float_mask(x, out):
  v = x[...]
  ml.atomic_add(out, v, mask=v)


@mg.mgpu_kernel(out_shape=lambda x: S((64,), F32))
def mask_too_wide(x, out):
  ml.atomic_max(out, x[...], mask=ml.arange(64)[:, None] < ml.arange(64)[None, :])


def test_a_mask_that_is_not_one_says_so():
  expect(float_mask, [S((128,), F32)], mg.KernelTypeError, "ml.atomic_add(",
         "ml.atomic_add's mask must be a boolean tensor or scalar, got float32 values",
         hint="pass a comparison, mask=cols < n (the elements it keeps are updated; of a number mask, its nonzero"
              " elements: mask=m != 0)")
  expect(mask_too_wide, [S((64,), F32)], mg.ShapeMismatchError, "ml.atomic_max(",
         "ml.atomic_max's mask of shape (64, 64) does not fit the window's shape (64,)",
         hint="a mask of shape (64,), or one that broadcasts to it")


# ---------------------------------------------------------------- atomic scatters into SMEM of two axes or more
@mg.mgpu_kernel(out_shape=lambda ids, w: S((8, 32), F32))
def grouped_histogram(ids, w, out):
  """A CTA's histogram per group of 8: ids past either end of a row are dropped, negative ones count from it."""
  h = ml.smem((8, 32), jnp.float32)
  h[...] = ml.zeros((8, 32), jnp.float32)
  ml.atomic_add(h.at[ml.arange(ids.shape[0]) % 8, ids[...]], w[...])
  out[...] = h[...]


@mg.mgpu_kernel(out_shape=lambda tk: (S((16, 8), I32), S((16, 8), I32)), block=256)
def expert_slots(tk, hi, lo):
  """Top-2 routing's last and first token per (expert, slot), two warpgroups, copied out by TMA."""
  t = tk[...]
  pos = ml.broadcast_to(ml.arange(t.shape[0])[:, None], t.shape)
  a = ml.smem((16, 8), jnp.int32)
  b = ml.smem((16, 8), jnp.int32)
  a[...] = ml.full((16, 8), -1, jnp.int32)
  b[...] = ml.full((16, 8), 1 << 30, jnp.int32)
  ml.atomic_max(a.at[t, pos % 8], pos)
  ml.atomic_min(b.at[t, pos % 8], pos)
  ml.copy(a, hi)
  ml.copy(b, lo)


@mg.mgpu_kernel(out_shape=lambda ids, *, B: S((2, 4, B), I32))
def per_row_counts(ids, out, *, B: ml.constexpr):
  """A buffer of three axes through a view of it, masked (negative ids skipped), in a loop."""
  h = ml.smem((2, 4, B), jnp.int32)
  h[...] = ml.zeros((2, 4, B), jnp.int32)
  for k in ml.static_range(2):
    v = ids.at[k][...]
    ml.atomic_add(h.at[k].at[ml.arange(128) % 4, v], 1, mask=v >= 0)
  out[...] = h[...]


@mg.mgpu_kernel(out_shape=lambda a, b, r: S((64, 64), F32))
def product_plus_counts(a, b, r, out):
  """A tensor-core tile stored into a buffer (which the layout pass would tile), then scattered into."""
  a_s, b_s = ml.smem((64, 64), jnp.float16), ml.smem((64, 64), jnp.float16)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c = ml.smem((64, 64), jnp.float32)
  c[...] = ml.dot(a_s, b_s)
  ml.atomic_add(c.at[r[...], ml.arange(128) % 64], 1.0)
  out[...] = c[...]


def _smem_references(rng):
  ids, w = rng.integers(-3, 36, 512).astype(np.int32), rng.standard_normal(512).astype(np.float32)
  keep = (ids >= -32) & (ids < 32)
  gh = np.zeros((8, 32), np.float64)
  np.add.at(gh, ((np.arange(512) % 8)[keep], ids[keep]), w[keep])
  tk = rng.integers(0, 16, (256, 2)).astype(np.int32)
  pos = np.broadcast_to(np.arange(256)[:, None], tk.shape)
  hi, lo = np.full((16, 8), -1, np.int32), np.full((16, 8), 1 << 30, np.int32)
  np.maximum.at(hi, (tk, pos % 8), pos)
  np.minimum.at(lo, (tk, pos % 8), pos)
  rows = rng.integers(-4, 40, (2, 128)).astype(np.int32)
  pc = np.zeros((2, 4, 40), np.int32)
  for k in range(2):
    on = rows[k] >= 0
    np.add.at(pc[k], ((np.arange(128) % 4)[on], rows[k][on]), 1)
  a, b = rng.standard_normal((64, 64)).astype(np.float16), rng.standard_normal((64, 64)).astype(np.float16)
  r = rng.integers(0, 64, 128).astype(np.int32)
  pp = a.astype(np.float32) @ b.astype(np.float32)
  np.add.at(pp, (r, np.arange(128) % 64), 1.0)
  return (ids, w, gh), (tk, hi, lo), (rows, pc), (a, b, r, pp)


def test_atomic_scatters_into_smem_buffers_of_two_axes_or_more():
  (ids, w, gh), (tk, hi, lo), (rows, pc), (a, b, r, pp) = _smem_references(_rng(3))
  np.testing.assert_allclose(grouped_histogram(ids, w, interpret=True), gh, rtol=1e-5, atol=1e-5)
  got_hi, got_lo = expert_slots(tk, interpret=True)
  np.testing.assert_array_equal(got_hi, hi)
  np.testing.assert_array_equal(got_lo, lo)
  np.testing.assert_array_equal(per_row_counts(rows, interpret=True, B=40), pc)
  np.testing.assert_allclose(product_plus_counts(a, b, r, interpret=True), pp, rtol=1e-3, atol=1e-3)
  assert "red.shared::cta.relaxed.cta.add.f32" in grouped_histogram.mlir(S((512,), I32), S((512,), F32))
  _exports(expert_slots, S((256, 2), I32))
  _exports(per_row_counts, S((2, 128), I32), B=40)
  _exports(product_plus_counts, S((64, 64), F16), S((64, 64), F16), S((128,), I32))


@mg.mgpu_kernel(out_shape=lambda a, b, r: S((64, 64), F32))
def into_an_operand(a, b, r, out):
  a_s, b_s = ml.smem((64, 64), jnp.float32), ml.smem((64, 64), jnp.float32)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  ml.atomic_add(a_s.at[r[...], ml.arange(128) % 64], 1.0)
  out[...] = ml.dot(a_s, b_s.T)


def test_an_atomic_scatter_into_a_dot_operand_says_what_works():
  expect(into_an_operand, [S((64, 64), F32), S((64, 64), F32), S((128,), I32)], mg.KernelTypeError,
         "ml.atomic_add(", "a_s is an ml.dot operand, which the compiler tiles for the tensor cores, and an atomic"
         " scatter updates untiled SMEM buffers (each element at its own address)",
         hint="scatter into a buffer of its own, h = ml.smem((64, 64), jnp.float32) filled with zeros, and add it"
              " before the ml.dot: a_s[...] = a_s[...] + h[...]")


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_smem_scatters_of_two_axes_on_the_gpu():
  (ids, w, gh), (tk, hi, lo), (rows, pc), (a, b, r, pp) = _smem_references(_rng(13))
  np.testing.assert_allclose(jax.jit(grouped_histogram)(ids, w), gh, rtol=1e-5, atol=1e-5)
  got_hi, got_lo = jax.jit(expert_slots)(tk)
  np.testing.assert_array_equal(got_hi, hi)
  np.testing.assert_array_equal(got_lo, lo)
  np.testing.assert_array_equal(jax.jit(lambda x: per_row_counts(x, B=40))(rows), pc)
  np.testing.assert_allclose(jax.jit(product_plus_counts)(a, b, r), product_plus_counts(a, b, r, interpret=True),
                             rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------- 16-bit float adds, float32 max and min into SMEM
@mg.mgpu_kernel(out_shape=lambda ids, w: S((4, 16), w.dtype))
def half_sums(ids, w, out):
  """Per-quarter sums of 16-bit weights by id in an SMEM buffer of the weights' dtype, id 3 masked off."""
  h = ml.smem((4, 16), w.dtype)
  h[...] = ml.zeros((4, 16), w.dtype)
  ml.atomic_add(h.at[ml.arange(256) // 64, ids[...]], w[...], mask=ids[...] != 3)
  out[...] = h[...]


@mg.mgpu_kernel(out_shape=lambda seg, x: (S((16,), F32), S((16,), F32)))
def segment_extremes(seg, x, top, low):
  """A CTA's per-segment float32 max and min (an amax per expert), negatives and ids past the end included."""
  hi, lo = ml.smem((16,), jnp.float32), ml.smem((16,), jnp.float32)
  hi[...] = ml.full((16,), -jnp.inf, jnp.float32)
  lo[...] = ml.full((16,), jnp.inf, jnp.float32)
  ml.atomic_max(hi.at[seg[...]], x[...])
  ml.atomic_min(lo.at[seg[...]], x[...])
  top[...] = hi[...]
  low[...] = lo[...]


def _half_reference(ids, w):
  out = np.zeros((4, 16), np.float64)
  on = ids != 3
  np.add.at(out, ((np.arange(256) // 64)[on], ids[on]), np.asarray(w, np.float32)[on])
  return out


def _extremes_reference(seg, x):
  top, low = np.full(16, -np.inf, np.float32), np.full(16, np.inf, np.float32)
  on = (seg >= -16) & (seg < 16)
  np.maximum.at(top, seg[on], x[on])
  np.minimum.at(low, seg[on], x[on])
  return top, low


def test_16_bit_float_adds_and_float32_max_min_scatter_into_smem():
  rng = _rng(4)
  ids = rng.integers(0, 16, 256).astype(np.int32)
  for dt in (jnp.float16, jnp.bfloat16):
    w = (rng.integers(-4, 5, 256) / 4).astype(dt)      # (quarters: every partial sum exact in 16 bits)
    np.testing.assert_array_equal(np.asarray(half_sums(ids, w, interpret=True), np.float32), _half_reference(ids, w))
  seg, x = rng.integers(-3, 20, 256).astype(np.int32), rng.standard_normal(256).astype(np.float32)
  for g, want in zip(segment_extremes(seg, x, interpret=True), _extremes_reference(seg, x)):
    np.testing.assert_array_equal(g, want)
  assert "red.shared::cta.relaxed.cta.add.noftz.bf16" in half_sums.mlir(S((256,), I32), S((256,), jnp.bfloat16))
  txt = segment_extremes.mlir(S((256,), I32), S((256,), F32))
  assert "red.shared::cta.relaxed.cta.max.s32" in txt and "red.shared::cta.relaxed.cta.min.u32" in txt
  _exports(half_sums, S((256,), I32), S((256,), F16))
  _exports(segment_extremes, S((256,), I32), S((256,), F32))


@mg.mgpu_kernel(out_shape=lambda ids, x: S((16,), x.dtype))
def half_max(ids, x, out):
  h = ml.smem((16,), x.dtype)
  h[...] = ml.full((16,), -1e4, x.dtype)
  ml.atomic_max(h.at[ids[...]], x[...])
  out[...] = h[...]


def test_a_16_bit_float_max_into_smem_hints_a_float32_buffer():
  # (it was MG106, whose hint allocated a float32 buffer; since probe 56b a loop of atom.shared.cas.b32 on each
  # element's word)
  rng = _rng(6)
  ids, x = rng.integers(0, 16, 256).astype(np.int32), rng.standard_normal(256).astype(jnp.bfloat16)
  want = np.full(16, -1e4, np.float32)
  np.maximum.at(want, ids, np.asarray(x, np.float32))
  np.testing.assert_array_equal(np.asarray(half_max(ids, x, interpret=True), np.float32), want)
  assert "atom.shared.cas.b32" in half_max.mlir(S((256,), I32), S((256,), jnp.bfloat16))
  _exports(half_max, S((256,), I32), S((256,), jnp.bfloat16))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_16_bit_float_adds_and_float32_max_min_into_smem_on_the_gpu():
  rng = _rng(14)
  ids = rng.integers(0, 16, 256).astype(np.int32)
  for dt in (jnp.float16, jnp.bfloat16):
    w = (rng.integers(-4, 5, 256) / 4).astype(dt)
    np.testing.assert_array_equal(np.asarray(jax.jit(half_sums)(ids, w), np.float32), _half_reference(ids, w))
  seg, x = rng.integers(-3, 20, 256).astype(np.int32), rng.standard_normal(256).astype(np.float32)
  for g, want in zip(jax.jit(segment_extremes)(seg, x), _extremes_reference(seg, x)):
    np.testing.assert_array_equal(g, want)


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_masked_atomics_on_the_gpu():
  rng = _rng(10)
  x, idx = rng.standard_normal(300).astype(np.float32), rng.integers(0, 40, 300).astype(np.int32)
  want = np.zeros(40, np.float64)
  np.add.at(want, idx, x)
  np.testing.assert_allclose(jax.jit(lambda a, b: scatter_add_tail(a, b, n=40))(x, idx), want, rtol=1e-5, atol=1e-5)
  v = rng.integers(0, 64, 1000).astype(np.int32)
  np.testing.assert_array_equal(jax.jit(lambda a: histogram(a, bins=64))(v), np.bincount(v, minlength=64))
  y, seg = rng.standard_normal(300).astype(np.float32) - 3, rng.integers(0, 10, 300).astype(np.int32)
  np.testing.assert_array_equal(jax.jit(segment_max)(y, seg), segment_max(y, seg, interpret=True))
  p = rng.standard_normal((32, 130)).astype(np.float32)
  np.testing.assert_allclose(jax.jit(rows_past_the_end)(p), p.T, rtol=1e-6, atol=1e-6)
  y2 = rng.standard_normal((150, 64)).astype(np.float32)
  np.testing.assert_allclose(jax.jit(row_tiles_past_the_end)(y2), 2 * y2, rtol=1e-6, atol=1e-6)
  a, b = rng.standard_normal((100, 128)).astype(jnp.bfloat16), rng.standard_normal((128, 96)).astype(jnp.bfloat16)
  np.testing.assert_allclose(jax.jit(split_k)(a, b), np.asarray(a, np.float32) @ np.asarray(b, np.float32),
                             rtol=1e-3, atol=1e-2)
  h = rng.standard_normal(600).astype(np.float16)
  np.testing.assert_allclose(np.asarray(jax.jit(lambda a: f16_tail(a, n=200))(h), np.float32),
                             h.astype(np.float32).reshape(3, 200).sum(0), rtol=1e-2, atol=1e-2)
  z = rng.standard_normal(64).astype(np.float32)
  for s in (-10, 30, 100):
    np.testing.assert_allclose(jax.jit(at_a_start_from_data)(z, np.array([s], np.int32)), _at_start(z, s),
                               rtol=1e-6, atol=1e-6)
  e = rng.integers(-2, 10, 64).astype(np.int32)
  np.testing.assert_array_equal(jax.jit(lambda a: valid_counts(a, n=8))(e),
                                np.bincount(e[(e >= 0) & (e < 8)], minlength=8))
  g, rows = rng.standard_normal((32, 64)).astype(np.float32), rng.integers(-3, 10, 32).astype(np.int32)
  np.testing.assert_allclose(jax.jit(lambda a, b: rows_by_id(a, b, n=8))(g, rows),
                             rows_by_id(g, rows, interpret=True, n=8), rtol=1e-6, atol=1e-6)
  lens = rng.integers(0, 257, 8).astype(np.int32)
  np.testing.assert_array_equal(jax.jit(coverage)(lens), (np.arange(256)[None, :] < lens[:, None]).sum(0))
  w = rng.standard_normal(512).astype(np.float32)
  for g, i in zip(jax.jit(inside_windows)(w), inside_windows(w, interpret=True)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(i), rtol=1e-5, atol=1e-5)
