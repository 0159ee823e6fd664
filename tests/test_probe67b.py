"""Probe 67b (linear attention and state-space kernels as flash-linear-attention, Mamba and RetNet write them):
a corpus of 34 kernels, each checked in interpret mode against a plain loop over time or chunks and exported for
CUDA; the refusals met; and the class fixed, run-time windows of a pipelined loop's buffer read into registers."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where
from probe67b_cases import CASES, K, qkv

S = jax.ShapeDtypeStruct
F32, BF16 = jnp.float32, jnp.bfloat16


def _relerr(got, want):
  got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
  assert got.shape == want.shape, (got.shape, want.shape)
  return float(np.max(np.abs(got - want)) / max(1e-6, float(np.max(np.abs(want)))))


def _check(name, seed):
  kernel, make, ref, tol = CASES[name]
  args = make(seed)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.KernelWarning)     # la_chunk128_d128 spills, wy_inverse_static is large
    got = kernel(*args, interpret=True)
    want = ref(*args)
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
      assert _relerr(g, w) <= tol, (name, _relerr(g, w))
    jax.export.export(jax.jit(kernel), platforms=["cuda"])(*[S(a.shape, a.dtype) for a in args]).mlir_module()
  return args


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_matches_its_loop_reference_and_builds(name):
  """Each kernel against its reference (interpret mode, the GPU's numerics) and its Mosaic GPU module built."""
  _check(name, 0)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_corpus_matches_its_loop_reference(name):
  kernel, make, ref, tol = CASES[name]
  args = make(1)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.KernelWarning)
    got = jax.jit(kernel)(*args)
  want = ref(*args)
  got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
  for g, w in zip(got, want):
    assert _relerr(g, w) <= max(tol, 1e-3), (name, _relerr(g, w))


