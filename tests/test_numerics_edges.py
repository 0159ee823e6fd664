"""Numerics at the edges: interpret mode computes what the GPU module computes, and both match
jnp where the hardware allows (docs/language.md says where they cannot).

Each class of fix has an interpret-mode test against numpy/jnp, a test of the emitted Mosaic GPU
text where the fix is in the lowering, and a GPU test (marked `gpu`, skipped without one) that
compares the H200 against interpret mode and numpy.
"""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F8 = [jnp.float8_e4m3fn, jnp.float8_e5m2]
NARROW_INTS = [jnp.int8, jnp.uint8, jnp.int16, jnp.uint16]
INTS = NARROW_INTS + [jnp.int32, jnp.uint32]

# Values that cross every integer type's range, both signs, NaN and the infinities.
EDGE = np.array([0.0, 0.5, -0.5, 1.9, -1.9, 126.9, 127.0, 127.9, 128.0, 200.0, 255.0, 255.9, 256.0,
                 300.0, -128.0, -129.0, -200.0, -1.0, -0.9, 32767.0, 32768.0, 40000.0, -40000.0,
                 65535.5, 65536.0, 70000.0, 3e9, -3e9, 5e9, 1e10, 2147483520.0, -2147483648.0,
                 4294967040.0, np.nan, np.inf, -np.inf], np.float32)


def _edge_input(n=256, src=jnp.float32):
  x = np.zeros(n, np.float32)
  x[:len(EDGE)] = EDGE
  x[len(EDGE):] = np.random.default_rng(0).normal(size=n - len(EDGE)).astype(np.float32) * 3e4
  return jnp.asarray(x).astype(src)


def int_ref(x, dt):
  """float -> int as PTX cvt.rzi: truncate toward zero, saturate, NaN -> 0 (jnp on CPU agrees)."""
  info = np.iinfo(dt)
  f = np.trunc(np.asarray(x).astype(np.float64))
  r = np.where(np.isnan(f), 0, np.clip(np.nan_to_num(f, posinf=info.max, neginf=info.min), info.min, info.max))
  return r.astype(dt)


def f8_ref(x, dt):
  """float -> float8 as jnp: past the range (and +-inf) NaN in float8_e4m3fn, +-inf in float8_e5m2
  (since probe 50e; the GPU's cvt.rn.satfinite saturates, and the kernel selects jnp's values)."""
  with np.errstate(over="ignore"):
    return np.asarray(x).astype(np.float32).astype(dt)


def same(got, want):
  """Equal elementwise, NaN matching NaN, compared as float64 (exact for every dtype here)."""
  g, w = np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64)
  bad = ~((g == w) | (np.isnan(g) & np.isnan(w)))
  assert not bad.any(), f"differ at {np.flatnonzero(bad)[:8]}: got {g[bad][:8]}, want {w[bad][:8]}"


def _out_like(x, *, dt):
  return S(x.shape, dt)


def _out16(x, *, dt):
  return S((16,), dt)


@mg.mgpu_kernel(out_shape=_out_like)
def cast_t(x, out, *, dt: ml.constexpr):
  out[...] = x[...].astype(dt)


@mg.mgpu_kernel(out_shape=_out16)
def cast_s(x, out, *, dt: ml.constexpr):
  for i in ml.static_range(16):
    out[i] = x[i].astype(dt)


# ------------------------------------------------------------------ 1. float -> float8 as jnp
def fp8_edge_input(n, src):
  """16 values at float8's edges (overflow, inf, NaN, subnormals, -0.0), then random ones."""
  big = np.array([1000.0, 500.0, 464.0, 448.0, 70000.0, 61440.0, 57344.0, -1e4, np.inf, -np.inf, np.nan,
                  2.0 ** -10, 2.0 ** -17, -0.0, 1.0, -460.0], np.float32)
  x = np.zeros(n, np.float32)
  x[:16] = big
  x[16:] = np.random.default_rng(1).normal(size=n - 16).astype(np.float32) * 500
  return jnp.asarray(x).astype(src)


