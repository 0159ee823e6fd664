"""Probe 40n (memory, atomics and tensor cores in decode and MoE kernels): ml.take_along_axis of an SMEM buffer
or a computed register tile with a few indices a row (a top-k's), negative indices of the register select, and
the SMEM float max hint's int32 keys written for an SMEM buffer (no out_shape; filled and decoded in the kernel)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _rand(shape, seed, dtype=F32):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def _ints(lo, hi, shape, seed):
  return jnp.asarray(np.random.default_rng(seed).integers(lo, hi, shape), I32)


# ---------------------------------------------------------------- take_along_axis of SMEM and computed tiles
@mg.mgpu_kernel(out_shape=lambda x, i, r: (S(i.shape, x.dtype), S(r.shape, x.dtype)), grid=(1,))
def along_smem(x, idx, rows, by_col, by_row):
  """A router's top-k columns of a score tile staged in SMEM, and chosen rows of each column."""
  buf = ml.smem(x.shape, x.dtype)
  ml.copy(x, buf)
  by_col[...] = ml.take_along_axis(buf, idx[...], axis=1)
  by_row[...] = ml.take_along_axis(buf, rows[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda x, i: S(i.shape, x.dtype), grid=(1,))
def along_computed(x, idx, out):
  p = ml.softmax(x[...].astype(jnp.float32), axis=-1)
  out[...] = ml.take_along_axis(p, idx[...], axis=-1).astype(out.dtype)


def _along_inputs(dt):
  x = _rand((64, 128), 1, dt)
  return x, _ints(-128, 128, (64, 8), 2), _ints(0, 64, (4, 128), 3)


@pytest.mark.parametrize("dt", [F32, jnp.bfloat16, jnp.int8])
def test_take_along_axis_of_smem_and_computed_tiles_is_jnps(dt):
  """ml.take_along_axis of an SMEM buffer was MG003 ("only GMEM refs gather", a hint of row loops), and of a
  computed tile MG003 asking for a scratch output: k indices a row are k exact selects, joined."""
  x, idx, rows = _along_inputs(dt)
  x = (x * 40).astype(dt) if dt == jnp.int8 else x
  got = along_smem(x, idx, rows, interpret=True)
  for g, w in zip(got, (jnp.take_along_axis(x, idx, axis=1), jnp.take_along_axis(x, rows, axis=0))):
    assert g.dtype == dt
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  _export(along_smem, S(x.shape, dt), S(idx.shape, I32), S(rows.shape, I32))
  if dt != jnp.int8:
    got = along_computed(x, idx, interpret=True)
    want = jnp.take_along_axis(jax.nn.softmax(x.astype(F32), axis=-1), idx, axis=-1).astype(dt)
    np.testing.assert_allclose(np.asarray(got, F32), np.asarray(want, F32), rtol=1e-2 if dt != F32 else 1e-6)
    _export(along_computed, S(x.shape, dt), S(idx.shape, I32))


@pytest.mark.gpu
def test_gpu_take_along_axis_of_smem_and_computed_tiles_is_jnps():
  for dt in (F32, jnp.bfloat16):
    x, idx, rows = _along_inputs(dt)
    got = jax.jit(along_smem)(x, idx, rows)
    for g, w in zip(got, (jnp.take_along_axis(x, idx, axis=1), jnp.take_along_axis(x, rows, axis=0))):
      np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    got = jax.jit(along_computed)(x, idx)
    want = jnp.take_along_axis(jax.nn.softmax(x.astype(F32), axis=-1), idx, axis=-1).astype(dt)
    np.testing.assert_allclose(np.asarray(got, F32), np.asarray(want, F32), rtol=1e-2, atol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x, t: S((x.shape[0],), x.dtype), grid=(1,))
def nll_pick(x, t, out):
  out[...] = ml.take_along_axis(x[...], t[...][:, None], axis=1)[:, 0]


def test_negative_indices_of_the_register_select_count_from_the_end():
  """The one-index-a-row select compared positions with the raw index: -1 selected nothing (-inf), where jnp's
  take_along_axis (and the GMEM gather) takes the last column."""
  x, t = _rand((32, 128), 4), _ints(-128, 128, (32,), 5)
  got = nll_pick(x, t, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(jnp.take_along_axis(x, t[:, None], 1)[:, 0]))
  _export(nll_pick, S(x.shape, F32), S(t.shape, I32))


@pytest.mark.gpu
def test_gpu_negative_indices_of_the_register_select_count_from_the_end():
  x, t = _rand((32, 128), 6), _ints(-128, 128, (32,), 7)
  got = jax.jit(nll_pick)(x, t)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(jnp.take_along_axis(x, t[:, None], 1)[:, 0]))


