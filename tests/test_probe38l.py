"""Probe 38l (Triton tutorials and Pallas examples ported from the docs alone): vector add, fused
softmax, dropout, layer norm, grouped and persistent matmul, grouped GEMM, attention, libdevice math,
Pallas's program_id/ds idioms, masked loads at boundaries."""
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _line(fn, text):
  """(line, column) of the first line of `fn` holding `text`."""
  lines, first = inspect.getsourcelines(fn)
  k = next(i for i, s in enumerate(lines) if text in s)
  return first + k, lines[k].index(text)


# ---------------------------------------------------------------- Pallas's accumulation over a grid axis
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32), grid=lambda x: (x.shape[0] // 8,))
def pallas_colsum(x_ref, o_ref):
  i = ml.program_id(0)
  if i == 0:
    o_ref[...] = ml.zeros((x_ref.shape[1],), F32)
  o_ref[...] += ml.sum(x_ref[ml.ds(i * 8, 8), :], axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32), grid=lambda x: (x.shape[0] // 8,))
def pallas_colsum_fixed(x_ref, o_ref):
  i = ml.program_id(0)
  ml.atomic_add(o_ref.at[...], ml.sum(x_ref[ml.ds(i * 8, 8), :], axis=0))


def test_accumulating_write_by_every_program_hints_atomic_add():
  """`o_ref[...] += part` in every program (Pallas's revisited output block) was a write/write race
  whose hint split the output into one window a program, which changes what the kernel computes; it
  is the accumulation across programs, hinted as the atomic update (and followed, correct)."""
  with pytest.raises(mg.RaceError) as e:
    pallas_colsum.check(S((64, 128), F32))
  line, col = _line(pallas_colsum, "o_ref[...] +=")
  assert (e.value.lineno, e.value.col_offset) == (line, col)
  assert "both write o_ref[0]" in str(e.value)
  assert "ml.atomic_add(out.at[...], part)" in e.value.hint and "drop the zeroing write" in e.value.hint
  assert "own window" not in e.value.hint
  x = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)
  np.testing.assert_allclose(pallas_colsum_fixed(x, interpret=True), x.sum(0), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_gpu_accumulation_by_atomics():
  x = np.random.default_rng(1).standard_normal((256, 512)).astype(np.float32)
  np.testing.assert_allclose(jax.jit(pallas_colsum_fixed)(x), x.sum(0), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- Triton's num_stages on a loop of register loads
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def softmax_rows_staged(x, out, *, num_stages: ml.constexpr = 2):
  for row in ml.range(ml.program_id(0), x.shape[0], ml.num_programs(0), num_stages=num_stages):
    r = x.at[row][...]
    e = ml.exp(r - ml.max(r, axis=0))
    out.at[row][...] = e / ml.sum(e, axis=0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def softmax_rows_plain(x, out):
  for row in ml.range(ml.program_id(0), x.shape[0], ml.num_programs(0)):
    r = x.at[row][...]
    e = ml.exp(r - ml.max(r, axis=0))
    out.at[row][...] = e / ml.sum(e, axis=0)


def test_num_stages_on_a_loop_without_tma_loads_says_drop_it():
  """Triton's persistent softmax, `tl.range(start, n, step, num_stages=...)`, was hinted `write
  stages=`, which then failed as MG502 (no TMA load to pipeline): the hint now drops the keyword,
  with the loop's own header, and that kernel runs."""
  x = np.random.default_rng(2).standard_normal((10, 512)).astype(np.float32)
  # since probe 48g the tutorial's num_stages= is taken: nothing to pipeline in a loop of register loads
  np.testing.assert_allclose(softmax_rows_staged(x, interpret=True), jax.nn.softmax(x, axis=-1), rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(softmax_rows_plain(x, interpret=True), jax.nn.softmax(x, axis=-1), rtol=1e-5, atol=1e-7)


@ml.inline
def _load_tile(x, buf, k):
  ml.copy(x.at[ml.ds(k * 128, 128)], buf)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32), grid=(1,))
def staged_through_helper(x, out):
  buf = ml.smem((128,), F32)
  acc = ml.zeros((128,), F32)
  for k in ml.range(x.shape[0] // 128, num_stages=2):
    _load_tile(x, buf, k)
    acc = acc + buf[...]
  out[...] = acc


def test_num_stages_on_a_loop_loading_through_a_helper_says_write_stages():
  """A helper called in the body may make the loop's TMA loads: there the hint stays `write stages=`."""
  x = np.random.default_rng(3).standard_normal(512).astype(np.float32)   # since probe 48g: it is stages=
  np.testing.assert_allclose(staged_through_helper(x, interpret=True), x.reshape(4, 128).sum(0), rtol=1e-5)
  staged_through_helper.check(S((512,), F32))


def test_misspelt_warp_specialize_is_not_called_num_stages():
  """`ml.range(n, ws=True)` was hinted "write warp_specialize= (Triton's num_stages is ml.range's stages)"."""
  @mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
  def k(x, out):
    buf = ml.smem((256,))
    for t in ml.range(4, ws=True):
      ml.copy(x, buf)
    out[...] = buf[...]
  with pytest.raises(mg.KernelTypeError) as e:
    k.check(S((256,), F32))
  assert e.value.hint.startswith("write warp_specialize=: ml.range(") and "num_stages" not in e.value.hint


# ---------------------------------------------------------------- Pallas's broadcasted_iota of a tile's shape
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def pallas_tril(x_ref, o_ref):
  x = x_ref[...]
  r = jax.lax.broadcasted_iota(jnp.int32, x.shape, 0)
  c = ml.arange(64)[None, :]
  o_ref[...] = ml.where(r >= c, x, 0.0)


def test_broadcasted_iota_of_a_shape_expression_is_hinted_with_its_sizes():
  """`lax.broadcasted_iota(jnp.int32, x.shape, 0)` (Pallas's causal mask) got the generic "ml.arange(n)
  ...": the hint now writes the call for the shape the expression had, which runs as jnp.tril."""
  # (since probe 46i the call computes as that form: pallas_tril runs as written, below)

  @mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
  def followed(x_ref, o_ref):
    x = x_ref[...]
    r = ml.broadcast_to(ml.arange(64)[:, None], x.shape)
    o_ref[...] = ml.where(r >= ml.arange(64)[None, :], x, 0.0)
  x = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
  np.testing.assert_array_equal(followed(x, interpret=True), np.tril(x))
  np.testing.assert_array_equal(pallas_tril(x, interpret=True), np.tril(x))


# ---------------------------------------------------------------- Pallas's pl.load(ref, idx, ...) and pl.store(ref, idx, v)
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def pallas_load_idx(x_ref, o_ref):
  i = ml.program_id(0)
  m = i * 128 + ml.arange(128) < x_ref.shape[0]
  v = ml.load(x_ref, (ml.ds(i * 128, 128),), mask=m, other=0.0)
  o_ref.at[ml.ds(i * 128, 128)].store(v * 2, mask=m)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 16,))
def pallas_store_idx(x_ref, o_ref):
  i = ml.program_id(0)
  v = x_ref.at[ml.ds(i * 16, 16), :][...]
  ml.store(o_ref, (ml.ds(i * 16, 16), slice(None)), v * 2)


def test_pallas_load_and_store_with_an_index_hint_the_window():
  """`ml.load(x_ref, (ml.ds(...),), mask=m, other=0.0)` (Pallas's pl.load(ref, idx, ...)) read "multiple
  values for argument 'mask'" with the signature as its hint; the index is now named as such and the
  hint writes the window, x_ref.at[idx], in the call's own words (and the kernels it gives run)."""
  with pytest.raises(mg.KernelTypeError) as e:
    pallas_load_idx.check(S((300,), F32))
  assert (e.value.lineno, e.value.col_offset) == _line(pallas_load_idx, "ml.load(")
  assert e.value.message.startswith("ml.load's second argument is the mask, got an index")
  assert e.value.hint == "index the ref first: ml.load(x_ref.at[ml.ds(i * 128, 128)], mask=m, other=0.0)"
  with pytest.raises(mg.KernelTypeError) as e:
    pallas_store_idx.check(S((64, 128), F32))
  assert (e.value.lineno, e.value.col_offset) == _line(pallas_store_idx, "ml.store(")
  assert e.value.message.startswith("ml.store's second argument is the value, got an index")
  assert e.value.hint == "index the ref first: ml.store(o_ref.at[ml.ds(i * 16, 16), :], v * 2)"

  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
  def followed(x_ref, o_ref):
    i = ml.program_id(0)
    m = i * 128 + ml.arange(128) < x_ref.shape[0]
    v = ml.load(x_ref.at[ml.ds(i * 128, 128)], mask=m, other=0.0)
    ml.store(o_ref.at[ml.ds(i * 128, 128)], v * 2, mask=m)
  x = np.random.default_rng(4).standard_normal(300).astype(np.float32)
  np.testing.assert_array_equal(followed(x, interpret=True), 2 * x)


# ---------------------------------------------------------------- Triton's 2-D pointer grid, row part first
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 16),))
def pointer_grid(x_ptr, o_ptr):
  rows = ml.program_id(0) * 16 + ml.arange(16)
  cols = ml.arange(128)
  m = (rows[:, None] < x_ptr.shape[0]) & (cols[None, :] < x_ptr.shape[1])
  v = ml.load(x_ptr + rows[:, None] * x_ptr.shape[1] + cols[None, :], mask=m, other=0.0)
  ml.store(o_ptr + rows[:, None] * x_ptr.shape[1] + cols[None, :], v + 1, mask=m)


