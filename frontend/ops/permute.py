"""Transposes, permutes and strided views of register tensors: `x.T` of a 2-D tile, `ml.transpose(v, axes)` of a
3-D or wider tensor (NCHW to NHWC, (B, S, H, D) to (B, H, S, D), the 5-D permute of a pixel shuffle), and slices
with steps along any axis (`v[::2]`, `v[1::3]`, `v[:, ::2, :]`).

A permute or strided slice is a strided view of the tensor's row-major elements, as NumPy's: result element `idx` is source element
`offset + sum(idx[k] * strides[k])` of the flat tensor. Every thread stores its elements at their row-major
positions in a flat SMEM scratch (RelayoutStore, as a reshape through SMEM), a barrier (the sync pass's), and
every thread loads the elements of the result's layout from their positions in the view (RestrideLoad), as
ml.roll and ml.flip do. A 2-D transpose has its own scratch, whose rows are padded against bank conflicts.
"""
from __future__ import annotations

import math

from .. import errors as E
from .. import hw, ir
from ..dtypes import DType
from ..ir import LayoutRule, Traits
from ..types import TensorType, dtype_name, resolve
from .base import METHODS, Builtin, builtin, check_register_value, is_smem_matrix, is_tensor, kind_of, shown


def _effects(o):
  return [(o.scratch, ir.Access.REG_READ)]


# ---------------------------------------------------------------- transposes
# A register tensor is transposed through an SMEM scratch the compiler allocates: every thread
# stores its elements, a barrier (the sync pass's), every thread loads the elements the result's
# layout gives it. Rows are padded by 4 bytes so that a warp reading a column meets 32 banks.
def _transpose_effects(o):
  return [(o.scratch, ir.Access.REG_WRITE if isinstance(o, TransposeStore) else ir.Access.REG_READ)]


@ir.op(Traits(effects=_transpose_effects, moves_elements=True))
class TransposeStore(ir.Op):
  """Write the (m, n) tensor `x` into `scratch` (flat, rows of n + pad elements)."""
  scratch: ir.Value
  x: ir.Value
  pad: int
  loc: object
  results: tuple = ()


@ir.op(Traits(effects=_transpose_effects, layout=LayoutRule.FRESH, moves_elements=True))
class TransposeLoad(ir.Op):
  """Read the transpose (n, m) of what TransposeStore wrote into `scratch`."""
  scratch: ir.Value
  pad: int
  loc: object
  results: tuple


def transpose_tensor(cx, x, name=""):
  check_register_value(cx, x, "ml.transpose")
  t = x.type
  if not is_tensor(x) or len(t.shape) != 2:
    raise E.KernelTypeError(
        f"ml.transpose takes a 2-D register tensor, got {kind_of(x)}"
        + (f" of shape {t.shape}" if is_tensor(x) else ""), cx.loc,
        hint="a 1-D vector needs no transpose: v[:, None] and v[None, :] make it a column or a row (a 2-D"
             " tile's transpose is x.T; ml.transpose(x, axes) permutes the axes of a 3-D or wider tensor)")
  d = resolve(t.dtype)
  from .static_tiles import affine_grid
  if (grid := affine_grid(cx, x, t.shape[::-1], (1, 0))) is not None:
    return grid                                         # (a small table of aranges: its grid, probe 52e)
  from .small_parts import transpose_small
  if (small := transpose_small(cx, x)) is not None:     # (a small one held as a vector: its elements picked)
    return small
  from .small_scans import held_transpose
  if (small := held_transpose(cx, x)) is not None:     # (more of them: its columns through SMEM)
    return small
  pads = getattr(cx.b, "pad_tiles", None)
  if pads is not None and x.id in pads and not getattr(cx.b, "pad_ok", 0):
    from .padded_tiles import allowed            # (a padded trace's odd read, `x[...].T` of an (8, 40) tile held
    with allowed(cx):                            # as (8, 64): the padding moves to the end of the other axis,
      out = transpose_tensor(cx, x, name)        # probe 49a)
    pads[out.id] = tuple(pads[x.id])[::-1]
    return out
  if d == DType.bool_:                           # through SMEM as bytes, 0 or 1
    from .shape import via_bytes
    return via_bytes(cx, x, lambda b: transpose_tensor(cx, b, name))
  m, n = t.shape
  if isinstance(d, DType) and d.bits > 32:
    raise E.UnsupportedDtypeError(f"ml.transpose of {dtype_name(d)}: 8-, 16- and 32-bit elements only",
                                  cx.loc, hint="transpose a 32-bit tensor")
  from .scratches import row_scratch
  scratch, pad = row_scratch(cx, m, n, t.dtype, "transpose scratch")
  cx.b.emit(TransposeStore, scratch, x, pad, loc=cx.loc, types=[])
  return cx.b.emit(TransposeLoad, scratch, pad, loc=cx.loc, types=[TensorType((n, m), t.dtype)],
                   names=[name]).result



