"""Probe 60d: a mutation fuzzer of diagnostics (tests/mut_fuzz.py, benchmarks/probe_mut_fuzz.py, design note 200).
Valid kernels of tests/ and examples/ mutated as a user could by mistake; every mutant must run or fail with a
KernelError at the user's line, with a code and a hint.

The classes found, each fixed:

1. `a @ b` of static values (`len(first) @ len(rest)`, `n @= 2`) was an InternalError (KeyError ast.MatMult):
   the table of Python's operators on static values lacked `@`. It is Python's now: its TypeError on ints is the
   user's MG003 at the expression, and `W @ W` of module-level NumPy tables computes.
2. A static dict's methods and `dict(...)` called with arguments Python refuses (`CONFIG.values(acc=1)`,
   `CONFIG.get()`, `d.keys(1)`, `dict(d, 1)`) were InternalErrors (a raw TypeError while tracing): they ran
   unguarded, where Python's builtins were guarded. Both go through one guard now (`Tracer.python_call`).
3. A masked load's `other=` given a ref (`top.load(mask=m, other=buf)`, an SMEM buffer where `buf[...]` was meant)
   passed the type rule (a ref is a value) and failed in the interpreter (an InternalError, and on the GPU in the
   lowering): `ml.load` refuses a ref as `other` now (MG003, hint: read it into registers, `other=buf[...]`).
4. A comprehension over `ml.static_range()` / `range()` of no (or four) arguments, of keywords, or of a zero step
   was an InternalError (Python's TypeError or ValueError of range() while tracing), where a for statement's
   range said so (MG003): a comprehension's range takes the same checks now.
5. A comprehension over a huge static range (`[x[...] * j for j in range(1 << 40)]`) unrolled until killed (a
   hang), where a for statement's ml.static_range stops once its first trips show it would make more than 65,536
   values: a comprehension's clause takes the same bound (`flow.check_unrolling`).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe_util import export
from probe_util import line_of as _line

W = np.full((2, 2), 2, np.int32)
CONFIG = {"scale": 2.0, "shift": 1.0}
X = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) % 5




def _refusal(kernel, *args, **kw):
  with pytest.raises(mg.KernelError) as info:
    kernel(*args, interpret=True, **kw)
  e = info.value
  assert not isinstance(e, mg.InternalError), e
  assert e.filename == __file__ and e.hint, e
  return e


# ---------------------------------------------------------------------- 1. `@` of static values
@mg.mgpu_kernel(out_shape=lambda x: x)
def matmul_of_ints(x, o):
  n = x.shape[0] @ 2
  o[...] = x[...] * n


@mg.mgpu_kernel(out_shape=lambda x: x)
def matmul_assigned(x, o):
  n = x.shape[0]
  n @= 2
  o[...] = x[...] * n


@mg.mgpu_kernel(out_shape=lambda x: x)
def matmul_of_tables(x, o):
  n = (W @ W)[0, 1]
  o[...] = x[...] * n


@pytest.mark.parametrize("kernel, text", [(matmul_of_ints, "x.shape[0] @ 2"), (matmul_assigned, "n @= 2")])
def test_matmul_of_static_ints_is_pythons_type_error_at_the_expression(kernel, text):
  e = _refusal(kernel, X)
  assert type(e) is mg.KernelTypeError
  assert (e.lineno, e.col_offset) == _line(kernel, text)
  assert f"cannot compute {text}" in e.message and "unsupported operand type(s) for @" in e.message


def test_matmul_of_static_tables_computes():
  np.testing.assert_array_equal(matmul_of_tables(X, interpret=True), X * 8)
  export(matmul_of_tables, X)


@pytest.mark.gpu
def test_matmul_of_static_tables_gpu():
  np.testing.assert_array_equal(jax.jit(matmul_of_tables)(jnp.asarray(X)), X * 8)


# ---------------------------------------------------------------------- 2. a static dict's methods, Python's errors
@mg.mgpu_kernel(out_shape=lambda x: x)
def values_with_keyword(x, o):
  scale, shift = CONFIG.values(acc=1)
  o[...] = x[...] * scale + shift


@mg.mgpu_kernel(out_shape=lambda x: x)
def get_of_nothing(x, o):
  scale = CONFIG.get()
  o[...] = x[...] * scale


@mg.mgpu_kernel(out_shape=lambda x: x)
def keys_of_one(x, o):
  n = len(CONFIG.keys(1))
  o[...] = x[...] * n


@mg.mgpu_kernel(out_shape=lambda x: x)
def dict_of_two(x, o):
  d = dict(CONFIG, 1)
  o[...] = x[...] * d["scale"]


@mg.mgpu_kernel(out_shape=lambda x: x)
def dict_reads(x, o):
  scale, shift = CONFIG.values()
  d = dict(CONFIG, shift=3.0)
  o[...] = x[...] * scale + shift + d.get("shift", 0.0) + len(CONFIG.keys())


@pytest.mark.parametrize("kernel, text, said", [
    (values_with_keyword, "CONFIG.values(acc=1)", "values(...) failed: dict.values() takes no keyword arguments"),
    (get_of_nothing, "CONFIG.get()", "get(...) failed: get expected at least 1 argument, got 0"),
    (keys_of_one, "CONFIG.keys(1)", "keys(...) failed: dict.keys() takes no arguments (1 given)"),
    (dict_of_two, "dict(CONFIG, 1)", "dict(...) failed: dict expected at most 1 argument, got 2"),
])
def test_a_static_dicts_method_of_wrong_arguments_is_the_users_error_at_the_call(kernel, text, said):
  e = _refusal(kernel, X)
  assert type(e) is mg.KernelTypeError
  assert (e.lineno, e.col_offset) == _line(kernel, text)
  assert e.message == said
  assert "as in Python" in e.hint


def test_a_static_dicts_methods_still_compute():
  np.testing.assert_allclose(dict_reads(X, interpret=True), X * 2.0 + 1.0 + 3.0 + 2)
  export(dict_reads, X)


@pytest.mark.gpu
def test_a_static_dicts_methods_gpu():
  np.testing.assert_allclose(jax.jit(dict_reads)(jnp.asarray(X)), X * 2.0 + 1.0 + 3.0 + 2)


# ---------------------------------------------------------------------- 3. a ref as a masked load's other=
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((4, 128), x.dtype))
def other_is_a_ref(x, o):
  buf = ml.smem((4, 128), jnp.float32)
  buf[...] = x[...] * 0
  o[...] = x.at[ml.ds(0, 4), ml.ds(0, 128)].load(mask=ml.arange(128)[None, :] < 100, other=buf)


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((4, 128), x.dtype))
def other_of_one_element_is_a_ref(x, o):
  o[...] = ml.zeros((4, 128), jnp.float32) + ml.load(x.at[0, 0], mask=ml.program_id(0) < 1, other=x)


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((4, 128), x.dtype))
def other_is_read(x, o):
  buf = ml.smem((4, 128), jnp.float32)
  buf[...] = x[...] * 0 - 1
  o[...] = x.at[ml.ds(0, 4), ml.ds(0, 128)].load(mask=ml.arange(128)[None, :] < 100, other=buf[...])


@pytest.mark.parametrize("kernel, text, what, shown", [
    (other_is_a_ref, "x.at[ml.ds(0, 4), ml.ds(0, 128)].load(", "an SMEM ref", "buf"),
    (other_of_one_element_is_a_ref, "ml.load(x.at[0, 0]", "a GMEM ref", "x"),
])
def test_a_ref_as_a_masked_loads_other_is_refused_at_the_load(kernel, text, what, shown):
  x = X[:4, :].repeat(2, axis=1)
  e = _refusal(kernel, x)
  assert type(e) is mg.KernelTypeError
  assert (e.lineno, e.col_offset) == _line(kernel, text)
  assert e.message == f"ml.load's other must be a number, a scalar or a tensor, got {what}"
  assert e.hint == f"read it into registers: other={shown}[...]"


def test_a_masked_load_of_a_buffers_values_computes():
  x = X[:4, :].repeat(2, axis=1)
  want = np.where(np.arange(128)[None, :] < 100, x, -1)
  np.testing.assert_array_equal(other_is_read(x, interpret=True), want)
  export(other_is_read, x)


@pytest.mark.gpu
def test_a_masked_load_of_a_buffers_values_gpu():
  x = X[:4, :].repeat(2, axis=1)
  want = np.where(np.arange(128)[None, :] < 100, x, -1)
  np.testing.assert_array_equal(jax.jit(other_is_read)(jnp.asarray(x)), want)


# ---------------------------------------------------------------------- 4. a comprehension's range of wrong arguments
@mg.mgpu_kernel(out_shape=lambda x: x)
def comp_of_no_bound(x, o):
  s = [x[...] * j for j in ml.static_range()]
  o[...] = s[0]


@mg.mgpu_kernel(out_shape=lambda x: x)
def comp_of_zero_step(x, o):
  s = [x[...] * j for j in range(1, 2, 0)]
  o[...] = s[0]


@mg.mgpu_kernel(out_shape=lambda x: x)
def comp_of_keywords(x, o):
  s = [x[...] * j for j in ml.static_range(4, stages=2)]
  o[...] = s[0]


@mg.mgpu_kernel(out_shape=lambda x: x)
def comp_of_steps(x, o):
  s = [x[...] * j for j in ml.static_range(1, 8, 3)] + [x[...] * j for j in range(3, 0, -1)]
  o[...] = s[0] + s[1] + s[2] + s[3] + s[4]


@pytest.mark.parametrize("kernel, text, said, hint", [
    (comp_of_no_bound, "ml.static_range()", "ml.static_range takes 1 to 3 arguments by position, got 0 arguments",
     "ml.static_range(stop), ml.static_range(start, stop) or ml.static_range(start, stop, step)"),
    (comp_of_zero_step, "range(1, 2, 0)", "range's step is 0", "use a non-zero step, as range() does"),
    (comp_of_keywords, "ml.static_range(4, stages=2)",
     "ml.static_range takes 1 to 3 arguments by position, got keywords (stages=)",
     "ml.static_range(stop), ml.static_range(start, stop) or ml.static_range(start, stop, step)"),
])
def test_a_comprehensions_range_of_wrong_arguments_is_refused_at_the_range(kernel, text, said, hint):
  e = _refusal(kernel, X)
  assert type(e) is mg.KernelTypeError
  assert (e.lineno, e.col_offset) == _line(kernel, text)
  assert (e.message, e.hint) == (said, hint)


def test_a_comprehensions_stepped_ranges_compute():
  np.testing.assert_allclose(comp_of_steps(X, interpret=True), X * (1 + 4 + 7 + 3 + 2))
  export(comp_of_steps, X)


# ---------------------------------------------------------------------- 5. a comprehension unrolling without end
@mg.mgpu_kernel(out_shape=lambda x: x)
def comp_without_end(x, o):
  s = [x[...] * j for j in range(1 << 40)]
  o[...] = s[0]


@mg.mgpu_kernel(out_shape=lambda x: x)
def comp_of_many_values(x, o):
  s = [x[...] * j for j in range(1 << 12) for i in range(64)]
  o[...] = s[0]


@pytest.mark.parametrize("kernel, text, trips", [(comp_without_end, "range(1 << 40)", 1 << 40),
                                                 (comp_of_many_values, "range(1 << 12)", 1 << 12)])
def test_a_comprehension_past_the_unrolling_bound_is_refused_at_its_range(kernel, text, trips):
  e = _refusal(kernel, X)
  assert type(e) is mg.KernelTypeError
  assert (e.lineno, e.col_offset) == _line(kernel, text)
  assert e.message.startswith(f"this comprehension unrolls its body {trips} times while tracing")
  assert "65536 an unrolled loop may make" in e.message and "loop at run time" in e.hint
