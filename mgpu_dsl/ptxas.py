"""What ptxas makes of a kernel: registers a thread, spills, and whether it serialised the kernel's wgmma.

    infos = mg.ptxas_info(jax.jit(lambda a, b: matmul(a, b, bn=256)), a_spec, b_spec)
    for i in infos:
        print(i.kernel, i.registers, i.spill_stores, i.serialized)

Triton users read a compiled kernel's `n_regs` and `n_spills`; this is the same for any jitted function that calls
mgpu_dsl kernels (each Mosaic GPU kernel it compiles is one `PtxasInfo`), and it also reports ptxas's C7510-C7515
notes, "wgmma.mma_async instructions are serialized": every tensor-core product of such a kernel waits for the one
before, whatever order the kernel issues them in (too many accumulator registers live at once, or an accumulator
touched while its product runs), often the largest cost a kernel can hide.

On a machine with a Hopper GPU the function is compiled for it. Without one, JAX compiles for an H100 it does not
have (its deviceless ahead-of-time compile): that needs JAX's CUDA plugin and the CUDA compiler's wheels beside jax,

    pip install "jax-cuda12-plugin==$V" "jax-cuda12-pjrt==$V" nvidia-cuda-nvcc-cu12 nvidia-cuda-runtime-cu12 \\
        nvidia-nvjitlink-cu12        # V: the installed jax's version

and `ptxas_info` says so (a RuntimeError naming them) where they are missing. The figures are ptxas's own: on jax
0.11.2 with ptxas 12.9 they equal the H200's for the same kernels (fifty-fourth session, docs/benchmarks.md).
"""
from __future__ import annotations

import contextlib
import ctypes.util
import dataclasses
import os
import re
import sys
import tempfile

H100_TARGET = """gpu_device_info { threads_per_block_limit: 1024 threads_per_warp: 32 shared_memory_per_block: 49152
  shared_memory_per_core: 233472 threads_per_core_limit: 2048 core_count: 132 fpus_per_core: 128
  block_dim_limit_x: 2147483647 block_dim_limit_y: 65535 block_dim_limit_z: 65535 memory_bandwidth: 3352320000000
  l2_cache_size: 52428800 clock_rate_ghz: 1.98 device_memory_size: 84929347584 shared_memory_per_block_optin: 232448
  cuda_compute_capability { major: 9 } registers_per_core_limit: 65536 registers_per_block_limit: 65536 }
runtime_version: { major: 12 minor: 8 patch: 0 } platform_name: "CUDA" dnn_version_info { major: 9 minor: 7 }
device_description_str: "NVIDIA H100 80GB HBM3"
"""
_SERIAL = re.compile(r"\((C75\d\d)\) Potential Performance Loss: wgmma.mma_async instructions are serialized due to"
                     r" (.*?) (?:in|for) the function '(\w+)'")
_ENTRY = re.compile(r"Compiling entry function '(\w+)'")
_USED = re.compile(r"Used (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_SUFFIX = "_mosaic_gpu_kernel"

if ctypes.util.find_library("cuda") is None:
  # No CUDA driver: JAX's CUDA plugin (where installed) can only compile, and registers its compile-only topology
  # only if its runtime version check is skipped, which it must be before JAX first looks for its backends.
  os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")


@dataclasses.dataclass(frozen=True)
class PtxasInfo:
  kernel: str             # the kernel function's name
  registers: int          # a thread's, at launch (a warp-specialised kernel's compute warpgroups get more)
  spill_stores: int       # bytes a thread
  spill_loads: int
  serialized: str | None  # ptxas's note ("C7512: insufficient register resources") or None


def parse(text: str) -> list[PtxasInfo]:
  """The PtxasInfo of every kernel in a ptxas report (`ptxas -v`, as MOSAIC_GPU_DUMP_PTXAS=1 prints it)."""
  serial = {m.group(3): f"{m.group(1)}: {m.group(2)}" for m in _SERIAL.finditer(text)}
  out, name, spill = [], None, (0, 0)
  for line in text.splitlines():
    if (m := _ENTRY.search(line)):
      name, spill = m.group(1), (0, 0)
    elif name and (m := _SPILL.search(line)) and "stack frame" in line:
      spill = int(m.group(1)), int(m.group(2))
    elif name and (m := _USED.search(line)):
      out.append(PtxasInfo(name.removesuffix(_SUFFIX), int(m.group(1)), *spill, serial.get(name)))
      name = None
  return out


@contextlib.contextmanager
def captured():
  """What the process writes to its stdout and stderr meanwhile (ptxas's report comes from C++), in a list."""
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


def target_device():
  """The device to compile for: the first Hopper GPU here, else a compile-only H100 (RuntimeError without JAX's CUDA
  plugin)."""
  import jax
  try:
    gpus = [d for d in jax.devices("gpu") if "H100" in d.device_kind or "H200" in d.device_kind or "H800" in
            d.device_kind or "GH200" in d.device_kind]
  except RuntimeError:
    gpus = []
  if gpus:
    return gpus[0]
  from jax.experimental.topologies import get_topology_desc
  try:
    return get_topology_desc("mgpu_dsl", "cuda", target_config=H100_TARGET, topology="1x1x1").devices[0]
  except Exception as e:
    raise RuntimeError(
        f"mg.ptxas_info needs a Hopper GPU or, on a machine without one, JAX's CUDA plugin for a compile-only H100"
        f" ({type(e).__name__}: {str(e).splitlines()[0][:160]}): pip install jax-cuda12-plugin=={jax.__version__}"
        f" jax-cuda12-pjrt=={jax.__version__} nvidia-cuda-nvcc-cu12 nvidia-cuda-runtime-cu12 nvidia-nvjitlink-cu12"
        f" (and import mgpu_dsl before JAX first looks for its devices)") from None


def ptxas_info(fn, *specs) -> list[PtxasInfo]:
  """Compile the jitted `fn` (a `jax.jit` of a function calling mgpu_dsl kernels, or a kernel itself) for `specs`
  (jax.ShapeDtypeStructs) and return ptxas's figures for each Mosaic GPU kernel it compiled. A kernel the process
  compiled before (for a GPU here, the same specialisation) may not be compiled again, and then has no entry."""
  import jax
  device = target_device()
  sharding = jax.sharding.SingleDeviceSharding(device)
  placed = [jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding) if hasattr(s, "shape") else s for s in specs]
  jitted = fn if hasattr(fn, "trace") else jax.jit(fn)
  old = os.environ.get("MOSAIC_GPU_DUMP_PTXAS")
  os.environ["MOSAIC_GPU_DUMP_PTXAS"] = "1"
  try:
    with captured() as out:
      jitted.trace(*placed).lower(lowering_platforms=("cuda",)).compile()
  finally:
    if old is None:
      os.environ.pop("MOSAIC_GPU_DUMP_PTXAS", None)
    else:
      os.environ["MOSAIC_GPU_DUMP_PTXAS"] = old
  return parse(out[0])
