"""Probe 31e (data-dependent and ragged kernels: routing, segment sums, ragged matmuls, run-time
loops, early exits, atomics, compaction, gathers): `break` and `continue` under run-time
conditions, which were MG001."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect, where
from test_probe29e import walrus_in_a_runtime_while   # the same while, interpreted there

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32


def _first_positive(x, lo=0, step=1, none=-1):
  return next((k for k in range(lo, len(x), step) if x[k] > 0), none)


# ---------------------------------------------------------------- break in a run-time for
@mg.mgpu_kernel(out_shape=lambda x: S((), I32))
def first_positive(x, out):
  r = -1
  for i in range(x.shape[0]):
    if x[i] > 0.0:
      r = i
      break
  out[...] = r


@mg.mgpu_kernel(out_shape=lambda x: S((), I32))
def first_positive_index(x, out):
  i = 0
  for i in range(3, x.shape[0], 2):     # the loop variable after a break is the index it broke at
    if x[i] > 0.0:
      break
  out[...] = i


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), I32))
def first_positive_per_row(x, out):
  for r in range(x.shape[0]):           # a break ends the inner loop only
    c = -1
    for j in range(x.shape[1]):
      if x[r, j] > 0.0:
        c = j
        break
    out[r] = c


def test_a_break_under_a_runtime_if_ends_a_runtime_for():
  """Was MG001 ("break is not supported in a kernel")."""
  rng = np.random.default_rng(0)
  x = rng.standard_normal(256).astype(np.float32)
  x[:9] = -1.0
  assert int(first_positive(jnp.asarray(x), interpret=True)) == _first_positive(x)
  assert int(first_positive(jnp.asarray(-np.abs(x)), interpret=True)) == -1
  assert int(first_positive_index(jnp.asarray(x), interpret=True)) == _first_positive(x, 3, 2, 255)
  assert int(first_positive_index(jnp.asarray(-np.abs(x)), interpret=True)) == 255
  m = rng.standard_normal((16, 64)).astype(np.float32) - 1.5
  m[3] = -1.0
  np.testing.assert_array_equal(first_positive_per_row(jnp.asarray(m), interpret=True),
                                [_first_positive(row) for row in m])
  builds(first_positive, S((256,), F32))
  builds(first_positive_per_row, S((16, 64), F32))


# ---------------------------------------------------------------- break in a while
@mg.mgpu_kernel(out_shape=lambda x, n: S((), I32))
def scan_until(x, n, out):
  i = 0
  while True:
    if i >= n[0]:
      break
    if x[i] > 0.0:
      break
    i += 1
  out[...] = i


@mg.mgpu_kernel(out_shape=lambda x: S((), I32))
def count_below(x, out):
  i = 0
  while x[i] < 10.0:       # not read again after the break: x[x.shape[0]] is never read
    i += 1
    if i == x.shape[0]:
      break
  out[...] = i


@mg.mgpu_kernel(out_shape=lambda x: S((), I32))
def python_condition(x, out):
  i = 0
  while i < x.shape[0]:    # a condition on Python values, with a run-time break: a run-time loop
    if x[i] > 0.0:
      break
    i += 1
  out[...] = i


def test_a_break_under_a_runtime_if_ends_a_while():
  """`while True:` and `while i < 256:` (Python values) with a run-time break were MG001; the
  condition is not evaluated after the break (count_below never reads past x's end)."""
  x = np.full(256, -1.0, np.float32)
  x[40] = 1.0
  assert int(scan_until(jnp.asarray(x), jnp.array([100], I32), interpret=True)) == 40
  assert int(scan_until(jnp.asarray(x), jnp.array([7], I32), interpret=True)) == 7
  assert int(python_condition(jnp.asarray(x), interpret=True)) == 40
  assert int(python_condition(jnp.asarray(-np.abs(x)), interpret=True)) == 256
  assert int(count_below(jnp.zeros(256, F32), interpret=True)) == 256
  y = np.zeros(256, np.float32)
  y[17] = 20.0
  assert int(count_below(jnp.asarray(y), interpret=True)) == 17
  builds(scan_until, S((256,), F32), S((1,), I32))
  builds(count_below, S((256,), F32))


# ---------------------------------------------------------------- continue
@mg.mgpu_kernel(out_shape=lambda x: S((), F32))
def sum_positive(x, out):
  t = 0.0
  for i in range(x.shape[0]):
    if x[i] < 0.0:
      continue
    t = t + x[i]
  out[...] = t


@mg.mgpu_kernel(out_shape=lambda x, n: S((), F32))
def sum_positive_while(x, n, out):
  i = 0
  t = 0.0
  while i < n[0]:
    i += 1
    if x[i - 1] < 0.0:
      if x[i - 1] < -1.0:  # nested: the rest of the body is the path that does not continue
        continue
      t = t - 100.0
      continue
    t += x[i - 1]
  out[...] = t


@mg.mgpu_kernel(out_shape=lambda x: S((), F32))
def sum_positive_unrolled(x, out):
  t = 0.0
  for i in ml.static_range(8):
    if x[i] < 0.0:
      continue
    t += x[i]
  out[...] = t


def test_a_continue_under_a_runtime_if_skips_the_rest_of_the_trip():
  """Was MG001 in run-time loops and unrolled ones alike."""
  x = np.array([1.5, -0.5, 2.0, -3.0, 4.0, 0.25, -2.0, 8.0] * 32, np.float32)
  np.testing.assert_allclose(float(sum_positive(jnp.asarray(x), interpret=True)), x[x > 0].sum(), rtol=1e-6)
  want = sum(v if v >= 0 else (0.0 if v < -1 else -100.0) for v in x[:8])
  np.testing.assert_allclose(float(sum_positive_while(jnp.asarray(x), jnp.array([8], I32), interpret=True)), want)
  np.testing.assert_allclose(float(sum_positive_unrolled(jnp.asarray(x), interpret=True)), x[:8][x[:8] > 0].sum())
  builds(sum_positive_while, S((256,), F32), S((1,), I32))


# ---------------------------------------------------------------- what stays MG001
@mg.mgpu_kernel(out_shape=lambda x: x)
def pipelined_break(x, out):
  buf = ml.smem((64, 128), F32)
  acc = ml.zeros((64, 128), F32)
  for k in ml.range(x.shape[0] // 64, stages=2):
    ml.copy(x.at[ml.ds(k * 64, 64)], buf)
    acc = acc + buf[...]
    if ml.sum(acc) > 100.0:
      break
  out.at[ml.ds(0, 64)][...] = acc


@mg.mgpu_kernel(out_shape=lambda x: S((), I32))
def unrolled_break(x, out):
  r = -1
  for i in ml.static_range(8):
    if x[i] > 0.0:
      r = i
      break
  out[...] = r


def test_a_break_that_cannot_end_its_loop_says_which_loop_would():
  expect(pipelined_break, [S((512, 128), F32)], mg.UnsupportedSyntaxError, "break",
         "break in a pipelined loop or one with a run-time step is not supported in a kernel", nth=1,
         hint="a pipelined loop (ml.range with stages=, warp_specialize=, pingpong=) and one with a run-time step"
              " run every trip: drop those options, or make the step static, for a break under if statements;"
              " in a pipelined loop without an else, a break on its own index first in the body (if k >= n: break) cuts its trip count instead")
  for first in (3, 7, 9):         # a run-time break in an unrolled loop (it was MG001)
    x = jnp.where(jnp.arange(256) >= first, 1.0, -1.0).astype(F32)
    assert int(unrolled_break(x, interpret=True)) == (first if first < 8 else -1)


# ---------------------------------------------------------------- register gathers and SMEM scatters
@mg.mgpu_kernel(out_shape=lambda x: x)
def butterfly(x, out):
  v = x[...] * 2.0
  out[...] = v[ml.arange(128) ^ 1]


@mg.mgpu_kernel(out_shape=lambda x: (x, x))
def butterfly_followed(x, out, scratch):
  v = x[...] * 2.0
  scratch[...] = v
  out[...] = scratch[ml.arange(128) ^ 1]


@mg.mgpu_kernel(out_shape=lambda x: S((64,), I32))
def smem_histogram(x, out):
  h = ml.smem((64,), I32)
  h[...] = ml.zeros((64,), I32)
  ml.atomic_add(h.at[x[...]], 1)
  out[...] = h[...]


@mg.mgpu_kernel(out_shape=lambda x: S((64,), I32), grid=lambda x: (x.shape[0] // 128,))
def histogram_followed(x, out):
  ids = x.at[ml.ds(ml.program_id(0) * 128, 128)][...]
  ml.atomic_add(out, ml.sum(ids[:, None] == ml.arange(64)[None, :], axis=0))


def test_register_gather_and_smem_scatter_hints_name_forms_that_work():
  """The register gather's hint was to read the elements of an SMEM copy with integer indices
  (scalars: no tensor comes back); the SMEM scatter's named no way to count in a CTA."""
  x = np.arange(128, dtype=np.float32)      # (the register gather itself computes since probe 45f)
  np.testing.assert_array_equal(butterfly(jnp.asarray(x), interpret=True), (2 * x)[np.arange(128) ^ 1])
  got, _ = butterfly_followed(jnp.asarray(x), interpret=True)
  np.testing.assert_array_equal(got, (2 * x)[np.arange(128) ^ 1])
  builds(butterfly_followed, S((128,), F32))
  ids = np.random.default_rng(1).integers(0, 64, 512).astype(np.int32)    # (the SMEM scatter counts since probe 46k)
  np.testing.assert_array_equal(smem_histogram(jnp.asarray(ids[:128]), interpret=True),
                                np.bincount(ids[:128], minlength=64))
  np.testing.assert_array_equal(histogram_followed(jnp.asarray(ids), interpret=True), np.bincount(ids, minlength=64))
  builds(histogram_followed, S((512,), I32))


# ---------------------------------------------------------------- an atomic's run-time window past the end
@mg.mgpu_kernel(out_shape=lambda x, s: S((200,), F32))
def add_at(x, s, out):
  ml.atomic_add(out.at[ml.ds(s[0], 128)], x[...])


@mg.mgpu_kernel(out_shape=lambda x, s: S((200,), F32))
def add_at_followed(x, s, out):
  ml.atomic_add(out.at[s[0] + ml.arange(128)], x[...])


def test_an_atomic_window_past_the_end_at_run_time_hints_the_scatter():
  """Interpret mode's hint was "check the dynamic indices (ml.ds starts, program ids) of this access";
  an atomic takes no mask, so the fix is the scatter that the compile-time check already hints."""
  x = jnp.arange(128, dtype=F32)
  with pytest.raises(mg.OutOfBoundsError) as info:
    add_at(x, jnp.array([100], I32), interpret=True)
  assert info.value.hint == ("index the window with a tensor of positions (a scatter), whose updates past the end are"
                             " dropped: ml.atomic_add(out.at[s[0] + ml.arange(128)], x[...])")
  with pytest.raises(mg.OutOfBoundsError) as info:
    add_at(x, jnp.array([-4], I32), interpret=True)
  assert "pos = s[0] + ml.arange(128)" in info.value.hint, info.value.hint
  want = np.zeros(200, np.float32)
  want[100:] = np.arange(100)
  np.testing.assert_array_equal(add_at_followed(x, jnp.array([100], I32), interpret=True), want)
  builds(add_at_followed, S((128,), F32), S((1,), I32))


# ---------------------------------------------------------------- a read that ml.where was meant to guard
@mg.mgpu_kernel(out_shape=lambda x, n: S((), F32))
def guarded_element(x, n, out):
  i = n[0]
  out[...] = ml.where(i < x.shape[0], x[i], 0.0)


@mg.mgpu_kernel(out_shape=lambda x, n: S((), F32))
def guarded_element_followed(x, n, out):
  i = n[0]
  if i < x.shape[0]:
    v = x[i]
  else:
    v = 0.0
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), F32))
def guarded_window(x, n, out):
  s = n[0]
  idx = s + ml.arange(128)
  out[...] = ml.where(idx < x.shape[0], x.at[ml.ds(s, 128)][...], 0.0)


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), F32))
def guarded_window_followed(x, n, out):
  s = n[0]
  idx = s + ml.arange(128)
  out[...] = x.at[ml.ds(s, 128)].load(mask=idx < x.shape[0], other=0.0)


