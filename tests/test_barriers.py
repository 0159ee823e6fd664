"""Named barriers are NVVM's convergent ops, never inline assembly (lowering/barriers.py).

A row-masked (300, 1) int8 tile flattened through an SMEM relayout hung on the H200: the masked
load before the barrier and the masked store after it test the same condition, so LLVM's jump
threading copied the barrier (inline assembly, not convergent) into both arms, and the threads of
the warp that straddles row 300 waited at two different `bar.sync` instructions. Mosaic GPU's own
warpgroup barriers (its reductions through SMEM, its TMA stores) are rewritten too.
"""
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mlir_barriers import named_barriers

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/benchmarks")
from layout_kernels import masked_flatten    # noqa: E402
import reduce_kernels as rk                  # noqa: E402
import test_warp_specialize as ws            # noqa: E402

S = jax.ShapeDtypeStruct
ASM_BARRIER = re.compile(r'llvm\.inline_asm[^\n]*"\s*bar\.(sync|arrive)')


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), jnp.float32), grid=(1,), block=256)
def column_sums_two_warpgroups(x, out):
  out[...] = ml.sum(x[...].astype(jnp.float32), axis=0)


CASES = [
    ("masked relayout", lambda: masked_flatten.mlir(S((300, 1), jnp.int8), R=128)),
    ("reduction through SMEM", lambda: rk.column_sums.mlir(S((256, 128), jnp.float32))),
    ("two warpgroups' reduction", lambda: column_sums_two_warpgroups.mlir(S((256, 128), jnp.float32))),
    ("warp-specialised matmul", lambda: ws.tiles_matmul.mlir(S((256, 256), jnp.float16), S((256, 256), jnp.float16))),
]


@pytest.mark.parametrize("name,text", CASES, ids=[c[0] for c in CASES])
def test_no_barrier_is_left_as_inline_assembly(name, text):
  text = text()
  assert named_barriers(text), name             # the kernel has barriers, all of them NVVM ops
  assert not ASM_BARRIER.search(text), name


def test_the_masked_relayout_keeps_its_barrier_count_and_threads():
  text = masked_flatten.mlir(S((300, 1), jnp.int8), R=128)
  assert named_barriers(text) == [("sync", None, 128)]      # warpgroup 0's barrier, number 1 at run time
  jax.export.export(jax.jit(lambda x: masked_flatten(x, R=128)), platforms=["cuda"])(S((300, 1), jnp.int8))


@pytest.mark.gpu
@pytest.mark.parametrize("rows,dtype", [(300, jnp.int8), (100, jnp.uint8), (300, jnp.float8_e4m3fn)])
def test_gpu_a_masked_relayout_of_a_narrow_byte_tile_finishes_and_matches(rows, dtype):
  x = jnp.asarray(np.arange(rows) % 100, dtype).reshape(rows, 1)
  got = jax.block_until_ready(masked_flatten(x, R=128))
  np.testing.assert_array_equal(np.asarray(got).astype(np.float32), np.asarray(x).reshape(-1).astype(np.float32))
