"""Probe 37f (JAX citizenship and API surface): helpers written as lambdas in a dict display or on a
call's continuation line, hints for ml.scalar dtypes and for operands of another width along an axis,
..."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, BF16 = jnp.float32, jnp.bfloat16


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _x(shape=(128, 64), dtype=F32, seed=0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


# ---------------------------------------------------------------- lambdas whose own lines are no statement
ACTS = {
    "relu": ml.inline(lambda v: ml.maximum(v, 0.0)),
    "silu": ml.inline(lambda v: v * ml.sigmoid(v)),
    "bad": ml.inline(lambda v: jax.scipy.special.dawsn(v) + 1.0),   # (no form; sinc, ldexp, spacing, i0 (56f) compute)
}
PLAIN = {
    "neg": lambda v: -v,
    "square": lambda v: v * v,
}


@mg.mgpu_kernel(out_shape=lambda x, **k: x, grid=(1,))
def activation(x, o, *, name: ml.constexpr = "relu"):
  o[...] = ACTS[name](x[...])


@mg.mgpu_kernel(out_shape=lambda x, **k: x, grid=(1,))
def plain_activation(x, o, *, name: ml.constexpr = "neg"):
  f = ml.inline(PLAIN[name])
  o[...] = f(x[...])


@mg.mgpu_kernel(out_shape=lambda x, **k: x, grid=(1,))
def apply_helper(x, o, *, f: ml.constexpr):
  o[...] = f(x[...])


def test_lambda_helpers_in_a_dict_display_or_a_continuation_line_compile():
  """A lambda on a line of a dict display (`"relu": lambda v: ...,`) or passed on a call's continuation
  line was MG008 ("does not parse (illegal target for annotation)", with a hint about exec()): its own
  line is no statement. It is found in its file now, and its mistakes are reported at its own line."""
  x = _x()
  np.testing.assert_allclose(activation(x, interpret=True), jnp.maximum(x, 0))
  np.testing.assert_allclose(activation(x, name="silu", interpret=True), x * jax.nn.sigmoid(x), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(plain_activation(x, interpret=True), -x)
  np.testing.assert_allclose(plain_activation(x, name="square", interpret=True), x * x)
  got = apply_helper(x,
                     f=ml.inline(lambda v: v * 3.0), interpret=True)
  np.testing.assert_allclose(got, x * 3.0)
  _export(activation, S(x.shape, F32), name="silu")
  _export(plain_activation, S(x.shape, F32), name="square")
  with pytest.raises(mg.KernelTypeError) as info:
    activation.check(S(x.shape, F32), name="bad")
  e = info.value
  line = next(n for n, l in enumerate(open(__file__), 1) if '"bad": ml.inline(' in l)
  assert (e.filename, e.lineno, e.col_offset) == (__file__, line, 31)
  assert e.message == "dawsn cannot take a register tensor inside a kernel"
  assert e.hint


@pytest.mark.gpu
def test_gpu_lambda_helpers_in_a_dict_display_match_jnp():
  x = _x()
  np.testing.assert_allclose(activation(x, name="silu"), x * jax.nn.sigmoid(x), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(plain_activation(x, name="square"), x * x, rtol=1e-6)


# ---------------------------------------------------------------- the ml.scalar dtype hint
@mg.mgpu_kernel(out_shape=lambda x, a: x, grid=(1,))
def scale_by(x, a: ml.scalar, o):
  o[...] = x[...] * a


def test_the_scalar_dtype_hint_names_where_a_non_default_dtype_comes_from():
  """For a bfloat16 scalar it said `an ml.scalar is bfloat16 here, as a Python float passed for it becomes`:
  a Python float becomes float32; the float16 is the dtype of the value passed. (A float32 tensor times a
  bfloat16 scalar computes in float32 since probe 52f, jnp's result for a weak scalar and an array alike.)"""
  expect(scale_by, [S((128, 64), BF16), S((), jnp.float16)], mg.DtypeMismatchError, "x[...] * a",
         "* on x[...] (bfloat16) and a (float16): dtypes differ and are never converted implicitly",
         hint="convert the scalar, a.astype(jnp.bfloat16): the result stays bfloat16, as jnp's does for a Python"
              " number (an ml.scalar is float16 here, the dtype of the value passed for it, not weakly typed);"
              " or (x[...].astype(jnp.float16) * a).astype(jnp.bfloat16) (computed in float16, the result"
              " converted back to bfloat16)")
  e = expect(scale_by, [S((128, 64), BF16), S((), F32)], mg.DtypeMismatchError, "x[...] * a",
             "* on x[...] (bfloat16) and a (float32): dtypes differ and are never converted implicitly")
  assert "(an ml.scalar is float32 here, as a Python float passed for it becomes, not weakly typed)" in e.hint


# ---------------------------------------------------------------- a 2-D operand narrower along its last axis
@mg.mgpu_kernel(out_shape=lambda x, y: x, grid=(1,))
def add_narrow(x, y, o):
  o[...] = x[...] + y[...]


@mg.mgpu_kernel(out_shape=lambda x, y: x, grid=(1,))
def add_narrow_padded(x, y, o):
  o[...] = x[...] + y.at[:, ml.ds(0, 32)].load(mask=ml.arange(32)[None, :] < 16, other=0.0)


def test_the_padded_read_hint_of_a_2d_operand_pads_the_axis_that_differs():
  """For (64, 32) + (64, 16) it wrote y.at[ml.ds(0, 32)].load(mask=ml.arange(32) < 16, ...): a window of
  rows, whose mask does not broadcast against it. It pads the columns now, and followed it computes
  the sum with the missing columns as zeros."""
  e = expect(add_narrow, [S((64, 32), F32), S((64, 16), F32)], mg.ShapeMismatchError, "x[...] + y[...]",
             "+ on x[...] of shape (64, 32) and y[...] of shape (64, 16): the shapes do not broadcast"
             " (axis 1 of the result would be both 32 and 16)")
  assert ("read y[...] padded the same way: y.at[:, ml.ds(0, 32)].load(mask=ml.arange(32)[None, :] < 16,"
          " other=0.0), then index it as before") in e.hint
  x, y = _x((64, 32)), _x((64, 16), seed=1)
  want = x + jnp.pad(y, ((0, 0), (0, 16)))
  np.testing.assert_allclose(add_narrow_padded(x, y, interpret=True), want)
  _export(add_narrow_padded, S((64, 32), F32), S((64, 16), F32))


# ---------------------------------------------------------------- match statements
import enum


class Act(enum.Enum):
  RELU = 1
  HALF = 2


@ml.inline
def _act(v, kind):
  match kind:
    case Act.RELU:
      return ml.maximum(v, 0.0)
    case Act.HALF:
      return v * 0.5
    case None:
      return v


@mg.mgpu_kernel(out_shape=lambda x, **k: x, grid=(1,))
def match_constexprs(x, o, *, kind: ml.constexpr = Act.RELU, n: ml.constexpr = 3):
  v = _act(x[...], kind)
  match n:
    case 0 | 1:
      v = v + 100.0
    case m if m > 5:
      v = v + m
    case m:
      v = v - m
  match x.dtype:
    case jnp.float32:
      o[...] = v
    case _:
      o[...] = v.astype(x.dtype)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 32,))
