"""Probe 25a (Triton and NumPy habits): names and methods mgpu_dsl lacks (ml.flip, ml.view,
ml.umulhi, x.to, v.prod, x.stride; ml.softmax and ml.any until they became builtins) got a misleading "did you mean" or a
list of attributes; jnp.log1p did not get ml.log1p's formula; a preallocated output passed to a
kernel, a pipelined loop of register loads and an int condition got hints that did not say
what to write."""
import inspect
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- A1: missing ml names
@mg.mgpu_kernel(out_shape=lambda x, *, op: x, grid=(1,))
def triton_names(x, out, *, op: ml.constexpr):
  v = x[...]
  if op == "flip":
    out[...] = ml.flip(v, 0)
  elif op == "softmax":
    out[...] = ml.softmax(v)
  elif op == "view":
    out[...] = ml.view(v, (128,))
  elif op == "umulhi":
    out[...] = ml.umulhi(v, v)


# (ml.umulhi was MG002 with a 16-bit-halves formula for its hint; a builtin since probe 49g)


@pytest.mark.parametrize("op,dtype,hint", [("view", F32, "write v.reshape((128,))")])
def test_missing_triton_names_say_what_to_write(op, dtype, hint):
  # flip was "did you mean ml.clip?", softmax "did you mean ml.max?", view and umulhi "check the spelling"
  expect(triton_names, [S((128,), dtype)], mg.UnknownNameError, f"ml.{op}",
         f"ml has no attribute '{op}'", hint=hint, op=op)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def flipped(x, out):
  n = x.shape[0]
  out[...] = x[n - 1 - ml.arange(n)]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def softmax_rows(x, out):
  v = x[...]
  e = ml.exp(v - ml.max(v, axis=-1, keepdims=True))
  out[...] = e / ml.sum(e, axis=-1, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda a, b: a, grid=(1,))
def mulhi(a_ref, b_ref, out):
  a, b = a_ref[...], b_ref[...]
  al, ah, bl, bh = a & 0xFFFF, a >> 16, b & 0xFFFF, b >> 16
  m = (al * bl >> 16) + (ah * bl & 0xFFFF) + (al * bh & 0xFFFF)
  out[...] = ah * bh + (ah * bl >> 16) + (al * bh >> 16) + (m >> 16)


def test_the_hinted_flip_softmax_and_umulhi_forms_run():
  x = jnp.arange(128, dtype=F32)
  np.testing.assert_array_equal(flipped(x, interpret=True), x[::-1])
  np.testing.assert_array_equal(triton_names(x, interpret=True, op="flip"), x[::-1])    # ml.flip (test_probe33b)
  _export(flipped, S((128,), F32))
  y = rand.normal(rand.key(0), (16, 128), F32)
  np.testing.assert_allclose(softmax_rows(y, interpret=True), jax.nn.softmax(y, axis=-1), rtol=1e-5, atol=1e-7)
  _export(softmax_rows, S((16, 128), F32))
  a = rand.bits(rand.key(1), (128,), jnp.uint32)
  b = rand.bits(rand.key(2), (128,), jnp.uint32)
  want = ((np.asarray(a).astype(np.uint64) * np.asarray(b).astype(np.uint64)) >> 32).astype(np.uint32)
  np.testing.assert_array_equal(mulhi(a, b, interpret=True), want)
  np.testing.assert_array_equal(triton_names(a, op="umulhi", interpret=True), (      # ml.umulhi since probe 49g
      (np.asarray(a).astype(np.uint64) ** 2) >> 32).astype(np.uint32))
  _export(mulhi, S((128,), jnp.uint32), S((128,), jnp.uint32))


@mg.mgpu_kernel(out_shape=lambda x, *, op: S((x.shape[0],), jnp.int8), grid=(1,))
def any_all(x, out, *, op: ml.constexpr):
  if op == "ml.any":
    out[...] = ml.any(x[...] > 0, axis=1).astype(jnp.int8)
  elif op == "ml.all":
    out[...] = ml.all(x[...] > 0, axis=1).astype(jnp.int8)
  elif op == ".any":
    out[...] = (x[...] > 0).any(axis=1).astype(jnp.int8)
  elif op == ".all":
    out[...] = x[...].all(axis=1).astype(jnp.int8)
  elif op == "max":
    out[...] = ml.max(x[...] > 0, axis=1).astype(jnp.int8)
  elif op == "min":
    out[...] = ml.min(x[...] != 0, axis=1).astype(jnp.int8)


