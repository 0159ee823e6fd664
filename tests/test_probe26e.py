"""Probe 26e (quantization kernels: narrow dtypes, bit tricks, packed weights): narrow tiles counted
as a 32-bit register a value, register stores into windows of a tensor-core buffer, and hints that
named the wrong function (ml.copysign -> ml.copy), a form that fails (.view(dtype) -> .reshape) or
nothing at all (jnp.right_shift, ml.interleave, a uint32 constant on an int32)."""
import os
import subprocess
import sys
import tempfile
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
BF16 = jnp.bfloat16
I32 = jnp.int32


GEN = tempfile.mkdtemp(prefix="probe26e_")    # kernels written from source, one a call


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- 8- and 16-bit tiles pack into registers
@mg.mgpu_kernel(out_shape=lambda x: x)
def copy_tile(x, out):
  out[...] = x[...]


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.int8])
def test_narrow_tiles_count_the_registers_they_pack_into(dtype):
  # a float32 (64, 2048) tile (1024 registers a thread) was accepted, float16 and int8 (64, 4096)
  # ones (1024 and 512 registers, packed two and four to a register) were MG403 "needs 2048"
  x = (np.arange(64 * 4096) % 101).reshape(64, 4096).astype(dtype)
  np.testing.assert_array_equal(copy_tile(x, interpret=True), x)
  _export(copy_tile, S((64, 4096), dtype))


@pytest.mark.parametrize("dtype,cols,per", [(jnp.float16, 16384, "two"), (jnp.int8, 32768, "four")])
def test_far_too_large_narrow_tiles_say_how_they_pack(dtype, cols, per):
  name = jnp.dtype(dtype).name
  expect(copy_tile, [S((64, cols), dtype)], mg.RegisterCapacityError, "x[...]",
         f"this 64x{cols} {name} tile needs 4096 registers a thread ({per} values a register) across the"
         f" CTA's 128 threads; a thread has 255")


# ---------------------------------------------------------------- register stores into windows of a dot operand
@mg.mgpu_kernel(out_shape=lambda x, lo, hi: S((64, 64), F32))
def halves(x, lo, hi, c):
  x_s = ml.smem((64, 128), BF16)
  w_s = ml.smem((64, 128), BF16)
  ml.copy(x, x_s)
  w_s.at[:, ml.ds(0, 64)][...] = lo[...]
  w_s.at[:, ml.ds(64, 64)][...] = hi[...]
  c[...] = ml.dot(x_s, w_s.T)


@mg.mgpu_kernel(out_shape=lambda x, lo, hi: S((64, 64), F32))
def halves_joined(x, lo, hi, c):
  x_s = ml.smem((64, 128), BF16)
  w_s = ml.smem((64, 128), BF16)
  ml.copy(x, x_s)
  w_s[...] = ml.concatenate([lo[...], hi[...]], axis=1)
  c[...] = ml.dot(x_s, w_s.T)


def test_register_stores_into_a_dot_operands_windows_compile_as_joining_them_first():
  # the hint said to "take static windows of whole tiles", which the two 64-column halves were; such
  # windows (64 rows, 128 bytes of columns) are stored in the WGMMA layout now (probe 38h)
  specs = [S((64, 128), BF16), S((64, 64), BF16), S((64, 64), BF16)]
  rng = np.random.default_rng(0)
  x, lo, hi = (rng.standard_normal(s.shape).astype(BF16) for s in specs)
  want = np.asarray(x, np.float32) @ np.concatenate([lo, hi], 1).astype(np.float32).T
  np.testing.assert_allclose(halves_joined(x, lo, hi, interpret=True), want, rtol=1e-5, atol=1e-4)
  np.testing.assert_allclose(halves(x, lo, hi, interpret=True), want, rtol=1e-5, atol=1e-4)
  _export(halves_joined, *specs)
  _export(halves, *specs)


