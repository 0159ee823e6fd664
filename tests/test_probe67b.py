"""Probe 67b (linear attention and state-space kernels as flash-linear-attention, Mamba and RetNet write them): a
corpus of 57 kernels (59 cases), each checked in interpret mode against a plain loop over time or chunks and exported
for CUDA; the legitimate refusals met; and the classes fixed: run-time windows of a pipelined loop's buffer read into
registers, MG602's hint for a loop that stops short, a long scan's unwritten tail found while compiling, float32 SMEM
operands stored the other way, and a pointer block's .dtype (design note 223)."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where
from probe67b_cases import CASES, K, qkv

S = jax.ShapeDtypeStruct
F32, BF16 = jnp.float32, jnp.bfloat16


def _relerr(got, want):
  got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
  assert got.shape == want.shape, (got.shape, want.shape)
  return float(np.max(np.abs(got - want)) / max(1e-6, float(np.max(np.abs(want)))))


def _check(name, seed):
  kernel, make, ref, tol = CASES[name]
  args = make(seed)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.KernelWarning)     # la_chunk128_d128 spills, wy_inverse_static is large
    got = kernel(*args, interpret=True)
    want = ref(*args)
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
      assert _relerr(g, w) <= tol, (name, _relerr(g, w))
    jax.export.export(jax.jit(kernel), platforms=["cuda"])(*[S(a.shape, a.dtype) for a in args]).mlir_module()
  return args


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_matches_its_loop_reference_and_builds(name):
  """Each kernel against its reference (interpret mode, the GPU's numerics) and its Mosaic GPU module built."""
  _check(name, 0)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_corpus_matches_its_loop_reference(name):
  kernel, make, ref, tol = CASES[name]
  args = make(1)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.KernelWarning)
    got = jax.jit(kernel)(*args)
  want = ref(*args)
  got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
  for g, w in zip(got, want):
    assert _relerr(g, w) <= max(tol, 1e-3), (name, _relerr(g, w))


