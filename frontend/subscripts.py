"""The Tracer's reads of attributes and subscripts (frontend/tracer.py): `x.shape`, `ml.name`, a
method's hints; `ref[...]`, `ref.at[...]`, register indexing and gathers, with their errors.
"""
from __future__ import annotations

import ast
import re

from . import errors as E
from .calls import _Method
from .dtypes import DType
from . import missing, static_tables
from .missing import missing_hint
from .torch_hints import torch_method_hint
from .ops import METHODS, REF_METHODS, gather, memory, permute, roll, shape, transfers
from .ops.base import TRANSPOSES, is_smem_matrix, is_tensor, is_value, keep_weak, kind_of, smem_transpose_hint, static_number
from .ops.vector_views import strided_vector
from .ops.strided_axes import strided_axis
from .ops.register_gather import register_gather
from .strided_views import (AtOf, StridedView, built, compose, is_strided, part_indexed, strided_attribute, strided_error,
                            window_leaving)
from .ops.padded_meets import padded_steps
from .ops.padded_tiles import padded_strided
from .ops.index_hints import check_tensor_steps, run_window_hint, strided_last_axis
from .ops.scatter_hints import aliased_input, scatter_set_hint
from .ops.table_hints import table_lookup_hint
from .ops.register_at import RegisterAt
from .assign import DICTS_FIXED, SCATTER_HINT, At, holds_value, is_whole
from .types import RefType, ScalarType, TensorType, resolve

_LIST_METHODS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"})


def _flat_store_hint(ref, shape) -> str:
  """The fix for a store at several index tensors that decompose one flat position (an implicit
  GEMM's n, oh, ow of p = i * 128 + ml.arange(128)): a window of the output flattened outside."""
  rows = 1
  for d in shape[:-1]:
    rows *= d
  return (f"where the index tensors decompose one run of flat positions (p // ..., p % ... of"
          f" p = start + ml.arange(m)), give {ref} the flat shape ({rows}, {shape[-1]}) in out_shape"
          f" (reshape the result outside the kernel, free in XLA) and store a window of its rows:"
          f" {ref}.at[ml.ds(start, m), :].store(v, mask=(p < {rows})[:, None]); ")


_REF_ATTRS = ("at", "T", "shape", "dtype", "ndim", "size")
_VALUE_ATTRS = ("T", "mT", "shape", "dtype", "ndim", "size", "prod")


def _misspelt(recv: str, attr: str, t, args) -> str | None:
  """`x.lod()`, `v.asype(f32)`, `x.shap[0]`: the attribute a misspelt name most likely meant (the same first
  letter, close in spelling), read from the ref first where only register values have it (`x.astyp(...)`);
  `args`: the call's arguments as written (None where the attribute is not called)."""
  import difflib

  def close(names):
    hits = difflib.get_close_matches(attr, sorted(set(names)), n=1, cutoff=0.7)
    return hits[0] if hits and hits[0][0] == attr[0] else None
  ref = isinstance(t, RefType)
  own = close([*REF_METHODS, *_REF_ATTRS] if ref else [*METHODS, *_VALUE_ATTRS])
  read = close([*METHODS, *_VALUE_ATTRS]) if ref and own is None else None
  name = own or read
  if name is None:
    return None
  methods = REF_METHODS if ref and own else METHODS
  called = f"({', '.join(args)})" if args is not None and name in methods else ""
  return f"did you mean {recv}{'[...]' if read else ''}.{name}{called}?" + (
      f" ({recv} is a ref: read it into registers with {recv}[...] first)" if read else "")


