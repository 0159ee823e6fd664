"""Probe 68b (quantised and fused GEMMs as LLM serving stacks write them: GPTQ, AWQ, Marlin-like and torchao int4,
W8A16, W8A8, FP8 per-tensor and 128x128 block scales, SwiGLU, epilogues, split-K, stream-K, MoE, LoRA, decode GEMVs):
the corpus (tests/probe68b_quant.py, probe68b_fused.py, probe68b_more.py, probe68b_edges.py), each kernel checked in
interpret mode against its NumPy reference (bit-exact for integer paths) and exported for CUDA; and the classes fixed
(design note 226): ml.repeat of a (1, n) row along either axis and of a few short rows along their columns, and
reductions of a 3-D tensor whose other axes are of size 1."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
import probe68b_edges
import probe68b_fused
import probe68b_more
import probe68b_quant

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32
CASES = {**probe68b_quant.CASES, **probe68b_fused.CASES, **probe68b_more.CASES, **probe68b_edges.CASES}


def _relerr(got, want):
  got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
  assert got.shape == want.shape, (got.shape, want.shape)
  return float(np.max(np.abs(got - want)) / max(1e-6, float(np.max(np.abs(want)))))


def _compare(name, got, want, tol):
  got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
  assert len(got) == len(want), name
  for g, w in zip(got, want):
    if tol == 0:                     # integer paths (and quantised outputs): bit for bit
      assert np.asarray(g).dtype == np.asarray(w).dtype, (name, np.asarray(g).dtype, np.asarray(w).dtype)
      np.testing.assert_array_equal(np.asarray(g).view(np.uint8), np.asarray(w).view(np.uint8), err_msg=name)
    else:
      assert _relerr(g, w) <= tol, (name, _relerr(g, w))


def test_corpus_size():
  assert len(CASES) >= 45, len(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_matches_its_reference_and_builds(name):
  """Each kernel against its reference in interpret mode, then its Mosaic GPU module built for CUDA (a verifier error
  or an InternalError there fails the test)."""
  kernel, make, ref, tol = CASES[name]
  args, kw = make(0)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.KernelWarning)
    _compare(name, kernel(*args, **kw, interpret=True), ref(*args, **kw), tol)
    jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(
        *[S(np.shape(a), a.dtype) for a in args]).mlir_module()


GPU_TWINS = ["gptq_asym_g128", "awq_tma_g32", "awq_tma_g128", "w8a8_gemm_tma", "int8_gemm_register_operands",
             "fp8_deepseek_block_scaled", "swiglu_dual_gemm", "epilogue_row_rmsnorm_block256", "splitk_atomic_add_f32",
             "fused_moe_sorted_token_ids", "lora_fused_rank16", "gemv_int4_batch1", "gemv_int4_batch8",
             "w4a8_int8_dot", "int8_splitk_int32_atomics", "gptq_dequantize_kernel"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_TWINS)
def test_gpu_corpus_matches_its_reference(name):
  """The GPU twins: integer results bit for bit; float ones within the tolerance (the GPU's float32 division is an ulp
  off IEEE's, design note 64, and its fp8 dots add with fewer bits)."""
  kernel, make, ref, tol = CASES[name]
  args, kw = make(1)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.KernelWarning)
    got = jax.jit(lambda *a: kernel(*a, **kw))(*args)
  _compare(name, got, ref(*args, **kw), tol if tol == 0 else max(tol, 2e-2))


# ---------------------------------------------------------------- ml.repeat of a (1, n) row and of a few short rows
def _repeat_kernel(shape, r, axis, jn):
  out = list(shape)
  out[axis] *= r

  @mg.mgpu_kernel(out_shape=lambda z: S(tuple(out), I32), grid=(1,))
  def repeat_row(z, o):
    v = z[...] * 2
    o[...] = jnp.repeat(v, r, axis=axis) if jn else ml.repeat(v, r, axis=axis)
  return repeat_row


@pytest.mark.parametrize("shape, r, axis", [((1, 8), 8, 1), ((1, 16), 4, 1), ((1, 64), 2, 1), ((1, 32), 8, 1),
                                            ((1, 8), 16, 0), ((1, 32), 4, 0), ((8, 1), 8, 0), ((2, 8), 8, 1),
                                            ((4, 16), 2, 1), ((1, 1, 16), 4, 2)])
