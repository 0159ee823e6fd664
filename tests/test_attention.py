"""Flash attention (examples/attention.py): forward, logsumexp and gradients in interpret mode
against a float32 jnp reference, with logits that would overflow without the running max; CUDA
export of the forward and backward on the CPU; the GPU against the reference and the
interpreter (-m gpu)."""
import dataclasses
import math
import os
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import attention as ex  # noqa: E402
import attention_bwd as exb  # noqa: E402
import attention_ref as ref
import rand

S = jax.ShapeDtypeStruct
# Small tiles so that short sequences still take several pipelined steps.
SMALL = ex.Config(bq=128, bkv=64, stages=2, dkv_bq=128, dkv_bkv=128, dq_bkv=64)
TWO_KERNELS = ex.Config(bq=128, bkv=64, stages=2, fused_bwd=False, dkv_bq=64, dkv_bkv=128, dq_bkv=64)


def inputs(shape, kv_heads, dtype, scale=1.0, seed=0):
  # numpy's generator and casts: no XLA program to compile for each shape (the CI has two cores)
  b, s, h, d = shape
  rng = np.random.default_rng(seed)
  normal = lambda shp, sc=1.0: jnp.asarray((rng.standard_normal(shp, np.float32) * sc).astype(dtype))
  q = normal(shape, scale)
  k = normal((b, s, kv_heads, d), scale)
  v = normal((b, s, kv_heads, d))
  do = normal(shape)
  return q, k, v, do


# the reference as one program (and its vjp as two) rather than a dozen eager ops a call
reference = jax.jit(ex.reference, static_argnums=(3, 4))


def rel(got, want):
  got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
  return np.linalg.norm(got - want) / np.linalg.norm(want)


TOL = {jnp.float16: 5e-3, jnp.bfloat16: 3e-2}

# (id, shape (batch, seq, heads, head_dim), kv heads, dtype, causal, config)
SIMPLE = ex.Config(bq=128, bkv=64, stages=2, overlap=False, fused_bwd=False, dkv_bq=64, dkv_bkv=128, dq_bkv=64)
FORWARD = [
    ("f16_d64_gqa_overlap", (1, 256, 2, 64), 1, jnp.float16, False, SMALL),
    ("f16_d64_gqa_simple", (1, 256, 2, 64), 1, jnp.float16, False, SIMPLE),
    ("bf16_d128_causal_overlap", (1, 256, 2, 128), 2, jnp.bfloat16, True, SMALL),
    ("f16_d64_causal_gqa_wide_kv_simple", (2, 256, 2, 64), 1, jnp.float16, True,
     ex.Config(bq=128, bkv=128, stages=2, overlap=False, dkv_bq=128, dkv_bkv=128, dq_bkv=128)),
    ("f16_d64_causal_wide_kv_overlap", (1, 256, 1, 64), 1, jnp.float16, True,
     ex.Config(bq=128, bkv=128, stages=3, dkv_bq=128, dkv_bkv=128, dq_bkv=128)),
    ("bf16_d128_gqa_overlap_warp_specialized", (1, 256, 2, 128), 1, jnp.bfloat16, False,
     dataclasses.replace(SMALL, ws=True, bwd_ws=True)),
    # three warpgroups on 192 query rows; 320 = 192 + 128 rows: a partial last query tile
    ("f16_d64_gqa_three_warpgroups_partial_tile", (1, 320, 2, 64), 1, jnp.float16, False,
     ex.Config(bq=192, bkv=64, stages=3, overlap=False, ws=True)),
    ("bf16_d64_causal_three_warpgroups_partial_tile_overlap", (1, 320, 1, 64), 1, jnp.bfloat16, True,
     ex.Config(bq=192, bkv=64, stages=2)),
    ("f16_d128_causal_partial_tile", (1, 192, 1, 128), 1, jnp.float16, True,
     ex.Config(bq=128, bkv=64, stages=2, overlap=False)),
    # keys not a multiple of the key block: the last block partial (320 = 2 * 128 + 64; 448 = 2 * 192 + 64)
    ("f16_d64_partial_key_block_simple_ws", (1, 320, 2, 64), 1, jnp.float16, False,
     ex.Config(bq=128, bkv=128, stages=2, overlap=False, ws=True)),
    ("bf16_d64_partial_key_block_overlap", (1, 320, 2, 64), 2, jnp.bfloat16, False,
     ex.Config(bq=128, bkv=128, stages=2)),
    ("f16_d64_causal_partial_key_block", (1, 320, 1, 64), 1, jnp.float16, True,
     ex.Config(bq=128, bkv=128, stages=2, overlap=False, ws=True)),
    ("f16_d128_key_block_192", (1, 448, 2, 128), 1, jnp.float16, False,
     ex.Config(bq=128, bkv=192, stages=2, overlap=False, ws=True)),
]