# ---------------------------------------------------------------- .view(dtype) is a bitcast
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def view_bits(x, out):
  out[...] = x[...].view(jnp.int32)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def view_ref_bits(x, out):
  out[...] = x.view(jnp.int32)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def bitcast_bits(x, out):
  out[...] = ml.bitcast(x[...], jnp.int32)


@pytest.mark.parametrize("kernel,at,what", [(view_ref_bits, "x.view", "a GMEM ref")])
def test_view_of_a_dtype_says_ml_bitcast(kernel, at, what):
  # the hint was `write x[...].reshape(jnp.int32)`, which fails
  e = expect(kernel, [S((128,), F32)], mg.KernelTypeError, at, f"{what} has no attribute 'view'",
             hint="write ml.bitcast(x[...], jnp.int32): the same bits as another dtype of the same width")
  x = np.linspace(-3, 3, 128).astype(np.float32)
  np.testing.assert_array_equal(bitcast_bits(x, interpret=True), x.view(np.int32))
  assert e


def test_view_of_a_register_tensor_is_the_bitcast():
  # (probe 52c: jax.Array.view(dtype) of a register tensor computes, as ml.bitcast; it was the MG003 above)
  x = np.linspace(-3, 3, 128).astype(np.float32)
  np.testing.assert_array_equal(view_bits(x, interpret=True), x.view(np.int32))


# ---------------------------------------------------------------- jnp's and lax's names of operators
OPERATOR_CALLS = [
    ("jax.lax.shift_right_logical(p[...], 4)", "shift_right_logical",
     ">> shifts a uint32 logically and an int32 arithmetically: ml.bitcast(ml.bitcast(p[...], jnp.uint32) >> 4,"
     " jnp.int32) for an int32 p[...] (p[...] >> 4 of a uint32 one)"),
    ("jnp.right_shift(p[...], 4)", "right_shift",
     "write the operator: p[...] >> 4 (arithmetic on signed types; for a logical shift of an int32,"
     " ml.bitcast(ml.bitcast(p[...], jnp.uint32) >> 4, jnp.int32))"),
    ("jnp.left_shift(p[...] + 1, 4)", "left_shift", "write the operator: (p[...] + 1) << 4"),
    ("jax.lax.shift_left(p[...], 2)", "shift_left", "write the operator: p[...] << 2"),
    ("jax.lax.shift_right_arithmetic(p[...], 2)", "shift_right_arithmetic", "write the operator: p[...] >> 2"),
    ("jnp.bitwise_and(p[...], 15)", "bitwise_and", "write the operator: p[...] & 15"),
    ("jnp.bitwise_or(p[...], 15)", "bitwise_or", "write the operator: p[...] | 15"),
    ("jnp.bitwise_xor(p[...], 15)", "bitwise_xor", "write the operator: p[...] ^ 15"),
    ("jax.lax.bitwise_and(p[...], 2)", "bitwise_and", "write the operator: p[...] & 2"),
    ("jnp.invert(p[...])", "invert", "write the operator: ~p[...]"),
    ("jnp.bitwise_not(p[...])", "bitwise_not", "write the operator: ~p[...]"),
    ("jnp.mod(p[...], 7)", "mod", "write the operator: p[...] % 7 (flooring, as Python and jnp)"),
    ("jnp.remainder(p[...], 7)", "remainder", "write the operator: p[...] % 7 (flooring, as Python and jnp)"),
    ("jax.lax.rem(p[...], 7)", "rem", "write ml.fmod(p[...], 7) (C's remainder, the sign of p[...]; % takes 7's)"),
    ("jax.lax.div(p[...], 7)", "div",
     "lax.div rounds toward zero, // floors: q = p[...] // 7; ml.where((p[...] % 7 != 0) & (p[...] < 0),"
     " q + 1, q)"),
]


