"""Findings of a user probe: inputs that reached an InternalError, and diagnostics whose words
were not the user's. Each gets a KernelError at the user's line, in the user's words, with a
hint, or works, the same in interpret mode and when compiling."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect, where

S = jax.ShapeDtypeStruct


# ---------------------------------------------------------------- f16/bf16 atomics of 128 * odd elements
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype), grid=(2,))
def atomic_into_output(x, o, *, kind: ml.constexpr = "add"):
  if kind == "add":
    ml.atomic_add(o, x[...])
  elif kind == "max":
    ml.atomic_max(o, x[...])
  else:
    ml.atomic_min(o, x[...])


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype))
def atomic_into_smem(x, o):
  buf = ml.smem(x.shape, x.dtype)
  buf[...] = ml.zeros(x.shape, x.dtype)
  ml.atomic_add(buf, x[...])
  ml.atomic_add(buf, x[...])
  o[...] = buf[...]


ODD_SHAPES = [(128,), (384,), (1, 128)]


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=str)
@pytest.mark.parametrize("shape", ODD_SHAPES, ids=str)
def test_half_atomic_add_of_single_elements_per_thread_works(shape, dtype):
  """Once: InternalError 'f16/bf16 atomic stores require even vector length, got 1' at .check
  (each thread of a (128,) float16 vector holds one element, and Mosaic GPU's red takes pairs)."""
  x = (jnp.arange(np.prod(shape)) % 7).reshape(shape).astype(dtype)
  atomic_into_output.check(x)
  atomic_into_smem.check(x)
  want = np.asarray(x, np.float32)
  np.testing.assert_array_equal(np.asarray(atomic_into_output(x, interpret=True), np.float32), 2 * want)
  np.testing.assert_array_equal(np.asarray(atomic_into_smem(x, interpret=True), np.float32), 2 * want)


def test_half_atomic_add_of_single_elements_is_one_red_per_element():
  txt = atomic_into_output.mlir(S((128,), jnp.float16))
  assert "red.relaxed.gpu.add.noftz.f16 " in txt
  txt = atomic_into_smem.mlir(S((384,), jnp.bfloat16))
  assert "red.shared::cta.relaxed.cta.add.noftz.bf16 " in txt


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("shape", ODD_SHAPES + [(64,)], ids=str)
def test_half_atomic_max_of_single_elements_is_a_layout_error(shape, kind):
  """Hopper's float16 red max/min exists only for pairs of neighbours (.v2.f16 in GMEM): the
  (64,) vector compiled before, one red.max.f16 per element, and ptxas rejected it on the H200
  ("Vector modifier required for instruction 'red.max.f16'"); then it was MG204. Since probe 56b each element is a
  loop of atom.cas.b16 (no `red.max.f16`), and the numbers are np.fmax's, as interpret mode's."""
  x = ((jnp.arange(np.prod(shape)) % 7) - 3).reshape(shape).astype(jnp.float16)
  atomic_into_output.check(S(shape, jnp.float16), kind=kind)
  np.testing.assert_array_equal(np.asarray(atomic_into_output(x, kind=kind, interpret=True)), np.asarray(x))
  txt = atomic_into_output.mlir(S(shape, jnp.float16), kind=kind)
  assert "atom.relaxed.gpu.cas.b16" in txt and f"red.relaxed.gpu.{kind}" not in txt


@pytest.mark.parametrize("shape", [(256,), (8, 128)], ids=str)
def test_half_atomic_max_of_pairs_works(shape):
  x = (jnp.arange(np.prod(shape)) % 5).reshape(shape).astype(jnp.float16)
  atomic_into_output.check(x, kind="max")
  np.testing.assert_array_equal(atomic_into_output(x, kind="max", interpret=True), x)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=str)
@pytest.mark.parametrize("shape", ODD_SHAPES + [(64,)], ids=str)
def test_half_atomic_add_of_single_elements_on_the_gpu(shape, dtype):
  x = (jnp.arange(np.prod(shape)) % 7).reshape(shape).astype(dtype)
  want = 2 * np.asarray(x, np.float32)
  np.testing.assert_array_equal(np.asarray(atomic_into_output(x), np.float32), want)
  np.testing.assert_array_equal(np.asarray(atomic_into_smem(x), np.float32), want)


# ---------------------------------------------------------------- range() with a run-time step
@mg.mgpu_kernel(out_shape=lambda x, n: S((), jnp.int32))
def sum_with_runtime_step(x, n, out, *, start: ml.constexpr = 0, stop: ml.constexpr = 10):
  acc = 0
  for i in range(start, stop, n[...]):
    acc = acc + i
  out[...] = acc


