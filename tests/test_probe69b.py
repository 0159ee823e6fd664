"""Probe 69b (scientific and HPC kernels as CUDA and Triton users port them: CSR/ELL/SELL/COO/blocked-ELL SpMV and
SpMM, GEMV, n-body, k-means, FFT stages, multi-block scans, histograms, bitonic sorts and merges, transposes, batched
Cholesky and triangular solves, Jacobi and red-black Gauss-Seidel, Monte Carlo with hash RNGs, Floyd-Warshall, bloom
filters, segmented reductions): the corpus (tests/probe69b_sparse.py, probe69b_hpc.py, probe69b_bits.py,
probe69b_more.py), each kernel checked in interpret mode against its NumPy reference and exported
for CUDA; and the refusals the probe met, each at the user's line with a hint that works."""
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
import probe69b_sparse

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32
CASES = {**probe69b_sparse.CASES, **probe69b_hpc.CASES, **probe69b_bits.CASES, **probe69b_more.CASES}


def _relerr(got, want):
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  assert got.shape == want.shape, (got.shape, want.shape)
  return float(np.max(np.abs(got - want)) / max(1e-6, float(np.max(np.abs(want)))))


def _compare(name, got, want, tol):
  got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
  assert len(got) == len(want), name
  for g, w in zip(got, want):
    if tol == 0:                     # integer paths, sorts, min-plus, transposes: bit for bit
      np.testing.assert_array_equal(np.asarray(g), np.asarray(w).astype(np.asarray(g).dtype), err_msg=name)
    else:
      assert _relerr(g, w) <= tol, (name, _relerr(g, w))


def _line_of(text):
  """The line of this file that holds `text` (where a diagnostic must point)."""
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line)


def _specs(args):
  return [S(np.shape(a), a.dtype) for a in args]


def test_corpus_size():
  assert len(CASES) >= 60, len(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_matches_its_reference_and_builds(name):
  """Each kernel against its reference in interpret mode, then its Mosaic GPU module built for CUDA (a verifier error
  or an InternalError there fails the test)."""
  kernel, make, ref, tol = CASES[name]
  args, kw = make(0)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.KernelWarning)
    _compare(name, kernel(*args, **kw, interpret=True), ref(*args, **kw), tol)
    jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*_specs(args)).mlir_module()


GPU_TWINS = ["csr_spmv_row_per_program", "blocked_ell_spmm_smem_skip", "gemv_transposed_pipelined_tma",
             "batched_cholesky_16x16", "nbody_soa_rsqrt", "kmeans_centroid_sums_atomics", "fft_radix2_all_stages",
             "prefix_sum_three_passes_int32", "histogram_smem_private_bytes", "gauss_seidel_red_black_in_place",
             "merge_path_binary_search_then_serial", "bloom_filter_insert_and_query", "floyd_warshall_diagonal_smem"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_TWINS)
def test_gpu_corpus_matches_its_reference(name):
  """The GPU twins (the SMEM gathers among them, whose lowering is new): integer results bit for bit; float ones within
  the tolerance (the GPU's rsqrt, sin and cos are approximations a few ulp off NumPy's)."""
  kernel, make, ref, tol = CASES[name]
  args, kw = make(1)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.KernelWarning)
    got = jax.jit(lambda *a: kernel(*a, **kw))(*args)
  _compare(name, got, ref(*args, **kw), tol if tol == 0 else max(tol, 1e-4))


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
