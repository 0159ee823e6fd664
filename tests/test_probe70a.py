"""Probe 70a (data-analytics and database kernels as cuDF, Crystal, HeavyDB, Polars-GPU and DuckDB-GPU authors write
them: predicate filters and stream compaction, selection vectors, validity bitmaps, group-by aggregation by atomics,
sorts and hash tables, hash joins with CAS inserts and linear probing, radix and hash partitioning, run-length
encoding, distinct, top-N, string kernels over offsets, fixed-point decimals, date arithmetic, window functions and
merge joins): the corpus (tests/probe70a_filter.py, probe70a_groupby.py, probe70a_runs.py, probe70a_time.py,
probe70a_window.py, probe70a_more.py, probe70a_jnp.py,
probe70a_codec.py), each kernel checked in interpret mode against its NumPy reference and exported
for CUDA; the classes fixed (design note 230), each with a test that fails on the code before it."""
import contextlib
import signal
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
import probe70a_codec
import probe70a_filter
import probe70a_groupby
import probe70a_jnp
import probe70a_more
import probe70a_runs
import probe70a_time
import probe70a_window

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32
MODULES = (probe70a_filter, probe70a_groupby, probe70a_runs, probe70a_time, probe70a_window, probe70a_more,
           probe70a_jnp, probe70a_codec)
CASES = {name: c for m in MODULES for name, c in m.CASES.items()}
X64 = set().union(*(getattr(m, "X64", ()) for m in MODULES))


def _compare(name, got, want, tol):
  """Each output within `tol` of its reference's largest magnitude (0: equal; NaN where the reference has NaN)."""
  got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
  assert len(got) == len(want), name
  for g, w in zip(got, want):
    g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
    assert g.shape == w.shape, (name, g.shape, w.shape)
    np.testing.assert_allclose(g, w, rtol=0, atol=tol * max(1e-6, float(np.nanmax(np.abs(w), initial=0))), err_msg=name)


def _line_of(text, path=__file__):
  """The line of `path` that holds `text` (where a diagnostic must point)."""
  with open(path) as f:
    return next(n for n, line in enumerate(f, 1) if text in line)


def _specs(args):
  return [S(np.shape(a), a.dtype) for a in args]


def _quiet(run):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.KernelWarning)
    return run()


def _x64(name):
  return jax.enable_x64(True) if name in X64 else contextlib.nullcontext()


def test_corpus_size():
  assert len(CASES) >= 60, len(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_matches_its_reference_and_builds(name):
  """Each kernel against its reference in interpret mode, then its Mosaic GPU module built for CUDA (a verifier error
  or an InternalError there fails the test)."""
  kernel, make, ref, tol = CASES[name]
  with _x64(name):
    args, kw = make(0)
    _compare(name, _quiet(lambda: kernel(*args, **kw, interpret=True)), ref(*args, **kw), tol)
    _quiet(lambda: jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*_specs(args)).mlir_module())


GPU_TWINS = ["smem_hash_groupby_cas_in_shared", "fmix64_of_int64_keys_logical_shifts", "hash_set_int64_keys_cas",
             "probe_while_true_break", "filter_count_scan_scatter", "compact_pairs_atomic_ticket", "bitmap_and_popcount",
             "arrow_validity_bytes_null_count", "groupby_dense_sum_count_min_max", "groupby_smem_private_table_merged",
             "hash_groupby_cas_linear_probing", "hash_join_build_cas_then_probe", "hash_partition_stable_two_launches",
             "rle_encode_one_block", "count_distinct_atomic_or_bitset", "top_n_blocks_then_merge",
             "string_starts_with_pattern_8", "string_fnv1a_hash_scalar_loop", "decimal_mul_round_half_away_int64",
             "extract_year_month_day_civil", "segmented_scan_flag_value_pairs", "row_number_rank_dense_rank",
             "merge_join_match_ranges_binary_search", "merge_join_pairs_materialised", "lsd_radix_sort_four_passes"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_TWINS)
