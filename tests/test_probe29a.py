"""Probe 29a (Triton tutorial ports, round two): tutorial 07's libdevice math. asin, acos, atan,
atan2, tan, cbrt, expm1, log1p, pow, isinf and isfinite were missing (MG002 with a formula
or 'write a polynomial approximation'); `x ** y` of register values and `x ** 1.5` were MG001."""
import math

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


UNARY = {"asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "tan": np.tan, "cbrt": np.cbrt,
         "expm1": np.expm1, "log1p": np.log1p}
BINARY = {"atan2": np.arctan2, "pow": np.power}


def _grid(x, y, **kw):
  return (ml.cdiv(x.shape[0], 256),)


@mg.mgpu_kernel(out_shape=lambda x, y, **kw: x, grid=_grid)
def libdevice_kernel(x_ptr, y_ptr, out_ptr, *, fn: ml.constexpr):
  pid = ml.program_id(0)
  mask = pid * 256 + ml.arange(256) < x_ptr.shape[0]
  x = x_ptr.at[ml.ds(pid * 256, 256)].load(mask=mask, other=0.5)
  y = y_ptr.at[ml.ds(pid * 256, 256)].load(mask=mask, other=1.0)
  fns = {"asin": ml.asin, "acos": ml.acos, "atan": ml.atan, "tan": ml.tan, "cbrt": ml.cbrt, "expm1": ml.expm1,
         "log1p": ml.log1p, "atan2": ml.atan2, "pow": ml.pow}
  if fn in ("atan2", "pow"):
    r = fns[fn](x, y)
  elif fn == "x ** y":
    r = x ** y
  elif fn == "x ** 1.5":
    r = y ** 1.5
  elif fn == "isinf":
    r = ml.where(ml.isinf(x / (x - 0.25)), 1.0, 0.0).astype(x.dtype)
  elif fn == "isfinite":
    r = ml.where(ml.isfinite(x / (x - 0.25)), 1.0, 0.0).astype(x.dtype)
  else:
    r = fns[fn](x)
  out_ptr.at[ml.ds(pid * 256, 256)].store(r, mask=mask)


def _inputs(dtype):
  rng = np.random.default_rng(0)
  x = np.concatenate([rng.uniform(-0.99, 0.99, 995), [0.25, -0.0, 1e-6, -1e-6, 0.0]]).astype(np.float32)
  y = rng.uniform(-3.0, 3.0, 1000).astype(np.float32)
  y[::7] = np.abs(y[::7]) + 0.1
  return jnp.asarray(x, dtype), jnp.asarray(y, dtype)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float16, jnp.bfloat16])
@pytest.mark.parametrize("fn", sorted(UNARY) + sorted(BINARY) + ["x ** y", "x ** 1.5", "isinf", "isfinite"])
def test_triton_libdevice_math_runs_as_numpy_and_exports(fn, dtype):
  """Each was MG002 (or MG001 for the ** forms): now libdevice's function on the GPU (an MLIR math op,
  16-bit floats in float32, rounded once) and numpy's in interpret mode."""
  x, y = _inputs(dtype)
  got = np.asarray(libdevice_kernel(x, y, fn=fn, interpret=True), np.float32)
  xf, yf = (np.asarray(v, np.float32) for v in (x, y))
  with np.errstate(all="ignore"):
    if fn in UNARY:
      want = UNARY[fn](xf)
    elif fn in BINARY or fn == "x ** y":
      want = BINARY.get(fn, np.power)(xf, yf)
    elif fn == "x ** 1.5":
      want = np.power(yf, np.float32(1.5))
    else:
      want = (np.isinf if fn == "isinf" else np.isfinite)(xf / (xf - np.asarray(0.25, x.dtype).astype(np.float32)))
      want = want.astype(np.float32)
  want = np.asarray(jnp.asarray(want, dtype), np.float32)         # rounded once to the dtype
  tol = 1e-6 if dtype == jnp.float32 else 1e-2
  np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
  if dtype == jnp.float32 and fn in UNARY:
    assert f"math.{fn}" in libdevice_kernel.mlir(S((1000,), dtype), S((1000,), dtype), fn=fn)
  _export(libdevice_kernel, S((1000,), dtype), S((1000,), dtype), fn=fn)


