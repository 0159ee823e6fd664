"""Probe 37d (matmul variants as a Triton or Pallas user writes them): the `@` operator on
register values is hinted as jnp.matmul is, with the user's own operands (it named a_s, b_s,
p and v_s whatever the kernel's names), and following that hint computes the product."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct
F16, F32 = jnp.float16, jnp.float32


def _rand(shape, dtype, seed):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape).astype(np.float32)).astype(dtype)


# ---------------------------------------------------------------- `@` hinted with the user's operands
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), a.dtype))
def at_operator_smem(a, b, c):
  xs, ws = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, xs)
  ml.copy(b, ws)
  c[...] = xs[...] @ ws[...]


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), a.dtype))
def at_operator_regs(a, b, c):
  x = a[...] * 2
  w = b[...]
  c[...] = x @ w.T


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), F32))
def jnp_dot_of_transposed_registers(a, b, c):
  x = a[...] * 2
  w = b[...]
  c[...] = jnp.dot(x, w.T, preferred_element_type=jnp.float32)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), F32))
def at_operator_hint_followed(a, b, c):
  x = a[...] * 2
  w = b[...]
  stage_w = ml.smem((64, 64), jnp.float16); stage_w[...] = w
  c[...] = ml.dot(x, stage_w.T)


def test_at_operator_of_smem_reads_hints_ml_dot_of_the_buffers():
  """It hinted ml.dot(xs, ws); since probe 47b it computes as that call, float16 as jnp.matmul's result."""
  rng = np.random.default_rng(3)
  a, b = (jnp.asarray(rng.standard_normal((64, 64)), F16) for _ in range(2))
  got = at_operator_smem(a, b, interpret=True)
  assert got.dtype == F16
  np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(a @ b, np.float32))


def test_at_operator_of_registers_computes_as_the_staging_hint_wrote():
  """`x @ w.T` of register tiles was MG001 whose hint staged w into SMEM (followed below); since probe 48b it
  computes as that ml.dot, float16 as jnp.matmul's result."""
  a, b = _rand((64, 64), F16, 1), _rand((64, 64), F16, 2)
  got = at_operator_regs(a, b, interpret=True)
  assert got.dtype == F16
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray((a * 2) @ b.T, np.float32), rtol=1e-2, atol=2e-2)
  got = at_operator_hint_followed(a, b, interpret=True)     # the old hint followed (its buffer renamed)
  want = jnp.dot(a * 2, b.T, preferred_element_type=F32)
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-3)


def test_jnp_dot_of_a_transposed_register_tile_computes():
  """It was MG003 whose hint staged w and passed its view (`ml.dot(x, w_s.T)`); since probe 48b it computes."""
  a, b = _rand((64, 64), F16, 1), _rand((64, 64), F16, 2)
  np.testing.assert_allclose(np.asarray(jnp_dot_of_transposed_registers(a, b, interpret=True)),
                             np.asarray(jnp.dot(a * 2, b.T, preferred_element_type=F32)), rtol=1e-4, atol=1e-3)


# ---------------------------------------------------------------- m not a multiple of 64, above 64
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32))
def rows_not_a_tile(a, b, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = ml.dot(a_s, b_s)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32))
def rows_in_a_128_row_tile(a, b, c):      # the hint followed for 96 rows
  a_s, b_s = ml.smem((128, 64)), ml.smem(b.shape)
  ml.copy(a.at[ml.ds(0, 128)], a_s)
  ml.copy(b, b_s)
  rows = ml.arange(128)
  c.at[ml.ds(0, 128)].store(ml.dot(a_s, b_s), mask=(rows < a.shape[0])[:, None])


def test_rows_above_64_are_hinted_the_tile_that_holds_them():
  """96 rows were told to use a 64-row tile ('for fewer rows of data, a 96-row batch, give a_s 64 rows'),
  which drops 32 of them; the hint then named the 128-row tile, and since probe 47e the compiler pads them."""
  a, b = _rand((96, 64), F16, 3), _rand((64, 64), F16, 4)
  for kernel in (rows_not_a_tile, rows_in_a_128_row_tile):    # (the first was MG501 before probe 47e)
    np.testing.assert_allclose(np.asarray(kernel(a, b, interpret=True)),
                               np.asarray(jnp.dot(a, b, preferred_element_type=F32)), rtol=1e-4, atol=1e-3)


