"""The kernel language: `from mgpu_dsl import language as ml`. See docs/language.md."""
from .frontend.language import *  # noqa: F401,F403
from .frontend.language import __all__  # noqa: F401
from .frontend.language import extra, libdevice, math  # noqa: F401  (Triton's tl.math namespaces: not in __all__)
from .triton_names import module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr(__name__)     # @ml.jit, ml.Config: what to write instead
