"""Probe 71b (bit-level, hashing and cryptographic kernels as hashcat, cuRAND, RAPIDS, Bloom-filter and compression
authors port them: SHA-256 / SHA-1 / MD5, ChaCha20 / Salsa20, AES T-tables, CRC32, xxHash / Murmur / FNV, Philox,
splitmix64 / PCG / xorshift, popcount / clz / ffs / brev / byte swaps, rotates and funnel shifts, Morton / Hilbert /
Gray codes, bitsets, rank / select, Bloom filters, bit-packing, varints, base64, Hamming distances): the corpus
(tests/probe71b_hash.py, probe71b_rng.py, probe71b_bits.py, probe71b_pack.py), each kernel checked in interpret
mode against its NumPy reference, bit for bit, and exported for CUDA; the classes fixed (design note 234), each
with a test that fails on the code before it."""
import contextlib
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
import probe71b_bits
import probe71b_hash
import probe71b_pack
import probe71b_rng

S = jax.ShapeDtypeStruct
U32, I32, I64 = jnp.uint32, jnp.int32, jnp.int64
ld = ml.extra.cuda.libdevice
MODULES = (probe71b_hash, probe71b_rng, probe71b_bits, probe71b_pack)
CASES = {name: c for m in MODULES for name, c in m.CASES.items()}
X64 = set().union(*(getattr(m, "X64", ()) for m in MODULES))


def _compare(name, got, want):
  got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
  assert len(got) == len(want), name
  for g, w in zip(got, want):
    g, w = np.asarray(g), np.asarray(w)
    assert g.shape == w.shape and g.dtype == w.dtype, (name, g.shape, g.dtype, w.shape, w.dtype)
    np.testing.assert_array_equal(g, w, err_msg=name)


def _line_of(text, path=__file__):
  with open(path) as f:
    return next(n for n, line in enumerate(f, 1) if text in line)


def _specs(args):
  return [S(np.shape(a), np.asarray(a).dtype) for a in args]


def _quiet(run):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.KernelWarning)
    return run()


def _x64(name):
  return jax.enable_x64(True) if name in X64 else contextlib.nullcontext()


def _export(kernel, args, **kw):
  return jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*_specs(args)).mlir_module()


def _error(kernel, specs, cls, code, line_text, col_text, message, hint=None):
  """The diagnostic of `kernel` at `specs`: its class, code, line and column (of col_text in the line), message."""
  with pytest.raises(cls) as info:
    kernel.typed_ir(*specs)
  e = info.value
  assert e.code == code, (e.code, str(e))
  assert e.filename == __file__ and e.lineno == _line_of(line_text), (e.filename, e.lineno, str(e))
  with open(__file__) as f:
    assert e.col_offset == f.readlines()[e.lineno - 1].index(col_text), (e.col_offset, str(e))
  assert message in e.message, e.message
  if hint is not None:
    assert hint in e.hint, e.hint
  return e


