"""Probe 34g (graph and sparse kernels: segment sums and maxima, CSR products, COO and GNN scatters,
histograms, embedding bags, unique and run-length encoding, prefix sums across programs, top-k).
The kernels ran right in interpret mode and exported for CUDA; what failed was what a user of
jax.ops and jnp reaches for first: jax.ops.segment_sum, jnp.searchsorted, jnp.unique and jnp.diff in
a kernel had a generic hint (ml.searchsorted suggested ml.argsort), and a decoupled look-back, which
reads what other programs write, was told to accumulate in registers. Each hint is followed below."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from frontend.segment_hints import SEGMENT

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- jax.ops.segment_sum / segment_max in a kernel
@mg.mgpu_kernel(out_shape=lambda x, ids: S((16,), F32))
def segment_sum_call(x, ids, out):
  out[...] = jax.ops.segment_sum(x[...], ids[...], 16)


@mg.mgpu_kernel(out_shape=lambda x, ids: S((16,), I32))
def segment_max_call(x, ids, out):
  out[...] = jax.ops.segment_max(x[...], ids[...], 16)


@mg.mgpu_kernel(out_shape=lambda x, ids: S((16,), x.dtype), grid=lambda x, ids: (ml.cdiv(x.shape[0], 128),))
def segment_scatter(x, ids, out):          # the hint followed: an atomic scatter, ids past 16 dropped
  i = ml.program_id(0)
  pos = i * 128 + ml.arange(128)
  m = pos < x.shape[0]
  data = x.at[ml.ds(i * 128, 128)].load(mask=m, other=0)
  segment_ids = ids.at[ml.ds(i * 128, 128)].load(mask=m, other=16)
  if x.dtype == jnp.float32:
    ml.atomic_add(out.at[segment_ids], data)
  else:
    ml.atomic_max(out.at[segment_ids], data)


def test_segment_sum_and_max_in_a_kernel_compute_as_jax_ops_and_the_atomic_scatter_matches_them():
  """It was the generic 'kernels call ml.* functions' hint, then (probe 34g) a hint writing the atomic scatter;
  since probe 48e jax.ops.segment_sum and segment_max of register values compute as ml's (tests/test_probe48e.py),
  and the hint, for the GMEM refs themselves or across programs, still writes the scatter."""
  rng = np.random.default_rng(2)
  ids2 = jnp.asarray(np.sort(rng.integers(0, 14, 128)), I32)
  x2 = jnp.asarray(rng.standard_normal(128), F32)
  np.testing.assert_allclose(segment_sum_call(x2, ids2, interpret=True), jax.ops.segment_sum(x2, ids2, 16), rtol=1e-5,
                             atol=1e-5)
  xi2 = jnp.asarray(rng.integers(-1000, 1000, 128), I32)
  np.testing.assert_array_equal(segment_max_call(xi2, ids2, interpret=True), jax.ops.segment_max(xi2, ids2, 16))
  assert "ml.atomic_add(out.at[segment_ids], data, mask=segment_ids >= 0)" in SEGMENT["segment_sum"]
  rng = np.random.default_rng(0)
  ids = jnp.asarray(np.sort(rng.integers(0, 14, 300)), I32)         # segments 14 and 15 empty
  x = jnp.asarray(rng.standard_normal(300), F32)
  np.testing.assert_allclose(segment_scatter(x, ids, interpret=True), jax.ops.segment_sum(x, ids, 16),
                             rtol=1e-5, atol=1e-5)
  xi = jnp.asarray(rng.integers(-1000, 1000, 300), I32)
  np.testing.assert_array_equal(segment_scatter(xi, ids, interpret=True), jax.ops.segment_max(xi, ids, 16))
  _export(segment_scatter, S((300,), F32), S((300,), I32))


# ---------------------------------------------------------------- searchsorted
@mg.mgpu_kernel(out_shape=lambda a, q: S(q.shape, I32))
def searchsorted_call(a, q, out):
  out[...] = jnp.searchsorted(a[...], q[...])


@mg.mgpu_kernel(out_shape=lambda a, q: S(q.shape, I32))
def searchsorted_ml(a, q, out):
  out[...] = ml.searchsorted(a[...], q[...])


@mg.mgpu_kernel(out_shape=lambda a, q: S(q.shape, I32))
def searchsorted_counts(a, q, out):         # the hint's register form
  av, qv = a[...], q[...]
  out[...] = ml.sum((av[None, :] < qv[:, None]).astype(jnp.int32), axis=1)


@mg.mgpu_kernel(out_shape=lambda a, q: S(q.shape, I32), grid=lambda a, q: (q.shape[0],))
def searchsorted_binary(a, q, out):         # the hint's binary search
  i = ml.program_id(0)
  lo = 0
  hi = a.shape[0]
  while lo < hi:
    mid = (lo + hi) // 2
    if a[mid] < q[i]:
      lo = mid + 1
    else:
      hi = mid
  out[i] = lo


def test_searchsorted_hints_counts_of_comparisons_or_a_binary_search_and_both_work():
  """jnp.searchsorted had the generic hint; ml.searchsorted suggested ml.argsort. Since probe 46e ml.searchsorted
  exists (tests/test_probe46e.py), and since probe 48e jnp.searchsorted of register values computes as it."""
  rng = np.random.default_rng(1)
  a = jnp.asarray(np.sort(rng.integers(0, 100, 64)), I32)
  q = jnp.asarray(rng.integers(-5, 105, 32), I32)
  np.testing.assert_array_equal(searchsorted_ml(a, q, interpret=True), jnp.searchsorted(a, q))
  np.testing.assert_array_equal(searchsorted_call(a, q, interpret=True), jnp.searchsorted(a, q))
  np.testing.assert_array_equal(searchsorted_counts(a, q, interpret=True), jnp.searchsorted(a, q))
  np.testing.assert_array_equal(searchsorted_binary(a, q, interpret=True), jnp.searchsorted(a, q))
  _export(searchsorted_counts, S((64,), I32), S((32,), I32))
  _export(searchsorted_binary, S((64,), I32), S((32,), I32))


# ---------------------------------------------------------------- unique (run heads) and diff
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def unique_call(x, out):
  out[...] = jnp.unique(x[...])


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, I32), S((), I32)))
def unique_heads(x, out, count):            # the hint followed, one program (s = 0, n = 256)
  s, n = 0, 256
  pos = s + ml.arange(n)
  v = x.at[ml.ds(s, n)].load(mask=pos < x.shape[0], other=0)
  prev = x.at[ml.ds(s - 1, n)].load(mask=(pos >= 1) & (pos < x.shape[0]), other=0)
  head = (pos < x.shape[0]) & ((pos == 0) | (v != prev))
  ml.atomic_add(out.at[ml.where(head, ml.cumsum(head, dtype=jnp.int32) - 1, n)], v)
  count[...] = ml.sum(head.astype(jnp.int32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def diff_call(x, out):
  out[...] = jnp.diff(x[...], prepend=0.0)      # (computed since probe 53i)


@mg.mgpu_kernel(out_shape=lambda x: x)
def diff_promoting(x, out):
  out[...] = jnp.diff(x[...], prepend=0.5)      # (of int32 x: jnp promotes to float32; still MG003)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def diff_windows(x, out):                   # the hint followed, the end masked too
  s = ml.program_id(0) * 128
  j = s - 1 + ml.arange(128)
  prev = x.at[ml.ds(s - 1, 128)].load(mask=(j >= 0) & (j + 1 < x.shape[0]), other=0.0)
  v = x.at[ml.ds(s, 128)].load(mask=j + 1 < x.shape[0], other=0.0)
  out.at[ml.ds(s, 128)].store(v - prev, mask=j + 1 < x.shape[0])


def test_unique_and_diff_hint_run_heads_and_shifted_windows_that_match_jnp():
  expect(unique_call, [S((256,), I32)], mg.KernelTypeError, "jnp.unique(",
         "unique cannot take a register tensor inside a kernel", hint=SEGMENT["unique"])
  expect(diff_promoting, [S((128,), I32)], mg.KernelTypeError, "jnp.diff(",
         "diff cannot take a register tensor inside a kernel", hint=SEGMENT["diff"])
  x128 = jnp.asarray(np.random.default_rng(3).standard_normal(128), F32)
  np.testing.assert_allclose(diff_call(x128, interpret=True), jnp.diff(x128, prepend=0.0), rtol=1e-6)
  rng = np.random.default_rng(2)
  x = np.sort(rng.integers(0, 40, 201)).astype(np.int32)
  vals, count = unique_heads(jnp.asarray(x), interpret=True)
  u = np.unique(x)
  assert int(count) == len(u)
  np.testing.assert_array_equal(np.asarray(vals)[:len(u)], u)
  xf = jnp.asarray(rng.standard_normal(300), F32)
  np.testing.assert_allclose(diff_windows(xf, interpret=True), jnp.diff(xf, prepend=0.0), rtol=1e-6)
  _export(unique_heads, S((201,), I32))
  _export(diff_windows, S((300,), F32))


# ---------------------------------------------------------------- a decoupled look-back reads other programs' outputs
@mg.mgpu_kernel(out_shape=lambda x: (x, S((ml.cdiv(x.shape[0], 128),), F32)),
                grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def look_back(x, out, totals):
  i = ml.program_id(0)
  pos = i * 128 + ml.arange(128)
  v = x.at[ml.ds(i * 128, 128)].load(mask=pos < x.shape[0], other=0.0)
  prefix = 0.0
  for j in range(i):
    prefix = prefix + totals[j]
  totals[i] = prefix + ml.sum(v)
  out.at[ml.ds(i * 128, 128)].store(ml.cumsum(v) + prefix, mask=pos < x.shape[0])


@mg.mgpu_kernel(out_shape=lambda x: S((ml.cdiv(x.shape[0], 128),), F32), grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def block_totals(x, totals):
  i = ml.program_id(0)
  pos = i * 128 + ml.arange(128)
  totals[i] = ml.sum(x.at[ml.ds(i * 128, 128)].load(mask=pos < x.shape[0], other=0.0))


@mg.mgpu_kernel(out_shape=lambda x, offsets: x, grid=lambda x, offsets: (ml.cdiv(x.shape[0], 128),))
def block_scan(x, offsets, out):
  i = ml.program_id(0)
  pos = i * 128 + ml.arange(128)
  v = x.at[ml.ds(i * 128, 128)].load(mask=pos < x.shape[0], other=0.0)
  out.at[ml.ds(i * 128, 128)].store(ml.cumsum(v) + offsets[i], mask=pos < x.shape[0])


def test_a_look_back_across_programs_is_told_to_use_two_kernels_and_they_scan():
  """The MG601 hint only said to accumulate in registers, which a look-back cannot."""
  e = expect(look_back, [S((300,), F32)], mg.UninitializedReadError, "totals[j]",
             "totals is read before this program writes it: outputs start uninitialised")
  assert "a decoupled look-back) is two kernels" in e.hint and "jnp.cumsum(totals) - totals" in e.hint
  x = jnp.asarray(np.random.default_rng(3).standard_normal(1001), F32)
  totals = block_totals(x, interpret=True)
  y = block_scan(x, jnp.cumsum(totals) - totals, interpret=True)
  np.testing.assert_allclose(y, jnp.cumsum(x), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- a row pointer read past its end: the hint's zero is an int
@mg.mgpu_kernel(out_shape=lambda t, ids, off: S((off.shape[0], t.shape[1]), F32), grid=lambda t, ids, off: (off.shape[0],))
def bag_past_end(t, ids, off, out):        # PyTorch's offsets: one per bag, no last one
  b = ml.program_id(0)
  acc = ml.zeros((t.shape[1],), F32)
  for j in range(off[b], off[b + 1]):
    acc = acc + t.at[ids[j]][...]
  out.at[b][...] = acc


@mg.mgpu_kernel(out_shape=lambda t, ids, off: S((off.shape[0], t.shape[1]), F32), grid=lambda t, ids, off: (off.shape[0],))
def bag_where(t, ids, off, out):           # the hint followed: ml.where(guard, clamped read, 0)
  b = ml.program_id(0)
  end = ml.where(b + 1 < off.shape[0], off[ml.minimum(b + 1, off.shape[0] - 1)], 0)
  end = ml.where(b + 1 < off.shape[0], end, ids.shape[0])
  acc = ml.zeros((t.shape[1],), F32)
  for j in range(off[b], end):
    acc = acc + t.at[ids[j]][...]
  out.at[b][...] = acc


def test_an_int_row_pointer_read_past_its_end_hints_an_int_zero():
  """The hint wrote ml.where(b + 1 < off.shape[0], ..., 0.0), which makes an int32 row pointer a float
  (and the loop bound then an error)."""
  e = expect(bag_past_end, [S((20, 128), F32), S((17,), I32), S((4,), I32)], mg.IndexOutOfBoundsError,
             "off[b + 1]", "off[4] is read in program (3, 0, 0), outside off's shape (4,)")
  assert "ml.where(b + 1 < off.shape[0], ..., 0) to read 0 there" in e.hint
  rng = np.random.default_rng(4)
  t = jnp.asarray(rng.standard_normal((20, 128)), F32)
  ids = jnp.asarray(rng.integers(0, 20, 17), I32)
  off = np.array([0, 3, 3, 10], np.int32)
  bounds = list(off) + [17]
  want = np.stack([np.asarray(t)[np.asarray(ids)[bounds[b]:bounds[b + 1]]].sum(0) for b in range(4)])
  np.testing.assert_allclose(bag_where(t, ids, jnp.asarray(off), interpret=True), want, rtol=1e-5, atol=1e-5)
  _export(bag_where, S((20, 128), F32), S((17,), I32), S((4,), I32))


# ---------------------------------------------------------------- segment max of 16-bit floats through int32 keys
@mg.mgpu_kernel(out_shape=lambda x, ids: S((16,), x.dtype))
def half_segment_max(x, ids, out):
  ml.atomic_max(out.at[ids[...]], x[...])


@mg.mgpu_kernel(out_shape=lambda x, ids: S((16,), I32))
def half_segment_max_keys(x, ids, out):    # the hint followed
  b = ml.bitcast(x[...].astype(jnp.float32), jnp.int32)
  ml.atomic_max(out.at[ids[...]], ml.where(b >= 0, b, b ^ 0x7FFFFFFF))


@mg.mgpu_kernel(out_shape=lambda x, ids: S((16,), jnp.float32))
def half_segment_max_f32(x, ids, out):     # the hint followed, since probe 39c
  ml.atomic_max(out.at[ids[...]], x[...].astype(jnp.float32))


def test_a_16_bit_float_scatter_max_hints_widened_keys_and_their_empty_segments():
  """The float16/bfloat16 hint had no recipe (float32's had one), and neither said that an element no
  update reached decodes to NaN, where jax.ops.segment_max gives -inf."""
  # (since probe 56b the 16-bit scatter max itself works, a loop of atom.cas.b16 an element, where it was MG106)
  rng = np.random.default_rng(5)
  for dt in (jnp.float16, jnp.bfloat16):
    x = jnp.asarray(rng.standard_normal(128) - 3.0, dt)
    ids = jnp.asarray(rng.integers(0, 12, 128), I32)           # 12..15 empty
    k = half_segment_max_keys(x, ids, interpret=True)
    decoded = jax.lax.bitcast_convert_type(jnp.where(k >= 0, k, k ^ 0x7FFFFFFF), jnp.float32)
    got = jnp.where(k == jnp.iinfo(jnp.int32).min, -jnp.inf, decoded).astype(dt)
    np.testing.assert_array_equal(np.asarray(got, np.float32),
                                  np.asarray(jax.ops.segment_max(x, ids, 16), np.float32))
    got = jnp.asarray(half_segment_max_f32(x, ids, interpret=True)).astype(dt)
    np.testing.assert_array_equal(np.asarray(got, np.float32),
                                  np.asarray(jax.ops.segment_max(x, ids, 16), np.float32))
    np.testing.assert_array_equal(np.asarray(half_segment_max(x, ids, interpret=True), np.float32),
                                  np.asarray(jax.ops.segment_max(x, ids, 16), np.float32))
  _export(half_segment_max, S((128,), jnp.float16), S((128,), I32))
  _export(half_segment_max_keys, S((128,), jnp.float16), S((128,), I32))
  _export(half_segment_max_f32, S((128,), jnp.float16), S((128,), I32))
