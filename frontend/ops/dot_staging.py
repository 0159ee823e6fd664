"""ml.dot's operands from registers that the tensor cores read from SMEM only, stored into SMEM buffers of the
compiler's own: a B of any tensor-core dtype (Triton's `tl.dot(a, b)` of `b = ml.load(w.at[k_offs[:, None],
n_offs[None, :]], mask=..., other=0.0)`, the tutorials' matmul, grouped GEMM, bmm and addmm; Pallas's
`jnp.dot(x_ref[...], w_ref[...])`; a transposed K `kt = k.T` of attention), and a float32 (TF32) A beside such a B,
as Triton stages its dot operands through shared memory. The same IR as the hand-written `b_s = ml.smem(b.shape,
b.dtype); b_s[...] = b; ml.dot(a, b_s)`: the sync pass fences the register store before the tensor cores read the
buffer and orders the next trip's store after this trip's dot, as for a buffer the user allocates (probe 47g).

One mechanism and one set of checks (`stored_as`) for every register B (probes 47e and 47g wrote one each, merged by
probe 51h): registers fill a tensor-core buffer 64 rows (a warpgroup's WGMMA layout) at a time, so a B (k, n) is
stored as it is where it is 16-bit (read MN-major) and k is a multiple of 64, else transposed, (n, k), and passed
as the view `.T` where n is (8-bit and float32 operands are read K-major only; a register transpose `x.T` is x
stored as it is, never moved twice). A B neither way can take is left as it is: ops/small_dots.py pads it
(unstaged_b_dot), or `unstageable_b` is its MG501."""
from __future__ import annotations

import dataclasses

from .. import hw
from ..dtypes import DType
from ..types import RefType, Space, TensorType, resolve
from .base import is_value


def stored_as(d, k: int, n: int, transposed: bool = False) -> str | None:
  """How a register B (k, n) of dtype `d` is stored for the tensor cores: "kn" (as it is), "nk" (transposed,
  passed as the view .T), or None (no buffer registers can fill, 64 rows at a time; or no tensor-core dtype).
  `transposed`: b is the register transpose of an (n, k) tensor, stored as that tensor where n allows."""
  if not isinstance(d, DType) or d not in hw.MMA_DTYPES:
    return None
  if d in hw.MMA_MN_MAJOR_DTYPES and k % hw.MMA_M == 0 and not (transposed and n % hw.MMA_M == 0):
    return "kn"
  return "nk" if n % hw.MMA_M == 0 else None


def staged_b(cx, b):
  """`b` itself, or, for a 2-D register tensor `b` (k, n) of a tensor-core dtype, an SMEM buffer of the compiler's
  holding it (see the module; its view `.T` where it is stored transposed). `b` itself where `stored_as` finds no
  way: the dot pads it (ops/small_dots.unstaged_b_dot) or reports MG501 (`unstageable_b`)."""
  from .memory import transpose
  from .permute import transpose_tensor, transposed_of
  from .scratches import scratch
  from .transfers import store
  if not (is_value(b) and isinstance(b.type, TensorType) and len(b.type.shape) == 2):
    return b
  k, n = b.type.shape
  src = transposed_of(cx, b)                # b = x.T: x, as stored, is the (n, k) buffer's content
  way = stored_as(resolve(b.type.dtype), k, n, src is not None)
  if way is None:
    return b
  text = cx.named(b, "")
  if src is None:
    if not hasattr(cx.b, "staged_b"):
      cx.b.staged_b = {}
    cx.b.staged_b[b.id] = (text or "b", (k, n))     # (MG204's hint, where such a tile cannot take a layout)
  name = cx.name
  cx.name = ""
  try:
    shape = (k, n) if way == "kn" else (n, k)
    # what the buffer holds: a tensor as it is ("=", its id), or the transpose of one ("T", its id)
    if way == "kn":
      key = ("T", src.id) if src is not None else ("=", b.id)
    else:
      key = ("=", src.id) if src is not None else ("T", b.id)
    # one store serves every dot of its block whose b is held the same way: an MLA decode's `ml.dot(qn, kv.T)` and
    # `ml.dot(p, kv)` of a (64, 512) kv, tutorial 06's `ml.dot(k, qT)` and `ml.dot(dsT, ml.trans(qT))` (probe 53d:
    # kv twice in SMEM made the decode of 64 heads and 64 keys MG402)
    cache = cx.b.__dict__.setdefault("staged_b_bufs", {})
    buf, block = cache.get(key + (shape,), (None, None))
    if block is not cx.b.block:
      buf = scratch(cx, shape, b.type.dtype, f"{text}_s" if text.isidentifier() else "b_s")
      cx.b.transient.discard(buf.id)     # read by the asynchronous dot: planned as a buffer of its own
      cx.b.__dict__.setdefault("staged_b_buffers", {})[buf.id] = (text or "b", way)   # (MG402's hint: smem_overflow.py)
      # a tile stored from registers takes the WGMMA layout, 64 rows a warpgroup: a k tile of 32 rows (BLOCK_K=32)
      # is stored transposed, (n, k), and read as its view buf.T (16-bit B tiles may be either way round)
      store(cx, buf, b if way == "kn" else src if src is not None else transpose_tensor(cx, b))
      cache[key + (shape,)] = (buf, cx.b.block)
    return buf if way == "kn" else transpose(cx, buf)
  finally:
    cx.name = name


