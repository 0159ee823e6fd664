"""`ml.dot` of shapes the tensor cores do not take as they are, written out in ops that exist (probe 47e):
fewer rows than a tile (decode's few tokens, a GQA group of query heads, a GEMV batch of 1 to 16), a B in
registers, and a k or n the tensor cores do not step by (a bfloat16 head_dim of 40 or 72).

WGMMA computes 64 rows a warpgroup per instruction. A dot of m rows, m not a multiple of 64, is written
out here at trace time, as the hint of MG501 told users to write it by hand: A read into registers
(`a_s[...]`, or the register tensor it is) and padded with zero rows to the tile's rows (stored into an
SMEM scratch with the zeros and read back whole, as ml.concatenate does), the padded dot, and its first m
rows (a row window, through an SMEM scratch): row i of a product reads row i of A only, so the zero rows
change nothing. A 16-bit or 8-bit padded A is read by the tensor cores from registers; a float32 (TF32)
one, or an int8 one whose k registers cannot take, is stored into an SMEM buffer of the tile's rows the dot
reads. An accumulator is added to the product after (the product computed in the accumulator's dtype), so
a loop carries the m rows only. B always comes from SMEM: a register B is stored there (ops/dot_staging.py), one
neither of whose sizes registers can fill a buffer of is padded first (unstaged_b_dot); k and n are padded with
zeros in registers (padded_k_dot, padded_n_dot). No IR op of their own: layouts, interpret
mode and lowering need nothing new.
"""
from __future__ import annotations

from .. import hw
from ..types import DType, RefType, TensorType, resolve
from .base import is_value