def test_corpus_size():
  assert len(CASES) >= 60, len(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_matches_its_reference_and_builds(name):
  """Each kernel against its reference in interpret mode, bit for bit, then its Mosaic GPU module built for CUDA."""
  kernel, make, ref, _ = CASES[name]
  with _x64(name):
    args, kw = make(0)
    _compare(name, _quiet(lambda: kernel(*args, **kw, interpret=True)), ref(*args, **kw))
    _quiet(lambda: _export(kernel, args, **kw))


GPU_TWINS = ["sha256_compress_block_rows", "sha1_compress_block_rows", "md5_compress_block_rows",
             "chacha20_block_per_counter", "aes_round_ttable_in_smem", "crc32_table_in_smem",
             "crc32_bitwise_where_uint32_constant", "murmur3_x86_32_fixed_rows", "fnv1a_scalar_runtime_loop",
             "philox4x32_10_by_hand_umulhi", "splitmix64_int64_bits_constants", "pcg32_xsh_rr_int64_state",
             "libdevice_popc_clz_ffs_brev_int32", "int64_popcll_clzll_brevll", "byte_swap_shifts_byte_perm_bitcast",
             "libdevice_halving_adds", "rotate_by_run_time_amounts", "morton3d_30_bit_of_unit_points",
             "bloom_filter_insert_atomic_or", "unpack_5_bit_fields", "base64_decode_ranges",
             "hamming_nearest_neighbour_popc", "crc32_table_module_constant"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_TWINS)
def test_gpu_corpus_matches_its_reference(name):
  """The GPU twins, bit for bit (integer kernels: no rounding to differ in)."""
  kernel, make, ref, _ = CASES[name]
  with _x64(name):
    args, kw = make(1)
    _compare(name, _quiet(lambda: jax.jit(lambda *a: kernel(*a, **kw))(*args)), ref(*args, **kw))


# ---------------------------------------------------------------- class 1: libdevice's integer intrinsics refused
def _pop(v, bits=32):
  return np.array([bin(int(t) % 2 ** bits).count("1") for t in v], np.int32)


@mg.mgpu_kernel(out_shape=lambda x, y: (S(x.shape, I32),) * 3 + (x, x, x))
def intrinsics_u32(x, y, pc, lz, fs, rev, perm, avg):
  v, w = x[...], y[...]
  pc[...] = ld.popc(v)
  lz[...] = ld.clz(v)
  fs[...] = ld.ffs(v)
  rev[...] = ld.brev(v)
  perm[...] = ld.byte_perm(v, w, 0x5140)
  avg[...] = ld.urhadd(v, w)


def test_libdevice_integer_intrinsics_compute():
  """Triton's `tl.extra.cuda.libdevice.popc(x)`, clz, ffs, brev, byte_perm and the halving adds were MG002 ("has
  no attribute"; popc's and clz's hints said there was no population count here, though lax's computed): each is
  CUDA's intrinsic now, int32 counts (clz of 0 is 32, ffs of 0 is 0), composed of SWAR steps."""
  x = probe71b_bits.edge_words(3)
  y = probe71b_hash.words(4, 256)
  pc, lz, fs, rev, perm, avg = intrinsics_u32(x, y, interpret=True)
  np.testing.assert_array_equal(np.asarray(pc), _pop(x))
  np.testing.assert_array_equal(np.asarray(lz), [32 - int(t).bit_length() for t in x])
  np.testing.assert_array_equal(np.asarray(fs), [(int(t) & -int(t)).bit_length() for t in x])
  np.testing.assert_array_equal(np.asarray(rev), probe71b_bits.brev_np(x).astype(np.uint32))
  both = x.astype(np.uint64) | (y.astype(np.uint64) << np.uint64(32))
  want = sum(((both >> np.uint64(8 * ((0x5140 >> 4 * i) & 7))) & np.uint64(255)) << np.uint64(8 * i) for i in range(4))
  np.testing.assert_array_equal(np.asarray(perm), want.astype(np.uint32))
  np.testing.assert_array_equal(np.asarray(avg), ((x.astype(np.uint64) + y + 1) >> 1).astype(np.uint32))
  assert "mosaic_gpu" in _export(intrinsics_u32, (x, y))


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, I32), S(x.shape, I32), x, S(x.shape, jnp.uint8)))
def counts_i64(x, pc, fs, lax_clz, bc):
  v = x[...]
  pc[...] = ld.popc(v)                 # popc of int64 is popcll, as Triton dispatches it
  fs[...] = ld.ffsll(v)
  lax_clz[...] = jax.lax.clz(v)
  bc[...] = jnp.bitwise_count(v)


