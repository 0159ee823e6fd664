"""Facts about the GPU kernels run on, for grid callables (`mg.num_sms()`)."""
from __future__ import annotations

import functools

from .frontend import hw


@functools.cache
def num_sms() -> int:
  """The number of streaming multiprocessors (SMs) of the GPU: 132 on an H200.

  For persistent grids, about one or two CTAs per SM walking the tiles in a loop:

      grid=lambda x: (min(num_tiles(x), 2 * mg.num_sms()),)

  It is the default device's multiprocessor count when that is a GPU, and the H100/H200's
  132 otherwise (interpret mode, or building kernels on a machine without a GPU), so a kernel
  is specialised the same way on the CPU as on the H200.
  """
  import jax
  try:
    device = jax.devices()[0]
  except RuntimeError:
    return hw.NUM_SMS
  count = getattr(device, "core_count", None) if device.platform == "gpu" else None
  return int(count) if count else hw.NUM_SMS
