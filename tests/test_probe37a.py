"""Probe 37a (decode and variant attention written by hand): split-K combines through
ml.logsumexp's b=, where= and return_sign= (jax.nn.logsumexp's keywords, rejected before)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- logsumexp's b=, where=, return_sign=
@mg.mgpu_kernel(out_shape=lambda o_p, m_p, l_p: (S((o_p.shape[0], o_p.shape[2]), F32), S((o_p.shape[0],), F32)),
                grid=lambda o_p, m_p, l_p: (o_p.shape[0],))
def combine_splits(o_p, m_p, l_p, o, lse):
  """Flash-decoding's combine of one row's partial (unnormalised output, max, sum) per split: the
  row's lse is logsumexp(m, b=l) over the splits that saw keys (l > 0), each weighted by exp(m - lse)."""
  r = ml.program_id(0)
  m = m_p.at[r][...]
  l = l_p.at[r][...]
  total = ml.logsumexp(m, b=l, where=l > 0)
  w = ml.where(l > 0, ml.exp(m - total), 0.0)
  o.at[r][...] = ml.sum(o_p.at[r][...] * w[:, None], axis=0)
  lse[r] = total


def _split_decode(rows, splits, d, seed):
  """Partials of a decode over keys split `splits` ways, some splits empty (past a row's length)."""
  rng = np.random.default_rng(seed)
  logits = rng.standard_normal((rows, splits, 16)).astype(np.float32) * 40      # large logits
  v = rng.standard_normal((rows, splits, 16, d)).astype(np.float32)
  empty = rng.random((rows, splits)) < 0.3
  empty[:, 0] = False
  logits[empty] = -np.inf
  m = np.where(empty, -np.inf, logits.max(-1))
  p = np.where(empty[..., None], 0.0, np.exp(logits - np.where(empty, 0.0, m)[..., None]))
  parts = (np.einsum("rsk,rskd->rsd", p, v).astype(np.float32), m.astype(np.float32), p.sum(-1).astype(np.float32))
  flat = logits.reshape(rows, -1)
  want_lse = jax.nn.logsumexp(flat, axis=1)
  want_o = np.einsum("rk,rkd->rd", jax.nn.softmax(flat, axis=1), v.reshape(rows, -1, d))
  return parts, want_o, want_lse


def test_a_split_k_combine_takes_logsumexps_b_and_where():
  """`ml.logsumexp(m, b=l, where=l > 0)` was MG003 (unexpected keyword): jax.nn.logsumexp's b= and
  where= are taken, with its meaning (elements where b is 0 or where= is off left out)."""
  parts, want_o, want_lse = _split_decode(16, 8, 64, 0)
  o, lse = combine_splits(*parts, interpret=True)
  np.testing.assert_allclose(np.asarray(lse), want_lse, rtol=1e-5)
  np.testing.assert_allclose(np.asarray(o), want_o, rtol=1e-4, atol=1e-5)
  _export(combine_splits, *(S(p.shape, p.dtype) for p in parts))


@pytest.mark.gpu
def test_gpu_a_split_k_combine_takes_logsumexps_b_and_where():
  parts, want_o, want_lse = _split_decode(64, 8, 128, 1)
  o, lse = jax.jit(combine_splits)(*parts)
  np.testing.assert_allclose(np.asarray(lse), want_lse, rtol=1e-5)
  np.testing.assert_allclose(np.asarray(o), want_o, rtol=1e-4, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x, b: (S((x.shape[0],), F32),) * 3 + (S((), x.dtype),), grid=(1,))
def scaled_lse(x, b, lse_b, lse_abs, sign, lse_all):
  v, s = x[...], b[...]
  lse_b[...] = ml.logsumexp(v, axis=1, b=s)
  lse_abs[...], sign[...] = ml.logsumexp(v, axis=1, b=s, return_sign=True)
  lse_all[...] = ml.logsumexp(v, b=0.5, where=v > 0)


