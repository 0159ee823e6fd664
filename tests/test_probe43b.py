"""Probe 43b (known debts of numerics, control flow and matmul hints): `c ** t` of a Python number and a
float register value was exp2(t * log2(c)) (3.0 ** 5.0 gave 242.99997, jnp 243; a negative or zero base was
an error): it is XLA's pow (libdevice's powf) as jnp's, in interpret mode and on the GPU."""
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F16, F32, BF16 = jnp.float16, jnp.float32, jnp.bfloat16


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _col_of(text):
  with open(__file__) as f:
    line = next(line for line in f if text in line and "_line_of" not in line and "_col_of" not in line)
  return line.index(text)


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _bits_equal(a, b):
  a, b = np.asarray(a).astype(np.float32), np.asarray(b).astype(np.float32)
  return np.array_equal(a, b, equal_nan=True)


# ---------------------------------------------------------------- c ** t of a Python number c
@mg.mgpu_kernel(out_shape=lambda t: t)
def powers_of_three(t, out):
  out[...] = 3.0 ** t[...]


@mg.mgpu_kernel(out_shape=lambda t: t)
def signed_powers(t, out):
  v = t[...]
  out[...] = (-2.0) ** v + 0.0 ** v + 10.0 ** v


@mg.mgpu_kernel(out_shape=lambda n: S(n.shape, F32))
def int_exponents(n, out):
  out[...] = 2.5 ** n[...] + (-1.5) ** n[...]


def _exponents(dtype):
  t = jnp.tile(jnp.arange(-4, 12, dtype=F32), 8) + jnp.repeat(jnp.array([0, .5, .25, 0, 0, 0, 0, 0], F32), 16)
  return t.at[-1].set(jnp.nan).at[-2].set(jnp.inf).at[-3].set(-jnp.inf).astype(dtype)


def _cpu(f, *args):
  """jnp's result on the CPU (what interpret mode reproduces bit for bit; on a GPU machine jnp's default
  device computes powf with libdevice, an ulp apart)."""
  cpu = jax.devices("cpu")[0]
  with jax.default_device(cpu):
    return f(*(jax.device_put(a, cpu) for a in args))


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_number_base_power_is_jnp_pow(dtype):
  t = _exponents(dtype)
  # 243 at t = 5, not 242.99997
  assert _bits_equal(powers_of_three(t, interpret=True), _cpu(lambda t: 3.0 ** t, t))
  assert _bits_equal(signed_powers(t, interpret=True), _cpu(lambda t: (-2.0) ** t + 0.0 ** t + 10.0 ** t, t))
  assert "math.powf" in _export(powers_of_three, S(t.shape, dtype))


def test_number_base_power_of_int_exponent():
  n = jnp.arange(128, dtype=jnp.int32) % 20 - 5
  assert _bits_equal(int_exponents(n, interpret=True), _cpu(lambda n: 2.5 ** n + (-1.5) ** n, n))


@mg.mgpu_kernel(out_shape=lambda t: t)
def jnp_power_of_number(t, out):
  out[...] = jnp.power(2.5, t[...])


@mg.mgpu_kernel(out_shape=lambda t: t)
def jnp_power_of_number_fixed(t, out):
  out[...] = ml.pow(2.5, t[...])


def test_jnp_power_hint_keeps_its_operands_apart():
  """(The hint, ml.pow(2.5, t[...]), is what jnp.power computes as since probe 46i.)"""
  t = _exponents(F32)
  for kernel in (jnp_power_of_number_fixed, jnp_power_of_number):
    assert _bits_equal(kernel(t, interpret=True), _cpu(lambda t: jnp.power(2.5, t), t))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_number_base_power_gpu(dtype):
  t = _exponents(dtype)
  np.testing.assert_allclose(np.asarray(powers_of_three(t)).astype(np.float32),
                             np.asarray(3.0 ** t).astype(np.float32), rtol=5e-7 if dtype == F32 else 1e-3)
  np.testing.assert_allclose(np.asarray(signed_powers(t)).astype(np.float32),
                             np.asarray((-2.0) ** t + 0.0 ** t + 10.0 ** t).astype(np.float32),
                             rtol=5e-7 if dtype == F32 else 1e-3)
  n = jnp.arange(128, dtype=jnp.int32) % 20 - 5
  np.testing.assert_allclose(np.asarray(int_exponents(n)), np.asarray(2.5 ** n + (-1.5) ** n), rtol=5e-7)


