"""Probe 46d (Liger-Kernel's LLM training kernels, forward and backward: RoPE in the half-rotation and interleaved
layouts over few heads, fused residual-add + RMSNorm, GeGLU/SwiGLU, cross-entropy chunks, KL and JSD, embeddings).

Each section says what was wrong: Triton's offsets with the start added after the broadcast (`d + offs[None, :]`)
were a gather and a scatter rather than the window they cover; a token's tile of few heads ((6, 64), (2, 64), (3, 64))
split in halves, or in interleaved pairs, and rotated by a row of cos and sin was MG204 (its halves' rows no row-wise
layout takes; its pairs no register tensor holds); a padded row of an odd vocabulary indexed at the target
(`lsm[t[r]]`) ended the padded trace."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe_util import export as _export, rnd as _rnd

S = jax.ShapeDtypeStruct
F32, BF16 = jnp.float32, jnp.bfloat16


def _rope_ref(q, cos, sin):
  q = jnp.asarray(q, F32)
  d = q.shape[-1] // 2
  c, s = jnp.asarray(cos, F32)[:, None, :], jnp.asarray(sin, F32)[:, None, :]
  return jnp.concatenate([q[..., :d] * c - q[..., d:] * s, q[..., d:] * c + q[..., :d] * s], -1)


# ---------------------------------------------------------------- a run's start added after its broadcast
# Liger's RoPE addresses the second half of each head as `hd // 2 + offs[None, :]` (the start added to the
# broadcast run): that was no run, so the load was a gather and the bfloat16 store a scatter, MG204 (Hopper's
# bfloat16 atomic set pairs elements). Such offsets are now the window they cover, as `(hd // 2 + offs)[None, :]` was.
@mg.mgpu_kernel(out_shape=lambda q, cos, sin: q, grid=lambda q, cos, sin: (q.shape[0],))
def liger_rope(q, cos, sin, out, *, PAD_H: ml.constexpr = 8):
  t = ml.program_id(0)
  nh, hd = q.shape[1], q.shape[2]
  offs = ml.arange(hd // 2)
  c = cos.at[t, offs].load()[None, :]
  s = sin.at[t, offs].load()[None, :]
  heads = ml.arange(PAD_H)
  m = heads[:, None] < nh
  q1 = q.at[t, heads[:, None], offs[None, :]].load(mask=m, other=0.0).astype(jnp.float32)
  q2 = q.at[t, heads[:, None], hd // 2 + offs[None, :]].load(mask=m, other=0.0).astype(jnp.float32)
  out.at[t, heads[:, None], offs[None, :]].store((q1 * c - q2 * s).astype(out.dtype), mask=m)
  out.at[t, heads[:, None], hd // 2 + offs[None, :]].store((q2 * c + q1 * s).astype(out.dtype), mask=m)


@mg.mgpu_kernel(out_shape=lambda dq, cos, sin: dq, grid=lambda dq, cos, sin: (dq.shape[0],), input_output_aliases={0: 0})
def rope_backward_in_place(dq, cos, sin, out):
  t = ml.program_id(0)
  d = dq.shape[2] // 2
  offs = ml.arange(d)
  hs = ml.arange(dq.shape[1])[:, None]
  c = cos.at[t, offs].load()[None, :]
  s = sin.at[t, offs].load()[None, :]
  g1 = dq.at[t, hs, offs[None, :]].load().astype(jnp.float32)
  g2 = dq.at[t, hs, offs[None, :] + d].load().astype(jnp.float32)
  out.at[t, hs, offs[None, :]].store((g1 * c + g2 * s).astype(out.dtype))
  out.at[t, hs, offs[None, :] + d].store((g2 * c - g1 * s).astype(out.dtype))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2), x.dtype), grid=lambda x: (ml.cdiv(x.shape[0], 4),))
def geglu_packed(x, out):
  i = ml.program_id(0)
  d = x.shape[1] // 2
  rows = i * 4 + ml.arange(4)
  cols = ml.arange(d)
  m = rows[:, None] < x.shape[0]
  a = x.at[rows[:, None], cols[None, :]].load(mask=m, other=0.0).astype(jnp.float32)
  b = x.at[rows[:, None], d + cols[None, :] + 0].load(mask=m, other=0.0).astype(jnp.float32)
  y = 0.5 * a * (1 + ml.tanh(0.7978845608028654 * (a + 0.044715 * a * a * a))) * b
  out.at[rows[:, None], cols[None, :]].store(y.astype(out.dtype), mask=m)


def test_liger_rope_offsets_past_the_broadcast_are_windows():
  q, cos, sin = _rnd((12, 6, 64), 1, BF16), _rnd((12, 32), 2), _rnd((12, 32), 3)
  got = liger_rope(q, cos, sin, interpret=True)
  np.testing.assert_allclose(np.asarray(got, F32), np.asarray(_rope_ref(q, cos, sin).astype(BF16), F32), rtol=1e-2, atol=1e-2)
  _export(liger_rope, q, cos, sin)
  ir = liger_rope.typed_ir(S(q.shape, BF16), S(cos.shape, F32), S(sin.shape, F32))
  assert "gather" not in ir and "atomic" not in ir


def test_a_rope_backward_in_place_and_a_packed_geglu_read_and_write_windows():
  dq, cos, sin = _rnd((10, 8, 64), 4, BF16), _rnd((10, 32), 5), _rnd((10, 32), 6)
  want = jax.vjp(lambda q: _rope_ref(q, cos, sin), jnp.asarray(dq, F32))[1](jnp.asarray(dq, F32))[0]
  got = rope_backward_in_place(dq, cos, sin, interpret=True)
  np.testing.assert_allclose(np.asarray(got, F32), np.asarray(want.astype(BF16), F32), rtol=1e-2, atol=1e-2)
  _export(rope_backward_in_place, dq, cos, sin)
  x = _rnd((10, 256), 7, BF16)
  a, b = jnp.asarray(x[:, :128], F32), jnp.asarray(x[:, 128:], F32)
  got = geglu_packed(x, interpret=True)
  np.testing.assert_allclose(np.asarray(got, F32), np.asarray((jax.nn.gelu(a) * b).astype(BF16), F32), rtol=2e-2, atol=2e-2)
  assert "gather" not in geglu_packed.typed_ir(S(x.shape, BF16))


@pytest.mark.gpu
def test_liger_rope_offsets_past_the_broadcast_on_the_gpu():
  q, cos, sin = _rnd((40, 6, 64), 8, BF16), _rnd((40, 32), 9), _rnd((40, 32), 10)
  np.testing.assert_allclose(np.asarray(liger_rope(q, cos, sin), F32), np.asarray(liger_rope(q, cos, sin, interpret=True), F32),
                             rtol=1e-2, atol=1e-2)
  dq = _rnd((40, 8, 64), 11, BF16)
  np.testing.assert_allclose(np.asarray(jax.jit(rope_backward_in_place)(dq, cos, sin), F32),
                             np.asarray(rope_backward_in_place(dq, cos, sin, interpret=True), F32), rtol=1e-2, atol=1e-2)
  x = _rnd((37, 256), 12, BF16)
  np.testing.assert_allclose(np.asarray(geglu_packed(x), F32), np.asarray(geglu_packed(x, interpret=True), F32),
                             rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- halves of a token's tile of few heads
# A token's (heads, head_dim) tile with heads not a multiple of 4 (6 query heads, 2 or 3 KV heads), split in halves
# (`x[:, :d]`, `x[:, d:]`) that meet a row of cos and sin broadcast along the heads, was MG204 at the halves (a
# (6, 32) or (2, 32) tile broadcast along its rows needs rows a multiple of 4): the padded trace read only tiles that
# registers cannot hold padded. It now also reads such a tile padded to rows a multiple of 4 (under the mask of its
# heads), where the plain padded trace fails, and keeps the padding through the halves and their concatenation.
@mg.mgpu_kernel(out_shape=lambda q, cos, sin: q, grid=lambda q, cos, sin: (q.shape[0],))
def rope_halves(q, cos, sin, out):
  t = ml.program_id(0)
  d = q.shape[2] // 2
  x = q.at[t][...].astype(jnp.float32)
  c = cos.at[t][...][None, :]
  s = sin.at[t][...][None, :]
  x1 = x[:, :d]
  x2 = x[:, d:]
  out.at[t][...] = ml.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=1).astype(out.dtype)


@mg.mgpu_kernel(out_shape=lambda q, k, pos: (q, k), grid=lambda q, k, pos: (q.shape[0],))
def rope_qk_from_positions(q, k, pos, qo, ko, *, base: ml.constexpr = 10000.0):
  t = ml.program_id(0)
  hd = q.shape[2]
  d = hd // 2
  ang = pos[t].astype(jnp.float32) * base ** (-2.0 * ml.arange(d).astype(jnp.float32) / hd)
  c = ml.cos(ang)[None, :]
  s = ml.sin(ang)[None, :]
  for src, dst in ((q, qo), (k, ko)):        # 6 query heads, 2 KV heads
    x = src.at[t][...].astype(jnp.float32)
    x1, x2 = x[:, :d], x[:, d:]
    dst.at[t, :, :d][...] = (x1 * c - x2 * s).astype(dst.dtype)
    dst.at[t, :, d:][...] = (x2 * c + x1 * s).astype(dst.dtype)


@mg.mgpu_kernel(out_shape=lambda k, cos, sin: k, grid=lambda k, cos, sin: (k.shape[0],))
def rope_rotate_half(k, cos, sin, out):       # HF's rotate_half, full-width cos and sin
  t = ml.program_id(0)
  d = k.shape[2] // 2
  x = k.at[t][...].astype(jnp.float32)
  rot = ml.concatenate([-x[:, d:], x[:, :d]], axis=-1)
  out.at[t][...] = (x * cos.at[t][...][None, :] + rot * sin.at[t][...][None, :]).astype(out.dtype)


def _rotate_half_ref(k, cos, sin):
  x = jnp.asarray(k, F32)
  d = x.shape[-1] // 2
  rot = jnp.concatenate([-x[..., d:], x[..., :d]], -1)
  return x * jnp.asarray(cos, F32)[:, None] + rot * jnp.asarray(sin, F32)[:, None]


def _close(got, want, tol=1e-2):
  np.testing.assert_allclose(np.asarray(got, F32), np.asarray(jnp.asarray(want).astype(BF16), F32), rtol=tol, atol=tol)


def test_halves_of_a_tile_of_six_heads_rotate_forward_and_backward():
  q, cos, sin = _rnd((9, 6, 64), 20, BF16), _rnd((9, 32), 21), _rnd((9, 32), 22)
  _close(rope_halves(q, cos, sin, interpret=True), _rope_ref(q, cos, sin))
  g = jnp.asarray(q, F32)       # the backward is the rotation by -theta
  want = jax.vjp(lambda x: _rope_ref(x, cos, sin), g)[1](g)[0]
  _close(rope_halves(q, cos, -sin, interpret=True), want)
  _export(rope_halves, q, cos, sin)
  ir = rope_halves.typed_ir(S(q.shape, BF16), S(cos.shape, F32), S(sin.shape, F32))
  assert "ref<GMEM, 8x64, bfloat16>" in ir and "maskedstore" in ir      # read and written padded to 8 heads


def test_query_and_kv_heads_rotate_by_angles_of_positions():
  q, k = _rnd((7, 6, 64), 23, BF16), _rnd((7, 2, 64), 24, BF16)
  pos = (np.arange(7) * 5 + 3).astype(np.int32)
  ang = pos[:, None] * 10000.0 ** (-np.arange(0, 64, 2) / 64)[None, :]
  gq, gk = rope_qk_from_positions(q, k, pos, interpret=True)
  _close(gq, _rope_ref(q, np.cos(ang), np.sin(ang)), 3e-2)
  _close(gk, _rope_ref(k, np.cos(ang), np.sin(ang)), 3e-2)
  _export(rope_qk_from_positions, q, k, pos)


def test_rotate_half_of_three_kv_heads():
  k, cos, sin = _rnd((5, 3, 64), 25, BF16), _rnd((5, 64), 26), _rnd((5, 64), 27)
  _close(rope_rotate_half(k, cos, sin, interpret=True), _rotate_half_ref(k, cos, sin))
  _export(rope_rotate_half, k, cos, sin)


@mg.mgpu_kernel(out_shape=lambda q, c, i: (S((q.shape[0], 64), F32), S((q.shape[0], 8), F32), S(q.shape, F32),
                                           S((q.shape[0], 6, 32), F32)), grid=lambda q, c, i: (q.shape[0],))
def padded_heads_meet_reductions_and_picks(q, c, i, o1, o2, o3, o4):
  t = ml.program_id(0)
  x = q.at[t][...]                      # (6, 64), read as 8 heads: the halves below need it
  h = x[:, :32] * c.at[t][...][None, :]
  o1.at[t][...] = ml.max(x, axis=0) + ml.concatenate([ml.sum(h, axis=0), ml.min(h, axis=0)])
  o2[t, 0] = ml.sum(h)
  o2[t, 1] = x[2, 3]
  o2[t, 2] = x[-1, 0]
  o2[t, 3] = ml.sum(x[i[t]])
  o2[t, 4] = ml.mean(h)
  o2[t, 5] = ml.var(x)
  o2[t, 6] = ml.max(h)
  o2[t, 7] = ml.min(x)
  o3.at[t][...] = ml.softmax(x, axis=0)
  o4.at[t][...] = ml.sum(x.reshape(6, 2, 32), axis=1) + h


def test_the_padding_of_a_tile_of_heads_never_reaches_a_result():
  q, c = _rnd((5, 6, 64), 60), _rnd((5, 32), 61)
  i = np.array([0, 5, 3, -1, 9], np.int32)
  h = q[:, :, :32] * c[:, None, :]
  picked = q[np.arange(5), np.clip(np.where(i < 0, i + 6, i), 0, 5)]
  want = (q.max(1) + np.concatenate([h.sum(1), h.min(1)], -1),
          np.stack([h.sum((1, 2)), q[:, 2, 3], q[:, -1, 0], picked.sum(-1), h.mean((1, 2)), q.var((1, 2)),
                    h.max((1, 2)), q.min((1, 2))], 1),
          jax.nn.softmax(q, axis=1), q.reshape(5, 6, 2, 32).sum(2) + h)
  for got, w in zip(padded_heads_meet_reductions_and_picks(q, c, i, interpret=True), want):
    np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4)
  _export(padded_heads_meet_reductions_and_picks, q, c, i)


# Interleaved (GPT-J) RoPE: the pairs `x[:, ::2]`, `x[:, 1::2]` of a (6, 64) tile (MG204: a (6, 32) result registers
# cannot hold), or `x.reshape(h, d // 2, 2)[:, :, 0]`, rotated and interleaved back by a concatenation along a new last
# axis and a reshape: the padded trace keeps the heads' padding through the strided slice, the new axis and the
# reshape of the axes after the padded one.
@mg.mgpu_kernel(out_shape=lambda q, cos, sin: q, grid=lambda q, cos, sin: (q.shape[0],))
def rope_interleaved(q, cos, sin, out):
  t = ml.program_id(0)
  h, d = q.shape[1], q.shape[2]
  x = q.at[t][...].astype(jnp.float32)
  c = cos.at[t][...][None, :]
  s = sin.at[t][...][None, :]
  a, b = x[:, ::2], x[:, 1::2]
  o = ml.concatenate([(a * c - b * s)[..., None], (b * c + a * s)[..., None]], axis=-1).reshape(h, d)
  out.at[t][...] = o.astype(out.dtype)


@mg.mgpu_kernel(out_shape=lambda q, cos, sin: q, grid=lambda q, cos, sin: (q.shape[0],))
def rope_pairs(q, cos, sin, out):
  t = ml.program_id(0)
  h, d = q.shape[1], q.shape[2]
  x = q.at[t][...].astype(jnp.float32).reshape(h, d // 2, 2)
  c = cos.at[t][...][None, :]
  s = sin.at[t][...][None, :]
  a, b = x[:, :, 0], x[:, :, 1]
  o = ml.concatenate([(a * c - b * s)[:, :, None], (b * c + a * s)[:, :, None]], axis=2)
  out.at[t][...] = o.reshape(h, d).astype(out.dtype)


def _interleaved_ref(q, cos, sin):
  q = jnp.asarray(q, F32)
  c, s = jnp.asarray(cos, F32)[:, None, :], jnp.asarray(sin, F32)[:, None, :]
  a, b = q[..., ::2], q[..., 1::2]
  return jnp.stack([a * c - b * s, b * c + a * s], -1).reshape(q.shape)


@pytest.mark.parametrize("heads", [6, 3])
def test_interleaved_pairs_of_a_tile_of_few_heads(heads):
  q, cos, sin = _rnd((5, heads, 64), 40 + heads, BF16), _rnd((5, 32), 41), _rnd((5, 32), 42)
  _close(rope_interleaved(q, cos, sin, interpret=True), _interleaved_ref(q, cos, sin))
  _export(rope_interleaved, q, cos, sin)
  if heads == 6:
    _close(rope_pairs(q, cos, sin, interpret=True), _interleaved_ref(q, cos, sin))
    _export(rope_pairs, q, cos, sin)


# ---------------------------------------------------------------- a padded row indexed at the target
# A row of an odd vocabulary (250, 300) read whole is read padded (note 86), but picking the target's logit from it,
# `v[t[r]]` or `lsm[t[r]]` (NLL, label smoothing), or a static element, `v[-1]`, ended the padded trace: MG204 at the
# read. An element of the real part is now picked from the padded row (a run-time index clamped into the real part
# first, as jnp clamps it: -1 counts from the real end, 400 is the last real element).
@mg.mgpu_kernel(out_shape=lambda x, t: S((x.shape[0], 2), F32), grid=lambda x, t: (x.shape[0],))
def nll_and_last(x, t, out):
  r = ml.program_id(0)
  v = x[r, :].astype(jnp.float32)
  out[r, 0] = ml.logsumexp(v) - v[t[r]]
  out[r, 1] = v[-1]


@mg.mgpu_kernel(out_shape=lambda x, t: S((x.shape[0],), F32), grid=lambda x, t: (x.shape[0],))
def label_smoothing_ce(x, t, out, *, eps: ml.constexpr = 0.1):
  r = ml.program_id(0)
  lsm = ml.log_softmax(x[r, :].astype(jnp.float32))
  out[r] = -(1 - eps) * lsm[t[r]] - eps / x.shape[1] * ml.sum(lsm)


def test_the_target_of_a_padded_row_is_picked_from_its_real_part():
  x = _rnd((7, 250), 50, BF16)
  t = np.random.default_rng(51).integers(0, 250, 7).astype(np.int32)
  t[1], t[2], t[3] = 249, -1, 400
  xx = jnp.asarray(x, F32)
  picked = xx[np.arange(7), np.clip(np.where(t < 0, t + 250, t), 0, 249)]
  want = jnp.stack([jax.nn.logsumexp(xx, -1) - picked, xx[:, -1]], 1)
  np.testing.assert_allclose(nll_and_last(x, t, interpret=True), want, rtol=1e-4, atol=1e-4)
  _export(nll_and_last, x, t)
  x3, t3 = _rnd((5, 300), 52, BF16), np.random.default_rng(53).integers(0, 300, 5).astype(np.int32)
  lsm = jax.nn.log_softmax(jnp.asarray(x3, F32), -1)
  want = -0.9 * lsm[np.arange(5), t3] - 0.1 / 300 * lsm.sum(-1)
  np.testing.assert_allclose(label_smoothing_ce(x3, t3, interpret=True), want, rtol=1e-4, atol=1e-4)
  _export(label_smoothing_ce, x3, t3)


# A bool loss mask of an odd (batch, sequence) shape read whole beside its losses (a (3, 37) window, padded by the
# padded trace) was left unpadded (bool windows were not padded), so the trace ended where they met: MG204.
@mg.mgpu_kernel(out_shape=lambda l, m: (S((), F32), S(l.shape, jnp.bool_), S(l.shape, F32)))
def masked_token_mean(l, m, loss, keep, signed):
  lv, mv = l[...], m[...]
  loss[...] = ml.sum(ml.where(mv, lv, 0.0)) / ml.maximum(ml.sum(mv.astype(jnp.float32)), 1.0)
  keep[...] = mv & (lv > 0)
  signed[...] = ml.where(~mv, lv, -lv)


def test_a_bool_loss_mask_of_an_odd_shape_is_read_padded_beside_its_losses():
  l, m = _rnd((3, 37), 70), np.random.default_rng(71).random((3, 37)) > 0.4
  got = masked_token_mean(l, m, interpret=True)
  np.testing.assert_allclose(got[0], (l * m).sum() / m.sum(), rtol=1e-5)
  np.testing.assert_array_equal(np.asarray(got[1]), m & (l > 0))
  np.testing.assert_array_equal(np.asarray(got[2]), np.where(~m, l, -l))
  _export(masked_token_mean, l, m)


@pytest.mark.gpu
def test_the_target_of_a_padded_row_on_the_gpu():
  x = _rnd((37, 250), 54, BF16)
  t = np.random.default_rng(55).integers(-250, 400, 37).astype(np.int32)
  np.testing.assert_allclose(nll_and_last(x, t), nll_and_last(x, t, interpret=True), rtol=1e-4, atol=1e-4)
  x3 = _rnd((37, 300), 56, BF16)
  t3 = np.random.default_rng(57).integers(0, 300, 37).astype(np.int32)
  np.testing.assert_allclose(label_smoothing_ce(x3, t3), label_smoothing_ce(x3, t3, interpret=True), rtol=1e-4, atol=1e-4)
  l, m = _rnd((3, 37), 72), np.random.default_rng(73).random((3, 37)) > 0.4
  for got, want in zip(masked_token_mean(l, m), masked_token_mean(l, m, interpret=True)):
    np.testing.assert_allclose(np.asarray(got, F32), np.asarray(want, F32), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_halves_of_a_tile_of_few_heads_on_the_gpu():
  q, cos, sin = _rnd((33, 6, 64), 28, BF16), _rnd((33, 32), 29), _rnd((33, 32), 30)
  _close(rope_halves(q, cos, sin), rope_halves(q, cos, sin, interpret=True))
  k = _rnd((33, 2, 64), 31, BF16)
  pos = np.arange(33, dtype=np.int32)
  for got, want in zip(rope_qk_from_positions(q, k, pos), rope_qk_from_positions(q, k, pos, interpret=True)):
    _close(got, want, 3e-2)
  k3, cf, sf = _rnd((33, 3, 64), 32, BF16), _rnd((33, 64), 33), _rnd((33, 64), 34)
  _close(rope_rotate_half(k3, cf, sf), rope_rotate_half(k3, cf, sf, interpret=True))
  for heads in (6, 3, 2):
    q = _rnd((33, heads, 64), 35 + heads, BF16)
    _close(rope_interleaved(q, cos, sin), rope_interleaved(q, cos, sin, interpret=True))
  q = _rnd((33, 6, 64), 39, BF16)
  _close(rope_pairs(q, cos, sin), rope_pairs(q, cos, sin, interpret=True))
  q, c = _rnd((33, 6, 64), 62), _rnd((33, 32), 63)
  i = np.random.default_rng(64).integers(-8, 10, 33).astype(np.int32)
  for got, want in zip(padded_heads_meet_reductions_and_picks(q, c, i),
                       padded_heads_meet_reductions_and_picks(q, c, i, interpret=True)):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
