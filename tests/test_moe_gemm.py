"""Probe 62d (continued from tests/test_moe_routing.py): the MoE token alignment, grouped GEMMs and combine as vLLM
and SGLang write them in Triton: `moe_align_block_size` in one program (counts, padded offsets by a prefix sum, each
token's slot by a running count, sorted_token_ids scattered over a padding fill, expert_ids per block), vLLM's
`fused_moe_kernel` (grouped tile order, `num_tokens_post_padded` read and an early return, each program's expert from
expert_ids, token rows gathered by `offs_token // top_k`, routing weights multiplied in, rows scattered to the
(T * top_k, N) output), DeepSeek-V3's block-quantised fp8 fused MoE (1x128 and 128x128 scales, pointer blocks
stepped, the weighted rows combined into (T, N) with atomic adds) and the combine step `moe_sum`.

Also the class fixed here (design note 211): Triton's grouped tile order warned a TritonSemanticsWarning at `pid %
group_size_m` and `// group_size_m`; the grid evaluation now clears operands it shows never negative."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as tl
from locate import expect
from probe_util import S, export, f32
from test_moe_routing import align_want, routed_ids

R = np.random.default_rng(621)
F8 = jnp.float8_e4m3fn


# ---------------------------------------------------------------- moe_align_block_size
def _align_out(ids, *, E, BS, NP):
  maxp = ids.size + E * (BS - 1)
  return S((maxp,), jnp.int32), S((tl.cdiv(maxp, BS),), jnp.int32), S((1,), jnp.int32)


@mg.mgpu_kernel(out_shape=_align_out, grid=(1,))
def moe_align(topk_ids, sorted_ids, expert_ids, num_post, *, E: tl.constexpr, BS: tl.constexpr, NP: tl.constexpr):
  n = topk_ids.shape[0] * topk_ids.shape[1]
  i = tl.arange(0, NP)
  flat = tl.load(topk_ids.at[i // topk_ids.shape[1], i % topk_ids.shape[1]], mask=i < n, other=E)
  onehot = (flat[:, None] == tl.arange(0, E)[None, :]).to(tl.int32)     # (NP, E)
  counts = tl.sum(onehot, axis=0)
  padded = tl.cdiv(counts, BS) * BS
  ends = tl.cumsum(padded, axis=0)
  starts = ends - padded
  rank = tl.cumsum(onehot, axis=0) - 1                                  # each token's place among its expert's
  pos = tl.sum(onehot * (starts[None, :] + rank), axis=1)
  total = tl.sum(padded)
  for b0 in tl.static_range(0, sorted_ids.shape[0], 256):
    o = b0 + tl.arange(0, 256)
    tl.store(sorted_ids.at[o], tl.full((256,), n, tl.int32), mask=o < sorted_ids.shape[0])
  tl.store(sorted_ids.at[pos], i, mask=i < n)
  blk = tl.arange(0, 64)
  for b0 in tl.static_range(0, expert_ids.shape[0], 64):
    first = (b0 + blk) * BS
    eid = tl.sum((first[:, None] >= ends[None, :]).to(tl.int32), axis=1)
    tl.store(expert_ids.at[b0 + blk], tl.where(first < total, eid, -1), mask=b0 + blk < expert_ids.shape[0])
  tl.store(num_post.at[0], total)


@pytest.mark.parametrize("t,k,e,bs", [(32, 2, 8, 16), (50, 4, 16, 64), (7, 2, 8, 16)])
def test_moe_align_block_size(t, k, e, bs):
  ids = routed_ids(t, k, e)
  kw = dict(E=e, BS=bs, NP=1 << (t * k - 1).bit_length())
  for got, want in zip(moe_align(ids, interpret=True, **kw), align_want(ids, e, bs)):
    np.testing.assert_array_equal(np.asarray(got), want)
  export(moe_align, ids, **kw)


# ---------------------------------------------------------------- vLLM's fused MoE kernel
def _fm_grid(a, b, tw, sid, *rest, BM, BN, **k):
  return (tl.cdiv(sid.shape[0], BM) * tl.cdiv(b.shape[1], BN),)


@tl.inline
def routed_epilogue(acc, c_ptr, topk_weights_ptr, offs_token, token_mask, pid_n, N, BN, top_k, MUL_ROUTED_WEIGHT):
  """vLLM's fused MoE epilogue: the routing weight of each row's (token, k) slot, then the rows scattered."""
  if MUL_ROUTED_WEIGHT:
    moe_weight = tl.load(topk_weights_ptr.at[offs_token // top_k, offs_token % top_k], mask=token_mask, other=0)
    acc = acc * moe_weight[:, None]
  offs_cn = pid_n * BN + tl.arange(0, BN)
  tl.store(c_ptr.at[offs_token[:, None], offs_cn[None, :]], acc.to(c_ptr.dtype),
           mask=token_mask[:, None] & (offs_cn[None, :] < N))


@mg.mgpu_kernel(out_shape=lambda a, b, tw, *r, **k: S((tw.shape[0] * tw.shape[1], b.shape[1]), a.dtype), grid=_fm_grid)
def fused_moe(a_ptr, b_ptr, topk_weights_ptr, sorted_token_ids_ptr, expert_ids_ptr, num_tokens_post_padded_ptr, c_ptr,
              *, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, top_k: tl.constexpr,
              MUL_ROUTED_WEIGHT: tl.constexpr, GROUP_M: tl.constexpr = 8):
  N, K = b_ptr.shape[1], b_ptr.shape[2]
  EM = sorted_token_ids_ptr.shape[0]
  num_valid_tokens = topk_weights_ptr.shape[0] * topk_weights_ptr.shape[1]
  pid = tl.program_id(axis=0)
  num_pid_m = tl.cdiv(EM, BM)
  num_pid_n = tl.cdiv(N, BN)
  num_pid_in_group = GROUP_M * num_pid_n
  group_id = pid // num_pid_in_group
  first_pid_m = group_id * GROUP_M
  group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
  pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
  pid_n = (pid % num_pid_in_group) // group_size_m
  num_tokens_post_padded = tl.load(num_tokens_post_padded_ptr.at[0])
  if pid_m * BM >= num_tokens_post_padded:
    return
  offs_token = tl.load(sorted_token_ids_ptr.at[pid_m * BM + tl.arange(0, BM)])
  token_mask = offs_token < num_valid_tokens
  off_experts = tl.load(expert_ids_ptr.at[pid_m])
  if off_experts == -1:            # an expert of another rank (expert parallelism): its rows are zeros
    offs_cn = pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr.at[offs_token[:, None], offs_cn[None, :]], tl.zeros((BM, BN), dtype=c_ptr.dtype.element_ty),
             mask=token_mask[:, None] & (offs_cn[None, :] < N))
    return
  offs_bn = (pid_n * BN + tl.arange(0, BN)) % N
  offs_k = tl.arange(0, BK)
  a_ptrs = a_ptr.at[offs_token[:, None] // top_k, offs_k[None, :]]
  b_ptrs = b_ptr.at[off_experts, offs_bn[None, :], offs_k[:, None]]
  acc = tl.zeros((BM, BN), dtype=tl.float32)
  for k in range(0, tl.cdiv(K, BK)):
    a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < K - k * BK), other=0.0)
    b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
    acc += tl.dot(a, b)
    a_ptrs += BK
    b_ptrs += BK
  routed_epilogue(acc, c_ptr, topk_weights_ptr, offs_token, token_mask, pid_n, N, BN, top_k, MUL_ROUTED_WEIGHT)


def _fused_moe_case(t, k, e, n, kd, bm, dtype):
  ids = routed_ids(t, k, e)
  a = (R.integers(-4, 5, (t, kd)) / 4).astype(dtype)
  b = (R.integers(-4, 5, (e, n, kd)) / 4).astype(dtype)
  tw = (R.integers(1, 8, (t, k)) / 8).astype(np.float32)
  return ids, (a, b, tw) + align_want(ids, e, bm)


def _fused_moe_want(ids, a, b, tw, mul):
  t, k = ids.shape
  y = np.einsum("tk,tkn->tkn", np.ones((t, k), np.float32), np.einsum("td,tknd->tkn", f32(a), f32(b)[ids]))
  y = y * tw[:, :, None] if mul else y
  return y.reshape(t * k, -1).astype(a.dtype)


FUSED = [(32, 2, 8, 128, 128, 64, True, np.float16), (50, 4, 8, 256, 192, 64, False, jnp.bfloat16),
         (9, 2, 4, 128, 64, 64, True, jnp.bfloat16), (4, 2, 8, 128, 256, 16, True, jnp.bfloat16)]   # (decode: BM 16)


def _caught(fn):
  with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    out = fn()
  return out, [m for m in w if issubclass(m.category, mg.TritonSemanticsWarning)]


@pytest.mark.parametrize("t,k,e,n,kd,bm,mul,dtype", FUSED)
def test_vllm_fused_moe(t, k, e, n, kd, bm, mul, dtype):
  ids, args = _fused_moe_case(t, k, e, n, kd, bm, dtype)
  kw = dict(BM=bm, BN=64, BK=64, top_k=k, MUL_ROUTED_WEIGHT=mul)
  got, said = _caught(lambda: fused_moe(*args, interpret=True, **kw))
  np.testing.assert_array_equal(f32(got), f32(_fused_moe_want(ids, *args[:3], mul)))
  export(fused_moe, *args, **kw)
  # Only the token ids read from memory may be negative: the grouped order's // and % (and offs_bn's) do not warn.
  lines = sorted({str(w.message).split(":")[1] for w in said})
  texts = [str(w.message).splitlines()[0] for w in said]
  assert all("offs_token" in x for x in texts), texts
  assert not any("group_size_m" in x or "% N" in x for x in texts), texts
  assert len(lines) == (2 if mul else 1), lines


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def signs_by_program(x_ptr, o_ptr):
  pid = tl.program_id(0)
  left = x_ptr.shape[0] // 128 - pid          # 4 - pid: 1 to 4 in every program
  back = pid - 1                               # -1 in program 0
  offs = pid * 128 + tl.arange(0, 128)
  v = tl.load(x_ptr.at[offs])
  for k in range(3):
    v += (offs % left) + (left * 2 - k) // 2
  tl.store(o_ptr.at[offs], v + back // 2)


def test_division_warnings_wait_for_the_grid_walk():
  import inspect
  x = np.zeros(512, np.int32)
  got, said = _caught(lambda: signs_by_program(x, interpret=True))
  pid = np.repeat(np.arange(4), 128)
  offs, left = np.arange(512), 4 - pid
  want = sum((offs % left) + (left * 2 - k) // 2 for k in range(3)) + (pid - 1) // 2
  np.testing.assert_array_equal(np.asarray(got), want)
  assert len(said) == 1, [str(w.message) for w in said]
  lines, first = inspect.getsourcelines(signs_by_program.fn)
  line = next(first + n for n, s in enumerate(lines) if "back // 2" in s)
  col = lines[line - first].index("back // 2")
  text = str(said[0].message)
  assert said[0].lineno == line
  assert text.startswith(f"{signs_by_program.fn.__code__.co_filename}:{line}:{col}: back // 2 floors, as Python's and"
                         " jnp's (-7 // 2 is -4); Triton's // truncates toward zero (-3), so where back is negative"
                         " this port computes another quotient than Triton's"), text
  assert "hint: for Triton's quotient write lax.div(back, 2) (from jax import lax); for the floor, say so:" \
         " jnp.floor_divide(back, 2); or silence this with" in text, text
  export(signs_by_program, x)


# ---------------------------------------------------------------- block-quantised fp8 fused MoE, combined with atomics
def _fp8_grid(a, b, asc, bsc, tw, sid, *rest, BM, BN, **k):
  return (tl.cdiv(sid.shape[0], BM) * tl.cdiv(b.shape[1], BN),)


@mg.mgpu_kernel(out_shape=lambda a, b, *r, **k: S((a.shape[0], b.shape[1]), jnp.float32), grid=_fp8_grid)
def fused_moe_fp8_block(a_ptr, b_ptr, a_scale_ptr, b_scale_ptr, topk_weights_ptr, sorted_token_ids_ptr,
                        expert_ids_ptr, num_tokens_post_padded_ptr, out_ptr, *, BM: tl.constexpr, BN: tl.constexpr,
                        BK: tl.constexpr, top_k: tl.constexpr, group_n: tl.constexpr = 128,
                        group_k: tl.constexpr = 128):
  N, K = b_ptr.shape[1], b_ptr.shape[2]
  num_valid_tokens = topk_weights_ptr.shape[0] * top_k
  pid = tl.program_id(0)
  pid_m = pid // tl.cdiv(N, BN)
  pid_n = pid % tl.cdiv(N, BN)
  if pid_m * BM >= tl.load(num_tokens_post_padded_ptr.at[0]):
    return
  offs_token = tl.load(sorted_token_ids_ptr.at[pid_m * BM + tl.arange(0, BM)])
  token_mask = offs_token < num_valid_tokens
  slot = tl.where(token_mask, offs_token, 0)
  tok = slot // top_k
  e = tl.load(expert_ids_ptr.at[pid_m])
  offs_bn = pid_n * BN + tl.arange(0, BN)
  offs_k = tl.arange(0, BK)
  a_ptrs = a_ptr.at[tok[:, None], offs_k[None, :]]
  b_ptrs = b_ptr.at[e, offs_bn[None, :], offs_k[:, None]]
  acc = tl.zeros((BM, BN), dtype=tl.float32)
  for k in range(0, tl.cdiv(K, BK)):
    a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < K - k * BK), other=0.0)
    b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
    a_s = tl.load(a_scale_ptr.at[tok, k * BK // group_k], mask=token_mask, other=0.0)
    b_s = tl.load(b_scale_ptr.at[e, offs_bn // group_n, k * BK // group_k])
    acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
    a_ptrs += BK
    b_ptrs += BK
  acc = acc * tl.load(topk_weights_ptr.at[tok, slot % top_k], mask=token_mask, other=0.0)[:, None]
  tl.atomic_add(out_ptr.at[tok[:, None], offs_bn[None, :]], acc, mask=token_mask[:, None] & (offs_bn[None, :] < N))


def _fp8_moe_case(t, k, e, n, kd, bm):
  ids = routed_ids(t, k, e)
  a = (R.integers(-4, 5, (t, kd)) / 2).astype(np.float32).astype(F8)
  b = (R.integers(-4, 5, (e, n, kd)) / 2).astype(np.float32).astype(F8)
  asc = (2.0 ** R.integers(-3, 2, (t, kd // 128))).astype(np.float32)
  bsc = (2.0 ** R.integers(-3, 2, (e, n // 128, kd // 128))).astype(np.float32)
  tw = (R.integers(1, 8, (t, k)) / 8).astype(np.float32)
  return ids, (a, b, asc, bsc, tw) + align_want(ids, e, bm)


def _fp8_moe_want(ids, a, b, asc, bsc, tw):
  af, bf = f32(a), f32(b)
  out = np.zeros((a.shape[0], b.shape[1]), np.float32)
  for kb in range(a.shape[1] // 128):
    sl = slice(kb * 128, (kb + 1) * 128)
    part = np.einsum("td,tknd->tkn", af[:, sl], bf[ids][:, :, :, sl])        # (t, k, n)
    out += np.einsum("tkn,tk->tn", part * asc[:, kb][:, None, None] * np.repeat(bsc[ids][:, :, :, kb], 128, 2), tw)
  return out


FP8_MOE = [(24, 2, 4, 256, 256, 64), (9, 3, 8, 128, 384, 64), (4, 2, 8, 256, 256, 16)]


@pytest.mark.filterwarnings("ignore::mgpu_dsl.TritonSemanticsWarning")     # (slot // top_k of ids read: theirs)
@pytest.mark.parametrize("t,k,e,n,kd,bm", FP8_MOE)
def test_deepseek_block_fp8_fused_moe_combined_by_atomics(t, k, e, n, kd, bm):
  ids, args = _fp8_moe_case(t, k, e, n, kd, bm)
  kw = dict(BM=bm, BN=128, BK=128, top_k=k)
  np.testing.assert_allclose(np.asarray(fused_moe_fp8_block(*args, interpret=True, **kw)), _fp8_moe_want(ids, *args[:5]),
                             rtol=1e-6, atol=1e-6)
  export(fused_moe_fp8_block, *args, **kw)


# ---------------------------------------------------------------- combine: the sum of top-k weighted rows
@mg.mgpu_kernel(out_shape=lambda y, w: S((w.shape[0], y.shape[1]), y.dtype),
                grid=lambda y, w: (tl.cdiv(w.shape[0], 32), tl.cdiv(y.shape[1], 128)))
def moe_sum(y, w, out, *, BT: tl.constexpr = 32, BN: tl.constexpr = 128):
  T, K = w.shape
  N = y.shape[1]
  t = tl.program_id(0) * BT + tl.arange(0, BT)
  n = tl.program_id(1) * BN + tl.arange(0, BN)
  acc = tl.zeros((BT, BN), tl.float32)
  for j in tl.static_range(K):
    row = tl.load(y.at[(t * K + j)[:, None], n[None, :]], mask=(t[:, None] < T) & (n[None, :] < N), other=0.0)
    acc += row.to(tl.float32) * tl.load(w.at[t, j], mask=t < T, other=0.0)[:, None]
  tl.store(out.at[t[:, None], n[None, :]], acc.to(out.dtype), mask=(t[:, None] < T) & (n[None, :] < N))


def _moe_sum_case(t, k, n, dtype):
  return (R.integers(-4, 5, (t * k, n)) / 4).astype(dtype), (R.integers(1, 8, (t, k)) / 8).astype(np.float32)


def _moe_sum_want(y, w):
  t, k = w.shape
  return (f32(y).reshape(t, k, -1) * w[:, :, None]).sum(1).astype(y.dtype)


@pytest.mark.parametrize("t,k,n,dtype", [(32, 2, 128, np.float16), (50, 4, 256, jnp.bfloat16), (9, 6, 384, np.float32)])
def test_moe_sum(t, k, n, dtype):
  args = _moe_sum_case(t, k, n, dtype)
  np.testing.assert_array_equal(f32(moe_sum(*args, interpret=True)), f32(_moe_sum_want(*args)))
  export(moe_sum, *args)


# ---------------------------------------------------------------- vLLM's int4 (GPTQ / AWQ) fused MoE, int64 offsets
def _w4_grid(a, b, bs, bz, tw, sid, *rest, BM, BN, **k):
  return (tl.cdiv(sid.shape[0], BM) * tl.cdiv(b.shape[2], BN),)


@mg.mgpu_kernel(out_shape=lambda a, b, bs, bz, tw, *r, **k: S((tw.shape[0] * tw.shape[1], b.shape[2]), a.dtype),
                grid=_w4_grid)
def fused_moe_w4a16(a_ptr, b_ptr, b_scale_ptr, b_zp_ptr, topk_weights_ptr, sorted_token_ids_ptr, expert_ids_ptr,
                    num_tokens_post_padded_ptr, c_ptr, *, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                    group_size: tl.constexpr, top_k: tl.constexpr, MUL_ROUTED_WEIGHT: tl.constexpr):
  """b (E, K // 2, N) uint8 nibbles along K, scales (E, K // G, N), zero points (E, K // G, N // 2) packed along N,
  gathered per k row; int64 token offsets and expert id, as vLLM's kernel has them."""
  N = b_ptr.shape[2]
  K = a_ptr.shape[1]
  num_valid_tokens = topk_weights_ptr.shape[0] * top_k
  pid = tl.program_id(axis=0)
  pid_m = pid // tl.cdiv(N, BN)
  pid_n = pid % tl.cdiv(N, BN)
  if pid_m * BM >= tl.load(num_tokens_post_padded_ptr.at[0]):
    return
  offs_token = tl.load(sorted_token_ids_ptr.at[pid_m * BM + tl.arange(0, BM).to(tl.int64)])
  token_mask = offs_token < num_valid_tokens
  off_experts = tl.load(expert_ids_ptr.at[pid_m]).to(tl.int64)
  offs_bn = (pid_n * BN + tl.arange(0, BN).to(tl.int64)) % N
  offs_k = tl.arange(0, BK)
  a_ptrs = a_ptr.at[offs_token[:, None] // top_k, offs_k[None, :]]
  b_ptrs = b_ptr.at[off_experts, (offs_k[:, None] // 2), offs_bn[None, :]]
  b_shifter = (offs_k[:, None] % 2) * 4
  b_zp_shifter = (offs_bn[None, :] % 2) * 4
  accumulator = tl.zeros((BM, BN), dtype=tl.float32)
  for k in range(0, tl.cdiv(K, BK)):
    a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < K - k * BK), other=0.0)
    b = (tl.load(b_ptrs) >> b_shifter) & 0xF
    offs_ks = (offs_k[:, None] + BK * k) // group_size
    b_scale = tl.load(b_scale_ptr.at[off_experts, offs_ks, offs_bn[None, :]]).to(tl.float32)
    b_zp = tl.load(b_zp_ptr.at[off_experts, offs_ks, offs_bn[None, :] // 2])
    b_zp = ((b_zp >> b_zp_shifter) & 0xF).to(tl.float32)
    b = ((b.to(tl.float32) - b_zp) * b_scale).to(a_ptr.dtype)
    accumulator = tl.dot(a, b, acc=accumulator)
    a_ptrs += BK
    b_ptrs += (BK // 2) * N
  routed_epilogue(accumulator, c_ptr, topk_weights_ptr, offs_token, token_mask, pid_n, N, BN, top_k,
                  MUL_ROUTED_WEIGHT)


def _w4_moe_case(t, k, e, n, kd, bm, g, dtype):
  ids = routed_ids(t, k, e)
  a = (R.integers(-4, 5, (t, kd)) / 4).astype(dtype)
  b = R.integers(0, 256, (e, kd // 2, n)).astype(np.uint8)
  bs = (2.0 ** R.integers(-4, 0, (e, kd // g, n))).astype(dtype)
  bz = R.integers(0, 256, (e, kd // g, n // 2)).astype(np.uint8)
  tw = (R.integers(1, 8, (t, k)) / 8).astype(np.float32)
  return ids, (a, b, bs, bz, tw) + align_want(ids, e, bm)


def _w4_moe_want(ids, a, b, bs, bz, tw, mul, g):
  w = np.empty((b.shape[0], b.shape[1] * 2, b.shape[2]), np.int32)
  w[:, 0::2], w[:, 1::2] = b & 0xF, b >> 4
  z = np.empty((bz.shape[0], bz.shape[1], bz.shape[2] * 2), np.int32)
  z[:, :, 0::2], z[:, :, 1::2] = bz & 0xF, bz >> 4
  wd = f32(((w - np.repeat(z, g, 1)).astype(np.float32) * np.repeat(f32(bs), g, 1)).astype(a.dtype))
  y = np.einsum("td,tkdn->tkn", f32(a), wd[ids])
  y = y * tw[:, :, None] if mul else y
  return y.reshape(-1, b.shape[2]).astype(a.dtype)


W4_MOE = [(20, 2, 4, 128, 256, 64, 128, True, jnp.bfloat16), (9, 3, 8, 64, 128, 64, 64, False, np.float16)]


@pytest.mark.filterwarnings("ignore::mgpu_dsl.TritonSemanticsWarning")     # (offs_token // top_k of ids read)
@pytest.mark.parametrize("t,k,e,n,kd,bm,g,mul,dtype", W4_MOE)
def test_vllm_int4_fused_moe(t, k, e, n, kd, bm, g, mul, dtype):
  ids, args = _w4_moe_case(t, k, e, n, kd, bm, g, dtype)
  kw = dict(BM=bm, BN=64, BK=64, group_size=g, top_k=k, MUL_ROUTED_WEIGHT=mul)
  np.testing.assert_array_equal(f32(fused_moe_w4a16(*args, interpret=True, **kw)), f32(_w4_moe_want(ids, *args[:5], mul, g)))
  export(fused_moe_w4a16, *args, **kw)


# ---------------------------------------------------------------- SGLang's moe_sum_reduce (a 3-D load) and histogram counts
@mg.mgpu_kernel(out_shape=lambda y: S((y.shape[0], y.shape[2]), y.dtype),
                grid=lambda y: (tl.cdiv(y.shape[0], 16), tl.cdiv(y.shape[2], 128)))
def moe_sum_reduce(y_ptr, o_ptr, *, BT: tl.constexpr = 16, BN: tl.constexpr = 128,
                   routed_scaling_factor: tl.constexpr = 2.5):
  T, K, N = y_ptr.shape
  t = tl.program_id(0) * BT + tl.arange(0, BT)
  n = tl.program_id(1) * BN + tl.arange(0, BN)
  x = tl.load(y_ptr.at[t[:, None, None], tl.arange(0, K)[None, :, None], n[None, None, :]],
              mask=(t[:, None, None] < T) & (n[None, None, :] < N), other=0.0)
  acc = tl.sum(x.to(tl.float32), axis=1) * routed_scaling_factor
  tl.store(o_ptr.at[t[:, None], n[None, :]], acc.to(o_ptr.dtype), mask=(t[:, None] < T) & (n[None, :] < N))


@pytest.mark.parametrize("t,k,n,dtype", [(32, 2, 128, jnp.bfloat16), (50, 8, 256, np.float16), (9, 4, 384, np.float32)])
def test_moe_sum_reduce(t, k, n, dtype):
  y = (R.integers(-4, 5, (t, k, n)) / 4).astype(dtype)
  np.testing.assert_array_equal(f32(moe_sum_reduce(y, interpret=True)), f32((f32(y).sum(1) * 2.5).astype(dtype)))
  export(moe_sum_reduce, y)


@mg.mgpu_kernel(out_shape=lambda ids, **k: (S((k["E"],), jnp.int32), S((k["E"],), jnp.int32)), grid=(1,))
def expert_counts(topk_ids, counts, offsets, *, E: tl.constexpr, NP: tl.constexpr, BS: tl.constexpr):
  n = topk_ids.shape[0] * topk_ids.shape[1]
  i = tl.arange(0, NP)
  c = tl.histogram(tl.load(topk_ids.at[i // topk_ids.shape[1], i % topk_ids.shape[1]], mask=i < n, other=E), E)
  tl.store(counts.at[tl.arange(0, E)], c)
  padded = (c + BS - 1) // BS * BS
  tl.store(offsets.at[tl.arange(0, E)], tl.cumsum(padded, 0) - padded)


def test_expert_counts_by_histogram():
  ids = routed_ids(30, 2, 8)
  c, o = expert_counts(ids, E=8, NP=64, BS=16, interpret=True)
  want = np.bincount(ids.reshape(-1), minlength=8)
  padded = -(-want // 16) * 16
  np.testing.assert_array_equal(np.asarray(c), want)
  np.testing.assert_array_equal(np.asarray(o), np.cumsum(padded) - padded)
  export(expert_counts, ids, E=8, NP=64, BS=16)


# ---------------------------------------------------------------- Triton's scalar pointer load: its hint names the element
def test_fused_moe_expert_parallel_blocks_write_zeros():
  ids, (a, b, tw, sid, eid, npp) = _fused_moe_case(24, 2, 8, 128, 128, 64, jnp.bfloat16)
  local = np.where(eid >= 4, -1, eid).astype(np.int32)        # experts 4-7 live on another rank
  kw = dict(BM=64, BN=64, BK=64, top_k=2, MUL_ROUTED_WEIGHT=True)
  want = _fused_moe_want(ids, a, b, tw, True)
  want[(ids >= 4).reshape(-1)] = 0
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.TritonSemanticsWarning)
    np.testing.assert_array_equal(f32(fused_moe(a, b, tw, sid, local, npp, interpret=True, **kw)), f32(want))


@mg.mgpu_kernel(out_shape=lambda e: S((8,), jnp.int32), grid=(1,))
def expert_by_pointer(expert_ids_ptr, o_ptr):
  pid_m = tl.program_id(0)
  off_experts = tl.load(expert_ids_ptr + pid_m, mask=pid_m < 4, other=-1)
  tl.store(o_ptr.at[tl.arange(0, 8)], tl.full((8,), off_experts, tl.int32))


@mg.mgpu_kernel(out_shape=lambda e: S((8,), jnp.int32), grid=(1,))
def expert_by_index(expert_ids_ptr, o_ptr):
  pid_m = tl.program_id(0)
  off_experts = tl.load(expert_ids_ptr.at[pid_m], mask=pid_m < 4, other=-1)
  tl.store(o_ptr.at[tl.arange(0, 8)], tl.full((8,), off_experts, tl.int32))


@mg.mgpu_kernel(out_shape=lambda e: S((1,), jnp.int32), grid=(1,))
def total_by_pointer(expert_ids_ptr, total_ptr):
  pid_m = tl.program_id(0)
  tl.store(total_ptr + pid_m, tl.load(expert_ids_ptr.at[pid_m]) * 2)


@mg.mgpu_kernel(out_shape=lambda e: S((1,), jnp.int32), grid=(1,))
def total_by_index(expert_ids_ptr, total_ptr):
  pid_m = tl.program_id(0)
  tl.store(total_ptr.at[pid_m], tl.load(expert_ids_ptr.at[pid_m]) * 2)


def test_scalar_pointer_load_hints_the_element():
  """`tl.load(expert_ids_ptr + pid_m)` (vLLM's expert id) hinted a block window `x.at[ml.ds(start, n)]` first; the
  hint now reads the element with the call's own mask and other, and following it computes."""
  expect(expert_by_pointer, [S((9,), jnp.int32)], mg.KernelTypeError, "expert_ids_ptr + pid_m",
         "+ works on register values, got expert_ids_ptr (GMEM ref) plus the offset pid_m: a ref is not a pointer, so"
         " it does not move by an offset",
         hint="read the element at that offset: tl.load(expert_ids_ptr.at[pid_m], mask=pid_m < 4, other=-1) (or"
              " expert_ids_ptr[pid_m], unmasked), a scalar; for a block from there,"
              " expert_ids_ptr.at[tl.ds(pid_m, n)].load(mask=mask, other=0)")
  e = np.arange(9, dtype=np.int32) + 3
  np.testing.assert_array_equal(np.asarray(expert_by_index(e, interpret=True)), np.full(8, 3, np.int32))
  export(expert_by_index, e)
  expect(total_by_pointer, [S((9,), jnp.int32)], mg.KernelTypeError, "total_ptr + pid_m",
         "+ works on register values, got total_ptr (GMEM ref) plus the offset pid_m: a ref is not a pointer, so it"
         " does not move by an offset",
         hint="write the element at that offset: tl.store(total_ptr.at[pid_m], tl.load(expert_ids_ptr.at[pid_m]) * 2)"
              " (or total_ptr[pid_m] = tl.load(expert_ids_ptr.at[pid_m]) * 2, unmasked); for a block from there,"
              " tl.store(total_ptr.at[tl.ds(pid_m, n)], tl.load(expert_ids_ptr.at[pid_m]) * 2)")
  np.testing.assert_array_equal(np.asarray(total_by_index(e, interpret=True)), [6])
  export(total_by_index, e)


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
def test_probe62d_moe_on_the_gpu():
  from test_moe_routing import (GATES, ORDERS, _gating_want, _grouped_want, distinct_logits, grouped_topk,
                                topk_gating, topk_then_softmax)
  for t, e, k, bt in GATES:
    for softmax_first, renorm in ORDERS:
      x = distinct_logits(t, e)
      w, ids = jax.jit(lambda x: topk_gating(x, TOPK=k, BT=bt, RENORM=renorm, SOFTMAX_FIRST=softmax_first))(x)
      want_w, want_ids = _gating_want(x, k, renorm, softmax_first)
      np.testing.assert_array_equal(np.asarray(ids), want_ids)
      np.testing.assert_allclose(np.asarray(w), want_w, rtol=1e-5, atol=1e-6)
  x = distinct_logits(40, 64)
  got = jax.jit(lambda x: topk_then_softmax(x, K=4, DIM=None))(x)
  np.testing.assert_allclose(np.asarray(got), np.asarray(jax.nn.softmax(jax.lax.top_k(x, 4)[0], axis=1)), rtol=1e-5)
  x = distinct_logits(40, 64, 6.0) - 3
  bias = (R.permutation(64) / 64 * 0.01).astype(np.float32)
  w, ids = jax.jit(lambda x, b: grouped_topk(x, b, TOPK=6, G=8, TOPG=4))(x, bias)
  want_w, want_ids = _grouped_want(x, bias, 6, 8, 4)
  np.testing.assert_array_equal(np.asarray(ids), want_ids)
  np.testing.assert_allclose(np.asarray(w), want_w, rtol=1e-5, atol=1e-6)
  ids = routed_ids(50, 4, 16)
  for got, want in zip(jax.jit(lambda i: moe_align(i, E=16, BS=64, NP=256))(ids), align_want(ids, 16, 64)):
    np.testing.assert_array_equal(np.asarray(got), want)
  ids, (a, b, tw, sid, eid, npp) = _fused_moe_case(24, 2, 8, 128, 128, 64, jnp.bfloat16)
  got = jax.jit(lambda *x: fused_moe(*x, BM=64, BN=64, BK=64, top_k=2, MUL_ROUTED_WEIGHT=True))(
      a, b, tw, sid, np.where(eid >= 4, -1, eid).astype(np.int32), npp)
  want = _fused_moe_want(ids, a, b, tw, True)
  want[(ids >= 4).reshape(-1)] = 0
  np.testing.assert_allclose(f32(got), f32(want), rtol=1e-2, atol=1e-2)
  for t, k, e, n, kd, bm, mul, dtype in FUSED:
    ids, args = _fused_moe_case(t, k, e, n, kd, bm, dtype)
    got = jax.jit(lambda *a: fused_moe(*a, BM=bm, BN=64, BK=64, top_k=k, MUL_ROUTED_WEIGHT=mul))(*args)
    np.testing.assert_allclose(f32(got), f32(_fused_moe_want(ids, *args[:3], mul)), rtol=1e-2, atol=1e-2)
  for t, k, e, n, kd, bm in FP8_MOE:
    ids, args = _fp8_moe_case(t, k, e, n, kd, bm)
    got = jax.jit(lambda *a: fused_moe_fp8_block(*a, BM=bm, BN=128, BK=128, top_k=k))(*args)
    np.testing.assert_allclose(np.asarray(got), _fp8_moe_want(ids, *args[:5]), rtol=2e-2, atol=2e-2)
  for t, k, e, n, kd, bm, g, mul, dtype in W4_MOE:
    ids, args = _w4_moe_case(t, k, e, n, kd, bm, g, dtype)
    got = jax.jit(lambda *a: fused_moe_w4a16(*a, BM=bm, BN=64, BK=64, group_size=g, top_k=k, MUL_ROUTED_WEIGHT=mul))(*args)
    np.testing.assert_allclose(f32(got), f32(_w4_moe_want(ids, *args[:5], mul, g)), rtol=1e-2, atol=1e-2)
  y = (R.integers(-4, 5, (50, 8, 256)) / 4).astype(np.float16)
  np.testing.assert_array_equal(f32(jax.jit(moe_sum_reduce)(y)), f32((f32(y).sum(1) * 2.5).astype(np.float16)))
  args = _moe_sum_case(50, 4, 256, jnp.bfloat16)
  np.testing.assert_array_equal(f32(jax.jit(moe_sum)(*args)), f32(_moe_sum_want(*args)))
  x = np.zeros(512, np.int32)
  pid = np.repeat(np.arange(4), 128)
  want = sum((np.arange(512) % (4 - pid)) + ((4 - pid) * 2 - k) // 2 for k in range(3)) + (pid - 1) // 2
  np.testing.assert_array_equal(np.asarray(jax.jit(signs_by_program)(x)), want)
