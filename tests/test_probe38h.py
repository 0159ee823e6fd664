"""Probe 38h (convolutions, stencils and image kernels written by hand): im2col tiles built tap by tap
in windows of a tensor-core operand, a stencil's weights computed with NumPy while tracing, a halo tile of
no multiple of 128 elements, TMA copies of a column window of SMEM. More in test_probe38h2.py."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F16, BF16, F32 = jnp.float16, jnp.bfloat16, jnp.float32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _x(shape, dtype=F32, seed=0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def _f32(v):
  return np.asarray(v, np.float32)


# ---------------------------------------------------------------- register stores into whole-tile windows of a dot operand
@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0] * x.shape[1], w.shape[1]), F32),
                grid=lambda x, w: (ml.cdiv(x.shape[0] * x.shape[1], 64),))
def conv3x3_im2col(x, w, out):        # x (H, W, C) channels last, w (9 * C, C_out): a 3x3 'same' convolution
  i = ml.program_id(0)
  h, wd, c = x.shape
  p = i * 64 + ml.arange(64)
  py, px = p // wd, p % wd
  a_s = ml.smem((64, 9 * c), x.dtype)
  for a in ml.static_range(3):
    for b in ml.static_range(3):
      yy, xx = py + a - 1, px + b - 1
      inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < wd) & (p < h * wd)
      v = x.at[ml.clip(yy, 0, h - 1)[:, None], ml.clip(xx, 0, wd - 1)[:, None], ml.arange(c)[None, :]].load(
          mask=inside[:, None], other=0.0)
      a_s.at[:, ml.ds((a * 3 + b) * c, c)][...] = v
  w_s = ml.smem(w.shape, w.dtype)
  for k in ml.static_range(3):
    ml.copy(w.at[ml.ds(k * 3 * c, 3 * c)], w_s.at[ml.ds(k * 3 * c, 3 * c)])
  out.at[ml.ds(i * 64, 64), :].store(ml.dot(a_s, w_s), mask=(p < h * wd)[:, None])


def _conv3x3(x, w):
  h, wd, c = x.shape
  xp = jnp.pad(_f32(x), ((1, 1), (1, 1), (0, 0)))
  cols = jnp.concatenate([xp[a:a + h, b:b + wd] for a in range(3) for b in range(3)], -1)
  return cols.reshape(h * wd, 9 * c) @ _f32(w)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32), grid=lambda x, w: (x.shape[0] // 64,))
def conv1d_im2col(x, w, out):         # x (L, C), w (3 * C, C_out): a 1-D convolution of 3 taps as one dot
  i = ml.program_id(0)
  n, c = x.shape
  t = i * 64 + ml.arange(64)
  a_s = ml.smem((64, 3 * c), x.dtype)
  for k in ml.static_range(3):
    src = t + k - 1
    a_s.at[:, k * c:(k + 1) * c][...] = x.at[ml.ds(i * 64 + k - 1, 64), :].load(
        mask=((src >= 0) & (src < n))[:, None], other=0.0)
  w_s = ml.smem(w.shape, w.dtype)
  ml.copy(w, w_s)
  out.at[ml.ds(i * 64, 64), :][...] = ml.dot(a_s, w_s)


def _conv1d(x, w):
  n = x.shape[0]
  xp = jnp.pad(_f32(x), ((1, 1), (0, 0)))
  return jnp.concatenate([xp[k:k + n] for k in range(3)], 1) @ _f32(w)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[2]), F32), grid=lambda x, w: (x.shape[0] // 64,))
def conv1d_channel_chunks(x, w, out):  # x (L, C), w (C // 64, 3 * 64, C_out): 64 channels a pipelined trip
  i = ml.program_id(0)
  n, c = x.shape
  t = i * 64 + ml.arange(64)
  a_s = ml.smem((64, 3 * 64), x.dtype)
  w_s = ml.smem((3 * 64, w.shape[2]), x.dtype)
  acc = ml.zeros((64, w.shape[2]), F32)
  for cc in ml.range(c // 64, stages=2):
    for k in ml.static_range(3):
      src = t + k - 1
      a_s.at[:, k * 64:(k + 1) * 64][...] = x.at[ml.ds(i * 64 + k - 1, 64), ml.ds(cc * 64, 64)].load(
          mask=((src >= 0) & (src < n))[:, None], other=0.0)
    ml.copy(w.at[cc], w_s)
    acc = ml.dot(a_s, w_s, acc)
  out.at[ml.ds(i * 64, 64), :][...] = acc


def _conv1d_chunks(x, w):
  n = x.shape[0]
  xp = jnp.pad(_f32(x), ((1, 1), (0, 0)))
  return sum(jnp.concatenate([xp[k:k + n, cc * 64:(cc + 1) * 64] for k in range(3)], 1) @ _f32(w[cc])
             for cc in range(w.shape[0]))


@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 64), F32), grid=(1,))
def row_halves(a, b, out):            # a 128-row A operand written as two 64-row windows
  a_s = ml.smem((128, 64), F16)
  for h in ml.static_range(2):
    a_s.at[ml.ds(h * 64, 64), :][...] = a.at[ml.ds(h * 64, 64), :][...] * 2
  b_s = ml.smem((64, 64), F16)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s)


@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 64), F32), grid=(1,), block=256)
def row_halves_two_warpgroups(a, b, out):   # 64-row windows the warpgroups cannot split: each stores them whole
  a_s = ml.smem((128, 64), F16)
  for h in ml.static_range(2):
    a_s.at[ml.ds(h * 64, 64), :][...] = a.at[ml.ds(h * 64, 64), :][...] * (h + 1)
  b_s = ml.smem((64, 64), F16)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s)


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 128), F32), grid=(1,))
def b_column_halves(a, b, out):       # a B operand's column windows, one negated, and read back through windows
  a_s = ml.smem((64, 64), BF16)
  ml.copy(a, a_s)
  b_s = ml.smem((64, 128), BF16)
  b_s.at[:, 0:64][...] = b.at[:, 0:64][...]
  b_s.at[:, 64:128][...] = -b.at[:, 64:128][...]
  lo = b_s.at[:, 0:64][...]
  out[...] = ml.dot(a_s, b_s) + ml.concatenate([lo, lo], axis=1).astype(F32)


@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 64), F32), grid=(1,), block=256)
def split_columns(a, b, out):         # two warpgroups, each storing its rows of both windows
  a_s = ml.smem((128, 128), F16)
  a_s.at[:, 0:64][...] = a.at[:, 0:64][...]
  a_s.at[:, 64:128][...] = a.at[:, 64:128][...] * 0.5
  b_s = ml.smem((128, 64), F16)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s)


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32), grid=(1,))
def tf32_columns(a, b, out):          # float32 operands (TF32): tiles 32 columns wide
  a_s = ml.smem((64, 64), F32)
  a_s.at[:, 0:32][...] = a.at[:, 0:32][...]
  a_s.at[:, 32:64][...] = a.at[:, 32:64][...] + 1.0
  b_s = ml.smem((64, 64), F32)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s.T)


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), jnp.int32), grid=(1,))
def int8_columns(a, b, out):          # 8-bit operands: tiles 128 columns wide
  a_s = ml.smem((64, 256), jnp.int8)
  a_s.at[:, 0:128][...] = a.at[:, 0:128][...]
  a_s.at[:, 128:256][...] = a.at[:, 128:256][...]
  b_s = ml.smem((64, 256), jnp.int8)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s.T)


def _tf32(v):
  return (np.asarray(v, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


WINDOW_CASES = [
    (conv3x3_im2col, [((10, 13, 64), F16), ((576, 64), F16)], _conv3x3),
    (conv3x3_im2col, [((5, 7, 64), BF16), ((576, 128), BF16)], _conv3x3),
    (conv1d_im2col, [((256, 64), BF16), ((192, 128), BF16)], _conv1d),
    (conv1d_channel_chunks, [((128, 128), F16), ((2, 192, 64), F16)], _conv1d_chunks),
    (row_halves, [((128, 64), F16), ((64, 64), F16)], lambda a, b: (_f32(a) * 2) @ _f32(b)),
    (row_halves_two_warpgroups, [((128, 64), F16), ((64, 64), F16)],
     lambda a, b: np.concatenate([_f32(a)[:64], _f32(a)[64:] * 2]) @ _f32(b)),
    (b_column_halves, [((64, 64), BF16), ((64, 128), BF16)],
     lambda a, b: _f32(a) @ np.concatenate([_f32(b)[:, :64], -_f32(b)[:, 64:]], 1)
     + np.concatenate([_f32(b)[:, :64]] * 2, 1)),
    (split_columns, [((128, 128), F16), ((128, 64), F16)],
     lambda a, b: np.concatenate([_f32(a)[:, :64], _f32(a)[:, 64:] * 0.5], 1) @ _f32(b)),
    (int8_columns, [((64, 256), jnp.int8), ((64, 256), jnp.int8)],
     lambda a, b: np.asarray(a, np.int64) @ np.asarray(b, np.int64).T),
    (tf32_columns, [((64, 64), F32), ((64, 64), F32)],
     lambda a, b: _tf32(np.concatenate([_f32(a)[:, :32], _f32(a)[:, 32:] + 1], 1)) @ _tf32(b).T),
]


def _inputs(specs):
  return [jnp.asarray(np.random.default_rng(seed).integers(-128, 128, shape), dtype) if dtype == jnp.int8
          else _x(shape, dtype, seed) for seed, (shape, dtype) in enumerate(specs)]


@pytest.mark.parametrize("kernel,specs,ref", WINDOW_CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_register_stores_into_whole_tile_windows_of_a_dot_operand_compile(kernel, specs, ref):
  """An im2col tile built tap by tap, `a_s.at[:, ml.ds(t * c, c)][...] = v`, stored each window of whole
  tiles (64 rows, 128 bytes of columns) into a buffer ml.dot reads: it was MG204 ("slices the rows or
  columns of a_s, which is tiled for the tensor cores"), with a hint joining nine copies of `v`, the
  loop's one name. Such windows now move in the WGMMA layout straight into their tiles."""
  args = _inputs(specs)
  got = kernel(*args, interpret=True)
  np.testing.assert_allclose(_f32(got), ref(*args), rtol=1e-2, atol=5e-2)
  assert "mosaic_gpu" in str(_export(kernel, *[S(a.shape, a.dtype) for a in args]))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel,specs,ref", WINDOW_CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_gpu_register_stores_into_whole_tile_windows_match_jnp(kernel, specs, ref):
  args = _inputs(specs)
  np.testing.assert_allclose(_f32(jax.jit(kernel)(*args)), ref(*args), rtol=1e-2, atol=5e-2)


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32), grid=(1,))
def eight_row_pieces(a, b, out):
  a_s = ml.smem((64, 64), F16)
  for h in ml.static_range(8):
    a_s.at[ml.ds(h * 8, 8), :][...] = a.at[ml.ds(h * 8, 8), :][...]
  b_s = ml.smem((64, 64), F16)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s)


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32), grid=(1,))
def eight_row_pieces_joined(a, b, out):
  a_s = ml.smem((64, 64), F16)
  parts = []
  for h in ml.static_range(8):
    parts = parts + [a.at[ml.ds(h * 8, 8), :][...]]
  a_s[...] = ml.concatenate(parts, axis=0)
  b_s = ml.smem((64, 64), F16)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s)


