"""Probe 35b (audit of kernels of two and three warpgroups, block=256 and 384): every op that reads an
element's position (index grids, scans, sorts, rolls, flips, transposes, reshapes through SMEM, argmax,
gathers and scatters, masked and atomic stores, row statistics) on a tensor the warpgroups split by
rows, and register code every warpgroup runs whole (writes to the same elements, read-modify-write).
Interpret mode runs a CTA as one thread block and cannot show a warpgroup's local row used where the
global one is needed, so each kernel here also has a GPU test against interpret mode."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F16, F32, I32 = jnp.float16, jnp.float32, jnp.int32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _block(*args, wg, **kw):
  return 128 * wg


def _rows(wg):
  return 128 if wg == 1 else 64 * wg        # a dot's rows: 64 per warpgroup


def _dot_inputs(wg, seed=0):
  rng = np.random.default_rng(seed)
  a = jnp.asarray(rng.standard_normal((_rows(wg), 64)), F16)
  b = jnp.asarray(rng.standard_normal((64, 64)), F16)
  return a, b


def _x(seed=0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal((384, 64)) * 3, F32)


def _close(got, want, tol=1e-3):
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=tol, atol=tol)


# ---------------------------------------------------------------- a reshape of a dot result (B1)
@mg.mgpu_kernel(out_shape=lambda a, b, *, wg, shape: S(shape, F32), block=_block)
def reshaped_acc(a, b, o, *, wg, shape):
  a_s = ml.smem(a.shape)
  b_s = ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  o[...] = acc.reshape(shape) * 2.0


def _reshape_cases():
  for wg in (1, 2, 3):
    m = _rows(wg)
    for shape in ((m // 2, 128), (2 * m, 32)):
      yield wg, shape


@pytest.mark.parametrize("wg,shape", list(_reshape_cases()))
def test_a_dot_result_reshaped_into_another_tile_goes_through_smem(wg, shape):
  """`acc.reshape((64, 128))` of a (128, 64) dot result fits the tensor-core layout on both sides, so
  the layout pass kept it in registers and Mosaic GPU's reshape failed: MG900 at every block. Now the
  elements move through an SMEM scratch (as a row-wise tile's reshape does)."""
  a, b = _dot_inputs(wg)
  want = (np.asarray(a, np.float32) @ np.asarray(b, np.float32)).reshape(shape) * 2
  _close(reshaped_acc(a, b, wg=wg, shape=shape, interpret=True), want, 1e-2)
  specs = (S(a.shape, F16), S(b.shape, F16))
  assert "relayoutstore" in reshaped_acc.typed_ir(*specs, wg=wg, shape=shape)
  _export(reshaped_acc, *specs, wg=wg, shape=shape)


@pytest.mark.gpu
@pytest.mark.parametrize("wg,shape", list(_reshape_cases()))
def test_a_dot_result_reshaped_into_another_tile_gpu(wg, shape):
  a, b = _dot_inputs(wg, seed=1)
  got = jax.jit(lambda a, b: reshaped_acc(a, b, wg=wg, shape=shape))(a, b)
  _close(got, reshaped_acc(a, b, wg=wg, shape=shape, interpret=True), 1e-3)


# ---------------------------------------------------------------- a column vector's small tile (B2)
@mg.mgpu_kernel(out_shape=lambda a, b, *, wg: (S((a.shape[0], b.shape[1]), F32), S((64, b.shape[1]), F32),
                                               S((a.shape[0], b.shape[1]), F32)), block=_block)
def column_vector_tiles(a, b, o, o2, o3, *, wg):
  a_s = ml.smem(a.shape)
  b_s = ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  bias = a.at[0][...].astype(jnp.float32)
  o[...] = acc + bias[None, :]
  o2[...] = bias[None, :] + ml.zeros((64, b.shape[1]), jnp.float32)
  w = b.at[ml.ds(0, 64), :][...].astype(jnp.float32)
  o3[...] = acc * ml.max(w, axis=0)[None, :]


def _column_vector_tiles_ref(a, b):
  a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
  acc = a @ b
  return acc + a[0][None], a[0][None] + np.zeros((64, 64), np.float32), acc * b.max(0)[None]


@pytest.mark.parametrize("wg", [1, 2, 3])
def test_a_64_row_tile_of_a_dot_results_column_vector_is_held_whole(wg):
  """A column vector is every warpgroup's whole: a 64-row tile made from one (`bias[None, :] +
  ml.zeros((64, n))`), or reduced into one (`ml.max(w, axis=0)`), that meets a dot result split
  between warpgroups, was MG204 ('rows a multiple of 128') at block=256 and 384. Every warpgroup
  now holds such a tile whole, as it holds a 64-row B tile."""
  a, b = _dot_inputs(wg)
  _close(column_vector_tiles(a, b, wg=wg, interpret=True), _column_vector_tiles_ref(a, b), 1e-2)
  specs = (S(a.shape, F16), S(b.shape, F16))
  if wg > 1:
    assert "wgmma/whole" in column_vector_tiles.typed_ir(*specs, wg=wg)
  _export(column_vector_tiles, *specs, wg=wg)


@pytest.mark.gpu
@pytest.mark.parametrize("wg", [2, 3])
def test_a_64_row_tile_of_a_dot_results_column_vector_gpu(wg):
  a, b = _dot_inputs(wg, seed=1)
  _close(jax.jit(lambda a, b: column_vector_tiles(a, b, wg=wg))(a, b),
         column_vector_tiles(a, b, wg=wg, interpret=True), 1e-3)


# ---------------------------------------------------------------- positions in a split dot result
def _dot_out(a, b, *, wg, what):
  m, n = a.shape[0], b.shape[1]
  return {"rowmax": S((m,), F32), "rowargmax": S((m,), I32), "flatargmax": S((1,), I32),
          "vecargmax": S((1,), I32), "lastrowmax": S((1,), F32), "lastrow": S((n,), F32),
          "rowvec": S((m,), F32), "rowvec2d": S((m, 1), F32), "rowslice": S((64, n), F32),
          "transpose": S((n, m), F32), "concat0": S((2 * m, n), F32), "scatter": S((2 * m, n), F32),
          "overrun": S((m + m // 2, n), F32), "argsortvec": S((m,), I32)}.get(what, S((m, n), F32))


@mg.mgpu_kernel(out_shape=_dot_out, block=_block)
def dot_epilogue(a, b, o, *, wg, what):
  a_s = ml.smem(a.shape)
  b_s = ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  m, n = a.shape[0], b.shape[1]
  r = ml.arange(m)
  c = ml.arange(n)
  if what == "rowmax":
    o[...] = ml.max(acc, axis=1)
  elif what == "rowargmax":
    o[...] = ml.argmax(acc, axis=1)
  elif what == "flatargmax":
    o[0] = ml.argmax(acc)
  elif what == "vecargmax":
    o[0] = ml.argmax(ml.max(acc, axis=1), axis=0)
  elif what == "lastrowmax":
    o[0] = ml.max(acc, axis=1)[m - 1]
  elif what == "lastrow":
    o[...] = acc[m - 1]
  elif what == "rowvec":
    o[...] = ml.flip(ml.roll(ml.cumsum(ml.sum(acc, axis=1) * 0.1), 5), axis=0)
  elif what == "rowvec2d":
    o[...] = ml.roll(ml.cummax(ml.max(acc, axis=1, keepdims=True), axis=0), 7, axis=0)
  elif what == "argsortvec":
    o[...] = ml.argsort(ml.max(acc, axis=1))
  elif what == "cumsum0":
    o[...] = ml.cumsum(acc, axis=0) + ml.cummax(acc, axis=0, reverse=True)
  elif what == "cumsum1":
    o[...] = ml.cumsum(acc, axis=1)
  elif what == "sort":
    o[...] = ml.sort(acc)
  elif what == "transpose":
    o[...] = acc.T
  elif what == "causal":
    o[...] = ml.where(r[:, None] >= c[None, :], acc, (r[:, None] * n + c[None, :]).astype(jnp.float32))
  elif what == "roll0":
    o[...] = ml.roll(acc, 3, axis=0) + ml.flip(acc, axis=0)
  elif what == "rand":
    o[...] = acc * 0.0 + ml.rand(7, r[:, None] * n + c[None, :])
  elif what == "softmax":
    o[...] = ml.softmax(acc * 0.01, axis=None)
  elif what == "rowslice":
    o[...] = acc[:64] + acc[m - 64:]
  elif what == "concat0":
    o[...] = ml.concatenate([acc, acc * 2.0], axis=0)
  elif what == "gather":
    o[...] = acc + b[(r * 5) % 64, :][:, :n].astype(jnp.float32)
  elif what == "atomic":
    o[...] = ml.zeros((m, n), jnp.float32)
    ml.atomic_add(o, acc)
    ml.atomic_add(o.at[:, 0], ml.sum(acc, axis=1))
  elif what == "scatter":
    o[...] = ml.zeros((2 * m, n), jnp.float32)
    ml.atomic_add(o.at[(r * 5) % (2 * m), :], acc)
  elif what == "masked":
    o[...] = ml.zeros((m, n), jnp.float32)
    ml.store(o, acc, mask=(r < m - 10)[:, None] & (c < n - 3)[None, :])
  elif what == "overrun":
    o[...] = ml.zeros((m + m // 2, n), jnp.float32)
    o.at[ml.ds(m, m), :].store(acc, mask=(r < m // 2)[:, None])


def _acc(a, b):
  return np.asarray(a, np.float32) @ np.asarray(b, np.float32)


def _dot_ref(a, b, what):
  x = _acc(a, b)
  m, n = x.shape
  r, c = np.arange(m)[:, None], np.arange(n)[None, :]
  if what == "rowmax":
    return x.max(1)
  if what == "rowargmax":
    return x.argmax(1)
  if what in ("flatargmax", "vecargmax"):
    return np.array([x.argmax() if what == "flatargmax" else x.max(1).argmax()])
  if what == "lastrowmax":
    return x.max(1)[-1:]
  if what == "lastrow":
    return x[-1]
  if what == "rowvec":
    return np.flip(np.roll(np.cumsum(x.sum(1) * np.float32(0.1)), 5))
  if what == "rowvec2d":
    return np.roll(np.maximum.accumulate(x.max(1, keepdims=True), 0), 7, 0)
  if what == "argsortvec":
    return np.argsort(x.max(1), kind="stable")
  if what == "cumsum0":
    return np.cumsum(x, 0) + np.maximum.accumulate(x[::-1], 0)[::-1]
  if what == "cumsum1":
    return np.cumsum(x, 1)
  if what == "sort":
    return np.sort(x, 1)
  if what == "transpose":
    return x.T
  if what == "causal":
    return np.where(r >= c, x, (r * n + c).astype(np.float32))
  if what == "roll0":
    return np.roll(x, 3, 0) + x[::-1]
  if what == "softmax":
    return np.asarray(jax.nn.softmax(x * 0.01, axis=None))
  if what == "rowslice":
    return x[:64] + x[m - 64:]
  if what == "concat0":
    return np.concatenate([x, 2 * x])
  if what == "gather":
    return x + np.asarray(b, np.float32)[(np.arange(m) * 5) % 64]
  if what == "atomic":
    y = x.copy()
    y[:, 0] += x.sum(1)
    return y
  if what == "scatter":
    y = np.zeros((2 * m, n), np.float32)
    y[(np.arange(m) * 5) % (2 * m)] = x
    return y
  if what == "masked":
    return np.where((r < m - 10) & (c < n - 3), x, 0)
  if what == "overrun":
    y = np.zeros((m + m // 2, n), np.float32)
    y[m:] = x[:m // 2]
    return y
  return None       # rand: against block=128's interpret mode


_DOT_WHATS = ["rowmax", "rowargmax", "flatargmax", "vecargmax", "lastrowmax", "lastrow", "rowvec", "rowvec2d",
              "argsortvec", "cumsum0", "cumsum1", "sort", "transpose", "causal", "roll0", "rand", "softmax",
              "rowslice", "concat0", "gather", "atomic", "scatter", "masked", "overrun"]


def _dot_cases(wgs=(2, 3)):
  # (a sort needs a power of two: 192 rows at block=384 is MG003)
  return [(what, wg) for what in _DOT_WHATS for wg in wgs if not (what == "argsortvec" and wg == 3)]


@pytest.mark.parametrize("what,wg", _dot_cases())
def test_positions_in_a_split_dot_result_interpret_and_export(what, wg):
  a, b = _dot_inputs(wg)
  got = dot_epilogue(a, b, wg=wg, what=what, interpret=True)
  want = _dot_ref(a, b, what)
  if want is None:        # the same counters: the same numbers at block=128
    want = dot_epilogue(a, b, wg=1, what=what, interpret=True)
  _close(got, want, 2e-2)
  _export(dot_epilogue, S(a.shape, F16), S(b.shape, F16), wg=wg, what=what)


@pytest.mark.gpu
@pytest.mark.parametrize("what,wg", _dot_cases())
def test_positions_in_a_split_dot_result_gpu(what, wg):
  """Each warpgroup holds its own rows of the dot result: the GPU against interpret mode (which runs
  the CTA whole)."""
  a, b = _dot_inputs(wg, seed=2)
  got = jax.jit(lambda a, b: dot_epilogue(a, b, wg=wg, what=what))(a, b)
  want = dot_epilogue(a, b, wg=wg, what=what, interpret=True)
  if what in ("rowargmax", "flatargmax", "vecargmax", "argsortvec"):
    _same_picks(_acc(a, b), what, np.asarray(got), np.asarray(want))
  else:
    _close(got, want, 2e-3)


def _same_picks(x, what, got, want):
  """Indices into a dot result pick the same values (the tensor cores may round a sum's last bit
  otherwise than interpret mode, which may swap two all but equal values, not pick a far one)."""
  if what == "rowargmax":
    rows = np.arange(x.shape[0])
    _close(x[rows, got], x[rows, want], 1e-4)
  elif what == "flatargmax":
    _close(x.reshape(-1)[got], x.reshape(-1)[want], 1e-4)
  else:
    m = x.max(1)
    _close(m[got], m[want], 1e-4)
    if what == "argsortvec":
      assert sorted(got.tolist()) == list(range(m.size))


# ---------------------------------------------------------------- strided tensors split by rows
def _x_out(x, *, wg, what):
  m, n = x.shape
  return {"three_d": S((m // 8, 8, n), F32), "argmax": S((m,), I32), "argmaxflat": S((1,), I32),
          "argmincols": S((n,), I32), "topk": S((m, 8), F32), "transpose": S((n, m), F32),
          "column": S((m,), F32), "argsort": S((m, n), I32), "scalar_rmw": S((1,), F32),
          "rmw_rows": S((64, n), F32)}.get(what, S((m, n), F32))


@mg.mgpu_kernel(out_shape=_x_out, block=_block)
def split_rows(x, o, *, wg, what):
  m, n = x.shape
  if what == "three_d":
    t = x[...].reshape((m // 8, 8, n))
    o[...] = t * 2.0 + ml.arange(m // 8)[:, None, None].astype(jnp.float32)
  elif what == "index_grid":
    r = ml.arange(m)[:, None]
    c = ml.arange(n)[None, :]
    o[...] = ml.where(r > c, x[...], (r * n + c).astype(jnp.float32)) + ml.rand(3, r * n + c)
  elif what == "cumsum0":
    o[...] = ml.cumsum(x[...], axis=0) + ml.cumsum(x[...] * 2.0, axis=1)
  elif what == "flip_roll":
    o[...] = ml.flip(x[...], axis=0) + ml.roll(x[...], 5, axis=0)
  elif what == "transpose":
    o[...] = x[...].T
  elif what == "argmax":
    o[...] = ml.argmax(x[...], axis=1)
  elif what == "argmaxflat":
    o[0] = ml.argmax(x[...])
  elif what == "argmincols":
    o[...] = ml.argmin(x[...], axis=0)
  elif what == "topk":
    o[...] = ml.sort(x[...], descending=True)[:, :8]
  elif what == "argsort":
    o[...] = ml.argsort(x[...], axis=1)
  elif what == "concat":
    o[...] = ml.concatenate([x.at[ml.ds(m // 2, m // 2), :][...], x.at[ml.ds(0, m // 2), :][...]], axis=0)
  elif what == "column":
    v = x.at[:, 0][...]
    o[...] = v
    o[3] = v[m - 1]
  elif what == "while":
    v = x[...]
    while ml.max(ml.abs(v)) > 1.0:
      v = v * 0.5
    o[...] = v
  elif what == "overwrite":
    o[...] = x[...] * 2.0
    o.at[ml.ds(200, 8), :][...] = x.at[ml.ds(0, 8), :][...] + 1.0
    o[250, 3] = 5.0
    t = x[...]
    ml.store(o, t - ml.max(t, axis=1)[:, None], mask=t > 2.0)
    ml.atomic_add(o.at[100, 3], 1.0)
  elif what == "smem_overwrite":
    buf = ml.smem((m, n), jnp.float32)
    buf[...] = x[...] * 2.0
    buf[200, 3] = 5.0
    t = buf.at[ml.ds(190, 16), :][...]
    buf.at[ml.ds(190, 16), :][...] = t - ml.max(t, axis=1)[:, None]
    o[...] = buf[...]
  elif what == "scalar_rmw":
    s = ml.smem((1,), jnp.float32)
    s[0] = 0.0
    for k in range(m // 64):
      s[0] = s[0] + ml.sum(x.at[ml.ds(k * 64, 64), :][...])
    o[0] = s[0]
  elif what == "rmw_rows":
    o[...] = ml.zeros((64, n), jnp.float32)
    for k in range(m // 64):
      t = x.at[ml.ds(k * 64, 64), :][...]
      o[...] = o[...] + (t - ml.max(t, axis=1)[:, None])


def _x_ref(x, what):
  x = np.asarray(x)
  m, n = x.shape
  if what == "three_d":
    return x.reshape(m // 8, 8, n) * 2 + np.arange(m // 8)[:, None, None]
  if what == "cumsum0":
    return np.cumsum(x, 0) + np.cumsum(2 * x, 1)
  if what == "flip_roll":
    return x[::-1] + np.roll(x, 5, 0)
  if what == "transpose":
    return x.T
  if what == "argmax":
    return x.argmax(1)
  if what == "argmaxflat":
    return np.array([x.argmax()])
  if what == "argmincols":
    return x.argmin(0)
  if what == "topk":
    return -np.sort(-x, 1)[:, :8]
  if what == "argsort":
    return np.argsort(x, 1, kind="stable")
  if what == "concat":
    return np.concatenate([x[m // 2:], x[:m // 2]])
  if what == "column":
    y = x[:, 0].copy()
    y[3] = x[-1, 0]
    return y
  if what == "while":
    v = x.copy()
    while np.abs(v).max() > 1:
      v = v * np.float32(0.5)
    return v
  if what == "overwrite":
    y = 2 * x
    y[200:208] = x[:8] + 1
    y[250, 3] = 5
    y = np.where(x > 2, x - x.max(1, keepdims=True), y)
    y[100, 3] += 1
    return y
  if what == "smem_overwrite":
    y = 2 * x
    y[200, 3] = 5
    t = y[190:206]
    y[190:206] = t - t.max(1, keepdims=True)
    return y
  if what == "scalar_rmw":
    return np.array([x.sum()])
  if what == "rmw_rows":
    t = x.reshape(-1, 64, n)
    return (t - t.max(2, keepdims=True)).sum(0)
  return None       # index_grid: against block=128


_X_WHATS = ["three_d", "index_grid", "cumsum0", "flip_roll", "transpose", "argmax", "argmaxflat", "argmincols",
            "topk", "argsort", "concat", "column", "while", "overwrite", "smem_overwrite", "scalar_rmw", "rmw_rows"]


@pytest.mark.parametrize("what", _X_WHATS)
@pytest.mark.parametrize("wg", [2, 3])
def test_split_strided_tensors_interpret_and_export(what, wg):
  x = _x()
  want = _x_ref(x, what)
  if want is None:
    want = split_rows(x, wg=1, what=what, interpret=True)
  _close(split_rows(x, wg=wg, what=what, interpret=True), want, 1e-3)
  _export(split_rows, S(x.shape, F32), wg=wg, what=what)


@pytest.mark.gpu
@pytest.mark.parametrize("what", _X_WHATS)
@pytest.mark.parametrize("wg", [2, 3])
def test_split_strided_tensors_gpu(what, wg):
  x = _x(seed=3)
  got = jax.jit(lambda x: split_rows(x, wg=wg, what=what))(x)
  want = split_rows(x, wg=wg, what=what, interpret=True)
  if what.startswith("arg"):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  else:
    _close(got, want, 1e-3)


# ---------------------------------------------------------------- full reductions in warp-specialised kernels (B3)
@mg.mgpu_kernel(out_shape=lambda a, b, *, wg, pingpong=False: (S((a.shape[0], b.shape[1]), F32), S((2,), F32),
                                                              S((1,), I32)), block=_block)
def ws_amax(a, b, o, stats, idx, *, wg, pingpong=False):
  a_s = ml.smem((a.shape[0], 64), jnp.float16)
  b_s = ml.smem((64, b.shape[1]), jnp.float16)
  acc = ml.zeros((a.shape[0], b.shape[1]), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2, warp_specialize=True, pingpong=pingpong):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
  amax = ml.max(ml.abs(acc))
  o[...] = acc / amax
  stats[0] = amax
  stats[1] = ml.sum(ml.max(acc, axis=1))
  idx[0] = ml.argmin(acc)


def _ws_inputs(wg, seed=0):
  rng = np.random.default_rng(seed)
  return (jnp.asarray(rng.standard_normal((_rows(wg), 256)), F16),
          jnp.asarray(rng.standard_normal((256, 64)), F16))


@pytest.mark.parametrize("wg", [1, 2, 3])
def test_a_full_reduction_in_a_warp_specialised_kernel_combines_the_compute_warpgroups(wg):
  """`ml.max(ml.abs(acc))` (an FP8 epilogue's amax), a row statistic's sum and a flat argmin of a dot
  result in a warp-specialised kernel at block=256 and 384 were MG204: its warpgroups were said to run
  apart, but its compute warpgroups meet at their own barrier, where they now exchange their parts."""
  a, b = _ws_inputs(wg)
  x = _acc(a, b)
  o, stats, idx = ws_amax(a, b, wg=wg, interpret=True)
  _close(o, x / np.abs(x).max(), 1e-3)
  _close(stats, np.array([np.abs(x).max(), x.max(1).sum()], np.float32), 1e-2)
  assert int(idx[0]) == int(x.argmin())
  _export(ws_amax, S(a.shape, F16), S(b.shape, F16), wg=wg)


def test_a_full_reduction_after_a_ping_pong_loop_combines_the_compute_warpgroups():
  """Ping-pong's warpgroups run a turn apart in the loop, but both have left it (warpgroup 0 took the
  last turn warpgroup 1 passed) where the epilogue reduces: it was MG204, it combines the parts now
  (in the body, where a warpgroup holds the turn, it is MG503: test_probe36a)."""
  a, b = _ws_inputs(2)
  x = _acc(a, b)
  o, stats, idx = ws_amax(a, b, wg=2, pingpong=True, interpret=True)
  _close(o, x / np.abs(x).max(), 1e-3)
  _close(stats, np.array([np.abs(x).max(), x.max(1).sum()], np.float32), 1e-2)
  assert int(idx[0]) == int(x.argmin())
  _export(ws_amax, S(a.shape, F16), S(b.shape, F16), wg=2, pingpong=True)


@pytest.mark.gpu
@pytest.mark.parametrize("wg", [2, 3])
def test_a_full_reduction_in_a_warp_specialised_kernel_gpu(wg):
  a, b = _ws_inputs(wg, seed=4)
  got = jax.jit(lambda a, b: ws_amax(a, b, wg=wg))(a, b)
  want = ws_amax(a, b, wg=wg, interpret=True)
  _close(got[:2], want[:2], 1e-3)
  x = _acc(a, b).reshape(-1)
  _close(x[np.asarray(got[2])], x[np.asarray(want[2])], 1e-4)     # (the same value: see _same_picks)


@pytest.mark.gpu
def test_a_full_reduction_after_a_ping_pong_loop_gpu():
  """(Written in session 36; not yet run on the H200.)"""
  a, b = _ws_inputs(2, seed=5)
  got = jax.jit(lambda a, b: ws_amax(a, b, wg=2, pingpong=True))(a, b)
  want = ws_amax(a, b, wg=2, pingpong=True, interpret=True)
  _close(got[:2], want[:2], 1e-3)
  x = _acc(a, b).reshape(-1)
  _close(x[np.asarray(got[2])], x[np.asarray(want[2])], 1e-4)


# ---------------------------------------------------------------- a producer warpgroup past 1024 threads (B4)
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), block=1024)
def ws_block_1024(a, b, o):
  a_s = ml.smem((a.shape[0], 64), jnp.float16)
  b_s = ml.smem((64, b.shape[1]), jnp.float16)
  acc = ml.zeros((a.shape[0], b.shape[1]), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2, warp_specialize=True):
    for h in ml.static_range(a.shape[0] // 128):
      ml.copy(a.at[ml.ds(h * 128, 128), ml.ds(k * 64, 64)], a_s.at[ml.ds(h * 128, 128), :])
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
  o[...] = acc


def test_a_warp_specialised_kernel_of_1024_compute_threads_is_refused_at_its_loop():
  """Its CTA would have 1152 threads (the producer warpgroup added), which no GPU launches: it built,
  exported, and would have failed only at the launch, outside the kernel's words."""
  expect(ws_block_1024, [S((512, 128), F16), S((128, 64), F16)], mg.WarpSpecializeError, "for k in ml.range",
         "warp_specialize=True adds a producer warpgroup to the kernel's block=1024 compute threads: 1152"
         " threads, more than a CTA may have (1024)",
         hint="launch it with block=896 or fewer compute threads, or drop warp_specialize=True")


# ---------------------------------------------------------------- hints of reductions across split rows (B5)
@mg.mgpu_kernel(out_shape=lambda a, b, *, wg, what, followed: S((a.shape[0], b.shape[1]) if what == "softmax"
                                                                 else (b.shape[1],), F32), block=_block)
def column_stat(a, b, o, *, wg, what, followed):
  a_s = ml.smem(a.shape)
  b_s = ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  if what == "var" and not followed:
    o[...] = ml.var(acc, axis=0)
  elif what == "var":
    o[...] = ml.var(acc.T, axis=1)
  elif what == "logsumexp" and not followed:
    o[...] = ml.logsumexp(acc * 0.01, axis=0)
  elif what == "logsumexp":
    o[...] = ml.logsumexp((acc * 0.01).T, axis=1)
  elif what == "softmax" and not followed:
    o[...] = ml.softmax(acc * 0.01, axis=0)
  elif what == "softmax":
    o[...] = ml.softmax((acc * 0.01).T, axis=1).T
  elif what == "any" and not followed:
    o[...] = ml.any(acc > 3.0, axis=0).astype(jnp.float32)
  elif what == "any":
    o[...] = ml.any((acc > 3.0).T, axis=1).astype(jnp.float32)


_COLUMN_STATS = {
    "var": ("ml.var(acc, axis=0)", "ml.var(acc.T, axis=1)", lambda x: x.var(0)),
    "logsumexp": ("ml.logsumexp(acc * 0.01, axis=0)", "ml.logsumexp((acc * 0.01).T, axis=1)",
                  lambda x: np.log(np.exp(x * 0.01).sum(0))),
    "softmax": ("ml.softmax(acc * 0.01, axis=0)", "ml.softmax((acc * 0.01).T, axis=1).T",
                lambda x: np.asarray(jax.nn.softmax(x * 0.01, axis=0))),
    "any": ("ml.any(acc > 3.0, axis=0)", "ml.any((acc > 3.0).T, axis=1)", lambda x: (x > 3).any(0).astype(np.float32)),
}


@pytest.mark.parametrize("what", list(_COLUMN_STATS))
@pytest.mark.parametrize("wg", [2, 3])
def test_a_column_statistic_across_split_rows_works_as_written_or_on_the_transpose(what, wg):
  """ml.var, ml.logsumexp, ml.softmax and ml.any along the rows of a split dot result were MG204 with a hint of
  the function called on the transpose (probe 35b); since probe 62a the warpgroups combine their parts of the
  statistic, so the kernel as written computes what the transposed form does."""
  _, _, ref = _COLUMN_STATS[what]
  a, b = _dot_inputs(wg)
  for followed in (False, True):
    _close(column_stat(a, b, wg=wg, what=what, followed=followed, interpret=True), ref(_acc(a, b)), 1e-2)
    _export(column_stat, S(a.shape, F16), S(b.shape, F16), wg=wg, what=what, followed=followed)


@pytest.mark.gpu
@pytest.mark.parametrize("what", list(_COLUMN_STATS))
@pytest.mark.parametrize("wg", [2, 3])
@pytest.mark.parametrize("followed", [True, False])
def test_a_column_statistic_on_the_transpose_gpu(what, wg, followed):
  a, b = _dot_inputs(wg, seed=5)
  got = jax.jit(lambda a, b: column_stat(a, b, wg=wg, what=what, followed=followed))(a, b)
  _close(got, column_stat(a, b, wg=wg, what=what, followed=followed, interpret=True), 1e-3)