@mg.mgpu_kernel(out_shape=lambda lg: (S((lg.shape[0], 2), I32), S((lg.shape[0], 2), F32)),
                grid=lambda lg: (lg.shape[0] // 64,))
def top2_router(lg, idx, wts):
  """A MoE router over 8 experts: the top two by an argsort, their probabilities taken along the rows."""
  r = ml.ds(ml.program_id(0) * 64, 64)
  p = ml.softmax(lg.at[r][...], axis=1)
  top = ml.argsort(p, axis=1, descending=True)[:, :2]
  w = ml.take_along_axis(p, top, axis=1)
  idx.at[r][...] = top
  wts.at[r][...] = w / ml.sum(w, axis=1, keepdims=True)


def _top2_want(lg):
  v, i = jax.lax.top_k(jax.nn.softmax(lg, axis=-1), 2)
  return i, v / v.sum(1, keepdims=True)


def test_top2_router_takes_its_probabilities_along_the_rows():
  lg = _rand((128, 8), 12)
  for g, w in zip(top2_router(lg, interpret=True), _top2_want(lg)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
  _export(top2_router, S(lg.shape, F32))


@pytest.mark.gpu
def test_gpu_top2_router_takes_its_probabilities_along_the_rows():
  lg = _rand((128, 8), 13)
  for g, w in zip(jax.jit(top2_router)(lg), _top2_want(lg)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x, t, i: (S((x.shape[0],), x.dtype), S(i.shape, x.dtype)), grid=(1,))
def along_narrow_indices(x, t, idx, pick, picks):
  """One target a row (NLL's) and four uint8 indices a row, from a tile staged in SMEM."""
  buf = ml.smem(x.shape, x.dtype)
  ml.copy(x, buf)
  pick[...] = ml.take_along_axis(buf, t[...][:, None], axis=1)[:, 0]
  picks[...] = ml.take_along_axis(buf, idx[...], axis=1)


def test_take_along_axis_of_smem_with_one_or_narrow_indices_a_row():
  """A (m, 1) index of an SMEM buffer was MG003, and indices of 8 or 16 bits MG104 at an == the user never wrote
  (between the compiler's int32 positions and the indices)."""
  x = _rand((64, 128), 15)
  t = _ints(-128, 128, (64,), 16).astype(jnp.int16)
  idx = _ints(0, 128, (64, 4), 17).astype(jnp.uint8)
  got = along_narrow_indices(x, t, idx, interpret=True)
  want = (jnp.take_along_axis(x, t.astype(I32)[:, None], 1)[:, 0], jnp.take_along_axis(x, idx.astype(I32), 1))
  for g, w in zip(got, want):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  _export(along_narrow_indices, S(x.shape, F32), S(t.shape, jnp.int16), S(idx.shape, jnp.uint8))


@pytest.mark.gpu
def test_gpu_take_along_axis_of_smem_with_one_or_narrow_indices_a_row():
  x = _rand((64, 128), 18)
  t = _ints(-128, 128, (64,), 19).astype(jnp.int16)
  idx = _ints(0, 128, (64, 4), 20).astype(jnp.uint8)
  got = jax.jit(along_narrow_indices)(x, t, idx)
  want = (jnp.take_along_axis(x, t.astype(I32)[:, None], 1)[:, 0], jnp.take_along_axis(x, idx.astype(I32), 1))
  for g, w in zip(got, want):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


# ---------------------------------------------------------------- SMEM float max: the int32 keys' hint
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32), grid=(1,))
def smem_amax(x, out):
  buf = ml.smem((x.shape[1],), F32)
  buf[...] = ml.full((x.shape[1],), -jnp.inf, F32)
  for r in range(x.shape[0]):
    ml.atomic_max(buf, x[r, :])
  out[...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32), grid=(1,))
