"""The messages of a ref's index that cannot be a window: slices with run-time bounds (quoted as the
user wrote them, with the fixed-window form that works) and slices with steps (the hints that write a
scatter are scatter_hints.py)."""
from __future__ import annotations

import ast
import math

from .. import errors as E, hw
from .base import is_value, kind_of
from ..loc import expr_of


def _index_text(i, cx=None) -> str:
  """An index as the user wrote it (`cx`: the subscript's Call, which knows the user's text of
  its run-time values)."""
  from .memory import DSlice
  if isinstance(i, slice):
    return ":" if i == slice(None) else f"{_index_text(i.start, cx) if i.start is not None else ''}:" + (
        _index_text(i.stop, cx) if i.stop is not None else "")
  if isinstance(i, DSlice):
    return f"ml.ds({ds_part_text(i, 0, cx)}, {ds_part_text(i, 1, cx)})"
  if is_value(i):
    return (cx.named(i, "") if cx is not None else "") or i.name or "i"
  return repr(i)


def _operand(text: str) -> str:
  """`text` as the right operand of `-`: parenthesised where it is a compound expression
  (`n - (off[g] + 1)`, not `n - off[g] + 1`)."""
  node = expr_of(text)
  if node is None:
    return f"({text})"
  tight = (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.MatMult)     # bind tighter than -
  if isinstance(node, (ast.Name, ast.Constant, ast.Subscript, ast.Call, ast.Attribute, ast.UnaryOp)) or (
      isinstance(node, ast.BinOp) and isinstance(node.op, tight)):
    return text
  return f"({text})"


def ds_part_text(ds, k, cx=None) -> str:
  """The start (k = 0) or size (k = 1) of `ml.ds(start, size)` as the user wrote it there (an
  expression such as `end - start` has no name of its own)."""
  v = (ds.start, ds.size)[k]
  return (cx.named(v, "") if cx is not None and is_value(v) else "") or (ds.texts[k] if is_value(v) else "") \
      or _index_text(v, cx)


