"""Probe 16 (helpers testing numerics, shapes and masks, and JAX integration from the docs):
what was silently wrong (an out-of-range `other=`, `-` of a mask), wrongly rejected (a masked
SMEM store into a fresh buffer, a scalar mask, ml.full of a scalar of another dtype, a Python
int through jax.jit with x64) or misleading (messages naming ml.full / ml.where the user never
wrote, mask hints of the wrong rank, uint64)."""
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32


@mg.mgpu_kernel(out_shape=lambda x: x)
def other_too_large(x, o):
  m = ml.arange(128) < 100
  o[...] = x.at[ml.ds(0, 128)].load(mask=m, other=2**32 + 77)


@mg.mgpu_kernel(out_shape=lambda x: x)
def smem_other_too_large(x, o):
  b = ml.smem((128,), I32)
  b[...] = x[...]
  o[...] = b.load(mask=ml.arange(128) < 100, other=2**31)


def test_an_out_of_range_other_is_an_error_not_its_low_bits():
  """other=2**32 + 77 gave 77 where the mask was off (GMEM loads only; SMEM said 'ml.where')."""
  expect(other_too_large, [S((128,), I32)], mg.KernelTypeError, "x.at[ml.ds(0, 128)].load",
         "ml.load's other uses the Python int 4294967373, which does not fit in int32: kernels compute in"
         " 32 bits (a larger constant would silently lose its high bits)",
         hint="an integer of int32: other=2147483647")
  expect(smem_other_too_large, [S((128,), I32)], mg.KernelTypeError, "b.load(",
         "ml.load's other uses the Python int 2147483648, which does not fit in int32: kernels compute in"
         " 32 bits (a larger constant would silently lose its high bits)",
         hint="an integer of int32: other=2147483647")


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def negated_mask(x, o):
  m = -(x[...] > 0)
  o[...] = m.astype(I32)


def test_negating_a_mask_is_rejected():
  """The GPU computed 0 - m in 1 bit (m unchanged); interpret mode failed with MG900."""
  expect(negated_mask, [S((256,), I32)], mg.UnsupportedDtypeError, "-(x[...] > 0)", "- on boolean values",
         hint="for logic use ~(x[...] > 0) (not); to negate numbers, convert first: -(x[...] > 0).astype(jnp.int32)")


@mg.mgpu_kernel(out_shape=lambda x: x)
def store_too_large(x, o):
  o[...] = 2**40


@mg.mgpu_kernel(out_shape=lambda x: x)
def atomic_too_large(x, o):
  ml.atomic_add(o, 2**33 + 1)


@pytest.mark.parametrize("kernel,at,what", [(store_too_large, "o[...] = 2**40", "the store into o"),
                                            (atomic_too_large, "ml.atomic_add", "ml.atomic_add")])
def test_a_too_large_int_names_the_store_or_atomic(kernel, at, what):
  """The message said 'ml.full uses the Python int ...'."""
  value = 2**40 if kernel is store_too_large else 2**33 + 1
  expect(kernel, [S((128,), I32)], mg.KernelTypeError, at,
         f"{what} uses the Python int {value}, which does not fit in int32: kernels compute in 32 bits (a"
         " larger constant would silently lose its high bits)")


@mg.mgpu_kernel(out_shape=lambda x: S((4, 128), F32), grid=(4,))
def full_of_program_id(x, o):
  i = ml.program_id(0)
  o.at[i][...] = ml.full((128,), i, F32) + x[...]


@mg.mgpu_kernel(out_shape=lambda x: S((4, 128), F32), grid=(4,))
def store_int_scalar_into_float(x, o):
  i = ml.program_id(0)
  o.at[i][...] = i


def test_full_converts_a_scalar_as_jnp_full_and_a_store_does_not():
  x = jnp.arange(128, dtype=F32)
  got = full_of_program_id(x, interpret=True)
  np.testing.assert_array_equal(got, jnp.arange(4, dtype=F32)[:, None] + x[None, :])
  expect(store_int_scalar_into_float, [S((1,), F32)], mg.DtypeMismatchError, "o.at[i][...] = i",
         "the store into o.at[i] of an int32 scalar as float32: no implicit conversion",
         hint="convert it first: i.astype(jnp.float32)")


@mg.mgpu_kernel(out_shape=lambda x, *, short: x, grid=lambda x, *, short: (ml.cdiv(x.shape[0], 64),))
def masked_smem_store(x, o, *, short: ml.constexpr):
  i = ml.program_id(0)
  m = ((i * 64 + ml.arange(64)) < x.shape[0] - short)[:, None]
  buf = ml.smem((64, x.shape[1]), F32)
  buf.store(x.at[ml.ds(i * 64, 64), :].load(mask=m, other=0.0) * 2.0, mask=m)
  ml.copy(buf, o.at[ml.ds(i * 64, 64), :])       # rows past the end are dropped


