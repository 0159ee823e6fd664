"""Probe 51g (normalisation, loss and stencil kernels, forward and backward): short columns of a GMEM array
strided in memory (Mamba's per-tap conv weight and state, `w.at[d, k]` of a channel block of 64; `x.at[:, 1]` of
60 rows) are read and written padded to 128 elements, and jnp.pad of a register tensor computes (a 3x3 blur's
halo, a causal conv1d's left padding)."""
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


def _rand(rng, *shape, dtype=np.float32):
  return jnp.asarray(rng.standard_normal(shape).astype(np.float32)).astype(dtype)


# ---------------------------------------------------------------- short columns strided in memory
@mg.mgpu_kernel(out_shape=lambda x, w, b, s0, *, BD: (x, s0),
                grid=lambda x, w, b, s0, *, BD: (x.shape[0], ml.cdiv(x.shape[2], BD)))
def conv1d_with_state(x, w, b, s0, y, s1, *, BD: ml.constexpr):
  """Mamba's causal_conv1d (width 4, channels last) with an initial state (B, D, 3) and the final one out."""
  bi = ml.program_id(0)
  d = ml.program_id(1) * BD + ml.arange(0, BD)
  dm = d < x.shape[2]
  x0 = ml.load(s0.at[bi, d, 0], mask=dm, other=0.).to(F32)
  x1 = ml.load(s0.at[bi, d, 1], mask=dm, other=0.).to(F32)
  x2 = ml.load(s0.at[bi, d, 2], mask=dm, other=0.).to(F32)
  w0 = ml.load(w.at[d, 0], mask=dm, other=0.).to(F32)
  w1 = ml.load(w.at[d, 1], mask=dm, other=0.).to(F32)
  w2 = ml.load(w.at[d, 2], mask=dm, other=0.).to(F32)
  w3 = ml.load(w.at[d, 3], mask=dm, other=0.).to(F32)
  bias = ml.load(b.at[d], mask=dm, other=0.).to(F32)
  for t in range(x.shape[1]):
    x3 = ml.load(x.at[bi, t, d], mask=dm, other=0.).to(F32)
    o = x0 * w0 + x1 * w1 + x2 * w2 + x3 * w3 + bias
    ml.store(y.at[bi, t, d], o * ml.sigmoid(o), mask=dm)
    x0 = x1
    x1 = x2
    x2 = x3
  ml.store(s1.at[bi, d, 0], x0, mask=dm)
  ml.store(s1.at[bi, d, 1], x1, mask=dm)
  ml.store(s1.at[bi, d, 2], x2, mask=dm)


def _conv1d_ref(x, w, b, s0):
  xp = np.concatenate([np.transpose(s0, (0, 2, 1)), x], 1)
  L = x.shape[1]
  o = sum(xp[:, k:k + L, :] * w[:, k] for k in range(4)) + b
  return o / (1 + np.exp(-o)), np.transpose(xp[:, -3:, :], (0, 2, 1))


def _conv1d_inputs(D, seed=0):
  rng = np.random.default_rng(seed)
  return [rng.standard_normal(s).astype(np.float32) for s in ((2, 6, D), (D, 4), (D,), (2, D, 3))]


def test_per_tap_columns_of_a_conv_weight_and_state_compute():
  """`w.at[d, k]` of a (D, 4) weight and `s0.at[bi, d, k]` of a (B, D, 3) state, 64 channels a program: windows
  whose elements lie 4 (3) apart, which move one element a thread, 128 at a time: MG204 at the mask before."""
  for D in (64, 50, 100):
    args = _conv1d_inputs(D)
    y, s1 = conv1d_with_state(*args, BD=64, interpret=True)
    want_y, want_s = _conv1d_ref(*args)
    np.testing.assert_allclose(np.asarray(y), want_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(s1), want_s)
  assert "mosaic_gpu" in str(_export(conv1d_with_state, *[S(a.shape, F32) for a in _conv1d_inputs(50)], BD=64))