@pytest.mark.parametrize("name,shape,kv_heads,dtype,causal,config", FORWARD, ids=[c[0] for c in FORWARD])
def test_forward_and_logsumexp_match_the_reference_with_overflowing_logits(name, shape, kv_heads, dtype,
                                                                           causal, config):
  q, k, v, _ = inputs(shape, kv_heads, dtype, scale=2.5)
  want, want_lse = ref.forward(q, k, v, causal, sm_scale=1.0)
  assert float(want_lse.max()) > 100      # exp of the raw logits overflows float32 (> 88.7)
  got, lse = ex.attention(q, k, v, causal, sm_scale=1.0, return_lse=True, config=config, interpret=True)
  assert got.shape == q.shape and got.dtype == dtype and lse.shape == (shape[0], shape[2], shape[1])
  assert rel(got, want) < TOL[dtype]
  np.testing.assert_allclose(lse, want_lse, rtol=1e-3, atol=1e-2)


GRADS = [
    ("f16_causal_gqa_fused", (1, 256, 2, 64), 1, jnp.float16, True, SMALL),
    ("bf16_d128_causal_gqa_fused_transposed_dq", (1, 256, 2, 128), 1, jnp.bfloat16, True,
     ex.Config(bq=128, bkv=64, stages=2, dkv_bq=64, dkv_bkv=128, dq_bkv=64)),
    ("f16_causal_gqa_two_kernels", (1, 256, 2, 64), 1, jnp.float16, True, TWO_KERNELS),
    ("bf16_full_two_kernels", (1, 128, 1, 64), 1, jnp.bfloat16, False, TWO_KERNELS),
    ("f16_causal_gqa_fused_warp_specialized", (1, 256, 2, 64), 1, jnp.float16, True,
     dataclasses.replace(SMALL, ws=True, bwd_ws=True)),
    ("f16_causal_two_kernels_warp_specialized", (1, 256, 1, 64), 1, jnp.float16, True,
     dataclasses.replace(TWO_KERNELS, ws=True, bwd_ws=True)),
    ("f16_full_three_warpgroups_forward", (1, 256, 2, 64), 1, jnp.float16, False, ex.default_config(64)),
    # the fused backward's dq_first order with the diagonal blocks in a loop of their own (split_mask):
    # key blocks with blocks after the diagonal and without (the second loop runs no step)
    ("f16_d64_causal_gqa_dq_first_split_mask", (1, 256, 2, 64), 1, jnp.float16, True,
     ex.default_config(64, True, 1024)),
    ("bf16_d128_causal_gqa_dq_first_split_mask", (1, 256, 2, 128), 1, jnp.bfloat16, True,
     ex.default_config(128, True)),
    # head_dim 128's default: ds from the 16-bit p (bwd_p16_ds), full and in bfloat16
    ("f16_d128_full_default_p16_ds", (1, 256, 1, 128), 1, jnp.float16, False, ex.default_config(128)),
    ("f16_d128_causal_split_mask_plain_order", (1, 256, 1, 128), 1, jnp.float16, True,
     dataclasses.replace(ex.default_config(128, True), bwd_dq_first=False)),
    ("f16_d64_causal_default_tiles_warp_specialized_one_loop", (1, 256, 2, 64), 1, jnp.float16, True,
     dataclasses.replace(ex.default_config(64, True), bwd_ws=True)),
    # the deferred backward with dP's product after dQ's store (bwd_dp_late: ptxas no longer serialises its
    # products, benchmarks/ptxas_report.py), full and causal across the diagonal loop and the one after it
    ("f16_d64_full_deferred_dp_late_p16", (1, 256, 2, 64), 1, jnp.float16, False,
     dataclasses.replace(ex.default_config(64, False, 4096), bwd_dp_late=True, bwd_p16_ds=True)),
    ("bf16_d64_causal_gqa_deferred_dp_late", (1, 512, 2, 64), 1, jnp.bfloat16, True,
     dataclasses.replace(ex.default_config(64, True, 4096), bwd_split_mask=True, bwd_p16_ds=False)),
    # head_dim 64's default backward under the mask: deferred in one loop (a run-time test per block), with dp_late
    # and p16_ds (ptxas_report.py: not serialised, 92 bytes spilled against 156 serialised in two loops); and the
    # two-loop order it replaced
    ("f16_d64_causal_gqa_deferred_one_loop", (1, 512, 2, 64), 1, jnp.float16, True, ex.default_config(64, True, 4096)),
    ("f16_d64_causal_deferred_split_mask", (1, 512, 1, 64), 1, jnp.float16, True,
     dataclasses.replace(ex.default_config(64, True, 4096), bwd_split_mask=True, bwd_dp_late=False, bwd_p16_ds=False)),
]


