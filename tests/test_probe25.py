"""Probe 25 (sixteenth session: helpers porting Triton's tutorials, stencils and convolutions,
data-dependent kernels, reductions of every shape; the attention backward's SMEM variants on the
H200): valid kernels refused, and an SMEM plan the GPU could not launch."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- float8_e5m2 max and min along an axis
def _reducer(fn, axis):
  @mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1 - axis],), x.dtype))
  def k(x, out):
    out[...] = fn(x[...], axis=axis)
  return k


@pytest.mark.parametrize("dtype", [jnp.float8_e5m2, jnp.float8_e4m3fn])
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("axis", [0, 1])
def test_float8_max_and_min_along_an_axis_keep_the_dtype_and_its_infinities(dtype, op, axis):
  """float8_e5m2 was refused (MG106) where float8_e4m3fn, argmax and cummax of it worked; its
  +-inf must come back as +-inf, not the saturated +-57344."""
  k = _reducer(getattr(ml, op), axis)
  x = np.random.default_rng(axis).standard_normal((16, 128)).astype(np.float32) * 100
  x[3, 5], x[4, 7], x[5, 9] = np.inf, -np.inf, np.nan
  x = jnp.asarray(x).astype(dtype)
  got = np.asarray(k(x, interpret=True).astype(F32))
  want = np.asarray(getattr(jnp, op)(x.astype(F32), axis=axis).astype(dtype).astype(F32))
  np.testing.assert_array_equal(got, want)
  if dtype == jnp.float8_e5m2:
    assert np.isinf(got).any()
  assert "mosaic_gpu" in _export(k, S(x.shape, x.dtype))


# ---------------------------------------------------------------- comprehensions with several for clauses
@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype))
def window_taps(x, out):
  vs = [x.at[a, ml.ds(b, 128)][...] * (a + 1) for a in ml.static_range(3) for b in range(a + 1) if a + b != 3]
  out[...] = sum(vs)


def test_a_comprehension_with_several_for_clauses_nests_them_as_python():
  """The taps of a window, `[... for a in ... for b in ...]`, were MG001; a later clause may use an
  earlier name, and an if filters the pairs."""
  x = jnp.asarray(np.random.default_rng(0).standard_normal((3, 131)), F32)
  want = sum(x[a, b:b + 128] * (a + 1) for a in range(3) for b in range(a + 1) if a + b != 3)
  np.testing.assert_allclose(np.asarray(window_taps(x, interpret=True)), np.asarray(want), rtol=1e-6)
  assert "mosaic_gpu" in _export(window_taps, S(x.shape, x.dtype))


@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype))
def taps_loop_name_kept(x, out):
  a = 5
  vs = [x.at[a, ml.ds(0, 128)][...] for a in ml.static_range(2) for b in ml.static_range(2)]
  out[...] = sum(vs) * a


def test_the_names_of_a_nested_comprehension_do_not_leak():
  x = jnp.asarray(np.random.default_rng(1).standard_normal((2, 128)), F32)
  got = taps_loop_name_kept(x, interpret=True)
  np.testing.assert_allclose(np.asarray(got), np.asarray((x[0] * 2 + x[1] * 2) * 5), rtol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype))
def taps_runtime_if(x, out):
  vs = [x.at[a, ml.ds(b, 128)][...] for a in ml.static_range(2) for b in ml.static_range(2) if x.at[0, 0][...] > 0]
  out[...] = sum(vs)


def test_a_runtime_if_in_the_second_for_clause_is_still_an_error():
  expect(taps_runtime_if, [S((2, 130), F32)], mg.KernelTypeError, "x.at[0, 0][...] > 0",
         "a comprehension's if must be static", hint="select runtime values with ml.where")


# ---------------------------------------------------------------- the SMEM a kernel may plan
@mg.mgpu_kernel(out_shape=lambda x: x)
def smem_bytes(x, out, *, n: ml.constexpr):
  big = ml.smem((n,), jnp.float32)
  big.at[0:128][...] = x[...]
  out[...] = big.at[0:128][...]


def test_buffers_of_exactly_227_kib_are_refused():
  """A kernel whose plan took exactly the 227 KiB a CTA may opt in to failed to launch on the H200
  with a raw INTERNAL: invalid argument (Mosaic GPU's module holds static SMEM too); 16 bytes less
  ran (benchmarks/probe_smem_limit.py)."""
  builds(smem_bytes, S((128,), F32), n=(227 * 1024 - 16) // 4)
  expect(smem_bytes, [S((128,), F32)], mg.SmemCapacityError, "ml.smem((n,), jnp.float32)",
         "the kernel's SMEM needs 232448 bytes (big 227 KiB, plus barriers and alignment), more than the"
         " 232432 bytes (227 KiB less 16 bytes) a kernel's buffers can use", n=227 * 1024 // 4)


# ---------------------------------------------------------------- *args and **kwargs in calls
@ml.inline
def _scaled_sum(a, b, w, *, bias):
  return (a + b) * w + bias


@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype))
def spread_args(x, out):
  rows = tuple(x.at[r][...] for r in ml.static_range(2))
  opts = {"bias": 1.0}
  out[...] = _scaled_sum(*rows, 3.0, **opts) + ml.maximum(*rows)


def test_calls_spread_static_tuples_and_dicts():
  """`f(*bufs, acc)` was MG001 ("*args/**kwargs in a call")."""
  x = jnp.asarray(np.random.default_rng(2).standard_normal((2, 128)), F32)
  want = (x[0] + x[1]) * 3.0 + 1.0 + jnp.maximum(x[0], x[1])
  np.testing.assert_allclose(np.asarray(spread_args(x, interpret=True)), np.asarray(want), rtol=1e-6)
  assert "mosaic_gpu" in _export(spread_args, S(x.shape, x.dtype))


@mg.mgpu_kernel(out_shape=lambda x: x)
def spread_a_tensor(x, out):
  v = x[...]
  out[...] = ml.maximum(*v)


@mg.mgpu_kernel(out_shape=lambda x: x)
def spread_twice(x, out):
  opts = {"axis": 0}
  out[...] = ml.cumsum(x[...], axis=0, **opts)


@mg.mgpu_kernel(out_shape=lambda x: x)
def spread_mistyped(x, out):
  out[...] = _scaled_sum(*(x[...], x[...]), 2.0, bias=0.0, **(1, 2))


def test_spreading_what_cannot_be_spread_says_so():
  expect(spread_a_tensor, [S((128,), F32)], mg.KernelTypeError, "*v",
         "*v spreads a tuple or list, not a register tensor", hint="pass each argument by position")
  expect(spread_twice, [S((128,), F32)], mg.KernelTypeError, "opts",
         "ml.cumsum() got the keyword argument 'axis' twice", nth=1, hint="pass axis once")
  expect(spread_mistyped, [S((128,), F32)], mg.KernelTypeError, "(1, 2)",
         "**(1, 2) spreads a dict of names, not a Python tuple", hint="pass each argument by name")


# ---------------------------------------------------------------- an output covered in part along a later axis
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 16), x.shape[1] // 64))
def columns_rounded_down(x, out):
  i, j = ml.program_id(0), ml.program_id(1)
  out.at[ml.ds(i * 16, 16), ml.ds(j * 64, 64)][...] = x.at[ml.ds(i * 16, 16), ml.ds(j * 64, 64)][...] * 2


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 16), ml.cdiv(x.shape[1], 64)))
def columns_rounded_up(x, out):
  i, j = ml.program_id(0), ml.program_id(1)
  cols = j * 64 + ml.arange(64)[None, :]
  v = x.at[ml.ds(i * 16, 16), ml.ds(j * 64, 64)].load(mask=cols < x.shape[1], other=0.0)
  out.at[ml.ds(i * 16, 16), ml.ds(j * 64, 64)].store(v * 2, mask=cols < x.shape[1])


def test_an_output_covered_in_part_along_axis_1_names_that_dimension_and_the_grid_as_written():
  """The message showed grid (2,) for the user's (2, 1), and the hint a 1-D grid of rows, which
  drops axis 1 when followed."""
  expect(columns_rounded_down, [S((32, 100), F32)], mg.UncoveredOutputError, "out.at[",
         "out[:, 64:100] is never written: none of the 2 programs of grid (2, 1) writes it, so 1152 of 3200"
         " elements of out would stay uninitialised",
         hint="out's dimension 1 (100) is covered only in part: launch ml.cdiv(n, t) programs along the grid axis"
              " that steps it (n its size, t its tile), not n // t; the last window then runs past the end: ml.copy"
              " stores drop what falls outside the array, a register store needs a mask of out's extent"
              " (out.at[...].store(v, mask=...)), or write the rest; to update part of an input in place, alias"
              " it to out: @mgpu_kernel(..., input_output_aliases={input index: output index})")
  x = jnp.asarray(np.random.default_rng(3).standard_normal((32, 100)), F32)
  np.testing.assert_array_equal(np.asarray(columns_rounded_up(x, interpret=True)), np.asarray(x * 2))
  assert "mosaic_gpu" in _export(columns_rounded_up, S(x.shape, x.dtype))


# ---------------------------------------------------------------- ml.where of a static condition
@mg.mgpu_kernel(out_shape=lambda s, *, causal: s, grid=(1,))
def where_of_a_constexpr(s, o, *, causal: ml.constexpr):
  o[...] = s[...] + ml.where(causal, -1e30, 0.0)


@mg.mgpu_kernel(out_shape=lambda s, *, causal: s, grid=(1,))
def chosen_while_tracing(s, o, *, causal: ml.constexpr):
  o[...] = s[...] + (-1e+30 if causal else 0.0)


def test_ml_where_of_a_python_bool_is_a_constant_condition():
  """It said the condition must be a boolean and got a Python bool, with a hint to compare; then (probe 25) an MG003
  that said to choose while tracing; since probe 57g it selects as jnp.where and tl.where do with a constant."""
  x = jnp.arange(64 * 64, dtype=F32).reshape(64, 64)
  for causal in (False, True):
    want = np.asarray(x) + (-1e30 if causal else 0.0)
    np.testing.assert_array_equal(np.asarray(where_of_a_constexpr(x, causal=causal, interpret=True)), want)
    np.testing.assert_array_equal(np.asarray(chosen_while_tracing(x, causal=causal, interpret=True)), want)
  assert "mosaic_gpu" in _export(lambda x: where_of_a_constexpr(x, causal=True), S(x.shape, x.dtype))


# ---------------------------------------------------------------- MG501 hints of attention's key block
@mg.mgpu_kernel(out_shape=lambda q, k, v, *, bkv: q, grid=(1,))
def one_key_block(q, k, v, o, *, bkv: ml.constexpr):
  q_s, k_s, v_s = ml.smem((64, 64)), ml.smem((bkv, 64)), ml.smem((bkv, 64))
  ml.copy(q, q_s)
  ml.copy(k.at[ml.ds(0, bkv)], k_s)
  ml.copy(v.at[ml.ds(0, bkv)], v_s)
  s = ml.dot(q_s, k_s.T)
  p = ml.exp(s - ml.max(s, axis=1)[:, None])
  o[...] = (ml.dot(p.astype(q.dtype), v_s) / ml.sum(p, axis=1)[:, None]).astype(o.dtype)


def test_a_key_block_not_a_multiple_of_64_is_hinted_to_a_size_both_dots_take():
  """bkv=100: the n hint said 104, which p @ v then refused as its k; bkv=104: the k hint spoke of
  '104-row pages gathered into one 64-row buffer'."""
  f16 = lambda *s: S(s, jnp.float16)
  e = expect(one_key_block, [f16(64, 64), f16(256, 64), f16(256, 64)], mg.MmaOperandError, "ml.dot(q_s, k_s.T)",
             "ml.dot needs n (columns of b) to be a multiple of 8 and at most 256, got 100", bkv=100)
  assert e.hint.endswith("where the same size is also the k of another dot (attention's key block: n of q @ k.T,"
                         " k of p @ v), pad to 112 instead, a multiple of 16")
  builds(one_key_block, f16(64, 64), f16(256, 64), f16(256, 64), bkv=112)      # the hint, followed
  # bkv=104 as p @ v's k was MG501 (k a multiple of 16); since probe 47e both operands are padded with zeros
  rng = np.random.default_rng(3)
  q, k, v = (jnp.asarray(rng.standard_normal((r, 64)), jnp.float16) for r in (64, 256, 256))
  s = np.asarray(q, np.float32) @ np.asarray(k, np.float32)[:104].T
  p = np.exp(s - s.max(1, keepdims=True))
  want = p @ np.asarray(v, np.float32)[:104] / p.sum(1, keepdims=True)
  np.testing.assert_allclose(np.asarray(one_key_block(q, k, v, bkv=104, interpret=True), np.float32), want,
                             rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- a plain write beside a scatter's atomics
@mg.mgpu_kernel(out_shape=lambda x: S((64,), jnp.int32), grid=lambda x: (x.shape[0] // 128,))
def zeroed_histogram(x, out):
  i = ml.program_id(0)
  if i == 0:
    out[...] = ml.zeros((64,), jnp.int32)
  ml.atomic_add(out.at[x.at[ml.ds(i * 128, 128)][...]], 1)


@mg.mgpu_kernel(out_shape=lambda x: S((64,), jnp.int32), grid=lambda x: (x.shape[0] // 128,))
def histogram(x, out):
  i = ml.program_id(0)
  ml.atomic_add(out.at[x.at[ml.ds(i * 128, 128)][...]], 1)


def test_interpret_mode_reports_zeroing_before_a_scatter_at_the_write_as_the_compiler_does():
  """It was reported at the scatter, its note at the scatter too, with the hint about reading
  atomics' totals; the window-atomic form got the right message at compile time."""
  x = jnp.asarray(np.random.default_rng(4).integers(0, 64, 512), jnp.int32)
  with pytest.raises(mg.RaceError) as info:
    zeroed_histogram(x, interpret=True)
  e = info.value
  # (since probe 56b the compiler reports it too: the store covers every place a scatter of data may reach)
  assert e.message == ("program (0, 0, 0) writes all of out here while program (1, 0, 0) adds to out with atomics at"
                       " indices of data, which land in what program (0, 0, 0) writes whatever the data is: programs"
                       " run in no fixed order, so the sum depends on timing"), e.message
  src = zeroed_histogram.fn.__code__.co_firstlineno
  assert (e.lineno, e.col_offset) == (src + 4, 4), e.render()
  assert e.notes[0].endswith("program (1, 0, 0)'s atomic update") and f":{src + 5}:" in e.notes[0]
  assert e.hint.startswith("an output updated with atomics starts at 0: drop the plain write of out")
  np.testing.assert_array_equal(np.asarray(histogram(x, interpret=True)), np.bincount(np.asarray(x), minlength=64))


# ---------------------------------------------------------------- slices with run-time bounds, in the user's words
@mg.mgpu_kernel(out_shape=lambda x, l: S((8,), x.dtype), grid=(8,))
def fixed_length_at_runtime_start(x, l, out):
  i = ml.program_id(0)
  out[i] = ml.sum(x.at[i, l[i]:l[i] + 8][...])


@mg.mgpu_kernel(out_shape=lambda x, l: S((8,), x.dtype), grid=(8,))
def fixed_length_followed(x, l, out):
  i = ml.program_id(0)
  out[i] = ml.sum(x.at[i, ml.ds(l[i], 8)][...])


@mg.mgpu_kernel(out_shape=lambda x, l: S((8,), x.dtype), grid=(8,))
def runtime_length(x, l, out):
  p = ml.program_id(0)
  out[p] = ml.sum(x.at[p, p * 4:l[p]][...])


def test_runtime_slice_bounds_are_quoted_as_written_and_a_fixed_length_is_an_ml_ds():
  """The bounds were printed by the compiler's names (l[i]:i, k:i), and the hint for l[i]:l[i] + 8
  masked to i - l[i]: pasted, it summed nothing."""
  specs = [S((8, 256), F32), S((8,), jnp.int32)]
  x = jnp.asarray(np.random.default_rng(5).standard_normal((8, 256)), F32)
  l = jnp.array([0, 1, 5, 64, 127, 128, 33, 100], jnp.int32)
  want = jnp.stack([x[i, int(l[i]):int(l[i]) + 8].sum() for i in range(8)])
  np.testing.assert_allclose(np.asarray(fixed_length_followed(x, l, interpret=True)), np.asarray(want), rtol=1e-5)
  # l[i]:l[i] + 8 reads the same element of the input l twice: the window ml.ds(l[i], 8) (probe 43f; was MG003)
  np.testing.assert_allclose(np.asarray(fixed_length_at_runtime_start(x, l, interpret=True)), np.asarray(want), rtol=1e-5)
  e = expect(runtime_length, specs, mg.KernelTypeError, "x.at[p, p * 4",
             "slice p * 4:l[p] of dimension 1 of x has a run-time stop: a window's size is fixed when the kernel is"
             " compiled")
  assert "x.at[p, ml.ds(p * 4, 256)].load(mask=ml.arange(256) < (ml.minimum(l[p], 256) - p * 4), other=0)" in e.hint, e.hint


# ---------------------------------------------------------------- one-element windows read into registers
@mg.mgpu_kernel(out_shape=lambda x: x)
def times_first_element(x, out):
  out[...] = x[...] * x.at[0:1, 0:1][...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def times_first_element_1d(x, out):
  out[...] = x[...] * x.at[0:1][...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def times_total_through_smem(x, out):
  b = ml.smem((1,), jnp.float32)
  b[...] = ml.sum(x[...], keepdims=True)[0]
  out[...] = x[...] * b[...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def times_first_row_sum(x, out):
  out[...] = x[...] * ml.sum(x[...], axis=1, keepdims=True)[0:1]


def test_one_element_windows_broadcast_on_the_gpu_as_in_interpret_mode():
  """x * x.at[0:1, 0:1][...] ran in interpret mode and failed the CUDA export with MG900 (a (1, 1)
  register load); a (1,) SMEM buffer read back too (a Broadcast); (128,) * (1,) was MG204."""
  x = jnp.arange(1024, dtype=F32).reshape(8, 128) / 512 + 1
  for k, arg, want in ((times_first_element, x, x * x[0, 0]), (times_first_element_1d, x[1], x[1] * x[1, 0]),
                       (times_total_through_smem, x, x * x.sum()),
                       (times_first_row_sum, x, x * x[0].sum())):
    np.testing.assert_allclose(np.asarray(k(arg, interpret=True)), np.asarray(want), rtol=1e-5)
    assert "mosaic_gpu" in _export(k, S(arg.shape, arg.dtype))


@pytest.mark.gpu
def test_probe25_gpu():
  """The sixteenth session's forms on the GPU: one-element windows, float8_e5m2 max with infinities,
  nested comprehensions, spread arguments, a masked 2-D tail."""
  x = jnp.arange(1024, dtype=F32).reshape(8, 128) / 512 + 1
  for k, arg, want in ((times_first_element, x, x * x[0, 0]), (times_first_element_1d, x[1], x[1] * x[1, 0]),
                       (times_total_through_smem, x, x * x.sum()),
                       (times_first_row_sum, x, x * x[0].sum())):
    np.testing.assert_allclose(np.asarray(k(arg)), np.asarray(want), rtol=1e-5)
  f8 = jnp.asarray(np.random.default_rng(0).standard_normal((16, 128)).astype(np.float32) * 100)
  f8 = f8.at[3, 5].set(jnp.inf).astype(jnp.float8_e5m2)
  got = np.asarray(_reducer(ml.max, 1)(f8).astype(F32))
  np.testing.assert_array_equal(got, np.asarray(jnp.max(f8.astype(F32), axis=1).astype(jnp.float8_e5m2).astype(F32)))
  t = jnp.asarray(np.random.default_rng(1).standard_normal((3, 131)), F32)
  want = sum(t[a, b:b + 128] * (a + 1) for a in range(3) for b in range(a + 1) if a + b != 3)
  np.testing.assert_allclose(np.asarray(window_taps(t)), np.asarray(want), rtol=1e-6)
  y = jnp.asarray(np.random.default_rng(2).standard_normal((2, 128)), F32)
  np.testing.assert_allclose(np.asarray(spread_args(y)), np.asarray((y[0] + y[1]) * 3.0 + 1.0 + jnp.maximum(y[0], y[1])),
                             rtol=1e-6)
  z = jnp.asarray(np.random.default_rng(3).standard_normal((32, 100)), F32)
  np.testing.assert_array_equal(np.asarray(columns_rounded_up(z)), np.asarray(z * 2))
