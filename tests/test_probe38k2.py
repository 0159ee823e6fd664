"""Probe 38k, part 2 (part 1: tests/test_probe38k.py): mistakes kernel authors make and their diagnostics.

7. The hint of a float32 tile product written `v @ w` or `jnp.dot(v, w)` stages both operands in
   SMEM, K-major (a float32 A cannot come from registers, and b is read stored (n, k)): followed, the
   old hint failed with MG106 (register A) or MG501 (b stored (k, n)); `v @ v.T` stages v once.
8. jnp and jax.nn functions on register values get the formula `ml.<name>` already had
   (`jnp.logaddexp`, `jax.nn.soft_sign`: the generic "decorate a helper" before), logaddexp's keeps
   -inf and -inf at -inf (NaN before, as followed in a split attention's combine), and
   `jnp.linalg.norm(v, axis=-1, keepdims=True)` keeps keepdims (followed, `v / norm` was MG202).
9. A persistent loop that starts at ml.program_id(0) but steps by a count other than the grid's
   (`range(pid, n, 1)`, `ml.range(pid, n, 1, stages=2)`, a step of 5 on a grid of 4) names the loop
   and says to step by ml.num_programs(0); the hints were to split the output by program id, or to
   launch more programs.
10. A loop header with a float count (`ml.range(x.shape[0] / 64, stages=2)`) is rewritten with //, and
   a step of 0 says it never advances (it said loops count upwards, though static negative steps work).
11. A buffer whose dtype was inferred from a copy, stored a value converted on purpose
   (`buf[...] = buf[...].astype(jnp.bfloat16)` to copy bfloat16 out), is told to keep the converted
   values in a buffer of their own; the hint converted them back (`.astype(jnp.bfloat16).astype(jnp.float32)`).
12. A store through a GMEM output's `.T` (`out.T[...] = v`) is told to store the value transposed; the
   hint was the read's, to copy the output into SMEM first (reading what nothing wrote)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

X = jax.ShapeDtypeStruct((256, 128), jnp.float32)


def _error(kernel, *specs):
  with pytest.raises(mg.KernelError) as info:
    kernel.check(*specs)
  return info.value


def _line(fn, text):
  import inspect
  lines, first = inspect.getsourcelines(fn)
  return first + next(k for k, l in enumerate(lines) if text in l)


# -- 7. float32 tile products: the ml.dot hint stages both operands K-major --------------------

P32 = dict(precision=jax.lax.Precision.HIGHEST)
W = jax.ShapeDtypeStruct((128, 64), jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x, w: jax.ShapeDtypeStruct((256, 64), x.dtype), grid=lambda x, w: (x.shape[0] // 64,))
def f32_matmul(x, w, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  wv = w[...]
  out.at[ml.ds(i * 64, 64)][...] = v @ wv


@mg.mgpu_kernel(out_shape=lambda x, w: jax.ShapeDtypeStruct((256, 64), x.dtype), grid=lambda x, w: (x.shape[0] // 64,))
def f32_matmul_fixed(x, w, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  wv = w[...]
  vbuf = ml.smem((64, 128), jnp.float32); vbuf[...] = v; wvbuf = ml.smem((64, 128), jnp.float32); wvbuf[...] = wv.T
  out.at[ml.ds(i * 64, 64)][...] = ml.dot(vbuf, wvbuf.T)


@mg.mgpu_kernel(out_shape=lambda x, w: jax.ShapeDtypeStruct((256, 64), x.dtype), grid=lambda x, w: (x.shape[0] // 64,))
def f32_jnp_dot_ref(x, w, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = jnp.dot(v, w[...])


@mg.mgpu_kernel(out_shape=lambda x, w: jax.ShapeDtypeStruct((256, 64), x.dtype), grid=lambda x, w: (x.shape[0] // 64,))
def f32_jnp_dot_ref_fixed(x, w, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  vbuf = ml.smem((64, 128), jnp.float32); vbuf[...] = v; wbuf = ml.smem((64, 128), jnp.float32); wbuf[...] = w[...].T
  out.at[ml.ds(i * 64, 64)][...] = ml.dot(vbuf, wbuf.T)


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((256, 64), x.dtype), grid=lambda x: (x.shape[0] // 64,))
def f32_gram(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = v @ v.T


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((256, 64), x.dtype), grid=lambda x: (x.shape[0] // 64,))
def f32_gram_fixed(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  vbuf = ml.smem((64, 128), jnp.float32); vbuf[...] = v
  out.at[ml.ds(i * 64, 64)][...] = ml.dot(vbuf, vbuf.T)


S = "_s"      # (the hint's buffer names avoid the file's identifiers: not written out here)
K_MAJOR = ("; ml.dot reads float32 operands from SMEM buffers stored K-major (a as (m, k), b as (n, k), passed"
           " transposed), so stage the operands first: ")


@pytest.mark.parametrize("kernel, fixed, specs, text, cls, hint, want", [
    (f32_matmul, f32_matmul_fixed, (X, W), "v @ wv", mg.UnsupportedSyntaxError,
     f"write ml.dot(v{S}, wv{S}.T) (on the tensor cores; ml.dot(a, b, acc) adds the product to acc)" + K_MAJOR
     + f"v{S} = ml.smem((64, 128), jnp.float32); v{S}[...] = v; wv{S} = ml.smem((64, 128), jnp.float32);"
     f" wv{S}[...] = wv.T",
     lambda x, w: jnp.dot(x, w, **P32)),
    (f32_jnp_dot_ref, f32_jnp_dot_ref_fixed, (X, W), "jnp.dot(v, w[...])", mg.KernelTypeError,
     f"write ml.dot(v{S}, w{S}.T) (on the tensor cores; ml.dot(a, b, acc) adds the product to acc)" + K_MAJOR
     + f"v{S} = ml.smem((64, 128), jnp.float32); v{S}[...] = v; w{S} = ml.smem((64, 128), jnp.float32);"
     f" w{S}[...] = w[...].T", lambda x, w: jnp.dot(x, w, **P32)),
    (f32_gram, f32_gram_fixed, (X,), "v @ v.T", mg.UnsupportedSyntaxError,
     f"write ml.dot(v{S}, v{S}.T) (on the tensor cores; ml.dot(a, b, acc) adds the product to acc)" + K_MAJOR
     + f"v{S} = ml.smem((64, 128), jnp.float32); v{S}[...] = v",
     lambda x: jnp.einsum("bik,bjk->bij", *[x.reshape(4, 64, 128)] * 2, **P32).reshape(256, 64)),
], ids=["matmul", "jnp_dot_of_ref", "gram"])
def test_a_float32_tile_product_computes_as_its_hint_staged_it(kernel, fixed, specs, text, cls, hint, want):
  """It was MG001 / MG003 with `hint` (the operands staged K-major, followed in `fixed`); since probe 48b the
  product itself computes as that staging does."""
  fixed.check(*specs)
  args = [rand.normal(rand.key(11 + k), s.shape) for k, s in enumerate(specs)]
  np.testing.assert_allclose(np.asarray(fixed(*args, interpret=True)), np.asarray(want(*args)), rtol=3e-2, atol=3e-1)
  np.testing.assert_allclose(np.asarray(kernel(*args, interpret=True)), np.asarray(fixed(*args, interpret=True)),
                             rtol=1e-5, atol=1e-4)


# -- 8. jnp formulas: logaddexp, soft_sign, norm's keepdims --------------------------------------

@mg.mgpu_kernel(out_shape=lambda x, y: x, grid=lambda x, y: (x.shape[0] // 64,))
def log_add(x, y, out):
  i = ml.program_id(0)
  a = x.at[ml.ds(i * 64, 64)][...]
  b = y.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = jnp.logaddexp(a, b)


@mg.mgpu_kernel(out_shape=lambda x, y: x, grid=lambda x, y: (x.shape[0] // 64,))
def log_add_fixed(x, y, out):
  i = ml.program_id(0)
  a = x.at[ml.ds(i * 64, 64)][...]
  b = y.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = ml.where(a == b, a + 0.6931471805599453, ml.maximum(a, b) + ml.log1p(ml.exp(
      -ml.abs(a - b))))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def soft_sign(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = jax.nn.soft_sign(v)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def normalize(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = v / jnp.linalg.norm(v, axis=-1, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def normalize_fixed(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = v / ml.sqrt(ml.sum(v * v, axis=-1, keepdims=True))


def test_jnp_logaddexp_computes_the_formula_that_keeps_minus_infinity():
  """Hinted here (MG003, the formula written out); since probe 47h jnp.logaddexp computes as lax's formula."""
  x = rand.normal(rand.key(20), (256, 128)) * 3
  y = rand.normal(rand.key(21), (256, 128)) * 3
  x = x.at[:, :8].set(-jnp.inf).at[:4].set(jnp.inf)
  y = y.at[:, :4].set(-jnp.inf).at[:2].set(jnp.inf).at[10, 20].set(x[10, 20])
  for kernel in (log_add, log_add_fixed):
    np.testing.assert_allclose(np.asarray(kernel(x, y, interpret=True)), np.asarray(jnp.logaddexp(x, y)),
                               rtol=1e-6, atol=1e-6)


