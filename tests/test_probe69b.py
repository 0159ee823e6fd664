"""Probe 69b (scientific and HPC kernels as CUDA and Triton users port them: CSR/ELL/SELL/COO/blocked-ELL SpMV and
SpMM, GEMV, n-body, k-means, FFT stages, multi-block scans, histograms, bitonic sorts and merges, transposes, batched
Cholesky and triangular solves, Jacobi and red-black Gauss-Seidel, Monte Carlo with hash RNGs, Floyd-Warshall, bloom
filters, segmented reductions): the corpus (tests/probe69b_sparse.py, probe69b_hpc.py, probe69b_bits.py,
probe69b_more.py, probe69b_smem.py), each kernel checked in interpret mode against its NumPy reference and exported
for CUDA; the classes fixed (design note 228): SMEM buffers indexed by tensors of indices, read (gathers) and written
(plain scatters), and SMEM windows no register tensor holds (a halo tile's interior); and the refusals the probe
met, each at the user's line with a hint that works."""
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
import probe69b_bits
import probe69b_hpc
import probe69b_more
import probe69b_smem
import probe69b_sparse
import probe69b_sweep

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32
CASES = {**probe69b_sparse.CASES, **probe69b_hpc.CASES, **probe69b_bits.CASES, **probe69b_more.CASES,
         **probe69b_smem.CASES}


def _compare(name, got, want, tol):
  """Each output within `tol` of its reference's largest magnitude (0: equal, as integer paths, sorts, min-plus
  and transposes are)."""
  got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
  assert len(got) == len(want), name
  for g, w in zip(got, want):
    g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
    assert g.shape == w.shape, (name, g.shape, w.shape)
    np.testing.assert_allclose(g, w, rtol=0, atol=tol * max(1e-6, float(np.max(np.abs(w), initial=0))), err_msg=name)


def _line_of(text):
  """The line of this file that holds `text` (where a diagnostic must point)."""
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line)


def _specs(args):
  return [S(np.shape(a), a.dtype) for a in args]


def test_corpus_size():
  assert len(CASES) >= 60, len(CASES)


def _quiet(run):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.KernelWarning)
    return run()


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_matches_its_reference_and_builds(name):
  """Each kernel against its reference in interpret mode, then its Mosaic GPU module built for CUDA (a verifier error
  or an InternalError there fails the test)."""
  kernel, make, ref, tol = CASES[name]
  args, kw = make(0)
  _compare(name, _quiet(lambda: kernel(*args, **kw, interpret=True)), ref(*args, **kw), tol)
  _quiet(lambda: jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*_specs(args)).mlir_module())


GPU_TWINS = ["csr_spmv_row_per_program", "blocked_ell_spmm_smem_skip", "gemv_transposed_pipelined_tma",
             "batched_cholesky_16x16", "nbody_soa_rsqrt", "kmeans_centroid_sums_atomics", "fft_radix2_all_stages",
             "prefix_sum_three_passes_int32", "histogram_smem_private_bytes", "gauss_seidel_red_black_in_place",
             "merge_path_binary_search_then_serial", "bloom_filter_insert_and_query", "floyd_warshall_diagonal_smem",
             "bitonic_sort_in_smem", "bitonic_sort_in_smem_int32", "fft_128_in_smem",
             "lookup_table_staged_in_smem_masked", "rows_of_a_staged_tile", "points_of_a_staged_tile",
             "smem_gather_in_a_run_time_loop", "smem_histogram_read_back_at_keys", "counting_sort_scatter_into_smem",
             "transpose_through_a_flat_smem_scatter", "rows_scattered_into_smem_by_a_permutation",
             "stream_compaction_masked_store_into_smem", "ell_spmv_x_cached_in_smem", "ell_spmv_x_cached_in_smem_128k",
             "jacobi_halo_odd_smem_windows_72",
             "jacobi_halo_odd_smem_windows_40", "laplacian_1d_odd_smem_windows", "odd_smem_window_row_sums_and_maxima"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_TWINS)
def test_gpu_corpus_matches_its_reference(name):
  """The GPU twins (the SMEM gathers among them, whose lowering is new): integer results bit for bit; float ones within
  the tolerance (the GPU's rsqrt, sin and cos are approximations a few ulp off NumPy's)."""
  kernel, make, ref, tol = CASES[name]
  args, kw = make(1)
  got = _quiet(lambda: jax.jit(lambda *a: kernel(*a, **kw))(*args))
  _compare(name, got, ref(*args, **kw), tol if tol == 0 else max(tol, 1e-4))