def transposed_of(cx, t):
  """The register tensor `x` whose transpose the register tensor `t` is (`t = x.T`, `ml.trans(x)`, a block
  pointer's K^T load: what the TransposeStore of its scratch wrote), or None."""
  d = cx.b.defining(t) if is_tensor(t) else None
  if not isinstance(d, TransposeLoad):
    return None
  st = next((o for o in reversed(cx.b.block.ops) if isinstance(o, TransposeStore) and o.scratch is d.scratch), None)
  return None if st is None else st.x

# ---------------------------------------------------------------- permutes of 3-D and wider tensors
@ir.op(Traits(effects=_effects, layout=LayoutRule.FRESH, moves_elements=True))
class RestrideLoad(ir.Op):
  """Read the flat `scratch` (a tensor's row-major elements) through a strided view: result element `idx`
  is the scratch's element `offset + sum(idx[k] * strides[k])` (strides in elements, any sign)."""
  scratch: ir.Value
  offset: int
  strides: tuple
  loc: object
  results: tuple


def row_major_strides(shape) -> tuple:
  return tuple(math.prod(shape[k + 1:]) for k in range(len(shape)))


def restride_tensor(cx, x, shape, offset: int, strides: tuple, name=""):
  """The strided view (`shape`, `offset`, `strides` over x's flat row-major elements) of register tensor `x`,
  through an SMEM scratch of x's size."""
  from ..relayout import RelayoutStore
  from .scratches import scratch
  from .shape import via_bytes
  t = x.type
  if x.id in cx.b.spread:       # (a small middle-axis statistic held spread: ops/spread.py)
    from .spread import refuse
    refuse(cx, x, "to permute or slice")
  if resolve(t.dtype) == DType.bool_:            # through SMEM as bytes, 0 or 1
    return via_bytes(cx, x, lambda b: restride_tensor(cx, b, shape, offset, strides, name))
  if isinstance(resolve(t.dtype), DType) and resolve(t.dtype).bits > 32:
    raise E.UnsupportedDtypeError(f"a permute or strided slice of {dtype_name(resolve(t.dtype))} elements: 8- to 32-bit"
                                  f" elements only", cx.loc, hint="convert to a 32-bit dtype first")
  buf = scratch(cx, (math.prod(t.shape),), t.dtype, "permute scratch")
  cx.b.emit(RelayoutStore, buf, x, loc=cx.loc, types=[])
  return cx.b.emit(RestrideLoad, buf, offset, tuple(strides), loc=cx.loc,
                   types=[TensorType(tuple(shape), t.dtype)], names=[name or cx.name]).result


def permute_tensor(cx, x, axes: tuple, name=""):
  """`jnp.transpose(x, axes)` of a register tensor (axes a permutation, non-negative)."""
  shape = tuple(x.type.shape)
  if axes == tuple(range(len(shape))):
    return x
  src = row_major_strides(shape)
  from .padded_tiles import allowed, padded_table
  if (pads := padded_table(cx, x)) is not None:      # (a padded tile's axes keep their padding at their ends: the
    own = pads[x.id]                                 # heads of a Swin window's 49 tokens, probe 56g)
    with allowed(cx):
      out = restride_tensor(cx, x, tuple(shape[a] for a in axes), 0, tuple(src[a] for a in axes), name)
    pads[out.id] = tuple(own[a] for a in axes)
    return out
  return restride_tensor(cx, x, tuple(shape[a] for a in axes), 0, tuple(src[a] for a in axes), name)


