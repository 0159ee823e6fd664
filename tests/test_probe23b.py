"""Probe 23, second part (helpers porting attention, Triton and Pallas kernels and control flow from
the docs; a regression hunt and a review of the session's own changes). The first part,
tests/test_probe23.py, holds the LLM, sequence, matmul, vision, statistics and JAX-citizen probes."""
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


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def plus_one(x, out):
  out[...] = x[...] + 1.0


@mg.autotune(configs=[dict(bs=256), dict(bs=128)])
@mg.mgpu_kernel(out_shape=lambda x, *, bs: x, grid=lambda x, *, bs: (x.shape[0] // bs,))
def tuned_inc(x, out, *, bs: ml.constexpr = 128):
  i = ml.program_id(0)
  out.at[ml.ds(i * bs, bs)][...] = x.at[ml.ds(i * bs, bs)][...] + 1.0


# ---------------------------------------------------------------- attention written by users
@mg.mgpu_kernel(out_shape=lambda q, k: S((q.shape[0], k.shape[0]), F32), grid=lambda q, k, **_: (ml.cdiv(q.shape[0], 64),))
def q_times_k_t(q, k, s_out, *, split: ml.constexpr = False):
  i = ml.program_id(0)
  k_s = ml.smem((128, 128))
  ml.copy(k, k_s)
  if not split:
    q_s = ml.smem((64, 128))
    ml.copy(q.at[ml.ds(i * 64, 64)], q_s)
    s = ml.dot(q_s, k_s.T)
  else:                      # the hint, followed
    q_s0, q_s1 = ml.smem((64, 64)), ml.smem((64, 64))
    ml.copy(q.at[ml.ds(i * 64, 64), ml.ds(0, 64)], q_s0)
    ml.copy(q.at[ml.ds(i * 64, 64), ml.ds(64, 64)], q_s1)
    s = ml.dot(q_s0, k_s.at[:, ml.ds(0, 64)].T)
    s = ml.dot(q_s1, k_s.at[:, ml.ds(64, 64)].T, s)
  s_out.at[ml.ds(i * 64, 64)].store(s, mask=(i * 64 + ml.arange(64))[:, None] < q.shape[0])


def test_the_hint_splitting_q_keeps_k_transposed():
  # (probe 46c: q's 100 rows are copied a row of tiles a TMA, so the kernel computes as written; the split
  # the hint gave still does)
  q_times_k_t.check(S((100, 128), jnp.float16), S((128, 128), jnp.float16))
  q = rand.normal(rand.key(0), (100, 128), jnp.float16)
  k = rand.normal(rand.key(1), (128, 128), jnp.float16)
  want = q.astype(F32) @ k.astype(F32).T
  np.testing.assert_allclose(q_times_k_t(q, k, interpret=True), want, rtol=2e-2, atol=2e-2)
  np.testing.assert_allclose(q_times_k_t(q, k, split=True, interpret=True), want, rtol=2e-2, atol=2e-2)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(3,))
def halo_from_the_previous_batch(x, out):
  b = ml.program_id(0)
  buf = ml.smem(x.shape[1:], x.dtype)
  ml.copy(x.at[b - 1], buf)                          # b = 0: index -1, TMA reads zeros
  out.at[b][...] = x.at[b][...] + buf[...]


def test_an_integer_tma_index_past_its_dimension_reads_zeros_as_on_the_gpu():
  # (a check rejecting it was tried and withdrawn: borders and persistent loops rely on TMA's zeros)
  x = rand.normal(rand.key(6), (3, 64, 128), F32)
  want = x + jnp.concatenate([jnp.zeros_like(x[:1]), x[:-1]])
  np.testing.assert_array_equal(halo_from_the_previous_batch(x, interpret=True), want)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def persistent_past_the_end(x, out):
  buf = ml.smem((64, 128), x.dtype)
  for k in range(ml.cdiv(x.shape[0] // 64, 2)):      # the same trip count in every program
    t = ml.program_id(0) + k * 2
    ml.copy(x.at[ml.ds(t * 64, 64)], buf)            # past the end on the last trip: zeros
    buf[...] = buf[...] * 2.0
    ml.copy(buf, out.at[ml.ds(t * 64, 64)])          # dropped past the end


def test_a_window_wholly_past_the_end_still_reads_zeros():
  x = rand.normal(rand.key(4), (192, 128), F32)
  np.testing.assert_array_equal(persistent_past_the_end(x, interpret=True), x * 2)


@mg.mgpu_kernel(out_shape=lambda x: x)
def stage_576(x, o):
  x_s = ml.smem((64, 576))
  ml.copy(x, x_s)
  ml.copy(x_s, o)


def test_a_too_wide_row_hints_a_split_that_divides_it():
  """The (64, 576) copy was MG401 with a hint to split it (x.reshape(..., 3, 192)); since probe 56c the compiler
  copies it as that box, (64, 3, 192), both ways."""
  x = (np.arange(64 * 576) % 251).astype(np.float32).reshape(64, 576).astype(BF16)
  np.testing.assert_array_equal(np.asarray(stage_576(x, interpret=True), np.float32), np.asarray(x, np.float32))
  jax.export.export(jax.jit(stage_576), platforms=["cuda"])(S((64, 576), BF16))


@mg.mgpu_kernel(out_shape=lambda q, k, v: S((64, 64), F32))
def f32_attention_tile(q, k, v, o):
  q_s, k_s, v_s = ml.smem((64, 64)), ml.smem((64, 64)), ml.smem((64, 64))
  ml.copy(q, q_s)
  ml.copy(k, k_s)
  ml.copy(v, v_s)
  s = ml.dot(q_s, k_s.T)
  p = ml.exp(s - ml.max(s, axis=1)[:, None])
  o[...] = ml.dot(p, v_s) / ml.sum(p, axis=1)[:, None]


def test_a_float32_register_operand_takes_the_tf32_path():
  """It was MG106, whose hint staged p and transposed v_s once (probe 39b); since probe 51f the compiler does."""
  rng = np.random.default_rng(23)
  q, k, v = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(3))
  s = (q @ k.T).astype(np.float64)
  p = np.exp(s - s.max(axis=1, keepdims=True))
  want = p @ v / p.sum(axis=1, keepdims=True)
  np.testing.assert_allclose(f32_attention_tile(q, k, v, interpret=True), want, rtol=2e-2, atol=2e-2)


@mg.mgpu_kernel(out_shape=lambda q, k, v: S((64, 64), F32))
def missing_row_broadcast(q, k, v, o):
  q_s, k_s, v_s = ml.smem((64, 64)), ml.smem((64, 64)), ml.smem((64, 64))
  ml.copy(q, q_s)
  ml.copy(k, k_s)
  ml.copy(v, v_s)
  m = ml.full((64,), -1e30, F32)
  s = ml.dot(q_s, k_s.T)
  m_new = ml.maximum(m, ml.max(s, axis=1))
  p = ml.exp(s - m_new)
  o[...] = ml.dot(p.astype(jnp.float16), v_s) / ml.sum(p, axis=1)[:, None]


def test_a_missing_row_broadcast_names_the_vector_and_hints_the_none_axis():
  e = expect(missing_row_broadcast, [S((64, 64), jnp.float16)] * 3, mg.LayoutError, "s - m_new",
             "m_new is used as a row statistic (one value per row) of one tile and as a column vector (one value"
             " per column) of another: a register vector lives in one of the two layouts")
  assert e.hint.startswith("if m_new holds a value per row, broadcast it along the rows: m_new[:, None]")


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:2], F32), grid=lambda x: (ml.cdiv(x.shape[1], 64), x.shape[0]))
def lse_rows_ragged(x, lse):
  i, h = ml.program_id(0), ml.program_id(1)
  l_s = ml.smem((64,), F32)
  l_s[...] = ml.zeros((64,), F32)
  ml.copy(l_s, lse.at[h, ml.ds(i * 64, 64)])


