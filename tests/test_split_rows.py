"""Strided tensors split by rows among warpgroups (Layout.wgs, frontend/layouts.py
split_classes): with block=256 or more each warpgroup holds and computes its own rows of a
tensor that only loads, stores, elementwise math, full reductions and loop carries touch;
full reductions combine the warpgroups' parts through SMEM."""
import os
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import layernorm as LN  # noqa: E402
import softmax as SM  # noqa: E402

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _scalars(x):
  return (S((1,), x.dtype), S((1,), x.dtype), S((1,), x.dtype))


@mg.mgpu_kernel(out_shape=_scalars, block=lambda x, *, warpgroups: 128 * warpgroups)
def whole_reductions(x, total, top, bottom, *, warpgroups: ml.constexpr):
  v = x[...]
  total[0] = ml.sum(v)
  top[0] = ml.max(v)
  bottom[0] = ml.min(v)


@mg.mgpu_kernel(out_shape=lambda x, *, rows: S((rows, x.shape[1]), x.dtype), block=256)
def row_block_sums(x, out, *, rows: ml.constexpr):
  """Elementwise sum of x's blocks of `rows` rows, carried through a runtime loop."""
  acc = ml.zeros((rows, x.shape[1]), F32)
  for c in ml.range(x.shape[0] // rows):
    acc = acc + x.at[ml.ds(c * rows, rows), :][...].astype(F32)
  out[...] = acc.astype(out.dtype)


@mg.mgpu_kernel(out_shape=lambda x: S((256,), jnp.int32), block=256)
def iota_plus(x, out):
  out[...] = ml.arange(256) + x[...]


@mg.mgpu_kernel(out_shape=lambda x: x, block=256)
def scanned(x, out):
  out[...] = ml.cumsum(x[...], axis=1)


def _layouts(kernel, *specs, **meta):
  return [line.split("=")[0] for line in kernel.typed_ir(*specs, **meta).splitlines() if "tensor<" in line]


# ---------------------------------------------------------------- which tensors split
def test_two_warpgroups_split_a_softmax_rows_tiles_and_combine_its_reductions():
  spec = S((4, 128, 256), F32)
  text = SM.softmax_smem_rows.typed_ir(spec, chunks=8, warpgroups=2)
  tensors = [line for line in text.splitlines() if "tensor<" in line]
  assert tensors and all("strided/2wg>" in line for line in tensors)
  assert "wg>" not in SM.softmax_smem_rows.typed_ir(spec, chunks=8, warpgroups=1)


def test_what_cannot_split_stays_whole_in_every_warpgroup():
  # a scan moves elements between threads: its operand and result stay whole
  assert all("wg>" not in t for t in _layouts(scanned, S((16, 256), F32)))
  # 16 rows do not divide among 3 warpgroups
  assert all("wg>" not in t for t in _layouts(whole_reductions, S((16, 256), F32), warpgroups=3))
  # 64 elements a warpgroup: fewer than one a thread
  assert all("wg>" not in t for t in _layouts(whole_reductions, S((2, 64), F32), warpgroups=2))
  assert all("/2wg>" in t for t in _layouts(whole_reductions, S((2, 128), F32), warpgroups=2))
  # one warpgroup: nothing to split
  assert all("wg>" not in t for t in _layouts(whole_reductions, S((16, 256), F32), warpgroups=1))
  assert all("/4wg>" in t for t in _layouts(whole_reductions, S((16, 256), F32), warpgroups=4))


def test_a_split_reduction_exchanges_its_parts_between_two_barriers():
  spec = S((64, 256), F32)
  split = whole_reductions.mlir(spec, warpgroups=2)
  whole = whole_reductions.mlir(S((16, 256), F32), warpgroups=3)
  # three reductions, each: store its part, barrier, read both parts, barrier
  assert split.count("gpu.barrier") >= 6 > whole.count("gpu.barrier")
  assert "memref<" in split


# ---------------------------------------------------------------- interpret mode and export
def _rows_case(n, d, dtype):
  """(x with logits up to ~100, w, b, tolerance) for n rows of d elements."""
  k = rand.split(rand.key(0), 3)
  x = (rand.normal(k[0], (n, d), F32) * 30).astype(dtype)
  w, b = (rand.normal(k[i], (d,), dtype) for i in (1, 2))
  return x, w, b, 1e-5 if dtype == F32 else 2e-2


@pytest.mark.parametrize("dtype", [F32, jnp.bfloat16])
@pytest.mark.parametrize("warpgroups", [2, 4])
def test_split_long_rows_interpret(dtype, warpgroups):
  x, w, b, tol = _rows_case(2, 8192, dtype)
  y = SM.softmax_smem(x, chunks=4, warpgroups=warpgroups, interpret=True)
  np.testing.assert_allclose(np.asarray(y, np.float32), jax.nn.softmax(x.astype(F32), -1), atol=tol)
  y, mean, rstd = LN.layernorm_smem(x, w, b, chunks=4, warpgroups=warpgroups, interpret=True)
  np.testing.assert_allclose(np.asarray(y, np.float32), np.asarray(LN.reference(x, w, b), np.float32),
                             atol=tol * 10, rtol=tol)
  np.testing.assert_allclose(mean, x.astype(F32).mean(-1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_split_kernels_export_for_cuda(dtype):
  segs = 128 if dtype == "float32" else 64
  spec = S((8, segs, 256), dtype)
  for wg in (2, 4):
    jax.export.export(jax.jit(lambda x: SM.softmax_smem_rows(x, chunks=8, warpgroups=wg)),
                      platforms=["cuda"])(spec)
    wb = S((segs, 256), dtype)
    jax.export.export(jax.jit(lambda x, w, b: LN.layernorm_smem_rows(
        x, w, b, chunks=8, parts=1, eps=1e-5, warpgroups=wg)), platforms=["cuda"])(spec, wb, wb)
  for d in ("float32", "float16", "int32", "uint32"):
    jax.export.export(jax.jit(lambda x: whole_reductions(x, warpgroups=2)), platforms=["cuda"])(S((64, 256), d))
  jax.export.export(jax.jit(lambda x: row_block_sums(x, rows=8)), platforms=["cuda"])(S((64, 256), "bfloat16"))


def test_split_reductions_interpret():
  x = rand.normal(rand.key(3), (64, 256), F32)
  t, hi, lo = whole_reductions(x, warpgroups=2, interpret=True)
  np.testing.assert_allclose(t[0], x.sum(), rtol=1e-5)
  assert hi[0] == x.max() and lo[0] == x.min()
  out = row_block_sums(x, rows=8, interpret=True)
  np.testing.assert_allclose(out, x.reshape(8, 8, 256).sum(0), rtol=1e-5, atol=1e-5)
  y = iota_plus(jnp.arange(256, dtype=jnp.int32) * 3, interpret=True)
  np.testing.assert_array_equal(y, np.arange(256) * 4)


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [F32, jnp.bfloat16])
@pytest.mark.parametrize("warpgroups", [2, 4])
def test_split_long_rows_gpu(dtype, warpgroups):
  x, w, b, tol = _rows_case(64, 32768, dtype)
  for chunks in (8, 16):
    y = jax.jit(lambda x: SM.softmax_smem(x, chunks=chunks, warpgroups=warpgroups))(x)
    np.testing.assert_allclose(np.asarray(y, np.float32), jax.nn.softmax(x.astype(F32), -1), atol=tol)
    y, mean, rstd = jax.jit(lambda x, w, b: LN.layernorm_smem(x, w, b, chunks=chunks,
                                                              warpgroups=warpgroups))(x, w, b)
    np.testing.assert_allclose(np.asarray(y, np.float32), np.asarray(LN.reference(x, w, b), np.float32),
                               atol=tol * 10, rtol=tol)
    xf = x.astype(F32)
    np.testing.assert_allclose(mean, xf.mean(-1), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(rstd, jax.lax.rsqrt(xf.var(-1) + 1e-5), rtol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint32"])
@pytest.mark.parametrize("warpgroups", [2, 4])
def test_split_reductions_gpu(dtype, warpgroups):
  k = rand.key(4)
  if dtype.startswith(("int", "uint")):
    x = rand.randint(k, (64, 256), 0, 1000).astype(dtype)
  else:
    x = rand.normal(k, (64, 256), dtype)
  x = x.at[37, 5].set(3000 if dtype != "float16" else 3000.0)   # the max in warpgroup 1's rows
  t, hi, lo = jax.jit(lambda x: whole_reductions(x, warpgroups=warpgroups))(x)
  xf = np.asarray(x, np.float64)
  if dtype == "float16":
    np.testing.assert_allclose(float(t[0]), xf.sum(), rtol=2e-3, atol=0.5)
  elif dtype == "float32":
    np.testing.assert_allclose(float(t[0]), xf.sum(), rtol=1e-5, atol=1e-3)
  else:
    assert int(t[0]) == int(np.asarray(x).sum(dtype=np.asarray(x).dtype))
  assert float(hi[0]) == xf.max() and float(lo[0]) == xf.min()
  nan = jax.jit(lambda x: whole_reductions(x, warpgroups=warpgroups))(
      jnp.ones((64, 256), F32).at[60, 1].set(jnp.nan))
  assert np.isnan(nan[1][0]) and np.isnan(nan[2][0])


@pytest.mark.gpu
def test_split_loop_carries_and_iota_gpu():
  x = rand.normal(rand.key(5), (64, 256), F32)
  out = jax.jit(lambda x: row_block_sums(x, rows=8))(x)
  np.testing.assert_allclose(out, x.reshape(8, 8, 256).sum(0), rtol=1e-5, atol=1e-5)
  y = jax.jit(iota_plus)(jnp.arange(256, dtype=jnp.int32) * 3)
  np.testing.assert_array_equal(y, np.arange(256) * 4)


# ---------------------------------------------------------------- reductions sharing one scratch
@mg.mgpu_kernel(out_shape=lambda x, *, n, warpgroups: S((n,), F32), block=lambda x, *, n, warpgroups: 128 * warpgroups)
def many_sums(x, sums, *, n: ml.constexpr, warpgroups: ml.constexpr):
  """n full reductions beside a 192 KiB buffer: their scratches fit only in one shared place."""
  big = ml.smem((48, 1024), F32)
  big[...] = ml.full((48, 1024), 0.5, F32)
  t = x[...]
  for j in ml.static_range(n):
    sums[j] = ml.sum(t * float(j + 1)) + ml.max(big.at[ml.ds(j, 8), ml.ds(0, 128)][...])


def test_reductions_share_one_scratch_when_the_kernel_would_not_fit_otherwise():
  spec = S((64, 256), F32)
  for wg in (1, 2):
    text = many_sums.mlir(spec, n=8, warpgroups=wg)
    # each of the 16 reductions ends with a warpgroup barrier of its own before the next writes
    assert text.count("bar.sync") + text.count("nvvm.barrier") >= 16, wg
    jax.export.export(jax.jit(lambda x: many_sums(x, n=8, warpgroups=wg)), platforms=["cuda"])(spec)
  # a kernel that fits keeps one scratch a reduction, with no extra barrier
  small = many_sums.mlir(spec, n=1, warpgroups=1)
  assert small.count("bar.sync") + small.count("nvvm.barrier") < 16
  x = rand.normal(rand.key(6), (64, 256), F32)
  got = many_sums(x, n=8, warpgroups=2, interpret=True)
  np.testing.assert_allclose(got, [float(x.sum()) * (j + 1) + 0.5 for j in range(8)], rtol=1e-5, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("warpgroups", [1, 2])
def test_reductions_sharing_one_scratch_gpu(warpgroups):
  x = rand.normal(rand.key(6), (64, 256), F32)
  got = jax.jit(lambda x: many_sums(x, n=8, warpgroups=warpgroups))(x)
  np.testing.assert_allclose(got, [float(x.sum()) * (j + 1) + 0.5 for j in range(8)], rtol=1e-5, atol=1e-3)


@mg.mgpu_kernel(out_shape=lambda x, y: (S((x.shape[1],), F32), S((y.shape[1],), F32), S((8, 256), F32)), block=256)
def column_maxes_beside_a_big_buffer(x, y, a, b, z):
  """Two column reductions whose scratches differ in size (each warpgroup reduces the whole
  tile), beside a buffer that leaves room only for one shared scratch."""
  big = ml.smem((218, 256), F32)
  big[...] = ml.full((218, 256), 1.0, F32)
  a[...] = ml.max(x[...], axis=0)
  b[...] = ml.max(y[...], axis=0)
  z[...] = big.at[ml.ds(0, 8)][...]


def test_shared_scratch_gives_each_warpgroup_the_same_bytes_in_every_scratch():
  """Warpgroup 0 may start the second reduction while warpgroup 1 still reads its slice of the
  first: their slices must not overlap, so every scratch is cut at the same stride (probe B)."""
  sx, sy = S((16, 32), F32), S((16, 256), F32)
  k = column_maxes_beside_a_big_buffer._compile((sx, sy), {})["kernel"]
  plan = k.smem_plan
  assert plan.shared_scratch and plan.scratch_stride >= 1024 * 4
  text = column_maxes_beside_a_big_buffer.mlir(sx, sy)
  slices = re.findall(r"memref\.subview %view_\d+\[%\w+\] \[(\d+)\] \[1\] : memref<(\d+)xf32", text)
  assert len(slices) == 2 and {int(n) for n, _ in slices} == {plan.scratch_stride // 4}, slices
  x = rand.normal(rand.key(0), (16, 32), F32)
  y = rand.normal(rand.key(1), (16, 256), F32)
  a, b, _ = column_maxes_beside_a_big_buffer(x, y, interpret=True)
  np.testing.assert_array_equal(a, x.max(0))
  np.testing.assert_array_equal(b, y.max(0))


@pytest.mark.gpu
def test_shared_scratch_of_different_sizes_gpu():
  x = rand.normal(rand.key(0), (16, 32), F32)
  y = rand.normal(rand.key(1), (16, 256), F32)
  for _ in range(20):
    a, b, z = jax.jit(column_maxes_beside_a_big_buffer)(x, y)
    np.testing.assert_array_equal(a, x.max(0))
    np.testing.assert_array_equal(b, y.max(0))
  np.testing.assert_array_equal(z, np.ones((8, 256), np.float32))
