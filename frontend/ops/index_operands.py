"""Index operands: a window's start or a loop bound as a Python int or an integer scalar (8- and 16-bit ones
widened), and the errors of what is not one (a float, a one-element tensor, a tensor of indices, a ref; a loop
bound written `range(n / 64)`), in the words of the index or the loop header the user wrote."""
from __future__ import annotations

from .. import errors as E
from ..dtypes import DType
from ..loc import expr_at
from ..types import ScalarType, TensorType, dtype_name, resolve
from .base import is_ref, is_value, kind_of, one_element
from .elementwise_checks import float_param


def index_operand(cx, x, bound=False):
  """`x` as an index (a window's start, a loop bound): a Python int or an integer scalar; an
  8- or 16-bit one is widened to int32 (sign- or zero-extended, by its signedness). `bound`:
  a `range(...)` bound, whose mistakes say so."""
  if isinstance(x, int) and not isinstance(x, bool):
    return x
  if is_value(x) and isinstance(x.type, ScalarType):
    d = resolve(x.type.dtype)
    if d in (DType.i32, DType.i64, DType.u32):
      return x
    if isinstance(d, DType) and d.is_int and d.bits < 32:
      from .elementwise import Cast
      return cx.b.emit(Cast, x, loc=cx.loc, types=[ScalarType(DType.i32)], names=[x.name]).result
    if isinstance(d, DType):
      if bound:
        raise _bad_loop_bound(cx, x)
      name = cx.named(x, "")
      i = name if name.isidentifier() else f"({name})"
      convert = (f"convert a {dtype_name(d)} that holds an index: {i}.astype(jnp.int32)" if name else
                 f"convert a {dtype_name(d)} that holds an index with .astype(jnp.int32)")
      raise float_param(cx, x, E.KernelTypeError(
          f"an index must be an integer scalar, got {name or 'a scalar'} ({dtype_name(d)})", cx.loc,
          hint=f"index with ints, program ids, loop counters or integer scalar math (divide with //:"
               f" / gives a float); {convert}"), "an index")
  if bound:
    raise _bad_loop_bound(cx, x)
  if is_value(x) and isinstance(x.type, TensorType) and one_element(x.type.shape):
    name = cx.named(x, "") or x.name or "the index"
    zeros = ", ".join("0" for _ in x.type.shape)
    raise E.KernelTypeError(
        f"an index must be an integer scalar, but {name} is a tensor of shape {x.type.shape} (one element)", cx.loc,
        hint=f"take the element of the one-element tensor it is computed from ({name if name.isidentifier() else f'({name})'}"
             f"[{zeros}] works too), or read the index as a scalar where it comes from (pos[b, 0] of a (B, 1) array)"
             if not name.isidentifier() else
             f"take its element: {name}[{zeros}], or read the index as a scalar where it comes from (pos[b, 0] of a"
             f" (B, 1) array)")
  if is_value(x) and isinstance(x.type, TensorType):
    from .scatter_hints import as_int_indices
    ids = as_int_indices(x.name if (x.name or "").isidentifier() else "ids", x)
    raise E.KernelTypeError(
        f"an index here must be an integer scalar, got {x.name or 'a register tensor'}: only a read or a store of"
        f" a GMEM ref or an SMEM buffer takes a tensor of indices (a gather, table[ids, :])", cx.loc,
        hint=f"to add (or take the max or min) at computed places, scatter atomically:"
             f" ml.atomic_add(out.at[{ids}, :], rows) (an output so updated starts at 0); to set rows at"
             f" computed places, take one row at a time (out.at[ids_ref[r]][...] = row, an index read as"
             f" a scalar); to mask a read, gather and select: ml.where(m, t[{ids}, :], 0)")
  if is_ref(x):     # t[ids] of a ref ids: meant its values
    n = x.name if (x.name or "").isidentifier() else "ids"
    raise E.KernelTypeError(f"an index must be an integer scalar, got {kind_of(x)} ({n})", cx.loc,
                            hint=f"read its values first: index with {n}[...] (table[{n}[...], :] gathers rows"
                                 f" by all of them, ml.atomic_add(out.at[{n}[...]], v) scatters) or {n}[i] (one"
                                 f" element, a scalar index)")
  raise E.KernelTypeError(f"an index must be an integer scalar, got {kind_of(x)}", cx.loc,
                          hint="index with ints, program ids, loop counters or integer scalar math")