def match_program_id(x, o):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 32, 32)][...]
  match i:
    case 0:
      r = v + 1.0
    case 1 | 2:
      r = v * 2.0
    case _:
      r = v
  o.at[ml.ds(i * 32, 32)][...] = r


@mg.mgpu_kernel(out_shape=lambda x, **k: x, grid=(1,))
def match_sequence(x, o, *, t: ml.constexpr = (1.0, 2.0)):
  match t:
    case (a, b):
      o[...] = x[...] * a + b


def test_match_on_constexprs_and_runtime_scalars_is_the_if_chain_it_means():
  """`match` was MG001 at the statement: Pallas and Triton kernels switch on a constexpr mode with it.
  It is the if/elif chain now (values, |, None, captures, guards, _), decided while tracing on a
  static subject and a chain of run-time ifs on a scalar; other patterns are MG001 at the pattern."""
  x = _x()
  np.testing.assert_allclose(match_constexprs(x, interpret=True), jnp.maximum(x, 0) - 3)
  np.testing.assert_allclose(match_constexprs(x, kind=Act.HALF, n=1, interpret=True), x * 0.5 + 100)
  np.testing.assert_allclose(match_constexprs(x, kind=None, n=7, interpret=True), x + 7)
  xb = x.astype(BF16)
  np.testing.assert_allclose(match_constexprs(xb, kind=None, n=0, interpret=True).astype(F32),
                             (xb + jnp.asarray(100, BF16)).astype(F32))
  want = jnp.concatenate([x[:32] + 1, x[32:96] * 2, x[96:]])
  np.testing.assert_allclose(match_program_id(x, interpret=True), want)
  _export(match_program_id, S(x.shape, F32))
  _export(match_constexprs, S(x.shape, F32), kind=Act.HALF, n=9)
  expect(match_sequence, [S(x.shape, F32)], mg.UnsupportedSyntaxError, "(a, b)",
         "a sequence pattern is not supported in a kernel's match",
         hint="a kernel's match compares its subject with values (`case \"relu\":`, `case Mode.FAST:`, `case 0 | 1:`,"
              " `case _:`), as an if/elif chain would; test a tuple's parts with an if instead: if len(t) == 2:"
              " a, b = t")