def _axes_of(cx, x, axes):
  """The permutation `axes` of ml.transpose(x, axes) (negative axes counted from the end), checked."""
  rank = len(x.type.shape)
  ok = isinstance(axes, tuple) and len(axes) == rank and all(
      isinstance(a, int) and not isinstance(a, bool) and -rank <= a < rank for a in axes)
  if ok and sorted(a % rank for a in axes) == list(range(rank)):
    return tuple(a % rank for a in axes)
  example = ", ".join(map(str, range(rank)[::-1]))
  raise E.KernelTypeError(
      f"ml.transpose(x, axes={shown(axes)}): axes must be a permutation of the {rank} axes of"
      f" {cx.named(x, 'x')} (shape {x.type.shape}), each a static int once", cx.loc,
      hint=f"list every axis once, in the result's order: ml.transpose({cx.named(x, 'v')}, ({example}))")


_SWAPS = ((1, 0), (-1, -2), (1, -2), (-1, 0))     # the two axes of a 2-D tensor swapped


@builtin(methods=("transpose",))
def transpose(cx, x, *axes, **given):
  """The transpose of a register tensor (also `x.T`, `x.transpose()`, `x.transpose(1, 0)`): a 2-D tensor's
  two axes swapped through an SMEM scratch of the tile's size (a copy through shared memory, not free as
  `buf.T` in ml.dot is); a 3-D or wider tensor's axes permuted as `jnp.transpose(x, axes)` (axes reversed
  where left out): `ml.transpose(v, (0, 2, 1, 3))` turns (B, S, H, D) into (B, H, S, D). Of a 2-D SMEM
  buffer it is the buffer's transposed view `buf.T`, which ml.dot reads with no data moved
  (`ml.dot(q_s, ml.transpose(k_s))`, as Triton's `tl.dot(q, tl.trans(k))`; probe 46c)."""
  return _transpose(cx, x, axes, given, "ml.transpose")


def _transpose(cx, x, axes, given, what):
  if set(given) - {"axes"} or given and axes:
    raise E.KernelTypeError(f"ml.transpose takes the tensor and its axes, got {', '.join(sorted(given))}=",
                            cx.loc, hint=f"ml.transpose({cx.named(x, 'v')}, axes)")
  if given:                                     # ml.transpose(x, axes=(0, 2, 1)), as jnp.transpose
    axes = (given["axes"],) if given["axes"] is not None else ()
  if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
    axes = tuple(axes[0])                       # ml.transpose(x, (1, 0)), as jnp.transpose
  axes = tuple(axes) or None
  if isinstance(x, (int, float)):
    if axes is None:
      return x                                  # a number's transpose is the number (jnp.transpose(0.5))
    raise E.KernelTypeError(f"{what} of a Python number takes no axes, got {axes!r}", cx.loc,
                            hint=f"a number has no axes to permute: use {x!r} itself")
  if is_smem_matrix(x) and (axes is None or axes in _SWAPS):
    from .memory import transpose as view_transposed
    return view_transposed(cx, x, cx.name or "")
  check_register_value(cx, x, what)
  rank = len(x.type.shape) if is_tensor(x) else 0
  if rank <= 2:
    if axes is not None and axes not in _SWAPS:
      if rank == 2 and axes in ((0, 1), (-2, -1), (0, -1), (-2, 1)):
        return x                                # the identity permutation
      raise E.KernelTypeError(f"ml.transpose(x, axes={axes!r}): 2-D tensors swap their two axes only",
                              cx.loc, hint=f"leave axes out: ml.transpose({cx.named(x)})")
    return transpose_tensor(cx, x, cx.name or "")
  if not is_tensor(x):
    raise E.KernelTypeError(f"ml.transpose takes a register tensor, got {kind_of(x)}", cx.loc,
                            hint="ml.transpose(v, (1, 0, 2))")
  perm = tuple(range(rank))[::-1] if axes is None else _axes_of(cx, x, axes)
  return permute_tensor(cx, x, perm, cx.name or "")


