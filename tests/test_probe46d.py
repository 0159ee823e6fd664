"""Probe 46d (Liger-Kernel's LLM training kernels, forward and backward: RoPE in the half-rotation and interleaved
layouts over few heads, fused residual-add + RMSNorm, GeGLU/SwiGLU, cross-entropy chunks, KL and JSD, embeddings).

Each section says what was wrong: Triton's offsets with the start added after the broadcast (`d + offs[None, :]`)
were a gather and a scatter rather than the window they cover."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, BF16 = jnp.float32, jnp.bfloat16


def _rnd(shape, seed, dtype=np.float32):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _export(kernel, *args, **kw):
  specs = [S(np.shape(a), a.dtype) for a in args]
  kernel.check(*specs, **kw)
  jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*specs)


def _rope_ref(q, cos, sin):
  q = jnp.asarray(q, F32)
  d = q.shape[-1] // 2
  c, s = jnp.asarray(cos, F32)[:, None, :], jnp.asarray(sin, F32)[:, None, :]
  return jnp.concatenate([q[..., :d] * c - q[..., d:] * s, q[..., d:] * c + q[..., :d] * s], -1)


# ---------------------------------------------------------------- a run's start added after its broadcast
# Liger's RoPE addresses the second half of each head as `hd // 2 + offs[None, :]` (the start added to the
# broadcast run): that was no run, so the load was a gather and the bfloat16 store a scatter, MG204 (Hopper's
# bfloat16 atomic set pairs elements). Such offsets are now the window they cover, as `(hd // 2 + offs)[None, :]` was.
@mg.mgpu_kernel(out_shape=lambda q, cos, sin: q, grid=lambda q, cos, sin: (q.shape[0],))
def liger_rope(q, cos, sin, out, *, PAD_H: ml.constexpr = 8):
  t = ml.program_id(0)
  nh, hd = q.shape[1], q.shape[2]
  offs = ml.arange(hd // 2)
  c = cos.at[t, offs].load()[None, :]
  s = sin.at[t, offs].load()[None, :]
  heads = ml.arange(PAD_H)
  m = heads[:, None] < nh
  q1 = q.at[t, heads[:, None], offs[None, :]].load(mask=m, other=0.0).astype(jnp.float32)
  q2 = q.at[t, heads[:, None], hd // 2 + offs[None, :]].load(mask=m, other=0.0).astype(jnp.float32)
  out.at[t, heads[:, None], offs[None, :]].store((q1 * c - q2 * s).astype(out.dtype), mask=m)
  out.at[t, heads[:, None], hd // 2 + offs[None, :]].store((q2 * c + q1 * s).astype(out.dtype), mask=m)


@mg.mgpu_kernel(out_shape=lambda dq, cos, sin: dq, grid=lambda dq, cos, sin: (dq.shape[0],), input_output_aliases={0: 0})
def rope_backward_in_place(dq, cos, sin, out):
  t = ml.program_id(0)
  d = dq.shape[2] // 2
  offs = ml.arange(d)
  hs = ml.arange(dq.shape[1])[:, None]
  c = cos.at[t, offs].load()[None, :]
  s = sin.at[t, offs].load()[None, :]
  g1 = dq.at[t, hs, offs[None, :]].load().astype(jnp.float32)
  g2 = dq.at[t, hs, offs[None, :] + d].load().astype(jnp.float32)
  out.at[t, hs, offs[None, :]].store((g1 * c + g2 * s).astype(out.dtype))
  out.at[t, hs, offs[None, :] + d].store((g2 * c - g1 * s).astype(out.dtype))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2), x.dtype), grid=lambda x: (ml.cdiv(x.shape[0], 4),))
def geglu_packed(x, out):
  i = ml.program_id(0)
  d = x.shape[1] // 2
  rows = i * 4 + ml.arange(4)
  cols = ml.arange(d)
  m = rows[:, None] < x.shape[0]
  a = x.at[rows[:, None], cols[None, :]].load(mask=m, other=0.0).astype(jnp.float32)
  b = x.at[rows[:, None], d + cols[None, :] + 0].load(mask=m, other=0.0).astype(jnp.float32)
  y = 0.5 * a * (1 + ml.tanh(0.7978845608028654 * (a + 0.044715 * a * a * a))) * b
  out.at[rows[:, None], cols[None, :]].store(y.astype(out.dtype), mask=m)


def test_liger_rope_offsets_past_the_broadcast_are_windows():
  q, cos, sin = _rnd((12, 6, 64), 1, BF16), _rnd((12, 32), 2), _rnd((12, 32), 3)
  got = liger_rope(q, cos, sin, interpret=True)
  np.testing.assert_allclose(np.asarray(got, F32), np.asarray(_rope_ref(q, cos, sin).astype(BF16), F32), rtol=1e-2, atol=1e-2)
  _export(liger_rope, q, cos, sin)
  ir = liger_rope.typed_ir(S(q.shape, BF16), S(cos.shape, F32), S(sin.shape, F32))
  assert "gather" not in ir and "atomic" not in ir


def test_a_rope_backward_in_place_and_a_packed_geglu_read_and_write_windows():
  dq, cos, sin = _rnd((10, 8, 64), 4, BF16), _rnd((10, 32), 5), _rnd((10, 32), 6)
  want = jax.vjp(lambda q: _rope_ref(q, cos, sin), jnp.asarray(dq, F32))[1](jnp.asarray(dq, F32))[0]
  got = rope_backward_in_place(dq, cos, sin, interpret=True)
  np.testing.assert_allclose(np.asarray(got, F32), np.asarray(want.astype(BF16), F32), rtol=1e-2, atol=1e-2)
  _export(rope_backward_in_place, dq, cos, sin)
  x = _rnd((10, 256), 7, BF16)
  a, b = jnp.asarray(x[:, :128], F32), jnp.asarray(x[:, 128:], F32)
  got = geglu_packed(x, interpret=True)
  np.testing.assert_allclose(np.asarray(got, F32), np.asarray((jax.nn.gelu(a) * b).astype(BF16), F32), rtol=2e-2, atol=2e-2)
  assert "gather" not in geglu_packed.typed_ir(S(x.shape, BF16))


@pytest.mark.gpu
def test_liger_rope_offsets_past_the_broadcast_on_the_gpu():
  q, cos, sin = _rnd((40, 6, 64), 8, BF16), _rnd((40, 32), 9), _rnd((40, 32), 10)
  np.testing.assert_allclose(np.asarray(liger_rope(q, cos, sin), F32), np.asarray(liger_rope(q, cos, sin, interpret=True), F32),
                             rtol=1e-2, atol=1e-2)
  dq = _rnd((40, 8, 64), 11, BF16)
  np.testing.assert_allclose(np.asarray(jax.jit(rope_backward_in_place)(dq, cos, sin), F32),
                             np.asarray(rope_backward_in_place(dq, cos, sin, interpret=True), F32), rtol=1e-2, atol=1e-2)
  x = _rnd((37, 256), 12, BF16)
  np.testing.assert_allclose(np.asarray(geglu_packed(x), F32), np.asarray(geglu_packed(x, interpret=True), F32),
                             rtol=2e-2, atol=2e-2)
