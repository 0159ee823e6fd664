"""Probe 59c: differential fuzzing of control-flow-structured kernels (loops of static and run-time trip counts,
while loops of data-dependent conditions, ifs on GMEM scalars and program ids, early returns, break / continue /
for-else, ml.where masks, lax loops, helpers, tuple / list / dict carries) against references computed by running
each kernel's body as Python on jnp values (tests/cf_fuzz.py, design note 195).

The classes found, each fixed:

1. A kernel's `return` in a run-time loop (or under a run-time if) was MG001 wherever the kernel also defined a
   helper (a `def` or lambda in its body) that returns a value: the rewrite of the kernel's returns counted the
   helper's `return v` as the kernel's own, and a kernel returns no value. The helper's returns are its own now.
2. An inline helper whose loop returns early, and whose last return reads a parameter the loop updates (`for k in
   range(n): if ...: return v * 0.5` then `v = v + 1.0`, then `return v - 1.0`), was MG001: the value given where no
   early return is taken was thought not computable before the loop. A parameter is bound before the loop.
3. A `return` in a loop inside a loop's `else:` (`for row in x: ... else: while ...: if c: return`) was MG001.
4. `d["a"] = v` (and `d["a"] += v`) of a dict bound to a name was MG003 (lists took it since probe 52b), and loops
   and ifs could not carry a dict (MG005). A dict of static keys is now a value as a list is: the name is bound to
   a dict with that item replaced or added, loops and ifs carry it leaf by leaf, and it is refused, as a list's is,
   where another name still read holds the same dict, or where the branches of an if give it different keys.
5. `for k, i in enumerate(ml.range(3))` (an `ml.range` of static bounds: a run-time loop) was MG001 ("enumerate()
   cannot take a runtime loop"), where `enumerate(ml.range(n))` of a run-time bound was the loop with its position
   computed from its index (probe 42v); static bounds now take the same path.
6. `all([n[0] > 1, s, c])` of a number scalar among the booleans was MG003 ("Python's iteration"): Python's all()
   takes each item's truth; a number scalar is now its truth (`s != 0`, NaN true), as `if s:` takes it.
7. `jnp.where(c, a, b)` of a Python number condition (a count `c = 0` no path changed) was MG003 ("must be a
   boolean"), where jnp takes its truth; a Python or NumPy number condition is now its truth, as a bool was.
"""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
import cf_fuzz
from probe_util import export

S = jax.ShapeDtypeStruct
ROWS = (np.arange(3 * 128, dtype=np.float32) % 7 - 3).reshape(3, 128)


def _counts(k, hi=3):
  """Every int32 vector of 8 whose first `k` entries run over 0..hi-1 (the rest 0)."""
  for nn in itertools.product(range(hi), repeat=k):
    yield np.array(nn + (0,) * (8 - k), np.int32)


def _check(kernel, ref, k, hi=3):
  for n in _counts(k, hi):
    got = kernel(jnp.asarray(ROWS), jnp.asarray(n), interpret=True)
    want = ref(ROWS, n)
    for g, w in zip(got, want):
      np.testing.assert_array_equal(np.asarray(g), np.asarray(w, np.float32), err_msg=str(n))


OUT = lambda *a: (S((128,), jnp.float32), S((2,), jnp.float32))


# ---------------------------------------------------------------------- class 1
@mg.mgpu_kernel(out_shape=OUT, grid=(1,))
def _return_beside_helper(x, n, o, os):
  t = x[0]
  for i in range(n[0]):
    if i >= n[1]:
      o[...] = t
      os[0] = 1.0
      os[1] = 0.0
      return
    t = t + x[1]

  def halve(v, m):
    for k in range(m):
      if jnp.max(v) > 2.0:
        return v * 0.5
    return v
  o[...] = halve(t, n[2])
  os[0] = 2.0
  os[1] = 0.0


def _return_beside_helper_ref(x, n):
  t = x[0]
  for i in range(n[0]):
    if i >= n[1]:
      return t, (1.0, 0.0)
    t = t + x[1]
  v = t
  for _ in range(n[2]):
    if v.max() > 2.0:
      v = v * 0.5
      break
  return v, (2.0, 0.0)


