"""What ptxas makes of each Mosaic GPU kernel, on a machine without a GPU (issues #9 and #10).

    python benchmarks/ptxas_report.py attention [--seq 4096] [--head-dim 64] [--causal full] [--set field=value,...]
    python benchmarks/ptxas_report.py examples [FILE.py ...]

Compiles deviceless (JAX's AOT compile for a CUDA topology described by a GPU target config: an H100's, sm_90a)
and reports, for every kernel ptxas compiles, its registers a thread, its spills and whether ptxas serialised its
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
import contextlib
import dataclasses
import importlib.util
import os
import re
import sys
import tempfile

os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")
os.environ["MOSAIC_GPU_DUMP_PTXAS"] = "1"
os.environ.setdefault("MGPU_DSL_CACHE_DIR", "off")     # a cached kernel is not compiled again: no report

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.append(os.path.join(HERE, "..", "examples"))
from common import table  # noqa: E402

H100 = """gpu_device_info { threads_per_block_limit: 1024 threads_per_warp: 32 shared_memory_per_block: 49152
  shared_memory_per_core: 233472 threads_per_core_limit: 2048 core_count: 132 fpus_per_core: 128
  block_dim_limit_x: 2147483647 block_dim_limit_y: 65535 block_dim_limit_z: 65535 memory_bandwidth: 3352320000000
  l2_cache_size: 52428800 clock_rate_ghz: 1.98 device_memory_size: 84929347584 shared_memory_per_block_optin: 232448
  cuda_compute_capability { major: 9 } registers_per_core_limit: 65536 registers_per_block_limit: 65536 }
runtime_version: { major: 12 minor: 8 patch: 0 } platform_name: "CUDA" dnn_version_info { major: 9 minor: 7 }
device_description_str: "NVIDIA H100 80GB HBM3"
"""
SERIAL = re.compile(r"\((C75\d\d)\) Potential Performance Loss: wgmma.mma_async instructions are serialized due to (.*?)"
                    r"(?: in| for)? the function '(\w+)'")
ENTRY = re.compile(r"Compiling entry function '(\w+)'")
USED = re.compile(r"Used (\d+) registers")
SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def device():
  """The compile-only device of an H100 topology; exits with the setup to install where JAX has no CUDA plugin."""
  from jax.experimental.topologies import get_topology_desc
  try:
    return get_topology_desc("ptxas_report", "cuda", target_config=H100, topology="1x1x1").devices[0]
  except Exception as e:     # no plugin, or no CUDA runtime for it
    sys.exit(f"no deviceless CUDA compile here ({type(e).__name__}: {str(e).splitlines()[0][:120]}); install"
             f" jax-cuda12-plugin and jax-cuda12-pjrt =={jax.__version__}, nvidia-cuda-nvcc-cu12,"
             f" nvidia-cuda-runtime-cu12 and nvidia-nvjitlink-cu12 (see this script's docstring)")


@contextlib.contextmanager
def captured():
  """What the process writes to its stdout and stderr (ptxas's report comes from C++), as a list of one string."""
  out = []
  sys.stdout.flush()
  sys.stderr.flush()
  with tempfile.TemporaryFile(mode="w+") as f:
    saved = os.dup(1), os.dup(2)
    os.dup2(f.fileno(), 1)
    os.dup2(f.fileno(), 2)
    try:
      yield out
    finally:
      sys.stdout.flush()
      sys.stderr.flush()
      os.dup2(saved[0], 1)
      os.dup2(saved[1], 2)
      os.close(saved[0])
      os.close(saved[1])
      f.seek(0)
      out.append(f.read())


def parse(text: str) -> list[tuple]:
  """(kernel, registers, spilled bytes stored / loaded, serialisation) for each kernel ptxas compiled in `text`."""
  serial = {m.group(3): f"{m.group(1)}: {m.group(2)}" for m in SERIAL.finditer(text)}
  rows, name = [], None
  for line in text.splitlines():
    if (m := ENTRY.search(line)):
      name = m.group(1).removesuffix("_mosaic_gpu_kernel")
      spill = "0 / 0"
    elif name and (m := SPILL.search(line)) and "stack frame" in line:
      spill = f"{m.group(1)} / {m.group(2)}"
    elif name and (m := USED.search(line)):
      rows.append((name, m.group(1), spill, serial.get(name + "_mosaic_gpu_kernel", "no")))
      name = None
  return rows


def compile_report(fn, *specs) -> list[tuple]:
  with captured() as out:
    try:
      fn.trace(*specs).lower(lowering_platforms=("cuda",)).compile()
      err = None
    except Exception as e:     # a kernel that does not build here: its error in the report, the others go on
      err = f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"
  rows = parse(out[0])
  return rows + ([("(error)", "", "", err)] if err else [])


def attention(args, dev):
  spec = importlib.util.spec_from_file_location("attention_example", os.path.join(HERE, "..", "examples",
                                                                                  "attention.py"))
  ex = importlib.util.module_from_spec(spec)
  sys.modules[spec.name] = ex
  spec.loader.exec_module(ex)
  over = {k.strip(): ast.literal_eval(v) for k, v in (kv.split("=") for kv in (args.set or "").split(",") if kv)}
  sh = jax.sharding.SingleDeviceSharding(dev)
  rows = []
  for d in args.head_dim or (64, 128):
    for causal in [m == "causal" for m in args.causal or ("full", "causal")]:
      cfg = dataclasses.replace(ex.default_config(d, causal, args.seq), **over)
      x = jax.ShapeDtypeStruct((16384 // args.seq, args.seq, 16, d), jnp.float16, sharding=sh)
      loss = lambda q, k, v, cfg=cfg, causal=causal: ex.attention(q, k, v, causal, config=cfg).astype(
          jnp.float32).sum()
      for r in compile_report(jax.jit(jax.grad(loss, argnums=(0, 1, 2))), x, x, x):
        rows.append((d, "causal" if causal else "full") + r)
        print(table(HEAD_ATTN, rows[-1:]), flush=True)
  return HEAD_ATTN, rows


def examples(args, dev):
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
  sh = jax.sharding.SingleDeviceSharding(dev)
  place = lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh) if hasattr(s, "shape") else s
  rows = []
  for kernel, entries in C._DECLARED.items():
    for specs, constexprs in entries:
      arrays = [place(s) for s in specs]
      fn = jax.jit(lambda *a, kernel=kernel, constexprs=constexprs: kernel(*a, **constexprs))
      for r in compile_report(fn, *arrays):
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
  p.add_argument("--producer-registers", type=int, help="a warp-specialised producer's registers (default: 40)")
  args = p.parse_args()
  if args.producer_registers:
    from mgpu_dsl.frontend import hw
    hw.PRODUCER_REGISTERS = args.producer_registers
  dev = device()
  print(f"jax {jax.__version__}, deviceless compile for {dev.device_kind} (sm_90a)")
  head, rows = (attention if args.what == "attention" else examples)(args, dev)
  print(table(head, rows))


if __name__ == "__main__":
  main()
