"""Helpers the probe tests share: inputs drawn with NumPy, float32 views of results, and the CUDA build of a kernel
on this machine (its check, then jax.export for CUDA, which builds and verifies the Mosaic GPU module)."""
import jax
import numpy as np

S = jax.ShapeDtypeStruct


def rnd(shape, seed, dtype=np.float32):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def f32(x):
  return np.asarray(x, np.float32)


def export(kernel, *args, **kw):
  """`kernel` checked and exported for CUDA at the shapes and dtypes of `args` (its constexprs `kw`)."""
  specs = [S(np.shape(a), a.dtype) for a in args]
  kernel.check(*specs, **kw)
  jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*specs)


def line_of(fn, text):
  """(line, column) of `text`'s first occurrence in the source of `fn` (a kernel or a function)."""
  import inspect
  lines, first = inspect.getsourcelines(fn.fn if hasattr(fn, "fn") else fn)
  for i, line in enumerate(lines):
    if text in line:
      return first + i, line.index(text)
  raise LookupError(text)
