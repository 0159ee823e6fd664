"""Probe 32c (a documentation audit, as a new user reading the docs): README.md, docs/*.md, the
notebooks and the ml.* docstrings, each snippet run and each claim checked. What it found: hints
for a missing function written in placeholders (`ml.where(x > 0, ...)` where the kernel's `x` is
its input ref, so the hint followed literally compared a ref), and docs that said otherwise than
the compiler does."""
import importlib.util
import os
import re

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32
ROOT = os.path.join(os.path.dirname(__file__), os.pardir)
x128 = jnp.asarray(np.random.default_rng(32).standard_normal(128).astype(np.float32))


def kernel_module(tmp_path, name: str, *body: str):
  """The kernel `k(x, out)` of these lines, in a module of its own (the names a hint binds are the
  ones its file does not use: this file's would change them)."""
  lines = "".join(f"    {line}\n" for line in body)
  (tmp_path / f"{name}.py").write_text(
      "import jax, jax.numpy as jnp\nimport mgpu_dsl as mg\nfrom mgpu_dsl import language as ml\n"
      f"@mg.mgpu_kernel(out_shape=lambda x: x)\ndef k(x, out):\n{lines}")
  spec = importlib.util.spec_from_file_location(f"{name}_{tmp_path.name}", tmp_path / f"{name}.py")
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod.k


def followed(tmp_path, hint: str, *before: str):
  """The kernel written from a hint `no ml.f: name = <operand>, then <formula> (note)`: `before`
  (the kernel's own lines), the binding, then `out[...] = <formula>`."""
  bind, formula = re.fullmatch(r"no ml\.\w+: (\w+ = .*), then (.*?)( \(.*\))?", hint).group(1, 2)
  return kernel_module(tmp_path, "followed", *before, bind, f"out[...] = {formula}")


def close(got, want, tol=1e-6):
  np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=tol, atol=tol)


# ---------------------------------------------------------------- formula hints with the call's operands
@mg.mgpu_kernel(out_shape=lambda x: x)
def sign_of_input(x, out):
  out[...] = ml.sign(x[...])


@mg.mgpu_kernel(out_shape=lambda x: x)
def sign_followed(x, out):
  out[...] = ml.where(x[...] > 0, 1, ml.where(x[...] < 0, -1, x[...]))


def test_a_missing_functions_formula_is_written_with_the_calls_operand():
  """It was `ml.where(x > 0, ...)`: here `x` is the kernel's input ref, so the hint followed
  literally compared a ref (and in another kernel named nothing at all)."""
  expect(sign_of_input, [S((128,), F32)], mg.UnknownNameError, "ml.sign", "ml has no attribute 'sign'",
         hint="no ml.sign: ml.where(x[...] > 0, 1, ml.where(x[...] < 0, -1, x[...])) (jnp.sign: x[...]'s dtype,"
              " NaN and -0.0 kept)")
  close(sign_followed(x128, interpret=True), jnp.sign(x128))


def test_a_computed_operand_the_formula_uses_twice_computes(tmp_path):
  """`jnp.sinh(x[...] * 2.0)` was MG003 whose hint bound the product to a name first, then wrote the formula
  (`v = x[...] * 2.0, then (ml.exp(v) - ml.exp(-v)) * 0.5`); since probe 48b jnp.sinh computes as XLA's."""
  k = kernel_module(tmp_path, "sinh_of_product", "out[...] = jnp.sinh(x[...] * 2.0)")
  close(k(x128, interpret=True), jnp.sinh(x128 * 2), 1e-5)


def test_a_two_operand_formula_takes_both_operands_and_avoids_the_kernels_names(tmp_path):
  """`v` is the kernel's own name: the bound operand takes another (`t`)."""
  # (since probe 47b jnp.hypot computes, as jax's own formula: the hint it had is no longer given)
  k = kernel_module(tmp_path, "hypot_of_two", "v = x[...]", "out[...] = jnp.hypot(v, v + 1.0)")
  close(k(x128, interpret=True), jnp.hypot(x128, x128 + 1), 1e-6)


@mg.mgpu_kernel(out_shape=lambda x: x)
def fmax_with_a_number(x, out):
  out[...] = ml.fmax(x[...], 0.5)