@pytest.mark.parametrize("dt", F8, ids=lambda d: jnp.dtype(d).name)
@pytest.mark.parametrize("src", [jnp.float32, jnp.float16, jnp.bfloat16], ids=lambda d: jnp.dtype(d).name)
def test_fp8_cast_matches_jnp_past_the_range(src, dt):
  x = fp8_edge_input(256, src)
  want = f8_ref(np.asarray(x).astype(np.float32), dt)
  same(cast_t(x, dt=dt, interpret=True), want)
  same(cast_t(x, dt=dt, interpret=True), x.astype(dt))
  got = np.asarray(cast_t(x, dt=dt, interpret=True)).astype(np.float32)
  assert (np.isnan(got[8]) if dt == jnp.float8_e4m3fn else got[8] == np.inf) and np.isnan(got[10])


@pytest.mark.parametrize("dt", F8, ids=lambda d: jnp.dtype(d).name)
def test_fp8_lowering_saturates_tensors(dt):
  spec = S((256,), jnp.float32)
  name = {jnp.float8_e4m3fn: "e4m3", jnp.float8_e5m2: "e5m2"}[dt]
  assert f"cvt.rn.satfinite.{name}x2.f32" in cast_t.mlir(spec, dt=dt)


@pytest.mark.parametrize("dt", F8, ids=lambda d: jnp.dtype(d).name)
def test_scalar_fp8_casts_are_rejected_at_the_users_line(dt):
  # On the H200 a scalar arith.truncf to an 8-bit float failed the pass pipeline (a raw
  # "Pass pipeline failed" at the call): now an UnsupportedDtypeError where the cast is written.
  e = expect(cast_s, [S((256,), jnp.float32)], mg.UnsupportedDtypeError, "x[i].astype(dt)",
             f"cannot cast x[i] from float32 to {jnp.dtype(dt).name}: scalars cannot be converted"
             f" to 8-bit floats on the GPU", dt=dt)
  assert "x.at[ml.ds(i, 128)][...]" in e.hint


# ------------------------------------------------------------------ 2. float -> integer saturates
@pytest.mark.parametrize("dt", INTS, ids=lambda d: jnp.dtype(d).name)
@pytest.mark.parametrize("src", [jnp.float32, jnp.float16, jnp.bfloat16], ids=lambda d: jnp.dtype(d).name)
def test_float_to_int_truncates_and_saturates(src, dt):
  x = _edge_input(src=src)
  want = int_ref(np.asarray(x).astype(np.float32), np.dtype(dt))
  same(cast_t(x, dt=dt, interpret=True), want)
  same(cast_s(x, dt=dt, interpret=True), want[:16])
  same(want, np.asarray(x.astype(dt)))        # jnp (CPU) agrees


@pytest.mark.parametrize("dt", NARROW_INTS, ids=lambda d: jnp.dtype(d).name)
@pytest.mark.parametrize("src", [jnp.float32, jnp.bfloat16], ids=lambda d: jnp.dtype(d).name)
def test_float_to_narrow_int_lowering_clamps_first(src, dt):
  """NVPTX converts float -> i8 through a 16-bit cvt and a truncation (200.0 -> -56): the
  module clamps to the target's range in float32, NaN selected to 0 first."""
  info = np.iinfo(dt)
  spec = S((256,), src)
  text = cast_t.mlir(spec, dt=dt)
  bits = np.dtype(dt).itemsize * 8
  conv = "fptosi" if info.min < 0 else "fptoui"
  line = next(l for l in text.splitlines() if f"arith.{conv}" in l)
  assert f"vector<1xf32> to vector<1xi{bits}>" in line or "f32> to vector<" in line, line
  before = text[:text.index(line)]
  assert "max.NaN.f32" in before and "min.NaN.f32" in before
  assert f"arith.constant {float(info.min):e} : f32" in before
  assert f"arith.constant {float(info.max):e} : f32" in before
  stext = cast_s.mlir(spec, dt=dt)
  assert f"arith.constant {float(info.max):e} : f32" in stext and "arith.minimumf" in stext


