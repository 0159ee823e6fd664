"""Probe 52i: ml.copy of a window whose leading axis is longer than TMA's 256-element box (every other
axis within it) is copies of its windows of at most 256 rows along that axis, each its own TMA, all
awaited before the buffer is read (Triton's BLOCK_SIZE of 1024 staged through SMEM, a (512, 64) tile)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, F16 = jnp.float32, jnp.float16


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


@mg.mgpu_kernel(out_shape=lambda x, block: x, grid=lambda x, block: (x.shape[0] // block,))
def scale_staged(x, out, block: ml.constexpr):
  """Triton's vector kernel with its BLOCK staged through SMEM: in, scaled, back out by ml.copy."""
  i = ml.program_id(0)
  s = ml.smem((block,))
  ml.copy(x.at[ml.ds(i * block, block)], s)
  t = ml.smem((block,))
  t[...] = s[...] * 2.0
  ml.copy(t, out.at[ml.ds(i * block, block)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 1024,))
def scale_1024(x, out):
  i = ml.program_id(0)
  s = ml.smem((1024,))
  ml.copy(x.at[ml.ds(i * 1024, 1024)], s)
  t = ml.smem((1024,))
  t[...] = s[...] * 2.0
  ml.copy(t, out.at[ml.ds(i * 1024, 1024)])


@mg.mgpu_kernel(out_shape=lambda x: x)
def tile_in_out(x, out):
  """A whole float16 tile of 512 or 300 rows in, plus one, and out."""
  s = ml.smem(x.shape, F16)
  ml.copy(x, s)
  t = ml.smem(x.shape, F16)
  t[...] = s[...] + 1.0
  ml.copy(t, out)


@mg.mgpu_kernel(out_shape=lambda x: S((1024, 32), F32))
def store_1024_rows(x, out):
  """A GMEM store of an SMEM buffer of 1024 rows written from registers."""
  b = ml.smem((1024, 32), F32)
  b[...] = x[...] * 3.0
  ml.copy(b, out)


@mg.mgpu_kernel(out_shape=lambda x: S((600,), F32))
def tail_88(x, out):
  """600 float32: pieces of 256, 256 and a tail of 88 (352 bytes)."""
  s = ml.smem((600,), F32)
  ml.copy(x, s)
  out[...] = s[...] - 1.0


@mg.mgpu_kernel(out_shape=lambda a, bt: S((384, 64), F32), block=384)
def rows_384(a, bt, c):
  """A tile of 384 rows for a product: its swizzled buffer's pieces are whole 8-row tiles."""
  a_s, b_s = ml.smem((384, 64)), ml.smem((64, 64))
  ml.copy(a, a_s)
  ml.copy(bt, b_s)
  c[...] = ml.dot(a_s, b_s.T)


@mg.mgpu_kernel(out_shape=lambda x: S((512,), F32))
def pipelined(x, out):
  """A pipelined loop's load of 512: two pieces, a barrier each a stage, both awaited before the read."""
  buf = ml.smem((512,), F32)
  acc = ml.zeros((512,), F32)
  for k in ml.range(x.shape[0] // 512, stages=2):
    ml.copy(x.at[ml.ds(k * 512, 512)], buf)
    acc = acc + buf[...]
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: S((512,), F32))
def past_the_end(x, out):
  """512 from an array of 300: the second piece (256:512) runs past the end and reads zeros there, as the whole
  window's TMA did."""
  buf = ml.smem((512,), F32)
  ml.copy(x.at[ml.ds(0, 512)], buf)
  out[...] = buf[...]


def _cases():
  """(kernel, args, constexprs, NumPy's answer) of each kernel of the class."""
  out = []
  for block in (512, 1024, 2048):
    x = np.arange(4096, dtype=np.float32) - 100.0
    out.append((scale_staged, (x,), {"block": block}, x * 2.0))
  for rows, cols in ((512, 64), (300, 32)):
    x = (np.arange(rows * cols) % 251).reshape(rows, cols).astype(np.float16)
    out.append((tile_in_out, (x,), {}, x + np.float16(1.0)))
  x = np.arange(1024 * 32, dtype=np.float32).reshape(1024, 32)
  out.append((store_1024_rows, (x,), {}, x * 3.0))
  x = np.arange(600, dtype=np.float32)
  out.append((tail_88, (x,), {}, x - 1.0))
  x = np.arange(2048, dtype=np.float32)
  out.append((pipelined, (x,), {}, x.reshape(4, 512).sum(0)))
  x = np.arange(300, dtype=np.float32) + 1.0
  out.append((past_the_end, (x,), {}, np.concatenate([x, np.zeros(212, np.float32)])))
  a = ((np.arange(384 * 64) % 13) / 8.0).reshape(384, 64).astype(np.float16)
  bt = ((np.arange(64 * 64) % 7) / 4.0).reshape(64, 64).astype(np.float16)
  out.append((rows_384, (a, bt), {}, a.astype(np.float32) @ bt.astype(np.float32).T))
  return out