@builtin(methods=("trans",))
def trans(cx, x, *dims):
  """Triton's `tl.trans(x)` (and `tl.trans(x, 1, 0)`, `tl.trans(x, (0, 2, 1))`, the method `x.trans()`):
  `ml.transpose(x, dims)`. Of a 2-D SMEM buffer the transposed view, as `buf.T`: `ml.dot(q_s, ml.trans(k_s))`
  moves no data."""
  return _transpose(cx, x, dims, {}, "ml.trans")


@builtin(methods=("permute",))
def permute(cx, x, *dims):
  """Triton's `tl.permute(x, (0, 2, 1))` and the method `x.permute(0, 2, 1)` (also torch's): `ml.transpose(x,
  dims)`, its axes in the result's order (probe 51e: an int4 unpack's `ml.join(lo, hi).permute(0, 2, 1)`)."""
  return _transpose(cx, x, dims, {}, "ml.permute")


def _swapaxes(cx, x, axis1, axis2):
  """The method `v.swapaxes(axis1, axis2)` of a register tensor (jax.Array's, as `jnp.swapaxes(v, axis1, axis2)`):
  `ml.transpose` of the permutation swapping the two axes, `.T` of a 2-D tensor (probe 51l: was MG003)."""
  check_register_value(cx, x, "swapaxes")
  rank = len(x.type.shape) if is_tensor(x) else 0
  if not all(isinstance(a, int) and not isinstance(a, bool) and -rank <= a < rank for a in (axis1, axis2)):
    raise E.KernelTypeError(
        f"{cx.named(x, 'v')}.swapaxes({shown(axis1)}, {shown(axis2)}): the axes must be static ints of the {rank}"
        f" axes of {cx.named(x, 'v')} (shape {x.type.shape})", cx.loc,
        hint=f"{cx.named(x, 'v')}.swapaxes(0, 1)" + (" (or .T)" if rank == 2 else ""))
  order = list(range(rank))
  order[axis1 % rank], order[axis2 % rank] = order[axis2 % rank], order[axis1 % rank]
  return _transpose(cx, x, tuple(order), {}, "swapaxes")


METHODS["swapaxes"] = Builtin(_swapaxes, "swapaxes")      # a method only: no ml.swapaxes (jnp.swapaxes is one)


# ---------------------------------------------------------------- strided slices
def strided_slice(cx, x, index):
  """`v[::2]`, `v[1::3]`, `v[:, ::2, :]`, `v[::-2]` of a register tensor: slices (steps of any sign, static
  bounds) and static ints along its axes (and `...`), at least one step other than 1, as a strided view through
  SMEM. None for other indices (None, tensors, run-time values), and for slices that keep no element."""
  items = index if isinstance(index, tuple) else (index,)
  shape = tuple(x.type.shape)
  rank = len(shape)
  if sum(i is Ellipsis for i in items) > 1 or not all(
      i is Ellipsis or isinstance(i, int) and not isinstance(i, bool) or isinstance(i, slice) and all(
          b is None or isinstance(b, int) and not isinstance(b, bool) for b in (i.start, i.stop, i.step))
      for i in items):
    return None
  if not any(isinstance(i, slice) and i.step not in (None, 1) for i in items):
    return None
  dims = []
  for i in items:
    dims.extend([slice(None)] * (rank - (len(items) - 1)) if i is Ellipsis else [i])
  dims.extend([slice(None)] * (rank - len(dims)))
  if len(dims) != rank or any(isinstance(i, slice) and i.step == 0 for i in dims):
    return None
  src = row_major_strides(shape)
  offset, out_shape, strides = 0, [], []
  for i, n, s in zip(dims, shape, src):
    if isinstance(i, int):
      if not -n <= i < n:
        return None
      offset += (i % n) * s
      continue
    start, _, step = i.indices(n)
    k = len(range(*i.indices(n)))
    if k == 0:
      return None
    offset += start * s
    out_shape.append(k)
    strides.append(step * s)
  if not out_shape:
    return None
  n = math.prod(out_shape)
  if n % hw.WARPGROUP and not (len(out_shape) == 1 and n % 8 == 0):
    raise _unheld(cx, x, dims, tuple(out_shape))
  return restride_tensor(cx, x, tuple(out_shape), offset, tuple(strides), cx.name)


