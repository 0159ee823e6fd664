"""Ping-pong scheduling: `ml.range(..., warp_specialize=True, pingpong=True)` with block=256,
the two compute warpgroups taking turns on the tensor cores (frontend/pingpong.py)."""
import dataclasses
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import attention as ex  # noqa: E402
from mlir_barriers import named_barriers

S = jax.ShapeDtypeStruct
F16 = jnp.float16
PP = ex.Config(bq=128, bkv=64, stages=2, overlap=False, ws=True, pingpong=True, fused_bwd=False, dkv_bq=64,
               dkv_bkv=128, dq_bkv=64)


def rel(got, want):
  got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
  return np.linalg.norm(got - want) / np.linalg.norm(want)


def inputs(shape, dtype, scale=2.5, seed=0):
  kq, kk, kv = rand.split(rand.key(seed), 3)
  return tuple((rand.normal(k, shape, jnp.float32) * s).astype(dtype)
               for k, s in ((kq, scale), (kk, scale), (kv, 1.0)))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("overlap", [False, True], ids=["simple", "overlap"])
def test_pingpong_forward_matches_the_reference_interpret(causal, overlap):
  q, k, v = inputs((1, 256, 2, 64), F16)
  config = dataclasses.replace(PP, overlap=overlap)
  got, lse = ex.attention(q, k, v, causal, sm_scale=1.0, return_lse=True, config=config, interpret=True)
  want, want_lse = ex.reference(q, k, v, causal, sm_scale=1.0)
  assert rel(got, want) < 5e-3
  np.testing.assert_allclose(lse, want_lse, rtol=1e-3, atol=1e-2)


def _ops(ir_text):
  return [l.strip() for l in ir_text.splitlines()]


@pytest.mark.parametrize("causal", [False, True])
def test_a_turn_is_the_last_dot_of_one_step_and_the_first_of_the_next(causal):
  spec = S((1, 512, 2, 128), F16)
  lines = _ops(ex.forward.typed_ir(spec, spec, spec, bq=128, bkv=128, stages=3, causal=causal, scale=0.1,
                                   ws=True, pingpong=True))
  turns = [i for i, l in enumerate(lines) if l.startswith("turn")]
  dots = [i for i, l in enumerate(lines) if " = dot " in l]
  assert [lines[i].split("  #")[0] for i in turns] == [
      "turn take=False only=1", "turn take=True only=None",       # warpgroup 0 goes first
      "turn take=False only=None", "turn take=True only=None",    # in the body
      "turn take=False only=None", "turn take=True only=0"]       # the last pass is taken
  loop = next(i for i, l in enumerate(lines) if " = for " in l and "stages=3" in l)
  assert turns[0] < turns[1] < loop < turns[2]
  assert turns[2] == dots[0] + 1                   # passed after q @ k.T is issued, before its wait
  assert min(i for i, l in enumerate(lines) if l.startswith("dotwait") and i > dots[0]) > turns[2]
  assert turns[3] == dots[1] - 1                   # taken right before p @ v is issued
  assert not any(l.split()[0] in ("barrier", "commitshared", "awaitstores") for l in lines[loop:turns[4]])
  plain = _ops(ex.forward.typed_ir(spec, spec, spec, bq=128, bkv=128, stages=3, causal=causal, scale=0.1,
                                   ws=True))
  assert not any(l.startswith("turn") for l in plain)


def test_turns_are_two_named_barriers_of_the_compute_warpgroups_in_the_module():
  spec = S((1, 512, 2, 128), F16)
  text = ex.forward.mlir(spec, spec, spec, bq=128, bkv=128, stages=3, causal=False, scale=0.1, ws=True,
                         pingpong=True)
  turns = [b for b in named_barriers(text) if b[1] is None]          # numbered by the warpgroup
  assert turns.count(("sync", None, 256)) == 3 and turns.count(("arrive", None, 256)) == 3
  assert "bar.sync" not in text and "bar.arrive" not in text     # convergent NVVM ops, not assembly