@pytest.mark.parametrize("jn", [False, True])
def test_repeat_of_a_row(shape, r, axis, jn):
  """A (1, n) row repeated along its columns (AWQ's group row of zero words made BN wide) or its one row was MG204
  naming a (1, n, 1) (or (1, 1, n)) the kernel never wrote: it is its vector's repeat (or broadcast) now."""
  z = np.arange(np.prod(shape), dtype=np.int32).reshape(shape) - 7
  k = _repeat_kernel(shape, r, axis, jn)
  np.testing.assert_array_equal(np.asarray(k(z, interpret=True)), np.repeat(z * 2, r, axis))
  jax.export.export(jax.jit(k), platforms=["cuda"])(S(shape, I32)).mlir_module()


@mg.mgpu_kernel(out_shape=lambda qz: S((256, 64), F32), grid=lambda qz: (1, qz.shape[1] // 8))
def two_groups_beside_a_table(qz, o):
  """AWQ's two (1, 8) rows of zero words of a 64-row k tile at group 32, made (64, 64) and shifted by AWQ's table."""
  j = ml.program_id(1)
  order = ((ml.arange(0, 2) * 4)[None, :] + ml.arange(0, 4)[:, None]).reshape(8)
  shifts = ml.broadcast_to((order * 4)[None, :], (64 * 8, 8)).reshape(64, 64)
  for t in ml.range(4):
    z = ml.repeat(qz.at[ml.ds(t * 2, 2), ml.ds(j * 8, 8)][...], 8, axis=1)      # (2, 64)
    z = ml.repeat(z, 32, axis=0)                                                   # (64, 64)
    o.at[ml.ds(t * 64, 64)][...] = ((z >> shifts) & 0xF).astype(F32)


def test_a_few_short_rows_repeated_beside_a_shift_table():
  """It was MG204 "z of shape (8,) comes from or goes to a window strided in its last dimension": the joined (2, 8, 8)
  moved the rows' (8,) vectors through windows strided in their last axis. Each row is repeated as a vector now."""
  qz = np.random.default_rng(0).integers(-2 ** 31, 2 ** 31, (8, 8), dtype=np.int64).astype(np.int32)
  got = np.asarray(two_groups_beside_a_table(qz, interpret=True))
  order = np.array([0, 4, 1, 5, 2, 6, 3, 7]) * 4
  want = np.concatenate([np.repeat(np.repeat(qz[2 * t:2 * t + 2], 8, 1), 32, 0) for t in range(4)])
  want = (want.view(np.uint32) >> np.tile(order, 8)[None, :]) & 0xF
  np.testing.assert_array_equal(got, want.astype(np.float32))
  jax.export.export(jax.jit(two_groups_beside_a_table), platforms=["cuda"])(S(qz.shape, I32)).mlir_module()


# ---------------------------------------------------------------- reductions of a 3-D tensor with unit axes
def _gemv_kernel(variant):
  @mg.mgpu_kernel(out_shape=lambda x, w: S((1, w.shape[1]), F32), grid=(1,))
  def gemv_one_token(x, w, o):
    acc = ml.zeros((1, w.shape[1]), F32)
    for k in range(x.shape[1] // 16):
      xv = x.at[:, ml.ds(k * 16, 16)][...]               # (1, 16): a batch of one token
      wv = w.at[ml.ds(k * 16, 16)][...]                  # (16, n)
      if variant == "middle":
        acc += ml.sum(xv[:, :, None] * wv[None, :, :], axis=1)
      elif variant == "keepdims":
        acc += jnp.sum(xv[:, :, None] * wv[None, :, :], axis=1, keepdims=True)[:, 0, :]
      else:                                              # w stored (n, k) read transposed: the last axis
        acc += ml.max(xv[:, None, :] * wv.T[None, :, :], axis=2) + 0.0 * acc
    o[...] = acc
  return gemv_one_token


@pytest.mark.parametrize("variant", ["middle", "keepdims", "last"])
@pytest.mark.parametrize("n", [32, 128])
def test_a_batch_of_one_reduced_in_a_loop(variant, n):
  """A decode GEMV of one token, `acc += ml.sum(x[:, :, None] * w[None, :, :], axis=1)` in a loop: the (1, k, n)
  product's middle-axis reduction was a scan holding the (1, n) result as a row of the 3-D tensor, MG204 ("meets a
  row-wise tile through its size-1 axes") where the loop carried it. It is the reduction of the (k, n) squeeze."""
  rng = np.random.default_rng(n)
  x, w = rng.standard_normal((1, 64)).astype(np.float32), rng.standard_normal((64, n)).astype(np.float32)
  k = _gemv_kernel(variant)
  got = np.asarray(k(x, w, interpret=True))
  prods = [x[:, s:s + 16, None] * w[None, s:s + 16, :] for s in range(0, 64, 16)]
  want = sum(p.max(axis=1) if variant == "last" else p.sum(axis=1) for p in prods)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  jax.export.export(jax.jit(k), platforms=["cuda"])(S(x.shape, F32), S(w.shape, F32)).mlir_module()


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["middle", "last"])
def test_gpu_a_batch_of_one_reduced_in_a_loop(variant):
  rng = np.random.default_rng(5)
  x, w = rng.standard_normal((1, 64)).astype(np.float32), rng.standard_normal((64, 128)).astype(np.float32)
  k = _gemv_kernel(variant)
  np.testing.assert_allclose(np.asarray(jax.jit(k)(x, w)), np.asarray(k(x, w, interpret=True)), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_gpu_repeat_of_rows():
  qz = np.random.default_rng(1).integers(-2 ** 31, 2 ** 31, (8, 8), dtype=np.int64).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(jax.jit(two_groups_beside_a_table)(qz)),
                                np.asarray(two_groups_beside_a_table(qz, interpret=True)))
  z = np.arange(8, dtype=np.int32).reshape(1, 8)
  k = _repeat_kernel((1, 8), 8, 1, False)
  np.testing.assert_array_equal(np.asarray(jax.jit(k)(z)), np.repeat(z * 2, 8, 1))


# ---------------------------------------------------------------- the hint of a register product summed over its last axis
@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32), grid=(1,))
def gemv_tokens_k_last(x, w, y):
  xv = x[...]
  wv = w[...]
  y[...] = ml.sum(xv[:, None, :] * wv.T[None, :, :], axis=2)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32), grid=(1,))