@pytest.mark.parametrize("start,stop", [(0, 10), (3, 11), (10, 0)])
def test_static_bounds_with_a_runtime_step(start, stop):
  """Once: InternalError "TypeError: 'Value' object cannot be interpreted as an integer" (the
  tracer took len(range(start, stop, step)) of a run-time step)."""
  x = jnp.zeros(128)
  sum_with_runtime_step.check(x, jnp.array(2, jnp.int32), start=start, stop=stop)
  for step in (1, 2, 3):
    got = sum_with_runtime_step(x, jnp.array(step, jnp.int32), start=start, stop=stop, interpret=True)
    assert int(got) == sum(range(start, stop, step))


def test_a_negative_runtime_step_is_reported_in_the_users_terms():
  """Once: 'a loop step of -1: scf.for needs a positive step'."""
  with pytest.raises(mg.InterpretError) as info:
    sum_with_runtime_step(jnp.zeros(128), jnp.array(-1, jnp.int32), interpret=True)
  e = info.value
  assert type(e) is mg.InterpretError and e.code == "MG950"
  assert (e.lineno, e.col_offset) == where(sum_with_runtime_step, "for i in range(")
  assert e.message == ("this loop's run-time step is -1: a loop counts upwards, so a run-time step must be"
                       " positive (with a step of 0 or less the GPU would skip the loop or never end it)")
  assert e.hint == "count down with range(n) and an index n - 1 - i inside the loop, or pass a positive step"


# ---------------------------------------------------------------- 8- and 16-bit integer scalars as indices
@mg.mgpu_kernel(out_shape=lambda x, n: (S((128,), x.dtype), S((), x.dtype), S((), jnp.int32)))
def index_with_a_narrow_scalar(x, n, window, element, total):
  i = n[...]
  window[...] = x.at[ml.ds(i, 128)][...]
  element[...] = x[i]
  acc = 0
  for j in range(i):
    acc = acc + j
  total[...] = acc


@pytest.mark.parametrize("dtype,value", [(jnp.int16, 7), (jnp.uint16, 300), (jnp.int8, 5), (jnp.uint8, 200),
                                         (jnp.int8, -3), (jnp.uint8, 255)], ids=str)
def test_narrow_integer_scalars_index_and_bound_loops(dtype, value):
  """Once: 'an index must be an integer scalar, got a scalar [MG003]' for an int16 start."""
  x = jnp.arange(1024, dtype=jnp.float32)
  n = jnp.array(value, dtype)
  index_with_a_narrow_scalar.check(x, n)
  if value < 0:             # sign-extended: a window at -3 is outside x, as in jnp
    with pytest.raises(mg.OutOfBoundsError, match=r"x\[-3:125\] is outside x's shape"):
      index_with_a_narrow_scalar(x, n, interpret=True)
    return
  window, element, total = index_with_a_narrow_scalar(x, n, interpret=True)
  np.testing.assert_array_equal(window, np.arange(value, value + 128, dtype=np.float32))
  assert float(element) == value and int(total) == sum(range(value))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,value", [(jnp.int16, 7), (jnp.uint16, 300), (jnp.int8, 5), (jnp.uint8, 200)],
                         ids=str)
def test_narrow_integer_scalars_index_on_the_gpu(dtype, value):
  x = jnp.arange(1024, dtype=jnp.float32)
  window, element, total = index_with_a_narrow_scalar(x, jnp.array(value, dtype))
  np.testing.assert_array_equal(window, np.arange(value, value + 128, dtype=np.float32))
  assert float(element) == value and int(total) == sum(range(value))


def test_narrow_integer_indices_widen_by_signedness():
  x = S((1024,), jnp.float32)
  assert "arith.extsi" in index_with_a_narrow_scalar.mlir(x, S((), jnp.int16))
  assert "arith.extui" in index_with_a_narrow_scalar.mlir(x, S((), jnp.uint8))


def test_a_float_index_names_its_dtype():
  e = expect(index_with_a_narrow_scalar, [S((1024,), jnp.float32), S((), jnp.float32)], mg.KernelTypeError,
             "x.at[ml.ds(i, 128)]", "an index must be an integer scalar, got i (float32)")
  assert e.hint.endswith("convert a float32 that holds an index: i.astype(jnp.int32)")


