"""Kernels of a module that imports the language as Triton's `tl` (tests/test_probe30d.py)."""
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as tl


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def staged_range(x, out):
  acc = tl.zeros((128,), tl.float32)
  for i in tl.range(0, 4, num_stages=2):
    acc += x.at[tl.ds(i * 128, 128)][...]
  out.at[tl.ds(0, 128)][...] = acc
  out.at[tl.ds(128, 384)][...] = x.at[tl.ds(128, 384)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def unrolled_range(x, out):
  acc = tl.zeros((128,), tl.float32)
  for i in tl.range(0, 4, loop_unroll_factor=2):
    acc += x.at[tl.ds(i * 128, 128)][...]
  out.at[tl.ds(0, 128)][...] = acc
  out.at[tl.ds(128, 384)][...] = x.at[tl.ds(128, 384)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def misspelt_range(x, out):
  acc = tl.zeros((128,), tl.float32)
  for i in tl.range(0, 4, stage=2):
    acc += x.at[tl.ds(i * 128, 128)][...]
  out[...] = x[...] + acc[0]


@mg.mgpu_kernel(out_shape=lambda x, seed: x, grid=(1,))
def seed_ref(x, seed, out):
  out[...] = x[...] * tl.rand(seed, tl.arange(128)).astype(jnp.float32)