def _kernels(prefix, exprs, out_shape="lambda p: p"):
  """One kernel a call, from source (the locate helpers read it back)."""
  src = "".join(f"@mg.mgpu_kernel(out_shape={out_shape})\ndef {prefix}{k}(p, out):\n  out[...] = {e}\n\n"
                for k, e in enumerate(exprs))
  path = os.path.join(GEN, f"{prefix}_kernels.py")
  with open(path, "w") as f:
    f.write("import jax\nimport jax.numpy as jnp\nimport mgpu_dsl as mg\nfrom mgpu_dsl import language as ml\n\n"
            + src)
  scope = {}
  exec(compile(open(path).read(), path, "exec"), scope)
  return [scope[f"{prefix}{k}"] for k in range(len(exprs))]


OPS = _kernels("op", [c[0] for c in OPERATOR_CALLS])
_COMPUTED = {"right_shift", "left_shift", "shift_left", "bitwise_and", "bitwise_or", "bitwise_xor", "invert",
             "bitwise_not", "mod", "remainder", "rem", "shift_right_logical", "shift_right_arithmetic", "div"}


@pytest.mark.parametrize("k", range(len(OPERATOR_CALLS)), ids=[c[1] for c in OPERATOR_CALLS])
def test_jnp_and_lax_operator_functions_name_the_operator(k):
  # all said "kernels call ml.* functions on register values; decorate a helper ..."
  text, name, hint = OPERATOR_CALLS[k]
  if name in _COMPUTED:       # (since probe 47b they compute as the operator, jnp's numbers)
    p = jnp.asarray((np.arange(-64, 64, dtype=np.int64) * 7654321).astype(np.int32))
    want = eval(text, {"jnp": jnp, "jax": jax, "p": p})
    np.testing.assert_array_equal(OPS[k](p, interpret=True), want)
    return
  expect(OPS[k], [S((128,), I32)], mg.KernelTypeError, text,
         f"{name} cannot take a register tensor inside a kernel", hint=hint)


@mg.mgpu_kernel(out_shape=lambda p: p)
def followed_operators(p, out):
  a = p[...]
  q = a // 7
  out[...] = (ml.bitcast(ml.bitcast(a, jnp.uint32) >> 4, jnp.int32) + ml.fmod(a, 7)
              + ml.where((a % 7 != 0) & (a < 0), q + 1, q))


def test_the_operator_hints_followed_compute_what_lax_does():
  for k in (0, 13, 14):          # shift_right_logical, rem, div: the hints this kernel follows
    test_jnp_and_lax_operator_functions_name_the_operator(k)
  p = (np.arange(-512, 512, dtype=np.int64) * 7654321).astype(np.int32)
  want = jax.lax.shift_right_logical(p, 4) + jax.lax.rem(p, 7) + jax.lax.div(p, 7)
  np.testing.assert_array_equal(followed_operators(p, interpret=True), want)
  _export(followed_operators, S((1024,), I32))