def test_pingpong_forward_exports_for_cuda():
  spec = S((1, 1024, 4, 128), F16)
  config = dataclasses.replace(ex.default_config(128), pingpong=True)
  f = jax.jit(lambda q, k, v: ex.attention(q, k, v, True, config=config))
  assert "mosaic_gpu" in jax.export.export(f, platforms=["cuda"])(spec, spec, spec).mlir_module()


# ------------------------------------------------------------------ mistakes
def _out(a, b):
  return jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), jnp.float32)


@mg.mgpu_kernel(out_shape=_out, grid=(1,), block=256)
def pp_without_ws(a, b, c):
  a_s, b_s = ml.smem((128, 64), a.dtype), ml.smem((64, 128), b.dtype)
  acc = ml.zeros((128, 128), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2, pingpong=True):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c[...] = acc


@mg.mgpu_kernel(out_shape=_out, grid=(1,))
def pp_one_warpgroup(a, b, c):
  a_s, b_s = ml.smem((128, 64), a.dtype), ml.smem((64, 128), b.dtype)
  acc = ml.zeros((128, 128), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2, warp_specialize=True, pingpong=True):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c[...] = acc


@mg.mgpu_kernel(out_shape=_out, grid=(1,), block=256)
def pp_dot_in_branch(a, b, c):
  a_s, b_s = ml.smem((128, 64), a.dtype), ml.smem((64, 128), b.dtype)
  acc = ml.zeros((128, 128), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2, warp_specialize=True, pingpong=True):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    if k > 0:
      acc = ml.dot(a_s, b_s, acc)
  c[...] = acc


@mg.mgpu_kernel(out_shape=_out, grid=(1,), block=256)
def pp_smem_write_in_body(a, b, c):
  a_s, b_s = ml.smem((128, 64), a.dtype), ml.smem((64, 128), b.dtype)
  t_s = ml.smem((128, 128), jnp.float32)
  acc = ml.zeros((128, 128), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2, warp_specialize=True, pingpong=True):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
    t_s[...] = acc
    acc = acc + t_s[...]
  c[...] = acc


AB = (S((128, 256), F16), S((256, 128), F16))


def test_pingpong_without_warp_specialisation_is_rejected_at_the_loop():
  expect(pp_without_ws, AB, mg.WarpSpecializeError, "ml.range(",
         "pingpong=True needs warp_specialize=True: the compute warpgroups take turns on the tensor cores"
         " while a producer warpgroup loads for both",
         hint="ml.range(n, stages=3, warp_specialize=True, pingpong=True) in a kernel with block=256")


def test_pingpong_with_one_warpgroup_is_rejected_at_the_loop():
  expect(pp_one_warpgroup, AB, mg.WarpSpecializeError, "for k in",
         "pingpong=True needs two compute warpgroups to take turns, and this kernel has 1 (block=128)",
         hint="launch it with block=256 (each warpgroup then owns half the rows of every tensor-core tile)")


def test_a_dot_inside_a_branch_of_a_pingpong_loop_is_rejected_at_the_branch():
  expect(pp_dot_in_branch, AB, mg.WarpSpecializeError, "if k > 0",
         "a dot inside a branch or an inner loop of a pingpong=True loop: the warpgroups' turns are taken"
         " at the dots of the loop's body, so every iteration must issue them unconditionally")


def test_a_barrier_of_all_compute_threads_in_a_pingpong_loop_is_rejected_where_it_is_needed():
  expect(pp_smem_write_in_body, AB, mg.WarpSpecializeError, "t_s[...] = acc",
         "here every compute thread of the CTA would have to meet, but the warpgroups of a pingpong=True"
         " loop run a turn apart, so they would meet at different points of the loop")


