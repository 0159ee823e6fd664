"""Probe 42v (a user's control flow and data-driven kernels; part two in test_probe42v2.py): a `return` inside a
run-time loop that sits in an `if` ends the kernel (it was MG001); hints that loop at run time (a comprehension over
a run-time range, a None sentinel a loop carries); `for i in (A if c else B)` and `range(a, n)[::-1]` (MG001 before);
a short register slice hinted in the user's names; a while on an input element its body cannot change (MG003)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _search_data():
  x = np.minimum(np.random.default_rng(0).standard_normal(40), 1.0).astype(np.float32)
  x[17] = 3.0
  return x


# ---------------------------------------------------------------- return in a loop inside an if
@mg.mgpu_kernel(out_shape=lambda x, m: S((2,), I32), grid=(1,))
def first_hit_if(x, m, out):
  """The first element above 2 when m > 0 (a for loop under a run-time if), else -1."""
  out[1] = 5
  if m[...] > 0:
    for i in range(x.shape[0]):
      if x[i] > 2.0:
        out[0] = i
        return
  out[0] = -1


@mg.mgpu_kernel(out_shape=lambda x, m: S((2,), I32), grid=(1,))
def first_hit_while(x, m, out):
  """The same with a while loop."""
  out[1] = 5
  if m[...] > 0:
    i = 0
    while i < x.shape[0]:
      if x[i] > 2.0:
        out[0] = i
        return
      i += 1
  out[0] = -1


@mg.mgpu_kernel(out_shape=lambda x, m: S((2,), I32), grid=(1,))
def first_hit_static(x, m, out, *, search: ml.constexpr = True):
  """Under a static if (a constexpr)."""
  out[1] = 5
  if search:
    for i in range(x.shape[0]):
      if x[i] > 2.0:
        out[0] = i
        return
  out[0] = -1


def _first_hit_want(x, m):
  hit = np.flatnonzero(x > 2.0)
  return np.array([hit[0] if m > 0 and hit.size else -1, 5], np.int32)


@pytest.mark.parametrize("kernel", [first_hit_if, first_hit_while, first_hit_static])
def test_return_in_a_loop_inside_an_if_ends_the_kernel(kernel):
  x = _search_data()
  for xs, m in ((x, 1), (x, 0), (np.minimum(x, 1.0), 1)):
    if kernel is first_hit_static and m == 0:
      continue
    got = kernel(jnp.asarray(xs), jnp.int32(m), interpret=True)
    np.testing.assert_array_equal(np.asarray(got), _first_hit_want(xs, m))
  assert "@mosaic_gpu" in _export(kernel, S((40,), F32), S((), I32))


@mg.mgpu_kernel(out_shape=lambda x, mode: x, grid=lambda x, mode: (x.shape[0] // 64,))
def per_tile_mode(x, mode, out):
  """An if/elif chain on a per-tile mode whose middle branch searches its tile's first column and returns."""
  i = ml.program_id(0)
  buf = ml.smem((64, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 64, 64)], buf)
  v = buf[...]
  md = mode[i]
  if md == 0:
    out.at[ml.ds(i * 64, 64)][...] = v
  elif md == 1:
    for r in range(64):
      if buf[r, 0] > 1.0:
        out.at[ml.ds(i * 64, 64)][...] = v * 0.0 + r.astype(jnp.float32)
        return
    out.at[ml.ds(i * 64, 64)][...] = -v
  else:
    out.at[ml.ds(i * 64, 64)][...] = v * 3.0


def _per_tile_data():
  x = np.random.default_rng(1).standard_normal((256, 32)).astype(np.float32)
  x[64:69, 0] = 0.0
  x[69, 0] = 2.0
  x[192:, 0] = np.minimum(x[192:, 0], 0.5)
  return x, np.array([0, 1, 2, 1], np.int32)


def _per_tile_want(x):
  w = x.copy().reshape(4, 64, 32)
  w[1], w[2], w[3] = 5.0, w[2] * 3, -w[3]
  return w.reshape(256, 32)


def test_return_in_a_loop_of_an_elif_branch():
  x, mode = _per_tile_data()
  got = per_tile_mode(jnp.asarray(x), jnp.asarray(mode), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), _per_tile_want(x))
  assert "@mosaic_gpu" in _export(per_tile_mode, S(x.shape, F32), S((4,), I32))


@ml.inline
def _find_above(x, m):
  if m > 0:
    for i in range(x.shape[0]):
      if x[i] > 2.0:
        return i
  return -1


@mg.mgpu_kernel(out_shape=lambda x, m: S((), I32), grid=(1,))
def find_with_helper(x, m, out):
  out[...] = _find_above(x, m[...])


