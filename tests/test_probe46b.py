"""Probe 46b (quantised and mixed-input matmuls): 8-bit A operands from registers. WGMMA reads an
int8 or float8 A from registers as it reads a 16-bit one (four bytes of a row a register), so
activations quantised in the kernel (per-token int8 or FP8), an FP8 attention's probabilities and
an int8 MLP's requantised hidden tile feed the tensor cores without a trip through SMEM (they were
MG106). Checked against NumPy in float64/int64 in interpret mode, in the Mosaic GPU module (the
8-bit instruction with register operands, no SMEM), in the CUDA export, and on the GPU."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, BF16, I8, I32 = jnp.float32, jnp.bfloat16, jnp.int8, jnp.int32
E4M3, E5M2 = jnp.float8_e4m3fn, jnp.float8_e5m2


def _data(rng, shape, dtype):
  if jnp.dtype(dtype) == jnp.int8:
    return jnp.asarray(rng.integers(-128, 128, shape, dtype=np.int8))
  return jnp.asarray(rng.standard_normal(shape, dtype=np.float32)).astype(dtype)


def _f64(x):
  return np.asarray(jnp.asarray(x).astype(F32) if jnp.asarray(x).dtype != I32 else x, np.float64)


def _export(kernel, *args, **constexprs):
  specs = [S(x.shape, x.dtype) for x in args]
  return jax.export.export(jax.jit(lambda *a: kernel(*a, **constexprs)), platforms=["cuda"])(*specs).mlir_module()


def _gpu_matches_interpret(kernel, args, rtol, **constexprs):
  got = jax.jit(lambda *a: kernel(*a, **constexprs))(*args)
  want = kernel(*args, interpret=True, **constexprs)
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  assert np.abs(got - want).max() <= rtol * np.abs(want).max()


# ---------------------------------------------------------------- an 8-bit A read from memory into registers
@mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), I32 if a.dtype == I8 else F32))
def register_a(a, bt, out):
  b_s = ml.smem(bt.shape)
  ml.copy(bt, b_s)
  x = a[...]
  out[...] = ml.dot(x, b_s.T)


@pytest.mark.parametrize("dtype,k", [(I8, 128), (I8, 64), (E4M3, 128), (E5M2, 96), (E4M3, 32)],
                         ids=["int8-k128", "int8-k64", "e4m3-k128", "e5m2-k96", "e4m3-k32"])
def test_an_8_bit_register_a_computes_the_product(dtype, k):
  rng = np.random.default_rng(0)
  a, bt = _data(rng, (64, k), dtype), _data(rng, (64, k), dtype)
  got, want = _f64(register_a(a, bt, interpret=True)), _f64(a) @ _f64(bt).T
  np.testing.assert_allclose(got, want, rtol=0 if dtype == I8 else 1e-6, atol=0 if dtype == I8 else 1e-5)


@pytest.mark.parametrize("dtype,instr", [(I8, "s32.s8.s8"), (E4M3, "f32.e4m3.e4m3")], ids=["int8", "e4m3"])
def test_the_module_feeds_the_8_bit_instruction_from_registers(dtype, instr):
  specs = [S((64, 128), dtype), S((64, 128), dtype)]
  text = register_a.mlir(*specs)
  wgmma = re.findall(r"wgmma\.mma_async[^;]*;", text)
  assert len(wgmma) == 4                                  # k = 128: four k-steps of 32
  # A in four 32-bit registers (four bytes of a row each), B by its SMEM descriptor
  assert all(re.match(rf"wgmma.mma_async.sync.aligned.m64n64k32.{instr} {{[$\d,]+}}, {{\$\d+,\$\d+,\$\d+,\$\d+}}, \$\d+,", w)
             for w in wgmma), wgmma[0]
  assert text.count("prmt.b32") == 16    # each A register gathered once: 64 x 128 bytes / 128 threads / 4 bytes
  _export(register_a, *(jnp.zeros(s.shape, s.dtype) for s in specs))


# ---------------------------------------------------------------- activations quantised in the kernel
@mg.mgpu_kernel(out_shape=lambda x, wt, sw: S((x.shape[0], wt.shape[0]), BF16),
                grid=lambda x, wt, sw: (x.shape[0] // 64, wt.shape[0] // 128))
def w8a8_dynamic(x, wt, sw, out):
  """Per-token int8 quantisation of bf16 activations fused into a W8A8 matmul (SmoothQuant's kernel)."""
  i, j = ml.program_id(0), ml.program_id(1)
  w_s = ml.smem((128, x.shape[1]), jnp.int8)
  ml.copy(wt.at[ml.ds(j * 128, 128), :], w_s)
  xv = x.at[ml.ds(i * 64, 64), :][...].astype(jnp.float32)
  sx = ml.max(ml.abs(xv), axis=1, keepdims=True) / 127.0
  xq = ml.round(xv / sx).astype(jnp.int8)
  acc = ml.dot(xq, w_s.T)
  sw_j = sw.at[ml.ds(j * 128, 128)][...]
  out.at[ml.ds(i * 64, 64), ml.ds(j * 128, 128)][...] = (acc.astype(jnp.float32) * sx * sw_j[None, :]).astype(out.dtype)


def _w8a8_reference(x, wt, sw):
  xv = np.asarray(x.astype(F32))
  sx = (np.abs(xv).max(1, keepdims=True) / np.float32(127.0)).astype(np.float32)
  xq = np.round(xv / sx).astype(np.float64)
  return (xq @ _f64(wt).T) * sx * _f64(sw)[None, :]


def test_per_token_int8_activations_quantised_in_the_kernel():
  rng = np.random.default_rng(1)
  x, wt = _data(rng, (128, 256), BF16), _data(rng, (256, 256), I8)
  sw = jnp.asarray(rng.uniform(0.001, 0.01, 256).astype(np.float32))
  got = _f64(w8a8_dynamic(x, wt, sw, interpret=True))
  want = _w8a8_reference(x, wt, sw)
  np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2 * np.abs(want).max())
  _export(w8a8_dynamic, x, wt, sw)


