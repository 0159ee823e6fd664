"""Gathers: GMEM refs indexed by register tensors of indices (`table[ids, :]`, `x[idx]`), with
NumPy's advanced-indexing shapes, in interpret mode, as built for CUDA, and on the GPU."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
R = 64


@mg.mgpu_kernel(out_shape=lambda table, ids: S((ids.shape[0], table.shape[1]), table.dtype),
                grid=lambda table, ids: (ids.shape[0] // R,))
def embedding(table, ids, out):
  """R rows of the table a program, at indices read from memory."""
  i = ml.program_id(0)
  rows = ids.at[ml.ds(i * R, R)][...]
  out.at[ml.ds(i * R, R), :][...] = table[rows, :]


@mg.mgpu_kernel(out_shape=lambda x, idx: S(idx.shape, x.dtype))
def take(x, idx, out):
  out[...] = x[idx[...]] * 2


@mg.mgpu_kernel(out_shape=lambda t, ids: S((ids.shape[0], 64), t.dtype))
def rows_of_a_window(t, ids, out):
  out[...] = t.at[:, ml.ds(64, 64)][ids[...], :]


@mg.mgpu_kernel(out_shape=lambda t, ids: S((t.shape[0], ids.shape[0]), t.dtype))
def columns(t, ids, out):
  out[...] = t[:, ids[...]]


@mg.mgpu_kernel(out_shape=lambda t, r, c: S(r.shape, t.dtype))
def pairs(t, r, c, out):
  """t[r[k], c[k]]: two index vectors broadcast together (int16 indices widen)."""
  out[...] = t[r[...], c[...]]


# numpy inputs: no XLA program compiled when pytest collects the file (every xdist worker collects it)
def _table(shape, dtype=F32):
  return np.random.default_rng(0).standard_normal(shape, np.float32).astype(dtype)


def _ids(n, hi, seed=1):
  return np.random.default_rng(seed).integers(0, hi, n).astype(np.int32)


def _cases():
  t = _table((1000, 128))
  ids = _ids(256, 1000)
  small = _table((64, 128), jnp.bfloat16)
  r, c = _ids(128, 64, 2).astype(jnp.int16), _ids(128, 128, 3)
  return [
      ("embedding", embedding, (t, ids), lambda: np.asarray(t)[np.asarray(ids)]),
      ("embedding_bf16", embedding, (t.astype(jnp.bfloat16), ids), lambda: np.asarray(t.astype(jnp.bfloat16))[np.asarray(ids)]),
      ("take", take, (t.reshape(-1), ids), lambda: np.asarray(t).reshape(-1)[np.asarray(ids)] * 2),
      ("rows_of_a_window", rows_of_a_window, (t, ids[:128]), lambda: np.asarray(t)[np.asarray(ids[:128]), 64:]),
      ("columns", columns, (small, c), lambda: np.asarray(small)[:, np.asarray(c)]),
      ("pairs", pairs, (small, r, c), lambda: np.asarray(small)[np.asarray(r), np.asarray(c)]),
  ]


CASES = {name: case for name, *case in _cases()}


@pytest.mark.parametrize("name", list(CASES))
def test_interpret_mode_and_cuda_build(name):
  kernel, args, want = CASES[name]
  got = kernel(*args, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), want())
  builds(kernel, *[S(a.shape, a.dtype) for a in args])
  exported = jax.export.export(jax.jit(kernel), platforms=["cuda"])(*args)
  assert "mosaic_gpu" in exported.mlir_module()


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES))
def test_gpu(name):
  kernel, args, want = CASES[name]
  np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(*args)), want())


def test_rows_are_gathered_a_vector_at_a_time_where_aligned():
  specs = S((1000, 128), F32), S((256,), jnp.int32)
  assert "contiguous=True" in embedding.typed_ir(*specs)
  mlir = embedding.mlir(*specs)         # 64 x 128 float32: 16 registers of 4 a thread, 16 vector loads
  assert mlir.count("memref.load") == 0 and mlir.count("vector.load") == 16
  # a column gather has no contiguous run: an element at a time
  specs = S((64, 128), F32), S((128,), jnp.int32)
  assert "contiguous=True" not in columns.typed_ir(*specs)
  assert columns.mlir(*specs).count("memref.load") == 64


def test_indices_outside_follow_jnp_negative_from_the_end_and_clamped():
  """jnp's gather: -1 is the last row, past the end clamps to it (no read leaves the array)."""
  t = _table((100, 128))
  ids = jnp.array([-1, -100, 100, 10 ** 6, -(10 ** 6), 5, 0, 99] * 8, jnp.int32)
  want = np.asarray(jnp.asarray(t)[ids])    # jnp clamps and wraps the same way
  np.testing.assert_array_equal(np.asarray(embedding(t, ids, interpret=True)), want)