# ---------------------------------------------------------------- n a multiple of 8, not of 64
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32))
def narrow_n(a, b, c):
  x_s, v_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, x_s)
  ml.copy(b, v_s)
  c[...] = ml.dot(x_s, v_s)


@mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), F32))
def narrow_n_hint_followed(a, bt, c):
  x_s, vt_s = ml.smem(a.shape), ml.smem((72, 64))
  ml.copy(a, x_s)
  ml.copy(bt, vt_s)
  c[...] = ml.dot(x_s, vt_s.T)


def test_narrow_n_hint_names_the_operands_and_how_to_store_the_tile():
  """It said 'ml.dot(a, b_s.T)' whatever the operands' names, and not how an (n, k) tile is made (a
  register transpose into a tensor-core buffer needs 64-row tiles: its own MG204). Since probe 47e the kernel
  as written computes too (b's 72 columns padded with zeros to 80)."""
  a, b = _rand((64, 64), F16, 5), _rand((64, 72), F16, 6)
  want = np.asarray(jnp.dot(a, b, preferred_element_type=F32))
  np.testing.assert_allclose(np.asarray(narrow_n_hint_followed(a, b.T, interpret=True)), want, rtol=1e-4, atol=1e-3)
  np.testing.assert_allclose(np.asarray(narrow_n(a, b, interpret=True)), want, rtol=1e-4, atol=1e-3)


# ---------------------------------------------------------------- an 8-bit tile in registers as A
@mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), jnp.int32))
def int8_register_a(a, bt, c):
  q_s = ml.smem(bt.shape)
  ml.copy(bt, q_s)
  x = a[...]
  c[...] = ml.dot(x, q_s.T)


@mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), jnp.int32))
def int8_register_a_hint_followed(a, bt, c):
  q_s = ml.smem(bt.shape)
  ml.copy(bt, q_s)
  x = a[...]
  x_s = ml.smem((64, 128), jnp.int8); x_s[...] = x
  c[...] = ml.dot(x_s, q_s.T)


def test_8bit_register_a_hint_writes_the_buffer_with_the_tiles_name():
  """It wrote `buf[...] = <the tile>; ml.dot(buf, ...)`, a placeholder in place of the kernel's x. Since
  probe 46b the register A computes as it is (the int8 hint stays for a k of 32: test_probe46b)."""
  rng = np.random.default_rng(7)
  a, bt = (jnp.asarray(rng.integers(-128, 128, (64, 128)), jnp.int8) for _ in range(2))
  want = np.asarray(jnp.dot(a.astype(jnp.int32), bt.T.astype(jnp.int32)))
  np.testing.assert_array_equal(np.asarray(int8_register_a(a, bt, interpret=True)), want)
  np.testing.assert_array_equal(np.asarray(int8_register_a_hint_followed(a, bt, interpret=True)), want)


# ---------------------------------------------------------------- a whole read of a buffer passed as b
@mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), F32))
def b_read_into_registers(a, bt, c):
  a_s, k_s = ml.smem((64, 64)), ml.smem(bt.shape)
  ml.copy(a, a_s)
  ml.copy(bt, k_s)
  c[...] = ml.dot(a_s, k_s[...].T)


@mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), F32))
def b_read_from_gmem(a, bt, c):
  a_s = ml.smem((64, 64))
  ml.copy(a, a_s)
  c[...] = ml.dot(a_s, bt[...].T)


@mg.mgpu_kernel(out_shape=lambda a, bt: (S((a.shape[0], bt.shape[0]), F32),) * 2)
def b_hints_followed(a, bt, c, d):
  a_s, k_s = ml.smem((64, 64)), ml.smem(bt.shape)
  ml.copy(a, a_s)
  ml.copy(bt, k_s)
  c[...] = ml.dot(a_s, k_s.T)
  bt_s = ml.smem((64, 64)); ml.copy(bt, bt_s)
  d[...] = ml.dot(a_s, bt_s.T)


