"""Probe 24, second part (see tests/test_probe24.py): constants, clusters, numerics messages,
sparse kernels' mistakes, the review of the session's changes, first-day mistakes, the second
regression hunt, and the GPU test of the session's forms."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from test_probe24 import _export, _raises, halves_in_place

S = jax.ShapeDtypeStruct
F32 = jnp.float32
BF16 = jnp.bfloat16


# ---------------------------------------------------------------- constants
@mg.mgpu_kernel(out_shape=lambda x, *, v: x)
def scale_by(x, out, *, v: ml.constexpr):
  out[...] = x[...] * v


@mg.mgpu_kernel(out_shape=lambda x, *, v: (S((), x.dtype), x))
def fill_both(x, s, t, *, v: ml.constexpr):
  s[...] = ml.full((), v, x.dtype)
  t[...] = ml.full((128,), v, x.dtype)


def test_python_float_constants_round_once_the_same_way_in_interpret_mode_and_on_the_gpu():
  # the GPU's constant was rounded from float64 in one step, interpret mode's through float32 (as
  # jnp's): 1 + 2**-8 + 2**-40 times a bfloat16 was 1.0078 on the GPU and 1.0 in interpret mode
  import re
  v = 1 + 2 ** -8 + 2 ** -40
  got = float(scale_by(jnp.ones((128,), BF16), v=v, interpret=True)[0].astype(F32))
  assert got == float((jnp.ones((), BF16) * v).astype(F32)) == 1.0     # as jnp's weak-typed arithmetic
  assert re.findall(r"arith.constant (\S+) : bf16", scale_by.mlir(S((128,), BF16), v=v)) == ["1.000000e+00"]


@pytest.mark.parametrize("dtype", [jnp.float8_e4m3fn, jnp.float8_e5m2])
@pytest.mark.parametrize("v", [1000.0, 1e6, float("inf"), -float("inf")])
def test_ml_full_of_a_float8_scalar_converts_as_the_tensor_form_does(dtype, v):
  s, t = fill_both(jnp.zeros((128,), dtype), v=v, interpret=True)
  want = np.asarray(jnp.full((), v, dtype).astype(F32))      # (jnp's: NaN or inf past the range, probe 50e)
  np.testing.assert_array_equal(np.asarray(s.astype(F32)), want)
  np.testing.assert_array_equal(np.asarray(t[0].astype(F32)), want)


# ---------------------------------------------------------------- clusters
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,), cluster=(2,))
def peers_pipelined(x, out):
  me = ml.program_id(0)
  x_s = ml.smem((64, 128))
  for t in ml.range(x.shape[0] // 128, stages=2):
    ml.copy(x.at[ml.ds((t * 2 + me) * 64, 64)], x_s)
    ml.cluster_sync()
    v = x_s[...] + ml.cluster_ref(x_s, 1 - me)[...]
    out.at[ml.ds((t * 2 + me) * 64, 64)][...] = v
  ml.cluster_sync()


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,), cluster=(2,))
def peers_pipelined_synced(x, out):
  me = ml.program_id(0)
  x_s = ml.smem((64, 128))
  for t in ml.range(x.shape[0] // 128, stages=2):
    ml.copy(x.at[ml.ds((t * 2 + me) * 64, 64)], x_s)
    ml.cluster_sync()
    v = x_s[...] + ml.cluster_ref(x_s, 1 - me)[...]
    ml.cluster_sync()
    out.at[ml.ds((t * 2 + me) * 64, 64)][...] = v


def test_a_peers_refill_racing_a_read_is_the_users_missing_cluster_sync_not_a_compiler_bug():
  x = rand.normal(rand.key(0), (768, 128), F32)
  e = _raises(lambda: peers_pipelined(x, interpret=True))
  assert type(e) is mg.RaceError and "program (1, 0, 0) reads program (0, 0, 0)'s x_s" in e.message
  assert "bug in mgpu_dsl" not in e.hint and "ml.cluster_sync() after the peers' reads" in e.hint
  got = peers_pipelined_synced(x, interpret=True)
  pairs = x.reshape(6, 2, 64, 128)
  np.testing.assert_allclose(got, (pairs + pairs[:, ::-1]).reshape(768, 128), rtol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,), cluster=(2,))
def ws_reads_peer(x, out):
  me = ml.program_id(0)
  x_s, o_s = ml.smem((64, 128)), ml.smem((64, 128))
  acc = ml.zeros((64, 128), F32)
  for t in ml.range(2, stages=2, warp_specialize=True):
    ml.copy(x.at[ml.ds((t * 2 + me) * 64, 64)], x_s)
    acc = acc + x_s[...]
  o_s[...] = acc
  out.at[ml.ds(me * 64, 64)][...] = o_s[...] + ml.cluster_ref(o_s, 1 - me)[...]


def test_a_peers_smem_in_a_warp_specialised_kernel_is_refused_when_compiling():
  # check() accepted it, interpret mode reported a race whose hint (a cluster_sync) is refused there
  e = _raises(lambda: ws_reads_peer.check(S((256, 128), F32)))
  assert type(e) is mg.WarpSpecializeError and e.message.startswith(
      "ml.cluster_ref in a kernel with a warp-specialised loop")
  assert "multicast" in e.hint


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,), cluster=(2,))
def peer_of_registers(x, out):
  v = x[...]
  out[...] = ml.cluster_ref(v, 1 - ml.program_id(0))[...]


def test_a_peer_of_a_register_tensor_hints_storing_it_first():
  e = _raises(lambda: peer_of_registers.check(S((128, 64), F32)))
  assert type(e) is mg.ClusterRefError and "buf = ml.smem((128, 64), jnp.float32); buf[...] = v" in e.hint


# ---------------------------------------------------------------- numerics messages
@mg.mgpu_kernel(out_shape=lambda x: x)
def add_big(x, out):
  out[...] = x[...] + 2 ** 31


@mg.mgpu_kernel(out_shape=lambda t: S(t.shape, F32))
def alternating(t, out):
  out[...] = (-1.0) ** t[...]


@mg.mgpu_kernel(out_shape=lambda x: S((8,), x.dtype))
def column_means(x, out):
  v = x[...]
  out[...] = ml.mean(v, axis=0)


def test_numerics_messages_keep_the_users_values():
  # uint16 + 2**31 silently added 0 (int16 was an error; jnp raises OverflowError for both)
  for dt in (jnp.uint16, jnp.int16, jnp.uint8):
    e = _raises(lambda: add_big.check(S((128,), dt)))
    assert type(e) is mg.KernelTypeError and "does not fit in int32" in e.message
  add_big.check(S((128,), jnp.uint32))                       # 2**31 fits a uint32
  # (-1.0) ** k of int32 k is jnp's float32 pow since probe 43b (it was MG106 with a ml.where hint)
  k = jnp.arange(-64, 64, dtype=jnp.int32)
  np.testing.assert_array_equal(np.asarray(alternating(k, interpret=True)), np.asarray((-1.0) ** k))
  column_means.check(S((128, 8), jnp.float16))     # was MG204 (now compiled: tiles narrower than a warp take fewer lanes a row, tests/test_narrow_rows.py)


# ---------------------------------------------------------------- sparse kernels' mistakes
def _o_two(table, ids):
  return S((ids.shape[0], table.shape[1]), table.dtype)


@mg.mgpu_kernel(out_shape=_o_two, grid=(1,))
def weighted_rows(table, ids, w, out):
  out[...] = table[ids[...], :] * w[...][:, None]


@mg.mgpu_kernel(out_shape=lambda t, ids: S((128,), t.dtype), grid=(1,))
def gather_by_ref(t, ids, out):
  out[...] = t[ids]


@mg.mgpu_kernel(out_shape=lambda ip, x: S((4,), x.dtype), grid=(4,))
def csr_bounds_as_windows(ip, x, out):
  r = ml.program_id(0)
  acc = ml.zeros((), F32)
  for k in range(ip.at[r], ip.at[r + 1]):
    acc = acc + x[k]
  out[r] = acc


@mg.mgpu_kernel(out_shape=lambda h, ids: S((64, h.shape[1]), h.dtype), grid=(1,))
def gather_wide_rows(h, ids, out):
  out[...] = h[ids[...], :]


@mg.mgpu_kernel(out_shape=lambda ids: S((128,), jnp.int32), grid=(1,))
def smem_histogram(ids, out):
  h = ml.smem((128,), jnp.int32)
  h[...] = ml.zeros((128,), jnp.int32)
  ml.atomic_add(h.at[ids[...]], ml.full((128,), 1, jnp.int32))
  out[...] = h[...]


@mg.mgpu_kernel(out_shape=lambda v, seg: S((8,), F32), grid=lambda v, seg: (v.shape[0],))
def put_by_segment(v, seg, out):
  k = ml.program_id(0)
  out[seg[k]] = v[k]


def test_sparse_kernel_mistakes_get_hints_that_fit():
  t, ids, w = jnp.ones((10, 64), F32), jnp.zeros((32,), jnp.int32), jnp.ones((32,), F32)
  e = _raises(lambda: weighted_rows(t, ids, w, interpret=True))
  assert type(e) is mg.SignatureError and "(lambda table, ids, w: ...)" in e.hint
  e = _raises(lambda: gather_by_ref.check(S((128,), F32), S((128,), jnp.int32)))
  assert "t[ids[...]]" in e.hint
  e = _raises(lambda: csr_bounds_as_windows.check(S((5,), jnp.int32), S((64,), F32)))
  assert e.hint.startswith("read the element as a scalar: ip[r]")
  e = _raises(lambda: gather_wide_rows.check(S((100, 4096), F32), S((64,), jnp.int32)))
  assert type(e) is mg.RegisterCapacityError and e.message.startswith("this 64x4096 float32 tile")
  ids = np.random.default_rng(3).integers(0, 128, 128).astype(np.int32)     # (SMEM scatters count since probe 46k)
  np.testing.assert_array_equal(smem_histogram(ids, interpret=True), np.bincount(ids, minlength=128))
  e = _raises(lambda: put_by_segment(jnp.arange(8, dtype=F32), jnp.array([0, 1, 2, 3, 4, 5, 6, 6], jnp.int32),
                                     interpret=True))
  assert type(e) is mg.RaceError and "ml.atomic_add(out.at[seg[k]], v)" in e.hint


# ---------------------------------------------------------------- review of the session's changes
@mg.mgpu_kernel(out_shape=lambda x: S((256, 2), F32), grid=(2,), cluster=(2,))
def peer_narrow_window(x, out):
  me = ml.program_id(0)
  buf = ml.smem((128, 3))
  buf[...] = x.at[ml.ds(me * 128, 128)][...]
  ml.cluster_sync()
  v = ml.cluster_ref(buf.at[:, 0:2], 1 - me)[...]
  ml.cluster_sync()
  out.at[ml.ds(me * 128, 128)][...] = v


@mg.mgpu_kernel(out_shape=lambda a, b, **k: S((a.shape[0], b.shape[1]), a.dtype),
                grid=lambda a, b, **k: (1, b.shape[1] // 256), block=256)
def mm_persistent_epilogue(a, b, c, *, stages: ml.constexpr = 6):
  j = ml.program_id(1)
  a_s, b_s, c_s = ml.smem((128, 64)), ml.smem((64, 256)), ml.smem((128, 256))
  for i in range(a.shape[0] // 128):
    acc = ml.zeros((128, 256), F32)
    for k in ml.range(a.shape[1] // 64, stages=stages):
      ml.copy(a.at[ml.ds(i * 128, 128), ml.ds(k * 64, 64)], a_s)
      ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 256, 256)], b_s)
      acc = ml.dot(a_s, b_s, acc)
    c_s[...] = acc.astype(c.dtype)
    ml.copy(c_s, c.at[ml.ds(i * 128, 128), ml.ds(j * 256, 256)])


@mg.mgpu_kernel(out_shape=lambda x, f: x, grid=lambda x, f: (x.shape[0] // 16,), input_output_aliases={0: 0})
def ws_in_a_branch(x, f: ml.scalar, out):
  r = ml.program_id(0)
  x_s, o_s = ml.smem((16, 128)), ml.smem((16, 128))
  if f > 0:
    out.at[ml.ds(r * 16, 16), 0:128][...] = ml.zeros((16, 128), F32)
  else:
    acc = ml.zeros((16, 128), F32)
    for t in ml.range(2, stages=2, warp_specialize=True):
      ml.copy(x.at[ml.ds(r * 16, 16), ml.ds(t * 128, 128)], x_s)
      acc = acc + x_s[...]
    o_s[...] = acc
    ml.copy(o_s, out.at[ml.ds(r * 16, 16), 0:128])


@mg.mgpu_kernel(out_shape=lambda x: x)
def named_like_a_sort(x, out):
  sorted_rows = ml.smem((512, 128))
  for k in ml.static_range(2):
    ml.copy(x.at[ml.ds(k * 256, 256)], sorted_rows.at[ml.ds(k * 256, 256)])
  out[...] = sorted_rows[...]


@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.float8_e4m3fn))
def fill8_huge(x, out):
  out[...] = ml.full((128,), 10 ** 400, jnp.float8_e4m3fn)


def test_review_of_the_sessions_changes():
  x = jnp.arange(256 * 3, dtype=F32).reshape(256, 3)
  np.testing.assert_array_equal(peer_narrow_window(x, interpret=True), x[:, :2].reshape(2, 128, 2)[::-1].reshape(256, 2))
  _export(peer_narrow_window, S((256, 3), F32))          # a peer's narrow window: vectors its rows allow
  A, B = S((256, 512), BF16), S((512, 256), BF16)
  e = _raises(lambda: mm_persistent_epilogue.check(A, B, stages=6))      # c_s lives through the outer loop
  assert type(e) is mg.SmemCapacityError and e.hint.startswith("use stages=3 ")
  mm_persistent_epilogue.check(A, B, stages=3)
  y = rand.normal(rand.key(0), (64, 256), F32)
  np.testing.assert_allclose(ws_in_a_branch(y, 0, interpret=True)[:, :128], y[:, :128] + y[:, 128:], rtol=1e-6)
  e = _raises(lambda: named_like_a_sort.check(S((512, 128), F32)))
  assert type(e) is mg.SmemCapacityError and "sort fewer rows" not in e.hint
  a = fill8_huge(jnp.zeros((128,), F32), interpret=True)
  assert np.isnan(float(a[0].astype(F32)))      # jnp's float8_e4m3fn of a value past its range (probe 50e; it saturated to 448)


# ---------------------------------------------------------------- first-day mistakes
@mg.mgpu_kernel(out_shape=lambda x: S((256,), F32), grid=lambda x: (x.shape[0] // 256,))
def zero_then_add(x, out):
  pid = ml.program_id(0)
  if pid == 0:
    out[...] = ml.zeros((256,), F32)
  ml.atomic_add(out, x.at[ml.ds(pid * 256, 256)][...])


@mg.mgpu_kernel(out_shape=lambda s, x: s, grid=lambda s, x: (x.shape[0] // 256,), input_output_aliases={0: 0})
def add_onto_start(s, x, out):
  ml.atomic_add(out, x.at[ml.ds(ml.program_id(0) * 256, 256)][...])


def test_zeroing_an_output_others_add_to_atomically_is_a_race_when_compiling():
  # interpret mode reported it; the export went through with a racy kernel
  e = expect(zero_then_add, [S((768,), F32)], mg.RaceError, "out[...] = ml.zeros",
             "program (0, 0, 0) writes out[0] here while program (1, 0, 0) adds to it with atomics: programs"
             " run in no fixed order, so the sum depends on timing")
  assert "drop the plain write of out" in e.hint
  np.testing.assert_array_equal(add_onto_start(jnp.full((256,), 10.0), jnp.ones(768), interpret=True),
                                np.full(256, 13.0))      # the hint's alias route: starts at the input


@mg.mgpu_kernel(out_shape=lambda x, c: x, grid=(1,))
def ten_rows(x, c, out):
  out[...] = x[...] * c[...][None, :]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 5), jnp.int32), grid=lambda x: (x.shape[0],))
def top5(x, ids):
  b = ml.program_id(0)
  o = ml.argsort(x.at[b][...], descending=True)
  ids.at[b][...] = o[:5]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 5), jnp.int32), grid=lambda x: (x.shape[0],))
def top5_masked(x, ids):
  b = ml.program_id(0)
  o = ml.argsort(x.at[b][...], descending=True)
  ids.at[b, ml.ds(0, 8)].store(o[:8], mask=ml.arange(8) < 5)


def test_narrow_tiles_and_short_slices_get_hints_that_fit():
  # (ten rows was MG204 with a hint to read 12: the padded trace of odd reads (session 35) computes it)
  x, c = rand.normal(rand.key(1), (10, 32), F32), rand.normal(rand.key(2), (32,), F32)
  np.testing.assert_array_equal(np.asarray(ten_rows(x, c, interpret=True)), np.asarray(x) * np.asarray(c)[None, :])
  x = rand.normal(rand.key(0), (4, 256), F32)      # (top5's o[:5] was MG204, whose hint top5_masked follows; since
  np.testing.assert_array_equal(top5_masked(x, interpret=True), jnp.argsort(-x, axis=1)[:, :5])   # probe 47a the
  np.testing.assert_array_equal(top5(x, interpret=True), jnp.argsort(-x, axis=1)[:, :5])   # (5,) part is padded)


# ---------------------------------------------------------------- second regression hunt
@mg.mgpu_kernel(out_shape=lambda x, *, v: (x, S(x.shape, jnp.int8)))
def scale_and_compare(x, out, eq, *, v: ml.constexpr):
  out[...] = x[...] * v
  eq[...] = (x[...] == v).astype(jnp.int8)


@mg.mgpu_kernel(out_shape=lambda a, b, *, stages: S((a.shape[0], b.shape[1]), F32),
                grid=lambda a, b, *, stages: (a.shape[0] // 256, b.shape[1] // 256))
def mm_huge_epilogue(a, b, c, *, stages: ml.constexpr):
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s, c_s = ml.smem((256, 64)), ml.smem((64, 256)), ml.smem((256, 256), F32)
  acc = ml.zeros((256, 256), F32)
  for k in ml.range(a.shape[1] // 64, stages=stages):
    ml.copy(a.at[ml.ds(i * 256, 256), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 256, 256)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c_s[...] = acc
  ml.copy(c_s, c.at[ml.ds(i * 256, 256), ml.ds(j * 256, 256)])


@mg.mgpu_kernel(out_shape=lambda ids: S((8,), jnp.int32), grid=(1,))
def count_augmented(ids, counts):
  counts[ids[...]] += 1


@mg.mgpu_kernel(out_shape=lambda n, x: S((1,), F32), grid=(1,))
def loop_to_a_0d_ref(n, x, out):
  acc = ml.zeros((), F32)
  for k in range(n):
    acc = acc + x[k]
  out[0] = acc


@mg.mgpu_kernel(out_shape=lambda x: S((8,), F32))
def mean_of_float8(x, out):
  out[...] = ml.mean(x[...], axis=1)


def test_second_regression_hunt():
  # float16 constants round through float32, as jnp's weak-typed numbers do (once from float64 they
  # gave 1.00098 where jnp gives 1.0, and x == C disagreed)
  c = 1 + 2 ** -11 + 2 ** -30
  x = jnp.ones((128,), jnp.float16)
  out, eq = scale_and_compare(x, v=c, interpret=True)
  assert float(out[0]) == float(x[0] * c) == 1.0 and int(eq[0]) == int(x[0] == c) == 1
  # an epilogue buffer too big on its own: no stage count helps
  for s in (4, 3):
    e = _raises(lambda: mm_huge_epilogue.check(S((512, 512), BF16), S((512, 512), BF16), stages=s))
    assert type(e) is mg.SmemCapacityError and e.hint.startswith("use smaller tiles"), e.hint   # (stages=3: c_s halved, probe 61b)
  e = _raises(lambda: count_augmented.check(S((128,), jnp.int32)))
  assert e.hint.startswith("accumulate with ml.atomic_add(counts.at[ids[...]], 1)")
  e = _raises(lambda: loop_to_a_0d_ref.check(S((), jnp.int32), S((64,), F32)))
  assert e.hint.startswith("read the element as a scalar: n[...]")
  e = _raises(lambda: mean_of_float8.check(S((8, 128), jnp.float8_e4m3fn)))
  assert type(e) is mg.UnsupportedDtypeError and "astype(jnp.float32)" in e.hint


@mg.mgpu_kernel(out_shape=lambda x: S((1,), F32), grid=lambda x: (x.shape[0] // 256,))
def total_into_one(x, out):
  ml.atomic_add(out, ml.sum(x.at[ml.ds(ml.program_id(0) * 256, 256)][...]))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def relu3(x, out):
  v = x[...]
  out[...] = max(v, -v, 0.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def to_float64(x, out):
  out[...] = x[...].astype(jnp.float64).astype(F32)


def test_first_day_forms_work_or_say_what_to_write():
  x = rand.normal(rand.key(0), (768,), F32)
  np.testing.assert_allclose(total_into_one(x, interpret=True), [float(x.sum())], rtol=1e-5)   # was MG204
  _export(total_into_one, S((768,), F32))
  y = rand.normal(rand.key(1), (256,), F32)
  np.testing.assert_array_equal(relu3(y, interpret=True), jnp.maximum(jnp.maximum(y, -y), 0.0))
  e = _raises(lambda: to_float64.check(S((256,), F32)))
  assert type(e) is mg.UnsupportedDtypeError and e.message.startswith("the conversion (.astype / ml.cast)")
  assert e.hint.startswith("use jnp.float32")


@mg.mgpu_kernel(out_shape=lambda x, i: S((128,), x.dtype))
def row_at(x, i, out):
  out[...] = x.at[i[...]][...]


def test_docs_audit_call_columns_cache_counters_and_negative_run_time_indices():
  # a constexpr by position after the inputs, as Triton takes it (probe 43d; it was refused)
  assert float(1.0 + jnp.sum(scaled_by_default(jnp.ones((128,), F32), 3.0, interpret=True))) == 385.0
  scaled_by_default(jnp.ones((128,), F32), f=3.0, interpret=True)
  scaled_by_default.cache_clear()
  info = scaled_by_default.cache_info()
  assert (info.hits, info.misses, info.currsize) == (0, 0, 0)
  x = jnp.arange(8 * 128, dtype=F32).reshape(8, 128)
  e = _raises(lambda: row_at(x, jnp.int32(-1), interpret=True))
  assert type(e) is mg.OutOfBoundsError and "ml.where(i < 0, i + n, i)" in e.hint
  np.testing.assert_array_equal(row_at(x, jnp.int32(7), interpret=True), x[7])


@mg.mgpu_kernel(out_shape=lambda x: x)
def scaled_by_default(x, out, *, f: ml.constexpr = 2.0):
  out[...] = x[...] * f


@pytest.mark.gpu
def test_gpu_session15_forms():
  x = rand.normal(rand.key(0), (768,), F32)
  np.testing.assert_allclose(total_into_one(x), [float(x.sum())], rtol=1e-4)
  y = rand.normal(rand.key(1), (4, 256), F32)
  np.testing.assert_array_equal(top5_masked(y), jnp.argsort(-y, axis=1)[:, :5])
  z = rand.normal(rand.key(2), (256, 128), F32)
  np.testing.assert_allclose(peers_pipelined_synced(jnp.tile(z, (3, 1))),
                             (lambda p: (p + p[:, ::-1]).reshape(768, 128))(jnp.tile(z, (3, 1)).reshape(6, 2, 64, 128)),
                             rtol=1e-6)
  w = rand.normal(rand.key(3), (64, 256), F32)
  np.testing.assert_allclose(halves_in_place(w), jnp.tile(w[:, :128] + w[:, 128:], (1, 2)), rtol=1e-6)
  c = 1 + 2 ** -8 + 2 ** -40
  assert float(scale_by(jnp.ones((128,), BF16), v=c)[0].astype(F32)) == 1.0


@mg.mgpu_kernel(out_shape=lambda x: S((64, 128), F32))
def outer_of_slices(x, out):
  a = x[...]
  out[...] = a[:64, None] * a[None, :128]


def test_a_slice_and_a_new_axis_in_one_index_work_as_in_numpy():
  # a[:64, None] was refused ("one kind at a time"); it is the slice, then the new axis
  x = rand.normal(rand.key(0), (256,), F32)
  np.testing.assert_allclose(outer_of_slices(x, interpret=True), x[:64, None] * x[None, :128], rtol=1e-6)
  _export(outer_of_slices, S((256,), F32))


# ---------------------------------------------------------------- third regression hunt
@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32), grid=lambda x: (x.shape[0] // 128,))
def every_program_zeroes(x, out):
  i = ml.program_id(0)
  out[...] = ml.zeros((128,), F32)
  ml.atomic_add(out, x.at[ml.ds(i * 128, 128)][...])


@mg.mgpu_kernel(out_shape=lambda ids: S((9,), jnp.int32), grid=lambda ids: (ids.shape[0] // 128,))
def histogram_with_header(ids, out):
  i = ml.program_id(0)
  ml.atomic_add(out.at[ids.at[ml.ds(i * 128, 128)][...]], 1)
  if i == 0:
    out[8] = ids.shape[0]


@mg.mgpu_kernel(out_shape=lambda x: S((256,), F32), grid=(4,))
def sums_and_a_copy(x, out):
  i = ml.program_id(0)
  ml.atomic_add(out.at[ml.ds(0, 128)], x.at[ml.ds(i * 128, 128)][...])
  if i == 0:
    for j in range(128):
      out[128 + j] = x[j]


@mg.mgpu_kernel(out_shape=lambda x, *, dt: S(x.shape, dt))
def cast_scaled(x, out, *, dt: ml.constexpr = F32, k: ml.constexpr = 2.0):
  out[...] = (x[...] * k).astype(dt)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def max_by_key(x, out):
  a = x[...]
  out[...] = max(a, -a, key=abs)


def test_third_regression_hunt():
  # every program zeroing crashed the new check (MG900); a scatter and a plain write elsewhere were
  # a false race; scalar writes in a loop were called reads
  e = _raises(lambda: every_program_zeroes.check(S((512,), F32)))
  assert type(e) is mg.RaceError and "adds to it with atomics" in e.message
  ids = rand.randint(rand.key(0), (512,), 0, 8, jnp.int32)
  np.testing.assert_array_equal(histogram_with_header(ids, interpret=True),
                                jnp.zeros(9, jnp.int32).at[ids].add(1).at[8].set(512))
  x = jnp.arange(512, dtype=F32)
  y = sums_and_a_copy(x, interpret=True)
  np.testing.assert_array_equal(y[128:], x[:128])
  np.testing.assert_array_equal(y[:128], x.reshape(4, 128).sum(0))
  assert cast_scaled(jnp.ones((128,), F32), jnp.float16, interpret=True).dtype == jnp.float16   # dt by position
  e = _raises(lambda: cast_scaled(jnp.ones((128,), F32), 3.0, dt=jnp.float16, interpret=True))
  assert "constexpr dt is given twice" in e.message and e.hint.startswith("drop one: cast_scaled(..., dt=...)")
  e = _raises(lambda: cast_scaled(jnp.ones((128,), F32),
                                  3.0, 4.0, 5.0,
                                  interpret=True))
  first = open(__file__).read().splitlines()[e.lineno - 1]        # a call over three lines: all of it
  assert e.end_lineno == e.lineno + 2 and first[e.col_offset:].startswith("cast_scaled(")
  assert e.hint == "cast_scaled takes no more constexprs: cast_scaled(..., dt=3.0, k=4.0)"
  e = _raises(lambda: max_by_key.check(S((128,), F32)))
  assert "key=" in e.message and "ml.where" in e.hint


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(0,))
def no_programs(x, out):
  out[...] = x[...]


def test_a_static_grid_of_no_programs_is_not_called_a_callable():
  e = _raises(lambda: no_programs.check(S((128,), F32)))
  assert type(e) is mg.LaunchConfigError and e.hint.startswith("a grid has at least one program along each axis")


# ---------------------------------------------------------------- the examples as a library
import os as _os  # noqa: E402
import sys as _sys  # noqa: E402
_sys.path.insert(0, _os.path.join(_os.path.dirname(__file__), "..", "examples"))
import dropout as _DO  # noqa: E402
import layernorm as _LN  # noqa: E402
import matmul_fp8 as _F8  # noqa: E402
import paged_attention as _PA  # noqa: E402
import rmsnorm as _RN  # noqa: E402
import softmax as _SM  # noqa: E402


def test_long_rows_of_any_multiple_of_256_columns_split_into_chunks_that_divide_them():
  # 33 segments of 256 were cut into 8 chunks: a ValueError (softmax) or an uncovered output (norms)
  for d, dt in ((8448, BF16), (16640, F32)):
    x = rand.normal(rand.key(d), (2, d), dt)
    np.testing.assert_allclose(np.asarray(_SM.softmax(x, interpret=True), np.float32),
                               np.asarray(jax.nn.softmax(x.astype(F32), axis=-1)), atol=2e-3, rtol=2e-2)
  x = rand.normal(rand.key(0), (2, 16640), F32)
  w, b = jnp.ones((16640,), F32), jnp.zeros((16640,), F32)
  np.testing.assert_allclose(_LN.layernorm(x, w, b, 1e-5, True), _LN.reference(x, w, b), atol=1e-4, rtol=1e-4)
  x = rand.normal(rand.key(1), (2, 17408), BF16)
  w = jnp.ones((17408,), BF16)
  np.testing.assert_allclose(np.asarray(_RN.rmsnorm(x, w, interpret=True), np.float32),
                             np.asarray(_RN.reference(x, w), np.float32), atol=2e-2, rtol=2e-2)
  assert _SM.most_chunks(33) == 3 and _SM.most_chunks(64) == 8 and _SM.most_chunks(7) == 7


def test_example_wrappers_check_what_their_kernels_cannot_take():
  e = _raises(lambda: _DO.dropout(jnp.zeros((4, 1024), F32), 1, interpret=True))
  assert type(e) is mg.StaticAssertionError and "1-D" in e.message
  with pytest.raises(ValueError, match="one 8-bit dtype"):
    _F8.scaled_matmul(jnp.ones((128, 128), BF16), jnp.ones((128, 128), BF16), interpret=True)
  q, k, v, bt, _ = _PA.make_inputs(jax.random.key(0), 2, 8, 2, 128, 16, 8)
  lengths = jnp.array([500, 10], jnp.int32)            # past the table's 128 tokens: counts as 128
  want = _PA.reference(q, k, v, bt, jnp.array([128, 10], jnp.int32))
  for tc in (False, True):
    got = _PA.paged_attention(q, k, v, bt, lengths, tensor_cores=tc, interpret=True)
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), atol=2e-3, rtol=2e-3)


@mg.mgpu_kernel(out_shape=lambda p, ids: S(ids.shape, p.dtype), grid=(1,))
def take_top2_flat(p, ids, out):
  rows = ml.arange(ids.shape[0])[:, None]
  out[...] = p[rows * 32 + ids[...]]


def test_a_gather_by_broadcast_flat_indices_compiles():
  # it was MG204 (the broadcast index vector asked for the row-wise layout of a (64, 2) tile); since
  # probe 30c `rows * 32` is computed at the tile's shape (frontend/index_grids.py)
  p = jnp.arange(64 * 32, dtype=F32) * 0.5
  ids = jnp.asarray(np.random.default_rng(0).integers(0, 32, (64, 2)), jnp.int32)
  got = take_top2_flat(p, ids, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(p)[np.arange(64)[:, None] * 32 + np.asarray(ids)])
  jax.export.export(jax.jit(take_top2_flat), platforms=["cuda"])(S(p.shape, F32), S(ids.shape, jnp.int32))


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32), grid=lambda x: (max(1, ml.cdiv(x.shape[0], 128)),))
def total_of_any_length(x, s):
  i = ml.program_id(0)
  pos = i * 128 + ml.arange(128)
  ml.atomic_add(s, x.at[ml.ds(i * 128, 128)].load(mask=pos < x.shape[0], other=0.0))


def test_vmap_over_empty_rows_works_as_the_unbatched_call():
  # the batch's views x.at[b, :] of (3, 0) rows were an MG203 "slice of dimension 1 is empty"
  got = jax.vmap(lambda v: total_of_any_length(v, interpret=True))(jnp.zeros((3, 0), F32))
  np.testing.assert_array_equal(got, np.zeros((3, 128)))
  jax.export.export(jax.jit(jax.vmap(total_of_any_length)), platforms=["cuda"])(S((3, 0), F32))


# ---------------------------------------------------------------- fourth regression hunt
@mg.mgpu_kernel(out_shape=lambda x: (S((128, 1), x.dtype), S((1, 128), x.dtype)))
def element_and_new_axis(x, a, b):
  t = x[...]
  a[...] = t[:, 0, None]
  b[...] = t[3, None, :]


@mg.mgpu_kernel(out_shape=lambda x: (x, x), grid=(1,))
def min_max_forms(x, lo, hi):
  a = x[...]
  lo[...] = min(a, 1.0, key=None)
  hi[...] = max([a, -a, 0.5])


def test_fourth_regression_hunt():
  x = rand.normal(rand.key(0), (128, 128), F32)
  a, b = element_and_new_axis(x, interpret=True)
  np.testing.assert_array_equal(a, x[:, 0, None])
  np.testing.assert_array_equal(b, x[3, None, :])
  _export(element_and_new_axis, S((128, 128), F32))
  y = rand.normal(rand.key(1), (128,), F32)
  lo, hi = min_max_forms(y, interpret=True)
  np.testing.assert_array_equal(lo, jnp.minimum(y, 1.0))
  np.testing.assert_array_equal(hi, jnp.maximum(jnp.maximum(y, -y), 0.5))
  # float32 rows of a prime number of 256-column segments: one chunk, w and b out of SMEM slots
  for d in (17152, 32000):
    z = rand.normal(rand.key(d), (2, d), F32)
    w, bias = jnp.ones((d,), F32), jnp.zeros((d,), F32)
    np.testing.assert_allclose(_LN.layernorm(z, w, bias, 1e-5, True), _LN.reference(z, w, bias), atol=1e-4, rtol=1e-4)