def _linear(cx, v, depth=0):
  """`v` as ({id: coefficient}, constant) over run-time values combined by +, - and * by ints
  (`(pid + 1) * 128`), or None where it is not so: two such forms tell a slice's fixed length."""
  from .elementwise import BinOp, Binary, Unary, UnOp
  if isinstance(v, int) and not isinstance(v, bool):
    return {}, v
  if not is_value(v) or depth > 16:
    return None
  o = cx.b.defining(v)
  if isinstance(o, Unary) and o.kind == UnOp.NEG and (a := _linear(cx, o.x, depth + 1)) is not None:
    return {i: -m for i, m in a[0].items()}, -a[1]      # -(i + 64) + 512
  if isinstance(o, Binary) and o.kind in (BinOp.ADD, BinOp.SUB, BinOp.MUL):
    a, b = _linear(cx, o.lhs, depth + 1), _linear(cx, o.rhs, depth + 1)
    if a is not None and b is not None:
      if o.kind == BinOp.MUL:
        (k, (terms, c)) = (a[1], b) if not a[0] else (b[1], a) if not b[0] else (None, (None, None))
        if k is not None:
          return {i: m * k for i, m in terms.items() if m * k}, c * k
      else:
        sign = 1 if o.kind == BinOp.ADD else -1
        terms = dict(a[0])
        for i, m in b[0].items():
          terms[i] = terms.get(i, 0) + sign * m
        return {i: m for i, m in terms.items() if m}, a[1] + sign * b[1]
  if isinstance(o, Binary) and o.kind in (BinOp.FLOORDIV, BinOp.SHR) and isinstance(o.rhs, int) and \
      not isinstance(o.rhs, bool) and o.rhs > 0 and (a := _linear(cx, o.lhs, depth + 1)) is not None:
    d = o.rhs if o.kind == BinOp.FLOORDIV else 1 << o.rhs     # (g * group // 2 of an even group: g * (group // 2),
    if a[0] and all(m % d == 0 for m in a[0].values()):       # the constant's floor apart; probe 56a)
      return {i: m // d for i, m in a[0].items()}, a[1] // d
  return {_term_key(cx, v): 1}, 0


def _term_key(cx, v, depth=0):
  """A key for `v` as a term of `_linear`: equal for values a pure op makes of equal operands (`i % 64:i % 64 + 64`,
  `s.astype(jnp.int32)` twice) and reads of one element of an input (`s[0] * 64:(s[0] + 1) * 64`), else v's id."""
  from .elementwise import Binary, Cast, Unary
  from .access import ScalarRead
  if isinstance(v, (int, float)) and not isinstance(v, bool):
    return ("const", type(v).__name__, v)
  o = cx.b.defining(v) if is_value(v) and depth <= 16 else None
  if isinstance(o, Binary):
    return ("bin", o.kind, str(v.type), _term_key(cx, o.lhs, depth + 1), _term_key(cx, o.rhs, depth + 1))
  if isinstance(o, (Unary, Cast)):     # (a Cast's bitcast or not, a Unary's kind)
    return (type(o).__name__, getattr(o, "kind", getattr(o, "bitcast", None)), str(v.type), _term_key(cx, o.x, depth + 1))
  if isinstance(o, ScalarRead):       # s[0] read twice from an input (pure: inputs never change)
    return ("read", id(o.ref), str(v.type), tuple((_term_key(cx, i.start, depth + 1), i.size) for i in o.index))
  return id(v)


def fixed_length(cx, start, stop):
  """stop - start where it is the same whatever the run-time values are (`pid * 128:(pid + 1) * 128`)."""
  a, b = _linear(cx, 0 if start is None else start), _linear(cx, stop)
  if a is None or b is None:
    return None
  terms = dict(b[0])
  for i, m in a[0].items():
    terms[i] = terms.get(i, 0) - m
  return b[1] - a[1] if not any(terms.values()) else None


def _window_size(n, kept) -> int:
  """The fixed size of a masked window covering a dimension of n elements: a 1-D register vector
  holds a multiple of 8 elements (frontend/layout_hints.py's pad_hint), so a 1-D window is padded
  (a GMEM window may run past the end: the mask keeps those elements off)."""
  return -(-n // 8) * 8 if len(kept) == 1 else n


def _masked(window, mask, access) -> str:
  """The masked access of `window` that replaces the user's: a read stays a read (an input is
  read-only), a write a write; a view whose use is not known yet, both."""
  read = f"v = {window}.load(mask={mask}, other=0)"
  write = f"{window}.store(v, mask={mask})"
  return read if access == "read" else write if access == "write" else f"to read, {read}; to write, {write}"


def _window_texts(cx, index, d, name):
  """(at, kept, axes) for hints about dimension `d` of `name`'s `index`: at(win) the user's view with `win` in
  dimension d (`x.at[r, ml.ds(s, 64)]`), the dimensions the index keeps, and the `[:, None]` that stands a
  window's mask along d among them."""
  at = lambda win, ref=name: f"{ref}.at[{', '.join(win if k == d else _index_text(x, cx) for k, x in enumerate(index))}]"
  kept = [k for k, x in enumerate(index) if not (isinstance(x, int) or is_value(x))]
  axes = "" if len(kept) == 1 else "[" + ", ".join(":" if k == d else "None" for k in kept) + "]"
  return at, kept, axes


def _fixed_window_error(cx, message, at, start, w, axes, length, access) -> E.KernelError:
  """`message` with the hint of a run-time length: a window of fixed size `w` at `start`, masked to `length`."""
  mask = f"ml.arange({w}){axes} < {length if ' ' not in length else f'({length})'}"
  return E.KernelTypeError(message, cx.loc, hint=f"take a window of fixed size and mask it to the run-time length:"
                                                 f" {_masked(at(f'ml.ds({start}, {w})'), mask, access)}")


def runtime_slice_error(cx, index, d, shape, name, access="", past_end=True) -> E.KernelError:
  """A slice whose start or stop is a run-time value, in dimension `d`: a window's size is fixed
  when the kernel is compiled, so a run-time length is a fixed window and a mask, and a run-time
  start is ml.ds(start, size), written out in the user's index."""
  i, n = index[d], shape[d]
  start = _index_text(i.start, cx) if i.start is not None else "0"
  at, kept, axes = _window_texts(cx, index, d, name)
  if not is_value(i.stop):          # x[i:] (or x[i:48]): stop - i elements, a run-time count
    end = n if i.stop is None else max(0, min(n, i.stop if i.stop >= 0 else n + i.stop))
    w = _window_size(end, kept)
    mask = f"ml.arange({w}){axes} < {end} - {_operand(start)}"
    masked = _masked(at(f'ml.ds({start}, {w})'), mask, access)
    past = {"read": " (the elements past them are 0)", "write": " (the elements past them are left as they are)"}
    message = (f"slice bounds must be static ints: the start of {_index_text(i, cx)} in dimension {d} of {name} is a"
               f" run-time value, so its length, {end} - {_operand(start)}, is one too: a window's size is fixed when"
               f" the kernel is compiled")
    if not past_end:      # (SMEM: a window, masked or not, lies inside its buffer)
      return E.KernelTypeError(message, cx.loc, hint=(
          f"a window of {name} lies inside it, so take one of static size, {at(f'ml.ds({start}, size)')} with"
          f" {start} + size <= {shape[d]}; or allocate {name} with room for {w} elements past its end and mask the"
          f" window to those inside: {masked}"))
    return E.KernelTypeError(message, cx.loc, hint=(
        f"take a window of the {end} elements it has at most and mask it to those inside: {masked}"
        f"{past.get(access, '')}; for a window of static size at a run-time start, {at(f'ml.ds({start}, size)')}"))
  stop = _index_text(i.stop, cx)
  fixed = stop[len(start) + 3:] if stop.startswith(f"{start} + ") else ""
  made = cx.b.defining(i.stop) if is_value(i.start) else None      # p:p + new.shape[0], the sum traced
  if made is not None and getattr(made, "kind", None) is not None and getattr(made.kind, "value", None) == "+":
    other = made.rhs if made.lhs is i.start else made.lhs if made.rhs is i.start else None
    if isinstance(other, int) and not isinstance(other, bool):
      fixed = str(other)
  length = fixed_length(cx, i.start, i.stop)
  if not fixed.isdigit() and length is not None and length > 0:    # Triton's pid * B:(pid + 1) * B
    fixed = str(length)
  if fixed.isdigit() and 0 < int(fixed) <= n:      # l[i]:l[i] + 8: a fixed size at a run-time start
    inside = f"({start} + ml.arange({fixed})){axes} < {n}" if axes else f"{start} + ml.arange({fixed}) < {n}"
    return E.KernelTypeError(
        f"slice bounds must be static ints: {_index_text(i, cx)} in dimension {d} of {name} has run-time bounds",
        cx.loc, hint=f"its size is {fixed} whatever {start} is: a window of static size at a run-time start is"
                     f" ml.ds(start, size), {at(f'ml.ds({start}, {fixed})')}; where it runs past the end, mask it:"
                     f" {_masked(at(f'ml.ds({start}, {fixed})'), inside, access)}")
  # a stop past the array's end clamps, as Python's slice does (the window ml.ds(start, n) reaches past it)
  length = stop if start == "0" else f"ml.minimum({stop}, {n}) - {_operand(start)}"
  return _fixed_window_error(cx, f"slice {_index_text(i, cx)} of dimension {d} of {name} has a run-time stop: a"
                                f" window's size is fixed when the kernel is compiled", at, start,
                             _window_size(n, kept), axes, length, access)


def runtime_size_error(cx, index, d, shape, name, access="") -> E.KernelError:
  """`ml.ds(start, size)` in dimension `d` with a run-time size (a length read from memory): a
  window's size is fixed when the kernel is compiled, so a run-time length is a fixed window and a
  mask, as for a slice with a run-time stop."""
  i, n = index[d], shape[d]
  start, size = ds_part_text(i, 0, cx), ds_part_text(i, 1, cx)
  at, kept, axes = _window_texts(cx, index, d, name)
  return _fixed_window_error(cx, f"ml.ds size must be a positive static int, got {size}, a run-time value: a window's"
                                f" size is fixed when the kernel is compiled", at, start, _window_size(n, kept),
                             axes, size, access)


def slice_step_error(cx, step, d, rank, tensor=False, start=None, n=None) -> E.KernelError:
  """The error for a slice with a step other than 1 along dimension `d` (of `n` elements, where
  known) of a rank-`rank` ref (or register tensor), with a hint that works for that step and the
  slice's `start`: an axis of size step, indexed by start % step (made outside the kernel, or, for
  a 1-D register tensor, by a reshape in registers) for a positive stride, the reversal done
  outside the kernel (or rows read from the end) for a negative one."""
  of = " of a register tensor" if tensor else ""
  if not isinstance(step, int) or isinstance(step, bool):
    return E.KernelTypeError(f"slice steps{of} must be static ints of 1, got {kind_of(step)}", cx.loc,
                             hint="slice with a step of 1: x.at[a:b], or a dynamic window: x.at[ml.ds(start, size)]")
  if step == 0:
    return E.KernelTypeError(f"slice step cannot be zero (dimension {d}{of})", cx.loc,
                             hint="slice with a step of 1 (x.at[a:b]), or index one element with an int")
  lead = ":, " * d
  if step < 0:
    flip = f" (jnp.flip(x, axis={d}))" if step == -1 else ""
    hint = (f"reverse outside the kernel, where XLA fuses it into the producer: call the kernel on"
            f" x[{lead}::{step}]{flip} from your jitted function")
    if d < rank - 1 and step == -1:
      hint += f"; or read row n - 1 - r of the ref with an int index: x.at[{lead}n - 1 - r]"
    why = "its elements live in other threads" if tensor else "windows are read in memory order"
    return E.KernelTypeError(f"reversed slices (step {step}){of} are not supported: {why}", cx.loc, hint=hint)
  s = start if isinstance(start, int) and not isinstance(start, bool) and start >= 0 else 0
  j, rows = s % step, ("" if s < step else f"{s // step}") + ":"     # [s::k] is row s // k on, column s % k
  at = f"..., {rows}, {j}"
  if tensor:
    inner = (f"; or, in registers, v.reshape({n // step}, {step})[:, {j}] for v[{s}::{step}]"
             if rank == 1 and n and n % step == 0 and s < step and n % hw.WARPGROUP == 0 and n // step % 8 == 0 else "")
    return E.KernelTypeError(
        f"strided slices (step {step}) of a register tensor are not supported: its elements live in"
        f" other threads", cx.loc,
        hint=f"slice the ref before reading it: give the array an axis of size {step} outside the kernel"
             f" (x.reshape(..., n // {step}, {step}) passed in) and read x.at[{at}][...] for [{s}::{step}]{inner}")
  return E.KernelTypeError(f"strided slices (step {step}) are not supported; use a step of 1", cx.loc,
                           hint=f"give the array an axis of size {step} outside the kernel and index it"
                                f" with an int: x.reshape(..., n // {step}, {step}) passed in, then"
                                f" x.at[{at}] for [{s}::{step}] (an interleaved pair: [..., :, 0] and"
                                f" [..., :, 1]; such a strided window moves a multiple of 128 elements)")


def check_tensor_steps(cx, x, index):
  """`v[::-1]`, `v[::2]` of a register tensor: the slice-step error, with a hint that works."""
  items = index if isinstance(index, tuple) else (index,)
  rank = len(x.type.shape)
  d = 0
  for i in items:
    if i is Ellipsis:                  # the dimensions the other items leave
      d += rank - sum(j is not None and j is not Ellipsis for j in items)
    elif isinstance(i, slice) and i.step not in (None, 1) and 0 <= d < rank and not any(
        is_value(b) for b in (i.start, i.stop)):     # (run-time bounds: that error, with its unroll hint)
      raise slice_step_error(cx, i.step, d, rank, tensor=True, start=i.start, n=x.type.shape[d])
    elif i is not None:
      d += 1


def index_texts(text, root_name, rank):
  """The user's text of each index of `x.at[a, b]` (a ref's source text, or a call's with it first),
  where it indexes every one of the `rank` dimensions of the root `x` itself one by one (no `...`);
  an `ml.ds(start, n)` gives its start's text. Else None."""
  import ast
  node = expr_of(text)
  if node is None:
    return None
  if isinstance(node, ast.Call) and node.args:       # the statement: ml.atomic_add(x.at[...], v)
    node = node.args[0]
  if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "at"
          and ast.unparse(node.value.value) == root_name):
    return None
  elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
  if len(elts) != rank or any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elts):
    return None
  ds = lambda e: (isinstance(e, ast.Call) and isinstance(e.func, (ast.Attribute, ast.Name)) and len(e.args) == 2
                  and (e.func.attr if isinstance(e.func, ast.Attribute) else e.func.id) == "ds")
  return [ast.unparse(e.args[0] if ds(e) else e) for e in elts]


def _atom(text) -> bool:
  """Whether `text` is an expression that needs no parentheses before `+` (s[0], n.size, f(x))."""
  try:
    return isinstance(ast.parse(text, mode="eval").body, (ast.Subscript, ast.Attribute, ast.Call, ast.Name))
  except SyntaxError:
    return False


def _is_ds(node) -> bool:
  """Whether `node` (an AST node) is a call `ml.ds(start, size)`."""
  import ast
  return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "ds"
          and len(node.args) == 2)