@mg.mgpu_kernel(out_shape=lambda w: w, grid=lambda w: (ml.cdiv(w.shape[0], 64),))
def columns_at_a_runtime_start(w, o):
  i = ml.program_id(0)
  for k in ml.static_range(w.shape[1]):
    o.at[ml.ds(i * 64, 64), k][...] = w.at[ml.ds(i * 64, 64), k][...] * (k + 1.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def swap_columns(x, out):
  a = x.at[:, 0][...]
  b = x.at[:, 1][...]
  out.at[:, 0][...] = b
  out.at[:, 1][...] = a + b


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:1], F32))
def point_norms(x, out):
  a = x.at[:, 0][...].astype(F32)
  b = x.at[:, 1][...].astype(F32)
  c = x.at[:, 2][...].astype(F32)
  out[...] = jnp.sqrt(a * a + b * b + c * c)


def test_columns_at_run_time_starts_and_of_odd_lengths_compute():
  rng = np.random.default_rng(1)
  w = _rand(rng, 192, 3)
  np.testing.assert_allclose(np.asarray(columns_at_a_runtime_start(w, interpret=True)), np.asarray(w) * [1, 2, 3],
                             rtol=1e-6)
  for n, dt in ((60, F32), (64, F32), (100, jnp.bfloat16)):    # 60 and 100 rows: read padded, 64 then 128
    x = _rand(rng, n, 2, dtype=dt)
    xf = np.asarray(x).astype(np.float32)
    got = np.asarray(swap_columns(x, interpret=True)).astype(np.float32)
    np.testing.assert_allclose(got, np.stack([xf[:, 1], (x[:, 0] + x[:, 1]).astype(F32)], 1), rtol=1e-6)
  x = _rand(rng, 77, 3)
  np.testing.assert_allclose(np.asarray(point_norms(x, interpret=True)), np.linalg.norm(np.asarray(x), axis=1),
                             rtol=1e-5)
  for k, specs in ((columns_at_a_runtime_start, [S((192, 3), F32)]), (swap_columns, [S((100, 2), jnp.bfloat16)]),
                   (point_norms, [S((77, 3), F32)])):
    assert "mosaic_gpu" in str(_export(k, *specs))


@mg.mgpu_kernel(out_shape=lambda x: x)
def swap_planes(x, o):
  a = x.at[:, :, 0][...]
  b = x.at[:, :, 1][...]
  o.at[:, :, 0][...] = b * 2
  o.at[:, :, 1][...] = a - b


@mg.mgpu_kernel(out_shape=lambda x, k: x, grid=lambda x, k: (x.shape[0], x.shape[3]))
def depthwise_3x3_nhwc(x, k, y):
  b, c = ml.program_id(0), ml.program_id(1)
  v = x.at[b, :, :, c][...].astype(F32)            # one channel's (H, W) plane, its elements C apart
  H, W = v.shape
  p = jnp.pad(v, 1)
  acc = jnp.zeros_like(v)
  for i in ml.static_range(3):
    for j in ml.static_range(3):
      acc = acc + k[c, i, j] * p[i:i + H, j:j + W]
  y.at[b, :, :, c][...] = acc.astype(y.dtype)


def test_planes_strided_in_memory_compute():
  """A plane no register tensor holds ((4, 48), (7, 7): not a multiple of 128 elements) whose elements lie apart
  (the array's last axis indexed away) is the padded trace's too, read and written at the padded shape; a plane
  registers hold, with jnp.pad of it, is a depthwise 3x3 convolution of a channel of NHWC pixels."""
  rng = np.random.default_rng(6)
  for shape, dt in (((4, 48, 2), F32), ((7, 7, 2), F32), ((3, 20, 2), jnp.bfloat16)):
    x = _rand(rng, *shape, dtype=dt)
    want = np.stack([np.asarray(x[..., 1] * 2), np.asarray(x[..., 0] - x[..., 1])], -1).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(swap_planes(x, interpret=True)).astype(np.float32), want)
    assert "mosaic_gpu" in str(_export(swap_planes, S(shape, dt)))
  x, k = np.asarray(_rand(rng, 2, 8, 16, 3)), np.asarray(_rand(rng, 3, 3, 3))
  p = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
  want = sum(k[:, i, j] * p[:, i:i + 8, j:j + 16, :] for i in range(3) for j in range(3))
  np.testing.assert_allclose(np.asarray(depthwise_3x3_nhwc(x, k, interpret=True)), want, rtol=1e-5, atol=1e-5)
  assert "mosaic_gpu" in str(_export(depthwise_3x3_nhwc, S((2, 8, 16, 3), F32), S((3, 3, 3), F32)))


