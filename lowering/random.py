"""Philox4x32 (ten rounds unless the op says otherwise) on both backends (frontend/ops/random.py defines it and
holds a reference).

On the GPU each register of the counter tensor goes through the rounds as vectors of
uint32: products' low words are `arith.muli`, high words one `mul.hi.u32` per element (inline
PTX, so the instruction is exactly that); keys are bumped as scalars. A scalar counter (`ml.rand(seed, pid)`)
goes through the same rounds as i32 scalars. The other counter words are zeros, scalars (broadcast) or registers
of tensors in the counter's layout. In interpret mode the same rounds run on numpy uint64 arrays. Both compute
exact integer functions, so they agree bit for bit.
"""
from __future__ import annotations

import numpy as np
from jax.experimental.mosaic.gpu import fragmented_array as fa
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, vector

from ..frontend.ops.random import M0, M1, MASK32, ROUNDS, W0, W1, Philox
from .mosaic import asm_per_element, operand
from .registry import interpret, lower


def _i32():
  return ir.IntegerType.get_signless(32)


def _const(v: int):
  return arith.constant(_i32(), v - (1 << 32) if v >= 1 << 31 else v)


def _mulhi(a, b):
  """High 32 bits of the unsigned product, per element of two vector<n x i32>."""
  return asm_per_element("mul.hi.u32 $0, $1, $2;", "=r,r,r", a, b)


def _key(ctx, k, i):
  """Key `k` for register `i`: an i32 scalar, or a tensor's register (a seed per element)."""
  k = operand(ctx, k)
  if isinstance(k, fa.FragmentedArray):
    return k.registers.flat[i]
  return k if isinstance(k, ir.Value) else _const(k)


def _bump(k, w: int):
  """Key `k` (an i32 scalar or a vector of them) plus the constant `w`, wrapping."""
  c = _const(w)
  return arith.addi(k, vector.broadcast(k.type, c) if isinstance(k.type, ir.VectorType) else c)


def _rounds(c0, c1, c2, c3, k0, k1, rounds=ROUNDS):
  """Philox4x32 of counters (c0, c1, c2, c3), vectors or scalars of one type (None: zeros); keys are i32
  scalars (bumped as scalars, broadcast each round) or of the counters' type (a seed per element)."""
  ty = c0.type
  splat = (lambda v: v if v.type == ty else vector.broadcast(ty, v)) if isinstance(ty, ir.VectorType) else (lambda v: v)
  zero = splat(_const(0)) if any(c is None for c in (c1, c2, c3)) else None
  c1, c2, c3 = (zero if c is None else c for c in (c1, c2, c3))
  m0, m1 = splat(_const(M0)), splat(_const(M1))
  for r in range(rounds):
    kv0, kv1 = splat(k0), splat(k1)
    hi0, lo0 = _mulhi(m0, c0), arith.muli(m0, c0)
    hi1, lo1 = _mulhi(m1, c2), arith.muli(m1, c2)
    c0, c1, c2, c3 = (arith.xori(arith.xori(hi1, c1), kv0), lo1,
                      arith.xori(arith.xori(hi0, c3), kv1), lo0)
    if r + 1 < rounds:
      k0, k1 = _bump(k0, W0), _bump(k1, W1)
  return c0, c1, c2, c3


def _word(ctx, c, reg_type, k):
  """Counter word `c` for register `k` (of type `reg_type`): None for a static 0, a static or scalar one
  broadcast, a tensor's own register."""
  if isinstance(c, int) and c == 0:
    return None
  v = ctx.get(c) if not isinstance(c, int) else _const(c)
  if isinstance(v, fa.FragmentedArray):
    return v.registers.flat[k]
  return vector.broadcast(reg_type, v) if isinstance(reg_type, ir.VectorType) else v


@lower(Philox)
def _philox(ctx, o):
  x = ctx.get(o.counter)
  if not isinstance(x, fa.FragmentedArray):       # a scalar counter: scalar results
    k0, k1 = _key(ctx, o.key0, 0), _key(ctx, o.key1, 0)
    for r, v in zip(o.results, _rounds(x, *(_word(ctx, c, x.type, 0) for c in (o.c1, o.c2, o.c3)), k0, k1,
                                       o.rounds)):
      ctx.set(r, v)
    return
  words = [np.empty(x.registers.shape, dtype=object) for _ in range(4)]
  for k, reg in enumerate(x.registers.flat):
    cs = (_word(ctx, c, reg.type, k) for c in (o.c1, o.c2, o.c3))
    k0, k1 = _key(ctx, o.key0, k), _key(ctx, o.key1, k)
    for w, v in zip(words, _rounds(reg, *cs, k0, k1, o.rounds)):
      w.flat[k] = v
  for r, w in zip(o.results, words):
    ctx.set(r, fa.FragmentedArray(_registers=w, _layout=x.layout, _is_signed=False))


# ---------------------------------------------------------------- interpreter
def philox_numpy(key0, key1, c0, c1=0, c2=0, c3=0, rounds=ROUNDS):
  """Philox4x32 of counters (c0, c1, c2, c3) on numpy arrays (uint64 holding 32-bit words; c1, c2, c3
  broadcast against c0)."""
  c0 = np.asarray(c0, np.uint64)
  c1, c2, c3 = (np.broadcast_to(np.asarray(c, np.uint64) & np.uint64(MASK32), c0.shape) for c in (c1, c2, c3))
  k0, k1 = (np.asarray(k, np.uint64) & np.uint64(MASK32) for k in (key0, key1))
  m = np.uint64(MASK32)
  for _ in range(rounds):
    p0, p1 = np.uint64(M0) * c0, np.uint64(M1) * c2
    c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0) & m, p1 & m, ((p0 >> np.uint64(32)) ^ c3 ^ k1) & m, p0 & m
    k0, k1 = (k0 + np.uint64(W0)) & m, (k1 + np.uint64(W1)) & m
  return [w.astype(np.uint32) for w in (c0, c1, c2, c3)]


@interpret(Philox)
def _i_philox(cta, o):
  keys = [np.asarray(cta.operand(k)).astype(np.uint32) for k in (o.key0, o.key1)]
  cs = [np.asarray(cta.operand(c)).astype(np.uint32) for c in (o.c1, o.c2, o.c3)]
  c0 = cta.get(o.counter)
  for r, w in zip(o.results, philox_numpy(*keys, c0, *cs, rounds=o.rounds)):
    cta.set(r, w if np.ndim(c0) else w[()])