# ---------------------------------------------------------------- gathers from SMEM buffers (the class fixed)
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def partner_exchange(x, o):
  b = ml.smem(x.shape, x.dtype)
  ml.copy(x, b)
  i = ml.arange(0, x.shape[0])
  o[...] = b[i ^ 1]


def test_an_smem_buffer_gathered_by_a_tensor_of_indices_reads_its_elements():
  """`b[i ^ 1]` of an SMEM buffer was MG003 "only GMEM refs gather" (a bitonic stage, an FFT's partner): it is the
  gather from the buffer's whole read now, ordered after the TMA copy that fills it."""
  x = np.arange(128, dtype=np.float32) * 3 - 7
  np.testing.assert_array_equal(np.asarray(partner_exchange(x, interpret=True)), x[np.arange(128) ^ 1])
  ir = str(partner_exchange.typed_ir(S((128,), F32)))
  assert "scratchgather" in ir and "waitload" in ir
  assert ir.index("waitload") < ir.index("scratchgather")
  assert "relayoutstore" not in ir and "load ref=" not in ir      # (a whole 1-D buffer: read at the places alone)
  jax.export.export(jax.jit(partner_exchange), platforms=["cuda"])(S((128,), F32)).mlir_module()


def test_a_128_kib_vector_cached_in_smem_is_gathered_in_place():
  """x of 32768 float32 elements staged in SMEM for an ELL SpMV: gathered through the register gather's scratch it
  needed twice its bytes (MG402: 256 KiB) and a whole read a trip; each element is read at its place now."""
  kernel, make, ref, _ = CASES["ell_spmv_x_cached_in_smem_128k"]
  args, _ = make(0)
  ir = str(kernel.typed_ir(*_specs(args)))
  assert ir.count("smemalloc") == 1 and "scratchgather scratch=" in ir and "relayoutstore" not in ir


@pytest.mark.parametrize("index", ["rows", "points", "negative", "masked", "view"])
def test_smem_gathers_take_numpys_index_forms_with_jnps_clamping(index):
  """Every form the register gather takes: rows `b[ids, :]`, points `b[r, c]`, negative ids from the end (jnp's),
  out-of-range ids clamped, a masked `ml.load(b.at[ids], mask=, other=)`, and a gather from a window of the buffer."""
  t = np.random.default_rng(3).standard_normal((8, 32)).astype(np.float32)
  ids = np.random.default_rng(4).integers(-12, 12, 128).astype(np.int32)

  @mg.mgpu_kernel(out_shape=lambda t, ids: S((128, 32) if index == "rows" else (128,), F32), grid=(1,))
  def k(t, ids, o):
    b = ml.smem(t.shape, F32)
    ml.copy(t, b)
    i = ids[...]
    if index == "rows":
      o[...] = b[ml.maximum(i, 0) % 8, :]
    elif index == "points":
      o[...] = b[ml.maximum(i, 0) % 8, (i + 12) % 32]
    elif index == "negative":
      o[...] = b.at[3][i]
    elif index == "masked":
      o[...] = ml.load(b.at[5, i], mask=i >= 0, other=-1.0)
    else:
      o[...] = b.at[ml.ds(2, 4), ml.ds(0, 32)][ml.maximum(i, 0) % 4, 7]
  got = np.asarray(k(t, ids, interpret=True))
  row = lambda r: t[r][np.clip(np.where(ids < 0, ids + 32, ids), 0, 31)]
  want = {"rows": t[np.maximum(ids, 0) % 8], "points": t[np.maximum(ids, 0) % 8, (ids + 12) % 32],
          "negative": row(3), "masked": np.where(ids >= 0, row(5), -1.0),
          "view": t[2:6][np.maximum(ids, 0) % 4, 7]}[index]
  np.testing.assert_array_equal(got, want)
  jax.export.export(jax.jit(k), platforms=["cuda"])(S(t.shape, F32), S(ids.shape, I32)).mlir_module()


@pytest.mark.parametrize("seed", range(40))
def test_the_sweep_of_smem_gathers_and_scatters_matches_jnp(seed):
  """Random dtypes, buffers, index lengths and forms (probe69b_sweep.py), each against jnp's result on the same
  inputs (a scatter whose places repeat lands one value: only its build is checked), and built for CUDA. (Seeds 47
  and 56 of the probe's 60 gather rows of a (4, 16) buffer of 16- or 8-bit elements: MG204 at the gather, whose whole
  read no register tensor holds; left.)"""
  k, args, want, kind, _, _, _ = probe69b_sweep.make(seed)
  got = _quiet(lambda: k(*args, interpret=True))
  if not (kind in ("scatter", "scatter_masked") and len(set(args[1].tolist())) != len(args[1])):
    np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64))
  _quiet(lambda: jax.export.export(jax.jit(k), platforms=["cuda"])(*_specs(args)).mlir_module())


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def transposed_gather(x, o):
  b = ml.smem(x.shape, x.dtype)
  ml.copy(x, b)
  i = ml.arange(0, x.shape[0])
  o[...] = b.T[(i * 3) % x.shape[0], :]


