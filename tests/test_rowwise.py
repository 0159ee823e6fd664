"""The row-wise examples (softmax, layer norm with its backward, RMS norm): interpret mode against
jnp on the CPU, the same on the GPU (-m gpu)."""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import layernorm as LN  # noqa: E402
import rmsnorm as RN  # noqa: E402
import softmax as SM  # noqa: E402
import rand as rnd

F32, BF16 = jnp.float32, jnp.bfloat16
TOL = {F32: 2e-5, BF16: 2e-2}


def rand(key, shape, dtype, scale=1.0, shift=0.0):
  return jnp.asarray((rnd.numpy_normal(key, shape) * scale + shift).astype(jnp.dtype(dtype)))


def close(got, want, dtype, rel=False):
  got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
  if rel:
    got, want = got / (np.abs(want).max() + 1e-12), want / (np.abs(want).max() + 1e-12)
  np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype])


SOFTMAX_SHAPES = [(64, 1024), (16, 4096), (4, 16384), (2, 32768)]


@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
@pytest.mark.parametrize("shape", SOFTMAX_SHAPES, ids=str)
def test_softmax_interpret_matches_jax_at_huge_logits(shape, dtype):
  x = rand(0, shape, dtype, scale=1e4)
  got = SM.softmax(x, interpret=True)
  assert np.isfinite(np.asarray(got, np.float32)).all()
  close(got, jax.nn.softmax(x.astype(F32), axis=-1), dtype)


def test_long_rows_are_held_in_smem():
  # float32 rows past 96 KiB: part in registers, so two CTAs share an SM
  assert SM.config((2, 32768)) == (SM.softmax_mixed_rows, {"chunks": 16, "in_regs": 6})
  assert SM.config((2, 16384))[0] is not SM.softmax_mixed_rows     # 64 KiB rows: three CTAs an SM anyway
  assert SM.config((2, 32768), 2) == (SM.softmax_smem_rows, {"chunks": 8, "parts": 1})
  assert SM.config((2, 65536)) == (SM.softmax_smem_rows, {"chunks": 8, "parts": 2})   # a cluster of 2
  assert SM.config((2, 8192 * 16))[1] == {"chunks": 8, "parts": 4}
  assert SM.config((2, 8192 * 64))[0] is SM.softmax_long_rows       # more than 8 parts: two passes
  assert SM.config((64, 1024)) == (SM.softmax_rows, {"rows": 4})
  assert SM.config((64, 8192), 2) == (SM.softmax_smem_rows, {"chunks": 8, "parts": 1})   # measured faster
  assert SM.config((64, 8192), 4)[0] is SM.softmax_rows
  assert SM.config((64, 4096), 2)[0] is SM.softmax_rows


@pytest.mark.parametrize("parts,online", [(1, False), (2, False), (4, True), (1, True)])
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_smem_held_rows_match_jax_with_masked_entries(dtype, parts, online):
  x = rand(6, (3, 4096), dtype, scale=30.0).at[1, :700].set(-jnp.inf).at[2, 5:].set(-jnp.inf)
  x = x.at[0, -9].set(1e4)                     # row 0's max in its last chunk
  got = SM.softmax_smem(x, parts=parts, online=online, chunks=4, interpret=True)
  close(got, jax.nn.softmax(x.astype(F32), axis=-1), dtype)


def test_smem_held_rows_keep_every_chunk_load_in_flight_and_overlap_the_stores():
  ir = SM.softmax_smem_rows.typed_ir(jax.ShapeDtypeStruct((4, 32, SM.SEG), F32), chunks=4)
  lines = [l.strip() for l in ir.splitlines()]
  loads = [i for i, l in enumerate(lines) if l.startswith("copy") and "slot=-1" not in l]
  waits = [i for i, l in enumerate(lines) if l.startswith("waitload")]
  assert len(loads) == 4 and len(waits) == 4 and max(loads) < min(waits)    # all four issued first
  stores = [i for i, l in enumerate(lines) if l.startswith("copy") and "slot=-1" in l]
  assert len(stores) == 4
  between = lines[stores[0]:stores[-1]]
  assert not any(l.startswith("awaitstores") for l in between)    # chunk c + 1 written while c is stored
  assert lines[-1].startswith("awaitstores read_only=True pending=0")


