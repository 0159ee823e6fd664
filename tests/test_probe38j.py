"""Probe 38j (sequential and scan kernels: cumsum/cumprod/cummax along rows and columns, exclusive and
reverse scans, linear recurrences carried through loops, RNN/GRU/LSTM cells, chunked linear attention,
log-step scans of shifts, segmented scans, running max/min, EMA, runtime trip counts)."""
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


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _np_scan(kind, x, axis, reverse):
  f = {"sum": np.cumsum, "max": np.maximum.accumulate}[kind]
  x = np.flip(x, axis) if reverse else x
  y = f(x, axis=axis)
  return np.flip(y, axis) if reverse else y


# ---------------------------------------------------------------- scans along any axis of a 3-D (or wider) tile
@mg.mgpu_kernel(out_shape=lambda x: (x, x))
def heads_over_time(x, csum, cmax):
  """A (heads, time, features) chunk scanned over time, the middle axis, as Mamba's heads are."""
  v = x[...]
  csum[...] = ml.cumsum(v, axis=1) - v                 # exclusive
  cmax[...] = ml.cummax(v, axis=-2, reverse=True)


@mg.mgpu_kernel(out_shape=lambda x: (x, x, x))
def every_axis_4d(x, a, b, c):
  v = x[...]
  a[...] = ml.cumsum(v, axis=0)
  b[...] = v.cumsum(axis=2, reverse=True)
  c[...] = ml.cummax(v, axis=3)


def _heads_want(x):
  return np.cumsum(x, 1) - x, _np_scan("max", x, 1, True)


def _every_axis_want(x):
  return np.cumsum(x, 0), _np_scan("sum", x, 2, True), np.maximum.accumulate(x, 3)


@pytest.mark.parametrize("shape", [(4, 8, 64), (2, 128, 4), (3, 16, 32)])
def test_a_scan_along_a_middle_axis_scans_each_slab(shape):
  """Was MG003 ("takes a 1- or 2-D register tensor", hint: "x.at[...][...] of a 2-D window"): a scan along
  any axis of an N-D tile is now the 2-D scan of its reshape, a middle axis restarting every shape[axis]
  rows (the Scan op's `segment`, frontend/ops/scan.py, lowering/scan.py)."""
  x = np.random.default_rng(38).standard_normal(shape).astype(np.float32)
  for g, w in zip(heads_over_time(jnp.asarray(x), interpret=True), _heads_want(x)):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
  _export(heads_over_time, S(shape, F32))


def test_scans_along_every_axis_of_a_4d_tile():
  x = np.random.default_rng(39).standard_normal((2, 4, 8, 32)).astype(np.float32)
  for g, w in zip(every_axis_4d(jnp.asarray(x), interpret=True), _every_axis_want(x)):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
  _export(every_axis_4d, S(x.shape, F32))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
@pytest.mark.parametrize("shape", [(4, 8, 64), (2, 128, 4), (3, 16, 32)])
def test_gpu_a_scan_along_a_middle_axis(shape):
  x = jnp.asarray(np.random.default_rng(38).standard_normal(shape).astype(np.float32))
  for g, i, w in zip(heads_over_time(x), heads_over_time(x, interpret=True), _heads_want(np.asarray(x))):
    np.testing.assert_array_equal(g, i)
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_scans_along_every_axis_of_a_4d_tile():
  x = jnp.asarray(np.random.default_rng(39).standard_normal((2, 4, 8, 32)).astype(np.float32))
  for g, i, w in zip(every_axis_4d(x), every_axis_4d(x, interpret=True), _every_axis_want(np.asarray(x))):
    np.testing.assert_array_equal(g, i)
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- scans jnp, lax and NumPy spell otherwise
X2 = (S((16, 128), F32),)