def window_outside_hint(loc, name, d, n, start, size) -> str:
  """The hint for a GMEM window wholly past the end (or before the start) of dimension d: it is
  known while compiling (an ml.static_range trip, a constant), so a test known then skips it."""
  import ast
  text = None
  try:
    node = ast.parse(loc.source_line[loc.col_offset:loc.end_col_offset], mode="eval") \
        if loc.end_lineno == loc.lineno and loc.end_col_offset is not None else None
    calls = [c for c in ast.walk(node) if _is_ds(c)] if node is not None else []
    if len(calls) > 1:      # x.at[ml.ds(i * 8 + a, 8), ml.ds(b, 128)]: the one indexing dimension d
      calls = [sub.slice.elts[d] for sub in ast.walk(node) if isinstance(sub, ast.Subscript)
               and isinstance(sub.slice, ast.Tuple) and len(sub.slice.elts) > d
               and not any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in sub.slice.elts[:d])
               and _is_ds(sub.slice.elts[d])]
    text = ast.unparse(calls[0].args[0]) if len(calls) == 1 else None
  except (SyntaxError, AttributeError, TypeError):
    pass
  side = "past the end" if start > 0 else "before the start"
  head = (f"the window has no element inside {name} (dimension {d} has size {n}; it lies wholly {side}), so"
          f" neither a mask nor a TMA copy has anything to move")
  if not text or text.lstrip("-").isdigit():    # a literal start: start the window inside
    if start < 0 and n + start >= 0:     # NumPy's from-the-end, which ml.ds's start is not
      stop = n + start + size
      ext = f"{name}.shape[{d}]" if name.isidentifier() else str(n)
      return head + (f": ml.ds's start does not count from the end as a negative index does; the window"
                     f" {n + start}:{stop} is ml.ds({ext} - {-start}, {size})"
                     + (f" (or the slice {start}:)" if stop == n else ""))
    return head + (f": start it inside, ml.ds(s, {size}) with s < {n}" if start > 0 else
                   f": start it inside, ml.ds(s, {size}) with s > {-size}")
  ext = f"{name}.shape[{d}]" if name.isidentifier() else str(n)
  test = f"{text} < {ext}" if start > 0 else f"{text} + {size} > 0"
  return head + (f": skip it with a test known while compiling, `if {test}:` around the chunk that uses it"
                 f" (in an ml.static_range loop, the trips {side}; where the chunk still needs what a masked load"
                 f" reads there, all its other=, give it that in an else: branch, v = ml.full(v's shape, other,"
                 f" dtype)), or loop with a run-time range(...), whose trips there the mask keeps off")