# ---------------------------------------------------------------- run-time windows of a pipelined buffer
def test_a_run_time_row_of_a_pipelined_buffer_is_read_from_this_trips_stage():
  """Mamba's selective scan as its CUDA kernel schedules it: 64 steps of x and dt copied by TMA in a pipelined
  loop, an inner loop over the buffered steps reading `x_s.at[r][...]`. It was MG502 ('may only read it whole ...
  or read static windows of it into registers'), whose hint read the whole buffer and sliced registers with a
  run-time index. A run-time window read into registers is restaged as a static one: the row of this trip's stage,
  read after the stage's load landed, and a barrier before the stage is refilled."""
  args = _check("mamba_scan_buffered", 0)
  ir = K.mamba_scan_buffered.typed_ir(*[S(a.shape, a.dtype) for a in args])
  body = ir[ir.index("stages=2"):]
  inner = body[body.index("stages=1"):]
  stage, row = inner.split("view ref=", 1)[1].split("index=[", 1)[1].split(",")[:2]
  assert stage.startswith("%") and row.strip().startswith("%"), inner[:400]      # [stage, r, 0:+128]
  assert body.index("waitload") < body.index("stages=1") < body.index("barrier") < body.rindex("copy src=")


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 8, x.shape[1]), F32), grid=lambda x: (1,))
def window_sums(x, out):                 # 8-row windows of a pipelined 64-row tile at run-time starts
  x_s = ml.smem((64, 128), x.dtype)
  for blk in ml.range(x.shape[0] // 64, stages=2):
    ml.copy(x.at[ml.ds(blk * 64, 64)], x_s)
    for r in range(8):
      out.at[blk * 8 + r][...] = ml.sum(x_s.at[ml.ds(r * 8, 8)][...].astype(F32), axis=0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (1,))
def window_written(x, out):              # a run-time window written: still MG502
  x_s = ml.smem((64, 128), x.dtype)
  for blk in ml.range(x.shape[0] // 64, stages=2):
    ml.copy(x.at[ml.ds(blk * 64, 64)], x_s)
    for r in range(64):
      x_s.at[r][...] = x_s.at[r][...] * 2.0
    ml.copy(x_s, out.at[ml.ds(blk * 64, 64)])


def _window_sums_ref(x):
  return np.asarray(x, np.float32).reshape(-1, 8, x.shape[1]).sum(1)


def test_run_time_windows_of_several_rows_work_and_a_written_one_stays_an_error():
  x = jnp.asarray(np.random.default_rng(3).standard_normal((256, 128)), BF16)
  np.testing.assert_allclose(window_sums(x, interpret=True), _window_sums_ref(x), rtol=1e-5, atol=1e-5)
  jax.export.export(jax.jit(window_sums), platforms=["cuda"])(S(x.shape, x.dtype)).mlir_module()
  e = expect(window_written, [S((256, 128), F32)], mg.PipelineError, "x_s.at[r][...] = ",
             "x_s is loaded by TMA in a pipelined loop, so the loop may only read it whole (ml.dot, ml.copy from it, or"
             " [...]), read windows of it into registers, or pass windows of it to ml.dot")
  assert e.notes[0].endswith(f":{where(window_written, 'ml.copy(x.at')[0]}:4: the pipelined load")


@pytest.mark.gpu
def test_gpu_run_time_windows_of_a_pipelined_buffer_match_numpy():
  x = jnp.asarray(np.random.default_rng(4).standard_normal((512, 128)), BF16)
  np.testing.assert_allclose(np.asarray(jax.jit(window_sums)(x)), _window_sums_ref(x), rtol=1e-4, atol=1e-4)
  kernel, make, ref, tol = CASES["mamba_scan_buffered"]
  args = make(5)
  np.testing.assert_allclose(np.asarray(jax.jit(kernel)(*args)), ref(*args), rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------- the refusals met, each legitimate
def test_a_hand_kept_ring_under_stages_is_refused_at_the_load_with_both_ways_out():
  """retention_pipelined keeps its own ring (`q_s.at[c % 2]`) and asks for stages=2: the loop keeps the ring."""
  e = expect(K.retention_pipelined, [S((3, 256, 64), BF16)] * 3, mg.PipelineError, "ml.copy(q.at[h",
             "this pipelined loop's TMA load fills a window of q_s picked by the loop index (a ring of stages kept by"
             " hand), but ml.range(..., stages=2) keeps the ring itself: it pipelines loads into a whole buffer (or"
             " static windows of one), of which it keeps 2 copies")
  assert "drop stages= for a plain loop, for c in ml.range(q.shape[1] // 64):" in e.hint


@mg.mgpu_kernel(out_shape=lambda q, k, v: S(v.shape, F32), grid=lambda q, k, v: (v.shape[2] // 64, q.shape[2] // 64, q.shape[0]))
def fla_dropped_nk_offset(q, k, v, o):    # fla's o + (i_bh + i_k * B * H) * s_v_h written as o.at[i_bh]: K split in two
  i_v, i_k, i_bh = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  T, Kd, V = q.shape[1], q.shape[2], v.shape[2]
  p_q = ml.make_block_ptr(q.at[i_bh], (T, Kd), (Kd, 1), (0, i_k * 64), (64, 64), (1, 0))
  p_k = ml.make_block_ptr(k.at[i_bh], (Kd, T), (1, Kd), (i_k * 64, 0), (64, 64), (0, 1))
  p_v = ml.make_block_ptr(v.at[i_bh], (T, V), (V, 1), (0, i_v * 64), (64, 64), (1, 0))
  p_o = ml.make_block_ptr(o.at[i_bh], (T, V), (V, 1), (0, i_v * 64), (64, 64), (1, 0))
  o_i = ml.arange(64)
  b_s = ml.where(o_i[:, None] >= o_i[None, :], ml.dot(ml.load(p_q), ml.load(p_k)), 0)
  ml.store(p_o, ml.dot(b_s.to(q.dtype), ml.load(p_v)), boundary_check=(0, 1))


def test_a_port_that_drops_flas_key_split_offset_is_reported_as_the_race_it_is():
  q, k, v = qkv(0, t=64, dk=128)
  with pytest.raises(mg.KernelError) as info:
    fla_dropped_nk_offset(q, k, v, interpret=True)
  e = info.value
  assert e.code == "MG951" and (e.lineno, e.col_offset) == where(fla_dropped_nk_offset, "ml.store(p_o")
  assert e.message.startswith("program (0, 0, 0) and program (0, 1, 0) both write o[0, 0, 0]")
  assert "differ only along grid axis 1" in e.hint and "ml.atomic_add" in e.hint


# ---------------------------------------------------------------- a loop that stops short of an output's end
@mg.mgpu_kernel(out_shape=lambda q, k, v: S(v.shape, F32), grid=lambda q, k, v: (q.shape[0],))
def chunks_floor(q, k, v, o):            # T // 64 chunks of a length no multiple of 64: the tail never written
  h = ml.program_id(0)
  q_s, k_s, v_s, st_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype), ml.smem((64, 64), q.dtype)
  state = ml.zeros((64, 64), F32)
  for c in ml.range(q.shape[1] // 64):
    ml.copy(q.at[h, ml.ds(c * 64, 64)], q_s)
    ml.copy(k.at[h, ml.ds(c * 64, 64)], k_s)
    ml.copy(v.at[h, ml.ds(c * 64, 64)], v_s)
    st_s[...] = state.astype(q.dtype)
    o.at[h, ml.ds(c * 64, 64)][...] = ml.dot(q_s, st_s)
    state = ml.dot(k_s.T, v_s, state)


@mg.mgpu_kernel(out_shape=lambda q, k, v: S(v.shape, F32), grid=lambda q, k, v: (q.shape[0],))
def chunks_floor_followed(q, k, v, o):   # the hint followed: ml.cdiv trips, the register store masked
  h = ml.program_id(0)
  q_s, k_s, v_s, st_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype), ml.smem((64, 64), v.dtype), ml.smem((64, 64), q.dtype)
  state = ml.zeros((64, 64), F32)
  for c in ml.range(ml.cdiv(q.shape[1], 64)):
    ml.copy(q.at[h, ml.ds(c * 64, 64)], q_s)
    ml.copy(k.at[h, ml.ds(c * 64, 64)], k_s)
    ml.copy(v.at[h, ml.ds(c * 64, 64)], v_s)
    st_s[...] = state.astype(q.dtype)
    o.at[h, ml.ds(c * 64, 64)].store(ml.dot(q_s, st_s), mask=(c * 64 + ml.arange(64))[:, None] < o.shape[1])
    state = ml.dot(k_s.T, v_s, state)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[1] // 128,))
def pipelined_tma_floor(x, y):           # a pipelined scan whose outputs go out by TMA
  cols = ml.ds(ml.program_id(0) * 128, 128)
  x_s, y_s = ml.smem((64, 128), x.dtype), ml.smem((64, 128), x.dtype)
  for blk in ml.range(x.shape[0] // 64, stages=2):
    ml.copy(x.at[ml.ds(blk * 64, 64), cols], x_s)
    y_s[...] = ml.cumsum(x_s[...], axis=0)
    ml.copy(y_s, y.at[ml.ds(blk * 64, 64), cols])


@mg.mgpu_kernel(out_shape=lambda q, k, v: S(v.shape, F32), grid=lambda q, k, v: (q.shape[0],))
def tokens_short(q, k, v, o):             # a recurrent scan that stops a token early
  h = ml.program_id(0)
  s = ml.zeros((64, 64), F32)
  for t in range(q.shape[1] - 1):
    s = s + k.at[h, t][...].astype(F32)[:, None] * v.at[h, t][...].astype(F32)[None, :]
    o.at[h, t][...] = ml.sum(q.at[h, t][...].astype(F32)[:, None] * s, axis=0)


def test_a_loop_that_stops_short_of_an_outputs_end_is_hinted_at_its_trips_not_the_grid():
  """MG602's hint said 'launch ml.cdiv(n, t) programs along the grid axis that steps it' where a loop steps the
  window (a chunked scan's `for c in ml.range(T // 64)` at T = 200): more programs would not help. The hint names
  the loop and its trips, writes its header with ml.cdiv, and the register store's mask in the user's words."""
  specs = [S((2, 200, 64), BF16)] * 3
  msg = "o[:, 192:200, :] is never written: none of the 2 programs of grid (2,) writes it, so 1024 of 25600 elements" \
        " of o would stay uninitialised"
  e = expect(chunks_floor, specs, mg.UncoveredOutputError, "o.at[h, ml.ds(c * 64, 64)][...] =", msg)
  line = where(chunks_floor, "for c in ml.range")[0]
  assert e.hint == (
      f"the loop at line {line} runs 3 trips of 64, which reach 192 of the 200 along o's dimension 1: run"
      " ml.cdiv(200, 64) = 4 trips rather than 200 // 64, for c in ml.range(ml.cdiv(q.shape[1], 64)); the last"
      " window then runs past the end, where ml.copy loads read zeros and ml.copy stores drop what falls outside the"
      " array, while a register store needs a mask of o's extent, o.at[h, ml.ds(c * 64, 64)].store(value,"
      " mask=(c * 64 + ml.arange(64))[:, None] < o.shape[1]); or write the rest after the loop")
  q, k, v = qkv(2, t=200)
  np.testing.assert_allclose(chunks_floor_followed(q, k, v, interpret=True), _chunk_ref(q, k, v), rtol=2e-2, atol=2e-2)
  jax.export.export(jax.jit(chunks_floor_followed), platforms=["cuda"])(*specs).mlir_module()
  e = expect(pipelined_tma_floor, [S((100, 256), F32)], mg.UncoveredOutputError, "ml.copy(y_s, y.at",
             "y[64:100, :] is never written: none of the 2 programs of grid (2,) writes it, so 9216 of 25600 elements"
             " of y would stay uninitialised")
  assert e.hint.startswith(f"the loop at line {where(pipelined_tma_floor, 'for blk')[0]} runs 1 trips of 64, which"
                           " reach 64 of the 100 along y's dimension 0: run ml.cdiv(100, 64) = 2 trips rather than"
                           " 100 // 64, for blk in ml.range(ml.cdiv(x.shape[0], 64), stages=2); the last window"), e.hint
  e = expect(tokens_short, [S((2, 16, 64), BF16)] * 3, mg.UncoveredOutputError, "o.at[h, t][...] =",
             "o[:, 15:16, :] is never written: none of the 2 programs of grid (2,) writes it, so 128 of 2048 elements of"
             " o would stay uninitialised")
  assert e.hint == (f"the loop at line {where(tokens_short, 'for t in')[0]} runs 15 trips of 1, which reach 15 of the 16"
                    " along o's dimension 1: run 16 trips, so that its windows reach the end; or write the rest after"
                    " the loop")


def _chunk_ref(q, k, v):
  """o_c = q_c S_{c-1} (the state before the chunk, in bfloat16 as the kernel rounds it)."""
  q, k, v = (np.asarray(t, np.float32) for t in (q, k, v))
  o = np.zeros(v.shape, np.float32)
  for h in range(q.shape[0]):
    s = np.zeros((q.shape[2], v.shape[2]), np.float32)
    for c in range(0, q.shape[1], 64):
      o[h, c:c + 64] = q[h, c:c + 64] @ np.asarray(jnp.asarray(s).astype(BF16), np.float32)
      s = s + k[h, c:c + 64].T @ v[h, c:c + 64]
  return o


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[1] // 64,))
def interleaved_rows(x, o):               # two writes a trip, 2t and 2t + 1, and a reversed one: every row written
  cols = ml.ds(ml.program_id(0) * 64, 64)
  for t in range(x.shape[0] // 2):
    o.at[2 * t, cols][...] = x.at[2 * t + 1, cols][...]
    o.at[2 * t + 1, cols][...] = x.at[2 * t, cols][...]
  for t in range(x.shape[0] // 2):
    o.at[x.shape[0] - 1 - t, cols][...] = o.at[x.shape[0] - 1 - t, cols][...] + 1.0


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[1] // 64,))
def chunk_rows_short(x, o):               # a loop over 8-row chunks from row 8 that stops one chunk early
  cols = ml.ds(ml.program_id(0) * 64, 64)
  for c in range(x.shape[0] // 8 - 2):
    o.at[ml.ds(8 + c * 8, 8), cols][...] = x.at[ml.ds(8 + c * 8, 8), cols][...]
  o.at[ml.ds(0, 8), cols][...] = x.at[ml.ds(0, 8), cols][...]


def test_a_long_scan_that_leaves_its_last_rows_unwritten_is_found_while_compiling():
  """A loop past the proof's budget (16 or more tokens of a recurrent scan) was summarised with its counter unknown,
  and a write whose start followed from it counted as covering its whole dimension: `for t in range(T - 1)` left
  o[:, T - 1] unwritten with no error while compiling (interpret mode reported it; the GPU left it uninitialised).
  The counter's interval over the trips is carried through the start's arithmetic (frontend/loop_spans.py), so
  the write covers the hull of its windows. Kernels whose writes do cover the output still compile."""
  for t in (16, 200):
    e = expect(tokens_short, [S((2, t, 64), BF16)] * 3, mg.UncoveredOutputError, "o.at[h, t][...] =",
               f"o[:, {t - 1}:{t}, :] is never written: none of the 2 programs of grid (2,) writes it, so 128 of"
               f" {2 * t * 64} elements of o would stay uninitialised")
    assert e.hint.startswith(f"the loop at line {where(tokens_short, 'for t in')[0]} runs {t - 1} trips of 1")
  x = jnp.asarray(np.random.default_rng(6).standard_normal((256, 128)), F32)
  want = np.asarray(x).reshape(128, 2, 128)[:, ::-1].reshape(256, 128).copy()
  want[128:] += 1.0
  np.testing.assert_allclose(interleaved_rows(x, interpret=True), want)
  jax.export.export(jax.jit(interleaved_rows), platforms=["cuda"])(S(x.shape, F32)).mlir_module()
  e = expect(chunk_rows_short, [S((256, 128), F32)], mg.UncoveredOutputError, "o.at[ml.ds(8 + c * 8, 8), cols]",
             "o[248:256, :] is never written: none of the 2 programs of grid (2,) writes it, so 1024 of 32768"
             " elements of o would stay uninitialised")


# ---------------------------------------------------------------- float32 (TF32) operands stored the other way
@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), jnp.int32), grid=lambda a, b: (1,))
def int8_a_transposed(a, b, o):           # 8-bit operands stay K-major only: MG501 as before
  a_s, b_s = ml.smem((64, 64), a.dtype), ml.smem((64, 64), b.dtype)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  o[...] = ml.dot(a_s.T, b_s.T)


def test_float32_smem_operands_stored_the_other_way_are_transposed_once():
  """fla's kernels run in float32 too: `ml.dot(k_s.T, v_s, state)` (A a transposed view) and `ml.dot(q_s, st_s)`
  (B stored (k, n)) of float32 SMEM tiles were MG501 ('ml.dot reads float32 operands K-major only'), while the same
  B beside a float32 register A was transposed by the compiler (probe 51f). An SMEM A is now taken as a register
  A's is: a (k, n) B transposed once into an (n, k) buffer read as its view .T, and an A view .T stored once into an
  (m, k) buffer, what MG501's hint wrote by hand."""
  args = _check("la_f32", 7)
  ir = K.la_f32.typed_ir(*[S(a.shape, a.dtype) for a in args])
  # q_s, k_s, v_s, st_s; att staged (a register A), v_s's (n, k) copy for att @ v_s and another for k_s.T @ v_s,
  # st_s's for q_s @ st_s, k_s.T's (m, k) copy
  assert ir.count("ref<SMEM, 64x64, float32> = smemalloc") == 9, ir
  assert ir.count("transposeload") == 4, ir
  e = expect(int8_a_transposed, [S((64, 64), jnp.int8)] * 2, mg.MmaOperandError, "ml.dot(a_s.T",
             "ml.dot reads int8 operands K-major only, so a must be stored (m, k); a_s.T is a transposed view")
  assert "a_mk[...] = a_s.T[...]" in e.hint or "transpose" in e.hint


# ---------------------------------------------------------------- a pointer block's element type
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, BF16), grid=lambda x: (x.shape[0],))
def ptr_element_types(x, o):              # fla's fused_recurrent stores b_o.to(p_o.dtype.element_ty)
  i = ml.program_id(0)
  cols = ml.arange(0, 64)
  p_x, p_o = x.at[i, cols], o.at[i, cols]
  b = ml.load(p_x) * 2.0
  assert p_o.type.shape == (64,) and p_x.dtype == jnp.float32
  ml.store(p_o, b.to(p_o.dtype.element_ty) + ml.zeros((64,), p_o.type.element_ty))


def test_a_pointer_blocks_dtype_is_its_refs_element_type():
  """`p_o.dtype.element_ty` of a pointer block `o.at[i, cols]` (fla's fused_recurrent kernels, Triton's `o + i * V +
  o_v`) was MG003 ('p_o is indexed by tensors: it has no .dtype'); a block pointer's has answered since probe 53f.
  `.dtype` is the ref's element dtype (numpy's) and `.type` Triton's, its shape the block's."""
  x = jnp.asarray(np.random.default_rng(8).standard_normal((4, 64)), F32)
  got = ptr_element_types(x, interpret=True)
  assert got.dtype == BF16
  np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray((x * 2).astype(BF16), np.float32))
  jax.export.export(jax.jit(ptr_element_types), platforms=["cuda"])(S(x.shape, F32)).mlir_module()
  _check("delta_fused_recurrent_ptr", 3)


# ---------------------------------------------------------------- summarised loops: valid windows, a reversed scan short
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (1,))
def reversed_rows(x, o):                  # a backward scan's order, every row written
  for t in range(x.shape[0] - 1, -1, -1):
    o.at[t][...] = x.at[x.shape[0] - 1 - t][...]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2, x.shape[1]), F32), grid=lambda x: (1,))