def test_a_gather_from_a_transposed_view_of_smem_reads_the_transpose():
  x = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
  np.testing.assert_array_equal(np.asarray(transposed_gather(x, interpret=True)), x.T[(np.arange(64) * 3) % 64])


# ---------------------------------------------------------------- plain scatters into SMEM buffers (the class fixed)
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def smem_scatter_store(x, o):
  b = ml.smem(x.shape, x.dtype)
  i = ml.arange(0, x.shape[0])
  v = x[...]
  b[i ^ 1] = v
  for _ in range(2):
    w = b[...]
    b[(i + 1) % x.shape[0]] = w * 2.0
  ml.copy(b, o)


def test_a_plain_scatter_into_smem_stores_at_its_places_between_barriers():
  """`b[ids] = v` of an SMEM buffer was MG003 ("an index here must be an integer scalar"): it is the plain scatter
  GMEM outputs take (ScatterUpdate of kind set), its CTA's threads storing at the places; the sync pass puts a
  barrier between a read of the buffer and a scatter over it (other threads' elements), and the scatter fills the
  buffer for interpret mode's reads."""
  x = np.arange(128, dtype=np.float32) - 5
  got = np.asarray(smem_scatter_store(x, interpret=True))
  np.testing.assert_array_equal(got, np.roll(x[np.arange(128) ^ 1], 2) * 4)
  ir = str(smem_scatter_store.typed_ir(S((128,), F32)))
  body = ir[ir.index("body("):]
  assert "scatterupdate kind=set" in body and "barrier" in body[:body.index("scatterupdate")]
  jax.export.export(jax.jit(smem_scatter_store), platforms=["cuda"])(S((128,), F32)).mlir_module()


@mg.mgpu_kernel(out_shape=lambda x, p: x, grid=(1,))
def partial_scatter(x, p, o):
  b = ml.smem(x.shape, x.dtype)
  b[p[...]] = x[...]
  ml.copy(b, o)


def test_a_scatter_that_leaves_elements_unwritten_is_mg601_in_interpret_mode_at_the_read():
  """Which elements a scatter writes is data: the proofs leave it to interpret mode, which reports the read of the
  elements no index named (SMEM starts with garbage), as it does for a GMEM output's."""
  x = np.arange(128, dtype=np.float32)
  p = np.arange(128, dtype=np.int32) // 2 * 2
  with pytest.raises(mg.KernelError) as e:
    partial_scatter(x, p, interpret=True)
  err = e.value
  assert err.code == "MG601" and err.lineno == _line_of("b[p[...]] = x[...]") + 1 and err.col_offset == 2
  assert "b[1:2] is read in program (0, 0, 0) before anything writes it" in str(err) and "fill b first" in err.hint
  np.testing.assert_array_equal(np.asarray(partial_scatter(x, np.arange(128, dtype=np.int32)[::-1].copy(),
                                                           interpret=True)), x[::-1])


@mg.mgpu_kernel(out_shape=lambda a, b, ids: S((64, 64), F32), grid=(1,))
def scatter_into_dot_operand(a, b, ids, o):
  a_s = ml.smem((64, 64), jnp.float16)
  b_s = ml.smem((64, 64), jnp.float16)
  ml.copy(b, b_s)
  a_s[ids[...], :] = a[...]
  o[...] = ml.dot(a_s, b_s)


@mg.mgpu_kernel(out_shape=lambda a, b, ids: S((64, 64), F32), grid=(1,))
def scatter_then_copy_into_dot_operand(a, b, ids, o):
  a_s = ml.smem((64, 64), jnp.float16)
  b_s = ml.smem((64, 64), jnp.float16)
  h = ml.smem((64, 64), jnp.float16)
  ml.copy(b, b_s)
  h[ids[...], :] = a[...]
  a_s[...] = h[...]
  o[...] = ml.dot(a_s, b_s)


