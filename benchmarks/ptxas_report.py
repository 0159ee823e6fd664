"""What ptxas makes of each Mosaic GPU kernel, on a machine without a GPU (issues #9 and #10).

    python benchmarks/ptxas_report.py attention [--seq 4096] [--head-dim 64] [--causal full] [--set field=value,...]
    python benchmarks/ptxas_report.py examples [FILE.py ...]

Compiles deviceless (JAX's AOT compile for a CUDA topology described by a GPU target config: an H100's, sm_90a)
(mg.ptxas_info, mgpu_dsl/ptxas.py) and reports, for every kernel ptxas compiles, its registers a thread, its spills and whether ptxas serialised its
tensor-core products (the C7510-C7515 "Potential Performance Loss: wgmma.mma_async instructions are serialized"
notes: every wgmma of the kernel then waits for the one before, whatever order the kernel issues them in).
`attention`: examples/attention.py's forward and backward (jax.grad) at its default configuration for each head_dim
and mask (`--set` replaces Config fields, `bwd_dq_deferred=False,dkv_bq=64`). `examples`: every specialisation
the examples declare with mg.check_specs (as `python -m mgpu_dsl check` builds them). `--producer-registers N`:
warp-specialised kernels with the producer warpgroup at N registers a thread.

It needs JAX's CUDA plugin and the CUDA compiler's pip wheels beside jax (not the project's dependencies; a
separate environment is best):

    pip install "jax-cuda12-plugin==$JAXV" "jax-cuda12-pjrt==$JAXV" nvidia-cuda-nvcc-cu12 nvidia-cuda-runtime-cu12 \
        nvidia-nvjitlink-cu12      # JAXV: the installed jax's version
    JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 python benchmarks/ptxas_report.py attention

On jax 0.11.2 with ptxas 12.9 its registers and spills are those the H200's logs show for the same kernels
(fifty-fourth session: 255 registers and 20 bytes spilled for the backward at head_dim 128, 384 with the mask).
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib.util
import os
import sys

os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.append(os.path.join(HERE, "..", "examples"))
from common import table  # noqa: E402
from mgpu_dsl.ptxas import captured, ptxas_info, target_device  # noqa: E402


def compile_report(fn, *specs) -> list[tuple]:
  """(kernel, registers, spilled bytes, serialisation) of each kernel `fn` compiles; an error as a row of its own."""
  try:
    infos, err = ptxas_info(fn, *specs), None
  except Exception as e:     # a kernel that does not build here: its error in the report, the others go on
    infos, err = [], f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"
  rows = [(i.kernel, str(i.registers), f"{i.spill_stores} / {i.spill_loads}", i.serialized or "no") for i in infos]
  return rows + ([("(error)", "", "", err)] if err else [])


def attention(args):
  spec = importlib.util.spec_from_file_location("attention_example", os.path.join(HERE, "..", "examples",
                                                                                  "attention.py"))
  ex = importlib.util.module_from_spec(spec)
  sys.modules[spec.name] = ex
  spec.loader.exec_module(ex)
  over = {k.strip(): ast.literal_eval(v) for k, v in (kv.split("=") for kv in (args.set or "").split(",") if kv)}
  rows = []
  for d in args.head_dim or (64, 128):
    for causal in [m == "causal" for m in args.causal or ("full", "causal")]:
      cfg = dataclasses.replace(ex.default_config(d, causal, args.seq), **over)
      x = jax.ShapeDtypeStruct((16384 // args.seq, args.seq, 16, d), jnp.float16)
      loss = lambda q, k, v, cfg=cfg, causal=causal: ex.attention(q, k, v, causal, config=cfg).astype(
          jnp.float32).sum()
      for r in compile_report(jax.jit(jax.grad(loss, argnums=(0, 1, 2))), x, x, x):
        rows.append((d, "causal" if causal else "full") + r)
        print(table(HEAD_ATTN, rows[-1:]), flush=True)
  return HEAD_ATTN, rows


def examples(args):
  from mgpu_dsl import check as C
  files = args.files or sorted(os.path.join(HERE, "..", "examples", f) for f in os.listdir(os.path.join(HERE, "..",
                                                                                                          "examples"))
                               if f.endswith(".py"))
  for path in files:
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    with captured():
      spec.loader.exec_module(mod)
  rows = []
  for kernel, entries in C._DECLARED.items():
    for specs, constexprs in entries:
      fn = jax.jit(lambda *a, kernel=kernel, constexprs=constexprs: kernel(*a, **constexprs))
      for r in compile_report(fn, *specs):
        rows.append((kernel.__name__, ", ".join(f"{k}={v}" for k, v in constexprs.items())[:40]) + r[1:])
        print(table(HEAD_EX, rows[-1:]), flush=True)
  return HEAD_EX, rows


HEAD_ATTN = ("D", "mask", "kernel", "registers", "spilled bytes (stores / loads)", "wgmma serialised")
HEAD_EX = ("kernel", "constexprs", "registers", "spilled bytes (stores / loads)", "wgmma serialised")


def main():
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("what", choices=("attention", "examples"))
  p.add_argument("files", nargs="*", help="examples: these files only")
  p.add_argument("--seq", type=int, default=4096)
  p.add_argument("--head-dim", type=int, action="append")
  p.add_argument("--causal", choices=("full", "causal"), action="append")
  p.add_argument("--set", help="attention: Config fields to replace, field=value,...")
  p.add_argument("--producer-registers", type=int, help="a warp-specialised producer's registers (default: frontend/hw.py's, 24)")
  args = p.parse_args()
  if args.producer_registers:
    from mgpu_dsl.frontend import hw
    hw.PRODUCER_REGISTERS = args.producer_registers
  try:
    dev = target_device()
  except RuntimeError as e:
    sys.exit(str(e))
  print(f"jax {jax.__version__}, deviceless compile for {dev.device_kind} (sm_90a)")
  head, rows = (attention if args.what == "attention" else examples)(args)
  print(table(head, rows))


if __name__ == "__main__":
  main()