@pytest.mark.parametrize("name,shape,kv_heads,dtype,causal,config", GRADS, ids=[c[0] for c in GRADS])
def test_gradients_match_the_vjp_of_the_reference(name, shape, kv_heads, dtype, causal, config):
  q, k, v, do = inputs(shape, kv_heads, dtype)
  _, vjp = jax.vjp(lambda q, k, v: ex.attention(q, k, v, causal, config=config, interpret=True), q, k, v)
  _, vjp_ref = ref.vjp(q, k, v, causal)
  for got, want, what in zip(vjp(do), vjp_ref(do), "qkv"):
    assert got.shape == want.shape and got.dtype == dtype
    assert rel(got, want) < 4 * TOL[dtype], what


def test_cross_attention_with_more_keys_than_queries():
  q, _, _, do = inputs((1, 128, 2, 64), 1, jnp.float16, seed=3)
  _, k, v, _ = inputs((1, 256, 2, 64), 1, jnp.float16, seed=4)
  got, vjp = jax.vjp(lambda q, k, v: ex.attention(q, k, v, config=SMALL, interpret=True), q, k, v)
  want, vjp_ref = ref.vjp(q, k, v)
  assert rel(got, want) < TOL[jnp.float16]
  for g, w in zip(vjp(do), vjp_ref(do)):
    assert g.shape == w.shape and rel(g, w) < 4 * TOL[jnp.float16]


def test_gradient_flows_through_the_logsumexp():
  q, k, v, _ = inputs((1, 128, 1, 64), 1, jnp.float16)
  cfg = SMALL

  def loss(fn):
    def f(q, k, v):
      o, lse = fn(q, k, v)
      return (o.astype(jnp.float32) ** 2).sum() + (lse * jnp.linspace(-1, 1, lse.size).reshape(lse.shape)).sum()
    return f

  got = jax.grad(loss(lambda q, k, v: ex.attention(q, k, v, return_lse=True, config=cfg, interpret=True)),
                 argnums=(0, 1, 2))(q, k, v)
  want = jax.grad(loss(lambda q, k, v: reference(q, k, v)), argnums=(0, 1, 2))(q, k, v)
  for g, w in zip(got, want):
    assert rel(g, w) < 2e-2


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_forward_and_backward_export_for_cuda_with_default_tiles(head_dim, causal):
  spec_q = S((2, 1024, 4, head_dim), jnp.bfloat16)
  spec_kv = S((2, 1024, 2, head_dim), jnp.bfloat16)

  def loss(q, k, v):
    return ex.attention(q, k, v, causal).astype(jnp.float32).sum()

  exported = jax.export.export(jax.jit(jax.grad(loss, argnums=(0, 1, 2))), platforms=["cuda"])(
      spec_q, spec_kv, spec_kv)
  assert exported.mlir_module().count("mosaic_gpu") >= 2     # forward and backward kernels


def test_overlapped_forward_runs_the_softmax_under_p_at_v_and_redefines_p_after_its_wait():
  spec = S((1, 1024, 1, 128), jnp.float16)
  text = ex.forward_overlap.typed_ir(spec, spec, spec, bq=128, bkv=128, stages=3, causal=False, scale=0.1)
  loop = text[text.index("= for "):]
  loop = loop[:loop.index("yield values=[%")]                         # the body, to its yield
  ops = [line.split("= ")[-1].split()[0] if " = " in line else line.split()[0]
         for line in (x.strip() for x in loop.splitlines()[1:]) if line]
  waits = [i for i, op in enumerate(ops) if op == "dotwait"]
  dots = [i for i, op in enumerate(ops) if op == "dot"]
  assert dots[0] < dots[1] < waits[0]                                 # q @ k.T, then p @ v, both in flight
  assert loop[loop.index("dotwait"):].startswith("dotwait pending=1")  # the first wait leaves p @ v running
  assert "dotwait pending=1" in loop and "dotwait pending=0" in loop
  settle = [i for i in waits if i > dots[1]][-1]                      # p @ v done before p is redefined
  assert ops[dots[1]:settle].count("unary") >= 2                      # exp2s run under p @ v
  assert "cast" in ops[settle:] and "cast" not in ops[dots[0]:settle]