def test_a_whole_read_passed_as_b_is_hinted_as_the_buffer_or_its_copy():
  """`k_s[...].T` was hinted 'b_s = ml.smem((64, 64)); b_s[...] = k_s[...].T' (a round trip through
  registers, into a name of the kernel's own); `bt[...].T` of the input, likewise, where a TMA copy
  into a buffer passed as its view `.T` moves nothing through registers."""
  a, bt = _rand((64, 64), F16, 8), _rand((64, 64), F16, 9)
  got_c, got_d = b_hints_followed(a, bt, interpret=True)
  want = np.asarray(jnp.dot(a, bt.T, preferred_element_type=F32))
  # (both reads were MG501; since probe 47e the compiler stores them into SMEM, read transposed)
  for kernel in (b_read_into_registers, b_read_from_gmem):
    np.testing.assert_allclose(np.asarray(kernel(a, bt, interpret=True)), want, rtol=1e-4, atol=1e-3)
  np.testing.assert_allclose(np.asarray(got_c), want, rtol=1e-4, atol=1e-3)
  np.testing.assert_allclose(np.asarray(got_d), want, rtol=1e-4, atol=1e-3)


# ---------------------------------------------------------------- transposes of an SMEM buffer, as jnp and torch write them
@mg.mgpu_kernel(out_shape=lambda a, bt, **kw: S((a.shape[0], bt.shape[0]), F32))
def transposed_buffer(a, bt, c, *, form: ml.constexpr):
  a_s, k_s = ml.smem((64, 64)), ml.smem(bt.shape)
  ml.copy(a, a_s)
  ml.copy(bt, k_s)
  if form == "method":
    c[...] = ml.dot(a_s, k_s.transpose())
  elif form == "jnp":
    c[...] = ml.dot(a_s, jnp.transpose(k_s))
  else:
    c[...] = ml.dot(a_s, k_s.mT)


@pytest.mark.parametrize("form,at,message", [
    ("method", "k_s.transpose", "an SMEM ref has no attribute 'transpose'"),
    ("jnp", "jnp.transpose(k_s)", "transpose cannot take an SMEM ref inside a kernel"),
    ("mT", "k_s.mT", "an SMEM ref has no attribute 'mT'")])
def test_a_transpose_of_an_smem_buffer_is_hinted_as_its_view(form, at, message):
  """`.transpose()` was hinted 'k_s[...].transpose()' (a register b, the next error) and jnp.transpose
  'use ml.transpose' (an error on a ref); ml.transpose(k_s) alone named the view k_s.T."""
  expect(transposed_buffer, (S((64, 64), F16), S((64, 64), F16)), mg.KernelTypeError, at, message,
         hint="for an ml.dot operand write k_s.T: a transposed view of the SMEM buffer, no data moved"
              " (ml.dot(a_s, k_s.T, acc)); to transpose its values, k_s[...].T", form=form)