def smem_amax_keys(x, out):
  """smem_amax with the hint's second way followed word for word."""
  n = x.shape[1]
  buf = ml.smem((n,), jnp.int32)
  buf[...] = ml.full((n,), jnp.iinfo(jnp.int32).min, jnp.int32)
  for r in range(x.shape[0]):
    b = ml.bitcast(x[r, :], jnp.int32)
    ml.atomic_max(buf, ml.where(b >= 0, b, b ^ 0x7FFFFFFF))
  k = buf[...]
  decoded = ml.bitcast(ml.where(k >= 0, k, k ^ 0x7FFFFFFF), jnp.float32)
  out[...] = ml.where(k == jnp.iinfo(jnp.int32).min, -jnp.inf, decoded)


def test_smem_float_max_hint_keeps_the_keys_in_the_kernel():
  """The hint said to make the SMEM buffer int32 "in its out_shape" and decode outside the kernel: an SMEM
  buffer has neither; it now allocates, fills and decodes the keys in the kernel, which compiles and is jnp's."""
  with pytest.raises(mg.UnsupportedDtypeError) as info:
    smem_amax.check(S((8, 128), F32))
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("    ml.atomic_max(buf, x[r, :])"), 4)
  assert e.message == "ml.atomic_max on float32 is not supported in SMEM: Hopper's atomic max takes int32, uint32, and 8- and 16-bit integers"
  assert "out_shape" not in e.hint and "outside the kernel" not in e.hint
  assert ("allocate buf int32 (ml.smem(shape, jnp.int32)), fill it first with buf[...] = ml.full(shape,"
          " jnp.iinfo(jnp.int32).min, jnp.int32), update it with ml.atomic_max(buf, ml.where(b >= 0, b,"
          " b ^ 0x7FFFFFFF)) with b = ml.bitcast(x[r, :], jnp.int32), and decode it when read, k = buf[...];"
          " ml.bitcast(ml.where(k >= 0, k, k ^ 0x7FFFFFFF), jnp.float32)") in e.hint
  for x in (_rand((8, 128), 8), jnp.zeros((0, 128), F32)):
    got = smem_amax_keys(x, interpret=True)
    want = x.max(0) if x.shape[0] else jnp.full((128,), -jnp.inf)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  _export(smem_amax_keys, S((8, 128), F32))


@pytest.mark.gpu
def test_gpu_smem_float_max_hint_keeps_the_keys_in_the_kernel():
  x = _rand((8, 128), 9)
  np.testing.assert_array_equal(np.asarray(jax.jit(smem_amax_keys)(x)), np.asarray(x.max(0)))


# ---------------------------------------------------------------- GQA decode: G=4 query heads, pages of 16
def _gqa_decode(padded):
  @mg.mgpu_kernel(out_shape=lambda q, kp, vp, bt, ln: S(q.shape, F32),
                  grid=lambda q, kp, vp, bt, ln: (q.shape[0], kp.shape[0]))
  def gqa_decode(q, k_pages, v_pages, block_tables, lengths, out):
    b, kh = ml.program_id(0), ml.program_id(1)
    g, page, d = q.shape[1] // k_pages.shape[0], k_pages.shape[2], q.shape[2]
    rows = 64 if padded else g
    qv = q.at[b, ml.ds(kh * g, g)][...]
    k_s, v_s = ml.smem((page, d), k_pages.dtype), ml.smem((page, d), v_pages.dtype)
    m, l, acc = ml.full((rows,), -1e30, F32), ml.zeros((rows,), F32), ml.zeros((rows, d), F32)
    length = lengths[b]
    for i in range(ml.cdiv(length, page)):
      ml.copy(k_pages.at[kh, block_tables[b, i]], k_s)
      ml.copy(v_pages.at[kh, block_tables[b, i]], v_s)
      if padded:
        s = ml.dot(ml.concatenate([qv, ml.zeros((60, 64), jnp.float16)], axis=0), k_s.T) * (1.0 / d ** 0.5)
      else:
        s = ml.dot(qv, k_s.T) * (1.0 / d ** 0.5)
      s = ml.where(i * page + ml.arange(page)[None, :] < length, s, -1e30)
      m_new = ml.maximum(m, ml.max(s, axis=1))
      p = ml.exp(s - m_new[:, None])
      alpha = ml.exp(m - m_new)
      l = l * alpha + ml.sum(p, axis=1)
      acc = acc * alpha[:, None] + ml.dot(p.astype(v_pages.dtype), v_s)
      m = m_new
    if padded:
      out.at[b, ml.ds(kh * g, 64)].store(acc / l[:, None], mask=ml.arange(64)[:, None] < 4)
    else:
      out.at[b, ml.ds(kh * g, g)][...] = acc / l[:, None]
  return gqa_decode