@pytest.mark.gpu
def test_gpu_indices_outside_follow_jnp():
  t = _table((100, 128))
  ids = jnp.array([-1, -100, 100, 10 ** 6, -(10 ** 6), 5, 0, 99] * 8, jnp.int32)
  np.testing.assert_array_equal(np.asarray(jax.jit(embedding)(t, ids)), np.asarray(jnp.asarray(t)[ids]))


# ---------------------------------------------------------------- diagnostics
@mg.mgpu_kernel(out_shape=lambda x, idx: S(idx.shape, x.dtype))
def gather_from_smem(x, idx, out):
  s = ml.smem(x.shape)
  ml.copy(x, s)
  out[...] = s[idx[...]]


@mg.mgpu_kernel(out_shape=lambda x, idx: S(idx.shape, x.dtype))
def float_indices(x, idx, out):
  out[...] = x[idx[...]]


def test_a_gather_from_smem_reads_the_buffer_at_its_indices():
  """It was MG003 "only GMEM refs gather"; since probe 69b it is the gather from the buffer's whole read, jnp's
  indices (negative ones from the end, the others clamped) (design note 228)."""
  x = np.arange(256, dtype=np.float32) - 9
  idx = np.random.default_rng(0).integers(-300, 300, 128).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(gather_from_smem(x, idx, interpret=True)), np.asarray(jnp.asarray(x)[idx]))


def test_float_indices_are_rejected():
  expect(float_indices, [S((256,), F32), S((128,), F32)], mg.KernelTypeError, "x[idx[...]]",
         "a gather's indices are integers, got idx[...] (float32) for dimension 0 of x",
         hint="convert them: ids.astype(jnp.int32)")


@mg.mgpu_kernel(out_shape=lambda t, ids: S((ids.shape[0], t.shape[1]), t.dtype))
def rows_of_the_first_32(t, ids, out):
  out[...] = t.at[0:32][ids[...], :]


def test_an_index_outside_the_view_stays_inside_the_view():
  """Once read row 40 of the whole table through a 32-row view; now clamped within the view, as
  jnp's t[0:32][ids] is."""
  t, ids = _table((100, 128)), jnp.array([40, -1, 3, 31] * 4, jnp.int32)
  np.testing.assert_array_equal(np.asarray(rows_of_the_first_32(t, ids, interpret=True)),
                                np.asarray(jnp.asarray(t)[0:32][ids]))


@mg.mgpu_kernel(out_shape=lambda x, idx: S(idx.shape, x.dtype))
def take_u32(x, idx, out):
  out[...] = x[idx[...]]


def test_uint32_indices_stay_unsigned():
  """2**31 in uint32 is past the end (clamped to the last element), not -2**31."""
  x = _table((256,))
  idx = jnp.array([2 ** 31, 2 ** 32 - 1, 7, 255] * 32, jnp.uint32)
  want = np.asarray(x)[np.minimum(np.asarray(idx, np.int64), 255)]    # (jnp reads 2**31 as -2**31: x[0])
  np.testing.assert_array_equal(np.asarray(take_u32(x, idx, interpret=True)), want)
  assert "index_castui" in take_u32.mlir(S((256,), F32), S((128,), jnp.uint32))


