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

import math

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
  """The four uint32 words of Philox4x32 (`rounds` rounds, 10 by default) at counter (counter, c1, c2, c3) under
  key (key0, key1).

  Keys are static ints, uint32 scalars or uint32 tensors of the counter's shape (a seed per element); `counter` a
  uint32 tensor or scalar (the results' shape); c1, c2, c3 static ints, uint32 scalars or uint32 tensors of the
  counter's shape (Triton's `tl.philox`, and the high word of
  a 64-bit offset, probe 49g).
  """
  key0: ir.Operand
  key1: ir.Operand
  counter: ir.Value
  c1: ir.Operand
  c2: ir.Operand
  c3: ir.Operand
  loc: object
  results: tuple
  rounds: int = ROUNDS


def philox_reference(key0: int, key1: int, c0: int, c1: int = 0, c2: int = 0, c3: int = 0, rounds: int = ROUNDS):
  """Philox4x32 (`rounds` rounds) on Python ints, for tests and as the definition of the op."""
  for _ in range(rounds):
    p0, p1 = M0 * c0, M1 * c2
    c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ key0) & MASK32, p1 & MASK32, ((p0 >> 32) ^ c3 ^ key1) & MASK32, p0 & MASK32
    key0, key1 = (key0 + W0) & MASK32, (key1 + W1) & MASK32
  return c0, c1, c2, c3


def _keys(cx, seed):
  """(key0, key1): the seed's low and high 32 bits (a signed seed sign-extends, as Triton's; 8- and
  16-bit seeds widen by their signedness). A one-element tensor (`ml.load(seed_ptr)` of a (1,) array, Triton's
  `tl.load(seed_ptr)`) is its element; a tensor of seeds gives tensors of keys, a seed per element (Triton's
  tl.rand broadcasts one against the offsets, probe 49g)."""
  if is_tensor(seed) and math.prod(seed.type.shape) == 1:
    from .one_element import element_of
    seed = element_of(cx, seed)
  if isinstance(seed, int) and not isinstance(seed, bool):
    if not -(1 << 63) <= seed < (1 << 64):
      raise E.KernelTypeError(f"a random seed must fit in 64 bits, got {seed}", cx.loc, hint="seed=1234")
    seed &= (1 << 64) - 1
    return seed & MASK32, seed >> 32
  d = resolve(seed.type.dtype) if is_scalar(seed) or is_tensor(seed) else None
  if d is not None and d.is_int and d.bits < 32:   # widened by signedness, as Triton's .to(tl.uint64)
    d = DType.i32 if d.is_signed else DType.u32
    seed = ew.astype(cx, seed, d)
  if d == DType.i64:   # jax_enable_x64: its two 32-bit halves, as a Python int's
    lo, hi = _halves(cx, seed)
    return lo, hi
  if d not in (DType.i32, DType.u32):
    raise float_param(cx, seed, E.KernelTypeError(
        f"a random seed must be a Python int or an integer scalar, got {kind_of(seed)}"
        + (f" ({d})" if d is not None else ""), cx.loc,
        hint=(f"convert it: {method_on(cx.named(seed, 'seed'))}.astype(jnp.int32), or pass a Python int" if d is not None
              else "pass the seed as an ml.scalar parameter (seed: ml.scalar) or read it: seed = s[...]")), "a random seed")
  if d == DType.u32:
    return seed, 0
  hi = ew.astype(cx, ew.binary(cx, ew.BinOp.SHR, seed, 31), DType.i32)
  return _bits(cx, seed), _bits(cx, hi)


def _bits(cx, v):
  """A 32-bit integer value's bits as uint32 (itself where it is one)."""
  if resolve(v.type.dtype) == DType.u32:
    return v
  t = ScalarType(DType.u32) if isinstance(v.type, ScalarType) else TensorType(v.type.shape, DType.u32)
  return cx.b.emit(ew.Cast, v, loc=cx.loc, types=[t], bitcast=True).result


def _halves(cx, v):
  """A 64-bit integer value's low and high 32-bit words, as uint32."""
  lo = ew.astype(cx, v, DType.i32)   # (int -> int wraps)
  return _bits(cx, lo), _bits(cx, ew.astype(cx, ew.binary(cx, ew.BinOp.SHR, v, 32), DType.i32))