def test_a_tma_store_limit_hints_a_register_store():
  e = expect(lse_rows_ragged, [S((2, 101, 64), jnp.float16)], mg.TmaLimitError, "ml.copy(l_s",
             "TMA copies need lse.at[h, ml.ds(i * 64, 64)]'s rows to be a multiple of 16 bytes apart; its last"
             " dimension is 101 x 4 bytes")
  assert "store it from registers, lse.at[...][...] = value" in e.hint


# ---------------------------------------------------------------- control flow
@mg.mgpu_kernel(out_shape=lambda x, n: S((), F32))
def int_carry_meets_float(x, n, out):
  s = 0
  for k in range(n[0]):
    s = s + ml.sum(x[...])
  out[...] = s


def test_an_int_started_carry_meeting_floats_hints_starting_it_as_a_float():
  # (since probe 33a s + ml.sum(x[...]) computes in float32 as in jnp: the carry's change of type is the error)
  expect(int_carry_meets_float, [S((128,), F32), S((1,), jnp.int32)], mg.LoopCarryTypeError, "s = s + ml.sum",
         "s enters the loop as an int32 scalar but an iteration makes it a float32 scalar",
         hint="start it as a float before the loop: s = 0.0 (a Python int starts an int32 carry)")


@mg.mgpu_kernel(out_shape=lambda x: x)
def static_ranges_in_zip_and_reversed(x, out):
  v = x[...]
  for a, w in zip(ml.static_range(2), (1.0, 3.0)):
    v = v + w * float(a)
  for a in reversed(ml.static_range(3)):
    v = v * 2.0 + a
  out[...] = v


