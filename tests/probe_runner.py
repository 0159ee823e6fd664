"""The runner probes' corpora share (probes 71a and 72b; session 60, from their copies): load a probe's case modules,
classify each case in interpret mode against its reference and exported for CUDA (ok / wrong / crash / refused /
build), and a command line over module or case names."""
import contextlib
import importlib
import sys
import traceback
import warnings

import jax
import numpy as np

import mgpu_dsl as mg

S = jax.ShapeDtypeStruct


def load(names):
  cases, x64 = {}, set()
  for m in names:
    try:
      mod = importlib.import_module(m)
    except ModuleNotFoundError:
      continue
    cases.update(mod.CASES)
    x64 |= set(getattr(mod, "X64", ()))
  return cases, x64


def err(got, want):
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  if got.shape != want.shape:
    return float("inf")
  fin = np.abs(want[np.isfinite(want)])
  scale = max(1e-6, float(np.max(fin, initial=0)))
  with np.errstate(invalid="ignore"):
    d = np.where((np.isnan(want) & np.isnan(got)) | (got == want), 0, np.abs(got - want))
  return float(np.nanmax(np.where(np.isnan(d), np.inf, d), initial=0)) / scale


def export(kernel, args, kw):
  """The kernel exported for CUDA; a host driver (a Python loop of launches that reads results) exports the
  launches it names in `kernel.steps(*args, **kw)`, [(kernel, args, kw)]."""
  steps = kernel.steps(*args, **kw) if hasattr(kernel, "steps") else [(kernel, args, kw)]
  for k, a, w in steps:
    jax.export.export(jax.jit(lambda *xs: k(*xs, **w)), platforms=["cuda"])(
        *[x if isinstance(x, S) else S(np.shape(x), np.asarray(x).dtype) for x in a]).mlir_module()


def classify(case, x64):
  kernel, make, ref, tol = case
  stage = "interpret"
  ctx = jax.enable_x64(True) if x64 else contextlib.nullcontext()
  try:
    with ctx, warnings.catch_warnings():
      warnings.simplefilter("ignore", mg.KernelWarning)
      args, kw = make(0)
      got = kernel(*args, **kw, interpret=True)
      want = ref(*args, **kw)
      got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
      errs = [err(g, w) for g, w in zip(got, want)]
      if len(got) != len(want) or not max(errs) <= tol:
        return "wrong", errs
      stage = "export"
      export(kernel, args, kw)
      return "ok", errs
  except mg.KernelError as e:
    return ("refused" if stage == "interpret" else "build-refused"), f"{type(e).__name__}: {e}"
  except Exception:
    return ("crash" if stage == "interpret" else "build"), traceback.format_exc()[-4000:]


def with_block(kernel, block):
  """The kernel rebuilt with `block` threads (None for a host driver or a wrapper of several launches)."""
  if not isinstance(kernel, mg.KernelFunction):
    return None
  return mg.mgpu_kernel(kernel.fn, out_shape=kernel.out_shape, grid=kernel.grid, block=block,
                        input_output_aliases=kernel.input_output_aliases)


def sweep(modules, argv=None):
  """python tests/<probe>_sweep.py [256 512]: each one-kernel case rebuilt at each block size, classified; the
  cases that are not ok, then the tally a block size."""
  cases, x64 = load(modules)
  sel = sys.argv[1:] if argv is None else argv
  for block in [int(b) for b in sel] or [256, 512]:
    tally = {}
    for name, (kernel, make, ref, tol) in cases.items():
      k = with_block(kernel, block)
      if k is None:
        continue
      kind, info = classify((k, make, ref, tol), name in x64)
      tally[kind] = tally.get(kind, 0) + 1
      if kind != "ok":
        print(f"=== block={block} {name}: {kind}\n{info}", flush=True)
    print("TALLY", block, tally, flush=True)


def main(prefix, modules, argv=None):
  """python tests/<probe>_run.py [module or case names]: each case's class, then the tally."""
  sel = sys.argv[1:] if argv is None else argv
  mods = [s for s in sel if s.startswith(prefix)] or modules
  cases, x64 = load(mods)
  names = [s for s in sel if not s.startswith(prefix)] or list(cases)
  tally = {}
  for n in names:
    kind, info = classify(cases[n], n in x64)
    tally[kind] = tally.get(kind, 0) + 1
    print(f"=== {n}: {kind}", info if kind == "ok" else "\n" + str(info), flush=True)
  print("TALLY", tally)
