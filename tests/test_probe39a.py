"""Probe 39a (a user's kernels around nine known gaps): Python's truth of run-time numbers in if/while
conditions, slices of run-time bounds and static size, keepdims statistics of small 3-D tiles, ..."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _rand(shape, seed, dtype=F32):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


# ---------------------------------------------------------------- number conditions are their truth
@mg.mgpu_kernel(out_shape=lambda x, n, f: x, grid=(1,))
def truthy(x, n, f, out):
  """A Triton author's flags and counters read from memory, tested as Python tests them."""
  v = x[...]
  if n[0]:
    v = v * 2.0
  if not n[1]:
    v = v + 10.0
  if f[0]:
    v = v - 0.5
  k = n[2]
  while k:
    v = v + 1.0
    k = k - 1
  c = n[2]
  while c and n[3]:
    v = v * 1.5
    c -= 1
    if c == 1:
      break
  if n[0] > 0 and n[3]:
    v = -v
  out[...] = v


def _truthy_want(x, n, f):
  v = np.asarray(x)
  if n[0]:
    v = v * 2.0
  if not n[1]:
    v = v + 10.0
  if f[0]:
    v = v - 0.5
  v = v + n[2]
  c = n[2]
  while c and n[3]:
    v = v * 1.5
    c -= 1
    if c == 1:
      break
  if n[0] > 0 and n[3]:
    v = -v
  return v


_TRUTHY_CASES = (([0, 1, 2, 3], [0.0]), ([5, 0, 3, 0], [np.nan]), ([1, 3, 0, 2], [-0.0]), ([-2, 0, 4, 1], [2.5]))


@pytest.mark.parametrize("nd", [jnp.int32, jnp.uint8])
def test_number_conditions_are_their_truth(nd):
  """`if n[0]:`, `while k:`, `not n[1]`, `while c and n[3]:` (with a break) of int scalars, `if f[0]:` of a
  float: MG003 (compare it) or MG001 (use & and |); as Python, a number's truth is that it is not zero."""
  x = _rand((128, 64), 0)
  for nn, ff in _TRUTHY_CASES:
    n, f = np.asarray(nn).astype(nd), np.asarray(ff, np.float32)
    got = truthy(x, jnp.asarray(n), jnp.asarray(f), interpret=True)
    np.testing.assert_allclose(np.asarray(got), _truthy_want(x, n.tolist(), ff), rtol=1e-6)
  _export(truthy, S(x.shape, F32), S((4,), nd), S((1,), F32))


@pytest.mark.gpu
def test_gpu_number_conditions_are_their_truth():
  x = _rand((128, 64), 1)
  for nn, ff in _TRUTHY_CASES:
    got = jax.jit(truthy)(x, jnp.asarray(nn, I32), jnp.asarray(ff, F32))
    np.testing.assert_allclose(np.asarray(got), _truthy_want(x, nn, ff), rtol=1e-6)


# ---------------------------------------------------------------- run-time slices of static size
@mg.mgpu_kernel(out_shape=lambda x, s: (S((64, x.shape[1]), x.dtype), S((64, 64), x.dtype), S((64, x.shape[1]), x.dtype)),
                grid=(1,))