@pytest.mark.parametrize("dtype", [F32, jnp.float16])
def test_logsumexp_b_return_sign_and_where_are_jax_nns(dtype):
  rng = np.random.default_rng(2)
  x = (rng.standard_normal((16, 128)) * 8).astype(dtype)
  b = rng.standard_normal((16, 128)).astype(np.float32)
  b[3] = 0.0                                    # every element left out: -inf
  b[4, :7] = 0.0
  x[5, 0] = np.inf                              # +inf where b is 0: left out, not NaN
  b[5, 0] = 0.0
  got = scaled_lse(x, b, interpret=True)
  xf = jnp.asarray(x)
  want = (jax.nn.logsumexp(xf, axis=1, b=b), *jax.nn.logsumexp(xf, axis=1, b=b, return_sign=True),
          jax.nn.logsumexp(xf, b=0.5, where=xf > 0))
  tol = 1e-5 if dtype == F32 else 2e-3
  for g, w in zip(got, want):
    assert g.dtype == w.dtype
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=tol)
  _export(scaled_lse, S(x.shape, dtype), S(b.shape, F32))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [F32, jnp.float16])
def test_gpu_logsumexp_b_return_sign_and_where_are_jax_nns(dtype):
  rng = np.random.default_rng(3)
  x = (rng.standard_normal((16, 128)) * 8).astype(dtype)
  b = rng.standard_normal((16, 128)).astype(np.float32)
  b[3] = 0.0
  got = jax.jit(scaled_lse)(x, b)
  xf = jnp.asarray(x)
  want = (jax.nn.logsumexp(xf, axis=1, b=b), *jax.nn.logsumexp(xf, axis=1, b=b, return_sign=True),
          jax.nn.logsumexp(xf, b=0.5, where=xf > 0))
  for g, w in zip(got, want):
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=1e-5 if dtype == F32 else 2e-3)


# ---------------------------------------------------------------- a register A operand of fewer than 64 rows
from locate import expect  # noqa: E402

BKV = 64