class Subscripts:
  """Attribute and subscript reads of the Tracer (which provides eval, lookup, loc, cx, text,
  binop, python)."""

  def _known_dtype(self, node, ref) -> DType:
    """`ref`'s element type, which `.dtype` asks for: an error where inference has not fixed it yet."""
    d = resolve(ref.type.dtype)
    if not isinstance(d, DType):
      raise E.DtypeInferenceError(f"{ref.name or 'this buffer'}'s dtype is not known yet at this point",
                                  self.loc(node), hint=self._untyped_hint(ref))
    return d

  def _pointer_dtype(self, node, base, attr):
    """`.dtype` (numpy's, as a ref's) or Triton's `.type` of a pointer block `x.at[offs]`: its ref's element type,
    so fla's `ml.store(p_o, b_o.to(p_o.dtype.element_ty))` stores in the output's dtype (it was MG003, 'indexed by
    tensors: it has no .dtype'; a block pointer's has answered since probe 53f)."""
    d = self._known_dtype(node, base.ref)
    if attr == "dtype":
      return d.np
    import numpy as np
    from .triton_math import TritonType
    shapes = [tuple(i.type.shape) for i in base.index if is_value(i) and isinstance(i.type, TensorType)]
    return TritonType(d.np, tuple(np.broadcast_shapes(*shapes)) if shapes else (), True)

  def eval_Attribute(self, node):
    call = self.call_node if self.call_node is not None and self.call_node.func is node else None
    base = self.eval(node.value)
    attr = node.attr
    if attr in ("T", "mT") and (got := static_tables.known(base)) is not None and got[2].ndim == 2:
      return static_tables.table(self, node, "asarray", got[2].T)     # a table's transpose: the transposed table
    if isinstance(base, StridedView):
      return strided_attribute(self, base, attr, node)
    from .ops.split_k import Split, attribute
    if isinstance(base, Split):             # (a buffer split along a ragged K: ops/split_k.py, probe 59a)
      return attribute(self.cx(node), base, attr)
    if isinstance(base, gather.IndexedRef) and attr in ("dtype", "type"):
      return self._pointer_dtype(node, base, attr)      # Triton's p_o.dtype.element_ty of a pointer block (probe 67b)
    if isinstance(base, gather.IndexedRef):
      hint = SCATTER_HINT
      if attr in ("load", "store"):     # Triton's x_ptr + offs: a window is what moves a run of elements
        ref = base.ref.name or "x"
        sub = node.value
        elts = (sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]) if isinstance(sub, ast.Subscript) else []
        own = run_window_hint(self.b, ref, base.index, elts, attr, call) if elts else None
        window = gather.run_window(self.cx(node), base, self.text(node.value)) if own is not None or (
            not elts and isinstance(node.value, ast.Name)) else None     # (ptrs.load(...) of ptrs = x.at[r, cols])
        if window is not None:                # x.at[offs].load(mask=offs < n): the window the run covers
          return _Method(REF_METHODS[attr], window)
        if attr == "load":                    # tl.load(ptr + ids * d + cols, mask=m, other=0) at computed places
          return _Method(gather.gather_load(), base)
        if attr == "store" and base.ref.type.space in (memory.Space.GMEM, memory.Space.SMEM) \
            and gather.writable(self.b, base.ref):      # tl.store at computed places (an aliased input's, SMEM's)
          return _Method(gather.scatter_store(), base)
        hint = ("for a run of consecutive elements (Triton's ptr + offs, offs = start + tl.arange(n)), index"
                " with a window: " + (f"{own}, masked where it runs past the end; " if own else
                f"{ref}.at[ml.ds(start, n)].{attr}(..., mask=...), masked where it runs past the end; ")
                + "for indices scattered at random, " + SCATTER_HINT[0].lower() + SCATTER_HINT[1:])
        if attr == "store" and call is not None and (call.args or any(k.arg == "value" for k in call.keywords)):
          value = call.args[0] if call.args else next(k.value for k in call.keywords if k.arg == "value")
          mask = next((k.value for k in call.keywords if k.arg == "mask"), call.args[1] if len(call.args) > 1 else None)
          at = sub.value.value if isinstance(sub.value, ast.Attribute) else sub.value
          hint = hint.split("for indices scattered at random, ")[0] + "for indices scattered at random, " + \
              scatter_set_hint(self.text(at), self.index_text(sub.slice, base.index), self.text(value),
                               self.text(mask) if mask is not None else None, aliased_input(self.b, self.text(at)))
        if attr == "store" and own is None and sum(not isinstance(e, ast.Slice) for e in elts) >= 2:
          hint = _flat_store_hint(ref, base.ref.type.shape) + hint
      elif attr == "set" and call is not None and len(call.args) == 1 and isinstance(node.value, ast.Subscript):
        at = node.value.value.value if isinstance(node.value.value, ast.Attribute) else node.value.value
        hint = scatter_set_hint(self.text(at), self.index_text(node.value.slice, base.index), self.text(call.args[0]),
                                None, aliased_input(self.b, self.text(at)))    # jnp's out.at[ids].set(v)
      raise E.KernelTypeError(
          f"{self.text(node.value)} is indexed by tensors: it has no .{attr}; it is read ([...], a"
          f" gather) or updated atomically (a scatter)", self.loc(node), hint=hint)
    if is_value(base):
      t = base.type
      from .ops.padded_tiles import true_shape
      if attr == "shape":
        return true_shape(self.b, base)        # (a padded value's own shape, as the user wrote it)
      if attr == "ndim":
        return len(t.shape)
      if attr == "size":
        n = 1
        for d in true_shape(self.b, base):
          n *= d
        return n
      if attr == "dtype":
        return self._known_dtype(node, base).np     # numpy's dtype: == jnp.float32, .name, jnp.finfo all work
      if attr == "at" and isinstance(t, RefType):
        return At(base)
      if attr == "type" and isinstance(resolve(t.dtype), DType):   # Triton's Out.type.element_ty (probe 49h)
        from .triton_math import TritonType
        return TritonType(resolve(t.dtype).np, tuple(t.shape), isinstance(t, RefType))
      if attr == "T":
        if isinstance(t, RefType):
          return memory.transpose(self.cx(node), base, self.text(node))
        if len(t.shape) >= 3:       # jnp's .T of a wider array: its axes reversed
          return keep_weak(self.b, [base], permute.permute_tensor(self.cx(node), base, tuple(range(len(t.shape)))[::-1],
                                                                  self.text(node)))
        return keep_weak(self.b, [base], permute.transpose_tensor(self.cx(node), base, self.text(node)))
      if attr == "mT" and not isinstance(t, RefType) and len(t.shape) >= 2:    # jnp's and torch's batched transpose
        order = tuple(range(len(t.shape) - 2)) + (len(t.shape) - 1, len(t.shape) - 2)
        return keep_weak(self.b, [base], permute.permute_tensor(self.cx(node), base, order, self.text(node))
                         if len(t.shape) >= 3 else permute.transpose_tensor(self.cx(node), base, self.text(node)))
      if attr in ("real", "imag", "conj", "conjugate") and isinstance(t, (TensorType, ScalarType)) and \
          isinstance(resolve(t.dtype), DType):   # jnp's of a real array (probe 72b): itself, zeros, itself
        if attr == "imag":
          from .ops import BUILTINS
          return BUILTINS["zeros_like"].apply(self.cx(node), [base], {})
        return base if attr == "real" else (lambda: base)
      if attr == "prod" and isinstance(t, TensorType):      # jnp's v.prod(axis=1): jnp.prod(v, axis=1) (probe 51a)
        import functools
        from .jnp_stats import jnp_prod
        return functools.partial(jnp_prod, base)
      if attr in METHODS and not isinstance(t, RefType):
        return _Method(METHODS[attr], base)
      if attr in REF_METHODS and isinstance(t, RefType):
        return _Method(REF_METHODS[attr], base)
      error = lambda: E.KernelTypeError(
          f"{kind_of(base)} has no attribute {attr!r}", self.loc(node),
          hint=self._method_hint(node, base, call) or _misspelt(self.text(node.value), attr, t, None if call is None else [
               self.text(a) for a in call.args] + [f"{k.arg}={self.text(k.value)}" for k in call.keywords if k.arg]) or
               "refs have .at, .load, .store, .T, .shape, .dtype; register values "
               + ", ".join(f".{m}" for m in sorted(set(METHODS) | {"T", "shape", "dtype"}))
               + (f" (for .{attr}, call ml.{attr}(x, ...))" if attr in ("argmax", "argmin", "cumsum", "sort", "argsort")
                  else ""))
      if attr == "at" and call is None:       # jnp's acc.at[ids].add(rows) (ops/register_at.py), else the error
        return RegisterAt(base, error)
      raise error()
    if isinstance(base, (tuple, list)) and attr in _LIST_METHODS:
      raise E.KernelTypeError(
          f"{self.text(node.value)}.{attr}: lists in a kernel are fixed once built (a loop carries them"
          f" as values, and a change in place would happen once, while tracing), so they have no .{attr}",
          self.loc(node),
          hint=self._rebuild_outer(node, call) or
          f"build it in one go: {self.text(node.value)} = [f(c) for c in ml.static_range(n)], or"
          f" {self.text(node.value)} = {self.text(node.value)} + [value] in an ml.static_range loop")
    if isinstance(base, dict) and attr in ("clear", "pop", "popitem", "update", "setdefault", "__setitem__",
                                           "__delitem__"):
      d = self.text(node.value)
      raise E.KernelTypeError(
          f"{d}.{attr}: {DICTS_FIXED}, so they have no .{attr}", self.loc(node),
          hint=f"build a new one: {d} = {{**{d}, 'k': v}} to add or replace, {d} = {{k: v for k, v in"
               f" {d}.items() if k != 'a'}} to drop")
    if attr in ("to", "astype") and call is not None and isinstance(base, (int, float)) and not hasattr(base, attr):
      # (a NumPy scalar's own .astype stays a typed constant, ops/base.TypedFloat: x / c's rule, probe 57c)
      from .py_scalars import number_as_scalar     # Triton's eps.to(x.dtype), jnp.float32(c).astype(x.dtype)
      return _Method(METHODS[attr], number_as_scalar(self.cx(node), base))
    if attr in ("dtype", "shape", "ndim", "size") and type(base) in (int, float):
      # a Python number, or the weak 0-d result of a jnp function of Python numbers (`jnp.sqrt(2.0).dtype`): what
      # jnp gives of it, float32 or int32 (the result keeps its weak type: it takes the tensor's dtype it meets)
      from .dtypes import INDEX, PY_FLOAT
      return {"dtype": PY_FLOAT if isinstance(base, float) else INDEX, "shape": (), "ndim": 0, "size": 1}[attr]
    from .triton_math import dtype_attr
    if (triton := dtype_attr(base, attr)) is not None:
      return triton[0]               # x_ptr.dtype.element_ty: Triton's element type of a pointer, a ref's dtype
    try:
      out = getattr(base, attr)
    except AttributeError:
      args = None if call is None else [self.text(a) for a in call.args] + [
          f"{k.arg}={self.text(k.value)}" for k in call.keywords if k.arg]
      from .ops.index_hints import register_gather_hint
      table = self.env.get(call.args[0].id) if call is not None and call.args and isinstance(call.args[0], ast.Name) else None
      hint = register_gather_hint(base, attr, table, args)
      raise E.UnknownNameError(f"{self.text(node.value)} has no attribute {attr!r}", self.loc(node),
                               hint=hint or missing_hint(base, attr, args, self.src.after(node),
                                                  frozenset(re.findall(r"[A-Za-z_]\w*", "\n".join(self.src.lines))))) from None
    return static_number(out)        # jnp.finfo(x.dtype).min: a NumPy scalar, as a module constant is

  def _rebuild_outer(self, node, call) -> str | None:
    """`d['l'].append(v)`, `rows[1].append(v)`: the list is an entry of a dict or list, whose entries
    cannot be assigned either, so the hint rebuilds the outer one (None when it is not so)."""
    inner = node.value
    if not (isinstance(inner, ast.Subscript) and isinstance(inner.value, ast.Name)):
      return None
    outer, p = self.env.get(inner.value.id), inner.value.id
    args = call.args if call is not None else []
    grown = (f"[{self.text(args[0])}]" if node.attr == "append" and len(args) == 1 else
             f"list({self.text(args[0])})" if node.attr == "extend" and len(args) == 1 else "[value]")
    new = f"{self.text(inner)} + {grown}"
    if isinstance(outer, dict):
      return f"build a new {p}: {p} = {{**{p}, {ast.unparse(inner.slice)}: {new}}}"
    if isinstance(outer, (tuple, list)) and isinstance(inner.slice, ast.Constant) \
        and isinstance(inner.slice.value, int) and 0 <= inner.slice.value < len(outer):
      i = inner.slice.value
      item = f"[{new}]" if isinstance(outer, list) else f"({new},)"
      return f"build a new {p}: {p} = {p}[:{i}] + {item} + {p}[{i + 1}:]"
    return None

  def _method_hint(self, node, base, call):
    """What to write for a Triton, torch or NumPy method (x.to, v.any, x.stride) `base` lacks."""
    args = axis = bitcast = None
    if call is not None:
      args = [self.text(a) for a in call.args] + [f"{k.arg}={self.text(k.value)}" for k in call.keywords if k.arg]
      kws = {k.arg: k.value for k in call.keywords}
      bitcast = False if "bitcast" not in kws else None
      try:
        if "bitcast" in kws:
          b = self.eval(kws["bitcast"])
          bitcast = b if isinstance(b, bool) else None
        ax = self.eval(kws["axis"]) if "axis" in kws else self.eval(call.args[0]) if call.args else None
        axis = ax if isinstance(ax, int) and not isinstance(ax, bool) else None if ax is None else "?"
      except E.KernelError:
        pass
      if node.attr == "to" and "bitcast" in kws:
        args = [a for a in args if not a.startswith("bitcast=")]
    t = base.type
    d = resolve(t.dtype)
    if node.attr in TRANSPOSES and is_smem_matrix(base) and (node.value.__class__ is ast.Name):
      return smem_transpose_hint(self.text(node.value))       # b_s.transpose(), b_s.mT: the view b_s.T
    if node.attr == "at" and not isinstance(t, RefType) and len(t.shape) in (1, 2):
      own = _at_update_hint(self.loc(node), self.text(node.value), t.shape)     # jnp's c = c.at[i].add(1)
      if own is not None:
        return own
    if node.attr == "item" and not isinstance(t, RefType):       # numpy's / torch's x.item()
      recv = self.text(node.value)
      if isinstance(t, ScalarType):
        return f"a scalar is already one value: write {recv}, without .item()"
      if all(n == 1 for n in t.shape):
        return f"take its element: {recv}[{', '.join('0' for _ in t.shape)}], a scalar"
    from .shape_hints import method_shape_hint
    shaped = None if isinstance(t, RefType) else method_shape_hint(node.attr, self.text(node.value), args, t.shape)
    if shaped is not None:
      return shaped
    torch = torch_method_hint(node.attr, self.text(node.value), args) if not isinstance(t, RefType) else None
    if torch is not None:
      return torch
    from .ml_name_hints import triton_method_hint
    triton = None if isinstance(t, RefType) else triton_method_hint(node.attr, self.text(node.value), args)
    if triton is not None:
      return triton
    return missing.method_hint(node.attr, self.text(node.value), ref=isinstance(t, RefType), shape=t.shape,
                               is_bool=d == DType.bool_, args=args, axis=axis, bitcast=bitcast)

  def eval_index(self, node):
    if isinstance(node, ast.Slice):
      return slice(*(self.eval(x) if x is not None else None for x in (node.lower, node.upper, node.step)))
    if isinstance(node, ast.Tuple):
      return tuple(self.eval_index(e) for e in node.elts)
    return self.eval(node)

  @staticmethod
  def _index_operands(node, index):
    """(values, nodes): the run-time values of a subscript and the user's expressions for them
    (slice bounds too), so messages quote `l[i] + 8`, not a name of the compiler's."""
    values, nodes = [], []
    pairs = zip(node.elts, index) if isinstance(node, ast.Tuple) and isinstance(index, tuple) \
        and len(node.elts) == len(index) else [(node, index)]
    for n, v in pairs:
      if isinstance(n, ast.Slice) and isinstance(v, slice):
        for part, x in ((n.lower, v.start), (n.upper, v.stop)):
          if part is not None and is_value(x):
            values.append(x)
            nodes.append(part)
      elif isinstance(v, memory.DSlice) and isinstance(n, ast.Call) and n.args and is_value(v.start):
        values.append(v.start)            # ml.ds(p * 4, 128): its start as written
        nodes.append(n.args[0])
      elif is_value(v):
        values.append(v)
        nodes.append(n)
    return values, nodes

  def eval_Subscript(self, node):
    base = self.eval(node.value)
    index = self.eval_index(node.slice)
    from .static_tables import index_arrays       # x[:, REV] of a module's NumPy table of indices: a gather
    index = index_arrays(self, node, base, index)
    if holds_value(index) and not is_value(base):
      from .static_tables import outside      # NF4[idx] of a module's NumPy table: a gather from its register table
      base = outside(self, node, base, lookup=True)
    values, nodes = self._index_operands(node.slice, index)
    if is_value(base):                      # (the base too: `(acc * 2)[:, 5]` in a hint, not a placeholder)
      values, nodes = [base, *values], [node.value, *nodes]
    cx, name = self.cx(node, values=values, operands=nodes), self.text(node)
    cx.text = name                          # the user's subscript, for messages about it
    if isinstance(base, RegisterAt):
      return base.index(index, cx)
    if isinstance(base, At):
      if gather.has_tensor_index(index):        # out.at[ids, :]: read it (a gather) or scatter into it
        return gather.IndexedRef(base.ref, index)
      if is_strided(index):                     # x.at[::2]: read or written whole, as x[::2] is
        return StridedView(base.ref, index, name)
      return memory.view(cx, base.ref, index, name)
    if isinstance(base, AtOf):                  # x.at[::2].at[0:8]: the view x.at[0:16:2]
      if (both := compose(base.view, index)) is None:
        raise window_leaving(base.view, index, cx.loc) or part_indexed(base.view, index, cx.loc) \
            or strided_error(base.view, f"viewed again ({name})", cx.loc)
      both = built(cx, both)
      return StridedView(base.view.ref, both, name) if is_strided(both) else memory.view(cx, base.view.ref, both, name)
    if isinstance(base, StridedView):
      if not is_whole(index) and (index := compose(base, index)) is None:
        raise part_indexed(base, index, cx.loc) or strided_error(base, f"indexed again ({name})", cx.loc)
      base, index = base.ref, base.index if is_whole(index) else built(cx, index)     # x.at[::2][...] is x[::2]
    if isinstance(base, gather.IndexedRef):
      if index is not Ellipsis:
        raise E.KernelTypeError(
            f"{self.text(node.value)} is indexed by tensors already: read it whole with [...]", cx.loc,
            hint="put every index in one subscript: table.at[ids, ml.ds(0, 64)][...] or table[ids, 0:64]")
      return gather.gather(cx, base.ref, base.index, name)
    from .ops.split_k import Split, read as split_read
    if isinstance(base, Split):             # (a buffer split along a ragged K, read whole: its parts joined)
      return split_read(cx, base, index, lambda p: self._read_ref(cx, node, p, Ellipsis, name))
    if is_value(base):
      if isinstance(base.type, RefType):
        if (plan := none_axes(base, index)) is not None:     # g[b, None, :]: the read, then the axes inserted
          return shape.expand(cx, self._read_ref(cx, node, base, plan[0], name), plan[1])
        return self._read_ref(cx, node, base, index, name)
      if is_tensor(base):         # (a weakly typed tensor's elements stay weak, as in jnp)
        if (strided := self._stepped(cx, base, index)) is not None:
          return keep_weak(self.b, [base], strided)
        if (rev := roll.reversed_axes(base, index)) is not None:    # v[:, ::-1]: jnp.flip, through SMEM
          return keep_weak(self.b, [base], roll.flip_tensor(cx, base, rev, name))
        if (view := permute.strided_slice(cx, base, index)) is not None:    # v[::2], v[1::3]: a view, through SMEM
          return keep_weak(self.b, [base], view)
        if gather.has_tensor_index(index) and (got := register_gather(cx, base, index, name)) is not None:
          return keep_weak(self.b, [base], got)       # v[ids], v[:, ids]: jnp's gather, through SMEM
        check_tensor_steps(cx, base, index)
        from .ops.scan import mark_totals
        mark_totals(self.b, base, index)      # (ml.cumprod(v)[-1]: the scan's total, checked as a reduction's)
        return keep_weak(self.b, [base], shape.expand(cx, base, index))
      if index is Ellipsis or index == ():        # jnp's s[...] and s[()] of a 0-d array: s itself
        return base
      if index is None or isinstance(index, tuple) and all(i is None for i in index):     # s[None]: shape (1,)
        from .ops.elementwise import stretch    # (the one-element tensor a keepdims full reduction is)
        return keep_weak(self.b, [base], stretch(cx, (1,) * (len(index) if isinstance(index, tuple) else 1), base))
      name = base.name if (base.name or "").isidentifier() else None
      self.unsupported(node, "indexing a scalar", hint=(
          f"{name} is a scalar (as an ml.scalar parameter is: it has no elements): use it as {name},"
          f" without an index" if name else
          "a scalar has no elements to index: use it as it is"))
    if holds_value(index):
      from .ops.base import unroll_hint
      vals = [i for i in (index if isinstance(index, tuple) else (index,)) if is_value(i)]
      unroll = (lambda h: unroll_hint(cx.b, vals[0], h)) if vals else (lambda h: h)
      bufs = isinstance(base, (list, tuple)) and base and all(
          is_value(b) and isinstance(b.type, RefType) and str(b.type.space) == "SMEM" for b in base)
      if bufs:       # double buffering by hand: one stacked buffer, indexed at run time
        shp = base[0].type.shape
        raise E.KernelTypeError(
            f"cannot index {self.text(node.value)} (a Python {type(base).__name__} of SMEM buffers) with a"
            f" runtime value", cx.loc,
            hint=unroll(f"stack them in one buffer with a leading axis and take a window of it at run time:"
                        f" buf = ml.smem(({len(base)}, {', '.join(map(str, shp))}), ...); buf.at[i % {len(base)}]"))
      lookup = table_lookup_hint(base, index, self.text(node.value), self.text(node.slice))
      raise E.KernelTypeError(
          f"cannot index {self.text(node.value)} ({kind_of(base)}) with a runtime value", cx.loc,
          hint=unroll(lookup or "index Python lists, tuples and dicts with static values (ints, shapes, constexprs);"
                                " select between register values with ml.where"))
    try:
      out = base[index]
    except Exception as e:
      raise self._index_error(cx, node, base, index, e) from None
    return static_number(out)       # COEFFS[2] of a module's NumPy array: a NumPy scalar, as a constant is

  def _read_ref(self, cx, node, base, index, name):
    """A plain read `ref[index]` into registers (a gather where the index holds tensors)."""
    if gather.has_tensor_index(index):        # table[ids, :]: NumPy's advanced indexing
      from .page_gathers import stacked_pages
      if (pages := stacked_pages(self, node, base, index)) is not None:
        return pages                          # k_pages[block_tables] of 3-D pages: the pages stacked
      return gather.gather(cx, base, index, name)
    cx.access = "read"
    if (cols := permute.column_run(cx, base, index)) is not None:     # x[:, j] of 8 rows: a gather, as jnp's
      return gather.gather(cx, base, cols, name)
    if (plan := permute.covering_window(base, index)) is not None:    # x[::2] of a ref: its window, then the view
      window, steps = plan
      got = transfers.load(cx, memory.view(cx, base, window, name))
      # (as the read's steps of a register tensor: one of an odd result, x[n, 2 * i, ::2] of (14, 96), padded)
      return self._stepped(cx, got, steps) or permute.strided_slice(cx, got, steps)
    view = base if is_whole(index) else memory.view(cx, base, index, name)
    out = transfers.load(cx, view, name)
    if not is_whole(index):             # (ml.concatenate of rotated windows of a ref reads it rolled)
      from .ops.roll import record_ref_window
      record_ref_window(cx, out, base, index)
    return out

  @staticmethod
  def _stepped(cx, base, index):
    """`v[::2]`, `v[:, 1::2]`, `v[1::2, :]` of a register tensor by the forms that take static steps (a reshape,
    a vector's, an axis's; computed padded for an odd read or result); None where none does."""
    strided = padded_strided(cx, base, lambda: strided_last_axis(cx, base, index), index)   # (a padded trace)
    strided = strided if strided is not None else padded_steps(cx, base, index, lambda v, i: next(
        (r for f in (strided_last_axis, strided_vector, strided_axis, permute.strided_slice)
         if (r := f(cx, v, i)) is not None), None))        # (v[::2] of an odd read, or of 500 results: padded)
    strided = strided if strided is not None else strided_last_axis(cx, base, index)  # x[:, 1::2]: a reshape
    strided = strided if strided is not None else strided_vector(cx, base, index)   # m[1::2] of 192
    return strided if strided is not None else strided_axis(cx, base, index)     # v[1::2, :], w[:, 2:130:2]

  def _index_error(self, cx, node, base, index, e) -> E.KernelError:
    """`d['b']` of a key d lacks, `t[5]` past a tuple's end: say which keys or indices there are."""
    name = self.text(node.value)
    if isinstance(base, dict) and isinstance(e, KeyError):
      keys = list(base)
      if not keys:
        return E.KernelTypeError(f"{index!r} is not a key of {name}: {name} is empty", cx.loc,
                                 hint=f"read it with a default: {name}.get({index!r}, v)")
      shown = ", ".join(map(repr, keys[:8])) + (", ..." if len(keys) > 8 else "")
      return E.KernelTypeError(f"{index!r} is not a key of {name} (its keys: {shown})", cx.loc,
                               hint=f"index it with one of its keys, {name}[{keys[0]!r}], or read it with a"
                                    f" default: {name}.get({index!r}, v)")
    if isinstance(base, (tuple, list)) and isinstance(e, IndexError) and isinstance(index, int):
      n = len(base)
      return E.KernelTypeError(
          f"{name}[{index}] is out of range: {name} is empty" if not n else
          f"{name}[{index}] is out of range: {name} has {n} item{'s' * (n != 1)}", cx.loc,
          hint=f"index {name} from 0 to {n - 1} (or from -{n} to -1)" if n else
          f"give {name} items before indexing it")
    return E.KernelTypeError(f"cannot index {name}: {e}", cx.loc, hint="static values index as in Python")