def test_float_to_int32_selects_nan_and_clamps_too():
  """cvt.rzi.s32.f32 saturates and makes NaN 0, but LLVM's fptosi of NaN or of a value out of
  range is poison (folded where the value is known), so the module selects NaN to 0 and clamps
  first, as for 8 and 16 bits (tests/test_probe29c.py checks every conversion of a module)."""
  text = cast_t.mlir(S((256,), jnp.float32), dt=jnp.int32)
  assert "max.NaN.f32" in text and "arith.cmpf une" in text and "arith.fptosi" in text


# ------------------------------------------------------------------ 3. Python float -> int constant
def _fill_out(x, *, v, dt):
  return S((128,), dt)


@mg.mgpu_kernel(out_shape=_fill_out)
def fill(x, out, *, v: ml.constexpr, dt: ml.constexpr):
  out[...] = ml.full((128,), v, dt)


@pytest.mark.parametrize("v,dt", [(1e10, jnp.int32), (-3e9, jnp.int32), (float("nan"), jnp.int32),
                                  (float("inf"), jnp.int32), (float("-inf"), jnp.int32), (2.7, jnp.int32),
                                  (-2.7, jnp.int32), (300.0, jnp.int16), (-1.5, jnp.uint32), (5e9, jnp.uint32),
                                  (1e5, jnp.uint16)], ids=str)
def test_full_of_a_float_converts_as_a_cast(v, dt):
  x = jnp.zeros(1, jnp.int32)
  got = np.asarray(fill(x, v=v, dt=dt, interpret=True))
  want = np.asarray(jnp.full((128,), v, dt))
  same(got, want)
  same(got, int_ref(np.full(128, v), np.dtype(dt)))
  text = fill.mlir(x, v=v, dt=dt)
  bits = np.dtype(dt).itemsize * 8
  c = int(want[0]) if np.dtype(dt).kind == "i" or want[0] < 2 ** (bits - 1) else int(want[0]) - 2 ** bits
  assert re.search(rf"arith.constant {c} : i{bits}", text), c


# ------------------------------------------------------------------ 4. sums of narrow integers
@mg.mgpu_kernel(out_shape=lambda x: (S((2,), jnp.int32 if jnp.dtype(x.dtype).kind == "i" else jnp.uint32),
                                     S((x.shape[0],), jnp.int32 if jnp.dtype(x.dtype).kind == "i" else jnp.uint32),
                                     S((x.shape[0],), x.dtype)))
def narrow_sum(x, total, rows, rmax):
  v = x[...]
  total[0] = ml.sum(v)                 # stored without a cast: the sum is int32 / uint32
  total[1] = v.sum()
  rows[...] = ml.sum(v, axis=1)
  rmax[...] = ml.max(v.astype(jnp.int32), axis=1).astype(x.dtype)


@pytest.mark.parametrize("dt", NARROW_INTS, ids=lambda d: jnp.dtype(d).name)
def test_sum_of_narrow_ints_is_int32_as_jnp(dt):
  info = np.iinfo(dt)
  x = np.random.default_rng(2).integers(info.min, info.max, (8, 128), endpoint=True).astype(dt)
  x[0, :] = info.max                   # 128 * max overflows 16 bits
  total, rows, rmax = narrow_sum(jnp.asarray(x), interpret=True)
  want = jnp.sum(jnp.asarray(x))
  assert total.dtype == want.dtype
  same(total, [want, want])
  same(rows, jnp.sum(jnp.asarray(x), axis=1))
  same(rmax, x.max(axis=1))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def row_max16(x, out):
  out[...] = ml.max(x[...], axis=1)     # max and min keep the dtype


def test_max_of_int16_keeps_its_dtype():
  x = np.random.default_rng(3).integers(-30000, 30000, (8, 128)).astype(np.int16)
  same(row_max16(jnp.asarray(x), interpret=True), x.max(axis=1))


def test_sum_of_int16_lowers_as_an_int32_reduction():
  text = narrow_sum.mlir(S((8, 128), jnp.int16))
  assert "arith.extsi" in text and re.search(r"arith.addi .* : (vector<\d+x)?i32", text)


# ------------------------------------------------------------------ 5. approximate ops flush subnormals
@mg.mgpu_kernel(out_shape=lambda x: x)
def exp2_approx(x, out):
  out[...] = ml.exp2(x[...], approx=True)


