"""Probe 36a (known leftovers, fixed as classes): strided slices and reshapes of 1-D vectors whose
length is not a multiple of 128, full reductions in a ping-pong loop, descending loops near int32's
limits, hardware facts stated once, and jax.vmap's keyword check without frame names."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- strided slices of short vectors
def _row_max_strided(block, rows, sl):
  count = len(range(*sl.indices(rows)))

  @mg.mgpu_kernel(out_shape=lambda x: S((count,), x.dtype), block=block)
  def kernel(x, out):
    m = ml.max(x[...], axis=1)
    out[...] = m[sl]
  return kernel


_STRIDED = [(192, slice(1, None, 2)), (192, slice(2, None, 3)), (192, slice(16, None, 2)),
            (192, slice(1, 33, 2)), (320, slice(3, None, 5)), (64, slice(1, None, 2)), (136, slice(0, None, 17))]


@pytest.mark.parametrize("block", [128, 256, 384])
@pytest.mark.parametrize("rows,sl", _STRIDED)
def test_a_strided_slice_of_a_row_statistic_of_any_vector_length_is_jnps(block, rows, sl):
  """`m[1::2]` of a 192-element row statistic was MG003 (the slice needed a multiple of 128
  elements): the vector is padded to a length the (P // k, k) reshape holds, and its column taken."""
  kernel = _row_max_strided(block, rows, sl)
  x = np.random.default_rng(rows).standard_normal((rows, 128)).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(kernel(x, interpret=True)), np.max(x, axis=1)[sl])
  _export(kernel, S((rows, 128), F32))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 3,), x.dtype), block=256)
def every_third_bf16(x, out):
  v = x[...] * 2
  out[...] = v[1::3]


def test_a_strided_slice_of_a_short_loaded_vector_keeps_its_dtype():
  x = (np.arange(192) - 96).astype(jnp.bfloat16)
  got = every_third_bf16(x, interpret=True)
  assert got.dtype == jnp.bfloat16
  np.testing.assert_array_equal(np.asarray(got, np.float32), (np.asarray(x, np.float32) * 2)[1::3])
  _export(every_third_bf16, S((192,), jnp.bfloat16))


@mg.mgpu_kernel(out_shape=lambda x: S((10,), x.dtype), block=256)
def ten_of_forty(x, out):
  v = x[...] * 2
  out[...] = v[::4]


@mg.mgpu_kernel(out_shape=lambda x: S((10,), x.dtype), block=256)
def ten_of_forty_fixed(x, out):
  v = x[...] * 2
  w = ml.concatenate([v, ml.zeros((24,), v.dtype)])[0:64:4]
  out.at[ml.ds(0, 16)].store(w, mask=ml.arange(16) < 10)


def test_a_strided_slice_no_vector_holds_computes_and_the_hint_works():
  """`v[::4]` of 40 elements (10) said "strided slices are not supported", with a hint that read 10
  elements again; then the error named the length and the hint padded the vector; since probe 47a the slice is
  computed padded, as the hint pads it."""
  x = np.arange(40, dtype=np.float32)
  np.testing.assert_array_equal(np.asarray(ten_of_forty(x, interpret=True)), (x * 2)[::4])
  x = np.arange(40, dtype=np.float32)
  np.testing.assert_array_equal(np.asarray(ten_of_forty_fixed(x, interpret=True)), (x * 2)[::4])
  _export(ten_of_forty_fixed, S((40,), F32))


# ---------------------------------------------------------------- 2-D reshapes of short vectors
@mg.mgpu_kernel(out_shape=lambda x: S((2, x.shape[0] // 2), x.dtype), block=384)
def stat_as_two_rows(x, out):
  m = ml.max(x[...], axis=1)
  out[...] = m.reshape((2, 96))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2, 2), x.dtype), block=256)