_AT_SELECT = {"set": "{y}", "add": "{v} + {y}", "multiply": "{v} * {y}", "mul": "{v} * {y}",
              "max": "ml.maximum({v}, {y})", "min": "ml.minimum({v}, {y})"}


def none_axes(ref, index):
  """(the index without its Nones, the index that inserts their axes into what it reads) of a plain read of `ref`
  whose index holds None beside ints, run-time scalars, slices, windows and integer tensors next to each other
  (`g[b, None, :]`, `g[:, None]`, `t[ids, None, :]`, as jnp's `g[b][None, :]`: probe 56g); None for an index
  without None, with tensors of indices apart (NumPy moves their axes first), or with more items than ref has axes
  (the read's own error)."""
  items = index if isinstance(index, tuple) else (index,)
  if not any(i is None for i in items) or sum(i is Ellipsis for i in items) > 1:
    return None
  rank = len(ref.type.shape)
  real = [i for i in items if i is not None and i is not Ellipsis]
  if len(real) > rank:
    return None
  full = []
  for i in items:
    full.extend([slice(None)] * (rank - len(real)) if i is Ellipsis else [i])
  point = [isinstance(i, int) and not isinstance(i, bool) or is_value(i) and isinstance(i.type, ScalarType)
           for i in full]
  tensors = [d for d, i in enumerate(full) if is_tensor(i)]
  if tensors:                  # (ints and scalars join the tensors' group: it must be one run)
    adv = [d for d in range(len(full)) if point[d] or d in tensors]
    if adv != list(range(adv[0], adv[-1] + 1)):
      return None
  kept = []
  for d, i in enumerate(full):
    if i is None:
      kept.append(None)
    elif tensors and d == tensors[0]:
      kept.extend([slice(None)] * max(len(full[k].type.shape) for k in tensors))
    elif not point[d] and d not in tensors:
      kept.append(slice(None))
  return tuple(i for i in items if i is not None), tuple(kept)


