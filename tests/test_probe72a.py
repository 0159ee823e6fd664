"""Probe 72a (dynamic programming, sequence-model and recurrence kernels as warp-ctc, k2, pytorch-crf, parasail,
cuDTW, pytorch-softdtw-cuda, Mamba / RWKV / xLSTM / minGRU and CUB users port them: CTC alpha / beta, Viterbi, HMM
forward-backward, CRF partition functions and marginals, edit distance / Needleman-Wunsch / Smith-Waterman / LCS by
rows and by anti-diagonal wavefronts, DTW and soft-DTW, beam-search steps, LSTM / GRU / minGRU / RWKV / xLSTM cells,
linear recurrences sequential and blocked, cumulative products, log-cumsum-exp, segmented scans, prefix sums as
offsets, Kalman updates): the corpus (tests/probe72a_dp.py, _align, _cells, _scans, _more, _extra), each kernel
checked in interpret mode against its NumPy reference and exported for CUDA; the classes fixed (design note 236),
each with a test that fails on the code before it."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
import probe72a_align
import probe72a_cells
import probe72a_dp
import probe72a_extra
import probe72a_more
import probe72a_scans
from probe72a_common import compare, export, normal, quiet, run_case

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32
MODULES = (probe72a_dp, probe72a_align, probe72a_cells, probe72a_scans, probe72a_more, probe72a_extra)
CASES = {name: c for m in MODULES for name, c in m.CASES.items()}


def _line_of(text, path=__file__):
  with open(path) as f:
    return next(n for n, line in enumerate(f, 1) if text in line)


def _error(kernel, specs, cls, code, line_text, col_text, message, hint=None, path=__file__):
  """The diagnostic of `kernel` at `specs`: its class, code, line and column (of col_text in the line), message."""
  with pytest.raises(cls) as info:
    kernel.typed_ir(*specs)
  e = info.value
  assert e.code == code, (e.code, str(e))
  assert e.filename == path and e.lineno == _line_of(line_text, path), (e.filename, e.lineno, str(e))
  with open(path) as f:
    assert e.col_offset == f.readlines()[e.lineno - 1].index(col_text), (e.col_offset, str(e))
  assert message in e.message, e.message
  if hint is not None:
    assert hint in e.hint, e.hint
  return e


def test_corpus_size():
  assert len(CASES) >= 60, len(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_matches_its_reference_and_builds(name):
  """Each kernel against its reference in interpret mode, then its Mosaic GPU module built for CUDA."""
  run_case(name, CASES[name])


GPU_TWINS = ["ctc_alpha_roll_logaddexp", "ctc_alpha_smem_runtime_lengths", "hmm_forward_backward_smem_alphas",
             "viterbi_decode_smem_backpointers", "crf_partition_masked_lengths", "levenshtein_rows_prefix_min",
             "levenshtein_wavefront_smem_table", "smith_waterman_affine_wavefront", "soft_dtw_wavefront_logsumexp",
             "lstm_layer_register_matmul", "elman_rnn_matvec_carry", "rwkv6_matrix_state_outer_products",
             "linrec_associative_scan_pairs", "linrec_blocked_carry_cumprod", "segmented_cumsum_head_flags",
             "stream_compaction_prefix_offsets", "beam_step_top_k_length_penalty", "ctc_greedy_decode_collapse",
             "mamba_selective_scan_16_states", "crf_forward_backward_marginals"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_TWINS)
def test_gpu_corpus_matches_its_reference(name):
  """The GPU twins, against the NumPy references at each case's tolerance."""
  kernel, make, ref, tol = CASES[name]
  args, kw = make(1)
  compare(name, quiet(lambda: jax.jit(lambda *a: kernel(*a, **kw))(*args)), ref(*args, **kw), tol)


# ---------------------------------------------------------------- class 1: a broadcast written on an expression
@mg.mgpu_kernel(out_shape=lambda A, E, v: v)
def backward_on_expression(A, E, v, o):
  a = A[...]
  beta = v[...]
  for t in range(E.shape[1]):
    beta = ml.logsumexp(a + (E[:, t] + beta)[None, :], axis=1)
  o[...] = beta


