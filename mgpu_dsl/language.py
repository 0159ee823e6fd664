"""The kernel language: `from mgpu_dsl import language as ml`. See docs/language.md."""
from .frontend.language import *  # noqa: F401,F403
from .frontend.language import (  # noqa: F401
    BUILTINS, DSlice, abs, arange, bfloat16, bool_, cast, cluster_ref, cluster_sync, constexpr,
    copy, dot, ds, exp, exp2, float8_e4m3fn, float8_e5m2, float16, float32, full, grouped_ids, inline, Inline, int8, int16, int32,
    int64, log, maximum, minimum, num_programs, program_id, range, rsqrt, smem, sqrt, static_range,
    tanh, uint8, uint16, uint32, where, zeros)
