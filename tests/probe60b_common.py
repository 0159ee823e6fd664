"""Probe 60b's corpus (tests/test_probe60b.py): what its case modules share: the registry of cases, the mode
(interpret mode, or the GPU when the twin empties `_MODE`) and the libraries' aliases as their authors import them."""
import types

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from mgpu_dsl import language as tl
from probe_util import export


S = jax.ShapeDtypeStruct
BF16 = ml_dtypes.bfloat16
F32 = jnp.float32
_MODE = {"interpret": True}           # the GPU twin empties it: the same checks on the device
CASES = {}
tanh = tl.extra.cuda.libdevice.tanh   # Liger's `from triton.language.extra.libdevice import tanh`
rsqrt = tl.extra.cuda.libdevice.rsqrt
libdevice = tl.extra.cuda.libdevice
tle = types.SimpleNamespace(program_id=lambda axis: tl.program_id(axis).to(tl.int64))   # FlagGems' tle module


def _export(kernel, *args, **kw):
  if _MODE:
    export(kernel, *args, **kw)


def close(a, b, tol=1e-5):
  np.testing.assert_allclose(np.asarray(a, np.float32), np.asarray(b, np.float32), rtol=tol, atol=tol)