@mg.mgpu_kernel(out_shape=lambda w: S((64,), F32))
def column_past_the_end(w, o):
  d = ml.arange(0, 64)
  o[...] = ml.load(w.at[d, 1])


@mg.mgpu_kernel(out_shape=lambda w, n: S((64,), F32))
def column_under_a_data_mask(w, n, o):
  d = ml.arange(0, 64)
  o[...] = ml.load(w.at[d, 1], mask=d < n[0], other=0.)


def test_a_short_column_keeps_its_bounds_checks():
  """Read padded, the column's own elements are still checked: unmasked past the end while compiling, masked on
  past the end in interpret mode; the padding's never are (masked off)."""
  expect(column_past_the_end, [S((50, 4), F32)], mg.IndexOutOfBoundsError, "ml.load(w.at[d, 1])",
         "the offsets d run over 0..63 along dimension 0 of w, outside its size 50: an unmasked register read must"
         " stay inside the array",
         hint="mask the offsets to the elements inside: w.at[d, 1].load(mask=d < w.shape[0], other=0)")
  w = np.random.default_rng(2).standard_normal((50, 4)).astype(np.float32)
  with pytest.raises(mg.OutOfBoundsError, match=r"touches w\[50, 1\]"):
    column_under_a_data_mask(w, np.array([60], np.int32), interpret=True)
  got = np.asarray(column_under_a_data_mask(w, np.array([40], np.int32), interpret=True))
  np.testing.assert_array_equal(got, np.where(np.arange(64) < 40, np.pad(w[:, 1], (0, 14)), 0))


