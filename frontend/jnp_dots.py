"""jnp.dot, jnp.matmul, `@`, two-operand jnp.einsum and lax.dot_general of float16, bfloat16 or float32 tiles in a
kernel (a Pallas kernel's `jnp.dot(a_s[...], b_s[...], preferred_element_type=jnp.float32)`, `jnp.einsum('qd,kd->qk',
q, k)`, `lax.dot_general(q, k, (((1,), (1,)), ((), ())))`) compute as ml.dot with jnp's result dtype:
`preferred_element_type=` where given, else the operands' (promoted) dtype (jnp.dot of float16 tiles is float16,
accumulated in float32 and rounded once, as ml.dot's float32 result converted is). An operand read whole from an
SMEM buffer (`b_s[...]`, `w_s[...].T`) is passed as the buffer (or its transposed view); a register tile (a
GMEM read, a computed value) is staged by ml.dot (a 16-bit B) or here (float32 operands, which the tensor cores
read from SMEM only, B K-major: stored (n, k) and read through the transposed view), as the hints wrote it. A
float32 product is TF32's, as ml.dot's. A leading batch axis (`jnp.matmul` of 3-D tiles, einsum's
'bij,bjk->bik', dot_general's batch dimensions) is one ml.dot per batch element, stacked. Other products (8-bit
operands, a vector, a contraction over two axes, a tile ml.dot cannot take) keep their MG003 and dot_hints'
hint."""
from __future__ import annotations

import dataclasses

from . import errors as E
from . import hw
from . import ir
from .dtypes import DType, to_dtype
from .types import RefType, Space, resolve

_FLOATS = (DType.f16, DType.bf16, DType.f32)
_FP8 = (DType.f8e4m3, DType.f8e5m2)
# Operand dtypes a product takes to the tensor cores: the floats ml.dot reads, and 8-bit ones (probe 51e: a Pallas
# W8A8 or FP8 kernel's `jnp.dot(x, w, preferred_element_type=jnp.int32)`, `lax.dot_general` of float8 tiles)
_OPERANDS = _FLOATS + _FP8 + (DType.i8,)
# The most multiply-adds (m * k * n) of a float32 product of tiles ml.dot stores for the tensor cores only padded
# that is computed exactly in registers (jnp_einsum.chunked_product); larger ones are ml.dot's (TF32)
_REGISTER_MOST = 1 << 18
_I8_K = 64       # the k an int8 A read from registers steps by (small_dots.padded_k_dot)


def _dtype(v):
  return resolve(getattr(getattr(v, "type", None), "dtype", None))


def _operands(tracer, nodes, values):
  """(value, transposed) of each operand: an SMEM buffer read whole (`k_s[...]`, `k_s[...].T`) as the buffer, a
  register tile `w.T` as w transposed, any other value (a GMEM read: registers) as it is."""
  out = []
  tracer.b.fresh_transposes = {}     # (`k_s[...].T`: dropped where the product reads k_s.T, _drop_transpose)
  for n, v in zip(nodes, values):
    _, held, flip = tracer._dot_operand(n, v)
    if isinstance(held.type, RefType) and held.type.space != Space.SMEM:
      held, flip = v, False          # (`w[...]` of a GMEM array: the register tile read)
    elif isinstance(held.type, RefType) and flip:
      tracer.b.fresh_transposes[id(held)] = v
    out.append((held, flip))
  return out


_ARRAY_API = {("jnp.linalg", "matmul"): ("jnp", "matmul"), ("jnp.linalg", "tensordot"): ("jnp", "tensordot")}