def strided_ds_error(cx, stride):
  """ml.ds(start, size, stride) with a stride other than 1 (Pallas's pl.ds): the reshape that reads it."""
  k = stride if isinstance(stride, int) and not isinstance(stride, bool) and stride > 1 else "k"
  return E.KernelTypeError(
      "ml.ds takes no stride (Pallas's pl.ds(start, size, stride)): a window's elements are consecutive",
      cx.loc, hint=f"give the array an axis of the stride outside the kernel, x.reshape(..., n // {k}, {k}) (free"
                   f" in XLA), and index that axis with an int: x.at[ml.ds(start // {k}, size), 0] reads elements"
                   f" start, start + {k}, ... of the original axis")


def _slice_text(a, b) -> str:
  return f"{'' if a is None else a}:{'' if b is None else b}"


def static_index_hint(i, n, d, name, loc=None) -> str:
  """An int index outside its dimension: the indices that exist there; where it is computed (an
  ml.static_range trip's, `x.at[i + 254]` under Triton's mask=i + 254 < n), the test that skips it."""
  hint = (f"dimension {d} of {name} has size {n}: an index there is in {-n}..{n - 1} (a negative one counts"
          f" from the end: {name}.at[{n - 1}] or {name}.at[-1] is the last)")
  import ast
  from ..loc import expr_at
  node = expr_at(loc)
  elts = (list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]) \
      if isinstance(node, ast.Subscript) else []
  if d < len(elts) and not isinstance(elts[d], (ast.Constant, ast.UnaryOp, ast.Slice)):
    text, ext = ast.unparse(elts[d]), f"{name}.shape[{d}]" if name.isidentifier() else str(n)
    test = f"{text} < {ext}" if i >= n else f"{text} >= -{ext}"
    hint += (f"; {text} is {i} here, known while tracing (an unrolled trip), and the element does not exist, so"
             f" no mask helps: skip it with a test known then, if {test}:, or loop with a run-time range, whose"
             f" masked accesses past the end are never made")
  return hint