# ---------------------------------------------------------------- 8- and 16-bit index arithmetic
@mg.mgpu_kernel(out_shape=lambda x, s: S((64,), x.dtype))
def narrow_window(x, s, out):
  out[...] = x.at[ml.ds(s[0] * 64, 64)][...]          # the narrow window


@mg.mgpu_kernel(out_shape=lambda x, s: S((64,), x.dtype))
def narrow_window_fixed(x, s, out):
  out[...] = x.at[ml.ds(s[0].astype(jnp.int32) * 64, 64)][...]


@mg.mgpu_kernel(out_shape=lambda x, s: S((1,), x.dtype))
def narrow_loop(x, s, out):
  acc = 0.0
  for i in range(s[0] * 60):                           # the narrow loop
    acc += x[i]
  out[0] = acc


@mg.mgpu_kernel(out_shape=lambda t, ids: S((ids.shape[0], t.shape[1]), t.dtype))
def narrow_gather(t, ids, out):
  out[...] = t[ids[...] * 2, :]                        # the narrow gather


@mg.mgpu_kernel(out_shape=lambda t, ids: S((ids.shape[0], t.shape[1]), t.dtype))
def narrow_gather_fixed(t, ids, out):
  out[...] = t[ids[...].astype(jnp.int32) * 2, :]


@mg.mgpu_kernel(out_shape=lambda x, s: S((1,), x.dtype))
def narrow_element(x, s, out):
  j = s[0] - 1                                         # the narrow element
  out[0] = x[j]


@mg.mgpu_kernel(out_shape=lambda x, s: S((64,), x.dtype))
def narrow_in_range(x, s, out):
  """Arithmetic that stays inside uint8 (s & 3 is 0..3, times 64 at most 192), or data only: jnp's."""
  out[...] = x.at[ml.ds((s[0] & 3) * 64, 64)][...] + (s[0] * 64).astype(jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x, n: S((1,), x.dtype))
def narrow_scalar_bound(x, n: ml.scalar, out):
  acc = 0.0
  for r in range(n, n + 4):                            # the narrow bound
    acc += x[r]
  out[0] = acc


@mg.mgpu_kernel(out_shape=lambda x, s: S((128,), x.dtype))
def narrow_mask(x, s, out):
  n = s[0] * 4                                         # the narrow mask
  out[...] = x.at[ml.ds(0, 128)].load(mask=ml.arange(128) < n.astype(jnp.int32), other=0.0)


@mg.mgpu_kernel(out_shape=lambda x, ids: S((256, x.shape[1]), x.dtype), input_output_aliases={0: 0})
def narrow_atomic(x, ids, out):
  ml.atomic_add(out.at[ids[...] + 1, :], x.at[ml.ds(0, ids.shape[0])][...])     # the narrow atomic


def _narrow_expect(kernel, specs, at, message, hint):
  with pytest.raises(mg.KernelTypeError) as info:
    kernel.check(*specs)
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of(at), _col_of(at)), e
  assert e.message == message, e.message
  assert e.hint == hint, e.hint