def test_64_bit_counts_compute_as_two_halves():
  """int64's lax.population_count, lax.clz and jnp.bitwise_count were MG003 (hints writing SWAR steps per half),
  libdevice's popcll / clzll / ffsll / brevll MG002; each is the halves' count now."""
  with jax.enable_x64(True):
    x = np.random.default_rng(5).integers(-2 ** 63, 2 ** 63 - 1, 256, dtype=np.int64)
    x[:3] = [0, -1, 1 << 40]
    pc, fs, lz, bc = counts_i64(x, interpret=True)
    np.testing.assert_array_equal(np.asarray(pc), _pop(x, 64))
    np.testing.assert_array_equal(np.asarray(fs), [((int(t) % 2 ** 64) & -(int(t) % 2 ** 64)).bit_length() for t in x])
    np.testing.assert_array_equal(np.asarray(lz), np.asarray(jax.lax.clz(jnp.asarray(x))))
    np.testing.assert_array_equal(np.asarray(bc), np.asarray(jnp.bitwise_count(jnp.asarray(x))))
    assert "mosaic_gpu" in _export(counts_i64, (x,))


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def popc_of_float(x, o):
  o[...] = ld.popc(x[...] * 2.0)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def popc_of_ref(x, o):
  o[...] = ld.popc(x)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def popc_of_float_followed(x, o):
  o[...] = ld.popc(ml.bitcast(x[...] * 2.0, jnp.int32))


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def popc_of_ref_followed(x, o):
  o[...] = ld.popc(x[...])


def test_libdevice_intrinsic_of_a_float_or_a_ref_says_what_to_write():
  """What the intrinsics do not take is a located MG003 in the call's words whose hint computes (it was MG002)."""
  f = S((256,), jnp.float32)
  _error(popc_of_float, [f], mg.KernelTypeError, "MG003", "o[...] = ld.popc(x[...] * 2.0)", "ld.popc",
         "ld.popc takes 32-bit integers (int32 or uint32) or int64, got float32 for x[...] * 2.0",
         "for its bits, ld.popc(ml.bitcast(x[...] * 2.0, jnp.int32)); for its value,"
         " ld.popc((x[...] * 2.0).astype(jnp.int32))")
  e = _error(popc_of_ref, [S((256,), U32)], mg.KernelTypeError, "MG003", "o[...] = ld.popc(x)", "ld.popc",
             "ld.popc works on register values, got x (GMEM ref)", "read it into registers first: ld.popc(x[...])")
  assert e.end_lineno == e.lineno
  x = np.linspace(-3, 3, 256).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(popc_of_float_followed(x, interpret=True)), _pop((x * 2).view(np.int32)))
  u = probe71b_hash.words(6, 256)
  np.testing.assert_array_equal(np.asarray(popc_of_ref_followed(u, interpret=True)), _pop(u))


@mg.mgpu_kernel(out_shape=lambda x: x)
def ml_popc(x, out):
  out[...] = ml.popc(x[...])


def test_a_missing_ml_popc_hints_the_intrinsic_that_computes():
  """`ml.popc` (no such ml function) hinted the SWAR steps with 'no population count here'; the hint names
  libdevice's popc and lax.population_count, which compute."""
  with pytest.raises(mg.UnknownNameError) as info:
    ml_popc.typed_ir(S((256,), U32))
  assert info.value.lineno == _line_of("out[...] = ml.popc(x[...])")
  assert info.value.hint.startswith("no ml.popc: libdevice's, ml.extra.cuda.libdevice.popc(x[...]) (CUDA's __popc:"
                                    " an int32 count), or jax.lax.population_count(x[...])")