def gemv_tokens_hint_followed(x, w, y):
  wv = w[...]
  xv_s = ml.smem((64, 128), jnp.float32)
  ml.copy(x.at[ml.ds(0, 64), :], xv_s)
  wv_s = ml.smem((64, 128), jnp.float32)
  wv_s[...] = ml.concatenate([wv.T, ml.zeros((48, 128), jnp.float32)], axis=0)
  s = ml.dot(xv_s, wv_s.T)
  y.at[ml.ds(0, 64), ml.ds(0, 64)].store(s, mask=(ml.arange(64)[:, None] < 2) & (ml.arange(64)[None, :] < 16))


def test_product_hint_copies_a_read_from_its_ref_and_reads_a_transposed_b_plainly():
  """Two decode tokens against a register tile's transpose, summed over k (a (2, 16) result no register tensor
  holds): the hint copied `xv` by TMA (`ml.copy(xv.at[...], xv_s)`: xv is a register tensor, the whole read of x),
  called the product `xv @ wv.T.T` and stored into `out`, a name the kernel does not have. It copies x, the ref xv
  was read from, says `xv @ wv`, and names the kernel's output y; the hinted kernel computes x @ w."""
  from locate import expect
  specs = (S((2, 128), F32), S((128, 16), F32))
  e = expect(gemv_tokens_k_last, specs, mg.LayoutError, "ml.sum(",
             "ml.sum over axis 2 of a 3-D tensor (2, 16, 128): partial reductions work on 1-D and 2-D tensors")
  assert e.hint.startswith(
      "this is xv @ wv, which ml.dot computes on the tensor cores: put the operands in SMEM buffers of 64 and 64"
      " rows, ml.copy(x.at[ml.ds(0, 64), :], xv_s) (zeros past the array's last row); wv_s = ml.smem((64, 128),"
      " jnp.float32); wv_s[...] = ml.concatenate([wv.T, ml.zeros((48, 128), jnp.float32)], axis=0), then s ="
      " ml.dot(xv_s, wv_s.T), a (64, 64) product, then y.at[ml.ds(0, 64), ml.ds(0, 64)].store(s,"
      " mask=(ml.arange(64)[:, None] < 2) & (ml.arange(64)[None, :] < 16))"), e.hint
  assert "ml.copy(xv" not in e.hint and ".T.T" not in e.hint
  rng = np.random.default_rng(3)
  x, w = rng.standard_normal((2, 128)).astype(np.float32), rng.standard_normal((128, 16)).astype(np.float32)
  got = np.asarray(gemv_tokens_hint_followed(x, w, interpret=True))
  np.testing.assert_allclose(got, x @ w, rtol=0, atol=0.05)          # (TF32 operands, as the hint says)
  jax.export.export(jax.jit(gemv_tokens_hint_followed), platforms=["cuda"])(*specs).mlir_module()


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32), grid=(1,))
def gemv_scaled_tokens(x, w, y):
  xs = x[...] * 2.0                                        # computed in registers: no ref holds it
  wv = w[...]
  y[...] = ml.sum(xs[:, None, :] * wv.T[None, :, :], axis=2)