@pytest.mark.parametrize("dtype", [jnp.uint8, jnp.int8, jnp.int16])
def test_narrow_index_arithmetic_is_an_error(dtype):
  lo, hi = jnp.iinfo(dtype).min, jnp.iinfo(dtype).max
  name = jnp.dtype(dtype).name
  past = hi * 64                       # (the first end past the dtype's)
  _narrow_expect(narrow_window, [S((1 << 22,), F32), S((1,), dtype)], "s[0] * 64",
                 f"s[0] * 64 is computed in {name} ({lo}..{hi}), where it can reach {past} and wrap (as jnp's {name}"
                 f" arithmetic does), and the window at line {_line_of('the narrow window')} uses it as an index",
                 f"widen it before the arithmetic: s[0].astype(jnp.int32) * 64 (an index in {name} is widened to"
                 " int32 only where it is used, after the arithmetic)")
  x = jnp.arange(1 << 15, dtype=F32)
  s = jnp.array([5], dtype)
  np.testing.assert_array_equal(np.asarray(narrow_window_fixed(x, s, interpret=True)), np.asarray(x[320:384]))
  narrow_window_fixed.check(S(x.shape, F32), S((1,), dtype))


def test_narrow_loop_gather_and_element():
  u8 = jnp.uint8
  _narrow_expect(narrow_loop, [S((1024,), F32), S((1,), u8)], "s[0] * 60",
                 "s[0] * 60 is computed in uint8 (0..255), where it can reach 15300 and wrap (as jnp's uint8"
                 f" arithmetic does), and the loop's bounds at line {_line_of('the narrow loop')} use it as a bound",
                 "widen it before the arithmetic: s[0].astype(jnp.int32) * 60 (an index in uint8 is widened to int32"
                 " only where it is used, after the arithmetic)")
  _narrow_expect(narrow_gather, [S((512, 64), F32), S((128,), u8)], "ids[...] * 2",
                 "ids[...] * 2 is computed in uint8 (0..255), where it can reach 510 and wrap (as jnp's uint8"
                 f" arithmetic does), and the indices at line {_line_of('the narrow gather')} use it as an index",
                 "widen it before the arithmetic: ids[...].astype(jnp.int32) * 2 (an index in uint8 is widened to"
                 " int32 only where it is used, after the arithmetic)")
  _narrow_expect(narrow_element, [S((1024,), F32), S((1,), u8)], "s[0] - 1",
                 "s[0] - 1 is computed in uint8 (0..255), where it can reach -1 and wrap (as jnp's uint8"
                 f" arithmetic does), and the window at line {_line_of('out[0] = x[j]')} uses it as an index",
                 "widen it before the arithmetic: s[0].astype(jnp.int32) - 1 (an index in uint8 is widened to"
                 " int32 only where it is used, after the arithmetic)")
  _narrow_expect(narrow_scalar_bound, [S((1024,), F32), S((), jnp.int8)], "n + 4",
                 "n + 4 is computed in int8 (-128..127), where it can reach 131 and wrap (as jnp's int8"
                 f" arithmetic does), and the loop's bounds at line {_line_of('the narrow bound')} use it as a bound",
                 "widen it before the arithmetic: n.astype(jnp.int32) + 4 (an index in int8 is widened to"
                 " int32 only where it is used, after the arithmetic)")
  _narrow_expect(narrow_mask, [S((1024,), F32), S((1,), u8)], "s[0] * 4",
                 "s[0] * 4 is computed in uint8 (0..255), where it can reach 1020 and wrap (as jnp's uint8"
                 f" arithmetic does), and the mask at line {_line_of('the narrow mask') + 1} uses it as a bound",
                 "widen it before the arithmetic: s[0].astype(jnp.int32) * 4 (an index in uint8 is widened to"
                 " int32 only where it is used, after the arithmetic)")
  _narrow_expect(narrow_atomic, [S((256, 64), F32), S((128,), jnp.int8)], "ids[...] + 1",
                 "ids[...] + 1 is computed in int8 (-128..127), where it can reach 128 and wrap (as jnp's int8"
                 f" arithmetic does), and the indices at line {_line_of('the narrow atomic')} use it as an index",
                 "widen it before the arithmetic: ids[...].astype(jnp.int32) + 1 (an index in int8 is widened to"
                 " int32 only where it is used, after the arithmetic)")
  t = jnp.arange(512 * 64, dtype=F32).reshape(512, 64)
  ids = (jnp.arange(128) * 7 % 256).astype(u8)
  np.testing.assert_array_equal(np.asarray(narrow_gather_fixed(t, ids, interpret=True)),
                                np.asarray(t[ids.astype(jnp.int32) * 2]))
  x = jnp.arange(1024, dtype=F32)
  s = jnp.array([7], u8)
  np.testing.assert_array_equal(np.asarray(narrow_in_range(x, s, interpret=True)),
                                np.asarray(x[192:256] + (s[0] * 64).astype(F32)))
  _export(narrow_gather_fixed, S(t.shape, F32), S(ids.shape, u8))
  _export(narrow_in_range, S(x.shape, F32), S((1,), u8))