def test_exp2_approx_flushes_subnormals_as_ftz():
  x = np.zeros(128, np.float32)
  x[:8] = [-126.5, -140.0, -149.0, -150.0, 1e-40, -1e-40, -126.0, -125.0]
  got = np.asarray(exp2_approx(jnp.asarray(x), interpret=True))
  np.testing.assert_array_equal(got[:4], 0.0)           # subnormal results: 0 (exact exp2 keeps them)
  assert got[4] == 1.0 and got[5] == 1.0                 # subnormal inputs read as 0
  assert got[6] == np.float32(2.0 ** -126) and got[7] == np.float32(2.0 ** -125)
  assert "ex2.approx.ftz.f32" in exp2_approx.mlir(S((128,), jnp.float32))


# ------------------------------------------------------------------ 6. Python types as dtypes
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, jnp.int32), S(x.shape, jnp.float32), S(x.shape, jnp.int32),
                                     S(x.shape, jnp.float32)))
def py_types(x, a, b, c, d):
  a[...] = x[...].astype(int) + 1
  b[...] = ml.cast(x[...], float) * 2
  c[...] = ml.arange(x.shape[0], dtype=int) + ml.full(x.shape, 3, int)
  d[...] = ml.zeros(x.shape, float) + 1.5


def test_python_int_float_are_int32_float32_as_jnp():
  x = jnp.linspace(-3, 3, 128, dtype=jnp.float32)
  a, b, c, d = py_types(x, interpret=True)
  assert x.astype(int).dtype == a.dtype and x.astype(float).dtype == b.dtype
  same(a, x.astype(int) + 1)
  same(b, x.astype(float) * 2)
  same(c, jnp.arange(128) + 3)
  same(d, jnp.full(128, 1.5))


# ------------------------------------------------------------------ 7. messages and the new ops
@mg.mgpu_kernel(out_shape=lambda x: S((8,), jnp.int32))
def argmax8(x, out):
  out[...] = ml.argmax(x[...], axis=1)


def test_argmax_of_int8_compares_in_32_bits():
  """Was MG106 ('ml.argmax of int8 values is not supported'); test_probe17.py has the others."""
  x = (jnp.arange(8 * 128, dtype=jnp.int32).reshape(8, 128) * 37 % 251 - 125).astype(jnp.int8)
  np.testing.assert_array_equal(argmax8(x, interpret=True), jnp.argmax(x, axis=1))


def _missing(name):
  src = f"""
import jax, jax.numpy as jnp
import mgpu_dsl as mg
from mgpu_dsl import language as ml

@mg.mgpu_kernel(out_shape=lambda x: x)
def k(x, out):
  out[...] = ml.{name}(x[...])
"""
  return src


@pytest.mark.parametrize("name,needle", [("log10", "jnp.log10(x[...])"),     # (log1p, expm1
                                         ("exp10", "ml.libdevice.exp10(x[...])")])     # and pow: probe 29a)
def test_missing_math_names_say_what_to_write(tmp_path, name, needle):
  import importlib.util
  import sys
  p = tmp_path / f"k_{name}.py"
  p.write_text(_missing(name))
  spec = importlib.util.spec_from_file_location(f"k_{name}", p)
  mod = importlib.util.module_from_spec(spec)
  sys.modules[spec.name] = mod
  spec.loader.exec_module(mod)
  with pytest.raises(mg.KernelError) as e:
    mod.k.check(S((128,), jnp.float32))
  assert needle in e.value.hint and "did you mean" not in e.value.hint


@mg.mgpu_kernel(out_shape=lambda x: (x, x, x, x, x, S(x.shape, jnp.int8)))
def rounding(x, fl, ce, tr, ro, cl, na):
  v = x[...]
  fl[...] = ml.floor(v)
  ce[...] = ml.ceil(v)
  tr[...] = ml.trunc(v)
  ro[...] = ml.round(v)
  cl[...] = ml.clip(v, -2.0, 2.5)
  na[...] = ml.isnan(v).astype(jnp.int8)


