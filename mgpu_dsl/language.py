"""The kernel language: `from mgpu_dsl import language as ml`. See docs/language.md."""
from .frontend import language as _language
from .triton_names import module_getattr as _module_getattr

__all__ = _language.__all__
globals().update((name, getattr(_language, name)) for name in __all__)    # `from .frontend.language import *`
extra, libdevice, math = _language.extra, _language.libdevice, _language.math    # Triton's tl.math namespaces: not in __all__

__getattr__ = _module_getattr(__name__)     # @ml.jit, ml.Config: what to write instead
