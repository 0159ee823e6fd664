"""Probe 62a: differential fuzzing of multi-warpgroup kernels (tests/wg_fuzz.py, design note 208).

Its one refusal worth lifting: a column statistic (`axis=0`: sum, max, min, argmax, argmin, and what composes them)
of a tensor-core tile the warpgroups split by rows was MG204 at block=256 and 384 (5% of the fuzzer's seeds: dot
results, warp-specialised accumulators, and plain loaded tiles that take the WGMMA layout because they later feed a
dot). Each warpgroup now reduces its own rows and the parts meet in SMEM (frontend/smem.py `column_exchange`,
lowering/shape.py `_combine_columns`). Inputs are small whole numbers, so every sum is exact and the GPU, interpret
mode and NumPy agree bit for bit.
"""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F16, F32, I8, I32 = jnp.float16, jnp.float32, jnp.int8, jnp.int32
NP = {"sum": np.sum, "max": np.max, "min": np.min, "argmax": np.argmax, "argmin": np.argmin}
INT_OUT = ("argmax", "argmin")


def _out(a, b, *, f, keep, wg, src):
  dt = I32 if f in INT_OUT or src == "int8" else (F16 if src == "f16tile" else F32)
  n = b.shape[0] if src == "int8" else b.shape[1]
  return S((1, n) if keep else (n,), dt)


@mg.mgpu_kernel(out_shape=_out, block=lambda a, b, *, wg, **k: 128 * wg)
def column_stat(a, b, o, *, f: ml.constexpr, keep: ml.constexpr, wg: ml.constexpr, src: ml.constexpr):
  """A column statistic of a dot result (float32, int32 of an int8 dot, or the result cast to float16)."""
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s.T, out_dtype=jnp.int32) if src == "int8" else ml.dot(a_s, b_s)
  if src == "f16tile":
    acc = acc.astype(jnp.float16)
  if f == "sum":
    o[...] = ml.sum(acc, axis=0, keepdims=keep)
  elif f == "max":
    o[...] = ml.max(acc, axis=0, keepdims=keep)
  elif f == "min":
    o[...] = ml.min(acc, axis=0, keepdims=keep)
  elif f == "argmax":
    o[...] = ml.argmax(acc, axis=0, keepdims=keep)
  else:
    o[...] = ml.argmin(acc, axis=0, keepdims=keep)


def _inputs(wg, src, n=64, seed=0):
  r = np.random.default_rng(seed)
  dt = I8 if src == "int8" else F16
  k = 32 if src == "int8" else 16
  b = r.integers(-3, 4, (k, n))
  return jnp.asarray(r.integers(-3, 4, (64 * wg, k)), dt), jnp.asarray(b.T if src == "int8" else b, dt)


def _reference(a, b, f, keep, src):
  acc = np.asarray(a, np.int64) @ (np.asarray(b, np.int64).T if src == "int8" else np.asarray(b, np.int64))
  want = NP[f](acc, axis=0, keepdims=keep)
  dt = np.int32 if f in INT_OUT or src == "int8" else (np.float16 if src == "f16tile" else np.float32)
  return want.astype(dt)


CASES = [(f, False, "f32") for f in NP] + [("sum", True, "f32"), ("argmax", True, "f32"), ("sum", False, "int8"),
                                          ("min", False, "int8"), ("sum", False, "f16tile"), ("max", False, "f16tile")]