def test_any_and_all_are_ml_max_and_ml_min_of_the_mask():
  # ml.any was "check the spelling", v.any() / v.all() a list of attributes; then hints to write
  # ml.max / ml.min of the mask; now they are builtins (frontend/ops/stats.py) with jnp's meaning
  spec = S((16, 128), F32)
  x = rand.normal(rand.key(3), (16, 128), F32).at[3].set(-1.0).at[5, 7].set(0.0)
  for op in ("ml.any", ".any"):
    np.testing.assert_array_equal(any_all(x, op=op, interpret=True), np.any(np.asarray(x) > 0, axis=1))
  np.testing.assert_array_equal(any_all(x, op="ml.all", interpret=True), np.all(np.asarray(x) > 0, axis=1))
  np.testing.assert_array_equal(any_all(x, op=".all", interpret=True), np.all(np.asarray(x) != 0, axis=1))
  np.testing.assert_array_equal(any_all(x, op="max", interpret=True), np.any(np.asarray(x) > 0, axis=1))
  np.testing.assert_array_equal(any_all(x, op="min", interpret=True), np.all(np.asarray(x) != 0, axis=1))
  _export(lambda a: any_all(a, op="max"), spec)
  _export(lambda a: any_all(a, op="min"), spec)
  _export(lambda a: any_all(a, op=".any"), spec)


# ---------------------------------------------------------------- A2: methods tensors and refs lack
@mg.mgpu_kernel(out_shape=lambda x, *, how: S(x.shape, jnp.int32), grid=(1,))
def to_int(x, out, *, how: ml.constexpr):
  if how == "to":
    out[...] = x[...].to(jnp.int32)
  elif how == "to_bitcast":
    out[...] = x[...].to(jnp.int32, bitcast=True)
  elif how == "to_flag":
    out[...] = x[...].to(jnp.int32, bitcast=how == "x")
  elif how == "astype":
    out[...] = x[...].astype(jnp.int32)
  elif how == "bitcast":
    out[...] = ml.bitcast(x[...], jnp.int32)


def test_triton_to_is_astype_or_bitcast():
  """.to(dtype) was MG003 with these forms as its hint until probe 47g."""
  spec = S((128,), F32)
  x = jnp.arange(128, dtype=F32) * 1.5
  for how in ("to", "to_flag"):
    np.testing.assert_array_equal(to_int(x, how=how, interpret=True), x.astype(jnp.int32))
  np.testing.assert_array_equal(to_int(x, how="to_bitcast", interpret=True), np.asarray(x).view(np.int32))
  np.testing.assert_array_equal(to_int(x, how="astype", interpret=True), x.astype(jnp.int32))
  np.testing.assert_array_equal(to_int(x, how="bitcast", interpret=True), np.asarray(x).view(np.int32))
  _export(lambda a: to_int(a, how="astype"), spec)
  _export(lambda a: to_int(a, how="bitcast"), spec)


@mg.mgpu_kernel(out_shape=lambda x, *, how: S(x.shape[:1], x.dtype), grid=(1,))
def row_products(x, out, *, how: ml.constexpr):
  if how == "prod":
    out[...] = x[...].prod(axis=1)
  else:
    out[...] = ml.cumprod(x[...], axis=1)[:, -1]


def test_prod_says_the_last_column_of_cumprod():
  """.prod(axis=1) was MG003 with the cumprod form as its hint; since probe 51a it is jnp.prod's (that form)."""
  x = 1 + 0.01 * rand.normal(rand.key(4), (16, 128), F32)
  for how in ("prod", "cumprod"):
    np.testing.assert_allclose(row_products(x, how=how, interpret=True), np.prod(np.asarray(x), axis=1),
                               rtol=1e-5)
  _export(lambda a: row_products(a, how="cumprod"), S((16, 128), F32))


@mg.mgpu_kernel(out_shape=lambda x, *, how: x, grid=lambda x, *, how: (x.shape[0],))
def rowcopy(x, out, *, how: ml.constexpr):
  r = ml.program_id(0)
  if how == "stride":
    s = x.stride(0)
  out.at[r, ml.ds(0, 128)][...] = x.at[r, ml.ds(0, 128)][...]