# ---------------------------------------------------------------- jnp.pad of a register tensor
@mg.mgpu_kernel(out_shape=lambda x: x)
def box_blur(x, y, *, k: ml.constexpr = 3, c: ml.constexpr = 0.0):
  v = x[...]
  H, W = v.shape
  p = jnp.pad(v, k // 2, constant_values=c)
  acc = jnp.zeros_like(v)
  for di in ml.static_range(k):
    for dj in ml.static_range(k):
      acc = acc + p[di:di + H, dj:dj + W]
  y[...] = acc / (k * k)


def _blur_ref(x, k, c):
  p = np.pad(x, k // 2, constant_values=c)
  H, W = x.shape
  return sum(p[i:i + H, j:j + W] for i in range(k) for j in range(k)) / (k * k)


@mg.mgpu_kernel(out_shape=lambda x, w, b: x, grid=lambda x, w, b: (x.shape[0],))
def causal_conv1d_padded(x, w, b, y):
  bi = ml.program_id(0)
  v = x[bi].astype(F32)                              # (L, D)
  L, K = v.shape[0], w.shape[1]
  vp = jnp.pad(v, ((K - 1, 0), (0, 0)))
  acc = jnp.zeros_like(v) + b[...].astype(F32)[None, :]
  for k in ml.static_range(K):
    acc = acc + vp[k:k + L, :] * w[:, k].astype(F32)[None, :]
  y[bi] = jax.nn.silu(acc).astype(y.dtype)


@mg.mgpu_kernel(out_shape=lambda x: x)
def row_modes(x, y):
  v = x[...]
  H = v.shape[0]
  e = jnp.pad(v, ((1, 2), (0, 0)), mode="edge")
  r = jnp.pad(v, ((2, 1), (0, 0)), mode="reflect")
  s = jnp.pad(v, ((1, 1), (0, 0)), mode="symmetric")
  w = jnp.pad(v, ((1, 1), (0, 0)), mode="wrap")
  y[...] = e[0:H] + e[3:H + 3] + r[0:H] + r[3:H + 3] + s[0:H] - s[2:H + 2] + w[0:H] * w[2:H + 2]


def _row_modes_ref(x):
  H = x.shape[0]
  e, r, s, w = (np.pad(x, (p, (0, 0)), mode=m) for p, m in (((1, 2), "edge"), ((2, 1), "reflect"),
                                                            ((1, 1), "symmetric"), ((1, 1), "wrap")))
  return e[0:H] + e[3:H + 3] + r[0:H] + r[3:H + 3] + s[0:H] - s[2:H + 2] + w[0:H] * w[2:H + 2]


@mg.mgpu_kernel(out_shape=lambda x: x)
def moving_average(x, y):
  v = x[...].astype(F32)
  n = v.shape[0]
  p = jnp.pad(v, 2)
  y[...] = ((p[0:n] + p[1:n + 1] + p[2:n + 2] + p[3:n + 3] + p[4:n + 4]) / 5).astype(y.dtype)


def test_jnp_pad_of_register_tensors_computes():
  """It was MG003 ('pad cannot take a register tensor'), whose hint read shifted windows from memory."""
  rng = np.random.default_rng(3)
  x = np.asarray(_rand(rng, 16, 64))
  np.testing.assert_allclose(np.asarray(box_blur(x, interpret=True)), _blur_ref(x, 3, 0.0), rtol=1e-5, atol=1e-6)
  x = np.asarray(_rand(rng, 8, 128))
  np.testing.assert_allclose(np.asarray(box_blur(x, k=5, c=1.0, interpret=True)), _blur_ref(x, 5, 1.0), rtol=1e-5,
                             atol=1e-6)
  x, w, b = (np.asarray(_rand(rng, *s)) for s in ((2, 64, 64), (64, 4), (64,)))
  xp = np.pad(x, ((0, 0), (3, 0), (0, 0)))
  o = sum(xp[:, k:k + 64, :] * w[:, k] for k in range(4)) + b
  np.testing.assert_allclose(np.asarray(causal_conv1d_padded(x, w, b, interpret=True)), o / (1 + np.exp(-o)),
                             rtol=1e-5, atol=1e-5)
  x = np.asarray(_rand(rng, 16, 128))
  np.testing.assert_allclose(np.asarray(row_modes(x, interpret=True)), _row_modes_ref(x), rtol=1e-5, atol=1e-5)
  x = _rand(rng, 1000, dtype=jnp.bfloat16)
  p = np.pad(np.asarray(x).astype(np.float32), 2)
  np.testing.assert_allclose(np.asarray(moving_average(x, interpret=True)).astype(np.float32),
                             sum(p[k:k + 1000] for k in range(5)) / 5, rtol=1e-2, atol=1e-2)
  for k, specs, kw in ((box_blur, [S((16, 64), F32)], {}), (box_blur, [S((8, 128), F32)], {"k": 5, "c": 1.0}),
                       (causal_conv1d_padded, [S((2, 64, 64), F32), S((64, 4), F32), S((64,), F32)], {}),
                       (row_modes, [S((16, 128), F32)], {}), (moving_average, [S((1000,), jnp.bfloat16)], {})):
    assert "mosaic_gpu" in str(_export(k, *specs, **kw))


def test_jnp_pad_of_odd_tiles_computes_padded():
  """Tiles no register tensor holds ((28, 28), (30, 100), (7, 7); a (37,) vector) are computed padded: the pad's
  parts took the padded shape, and the join ended that trace (MG204 at the read)."""
  rng = np.random.default_rng(8)
  for shape in ((28, 28), (7, 7)):
    x = np.asarray(_rand(rng, *shape))
    np.testing.assert_allclose(np.asarray(box_blur(x, interpret=True)), _blur_ref(x, 3, 0.0), rtol=1e-5, atol=1e-6)
  x = np.asarray(_rand(rng, 30, 100))
  np.testing.assert_allclose(np.asarray(row_modes(x, interpret=True)), _row_modes_ref(x), rtol=1e-5, atol=1e-5)
  x = _rand(rng, 37)
  p = np.pad(np.asarray(x), 2)
  np.testing.assert_allclose(np.asarray(moving_average(x, interpret=True)), sum(p[k:k + 37] for k in range(5)) / 5,
                             rtol=1e-5, atol=1e-6)
  for k, spec in ((box_blur, S((28, 28), F32)), (row_modes, S((30, 100), F32)), (moving_average, S((37,), F32))):
    assert "mosaic_gpu" in str(_export(k, spec))


@mg.mgpu_kernel(out_shape=lambda x: x)
def edge_blur(x, y):
  v = x[...]
  p = jnp.pad(v, 1, mode="edge")
  y[...] = p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:]


@mg.mgpu_kernel(out_shape=lambda x: x)
def wide_edge(x, y):
  y[...] = jnp.pad(x[...], ((0, 0), (17, 0)), mode="edge")[:, :128]


def test_a_pad_mode_along_a_tiles_last_axis_computes_or_says_what_computes():
  """(MG003 until probe 56f, which computes the modes along the last axis: an edge wider than 16 stays MG003.)"""
  x = np.asarray(_rand(np.random.default_rng(3), 16, 128))
  p = np.pad(x, 1, mode="edge")
  np.testing.assert_allclose(np.asarray(edge_blur(x, interpret=True)),
                             p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:], rtol=1e-6, atol=1e-6)
  expect(wide_edge, [S((16, 128), F32)], mg.KernelTypeError, "jnp.pad(",
         "jnp.pad of a register tensor pads with one constant, or by mode 'edge', 'reflect', 'symmetric' or 'wrap',"
         " along any axis by static widths: this call's mode='edge' 17 wide along the last axis (at most 16) is not"
         " computed in a kernel")