def _rounds(cx, n_rounds, what):
  if isinstance(n_rounds, bool) or not isinstance(n_rounds, int) or n_rounds < 0:
    raise E.KernelTypeError(
        f"{what}'s n_rounds must be a static int of 0 or more (Philox's rounds, Triton's n_rounds constexpr), got "
        f"{kind_of(n_rounds) if is_value(n_rounds) else repr(n_rounds)}", cx.loc,
        hint="n_rounds=10 (the default; Triton's N_ROUNDS_DEFAULT), or a constexpr parameter: n_rounds=N_ROUNDS")
  return n_rounds


def _word(cx, c, what, arg, wide=False):
  """A counter word as uint32 (a value's bits; a Python int's low 32 bits), or a 64-bit value's (lo, hi) where
  `wide`; 8- and 16-bit integers widen by their signedness first, as Triton's `.to(tl.uint32)`."""
  if isinstance(c, int) and not isinstance(c, bool):
    if not -(1 << 63) <= c < (1 << 64):
      raise E.KernelTypeError(f"{what}'s {arg} must fit in 64 bits, got {c}", cx.loc, hint=f"{arg} % 2**32")
    c &= (1 << 64) - 1
    return (c & MASK32, c >> 32) if wide else c & MASK32
  d = resolve(c.type.dtype) if is_value(c) and isinstance(c.type, (ScalarType, TensorType)) else None
  if d is None or not d.is_int or d == DType.bool_:
    if is_tensor(c) or is_scalar(c):
      raise E.UnsupportedDtypeError(
          f"{what}'s {arg} must be integers (int32 or uint32: one counter per number), got {d}", cx.loc,
          hint=f"convert them: {method_on(cx.named(c, arg))}.astype(jnp.int32)")
    raise E.KernelTypeError(
        f"{what}'s {arg} must be an integer tensor (one counter per number) or scalar, got {kind_of(c)}",
        cx.loc, hint="give each element its own offset: i * 1024 + ml.arange(1024)")
  if d.bits < 32:
    c = ew.astype(cx, c, DType.i32 if d.is_signed else DType.u32)
  elif d.bits == 64:
    if not wide:
      raise E.UnsupportedDtypeError(
          f"{what}'s {arg} is {d}: ml.philox's counters are 32-bit words (Philox4x32; Triton's 64-bit form,"
          " Philox4x64, is not supported)", cx.loc,
          hint=f"split it into two words: {cx.named(c, arg)} & 0xFFFFFFFF and {cx.named(c, arg)} >> 32, each"
               " .astype(jnp.uint32)")
    return _halves(cx, c)
  return (_bits(cx, c), 0) if wide else _bits(cx, c)


def _same_shape(cx, what, named):
  """The tensors among `named` ((value, default name) pairs: the seed, offsets or counters as the user wrote them)
  broadcast to one shape; else MG202 naming them (before their keys and words, which have no names)."""
  from .shape import broadcast_shape
  ts = [(v, cx.named(v, n)) for v, n in named if is_tensor(v)]
  if len(ts) > 1:
    broadcast_shape(cx, [v.type.shape for v, _ in ts], what, [n for _, n in ts])


def philox(cx, seed, offsets, what, n_rounds=ROUNDS):
  """The four Philox words of `offsets` as Triton's `randint4x` draws them: counter (offset's low word, its high
  word (a 64-bit offset's, else 0), 0, 0)."""
  _same_shape(cx, what, [(seed, "seed"), (offsets, "offsets")])
  lo, hi = _word(cx, offsets, what, "offsets", wide=True)
  return philox_words(cx, seed, (lo, hi, 0, 0), what, n_rounds)


def philox_words(cx, seed, counters, what, n_rounds=ROUNDS):
  """Philox4x32's four words of uint32 counters (c0, c1, c2, c3): values or static ints, tensors broadcast
  to one shape (a static c0 becomes a uint32 scalar)."""
  from .shape import broadcast_operands
  rounds = _rounds(cx, n_rounds, what)
  k0, k1 = _keys(cx, seed)
  (k0, k1, *cs), shape = broadcast_operands(cx, (k0, k1, *counters), what)   # (a tensor of seeds: keys per element)
  cs = tuple(cs)
  if shape is None and not is_value(cs[0]):
    cs = (ew.constant(cx, cs[0], DType.u32),) + cs[1:]
  elif shape is not None and not is_tensor(cs[0]):      # (the counter carries the results' shape)
    cs = (ew.full_(cx, shape, cs[0], DType.u32),) + cs[1:]
  t = TensorType(shape, DType.u32) if shape is not None else ScalarType(DType.u32)
  return cx.b.emit(Philox, k0, k1, *cs, rounds=rounds, loc=cx.loc, types=[t] * 4,
                   names=[cx.name] * 4).results