@mg.mgpu_kernel(out_shape=lambda x: (S((8,), x.dtype), S((8,), x.dtype), S((8,), x.dtype), S((8,), x.dtype)))
def rounding_s(x, fl, ce, tr, ro):
  for i in ml.static_range(8):
    v = x[i]
    fl[i] = ml.floor(v)
    ce[i] = ml.ceil(v)
    tr[i] = ml.trunc(v)
    ro[i] = ml.round(v)


ROUND_VALS = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, -2.6, 0.0, -0.0, 3.0, 1e8 + 0.0, np.inf, -np.inf,
                       np.nan, -0.3], np.float32)


def _round_input(dt):
  x = np.zeros(256, np.float32)
  x[:16] = ROUND_VALS
  x[16:] = np.random.default_rng(4).normal(size=240).astype(np.float32) * 10
  return jnp.asarray(x).astype(dt)


@pytest.mark.parametrize("dt", [jnp.float32, jnp.float16, jnp.bfloat16], ids=lambda d: jnp.dtype(d).name)
def test_floor_ceil_trunc_round_clip_isnan_match_jnp(dt):
  x = _round_input(dt)
  fl, ce, tr, ro, cl, na = rounding(x, interpret=True)
  same(fl, jnp.floor(x))
  same(ce, jnp.ceil(x))
  same(tr, jnp.trunc(x))
  same(ro, jnp.round(x))                 # halves to even
  same(cl, jnp.clip(x, -2.0, 2.5))
  same(na, jnp.isnan(x).astype(jnp.int8))
  assert np.signbit(np.asarray(ro, np.float32)[3])      # round(-0.5) is -0.0, as jnp
  s = rounding_s(x, interpret=True)
  for got, fn in zip(s, (jnp.floor, jnp.ceil, jnp.trunc, jnp.round)):
    same(got, fn(x[:8]))


def test_rounding_ops_lower_to_math_ops():
  text = rounding.mlir(S((256,), jnp.float32))
  for op in ("math.floor", "math.ceil", "math.trunc", "math.roundeven"):
    assert op in text, op
  assert "math.round " not in text            # half away from zero is not jnp.round
  stext = rounding_s.mlir(S((256,), jnp.float32))
  assert "math.roundeven" in stext and "math.floor" in stext


@mg.mgpu_kernel(out_shape=lambda x: (x, x))
def int_rounding(x, a, b):
  a[...] = ml.round(x[...]) + ml.floor(x[...])
  b[...] = ml.clip(x[...], max=5)


def test_rounding_integers_is_the_identity_as_jnp():
  x = jnp.arange(-64, 64, dtype=jnp.int32)
  a, b = int_rounding(x, interpret=True)
  same(a, jnp.round(x) + jnp.floor(x))
  same(b, jnp.clip(x, max=5))


def _mean_dtype(x):
  return jnp.float32 if jnp.dtype(x.dtype).kind in "iu" else x.dtype


@mg.mgpu_kernel(out_shape=lambda x: (S((1,), _mean_dtype(x)), S((x.shape[0],), _mean_dtype(x)),
                                     S((1, x.shape[1]), _mean_dtype(x))))
def means(x, m, rows, cols):
  v = x[...]
  m[0] = ml.mean(v)
  rows[...] = ml.mean(v, axis=1)
  cols[...] = v.mean(axis=0, keepdims=True)


@pytest.mark.parametrize("dt", [jnp.float32, jnp.bfloat16, jnp.int16, jnp.int32], ids=lambda d: jnp.dtype(d).name)
def test_mean_matches_jnp(dt):
  x = (rand.normal(rand.key(5), (8, 128)) * 100).astype(dt)
  m, rows, cols = means(x, interpret=True)
  tol = 1e-2 if dt == jnp.bfloat16 else 1e-6
  np.testing.assert_allclose(np.asarray(m, np.float32)[0], np.asarray(jnp.mean(x), np.float32), rtol=tol)
  np.testing.assert_allclose(np.asarray(rows, np.float32), np.asarray(jnp.mean(x, axis=1), np.float32), rtol=tol)
  np.testing.assert_allclose(np.asarray(cols, np.float32), np.asarray(jnp.mean(x, axis=0, keepdims=True),
                                                                        np.float32), rtol=tol, atol=tol)
  assert rows.dtype == jnp.mean(x, axis=1).dtype