def test_masked_smem_store_into_a_fresh_buffer():
  """Was MG601 'buf is read before anything writes it' at the store (its hidden merge read).
  Now the elements the mask leaves unwritten stay unwritten: a TMA store of them into the
  array is MG601 at the copy, one past the array's end is dropped."""
  x = jnp.arange(100 * 64, dtype=F32).reshape(100, 64)
  np.testing.assert_array_equal(masked_smem_store(x, short=0, interpret=True), x * 2)
  jax.export.export(jax.jit(lambda x: masked_smem_store(x, short=0)), platforms=["cuda"])(S(x.shape, F32))
  with pytest.raises(mg.UninitializedReadError) as e:
    masked_smem_store(x, short=10, interpret=True)
  assert "buf[26:36, :] is read in program (1, 0, 0) before anything writes it" in str(e.value)
  assert e.value.lineno == masked_smem_store.fn.__code__.co_firstlineno + 6


@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=lambda x, n: (ml.cdiv(x.shape[0], 128),))
def scalar_mask(x, n: ml.scalar, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)].load(mask=i * 128 < n, other=7.0)


@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=lambda x, n: (ml.cdiv(x.shape[0], 128),))
def column_mask_for_a_vector(x, n: ml.scalar, out):
  i = ml.program_id(0)
  rows = i * 128 + ml.arange(128)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)].load(mask=rows[:, None] < n, other=7.0)


def test_a_scalar_mask_covers_the_window_and_mask_hints_have_its_rank():
  """A scalar mask was 'must be a boolean tensor', with a 2-D hint for a 1-D window."""
  x = jnp.arange(1024, dtype=F32)
  np.testing.assert_array_equal(scalar_mask(x, 300, interpret=True), jnp.where(jnp.arange(1024) < 384, x, 7.0))
  jax.export.export(jax.jit(lambda x: scalar_mask(x, 300)), platforms=["cuda"])(S(x.shape, F32))
  expect(column_mask_for_a_vector, [S((1024,), F32), S((), I32)], mg.ShapeMismatchError, "x.at[",
         "ml.load's mask of shape (128, 1) does not fit x.at[ml.ds(i * 128, 128)] of shape (128,)",
         hint="the mask needs the window's shape (128,), or one that broadcasts to it: rows = i * 128 +"
              " ml.arange(128); mask = rows < n")


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def to_uint64(x, out):
  out[...] = x[...].astype(jnp.uint64).astype(I32)


def test_uint64_is_named_as_unsupported():
  """Was 'ml.cast needs a dtype such as jnp.float32, got <class 'jax.numpy.uint64'>'."""
  expect(to_uint64, [S((128,), I32)], mg.UnsupportedDtypeError, "x[...].astype",
         "the conversion (.astype / ml.cast): uint64 is not a kernel dtype")


_X64 = textwrap.dedent('''
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp, numpy as np, mgpu_dsl as mg
    from mgpu_dsl import language as ml

    @mg.mgpu_kernel(out_shape=lambda x, a: x, grid=(1,))
    def add(x, a: ml.scalar, out):
        out[...] = x[...] + a

    @mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
    def dbl(x, out):
        out[...] = x[...] * 2

    x = jnp.arange(128, dtype=jnp.int32)
    eager = add(x, 3, interpret=True)
    jitted = jax.jit(lambda x, a: add(x, a, interpret=True))(x, 3)
    assert (eager == x + 3).all() and (jitted == x + 3).all()
    try:
        dbl(np.arange(128, dtype=np.float64), interpret=True)
    except mg.SignatureError as e:
        assert "jax.jit" not in e.hint and "x.astype(np.float32)" in e.hint, e.hint
    else:
        raise AssertionError("float64 accepted")
    print("ok")
''')


def test_a_python_int_through_jit_with_x64_is_int32_as_when_eager(tmp_path):
  """With jax_enable_x64, jax.jit hands a Python int over as a weak int64: `int32 + a` was MG104
  under jit and fine eagerly. And a NumPy float64 array's hint blamed jax.jit."""
  script = tmp_path / "x64.py"
  script.write_text(_X64)
  env = dict(os.environ, MGPU_DSL_CACHE_DIR="off", JAX_PLATFORMS="cpu")
  r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
  assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


