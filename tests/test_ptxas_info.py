"""mg.ptxas_info: ptxas's registers, spills and wgmma serialisation of each kernel a jitted function compiles
(session 54). The parser runs on ptxas's own text; the compile needs a Hopper GPU or JAX's CUDA plugin (a
compile-only H100), and says what to install where neither is here."""
import jax
import jax.numpy as jnp
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl import ptxas

S = jax.ShapeDtypeStruct

REPORT = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'forward_kernel_mosaic_gpu_kernel' for 'sm_90a'
ptxas info    : Function properties for forward_kernel_mosaic_gpu_kernel
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 16 barriers, 1 bytes smem
ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized due to insufficient \
register resources for the function 'deferred_kernel_mosaic_gpu_kernel'
ptxas warning : Registers are spilled to local memory in function 'deferred_kernel_mosaic_gpu_kernel', 52 bytes spill \
stores, 80 bytes spill loads
ptxas info    : Compiling entry function 'deferred_kernel_mosaic_gpu_kernel' for 'sm_90a'
ptxas info    : Function properties for deferred_kernel_mosaic_gpu_kernel
    56 bytes stack frame, 52 bytes spill stores, 80 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 56 bytes cumulative stack size, 1 bytes smem
ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma \
instructions reading accumulator registers of  a wgmma between start and end of the pipeline stage in the function \
'overlap_mosaic_gpu_kernel'
ptxas info    : Compiling entry function 'overlap_mosaic_gpu_kernel' for 'sm_90a'
ptxas info    : Used 187 registers, used 16 barriers, 1 bytes smem
"""


def test_the_report_of_each_kernel_is_read_from_ptxas_text():
  got = ptxas.parse(REPORT)
  assert [i.kernel for i in got] == ["forward_kernel", "deferred_kernel", "overlap"]
  fwd, dfr, ovl = got
  assert (fwd.registers, fwd.spill_stores, fwd.spill_loads, fwd.serialized) == (168, 0, 0, None)
  assert (dfr.registers, dfr.spill_stores, dfr.spill_loads) == (255, 52, 80)
  assert dfr.serialized == "C7512: insufficient register resources"
  assert ovl.serialized.startswith("C7514: non wgmma instructions reading accumulator registers")
  assert ptxas.parse("no ptxas here") == []


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.float32))
def small_matmul(a, b, c):
  a_s, b_s = ml.smem(a.shape, a.dtype), ml.smem(b.shape, b.dtype)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = ml.dot(a_s, b_s)


def _can_compile() -> bool:
  try:
    ptxas.target_device()
    return True
  except RuntimeError:
    return False


def test_without_a_gpu_or_the_cuda_plugin_it_says_what_to_install():
  if _can_compile():
    pytest.skip("this machine compiles for Hopper")
  with pytest.raises(RuntimeError) as info:
    mg.ptxas_info(small_matmul, S((128, 64), jnp.float16), S((64, 128), jnp.float16))
  assert f"jax-cuda12-plugin=={jax.__version__}" in str(info.value)
  assert "nvidia-cuda-nvcc-cu12" in str(info.value)


def test_a_small_matmul_compiles_without_spills_or_serialisation():
  if not _can_compile():
    pytest.skip("needs a Hopper GPU or JAX's CUDA plugin (benchmarks/ptxas_report.py's docstring)")
  infos = mg.ptxas_info(jax.jit(lambda a, b: small_matmul(a, b)), S((128, 64), jnp.float16),
                        S((64, 128), jnp.float16))
  assert [i.kernel for i in infos] == ["small_matmul"]
  assert 32 <= infos[0].registers <= 255
  assert (infos[0].spill_stores, infos[0].serialized) == (0, None)