def test_forward_kernel_reads_k_transposed_and_p_from_registers():
  cfg = ex.default_config(128)
  text = ex.forward.typed_ir(S((1, 1024, 2, 128), jnp.float16), S((1, 1024, 1, 128), jnp.float16),
                             S((1, 1024, 1, 128), jnp.float16), bq=cfg.bq, bkv=cfg.bkv, stages=cfg.stages,
                             causal=True, scale=0.1)
  assert "transpose=True" in text and "exp2_approx" in text
  assert "ref<SMEM, 3x128x128, float16>" in text              # K and V pipelined three deep
  dots = [line for line in text.splitlines() if "= dot a=" in line]
  assert len(dots) == 2
  # P @ V takes A from a float16 register tensor, not from SMEM.
  assert any("float16, wgmma> = cast" in line for line in text.splitlines())


def test_three_warpgroup_forward_launches_384_threads_over_a_partial_last_tile():
  spec = S((1, 1000, 2, 64), jnp.float16)
  kv = S((1, 1024, 2, 64), jnp.float16)
  ir = ex.forward.typed_ir(spec, kv, kv, bq=192, bkv=128, stages=3, causal=False, scale=0.1, ws=True)
  assert "grid=(6, 2, 1) block=384" in ir       # ceil(1000 / 192) tiles; three compute warpgroups
  assert ex.default_config(64).bq == 192 and ex.default_config(64, causal=True).bq == 128


