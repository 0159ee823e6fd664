"""Probe 39f (ragged and data-dependent kernels written from the docs alone: MoE routing and grouped
matmuls over expert segments, cu_seqlens, paged KV caches, block-sparse matmuls, data-dependent while
loops, gathers, embedding bags, compaction, grids larger than the work)."""
import inspect
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32


def _line(fn, text):
  """(line, column) of the first line of `fn` holding `text`."""
  lines, first = inspect.getsourcelines(fn)
  k = next(i for i, s in enumerate(lines) if text in s)
  return first + k, lines[k].index(text)


def _segment_sums(x, cu):
  return np.stack([x[cu[i]:cu[i + 1]].sum(0) for i in range(len(cu) - 1)])


# ---------------------------------------------------------------- a run-time window past the array's end
@mg.mgpu_kernel(out_shape=lambda x, cu: S((cu.shape[0] - 1, x.shape[1]), F32), grid=lambda x, cu: (cu.shape[0] - 1,))
def tile_sums(x, cu, out):
  b = ml.program_id(0)
  s = cu[b]
  e = cu[b + 1]
  acc = ml.zeros((x.shape[1],), F32)
  for t in range(s, e, 64):
    acc = acc + ml.sum(x.at[ml.ds(t, 64)][...], axis=0)
  out.at[b][...] = acc


@mg.mgpu_kernel(out_shape=lambda x, cu: S((cu.shape[0] - 1, x.shape[1]), F32), grid=lambda x, cu: (cu.shape[0] - 1,))
def tile_sums_followed(x, cu, out):
  b = ml.program_id(0)
  s = cu[b]
  e = cu[b + 1]
  acc = ml.zeros((x.shape[1],), F32)
  for t in range(s, e, 64):
    v = x.at[ml.ds(t, 64)].load(mask=(t + ml.arange(64))[:, None] < ml.minimum(e, x.shape[0]), other=0)
    acc = acc + ml.sum(v, axis=0)
  out.at[b][...] = acc