@pytest.mark.gpu
def test_probe51g_kernels_on_the_gpu_match_interpret_mode():
  for D in (64, 50):
    args = _conv1d_inputs(D, seed=4)
    for got, want in zip(jax.jit(lambda *a: conv1d_with_state(*a, BD=64))(*args),
                         conv1d_with_state(*args, BD=64, interpret=True)):
      np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
  rng = np.random.default_rng(5)
  w = _rand(rng, 192, 3)
  np.testing.assert_array_equal(np.asarray(jax.jit(columns_at_a_runtime_start)(w)),
                                np.asarray(columns_at_a_runtime_start(w, interpret=True)))
  for n in (60, 100):
    x = _rand(rng, n, 2)
    np.testing.assert_array_equal(np.asarray(jax.jit(swap_columns)(x)), np.asarray(swap_columns(x, interpret=True)))
  for shape in ((4, 48, 2), (7, 7, 2)):
    x = _rand(rng, *shape)
    np.testing.assert_array_equal(np.asarray(jax.jit(swap_planes)(x)), np.asarray(swap_planes(x, interpret=True)))
  x, k = _rand(rng, 2, 8, 16, 3), _rand(rng, 3, 3, 3)
  np.testing.assert_allclose(np.asarray(jax.jit(depthwise_3x3_nhwc)(x, k)),
                             np.asarray(depthwise_3x3_nhwc(x, k, interpret=True)), rtol=1e-5, atol=1e-5)
  x = _rand(rng, 77, 3)
  np.testing.assert_allclose(np.asarray(jax.jit(point_norms)(x)), np.asarray(point_norms(x, interpret=True)),
                             rtol=1e-6)
  x = _rand(rng, 16, 64)
  np.testing.assert_allclose(np.asarray(jax.jit(box_blur)(x)), np.asarray(box_blur(x, interpret=True)), rtol=1e-5,
                             atol=1e-6)
  x, w, b = (_rand(rng, *s) for s in ((2, 64, 64), (64, 4), (64,)))
  np.testing.assert_allclose(np.asarray(jax.jit(causal_conv1d_padded)(x, w, b)),
                             np.asarray(causal_conv1d_padded(x, w, b, interpret=True)), rtol=1e-5, atol=1e-5)
  x = _rand(rng, 16, 128)
  np.testing.assert_allclose(np.asarray(jax.jit(row_modes)(x)), np.asarray(row_modes(x, interpret=True)), rtol=1e-5,
                             atol=1e-5)
  for shape in ((28, 28), (7, 7)):
    x = _rand(rng, *shape)
    np.testing.assert_allclose(np.asarray(jax.jit(box_blur)(x)), np.asarray(box_blur(x, interpret=True)), rtol=1e-5,
                               atol=1e-6)
  x = _rand(rng, 30, 100)
  np.testing.assert_allclose(np.asarray(jax.jit(row_modes)(x)), np.asarray(row_modes(x, interpret=True)), rtol=1e-5,
                             atol=1e-5)
  x = _rand(rng, 1000, dtype=jnp.bfloat16)
  np.testing.assert_allclose(np.asarray(jax.jit(moving_average)(x)).astype(np.float32),
                             np.asarray(moving_average(x, interpret=True)).astype(np.float32), rtol=1e-2, atol=1e-2)
