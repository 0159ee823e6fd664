"""Probe 24 (helpers writing kernels from the docs: quantization, mixture-of-experts and
data-dependent kernels, scans and sorts, odd shapes and borders, hand-written pipelines, training
steps): valid kernels the compiler failed or rejected, messages naming the wrong thing or hinting
at a second error."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
BF16 = jnp.bfloat16


def _raises(fn):
  with pytest.raises(mg.KernelError) as info:
    fn()
  return info.value


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- narrow windows of wider rows
@mg.mgpu_kernel(out_shape=lambda x, *, c0, c: S((x.shape[0], c), x.dtype))
def some_columns(x, out, *, c0: ml.constexpr, c: ml.constexpr):
  out[...] = x.at[:, c0:c0 + c][...] * 2


@mg.mgpu_kernel(out_shape=lambda x, *, c0, c: x, input_output_aliases={0: 0})
def scale_columns(x, out, *, c0: ml.constexpr, c: ml.constexpr):
  out.at[:, c0:c0 + c][...] = x.at[:, c0:c0 + c][...] * 2


WINDOWS = [((128, 3), 0, 2), ((256, 3), 0, 1), ((256, 2), 1, 1), ((256, 4), 0, 2), ((512, 12), 1, 4),
           ((256, 5), 0, 4), ((512, 9), 1, 8)]


@pytest.mark.parametrize("shape,c0,c", WINDOWS)
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_narrow_column_windows_move_in_vectors_their_rows_allow(shape, c0, c, dtype):
  # x.at[:, c0:c0 + c] of wider rows: Mosaic GPU's vectors must divide the window's row width,
  # the rows' step and its start; the compiler used the widest vector the tile's size allows
  # (an InternalError at the export, where interpret mode gave the right numbers)
  x = jnp.arange(np.prod(shape), dtype=F32).reshape(shape).astype(dtype)
  np.testing.assert_array_equal(some_columns(x, c0=c0, c=c, interpret=True), x[:, c0:c0 + c] * 2)
  _export(lambda a: some_columns(a, c0=c0, c=c), S(shape, dtype))
  want = x.at[:, c0:c0 + c].multiply(2)
  np.testing.assert_array_equal(scale_columns(x, c0=c0, c=c, interpret=True), want)
  _export(lambda a: scale_columns(a, c0=c0, c=c), S(shape, dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("shape,c0,c", WINDOWS)
def test_gpu_narrow_column_windows(shape, c0, c):
  x = jnp.arange(np.prod(shape), dtype=F32).reshape(shape)
  np.testing.assert_array_equal(some_columns(x, c0=c0, c=c), x[:, c0:c0 + c] * 2)
  np.testing.assert_array_equal(scale_columns(x, c0=c0, c=c), x.at[:, c0:c0 + c].multiply(2))


@mg.mgpu_kernel(out_shape=lambda x, s: S((1024,), x.dtype))
def from_offset(x, s: ml.scalar, out):
  out[...] = x.at[ml.ds(s, 1024)][...] + x.at[ml.ds(1, 1024)][...]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_gpu_register_windows_at_unaligned_starts(dtype):
  x = jnp.arange(2048, dtype=F32).astype(dtype)
  for s in (0, 1, 3):
    np.testing.assert_array_equal(from_offset(x, s), x[s:s + 1024] + x[1:1025])


# ---------------------------------------------------------------- warp-specialised loops and writes after them
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 16,), input_output_aliases={0: 0})
def halves_in_place(x, out):
  r = ml.program_id(0)
  x_s, o_s = ml.smem((16, 128)), ml.smem((16, 256))
  acc = ml.zeros((16, 128), F32)
  for t in ml.range(2, stages=2, warp_specialize=True):
    ml.copy(x.at[ml.ds(r * 16, 16), ml.ds(t * 128, 128)], x_s)
    acc = acc + x_s[...]
  o_s.at[:, 0:128][...] = acc
  o_s.at[:, 128:256][...] = acc
  ml.copy(o_s, out.at[ml.ds(r * 16, 16)])


@mg.mgpu_kernel(out_shape=lambda x: x, input_output_aliases={0: 0})
def rows_in_place_persistent(x, out):
  x_s = ml.smem((16, 128))
  for r in range(1, x.shape[0] // 16):
    acc = ml.zeros((16, 128), F32)
    for t in ml.range(2, stages=2, warp_specialize=True):
      ml.copy(x.at[ml.ds((r - 1) * 16, 16), ml.ds(t * 128, 128)], x_s)
      acc = acc + x_s[...]
    out.at[ml.ds(r * 16, 16), 0:128][...] = acc


def test_a_warp_specialised_loop_may_load_what_the_kernel_writes_after_it():
  # the write after the loop comes after every load landed; it was refused as "outside the loop"
  x = rand.normal(rand.key(0), (64, 256), F32)
  np.testing.assert_allclose(halves_in_place(x, interpret=True), jnp.tile(x[:, :128] + x[:, 128:], (1, 2)),
                             rtol=1e-6)
  _export(halves_in_place, S((64, 256), F32))
  e = expect(rows_in_place_persistent, [S((64, 256), F32)], mg.WarpSpecializeError, "ml.copy(",
             "this warp-specialised loop loads from x, which the kernel writes in an enclosing loop (line"
             f" {rows_in_place_persistent.fn.__code__.co_firstlineno + 8}); its producer warpgroup issues the"
             " loads from the kernel's start, ordered after nothing the other warpgroups write, so it could"
             " read x before the writes land")
  assert "only after the loop" in e.hint and "inputs only" not in e.hint


# ---------------------------------------------------------------- float8 constants
@mg.mgpu_kernel(out_shape=lambda x, *, v: (S((128,), x.dtype), S((128,), x.dtype)))
def fill8(x, a, b, *, v: ml.constexpr):
  a[...] = ml.full((128,), v, x.dtype)
  b[...] = ml.full((128,), v, F32).astype(x.dtype)


@pytest.mark.parametrize("dtype", [jnp.float8_e4m3fn, jnp.float8_e5m2])
@pytest.mark.parametrize("v", [1000.0, -1e6, float("inf"), float("-inf"), 3.0])
def test_ml_full_of_float8_converts_as_astype_does(dtype, v):
  # ml.full and .astype agree; since probe 50e both as jnp's (1000.0 is NaN in float8_e4m3fn, -1e6
  # -inf in float8_e5m2), not saturated to the type's largest value
  x = jnp.zeros((128,), dtype)
  a, b = fill8(x, v=v, interpret=True)
  np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(b, np.float32))
  np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(jnp.full((128,), v, dtype), np.float32))
  _export(lambda x: fill8(x, v=v)[0], S((128,), dtype))


@mg.mgpu_kernel(out_shape=lambda a, bt: S((64, 64), F32), grid=(1,))
def mixed8(a, bt, out):
  a_s, b_s = ml.smem((64, 128)), ml.smem((64, 128))
  ml.copy(a, a_s)
  ml.copy(bt, b_s)
  out[...] = ml.dot(a_s, b_s.T)


def test_an_e4m3_by_e5m2_dot_says_why_and_which_conversion_keeps_the_values():
  e = expect(mixed8, [S((64, 128), jnp.float8_e4m3fn), S((64, 128), jnp.float8_e5m2)], mg.DtypeMismatchError,
             "ml.dot(", "ml.dot of a_s (float8_e4m3fn) and b_s.T (float8_e5m2): both operands must have one"
             " dtype (Mosaic GPU's tensor-core dots take no e4m3 x e5m2 pair)")
  assert "float16" in e.hint and "NaN beyond 464" in e.hint


# ---------------------------------------------------------------- empty inputs
@mg.mgpu_kernel(out_shape=lambda ids: S((8,), jnp.int32), grid=lambda ids: (ml.cdiv(ids.shape[0], 128),))
def count_tokens(ids, counts):
  i = ml.program_id(0)
  pos = i * 128 + ml.arange(128)
  e = ids.at[ml.ds(i * 128, 128)].load(mask=pos < ids.shape[0], other=8)
  ml.atomic_add(counts.at[e], ml.full((128,), 1, jnp.int32))


count_tokens_any = mg.mgpu_kernel(count_tokens.fn, out_shape=lambda ids: S((8,), jnp.int32),
                                  grid=lambda ids: (max(1, ml.cdiv(ids.shape[0], 128)),))


def test_an_empty_grid_hints_one_program_and_that_hint_counts_nothing():
  # no programs: the counts, which only atomics update, are their start value (tests/test_probe35a.py)
  np.testing.assert_array_equal(count_tokens(jnp.zeros((0,), jnp.int32), interpret=True), np.zeros(8))
  np.testing.assert_array_equal(count_tokens_any(jnp.zeros((0,), jnp.int32), interpret=True), np.zeros(8))
  np.testing.assert_array_equal(count_tokens_any(jnp.array([1, 2, 2], jnp.int32), interpret=True),
                                [0, 1, 2, 0, 0, 0, 0, 0])
  _export(count_tokens_any, S((0,), jnp.int32))


@pytest.mark.gpu
def test_gpu_one_program_over_an_empty_input_counts_nothing():
  np.testing.assert_array_equal(count_tokens_any(jnp.zeros((0,), jnp.int32)), np.zeros(8))
  np.testing.assert_array_equal(count_tokens_any(jnp.array([1, 2, 2], jnp.int32)), [0, 1, 2, 0, 0, 0, 0, 0])


# ---------------------------------------------------------------- row statistics in other shapes
@mg.mgpu_kernel(out_shape=lambda x: S((1, x.shape[0]), x.dtype))
def row_sums_as_row(x, out):
  s = ml.sum(x[...], axis=1)
  out[...] = s[None, :]


@mg.mgpu_kernel(out_shape=lambda x: S((1, x.shape[0]), x.dtype))
def row_sums_via_smem(x, out):
  s = ml.sum(x[...], axis=1)
  tmp = ml.smem((128,), jnp.float32)
  tmp[...] = s
  out[...] = tmp[...][None, :]


@mg.mgpu_kernel(out_shape=lambda x: S((2, 128), x.dtype))
def row_sums_reshaped(x, out):
  s = ml.sum(x[...], axis=1)
  out[...] = s.reshape(2, 128)


@mg.mgpu_kernel(out_shape=lambda x, y: S((64, 64), jnp.int32))
def int_outer(x, y, out):
  a = ml.sum(x[...], axis=1)
  b = ml.sum(y[...], axis=1)
  out[...] = a[:, None] * b[None, :]


def test_a_row_statistic_made_a_row_computes():
  # was "s is used as a row statistic of one tile and as a column vector of another" (there is no other), then
  # (until probe 45e) "this makes a (1, 128) row of s ...": the relayout pass now sends s[None, :] through SMEM,
  # as the hint's tmp did
  for n in (128, 64):
    x = np.asarray(rand.normal(rand.key(0), (n, 32), F32))
    np.testing.assert_allclose(row_sums_as_row(x, interpret=True), x.sum(1)[None, :], rtol=1e-5, atol=1e-5)
    row_sums_as_row.check(S((n, 32), F32))
  x = rand.normal(rand.key(0), (128, 32), F32)
  np.testing.assert_allclose(row_sums_via_smem(x, interpret=True), x.sum(1)[None, :], rtol=1e-5, atol=1e-5)
  # a reshape of the row statistic (once MG204) moves its values through SMEM since probe 30a
  x = rand.normal(rand.key(0), (256, 32), F32)
  np.testing.assert_allclose(row_sums_reshaped(x, interpret=True), np.asarray(x).sum(1).reshape(2, 128),
                             rtol=1e-5, atol=1e-5)
  row_sums_reshaped.check(S((256, 32), F32))


def test_smem_vector_hints_take_the_vectors_dtype():
  # the outer product of two row statistics now reads b's copy through SMEM (probe 33c; its hint took
  # the vectors' dtype, int32, before)
  x = jnp.arange(64 * 128, dtype=jnp.int32).reshape(64, 128) % 7
  y = (jnp.arange(64 * 128, dtype=jnp.int32).reshape(64, 128) * 3) % 5
  got = int_outer(x, y, interpret=True)
  np.testing.assert_array_equal(got, x.sum(1)[:, None] * y.sum(1)[None, :])


# ---------------------------------------------------------------- names users reach for
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.uint8), grid=(1,))
def lax_bitcast(x, out):
  out[...] = jax.lax.bitcast_convert_type(x[...], jnp.uint8)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.uint8), grid=(1,))
def lax_convert(x, out):
  out[...] = jax.lax.convert_element_type(x[...], jnp.uint8)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def uses_rint(x, out):
  out[...] = ml.rint(x[...])


@mg.mgpu_kernel(out_shape=lambda ids: S((8,), jnp.int32), grid=(1,))
def uses_bincount(ids, counts):
  counts[...] = ml.bincount(ids[...])


def test_jax_conversions_and_missing_names_point_at_what_mgpu_dsl_writes():
  # (the lax conversions compute since probe 47b, as ml.bitcast and .astype: lax's numbers)
  x = jnp.asarray(np.arange(-512, 512).reshape(8, 128) % 256 - 128, jnp.int8)
  np.testing.assert_array_equal(lax_bitcast(x, interpret=True), jax.lax.bitcast_convert_type(x, jnp.uint8))
  np.testing.assert_array_equal(lax_convert(x, interpret=True), jax.lax.convert_element_type(x, jnp.uint8))
  e = _raises(lambda: uses_rint.check(S((128,), F32)))
  assert type(e) is mg.UnknownNameError and e.hint.startswith("no ml.rint: ml.round(x[...])")
  e = _raises(lambda: uses_bincount.check(S((128,), jnp.int32)))
  assert "ml.atomic_add(counts.at[ids]" in e.hint


@mg.mgpu_kernel(out_shape=lambda ids: S((8,), jnp.int32), grid=(1,))
def count_100(ids, counts):
  ml.atomic_add(counts.at[ids[...]], ml.full(ids.shape, 1, jnp.int32))


@mg.mgpu_kernel(out_shape=lambda ids: S((8,), jnp.int32), grid=(1,))
def count_100_padded(ids, counts):
  e = ids.at[ml.ds(0, 104)].load(mask=ml.arange(104) < 100, other=8)
  ml.atomic_add(counts.at[e], ml.full((104,), 1, jnp.int32))


def test_padding_an_index_vector_hints_an_index_the_scatter_drops():
  # the hint said other=0, which counted the 4 padding lanes at index 0; since probe 48e the 100 ids read whole
  # scatter padded themselves, the padding lanes masked off (tests/test_probe48e.py), and the hint's form still works
  ids = rand.randint(rand.key(0), (100,), 0, 8, jnp.int32)
  np.testing.assert_array_equal(count_100(ids, interpret=True), jnp.zeros(8, jnp.int32).at[ids].add(1))
  np.testing.assert_array_equal(count_100_padded(ids, interpret=True), jnp.zeros(8, jnp.int32).at[ids].add(1))


# ---------------------------------------------------------------- run-time scalars
@mg.mgpu_kernel(out_shape=lambda p, g, lr: p, grid=(1,))
def sgd_indexed(p, g, lr: ml.scalar, out):
  out[...] = p[...] - lr[...] * g[...]


@mg.mgpu_kernel(out_shape=lambda p: p, grid=lambda p: (p.shape[0] // 1024,))
def sgd_lambdas_forgot_lr(p, lr: ml.scalar, out):
  w = ml.ds(ml.program_id(0) * 1024, 1024)
  out.at[w][...] = p.at[w][...] * lr


def test_run_time_scalar_mistakes_name_the_scalar():
  x = jnp.ones((1024,), F32)
  # lr[...] of a run-time scalar is lr, as jnp's a[...] of a 0-d array (probe 45e; was MG001, "lr is a scalar")
  np.testing.assert_allclose(np.asarray(sgd_indexed(x, x, 0.1, interpret=True)), np.full(1024, 0.9, np.float32))
  e = _raises(lambda: sgd_lambdas_forgot_lr(jnp.ones((4096,), F32), 0.5, interpret=True))
  assert type(e) is mg.SignatureError and e.message == (
      "sgd_lambdas_forgot_lr's out_shape and grid make it take 1 input (p), but its inputs include lr (an"
      " ml.scalar parameter, so an input), and it was called with 2 inputs")
  assert "(lambda p, lr: ...)" in e.hint
  from mgpu_dsl import calling
  assert calling.describe((1, 2)) == "a tuple of 2 items"
  import collections
  Adam = collections.namedtuple("AdamState", "mu nu")
  assert calling.describe(Adam(1, 2)) == "an AdamState of 2 items"


# ---------------------------------------------------------------- loops
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def ws_in_static_range(x, out):
  x_s = ml.smem((32, 128))
  for r in ml.static_range(x.shape[0] // 32):
    acc = ml.zeros((32, 128), F32)
    for k in ml.range(x.shape[1] // 128, stages=2, warp_specialize=True):
      ml.copy(x.at[ml.ds(r * 32, 32), ml.ds(k * 128, 128)], x_s)
      acc = acc + x_s[...]
    out.at[ml.ds(r * 32, 32)][...] = ml.sum(acc, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((16, 128), F32))
def alloc_in_pipelined_loop(x, out):
  acc = ml.zeros((16, 128), F32)
  for t in ml.range(16, stages=2):
    x_s = ml.smem((16, 128))
    ml.copy(x.at[ml.ds(t * 16, 16)], x_s)
    acc = acc + x_s[...]
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: S((16, 128), F32))
def static_range_stages(x, out):
  x_s = ml.smem((16, 128))
  acc = ml.zeros((16, 128), F32)
  for t in ml.static_range(16, stages=2):
    ml.copy(x.at[ml.ds(t * 16, 16)], x_s)
    acc = acc + x_s[...]
  out[...] = acc


def test_loop_mistakes_name_what_the_user_wrote():
  e = expect(ws_in_static_range, [S((64, 256), F32)], mg.WarpSpecializeError, "for k in ml.range",
             "a kernel may have one warp-specialised loop, and this one is traced 2 times: an ml.static_range"
             " loop (or a Python loop over a static sequence) around it copies it once a trip, as does an"
             " @ml.inline helper holding it called more than once")
  assert "for r in range(n)" in e.hint
  expect(alloc_in_pipelined_loop, [S((256, 128), F32)], mg.PipelineError, "ml.copy(",
         "this pipelined loop's TMA load fills x_s, which is allocated inside the loop: a pipelined loop keeps 2"
         " copies (stages) of each buffer it loads, so they must live across trips")
  e = expect(static_range_stages, [S((256, 128), F32)], mg.UnsupportedSyntaxError, "ml.static_range(16",
             "keywords in ml.static_range(...) is not supported in a kernel")
  assert e.hint.startswith("only ml.range takes stages=")


@mg.mgpu_kernel(out_shape=lambda a, b, **k: S((a.shape[0], b.shape[1]), a.dtype),
                grid=lambda a, b, **k: (a.shape[0] // 128, b.shape[1] // 256), block=256)
def mm_epilogue_tile(a, b, c, *, stages: ml.constexpr = 6):
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s, c_s = ml.smem((128, 64)), ml.smem((64, 256)), ml.smem((128, 256))
  acc = ml.zeros((128, 256), F32)
  for k in ml.range(a.shape[1] // 64, stages=stages):
    ml.copy(a.at[ml.ds(i * 128, 128), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 256, 256)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c_s[...] = acc.astype(c.dtype)
  ml.copy(c_s, c.at[ml.ds(i * 128, 128), ml.ds(j * 256, 256)])


def test_the_stages_hint_lets_the_epilogue_tile_share_the_stages_bytes():
  # the hint counted the epilogue's c_s beside the stages (stages=3) where the SMEM plan overlaps
  # them (stages=4 builds)
  A, B = S((128, 512), BF16), S((512, 256), BF16)
  e = _raises(lambda: mm_epilogue_tile.check(A, B, stages=6))
  assert type(e) is mg.SmemCapacityError and e.hint.startswith("use stages=4 ")
  mm_epilogue_tile.check(A, B, stages=4)


# ---------------------------------------------------------------- TMA boxes
@mg.mgpu_kernel(out_shape=lambda g: S((1, 512), F32), grid=lambda g: (g.shape[0] // 8,))
def dbias_row(g, db):
  s = ml.smem((1, 512), F32)
  s[...] = ml.sum(g.at[ml.ds(ml.program_id(0) * 8, 8), :][...], axis=0, keepdims=True)
  ml.copy(s, db, reduce="add")


@mg.mgpu_kernel(out_shape=lambda g: S((1, 512), F32), grid=lambda g: (g.shape[0] // 8,))
def dbias_row_halves(g, db):
  s = ml.smem((1, 512), F32)
  s[...] = ml.sum(g.at[ml.ds(ml.program_id(0) * 8, 8), :][...], axis=0, keepdims=True)
  for k in ml.static_range(2):
    ml.copy(s.at[:, ml.ds(k * 256, 256)], db.at[:, ml.ds(k * 256, 256)], reduce="add")


def test_a_wide_box_of_one_row_hints_column_windows_that_work():
  """The (1, 512) TMA reduction was MG401 (hinted as column windows, dbias_row_halves); since probe 56c it is one
  box of (1, 2, 256): both compute."""
  g = rand.normal(rand.key(0), (64, 512), F32)
  np.testing.assert_allclose(dbias_row(g, interpret=True), g.sum(0, keepdims=True), rtol=1e-5, atol=1e-4)
  _export(dbias_row, S((64, 512), F32))
  np.testing.assert_allclose(dbias_row_halves(g, interpret=True), g.sum(0, keepdims=True), rtol=1e-5, atol=1e-4)
  _export(dbias_row_halves, S((64, 512), F32))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), BF16), grid=lambda x: (x.shape[0] // 16,))
def colamax(x, out):
  v = ml.abs(x.at[ml.ds(ml.program_id(0) * 16, 16), :][...])
  ml.atomic_max(out, ml.max(v, axis=0))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), BF16), grid=lambda x: (x.shape[0] // 16,))
def colamax_via_smem(x, out):
  buf = ml.smem((256,), BF16)
  buf[...] = ml.max(ml.abs(x.at[ml.ds(ml.program_id(0) * 16, 16), :][...]), axis=0)
  ml.atomic_max(out, buf[...])


def test_a_16_bit_atomic_max_of_a_statistic_goes_through_smem():
  # (colamax was MG204, whose hint colamax_via_smem follows; since probe 39c the compiler takes that route)
  x = rand.normal(rand.key(0), (64, 256), BF16)
  np.testing.assert_array_equal(colamax(x, interpret=True), jnp.abs(x).max(0))
  np.testing.assert_array_equal(colamax_via_smem(x, interpret=True), jnp.abs(x).max(0))
  _export(colamax, S((64, 256), BF16))
  _export(colamax_via_smem, S((64, 256), BF16))


@mg.mgpu_kernel(out_shape=lambda x: x)
def big_scan(x, out):
  out[...] = ml.cumsum(x[...], axis=1)


def test_a_scan_too_big_for_smem_hints_fewer_rows_not_reading_pieces():
  e = _raises(lambda: big_scan.check(S((128, 512), F32)))
  assert type(e) is mg.SmemCapacityError and e.hint.startswith("scan fewer rows per program")
  assert "ref.at[rows" not in e.hint


BLOCK_OF_ZERO = 0


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], BLOCK_OF_ZERO),))
def grid_divides_by_zero(x, out):
  out[...] = x[...]


def test_a_kernel_error_inside_a_grid_callable_is_said_once_at_the_callable():
  e = _raises(lambda: grid_divides_by_zero.check(S((128,), F32)))
  assert type(e) is mg.SignatureError and e.message == (
      "the grid callable failed for 1 input(s) float32[128]: ml.cdiv needs a positive divisor, got 0")
  assert "<unknown>" not in str(e) and str(e).count("[MG") == 1


# ---------------------------------------------------------------- scatters
@mg.mgpu_kernel(out_shape=lambda expert: S((8,), jnp.int32), grid=(1,))
def count_float_ids(expert, counts):
  e = expert[...]
  ml.atomic_add(counts.at[e], ml.full((128,), 1, jnp.int32))


@mg.mgpu_kernel(out_shape=lambda ids: S((8,), jnp.int32), grid=(1,))
def count_jnp_style(ids, counts):
  counts.at[ids[...]] += 1


def test_scatter_mistakes_say_scatter_and_hint_atomic_add():
  e = expect(count_float_ids, [S((128,), F32)], mg.KernelTypeError, "ml.atomic_add(",
             "a scatter's indices are integers, got e (float32) for dimension 0 of counts")
  assert e.hint == "convert them: e.astype(jnp.int32)"
  e = expect(count_jnp_style, [S((128,), jnp.int32)], mg.UnsupportedSyntaxError, "counts.at[ids[...]]",
             "assigning to ref.at[...] is not supported in a kernel")
  assert e.hint.startswith("accumulate with ml.atomic_add(counts.at[ids[...]], 1)")


# ---------------------------------------------------------------- Triton habits and SMEM windows
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def triton_offsets(x, out):
  offs = ml.program_id(0) * 128 + ml.arange(128)
  m = offs < x.shape[0]
  out.at[offs].store(x[...], mask=m)


@mg.mgpu_kernel(out_shape=lambda x: x)
def smem_window_past_end(x, out):
  buf = ml.smem((256,), F32)
  ml.copy(x.at[ml.ds(0, 256)], buf)
  out.at[ml.ds(0, 128)][...] = buf.at[ml.ds(200, 128)].load(mask=200 + ml.arange(128) < 256, other=0.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def triton_offsets_both(x, out):
  offs = ml.program_id(0) * 128 + ml.arange(128)
  m = offs < x.shape[0]
  out.at[offs].store(x.at[offs].load(mask=m, other=0.0), mask=m)


def test_triton_offsets_and_masked_smem_windows_get_hints_that_fit():
  # offsets on the output only: the whole input meets the output's 128-element window
  e = _raises(lambda: triton_offsets.check(S((200,), F32)))
  assert type(e) is mg.ShapeMismatchError and e.lineno == triton_offsets.fn.__code__.co_firstlineno + 4
  assert "x[...] reads all of x: read the same window of it, x.at[offs][...]" in e.hint   # the user's own words
  x = jnp.arange(200, dtype=F32)
  np.testing.assert_array_equal(triton_offsets_both(x, interpret=True), x)
  e = expect(smem_window_past_end, [S((256,), F32)], mg.IndexOutOfBoundsError, "buf.at[ml.ds(200, 128)]",
             "ml.ds(200, 128) is out of bounds for dimension 0 of buf (size 256)")
  assert "allocate buf with room for the whole window (328 elements" in e.hint


@mg.mgpu_kernel(out_shape=lambda x, *, start: x, grid=lambda x, *, start: (x.shape[0] // 64,),
                input_output_aliases={0: 0})
def tile_sums_from(x, out, *, start: ml.constexpr):
  i = ml.program_id(0)
  x_s = ml.smem((64, 128), x.dtype)
  acc = ml.zeros((64, 128), F32)
  for k in ml.range(start, x.shape[1] // 128, stages=2, warp_specialize=True):
    ml.copy(x.at[ml.ds(i * 64, 64), ml.ds(k * 128, 128)], x_s)
    acc = acc + x_s[...]
  out.at[ml.ds(i * 64, 64), ml.ds(0, 128)][...] = acc


def test_a_warp_specialised_loop_from_a_later_start_may_be_followed_by_writes():
  # a loop not counting from 0 by 1 is normalised into a copy; the check looked for the copy in the
  # kernel's body, never found where the loop ends, and called the write after it "before it"
  x = rand.normal(rand.key(0), (128, 512), F32)
  for start in (0, 1):
    want = x.at[:, :128].set(sum(x[:, k * 128:(k + 1) * 128] for k in range(start, 4)))
    np.testing.assert_allclose(tile_sums_from(x, start=start, interpret=True), want, rtol=1e-5, atol=1e-5)