def test_helper_return_in_a_loop_inside_an_if():
  x = _search_data()
  for xs, m in ((x, 1), (x, 0), (np.minimum(x, 1.0), 1)):
    got = find_with_helper(jnp.asarray(xs), jnp.int32(m), interpret=True)
    assert int(got) == _first_hit_want(xs, m)[0]
  assert "@mosaic_gpu" in _export(find_with_helper, S((40,), F32), S((), I32))


@pytest.mark.gpu
def test_gpu_return_in_a_loop_inside_an_if():
  x = _search_data()
  for kernel in (first_hit_if, first_hit_while):
    for xs, m in ((x, 1), (x, 0), (np.minimum(x, 1.0), 1)):
      np.testing.assert_array_equal(np.asarray(kernel(jnp.asarray(xs), jnp.int32(m))), _first_hit_want(xs, m))
  x, mode = _per_tile_data()
  np.testing.assert_array_equal(np.asarray(per_tile_mode(jnp.asarray(x), jnp.asarray(mode))), _per_tile_want(x))
  got = find_with_helper(jnp.asarray(_search_data()), jnp.int32(1))
  assert int(got) == 17


# ---------------------------------------------------------------- hints that loop at run time
def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _raises(kernel, *args):
  with pytest.raises(mg.KernelError) as info:
    kernel(*args, interpret=True)
  return info.value


@mg.mgpu_kernel(out_shape=lambda x, n: S((), F32), grid=(1,))
def sum_of_generator(x, n, out):
  out[...] = sum(x[i] for i in range(n[...]))     # a run-time count


@mg.mgpu_kernel(out_shape=lambda x, n: S((), I32), grid=(1,))
def max_of_list(x, n, out):
  out[...] = max([x[i] * 2 for i in range(1, n[...])])


@mg.mgpu_kernel(out_shape=lambda x, n: S((), F32), grid=(1,))
def sum_of_generator_fixed(x, n, out):
  acc = 0.0
  for i in range(n[...]):
    acc = acc + x[i]
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, n: S((), I32), grid=(1,))
def max_of_list_fixed(x, n, out):
  acc = jnp.iinfo(jnp.int32).min
  for i in range(1, n[...]):
    acc = ml.maximum(acc, x[i] * 2)
  out[...] = acc


def test_comprehension_over_a_run_time_range_hints_the_loop_that_folds_it():
  x = jnp.asarray(np.random.default_rng(2).standard_normal(20), F32)
  e = _raises(sum_of_generator, x, jnp.int32(5))
  assert isinstance(e, mg.KernelTypeError) and e.code == "MG003"
  assert (e.lineno, e.col_offset) == (_line_of("sum(x[i] for i in range(n[...]))"), 31)
  assert "a comprehension needs static bounds" in str(e)
  assert e.hint == ("a comprehension is unrolled while tracing, and range(n[...]) counts at run time: loop at run"
                    " time instead, acc = 0.0, then for i in range(n[...]): acc = acc + x[i], and use acc where"
                    " sum(x[i] for i in range(n[...])) stood")
  np.testing.assert_allclose(float(sum_of_generator_fixed(x, jnp.int32(5), interpret=True)),
                             float(jnp.sum(x[:5])), rtol=1e-6)
  xi = jnp.asarray(np.random.default_rng(3).integers(-9, 9, 20), I32)
  e = _raises(max_of_list, xi, jnp.int32(5))
  assert (e.lineno, e.col_offset) == (_line_of("max([x[i] * 2 for i in range(1, n[...])])"), 36)
  assert e.hint == ("a comprehension is unrolled while tracing, and range(1, n[...]) counts at run time: loop at run"
                    " time instead, acc = jnp.iinfo(jnp.int32).min, then for i in range(1, n[...]): acc ="
                    " ml.maximum(acc, x[i] * 2), and use acc where max([x[i] * 2 for i in range(1, n[...])]) stood")
  assert int(max_of_list_fixed(xi, jnp.int32(5), interpret=True)) == int(jnp.max(xi[1:5] * 2))
  assert "@mosaic_gpu" in _export(max_of_list_fixed, S((20,), I32), S((), I32))


@mg.mgpu_kernel(out_shape=lambda x: S((), F32), grid=(1,))
def running_max_from_none(x, out):
  best = None
  for i in range(x.shape[0]):
    if best is None or x[i] > best:
      best = x[i]                                   # the loop makes best a float32 scalar
  out[...] = best