@builtin
def randint(cx, seed, offsets, n_rounds=ROUNDS):
  """Random uint32s, one per offset: `ml.randint(seed, i * 1024 + ml.arange(1024))`.

  Philox4x32-10 (the first word, as Triton's `tl.randint`); `seed` a Python int or an integer
  scalar (e.g. an `ml.scalar` parameter, so each seed needs no recompile). `offsets` an integer tensor or
  scalar (a 64-bit one's high word is the second counter word, as Triton's); `n_rounds` Philox's rounds.
  """
  return philox(cx, seed, offsets, "ml.randint", n_rounds)[0]


@builtin
def randint4x(cx, seed, offsets, n_rounds=ROUNDS):
  """The four uint32 words of one Philox4x32-10 evaluation per offset (four numbers per call)."""
  return tuple(philox(cx, seed, offsets, "ml.randint4x", n_rounds))


@builtin(name="philox")
def philox_(cx, seed, c0, c1, c2, c3, n_rounds=ROUNDS):
  """Triton's `tl.philox(seed, c0, c1, c2, c3, n_rounds=10)`: the four uint32 words of Philox4x32 at the
  counter (c0, c1, c2, c3), 32-bit integer tensors, scalars or Python ints broadcast to one shape (FlagGems'
  dropout: c0 = offset's low word + ml.arange(...), c1 = its high word)."""
  _same_shape(cx, "ml.philox", [(seed, "seed"), (c0, "c0"), (c1, "c1"), (c2, "c2"), (c3, "c3")])
  cs = tuple(_word(cx, c, "ml.philox", a) for c, a in zip((c0, c1, c2, c3), ("c0", "c1", "c2", "c3")))
  return tuple(philox_words(cx, seed, cs, "ml.philox", n_rounds))


# Triton's uint_to_uniform_float for 32-bit words: the largest float32 scale whose product with 2**31 - 1
# stays below 1.0 (for 64-bit words, with 2**63 - 1)
UNIFORM_SCALE = 4.6566127342e-10
UNIFORM_SCALE64 = 1.0842020432385337e-19
TWO_PI = 6.283185307179586


def uniform(cx, bits):
  """Triton's `uint_to_uniform_float` of 32-bit words `bits`: the word as an int32, a negative one folded onto
  -x - 1 (its complement, ~x), converted to float32 and times UNIFORM_SCALE: [0, 1), as `tl.rand` draws."""
  from .elementwise_fns import bitcast
  i = bitcast.rule(cx, bits, DType.i32) if resolve(bits.type.dtype) != DType.i32 else bits
  folded = ew.where_(cx, ew.compare(cx, ew.CmpOp.LT, i, 0), ew.binary(cx, ew.BinOp.XOR, i, -1), i)
  return ew.binary(cx, ew.BinOp.MUL, ew.astype(cx, folded, DType.f32), UNIFORM_SCALE)


@builtin
def uint_to_uniform_float(cx, x):
  """Triton's `tl.uint_to_uniform_float(x)`: random 32-bit integers (uint32 or int32, as `ml.randint` gives)
  to float32s in [0, 1), as `ml.rand` makes them; int64 ones (jax_enable_x64) with Triton's 64-bit scale."""
  d = resolve(x.type.dtype) if is_value(x) and isinstance(x.type, (ScalarType, TensorType)) else None
  if d in (DType.i32, DType.u32):
    return uniform(cx, x)
  if d == DType.i64:          # (jax_enable_x64)
    folded = ew.where_(cx, ew.compare(cx, ew.CmpOp.LT, x, 0), ew.binary(cx, ew.BinOp.XOR, x, -1), x)
    return ew.binary(cx, ew.BinOp.MUL, ew.astype(cx, folded, DType.f32), UNIFORM_SCALE64)
  raise E.UnsupportedDtypeError(
      f"ml.uint_to_uniform_float takes random uint32 or int32 words (ml.randint's), got "
      f"{kind_of(x)}" + (f" ({d})" if d is not None else ""), cx.loc,
      hint="ml.uint_to_uniform_float(ml.randint(seed, offsets)), or draw the floats at once: ml.rand(seed, offsets)")