@pytest.mark.gpu
def test_narrow_index_fixed_gpu():
  x = jnp.arange(1 << 15, dtype=F32)
  for dtype in (jnp.uint8, jnp.int8, jnp.int16):
    np.testing.assert_array_equal(np.asarray(narrow_window_fixed(x, jnp.array([5], dtype))), np.asarray(x[320:384]))
  t = jnp.arange(512 * 64, dtype=F32).reshape(512, 64)
  ids = (jnp.arange(128) * 7 % 256).astype(jnp.uint8)
  np.testing.assert_array_equal(np.asarray(narrow_gather_fixed(t, ids)), np.asarray(t[ids.astype(jnp.int32) * 2]))
  s = jnp.array([7], jnp.uint8)
  np.testing.assert_array_equal(np.asarray(narrow_in_range(x[:1024], s)),
                                np.asarray(x[192:256] + (s[0] * 64).astype(F32)))


# ---------------------------------------------------------------- JAX's control flow in a kernel
@mg.mgpu_kernel(out_shape=lambda x: x)
def lax_scan_of_indices(x, out):
  def body(c, i):
    return c + x[i], c
  c, ys = jax.lax.scan(body, 0.0, jnp.arange(16))      # the scan of indices
  out[...] = ys


@mg.mgpu_kernel(out_shape=lambda x: x)
def lax_scan_fixed(x, out):
  def body(c, i):
    return c + x[i], c
  carry = 0.0
  for j in range(16):
    carry, y = body(carry, j)
    out[j] = y


@mg.mgpu_kernel(out_shape=lambda x: x)
def lax_scan_of_rows(x, out):
  v = x[...]
  c, ys = jax.lax.scan(lambda c, t: (c * 0.5 + t, c), 0.0, v)
  out[...] = ys


@mg.mgpu_kernel(out_shape=lambda x: x)
def lax_scan_of_rows_fixed(x, out):
  v = x[...]
  carry = 0.0
  for j in ml.static_range(v.shape[0]):
    carry, y = (lambda c, t: (c * 0.5 + t, c))(carry, v[j])
    out[j] = y


@mg.mgpu_kernel(out_shape=lambda x: S((1,), x.dtype))
def lax_fori_of_zeros(x, out):
  acc = jax.lax.fori_loop(0, 16, lambda i, a: a + x[i], jnp.zeros((), jnp.float32))
  out[0] = acc


@mg.mgpu_kernel(out_shape=lambda x: S((1,), x.dtype))
def lax_fori_fixed(x, out):
  acc = 0.0
  for j in range(0, 16):
    acc = (lambda i, a: a + x[i])(j, acc)
  out[0] = acc


