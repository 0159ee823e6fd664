"""Probe 46h (convolutions, pooling and scans): an im2col tile built tap by tap in a tensor-core operand,
`a_s[:, k * c:(k + 1) * c] = x.at[...][...]`, whose taps are narrower than 128 bytes (32 float16 or 16
bfloat16 channels, 8 float32 ones): the operand takes the swizzle its windows divide (frontend/swizzles.py), so
each tap is a store of whole tiles. Before, a buffer whose rows were not 128 bytes (three 32-channel taps,
(64, 96) float16) failed inside Mosaic GPU (MG900), and one whose rows were (four taps, (64, 128)) was MG204."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from jax import lax
from locate import expect

S = jax.ShapeDtypeStruct
F16, BF16, F32 = jnp.float16, jnp.bfloat16, jnp.float32


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _input(shape, dtype, seed=0, scale=1.0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape) * scale, dtype)


def _f64(x):
  return np.asarray(x).astype(np.float64)


# ---------------------------------------------------------------- im2col taps narrower than a 128-byte tile
@mg.mgpu_kernel(out_shape=lambda x, w, *, taps: S((x.shape[0] - taps + 1, w.shape[1]), F32),
                grid=lambda x, w, *, taps: ((x.shape[0] - taps + 1) // 64,))
def conv1d_im2col(x, w, out, *, taps: ml.constexpr):
  """A causal conv1d as an implicit GEMM: tap k of 64 output rows is x's rows i * 64 + k, stored in columns
  k * c of the im2col tile, then one ml.dot with the (taps * c, cout) weights."""
  i = ml.program_id(0)
  c = x.shape[1]
  a_s = ml.smem((64, taps * c), x.dtype)
  w_s = ml.smem(w.shape, w.dtype)
  ml.copy(w, w_s)
  for k in ml.static_range(taps):
    a_s[:, k * c:(k + 1) * c] = x.at[ml.ds(i * 64 + k, 64), :][...]
  out.at[ml.ds(i * 64, 64), :][...] = ml.dot(a_s, w_s)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0] - 3, w.shape[1]), F32), grid=lambda x, w: ((x.shape[0] - 3) // 64,))
def conv1d_width4_loop(x, w, out):
  """Mamba's width-4 conv as a GEMM, its taps stored in a run-time loop at starts proven multiples of c."""
  i = ml.program_id(0)
  c = x.shape[1]
  a_s = ml.smem((64, 4 * c), x.dtype)
  w_s = ml.smem(w.shape, w.dtype)
  ml.copy(w, w_s)
  for k in range(4):
    a_s.at[:, ml.ds(k * c, c)][...] = x.at[ml.ds(i * 64 + k, 64), :][...]
  out.at[ml.ds(i * 64, 64), :][...] = ml.dot(a_s, w_s)


