"""Probe 29g (data-dependent kernels: atomics, histograms, segment sums, scans, sorts, gathers and
scatters, compaction, MoE routing): what the probe's kernels found, and the two hint bugs a previous
probe left (MG602 under an if known while compiling, MG401 of a 1-D SMEM window)."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- a Python float into integer atomics
@mg.mgpu_kernel(out_shape=lambda x: S((64,), jnp.int32))
def half_counts(x, h):
  ml.atomic_add(h.at[x[...]], 0.5)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.int32))
def fractional_add(x, h):
  ml.atomic_add(h, 1.5)


@mg.mgpu_kernel(out_shape=lambda x: S((), jnp.int32))
def fractional_scalar_add(x, h):
  ml.atomic_add(h, 2.7)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.int32))
def huge_max(x, h):
  ml.atomic_max(h, 1e10)


@mg.mgpu_kernel(out_shape=lambda x: S((64,), jnp.int32))
def whole_float_counts(x, h):
  ml.atomic_add(h.at[x[...]], 1.0)


def test_a_fractional_python_float_into_an_integer_atomic_is_an_error():
  """`ml.atomic_add(counts.at[b], 0.5)` into int32 counts added 0 (1.5 added 1, 1e10 maxed
  2147483647): the number was converted to the ref's dtype, silently, in every update. `other=`
  of an integer load already refused such numbers."""
  expect(half_counts, [S((256,), I32)], mg.DtypeMismatchError, "ml.atomic_add(h.at[x[...]], 0.5)",
         "ml.atomic_add of the float 0.5 into h (int32): it would be truncated to 0 in every update",
         hint="make h a float array (jnp.float32 in out_shape) to accumulate fractions, or pass an integer (0 or 1)")
  expect(fractional_add, [S((128,), F32)], mg.DtypeMismatchError, "ml.atomic_add(h, 1.5)",
         "ml.atomic_add of the float 1.5 into h (int32): it would be truncated to 1 in every update")
  expect(fractional_scalar_add, [S((128,), F32)], mg.DtypeMismatchError, "ml.atomic_add(h, 2.7)",
         "ml.atomic_add of the float 2.7 into h (int32): it would be truncated to 2 in every update")
  expect(huge_max, [S((128,), F32)], mg.KernelTypeError, "ml.atomic_max(h, 1e10)",
         "ml.atomic_max of 10000000000.0 into h (int32): the number is outside int32's range"
         " (-2147483648..2147483647)")


def test_a_whole_python_float_counts_as_its_integer():
  x = np.random.default_rng(0).integers(0, 64, 256).astype(np.int32)
  got = whole_float_counts(jnp.asarray(x), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.bincount(x, minlength=64))


# ---------------------------------------------------------------- MG602 under an if known while compiling
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def first_program_only(x, out):
  i = ml.program_id(0)
  if i < 1:
    out.at[i][...] = x.at[i][...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def first_trip_only(x, out):
  for r in ml.static_range(2):
    if r == 0:
      out.at[r][...] = x.at[r][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def too_few_programs(x, out):
  i = ml.program_id(0)
  out.at[i][...] = x.at[i][...]


def test_a_hole_an_if_known_while_compiling_made_names_the_condition():
  """The hint said to launch enough programs; the if skipped the write (more programs would not help)."""
  e = expect(first_program_only, [S((2, 128), F32)], mg.UncoveredOutputError, "out.at[i][...] =",
             "out[1:2, :] is never written: none of the 2 programs of grid (2,) writes it, so 128 of 256"
             " elements of out would stay uninitialised")
  assert e.hint.startswith("the condition i < 1 of the if at line"), e.hint
  assert "is known while compiling: it skips the write in program (1,)" in e.hint, e.hint
  assert "launch enough programs" not in e.hint
  e = expect(first_trip_only, [S((2, 128), F32)], mg.UncoveredOutputError, "out.at[r][...] =",
             "out[1:2, :] is never written: the kernel's one program does not write it, so 128 of 256"
             " elements of out would stay uninitialised")
  assert e.hint.startswith("the condition r == 0 of the if at line"), e.hint
  assert "it skipped a branch that writes into out" in e.hint and "launch enough" not in e.hint, e.hint
  # without an if, the grid is what to fix
  e = expect(too_few_programs, [S((2, 128), F32)], mg.UncoveredOutputError, "out.at[i][...] =",
             "out[1:2, :] is never written: the kernel's one program does not write it, so 128 of 256"
             " elements of out would stay uninitialised")
  assert e.hint.startswith("launch enough programs"), e.hint


# ---------------------------------------------------------------- TMA into a 1-D SMEM window
@mg.mgpu_kernel(out_shape=lambda x: x)
def one_d_window_at_4(x, out):
  buf = ml.smem((256,))
  ml.copy(x.at[ml.ds(0, 128)], buf.at[ml.ds(4, 128)])
  out[...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x: S((4, 256), x.dtype))
def row_window_at_4(x, out):
  buf = ml.smem((4, 256))
  ml.copy(x.at[ml.ds(0, 128)], buf.at[1, ml.ds(4, 128)])
  out[...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def one_d_runtime_window(x, out):
  j = ml.program_id(0)
  buf = ml.smem((256,))
  ml.copy(x.at[ml.ds(j * 128, 128)], buf.at[ml.ds(j * 128, 128)])
  out.at[ml.ds(j * 128, 128)][...] = buf.at[ml.ds(j * 128, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def one_d_promised_window(x, out):
  j = ml.program_id(0)
  buf = ml.smem((256,))
  ml.copy(x.at[ml.ds(j * 128, 128)], buf.at[ml.ds(ml.multiple_of(j * 128, 32), 128)])
  out.at[ml.ds(j * 128, 128)][...] = buf.at[ml.ds(j * 128, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def one_d_unaligned_runtime_window(x, out):
  j = ml.program_id(0)
  buf = ml.smem((256,))
  ml.copy(x.at[ml.ds(j * 128, 128)], buf.at[ml.ds(j * 4, 128)])
  out.at[ml.ds(j * 128, 128)][...] = buf.at[ml.ds(j * 4, 128)][...]


def test_a_misaligned_1d_smem_window_is_hinted_in_elements():
  """The hint said to pad each row of the buffer, which a 1-D buffer (or a window starting inside a
  row) does not have."""
  expect(one_d_window_at_4, [S((256,), F32)], mg.TmaLimitError, "ml.copy(",
         "TMA copies need the SMEM window to start at a multiple of 128 bytes; buf.at[ml.ds(4, 128)] starts"
         " 16 bytes into buf",
         hint="start the window at a multiple of 32 elements of buf (128 bytes): ml.ds(0, 128) or ml.ds(32, 128),"
              " and read the elements you need from there (or allocate buf larger), or copy into a buffer of its own")
  e = expect(row_window_at_4, [S((256,), F32)], mg.TmaLimitError, "ml.copy(",
             "TMA copies need the SMEM window to start at a multiple of 128 bytes; buf.at[1, ml.ds(4, 128)]"
             " starts 1040 bytes into buf")
  assert e.hint.startswith("start the window at a multiple of 32 elements of buf's last dimension"), e.hint


def test_a_runtime_1d_smem_window_start_proved_aligned_is_accepted():
  """`buf.at[ml.ds(j * 128, 128)]` of a 1-D float32 buffer was rejected: the check took the
  window's step per unit of the run-time start (4 bytes), not what the start is a multiple of."""
  x = jnp.arange(256, dtype=F32)
  for k in (one_d_runtime_window, one_d_promised_window):
    np.testing.assert_array_equal(np.asarray(k(x, interpret=True)), np.asarray(x))
    assert "mosaic_gpu" in str(_export(k, S((256,), F32)))
  expect(one_d_unaligned_runtime_window, [S((256,), F32)], mg.TmaLimitError, "ml.copy(",
         "TMA copies need the SMEM window to start at a multiple of 128 bytes; the run-time start of"
         " buf.at[ml.ds(j * 4, 128)] is known to be a multiple of 4 elements only (16 bytes)",
         hint="start it at a multiple of 32 elements (128 bytes: ml.ds(j * 32, ...)), or, where it is one,"
              " say so: ml.ds(ml.multiple_of(start, 32), ...) (checked in interpret mode); or copy into a"
              " buffer of its own")


