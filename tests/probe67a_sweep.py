"""Probe 67a's shape sweep: the corpus's parametrised kernels at random odd shapes, strides, paddings and blocks, in
interpret mode against their references (python tests/probe67a_sweep.py SEEDS, e.g. 0:40; --build exports too)."""
import sys
import traceback

import jax
import numpy as np

import mgpu_dsl as mg
import probe67a_convs as C

S = jax.ShapeDtypeStruct


def config(seed):
  """(name, kernel, args, constexprs, reference, tolerance) of seed `seed`."""
  r = np.random.default_rng(seed)
  kind = seed % 5
  if kind == 0:
    B, D, L = int(r.integers(1, 3)), int(r.integers(1, 70)), int(r.integers(1, 300))
    BD, BL = int(r.choice([8, 16, 32])), int(r.choice([32, 64, 128]))
    W, silu = int(r.integers(2, 5)), bool(r.integers(0, 2))
    x, w = C.rnd((B, D, L), seed), C.rnd((D, W), seed + 1)
    return ("causal_conv1d", C.causal_conv1d, (x, w), dict(BD=BD, BL=BL, WIDTH=W, SILU=silu),
            lambda x, w: C.ref_causal(x, w, silu=silu), 1e-4)
  if kind == 1:
    K, S_, P = int(r.choice([1, 3, 5])), int(r.integers(1, 3)), None
    P = int(r.integers(0, K // 2 + 1))
    H, W, Ch = int(r.integers(K, 20)), int(r.integers(K, 40)), int(r.choice([8, 16, 24, 32, 40]))
    BW, BC = int(r.choice([8, 16, 32])), int(r.choice([8, 16, 32]))
    x, w = C.rnd((int(r.integers(1, 3)), H, W, Ch), seed), C.rnd((K, K, Ch), seed + 1)
    return ("depthwise_nhwc", C.depthwise_nhwc, (x, w), dict(K=K, STRIDE=S_, PAD=P, BW=BW, BC=BC),
            lambda x, w: C.ref_depthwise(x, w, K, S_, P), 1e-4)
  if kind == 2:
    K, S_ = int(r.choice([2, 3, 4])), int(r.integers(1, 3))
    P = int(r.integers(0, K // 2 + 1))
    H, W = int(r.integers(K, 20)), int(r.integers(K, 30))
    x = C.rnd((int(r.integers(1, 3)), H, W, int(r.choice([8, 16, 32]))), seed)
    OW = (W + 2 * P - K) // S_ + 1
    BW = max(8, 1 << int(np.ceil(np.log2(OW))))
    if r.integers(0, 2):
      return ("maxpool_nhwc", C.maxpool_nhwc, (x,), dict(K=K, STRIDE=S_, PAD=P, BW=BW),
              lambda x: C.ref_pool(x, K, S_, P, "max"), 1e-5)
    inc = bool(r.integers(0, 2))
    return ("avgpool_nhwc", C.avgpool_nhwc, (x,), dict(K=K, STRIDE=S_, PAD=P, BW=BW, INCLUDE_PAD=inc),
            lambda x: C.ref_pool(x, K, S_, P, "avg", inc), 1e-5)
  if kind == 3:
    K, S_ = int(r.choice([1, 3])), int(r.integers(1, 3))
    P = int(r.integers(0, K // 2 + 1))
    CI, CO = int(r.choice([16, 32])), int(r.choice([16, 32, 64]))
    x = C.rnd((int(r.integers(1, 3)), int(r.integers(K, 12)), int(r.integers(K, 14)), CI), seed, np.float16)
    w = C.rnd((K, K, CI, CO), seed + 1, np.float16)
    return ("conv2d_implicit_gemm_regs", C.conv2d_implicit_gemm_regs, (x, w),
            dict(STRIDE=S_, PAD=P, BM=64, BN=min(CO, 32), BK=int(r.choice([16, 32]))),
            lambda x, w: C.ref_conv(x, w, S_, P), 2e-2)
  P_, H, W = int(r.integers(1, 3)), int(r.integers(2, 12)), int(r.integers(2, 30))
  OH, OW = int(r.integers(1, 30)), int(r.integers(1, 120))
  x = C.rnd((P_, H, W), seed)
  return ("resize_bilinear", C.resize_bilinear, (x,), dict(OH=OH, OW=OW), lambda x: C.ref_bilinear(x, OH, OW), 1e-4)


def run(seed, build=False):
  name, kernel, args, kw, ref, tol = config(seed)
  try:
    got = np.asarray(kernel(*args, interpret=True, **kw), np.float32)
  except mg.KernelError as e:
    return name, kw, "refused", e.render().splitlines()[0]
  except Exception:
    return name, kw, "crash", traceback.format_exc()[-1500:]
  want = np.asarray(ref(*args), np.float32)
  if got.shape != want.shape or not np.allclose(got, want, rtol=tol, atol=tol):
    return name, kw, "wrong", f"{got.shape} {want.shape}" if got.shape != want.shape else str(np.abs(got - want).max())
  if build:
    try:
      jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*[S(a.shape, a.dtype) for a in args])
    except mg.KernelError as e:
      return name, kw, "refused-at-build", e.render().splitlines()[0]
    except Exception:
      return name, kw, "build", traceback.format_exc()[-1500:]
  return name, kw, "ok", ""


if __name__ == "__main__":
  lo, hi = map(int, sys.argv[1].split(":"))
  counts = {}
  for seed in range(lo, hi):
    name, kw, status, msg = run(seed, build="--build" in sys.argv)
    counts[status] = counts.get(status, 0) + 1
    if status != "ok":
      print(seed, name, kw, status, msg, flush=True)
  print(counts)
