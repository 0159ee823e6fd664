"""Counter-based random numbers: Philox 4x32-10 (Salmon et al., SC'11; Random123), as Triton has.

`ml.randint(seed, offsets)` is the first 32-bit word of Philox4x32-10 with key = the seed's
low and high 32 bits and counter = (offset, 0, 0, 0): the same numbers as Triton's
`tl.randint(seed, offsets)`. No state: the same (seed, offset) always gives the same number,
on the GPU and in interpret mode alike (bit for bit), so a kernel draws independent numbers
per element by giving each its own offset (its index). `ml.rand` makes floats in [0, 1) as Triton's
`tl.rand` does (`uint_to_uniform_float`), and `ml.randn` normal ones as `tl.randn` (Box-Muller), so a mask
drawn here from a seed is the mask a Triton kernel draws from it (probe 47g).
"""
from __future__ import annotations

from .. import errors as E
from .. import ir
from ..dtypes import DType
from ..ir import LayoutRule, Traits
from ..types import ScalarType, TensorType, resolve
from . import elementwise as ew
from .elementwise_checks import float_param, method_on
from .base import builtin, is_scalar, is_tensor, is_value, kind_of

ROUNDS = 10
M0, M1 = 0xD2511F53, 0xCD9E8D57       # round multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85       # key increments (the golden ratio, sqrt(3) - 1)
MASK32 = 0xFFFFFFFF


@ir.op(Traits(layout=LayoutRule.ELEMENTWISE, pure=True))
class Philox(ir.Op):
  """The four uint32 words of Philox4x32-10 at counter (counter, 0, 0, 0) under key (key0, key1).

  Keys are static ints or uint32 scalars; `counter` a uint32 tensor.
  """
  key0: ir.Operand
  key1: ir.Operand
  counter: ir.Value
  loc: object
  results: tuple


def philox_reference(key0: int, key1: int, c0: int, c1: int = 0, c2: int = 0, c3: int = 0):
  """Philox4x32-10 on Python ints, for tests and as the definition of the op."""
  for _ in range(ROUNDS):
    p0, p1 = M0 * c0, M1 * c2
    c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ key0) & MASK32, p1 & MASK32, ((p0 >> 32) ^ c3 ^ key1) & MASK32, p0 & MASK32
    key0, key1 = (key0 + W0) & MASK32, (key1 + W1) & MASK32
  return c0, c1, c2, c3


_TENSOR_SEED = ("one seed a call (Philox's key is uniform across the CTA, where Triton's tl.rand broadcasts a tensor of"
                " seeds): read one seed a program or a row as a scalar, seed = seed_ptr[row] (the Triton tutorial's seed"
                " per row); for a seed per element, give each (seed, offset) pair its own counter under one seed:"
                " ml.rand(1234, {0} * n + offsets), n above every offset")


def _keys(cx, seed):
  """(key0, key1): the seed's low and high 32 bits (a signed seed sign-extends, as Triton's; 8- and
  16-bit seeds widen by their signedness)."""
  if isinstance(seed, int) and not isinstance(seed, bool):
    if not -(1 << 63) <= seed < (1 << 64):
      raise E.KernelTypeError(f"a random seed must fit in 64 bits, got {seed}", cx.loc, hint="seed=1234")
    seed &= (1 << 64) - 1
    return seed & MASK32, seed >> 32
  d = resolve(seed.type.dtype) if is_scalar(seed) else None
  bits = lambda v: cx.b.emit(ew.Cast, v, loc=cx.loc, types=[ScalarType(DType.u32)], bitcast=True).result
  if d is not None and d.is_int and d.bits < 32:   # widened by signedness, as Triton's .to(tl.uint64)
    d = DType.i32 if d.is_signed else DType.u32
    seed = ew.astype(cx, seed, d)
  if d == DType.i64:              # jax_enable_x64: its two 32-bit halves, as a Python int's
    lo = ew.astype(cx, seed, DType.i32)
    return bits(lo), bits(ew.astype(cx, ew.binary(cx, ew.BinOp.SHR, seed, 32), DType.i32))
  if d not in (DType.i32, DType.u32):
    raise float_param(cx, seed, E.KernelTypeError(
        f"a random seed must be a Python int or an integer scalar, got {kind_of(seed)}"
        + (f" ({d})" if d is not None else ""), cx.loc,
        hint=(f"convert it: {method_on(cx.named(seed, 'seed'))}.astype(jnp.int32), or pass a Python int" if d is not None
              else _TENSOR_SEED.format(cx.named(seed, "seeds")) if is_value(seed) and isinstance(seed.type, TensorType)
              else "pass the seed as an ml.scalar parameter (seed: ml.scalar) or read it: seed = s[...]")), "a random seed")
  if d == DType.u32:
    return seed, 0
  hi = ew.astype(cx, ew.binary(cx, ew.BinOp.SHR, seed, 31), DType.i32)
  return bits(seed), bits(hi)