@mg.mgpu_kernel(out_shape=lambda x: S((), F32), grid=(1,))
def running_max_fixed(x, out):
  best = float('-inf')
  for i in range(x.shape[0]):
    if best is None or x[i] > best:
      best = x[i]
  out[...] = best


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32), grid=(1,))
def first_row_from_none(x, out):
  first = None
  for i in range(x.shape[0]):
    if first is None:
      first = x.at[i][...] * 2.0                    # a tensor: no order to start from
  out[...] = first


def test_a_none_sentinel_carried_by_a_loop_starts_where_its_test_still_holds():
  x = jnp.asarray(-np.abs(np.random.default_rng(4).standard_normal(20)), F32)    # all negative: 0.0 would win
  e = _raises(running_max_from_none, x)
  assert isinstance(e, mg.LoopCarryTypeError) and e.code == "MG005"
  assert (e.lineno, e.col_offset) == (_line_of("best = x[i]                                   # the loop"), 6)
  assert "best starts this runtime loop as None and the loop makes it a float32 scalar" in str(e)
  assert e.hint.startswith("start it as best = float('-inf') before the loop, the lowest float32, which the first"
                           " value compared with it replaces; `best is None` is then False")
  assert float(running_max_fixed(x, interpret=True)) == float(jnp.max(x))
  e = _raises(first_row_from_none, jnp.zeros((4, 128), F32))
  assert (e.lineno, e.col_offset) == (_line_of("first = x.at[i][...] * 2.0"), 6)
  assert e.hint.startswith("start it as first = ml.zeros((128,), jnp.float32) before the loop, and test a flag instead"
                           " of `first is None`")


# ---------------------------------------------------------------- other spellings of a loop's range
@mg.mgpu_kernel(out_shape=lambda x, n, m: S((2,), F32), grid=(1,))
def loop_over_chosen_range(x, n, m, out):
  """The range picked by a conditional expression on a run-time scalar; the loop variable read after."""
  s = 0.0
  i = -1
  for i in (range(n[...]) if m[...] > 0 else range(3, 8)):
    s = s * 0.5 + x[i]
  out[0] = s
  out[1] = i.astype(jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x, n: S((), F32), grid=(1,))
def loop_over_static_choice(x, n, out, *, up: ml.constexpr = True):
  s = 0.0
  for i in (range(n[...]) if up else range(5)):
    s = s * 0.5 + x[i]
  out[...] = s


@mg.mgpu_kernel(out_shape=lambda x, n: S((), F32), grid=(1,))
def loop_over_reversed_slice(x, n, out):
  """range(2, n)[::-1] of a run-time n, with a break: reversed(range(2, n))."""
  s = 0.0
  for i in range(2, n[...])[::-1]:
    if x[i] > 1.5:
      break
    s = s * 0.5 + x[i]
  out[...] = s


@mg.mgpu_kernel(out_shape=lambda x, n, m: S((), F32), grid=(1,))
def positions_over_chosen_range(x, n, m, out):
  """enumerate of the chosen range: each path's enumerate."""
  t = 0.0
  for k, i in enumerate(range(n[...]) if m[...] > 0 else range(3, 6)):
    t += x[i] * k
  out[...] = t


def _fold(xs, order, stop=None):
  s, i = 0.0, -1
  for i in order:
    if stop is not None and xs[i] > stop:
      break
    s = s * 0.5 + xs[i]
  return s, i


def test_a_loop_over_a_chosen_or_reversed_range():
  xs = np.random.default_rng(5).standard_normal(64).astype(np.float32)
  x = jnp.asarray(xs)
  for n, m in ((5, 1), (0, 1), (5, 0)):
    s, i = _fold(xs, range(n) if m > 0 else range(3, 8))
    got = np.asarray(loop_over_chosen_range(x, jnp.int32(n), jnp.int32(m), interpret=True))
    np.testing.assert_allclose(got, [s, i], rtol=1e-6)
  got = loop_over_static_choice(x, jnp.int32(6), interpret=True)
  np.testing.assert_allclose(float(got), _fold(xs, range(6))[0], rtol=1e-6)
  for n, m in ((5, 1), (5, 0)):
    got = positions_over_chosen_range(x, jnp.int32(n), jnp.int32(m), interpret=True)
    want = sum(xs[i] * k for k, i in enumerate(range(n) if m > 0 else range(3, 6)))
    np.testing.assert_allclose(float(got), want, rtol=1e-6)
  for n in (0, 3, 30):
    got = loop_over_reversed_slice(x, jnp.int32(n), interpret=True)
    np.testing.assert_allclose(float(got), _fold(xs, range(2, n)[::-1], stop=1.5)[0], rtol=1e-6)
  assert "@mosaic_gpu" in _export(loop_over_chosen_range, S((64,), F32), S((), I32), S((), I32))
  assert "@mosaic_gpu" in _export(loop_over_reversed_slice, S((64,), F32), S((), I32))