def test_gpu_corpus_matches_its_reference(name):
  """The GPU twins: integer results bit for bit (atomic tickets' orders are sorted by the cases' wrappers); float
  sums within the tolerance (atomics add in another order)."""
  kernel, make, ref, tol = CASES[name]
  with _x64(name):
    args, kw = make(1)
    got = _quiet(lambda: jax.jit(lambda *a: kernel(*a, **kw))(*args))
    _compare(name, got, ref(*args, **kw), tol if tol == 0 else max(tol, 1e-4))


# ---------------------------------------------------------------- class 1: static unrolls whose values meet many times
@contextlib.contextmanager
def _deadline(seconds):
  """Fail (not hang) where compiling takes longer than `seconds`: the walks this class fixed took time exponential
  in an unrolled loop's steps (12 halvings ran for minutes)."""
  def _raise(*_):
    raise TimeoutError(f"compiling took more than {seconds} s")
  old = signal.signal(signal.SIGALRM, _raise)
  signal.alarm(seconds)
  try:
    yield
  finally:
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@mg.mgpu_kernel(out_shape=lambda a, b: S(a.shape, I32), grid=lambda a, b: (a.shape[0] // 128,))
def lower_bound_unrolled(a, b, lo_out, *, STEPS: ml.constexpr = 16):
  nb = b.shape[0]
  k = a.at[ml.ds(ml.program_id(0) * 128, 128)][...]
  lo = ml.zeros((128,), I32)
  hi = ml.full((128,), nb, I32)
  for _ in ml.static_range(STEPS):
    mid = (lo + hi) // 2
    go = (lo < hi) & (ml.load(b.at[ml.minimum(mid, nb - 1)]) < k)
    lo, hi = ml.where(go, mid + 1, lo), ml.where(go | (lo >= hi), hi, mid)
  lo_out.at[ml.ds(ml.program_id(0) * 128, 128)][...] = lo


@mg.mgpu_kernel(out_shape=lambda b: S((128,), b.dtype), grid=(1,))
def window_at_a_scalar_search(b, o, *, T: ml.constexpr = 300, STEPS: ml.constexpr = 20):
  lo = 0
  hi = b.shape[0]
  for _ in ml.static_range(STEPS):
    mid = (lo + hi) // 2
    lo, hi = ml.where(b[mid] < T, mid + 1, lo), ml.where(b[mid] < T, hi, mid)
  o[...] = b.at[ml.ds(ml.minimum(lo, b.shape[0] - 128), 128)][...]


def test_a_binary_search_unrolled_by_a_static_loop_compiles_in_time():
  """A lower bound by a static number of halvings (a merge join's, `lo, hi = ml.where(go, mid + 1, lo), ...`) meets
  each step's values several times; the mask evaluation of gather bounds (mask_boxes) walked them as a tree: 10
  halvings never finished compiling. Each value is evaluated once now."""
  a = np.sort(np.random.default_rng(0).integers(0, 5000, 256)).astype(np.int32)
  b = np.sort(np.random.default_rng(1).integers(0, 5000, 2000)).astype(np.int32)
  t = time.time()
  with _deadline(60):
    lower_bound_unrolled.typed_ir(*_specs((a, b)))
  assert time.time() - t < 30
  np.testing.assert_array_equal(np.asarray(lower_bound_unrolled(a, b, interpret=True)), np.searchsorted(b, a))
  jax.export.export(jax.jit(lower_bound_unrolled), platforms=["cuda"])(*_specs((a, b))).mlir_module()


def test_a_window_at_a_scalar_search_compiles_in_time():
  """The same class in the divisibility proof of a window's start (absint.known_multiple): a start chosen by 20
  scalar halvings took minutes; each value's multiple is found once a walk now."""
  b = np.arange(0, 4096, dtype=np.int32)
  t = time.time()
  with _deadline(60):
    window_at_a_scalar_search.typed_ir(S(b.shape, I32))
  assert time.time() - t < 30
  np.testing.assert_array_equal(np.asarray(window_at_a_scalar_search(b, interpret=True)), b[300:428])
  jax.export.export(jax.jit(window_at_a_scalar_search), platforms=["cuda"])(S(b.shape, I32)).mlir_module()


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype), grid=lambda x: (x.shape[0] // 128,))
def copy_at_a_reused_offset(x, o, *, STEPS: ml.constexpr = 22):
  off = ml.program_id(0)
  for _ in ml.static_range(STEPS):
    off = ml.maximum(off, off * 1)     # each step reads the last one twice: a computation of 2 ** STEPS terms
  o.at[ml.ds(off * 128, 128)][...] = x.at[ml.ds(off * 128, 128)][...] + 1.0


def test_a_window_written_at_an_offset_that_meets_itself_compiles_in_time():
  """The same class in the synchronisation pass (session 58, the lead): a GMEM window's run-time start was keyed by
  its whole computation as a tree (SyncPass.expr_key), so a start that reuses each step's value twice had a key of
  2 ** STEPS terms: 20 steps compiled in 52 s, 22 in minutes (and 30 filled the memory). Each value's key is made
  once now, and a key of more than sync.KEY_TERMS terms is the value's own."""
  x = np.arange(512, dtype=np.float32)
  with _deadline(60):
    copy_at_a_reused_offset.typed_ir(S(x.shape, x.dtype))
  np.testing.assert_array_equal(np.asarray(copy_at_a_reused_offset(x, interpret=True)), x + 1)
  jax.export.export(jax.jit(copy_at_a_reused_offset), platforms=["cuda"])(S(x.shape, x.dtype)).mlir_module()


@pytest.mark.gpu
def test_gpu_a_binary_search_unrolled_by_a_static_loop():
  a = np.sort(np.random.default_rng(2).integers(0, 5000, 256)).astype(np.int32)
  b = np.sort(np.random.default_rng(3).integers(0, 5000, 2000)).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(jax.jit(lower_bound_unrolled)(a, b)), np.searchsorted(b, a))
  x = np.arange(0, 4096, dtype=np.int32)
  np.testing.assert_array_equal(np.asarray(jax.jit(window_at_a_scalar_search)(x)), x[300:428])


# ---------------------------------------------------------------- class 2: CAS and exchange scatters into a CTA's SMEM
@mg.mgpu_kernel(out_shape=lambda k: (S((k.shape[0] // 128, 64), I32), S((k.shape[0] // 128, 64), I32)),
                grid=lambda k: (k.shape[0] // 128,))
def smem_hash_set(keys, tables, counts):
  """A block's keys inserted into its own SMEM table by CAS with linear probing (cuDF's shared-memory hash table),
  the rows of each key counted at its slot."""
  pid = ml.program_id(0)
  t = ml.smem((64,), I32)
  c = ml.smem((64,), I32)
  t[...] = ml.full((64,), -1, I32)
  c[...] = ml.zeros((64,), I32)
  k = keys.at[ml.ds(pid * 128, 128)][...]
  slot = (k * 7) & 63
  active = ml.full((128,), True, jnp.bool_)
  while ml.any(active):
    old = ml.atomic_cas(t.at[slot], -1, ml.where(active, k, -1))
    active = active & (old != -1) & (old != k)
    slot = ml.where(active, (slot + 1) & 63, slot)
  ml.atomic_add(c.at[slot], 1)
  tables.at[pid][...] = t[...]
  counts.at[pid][...] = c[...]


def _smem_hash_set_ref(keys):
  tables, counts = [], []
  for b in range(0, len(keys), 128):
    t, c = np.full(64, -1, np.int32), np.zeros(64, np.int32)
    blk = keys[b:b + 128]
    slot, active = (blk * 7) & 63, np.ones(len(blk), bool)
    while active.any():              # each trip: every active lane's CAS, lane by lane (interpret mode's order)
      for e in np.flatnonzero(active):
        if t[slot[e]] in (-1, blk[e]):
          t[slot[e]] = blk[e]
          active[e] = False
      slot = np.where(active, (slot + 1) & 63, slot)
    np.add.at(c, slot, 1)
    tables.append(t)
    counts.append(c)
  return np.stack(tables), np.stack(counts)


def test_a_cas_scatter_into_smem_builds_a_block_hash_table():
  """`ml.atomic_cas(t.at[slot], EMPTY, k)` of an SMEM buffer was MG003 ("it updates elements of an output (GMEM)"),
  whose hint (a select of the whole buffer) cannot insert at computed places nor let one of two equal keys win. It is
  the scatter's `atom` per element at the element's generic address (as GMEM's), between the barriers any SMEM
  scatter gets; interpret mode applies the lanes in order, so the table is a serial insert's."""
  keys = np.random.default_rng(11).choice(10**4, 40, replace=False).astype(np.int32)[
      np.random.default_rng(12).integers(0, 40, 256)]
  t, c = smem_hash_set(keys, interpret=True)
  want_t, want_c = _smem_hash_set_ref(keys)
  np.testing.assert_array_equal(np.asarray(t), want_t)
  np.testing.assert_array_equal(np.asarray(c), want_c)
  ir = str(smem_hash_set.typed_ir(S(keys.shape, I32)))
  assert "scatterupdate kind=cas" in ir
  assert ir.index("store ref=%") < ir.index("barrier") < ir.index("scatterupdate kind=cas") or "reduce" in ir
  mlir = jax.export.export(jax.jit(smem_hash_set), platforms=["cuda"])(S(keys.shape, I32)).mlir_module()
  assert "atom.relaxed.gpu.cas.b32" in mlir


@mg.mgpu_kernel(out_shape=lambda x, p: (x, x), grid=(1,))
def smem_exchange(x, p, o, olds):
  b = ml.smem(x.shape, x.dtype)
  b[...] = ml.zeros(x.shape, x.dtype) - 1.0
  olds[...] = ml.atomic_xchg(b.at[p[...]], x[...])
  ml.copy(b, o)


def test_an_exchange_scatter_into_smem_returns_the_old_values():
  """The exchange of a tensor of places in an SMEM buffer (MG003 before, probe 69b's hint: a plain scatter) is the
  same scatter of `atom.exch` with its old values."""
  x = np.arange(128, dtype=np.float32) + 1
  p = np.random.default_rng(9).integers(0, 128, 128).astype(np.int32)
  o, olds = smem_exchange(x, p, interpret=True)
  b, want = np.full(128, -1.0, np.float32), np.zeros(128, np.float32)
  for e in range(128):               # (interpret mode's order: the lanes one by one)
    want[e], b[p[e]] = b[p[e]], x[e]
  np.testing.assert_array_equal(np.asarray(o), b)
  np.testing.assert_array_equal(np.asarray(olds), want)
  mlir = jax.export.export(jax.jit(smem_exchange), platforms=["cuda"])(S((128,), F32), S((128,), I32)).mlir_module()
  assert "atom.relaxed.gpu.exch.b32" in mlir


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def smem_window_cas(x, o):
  b = ml.smem(x.shape, x.dtype)
  b[...] = ml.zeros(x.shape, x.dtype)
  ml.atomic_cas(b.at[ml.ds(0, 128)], 0, x[...])
  ml.copy(b, o)


def test_a_cas_of_an_smem_window_stays_mg003_with_the_select_hint():
  """A window (no computed places) of the CTA's own buffer: each element is one thread's, so the select the hint
  writes is the exchange (kept: there is no contention to resolve)."""
  with pytest.raises(mg.KernelError) as e:
    smem_window_cas.typed_ir(S((128,), F32))
  err = e.value
  assert err.code == "MG003" and err.lineno == _line_of("ml.atomic_cas(b.at[ml.ds(0, 128)], 0, x[...])")
  assert "buf[...] = ml.where(old == cmp, val, old)" in err.hint


@pytest.mark.gpu
def test_gpu_cas_and_exchange_scatters_into_smem():
  keys = np.random.default_rng(13).choice(10**4, 40, replace=False).astype(np.int32)[
      np.random.default_rng(14).integers(0, 40, 256)]
  t, c = jax.jit(smem_hash_set)(keys)
  for b in range(2):                 # slots depend on the lanes' order: the same keys, the same counts per key
    tb, cb = np.asarray(t[b]), np.asarray(c[b])
    blk = keys[b * 128:(b + 1) * 128]
    assert sorted(tb[tb != -1].tolist()) == sorted(set(blk.tolist()))
    assert {int(k): int(n) for k, n in zip(tb, cb) if k != -1} == {int(k): int((blk == k).sum()) for k in set(blk)}
  x = np.arange(128, dtype=np.float32) + 1
  p = np.random.default_rng(15).permutation(128).astype(np.int32)
  o, olds = jax.jit(smem_exchange)(x, p)
  want = np.full(128, -1.0, np.float32)
  want[p] = x
  np.testing.assert_array_equal(np.asarray(o), want)
  np.testing.assert_array_equal(np.asarray(olds), np.full(128, -1.0, np.float32))


# ---------------------------------------------------------------- class 3: lax's shifts of int64 (64-bit hashes)
@mg.mgpu_kernel(out_shape=lambda x, n: (x, x, x, x), grid=(1,))
def int64_shifts(x, n, static_logical, static_arith, run_logical, run_arith):
  v = x[...]
  m = n[...]
  static_logical[...] = (jax.lax.shift_right_logical(v, 33) + jax.lax.shift_right_logical(v, 0)
                         + jax.lax.shift_right_logical(v, 70) + jax.lax.shift_right_logical(v, -1))
  static_arith[...] = jax.lax.shift_right_arithmetic(v, 5) + jax.lax.shift_right_arithmetic(v, 64)
  run_logical[...] = jax.lax.shift_right_logical(v, m)
  run_arith[...] = jax.lax.shift_right_arithmetic(v, m)


def test_lax_shifts_of_int64_are_laxs():
  """`jax.lax.shift_right_logical(k, 33)` of an int64 tensor (fmix64's and splitmix64's shifts: kernels have no
  uint64) was MG003 "cannot take a register tensor", and `shift_right_arithmetic` too (no unsigned twin to bitcast
  through). Both are lax's for every amount now, static or run-time (past the width or negative: 0 logically, the
  sign fill arithmetically): the arithmetic shift with its sign bits masked off."""
  with jax.enable_x64(True):
    x = np.random.default_rng(0).integers(-2**63, 2**63 - 1, 128, dtype=np.int64)
    n = np.random.default_rng(1).integers(-3, 70, 128).astype(np.int64)
    got = int64_shifts(x, n, interpret=True)
    L, A = jax.lax.shift_right_logical, jax.lax.shift_right_arithmetic
    want = (L(x, 33) + L(x, 0) + L(x, 70) + L(x, -1), A(x, 5) + A(x, 64), L(x, n), A(x, n))
    for g, w in zip(got, want):
      np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    jax.export.export(jax.jit(int64_shifts), platforms=["cuda"])(S((128,), jnp.int64), S((128,), jnp.int64)).mlir_module()


@mg.mgpu_kernel(out_shape=lambda k: S(k.shape, jnp.int64), grid=(1,))
def fmix64_uint64(keys, out):
  k = keys[...].astype(jnp.uint64)
  k ^= k >> 33
  out[...] = k.astype(jnp.int64)


def test_a_uint64_conversion_is_mg106_whose_hint_writes_the_int64_hash():
  """Kernels have no uint64 (MG106 at the conversion); its hint names the int64 form of a 64-bit hash, which the
  corpus's fmix64_of_int64_keys_logical_shifts computes bit for bit against NumPy's uint64."""
  with jax.enable_x64(True):
    with pytest.raises(mg.KernelError) as e:
      fmix64_uint64.typed_ir(S((128,), jnp.int64))
  err = e.value
  assert err.code == "MG106" and err.lineno == _line_of("k = keys[...].astype(jnp.uint64)") and err.col_offset == 6
  assert "uint64 is not a kernel dtype" in str(err)
  assert "computes in int64" in err.hint and "jax.lax.shift_right_logical(k, 33)" in err.hint
  assert "fmix64_of_int64_keys_logical_shifts" in CASES


@pytest.mark.gpu
def test_gpu_lax_shifts_of_int64():
  with jax.enable_x64(True):
    x = np.random.default_rng(2).integers(-2**63, 2**63 - 1, 128, dtype=np.int64)
    n = np.random.default_rng(3).integers(-3, 70, 128).astype(np.int64)
    got = jax.jit(int64_shifts)(x, n)
    want = int64_shifts(x, n, interpret=True)
    for g, w in zip(got, want):
      np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


# ---------------------------------------------------------------- refusals met by the corpus (legitimate, hinted)
@mg.mgpu_kernel(out_shape=lambda w, *, B, N: S((N,), jnp.uint32), grid=lambda w, *, B, N: (N // 128,))
def bit_unpack_as_cuda(words, out, *, B: ml.constexpr, N: ml.constexpr):
  i = ml.program_id(0) * 128 + ml.arange(0, 128)
  bit = i * B
  lo = words[bit // 32]
  hi = ml.load(words.at[bit // 32 + 1], mask=bit // 32 + 1 < words.shape[0], other=0)
  sh = (bit % 32).astype(jnp.uint32)
  out[i] = ((lo >> sh) | (hi << (32 - sh))) & ((1 << B) - 1)


def test_a_shift_by_32_in_a_bit_unpack_is_mg950_whose_hint_computes():
  """CUDA's `hi << (32 - sh)` relies on PTX clamping the amount; a run-time shift past the width is undefined on the
  GPU (LLVM's poison), so interpret mode reports it at the shift, with the clamp that gives jnp's 0; the corpus's
  parquet_bit_unpack_5_bits is written so and matches NumPy."""
  (w,), kw = probe70a_codec._bu_make(0)
  with pytest.raises(mg.KernelError) as e:
    bit_unpack_as_cuda(w, **kw, interpret=True)
  err = e.value
  assert err.code == "MG950" and err.lineno == _line_of("out[i] = ((lo >> sh) | (hi << (32 - sh))) & ((1 << B) - 1)")
  assert "a shift by an amount outside 0..31" in str(err) and "ml.where(s < 32, hi << ml.minimum(s, 31), 0)" in err.hint
  assert "parquet_bit_unpack_5_bits" in CASES


@mg.mgpu_kernel(out_shape=lambda c: S((), I32), grid=(1,))
def count_commas_as_text(c, n):
  n[...] = ml.sum((c[...] == ",").astype(I32))


@mg.mgpu_kernel(out_shape=lambda c: S((), I32), grid=(1,))
def count_commas_as_hinted(c, n):
  n[...] = ml.sum((c[...] == ord(",")).astype(I32))


def test_a_byte_compared_with_a_character_hints_its_code():
  """`chars == ','` of uint8 bytes (a string kernel's natural first form) is MG003 at the comparison; the hint was
  "pass a register tensor, a scalar or a Python number", which did not say which number: it names the character's
  code, and that form counts the commas."""
  c = np.frombuffer(b"a,b,,c" * 20 + b"," * 8, np.uint8).copy()
  with pytest.raises(mg.KernelError) as e:
    count_commas_as_text.typed_ir(S(c.shape, jnp.uint8))
  err = e.value
  assert err.code == "MG003" and err.lineno == _line_of('n[...] = ml.sum((c[...] == ",").astype(I32))')
  assert err.col_offset == 19 and "== cannot take a Python str" in str(err)
  assert "compare with the code, ord(',') (44)" in err.hint
  assert int(count_commas_as_hinted(c, interpret=True)) == 68


# ---------------------------------------------------------------- class 5: a CAS that can never store (a hang)
@mg.mgpu_kernel(out_shape=lambda k: S((256,), I32), grid=lambda k: (k.shape[0] // 128,))
def hash_set_unfilled(keys, table):
  k = keys.at[ml.ds(ml.program_id(0) * 128, 128)][...]
  slot = (k * 7) & 255
  active = ml.full((128,), True, jnp.bool_)
  while ml.any(active):
    old = ml.atomic_cas(table.at[slot], -1, ml.where(active, k, -1))
    active = active & (old != -1) & (old != k)
    slot = ml.where(active, (slot + 1) & 255, slot)


@mg.mgpu_kernel(out_shape=lambda k: S((256,), I32), grid=lambda k: (k.shape[0] // 128,))
def hash_set_zero_empty(keys, table):
  k = keys.at[ml.ds(ml.program_id(0) * 128, 128)][...] + 1          # keys >= 0 stored as k + 1: 0 is EMPTY
  slot = (k * 7) & 255
  active = ml.full((128,), True, jnp.bool_)
  while ml.any(active):
    old = ml.atomic_cas(table.at[slot], 0, ml.where(active, k, 0))
    active = active & (old != 0) & (old != k)
    slot = ml.where(active, (slot + 1) & 255, slot)


def test_a_cas_into_an_unfilled_output_that_can_never_store_is_mg003():
  """A hash table's EMPTY = -1 with the table a plain output (the CUDA port's cudaMemset(0xFF) left out): an output
  only ml.atomic_cas updates starts at 0, so `cas(slot, -1, k)` never stores and the probe loop spun forever, in
  interpret mode (a hang with nothing said) as on the GPU. It is MG003 at the cas now, whose hint fills the table
  (an aliased input, as the corpus's hash_groupby_cas_linear_probing) or makes 0 the empty marker; both compute."""
  keys = np.random.default_rng(21).choice(10**4, 256, replace=False).astype(np.int32)
  with _deadline(60):
    with pytest.raises(mg.KernelError) as e:
      hash_set_unfilled(keys, interpret=True)
  err = e.value
  assert err.code == "MG003" and err.lineno == _line_of("old = ml.atomic_cas(table.at[slot], -1, ml.where(active, k, -1))")
  assert err.col_offset == 10 and "ml.atomic_cas compares table's elements with -1, but table starts at 0" in str(err)
  assert "jnp.full(shape, -1, dtype)" in err.hint and "input_output_aliases" in err.hint and "0 the empty marker" in err.hint
  assert "hash_groupby_cas_linear_probing" in CASES
  t = np.asarray(hash_set_zero_empty(keys, interpret=True))
  assert set(t[t != 0].tolist()) == set((keys + 1).tolist())       # (256 distinct keys fill the 256 slots)
  jax.export.export(jax.jit(hash_set_zero_empty), platforms=["cuda"])(S(keys.shape, I32)).mlir_module()


@mg.mgpu_kernel(out_shape=lambda x: (S((4,), I32), S((4,), I32)), grid=(4,))
def cas_from_data_and_mixed(x, a, b):
  i = ml.program_id(0)
  ml.atomic_cas(a.at[i], x[i], 7)                 # a data-dependent cmp: not known never to match
  ml.atomic_cas(b.at[i], 5, 9)                    # b is also exchanged: the xchg can store 5
  ml.atomic_xchg(b.at[(i + 1) % 4], 5)


def test_a_cas_with_a_cmp_from_data_or_beside_an_exchange_is_not_reported():
  x = np.array([0, 3, 0, 1], np.int32)
  a, b = cas_from_data_and_mixed(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(a), [7, 0, 7, 0])
  jax.export.export(jax.jit(cas_from_data_and_mixed), platforms=["cuda"])(S((4,), I32)).mlir_module()


# ---------------------------------------------------------------- class 6: a probe loop going round a full table
@mg.mgpu_kernel(out_shape=lambda k, t: S(t.shape, I32), grid=lambda k, t: (k.shape[0] // 128,), input_output_aliases={1: 0})
def insert_into_a_small_table(keys, t_in, table):
  cap = table.shape[0]
  k = keys.at[ml.ds(ml.program_id(0) * 128, 128)][...]
  slot = (k * 7) & (cap - 1)
  active = ml.full((128,), True, jnp.bool_)
  while ml.any(active):
    old = ml.atomic_cas(table.at[slot], -1, ml.where(active, k, -1))
    active = active & (old != -1) & (old != k)
    slot = ml.where(active, (slot + 1) & (cap - 1), slot)


def test_a_probe_loop_round_a_full_table_is_mg950_not_a_hang():
  """128 distinct keys into 64 slots: once the table is full every cas fails and the lanes' slots go round; each
  trip carried new values, so interpret mode's check of a trip that changes nothing never fired and it ran for hours
  (10**7 trips). It keeps the states a loop carried since memory last changed: a state carried again means a cycle,
  MG950 at the loop, whose hint sizes the table; with 256 slots the same kernel fills it."""
  keys = np.random.default_rng(22).choice(10**4, 128, replace=False).astype(np.int32)
  with _deadline(60):
    with pytest.raises(mg.KernelError) as e:
      insert_into_a_small_table(keys, np.full(64, -1, np.int32), interpret=True)
  err = e.value
  assert err.code == "MG950" and err.lineno == _line_of("def insert_into_a_small_table") + 5 and err.col_offset == 2
  assert "this while loop never ends in program (0, 0, 0): after" in str(err) and "repeat that cycle forever" in str(err)
  assert "more slots than keys" in err.hint
  t = np.asarray(insert_into_a_small_table(keys, np.full(256, -1, np.int32), interpret=True))
  assert set(t[t != -1].tolist()) == set(keys.tolist())


@mg.mgpu_kernel(out_shape=lambda x: (S((), I32), S((), I32)), grid=(1,))
def toggling_counter(x, count, last):
  t = 0
  go = True
  while go:
    t = 1 - t                             # the carried values repeat every two trips ...
    go = ml.atomic_add(count, 1) < 9      # ... while each trip changes memory: no cycle
  last[...] = t


def test_a_loop_whose_carried_values_repeat_while_memory_changes_runs_to_its_end():
  count, last = toggling_counter(np.zeros(1, np.float32), interpret=True)
  assert int(count) == 10 and int(last) == 0


@mg.mgpu_kernel(out_shape=lambda p, t: S(p.shape, I32), grid=lambda p, t: (p.shape[0],))
def probe_one_key(probe, table, pos):
  cap = table.shape[0]
  k = probe[ml.program_id(0)]
  slot = k & (cap - 1)
  while (table[slot] != k) & (table[slot] != -1):
    slot = (slot + 1) & (cap - 1)
  pos[ml.program_id(0)] = ml.where(table[slot] == k, slot, -1)


def test_a_scalar_probe_of_an_absent_key_in_a_full_table_is_mg950_in_its_program():
  """One key a program, a loop with no writes: its slot goes round a table with no empty slot. The spin check needs a
  trip that changes nothing; this one names the cycle and the program (key 1000, absent, in program 1)."""
  with _deadline(60):
    with pytest.raises(mg.KernelError) as e:
      probe_one_key(np.array([5, 1000], np.int32), np.arange(64, dtype=np.int32), interpret=True)
  err = e.value
  assert err.code == "MG950" and err.lineno == _line_of("  while (table[slot] != k) & (table[slot] != -1):")
  assert "never ends in program (1, 0, 0)" in str(err) and "repeat that cycle forever" in str(err)
  np.testing.assert_array_equal(np.asarray(probe_one_key(np.array([5, 1000], np.int32),
                                                         np.where(np.arange(64) == 9, -1, np.arange(64)).astype(np.int32),
                                                         interpret=True)), [5, -1])