def test_static_ranges_work_inside_zip_and_reversed():
  x = jnp.ones((256,), F32)
  want = x + 3.0
  for a in reversed(range(3)):
    want = want * 2.0 + a
  np.testing.assert_array_equal(static_ranges_in_zip_and_reversed(x, interpret=True), want)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def list_of_buffers_by_runtime_index(x, out, *, trips: ml.constexpr = 100):
  bufs = [ml.smem((256,)), ml.smem((256,))]
  for i in range(trips):
    bufs[i % 2][...] = x[...]
  out[...] = bufs[0][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def range_with_num_stages(x, out):
  buf = ml.smem((256,))
  for t in ml.range(4, num_stages=3):
    ml.copy(x, buf)
  out[...] = buf[...]


def test_runtime_indexed_buffer_lists_and_tritons_num_stages_get_hints_that_apply():
  e = expect(list_of_buffers_by_runtime_index, [S((256,), F32)], mg.KernelTypeError, "bufs[i % 2]",
             "cannot index bufs (a Python list of SMEM buffers) with a runtime value")
  assert "buf = ml.smem((2, 256), ...); buf.at[i % 2]" in e.hint
  x = np.arange(256, dtype=np.float32)        # (a loop of at most 64 trips is unrolled since probe 52b)
  np.testing.assert_array_equal(np.asarray(list_of_buffers_by_runtime_index(x, trips=2, interpret=True)), x)
  # Triton's num_stages= was MG003 hinting stages= until probe 48g: it is stages= (a loop of TMA loads), so this
  # loop's buffer read after it is what stages=3 makes it
  with pytest.raises(mg.PipelineError) as info:
    range_with_num_stages.check(S((256,), F32))
  assert info.value.message == "buf is loaded in a pipelined loop but also used outside it"


# ---------------------------------------------------------------- Pallas and Triton habits
from jax.experimental.pallas import mosaic_gpu as _plgpu  # noqa: E402


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(8,))
def pallas_smem_scratch(x_ref, o_ref):
  i = ml.program_id(0)
  buf = _plgpu.SMEM((128, 128), jnp.float32)
  ml.copy(x_ref.at[ml.ds(i * 128, 128)], buf)
  ml.copy(buf, o_ref.at[ml.ds(i * 128, 128)])