def philox(cx, seed, offsets, what):
  if not is_tensor(offsets):
    raise E.KernelTypeError(
        f"{what}'s offsets must be an int32 or uint32 tensor (one counter per number), got {kind_of(offsets)}",
        cx.loc, hint="give each element its own offset: i * 1024 + ml.arange(1024)")
  d = resolve(offsets.type.dtype)
  if d not in (DType.i32, DType.u32):
    raise E.UnsupportedDtypeError(f"{what}'s offsets must be int32 or uint32, got {d}", cx.loc,
                                  hint="convert them: offsets.astype(jnp.int32)")
  k0, k1 = _keys(cx, seed)
  counter = offsets if d == DType.u32 else cx.b.emit(
      ew.Cast, offsets, loc=cx.loc, types=[TensorType(offsets.type.shape, DType.u32)], bitcast=True).result
  t = TensorType(offsets.type.shape, DType.u32)
  return cx.b.emit(Philox, k0, k1, counter, loc=cx.loc, types=[t] * 4, names=[cx.name] * 4).results


@builtin
def randint(cx, seed, offsets):
  """Random uint32s, one per offset: `ml.randint(seed, i * 1024 + ml.arange(1024))`.

  Philox4x32-10 (the first word, as Triton's `tl.randint`); `seed` a Python int or an integer
  scalar (e.g. an `ml.scalar` parameter, so each seed needs no recompile).
  """
  return philox(cx, seed, offsets, "ml.randint")[0]


@builtin
def randint4x(cx, seed, offsets):
  """The four uint32 words of one Philox4x32-10 evaluation per offset (four numbers per call)."""
  return tuple(philox(cx, seed, offsets, "ml.randint4x"))


# Triton's uint_to_uniform_float for 32-bit words: the largest float32 scale whose product with 2**31 - 1
# stays below 1.0
UNIFORM_SCALE = 4.6566127342e-10
TWO_PI = 6.283185307179586


def uniform(cx, bits):
  """Triton's `uint_to_uniform_float` of uint32 words `bits`: the word as an int32, a negative one folded onto
  -x - 1 (its complement, ~x), converted to float32 and times UNIFORM_SCALE: [0, 1), as `tl.rand` draws."""
  from .elementwise_fns import bitcast
  i = bitcast.rule(cx, bits, DType.i32)
  folded = ew.where_(cx, ew.compare(cx, ew.CmpOp.LT, i, 0), ew.binary(cx, ew.BinOp.XOR, i, -1), i)
  return ew.binary(cx, ew.BinOp.MUL, ew.astype(cx, folded, DType.f32), UNIFORM_SCALE)


def normal_pair(cx, u1, u2):
  """Triton's `pair_uniform_to_normal` (Box-Muller): u1 floored at 1e-7, r = sqrt(-2 log u1), th = 2 pi u2;
  (r cos th, r sin th)."""
  from .elementwise_fns import cos, log, maximum, sin, sqrt
  r = sqrt.rule(cx, ew.binary(cx, ew.BinOp.MUL, -2.0, log.rule(cx, maximum.rule(cx, 1.0e-7, u1))))
  th = ew.binary(cx, ew.BinOp.MUL, TWO_PI, u2)
  return ew.binary(cx, ew.BinOp.MUL, r, cos.rule(cx, th)), ew.binary(cx, ew.BinOp.MUL, r, sin.rule(cx, th))


@builtin
def rand(cx, seed, offsets):
  """Uniform float32s in [0, 1), one per offset, Triton's `tl.rand(seed, offsets)` bit for bit: the word of
  `ml.randint(seed, offsets)` as an int32, a negative one folded onto -x - 1, times 4.6566127342e-10.

  `keep = ml.rand(seed, idx) > p` draws a dropout mask that depends only on (seed, idx), the mask a Triton
  kernel draws from the same seed (since probe 47g; it was `(randint >> 8) * 2**-24`).
  """
  return uniform(cx, philox(cx, seed, offsets, "ml.rand")[0])


@builtin
def rand4x(cx, seed, offsets):
  """Four uniform float32s per offset, from the four Philox words (Triton's `tl.rand4x`)."""
  return tuple(uniform(cx, w) for w in philox(cx, seed, offsets, "ml.rand4x"))


@builtin
def randn(cx, seed, offsets):
  """Standard normal float32s, one per offset, Triton's `tl.randn(seed, offsets)`: Box-Muller of the uniforms
  of the first two Philox words, their cosine branch (libdevice's log, sqrt and cos on the GPU, NumPy's in
  interpret mode: within a few ulp)."""
  w = philox(cx, seed, offsets, "ml.randn")
  return normal_pair(cx, uniform(cx, w[0]), uniform(cx, w[1]))[0]


@builtin
def randn4x(cx, seed, offsets):
  """Four standard normal float32s per offset (Triton's `tl.randn4x`): Box-Muller of words 0 and 1, then of
  words 2 and 3."""
  u = [uniform(cx, w) for w in philox(cx, seed, offsets, "ml.randn4x")]
  return normal_pair(cx, u[0], u[1]) + normal_pair(cx, u[2], u[3])
