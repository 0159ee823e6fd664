"""Probe 38g (a user's kernels around seven known gaps): number masks as jnp's truth, keyword
inputs at the call, lambdas in a kernel body, keepdims reductions of 3-D tiles, returns under a
run-time condition in a helper's loop, split-K accumulation into an output."""

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


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _rand(shape, seed, dtype=F32):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


# ---------------------------------------------------------------- number masks are their truth, as jnp's
@mg.mgpu_kernel(out_shape=lambda x, m: (x, x, S((x.shape[0],), x.dtype), S((x.shape[0],), x.dtype)), grid=(1,))
def masked_row_stats(x, m, sm, lsm, lse, total):
  """An attention mask stored as int8/int32/float (1 keep, 0 drop), used as jnp would use it."""
  v, keep = x[...], m[...]
  sm[...] = ml.softmax(v, axis=1, where=keep)
  lsm[...] = ml.log_softmax(v, axis=1, where=keep)
  lse[...] = ml.logsumexp(v, axis=1, where=keep)
  total[...] = ml.sum(ml.where(keep, v, 0.0), axis=1)


@pytest.mark.parametrize("mdtype", [jnp.int32, jnp.int8, jnp.uint8, F32])
def test_number_masks_select_where_non_zero_as_jnp(mdtype):
  """ml.where(m, ...) and where=m of an int or float mask were MG003 (must be a boolean): jnp and
  jax.nn treat a number mask as its truth (non-zero keeps), and so does tl.where."""
  x = _rand((64, 128), 0)
  m = jnp.asarray(np.random.default_rng(1).integers(0, 3, (64, 128)), mdtype).at[:, 0].set(2)
  got = masked_row_stats(x, m, interpret=True)
  b = m != 0
  want = (jax.nn.softmax(x, axis=1, where=b), jax.nn.log_softmax(x, axis=1, where=b),
          jax.nn.logsumexp(x, axis=1, where=b), jnp.sum(x, axis=1, where=b))
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
  _export(masked_row_stats, S(x.shape, x.dtype), S(m.shape, m.dtype))


