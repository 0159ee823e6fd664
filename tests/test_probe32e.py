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


@ml.inline
def _w8_mainloop(x, w, x_s, wq_s, w_s, i, j, stages, specialize):
  (bm, bk), bn = x_s.shape, w_s.shape[1]
  acc = ml.zeros((bm, bn), jnp.float32)
  for k in ml.range(x.shape[1] // bk, stages=stages, warp_specialize=specialize):
    ml.copy(x.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], x_s)
    ml.copy(w.at[ml.ds(k * bk, bk), ml.ds(j * bn, bn)], wq_s)
    w_s[...] = wq_s[...].astype(x.dtype)
    acc = ml.dot(x_s, w_s, acc)
  return acc


@mg.mgpu_kernel(out_shape=lambda x, w, s, **kw: S((x.shape[0], w.shape[1]), x.dtype),
                grid=lambda x, w, s, **kw: (min((x.shape[0] // 128) * (w.shape[1] // 256), mg.num_sms()),),
                block=256)
def w8a16_persistent(x, w, s, c, *, stages: ml.constexpr = 4, specialize: ml.constexpr = True):
  """examples/matmul.py's persistent warp-specialised kernel (bk=64) with int8 weights."""
  bm, bn, bk, epi = 128, 256, 64, 64
  num_m, num_n = x.shape[0] // bm, w.shape[1] // bn
  x_s, wq_s, w_s = ml.smem((bm, bk)), ml.smem((bk, bn), jnp.int8), ml.smem((bk, bn), x.dtype)
  c_s = (ml.smem((bm, epi)), ml.smem((bm, epi)))
  for t in range(ml.program_id(0), num_m * num_n, ml.num_programs(0)):
    i, j = ml.grouped_ids(t, num_m, num_n, group=8)
    acc = _w8_mainloop(x, w, x_s, wq_s, w_s, i, j, stages, specialize)
    y = (acc * s.at[ml.ds(j * bn, bn)][...][None, :]).astype(c.dtype)
    for e in ml.static_range(bn // epi):
      c_s[e % 2][...] = y[:, e * epi:(e + 1) * epi]
      ml.copy(c_s[e % 2], c.at[ml.ds(i * bm, bm), ml.ds(j * bn + e * epi, epi)])


def _w8_operands(m=256, n=256, k=256, seed=0):
  rng = np.random.default_rng(seed)
  x = jnp.asarray(rng.standard_normal((m, k)), BF16)
  w = jnp.asarray(rng.integers(-127, 128, (k, n)), jnp.int8)
  return x, w, rng


def _dequant_cases():
  x, w, rng = _w8_operands()
  sn = jnp.asarray(rng.uniform(0.001, 0.02, w.shape[1]), F32)
  sk = jnp.asarray(rng.uniform(0.5, 2.0, w.shape[0]), F32)
  w2 = jnp.asarray(rng.integers(-127, 128, (256, 512)), jnp.int8)
  sn2 = jnp.asarray(rng.uniform(0.001, 0.02, 512), F32)
  f = lambda t: np.asarray(t, np.float32)
  deq = lambda wd: f(x) @ f(jnp.asarray(wd, BF16))
  return [
      (w8a16_pipelined, (x, w, sn), {}, lambda: (f(x) @ f(w)) * f(sn)[None, :]),
      (w8a16_pipelined, (x, w, sn), dict(specialize=True), lambda: (f(x) @ f(w)) * f(sn)[None, :]),
      (w8a16_row_and_column_scales, (x, w, sk, sn), {},
       lambda: deq(f(w) * f(sk)[:, None] * f(sn)[None, :])),
      (w8a16_kmajor_64, (x, jnp.asarray(w.T)), {}, lambda: f(x) @ f(w)),
      (w8a16_persistent, (x, w2, sn2), {}, lambda: (f(x) @ f(w2)) * f(sn2)[None, :]),
      (w8a16_persistent, (x, w2, sn2), dict(specialize=False, stages=3), lambda: (f(x) @ f(w2)) * f(sn2)[None, :]),
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


# ---------------------------------------------------------------- a vector operand: the decode GEMV
def _gemv(form):
  """w (n, k) times x (k,): `dot` passes the vector to ml.dot; the others follow its hint."""
  @mg.mgpu_kernel(out_shape=lambda w, x: S((w.shape[0],), F32), grid=lambda w, x: (w.shape[0] // 64,))
  def gemv(w, x, out):
    j = ml.program_id(0)
    w_s = ml.smem((64, w.shape[1]))
    ml.copy(w.at[ml.ds(j * 64, 64), :], w_s)
    if form == "dot":
      x_s = ml.smem((x.shape[0],))
      ml.copy(x, x_s)
      out.at[ml.ds(j * 64, 64)][...] = ml.dot(w_s, x_s)
    elif form == "registers":
      x_s = ml.smem((x.shape[0],))
      ml.copy(x, x_s)
      out.at[ml.ds(j * 64, 64)][...] = ml.sum(w_s[...].astype(jnp.float32) * x_s[...].astype(jnp.float32)[None, :],
                                               axis=1)
    else:                                     # x given as x.reshape(1, k)
      v_s = ml.smem((8, x.shape[1]))
      ml.copy(x.at[ml.ds(0, 8), :], v_s)
      out.at[ml.ds(j * 64, 64)][...] = ml.dot(w_s, v_s.T)[:, 0]
  return gemv


def test_a_vector_passed_to_ml_dot_hints_the_matrix_vector_product():
  """The hint of a 1-D operand was `index the leading dimensions away: buf.at[stage]`, which no
  vector has; it now writes the GEMV as a multiply and a sum, or on the tensor cores with the vector
  as a row of an (8, k) buffer passed transposed, and both compute w @ x."""
  rng = np.random.default_rng(5)
  w = jnp.asarray(rng.standard_normal((128, 64)), BF16)
  x = jnp.asarray(rng.standard_normal((64,)), BF16)
  expect(_gemv("dot"), [_spec(w), _spec(x)], mg.MmaOperandError, "ml.dot(w_s, x_s)",
         "ml.dot operand b must be 2-D, got shape (64,)",
         hint="ml.dot multiplies 2-D tiles: a matrix-vector product (a decode GEMV) is a multiply and a sum in"
              " registers, ml.sum(w_s[...].astype(jnp.float32) * x_s[...].astype(jnp.float32)[None, :], axis=1);"
              " or, on the tensor cores, copy the vector as a row (x.reshape(1, k) outside the kernel) into an"
              " (8, k) buffer, row_s (TMA reads zeros past the last row), and take column 0 of ml.dot(w_s, row_s.T)")
  want = np.asarray(w, np.float32) @ np.asarray(x, np.float32)
  for form, arg in (("registers", x), ("tensor cores", x.reshape(1, -1))):
    kernel = _gemv(form)
    _export(kernel, _spec(w), _spec(arg))
    np.testing.assert_allclose(np.asarray(kernel(w, arg, interpret=True)), want, rtol=1e-4, atol=1e-3)


def _vecmat(follow):
  @mg.mgpu_kernel(out_shape=lambda x, w: S((w.shape[1],), F32), grid=(1,))
  def vecmat(x, w, out):
    w_s = ml.smem(w.shape)
    ml.copy(w, w_s)
    xv = x[...]
    if follow:
      out[...] = ml.sum(xv.astype(jnp.float32)[:, None] * w_s[...].astype(jnp.float32), axis=0)
    else:
      out[...] = ml.dot(xv, w_s)
  return vecmat


def test_a_register_vector_as_a_hints_the_vector_matrix_product():
  rng = np.random.default_rng(6)
  x = jnp.asarray(rng.standard_normal((64,)), BF16)
  w = jnp.asarray(rng.standard_normal((64, 128)), BF16)
  expect(_vecmat(False), [_spec(x), _spec(w)], mg.MmaOperandError, "ml.dot(xv, w_s)",
         "ml.dot operand a must be 2-D, got shape (64,)",
         hint="ml.dot multiplies 2-D tiles: a matrix-vector product (a decode GEMV) is a multiply and a sum in"
              " registers, ml.sum(xv.astype(jnp.float32)[:, None] * w_s[...].astype(jnp.float32), axis=0)")
  kernel = _vecmat(True)
  _export(kernel, _spec(x), _spec(w))
  want = np.asarray(x, np.float32) @ np.asarray(w, np.float32)
  np.testing.assert_allclose(np.asarray(kernel(x, w, interpret=True)), want, rtol=1e-4, atol=1e-3)


# ---------------------------------------------------------------- a small batch on the tensor cores
def _small_m(form):
  """a (m, k) @ b (k, 64) for a batch of m < 64 rows: `plain` gives ml.dot the m rows; the others
  follow its hint (a 64-row tile filled past the array's end, or the operands swapped)."""
  @mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=(1,))
  def small_m(a, b, c):
    b_s = ml.smem(b.shape)
    ml.copy(b, b_s)
    if form == "padded":
      a_s = ml.smem((64, a.shape[1]))
      ml.copy(a.at[ml.ds(0, 64), :], a_s)
      c.at[ml.ds(0, 64), :].store(ml.dot(a_s, b_s), mask=ml.arange(64)[:, None] < a.shape[0])
    else:
      a_s = ml.smem(a.shape)
      ml.copy(a, a_s)
      c[...] = ml.dot(a_s, b_s) if form == "plain" else ml.dot(b_s.T, a_s.T).T
  return small_m


def test_a_small_batch_hints_the_padded_tile_and_the_swapped_operands():
  """m = 16 rows (a decode batch) was hinted `use a tile of 64, 128, ... rows`; the hint then said
  how: a 64-row tile TMA fills with zeros past the data, stored under a mask, or ml.dot(b_s.T, a_s.T)
  (the transposed product, n = 16). Since probe 47e the plain form computes too (A padded to 64 rows
  by the compiler), and so do 12 rows; all compute a @ b."""
  rng = np.random.default_rng(7)
  a = jnp.asarray(rng.standard_normal((16, 64)), BF16)
  b = jnp.asarray(rng.standard_normal((64, 64)), BF16)
  want = np.asarray(a, np.float32) @ np.asarray(b, np.float32)
  for form in ("plain", "padded", "swapped"):
    kernel = _small_m(form)
    _export(kernel, _spec(a), _spec(b))
    np.testing.assert_allclose(np.asarray(kernel(a, b, interpret=True)), want, rtol=1e-4, atol=1e-3)
  np.testing.assert_allclose(np.asarray(_small_m("plain")(a[:12], b, interpret=True)), want[:12], rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_gpu_the_small_batch_and_gemv_forms_the_hints_write_match_jnp():
  rng = np.random.default_rng(8)
  a = jnp.asarray(rng.standard_normal((16, 64)), BF16)
  b = jnp.asarray(rng.standard_normal((64, 64)), BF16)
  want = np.asarray(a, np.float32) @ np.asarray(b, np.float32)
  for form in ("padded", "swapped"):
    np.testing.assert_allclose(np.asarray(jax.jit(_small_m(form))(a, b)), want, rtol=1e-3, atol=1e-2)
  w = jnp.asarray(rng.standard_normal((128, 64)), BF16)
  x = jnp.asarray(rng.standard_normal((64,)), BF16)
  want = np.asarray(w, np.float32) @ np.asarray(x, np.float32)
  for form, arg in (("registers", x), ("tensor cores", x.reshape(1, -1))):
    np.testing.assert_allclose(np.asarray(jax.jit(_gemv(form))(w, arg)), want, rtol=1e-3, atol=1e-2)


@mg.mgpu_kernel(out_shape=lambda x, w: (S((x.shape[0], w.shape[1]), F32), S(w.shape, x.dtype)),
                grid=lambda x, w: (x.shape[0] // 128, w.shape[1] // 128), block=256)
def w8a16_k_tail(x, w, out, wd):
  """K = 200: the last 64-row B tile read under a mask of its rows (an index grid of the whole tile),
  also stored to GMEM by both warpgroups."""
  i, j = ml.program_id(0), ml.program_id(1)
  x_s = ml.smem((128, 64), x.dtype)
  w_s = ml.smem((64, 128), x.dtype)
  acc = ml.zeros((128, 128), jnp.float32)
  for k in range(ml.cdiv(x.shape[1], 64)):
    ml.copy(x.at[ml.ds(i * 128, 128), ml.ds(k * 64, 64)], x_s)
    rows = k * 64 + ml.arange(64)
    wb = w.at[ml.ds(k * 64, 64), ml.ds(j * 128, 128)].load(mask=rows[:, None] < w.shape[0], other=0).astype(x.dtype)
    w_s[...] = wb
    if i == 0:
      wd.at[ml.ds(k * 64, 64), ml.ds(j * 128, 128)].store(wb, mask=rows[:, None] < w.shape[0])
    acc = ml.dot(x_s, w_s, acc)
  out.at[ml.ds(i * 128, 128), ml.ds(j * 128, 128)][...] = acc


def _k_tail_operands():
  rng = np.random.default_rng(9)
  return (jnp.asarray(rng.standard_normal((256, 200)), BF16),
          jnp.asarray(rng.integers(-127, 128, (200, 256)), jnp.int8))


def test_a_masked_64_row_b_tile_at_block_256_builds_and_matches_jnp():
  x, w = _k_tail_operands()
  _export(w8a16_k_tail, _spec(x), _spec(w))
  got, wd = w8a16_k_tail(x, w, interpret=True)
  np.testing.assert_allclose(np.asarray(got), np.asarray(x, np.float32) @ np.asarray(w, np.float32),
                             rtol=1e-5, atol=1e-3)
  np.testing.assert_array_equal(np.asarray(wd, np.float32), np.asarray(w, np.float32))


@pytest.mark.gpu
def test_gpu_a_masked_64_row_b_tile_at_block_256_matches_interpret_mode():
  x, w = _k_tail_operands()
  got, wd = jax.jit(w8a16_k_tail)(x, w)
  ref, ref_wd = w8a16_k_tail(x, w, interpret=True)
  np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-3, atol=1e-2)
  np.testing.assert_array_equal(np.asarray(wd, np.float32), np.asarray(ref_wd, np.float32))


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), a.dtype),
                grid=lambda a, b: (ml.cdiv(a.shape[0], 128), ml.cdiv(b.shape[1], 64)), block=256)
def triton_style_matmul(a, b, c):
  """Triton's masked loads of any M, N, K into SMEM tiles, at block=256 (bm=128, bn=bk=64): the
  column index vector rn masks both the 64-row B tile (held whole) and the split result."""
  pid_m, pid_n = ml.program_id(0), ml.program_id(1)
  rm = pid_m * 128 + ml.arange(128)
  rn = pid_n * 64 + ml.arange(64)
  a_s = ml.smem((128, 64), a.dtype)
  b_s = ml.smem((64, 64), b.dtype)
  acc = ml.zeros((128, 64), jnp.float32)
  for k in range(ml.cdiv(a.shape[1], 64)):
    rk = k * 64 + ml.arange(64)
    a_s[...] = a.at[ml.ds(pid_m * 128, 128), ml.ds(k * 64, 64)].load(
        mask=(rm[:, None] < a.shape[0]) & (rk[None, :] < a.shape[1]), other=0.0)
    b_s[...] = b.at[ml.ds(k * 64, 64), ml.ds(pid_n * 64, 64)].load(
        mask=(rk[:, None] < b.shape[0]) & (rn[None, :] < b.shape[1]), other=0.0)
    acc = ml.dot(a_s, b_s, acc)
  c.at[ml.ds(pid_m * 128, 128), ml.ds(pid_n * 64, 64)].store(
      acc.astype(c.dtype), mask=(rm[:, None] < c.shape[0]) & (rn[None, :] < c.shape[1]))


_TRITON_SHAPES = ((100, 90, 70), (1, 200, 300), (130, 3, 65))


def _triton_operands(m, n, k):
  rng = np.random.default_rng(m + n + k)
  return jnp.asarray(rng.standard_normal((m, k)), jnp.float16), jnp.asarray(rng.standard_normal((k, n)), jnp.float16)


def test_triton_style_masked_matmul_at_block_256_builds_and_matches_jnp():
  """It was MG204 (the 64-row B tile), and with that tile held whole, MG204 again: rn, a column
  vector of both tiles, took two layouts (a whole tile's column vector is any tile's)."""
  for shape in _TRITON_SHAPES:
    a, b = _triton_operands(*shape)
    _export(triton_style_matmul, _spec(a), _spec(b))
    want = np.asarray(a, np.float32) @ np.asarray(b, np.float32)
    np.testing.assert_allclose(np.asarray(triton_style_matmul(a, b, interpret=True), np.float32), want,
                               rtol=1e-2, atol=2e-2)


@pytest.mark.gpu
def test_gpu_triton_style_masked_matmul_at_block_256_matches_interpret_mode():
  for shape in _TRITON_SHAPES:
    a, b = _triton_operands(*shape)
    got = np.asarray(jax.jit(triton_style_matmul)(a, b), np.float32)
    np.testing.assert_allclose(got, np.asarray(triton_style_matmul(a, b, interpret=True), np.float32),
                               rtol=1e-2, atol=2e-2)


# ---------------------------------------------------------------- 8-bit weights stored (k, n)
def _kn_weights(follow, block=128):
  """a (m, k) @ b (k, n) for 8-bit (or float32) operands, b as a weight (in, out) is stored:
  `follow` transposes its tile once into a K-major buffer, as the hint says."""
  rows = 64 * (block // 128)

  @mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]),
                                           jnp.int32 if a.dtype == jnp.int8 else F32),
                  grid=lambda a, b: (a.shape[0] // rows,), block=block)
  def kn(a, b, c):
    i = ml.program_id(0)
    bk = 128 // a.dtype.itemsize
    a_s = ml.smem((rows, bk), a.dtype)
    b_s = ml.smem((bk, b.shape[1]), b.dtype)
    acc = ml.zeros((rows, b.shape[1]), jnp.int32 if a.dtype == jnp.int8 else jnp.float32)
    for k in range(a.shape[1] // bk):
      ml.copy(a.at[ml.ds(i * rows, rows), ml.ds(k * bk, bk)], a_s)
      ml.copy(b.at[ml.ds(k * bk, bk), :], b_s)
      if follow:
        b_nk = ml.smem((b.shape[1], bk), b.dtype)
        b_nk[...] = b_s.T[...]
        acc = ml.dot(a_s, b_nk.T, acc)
      else:
        acc = ml.dot(a_s, b_s, acc)
    c.at[ml.ds(i * rows, rows), :][...] = acc
  return kn


def test_8_bit_weights_stored_k_by_n_hint_the_in_kernel_transpose():
  """int8 b stored (k, n): the hint only said to load B as (n, k) from a transposed array; it also
  gives the tile transposed once in the kernel (at block=256 a 64-row (n, k) tile every warpgroup
  writes whole), which computes a @ b."""
  rng = np.random.default_rng(10)
  a = jnp.asarray(rng.integers(-128, 128, (128, 256)), jnp.int8)
  b = jnp.asarray(rng.integers(-128, 128, (256, 64)), jnp.int8)
  # (MG501 until probe 68a, whose hint transposed the tile as _kn_weights(True) does; the compiler now does)
  want = np.asarray(a, np.int64) @ np.asarray(b, np.int64)
  np.testing.assert_array_equal(np.asarray(_kn_weights(False)(a, b, interpret=True)), want)
  fp8 = (jnp.asarray(rng.standard_normal((256, 256)), jnp.float8_e4m3fn),
         jnp.asarray(rng.standard_normal((256, 64)), jnp.float8_e4m3fn))
  for kernel, args, want, tol in ((_kn_weights(True), (a, b), want, 0),
                                  (_kn_weights(True, block=256), fp8,
                                   np.asarray(fp8[0], np.float32) @ np.asarray(fp8[1], np.float32), 1e-4)):
    _export(kernel, *map(_spec, args))
    np.testing.assert_allclose(np.asarray(kernel(*args, interpret=True)), want, rtol=tol, atol=tol)


@pytest.mark.gpu
def test_gpu_8_bit_weights_transposed_in_the_kernel_match_interpret_mode():
  rng = np.random.default_rng(11)
  a = jnp.asarray(rng.integers(-128, 128, (128, 256)), jnp.int8)
  b = jnp.asarray(rng.integers(-128, 128, (256, 64)), jnp.int8)
  fp8 = (jnp.asarray(rng.standard_normal((256, 256)), jnp.float8_e4m3fn),
         jnp.asarray(rng.standard_normal((256, 64)), jnp.float8_e4m3fn))
  for follow in (True, False):      # (False: B as stored, transposed by the compiler since probe 68a)
    kernel = _kn_weights(follow)
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(a, b)), np.asarray(kernel(a, b, interpret=True)))
    kernel = _kn_weights(follow, block=256)
    np.testing.assert_allclose(np.asarray(jax.jit(kernel)(*fp8)), np.asarray(kernel(*fp8, interpret=True)),
                               rtol=2e-2, atol=0.1)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32), grid=(1,), block=256)
def column_quantised_b(x, w, c):
  """Each 64-row float32 weight tile scaled by its column amax into bf16 (a whole tile at block=256,
  reduced along its rows in every warpgroup), the amax applied to the split dot result."""
  x_s = ml.smem((128, 64))
  w_s = ml.smem((64, 128), jnp.bfloat16)
  acc = ml.zeros((128, 128), jnp.float32)
  for k in range(x.shape[1] // 64):
    ml.copy(x.at[:, ml.ds(k * 64, 64)], x_s)
    wt = w.at[ml.ds(k * 64, 64), :][...]
    cmax = ml.max(ml.abs(wt), axis=0)
    w_s[...] = (wt / cmax[None, :]).astype(jnp.bfloat16)
    acc = acc + ml.dot(x_s, w_s) * cmax[None, :]
  c[...] = acc


def _column_quantised_case():
  rng = np.random.default_rng(12)
  x = jnp.asarray(rng.standard_normal((128, 128)), BF16)
  w = jnp.asarray(rng.standard_normal((128, 128)), F32)
  want = 0
  for k in range(2):
    wt = np.asarray(w[k * 64:(k + 1) * 64])
    cm = np.abs(wt).max(axis=0)
    wd = np.asarray(jnp.asarray(wt / cm, BF16), np.float32)
    want = want + (np.asarray(x[:, k * 64:(k + 1) * 64], np.float32) @ wd) * cm
  return x, w, want


def test_a_whole_b_tile_reduced_along_its_rows_at_block_256_matches_jnp():
  x, w, want = _column_quantised_case()
  _export(column_quantised_b, _spec(x), _spec(w))
  np.testing.assert_allclose(np.asarray(column_quantised_b(x, w, interpret=True)), want, rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_gpu_a_whole_b_tile_reduced_along_its_rows_matches_interpret_mode():
  x, w, want = _column_quantised_case()
  got = np.asarray(jax.jit(column_quantised_b)(x, w))
  np.testing.assert_allclose(got, np.asarray(column_quantised_b(x, w, interpret=True)), rtol=1e-3, atol=1e-2)
  np.testing.assert_allclose(got, want, rtol=1e-2, atol=5e-2)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32), grid=(1,))
def int8_weights_into_a_bf16_buffer(x, w, c):
  x_s = ml.smem((64, 64), BF16)
  w_s = ml.smem((64, 64), BF16)
  ml.copy(x, x_s)
  ml.copy(w, w_s)
  c[...] = ml.dot(x_s, w_s)


def test_a_copy_of_int8_weights_into_a_bf16_buffer_says_an_int8_buffer():
  """The hint said "through a int8 buffer"."""
  e = expect(int8_weights_into_a_bf16_buffer, [S((64, 64), BF16), S((64, 64), jnp.int8)], mg.CopyDtypeError,
             "ml.copy(w, w_s)", "cannot copy w (GMEM, int8) into w_s (SMEM, bfloat16): element types differ")
  assert "convert in registers through an int8 buffer: buf2 = ml.smem((64, 64), jnp.int8)" in e.hint, e.hint


@mg.mgpu_kernel(out_shape=lambda a, bt: S((64, 64), F32), grid=(1,))
def tma_into_transposed_view(a, bt, c):
  a_s = ml.smem((64, 64))
  b_s = ml.smem((64, 64))
  ml.copy(a, a_s)
  ml.copy(bt, b_s.T)
  c[...] = ml.dot(a_s, b_s)


def test_a_copy_into_a_transposed_view_hints_the_view_at_ml_dot():
  """The hint only said to transpose in registers; a tile the tensor cores read transposed is
  copied as stored and passed as b_s.T to ml.dot, which moves no data."""
  e = expect(tma_into_transposed_view, [S((64, 64), BF16), S((64, 64), BF16)], mg.KernelTypeError,
             "ml.copy(bt, b_s.T)", "cannot copy into b_s.T: TMA copies move windows as they are stored; a"
             " transposed view (.T) is an ml.dot operand, or read and written from registers")
  assert e.hint.endswith("; for the tensor cores, copy into b_s as stored and pass b_s.T to ml.dot (no data"
                         " moves)"), e.hint
