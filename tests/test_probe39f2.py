"""Probe 39f, second part (see test_probe39f.py): run-time lengths as sizes and tile counts, block tables read
past their width or padded with -1, page metadata too narrow for TMA."""
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
  bound; it was hinted ml.cdiv(n, 64) until probe 46a made it compute as that (an int, as Python's), and
  jnp.floor(n / 64) is hinted n // 64 (ml.cdiv followed: correct)."""
  x = np.random.default_rng(8).standard_normal((300, 128)).astype(np.float32)
  lens = np.array([70, 0, 130], np.int32)
  specs = (S(x.shape, F32), S(lens.shape, I32))
  np.testing.assert_allclose(tiles_by_math_ceil(x, lens, interpret=True),
                             np.stack([x[:n].sum(0) for n in lens]), rtol=1e-5, atol=1e-4)
  tiles_by_jnp_floor.check(*specs)         # (hinted n // 64 until probe 46i made jnp.floor of a value ml.floor's)
  np.testing.assert_allclose(tiles_by_jnp_floor(x, lens, interpret=True),
                             np.stack([x[:n // 64 * 64].sum(0) for n in lens]), rtol=1e-5, atol=1e-4)
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
  assert "a negative run-time index does not count from the end (only a static one does): to count from the end" in e.value.hint
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