# ------------------------------------------------------------------ on the H200
def _gpu(k, *args, **kw):
  return jax.jit(lambda *a: k(*a, **kw))(*args)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", F8, ids=lambda d: jnp.dtype(d).name)
@pytest.mark.parametrize("src", [jnp.float32, jnp.float16, jnp.bfloat16], ids=lambda d: jnp.dtype(d).name)
def test_gpu_fp8_cast_as_jnp(src, dt):
  x = fp8_edge_input(4096, src)
  want = f8_ref(np.asarray(x).astype(np.float32), dt)
  got = _gpu(cast_t, x, dt=dt)
  same(got, want)
  same(got, cast_t(x, dt=dt, interpret=True))


@pytest.mark.gpu
@pytest.mark.parametrize("dt", INTS, ids=lambda d: jnp.dtype(d).name)
@pytest.mark.parametrize("src", [jnp.float32, jnp.float16, jnp.bfloat16], ids=lambda d: jnp.dtype(d).name)
def test_gpu_float_to_int_saturation(src, dt):
  x = _edge_input(4096, src)
  want = int_ref(np.asarray(x).astype(np.float32), np.dtype(dt))
  for k, w in ((cast_t, want), (cast_s, want[:16])):
    got = _gpu(k, x, dt=dt)
    same(got, w)
    same(got, k(x, dt=dt, interpret=True))


def nearest_even(x, dt):
  """int32s rounded once to the nearest `dt` (16-bit floats: every finite value enumerated; ties to
  the even bit pattern; past the largest, inf), independent of how numpy or jnp convert."""
  dt = np.dtype(dt)
  if dt.itemsize == 4:
    return x.astype(np.float64).astype(dt)             # float32 rounds int32 once (numpy)
  vals = np.arange(2 ** 16, dtype=np.uint16).view(dt)
  with np.errstate(invalid="ignore"):
    ok = np.isfinite(vals.astype(np.float64))
  bits, f = np.arange(2 ** 16)[ok], vals[ok].astype(np.float64)
  order = np.argsort(f, kind="stable")
  bits, f = bits[order], f[order]
  keep = np.concatenate([[True], f[1:] != f[:-1]])        # -0.0 and +0.0: one
  bits, f = bits[keep], f[keep]
  v = x.astype(np.float64)
  hi = np.clip(np.searchsorted(f, v), 1, len(f) - 1)
  lo = hi - 1
  dlo, dhi = v - f[lo], f[hi] - v
  pick = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(bits[lo] % 2 == 0, lo, hi)))
  out = f[pick]
  top = f[-1] + (f[-1] - f[-2]) / 2                        # halfway to the next power: rounds to inf
  out = np.where(v >= top, np.inf, np.where(v <= -top, -np.inf, out))
  return out.astype(dt)


def test_int_to_16bit_float_rounds_once_to_nearest_even():
  x = np.zeros(256, np.int32)
  x[:10] = [16842753, -16842753, 2 ** 30 + 2 ** 22 + 1, 2 ** 31 - 1, -2 ** 31, 65504, 65519, 65520, 3, 0]
  for dt in (jnp.bfloat16, jnp.float16):
    same(cast_t(jnp.asarray(x), dt=dt, interpret=True), nearest_even(x, dt))
  assert float(nearest_even(np.array([16842753], np.int32), jnp.bfloat16)[0]) == 16908288.0   # not 16777216


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [jnp.bfloat16, jnp.float16, jnp.float32], ids=lambda d: jnp.dtype(d).name)
def test_gpu_int32_to_float_rounding_of_large_ints(dt):
  """Large int32s (not exact in the target) round once, to nearest even (the H200's cvt.rn;
  numpy's and XLA's CPU conversion to bfloat16 round twice, through float32)."""
  rng = np.random.default_rng(6)
  x = np.concatenate([np.array([2 ** 24 + 1, 2 ** 24 + 3, 2 ** 31 - 1, -2 ** 31, 16777217, 33554435, 257, 259,
                                65521, 2 ** 30 + 2 ** 22 + 1, -(2 ** 30 + 2 ** 22 + 1), 0], np.int64),
                      rng.integers(-2 ** 31, 2 ** 31 - 1, 4084)]).astype(np.int32)
  x = jnp.asarray(x)
  want = nearest_even(np.asarray(x), dt)
  for k, w in ((cast_t, want), (cast_s, want[:16])):
    got = _gpu(k, x, dt=dt)
    same(got, w)
    same(got, k(x, dt=dt, interpret=True))


