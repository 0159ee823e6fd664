"""What a kernel call becomes on a platform other than CUDA: a KernelError at the user's line.

Mosaic GPU registers its custom call for "cuda" only, so `jax.jit` of a kernel on a machine
without a GPU used to fail inside JAX ("MLIR translation rule for primitive 'mosaic_gpu_p'
not found for platform cpu"). The rule below, registered for the CPU (and ROCm and TPU, for an
export to them), raises NoGpuError where
the kernel is (its first line, read from the module's locations), with the ways to run or
inspect it there (an eager call fails earlier, at the call: mgpu_dsl/kernel.py).
`jax.export(..., platforms=["cuda"])` is unaffected: it lowers with Mosaic GPU's own rule.
"""
from __future__ import annotations

import os
import re

from jax._src.interpreters import mlir as jax_mlir
from jax.experimental.mosaic.gpu import core as mgpu_core

from ..frontend import errors as E
from ..frontend.loc import Loc

_OURS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (E, mgpu_core))  # frontend, Mosaic
_OURS += (os.path.dirname(os.path.abspath(__file__)) + os.sep,)                              # lowering


def no_gpu_error(name: str, platform: str, loc: Loc, export: bool = False) -> E.KernelError:
  """`export`: the call is lowered for jax.export (to `platform`), not compiled to run here."""
  if "cuda" in platform:           # an export for several platforms, cpu among them
    return E.NoGpuError(
        f"{name} runs on an NVIDIA Hopper GPU (it is a Mosaic GPU kernel), but the call is being compiled"
        f" for {platform}: a Mosaic GPU kernel has no lowering for the other platforms", loc,
        hint="export for platforms=['cuda'] alone (also where the call sits in jax.lax.platform_dependent's cuda"
             " branch: JAX lowers every branch for every platform of an export, so export the function once per"
             " platform); interpret mode (interpret=True) runs on the CPU through host callbacks, which jax.export"
             " cannot serialise: export a jnp version of the function for the CPU")
  if platform not in ("cpu", "this platform") or export:     # an export (or a backend) for another platform
    return E.NoGpuError(
        f"{name} runs on an NVIDIA Hopper GPU (it is a Mosaic GPU kernel), but the call is being compiled"
        f" for {platform}: a Mosaic GPU kernel has no lowering there", loc,
        hint="export for platforms=['cuda']; interpret=True (or MGPU_DSL_INTERPRET=1) runs it on the CPU with"
             " numpy" + (" when the function is called (jax.export cannot hold interpret mode's host callbacks)"
                         if export else ""))
  return E.NoGpuError(
      f"{name} runs on an NVIDIA Hopper GPU (it is a Mosaic GPU kernel), but the call is being compiled"
      f" for {platform}: JAX sees no GPU here", loc,
      hint="pass interpret=True (or set MGPU_DSL_INTERPRET=1) to run it on the CPU with numpy;"
           " jax.export(jax.jit(f), platforms=['cuda']) and kernel.mlir(*specs) work without a GPU")


KERNEL_LOCS: dict = {}    # kernel name -> its def's location, recorded as each kernel is built

_FILE_LOC = re.compile(r'loc\("([^"]+)":(\d+):(\d+)')


def kernel_loc(module) -> tuple[str, Loc]:
  """(kernel name, its `def` line), read from its Mosaic GPU module: every op of a kernel is
  emitted under the location of the kernel line it comes from, the preamble under the def's."""
  import linecache
  name = "the kernel"
  try:
    name = str(module.operation.attributes["sym_name"]).strip('"')
  except (KeyError, AttributeError):
    pass
  found = [(m.group(1), int(m.group(2)), int(m.group(3)))
           for m in _FILE_LOC.finditer(str(module.operation.get_asm(enable_debug_info=True)))
           if not os.path.abspath(m.group(1)).startswith(_OURS)]
  if not found:
    return name, Loc("<unknown>", 0, 0)
  path = found[0][0]                          # the kernel's file; its first line there is the def
  line, col = min((ln, c) for p, ln, c in found if p == path)
  return name, Loc(path, line, max(col - 1, 0), source_line=linecache.getline(path, line))


def _lower_without_gpu(ctx, *args, module, **params):
  platform = ", ".join(ctx.module_context.platforms) or "this platform"
  name, loc = kernel_loc(module)
  loc = KERNEL_LOCS.get(name, loc)     # the def: the module's first line may be an @ml.inline helper's
  params = getattr(ctx.module_context, "lowering_parameters", None)
  e = no_gpu_error(name, platform, loc, export=bool(getattr(params, "for_export", False)))
  import jax
  from ..frontend.loc import user_loc
  at = user_loc(skip=(jax,))      # the user's jax.jit(f)(x), f.lower(x) or export that compiles it (lowering runs in it)
  if getattr(at, "lineno", 0) and (at.filename, at.lineno) != (loc.filename, loc.lineno):
    e.notes = tuple(e.notes) + (f"{at}: the call compiled for {platform}",)
  raise e


def register() -> None:
  for platform in ("cpu", "rocm", "tpu"):      # everywhere but cuda, whose rule is Mosaic GPU's own
    jax_mlir.register_lowering(mgpu_core.mosaic_gpu_p, _lower_without_gpu, platform)
