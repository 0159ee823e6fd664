"""Probe 51i (scans and recurrences as users write them). (1) `lax.scan` over time longer than SCAN_UNROLL (64)
steps whose xs are the trip counter (`jnp.arange(L)`) or None (`length=L`) and whose body returns None as its y
(Pallas's selective scan, an RWKV recurrence, each step's output stored by the body) runs as a run-time loop; it
was MG003 past 64 steps. A long scan whose body returns ys to stack stays MG003, now saying why and to store
each step's y in the body. (2) jnp's functional update of a register tensor at single positions, `ys.at[t].set(h)`
in a recurrence's loop (t static or run-time), `v.at[:, j].add(y)`, `.at[-1].mul(y)`, static ranges
`v.at[1:-1].add(1.0)` (the update a number or broadcast along the range): the select by index its MG003 hint
wrote (it was MG003; vectors of indices were jnp's scatter since probe 49e). (3) A bounds error found after
tracing in the body of lax.fori_loop or a long lax.scan named the loop index by the compiler's temporary
(`when _lax0_i = 0`); it is the body's own name for it. (4) A long lax.scan over whole reads of refs,
`lax.scan(step, h0, (a_ref[...], b_ref[...]))`, reads a row a step (`a_ref[t]`) in the loop; it was MG003, whose
hint unrolled the steps."""
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


def _input(shape, dtype=F32, seed=0, scale=1.0, positive=False):
  rng = np.random.default_rng(seed)
  return jnp.asarray((rng.random(shape) if positive else rng.standard_normal(shape)) * scale, dtype)


def _f64(x):
  return np.asarray(x).astype(np.float64)