def _drop_transpose(tracer, v):
  """Drop the register transpose `v` of a buffer's whole read (`k_s[...].T`, the call's own argument) that the dot
  replaces by the buffer's view `k_s.T`: its scratch, store and load, where nothing else uses them. Left in place, the
  read beside the dot's tiled buffer took the tensor-core layout, 64 rows a warpgroup: Pallas's `jnp.dot(q,
  k_s[...].T)` of 32 keys was MG204 (probe 60a). The read left unused is pruned as any dead read."""
  from .ops.permute import TransposeLoad, TransposeStore
  b = tracer.b
  load = b.defining(v)
  if not isinstance(load, TransposeLoad):
    return
  ops = b.block.ops
  users = [o for o in ops if o is not load and any(x is v or x is load.scratch for x in o.operands())]
  alloc = b.defining(load.scratch)
  if len(users) != 1 or not isinstance(users[0], TransposeStore) or alloc not in ops:
    return
  ops[:] = [o for o in ops if o not in (load, users[0], alloc)]
  b.allocs[:] = [a for a in b.allocs if a is not load.scratch]
  b.transient.discard(load.scratch.id)


def _drop_widened_transpose(tracer, v):
  """The register transpose of a widened operand the product read as the buffer's view instead
  (`b_s[...].astype(jnp.float32).T`, `b_s[...].T.astype(jnp.float32)`: fresh values of the call's own argument),
  dropped as _drop_transpose's: its float32 scratch (the tile's size) made an SMEM overflow of a (256, 256)
  B (MG402; probe 61b). The cast of the transpose goes first, where nothing else reads it."""
  from .ops.elementwise_ops import Cast
  from .ops.permute import TransposeLoad
  ops, o = tracer.b.block.ops, tracer.b.defining(v)
  if isinstance(o, Cast) and not o.bitcast and isinstance(tracer.b.defining(o.x), TransposeLoad) and \
      any(u is o for u in ops) and not any(x is v for u in ops if u is not o for x in u.operands()):
    ops[:] = [u for u in ops if u is not o]
    v = o.x
  _drop_transpose(tracer, v)


def library_product(tracer, node, lib, args, kwargs):
  """jnp.dot / jnp.matmul / lax.dot / jnp.inner / jnp.tensordot / jnp.einsum / lax.dot_general of register values
  (`args`, written as `node.args`) computed as ml.dot, or None (the call's MG003 stands)."""
  nodes = node.args
  lib = _ARRAY_API.get(lib, lib)      # (jnp.linalg.matmul and tensordot: jnp's, keywords alike; probe 60c)
  if lib in (("jnp", "dot"), ("jnp", "matmul"), ("jax.lax", "dot")) and len(args) == 2:
    return register_dot(tracer, node, nodes, args, kwargs, batched=lib[1] == "matmul", shown=tracer.text(node.func))
  if lib == ("jnp", "einsum") and len(args) > 3:      # tiles scaled by vectors: the vectors folded in first
    from .jnp_einsum import folded_vectors
    if (folded := folded_vectors(tracer, node, args[0], args[1:], nodes[1:], kwargs)) is None:
      from .einsum_general import pairwise_einsum     # ('ij,jk,kl->il': two operands at a time)
      return pairwise_einsum(tracer, node, args[0], args[1:], kwargs)
    spec, values, nodes = folded
    got = einsum_dot(tracer, node, spec, nodes, values, kwargs)
    if got is None:
      from .jnp_einsum import einsum_products
      got = einsum_products(tracer, node, spec, values, kwargs)
    return got
  if lib == ("jnp", "einsum") and len(args) == 3:
    args = _explicit(args)             # ('ij,jk', '...d,de->...e': the output and the ellipsis written out)
    got = einsum_dot(tracer, node, args[0], nodes[1:], args[1:], kwargs)
    if got is None:            # 'bij,bjk->bik' of a few batches ml.dot does not take: each batch's einsum, stacked
      from .jnp_einsum import batched_einsum
      got = batched_einsum(tracer, node, args[0], args[1:], kwargs)
    if got is None:            # an outer product, a row dot, a small contraction: broadcast products summed
      from .jnp_einsum import einsum_products
      got = einsum_products(tracer, node, args[0], args[1:], kwargs)
    if got is None:            # 'hd,thd->ht' of a few heads: einsums of pieces (einsum_general.py)
      from .einsum_general import unrolled_einsum
      got = unrolled_einsum(tracer, node, args[0], args[1:], kwargs)
    return got
  if lib == ("jax.lax", "dot_general") and len(args) in (2, 3):
    kw = dict(kwargs)
    dims = args[2] if len(args) == 3 else kw.pop("dimension_numbers", None)
    return None if dims is None else dot_general_dot(tracer, node, nodes[:2], args[:2], dims, kw)
  if lib not in (("jnp", "inner"), ("jnp", "tensordot")):
    return None
  ranks = [len(v.type.shape) if _tile(v) else 0 for v in args[:2]]
  if lib == ("jnp", "inner") and len(args) == 2 and ranks == [2, 2]:      # both last axes contracted
    return dot_general_dot(tracer, node, nodes, args, (((1,), (1,)), ((), ())), kwargs)
  if lib == ("jnp", "tensordot") and len(args) in (2, 3) and ranks == [2, 2]:
    kw = dict(kwargs)
    axes = args[2] if len(args) == 3 else kw.pop("axes", 2)
    if isinstance(axes, int):
      axes = ((1,), (0,)) if axes == 1 else None
    try:
      (ca, cb), = [tuple(tuple(int(i) for i in (x if isinstance(x, (tuple, list)) else (x,))) for x in axes)]
    except (TypeError, ValueError):
      return None
    return dot_general_dot(tracer, node, nodes[:2], args[:2], ((ca, cb), ((), ())), kw)
  return None


