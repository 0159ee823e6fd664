"""Philox4x32-10 on both backends (frontend/ops/random.py defines it and holds a reference).

On the GPU each register of the counter tensor goes through the ten rounds as vectors of
uint32: products' low words are `arith.muli`, high words one `mul.hi.u32` per element (inline
PTX, so the instruction is exactly that); keys are bumped as scalars. In interpret mode the
same rounds run on numpy uint64 arrays. Both compute exact integer functions, so they agree
bit for bit.
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


def _key(ctx, k):
  k = operand(ctx, k)
  return k if isinstance(k, ir.Value) else _const(k)


def _rounds(c0, k0, k1):
  """Philox4x32-10 of counters (c0, 0, 0, 0), vectors; keys are i32 scalars."""
  vty = c0.type
  zero = vector.broadcast(vty, _const(0))
  c1 = c2 = c3 = zero
  m0, m1 = vector.broadcast(vty, _const(M0)), vector.broadcast(vty, _const(M1))
  for r in range(ROUNDS):
    kv0, kv1 = vector.broadcast(vty, k0), vector.broadcast(vty, k1)
    hi0, lo0 = _mulhi(m0, c0), arith.muli(m0, c0)
    hi1, lo1 = _mulhi(m1, c2), arith.muli(m1, c2)
    c0, c1, c2, c3 = (arith.xori(arith.xori(hi1, c1), kv0), lo1,
                      arith.xori(arith.xori(hi0, c3), kv1), lo0)
    if r + 1 < ROUNDS:
      k0, k1 = arith.addi(k0, _const(W0)), arith.addi(k1, _const(W1))
  return c0, c1, c2, c3


@lower(Philox)
def _philox(ctx, o):
  x = ctx.get(o.counter)
  k0, k1 = _key(ctx, o.key0), _key(ctx, o.key1)
  words = [np.empty(x.registers.shape, dtype=object) for _ in range(4)]
  for k, reg in enumerate(x.registers.flat):
    for w, v in zip(words, _rounds(reg, k0, k1)):
      w.flat[k] = v
  for r, w in zip(o.results, words):
    ctx.set(r, fa.FragmentedArray(_registers=w, _layout=x.layout, _is_signed=False))


# ---------------------------------------------------------------- interpreter
def philox_numpy(key0, key1, c0):
  """Philox4x32-10 of counters (c0, 0, 0, 0) on numpy arrays (uint64 holding 32-bit words)."""
  c0 = np.asarray(c0, np.uint64)
  c1 = c2 = c3 = np.zeros_like(c0)
  k0, k1 = np.uint64(int(key0) & MASK32), np.uint64(int(key1) & MASK32)
  m = np.uint64(MASK32)
  for _ in range(ROUNDS):
    p0, p1 = np.uint64(M0) * c0, np.uint64(M1) * c2
    c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0) & m, p1 & m, ((p0 >> np.uint64(32)) ^ c3 ^ k1) & m, p0 & m
    k0, k1 = (k0 + np.uint64(W0)) & m, (k1 + np.uint64(W1)) & m
  return [w.astype(np.uint32) for w in (c0, c1, c2, c3)]


@interpret(Philox)
def _i_philox(cta, o):
  keys = [int(np.asarray(cta.operand(k)).astype(np.uint64)) for k in (o.key0, o.key1)]
  for r, w in zip(o.results, philox_numpy(*keys, cta.get(o.counter))):
    cta.set(r, w)