@mg.mgpu_kernel(out_shape=lambda x, wt: S((x.shape[0] - 3, wt.shape[0]), F32), grid=lambda x, wt: ((x.shape[0] - 3) // 64,))
def conv1d_tf32(x, wt, out):
  """float32 taps of 8 channels (32 bytes), read by the tensor cores as TF32, the weights stored (n, k)."""
  i = ml.program_id(0)
  c = x.shape[1]
  a_s = ml.smem((64, 4 * c), F32)
  w_s = ml.smem(wt.shape, F32)
  ml.copy(wt, w_s)
  for k in ml.static_range(4):
    a_s[:, k * c:(k + 1) * c] = x.at[ml.ds(i * 64 + k, 64), :][...]
  out.at[ml.ds(i * 64, 64), :][...] = ml.dot(a_s, w_s.T)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0] - 2, x.shape[1] - 2, w.shape[1]), F32),
                grid=lambda x, w: ((x.shape[0] - 2) // 8,))
def conv2d_3x3_im2col(x, w, out):
  """A 3x3 conv2d of an NHWC image (padded outside): 8 output rows of W pixels a program, 9 taps of c channels."""
  i = ml.program_id(0)
  c, wd = x.shape[2], x.shape[1] - 2
  a_s = ml.smem((8 * wd, 9 * c), x.dtype)
  w_s = ml.smem(w.shape, w.dtype)
  ml.copy(w, w_s)
  for di in ml.static_range(3):
    for dj in ml.static_range(3):
      t = di * 3 + dj
      a_s[:, t * c:(t + 1) * c] = x.at[ml.ds(i * 8 + di, 8), ml.ds(dj, wd), :][...].reshape(8 * wd, c)
  out.at[ml.ds(i * 8, 8)][...] = ml.dot(a_s, w_s).reshape(8, wd, w.shape[1])


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32), grid=lambda x, w: (ml.cdiv(x.shape[0], 64),))
def causal_conv1d_masked_taps(x, w, out):
  """Mamba's causal conv without padding outside: each tap a masked window starting up to 3 rows before 0, any L."""
  i = ml.program_id(0)
  n, c = x.shape
  a_s = ml.smem((64, 4 * c), x.dtype)
  w_s = ml.smem(w.shape, w.dtype)
  ml.copy(w, w_s)
  rows = i * 64 + ml.arange(64)
  for k in ml.static_range(4):
    m = ((rows - (3 - k) >= 0) & (rows - (3 - k) < n))[:, None]
    a_s[:, k * c:(k + 1) * c] = x.at[ml.ds(i * 64 - (3 - k), 64), :].load(mask=m, other=0.0)
  out.at[ml.ds(i * 64, 64), :].store(ml.dot(a_s, w_s), mask=(rows < n)[:, None])


@mg.mgpu_kernel(out_shape=lambda x, w: (S((64, w.shape[1]), F32), S((64, 32), x.dtype)))
def im2col_read_back(x, w, out, tap):
  a_s = ml.smem((64, 96), x.dtype)
  w_s = ml.smem(w.shape, w.dtype)
  ml.copy(w, w_s)
  for k in ml.static_range(3):
    a_s[:, k * 32:(k + 1) * 32] = x.at[ml.ds(k, 64), :][...]
  out[...] = ml.dot(a_s, w_s)
  tap[...] = a_s[:, 32:64]                  # a window of whole tiles read back


@mg.mgpu_kernel(out_shape=lambda x, w: S((64, w.shape[1]), F32))
def im2col_of_eight_byte_taps(x, w, out):
  a_s = ml.smem((64, 64), x.dtype)
  w_s = ml.smem(w.shape, w.dtype)
  ml.copy(w, w_s)
  for k in ml.static_range(16):
    a_s[:, k * 4:(k + 1) * 4] = x.at[ml.ds(k, 64), :][...]
  out[...] = ml.dot(a_s, w_s)


def _im2col(x, taps):
  n = x.shape[0] - taps + 1
  return np.concatenate([x[k:k + n] for k in range(taps)], axis=1)


def _conv2d(x, w):
  h, wd, c = x.shape[0] - 2, x.shape[1] - 2, x.shape[2]
  cols = np.concatenate([x[di:di + h, dj:dj + wd].reshape(h * wd, c) for di in range(3) for dj in range(3)], 1)
  return (cols @ w).reshape(h, wd, -1)