def _decode_t(padded):
  """Decode of 8 query heads sharing one kv head, keys along the rows: s.T = k @ q.T (the 8 heads
  as n of a transposed B), the softmax along axis 0, and p.T @ v, whose A has 8 rows."""
  @mg.mgpu_kernel(out_shape=lambda q, k, v: S(q.shape, F32), grid=lambda q, k, v: (q.shape[0],))
  def decode_t(q, k, v, o):
    b = ml.program_id(0)
    h, d = q.shape[1], q.shape[2]
    q_s = ml.smem((h, d))
    ml.copy(q.at[b], q_s)
    k_s = ml.smem((BKV, d))
    v_s = ml.smem((BKV, d))
    m = ml.full((h,), -jnp.inf, F32)
    l = ml.zeros((h,), F32)
    acc = ml.zeros((h, d), F32)
    for j in ml.range(k.shape[1] // BKV, stages=2):
      ml.copy(k.at[b, ml.ds(j * BKV, BKV), :], k_s)
      ml.copy(v.at[b, ml.ds(j * BKV, BKV), :], v_s)
      st = ml.dot(k_s, q_s.T) * 0.125
      m_new = ml.maximum(m, ml.max(st, axis=0))
      alpha = ml.exp(m - m_new)
      p = ml.exp(st - m_new[None, :])
      l = l * alpha + ml.sum(p, axis=0)
      if padded:
        pv = ml.dot(ml.concatenate([p.T.astype(v.dtype), ml.zeros((56, 64), jnp.float16)], axis=0), v_s)[:8]
      else:
        pv = ml.dot(p.T.astype(v.dtype), v_s)
      acc = acc * alpha[:, None] + pv
      m = m_new
    o.at[b][...] = acc / l[:, None]
  return decode_t


def test_a_register_a_of_8_rows_is_hinted_as_padded_rows_and_the_hint_works():
  """The hint for a register A of 8 rows (`p.T.astype(v.dtype)`) read "give v 64 rows and copy a
  64-row window into it": `v`, a placeholder, named the user's value array, which was not A. It then
  padded A in registers, in the user's own text; since probe 47e the compiler pads it, so the kernel as
  written and the one that follows the old hint both match jnp."""
  specs = (S((2, 8, 64), jnp.float16), S((2, 256, 64), jnp.float16), S((2, 256, 64), jnp.float16))
  rng = np.random.default_rng(5)
  q, k, v = (jnp.asarray(rng.standard_normal(s.shape) * (3 if i < 2 else 1), jnp.float16) for i, s in enumerate(specs))
  s = jnp.einsum("bhd,bsd->bhs", q.astype(F32), k.astype(F32)) * 0.125
  want = jnp.einsum("bhs,bsd->bhd", jax.nn.softmax(s, axis=-1), v.astype(F32))
  for padded in (False, True):
    np.testing.assert_allclose(np.asarray(_decode_t(padded)(q, k, v, interpret=True)), want, atol=2e-2)
    _export(_decode_t(padded), *specs)


@pytest.mark.gpu
def test_gpu_a_register_a_padded_with_zero_rows():
  specs = (S((4, 8, 64), jnp.float16), S((4, 512, 64), jnp.float16), S((4, 512, 64), jnp.float16))
  rng = np.random.default_rng(6)
  q, k, v = (jnp.asarray(rng.standard_normal(s.shape) * (3 if i < 2 else 1), jnp.float16) for i, s in enumerate(specs))
  s = jnp.einsum("bhd,bsd->bhs", q.astype(F32), k.astype(F32)) * 0.125
  want = jnp.einsum("bhs,bsd->bhd", jax.nn.softmax(s, axis=-1), v.astype(F32))
  np.testing.assert_allclose(np.asarray(jax.jit(_decode_t(True))(q, k, v)), want, atol=2e-2)


# ---------------------------------------------------------------- a B operand read from its buffer
def _scores(how):
  @mg.mgpu_kernel(out_shape=lambda q, k: S((q.shape[0], k.shape[0]), F32))
  def scores(q, k, out):
    q_s = ml.smem(q.shape)
    k_s = ml.smem(k.shape)
    ml.copy(q, q_s)
    ml.copy(k, k_s)
    if how == "read":
      out[...] = ml.dot(q_s, k_s[...].T) * 0.125
    else:
      out[...] = ml.dot(q_s, k_s.T) * 0.125
  return scores


def test_a_b_operand_read_from_its_buffer_is_hinted_as_the_buffers_view():
  """`ml.dot(q_s, k_s[...].T)` was hinted as "store b's tile in SMEM: b_s[...] = k_s[...].T ... (a tile
  read from SMEM: pass that buffer itself)", whose last words, followed, give ml.dot(q_s, k_s): q @ k,
  silently not q @ k.T. The hint now names the transposed view, which moves no data."""
  specs = (S((64, 64), jnp.float16), S((64, 64), jnp.float16))
  rng = np.random.default_rng(7)
  q, k = (jnp.asarray(rng.standard_normal(s.shape), jnp.float16) for s in specs)
  # (the read was MG501; since probe 47e the compiler stores it into SMEM: q @ k.T still, never q @ k)
  for how in ("read", "view"):
    got = _scores(how)(q, k, interpret=True)
    np.testing.assert_allclose(np.asarray(got), (q.astype(F32) @ k.astype(F32).T) * 0.125, rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------- a partial last tile's lse, stored unmasked
def _lse_tile(masked):
  @mg.mgpu_kernel(out_shape=lambda q, k: S((q.shape[1], q.shape[0]), F32), grid=lambda q, k: (ml.cdiv(q.shape[0], 64), q.shape[1]))
  def tile_lse(q, k, lse):
    i, h = ml.program_id(0), ml.program_id(1)
    q_s = ml.smem((64, q.shape[2]))
    k_s = ml.smem((k.shape[0], k.shape[2]))
    ml.copy(q.at[ml.ds(i * 64, 64), h, :], q_s)
    ml.copy(k.at[:, h, :], k_s)
    s = ml.dot(q_s, k_s.T) * 0.125
    m = ml.max(s, axis=1)
    l = ml.sum(ml.exp(s - m[:, None]), axis=1)
    if masked:
      lse.at[h, ml.ds(i * 64, 64)].store(m + ml.log(l), mask=i * 64 + ml.arange(64) < lse.shape[1])
    else:
      lse.at[h, ml.ds(i * 64, 64)][...] = m + ml.log(l)
  return tile_lse


def test_an_unmasked_partial_store_is_hinted_with_the_value_it_stores():
  """The MG203 hint of `lse.at[h, ml.ds(i * 64, 64)][...] = m + ml.log(l)` (100 query rows) read
  `.store(value, mask=...)`, `value` a name the kernel does not have; it writes the stored value now."""
  specs = (S((100, 2, 64), jnp.float16), S((64, 2, 64), jnp.float16))
  expect(_lse_tile(False), specs, mg.IndexOutOfBoundsError, "lse.at[h",
         "this register write touches lse[0:1, 64:128] in program (1, 0, 0), outside lse's shape (2, 100)", nth=1,
         hint="mask it to the elements inside: lse.at[h, ml.ds(i * 64, 64)].store(m + ml.log(l), mask=i * 64 +"
              " ml.arange(64) < lse.shape[1]) (read an input's tail the same way, .load(mask=..., other=0));"
              " or guard the access (if i * 64 + 64 <= 100:)")
  rng = np.random.default_rng(8)
  q, k = (jnp.asarray(rng.standard_normal(s.shape) * 3, jnp.float16) for s in specs)
  want = jax.nn.logsumexp(jnp.einsum("qhd,khd->hqk", q.astype(F32), k.astype(F32)) * 0.125, axis=-1)
  np.testing.assert_allclose(np.asarray(_lse_tile(True)(q, k, interpret=True)), want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- padded query rows left unwritten
from locate import where  # noqa: E402


def _padded_rows(fill):
  @mg.mgpu_kernel(out_shape=lambda x, n: x, grid=lambda x, n: (ml.cdiv(x.shape[1], 64), x.shape[2], x.shape[0]))
  def normalise(x, q_len, o):
    i, h, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
    rows = i * 64 + ml.arange(64)
    t = x.at[b, ml.ds(i * 64, 64), h, :].load(mask=rows[:, None] < x.shape[1], other=0.0)
    out = ml.softmax(t, axis=1)
    if fill:
      o.at[b, ml.ds(i * 64, 64), h, :].store(ml.where(rows[:, None] < q_len[b], out, 0),
                                             mask=(i * 64 + ml.arange(64))[:, None] < o.shape[1])
    else:
      o.at[b, ml.ds(i * 64, 64), h, :].store(out, mask=rows[:, None] < q_len[b])
  return normalise


def test_the_padded_rows_hint_masks_the_dimension_the_window_runs_along():
  """Query rows past a sequence's length left unwritten (a mask of data) are MG602 in interpret mode; the
  hint's mask of the output's own extent read `offs < o.shape[0]` (the batch) for a window along
  dimension 1: it now writes the window's positions along the dimension its ml.ds runs."""
  x = jnp.asarray(np.random.default_rng(9).standard_normal((2, 100, 2, 128)) * 10, F32)
  n = jnp.asarray([100, 70], jnp.int32)
  kernel = _padded_rows(False)
  with pytest.raises(mg.UncoveredOutputError) as info:
    kernel(x, n, interpret=True)
  e = info.value
  assert (e.lineno, e.col_offset) == where(kernel, "o.at[b", 1)
  assert e.message == ("o[1:2, 70:100, :, :] is never written: the masked store into o (line"
                       f" {e.lineno}) leaves the elements where its mask is false unwritten, and nothing else writes"
                       " them, so 7680 of 51200 elements of o would stay uninitialised")
  assert e.hint == ("write every element of o: put the mask into the value, ml.where(rows[:, None] < q_len[b], out, 0),"
                    " and store that unmasked, o.at[b, ml.ds(i * 64, 64), h, :][...] = ..., where the window lies inside"
                    " o; a window running past o's end keeps a mask of o's own extent only, o.at[b, ml.ds(i * 64, 64),"
                    " h, :].store(..., mask=(i * 64 + ml.arange(64))[:, None] < o.shape[1])")
  want = jnp.where(jnp.arange(100)[None, :, None, None] < n[:, None, None, None], jax.nn.softmax(x, axis=-1), 0)
  np.testing.assert_allclose(np.asarray(_padded_rows(True)(x, n, interpret=True)), want, rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- a decode GEMV written as ml.dot of a vector
def _gemv_scores(form):
  @mg.mgpu_kernel(out_shape=lambda q, k, v: S((q.shape[0], k.shape[1]), F32), grid=lambda q, k, v: (q.shape[0],))
  def scores(q, k, v, out):
    b = ml.program_id(0)
    k_s = ml.smem((k.shape[1], k.shape[2]))
    ml.copy(k.at[b], k_s)
    qv = q.at[b][...]
    if form == "a":
      out.at[b][...] = ml.dot(q.at[b][...], k_s.T)
    elif form == "b":
      out.at[b][...] = ml.dot(k_s, qv)
    else:
      out.at[b][...] = ml.sum(k_s[...].astype(jnp.float32) * (q.at[b][...]).astype(jnp.float32)[None, :], axis=1)
  return scores


def test_a_decode_gemv_through_ml_dot_is_hinted_in_the_users_words():
  """`ml.dot(q.at[b][...], k_s.T)` was hinted as `ml.sum(k_s[...].astype(...) * v.astype(...)[None, :], axis=1)`:
  `v`, a placeholder, is the kernel's value array; `ml.dot(k_s, qv)` (a register vector as b) was hinted as
  an SMEM buffer of shape (64,), which ml.dot then rejects as 1-D. Both now give the multiply and sum in
  the user's words, and the kernel that follows it matches jnp."""
  specs = (S((2, 64), jnp.float16), S((2, 128, 64), jnp.float16), S((2, 128, 64), jnp.float16))
  tail = ("; or, on the tensor cores, copy the vector as a row (x.reshape(1, k) outside the kernel) into an (8, k)"
          " buffer, row_s (TMA reads zeros past the last row), and take column 0 of ml.dot(k_s, row_s.T)")
  expect(_gemv_scores("a"), specs, mg.MmaOperandError, "ml.dot(q.at", "ml.dot operand a must be 2-D, got shape (64,)",
         hint="ml.dot multiplies 2-D tiles: a matrix-vector product (a decode GEMV) is a multiply and a sum in"
              " registers, ml.sum(k_s[...].astype(jnp.float32) * (q.at[b][...]).astype(jnp.float32)[None, :], axis=1)")
  expect(_gemv_scores("b"), specs, mg.MmaOperandError, "ml.dot(k_s, qv)",
         "ml.dot operand b must be an SMEM buffer of this CTA, got a register tensor",
         hint="ml.dot multiplies 2-D tiles: a matrix-vector product (a decode GEMV) is a multiply and a sum in"
              " registers, ml.sum(k_s[...].astype(jnp.float32) * qv.astype(jnp.float32)[None, :], axis=1)" + tail)
  rng = np.random.default_rng(10)
  q, k, v = (jnp.asarray(rng.standard_normal(s.shape), jnp.float16) for s in specs)
  want = jnp.einsum("bd,bsd->bs", q.astype(F32), k.astype(F32))
  np.testing.assert_allclose(np.asarray(_gemv_scores("sum")(q, k, v, interpret=True)), want, rtol=1e-4, atol=1e-3)