def test_two_d_pointer_offsets_are_hinted_as_a_tile():
  """`x_ptr + rows[:, None] * stride + cols[None, :]` meets the ref with its (16, 1) row part first,
  which was hinted as 1-D offsets `start + ml.arange(n)`: it is the 2-D tile's hint now."""
  with pytest.raises(mg.KernelTypeError) as e:
    pointer_grid.check(S((40, 100), F32))
  assert (e.value.lineno, e.value.col_offset) == _line(pointer_grid, "x_ptr + rows")
  assert "a ref is not a pointer" in e.value.message
  # (since probe 40p in the user's own offsets, which index the ref as a 2-D grid of runs: a window)
  assert e.value.hint.startswith("index x_ptr by dimension with the offsets' vectors instead of adding them")
  assert "ml.load(x_ptr.at[rows[:, None], cols[None, :]], mask=m, other=0.0)" in e.value.hint


# ---------------------------------------------------------------- a float32 atomic max in a matmul's epilogue
@mg.mgpu_kernel(out_shape=lambda a, b: (S((a.shape[0], b.shape[1]), F32), S((a.shape[0],), F32)),
                grid=lambda a, b: (a.shape[0] // 64, b.shape[1] // 64))
def matmul_rowmax(a, b, c, rowmax):
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  ml.copy(a.at[ml.ds(i * 64, 64), :], a_s)
  ml.copy(b.at[:, ml.ds(j * 64, 64)], b_s)
  acc = ml.dot(a_s, b_s)
  c.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = acc
  ml.atomic_max(rowmax.at[ml.ds(i * 64, 64)], ml.max(acc, axis=1))


def test_float_atomic_max_hint_is_written_with_the_calls_window_and_value():
  """The MG106 hint for a float32 atomic max said `ml.atomic_max(ref, ...)` with `b = ml.bitcast(value, ...)`
  "into an int32 array": it now names the call's window, value and output, and the kernel it gives is right."""
  # (since probe 39c a float32 atomic max in GMEM works, so matmul_rowmax itself computes too)
  matmul_rowmax.check(S((128, 64), jnp.float16), S((64, 128), jnp.float16))

  @mg.mgpu_kernel(out_shape=lambda a, b: (S((a.shape[0], b.shape[1]), F32), S((a.shape[0],), jnp.int32)),
                  grid=lambda a, b: (a.shape[0] // 64, b.shape[1] // 64))
  def followed(a, b, c, rowmax):
    i, j = ml.program_id(0), ml.program_id(1)
    a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
    ml.copy(a.at[ml.ds(i * 64, 64), :], a_s)
    ml.copy(b.at[:, ml.ds(j * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s)
    c.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = acc
    b_ = ml.bitcast(ml.max(acc, axis=1), jnp.int32)
    ml.atomic_max(rowmax.at[ml.ds(i * 64, 64)], ml.where(b_ >= 0, b_, b_ ^ 0x7FFFFFFF))
  rng = np.random.default_rng(5)
  a = rng.standard_normal((128, 64)).astype(np.float16)
  b = rng.standard_normal((64, 128)).astype(np.float16)
  c, k = followed(a, b, interpret=True)
  got = jax.lax.bitcast_convert_type(jnp.where(k >= 0, k, k ^ 0x7FFFFFFF), jnp.float32)
  np.testing.assert_array_equal(got, np.asarray(c).max(axis=1))
  np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-3)
  c2, m2 = matmul_rowmax(a, b, interpret=True)
  np.testing.assert_array_equal(m2, np.asarray(c2).max(axis=1))


# ---------------------------------------------------------------- Triton's store at offsets, written out[offs] = v
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def store_at_offsets(x, o):
  pid = ml.program_id(0)
  offs = pid * 128 + ml.arange(128)
  v = ml.where(offs < x.shape[0], x[offs], 0.0)
  o[offs] = v * 2


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def store_at_offsets_view(x, o):
  pid = ml.program_id(0)
  offs = pid * 128 + ml.arange(128)
  v = ml.where(offs < x.shape[0], x[offs], 0.0)
  o.at[offs][...] = v * 2


def test_store_at_consecutive_offsets_is_a_scatter_and_the_window_store_works():
  """`o[offs] = v` with offs = pid * 128 + ml.arange(128) was MG003, hinted as an atomic add into a zeroed
  output, then (probe 38l) led with the masked window store. Since plain scatters (twenty-eighth session) it
  stores as written, the positions past the end dropped (since probe 42u as the run's window store, masked); the
  window store written out works too."""
  x = np.random.default_rng(6).standard_normal(300).astype(np.float32)
  np.testing.assert_array_equal(store_at_offsets(x, interpret=True), 2 * x)
  np.testing.assert_array_equal(store_at_offsets_view(x, interpret=True), 2 * x)

  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
  def followed(x, o):
    pid = ml.program_id(0)
    offs = pid * 128 + ml.arange(128)
    v = ml.where(offs < x.shape[0], x[offs], 0.0)
    o.at[ml.ds(pid * 128, 128)].store(v * 2, mask=offs < o.shape[0])
  np.testing.assert_array_equal(followed(x, interpret=True), 2 * x)
