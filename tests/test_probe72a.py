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
import probe72a_odd
import probe72a_scans
from probe72a_common import compare, export, normal, quiet, run_case

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32
MODULES = (probe72a_dp, probe72a_align, probe72a_cells, probe72a_scans, probe72a_more, probe72a_extra, probe72a_odd)
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
             "mamba_selective_scan_16_states", "crf_forward_backward_marginals", "viterbi_decode_9_tags",
             "crf_partition_masked_9_tags", "hmm_forward_scaled_9_states", "ctc_alpha_roll_11_states",
             "hmm_forward_backward_9_states"]


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


@mg.mgpu_kernel(out_shape=lambda x: (S((4,) + x.shape, F32), S((4,) + x.shape, F32)))
def smem_shifts_at_run_time(x, reads, writes):
  s = ml.arange(x.shape[0])
  buf = ml.smem(x.shape, jnp.float32)
  buf[...] = x[...]
  for k in range(4):
    idx = s + k - 2
    reads[k, :] = ml.load(buf.at[idx], mask=(idx >= 0) & (idx < x.shape[0]), other=0.0)
    out = ml.smem(x.shape, jnp.float32)
    out[...] = ml.zeros(x.shape, jnp.float32)
    ml.store(out.at[idx], x[...], mask=(idx >= 0) & (idx < x.shape[0]))
    writes[k, :] = out[...]


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
  reads, writes = smem_shifts_at_run_time(x, interpret=True)     # (the shift a loop index: the mask bounds the run)
  for k in range(4):
    j = np.arange(64) + k - 2
    ok = (j >= 0) & (j < 64)
    np.testing.assert_array_equal(np.asarray(reads)[k], np.where(ok, x[np.clip(j, 0, 63)], 0).astype(np.float32))
    want = np.zeros(64, np.float32)
    want[j[ok]] = x[ok]
    np.testing.assert_array_equal(np.asarray(writes)[k], want)
  assert "mosaic_gpu" in export(smem_shifts_at_run_time, (x,))
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


# ---------------------------------------------------------------- a 3-D statistic of four rows (class 5 too)
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


def test_a_three_d_logsumexp_of_four_rows_computes():
  """A batched CRF normaliser of 4 sequences a program, its (4, K, K) broadcast reduced along the middle axis and
  selected by the (4,) lengths' mask, was MG204 at the reduction ("... not on 3-D tensors"), though the same with 8
  sequences a program computed: the (4,) mask and the carry are padded, and the carry (as class 5's) ended the
  padded trace. It computes now (the corpus keeps the static-range form the MG204's hint wrote, too)."""
  em, tr = normal(14, (8, 6, 16)), normal(15, (16, 16))
  lens = np.array([6, 2, 5, 4, 3, 6, 6, 1], np.int32)
  want = probe72a_dp.crf_logz_np(em, tr, np.zeros(16, np.float32), np.zeros(16, np.float32), lens)
  np.testing.assert_allclose(np.asarray(crf_three_d(em, tr, lens, interpret=True)), want, rtol=1e-5, atol=1e-5)
  assert "mosaic_gpu" in export(crf_three_d, (em, tr, lens))


# ---------------------------------------------------------------- class 5: few states carried by a loop
@mg.mgpu_kernel(out_shape=lambda A, v: v)
def chain_of_nine(A, v, o):
  a = v[...]
  for t in range(3):
    a = ml.logsumexp(a[:, None] + A[...], axis=0)
  o[...] = a


@mg.mgpu_kernel(out_shape=lambda A, v: (v, S((3,) + v.shape, I32)))
def nine_with_backpointers(A, v, o, bp_out):
  bp = ml.smem((3,) + v.shape, jnp.int32)
  a = v[...]
  for t in range(3):
    x = a[:, None] + A[...]
    bp[t, :] = jnp.argmax(x, axis=0).astype(jnp.int32)
    a = jnp.max(x, axis=0)
  o[...] = a
  bp_out[...] = bp[...]


def test_a_loop_carrying_a_few_states_computes():
  """A CRF's 9 tags (CoNLL NER), an HMM of 3, 5, 12 or 24 states: the step `logsumexp(a[:, None] + A, axis=0)` alone
  computed padded, but in a time loop it was MG204 ("this tile of shape (9, 9) is reduced or broadcast along its
  rows or columns ..."): the carry entered padded as the read of 9 (16 lanes) and left as the statistic of the (9,
  9) tile padded to (12, 32) (32 lanes), which ended the padded trace (MG005 inside it). The carry is regrown to the
  body's padded shape now (as a fill was, probe 48a), a short vector lengthened by a gather where no zeros fill the
  difference, a padded row of back-pointers stored into its SMEM row by a masked scatter, and a vector product of
  padded operands compared by their own shapes (an Elman RNN's W @ h of 20 units); in a forward-backward pass, a
  few-element row of an SMEM buffer (`al[t, :]` of a (T, 9) one) is read padded element by element, and a statistic
  of 12 rows unpadded beside 32 columns is lengthened by the gather too."""
  for K in (9, 5, 24):
    A, v = normal(10 + K, (K, K)), normal(11 + K, (K,))
    want = v.astype(np.float64)
    for _ in range(3):
      x = want[:, None] + A
      want = x.max(0) + np.log(np.exp(x - x.max(0)).sum(0))
    np.testing.assert_allclose(np.asarray(chain_of_nine(A, v, interpret=True)), want, rtol=1e-5, atol=1e-5)
  A, v = normal(12, (5, 5)), normal(13, (5,))
  got, bp = nine_with_backpointers(A, v, interpret=True)
  a, bps = v, []
  for _ in range(3):
    x = a[:, None] + A
    bps.append(x.argmax(0))
    a = x.max(0)
  np.testing.assert_allclose(np.asarray(got), a, rtol=1e-6)
  np.testing.assert_array_equal(np.asarray(bp), np.array(bps, np.int32))
  assert "mosaic_gpu" in export(nine_with_backpointers, (A, v))
  run_case("elman_rnn_20_hidden", CASES["elman_rnn_20_hidden"])
  run_case("hmm_forward_backward_9_states", CASES["hmm_forward_backward_9_states"])     # (al[t, :] of an SMEM row)
  run_case("hmm_forward_backward_12_states", CASES["hmm_forward_backward_12_states"])   # (12 rows beside 32 columns)


# ---------------------------------------------------------------- class 6: MG953 of a padded roll in a loop
def test_a_padded_roll_in_a_loop_is_no_masked_reduction():
  """CTC's alpha over 11 extended states (5 labels) shifted by jnp.roll, computed padded (16 lanes), was MG953
  ("jax.nn.logsumexp() reduces lanes of data that the padding changed") with the right numbers: a padded roll is a
  select between two rolls, and interpret mode's lane states took a constant lane of one roll beside padding of
  the other for a fill of that padding. Only a uniform side (a number, a fill) is such a fill now."""
  run_case("ctc_alpha_roll_11_states", CASES["ctc_alpha_roll_11_states"])


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
  A, v = normal(12, (5, 5)), normal(13, (5,))
  got, bp = jax.jit(nine_with_backpointers)(A, v)
  np.testing.assert_array_equal(np.asarray(bp)[0], (v[:, None] + A).argmax(0))


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
