"""Loading and checking the fuzz generator's kernels (tests/fuzz_gen.py): a kernel either builds
(and runs in interpret mode) or fails with a KernelError located in its own lines.
"""
from __future__ import annotations

import importlib.util
import itertools
import os
import re
import sys
import tempfile
import traceback

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from fuzz_gen import FLOATS, Program


_modules = itertools.count()
_tmp = tempfile.TemporaryDirectory(prefix="mgpu_dsl_fuzz_")


def load(program: Program):
  name = f"mgpu_dsl_fuzz_{os.getpid()}_{next(_modules)}"
  path = os.path.join(_tmp.name, name + ".py")
  with open(path, "w") as f:
    f.write(program.source)
  spec = importlib.util.spec_from_file_location(name, path)
  mod = importlib.util.module_from_spec(spec)
  sys.modules[name] = mod
  try:
    spec.loader.exec_module(mod)
  finally:
    del sys.modules[name]
  return mod.kernel


def _located(program, err):
  """A failure description when `err` is not a located user error (an InternalError, or outside the kernel)."""
  for e in err.errors:       # one pass reports every independent mistake: check them all
    if isinstance(e, mg.InternalError):
      return f"InternalError (reported after {type(err).__name__}): {e.message}", e
    if not program.first_line <= e.lineno <= program.last_line:
      return f"{type(e).__name__} outside the kernel (line {e.lineno}): {e.message}", e
    if re.search(r"%\d", e.message):
      return f"{type(e).__name__} shows an internal value name: {e.message}", e
  return None


def inputs(program, seed=0):
  """Random arguments for the kernel's inputs (normal floats, small ints, random bools)."""
  r = np.random.default_rng(seed)
  out = []
  for shape, dt in program.specs:
    if dt in FLOATS:
      a = r.standard_normal(shape).astype(np.float32)
    elif dt == "bool":
      a = r.random(shape) < 0.5
    else:
      a = r.integers(-100, 100, shape)
    out.append(jnp.asarray(a, jnp.dtype(dt)))
  return out


def check_program(program: Program, *, run=True):
  """None if the kernel builds (and, with `run`, runs in interpret mode) or fails with a located
  user error; else a failure description."""
  kernel = load(program)
  specs = [jax.ShapeDtypeStruct(shape, jnp.dtype(dt)) for shape, dt in program.specs]
  try:
    kernel.check(*specs)
    if run:       # checker-accepted kernels run in interpret mode, or fail with a located error
      jax.block_until_ready(kernel(*inputs(program), interpret=True))
  except mg.InternalError as e:
    return f"InternalError: {e.message}", e
  except mg.KernelError as e:
    return _located(program, e)
  except Exception as e:   # noqa: BLE001  (any other exception is the bug we look for)
    return f"{type(e).__name__}: {e}", e
  return None


def _describe(program, failure):
  what, exc = failure
  tb = "".join(traceback.format_exception(exc))
  return f"{what}\n--- kernel ---\n{program.source}--- specs: {program.specs}\n{tb}"