def stat_as_pairs(x, out):
  m = ml.sum(x[...], axis=1)
  y = m.reshape(96, 2)
  out[...] = y


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2, 2), x.dtype), block=256)
def stat_as_many_pairs(x, out):
  m = ml.sum(x[...], axis=1)
  y = m.reshape(x.shape[0] // 2, 2)
  out[...] = y


@mg.mgpu_kernel(out_shape=lambda x: S((2, 96), x.dtype), block=384)
def stat_as_two_rows_sliced(x, out):
  m = ml.max(x[...], axis=1)
  for r in ml.static_range(2):
    out.at[r][...] = m[r * 96:(r + 1) * 96]


@mg.mgpu_kernel(out_shape=lambda x: S((96, 2), x.dtype), block=256)
def stat_as_pairs_padded(x, out):
  m = ml.sum(x[...], axis=1)
  padded = ml.concatenate([m, ml.zeros((64,), m.dtype)]).reshape(128, 2)
  out.at[ml.ds(0, 128)].store(padded, mask=ml.arange(128)[:, None] < 96)


def test_a_reshape_of_a_short_vector_into_two_axes_computes_or_is_an_error_at_the_reshape_whose_hint_works():
  """`m.reshape((2, 96))` of a 192-element row statistic was MG204 at the store, naming `m` with the
  reshape's shape and a hint to work on 128-element tiles; the error moved to the reshape, and since probe 48a
  the padded trace computes rows of 8 or more elements (its rows into a (4, 96) tile, padded). Pairs were MG204;
  since probe 62c those of at most 256 elements are held as a small statistic is (stored an element at a time);
  more stay MG204, whose hint's slices (rows) and padding (any shape) compute the reshape."""
  x = np.random.default_rng(0).standard_normal((192, 128)).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(stat_as_two_rows(x, interpret=True)), x.max(1).reshape(2, 96))
  _export(stat_as_two_rows, S((192, 128), F32))
  np.testing.assert_allclose(np.asarray(stat_as_pairs(x, interpret=True)), x.sum(1).reshape(96, 2), rtol=1e-6)
  _export(stat_as_pairs, S((192, 128), F32))
  e = expect(stat_as_many_pairs, [S((320, 128), F32)], mg.LayoutError, "m.reshape(x.shape[0] // 2, 2)",
             "reshape of m, a vector of 320 elements, into (160, 2): a register tensor of more than one axis needs a"
             " multiple of 128 elements (one per thread of a warpgroup; a 1-D vector only a multiple of 8)")
  assert "column j of it is the vector m[j::2]" in e.hint and ".reshape(" in e.hint, e.hint
  np.testing.assert_array_equal(np.asarray(stat_as_two_rows_sliced(x, interpret=True)), x.max(1).reshape(2, 96))
  np.testing.assert_allclose(np.asarray(stat_as_pairs_padded(x, interpret=True)), x.sum(1).reshape(96, 2),
                             rtol=1e-5, atol=1e-5)
  _export(stat_as_two_rows_sliced, S((192, 128), F32))
  _export(stat_as_pairs_padded, S((192, 128), F32))