# ---------------------------------------------------------------- a scatter by a broadcast index tile
@mg.mgpu_kernel(out_shape=lambda v, r: S((64 * 16,), jnp.float32))
def flat_scatter(v, r, out):
  rows = r[...]
  ml.atomic_add(out.at[rows[:, None] * 16 + ml.arange(16)[None, :]], v[...])


@mg.mgpu_kernel(out_shape=lambda v, r: S((64 * 16,), jnp.float32))
def flat_scatter_by_columns(v, r, out):          # the hint's first way
  rows = r[...]
  vals = v[...]
  for j in ml.static_range(16):
    ml.atomic_add(out.at[rows * 16 + j], vals[:, j])


@mg.mgpu_kernel(out_shape=lambda v, r: S((64 * 16,), jnp.float32))
def flat_scatter_widened(v, r, out):             # the hint's second way
  rows = r[...]
  cols = ml.arange(32)[None, :]
  vals = v.at[:, ml.ds(0, 32)].load(mask=cols < 16, other=0)
  ml.atomic_add(out.at[ml.where(cols < 16, rows[:, None] * 16 + cols, out.shape[0])], vals)


def test_a_scatter_by_a_narrow_broadcast_index_tile_compiles_and_the_old_hints_forms_work():
  """The message called the scatter a gather, and the hint gathered (t[...] stored as out.at[:, j])."""
  specs = [S((8, 16), F32), S((8,), I32)]
  builds(flat_scatter, *specs)     # (now compiled: tiles narrower than a warp take fewer lanes a row, tests/test_narrow_rows.py)
  rng = np.random.default_rng(0)
  v = rng.standard_normal((8, 16)).astype(np.float32)
  r = rng.integers(0, 64, 8).astype(np.int32)
  want = np.zeros(64 * 16, np.float32)
  np.add.at(want, (r[:, None] * 16 + np.arange(16)[None, :]).ravel(), v.ravel())
  for k in (flat_scatter_by_columns, flat_scatter_widened):
    np.testing.assert_allclose(np.asarray(k(jnp.asarray(v), jnp.asarray(r), interpret=True)), want, rtol=1e-6)
    assert "mosaic_gpu" in str(_export(k, *specs))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def both_branches_write(x, out, *, double: ml.constexpr = False):
  i = ml.program_id(0)
  if double:
    out.at[i][...] = x.at[i][...] * 2
  else:
    out.at[i][...] = x.at[i][...]