def test_a_scatter_into_a_dot_operand_is_mg003_whose_hint_computes():
  """The tensor cores' operand buffers are tiled; a scatter stores at logical addresses: the error names the plain
  scatter (not an atomic one), and its hint (a buffer of its own, copied) computes the product."""
  specs = (S((64, 64), jnp.float16), S((64, 64), jnp.float16), S((64,), I32))
  with pytest.raises(mg.KernelError) as e:
    scatter_into_dot_operand.typed_ir(*specs)
  err = e.value
  assert err.code == "MG003" and err.lineno == _line_of("a_s[ids[...], :] = a[...]") and err.col_offset == 2
  assert "a plain scatter stores into untiled SMEM buffers" in str(err)
  assert "h = ml.smem((64, 64), jnp.float16)" in err.hint and "a_s[...] = h[...]" in err.hint
  r = np.random.default_rng(5)
  a = r.standard_normal((64, 64)).astype(np.float16)
  b = r.standard_normal((64, 64)).astype(np.float16)
  ids = r.permutation(64).astype(np.int32)
  pa = np.zeros_like(a)
  pa[ids] = a
  got = scatter_then_copy_into_dot_operand(a, b, ids, interpret=True)
  _compare("the hint's form", got, pa.astype(np.float32) @ b.astype(np.float32), 1e-3)
  jax.export.export(jax.jit(scatter_then_copy_into_dot_operand), platforms=["cuda"])(*specs).mlir_module()


@mg.mgpu_kernel(out_shape=lambda x, p: x, grid=(1,))
def exchange_into_smem(x, p, o):
  b = ml.smem(x.shape, x.dtype)
  b[...] = ml.zeros(x.shape, x.dtype)
  ml.atomic_xchg(b.at[p[...]], x[...])
  ml.copy(b, o)


@mg.mgpu_kernel(out_shape=lambda x, p: x, grid=(1,))
def exchange_into_smem_as_hinted(x, p, o):
  b = ml.smem(x.shape, x.dtype)
  b[...] = ml.zeros(x.shape, x.dtype)
  b[p[...]] = x[...]
  ml.copy(b, o)


def test_an_atomic_exchange_scattered_into_smem_computes_as_the_plain_scatter():
  """ml.atomic_xchg at computed places of an SMEM buffer was MG003 here (its hint: the plain scatter); since probe 70a
  (design note 230) it is the scatter's `atom.exch` per element, which at distinct places is the plain scatter the
  hint wrote."""
  x = np.arange(128, dtype=np.float32) + 1
  p = np.random.default_rng(9).permutation(128).astype(np.int32)
  want = np.zeros(128, np.float32)
  want[p] = x
  np.testing.assert_array_equal(np.asarray(exchange_into_smem(x, p, interpret=True)), want)
  np.testing.assert_array_equal(np.asarray(exchange_into_smem_as_hinted(x, p, interpret=True)), want)
  jax.export.export(jax.jit(exchange_into_smem), platforms=["cuda"])(S((128,), F32), S((128,), I32)).mlir_module()


# ---------------------------------------------------------------- SMEM windows no register tensor holds (the class fixed)
def _window_kernel(H, W, r0, c0, h, w):
  @mg.mgpu_kernel(out_shape=lambda u: S((h, w), F32), grid=(1,))
  def odd_window(u, o):
    t = ml.smem((H, W), F32)
    ml.copy(u, t)
    o[...] = t.at[ml.ds(r0, h), ml.ds(c0, w)][...] * 2.0
  return odd_window


@pytest.mark.parametrize("H, W, r0, c0, h, w", [(18, 72, 1, 1, 16, 66), (18, 72, 0, 1, 16, 70), (34, 40, 1, 1, 32, 38),
                                                (18, 32, 1, 1, 16, 30), (18, 72, 1, 4, 16, 60), (10, 72, 1, 1, 8, 70),
                                                (6, 136, 1, 1, 4, 130)])
def test_an_odd_smem_window_is_read_through_the_rows_it_lies_in(H, W, r0, c0, h, w):
  """A window of h x w elements no register tile holds was MG204 (its hint grew the buffer); it is read through the
  buffer's whole rows it lies in (copied a row at a time into a padded scratch where those rows are no tile either)
  and sliced in registers."""
  u = np.random.default_rng(H * W + c0).standard_normal((H, W)).astype(np.float32)
  k = _window_kernel(H, W, r0, c0, h, w)
  np.testing.assert_array_equal(np.asarray(k(u, interpret=True)), u[r0:r0 + h, c0:c0 + w] * 2)
  ir = str(k.typed_ir(S((H, W), F32)))
  if h * W % 128 == 0:               # the rows read whole, then sliced
    assert re.search(rf"tensor<{h}x{W}, float32[^>]*> = load ref=%\d+ keep=", ir), ir
  else:                              # the rows copied into their padded scratch, read whole
    assert f"ref<SMEM, {-(-h // 4) * 4}x{-(-W // 32) * 32}, float32> = smemalloc" in ir, ir
  jax.export.export(jax.jit(k), platforms=["cuda"])(S((H, W), F32)).mlir_module()