# ---------------------------------------------------------------- functions ml lacks, near another's spelling
MISSING = [
    ("ml.copysign(ml.abs(x[...]), y[...])", "copysign",
     "no ml.copysign: ml.where(ml.bitcast(y[...], jnp.int32) < 0, -ml.abs(ml.abs(x[...])), ml.abs(ml.abs(x[...])))"
     " (the bitcast sees the sign of -0.0, as jnp.copysign; jnp.int16 for a 16-bit float)"),
    ("ml.signbit(x[...])", "signbit",
     "no ml.signbit: ml.bitcast(x[...], jnp.int32) < 0 (True for -0.0, as jnp.signbit; jnp.int16 for a 16-bit"
     " float)"),
    ("ml.ldexp(x[...], 3)", "ldexp", "no ml.ldexp: x[...] * 2.0 ** 3"),
    ("ml.ldexp(x[...], n[...])", "ldexp",
     "no ml.ldexp: x[...] * ml.exp2(n[...].astype(jnp.float32)) (x[...] * 2.0 ** n for a static int n)"),
    ("ml.nearbyint(x[...])", "nearbyint", "no ml.nearbyint: ml.round(x[...]): to the nearest integer, ties to even"),
    ("ml.fix(x[...])", "fix", "no ml.fix: ml.trunc(x[...]): rounds toward zero"),
    ("ml.nan_to_num(x[...])", "nan_to_num",
     "no ml.nan_to_num: ml.where(x[...] != x[...], 0.0, ml.clip(x[...], -jnp.finfo(x[...].dtype).max,"
     " jnp.finfo(x[...].dtype).max)) (NaN to 0, +-inf to the dtype's largest finite values, as jnp.nan_to_num)"),
    ("ml.square(x[...] + 1)", "square", "no ml.square: (x[...] + 1) * (x[...] + 1)"),
    ("ml.log10(x[...])", "log10", "no ml.log10: jnp.log10(x[...]) (jnp's form, computed in kernels; also ml.libdevice.log10)"),
    ("ml.exp10(x[...])", "exp10", "no ml.exp10: ml.libdevice.exp10(x[...]) (10 ** x, libdevice's powf of 10)"),
    ("ml.right_shift(n[...], 4).astype(jnp.float32)", "right_shift",
     "no ml.right_shift: write the operator: n[...] >> 4 (arithmetic on signed types; for a logical shift of an"
     " int32, ml.bitcast(ml.bitcast(n[...], jnp.uint32) >> 4, jnp.int32))"),
    ("ml.bitwise_xor(n[...], n[...] + 1).astype(jnp.float32)", "bitwise_xor",
     "no ml.bitwise_xor: write the operator: n[...] ^ (n[...] + 1)"),
    ("jnp.copysign(x[...], y[...])", None,
     "no ml.copysign: ml.where(ml.bitcast(y[...], jnp.int32) < 0, -ml.abs(x[...]), ml.abs(x[...])) (the bitcast"
     " sees the sign of -0.0, as jnp.copysign; jnp.int16 for a 16-bit float)"),
    ("jnp.mod(x[...], y[...])", None,
     "write the operator: x[...] % y[...] (flooring, as Python and jnp)"),
]


def _xy_kernels(prefix, exprs):
  src = "".join(f"@mg.mgpu_kernel(out_shape=lambda x, y, n: x)\ndef {prefix}{k}(x, y, n, out):\n  out[...] = {e}\n\n"
                for k, e in enumerate(exprs))
  path = os.path.join(GEN, f"{prefix}_kernels.py")
  with open(path, "w") as f:
    f.write("import jax\nimport jax.numpy as jnp\nimport mgpu_dsl as mg\nfrom mgpu_dsl import language as ml\n\n"
            + src)
  scope = {}
  exec(compile(open(path).read(), path, "exec"), scope)
  return [scope[f"{prefix}{k}"] for k in range(len(exprs))]


MISS = _xy_kernels("miss", [c[0] for c in MISSING])
XYN = [S((256,), F32), S((256,), F32), S((256,), I32)]


@pytest.mark.parametrize("k", range(len(MISSING)), ids=[c[0].split("(")[0] for c in MISSING])
def test_missing_math_functions_say_what_to_write(k):
  # copysign said "did you mean ml.copy?", signbit "ml.sin?", ldexp "ml.exp?", square "ml.sqrt?";
  # nearbyint, fix, nan_to_num and fmod "check the spelling"; jnp.mod on floats, and jnp.copysign, "kernels
  # call ml.* functions" (jnp.fmod computes as ml.fmod since probe 46i)
  text, name, hint = MISSING[k]
  if name is None:       # (jnp.copysign and jnp.mod compute as jnp's since probe 47b)
    x, y = (jnp.asarray(np.random.default_rng(s).standard_normal(256).astype(np.float32)) for s in (0, 1))
    want = eval(text, {"jnp": jnp, "x": x, "y": y})
    np.testing.assert_allclose(MISS[k](x, y, jnp.zeros(256, I32), interpret=True), want, rtol=1e-6, atol=1e-6)
  else:
    expect(MISS[k], XYN, mg.UnknownNameError, f"ml.{name}", f"ml has no attribute {name!r}", hint=hint)