@mg.mgpu_kernel(out_shape=lambda x: x)
def lax_cumlogsumexp(x, out):
  out[...] = jax.lax.cumlogsumexp(x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def log_cumsum_exp_followed(x, out):
  out[...] = ml.associative_scan(lambda p, q: ml.maximum(p, q) + ml.log1p(ml.exp(-ml.abs(p - q))), x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def log_cumsum_exp_old_hint(x, out):
  v = x[...]
  m = ml.max(v, axis=1, keepdims=True)
  out[...] = m + ml.log(ml.cumsum(ml.exp(v - m), axis=1))


def test_a_log_cumsum_exp_hints_log_steps_that_hold_at_any_range():
  """lax.cumlogsumexp was "kernels call ml.* functions ...; decorate a helper with @ml.inline", and
  ml.logcumsumexp's hint shifted by the row's maximum, which gives -inf where a row spans more than about
  87 (log-probabilities: a standard deviation of 30 does): the hint wrote log2(n) steps of a stable logaddexp of
  shifted copies (frontend/scan_hints.py), which match jax.lax.cumlogsumexp; since probe 46h it is that scan as
  ml.associative_scan of the logaddexp; since probe 48b lax.cumlogsumexp itself computes as that scan."""
  x = (np.random.default_rng(40).standard_normal((16, 128)) * 30).astype(np.float32)
  want = np.asarray(jax.lax.cumlogsumexp(jnp.asarray(x), axis=1))
  np.testing.assert_allclose(log_cumsum_exp_followed(jnp.asarray(x), interpret=True), want, rtol=1e-5, atol=1e-4)
  np.testing.assert_allclose(lax_cumlogsumexp(jnp.asarray(x), interpret=True), want, rtol=1e-5, atol=1e-4)
  assert np.isneginf(np.asarray(log_cumsum_exp_old_hint(jnp.asarray(x), interpret=True))).any()
  _export(log_cumsum_exp_followed, *X2)


@mg.mgpu_kernel(out_shape=lambda x: x)
def ufunc_accumulate(x, out):
  out[...] = jnp.maximum.accumulate(x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def numpy_accumulate(x, out):
  v = x[...]
  out[...] = np.add.accumulate(v)


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((x.shape[0], x.shape[1] + 1), x.dtype))
def cumulative_sum(x, out):
  out[...] = jnp.cumulative_sum(x[...], axis=1, include_initial=True)


def test_running_scans_of_ufuncs_and_array_api_names_hint_the_ml_scan():
  """jnp.maximum.accumulate, np.add.accumulate and jnp.cumulative_sum were "decorate a helper of your own
  with @ml.inline": the hint now names the ml scan with the call's operand and axis (a ufunc's accumulate
  runs along axis 0 unless told)."""
  # (the two accumulates were these hints' MG003 until probe 52d made them ml.cummax and ml.cumsum)
  x = np.random.default_rng(41).standard_normal((16, 128)).astype(np.float32)
  np.testing.assert_array_equal(ufunc_accumulate(x, interpret=True), np.maximum.accumulate(x, axis=1))
  np.testing.assert_allclose(numpy_accumulate(x, interpret=True), np.add.accumulate(x), rtol=1e-5, atol=1e-5)
  # (jnp.cumulative_sum's include_initial=True was this hint's MG003 until probe 56f joined its 0)
  np.testing.assert_allclose(cumulative_sum(x, interpret=True),
                             jnp.cumulative_sum(x, axis=1, include_initial=True), rtol=1e-5, atol=1e-5)


@ml.inline
def _linear(p, c):
  return p[0] * c[0], c[0] * p[1] + c[1]


@mg.mgpu_kernel(out_shape=lambda a, b: b)
def associative_scan(a, b, out):
  out[...] = ml.associative_scan((a[...], b[...]), 1, _linear)[1]


@mg.mgpu_kernel(out_shape=lambda a, b: b)
def associative_scan_followed(a, b, out):
  v = (a[...], b[...])
  n = a.shape[1]
  for k in ml.static_range((n - 1).bit_length()):
    s = 2 ** k
    keep = ml.arange(n)[None, :] >= s
    new = _linear((ml.roll(v[0], s, axis=1), ml.roll(v[1], s, axis=1)), v)
    v = (ml.where(keep, new[0], v[0]), ml.where(keep, new[1], v[1]))
  out[...] = v[1]


def test_a_general_associative_scan_hints_log_steps_of_shifted_copies():
  """ml.associative_scan (Triton's tl.associative_scan of a linear recurrence) hinted only "carry the running
  value through a loop"; the hint then wrote the log-step scan of rolled copies, which computes h = a * h + b;
  since probe 46h ml.associative_scan is that scan (frontend/ops/assoc_scan.py), in Triton's order here."""
  rng = np.random.default_rng(41)
  a = rng.uniform(0.5, 1.0, (16, 96)).astype(np.float32)
  b = rng.standard_normal((16, 96)).astype(np.float32)
  h, want = np.zeros(16), []
  for t in range(96):
    h = a[:, t] * h + b[:, t]
    want.append(h)
  for kernel in (associative_scan, associative_scan_followed):
    got = kernel(jnp.asarray(a), jnp.asarray(b), interpret=True)
    np.testing.assert_allclose(got, np.stack(want, 1), rtol=1e-5, atol=1e-5)
  _export(associative_scan, S(a.shape, F32), S(b.shape, F32))
  _export(associative_scan_followed, S(a.shape, F32), S(b.shape, F32))


# ---------------------------------------------------------------- per-step outputs collected with .append
@mg.mgpu_kernel(out_shape=lambda a, b: (a, a))
def collected_steps(a, b, rows, pairs):
  """h_t = a_t * h_{t-1} + b_t over the rows of a, each step's state collected, as a JAX user collects a
  scan's outputs, then stacked (rows) or stored one by one (pairs, two steps a trip with .extend)."""
  h = ml.zeros((a.shape[1],), jnp.float32)
  hs = []
  for t in ml.static_range(a.shape[0]):
    h = a[t] * h + b[t]
    hs.append(h)
  rows[...] = ml.concatenate([v[None, :] for v in hs], axis=0)
  h, got = ml.zeros((a.shape[1],), jnp.float32), []
  for t in ml.static_range(a.shape[0] // 2):
    h1 = a[2 * t] * h + b[2 * t]
    h = a[2 * t + 1] * h1 + b[2 * t + 1]
    got.extend((h1, h))
  for t, v in enumerate(got):
    pairs.at[t][...] = v


@mg.mgpu_kernel(out_shape=lambda a, b: a)
def collected_at_run_time(a, b, out):
  h = ml.zeros((a.shape[1],), jnp.float32)
  hs = []
  for t in ml.range(a.shape[0]):
    h = a[t] * h + b[t]
    hs.append(h)
  out[...] = ml.concatenate([v[None, :] for v in hs], axis=0)


@mg.mgpu_kernel(out_shape=lambda a, b: a)
def collected_in_python_range(a, b, out):
  """The same in a Python range of static bounds: unrolled as Python runs it since probe 52b."""
  h = ml.zeros((a.shape[1],), jnp.float32)
  hs = []
  for t in range(a.shape[0]):
    h = a[t] * h + b[t]
    hs.append(h)
  out[...] = ml.concatenate([v[None, :] for v in hs], axis=0)


def _recurrence(a, b):
  h, out = np.zeros(a.shape[1], np.float32), []
  for t in range(a.shape[0]):
    h = a[t] * h + b[t]
    out.append(h)
  return np.stack(out)


def test_append_and_extend_in_an_unrolled_loop_build_the_list():
  """`hs.append(v)` was MG003 ("lists in a kernel are fixed once built ..., so they have no .append"): it now
  binds hs to a new list, as `hs += [v]` does (frontend/tracer.py, env.py), so an unrolled loop collects its
  steps; in a run-time loop the list's length would change each trip, which is MG005 at the append."""
  rng = np.random.default_rng(42)
  a = rng.uniform(0.5, 1.0, (16, 128)).astype(np.float32)
  b = rng.standard_normal((16, 128)).astype(np.float32)
  want = _recurrence(a, b)
  for got in collected_steps(jnp.asarray(a), jnp.asarray(b), interpret=True):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  _export(collected_steps, S(a.shape, F32), S(b.shape, F32))
  np.testing.assert_allclose(np.asarray(collected_in_python_range(a, b, interpret=True)), want, rtol=1e-5, atol=1e-5)
  expect(collected_at_run_time, (S((16, 128), F32),) * 2, mg.LoopCarryTypeError, "hs.append(h)",
         "hs is rebound inside a runtime loop to a list of 1; only register values and numbers can change across"
         " iterations")


# ---------------------------------------------------------------- a per-head carry stretched along time (a middle axis)
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 2,))
def heads_chunked_cumsum(x, out):
  """Two heads a program, time in chunks of 16: each chunk's scan plus the carry of the chunks before,
  a (2, 1, d) tensor stretched along time, the middle axis of the (2, 16, d) chunk."""
  i = ml.program_id(0)
  carry = ml.zeros((2, 1, x.shape[2]), jnp.float32)
  for c in range(x.shape[1] // 16):
    v = x.at[ml.ds(i * 2, 2), ml.ds(c * 16, 16)][...]
    cs = ml.cumsum(v, axis=1) + carry
    out.at[ml.ds(i * 2, 2), ml.ds(c * 16, 16)][...] = cs
    carry = cs[:, 15:16, :]


def _heads_input():
  return np.random.default_rng(43).standard_normal((4, 64, 64)).astype(np.float32)


def test_a_carry_stretched_along_a_middle_axis_is_copied_along_it():
  """`cs + carry` of a (2, 16, 64) chunk and a (2, 1, 64) carry was MG204 ("broadcasting works into 1-D and
  2-D tensors, not 3-D ones"), whose hint looped over `.at[i]` of register tensors (which have none): the
  broadcast is now copies of the carry along the middle axis, ml.concatenate([carry] * 16, axis=1)
  (frontend/ops/broadcast_nd.py's copied_axes)."""
  x = _heads_input()
  got = heads_chunked_cumsum(jnp.asarray(x), interpret=True)
  np.testing.assert_allclose(got, np.cumsum(x.astype(np.float64), 1), rtol=1e-5, atol=1e-4)
  _export(heads_chunked_cumsum, S(x.shape, F32))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_a_carry_stretched_along_a_middle_axis():
  x = jnp.asarray(_heads_input())
  np.testing.assert_array_equal(heads_chunked_cumsum(x), heads_chunked_cumsum(x, interpret=True))


# ---------------------------------------------------------------- statistics over time, a middle axis
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0], x.shape[2]), F32), S((x.shape[0], x.shape[2]), F32), x))
def pooled_over_time(x, total, peak, attn):
  """A (heads, time, d) chunk pooled over time: sums, maxima, and a softmax over time."""
  v = x[...]
  total[...] = ml.sum(v, axis=1)
  peak[...] = ml.max(v, axis=-2)
  attn[...] = ml.softmax(v, axis=1)