def covering_window(ref, index):
  """(window, steps) for a plain read `x[::2]`, `x[1::3, :]`, `x[0, ::-1]` of a ref with static slices of steps other
  than 1: the step-1 window that covers the elements (ints kept), then the strided slice of that window that
  `strided_slice` takes; None for other indices (which the view reports)."""
  items = index if isinstance(index, tuple) else (index,)
  shape = tuple(ref.type.shape)
  static = lambda b: b is None or isinstance(b, int) and not isinstance(b, bool)
  stepped = lambda i: isinstance(i, slice) and all(map(static, (i.start, i.stop, i.step)))
  # (the other axes may be indexed by run-time integer scalars or windows of a step of 1, `x[n, h, ::2, :]` of
  # NHWC pixels, `x[n, ml.ds(r, 4), 1::2]`: the view keeps them as it would, the step applies in registers)
  if sum(i is Ellipsis for i in items) > 1 or not all(
      i is Ellipsis or static(i) and i is not None or stepped(i) or _int_index(i) or _window(i) for i in items) or not any(
      stepped(i) and i.step not in (None, 1, 0) for i in items):
    return None
  dims = []
  for i in items:
    dims.extend([slice(None)] * (len(shape) - (len(items) - 1)) if i is Ellipsis else [i])
  if len(dims) > len(shape):
    return None
  window, steps = [], []
  for i, n in zip(dims, shape):
    if not isinstance(i, slice) or not stepped(i):
      window.append(i)
      if _window(i):
        steps.append(slice(None))     # (a run-time window: kept whole)
      continue
    start, _, step = i.indices(n)
    count = len(range(*i.indices(n)))
    if count == 0:
      return None
    k, lo = abs(step), min(start, start + step * (count - 1))
    # a window of k * count elements where one fits (x[::2] of 48 rows reads the 48, which registers hold), else
    # the tight one; the view starts below k in it either way
    a = next((a for a in (max(0, lo - k + 1), n - k * count) if max(0, lo - k + 1) <= a <= lo and a + k * count <= n),
             lo)
    window.append(slice(a, a + k * count if a != lo or lo + k * count <= n else lo + k * (count - 1) + 1))
    steps.append(slice(lo - a, None, step) if step > 0 else slice(start - a, None, step))
  return tuple(window), tuple(steps) or (slice(None),)


def _int_index(i) -> bool:
  """A static int or a run-time integer scalar: an index that takes one element of its axis."""
  from ..types import ScalarType
  from .base import is_value
  if isinstance(i, int) and not isinstance(i, bool):
    return True
  return is_value(i) and isinstance(i.type, ScalarType) and getattr(resolve(i.type.dtype), "is_int", False)


def _window(i) -> bool:
  """A slice of a step of 1 (static or run-time bounds: the view takes what it takes)."""
  return isinstance(i, slice) and i.step in (None, 1) or type(i).__name__ == "DSlice"