@mg.mgpu_kernel(out_shape=lambda x, y, n: S((8,) + x.shape, x.dtype))
def followed_math(x, y, n, out):
  a, b = x[...], y[...]
  out.at[0][...] = ml.where(ml.bitcast(b, jnp.int32) < 0, -ml.abs(a), ml.abs(a))
  out.at[1][...] = ml.where(ml.bitcast(a, jnp.int32) < 0, 1.0, 0.0)
  out.at[2][...] = a * ml.exp2(n[...].astype(jnp.float32)) + a * 2.0 ** 3
  out.at[3][...] = ml.round(a) + ml.trunc(a)
  out.at[4][...] = ml.where(a != a, 0.0, ml.clip(a, -jnp.finfo(a.dtype).max, jnp.finfo(a.dtype).max))
  out.at[5][...] = ml.fmod(a, b)
  out.at[6][...] = a % b
  out.at[7][...] = jnp.log10(ml.abs(a) + 1) + ml.libdevice.exp10(ml.clip(a, -4.0, 4.0))      # (the hints since session 60)


def test_the_math_hints_followed_compute_what_jnp_does():
  for k in range(len(MISSING)):   # the hints this kernel follows
    test_missing_math_functions_say_what_to_write(k)
  x = np.array([1.5, -2.25, 0.0, -0.0, np.inf, -np.inf, np.nan, 7.0] * 32, np.float32)
  y = np.array([-1.0, 2.0, -0.5, 0.5, -3.0, 1.0, -1.0, 0.5] * 32, np.float32)
  n = (np.arange(256) % 7 - 3).astype(np.int32)
  got = np.asarray(followed_math(x, y, n, interpret=True))
  with np.errstate(invalid="ignore"):
    want = [np.copysign(np.abs(x), y), np.signbit(x).astype(np.float32), np.ldexp(x, n) + x * 8,
            np.rint(x) + np.trunc(x), np.nan_to_num(x), np.fmod(x, y), np.mod(x, y),
            np.log10(np.abs(x) + 1) + 10.0 ** np.clip(x, -4, 4)]
  for k, w in enumerate(want):
    fin = np.isfinite(w) & (w != 0)       # the sign of a zero remainder aside (said in the hint)
    np.testing.assert_allclose(got[k][fin], w[fin], rtol=2e-6, err_msg=str(k))
    np.testing.assert_array_equal(np.isnan(got[k]), np.isnan(w), err_msg=str(k))
  np.testing.assert_array_equal(np.signbit(got[0]), np.signbit(want[0]))
  _export(followed_math, *XYN)


@mg.mgpu_kernel(out_shape=lambda x: x)
def typo(x, out):
  out[...] = ml.expp(x[...]) + ml.sincos(x[...])


def test_a_typo_is_still_a_did_you_mean_but_a_longer_name_is_not():
  # (the suggestion skips an ml name inside a longer one: ml.copy for copysign, ml.exp for ldexp)
  expect(typo, [S((128,), F32)], mg.UnknownNameError, "ml.expp", "ml has no attribute 'expp'",
         hint="did you mean ml.exp?")
  from frontend import missing
  assert missing.missing_hint(ml, "sincos") == "check the spelling"


# ---------------------------------------------------------------- interleave, join, stack
def _unpack(which):
  @mg.mgpu_kernel(out_shape=lambda p: S((8, 256), I32))
  def unpack(p, out):
    w = p[...].astype(jnp.int32)
    lo, hi = w & 15, w >> 4
    if which == "interleave":
      out[...] = ml.interleave(lo, hi)
    elif which == "join":
      out[...] = ml.join(lo, hi).reshape(8, 256)
    elif which == "stack":
      out[...] = jnp.stack([lo, hi], -1).reshape(8, 256)
    elif which == "stack0":
      out[...] = jnp.stack([lo, hi]).reshape(8, 256)
    else:
      out[...] = ml.concatenate([lo[..., None], hi[..., None]], axis=-1).reshape(8, 256)
  return unpack


JOIN = "ml.concatenate([lo[..., None], hi[..., None]], axis=-1)"


