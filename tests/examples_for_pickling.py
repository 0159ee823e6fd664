"""A module-level kernel and @ml.inline helper for tests/test_probe29b.py's pickling test."""
import mgpu_dsl as mg
from mgpu_dsl import language as ml


@ml.inline
def twice(v):
  return v * 2


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def double_it(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = twice(x.at[ml.ds(i * 128, 128)][...])