def _im2col_cases():
  x3, w3 = _input((130, 32), F16, 0), _input((96, 64), F16, 1, 0.1)
  x4, w4 = _input((131, 32), F16, 2), _input((128, 64), F16, 3, 0.1)
  xb, wb = _input((131, 16), BF16, 4), _input((64, 32), BF16, 5, 0.1)
  xt, wt = _input((131, 8), F32, 6), _input((32, 32), F32, 7, 0.1)
  xi, wi = _input((18, 10, 16), BF16, 8), _input((144, 32), BF16, 9, 0.1)
  xr, wr = _input((66, 32), F16, 10), _input((96, 64), F16, 11, 0.1)
  xm, wm = _input((100, 32), F16, 12), _input((128, 64), F16, 13, 0.1)
  causal = lambda v: _im2col(np.concatenate([np.zeros((3, v.shape[1])), v]), 4)
  f = lambda a: _f64(a)
  return [("taps3_f16", conv1d_im2col, (x3, w3), {"taps": 3}, _im2col(f(x3), 3) @ f(w3)),
          ("taps4_f16", conv1d_im2col, (x4, w4), {"taps": 4}, _im2col(f(x4), 4) @ f(w4)),
          ("loop_bf16", conv1d_width4_loop, (xb, wb), {}, _im2col(f(xb), 4) @ f(wb)),
          ("tf32", conv1d_tf32, (xt, wt), {}, _im2col(f(xt), 4) @ f(wt).T),
          ("conv2d", conv2d_3x3_im2col, (xi, wi), {}, _conv2d(f(xi), f(wi))),
          ("read_back", im2col_read_back, (xr, wr), {}, (_im2col(f(xr), 3) @ f(wr), f(xr)[1:65])),
          ("causal_masked", causal_conv1d_masked_taps, (xm, wm), {}, causal(f(xm)) @ f(wm))]


@pytest.mark.parametrize("case", _im2col_cases(), ids=lambda c: c[0])
def test_im2col_taps_narrower_than_a_tile_build_and_compute(case):
  _, kernel, args, kw, want = case
  got = kernel(*args, interpret=True, **kw)
  for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
    np.testing.assert_allclose(_f64(g), w, rtol=2e-2, atol=2e-2)
  specs = [S(a.shape, a.dtype) for a in args]
  kernel.check(*specs, **kw)
  jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*specs)


def test_im2col_taps_take_the_swizzle_they_divide():
  from mgpu_dsl import calling, py_numbers
  specs = (S((131, 32), F16), S((128, 64), F16))
  kernel = py_numbers.compiled(conv1d_im2col, *calling.keyword_inputs(conv1d_im2col, specs, {"taps": 4}))[0]["kernel"]
  assert sorted((lay.tile, lay.swizzle) for lay in kernel.smem_layouts.values()) == [((8, 32), 64)] * 2
  # windows of 8 bytes: no swizzle is that narrow, so the buffer keeps its 128-byte tiles and the tap is MG204
  expect(im2col_of_eight_byte_taps, (S((79, 4), F16), S((64, 64), F16)), mg.LayoutError, "a_s[:, k * 4",
         "a_s[:, k * 4:(k + 1) * 4] slices the rows or columns of a_s, which is tiled for the tensor cores")


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs a GPU")
@pytest.mark.parametrize("case", _im2col_cases(), ids=lambda c: c[0])
def test_gpu_im2col_taps_narrower_than_a_tile_match_numpy(case):
  _, kernel, args, kw, want = case
  got = jax.jit(lambda *a: kernel(*a, **kw))(*args)
  for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
    np.testing.assert_allclose(_f64(g), w, rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- ml.associative_scan: the user's combine
@ml.inline
def first_order(a1, b1, a2, b2):          # Triton's combine_fn: the parts spread, the earlier element first
  return a1 * a2, a2 * b1 + b2


@ml.inline
def first_order_pairs(x, y):              # jax's fn: two elements, each a tuple
  return x[0] * y[0], y[0] * x[1] + y[1]


@mg.mgpu_kernel(out_shape=lambda a, b: (b, b))
def linear_recurrence_triton(a, b, fwd, back):
  """h = a * h + b along each row, as Triton writes it, forward and from the end."""
  _, fwd[...] = ml.associative_scan((a[...], b[...]), 1, first_order)
  _, back[...] = ml.associative_scan((a[...], b[...]), axis=1, combine_fn=first_order, reverse=True)


@mg.mgpu_kernel(out_shape=lambda x, dt, A: x, grid=lambda x, dt, A: (x.shape[1] // 64,))
def selective_scan_over_time(x, dt, A, out):
  """Mamba-1's scan of one state per channel over time (axis 0), jax's order and a lambda of the body."""
  j = ml.program_id(0)
  d = dt.at[:, ml.ds(j * 64, 64)][...]
  decay = ml.exp(d * A.at[ml.ds(j * 64, 64)][...][None, :])
  comb = lambda p, q: (p[0] * q[0], q[0] * p[1] + q[1])
  _, h = ml.associative_scan(comb, (decay, d * x.at[:, ml.ds(j * 64, 64)][...]), axis=0)
  out.at[:, ml.ds(j * 64, 64)][...] = h


@mg.mgpu_kernel(out_shape=lambda x, reset: x)
def segmented_sum(x, reset, out):
  """A running sum restarting where a flag is set: (value, flag) pairs, a bool part."""
  def comb(l, r):
    return ml.where(r[1], r[0], l[0] + r[0]), l[1] | r[1]
  s, _ = ml.associative_scan(comb, (x[...], reset[...] != 0), axis=1)
  out[...] = s


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, jnp.int32), x))
def running_argmax_and_sum(x, idx, total):
  def comb(l, r):
    take = r[0] > l[0]
    return ml.where(take, r[0], l[0]), ml.where(take, r[1], l[1])
  cols = ml.broadcast_to(ml.arange(x.shape[1])[None, :], x.shape)
  _, idx[...] = ml.associative_scan(comb, (x[...], cols), axis=1)
  total[...] = ml.associative_scan(jnp.add, x[...], axis=0, reverse=True)     # a library function combines too


