"""Async fuzzer 61c's int8 seeds wrong on an H100 (session 49: 306, 693, 894, 997, 1046 of 0:1500, all `acc += ml.dot(..)`
of an int8 A from registers and an int32 result): each run twice (is it deterministic?) and variants of each, GPU
against interpret mode; every output saved to $OUT/s49_int8.npz (got, want, inputs) for the analysis on the CPU.

    python benchmarks/probe_s49_int8.py            (SEEDS=1046,306 VARIANTS="as is,stages=1" for some)
    python benchmarks/probe_s49_int8.py --refused  (61c's int8 seeds of 0:1500 that MG501 refuses since, run with
                                                    the refusal switched off: which of them the GPU gets wrong)
    python benchmarks/probe_s49_int8.py --unchained  (the five seeds with chaining and MG501 off: the lowering's
                                                    opaque accumulator registers alone)

Measured on an H100 (session 49): every seed wrong twice alike (deterministic); right with stages=1 and written
chained (`acc = ml.dot(a, b, acc)`, now the compiler's own form of an integer `acc + ml.dot(a, b)`), still wrong as
`d = ml.dot(a, b); acc = acc + d * 1`, and for 693 at block=128 and with A not carried. The wrong values were the
product plus, in each thread, its last result register (design note 207).
"""
import os
import re
import sys

import jax
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import async_fuzz2  # noqa: E402
import fuzz_check  # noqa: E402


class _Src:
  def __init__(self, gen, source):
    self.seed, self.source, self.args = gen.seed, source, gen.args


def variants(src):
  out = {"as is": src, "again": src}
  out["stages=1"] = re.sub(r", stages=\d\)", ")", src)
  out["chained acc"] = re.sub(r"acc \+= ml\.dot\((.*), out_dtype=jnp\.int32\)", r"acc = ml.dot(\1, acc)", src)
  out["dot then wait (acc = acc + d * 1)"] = re.sub(r"( +)acc \+= (ml\.dot\(.*\))", r"\1d = \2\n\1acc = acc + d * 1",
                                                    src)
  out["one static step"] = src.replace("ml.static_range(2)", "ml.static_range(1)")
  out["stages=2"] = re.sub(r", stages=\d\)", ", stages=2)", src)
  if ", block=256)" in src:
    out["block=128"] = src.replace(", block=256)", ")")
  if "    a_reg = -a_reg\n" in src:
    out["A not negated (not carried)"] = src.replace("    a_reg = -a_reg\n", "")
  if "ml.smem((16, 64), jnp.int8)" in src:      # seed 1046: B of 32 rows (its last 16 zeros), N=32
    out["N=32 (B padded)"] = (src.replace("(16, 64)", "(32, 64)").replace("ml.ds(0, 16)", "ml.ds(0, 32)")
                              .replace("(64, 16)", "(64, 32)").replace("ml.arange(16)", "ml.arange(32)"))
  return out


def inputs(name, args):
  if name == "N=32 (B padded)":
    b = np.zeros((32, 64), np.asarray(args[1]).dtype)
    b[:16] = np.asarray(args[1])
    return [args[0], b] + list(args[2:])
  return list(args)


REFUSED = (0, 1500)       # (the seed range --refused walks)


def refused():
  """61c's int8 seeds that MG501 (frontend/int_dot_chain.py) refuses, compiled with the refusal off: GPU vs NumPy."""
  import async_fuzz
  from mgpu_dsl.frontend import compile as fc
  counts = {}
  for seed in range(*REFUSED):
    g = async_fuzz2.Gen(seed)
    if "dt:int8" not in g.tags:
      continue
    cls, detail = async_fuzz.run(g, build=False)
    if not (cls == "refused" and detail.startswith("MG501") and "ptxas" in detail):
      continue
    check, fc.check_fresh_int8_dots = fc.check_fresh_int8_dots, lambda *a: None
    try:
      k = fuzz_check.load(g)
      got = jax.block_until_ready(jax.jit(k)(*g.args))
      got = got if isinstance(got, (tuple, list)) else (got,)
      bad = sum(int(np.sum(np.asarray(x) != np.asarray(w))) for x, w in zip(got, g.refs))
      cls = "wrong-gpu" if bad else "ok"
      print(f"{seed} {cls} {bad} differ {sorted(g.tags)}", flush=True)
    except Exception as e:  # noqa: BLE001
      cls = "error"
      print(f"{seed} error {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
    finally:
      fc.check_fresh_int8_dots = check
    counts[cls] = counts.get(cls, 0) + 1
  print(counts)


def unchained():
  """The five seeds and their `d * 1` variants with the compiler's chaining and MG501 both off: what the lowering's
  own registers for a constant accumulator (lowering/mma.py `_own_registers`) do on the GPU alone."""
  from mgpu_dsl.frontend import compile as fc
  saved = fc.chain_integer_dots, fc.check_fresh_int8_dots
  fc.chain_integer_dots = fc.check_fresh_int8_dots = lambda *a: None
  try:
    for seed in (306, 693, 894, 997, 1046):
      g = async_fuzz2.Gen(seed)
      for name in ("as is", "dot then wait (acc = acc + d * 1)"):
        k = fuzz_check.load(_Src(g, variants(g.source)[name]))
        want = np.asarray(k(*g.args, interpret=True)[0])
        got = np.asarray(jax.block_until_ready(jax.jit(k)(*g.args))[0])
        print(f"{seed} unchained {name:36s} {int(np.sum(got != want)):6d} of {want.size} differ", flush=True)
  finally:
    fc.chain_integer_dots, fc.check_fresh_int8_dots = saved


def main():
  if "--refused" in sys.argv:
    return refused()
  if "--unchained" in sys.argv:
    return unchained()
  seeds = [int(s) for s in os.environ.get("SEEDS", "1046,306,997,894,693").split(",")]
  only = os.environ.get("VARIANTS")
  saved = {}
  for seed in seeds:
    g = async_fuzz2.Gen(seed)
    for name, s in variants(g.source).items():
      if only and name not in only.split(","):
        continue
      if name != "as is" and s == g.source and name != "again":
        continue
      try:
        k = fuzz_check.load(_Src(g, s))
        a = inputs(name, g.args)
        want = k(*a, interpret=True)
        got = jax.block_until_ready(jax.jit(k)(*a))
        want = np.asarray(want[0] if isinstance(want, (tuple, list)) else want)
        got = np.asarray(got[0] if isinstance(got, (tuple, list)) else got)
        bad = np.argwhere(got != want)
        key = f"{seed}/{name}"
        saved[key + "/got"], saved[key + "/want"] = got, want
        msg = f"{seed} {name:36s} {len(bad):6d} of {want.size} differ"
        if len(bad):
          i = tuple(bad[0])
          msg += f", first {i}: got {got[i]} want {want[i]}"
        print(msg, flush=True)
      except Exception as e:  # noqa: BLE001
        print(f"{seed} {name:36s} {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
    for j, a in enumerate(g.args):
      saved[f"{seed}/arg{j}"] = np.asarray(a)
  np.savez_compressed(os.path.join(os.environ.get("OUT", "/tmp"), "s49_int8.npz"), **saved)


if __name__ == "__main__":
  main()