def _explicit(args):
  """jnp.einsum's arguments with its spec's output and ellipsis written out (einsum_general.explicit_spec)."""
  from .einsum_general import explicit_spec
  spec = explicit_spec(args[0], [getattr(getattr(v, "type", None), "shape", None) for v in args[1:]])
  return args if spec is None else (spec, *args[1:])


def _unwidened(tracer, nodes, values):
  """(value, transposed, fresh) of each operand where both are 16-bit tiles of one dtype widened to float32 first
  (`a_s[...].astype(jnp.float32) @ b_s[...].astype(jnp.float32)`): their products are exact in float32, where
  ml.dot accumulates the 16-bit operands, so the product is the same without the float32 staging. None otherwise.
  `fresh`: the call's own text widens it (its transpose is dropped here); an operand bound to a name first (`w =
  b_s[...].T.astype(f32)`, then `x @ w`: probe 62b) is found by its ops, and its ops, if nothing else reads them,
  are dropped after the trace (permute.drop_dead_transposes)."""
  got = [(tracer._widened(n, v), True) for n, v in zip(nodes, values)]
  got = [(w, True) if w is not None else (_widened_value(tracer, v), False) for (w, _), v in zip(got, values)]
  if len(got) != 2 or any(w is None for w, _ in got) or got[0][0][1] != got[1][0][1] or any(
      isinstance(w[0][1].type, RefType) and w[0][1].type.space != Space.SMEM for w, _ in got):
    return None
  return [(held, flip, fresh) for ((_, held, flip), _), fresh in got]


def _widened_value(tracer, v):
  """((text, held, transposed), dtype) as tracer._widened gives for a call's text, read from the ops that made the
  float32 tile `v`: a cast of a float16 or bfloat16 tile, transposed before or after it (`.T`, `jnp.transpose`); held
  is the SMEM buffer its 16-bit tile is the whole read of, where nothing wrote that buffer since the read (else the
  16-bit register tile itself). None for others."""
  from .ops.elementwise_ops import Cast
  from .ops.memory import Load, SmemAlloc
  from .ops.permute import transposed_of
  b = tracer.b
  if not _tile(v) or _dtype(v) != DType.f32:
    return None
  x, flip = v, False
  if (t := transposed_of(tracer, x)) is not None:       # (`.astype(jnp.float32).T`)
    x, flip = t, True
  c = b.defining(x)
  if not isinstance(c, Cast) or c.bitcast or _dtype(c.x) not in (DType.f16, DType.bf16) or not _tile(c.x):
    return None
  x = c.x
  if (t := transposed_of(tracer, x)) is not None:       # (`.T.astype(jnp.float32)`)
    x, flip = t, not flip
  held, load = x, b.defining(x)
  if isinstance(load, Load) and not load.merge and not getattr(load, "keep", None) and \
      isinstance(b.defining(load.ref), SmemAlloc) and _unwritten_since(b, load):
    held = load.ref
  return ("", held, flip), _dtype(x)