# ---------------------------------------------------------------- a scalar as ml.dot's acc (C = A @ B + beta)
@mg.mgpu_kernel(out_shape=lambda a, b, beta: S((a.shape[0], b.shape[1]), F32))
def scalar_acc(a, b, beta: ml.scalar, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = ml.dot(a_s, b_s, beta)


@mg.mgpu_kernel(out_shape=lambda a, b, beta: S((a.shape[0], b.shape[1]), F32))
def scalar_acc_hint_followed(a, b, beta: ml.scalar, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.full((64, 128), beta, jnp.float32)
  c[...] = ml.dot(a_s, b_s, acc)


def test_a_scalar_acc_is_hinted_as_a_full_tile_of_it():
  """It said 'start from acc = ml.zeros((m, n), jnp.float32)', which drops beta and names no shape."""
  expect(scalar_acc, (S((64, 64), F16), S((64, 128), F16), 0.5), mg.KernelTypeError, "ml.dot(a_s, b_s, beta)",
         "ml.dot's acc must be a register tensor, got a scalar",
         hint="a scalar acc adds to every element: acc = ml.full((64, 128), beta, jnp.float32); ml.dot(a_s, b_s, acc)"
              " (or add it to the result, ml.dot(a_s, b_s) + beta)")
  a, b = _rand((64, 64), F16, 10), _rand((64, 128), F16, 11)
  np.testing.assert_allclose(np.asarray(scalar_acc_hint_followed(a, b, 0.5, interpret=True)),
                             np.asarray(jnp.dot(a, b, preferred_element_type=F32) + 0.5), rtol=1e-4, atol=1e-3)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (a.shape[0] // 64, b.shape[1] // 64))
def triton_style_b_window(a_ref, b_ref, c_ref):
  pid_m, pid_n = ml.program_id(0), ml.program_id(1)
  acc = ml.zeros((64, 64), F32)
  for k in range(0, a_ref.shape[1], 64):
    a = a_ref.at[ml.ds(pid_m * 64, 64), ml.ds(k, 64)][...]
    acc = ml.dot(a, b_ref.at[ml.ds(k, 64), ml.ds(pid_n * 64, 64)][...], acc)
  c_ref.at[ml.ds(pid_m * 64, 64), ml.ds(pid_n * 64, 64)][...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (a.shape[0] // 64, b.shape[1] // 64))
def triton_style_b_window_followed(a_ref, b_ref, c_ref):
  pid_m, pid_n = ml.program_id(0), ml.program_id(1)
  acc = ml.zeros((64, 64), F32)
  for k in range(0, a_ref.shape[1], 64):
    a = a_ref.at[ml.ds(pid_m * 64, 64), ml.ds(k, 64)][...]
    b_s = ml.smem((64, 64)); ml.copy(b_ref.at[ml.ds(k, 64), ml.ds(pid_n * 64, 64)], b_s)
    acc = ml.dot(a, b_s, acc)
  c_ref.at[ml.ds(pid_m * 64, 64), ml.ds(pid_n * 64, 64)][...] = acc


def test_a_gmem_window_read_as_b_is_hinted_as_its_tma_copy():
  """Triton's tl.dot(a, tl.load(b_ptrs)): it hinted 'b_s[...] = b_ref.at[...][...]' (the tile through
  registers, the buffer named as the kernel's own b_s elsewhere would be) where TMA copies the window."""
  a, b = _rand((128, 128), F16, 12), _rand((128, 128), F16, 13)
  # (the kernel as written was MG501; since probe 47e the compiler stores the window into SMEM itself)
  for kernel in (triton_style_b_window, triton_style_b_window_followed):
    np.testing.assert_allclose(np.asarray(kernel(a, b, interpret=True)),
                               np.asarray(jnp.dot(a, b, preferred_element_type=F32)), rtol=1e-4, atol=1e-3)
  assert "mosaic_gpu" in jax.export.export(jax.jit(triton_style_b_window_followed), platforms=["cuda"])(
      S((128, 128), F16), S((128, 128), F16)).mlir_module()


# ---------------------------------------------------------------- batched products of 3-D buffers
@mg.mgpu_kernel(out_shape=lambda q, k, **kw: S((q.shape[0], q.shape[1], k.shape[1]), F32))
def batched_scores(q, k, c, *, form: ml.constexpr):
  q_s, k_s = ml.smem(q.shape), ml.smem(k.shape)
  ml.copy(q, q_s)
  ml.copy(k, k_s)
  if form == "einsum":
    c[...] = jnp.einsum("bmd,bnd->bmn", q_s[...], k_s[...], preferred_element_type=jnp.float32)
  else:
    c[...] = ml.dot(q_s, k_s)


@mg.mgpu_kernel(out_shape=lambda q, k: S((q.shape[0], q.shape[1], k.shape[1]), F32))
def batched_scores_hint_followed(q, k, c):
  q_s, k_s = ml.smem(q.shape), ml.smem(k.shape)
  ml.copy(q, q_s)
  ml.copy(k, k_s)
  for z in ml.static_range(2):
    c.at[z][...] = ml.dot(q_s.at[z], k_s.at[z].T)


def test_a_batched_product_is_hinted_as_one_dot_per_batch_element():
  """jnp.einsum('bmd,bnd->bmn', ...) was hinted 'use ml.dot(a_s, b_s, acc)', and jnp.matmul of 3-D buffers
  'write ml.dot(q_s, k_s)': followed, both are ml.dot of 3-D operands, whose hint was 'index the leading
  dimensions away: buf.at[stage]'."""
  specs = (S((2, 64, 64), F16), S((2, 64, 64), F16))
  q, k = _rand((2, 64, 64), F16, 14), _rand((2, 64, 64), F16, 15)     # (since probe 48b the einsum computes)
  np.testing.assert_allclose(np.asarray(batched_scores(q, k, form="einsum", interpret=True)),
                             np.asarray(jnp.einsum("bmd,bnd->bmn", q, k, preferred_element_type=F32)),
                             rtol=1e-4, atol=1e-3)
  # (since probe 51e ml.dot of 3-D operands is Triton's 3-D tl.dot, one dot per batch element: q @ k of each)
  np.testing.assert_allclose(np.asarray(batched_scores(q, k, form="dot", interpret=True)),
                             np.asarray(jnp.einsum("bmd,bdn->bmn", q, k, preferred_element_type=F32)),
                             rtol=1e-4, atol=1e-3)
  builds(batched_scores, *specs, form="dot")
  np.testing.assert_allclose(np.asarray(batched_scores_hint_followed(q, k, interpret=True)),
                             np.asarray(jnp.einsum("bmd,bnd->bmn", q, k, preferred_element_type=F32)),
                             rtol=1e-4, atol=1e-3)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32))
def narrow_n_transposed_in_registers(a, b, c):
  x_s, v_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, x_s)
  ml.copy(b, v_s)
  vt_s = ml.smem((72, 64), F16)
  vt_s[...] = v_s.T[...]
  c[...] = ml.dot(x_s, vt_s.T)


def test_a_narrow_b_transposed_through_registers_is_hinted_its_tma_fill():
  """An (n, k) B tile of 72 rows written from registers takes the tensor-core layout's 64-row tiles: the
  hint said only 'give vt_s a multiple of 64 rows' (then 56 rows nothing writes); TMA fills 8-row tiles."""
  expect(narrow_n_transposed_in_registers, (S((64, 64), F16), S((64, 72), F16)), mg.LayoutError, "v_s.T[...]",
         "v_s.T[...] of shape (72, 64) moves between registers and vt_s, which ml.dot reads (tiled for the tensor"
         " cores), so it takes the tensor-core (WGMMA) layout: it must be 2-D with rows a multiple of 64 (64 per"
         " warpgroup) and columns a multiple of 8",
         hint="give vt_s a multiple of 64 rows; or fill vt_s by TMA instead of from registers: transpose the array"
              " outside the kernel (bt = b.T) and copy its (72, 64) window into vt_s, which then takes any multiple"
              " of 8 rows")


# ---------------------------------------------------------------- split-K atomics over a partial last row tile
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (ml.cdiv(a.shape[0], 64), 2))
def split_k_partial_rows(a, b, c):
  i, s = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(s * 64, 64)], a_s)
  ml.copy(b.at[ml.ds(s * 64, 64)], b_s)
  ml.atomic_add(c.at[ml.ds(i * 64, 64), :], ml.dot(a_s, b_s))


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (ml.cdiv(a.shape[0], 64), 2))
def split_k_partial_rows_followed(a, b, c):
  i, s = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(s * 64, 64)], a_s)
  ml.copy(b.at[ml.ds(s * 64, 64)], b_s)
  ml.atomic_add(c.at[(i * 64) + ml.arange(64)], ml.dot(a_s, b_s))


