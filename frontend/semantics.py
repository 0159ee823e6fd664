"""Typed-op construction: each DSL operation's type rule and legality checks.

`Emitter` knows nothing of Python syntax (frontend/tracer.py walks the AST and
calls it) and nothing of MLIR. Each method checks its operands, reports a
located `KernelError` on misuse, and appends one op to the current block.
"""
from __future__ import annotations

import contextlib
import math

from . import errors as E
from . import ir
from .dtypes import ARITH_DTYPES, DType, INDEX, PY_FLOAT
from .loc import Loc
from .types import (DTypeVar, RefType, ScalarType, Space, TensorType, dtype_name,
                    resolve)
from . import tma

WARPGROUP = 128
Num = (int, float, bool)

_FLOAT_ONLY = {ir.UnOp.EXP, ir.UnOp.EXP2, ir.UnOp.LOG, ir.UnOp.SQRT,
               ir.UnOp.RSQRT, ir.UnOp.TANH}
_INT_ONLY = {ir.BinOp.FLOORDIV, ir.BinOp.MOD, ir.BinOp.AND, ir.BinOp.OR, ir.BinOp.XOR}
# Mosaic GPU allows these on 8-bit integers (bitwise ops and equality need no arithmetic).
_BITWISE_8BIT = {ir.BinOp.AND, ir.BinOp.OR, ir.BinOp.XOR, ir.CmpOp.EQ, ir.CmpOp.NE}
_FLOAT8 = frozenset({DType.f8e4m3, DType.f8e5m2})
# Register values `ml.arange` can produce (Mosaic GPU's iota has no 8-bit float or bool form).
_ARANGE_DTYPES = frozenset(d for d in DType if d.is_int) | {DType.f32, DType.f16, DType.bf16}


def cast_problem(src: DType, dst: DType, *, scalar: bool) -> str | None:
  """Why Mosaic GPU cannot convert `src` to `dst` (None if it can).

  lowering/compat.py bridges narrow float <-> float and 8-bit <-> float
  conversions through f32; what is left are the pairs below.
  """
  if dst == DType.bool_:
    return "casting to bool is not supported"
  if scalar and src.is_float and dst.is_float and src != dst and src.bits == dst.bits:
    return f"scalars convert between floats of one width ({src} -> {dst}) only through float32"
  if not scalar and dst in _FLOAT8 and src.is_int and src.bits > 8:
    return f"Mosaic GPU converts {src} to 8-bit floats only through float32"
  return None


def is_value(x) -> bool:
  return isinstance(x, ir.Value)


def kind_of(x) -> str:
  if isinstance(x, ir.Value):
    t = x.type
    if isinstance(t, RefType):
      return f"a {t.space} ref"
    return "a register tensor" if isinstance(t, TensorType) else "a scalar"
  return f"a Python {type(x).__name__}"


def bool_ref_error(ref, loc, what):
  """Bool refs: Mosaic GPU cannot move 1-bit elements between memory and registers or by TMA."""
  return E.UnsupportedDtypeError(
      f"cannot {what} {ref.name or 'a ref'} ({ref.type.space}, bool): kernels cannot read or write bool"
      f" arrays in memory, only compute bool masks in registers", loc,
      hint="keep masks in memory as int8 and convert in registers: m = x[...] != 0 to read,"
           " out[...] = m.astype(jnp.int8) to write")