@pytest.mark.parametrize("case", range(len(_cases())))
def test_a_leading_axis_past_the_box_computes_and_exports(case):
  kernel, args, kw, want = _cases()[case]
  np.testing.assert_allclose(np.asarray(kernel(*args, interpret=True, **kw)), want, rtol=1e-3, atol=1e-3)
  specs = [S(a.shape, a.dtype) for a in args]
  assert "mosaic_gpu" in jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(
      *specs).mlir_module()


def test_each_piece_is_its_own_tma_and_every_one_is_awaited():
  """scale_1024 loads 4 pieces of 256 float32 (1024 bytes each), one barrier each, all waited before s
  is read, and stores t in 4 pieces; the 384-row tile's pieces are 256 and 128 rows of its 8-row tiles."""
  text = scale_1024.mlir(S((2048,), F32))
  assert text.count("mbarrier.arrive.expect_tx") == 4, text
  assert text.count("%c1024_i32") >= 4 and text.count("mbarrier.try_wait.parity") == 4
  for k in (0, 256, 512, 768):
    assert f"[{k}] [256] [1] : memref<1024xf32" in text
  text = pipelined.mlir(S((2048,), F32))
  body = text[text.index("iter_args"):]
  assert body.index("%c1024_i32") > 0 and body[:body.index("arith.addf")].count("mbarrier.try_wait.parity") == 2
  text = rows_384.mlir(S((384, 64), F16), S((64, 64), F16))
  assert "[0, 0, 0, 0] [32, 1, 8, 64]" in text and "[32, 0, 0, 0] [16, 1, 8, 64]" in text
  assert "expect_tx %" in text and "%c32768_i32" in text and "%c16384_i32" in text


@pytest.mark.gpu
def test_gpu_a_leading_axis_past_the_box():
  for kernel, args, kw, want in _cases():
    np.testing.assert_allclose(np.asarray(kernel(*args, **kw)), want, rtol=1e-3, atol=1e-3)


@mg.mgpu_kernel(out_shape=lambda x: x)
def wide_rows(x, out):
  s = ml.smem((8, 512))
  ml.copy(x, s)
  out[...] = s[...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def stage_bf16_300(x, out):
  buf = ml.smem((300,), jnp.bfloat16)
  ml.copy(x, buf)
  ml.copy(buf, out)


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((2, 128), x.dtype), grid=(2,), cluster=(2,))
def multicast_512(x, out):
  buf = ml.smem((512,), x.dtype)
  acc = ml.zeros((128,), x.dtype)
  for k in ml.range(4, stages=2, warp_specialize=True):
    ml.copy(x.at[ml.ds(k * 512, 512)], buf, multicast=0)
    acc += ml.sum(buf[...])
  out.at[ml.program_id(0)][...] = acc


def test_what_is_not_split_stays_mg401():
  """A 1-D tail of no whole 16-byte units (44 bfloat16), a multicast load and a window whose second piece starts
  past the array's end (512 of 200) keep the whole window's MG401 and its hint. (A last axis past the box is one
  box of (pieces, width) since probe 56c: wide_rows computes.)"""
  x = np.arange(8 * 512, dtype=np.float32).reshape(8, 512)
  np.testing.assert_array_equal(wide_rows(x, interpret=True), x)
  e = expect(stage_bf16_300, [S((300,), jnp.bfloat16)], mg.TmaLimitError, "ml.copy(x, buf)",
             "TMA copies move at most 256 elements along each dimension; this window is (300,)")
  assert e.hint.startswith("pad x to 304 elements outside the kernel (jnp.pad; TMA moves whole 16-byte units)")
  e = expect(multicast_512, [S((2048,), F32)], mg.TmaLimitError, "ml.copy(x.at[ml.ds(k * 512, 512)], buf, multicast=0)",
             "TMA copies move at most 256 elements along each dimension; this window is (512,)")
  assert "for kk in ml.static_range(2)" in e.hint, e.hint
  expect(past_the_end, [S((200,), F32)], mg.TmaLimitError, "ml.copy(x.at[ml.ds(0, 512)], buf)",
         "TMA copies move at most 256 elements along each dimension; this window is (512,)")
