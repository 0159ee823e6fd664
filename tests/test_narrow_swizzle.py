"""Tensor-core operands whose minor dimension is not a multiple of 128 bytes: a k of 16, 32, 48, 80 or 96
16-bit elements (head_dim 32, 80, 96), a B stored (k, n) of 16, 32 or 48 columns (a LoRA rank), 8-bit and
float32 k of 32 or 64 bytes. Their buffers, and every buffer their dots share, take the widest swizzle (128,
64 or 32 bytes) that divides those sizes; the examples' kernels keep 128 bytes (their MLIR is unchanged)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F16, F32 = jnp.float16, jnp.float32


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (a.shape[0] // 64,))
def ab(a, b, c):                          # B stored (k, n)
  i = ml.program_id(0)
  a_s, b_s = ml.smem((64, a.shape[1]), a.dtype), ml.smem(b.shape, b.dtype)
  ml.copy(a.at[ml.ds(i * 64, 64), :], a_s)
  ml.copy(b, b_s)
  c.at[ml.ds(i * 64, 64), :][...] = ml.dot(a_s, b_s)


@mg.mgpu_kernel(out_shape=lambda q, k, v: S(q.shape, F32), grid=lambda q, k, v: (q.shape[0] // 64,))
def attention_block(q, k, v, o):          # one key block: q @ k.T (k = head_dim), then p @ v (n = head_dim)
  i = ml.program_id(0)
  q_s, k_s, v_s = ml.smem((64, q.shape[1]), q.dtype), ml.smem(k.shape, k.dtype), ml.smem(v.shape, v.dtype)
  ml.copy(q.at[ml.ds(i * 64, 64), :], q_s)
  ml.copy(k, k_s)
  ml.copy(v, v_s)
  p = ml.softmax(ml.dot(q_s, k_s.T) * q.shape[1] ** -0.5, axis=-1)
  o.at[ml.ds(i * 64, 64), :][...] = ml.dot(p.astype(q.dtype), v_s)


@mg.mgpu_kernel(out_shape=lambda x, a, b: S((x.shape[0], b.shape[1]), F32), grid=lambda x, a, b: (x.shape[0] // 64,))
def lora(x, a, b, y):                     # x @ a @ b of rank r: n = r, then k = r with A from registers
  i = ml.program_id(0)
  x_s, a_s, b_s = ml.smem((64, x.shape[1]), x.dtype), ml.smem(a.shape, a.dtype), ml.smem(b.shape, b.dtype)
  ml.copy(x.at[ml.ds(i * 64, 64), :], x_s)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  y.at[ml.ds(i * 64, 64), :][...] = ml.dot(ml.dot(x_s, a_s).astype(x.dtype), b_s)


@mg.mgpu_kernel(out_shape=lambda a, b, *, bk: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b, *, bk: (a.shape[0] // 128,))
def pipelined(a, b, c, *, bk: ml.constexpr):
  i = ml.program_id(0)
  a_s, b_s = ml.smem((128, bk), a.dtype), ml.smem((bk, b.shape[1]), b.dtype)
  acc = ml.zeros((128, b.shape[1]), F32)
  for k in ml.range(a.shape[1] // bk, stages=3):
    ml.copy(a.at[ml.ds(i * 128, 128), ml.ds(k * bk, bk)], a_s)
    ml.copy(b.at[ml.ds(k * bk, bk), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c.at[ml.ds(i * 128, 128), :][...] = acc


@mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), jnp.int32))
def int8_abt(a, bt, c):
  a_s, b_s = ml.smem(a.shape, a.dtype), ml.smem(bt.shape, bt.dtype)
  ml.copy(a, a_s)
  ml.copy(bt, b_s)
  c[...] = ml.dot(a_s, b_s.T)


def _rand(shape, dtype, seed):
  return rand.normal(rand.key(seed), shape, dtype)


def _dot(a, b):
  return jnp.dot(a, b, preferred_element_type=F32)


def _cases():
  # (id, a function building (kernel, args, constexprs, expected)): the inputs are made when a test runs,
  # not when pytest collects the file (each xdist worker collects every file)
  def case(name, kernel, inputs, want, kw=None):
    return name, lambda: (kernel, inputs(), kw or {}, want(*inputs()))
  for k, n in ((16, 64), (32, 32), (96, 48), (64, 16), (80, 128)):
    yield case(f"ab k={k} n={n}", ab, lambda k=k, n=n: (_rand((128, k), F16, k), _rand((k, n), F16, n)), _dot)
  for d in (32, 80, 96):
    yield case(f"attention d={d}", attention_block, lambda d=d: tuple(_rand((128, d), F16, s) for s in (1, 2, 3)),
               lambda q, k, v: jax.nn.dot_product_attention(q[None, :, None], k[None, :, None],
                                                            v[None, :, None])[0, :, 0].astype(F32))
  for r in (16, 32):
    yield case(f"lora r={r}", lora,
               lambda r=r: (_rand((128, 128), F16, 4), _rand((128, r), F16, 5) / 8, _rand((r, 128), F16, 6)),
               lambda x, a, b: _dot(_dot(x, a).astype(F16), b))
  yield case("pipelined bk=32", pipelined, lambda: (_rand((256, 192), F16, 7), _rand((192, 48), F16, 8)), _dot,
             {"bk": 32})
  yield case("int8 k=32", int8_abt,
             lambda: (rand.randint(rand.key(9), (64, 32), -100, 100, jnp.int8),
                      rand.randint(rand.key(10), (64, 32), -100, 100, jnp.int8)),
             lambda a, bt: jnp.dot(a.astype(jnp.int32), bt.T.astype(jnp.int32)))


CASES = list(_cases())


@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[0] for c in CASES])
def test_narrow_operands_match_jnp_in_interpret_mode_and_export(case):
  kernel, args, kw, want = CASES[case][1]()
  np.testing.assert_allclose(np.asarray(kernel(*args, interpret=True, **kw), F32), want, rtol=2e-3, atol=2e-3)
  specs = [S(x.shape, x.dtype) for x in args]
  exported = jax.export.export(jax.jit(lambda *xs: kernel(*xs, **kw)), platforms=["cuda"])(*specs)
  assert "mosaic_gpu" in exported.mlir_module()


def test_each_dot_group_takes_the_widest_swizzle_that_divides_its_sizes():
  from mgpu_dsl import calling
  cases = {(16, 64): 32, (32, 32): 64, (96, 48): 32, (64, 128): 128, (128, 64): 128}
  for (k, n), want in cases.items():
    kernel = ab._compile(*calling.keyword_inputs(ab, (S((128, k), F16), S((k, n), F16)), {}))["kernel"]
    assert {layout.swizzle for layout in kernel.smem_layouts.values()} == {want}, (k, n)


def test_a_size_below_the_narrowest_swizzle_is_padded_with_zeros():
  """k = 8 and n = 24 float16 columns (16 and 48 bytes) are below or between the swizzles: MG501 until probe 47e,
  which pads them with zeros in registers (k: both operands; n: b's columns, the product's first 24 kept)."""
  rng = np.random.default_rng(2)
  for sa, sb in (((128, 8), (8, 64)), ((128, 64), (64, 24))):
    a, b = (jnp.asarray(rng.standard_normal(s), F16) for s in (sa, sb))
    np.testing.assert_allclose(np.asarray(ab(a, b, interpret=True)),
                               np.asarray(a, np.float32) @ np.asarray(b, np.float32), rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[0] for c in CASES])
def test_gpu_narrow_operands_match_jnp(case):
  kernel, args, kw, want = CASES[case][1]()
  got = jax.jit(lambda *xs: kernel(*xs, **kw))(*args)
  np.testing.assert_allclose(np.asarray(got, F32), want, rtol=2e-2, atol=2e-2)