def test_kernel_return_beside_a_helper_that_returns():
  """Class 1: the kernel's return in its loop (it was MG001, the helper's `return v * 0.5` taken for the kernel's)
  over every trip count and exit, against the same function run as Python; and built for CUDA."""
  _check(_return_beside_helper, _return_beside_helper_ref, 3)
  export(_return_beside_helper, ROWS, np.zeros(8, np.int32))


# ---------------------------------------------------------------------- class 2
@mg.mgpu_kernel(out_shape=OUT, grid=(1,))
def _helper_reads_updated_param(x, n, o, os):
  def grow(v, m):
    for k in range(m):
      if jnp.max(v) > 5.0:
        return v * 0.5 + k
      v = v + 1.0
    return v - 1.0
  o[...] = grow(x[0], n[0])
  os[0] = 0.0
  os[1] = 0.0


def _helper_reads_updated_param_ref(x, n):
  v = x[0]
  for k in range(n[0]):
    if v.max() > 5.0:
      return v * 0.5 + k, (0.0, 0.0)
    v = v + 1.0
  return v - 1.0, (0.0, 0.0)


def test_helper_last_return_reads_a_parameter_its_loop_updates():
  """Class 2: `return v - 1.0` after a loop that updates the parameter v and may return early (it was MG001):
  no trip, trips without the early return, and the early return on a later trip (x's max is 3: 2 trips)."""
  _check(_helper_reads_updated_param, _helper_reads_updated_param_ref, 1, hi=6)


# ---------------------------------------------------------------------- class 3
@mg.mgpu_kernel(out_shape=OUT, grid=(1,))
def _return_in_loop_else(x, n, o, os):
  t = x[0]
  for row in x:
    t = t + row[...]
    if n[0] > 1:
      break
  else:
    w = 0
    while w < n[1]:
      w += 1
      t = t * 2.0
      if w >= n[2]:
        o[...] = t
        os[0] = 1.0
        os[1] = float(w)
        return
  o[...] = t - 1.0
  os[0] = 2.0
  os[1] = 0.0


def _return_in_loop_else_ref(x, n):
  t = x[0]
  for row in x:
    t = t + row
    if n[0] > 1:
      break
  else:
    w = 0
    while w < n[1]:
      w += 1
      t = t * 2.0
      if w >= n[2]:
        return t, (1.0, w)
  return t - 1.0, (2.0, 0.0)


def test_return_in_a_loop_in_a_loops_else():
  """Class 3: a while loop that returns, in a for loop's else (it was MG001): the else skipped by the break, run
  with and without the return."""
  _check(_return_in_loop_else, _return_in_loop_else_ref, 3)


# ---------------------------------------------------------------------- class 4
@mg.mgpu_kernel(out_shape=OUT, grid=(1,))
def _dict_carried(x, n, o, os):
  d = {"a": x[0], "b": 1.0}
  for i in range(n[0]):
    d["a"] = d["a"] * 0.5 - x[1]
    if n[1] > i:
      d["b"] += 1.0
  w = 0
  while w < n[2] and d["b"] < 3.0:
    w += 1
    d["b"] = d["b"] * 2.0
  if n[1] == 2:
    d["a"] = d["a"] + 1.0
  o[...] = d["a"]
  os[0] = d["b"]
  os[1] = float(w)


def _dict_carried_ref(x, n):
  d = {"a": x[0], "b": 1.0}
  for i in range(n[0]):
    d["a"] = d["a"] * 0.5 - x[1]
    if n[1] > i:
      d["b"] += 1.0
  w = 0
  while w < n[2] and d["b"] < 3.0:
    w += 1
    d["b"] = d["b"] * 2.0
  if n[1] == 2:
    d["a"] = d["a"] + 1.0
  return d["a"], (d["b"], w)


def test_dict_items_assigned_and_carried():
  """Class 4: `d["a"] = ...` and `d["b"] += ...` in a for loop, a while loop whose condition reads the dict and an
  if (they were MG003 and MG005), as Python runs them; built for CUDA."""
  _check(_dict_carried, _dict_carried_ref, 3)
  export(_dict_carried, ROWS, np.zeros(8, np.int32))