def _sole_bound(loc) -> str | None:
  """The text of the bound of a one-argument `range(bound)` at `loc`, if it is on one line."""
  import ast
  call = expr_at(loc)
  return ast.unparse(call.args[0]) if isinstance(call, ast.Call) and len(call.args) == 1 else None


def _bad_loop_bound(cx, x):
  """The error for a bound of `for i in range(...)` that is not an integer scalar."""
  if is_value(x) and isinstance(x.type, ScalarType):
    d = resolve(x.type.dtype)
    written = cx.operands.get(x) if cx.operands is not None else None
    text = written or x.name or _sole_bound(cx.loc)
    n = text if text and text.isidentifier() else f"({text or 'n'})"
    sole = _sole_bound(cx.loc) is not None
    fixed = _floor_divided(cx.loc) if d.is_float else None    # range(n / 64): a count of tiles meant
    covered = _floor_divided(cx.loc, ceil=True) if fixed else None
    return float_param(cx, x, E.KernelTypeError(
        f"a loop bound must be an integer scalar, got {text or 'a scalar'} ({dtype_name(d)})", cx.loc,
        hint=f"a count is an int: {covered} for the tiles that cover it, the last one partial (masked), or"
             f" {fixed} for the whole tiles only (converting the quotient, .astype(jnp.int32), drops the partial"
             f" one too)" if fixed else
        f"convert it: range({n}.astype(jnp.int32))" if sole or not written else
        f"convert it: {n}.astype(jnp.int32)"), "a loop bound")
  if is_value(x) and isinstance(x.type, TensorType):
    written = cx.operands.get(x) if cx.operands is not None else None      # (a (1,) tile's name: n[...])
    text, shape = x.name or written or _sole_bound(cx.loc) or "", x.type.shape
    first = ", ".join("0" for _ in shape)
    hint = (f"read one element, range({text[:-5]}[{first}]), or reduce the tensor, range(ml.max({text}))"
            if text.endswith("[...]") else
            f"reduce the tensor, range(ml.max({text or 'v'})), or read one element of the ref it comes from,"
            f" range(n[{first}])")
    return E.KernelTypeError(
        f"a loop bound must be an integer scalar, got {text or 'a register tensor'} of shape {shape}", cx.loc,
        hint=hint)
  if is_ref(x):     # range(ip.at[r], ...): meant the element ip[r]
    text = x.name or ""
    elem = (text.replace(".at[", "[", 1) if ".at[" in text else f"{text or 'n'}[...]" if x.type.shape == ()
            else f"{text or 'n'}[i]")
    return E.KernelTypeError(f"a loop bound must be an integer scalar, got {kind_of(x)}", cx.loc,
                             hint=f"read the element as a scalar: {elem} (ref[i], not ref.at[i], which is a"
                                  f" window)")
  fixed = _floor_divided(cx.loc) if isinstance(x, float) else None    # range(x.shape[0] / 64)
  return E.KernelTypeError(f"a loop bound must be an integer scalar, got {kind_of(x)}", cx.loc,
                           hint=f"a count is an int: divide with //, {fixed}" if fixed else
                           "loop to ints, constexprs, shapes or integer scalars: range(x.shape[0] // 128)")


def _floor_divided(loc, ceil=False) -> str | None:
  """The loop header's call at `loc` (`ml.range(x.shape[0] / 64, stages=2)`) with its true divisions
  made floor divisions (`ceil`: ml.cdiv calls), where it has any and is on one line."""
  import ast
  call = expr_at(loc)
  if call is None:
    return None

  class Fix(ast.NodeTransformer):
    found = False

    def visit_BinOp(self, n):
      self.generic_visit(n)
      if not isinstance(n.op, ast.Div):
        return n
      Fix.found = True
      if not ceil:
        return ast.BinOp(n.left, ast.FloorDiv(), n.right)
      return ast.Call(ast.Attribute(ast.Name("ml"), "cdiv"), [n.left, n.right], [])
  call.args = [Fix().visit(a) for a in getattr(call, "args", [])]
  return ast.unparse(call) if Fix.found else None
