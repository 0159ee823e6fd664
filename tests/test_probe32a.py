"""Probe 32a (leftovers of earlier probes, fixed as classes): float `//` and `%` as jnp's, run-time
jumps in unrolled loops, register rolls through ml.concatenate, a Python float for a bfloat16
ml.scalar."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, F16, BF16, I32 = jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _same(got, want):
  """Equal bit for bit (NaNs of either sign equal, -0.0 apart from 0.0)."""
  got, want = np.asarray(got).astype(np.float32), np.asarray(want).astype(np.float32)
  assert got.dtype == want.dtype and got.shape == want.shape
  both_nan = np.isnan(got) & np.isnan(want)
  bad = ~(both_nan | (got == want) & (np.signbit(got) == np.signbit(want)))
  assert not bad.any(), (got[bad][:8], want[bad][:8])


# ---------------------------------------------------------------- float // and %: jnp's
@mg.mgpu_kernel(out_shape=lambda x, y: (x, x))
def float_divmod(x, y, q, r):
  a, b = x[...], y[...]
  q[...] = a // b
  r[...] = a % b


@mg.mgpu_kernel(out_shape=lambda x, s: (x, x, x))
def float_divmod_constants(x, s: ml.scalar, q, r, t):
  a = x[...]
  q[...] = a // -2.5 + 7.0 % a
  r[...] = a % 0.0 + (a // 0.0) * 0.0
  t[...] = ml.full(a.shape, s // 0.75 + s % -0.75, a.dtype) + a % s.astype(a.dtype)


@mg.mgpu_kernel(out_shape=lambda i: (S(i.shape, F32), S(i.shape, F32), S(i.shape, F32)))
def int_meets_python_float(i, r, q, p):
  v = i[...]
  r[...] = v % 2.5
  q[...] = v // -1.5
  p[...] = 7.5 % v


def _operands(dt, n=4096, seed=0):
  rng = np.random.default_rng(seed)
  x = (rng.standard_normal(n) * np.exp(rng.uniform(-12, 12, n))).astype(np.float32)
  y = (rng.standard_normal(n) * np.exp(rng.uniform(-12, 12, n))).astype(np.float32)
  special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.0, -3.0, 7.5, 0.1, -0.1, 1e4, -6e-5,
                      2.0, 0.5], np.float32)
  x[:256], y[:256] = np.repeat(special, 16), np.tile(special, 16)
  return jnp.asarray(x).astype(dt), jnp.asarray(y).astype(dt)


@pytest.mark.parametrize("dt", [F32, F16, BF16], ids=["f32", "f16", "bf16"])
def test_float_floor_division_and_remainder_are_jnps(dt):
  """Float // and % were MG106 (hinting ml.floor(a / b), one off where the quotient rounds up: 1.0 // 0.1)."""
  x, y = _operands(dt)
  q, r = float_divmod(x, y, interpret=True)
  _same(q, x // y)
  _same(r, x % y)
  assert "mosaic_gpu" in _export(float_divmod, S(x.shape, dt), S(y.shape, dt))


def test_bfloat16_divmod_builds_where_numpys_finfo_does_not_know_bfloat16(monkeypatch):
  """On the GPU machine (numpy and ml_dtypes of jax 0.11.2) np.finfo(bfloat16) raises ValueError, and
  the bfloat16 // and % lowering was MG900 there; ml_dtypes.finfo knows every dtype."""
  real = np.finfo
  def finfo(d):
    if jnp.dtype(d) == BF16:
      raise ValueError(f"data type {jnp.dtype(d)!r} not compatible with finfo")
    return real(d)
  monkeypatch.setattr(np, "finfo", finfo)
  assert "mosaic_gpu" in _export(float_divmod, S((4096,), BF16), S((4096,), BF16))


@pytest.mark.parametrize("dt", [F32, BF16], ids=["f32", "bf16"])
def test_float_floor_division_by_constants_and_scalars_is_jnps(dt):
  x, _ = _operands(dt, n=1024, seed=1)
  for s in (1.3, -0.7, 0.0):
    q, r, t = float_divmod_constants(x, s, interpret=True)
    _same(q, x // -2.5 + 7.0 % x)
    _same(r, x % 0.0 + (x // 0.0) * 0.0)
    sd = jnp.asarray(s, F32)
    _same(t, (jnp.full(x.shape, sd // 0.75 + sd % -0.75).astype(dt)) + x % sd.astype(dt))
  assert "mosaic_gpu" in _export(float_divmod_constants, S(x.shape, dt), 1.0)


def test_an_integer_meeting_a_python_float_in_floor_division_computes_in_float32():
  """`i % 2.5` was MG106 ("% needs integer operands: i is int32 but 2.5 is a float"); jnp computes it in float32."""
  i = jnp.arange(-64, 64, dtype=I32)
  r, q, p = int_meets_python_float(i, interpret=True)
  _same(r, i % 2.5)
  _same(q, i // -1.5)
  _same(p, 7.5 % i)
  assert "mosaic_gpu" in _export(int_meets_python_float, S(i.shape, I32))


@mg.mgpu_kernel(out_shape=lambda x, a: x)
def narrow_scalar_divmod(x, a: ml.scalar, out):
  out[...] = x[...] + (a // 0.75 + a % -0.75)


@pytest.mark.parametrize("dt", [F16, BF16], ids=["f16", "bf16"])
def test_float_floor_division_of_16_bit_scalars_is_jnps(dt):
  x = jnp.linspace(-4, 4, 128).astype(dt)
  for a in (2.3, -1.1, 0.0, 1e4):
    ad = jnp.asarray(a, dt)
    _same(narrow_scalar_divmod(x, ad, interpret=True), x + (ad // 0.75 + ad % -0.75))
  assert "mosaic_gpu" in _export(narrow_scalar_divmod, S(x.shape, dt), S((), dt))


@mg.mgpu_kernel(out_shape=lambda x: (x, x, x, x))
def by_special_constants(x, a, b, c, d):
  a[...] = x[...] % float("nan")
  b[...] = x[...] % float("inf")
  c[...] = x[...] // float("-inf")
  d[...] = ml.fmod(x[...], float("inf"))


def test_floor_division_by_an_infinite_or_nan_constant():
  """A NaN or infinite constant divisor was MG900 (math.ceil of the steps its magnitude needs)."""
  x = jnp.asarray(np.array([1.5, -2.5, 0.0, -0.0, np.inf, -np.inf, np.nan, 3e38] * 16, np.float32))
  want = (x % jnp.float32(np.nan), x % jnp.float32(np.inf), x // jnp.float32(-np.inf), jnp.fmod(x, jnp.float32(np.inf)))
  for got, w in zip(by_special_constants(x, interpret=True), want):
    _same(got, w)
  assert "mosaic_gpu" in _export(by_special_constants, S(x.shape, F32))


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [F32, F16, BF16], ids=["f32", "f16", "bf16"])
def test_float_floor_division_and_remainder_on_the_gpu(dt):
  # 4096 elements: the kernel holds the array in one CTA's registers, and 65536 of them (512 a thread, each
  # through 14 exact steps) did not finish compiling in the H200 run's 7 minutes
  x, y = _operands(dt, n=1 << 12, seed=3)
  (q, r), (want_q, want_r) = float_divmod(x, y), float_divmod(x, y, interpret=True)
  _same(r, want_r)
  _same(q, want_q)        # bit for bit: the quotient is divided rounded to nearest (div.rn), as XLA does
  for s in (1.3, -0.7, 0.0, 1e-30):
    for got, want in zip(float_divmod_constants(x, s), float_divmod_constants(x, s, interpret=True)):
      _same(got, want)
  i = jnp.arange(-64, 64, dtype=I32)
  for got, want in zip(int_meets_python_float(i), int_meets_python_float(i, interpret=True)):
    _same(got, want)
  xs = jnp.asarray(np.array([1.5, -2.5, 0.0, -0.0, np.inf, -np.inf, np.nan, 3e38] * 16, np.float32))
  for got, want in zip(by_special_constants(xs), by_special_constants(xs, interpret=True)):
    _same(got, want)
  if dt != F32:
    x = jnp.linspace(-4, 4, 128).astype(dt)
    for a in (2.3, -1.1, 0.0, 1e4):
      ad = jnp.asarray(a, dt)
      _same(narrow_scalar_divmod(x, ad), narrow_scalar_divmod(x, ad, interpret=True))


# ---------------------------------------------------------------- run-time break in an unrolled loop
@mg.mgpu_kernel(out_shape=lambda x, n: (S(x.shape[1:], F32), S(x.shape[1:], F32)))
def unrolled_break_kinds(x, n, acc_out, else_out):
  acc = ml.zeros(x.shape[1:], F32)
  for i in ml.static_range(4):
    v = x.at[i][...]
    if ml.sum(acc + v) > n[0].astype(F32):      # on data: a run-time condition
      break
    acc = acc + v
  acc_out[...] = acc
  other = ml.zeros(x.shape[1:], F32)
  for w in (0.5, 1.0, 2.0):                       # a static tuple, with an else
    if w > n[1].astype(F32):
      break
    other = other + x.at[0][...] * w
  else:
    other = other - 1.0
  else_out[...] = other


def _unrolled_break_ref(x, n):
  acc = np.zeros(x.shape[1:], np.float32)
  for i in range(4):
    if np.sum(acc + x[i], dtype=np.float32) > n[0]:
      break
    acc = acc + x[i]
  other = np.zeros(x.shape[1:], np.float32)
  for w in (0.5, 1.0, 2.0):
    if w > n[1]:
      break
    other = other + x[0] * np.float32(w)
  else:
    other = other - 1.0
  return acc, other


def test_a_runtime_break_in_an_unrolled_loop_skips_the_trips_after_it():
  """A break under a run-time condition in ml.static_range (or a loop over a static tuple) was MG001."""
  x = jnp.asarray(np.arange(4 * 128, dtype=np.float32).reshape(4, 128) / 512.0)
  for n in ([-1, 0], [50, 1], [200, 5], [1000, 1.5]):
    nn = jnp.asarray(n, I32)
    for got, want in zip(unrolled_break_kinds(x, nn, interpret=True), _unrolled_break_ref(np.asarray(x), np.asarray(nn))):
      np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
  assert "mosaic_gpu" in _export(unrolled_break_kinds, S(x.shape, F32), S((2,), I32))


@mg.mgpu_kernel(out_shape=lambda x: (S((), I32), S((), F32)))
def where_it_broke(x, first, weight):
  for i in ml.static_range(8):
    if x[i] > 0.0:
      break
  first[...] = i
  for w in (0.5, 1.5, 2.5):
    if x[0] < w:
      break
  weight[...] = w + 0.0


def test_the_loop_variable_after_a_runtime_break_is_where_it_broke():
  """After a run-time break in an unrolled loop the loop variable was the last trip's (7), not the
  trip that broke: it is now a scalar merged from each trip's, as Python leaves it."""
  for xs in ([-1, -2, 3, 4, -5, 6, 7, 8], [-1] * 8, [9] + [1] * 7, [0.7] + [-1] * 7, [2.0] + [-1] * 7):
    x = jnp.asarray(np.array(xs + [0] * 120, np.float32))
    first, weight = where_it_broke(x, interpret=True)
    assert int(first) == next((i for i in range(8) if xs[i] > 0), 7)
    assert float(weight) == next((w for w in (0.5, 1.5, 2.5) if xs[0] < w), 2.5)
  assert "mosaic_gpu" in _export(where_it_broke, S((128,), F32))


@pytest.mark.gpu
def test_a_runtime_break_in_an_unrolled_loop_on_the_gpu():
  x = jnp.asarray(np.arange(4 * 128, dtype=np.float32).reshape(4, 128) / 512.0)
  for n in ([-1, 0], [50, 1], [200, 5], [1000, 1]):
    nn = jnp.asarray(n, I32)
    for got, want in zip(unrolled_break_kinds(x, nn), unrolled_break_kinds(x, nn, interpret=True)):
      np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
  for xs in ([-1, -2, 3, 4, -5, 6, 7, 8], [-1] * 8, [0.7] + [-1] * 7):
    x = jnp.asarray(np.array(xs + [0] * 120, np.float32))
    for got, want in zip(where_it_broke(x), where_it_broke(x, interpret=True)):
      np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


# ---------------------------------------------------------------- register rolls
@mg.mgpu_kernel(out_shape=lambda x, v: (x, x, v, x))
def concatenated_rolls(x, v, by_windows, by_roll, vector, shifted):
  t = x[...]
  by_windows[...] = ml.concatenate([t[:, 3:], t[:, :3]], axis=1) + ml.concatenate([t[1:], t[:1]], axis=0)
  by_roll[...] = ml.roll(t, 5, axis=1) + ml.roll(t, -2)
  w = v[...]
  vector[...] = ml.concatenate([w[7:40], w[40:], w[:7]])
  left = ml.concatenate([ml.zeros((t.shape[0], 1), t.dtype), t[:, :-1]], axis=1)
  right = ml.concatenate([t[:, 2:], ml.full((t.shape[0], 2), -1.0, t.dtype)], axis=1)
  m = t > 0
  shifted[...] = left + right + ml.where(ml.concatenate([m[:, 9:], m[:, :9]], axis=1), 1.0, 0.0).astype(t.dtype)


def _concatenated_rolls_ref(t, w):
  return (jnp.roll(t, -3, 1) + jnp.roll(t, -1, 0), jnp.roll(t, 5, 1) + jnp.roll(t, -2), jnp.roll(w, -7),
          jnp.pad(t, ((0, 0), (1, 0)))[:, :-1] + jnp.concatenate([t[:, 2:], jnp.full((t.shape[0], 2), -1.0, t.dtype)], 1)
          + jnp.where(jnp.roll(t > 0, -9, 1), 1.0, 0.0).astype(t.dtype))


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32), block=128)
def rolled_dot(a, b, out):
  a_s = ml.smem((64, 64))
  b_s = ml.smem((64, 64))
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  out[...] = ml.roll(acc, 3, axis=1) + ml.concatenate([acc[:, 8:], acc[:, :8]], axis=1) + ml.roll(ml.max(acc, axis=1), 1)[:, None]


@mg.mgpu_kernel(out_shape=lambda x: x)
def jnp_roll_of_a_tile(x, out):
  out[...] = jnp.roll(x[...], 3, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def roll_by_program_id(x, out):
  out[...] = ml.roll(x[...], ml.program_id(0), axis=1)


@mg.mgpu_kernel(out_shape=lambda x: (x, x), grid=(2,))
def rolled_ref_windows(x, from_gmem, from_smem):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 32, 32)]
  from_gmem.at[ml.ds(i * 32, 32)][...] = ml.concatenate([v[:, 5:], v[:, :5]], axis=1)
  buf = ml.smem((32, x.shape[1]), x.dtype)
  ml.copy(v, buf)
  from_smem.at[ml.ds(i * 32, 32)][...] = ml.concatenate([buf[:, 3:], buf[:, :3]], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def windows_of_a_buffer_written_between(x, out):
  buf = ml.smem(x.shape, x.dtype)
  ml.copy(x, buf)
  a = buf[:, 3:]
  buf[...] = buf[...] * 2.0
  out[...] = ml.concatenate([a, buf[:, :3]], axis=1)


def test_concatenated_windows_of_one_ref_are_the_ref_read_rolled():
  """ml.concatenate([x[:, 5:], x[:, :5]], axis=1) of a GMEM or SMEM ref was MG204 at x[:, 5:] (whose hint, a
  masked wider window, gave a wrong shape for the concatenation); the ref is read whole and rolled, where
  nothing wrote memory since the windows were read (else the windows stay what they were: MG204 until probe 69b,
  which reads an odd SMEM window through the buffer rows it lies in, so each window is its own read)."""
  t = _tile((64, 128))
  a, b = rolled_ref_windows(t, interpret=True)
  np.testing.assert_array_equal(np.asarray(a), np.asarray(jnp.roll(t, -5, 1)))
  np.testing.assert_array_equal(np.asarray(b), np.asarray(jnp.roll(t, -3, 1)))
  assert "mosaic_gpu" in _export(rolled_ref_windows, S(t.shape, F32))
  got = windows_of_a_buffer_written_between(t, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.concatenate([np.asarray(t)[:, 3:], np.asarray(t)[:, :3] * 2], 1))
  assert "mosaic_gpu" in _export(windows_of_a_buffer_written_between, S(t.shape, F32))


def _tile(shape, dt=F32, seed=0):
  return jnp.asarray(np.random.default_rng(seed).uniform(-8, 8, shape).astype(np.float32)).astype(dt)


@pytest.mark.parametrize("dt", [F32, BF16], ids=["f32", "bf16"])
def test_concatenated_windows_of_one_tensor_are_a_roll(dt):
  """ml.concatenate([v[:, 3:], v[:, :3]], axis=1) was MG204 at v[:, 3:] (a (64, 125) window is no register
  tensor); so were shifts with a constant fill and odd windows of vectors. There was no ml.roll."""
  t, w = _tile((64, 128), dt), _tile((1000,), dt, 1)
  for got, want in zip(concatenated_rolls(t, w, interpret=True), _concatenated_rolls_ref(t, w)):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  assert "mosaic_gpu" in _export(concatenated_rolls, S(t.shape, dt), S(w.shape, dt))


def test_rolls_of_tensor_core_tiles_and_row_statistics():
  a, b = (jnp.asarray(np.random.default_rng(k).integers(-3, 4, (64, 64))).astype(F16) for k in (0, 1))
  acc = jnp.dot(a, b, preferred_element_type=F32)
  want = jnp.roll(acc, 3, 1) + jnp.roll(acc, -8, 1) + jnp.roll(jnp.max(acc, 1), 1)[:, None]
  np.testing.assert_array_equal(np.asarray(rolled_dot(a, b, interpret=True)), np.asarray(want))
  assert "mosaic_gpu" in _export(rolled_dot, S((64, 64), F16), S((64, 64), F16))


def test_jnp_roll_of_a_register_tensor_computes_as_ml_roll():
  t = _tile((64, 128))       # (it was hinted ml.roll; since probe 46i jnp.roll computes as ml.roll)
  np.testing.assert_array_equal(np.asarray(jnp_roll_of_a_tile(t, interpret=True)), np.roll(np.asarray(t), 3, 1))
  # (a run-time shift was MG003, "needs a static int shift"; since probe 57d it is the register gather of the rolled
  # positions: program 0's shift is 0)
  np.testing.assert_array_equal(np.asarray(roll_by_program_id(t, interpret=True)), np.asarray(t))


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [F32, BF16], ids=["f32", "bf16"])
def test_register_rolls_on_the_gpu(dt):
  t, w = _tile((64, 128), dt), _tile((1000,), dt, 1)
  for got, want in zip(concatenated_rolls(t, w), concatenated_rolls(t, w, interpret=True)):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  a, b = (jnp.asarray(np.random.default_rng(k).integers(-3, 4, (64, 64))).astype(F16) for k in (0, 1))
  np.testing.assert_array_equal(np.asarray(rolled_dot(a, b)), np.asarray(rolled_dot(a, b, interpret=True)))
  t = _tile((64, 128))
  for got, want in zip(rolled_ref_windows(t), rolled_ref_windows(t, interpret=True)):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


# ---------------------------------------------------------------- a Python float for an ml.scalar of a bfloat16 kernel
@mg.mgpu_kernel(out_shape=lambda x, a: x)
def bf16_scale(x, a: ml.scalar, out):
  out[...] = x[...] * a


@mg.mgpu_kernel(out_shape=lambda x, a: x)
def bf16_scale_in_float32(x, a: ml.scalar, out):          # bf16_scale's hint, its second form, followed
  out[...] = (x[...].astype(jnp.float32) * a).astype(jnp.bfloat16)


@mg.mgpu_kernel(out_shape=lambda x, a: x)
def bf16_floor_at(x, a: ml.scalar, out):
  out[...] = ml.maximum(x[...], a * 2.0)


@mg.mgpu_kernel(out_shape=lambda x, a: x)
def bf16_floor_at_fixed(x, a: ml.scalar, out):            # bf16_floor_at's hint followed
  out[...] = ml.maximum(x[...], (a * 2.0).astype(jnp.bfloat16))


def test_a_python_float_for_a_bfloat16_kernels_scalar_is_hinted_in_one_step():
  """The hint's second form was 'or compute in float32: x[...].astype(jnp.float32)': followed, the float32
  result's store into the bfloat16 output was the next error (MG102). It now writes the whole expression
  converted back; for a call's operand (ml.maximum) only the scalar's conversion, which is one step."""
  spec = [S((128,), BF16), 0.5]
  expect(bf16_scale, spec, mg.DtypeMismatchError, "x[...] * a",
         "* on x[...] (bfloat16) and a (float32): dtypes differ and are never converted implicitly",
         hint="convert the scalar, a.astype(jnp.bfloat16): the result stays bfloat16, as jnp's does for a Python"
              " number (an ml.scalar is float32 here, as a Python float passed for it becomes, not weakly typed);"
              " or (x[...].astype(jnp.float32) * a).astype(jnp.bfloat16) (computed in float32, the result"
              " converted back to bfloat16)")
  expect(bf16_floor_at, spec, mg.DtypeMismatchError, "ml.maximum(x[...], a * 2.0)",
         "ml.maximum on x[...] (bfloat16) and a * 2.0 (float32): dtypes differ and are never converted implicitly",
         hint="convert the scalar, (a * 2.0).astype(jnp.bfloat16): the result stays bfloat16, as jnp's does for a"
              " Python number (an ml.scalar is float32 here, as a Python float passed for it becomes, not weakly"
              " typed)")
  x = jnp.linspace(-4, 4, 128).astype(BF16)
  np.testing.assert_array_equal(bf16_scale_in_float32(x, 0.3, interpret=True),
                                (x.astype(F32) * jnp.float32(0.3)).astype(BF16))
  np.testing.assert_array_equal(bf16_floor_at_fixed(x, 0.75, interpret=True), jnp.maximum(x, 1.5))


# ---------------------------------------------------------------- ml.fmod: C's remainder, exactly
@mg.mgpu_kernel(out_shape=lambda x, y: (x, x))
def c_remainder(x, y, r, c):
  r[...] = ml.fmod(x[...], y[...])
  c[...] = ml.fmod(x[...], 2.5) if x.dtype != jnp.int32 else ml.fmod(x[...], -3)


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def jnp_fmod(x, y, out):
  out[...] = jnp.fmod(x[...], y[...])


@pytest.mark.parametrize("dt", [F32, F16, BF16, I32], ids=["f32", "f16", "bf16", "i32"])
def test_ml_fmod_is_jnps(dt):
  """There was no ml.fmod (MG002, hinting x - ml.trunc(x / y) * y, exact only below 2**24 quotients)."""
  if dt == I32:
    x = jnp.arange(-128, 128, dtype=I32) * 7
    y = jnp.where(jnp.arange(256) % 2 == 0, 1, -1).astype(I32) * (jnp.arange(256, dtype=I32) % 9 + 1)
    c = jnp.fmod(x, -3)
  else:
    x, y = _operands(dt, n=256, seed=5)
    c = jnp.fmod(x, jnp.asarray(2.5, dt))
  r, cc = c_remainder(x, y, interpret=True)
  _same(r, jnp.fmod(x, y))
  _same(cc, c)
  assert "mosaic_gpu" in _export(c_remainder, S(x.shape, dt), S(y.shape, dt))
  _same(jnp_fmod(x, y, interpret=True), jnp.fmod(x, y))      # jnp.fmod is ml.fmod since probe 46i (it was hinted)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [F32, F16, BF16, I32], ids=["f32", "f16", "bf16", "i32"])
def test_ml_fmod_on_the_gpu(dt):
  if dt == I32:
    x = jnp.arange(-128, 128, dtype=I32) * 7
    y = jnp.where(jnp.arange(256) % 2 == 0, 1, -1).astype(I32) * (jnp.arange(256, dtype=I32) % 9 + 1)
  else:
    x, y = _operands(dt, n=1 << 14, seed=6)
  for got, want in zip(c_remainder(x, y), c_remainder(x, y, interpret=True)):
    _same(got, want)