@mg.mgpu_kernel(out_shape=lambda a, b: b)
def per_head_recurrence(a, b, out):
  """(heads, time, d): each head scanned over time, a middle axis."""
  _, out[...] = ml.associative_scan(first_order_pairs, (a[...], b[...]), axis=1)


@mg.mgpu_kernel(out_shape=lambda a, b: b, block=256)
def recurrence_two_warpgroups(a, b, out):
  _, out[...] = ml.associative_scan(first_order_pairs, (a[...], b[...]), axis=1)


def _recurrence(a, b, axis, reverse=False):
  a, b = np.moveaxis(_f64(a), axis, -1), np.moveaxis(_f64(b), axis, -1)
  if reverse:
    a, b = a[..., ::-1], b[..., ::-1]
  h, out = np.zeros(b.shape[:-1]), np.zeros(b.shape)
  for t in range(b.shape[-1]):
    h = a[..., t] * h + b[..., t]
    out[..., t] = h
  return np.moveaxis(out[..., ::-1] if reverse else out, -1, axis)


def _segmented(x, reset):
  out = np.zeros(x.shape)
  for r in range(x.shape[0]):
    acc = 0.0
    for c in range(x.shape[1]):
      acc = x[r, c] if reset[r, c] else acc + x[r, c]
      out[r, c] = acc
  return out


def _running_argmax(x):
  best = np.maximum.accumulate(x, axis=1)
  return np.array([[int(np.argmax(row[:c + 1])) for c in range(len(row))] for row in x]), best


def _scan_cases():
  rng = np.random.default_rng(46)
  a, b = rng.uniform(0.5, 1.0, (8, 64)).astype(np.float32), rng.standard_normal((8, 64)).astype(np.float32)
  x, dt = rng.standard_normal((32, 128)).astype(np.float32), rng.uniform(0.01, 0.1, (32, 128)).astype(np.float32)
  A = -rng.uniform(0.5, 2.0, (128,)).astype(np.float32)
  xs, flags = rng.standard_normal((8, 128)).astype(np.float32), (rng.random((8, 128)) < 0.1).astype(np.int32)
  xm = rng.standard_normal((16, 64)).astype(np.float32)
  a3, b3 = rng.uniform(0.5, 1.0, (2, 16, 32)).astype(np.float32), rng.standard_normal((2, 16, 32)).astype(np.float32)
  a2, b2 = rng.uniform(0.5, 1.0, (64, 256)).astype(np.float32), rng.standard_normal((64, 256)).astype(np.float32)
  return [("triton_order", linear_recurrence_triton, (a, b), (_recurrence(a, b, 1), _recurrence(a, b, 1, True))),
          ("selective_scan", selective_scan_over_time, (x, dt, A), _recurrence(np.exp(_f64(dt) * _f64(A)),
                                                                               _f64(dt) * _f64(x), 0)),
          ("segmented", segmented_sum, (xs, flags), _segmented(xs, flags)),
          ("argmax_and_add", running_argmax_and_sum, (xm,), (_running_argmax(xm)[0],
                                                             np.cumsum(_f64(xm)[::-1], 0)[::-1])),
          ("per_head", per_head_recurrence, (a3, b3), _recurrence(a3, b3, 1)),
          ("block256", recurrence_two_warpgroups, (a2, b2), _recurrence(a2, b2, 1))]