@pytest.mark.gpu
def test_gpu_exp2_approx_flushes_subnormals():
  x = np.zeros(4096, np.float32)
  x[:8] = [-126.5, -140.0, -149.0, -150.0, 1e-40, -1e-40, -126.0, -125.0]
  x[8:] = np.random.default_rng(7).uniform(-150, 128, 4088).astype(np.float32)
  x = jnp.asarray(x)
  got = np.asarray(_gpu(exp2_approx, x)).astype(np.float64)
  interp = np.asarray(exp2_approx(x, interpret=True)).astype(np.float64)
  sub = (interp == 0) & (np.exp2(np.asarray(x, np.float64)) != 0)
  assert np.all(got[sub] == 0)                  # the flushed results: exactly 0 on both
  ok = ~sub
  np.testing.assert_allclose(got[ok], interp[ok], rtol=4 * 2.0 ** -23)     # ex2.approx: about 2 ulp


@pytest.mark.gpu
@pytest.mark.parametrize("dt", NARROW_INTS, ids=lambda d: jnp.dtype(d).name)
def test_gpu_narrow_int_sums(dt):
  info = np.iinfo(dt)
  x = np.random.default_rng(2).integers(info.min, info.max, (8, 128), endpoint=True).astype(dt)
  x[0, :] = info.max
  x = jnp.asarray(x)
  got = _gpu(narrow_sum, x)
  for g, i in zip(got, narrow_sum(x, interpret=True)):
    same(g, i)
  same(got[0], [jnp.sum(x)] * 2)
  same(got[1], jnp.sum(x, axis=1))


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [jnp.float32, jnp.float16, jnp.bfloat16], ids=lambda d: jnp.dtype(d).name)
def test_gpu_rounding_ops(dt):
  x = _round_input(dt)
  for g, i in zip(_gpu(rounding, x), rounding(x, interpret=True)):
    same(g, i)
  for g, i in zip(_gpu(rounding_s, x), rounding_s(x, interpret=True)):
    same(g, i)


@mg.mgpu_kernel(out_shape=lambda x, y: jax.ShapeDtypeStruct(x.shape, jnp.float32))
def jnp_float_promotion(x, y, out):
  """As jnp: an int meeting a Python float, and true division of ints, compute in float32."""
  out[...] = x[...] * 1.5 + x[...] / y[...] + ml.maximum(x[...], 0.5) + x[...] / 3 + (x[...] + 1.0)


@pytest.mark.parametrize("dtype", [jnp.int8, jnp.int32, jnp.uint32])
def test_ints_meeting_python_floats_and_true_division_are_float32_as_jnp(dtype):
  x = jnp.arange(1, 129).astype(dtype)
  y = jnp.full((128,), 7, dtype)
  want = x * 1.5 + x / y + jnp.maximum(x, 0.5) + x / 3 + (x + 1.0)
  assert want.dtype == jnp.float32
  got = jnp_float_promotion(x, y, interpret=True)
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
  specs = [jax.ShapeDtypeStruct(x.shape, x.dtype)] * 2
  jnp_float_promotion.check(*specs)
  assert "cast" in jnp_float_promotion.typed_ir(*specs)


@mg.mgpu_kernel(out_shape=lambda x: x)
def float_floor_div(x, out):
  out[...] = x[...] // 2.0


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct(x.shape, jnp.int32))
def bool_plus_one(x, out):
  out[...] = (x[...] != 0) + 1