def test_a_read_outside_its_array_on_a_side_of_ml_where_hints_the_guarded_forms():
  """The hint was "check the dynamic indices (ml.ds starts, program ids) of this access": the index is
  what the user meant, the select computing both sides is the mistake."""
  x = jnp.arange(300, dtype=F32)
  with pytest.raises(mg.OutOfBoundsError) as info:
    guarded_element(x, jnp.array([400], I32), interpret=True)
  assert info.value.hint == ("ml.where computes both of its sides, so this read runs also where i < x.shape[0] is"
                             " False: read in an if statement, which reads only on the path taken: if i < x.shape[0]:"
                             " v = x[i], and else: v = 0.0")
  assert float(guarded_element_followed(x, jnp.array([400], I32), interpret=True)) == 0.0
  assert float(guarded_element_followed(x, jnp.array([7], I32), interpret=True)) == 7.0
  with pytest.raises(mg.OutOfBoundsError) as info:
    guarded_window(x, jnp.array([250], I32), interpret=True)
  assert info.value.hint == ("ml.where computes both of its sides, so this read runs also where idx < x.shape[0] is"
                             " False: load under the mask instead, which never touches the elements it keeps off:"
                             " x.at[ml.ds(s, 128)].load(mask=idx < x.shape[0], other=0.0)")
  want = np.where(np.arange(250, 378) < 300, np.arange(250, 378), 0)
  np.testing.assert_array_equal(guarded_window_followed(x, jnp.array([250], I32), interpret=True), want)