def test_a_refs_stride_says_refs_are_indexed_by_dimension():
  expect(rowcopy, [S((4, 128), F32)], mg.KernelTypeError, "x.stride", "a GMEM ref has no attribute 'stride'",
         how="stride", hint="refs are indexed by dimension, so no strides are needed: x.at[r, ml.ds(c, n)] is row"
                            " r's columns c to c + n; for flat pointer arithmetic, reshape the array outside the"
                            " kernel")
  x = jnp.arange(512, dtype=F32).reshape(4, 128)
  np.testing.assert_array_equal(rowcopy(x, how="at", interpret=True), x)
  _export(lambda a: rowcopy(a, how="at"), S((4, 128), F32))


# ---------------------------------------------------------------- A3: jnp names through the same table
@mg.mgpu_kernel(out_shape=lambda x, *, f: x, grid=(1,))
def jnp_calls(x, out, *, f: ml.constexpr):
  if f == "jnp.log1p":
    out[...] = jnp.log1p(x[...])
  elif f == "math.log1p":
    out[...] = math.log1p(x[...])
  elif f == "ml.log1p":
    out[...] = ml.log1p(x[...])
  elif f == "jnp.flip":
    out[...] = jnp.flip(x[...])
  else:
    v = x[...]
    u = 1 + v
    out[...] = ml.where(u == 1, v, ml.log(u) * (v / (u - 1)))


def test_jnp_log1p_gets_ml_log1ps_formula():
  spec = S((128,), F32)
  # (ml.log1p exists since probe 29a: math.log1p names it; jnp.log1p and jnp.flip compute as ml's since probe 46i)
  expect(jnp_calls, [spec], mg.KernelTypeError, "math.log1p(x", "log1p cannot take a register tensor inside a kernel",
         f="math.log1p", hint="use ml.log1p: kernels call ml.* functions on register values")
  for f in ("ml.log1p", "jnp.log1p"):
    np.testing.assert_allclose(jnp_calls(x := jnp.logspace(-12, 3, 128, dtype=F32), f=f, interpret=True),
                               jnp.log1p(x), rtol=2e-6)
  np.testing.assert_array_equal(jnp_calls(x, f="jnp.flip", interpret=True), jnp.flip(x))
  x = jnp.concatenate([jnp.logspace(-12, 3, 120, dtype=F32), -jnp.linspace(0.01, 0.9, 8, dtype=F32)])
  np.testing.assert_allclose(jnp_calls(x, f="formula", interpret=True), jnp.log1p(x), rtol=2e-6)
  _export(lambda a: jnp_calls(a, f="formula"), spec)


# ---------------------------------------------------------------- A4: a preallocated output passed
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def copy(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]


def test_a_preallocated_output_says_outputs_are_returned():
  x = jnp.arange(1024, dtype=F32)
  with pytest.raises(mg.KernelError) as info:
    copy(x, jnp.empty_like(x), interpret=True)
  e = info.value
  line = inspect.currentframe().f_lineno - 2
  assert type(e) is mg.SignatureError and e.code == "MG006"
  assert (e.filename, e.lineno, e.col_offset) == (__file__, line, 4)
  assert e.message == "copy takes 1 input (x), then 1 output (out), but was called with 2 inputs"
  assert e.hint == "outputs are returned, not passed: call copy(x, interpret=True), which returns out (out_shape" \
                   " describes it)"
  np.testing.assert_array_equal(copy(x, interpret=True), x)
  _export(copy, S((1024,), F32))
  with pytest.raises(mg.SignatureError) as info:     # more than inputs and outputs: the general hint
    copy(x, x, x, interpret=True)
  assert info.value.hint.startswith("parameters are the inputs, then the outputs")


# ---------------------------------------------------------------- A5: stages= on register loads
@mg.mgpu_kernel(out_shape=lambda x, *, s: x, grid=(4,))
def softmax_loop(x, out, *, s: ml.constexpr):
  if s:
    for row in ml.range(ml.program_id(0), x.shape[0], ml.num_programs(0), stages=s):
      m = ml.arange(512) < x.shape[1]
      v = x.at[row, ml.ds(0, 512)].load(mask=m, other=-float("inf"))
      e = ml.exp(v - ml.max(v))
      out.at[row, ml.ds(0, 512)].store(e / ml.sum(e), mask=m)
  else:
    for row in ml.range(ml.program_id(0), x.shape[0], ml.num_programs(0)):
      m = ml.arange(512) < x.shape[1]
      v = x.at[row, ml.ds(0, 512)].load(mask=m, other=-float("inf"))
      e = ml.exp(v - ml.max(v))
      out.at[row, ml.ds(0, 512)].store(e / ml.sum(e), mask=m)