@mg.mgpu_kernel(out_shape=lambda x: x)
def fmax_followed(x, out):
  out[...] = ml.where(x[...] != x[...], 0.5, ml.maximum(x[...], 0.5))


def test_fmax_of_a_number_tests_only_the_tensor_for_nan():
  """Substituted blindly the hint held `ml.where(0.5 != 0.5, ...)`: a static bool, an MG003 of its own."""
  expect(fmax_with_a_number, [S((128,), F32)], mg.UnknownNameError, "ml.fmax", "ml has no attribute 'fmax'",
         hint="no ml.fmax: ml.maximum(x[...], 0.5) (NaN if either is NaN; for fmax's number over a NaN,"
              " ml.where(x[...] != x[...], 0.5, ml.maximum(x[...], 0.5)))")
  x = x128.at[3].set(jnp.nan)
  close(fmax_followed(x, interpret=True), jnp.fmax(x, 0.5))


@mg.mgpu_kernel(out_shape=lambda x: x)
def popc_of_input(x, out):
  out[...] = ml.popc(x[...])


@mg.mgpu_kernel(out_shape=lambda x: x)
def popc_followed(x, out):
  u = ml.bitcast(x[...], jnp.uint32)
  v = u - ((u >> 1) & 0x55555555)
  v = (v & 0x33333333) + ((v >> 2) & 0x33333333)
  count = (((v + (v >> 4)) & 0x0F0F0F0F) * 0x01010101) >> 24
  out[...] = count.astype(jnp.int32)


@mg.mgpu_kernel(out_shape=lambda x: x)
def popc_hinted(x, out):
  out[...] = ml.extra.cuda.libdevice.popc(x[...])


def test_a_missing_bit_count_of_ml_names_the_operand_as_jnps_does():
  """The hint wrote the SWAR steps (popc_followed) until probe 71b made libdevice's popc compute: it names that call
  and lax's, in the operand's words."""
  e = expect(popc_of_input, [S((128,), I32)], mg.UnknownNameError, "ml.popc", "ml has no attribute 'popc'")
  assert e.hint.startswith("no ml.popc: libdevice's, ml.extra.cuda.libdevice.popc(x[...]) (CUDA's __popc: an int32"
                           " count), or jax.lax.population_count(x[...])")
  x = jnp.asarray(np.random.default_rng(1).integers(-2**31, 2**31 - 1, 128).astype(np.int32))
  close(popc_followed(x, interpret=True), jax.lax.population_count(x), 0)
  close(popc_hinted(x, interpret=True), jax.lax.population_count(x), 0)


# ---------------------------------------------------------------- scan and sort axis hints
@mg.mgpu_kernel(out_shape=lambda x: S((8, 128), F32))
def cumsum_without_axis(x, out):
  out[...] = ml.cumsum(x[...].reshape(8, 128))


@mg.mgpu_kernel(out_shape=lambda x: S((8, 128), F32))
def cumsum_followed(x, out):
  out[...] = ml.cumsum(x[...].reshape(8, 128), axis=1)


def test_a_2d_scan_without_an_axis_names_the_users_tensor():
  """It was `ml.cumsum(x, axis=1)`, the input ref of this kernel."""
  expect(cumsum_without_axis, [S((1024,), F32)], mg.KernelTypeError, "ml.cumsum",
         "ml.cumsum of a 2-D tensor needs an axis (jnp's axis=None flattens it)",
         hint="ml.cumsum(x[...].reshape(8, 128), axis=1) scans each row; ml.cumsum(x[...].reshape(8, 128),"
              " axis=0) each column; jnp's flattened scan is ml.cumsum(x[...].reshape(8, 128).reshape(-1)), a 1-D"
              " vector")
  x = jnp.asarray(np.random.default_rng(2).standard_normal(1024).astype(np.float32))
  close(cumsum_followed(x, interpret=True), jnp.cumsum(x.reshape(8, 128), axis=1), 1e-5)


@mg.mgpu_kernel(out_shape=lambda x: x)
def sort_bad_axis(x, out):
  out[...] = ml.sort(x[...].reshape(2, 64), axis=3).reshape(128)