@mg.mgpu_kernel(out_shape=lambda t, ids: S((ids.shape[0], t.shape[1]), t.dtype))
def bool_rows(t, ids, out):
  out[...] = t[ids[...] > 3, :]


@mg.mgpu_kernel(out_shape=lambda t, ids, g: t)
def scatter_rows(t, ids, g, out):
  out[ids[...], :] = g[...]


def test_a_mask_index_says_the_shape_would_depend_on_the_data():
  e = expect(bool_rows, [S((100, 128), F32), S((16,), jnp.int32)], mg.KernelTypeError, "t[ids[...] > 3, :]",
             "t is indexed with a bool tensor: selecting by a mask gives a shape that depends on the data,"
             " which a kernel's tensors cannot have")
  assert e.hint.startswith("keep the shape and select: ml.where(mask, x, 0)")


def test_a_scatter_of_rows_sets_them_as_jnp_does():
  """Once an error naming the atomic add: rows stored at computed places, the other rows 0."""
  ids = jnp.array([3, 97, 0, 50, 12, 13, 99, 1, 2, 40, 41, 42, 60, 61, 62, 70], jnp.int32)
  g = rand.normal(rand.key(1), (16, 128), F32)
  t = jnp.zeros((100, 128), F32)
  np.testing.assert_array_equal(scatter_rows(t, ids, g, interpret=True), jnp.zeros_like(t).at[ids].set(g))


@mg.mgpu_kernel(out_shape=lambda t, ids: S((128, 16), t.dtype))
def narrow_rows(t, ids, out):
  out[...] = t[ids[...], :]


def test_a_gather_too_narrow_for_a_warp_reads_wider_rows():
  """Once said the tile 'is reduced or broadcast', which the user never wrote; then that it needs columns a
  multiple of 32: the compiler now reads 32 columns and keeps 16 (test_probe36e)."""
  t, ids = _table((100, 16)), _ids(128, 100)
  np.testing.assert_array_equal(np.asarray(narrow_rows(t, ids, interpret=True)), np.asarray(t)[np.asarray(ids)])