@pytest.mark.gpu
def test_gpu_match_on_a_program_id_matches_jnp():
  x = _x()
  want = jnp.concatenate([x[:32] + 1, x[32:96] * 2, x[96:]])
  np.testing.assert_allclose(match_program_id(x), want)
  np.testing.assert_allclose(match_constexprs(x, kind=Act.HALF, n=9), x * 0.5 + 9)


# ---------------------------------------------------------------- print with str.format and % formatting
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def print_formats(x, o):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 2, 2)][...]
  s = ml.sum(v)
  print("{} of {}".format(i, 2))
  print("{1}/{0}: {s:.2f} {n!r}".format(i, 7, s=s, n="a"))
  print("pid %d: sum=%8.1f %-4d|%05d %x %s %%" % (i, s, i, i, 255, i))
  print("just %s" % i)
  o.at[ml.ds(i * 2, 2)][...] = v


def test_print_of_format_and_percent_strings_prints_as_python_does(capsys):
  """`print("{} of {}".format(i, n))` and `print("%d: %.3f" % (i, s))` with run-time values were MG003
  ("format cannot take a scalar", hinting ml.* functions): they are the f-strings they mean now."""
  x = jnp.asarray(np.arange(4 * 128, dtype=np.float32).reshape(4, 128))
  np.testing.assert_array_equal(print_formats(x, interpret=True), x)
  lines = capsys.readouterr().out.splitlines()
  want = []
  for i in range(2):
    s = np.float32(np.asarray(x[2 * i:2 * i + 2]).sum())
    want += [f"[program ({i}, 0, 0)] " + t for t in (
        "{} of {}".format(i, 2), "{1}/{0}: {s:.2f} {n!r}".format(i, 7, s=s, n="a"),
        "pid %d: sum=%8.1f %-4d|%05d %x %s %%" % (i, s, i, i, 255, i), "just %s" % i)]
  assert lines == want
  assert print_formats.mlir(S(x.shape, F32)).count("gpu.printf") == 4
  _export(print_formats, S(x.shape, F32))


@pytest.mark.gpu
def test_gpu_print_of_format_strings_prints_the_values(capfd):
  x = jnp.asarray(np.arange(4 * 128, dtype=np.float32).reshape(4, 128))
  np.testing.assert_array_equal(jax.block_until_ready(print_formats(x)), x)
  out = capfd.readouterr().out
  assert "1 of 2" in out and "just 0" in out