def test_a_sorts_bad_axis_names_the_users_tensor():
  expect(sort_bad_axis, [S((128,), F32)], mg.KernelTypeError, "ml.sort",
         "ml.sort: axis must be a static int in [-2, 2), got 3",
         hint="ml.sort(x[...].reshape(2, 64)) sorts along the last axis")


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def lax_convert_of_product(x, out):
  out[...] = jax.lax.convert_element_type(x[...] * 2.0, jnp.int32)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def convert_followed(x, out):
  out[...] = (x[...] * 2.0).astype(jnp.int32)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def jnp_asarray_with_dtype(x, out):
  out[...] = jnp.asarray(x[...], dtype=jnp.int32)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def lax_bitcast_of_input(x, out):
  out[...] = jax.lax.bitcast_convert_type(x[...], jnp.int32)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def bitcast_followed(x, out):
  out[...] = ml.bitcast(x[...], jnp.int32)


def test_jax_conversions_of_a_register_value_are_hinted_with_the_calls_operands():
  """They said x.astype(dtype) and ml.bitcast(x, dtype): x this kernel's input ref, dtype no name; then the hints
  wrote the calls' operands; since probe 47b the calls compute as those forms."""
  close(lax_convert_of_product(x128 * 10, interpret=True), jax.lax.convert_element_type(x128 * 20, I32), 0)
  close(convert_followed(x128 * 10, interpret=True), (x128 * 20).astype(I32), 0)
  close(jnp_asarray_with_dtype(x128 * 10, interpret=True), jnp.asarray(x128 * 10, dtype=I32), 0)
  close(lax_bitcast_of_input(x128, interpret=True), jax.lax.bitcast_convert_type(x128, I32), 0)
  close(bitcast_followed(x128, interpret=True), jax.lax.bitcast_convert_type(x128, I32), 0)


# ---------------------------------------------------------------- names the docs use
DOCS = ("README.md", "docs/language.md", "docs/errors.md", "docs/tooling.md", "docs/autodiff.md",
        "docs/design-notes.md")
# names the docs give as ones mgpu_dsl does not have (errors.md, MG002: what to write instead)
NOT_THERE = {"ml": {"fliplr", "log10", "sign", "view", "gelu", "py",
                    # ATen's operators errors.md names as hinted (frontend/aten_hints.py)
                    "count_nonzero", "diag", "dropout", "eye", "index_select", "isposinf", "linspace",
                    "logical_and", "nanmax", "norm",
                    # jax.nn's and jnp's names errors.md names as hinted (frontend/ml_name_hints.py)
                    "mish", "silu", "log_sigmoid", "logaddexp", "matmul", "einsum",
                    # jnp's numerics functions errors.md names as hinted (frontend/nan_name_hints.py)
                    "isclose", "nanmean", "nanargmax", "ptp", "median", "heaviside", "deg2rad", "arctanh",
                    # JAX's control flow spelt with ml. (errors.md: MG002 naming jax.lax's call, probe 48h)
                    "fori_loop",
                    # the host's SM count spelt with ml. in a grid callable (MG006's hint names mg.num_sms, probe 67a)
                    "num_sms"},
             "mg": {"Config", "cdiv", "heuristics", "jit", "program_id"}}


def test_every_ml_and_mg_name_the_docs_use_exists_and_every_one_they_call_missing_does_not():
  """errors.md listed ml.softmax among the names Triton or jnp has and mgpu_dsl does not."""
  text = "".join(open(os.path.join(ROOT, d)).read() for d in DOCS)
  listed = re.search(r"mgpu_dsl does not \((.*?)\) gets a hint", text, re.S).group(1)   # errors.md, MG002
  listed = set(re.findall(r"`ml\.(\w+)`", listed))
  assert listed <= NOT_THERE["ml"], listed - NOT_THERE["ml"]
  for prefix, module in (("ml", ml), ("mg", mg)):
    used = set(re.findall(rf"\b{prefix}\.([A-Za-z_]\w*)", text))
    assert {n for n in used - NOT_THERE[prefix] if not hasattr(module, n)} == set()
    assert {n for n in NOT_THERE[prefix] if hasattr(module, n)} == set()