@pytest.mark.gpu
def test_gpu_a_loop_over_a_chosen_or_reversed_range():
  xs = np.random.default_rng(5).standard_normal(64).astype(np.float32)
  x = jnp.asarray(xs)
  for n, m in ((5, 1), (0, 1), (5, 0)):
    s, i = _fold(xs, range(n) if m > 0 else range(3, 8))
    np.testing.assert_allclose(np.asarray(loop_over_chosen_range(x, jnp.int32(n), jnp.int32(m))), [s, i], rtol=1e-6)
  for n in (0, 3, 30):
    np.testing.assert_allclose(float(loop_over_reversed_slice(x, jnp.int32(n))), _fold(xs, range(2, n)[::-1], stop=1.5)[0],
                               rtol=1e-6)


# ---------------------------------------------------------------- a top-k's short slice, in the user's names
@mg.mgpu_kernel(out_shape=lambda x: (S((4,), F32), S((2, 4), F32)), grid=(1,))
def top4(x, vals, rows):
  s = ml.sort(x[...], descending=True)
  vals[...] = s[:4]                                 # 4 elements: no register vector
  rows.at[1].at[ml.ds(0, 8)].store(s[:8], mask=ml.arange(8) < 4)
  rows.at[0].at[ml.ds(0, 8)].store(s[4:12], mask=ml.arange(8) < 4)


@mg.mgpu_kernel(out_shape=lambda x: (S((4,), F32), S((2, 4), F32)), grid=(1,))
def top4_fixed(x, vals, rows):
  s = ml.sort(x[...], descending=True)
  vals.at[ml.ds(0, 8)].store(s[:8], mask=ml.arange(8) < 4)
  rows.at[1].at[ml.ds(0, 8)].store(s[:8], mask=ml.arange(8) < 4)
  rows.at[0].at[ml.ds(0, 8)].store(s[4:12], mask=ml.arange(8) < 4)


def test_a_short_slice_stored_whole_computes_as_its_hint_does():
  # (s[:4] was MG204 whose hint, in the user's names, top4_fixed follows; since probe 47a it is computed padded)
  x = jnp.asarray(np.random.default_rng(6).standard_normal(128), F32)
  top = -np.sort(-np.asarray(x))
  for k in (top4, top4_fixed):
    vals, rows = k(x, interpret=True)
    np.testing.assert_array_equal(np.asarray(vals), top[:4])
    np.testing.assert_array_equal(np.asarray(rows), np.stack([top[4:8], top[:4]]))
  assert "@mosaic_gpu" in _export(top4_fixed, S((128,), F32))


# ---------------------------------------------------------------- a while that reads an input element and never ends
@mg.mgpu_kernel(out_shape=lambda x: S((), I32), grid=(1,))
def scan_forgot_step(x, out):
  i = 0
  c = 0
  while x[i] < 5.0:                                 # i never changes, and x is read-only
    c += 1
  out[...] = c


@mg.mgpu_kernel(out_shape=lambda x: S((), I32), grid=(1,))
def scan_with_step(x, out):
  i = 0
  while x[i] < 5.0:
    i += 1
  out[...] = i


@mg.mgpu_kernel(out_shape=lambda x: S((), I32), grid=(1,))
def capped_by_break(x, out):
  """The same condition, ended by a break: not reported."""
  i = 0
  c = 0
  while x[i] < 5.0:
    c += 1
    if c >= 7:
      break
  out[...] = c


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,), input_output_aliases={0: 0})
def aliased_flag(x, out):
  """An aliased input the body writes through its output: its element may change."""
  while x[0] < 5.0:
    out[0] = 10.0
  out[1] = x[0]


def test_a_while_on_an_input_element_its_body_cannot_change_is_reported():
  x = jnp.asarray(np.arange(8), F32)
  e = _raises(scan_forgot_step, x)            # was ten million interpreted trips, then a hang report
  assert isinstance(e, mg.KernelTypeError) and e.code == "MG003"
  assert (e.lineno, e.col_offset) == (_line_of("while x[i] < 5.0:                                 # i never"), 8)
  assert ("this while condition never changes: the loop's body assigns none of i, and x is an input (read-only), so"
          " a program that enters the loop never leaves it (the GPU would hang)") in str(e)
  assert e.hint == "change i in the loop's body (a counter: i += 1), or loop a fixed number of times: for j in range(n)"
  assert int(scan_with_step(x, interpret=True)) == 5
  assert int(capped_by_break(jnp.zeros((8,), F32), interpret=True)) == 7
  got = aliased_flag(jnp.zeros((8,), F32), interpret=True)
  assert float(got[0]) == 10.0 and float(got[1]) == 10.0