# ---------------------------------------------------------------- for ... else with a break
@mg.mgpu_kernel(out_shape=lambda x, t: S((), I32))
def first_above_or_minus_one(x, t, out):
  r = 0
  for i in range(x.shape[0]):
    if x[i] > t[0]:
      r = i
      break
  else:
    r = -1
  out[...] = r


@mg.mgpu_kernel(out_shape=lambda x, t: S((), I32))
def while_else(x, t, out):
  i = 0
  while i < x.shape[0]:
    if x[i] > t[0]:
      break
    i += 1
  else:
    i = -5
  out[...] = i


def test_a_loop_else_runs_where_no_break_ended_the_loop():
  """Was MG001 ("for ... else with a break in the loop is not supported")."""
  x = np.linspace(0.0, 1.0, 256, dtype=np.float32)
  for kernel, none in ((first_above_or_minus_one, -1), (while_else, -5)):
    assert int(kernel(jnp.asarray(x), jnp.array([2.0], F32), interpret=True)) == none
    assert int(kernel(jnp.asarray(x), jnp.array([0.5], F32), interpret=True)) == int(np.argmax(x > 0.5))
  builds(first_above_or_minus_one, S((256,), F32), S((1,), F32))


# ---------------------------------------------------------------- a break around a warp-specialised loop
@mg.mgpu_kernel(out_shape=lambda a, b, n: S((64, 64), F32))
def specialised_then_break(a, b, n, out):
  a_s = ml.smem((64, 64), jnp.float16)
  b_s = ml.smem((64, 64), jnp.float16)
  for t in range(4):
    acc = ml.zeros((64, 64), F32)
    for k in ml.range(a.shape[1] // 64, stages=2, warp_specialize=True):
      ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
      ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
      acc = ml.dot(a_s, b_s, acc)
    out[...] = acc
    if t >= n[0]:
      break


@mg.mgpu_kernel(out_shape=lambda a, b, n: S((64, 64), F32))
def specialised_counted(a, b, n, out):
  a_s = ml.smem((64, 64), jnp.float16)
  b_s = ml.smem((64, 64), jnp.float16)
  for t in range(ml.minimum(n[0] + 1, 4)):
    acc = ml.zeros((64, 64), F32)
    for k in ml.range(a.shape[1] // 64, stages=2, warp_specialize=True):
      ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
      ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
      acc = ml.dot(a_s, b_s, acc)
    out[...] = acc


def test_a_break_around_a_warp_specialised_loop_says_so_at_the_break():
  """A for loop with a break runs as a while (frontend/jumps.py), which a warp-specialised loop
  cannot sit in: the error was MG503's "inside a while loop ... write the outer loop as a for loop"."""
  specs = [S((64, 256), jnp.float16), S((256, 64), jnp.float16), S((1,), I32)]
  expect(specialised_then_break, specs, mg.UnsupportedSyntaxError, "break",
         "break in a loop around a warp-specialised loop (line %d) is not supported in a kernel"
         % where(specialised_then_break, "for k in ml.range")[0], nth=1,
         hint="the producer warpgroup walks every trip of the for loops around a warp-specialised loop, and its"
              " loads cannot depend on a flag they carry: count the trips before the loop instead, for t in"
              " range(count) with count computed from what the break tests (ml.minimum(n[0] + 1, 4)), or drop"
              " warp_specialize=True")
  builds(specialised_counted, *specs)


# ---------------------------------------------------------------- continue in a pipelined loop
@mg.mgpu_kernel(out_shape=lambda x, skip: S((64, 128), F32))
def skip_then_load(x, skip, out, *, stages: ml.constexpr = 2):
  buf = ml.smem((64, 128), F32)
  acc = ml.zeros((64, 128), F32)
  for k in ml.range(x.shape[0] // 64, stages=stages):
    if skip[k] != 0:
      continue
    ml.copy(x.at[ml.ds(k * 64, 64)], buf)
    acc = acc + buf[...]
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, skip: S((64, 128), F32))
def load_then_skip(x, skip, out):
  buf = ml.smem((64, 128), F32)
  acc = ml.zeros((64, 128), F32)
  for k in ml.range(x.shape[0] // 64, stages=2):
    ml.copy(x.at[ml.ds(k * 64, 64)], buf)
    if skip[k] != 0:
      continue
    acc = acc + buf[...]
  out[...] = acc


def test_a_continue_before_a_pipelined_loads_says_to_load_first():
  """The rest of the body under the if took the loads off the loop's top level: MG502 "found no TMA
  load to pipeline at the top level of this loop", of a loop whose loads are at its top level."""
  specs = [S((512, 128), F32), S((8,), I32)]
  x = np.random.default_rng(2).standard_normal((512, 128)).astype(np.float32)
  skip = np.array([0, 1, 0, 0, 1, 0, 0, 0], np.int32)
  want = sum(x[k * 64:(k + 1) * 64] for k in range(8) if not skip[k])
  # the compiler moves the loads up before the continue (probe 42v; MG001 where they cannot move)
  np.testing.assert_allclose(skip_then_load(jnp.asarray(x), jnp.asarray(skip), interpret=True), want, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(load_then_skip(jnp.asarray(x), jnp.asarray(skip), interpret=True), want, rtol=1e-5, atol=1e-5)
  builds(load_then_skip, *specs)
  # one stage is a plain loop: the continue may come first
  np.testing.assert_allclose(skip_then_load(jnp.asarray(x), jnp.asarray(skip), interpret=True, stages=1), want,
                             rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- an atomic's old value (a work-queue ticket)
@mg.mgpu_kernel(out_shape=lambda x: (x, S((), I32)), grid=(4,))
def ticket_queue(x, out, count):
  t = ml.atomic_add(count, 1)
  v = x.at[ml.ds(t * 32, 32)][...]
  out.at[ml.ds(t * 32, 32)][...] = v


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def program_queue(x, out):
  for t in range(ml.program_id(0), x.shape[0] // 32, ml.num_programs(0)):
    out.at[ml.ds(t * 32, 32)][...] = x.at[ml.ds(t * 32, 32)][...] + 1.0


def test_an_atomic_old_value_hands_out_work():
  """The hint said to "read the array after a barrier in one program": no barrier spans programs. Since probe
  48c the ticket is the old value (Triton's), and each program copies the item its ticket names."""
  x = jnp.arange(128, dtype=F32)
  out, count = ticket_queue(x, interpret=True)
  np.testing.assert_array_equal(out, x)
  assert int(count) == 4
  x = jnp.arange(128, dtype=F32)
  np.testing.assert_array_equal(program_queue(x, interpret=True), x + 1)
  builds(program_queue, S((128,), F32))


# ---------------------------------------------------------------- a one-hot of 8 experts
@mg.mgpu_kernel(out_shape=lambda e, off: S(e.shape, I32))
def expert_slots(e, off, pos):
  ev = e[...]
  hot = (ev[:, None] == ml.arange(8)[None, :]).astype(I32)
  rank = ml.cumsum(hot, axis=0) - hot
  pos[...] = off[ev] + ml.sum(rank * hot, axis=1)


@mg.mgpu_kernel(out_shape=lambda e, off: S(e.shape, I32))
def expert_slots_followed(e, off, pos):
  ev = e[...]
  hot = (ev[:, None] == ml.arange(32)[None, :]).astype(I32)
  rank = ml.cumsum(hot, axis=0) - hot
  pos[...] = off[ev] + ml.sum(rank * hot, axis=1)


def test_a_one_hot_of_8_experts_compiles_and_the_old_hints_32_wide_form_works():
  """The hint was the general one for narrow rows (mask the columns of a full row, or read 32 columns
  of memory), which names no fix for a tile built from ml.arange(8)."""
  specs = [S((128,), I32), S((8,), I32)]
  builds(expert_slots, *specs)     # (now compiled: tiles narrower than a warp take fewer lanes a row, tests/test_narrow_rows.py)
  e = np.random.default_rng(3).integers(0, 8, 128).astype(np.int32)
  off = np.concatenate([[0], np.cumsum(np.bincount(e, minlength=8))[:-1]]).astype(np.int32)
  want, seen = np.zeros(128, np.int32), np.zeros(8, int)
  for t in range(128):
    want[t] = off[e[t]] + seen[e[t]]
    seen[e[t]] += 1
  np.testing.assert_array_equal(expert_slots_followed(jnp.asarray(e), jnp.asarray(off), interpret=True), want)
  builds(expert_slots_followed, *specs)


# ---------------------------------------------------------------- := in a run-time while condition
@mg.mgpu_kernel(out_shape=lambda off, x: S((off.shape[0] - 1,), F32))
def segment_sums_walrus(off, x, out):
  g = 0
  while (end := off[g + 1]) <= x.shape[0]:      # the body sees end, as in Python
    t = 0.0
    for i in range(off[g], end):
      t += x[i]
    out[g] = t
    g += 1
    if g == off.shape[0] - 1:
      break


def test_a_walrus_in_a_runtime_while_condition_binds_for_the_body():
  """Was MG001 ("the := operator in a run-time while condition is not supported")."""
  off = np.array([0, 3, 3, 10, 16], np.int32)
  x = np.arange(16, dtype=np.float32)
  np.testing.assert_array_equal(segment_sums_walrus(jnp.asarray(off), jnp.asarray(x), interpret=True),
                                [x[a:b].sum() for a, b in zip(off[:-1], off[1:])])
  v = jnp.arange(128, dtype=F32)
  np.testing.assert_array_equal(walrus_in_a_runtime_while(jnp.array([5, 4, 1, 9], I32), v, interpret=True), v + 5 + 4)
  builds(walrus_in_a_runtime_while, S((4,), I32), S((128,), F32))


# ---------------------------------------------------------------- a break in a persistent loop
@mg.mgpu_kernel(out_shape=lambda x, limit: x, grid=(2,))
def persistent_until(x, limit, out):
  out.at[ml.ds(ml.program_id(0) * 64, 64)][...] = ml.zeros((64,), F32)
  out.at[ml.ds(ml.program_id(0) * 64 + 128, 64)][...] = ml.zeros((64,), F32)
  for t in range(ml.program_id(0), x.shape[0] // 64, ml.num_programs(0)):
    if t >= limit[0]:
      break
    out.at[ml.ds(t * 64, 64)][...] = x.at[ml.ds(t * 64, 64)][...] + 1.0


def test_a_break_ends_a_persistent_loop_whose_stride_is_the_grid():
  """A run-time step was MG001 ("break in a pipelined loop or one with a run-time step"): the grid's
  extent is a positive one."""
  x = jnp.arange(256, dtype=F32)
  want = np.where(np.arange(256) < 3 * 64, np.arange(256) + 1.0, 0.0)
  np.testing.assert_array_equal(persistent_until(x, jnp.array([3], I32), interpret=True), want)
  builds(persistent_until, S((256,), F32), S((1,), I32))


# ---------------------------------------------------------------- the new loops on the GPU
@pytest.mark.gpu
def test_gpu_breaks_continues_and_loop_else_match_interpret_mode():
  """A for with a break lowers to a while on a flag, a continue to the if's other path: the GPU
  computes what interpret mode does (written after the merge; not yet run on the H200)."""
  rng = np.random.default_rng(11)
  x = rng.standard_normal(256).astype(np.float32)
  x[:9] = -1.0
  m = rng.standard_normal((16, 64)).astype(np.float32) - 1.5
  m[3] = -1.0
  lin = np.linspace(0.0, 1.0, 256, dtype=np.float32)
  cases = [(first_positive, (x,)), (first_positive, (-np.abs(x),)), (first_positive_index, (x,)),
           (first_positive_per_row, (m,)), (scan_until, (x, np.array([100], np.int32))),
           (count_below, (np.zeros(256, np.float32),)), (python_condition, (x,)), (sum_positive, (x,)),
           (first_above_or_minus_one, (lin, np.array([0.5], np.float32))),
           (first_above_or_minus_one, (lin, np.array([2.0], np.float32))),
           (while_else, (lin, np.array([0.5], np.float32))), (while_else, (lin, np.array([2.0], np.float32)))]
  for kernel, args in cases:
    args = [jnp.asarray(a) for a in args]
    np.testing.assert_allclose(np.asarray(kernel(*args)), np.asarray(kernel(*args, interpret=True)), rtol=1e-5,
                               err_msg=kernel.__name__ if hasattr(kernel, "__name__") else str(kernel))