def test_every_ml_function_has_a_docstring_and_a_place_in_the_language_reference():
  text = open(os.path.join(ROOT, "docs/language.md")).read()
  fns = [n for n in ml.__all__ if callable(getattr(ml, n)) and not isinstance(getattr(ml, n), type)]
  assert [n for n in fns if not (getattr(ml, n).__doc__ or "").strip()] == []
  assert [n for n in fns if not re.search(rf"\bml\.{n}\b", text)] == []


# ---------------------------------------------------------------- hints of ml.* calls with the user's operand
@mg.mgpu_kernel(out_shape=lambda x: x)
def exp2_approx_not_a_bool(x, out):
  out[...] = ml.exp2(x[...] * 2.0, approx=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def exp2_approx_followed(x, out):
  out[...] = ml.exp2(x[...] * 2.0, approx=True)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.bool_))
def not_of_an_int(x, out):
  v = x[...].astype(jnp.int32)
  out[...] = not v


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.bool_))
def not_followed(x, out):
  v = x[...].astype(jnp.int32)
  out[...] = not v != 0


@mg.mgpu_kernel(out_shape=lambda x: S((64, 64), x.dtype))
def transpose_with_axes(x, out):
  out[...] = ml.transpose(x[...] * 2.0, (0, 0))      # ((0, 1) is jnp's identity, probe 45f)


@mg.mgpu_kernel(out_shape=lambda x: S((64, 64), x.dtype))
def transpose_followed(x, out):
  out[...] = ml.transpose(x[...] * 2.0)


def test_hints_of_ml_calls_write_the_users_operand():
  """They wrote `ml.exp2(x, approx=True)`, `compare first: x != 0` and `ml.transpose(x)`, with this
  kernel's input ref for x (also `x.astype(jnp.float32)` and `ml.round(x, 2)`)."""
  expect(exp2_approx_not_a_bool, [S((128,), F32)], mg.KernelTypeError, "ml.exp2",
         "ml.exp2's approx must be True or False, got 1", hint="ml.exp2(x[...] * 2.0, approx=True)")
  close(exp2_approx_followed(x128, interpret=True), jnp.exp2(x128 * 2), 1e-5)
  expect(not_of_an_int, [S((128,), F32)], mg.UnsupportedDtypeError, "not v",
         "'not' on int32; use it on booleans (comparisons)", hint="compare first: v != 0")
  close(not_followed(x128 * 3, interpret=True), (x128 * 3).astype(I32) == 0, 0)
  expect(transpose_with_axes, [S((64, 64), F32)], mg.KernelTypeError, "ml.transpose",
         "ml.transpose(x, axes=(0, 0)): 2-D tensors swap their two axes only",
         hint="leave axes out: ml.transpose(x[...] * 2.0)")
  x = jnp.asarray(np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32))
  close(transpose_followed(x, interpret=True), (x * 2).T, 0)


# ---------------------------------------------------------------- a narrow column window of a dot result
@mg.mgpu_kernel(out_shape=lambda a: S((64, 3), F32))
def dot_columns_5_to_8(a, out):
  a_s = ml.smem((64, 64))
  ml.copy(a, a_s)
  acc = ml.dot(a_s, a_s.T)
  out[...] = acc[:, 5:8]


@mg.mgpu_kernel(out_shape=lambda a: S((64, 3), F32))
def dot_columns_followed(a, out):
  a_s = ml.smem((64, 64))
  ml.copy(a, a_s)
  acc = ml.dot(a_s, a_s.T)
  buf = ml.smem((64, 64), jnp.float32)
  buf[...] = acc
  v = buf.at[:, ml.ds(5, 32)].load(mask=ml.arange(32)[None, :] < 3, other=0)
  out.at[:, ml.ds(0, 32)].store(v, mask=ml.arange(32)[None, :] < 3)