def _backward_np(A, E, v):
  b = v.astype(np.float64)
  for t in range(E.shape[1]):
    x = A + (E[:, t] + b)[None, :]
    b = x.max(1) + np.log(np.exp(x - x.max(1, keepdims=True)).sum(1))
  return b


def test_a_broadcast_written_on_an_expression_takes_a_copy():
  """An HMM's backward step, `ml.logsumexp(A + (logE[:, o] + beta)[None, :], axis=1)`, carries beta as a row
  statistic into its column use: MG204 ("beta is used as a row statistic ... and as a column vector"), though the
  same code with the sum named (`w = logE[:, o] + beta; ... w[None, :]`) computed, the use read through an SMEM
  copy. A broadcast written out on an expression is as written out as on a name now."""
  A, E, v = normal(1, (16, 16)), normal(2, (16, 6)), normal(3, (16,))
  got = backward_on_expression(A, E, v, interpret=True)
  np.testing.assert_allclose(np.asarray(got), _backward_np(A, E, v), rtol=1e-5, atol=1e-5)
  assert "mosaic_gpu" in export(backward_on_expression, (A, E, v))


# ---------------------------------------------------------------- class 2: masked neighbour reads of SMEM
@mg.mgpu_kernel(out_shape=lambda x: (x, x, x))
def smem_neighbours(x, left, right, shifted):
  s = ml.arange(x.shape[0])
  buf = ml.smem(x.shape, jnp.float32)
  buf[...] = x[...]
  left[...] = ml.load(buf.at[s - 1], mask=s >= 1, other=-5.0)
  right[...] = ml.load(buf.at[s + 2], mask=s + 2 < x.shape[0], other=-5.0)
  out = ml.smem(x.shape, jnp.float32)
  out[...] = ml.full(x.shape, -1.0, jnp.float32)
  ml.store(out.at[s + 1], x[...], mask=s + 1 < x.shape[0])
  shifted[...] = out[...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def smem_row_above(x, o):
  r = ml.arange(x.shape[0])[:, None]
  c = ml.arange(x.shape[1])[None, :]
  buf = ml.smem(x.shape, jnp.float32)
  buf[...] = x[...]
  o[...] = ml.load(buf.at[r - 1, c], mask=(r >= 1) & (c >= 0), other=0.0)


def test_masked_neighbour_reads_and_writes_of_smem_compute():
  """warp-ctc's alpha[s - 1] and alpha[s - 2] read back from SMEM under a mask, `ml.load(buf.at[s - 1], mask=s >=
  1, other=NEG)`, were MG203 ("ml.ds(-1, 32) is out of bounds ... windows start inside it"), though the same masked
  load of GMEM, and a masked gather of SMEM at any other indices, computed: a run whose window leaves the SMEM
  buffer at a static start is the masked gather (the masked scatter for a store) now."""
  x = normal(4, (64,))
  left, right, shifted = smem_neighbours(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(left), np.r_[-5.0, x[:-1]].astype(np.float32))
  np.testing.assert_array_equal(np.asarray(right), np.r_[x[2:], -5.0, -5.0].astype(np.float32))
  np.testing.assert_array_equal(np.asarray(shifted), np.r_[-1.0, x[:-1]].astype(np.float32))
  assert "mosaic_gpu" in export(smem_neighbours, (x,))
  t = normal(5, (16, 32))
  got = np.asarray(smem_row_above(t, interpret=True))
  np.testing.assert_array_equal(got, np.r_[np.zeros((1, 32), np.float32), t[:-1]])
  assert "mosaic_gpu" in export(smem_row_above, (t,))


# ---------------------------------------------------------------- class 3: masked SMEM gathers of cells not yet written
@mg.mgpu_kernel(out_shape=lambda x: x)
def diagonal_fill(x, o):
  """Each anti-diagonal of an (n, n) table (flat in SMEM) the sum of its upper and left neighbours plus x: the
  masked-off lanes' indices point at cells no diagonal has computed yet."""
  n = x.shape[0]
  T = ml.smem((n * n,), jnp.float32)
  k = ml.arange(n)
  ml.store(T.at[k], x[...])
  ml.store(T.at[k * n], x[...])
  for d in range(2, 2 * n - 1):
    j = d - k
    ok = (k >= 1) & (j >= 1) & (j < n)
    up = ml.load(T.at[(k - 1) * n + j], mask=ok, other=0.0)
    lf = ml.load(T.at[k * n + j - 1], mask=ok, other=0.0)
    ml.store(T.at[k * n + j], up + lf + x[...], mask=ok)
  o[...] = ml.load(T.at[(n - 1) * n + k])


@mg.mgpu_kernel(out_shape=lambda x: x)
def diagonal_read_too_early(x, o):
  n = x.shape[0]
  T = ml.smem((n * n,), jnp.float32)
  k = ml.arange(n)
  ml.store(T.at[k], x[...])
  o[...] = ml.load(T.at[n + k], mask=k < 4, other=0.0)


def _diagonal_np(x):
  n = len(x)
  T = np.zeros((n, n))
  T[0, :], T[:, 0] = x, x
  for i in range(1, n):
    for j in range(1, n):
      T[i, j] = T[i - 1, j] + T[i, j - 1] + x[i]
  return T[n - 1].astype(np.float32)


def test_a_masked_smem_gather_checks_only_what_its_mask_keeps():
  """A wavefront over a DP table in SMEM reads the neighbours of each anti-diagonal with masked gathers, whose
  masked-off lanes point at cells not computed yet: interpret mode reported MG601 ("D[34:66] is read in program (0,
  0, 0) before anything writes it") for elements the mask drops. It checks the kept elements now (a kept one that
  nothing wrote stays MG601, at its line)."""
  x = (normal(6, (32,)) * 0.01).astype(np.float32)
  np.testing.assert_allclose(np.asarray(diagonal_fill(x, interpret=True)), _diagonal_np(x), rtol=1e-4, atol=1e-6)
  assert "mosaic_gpu" in export(diagonal_fill, (x,))
  with pytest.raises(mg.UninitializedReadError) as info:
    diagonal_read_too_early(x, interpret=True)
  assert info.value.code == "MG601" and info.value.lineno == _line_of("o[...] = ml.load(T.at[n + k], mask=k < 4")
  assert "T[32:36] is read" in info.value.message, info.value.message


# ---------------------------------------------------------------- class 4: a matrix-vector product a loop carries
@mg.mgpu_kernel(out_shape=lambda W, b, h0: S((4,) + h0.shape, F32))
def rnn_matvec(W, b, h0, hs):
  h = h0[...]
  for t in range(4):
    h = jnp.tanh(W[...] @ h + b[...])
    hs[t, :] = h


def test_a_matrix_vector_product_carried_by_a_loop_computes():
  """The textbook RNN step `h = jnp.tanh(W @ h + b)` (and a Kalman filter's `x = F @ x`) of a (32, 32) W was MG204
  ("h is used as a row statistic ... and as a column vector"): the product's own broadcast of h, which the user
  never wrote, was taken for a NumPy alignment slip, so its use got no SMEM copy. It computes now."""
  W, b, h0 = normal(7, (32, 32), 0.3), normal(8, (32,), 0.1), normal(9, (32,))
  want, h = [], h0.astype(np.float64)
  for _ in range(4):
    h = np.tanh(W @ h + b)
    want.append(h)
  np.testing.assert_allclose(np.asarray(rnn_matvec(W, b, h0, interpret=True)), np.array(want), rtol=1e-5, atol=1e-5)
  assert "mosaic_gpu" in export(rnn_matvec, (W, b, h0))


# ---------------------------------------------------------------- refusals kept: their diagnostics
@mg.mgpu_kernel(out_shape=lambda em, tr, lens: S((em.shape[0],), F32), grid=lambda em, tr, lens: (em.shape[0] // 4,))
def crf_three_d(em, trans, lens, logz):
  p = ml.program_id(0)
  tr = trans[...]
  n = ml.load(lens.at[p * 4 + ml.arange(4)])
  sc = em[ml.ds(p * 4, 4), 0, :]
  for t in range(1, em.shape[1]):
    x = sc[:, :, None] + tr[None, :, :] + em[ml.ds(p * 4, 4), t, :][:, None, :]
    sc = jnp.where((t < n)[:, None], jax.nn.logsumexp(x, axis=1), sc)
  logz[ml.ds(p * 4, 4)] = jax.nn.logsumexp(sc, axis=1)


def test_a_three_d_logsumexp_of_four_rows_says_to_take_them_in_a_loop():
  """A batched CRF normaliser of 4 sequences a program, its (4, K, K) broadcast reduced along the middle axis and
  selected by the (4,) lengths' mask, stays MG204 at the reduction (the same with 8 sequences a program computes:
  the corpus's crf_partition_eight_a_program_3d; a 4-element vector has no register layout of its own). The hint's
  form, each sequence's (K, K) tile in an ml.static_range loop, is the corpus's crf_partition_four_a_program."""
  _error(crf_three_d, [S((8, 6, 16), F32), S((16, 16), F32), S((8,), I32)], mg.LayoutError, "MG204",
         "sc = jnp.where((t < n)[:, None], jax.nn.logsumexp(x, axis=1), sc)", "jax.nn.logsumexp",
         "is reduced or broadcast along an axis; that works on 2-D tiles (and vectors), not on 3-D tensors",
         "in an ml.static_range loop")
  run_case("crf_partition_four_a_program", CASES["crf_partition_four_a_program"], do_export=False)


# ---------------------------------------------------------------- GPU twins of the classes
@pytest.mark.gpu
def test_gpu_classes():
  A, E, v = normal(1, (16, 16)), normal(2, (16, 6)), normal(3, (16,))
  np.testing.assert_allclose(np.asarray(jax.jit(backward_on_expression)(A, E, v)), _backward_np(A, E, v), rtol=1e-4,
                             atol=1e-4)
  x = normal(4, (64,))
  left, right, shifted = jax.jit(smem_neighbours)(x)
  np.testing.assert_array_equal(np.asarray(left), np.r_[-5.0, x[:-1]].astype(np.float32))
  np.testing.assert_array_equal(np.asarray(shifted), np.r_[-1.0, x[:-1]].astype(np.float32))
  d = (normal(6, (32,)) * 0.01).astype(np.float32)
  np.testing.assert_allclose(np.asarray(jax.jit(diagonal_fill)(d)), _diagonal_np(d), rtol=1e-4, atol=1e-6)
  W, b, h0 = normal(7, (32, 32), 0.3), normal(8, (32,), 0.1), normal(9, (32,))
  assert np.isfinite(np.asarray(jax.jit(rnn_matvec)(W, b, h0))).all()


# ---------------------------------------------------------------- a 2-D DP table gathered along a wavefront
@mg.mgpu_kernel(out_shape=lambda x: x)
def diagonal_fill_2d(x, o):
  n = x.shape[0]
  T = ml.smem((n, n), jnp.float32)
  k = ml.arange(n)
  T[0, :] = x[...]
  T[:, 0] = x[...]
  for d in range(2, 2 * n - 1):
    j = jnp.clip(d - k, 1, n - 1)
    ok = (k >= 1) & (d - k >= 1) & (d - k < n)
    up = ml.load(T.at[k - 1, j], mask=ok, other=0.0)
    ml.store(T.at[k, j], up + x[...], mask=ok)
  o[...] = T[n - 1, :]


def test_a_two_d_table_gathered_before_it_is_filled_says_to_keep_it_flat():
  """The (n, n) form of diagonal_fill: a gather of a 2-D SMEM buffer reads all of it, so the wavefront's first
  diagonal reads cells no diagonal wrote (MG601, kept: its hint said "fill T first", which does not say what to
  write). The hint keeps the table flat, diagonal_fill's form above, which computes."""
  _error(diagonal_fill_2d, [S((32,), F32)], mg.UninitializedReadError, "MG601",
         "up = ml.load(T.at[k - 1, j], mask=ok, other=0.0)", "ml.load",
         "is read before anything writes it: a gather from the 2-D SMEM buffer T reads all of it",
         "keep the table flat, T = ml.smem((1024,), ...), and gather and scatter at T.at[i * 32 + j]")