@mg.mgpu_kernel(out_shape=lambda x, wt: S((x.shape[0], wt.shape[0]), F32))
def fp8_dynamic(x, wt, out, *, fp8: ml.constexpr = E4M3, top: ml.constexpr = 448.0):
  """Per-token FP8 activation scaling (x * 448 / amax) in registers, the scale divided out after."""
  w_s = ml.smem(wt.shape)
  ml.copy(wt, w_s)
  xv = x[...].astype(jnp.float32)
  scale = top / ml.maximum(ml.max(ml.abs(xv), axis=1, keepdims=True), 1e-6)
  out[...] = ml.dot((xv * scale).astype(fp8), w_s.T) / scale


@pytest.mark.parametrize("fp8,top", [(E4M3, 448.0), (E5M2, 57344.0)], ids=["e4m3", "e5m2"])
def test_per_token_fp8_activations_quantised_in_the_kernel(fp8, top):
  rng = np.random.default_rng(2)
  x, wt = _data(rng, (64, 128), BF16), _data(rng, (64, 128), fp8)
  xv = np.asarray(x.astype(F32))
  scale = (np.float32(top) / np.maximum(np.abs(xv).max(1, keepdims=True), np.float32(1e-6))).astype(np.float32)
  xq = _f64(jnp.asarray(xv * scale).astype(fp8))
  want = (xq @ _f64(wt).T) / scale
  got = _f64(fp8_dynamic(x, wt, fp8=fp8, top=top, interpret=True))
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


# ---------------------------------------------------------------- 8-bit A made from a dot result
@mg.mgpu_kernel(out_shape=lambda q, k, vt: S((q.shape[0], vt.shape[0]), F32))
def fp8_attention(q, k, vt, out):
  """FP8 attention's second dot: the probabilities converted to e4m3 in the accumulator's registers,
  V stored (d, kv) as FP8 operands are K-major."""
  q_s, k_s, v_s = ml.smem(q.shape), ml.smem(k.shape), ml.smem(vt.shape)
  ml.copy(q, q_s)
  ml.copy(k, k_s)
  ml.copy(vt, v_s)
  s = ml.dot(q_s, k_s.T) * 0.125
  p = ml.exp(s - ml.max(s, axis=1, keepdims=True))
  out[...] = ml.dot(p.astype(jnp.float8_e4m3fn), v_s.T) / ml.sum(p, axis=1, keepdims=True)