def test_pallas_names_get_the_mgpu_dsl_spelling():
  e = expect(pallas_smem_scratch, [S((1024, 128), F32)], mg.KernelTypeError, "_plgpu.SMEM(",
             "_plgpu.SMEM is Pallas's; an mgpu_dsl kernel calls ml.* functions")
  assert e.hint == "write ml.smem((128, 128), jnp.float32) in the kernel body"
  with pytest.raises(mg.SignatureError) as info:
    mg.mgpu_kernel(out_shape=lambda x: x, scratch_shapes=[S((8,), F32)])(plus_one)
  assert "acc = ml.smem(shape, dtype)" in info.value.hint


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def triton_habits(x, out, *, which: ml.constexpr):
  if which == "block_ptr":
    p = ml.make_block_ptr(x)
  elif which == "histogram":
    p = ml.histogram(x[...], 16)
  out[...] = x[...]


def test_triton_names_without_an_ml_twin_say_what_to_write():
  # ml.make_block_ptr exists since probe 49h (ml.histogram since 48e): a call missing its arguments names them
  e = _raises(lambda: triton_habits.check(S((128,), F32), which="block_ptr"))
  assert type(e) is mg.KernelTypeError and e.message == "ml.make_block_ptr: missing a required argument: 'shape'"
  assert e.hint == "ml.make_block_ptr(base, shape, strides, offsets, block_shape, order=None)"


def test_autotune_keys_must_be_callables():
  # Triton's key=['n'] of parameter names is taken since probe 60b (the default key covers them); other values are not
  with pytest.raises(mg.SignatureError, match="autotune's key= must be a callable") as info:
    mg.autotune(configs=[dict(bs=128)], key=[1])(tuned_inc.kernel)
  assert "key=lambda" in info.value.hint
  tuned = mg.autotune(configs=[dict(bs=128)], key=["n_elements"])(tuned_inc.kernel)
  assert tuned.key is None and tuned.key_names == ("n_elements",)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def atomic_with_sem(x, out):
  ml.atomic_add(out, x[...], sem="relaxed")


@mg.mgpu_kernel(out_shape=lambda x, n, *, B: x, grid=(1,))
def scalar_after_output(x, out, n: ml.scalar, *, B: ml.constexpr):
  out[...] = x[...] * n


def test_atomic_signature_hint_and_scalars_after_outputs():
  x = np.random.default_rng(0).standard_normal(128).astype(np.float32)    # (sem= is Triton's since probe 48c)
  np.testing.assert_array_equal(atomic_with_sem(x, interpret=True), x)
  e = _raises(lambda: scalar_after_output(jnp.ones((128,), F32), 1000, B=128, interpret=True))
  assert e.message == ("scalar_after_output: input 1 (out) is int 1000, but out is not an ml.scalar parameter;"
                       " n is, after it")
  assert "def scalar_after_output(x, n: ml.scalar, out, ...)" in e.hint


@mg.mgpu_kernel(out_shape=lambda x: (x, x, S((128,), jnp.int32)))
def aranges(x, a, b, c):
  a[...] = ml.arange(128, 256, dtype=jnp.float32)
  b[...] = ml.arange(128, jnp.float32)
  c[...] = ml.arange(128, 256)


def test_arange_takes_start_stop_and_a_dtype():
  got = aranges(jnp.zeros((128,), F32), interpret=True)
  for g, w in zip(got, (np.arange(128, 256), np.arange(128), np.arange(128, 256))):
    np.testing.assert_array_equal(g, w)
  assert got[0].dtype == jnp.float32


# ---------------------------------------------------------------- the regression hunt and the review of this session
@mg.mgpu_kernel(out_shape=lambda x, lo: (x, x, x, x, x), grid=(1,))
def e5m2_selects(x, lo, mx, wh, cl, sm, fl):
  v = x[...]
  mx[...] = ml.maximum(v, ml.minimum(v, 0.0))
  wh[...] = ml.where(v != v, v, v)
  cl[...] = ml.clip(v, min=0.0)
  buf = ml.smem(x.shape, x.dtype)
  buf[...] = v
  sm[...] = buf.load(mask=ml.arange(x.shape[0]) < x.shape[0] - 2, other=1.0)
  fl[...] = ml.maximum(v, lo[...])          # a float8 scalar meets the tensor