def _unwritten_since(b, load) -> bool:
  """Whether no op after `load` in the current block (or in its regions) writes the buffer `load` read whole."""
  from .ops.memory import root
  ops = b.block.ops
  if not any(o is load for o in ops):
    return False
  after = ops[next(i for i, o in enumerate(ops) if o is load) + 1:]
  for o in (u for a in after for u in (a, *(w for r in a.regions for w in ir.walk(getattr(a, r))))):
    for ref, acc in ir.traits_of(o).effects(o):
      if acc in (ir.Access.REG_WRITE, ir.Access.TMA_WRITE) and root(b, ref) is load.ref:
        return False
  return True


def _tile(v) -> bool:
  """A register tensor (not a ref, a number or a dtype)."""
  from .ops.base import is_value
  return is_value(v) and not isinstance(v.type, RefType) and isinstance(getattr(v.type, "shape", None), tuple)


def _shape(x, tracer=None):
  """The operand's shape as ml.dot reads it (transposed where flipped); with `tracer`, in a padded trace, its own
  shape (an odd read padded, (4, 72) held at (4, 96), meets the other operand at its own k: ops/padded_dots.py)."""
  v, flip = x
  s = tuple(getattr(v.type, "shape", ()))
  pads = getattr(getattr(tracer, "b", None), "pad_tiles", None)
  if pads is not None and getattr(v, "id", None) is not None:
    s = tuple(pads.get(v.id, s))
  return s[::-1] if flip and len(s) == 2 else s


def int8_matmul(la, lb, a, b, loc):
  """`a @ b` of int8 tiles (texts `la`, `lb`): jnp's result is int8, its sums wrapped, which a kernel does not
  compute; the error asks for the int32 sums as `dot_hints._int8_hint` does (probe 51l: was "the operator @ is
  not supported" with a hint to stage SMEM buffers). Nothing for other operands."""
  if all(resolve(getattr(getattr(v, "type", None), "dtype", None)) == DType.i8 for v in (a, b)):
    raise E.KernelTypeError(
        f"{la} @ {lb} of int8 tiles is jnp's int8 product (its int32 sums wrapped), which a kernel does not compute",
        loc, hint=f"ask for the int32 sums: jnp.dot({la}, {lb}, preferred_element_type=jnp.int32) (or jnp.matmul"
                  f" with it), computed on the tensor cores as ml.dot")


def register_dot(tracer, node, nodes, values, kwargs, batched=False, shown="jnp.dot"):
  """The product's value, traced at `node`, or None where ml.dot does not take the operands (the call's MG003).
  `batched`: jnp.matmul's and `@`'s leading batch axis (jnp.dot of 3-D tiles is another product). Float tiles
  whose contracted axes differ are MG202 at the call (`shown`: the call as written, `jnp.dot` or `@`)."""
  extra = dict(kwargs)
  want = extra.pop("preferred_element_type", None)
  precision = extra.pop("precision", None)
  if extra or len(nodes) != 2 or len(values) != 2 or not all(_tile(v) for v in values):
    return None                # (a ref passed as it is: jnp takes arrays, its hint says to read it)
  ranks = [len(v.type.shape) for v in values]
  if ranks == [2, 2]:
    _same_k(tracer, node, nodes, values, shown)
    ops = _unwidened(tracer, nodes, values)
    if ops is not None:
      got = product(tracer, node, *[o[:2] for o in ops], DType.f32 if want is None else want, precision)
      for v, o in zip(values, ops) if got is not None else ():
        if o[2]:
          _drop_widened_transpose(tracer, v)
    else:
      got = product(tracer, node, *_operands(tracer, nodes, values), want, precision)
    if got is None and precision is None:      # ((48, 40) by (40, 72): in registers)
      from .jnp_einsum import chunked_product
      got = chunked_product(tracer, node, *values, want)
    return got
  if ranks in ([2, 1], [1, 2], [1, 1]):
    return vector_product(tracer, node, values, want)
  if batched and ranks in ([3, 3], [3, 2]):
    return batched_product(tracer, node, nodes, values, (False, False), want, precision)
  return None


