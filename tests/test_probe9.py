"""A user probe's findings (probe 9): messages that named the wrong thing or gave a hint that
did not fit, and the reductions of booleans that jnp allows."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from locate import expect, where
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32


# ---------------------------------------------------------------- a tensor as a loop bound
@mg.mgpu_kernel(out_shape=lambda x, n: x)
def loop_to_a_tensor(x, n, out):
  v = x[...]
  for _ in range(n[...]):
    v = v * 2
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda x, n: x)
def loop_to_a_float(x, n, out):
  v = x[...]
  for _ in range(ml.max(n[...]) * 0.5):
    v = v * 2
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda x, n: x)
def loop_to_one_element(x, n, out):
  v = x[...]
  for _ in range(n[0]):
    v = v * 2
  out[...] = v


def test_a_tensor_loop_bound_says_a_bound_is_one_number():
  expect(loop_to_a_tensor, [S((128,), F32), S((8,), I32)], mg.KernelTypeError, "range(n[...])",
         "a loop bound must be an integer scalar, got n[...] of shape (8,)",
         hint="read one element, range(n[0]), or reduce the tensor, range(ml.max(n[...]))")


def test_a_float_loop_bound_says_loop_bound():
  expect(loop_to_a_float, [S((128,), F32), S((8,), F32)], mg.KernelTypeError, "range(ml.max(",
         "a loop bound must be an integer scalar, got ml.max(n[...]) * 0.5 (float32)",
         hint="convert it: range((ml.max(n[...]) * 0.5).astype(jnp.int32))")


def test_the_loop_bound_hint_works():
  out = loop_to_one_element(jnp.ones((128,), F32), jnp.full((8,), 3, I32), interpret=True)
  np.testing.assert_array_equal(out, np.full((128,), 8.0, np.float32))


# ---------------------------------------------------------------- a scalar into a one-element output
@mg.mgpu_kernel(out_shape=lambda x: S((1,), x.dtype))
def total_whole(x, out):
  out[...] = ml.sum(x[...])


@mg.mgpu_kernel(out_shape=lambda x: S((1,), x.dtype))
def total_first(x, out):
  out[0] = ml.sum(x[...])


def test_a_scalar_stored_whole_into_one_element_is_that_element():
  """Was MG204 ('this tensor has shape (1,)...', hinting out[0] = ...); now out[...] = s of a
  one-element window stores the scalar into its element, as out[0] = s does."""
  np.testing.assert_array_equal(total_whole(jnp.ones((128,), F32), interpret=True), [128.0])
  np.testing.assert_array_equal(total_first(jnp.ones((128,), F32), interpret=True), [128.0])
  jax.export.export(jax.jit(total_whole), platforms=["cuda"])(S((128,), F32))


# ---------------------------------------------------------------- operands quoted as written
@mg.mgpu_kernel(out_shape=lambda x: x)
def center_int(x, out):
  v = x[...]
  out[...] = v - ml.mean(v.astype(jnp.float32), axis=1, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, F32))
def mean_minus_sum(x, out):
  v = x[...]
  out[...] = ml.mean(v.astype(jnp.float32), axis=1)[:, None] - (v + 1)


def test_a_broadcast_operand_is_quoted_as_written():
  # (bfloat16 with float32 computes in float32 since probe 47b, as jnp's promotion: the store names the operand)
  expect(center_int, [S((8, 128), jnp.bfloat16)], mg.StoreDtypeError, "out[...] = v - ml.mean",
         "cannot store v - ml.mean(v.astype(jnp.float32), axis=1, keepdims=True) (float32) into out (GMEM, bfloat16):"
         " no implicit conversion",
         hint="convert explicitly: out[...] = (v - ml.mean(v.astype(jnp.float32), axis=1, keepdims=True))"
              ".astype(jnp.bfloat16)")
  x = jnp.asarray(np.random.default_rng(9).standard_normal((8, 128)), jnp.bfloat16)
  want = jnp.mean(x.astype(jnp.float32), axis=1)[:, None] - (x + 1)
  np.testing.assert_allclose(np.asarray(mean_minus_sum(x, interpret=True)), np.asarray(want), rtol=1e-6, atol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def add_booleans(x, out):
  b = x[...] > 0
  out[...] = (b + b).astype(I32)


def test_bool_arithmetic_hint_names_the_operand():
  expect(add_booleans, [S((128,), F32)], mg.UnsupportedDtypeError, "b + b", "+ on boolean values",
         hint="for logic use & | ^; to count or compute, convert first: b.astype(jnp.int32) (or jnp.float32)")


# ---------------------------------------------------------------- reductions of booleans, as jnp
@mg.mgpu_kernel(out_shape=lambda x: (S((), I32), S((8,), I32), S((8,), F32), S((), F32),
                                     S((8,), jnp.int8), S((8,), jnp.int8), S((8,), I32), S((8,), I32)))
def bool_stats(x, total, rows, frac, mean_all, any_pos, all_pos, first_pos, first_neg):
  b = x[...] > 0
  total[...] = ml.sum(b)
  rows[...] = b.sum(axis=1)
  frac[...] = ml.mean(b, axis=1)
  mean_all[...] = ml.mean(b)
  any_pos[...] = ml.max(b, axis=1).astype(jnp.int8)
  all_pos[...] = ml.min(b, axis=1).astype(jnp.int8)
  first_pos[...] = ml.argmax(b, axis=1)
  first_neg[...] = ml.argmin(b, axis=1)


def bool_inputs():
  x = rand.normal(rand.key(9), (8, 128), F32)
  return x.at[3].set(1.0).at[5].set(-1.0)         # a row all True, a row all False


def test_bool_reductions_follow_jnp():
  x = bool_inputs()
  b = x > 0
  want = (jnp.sum(b), b.sum(1), b.mean(1), jnp.mean(b), b.max(1).astype(jnp.int8), b.min(1).astype(jnp.int8),
          jnp.argmax(b, 1), jnp.argmin(b, 1))
  got = bool_stats(x, interpret=True)
  for g, w in zip(got, want):
    assert g.dtype == w.dtype and g.shape == w.shape
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
  assert jnp.sum(b).dtype == jnp.int32 and jnp.mean(b).dtype == jnp.float32 and b.max().dtype == jnp.bool_


def test_bool_reductions_export_for_cuda():
  txt = jax.export.export(jax.jit(bool_stats), platforms=["cuda"])(S((8, 128), F32)).mlir_module()
  assert "@mosaic_gpu" in txt


@mg.mgpu_kernel(out_shape=lambda x: S((), I32))
def count_positive(x, out):
  b = x[...] > 0
  out[...] = ml.sum(b)


def test_counting_booleans_matches_jnp_on_a_vector():
  x = jnp.arange(-60, 68, dtype=F32)
  assert int(count_positive(x, interpret=True)) == int(jnp.sum(x > 0)) == 67
  txt = jax.export.export(jax.jit(count_positive), platforms=["cuda"])(S((128,), F32)).mlir_module()
  assert "@mosaic_gpu" in txt


# ---------------------------------------------------------------- reading another program's output
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def running(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]
  if i > 0:
    out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] + out.at[ml.ds(i * 128 - 128, 128)][...]


def test_reading_another_programs_output_is_reported_at_the_read():
  with pytest.raises(mg.RaceError) as info:
    running(jnp.ones((512,), F32), interpret=True)
  e = info.value
  assert (e.lineno, e.col_offset) == where(running, "out.at[ml.ds(i * 128 - 128"), e.render()
  # (found by the grid check at compile time since the eleventh session; interpret mode said
  # "program (0, 0, 0) and program (1, 0, 0) both access out[0], and one writes it")
  assert e.message == ("program (1, 0, 0) reads out[0] while program (0, 0, 0) writes out[0]:"
                       " programs run in no fixed order, so the value read depends on timing")
  assert e.hint == ("programs do not wait for each other, so an output written by other programs cannot be"
                    " read in the same launch: read it in a second kernel, or compute the value in this"
                    " program from the inputs")
  write_line = where(running, "out.at[ml.ds(i * 128, 128)][...] = x")[0]
  assert [n for n in e.notes if f":{write_line}:" in n and "writes it here" in n], e.notes


# ---------------------------------------------------------------- an untyped SMEM buffer's dtype
@mg.mgpu_kernel(out_shape=lambda x: x)
def untyped_out_buffer(x, out):
  x_s, o_s = ml.smem((32, 128)), ml.smem((32, 128))
  ml.copy(x, x_s)
  v = x_s[...].astype(F32)
  o_s[...] = (v * 2).astype(o_s.dtype)
  ml.copy(o_s, out)


@mg.mgpu_kernel(out_shape=lambda x: x)
def typed_out_buffer(x, out):
  x_s, o_s = ml.smem((32, 128)), ml.smem((32, 128), x.dtype)
  ml.copy(x, x_s)
  v = x_s[...].astype(F32)
  o_s[...] = (v * 2).astype(o_s.dtype)
  ml.copy(o_s, out)


def test_an_untyped_buffer_hints_the_inputs_dtype():
  expect(untyped_out_buffer, [S((32, 128), jnp.bfloat16)], mg.DtypeInferenceError, "o_s.dtype",
         "o_s's dtype is not known yet at this point",
         hint="give the buffer, when you make it, the dtype of the data it will hold:"
              " o_s = ml.smem((32, 128), x.dtype)")
  x = jnp.ones((32, 128), jnp.bfloat16)
  np.testing.assert_array_equal(typed_out_buffer(x, interpret=True).astype(F32), 2.0)   # followed


# ---------------------------------------------------------------- a constexpr passed by position
@mg.mgpu_kernel(out_shape=lambda x, *, rows: x, grid=lambda x, *, rows: (x.shape[0] // rows,))
def copy_rows(x, out, *, rows: ml.constexpr):
  i = ml.program_id(0)
  out.at[ml.ds(i * rows, rows)][...] = x.at[ml.ds(i * rows, rows)][...]


def test_a_positional_constexpr_is_taken_after_the_inputs():
  """Once an error naming it an extra argument; taken by position, as Triton does, since probe 43d."""
  x = np.arange(64 * 128, dtype=np.float32).reshape(64, 128)
  np.testing.assert_array_equal(copy_rows(x, 8, interpret=True), x)


# ---------------------------------------------------------------- a float `other` for an int load
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 256),))
def triple_ragged(x, out):
  i = ml.program_id(0)
  m = (i * 256 + ml.arange(256)) < x.shape[0]
  v = x.at[ml.ds(i * 256, 256)].load(mask=m, other=0.5)
  out.at[ml.ds(i * 256, 256)].store(v * 3, mask=m)


def test_a_fractional_float_other_on_an_int_load_hints_the_int():
  # (a whole-number float, other=0.0, is the integer it holds, as in Triton: tests/test_probe23.py)
  expect(triple_ragged, [S((1000,), I32)], mg.DtypeMismatchError, "x.at[ml.ds(i * 256, 256)].load(",
         "ml.load's other (0.5) is a float but x.at[ml.ds(i * 256, 256)] is int32",
         hint="an integer of int32: other=0")
