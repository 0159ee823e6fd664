"""Dot fuzzer seed 1140 (wrong on an H100 until session 48, right in interpret mode): variants, GPU against interpret
mode. Fixed by design note 202 (a register A retires before the next trip rewrites it): every variant right since.

    python benchmarks/probe_s47_seed1140.py        (VARIANTS="as is,no bias" for some)

Measured on an H100 (forty-seventh session, design note 201): wrong ("as is", "B padded to 48 columns", "acc read
before the bias": rows 72-79, 88-95, ... of each 128, the row vector's fourth register), right with stages=1, with A
loaded by TMA, without the bias, with the bias loaded before the loop, unmasked or made from an arange.
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


def bias_first(src):
  lines = src.splitlines()
  bias = next(l for l in lines if l.startswith("  bias = "))
  out = []
  for l in lines:
    if l == bias:
      continue
    if l.startswith("  for k in"):
      out.append(bias)
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
      "acc read before the bias": (src.replace("  bias = ml.load(", "  acc = acc * 1.0\n  bias = ml.load("), args),
      "bias loaded before the loop": (bias_first(src), args),
      "bias unmasked (array padded)": (src.replace(", mask=i * 128 + ml.arange(128) < 172, other=0.0)", ")"),
                                       [args[0], args[1], np.pad(np.asarray(args[2]), (0, 84))]),
      "bias from arange": (src.replace("ml.load(x2.at[ml.ds(i * 128, 128)], mask=i * 128 + ml.arange(128) < 172, "
                                       "other=0.0)", "(ml.arange(128) % 7).astype(jnp.float32) * 0.5"), args),
  }
  only = os.environ.get("VARIANTS")       # (a comma-separated subset of the names)
  for name, (s, a) in variants.items():
    if only and name not in only.split(","):
      continue
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
