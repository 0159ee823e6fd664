"""Triton's `tl.dot(a, b)` of a B tile loaded into registers (`b = ml.load(w.at[k_offs[:, None], n_offs[None, :]],
mask=..., other=0.0)`, the tutorials' matmul, grouped GEMM, bmm and addmm): the tensor cores read B from SMEM
only, so the compiler stores the tile into an SMEM buffer of its own and passes that, as Triton stages its dot
operands through shared memory. The same IR as the hand-written `b_s = ml.smem(b.shape, b.dtype); b_s[...] = b;
ml.dot(a, b_s)`: the sync pass fences the register store before the tensor cores read the buffer and orders the
next trip's store after this trip's dot, as for a buffer the user allocates (probe 47g)."""
from __future__ import annotations

import dataclasses

from .. import hw
from ..dtypes import DType
from ..types import TensorType, resolve
from .base import is_value

# B operands read (k, n) from SMEM: the 16-bit ones; float32 (TF32) B tiles are K-major, stored (n, k) and read
# through the transposed view; float32 A tiles are read from SMEM only (a register A is 16- or 8-bit)
_STAGED = (DType.f16, DType.bf16)
_K_MAJOR = (DType.f32,)


def staged_b(cx, b):
  """`b` itself, or, for a 2-D 16-bit register tensor, an SMEM buffer of its shape holding it (a view of an (n, k)
  buffer, transposed, where k is not a multiple of 64 and n is). Not for a whole read of a buffer (`b_s[...]`:
  pass the buffer) or of an array written in the call (`w[...]`: copy it by TMA), whose MG501 hints say so."""
  if not (is_value(b) and isinstance(b.type, TensorType) and len(b.type.shape) == 2
          and resolve(b.type.dtype) in _STAGED + _K_MAJOR):
    return b
  from .memory import smem, transpose
  from .mma import _whole_read
  from .transfers import store
  from ..types import Space
  if _transposed_tile(cx, b):
    return b           # `kt = k.T` (a block pointer's K^T): small_dots.staged_b stores k once, read as its view .T
  text = cx.named(b, "")
  read = _whole_read(cx, b)
  if read is not None and (read[0].type.space == Space.SMEM or not text.replace(".T", "").isidentifier()):
    return b           # `b_s[...]` (pass the buffer) or `w[...]` in the call (copy it by TMA): MG501 says which
  name = f"{text}_s" if text.isidentifier() else "b_s"
  at = dataclasses.replace(cx, name=name)
  k, n = b.type.shape
  k_major = resolve(b.type.dtype) in _K_MAJOR
  if n % hw.MMA_M and (k_major or k % hw.MMA_M):
    return b           # no buffer registers can fill (64 rows a warpgroup): ops/small_dots.py's MG501 says so
  if not hasattr(cx.b, "staged_b"):
    cx.b.staged_b = {}
  cx.b.staged_b[b.id] = (text or "b", (k, n))     # (MG204's hint, where such a tile cannot take a layout)
  if k_major or k % hw.MMA_M and n % hw.MMA_M == 0:
    # a tile stored from registers takes the WGMMA layout, 64 rows a warpgroup: a k tile of 32 rows (BLOCK_K=32)
    # is stored transposed, (n, k), and read as its view buf.T (16-bit B tiles may be either way round)
    buf = smem.rule(at, (n, k), resolve(b.type.dtype))
    view = transpose(at, buf, name)
    store(at, view, b)
    return view
  buf = smem.rule(at, (k, n), resolve(b.type.dtype))
  store(at, buf, b)
  return buf


def _transposed_tile(cx, b) -> bool:
  """Whether the (k, n) register tensor `b` is the register transpose of an (n, k) tile of a multiple of 64 rows
  (`x.T`, `ml.trans(x)`, a block pointer's transposed load), which ops/small_dots.staged_b stores as it was,
  once, and passes as its view `.T` (probe 49h: a named `kt = x.T` was stored transposed, through two scratches)."""
  from .permute import TransposeLoad, TransposeStore
  t = cx.b.defining(b)
  if not isinstance(t, TransposeLoad):
    return False
  k, n = b.type.shape
  st = next((o for o in reversed(cx.b.block.ops) if isinstance(o, TransposeStore) and o.scratch is t.scratch), None)
  return st is not None and isinstance(st.x.type, TensorType) and st.x.type.shape == (n, k) and n % hw.MMA_M == 0


def staged_a(cx, a, b):
  """`a` itself, or, for a 2-D float32 register tensor beside a float32 `b` (Triton's TF32 `tl.dot` of two loaded
  float32 tiles), an SMEM buffer of its shape holding it: the tensor cores read a float32 A from SMEM only. A whole
  read of an SMEM buffer is that buffer (`a_s[...]`); one of GMEM (`x_ref[...]`, Pallas's `jnp.dot(x_ref[...],
  y_ref[...])` of float32 blocks) is staged as any register tile is, as small_dots stages such a B (probe 48h). A
  float32 A beside a 16-bit B keeps its error (its hint converts A)."""
  if not (is_value(a) and isinstance(a.type, TensorType) and len(a.type.shape) == 2
          and resolve(a.type.dtype) in _K_MAJOR and is_value(b) and isinstance(b.type, TensorType)
          and resolve(b.type.dtype) == resolve(a.type.dtype)):
    return a           # (beside a B in SMEM stored (k, n), MG106's hint transposes B once: probe 39b)
  from .memory import smem
  from .mma import _whole_read
  from .transfers import store
  from ..types import Space
  text = cx.named(a, "")
  read = _whole_read(cx, a)
  if read is not None and read[0].type.space == Space.SMEM:
    return a if read[1] else read[0]      # (a_s[...]: the buffer itself; a_s[...].T keeps its error)
  at = dataclasses.replace(cx, name=f"{text}_s" if text.isidentifier() else "a_s")
  buf = smem.rule(at, tuple(a.type.shape), resolve(a.type.dtype))
  store(at, buf, a)
  return buf
