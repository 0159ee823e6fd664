"""Which int32 pattern the GPU gets wrong (session 52): `probe_s51_reduce.py` found 47 of its 1728 small reductions
wrong on an H100, every one an int32 min or max of a negated tile (`v = -x; ml.max(v, axis=...)`), along either axis,
plain or TMA loads, block 128 or 256, and none of any other pattern; the MLIR (the same text from jax 0.10.2 and
0.11.2) reads right. Here one tile (256, 16) and (64, 48) int32 goes through variants that spell the same statistic
other ways, each GPU result against NumPy, each kernel under its own name so that `MOSAIC_GPU_DUMP_PTX/SASS` with
`MOSAIC_GPU_DUMP_TO` keeps each one's PTX and SASS apart.

Found (first visit, before the fix): the PTX is right (`neg.s32`, `max.s32`, `shfl.sync.bfly`, the right lanes and
addresses) and the results wrong, so ptxas: `-x`, `0 - x`, `x * -1`, `~x + 1`, an inline-asm `neg.s32` and `z - x`
with an inline-asm zero all wrong; `3 - x`, `1 - x`, `-min(x)`, sums, float32 and the column statistic (through SMEM)
right. The fix (lowering/shape.py `SIGN_FLIP`): signed min / max reduce the sign-flipped bits as unsigned; "noflip"
runs build without it.

    MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_TO=DIR python benchmarks/probe_s52_neg.py
    python benchmarks/probe_s52_neg.py --cpu        (interpret mode and the CUDA build: the references' check)
"""
import os
import sys
import types

import contextlib

import jax
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import fuzz_check  # noqa: E402

HEADER = """import jax
import jax.numpy as jnp
import mgpu_dsl as mg
from mgpu_dsl import language as ml
S = jax.ShapeDtypeStruct
"""

# name: (kernel body lines after `v = <load>`, NumPy of x)
VARIANTS = {
  "neg_max": (["o0[...] = ml.max(-v, axis=1)"], lambda x: (-x).max(1)),
  "neg_min": (["o0[...] = ml.min(-v, axis=1)"], lambda x: (-x).min(1)),
  "neg_sum": (["o0[...] = ml.sum(-v, axis=1)"], lambda x: (-x).sum(1)),
  "max": (["o0[...] = ml.max(v, axis=1)"], lambda x: x.max(1)),
  "zero_minus_max": (["o0[...] = ml.max(0 - v, axis=1)"], lambda x: (-x).max(1)),
  "times_m1_max": (["o0[...] = ml.max(v * -1, axis=1)"], lambda x: (-x).max(1)),
  "three_minus_max": (["o0[...] = ml.max(3 - v, axis=1)"], lambda x: (3 - x).max(1)),
  "not_plus1_max": (["o0[...] = ml.max(~v + 1, axis=1)"], lambda x: (~x + 1).max(1)),
  "minus_min": (["o0[...] = -ml.min(v, axis=1)"], lambda x: -x.min(1)),
  "neg_plus1_max": (["o0[...] = ml.max(-v + 1, axis=1)"], lambda x: (1 - x).max(1)),
  "neg_col_max": (["o1[...] = ml.max(-v, axis=0)"], lambda x: (-x).max(0)),
  "neg_argmax": (["o0[...] = jnp.argmax(-v, axis=1).astype(jnp.int32)"], lambda x: (-x).argmax(1)),
  "neg_cummax": (["o0[...] = ml.sum(ml.cummax(-v, axis=1), axis=1)"],
                 lambda x: np.maximum.accumulate(-x, axis=1).sum(1)),
  "neg_maximum_sum": (["o0[...] = ml.sum(jnp.maximum(-v, -3), axis=1)"], lambda x: np.maximum(-x, -3).sum(1)),
  "neg_max_f32": (["o0[...] = ml.max(-v.astype(jnp.float32), axis=1).astype(jnp.int32)"], lambda x: (-x).max(1)),
}


@contextlib.contextmanager
def no_flip(off):
  """The kernels built inside with the signed min / max reductions as before the fix (lowering/shape.py's
  SIGN_FLIP off) where `off`. (Session 52's first visit also replaced Mosaic GPU's integer negation, `0 - x`:
  one inline-asm `neg.s32` per element, or `z - x` with z an inline-asm zero; both as wrong as `0 - x`.)"""
  from mgpu_dsl.lowering import shape
  flip = shape.SIGN_FLIP
  shape.SIGN_FLIP = not off
  try:
    yield
  finally:
    shape.SIGN_FLIP = flip


def source(name, body, shape, block, tma, fix=""):
  r, c = shape
  fn = f"k_{name}_{r}x{c}_{block}{'_tma' if tma else ''}{'_' + fix if fix else ''}"
  outs = f"S(({r},), jnp.int32), S(({c},), jnp.int32)"
  lines = [HEADER, "", f"@mg.mgpu_kernel(out_shape=lambda *a: ({outs}), grid=(1,), block={block})",
           f"def {fn}(x0, o0, o1):"]
  if tma:
    lines += [f"  x_s = ml.smem(({r}, {c}), jnp.int32)", "  ml.copy(x0, x_s)", "  v = x_s[...]"]
  else:
    lines.append("  v = x0[...]")
  lines += ["  " + b for b in body]
  if not any(b.startswith("o0") for b in body):
    lines.append(f"  o0[...] = ml.zeros(({r},), jnp.int32)")
  if not any(b.startswith("o1") for b in body):
    lines.append(f"  o1[...] = ml.zeros(({c},), jnp.int32)")
  lines.append(f"kernel = {fn}")              # (fuzz_check.load's name for it)
  return fn, "\n".join(lines) + "\n"


def main():
  only = os.environ.get("VARIANTS")
  os.environ["MGPU_DSL_CACHE_DIR"] = "off"
  runs = [(shape, block, tma, "", name) for shape, block, tma in (((256, 16), 128, False), ((64, 48), 128, False),
                                                                   ((256, 16), 256, True)) for name in VARIANTS]
  runs += [((256, 16), 128, False, "noflip", name)
           for name in ("neg_max", "neg_min", "neg_col_max", "neg_argmax", "neg_cummax", "neg_maximum_sum")]
  runs += [((64, 48), 128, False, "noflip", name) for name in ("neg_max", "neg_min")]
  for shape, block, tma, fix, name in runs:
    x = np.random.default_rng(829).integers(-9, 10, shape).astype(np.int32)
    body, ref = VARIANTS[name]
    if only and name not in only.split(","):
      continue
    fn, src = source(name, body, shape, block, tma, fix)
    with no_flip(fix == "noflip"):
      try:
        k = fuzz_check.load(types.SimpleNamespace(source=src))
        if "--cpu" in sys.argv:     # interpret mode, and the CUDA build (the replaced negation's MLIR verifies)
          jax.export.export(jax.jit(k), platforms=["cuda"])(jax.ShapeDtypeStruct(x.shape, x.dtype))
        run = (lambda a: k(a, interpret=True)) if "--cpu" in sys.argv else jax.jit(k)
        got = [np.asarray(g) for g in jax.block_until_ready(run(x))]
        want = ref(x.astype(np.int64)).astype(np.int32)
        g = got[1] if body[0].startswith("o1") else got[0]
        bad = np.nonzero(g != want)[0]
        print(f"{fn:34s} {len(bad):4d} of {want.size} wrong" +
              (f" (first {bad[0]}: got {g[bad[0]]} want {want[bad[0]]})" if len(bad) else ""), flush=True)
      except Exception as e:  # noqa: BLE001
        print(f"{fn:34s} {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)


if __name__ == "__main__":
  main()