@pytest.mark.gpu
def test_gpu_number_masks_select_where_non_zero_as_jnp():
  x = _rand((64, 128), 2)
  m = jnp.asarray(np.random.default_rng(3).integers(0, 3, (64, 128)), jnp.int8).at[:, 0].set(1)
  got = jax.jit(masked_row_stats)(x, m)
  b = m != 0
  want = (jax.nn.softmax(x, axis=1, where=b), jax.nn.log_softmax(x, axis=1, where=b),
          jax.nn.logsumexp(x, axis=1, where=b), jnp.sum(x, axis=1, where=b))
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- inputs passed by keyword
@mg.mgpu_kernel(out_shape=lambda x, y, n: x, grid=lambda x, y, n: (x.shape[0] // 128,))
def axpy(x, y, n: ml.scalar, out, *, alpha: ml.constexpr = 2.0):
  r = ml.ds(ml.program_id(0) * 128, 128)
  out.at[r][...] = alpha * x.at[r][...] + y.at[r][...] * n


def test_inputs_by_keyword_take_their_places():
  """`axpy(x, y=y, n=3.0)` was MG006 (no constexpr parameter 'y'): inputs by keyword are taken, in
  eager calls, under jax.jit and jax.vmap, and by typed_ir/mlir/check and jax.export."""
  x, y = _rand((256, 32), 4), _rand((256, 32), 5)
  want = 3.0 * x + y * 0.5
  for got in (axpy(x, y=y, n=0.5, alpha=3.0, interpret=True), axpy(n=0.5, y=y, x=x, alpha=3.0, interpret=True),
              jax.jit(lambda a, b: axpy(a, y=b, n=0.5, alpha=3.0, interpret=True))(x, y),
              jax.vmap(lambda a, b: axpy(x=a, y=b, n=0.5, alpha=3.0, interpret=True))(x[None], y[None])[0]):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
  specs = S(x.shape, F32), S(y.shape, F32), S((), F32)
  assert "mosaic_gpu" in str(_export(lambda a, b, c: axpy(a, n=c, y=b), *specs))
  axpy.check(specs[0], y=specs[1], n=specs[2])
  assert axpy.mlir(specs[0], y=specs[1], n=specs[2]) == axpy.mlir(*specs)


def test_inputs_by_keyword_that_cannot_be_placed_are_named():
  x = _rand((256, 32), 4)
  for call, message, hint in (
      (lambda: axpy(x, x, 1.0, out=x, interpret=True), "axpy: out is an output, passed by keyword",
       "out is an output: outputs are returned, not passed (out_shape describes them): call axpy(x, y, n)"),
      (lambda: axpy(x, x, n=1.0, y=x, interpret=True), "axpy: input y is given twice, by position and by keyword",
       "y is input 1, given by position already: drop y="),
      (lambda: axpy(x, n=1.0, interpret=True), "axpy: input y not given (before n=)",
       "pass every input, by position or by keyword: axpy(x, y, n)")):
    with pytest.raises(mg.SignatureError) as info:
      call()
    assert (info.value.message, info.value.hint) == (message, hint)
    assert info.value.lineno == call.__code__.co_firstlineno


# ---------------------------------------------------------------- lambdas and defs in a kernel body
@mg.mgpu_kernel(out_shape=lambda x: (x, S((x.shape[1],), x.dtype)), grid=(1,))
def local_helpers(x, act, sq_sum):
  """A Triton/Pallas author's local helpers: a lambda closing over a constant, one with a default,
  a def with a run-time if, one passed to an @ml.inline helper, a lambda for sorted's key."""
  c = 0.7978845608
  gelu = ml.inline(lambda t: 0.5 * t * (1.0 + ml.tanh(c * (t + 0.044715 * t * t * t))))   # (as at module level)
  c = 0.7978845608                   # (read at the call, as Python's closures read it)
  sq = lambda v, p=2: v ** p

  def clipped(v, hi):
    if hi > 0:
      return ml.minimum(v, hi)
    else:
      return v
  order = sorted([1, 0], key=lambda k: -k)
  act[...] = _apply(lambda t: clipped(gelu(t), 2.0), x)
  acc = ml.zeros((x.shape[1],), F32)
  for i in range(x.shape[0] // order[0]):
    acc = acc + sq(x.at[i][...])
  sq_sum[...] = acc


@ml.inline
def _apply(f, ref):
  return f(ref[...])


def test_lambdas_and_defs_in_a_kernel_are_helpers():
  """`f = lambda t: ...` and `def f(...)` in a kernel body were MG001 (a lambda / a nested function
  is not supported): each is traced where it is called, as an @ml.inline helper, its free names
  read at the call (Python's closures)."""
  x = _rand((128, 64), 6)
  act, sq_sum = local_helpers(x, interpret=True)
  np.testing.assert_allclose(np.asarray(act), np.minimum(jax.nn.gelu(x, approximate=True), 2.0), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(np.asarray(sq_sum), np.sum(np.asarray(x) ** 2, 0), rtol=1e-5)
  _export(local_helpers, S(x.shape, F32))


@pytest.mark.gpu
def test_gpu_lambdas_and_defs_in_a_kernel_are_helpers():
  x = _rand((128, 64), 7)
  act, sq_sum = jax.jit(local_helpers)(x)
  np.testing.assert_allclose(np.asarray(act), np.minimum(jax.nn.gelu(x, approximate=True), 2.0), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(np.asarray(sq_sum), np.sum(np.asarray(x) ** 2, 0), rtol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def fori_with_lambda(x, out):
  out[...] = jax.lax.fori_loop(0, 3, lambda i, a: a * 2 + i, x[...])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def fori_followed(x, out):
  carry = x[...]
  for j in range(0, 3):
    carry = (lambda i, a: a * 2 + i)(j, carry)
  out[...] = carry


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def lambda_arity(x, out):
  f = lambda a, b: a + b
  out[...] = f(x[...])


def test_lax_control_with_a_lambda_body_runs_as_its_loop():
  """The fori_loop hint wrote `carry = lambda i, a: a * 2 + i(j, carry)` (not Python); it calls the
  lambda in place, which runs; since probe 48h the call itself runs as that loop (lax_flow.py)."""
  spec = S((128,), F32)
  fori_with_lambda.check(spec)
  x = _rand((128,), 8)
  want = ((x * 2) * 2 + 1) * 2 + 2
  np.testing.assert_allclose(np.asarray(fori_followed(x, interpret=True)), want, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(fori_with_lambda(x, interpret=True)), want, rtol=1e-6)
  with pytest.raises(mg.KernelTypeError) as info:
    lambda_arity.check(spec)
  assert info.value.message == "f(...): missing a required argument: 'b'"
  assert info.value.hint == "f(a, b)"
  assert (info.value.lineno, info.value.col_offset) == (_line_of("out[...] = f(x[...])"), 13)


# ---------------------------------------------------------------- keepdims reductions of 3-D tiles
@mg.mgpu_kernel(out_shape=lambda x: (x, x, S(x.shape[:2] + (1,), jnp.int32)), grid=(1,))
def heads_softmax_norm(x, sm, ln, am):
  """Per-head row statistics of a (heads, rows, cols) tile, written as jnp would write them."""
  v = x[...]
  e = ml.exp(v - ml.max(v, axis=-1, keepdims=True))
  sm[...] = e / ml.sum(e, axis=-1, keepdims=True)
  ln[...] = (v - ml.mean(v, axis=0, keepdims=True)) * ml.rsqrt(ml.var(v, axis=0, keepdims=True) + 1e-5)
  am[...] = ml.argmax(v, axis=2, keepdims=True)


def _heads_want(x):
  e = jnp.exp(x - x.max(-1, keepdims=True))
  return (e / e.sum(-1, keepdims=True), (x - x.mean(0, keepdims=True)) * jax.lax.rsqrt(x.var(0, keepdims=True) + 1e-5),
          jnp.argmax(x, axis=2, keepdims=True))


def test_keepdims_reductions_of_3d_tiles_reduce_their_2d_reshape():
  """ml.max(v, axis=-1, keepdims=True) of a (4, 32, 64) tile was MG204 (partial reductions work on 1-D and
  2-D tensors) though the same reduction without keepdims compiled: a leading or trailing run of axes
  reduces the 2-D reshape, the result reshaped to the tile's rank."""
  x = _rand((4, 32, 64), 9)
  for g, w in zip(heads_softmax_norm(x, interpret=True), _heads_want(x)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
  _export(heads_softmax_norm, S(x.shape, F32))


@pytest.mark.gpu
def test_gpu_keepdims_reductions_of_3d_tiles_reduce_their_2d_reshape():
  x = _rand((4, 32, 64), 10)
  for g, w in zip(jax.jit(heads_softmax_norm)(x), _heads_want(x)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- returns in a helper's loops
@ml.inline
def _find(ref, target):
  for a in range(ref.shape[0]):
    for b in range(ref.shape[1]):
      if ref[a, b] == target:
        return a * ref.shape[1] + b
  return -1


@ml.inline
def _first_above(v_ref, n, thr):
  best = v_ref[0] * 0.0
  for j in ml.static_range(n):
    if v_ref[j] > thr:
      return v_ref[j] + best
  return best - 1.0


@mg.mgpu_kernel(out_shape=lambda x, y: (S((x.shape[0],), jnp.int32), S((y.shape[0],), y.dtype)),
                grid=lambda x, y: (x.shape[0],))
def searches(x, y, where_5, first_big):
  i = ml.program_id(0)
  where_5[i] = _find(x.at[i], 5)
  first_big[i] = _first_above(y.at[i], 8, 0.5)


def _searches_want(x, y):
  flat = np.asarray(x).reshape(x.shape[0], -1)
  a = [int(np.argmax(r == 5)) if (r == 5).any() else -1 for r in flat]
  b = [r[np.argmax(r > 0.5)] if (r > 0.5).any() else -1.0 for r in np.asarray(y)]
  return np.array(a, np.int32), np.array(b, np.float32)


def test_returns_under_run_time_conditions_in_a_helpers_loops_end_it():
  """A return under a run-time if in a helper's range loop was MG001, and in its unrolled loop MG001 with a
  hint (r = ml.where(cond, a, r)) that, followed, kept the last hit, not the first: each now ends the
  helper, as in Python (the last return's value, computable before the loop, gives the carry its type)."""
  x = jnp.asarray(np.random.default_rng(11).integers(0, 8, (6, 4, 8)), jnp.int32)
  x = x.at[0].set(0)                  # (a row with no hit)
  y = _rand((6, 8), 12).at[1].set(-1.0)
  for g, w in zip(searches(x, y, interpret=True), _searches_want(x, y)):
    np.testing.assert_array_equal(np.asarray(g), w)
  _export(searches, S(x.shape, jnp.int32), S(y.shape, F32))


@pytest.mark.gpu
def test_gpu_returns_under_run_time_conditions_in_a_helpers_loops_end_it():
  x = jnp.asarray(np.random.default_rng(13).integers(0, 8, (6, 4, 8)), jnp.int32)
  y = _rand((6, 8), 14)
  for g, w in zip(jax.jit(searches)(x, y), _searches_want(x, y)):
    np.testing.assert_array_equal(np.asarray(g), w)


# ---------------------------------------------------------------- split-K: c[...] += partial
def _split_k(out_dtype, followed):
  @mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), out_dtype), grid=lambda a, b: (a.shape[1] // 128,))
  def split_k(a, b, c):
    k = ml.program_id(0)
    a_s = ml.smem((128, 128), a.dtype)
    b_s = ml.smem((128, 128), b.dtype)
    ml.copy(a.at[:, ml.ds(k * 128, 128)], a_s)
    ml.copy(b.at[ml.ds(k * 128, 128), :], b_s)
    partial = ml.dot(a_s, b_s).astype(c.dtype)
    if followed:
      ml.atomic_add(c, partial)
    else:
      c[...] += partial
  return split_k


def test_split_k_into_an_output_hints_atomics_first():
  """`c[...] += partial` of programs splitting K first said MG601 with a hint to keep the sum in
  registers or alias an input: it names the atomic add (with the user's window and part) and, for a
  float16 output, a float32 one; followed, the sum is jnp's."""
  specs = S((128, 512), jnp.float16), S((512, 128), jnp.float16)
  for dt, narrow in ((F32, ""), (jnp.float16, " (each float16 add rounds: for a sum of many parts, give c a float32"
                                                " out_shape and convert after the call)")):
    with pytest.raises(mg.UninitializedReadError) as info:
      _split_k(dt, False).check(*specs)
    e = info.value
    assert (e.lineno, e.col_offset) == (_line_of("      c[...] += partial"), 6)
    assert e.message == "c is read before this program writes it: outputs start uninitialised"
    assert e.hint == ("to add the parts of several programs into c (split-K), add them atomically: ml.atomic_add(c,"
                      f" partial) (an output only atomics update starts at 0){narrow}; within one program, keep the"
                      " running value in registers and store it once (acc = acc + ... in the loop, c[...] = acc after)")
  a, b = _rand((128, 512), 15, jnp.float16), _rand((512, 128), 16, jnp.float16)
  want = np.asarray(a, np.float32) @ np.asarray(b, np.float32)
  np.testing.assert_allclose(np.asarray(_split_k(F32, True)(a, b, interpret=True)), want, rtol=1e-4, atol=1e-3)
  _export(_split_k(F32, True), *specs)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (a.shape[0] // 128, 4))
def split_k_tiles(a, b, c):
  i, k = ml.program_id(0), ml.program_id(1)
  a_s = ml.smem((128, 128), a.dtype)
  b_s = ml.smem((128, 128), b.dtype)
  ml.copy(a.at[ml.ds(i * 128, 128), ml.ds(k * 128, 128)], a_s)
  ml.copy(b.at[ml.ds(k * 128, 128), :], b_s)
  c.at[ml.ds(i * 128, 128), :][...] += ml.dot(a_s, b_s)


def test_split_k_into_a_window_hints_the_atomic_of_that_window():
  with pytest.raises(mg.UninitializedReadError) as info:
    split_k_tiles.check(S((256, 512), jnp.float16), S((512, 128), jnp.float16))
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("c.at[ml.ds(i * 128, 128), :][...] += ml.dot(a_s, b_s)"), 2)
  assert e.message == "c is read in program (0, 0, 0) before this program writes it: outputs start uninitialised"
  assert e.hint.startswith("to add the parts of several programs into c (split-K), add them atomically:"
                           " ml.atomic_add(c.at[ml.ds(i * 128, 128), :], ml.dot(a_s, b_s)) (an output only")


@pytest.mark.gpu
def test_gpu_split_k_hint_followed():
  a, b = _rand((128, 512), 17, jnp.float16), _rand((512, 128), 18, jnp.float16)
  want = np.asarray(a, np.float32) @ np.asarray(b, np.float32)
  np.testing.assert_allclose(np.asarray(jax.jit(_split_k(F32, True))(a, b)), want, rtol=1e-4, atol=1e-3)


# ---------------------------------------------------------------- 8-bit integer scalars as offsets and counts
@mg.mgpu_kernel(out_shape=lambda off, x, n, codes: (S((off.shape[0] - 1, x.shape[1]), x.dtype), S((x.shape[1],), x.dtype),
                                                   codes), grid=lambda off, x, n, codes: (off.shape[0] - 1,))
def byte_offsets(off, x, n: ml.scalar, codes, seg, window, wrapped):
  """Segment bounds stored as uint8/int8 (a compact ragged layout), an int8 count, offsets computed from them."""
  g = ml.program_id(0)
  acc = ml.zeros((x.shape[1],), F32)
  for r in range(off[g], off[g + 1] - 0):
    acc = acc + x.at[r][...]
  seg.at[g][...] = acc
  if g == 0:
    w = ml.zeros((x.shape[1],), F32)
    n32 = n.astype(jnp.int32)      # (n + 4 in n's 8 bits can wrap: MG003 since probe 43b)
    for r in range(n32, n32 + 4):
      w = w + x.at[ml.ds(r * 2, 1)][...].reshape(x.shape[1])
    window[...] = w
    wrapped[...] = (codes[...] * 3 + 7) // 2 - codes[...] % 5 + abs(-codes[...])     # jnp's wrap modulo 2**8


def _bytes_want(off, x, n, codes):
  o = np.asarray(off).astype(np.int64)
  seg = np.stack([np.asarray(x)[o[g]:o[g + 1]].sum(0) for g in range(len(o) - 1)])
  rows = [(int(n) + k) * 2 for k in range(4)]
  return seg, np.asarray(x)[rows].sum(0), np.asarray((codes * 3 + 7) // 2 - codes % 5 + jnp.abs(-codes))


@pytest.mark.parametrize("dt,n", [(jnp.uint8, 120), (jnp.int8, 100)])
def test_8bit_integers_as_offsets_and_bounds(dt, n):
  """`range(n, n + 4)` and `off[...] * 3 + 7` of int8/uint8 values were MG106 (no register arithmetic on
  8-bit types): 8-bit integer + - * // % compute in 32 bits and wrap back, as jnp's."""
  off = jnp.asarray([0, 3, 90, 126] if dt == jnp.int8 else [0, 5, 130, 250], dt)
  x = _rand((300, 128), 19)
  codes = jnp.asarray(np.random.default_rng(21).integers(np.iinfo(dt).min, np.iinfo(dt).max + 1, 128), dt)
  got = byte_offsets(off, x, dt(n), codes, interpret=True)
  for g, w in zip(got, _bytes_want(off, x, dt(n), codes)):
    np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)
  _export(byte_offsets, S(off.shape, dt), S(x.shape, F32), S((), dt), S(codes.shape, dt))


@pytest.mark.gpu
@pytest.mark.parametrize("dt,n", [(jnp.uint8, 120), (jnp.int8, 100)])
def test_gpu_8bit_integers_as_offsets_and_bounds(dt, n):
  off = jnp.asarray([0, 3, 90, 126] if dt == jnp.int8 else [0, 5, 130, 250], dt)
  x = _rand((300, 128), 20)
  codes = jnp.asarray(np.random.default_rng(22).integers(np.iinfo(dt).min, np.iinfo(dt).max + 1, 128), dt)
  for g, w in zip(jax.jit(byte_offsets)(off, x, dt(n), codes), _bytes_want(off, x, dt(n), codes)):
    np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), x.dtype), grid=(1,))
def function_by_run_time_if(x, out, *, followed: ml.constexpr = False):
  if x[0, 0] > 0:
    f = lambda v: v + 1
    r = f(x.at[0][...])
  else:
    f = lambda v: v - 1
    r = f(x.at[0][...])
  out[...] = r if followed else f(x.at[0][...])


def test_a_function_chosen_by_a_run_time_if_is_named_where_it_is_called():
  """Two lambdas bound to one name by a run-time if said `f is a Python LocalFunction after one branch
  ... and a Python LocalFunction after the other` at the if, whose hint (give f the same kind of value)
  cannot be followed; it is an error where f is called after the if, and calls in the branches work."""
  with pytest.raises(mg.UnboundNameError) as info:
    function_by_run_time_if.check(S((8, 128), F32))
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("out[...] = r if followed else f(x.at[0][...])"), 32)
  assert e.message == (f"f is a different function on each path through the run-time if at line"
                       f" {_line_of('  if x[0, 0] > 0:')}; a function cannot be chosen at run time")
  assert e.hint == ("call f inside each branch (r = f(v) in both), or call both after the if and select the values:"
                    " ml.where(cond, f(v), g(v))")
  for sign in (1.0, -1.0):
    x = _rand((8, 128), 23).at[0, 0].set(sign)
    np.testing.assert_allclose(np.asarray(function_by_run_time_if(x, followed=True, interpret=True)),
                               np.asarray(x[0] + sign), rtol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x, m: (S((x.shape[0],), x.dtype), S((x.shape[0],), jnp.bool_), S((x.shape[0],), jnp.bool_),
                                        S((x.shape[0],), jnp.int32), S((x.shape[1],), x.dtype)), grid=(1,))
def masked_reductions(x, m, s, an, al, cnt, cols):
  v, k = x[...], m[...]
  s[...] = ml.sum(v, axis=1, where=k)
  an[...] = ml.any(v > 1.5, axis=1, where=k != 0)
  al[...] = ml.all(v > -2.0, axis=1, where=k == 1)
  cnt[...] = ml.sum(v > 0, axis=1, where=k)
  cols[...] = v.sum(axis=0, where=ml.arange(x.shape[0])[:, None] < 10)


def _masked_want(x, m):
  b = m != 0
  return (jnp.sum(x, 1, where=b), jnp.any(x > 1.5, 1, where=b), jnp.all(x > -2.0, 1, where=m == 1),
          jnp.sum(x > 0, 1, where=b), jnp.sum(x, 0, where=jnp.arange(x.shape[0])[:, None] < 10))


def test_sum_any_all_take_jnps_where():
  """ml.sum(v, axis=1, where=m) was MG003 (unexpected keyword), its hint a select that an int mask then
  failed: sum, any and all take where= (an int mask by its truth), as jnp's."""
  x = _rand((64, 128), 24)
  m = jnp.asarray(np.random.default_rng(25).integers(0, 3, (64, 128)), jnp.int32)
  for g, w in zip(masked_reductions(x, m, interpret=True), _masked_want(x, m)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
  _export(masked_reductions, S(x.shape, F32), S(m.shape, jnp.int32))


@pytest.mark.gpu
def test_gpu_sum_any_all_take_jnps_where():
  x = _rand((64, 128), 26)
  m = jnp.asarray(np.random.default_rng(27).integers(0, 3, (64, 128)), jnp.int32)
  for g, w in zip(jax.jit(masked_reductions)(x, m), _masked_want(x, m)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda n, x: S((x.shape[1],), x.dtype), grid=(1,))
def both_counts(n, x, out, *, followed: ml.constexpr = False):
  if followed:
    if (n[0] != 0) & (n[1] != 0):
      out[...] = x.at[0][...]
    else:
      out[...] = x.at[1][...]
  else:
    if n[0] and n[1]:
      out[...] = x.at[0][...]
    else:
      out[...] = x.at[1][...]


def test_and_of_run_time_numbers_is_their_truth():
  """`if n[0] and n[1]:` of int32 counts hinted `n[0] & n[1]`, whose bits (2 & 5 is 0) are not Python's
  truth: followed, it took the other branch. The hint compared each with 0; since probe 39a an if's
  and/or takes its numbers by their truth, as that comparison."""
  x = _rand((8, 128), 28)
  for n, row in (([2, 5], 0), ([0, 5], 1), ([2, 0], 1)):
    np.testing.assert_array_equal(np.asarray(both_counts(jnp.asarray(n, jnp.int32), x, interpret=True)),
                                  np.asarray(x[row]))
    got = both_counts(jnp.asarray(n, jnp.int32), x, followed=True, interpret=True)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(x[row]))
