"""Probe 47f (nothing silently wrong). Interpret mode's MaskedReductionError (MG953) lost the padding of a
masked load at a loop's carry: Triton's chunked row kernels, a running `acc = ml.maximum(acc, v)` over tiles of
a row with `other=0.0`, a layer norm's `_var += (a - mean) * (a - mean)` over column chunks, a column sum carried
over rows then maxed over its padded columns, gave wrong numbers with no error. Loops and branches now hand the
lanes' states on, and a lane of data that the padding changed in a running sum, max or min is followed to the
reduction it reaches (lowering/interpret_padding.py). The register-spill warning (MG403's RegisterSpillWarning)
counted one ml.dot's accumulator only: a gated MLP's two accumulators carried through one loop (each fitting,
not both) now warn at the first dot, with the tile that fits."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import where

S = jax.ShapeDtypeStruct
F16, F32 = jnp.float16, jnp.float32


def _raises(kernel, args, at, message, hint, **kw):
  """`kernel(*args)` in interpret mode fails with MG953 at `at`, with exactly `message` and `hint`."""
  with pytest.raises(mg.MaskedReductionError) as info:
    kernel(*args, interpret=True, **kw)
  e = info.value
  assert e.code == "MG953" and isinstance(e, mg.InterpretError)
  assert (e.lineno, e.col_offset) == where(kernel, at), e.render()
  assert e.message == message, e.message
  assert e.hint == hint, e.hint
  return e


def _rows(seed, shape, shift=-3.0):
  return (np.random.default_rng(seed).standard_normal(shape) + shift).astype(np.float32)


def _g(v):
  return f"{float(v):.6g}"


# ---------------------------------------------------------------- a running max over tiles of a row
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def running_max(x, out, *, OTHER: ml.constexpr = 0.0, WHERE: ml.constexpr = False):
  r = ml.program_id(0)
  acc = ml.full((128,), float("-inf"), F32)
  for k in range(0, x.shape[1], 128):
    cols = k + ml.arange(128)
    v = x.at[r, cols].load(mask=cols < x.shape[1], other=OTHER)
    if WHERE:
      v = ml.where(cols < x.shape[1], v, float("-inf"))
    acc = ml.maximum(acc, v)
  out[r] = ml.max(acc)


def test_a_running_max_whose_last_tile_pads_with_zeros_is_reported_at_the_reduction():
  x = -np.abs(_rows(1, (1, 300))) - 1      # negative rows under a max of zeros
  load, mix = where(running_max, "v = x.at")[0], where(running_max, "acc = ml.maximum")[0]
  had = max(x[0, 44], x[0, 172])           # lane 44: columns 44 and 172, then the padding past column 299
  _raises(running_max, [x], "ml.max(acc)",
          f"ml.max reduces lanes of data that the padding changed at line {mix} (ml.maximum(acc, v)): lanes the"
          f" masked load at line {load} kept off past the end of x, filled with other=OTHER (0.0) met data there,"
          f" and a lane holding {_g(had)} became 0, so its result in program (0, 0, 0), 0, counts the padding",
          f"fill the lanes with the identity of a max: other=float('-inf') in the masked load at line {load}, or keep"
          f" the padding out of the max at line {mix}: ml.maximum(acc, ml.where(cols < x.shape[1], v, float('-inf')))")
  for fixed in ({"OTHER": float("-inf")}, {"WHERE": True}):
    np.testing.assert_allclose(np.asarray(running_max(x, interpret=True, **fixed)), x.max(1))
  # padding that loses the max, or that a max of other lanes of data decides, is not reported
  y = _rows(2, (3, 300), shift=3.0)
  y[:, 0] = 9.0
  np.testing.assert_allclose(np.asarray(running_max(y, interpret=True)), y.max(1))
  y = -np.abs(y) - 1
  y[:, 0] = 5.0
  np.testing.assert_allclose(np.asarray(running_max(y, interpret=True)), y.max(1))


# ---------------------------------------------------------------- Triton's layer norm over column chunks
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def chunked_var(x, out, *, WHERE: ml.constexpr = False):
  r = ml.program_id(0)
  n = x.shape[1]
  s = ml.zeros((128,), F32)
  for k in range(0, n, 128):
    cols = k + ml.arange(128)
    s += x.at[r, cols].load(mask=cols < n, other=0.0)        # (adds zeros: fine)
  mean = ml.sum(s) / n
  _var = ml.zeros((128,), F32)
  for k in range(0, n, 128):
    cols = k + ml.arange(128)
    a = x.at[r, cols].load(mask=cols < n, other=0.0)
    if WHERE:
      a = ml.where(cols < n, a - mean, 0.0) + mean
    _var += (a - mean) * (a - mean)
  out[r] = ml.sum(_var) / n


def test_a_chunked_variance_of_the_padding_minus_the_mean_is_reported():
  x = _rows(4, (1, 200))
  load, mix = where(chunked_var, "a = x.at")[0], where(chunked_var, "_var += (a")[0]
  mean = np.sum(x[0], dtype=np.float32) * np.float32(1 / 200)     # / 200 is jnp's multiply by 1/200 (probe 53h)
  had = (x[0, 72] - mean) ** 2             # lane 72: column 72 only, then the padding past column 199
  e = _raises(chunked_var, [x], "ml.sum(_var)",
              f"ml.sum reduces lanes of data that the padding changed at line {mix} (_var += (a - mean) * (a - mean)):"
              f" lanes the masked load at line {load} kept off past the end of x, filled with other=0.0 met data"
              f" there, and a lane holding {_g(had)} became {_g(had + mean * mean)}, so its result in program"
              f" (0, 0, 0), {_g(np.sum((x[0] - mean) ** 2) + 56 * mean * mean)}, counts the padding",
              f"keep the padding out of the sum at line {mix}: _var += ml.where(cols < n, (a - mean) * (a - mean), 0.0)")
  assert e.lineno == where(chunked_var, "out[r] = ml.sum")[0]
  y = _rows(3, (3, 200))                   # the fix: the padding's (a - mean) kept at 0; the first loop's zeros are fine
  np.testing.assert_allclose(np.asarray(chunked_var(y, interpret=True, WHERE=True)), y.var(1), rtol=1e-4)


# ---------------------------------------------------------------- padding lanes carried whole, while loops, TMA
@mg.mgpu_kernel(out_shape=lambda x: S((1,), x.dtype))
def column_sums_max(x, out):
  cols = ml.arange(128)
  acc = ml.zeros((128,), F32)
  for r in range(x.shape[0]):
    acc += x.at[r, cols].load(mask=cols < x.shape[1], other=0.0)
  out[0] = ml.max(acc)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def running_min_while(x, out):
  r = ml.program_id(0)
  acc = ml.full((128,), float("inf"), F32)
  k = 0
  while k < x.shape[1]:
    cols = k + ml.arange(128)
    acc = ml.minimum(acc, x.at[r, cols].load(mask=cols < x.shape[1], other=0.0))
    k += 128
  out[r] = ml.min(acc)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0] // 8,))
def tma_running_max(x, out):
  i = ml.program_id(0)
  buf = ml.smem((8, 128), F32)
  acc = ml.full((8, 128), float("-inf"), F32)
  for c in range(ml.cdiv(x.shape[1], 128)):
    ml.copy(x.at[ml.ds(i * 8, 8), ml.ds(c * 128, 128)], buf)
    acc = ml.maximum(acc, buf[...])
  out.at[ml.ds(i * 8, 8)][...] = ml.max(acc, axis=1)


@mg.mgpu_kernel(out_shape=lambda x, s: S((x.shape[0],), F32), grid=lambda x, s: (x.shape[0],))
def branch_max(x, s, out):
  r = ml.program_id(0)
  cols = ml.arange(128)
  v = x.at[r, cols].load(mask=cols < x.shape[1], other=0.0)
  if s[0] > 0:                             # (a run-time branch: its results carry the padding)
    w = v * 2.0
  else:
    w = v + 1.0
  out[r] = ml.max(w)


def test_padding_is_followed_through_carries_of_for_and_while_loops_and_tma_loads():
  x = _rows(5, (16, 100))                  # (one program: the error names it)
  load = where(column_sums_max, "acc += x.at")[0]
  _raises(column_sums_max, [x], "ml.max(acc)",
          f"ml.max reduces lanes the masked load at line {load} kept off past the end of x, filled with other=0.0:"
          f" they change its result in program (0, 0, 0), 0 where the elements inside give {_g(x.sum(0).max())}",
          f"fill them with the identity of a max: other=float('-inf') in the masked load at line {load} (where a sum"
          f" reduces the same tile, keep other=0 there and take the max of ml.where(cols < x.shape[1], v, float('-inf')))")
  y = np.abs(_rows(6, (2, 200))) + 1       # positive rows under a min of zeros
  with pytest.raises(mg.MaskedReductionError) as info:
    running_min_while(y, interpret=True)
  assert (info.value.lineno, info.value.col_offset) == where(running_min_while, "ml.min(acc)")
  assert info.value.hint.startswith("fill the lanes with the identity of a min: other=float('inf')")
  with pytest.raises(mg.MaskedReductionError) as info:
    branch_max(-np.abs(_rows(8, (1, 100))) - 1, np.array([1], np.int32), interpret=True)
  assert (info.value.lineno, info.value.col_offset) == where(branch_max, "ml.max(w)")
  z = -np.abs(_rows(7, (16, 300))) - 1
  with pytest.raises(mg.MaskedReductionError) as info:
    tma_running_max(z, interpret=True)
  copy, mix = where(tma_running_max, "ml.copy(")[0], where(tma_running_max, "acc = ml.maximum")[0]
  assert info.value.message.startswith(
      f"ml.max reduces lanes of data that the padding changed at line {mix} (ml.maximum(acc, buf[...])): elements"
      f" the TMA copy at line {copy} read past the end of x (as zeros) met data there")
  assert info.value.hint == (
      f"keep the padding out of the max at line {mix}: ml.maximum(acc, ml.where((c * 128 + ml.arange(128))[None, :]"
      " < x.shape[1], buf[...], float('-inf')))")


# ---------------------------------------------------------------- accumulators a loop carries side by side
def _gated(bm, bn, block):
  @mg.mgpu_kernel(out_shape=lambda x, w1, w3: S((x.shape[0], w1.shape[1]), F16),
                  grid=lambda x, w1, w3: (x.shape[0] // bm, w1.shape[1] // bn), block=block)
  def swiglu(x, w1, w3, out):
    i, j = ml.program_id(0), ml.program_id(1)
    x_s, a_s, b_s = ml.smem((bm, 64)), ml.smem((64, bn)), ml.smem((64, bn))
    acc1 = ml.zeros((bm, bn), F32)
    acc3 = ml.zeros((bm, bn), F32)
    for k in range(x.shape[1] // 64):
      ml.copy(x.at[ml.ds(i * bm, bm), ml.ds(k * 64, 64)], x_s)
      ml.copy(w1.at[ml.ds(k * 64, 64), ml.ds(j * bn, bn)], a_s)
      ml.copy(w3.at[ml.ds(k * 64, 64), ml.ds(j * bn, bn)], b_s)
      acc1 = ml.dot(x_s, a_s, acc1)
      acc3 = ml.dot(x_s, b_s, acc3)
    out.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...] = (acc1 * ml.sigmoid(acc1) * acc3).astype(F16)
  return swiglu


def _spills(kernel, *specs):
  with warnings.catch_warnings(record=True) as got:
    warnings.simplefilter("always")
    kernel.check(*specs)
  return [w for w in got if issubclass(w.category, mg.RegisterSpillWarning)]


def test_two_accumulators_a_loop_carries_are_one_spill_warning_at_the_first_dot():
  specs = [S((256, 128), F16), S((128, 256), F16), S((128, 256), F16)]
  kernel = _gated(128, 128, 128)
  (w,) = _spills(kernel, *specs)
  line, col = where(kernel, "ml.dot(x_s, a_s")
  loop = where(kernel, "for k in range")[0]
  assert (w.filename, w.lineno) == (__file__, line)
  text = str(w.message)
  assert f":{line}:{col}: this ml.dot's 128x128 float32 accumulator lives in registers whole: 128 registers a thread" \
         f" (all 128 rows on one warpgroup of block=128), and the loop at line {loop} carries acc3 (128x128 float32, 128" \
         " more) beside it all the way; a CTA of 128 threads is compiled for 255 registers a thread, so ptxas" \
         " spills it to local memory (it computes, several times slower) [MG403]" in text.splitlines()[0]
  assert text.endswith("hint: use block=256 to split its rows over 2 warpgroups (128 registers a thread), or a 64x128"
                       " tile a program at block=128 (128 registers a thread)")
  # no fewer rows fit a 64x256 pair: fewer columns for both do
  (w,) = _spills(_gated(64, 256, 128), S((256, 128), F16), S((128, 512), F16), S((128, 512), F16))
  assert str(w.message).endswith("hint: use tiles of 128 columns for each accumulator (64x128 at block=128: 128"
                                 " registers a thread)")
  assert _spills(_gated(128, 128, 256), *specs) == []      # the hint followed: 64 + 64 a thread


def _flash(block):
  @mg.mgpu_kernel(out_shape=lambda q, kt, v: S(q.shape, F32), grid=lambda q, kt, v: (q.shape[0] // 128,), block=block)
  def flash(q, kt, v, out):
    i = ml.program_id(0)
    q_s, k_s, v_s = ml.smem((128, 128)), ml.smem((128, 128)), ml.smem((128, 128))
    ml.copy(q.at[ml.ds(i * 128, 128)], q_s)
    m = ml.full((128,), float("-inf"), F32)
    l = ml.zeros((128,), F32)
    acc = ml.zeros((128, 128), F32)
    for j in range(kt.shape[1] // 128):
      ml.copy(kt.at[:, ml.ds(j * 128, 128)], k_s)
      ml.copy(v.at[ml.ds(j * 128, 128)], v_s)
      s = ml.dot(q_s, k_s)
      m_new = ml.maximum(m, ml.max(s, axis=1))
      p = ml.exp(s - m_new[:, None])
      alpha = ml.exp(m - m_new)
      l = l * alpha + ml.sum(p, axis=1)
      acc = ml.dot(p.astype(F16), v_s, acc * alpha[:, None])
      m = m_new
    out.at[ml.ds(i * 128, 128)][...] = acc / l[:, None]
  return flash


def test_attentions_scores_beside_the_output_a_loop_carries_spill_at_one_warpgroup():
  specs = [S((256, 128), F16), S((128, 256), F16), S((256, 128), F16)]
  kernel = _flash(128)
  (w,) = _spills(kernel, *specs)
  assert (w.lineno, str(w.message).split(": this")[0].rsplit(":", 1)[1]) == (
      where(kernel, "s = ml.dot")[0], str(where(kernel, "ml.dot(q_s")[1]))
  assert f"and the loop at line {where(kernel, 'for j in')[0]} carries acc (128x128 float32, 128 more) beside it" in str(
      w.message)
  assert _spills(_flash(256), *specs) == []


# ---------------------------------------------------------------- padding through ml.dot: scores of keys past the end
@mg.mgpu_kernel(out_shape=lambda q, k, v: S(q.shape, F32), grid=lambda q, k, v: (ml.cdiv(q.shape[0], 64),))
def flash_tail(q, k, v, out, *, MASK: ml.constexpr = False):
  i = ml.program_id(0)
  q_s, k_s, v_s = ml.smem((64, 64)), ml.smem((64, 64)), ml.smem((64, 64))
  ml.copy(q.at[ml.ds(i * 64, 64)], q_s)
  m = ml.full((64,), float("-inf"), F32)
  l = ml.zeros((64,), F32)
  acc = ml.zeros((64, 64), F32)
  for j in range(ml.cdiv(k.shape[0], 64)):
    ml.copy(k.at[ml.ds(j * 64, 64)], k_s)
    ml.copy(v.at[ml.ds(j * 64, 64)], v_s)
    s = ml.dot(q_s, k_s.T)
    if MASK:
      s = ml.where((j * 64 + ml.arange(64))[None, :] < k.shape[0], s, float("-inf"))
    m_new = ml.maximum(m, ml.max(s, axis=1))
    p = ml.exp(s - m_new[:, None])
    alpha = ml.exp(m - m_new)
    l = l * alpha + ml.sum(p, axis=1)
    acc = ml.dot(p.astype(F16), v_s, acc * alpha[:, None])
    m = m_new
  out.at[ml.ds(i * 64, 64)][...] = acc / l[:, None]


@mg.mgpu_kernel(out_shape=lambda q, k: S((q.shape[0], k.shape[0]), F32))
def scores_softmax(q, k, out):
  rows, cols = ml.arange(64), ml.arange(128)
  kk = k.at[cols[:, None], ml.arange(64)[None, :]].load(mask=cols[:, None] < k.shape[0], other=0.0)
  q_s, k_s = ml.smem((64, 64), F16), ml.smem((128, 64), F16)
  ml.copy(q, q_s)
  k_s[...] = kk                                      # the padding staged for the tensor cores
  p = ml.softmax(ml.dot(q_s, k_s.T), axis=1)
  out.at[rows[:, None], cols[None, :]].store(p, mask=cols[None, :] < k.shape[0])


def _attention(q, k, v):
  s = q.astype(np.float32) @ k.astype(np.float32).T
  p = np.exp(s - s.max(1, keepdims=True))
  return (p / p.sum(1, keepdims=True)) @ v.astype(np.float32)


def test_scores_of_keys_a_tma_load_read_past_the_sequences_end_are_reported_through_the_dot():
  rng = np.random.default_rng(11)
  q = (rng.standard_normal((64, 64)) * 0.125).astype(np.float16)
  k, v = (rng.standard_normal((100, 64)).astype(np.float16) for _ in range(2))
  copy, dot = where(flash_tail, "ml.copy(k.at")[0], where(flash_tail, "s = ml.dot")[0]
  with pytest.raises(mg.MaskedReductionError) as info:
    flash_tail(q, k, v, interpret=True)
  e = info.value
  assert (e.lineno, e.col_offset) == where(flash_tail, "ml.sum(p, axis=1)")
  assert e.message.startswith(
      f"ml.sum reduces elements the TMA copy at line {copy} read past the end of k (as zeros), through the ml.dot at"
      f" line {dot} (the columns of its result they alone make), values such as ")
  assert e.hint == (
      "reduce only the elements inside: ml.sum(p, axis=1, where=(j * 64 + ml.arange(64))[None, :] < k.shape[0]), or"
      f" mask s once after the ml.dot at line {dot}: s = ml.where((j * 64 + ml.arange(64))[None, :] < k.shape[0], s,"
      " float('-inf')) (for a softmax of it: exp(-inf) = 0 in the padding's columns)")
  np.testing.assert_allclose(np.asarray(flash_tail(q, k, v, interpret=True, MASK=True)), _attention(q, k, v),
                             rtol=2e-2, atol=2e-3)


def test_a_masked_loads_padding_stored_into_smem_reaches_the_dots_reductions():
  rng = np.random.default_rng(12)
  q = (rng.standard_normal((64, 64)) * 0.125).astype(np.float16)
  k = rng.standard_normal((100, 64)).astype(np.float16)
  with pytest.raises(mg.MaskedReductionError) as info:
    scores_softmax(q, k, interpret=True)
  e = info.value
  load = where(scores_softmax, "kk = k.at")[0]
  assert (e.lineno, e.col_offset) == where(scores_softmax, "ml.softmax(")
  assert e.message.startswith(
      f"ml.softmax reduces lanes the masked load at line {load} kept off past the end of k, filled with other=0.0,"
      f" through the ml.dot at line {where(scores_softmax, 'ml.dot(')[0]} (the columns of its result they alone make)")
  assert e.hint.startswith("reduce only the elements inside: ml.softmax(ml.dot(q_s, k_s.T), axis=1, where=cols[None, :]"
                           " < k.shape[0]), or mask ")


# ---------------------------------------------------------------- a register tensor a loop carries, past a thread's registers
def _column_block_sums(rows):
  @mg.mgpu_kernel(out_shape=lambda x: S((rows, x.shape[1]), F32))
  def block_sums(x, out):
    acc = ml.zeros((rows, x.shape[1]), F32)
    for r in range(x.shape[0] // rows):
      acc += x.at[ml.ds(r * rows, rows)][...]
    out[...] = acc
  return block_sums


def test_a_running_sum_a_loop_carries_past_a_threads_registers_warns_at_its_start():
  kernel = _column_block_sums(128)
  (w,) = _spills(kernel, S((512, 1024), F32))
  line, col = where(kernel, "ml.zeros((rows")
  loop = where(kernel, "for r in range")[0]
  assert (w.filename, w.lineno) == (__file__, line)
  assert str(w.message).splitlines()[0].endswith(
      f":{line}:{col}: the loop at line {loop} carries acc (128x1024 float32) in registers, 1024 a thread across the"
      " CTA's 128 threads; a CTA of 128 threads is compiled for 255 registers a thread, so ptxas spills it to local"
      " memory and each trip reads and writes it there (it computes, several times slower) [MG403]")
  assert str(w.message).endswith("hint: carry a tile of 16 rows (16x1024) a program, launching more programs for the"
                                 " rest, or keep it in SMEM (ml.smem) and update it in parts")
  assert _spills(_column_block_sums(16), S((512, 1024), F32)) == []       # the hint followed: 128 a thread
  x = np.random.default_rng(13).standard_normal((64, 1024)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(_column_block_sums(16)(x, interpret=True)),
                             x.reshape(4, 16, 1024).sum(0), rtol=1e-5, atol=1e-5)