def unstageable_b(cx, b) -> tuple[str, str]:
  """(message, hint) for a register B that staged_b could not store: registers fill a tensor-core buffer 64
  rows at a time, and b (k, n) has neither k (a 16-bit b stored as it is) nor n (stored transposed, as 8-bit
  and float32 operands must be) a multiple of 64. TMA fills a buffer of any rows; zero rows pad k."""
  from .small_dots import padded_rows
  k, n = b.type.shape
  d = resolve(b.type.dtype)
  v = cx.named(b, "") or b.name or "b"
  v = v if v.replace("_", "a").isalnum() else f"({v})"
  k_major = isinstance(d, DType) and d not in hw.MMA_MN_MAJOR_DTYPES
  shape = tuple(b.type.shape)
  sizes = (f"n ({n}) of b {shape} is not a multiple of {hw.MMA_M} ({d} operands are read K-major, stored (n, k))"
           if k_major else f"neither k ({k}) nor n ({n}) of b {shape} is a multiple of {hw.MMA_M}")
  message = f"ml.dot stores a register operand b into SMEM for the tensor cores 64 rows at a time, but {sizes}"
  buf = f"bt_s = ml.smem(({n}, {k})); ml.copy(bt.at[...], bt_s); ml.dot(..., bt_s.T)" if k_major else \
        f"b_s = ml.smem(({k}, {n})); ml.copy(b.at[...], b_s); ml.dot(..., b_s)"
  fix = (f"copy b's tile into an SMEM buffer by TMA, which fills any rows ({buf}), and apply the math to a or to"
         f" the product instead (a scale of b's columns: the product times it)")
  if not k_major:
    up = padded_rows(k)
    fix += (f"; or pad k with zeros to {up}: ml.concatenate([{v}, ml.zeros(({up - k}, {n}), jnp.{d})], axis=0) as b,"
            f" and a with {up - k} zero columns")
  return message, fix