def windows_at(x, s, rows, square, staged):
  """x[start:start + 64] as a Pallas/NumPy author writes a window at a run-time offset: read into registers,
  on two axes, and copied by TMA."""
  start = s[0]
  rows[...] = x[start:start + 64, :]
  square[...] = x[start:64 + start, start + 8:start + 72]
  buf = ml.smem((64, x.shape[1]))
  ml.copy(x.at[2 * start:2 * (start + 32)], buf)
  staged[...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def program_rows(x, out):
  pid = ml.program_id(0)
  out[pid * 64:(pid + 1) * 64] = x[pid * 64:(pid + 1) * 64] * 3.0


def test_run_time_slices_of_static_size_are_windows():
  """`x[s:s + 64]` and `x[pid * 64:(pid + 1) * 64]` were MG003 (slice bounds must be static ints) whose
  hint knew the size: the slice is the window ml.ds(s, 64)."""
  x = _rand((256, 128), 2)
  got = windows_at(x, jnp.asarray([40], I32), interpret=True)
  for g, w in zip(got, (x[40:104], x[40:104, 48:112], x[80:144])):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  np.testing.assert_array_equal(np.asarray(program_rows(x, interpret=True)), np.asarray(x * 3.0))
  _export(windows_at, S(x.shape, F32), S((1,), I32))
  _export(program_rows, S(x.shape, F32))


def test_run_time_slice_past_the_end_is_ml_ds_out_of_bounds():
  """Such a window past the array's end reads as ml.ds's does: interpret mode's OutOfBoundsError, at the slice."""
  x = _rand((256, 128), 3)
  with pytest.raises(mg.OutOfBoundsError) as info:
    windows_at(x, jnp.asarray([220], I32), interpret=True)
  assert info.value.lineno == _line_of("rows[...] = x[start:start + 64, :]")


@pytest.mark.gpu
def test_gpu_run_time_slices_of_static_size_are_windows():
  x = _rand((256, 128), 4)
  got = jax.jit(windows_at)(x, jnp.asarray([40], I32))
  for g, w in zip(got, (x[40:104], x[40:104, 48:112], x[80:144])):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  np.testing.assert_array_equal(np.asarray(jax.jit(program_rows)(x)), np.asarray(x * 3.0))


# ---------------------------------------------------------------- ** of 8-bit integers
@mg.mgpu_kernel(out_shape=lambda x: (x, x, x, x), grid=(1,))
def powers_8bit(x, sq, cube, one, mixed):
  """A quantised tile's squares (an int8 L2 term), as jnp writes them: products wrapping mod 2**8."""
  v = x[...]
  sq[...] = v ** 2
  cube[...] = v ** 3
  one[...] = v ** 0
  mixed[...] = (v // 3) ** 5 + v % 7


@pytest.mark.parametrize("dt", [jnp.int8, jnp.uint8])
def test_integer_powers_of_8bit_tiles_wrap_as_jnps(dt):
  """`v ** 2` of an int8 tile was MG106 (no register arithmetic on 8-bit types) though its products (`v * v`)
  compute in 32 bits and wrap back as jnp's."""
  x = (np.arange(256).reshape(2, 128) - (128 if dt == jnp.int8 else 0)).astype(dt)
  got = powers_8bit(jnp.asarray(x), interpret=True)
  xj = jnp.asarray(x)
  for g, w in zip(got, (xj ** 2, xj ** 3, xj ** 0, (xj // 3) ** 5 + xj % 7)):
    assert g.dtype == dt
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  _export(powers_8bit, S(x.shape, dt))


@pytest.mark.gpu
def test_gpu_integer_powers_of_8bit_tiles_wrap_as_jnps():
  xj = jnp.asarray((np.arange(256).reshape(2, 128) - 128).astype(np.int8))
  for g, w in zip(jax.jit(powers_8bit)(xj), (xj ** 2, xj ** 3, xj ** 0, (xj // 3) ** 5 + xj % 7)):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


# ---------------------------------------------------------------- a Python float given to an integer ml.scalar
@mg.mgpu_kernel(out_shape=lambda x, seed: x, grid=(1,))
def dropout(x, seed: ml.scalar, out):
  r = ml.rand(seed, ml.arange(128)[:, None] * 64 + ml.arange(64)[None, :])
  out[...] = ml.where(r > 0.5, x[...] * 2.0, 0.0)


@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=(1,))
def add_n_times(x, n: ml.scalar, out):
  acc = x[...]
  for _ in range(n):
    acc = acc + 1.0
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, r: S((8, 64), x.dtype), grid=(1,))
def rows_from(x, r: ml.scalar, out):
  out[...] = x.at[ml.ds(r, 8)][...]


@pytest.mark.parametrize("kernel,arg,use,where", [
    (dropout, 1.5, "a random seed", "r = ml.rand(seed,"), (add_n_times, 4.0, "a loop bound", "for _ in range(n):"),
    (rows_from, 8.0, "an index", "out[...] = x.at[ml.ds(r, 8)][...]")])
def test_a_python_float_for_an_integer_scalar_is_reported_at_the_call(kernel, arg, use, where):
  """`dropout(x, 1.5)` was reported at ml.rand in the kernel (a seed must be an integer, convert it with
  .astype): the mistake is the call's, which passed a float where the kernel needs an int."""
  x = _rand((128, 64), 5)
  name = kernel.parsed.scalar_params[0]
  with pytest.raises(mg.KernelTypeError) as info:
    kernel(x, arg, interpret=True)      # the call
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("kernel(x, arg, interpret=True)      # the call"), 4)
  assert e.message == (f"{name} (an ml.scalar parameter) is given the Python float {arg!r}, a float32 scalar, but"
                       f" the kernel uses it as {use}, which must be an integer")
  whole = f" ({int(arg)})" if arg.is_integer() else ""
  assert e.hint == f"pass an int{whole} for {name}: a Python int is an int32 scalar"
  assert any(n.startswith(f"{__file__}:{_line_of(where)}:") and n.endswith(f"{name} used as {use}") for n in e.notes)
  with pytest.raises(mg.KernelTypeError) as info:
    jax.jit(lambda a, s: kernel(a, s, interpret=True))(x, arg)     # (traced: a weak float)
  assert info.value.message.startswith(f"{name} (an ml.scalar parameter) is given a Python float, a float32 scalar")
  assert kernel(x, int(arg), interpret=True).shape == kernel.out_shape(x, 1).shape   # the hint, followed
  with pytest.raises(mg.KernelTypeError) as info:     # a float32 0-d array is the caller's dtype on purpose
    kernel(x, jnp.float32(arg), interpret=True)
  assert info.value.lineno == _line_of(where) and not info.value.message.startswith(name)


# ---------------------------------------------------------------- every unknown name of a statement
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def affine_typos(x, out):
  v = x[...]
  out[...] = v * scale + bias - ml.maximum(v, floor_) * [z * gain for z in range(2)][0] + scale
  w = ml.exp(v - mx)
  out[...] = w / denom


def test_every_unknown_name_of_a_statement_is_reported():
  """Only `scale` was reported: the statement stopped there, so `bias`, `floor_` and `gain` (and `denom`, after
  the poisoned `w`) came one fix at a time."""
  with pytest.raises(mg.UnknownNameError) as info:
    affine_typos.check(S((128, 64), F32))
  got = [(type(e), e.lineno, e.col_offset, e.message) for e in info.value.errors]
  first = _line_of("out[...] = v * scale + bias")
  text = open(__file__).read().splitlines()[first - 1]
  want = [(mg.UnknownNameError, first, text.index(n), f"name {n.strip('*')!r} is not defined")
          for n in ("scale", "bias", "floor_", "gain")]
  want += [(mg.UnknownNameError, _line_of("w = ml.exp(v - mx)"), 17, "name 'mx' is not defined"),
           (mg.UnknownNameError, _line_of("out[...] = w / denom"), 17, "name 'denom' is not defined")]
  assert got == want


# ---------------------------------------------------------------- a pipelined loop whose load is under an if
@mg.mgpu_kernel(out_shape=lambda x, m: S((128, 64), x.dtype), grid=(1,))
def sum_kept_tiles(x, m, out, *, hoisted: ml.constexpr = False):
  buf = ml.smem((128, 64))
  acc = ml.zeros((128, 64), F32)
  for t in ml.range(x.shape[0] // 128, stages=2):
    if hoisted:
      ml.copy(x.at[ml.ds(t * 128, 128)], buf)
    if m[t] != 0:
      if not hoisted:
        ml.copy(x.at[ml.ds(t * 128, 128)], buf)
      acc = acc + buf[...]
  out[...] = acc


def test_a_pipelined_loops_load_under_an_if_is_named_and_the_hint_works():
  """MG502 said the loop had no load to pipeline and hinted `load the tiles with ml.copy into buffers
  allocated before the loop`, which the kernel did: the load is under an if. The error was at the load, and
  its hint (move it above the condition) compiled and computed; since probe 56c the compiler moves the load
  above the condition itself, so the kernel as written computes too."""
  specs = S((1024, 64), F32), S((8,), I32)
  x, m = _rand((1024, 64), 7), jnp.asarray([1, 0, 1, 1, 0, 0, 1, 0], I32)
  want = sum(x[t * 128:(t + 1) * 128] for t in range(8) if int(m[t]))
  for hoisted in (False, True):
    np.testing.assert_allclose(np.asarray(sum_kept_tiles(x, m, hoisted=hoisted, interpret=True)), np.asarray(want),
                               rtol=1e-5, atol=1e-5)
    _export(sum_kept_tiles, *specs, hoisted=hoisted)


# ---------------------------------------------------------------- keepdims statistics of small 3-D tiles
@mg.mgpu_kernel(out_shape=lambda x: (x, x, x), grid=(1,))
def group_norms(x, ln, sm, centred):
  """Per-group statistics of a (groups, rows, cols) tile of 32 rows in all, as jnp writes them."""
  v = x[...]
  m = ml.mean(v, axis=-1, keepdims=True)
  s = ml.var(v, axis=-1, keepdims=True)
  ln[...] = (v - m) * ml.rsqrt(s + 1e-5)
  e = ml.exp(v - ml.max(v, axis=-1, keepdims=True))
  sm[...] = e / ml.sum(e, axis=-1, keepdims=True)
  centred[...] = v - ml.where(m > 0, m, 0.5 * m) / (1.0 + ml.abs(ml.min(v, axis=2, keepdims=True)))


def _group_want(x):
  m, s = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
  e = jnp.exp(x - x.max(-1, keepdims=True))
  return ((x - m) * jax.lax.rsqrt(s + 1e-5), e / e.sum(-1, keepdims=True),
          x - jnp.where(m > 0, m, 0.5 * m) / (1.0 + jnp.abs(x.min(2, keepdims=True))))


def test_keepdims_statistics_of_small_3d_tiles_broadcast_back():
  """ml.var(v, axis=-1, keepdims=True) (and ml.mean, ml.max, ...) of a (4, 8, 64) tile was MG204: its (4, 8, 1)
  statistic has 32 elements, too few for a register tensor of that shape, though the (32, 64) reshape reduces.
  The statistic is the (32,) vector reshaped, its math done on the vector, and it broadcasts back as the
  2-D statistic does."""
  x = _rand((4, 8, 64), 8)
  for g, w in zip(group_norms(x, interpret=True), _group_want(x)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
  _export(group_norms, S(x.shape, F32))


@pytest.mark.gpu
def test_gpu_keepdims_statistics_of_small_3d_tiles_broadcast_back():
  x = _rand((4, 8, 64), 9)
  for g, w in zip(jax.jit(group_norms)(x), _group_want(x)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- take_along_axis of refs
@mg.mgpu_kernel(out_shape=lambda x, i, j: (S(i.shape, x.dtype), S(j.shape, x.dtype)),
                grid=lambda x, i, j: (x.shape[0] // 64,))
def top_cols(x, idx, rows, by_col, by_row):
  """jnp.take_along_axis of a score tile's chosen columns (top-k indices: 8 a row), by tiles of 64 rows, and of
  chosen rows of each column."""
  r = ml.ds(ml.program_id(0) * 64, 64)
  by_col.at[r][...] = ml.take_along_axis(x.at[r], idx.at[r][...], axis=-1)
  if ml.program_id(0) == 0:
    by_row[...] = ml.take_along_axis(x, rows[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda x, i: S(i.shape, x.dtype), grid=(1,))
def along_registers(x, idx, out):
  out[...] = ml.take_along_axis(x[...], idx[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x, t, c: (S((x.shape[0],), x.dtype), S((1, x.shape[1]), x.dtype)), grid=(1,))
def target_of_each_row(x, t, c, row_pick, col_pick):
  """NLL's target column of each row of a register tile, and a row chosen per column."""
  v = x[...]
  row_pick[...] = ml.take_along_axis(v, t[...][:, None], axis=1)[:, 0]
  col_pick[...] = ml.take_along_axis(v, c[...][None, :], axis=-2)


def test_take_along_axis_of_a_ref_with_2d_indices_is_jnps():
  """ml.take_along_axis was MG002 (no ml.take_along_axis) whose hint wrote one element per row: with 2-D index
  tiles it is NumPy's advanced indexing with ml.arange grids along the other axes, a gather."""
  x = _rand((256, 128), 10)
  idx = jnp.asarray(np.random.default_rng(11).integers(0, 128, (256, 8)), I32)
  rows = jnp.asarray(np.random.default_rng(12).integers(0, 256, (4, 128)), I32)
  got = top_cols(x, idx, rows, interpret=True)
  for g, w in zip(got, (jnp.take_along_axis(x, idx, axis=1), jnp.take_along_axis(x, rows, axis=0))):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  _export(top_cols, S(x.shape, F32), S(idx.shape, I32), S(rows.shape, I32))
  # (since probe 53b x[...] of an input is gathered from x itself, as its hint wrote)
  np.testing.assert_array_equal(np.asarray(along_registers(x, idx, interpret=True)),
                                np.asarray(jnp.take_along_axis(x, idx, axis=1)))
  for dt in (F32, jnp.bfloat16, jnp.int8):
    v = (x * 50).astype(dt)[:32]
    t, c = idx[:32, 0], rows[0] % 32
    got = target_of_each_row(v, t, c, interpret=True)
    for g, w in zip(got, (jnp.take_along_axis(v, t[:, None], 1)[:, 0], jnp.take_along_axis(v, c[None, :], 0))):
      assert g.dtype == dt
      np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  _export(target_of_each_row, S((32, 128), jnp.bfloat16), S((32,), I32), S((128,), I32))


@pytest.mark.gpu
def test_gpu_take_along_axis_of_a_ref_with_2d_indices_is_jnps():
  x = _rand((256, 128), 13)
  idx = jnp.asarray(np.random.default_rng(14).integers(0, 128, (256, 8)), I32)
  rows = jnp.asarray(np.random.default_rng(15).integers(0, 256, (4, 128)), I32)
  got = jax.jit(top_cols)(x, idx, rows)
  for g, w in zip(got, (jnp.take_along_axis(x, idx, axis=1), jnp.take_along_axis(x, rows, axis=0))):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  v, t, c = x[:32].astype(jnp.bfloat16), idx[:32, 0], rows[0] % 32
  got = jax.jit(target_of_each_row)(v, t, c)
  for g, w in zip(got, (jnp.take_along_axis(v, t[:, None], 1)[:, 0], jnp.take_along_axis(v, c[None, :], 0))):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:2] + (1,), x.dtype), grid=(1,))
def group_var_stored(x, out):
  s = ml.var(x[...], axis=-1, keepdims=True)
  out[...] = s


def test_a_small_keepdims_statistic_stored_whole_is_stored_or_as_its_vector():
  """(Stored whole, it was MG204 with the hint to store its vector; since probe 44f it is stored a row at a time.)"""
  x = _rand((4, 8, 64), 16)
  np.testing.assert_allclose(np.asarray(group_var_stored(x, interpret=True)), np.asarray(x.var(-1, keepdims=True)),
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(np.asarray(group_var_as_vector(x, interpret=True)).reshape(4, 8, 1),
                             np.asarray(x.var(-1, keepdims=True)), rtol=1e-5, atol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] * x.shape[1],), x.dtype), grid=(1,))
def group_var_as_vector(x, out):        # the hint, followed
  s = ml.var(x[...], axis=-1, keepdims=True)
  out[...] = s.reshape(32)