# ---------------------------------------------------------------- messages in the user's words
@mg.mgpu_kernel(out_shape=lambda x, n: S((256,), jnp.float32))
def load_with_an_int_mask(x, n, o):
  idx = ml.arange(256)
  o[...] = x.at[ml.ds(0, 256)].load(mask=(idx < n[...]).astype(jnp.int32), other=0.0)


def test_an_int_mask_names_its_dtype():
  """Once: 'ml.load's mask must be a boolean tensor, got a register tensor'."""
  expect(load_with_an_int_mask, [S((1024,), jnp.float32), S((), jnp.int32)], mg.KernelTypeError,
         "x.at[ml.ds(0, 256)].load(", "ml.load's mask must be a boolean tensor, got an int32 tensor",
         hint="pass a comparison as it is (mask=rows < n, without .astype), or compare a number tensor:"
              " mask=m != 0")


@mg.mgpu_kernel(out_shape=lambda x, n: S((256,), jnp.float32))
def load_with_an_int_other(x, n, o):
  m = ml.arange(256) < n[...]
  o[...] = x.at[ml.ds(0, 256)].load(mask=m, other=ml.zeros((256,), jnp.int32))


def test_a_tensor_other_of_another_dtype_is_the_loads_mistake():
  """Once: 'ml.where on v (float32) and v (int32)': the user wrote no ml.where."""
  expect(load_with_an_int_other, [S((1024,), jnp.float32), S((), jnp.int32)], mg.DtypeMismatchError,
         "x.at[ml.ds(0, 256)].load(", "ml.load's other (int32) differs from x.at[ml.ds(0, 256)]'s dtype (float32)",
         hint="convert it: other=(ml.zeros((256,), jnp.int32)).astype(jnp.float32)")


@mg.mgpu_kernel(out_shape=lambda x: x)
def ref_plus_one(x, o):
  o[...] = x + 1


@mg.mgpu_kernel(out_shape=lambda x_ptr, n: S(x_ptr.shape, x_ptr.dtype), grid=(4,))
def triton_pointer_arithmetic(x_ptr, n, o, *, BLOCK: ml.constexpr = 256):
  pid = ml.program_id(0)
  offsets = pid * BLOCK + ml.arange(BLOCK)
  mask = offsets < n[...]
  x = ml.load(x_ptr + offsets, mask=mask)
  o.at[ml.ds(pid * BLOCK, BLOCK)][...] = x


def test_triton_pointer_arithmetic_points_to_the_window_form():
  """Once: hint 'read it into registers first: x_ptr[...]', which gives x_ptr's values plus offsets."""
  expect(triton_pointer_arithmetic, [S((1024,), jnp.float32), S((), jnp.int32)], mg.KernelTypeError,
         "x_ptr + offsets", "+ works on register values, got x_ptr (GMEM ref) plus integer offsets: a ref is"
         " not a pointer, so offsets are not added to it",
         hint="index x_ptr with the offsets instead of adding them: ml.load(x_ptr.at[offsets], mask=mask) (a run"
              " start + ml.arange(n) moves the window it covers; other offsets gather or scatter); to add to"
              " x_ptr's values, read it first: x_ptr[...] + ...")
  # a ref plus a number is a ref read as a value, not pointer arithmetic
  expect(ref_plus_one, [S((256,), jnp.float32)], mg.KernelTypeError, "x + 1",
         "+ works on register values, got x (GMEM ref)", hint="read it into registers first: x[...]")


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), jnp.float32))
def zeros_of_a_runtime_size(x, n, o):
  o[...] = ml.zeros((n[...],), jnp.float32)


def test_zeros_with_a_runtime_size_names_ml_zeros():
  """Once: 'ml.full needs a static shape'."""
  expect(zeros_of_a_runtime_size, [S((1024,), jnp.float32), S((), jnp.int32)], mg.KernelTypeError,
         "ml.zeros(", "ml.zeros needs a static shape: a tuple of positive Python ints, got (n[...],)")


@mg.mgpu_kernel(out_shape=lambda x, n: S((), jnp.int32))
def cdiv_of_a_float_scalar(x, n: ml.scalar, o):
  o[...] = ml.cdiv(n, 128)


def test_cdiv_of_a_float_scalar_names_ml_cdiv():
  """Once: '// needs integer operands'."""
  expect(cdiv_of_a_float_scalar, [S((1024,), jnp.float32), 3.0], mg.KernelTypeError, "ml.cdiv(",
         "ml.cdiv needs integers, got n (float32)",
         hint="convert it: n.astype(jnp.int32); or, for a float result, ml.ceil(a / b) of floats")
  cdiv_of_a_float_scalar.check(S((1024,), jnp.float32), 3)
  assert int(cdiv_of_a_float_scalar(jnp.zeros(1024), 300, interpret=True)) == 3