# ---------------------------------------------------------------- an ml.scalar given a one-element array
@mg.mgpu_kernel(out_shape=lambda x, a: x, grid=(1,))
def scaled(x, a: ml.scalar, o):
  o[...] = x[...] * a


@mg.mgpu_kernel(out_shape=lambda x, a: x, grid=(1,))
def scaled_by_element(x, a, o):
  o[...] = x[...] * a[0]


def test_a_one_element_array_for_an_ml_scalar_hints_its_element():
  """A (1,) array for an ml.scalar was told to pass `a Python int or float, or a 0-d ... array`; the
  hint names the reshape, or the read of its element without the annotation, both of which work."""
  expect(scaled, [S((128, 64), F32), S((1,), F32)], mg.SignatureError, "a: ml.scalar",
         "a is annotated ml.scalar but was given an array of shape (1,) (float32)",
         hint="pass its one element as a 0-d array, a.reshape(()), or drop the annotation and read it in the"
              " kernel as a[0]")
  e = expect(scaled, [S((128, 64), F32), S((4,), F32)], mg.SignatureError, "a: ml.scalar",
             "a is annotated ml.scalar but was given an array of shape (4,) (float32)")
  assert e.hint.endswith("drop the annotation and read it in the kernel (a[...], a[i])")
  x, a = _x(), jnp.asarray([0.25], F32)
  np.testing.assert_array_equal(scaled(x, a.reshape(()), interpret=True), x * 0.25)
  np.testing.assert_array_equal(scaled_by_element(x, a, interpret=True), x * 0.25)


