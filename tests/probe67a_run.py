"""Run probe 67a's corpus: classify each case ok / wrong / crash / refused / build (python tests/probe67a_run.py [names])."""
import sys
import traceback

import jax
import numpy as np

import mgpu_dsl as mg
import probe67a_kernels as K

S = jax.ShapeDtypeStruct


def classify(case, seed=0, build=True):
  name, kernel, inputs, kw, ref, tol = case
  args = inputs(seed)
  try:
    got = kernel(*args, interpret=True, **kw)
  except mg.KernelError as e:
    return "refused", str(e)
  except Exception:
    return "crash", traceback.format_exc()
  want = ref(*args)
  gots = got if isinstance(got, (tuple, list)) else (got,)
  wants = want if isinstance(want, (tuple, list)) else (want,)
  for g, w in zip(gots, wants):
    g = np.asarray(g, np.float32)
    w = np.asarray(w, np.float32)
    if g.shape != w.shape or not np.allclose(g, w, rtol=tol, atol=tol):
      err = np.abs(g - w).max() if g.shape == w.shape else f"{g.shape} vs {w.shape}"
      return "wrong", f"max err {err}"
  if build:
    try:
      specs = [S(np.shape(a), a.dtype) for a in args]
      jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*specs)
    except mg.KernelError as e:
      return "refused-at-build", str(e)
    except Exception:
      return "build", traceback.format_exc()[-3000:]
  return "ok", ""


if __name__ == "__main__":
  names = sys.argv[1:]
  for case in K.CASES:
    if names and case[0] not in names:
      continue
    status, msg = classify(case)
    print(f"{case[0]:40s} {status}", flush=True)
    if status != "ok":
      print("   " + msg.strip().replace("\n", "\n   ")[-2500:], flush=True)