def test_an_odd_smem_window_of_rows_no_vector_holds_stays_mg204_at_its_line():
  """Rows of 68 float32 elements are no register vector (a multiple of 8) nor with 16 of them a tile: the read keeps
  MG204, at the window's read, with the hint that grows the buffer."""
  k = _window_kernel(18, 68, 1, 1, 16, 66)
  with pytest.raises(mg.KernelError) as e:
    k.typed_ir(S((18, 68), F32))
  err = e.value
  assert err.code == "MG204" and err.lineno == _line_of("o[...] = t.at[ml.ds(r0, h), ml.ds(c0, w)][...] * 2.0")
  assert err.col_offset == 13 and "(16, 66)" in str(err) and "allocate t as ml.smem((18, 97)" in err.hint


# ---------------------------------------------------------------- refusals met by the corpus (legitimate, hinted)
@mg.mgpu_kernel(out_shape=lambda a, x: S((a.shape[1],), F32), grid=lambda a, x: (a.shape[1] // 64,))
def gemv_t_register_loads(a, x, y):
  j = ml.program_id(0)
  acc = ml.zeros((64,), F32)
  for k in ml.range(a.shape[0] // 64, stages=2):
    acc += ml.sum(a.at[ml.ds(k * 64, 64), ml.ds(j * 64, 64)][...] * x.at[ml.ds(k * 64, 64)][...][:, None], axis=0)
  y.at[ml.ds(j * 64, 64)][...] = acc


def test_a_pipelined_gemv_of_register_loads_is_mg502_whose_hint_names_the_tma_form():
  """stages= over loads into registers has nothing to pipeline; the hint's form (gemv_transposed_pipelined_tma in
  the corpus) compiles and matches."""
  with pytest.raises(mg.KernelError) as e:
    gemv_t_register_loads.typed_ir(S((256, 128), F32), S((256,), F32))
  err = e.value
  assert err.code == "MG502" and err.lineno == _line_of("for k in ml.range(a.shape[0] // 64, stages=2):")
  assert err.col_offset == 2 and "ml.copy(gmem.at[...k...], buf)" in err.hint
  assert "gemv_transposed_pipelined_tma" in CASES


@mg.mgpu_kernel(out_shape=lambda u: S((u.shape[0] - 2, u.shape[1] - 2), F32), grid=lambda u: ((u.shape[0] - 2) // 16,))
def jacobi_halo_66(u, o):
  t = ml.smem((18, u.shape[1]), F32)
  ml.copy(u.at[ml.ds(ml.program_id(0) * 16, 18), :], t)
  o.at[ml.ds(ml.program_id(0) * 16, 16), :][...] = t.at[ml.ds(1, 16), ml.ds(1, u.shape[1] - 2)][...]


def test_a_halo_of_66_float32_columns_is_no_tma_window_and_the_hint_reads_it_into_registers():
  """66 x 4 bytes is no multiple of 16: MG401 at the copy, whose hint's register read (jacobi_register_tile_slices in
  the corpus) computes the sweep."""
  with pytest.raises(mg.KernelError) as e:
    jacobi_halo_66.typed_ir(S((66, 66), F32))
  err = e.value
  assert err.code == "MG401" and err.lineno == _line_of("ml.copy(u.at[ml.ds(ml.program_id(0) * 16, 18), :], t)") and err.col_offset == 2
  assert "264" in str(err) and "u.at[ml.ds(ml.program_id(0) * 16, 18), :][...]" in err.hint
  assert "jacobi_register_tile_slices" in CASES


def test_a_float64_input_is_mg006_naming_float32():
  """Reductions CUDA writes in float64: kernels have no float64 (Hopper's FP64 has no place in these kernels); the
  refusal is at the call, with the conversion and the supported dtypes (Kahan sums in the corpus keep the accuracy)."""
  x = np.random.default_rng(0).random((128, 64))
  with jax.enable_x64(True):
    with pytest.raises(mg.KernelError) as e:
      probe69b_bits.row_sums_f64(x, interpret=True)
  err = e.value
  assert err.code == "MG006" and "float64" in str(err) and "x.astype(np.float32)" in err.hint
  assert "kahan_row_sums_f32" in CASES