def test_fp8_probabilities_from_registers():
  rng = np.random.default_rng(3)
  q, k, vt = _data(rng, (64, 128), E4M3), _data(rng, (128, 128), E4M3), _data(rng, (64, 128), E4M3)
  s = ((_f64(q) @ _f64(k).T) * 0.125).astype(np.float32)
  p = np.exp(s - s.max(1, keepdims=True)).astype(np.float32)
  want = (_f64(jnp.asarray(p).astype(E4M3)) @ _f64(vt).T) / p.sum(1, keepdims=True)
  np.testing.assert_allclose(_f64(fp8_attention(q, k, vt, interpret=True)), want, rtol=1e-4, atol=1e-5)
  _export(fp8_attention, q, k, vt)


@mg.mgpu_kernel(out_shape=lambda x, w1t, w2t: S((x.shape[0], w2t.shape[0]), I32))
def int8_mlp(x, w1t, w2t, out):
  """Two int8 layers: the first's int32 result requantised (relu, >> 8, clipped) to int8 in registers."""
  x_s, w1_s, w2_s = ml.smem(x.shape), ml.smem(w1t.shape), ml.smem(w2t.shape)
  ml.copy(x, x_s)
  ml.copy(w1t, w1_s)
  ml.copy(w2t, w2_s)
  h = ml.dot(x_s, w1_s.T)
  hq = ml.clip(ml.maximum(h, 0) >> 8, -128, 127).astype(jnp.int8)
  out[...] = ml.dot(hq, w2_s.T)


def test_an_int8_layer_requantised_in_registers_feeds_the_next():
  rng = np.random.default_rng(4)
  x, w1t, w2t = _data(rng, (64, 128), I8), _data(rng, (128, 128), I8), _data(rng, (64, 128), I8)
  h = (_f64(x) @ _f64(w1t).T).astype(np.int64)
  want = np.clip(np.maximum(h, 0) >> 8, -128, 127) @ _f64(w2t).T
  np.testing.assert_array_equal(_f64(int8_mlp(x, w1t, w2t, interpret=True)), want)
  _export(int8_mlp, x, w1t, w2t)