class Emitter:
  def __init__(self, cluster=(1, 1, 1)):
    self.block = ir.Block()
    self.defs: dict[int, ir.Op] = {}
    self.allocs: list[ir.Value] = []
    self.num_load_slots = 0
    self.cluster = cluster

  # ------------------------------------------------------------ plumbing
  def emit(self, cls, *args, loc: Loc, types=(), names=(), **kw) -> ir.Op:
    results = tuple(ir.Value(t, n) for t, n in zip(types, names or [""] * len(types)))
    o = cls(*args, loc=loc, results=results, **kw)
    self.block.ops.append(o)
    for r in results:
      self.defs[r.id] = o
    return o

  @contextlib.contextmanager
  def region(self, block: ir.Block):
    saved, self.block = self.block, block
    try:
      yield block
    finally:
      self.block = saved

  def root(self, ref: ir.Value) -> ir.Value:
    d = self.defs.get(ref.id)
    return d.ref if isinstance(d, ir.View) else ref

  # ------------------------------------------------------------ dtype inference
  def unify(self, a, b, loc: Loc, why: str):
    """Make dtypes `a` and `b` equal. Returns the common dtype, or None on conflict.

    Binding a DTypeVar records where and why, so a later conflict can name both
    lines.
    """
    a, b = resolve(a), resolve(b)
    if isinstance(a, DType) and isinstance(b, DType):
      return a if a == b else None
    if isinstance(a, DTypeVar) and isinstance(b, DTypeVar):
      if a is not b:
        a._parent = b
      return b
    var, concrete = (a, b) if isinstance(a, DTypeVar) else (b, a)
    var.dtype, var.bound_at, var.bound_by = concrete, loc, why
    return concrete

  def conflict(self, var_dtype, other, loc: Loc, what: str):
    """If `var_dtype` is a bound inferred dtype, the DtypeConflictError naming both uses."""
    if not isinstance(var_dtype, DTypeVar):
      return None
    v = var_dtype.find()
    if v.dtype is None or v.bound_at is None:
      return None
    return E.DtypeConflictError(
        f"{v.owner} (SMEM, inferred dtype) would be {dtype_name(other)} here ({what}),"
        f" but line {v.bound_at.lineno} already made it {v.dtype} ({v.bound_by})",
        loc, hint=f"give {v.owner} an explicit dtype, or convert one side with .astype(...)",
        notes=(f"{v.bound_at}: {v.owner} inferred as {v.dtype} here",))

  # ------------------------------------------------------------ grid
  def program_id(self, axis, loc, *, num=False):
    if not isinstance(axis, int) or not 0 <= axis <= 2:
      raise E.KernelTypeError(f"grid axis must be 0, 1 or 2, got {axis!r}", loc)
    cls = ir.NumPrograms if num else ir.ProgramId
    return self.emit(cls, axis, loc=loc, types=[ScalarType(INDEX)]).result

  def constant(self, value, loc, dtype=None):
    dtype = dtype or (PY_FLOAT if isinstance(value, float) else
                      DType.bool_ if isinstance(value, bool) else INDEX)
    return self.emit(ir.Constant, value, loc=loc, types=[ScalarType(dtype)]).result

  # ------------------------------------------------------------ refs
  def smem(self, shape, dtype, name, loc):
    shape = self.static_shape(shape, loc, "ml.smem")
    if dtype == DType.bool_:
      raise E.UnsupportedDtypeError(
          f"ml.smem buffers cannot hold bool: Mosaic GPU cannot store 1-bit elements in SMEM", loc,
          hint="allocate it as jnp.int8, write masks with m.astype(jnp.int8) and read them back with"
               " buf[...] != 0")
    if dtype is None:
      dtype = DTypeVar(name or "buffer", loc)
    v = self.emit(ir.SmemAlloc, loc=loc, types=[RefType(shape, dtype, Space.SMEM)],
                  names=[name]).result
    self.allocs.append(v)
    return v

  def static_shape(self, shape, loc, what):
    if isinstance(shape, int) and not isinstance(shape, bool):
      shape = (shape,)
    if (not isinstance(shape, tuple) or not shape
        or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape)):
      raise E.KernelTypeError(
          f"{what} needs a static shape: a tuple of positive Python ints, got {shape!r}", loc,
          hint="shapes are fixed when the kernel is compiled; use constexpr parameters for sizes")
    return shape

  def view(self, ref: ir.Value, index, name, loc):
    """`ref.at[index]`: a window of `ref`, composed onto the root ref."""
    if not isinstance(ref.type, RefType):
      raise E.KernelTypeError(f".at[...] needs a ref, got {kind_of(ref)}", loc)
    idx = self.normalize_index(ref.type.shape, index, loc, ref.name or name)
    parent = self.defs.get(ref.id)
    if isinstance(parent, ir.View):      # compose onto the root
      new, it = [], iter(idx)
      for p in parent.index:
        if p.squeeze:
          new.append(p)
          continue
        n = next(it)
        start = self.add_index(p.start, n.start, loc)
        new.append(ir.Idx(start, n.size, n.squeeze))
      idx, ref = tuple(new), parent.ref
    shape = tuple(i.size for i in idx if not i.squeeze)
    t = RefType(shape, ref.type.dtype, ref.type.space, ref.type.remote)
    return self.emit(ir.View, ref, idx, loc=loc, types=[t], names=[name]).result

  def add_index(self, a, b, loc):
    if isinstance(a, int) and isinstance(b, int):
      return a + b
    if a == 0:
      return b
    if b == 0:
      return a
    return self.binary(ir.BinOp.ADD, a, b, loc)

  def normalize_index(self, shape, index, loc, name):
    from .language import DSlice
    if not isinstance(index, tuple):
      index = (index,)
    n_ell = sum(1 for i in index if i is Ellipsis)
    if n_ell > 1:
      raise E.KernelTypeError("an index can hold at most one '...'", loc)
    if n_ell:
      k = index.index(Ellipsis)
      index = index[:k] + (slice(None),) * (len(shape) - len(index) + 1) + index[k + 1:]
    if len(index) > len(shape):
      raise E.IndexOutOfBoundsError(
          f"too many indices for {name or 'ref'} of rank {len(shape)}: got {len(index)}", loc)
    index = index + (slice(None),) * (len(shape) - len(index))
    out = []
    for d, (i, n) in enumerate(zip(index, shape)):
      if isinstance(i, bool):
        raise E.KernelTypeError(f"cannot index with a bool (dimension {d})", loc)
      if isinstance(i, int):
        if not -n <= i < n:
          raise E.IndexOutOfBoundsError(
              f"index {i} is out of bounds for dimension {d} of {name or 'ref'} (size {n})", loc)
        out.append(ir.Idx(i % n, 1, True))
      elif isinstance(i, slice):
        if i.step not in (None, 1):
          raise E.KernelTypeError("strided slices are not supported; use a step of 1", loc)
        start, stop = i.start, i.stop
        if not all(x is None or (isinstance(x, int) and not isinstance(x, bool)) for x in (start, stop)):
          raise E.KernelTypeError(
              "slice bounds must be static ints; for a dynamic start use ml.ds(start, size)", loc)
        start, stop, _ = slice(start, stop).indices(n)
        if i.start is not None and not -n <= i.start <= n or i.stop is not None and not -n <= i.stop <= n:
          raise E.IndexOutOfBoundsError(
              f"slice {i.start}:{i.stop} is out of bounds for dimension {d} of {name or 'ref'} (size {n})", loc)
        if stop <= start:
          raise E.IndexOutOfBoundsError(f"slice {i.start}:{i.stop} of dimension {d} is empty", loc)
        out.append(ir.Idx(start, stop - start))
      elif isinstance(i, DSlice):
        size = i.size
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
          raise E.KernelTypeError(f"ml.ds size must be a positive static int, got {size!r}", loc)
        if size > n:
          raise E.IndexOutOfBoundsError(
              f"ml.ds size {size} exceeds dimension {d} of {name or 'ref'} (size {n})", loc)
        start = self.index_operand(i.start, loc)
        if isinstance(start, int) and not 0 <= start <= n - size:
          raise E.IndexOutOfBoundsError(
              f"ml.ds({start}, {size}) is out of bounds for dimension {d} of {name or 'ref'} (size {n})", loc)
        out.append(ir.Idx(start, size))
      elif is_value(i):
        out.append(ir.Idx(self.index_operand(i, loc), 1, True))
      else:
        raise E.KernelTypeError(
            f"cannot index with {kind_of(i)}; use ints, static slices or ml.ds(start, size)", loc)
    return tuple(out)

  def index_operand(self, x, loc):
    if isinstance(x, int) and not isinstance(x, bool):
      return x
    if is_value(x) and isinstance(x.type, ScalarType) and resolve(x.type.dtype) in (DType.i32, DType.i64, DType.u32):
      return x
    raise E.KernelTypeError(f"an index must be an integer scalar, got {kind_of(x)}", loc)

  def cluster_ref(self, buf, cta, axis, name, loc):
    if not is_value(buf) or not isinstance(buf.type, RefType) or buf.type.space != Space.SMEM or buf.type.remote:
      what = f"{kind_of(buf)}" if not (is_value(buf) and isinstance(buf.type, RefType)) else \
          f"{buf.name or 'it'} ({buf.type.space})"
      raise E.ClusterRefError(
          f"ml.cluster_ref needs an SMEM buffer of this CTA, got {what}", loc,
          hint="only SMEM is shared within a cluster; copy GMEM data into an ml.smem buffer first")
    if not isinstance(axis, int) or not 0 <= axis <= 2:
      raise E.KernelTypeError(f"cluster axis must be 0, 1 or 2, got {axis!r}", loc)
    if self.cluster[axis] == 1:
      raise E.ClusterRefError(
          f"ml.cluster_ref along axis {axis}, but the kernel's cluster is {self.cluster}", loc,
          hint="launch with @mgpu_kernel(..., cluster=(2,)) or larger along that axis")
    if isinstance(cta, int) and not 0 <= cta < self.cluster[axis]:
      raise E.IndexOutOfBoundsError(
          f"CTA {cta} is outside the cluster's {self.cluster[axis]} CTAs along axis {axis}", loc)
    cta = self.index_operand(cta, loc)
    t = RefType(buf.type.shape, buf.type.dtype, Space.SMEM, remote=True)
    return self.emit(ir.ClusterRef, buf, cta, axis, loc=loc, types=[t], names=[name]).result

  # ------------------------------------------------------------ data movement
  def load(self, ref, name, loc):
    t = ref.type
    if not t.shape:
      raise E.KernelTypeError(
          f"reading one element of {ref.name or 'a ref'} into a scalar is not supported", loc,
          hint="read a slice instead, e.g. ref.at[i:i+128][...]")
    if resolve(t.dtype) == DType.bool_:
      raise bool_ref_error(ref, loc, "read")
    self.check_layout(t.shape, loc, name, vector_ok=True)
    return self.emit(ir.Load, ref, loc=loc, types=[TensorType(t.shape, t.dtype)], names=[name]).result

  def check_layout(self, shape, loc, name, *, vector_ok=False):
    """Strided register tensors hold a multiple of 128 elements. A vector (1-D, a multiple
    of 8) may instead become a column vector of a tensor-core tile: frontend/layouts.py
    decides, and checks it then."""
    if vector_ok and len(shape) == 1 and shape[0] % 8 == 0:
      return
    if math.prod(shape) % WARPGROUP:
      raise E.LayoutError(
          f"{name or 'this tensor'} has shape {shape}: register tensors need a multiple of"
          f" {WARPGROUP} elements (one per thread of a warpgroup)", loc,
          hint="work on larger tiles, e.g. (128,) or (8, 16)")

  def store(self, ref, value, loc):
    t = ref.type
    if isinstance(value, Num) or (is_value(value) and isinstance(value.type, ScalarType)):
      value = self.full(t.shape, value, t.dtype, loc)
    if not is_value(value) or not isinstance(value.type, TensorType):
      raise E.KernelTypeError(f"cannot store {kind_of(value)} into {ref.name or 'a ref'}", loc,
                              hint="store a register tensor: ref[...] = other_ref[...] * 2")
    if value.type.shape != t.shape:
      raise E.ShapeMismatchError(
          f"cannot store a tensor of shape {value.type.shape} into {ref.name or 'a ref'} of shape {t.shape}", loc)
    rd = resolve(t.dtype)
    if rd == DType.bool_ or (isinstance(rd, DTypeVar) and resolve(value.type.dtype) == DType.bool_):
      raise bool_ref_error(ref, loc, "write")
    if self.unify(t.dtype, value.type.dtype, loc, f"store of {value.name or 'a value'}") is None:
      err = self.conflict(t.dtype, value.type.dtype, loc, f"store of {value.type.dtype}")
      raise err or E.StoreDtypeError(
          f"cannot store {value.name or 'a value'} ({dtype_name(value.type.dtype)}) into"
          f" {ref.name or 'a ref'} ({t.space}, {dtype_name(t.dtype)}): no implicit conversion", loc,
          hint=f"convert explicitly: {ref.name or 'ref'}[...] = ({value.name or 'value'}).astype(jnp.{dtype_name(t.dtype)})")
    self.emit(ir.Store, ref, value, loc=loc)

  def copy(self, src, dst, loc):
    for what, r in (("source", src), ("destination", dst)):
      if not is_value(r) or not isinstance(r.type, RefType):
        raise E.KernelTypeError(
            f"ml.copy {what} must be a ref (a kernel parameter, an ml.smem buffer or a view),"
            f" got {kind_of(r)}", loc, hint="to write registers into a ref use ref[...] = value")
    s, d = src.type, dst.type
    desc = lambda v: f"{v.name or 'ref'} ({v.type.space}, {dtype_name(v.type.dtype)})"
    if s.space == Space.GMEM and d.space == Space.GMEM:
      raise E.CopySpaceError(
          f"cannot copy {src.name} (GMEM) into {dst.name} (GMEM): there is no GMEM -> GMEM copy", loc,
          hint=f"stage it through SMEM: buf = ml.smem({s.shape}); ml.copy({src.name}, buf); ml.copy(buf, {dst.name})")
    if s.shape != d.shape:
      raise E.CopyShapeError(
          f"cannot copy {src.name} (shape {s.shape}) into {dst.name} (shape {d.shape}): shapes differ", loc,
          hint="slice both sides to the same window with .at[...]")
    for r, what in ((src, "copy"), (dst, "copy into")):
      if resolve(r.type.dtype) == DType.bool_:
        raise bool_ref_error(r, loc, what)
    if self.unify(s.dtype, d.dtype, loc, f"copy from {src.name}" if d.space == Space.SMEM
                  else f"copy to {dst.name}") is None:
      var_side, other = (d, s) if isinstance(d.dtype, DTypeVar) else (s, d)
      err = self.conflict(var_side.dtype, other.dtype, loc, f"copy {src.name} -> {dst.name}")
      smem_side = dst if d.space == Space.SMEM else src
      raise err or E.CopyDtypeError(
          f"cannot copy {desc(src)} into {desc(dst)}: element types differ", loc,
          hint=f"allocate {smem_side.name} as {dtype_name((s if smem_side is dst else d).dtype)}"
               f" (or leave dtype out to infer it), or convert in registers:"
               f" buf2[...] = {smem_side.name}[...].astype(jnp.{dtype_name(smem_side.type.dtype)})")
    if s.space == Space.SMEM and d.space == Space.SMEM:
      self.store(dst, self.load(src, src.name, loc), loc)   # through registers
      return
    if s.remote or d.remote:
      raise E.ClusterRefError(
          "TMA copies to or from another CTA's SMEM are not supported", loc,
          hint="read the peer's buffer into registers: local[...] = ml.cluster_ref(buf, cta)[...]")
    gmem, smem_ref = (src, dst) if s.space == Space.GMEM else (dst, src)
    tma.check_copy(self, gmem, smem_ref, loc)
    slot = -1
    if d.space == Space.SMEM:
      slot, self.num_load_slots = self.num_load_slots, self.num_load_slots + 1
    self.emit(ir.Copy, src, dst, slot, loc=loc)

  # ------------------------------------------------------------ arithmetic
  def operand_dtype(self, x):
    return x.type.dtype if is_value(x) else None

  def shape_of(self, x):
    return x.type.shape if is_value(x) and isinstance(x.type, TensorType) else None

  def check_register_value(self, x, loc, what):
    if is_value(x) and isinstance(x.type, RefType):
      raise E.KernelTypeError(
          f"{what} works on register values, got {x.name or 'a ref'} ({x.type.space} ref)", loc,
          hint=f"read it into registers first: {x.name or 'ref'}[...]")
    if not (is_value(x) or isinstance(x, Num)):
      raise E.KernelTypeError(f"{what} cannot take {kind_of(x)}", loc)

  def common(self, a, b, loc, what):
    """Shape and dtype of a binary op's result; weak Python scalars adapt."""
    self.check_register_value(a, loc, what)
    self.check_register_value(b, loc, what)
    sa, sb = self.shape_of(a), self.shape_of(b)
    if sa is not None and sb is not None and sa != sb:
      # One broadcast is supported: a vector along the columns of a 2-D tile, (m, n) with (n,).
      if not (len(sa) == 2 and sb == sa[1:] or len(sb) == 2 and sa == sb[1:]):
        raise E.ShapeMismatchError(
            f"{what} on tensors of shapes {sa} and {sb}: shapes must match", loc,
            hint="only a vector of a tile's columns broadcasts: (m, n) with (n,)")
      sa = sb = sa if len(sa) == 2 else sb
    shape = sa if sa is not None else sb
    da, db = self.operand_dtype(a), self.operand_dtype(b)
    if da is None and db is None:
      raise E.InternalError("binary op on two Python values reached the emitter", loc)
    if da is None or db is None:
      dt, py = (da, b) if db is None else (db, a)
      rdt = resolve(dt)
      if isinstance(py, float) and isinstance(rdt, DType) and not rdt.is_float:
        raise E.DtypeMismatchError(
            f"{what} mixes a float constant ({py}) with an {rdt} value", loc,
            hint="convert the integer operand first: x.astype(jnp.float32)")
      return shape, dt
    dt = self.unify(da, db, loc, what)
    if dt is None:
      names = [x.name or kind_of(x) for x in (a, b)]
      raise E.DtypeMismatchError(
          f"{what} on {names[0]} ({dtype_name(da)}) and {names[1]} ({dtype_name(db)}):"
          f" dtypes differ and are never converted implicitly", loc,
          hint=f"convert one side explicitly, e.g. ({names[1]}).astype(jnp.{dtype_name(da)})")
    return shape, dt

  def result_type(self, shape, dtype):
    return ScalarType(dtype) if shape is None else TensorType(shape, dtype)

  def check_dtype_support(self, dtype, loc, what, *, floats_only=False, ints_only=False,
                          bitwise=False):
    d = resolve(dtype)
    if not isinstance(d, DType):
      return
    if bitwise and d.is_int:
      return
    if d not in ARITH_DTYPES and d != DType.bool_:
      raise E.UnsupportedDtypeError(
          f"{what} is not supported on {d}: Hopper has no register arithmetic on 8-bit types", loc,
          hint=f"upcast first: x.astype(jnp.float16), compute, then cast back")
    if floats_only and not d.is_float:
      raise E.UnsupportedDtypeError(f"{what} needs a floating-point operand, got {d}", loc,
                                    hint="convert first: x.astype(jnp.float32)")
    if ints_only and not (d.is_int or d == DType.bool_):
      raise E.UnsupportedDtypeError(f"{what} needs integer operands, got {d}", loc,
                                    hint="use / for floating-point division" if what == "//" else None)

  def binary(self, kind: ir.BinOp, a, b, loc, name=""):
    what = kind.value if kind not in (ir.BinOp.MAX, ir.BinOp.MIN) else f"ml.{kind.name.lower()}imum"
    shape, dt = self.common(a, b, loc, what)
    d = resolve(dt)
    self.check_dtype_support(dt, loc, what, ints_only=kind in _INT_ONLY, bitwise=kind in _BITWISE_8BIT)
    if kind == ir.BinOp.DIV and isinstance(d, DType) and not d.is_float:
      raise E.UnsupportedDtypeError(
          f"/ on {d} values: true division needs floating point", loc,
          hint="use // for integer division, or convert with .astype(jnp.float32)")
    if isinstance(d, DType) and d == DType.bool_ and kind not in (ir.BinOp.AND, ir.BinOp.OR, ir.BinOp.XOR):
      raise E.UnsupportedDtypeError(f"{what} on boolean values", loc, hint="use & | ^ on booleans")
    return self.emit(ir.Binary, kind, a, b, loc=loc, types=[self.result_type(shape, dt)],
                     names=[name]).result

  def compare(self, kind: ir.CmpOp, a, b, loc, name=""):
    shape, dt = self.common(a, b, loc, kind.value)
    self.check_dtype_support(dt, loc, kind.value, bitwise=kind in _BITWISE_8BIT)
    return self.emit(ir.Compare, kind, a, b, loc=loc,
                     types=[self.result_type(shape, DType.bool_)], names=[name]).result

  def unary(self, kind: ir.UnOp, x, loc, name=""):
    what = "-" if kind == ir.UnOp.NEG else "not" if kind == ir.UnOp.NOT else f"ml.{kind.value}"
    self.check_register_value(x, loc, what)
    if not is_value(x):
      raise E.KernelTypeError(f"{what} of a Python number should be computed in Python", loc)
    d = resolve(x.type.dtype)
    if kind == ir.UnOp.NOT:
      if isinstance(d, DType) and d != DType.bool_:
        raise E.UnsupportedDtypeError(f"'not' on {d}; use it on booleans (comparisons)", loc)
    else:
      self.check_dtype_support(x.type.dtype, loc, what, floats_only=kind in _FLOAT_ONLY)
    return self.emit(ir.Unary, kind, x, loc=loc, types=[x.type], names=[name]).result

  def where(self, cond, a, b, loc, name=""):
    self.check_register_value(cond, loc, "ml.where")
    if not is_value(cond) or resolve(cond.type.dtype) != DType.bool_:
      raise E.KernelTypeError(
          f"ml.where's condition must be a boolean tensor (a comparison), got {kind_of(cond)}", loc)
    if not is_value(a) and not is_value(b):   # two Python numbers: their default dtype
      self.check_register_value(a, loc, "ml.where")
      self.check_register_value(b, loc, "ml.where")
      shape = None
      dt = (DType.bool_ if isinstance(a, bool) and isinstance(b, bool) else
            PY_FLOAT if isinstance(a, float) or isinstance(b, float) else INDEX)
    else:
      shape, dt = self.common(a, b, loc, "ml.where")
    sc = self.shape_of(cond)
    if shape is not None and sc is not None and sc != shape:
      raise E.ShapeMismatchError(f"ml.where condition of shape {sc} with values of shape {shape}", loc)
    shape = shape if shape is not None else sc
    if shape is None:
      raise E.KernelTypeError("ml.where needs tensors; for scalars use an if statement", loc)
    self.check_dtype_support(dt, loc, "ml.where")
    return self.emit(ir.Where, cond, a, b, loc=loc, types=[TensorType(shape, dt)], names=[name]).result

  def cast(self, x, dtype, loc, name=""):
    self.check_register_value(x, loc, ".astype")
    if not is_value(x):
      return self.constant(x, loc, dtype)
    if not isinstance(dtype, DType):
      raise E.KernelTypeError(f".astype needs a dtype such as jnp.float16, got {dtype!r}", loc)
    src = resolve(x.type.dtype)
    why = cast_problem(src, dtype, scalar=isinstance(x.type, ScalarType)) if isinstance(src, DType) else None
    if dtype == DType.bool_:
      raise E.UnsupportedDtypeError("casting to bool is not supported; compare instead: x != 0", loc)
    if why:
      raise E.UnsupportedDtypeError(
          f"cannot cast {x.name or 'this value'} from {src} to {dtype}: {why}", loc,
          hint=f"cast in two steps: ({x.name or 'x'}).astype(jnp.float32).astype(jnp.{dtype})")
    return self.emit(ir.Cast, x, loc=loc, types=[self.result_type(self.shape_of(x), dtype)],
                     names=[name]).result

  def full(self, shape, value, dtype, loc, name=""):
    shape = self.static_shape(shape, loc, "ml.full")
    if not isinstance(dtype, (DType, DTypeVar)):
      raise E.KernelTypeError(f"ml.full needs a dtype such as jnp.float32, got {dtype!r}", loc)
    self.check_layout(shape, loc, name)
    if is_value(value):
      if not isinstance(value.type, ScalarType):
        raise E.KernelTypeError(f"ml.full's value must be a number or a scalar, got {kind_of(value)}", loc)
      if self.unify(value.type.dtype, dtype, loc, "ml.full") is None:
        raise E.DtypeMismatchError(
            f"ml.full of a {dtype_name(value.type.dtype)} scalar as {dtype_name(dtype)}", loc,
            hint="convert the scalar first: s.astype(...)")
    elif not isinstance(value, Num):
      raise E.KernelTypeError(f"ml.full's value must be a number or a scalar, got {kind_of(value)}", loc)
    return self.emit(ir.Full, value, loc=loc, types=[TensorType(shape, dtype)], names=[name]).result

  def arange(self, n, dtype, loc, name=""):
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
      raise E.KernelTypeError(f"ml.arange needs a positive static int, got {n!r}", loc)
    dtype = dtype or INDEX
    if dtype not in _ARANGE_DTYPES:
      raise E.UnsupportedDtypeError(
          f"ml.arange cannot produce {dtype}: it makes integers, float32, float16 or bfloat16", loc,
          hint=f"make it as int32 and convert: ml.arange({n}).astype(jnp.float32)" + (
              f".astype(jnp.{dtype})" if dtype in _FLOAT8 else ""))
    self.check_layout((n,), loc, name)
    return self.emit(ir.Arange, 0, loc=loc, types=[TensorType((n,), dtype)], names=[name]).result
