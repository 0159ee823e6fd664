"""A TMA window wholly past the end of a 1-D array whose size is no whole number of 16-byte units faults on the GPU
(an illegal instruction: probe 58b's memory fuzzer, seven kernels in 700 on an H100, session 45); it is an
IndexOutOfBoundsError at the copy (frontend/tma_tail.py). Windows partly past the end, and arrays of whole units,
compute as before."""
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 512),))
def double_512(x, o):
  i = ml.program_id(0)
  xs = ml.smem((512,))
  ml.copy(x.at[ml.ds(i * 512, 512)], xs)           # the copy
  offs = i * 512 + ml.arange(512)
  ml.store(o.at[offs], xs[...] * 2, mask=offs < o.shape[0])


def _line(fn, marker):
  src, first = inspect.getsourcelines(fn.fn)
  k = next(k for k, t in enumerate(src) if marker in t)
  return first + k, src[k].index("ml.copy")


@pytest.mark.parametrize("n,dtype,piece", [(579, jnp.float16, "768:1024"), (1043, jnp.int32, "1280:1536"),
                                           (767, jnp.float32, "768:1024")])
def test_a_piece_wholly_past_the_end_of_an_array_of_no_whole_16_byte_units_is_refused_at_the_copy(n, dtype, piece):
  with pytest.raises(mg.IndexOutOfBoundsError) as info:
    double_512.check(jax.ShapeDtypeStruct((n,), dtype))
  e = info.value
  line, col = _line(double_512, "# the copy")
  assert (e.lineno, e.col_offset, e.code) == (line, col, "MG203"), (e.lineno, e.col_offset, e.code)
  item = jnp.dtype(dtype).itemsize
  assert f"TMA load of x[{piece}]" in e.message and "wholly past the end of x" in e.message, e.message
  assert f"({n} elements of {item} bytes, {n * item} bytes" in e.message, e.message
  unit = 16 // item
  assert f"pad x to a multiple of {unit} elements ({-(-n // unit) * unit}" in e.hint and "mask=offs < " in e.hint


@pytest.mark.parametrize("n,dtype", [(592, jnp.float16), (1092, jnp.float32), (1378, jnp.int8), (947, jnp.int8),
                                     (300, jnp.float16)])
def test_windows_partly_past_the_end_or_over_whole_units_compute(n, dtype):
  # (592 float16 and 1092 float32: whole 16-byte units; 1378 and 947 int8: no piece wholly past the end; 300: one
  # program, its second piece partly inside)
  x = (np.arange(n) % 100).astype(dtype)
  np.testing.assert_array_equal(np.asarray(double_512(x, interpret=True)), x * 2)


@pytest.mark.gpu
@pytest.mark.parametrize("n,dtype", [(592, jnp.float16), (1092, jnp.float32), (1378, jnp.int8), (947, jnp.int8)])
def test_windows_partly_past_the_end_on_the_gpu(n, dtype):
  x = (np.arange(n) % 100).astype(dtype)
  np.testing.assert_array_equal(np.asarray(jax.jit(double_512)(x)), x * 2)