def test_a_static_if_whose_taken_branch_writes_too_keeps_the_grid_hint():
  e = expect(both_branches_write, [S((2, 128), F32)], mg.UncoveredOutputError, "out.at[i][...] = x.at[i][...]",
             "out[1:2, :] is never written: the kernel's one program does not write it, so 128 of 256"
             " elements of out would stay uninitialised", nth=1)
  assert e.hint.startswith("launch enough programs"), e.hint


# ---------------------------------------------------------------- an SMEM atomic of an unsupported dtype
@mg.mgpu_kernel(out_shape=lambda x: S((8, 128), x.dtype))
def smem_max_f16(x, out):
  b = ml.smem((8, 128), jnp.float16)
  b[...] = ml.full((8, 128), float("-inf"), jnp.float16)
  ml.atomic_max(b, x[...])
  out[...] = b[...]


@mg.mgpu_kernel(out_shape=lambda x: S((8, 128), x.dtype))
def smem_max_f16_plain(x, out):       # the hint followed
  b = ml.smem((8, 128), jnp.float16)
  b[...] = ml.full((8, 128), float("-inf"), jnp.float16)
  b[...] = ml.maximum(b[...], x[...])
  out[...] = b[...]


def test_an_smem_atomic_hopper_lacks_hints_the_plain_update_one_cta_needs():
  """The hint only said to convert the dtypes; in SMEM every element of the window is one thread's."""
  expect(smem_max_f16, [S((8, 128), jnp.float16)], mg.UnsupportedDtypeError, "ml.atomic_max(b, x[...])",
         "ml.atomic_max on float16 is not supported in SMEM: Hopper's atomic max takes int32, uint32, and 8- and 16-bit integers",
         hint="update the SMEM window plainly, b[...] = ml.maximum(b[...], x[...]): each of its elements is held"
              " by one thread of the CTA, so none of them race (atomics matter between CTAs, in GMEM); or convert"
              " the value and the array to a supported dtype")
  x = np.random.default_rng(1).standard_normal((8, 128)).astype(np.float16)
  np.testing.assert_array_equal(np.asarray(smem_max_f16_plain(jnp.asarray(x), interpret=True)), x)
  assert "mosaic_gpu" in str(_export(smem_max_f16_plain, S((8, 128), jnp.float16)))


@mg.mgpu_kernel(out_shape=lambda x: x)
def first_runtime_trip_only(x, out):
  for r in range(2):
    if r == 0:
      out.at[r][...] = x.at[r][...]


