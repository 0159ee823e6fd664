"""Probe 72a's corpus, its seventh part: the same recurrences at the sizes models have, not powers of two: a CoNLL NER
CRF's 9 tags (Viterbi and the partition function), 5 and 3 tags, HMMs of 3, 9, 12 and 24 states (log space and
scaled, where the step's vector-matrix product is jnp.dot of a padded vector), CTC over 11 extended states (5 labels)
with jnp.roll, and an Elman RNN of 20 hidden units, HMM forward-backward posteriors at 9 and 12 states and a CRF's
marginals at 9 tags (the alphas read back from an SMEM (T, K) buffer row by row). Each of these was MG204 before
probe 72a (the padded trace ended at the loop carry, the back-pointers' store or the product; one MG953 with the
right numbers)."""
import numpy as np

from probe72a_common import normal, registry
import probe72a_cells as ce
import probe72a_dp as dp
import probe72a_extra

CASES, case = registry()

for K in (9, 5):
  case(f"viterbi_decode_{K}_tags", dp.viterbi_decode, lambda sd, K=K: (dp._crf(sd, B=2, T=10, K=K), {}), dp.viterbi_np,
       1e-5)


def _crf_lens_k(sd, K):
  em, tr, st, en = dp._crf(sd, B=4, T=10, K=K)
  return (em, tr, st, en, np.array([10, 7, 4, 9], np.int32)), {}


for K in (9, 12, 3):
  case(f"crf_partition_masked_{K}_tags", dp.crf_partition_masked, lambda sd, K=K: _crf_lens_k(sd, K), dp.crf_logz_np,
       1e-4)

for K in (3, 9, 24):
  case(f"hmm_forward_log_{K}_states", dp.hmm_forward_log, lambda sd, K=K: (dp._hmm(sd, B=2, T=12, K=K, V=7), {}),
       lambda *a: dp.hmm_forward_np(*a)[0], 1e-4)

case("hmm_forward_scaled_9_states", dp.hmm_forward_scaled, lambda sd: (dp._hmm(sd, B=2, T=12, K=9, V=7), {}),
     dp.hmm_forward_np, 1e-4)


def _ctc11(sd):
  lp, ext, *_ = dp._ctc_inputs(sd, L=5, SP=11)
  return (lp, ext), {"L": 5}


case("ctc_alpha_roll_11_states", dp.ctc_alpha_roll, _ctc11,
     lambda lp, ext, L=5: dp.ctc_alpha_np(lp, ext, np.full(lp.shape[0], L), np.full(lp.shape[0], lp.shape[1])), 1e-4)

case("elman_rnn_20_hidden", ce.elman_rnn_matvec,
     lambda sd: ((normal(sd, (2, 8, 12)), normal(sd + 1, (20, 20), 0.2), normal(sd + 2, (20, 12), 0.3),
                  normal(sd + 3, (20,), 0.1)), {}), ce.elman_np, 1e-5)

for K in (9, 12):
  case(f"hmm_forward_backward_{K}_states", dp.hmm_forward_backward,
       lambda sd, K=K: (dp._hmm(sd, B=2, T=10, K=K, V=7), {}), dp.hmm_posteriors_np, 1e-4)


def _crf9(sd):
  return dp._crf(sd, B=2, T=10, K=9), {}


case("crf_marginals_9_tags", probe72a_extra.crf_marginals, _crf9, probe72a_extra.crf_marginals_np, 1e-4)
