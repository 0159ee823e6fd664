"""The objects kernels are written with (`from mgpu_dsl import language as ml`).

They are markers: the frontend recognises them while tracing a kernel's AST
and never calls them. Calling one from ordinary Python raises a clear error.
"""
from __future__ import annotations

import dataclasses
import functools

from .dtypes import DType


class Builtin:
  """A DSL function. Its docstring is the user documentation."""

  def __init__(self, fn):
    self.__name__ = fn.__name__
    self.__qualname__ = f"ml.{fn.__name__}"
    self.__doc__ = fn.__doc__
    self.__wrapped__ = fn

  def __repr__(self):
    return f"<mgpu_dsl builtin ml.{self.__name__}>"

  def __call__(self, *args, **kwargs):
    raise RuntimeError(
        f"ml.{self.__name__} can only be used inside an @mgpu_kernel function")


class Inline:
  """A helper function that kernels call; its body is traced into each caller (`@ml.inline`)."""

  def __init__(self, fn):
    functools.update_wrapper(self, fn)
    self.fn = fn
    self.parsed = None          # (Source, ast.FunctionDef, scope), read on first use

  def __repr__(self):
    return f"<mgpu_dsl inline function {self.fn.__qualname__}>"

  def __call__(self, *args, **kwargs):
    raise RuntimeError(f"{self.fn.__qualname__} is an @ml.inline helper: call it from an @mgpu_kernel function")


def inline(fn):
  """Make `fn` a helper that kernels can call; it is inlined where it is called.

      @ml.inline
      def load_tile(ref, i, rows):
          buf = ml.smem((rows, ref.shape[1]))
          ml.copy(ref.at[ml.ds(i * rows, rows)], buf)
          return buf

  Its body follows the kernel language; `return` may only end it.
  """
  return Inline(fn)


class _Constexpr:
  """Annotation: `def k(x, out, *, n: ml.constexpr)` makes `n` a compile-time constant."""

  def __repr__(self):
    return "ml.constexpr"


constexpr = _Constexpr()


@dataclasses.dataclass(frozen=True)
class DSlice:
  """`ml.ds(start, size)`: a window of `size` elements from a (possibly dynamic) start."""
  start: object
  size: int


@Builtin
def program_id(axis):
  """The index of this CTA (program) along grid axis 0, 1 or 2: `i = ml.program_id(0)`."""


@Builtin
def num_programs(axis):
  """The grid's extent along `axis`."""


@Builtin
def smem(shape, dtype=None):
  """An SMEM buffer. Without `dtype`, it is inferred from the buffer's uses.

  `buf = ml.smem((128, 64))` then `ml.copy(x.at[...], buf)` makes `buf` x's dtype.
  """


@Builtin
def ds(start, size):
  """A dynamic slice for `ref.at[...]`: `x.at[ml.ds(i * 128, 128), :]`."""


@Builtin
def copy(src, dst):
  """Copy a ref into another of the same shape and dtype.

  GMEM -> SMEM and SMEM -> GMEM use the TMA engine (asynchronously; the
  compiler awaits a load before the buffer is first read and a store before
  its SMEM is overwritten or the kernel ends). SMEM -> SMEM goes through
  registers. GMEM -> GMEM is rejected: stage it through SMEM.
  """


@Builtin
def zeros(shape, dtype):
  """A register tensor of zeros: `acc = ml.zeros((128, 64), jnp.float32)`."""


@Builtin
def full(shape, value, dtype):
  """A register tensor filled with `value` (a Python number or a scalar)."""


@Builtin
def arange(n, dtype=None):
  """The register tensor `[0, 1, ..., n)` (int32 unless `dtype` says otherwise)."""


@Builtin
def maximum(a, b):
  """Elementwise maximum."""


@Builtin
def minimum(a, b):
  """Elementwise minimum."""


@Builtin
def exp(x):
  """Elementwise e**x (floating point)."""


@Builtin
def exp2(x):
  """Elementwise 2**x (floating point)."""


@Builtin
def log(x):
  """Elementwise natural logarithm (floating point)."""


@Builtin
def sqrt(x):
  """Elementwise square root (floating point)."""


@Builtin
def rsqrt(x):
  """Elementwise 1/sqrt(x) (floating point)."""


@Builtin
def tanh(x):
  """Elementwise hyperbolic tangent (floating point)."""


@Builtin
def abs(x):
  """Elementwise absolute value."""


@Builtin
def where(cond, a, b):
  """`a` where `cond` holds, else `b` (cond a boolean tensor, e.g. `x > 0`)."""


@Builtin
def cast(x, dtype):
  """`x.astype(dtype)` as a function."""


@Builtin
def dot(a, b, acc=None):
  """`acc + a @ b` on the tensor cores (WGMMA), accumulating in float32.

  `a` (m, k) and `b` (k, n) are SMEM buffers (or stage views of them) of
  float16 or bfloat16; the compiler tiles and swizzles them for the tensor
  cores. `acc` is an (m, n) register tensor (float32; float16 for float16
  inputs) or None for zeros. m a multiple of 64, n a multiple of 64 up to
  256, k a multiple of 64.
  """


@Builtin
def grouped_ids(pid, num_m, num_n, group=8):
  """(i, j) tile coordinates for a 1-D program id, visiting tiles in groups of `group` rows.

  Consecutive programs then share rows of A and columns of B in L2 (Triton's
  GROUP_M ordering): `i, j = ml.grouped_ids(ml.program_id(0), m // bm, n // bn)`.
  """


@Builtin
def cluster_ref(buf, cta, axis=0):
  """The SMEM buffer `buf` of CTA `cta` (along cluster `axis`) in this CTA's cluster.

  Synchronise with `ml.cluster_sync()` before reading what the peer wrote.
  """


@Builtin
def cluster_sync():
  """All threads of every CTA in the cluster wait for each other."""


@Builtin
def range(*args, stages=1):
  """A runtime loop like `range`; with `stages=s > 1`, a software pipeline.

  In `for k in ml.range(n, stages=4):` the TMA loads into SMEM buffers at the top
  of the body run 3 iterations ahead: the compiler gives each such buffer 4
  copies, and overlaps the loads of later iterations with this one's ml.dot.
  """


@Builtin
def static_range(*args):
  """Like `range`, but the loop is unrolled while tracing (bounds must be static)."""


BUILTINS = {name: obj for name, obj in list(globals().items()) if isinstance(obj, Builtin)}

# dtypes, so kernels can say ml.float16 without importing jax.numpy.
float32, float16, bfloat16 = DType.f32, DType.f16, DType.bf16
float8_e4m3fn, float8_e5m2 = DType.f8e4m3, DType.f8e5m2
int64, int32, int16, int8 = DType.i64, DType.i32, DType.i16, DType.i8
uint32, uint16, uint8, bool_ = DType.u32, DType.u16, DType.u8, DType.bool_
