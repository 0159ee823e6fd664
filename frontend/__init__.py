"""mgpu_dsl's frontend: Python source -> typed kernel IR. Knows nothing of JAX or MLIR."""
from .compile import ArgSpec, parse, trace
from .errors import KernelError
from .ir import Kernel, dump

__all__ = ["ArgSpec", "Kernel", "KernelError", "dump", "parse", "trace"]