# ---------------------------------------------------------------- two warpgroups, a pipelined B
@mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), I32),
                grid=lambda a, bt: (a.shape[0] // 128, bt.shape[0] // 128), block=256)
def int8_register_a_pipelined(a, bt, out):
  i, j = ml.program_id(0), ml.program_id(1)
  b_s = ml.smem((128, 128), jnp.int8)
  acc = ml.zeros((128, 128), jnp.int32)
  for k in ml.range(a.shape[1] // 128, stages=2):
    ml.copy(bt.at[ml.ds(j * 128, 128), ml.ds(k * 128, 128)], b_s)
    acc = ml.dot(a.at[ml.ds(i * 128, 128), ml.ds(k * 128, 128)][...], b_s.T, acc)
  out.at[ml.ds(i * 128, 128), ml.ds(j * 128, 128)][...] = acc


def test_int8_register_a_split_between_two_warpgroups_in_a_pipelined_loop():
  rng = np.random.default_rng(5)
  a, bt = _data(rng, (256, 384), I8), _data(rng, (256, 384), I8)
  np.testing.assert_array_equal(_f64(int8_register_a_pipelined(a, bt, interpret=True)), _f64(a) @ _f64(bt).T)
  _export(int8_register_a_pipelined, a, bt)


# ---------------------------------------------------------------- a Triton port: tails on m, n and k
@mg.mgpu_kernel(out_shape=lambda a, bt, sa, sb: S((a.shape[0], bt.shape[0]), BF16),
                grid=lambda a, bt, sa, sb: (ml.cdiv(a.shape[0], 64), ml.cdiv(bt.shape[0], 64)))
def w8a8_masked(a, bt, sa, sb, c):
  """Triton's W8A8 matmul with masks on every side: rows of K = 200 int8 are not 16 bytes apart, so
  both tiles are read into registers under the masks (A passed as it is, B stored into its buffer)."""
  M, K = a.shape
  N = bt.shape[0]
  pid_m, pid_n = ml.program_id(0), ml.program_id(1)
  offs_m = pid_m * 64 + ml.arange(64)
  offs_n = pid_n * 64 + ml.arange(64)
  b_s = ml.smem((64, 128), jnp.int8)
  acc = ml.zeros((64, 64), jnp.int32)
  for k in range(ml.cdiv(K, 128)):
    offs_k = k * 128 + ml.arange(128)
    x = a.at[ml.ds(pid_m * 64, 64), ml.ds(k * 128, 128)].load(mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0)
    b_s[...] = bt.at[ml.ds(pid_n * 64, 64), ml.ds(k * 128, 128)].load(
        mask=(offs_n[:, None] < N) & (offs_k[None, :] < K), other=0)
    acc = ml.dot(x, b_s.T, acc)
  r = sa.at[ml.ds(pid_m * 64, 64)].load(mask=offs_m < M, other=0.0)
  q = sb.at[ml.ds(pid_n * 64, 64)].load(mask=offs_n < N, other=0.0)
  y = acc.astype(jnp.float32) * r[:, None] * q[None, :]
  c.at[ml.ds(pid_m * 64, 64), ml.ds(pid_n * 64, 64)].store(y.astype(c.dtype), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _w8a8_masked_operands(rng, m, n, k):
  return (_data(rng, (m, k), I8), _data(rng, (n, k), I8), jnp.asarray(rng.uniform(0.5, 2, m).astype(np.float32)),
          jnp.asarray(rng.uniform(0.001, 0.01, n).astype(np.float32)))


def test_a_triton_w8a8_port_with_tails_on_every_side():
  rng = np.random.default_rng(8)
  for m, n, k in ((37, 100, 200), (5, 64, 128)):
    a, bt, sa, sb = _w8a8_masked_operands(rng, m, n, k)
    want = (_f64(a) @ _f64(bt).T) * _f64(sa)[:, None] * _f64(sb)[None, :]
    got = _f64(w8a8_masked(a, bt, sa, sb, interpret=True))
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2 * np.abs(want).max())
  _export(w8a8_masked, a, bt, sa, sb)


# ---------------------------------------------------------------- what an int8 register A cannot take
def test_an_int8_register_a_with_k_of_32_is_read_from_smem():
  # (MG501 before probe 56a, whose hint staged it into SMEM: the compiler stages it now, as it does a float32 A)
  rng = np.random.default_rng(3)
  for m in (64, 16):
    a, bt = rng.integers(-100, 100, (m, 32)).astype(np.int8), rng.integers(-100, 100, (64, 32)).astype(np.int8)
    np.testing.assert_array_equal(register_a(a, bt, interpret=True), a.astype(np.int32) @ bt.astype(np.int32).T)
  _export(register_a, a, bt)


@mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], 64), I32))
def int8_register_a_narrow_b(a, bt, out):
  b_s = ml.smem(bt.shape)
  ml.copy(bt, b_s)
  out[...] = ml.dot(a.at[:, ml.ds(0, 64)][...], b_s.at[:, ml.ds(0, 64)].T)


def test_an_int8_register_a_beside_a_b_buffer_tiled_in_32_byte_rows_is_an_error():
  expect(int8_register_a_narrow_b, [S((64, 96), I8), S((64, 96), I8)], mg.MmaOperandError, "ml.dot(",
         "ml.dot takes an int8 operand a from registers only where b's buffer is tiled in rows of 64 bytes or"
         " more; b_s is tiled in rows of 32 bytes, the widest that divides its columns and the k of every dot"
         " that reads it",
         hint="give b_s and the k of its dots a multiple of 64 columns, or read a from SMEM (store it in an int8"
              " buffer and pass the buffer)")


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
@pytest.mark.parametrize("dtype,k,m,n", [(I8, 128, 64, 64), (I8, 256, 128, 128), (I8, 64, 64, 256),
                                         (E4M3, 128, 64, 64), (E4M3, 32, 128, 16), (E5M2, 96, 64, 32)], ids=str)
