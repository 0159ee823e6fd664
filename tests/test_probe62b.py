"""Probe 62b: the leftovers notes 203-207 listed (design note 209).

1. A widened operand bound to a name first (`w = b_s[...].T.astype(f32)`, then `x @ w`; `.astype(f32).T`,
   `jnp.transpose(b_s[...]).astype(f32)`, both operands named) kept the float32 register product and its transpose
   scratch (MG402 at (64, 256) by (256, 256)): it is the widened 16-bit product ml.dot computes, read from the ops
   that made the operand (the buffer's view where nothing wrote the buffer since the read), and the named value's
   transpose, if nothing else reads it, is dropped after the trace.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe_util import export
from probe_util import line_of as _line

S = jax.ShapeDtypeStruct
f32 = jnp.float32




# ---------------------------------------------------------------------- 1. a widened operand bound to a name first
def _named(form):
  @mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), jnp.float32))
  def k(a, bt, o):
    a_s, b_s = ml.smem(a.shape, a.dtype), ml.smem(bt.shape, bt.dtype)
    ml.copy(a, a_s)
    ml.copy(bt, b_s)
    if form == "T.astype":
      w = b_s[...].T.astype(f32)
      o[...] = a_s[...].astype(f32) @ w
    elif form == "astype.T":
      w = b_s[...].astype(f32).T
      o[...] = a_s[...].astype(f32) @ w
    elif form == "both named":
      x = a_s[...].astype(f32)
      w = b_s[...].T.astype(f32)
      o[...] = jnp.dot(x, w)
    elif form == "jnp.transpose":
      o[...] = jnp.matmul(a_s[...].astype(f32), jnp.transpose(b_s[...]).astype(f32))
    elif form == "named jnp.transpose":
      w = jnp.transpose(b_s[...]).astype(f32)
      o[...] = jax.lax.dot(a_s[...].astype(f32), w)
    elif form == "widened, then .T":
      w = b_s[...].astype(f32)
      o[...] = a_s[...].astype(f32) @ w.T
    elif form == "register tile":          # a 16-bit register tile (computed), widened, named
      w = (b_s[...] * 2).T.astype(f32)
      o[...] = a_s[...].astype(f32) @ w * 0.5
  return k


_FORMS = ["T.astype", "astype.T", "both named", "jnp.transpose", "named jnp.transpose", "widened, then .T",
          "register tile"]
_NAMED = {f: _named(f) for f in _FORMS}


def _pair(rng, n=256, dtype=jnp.bfloat16):
  return rng.integers(-3, 4, (64, 256)).astype(dtype), rng.integers(-3, 4, (n, 256)).astype(dtype)


@pytest.mark.parametrize("form", _FORMS)
def test_a_named_widened_operand_is_the_widened_product(form):
  a, bt = _pair(np.random.default_rng(5))
  got = _NAMED[form](a, bt, interpret=True)       # (was MG402: the float32 product's and transpose's scratch)
  np.testing.assert_array_equal(np.asarray(got), a.astype(np.float32) @ bt.astype(np.float32).T)
  plan = _NAMED[form].typed_ir(a, bt)
  assert "transposestore" not in plan and "float32, T>" not in plan, plan    # b_s's view, no float32 transpose


@pytest.mark.parametrize("form", ["T.astype", "both named", "named jnp.transpose"])
def test_a_named_widened_operand_exports(form):
  a, bt = _pair(np.random.default_rng(6), dtype=jnp.float16)
  export(_NAMED[form], a, bt)


@pytest.mark.parametrize("form", _FORMS)
def test_a_small_named_widened_operand_computes(form):
  a, bt = _pair(np.random.default_rng(7), n=64, dtype=jnp.float16)
  got = _NAMED[form](a, bt, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), a.astype(np.float32) @ bt.astype(np.float32).T)


@mg.mgpu_kernel(out_shape=lambda a, bt, b2: S((64, 64), jnp.float32))
def read_then_overwritten(a, bt, b2, o):      # w holds b_s's old values: the product must not read b_s again
  a_s, b_s = ml.smem(a.shape, a.dtype), ml.smem(bt.shape, bt.dtype)
  ml.copy(a, a_s)
  ml.copy(bt, b_s)
  w = b_s[...].T.astype(f32)
  ml.copy(b2, b_s)
  o[...] = a_s[...].astype(f32) @ w + b_s[...][:, :64].astype(f32)


@mg.mgpu_kernel(out_shape=lambda a, bt: S((64, 64), jnp.float32))
def read_then_doubled(a, bt, o):
  a_s, b_s = ml.smem(a.shape, a.dtype), ml.smem(bt.shape, bt.dtype)
  ml.copy(a, a_s)
  ml.copy(bt, b_s)
  w = b_s[...].T.astype(f32)
  b_s[...] = b_s[...] * 2
  o[...] = a_s[...].astype(f32) @ w + b_s[...][:, :64].astype(f32)


def test_a_named_operand_whose_buffer_is_written_since_keeps_its_values():
  rng = np.random.default_rng(8)
  a, bt = _pair(rng, n=64, dtype=jnp.float16)
  b2 = rng.integers(-3, 4, (64, 256)).astype(jnp.float16)
  a32, b32, c32 = (x.astype(np.float32) for x in (a, bt, b2))
  np.testing.assert_array_equal(np.asarray(read_then_overwritten(a, bt, b2, interpret=True)), a32 @ b32.T + c32[:, :64])
  np.testing.assert_array_equal(np.asarray(read_then_doubled(a, bt, interpret=True)), a32 @ b32.T + 2 * b32[:, :64])
  export(read_then_overwritten, a, bt, b2)


@mg.mgpu_kernel(out_shape=lambda a, bt: S((64, bt.shape[0]), jnp.float32))
def named_in_a_pipelined_loop(a, bt, o):
  acc = ml.zeros((64, bt.shape[0]), f32)
  a_s, b_s = ml.smem((64, 64), a.dtype), ml.smem((bt.shape[0], 64), bt.dtype)
  for k in ml.range(a.shape[1] // 64, stages=2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(bt.at[:, ml.ds(k * 64, 64)], b_s)
    x = a_s[...].astype(f32)
    w = b_s[...].T.astype(f32)
    acc += x @ w
  o[...] = acc


def test_named_widened_operands_in_a_pipelined_loop():
  a, bt = _pair(np.random.default_rng(9), n=256, dtype=jnp.bfloat16)
  got = named_in_a_pipelined_loop(a, bt, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), a.astype(np.float32) @ bt.astype(np.float32).T)
  assert "transposestore" not in named_in_a_pipelined_loop.typed_ir(a, bt)
  export(named_in_a_pipelined_loop, a, bt)


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["T.astype", "astype.T", "both named", "named jnp.transpose", "register tile"])
def test_a_named_widened_operand_gpu(form):
  a, bt = _pair(np.random.default_rng(10))
  got = jax.jit(_NAMED[form])(a, bt)
  np.testing.assert_array_equal(np.asarray(got), a.astype(np.float32) @ bt.astype(np.float32).T)


@pytest.mark.gpu
def test_named_widened_operands_gpu():
  rng = np.random.default_rng(11)
  a, bt = _pair(rng, n=64, dtype=jnp.float16)
  b2 = rng.integers(-3, 4, (64, 256)).astype(jnp.float16)
  a32, b32, c32 = (x.astype(np.float32) for x in (a, bt, b2))
  np.testing.assert_array_equal(np.asarray(jax.jit(read_then_overwritten)(a, bt, b2)), a32 @ b32.T + c32[:, :64])
  a, bt = _pair(rng, n=256, dtype=jnp.bfloat16)
  np.testing.assert_array_equal(np.asarray(jax.jit(named_in_a_pipelined_loop)(a, bt)),
                                a.astype(np.float32) @ bt.astype(np.float32).T)


# ---------------------------------------------------------------------- 2. int64 strides with jax_enable_x64
tl = ml


from test_probe61b import liger_rows      # noqa: E402  (Liger's row offsets: int64 program id times the stride)


@mg.mgpu_kernel(out_shape=lambda s: S((8,), jnp.int32), grid=(8,))
def int64_stride_times_pid(stride: tl.scalar, o):      # an int32 program id times an int64 stride: int64, as jnp
  o[tl.program_id(0)] = ((tl.program_id(0) * stride) >> 20).astype(jnp.int32)


@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=(8,))
def int64_stride_rows(x, stride: tl.scalar, y):
  start = tl.program_id(0) * stride + tl.arange(0, 256)
  tl.store(y.at[start], tl.load(x.at[start]) * 2)


def test_with_x64_an_int32_stride_meeting_int64_hints_the_int64_at_the_call():
  x = np.arange(8 * 256, dtype=np.float32) % 11
  for passed in (256, np.int32(256)):
    with jax.enable_x64(True):
      with pytest.raises(mg.DtypeMismatchError) as info:
        liger_rows(x, passed, interpret=True)
    e = info.value
    line, col = _line(liger_rows, "row * X_stride")
    assert e.code == "MG104" and (e.lineno, e.col_offset) == (line, col), e
    assert e.filename.endswith("test_probe61b.py"), e
    assert "* on row (int64) and X_stride (int32)" in e.message
    # (was "convert one side explicitly, e.g. X_stride.astype(jnp.int64)": the low 32 bits through jax.jit)
    assert e.hint.startswith("pass X_stride as an int64 scalar, jnp.int64(X_stride)"), e.hint
  with jax.enable_x64(True):                       # the hint followed
    np.testing.assert_array_equal(liger_rows(x, jnp.int64(256), interpret=True), x * 2)


def test_with_x64_an_int64_stride_meeting_an_int32_program_id_computes_in_int64():
  with jax.enable_x64(True):
    # (was MG104 "convert one side explicitly, e.g. tl.program_id(0).astype(jnp.int64)": jnp gives int64)
    got = int64_stride_times_pid(np.int64(2 ** 30), interpret=True)
    np.testing.assert_array_equal(got, np.arange(8, dtype=np.int32) * 1024)    # int32 would wrap from program 2
    x = np.arange(8 * 256, dtype=np.float32) % 11
    np.testing.assert_array_equal(int64_stride_rows(x, jnp.int64(256), interpret=True), x * 2)
    export(int64_stride_times_pid, np.int64(2 ** 30))
    export(int64_stride_rows, x, np.int64(256))


def test_with_x64_an_int64_stride_meeting_an_int32_tensor_is_int64():
  @mg.mgpu_kernel(out_shape=lambda x, s: S(x.shape, jnp.int64))
  def k(x, s: ml.scalar, o):
    o[...] = x[...] * s
  with jax.enable_x64(True):
    x = np.arange(256, dtype=np.int32).reshape(2, 128)
    got = k(x, np.int64(2 ** 33), interpret=True)
    assert got.dtype == jnp.int64
    np.testing.assert_array_equal(got, x.astype(np.int64) * 2 ** 33)


@pytest.mark.gpu
def test_int64_strides_gpu():
  with jax.enable_x64(True):
    np.testing.assert_array_equal(jax.jit(int64_stride_times_pid)(np.int64(2 ** 30)),
                                  np.arange(8, dtype=np.int32) * 1024)
    x = jnp.arange(8 * 256, dtype=jnp.float32) % 11
    np.testing.assert_array_equal(jax.jit(int64_stride_rows)(x, jnp.int64(256)), x * 2)
    np.testing.assert_array_equal(jax.jit(liger_rows)(x, jnp.int64(256)), x * 2)


# ---------------------------------------------------------------------- 3. a pipelined loop's own MG402
def _staged(rows, stages, triton=False):
  @mg.mgpu_kernel(out_shape=lambda a, b: S((128, 128), jnp.float32))
  def k(a, b, o):
    a_s = ml.smem((128, rows), a.dtype)
    b_s = ml.smem((rows, 128), b.dtype)
    acc = ml.zeros((128, 128), jnp.float32)
    for i in ml.range(a.shape[1] // rows, stages=stages):
      ml.copy(a.at[:, ml.ds(i * rows, rows)], a_s)
      ml.copy(b.at[ml.ds(i * rows, rows), :], b_s)
      acc = ml.dot(a_s, b_s, acc)
    o[...] = acc

  @mg.mgpu_kernel(out_shape=lambda a, b: S((128, 128), jnp.float32))
  def triton_k(a, b, o):
    a_s, b_s = ml.smem((128, rows), a.dtype), ml.smem((rows, 128), b.dtype)
    acc = ml.zeros((128, 128), jnp.float32)
    for i in tl.range(0, a.shape[1] // rows, num_stages=stages):
      ml.copy(a.at[:, ml.ds(i * rows, rows)], a_s)
      ml.copy(b.at[ml.ds(i * rows, rows), :], b_s)
      acc = tl.dot(a_s, b_s, acc)
    o[...] = acc
  return triton_k if triton else k


_AB = (S((128, 2048), jnp.float16), S((2048, 128), jnp.float16))


@pytest.mark.parametrize("triton", [False, True])
def test_a_loop_whose_fewer_stages_fit_is_mg402_at_its_stages_keyword(triton):
  k = _staged(256, 3, triton)
  with pytest.raises(mg.SmemCapacityError) as info:
    k.check(*_AB)
  e = info.value
  line, col = _line(k, "num_stages=stages" if triton else "stages=stages")
  assert e.code == "MG402" and (e.lineno, e.col_offset) == (line, col), e      # (was the `for` line's start)
  assert e.message.startswith("with stages=3 this loop's buffers need 394240 bytes (a_s 64 KiB, b_s 64 KiB per stage")
  assert e.hint == ("use stages=1 (132096 bytes with the kernel's other buffers) (no loads ahead of use: the loop then"
                    " runs unpipelined); or use smaller tiles: a_s of shape (128, 128) and b_s of shape (128, 128)"
                    " instead of (128, 256) and (256, 128) (the loop's step cut to 1/2, 2 times the trips) fits with"
                    " stages=3, 197632 bytes with the kernel's other buffers"), e.hint
  _staged(256, 1, triton).check(*_AB)           # each hint followed compiles
  _staged(128, 3, triton).check(*_AB)


def test_a_loop_no_stage_count_fits_is_mg402_at_its_largest_buffer_with_the_step_that_fits():
  k = _staged(512, 2)
  with pytest.raises(mg.SmemCapacityError) as info:
    k.check(*_AB)
  e = info.value
  line, col = _line(k, "ml.smem((128, rows), a.dtype)")
  assert e.code == "MG402" and (e.lineno, e.col_offset) == (line, col), e      # (was the loop, "use smaller tiles")
  assert e.message.startswith("with stages=2 this loop's buffers need 525312 bytes (a_s 128 KiB, b_s 128 KiB")
  assert e.hint == ("use smaller tiles: a_s of shape (128, 128) and b_s of shape (128, 128) instead of (128, 512) and"
                    " (512, 128) (the loop's step cut to 1/4, 4 times the trips) fits with stages=2, 132096 bytes with"
                    " the kernel's other buffers"), e.hint
  loop_line, loop_col = _line(k, "for i in")
  assert any(n.startswith(f"{__file__}:{loop_line}:{loop_col}: the pipelined loop (stages=2)") for n in e.notes), e.notes
  _staged(128, 2).check(*_AB)


@pytest.mark.gpu
def test_the_hinted_stages_and_steps_compute_gpu():
  rng = np.random.default_rng(12)
  a = rng.integers(-3, 4, (128, 2048)).astype(jnp.float16)
  b = rng.integers(-3, 4, (2048, 128)).astype(jnp.float16)
  want = a.astype(np.float32) @ b.astype(np.float32)
  for rows, stages in ((256, 1), (128, 3), (128, 2)):
    np.testing.assert_array_equal(np.asarray(jax.jit(_staged(rows, stages))(a, b)), want)


# ---------------------------------------------------------------------- 4. jax.tree_util.Partial's traced keywords
@mg.mgpu_kernel(out_shape=lambda x, alpha: x)
def scaled(x, alpha: ml.scalar, o, *, k: ml.constexpr = 2):
  o[...] = x[...] * alpha * k


X1 = np.ones((128, 64), np.float32)


def call_partial(f, x):
  return f(x, 0.5)


def call_partial_interpreted(f, x):
  return f(x, 0.5, interpret=True)


@pytest.mark.parametrize("key", ["interpret", "k"])
def test_a_partials_traced_keyword_says_so_and_hints_the_call(key):
  from jax.tree_util import Partial
  f = Partial(scaled, interpret=True) if key == "interpret" else Partial(scaled, k=3)
  run = call_partial if key == "interpret" else call_partial_interpreted
  with pytest.raises(mg.SignatureError) as info:
    jax.jit(run)(f, X1)
  e = info.value
  line, col = _line(call_partial if key == "interpret" else call_partial_interpreted, "f(x, 0.5")
  assert e.code == "MG006" and (e.filename, e.lineno, e.col_offset) == (__file__, line, col), e
  shown = "interpret=True" if key == "interpret" else "k=..."
  label = "interpret=" if key == "interpret" else "constexpr k"
  # (was "under jax.jit, mark it static: jax.jit(f, static_argnames=['interpret'])", which a Partial cannot follow)
  assert e.message == (f"scaled: {label} is a traced value: jax.tree_util.Partial(scaled, {shown}) holds its keywords"
                       " as leaves of a pytree, which jax.jit (vmap, scan, ...) traces like arrays"), e.message
  assert e.hint.startswith(f"pass {key} at the call, in the traced function: f(..., {shown}) of a Partial(scaled)")
  assert f"functools.partial(scaled, {shown}) as a static argument (static_argnums)" in e.hint


def test_a_partials_hints_followed_compute():
  import functools
  from jax.tree_util import Partial
  want = X1 * 0.5 * 3
  np.testing.assert_array_equal(jax.jit(lambda f, x: f(x, 0.5, interpret=True, k=3))(Partial(scaled), X1), want)
  np.testing.assert_array_equal(jax.jit(lambda x: scaled(x, 0.5, interpret=True, k=3))(X1), want)
  part = functools.partial(scaled, interpret=True, k=3)
  np.testing.assert_array_equal(jax.jit(call_partial, static_argnums=0)(part, X1), want)


def test_a_traced_interpret_not_of_a_partial_keeps_its_static_argnames_hint():
  with pytest.raises(mg.SignatureError) as info:
    jax.jit(lambda x, i: scaled(x, 0.5, interpret=i))(X1, True)
  assert info.value.hint.startswith("under jax.jit, mark it static: jax.jit(f, static_argnames=['interpret'])")


@pytest.mark.gpu
def test_a_partial_of_a_kernel_through_jit_gpu():
  from jax.tree_util import Partial
  np.testing.assert_array_equal(jax.jit(call_partial)(Partial(scaled), X1), X1)
  np.testing.assert_array_equal(jax.jit(lambda f, x: f(x))(Partial(scaled, alpha=2.0), X1), X1 * 4)


# ---------------------------------------------------------------------- 5. warp-specialised / ping-pong, 8-bit and TF32
import async_fuzz2      # noqa: E402  (tests/ on the path, as for probe_util)

_WS = [(dt, loop, a) for dt in ("int8", "float8_e4m3fn", "float8_e5m2", "float32") for loop in ("ws", "pingpong")
       for a in ("tma", "load", "carried")]


@pytest.mark.parametrize("dt,loop,a", _WS)
def test_warp_specialised_and_pingpong_loops_of_8_bit_and_tf32_operands(dt, loop, a):
  """Each structure forced (seeds 0-1): interpret mode against NumPy; a register A staged through SMEM in a ping-pong
  loop is the MG503 that says so (below); one seed in two exported for CUDA."""
  for seed in (0, 1):
    gen = async_fuzz2.Gen(seed, dt=dt, loop=loop, a_mode=a, acc_mode="chain", epi="plain")
    cls, detail = async_fuzz2.run(gen, build=seed == 0)
    if loop == "pingpong" and a != "tma" and cls == "refused":
      assert detail.startswith("MG503") and "is one the tensor cores read from SMEM here" in detail, detail
      continue
    assert cls == "ok", (seed, cls, detail, gen.source)


def test_the_focused_draw_of_warp_specialised_loops():
  got = {}
  for seed in range(12):
    gen = async_fuzz2.ws_gen(seed)
    cls, detail = async_fuzz2.run(gen, build=seed % 4 == 0)
    assert cls in ("ok", "refused"), (seed, cls, detail, gen.source)
    if cls == "refused":       # only the ping-pong loop's meetings, each at the user's line with its hint
      assert detail.startswith("MG503") and "loop:pingpong" in gen.tags, (seed, detail)
    got[cls] = got.get(cls, 0) + 1
  assert got.get("ok", 0) >= 6, got


@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 32), jnp.int32), block=256)
def pingpong_int8_register_a(a, b, o):
  b_s = ml.smem((32, 32), jnp.int8)
  acc = ml.zeros((128, 32), jnp.int32)
  for k in ml.range(a.shape[1] // 32, stages=2, warp_specialize=True, pingpong=True):
    ml.copy(b.at[:, ml.ds(k * 32, 32)], b_s)
    av = a.at[:, ml.ds(k * 32, 32)][...]
    acc = ml.dot(av, b_s.T, acc)
  o[...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 32), jnp.int32), block=256)
def pingpong_int8_hint_followed(a, b, o):
  b_s = ml.smem((32, 32), jnp.int8)
  av_s = ml.smem((128, 32), jnp.int8)
  acc = ml.zeros((128, 32), jnp.int32)
  for k in ml.range(a.shape[1] // 32, stages=2, warp_specialize=True, pingpong=True):
    ml.copy(b.at[:, ml.ds(k * 32, 32)], b_s)
    ml.copy(a.at[:, ml.ds(k * 32, 32)], av_s)
    acc = ml.dot(av_s, b_s.T, acc)
  o[...] = acc


def _int8_pair(rng):
  return rng.integers(-8, 8, (128, 96)).astype(np.int8), rng.integers(-8, 8, (32, 96)).astype(np.int8)


def test_a_staged_register_a_in_a_pingpong_loop_says_so_and_hints_the_tma_load():
  a, b = _int8_pair(np.random.default_rng(13))
  with pytest.raises(mg.WarpSpecializeError) as info:
    pingpong_int8_register_a(a, b, interpret=True)
  e = info.value
  line, col = _line(pingpong_int8_register_a, "ml.dot(av, b_s.T, acc)")
  assert e.code == "MG503" and (e.filename, e.lineno, e.col_offset) == (__file__, line, col), e
  # (was "here every compute thread of the CTA would have to meet ...", hinting to move the dot out of the loop)
  assert e.message.startswith("this ml.dot's A, av (int8[128, 32] in registers), is one the tensor cores read from"
                              " SMEM here, so the compiler stages it through an SMEM buffer"), e.message
  assert e.hint == ("load A into SMEM by TMA, as B is: av_s = ml.smem((128, 32), jnp.int8) before the loop,"
                    " ml.copy(a.at[:, ml.ds(k * 32, 32)], av_s) in it, and ml.dot(av_s, ...); or drop pingpong=True")
  got = pingpong_int8_hint_followed(a, b, interpret=True)          # the hint followed
  np.testing.assert_array_equal(np.asarray(got), a.astype(np.int32) @ b.astype(np.int32).T)
  export(pingpong_int8_hint_followed, a, b)


@pytest.mark.gpu
def test_warp_specialised_and_pingpong_8_bit_and_tf32_gpu():
  a, b = _int8_pair(np.random.default_rng(14))
  got = jax.jit(pingpong_int8_hint_followed)(a, b)
  np.testing.assert_array_equal(np.asarray(got), a.astype(np.int32) @ b.astype(np.int32).T)
  import diff_fuzz
  for dt, loop, a_mode in _WS:
    for seed in (0, 1):
      g = async_fuzz2.Gen(seed, dt=dt, loop=loop, a_mode=a_mode, acc_mode="chain", epi="plain")
      if loop == "pingpong" and a_mode != "tma" and async_fuzz2.run(g, build=False)[0] == "refused":
        continue
      kernel = diff_fuzz.load(g)
      for got, want in zip(jax.jit(kernel)(*g.args), g.refs):
        assert not async_fuzz2.compare(got, want, g.tol_dtype), (dt, loop, a_mode, seed, g.source)


# ---------------------------------------------------------------------- 6. a register product whose chunks overflow SMEM
@mg.mgpu_kernel(out_shape=lambda x, w: S((16, 256), jnp.float32), grid=(2,))
def small_rows_einsum(x, w, o):           # the tensor-core fuzzer's seed 1779: (8, 128) by (128, 256), float32
  i = ml.program_id(0)
  o[ml.ds(i * 8, 8), :] = jnp.einsum("mk,kn->mn", x[ml.ds(i * 8, 8), :], w[...])


def _xw(seed):
  rng = np.random.default_rng(seed)
  return rng.integers(-3, 4, (16, 128)).astype(np.float32), rng.integers(-3, 4, (128, 256)).astype(np.float32)


def test_a_product_whose_register_chunks_overflow_smem_takes_the_tensor_cores():
  x, w = _xw(15)
  got = small_rows_einsum(x, w, interpret=True)       # (was MG402 of the chunks' 128 KiB scratches)
  np.testing.assert_array_equal(np.asarray(got), x @ w)
  assert "= dot " in small_rows_einsum.typed_ir(x, w)
  export(small_rows_einsum, x, w)
  import dot_fuzz
  assert dot_fuzz.run(dot_fuzz.Gen(1779), build=False)[0] == "ok"


@pytest.mark.gpu
def test_a_product_whose_register_chunks_overflow_smem_gpu():
  x, w = _xw(16)
  np.testing.assert_array_equal(np.asarray(jax.jit(small_rows_einsum)(x, w)), x @ w)


@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 64), jnp.float32), block=256)
def pingpong_sliced_a(a, b, o):
  b_s = ml.smem((32, 64), b.dtype)
  acc = ml.zeros((128, 64), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2, warp_specialize=True, pingpong=True):
    ml.copy(b.at[ml.ds(k * 64, 32), :], b_s)
    w = a.at[:, ml.ds(k * 64, 64)][...]
    acc = ml.dot(w[:, 32:], b_s, acc)
  o[...] = acc


def test_a_per_trip_slice_in_a_pingpong_loop_hints_reading_the_window():
  with pytest.raises(mg.WarpSpecializeError) as info:
    pingpong_sliced_a.check(S((128, 128), jnp.float16), S((128, 64), jnp.float16))
  e = info.value
  line, col = _line(pingpong_sliced_a, "w[:, 32:]")
  assert e.code == "MG503" and (e.lineno, e.col_offset) == (line, col), e
  assert e.message.startswith("here every compute thread of the CTA would have to meet"), e.message
  # (was "move this out of the loop (SMEM written from registers, ...)", for a value each trip computes)
  assert e.hint.startswith("this moves a register tile's elements between threads, through SMEM: read the part each"
                           " trip needs straight from memory instead"), e.hint