def test_a_hole_an_if_on_a_loop_counter_made_names_the_trip():
  """In a run-time loop the grid evaluator decides the if per trip: the hint named program (0,),
  the kernel's only one."""
  e = expect(first_runtime_trip_only, [S((2, 128), F32)], mg.UncoveredOutputError, "out.at[r][...] =",
             "out[1:2, :] is never written: the kernel's one program does not write it, so 128 of 256"
             " elements of out would stay uninitialised")
  assert "the condition r == 0 of the if at line" in e.hint, e.hint
  assert "is known while compiling: it skips the write in the trip r = 1;" in e.hint, e.hint


# ---------------------------------------------------------------- jnp.sort's stable=
@mg.mgpu_kernel(out_shape=lambda x: (x, S(x.shape, jnp.int32)))
def sort_with_stable(x, s, o, *, stable: ml.constexpr = True):
  v = x[...]
  s[...] = ml.sort(v, stable=stable)
  o[...] = ml.argsort(v, descending=True, stable=stable)


@mg.mgpu_kernel(out_shape=lambda x: x)
def sort_with_stable_string(x, s):
  s[...] = ml.sort(x[...], stable="yes")


def test_sort_and_argsort_take_jnp_stable_argument():
  """ml.sort(x, stable=True), jnp.sort's own keyword, was 'an unexpected keyword argument'."""
  x = np.random.default_rng(2).integers(0, 8, (2, 128)).astype(np.float32)
  for stable in (True, False):
    s, o = sort_with_stable(jnp.asarray(x), stable=stable, interpret=True)
    np.testing.assert_array_equal(np.asarray(s), np.sort(x, axis=1))
    np.testing.assert_array_equal(np.asarray(o), np.asarray(jnp.argsort(jnp.asarray(x), axis=1, descending=True,
                                                                        stable=True)))
  assert "mosaic_gpu" in str(_export(sort_with_stable, S((2, 128), F32)))
  expect(sort_with_stable_string, [S((128,), F32)], mg.KernelTypeError, "ml.sort(",
         "ml.sort: stable is a static bool, got 'yes'",
         hint="leave it out: the sort is always stable (equal keys keep their order)")


# ---------------------------------------------------------------- jnp.cumsum's dtype=
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, jnp.int32), S(x.shape, jnp.float32), S(x.shape, jnp.int8)))
def scans_with_dtype(x, pos, run, small):
  v = x[...]
  pos[...] = ml.cumsum(v > 0, dtype=jnp.int32) - 1
  run[...] = ml.cumprod(v, dtype=jnp.float32)
  small[...] = ml.cumsum(v > -10, dtype=jnp.int8)


@mg.mgpu_kernel(out_shape=lambda x: x)
def cumsum_with_float64(x, out):
  out[...] = ml.cumsum(x[...], dtype=jnp.float64)


def test_cumsum_and_cumprod_take_jnp_dtype_argument():
  """ml.cumsum(keep, dtype=jnp.int32), jnp's own keyword, was 'an unexpected keyword argument'."""
  x = (1 + 0.01 * np.random.default_rng(3).standard_normal(256)).astype(np.float16)
  x[::3] *= -1
  pos, run, small = scans_with_dtype(jnp.asarray(x), interpret=True)
  j = jnp.asarray(x)
  np.testing.assert_array_equal(np.asarray(pos), np.asarray(jnp.cumsum(j > 0, dtype=jnp.int32) - 1))
  np.testing.assert_allclose(np.asarray(run), np.asarray(jnp.cumprod(j, dtype=jnp.float32)), rtol=1e-5)
  assert run.dtype == jnp.float32 and small.dtype == jnp.int8
  np.testing.assert_array_equal(np.asarray(small), np.asarray(jnp.cumsum(j > -10, dtype=jnp.int8)))   # wraps
  assert "mosaic_gpu" in str(_export(scans_with_dtype, S((256,), jnp.float16)))
  expect(cumsum_with_float64, [S((256,), F32)], mg.UnsupportedDtypeError, "ml.cumsum(",
         "ml.cumsum's dtype: float64 is not a kernel dtype")


@mg.mgpu_kernel(out_shape=lambda x: (S((), jnp.int32), S((x.shape[0],), jnp.int32), S((), jnp.float32)))
def sums_with_dtype(x, total, per_row, f):
  v = x[...]
  total[...] = ml.sum(v > 0, dtype=jnp.int32)
  per_row[...] = (v > 0).sum(axis=1, dtype=jnp.int32)
  f[...] = ml.sum(v, dtype=jnp.float32)