def test_an_atomic_past_the_end_hint_repeats_the_value_added():
  """The scatter the hint writes added 'value', a name the kernel does not have, for its ml.dot(a_s, b_s)."""
  expect(split_k_partial_rows, (S((100, 128), F16), S((128, 64), F16)), mg.IndexOutOfBoundsError, "ml.atomic_add(",
         "this register write touches c[64:128, 0:64] in program (1, 0, 0), outside c's shape (100, 64)",
         hint="index the window with a tensor of positions (a scatter), whose updates past the end are dropped:"
              " ml.atomic_add(c.at[(i * 64) + ml.arange(64)], ml.dot(a_s, b_s))")
  a, b = _rand((100, 128), F16, 16), _rand((128, 64), F16, 17)
  np.testing.assert_allclose(np.asarray(split_k_partial_rows_followed(a, b, interpret=True)),
                             np.asarray(jnp.dot(a, b, preferred_element_type=F32)), rtol=1e-4, atol=1e-3)


# ---------------------------------------------------------------- jax.nn activations in an epilogue
@mg.mgpu_kernel(out_shape=lambda a, b, **kw: S((a.shape[0], b.shape[1]), F32))
def activation_epilogue(a, b, c, *, act: ml.constexpr):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  if act == "leaky_relu":
    c[...] = jax.nn.leaky_relu(acc, 0.1)
  elif act == "celu":
    c[...] = jax.nn.celu(acc, alpha=2.0)
  elif act == "selu":
    c[...] = jax.nn.selu(acc)
  elif act == "relu6":
    c[...] = jax.nn.relu6(acc)
  elif act == "hard_sigmoid":
    c[...] = jax.nn.hard_sigmoid(acc)
  elif act == "mish":
    c[...] = jax.nn.mish(acc)
  else:
    c[...] = jax.nn.log_sigmoid(acc)