def _pooled_want(x):
  e = np.exp(x - x.max(1, keepdims=True))
  return x.sum(1), x.max(1), e / e.sum(1, keepdims=True)


def test_a_reduction_over_a_middle_axis_is_the_scan_from_the_end():
  """ml.sum(v, axis=1) of a 3-D tile was MG204 ("partial reductions work on 1-D and 2-D tensors"): one middle
  axis now reduces as the scan along it from the end (each slab apart), read at its first position
  (frontend/ops/reduce.py), so statistics over time work, softmax included."""
  x = np.random.default_rng(44).standard_normal((4, 16, 64)).astype(np.float32)
  for g, w in zip(pooled_over_time(jnp.asarray(x), interpret=True), _pooled_want(x)):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
  _export(pooled_over_time, S(x.shape, F32))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_a_reduction_over_a_middle_axis():
  x = jnp.asarray(np.random.default_rng(44).standard_normal((4, 16, 64)).astype(np.float32))
  for g, i, w in zip(pooled_over_time(x), pooled_over_time(x, interpret=True), _pooled_want(np.asarray(x))):
    np.testing.assert_allclose(g, i, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- out.at[t] = h
@mg.mgpu_kernel(out_shape=lambda a, b: a)
def store_into_at(a, b, out):
  h = ml.zeros((a.shape[1],), jnp.float32)
  for t in range(a.shape[0]):
    h = a.at[t][...] * h + b.at[t][...]
    out.at[t] = h


@mg.mgpu_kernel(out_shape=lambda a, b: (a, a))
def store_into_at_followed(a, b, out, out2):
  h = ml.zeros((a.shape[1],), jnp.float32)
  for t in range(a.shape[0]):
    h = a.at[t][...] * h + b.at[t][...]
    out.at[t][...] = h
    out2[t] = h


def test_assigning_to_a_view_hints_the_store_with_the_kernels_names():
  """The hint was "write through the ref: ref[idx] = value", placeholders for the user's own names."""
  expect(store_into_at, (S((16, 128), F32),) * 2, mg.UnsupportedSyntaxError, "out.at[t] = h",
         "assigning to ref.at[...] is not supported in a kernel",
         hint="write through the view, out.at[t][...] = h, or the ref itself, out[t] = h")
  rng = np.random.default_rng(45)
  a = rng.uniform(0.5, 1.0, (16, 128)).astype(np.float32)
  b = rng.standard_normal((16, 128)).astype(np.float32)
  for got in store_into_at_followed(jnp.asarray(a), jnp.asarray(b), interpret=True):
    np.testing.assert_allclose(got, _recurrence(a, b), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- Triton's num_stages on a loop of register loads
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[1] // 128,))
def running_sum_num_stages(x, out):
  pid = ml.program_id(0)
  acc = ml.zeros((128,), dtype=jnp.float32)
  for t in ml.range(0, x.shape[0], num_stages=2):
    acc += ml.load(x.at[t, ml.ds(pid * 128, 128)])
    ml.store(out.at[t, ml.ds(pid * 128, 128)], acc)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[1] // 128,))
def running_sum_followed(x, out):
  pid = ml.program_id(0)
  acc = ml.zeros((128,), dtype=jnp.float32)
  for t in ml.range(0, x.shape[0]):
    acc += ml.load(x.at[t, ml.ds(pid * 128, 128)])
    ml.store(out.at[t, ml.ds(pid * 128, 128)], acc)


def test_num_stages_on_a_loop_of_register_loads_hints_dropping_it():
  """The hint said "write stages=", which on a loop with no ml.copy is MG502 ("found no TMA load to
  pipeline"), whose hint then said to drop it; since probe 48g Triton's tuning hint is taken (nothing to pipeline)."""
  x = np.random.default_rng(46).standard_normal((64, 256)).astype(np.float32)
  np.testing.assert_allclose(running_sum_num_stages(jnp.asarray(x), interpret=True), np.cumsum(x, 0), rtol=1e-5,
                             atol=1e-4)
  np.testing.assert_allclose(running_sum_followed(jnp.asarray(x), interpret=True), np.cumsum(x, 0), rtol=1e-5,
                             atol=1e-4)