@pytest.mark.parametrize("case", _scan_cases(), ids=lambda c: c[0])
def test_associative_scans_with_the_users_combine(case):
  _, kernel, args, want = case
  got = kernel(*args, interpret=True)
  for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
    np.testing.assert_allclose(_f64(g), w, rtol=1e-4, atol=1e-4)
  specs = [S(a.shape, a.dtype) for a in args]
  jax.export.export(jax.jit(kernel), platforms=["cuda"])(*specs)


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs a GPU")
@pytest.mark.parametrize("case", _scan_cases(), ids=lambda c: c[0])
def test_gpu_associative_scans_match_numpy(case):
  _, kernel, args, want = case
  got = jax.jit(kernel)(*args)
  for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
    np.testing.assert_allclose(_f64(g), w, rtol=1e-4, atol=1e-4)


def _plain_combine(p, q):
  return p + q


_made = {}
exec(compile("def _generated_combine(p, q):\n  return p + q\n", "<generated>", "exec"), _made)
_generated_combine = _made["_generated_combine"]     # (no source to read: the kernel cannot trace it)


@mg.mgpu_kernel(out_shape=lambda x: x)
def scan_of_a_generated_function(x, out):
  out[...] = ml.associative_scan(_generated_combine, x[...], axis=1)


@ml.inline
def _pair_and_more(p, q):
  return p + q, p