def test_gpu_an_8_bit_register_a_matches_numpy(dtype, k, m, n):
  rng = np.random.default_rng(6)
  a, bt = _data(rng, (m, k), dtype), _data(rng, (n, k), dtype)
  got, want = _f64(jax.jit(register_a)(a, bt)), _f64(a) @ _f64(bt).T
  # int8 sums exactly; Hopper's FP8 tensor cores add with fewer mantissa bits than float32
  np.testing.assert_allclose(got, want, rtol=0 if dtype == I8 else 2e-3, atol=0 if dtype == I8 else 2e-2)


@pytest.mark.gpu
def test_gpu_quantised_activations_and_8_bit_results_from_registers_match_interpret_mode():
  rng = np.random.default_rng(7)
  x, wt = _data(rng, (128, 256), BF16), _data(rng, (256, 256), I8)
  sw = jnp.asarray(rng.uniform(0.001, 0.01, 256).astype(np.float32))
  _gpu_matches_interpret(w8a8_dynamic, (x, wt, sw), 1e-2)
  # (the scales divide: the GPU's float32 division is within two ulp, so an element next to a rounding boundary of
  # float8's 3-bit mantissa can land on the other float8 value: 0.4 of 51.5 on the H200; a misplaced byte of the
  # register layout is an error the size of the result)
  _gpu_matches_interpret(fp8_dynamic, (_data(rng, (64, 128), BF16), _data(rng, (64, 128), E4M3)), 2e-2)
  q, k, vt = _data(rng, (64, 128), E4M3), _data(rng, (128, 128), E4M3), _data(rng, (64, 128), E4M3)
  _gpu_matches_interpret(fp8_attention, (q, k, vt), 2e-2)
  x, w1t, w2t = _data(rng, (64, 128), I8), _data(rng, (128, 128), I8), _data(rng, (64, 128), I8)
  _gpu_matches_interpret(int8_mlp, (x, w1t, w2t), 0)
  a, bt = _data(rng, (256, 384), I8), _data(rng, (256, 384), I8)
  _gpu_matches_interpret(int8_register_a_pipelined, (a, bt), 0)
  _gpu_matches_interpret(w8a8_masked, _w8a8_masked_operands(rng, 37, 100, 200), 1e-2)


# ---------------------------------------------------------------- a float A beside 8-bit b
@mg.mgpu_kernel(out_shape=lambda x, wt: S((x.shape[0], wt.shape[0]), F32))
def float_a_beside_8_bit_b(x, wt, out):
  w_s = ml.smem(wt.shape)
  ml.copy(wt, w_s)
  p = x[...].astype(jnp.float32) * 2.0
  out[...] = ml.dot(p, w_s.T)


def test_a_float32_register_a_beside_fp8_b_hints_the_fp8_conversion():
  expect(float_a_beside_8_bit_b, [S((64, 128), BF16), S((64, 128), E4M3)], mg.UnsupportedDtypeError,
         "ml.dot(p, w_s.T)", "ml.dot takes operand a from registers in bfloat16, float16 or b's 8-bit dtype"
         " (float8_e4m3fn) only, got p (float32)",
         hint="convert it to float8_e4m3fn: ml.dot(p.astype(jnp.float8_e4m3fn), ...) (past the type's largest"
              " value the conversion gives NaN or inf, as jnp's: scale values that may exceed it, and divide the product"
              " by the scale after)")      # (it saturated until probe 50e)


def test_a_float32_register_a_beside_int8_b_hints_the_int8_quantisation():
  expect(float_a_beside_8_bit_b, [S((64, 128), BF16), S((64, 128), I8)], mg.UnsupportedDtypeError,
         "ml.dot(p, w_s.T)", "ml.dot takes operand a from registers in bfloat16, float16 or b's 8-bit dtype"
         " (int8) only, got p (float32)",
         hint="quantise it to int8 with a scale per row and multiply the int32 product by the scale after: xf = p;"
              " s = ml.max(ml.abs(xf), axis=1, keepdims=True) / 127.0; ml.dot(ml.round(xf / s).astype(jnp.int8),"
              " ...).astype(jnp.float32) * s")