def test_dict_item_of_a_shared_dict_is_refused():
  """Class 4's guard: where another name still read holds the same dict, Python's change in place shows through
  it, a kernel's new dict would not: MG003 at the assignment, naming the other name."""
  @mg.mgpu_kernel(out_shape=OUT, grid=(1,))
  def shared(x, n, o, os):
    d = {"a": x[0], "b": 1.0}
    e = d
    d["b"] = 2.0
    o[...] = d["a"]
    os[0] = e["b"]
    os[1] = 0.0
  with pytest.raises(mg.KernelError) as info:
    shared(jnp.asarray(ROWS), jnp.zeros(8, jnp.int32), interpret=True)
  err = info.value.errors[0] if hasattr(info.value, "errors") else info.value
  assert err.code == "MG003" and "e holds that same dict" in err.message, err
  assert str(err).splitlines()[1].strip() == 'd["b"] = 2.0', str(err)      # (the line quoted: the assignment's)


def test_dict_keys_differing_between_branches_are_refused():
  """Class 4's guard: a key added on one path of a run-time if only (Python's d.get would tell the paths apart):
  MG003 at the assignment."""
  @mg.mgpu_kernel(out_shape=OUT, grid=(1,))
  def keys(x, n, o, os):
    d = {"a": x[0]}
    if n[1] > 0:
      d["c"] = 3.0
    o[...] = d["a"]
    os[0] = d.get("c", 0.0)
    os[1] = 0.0
  with pytest.raises(mg.KernelError) as info:
    keys(jnp.asarray(ROWS), jnp.zeros(8, jnp.int32), interpret=True)
  err = info.value.errors[0] if hasattr(info.value, "errors") else info.value
  assert err.code == "MG003" and str(err).splitlines()[1].strip() == 'd["c"] = 3.0', str(err)


def test_dict_item_at_a_run_time_key_is_refused():
  """Class 4's guard: a run-time key (`d[n[0]] = v`) is MG003 saying that a dict's keys are static (it said to
  build a new dict with that key, which no kernel can)."""
  @mg.mgpu_kernel(out_shape=OUT, grid=(1,))
  def run_key(x, n, o, os):
    d = {0: x[0], 1: x[1]}
    d[n[0]] = x[2]
    o[...] = d[0]
    os[0] = 0.0
    os[1] = 0.0
  with pytest.raises(mg.KernelError) as info:
    run_key(jnp.asarray(ROWS), jnp.zeros(8, jnp.int32), interpret=True)
  err = info.value.errors[0] if hasattr(info.value, "errors") else info.value
  assert err.code == "MG003" and "whose keys are static" in err.message and "n[0] is a run-time value" in err.message
  assert str(err).splitlines()[1].strip() == "d[n[0]] = x[2]", str(err)


# ---------------------------------------------------------------------- class 5
@mg.mgpu_kernel(out_shape=OUT, grid=(1,))
def _enumerated_static_ml_range(x, n, o, os):
  t = x[0]
  for k, i in enumerate(ml.range(0, 5, 2), n[0]):
    t = t * 2.0 + (k - i)
  for k, i in enumerate(ml.range(4, 0, -1)):
    t = t + k * i
  o[...] = t
  os[0] = 0.0
  os[1] = 0.0


def _enumerated_static_ml_range_ref(x, n):
  t = x[0]
  for k, i in enumerate(range(0, 5, 2), n[0]):
    t = t * 2.0 + (k - i)
  for k, i in enumerate(range(4, 0, -1)):
    t = t + k * i
  return t, (0.0, 0.0)


def test_enumerate_of_an_ml_range_of_static_bounds():
  """Class 5: enumerate of `ml.range(0, 5, 2)` (from a run-time start) and of a descending one (it was MG001)."""
  _check(_enumerated_static_ml_range, _enumerated_static_ml_range_ref, 1)