def test_product_hint_stores_an_operand_computed_in_registers():
  """An operand computed in registers and bound to a name: the hint stores it into its buffer (before, it was copied
  by TMA, `ml.copy(xs.at[ml.ds(0, 64), :], xs_s)`, of a name that is no ref)."""
  from locate import expect
  e = expect(gemv_scaled_tokens, (S((2, 128), F32), S((128, 16), F32)), mg.LayoutError, "ml.sum(",
             "ml.sum over axis 2 of a 3-D tensor (2, 16, 128): partial reductions work on 1-D and 2-D tensors")
  assert ("xs_s = ml.smem((64, 128), jnp.float32); xs_s[...] = ml.concatenate([xs, ml.zeros((62, 128),"
          " jnp.float32)], axis=0)") in e.hint, e.hint
  assert "ml.copy(xs" not in e.hint


def _unit_axes_reduction(shape, axis, keep, kind):
  out = np.zeros(shape).sum(axis=axis, keepdims=keep).shape

  @mg.mgpu_kernel(out_shape=lambda x: S(out, F32), grid=(1,))
  def reduce_with_unit_axes(x, o):
    v = x[...] * 2.0
    o[...] = ml.sum(v, axis=axis, keepdims=keep) if kind == "sum" else ml.max(v, axis=axis, keepdims=keep)
  return reduce_with_unit_axes


@pytest.mark.parametrize("shape, axis", [((2, 1, 64), 0), ((1, 64, 64), 1), ((1, 16, 128), 2), ((4, 1, 1, 32), 3),
                                         ((1, 2, 1, 64), 1), ((1, 128, 1), 1)])
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("kind", ["sum", "max"])
def test_reductions_of_tensors_with_unit_axes(shape, axis, keep, kind):
  """Reductions of a 3-D or 4-D tensor whose other axes are of size 1 compute as the 2-D squeeze's ((2, 1, 64) over
  axis 0 was MG204 before)."""
  x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
  k = _unit_axes_reduction(shape, axis, keep, kind)
  want = getattr(np, kind)(x * 2, axis=axis, keepdims=keep)
  np.testing.assert_allclose(np.asarray(k(x, interpret=True)), want, rtol=1e-5, atol=1e-5)
  jax.export.export(jax.jit(k), platforms=["cuda"])(S(shape, F32)).mlir_module()


