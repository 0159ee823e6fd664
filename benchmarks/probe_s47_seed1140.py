"""Dot fuzzer seed 1140 (wrong on an H100, right in interpret mode): variants, GPU against interpret mode.

    python benchmarks/probe_s47_seed1140.py
"""
import os
import sys
import tempfile
import importlib.util

import jax
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import dot_fuzz  # noqa: E402


def load(src, name):
  d = tempfile.mkdtemp()
  p = os.path.join(d, name + ".py")
  with open(p, "w") as f:
    f.write(src)
  spec = importlib.util.spec_from_file_location(name, p)
  m = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(m)
  return m.kernel


def tma_a(src, smem):
  lines = src.splitlines()
  out = []
  for l in lines:
    if l.startswith("  b_s = ml.smem"):
      out += [l, "  a_s = ml.smem((128, 64), jnp.bfloat16)"]
    elif l.startswith("    av = "):
      out += ["    ml.copy(x0.at[z, ml.ds(i * 128, 128), ml.ds(k * 64, 64)], a_s)"]
      if not smem:
        out += ["    av = a_s[...]"]
    elif smem and l.startswith("    acc = ml.dot(av"):
      out += [l.replace("ml.dot(av", "ml.dot(a_s")]
    else:
      out.append(l)
  return "\n".join(out) + "\n"


def main():
  g = dot_fuzz.Gen(1140)
  src = g.source
  args = list(g.args)
  x1pad = np.zeros((2, 96, 48), np.asarray(args[1]).dtype)
  x1pad[:, :, :16] = np.asarray(args[1])
  variants = {
      "as is": (src, args),
      "stages=1": (src.replace(", stages=4)", ")"), args),
      "B padded to 48 columns": (src, [args[0], x1pad, args[2]]),
      "A by TMA, read to registers": (tma_a(src, False), args),
      "A by TMA, dot from SMEM": (tma_a(src, True), args),
      "no bias": (src.replace("(acc + bias[:, None])", "acc"), args),
  }
  for name, (s, a) in variants.items():
    try:
      k = load(s, "v" + str(abs(hash(name))))
      want = np.asarray(k(*a, interpret=True)[0] if isinstance(k(*a, interpret=True), (tuple, list)) else k(*a, interpret=True))
      got = jax.block_until_ready(jax.jit(k)(*a))
      got = np.asarray(got[0] if isinstance(got, (tuple, list)) else got)
      bad = np.argwhere(~np.isclose(got, want, rtol=1e-2, atol=1e-2))
      print(f"{name:28s} {len(bad):5d} differ" + (f", first {tuple(bad[0])}: got {got[tuple(bad[0])]} want "
                                                   f"{want[tuple(bad[0])]}; rows {sorted(set(bad[:, 1].tolist()))[:12]}..." if len(bad) else ""), flush=True)
    except Exception as e:  # noqa: BLE001
      print(f"{name:28s} {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)


if __name__ == "__main__":
  main()