@pytest.mark.parametrize("causal", [False, True])
def test_query_tiles_as_the_slowest_grid_axis_compute_the_same(causal):
  q = rand.normal(rand.key(0), (2, 384, 4, 64), jnp.float16)
  k, v = (rand.normal(rand.key(i), (2, 384, 2, 64), jnp.float16) for i in (1, 2))
  base = dataclasses.replace(ex.default_config(64, causal), lpt=False)
  want = ex.attention(q, k, v, causal, config=base, interpret=True)
  got = ex.attention(q, k, v, causal, config=dataclasses.replace(base, lpt=True), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  ir = ex.forward.typed_ir(q, k, k, bq=base.bq, bkv=128, stages=3, causal=causal, scale=0.1, ws=True, lpt=True)
  assert f"grid=(4, 2, {384 // base.bq})" in ir     # (heads, batch, query tiles)
  assert ex.default_config(64, causal).lpt and not ex.default_config(128, causal).lpt


def test_bad_shapes_are_rejected_before_tracing():
  z = lambda *shape: np.zeros(shape, np.float16)
  with pytest.raises(ValueError, match="kv_heads dividing"):
    ex.attention(z(1, 128, 3, 64), z(1, 128, 2, 64), z(1, 128, 2, 64))
  with pytest.raises(ValueError, match="head_dim must be a multiple of 16 from 32 to 128, or 256, got 72"):
    ex.attention(z(1, 128, 2, 72), z(1, 128, 1, 72), z(1, 128, 1, 72))
  with pytest.raises(ValueError, match="head_dim must be a multiple of 16 from 32 to 128, or 256, got 160"):
    ex.attention(z(1, 128, 2, 160), z(1, 128, 1, 160), z(1, 128, 1, 160))
  with pytest.raises(ValueError, match="multiples of 128"):
    ex.attention(z(1, 256, 2, 64), z(1, 256, 1, 64), z(1, 256, 1, 64), config=ex.Config(bq=64, dkv_bq=128))
  with pytest.raises(ValueError, match="splits dQ's query rows"):      # a backward tile: checked in the backward
    jax.grad(lambda q: ex.attention(q, z(1, 256, 1, 64), z(1, 256, 1, 64), config=ex.Config(dkv_bq=64),
                                    interpret=True).astype(jnp.float32).sum())(z(1, 256, 2, 64))


# any sequence lengths, forward and backward: partial last query and key blocks (zero rows added
# where TMA needs a multiple of 8: lse's rows, and q, k, v's at head_dim 128 and 256)
ODD = [((1, 330, 2, 64), 1, 330, False), ((1, 330, 2, 64), 1, 330, True), ((1, 300, 2, 64), 2, 201, False),
       ((1, 200, 2, 128), 1, 328, False), ((1, 200, 1, 128), 1, 200, True),
       # not multiples of 8 at head_dim 128 and 256: zero rows added, the zero keys masked
       ((1, 97, 2, 128), 1, 203, False), ((1, 203, 1, 128), 1, 203, True), ((1, 97, 1, 256), 1, 97, False),
       # head_dim 48-112, several tiles a row (was MG401 inside the example)
       ((1, 90, 2, 48), 1, 90, True), ((1, 97, 2, 96), 1, 203, False), ((1, 203, 1, 112), 1, 203, True)]


# (in interpret mode on the CPU: one case of each padding path; every case compiled on the GPU)
ODD_CPU = [ODD[i] for i in (1, 2, 5, 7, 8, 10)]


@pytest.mark.parametrize("shape,kv_heads,kv_seq,causal", ODD_CPU, ids=str)
def test_gradients_at_sequence_lengths_that_are_not_multiples_of_the_blocks(shape, kv_heads, kv_seq, causal):
  _odd_lengths(shape, kv_heads, kv_seq, causal, interpret=True)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,kv_heads,kv_seq,causal", ODD, ids=str)
def test_gpu_gradients_at_sequence_lengths_that_are_not_multiples_of_the_blocks(shape, kv_heads, kv_seq, causal):
  _odd_lengths(shape, kv_heads, kv_seq, causal, interpret=False)


def _odd_lengths(shape, kv_heads, kv_seq, causal, interpret):
  q, _, _, do = inputs(shape, kv_heads, jnp.float16, seed=1)
  _, k, v, _ = inputs(shape[:1] + (kv_seq,) + shape[2:], kv_heads, jnp.float16, seed=2)
  config = ex.default_config(shape[-1], causal)
  out, vjp = jax.vjp(lambda q, k, v: ex.attention(q, k, v, causal, config=config, interpret=interpret), q, k, v)
  want, vjp_ref = (ref.vjp(q, k, v, causal) if interpret
                   else jax.vjp(lambda q, k, v: reference(q, k, v, causal)[0], q, k, v))
  assert rel(out, want) < TOL[jnp.float16]
  for got, w, what in zip(vjp(do), vjp_ref(do), "qkv"):
    assert got.shape == w.shape and rel(got, w) < 4 * TOL[jnp.float16], what


# ---------------------------------------------------------------- GPU
GPU_CASES = [(d, c, dt, ws) for d in (64, 128, 256) for c in (False, True) for dt in (jnp.float16, jnp.bfloat16)
             for ws in (False, True)] + [(d, c, jnp.bfloat16, True) for d in (32, 48, 80, 96, 112) for c in (False, True)]


@pytest.mark.parametrize("head_dim,causal", [(32, False), (48, True), (80, False), (96, True), (112, False)],
                         ids=["32-full", "48-causal", "80-full", "96-causal", "112-full"])
def test_narrow_head_dims_forward_and_gradients(head_dim, causal):
  """head_dim 32-112 in steps of 16 (the narrower swizzles of design note 76; were a ValueError): the default
  configuration, forward, logsumexp and the three gradients against the reference's, GQA. (Each head_dim
  with one mask here; both masks of each on the GPU: GPU_CASES.)"""
  q, k, v, do = inputs((1, 256, 2, head_dim), 1, jnp.bfloat16, seed=head_dim)
  run = lambda q, k, v: ex.attention(q, k, v, causal, return_lse=True, interpret=True)
  (got, lse), vjp = jax.vjp(run, q, k, v)
  want, want_lse = ref.forward(q, k, v, causal)
  _, vjp_ref = ref.vjp(q, k, v, causal)
  assert got.shape == q.shape and rel(got, want) < TOL[jnp.bfloat16]
  np.testing.assert_allclose(lse, want_lse, rtol=1e-3, atol=1e-3)
  for g, w, what in zip(vjp((do, jnp.zeros_like(lse))), vjp_ref(do), "qkv"):
    assert g.shape == w.shape and rel(g, w) < 4 * TOL[jnp.bfloat16], what


# the fused backward on one warpgroup of 64 keys a CTA (dkv_bkv=64: block=128), fused at head_dim 96 too
ONE_WG = [(64, False, 64, 2), (96, True, 64, 2), (128, True, 64, 3), (64, False, 128, 2)]


@pytest.mark.parametrize("head_dim,causal,dkv_bq,stages", ONE_WG, ids=str)
def test_one_warpgroup_fused_backward_gradients(head_dim, causal, dkv_bq, stages):
  """dkv_bkv=64 was a ValueError (64 key rows for each of two warpgroups): one warpgroup now takes them,
  its dQ rows whole; the gradients against the reference's, GQA, a partial last key block."""
  q, k, v, do = inputs((1, 200, 2, head_dim), 1, jnp.float16, seed=head_dim + 1)
  config = dataclasses.replace(ex.default_config(head_dim, causal), fused_bwd=True, dkv_bkv=64, dkv_bq=dkv_bq,
                               dkv_stages=stages)
  assert exb._dkv_block(q, bkv=64) == 128
  _, vjp = jax.vjp(lambda q, k, v: ex.attention(q, k, v, causal, config=config, interpret=True), q, k, v)
  _, vjp_ref = ref.vjp(q, k, v, causal)
  for g, w, what in zip(vjp(do), vjp_ref(do), "qkv"):
    assert g.shape == w.shape and rel(g, w) < 4 * TOL[jnp.float16], what


# the backward's blocks in chunks of `bwd_lpt` across heads and batches (a 1-D grid): chunks of 2 with a
# narrower last chunk (3 key blocks), and wider than the sequence; fused and two-kernel (dQ's blocks reversed)
LPT = [(64, True, 2), (64, False, 4), (96, True, 2)]


@pytest.mark.parametrize("head_dim,causal,lpt", LPT, ids=str)
def test_backward_blocks_in_chunks_across_heads_match_the_reference(head_dim, causal, lpt):
  q, k, v, do = inputs((2, 330, 4, head_dim), 2, jnp.float16, seed=lpt)
  config = dataclasses.replace(ex.default_config(head_dim, causal), bwd_lpt=lpt)
  assert config.fused_bwd == (head_dim == 64)
  n = -(-330 // (config.dkv_bkv if config.fused_bwd else config.dq_bq))
  assert exb._dkv_grid(q, k, v, do, None, None, bkv=config.dkv_bkv, lpt=lpt) == (-(-330 // config.dkv_bkv) * 2 * 2,)
  assert n * 4 * 2 == exb._dq_grid(q, k, v, do, None, None, bq=config.dq_bq, lpt=lpt)[0] or config.fused_bwd
  _, vjp = jax.vjp(lambda q, k, v: ex.attention(q, k, v, causal, config=config, interpret=True), q, k, v)
  _, vjp_ref = ref.vjp(q, k, v, causal)
  for g, w, what in zip(vjp(do), vjp_ref(do), "qkv"):
    assert g.shape == w.shape and rel(g, w) < 4 * TOL[jnp.float16], what


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim,causal,lpt", LPT + [(64, True, 1), (96, False, 1), (128, True, 4)], ids=str)
def test_gpu_backward_blocks_in_chunks_across_heads(head_dim, causal, lpt):
  q, k, v, do = inputs((2, 1000, 4, head_dim), 2, jnp.float16, seed=lpt)
  config = dataclasses.replace(ex.default_config(head_dim, causal), bwd_lpt=lpt)
  _, vjp = jax.vjp(jax.jit(lambda q, k, v: ex.attention(q, k, v, causal, config=config)), q, k, v)
  _, vjp_ref = jax.vjp(lambda q, k, v: reference(q, k, v, causal)[0], q, k, v)
  for g, w, what in zip(vjp(do), vjp_ref(do), "qkv"):
    assert rel(g, w) < 4 * TOL[jnp.float16], what


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim,causal,dkv_bq,stages", ONE_WG + [(64, True, 64, 3), (96, False, 64, 3)], ids=str)
def test_gpu_one_warpgroup_fused_backward_gradients(head_dim, causal, dkv_bq, stages):
  q, k, v, do = inputs((2, 1000, 4, head_dim), 2, jnp.float16, seed=head_dim + 2)
  config = dataclasses.replace(ex.default_config(head_dim, causal), fused_bwd=True, dkv_bkv=64, dkv_bq=dkv_bq,
                               dkv_stages=stages)
  _, vjp = jax.vjp(jax.jit(lambda q, k, v: ex.attention(q, k, v, causal, config=config)), q, k, v)
  _, vjp_ref = jax.vjp(lambda q, k, v: reference(q, k, v, causal)[0], q, k, v)
  for g, w, what in zip(vjp(do), vjp_ref(do), "qkv"):
    assert rel(g, w) < 4 * TOL[jnp.float16], what


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim,causal,dtype,ws", GPU_CASES, ids=str)
def test_gpu_forward_and_gradients_match_the_reference(head_dim, causal, dtype, ws):
  q, k, v, do = inputs((2, 1024, 4, head_dim), 2, dtype, seed=head_dim)
  config = dataclasses.replace(ex.default_config(head_dim, causal), ws=ws)
  run = jax.jit(lambda q, k, v: ex.attention(q, k, v, causal, return_lse=True, config=config))
  (got, lse), vjp = jax.vjp(run, q, k, v)
  (want, want_lse), vjp_ref = jax.vjp(lambda q, k, v: reference(q, k, v, causal), q, k, v)
  assert rel(got, want) < TOL[dtype]
  np.testing.assert_allclose(lse, want_lse, rtol=1e-3, atol=1e-3)
  zero = jnp.zeros_like(lse)
  for g, w, what in zip(vjp((do, zero)), vjp_ref((do, zero)), "qkv"):
    assert rel(g, w) < 4 * TOL[dtype], what


@pytest.mark.gpu
@pytest.mark.parametrize("config", [SMALL, TWO_KERNELS, SIMPLE, dataclasses.replace(SMALL, ws=True, bwd_ws=True),
                                    dataclasses.replace(SIMPLE, ws=True, bwd_ws=True)],
                         ids=["fused", "two_kernels", "simple", "fused_ws", "simple_ws"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_gpu_matches_interpret_mode(causal, config):
  q, k, v, do = inputs((1, 256, 2, 64), 1, jnp.float16, scale=2.5)
  gpu = jax.vjp(lambda q, k, v: ex.attention(q, k, v, causal, config=config), q, k, v)
  cpu = jax.vjp(lambda q, k, v: ex.attention(q, k, v, causal, config=config, interpret=True), q, k, v)
  assert rel(gpu[0], cpu[0]) < 2e-3
  for g, c in zip(gpu[1](do), cpu[1](do)):
    assert rel(g, c) < 1e-2
  assert math.isfinite(float(jnp.abs(gpu[0].astype(jnp.float32)).max()))


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim,causal,bkv", [(64, False, 128), (64, True, 128), (128, False, 128),
                                                 (128, False, 192), (128, True, 192), (96, False, 128),
                                                 (48, False, 128)], ids=str)
def test_gpu_forward_and_gradients_with_partial_last_blocks(head_dim, causal, bkv):
  """1000 queries and keys: the last key block holds 104 (or 40) of bkv, the forward masks the rest;
  the backward's last query and key blocks are partial too; 1001 (without the mask) adds zero rows to reach
  a multiple of 8 (for lse's TMA rows, and for q, k and v's at head_dim 128, the zero keys masked)."""
  seq = 1000 if causal else 1001
  q, k, v, do = inputs((2, seq, 4, head_dim), 2, jnp.float16, seed=7, scale=2.5)
  config = dataclasses.replace(ex.default_config(head_dim, causal), bkv=bkv, stages=2)
  run = jax.jit(lambda q, k, v: ex.attention(q, k, v, causal, return_lse=True, config=config))
  (got, lse), vjp = jax.vjp(run, q, k, v)
  (want, want_lse), vjp_ref = jax.vjp(lambda q, k, v: reference(q, k, v, causal), q, k, v)
  assert rel(got, want) < TOL[jnp.float16]
  np.testing.assert_allclose(lse, want_lse, rtol=1e-3, atol=1e-3)
  zero = jnp.zeros_like(lse)
  for g, w, what in zip(vjp((do, zero)), vjp_ref((do, zero)), "qkv"):
    assert rel(g, w) < 4 * TOL[jnp.float16], what


# the persistent forward (Config.persistent): one program an SM walking query tiles of every head and
# batch; mg.num_sms() is made 3 here so that each program walks several tiles (partial last ones too)
PERSISTENT = [
    ("f16_d128_gqa", (2, 320, 2, 128), 1, jnp.float16, False, ex.Config(bq=128, bkv=128, stages=2, ws=True)),
    ("bf16_d64_causal_odd_tile_count", (1, 320, 3, 64), 1, jnp.bfloat16, True, ex.Config(bq=128, bkv=64, stages=3)),
    # causal with an even tile count: whole pairs (longest with shortest) a program, pairs across heads too
    ("f16_d64_causal_pairs_across_heads", (2, 320, 2, 64), 1, jnp.float16, True, ex.Config(bq=128, bkv=64, stages=2)),
    ("f16_d128_causal_pairs", (1, 512, 3, 128), 3, jnp.float16, True, ex.default_config(128, True)),
    ("f16_d64_three_warpgroups", (2, 256, 1, 64), 1, jnp.float16, False,
     ex.Config(bq=192, bkv=128, stages=2, ws=True)),
    ("f16_d128_odd_keys_padded", (1, 201, 2, 128), 2, jnp.float16, False, ex.default_config(128)),
]


@pytest.mark.parametrize("prefetch_q", [False, True], ids=["", "prefetch_q"])
@pytest.mark.parametrize("name,shape,kv_heads,dtype,causal,config", PERSISTENT, ids=[c[0] for c in PERSISTENT])
def test_persistent_forward_walks_tiles_and_matches_the_reference(name, shape, kv_heads, dtype, causal, config,
                                                                  prefetch_q, monkeypatch):
  monkeypatch.setattr(ex.mg, "num_sms", lambda: 3)
  config = dataclasses.replace(config, persistent=True, overlap=False, prefetch_q=prefetch_q)
  if prefetch_q and shape[3] == 128:      # O's own buffer: three stages of 128-wide K and V do not fit
    config = dataclasses.replace(config, stages=2)
  q, k, v, _ = inputs(shape, kv_heads, dtype, scale=2.5, seed=5)
  want, want_lse = ref.forward(q, k, v, causal, sm_scale=1.0)
  got, lse = ex.attention(q, k, v, causal, sm_scale=1.0, return_lse=True, config=config, interpret=True)
  (programs,) = ex._fwd_grid(q, bq=config.bq, persistent=True, causal=causal)
  tiles = -(-shape[1] // config.bq) * shape[2] * shape[0]
  n = tiles // 2 if causal and tiles % 2 == 0 else tiles           # (causal: pairs of tiles)
  assert programs <= 3 and -(-n // programs) == -(-n // 3)          # no more rounds than one program an SM
  assert programs == (min(n, 3) if shape[3] < 128 else -(-n // -(-n // 3)))   # head_dim 128: balanced
  assert got.shape == q.shape and got.dtype == dtype
  assert rel(got, want) < TOL[dtype]
  np.testing.assert_allclose(lse, want_lse, rtol=1e-3, atol=1e-2)


def test_persistent_forward_is_the_default_up_to_4096_keys():
  for d in (64, 128):
    for causal in (False, True):
      assert [ex.default_config(d, causal, s).persistent for s in (None, 1000, 4096, 4097)] == [0, 1, 1, 0]
  spec = S((1, 1024, 2, 128), jnp.float16)
  text = ex.forward.typed_ir(spec, spec, spec, bq=128, bkv=128, stages=3, causal=False, scale=0.1, ws=True,
                             persistent=True)
  grid = ex.forward.typed_ir(spec, spec, spec, bq=128, bkv=128, stages=3, causal=False, scale=0.1, ws=True)
  walk = re.compile(r"for start=%\d+ stop=16 step=%\d+")     # from the program id by the programs, 16 tiles
  assert len(walk.findall(text)) == 2 and not walk.findall(grid)     # in the producer and the consumers


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim,causal,prefetch_q", [(128, False, False), (128, True, False), (64, False, False),
                                                       (64, False, True), (64, True, True), (128, True, True)],
                         ids=str)
def test_gpu_persistent_forward_walks_many_tiles(head_dim, causal, prefetch_q):
  """512 query tiles over the H200's 132 programs (the last tile of each head partial: 4000 rows)."""
  q, k, v, _ = inputs((2, 4000, 8, head_dim), 4, jnp.float16, seed=11, scale=2.0)
  config = dataclasses.replace(ex.default_config(head_dim, causal), persistent=True, prefetch_q=prefetch_q)
  if prefetch_q and head_dim == 128:
    config = dataclasses.replace(config, stages=2)
  got, lse = jax.jit(lambda q, k, v: ex.attention(q, k, v, causal, return_lse=True, config=config))(q, k, v)
  want, want_lse = reference(q, k, v, causal)
  assert rel(got, want) < TOL[jnp.float16]
  np.testing.assert_allclose(lse, want_lse, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("head_dim,causal,seq,config,kernel", [
    (64, False, 256, None, "deferred_kernel"), (64, True, 4096, None, "deferred_kernel"),
    (64, True, 1024, None, "dkv_dq_kernel"), (128, False, 256, None, "dkv_dq_kernel"),
    (64, False, 256, dict(bwd_dq_deferred=False), "dkv_dq_kernel"),
    (64, False, 256, dict(bwd_dq_deferred=True, bwd_ws=True), "dkv_dq_kernel"),
    (128, False, 256, dict(bwd_dq_deferred=True), "deferred_kernel"),
    (64, False, 256, dict(bwd_dq_deferred=True, fused_bwd=False), "dq_kernel")], ids=str)
def test_the_backward_runs_the_kernel_its_config_names(head_dim, causal, seq, config, kernel):
  """`bwd_dq_deferred` (the default at head_dim 64 but causal at 1024 keys or fewer) runs attention_bwd.py's
  deferred_kernel, alone: the gradient's program calls it and no other backward kernel (a deferred kernel whose
  results the two-kernel backward then overwrote passed every gradient test)."""
  cfg = ex.default_config(head_dim, causal, seq)
  cfg = dataclasses.replace(cfg, **config) if config else cfg
  q = jax.ShapeDtypeStruct((1, seq, 2, head_dim), jnp.float16)
  f = lambda q, k, v: ex.attention(q, k, v, causal, config=cfg, interpret=True).astype(jnp.float32).sum()
  text = str(jax.make_jaxpr(jax.grad(f, argnums=(0, 1, 2)))(q, q, q))
  called = set(re.findall(r"interpret\((\w+)\)", text)) - {"forward_kernel", "forward_overlap_kernel"}
  assert called == ({"dkv_kernel", "dq_kernel"} if kernel == "dq_kernel" else {kernel}), called