def test_pieces_stored_in_an_unrolled_loop_are_hinted_as_a_list():
  """Windows narrower than the WGMMA layout's 64 rows still go whole; their pieces, stored by one line of
  an unrolled loop, were hinted as ml.concatenate of that line's text eight times (the last trip's value
  eight times over). The hint collects them in a list as the loop makes them."""
  specs = [S((64, 64), F16), S((64, 64), F16)]
  expect(eight_row_pieces, specs, mg.LayoutError, "a_s.at[ml.ds(h * 8, 8), :]",
         "a_s.at[ml.ds(h * 8, 8), :] slices the rows or columns of a_s, which is tiled for the tensor cores",
         hint="a_s's register stores go whole or as windows of whole tiles, 64 rows by 128 bytes of"
              " columns, static or at run-time starts proven multiples of them (its tiles are laid out for the"
              " tensor cores): collect the pieces in a list as the loop"
              " makes them, parts = parts + [a.at[ml.ds(h * 8, 8), :][...]] (parts = [] before the loop), and"
              " store them at once after it, a_s[...] = ml.concatenate(parts, axis=0)")
  a, b = _inputs([((64, 64), F16), ((64, 64), F16)])
  np.testing.assert_allclose(_f32(eight_row_pieces_joined(a, b, interpret=True)), _f32(a) @ _f32(b),
                             rtol=1e-2, atol=5e-2)
  _export(eight_row_pieces_joined, *specs)


