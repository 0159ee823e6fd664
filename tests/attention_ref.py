"""Attention's reference in NumPy float64, forward and vjp, for the interpret-mode tests.

The same math as `examples/attention.py`'s `reference` (jnp, float32) and `jax.vjp` of it, without an
XLA compile per shape (about half a second each on a CI core, a third of test_attention's time); on
the GPU the tests keep the jnp reference. (batch, seq, heads, head_dim) arrays, GQA (fewer kv heads),
the causal mask aligned at the top left as the reference's `jnp.tril`.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np


def _heads(q, k, v):
  """q, k, v as float64 (batch, heads, seq, head_dim), k and v repeated to q's heads."""
  g = q.shape[2] // k.shape[2]
  f = lambda a: np.asarray(a, np.float64).transpose(0, 2, 1, 3)
  return f(q), np.repeat(f(k), g, axis=1), np.repeat(f(v), g, axis=1), g


def _probabilities(q, k, causal, scale):
  s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
  if causal:
    s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
  m = s.max(-1, keepdims=True)
  lse = m + np.log(np.exp(s - m).sum(-1, keepdims=True))
  return np.exp(s - lse), lse[..., 0]


def _like(a, x):
  return jnp.asarray(np.asarray(a).astype(np.dtype(x.dtype)))


def forward(q, k, v, causal=False, sm_scale=None):
  """(o in q's dtype, logsumexp (batch, heads, seq) in float32)."""
  scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(q.shape[-1])
  qh, kh, vh, _ = _heads(q, k, v)
  p, lse = _probabilities(qh, kh, causal, scale)
  o = np.einsum("bhqk,bhkd->bqhd", p, vh)
  return _like(o, q), jnp.asarray(lse.astype(np.float32))


def vjp(q, k, v, causal=False, sm_scale=None):
  """(o, f) with f(do) = (dq, dk, dv) in the inputs' dtypes: `jax.vjp` of the reference's output."""
  scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(q.shape[-1])
  qh, kh, vh, g = _heads(q, k, v)
  p, _ = _probabilities(qh, kh, causal, scale)
  o = np.einsum("bhqk,bhkd->bqhd", p, vh)

  def grads(do):
    dout = np.asarray(do, np.float64).transpose(0, 2, 1, 3)
    dp = np.einsum("bhqd,bhkd->bhqk", dout, vh)
    ds = p * (dp - (p * dp).sum(-1, keepdims=True))
    dq = np.einsum("bhqk,bhkd->bqhd", ds, kh) * scale
    per_group = lambda a: a.reshape(a.shape[0], a.shape[1] // g, g, *a.shape[2:]).sum(2).transpose(0, 2, 1, 3)
    dk = per_group(np.einsum("bhqk,bhqd->bhkd", ds, qh) * scale)
    dv = per_group(np.einsum("bhqk,bhqd->bhkd", p, dout))
    return _like(dq, q), _like(dk, k), _like(dv, v)

  return _like(o, q), grads