def _same_k(tracer, node, nodes, values, shown):
  """MG202 where two 2-D float tiles' contracted axes (a's last, b's first) differ, as jnp's TypeError says."""
  from .ops.padded_tiles import true_shape
  (m, k), (k2, n) = (true_shape(tracer.b, v) for v in values)     # (a padded tile's own shape)
  if k == k2 or any(_dtype(v) not in _FLOATS for v in values):
    return
  a, b = (tracer.text(x) for x in nodes)
  def call(bt):
    return f"{a} @ {bt}" if shown == "@" else f"{shown}({a}, {bt})"
  bt = f"{b}.T" if b.isidentifier() or b.endswith("]") else f"({b}).T"
  fix = f"; to contract both last axes ({k}), transpose b: {call(bt)}" if n == k else ""
  raise E.ShapeMismatchError(
      f"{call(b)} of shapes {(m, k)} and {(k2, n)}: the contracted axes differ ({k} and {k2})", tracer.loc(node),
      hint=f"a product multiplies a's last axis with b's first: a is (m, k) and b is (k, n){fix}")


def einsum_dot(tracer, node, spec, nodes, values, kwargs):
  """jnp.einsum of two tiles whose spec is a matrix product, its operands either way round ('ij,jk->ik',
  'ij,kj->ik', 'qd,kd->qk'), the result too ('ij,jk->ki'), over a shared leading batch axis ('bij,bjk->bik');
  None for another spec."""
  from .jnp_einsum import two_operand_spec
  if (got := two_operand_spec(spec, values, kwargs)) is None:
    return None
  parts, out = got
  if any(len(set(p)) != len(p) for p in parts + [out]) or any(
      not _tile(v) or len(v.type.shape) != len(p) for v, p in zip(values, parts)):
    return None
  sa, sb = parts
  if sorted((len(sa), len(sb))) == [1, 2] and len(out) == 1:      # 'ij,j->i', 'i,ij->j': a matrix-vector product
    m2, v1 = (sa, sb) if len(sa) == 2 else (sb, sa)
    if v1 not in m2 or out == v1 or out not in m2:
      return None
    if (m2.index(v1) == 1) != (len(sa) == 2):      # the vector on the side it contracts: transpose the matrix
      return None
    return vector_product(tracer, node, values, kwargs.get("preferred_element_type"))
  batch = ""
  if len(sa) == len(sb) == len(out) == 3 and sa[0] == sb[0] == out[0]:
    batch, sa, sb, out = sa[0], sa[1:], sb[1:], out[1:]
  if not (len(sa) == len(sb) == len(out) == 2):
    return None
  shared = set(sa) & set(sb)
  if len(shared) != 1 or shared & set(out) or set(out) != (set(sa) | set(sb)) - shared:
    return None
  c = shared.pop()
  ta, tb = sa[0] == c, sb[1] == c       # a read (k, m), b read (n, k): transposed first
  flip_out = out != sa[1 - sa.index(c)] + sb[1 - sb.index(c)]
  want, precision = kwargs.get("preferred_element_type"), kwargs.get("precision")
  if batch:
    if flip_out:
      return None
    return batched_product(tracer, node, nodes, values, (ta, tb), want, precision)
  (va, fa), (vb, fb) = _operands(tracer, nodes, values)
  got = product(tracer, node, (va, fa != ta), (vb, fb != tb), want, precision)
  if got is None and precision is None:
    got = _in_registers(tracer, node, (va, fa != ta), (vb, fb != tb), want)
  if got is None or not flip_out:
    return got
  from .jnp_calls import trace_form
  return trace_form(tracer, node, "{0}.T", [got])