def _gqa_inputs(seed):
  rng = np.random.default_rng(seed)
  q = _rand((2, 8, 64), seed, jnp.float16)
  kp, vp = _rand((2, 16, 16, 64), seed + 1, jnp.float16), _rand((2, 16, 16, 64), seed + 2, jnp.float16)
  return q, kp, vp, jnp.asarray(rng.permutation(16)[:8].reshape(2, 4), I32), jnp.asarray([50, 64], I32)


def _gqa_want(q, kp, vp, bt, ln):
  outs = []
  for b in range(q.shape[0]):
    k = kp[:, bt[b]].reshape(2, -1, 64)[:, :int(ln[b])].astype(F32)
    v = vp[:, bt[b]].reshape(2, -1, 64)[:, :int(ln[b])].astype(F32)
    p = jax.nn.softmax(jnp.einsum("kgd,ktd->kgt", q[b].reshape(2, 4, 64).astype(F32), k) / 8.0, axis=-1)
    outs.append(jnp.einsum("kgt,ktd->kgd", p, v).reshape(8, 64))
  return jnp.stack(outs)


def test_small_m_hint_keeps_the_padded_rows_where_a_slice_could_not_reduce():
  """G=4 query heads against pages of 16 tokens: the MG501 hint padded q to 64 rows and sliced the product back
  to [:4], a (4, 16) tile whose row max was MG204; it then carried the 64-row product. Since probe 47e the
  compiler pads the 4 rows itself (and a (4, 16) tile reduces along its rows): both forms are jnp's."""
  args = _gqa_inputs(20)
  specs = [S(a.shape, a.dtype) for a in args]
  for padded in (False, True):
    kernel = _gqa_decode(padded)
    np.testing.assert_allclose(np.asarray(kernel(*args, interpret=True)), np.asarray(_gqa_want(*args)), atol=2e-2)
    _export(kernel, *specs)


@pytest.mark.gpu
def test_gpu_small_m_hint_keeps_the_padded_rows_where_a_slice_could_not_reduce():
  args = _gqa_inputs(21)
  np.testing.assert_allclose(np.asarray(jax.jit(_gqa_decode(True))(*args)), np.asarray(_gqa_want(*args)), atol=2e-2)


# ---------------------------------------------------------------- a narrow histogram's hint with a number
def _histogram(dt):
  @mg.mgpu_kernel(out_shape=lambda x: S((64,), dt), grid=lambda x: (x.shape[0] // 128,))
  def histogram(x, counts):
    ml.atomic_add(counts.at[x.at[ml.ds(ml.program_id(0) * 128, 128)][...]], 1)
  return histogram


def test_narrow_histogram_hint_updates_with_the_number_as_written():
  """An int16 histogram's hint said "update it with the value's .astype(jnp.int32)", for a value written 1; since
  probe 56b the int16 histogram itself computes (a cas loop on each element's 32-bit word)."""
  x = _ints(0, 64, (1024,), 14)
  np.testing.assert_array_equal(np.asarray(_histogram(jnp.int16)(x, interpret=True)),
                                np.asarray(jnp.zeros(64, jnp.int16).at[x].add(1)))
  _export(_histogram(jnp.int16), S((1024,), I32))
  x = _ints(0, 64, (1024,), 14)
  got = _histogram(I32)(x, interpret=True).astype(jnp.int16)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(jnp.zeros(64, jnp.int16).at[x].add(1)))
  _export(_histogram(I32), S((1024,), I32))