def strided_rows(cx, ref, index):
  """`out[::2] = v`, `out[:, 1::3] = v`, `grid[7, ::5] = v`, `cube[1, 8:, ::5] = w` of a GMEM ref (one axis sliced
  with a static step other than 1, the others whole, windows of a step of 1, ints or integer scalars): (ref, index),
  the ref a view of the other axes' windows and ints where they are not whole, the index with the stepped slice
  replaced by the positions it names, `ml.arange(count) * step + start`, which the assignment then scatters to (a
  plain scatter, jnp's .at[].set); None for other targets."""
  from . import elementwise as ew
  from ..types import RefType, Space
  t = ref.type
  if not (isinstance(t, RefType) and t.space == Space.GMEM and not t.remote and not t.transposed):
    return None
  items = index if isinstance(index, tuple) else (index,)
  if sum(i is Ellipsis for i in items) > 1:
    return None
  dims = []
  for i in items:
    dims.extend([slice(None)] * (len(t.shape) - (len(items) - 1)) if i is Ellipsis else [i])
  dims.extend([slice(None)] * (len(t.shape) - len(dims)))
  stepped = [d for d, i in enumerate(dims) if isinstance(i, slice) and i.step not in (None, 1)]
  if len(dims) != len(t.shape) or len(stepped) != 1 or any(not _int_index(i) and not _window(i)
                                                           for d, i in enumerate(dims) if d != stepped[0]):
    return None         # (the other axes whole, a window of them or one element: grid[7, ::5] = v, a row's every 5th)
  i = dims[stepped[0]]
  if not all(b is None or isinstance(b, int) and not isinstance(b, bool) for b in (i.start, i.stop, i.step)) or i.step == 0:
    return None
  start, _, step = i.indices(t.shape[stepped[0]])
  count = len(range(*i.indices(t.shape[stepped[0]])))
  if count == 0 or count % 8:
    return None
  if any(_int_index(j) or j != slice(None) for d, j in enumerate(dims) if d != stepped[0]):
    from . import memory     # grid[7, ::5], o[1, :, 3::5], o[1::2, 8:16]: the view of the other axes' windows first
    ref = memory.view(cx, ref, tuple(slice(None) if d == stepped[0] else j for d, j in enumerate(dims)), cx.text or "")
    dims = [slice(None) if j is not i else i for j in dims if not _int_index(j)]    # (numpy's basic indexing: an
  d = next(d for d, j in enumerate(dims) if j is i)           # index array beside an int would move its axis first)
  at = cx.b.emit(ew.Arange, 0, loc=cx.loc, types=[TensorType((count,), DType.i32)]).result
  rows = ew.binary(cx, ew.BinOp.ADD, ew.binary(cx, ew.BinOp.MUL, at, step), start)
  return ref, tuple(dims[:d]) + (rows,) + tuple(dims[d + 1:])


