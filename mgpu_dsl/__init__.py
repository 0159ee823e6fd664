"""mgpu_dsl: a Triton-style Python DSL for NVIDIA Hopper that compiles to Mosaic GPU.

    import mgpu_dsl as mg
    from mgpu_dsl import language as ml

The work lives in `mgpu_dsl.frontend` (source -> typed IR, checks) and
`mgpu_dsl.lowering` (typed IR -> Mosaic GPU -> JAX); this module re-exports.
"""
__version__ = "0.1.0"

from .kernel import KernelFunction as KernelFunction
from .kernel import mgpu_kernel as mgpu_kernel
from .check import check_specs as check_specs
from .bench import bench as bench
from .bench import bench_wall as bench_wall
from .autotune import Autotuner as Autotuner
from .autotune import autotune as autotune
from .device import num_sms as num_sms
from .ptxas import PtxasInfo as PtxasInfo
from .ptxas import ptxas_info as ptxas_info
from . import language as language
from .frontend import errors as _errors
from . import triton_names as _triton_names

__all__ = list(_errors.__all__) + [     # every KernelError subclass (and the warnings), then the rest
    "KernelFunction", "mgpu_kernel", "check_specs", "bench", "bench_wall", "Autotuner", "autotune", "num_sms",
    "PtxasInfo", "ptxas_info", "language"]
globals().update((name, getattr(_errors, name)) for name in _errors.__all__)     # `from .frontend.errors import *`

__getattr__ = _triton_names.module_getattr(__name__)   # @mg.jit, mg.Config, mg.cdiv: what to write