def _e5m2_inputs():
  x = jnp.array([np.inf, -np.inf, 3.0, -2.0] * 32, jnp.float8_e5m2)
  return x, jnp.array(0.5, jnp.float8_e5m2)


def _e5m2_want(x, lo):
  n = x.shape[0]
  keep = jnp.arange(n) < n - 2
  return (jnp.maximum(x, jnp.minimum(x, 0.0)), x, jnp.clip(x, 0.0), jnp.where(keep, x, jnp.ones_like(x)), jnp.maximum(x, lo))


def test_float8_e5m2_infinities_survive_selects_max_min_and_masked_loads():
  x, lo = _e5m2_inputs()
  for g, w in zip(e5m2_selects(x, lo, interpret=True), _e5m2_want(x, lo)):
    np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(w, np.float32))
  jax.export.export(jax.jit(e5m2_selects), platforms=["cuda"])(S((128,), jnp.float8_e5m2), S((), jnp.float8_e5m2))


@pytest.mark.gpu
def test_float8_e5m2_infinities_survive_selects_on_the_gpu():
  x, lo = _e5m2_inputs()
  for g, w in zip(e5m2_selects(x, lo), _e5m2_want(x, lo)):
    np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(w, np.float32))


@mg.mgpu_kernel(out_shape=lambda x, u: (x, u, S(u.shape, jnp.int8), S(u.shape, jnp.int8), S(x.shape, jnp.int8)),
                grid=(1,))
def eight_bit_python_ints(x, u, mx, mu, lt, eq, ar):
  mx[...] = ml.maximum(x[...], 255)       # 255 is -1 in int8, as jnp converts it
  mu[...] = ml.maximum(u[...], -1)        # -1 is 255 in uint8
  lt[...] = (u[...] < 256).astype(jnp.int8)
  eq[...] = (u[...] == 300).astype(jnp.int8)
  ar[...] = ml.arange(5, 5 + x.shape[0], dtype=jnp.int8)


def test_python_ints_meet_8_bit_values_as_jnp_converts_them():
  x = jnp.array([0, 5, -1, 100] * 32, jnp.int8)
  u = jnp.arange(128, dtype=jnp.uint8) * 2
  got = eight_bit_python_ints(x, u, interpret=True)
  wrap = lambda v, d: np.asarray(v).astype(d)
  want = (jnp.maximum(x, wrap(255, np.int8)), jnp.maximum(u, wrap(-1, np.uint8)), (u < wrap(256, np.uint8)),
          u == wrap(300, np.uint8), np.arange(5, 133).astype(np.int8))
  for g, w in zip(got, want):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w).astype(np.asarray(g).dtype))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def where_on_an_untyped_buffer(x, out):
  buf = ml.smem(x.shape)
  ml.copy(x, buf)
  v = buf[...]
  out[...] = ml.where(v > 3, v, 0)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:1], x.dtype))
def column_of_a_3d_array(x, out):
  out[...] = x.at[:, 0, 0][...] * 2


@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype))
def weighted_rows(x, out):
  out[...] = sum([x.at[i][...] * w for i, w in zip(ml.static_range(4), (1.0, 2.0, 3.0, 4.0))])
  r = ml.static_range(2)
  for i in r:
    out[...] = out[...] + 0.0


def test_untyped_8_bit_buffers_strided_columns_and_unpacking_comprehensions():
  u = jnp.arange(128, dtype=jnp.uint8)
  np.testing.assert_array_equal(where_on_an_untyped_buffer(u, interpret=True), jnp.where(u > 3, u, 0))
  x = jnp.arange(256 * 4, dtype=F32).reshape(256, 4, 1)
  np.testing.assert_array_equal(column_of_a_3d_array(x, interpret=True), x[:, 0, 0] * 2)
  jax.export.export(jax.jit(column_of_a_3d_array), platforms=["cuda"])(S((256, 4, 1), F32))   # (stride 4: no vector load)
  w = jnp.ones((8, 128), F32)
  np.testing.assert_array_equal(weighted_rows(w, interpret=True), w[0] * 10)