# ---------------------------------------------------------------- a stencil's weights computed with NumPy while tracing
@mg.mgpu_kernel(out_shape=lambda x, **k: x, grid=lambda x, **k: (ml.cdiv(x.shape[0], 256),))
def gauss_numpy(x, out, *, radius: ml.constexpr = 2):
  i = ml.program_id(0)
  g = np.exp(-np.arange(-radius, radius + 1) ** 2 / 2.0)
  idx = i * 256 + ml.arange(256)
  acc = ml.zeros((256,), F32)
  for k in ml.static_range(2 * radius + 1):
    j = idx + k - radius
    acc += g[k] * x.at[ml.ds(i * 256 + k - radius, 256)].load(mask=(j >= 0) & (j < x.shape[0]), other=0.0)
  out.at[ml.ds(i * 256, 256)].store(acc, mask=idx < x.shape[0])


@mg.mgpu_kernel(out_shape=lambda x, **k: x, grid=lambda x, **k: (ml.cdiv(x.shape[0], 256),))
def gauss_list(x, out, *, radius: ml.constexpr = 2):
  i = ml.program_id(0)
  g = [math.exp(-k * k / 2.0) for k in range(-radius, radius + 1)]
  s = sum(g)
  g = [v / s for v in g]
  idx = i * 256 + ml.arange(256)
  acc = ml.zeros((256,), F32)
  for k in ml.static_range(2 * radius + 1):
    j = idx + k - radius
    acc += g[k] * x.at[ml.ds(i * 256 + k - radius, 256)].load(mask=(j >= 0) & (j < x.shape[0]), other=0.0)
  out.at[ml.ds(i * 256, 256)].store(acc, mask=idx < x.shape[0])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def convolve_array(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  out.at[ml.ds(i * 128, 128)][...] = jnp.convolve(v, jnp.array([1.0, 2.0, 1.0]), mode="same")


def test_weights_computed_with_numpy_while_tracing_hint_python_numbers():
  """A Gaussian's taps computed with NumPy in the kernel (`np.exp(-np.arange(-r, r + 1) ** 2 / 2.0)`) were
  hinted only as ml.arange, a run-time tensor of 5 elements that no register holds; a filter's
  `jnp.array([1.0, 2.0, 1.0])` as 'use ml.zeros, ml.full, ml.arange'. The hint adds the Python numbers
  the weights are, which the kernel indexes with static ints."""
  spec = [S((1000,), F32)]
  e = expect(gauss_numpy, spec, mg.KernelTypeError, "np.arange(-radius",
             "np.arange(...) returned an array of shape (5,) while tracing; a kernel's tensors are built with ml.*"
             " functions")
  assert e.hint == ("write ml.arange(-radius, radius + 1) (int32); for numbers known while tracing (a filter's"
                    " taps, a window's weights), use a list of Python numbers, [math.exp(-k * k / 2.0) for k in"
                    " range(-2, 3)], and index it with static ints (w[k] in an ml.static_range loop), or pass a"
                    " tuple as a constexpr")
  # (jnp.array([1.0, 2.0, 1.0]) is a register table since probe 51n, and jnp.convolve(v, table, mode="same") the
  # taps' sum over v shifted)
  v = _x((256,))
  want = np.concatenate([np.convolve(np.asarray(c, np.float64), [1.0, 2.0, 1.0], mode="same")
                         for c in (v[:128], v[128:])])
  np.testing.assert_allclose(convolve_array(v, interpret=True), want, rtol=1e-5, atol=1e-5)     # (each program's 128)
  x = _x((1000,))
  g = np.exp(-np.arange(-2, 3) ** 2 / 2.0)
  want = np.convolve(np.asarray(x, np.float64), g / g.sum(), mode="same")
  np.testing.assert_allclose(gauss_list(x, interpret=True), want, rtol=1e-5, atol=1e-5)
  _export(gauss_list, *spec)


# ---------------------------------------------------------------- a halo tile whose size no warpgroup divides
def _jacobi(shape, halo=None):
  @mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
  def jacobi(x, out):             # two Jacobi sweeps of a 64 x 64 grid with a zero halo, in SMEM
    a = ml.smem(shape, F32)
    b = ml.smem(shape, F32)
    a[...] = ml.zeros(shape, F32) if halo is None else ml.zeros(shape, F32) + halo
    b[...] = ml.zeros(shape, F32)
    a.at[1:65, 4:68][...] = x[...]
    b.at[1:65, 4:68][...] = 0.25 * (a.at[0:64, 4:68][...] + a.at[2:66, 4:68][...] + a.at[1:65, 3:67][...]
                                    + a.at[1:65, 5:69][...])
    a.at[1:65, 4:68][...] = 0.25 * (b.at[0:64, 4:68][...] + b.at[2:66, 4:68][...] + b.at[1:65, 3:67][...]
                                    + b.at[1:65, 5:69][...])
    out[...] = a.at[1:65, 4:68][...]
  return jacobi


def test_a_halo_tile_of_no_multiple_of_128_elements_computes():
  """A (66, 72) halo buffer zeroed from registers was MG204 with 'work on tiles of 128 elements or more,
  e.g. (128,) or (4, 32)', then a hint naming the nearest shapes that hold a multiple of 128 elements. Since probe
  46a the zeros stored whole are the number 0, stored in windows registers hold; since probe 59a a tile of that
  shape computed on (`ml.zeros(shape) + halo`) is stored into its SMEM buffer through the compiler's scratch, in
  pieces registers hold (design note 193): every shape computes."""
  x = _x((64, 64))
  want = np.asarray(x)
  for _ in range(2):
    p = np.pad(want, 1)
    want = 0.25 * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:])
  for shape, halo in (((80, 72), None), ((66, 128), None), ((66, 72), None), ((66, 72), 0.0)):
    np.testing.assert_allclose(_jacobi(shape, halo)(x, interpret=True), want, rtol=1e-5, atol=1e-6)
    _export(_jacobi(shape, halo), S((64, 64), F32))