def static_slice_hint(i: slice, n, d, name) -> str:
  """A static slice with a bound outside its dimension (NumPy would clip it) or with no element:
  the slice inside, written out."""
  start, stop, _ = slice(i.start, i.stop).indices(n)
  asked = _slice_text(i.start, i.stop)
  if stop > start:
    return (f"dimension {d} of {name} has size {n}, and a ref's slice is not clipped to it as a NumPy slice is"
            f" (a window keeps the size it is written with): write the part inside, {_slice_text(start, stop)}"
            f" (NumPy's {asked} there), or pass a larger {name}")
  return (f"dimension {d} of {name} has size {n}, so {asked} holds no element there (a slice needs at least one:"
          f" start < stop, both in {-n}..{n}); handle an empty case outside the kernel")


RUN_ONLY = object()      # run_start's `cx` for a caller that asks only whether an index is a run


def run_start(b, v, cx=None):
  """(start, n) where the integer tensor `v` is `start + ml.arange(n)` (either order, or `ml.arange(n)`
  alone, start 0; or such a vector along one axis of size-1 ones, `rows[:, None]`, `b[:, None, None]`), `start`
  an int or a run-time scalar; else None. With `cx` (a caller that moves the window), a static int added to or
  subtracted from a run of a run-time start, Triton's `offs - 1` of `offs = pid * 64 + ml.arange(64)`, is a run
  too, its start computed here (RUN_ONLY: a run, its start not computed)."""
  from .elementwise import Arange, BinOp, Binary
  from .shape import Broadcast, Reshape
  from ..dtypes import DType
  from ..types import ScalarType, TensorType
  o = b.defining(v) if is_value(v) else None
  if (isinstance(o, (Broadcast, Reshape)) and isinstance(v.type, TensorType) and len(v.type.shape) >= 2
      and sum(n != 1 for n in v.type.shape) <= 1 and len(o.x.type.shape) == 1):
    v = o.x                        # rows[:, None], cols[None, :], b[:, None, None]: Triton's grids of pointers
  if not (is_value(v) and isinstance(v.type, TensorType) and v.type.shape and sum(n != 1 for n in v.type.shape) <= 1):
    return None
  d = v.type.dtype
  if not (isinstance(d, DType) and d.is_int):
    return None
  n, o = math.prod(v.type.shape), b.defining(v)
  if isinstance(o, Arange):
    return 0, n
  from .elementwise import Full
  if isinstance(o, Full) and n == 1 and (isinstance(o.value, int) and not isinstance(o.value, bool) or is_value(
      o.value) and isinstance(o.value.type, ScalarType) and getattr(o.value.type.dtype, "is_int", False)):
    return o.value, 1               # (Triton's `tl.arange(0, 1)` run, `g + ml.arange(0, 1)`: one element, held as
                                    # its scalar; the row of a group's scales, probe 52e)
  if (isinstance(o, Binary) and o.kind in (BinOp.SUB, BinOp.ADD) and is_value(o.lhs) and isinstance(o.lhs.type, TensorType)
      and o.lhs.type.shape == v.type.shape and isinstance(o.rhs, int) and not isinstance(o.rhs, bool)
      and (inner := run_start(b, o.lhs, cx)) is not None and (isinstance(inner[0], int) or cx is not None)):
    k = o.rhs if o.kind == BinOp.ADD else -o.rhs   # (`ow - 1`, a convolution's left tap: the run from -1, as `ow + (-1)` is)
    if isinstance(inner[0], int):
      return inner[0] + k, n
    if cx is RUN_ONLY:
      return inner[0], n           # (whether it is a run, without computing its start)
    from .elementwise import binary
    return (binary(cx, BinOp.ADD, inner[0], k) if k else inner[0]), n
  if not (isinstance(o, Binary) and o.kind == BinOp.ADD):
    return None
  for a, s in ((o.lhs, o.rhs), (o.rhs, o.lhs)):   # (a start added after the broadcast, `d + offs[None, :]`, or
    if (is_value(a) and isinstance(a.type, TensorType) and a.type.shape == v.type.shape    # ints in two steps)
        and (isinstance(s, int) and not isinstance(s, bool) or is_value(s) and isinstance(s.type, ScalarType))
        and (inner := run_start(b, a)) is not None and isinstance(inner[0], int) and (inner[0] == 0 or isinstance(s, int))):
      return (s if inner[0] == 0 else inner[0] + s), n
  return None


