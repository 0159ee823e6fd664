"""Probe 39f (ragged and data-dependent kernels written from the docs alone: MoE routing and grouped
matmuls over expert segments, cu_seqlens, paged KV caches, block-sparse matmuls, data-dependent while
loops, gathers, embedding bags, compaction, grids larger than the work)."""
import inspect

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
  (followed: correct). Since probe 56c the compiler moves the loads above the if itself (frontend/guarded_loads.py):
  the kernel as written computes (test_probe56c.py has the guarded loads that stay MG502)."""
  a, b, mask, want = _block_sparse_case()
  specs = (S(a.shape, a.dtype), S(b.shape, b.dtype), S(mask.shape, mask.dtype))
  np.testing.assert_allclose(block_sparse_guarded(a, b, mask, interpret=True), want, rtol=1e-2, atol=1e-2)
  block_sparse_guarded.check(*specs)
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


def test_every_int64_loop_bound_computes():
  """PyTorch's int64 cu_seqlens (with jax_enable_x64) as `range(s, e, 64)`: the error named only `s`, so
  following its hint met the same error at `e`. Since probe 47c the loop counts in int64, as lax.fori_loop's
  index takes its bounds' type, and since probe 47b the int64 index meeting ml.arange's int32 computes in
  int64, as jnp's promotion does; the int32 loop of the converted bounds runs too."""
  rng = np.random.default_rng(3)
  x = rng.standard_normal((300, 128)).astype(np.float32)
  with jax.enable_x64(True):
    cu = np.array([0, 70, 71, 200, 300], np.int64)
    got = [k(x, cu, interpret=True) for k in (segment_sums_int64, segment_sums_int64_followed)]
  for g in got:
    np.testing.assert_allclose(g, _segment_sums(x, cu), rtol=1e-5, atol=1e-4)


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
  with pytest.raises(mg.LayoutError) as e:
    bounds_unpacked.check(*specs)
  assert (e.value.lineno, e.value.col_offset) == _line(bounds_unpacked, "cu.at[ml.ds(b, 2)][...]")
  assert "has shape (2,): a 1-D register vector needs a multiple of 8 elements" in str(e.value)
  assert e.value.hint == ("read its elements as scalars, straight from memory (a scalar needs no register"
                          " vector): cu[b], cu[b + 1]")
  # (se[0], se[1] of the window had the same error until session 36: an element of a padded read computes)
  np.testing.assert_allclose(bounds_indexed(x, cu, interpret=True), _segment_sums(x, cu), rtol=1e-5, atol=1e-4)
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