# ---------------------------------------------------------------- MG402 of a pipelined wide dot: the scratch's own hint
@mg.mgpu_kernel(out_shape=lambda x, w, g, **k: S((x.shape[0], w.shape[1]), jnp.bfloat16),
                grid=lambda x, w, g, *, bm, **k: (x.shape[0] // bm,), block=256)
def rmsnorm_512_split(x, w, g, o, *, bm: ml.constexpr, bk: ml.constexpr):
  """The hint followed: one accumulator a 256-column piece, the row statistic summed over both."""
  i = ml.program_id(0)
  x_s, w_s = ml.smem((bm, bk), jnp.bfloat16), ml.smem((bk, 512), jnp.bfloat16)
  acc0 = ml.zeros((bm, 256), F32)
  acc1 = ml.zeros((bm, 256), F32)
  for k in ml.range(x.shape[1] // bk, stages=2):
    ml.copy(x.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], x_s)
    ml.copy(w.at[ml.ds(k * bk, bk), :], w_s)
    acc0 = ml.dot(x_s, w_s.at[:, 0:256], acc0)
    acc1 = ml.dot(x_s, w_s.at[:, 256:512], acc1)
  rstd = ml.rsqrt((ml.sum(acc0 * acc0, axis=1) + ml.sum(acc1 * acc1, axis=1)) / 512 + 1e-6)
  gv = g[...].astype(F32)
  o.at[ml.ds(i * bm, bm), 0:256][...] = (acc0 * rstd[:, None] * gv[None, 0:256]).astype(jnp.bfloat16)
  o.at[ml.ds(i * bm, bm), 256:512][...] = (acc1 * rstd[:, None] * gv[None, 256:512]).astype(jnp.bfloat16)


@pytest.mark.parametrize("n, first, second", [(512, 256, 512), (384, 192, 384)])
def test_a_pipelined_wide_dot_past_smem_gets_the_wide_dot_hint(n, first, second):
  """An RMS-norm epilogue whose tile spans a row of 512 (or 384) columns, in a pipelined loop: the joined product's
  wide dot scratch (256 KiB) is the largest buffer, and no stage count fits. The hint was 'use smaller tiles: ...
  cutting the kernel's own to an eighth' (x_s and w_s, not the scratch); it is the wide dot's, with the pieces the
  compiler splits n into, and written out (n = 512) it computes."""
  from locate import expect
  from probe68b_fused import _rms_ref, gemm_row_rmsnorm, normal
  specs = (S((256, 128), jnp.bfloat16), S((128, n), jnp.bfloat16), S((n,), jnp.bfloat16))
  e = expect(gemm_row_rmsnorm, specs, mg.SmemCapacityError, "ml.dot(x_s, w_s, acc)",
             f"the kernel's SMEM needs {427008 if n == 512 else 328704} bytes (x_s 32 KiB, w_s {n // 4} KiB, wide dot"
             f" scratch {n // 2} KiB, plus barriers and alignment), more than the 232432 bytes (227 KiB less 16 bytes)"
             f" a kernel's buffers can use", bm=128, bk=64)
  assert e.hint == (
      f"split the dot by hand, or compute fewer rows per program: a buffer of {n // 2} KiB without which the kernel"
      " fits, wide dot scratch, joins the products of an ml.dot of more than 256 columns, which the tensor cores compute 256 columns at a time; one"
      f" accumulator a piece needs no join (acc0 = ml.dot(a, b_s.at[:, 0:{first}], acc0), acc1 = ml.dot(a,"
      f" b_s.at[:, {first}:{second}], acc1), or b_s.at[0:{first}].T of a buffer stored (n, k)), each stored into its"
      " columns of the output"), e.hint
  if n == 512:
    rng = np.random.default_rng(4)
    args = (normal(rng, (256, 128), jnp.bfloat16), normal(rng, (128, 512), jnp.bfloat16, 0.1),
            normal(rng, (512,), jnp.bfloat16))
    with warnings.catch_warnings():     # (128 x 512 float32 on two warpgroups spills: MG403 says so, as it should)
      warnings.simplefilter("ignore", mg.RegisterSpillWarning)
      got = rmsnorm_512_split(*args, bm=128, bk=64, interpret=True)
      assert _relerr(got, _rms_ref(*args)) <= 1e-2
      jax.export.export(jax.jit(lambda *a: rmsnorm_512_split(*a, bm=128, bk=64)), platforms=["cuda"])(*specs)


def _vector_repeat(n, r):
  @mg.mgpu_kernel(out_shape=lambda z: S((n * r,), F32), grid=(1,))
  def repeat_vector(z, o):
    o[...] = ml.repeat(z[...] * 2.0, r)
  return repeat_vector


@pytest.mark.parametrize("n, r", [(40, 4), (48, 3), (48, 4), (64, 3), (96, 2), (96, 3), (200, 2), (200, 8), (24, 8),
                                  (8, 8), (64, 2)])
def test_repeat_of_a_vector_into_no_multiple_of_128(n, r):
  """A vector repeated into more than 128 elements that are no multiple of 128 (a (40,) vector of per-channel scales 4
  times, 160) was MG204 naming the joined (40, 4) columns; it is the register gather v[ml.arange(n * r) // r], as a
  vector of a length no multiple of 8 was (probe 57c). The joins that hold a layout keep their form."""
  z = np.arange(n, dtype=np.float32) - 5
  k = _vector_repeat(n, r)
  np.testing.assert_array_equal(np.asarray(k(z, interpret=True)), np.repeat(z * 2, r))
  jax.export.export(jax.jit(k), platforms=["cuda"])(S(z.shape, F32)).mlir_module()