def dot_general_dot(tracer, node, nodes, values, dims, kwargs):
  """lax.dot_general of two 2-D tiles contracting one axis each, or of two 3-D ones over a leading batch axis
  (((2,), (1,)), ((0,), (0,))); None for other dimension numbers."""
  extra = {k: v for k, v in kwargs.items() if k not in ("preferred_element_type", "precision", "out_sharding")
           or k == "out_sharding" and v is not None}
  try:
    (ca, cb), (ba, bb) = dims
    ca, cb, ba, bb = (tuple(int(i) for i in d) for d in (ca, cb, ba, bb))
  except (TypeError, ValueError):
    return None
  if extra or len(values) != 2 or not all(_tile(v) for v in values):
    return None
  ranks = [len(v.type.shape) for v in values]
  want, precision = kwargs.get("preferred_element_type"), kwargs.get("precision")
  if len(ca) != 1 or len(cb) != 1:
    return None
  ca, cb = ca[0] % ranks[0], cb[0] % ranks[1]
  if ranks == [2, 2] and not ba and not bb:
    (va, fa), (vb, fb) = _operands(tracer, nodes, values)
    a, b = (va, fa != (ca == 0)), (vb, fb != (cb == 1))
    got = product(tracer, node, a, b, want, precision)
    return got if got is not None or precision is not None else _in_registers(tracer, node, a, b, want)
  if ranks == [3, 3] and ba == bb == (0,) and ca and cb:
    return batched_product(tracer, node, nodes, values, (ca == 1, cb == 2), want, precision)
  return None


def vector_product(tracer, node, values, want):
  """A matrix-vector, vector-matrix or vector-vector product (a decode GEMV), which ml.dot does not take: products in
  float32 summed along the contracted axis (ml.dot's float32 accumulation), in jnp's result dtype; None for
  integers and sizes that differ (the call's MG003)."""
  from .jnp_calls import trace_form
  ds = [_dtype(v) for v in values]
  if any(d not in _FLOATS for d in ds):
    return None
  pads = getattr(tracer.b, "pad_tiles", None) or {}
  a, b = (tuple(pads.get(v.id, v.type.shape)) for v in values)    # (a padded trace's operands: their own shapes,
  if a[-1] != b[0]:                                               # an RNN's (20, 20) W and (20,) h; probe 72a)
    return None
  common = ds[0]
  if ds[0] != ds[1]:
    from .ops.promotion import arithmetic_in
    common = arithmetic_in(*ds)
  out = common if want is None else to_dtype(want)
  if out is None or common is None:
    return None
  p, q = "{0}.astype(ml.float32)", "{1}.astype(ml.float32)"
  form = {(2, 1): f"ml.sum({p} * {q}[None, :], axis=1)", (1, 2): f"ml.sum({p}[:, None] * {q}, axis=0)",
          (1, 1): f"ml.sum({p} * {q})"}[len(a), len(b)]
  if out != DType.f32:
    form = f"{form}.astype({{2}})"
  ops, start = tracer.b.block.ops, len(tracer.b.block.ops)
  try:
    got = trace_form(tracer, node, form, [values[0], values[1], out])
  except E.KernelError:
    return None
  from .ops.shape import Broadcast
  for o in ops[start:]:      # (the vector's broadcast is the product's own, no NumPy alignment of the user's: a
    if isinstance(o, Broadcast) and len(o.x.type.shape) == 1:     # layout conflict takes a copy, as written out
      tracer.b.index_broadcasts.add(o.result.id)    # x[None, :] would; `h = W @ h` in a loop, probe 72a)
  return got