# ---------------------------------------------------------------------- class 6
@mg.mgpu_kernel(out_shape=lambda *a: (S((4,), jnp.int32),), grid=(1,))
def _any_all_of_numbers(xs, n, oc):
  s = xs[0] * 0.5
  c = n[1] - 1
  oc[0] = 1 if all([n[0] > 1, s, c]) else 0
  oc[1] = 1 if any([n[0] > 1, s]) else 0
  oc[2] = 1 if any((c, False)) else 0
  oc[3] = 1 if all([s]) else 0


def test_any_all_of_number_scalars():
  """Class 6: number scalars among any()'s and all()'s items, by their truth (0, 2 and NaN floats, -1..1 ints),
  against Python's any() and all() of the same values (it was MG003)."""
  for a, b, c in itertools.product([0.0, 2.0, float("nan")], range(3), range(3)):
    xs, n = np.array([a, 0, 0, 0], np.float32), np.array([b, c, 0, 0], np.int32)
    got = np.asarray(_any_all_of_numbers(jnp.asarray(xs), jnp.asarray(n), interpret=True)[0])
    s, cc = np.float32(a * 0.5), c - 1
    want = [int(all([b > 1, s, cc])), int(any([b > 1, s])), int(any((cc, False))), int(all([s]))]
    assert list(got) == want, (a, b, c, got, want)


# ---------------------------------------------------------------------- class 7
@mg.mgpu_kernel(out_shape=lambda *a: (S((4, 128), jnp.float32),), grid=(1,))
def _where_of_numbers(x, n, o):
  c, f = 0, 2.5
  o[0] = jnp.where(c, x[0], x[1])
  o[1] = ml.where(f, x[0], x[1])
  o[2] = jnp.where(n[0] - 1, x[0], x[1] * 2.0)       # (a run-time number: its truth, since probe 57g)
  o[3] = jnp.where(np.int32(0), x[0], 7)


def test_where_of_a_python_number_condition():
  """Class 7: jnp.where / ml.where of Python and NumPy numbers (0, 2.5, int32 0) as NumPy's where takes them."""
  x = ROWS[:2]
  for n0 in range(3):
    got = np.asarray(_where_of_numbers(jnp.asarray(x), jnp.asarray(np.array([n0, 0], np.int32)), interpret=True)[0])
    want = np.stack([np.where(0, x[0], x[1]), np.where(2.5, x[0], x[1]), np.where(n0 - 1, x[0], x[1] * 2),
                     np.where(0, x[0], 7)]).astype(np.float32)
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------- the corpus
SAMPLE = [13, 16, 29, 31]      # between them nearly every construct of tests/cf_fuzz.py


@pytest.mark.parametrize("seed", SAMPLE)
def test_fuzz_sample(seed):
  """A fixed sample of the fuzzer's kernels, each against its reference (interpret mode) and exported for CUDA."""
  g = cf_fuzz.Gen(seed)
  assert cf_fuzz.run(g, build=True) == ("ok", ""), (seed, g.source)


def test_fuzz_reference_tells_a_wrong_result():
  """The fuzzer's comparison fails where a kernel computes otherwise: the sample's kernel with its last store
  changed (x1 for t) is "wrong"."""
  g = cf_fuzz.Gen(SAMPLE[0])
  g.refs                     # (the reference: from the plan's lines as they were)
  last = next(k for k in range(len(g.lines) - 1, -1, -1) if g.lines[k].strip().startswith("ot[pid, 0] ="))
  g.lines[last] = g.lines[last].split("=")[0] + "= x1[0] + 1.0"
  assert cf_fuzz.run(g, build=False)[0] == "wrong"


@pytest.mark.gpu
@pytest.mark.parametrize("seed", SAMPLE)
def test_fuzz_sample_on_gpu(seed):
  """The sample on the GPU: scf.for / scf.while / scf.if as Mosaic GPU lowers them, against the reference."""
  g = cf_fuzz.Gen(seed)
  got = jax.jit(cf_fuzz.diff_fuzz.load(g))(*g.args)
  for a, w in zip(got, g.refs):
    assert cf_fuzz.compare(np.asarray(a), w) is None, seed