@pytest.mark.gpu
def test_probe16_gpu():
  """The masked SMEM store (its merge read of a fresh buffer), a scalar mask and ml.full of a
  scalar of another dtype, on the GPU."""
  x = jnp.arange(100 * 64, dtype=F32).reshape(100, 64)
  np.testing.assert_array_equal(jax.jit(lambda x: masked_smem_store(x, short=0))(x), x * 2)
  v = jnp.arange(1024, dtype=F32)
  np.testing.assert_array_equal(jax.jit(lambda v: scalar_mask(v, 300))(v),
                                jnp.where(jnp.arange(1024) < 384, v, 7.0))
  r = jnp.arange(128, dtype=F32)
  np.testing.assert_array_equal(jax.jit(full_of_program_id)(r), jnp.arange(4, dtype=F32)[:, None] + r[None, :])


T = 32


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[::-1], x.dtype),
                grid=lambda x: (ml.cdiv(x.shape[0], T), ml.cdiv(x.shape[1], T)))
def masked_transpose(x, out):
  i, j = ml.program_id(0), ml.program_id(1)
  r = i * T + ml.arange(T)
  c = j * T + ml.arange(T)
  m = (r[:, None] < x.shape[0]) & (c[None, :] < x.shape[1])
  mt = (c[:, None] < x.shape[1]) & (r[None, :] < x.shape[0])
  t = x.at[ml.ds(i * T, T), ml.ds(j * T, T)].load(mask=m, other=0.0)
  out.at[ml.ds(j * T, T), ml.ds(i * T, T)].store(t.T, mask=mt)


def test_an_index_vector_broadcast_both_ways_compiles():
  """A masked transpose compares its index vectors as rows of one tile and columns of the other
  (as Triton users write it): it was MG204, naming 'ml.arange(T)' and internal layout names.
  Now each orientation gets its own copy of the index computation."""
  x = jnp.arange(100 * 70, dtype=F32).reshape(100, 70)
  np.testing.assert_array_equal(masked_transpose(x, interpret=True), x.T)
  jax.export.export(jax.jit(masked_transpose), platforms=["cuda"])(S(x.shape, F32))


@mg.mgpu_kernel(out_shape=lambda x, ids: (x, x))
def loaded_vector_both_ways(x, ids, o1, o2):
  c = ids[...]
  o1[...] = x[...] + c[:, None]
  o2[...] = x[...] + c[None, :]


@mg.mgpu_kernel(out_shape=lambda x, ids: (x, x))
def smem_vector_both_ways(x, ids, o1, o2):
  buf = ml.smem((128,), F32)
  buf[...] = ids[...]
  c = buf[...]
  o1[...] = x[...] + c[:, None]
  o2[...] = x[...] + c[None, :]


@mg.mgpu_kernel(out_shape=lambda x, ids: (x, x))
def smem_vector_aligned(x, ids, o1, o2):
  buf = ml.smem((128,), F32)
  buf[...] = ids[...]
  c = buf[...]
  o1[...] = x[...] + c[:, None]
  o2[...] = x[...] + c


def test_a_vector_read_from_an_input_is_read_again_for_each_orientation():
  """An input is read-only, so a vector read from one is read again for its second orientation,
  as index vectors are recomputed (tests/test_probe30b.py)."""
  x, ids = jnp.arange(128 * 128, dtype=F32).reshape(128, 128), jnp.arange(128, dtype=F32) * 3
  o1, o2 = loaded_vector_both_ways(x, ids, interpret=True)
  np.testing.assert_array_equal(o1, x + ids[:, None])
  np.testing.assert_array_equal(o2, x + ids[None, :])


def test_a_vector_read_from_smem_in_two_layouts_is_named_as_written():
  """A vector read from SMEM is not read again: the conflict names it as the user did
  (it said 'ml.arange(T)' and internal layout names such as rows1x1_col vs rows1x1_row)."""
  e = expect(smem_vector_aligned, [S((128, 128), F32), S((128,), F32)], mg.LayoutError, "x[...] + c",
             "c is used as a row statistic (one value per row) of one tile and as a column vector (one"
             " value per column) of another: a register vector lives in one of the two layouts", nth=1)
  assert "load it again" in e.hint
  # both orientations written out: the second use reads a copy through SMEM (probe 33c)
  x, ids = jnp.arange(128 * 128, dtype=F32).reshape(128, 128), jnp.arange(128, dtype=F32) * 3
  o1, o2 = smem_vector_both_ways(x, ids, interpret=True)
  np.testing.assert_array_equal(o1, x + ids[:, None])
  np.testing.assert_array_equal(o2, x + ids[None, :])


@pytest.mark.gpu
def test_probe16_masked_transpose_gpu():
  x = jnp.arange(100 * 70, dtype=F32).reshape(100, 70)
  np.testing.assert_array_equal(jax.jit(masked_transpose)(x), x.T)