def test_lax_control_flow_reported_at_the_call_with_a_hint_that_works():
  spec = S((16,), F32)
  x = jnp.asarray(np.random.default_rng(1).standard_normal(16), F32)
  ref = jax.lax.scan(lambda c, t: (c + t, c), jnp.float32(0), x)[1]
  np.testing.assert_allclose(np.asarray(lax_scan_fixed(x, interpret=True)), np.asarray(ref), rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(np.asarray(lax_scan_of_indices(x, interpret=True)), np.asarray(ref), rtol=1e-6, atol=1e-6)
  ref = jax.lax.scan(lambda c, t: (c * 0.5 + t, c), jnp.float32(0), x)[1]
  np.testing.assert_allclose(np.asarray(lax_scan_of_rows_fixed(x, interpret=True)), np.asarray(ref), rtol=1e-6,
                             atol=1e-6)
  # (jax.lax.scan of a static length runs unrolled, its ys stacked, since probe 49h: it was the hint above)
  np.testing.assert_allclose(np.asarray(lax_scan_of_rows(x, interpret=True)), np.asarray(ref), rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(np.asarray(lax_fori_fixed(x, interpret=True)), np.asarray(x.sum())[None], rtol=1e-5)
  # (jax.lax.fori_loop of a lambda runs as the loop its hint wrote since probe 48h)
  np.testing.assert_allclose(np.asarray(lax_fori_of_zeros(x, interpret=True)), np.asarray(x.sum())[None], rtol=1e-5)
  for k in (lax_scan_fixed, lax_scan_of_rows_fixed, lax_fori_fixed, lax_fori_of_zeros):
    _export(k, spec)


@pytest.mark.gpu
def test_lax_control_flow_fixed_gpu():
  x = jnp.asarray(np.random.default_rng(1).standard_normal(16), F32)
  np.testing.assert_allclose(np.asarray(lax_scan_fixed(x)), np.asarray(jax.lax.scan(lambda c, t: (c + t, c), 0.0, x)[1]),
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(np.asarray(lax_scan_of_rows_fixed(x)),
                             np.asarray(jax.lax.scan(lambda c, t: (c * 0.5 + t, c), 0.0, x)[1]), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(np.asarray(lax_fori_fixed(x)), np.asarray(x.sum())[None], rtol=1e-5)


# ---------------------------------------------------------------- slices of a run-time range
@mg.mgpu_kernel(out_shape=lambda x, n: S((64,), x.dtype))
def sliced_range(x, n: ml.scalar, out, *, a: ml.constexpr, s: ml.constexpr, lo: ml.constexpr = None,
                 hi: ml.constexpr = None, t: ml.constexpr = None):
  out[...] = ml.zeros((64,), jnp.float32)
  c = 0.0
  for i in range(a, n, s)[lo:hi:t]:
    c += 1.0
    out[i] = x[i] + c          # the order counts: c numbers the trips


@mg.mgpu_kernel(out_shape=lambda x, n: S((64,), x.dtype))
def sliced_count(x, n: ml.scalar, out):
  out[...] = ml.zeros((64,), jnp.float32)
  c = 0.0
  for i in range(n)[::2]:
    c += 1.0
    out[i] = x[i] + c


_SLICES = [dict(a=2, s=1, lo=1), dict(a=0, s=1, t=2), dict(a=3, s=3, lo=2, hi=-3, t=3), dict(a=1, s=2, hi=5),
           dict(a=0, s=1, lo=-4), dict(a=2, s=1, t=-2), dict(a=5, s=2, t=-1), dict(a=4, s=3, lo=-5, hi=-1, t=2)]


def _sliced_want(x, n, a, s, lo=None, hi=None, t=None):
  want, c = np.zeros(64, np.float32), 0.0
  for i in range(a, n, s)[lo:hi:t]:
    c += 1
    want[i] = float(x[i]) + c
  return want


@pytest.mark.parametrize("cfg", _SLICES, ids=lambda c: "_".join(f"{k}{v}" for k, v in c.items()))
def test_slice_of_a_run_time_range(cfg):
  x = jnp.arange(64, dtype=F32) * 10
  for n in (0, 1, 5, 17, 37):
    np.testing.assert_array_equal(np.asarray(sliced_range(x, n, **cfg, interpret=True)), _sliced_want(x, n, **cfg))
  _export(sliced_range, S(x.shape, F32), S((), jnp.int32), **cfg)


def test_slice_of_a_one_argument_range():
  x = jnp.arange(64, dtype=F32) * 10
  for n in (0, 1, 6, 37):
    np.testing.assert_array_equal(np.asarray(sliced_count(x, n, interpret=True)), _sliced_want(x, n, 0, 1, t=2))
  _export(sliced_count, S(x.shape, F32), S((), jnp.int32))


@pytest.mark.gpu
def test_slice_of_a_run_time_range_gpu():
  x = jnp.arange(64, dtype=F32) * 10
  for cfg in _SLICES:
    for n in (0, 5, 37):
      np.testing.assert_array_equal(np.asarray(sliced_range(x, n, **cfg)), _sliced_want(x, n, **cfg), err_msg=str(cfg))
  np.testing.assert_array_equal(np.asarray(sliced_count(x, 37)), _sliced_want(x, 37, 0, 1, t=2))


# ---------------------------------------------------------------- a Python int as a loop bound with x64
_X64_BOUND = textwrap.dedent('''
    import sys
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp, numpy as np, mgpu_dsl as mg
    from mgpu_dsl import language as ml

    @mg.mgpu_kernel(out_shape=lambda x, n: jax.ShapeDtypeStruct((1,), x.dtype))
    def bounded(x, n, out):
        acc = 0.0
        for i in range(1, n[...], 2):
            acc += x[i]
        out[0] = acc

    x = jnp.arange(64, dtype=jnp.float32)
    gpu = sys.argv[1:] == ["gpu"]
    eager = bounded(x, 11, interpret=not gpu)
    jitted = jax.jit(lambda x, n: bounded(x, n, interpret=not gpu))(x, 11)
    want = x[1:11:2].sum()
    assert float(eager[0]) == want and float(jitted[0]) == want, (eager, jitted, want)
    print("ok")
''')


def _run_x64(tmp_path, *argv):
  script = tmp_path / "x64_bound.py"
  script.write_text(_X64_BOUND)
  env = dict(os.environ, MGPU_DSL_CACHE_DIR="off")
  if not argv:
    env["JAX_PLATFORMS"] = "cpu"
  r = subprocess.run([sys.executable, str(script), *argv], capture_output=True, text=True, env=env, timeout=300)
  assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


def test_python_int_loop_bound_with_x64(tmp_path):
  """With jax_enable_x64 a Python int for a 0-d input is a weak int64: as a loop bound it was MG006 eagerly
  ('kernel inputs are arrays') and MG003 under jax.jit ('runtime loop bounds must be 32-bit'); it is the loop's
  int32, as jnp keeps a weak int in the other side's type."""
  _run_x64(tmp_path)


@pytest.mark.gpu
def test_python_int_loop_bound_with_x64_gpu(tmp_path):
  _run_x64(tmp_path, "gpu")


# ---------------------------------------------------------------- matmul hints in the user's names
E4 = jnp.float8_e4m3fn


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32))
def fp8_register_a(a, b, out):
  a_s, b_s = ml.smem((64, 64), F16), ml.smem((64, 64), E4)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  out[...] = ml.dot((a_s[...] * 2).astype(E4), b_s.T)


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32))
def fp8_register_a_fixed(a, b, out):
  a_s, b_s = ml.smem((64, 64), F16), ml.smem((64, 64), E4)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  a8_s = ml.smem((64, 64), jnp.float8_e4m3fn)
  a8_s[...] = (a_s[...] * 2).astype(E4)
  out[...] = ml.dot(a8_s, b_s.T)


@mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), jnp.int32))
def int8_n40(a, bt, out):
  a_s, bt_s = ml.smem(a.shape), ml.smem(bt.shape)
  ml.copy(a, a_s)
  ml.copy(bt, bt_s)
  out[...] = ml.dot(a_s, bt_s.T)


@mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), jnp.int32))
def int8_n40_fixed(a, bt, out):
  a_s, bt_s = ml.smem(a.shape), ml.smem((48, bt.shape[1]))
  ml.copy(a, a_s)
  ml.copy(bt.at[ml.ds(0, 48)], bt_s)                   # rows past 40: zeros
  acc = ml.dot(a_s, bt_s.T)
  out[...] = acc[:, :bt.shape[0]]


def _fp8_inputs():
  a = jnp.asarray(np.random.default_rng(3).standard_normal((64, 64)), F16)
  b = jnp.asarray(np.random.default_rng(4).standard_normal((64, 64)), E4)
  return a, b, jnp.dot((a * 2).astype(E4).astype(F32), b.astype(F32).T)


def _int8_inputs():
  a = jnp.asarray(np.random.default_rng(5).integers(-8, 8, (64, 64)), jnp.int8)
  bt = jnp.asarray(np.random.default_rng(6).integers(-8, 8, (40, 64)), jnp.int8)
  return a, bt, a.astype(jnp.int32) @ bt.astype(jnp.int32).T