@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_two_pass_softmax_for_rows_too_long_for_a_cluster(dtype):
  x = rand(5, (2, 8192), dtype, scale=1e4)
  close(SM.softmax_long_rows(x, rows=1, interpret=True), jax.nn.softmax(x.astype(F32), axis=-1), dtype)


def _layernorm_case(dtype, n=64, d=512):
  k = rnd.split(rnd.key(1), 4)
  x = (rnd.normal(k[0], (n, d), F32) * 3 + 1).astype(dtype)
  w = rnd.normal(k[1], (d,), dtype)
  b = rnd.normal(k[2], (d,), dtype)
  dy = rnd.normal(k[3], (n, d), dtype)
  return x, w, b, dy


def _grads(fn, x, w, b, dy):
  return jax.grad(lambda x, w, b: jnp.sum(fn(x, w, b).astype(F32) * dy.astype(F32)), argnums=(0, 1, 2))(x, w, b)


@pytest.mark.parametrize("n,d", [(64, 512), (8, 1024)])     # 8 rows: fewer partial sums than 8
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_layernorm_forward_and_grad_interpret(dtype, n, d):
  x, w, b, dy = _layernorm_case(dtype, n, d)
  close(LN.layernorm(x, w, b, 1e-5, True), LN.reference(x, w, b), dtype)
  got = _grads(lambda x, w, b: LN.layernorm(x, w, b, 1e-5, True), x, w, b, dy)
  want = _grads(LN.reference, x, w, b, dy)
  for g, r in zip(got, want):
    close(g, r, dtype, rel=True)