@mg.mgpu_kernel(out_shape=lambda x, off: S((x.shape[0] // 64, 64, x.shape[1]), x.dtype),
                grid=lambda x, off: (x.shape[0] // 64,))
def shifted_tiles(x, off, out):
  i = ml.program_id(0)
  out.at[i][...] = x[ml.ds(i * 64 - off[0], 64), :]


@mg.mgpu_kernel(out_shape=lambda x, off: S((x.shape[0] // 64, 64, x.shape[1]), x.dtype),
                grid=lambda x, off: (x.shape[0] // 64,))
def shifted_tiles_followed(x, off, out):
  i = ml.program_id(0)
  out.at[i][...] = x.at[ml.ds(i * 64 - off[0], 64), :].load(mask=(i * 64 - off[0] + ml.arange(64))[:, None] >= 0,
                                                              other=0)


@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=lambda x, n: (x.shape[0] // 64,))
def shifted_store(x, n, out):
  i = ml.program_id(0)
  s = i * 64 + n[0]
  out.at[ml.ds(s, 64)][...] = x.at[ml.ds(i * 64, 64)][...] * 2.0


def test_a_register_window_past_the_end_at_run_time_hints_the_mask():
  """A register read whose ml.ds start comes from data (a segment's tiles from cu_seqlens) and runs past
  the array's end was interpret mode's "check the dynamic indices (ml.ds starts, program ids) of this
  access"; it is now the mask, guard or clamp that the compile-time check gives a window the program ids
  prove outside, written with the user's own window (and followed, correct)."""
  rng = np.random.default_rng(0)
  x = rng.standard_normal((300, 128)).astype(np.float32)
  cu = np.array([0, 70, 71, 200, 300], np.int32)
  with pytest.raises(mg.OutOfBoundsError) as e:
    tile_sums(x, cu, interpret=True)
  assert (e.value.lineno, e.value.col_offset) == _line(tile_sums, "x.at[ml.ds(t, 64)][...]")
  assert "x[264:328, 0:128] is outside x's shape (300, 128)" in str(e.value)
  assert e.value.hint == ("mask it to the elements inside: x.at[ml.ds(t, 64)].load(mask=(t + ml.arange(64))[:, None]"
                          " < x.shape[0], other=0); or guard the access (if t + 64 <= 300:) or clamp its start"
                          " (ml.minimum(t, 236))")
  np.testing.assert_allclose(tile_sums_followed(x, cu, interpret=True), _segment_sums(x, cu), rtol=1e-5, atol=1e-4)

  xs = x[:256]
  with pytest.raises(mg.OutOfBoundsError) as e:
    shifted_tiles(xs, np.array([10], np.int32), interpret=True)
  assert (e.value.lineno, e.value.col_offset) == _line(shifted_tiles, "x[ml.ds(")
  assert e.value.hint.startswith("mask it to the elements inside: x.at[ml.ds(i * 64 - off[0], 64), :].load(mask=("
                                 "i * 64 - off[0] + ml.arange(64))[:, None] >= 0, other=0)"), e.value.hint
  got = shifted_tiles_followed(xs, np.array([10], np.int32), interpret=True)
  want = np.concatenate([np.zeros((10, 128), np.float32), xs[:-10]]).reshape(4, 64, 128)
  np.testing.assert_array_equal(got, want)

  with pytest.raises(mg.OutOfBoundsError) as e:
    shifted_store(xs, np.array([8], np.int32), interpret=True)
  assert (e.value.lineno, e.value.col_offset) == _line(shifted_store, "out.at[ml.ds(s, 64)]")
  assert e.value.hint.startswith("mask it to the elements inside: out.at[ml.ds(s, 64)].store(x.at[ml.ds(i * 64, 64)]"
                                 "[...] * 2.0, mask=(s + ml.arange(64))[:, None] < out.shape[0])"), e.value.hint


# ---------------------------------------------------------------- ml.arange of a run-time length
@mg.mgpu_kernel(out_shape=lambda x, cu: S((cu.shape[0] - 1, x.shape[1]), F32), grid=lambda x, cu: (cu.shape[0] - 1,))
def segment_rows(x, cu, out):
  b = ml.program_id(0)
  s = cu[b]
  e = cu[b + 1]
  r = ml.arange(e - s)
  out.at[b][...] = ml.sum(x[s + r, :], axis=0)


@mg.mgpu_kernel(out_shape=lambda x, cu: S((cu.shape[0] - 1, x.shape[1]), F32), grid=lambda x, cu: (cu.shape[0] - 1,))
def segment_rows_followed(x, cu, out):
  b = ml.program_id(0)
  s = cu[b]
  e = cu[b + 1]
  r = ml.arange(128)
  keep = r < (e - s)
  out.at[b][...] = ml.sum(x.at[ml.ds(s, 128), :].load(mask=keep[:, None], other=0), axis=0)


def test_arange_of_a_run_time_length_hints_a_static_block_and_its_mask():
  """`ml.arange(e - s)` of a segment's length was hinted "sizes are fixed when the kernel is compiled:
  ml.arange(128)", which drops the length; the hint now keeps it as the mask over a static block."""
  rng = np.random.default_rng(1)
  x = rng.standard_normal((200, 128)).astype(np.float32)
  cu = np.array([0, 70, 71, 128, 200], np.int32)
  with pytest.raises(mg.KernelTypeError) as e:
    segment_rows.check(S(x.shape, F32), S(cu.shape, I32))
  assert (e.value.lineno, e.value.col_offset) == _line(segment_rows, "ml.arange(e - s)")
  assert e.value.code == "MG003" and "ml.arange needs a positive static int, got a scalar" in str(e.value)
  assert e.value.hint.startswith("a run-time length sizes no tensor (sizes are fixed when the kernel is compiled):"
                                 " take a static block and mask the positions past the length, r = ml.arange(128),"
                                 " keep = r < (e - s), then load and store under mask=keep"), e.value.hint
  np.testing.assert_allclose(segment_rows_followed(x, cu, interpret=True), _segment_sums(x, cu), rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------- a block-sparse matmul's loads under an if
@mg.mgpu_kernel(out_shape=lambda a, b, m: S((a.shape[0], b.shape[1]), F32),
                grid=lambda a, b, m: (a.shape[0] // 64, b.shape[1] // 64))
def block_sparse_guarded(a, b, m, out):
  i = ml.program_id(0)
  j = ml.program_id(1)
  a_s = ml.smem((64, 64))
  b_s = ml.smem((64, 64))
  acc = ml.zeros((64, 64), F32)
  for k in ml.range(a.shape[1] // 64, stages=2):
    if m[i, k] != 0:
      ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
      ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 64, 64)], b_s)
      acc = ml.dot(a_s, b_s, acc)
  out.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b, m: S((a.shape[0], b.shape[1]), F32),
                grid=lambda a, b, m: (a.shape[0] // 64, b.shape[1] // 64))
def block_sparse_followed(a, b, m, out):
  i = ml.program_id(0)
  j = ml.program_id(1)
  a_s = ml.smem((64, 64))
  b_s = ml.smem((64, 64))
  acc = ml.zeros((64, 64), F32)
  for k in ml.range(a.shape[1] // 64, stages=2):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 64, 64)], b_s)
    if m[i, k] != 0:
      acc = ml.dot(a_s, b_s, acc)
  out.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = acc


def _block_sparse_case():
  rng = np.random.default_rng(2)
  mask = np.array([[1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1], [0, 0, 0, 1]], np.int32)
  a = (rng.standard_normal((4, 64, 4, 64)) * mask[:, None, :, None]).reshape(256, 256).astype(np.float16)
  b = rng.standard_normal((256, 128)).astype(np.float16)
  return a, b, mask, a.astype(np.float32) @ b.astype(np.float32)


def test_pipelined_loads_under_a_run_time_if_are_reported_at_the_load():
  """A block-sparse matmul whose copies sit under `if m[i, k] != 0:` in a pipelined loop was told that the
  loop had "no TMA load to pipeline" and to drop stages=; the error is now at the guarded load, says why
  (the pipeline issues a trip's loads before its if), and hints loading on every trip with the dot guarded
  (followed: correct)."""
  a, b, mask, want = _block_sparse_case()
  specs = (S(a.shape, a.dtype), S(b.shape, b.dtype), S(mask.shape, mask.dtype))
  with pytest.raises(mg.PipelineError) as e:
    block_sparse_guarded.check(*specs)
  assert (e.value.lineno, e.value.col_offset) == _line(block_sparse_guarded, "ml.copy(a.at")
  assert e.value.code == "MG502"
  assert "this pipelined loop's TMA loads run under a run-time if" in str(e.value)
  assert any(n.startswith(f"{__file__}:{_line(block_sparse_guarded, 'if m[i, k]')[0]}:") for n in e.value.notes)
  assert e.value.hint.startswith("load on every trip, at the top of the body, and guard only what uses the tiles")
  assert "for k in ml.range(a.shape[1] // 64):" in e.value.hint
  np.testing.assert_allclose(block_sparse_followed(a, b, mask, interpret=True), want, rtol=1e-2, atol=1e-2)
  block_sparse_followed.check(*specs)


@pytest.mark.gpu
def test_gpu_block_sparse_loads_every_trip_dot_guarded():
  a, b, mask, want = _block_sparse_case()
  np.testing.assert_allclose(jax.jit(block_sparse_followed)(a, b, mask), want, rtol=1e-2, atol=1e-2)


# ---------------------------------------------------------------- int64 cu_seqlens as both loop bounds
@mg.mgpu_kernel(out_shape=lambda x, cu: S((cu.shape[0] - 1, x.shape[1]), F32), grid=lambda x, cu: (cu.shape[0] - 1,))
def segment_sums_int64(x, cu, out):
  b = ml.program_id(0)
  s = cu[b]
  e = cu[b + 1]
  acc = ml.zeros((x.shape[1],), F32)
  for t in range(s, e, 64):
    v = x.at[ml.ds(t, 64)].load(mask=(t + ml.arange(64) < e)[:, None], other=0.0)
    acc = acc + ml.sum(v, axis=0)
  out.at[b][...] = acc


@mg.mgpu_kernel(out_shape=lambda x, cu: S((cu.shape[0] - 1, x.shape[1]), F32), grid=lambda x, cu: (cu.shape[0] - 1,))
def segment_sums_int64_followed(x, cu, out):
  b = ml.program_id(0)
  s = cu[b]
  e = cu[b + 1]
  acc = ml.zeros((x.shape[1],), F32)
  for t in range(s.astype(jnp.int32), e.astype(jnp.int32), 64):
    v = x.at[ml.ds(t, 64)].load(mask=(t + ml.arange(64) < e.astype(jnp.int32))[:, None], other=0.0)
    acc = acc + ml.sum(v, axis=0)
  out.at[b][...] = acc


def test_every_int64_loop_bound_is_named_with_its_conversion():
  """PyTorch's int64 cu_seqlens (with jax_enable_x64) as `range(s, e, 64)`: the error named only `s`, so
  following its hint met the same error at `e`; it names every bound to convert."""
  rng = np.random.default_rng(3)
  x = rng.standard_normal((300, 128)).astype(np.float32)
  with jax.enable_x64(True):
    cu = np.array([0, 70, 71, 200, 300], np.int64)
    with pytest.raises(mg.KernelTypeError) as e:
      segment_sums_int64.check(S(x.shape, F32), S(cu.shape, jnp.int64))
    assert (e.value.lineno, e.value.col_offset) == _line(segment_sums_int64, "range(s, e, 64)")
    assert "runtime loop bounds must be 32-bit integers, got s (int64), e (int64)" in str(e.value)
    assert e.value.hint == "convert them: s.astype(jnp.int32), e.astype(jnp.int32)"
    got = segment_sums_int64_followed(x, cu, interpret=True)
  np.testing.assert_allclose(got, _segment_sums(x, cu), rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------- a grid larger than the work, program id clamped
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(6,))
def clamped_tiles(x, out):
  i = ml.minimum(ml.program_id(0), x.shape[0] // 128 - 1)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * 2.0


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(6,))
def clamped_tiles_followed(x, out):
  if ml.program_id(0) > x.shape[0] // 128 - 1:
    return
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * 2.0


@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=(6,))
def clamped_tiles_data(x, n, out):
  pid = ml.program_id(0)
  i = ml.minimum(pid, n[0] - 1)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * 2.0


@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=(6,))
def clamped_tiles_data_followed(x, n, out):
  pid = ml.program_id(0)
  if pid > n[0] - 1:
    return
  out.at[ml.ds(pid * 128, 128)][...] = x.at[ml.ds(pid * 128, 128)][...] * 2.0


def test_a_clamped_program_id_racing_on_the_last_tile_hints_returning_early():
  """Triton's `pid = tl.minimum(pid, n_tiles - 1)` for a grid larger than the work makes the extra programs
  write the last tile again: a race, whose hint was windows of 86 rows for 6 programs (changing the tiling);
  it now names the clamp and ends the extra programs (followed: correct), while compiling and, where the
  bound is data, in interpret mode."""
  x = np.random.default_rng(4).standard_normal((512, 128)).astype(np.float32)
  with pytest.raises(mg.RaceError) as e:
    clamped_tiles.check(S(x.shape, F32))
  assert (e.value.lineno, e.value.col_offset) == _line(clamped_tiles, "out.at[ml.ds(i * 128, 128)]")
  assert "program (3, 0, 0) and program (4, 0, 0) both write out[384, 0]" in str(e.value)
  assert e.value.hint.startswith("ml.program_id(0) is clamped with ml.minimum, so every program past"
                                 " x.shape[0] // 128 - 1 works on tile x.shape[0] // 128 - 1 again and writes it a"
                                 " second time: let them do nothing instead, if ml.program_id(0) > x.shape[0] //"
                                 " 128 - 1: return"), e.value.hint
  np.testing.assert_array_equal(clamped_tiles_followed(x, interpret=True), x * 2)

  n = np.array([4], np.int32)
  with pytest.raises(mg.RaceError) as e:
    clamped_tiles_data(x, n, interpret=True)
  assert (e.value.lineno, e.value.col_offset) == _line(clamped_tiles_data, "out.at[ml.ds(i * 128, 128)]")
  assert e.value.hint.startswith("pid is clamped with ml.minimum, so every program past n[0] - 1 works on tile"
                                 " n[0] - 1 again and writes it a second time: let them do nothing instead, if pid >"
                                 " n[0] - 1: return"), e.value.hint
  np.testing.assert_array_equal(clamped_tiles_data_followed(x, n, interpret=True), x * 2)


# ---------------------------------------------------------------- a segment's bounds read as a 2-element window
@mg.mgpu_kernel(out_shape=lambda x, cu: S((cu.shape[0] - 1, x.shape[1]), F32), grid=lambda x, cu: (cu.shape[0] - 1,))
def bounds_unpacked(x, cu, out):
  b = ml.program_id(0)
  s, e = cu.at[ml.ds(b, 2)][...]
  acc = ml.zeros((x.shape[1],), F32)
  for r in range(s, e):
    acc += x.at[r][...]
  out.at[b][...] = acc


@mg.mgpu_kernel(out_shape=lambda x, cu: S((cu.shape[0] - 1, x.shape[1]), F32), grid=lambda x, cu: (cu.shape[0] - 1,))
def bounds_indexed(x, cu, out):
  b = ml.program_id(0)
  se = cu.at[ml.ds(b, 2)][...]
  acc = ml.zeros((x.shape[1],), F32)
  for r in range(se[0], se[1]):
    acc += x.at[r][...]
  out.at[b][...] = acc


@mg.mgpu_kernel(out_shape=lambda x, cu: S((cu.shape[0] - 1, x.shape[1]), F32), grid=lambda x, cu: (cu.shape[0] - 1,))
def bounds_followed(x, cu, out):
  b = ml.program_id(0)
  s, e = cu[b], cu[b + 1]
  acc = ml.zeros((x.shape[1],), F32)
  for r in range(s, e):
    acc += x.at[r][...]
  out.at[b][...] = acc


def test_a_short_window_used_by_its_elements_hints_scalar_reads():
  """`s, e = cu.at[ml.ds(b, 2)][...]` (or `se[0]`, `se[1]` of it) was hinted to pad the window to 8 masked
  elements, after which the unpacking counts 8; the hint now reads the elements as scalars (followed:
  correct). A short vector used as a vector keeps the padding hint."""
  rng = np.random.default_rng(5)
  x = rng.standard_normal((200, 128)).astype(np.float32)
  cu = np.array([0, 70, 71, 128, 200], np.int32)
  specs = (S(x.shape, F32), S(cu.shape, I32))
  for kernel, text in ((bounds_unpacked, "cu.at[ml.ds(b, 2)][...]"), (bounds_indexed, "cu.at[ml.ds(b, 2)][...]")):
    with pytest.raises(mg.LayoutError) as e:
      kernel.check(*specs)
    assert (e.value.lineno, e.value.col_offset) == _line(kernel, text)
    assert "has shape (2,): a 1-D register vector needs a multiple of 8 elements" in str(e.value)
    assert e.value.hint == ("read its elements as scalars, straight from memory (a scalar needs no register"
                            " vector): cu[b], cu[b + 1]")
  np.testing.assert_allclose(bounds_followed(x, cu, interpret=True), _segment_sums(x, cu), rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------- a mask of data on past the array's end
@mg.mgpu_kernel(out_shape=lambda x, cu: S((cu.shape[0] - 1, x.shape[1]), F32), grid=lambda x, cu: (cu.shape[0] - 1,))
def masked_by_segment(x, cu, out):
  b = ml.program_id(0)
  start = cu[b]
  end = cu[b + 1]
  acc = ml.zeros((x.shape[1],), F32)
  for t in range(start, end, 64):
    r = t + ml.arange(64)
    v = x.at[ml.ds(t, 64), :].load(mask=(r < end)[:, None], other=0.0)
    acc = acc + ml.sum(v, axis=0)
  out.at[b][...] = acc


@mg.mgpu_kernel(out_shape=lambda x, cu: S((cu.shape[0] - 1, x.shape[1]), F32), grid=lambda x, cu: (cu.shape[0] - 1,))
def masked_by_segment_followed(x, cu, out):
  b = ml.program_id(0)
  start = cu[b]
  end = cu[b + 1]
  acc = ml.zeros((x.shape[1],), F32)
  for t in range(start, end, 64):
    r = t + ml.arange(64)
    v = x.at[ml.ds(t, 64), :].load(mask=((r < end)[:, None]) & ((t + ml.arange(64))[:, None] < x.shape[0]), other=0.0)
    acc = acc + ml.sum(v, axis=0)
  out.at[b][...] = acc


@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=lambda x, s: (x.shape[0] // 64,))
def masked_store_by_data(x, s, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  ml.store(out.at[ml.ds(i * 64 + s[0], 64)], v, mask=ml.arange(64) < s[1])


def test_a_mask_of_data_on_outside_the_array_hints_the_extent_mask_with_the_users_mask():
  """A segment's end read from memory past the array's end (cu_seqlens whose last entry is too large) turns a
  masked load's mask on outside the array: interpret mode said "turn the mask off for elements outside the
  array"; it now writes the user's mask and'ed with the window's extent (followed: correct), for
  ml.load/ml.store forms too, and before the start (>= 0)."""
  rng = np.random.default_rng(6)
  x = rng.standard_normal((300, 128)).astype(np.float32)
  cu = np.array([0, 70, 71, 200, 310], np.int32)
  with pytest.raises(mg.OutOfBoundsError) as e:
    masked_by_segment(x, cu, interpret=True)
  assert (e.value.lineno, e.value.col_offset) == _line(masked_by_segment, "x.at[ml.ds(t, 64), :].load(")
  assert "a masked load touches x[300, 0], outside x's shape (300, 128): the mask is on there" in str(e.value)
  assert e.value.hint.startswith("keep the mask off outside x too: mask=((r < end)[:, None]) & ((t + ml.arange(64))"
                                 "[:, None] < x.shape[0])"), e.value.hint
  want = np.stack([x[cu[i]:cu[i + 1]].sum(0) for i in range(4)])
  np.testing.assert_allclose(masked_by_segment_followed(x, cu, interpret=True), want, rtol=1e-5, atol=1e-4)

  xs = x[:, 0].copy()
  with pytest.raises(mg.OutOfBoundsError) as e:
    masked_store_by_data(xs, np.array([-3, 64], np.int32), interpret=True)
  assert (e.value.lineno, e.value.col_offset) == _line(masked_store_by_data, "ml.store(out.at")
  assert e.value.hint.startswith("keep the mask off outside out too: mask=(ml.arange(64) < s[1]) & (i * 64 + s[0] +"
                                 " ml.arange(64) >= 0)"), e.value.hint


# ---------------------------------------------------------------- a segment's length as a size or a float count
@mg.mgpu_kernel(out_shape=lambda x, lens: S((lens.shape[0], x.shape[1]), F32), grid=lambda x, lens: (lens.shape[0],))
def tiles_by_true_division(x, lens, out):
  b = ml.program_id(0)
  n = lens[b]
  acc = ml.zeros((x.shape[1],), F32)
  for t in range(n / 64):
    acc += ml.sum(x.at[ml.ds(t * 64, 64)].load(mask=(t * 64 + ml.arange(64) < n)[:, None], other=0.0), axis=0)
  out.at[b][...] = acc


@mg.mgpu_kernel(out_shape=lambda x, lens: S((lens.shape[0], x.shape[1]), F32), grid=lambda x, lens: (lens.shape[0],))
def tiles_by_true_division_followed(x, lens, out):
  b = ml.program_id(0)
  n = lens[b]
  acc = ml.zeros((x.shape[1],), F32)
  for t in range(ml.cdiv(n, 64)):
    acc += ml.sum(x.at[ml.ds(t * 64, 64)].load(mask=(t * 64 + ml.arange(64) < n)[:, None], other=0.0), axis=0)
  out.at[b][...] = acc


@mg.mgpu_kernel(out_shape=lambda x, cu: S((cu.shape[0] - 1, x.shape[1]), F32), grid=lambda x, cu: (cu.shape[0] - 1,))
def segment_buffer(x, cu, out):
  b = ml.program_id(0)
  s = cu[b]
  e = cu[b + 1]
  buf = ml.smem((e - s, x.shape[1]))
  ml.copy(x.at[ml.ds(s, 128)], buf)
  out.at[b][...] = ml.sum(buf[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda x, cu: S((cu.shape[0] - 1, x.shape[1]), F32), grid=lambda x, cu: (cu.shape[0] - 1,))
def segment_buffer_followed(x, cu, out):
  b = ml.program_id(0)
  s = cu[b]
  e = cu[b + 1]
  buf = ml.smem((128, 128))
  ml.copy(x.at[ml.ds(s, 128)], buf)
  out.at[b][...] = ml.sum(buf.load(mask=ml.arange(128)[:, None] < (e - s), other=0.0), axis=0)


def test_a_segment_length_as_a_float_count_or_a_size_hints_the_covering_tiles_and_a_masked_block():
  """`range(n / 64)` of a run-time n was hinted `.astype(jnp.int32)`, which drops the partial last tile (a
  segment's tail, silently); the hint now writes ml.cdiv first. `ml.smem((e - s, d))` of a segment's length
  was hinted "use constexpr parameters for sizes"; it is a static block masked to the length (both followed:
  correct)."""
  rng = np.random.default_rng(7)
  x = rng.standard_normal((300, 128)).astype(np.float32)
  lens = np.array([70, 0, 130], np.int32)
  with pytest.raises(mg.KernelTypeError) as e:
    tiles_by_true_division.check(S(x.shape, F32), S(lens.shape, I32))
  assert (e.value.lineno, e.value.col_offset) == _line(tiles_by_true_division, "range(n / 64)")
  assert "a loop bound must be an integer scalar, got n / 64 (float32)" in str(e.value)
  assert e.value.hint.startswith("a count is an int: range(ml.cdiv(n, 64)) for the tiles that cover it, the last"
                                 " one partial (masked), or range(n // 64) for the whole tiles only"), e.value.hint
  np.testing.assert_allclose(tiles_by_true_division_followed(x, lens, interpret=True),
                             np.stack([x[:n].sum(0) for n in lens]), rtol=1e-5, atol=1e-4)

  cu = np.array([0, 70, 71, 128, 200], np.int32)
  with pytest.raises(mg.KernelTypeError) as e:
    segment_buffer.check(S(x.shape, F32), S(cu.shape, I32))
  assert (e.value.lineno, e.value.col_offset) == _line(segment_buffer, "ml.smem((e - s")
  assert "ml.smem needs a static shape" in str(e.value)
  assert e.value.hint.startswith("a run-time size sizes no tensor or buffer (shapes are fixed when the kernel is"
                                 " compiled): take a static block, ml.smem((128, 128), ...), and mask the positions"
                                 " past the length, ml.arange(128)[:, None] < (e - s)"), e.value.hint
  np.testing.assert_allclose(segment_buffer_followed(x, cu, interpret=True), _segment_sums(x, cu), rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------- math.ceil(n / 64) of a run-time length
@mg.mgpu_kernel(out_shape=lambda x, lens: S((lens.shape[0], x.shape[1]), F32), grid=lambda x, lens: (lens.shape[0],))
def tiles_by_math_ceil(x, lens, out):
  b = ml.program_id(0)
  n = lens[b]
  acc = ml.zeros((x.shape[1],), F32)
  for c in range(math.ceil(n / 64)):
    acc += ml.sum(x.at[ml.ds(c * 64, 64)].load(mask=(c * 64 + ml.arange(64) < n)[:, None], other=0.0), axis=0)
  out.at[b][...] = acc


@mg.mgpu_kernel(out_shape=lambda x, lens: S((lens.shape[0], x.shape[1]), F32), grid=lambda x, lens: (lens.shape[0],))
def tiles_by_jnp_floor(x, lens, out):
  b = ml.program_id(0)
  n = lens[b]
  acc = ml.zeros((x.shape[1],), F32)
  for c in range(jnp.floor(n / 64).astype(jnp.int32)):
    acc += ml.sum(x.at[ml.ds(c * 64, 64)][...], axis=0)
  out.at[b][...] = acc


def test_ceil_of_a_run_time_quotient_hints_ml_cdiv():
  """`range(math.ceil(n / 64))` (Python's tile count) was hinted `ml.ceil`, whose float result is then no loop
  bound; it is hinted ml.cdiv(n, 64), and floor(n / 64) as n // 64 (ml.cdiv followed: correct)."""
  x = np.random.default_rng(8).standard_normal((300, 128)).astype(np.float32)
  lens = np.array([70, 0, 130], np.int32)
  specs = (S(x.shape, F32), S(lens.shape, I32))
  with pytest.raises(mg.KernelTypeError) as e:
    tiles_by_math_ceil.check(*specs)
  assert (e.value.lineno, e.value.col_offset) == _line(tiles_by_math_ceil, "math.ceil(n / 64)")
  assert "ceil cannot take a scalar inside a kernel" in str(e.value)
  assert e.value.hint.startswith("of integers, ceil(n / 64) is ml.cdiv(n, 64) (the tiles of 64 that cover n"), e.value.hint
  with pytest.raises(mg.KernelTypeError) as e:
    tiles_by_jnp_floor.check(*specs)
  assert (e.value.lineno, e.value.col_offset) == _line(tiles_by_jnp_floor, "jnp.floor(n / 64)")
  assert e.value.hint.startswith("of integers, floor(n / 64) is n // 64,"), e.value.hint
  np.testing.assert_allclose(tiles_by_true_division_followed(x, lens, interpret=True),
                             np.stack([x[:n].sum(0) for n in lens]), rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------- a block table read past its width at run time
@mg.mgpu_kernel(out_shape=lambda pages, table, lens: S((table.shape[0], pages.shape[2]), F32),
                grid=lambda pages, table, lens: (table.shape[0],))
def paged_sums(pages, table, lens, out):
  b = ml.program_id(0)
  acc = ml.zeros((pages.shape[2],), F32)
  for i in range(ml.cdiv(lens[b], pages.shape[1])):
    acc = acc + ml.sum(pages.at[table[b, i]][...], axis=0)
  out.at[b][...] = acc


@mg.mgpu_kernel(out_shape=lambda pages, table, lens: S((table.shape[0], pages.shape[2]), F32),
                grid=lambda pages, table, lens: (table.shape[0],))
def paged_sums_followed(pages, table, lens, out):
  b = ml.program_id(0)
  acc = ml.zeros((pages.shape[2],), F32)
  for i in range(ml.cdiv(lens[b], pages.shape[1])):
    if i < table.shape[1]:
      acc = acc + ml.sum(pages.at[table[b, i]][...], axis=0)
  out.at[b][...] = acc


def test_a_scalar_read_past_its_array_at_run_time_hints_the_guard_or_clamp():
  """A sequence length longer than its block table's width (`table[b, i]` with i from ml.cdiv(lens[b], P))
  was interpret mode's "check the dynamic indices"; it is the guard or clamp the compile-time MG203 gives a
  scalar read, in the user's words (the guard followed: correct)."""
  rng = np.random.default_rng(9)
  pages = rng.standard_normal((8, 16, 128)).astype(np.float32)
  table = np.array([[0, 1, 2, 3], [4, 5, 6, 7]], np.int32)
  lens = np.array([70, 16], np.int32)
  with pytest.raises(mg.OutOfBoundsError) as e:
    paged_sums(pages, table, lens, interpret=True)
  assert (e.value.lineno, e.value.col_offset) == _line(paged_sums, "table[b, i]")
  assert "table[0, 4] is outside table's shape (2, 4)" in str(e.value)
  assert e.value.hint == ("guard the read (if i < table.shape[1]:) or clamp its index, table[b, ml.minimum(i,"
                          " table.shape[1] - 1)] (ml.where(i < table.shape[1], ..., 0) to read 0 there), or pass a"
                          " longer table")
  want = np.stack([pages[table[0]].sum((0, 1)), pages[table[1, 0]].sum(0)])
  np.testing.assert_allclose(paged_sums_followed(pages, table, lens, interpret=True), want, rtol=1e-5, atol=1e-4)


@mg.mgpu_kernel(out_shape=lambda pages, table: S((table.shape[0], pages.shape[2]), F32),
                grid=lambda pages, table: (table.shape[0],))
def padded_table_sums(pages, table, out):
  b = ml.program_id(0)
  acc = ml.zeros((pages.shape[2],), F32)
  for i in range(table.shape[1]):
    acc = acc + ml.sum(pages.at[table[b, i]][...], axis=0)
  out.at[b][...] = acc


@mg.mgpu_kernel(out_shape=lambda pages, table: S((table.shape[0], pages.shape[2]), F32),
                grid=lambda pages, table: (table.shape[0],))
def padded_table_sums_followed(pages, table, out):
  b = ml.program_id(0)
  acc = ml.zeros((pages.shape[2],), F32)
  for i in range(table.shape[1]):
    if table[b, i] >= 0:
      acc = acc + ml.sum(pages.at[table[b, i]][...], axis=0)
  out.at[b][...] = acc


def test_a_page_id_from_data_outside_the_pages_hints_the_guard():
  """A block table padded with -1 read as `pages.at[table[b, i]][...]` was "check the dynamic indices", plus
  wrapping the index from the end (the wrong page for a padding entry); it is the guard (or clamp) of the
  index in the user's words, with the note that a run-time -1 does not count from the end (guard followed)."""
  rng = np.random.default_rng(10)
  pages = rng.standard_normal((8, 16, 128)).astype(np.float32)
  table = np.array([[0, 1, 2, -1], [4, 5, -1, -1]], np.int32)
  with pytest.raises(mg.OutOfBoundsError) as e:
    padded_table_sums(pages, table, interpret=True)
  assert (e.value.lineno, e.value.col_offset) == _line(padded_table_sums, "pages.at[table[b, i]][...]")
  assert "pages[-1, 0:16, 0:128] is outside pages's shape (8, 16, 128)" in str(e.value)
  assert e.value.hint.startswith("guard the read (if table[b, i] >= 0:) or clamp its index, pages[ml.maximum("
                                 "table[b, i], 0)]"), e.value.hint
  assert e.value.hint.endswith("a negative run-time index does not count from the end (only a static one does)")
  want = np.stack([sum(pages[g].sum(0) for g in row if g >= 0) for row in table])
  np.testing.assert_allclose(padded_table_sums_followed(pages, table, interpret=True), want, rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------- page metadata too narrow for TMA
@mg.mgpu_kernel(out_shape=lambda pages, table, lens: S((table.shape[0], pages.shape[1], pages.shape[2]), F32),
                grid=lambda pages, table, lens: (table.shape[0],))
def staged_metadata(pages, table, lens, out):
  b = ml.program_id(0)
  l_s = ml.smem((lens.shape[0],), I32)
  t_s = ml.smem((table.shape[1],), I32)
  ml.copy(lens, l_s)
  ml.copy(table.at[b], t_s)
  buf = ml.smem((pages.shape[1], pages.shape[2]))
  acc = ml.zeros((pages.shape[1], pages.shape[2]), F32)
  for i in ml.range(l_s[b], stages=2):
    ml.copy(pages.at[t_s[i]], buf)
    acc = acc + buf[...]
  out.at[b][...] = acc


@mg.mgpu_kernel(out_shape=lambda pages, table, lens: S((table.shape[0], pages.shape[1], pages.shape[2]), F32),
                grid=lambda pages, table, lens: (table.shape[0],))
def staged_metadata_followed(pages, table, lens, out):
  b = ml.program_id(0)
  buf = ml.smem((pages.shape[1], pages.shape[2]))
  acc = ml.zeros((pages.shape[1], pages.shape[2]), F32)
  for i in ml.range(lens[b], stages=2):
    ml.copy(pages.at[table[b, i]], buf)
    acc = acc + buf[...]
  out.at[b][...] = acc


def test_metadata_too_narrow_for_tma_hints_scalar_reads_of_the_input():
  """Two sequence lengths (8 bytes) staged into SMEM by ml.copy for scalar reads were hinted "read it into
  registers instead (lens[...])", a 2-element vector no register layout holds; the hint adds the scalar reads
  of the input itself, which a pipelined loop's loads may use (followed: correct)."""
  rng = np.random.default_rng(11)
  pages = rng.standard_normal((8, 64, 128)).astype(np.float32)
  table = np.array([[1, 2, 3, 0], [5, 6, 0, 0]], np.int32)
  lens = np.array([3, 2], np.int32)
  with pytest.raises(mg.TmaLimitError) as e:
    staged_metadata.check(S(pages.shape, F32), S(table.shape, I32), S(lens.shape, I32))
  assert (e.value.lineno, e.value.col_offset) == _line(staged_metadata, "ml.copy(lens, l_s)")
  assert e.value.hint.endswith("or, where its elements are read one at a time (lengths, page ids), read them"
                               " straight from lens as scalars, lens[i], which a pipelined loop's loads may use too")
  want = np.stack([pages[table[b, :lens[b]]].sum(0) for b in range(2)])
  np.testing.assert_allclose(staged_metadata_followed(pages, table, lens, interpret=True), want, rtol=1e-5, atol=1e-4)


@pytest.mark.gpu
def test_gpu_pipelined_pages_from_scalar_reads():
  rng = np.random.default_rng(12)
  pages = rng.standard_normal((8, 64, 128)).astype(np.float32)
  table = np.array([[1, 2, 3, 0], [5, 6, 0, 0]], np.int32)
  lens = np.array([3, 2], np.int32)
  want = np.stack([pages[table[b, :lens[b]]].sum(0) for b in range(2)])
  np.testing.assert_allclose(jax.jit(staged_metadata_followed)(pages, table, lens), want, rtol=1e-5, atol=1e-4)