def normal_pair(cx, u1, u2):
  """Triton's `pair_uniform_to_normal` (Box-Muller): u1 floored at 1e-7, r = sqrt(-2 log u1), th = 2 pi u2;
  (r cos th, r sin th)."""
  from .elementwise_fns import cos, log, maximum, sin, sqrt
  r = sqrt.rule(cx, ew.binary(cx, ew.BinOp.MUL, -2.0, log.rule(cx, maximum.rule(cx, 1.0e-7, u1))))
  th = ew.binary(cx, ew.BinOp.MUL, TWO_PI, u2)
  return ew.binary(cx, ew.BinOp.MUL, r, cos.rule(cx, th)), ew.binary(cx, ew.BinOp.MUL, r, sin.rule(cx, th))


@builtin
def pair_uniform_to_normal(cx, u1, u2):
  """Triton's `tl.pair_uniform_to_normal(u1, u2)`: two standard normals from two uniforms in [0, 1) by
  Box-Muller, (r cos th, r sin th) with r = sqrt(-2 log max(u1, 1e-7)), th = 2 pi u2 (`ml.randn`'s)."""
  for u, a in ((u1, "u1"), (u2, "u2")):
    d = resolve(u.type.dtype) if is_value(u) and isinstance(u.type, (ScalarType, TensorType)) else None
    if d is None or not d.is_float:
      raise E.UnsupportedDtypeError(
          f"ml.pair_uniform_to_normal's {a} must be uniform floats in [0, 1), got {kind_of(u)}"
          + (f" ({d})" if d is not None else ""), cx.loc,
          hint="ml.pair_uniform_to_normal(ml.uint_to_uniform_float(r1), ml.uint_to_uniform_float(r2)) of words"
               " r1, r2 of ml.randint4x")
  return normal_pair(cx, u1, u2)


@builtin
def rand(cx, seed, offsets, n_rounds=ROUNDS):
  """Uniform float32s in [0, 1), one per offset, Triton's `tl.rand(seed, offsets)` bit for bit: the word of
  `ml.randint(seed, offsets)` as an int32, a negative one folded onto -x - 1, times 4.6566127342e-10.

  `keep = ml.rand(seed, idx) > p` draws a dropout mask that depends only on (seed, idx), the mask a Triton
  kernel draws from the same seed (since probe 47g; it was `(randint >> 8) * 2**-24`).
  """
  return uniform(cx, philox(cx, seed, offsets, "ml.rand", n_rounds)[0])


@builtin
def rand4x(cx, seed, offsets, n_rounds=ROUNDS):
  """Four uniform float32s per offset, from the four Philox words (Triton's `tl.rand4x`)."""
  return tuple(uniform(cx, w) for w in philox(cx, seed, offsets, "ml.rand4x", n_rounds))


@builtin
def randn(cx, seed, offsets, n_rounds=ROUNDS):
  """Standard normal float32s, one per offset, Triton's `tl.randn(seed, offsets)`: Box-Muller of the uniforms
  of the first two Philox words, their cosine branch (libdevice's log, sqrt and cos on the GPU, NumPy's in
  interpret mode: within a few ulp)."""
  w = philox(cx, seed, offsets, "ml.randn", n_rounds)
  return normal_pair(cx, uniform(cx, w[0]), uniform(cx, w[1]))[0]


@builtin
def randn4x(cx, seed, offsets, n_rounds=ROUNDS):
  """Four standard normal float32s per offset (Triton's `tl.randn4x`): Box-Muller of words 0 and 1, then of
  words 2 and 3."""
  u = [uniform(cx, w) for w in philox(cx, seed, offsets, "ml.randn4x", n_rounds)]
  return normal_pair(cx, u[0], u[1]) + normal_pair(cx, u[2], u[3])



for _draw in (randint, randint4x, rand, rand4x, randn, randn4x):
  _draw.rule.aliases = {"offset": "offsets"}     # Triton's tl.rand(seed, offset, n_rounds) keyword