def pair_sums(x, o):                      # o.at[t // 2] on the even trips
  for t in range(x.shape[0]):
    if t % 2 == 0:
      o.at[t // 2][...] = x.at[t][...] + x.at[t + 1][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (1,))
def smem_rows_then_whole(x, o):           # an SMEM buffer filled a row a trip, then read whole (MG601's proof)
  buf = ml.smem((x.shape[0], x.shape[1]), F32)
  for t in range(x.shape[0]):
    buf.at[t][...] = x.at[t][...] * 2.0
  o[...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (1,))
def reversed_rows_short(x, o):            # range(n - 1, 0, -1) stops before row 0
  for t in range(x.shape[0] - 1, 0, -1):
    o.at[t][...] = x.at[t][...]


def test_summarised_loops_keep_valid_windows_and_name_the_loop_of_a_reversed_scan_that_stops_short():
  """The hull of a summarised loop's windows (loop_spans.py) through a subtraction (a loop counting down), a floor
  division, an SMEM buffer's rows: the kernels compile and compute. A reversed scan that stops before row 0 is
  MG602 while compiling (it compiled before), its hint naming the loop's bounds, not the grid."""
  x = jnp.asarray(np.random.default_rng(9).standard_normal((100, 128)), F32)
  xn = np.asarray(x)
  for kernel, want in ((reversed_rows, xn[::-1]), (pair_sums, xn.reshape(50, 2, 128).sum(1)),
                       (smem_rows_then_whole, 2 * xn)):
    np.testing.assert_allclose(kernel(x, interpret=True), want, rtol=1e-6, atol=1e-6)
  e = expect(reversed_rows_short, [S((100, 128), F32)], mg.UncoveredOutputError, "o.at[t][...] =",
             "o[0:1, :] is never written: the kernel's one program does not write it, so 128 of 12800 elements of o"
             " would stay uninitialised")
  assert e.hint == (f"the loop at line {where(reversed_rows_short, 'for t in')[0]} moves this window along o's"
                    " dimension 0, and none of its trips reaches the rest: change its bounds so that its windows cover"
                    " o (Python's range stops before its end: range(n - 1, -1, -1) walks down to 0), or write the rest"
                    " after the loop")