def test_matmul_hints_in_the_users_words():
  # (an 8-bit register A was this hint's MG106, storing it in SMEM; since probe 46b it computes from registers)
  a, b, want = _fp8_inputs()
  np.testing.assert_allclose(np.asarray(fp8_register_a(a, b, interpret=True)), np.asarray(want), rtol=1e-5, atol=1e-4)
  with pytest.raises(mg.MmaOperandError) as info:
    int8_n40.check(S((64, 64), jnp.int8), S((40, 64), jnp.int8))
  assert info.value.lineno == _line_of("out[...] = ml.dot(a_s, bt_s.T)")
  assert info.value.hint.startswith(
      "pad n to a multiple of 16: a bt_s tile of 48 rows (b is stored (n, k), passed transposed) (a TMA copy past the"
      " array's end fills zeros"), info.value.hint
  a, b, want = _fp8_inputs()
  np.testing.assert_allclose(np.asarray(fp8_register_a_fixed(a, b, interpret=True)), np.asarray(want), rtol=1e-5,
                             atol=1e-4)
  a, bt, want = _int8_inputs()
  np.testing.assert_array_equal(np.asarray(int8_n40_fixed(a, bt, interpret=True)), np.asarray(want))
  _export(fp8_register_a_fixed, S((64, 64), F16), S((64, 64), E4))
  _export(int8_n40_fixed, S((64, 64), jnp.int8), S((40, 64), jnp.int8))


@pytest.mark.gpu
def test_matmul_hints_followed_gpu():
  a, b, want = _fp8_inputs()
  np.testing.assert_allclose(np.asarray(fp8_register_a_fixed(a, b)), np.asarray(want), rtol=1e-3, atol=1e-2)
  np.testing.assert_allclose(np.asarray(fp8_register_a(a, b)), np.asarray(want), rtol=1e-3, atol=1e-2)
  a, bt, want = _int8_inputs()
  np.testing.assert_array_equal(np.asarray(int8_n40_fixed(a, bt)), np.asarray(want))