def test_sum_takes_jnp_dtype_argument():
  """ml.sum(mask, dtype=jnp.int32), a count as jnp writes it, was 'an unexpected keyword argument'."""
  x = np.random.default_rng(4).standard_normal((8, 128)).astype(np.float16)
  total, per_row, f = sums_with_dtype(jnp.asarray(x), interpret=True)
  assert int(total) == int((x > 0).sum()) and total.dtype == jnp.int32
  np.testing.assert_array_equal(np.asarray(per_row), (x > 0).sum(axis=1))
  np.testing.assert_allclose(float(f), float(x.astype(np.float32).sum()), rtol=1e-5)
  assert "mosaic_gpu" in str(_export(sums_with_dtype, S((8, 128), jnp.float16)))


# ---------------------------------------------------------------- a gather by a Python list
@mg.mgpu_kernel(out_shape=lambda t: S((8,), t.dtype))
def list_gather(t, out):
  out[...] = t[[0, 2, 5, 7, 1, 1, 3, -1]]


@mg.mgpu_kernel(out_shape=lambda t, ids: S(ids.shape, t.dtype))
def array_gather(t, ids, out):     # the hint followed
  out[...] = t[ids[...]]


def test_a_gather_by_a_python_list_hints_the_index_array():
  expect(list_gather, [S((16,), F32)], mg.KernelTypeError, "t[[0, 2",
         "cannot index with a Python list; use ints, static slices or ml.ds(start, size)",
         hint="index t with ints, static slices (a:b) or windows t.at[ml.ds(start, size)]; to read (or scatter"
              " into) the elements a list names, pass it in as an int32 array and index with that tensor, a"
              " gather: t[ids[...]] with ids = jnp.array([0, 2, 5, 7, 1, 1, 3, -1], jnp.int32)")
  t = np.arange(16, dtype=np.float32)
  ids = jnp.array([0, 2, 5, 7, 1, 1, 3, -1], jnp.int32)
  np.testing.assert_array_equal(np.asarray(array_gather(jnp.asarray(t), ids, interpret=True)), t[np.asarray(ids)])
  assert "mosaic_gpu" in str(_export(array_gather, S((16,), F32), S((8,), I32)))


@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.int32))
def inf_max(x, h):
  ml.atomic_max(h, float("-inf"))


def test_an_infinite_python_float_into_an_integer_atomic_is_an_error():
  expect(inf_max, [S((128,), F32)], mg.KernelTypeError, "ml.atomic_max(h, ",
         "ml.atomic_max of -inf into h (int32): int32 holds no -inf",
         hint="pass a number h can hold (-2147483648..2147483647: -2147483648 and 2147483647 are the identities"
              " of max and min), or make h a float array")


# ---------------------------------------------------------------- sorts of bool and float8 tensors
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, jnp.int32), S(x.shape, jnp.int8)))
def argsort_of_mask(x, o, s):
  m = x[...] > 0
  o[...] = ml.argsort(m, descending=True)
  s[...] = ml.sort(m).astype(jnp.int8)


@mg.mgpu_kernel(out_shape=lambda x: (x, S(x.shape, jnp.int32)))
def sort_float8(x, s, o):
  v = x[...]
  s[...] = ml.sort(v)
  o[...] = ml.argsort(v)


def test_sort_and_argsort_take_bool_and_float8_tensors():
  """ml.argsort(x > 0) (jnp.argsort of a mask: the positions where it holds first, with
  descending=True) and sorts of float8 were MG106: they sort through 32-bit keys now."""
  x = np.random.default_rng(5).standard_normal((2, 128)).astype(np.float32)
  o, s = argsort_of_mask(jnp.asarray(x), interpret=True)
  m = jnp.asarray(x) > 0
  np.testing.assert_array_equal(np.asarray(o), np.asarray(jnp.argsort(m, axis=1, descending=True, stable=True)))
  np.testing.assert_array_equal(np.asarray(s), np.asarray(jnp.sort(m, axis=1)).astype(np.int8))
  assert "mosaic_gpu" in str(_export(argsort_of_mask, S((2, 128), F32)))
  f8 = jnp.asarray(x).astype(jnp.float8_e4m3fn)
  s, o = sort_float8(f8, interpret=True)
  np.testing.assert_array_equal(np.asarray(s).astype(np.float32), np.asarray(jnp.sort(f8, axis=1)).astype(np.float32))
  np.testing.assert_array_equal(np.asarray(o), np.asarray(jnp.argsort(f8, axis=1, stable=True)))
  assert "mosaic_gpu" in str(_export(sort_float8, S((2, 128), jnp.float8_e4m3fn)))