def staged_a(cx, a, b):
  """`a` itself, or, for a 2-D float32 register tensor beside a float32 `b` (Triton's TF32 `tl.dot` of two loaded
  float32 tiles), an SMEM buffer of its shape holding it: the tensor cores read a float32 A from SMEM only. A whole
  read of an SMEM buffer is that buffer (`a_s[...]`); one of GMEM (`x_ref[...]`, Pallas's `jnp.dot(x_ref[...],
  y_ref[...])` of float32 blocks) is staged as any register tile is, as staged_b stages such a B (probe 48h). A
  float32 A beside a 16-bit B keeps its error (its hint converts A). So is an int8 A of k a multiple of 32 but not
  of 64 (Triton's BLOCK_K=32 int8 GEMM, of any rows), which registers cannot hand the tensor cores and SMEM can
  (probe 56a)."""
  int8 = is_value(a) and isinstance(a.type, TensorType) and len(a.type.shape) == 2 and resolve(
      a.type.dtype) == DType.i8 and a.type.shape[1] % hw.MMA_REG_A_INT_K and not a.type.shape[1] % (
          hw.MIN_SWIZZLE)                                         # (an int8 A of k a multiple of 32, not of 64:
  if not int8 and not (is_value(a) and isinstance(a.type, TensorType) and len(a.type.shape) == 2   # SMEM takes it,
          and resolve(a.type.dtype) == DType.f32 and is_value(b)                               # registers do not;
          and isinstance(b.type, (TensorType, RefType))                                        # probe 56a)
          and resolve(b.type.dtype) == resolve(a.type.dtype)):
    return a
  if not int8 and isinstance(b.type, RefType) and (a.type.shape[0] % hw.MMA_M or not smem_b_beside_f32_a(b)):
    return a           # (few rows: small_dots pads A into SMEM itself; a B of n not a multiple of 64 stored (k, n):
                       # MG106's hint loads it transposed, probe 39b)
  from .memory import smem
  from .mma import _whole_read
  from .transfers import store
  text = cx.named(a, "")
  read = _whole_read(cx, a)
  if read is not None and read[0].type.space == Space.SMEM:
    return a if read[1] else read[0]      # (a_s[...]: the buffer itself; a_s[...].T keeps its error)
  at = dataclasses.replace(cx, name=f"{text}_s" if text.isidentifier() else "a_s")
  buf = smem.rule(at, tuple(a.type.shape), resolve(a.type.dtype))
  store(at, buf, a)
  return buf


def smem_b_beside_f32_a(b) -> bool:
  """Whether the float32 SMEM B `b` beside a float32 register A is taken (probe 51f: a TF32 flash attention's
  `ml.dot(p, v_s, acc)` with V copied by TMA was MG106, whose hint wrote the staging out): this CTA's buffer,
  K-major already (a view `bt_s.T`) or stored (k, n) with n a multiple of 64, which k_major_b transposes once into
  an (n, k) buffer registers fill 64 rows at a time. A is then staged into SMEM (staged_a), or, of fewer rows than a
  tile, padded into SMEM by ops/small_dots.py."""
  t = b.type
  if not isinstance(t, RefType) or t.space != Space.SMEM or t.remote or len(t.shape) != 2:
    return False
  return t.transposed or t.shape[1] % hw.MMA_M == 0


def f32_a_beside_smem_b(a, b) -> bool:
  """A float32 register A (m, k) beside a float32 SMEM B that smem_b_beside_f32_a takes; since probe 67b also a
  float32 SMEM A of this CTA (a buffer, or a transposed view that k_major_a stores (m, k))."""
  return (is_value(a) and is_value(b) and (isinstance(a.type, TensorType) or _f32_smem(a)) and len(a.type.shape) == 2
          and resolve(a.type.dtype) == DType.f32 and resolve(b.type.dtype) == resolve(a.type.dtype)
          and smem_b_beside_f32_a(b))


def _f32_smem(a) -> bool:
  t = a.type
  return isinstance(t, RefType) and t.space == Space.SMEM and not t.remote and resolve(t.dtype) == DType.f32


def k_major_a(cx, a, b):
  """`a` itself, or, for a float32 SMEM A passed as a transposed view (`k_s.T`, linear attention's state update
  `ml.dot(k_s.T, v_s, state)` of float32 tiles: the tensor cores read TF32 K-major only, MG501 until probe 67b), an
  (m, k) buffer holding it: the view read into registers (through the transpose scratch) and stored, as the
  hand-written `a_mk = ml.smem((m, k), jnp.float32); a_mk[...] = k_s.T[...]` that MG501's hint wrote."""
  if not (is_value(a) and _f32_smem(a) and a.type.transposed and len(a.type.shape) == 2
          and f32_a_beside_smem_b(a, b) and a.type.shape[0] % hw.MMA_M == 0):
    return a
  from .memory import smem
  from .transfers import load, store
  base = (a.name or "a_s").removesuffix(".T")
  at = dataclasses.replace(cx, name=f"{base}_mk" if base.isidentifier() else "a_mk")
  buf = smem.rule(at, tuple(a.type.shape), DType.f32)
  store(at, buf, load(dataclasses.replace(cx, name=""), a))
  return buf