# ---------------------------------------------------------------- a k loop short of K, through a staged tile
def _staged(k_steps):
  @mg.mgpu_kernel(out_shape=lambda a, b: (S((a.shape[0], b.shape[1]), F32), S((a.shape[0],), F32)),
                  grid=lambda a, b: (a.shape[0] // 64,))
  def staged(a, b, c, rs):
    i = ml.program_id(0)
    rs.at[ml.ds(i * 64, 64)][...] = ml.sum(a.at[ml.ds(i * 64, 64)][...].astype(F32), axis=1)   # all of a's columns
    a_s, b_s = ml.smem((64, 64)), ml.smem((64, b.shape[1]))
    b2 = ml.smem((64, b.shape[1]), F16)
    acc = ml.zeros((64, b.shape[1]), F32)
    for k in range(k_steps(b.shape[0])):
      ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
      ml.copy(b.at[ml.ds(k * 64, 64)], b_s)                                     # the staged b copy
      b2[...] = b_s[...]
      acc = ml.dot(a_s, b2, acc)                                                # the staged dot
    c.at[ml.ds(i * 64, 64)][...] = acc
  return staged


staged_floor, staged_cdiv = _staged(lambda k: k // 64), _staged(lambda k: ml.cdiv(k, 64))


def test_k_tail_followed_through_an_smem_to_smem_copy():
  with pytest.raises(mg.MmaOperandError) as info:
    staged_floor.check(S((128, 200), F16), S((200, 64), F16))
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("the staged b copy"), _col_of("ml.copy(b.at[ml.ds(k * 64, 64)], b_s)"))
  assert e.message == (f"no program reads b[192:200, :], but the ml.dot on line {_line_of('the staged dot')} sums over"
                       " b's 200 rows: the product would leave out the last 8 (a k loop of 200 // 64 = 3 trips stops"
                       " short of the end)")
  assert e.hint.startswith("loop over ml.cdiv(200, 64) steps")
  a = jnp.asarray(np.random.default_rng(7).standard_normal((128, 200)), F16)
  b = jnp.asarray(np.random.default_rng(8).standard_normal((200, 64)), F16)
  c, rs = staged_cdiv(a, b, interpret=True)
  np.testing.assert_allclose(np.asarray(c), np.asarray(jnp.dot(a, b, preferred_element_type=F32)), rtol=2e-3,
                             atol=2e-3)
  np.testing.assert_allclose(np.asarray(rs), np.asarray(a.astype(F32).sum(1)), rtol=1e-4, atol=1e-3)
  _export(staged_cdiv, S(a.shape, F16), S(b.shape, F16))


@pytest.mark.gpu
def test_k_tail_staged_gpu():
  a = jnp.asarray(np.random.default_rng(7).standard_normal((128, 200)), F16)
  b = jnp.asarray(np.random.default_rng(8).standard_normal((200, 64)), F16)
  c, _ = staged_cdiv(a, b)
  np.testing.assert_allclose(np.asarray(c), np.asarray(jnp.dot(a, b, preferred_element_type=F32)), rtol=2e-3,
                             atol=2e-3)


@mg.mgpu_kernel(out_shape=lambda x, n: x)
def count_down_rows(x, n, out):
  for r in range(n[0] - 1, -1, -1):
    out.at[r][...] = x.at[r][...] * 2.0


@pytest.mark.parametrize("dtype,reported", [(jnp.int16, False), (jnp.int8, False), (jnp.uint8, True),
                                            (jnp.uint16, True)], ids=["int16", "int8", "uint8", "uint16"])
def test_a_length_minus_one_wraps_only_unsigned(dtype, reported):
  """A signed length read from memory is taken as non-negative: n[0] - 1 (a count-down loop's start) cannot
  wrap; of an unsigned n it is 255 (65535) at n = 0, and reported."""
  x = jnp.arange(8 * 128, dtype=F32).reshape(8, 128)
  n = jnp.array([0 if reported else 8], dtype)
  if not reported:
    np.testing.assert_array_equal(count_down_rows(x, n, interpret=True), x * 2)
    return
  with pytest.raises(mg.KernelTypeError) as info:
    count_down_rows.check(S((8, 128), F32), S((1,), dtype))
  assert info.value.lineno == _line_of("for r in range(n[0] - 1, -1, -1):")
  assert f"n[0] - 1 is computed in {jnp.dtype(dtype).name}" in str(info.value)
  assert info.value.hint.startswith("widen it before the arithmetic: n[0].astype(jnp.int32) - 1")