def test_interleave_join_and_stack_say_to_concatenate_new_last_axes():
  # interleave said "check the spelling", join to build it in SMEM windows, jnp.stack "kernels call ml.* functions";
  # since probe 46k ml.interleave and ml.join compute, and since probe 46i jnp.stack does (both stacks are jnp's)
  p = np.arange(1024).reshape(8, 128).astype(np.uint8)
  lo, hi = (p & 15).astype(np.int32), (p >> 4).astype(np.int32)
  want = np.stack([lo, hi], -1).reshape(8, 256)
  for form in ("followed", "interleave", "join", "stack"):
    np.testing.assert_array_equal(_unpack(form)(p, interpret=True), want, err_msg=form)
  np.testing.assert_array_equal(_unpack("stack0")(p, interpret=True), np.stack([lo, hi]).reshape(8, 256))
  _export(_unpack("followed"), S((8, 128), jnp.uint8))


def test_jnp_stack_is_the_hinted_concatenation_of_new_axes():
  """jnp.stack was hinted this concatenation (probes 26e, 45f); since probe 46i it computes it."""
  p = np.arange(1024).reshape(8, 128).astype(np.uint8)
  lo, hi = p.astype(np.int32) & 15, p.astype(np.int32) >> 4
  np.testing.assert_array_equal(_unpack("stack")(p, interpret=True), np.stack([lo, hi], -1).reshape(8, 256))
  np.testing.assert_array_equal(_unpack("stack0")(p, interpret=True), np.stack([lo, hi]).reshape(8, 256))


# ---------------------------------------------------------------- ml.dot of a (n, k) b without .T
@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), I32 if a.dtype == jnp.int8 else F32))
def dot_untransposed(a, b, c):
  a_s = ml.smem(a.shape, a.dtype)
  b_s = ml.smem(b.shape, b.dtype)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = ml.dot(a_s, b_s)


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), I32 if a.dtype == jnp.int8 else F32))
def dot_transposed(a, b, c):
  a_s = ml.smem(a.shape, a.dtype)
  b_s = ml.smem(b.shape, b.dtype)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = ml.dot(a_s, b_s.T)


@pytest.mark.parametrize("dtype,why", [(jnp.int8, " (int8 operands are K-major: the layout the tensor cores read)"),
                                       (BF16, " (it moves no data)")])
def test_dot_of_a_b_stored_n_by_k_says_to_pass_its_transposed_view(dtype, why):
  # the hint was "a is (m, k) and b is (k, n)"; for int8, storing (k, n) is then MG501
  specs = [S((64, 128), dtype), S((64, 128), dtype)]
  expect(dot_untransposed, specs, mg.ShapeMismatchError, "ml.dot(a_s, b_s)",
         "ml.dot of a_s (64, 128) and b_s (64, 128): inner dimensions differ",
         hint=f"b_s (64, 128) is stored (n, k): pass its transposed view, ml.dot(a_s, b_s.T){why}")
  rng = np.random.default_rng(1)
  a, b = (rng.integers(-8, 8, (64, 128)).astype(dtype) for _ in range(2))
  np.testing.assert_array_equal(dot_transposed(a, b, interpret=True),
                                np.asarray(a, np.float32) @ np.asarray(b, np.float32).T)
  _export(dot_transposed, *specs)


def test_dot_of_a_transposed_view_of_a_k_by_n_buffer_says_to_pass_the_buffer():
  specs = [S((64, 128), BF16), S((128, 64), BF16)]
  expect(dot_transposed, specs, mg.ShapeMismatchError, "ml.dot(a_s, b_s.T)",
         "ml.dot of a_s (64, 128) and b_s.T (64, 128): inner dimensions differ",
         hint="b_s.T views a buffer stored (k, n) = (128, 64): pass b_s itself, ml.dot(a_s, b_s)")
  _export(dot_untransposed, *specs)