def batched_product(tracer, node, nodes, values, flips, want, precision):
  """One product per element of a's leading axis (b's too where it is 3-D), stacked: (z, m, n). An SMEM buffer
  read whole is passed a batch element at a time, as its view `a_s.at[i]`."""
  from .jnp_calls import trace_form
  ops = _operands(tracer, nodes, values)
  z = values[0].type.shape[0]
  if any(flip for _, flip in ops) or len(values[1].type.shape) == 3 and values[1].type.shape[0] != z:
    return None
  parts = []
  for i in range(z):
    ai, bi = (trace_form(tracer, node, f"{{0}}{'.at' if isinstance(v.type, RefType) else ''}[{i}]", [v])
              if len(v.type.shape) == 3 else v for v, _ in ops)
    got = product(tracer, node, (ai, flips[0]), (bi, flips[1]), want, precision)
    if got is None:
      return None
    parts.append(got)
  return trace_form(tracer, node, "ml.stack([" + ", ".join(f"{{{i}}}" for i in range(z)) + "], axis=0)", parts)


def product(tracer, node, a, b, want, precision):
  """`a @ b` of (value, transposed) operands, as ml.dot computes it, in jnp's result dtype; None where ml.dot does
  not take them."""
  from .jnp_calls import trace_form
  (va, fa), (vb, fb) = a, b
  da, db = _dtype(va), _dtype(vb)
  if da not in _OPERANDS or db not in _OPERANDS or len(_shape(a)) != 2 or len(_shape(b)) != 2 or \
      _shape(a, tracer)[1] != _shape(b, tracer)[0]:
    return None
  common = da
  if da != db:                  # jnp's promotion: bfloat16 with float32 computes in float32
    from .ops.promotion import arithmetic_in
    common = arithmetic_in(da, db)
    if common not in _FLOATS:   # (8-bit operands of two dtypes: jnp promotes them to none)
      return None
    (va, fa), (vb, fb) = (_register(tracer, node, x, common) for x in ((va, fa), (vb, fb)))
  out = common if want is None else to_dtype(want)
  if out is None or common == DType.i8 and want is None:
    return None                 # (jnp.dot of int8 tiles is int8, wrapped: its MG003 asks for preferred_element_type)
  # jnp.dot of 16-bit tiles accumulates in float32 and rounds once; an accumulator dtype asked for is ml.dot's
  acc = out if want is not None and out in hw.MMA_ACC.get(common, (DType.f32,)) else \
      hw.MMA_ACC.get(common, (DType.f32,))[0]       # (int8's int32, converted to a float asked for)
  k = _shape(a, tracer)[1]
  if common == DType.i8 and k % _I8_K:
    # (int8 tiles of a k the tensor cores do not take from registers, a W8A8 head of 48: both padded with zeros
    # along k to a multiple of 64, zero columns of a meeting zero rows of b, the sums unchanged; probe 53b)
    up = -(-k // _I8_K) * _I8_K
    (va, fa), (vb, fb) = (_register(tracer, node, x, DType.i8) for x in ((va, fa), (vb, fb)))
    va = trace_form(tracer, node, f"ml.pad({{0}}, ((0, 0), (0, {up - k})))", [va])
    vb = trace_form(tracer, node, f"ml.pad({{0}}, ((0, {up - k}), (0, 0)))", [vb])
  keys = ", preferred_element_type={2}" + ("" if precision is None else ", precision={4}")
  cast = "" if acc == out else ".astype({3})"
  try:
    if common == DType.f32:
      staged = _k_major(tracer, node, (va, fa), (vb, fb))
      if staged[0] is not None:
        va, fa, vb, fb = staged
      elif _shape(a)[0] * _shape(a)[1] * _shape(b)[1] <= _REGISTER_MOST:
        return None            # (small: jnp's float32 products in registers, exactly, chunked_product)
      # else (m or n not a multiple of 64: a (200, 64) A, a (64, 40) B) ml.dot stages and pads the register tiles
      # itself, as it does Triton's tl.dot of two loaded float32 tiles (probe 51e: chunked_product took tens of
      # seconds to build such products, or failed in its own layouts)
    form = f"ml.dot({{0}}{'.T' if fa else ''}, {{1}}{'.T' if fb else ''}{keys}){cast}"
    got = trace_form(tracer, node, form, [va, vb, acc, out, precision])
    for v in (va, vb):               # (a buffer's transposed read the dot took as its view: the transpose unused)
      if (t := getattr(tracer.b, "fresh_transposes", {}).pop(id(v), None)) is not None:
        _drop_transpose(tracer, t)
    return got
  except E.KernelError as e:
    if precision is not None and e.code == "MG106" and "precision" in e.message:
      import ast                       # (Precision.HIGHEST of float32 tiles: the tensor cores read TF32; probe 48h)
      if isinstance(node, ast.Call):
        e.message = e.message.replace("ml.dot with", f"{tracer.text(node.func)} with", 1)
        e.args = (e.message,)
      raise
    if isinstance(e, E.LayoutError) and tracer.b.dot_layouts is not None:
      tracer.b.dot_layouts.append(node)     # (compile.trace tries the padded trace: a GQA group's (4, 72) product)
    return None                # (a shape ml.dot does not take: the call's MG003 and its hint)


def _in_registers(tracer, node, a, b, want):
  """`a @ b` of (value, transposed) operands ml.dot did not take ('qd,kd->qk' of float32 tiles of fewer than 64
  rows, `lax.dot_general` contracting both last axes): each read into registers as the (m, k) and (k, n) tile it
  stands for (a transpose through SMEM), then jnp_einsum.chunked_product's product of those tiles (chunks, or ml.dot
  where no layout holds them); None where that takes none (the call's MG003)."""
  from .jnp_einsum import chunked_product
  if any(_dtype(v) not in _FLOATS for v, _ in (a, b)) or len(_shape(a)) != 2 or len(_shape(b)) != 2:
    return None
  xa, xb = (_register(tracer, node, x, _dtype(x[0]))[0] for x in (a, b))
  return chunked_product(tracer, node, xa, xb, want)


def _register(tracer, node, x, dtype):
  """(the operand read into registers as `dtype`, not transposed)."""
  from .jnp_calls import trace_form
  v, flip = x
  form = ("{0}[...]" if isinstance(v.type, RefType) else "{0}") + (".T" if flip else "")
  if _dtype(v) != dtype:
    form += ".astype({1})"
  return trace_form(tracer, node, form, [v, dtype]), False


def _k_major(tracer, node, a, b):
  """float32 operands as the tensor cores read them: a from an SMEM buffer (m, k), b from one stored (n, k), read
  through its transposed view. An operand not so stored is stored from registers into a buffer of its own (64
  rows a warpgroup fill: m and n multiples of 64; (None,) * 4 otherwise)."""
  from .jnp_calls import trace_form
  from .ops.memory import smem
  from .ops.transfers import store
  (va, fa), (vb, fb) = a, b
  smem_a = isinstance(va.type, RefType) and not fa
  smem_b = isinstance(vb.type, RefType) and fb
  m, n = _shape(a)[0], _shape(b)[1]
  if not smem_a and m % hw.MMA_M or not smem_b and n % hw.MMA_M:
    return (None,) * 4
  cx = tracer.cx(node)
  if not smem_a:
    x = _register(tracer, node, a, DType.f32)[0]
    va = smem.rule(dataclasses.replace(cx, name="a_s"), tuple(x.type.shape), DType.f32)
    store(cx, va, x)
    fa = False
  if not smem_b:               # b's transpose (n, k), stored as it is, read as its view .T
    if isinstance(vb.type, RefType):
      x = trace_form(tracer, node, "{0}[...]" + ("" if fb else ".T"), [vb])
    else:
      x = vb if fb else trace_form(tracer, node, "{0}.T", [vb])
    buf = smem.rule(dataclasses.replace(cx, name="b_s"), tuple(x.type.shape), DType.f32)
    store(cx, buf, x)
    vb, fb = buf, True
  return va, fa, vb, fb