def _unheld(cx, x, dims, out):
  """The error for a strided slice whose result no register tensor holds ((4, 48) of `v[::2]` of an (8, 48) tile),
  with the tile, as many times longer along the first sliced axis as it takes, whose slice registers hold."""
  shape = tuple(x.type.shape)
  a = next(d for d, i in enumerate(dims) if isinstance(i, slice) and i.step not in (None, 1))
  unit = 8 if len(out) == 1 else hw.WARPGROUP       # (a vector needs a multiple of 8: probe 46a)
  f = unit // math.gcd(math.prod(out), unit)
  bigger = shape[:a] + (shape[a] * f,) + shape[a + 1:]
  text = cx.text or f"{cx.named(x, 'v')}[...]"
  n = shape[0] if len(shape) == 1 else None
  from .memory import Load, root
  read = cx.b.defs.get(x.id)
  base = root(cx.b, read.ref).name if isinstance(read, Load) else None
  name = base if base and base == text.split("[")[0].removesuffix(".at") else None   # (x[::-1] of a ref, not a tensor)
  if n is not None and len(out) == 1 and out[0] == n and dims[0].step == -1 and name:   # x[::-1] of a ref, odd n
    p = -(-n // 8) * 8
    return E.LayoutError(
        f"{text} of shape {shape} gives shape {out}, which registers cannot hold: a 1-D vector needs a multiple of"
        f" 8 elements", cx.loc,
        hint=f"reverse outside the kernel (call the kernel on {name}[::-1], which XLA fuses into the producer), or"
             f" reverse a window of {p} that ends at the end, masked: v = {name}.at[ml.ds({n - p}, {p})].load("
             f"mask=ml.arange({p}) >= {p - n}, other=0)[::-1], whose first {n} elements are {name}[::-1]; store them"
             f" with .store(v, mask=ml.arange({p}) < {n}) into a window of {p}")
  return E.LayoutError(
      f"{text} of shape {shape} gives shape {out}, which registers cannot hold: register tensors need a multiple"
      f" of {hw.WARPGROUP} elements (a 1-D vector a multiple of 8)", cx.loc,
      hint=f"slice a tile {f} times as long along axis {a}: the same slice of a {bigger} tile holds"
           f" {math.prod(out) * f} elements (read more of the array at once, or pad the tile with"
           f" ml.concatenate along axis {a} first)")


def column_run(cx, ref, index):
  """`x[:, j]`, `o[2:10, j] = v`, `x[b, 0:8, j]` of a GMEM ref: one axis a static slice of a step of 1, the last axis
  and every other one an int or an integer scalar, so the window's elements lie a row apart; where they are not a
  multiple of 128, no register layout moves such a window (each thread moves one element of 128), so it was MG204:
  the index with the slice replaced by the positions it names, `start + ml.arange(n)`, which the subscript gathers
  (or the assignment scatters to), as jnp's (a run-time index past either end is clamped by the gather and dropped
  by the scatter). None for other indices (probe 46a)."""
  from . import elementwise as ew
  from ..types import RefType, Space
  t = ref.type
  if not (isinstance(t, RefType) and t.space == Space.GMEM and not t.remote and not t.transposed) or len(t.shape) < 2:
    return None
  items = index if isinstance(index, tuple) else (index,)
  if any(i is Ellipsis for i in items) or len(items) != len(t.shape) or not _int_index(items[-1]):
    return None
  runs = [d for d, i in enumerate(items) if not _int_index(i)]
  if len(runs) != 1 or not (isinstance(items[runs[0]], slice) and items[runs[0]].step in (None, 1) and all(
      b is None or isinstance(b, int) and not isinstance(b, bool) for b in (items[runs[0]].start, items[runs[0]].stop))):
    return None
  d = runs[0]
  start, stop, _ = items[d].indices(t.shape[d])
  n = stop - start
  if math.prod(t.shape[d + 1:]) == 1 or resolve(t.dtype) == DType.bool_:
    return None        # (elements next to each other: a plain window; bools as they were)
  if n <= 0 or n % hw.WARPGROUP == 0 or n % 8:
    return None        # (a multiple of 128 moves one element a thread; a vector of other than 8k no register holds)
  at = cx.b.emit(ew.Arange, 0, loc=cx.loc, types=[TensorType((n,), DType.i32)]).result
  rows = ew.binary(cx, ew.BinOp.ADD, at, start) if start else at
  return tuple(items[:d]) + (rows,) + tuple(items[d + 1:])


def drop_dead_transposes(kernel) -> bool:
  """Drop each register transpose whose result nothing reads (after ir.prune_dead took its TransposeLoad): its
  TransposeStore and its scratch, where no other op uses that scratch. A widened operand bound to a name first
  (`w = b_s[...].T.astype(jnp.float32)`, then `x @ w`) is a product of b_s's view, and w's own transpose (a float32
  scratch the tile's size: MG402 of a (256, 256) B) is dead (probe 62b). Whether any was dropped."""
  from .memory import SmemAlloc
  uses: dict[int, int] = {}
  for o in ir.walk(kernel.body):
    for v in o.operands():
      uses[id(v)] = uses.get(id(v), 0) + 1
  dead = {id(o.scratch) for o in ir.walk(kernel.body) if isinstance(o, TransposeStore) and uses[id(o.scratch)] == 1}
  if not dead:
    return False

  def visit(blk):
    for o in blk.ops:
      for r in o.regions:
        visit(getattr(o, r))
    blk.ops[:] = [o for o in blk.ops if not (isinstance(o, TransposeStore) and id(o.scratch) in dead or
                                             isinstance(o, SmemAlloc) and id(o.result) in dead)]

  visit(kernel.body)
  kernel.smem[:] = [v for v in kernel.smem if id(v) not in dead]
  return True