# ---------------------------------------------------------------- a constant that fits only uint32
@mg.mgpu_kernel(out_shape=lambda ids: S((256,), I32))
def hashed_hist(ids, h):
  b = (ids[...] * 2654435761) >> 24
  ml.atomic_add(h.at[b], 1)


@mg.mgpu_kernel(out_shape=lambda ids: S((256,), I32))
def hashed_hist_u32(ids, h):
  b = (ids[...].astype(jnp.uint32) * 2654435761) >> 24
  ml.atomic_add(h.at[b], 1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def masked_low(x, out):
  out[...] = 0xAAAAAAAA ^ (x[...] + 1)


def test_a_constant_that_fits_uint32_says_to_compute_in_uint32():
  # the hint was "use a constant in range, or a float"
  expect(hashed_hist, [S((1024,), I32)], mg.KernelTypeError, "ids[...] * 2654435761",
         "* uses the Python int 2654435761, which does not fit in int32: kernels compute in 32 bits (a larger"
         " constant would silently lose its high bits)",
         hint="2654435761 fits uint32: compute in uint32, ids[...].astype(jnp.uint32) * 2654435761 (int32's bits"
              " unchanged, as jnp converts; .astype(jnp.int32) converts back)")
  expect(masked_low, [S((1024,), I32)], mg.KernelTypeError, "0xAAAAAAAA ^ (x[...] + 1)",
         "^ uses the Python int 2863311530, which does not fit in int32: kernels compute in 32 bits (a larger"
         " constant would silently lose its high bits)",
         hint="2863311530 fits uint32: compute in uint32, 2863311530 ^ (x[...] + 1).astype(jnp.uint32) (int32's"
              " bits unchanged, as jnp converts; .astype(jnp.int32) converts back)")
  ids = np.random.default_rng(0).integers(-2 ** 31, 2 ** 31, 1024).astype(np.int32)
  b = (ids.astype(np.uint32) * np.uint32(2654435761)) >> 24
  np.testing.assert_array_equal(hashed_hist_u32(ids, interpret=True), np.bincount(b, minlength=256))
  _export(hashed_hist_u32, S((1024,), I32))


# ---------------------------------------------------------------- dtype constexprs shown by name
@mg.mgpu_kernel(out_shape=lambda x, *, out_dtype: S(x.shape, out_dtype))
def cast_bad(x, out, *, out_dtype: ml.constexpr):
  out[...] = x[...].astype(out_dtype) + ml.nosuch(x[...])


def test_dtype_constexprs_are_shown_by_name(tmp_path):
  # `python -m mgpu_dsl check` and the call's note showed <class 'jax.numpy.float8_e4m3fn'>
  f = tmp_path / "cast.py"
  f.write_text(textwrap.dedent("""\
      import jax, jax.numpy as jnp, numpy as np
      import mgpu_dsl as mg
      from mgpu_dsl import language as ml

      @mg.mgpu_kernel(out_shape=lambda x, *, out_dtype: jax.ShapeDtypeStruct(x.shape, out_dtype))
      def cast(x, out, *, out_dtype: ml.constexpr):
        out[...] = x[...].astype(out_dtype)

      mg.check_specs(cast, jax.ShapeDtypeStruct((128,), jnp.float32), out_dtype=jnp.float8_e4m3fn)
      mg.check_specs(cast, jax.ShapeDtypeStruct((128,), jnp.float32), out_dtype=np.dtype("bfloat16"))
      """))
  run = subprocess.run([sys.executable, "-m", "mgpu_dsl", "check", str(f)], capture_output=True, text=True)
  assert run.returncode == 0, run.stdout + run.stderr
  assert f"{f}: cast(float32[128], out_dtype=float8_e4m3fn): ok" in run.stdout
  assert f"{f}: cast(float32[128], out_dtype=bfloat16): ok" in run.stdout
  with pytest.raises(mg.KernelError) as e:
    cast_bad(np.zeros(128, np.float32), out_dtype=jnp.float16, interpret=True)
  assert e.value.notes[-1].endswith("the call (x: float32[128], out_dtype=float16)"), e.value.notes