@mg.mgpu_kernel(out_shape=lambda a, b, **kw: S((a.shape[0], b.shape[1]), F32))
def activation_hints_followed(a, b, c, *, act: ml.constexpr):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  if act == "leaky_relu":
    c[...] = ml.where(acc >= 0, acc, 0.1 * acc)
  elif act == "celu":
    c[...] = ml.where(acc > 0, acc, 2.0 * ml.expm1(acc / 2.0))
  elif act == "selu":
    c[...] = 1.0507009873554805 * ml.where(acc > 0, acc, 1.6732632423543772 * ml.expm1(acc))
  elif act == "relu6":
    c[...] = ml.clip(acc, 0.0, 6.0)
  elif act == "hard_sigmoid":
    c[...] = ml.clip(acc + 3.0, 0.0, 6.0) / 6.0
  elif act == "mish":
    c[...] = acc * ml.tanh(ml.maximum(acc, 0) + ml.log1p(ml.exp(-ml.abs(acc))))
  else:
    c[...] = -(ml.maximum(-acc, 0) + ml.log1p(ml.exp(-ml.abs(acc))))


ACTIVATION_HINTS = {
    "leaky_relu": ("jax.nn.leaky_relu(acc, 0.1)", "ml.where(acc >= 0, acc, 0.1 * acc)"),
    "celu": ("jax.nn.celu(acc, alpha=2.0)", "ml.where(acc > 0, acc, 2.0 * ml.expm1(acc / 2.0))"),
    "selu": ("jax.nn.selu(acc)", "1.0507009873554805 * ml.where(acc > 0, acc, 1.6732632423543772 * ml.expm1(acc))"),
    "relu6": ("jax.nn.relu6(acc)", "ml.clip(acc, 0.0, 6.0)"),
    "hard_sigmoid": ("jax.nn.hard_sigmoid(acc)", "ml.clip(acc + 3.0, 0.0, 6.0) / 6.0"),
    "mish": ("jax.nn.mish(acc)", "acc * ml.tanh(ml.maximum(acc, 0) + ml.log1p(ml.exp(-ml.abs(acc))))"),
    "log_sigmoid": ("jax.nn.log_sigmoid(acc)", "-(ml.maximum(-acc, 0) + ml.log1p(ml.exp(-ml.abs(acc))))"),
}


@pytest.mark.parametrize("act", list(ACTIVATION_HINTS))
def test_jax_nn_activations_are_hinted_as_formulas_with_their_parameters(act):
  """jax.nn.leaky_relu(acc, 0.1) was hinted 'ml.where(x >= 0, x, 0.01 * x)' (another slope, followed: a
  silently different result); elu, celu, selu, relu6, hard_sigmoid, mish and log_sigmoid had no formula. Since
  probe 46i the call itself computes the hinted formula, with its parameters."""
  a, b = _rand((64, 64), F16, 18), _rand((64, 64), F16, 19)
  want = getattr(jax.nn, act)(jnp.dot(a, b, preferred_element_type=F32),
                              **({"negative_slope": 0.1} if act == "leaky_relu" else {"alpha": 2.0} if act == "celu"
                                 else {}))
  for kernel in (activation_epilogue, activation_hints_followed):
    np.testing.assert_allclose(np.asarray(kernel(a, b, act=act, interpret=True)), np.asarray(want),
                               rtol=1e-5, atol=1e-5)
