"""Probe 68a's references (float32 jnp) and input makers."""

import jax
import jax.numpy as jnp
import numpy as np

F32, BF16, F16, I32 = jnp.float32, jnp.bfloat16, jnp.float16, jnp.int32


def rng(seed):
  return np.random.default_rng(seed)


def normal(r, shape, dtype=BF16, scale=1.0):
  return jnp.asarray(r.standard_normal(shape) * scale, dtype)


def f(x):
  return jnp.asarray(x, F32)


def attn(q, k, v, scale, mask=None, bias=None, softcap=0.0, sink=None):
  """(o, lse) of softmax over the last axis of q @ k.T, any leading axes shared; mask broadcast against s."""
  s = jnp.einsum("...qd,...kd->...qk", f(q), f(k)) * scale
  if softcap:
    s = softcap * jnp.tanh(s / softcap)
  if bias is not None:
    s = s + bias
  if mask is not None:
    s = jnp.where(mask, s, -jnp.inf)
  if sink is not None:
    s = jnp.concatenate([s, jnp.broadcast_to(sink, s.shape[:-1] + (1,))], axis=-1)
  lse = jax.nn.logsumexp(s, axis=-1)
  p = jnp.exp(s - lse[..., None])
  if sink is not None:
    p = p[..., :-1]
  return jnp.einsum("...qk,...kd->...qd", p, f(v)), lse