@mg.mgpu_kernel(out_shape=lambda x: x)
def scan_of_a_plain_function(x, out):
  out[...] = ml.associative_scan(_plain_combine, x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def scan_without_a_combine(x, out):
  out[...] = ml.associative_scan(x[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def scan_combine_gives_two(x, out):
  out[...] = ml.associative_scan(_pair_and_more, x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def scan_combine_changes_dtype(x, out):
  out[...] = ml.associative_scan(lambda p, q: (p + q).astype(jnp.float16), x[...], axis=1)


def test_associative_scan_mistakes_are_reported_at_the_call():
  X = (S((8, 64), F32),)
  usage = ("ml.associative_scan(combine, (a, b), axis=1) (jax's order: the function first, then the elements; or"
           " Triton's, ml.associative_scan((a, b), 1, combine)), with combine an @ml.inline helper, a lambda or a def"
           " of the kernel's body taking two elements, each a tuple like (a, b), and giving one")
  x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)     # (a plain function: since probe 52b)
  np.testing.assert_allclose(np.asarray(scan_of_a_plain_function(x, interpret=True)), np.cumsum(x, axis=1),
                             rtol=1e-5, atol=1e-5)
  expect(scan_of_a_generated_function, X, mg.KernelTypeError, "ml.associative_scan(",
         "ml.associative_scan's combine function must be an @ml.inline helper, a lambda or def of the kernel's body,"
         " or an ml.* function, got _generated_combine, a Python function it cannot trace",
         hint="decorate it with @ml.inline (its body is traced at each step of the scan): " + usage)
  expect(scan_without_a_combine, X, mg.KernelTypeError, "ml.associative_scan(",
         "ml.associative_scan() is missing the combine function", hint=usage)
  expect(scan_combine_gives_two, X, mg.KernelTypeError, "ml.associative_scan(",
         "ml.associative_scan: _pair_and_more gives 2 values for 1 element part",
         hint=f"return one value for each part of the elements, in their order ({usage})")
  expect(scan_combine_changes_dtype, X, mg.KernelTypeError, "ml.associative_scan(",
         "ml.associative_scan: <lambda> must give each part in its own shape and dtype, (8, 64) float32, got (8, 64)"
         " float16", hint="convert inside the combine, (...).astype(a.dtype), or convert the elements before the scan")


# ---------------------------------------------------------------- jax's scans called in a kernel: the same ml call
@mg.mgpu_kernel(out_shape=lambda x: x)
def lax_scans(x, out, *, how: ml.constexpr):
  v = x[...]
  if how == "cumsum":
    out[...] = lax.cumsum(v, axis=1, reverse=True)
  elif how == "cummax":
    out[...] = lax.cummax(v, 0, True)
  elif how == "jnp":
    out[...] = jnp.cumsum(v, axis=1, dtype=jnp.float32)
  else:
    out[...] = lax.associative_scan(lambda a, b: a + b, v, axis=1)


@pytest.mark.parametrize("how,want", [
    ("cumsum", lambda v: lax.cumsum(v, axis=1, reverse=True)), ("cummax", lambda v: lax.cummax(v, 0, True)),
    ("jnp", lambda v: jnp.cumsum(v, axis=1, dtype=jnp.float32)),
    ("assoc", lambda v: lax.associative_scan(lambda a, b: a + b, v, axis=1))])
def test_jax_scans_in_a_kernel_compute_as_the_ml_call_with_their_arguments(how, want):
  """They hinted "use ml.cumsum: kernels call ml.* functions on register values", dropping reverse=True (and
  lax.associative_scan named a function that did not exist); then the ml call with their arguments; since probe
  46i they are that call."""
  x = np.random.default_rng(9).standard_normal((8, 64)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(lax_scans(x, how=how, interpret=True)), np.asarray(want(x)), rtol=1e-5,
                             atol=1e-5)


# ---------------------------------------------------------------- nearest upsampling of channels-first tiles
@mg.mgpu_kernel(out_shape=lambda x, *, k: S((x.shape[0], k * x.shape[1], k * x.shape[2]), x.dtype))
def upsample_nearest_chw(x, out, *, k: ml.constexpr):
  """(c, h, w) to (c, k * h, k * w): both stretched axes are size-1 axes of the source, the last one narrow."""
  c, h, w = x.shape
  out[...] = ml.broadcast_to(x[...][:, :, None, :, None], (c, h, k, w, k)).reshape(c, k * h, k * w)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1], 2 * x.shape[2], 2 * x.shape[3]), x.dtype))
def upsample_nearest_nchw(x, out):
  n, c, h, w = x.shape
  v = x[...][:, :, :, None, :, None] * ml.full((1, 1, 1, 2, 1, 2), 1.0, x.dtype)     # broadcast by arithmetic
  out[...] = v.reshape(n, c, 2 * h, 2 * w)


def _upsample_cases():
  rng = np.random.default_rng(7)
  x3 = rng.standard_normal((4, 8, 32)).astype(np.float32)
  xb = jnp.asarray(rng.standard_normal((2, 16, 64)), BF16)
  x4 = rng.standard_normal((2, 4, 8, 16)).astype(np.float32)
  up = lambda v, k, a: np.repeat(np.repeat(_f64(v), k, a), k, a + 1)
  return [("x2", upsample_nearest_chw, (x3,), {"k": 2}, up(x3, 2, 1)),
          ("x3", upsample_nearest_chw, (x3,), {"k": 3}, up(x3, 3, 1)),
          ("bf16", upsample_nearest_chw, (xb,), {"k": 2}, up(xb, 2, 1)),
          ("nchw", upsample_nearest_nchw, (x4,), {}, up(x4, 2, 2))]