def test_pingpong_must_be_a_static_bool():
  @mg.mgpu_kernel(out_shape=_out, grid=(1,), block=256)
  def bad(a, b, c, *, pp: ml.constexpr):
    a_s, b_s = ml.smem((128, 64), a.dtype), ml.smem((64, 128), b.dtype)
    acc = ml.zeros((128, 128), jnp.float32)
    for k in ml.range(a.shape[1] // 64, stages=2, warp_specialize=True, pingpong=pp):
      ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
      ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
      acc = ml.dot(a_s, b_s, acc)
    c[...] = acc
  expect(bad, AB, mg.KernelTypeError, "pp):", "pingpong must be a static bool, got 1",
         hint="pingpong=True or False (a Python bool or a constexpr)", pp=1)


# ------------------------------------------------------------------ GPU
@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("overlap", [False, True], ids=["simple", "overlap"])
@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=str)
def test_gpu_pingpong_forward_matches_the_reference(head_dim, causal, overlap, dtype):
  q, k, v = inputs((2, 1024, 4, head_dim), dtype, scale=1.0, seed=head_dim)
  config = dataclasses.replace(ex.default_config(head_dim, causal), bq=128, pingpong=True,  # two warpgroups
                               overlap=overlap, emulate=0 if overlap else ex.default_config(head_dim, causal).emulate)
  got, lse = jax.jit(lambda q, k, v: ex.attention(q, k, v, causal, return_lse=True, config=config))(q, k, v)
  want, want_lse = ex.reference(q, k, v, causal)
  assert rel(got, want) < (5e-3 if dtype == jnp.float16 else 3e-2)
  np.testing.assert_allclose(lse, want_lse, rtol=1e-3, atol=1e-3)


@mg.mgpu_kernel(out_shape=_out, grid=lambda a, b: (a.shape[0] // 128, b.shape[1] // 128), block=256)
def pp_matmul(a, b, c):
  """One dot a step: each turn is one warpgroup's dot."""
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((128, 64), a.dtype), ml.smem((64, 128), b.dtype)
  acc = ml.zeros((128, 128), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=3, warp_specialize=True, pingpong=True):
    ml.copy(a.at[ml.ds(i * 128, 128), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 128, 128)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c.at[ml.ds(i * 128, 128), ml.ds(j * 128, 128)][...] = acc


def test_a_body_of_one_dot_takes_and_passes_a_turn_around_it():
  lines = _ops(pp_matmul.typed_ir(S((256, 512), F16), S((512, 256), F16)))
  turns = [(i, l.split("  #")[0]) for i, l in enumerate(lines) if l.startswith("turn")]
  dot = next(i for i, l in enumerate(lines) if " = dot " in l)
  assert [t for _, t in turns] == ["turn take=False only=1", "turn take=True only=None",
                                   "turn take=False only=None", "turn take=True only=0"]
  assert turns[1][0] == dot - 1 and turns[2][0] == dot + 1
  a = rand.normal(rand.key(0), (256, 512), F16)
  b = rand.normal(rand.key(1), (512, 256), F16)
  want = a.astype(jnp.float32) @ b.astype(jnp.float32)
  np.testing.assert_allclose(pp_matmul(a, b, interpret=True), want, rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
def test_gpu_pingpong_matmul_of_one_dot_a_step():
  a = rand.normal(rand.key(0), (512, 1024), F16)
  b = rand.normal(rand.key(1), (1024, 384), F16)
  want = a.astype(jnp.float32) @ b.astype(jnp.float32)
  np.testing.assert_allclose(jax.jit(pp_matmul)(a, b), want, rtol=1e-3, atol=5e-2)


OPTS = {"stages": 2}


def test_range_options_by_splat_say_so():
  @mg.mgpu_kernel(out_shape=_out, grid=(1,))
  def splat(a, b, c):
    a_s, b_s = ml.smem((128, 64), a.dtype), ml.smem((64, 128), b.dtype)
    acc = ml.zeros((128, 128), jnp.float32)
    for k in ml.range(a.shape[1] // 64, **OPTS):
      ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
      ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
      acc = ml.dot(a_s, b_s, acc)
    c[...] = acc
  expect(splat, AB, mg.KernelTypeError, "OPTS):", "ml.range(..., **kwargs): its options are written out")


def test_emulate_with_the_overlapped_forward_names_both_fixes():
  q, k, v = inputs((1, 256, 2, 64), jnp.float16, scale=1.0, seed=0)
  config = dataclasses.replace(ex.default_config(64, True), overlap=True, emulate=0.125)
  with pytest.raises(ValueError, match=r"set overlap=False or emulate=0"):
    ex.attention(q, k, v, True, config=config)
