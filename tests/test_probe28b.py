"""Probe 28b: attention variants written by users (sliding windows, ALiBi, soft-capping, biases
and masks from arrays, cross-attention, GQA decode, cu_seqlens) and examples/attention.py's
public function: the diagnostics and checks they met."""
import jax
import jax.numpy as jnp

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

from locate import expect

F16 = jnp.float16


# ---------------------------------------------------------------- a race's hint on a (1, heads, d) output
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(3,))
def overlapping_head_windows(x, o):
  g = ml.program_id(0)
  o.at[0, ml.ds(g * 4, 8), :][...] = x.at[0, ml.ds(g * 4, 8), :][...]      # 8 heads a program, 4 apart


def test_a_race_on_an_output_with_fewer_rows_than_programs_hints_at_the_windows_not_a_row_split():
  """The race's hint split the output's first dimension (size 1, the batch) among the programs:
  "windows of 1 rows (a register tile needs a multiple of 1) ... launching 1 programs", which
  serialises the kernel rather than fixing it; the windows overlap along another dimension."""
  e = expect(overlapping_head_windows, [jax.ShapeDtypeStruct((1, 16, 64), F16)], mg.RaceError,
             "o.at[0, ml.ds(g * 4, 8), :][...]",
             "program (0, 0, 0) and program (1, 0, 0) both write o[0, 4, 0]: programs run in no fixed order,"
             " so the result depends on timing")
  assert "windows of 1 rows" not in e.hint and "launching 1 programs" not in e.hint
  # (probe 41r: windows 4 apart and 8 long overlap: the step is the fix, named first)
  assert e.hint == ("the programs' windows of o start 4 apart (g * 4) but each writes 8 elements, so neighbours"
                    " overlap by 4: step them by their size, g * 8, launching ml.cdiv(16, 8) = 2 programs along"
                    " grid axis 0, and the inputs' windows the same way")


@mg.mgpu_kernel(out_shape=lambda x, starts: x, grid=(3,))
def head_windows_from_data(x, starts, o):
  g = ml.program_id(0)
  o.at[0, ml.ds(starts[g], 8), :][...] = x.at[0, ml.ds(starts[g], 8), :][...]


def test_interpret_mode_s_race_hint_on_an_output_with_fewer_rows_than_programs():
  """The same hint in interpret mode, where windows from data meet (own_window)."""
  import pytest
  x = jnp.ones((1, 16, 64), F16)
  with pytest.raises(mg.RaceError) as info:
    head_windows_from_data(x, jnp.array([0, 4, 8], jnp.int32), interpret=True)
  assert "windows of 1 rows" not in info.value.hint and "launching 1 programs" not in info.value.hint
  assert info.value.hint.startswith("give each program its own window of o: the windows two programs write"
                                    " overlap; make each no longer than the step between two programs' starts,"
                                    " or write only the elements a program owns with a masked store from"
                                    " registers, o.at[...].store(value, mask=...)")


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def owned_head_windows(x, o):
  g = ml.program_id(0)
  mine = ml.arange(8)[:, None] < 4
  o.at[0, ml.ds(g * 4, 8), :].store(x.at[0, ml.ds(g * 4, 8), :].load(mask=mine, other=0.0), mask=mine)


def test_the_race_hint_followed_a_masked_store_of_the_owned_heads():
  x = rand.normal(rand.key(0), (1, 16, 64), F16)
  owned_head_windows.check(jax.ShapeDtypeStruct(x.shape, x.dtype))
  assert (owned_head_windows(x, interpret=True) == x).all()