@mg.mgpu_kernel(out_shape=lambda t, ids, *, c, shift: S((ids.shape[0], c), t.dtype),
                grid=lambda t, ids, *, c, shift: (t.shape[1] // c - 1,))
def column_block(t, ids, out, *, c: ml.constexpr, shift: ml.constexpr):
  j = ml.program_id(0)
  if j == 0:
    out[...] = t.at[:, ml.ds(j * c + shift, c)][ids[...], :]


def test_a_run_time_view_start_proved_aligned_gathers_a_vector_at_a_time():
  specs = S((100, 512), F32), S((64,), jnp.int32)
  assert "contiguous=True" in column_block.typed_ir(*specs, c=128, shift=0)     # j * 128: 512-byte aligned
  assert "contiguous=True" not in column_block.typed_ir(*specs, c=128, shift=1)  # j * 128 + 1: not
  t, ids = _table((100, 512)), _ids(64, 100)
  for shift in (0, 1):
    np.testing.assert_array_equal(np.asarray(column_block(t, ids, c=128, shift=shift, interpret=True)),
                                  np.asarray(t)[np.asarray(ids), shift:shift + 128])


@pytest.mark.gpu
@pytest.mark.parametrize("shift", [0, 1])
def test_gpu_run_time_view_starts(shift):
  t, ids = _table((100, 512)), _ids(64, 100)
  got = jax.jit(lambda t, i: column_block(t, i, c=128, shift=shift))(t, ids)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(t)[np.asarray(ids), shift:shift + 128])


@mg.mgpu_kernel(out_shape=lambda t, a, b: S((128,), t.dtype))
def too_many_indices(t, a, b, out):
  out[...] = t[a[...], b[...], 0]


@mg.mgpu_kernel(out_shape=lambda t, a, b: S((128, 64), t.dtype))
def strided_slice_gather(t, a, b, out):
  out[...] = t[a[...], ::2]


@mg.mgpu_kernel(out_shape=lambda t, a, b: S((128,), t.dtype))
def unbroadcastable(t, a, b, out):
  out[...] = t[a[...], b.at[0:64][...]]


@pytest.mark.parametrize("kernel, at, cls, message", [
    (too_many_indices, "t[a[...], b[...], 0]", mg.IndexOutOfBoundsError,
     "too many indices for t of rank 2: got 3"),
    (strided_slice_gather, "t[a[...], ::2]", mg.KernelTypeError, "a gather's slices are static with a step of 1"),
    (unbroadcastable, "t[a[...], b.at[0:64][...]]", mg.ShapeMismatchError,
     "a gather's indices on a[...] of shape (128,) and b.at[0:64][...] of shape (64,): the shapes do not"
     " broadcast (axis 0 of the result would be both 128 and 64)"),
])
def test_gather_mistakes_are_located(kernel, at, cls, message):
  expect(kernel, [S((100, 128), F32), S((128,), jnp.int32), S((128,), jnp.int32)], cls, at, message)


# ---------------------------------------------------------------- a view's own run-time index
@mg.mgpu_kernel(out_shape=lambda t, b: S((128,), t.dtype))
def gather_from_a_runtime_row(t, b, out):
  out[...] = t.at[b[0]][ml.arange(128)]


@mg.mgpu_kernel(out_shape=lambda v, b: S((4, 128), jnp.float32))
def scatter_into_a_runtime_row(v, b, out):
  ml.atomic_add(out.at[b[0]].at[ml.arange(128)], v[...])


@mg.mgpu_kernel(out_shape=lambda t, s: S((8, 128), t.dtype))
def gather_from_a_runtime_window(t, s, out):
  out[...] = t.at[ml.ds(s[0], 8)][ml.arange(8)[:, None], ml.arange(128)[None, :]]


@pytest.mark.parametrize("b", [-1, 4, -5])
def test_a_gather_or_scatter_through_a_view_outside_the_array_is_out_of_bounds(b):
  """The tensor indices are clamped to the view (jnp); the view's own run-time row is not, and
  interpret mode wrapped -1 to the last row (numpy) or failed with MG900: now MG952, as a
  plain read of the same view (the GPU would read or write outside the array)."""
  t = jnp.arange(4 * 128, dtype=jnp.float32).reshape(4, 128)
  bb = jnp.array([b], jnp.int32)
  for kernel, args in ((gather_from_a_runtime_row, (t, bb)), (scatter_into_a_runtime_row, (t[0], bb))):
    with pytest.raises(mg.OutOfBoundsError) as info:
      kernel(*args, interpret=True)
    assert info.value.code == "MG952" and "outside" in info.value.message
  with pytest.raises(mg.OutOfBoundsError):
    gather_from_a_runtime_window(jnp.zeros((16, 128)), jnp.array([b * 4 + 2], jnp.int32), interpret=True)


def test_a_gather_through_a_view_inside_the_array_reads_it():
  t = jnp.arange(16 * 128, dtype=jnp.float32).reshape(16, 128)
  np.testing.assert_array_equal(gather_from_a_runtime_row(t[:4], jnp.array([3], jnp.int32), interpret=True), t[3])
  np.testing.assert_array_equal(gather_from_a_runtime_window(t, jnp.array([8], jnp.int32), interpret=True), t[8:16])
  got = scatter_into_a_runtime_row(t[0], jnp.array([2], jnp.int32), interpret=True)
  np.testing.assert_array_equal(got, jnp.zeros((4, 128)).at[2].set(t[0]))