@mg.mgpu_kernel(out_shape=lambda p, b1, step: p)
def bias_correction(p, b1: ml.scalar, step: ml.scalar, out):
  out[...] = p[...] / (1.0 - b1 ** step)


@mg.mgpu_kernel(out_shape=lambda x: x)
def scalar_libdevice(x, out):
  m = ml.max(x[...])
  out[...] = x[...] * 0.0 + ml.atan2(m, 2.0) + ml.asin(m * 0.5) + ml.pow(m, 0.5) + ml.log1p(m)


def test_scalar_operands_run_as_numpy_and_export():
  """A run-time scalar base and int exponent (Adam's b1 ** step) was MG001: jnp.power's value."""
  p = jnp.linspace(1.0, 2.0, 128, dtype=F32)
  got = bias_correction(p, 0.9, 7, interpret=True)
  np.testing.assert_allclose(got, p / (1.0 - np.float32(0.9) ** 7), rtol=1e-6)
  _export(bias_correction, S((128,), F32), S((), F32), S((), jnp.int32))
  x = jnp.linspace(0.0, 1.5, 128, dtype=F32)
  m = np.float32(1.5)
  want = math.atan2(m, 2.0) + math.asin(m * 0.5) + math.sqrt(m) + math.log1p(m)
  np.testing.assert_allclose(scalar_libdevice(x, interpret=True), np.full(128, want, np.float32), rtol=1e-6)
  _export(scalar_libdevice, S((128,), F32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def int_pow(x, out):
  out[...] = ml.pow(x[...], 2)


@mg.mgpu_kernel(out_shape=lambda x: x)
def int_base_tensor_exponent(x, out):
  v = x[...]
  out[...] = (v ** v).astype(jnp.int32)


@mg.mgpu_kernel(out_shape=lambda x: x)
def python_atan2(x, out):
  out[...] = x[...] + ml.atan2(1.0, 2.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def jnp_arctan2(x, out):
  out[...] = jnp.arctan2(x[...], 2.0)


def test_libdevice_mistakes_say_what_to_write():
  i32 = S((128,), jnp.int32)
  expect(int_pow, [i32], mg.UnsupportedDtypeError, "ml.pow(x[...], 2)",
         "ml.pow needs a floating-point operand, got int32", hint="convert first: x[...].astype(jnp.float32)")
  v = jnp.arange(128, dtype=jnp.int32) % 9 - 2     # v ** v of integers is jnp's integer power since probe 42w
  np.testing.assert_array_equal(np.asarray(int_base_tensor_exponent(v, interpret=True)), np.asarray(v ** v))
  x = jnp.linspace(-3, 3, 128, dtype=F32)
  # ml.atan2 of two Python numbers is computed while tracing, in float32, since probe 60b (it was MG003)
  np.testing.assert_array_equal(np.asarray(python_atan2(x, interpret=True)),
                                np.asarray(x) + np.arctan2(np.float32(1.0), np.float32(2.0)))      # jnp.arctan2 computes as ml.atan2 since probe 46i (it was hinted)
  np.testing.assert_allclose(np.asarray(jnp_arctan2(x, interpret=True)), np.asarray(jnp.arctan2(x, 2.0)), rtol=1e-6)


# ---------------------------------------------------------------- strided columns as a tile's column vector
@mg.mgpu_kernel(out_shape=lambda a, bt, s: S((a.shape[0], bt.shape[0]), F32), grid=lambda a, bt, s: (2,))
def column_scales(a, bt, s, c):
  """Tutorial 10's block scales: a (n, k // 64) array's column k is a vector of n strided elements."""
  j = ml.program_id(0)
  a_s, b_s = ml.smem((128, 64)), ml.smem((64, 64))
  acc = ml.zeros((128, 64), F32)
  for k in range(a.shape[1] // 64):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(bt.at[ml.ds(j * 64, 64), ml.ds(k * 64, 64)], b_s)
    acc = acc + ml.dot(a_s, b_s.T) * s.at[ml.ds(j * 64, 64), k][...][None, :]
  c.at[:, ml.ds(j * 64, 64)][...] = acc


@mg.mgpu_kernel(out_shape=lambda a: S((a.shape[0], 2), F32))
def column_statistics(a, out):
  a_s = ml.smem(a.shape)
  ml.copy(a, a_s)
  acc = ml.dot(a_s, a_s.T)
  out.at[:, 0][...] = ml.sum(acc, axis=0)
  out.at[:, 1][...] = ml.max(acc, axis=0)


def _column_scales_inputs():
  rng = np.random.default_rng(1)
  a = jnp.asarray(rng.standard_normal((128, 192)), jnp.float16)
  bt = jnp.asarray(rng.standard_normal((128, 192)), jnp.float16)
  s = jnp.asarray(rng.uniform(0.5, 2.0, (128, 3)), F32)
  af, bf = np.asarray(a, np.float32), np.asarray(bt, np.float32)
  want = sum((af[:, k * 64:(k + 1) * 64] @ bf[:, k * 64:(k + 1) * 64].T) * np.asarray(s)[:, k][None, :]
             for k in range(3))
  return a, bt, s, want


def test_a_strided_column_is_a_tensor_core_tiles_column_vector():
  """A minor-strided window read or written as the column vector of a WGMMA tile was MG900 (Mosaic GPU's
  tiled transfers move each register's two elements at once): now one scalar load or store an element."""
  a, bt, s, want = _column_scales_inputs()
  np.testing.assert_allclose(column_scales(a, bt, s, interpret=True), want, rtol=1e-4, atol=1e-3)
  assert "memref.load" in column_scales.mlir(S(a.shape, a.dtype), S(bt.shape, bt.dtype), S(s.shape, F32))
  _export(column_scales, S(a.shape, a.dtype), S(bt.shape, bt.dtype), S(s.shape, F32))
  x = jnp.asarray(np.random.default_rng(2).standard_normal((128, 64)), jnp.float16)
  xf = np.asarray(x, np.float32)
  np.testing.assert_allclose(column_statistics(x, interpret=True),
                             np.stack([(xf @ xf.T).sum(0), (xf @ xf.T).max(0)], 1), rtol=1e-4, atol=1e-3)
  assert "memref.store" in column_statistics.mlir(S(x.shape, x.dtype))
  _export(column_statistics, S(x.shape, x.dtype))


@pytest.mark.gpu
def test_strided_column_vectors_on_the_gpu():
  a, bt, s, want = _column_scales_inputs()
  np.testing.assert_allclose(jax.jit(column_scales)(a, bt, s), want, rtol=1e-3, atol=1e-2)
  x = jnp.asarray(np.random.default_rng(2).standard_normal((128, 64)), jnp.float16)
  np.testing.assert_allclose(jax.jit(column_statistics)(x), column_statistics(x, interpret=True), rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("fn", sorted(UNARY) + sorted(BINARY) + ["x ** y", "isinf"])
def test_libdevice_math_on_the_gpu(fn):
  x, y = _inputs(jnp.float32)
  got = jax.jit(lambda a, b: libdevice_kernel(a, b, fn=fn))(x, y)
  np.testing.assert_allclose(got, libdevice_kernel(x, y, fn=fn, interpret=True), rtol=4e-6, atol=1e-6,
                             equal_nan=True)


# ---------------------------------------------------------------- tl.dot's keywords
@mg.mgpu_kernel(out_shape=lambda a, b, **kw: S((a.shape[0], b.shape[1]), kw.get("out", F32)))
def dot_keywords(a, b, c, *, out: ml.constexpr = F32, opt: ml.constexpr = "out_dtype"):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  if opt == "out_dtype":
    c[...] = ml.dot(a_s, b_s, out_dtype=out)
  elif opt == "tf32":
    c[...] = ml.dot(a_s, b_s.T, input_precision="tf32", allow_tf32=True)
  elif opt == "ieee":
    c[...] = ml.dot(a_s, b_s.T, input_precision="ieee")
  elif opt == "no_tf32":
    c[...] = ml.dot(a_s, b_s.T, allow_tf32=False)
  elif opt == "both":
    c[...] = ml.dot(a_s, b_s, ml.zeros((a.shape[0], b.shape[1]), F32), out_dtype=out)
  else:
    c[...] = ml.dot(a_s, b_s, max_num_imprecise_acc=32)


def test_triton_dot_keywords():
  """out_dtype=, input_precision= and allow_tf32= were 'unexpected keyword argument' (hint: ml.dot(a, b,
  acc=None)): out_dtype is the accumulator's dtype, "tf32" and allow_tf32=True what float32 gets."""
  rng = np.random.default_rng(3)
  a = jnp.asarray(rng.standard_normal((64, 64)), jnp.float16)
  b = jnp.asarray(rng.standard_normal((64, 64)), jnp.float16)
  want = np.asarray(a, np.float32) @ np.asarray(b, np.float32)
  for out in (F32, jnp.float16):
    got = dot_keywords(a, b, out=out, interpret=True)
    assert got.dtype == out
    np.testing.assert_allclose(np.asarray(got, np.float32), want, rtol=2e-2, atol=5e-2)
    _export(dot_keywords, S(a.shape, a.dtype), S(b.shape, b.dtype), out=out)
  af, bf = (jnp.asarray(rng.standard_normal((64, 64)), F32) for _ in range(2))
  ref = dot_keywords(af, bf, opt="tf32", interpret=True)
  np.testing.assert_allclose(ref, np.asarray(af) @ np.asarray(bf).T, rtol=2e-2, atol=5e-2)
  f32 = [S((64, 64), F32)] * 2
  hint = ("drop input_precision=\"ieee\" for TF32; for more precision, split each float32 operand into its TF32"
          " part and the rest, hi = ml.bitcast(ml.bitcast(x, jnp.uint32) & 0xFFFFE000, jnp.float32) and lo = x -"
          " hi, each stored in its own SMEM buffer, and add the three dots ml.dot(a_hi, b_hi) + ml.dot(a_hi, b_lo)"
          " + ml.dot(a_lo, b_hi) (Triton's tf32x3, about float32's accuracy)")
  expect(dot_keywords, f32, mg.UnsupportedDtypeError, "ml.dot(a_s, b_s.T, input_precision=\"ieee\")",
         "ml.dot with input_precision=\"ieee\": the tensor cores read float32 operands as TF32 (10 mantissa bits),"
         " Triton's default input_precision=\"tf32\"", hint=hint, opt="ieee")
  expect(dot_keywords, f32, mg.UnsupportedDtypeError, "ml.dot(a_s, b_s.T, allow_tf32=False)",
         "ml.dot with allow_tf32=False: the tensor cores read float32 operands as TF32 (10 mantissa bits),"
         " Triton's default input_precision=\"tf32\"", opt="no_tf32")
  f16 = [S((64, 64), jnp.float16)] * 2
  expect(dot_keywords, f16, mg.KernelTypeError, "ml.dot(a_s, b_s, ml.zeros",
         "ml.dot's out_dtype=float16 differs from its acc's dtype (float32): the product accumulates in acc's"
         " dtype", hint="drop out_dtype (the result is float32), or convert after the dot:"
                        " ml.dot(a, b, acc).astype(jnp.float16)", opt="both", out=jnp.float16)
  bf16 = [S((64, 64), jnp.bfloat16)] * 2
  expect(dot_keywords, bf16, mg.UnsupportedDtypeError, "ml.dot(a_s, b_s, out_dtype=out)",
         "ml.dot accumulates bfloat16 products in float32, not out_dtype=bfloat16",
         hint="accumulate in jnp.float32 and convert the result: ml.dot(a_s, b_s).astype(jnp.bfloat16)",
         out=jnp.bfloat16)
  expect(dot_keywords, f16, mg.KernelTypeError, "ml.dot(a_s, b_s, max_num_imprecise_acc=32)",
         "ml.dot's max_num_imprecise_acc=32 is not supported: Hopper's float8 dots add their products with fewer"
         " mantissa bits than float32 (see the docs' Tensor cores table)", opt="imprecise")


# ---------------------------------------------------------------- tl.range's tuning keywords
@mg.mgpu_kernel(out_shape=lambda x, **kw: x, grid=(2,))
def range_keywords(x, out, *, opt: ml.constexpr = None):
  if opt == "flatten":
    for row in ml.range(ml.program_id(0), x.shape[0], ml.num_programs(0), flatten=True):
      out.at[row][...] = x.at[row][...] * 2
  elif opt == "unroll":
    for row in ml.range(ml.program_id(0), x.shape[0], ml.num_programs(0), loop_unroll_factor=2):
      out.at[row][...] = x.at[row][...] * 2
  else:
    for row in ml.range(ml.program_id(0), x.shape[0], ml.num_programs(0)):
      out.at[row][...] = x.at[row][...] * 2


def test_triton_range_tuning_keywords_are_dropped():
  """flatten= and loop_unroll_factor= gave only ml.range's signature, then a hint to drop them; since probe 49h
  they are dropped (Triton's tuning hints, which change no value: the persistent matmul tutorial writes flatten=)."""
  x = jnp.arange(6 * 128, dtype=F32).reshape(6, 128)
  for opt in ("flatten", "unroll", None):
    np.testing.assert_array_equal(range_keywords(x, interpret=True, opt=opt), x * 2)


# ---------------------------------------------------------------- grouped GEMM: a tile past its group's end
def _grouped_out(a, b, offs, **kw):
  return S((a.shape[0], b.shape[2]), jnp.float16)


@mg.mgpu_kernel(out_shape=_grouped_out, grid=lambda a, b, offs, **kw: (b.shape[0] * 4,))
def grouped_gemm(a, b, offs, c, *, masked: ml.constexpr = False):
  g, t = ml.program_id(0) // 4, ml.program_id(0) % 4
  start, end = ml.multiple_of(offs[g], 8), offs[g + 1]
  a_s, b_s, c_s = ml.smem((64, 128)), ml.smem((128, 128)), ml.smem((64, 128), jnp.float16)
  if start + t * 64 < end:
    ml.copy(a.at[ml.ds(start + t * 64, 64), :], a_s)
    ml.copy(b.at[g], b_s)
    acc = ml.dot(a_s, b_s).astype(jnp.float16)
    if masked:
      c.at[ml.ds(start + t * 64, 64), :].store(acc, mask=start + t * 64 + ml.arange(64)[:, None] < end)
    else:
      c_s[...] = acc
      ml.copy(c_s, c.at[ml.ds(start + t * 64, 64), :])


def test_a_grouped_gemm_tile_past_its_group_says_mask_the_store():
  """The race of a TMA store past its group's end was hinted as 'give each program its own window: windows
  of 17 rows cover its 200 rows' (a split of the output by program id): it now says what happened."""
  rng = np.random.default_rng(4)
  a = jnp.asarray(rng.standard_normal((200, 128)), jnp.float16)
  b = jnp.asarray(rng.standard_normal((3, 128, 128)), jnp.float16)
  offs = jnp.asarray([0, 48, 120, 200], jnp.int32)
  with pytest.raises(mg.RaceError) as e:
    grouped_gemm(a, b, offs, interpret=True)
  assert e.value.hint == (
      "a window whose start comes from data (a group's or segment's first row) runs past the segment's end into"
      " the next segment's rows, which another program writes (a TMA copy writes its whole window): store only"
      " the segment's rows, with a masked store from registers, c.at[ml.ds(start, n), :].store(value, mask=start"
      " + ml.arange(n)[:, None] < end)")
  got = np.asarray(grouped_gemm(a, b, offs, masked=True, interpret=True), np.float32)
  af, bf = np.asarray(a, np.float32), np.asarray(b, np.float32)
  want = np.concatenate([af[s:e] @ bf[g] for g, (s, e) in enumerate([(0, 48), (48, 120), (120, 200)])])
  np.testing.assert_allclose(got, want, rtol=2e-2, atol=5e-2)
  _export(grouped_gemm, S(a.shape, a.dtype), S(b.shape, b.dtype), S((4,), jnp.int32), masked=True)


# ---------------------------------------------------------------- dropout with a tensor of seeds
@mg.mgpu_kernel(out_shape=lambda x, s, **kw: x, grid=lambda x, s, **kw: (ml.cdiv(x.shape[0], 256),))
def seeded_dropout(x_ptr, seed_ptr, out_ptr, *, folded: ml.constexpr = False):
  pid = ml.program_id(0)
  offsets = pid * 256 + ml.arange(256)
  mask = offsets < x_ptr.shape[0]
  seeds = seed_ptr.at[ml.ds(pid * 256, 256)].load(mask=mask, other=0)
  x = x_ptr.at[ml.ds(pid * 256, 256)].load(mask=mask)
  r = ml.rand(1234, seeds * 4096 + offsets) if folded else ml.rand(seeds, offsets)
  out_ptr.at[ml.ds(pid * 256, 256)].store(ml.where(r > 0.5, x * 2.0, 0.0), mask=mask)


def test_a_tensor_of_seeds_seeds_each_element():
  """Once an error whose hint folded the seeds into the offsets; since probe 49g a tensor of seeds keys each
  element's Philox, as Triton's tl.rand broadcasts one."""
  from mgpu_dsl.lowering.random import philox_numpy
  spec = [S((1000,), F32), S((1000,), jnp.int32)]
  x = jnp.ones((1000,), F32)
  seeds = jnp.arange(1000, dtype=jnp.int32) % 3
  a = np.asarray(seeded_dropout(x, seeds, folded=True, interpret=True))
  assert set(np.unique(a)) <= {0.0, 2.0} and 0.3 < (a == 2.0).mean() < 0.7
  _export(seeded_dropout, *spec, folded=True)
  words = philox_numpy(np.asarray(seeds), 0, np.arange(1000))[0].view(np.int32)
  u = np.where(words < 0, ~words, words).astype(np.float32) * np.float32(4.6566127342e-10)
  np.testing.assert_array_equal(np.asarray(seeded_dropout(x, seeds, interpret=True)), np.where(u > 0.5, 2.0, 0.0))
  _export(seeded_dropout, *spec)


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, jnp.int8), S(x.shape, jnp.int8)))
def inf_and_finite(x, inf, fin):
  v = x[...]
  inf[...] = ml.isinf(v).astype(jnp.int8)
  fin[...] = ml.isfinite(v).astype(jnp.int8)


@pytest.mark.parametrize("dtype", [F32, jnp.bfloat16, jnp.float8_e5m2, jnp.float8_e4m3fn, jnp.uint8, jnp.int32])
def test_isinf_and_isfinite_of_every_dtype_are_jnps(dtype):
  """Comparisons only: 8-bit values too (as jnp.isinf of a uint8 or float8 array)."""
  vals = np.array([0, 1, np.inf, -np.inf, np.nan, 3, -2, 1e30] * 16, np.float32)
  x = jnp.asarray(vals if jnp.issubdtype(dtype, jnp.floating) else np.arange(128) % 7, dtype)
  inf, fin = inf_and_finite(x, interpret=True)
  np.testing.assert_array_equal(inf, jnp.isinf(x).astype(jnp.int8))
  np.testing.assert_array_equal(fin, jnp.isfinite(x).astype(jnp.int8))
  _export(inf_and_finite, S(x.shape, dtype))


# ---------------------------------------------------------------- Triton names with no ml function
@mg.mgpu_kernel(out_shape=lambda x, y, **kw: x)
def triton_names(x, y, out, *, f: ml.constexpr):
  a, b = x[...], y[...]
  if f == "fmax":
    out[...] = ml.fmax(a, b)
  elif f == "fmax_fixed":
    out[...] = ml.where(a != a, b, ml.where(b != b, a, ml.maximum(a, b)))
  elif f == "randn":
    out[...] = ml.randn(7, ml.arange(128))
  elif f == "randn_fixed":
    offsets = ml.arange(128)
    u1, u2 = ml.rand(7, offsets), ml.rand(7, offsets + 128)
    out[...] = ml.sqrt(-2.0 * ml.log(1.0 - u1)) * ml.cos(6.283185307179586 * u2)
  elif f == "llrint":
    out[...] = ml.llrint(a).astype(jnp.float32)
  else:
    out[...] = ml.dot_scaled(a, b)


def test_triton_names_without_an_ml_function_say_what_to_write():
  """fmax said 'did you mean ml.max?' (a reduction), randn 'ml.rand?' (uniform numbers), llrint 'ml.randint?',
  dot_scaled 'check the spelling'; each hint's form runs."""
  spec = [S((128,), F32)] * 2
  expect(triton_names, spec, mg.UnknownNameError, "ml.fmax", "ml has no attribute 'fmax'", f="fmax",
         hint="no ml.fmax: ml.maximum(a, b) (NaN if either is NaN; for fmax's number over a NaN, ml.where(a != a, b,"
              " ml.where(b != b, a, ml.maximum(a, b))))")
  # ml.randn was MG002 with the Box-Muller hint until probe 47g: it is Triton's tl.randn
  n = np.asarray(triton_names(jnp.zeros((128,), F32), jnp.zeros((128,), F32), f="randn", interpret=True))
  assert np.isfinite(n).all() and abs(n.mean()) < 0.4 and 0.6 < n.std() < 1.4
  e = expect(triton_names, spec, mg.UnknownNameError, "ml.llrint", "ml has no attribute 'llrint'", f="llrint")
  assert e.hint == "no ml.llrint: ml.round(a).astype(jnp.int32) (to nearest, ties to even)"
  e = expect(triton_names, spec, mg.UnknownNameError, "ml.dot_scaled", "ml has no attribute 'dot_scaled'", f="other")
  assert e.hint.startswith("no ml.dot_scaled (block-scaled MMA is not Hopper's)")
  x = jnp.asarray([np.nan, 1.0, -2.0, np.nan] * 32, F32)
  y = jnp.asarray([3.0, np.nan, 5.0, np.nan] * 32, F32)
  np.testing.assert_array_equal(triton_names(x, y, f="fmax_fixed", interpret=True), jnp.fmax(x, y))
  z = np.asarray(triton_names(x, y, f="randn_fixed", interpret=True))
  assert np.isfinite(z).all() and abs(z.mean()) < 0.4 and 0.6 < z.std() < 1.4
  _export(triton_names, *spec, f="randn_fixed")


@mg.mgpu_kernel(out_shape=lambda a, x: S((a.shape[0], a.shape[0], 2), F32))
def interleaved_tile(a, x, c):
  """A whole tensor-core tile read from and written to windows strided in their last dimension."""
  a_s = ml.smem(a.shape)
  ml.copy(a, a_s)
  acc = ml.dot(a_s, a_s.T)
  c.at[:, :, 0][...] = acc + x.at[:, :, 1][...]
  c.at[:, :, 1][...] = acc * 2


def test_a_tensor_core_tile_through_strided_windows():
  """Was MG900 at the load and the store, as for the column vectors above."""
  rng = np.random.default_rng(5)
  a = jnp.asarray(rng.standard_normal((64, 64)), jnp.float16)
  x = jnp.asarray(rng.standard_normal((64, 64, 2)), F32)
  r = np.asarray(a, np.float32) @ np.asarray(a, np.float32).T
  np.testing.assert_allclose(interleaved_tile(a, x, interpret=True),
                             np.stack([r + np.asarray(x)[:, :, 1], 2 * r], -1), rtol=1e-4, atol=1e-3)
  _export(interleaved_tile, S(a.shape, a.dtype), S(x.shape, F32))