# ---------------------------------------------------------------- TMA copies of a column window of SMEM
@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32), grid=(1,))
def tap_by_copy(a, b, out):
  a_s = ml.smem((64, 128), F16)
  ml.copy(a.at[:, 0:64], a_s.at[:, 0:64])
  a_s.at[:, 64:128][...] = ml.exp(a.at[:, 64:128][...])
  b_s = ml.smem((128, 64), F16)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s)


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32), grid=(1,))
def tap_by_registers(a, b, out):
  a_s = ml.smem((64, 128), F16)
  a_s.at[:, 0:64][...] = a.at[:, 0:64][...]
  a_s.at[:, 64:128][...] = ml.exp(a.at[:, 64:128][...])
  b_s = ml.smem((128, 64), F16)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def halves_by_copy(x, out):
  b = ml.smem((64, 128), F32)
  b[...] = x[...] * 2
  ml.copy(b.at[:, 0:64], out.at[:, 0:64])


def test_a_tma_copy_of_a_column_window_of_smem_hints_the_register_copy():
  """ml.copy into (or out of) a column window of an SMEM buffer was hinted 'slice only the leading dimensions
  of an SMEM buffer' alone; the hint adds the register copy of the same window, which a buffer ml.dot reads
  now takes too (whole-tile windows)."""
  specs = [S((64, 128), F16), S((128, 64), F16)]
  expect(tap_by_copy, specs, mg.TmaLimitError, "ml.copy(a.at[:, 0:64]",
         "TMA copies need a contiguous SMEM window; a_s.at[:, 0:64] slices an inner dimension",
         hint="slice only the leading dimensions of an SMEM buffer (e.g. stages: buf.at[s]), or read it into"
              " registers and store it there, a_s.at[:, 0:64][...] = a.at[:, 0:64][...] (a masked"
              " a.at[:, 0:64].load(mask=..., other=0) where it may run past the array's end)")
  expect(halves_by_copy, [S((64, 128), F32)], mg.TmaLimitError, "ml.copy(b.at",
         "TMA copies need a contiguous SMEM window; b.at[:, 0:64] slices an inner dimension",
         hint="slice only the leading dimensions of an SMEM buffer (e.g. stages: buf.at[s]), or store it from"
              " registers, out.at[:, 0:64][...] = b.at[:, 0:64][...]")
  a, b = _inputs([((64, 128), F16), ((128, 64), F16)])
  want = np.concatenate([_f32(a)[:, :64], np.exp(_f32(a)[:, 64:])], 1) @ _f32(b)
  np.testing.assert_allclose(_f32(tap_by_registers(a, b, interpret=True)), want, rtol=1e-2, atol=5e-2)
  _export(tap_by_registers, *specs)