def test_float_floor_division_and_bool_arithmetic_hint_what_works():
  x = jnp.linspace(-9.0, 9.0, 128, dtype=jnp.float32)      # float //: jnp's (it was MG106)
  np.testing.assert_array_equal(float_floor_div(x, interpret=True), x // 2.0)
  x = jnp.arange(128, dtype=jnp.int32) % 3          # a boolean and a Python int: int32, as jnp
  np.testing.assert_array_equal(bool_plus_one(x, interpret=True), (x != 0) + 1)


# Loop bounds near 2**31: the counter steps past the last index before the loop ends.
@mg.mgpu_kernel(out_shape=lambda x, b, c: S((8, 128), jnp.float32))
def range_sum(x, b: ml.scalar, c: ml.scalar, out):
  acc = ml.zeros((8, 128), jnp.float32)
  for k in ml.range(b, 2147483647, c):
    acc = acc + x.at[ml.ds((k % 8) * 8, 8)][...]
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, b, c: S((8, 128), jnp.float32))
def range_sum_pipelined(x, b: ml.scalar, c: ml.scalar, out):
  buf = ml.smem((8, 128))
  acc = ml.zeros((8, 128), jnp.float32)
  for k in ml.range(b, 2147483647, c, stages=2):
    ml.copy(x.at[ml.ds((k % 8) * 8, 8)], buf)
    acc = acc + buf[...]
  out[...] = acc


BOUNDS = [(0, 1073741824), (-2147483647, 1073741824), (-2147483648, 2147483647), (2147483600, 40),
          (2147483647, 1), (2147483640, 3)]


def _range_ref(x, b, c):
  xs = np.asarray(x).reshape(8, 8, 128)
  return sum((xs[k % 8] for k in range(b, 2147483647, c)), np.zeros((8, 128), np.float32))


@pytest.mark.parametrize("kernel", [range_sum, range_sum_pipelined], ids=["plain", "pipelined"])
def test_loop_bounds_whose_span_passes_int32_count_as_python(kernel):
  x = rand.normal(rand.key(0), (64, 128), jnp.float32)
  for b, c in BOUNDS:
    np.testing.assert_allclose(kernel(x, b, c, interpret=True), _range_ref(x, b, c), rtol=1e-6,
                               err_msg=str((b, c)))


def test_loops_with_run_time_bounds_count_in_64_bits():
  specs = (S((64, 128), jnp.float32), S((), jnp.int32), S((), jnp.int32))
  for kernel in (range_sum, range_sum_pipelined):
    text = kernel.mlir(*specs)
    assert re.search(r"scf\.for %\S+ = %\S+ to %\S+ step %\S+ ?: i64", text) or \
        re.search(r"scf\.for .*\n?.*i64", text), kernel.__name__
    assert "arith.trunci" in text


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", [range_sum, range_sum_pipelined], ids=["plain", "pipelined"])
def test_gpu_loop_bounds_whose_span_passes_int32(kernel):
  x = rand.normal(rand.key(0), (64, 128), jnp.float32)
  for b, c in BOUNDS:
    np.testing.assert_allclose(kernel(x, b, c), _range_ref(x, b, c), rtol=1e-6, err_msg=str((b, c)))


@mg.mgpu_kernel(out_shape=lambda x, c: S((8, 128), jnp.float32))
def range_sum_static_span(x, c: ml.scalar, out):
  buf = ml.smem((8, 128))
  acc = ml.zeros((8, 128), jnp.float32)
  for k in ml.range(-2147483647, 2147483647, c, stages=2):     # only the step is a run-time value
    ml.copy(x.at[ml.ds((k % 8) * 8, 8)], buf)
    acc = acc + buf[...]
  out[...] = acc


def test_pipelined_loop_with_static_bounds_and_a_run_time_step_counts_as_python():
  x = rand.normal(rand.key(0), (64, 128), jnp.float32)
  xs = np.asarray(x).reshape(8, 8, 128)
  for c in (1073741824, 2147483647):
    want = sum((xs[k % 8] for k in range(-2147483647, 2147483647, c)), np.zeros((8, 128), np.float32))
    np.testing.assert_allclose(range_sum_static_span(x, c, interpret=True), want, rtol=1e-6)
