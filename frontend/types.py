"""Types of typed-IR values: refs (GMEM/SMEM buffers), register tensors, scalars.

An SMEM buffer allocated without a dtype gets a `DTypeVar`; inference binds it
from the buffer's uses (frontend/infer.py) and every type that mentions it is
resolved once tracing ends.
"""
from __future__ import annotations

import dataclasses
import enum
import math

from .dtypes import DType
from .loc import Loc


class Space(enum.Enum):
  GMEM = "GMEM"
  SMEM = "SMEM"
  REGS = "registers"

  def __str__(self):
    return self.value


class DTypeVar:
  """An element type still to be inferred; a union-find cell."""

  def __init__(self, owner: str, loc: Loc):
    self.owner = owner            # the buffer's name, for messages
    self.loc = loc                # where the buffer was allocated
    self.dtype: DType | None = None
    self.bound_at: Loc | None = None
    self.bound_by: str = ""       # what bound it, for messages
    self._parent: DTypeVar | None = None

  def find(self) -> DTypeVar:
    v = self
    while v._parent is not None:
      v = v._parent
    return v

  def __repr__(self):
    root = self.find()
    return str(root.dtype) if root.dtype else f"?{root.owner}"


def resolve(d: DType | DTypeVar) -> DType | DTypeVar:
  if isinstance(d, DTypeVar):
    root = d.find()
    return root.dtype if root.dtype is not None else root
  return d


def dtype_name(d) -> str:
  d = resolve(d)
  return str(d) if isinstance(d, DType) else "an inferred dtype"


@dataclasses.dataclass(frozen=True)
class RefType:
  shape: tuple[int, ...]
  dtype: DType | DTypeVar
  space: Space
  remote: bool = False            # a peer CTA's SMEM (ml.cluster_ref)
  transposed: bool = False        # `buf.T`: a transposed view of a 2-D SMEM window (ml.dot operands)

  def __str__(self):
    t = ", T" if self.transposed else ""
    return f"ref<{self.space}, {_shape(self.shape)}, {dtype_name(self.dtype)}{t}>"

  @property
  def nbytes(self) -> int:
    d = resolve(self.dtype)
    return math.prod(self.shape) * (d.itemsize if isinstance(d, DType) else 4)


class LayoutKind(enum.Enum):
  STRIDED = "strided"    # contiguous vectors per thread over the flattened tensor; 128*k elements
  WGMMA = "wgmma"        # the tensor-core accumulator layout; 2-D, (64*i, 8*j)
  ROWS = "rows"          # 2-D tiles for row-wise work: warps along rows, lanes along columns


@dataclasses.dataclass(frozen=True)
class Layout:
  """How a register tensor is spread over a warpgroup's threads (frontend/layouts.py picks it).

  WGMMA and ROWS are 2-D tile layouts; `drop` names the axes of the tile a vector lacks:
  (1,) is one value per row (a row statistic, shape (m,) or (m, 1)), (0,) one value per
  column (shape (n,) or (1, n)). ROWS tiles put `warps_per_row` warps on each row and
  `vec` contiguous elements in each thread's registers (`lanes` lanes along a row). A STRIDED tensor with `wgs` > 1 is
  split by its leading axis among the CTA's warpgroups: warpgroup w holds rows
  [w * n / wgs, (w + 1) * n / wgs), so block=256 halves each warpgroup's work.
  """
  kind: LayoutKind
  drop: tuple[int, ...] = ()
  warps_per_row: int = 1
  vec: int = 1
  wgs: int = 1           # STRIDED: warpgroups splitting the leading axis (each its own rows)
  whole: bool = False    # WGMMA: every warpgroup holds the whole tile (an operand tile of fewer rows
                         # than the warpgroups split: 64 rows of a B tile at block=256)
  lanes: int = 32        # ROWS: lanes of a warp along a row; fewer for tiles narrower than a warp's
                         # 32 * vec elements (a router's 8 or 16 experts), 32 // lanes rows a warp

  def __str__(self):
    s = self.kind.value
    if self.wgs > 1:
      s += f"/{self.wgs}wg"
    if self.whole:
      s += "/whole"
    if self.kind == LayoutKind.ROWS:
      s += f"{self.warps_per_row}x{self.vec}" + (f"/{self.lanes}lanes" if self.lanes != 32 else "")
    if self.drop:
      s += "_" + ("row" if self.drop == (1,) else "col")
    return s

  def dropped(self, axes) -> "Layout":
    drop = tuple(sorted(set(self.drop) | set(axes)))
    # (a column vector is never split among warpgroups: a whole tile's is any tile's)
    return dataclasses.replace(self, drop=drop, whole=self.whole and 0 not in drop)

  @property
  def tile(self) -> "Layout":
    return dataclasses.replace(self, drop=())

  def local_shape(self, shape) -> tuple[int, ...]:
    """The part of a STRIDED tensor of `shape` one warpgroup holds (its rows when split)."""
    return (shape[0] // self.wgs,) + tuple(shape[1:]) if self.wgs > 1 else tuple(shape)

  def register_shape(self, shape) -> tuple[int, ...]:
    """The shape the backend holds: a vector's size-1 tile axes are squeezed away."""
    if self.drop and len(shape) == 2:
      return tuple(n for i, n in enumerate(shape) if i not in self.drop)
    return tuple(shape)


Layout.STRIDED = Layout(LayoutKind.STRIDED)
Layout.WGMMA = Layout(LayoutKind.WGMMA)
Layout.COL = Layout(LayoutKind.WGMMA, (0,))     # a vector along the columns of a WGMMA tile
Layout.ROW = Layout(LayoutKind.WGMMA, (1,))     # one value per row of a WGMMA tile


@dataclasses.dataclass(frozen=True)
class TensorType:
  shape: tuple[int, ...]
  dtype: DType | DTypeVar
  layout: Layout = Layout.STRIDED

  space = Space.REGS

  def __str__(self):
    lay = "" if self.layout == Layout.STRIDED else f", {self.layout}"
    return f"tensor<{_shape(self.shape)}, {dtype_name(self.dtype)}{lay}>"


@dataclasses.dataclass(frozen=True)
class ScalarType:
  """A value uniform across the CTA (a program id, a loop counter)."""
  dtype: DType | DTypeVar

  space = Space.REGS
  shape = ()

  def __str__(self):
    return f"scalar<{dtype_name(self.dtype)}>"


@dataclasses.dataclass(frozen=True)
class BarrierType:
  """`count` mbarriers in SMEM (a compiler-made value: warp-specialised pipelines); each
  completes a phase when `arrivals` warpgroups have arrived (one thread for each)."""
  count: int
  arrivals: int
  cluster_axis: int | None = None   # also every CTA's along this cluster axis arrives (multicast)

  space = Space.SMEM
  shape = ()

  def __str__(self):
    peers = "" if self.cluster_axis is None else f", cluster_axis={self.cluster_axis}"
    return f"barrier<{self.count}, arrivals={self.arrivals}{peers}>"


Type = RefType | TensorType | ScalarType


def with_dtype(t: Type, dtype) -> Type:
  return dataclasses.replace(t, dtype=dtype)


def resolved(t: Type) -> Type:
  return dataclasses.replace(t, dtype=resolve(t.dtype))


def _shape(shape) -> str:
  return "x".join(map(str, shape)) if shape else "()"