# ---------------------------------------------------------------- run-time windows of a pipelined buffer
def test_a_run_time_row_of_a_pipelined_buffer_is_read_from_this_trips_stage():
  """Mamba's selective scan as its CUDA kernel schedules it: 64 steps of x and dt copied by TMA in a pipelined
  loop, an inner loop over the buffered steps reading `x_s.at[r][...]`. It was MG502 ('may only read it whole ...
  or read static windows of it into registers'), whose hint read the whole buffer and sliced registers with a
  run-time index. A run-time window read into registers is restaged as a static one: the row of this trip's stage,
  read after the stage's load landed, and a barrier before the stage is refilled."""
  args = _check("mamba_scan_buffered", 0)
  ir = K.mamba_scan_buffered.typed_ir(*[S(a.shape, a.dtype) for a in args])
  body = ir[ir.index("stages=2"):]
  inner = body[body.index("stages=1"):]
  stage, row = inner.split("view ref=", 1)[1].split("index=[", 1)[1].split(",")[:2]
  assert stage.startswith("%") and row.strip().startswith("%"), inner[:400]      # [stage, r, 0:+128]
  assert body.index("waitload") < body.index("stages=1") < body.index("barrier") < body.rindex("copy src=")


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 8, x.shape[1]), F32), grid=lambda x: (1,))
def window_sums(x, out):                 # 8-row windows of a pipelined 64-row tile at run-time starts
  x_s = ml.smem((64, 128), x.dtype)
  for blk in ml.range(x.shape[0] // 64, stages=2):
    ml.copy(x.at[ml.ds(blk * 64, 64)], x_s)
    for r in range(8):
      out.at[blk * 8 + r][...] = ml.sum(x_s.at[ml.ds(r * 8, 8)][...].astype(F32), axis=0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (1,))
def window_written(x, out):              # a run-time window written: still MG502
  x_s = ml.smem((64, 128), x.dtype)
  for blk in ml.range(x.shape[0] // 64, stages=2):
    ml.copy(x.at[ml.ds(blk * 64, 64)], x_s)
    for r in range(64):
      x_s.at[r][...] = x_s.at[r][...] * 2.0
    ml.copy(x_s, out.at[ml.ds(blk * 64, 64)])


def _window_sums_ref(x):
  return np.asarray(x, np.float32).reshape(-1, 8, x.shape[1]).sum(1)


def test_run_time_windows_of_several_rows_work_and_a_written_one_stays_an_error():
  x = jnp.asarray(np.random.default_rng(3).standard_normal((256, 128)), BF16)
  np.testing.assert_allclose(window_sums(x, interpret=True), _window_sums_ref(x), rtol=1e-5, atol=1e-5)
  jax.export.export(jax.jit(window_sums), platforms=["cuda"])(S(x.shape, x.dtype)).mlir_module()
  e = expect(window_written, [S((256, 128), F32)], mg.PipelineError, "x_s.at[r][...] = ",
             "x_s is loaded by TMA in a pipelined loop, so the loop may only read it whole (ml.dot, ml.copy from it, or"
             " [...]), read windows of it into registers, or pass windows of it to ml.dot")
  assert e.notes[0].endswith(f":{where(window_written, 'ml.copy(x.at')[0]}:4: the pipelined load")


@pytest.mark.gpu
def test_gpu_run_time_windows_of_a_pipelined_buffer_match_numpy():
  x = jnp.asarray(np.random.default_rng(4).standard_normal((512, 128)), BF16)
  np.testing.assert_allclose(np.asarray(jax.jit(window_sums)(x)), _window_sums_ref(x), rtol=1e-4, atol=1e-4)
  kernel, make, ref, tol = CASES["mamba_scan_buffered"]
  args = make(5)
  np.testing.assert_allclose(np.asarray(jax.jit(kernel)(*args)), ref(*args), rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------- the refusals met, each legitimate
def test_a_hand_kept_ring_under_stages_is_refused_at_the_load_with_both_ways_out():
  """retention_pipelined keeps its own ring (`q_s.at[c % 2]`) and asks for stages=2: the loop keeps the ring."""
  e = expect(K.retention_pipelined, [S((3, 256, 64), BF16)] * 3, mg.PipelineError, "ml.copy(q.at[h",
             "this pipelined loop's TMA load fills a window of q_s picked by the loop index (a ring of stages kept by"
             " hand), but ml.range(..., stages=2) keeps the ring itself: it pipelines loads into a whole buffer (or"
             " static windows of one), of which it keeps 2 copies")
  assert "drop stages= for a plain loop, for c in ml.range(q.shape[1] // 64):" in e.hint


@mg.mgpu_kernel(out_shape=lambda q, k, v: S(v.shape, F32), grid=lambda q, k, v: (v.shape[2] // 64, q.shape[2] // 64, q.shape[0]))
def fla_dropped_nk_offset(q, k, v, o):    # fla's o + (i_bh + i_k * B * H) * s_v_h written as o.at[i_bh]: K split in two
  i_v, i_k, i_bh = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  T, Kd, V = q.shape[1], q.shape[2], v.shape[2]
  p_q = ml.make_block_ptr(q.at[i_bh], (T, Kd), (Kd, 1), (0, i_k * 64), (64, 64), (1, 0))
  p_k = ml.make_block_ptr(k.at[i_bh], (Kd, T), (1, Kd), (i_k * 64, 0), (64, 64), (0, 1))
  p_v = ml.make_block_ptr(v.at[i_bh], (T, V), (V, 1), (0, i_v * 64), (64, 64), (1, 0))
  p_o = ml.make_block_ptr(o.at[i_bh], (T, V), (V, 1), (0, i_v * 64), (64, 64), (1, 0))
  o_i = ml.arange(64)
  b_s = ml.where(o_i[:, None] >= o_i[None, :], ml.dot(ml.load(p_q), ml.load(p_k)), 0)
  ml.store(p_o, ml.dot(b_s.to(q.dtype), ml.load(p_v)), boundary_check=(0, 1))


def test_a_port_that_drops_flas_key_split_offset_is_reported_as_the_race_it_is():
  q, k, v = qkv(0, t=64, dk=128)
  with pytest.raises(mg.KernelError) as info:
    fla_dropped_nk_offset(q, k, v, interpret=True)
  e = info.value
  assert e.code == "MG951" and (e.lineno, e.col_offset) == where(fla_dropped_nk_offset, "ml.store(p_o")
  assert e.message.startswith("program (0, 0, 0) and program (0, 1, 0) both write o[0, 0, 0]")
  assert "differ only along grid axis 1" in e.hint and "ml.atomic_add" in e.hint