# ---------------------------------------------------------------- lax.scan over time, past 64 steps
@mg.mgpu_kernel(out_shape=lambda x, dt, a, b, c: x, grid=lambda x, dt, a, b, c: (x.shape[1] // 64,))
def selective_scan_lax(x, dt, a, b, c, y_ref):
  """Mamba's selective scan as a Pallas kernel writes it: the state (d_state, block_d) carried by lax.scan over
  jnp.arange(L), each step's y stored by the body."""
  cols = ml.ds(ml.program_id(0) * 64, 64)
  a_v = a[:, cols]

  def step(h, t):
    d = jax.nn.softplus(dt[t, cols])
    h = jnp.exp(d[None, :] * a_v) * h + b[t, :][:, None] * (d * x[t, cols])[None, :]
    y_ref[t, cols] = jnp.sum(c[t, :][:, None] * h, axis=0).astype(y_ref.dtype)
    return h, None
  lax.scan(step, jnp.zeros((16, 64), jnp.float32), jnp.arange(x.shape[0]))


def _selective_ref(x, dt, a, b, c):
  x, dt, a, b, c = map(_f64, (x, dt, a, b, c))
  h, out = np.zeros(a.shape), np.zeros_like(x)
  for t in range(x.shape[0]):
    d = np.log1p(np.exp(dt[t]))
    h = np.exp(d[None] * a) * h + b[t][:, None] * (d * x[t])[None]
    out[t] = (c[t][:, None] * h).sum(0)
  return out


def _selective_inputs(steps=80, dtype=F32):
  return (_input((steps, 128), dtype, 1), _input((steps, 128), dtype, 2, 0.5),
          -_input((16, 128), F32, 3, positive=True),
          _input((steps, 16), dtype, 4), _input((steps, 16), dtype, 5))


@mg.mgpu_kernel(out_shape=lambda k, v, w: v)
def rwkv_lax(k, v, w, y):
  """An RWKV-style time mix: a tuple carry (a step counter, numerator, denominator), lax.scan of xs=None, length=."""
  ww = jnp.exp(-jnp.exp(w[...]))

  def step(carry, _):
    t, num, den = carry
    kt = jnp.exp(k[t, :])
    num, den = ww * num + kt * v[t, :], ww * den + kt
    y[t, :] = num / den
    return (t + 1, num, den), None
  lax.scan(step, (0, jnp.zeros((128,), F32), jnp.zeros((128,), F32)), None, length=k.shape[0])


def _rwkv_ref(k, v, w):
  k, v, w = map(_f64, (k, v, w))
  ww, num, den, y = np.exp(-np.exp(w)), np.zeros_like(w), np.zeros_like(w), np.zeros_like(v)
  for t in range(k.shape[0]):
    num, den = ww * num + np.exp(k[t]) * v[t], ww * den + np.exp(k[t])
    y[t] = num / den
  return y


@mg.mgpu_kernel(out_shape=lambda a, b: (b, S(b.shape[1:], F32)))
def reverse_dict_scan(a, b, o, last):
  """A backward recurrence (reverse=True) with a dict carry, its final carry used after the scan."""
  def step(c, t):
    h = a[t, :] * c["h"] + b[t, :]
    o[t, :] = h
    return {"h": h, "s": c["s"] + h}, None
  out, _ = lax.scan(step, {"h": jnp.zeros((128,), F32), "s": jnp.zeros((128,), F32)}, jnp.arange(b.shape[0]),
                    reverse=True)
  last[...] = out["s"]


def _reverse_ref(a, b):
  a, b = _f64(a), _f64(b)
  h, s, o = np.zeros(b.shape[1]), np.zeros(b.shape[1]), np.zeros_like(b)
  for t in range(b.shape[0] - 1, -1, -1):
    h = a[t] * h + b[t]
    o[t], s = h, s + h
  return o, s


@mg.mgpu_kernel(out_shape=lambda a, b: b)
def fori_reads_before_the_start(a, b, o):
  def body(k, c):
    t = -1 - k
    return a[t, :] * c + b[t, :]
  o[0, :] = lax.fori_loop(0, b.shape[0], body, jnp.zeros((128,), F32))


@mg.mgpu_kernel(out_shape=lambda a, b: b)
def long_scan_reads_before_the_start(a, b, o):
  def step(h, t):
    return a[t - 1, :] * h + b[t, :], None
  h, _ = lax.scan(step, jnp.zeros((128,), F32), jnp.arange(100))
  o[0, :] = h


@mg.mgpu_kernel(out_shape=lambda a: S(a.shape[1:], F32))
def long_scan_with_ys(a, o):
  def step(h, t):
    h = h * 0.5 + a[t, :]
    return h, h
  h, ys = lax.scan(step, jnp.zeros((128,), F32), jnp.arange(a.shape[0]))
  o[...] = h + ys[0]


@mg.mgpu_kernel(out_shape=lambda a: S(a.shape[1:], F32))
def long_scan_carry_narrowed(a, o):
  def step(h, t):
    return (h + a[t, :]).astype(jnp.bfloat16), None
  h, _ = lax.scan(step, jnp.zeros((128,), F32), jnp.arange(a.shape[0]))
  o[...] = h


def test_selective_scan_over_80_steps_runs_as_a_loop():
  args = _selective_inputs()
  got = selective_scan_lax(*args, interpret=True)
  np.testing.assert_allclose(_f64(got), _selective_ref(*args), rtol=1e-4, atol=1e-4)
  text = selective_scan_lax.mlir(*[S(t.shape, t.dtype) for t in args])
  assert "scf.for" in text and text.count("math.exp") < 16      # one copy of the body, not 80


def test_rwkv_scan_of_length_and_a_backward_scan_with_a_dict_carry():
  k, v, w = _input((96, 128), F32, 1, 0.5), _input((96, 128), F32, 2), _input((128,), F32, 3, 0.5)
  np.testing.assert_allclose(_f64(rwkv_lax(k, v, w, interpret=True)), _rwkv_ref(k, v, w), rtol=1e-4, atol=1e-6)
  a, b = _input((70, 128), F32, 4, positive=True), _input((70, 128), F32, 5)
  o, s = reverse_dict_scan(a, b, interpret=True)
  want_o, want_s = _reverse_ref(a, b)
  np.testing.assert_allclose(_f64(o), want_o, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(_f64(s), want_s, rtol=1e-4, atol=1e-4)
  jax.export.export(jax.jit(lambda *t: reverse_dict_scan(*t)), platforms=["cuda"])(S(a.shape, F32), S(b.shape, F32))


def test_a_long_scan_that_stacks_ys_keeps_its_mg003_and_a_body_mistake_is_at_its_line():
  # (since probe 53f a long scan's ys are stacked through SMEM rows; too many rows keep an MG003)
  a = _input((100, 128), F32, 6)
  h, ys = np.zeros(128), []
  for t in range(100):
    h = h * 0.5 + _f64(a)[t]
    ys.append(h)
  np.testing.assert_allclose(_f64(long_scan_with_ys(a, interpret=True)), h + ys[0], rtol=1e-5, atol=1e-6)
  expect(long_scan_with_ys, [S((1000, 128), F32)], mg.KernelTypeError, "lax.scan(",
         "lax.scan of 1000 steps returns ys to stack, 1000 rows of float32[128]: more than the half of a kernel's SMEM"
         " that a long scan's ys may take",
         hint="store each step's y where step makes it (out[t] = y, a row of an output or of an ml.smem buffer) and"
              " return None as its y: a lax.scan of more steps then runs as a loop")
  expect(long_scan_carry_narrowed, [S((100, 128), F32)], mg.LoopCarryTypeError, "lax.scan(",
         "h enters the loop as a float32 tensor of shape (128,) but an iteration makes it a bfloat16 tensor of shape"
         " (128,)", hint="convert it back where step returns it: return (...).astype(jnp.float32)")


@mg.mgpu_kernel(out_shape=lambda a, b: S((1, b.shape[1]), F32))
def scan_over_ref_rows(a, b, o):
  def step(h, ab):
    at, bt = ab
    return at * h + bt, None
  h, _ = lax.scan(step, jnp.zeros((128,), F32), (a[...], b[:]))
  o[0, :] = h


@mg.mgpu_kernel(out_shape=lambda a: S(a.shape[1:], F32))
def reverse_scan_over_a_ref(a, o):
  h, _ = lax.scan(lambda h, x: (h * 0.5 + x, None), jnp.zeros((128,), F32), a[...], reverse=True)
  o[...] = h


@mg.mgpu_kernel(out_shape=lambda a: S(a.shape[1:], F32))
def ref_rows_with_ys(a, o):
  h, ys = lax.scan(lambda h, x: (h * 0.5 + x, h), jnp.zeros((128,), F32), a[...])
  o[...] = h


def test_a_long_scan_over_whole_reads_of_refs_reads_a_row_a_step():
  a, b = _input((100, 128), F32, 1, positive=True), _input((100, 128), F32, 2)
  want = _rows_ref(a, b)[-1]
  np.testing.assert_allclose(_f64(scan_over_ref_rows(a, b, interpret=True))[0], want, rtol=1e-5, atol=1e-6)
  x = _input((256, 128), F32, 3)
  h = np.zeros(128)
  for t in range(255, -1, -1):
    h = h * 0.5 + _f64(x)[t]
  np.testing.assert_allclose(_f64(reverse_scan_over_a_ref(x, interpret=True)), h, rtol=1e-5, atol=1e-6)
  text = reverse_scan_over_a_ref.mlir(S(x.shape, F32))
  assert "scf.for" in text
  expect(ref_rows_with_ys, [S((256, 128), F32)], mg.KernelTypeError, "lax.scan(",
         "lax.scan of 256 steps returns ys to stack, 256 rows of float32[128]: more than the half of a kernel's SMEM"
         " that a long scan's ys may take",     # (fewer rows are stacked through SMEM since probe 53f)
         hint="store each step's y where the body makes it (out[t] = y, a row of an output or of an ml.smem buffer;"
              " scan over jnp.arange(256) for the step t, reading rows of its xs in the body) and return None as its"
              " y: a lax.scan of more steps then runs as a loop")
  y = _input((100, 128), F32, 7)
  h = np.zeros(128)
  for t in range(100):
    h = h * 0.5 + _f64(y)[t]
  np.testing.assert_allclose(_f64(ref_rows_with_ys(y, interpret=True)), h, rtol=1e-5, atol=1e-6)


def test_a_bounds_error_in_a_lax_loop_body_names_the_bodys_index():
  # (the hints name the row's index as written since probe 71a; they said "if start >= 0:", a start never written)
  specs = [S((100, 128), F32)] * 2
  expect(fori_reads_before_the_start, specs, mg.IndexOutOfBoundsError, "a[t, :]",
         "this register read touches a[-1:0, 0:128] when k = 0, outside a's shape (100, 128)",
         hint="guard the access (if t >= 0:) or clamp its index (ml.maximum(t, 0))")
  expect(long_scan_reads_before_the_start, specs, mg.IndexOutOfBoundsError, "a[t - 1, :]",
         "this register read touches a[-1:0, 0:128] when t = 0, outside a's shape (100, 128)",
         hint="guard the access (if t - 1 >= 0:) or clamp its index (ml.maximum(t - 1, 0))")


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_long_lax_scans_match_interpret_mode():
  args = _selective_inputs(steps=200)
  np.testing.assert_allclose(_f64(jax.jit(selective_scan_lax)(*args)), _selective_ref(*args), rtol=2e-4, atol=2e-4)
  k, v, w = _input((96, 128), F32, 1, 0.5), _input((96, 128), F32, 2), _input((128,), F32, 3, 0.5)
  np.testing.assert_allclose(_f64(jax.jit(rwkv_lax)(k, v, w)), _rwkv_ref(k, v, w), rtol=2e-4, atol=1e-6)
  a, b = _input((70, 128), F32, 4, positive=True), _input((70, 128), F32, 5)
  np.testing.assert_allclose(_f64(jax.jit(scan_over_ref_rows)(a, b)), _f64(scan_over_ref_rows(a, b, interpret=True)),
                             rtol=1e-5, atol=1e-6)
  o, s = jax.jit(reverse_dict_scan)(a, b)
  want_o, want_s = _reverse_ref(a, b)
  np.testing.assert_allclose(_f64(o), want_o, rtol=2e-4, atol=1e-5)
  np.testing.assert_allclose(_f64(s), want_s, rtol=2e-4, atol=1e-4)


# ---------------------------------------------------------------- jnp's .at[t] updates of register tensors
@mg.mgpu_kernel(out_shape=lambda a, b: b)
def recurrence_rows_at(a, b, o):
  """A recurrence collecting its states in registers, jnp-style, in a run-time loop: ys.at[t].set(h)."""
  h = jnp.zeros((128,), F32)
  ys = jnp.zeros(b.shape, F32)
  for t in range(b.shape[0]):
    h = a[t, :] * h + b[t, :]
    ys = ys.at[t].set(h)
  o[...] = ys


@mg.mgpu_kernel(out_shape=lambda a, b: b)
def fori_rows_at(a, b, o):
  """The same in lax.fori_loop, its carry (h, ys), reversed in time (the row counted from the end, negative)."""
  def body(k, c):
    h, ys = c
    t = b.shape[0] - 1 - k
    h = a[t, :] * h + b[t, :]
    return h, ys.at[-1 - k].set(h.astype(jnp.bfloat16))
  _, ys = lax.fori_loop(0, b.shape[0], body, (jnp.zeros((128,), F32), jnp.zeros(b.shape, jnp.bfloat16)))
  o[...] = ys.astype(F32)


@mg.mgpu_kernel(out_shape=lambda x, i: (x, S((16, 128), F32), S((128,), BF16), S((4, 8, 32), F32)))
def at_points(x, i, o1, o2, o3, o4):
  v = x[...]
  t = i[0]
  o1[...] = v.at[:, t].set(v[:, 0] * 2).at[-1].add(1.0).at[t - 16, 3].mul(3.0)
  o2[...] = jnp.zeros((16, 128), F32).at[:, 5].max(v[:, 7]).at[2].min(-v[3])
  o3[...] = jnp.zeros((128,), BF16).at[t].set(1.5).at[200].set(7.0).at[-2].set(v[0, 0])
  o4[...] = jnp.zeros((4, 8, 32), F32).at[1, :, t].set(v[:8, 0])


@mg.mgpu_kernel(out_shape=lambda x: (x, x, S((128,), F32)))
def at_ranges(x, o1, o2, o3):
  v = x[...]
  o1[...] = v.at[1:-1].add(1.0).at[:, :3].set(v[:, 0:1] * 0.0 + 2.0)
  o2[...] = v.at[:, 100:].mul(v[:, 5][:, None]).at[2:4, 7].max(0.0).at[0:16].min(v[0])
  o3[...] = v[0].at[:64].set(0.0).at[-8:].add(v[1, :1])


@mg.mgpu_kernel(out_shape=lambda x: x)
def at_row_too_narrow(x, o):
  v = x[...]
  o[...] = v.at[3].set(v[:, :64])


def _rows_ref(a, b, reverse=False):
  a, b = _f64(a), _f64(b)
  h, ys = np.zeros(b.shape[1]), np.zeros_like(b)
  for t in (range(b.shape[0] - 1, -1, -1) if reverse else range(b.shape[0])):
    h = a[t] * h + b[t]
    ys[t] = h
  return ys


def _points_ref(x, t):
  v = np.asarray(x).astype(np.float64)
  o1 = v.copy()
  o1[:, t] = v[:, 0] * 2
  o1[-1] += 1.0
  o1[t - 16, 3] *= 3.0
  o2 = np.zeros((16, 128))
  o2[:, 5] = np.maximum(0.0, v[:, 7])
  o2[2] = np.minimum(o2[2], -v[3])
  o3 = np.zeros(128)
  o3[t], o3[-2] = 1.5, v[0, 0]         # (index 200 is outside: dropped, as jnp's)
  o4 = np.zeros((4, 8, 32))
  o4[1, :, t] = v[:8, 0]
  return o1, o2, o3, o4


def test_a_recurrence_collects_its_states_with_at_set_in_registers():
  a, b = _input((16, 128), F32, 1, positive=True), _input((16, 128), F32, 2)
  np.testing.assert_allclose(_f64(recurrence_rows_at(a, b, interpret=True)), _rows_ref(a, b), rtol=1e-5, atol=1e-6)
  want = _rows_ref(a, b, reverse=True).astype(np.float32).astype(BF16).astype(np.float64)
  np.testing.assert_allclose(_f64(fori_rows_at(a, b, interpret=True)), want, rtol=1e-2, atol=1e-2)
  jax.export.export(jax.jit(lambda *t: fori_rows_at(*t)), platforms=["cuda"])(S(a.shape, F32), S(b.shape, F32))


def test_at_updates_at_static_and_run_time_points_and_static_ranges_match_numpy():
  x, i = _input((16, 128), F32, 3), jnp.asarray([5], jnp.int32)
  for got, want in zip(at_points(x, i, interpret=True), _points_ref(x, 5)):
    np.testing.assert_allclose(_f64(got), want.astype(np.float32).astype(got.dtype).astype(np.float64), rtol=1e-6)
  jax.export.export(jax.jit(lambda *t: at_points(*t)), platforms=["cuda"])(S(x.shape, F32), S(i.shape, jnp.int32))
  v = _f64(x)
  a, b, c = v.copy(), v.copy(), v[0].copy()
  a[1:-1] += 1.0
  a[:, :3] = 2.0
  b[:, 100:] *= v[:, 5][:, None]
  b[2:4, 7] = np.maximum(b[2:4, 7], 0.0)
  b[0:16] = np.minimum(b[0:16], v[0])
  c[:64] = 0.0
  c[-8:] += v[1, 0]
  for got, want in zip(at_ranges(x, interpret=True), (a, b, c)):
    np.testing.assert_allclose(_f64(got), want, rtol=1e-6)
  jax.export.export(jax.jit(lambda t: at_ranges(t)), platforms=["cuda"])(S(x.shape, F32))
  expect(at_row_too_narrow, [S((16, 128), F32)], mg.ShapeMismatchError, "v.at[3]",
         "v.at[3].set(v[:, :64]): the update v[:, :64] of shape (16, 64) does not broadcast to the shape (128,) of"
         " the elements it updates",
         hint="give an update of shape (128,), or one that broadcasts to it (a number, or a size-1 axis)")


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_at_updates_match_interpret_mode():
  a, b = _input((16, 128), F32, 1, positive=True), _input((16, 128), F32, 2)
  for k in (recurrence_rows_at, fori_rows_at):
    np.testing.assert_allclose(_f64(jax.jit(k)(a, b)), _f64(k(a, b, interpret=True)), rtol=1e-5, atol=1e-6)
  x, i = _input((16, 128), F32, 3), jnp.asarray([5], jnp.int32)
  for got, want in zip(jax.jit(at_points)(x, i), at_points(x, i, interpret=True)):
    np.testing.assert_array_equal(_f64(got), _f64(want))
  for got, want in zip(jax.jit(at_ranges)(x), at_ranges(x, interpret=True)):
    np.testing.assert_array_equal(_f64(got), _f64(want))