def _at_update_hint(loc, recv: str, shape) -> str | None:
  """jnp's functional update of a register tensor, `c.at[i].add(y)` on the line at `loc`, as the
  select by index that computes it, in the user's words; None where the line is not so written."""
  line = loc.source_line or ""
  try:
    tree = ast.parse(line.strip())
  except SyntaxError:
    return None
  for n in ast.walk(tree):
    f = getattr(n, "func", None)
    if (isinstance(n, ast.Call) and isinstance(f, ast.Attribute) and f.attr in _AT_SELECT and len(n.args) == 1
        and isinstance(f.value, ast.Subscript) and isinstance(f.value.value, ast.Attribute)
        and f.value.value.attr == "at" and ast.unparse(f.value.value.value) == recv
        and (starts := _window_starts(f.value.slice, len(shape))) is not None):
      from .shape_hints import operand
      y = ast.unparse(n.args[0])        # v.at[p:p + 16].set(u), v.at[ml.ds(p, 16)].set(u): a window at run time
      st = f"({', '.join(starts)}{',' * (len(starts) == 1)})"
      part = f"jax.lax.dynamic_slice({recv}, {st}, {operand(y)}.shape)"
      return (f"a window of a register tensor at a run-time start is updated by lax: jax.lax.dynamic_update_slice("
              f"{recv}, {_AT_SELECT[f.attr].format(v=part, y=y)}, {st})")
    if (isinstance(n, ast.Call) and isinstance(f, ast.Attribute) and f.attr in _AT_SELECT and len(n.args) == 1
        and isinstance(f.value, ast.Subscript) and isinstance(f.value.value, ast.Attribute)
        and f.value.value.attr == "at" and ast.unparse(f.value.value.value) == recv
        and isinstance(f.value.slice, ast.Tuple) and len(shape) == 2 == len(f.value.slice.elts)):
      pick = _at_pick(f.value.slice.elts, shape)      # v.at[:, 0].set(0.0): a boundary column
      if pick is None:
        return None
      i, y = ", ".join(ast.unparse(e) for e in f.value.slice.elts), ast.unparse(n.args[0])
      return (f"register tensors are values, updated by a select: {recv}.at[{i}].{f.attr}({y}) is"
              f" ml.where({pick}, {_AT_SELECT[f.attr].format(v=recv, y=y)}, {recv})")
    if (isinstance(n, ast.Call) and isinstance(f, ast.Attribute) and f.attr in _AT_SELECT and len(n.args) == 1
        and isinstance(f.value, ast.Subscript) and isinstance(f.value.value, ast.Attribute)
        and f.value.value.attr == "at" and ast.unparse(f.value.value.value) == recv
        and not isinstance(f.value.slice, (ast.Tuple, ast.Slice))):
      i, y = ast.unparse(f.value.slice), ast.unparse(n.args[0])
      pick = f"ml.arange({shape[0]}){'[:, None]' if len(shape) == 2 else ''} == {_bound(f.value.slice, shape[0])}"
      new = _AT_SELECT[f.attr].format(v=recv, y=y)
      many = ""
      if f.attr == "add" and len(shape) == 1:      # at a tensor of indices: a histogram of them
        atom = isinstance(f.value.slice, (ast.Name, ast.Subscript, ast.Call, ast.Attribute))
        ii = i if atom else f"({i})"
        many = (f"; where {i} is a tensor of indices (jnp adds at each), add their one-hot rows:"
                f" {recv} + ml.sum(ml.where({ii}[:, None] == ml.arange({shape[0]})[None, :], {y}, 0), axis=0)")
      return (f"register tensors are values, updated by a select: {recv}.at[{i}].{f.attr}({y}) is"
              f" ml.where({pick}, {new}, {recv}){many}")
  return None


