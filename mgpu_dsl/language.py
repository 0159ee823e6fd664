"""The kernel language: `from mgpu_dsl import language as ml`. See docs/language.md."""
from .frontend.language import *  # noqa: F401,F403
from .frontend.language import __all__  # noqa: F401