def _run_of(b, v):
  """(start's text, n) where `v` is a run (`run_start`) with a static or named run-time start; else None."""
  run = run_start(b, v)
  if run is None:
    return _moved_run(b, v)
  text = str(run[0]) if isinstance(run[0], int) else _scalar_text(b, run[0])
  return (text, run[1]) if text else None


def _moved_run(b, v):
  """(start's text, n) of a run of a run-time start moved by a static int, `offs - 1` of `offs = pid * 128 +
  ml.arange(128)` (`pid * 128 - 1`; run_start computes its start where the window is moved); else None."""
  from .elementwise import BinOp, Binary
  o = b.defining(v) if is_value(v) else None
  if not (isinstance(o, Binary) and o.kind in (BinOp.ADD, BinOp.SUB) and isinstance(o.rhs, int)
          and not isinstance(o.rhs, bool)) or run_start(b, v, RUN_ONLY) is None:
    return None
  inner = _run_of(b, o.lhs)
  if inner is None:
    return None
  k = o.rhs if o.kind == BinOp.ADD else -o.rhs
  return (f"{inner[0]} {'+' if k >= 0 else '-'} {abs(k)}" if k else inner[0]), inner[1]


def _scalar_text(b, s, depth=0):
  """A run-time scalar as the user wrote it: its name, or `i * 8` rebuilt from +, - and * of named
  scalars and ints (an intermediate value has no name); None where it cannot be told."""
  from .elementwise import BinOp, Binary
  if isinstance(s, int) and not isinstance(s, bool):
    return str(s)
  if not is_value(s) or depth > 4:
    return None
  if s.name:
    return s.name
  o = b.defining(s)
  sym = {BinOp.ADD: "+", BinOp.SUB: "-", BinOp.MUL: "*"}.get(getattr(o, "kind", None)) if isinstance(o, Binary) else None
  if sym is None:
    return None
  parts = []
  for x in (o.lhs, o.rhs):
    t = _scalar_text(b, x, depth + 1)
    if t is None:
      return None
    inner = b.defining(x) if is_value(x) and not x.name else None
    low = isinstance(inner, Binary) and inner.kind in (BinOp.ADD, BinOp.SUB)
    parts.append(f"({t})" if low and (sym == "*" or x is o.rhs and sym == "-") else t)
  return f"{parts[0]} {sym} {parts[1]}"