@pytest.mark.parametrize("case", _upsample_cases(), ids=lambda c: c[0])
def test_nearest_upsampling_of_channels_first_tiles(case):
  """It was MG204 ("reshaped from or into a row statistic") at the source's expansion: the broadcast copied the
  middle axis and left the last, 2 wide, to a (n, 2) broadcast of the copies' reshape; both are copies now."""
  _, kernel, args, kw, want = case
  np.testing.assert_array_equal(_f64(kernel(*args, interpret=True, **kw)), want)
  jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*[S(a.shape, a.dtype) for a in args])


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs a GPU")
@pytest.mark.parametrize("case", _upsample_cases(), ids=lambda c: c[0])
def test_gpu_nearest_upsampling_of_channels_first_tiles(case):
  _, kernel, args, kw, want = case
  np.testing.assert_array_equal(_f64(jax.jit(lambda *a: kernel(*a, **kw))(*args)), want)


# ---------------------------------------------------------------- reverse scans of odd-shaped reads
@mg.mgpu_kernel(out_shape=lambda x, *, kind, axis: x)
def reverse_scan(x, out, *, kind: ml.constexpr, axis: ml.constexpr):
  scan = {"sum": ml.cumsum, "prod": ml.cumprod, "max": ml.cummax, "min": ml.cummin}[kind]
  out[...] = scan(x[...], axis=axis, reverse=True)


def _reverse_cases():
  rng = np.random.default_rng(8)
  flip_scan = lambda f, x, a: np.flip(f(np.flip(_f64(x), a), axis=a), a)
  v, t = rng.standard_normal((100,)).astype(np.float32), rng.uniform(0.5, 1.5, (3, 45)).astype(np.float32)
  r, b = rng.standard_normal((5, 40)).astype(np.float32), jnp.asarray(rng.standard_normal((6, 33)), BF16)
  i = rng.integers(-50, 50, (17,)).astype(np.int32)
  return [("max_100", v, "max", 0, flip_scan(np.maximum.accumulate, v, 0)),
          ("prod_3x45", t, "prod", 1, flip_scan(np.cumprod, t, 1)),
          ("sum_5x40_rows", r, "sum", 0, flip_scan(np.cumsum, r, 0)),
          ("sum_bf16_6x33", b, "sum", 1, flip_scan(np.cumsum, b, 1)),
          ("min_int_17", i, "min", 0, flip_scan(np.minimum.accumulate, i, 0))]


@pytest.mark.parametrize("case", _reverse_cases(), ids=lambda c: c[0])
def test_reverse_scans_of_odd_reads_take_the_identity_in_the_padding(case):
  """A forward scan of a window no register tensor holds ((100,), (3, 45)) was computed padded (note 86); a reverse
  one gave the padded trace up (MG204 at the read): its padding, scanned first, now holds the scan's identity."""
  _, x, kind, axis, want = case
  tol = 2e-2 if x.dtype == BF16 else 1e-5
  np.testing.assert_allclose(_f64(reverse_scan(x, interpret=True, kind=kind, axis=axis)), want, rtol=tol, atol=tol)
  jax.export.export(jax.jit(lambda a: reverse_scan(a, kind=kind, axis=axis)), platforms=["cuda"])(S(x.shape, x.dtype))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs a GPU")
@pytest.mark.parametrize("case", _reverse_cases(), ids=lambda c: c[0])
def test_gpu_reverse_scans_of_odd_reads(case):
  _, x, kind, axis, want = case
  tol = 2e-2 if x.dtype == BF16 else 1e-5
  got = jax.jit(lambda a: reverse_scan(a, kind=kind, axis=axis))(x)
  np.testing.assert_allclose(_f64(got), want, rtol=tol, atol=tol)


@mg.mgpu_kernel(out_shape=lambda a, b, *, axis, reverse: b)
def recurrence_of_odd_reads(a, b, out, *, axis: ml.constexpr, reverse: ml.constexpr):
  _, out[...] = ml.associative_scan(first_order_pairs, (a[...], b[...]), axis=axis, reverse=reverse)


@pytest.mark.parametrize("shape,axis,reverse", [((8, 50), 1, False), ((8, 50), 1, True), ((5, 40), 0, True),
                                                ((100,), 0, True)])