@mg.mgpu_kernel(out_shape=lambda x: S((16,), jnp.float32))
def one_hot_counts(x, o):
  v = x[...]
  onehot = (v[:, None] == ml.arange(16)[None, :])
  o[...] = ml.sum(onehot.astype(jnp.float32), axis=0)


def test_a_one_hot_histogram_of_16_bins_compiles():
  builds(one_hot_counts, S((128,), jnp.int32))     # (now compiled: tiles narrower than a warp take fewer lanes a row, tests/test_narrow_rows.py)


# ---------------------------------------------------------------- what the docs promise
LANGUAGE_MD = (__import__("pathlib").Path(__file__).parent.parent / "docs" / "language.md").read_text()


@mg.mgpu_kernel(out_shape=lambda x: S((16,), jnp.int32))
def smem_histogram_of_one_bin(x, o):
  h = ml.smem((16,), jnp.int32)
  h[...] = ml.zeros((16,), jnp.int32)
  b = x[3]
  h[b] = h[b] + 1
  o[...] = h[...]


@mg.mgpu_kernel(out_shape=lambda m, x: x)
def read_a_bool_array(m, x, o):
  o[...] = ml.where(m[...], x[...], 0.0)


def test_the_docs_say_how_one_smem_element_is_updated_and_how_bool_arrays_are_kept():
  """language.md's atomics table had a 'single element' column that read as if SMEM took
  scalar atomics (it is MG003 by design), and its dtype list offered jnp.bool_ with no word on
  bool arrays in memory (MG106 then; read and written as bytes since)."""
  assert "`h[b] = h[b] + 1`" in LANGUAGE_MD and "error (MG003) by design" in LANGUAGE_MD
  got = smem_histogram_of_one_bin(jnp.arange(128, dtype=jnp.int32) % 16, interpret=True)
  np.testing.assert_array_equal(got, np.eye(16, dtype=np.int32)[3])
  # bool arrays are now read and written as their bytes (tests/test_bool_io.py); the docs say so
  assert "Bool arrays in memory are as jax keeps them, one byte an element" in LANGUAGE_MD
  m = rand.bernoulli(rand.key(0), 0.5, (256,))
  x = rand.normal(rand.key(1), (256,), jnp.float32)
  np.testing.assert_array_equal(read_a_bool_array(m, x, interpret=True), np.where(m, x, 0))


# ---------------------------------------------------------------- strided slices: a hint that can be followed
@mg.mgpu_kernel(out_shape=lambda q: S((q.shape[0], q.shape[1] // 2), q.dtype), grid=(1,))
def rope_pairs_strided(q, out):
  even = q.at[:, 0::2][...]                 # (since probe 46a: the plain read q[:, 0::2])
  out[...] = even - q.at[:, 1::2][...]


@mg.mgpu_kernel(out_shape=lambda q: S(q.shape[:-1], q.dtype), grid=(1,))
def rope_pairs_split(q, out):
  even = q.at[:, :, 0][...]                 # the hint's way: an axis of 2, indexed with an int
  odd = q.at[:, :, 1][...]
  out[...] = even - odd


def test_a_strided_slice_hints_an_axis_indexed_with_an_int_and_that_works():
  q = rand.normal(rand.key(0), (64, 64, 2), jnp.float32)
  got = rope_pairs_split(q, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(q[..., 0] - q[..., 1]))
  np.testing.assert_array_equal(np.asarray(rope_pairs_strided(q.reshape(64, 128), interpret=True)), np.asarray(got))
  rope_pairs_split.check(S((64, 64, 2), jnp.float32))


@pytest.mark.gpu
def test_gpu_reads_an_interleaved_pair_through_an_int_index():
  q = rand.normal(rand.key(1), (64, 64, 2), jnp.float32)
  np.testing.assert_array_equal(np.asarray(jax.jit(rope_pairs_split)(q)), np.asarray(q[..., 0] - q[..., 1]))


# ---------------------------------------------------------------- register values no thread can hold
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 256,))
def softmax_whole_rows(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 256, 256), :][...]
  e = ml.exp(v - ml.max(v, axis=1)[:, None])
  out.at[ml.ds(i * 256, 256), :][...] = e / ml.sum(e, axis=1)[:, None]