def test_a_narrow_column_window_of_a_dot_result_is_hinted_as_a_window_that_works():
  """The hint read buf.at[:, 5:8][...]: 192 elements, itself an MG204 (not a multiple of 128)."""
  expect(dot_columns_5_to_8, [S((64, 64), jnp.float16)], mg.LayoutError, "acc[:, 5:8]",
         "columns 5:8 do not start and end on the tensor-core layout's 8-column tiles",
         hint="slice at multiples of 8 columns (64 is the usual chunk); for a narrower window, stage the tile"
              " through SMEM and read the window there: buf = ml.smem((64, 64), jnp.float32); buf[...] = acc;"
              " v = buf.at[:, ml.ds(5, 32)].load(mask=ml.arange(32)[None, :] < 3, other=0) (a window of 192"
              " elements is read 32 columns wide; store it under the same mask, e.g. out.at[:, ml.ds(0,"
              " 32)].store(v, mask=ml.arange(32)[None, :] < 3))")
  a = jnp.asarray(np.random.default_rng(4).standard_normal((64, 64)).astype(np.float16))
  want = (a.astype(F32) @ a.astype(F32).T)[:, 5:8]
  close(dot_columns_followed(a, interpret=True), want, 1e-2)


# ---------------------------------------------------------------- a stencil's hint reads the user's ref
@mg.mgpu_kernel(out_shape=lambda a: a)
def roll_of_input(a, out):
  out[...] = jnp.roll(a[...], 1)


@mg.mgpu_kernel(out_shape=lambda a: a)
def roll_followed(a, out):
  out[...] = a[(ml.arange(a.shape[0]) - 1) % a.shape[0]]


@mg.mgpu_kernel(out_shape=lambda a: a)
def shift_followed(a, out):
  j = -1 + ml.arange(a.shape[0])
  out[...] = a.at[ml.ds(-1, a.shape[0])].load(mask=(j >= 0) & (j < a.shape[0]), other=0.0)


@mg.mgpu_kernel(out_shape=lambda a: a, grid=lambda a: (a.shape[0] // 128,))
def roll_of_a_window(a, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = jnp.roll(a.at[ml.ds(i * 128, 128)][...], 1)


def test_a_stencils_hint_reads_the_ref_the_rolled_value_came_from():
  """It read x.at[ml.ds(s - 1, n)] and x[(s + ml.arange(n) - 1) % x.shape[0]]: no x, s or n here. Since probe 46a a
  vector's jnp.roll hinted ml.roll, and since probe 46i it is ml.roll: the call computes, as jnp's."""
  a = jnp.arange(256, dtype=F32)
  close(roll_of_input(a, interpret=True), jnp.roll(a, 1), 0)
  close(roll_of_a_window(a, interpret=True), jnp.concatenate([jnp.roll(a[:128], 1), jnp.roll(a[128:], 1)]), 0)
  close(roll_followed(a, interpret=True), jnp.roll(a, 1), 0)
  close(shift_followed(a, interpret=True), jnp.pad(a, (1, 0))[:256], 0)


# ---------------------------------------------------------------- a ref stored as a value; a grid that falls short
@mg.mgpu_kernel(out_shape=lambda x: x)
def ref_stored(x, out):
  out[...] = x


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def floor_grid_register_store(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: ((x.shape[0] + 128 - 1) // 128,))
def ceiling_grid_followed(x, out):
  i = ml.program_id(0)
  offs = i * 128 + ml.arange(128)
  v = x.at[ml.ds(i * 128, 128)].load(mask=offs < x.shape[0], other=0.0)
  out.at[ml.ds(i * 128, 128)].store(v, mask=offs < out.shape[0])


def test_a_ref_stored_as_a_value_is_hinted_with_its_own_names():
  """It said `ref[...] = other_ref[...] * 2`."""
  expect(ref_stored, [S((128,), F32)], mg.KernelTypeError, "out[...] = x", "cannot store a GMEM ref into out",
         hint="store a register tensor: out[...] = x[...] (the ref read into registers)")


def test_a_grid_that_falls_short_of_a_register_stored_output_says_the_store_needs_a_mask():
  """Following the hint's ceiling grid alone made the last program's unmasked register store an
  MG203: only ml.copy stores drop what falls outside the array."""
  e = expect(floor_grid_register_store, [S((300,), F32)], mg.UncoveredOutputError, "out.at[",
             "out[256:300] is never written: none of the 2 programs of grid (2,) writes it, so 44 of 300"
             " elements of out would stay uninitialised")
  assert ("a register store needs a mask of out's extent: out.at[...].store(v, mask=offs < out.shape[0])"
          in e.hint), e.hint
  x = jnp.arange(300, dtype=F32)
  close(ceiling_grid_followed(x, interpret=True), x, 0)