# ---------------------------------------------------------------- MG401's split for ragged query rows
@mg.mgpu_kernel(out_shape=lambda q, k: jax.ShapeDtypeStruct((64, k.shape[0]), jnp.float32), grid=(1,))
def ragged_queries(q, k, s_out):
  q_s = ml.smem((64, q.shape[1]))
  k_s = ml.smem((64, q.shape[1]))
  ml.copy(q.at[ml.ds(0, 64)], q_s)
  for j in ml.range(k.shape[0] // 64, stages=2):
    ml.copy(k.at[ml.ds(j * 64, 64)], k_s)
    s_out.at[:, ml.ds(j * 64, 64)][...] = ml.dot(q_s, k_s.T)


def test_the_split_hint_for_q_at_k_transposed_in_a_pipelined_loop_says_columns_and_names_every_part():
  """The hint said `k_s0 and k_s1 loaded by windows of 64 rows`: k_s's split is by columns (the
  head_dim, K of q @ k.T), and head_dim 256 needs four buffers, not two. Since probe 46c q's 100 rows
  are copied a row of tiles a TMA: the kernel computes as written, at head_dim 256 too."""
  q = rand.normal(rand.key(1), (100, 256), F16)
  k = rand.normal(rand.key(2), (128, 256), F16)
  ragged_queries.check(*(jax.ShapeDtypeStruct(x.shape, x.dtype) for x in (q, k)))
  want = q[:64].astype(jnp.float32) @ k.astype(jnp.float32).T
  assert jnp.allclose(ragged_queries(q, k, interpret=True), want, rtol=1e-3, atol=1e-2)


@mg.mgpu_kernel(out_shape=lambda q, k: jax.ShapeDtypeStruct((64, k.shape[0]), jnp.float32), grid=(1,))
def ragged_queries_split(q, k, s_out):
  q_s0, q_s1 = ml.smem((64, 64)), ml.smem((64, 64))
  k_s0, k_s1 = ml.smem((64, 64)), ml.smem((64, 64))
  ml.copy(q.at[ml.ds(0, 64), ml.ds(0, 64)], q_s0)
  ml.copy(q.at[ml.ds(0, 64), ml.ds(64, 64)], q_s1)
  for j in ml.range(k.shape[0] // 64, stages=2):
    ml.copy(k.at[ml.ds(j * 64, 64), ml.ds(0, 64)], k_s0)
    ml.copy(k.at[ml.ds(j * 64, 64), ml.ds(64, 64)], k_s1)
    acc = ml.dot(q_s0, k_s0.T)
    s_out.at[:, ml.ds(j * 64, 64)][...] = ml.dot(q_s1, k_s1.T, acc)


def test_the_split_hint_followed_for_head_dim_128():
  q = rand.normal(rand.key(1), (100, 128), F16)
  k = rand.normal(rand.key(2), (128, 128), F16)
  ragged_queries_split.check(jax.ShapeDtypeStruct(q.shape, F16), jax.ShapeDtypeStruct(k.shape, F16))
  got = ragged_queries_split(q, k, interpret=True)
  want = q.astype(jnp.float32)[:64] @ k.astype(jnp.float32).T
  assert jnp.allclose(got, want, rtol=1e-3, atol=1e-2)


# ---------------------------------------------------------------- examples/attention.py's arguments
def _attention_module():
  import os
  import sys
  sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
  import attention
  return attention


def test_attention_refuses_an_infinite_scale_rather_than_returning_nan():
  import pytest
  at = _attention_module()
  q = jnp.ones((1, 128, 1, 64), F16)
  with pytest.raises(ValueError, match="sm_scale must be positive and finite, got inf"):
    at.attention(q, q, q, sm_scale=float("inf"), interpret=True)


def test_attention_refuses_no_keys_rather_than_returning_nan():
  """The reference gives 0 (an empty sum) and the kernels NaN (0 / 0): neither is a softmax."""
  import pytest
  at = _attention_module()
  q, kv = jnp.ones((1, 128, 1, 64), F16), jnp.ones((1, 0, 1, 64), F16)
  with pytest.raises(ValueError, match=r"k and v have no keys \(kv seq length 0\) for 128 queries"):
    at.attention(q, kv, kv, interpret=True)


def test_attention_names_a_config_of_the_wrong_type():
  import pytest
  at = _attention_module()
  q = jnp.ones((1, 128, 1, 64), F16)
  with pytest.raises(TypeError, match=r"config must be a Config \(Config\(bq=..., ...\)\), got dict"):
    at.attention(q, q, q, config=dict(bq=128), interpret=True)


# ---------------------------------------------------------------- examples/paged_attention.py's head_dim
def _paged_module():
  _attention_module()          # puts examples/ on the path
  import paged_attention
  return paged_attention


def test_paged_attention_of_grouped_heads_with_head_dim_96_takes_the_cuda_core_path():
  """The default path for grouped-query heads (the tensor cores) failed with MG501 inside the
  example's kernel for a head_dim that is not a multiple of 64; the CUDA-core path computes it."""
  pa = _paged_module()
  q, kp, vp, bt, ln = pa.make_inputs(jax.random.key(3), 2, 4, 2, 96, 16, 4, F16)
  got = pa.paged_attention(q, kp, vp, bt, ln, interpret=True)
  want = pa.reference(q, kp, vp, bt, ln)
  assert jnp.allclose(got.astype(jnp.float32), want.astype(jnp.float32), rtol=2e-3, atol=2e-3)


def test_paged_attention_on_the_tensor_cores_names_the_head_dim_it_cannot_take():
  import pytest
  pa = _paged_module()
  q, kp, vp, bt, ln = pa.make_inputs(jax.random.key(3), 1, 4, 2, 32, 16, 4, F16)
  with pytest.raises(ValueError, match=r"tensor-core path takes float16 or bfloat16 pages with a head_dim of a"
                                       r" multiple of 64, got float16 and head_dim 32: pass tensor_cores=False"):
    pa.paged_attention(q, kp, vp, bt, ln, tensor_cores=True, interpret=True)


# ---------------------------------------------------------------- MG401 for a start read from data
@mg.mgpu_kernel(out_shape=lambda q, k, cu: jax.ShapeDtypeStruct((64, 64), jnp.float32), grid=(1,))
def packed_queries(q, k, cu, s_out):
  q_s = ml.smem((64, q.shape[1]))
  k_s = ml.smem((64, q.shape[1]))
  ml.copy(q.at[ml.ds(cu[1], 64)], q_s)                     # a sequence of a packed batch
  ml.copy(k.at[ml.ds(0, 64)], k_s)
  s_out[...] = ml.dot(q_s, k_s.T)


def test_a_tiled_window_starting_at_a_value_read_from_data_is_offered_buffers_one_tile_wide():
  """The hint offered only ml.multiple_of, which a cu_seqlens offset does not keep (interpret mode
  then fails): buffers one tile wide take a window from any row. Since probe 46c the load goes a row of
  tiles a TMA, so a window from any row takes the kernel as written."""
  q = rand.normal(rand.key(1), (104, 128), F16)
  k = rand.normal(rand.key(2), (64, 128), F16)
  cu = jnp.array([0, 13, 100], jnp.int32)
  packed_queries.check(*(jax.ShapeDtypeStruct(x.shape, x.dtype) for x in (q, k, cu)))
  want = q.astype(jnp.float32)[13:77] @ k.astype(jnp.float32).T
  assert jnp.allclose(packed_queries(q, k, cu, interpret=True), want, rtol=1e-3, atol=1e-2)


@mg.mgpu_kernel(out_shape=lambda q, k, cu: jax.ShapeDtypeStruct((64, 64), jnp.float32), grid=(1,))
def packed_queries_split(q, k, cu, s_out):
  q_s0, q_s1 = ml.smem((64, 64)), ml.smem((64, 64))
  k_s = ml.smem((64, q.shape[1]))
  ml.copy(q.at[ml.ds(cu[1], 64), ml.ds(0, 64)], q_s0)
  ml.copy(q.at[ml.ds(cu[1], 64), ml.ds(64, 64)], q_s1)
  ml.copy(k.at[ml.ds(0, 64)], k_s)
  acc = ml.dot(q_s0, k_s.at[:, ml.ds(0, 64)].T)
  s_out[...] = ml.dot(q_s1, k_s.at[:, ml.ds(64, 64)].T, acc)


def test_the_packed_query_hint_followed():
  q = rand.normal(rand.key(1), (100, 128), F16)
  k = rand.normal(rand.key(2), (64, 128), F16)
  cu = jnp.array([0, 13, 100], jnp.int32)
  specs = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in (q, k, cu)]
  packed_queries_split.check(*specs)
  got = packed_queries_split(q, k, cu, interpret=True)
  want = q.astype(jnp.float32)[13:77] @ k.astype(jnp.float32).T
  assert jnp.allclose(got, want, rtol=1e-3, atol=1e-2)


# ---------------------------------------------------------------- fp8 attention's p @ v from registers
F8 = jnp.float8_e4m3fn


def _fp8_attention(bkv, v_transposed, p_in_smem):
  @mg.mgpu_kernel(out_shape=lambda q, k, v: jax.ShapeDtypeStruct((64, q.shape[1]), jnp.float32), grid=(1,))
  def fp8_attention(q, k, v, o):
    d = q.shape[1]
    q_s, k_s = ml.smem((64, d)), ml.smem((bkv, d))
    v_s = ml.smem((d, bkv)) if v_transposed else ml.smem((bkv, d))
    ml.copy(q, q_s)
    ml.copy(k, k_s)
    ml.copy(v, v_s)
    s = ml.dot(q_s, k_s.T) * 0.1
    p = ml.exp(s - ml.max(s, axis=1)[:, None])
    if p_in_smem:
      p_s = ml.smem((64, bkv), F8)
      p_s[...] = p.astype(F8)
      acc = ml.dot(p_s, v_s.T if v_transposed else v_s)
    else:
      acc = ml.dot(p.astype(F8), v_s.T if v_transposed else v_s)
    o[...] = acc / ml.sum(p, axis=1)[:, None]
  return fp8_attention


def test_an_fp8_register_operand_hint_names_what_else_an_fp8_dot_needs():
  """The hint's SMEM buffer of p, (64, 64), then met MG501 twice: an 8-bit k must be 128 elements
  and v, stored (k, n), must be K-major. Since probe 46b p.astype(F8) is read from registers, and v
  stored (k, n) was the error, its hint written with the call's register operand; since probe 68a the compiler
  transposes v once into a K-major buffer itself (FA3's float8 p @ v), so the kernel as written computes."""
  kernel = _fp8_attention(64, False, False)
  ks = rand.split(rand.key(1), 3)
  q, k, v = ((rand.normal(kk, (64, 128)) * 2).astype(F8) for kk in ks)
  got = kernel(q, k, v, interpret=True)
  s = q.astype(jnp.float32) @ k.astype(jnp.float32).T * 0.1
  p = jnp.exp(s - s.max(axis=1, keepdims=True))
  want = (p.astype(F8).astype(jnp.float32) @ v.astype(jnp.float32)) / p.sum(axis=1, keepdims=True)
  assert float(jnp.linalg.norm(got - want) / jnp.linalg.norm(want)) < 2e-2
  # (a k of 64 8-bit elements takes the 64-byte swizzle since the twenty-ninth session: no longer a need)


def test_the_fp8_hint_followed():
  kernel = _fp8_attention(128, True, True)
  ks = rand.split(rand.key(0), 3)
  q = (rand.normal(ks[0], (64, 128)) * 2).astype(F8)
  k = (rand.normal(ks[1], (128, 128)) * 2).astype(F8)
  v = rand.normal(ks[2], (128, 128)).astype(F8)
  kernel.check(*[jax.ShapeDtypeStruct(x.shape, x.dtype) for x in (q, k, v.T)])
  got = kernel(q, k, v.T, interpret=True)
  s = q.astype(jnp.float32) @ k.astype(jnp.float32).T * 0.1
  p = jnp.exp(s - s.max(axis=1, keepdims=True))
  want = (p.astype(F8).astype(jnp.float32) @ v.astype(jnp.float32)) / p.sum(axis=1, keepdims=True)
  assert float(jnp.linalg.norm(got - want) / jnp.linalg.norm(want)) < 2e-2
