"""Probe 57f's corpus of loss and training-side kernels that computed right before the probe's fixes (kept as a
guard): cross-entropy over a large vocabulary by an online logsumexp across a vocab loop (a row a program, blocks of
rows, a masked tail, label smoothing, z-loss, ignore_index=-100, a mean over the kept tokens by atomics and by a
ticket's last program, the backward in place on the logits, a Liger-style early return, lax.fori_loop's and a
pipelined loop's), fused linear cross-entropy (chunked logits by ml.dot, its backward with an atomic dW), KL
divergence and JSD, focal loss, CLIP and InfoNCE, triplet and cosine-embedding losses, DPO's masked per-sequence sums
and batch log-probs, Huber with its gradient, softmax and log-softmax backward, dropout with a seed and its backward
from the stored mask, and grad-norm clipping in two phases (partial sums a program, then the scale; a star
parameter's many tensors). Each runs in interpret mode against NumPy and builds for CUDA."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend.ops.random import philox_reference
from probe_util import export

S = jax.ShapeDtypeStruct
BV, R, BL = 256, 8, 1024


@mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[0],), jnp.float32), grid=lambda x, y: (x.shape[0],))
def ce_fwd_row(x, y, loss):
  r = ml.program_id(0)
  lab = y[r]
  m = ml.full((), -1e30, jnp.float32)
  s = ml.zeros((), jnp.float32)
  tgt = ml.zeros((), jnp.float32)
  for c in range(0, x.shape[1], BV):
    cols = c + ml.arange(BV)
    v = x[r, ml.ds(c, BV)].astype(jnp.float32)
    mn = ml.maximum(m, ml.max(v))
    s = s * ml.exp(m - mn) + ml.sum(ml.exp(v - mn))
    m = mn
    tgt += ml.sum(ml.where(cols == lab, v, 0.0))
  lse = m + ml.log(s)
  loss[r] = ml.where(lab == -100, 0.0, lse - tgt)


@mg.mgpu_kernel(out_shape=lambda x, y, **k: S((x.shape[0],), jnp.float32), grid=lambda x, y, **k: (x.shape[0] // R,))
def ce_fwd_block(x, y, loss, *, eps: ml.constexpr = 0.1, zl: ml.constexpr = 1e-4):
  i = ml.program_id(0) * R
  lab = y[ml.ds(i, R)]
  V = x.shape[1]
  m = ml.full((R,), -float('inf'), jnp.float32)
  s = ml.zeros((R,), jnp.float32)
  sx = ml.zeros((R,), jnp.float32)
  tgt = ml.zeros((R,), jnp.float32)
  for c in range(0, V, BV):
    v = x[ml.ds(i, R), ml.ds(c, BV)].astype(jnp.float32)
    cols = c + ml.arange(BV)[None, :]
    mn = ml.maximum(m, ml.max(v, axis=1))
    s = s * ml.exp(m - mn) + ml.sum(ml.exp(v - mn[:, None]), axis=1)
    m = mn
    sx += ml.sum(v, axis=1)
    tgt += ml.sum(ml.where(cols == lab[:, None], v, 0.0), axis=1)
  lse = m + ml.log(s)
  nll = (1 - eps) * (lse - tgt) + eps * (lse - sx / V) + zl * lse * lse
  loss[ml.ds(i, R)] = ml.where(lab == -100, 0.0, nll)


@mg.mgpu_kernel(out_shape=lambda x, y: (S((), jnp.float32), S((), jnp.int32)), grid=lambda x, y: (x.shape[0] // R,))
def ce_mean_atomic(x, y, total, count):
  i = ml.program_id(0) * R
  lab = y[ml.ds(i, R)]
  v = x[ml.ds(i, R), :].astype(jnp.float32)
  mx = ml.max(v, axis=1)
  lse = mx + ml.log(ml.sum(ml.exp(v - mx[:, None]), axis=1))
  cols = ml.arange(x.shape[1])[None, :]
  tgt = ml.sum(ml.where(cols == lab[:, None], v, 0.0), axis=1)
  valid = lab != -100
  ml.atomic_add(total, ml.sum(ml.where(valid, lse - tgt, 0.0)))
  ml.atomic_add(count, ml.sum(valid.astype(jnp.int32)))


@mg.mgpu_kernel(out_shape=lambda x, y, lse, g: x, grid=lambda x, y, lse, g: (x.shape[0],), input_output_aliases={0: 0})
def ce_bwd_inplace(x, y, lse, g, dx):
  r = ml.program_id(0)
  lab = y[r]
  n_valid = ml.sum((y[...] != -100).astype(jnp.float32))
  scale = ml.where(lab == -100, 0.0, g[0] / n_valid)
  for c in range(0, x.shape[1], BV):
    cols = c + ml.arange(BV)
    v = x[r, ml.ds(c, BV)].astype(jnp.float32)
    p = ml.exp(v - lse[r])
    dx[r, ml.ds(c, BV)] = ((p - ml.where(cols == lab, 1.0, 0.0)) * scale).astype(dx.dtype)


@mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[0],), jnp.float32), grid=lambda x, y: (x.shape[0],))
def ce_tail(x, y, loss):
  r_ = ml.program_id(0)
  lab = y[r_]
  V = x.shape[1]
  m = ml.full((), float('-inf'), jnp.float32); s = ml.zeros((), jnp.float32); t = ml.zeros((), jnp.float32)
  for c in range(0, ml.cdiv(V, BV)):
    cols = c * BV + ml.arange(BV)
    v = x.at[r_, ml.ds(c * BV, BV)].load(mask=cols < V, other=float('-inf'))
    mn = ml.maximum(m, ml.max(v))
    s = s * ml.exp(m - mn) + ml.sum(ml.exp(v - mn))
    m = mn
    t += ml.sum(ml.where(cols == lab, v, 0.0))
  loss[r_] = ml.where(lab == -100, 0.0, m + ml.log(s) - t)


@mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[0],), jnp.float32), grid=lambda x, y: (x.shape[0] // 16,))
def ce_jnp(x, y, loss):
  i = ml.program_id(0) * 16
  v = x[ml.ds(i, 16), :]
  lab = y[ml.ds(i, 16)]
  lp = jax.nn.log_softmax(v, axis=-1)
  oh = jax.nn.one_hot(jnp.maximum(lab, 0), v.shape[1], dtype=jnp.float32)
  nll = -jnp.sum(lp * oh, axis=-1)
  loss[ml.ds(i, 16)] = jnp.where(lab == -100, 0.0, nll)


@mg.mgpu_kernel(out_shape=lambda h, w, y: S((h.shape[0],), jnp.float32), grid=lambda h, w, y: (h.shape[0] // 64,))
def flce(h, w, y, loss):
  i = ml.program_id(0) * 64
  hv = h[ml.ds(i, 64), :]
  lab = y[ml.ds(i, 64)]
  m = ml.full((64,), float('-inf'), jnp.float32); s = ml.zeros((64,), jnp.float32); t = ml.zeros((64,), jnp.float32)
  for c in range(0, w.shape[0], 128):
    lg = ml.dot(hv, w[ml.ds(c, 128), :].T)
    cols = c + ml.arange(128)[None, :]
    mn = ml.maximum(m, ml.max(lg, axis=1))
    s = s * ml.exp(m - mn) + ml.sum(ml.exp(lg - mn[:, None]), axis=1)
    m = mn
    t += ml.sum(ml.where(cols == lab[:, None], lg, 0.0), axis=1)
  loss[ml.ds(i, 64)] = ml.where(lab == -100, 0.0, m + ml.log(s) - t)


@mg.mgpu_kernel(out_shape=lambda a, b, **k: S((a.shape[0],), jnp.float32), grid=lambda a, b, **k: (a.shape[0] // 8,))
def kldiv(lp, tg, out, *, log_target: ml.constexpr = False):
  i = ml.program_id(0) * 8
  a = lp[ml.ds(i, 8), :]; b = tg[ml.ds(i, 8), :]
  if log_target:
    v = ml.exp(b) * (b - a)
  else:
    v = ml.where(b > 0, b * (ml.log(b) - a), 0.0)
  out[ml.ds(i, 8)] = ml.sum(v, axis=1)


@mg.mgpu_kernel(out_shape=lambda a, b, **k: S((a.shape[0],), jnp.float32), grid=lambda a, b, **k: (a.shape[0] // 8,))
def jsd(x, y, out, *, beta: ml.constexpr = 0.5):
  i = ml.program_id(0) * 8
  X = x[ml.ds(i, 8), :]; Y = y[ml.ds(i, 8), :]   # log-probs
  Q, P = ml.exp(X), ml.exp(Y)
  M = beta * P + (1 - beta) * Q
  logM = ml.log(M)
  out[ml.ds(i, 8)] = ml.sum(beta * P * (Y - logM) + (1 - beta) * Q * (X - logM), axis=1)


@mg.mgpu_kernel(out_shape=lambda x, t, **k: x, grid=lambda x, t, **k: (x.shape[0] // 1024,))
def focal(x, t, out, *, alpha: ml.constexpr = 0.25, gamma: ml.constexpr = 2.0):
  i = ml.program_id(0) * 1024
  v = x[ml.ds(i, 1024)]; tt = t[ml.ds(i, 1024)]
  p = ml.sigmoid(v)
  ce = ml.maximum(v, 0.0) - v * tt + ml.log1p(ml.exp(-ml.abs(v)))
  pt = p * tt + (1 - p) * (1 - tt)
  a = alpha * tt + (1 - alpha) * (1 - tt)
  out[ml.ds(i, 1024)] = a * ce * (1 - pt) ** gamma


@mg.mgpu_kernel(out_shape=lambda a, b, s: S((), jnp.float32))
def clip_loss(img, txt, scale, loss):
  a = img[...]; b = txt[...]
  lg = ml.dot(a, b.T) * scale[0]
  n = lg.shape[0]
  diag = ml.sum(ml.where(ml.arange(n)[:, None] == ml.arange(n)[None, :], lg, 0.0), axis=1)
  l_i = ml.logsumexp(lg, axis=1) - diag
  l_t = ml.logsumexp(lg, axis=0) - diag
  loss[...] = (ml.sum(l_i) + ml.sum(l_t)) / (2 * n)


@mg.mgpu_kernel(out_shape=lambda q, k: S((q.shape[0],), jnp.float32), grid=lambda q, k: (q.shape[0] // 64,))
def infonce(q, k, out):
  i = ml.program_id(0) * 64
  qv = q[ml.ds(i, 64), :]
  m = ml.full((64,), float('-inf'), jnp.float32); s = ml.zeros((64,), jnp.float32); pos = ml.zeros((64,), jnp.float32)
  rows = i + ml.arange(64)[:, None]
  for c in range(0, k.shape[0], 64):
    lg = ml.dot(qv, k[ml.ds(c, 64), :].T) * 10.0
    mn = ml.maximum(m, ml.max(lg, axis=1))
    s = s * ml.exp(m - mn) + ml.sum(ml.exp(lg - mn[:, None]), axis=1)
    m = mn
    pos += ml.sum(ml.where(rows == c + ml.arange(64)[None, :], lg, 0.0), axis=1)
  out[ml.ds(i, 64)] = m + ml.log(s) - pos


@mg.mgpu_kernel(out_shape=lambda a, p, n: S((a.shape[0],), jnp.float32), grid=lambda a, p, n: (a.shape[0] // 16,))
def triplet(a, p, n, out):
  i = ml.program_id(0) * 16
  A = a[ml.ds(i, 16), :]; P = p[ml.ds(i, 16), :]; N = n[ml.ds(i, 16), :]
  dp = ml.sqrt(ml.sum((A - P + 1e-6) ** 2, axis=1))
  dn = ml.sqrt(ml.sum((A - N + 1e-6) ** 2, axis=1))
  out[ml.ds(i, 16)] = ml.maximum(dp - dn + 1.0, 0.0)


@mg.mgpu_kernel(out_shape=lambda a, b, y: S((a.shape[0],), jnp.float32), grid=lambda a, b, y: (a.shape[0] // 16,))
def cosemb(a, b, y, out):
  i = ml.program_id(0) * 16
  A = a[ml.ds(i, 16), :]; B = b[ml.ds(i, 16), :]; t = y[ml.ds(i, 16)]
  cos = ml.sum(A * B, axis=1) / ml.sqrt(ml.sum(A * A, axis=1) * ml.sum(B * B, axis=1) + 1e-12)
  out[ml.ds(i, 16)] = ml.where(t == 1, 1 - cos, ml.maximum(cos - 0.2, 0.0))


@mg.mgpu_kernel(out_shape=lambda pc, pr, rc, rr, mc, mr, **k: S((pc.shape[0],), jnp.float32), grid=lambda *a, **k: (a[0].shape[0] // 8,))
def dpo(pc, pr, rc, rr, mc, mr, out, *, beta: ml.constexpr = 0.1):
  i = ml.program_id(0) * 8
  Mc = mc[ml.ds(i, 8), :].astype(jnp.float32); Mr = mr[ml.ds(i, 8), :].astype(jnp.float32)
  lpc = ml.sum(pc[ml.ds(i, 8), :] * Mc, axis=1); lpr = ml.sum(pr[ml.ds(i, 8), :] * Mr, axis=1)
  lrc = ml.sum(rc[ml.ds(i, 8), :] * Mc, axis=1); lrr = ml.sum(rr[ml.ds(i, 8), :] * Mr, axis=1)
  z = beta * ((lpc - lrc) - (lpr - lrr))
  out[ml.ds(i, 8)] = -jax.nn.log_sigmoid(z)


@mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[0],), jnp.float32), grid=lambda x, y: (x.shape[0],))
def batch_logps(x, y, out):
  b = ml.program_id(0)
  acc = ml.zeros((), jnp.float32)
  for t in range(0, x.shape[1], 16):
    v = x[b, ml.ds(t, 16), :].astype(jnp.float32)
    lab = y[b, ml.ds(t, 16)]
    lp = v - ml.logsumexp(v, axis=1, keepdims=True)
    g = ml.sum(ml.where(ml.arange(v.shape[1])[None, :] == lab[:, None], lp, 0.0), axis=1)
    acc += ml.sum(ml.where(lab != -100, g, 0.0))
  out[b] = acc


@mg.mgpu_kernel(out_shape=lambda x, t, **k: (S((), jnp.float32), x), grid=lambda x, t, **k: (ml.cdiv(x.shape[0], BL),))
def huber(x, t, loss, grad, *, delta: ml.constexpr = 1.0):
  i = ml.program_id(0)
  off = i * BL + ml.arange(BL)
  msk = off < x.shape[0]
  a = ml.load(x.at[off], mask=msk, other=0.0); b = ml.load(t.at[off], mask=msk, other=0.0)
  d = a - b
  ad = ml.abs(d)
  l = ml.where(ad < delta, 0.5 * d * d, delta * (ad - 0.5 * delta))
  g = ml.where(ad < delta, d, delta * ml.where(d > 0, 1.0, -1.0)) / x.shape[0]
  ml.atomic_add(loss, ml.sum(l) / x.shape[0])
  ml.store(grad.at[off], g, mask=msk)


@mg.mgpu_kernel(out_shape=lambda y, dy: y, grid=lambda y, dy: (y.shape[0] // 16,))
def softmax_bwd(y, dy, dx):
  i = ml.program_id(0) * 16
  Y = y[ml.ds(i, 16), :].astype(jnp.float32); G = dy[ml.ds(i, 16), :].astype(jnp.float32)
  dx[ml.ds(i, 16), :] = (Y * (G - ml.sum(Y * G, axis=1, keepdims=True))).astype(dx.dtype)


@mg.mgpu_kernel(out_shape=lambda y, dy: y, grid=lambda y, dy: (y.shape[0] // 16,))
def logsoftmax_bwd(y, dy, dx):
  i = ml.program_id(0) * 16
  Y = y[ml.ds(i, 16), :]; G = dy[ml.ds(i, 16), :]
  dx[ml.ds(i, 16), :] = G - ml.exp(Y) * ml.sum(G, axis=1, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda x, s, **k: (x, S(x.shape, jnp.int8)), grid=lambda x, s, **k: (ml.cdiv(x.shape[0], BL),))
def dropout_fwd(x, seed: ml.scalar, out, mask, *, p: ml.constexpr = 0.3):
  i = ml.program_id(0)
  off = i * BL + ml.arange(BL)
  inb = off < x.shape[0]
  v = ml.load(x.at[off], mask=inb, other=0.0)
  keep = ml.rand(seed, off) > p
  ml.store(out.at[off], ml.where(keep, v / (1 - p), 0.0), mask=inb)
  ml.store(mask.at[off], keep.astype(jnp.int8), mask=inb)


@mg.mgpu_kernel(out_shape=lambda g, m, **k: g, grid=lambda g, m, **k: (ml.cdiv(g.shape[0], BL),))
def dropout_bwd(g, mask, dx, *, p: ml.constexpr = 0.3):
  i = ml.program_id(0)
  off = i * BL + ml.arange(BL)
  inb = off < g.shape[0]
  gv = ml.load(g.at[off], mask=inb, other=0.0)
  mv = ml.load(mask.at[off], mask=inb, other=0)
  ml.store(dx.at[off], ml.where(mv != 0, gv * (1.0 / (1 - p)), 0.0), mask=inb)


@mg.mgpu_kernel(out_shape=lambda g: S((ml.cdiv(g.shape[0], 2048),), jnp.float32), grid=lambda g: (ml.cdiv(g.shape[0], 2048),))
def sq_partials(g, part):
  i = ml.program_id(0)
  off = i * 2048 + ml.arange(2048)
  v = ml.load(g.at[off], mask=off < g.shape[0], other=0.0).astype(jnp.float32)
  part[i] = ml.sum(v * v)


@mg.mgpu_kernel(out_shape=lambda g, part, **k: g, grid=lambda g, part, **k: (ml.cdiv(g.shape[0], 2048),))
def clip_scale(g, part, out, *, max_norm: ml.constexpr = 1.0):
  i = ml.program_id(0)
  tot = ml.sqrt(ml.sum(part[...]))
  sc = ml.minimum(max_norm / (tot + 1e-6), 1.0)
  off = i * 2048 + ml.arange(2048)
  v = ml.load(g.at[off], mask=off < g.shape[0], other=0.0)
  ml.store(out.at[off], (v * sc).astype(out.dtype), mask=off < g.shape[0])


@mg.mgpu_kernel(out_shape=lambda x, y: (S((x.shape[0],), jnp.float32), x), grid=lambda x, y: (x.shape[0],))
def ce_early_return(x, y, loss, dx):
  r_ = ml.program_id(0)
  lab = y[r_]
  if lab == -100:
    for c in range(0, x.shape[1], BV):
      dx[r_, ml.ds(c, BV)] = ml.zeros((BV,), jnp.float32)
    loss[r_] = 0.0
    return
  m = float('-inf'); d = 0.0
  ori = x[r_, lab]
  for c in range(0, x.shape[1], BV):
    v = x[r_, ml.ds(c, BV)]
    mn = ml.maximum(m, ml.max(v))
    d = d * ml.exp(m - mn) + ml.sum(ml.exp(v - mn))
    m = mn
  lse_ = m + ml.log(d)
  for c in range(0, x.shape[1], BV):
    cols = c + ml.arange(BV)
    v = x[r_, ml.ds(c, BV)]
    dx[r_, ml.ds(c, BV)] = ml.exp(v - lse_) - ml.where(cols == lab, 1.0, 0.0)
  loss[r_] = lse_ - ori


@mg.mgpu_kernel(out_shape=lambda x, y: (S((1,), jnp.float32), S((2,), jnp.float32), S((1,), jnp.int32)), grid=lambda x, y: (x.shape[0] // 8,))
def ce_mean_ticket(x, y, mean, acc, ticket):
  i = ml.program_id(0) * 8
  v = x[ml.ds(i, 8), :]; lab = y[ml.ds(i, 8)]
  l = ml.logsumexp(v, axis=1) - ml.sum(ml.where(ml.arange(v.shape[1])[None, :] == lab[:, None], v, 0.0), axis=1)
  ok = lab != -100
  ml.atomic_add(acc.at[0], ml.sum(ml.where(ok, l, 0.0)))
  ml.atomic_add(acc.at[1], ml.sum(ok.astype(jnp.float32)))
  t = ml.atomic_add(ticket.at[0], 1)
  if t == ml.num_programs(0) - 1:
    tot = ml.atomic_add(acc.at[0], 0.0)
    cnt = ml.atomic_add(acc.at[1], 0.0)
    mean[0] = tot / ml.maximum(cnt, 1.0)


@mg.mgpu_kernel(out_shape=lambda h, w, y, lse_: (h, S(w.shape, jnp.float32)), grid=lambda h, w, y, lse_: (h.shape[0] // 64,))
def flce_bwd(h, w, y, lse_in, dh, dw):
  i = ml.program_id(0) * 64
  hv = h[ml.ds(i, 64), :]
  lab = y[ml.ds(i, 64)]
  l = lse_in[ml.ds(i, 64)]
  acc = ml.zeros((64, h.shape[1]), jnp.float32)
  for c in range(0, w.shape[0], 64):
    wv = w[ml.ds(c, 64), :]
    lg = ml.dot(hv, wv.T)
    cols = c + ml.arange(64)[None, :]
    g = ml.exp(lg - l[:, None]) - ml.where(cols == lab[:, None], 1.0, 0.0)
    g = ml.where((lab != -100)[:, None], g, 0.0)
    gb = g.astype(h.dtype)
    acc += ml.dot(gb, wv)
    ml.atomic_add(dw.at[ml.ds(c, 64), :], ml.dot(gb.T, hv))
  dh[ml.ds(i, 64), :] = acc.astype(dh.dtype)


@mg.mgpu_kernel(out_shape=lambda *gs: S((), jnp.float32))
def multi_norm(*refs):
  *gs, out = refs
  acc = ml.zeros((), jnp.float32)
  for g in gs:
    v = g[...].astype(jnp.float32)
    acc += ml.sum(v * v)
  out[...] = ml.sqrt(acc)


@mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[0],), jnp.float32), grid=lambda x, y: (x.shape[0] // 8,))
def ce_fori(x_ref, y_ref, o_ref):
  i = ml.program_id(0) * 8
  lab = y_ref[ml.ds(i, 8)]
  def body(c, carry):
    m, s, t = carry
    v = x_ref[ml.ds(i, 8), ml.ds(c * BV, BV)].astype(jnp.float32)
    mn = jnp.maximum(m, v.max(axis=1))
    s = s * jnp.exp(m - mn) + jnp.exp(v - mn[:, None]).sum(axis=1)
    t = t + jnp.where(c * BV + jnp.arange(BV)[None, :] == lab[:, None], v, 0.0).sum(axis=1)
    return mn, s, t
  init = (jnp.full((8,), -jnp.inf, jnp.float32), jnp.zeros((8,), jnp.float32), jnp.zeros((8,), jnp.float32))
  m, s, t = jax.lax.fori_loop(0, x_ref.shape[1] // BV, body, init)
  o_ref[ml.ds(i, 8)] = jnp.where(lab == -100, 0.0, m + jnp.log(s) - t)


@mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[0],), jnp.float32), grid=lambda x, y: (x.shape[0] // 64,))
def ce_pipelined(x, y, o):
  i = ml.program_id(0) * 64
  lab = y[ml.ds(i, 64)]
  m = ml.full((64,), float('-inf'), jnp.float32); s = ml.zeros((64,), jnp.float32); t = ml.zeros((64,), jnp.float32)
  buf = ml.smem((64, 256), x.dtype)
  for c in ml.range(0, x.shape[1] // 256, stages=2):
    ml.copy(x.at[ml.ds(i, 64), ml.ds(c * 256, 256)], buf)
    v = buf[...].astype(jnp.float32)
    mn = ml.maximum(m, ml.max(v, axis=1))
    s = s * ml.exp(m - mn) + ml.sum(ml.exp(v - mn[:, None]), axis=1)
    m = mn
    t += ml.sum(ml.where(c * 256 + ml.arange(256)[None, :] == lab[:, None], v, 0.0), axis=1)
  o[ml.ds(i, 64)] = ml.where(lab == -100, 0.0, m + ml.log(s) - t)


def _r(*s, scale=1.0, dtype=np.float32, seed=0):
  return (np.random.default_rng(seed + sum(s)).standard_normal(s) * scale).astype(dtype)


f64 = lambda a: np.asarray(a, np.float64)


def _lse(a, ax):
  m = a.max(ax, keepdims=True)
  return (np.log(np.exp(a - m).sum(ax, keepdims=True)) + m).squeeze(ax)


def _labels(n, v, seed=1):
  y = np.random.default_rng(seed).integers(0, v, n).astype(np.int32)
  y[::7] = -100
  return y


def _logits(n=64, v=4096, dtype=np.float32):
  return _r(n, v, scale=3, dtype=dtype), _labels(n, v)


def _ce(x, y, eps=0.0, z=0.0):
  x = f64(x)
  lse = _lse(x, 1)
  nll = lse - x[np.arange(len(y)), np.where(y < 0, 0, y)]
  nll = (1 - eps) * nll + eps * (lse - x.mean(1)) + z * lse ** 2
  return np.where(y == -100, 0.0, nll)


def _grad(x, y):
  xx = f64(x)
  p = np.exp(xx - _lse(xx, 1)[:, None])
  p[np.arange(len(y)), np.where(y < 0, 0, y)] -= 1
  return np.where((y == -100)[:, None], 0.0, p)


def _bwd_inputs():
  x, y = _logits()
  return x, y, _lse(f64(x), 1).astype(np.float32), np.array([1.5], np.float32)


def _keep(offsets, seed, p):
  bits = np.array([philox_reference(seed, 0, e)[0] for e in offsets], np.uint32).view(np.int32)
  return np.where(bits < 0, ~bits, bits).astype(np.float32) * np.float32(4.6566127342e-10) > p


def _sq_partials(g):
  n = -(-len(g) // 2048)
  gp = np.zeros(n * 2048)
  gp[:len(g)] = f64(g)
  return (gp.reshape(n, 2048) ** 2).sum(1)


def _flce_inputs():
  h, w = _r(128, 64, scale=0.3, dtype=jnp.bfloat16), _r(512, 64, scale=0.3, dtype=jnp.bfloat16, seed=3)
  return h, w, _labels(128, 512)


def _flce_bwd_inputs():
  h, w, y = _flce_inputs()
  w = w[:256]
  y = np.where(y >= 256, y - 256, y).astype(np.int32)
  return h, w, y, _lse(f64(h) @ f64(w).T, 1).astype(np.float32)


def _flce_bwd(h, w, y, lse):
  lg = f64(h) @ f64(w).T
  g = np.exp(lg - f64(lse)[:, None])
  g[np.arange(len(y)), np.where(y < 0, 0, y)] -= 1
  g = np.where((y != -100)[:, None], g, 0)
  return g @ f64(w), g.T @ f64(h)


def _kl_inputs():
  b = np.array(jax.nn.softmax(_r(16, 256, seed=5), -1))
  b[0, :5] = 0
  return np.asarray(jax.nn.log_softmax(_r(16, 256), -1)), b


def _kl(a, b):
  a, b = f64(a), f64(b)
  return np.where(b > 0, b * (np.log(np.where(b > 0, b, 1)) - a), 0).sum(1)


def _jsd(X, Y, beta=0.3):
  X, Y = f64(X), f64(Y)
  Q, P = np.exp(X), np.exp(Y)
  M = beta * P + (1 - beta) * Q
  return (beta * P * (Y - np.log(M)) + (1 - beta) * Q * (X - np.log(M))).sum(1)


def _focal(x, t, alpha=0.25, gamma=2.0):
  x = f64(x)
  p = 1 / (1 + np.exp(-x))
  ce = np.maximum(x, 0) - x * t + np.log1p(np.exp(-abs(x)))
  pt = p * t + (1 - p) * (1 - t)
  return (alpha * t + (1 - alpha) * (1 - t)) * ce * (1 - pt) ** gamma


def _clip_inputs():
  a, b = _r(64, 64), _r(64, 64, seed=9)
  a /= np.linalg.norm(a, axis=1, keepdims=True)
  b /= np.linalg.norm(b, axis=1, keepdims=True)
  return a.astype(jnp.bfloat16), b.astype(jnp.bfloat16), np.array([14.3], np.float32)


def _clip(a, b, s):
  lg = f64(a) @ f64(b).T * s[0]
  d = np.diag(lg)
  return ((_lse(lg, 1) - d).sum() + (_lse(lg, 0) - d).sum()) / (2 * len(d))


def _nce(q, k):
  lg = f64(q) @ f64(k).T * 10
  return _lse(lg, 1) - lg[np.arange(q.shape[0]), np.arange(q.shape[0])]


def _triplet(a, p, n):
  a, p, n = f64(a), f64(p), f64(n)
  return np.maximum(np.linalg.norm(a - p + 1e-6, axis=1) - np.linalg.norm(a - n + 1e-6, axis=1) + 1, 0)


def _cos(a, b, y):
  a, b = f64(a), f64(b)
  c = (a * b).sum(1) / np.sqrt((a * a).sum(1) * (b * b).sum(1) + 1e-12)
  return np.where(y == 1, 1 - c, np.maximum(c - 0.2, 0))


def _dpo_inputs():
  B, T = 16, 256
  g = np.random.default_rng(11)
  mc = (np.arange(T)[None, :] < g.integers(10, T, B)[:, None]).astype(np.int8)
  mr = (np.arange(T)[None, :] < g.integers(10, T, B)[:, None]).astype(np.int8)
  return (*[-np.abs(_r(B, T, seed=k)) for k in range(4)], mc, mr)


def _dpo(pc, pr, rc, rr, mc, mr, beta=0.1):
  s = lambda a, m: (f64(a) * m).sum(1)
  z = beta * ((s(pc, mc) - s(rc, mc)) - (s(pr, mr) - s(rr, mr)))
  return np.logaddexp(0, -z)


def _blp_inputs():
  y = np.random.default_rng(12).integers(0, 256, (4, 64)).astype(np.int32)
  y[:, :10] = -100
  return _r(4, 64, 256, scale=2), y


def _blp(x, y):
  x = f64(x)
  lp = x - _lse(x, 2)[..., None]
  g = np.take_along_axis(lp, np.where(y < 0, 0, y)[..., None], 2)[..., 0]
  return np.where(y != -100, g, 0).sum(1)


def _huber(x, t, delta=1.0):
  d = f64(x) - f64(t)
  ad, n = abs(d), len(d)
  return (np.where(ad < delta, 0.5 * d * d, delta * (ad - 0.5 * delta)).sum() / n,
          np.where(ad < delta, d, delta * np.sign(d)) / n)


def _sm_bwd(y, g):
  return f64(y) * (f64(g) - (f64(y) * f64(g)).sum(1, keepdims=True))


def _ticket(x, y):
  l = _ce(x, y)
  c = (y != -100).sum()
  return np.array([l.sum() / c]), np.array([l.sum(), c]), np.array([x.shape[0] // 8])


def _early(x, y):
  return _ce(x, y), _grad(x, y)


CASES = [
    (ce_fwd_row, lambda: _logits(), lambda x, y: _ce(x, y), 1e-4),
    (ce_fwd_row, lambda: _logits(dtype=jnp.bfloat16), lambda x, y: _ce(x, y), 1e-3),
    (ce_fwd_block, lambda: _logits(), lambda x, y: _ce(x, y, 0.1, 1e-4), 1e-4),
    (ce_mean_atomic, lambda: _logits(64, 512), lambda x, y: (_ce(x, y).sum(), (y != -100).sum()), 1e-3),
    (ce_bwd_inplace, _bwd_inputs, lambda x, y, l, g: _grad(x, y) * g[0] / (y != -100).sum(), 1e-5),
    (ce_tail, lambda: (_r(16, 1000, scale=3), _labels(16, 1000)), _ce, 1e-4),
    (ce_jnp, lambda: _logits(32, 512), _ce, 1e-4),
    (flce, _flce_inputs, lambda h, w, y: _ce(f64(h) @ f64(w).T, y), 2e-3),
    (flce_bwd, _flce_bwd_inputs, _flce_bwd, 3e-2),
    (kldiv, _kl_inputs, _kl, 1e-4),
    (jsd, lambda: (np.asarray(jax.nn.log_softmax(_r(16, 512), -1)), np.asarray(jax.nn.log_softmax(_r(16, 512, seed=4), -1))),
     lambda X, Y: _jsd(X, Y, 0.5), 1e-4),
    (focal, lambda: (_r(4096, scale=2), (np.random.default_rng(2).random(4096) > 0.7).astype(np.float32)), _focal, 1e-4),
    (clip_loss, _clip_inputs, _clip, 2e-3),
    (infonce, lambda: (_r(128, 64, scale=0.125, dtype=jnp.bfloat16), _r(256, 64, scale=0.125, dtype=jnp.bfloat16)), _nce, 2e-3),
    (triplet, lambda: (_r(64, 128), _r(64, 128, seed=1), _r(64, 128, seed=2)), _triplet, 1e-4),
    (cosemb, lambda: (_r(64, 128), _r(64, 128, seed=1), np.where(np.arange(64) % 3, 1, -1).astype(np.int32)), _cos, 1e-4),
    (dpo, _dpo_inputs, _dpo, 1e-4),
    (batch_logps, _blp_inputs, _blp, 1e-3),
    (huber, lambda: (_r(5000, scale=2), _r(5000, seed=1)), _huber, 1e-4),
    (softmax_bwd, lambda: (np.asarray(jax.nn.softmax(_r(64, 512), -1)), _r(64, 512, seed=1)), _sm_bwd, 1e-4),
    (logsoftmax_bwd, lambda: (np.asarray(jax.nn.log_softmax(_r(64, 512), -1)), _r(64, 512, seed=1)),
     lambda y, g: f64(g) - np.exp(f64(y)) * f64(g).sum(1, keepdims=True), 1e-4),
    (dropout_fwd, lambda: (_r(3000), np.int32(7)),
     lambda x, s: (np.where(_keep(range(len(x)), 7, 0.3), f64(x) / 0.7, 0), _keep(range(len(x)), 7, 0.3).astype(np.int8)), 1e-5),
    (dropout_bwd, lambda: (_r(3000), (np.random.default_rng(3).random(3000) > 0.3).astype(np.int8)),
     lambda g, m: np.where(m != 0, f64(g) / 0.7, 0), 1e-5),
    (sq_partials, lambda: (_r(10000),), _sq_partials, 1e-3),
    (clip_scale, lambda: (_r(10000), _sq_partials(_r(10000)).astype(np.float32)),
     lambda g, p: f64(g) * min(1.0 / (np.sqrt(f64(p).sum()) + 1e-6), 1.0), 1e-4),
    (multi_norm, lambda: (_r(64, 128), _r(256), _r(8, 32, dtype=jnp.bfloat16)),
     lambda a, b, c: np.sqrt((f64(a) ** 2).sum() + (f64(b) ** 2).sum() + (f64(c) ** 2).sum()), 1e-4),
    (ce_early_return, lambda: _logits(32, 512), _early, 1e-4),
    (ce_mean_ticket, lambda: _logits(32, 512), _ticket, 1e-4),
    (ce_fori, lambda: _logits(64, 2048), _ce, 1e-4),
    (ce_pipelined, lambda: _logits(64, 2048, jnp.bfloat16), _ce, 1e-3),
]


def _check(kernel, make, ref, tol, interpret):
  args = make()
  got, want = kernel(*args, interpret=interpret), ref(*args)
  got = got if isinstance(got, (tuple, list)) else (got,)
  want = want if isinstance(want, (tuple, list)) else (want,)
  assert len(got) == len(want)
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=tol, atol=tol)
  return args


@pytest.mark.parametrize("kernel,make,ref,tol", CASES, ids=[f"{i}-{c[0].__name__}" for i, c in enumerate(CASES)])
def test_theme_kernel_matches_numpy_and_builds(kernel, make, ref, tol):
  export(kernel, *_check(kernel, make, ref, tol, True))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel,make,ref,tol", CASES, ids=[f"{i}-{c[0].__name__}" for i, c in enumerate(CASES)])
def test_theme_kernel_on_the_gpu(kernel, make, ref, tol):
  _check(kernel, make, ref, max(tol, 1e-3), False)