def run_window_hint(b, ref_name, index, elts, attr, call) -> str | None:
  """`x.at[r, cols].load(mask=m, other=0.0)` with `cols = off + ml.arange(1024)` (Triton's `x_ptr +
  offs`): the window those positions cover, `x.at[r, ml.ds(off, 1024)].load(mask=m, other=0.0)`, in
  the user's words (`elts`: the subscript's index nodes; `call`: the .load/.store call, or None).
  None where an index tensor is not such a run."""
  from ..types import TensorType
  items = index if isinstance(index, tuple) else (index,)
  if len(items) != len(elts) or any(isinstance(e, ast.Starred) for e in elts):
    return None
  parts = []
  for i, e in zip(items, elts):
    if is_value(i) and isinstance(i.type, TensorType):
      run = _run_of(b, i)
      if run is None:
        return None
      start, n = run
      parts.append(f"ml.ds({start}, {n})")
    else:
      parts.append(ast.unparse(e))
  args = ""
  if call is not None and not any(isinstance(a, ast.Starred) for a in call.args) and all(k.arg for k in call.keywords):
    args = ", ".join([ast.unparse(a) for a in call.args] + [f"{k.arg}={ast.unparse(k.value)}" for k in call.keywords])
  else:
    args = "mask=mask, other=0.0" if attr == "load" else "value, mask=mask"
  return f"{ref_name}.at[{', '.join(parts)}].{attr}({args})"