# ---------------------------------------------------------------- class 2: a hash's constant past its type
@mg.mgpu_kernel(out_shape=lambda x: x)
def crc_step_where(x, o):
  c = x[...]
  o[...] = (c >> 1) ^ jnp.where(c & 1, 0xEDB88320, 0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def crc_step_where_followed(x, o):
  c = x[...]
  o[...] = (c >> 1) ^ jnp.where(c & 1, jnp.uint32(0xEDB88320), 0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def golden_gamma(x, o):
  o[...] = x[...] + 0x9E3779B97F4A7C15


@mg.mgpu_kernel(out_shape=lambda x: x)
def golden_gamma_followed(x, o):
  o[...] = x[...] + (0x9E3779B97F4A7C15 - 2**64)


def test_a_constant_past_its_type_hints_the_constant_that_computes():
  """A select of two Python ints (jnp's int32) holding CRC32's polynomial, and splitmix64's golden gamma (past
  int64) meeting int64, were MG003 whose hint said "use a constant in range, or a float": now the uint32 constant
  (a select of it is uint32, as jnp's) and the int64 of the uint64's bits, which wrap alike."""
  x = probe71b_hash.words(8, 256)
  _error(crc_step_where, [S((256,), U32)], mg.KernelTypeError, "MG003", "^ jnp.where(c & 1, 0xEDB88320, 0)",
         "jnp.where", "uses the Python int 3988292384, which does not fit in int32",
         "fits uint32: write it as a uint32 constant, jnp.uint32(0xedb88320)")
  want = (x >> np.uint32(1)) ^ np.where(x & 1, np.uint32(0xEDB88320), np.uint32(0))
  np.testing.assert_array_equal(np.asarray(crc_step_where_followed(x, interpret=True)), want)
  with jax.enable_x64(True):
    k = np.random.default_rng(9).integers(-2 ** 63, 2 ** 63 - 1, 256, dtype=np.int64)
    _error(golden_gamma, [S((256,), I64)], mg.KernelTypeError, "MG003", "o[...] = x[...] + 0x9E3779B97F4A7C15",
           "x[...] + 0x9E", "uses the Python int 11400714819323198485, which does not fit in int64",
           "write its bits as an int64, (0x9e3779b97f4a7c15 - 2**64), which is -7046029254386353131")
    with np.errstate(over="ignore"):
      want = (k.view(np.uint64) + np.uint64(0x9E3779B97F4A7C15)).view(np.int64)
    np.testing.assert_array_equal(np.asarray(golden_gamma_followed(k, interpret=True)), want)
    assert "mosaic_gpu" in _export(golden_gamma_followed, (k,))


# ---------------------------------------------------------------- class 3: chains deeper than Python's recursion limit
@mg.mgpu_kernel(out_shape=lambda m: S((m.shape[0], 2), U32))
def rounds_stacked(m, o, *, n: ml.constexpr):
  h = m[:, 0]
  for _ in ml.static_range(n):
    h = (h * 0x9E3779B1) ^ (h >> 15)
  o[...] = jnp.stack([h, h + 1], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def window_after_a_chain(x, o, *, n: ml.constexpr):
  off = ml.program_id(0)
  for _ in ml.static_range(n):
    off = off * 1 + 0
  o.at[ml.ds(off * 128, 128)][...] = x.at[ml.ds(off * 128, 128)][...] + 1


def _rounds_ref(m, n):
  h = m[:, 0].copy()
  with np.errstate(over="ignore"):
    for _ in range(n):
      h = (h * np.uint32(0x9E3779B1)) ^ (h >> np.uint32(15))
  return np.stack([h, h + np.uint32(1)], 1)


def test_rounds_unrolled_hundreds_deep_compile():
  """SHA-1's 80 rounds unrolled (the corpus's sha1_compress_block_rows) were MG900, a RecursionError: a vector
  computed by a chain of some thousand values and then broadcast (jnp.stack) was walked recursively by the index
  vectors' rematerialisation (remat._Index.pure, now a stack of its own), and a window's start computed by such a
  chain by the synchronisation pass's keys (compiling now raises Python's limit, frontend/deep_walks.py)."""
  m = probe71b_hash.words(10, (128, 2))
  np.testing.assert_array_equal(np.asarray(rounds_stacked(m, n=700, interpret=True)), _rounds_ref(m, 700))
  assert "mosaic_gpu" in _export(rounds_stacked, (m,), n=700)
  x = np.arange(512, dtype=np.float32)
  np.testing.assert_array_equal(np.asarray(window_after_a_chain(x, n=900, interpret=True)), x + 1)
  assert "mosaic_gpu" in _export(window_after_a_chain, (x,), n=900)


def test_a_chain_past_the_compilers_walks_is_a_located_error_with_what_to_write():
  """Past the raised limit the RecursionError is MG001 at the kernel (it was MG900, "a bug in mgpu_dsl"), whose
  hint keeps the loop a run-time one."""
  t = time.time()
  with pytest.raises(mg.UnsupportedSyntaxError) as info:
    window_after_a_chain.typed_ir(S((512,), jnp.float32), n=4000)
  e = info.value
  assert e.code == "MG001" and e.lineno == _line_of("def window_after_a_chain(x, o, *, n: ml.constexpr):")
  assert "depends on a chain of thousands of values" in e.message
  assert "keep the long loop a run-time loop" in e.hint
  assert time.time() - t < 60


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def window_after_a_run_time_chain(x, o, *, n: ml.constexpr):
  off = ml.program_id(0)
  for _ in range(n):
    off = off * 1 + 0
  o.at[ml.ds(off * 128, 128)][...] = x.at[ml.ds(off * 128, 128)][...] + 1


def test_the_deep_chains_hint_computes():
  x = np.arange(512, dtype=np.float32)
  np.testing.assert_array_equal(np.asarray(window_after_a_run_time_chain(x, n=4000, interpret=True)), x + 1)


# ---------------------------------------------------------------- class 4: a module's table of 65 to 256 numbers looked up
BYTE_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], np.uint8)
BIG_TABLE = np.arange(300, dtype=np.int32)


@mg.mgpu_kernel(out_shape=lambda b: b)
def byte_popcount_lut(b, o):
  o[...] = BYTE_POPCOUNT[b[...]]


@mg.mgpu_kernel(out_shape=lambda b: S(b.shape, I32))
def past_the_table_limit(b, o):
  o[...] = BIG_TABLE[b[...].astype(I32)]


@mg.mgpu_kernel(out_shape=lambda b, t: b)
def table_as_input(b, t, o):
  idx = b[...]
  o[...] = t[idx]


def test_a_module_table_of_256_numbers_is_looked_up():
  """A module's NumPy table indexed by a tensor (CRC32's 256 words, a byte's popcount) was MG003 past 64 numbers
  ("pass the table to the kernel as an input"), where `jnp.array([...])[idx]` of 256 numbers computed: a 1-D one
  looked up takes 256 numbers too, a register table (static_tables.outside); 300 keep the MG003 and its hint."""
  b = np.random.default_rng(12).integers(0, 256, 512).astype(np.uint8)
  np.testing.assert_array_equal(np.asarray(byte_popcount_lut(b, interpret=True)), BYTE_POPCOUNT[b])
  assert "mosaic_gpu" in _export(byte_popcount_lut, (b,))
  _error(past_the_table_limit, [S((512,), jnp.uint8)], mg.KernelTypeError, "MG003",
         "o[...] = BIG_TABLE[b[...].astype(I32)]", "BIG_TABLE[", "cannot index BIG_TABLE", "pass it to the kernel as"
         " an input array, t (BIG_TABLE as an argument), and gather from it: idx = b[...].astype(I32); t[idx]")
  b16 = b.astype(np.int32)
  np.testing.assert_array_equal(np.asarray(table_as_input(b16, BIG_TABLE, interpret=True)), BIG_TABLE[b16])


@pytest.mark.gpu
def test_gpu_classes():
  x = probe71b_bits.edge_words(3)
  y = probe71b_hash.words(4, 256)
  got = jax.jit(intrinsics_u32)(x, y)
  want = intrinsics_u32(x, y, interpret=True)
  for g, w in zip(got, want):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  m = probe71b_hash.words(10, (128, 2))
  np.testing.assert_array_equal(np.asarray(jax.jit(lambda a: rounds_stacked(a, n=700))(m)), _rounds_ref(m, 700))
  b = np.random.default_rng(12).integers(0, 256, 512).astype(np.uint8)
  np.testing.assert_array_equal(np.asarray(jax.jit(byte_popcount_lut)(b)), BYTE_POPCOUNT[b])
