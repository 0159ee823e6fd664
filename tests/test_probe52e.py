"""Probe 52e: quantised and MoE inference kernels as vLLM and Pallas users write them.

vLLM's two AWQ Triton kernels (`awq_dequantize_kernel`, `awq_gemm_kernel`) were MG204 in three places: (1) the nibble
order `((tl.arange(0, 2) * 4)[None, :] + tl.arange(0, 4)[:, None]).reshape(8)` is a (4, 2) grid no register tensor
holds: an integer table known while compiling, reshaped or broadcast into a shape registers hold, is now made at
that shape (ops/static_tiles.py); (2) a group's row of zeros or scales, `g + tl.arange(0, 1)` (a one-element run)
by a run of columns, was a gather, not the masked window of a run: it is the window now; (3) `tl.interleave(z, z)`
of that (1, n) row (three times, 8 nibbles a word) joined (1, n, 1) parts: a row is interleaved as its vector. (4) A
decode tile of 3 or 7 tokens read whole times a row of per-channel scales, `x[...] * s[0:1, :]` of a (3, 64) tile, was
MG204: the padded trace padded the row to (4, 64) too (its zero rows met the tile's); a (1, n) row is read as it is
there, and `ml.broadcast_to(row, x.shape)` broadcasts to the padded shape."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F16, BF16, F32, I32 = jnp.float16, jnp.bfloat16, jnp.float32, jnp.int32
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
REVERSE = np.array([0, 4, 1, 5, 2, 6, 3, 7])


def _pack_awq(q):
  """(r, n) nibbles into (r, n // 8) int32 words in AWQ's order."""
  r, n = q.shape
  q = q.reshape(r, n // 8, 8)[:, :, AWQ_ORDER].astype(np.uint32)
  out = np.zeros((r, n // 8), np.uint32)
  for i in range(8):
    out |= q[:, :, i] << (4 * i)
  return out.view(np.int32)


def _export(kernel, *args, **kw):
  specs = [S(np.shape(a), a.dtype) for a in args]
  kernel.check(*specs, **kw)
  text = str(jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*specs).mlir_module())
  assert "mosaic_gpu" in text


def _awq_problem(k, n, g, seed, m=None):
  rng = np.random.default_rng(seed)
  q, z = rng.integers(0, 16, (k, n)), rng.integers(0, 16, (k // g, n))
  s = jnp.asarray(rng.random((k // g, n)) * 0.02 + 0.01, F16)
  w = (q - np.repeat(z, g, 0)) * np.repeat(np.asarray(s, np.float32), g, 0)
  args = (jnp.asarray(_pack_awq(q)), jnp.asarray(_pack_awq(z)), s)
  a = None if m is None else jnp.asarray(rng.standard_normal((m, k)), F16)
  return args, w, a


# ---------------------------------------------------------------- vLLM's AWQ kernels, ported as written
@mg.mgpu_kernel(out_shape=lambda qw, qz, sc, **k: S((qw.shape[0], qw.shape[1] * 8), F16),
                grid=lambda qw, qz, sc, *, BX, BY, **k: (ml.cdiv(qw.shape[1], BX), ml.cdiv(qw.shape[0], BY)))
def awq_dequantize(qweight_ptr, zeros_ptr, scales_ptr, result_ptr, *, group_size: ml.constexpr, BX: ml.constexpr,
                   BY: ml.constexpr):
  num_rows, num_cols = qweight_ptr.shape
  pid_x = ml.program_id(0)
  pid_y = ml.program_id(1)
  offsets_y = pid_y * BY + ml.arange(0, BY)
  offsets_x = pid_x * BX + ml.arange(0, BX)
  masks = (offsets_y < num_rows)[:, None] & (offsets_x < num_cols)[None, :]
  result_offsets_x = pid_x * BX * 8 + ml.arange(0, BX * 8)
  result_masks = (offsets_y < num_rows)[:, None] & (result_offsets_x < num_cols * 8)[None, :]
  iweights = ml.load(qweight_ptr.at[offsets_y[:, None], offsets_x[None, :]], masks, 0)
  iweights = ml.interleave(iweights, iweights)
  iweights = ml.interleave(iweights, iweights)
  iweights = ml.interleave(iweights, iweights)
  reverse_awq_order_tensor = ((ml.arange(0, 2) * 4)[None, :] + ml.arange(0, 4)[:, None]).reshape(8)
  shifts = reverse_awq_order_tensor * 4
  shifts = ml.broadcast_to(shifts[None, :], (BY * BX, 8))
  shifts = ml.reshape(shifts, (BY, BX * 8))
  iweights = (iweights >> shifts) & 0xF
  zero_offsets_y = pid_y * BY // group_size + ml.arange(0, 1)
  zero_masks = (zero_offsets_y < num_rows // group_size)[:, None] & (offsets_x < num_cols)[None, :]
  zeros = ml.load(zeros_ptr.at[zero_offsets_y[:, None], offsets_x[None, :]], zero_masks, 0)
  zeros = ml.interleave(zeros, zeros)
  zeros = ml.interleave(zeros, zeros)
  zeros = ml.interleave(zeros, zeros)
  zeros = ml.broadcast_to(zeros, (BY, BX * 8))
  zeros = (zeros >> shifts) & 0xF
  scale_masks = (zero_offsets_y < num_rows // group_size)[:, None] & (result_offsets_x < num_cols * 8)[None, :]
  scales = ml.load(scales_ptr.at[zero_offsets_y[:, None], result_offsets_x[None, :]], scale_masks, 0.0)
  scales = ml.broadcast_to(scales, (BY, BX * 8))
  iweights = (iweights - zeros) * scales
  ml.store(result_ptr.at[offsets_y[:, None], result_offsets_x[None, :]], iweights.to(result_ptr.dtype), result_masks)


@pytest.mark.parametrize("bx, by", [(8, 64), (16, 16), (4, 32), (2, 64)])
def test_awq_dequantize(bx, by):
  args, w, _ = _awq_problem(128, 256, 64, 1)
  out = awq_dequantize(*args, group_size=64, BX=bx, BY=by, interpret=True)
  np.testing.assert_allclose(np.asarray(out, np.float32), w, rtol=1e-2, atol=1e-3)
  _export(awq_dequantize, *args, group_size=64, BX=bx, BY=by)


def _awq_grid(a, qw, qz, sc, *, BM, BN, SPLIT_K, **k):
  return (ml.cdiv(a.shape[0], BM) * ml.cdiv(sc.shape[1], BN), SPLIT_K)


@mg.mgpu_kernel(out_shape=lambda a, qw, qz, sc, **k: S((a.shape[0], sc.shape[1]), a.dtype), grid=_awq_grid)
def awq_gemm(a_ptr, b_ptr, zeros_ptr, scales_ptr, c_ptr, *, BM: ml.constexpr, BN: ml.constexpr, BK: ml.constexpr,
             SPLIT_K: ml.constexpr, group_size: ml.constexpr):
  M, K = a_ptr.shape
  N = scales_ptr.shape[1]
  pid = ml.program_id(0)
  pid_z = ml.program_id(1)
  num_pid_n = (N + BN - 1) // BN
  pid_m = pid // num_pid_n
  pid_n = pid % num_pid_n
  accumulator = ml.zeros((BM, BN), dtype=c_ptr.dtype)
  reverse_awq_order_tensor = ((ml.arange(0, 2) * 4)[None, :] + ml.arange(0, 4)[:, None]).reshape(8)
  shifts = reverse_awq_order_tensor * 4
  shifts = ml.broadcast_to(shifts[None, :], (BK * (BN // 8), 8))
  shifts = ml.reshape(shifts, (BK, BN))
  offsets_am = pid_m * BM + ml.arange(0, BM)
  masks_am = offsets_am < M
  offsets_bn = pid_n * (BN // 8) + ml.arange(0, BN // 8)
  masks_bn = offsets_bn < N // 8
  offsets_sn = pid_n * BN + ml.arange(0, BN)
  masks_sn = offsets_sn < N
  offsets_k = pid_z * BK + ml.arange(0, BK)
  for k in range(0, ml.cdiv(K, BK * SPLIT_K)):
    masks_k = offsets_k < K
    a = ml.load(a_ptr.at[offsets_am[:, None], offsets_k[None, :]], mask=masks_am[:, None] & masks_k[None, :],
                other=0.0)
    b = ml.load(b_ptr.at[offsets_k[:, None], offsets_bn[None, :]], mask=masks_k[:, None] & masks_bn[None, :],
                other=0)
    b = ml.interleave(b, b)
    b = ml.interleave(b, b)
    b = ml.interleave(b, b)
    offsets_szk = (BK * SPLIT_K * k + pid_z * BK) // group_size + ml.arange(0, 1)
    masks_zk = offsets_szk < K // group_size
    zeros = ml.load(zeros_ptr.at[offsets_szk[:, None], offsets_bn[None, :]],
                    mask=masks_zk[:, None] & masks_bn[None, :], other=0)
    zeros = ml.interleave(zeros, zeros)
    zeros = ml.interleave(zeros, zeros)
    zeros = ml.interleave(zeros, zeros)
    zeros = ml.broadcast_to(zeros, (BK, BN))
    scales = ml.load(scales_ptr.at[offsets_szk[:, None], offsets_sn[None, :]],
                     mask=masks_zk[:, None] & masks_sn[None, :], other=0.0)
    scales = ml.broadcast_to(scales, (BK, BN))
    b = (b >> shifts) & 0xF
    zeros = (zeros >> shifts) & 0xF
    b = (b - zeros) * scales
    accumulator = ml.dot(a, b.to(c_ptr.dtype), accumulator, out_dtype=c_ptr.dtype)
    offsets_k += BK * SPLIT_K
  offs_cm = pid_m * BM + ml.arange(0, BM)
  c_mask = (offs_cm[:, None] < M) & (offsets_sn[None, :] < N)
  if SPLIT_K == 1:
    ml.store(c_ptr.at[offs_cm[:, None], offsets_sn[None, :]], accumulator.to(c_ptr.dtype), mask=c_mask)
  else:
    ml.atomic_add(c_ptr.at[offs_cm[:, None], offsets_sn[None, :]], accumulator.to(c_ptr.dtype), mask=c_mask)


def _awq_gemm_case(m, seed):
  args, w, a = _awq_problem(256, 128, 128, seed, m)
  ref = np.asarray(a, np.float32) @ w
  return (a, *args), ref


def test_awq_gemm_decode():
  args, ref = _awq_gemm_case(5, 2)
  kw = dict(BM=16, BN=64, BK=64, SPLIT_K=1, group_size=128)
  out = awq_gemm(*args, **kw, interpret=True)
  np.testing.assert_allclose(np.asarray(out, np.float32), ref, rtol=3e-2, atol=3e-2)
  _export(awq_gemm, *args, **kw)


def test_awq_gemm_block_n_32():
  """vLLM's default blocks (32, 32, 32): the zeros row is (1, 4), BLOCK_N // 8 words, read as its 4 scalars."""
  args, ref = _awq_gemm_case(5, 6)
  kw = dict(BM=32, BN=32, BK=32, SPLIT_K=1, group_size=128)
  out = awq_gemm(*args, **kw, interpret=True)
  np.testing.assert_allclose(np.asarray(out, np.float32), ref, rtol=3e-2, atol=3e-2)
  _export(awq_gemm, *args, **kw)


@pytest.mark.gpu
@pytest.mark.parametrize("m, split_k, bn", [(5, 1, 64), (16, 2, 64), (100, 1, 64), (5, 1, 32), (40, 2, 32)])
def test_awq_gemm_gpu(m, split_k, bn):
  args, ref = _awq_gemm_case(m, 3)
  kw = dict(BM=(16 if m <= 16 else 64) if bn == 64 else 32, BN=bn, BK=bn, SPLIT_K=split_k, group_size=128)
  out = jax.jit(lambda *a: awq_gemm(*a, **kw))(*args)
  np.testing.assert_allclose(np.asarray(out, np.float32), ref, rtol=3e-2, atol=3e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("bx", [32, 4])
def test_awq_dequantize_gpu(bx):
  args, w, _ = _awq_problem(256, 512, 128, 4)
  out = jax.jit(lambda *a: awq_dequantize(*a, group_size=128, BX=bx, BY=32))(*args)
  np.testing.assert_allclose(np.asarray(out, np.float32), w, rtol=1e-2, atol=1e-3)


# ---------------------------------------------------------------- integer tables known while compiling
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def table_row(x, o):
  """AWQ's order made (1, 8), then stretched over the tile's rows and words."""
  order = ((ml.arange(0, 2) * 4)[None, :] + ml.arange(0, 4)[:, None]).reshape(1, 8)
  shifts = ml.broadcast_to(order * 4, (x.shape[0] * (x.shape[1] // 8), 8)).reshape(x.shape)
  o[...] = (x[...] >> shifts) & 0xF


@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=(1,))
def table_line(x, s, o):
  """A (4, 4) grid of aranges that is a line, arange(16) * 2 - 3, beside a group's row of scales."""
  t = ((ml.arange(0, 4)[:, None] * 4 + ml.arange(0, 4)[None, :]) * 2 - 3).reshape(16)
  o[...] = (x[...] + t[None, :]) * ml.broadcast_to(s[0:1, :], x.shape)


@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=(1,))
def table_clamped(x, s, o):
  """A table with negative entries, min and max, repeating every 8 columns, beside a row of zeros."""
  t = ml.maximum(ml.minimum(ml.arange(0, 4)[:, None] - ml.arange(0, 2)[None, :] * 3, 2), -1).reshape(8)
  t = ml.broadcast_to(t[None, :], (x.shape[0] * (x.shape[1] // 8), 8)).reshape(x.shape)
  o[...] = x[...] * t + ml.broadcast_to(s[0:1, :], x.shape)


def _tables():
  rev = np.tile(REVERSE * 4, 8)
  clamped = np.clip(np.arange(4)[:, None] - np.arange(2)[None, :] * 3, -1, 2).reshape(8)
  return [(table_row, lambda x, s: (x >> rev[None, :]) & 0xF),
          (table_line, lambda x, s: (x + (np.arange(16) * 2 - 3)[None, :]) * s[:1]),
          (table_clamped, lambda x, s: x * np.tile(clamped, x.shape[1] // 8)[None, :] + s[:1])]


@pytest.mark.parametrize("case", range(3))
def test_static_tables(case):
  kernel, ref = _tables()[case]
  cols, rng = 16 if kernel is table_line else 64, np.random.default_rng(5 + case)
  x = rng.integers(-2 ** 31, 2 ** 31 - 1, (32, cols)) if kernel is table_row else rng.integers(-1000, 1000, (32, cols))
  x, s = x.astype(np.int32), rng.integers(-5, 5, (3, cols)).astype(np.int32)
  args = (x,) if kernel is table_row else (x, s)
  np.testing.assert_array_equal(np.asarray(kernel(*map(jnp.asarray, args), interpret=True)), ref(x, s))
  _export(kernel, *map(jnp.asarray, args))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def table_transposed(x, o):
  """AWQ's order written as a transposed (2, 4) grid of an arange, flattened, stretched over the words."""
  order = ml.reshape(ml.trans(ml.arange(0, 8).reshape(2, 4)), (8,))
  shifts = ml.broadcast_to(order[None, :] * 4, (x.shape[0] * (x.shape[1] // 8), 8)).reshape(x.shape)
  o[...] = (x[...] >> shifts) & 0xF


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def table_transposed_jnp(x, o):
  order = jnp.transpose(jnp.arange(8).reshape(2, 4)).reshape(-1)
  o[...] = (x[...] >> (jnp.tile(order, x.shape[1] // 8) * 4)[None, :]) & 0xF


@mg.mgpu_kernel(out_shape=(S((2, 4), I32), S((4, 2), I32)), grid=(1,))
def grids_stored(g, t):
  g[...] = ml.arange(0, 8).reshape(2, 4)
  t[...] = ml.trans(ml.arange(0, 8).reshape(2, 4)) * 3 + 1


def test_transposed_tables():
  """An arange reshaped into a small grid (no register tensor holds (2, 4)) and transposed is a grid of aranges
  (its elements a + c0 * i + c1 * j): made at that shape, stored, or made again where it is flattened (MG204 at the
  reshape before)."""
  x = np.random.default_rng(13).integers(-2 ** 31, 2 ** 31 - 1, (32, 64)).astype(np.int32)
  ref = (x >> np.tile(np.arange(8).reshape(2, 4).T.reshape(8) * 4, 8)[None, :]) & 0xF
  for kernel in (table_transposed, table_transposed_jnp):
    np.testing.assert_array_equal(np.asarray(kernel(jnp.asarray(x), interpret=True)), ref)
    _export(kernel, jnp.asarray(x))
  g, t = grids_stored(interpret=True)
  np.testing.assert_array_equal(np.asarray(g), np.arange(8).reshape(2, 4))
  np.testing.assert_array_equal(np.asarray(t), np.arange(8).reshape(2, 4).T * 3 + 1)
  _export(grids_stored)


# ---------------------------------------------------------------- one-element runs, interleaved rows
@mg.mgpu_kernel(out_shape=lambda z, *, n: S((32, z.shape[1] * 8), I32), grid=(1,))
def group_row(z, o, *, n: ml.constexpr):
  """The zeros of group g // 2 (a one-element run by a run of columns), 8 nibbles a word, over 32 rows."""
  g = n // 2 + ml.arange(0, 1)
  cols = ml.arange(0, z.shape[1])
  zeros = ml.load(z.at[g[:, None], cols[None, :]], mask=(g < z.shape[0])[:, None], other=0)
  zeros = ml.interleave(zeros, zeros)
  zeros = ml.interleave(zeros, zeros)
  zeros = ml.interleave(zeros, zeros)
  o[...] = ml.broadcast_to(zeros, (32, z.shape[1] * 8))


@mg.mgpu_kernel(out_shape=lambda z: S((1, z.shape[1] * 4), I32), grid=(1,))
def row_interleaved(z, o):
  """A (1, n) row read whole, interleaved with itself twice (each element four times)."""
  v = z[1:2, :]
  v = ml.interleave(v, v)
  o[...] = ml.interleave(v, v)


@pytest.mark.parametrize("cols, n", [(8, 2), (16, 5), (32, 2), (4, 2), (2, 5), (1, 3)])
def test_group_row(cols, n):
  z = np.random.default_rng(cols).integers(0, 1000, (3, cols)).astype(np.int32)
  ref = np.broadcast_to(np.repeat(z[n // 2:n // 2 + 1], 8, 1), (32, cols * 8))
  np.testing.assert_array_equal(np.asarray(group_row(jnp.asarray(z), n=n, interpret=True)), ref)
  _export(group_row, jnp.asarray(z), n=n)


def test_row_interleaved():
  z = np.random.default_rng(9).integers(0, 1000, (2, 8)).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(row_interleaved(jnp.asarray(z), interpret=True)), np.repeat(z[1:], 4, 1))
  _export(row_interleaved, jnp.asarray(z))


@mg.mgpu_kernel(out_shape=lambda s: S((1, s.shape[1]), F32), grid=(1,))
def row_past_end(s, o):
  g = s.shape[0] + ml.arange(0, 1)
  cols = ml.arange(0, s.shape[1])
  o[...] = ml.load(s.at[g[:, None], cols[None, :]])


def test_one_element_run_past_end():
  """A one-element run is a window as longer runs are: unmasked past the end, MG203 (it was a gather, clamped),
  once (the compiler's read again of the (1, n) row, to store it whole, was reported too, at the statement)."""
  with pytest.raises(mg.IndexOutOfBoundsError) as e:
    row_past_end.check(S((2, 64), F32))
  assert len(e.value.errors) == 1
  expect(row_past_end, [S((2, 64), F32)], mg.IndexOutOfBoundsError, "ml.load(s.at[g[:, None], cols[None, :]])",
         "this register read touches s[2:3, 0:64], outside s's shape (2, 64)",
         hint="mask the offsets to the elements inside: s.at[g[:, None], cols[None, :]].load(mask=g[:, None] <"
              " s.shape[0], other=0)")


@mg.mgpu_kernel(out_shape=lambda x, bs: S(x.shape, F32), grid=(1,))
def block_scale_row(x, bs, o, *, kb: ml.constexpr):
  """fp8 weight scales of 128 columns: a (1, 2) row for a 256-wide tile, repeated over each block's columns."""
  r = kb + ml.arange(0, 1)
  c = ml.arange(0, x.shape[1] // 128)
  s = ml.load(bs.at[r[:, None], c[None, :]], mask=(r < bs.shape[0])[:, None], other=0.0)
  o[...] = x[...] * ml.repeat(s, 128, axis=1)


@mg.mgpu_kernel(out_shape=lambda z: S((16, z.shape[1] * 8), I32), grid=(1,))
def shifted_row(z, o):
  """A (1, 2) row of packed zeros read whole, unpacked by shifts of a (16,) table."""
  w = z[1:2, :]
  w = ml.interleave(w, w)
  w = ml.interleave(w, w)
  w = ml.interleave(w, w)
  sh = (ml.arange(0, z.shape[1] * 8) % 8) * 4
  o[...] = ml.broadcast_to((w >> sh[None, :]) & 0xF, (16, z.shape[1] * 8))


def _few_word_cases(rng):
  x, bs = rng.standard_normal((16, 256)).astype(np.float32), rng.random((3, 2)).astype(np.float32)
  z = rng.integers(0, 2 ** 31 - 1, (3, 2)).astype(np.int32)
  shifted = np.broadcast_to((np.repeat(z[1:2], 8, 1) >> ((np.arange(16) % 8) * 4)[None, :]) & 0xF, (16, 16))
  return [((jnp.asarray(x), jnp.asarray(bs)), x * np.repeat(bs[1:2], 128, 1)), ((jnp.asarray(z),), shifted)]


def test_rows_of_few_words():
  """Rows of fewer than 8 elements (no register vector's length) read as their scalars, then repeated or
  interleaved into rows registers hold."""
  (scaled, ref_scaled), (packed, ref_shifted) = _few_word_cases(np.random.default_rng(12))
  out = block_scale_row(*scaled, kb=1, interpret=True)
  np.testing.assert_allclose(np.asarray(out), ref_scaled, rtol=1e-6)
  _export(block_scale_row, *scaled, kb=1)
  np.testing.assert_array_equal(np.asarray(shifted_row(*packed, interpret=True)), ref_shifted)
  _export(shifted_row, *packed)


# ---------------------------------------------------------------- a decode tile of few tokens times a row of scales
@mg.mgpu_kernel(out_shape=lambda x, s: S(x.shape, BF16), grid=(1,))
def decode_scaled(x, s, o):
  """Per-channel dequant scales (a group's row) over a decode tile of few tokens read whole."""
  o[...] = (x[...].astype(jnp.float32) * s[1:2, :]).astype(jnp.bfloat16)


@mg.mgpu_kernel(out_shape=lambda x, s: S(x.shape, BF16), grid=(1,))
def decode_scaled_explicit(x, s, o):
  o[...] = (x[...].astype(jnp.float32) * ml.broadcast_to(s[1:2, :], x.shape)).astype(jnp.bfloat16)


@pytest.mark.parametrize("kernel, shape", [(k, s) for k in (decode_scaled, decode_scaled_explicit) for s in (
    (3, 64), (7, 64), (2, 96), (3, 100))] + [(decode_scaled_explicit, (3, 40)), (decode_scaled_explicit, (5, 24))])
def test_decode_tile_times_row(kernel, shape):
  rng = np.random.default_rng(shape[0])
  x = jnp.asarray(rng.integers(-100, 100, shape), jnp.int8)
  s = jnp.asarray(rng.random((2, shape[1])) * 0.01, F32)
  ref = np.asarray(x, np.float32) * np.asarray(s)[1:2]
  out = kernel(x, s, interpret=True)
  np.testing.assert_allclose(np.asarray(out, np.float32), ref, rtol=1e-2, atol=1e-6)
  _export(kernel, x, s)


@mg.mgpu_kernel(out_shape=lambda x, a, b: S(x.shape, BF16), grid=(1,))
def w8a8_epilogue(x, a_s, b_s, o):
  """w8a8's epilogue: the int32 accumulator times per-token and per-channel scales, broadcast explicitly."""
  acc = x[...].astype(jnp.float32)
  acc = acc * ml.broadcast_to(a_s[...][:, None], x.shape) * ml.broadcast_to(b_s[...][None, :], x.shape)
  o[...] = acc.astype(jnp.bfloat16)


@mg.mgpu_kernel(out_shape=lambda x, b: S(x.shape, F32), grid=(1,))
def bias_broadcast(x, b, o):
  o[...] = x[...] + jnp.broadcast_to(b[...], x.shape)


@pytest.mark.parametrize("shape", [(3, 40), (5, 100), (7, 24)])
def test_odd_tile_explicit_broadcasts(shape):
  """Explicit broadcasts of per-token columns and per-channel rows over an odd tile read whole (computed padded)."""
  rng = np.random.default_rng(shape[1])
  x = rng.integers(-1000, 1000, shape).astype(np.int32)
  a, b = rng.random(shape[0]).astype(np.float32), rng.random(shape[1]).astype(np.float32)
  out = w8a8_epilogue(*map(jnp.asarray, (x, a, b)), interpret=True)
  np.testing.assert_allclose(np.asarray(out, np.float32), x * a[:, None] * b[None, :], rtol=1e-2)
  _export(w8a8_epilogue, *map(jnp.asarray, (x, a, b)))
  xf = x.astype(np.float32)
  np.testing.assert_allclose(np.asarray(bias_broadcast(jnp.asarray(xf), jnp.asarray(b), interpret=True)), xf + b)
  _export(bias_broadcast, jnp.asarray(xf), jnp.asarray(b))


@mg.mgpu_kernel(out_shape=lambda l, *, K: (S((l.shape[0], K), F32), S((l.shape[0], K), I32)),
                grid=lambda l, **k: (l.shape[0] // 16,))
def topk_iterative(logits, w_out, id_out, *, K: ml.constexpr):
  """Triton-style top-k over a block of 16 tokens: the (16, K) weights and ids built slot by slot."""
  rows = ml.program_id(0) * 16 + ml.arange(0, 16)
  cols = ml.arange(0, logits.shape[1])
  p = ml.softmax(ml.load(logits.at[rows[:, None], cols[None, :]]).astype(jnp.float32), axis=1)
  ks = ml.arange(0, K)
  wv = ml.zeros((16, K), jnp.float32)
  iv = ml.zeros((16, K), jnp.int32)
  for j in ml.static_range(K):
    m = ml.max(p, axis=1)
    idx = ml.argmax(p, axis=1)
    wv = ml.where(ks[None, :] == j, m[:, None], wv)
    iv = ml.where(ks[None, :] == j, idx[:, None], iv)
    p = ml.where(cols[None, :] == idx[:, None], -1.0, p)
  ml.store(w_out.at[rows[:, None], ks[None, :]], wv / ml.sum(wv, axis=1, keepdims=True))
  ml.store(id_out.at[rows[:, None], ks[None, :]], iv)


def _topk_case(e, k):
  logits = np.random.default_rng(e).standard_normal((32, e)).astype(np.float32)
  p = np.exp(logits - logits.max(1, keepdims=True))
  ids = np.argsort(-p, 1, kind="stable")[:, :k]
  w = np.take_along_axis(p, ids, 1)
  return jnp.asarray(logits), w / w.sum(1, keepdims=True), ids


@pytest.mark.parametrize("e, k", [(8, 2), (64, 6)])
def test_topk_slots_of_a_narrow_tile(e, k):
  """A (16, K) tile of K < 8 slots, computed padded, meets `ks[None, :] == j`, a (1, K) index grid made again at the
  padded width (MG204 before; for 8 experts reported at the logits' read)."""
  logits, w, ids = _topk_case(e, k)
  got_w, got_ids = topk_iterative(logits, K=k, interpret=True)
  np.testing.assert_allclose(np.asarray(got_w), w, rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(np.asarray(got_ids), ids)
  _export(topk_iterative, logits, K=k)


@pytest.mark.gpu
@pytest.mark.parametrize("e, k", [(8, 2), (64, 6), (32, 5)])
def test_topk_slots_gpu(e, k):
  logits, w, ids = _topk_case(e, k)
  got_w, got_ids = jax.jit(lambda a: topk_iterative(a, K=k))(logits)
  np.testing.assert_allclose(np.asarray(got_w), w, rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(np.asarray(got_ids), ids)


@pytest.mark.gpu
def test_rows_tables_and_decode_tiles_gpu():
  """The CPU cases above on the GPU, against NumPy."""
  rng = np.random.default_rng(11)
  z = rng.integers(0, 1000, (3, 16)).astype(np.int32)
  out = jax.jit(lambda a: group_row(a, n=5))(jnp.asarray(z))
  np.testing.assert_array_equal(np.asarray(out), np.broadcast_to(np.repeat(z[2:3], 8, 1), (32, 128)))
  for case in range(3):
    kernel, ref = _tables()[case]
    cols = 16 if kernel is table_line else 64
    x = rng.integers(-1000, 1000, (32, cols)).astype(np.int32)
    s = rng.integers(-5, 5, (3, cols)).astype(np.int32)
    args = (x,) if kernel is table_row else (x, s)
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda *a, k=kernel: k(*a))(*map(jnp.asarray, args))), ref(x, s))
  out = jax.jit(table_transposed)(jnp.asarray(x))
  np.testing.assert_array_equal(np.asarray(out), (x >> np.tile(np.array([0, 4, 1, 5, 2, 6, 3, 7]) * 4, 8)) & 0xF)
  g, t = jax.jit(grids_stored)()
  np.testing.assert_array_equal(np.asarray(t), np.arange(8).reshape(2, 4).T * 3 + 1)
  for kernel, shape in itertools.product((decode_scaled, decode_scaled_explicit), ((3, 64), (3, 40), (3, 100))):
    x = jnp.asarray(rng.integers(-100, 100, shape), jnp.int8)
    s = jnp.asarray(rng.random((2, shape[1])) * 0.01, F32)
    out = jax.jit(lambda *a, k=kernel: k(*a))(x, s)
    np.testing.assert_allclose(np.asarray(out, np.float32), np.asarray(x, np.float32) * np.asarray(s)[1:2],
                               rtol=1e-2, atol=1e-6)
  for shape in ((3, 40), (5, 100)):
    x = rng.integers(-1000, 1000, shape).astype(np.int32)
    a, b = rng.random(shape[0]).astype(np.float32), rng.random(shape[1]).astype(np.float32)
    out = jax.jit(w8a8_epilogue)(*map(jnp.asarray, (x, a, b)))
    np.testing.assert_allclose(np.asarray(out, np.float32), x * a[:, None] * b[None, :], rtol=1e-2)
  for k, (args, ref) in enumerate(_few_word_cases(rng)):
    kernel = (block_scale_row, shifted_row)[k]
    kw = dict(kb=1) if kernel is block_scale_row else {}
    np.testing.assert_allclose(np.asarray(jax.jit(lambda *a: kernel(*a, **kw))(*args)), ref, rtol=1e-6)
