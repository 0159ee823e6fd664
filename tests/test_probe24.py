"""Probe 24 (helpers writing kernels from the docs: quantization, mixture-of-experts and
data-dependent kernels, scans and sorts, odd shapes and borders, hand-written pipelines, training
steps): valid kernels the compiler failed or rejected, messages naming the wrong thing or hinting
at a second error."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

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
  x = jax.random.normal(jax.random.key(0), (64, 256), F32)
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
def test_ml_full_of_float8_saturates_as_astype_does(dtype, v):
  # ml.full((n,), 1000.0, float8_e4m3fn) was NaN (the constant rounded as jnp.full rounds), where
  # the docs say it converts as a cast does and .astype saturates to 448
  x = jnp.zeros((128,), dtype)
  a, b = fill8(x, v=v, interpret=True)
  np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(b, np.float32))
  top = float(jnp.finfo(dtype).max)
  assert float(a[0]) == float(jnp.float32(min(max(v, -top), top)).astype(dtype))
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
  assert "float16" in e.hint and "saturates beyond 448" in e.hint


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
  e = _raises(lambda: count_tokens(jnp.zeros((0,), jnp.int32), interpret=True))
  assert type(e) is mg.LaunchConfigError and "neither written nor zeroed" in e.message
  assert "grid=lambda ids: (max(1, ml.cdiv(ids.shape[0], 128)),)" in e.hint     # the user's grid, wrapped
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


def test_a_row_statistic_made_a_row_says_so_and_hints_what_works():
  # was "s is used as a row statistic of one tile and as a column vector of another" (there is no other)
  e = expect(row_sums_as_row, [S((128, 32), F32)], mg.LayoutError, "s[None, :]",
             "this makes a (1, 128) row of s, a row statistic (one value per row): the threads of each row"
             " of its tile hold its values, where a row tile spreads them along the columns, and registers"
             " cannot move between the two")
  assert "ref.at[0][...] = s" in e.hint and "tmp = ml.smem((128,), jnp.float32)" in e.hint
  assert "ml.sum(x, axis=1, keepdims=True).T" not in e.hint      # x is the GMEM ref: the reduction's operand
  e = _raises(lambda: row_sums_as_row.check(S((64, 32), F32)))    # (1, 64) tiles: only the 1-D route works
  assert "keepdims" not in e.hint and "tmp" not in e.hint
  x = jax.random.normal(jax.random.key(0), (128, 32), F32)
  np.testing.assert_allclose(row_sums_via_smem(x, interpret=True), x.sum(1)[None, :], rtol=1e-5, atol=1e-5)
  e = expect(row_sums_reshaped, [S((256, 32), F32)], mg.LayoutError, "s.reshape(2, 128)",
             "this (2, 128) tensor is reshaped from or into a row statistic (one value per row) of a tile: its"
             " values live in fixed threads, so only size-1 axes can be added or removed")
  assert "rows1x1" not in e.message + e.hint and "tmp.at[ml.ds(k * 128, 128)][...]" in e.hint


def test_smem_vector_hints_take_the_vectors_dtype():
  e = _raises(lambda: int_outer.check(S((64, 128), jnp.int32), S((64, 128), jnp.int32)))
  assert type(e) is mg.LayoutError and "jnp.int32" in e.hint and "jnp.float32" not in e.hint


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
  e = expect(lax_bitcast, [S((8, 128), jnp.int8)], mg.KernelTypeError, "jax.lax.bitcast_convert_type",
             "bitcast_convert_type cannot take a register tensor inside a kernel")
  assert e.hint.startswith("use ml.bitcast(x, dtype)")
  e = expect(lax_convert, [S((8, 128), jnp.int8)], mg.KernelTypeError, "jax.lax.convert_element_type",
             "convert_element_type cannot take a register tensor inside a kernel")
  assert "x.astype(dtype)" in e.hint
  e = _raises(lambda: uses_rint.check(S((128,), F32)))
  assert type(e) is mg.UnknownNameError and e.hint.startswith("no ml.rint: ml.round(x)")
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
  # the hint said other=0, which counted the 4 padding lanes at index 0
  e = _raises(lambda: count_100.check(S((100,), jnp.int32)))
  assert type(e) is mg.LayoutError and "other=<an index past the indexed array's end>" in e.hint
  ids = jax.random.randint(jax.random.key(0), (100,), 0, 8, jnp.int32)
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
  e = _raises(lambda: sgd_indexed(x, x, 0.1, interpret=True))
  assert type(e) is mg.UnsupportedSyntaxError and e.hint.startswith("lr is a scalar")
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
  e = expect(dbias_row, [S((64, 512), F32)], mg.TmaLimitError, "ml.copy(s, db",
             "TMA copies move at most 256 elements along each dimension; this window is (1, 512)")
  assert "s.at[:, ml.ds(k * 256, 256)]" in e.hint
  g = jax.random.normal(jax.random.key(0), (64, 512), F32)
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


def test_a_16_bit_atomic_max_of_a_statistic_hints_the_smem_route():
  e = _raises(lambda: colamax.check(S((64, 256), BF16)))
  assert type(e) is mg.LayoutError and "buf = ml.smem((256,), jnp.bfloat16); buf[...] = v" in e.hint
  x = jax.random.normal(jax.random.key(0), (64, 256), F32).astype(BF16)
  np.testing.assert_array_equal(colamax_via_smem(x, interpret=True), jnp.abs(x).max(0))
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


def test_triton_offsets_and_masked_smem_windows_get_hints_that_fit():
  e = _raises(lambda: triton_offsets.check(S((200,), F32)))
  assert type(e) is mg.KernelTypeError and "out.at[ml.ds(start, n)].store(..., mask=...)" in e.hint
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
  x = jax.random.normal(jax.random.key(0), (128, 512), F32)
  for start in (0, 1):
    want = x.at[:, :128].set(sum(x[:, k * 128:(k + 1) * 128] for k in range(start, 4)))
    np.testing.assert_allclose(tile_sums_from(x, start=start, interpret=True), want, rtol=1e-5, atol=1e-5)


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
  assert got == float(jnp.asarray(v, BF16).astype(F32)) == 1.0
  assert re.findall(r"arith.constant (\S+) : bf16", scale_by.mlir(S((128,), BF16), v=v)) == ["1.000000e+00"]


@pytest.mark.parametrize("dtype", [jnp.float8_e4m3fn, jnp.float8_e5m2])
@pytest.mark.parametrize("v", [1000.0, 1e6, float("inf"), -float("inf")])
def test_ml_full_of_a_float8_scalar_saturates_as_the_tensor_form_does(dtype, v):
  s, t = fill_both(jnp.zeros((128,), dtype), v=v, interpret=True)
  top = float(jnp.finfo(dtype).max)
  want = float(jnp.float32(min(max(v, -top), top)).astype(dtype).astype(F32))
  assert float(s.astype(F32)) == float(t[0].astype(F32)) == want


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
  x = jax.random.normal(jax.random.key(0), (768, 128), F32)
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
  e = expect(alternating, [S((128,), jnp.int32)], mg.UnsupportedDtypeError, "(-1.0) ** t[...]",
             "(-1.0) ** (t[...]): an exponent held in registers must be floating point, got int32")
  assert e.hint == "(-1) ** k of integers k is a sign: ml.where((t[...]) % 2 == 0, 1.0, -1.0)"
  e = _raises(lambda: column_means.check(S((128, 8), jnp.float16)))     # named v, not the mean's result
  assert type(e) is mg.LayoutError and e.message.startswith("v of shape (128, 8)")


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
  e = _raises(lambda: smem_histogram.check(S((128,), jnp.int32)))
  assert e.hint.startswith("scatter into a GMEM output: ml.atomic_add(out.at[ids], values)")
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
  y = jax.random.normal(jax.random.key(0), (64, 256), F32)
  np.testing.assert_allclose(ws_in_a_branch(y, 0, interpret=True)[:, :128], y[:, :128] + y[:, 128:], rtol=1e-6)
  e = _raises(lambda: named_like_a_sort.check(S((512, 128), F32)))
  assert type(e) is mg.SmemCapacityError and "sort fewer rows" not in e.hint
  a = fill8_huge(jnp.zeros((128,), F32), interpret=True)
  assert float(a[0].astype(F32)) == 448.0


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
  e = _raises(lambda: ten_rows.check(S((10, 32), F32), S((32,), F32)))
  assert type(e) is mg.LayoutError and e.hint.startswith("make the rows a multiple of 4: read 12 rows")
  e = _raises(lambda: top5.check(S((4, 256), F32)))      # no SMEM buffer in the kernel: a register slice
  assert type(e) is mg.LayoutError and e.hint.startswith("slice 8 elements instead") and "allocate" not in e.hint
  x = jax.random.normal(jax.random.key(0), (4, 256), F32)
  np.testing.assert_array_equal(top5_masked(x, interpret=True), jnp.argsort(-x, axis=1)[:, :5])


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
    assert type(e) is mg.SmemCapacityError and e.hint == "use smaller tiles"
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
  x = jax.random.normal(jax.random.key(0), (768,), F32)
  np.testing.assert_allclose(total_into_one(x, interpret=True), [float(x.sum())], rtol=1e-5)   # was MG204
  _export(total_into_one, S((768,), F32))
  y = jax.random.normal(jax.random.key(1), (256,), F32)
  np.testing.assert_array_equal(relu3(y, interpret=True), jnp.maximum(jnp.maximum(y, -y), 0.0))
  e = _raises(lambda: to_float64.check(S((256,), F32)))
  assert type(e) is mg.UnsupportedDtypeError and e.message.startswith("the conversion (.astype / ml.cast)")
  assert e.hint.startswith("use jnp.float32")


@mg.mgpu_kernel(out_shape=lambda x, i: S((128,), x.dtype))
def row_at(x, i, out):
  out[...] = x.at[i[...]][...]


def test_docs_audit_call_columns_cache_counters_and_negative_run_time_indices():
  e = _raises(lambda: 1.0 + jnp.sum(scaled_by_default(jnp.ones((128,), F32), 2.0, interpret=True)))  # col
  line = open(__file__).read().splitlines()[e.lineno - 1]
  assert line[e.col_offset:e.end_col_offset].startswith("scaled_by_default(")      # the call, not the line
  assert e.hint == "pass it by keyword: scaled_by_default(..., f=2.0)"
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
  x = jax.random.normal(jax.random.key(0), (768,), F32)
  np.testing.assert_allclose(total_into_one(x), [float(x.sum())], rtol=1e-4)
  y = jax.random.normal(jax.random.key(1), (4, 256), F32)
  np.testing.assert_array_equal(top5_masked(y), jnp.argsort(-y, axis=1)[:, :5])
  z = jax.random.normal(jax.random.key(2), (256, 128), F32)
  np.testing.assert_allclose(peers_pipelined_synced(jnp.tile(z, (3, 1))),
                             (lambda p: (p + p[:, ::-1]).reshape(768, 128))(jnp.tile(z, (3, 1)).reshape(6, 2, 64, 128)),
                             rtol=1e-6)
  w = jax.random.normal(jax.random.key(3), (64, 256), F32)
  np.testing.assert_allclose(halves_in_place(w), jnp.tile(w[:, :128] + w[:, 128:], (1, 2)), rtol=1e-6)
  c = 1 + 2 ** -8 + 2 ** -40
  assert float(scale_by(jnp.ones((128,), BF16), v=c)[0].astype(F32)) == 1.0