def k_major_b(cx, a, b):
  """`b` itself, or, for a float32 SMEM B stored (k, n) beside a float32 register A (both read as TF32, which the
  tensor cores take K-major only), an (n, k) buffer holding b's transpose, passed as its view `.T`: b read into
  registers and stored through the transposed view, as a register float32 B is staged (staged_b). The same as the
  hand-written `b_nk = ml.smem((n, k), jnp.float32); b_nk[...] = b_s.T[...]; ml.dot(a_s, b_nk.T)` that MG106's hint
  wrote."""
  if not f32_a_beside_smem_b(a, b) or b.type.transposed:
    return b
  return _transposed_copy(cx, b)


def k_major_8bit_b(cx, b):
  """`b` itself, or, for an 8-bit SMEM B (float8 or int8) stored (k, n) with n a multiple of 64 (FlashAttention-3's
  float8 `p @ v` of V copied by TMA as it is stored, (keys, head_dim)), an (n, k) buffer holding its transpose, passed
  as its view `.T`, as k_major_b does for float32: the tensor cores read 8-bit operands K-major only (MG501 until
  probe 68a, whose hint wrote this transposition by hand). FA3 transposes V in SMEM so too."""
  t = b.type
  d = resolve(t.dtype)
  if not (is_value(b) and isinstance(t, RefType) and t.space == Space.SMEM and not t.remote and len(t.shape) == 2
          and not t.transposed and isinstance(d, DType) and d in hw.MMA_DTYPES and d.bits == 8
          and t.shape[1] % hw.MMA_M == 0):
    return b
  return _transposed_copy(cx, b)


def _transposed_copy(cx, b):
  """An (n, k) buffer of the compiler's holding the SMEM tile b (k, n), read into registers and stored through the
  buffer's view `.T`, which is returned (named after b: `v_s_nk.T`)."""
  from .memory import smem, transpose
  from .transfers import load, store
  base = (b.name or "b_s").removesuffix(".T")
  name = f"{base}_nk" if base.isidentifier() else "b_nk"
  at = dataclasses.replace(cx, name=name)
  k, n = b.type.shape
  tile = load(dataclasses.replace(cx, name=""), b)
  buf = smem.rule(at, (n, k), resolve(b.type.dtype))
  view = transpose(at, buf, f"{name}.T")
  store(at, view, tile)
  return view


def narrow_f32_b_dot(cx, a, b, acc, out_dtype, dot_rule):
  """`acc + a @ b` for a float32 register A beside a float32 SMEM B stored (k, n) whose n is no multiple of 64 (a TF32
  attention's V tile at head_dim 32, 80 or 96), or None: its (n, k) transpose is no buffer registers fill (64 rows at a
  time), so B is read into registers and passed as a register B, which ops/small_dots.unstaged_b_dot pads with zero
  columns to a multiple of 64, keeping the product's first n columns (probe 51f; it was MG106, whose hint loaded the
  tile transposed from the transposed array)."""
  t = b.type if is_value(b) else None
  if not (isinstance(t, RefType) and t.space == Space.SMEM and not t.remote and not t.transposed and len(t.shape) == 2
          and is_value(a) and isinstance(a.type, TensorType) and len(a.type.shape) == 2
          and resolve(a.type.dtype) == DType.f32 and resolve(t.dtype) == resolve(a.type.dtype)
          and t.shape[1] % hw.MMA_M and t.shape[1] % hw.MMA_N_STEP == 0 and a.type.shape[1] == t.shape[0]):
    return None
  from .small_dots import unstaged_b_dot
  from .transfers import load
  return unstaged_b_dot(cx, a, load(dataclasses.replace(cx, name=""), b), acc, out_dtype, dot_rule)