@mg.mgpu_kernel(out_shape=lambda s: s)
def tma_of_a_column(s, out):
  buf = ml.smem(s.shape[:1], s.dtype)
  ml.copy(s.at[:, 0], buf)
  out.at[:, 0][...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x, n: x)
def arange_to_a_runtime_stop(x, n, out):
  out[...] = ml.arange(0, n[0]).astype(F32)


def test_tma_columns_and_runtime_aranges_are_reported_with_hints_that_apply():
  e = expect(tma_of_a_column, [S((256, 1), F32)], mg.TmaLimitError, "ml.copy(s.at",
             "TMA copies need the last dimension to span a multiple of 16 bytes; 1 x 4 bytes = 4")
  assert e.hint.startswith("s's rows are 4 bytes, so no window of them is: read it into registers instead")
  e = expect(arange_to_a_runtime_stop, [S((128,), F32), S((1,), jnp.int32)], mg.KernelTypeError, "ml.arange(",
             "ml.arange(start, stop) takes static ints, got a scalar for stop")


# ---------------------------------------------------------------- diagnostics (probe of the diagnostics, second review)
@ml.inline
def add_mixed(a, b):
  return a + b


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def helper_failing_twice(x, y, out):
  u = add_mixed(x[...], y[...])
  out[...] = add_mixed(x[...], y[...]) * 2


@ml.inline
def forever(v):
  return forever(v)


@mg.mgpu_kernel(out_shape=lambda x: x)
def recursing(x, out):
  out[...] = forever(x[...])


def test_a_helper_failing_twice_is_one_error_and_recursion_one_note_a_call():
  with pytest.raises(mg.DtypeMismatchError) as info:
    helper_failing_twice.check(S((128,), jnp.int32), S((128,), jnp.uint32))    # (int64 in jnp: probe 47b)
  assert len(info.value.errors) == 1              # (the second call was a NoneType error)
  with pytest.raises(mg.UnsupportedSyntaxError) as info:
    recursing.check(S((128,), F32))
  assert len(info.value.notes) == len(set(info.value.notes)) == 2


@mg.mgpu_kernel(out_shape=lambda x, *, bm: x)
def window_of_bm(x, out, *, bm: ml.constexpr):
  out.at[ml.ds(0, bm)][...] = x.at[ml.ds(0, bm)][...]
  out.at[ml.ds(0, bm)][...] = out.at[ml.ds(0, bm)][...] + x.at[ml.ds(bm, bm)][...]