# ---------------------------------------------------------------- ref parameters passed by keyword
@mg.mgpu_kernel(out_shape=lambda x, y, **k: x, grid=lambda x, y, **k: (x.shape[0] // 128,))
def difference(x, y, o, *, s: ml.constexpr = 1.0):
  i = ml.program_id(0)
  o.at[ml.ds(i * 128, 128)][...] = (x.at[ml.ds(i * 128, 128)][...] - y.at[ml.ds(i * 128, 128)][...]) * s


def _signature_error(fn):
  with pytest.raises(mg.SignatureError) as info:
    fn()
  return info.value


def test_a_ref_parameter_passed_by_keyword_is_told_where_it_goes():
  """`k(x, y, o=out)` was told to `pass o positionally, as an array`: o is an output, which the call
  returns. Inputs by keyword are told the positional call, which works."""
  x, y = _x((256, 64)), _x((256, 64), seed=1)
  e = _signature_error(lambda: difference(x, y, o=x, interpret=True))
  assert e.message == "difference: o is an output, passed by keyword"
  assert e.hint == "o is an output: outputs are returned, not passed (out_shape describes them): call difference(x, y)"
  np.testing.assert_allclose(difference(y=y, x=x, interpret=True), x - y)     # probe 38g: inputs by keyword
  e = _signature_error(lambda: difference(y=y, interpret=True))
  assert e.hint == "pass every input, by position or by keyword: difference(x, y)"
  e = _signature_error(lambda: difference(x, x=x, interpret=True))
  assert e.hint == "x is input 0, given by position already: drop x="
  np.testing.assert_allclose(difference(x, y, interpret=True), x - y)


# ---------------------------------------------------------------- hints for builtins kernels do not call
@ml.inline
def _yields(v):
  yield v


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def next_of_a_generator(x, o):
  o[...] = next(_yields(x[...]))


@mg.mgpu_kernel(out_shape=lambda x, **k: x, grid=(1,))
def map_over_weights(x, o, *, ws: ml.constexpr = (1.0, 2.0)):
  v = x[...]
  o[...] = sum(map(lambda w: v * w, ws))


@mg.mgpu_kernel(out_shape=lambda x, **k: x, grid=(1,))
def comprehension_over_weights(x, o, *, ws: ml.constexpr = (1.0, 2.0)):
  v = x[...]
  o[...] = sum([v * w for w in ws])


def test_an_unsupported_builtin_is_hinted_in_its_own_terms():
  """Every unsupported builtin's hint gave getattr's example (`ml.atomic_max rather than getattr(ml,
  'atomic_max')`), for next() and map() too; each names what to write instead now. (map() of register values
  computes since probe 52b, as the comprehension does.)"""
  spec = [S((128, 64), F32)]
  e = expect(next_of_a_generator, spec, mg.UnknownNameError, "next(", "the Python builtin next() is not supported in a kernel")
  assert e.hint.endswith("; index a static tuple or list (parts[0]); a helper returns its values (return a, b), it"
                         " does not yield them, or compute it outside the kernel and pass it as a constexpr")
  x = _x()
  np.testing.assert_allclose(comprehension_over_weights(x, interpret=True), x * 1.0 + x * 2.0)
  np.testing.assert_allclose(map_over_weights(x, interpret=True), x * 1.0 + x * 2.0)


# ---------------------------------------------------------------- globals changed in place
@ml.inline
def _leaky(v):
  return ml.where(v > 0, v, v * 0.1)


@ml.inline
def _negate(v):
  return -v


REGISTRY = {"act": _leaky}
TABLE = np.array([1.0, 2.0], np.float32)
PAIR = ([0.0], 1.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def registered_activation(x, o):
  o[...] = REGISTRY["act"](x[...]) + TABLE[1] + PAIR[0][0]


def test_a_helper_swapped_in_a_global_dict_or_a_small_table_written_into_recompiles():
  """`ACTS["act"] = other` on a dict of helpers, `W[1] = 9.0` on a small numpy table, or a list in a
  tuple written into, kept running the kernel compiled with the old helper or value: silently wrong
  results. They are changes now."""
  x = _x()
  try:
    np.testing.assert_allclose(registered_activation(x, interpret=True), jnp.where(x > 0, x, x * 0.1) + 2.0,
                               rtol=1e-6)
    REGISTRY["act"] = _negate
    np.testing.assert_allclose(registered_activation(x, interpret=True), -x + 2.0, rtol=1e-6)
    TABLE[1] = 9.0
    np.testing.assert_allclose(registered_activation(x, interpret=True), -x + 9.0, rtol=1e-6)
    PAIR[0][0] = 4.0           # a list inside a tuple
    np.testing.assert_allclose(registered_activation(x, interpret=True), -x + 13.0, rtol=1e-6)
  finally:
    REGISTRY["act"] = _leaky
    TABLE[1] = 2.0
    PAIR[0][0] = 0.0


# ---------------------------------------------------------------- a helper with no return used as a value
@ml.inline
def _doubled(v):
  v = v * 2                # (the return forgotten)


@ml.inline
def _write_doubled(ref, v):
  ref[...] = v * 2


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def uses_a_procedure(x, o):
  y = _doubled(x[...])
  o[...] = y


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def calls_a_procedure(x, o):
  _write_doubled(o, x[...])


def test_a_helper_without_a_return_used_as_a_value_is_told_so_at_the_call():
  """`y = step(v)` of a helper whose return was forgotten was reported where y was used, as `cannot store
  a Python NoneType into o` with the hint `store a register tensor`; it is reported at the call now."""
  expect(uses_a_procedure, [S((128, 64), F32)], mg.KernelTypeError, "_doubled(x[...])",
         "_doubled(...) gives no value: _doubled has no return statement with a value, so its call is None",
         hint="end _doubled with `return <its result>`, or, where it only writes refs, call it as a statement of"
              " its own: _doubled(x[...])")
  x = _x()
  np.testing.assert_allclose(calls_a_procedure(x, interpret=True), x * 2)


# ---------------------------------------------------------------- constexprs of every Python kind
class _Shouty:
  """A constexpr whose repr fails: reports must still render."""
  def __repr__(self):
    raise RuntimeError("no repr")

  def __getitem__(self, i):
    return 2.0


@mg.mgpu_kernel(out_shape=lambda x, **k: x, grid=(1,))
def kind_of_constexpr(x, o, *, c: ml.constexpr = None):
  v = x[...]
  if isinstance(c, type):
    v = v + 1.0
  elif c is Ellipsis:
    v = v + 2.0
  elif isinstance(c, (complex, frozenset, set)):
    v = v * (c.real if type(c) is complex else len(c))
  elif callable(c):
    v = v * 5.0
  elif c is not None:
    v = v * float(c[0])
  o[...] = v


@mg.mgpu_kernel(out_shape=lambda x, **k: x, grid=(1,))
def bad_constexpr_use(x, o, *, c: ml.constexpr = None):
  o[...] = x[...] + c


def test_constexprs_of_builtin_kinds_are_tested_as_in_python():
  """`isinstance(c, type)`, `c is Ellipsis`, `type(c) is complex`, `callable(c)` were MG002 (the builtins
  type, complex, callable and the constant Ellipsis unknown); a constexpr whose repr raises made the
  call's note raise RuntimeError in place of the KernelError."""
  x = _x()
  for c, want in [(int, x + 1), (..., x + 2), (3 + 1j, x * 3), (frozenset({1, 2}), x * 2), (len, x * 5),
                  (None, x), ((4.0,), x * 4)]:
    np.testing.assert_allclose(kind_of_constexpr(x, c=c, interpret=True), want, err_msg=repr(c))
  with pytest.raises(mg.KernelTypeError) as info:
    bad_constexpr_use(x, c=_Shouty(), interpret=True)
  assert any("c=<_Shouty object>" in n for n in info.value.notes)


# ---------------------------------------------------------------- integers meeting a Python float in **
@mg.mgpu_kernel(out_shape=lambda i, **k: (S(i.shape, F32),) * 4, grid=(1,))
def int_float_powers(i, a, b, c, d):
  v = i[...]
  a[...] = v ** 0.5                  # jnp: float32
  b[...] = v ** 2.0
  c[...] = 2.0 ** (v % 8 - 4)
  d[...] = (v > 3) ** 1.5


@mg.mgpu_kernel(out_shape=lambda i, n: S(i.shape, F32), grid=(1,))
def float_base_int_scalar(i, n: ml.scalar, o):
  o[...] = i[...].astype(jnp.float32) * 0.5 ** n


def _int_powers_want(i):
  return (i ** 0.5, i ** 2.0, 2.0 ** (i % 8 - 4), (i > 3) ** 1.5)


def test_integer_values_meeting_a_python_float_in_a_power_are_float32_as_in_jnp():
  """`n ** 0.5` and `2.0 ** n` of integer values were MG106 (`a float exponent needs a floating-point base`,
  `an exponent held in registers must be floating point`): jnp computes them in float32."""
  for dt in (jnp.int32, jnp.int16):
    i = jnp.asarray(np.random.default_rng(3).integers(0, 100, (128, 64)), dt)
    for got, want in zip(int_float_powers(i, interpret=True), _int_powers_want(i)):
      assert got.dtype == want.dtype == F32
      np.testing.assert_allclose(got, want, rtol=2e-6)
    _export(int_float_powers, S(i.shape, dt))
  i = jnp.asarray(np.arange(128 * 64).reshape(128, 64) % 50, jnp.int32)
  for n in (3, -2):
    np.testing.assert_allclose(float_base_int_scalar(i, n, interpret=True), i * 0.5 ** n, rtol=1e-6)
  _export(float_base_int_scalar, S(i.shape, jnp.int32), S((), jnp.int32))


@pytest.mark.gpu
def test_gpu_integer_values_meeting_a_python_float_in_a_power_match_jnp():
  i = jnp.asarray(np.random.default_rng(3).integers(0, 100, (128, 64)), jnp.int32)
  for got, want in zip(int_float_powers(i), _int_powers_want(i)):
    np.testing.assert_allclose(got, want, rtol=2e-6)
  np.testing.assert_allclose(float_base_int_scalar(i, -2), i * 0.5 ** -2, rtol=1e-6)