def test_stages_on_register_loads_says_to_drop_stages_first():
  spec = S((10, 300), F32)
  expect(softmax_loop, [spec], mg.PipelineError, "for row in ml.range(",
         "ml.range(..., stages=) found no TMA load to pipeline at the top level of this loop", s=2,
         hint="drop stages= for a plain loop, for row in ml.range(ml.program_id(0), x.shape[0],"
              " ml.num_programs(0)): (its loads into registers are not pipelined); to pipeline, load the loop's"
              " tiles with ml.copy(gmem.at[...k...], buf) into buffers allocated before the loop")
  x = rand.normal(rand.key(5), (10, 300), F32)
  np.testing.assert_allclose(softmax_loop(x, s=0, interpret=True), jax.nn.softmax(x, axis=-1), rtol=1e-5,
                             atol=1e-7)
  _export(lambda a: softmax_loop(a, s=0), spec)


# ---------------------------------------------------------------- A6: int conditions
@mg.mgpu_kernel(out_shape=lambda n, f, *, w: n, grid=lambda n, f, *, w: (n.shape[0],))
def countdown(n, f, out, *, w: ml.constexpr):
  i = ml.program_id(0)
  k = n[i]
  c = 0
  if w == "while":
    while k:
      k = k - 1
      c += 1
  elif w == "while_and":
    while k & 3:
      k = k - 1
  elif w == "while_ne":
    while k != 0:
      k = k - 1
      c += 1
  elif w == "if":
    if f[i]:
      c = 1
  elif w == "if_ne":
    if f[i] != 0:
      c = 1
  elif w == "elif":
    if k == 3:
      c = 2
    elif k - 1:
      c = 1
  elif w == "ifexp":
    c = 1 if k else 0
  elif w == "where":
    c = ml.where(k != 0, 1, 0)
  out[i] = c


def test_int_conditions_are_their_truth_as_pythons():
  """`while k:`, `if f[i]:` and `elif k - 1:` of int scalars were MG003 (compare it: k != 0); since probe 39a
  they are Python's truth, the non-zero test the hint wrote (a conditional expression too, since probe 44e)."""
  specs = [S((4,), jnp.int32), S((4,), jnp.int8)]
  n, f = jnp.array([3, 0, 5, 1], jnp.int32), jnp.array([0, 2, -1, 0], jnp.int8)
  np.testing.assert_array_equal(countdown(n, f, w="ifexp", interpret=True), (n != 0).astype(jnp.int32))
  for w, ne in (("while", "while_ne"), ("if", "if_ne")):
    np.testing.assert_array_equal(countdown(n, f, w=w, interpret=True), countdown(n, f, w=ne, interpret=True))
  np.testing.assert_array_equal(countdown(n, f, w="while_ne", interpret=True), n)
  np.testing.assert_array_equal(countdown(n, f, w="if_ne", interpret=True), (f != 0).astype(jnp.int32))
  np.testing.assert_array_equal(countdown(n, f, w="where", interpret=True), (n != 0).astype(jnp.int32))
  np.testing.assert_array_equal(countdown(n, f, w="elif", interpret=True), np.where(n == 3, 2, (n - 1 != 0) * 1))
  np.testing.assert_array_equal(countdown(n, f, w="while_and", interpret=True), np.zeros(4, np.int32))
  for w in ("while_ne", "if_ne", "where", "while", "if", "elif"):
    _export(lambda a, b: countdown(a, b, w=w), *specs)


@mg.mgpu_kernel(out_shape=lambda x, m: x, grid=(1,))
def masked_read(x, m, out):
  out[...] = x.at[...].load(mask=m[...], other=0.0)


def test_a_uint8_mask_is_a_uint8_tensor():
  expect(masked_read, [S((128,), F32), S((128,), jnp.uint8)], mg.KernelTypeError, "x.at[...].load(",
         "ml.load's mask must be a boolean tensor, got a uint8 tensor")