def test_the_call_note_names_the_constexprs_and_every_error_carries_it():
  e = _raises(lambda: window_of_bm(jnp.ones((128,), F32), bm=256, interpret=True))
  assert len(e.errors) >= 2
  for err in e.errors:
    assert err.notes[-1].endswith("the call (x: float32[128], bm=256)")


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.complex64))
def complex_output(x, out):
  out[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def writes_its_bf16_input(x, y, out):
  y[...] = x[...].astype(BF16)
  out[...] = x[...]


def test_output_dtypes_are_reported_at_out_shape_and_input_writes_hint_an_output_that_fits():
  with pytest.raises(mg.SignatureError) as info:
    complex_output.check(S((128,), F32))
  import inspect
  first = inspect.getsourcelines(complex_output.fn)[1]
  assert (info.value.lineno, info.value.col_offset) == (first, 16)      # at out_shape=, not at the def
  assert "out_shape gives an output" in info.value.message
  e = expect(writes_its_bf16_input, [S((128,), F32), S((128,), BF16)], mg.InputWriteError, "y[...] =",
             "cannot write into y: it is an input of the kernel, and inputs are read-only (JAX arrays are immutable)")
  assert e.hint.endswith("add an output of its shape and dtype (out_shape gives 2 outputs, the last like y) and alias"
                         " it: input_output_aliases={1: 1}")


@mg.mgpu_kernel(out_shape=lambda x: S((64, 64), F32))
def outer_of_a_row_statistic(x, out):
  v = ml.max(x[...], axis=1)
  out[...] = v[:, None] + v[None, :]


@mg.mgpu_kernel(out_shape=lambda x, n: x)
def scaled_by_the_loop_index(x, n, out):
  acc = ml.zeros((128,), F32)
  for j in range(n[0]):
    acc = acc + x[...] * j
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: x)
def static_range_step_0(x, out):
  for i in ml.static_range(0, 2, 0):
    out[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def arange_from_the_program(x, out):
  out.at[ml.ds(ml.program_id(0) * 64, 64)][...] = ml.arange(ml.program_id(0) * 64, ml.program_id(0) * 64 + 64)


def test_hints_that_do_not_apply_are_left_out_and_bad_static_ranges_are_errors():
  # the user wrote both broadcasts: v[None, :] reads a copy of v through SMEM (probe 33c; it was MG204)
  x = jnp.asarray(np.random.default_rng(0).standard_normal((64, 64)), F32)
  v = jnp.max(x, axis=1)
  np.testing.assert_array_equal(outer_of_a_row_statistic(x, interpret=True), v[:, None] + v[None, :])
  x = jnp.arange(128, dtype=F32)        # a float times the int32 loop index: float32, as jnp (probe 33a)
  np.testing.assert_array_equal(scaled_by_the_loop_index(x, jnp.array([3], jnp.int32), interpret=True), 3 * x)
  expect(static_range_step_0, [S((128,), F32)], mg.KernelTypeError, "ml.static_range(0, 2, 0)",
         "ml.static_range's step is 0")
  e = expect(arange_from_the_program, [S((128,), jnp.int32)], mg.KernelTypeError, "ml.arange(",
             "ml.arange(start, stop) takes static ints, got a scalar for start")
  assert "start + ml.arange(n)" in e.hint


@mg.mgpu_kernel(out_shape=lambda x, a, n: x, grid=(1,))
def two_scalars_one_after_out(x, a: ml.scalar, out, n: ml.scalar):
  out[...] = x[...] * a * n


@mg.mgpu_kernel(out_shape=lambda x: x)
def stage_1028(x, o):
  x_s = ml.smem((8, 1028))
  ml.copy(x, x_s)
  ml.copy(x_s, o)


def test_hints_keep_the_users_annotations_names_and_splits_that_fit():
  e = _raises(lambda: two_scalars_one_after_out(jnp.ones((128,), F32), 2.0, 3, interpret=True))
  assert "def two_scalars_one_after_out(x, a: ml.scalar, n: ml.scalar, out, ...)" in e.hint
  with pytest.raises(mg.SignatureError) as info:
    mg.autotune(configs=[dict(bs=128)], key=[["M", "N"]])(tuned_inc.kernel)
  assert "key=[['M', 'N']]" in info.value.hint
  e = expect(stage_1028, [S((8, 1028), F32)], mg.TmaLimitError, "ml.copy(x, x_s)",
             "TMA copies move at most 256 elements along each dimension; this window is (8, 1028)")
  assert "reshape" not in e.hint                   # 1028 = 257 x 4: no split keeps both sides within 256


# ---------------------------------------------------------------- the examples as a library
import os as _os  # noqa: E402
import sys as _sys  # noqa: E402
_sys.path.insert(0, _os.path.join(_os.path.dirname(__file__), "..", "examples"))
import attention as _A  # noqa: E402
import layernorm as _LN  # noqa: E402
import matmul_fp8 as _F8  # noqa: E402
import paged_attention as _PA  # noqa: E402
import softmax as _SM  # noqa: E402


def test_paged_attention_takes_pages_of_128_tokens_with_its_defaults():
  args = _PA.make_inputs(jax.random.key(0), 2, 4, 2, 128, 128, 4)     # page_size 128, head_dim 128
  want = _PA.reference(*args)
  for kw in ({}, {"tensor_cores": False}):
    got = _PA.paged_attention(*args, interpret=True, **kw)
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), atol=2e-3, rtol=2e-3)
  q, kp, vp, tables, lengths = args
  with pytest.raises(ValueError, match="lengths must be int32"):
    _PA.paged_attention(q, kp, vp, tables, lengths.astype(jnp.int16), interpret=True)