@pytest.mark.gpu
def test_gpu_strided_slices_and_padded_reshapes_of_short_vectors_match_interpret_mode():
  """The padded strided slice (a concatenation with zeros, a reshape and a column through SMEM) on
  the GPU, at one to three warpgroups (written in session 36; not yet run on the H200)."""
  x = np.random.default_rng(1).standard_normal((192, 128)).astype(np.float32)
  for block in (128, 256, 384):
    for rows, sl in _STRIDED:
      kernel = _row_max_strided(block, rows, sl)
      xr = np.random.default_rng(rows).standard_normal((rows, 128)).astype(np.float32)
      np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(xr)), np.asarray(kernel(xr, interpret=True)))
  y = (np.arange(192) - 96).astype(jnp.bfloat16)
  np.testing.assert_array_equal(np.asarray(jax.jit(every_third_bf16)(y), np.float32),
                                np.asarray(every_third_bf16(y, interpret=True), np.float32))
  x40 = np.arange(40, dtype=np.float32)
  np.testing.assert_array_equal(np.asarray(jax.jit(ten_of_forty_fixed)(x40)),
                                np.asarray(ten_of_forty_fixed(x40, interpret=True)))
  for k in (stat_as_two_rows_sliced, stat_as_pairs_padded):
    np.testing.assert_allclose(np.asarray(jax.jit(k)(x)), np.asarray(k(x, interpret=True)), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- full reductions and ping-pong loops
F16 = jnp.float16


def _pp_out(q, k, v, *, where):
  return S((q.shape[0], v.shape[1]), F32), S((1,), F32)


@mg.mgpu_kernel(out_shape=_pp_out, block=256)
def pp_reduce(q, k, v, o, tot, *, where):
  q_s, k_s, v_s = ml.smem((128, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype)
  ml.copy(q, q_s)
  acc = ml.zeros((128, 64), jnp.float32)
  s = 0.0
  for j in ml.range(k.shape[0] // 64, stages=2, warp_specialize=True, pingpong=True):
    ml.copy(k.at[ml.ds(j * 64, 64)], k_s)
    ml.copy(v.at[ml.ds(j * 64, 64)], v_s)
    p = ml.exp(ml.dot(q_s, k_s.T) * 0.01)
    if where == "between":
      s = s + ml.sum(p)
    acc = ml.dot(p.astype(q.dtype), v_s, acc)
    if where == "end":
      s = s + ml.sum(acc)
  o[...] = acc
  if where == "after":
    s = ml.max(ml.abs(acc))
  tot[0] = s


@mg.mgpu_kernel(out_shape=lambda q, k, v: (S((q.shape[0], v.shape[1]), F32), S((1,), F32)), block=256)
def pp_reduce_end_fixed(q, k, v, o, tot):
  q_s, k_s, v_s = ml.smem((128, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype)
  ml.copy(q, q_s)
  acc = ml.zeros((128, 64), jnp.float32)
  part = ml.zeros((128,), jnp.float32)
  for j in ml.range(k.shape[0] // 64, stages=2, warp_specialize=True, pingpong=True):
    ml.copy(k.at[ml.ds(j * 64, 64)], k_s)
    ml.copy(v.at[ml.ds(j * 64, 64)], v_s)
    p = ml.exp(ml.dot(q_s, k_s.T) * 0.01)
    acc = ml.dot(p.astype(q.dtype), v_s, acc)
    part = part + ml.sum(acc, axis=1)
  o[...] = acc
  s = ml.sum(part)
  tot[0] = s


_PP_SPECS = (S((128, 64), F16), S((256, 64), F16), S((256, 64), F16))


def _pp_inputs(seed=0):
  rng = np.random.default_rng(seed)
  return [rng.standard_normal(s.shape).astype(np.float16) for s in _PP_SPECS]


def _pp_reference(q, k, v, where):
  q, k, v = (np.asarray(t, np.float32) for t in (q, k, v))
  acc, s = np.zeros((128, 64), np.float32), 0.0
  for j in range(k.shape[0] // 64):
    p = np.exp(q @ k[j * 64:(j + 1) * 64].T * 0.01)
    s += p.sum() if where == "between" else 0.0
    acc = acc + p.astype(np.float16).astype(np.float32) @ v[j * 64:(j + 1) * 64]
    s += acc.sum() if where == "end" else 0.0
  return acc, np.abs(acc).max() if where == "after" else s


@pytest.mark.parametrize("where", ["between", "after"])
def test_a_full_reduction_where_no_warpgroup_holds_the_turn_works_in_a_ping_pong_kernel(where):
  """`ml.sum(...)` to a scalar of a split tile in a kernel with a pingpong=True loop was MG204 anywhere;
  the warpgroups meet without a hang after the loop and between the body's dots, so it combines there."""
  q, k, v = _pp_inputs()
  o, tot = pp_reduce(q, k, v, where=where, interpret=True)
  acc, s = _pp_reference(q, k, v, where)
  np.testing.assert_allclose(np.asarray(o), acc, rtol=2e-2, atol=2e-2)
  np.testing.assert_allclose(float(tot[0]), s, rtol=1e-3)
  _export(pp_reduce, *_PP_SPECS, where=where)


def test_a_full_reduction_where_a_warpgroup_holds_the_turn_is_an_error_whose_hint_works():
  """After the body's last dot warpgroup 0 holds the turn: a combine there would wait for warpgroup 1,
  which waits for that turn (a hang on the GPU; MG204 before, naming the split rows)."""
  expect(pp_reduce, _PP_SPECS, mg.WarpSpecializeError, "ml.sum(acc)",
         "this full reduction combines the two warpgroups' parts, so they must meet here, but here one warpgroup"
         " of the pingpong=True loop holds the turn on the tensor cores, waiting for the other, which waits for"
         " that turn",
         hint="where the loop accumulates it (s = s + ml.sum(acc)), carry parts each warpgroup reduces alone and"
              " reduce them after the loop, where the warpgroups meet: part = ml.zeros((128,), jnp.float32) before"
              " the loop, part = part + ml.sum(acc, axis=1) in it, s = ml.sum(part) after it; else reduce between"
              " the loop's first and last ml.dot (where neither warpgroup holds the turn), or drop pingpong=True",
         where="end")
  q, k, v = _pp_inputs()
  o, tot = pp_reduce_end_fixed(q, k, v, interpret=True)
  np.testing.assert_allclose(float(tot[0]), _pp_reference(q, k, v, "end")[1], rtol=1e-3)
  _export(pp_reduce_end_fixed, *_PP_SPECS)


@pytest.mark.gpu
def test_gpu_full_reductions_in_ping_pong_kernels_match_interpret_mode():
  """The combine (two barriers of the compute warpgroups) after a ping-pong loop and between its dots
  (written in session 36; not yet run on the H200)."""
  q, k, v = _pp_inputs(3)
  for where in ("between", "after"):
    got = jax.jit(lambda *a: pp_reduce(*a, where=where))(q, k, v)
    want = pp_reduce(q, k, v, where=where, interpret=True)
    for g, w in zip(got, want):
      np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-2, atol=1e-2)
  got, want = jax.jit(pp_reduce_end_fixed)(q, k, v), pp_reduce_end_fixed(q, k, v, interpret=True)
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-2, atol=1e-2)


# ---------------------------------------------------------------- descending loops near int32's limits
I32 = jnp.int32


def _counting(step):
  @mg.mgpu_kernel(out_shape=lambda a, b: S((3,), I32))
  def count_down(a: ml.scalar, b: ml.scalar, out):
    trips = 0
    lowest = 2147483647
    last = 0
    for i in range(a, b, step):
      trips = trips + 1
      lowest = ml.minimum(lowest, i)
      last = i
    out[0] = trips
    out[1] = lowest
    out[2] = last
  return count_down


_FAR = [(2 ** 31 - 1, -2 ** 31 + 5, -2 ** 30), (2 ** 31 - 1, -2 ** 31, -2 ** 30 - 1), (1000, -2 ** 31, -2 ** 30),
        (2 ** 31 - 2, -2 ** 30, -2 ** 29), (-2 ** 31 + 10, 2 ** 31 - 1, -3), (100, 5, -2), (5, 100, -2),
        (-2 ** 31 + 7, -2 ** 31, -3)]


@pytest.mark.parametrize("a,b,step", _FAR)
def test_a_descending_loop_with_far_apart_run_time_bounds_counts_as_pythons_range(a, b, step):
  """The trip count was (a - b - 1) // s + 1 in int32: a - b wrapped, so range(2**31 - 1, -2**31 + 5,
  -2**30) ran no trip (of 4) and range(-2**31 + 10, 2**31 - 1, -3) four (of none)."""
  kernel = _counting(step)
  r = range(a, b, step)
  want = [len(r), min(r) if len(r) else 2 ** 31 - 1, r[-1] if len(r) else 0]
  assert [int(v) for v in kernel(a, b, interpret=True)] == want
  kernel.check(a, b)
  _export(kernel, S((), I32), S((), I32))


@mg.mgpu_kernel(out_shape=lambda a, b: S((2,), jnp.uint32))
def count_down_unsigned(a: ml.scalar, b: ml.scalar, out):
  trips = ml.full((), 0, jnp.uint32)
  last = ml.full((), 0, jnp.uint32)
  for i in range(a, b, -3):
    trips = trips + 1
    last = i
  out[0] = trips
  out[1] = last


@pytest.mark.parametrize("a,b", [(10, 2), (2, 10), (2 ** 32 - 1, 2 ** 32 - 8), (5, 2 ** 32 - 1)])
def test_a_descending_loop_with_unsigned_bounds_runs_no_trip_where_start_is_below_stop(a, b):
  """(a - b - 1) in uint32 wrapped to about 2**32 where a <= b: some 1.4e9 trips instead of none."""
  r = range(a, b, -3)
  got = count_down_unsigned(jnp.uint32(a), jnp.uint32(b), interpret=True)
  assert [int(v) for v in got] == [len(r), r[-1] if len(r) else 0]
  _export(count_down_unsigned, S((), jnp.uint32), S((), jnp.uint32))


@pytest.mark.gpu
def test_gpu_descending_loops_with_far_apart_bounds_match_interpret_mode():
  """(Written in session 36; not yet run on the H200.)"""
  for a, b, step in _FAR:
    kernel = _counting(step)
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(jnp.int32(a), jnp.int32(b))),
                                  np.asarray(kernel(a, b, interpret=True)))


# ---------------------------------------------------------------- hardware facts stated once (issue #8)
@mg.mgpu_kernel(out_shape=lambda x: x, block=768)
def six_warpgroups(x, out):
  out[...] = x[...] * 2


def test_the_block_check_reads_the_hardware_module(monkeypatch):
  """kernel.py wrote 128 and 1024 again beside hw.WARPGROUP and hw.MAX_BLOCK: the check now follows them
  (here a GPU whose CTAs held at most 512 threads)."""
  from mgpu_dsl.frontend import hw
  six_warpgroups.check(S((768,), F32))
  monkeypatch.setattr(hw, "MAX_BLOCK", 512)
  with pytest.raises(mg.LaunchConfigError) as e:
    six_warpgroups.check(S((768,), F32))
  assert e.value.message == "block must be a multiple of 128 threads (one warpgroup) between 128 and 512, got 768"
  assert e.value.hint == "Mosaic GPU works in warpgroups of 128 threads: use block=128, 256 or 384"


# ---------------------------------------------------------------- jax.vmap's keywords, found without frame names
@mg.mgpu_kernel(out_shape=lambda x, *, factor: x, grid=lambda x, *, factor: (x.shape[0] // 128,))
def scaled(x, out, *, factor: ml.constexpr):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * factor


def test_vmaps_keyword_check_finds_jaxs_wrapper_by_its_code_not_its_name(monkeypatch):
  """vmap_keywords looked for a frame named vmap_f in a jax module: a JAX that renames its wrapper would
  let JAX's rank error through. The wrapper is now the code jax.vmap alone runs before the signature's
  bind, found by a probe (here: with the name check's assumptions broken, it still finds it)."""
  import inspect
  from mgpu_dsl import vmap_keywords
  codes = vmap_keywords._vmap_codes()
  assert codes and all("/jax/" in c.co_filename.replace("\\", "/") for c in codes)
  # the frame-name rule is not what finds it: the wrapper's code under another name still counts
  monkeypatch.setattr(vmap_keywords, "_CODES", frozenset(c.replace(co_name="mapped_call") for c in codes) | codes)
  x = np.ones((2, 256), np.float32)
  with pytest.raises(mg.SignatureError) as e:
    jax.vmap(scaled)(x, factor=2.0)
  assert "jax.vmap maps every keyword argument along axis 0" in e.value.message
  assert e.value.lineno == inspect.currentframe().f_lineno - 2
  np.testing.assert_array_equal(np.asarray(jax.vmap(lambda x: scaled(x, factor=2.0, interpret=True))(x)), x * 2)
  np.testing.assert_array_equal(np.asarray(jax.jit(lambda x: scaled(x, factor=2.0, interpret=True))(x[0])), x[0] * 2)