def test_associative_scans_of_odd_reads_compute_padded(shape, axis, reverse):
  """Windows no register tensor holds are read padded (note 86): the rolls bring the padding in only where the
  select keeps each element's own, and from the end the select counts the unpadded length."""
  rng = np.random.default_rng(sum(shape))
  a, b = rng.uniform(0.5, 1.0, shape).astype(np.float32), rng.standard_normal(shape).astype(np.float32)
  got = recurrence_of_odd_reads(a, b, interpret=True, axis=axis, reverse=reverse)
  np.testing.assert_allclose(_f64(got), _recurrence(a, b, axis, reverse), rtol=1e-5, atol=1e-5)
  jax.export.export(jax.jit(lambda x, y: recurrence_of_odd_reads(x, y, axis=axis, reverse=reverse)),
                    platforms=["cuda"])(S(shape, F32), S(shape, F32))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs a GPU")
def test_gpu_associative_scans_of_odd_reads():
  rng = np.random.default_rng(3)
  for shape, axis, reverse in (((8, 50), 1, True), ((5, 40), 0, False)):
    a, b = rng.uniform(0.5, 1.0, shape).astype(np.float32), rng.standard_normal(shape).astype(np.float32)
    got = jax.jit(lambda x, y: recurrence_of_odd_reads(x, y, axis=axis, reverse=reverse))(a, b)
    np.testing.assert_allclose(_f64(got), _recurrence(a, b, axis, reverse), rtol=1e-5, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda a, b: (b, b))
def scan_of_a_pytree(a, b, h, m):
  """jax's elements may be any pytree of tuples, lists and dicts: the combine takes and gives that structure."""
  def comb(x, y):
    return {"rec": (x["rec"][0] * y["rec"][0], y["rec"][0] * x["rec"][1] + y["rec"][1]), "max": ml.maximum(x["max"], y["max"])}
  r = ml.associative_scan(comb, {"rec": (a[...], b[...]), "max": b[...]}, axis=1)
  h[...] = r["rec"][1]
  m[...] = r["max"]


def test_associative_scan_of_a_pytree():
  """A nested tuple or a dict of elements was "ml.associative_scan cannot take a Python tuple" (jax takes them)."""
  rng = np.random.default_rng(12)
  a, b = rng.uniform(0.5, 1.0, (8, 64)).astype(np.float32), rng.standard_normal((8, 64)).astype(np.float32)
  h, m = scan_of_a_pytree(a, b, interpret=True)
  np.testing.assert_allclose(_f64(h), _recurrence(a, b, 1), rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(_f64(m), np.maximum.accumulate(b, axis=1))
  jax.export.export(jax.jit(scan_of_a_pytree), platforms=["cuda"])(S(a.shape, F32), S(b.shape, F32))


# ---------------------------------------------------------------- a padding hint through elementwise math
@mg.mgpu_kernel(out_shape=lambda x: S((1,), jnp.int32))
def argmax_of_scaled(x, out):
  out[0] = ml.argmax(x[...] * 2)


@mg.mgpu_kernel(out_shape=lambda x: S((1,), jnp.int32))
def argmax_of_scaled_followed(x, out):
  m = ml.arange(104) < 100
  v = x.at[ml.ds(0, 104)].load(mask=m, other=0) * 2
  out[0] = ml.argmax(ml.where(m, v, float('-inf')))


def test_a_padding_hint_reached_through_math_selects_the_identity_before_the_reduction():
  """`ml.argmax(x[...] * 2)` of a (100,) read hinted other=0 (the identity was looked for through casts only):
  followed, an argmax of negative data picked a padding lane. The hint now selected -inf in before the argmax; since
  probe 46e the padded trace computes the kernel itself (an argmax of an odd read), so both must skip the padding
  of all-negative data."""
  x = -np.abs(np.random.default_rng(5).standard_normal(100)).astype(np.float32) - 1
  assert int(argmax_of_scaled(x, interpret=True)[0]) == int(np.argmax(x))
  assert int(argmax_of_scaled_followed(x, interpret=True)[0]) == int(np.argmax(x))