def test_layernorm_forward_writes_mean_and_rstd():
  x, w, b, _ = _layernorm_case(F32)
  y, mean, rstd = LN.layernorm_fwd(x, w, b, rows=4, eps=1e-5, interpret=True)
  np.testing.assert_allclose(mean, x.mean(-1), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(rstd, jax.lax.rsqrt(x.var(-1) + 1e-5), rtol=1e-5)


@pytest.mark.parametrize("parts,center", [(1, True), (2, True), (4, False)])
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_smem_held_layernorm_rows_match_the_reference(dtype, parts, center):
  """Rows far from zero (mean 100, std 3): the variance is taken about each part's mean and the
  parts combined exactly (a sum of squares minus the squared mean would lose it in float32)."""
  x, w, b, _ = _layernorm_case(dtype, 3, 4096)
  x = (x.astype(F32) + 100).astype(dtype)
  y, mean, rstd = LN.layernorm_smem(x, w, b, 1e-5, center=center, parts=parts, interpret=True)
  xf = x.astype(F32)
  mu = xf.mean(-1) if center else jnp.zeros(xf.shape[0])
  var = ((xf - mu[:, None]) ** 2).mean(-1)
  want = (xf - mu[:, None]) * jax.lax.rsqrt(var + 1e-5)[:, None] * w.astype(F32)
  close(y, want + b.astype(F32) if center else want, dtype)
  np.testing.assert_allclose(mean, mu, rtol=1e-6, atol=1e-5)
  np.testing.assert_allclose(rstd, jax.lax.rsqrt(var + 1e-5), rtol=1e-5)


def test_long_rows_take_the_smem_forward_and_the_windowed_backward():
  assert LN.smem_config(32768, 4) == (8, 1) and LN.smem_config(65536, 4) == (8, 2)
  assert LN.smem_config(32768 + 128, 4) is None                    # not whole 256-column segments
  assert LN._bwd_cols_config(1024, 32768) == (16, 8)               # 1024 programs of 16 rows, 2048 columns
  x, w, b, dy = _layernorm_case(F32, 4, 32768)
  seen = []
  spy = lambda k: (lambda *a, **kw: seen.append(k.__name__) or k(*a, **kw))
  orig = {k: getattr(LN, k) for k in ("layernorm_smem_rows", "layernorm_fwd", "layernorm_bwd_stats",
                                      "layernorm_bwd_cols", "layernorm_bwd")}
  try:
    for k, f in orig.items():
      setattr(LN, k, spy(f))
    _grads(lambda x, w, b: LN.layernorm(x, w, b, 1e-5, True), x, w, b, dy)
  finally:
    for k, f in orig.items():
      setattr(LN, k, f)
  assert seen == ["layernorm_smem_rows", "layernorm_bwd_stats", "layernorm_bwd_cols"]


@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
@pytest.mark.parametrize("n,d", [(16, 8192), (4, 32768)])
def test_layernorm_grads_of_long_rows_in_column_windows(n, d, dtype):
  x, w, b, dy = _layernorm_case(dtype, n, d)
  close(LN.layernorm(x, w, b, 1e-5, True), LN.reference(x, w, b), dtype)
  got = _grads(lambda x, w, b: LN.layernorm(x, w, b, 1e-5, True), x, w, b, dy)
  for g, r in zip(got, _grads(LN.reference, x, w, b, dy)):
    close(g, r, dtype, rel=True)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_rmsnorm_of_long_rows_interpret(dtype):
  x, w = rand(2, (2, 32768), dtype, shift=5.0), rand(3, (32768,), dtype)
  close(RN.rmsnorm(x, w, interpret=True), RN.reference(x, w), dtype)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_rmsnorm_interpret(dtype):
  x, w = rand(2, (64, 1024), dtype), rand(3, (1024,), dtype)
  close(RN.rmsnorm(x, w, interpret=True), RN.reference(x, w), dtype)


# ------------------------------------------------------------------ GPU
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
@pytest.mark.parametrize("shape", [(4096, 4096), (256, 16384), (128, 32768), (32768, 1024)], ids=str)
def test_softmax_gpu(shape, dtype):
  x = rand(0, shape, dtype, scale=1e4)
  close(jax.jit(SM.softmax)(x), jax.nn.softmax(x.astype(F32), axis=-1), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
@pytest.mark.parametrize("n,d", [(1024, 1024), (4096, 4096), (256, 8192), (256, 32768), (64, 65536)])
def test_layernorm_gpu(n, d, dtype):
  x, w, b, dy = _layernorm_case(dtype, n, d)
  close(jax.jit(LN.layernorm)(x, w, b), LN.reference(x, w, b), dtype)
  got = _grads(lambda x, w, b: LN.layernorm(x, w, b), x, w, b, dy)
  want = _grads(LN.reference, x, w, b, dy)
  for g, r in zip(got, want):
    close(g, r, dtype, rel=True)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
@pytest.mark.parametrize("n,d", [(4096, 4096), (128, 32768)])
def test_rmsnorm_gpu(n, d, dtype):
  x, w = rand(2, (n, d), dtype), rand(3, (d,), dtype)
  close(jax.jit(RN.rmsnorm)(x, w), RN.reference(x, w), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("parts,online", [(1, True), (2, False)])
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_smem_held_rows_gpu(dtype, parts, online):
  x = rand(7, (256, 32768), dtype, scale=1e4)
  got = jax.jit(lambda x: SM.softmax_smem(x, parts=parts, online=online))(x)
  close(got, jax.nn.softmax(x.astype(F32), axis=-1), dtype)


@pytest.mark.parametrize("chunks,in_regs", [(16, 6), (8, 3), (4, 3)])
def test_rows_partly_in_registers_match_jax(chunks, in_regs):
  x = rand(8, (3, 8192), F32, scale=30.0).at[1, :7000].set(-jnp.inf)
  x = x.at[0, -9].set(1e4).at[2, 3].set(1e4)   # row 0's max in a register chunk, row 2's in SMEM
  got = SM.softmax_mixed_rows(x.reshape(3, 32, SM.SEG), chunks=chunks, in_regs=in_regs, interpret=True)
  close(got.reshape(3, 8192), jax.nn.softmax(x, axis=-1), F32)


@pytest.mark.gpu
def test_rows_partly_in_registers_gpu():
  x = rand(9, (256, 32768), F32, scale=1e4)
  assert SM.config(x.shape)[0] is SM.softmax_mixed_rows
  close(jax.jit(SM.softmax)(x), jax.nn.softmax(x, axis=-1), F32)


@pytest.mark.gpu
def test_rowwise_gpu_matches_interpret_bitwise_close():
  x = rand(4, (64, 2048), F32, scale=30.0)
  np.testing.assert_allclose(SM.softmax(x), SM.softmax(x, interpret=True), rtol=1e-6, atol=1e-7)
