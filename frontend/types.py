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

  def __str__(self):
    return f"ref<{self.space}, {_shape(self.shape)}, {dtype_name(self.dtype)}>"

  @property
  def nbytes(self) -> int:
    d = resolve(self.dtype)
    return math.prod(self.shape) * (d.itemsize if isinstance(d, DType) else 4)


class Layout(enum.Enum):
  """How a register tensor is spread over a warpgroup's threads (frontend/layouts.py picks it)."""
  STRIDED = "strided"    # contiguous vectors per thread; any shape of 128*k elements
  WGMMA = "wgmma"        # the tensor-core accumulator layout; 2-D, (64*i, 8*j)
  COL = "wgmma_col"      # a vector along the columns of a WGMMA tile (broadcast over its rows)

  def __str__(self):
    return self.value


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


Type = RefType | TensorType | ScalarType


def with_dtype(t: Type, dtype) -> Type:
  return dataclasses.replace(t, dtype=dtype)


def resolved(t: Type) -> Type:
  return dataclasses.replace(t, dtype=resolve(t.dtype))


def _shape(shape) -> str:
  return "x".join(map(str, shape)) if shape else "()"