def padded_rows(m: int) -> int:
  """The rows of the tensor-core tile that holds m rows: 64 for 1..64, 128 for 65..128, ..."""
  return -(-m // hw.MMA_M) * hw.MMA_M


def small_m_dot(cx, a, b, acc, d, acc_dtype, dot_rule):
  """`acc + a @ b` for (m, k) `a`, m not a multiple of 64, written out in ops that exist (see the
  module's docstring). `d` is the operands' dtype, `acc_dtype` the product's, `dot_rule` ml.dot's."""
  from .elementwise import full_
  from .scratches import scratch
  from .memory import view
  from .transfers import load, store
  name = cx.name
  cx.name = ""                   # (only the result takes the name it is bound to)
  try:
    m, k = a.type.shape
    rows = padded_rows(m)
    what = cx.named(a, "a")
    x = load(cx, a) if isinstance(a.type, RefType) else a      # a_s[...], a_s.T[...]: A in registers
    # (ml.concatenate's stores and read, into a scratch SMEM plans and messages name after the dot's A)
    buf = scratch(cx, (rows, k), x.type.dtype, f"{what} padded to {rows} rows")
    store(cx, view(cx, buf, (slice(0, m), slice(None))), x)
    store(cx, view(cx, buf, (slice(m, rows), slice(None))), full_(cx, (rows - m, k), 0, x.type.dtype))
    pad = load(cx, buf)
    if d not in hw.MMA_REG_A_DTYPES or d == DType.i8 and k % hw.MMA_REG_A_INT_K:
      tile = scratch(cx, (rows, k), x.type.dtype, f"{what} padded to {rows} rows for the tensor cores")
      cx.b.transient.discard(tile.id)     # read by the asynchronous dot: planned as a buffer of its own
      store(cx, tile, pad)                # (TF32 reads A from SMEM)
      pad = tile
    cx.name = f"the {rows}-row product of {cx.text or 'ml.dot'}"     # (names its row window's scratch)
    return _window_plus(cx, dot_rule(cx, pad, b, None, out_dtype=acc_dtype), (slice(0, m), slice(None)), acc, name)
  finally:
    cx.name = name


def _window_plus(cx, product, window, acc, name):
  """The padded product's `window` (the true rows or columns, through an SMEM scratch), plus `acc` where there is
  one; the result named `name` (the user's)."""
  from .shape import index_through_smem
  return plus_acc(cx, lambda: index_through_smem(cx, product, window), acc, name)


def plus_acc(cx, product, acc, name):
  """`product()` (a dot written out in other ops), plus `acc` where there is one: the sum, or the product where
  there is none, named `name` (the user's), the product's other values unnamed."""
  from .elementwise import BinOp, binary
  cx.name = name if acc is None else ""
  out = product()
  if acc is not None:
    cx.name = name
    out = binary(cx, BinOp.ADD, acc, out)
  return out


def _pad(cx, x, axis, up):
  """Register tensor `x` with zero rows (axis 0) or columns (axis 1) appended up to `up` along `axis`."""
  from .elementwise import full_
  from .shape import concatenate
  shape = list(x.type.shape)
  shape[axis] = up - shape[axis]
  return concatenate.rule(cx, [x, full_(cx, tuple(shape), 0, x.type.dtype)], axis)


def padded_k_dot(cx, a, b, acc, out_dtype, dot_rule):
  """`acc + a @ b` for a k the tensor cores do not step by (a head_dim of 40 or 72 in 16 bits: k a multiple of 32
  bytes), or None where it is not written out so: both operands read into registers and padded with zeros along k
  to the next multiple (zero columns of a meet zero rows of b: the product is unchanged), A read from registers, B
  stored into SMEM by staged_b (where registers can fill its buffer). 16-bit and float8 operands only (int8 A
  from registers needs k a multiple of 64, float32 A is read from SMEM)."""
  from .memory import untransposed
  from .permute import transpose_tensor, transposed_of
  from .transfers import load
  if not (is_value(a) and is_value(b) and len(a.type.shape) == 2 and len(b.type.shape) == 2):
    return None
  (m, k), (k2, n) = a.type.shape, b.type.shape
  da, d = resolve(a.type.dtype), resolve(b.type.dtype)
  if k != k2 or da != d or d not in (DType.f16, DType.bf16, DType.f8e4m3, DType.f8e5m2):
    return None
  step = hw.tile_cols(d.itemsize, hw.MIN_SWIZZLE)
  up = -(-k // step) * step
  k_major = d not in hw.MMA_MN_MAJOR_DTYPES
  if k % step == 0 or n % hw.MMA_N_STEP or n > hw.MMA_N_MAX or k_major and padded_rows(n) > hw.MMA_N_MAX:
    return None                 # (no buffer registers can fill: the k error and its hint stand; a padded b neither
                                # of whose sizes is a multiple of 64 is padded again by unstaged_b_dot, probe 49a)
  if acc is not None and not (is_value(acc) and isinstance(acc.type, TensorType) and acc.type.shape == (m, n)):
    return None
  for x in (a, b):
    if isinstance(x.type, RefType) and (x.type.space.name != "SMEM" or x.type.remote):
      return None
  name = cx.name
  cx.name = ""
  try:
    x = load(cx, a) if isinstance(a.type, RefType) else a
    pa = _pad(cx, x, 1, up)
    src = transposed_of(cx, b)
    if isinstance(b.type, RefType) and b.type.transposed:          # b_s.T of an (n, k) buffer: pad its rows
      pb = transpose_tensor(cx, _pad(cx, load(cx, untransposed(cx, b)), 1, up))
    elif src is not None and src.type.shape == (n, k):              # x.T of a register (n, k) tile
      pb = transpose_tensor(cx, _pad(cx, src, 1, up))
    else:
      pb = _pad(cx, load(cx, b) if isinstance(b.type, RefType) else b, 0, up)
    cx.name = name
    return dot_rule(cx, pa, pb, acc, out_dtype=out_dtype)
  finally:
    cx.name = name


def padded_n_dot(cx, a, b, acc, out_dtype, n_step, dot_rule):
  """`acc + a @ b` for n the tensor cores do not take from b as it is stored (a (k, n) b of 8, 24 or 40 16-bit
  columns, n a multiple of 16 there), or None where it is not written out so (n not a multiple of 8, whose column
  window no tensor-core layout holds): b read into registers and padded with zero columns to the next multiple of `n_step`, stored into SMEM by
  staged_b (where registers can fill its buffer), and the product's first n columns (a column window, through an
  SMEM scratch) kept; an accumulator is added to them after."""
  from .memory import untransposed
  from .permute import transpose_tensor
  from .transfers import load
  (m, _), (_, n) = a.type.shape, b.type.shape
  d = resolve(b.type.dtype)
  if not isinstance(d, DType) or d == DType.i8 or n > hw.MMA_N_MAX or n % hw.MMA_N_STEP:
    return None                 # (a window of columns not a multiple of 8 takes no tensor-core layout)
  up = -(-n // n_step) * n_step
  k_major = d not in hw.MMA_MN_MAJOR_DTYPES
  if up > hw.MMA_N_MAX or k_major and up % hw.MMA_M:
    return None                 # (no buffer registers can fill: the n error and its hint stand; a 16-bit b of k not
                                # a multiple of 64 is padded along k too by unstaged_b_dot, probe 49a)
  if acc is not None and not (is_value(acc) and isinstance(acc.type, TensorType) and acc.type.shape == (m, n)):
    return None
  if isinstance(b.type, RefType) and (b.type.space.name != "SMEM" or b.type.remote):
    return None
  name = cx.name
  cx.name = ""
  try:
    if isinstance(b.type, RefType) and b.type.transposed:          # b_s.T of an (n, k) buffer: pad its rows
      pb = transpose_tensor(cx, _pad(cx, load(cx, untransposed(cx, b)), 0, up))
    else:
      pb = _pad(cx, load(cx, b) if isinstance(b.type, RefType) else b, 1, up)
    cx.name = f"the {up}-column product of {cx.text or 'ml.dot'}"     # (names its column window's scratch)
    product = dot_rule(cx, a, pb, None, out_dtype=out_dtype if acc is None else resolve(acc.type.dtype))
    return _window_plus(cx, product, (slice(None), slice(0, n)), acc, name)
  finally:
    cx.name = name


def unstaged_b_dot(cx, a, b, acc, out_dtype, dot_rule):
  """`acc + a @ b` for a register b (k, n) that dot_staging.staged_b cannot store (registers fill a tensor-core
  buffer 64 rows at a time, and neither k nor n is a multiple of 64: a decode's `kb.T` of a 16- or 32-key block,
  (40, 16); a (16, 40) weight tile; `p @ v` of 32 keys and a head_dim of 40), or None where it is not written out so
  (the MG501 of dot_staging.unstageable_b stands): a 16-bit b, stored (k, n), padded with zero rows to k a multiple
  of 64 and a with as many zero columns (zero columns of a meet zero rows of b: the product is unchanged); an 8-bit
  or float32 b, read K-major from an (n, k) buffer, padded with zero columns to n a multiple of 64 (of 8 or more, at
  most 256), the product's first n columns kept (a column window, through an SMEM scratch) and an accumulator added
  to them after (probe 49a; MG501 before). The padded dot is an ordinary one: no IR of its own."""
  from .transfers import load
  if not (is_value(a) and is_value(b) and isinstance(b.type, TensorType) and len(a.type.shape) == 2
          and len(b.type.shape) == 2):
    return None
  (m, k), (k2, n) = a.type.shape, b.type.shape
  d = resolve(b.type.dtype)
  if k != k2 or not isinstance(d, DType) or d not in hw.MMA_DTYPES or resolve(a.type.dtype) != d:
    return None
  if acc is not None and not (is_value(acc) and isinstance(acc.type, TensorType) and acc.type.shape == (m, n)):
    return None
  if isinstance(a.type, RefType) and (a.type.space.name != "SMEM" or a.type.remote):
    return None
  from .dot_staging import stored_as
  if stored_as(d, k, n) is not None:
    return None                 # (dot_staging.staged_b stores it: not this function's case)
  k_major = d not in hw.MMA_MN_MAJOR_DTYPES
  name = cx.name
  cx.name = ""
  try:
    if not k_major:
      up = padded_rows(k)
      pa = _pad(cx, load(cx, a) if isinstance(a.type, RefType) else a, 1, up)
      pb = _pad(cx, b, 0, up)
      cx.name = name
      return dot_rule(cx, pa, pb, acc, out_dtype=out_dtype)
    up = padded_rows(n)
    if n % hw.MMA_N_STEP or up > hw.MMA_N_MAX:
      return None                 # (a window of columns not a multiple of 8 takes no tensor-core layout)
    pb = _pad(cx, b, 1, up)
    cx.name = f"the {up}-column product of {cx.text or 'ml.dot'}"     # (names its column window's scratch)
    product = dot_rule(cx, a, pb, None, out_dtype=out_dtype if acc is None else resolve(acc.type.dtype))
    return _window_plus(cx, product, (slice(None), slice(0, n)), acc, name)
  finally:
    cx.name = name