def test_a_tile_far_past_a_threads_registers_is_rejected_where_it_is_made():
  e = expect(softmax_whole_rows, [S((1024, 8192), jnp.float32)], mg.RegisterCapacityError,
             "x.at[ml.ds(i * 256, 256), :][...]",
             "this 256x8192 float32 tile needs 16384 registers a thread across the CTA's 128 threads;"
             " a thread has 255")
  assert "ml.smem" in e.hint
  softmax_whole_rows.check(S((1024, 256), jnp.float32))     # 512 a thread: spills, but builds


# ---------------------------------------------------------------- dimensions past 32-bit indices
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 256),))
def double_long(x, out):
  i = ml.program_id(0)
  buf = ml.smem((256,))
  ml.copy(x.at[ml.ds(i * 256, 256)], buf)
  ml.copy(buf, out.at[ml.ds(i * 256, 256)])


def test_a_dimension_past_int32_is_rejected_at_its_parameter():
  # i * 256 wraps past program 2**23; TMA coordinates are 32-bit: the last tile was silently lost.
  e = expect(double_long, [S((2 ** 31 + 256,), jnp.float16)], mg.SignatureError, "x, out):",
             "x has 2147483904 elements along dimension 0, more than the 2147483647 (2**31 - 1) a kernel"
             " can index along one dimension: indices and TMA coordinates are 32-bit")
  assert "x.reshape(8388609, 256)" in e.hint
  double_long.check(S((2 ** 31 - 256,), jnp.float16))       # just below: fine


# ---------------------------------------------------------------- reading what other programs accumulate
@mg.mgpu_kernel(out_shape=lambda x: (S((), jnp.float32), x), grid=lambda x: (x.shape[0] // 128,))
def normalise_by_running_total(x, tot, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  ml.atomic_add(tot, ml.sum(v))
  out.at[ml.ds(i * 128, 128)][...] = v / tot[...]


@mg.mgpu_kernel(out_shape=lambda n, x: (S((), jnp.float32), x), grid=lambda n, x: (x.shape[0] // 128,))
def normalise_if(n, x, tot, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  ml.atomic_add(tot, ml.sum(v))
  if n[0] > 0:                                       # data-dependent: left to interpret mode
    v = v / tot[...]
  out.at[ml.ds(i * 128, 128)][...] = v


def test_reading_an_output_other_programs_accumulate_is_a_race_when_compiling():
  e = expect(normalise_by_running_total, [S((256,), jnp.float32)], mg.RaceError, "tot[...]",
             "tot is read here while other programs may still be adding to it with atomics: programs run"
             " in no fixed order, so the value read depends on timing")
  assert "second kernel" in e.hint


def test_interpret_mode_names_the_read_that_races_with_atomics():
  with pytest.raises(mg.RaceError) as info:
    normalise_if(jnp.ones((1,), jnp.int32), jnp.ones((256,), jnp.float32), interpret=True)
  e = info.value
  read_line = where(normalise_if, "tot[...]")[0]
  assert any(f":{read_line}:" in n and "reads it here" in n for n in e.notes), e.notes
  assert "second kernel" in e.hint


# ---------------------------------------------------------------- a float `other` for an integer load
@mg.mgpu_kernel(out_shape=lambda x: S((), jnp.int32))
def int_row_max(x, out):
  m = ml.arange(128) < x.shape[0]
  out[...] = ml.max(x.at[ml.ds(0, 128)].load(mask=m, other=-float("inf")))


def test_a_float_other_for_an_int_load_hints_the_identity_of_the_reduction():
  e = expect(int_row_max, [S((100,), jnp.int32)], mg.DtypeMismatchError, "x.at[ml.ds(0, 128)].load(",
             "ml.load's other (-inf) is a float but x.at[ml.ds(0, 128)] is int32")
  assert "other=-2147483648 for a max" in e.hint and "other=0 for a sum" in e.hint


# ---------------------------------------------------------------- operands named by their own text
@mg.mgpu_kernel(out_shape=lambda x, b, t: x)
def bias_correction(x, b: ml.scalar, t: ml.scalar, out):
  bc = 1.0 - ml.exp(t * ml.log(b))
  out[...] = x[...] / bc


def test_a_dtype_mismatch_names_the_operand_not_the_assignment_target():
  e = expect(bias_correction, [S((128,), jnp.float32), S((), jnp.bfloat16), S((), jnp.float32)],
             mg.DtypeMismatchError, "t * ml.log(b)",
             "* on t (float32) and ml.log(b) (bfloat16): dtypes differ and are never converted implicitly")
  assert e.hint == "convert one side explicitly, e.g. ml.log(b).astype(jnp.float32)"