def test_a_column_statistic_of_a_split_tile_is_no_longer_refused_and_plans_its_exchange():
  """Frontend only: the layout check passes, and the reduction's scratch has room for every warpgroup's part (a
  warp's registers of it: 2 of every 8 columns a thread, 32 lanes, float32 for a 16-bit sum)."""
  from mgpu_dsl import calling, py_numbers
  from mgpu_dsl.frontend import ir
  from mgpu_dsl.frontend.ops.shape import Reduce
  for wg, n in ((2, 64), (3, 128)):
    a, b = _inputs(wg, "f32", n)
    specs, kw = (S(a.shape, a.dtype), S(b.shape, b.dtype)), dict(f="sum", keep=False, wg=wg, src="f32")
    kern = py_numbers.compiled(column_stat, *calling.keyword_inputs(column_stat, specs, kw))[0]["kernel"]
    reds = [o for o in ir.walk(kern.body) if isinstance(o, Reduce)]
    assert len(reds) == 1 and reds[0].axes == (0,)
    parts = kern.scratch_ids[reds[0].scratch.id]
    assert parts == wg * 32 * (n // 8) * 2
    assert reds[0].scratch.type.shape[0] > parts


@pytest.mark.parametrize("wg", [2, 3])
@pytest.mark.parametrize("f,keep,src", CASES)
def test_a_column_statistic_of_a_split_tile_combines_the_warpgroups_parts(f, keep, wg, src):
  a, b = _inputs(wg, src)
  kw = dict(f=f, keep=keep, wg=wg, src=src)
  specs = (S(a.shape, a.dtype), S(b.shape, b.dtype))
  text = column_stat.mlir(*specs, **kw)
  # the parts' exchange (argmax and argmin reduce twice): each thread's lane, its slot; two CTA barriers each
  exchanges = len(re.findall(r"arith\.remui %thread_id_x\w*, %c32\w* : index", text))
  assert exchanges == (2 if f in INT_OUT else 1) and text.count("gpu.barrier") >= 2 * exchanges
  np.testing.assert_array_equal(np.asarray(column_stat(a, b, interpret=True, **kw)), _reference(a, b, f, keep, src))
  jax.export.export(jax.jit(lambda a, b: column_stat(a, b, **kw)), platforms=["cuda"])(*specs)


@pytest.mark.gpu
@pytest.mark.parametrize("wg", [2, 3])
@pytest.mark.parametrize("f,keep,src", CASES)
def test_a_column_statistic_of_a_split_tile_gpu(f, keep, wg, src):
  for n in (16, 64, 256):
    a, b = _inputs(wg, src, n, seed=n)
    got = jax.jit(lambda a, b: column_stat(a, b, f=f, keep=keep, wg=wg, src=src))(a, b)
    np.testing.assert_array_equal(np.asarray(got), _reference(a, b, f, keep, src))


@mg.mgpu_kernel(out_shape=lambda a, b: (S((b.shape[1],), F32), S((b.shape[1],), I32), S((b.shape[1],), F32)),
                block=384)
def ws_column_stats(a, b, colmax, colarg, colsum):
  """A warp-specialised loop at block=384 (three compute warpgroups and a producer): a column maximum carried
  through the loop, an argmax and a sum after it, each combining the compute warpgroups' parts."""
  a_s, b_s = ml.smem((192, 32), F16), ml.smem((32, b.shape[1]), F16)
  acc = ml.zeros((192, b.shape[1]), F32)
  cm = ml.full((b.shape[1],), -jnp.inf, F32)
  for k in ml.range(a.shape[1] // 32, stages=2, warp_specialize=True):
    ml.copy(a.at[:, ml.ds(k * 32, 32)], a_s)
    ml.copy(b.at[ml.ds(k * 32, 32), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
    cm = ml.maximum(cm, ml.max(acc, axis=0))
  colmax[...] = cm
  colarg[...] = ml.argmax(acc, axis=0)
  colsum[...] = jnp.sum(acc - cm[None, :], axis=0)


def _ws_reference(a, b):
  a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
  cm = np.full(b.shape[1], -np.inf)
  for k in range(a.shape[1] // 32):
    acc = a[:, :(k + 1) * 32] @ b[:(k + 1) * 32]
    cm = np.maximum(cm, acc.max(0))
  return cm.astype(np.float32), acc.argmax(0).astype(np.int32), (acc - cm).sum(0).astype(np.float32)


def _ws_inputs(n=64, seed=1):
  r = np.random.default_rng(seed)
  return jnp.asarray(r.integers(-3, 4, (192, 96)), F16), jnp.asarray(r.integers(-3, 4, (96, n)), F16)


def test_column_statistics_in_and_after_a_warp_specialised_loop():
  a, b = _ws_inputs()
  text = ws_column_stats.mlir(S(a.shape, F16), S(b.shape, F16))
  # four exchanges (the carried maximum, argmax's two reductions, the sum), each meeting the three compute
  # warpgroups (384 threads) twice at their own named barrier: never the producer, which does not run them
  assert len(re.findall(r"arith\.remui %thread_id_x\w*, %c32\w* : index", text)) == 4
  assert len(re.findall(r"nvvm\.barrier id = %c\d+_i32\w* number_of_threads = %c384_i32", text)) == 8
  for got, want in zip(ws_column_stats(a, b, interpret=True), _ws_reference(a, b)):
    np.testing.assert_array_equal(np.asarray(got), want)
  jax.export.export(jax.jit(ws_column_stats), platforms=["cuda"])(S(a.shape, F16), S(b.shape, F16))


@pytest.mark.gpu
def test_column_statistics_in_and_after_a_warp_specialised_loop_gpu():
  for n in (16, 128):
    a, b = _ws_inputs(n, seed=n)
    for got, want in zip(jax.jit(ws_column_stats)(a, b), _ws_reference(a, b)):
      np.testing.assert_array_equal(np.asarray(got), want)


@mg.mgpu_kernel(out_shape=lambda x, w: (S((x.shape[1],), F32), S((x.shape[0], w.shape[1]), F32)), block=256)
def loaded_tile_then_dot(x, w, colmax, out):
  """Wg_fuzz seed 578's shape: a loaded tile, centred by its column maximum and then fed to a dot, takes the
  tensor-core layout (split by rows at block=256) from that use, so its column maximum was MG204."""
  w_s = ml.smem(w.shape, F16)
  ml.copy(w, w_s)
  t = x[...]
  m = ml.max(t, axis=0)
  colmax[...] = m
  out[...] = ml.dot((t - m[None, :]).astype(F16), w_s)


def test_a_loaded_tile_that_feeds_a_dot_has_its_column_statistic():
  r = np.random.default_rng(5)
  x = jnp.asarray(r.integers(-4, 5, (256, 64)), F32)
  w = jnp.asarray(r.integers(-2, 3, (64, 32)), F16)
  xv, wv = np.asarray(x, np.float64), np.asarray(w, np.float64)
  m, o = loaded_tile_then_dot(x, w, interpret=True)
  np.testing.assert_array_equal(np.asarray(m), xv.max(0))
  np.testing.assert_array_equal(np.asarray(o), (xv - xv.max(0)) @ wv)
  jax.export.export(jax.jit(loaded_tile_then_dot), platforms=["cuda"])(S(x.shape, F32), S(w.shape, F16))


@pytest.mark.gpu
def test_a_loaded_tile_that_feeds_a_dot_has_its_column_statistic_gpu():
  r = np.random.default_rng(6)
  x = jnp.asarray(r.integers(-4, 5, (256, 64)), F32)
  w = jnp.asarray(r.integers(-2, 3, (64, 32)), F16)
  xv, wv = np.asarray(x, np.float64), np.asarray(w, np.float64)
  m, o = jax.jit(loaded_tile_then_dot)(x, w)
  np.testing.assert_array_equal(np.asarray(m), xv.max(0))
  np.testing.assert_array_equal(np.asarray(o), (xv - xv.max(0)) @ wv)


@pytest.mark.parametrize("seed", [16, 71, 578])
def test_wg_fuzz_seeds_that_were_refused_run(seed):
  """The fuzzer's kernels of this class (MG204 before): interpret mode against the NumPy reference, and the CUDA
  export."""
  import wg_fuzz
  g = wg_fuzz.Gen(seed)
  assert wg_fuzz.run(g, build=True) == ("ok", "")


@mg.mgpu_kernel(out_shape=lambda q, k, v, *, where: (S((q.shape[0], v.shape[1]), F32), S((v.shape[1],), F32)),
                block=256)
def pp_column_max(q, k, v, o, cm, *, where: ml.constexpr):
  """A column maximum of a ping-pong loop's accumulator: after the last dot a warpgroup holds the turn."""
  q_s, k_s, v_s = ml.smem((128, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype)
  ml.copy(q, q_s)
  acc = ml.zeros((128, 64), jnp.float32)
  m = ml.full((64,), -jnp.inf, jnp.float32)
  for j in ml.range(k.shape[0] // 64, stages=2, warp_specialize=True, pingpong=True):
    ml.copy(k.at[ml.ds(j * 64, 64)], k_s)
    ml.copy(v.at[ml.ds(j * 64, 64)], v_s)
    p = ml.dot(q_s, k_s.T)
    if where == "between":
      m = ml.maximum(m, ml.max(p, axis=0))
    acc = ml.dot(p.astype(q.dtype), v_s, acc)
    if where == "end":
      m = ml.maximum(m, ml.max(acc, axis=0))
  o[...] = acc
  cm[...] = m


def test_a_column_statistic_where_a_pingpong_warpgroup_holds_the_turn_is_an_error_whose_hint_works():
  from locate import expect
  specs = (S((128, 64), F16), S((256, 64), F16), S((256, 64), F16))
  expect(pp_column_max, specs, mg.WarpSpecializeError, "ml.max(acc, axis=0)",
         "this column statistic combines the two warpgroups' parts (each holds its own rows of the tile), so they"
         " must meet here, but here one warpgroup of the pingpong=True loop holds the turn on the tensor cores,"
         " waiting for the other, which waits for that turn",
         hint="take it between the loop's first and last ml.dot (where neither warpgroup holds the turn) or after"
              " the loop, where the warpgroups meet, or drop pingpong=True", where="end")
  r = np.random.default_rng(2)
  q, k, v = (jnp.asarray(r.integers(-2, 3, s.shape), F16) for s in specs)
  qv, kv, vv = (np.asarray(t, np.float64) for t in (q, k, v))
  p = [qv @ kv[j * 64:(j + 1) * 64].T for j in range(4)]
  acc = sum(p[j] @ vv[j * 64:(j + 1) * 64] for j in range(4))
  o, m = pp_column_max(q, k, v, where="between", interpret=True)      # the hint, followed
  np.testing.assert_array_equal(np.asarray(o), acc)
  np.testing.assert_array_equal(np.asarray(m), np.max([x.max(0) for x in p], axis=0))
  jax.export.export(jax.jit(lambda q, k, v: pp_column_max(q, k, v, where="between")), platforms=["cuda"])(*specs)


@mg.mgpu_kernel(out_shape=lambda a, b, *, wg, cols: S((a.shape[0], cols[1] - cols[0]), F32),
                block=lambda a, b, *, wg, **k: 128 * wg)
def whole_tile_slice(a, b, o, *, wg: ml.constexpr, cols: ml.constexpr):
  """A column slice of a dot result whose rows the warpgroups cannot split (192 rows at block=256, 64 at 384):
  every warpgroup holds the tile whole, and the slice was MG204 ('x[:, a:b] slices register tensors in the
  tensor-core layout ... in the wgmma/whole layout'; wg_fuzz --block wide, seeds 58 and 114)."""
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  o[...] = (acc - ml.min(acc))[:, cols[0]:cols[1]]


def _slice_case(rows, seed=7):
  r = np.random.default_rng(seed)
  a = jnp.asarray(r.integers(-3, 4, (rows, 32)), F16)
  b = jnp.asarray(r.integers(-3, 4, (32, 64)), F16)
  acc = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
  return a, b, acc - acc.min()


@pytest.mark.parametrize("wg,rows", [(2, 192), (3, 64), (3, 128)])
@pytest.mark.parametrize("cols", [(16, 48), (0, 8), (56, 64)], ids=str)
def test_a_column_slice_of_a_tile_every_warpgroup_holds_whole(wg, rows, cols):
  a, b, ref = _slice_case(rows)
  got = whole_tile_slice(a, b, wg=wg, cols=cols, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), ref[:, cols[0]:cols[1]])
  jax.export.export(jax.jit(lambda a, b: whole_tile_slice(a, b, wg=wg, cols=cols)), platforms=["cuda"])(
      S(a.shape, F16), S(b.shape, F16))


@pytest.mark.gpu
@pytest.mark.parametrize("wg,rows", [(2, 192), (3, 64), (3, 128)])
@pytest.mark.parametrize("cols", [(16, 48), (0, 8), (56, 64)], ids=str)
def test_a_column_slice_of_a_tile_every_warpgroup_holds_whole_gpu(wg, rows, cols):
  a, b, ref = _slice_case(rows, seed=8)
  got = jax.jit(lambda a, b: whole_tile_slice(a, b, wg=wg, cols=cols))(a, b)
  np.testing.assert_array_equal(np.asarray(got), ref[:, cols[0]:cols[1]])


@mg.mgpu_kernel(out_shape=lambda x, y: (S((x.shape[0],), F32), S((x.shape[1],), F32)), block=256)
def static_mask_inside(x, y, rows, cols):
  """Lanes a static mask keeps off inside the array (`other=1`), met by another input's data and reduced: the
  kernel's own choice of values, well defined; interpret mode's MG953 took them for a run-time length's padding
  (probe 56d) and refused (wg_fuzz: 80 of 4000 seeds)."""
  i = ml.program_id(0)
  a = x.at[ml.ds(i * 256, 256), :].load(mask=(i * 256 + ml.arange(256))[:, None] < x.shape[0], other=0)
  b = y.at[ml.ds(i * 256, 256), :].load(mask=(ml.arange(64) < 9)[None, :] & (ml.arange(256) % 2 == 0)[:, None],
                                        other=1)
  t = a + b
  rows[...] = ml.sum(t, axis=1)
  cols[...] = ml.min(ml.where(b > 0, t, -t), axis=0)


def _static_mask_case(seed):
  r = np.random.default_rng(seed)
  x = r.integers(-4, 5, (256, 64)).astype(np.float32)
  y = r.integers(-4, 5, (256, 64)).astype(np.float32)
  keep = (np.arange(64) < 9)[None, :] & (np.arange(256) % 2 == 0)[:, None]
  b = np.where(keep, y, 1)
  t = x + b
  return jnp.asarray(x), jnp.asarray(y), t.sum(1), np.where(b > 0, t, -t).min(0)


def test_lanes_a_static_mask_keeps_off_inside_the_array_are_the_kernels_choice():
  x, y, rows, cols = _static_mask_case(9)
  got = static_mask_inside(x, y, interpret=True)
  np.testing.assert_array_equal(np.asarray(got[0]), rows)
  np.testing.assert_array_equal(np.asarray(got[1]), cols)


@pytest.mark.gpu
def test_lanes_a_static_mask_keeps_off_inside_the_array_gpu():
  x, y, rows, cols = _static_mask_case(10)
  got = jax.jit(static_mask_inside)(x, y)
  np.testing.assert_array_equal(np.asarray(got[0]), rows)
  np.testing.assert_array_equal(np.asarray(got[1]), cols)