@pytest.mark.gpu
@pytest.mark.parametrize("tensor_cores", [True, False])
def test_gpu_paged_attention_takes_pages_of_128_tokens(tensor_cores):
  args = _PA.make_inputs(jax.random.key(1), 3, 8, 2, 128, 128, 6)
  got = _PA.paged_attention(*args, tensor_cores=tensor_cores)
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(_PA.reference(*args), np.float32),
                             atol=2e-3, rtol=2e-3)


def test_example_wrappers_refuse_what_they_cannot_take_with_value_errors():
  with pytest.raises(ValueError, match="rows of width 0"):
    _SM.softmax(jnp.ones((4, 0), F32), interpret=True)
  q = jnp.ones((1, 128, 2, 64), jnp.float16)
  with pytest.raises(ValueError, match="causal must be a Python value"):
    jax.jit(lambda q, c: _A.attention(q, q, q, c, interpret=True))(q, True)
  x, w = jnp.ones((8, 256), F32), jnp.ones((256,), F32)
  with pytest.raises(ValueError, match="eps must be a Python value"):
    jax.jit(lambda x, e: _LN.layernorm(x, w, w, e, True))(x, 1e-5)
  np.testing.assert_allclose(_LN.layernorm(x, w, w, 1e-5, True), _LN.reference(x, w, w), atol=1e-5)
  a = jnp.ones((128, 128), jnp.float8_e4m3fn)
  bt = jnp.ones((256, 128), jnp.float8_e4m3fn)
  with pytest.raises(ValueError, match="a_scale must be a number or a \\(128,\\) vector"):
    _F8.scaled_matmul(a, bt, jnp.ones((256,)), jnp.ones((128,)), interpret=True)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def rows_of_128(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * 2


def test_an_empty_grid_hints_rounding_up():
  e = _raises(lambda: rows_of_128(jnp.ones((100, 64), F32), interpret=True))
  assert type(e) is mg.LaunchConfigError and "ml.cdiv(x.shape[0], 128)" in e.hint


@ml.inline
def read_both_halves(buf):
  return buf.at[ml.ds(0, 128)][...] + buf.at[ml.ds(128, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32))
def half_filled_through_a_helper(x, out):
  full, half = ml.smem((256,), F32), ml.smem((256,), F32)
  ml.copy(x, full)
  ml.copy(x.at[ml.ds(0, 128)], half.at[ml.ds(0, 128)])
  out[...] = read_both_halves(full) + read_both_halves(half)


def test_errors_found_after_tracing_name_the_helper_calls_they_come_from():
  with pytest.raises(mg.UninitializedReadError) as info:
    half_filled_through_a_helper.check(S((256,), F32))
  notes = [n for n in info.value.notes if "call of read_both_halves" in n]
  assert len(notes) == 2 and all(": in a call of read_both_halves" in n for n in notes)


@ml.inline
def window_at(ref, start):
  return ref.at[ml.ds(start, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x, off: S((128,), x.dtype))
def windows_at_run_time(x, off, out):
  s = ml.max(off[...])
  out[...] = window_at(x, 0) + window_at(x, s)


def test_interpret_mode_errors_in_a_helper_name_its_calls():
  x = jnp.arange(256, dtype=jnp.int32)
  with pytest.raises(mg.KernelError) as info:
    windows_at_run_time(x, jnp.full((128,), 200, jnp.int32), interpret=True)
  assert sum(": in a call of window_at" in n for n in info.value.notes) == 2
