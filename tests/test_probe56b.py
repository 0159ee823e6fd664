"""Probe 56b (atomics and scatters: histograms, bincounts, scatter max/min/mean, segment sums, counting and radix
sorts' passes, spin locks and tickets, in the 8- to 32-bit integer and float dtypes). What was wrong or refused:

- every atomic of an int8, uint8, int16 or uint16 array (add, max, min, and, or, xor, xchg, cas; a single element,
  a window, a scatter, their old values; in GMEM and in SMEM) was MG106: PTX has no `atom` or `red` of them. Each
  element's update is now a loop of `atom.cas.b32` on the aligned 32-bit word that holds it, the other bytes kept
  as found (lowering/atomic_narrow.py), in the element's own arithmetic (an add wraps, as jnp's `.at[].add`);
  interpret mode's numbers were already jnp's. The diagnostics that list an atomic's dtypes name them once;
- a float16 or bfloat16 max or min one element at a time (a scatter, `jax.ops.segment_max`'s atomics, an SMEM
  scatter, a row statistic of 8 elements the threads hold singly) was MG106 or MG204 (Hopper's `red` of them takes
  pairs): each element is now a loop of `atom.cas.b16` (GMEM; probe 53c's `_half_cas_loop`) or of
  `atom.shared.cas.b32` on its word (SMEM), np.fmax's numbers as interpret mode's;
- a plain store of an output beside an atomic scatter into it at indices of data (`if i == 0: o[...] = 0` before
  every program's `ml.atomic_add(o.at[ids], 1)`) built for the GPU with no error (only interpret mode saw it):
  where one program's plain stores cover all that another program's data scatter may reach, it is MG951 at the
  store (frontend/scatter_races.py); a header element beside the bins, and each program's own row, still compile;
- a sort of int64 keys (jax_enable_x64: two passes of 32-bit words) of a padded row was not followed by interpret
  mode's MG953, so `jnp.sort` of a row read with `other=0` and stored back under the mask lost elements silently: it
  is checked now at its first pass, in the order of the whole keys (lowering/interpret_pad_sorts.py, `_wide`).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where
from probe_util import export

S = jax.ShapeDtypeStruct
F32, I32, I16, I8, U16, U8 = jnp.float32, jnp.int32, jnp.int16, jnp.int8, jnp.uint16, jnp.uint8
NARROW = (I8, U8, I16, U16)


def _ints(lo, hi, shape, seed, dtype=np.int32):
  return np.random.default_rng(seed).integers(lo, hi, shape).astype(dtype)


def _full(dt):
  info = np.iinfo(np.dtype(dt))
  return int(info.min), int(info.max)


def _check(kernel, args, want, **kw):
  """`kernel` in interpret mode against `want` (exactly), then exported for CUDA."""
  got = kernel(*args, interpret=True, **kw)
  got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
  for g, w in zip(got, want):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  export(kernel, *args, **kw)


def _ranks(k):
  """Each element's count of equal elements before it (a counting sort's rank)."""
  seen, out = {}, []
  for v in np.asarray(k).tolist():
    out.append(seen.get(v, 0))
    seen[v] = seen.get(v, 0) + 1
  return np.array(out)


# ---------------------------------------------------------------- 8- and 16-bit integer atomics (were MG106)
@mg.mgpu_kernel(out_shape=lambda x: S((1,), x.dtype), grid=lambda x: (x.shape[0] // 128,))
def total_of_programs(x, o):
  i = ml.program_id(0)
  ml.atomic_add(o.at[0], ml.sum(x[ml.ds(i * 128, 128)]).astype(x.dtype))


@mg.mgpu_kernel(out_shape=lambda x: (S((128,), x.dtype), S((128,), x.dtype)), grid=lambda x: (x.shape[0] // 128,))
def column_extremes(x, hi, lo):
  i = ml.program_id(0)
  ml.atomic_max(hi.at[...], x[ml.ds(i * 128, 128)])
  ml.atomic_min(lo.at[...], x[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda ids, v: S((16,), v.dtype), grid=lambda ids, v: (ids.shape[0] // 128,))
def scatter_add(ids, v, h):
  i = ml.program_id(0)
  ml.atomic_add(h.at[ids[ml.ds(i * 128, 128)]], v[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda ids, v: (S((16,), v.dtype), S((16,), v.dtype)),
                grid=lambda ids, v: (ids.shape[0] // 128,))
def scatter_extremes(ids, v, hi, lo):
  i = ml.program_id(0)
  k = ids[ml.ds(i * 128, 128)]
  ml.atomic_max(hi.at[k], v[ml.ds(i * 128, 128)])
  ml.atomic_min(lo.at[k], v[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda x: (S((4,), x.dtype), S((4,), x.dtype), S((4,), x.dtype)), grid=(4,))
def swaps(x, o, seen, was):
  i = ml.program_id(0)
  seen[i] = ml.atomic_cas(o.at[i], 0, x[i])
  was[i] = ml.atomic_xchg(o.at[i], x[i + 4])


@mg.mgpu_kernel(out_shape=lambda k: (S((16,), I16), S(k.shape, I16)), grid=(1,))
def ranks_int16(k, cnt, r):
  r[...] = ml.atomic_add(cnt.at[k[...]], 1)


@mg.mgpu_kernel(out_shape=lambda ids, *, dt: S((128,), dt), grid=(1,))
def smem_histogram(ids, h, *, dt: ml.constexpr):
  buf = ml.smem((128,), dt)
  buf[...] = ml.zeros((128,), dt)
  for j in range(4):
    ml.atomic_add(buf.at[ids[ml.ds(j * 128, 128)]], 1)
  h[...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x: S((8, 128), x.dtype), grid=(1,))
def smem_window_max(x, o):
  buf = ml.smem((8, 128), x.dtype)
  buf[...] = ml.zeros((8, 128), x.dtype)          # (the values are not negative)
  for j in range(2):
    ml.atomic_max(buf.at[...], x[ml.ds(j * 8, 8), :])
  o[...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda ids: S((8,), U8), grid=lambda ids: (ids.shape[0] // 128,))
def bitset_uint8(ids, h):
  i = ml.program_id(0)
  k = ids[ml.ds(i * 128, 128)]
  ml.atomic_or(h.at[k // 8], ml.full((128,), 1, U8) << (k % 8).astype(U8))


@mg.mgpu_kernel(out_shape=lambda x: (S((1,), F32), S((4,), F32), S((1,), I16)), grid=(4,))
def ticket_int16(x, total, part, count):
  i = ml.program_id(0)
  part[i] = ml.sum(x[ml.ds(i * 128, 128)])
  t = ml.atomic_add(count.at[0], 1)
  if t == ml.num_programs(0) - 1:
    total[0] = ml.sum(part[...])


@mg.mgpu_kernel(out_shape=lambda x: S((200,), x.dtype), grid=(2,))
def tail_window_add(x, o):
  i = ml.program_id(0)
  offs = i * 128 + ml.arange(128)
  v = x.at[ml.ds(i * 128, 128)].load(mask=offs < 200, other=0)
  ml.atomic_add(o.at[ml.ds(i * 128, 128)], v, mask=offs < 200)


@pytest.mark.parametrize("dt", NARROW, ids=lambda d: d.__name__)
def test_narrow_single_element_and_window_atomics_match_jnp(dt):
  lo, hi = _full(dt)
  x = _ints(lo, hi, 512, 1, np.dtype(dt))
  _check(total_of_programs, (x,), np.array([np.sum(x, dtype=np.dtype(dt))], np.dtype(dt)))
  _check(column_extremes, (x,), (x.reshape(4, 128).max(0), x.reshape(4, 128).min(0)))
  _check(tail_window_add, (x[:200],), x[:200])


@pytest.mark.parametrize("dt", NARROW, ids=lambda d: d.__name__)
def test_narrow_scatters_with_duplicates_match_jnp(dt):
  lo, hi = _full(dt)
  ids, v = _ints(0, 16, 512, 2), _ints(lo, hi, 512, 3, np.dtype(dt))
  _check(scatter_add, (ids, v), np.asarray(jnp.zeros(16, dt).at[ids].add(v)))      # (wraps, as jnp's)
  _check(scatter_extremes, (ids, v), (np.asarray(jnp.full(16, lo, dt).at[ids].max(v)),
                                      np.asarray(jnp.full(16, hi, dt).at[ids].min(v))))


@pytest.mark.parametrize("dt", NARROW, ids=lambda d: d.__name__)
def test_narrow_cas_and_xchg_return_the_old_values(dt):
  x = np.array([7, 1, 100, 0, 3, 9, 27, 81], np.dtype(dt))
  _check(swaps, (x,), (x[4:], np.zeros(4, np.dtype(dt)), x[:4]))


def test_narrow_old_values_rank_a_counting_sort():
  k = _ints(0, 16, 128, 4)
  _check(ranks_int16, (k,), (np.bincount(k, minlength=16).astype(np.int16), _ranks(k).astype(np.int16)))


@pytest.mark.parametrize("dt", NARROW, ids=lambda d: d.__name__)
def test_narrow_smem_histogram_and_window(dt):
  ids = _ints(0, 128, 512, 5)
  _check(smem_histogram, (ids,), np.asarray(jnp.zeros(128, dt).at[ids].add(1)), dt=dt)
  x = _ints(0, _full(dt)[1], (16, 128), 6, np.dtype(dt))
  _check(smem_window_max, (x,), x.reshape(2, 8, 128).max(0))


def test_uint8_bitset_and_int16_ticket():
  ids = _ints(0, 64, 256, 7)
  want = np.zeros(8, np.uint8)
  for v in ids.tolist():
    want[v // 8] |= 1 << (v % 8)
  _check(bitset_uint8, (ids,), want)
  x = np.random.default_rng(8).standard_normal(512).astype(np.float32)
  got = ticket_int16(x, interpret=True)
  np.testing.assert_allclose(np.asarray(got[0]), [x.sum()], rtol=1e-5)
  np.testing.assert_array_equal(np.asarray(got[2]), [4])
  export(ticket_int16, x)


def test_narrow_atomics_compile_to_a_cas_loop_on_the_word():
  """The module holds the loop: a relaxed load of the word and `atom.cas.b32` (SMEM: atom.shared.cas.b32)."""
  text = scatter_add.mlir(S((512,), I32), S((512,), U8)) + smem_histogram.mlir(S((512,), I32), dt=I8)
  assert "atom.relaxed.gpu.cas.b32" in text and "ld.relaxed.gpu.b32" in text
  assert "atom.shared.cas.b32" in text


@mg.mgpu_kernel(out_shape=lambda x: S((128,), I16), grid=lambda x: (x.shape[0] // 128,))
def tma_reduce_int16(x, o):
  i = ml.program_id(0)
  buf = ml.smem((128,), I16)
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  ml.copy(buf, o.at[...], reduce="add")


def test_a_narrow_tma_reduction_hints_the_register_atomic():
  expect(tma_reduce_int16, [S((512,), I16)], mg.UnsupportedDtypeError, 'ml.copy(buf, o.at[...], reduce="add")',
         "ml.copy(..., reduce='add') on int16 is not supported by the TMA engine: Hopper's atomic add takes"
         " bfloat16, float16, float32, int32, int64, uint32",
         hint="update from registers, ml.atomic_add(o.at[...], buf[...]): an int16 add in GMEM is a compare-and-swap"
              " loop on each element's 32-bit word; or convert the value and the array to a supported dtype: make the"
              " output int32 (out_shape=jax.ShapeDtypeStruct(shape, jnp.int32)) and update it with the value's"
              " .astype(jnp.int32); .astype(jnp.int16) of the result outside the kernel gives int16's, wrapping as"
              " jnp's int16 .at[].add does")


@pytest.mark.gpu
@pytest.mark.parametrize("dt", NARROW, ids=lambda d: d.__name__)
def test_gpu_narrow_atomics_match_jnp(dt):
  lo, hi = _full(dt)
  x = _ints(lo, hi, 512, 1, np.dtype(dt))
  np.testing.assert_array_equal(np.asarray(jax.jit(total_of_programs)(x)), [np.sum(x, dtype=np.dtype(dt))])
  got = jax.jit(column_extremes)(x)
  np.testing.assert_array_equal(np.asarray(got[0]), x.reshape(4, 128).max(0))
  np.testing.assert_array_equal(np.asarray(got[1]), x.reshape(4, 128).min(0))
  np.testing.assert_array_equal(np.asarray(jax.jit(tail_window_add)(x[:200])), x[:200])
  ids, v = _ints(0, 16, 512, 2), _ints(lo, hi, 512, 3, np.dtype(dt))
  np.testing.assert_array_equal(np.asarray(jax.jit(scatter_add)(ids, v)), np.asarray(jnp.zeros(16, dt).at[ids].add(v)))
  got = jax.jit(scatter_extremes)(ids, v)
  np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(jnp.full(16, lo, dt).at[ids].max(v)))
  np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(jnp.full(16, hi, dt).at[ids].min(v)))
  s = np.array([7, 1, 100, 0, 3, 9, 27, 81], np.dtype(dt))
  for g, w in zip(jax.jit(swaps)(s), (s[4:], np.zeros(4, np.dtype(dt)), s[:4])):
    np.testing.assert_array_equal(np.asarray(g), w)
  sid = _ints(0, 128, 512, 5)
  np.testing.assert_array_equal(np.asarray(jax.jit(lambda i: smem_histogram(i, dt=dt))(sid)),
                                np.asarray(jnp.zeros(128, dt).at[sid].add(1)))
  w = _ints(0, hi, (16, 128), 6, np.dtype(dt))
  np.testing.assert_array_equal(np.asarray(jax.jit(smem_window_max)(w)), w.reshape(2, 8, 128).max(0))


@pytest.mark.gpu
def test_gpu_narrow_ranks_bitset_and_ticket():
  k = _ints(0, 16, 128, 4)
  cnt, r = jax.jit(ranks_int16)(k)
  np.testing.assert_array_equal(np.asarray(cnt), np.bincount(k, minlength=16))
  np.testing.assert_array_equal(np.sort(np.asarray(r)[k == 3]), np.arange((k == 3).sum()))   # (ranks in any order)
  ids = _ints(0, 64, 256, 7)
  want = np.zeros(8, np.uint8)
  for v in ids.tolist():
    want[v // 8] |= 1 << (v % 8)
  np.testing.assert_array_equal(np.asarray(jax.jit(bitset_uint8)(ids)), want)
  x = np.random.default_rng(8).standard_normal(512).astype(np.float32)
  got = jax.jit(ticket_int16)(x)
  np.testing.assert_allclose(np.asarray(got[0]), [x.sum()], rtol=1e-4)
  np.testing.assert_array_equal(np.asarray(got[2]), [4])


# ---------------------------------------------------------------- 16-bit float max and min, one element at a time
@mg.mgpu_kernel(out_shape=lambda ids, v: (S((16,), v.dtype), S((16,), v.dtype)), grid=lambda ids, v: (ids.shape[0] // 128,))
def half_scatter_extremes(ids, v, hi, lo):
  i = ml.program_id(0)
  k = ids[ml.ds(i * 128, 128)]
  ml.atomic_max(hi.at[k], v[ml.ds(i * 128, 128)])
  ml.atomic_min(lo.at[k], v[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda v: S((8,), v.dtype), grid=lambda v: (v.shape[0] // 1024,))
def half_row_maxima(v, o):
  i = ml.program_id(0)
  ml.atomic_max(o.at[...], ml.max(v[ml.ds(i * 1024, 1024)].reshape(8, 128), axis=1))


@mg.mgpu_kernel(out_shape=lambda ids, v: S((128,), v.dtype), grid=(1,))
def half_smem_segment_max(ids, v, o):
  buf = ml.smem((128,), v.dtype)
  buf[...] = ml.full((128,), float("-inf"), v.dtype)
  for j in range(4):
    ml.atomic_max(buf.at[ids[ml.ds(j * 128, 128)]], v[ml.ds(j * 128, 128)])
  o[...] = buf[...]


@pytest.mark.parametrize("dt", (jnp.float16, jnp.bfloat16), ids=lambda d: d.__name__)
def test_half_max_and_min_one_element_at_a_time_match_jnp(dt):
  """Were MG106 (scatters, SMEM scatters) and MG204 (a row statistic of 8 elements held singly)."""
  ids, v = _ints(0, 16, 512, 11), np.random.default_rng(12).standard_normal(512).astype(dt)
  _check(half_scatter_extremes, (ids, v), (np.asarray(jax.ops.segment_max(v, ids, 16)),
                                           np.asarray(jax.ops.segment_min(v, ids, 16))))
  w = np.random.default_rng(13).standard_normal(2048).astype(dt)
  _check(half_row_maxima, (w,), w.reshape(2, 8, 128).max(2).max(0))
  sid = _ints(0, 128, 512, 14)
  _check(half_smem_segment_max, (sid, v), np.asarray(jax.ops.segment_max(v, sid, 128)))
  assert "atom.relaxed.gpu.cas.b16" in half_scatter_extremes.mlir(S((512,), I32), S((512,), dt))
  assert "atom.shared.cas.b32" in half_smem_segment_max.mlir(S((512,), I32), S((512,), dt))


@pytest.mark.gpu
@pytest.mark.parametrize("dt", (jnp.float16, jnp.bfloat16), ids=lambda d: d.__name__)
def test_gpu_half_max_and_min_one_element_at_a_time(dt):
  ids, v = _ints(0, 16, 512, 11), np.random.default_rng(12).standard_normal(512).astype(dt)
  hi, lo = jax.jit(half_scatter_extremes)(ids, v)
  np.testing.assert_array_equal(np.asarray(hi), np.asarray(jax.ops.segment_max(v, ids, 16)))
  np.testing.assert_array_equal(np.asarray(lo), np.asarray(jax.ops.segment_min(v, ids, 16)))
  w = np.random.default_rng(13).standard_normal(2048).astype(dt)
  np.testing.assert_array_equal(np.asarray(jax.jit(half_row_maxima)(w)), w.reshape(2, 8, 128).max(2).max(0))
  sid = _ints(0, 128, 512, 14)
  np.testing.assert_array_equal(np.asarray(jax.jit(half_smem_segment_max)(sid, v)),
                                np.asarray(jax.ops.segment_max(v, sid, 128)))


# ---------------------------------------------------------------- a plain store beside a data scatter (MG951)
@mg.mgpu_kernel(out_shape=lambda ids: S((16,), I32), grid=lambda ids: (ids.shape[0] // 128,))
def zeroed_by_program_0(ids, o):
  i = ml.program_id(0)
  if i == 0:
    o[...] = ml.zeros((16,), I32)
  ml.atomic_add(o.at[ids[ml.ds(i * 128, 128)]], 1)


@mg.mgpu_kernel(out_shape=lambda ids: S((256,), I32), grid=lambda ids: (ids.shape[0] // 128,))
def zeroed_in_halves(ids, o):
  i = ml.program_id(0)
  if i == 0:
    for j in range(2):
      o[ml.ds(j * 128, 128)] = ml.zeros((128,), I32)
  ml.atomic_add(o.at[ids[ml.ds(i * 128, 128)]], 1)


@mg.mgpu_kernel(out_shape=lambda ids: S((4, 16), I32), grid=(4,))
def next_rows_histogram(ids, o):
  i = ml.program_id(0)
  o[i, :] = ml.zeros((16,), I32)
  ml.atomic_add(o.at[(i + 1) % 4, ids[ml.ds(i * 128, 128)]], 1)


@mg.mgpu_kernel(out_shape=lambda ids: S((4, 16), I32), grid=(4,))
def own_rows_histogram(ids, o):
  i = ml.program_id(0)
  o[i, :] = ml.zeros((16,), I32)
  ml.atomic_add(o.at[i, ids[ml.ds(i * 128, 128)]], 1)


@mg.mgpu_kernel(out_shape=lambda ids: S((9,), I32), grid=lambda ids: (ids.shape[0] // 128,))
def bins_and_a_header(ids, out):
  i = ml.program_id(0)
  ml.atomic_add(out.at[ids.at[ml.ds(i * 128, 128)][...]], 1)
  if i == 0:
    out[8] = ids.shape[0]


_RACE = ("writes {what} here while program {a} adds to {name} with atomics at indices of data, which land in what"
         " program (0, 0, 0) writes whatever the data is: programs run in no fixed order, so the sum depends on timing")


def test_a_store_covering_a_data_scatter_is_a_race_while_compiling():
  hint = ("an output updated with atomics starts at 0: drop the plain write of o (to start elsewhere, pass the start"
          " in as an input aliased to o), or make it an atomic update too")
  e = expect(zeroed_by_program_0, [S((512,), I32)], mg.RaceError, "o[...] = ml.zeros",
             "program (0, 0, 0) " + _RACE.format(what="all of o", a="(1, 0, 0)", name="o"), hint=hint)
  line, _ = where(zeroed_by_program_0, "ml.atomic_add(o.at[ids")
  assert e.notes[0].endswith(f":{line}:2: program (1, 0, 0)'s atomic update")
  expect(zeroed_in_halves, [S((512,), I32)], mg.RaceError, "o[ml.ds(j * 128, 128)] = ml.zeros",
         "program (0, 0, 0) " + _RACE.format(what="o[0:128]", a="(1, 0, 0)", name="o"), hint=hint)
  expect(next_rows_histogram, [S((512,), I32)], mg.RaceError, "o[i, :] = ml.zeros",
         "program (0, 0, 0) " + _RACE.format(what="o[0, :]", a="(3, 0, 0)", name="o"), hint=hint)


def test_a_store_a_data_scatter_may_miss_still_compiles():
  ids = _ints(0, 16, 512, 9)
  _check(own_rows_histogram, (ids,), np.stack([np.bincount(r, minlength=16) for r in ids.reshape(4, 128)]))
  ids = _ints(0, 8, 512, 10)
  _check(bins_and_a_header, (ids,), np.asarray(jnp.zeros(9, I32).at[ids].add(1).at[8].set(512)))


# ---------------------------------------------------------------- int64 sorts of a padded row (MG953)
@mg.mgpu_kernel(out_shape=lambda x, *, fill: x)
def sorted_row(x, o, *, fill: ml.constexpr):
  cols = ml.arange(128)
  v = x.at[ml.ds(0, 128)].load(mask=cols < x.shape[0], other=fill)
  o.at[ml.ds(0, 128)].store(jnp.sort(v), mask=cols < x.shape[0])


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), I32))
def argsorted_row_descending(x, o):
  cols = ml.arange(128)
  v = x.at[ml.ds(0, 128)].load(mask=cols < x.shape[0], other=0)
  o.at[ml.ds(0, 128)].store(jnp.argsort(-v), mask=cols < x.shape[0])


@mg.mgpu_kernel(out_shape=lambda x: x)
def sorted_whole(x, o):
  o[...] = jnp.sort(x[...])          # (100 elements: a tile the compiler computes padded, its padding its own)


def test_an_int64_sort_of_a_padded_row_is_checked_in_the_order_of_its_keys():
  with jax.enable_x64(True):
    x = (np.arange(100) * 7919 % 1000 - 500).astype(np.int64) * (1 << 33) + 5
    with pytest.raises(mg.MaskedReductionError) as info:
      sorted_row(x, fill=0, interpret=True)
    e = info.value
    assert (e.lineno, e.col_offset) == where(sorted_row, "jnp.sort(v)")
    assert e.code == "MG953"
    assert e.message.startswith("jnp.sort sorts lanes the masked load at line")
    assert e.message.endswith("kept off past the end of x, filled with other=fill (0): in program (0, 0, 0) a lane"
                              " of padding sorts to position 51, before an element of data at position 79, so the"
                              " smallest values it gives are padding")
    assert e.hint.startswith("fill them so that they sort after the data: other=9223372036854775807 in the masked load")
    got = sorted_row(x, fill=int(np.iinfo(np.int64).max), interpret=True)       # (the hint followed)
    np.testing.assert_array_equal(np.asarray(got), np.sort(x))
    export(sorted_row, x, fill=int(np.iinfo(np.int64).max))
    with pytest.raises(mg.MaskedReductionError):          # (negated: the padding 0 above the negatives)
      argsorted_row_descending(-np.abs(x) - 1, interpret=True)
    pos = np.abs(x) + 1
    np.testing.assert_array_equal(np.asarray(argsorted_row_descending(pos, interpret=True)), np.argsort(-pos))
    np.testing.assert_array_equal(np.asarray(sorted_whole(x, interpret=True)), np.sort(x))     # (no false MG953)