def test_jax_nn_soft_sign_computes_as_its_formula():
  """It was MG003 whose hint wrote `v / (1 + ml.abs(v))`; since probe 48b it computes as that formula."""
  x = rand.normal(rand.key(23), (256, 128))
  np.testing.assert_allclose(np.asarray(soft_sign(x, interpret=True)), np.asarray(jax.nn.soft_sign(x)), rtol=1e-6)


def test_a_norm_with_keepdims_computes_with_keepdims():
  """Hinted here with keepdims (MG003); since probe 47h jnp.linalg.norm computes as jnp's formula."""
  x = rand.normal(rand.key(22), (256, 128))
  for kernel in (normalize, normalize_fixed):
    np.testing.assert_allclose(np.asarray(kernel(x, interpret=True)),
                               np.asarray(x / jnp.linalg.norm(x, axis=-1, keepdims=True)), rtol=1e-5, atol=1e-6)


# -- 9. a persistent loop that does not step by the grid ----------------------------------------

XL = jax.ShapeDtypeStruct((1024, 128), jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def stride_one_pipelined(x, out):
  pid = ml.program_id(0)
  buf = ml.smem((64, 128)); o = ml.smem((64, 128))
  for t in ml.range(pid, x.shape[0] // 64, 1, stages=2):
    ml.copy(x.at[ml.ds(t * 64, 64)], buf)
    o[...] = buf[...] * 2
    ml.copy(o, out.at[ml.ds(t * 64, 64)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def stride_one_pipelined_fixed(x, out):
  pid = ml.program_id(0)
  buf = ml.smem((64, 128)); o = ml.smem((64, 128))
  for t in ml.range(pid, x.shape[0] // 64, ml.num_programs(0), stages=2):
    ml.copy(x.at[ml.ds(t * 64, 64)], buf)
    o[...] = buf[...] * 2
    ml.copy(o, out.at[ml.ds(t * 64, 64)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def stride_five(x, out):
  pid = ml.program_id(0)
  for t in range(pid, x.shape[0] // 64, 5):
    out.at[ml.ds(t * 64, 64)][...] = x.at[ml.ds(t * 64, 64)][...] * 2


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def stride_five_fixed(x, out):
  pid = ml.program_id(0)
  for t in range(pid, x.shape[0] // 64, ml.num_programs(0)):
    out.at[ml.ds(t * 64, 64)][...] = x.at[ml.ds(t * 64, 64)][...] * 2


@pytest.mark.parametrize("kernel, fixed, cls, write, message, step, why", [
    (stride_one_pipelined, stride_one_pipelined_fixed, mg.RaceError, "ml.copy(o, out",
     "program (0, 0, 0) and program (1, 0, 0) both write out[960, 0]: programs run in no fixed order, so the result"
     " depends on timing", 1, "so programs meet on the same tiles"),
    (stride_five, stride_five_fixed, mg.UncoveredOutputError, "out.at[",
     "out[256:320, :] is never written: none of the 4 programs of grid (4,) writes it, so 24576 of 131072 elements"
     " of out would stay uninitialised", 5, "so the tiles t with t % 5 >= 4 are left to no program"),
], ids=["race", "uncovered"])
def test_a_persistent_loop_not_stepping_by_the_grid_is_told_to(kernel, fixed, cls, write, message, step, why):
  e = _error(kernel, XL)
  assert type(e) is cls
  assert (e.lineno, e.col_offset) == (_line(kernel, write), 4)
  assert e.message == message
  assert e.hint == (f"the loop at line {_line(kernel, 'for t in')} walks tiles from ml.program_id(0) in steps of"
                    f" {step}, but the grid has 4 programs along axis 0, {why}: step by the number of programs,"
                    f" range(ml.program_id(0), n, ml.num_programs(0)), so each tile has one program")
  fixed.check(XL)
  x = rand.normal(rand.key(23), (1024, 128))
  np.testing.assert_array_equal(np.asarray(fixed(x, interpret=True)), np.asarray(x * 2))


# -- 10. loop headers: a float count, a step of 0 -------------------------------------------------

@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def float_trip_count(x, out):
  buf = ml.smem((64, 128))
  for t in ml.range(x.shape[0] / 64, stages=2):
    ml.copy(x.at[ml.ds(t * 64, 64)], buf)
    out.at[ml.ds(t * 64, 64)][...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def float_trip_count_fixed(x, out):
  buf = ml.smem((64, 128))
  for t in ml.range(x.shape[0] // 64, stages=2):
    ml.copy(x.at[ml.ds(t * 64, 64)], buf)
    out.at[ml.ds(t * 64, 64)][...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def zero_step(x, out):
  for t in range(0, x.shape[0] // 64, 0):
    out.at[ml.ds(t * 64, 64)][...] = x.at[ml.ds(t * 64, 64)][...]


def test_a_float_trip_count_is_written_with_floor_division():
  e = _error(float_trip_count, XL)
  assert type(e) is mg.KernelTypeError and e.code == "MG003"
  assert (e.lineno, e.col_offset) == (_line(float_trip_count, "for t in"), 11)
  assert e.message == "a loop bound must be an integer scalar, got a Python float"
  assert e.hint == "a count is an int: divide with //, ml.range(x.shape[0] // 64, stages=2)"
  x = rand.normal(rand.key(24), (1024, 128))
  np.testing.assert_array_equal(np.asarray(float_trip_count_fixed(x, interpret=True)), np.asarray(x))


def test_a_step_of_zero_says_it_never_advances():
  e = _error(zero_step, XL)
  assert type(e) is mg.KernelTypeError and e.code == "MG003"
  assert (e.lineno, e.col_offset) == (_line(zero_step, "for t in"), 11)
  assert e.message == "range() arg 3 must not be zero: a step of 0 never reaches the end"
  assert e.hint == ("step by a positive count to count up, range(a, b, 1), or a negative one to count down,"
                    " range(b - 1, a - 1, -1)")


# -- 11. a converted value stored into a buffer inferred as another dtype ------------------------

@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct(x.shape, jnp.bfloat16), grid=lambda x: (x.shape[0] // 64,))
def narrowed_in_place(x, out):
  i = ml.program_id(0)
  buf = ml.smem((64, 128))
  ml.copy(x.at[ml.ds(i * 64, 64)], buf)
  buf[...] = buf[...].astype(jnp.bfloat16)
  ml.copy(buf, out.at[ml.ds(i * 64, 64)])


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct(x.shape, jnp.bfloat16), grid=lambda x: (x.shape[0] // 64,))
def narrowed_in_place_fixed(x, out):
  i = ml.program_id(0)
  buf = ml.smem((64, 128))
  ml.copy(x.at[ml.ds(i * 64, 64)], buf)
  buf_bfloat16 = ml.smem(buf.shape, jnp.bfloat16); buf_bfloat16[...] = buf[...].astype(jnp.bfloat16)
  ml.copy(buf_bfloat16, out.at[ml.ds(i * 64, 64)])


def test_a_value_converted_on_purpose_gets_a_buffer_of_its_own():
  e = _error(narrowed_in_place, X)
  assert type(e) is mg.DtypeConflictError and e.code == "MG103"
  line = _line(narrowed_in_place, "buf[...] = buf")
  assert (e.lineno, e.col_offset) == (line, 2)
  assert e.message == (f"buf (SMEM, inferred dtype) would be bfloat16 here (store of bfloat16), but line {line - 1}"
                       f" already made it float32 (copy from x.at[ml.ds(i * 64, 64)])")
  assert e.hint == (f"buf holds float32 (line {line - 1}): keep the bfloat16 values in a buffer of their own,"
                    f" buf_bfloat16 = ml.smem(buf.shape, jnp.bfloat16); buf_bfloat16[...] ="
                    f" buf[...].astype(jnp.bfloat16), and use buf_bfloat16 where they go (ml.copy(buf_bfloat16, ...))")
  narrowed_in_place_fixed.check(X)
  x = rand.normal(rand.key(25), (256, 128))
  np.testing.assert_array_equal(np.asarray(narrowed_in_place_fixed(x, interpret=True), np.float32),
                                np.asarray(x.astype(jnp.bfloat16), np.float32))


# -- 12. a store through a GMEM ref's .T ------------------------------------------------------

@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def store_through_t(x, out):
  out.T[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def store_through_t_fixed(x, out):
  out[...] = x[...].T


def test_a_store_through_a_gmem_transpose_stores_the_value_transposed():
  spec = jax.ShapeDtypeStruct((128, 128), jnp.float32)
  e = _error(store_through_t, spec)
  assert type(e) is mg.KernelTypeError and e.code == "MG003"
  assert (e.lineno, e.col_offset) == (_line(store_through_t, "out.T[...]"), 2)
  assert e.message == "out.T: only this CTA's SMEM buffers have a transposed view, not GMEM refs"
  assert e.hint == "store the value transposed: out[...] = x[...].T (a register transpose, through SMEM)"
  store_through_t_fixed.check(spec)
  x = rand.normal(rand.key(26), (128, 128))
  np.testing.assert_array_equal(np.asarray(store_through_t_fixed(x, interpret=True)), np.asarray(x.T))
