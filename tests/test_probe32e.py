"""Probe 32e (matmul variants people ship): mixed-type matmuls (W8A16, W4A16 dequantised before the
dot, per-channel and per-group scales), grouped and MoE GEMMs, split-K, batched matmuls, epilogues,
GEMVs, small-M matmuls, int8 requantisation and K tails, written from the docs and
examples/matmul*.py, checked, exported and run in interpret mode against jnp."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct
F32, BF16 = jnp.float32, jnp.bfloat16


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _spec(x):
  return S(x.shape, x.dtype)


# ---------------------------------------------------------------- a dequantised B tile at block=256
@mg.mgpu_kernel(out_shape=lambda x, w, s: S((x.shape[0], w.shape[1]), x.dtype),
                grid=lambda x, w, s: (x.shape[0] // 128, w.shape[1] // 128), block=256)
def w8a16_pipelined(x, w, s, out, *, specialize: ml.constexpr = False):
  """matmul.py's tiles (bm=128, bk=64, block=256) with int8 weights converted into a bf16 B tile."""
  i, j = ml.program_id(0), ml.program_id(1)
  x_s = ml.smem((128, 64), x.dtype)
  wq_s = ml.smem((64, 128), jnp.int8)
  w_s = ml.smem((64, 128), x.dtype)
  acc = ml.zeros((128, 128), jnp.float32)
  for k in ml.range(x.shape[1] // 64, stages=3, warp_specialize=specialize):
    ml.copy(x.at[ml.ds(i * 128, 128), ml.ds(k * 64, 64)], x_s)
    ml.copy(w.at[ml.ds(k * 64, 64), ml.ds(j * 128, 128)], wq_s)
    w_s[...] = wq_s[...].astype(x.dtype)
    acc = ml.dot(x_s, w_s, acc)
  scale = s.at[ml.ds(j * 128, 128)][...]
  out.at[ml.ds(i * 128, 128), ml.ds(j * 128, 128)][...] = (acc * scale[None, :]).astype(out.dtype)


@mg.mgpu_kernel(out_shape=lambda x, w, sk, sn: S((x.shape[0], w.shape[1]), x.dtype),
                grid=lambda x, w, sk, sn: (x.shape[0] // 128, w.shape[1] // 128), block=256)
def w8a16_row_and_column_scales(x, w, sk, sn, out):
  """Scales of the weight's rows (along k, a row vector of the tile) and columns, in registers."""
  i, j = ml.program_id(0), ml.program_id(1)
  x_s = ml.smem((128, 64), x.dtype)
  w_s = ml.smem((64, 128), x.dtype)
  acc = ml.zeros((128, 128), jnp.float32)
  cs = sn.at[ml.ds(j * 128, 128)][...]
  for k in range(x.shape[1] // 64):
    ml.copy(x.at[ml.ds(i * 128, 128), ml.ds(k * 64, 64)], x_s)
    wt = w.at[ml.ds(k * 64, 64), ml.ds(j * 128, 128)][...].astype(jnp.float32)
    rs = sk.at[ml.ds(k * 64, 64)][...]
    w_s[...] = (wt * rs[:, None] * cs[None, :]).astype(x.dtype)
    acc = ml.dot(x_s, w_s, acc)
  out.at[ml.ds(i * 128, 128), ml.ds(j * 128, 128)][...] = acc.astype(out.dtype)


@mg.mgpu_kernel(out_shape=lambda x, w: (S((x.shape[0], w.shape[1]), x.dtype), S((), jnp.float32)),
                grid=lambda x, w: (1, w.shape[1] // 128), block=256)
def w8a16_weight_amax(x, w, out, amax):
  """A full reduction of the 64-row weight tile every warpgroup holds whole."""
  j = ml.program_id(1)
  x_s = ml.smem((128, 64), x.dtype)
  w_s = ml.smem((64, 128), x.dtype)
  acc = ml.zeros((128, 128), jnp.float32)
  m = ml.zeros((), jnp.float32)
  for k in range(x.shape[1] // 64):
    ml.copy(x.at[ml.ds(0, 128), ml.ds(k * 64, 64)], x_s)
    wt = w.at[ml.ds(k * 64, 64), ml.ds(j * 128, 128)][...].astype(jnp.float32)
    m = ml.maximum(m, ml.max(ml.abs(wt)))
    w_s[...] = wt.astype(x.dtype)
    acc = ml.dot(x_s, w_s, acc)
  out.at[ml.ds(0, 128), ml.ds(j * 128, 128)][...] = acc.astype(out.dtype)
  if j == 0:
    amax[...] = m


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[0]), x.dtype),
                grid=lambda x, w: (x.shape[0] // 128, w.shape[0] // 64), block=256)
def w8a16_kmajor_64(x, w, out):
  """Weights stored (n, k), a 64-row tile of them dequantised and passed transposed."""
  i, j = ml.program_id(0), ml.program_id(1)
  x_s = ml.smem((128, 64), x.dtype)
  wq_s = ml.smem((64, 64), jnp.int8)
  w_s = ml.smem((64, 64), x.dtype)
  acc = ml.zeros((128, 64), jnp.float32)
  for k in ml.range(x.shape[1] // 64, stages=2):
    ml.copy(x.at[ml.ds(i * 128, 128), ml.ds(k * 64, 64)], x_s)
    ml.copy(w.at[ml.ds(j * 64, 64), ml.ds(k * 64, 64)], wq_s)
    w_s[...] = wq_s[...].astype(x.dtype)
    acc = ml.dot(x_s, w_s.T, acc)
  out.at[ml.ds(i * 128, 128), ml.ds(j * 64, 64)][...] = acc.astype(out.dtype)


def _w8_operands(m=256, n=256, k=256, seed=0):
  rng = np.random.default_rng(seed)
  x = jnp.asarray(rng.standard_normal((m, k)), BF16)
  w = jnp.asarray(rng.integers(-127, 128, (k, n)), jnp.int8)
  return x, w, rng


def _dequant_cases():
  x, w, rng = _w8_operands()
  sn = jnp.asarray(rng.uniform(0.001, 0.02, w.shape[1]), F32)
  sk = jnp.asarray(rng.uniform(0.5, 2.0, w.shape[0]), F32)
  f = lambda t: np.asarray(t, np.float32)
  deq = lambda wd: f(x) @ f(jnp.asarray(wd, BF16))
  return [
      (w8a16_pipelined, (x, w, sn), {}, lambda: (f(x) @ f(w)) * f(sn)[None, :]),
      (w8a16_pipelined, (x, w, sn), dict(specialize=True), lambda: (f(x) @ f(w)) * f(sn)[None, :]),
      (w8a16_row_and_column_scales, (x, w, sk, sn), {},
       lambda: deq(f(w) * f(sk)[:, None] * f(sn)[None, :])),
      (w8a16_kmajor_64, (x, jnp.asarray(w.T)), {}, lambda: f(x) @ f(w)),
  ]


def test_a_64_row_b_tile_dequantised_in_registers_builds_at_block_256():
  """It was MG204: a tile moved between registers and a buffer ml.dot reads took the tensor-core
  layout that block=256 splits by 64-row shares, so matmul.py's bk=64 B tile, converted from int8,
  could not be written (each warpgroup now computes and stores the whole tile)."""
  for kernel, args, constexprs, _ in _dequant_cases():
    builds(kernel, *map(_spec, args), **constexprs)
    assert "wgmma/whole" in str(kernel.typed_ir(*map(_spec, args), **constexprs))
    _export(kernel, *map(_spec, args), **constexprs)
  x, w, _ = _w8_operands(m=128)
  builds(w8a16_weight_amax, _spec(x), _spec(w[:, :128]))


def test_a_dequantised_b_tile_at_block_256_matches_jnp_in_interpret_mode():
  for kernel, args, constexprs, want in _dequant_cases():
    got = np.asarray(kernel(*args, interpret=True, **constexprs), np.float32)
    np.testing.assert_allclose(got, want(), rtol=2e-2, atol=2e-2 * np.abs(want()).max())


@pytest.mark.gpu
def test_gpu_a_dequantised_b_tile_at_block_256_matches_interpret_mode():
  """Both warpgroups store the whole 64-row B tile (the same values) before the dot reads it, and
  reduce it whole: the GPU computes what interpret mode does (not yet run on the H200)."""
  for kernel, args, constexprs, want in _dequant_cases():
    got = np.asarray(jax.jit(lambda *a: kernel(*a, **constexprs))(*args), np.float32)
    ref = np.asarray(kernel(*args, interpret=True, **constexprs), np.float32)
    np.testing.assert_allclose(got, ref, rtol=1e-2, atol=1e-2 * np.abs(ref).max())
    np.testing.assert_allclose(got, want(), rtol=2e-2, atol=2e-2 * np.abs(want()).max())
  x, w, _ = _w8_operands(m=128)
  got, amax = jax.jit(w8a16_weight_amax)(x, w)
  ref, ref_amax = w8a16_weight_amax(x, w, interpret=True)
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(ref, np.float32), rtol=1e-2, atol=0.5)
  assert float(amax) == float(ref_amax) == float(jnp.max(jnp.abs(w[:, :128].astype(F32))))


# ---------------------------------------------------------------- W8A16: an 8-bit operand beside a 16-bit one
def _mixed(a_dtype, b_dtype, kmajor, follow=False):
  """a (m, k) a_dtype @ b, b stored (k, n), or (n, k) and passed transposed (kmajor); `follow`
  writes what the hint says."""
  bshape = (64, 64)                     # (k, n), or (n, k) when kmajor

  @mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0] if kmajor else b.shape[1]), F32),
                  grid=lambda a, b: (a.shape[0] // 64,))
  def kernel(a, b, c):
    i = ml.program_id(0)
    a_s = ml.smem((64, 64), a.dtype)
    w_s = ml.smem(bshape, b.dtype)
    acc = ml.zeros((64, 64), jnp.float32)
    for k in range(a.shape[1] // 64):
      ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
      ml.copy(b.at[:, ml.ds(k * 64, 64)] if kmajor else b.at[ml.ds(k * 64, 64), :], w_s)
      if not follow:
        acc = ml.dot(a_s, w_s.T if kmajor else w_s, acc)
      elif a.dtype.itemsize == 1:
        acc = ml.dot(a_s[...].astype(b.dtype), w_s.T if kmajor else w_s, acc)
      else:
        w_s16 = ml.smem(bshape, a.dtype)
        w_s16[...] = w_s[...].astype(a.dtype)
        acc = ml.dot(a_s, w_s16.T if kmajor else w_s16, acc)
    c.at[ml.ds(i * 64, 64), :][...] = acc
  return kernel


def test_a_16_bit_and_an_8_bit_operand_get_the_in_kernel_dequantisation_as_hint():
  """bf16 activations with int8 (or float8) weights in SMEM: the hint converted the weights before
  the call only (which drops the 8-bit weights' point); it now writes the dequantisation in the
  kernel, through a 16-bit buffer the tensor cores read, and the kernel it writes computes a @ b."""
  rng = np.random.default_rng(3)
  x = jnp.asarray(rng.standard_normal((128, 128)), BF16)
  w = jnp.asarray(rng.integers(-127, 128, (128, 64)), jnp.int8)
  w8 = jnp.asarray(rng.standard_normal((64, 128)), jnp.float8_e4m3fn)
  f = lambda t: np.asarray(t, np.float32)
  expect(_mixed(BF16, jnp.int8, False), [_spec(x), _spec(w)], mg.DtypeMismatchError, "ml.dot(a_s, w_s",
         "ml.dot of a_s (bfloat16) and w_s (int8): both operands must have one dtype",
         hint="dequantise w_s in the kernel through a bfloat16 buffer (a TMA copy does not convert):"
              " w_s16 = ml.smem((64, 64), jnp.bfloat16); w_s16[...] = w_s[...].astype(jnp.bfloat16) (times"
              " its scales, in float32, as needed); ml.dot(a_s, w_s16, acc); or convert the array that fills"
              " w_s before the call (.astype(jnp.bfloat16))")
  expect(_mixed(BF16, jnp.float8_e4m3fn, True), [_spec(x), _spec(w8)], mg.DtypeMismatchError,
         "ml.dot(a_s, w_s", "ml.dot of a_s (bfloat16) and w_s.T (float8_e4m3fn): both operands must have one dtype",
         hint="dequantise w_s in the kernel through a bfloat16 buffer (a TMA copy does not convert):"
              " w_s16 = ml.smem((64, 64), jnp.bfloat16); w_s16[...] = w_s[...].astype(jnp.bfloat16) (times"
              " its scales, in float32, as needed); ml.dot(a_s, w_s16.T, acc); or convert the array that"
              " fills w_s before the call (.astype(jnp.bfloat16))")
  for kernel, args, want in ((_mixed(BF16, jnp.int8, False, True), (x, w), f(x) @ f(w)),
                             (_mixed(BF16, jnp.float8_e4m3fn, True, True), (x, w8), f(x) @ f(w8).T)):
    _export(kernel, *map(_spec, args))
    np.testing.assert_allclose(np.asarray(kernel(*args, interpret=True)), want, rtol=1e-5, atol=1e-3)


def test_an_8_bit_a_beside_a_16_bit_b_is_converted_in_registers_as_the_hint_says():
  """int8 A with bfloat16 B: the hint was to convert both inputs before the call; A converts in
  registers (the tensor cores read a 16-bit A from registers), as float8 A did."""
  rng = np.random.default_rng(4)
  a = jnp.asarray(rng.integers(-127, 128, (128, 128)), jnp.int8)
  b = jnp.asarray(rng.standard_normal((128, 64)), BF16)
  e = expect(_mixed(jnp.int8, BF16, False), [_spec(a), _spec(b)], mg.DtypeMismatchError, "ml.dot(a_s, w_s",
             "ml.dot of a_s (int8) and w_s (bfloat16): both operands must have one dtype")
  assert e.hint.startswith("convert A to bfloat16 in registers: ml.dot(a_s[...].astype(jnp.bfloat16), w_s,"
                           " acc)"), e.hint
  kernel = _mixed(jnp.int8, BF16, False, True)
  _export(kernel, _spec(a), _spec(b))
  want = np.asarray(a, np.float32) @ np.asarray(b, np.float32)
  np.testing.assert_allclose(np.asarray(kernel(a, b, interpret=True)), want, rtol=1e-5, atol=1e-2)
