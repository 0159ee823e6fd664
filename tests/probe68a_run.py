"""Run probe 68a's cases and classify each: ok / wrong / crash / refused / build."""
import sys
import traceback
import warnings

import jax
import numpy as np

import mgpu_dsl as mg
from probe68a_cases import CASES

S = jax.ShapeDtypeStruct


def relerr(got, want):
  got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
  assert got.shape == want.shape, (got.shape, want.shape)
  return float(np.max(np.abs(got - want)) / max(1e-6, float(np.max(np.abs(want)))))


def classify(name, seed=0):
  run, make, ref, tol = CASES[name]
  args = make(seed)
  stage = "interpret"
  try:
    with warnings.catch_warnings():
      warnings.simplefilter("ignore", mg.KernelWarning)
      got = run(*args, interpret=True)
      want = ref(*args)
      got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
      errs = [relerr(g, w) for g, w in zip(got, want)]
      if not max(errs) <= tol:
        return "wrong", errs
      stage = "export"
      jax.export.export(jax.jit(run), platforms=["cuda"])(*[S(a.shape, a.dtype) for a in args]).mlir_module()
      return "ok", errs
  except mg.KernelError as e:
    return ("refused" if stage == "interpret" else "build-refused"), str(e)
  except Exception:
    return ("crash" if stage == "interpret" else "build"), traceback.format_exc()[-3000:]


if __name__ == "__main__":
  names = sys.argv[1:] or sorted(CASES)
  for n in names:
    kind, info = classify(n)
    print(f"=== {n}: {kind}", info if kind == "ok" else "\n" + str(info), flush=True)
