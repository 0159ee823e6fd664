"""Probe 49a (small and odd tile shapes; interpret mode agreeing with the compiler). A dot whose B tile neither
staging takes from registers, k and n both not multiples of 64 (a decode's `kb.T` of a 16- or 32-key block and a
head_dim of 40 or 72, a (16, 40) weight tile, `x @ w` and `jnp.dot` of such register tiles, a (16, 40) SMEM B of
16-bit columns not a multiple of 16) was MG501 in both modes: ml.dot now pads k of a 16-bit b to a multiple of 64
(with zero columns of a), n of a K-major (float32, 8-bit) b to 64, keeping the product's first n columns
(ops/small_dots.unstaged_b_dot). RoPE's halves of a tile of few rows whose columns are whole warps ((2, 96),
(3, 96), (2, 160): `x[:, :48]`, `x[:, 48:]`, joined back) were MG204: a padded tile's part along an axis that is
not padded is now padded too where the plain part no register tensor holds ((4, 48) -> (4, 64)); jnp.split of a
register tensor is ml.split (MG003 before). The transpose of such a padded read (`x[...].T` of (8, 40), (3, 64)
or (2, 96), a column sum or softmax over it) was MG204: the padding moves to the end of the other axis. GPT-J's
pairs of such a tile (`v[..., 0::2]`, `v[..., 1::2]` of (2, 96) or (2, 2, 96), joined back by ml.interleave) were
MG204: a strided part no register tensor holds is grown and padded (padded_steps, with `...` now), and the reshape
that joins padded pairs keeps the padding at the end. Heads merged back, `x[...].reshape(t, -1)` of a (3, 5, 7) or
(2, 4, 24) read, were MG204: each token's tile is flattened (rows through SMEM) into a row of a padded scratch
(padded_meets.merged_rows); `.reshape(-1, d)` of one, each token's tile joined along rows. A column of a tile of few rows (`v[:, 3]` of (3, 64), (2, 96)), 4 elements in padded
rows, was MG204: the padded rows are grown to 8 first. Frontend only: the GPU tests compare with interpret mode."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe_util import export as _export, rnd as _rnd, f32 as _f

S = jax.ShapeDtypeStruct
F32, BF16, F16 = jnp.float32, jnp.bfloat16, jnp.float16


def _close(got, want, tol=1e-5):
  np.testing.assert_allclose(_f(got), _f(want), rtol=tol, atol=tol)


def _tf32(v):
  return (np.asarray(v, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def _attention(q, k, v):         # q (h, g, d), k and v (h, n, d): softmax(q k^T / 8) v per head
  q, k, v = _f(q), _f(k), _f(v)
  s = np.einsum("hgd,hnd->hgn", q, k) * 0.125
  p = np.exp(s - s.max(-1, keepdims=True))
  return np.einsum("hgn,hnd->hgd", p / p.sum(-1, keepdims=True), v)


# ---------------------------------------------------------------- dots of a register B of few rows and columns
@mg.mgpu_kernel(out_shape=lambda q, k, v: q, grid=lambda q, k, v: (q.shape[0],))
def gqa_blocks(q, k, v, o, *, BLOCK_N: ml.constexpr = 16):    # flash decoding's key blocks of 16 or 32
  h = ml.program_id(0)
  g, d = q.shape[1], q.shape[2]
  qs = q[h]
  m = ml.full((g,), -float("inf"), F32)
  l = ml.zeros((g,), F32)
  acc = ml.zeros((g, d), F32)
  for n in range(0, k.shape[1], BLOCK_N):
    kb = k.at[h, ml.ds(n, BLOCK_N), :][...]
    vb = v.at[h, ml.ds(n, BLOCK_N), :][...]
    s = ml.dot(qs, kb.T) * 0.125                                # b: (d, BLOCK_N), (40, 16)
    m_new = ml.maximum(m, ml.max(s, axis=1))
    p = ml.exp(s - m_new[:, None])
    alpha = ml.exp(m - m_new)
    l = l * alpha + ml.sum(p, axis=1)
    acc = acc * alpha[:, None] + ml.dot(p.astype(vb.dtype), vb)  # b: (BLOCK_N, d), (16, 40)
    m = m_new
  o[h] = (acc / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, k, v: q, grid=lambda q, k, v: (q.shape[0],))
def gqa_jnp(q, k, v, o):               # a Pallas port of a short cache: jnp.dot of register tiles
  h = ml.program_id(0)
  qs, ks, vs = q[h], k[h], v[h]
  s = jnp.dot(qs, ks.T, preferred_element_type=jnp.float32) * 0.125
  p = jax.nn.softmax(s, axis=-1)
  o[h] = jnp.dot(p.astype(vs.dtype), vs, preferred_element_type=jnp.float32).astype(o.dtype)


@pytest.mark.parametrize("kernel,g,n,d,kw", [(gqa_blocks, 8, 64, 40, {}), (gqa_blocks, 4, 96, 72, {"BLOCK_N": 32}),
                                             (gqa_blocks, 2, 64, 24, {"BLOCK_N": 32}), (gqa_jnp, 8, 16, 40, {}),
                                             (gqa_jnp, 2, 16, 96, {})])
def test_decode_of_short_key_blocks_pads_the_register_b_of_its_dots(kernel, g, n, d, kw):
  q, k, v = _rnd((2, g, d), 1, BF16), _rnd((2, n, d), 2, BF16), _rnd((2, n, d), 3, BF16)
  _close(kernel(q, k, v, interpret=True, **kw), _attention(q, k, v), 3e-2)
  _export(kernel, q, k, v, **kw)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32))
def matmul_op(x, w, o):                # `x @ w` of two register tiles read whole
  o[...] = (x[...] @ w[...]).astype(F32)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32))
def scaled_w(x, w, o):                 # a register B computed in the kernel
  o[...] = ml.dot(x[...], w[...].astype(F32) * 0.5)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32))
def smem_w(x, w, o):                   # B copied into SMEM by TMA, 16-bit columns not a multiple of 16
  ws = ml.smem(w.shape, w.dtype)
  ml.copy(w, ws)
  o[...] = ml.dot(x[...], ws, out_dtype=F32)


@pytest.mark.parametrize("kernel,m,k,n,dtype", [(matmul_op, 64, 16, 40, BF16), (matmul_op, 8, 32, 24, F16),
                                                (scaled_w, 64, 16, 40, F32), (scaled_w, 16, 32, 8, F32),
                                                (smem_w, 64, 16, 40, BF16), (smem_w, 16, 16, 40, BF16)])
def test_a_dot_of_a_b_tile_of_few_rows_and_columns(kernel, m, k, n, dtype):
  x, w = _rnd((m, k), 4, dtype), _rnd((k, n), 5, dtype)
  want = _tf32(x) @ _tf32(0.5 * _f(w)) if kernel is scaled_w else _f(x) @ _f(w)
  _close(kernel(x, w, interpret=True), want, 1e-4 if dtype == F32 else 2e-2)
  _export(kernel, x, w)


@pytest.mark.gpu
def test_gpu_dots_of_b_tiles_of_few_rows_and_columns_match_interpret_mode():
  for kernel, g, n, d, kw in [(gqa_blocks, 8, 64, 40, {}), (gqa_blocks, 4, 96, 72, {"BLOCK_N": 32}),
                              (gqa_jnp, 8, 16, 40, {})]:
    q, k, v = _rnd((2, g, d), 6, BF16), _rnd((2, n, d), 7, BF16), _rnd((2, n, d), 8, BF16)
    _close(jax.jit(lambda *a: kernel(*a, **kw))(q, k, v), kernel(q, k, v, interpret=True, **kw), 3e-2)
  for kernel, m, k, n, dtype in [(matmul_op, 64, 16, 40, BF16), (matmul_op, 8, 32, 24, F16),
                                 (scaled_w, 64, 16, 40, F32), (smem_w, 16, 16, 40, BF16)]:
    x, w = _rnd((m, k), 9, dtype), _rnd((k, n), 10, dtype)
    _close(jax.jit(kernel)(x, w), kernel(x, w, interpret=True), 1e-3 if dtype == F32 else 2e-2)


# ---------------------------------------------------------------- RoPE's halves of a tile of few rows
@mg.mgpu_kernel(out_shape=lambda x, c, s: x)
def rope(x, c, s, o):                  # neox-style rotary embedding of a decode step's few heads
  v = x[...].astype(F32)
  h = v.shape[-1] // 2
  x1, x2 = v[..., :h], v[..., h:]
  cc, ss = c[...].astype(F32), s[...].astype(F32)
  o[...] = ml.concatenate([x1 * cc - x2 * ss, x2 * cc + x1 * ss], axis=-1).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda x, c, s: x)
def rope_jnp(x, c, s, o):              # the same as Pallas ports write it: jnp.split, rotate_half
  v = x[...].astype(jnp.float32)
  x1, x2 = jnp.split(v, 2, axis=-1)
  rot = jnp.concatenate([-x2, x1], axis=-1)
  cos, sin = jnp.concatenate([c[...], c[...]], axis=-1), jnp.concatenate([s[...], s[...]], axis=-1)
  o[...] = (v * cos + rot * sin).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2), x.dtype))
def swiglu(x, o):                      # a fused gate/up projection's halves
  v = x[...].astype(F32)
  g, u = v[:, :v.shape[1] // 2], v[:, v.shape[1] // 2:]
  o[...] = (g * ml.sigmoid(g) * u).astype(o.dtype)


def _rope(x, c, s):
  x, c, s = _f(x), _f(c), _f(s)
  x1, x2 = np.split(x, 2, axis=-1)
  return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)


@pytest.mark.parametrize("kernel,shape,dtype", [(rope, (2, 96), F32), (rope, (3, 96), BF16), (rope, (2, 160), F32),
                                                (rope_jnp, (2, 96), F32), (rope_jnp, (3, 96), F32)])
def test_rope_halves_of_a_tile_of_few_rows(kernel, shape, dtype):
  half = shape[:-1] + (shape[-1] // 2,)
  x, c, s = _rnd(shape, 11, dtype), _rnd(half, 12, dtype), _rnd(half, 13, dtype)
  _close(kernel(x, c, s, interpret=True), _rope(x, c, s), 2e-2 if dtype == BF16 else 1e-5)
  _export(kernel, x, c, s)


def test_a_middle_part_and_halves_of_unpadded_columns_of_a_padded_tile():
  x = _rnd((2, 96), 14)
  g, u = x[:, :48], x[:, 48:]
  _close(swiglu(x, interpret=True), g / (1 + np.exp(-g)) * u)
  _export(swiglu, x)


@pytest.mark.gpu
def test_gpu_rope_halves_of_a_tile_of_few_rows_match_interpret_mode():
  for kernel, shape in [(rope, (2, 96)), (rope, (2, 160)), (rope_jnp, (3, 96))]:
    half = shape[:-1] + (shape[-1] // 2,)
    x, c, s = _rnd(shape, 15), _rnd(half, 16), _rnd(half, 17)
    _close(jax.jit(kernel)(x, c, s), kernel(x, c, s, interpret=True), 1e-5)
  x = _rnd((2, 96), 18)
  _close(jax.jit(swiglu)(x), swiglu(x, interpret=True), 1e-5)


# ---------------------------------------------------------------- transposes of odd reads
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1], x.shape[0]), x.dtype))
def transposed(x, o):
  o[...] = x[...].T


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32))
def column_sums(x, o):                 # column sums as row sums of the transpose
  o[...] = ml.sum(x[...].T, axis=1)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[1], x.shape[0]), F32))
def softmax_of_transpose(x, w, o):     # jnp.transpose, a row scale, a softmax along the old rows
  v = jnp.transpose(x[...]) * w[...][None, :]
  e = ml.exp(v - ml.max(v, axis=1, keepdims=True))
  o[...] = e / ml.sum(e, axis=1, keepdims=True)


@pytest.mark.parametrize("shape", [(8, 40), (3, 64), (2, 96)])
def test_the_transpose_of_an_odd_read(shape):
  x, w = _rnd(shape, 19), _rnd(shape[:1], 20)
  _close(transposed(x, interpret=True), x.T)
  _close(column_sums(x, interpret=True), x.sum(0))
  v = x.T * w[None, :]
  e = np.exp(v - v.max(1, keepdims=True))
  _close(softmax_of_transpose(x, w, interpret=True), e / e.sum(1, keepdims=True))
  _export(transposed, x)
  _export(column_sums, x)
  _export(softmax_of_transpose, x, w)


@pytest.mark.gpu
def test_gpu_transposes_of_odd_reads_match_numpy():
  for shape in [(8, 40), (3, 64)]:
    x, w = _rnd(shape, 21), _rnd(shape[:1], 22)
    _close(jax.jit(transposed)(x), x.T)
    _close(jax.jit(column_sums)(x), x.sum(0), 1e-5)
    _close(jax.jit(softmax_of_transpose)(x, w), softmax_of_transpose(x, w, interpret=True), 1e-5)


# ---------------------------------------------------------------- GPT-J RoPE's pairs of a tile of few rows
@mg.mgpu_kernel(out_shape=lambda x, c, s: x)
def rope_pairs(x, c, s, o):
  v = x[...]
  a, b = v[..., 0::2], v[..., 1::2]
  cc, ss = c[...], s[...]
  o[...] = ml.interleave(a * cc - b * ss, a * ss + b * cc)


def _rope_pairs(x, c, s):
  a, b = x[..., 0::2], x[..., 1::2]
  out = np.empty_like(x)
  out[..., 0::2], out[..., 1::2] = a * c - b * s, a * s + b * c
  return out


@pytest.mark.parametrize("shape", [(2, 96), (3, 64), (2, 2, 96)])
def test_interleaved_rope_pairs_of_a_tile_of_few_rows(shape):
  half = shape[:-1] + (shape[-1] // 2,)
  x, c, s = _rnd(shape, 23), _rnd(half, 24), _rnd(half, 25)
  _close(rope_pairs(x, c, s, interpret=True), _rope_pairs(x, c, s))
  _export(rope_pairs, x, c, s)


@pytest.mark.gpu
def test_gpu_interleaved_rope_pairs_match_numpy():
  for shape in [(2, 96), (2, 2, 96)]:
    half = shape[:-1] + (shape[-1] // 2,)
    x, c, s = _rnd(shape, 26), _rnd(half, 27), _rnd(half, 28)
    _close(jax.jit(rope_pairs)(x, c, s), _rope_pairs(x, c, s))


# ---------------------------------------------------------------- heads merged back: (t, h, d) -> (t, h * d)
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] * x.shape[2]), x.dtype))
def merged(x, o):
  o[...] = x[...].reshape(x.shape[0], -1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] * x.shape[2]), F32))
def merged_norm(x, o):                 # the merged row normalised: math on the merged value
  v = x[...].astype(F32).reshape(x.shape[0], -1)
  o[...] = v * ml.rsqrt(ml.mean(v * v, axis=1, keepdims=True) + 1e-6)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32))
def merged_projection(x, w, o):        # attention's output projection of the merged heads
  ws = ml.smem(w.shape, w.dtype)
  ml.copy(w, ws)
  o[...] = ml.dot(x[...].reshape(x.shape[0], -1), ws, out_dtype=F32)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] * x.shape[1],), F32))
def token_heads_rows(x, o):            # tokens and heads merged into rows: (t, h, d) -> (t * h, d)
  v = x[...].reshape(-1, x.shape[2])
  o[...] = ml.sum(v * v, axis=1)


@pytest.mark.parametrize("shape", [(3, 5, 7), (2, 4, 24), (2, 3, 40)])
def test_tokens_and_heads_merged_into_rows(shape):
  x = _rnd(shape, 37)
  _close(token_heads_rows(x, interpret=True), (x * x).sum(-1).reshape(-1), 1e-5)
  _export(token_heads_rows, x)


@pytest.mark.parametrize("shape", [(3, 5, 7), (2, 4, 24), (2, 3, 32)])
def test_heads_of_a_few_tokens_merged_back(shape):
  x = _rnd(shape, 29)
  v = x.reshape(shape[0], -1)
  _close(merged(x, interpret=True), v)
  _close(merged_norm(x, interpret=True), v / np.sqrt((v * v).mean(1, keepdims=True) + 1e-6))
  _export(merged, x)
  _export(merged_norm, x)


def test_merged_heads_projected():
  x, w = _rnd((4, 2, 40), 30, BF16), _rnd((80, 64), 31, BF16)
  _close(merged_projection(x, w, interpret=True), _f(x).reshape(4, -1) @ _f(w), 3e-2)
  _export(merged_projection, x, w)


@pytest.mark.gpu
def test_gpu_heads_merged_back_match_numpy():
  for shape in [(3, 5, 7), (2, 4, 24)]:
    x = _rnd(shape, 32)
    _close(jax.jit(merged)(x), x.reshape(shape[0], -1))
    _close(jax.jit(merged_norm)(x), merged_norm(x, interpret=True), 1e-5)
  x, w = _rnd((4, 2, 40), 33, BF16), _rnd((80, 64), 34, BF16)
  _close(jax.jit(merged_projection)(x, w), merged_projection(x, w, interpret=True), 2e-2)
  x = _rnd((2, 3, 40), 38)
  _close(jax.jit(token_heads_rows)(x), (x * x).sum(-1).reshape(-1), 1e-5)


# ---------------------------------------------------------------- a column of a tile of few rows
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def columns(x, o):
  v = x[...].astype(F32)
  o[...] = v[:, 3] * 2 + v[:, -1]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def first_column(x, o):
  o[...] = x[...][:, 0]


@pytest.mark.parametrize("shape,dtype", [((3, 64), F32), ((2, 96), F32)])
def test_a_column_of_a_tile_of_few_rows(shape, dtype):
  x = _rnd(shape, 35, dtype)
  v = _f(x)
  _close(columns(x, interpret=True), v[:, 3] * 2 + v[:, -1], 2e-2 if dtype == BF16 else 1e-5)
  _close(first_column(x, interpret=True), v[:, 0])
  _export(columns, x)
  _export(first_column, x)


@pytest.mark.gpu
def test_gpu_a_column_of_a_tile_of_few_rows_matches_numpy():
  x = _rnd((3, 64), 36)
  _close(jax.jit(columns)(x), x[:, 3] * 2 + x[:, -1])
  _close(jax.jit(first_column)(x), x[:, 0])


# ---------------------------------------------------------------- a causal mask of index grids beside a tile of few rows
@mg.mgpu_kernel(out_shape=lambda x: x)
def causal_softmax(x, o):              # a speculative decode's few query rows against the last keys
  s = x[...]
  r = ml.arange(s.shape[0])[:, None]
  c = ml.arange(s.shape[1])[None, :]
  s = ml.where(c <= r + (s.shape[1] - s.shape[0]), s, -float("inf"))
  e = ml.exp(s - ml.max(s, axis=1, keepdims=True))
  o[...] = e / ml.sum(e, axis=1, keepdims=True)


def _causal_softmax(x):
  m, n = x.shape
  s = np.where(np.arange(n)[None, :] <= np.arange(m)[:, None] + n - m, x, -np.inf)
  e = np.exp(s - s.max(1, keepdims=True))
  return e / e.sum(1, keepdims=True)


@pytest.mark.parametrize("shape", [(8, 40), (4, 72), (8, 24)])
def test_a_causal_mask_of_index_grids_beside_a_tile_of_few_rows(shape):
  x = _rnd(shape, 39)
  _close(causal_softmax(x, interpret=True), _causal_softmax(x))
  _export(causal_softmax, x)


@pytest.mark.gpu
def test_gpu_a_causal_mask_beside_a_tile_of_few_rows_matches_numpy():
  x = _rnd((8, 40), 40)
  _close(jax.jit(causal_softmax)(x), _causal_softmax(x))