def _short_stride_error(cx, x, k, a, out) -> E.KernelError:
  """v[..., a::k] whose result `out` registers cannot hold (fewer than 128 elements, or a tile of a
  number of elements not a multiple of 128): padded with zeros along the last axis first, to a width
  whose slice they hold, the padding's lanes dropped at the store."""
  shape, name = tuple(x.type.shape), x.name if (x.name or "").isidentifier() else "v"
  rows, n = math.prod(shape[:-1]), shape[-1]
  holds = lambda m: (m % 8 == 0) if not shape[:-1] else rows * m % hw.WARPGROUP == 0
  up = next((c for c in range(n + k, n + k * hw.WARPGROUP * 8 + 1, k) if holds(c - n) and holds(c // k) and holds(c)),
            None)
  if up is None:      # (no padding helps: the tile itself, a (5, 40) one, is what registers cannot hold)
    from .strided_axes import unheld_tile_error
    return unheld_tile_error(cx, x)
  lead = "..., " if shape[:-1] else ""
  pad = f"ml.zeros({shape[:-1] + (up - n,)}, {name}.dtype)"
  keep = (f"its first {n // k} {'columns' if shape[:-1] else 'elements'} are {name}[{lead}{a}::{k}]: store"
          f" them with a mask, mask=ml.arange({up // k}){'[None, :]' if shape[:-1] else ''} < {n // k}")
  return E.LayoutError(
      f"{cx.text or name + f'[{lead}{a}::{k}]'} of shape {shape} gives shape {out}, which registers cannot hold:"
      f" register tensors need a multiple of {hw.WARPGROUP} elements (a 1-D vector a multiple of 8)", cx.loc,
      hint=f"pad the last axis with zeros to {up} first, p = ml.concatenate([{name}, {pad}], axis=-1), then"
           f" p[{lead}{a}::{k}] has shape {out[:-1] + (up // k,)}: {keep}")


def strided_last_axis(cx, x, index):
  """`v[..., a::k]` of a register tensor (`v[a::k]` of a vector, `x[:, 1::2]` of an interleaved RoPE
  tile) where k divides the last axis and 0 <= a < k: jnp's result, as `v.reshape(..., n // k, k)[...,
  a]` (which the layout pass moves through SMEM where it must). None for any other index, which the
  slice-step error (check_tensor_steps) then reports."""
  from .shape import expand, reshape_
  items = index if isinstance(index, tuple) else (index,)
  shape = tuple(x.type.shape)
  rank = len(shape)
  if not shape or any(i is None for i in items) or sum(i is Ellipsis for i in items) > 1:
    return None
  dims = []
  for i in items:
    dims.extend([slice(None)] * (rank - (len(items) - 1)) if i is Ellipsis else [i])
  if len(dims) < rank:
    dims.extend([slice(None)] * (rank - len(dims)))
  if len(dims) != rank or any(i != slice(None) for i in dims[:-1]) or not isinstance(dims[-1], slice):
    return None
  last, n = dims[-1], shape[-1]
  k, a, stop = last.step, 0 if last.start is None else last.start, last.stop
  ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (k, a)) and (
      stop is None or isinstance(stop, int) and not isinstance(stop, bool))
  if not (ints and k > 1 and n % k == 0 and 0 <= a < k and (stop is None or stop >= n)):
    return None
  size, out = math.prod(shape), shape[:-1] + (n // k,)
  if size % hw.WARPGROUP or not (len(out) == 1 and out[0] % 8 == 0 or math.prod(out) % hw.WARPGROUP == 0):
    if rank == 1:     # a short vector (v[::2] of a 64-element head): padded in vector_views.strided_vector
      return None
    raise _short_stride_error(cx, x, k, a, out)   # (a tile register tensors cannot hold, as the result)
  y = reshape_(cx, x, shape[:-1] + (n // k, k))
  return expand(cx, y, (slice(None),) * rank + (a,))


def register_gather_hint(base, attr, table, args) -> str | None:
  """The hint for `ml.gather(t, ids, axis=a)` (or ml.take) whose table `t` is a register tensor: only
  refs gather, so the values are gathered from the ref they were read from, or from an output used as
  scratch; None where the table is not a register tensor (the GMEM gather's hint then)."""
  from .base import is_tensor
  if attr not in ("gather", "take") or not getattr(base, "__name__", "").endswith("language") \
      or not is_tensor(table) or not args or len(args) < 2:
    return None
  name, ids, rank = args[0], args[1], len(table.type.shape)
  axis = next((a.split("=", 1)[1].strip() for a in args[2:] if a.replace(" ", "").startswith("axis=")),
              args[2] if len(args) > 2 and "=" not in args[2] else "0")
  try:
    axis = int(axis) % rank
  except ValueError:
    axis = 0
  index = ", ".join(ids if k == axis else ":" for k in range(rank))
  return (f"no ml.{attr}, and {name} is a register tensor, which no gather reads (gathers read refs): gather"
          f" from the ref its values came from, x[{index}] of an input x; for computed values, give the kernel one"
          f" more output as scratch, write them there and gather from it: scratch[...] = {name}, then"
          f" scratch[{index}] (the compiler syncs the threads between; with several programs, each its own row of it)")