def _window_starts(index, rank) -> list[str] | None:
  """The start of each axis of `v.at[index]` where index names a window at a run-time start (`p:p + 16`, `ml.ds(p,
  16)`: jnp's .at takes neither; probe 57d) and whole axes, as lax.dynamic_update_slice's start indices; None for
  any other index (static windows and single indices have their select)."""
  items = list(index.elts) if isinstance(index, ast.Tuple) else [index]
  if len(items) > rank:
    return None
  starts, run_time = [], False
  for e in items:
    if isinstance(e, ast.Slice) and e.step is None:
      lo = e.lower
      static = lo is None or isinstance(lo, ast.Constant) or isinstance(lo, ast.UnaryOp) and isinstance(
          lo.operand, ast.Constant)
      run_time |= not static or not (e.upper is None or isinstance(e.upper, ast.Constant))
      starts.append("0" if lo is None else ast.unparse(lo))
    elif isinstance(e, ast.Call) and ast.unparse(e.func).split(".")[-1] in ("ds", "dslice") and e.args:
      run_time = True
      starts.append(ast.unparse(e.args[0]))
    else:
      return None
  return starts + ["0"] * (rank - len(items)) if run_time else None


def _at_pick(items, shape) -> str | None:
  """The mask of the elements `v.at[a, b]` names in a 2-D register tensor of `shape` (each index `:`,
  a static slice `lo:hi`, or one index), as index comparisons; None for other indices."""
  conds = []
  for axis, (e, n) in enumerate(zip(items, shape)):
    at = f"ml.arange({n}){'[:, None]' if axis == 0 else '[None, :]'}"
    if isinstance(e, ast.Slice):
      if e.step is not None:
        return None
      lo, hi = (_bound(b, n) for b in (e.lower, e.upper))
      conds += [f"({at} >= {lo})"] * (lo is not None) + [f"({at} < {hi})"] * (hi is not None)
    elif isinstance(e, ast.Starred) or isinstance(e, ast.Constant) and e.value is Ellipsis:
      return None
    else:
      conds.append(f"({at} == {ast.unparse(e)})")
  if not conds:
    return None
  return conds[0][1:-1] if len(conds) == 1 else " & ".join(conds)


def _bound(b, n) -> str | None:
  """A slice bound as written, a static negative int counted from the end (`-1` of 16 is 15)."""
  if b is None:
    return None
  try:
    k = ast.literal_eval(b)
  except (ValueError, SyntaxError, TypeError):
    return ast.unparse(b)
  return str(k + n if isinstance(k, int) and k < 0 else k)
