"""Probe 42x (matmul-family kernels a user ports first): a dot whose k loop stops short of the inputs' end
(`K // bk` trips over a K that bk does not divide) dropped the last products silently: MG501 at the copy,
with the ml.cdiv loop as the hint (and at the loop for a K below one step, 0 trips); a statement that computes a value and drops it (`ml.dot(a_s, b_s, acc)`
without `acc =`, as if the dot updated acc in place) did nothing silently: MG003 with the assignment as the
hint; the small-m hint named a window of a buffer "v" and the accumulator-dtype hint wrote `(m, n)`."""
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F16, F32 = jnp.float16, jnp.float32


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _col_of(text, marker=None):
  with open(__file__) as f:
    line = next(line for line in f if text in line and (marker or text) in line and "_line_of" not in line
                and "_col_of" not in line)
  return line.index(text)


def _rand(shape, seed, dtype=F32):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _dot(a, b):
  return jnp.dot(a, b, preferred_element_type=F32)


# ---------------------------------------------------------------- a k loop that stops short of K
def _matmul(k_steps):
  @mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32),
                  grid=lambda a, b: (a.shape[0] // 64, b.shape[1] // 64))
  def matmul(a, b, c):
    i, j = ml.program_id(0), ml.program_id(1)
    a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
    acc = ml.zeros((64, 64), jnp.float32)
    for k in ml.range(k_steps(a.shape[1]), stages=2):
      ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)     # the a copy
      ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 64, 64)], b_s)     # the b copy
      acc = ml.dot(a_s, b_s, acc)                                   # the k dot
    c.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = acc
  return matmul


floor_steps = _matmul(lambda k: k // 64)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (a.shape[0] // 64,))
def no_trips(a, b, c):
  i = ml.program_id(0)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, b.shape[1]))
  acc = ml.zeros((64, b.shape[1]), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2):                # the k loop of no trips
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c.at[ml.ds(i * 64, 64)][...] = acc
cdiv_steps = _matmul(lambda k: ml.cdiv(k, 64))


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (a.shape[0] // 64,))
def main_then_tail(a, b, c):
  """Whole steps in the loop, then the tail through masked register loads: every column is read."""
  i = ml.program_id(0)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, b.shape[1]))
  acc = ml.zeros((64, b.shape[1]), jnp.float32)
  for k in range(a.shape[1] // 64):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  t = a.shape[1] // 64 * 64
  ks = t + ml.arange(64)
  a_s[...] = a.at[ml.ds(i * 64, 64), ml.ds(t, 64)].load(mask=ks[None, :] < a.shape[1], other=0)
  b_s[...] = b.at[ml.ds(t, 64)].load(mask=ks[:, None] < a.shape[1], other=0)
  c.at[ml.ds(i * 64, 64)][...] = ml.dot(a_s, b_s, acc)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (a.shape[0] // 64,))
def register_steps(a, b, c):
  """B staged through registers (converted), A straight from registers: the same k loop stopping short."""
  i = ml.program_id(0)
  b_s = ml.smem((64, b.shape[1]), jnp.float16)
  acc = ml.zeros((64, b.shape[1]), jnp.float32)
  for k in range(a.shape[1] // 64):
    b_s[...] = b.at[ml.ds(k * 64, 64)][...].astype(jnp.float16)                 # the b read
    acc = ml.dot(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)][...] * 2.0, b_s, acc)   # the a read
  c.at[ml.ds(i * 64, 64)][...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b, n: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b, n: (a.shape[0] // 64,))
def run_time_steps(a, b, n, c):
  """A run-time trip count (the first n[...] steps of k, on purpose): not known while compiling, not reported."""
  i = ml.program_id(0)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, b.shape[1]))
  acc = ml.zeros((64, b.shape[1]), jnp.float32)
  for k in ml.range(n[...], stages=2):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c.at[ml.ds(i * 64, 64)][...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b, *, k: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b, *, k: (a.shape[0] // 64,))
def valid_prefix(a, b, c, *, k: ml.constexpr):
  """Arrays padded past their k valid columns (rows of b): the loop reads the valid part, on purpose."""
  i = ml.program_id(0)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, b.shape[1]))
  acc = ml.zeros((64, b.shape[1]), jnp.float32)
  for s in ml.range(ml.cdiv(k, 64), stages=2):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(s * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(s * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c.at[ml.ds(i * 64, 64)][...] = acc


def test_a_k_loop_that_stops_short_of_k_is_reported_at_the_copy():
  a, b = _rand((128, 200), 1, F16), _rand((200, 128), 2, F16)
  with pytest.raises(mg.MmaOperandError) as e:
    floor_steps.check(S(a.shape, F16), S(b.shape, F16))
  err = e.value
  assert (err.lineno, err.col_offset) == (_line_of("# the a copy"), _col_of("ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k"))
  assert err.message.startswith(
      f"no program reads a[:, 192:200], but the ml.dot on line {_line_of('# the k dot')} sums over a's 200 columns:"
      " the product would leave out the last 8 (a k loop of 200 // 64 = 3 trips stops short of the end)")
  assert "loop over ml.cdiv(200, 64) steps" in err.hint
  assert any(x.lineno == _line_of("# the b copy") and "b[192:200, :]" in x.message and "b's 200 rows" in x.message
             for x in err.errors[1:])
  with pytest.raises(mg.MmaOperandError) as e:
    register_steps.check(S(a.shape, F16), S((200, 64), F32))
  (rb, ra) = sorted(e.value.errors, key=lambda x: x.lineno)
  assert (rb.lineno, rb.col_offset) == (_line_of("# the b read"), _col_of("b.at[ml.ds(k * 64, 64)][...].astype"))
  assert rb.message.startswith("no program reads b[192:200, :], but the ml.dot on line")
  assert "with a mask that keeps b's rows below 200 and other=0" in rb.hint
  assert (ra.lineno, ra.col_offset) == (_line_of("# the a read"), _col_of("a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)][...] * 2.0"))
  assert ra.message.startswith("no program reads a[:, 192:200]")
  # the hint followed: every column, the last step's copy reading zeros past the end
  np.testing.assert_allclose(cdiv_steps(a, b, interpret=True), _dot(a, b), rtol=1e-5, atol=1e-5)
  assert "@mosaic_gpu" in _export(cdiv_steps, S(a.shape, F16), S(b.shape, F16))
  # a tail read some other way, or a trip count known only at run time: not reported
  np.testing.assert_allclose(main_then_tail(a, b, interpret=True), _dot(a, b), rtol=1e-5, atol=1e-5)
  main_then_tail.check(S(a.shape, F16), S(b.shape, F16))
  a, b = _rand((128, 256), 3, F16), _rand((256, 64), 4, F16)
  n = jnp.int32(2)
  np.testing.assert_allclose(run_time_steps(a, b, n, interpret=True), _dot(a[:, :128], b[:128]), rtol=1e-5, atol=1e-5)
  run_time_steps.check(S(a.shape, F16), S(b.shape, F16), S((), jnp.int32))
  floor_steps.check(S(a.shape, F16), S((256, 128), F16))         # K a multiple of 64: nothing left out
  # K below one step: the loop of 32 // 64 = 0 trips is dropped, and a and b are read nowhere else
  a, b = _rand((128, 32), 11, F16), _rand((32, 64), 12, F16)
  with pytest.raises(mg.MmaOperandError) as e:
    no_trips.check(S(a.shape, F16), S(b.shape, F16))
  assert (e.value.lineno, e.value.col_offset) == (_line_of("# the k loop of no trips"), _col_of("ml.range(a.shape[1] // 64"))
  assert e.value.message == ("this loop runs no trips (a.shape[1] // 64 = 32 // 64 = 0), so its ml.dot never runs and a"
                             " and b are never read: the product would leave out all 32 of its terms")
  assert e.value.hint.startswith("loop over ml.cdiv(a.shape[1], 64) steps")
  np.testing.assert_allclose(cdiv_steps(a, b, interpret=True), _dot(a, b), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(main_then_tail(a, b, interpret=True), _dot(a, b), rtol=1e-5, atol=1e-5)   # (read after it)
  np.testing.assert_allclose(valid_prefix(a, b, k=128, interpret=True), _dot(a[:, :128], b[:128]), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- values computed and dropped
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=(1,))
def dropped_dot(a, b, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.zeros((64, 64), jnp.float32)
  ml.dot(a_s, b_s, acc)                                   # dropped dot
  c[...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F16), grid=(1,))
def dropped_cast(a, b, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  acc * 0.5                                               # dropped scale
  acc.astype(jnp.float16)                                 # dropped cast
  c[...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=(1,))
def kept_dot(a, b, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.zeros((64, 64), jnp.float32)
  acc = ml.dot(a_s, b_s, acc)
  c[...] = acc


def _store_and_return(acc, c):
  c[...] = acc
  return acc


helpers = types.SimpleNamespace(store_and_return=ml.inline(_store_and_return))


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=(1,))
def helper_result_unused(a, b, c):
  """A helper of the user's called for what it stores: its result may go unused."""
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  helpers.store_and_return(ml.dot(a_s, b_s), c)


def test_a_value_computed_and_dropped_is_reported():
  a, b = _rand((64, 64), 5, F16), _rand((64, 64), 6, F16)
  specs = (S(a.shape, F16), S(b.shape, F16))
  with pytest.raises(mg.KernelTypeError) as e:
    dropped_dot.check(*specs)
  err = e.value
  assert (err.lineno, err.col_offset) == (_line_of("# dropped dot"), 2)
  assert err.message == ("the result of ml.dot(a_s, b_s, acc) is dropped: ml.dot returns acc + a @ b and does not"
                         " update acc in place, so this statement does nothing")
  assert err.hint == "assign it: acc = ml.dot(a_s, b_s, acc)"
  with pytest.raises(mg.KernelTypeError) as e:
    dropped_cast.check(*specs)
  err = e.value
  assert (err.lineno, err.col_offset) == (_line_of("# dropped scale"), 2)
  assert err.message == "the result of acc * 0.5 is dropped: the expression makes a new value, so this statement does nothing"
  assert err.hint == "to update acc, assign the result: acc *= 0.5 (acc = acc * 0.5)"     # (probe 52a)
  cast = err.errors[1]
  assert cast.lineno == _line_of("# dropped cast")
  assert cast.message.startswith("the result of acc.astype(jnp.float16) is dropped: acc.astype returns a new value")
  assert cast.hint == "assign it: acc = acc.astype(jnp.float16)"
  # the hint followed; a helper's unused result is not reported
  np.testing.assert_allclose(kept_dot(a, b, interpret=True), _dot(a, b), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(helper_result_unused(a, b, interpret=True), _dot(a, b), rtol=1e-5, atol=1e-5)
  assert "@mosaic_gpu" in _export(kept_dot, *specs)


# ---------------------------------------------------------------- hints in the kernel's own words
@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32), grid=lambda x, w: (w.shape[1] // 64,))
def decode_gemv(x, w, o):
  j = ml.program_id(0)
  x_s, w_s = ml.smem(x.shape), ml.smem((64, 64))
  ml.copy(x, x_s)
  acc = ml.zeros((x.shape[0], 64), jnp.float32)
  for k in ml.static_range(w.shape[0] // 64):
    ml.copy(w.at[ml.ds(k * 64, 64), ml.ds(j * 64, 64)], w_s)
    acc = ml.dot(x_s.at[:, ml.ds(k * 64, 64)], w_s, acc)     # the small-m dot
  o.at[:, ml.ds(j * 64, 64)][...] = acc


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32), grid=lambda x, w: (w.shape[1] // 64,))
def decode_gemv_fixed(x, w, o):
  j = ml.program_id(0)
  x_s, w_s = ml.smem((64, 64)), ml.smem((64, 64))
  acc = ml.zeros((64, 64), jnp.float32)
  for k in ml.static_range(w.shape[0] // 64):
    ml.copy(x.at[ml.ds(0, 64), ml.ds(k * 64, 64)], x_s)
    ml.copy(w.at[ml.ds(k * 64, 64), ml.ds(j * 64, 64)], w_s)
    acc = ml.dot(x_s, w_s, acc)
  o.at[ml.ds(0, 64), ml.ds(j * 64, 64)].store(acc, mask=ml.arange(64)[:, None] < x.shape[0])


def _padded_gemv(steps):
  @mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32), grid=lambda x, w: (w.shape[1] // 64,))
  def padded_gemv(x, w, o):
    """x's rows padded to 64 by the copy (zeros past its end), its k steps windows of one buffer."""
    j = ml.program_id(0)
    x_s, w_s = ml.smem((64, x.shape[1])), ml.smem((64, 64))
    ml.copy(x.at[ml.ds(0, 64)], x_s)
    acc = ml.zeros((64, 64), jnp.float32)
    for k in steps(w.shape[0] // 64):
      ml.copy(w.at[ml.ds(k * 64, 64), ml.ds(j * 64, 64)], w_s)
      acc = ml.dot(x_s.at[:, ml.ds(k * 64, 64)], w_s, acc)     # the k-step window
    o.at[ml.ds(0, 64), ml.ds(j * 64, 64)].store(acc, mask=ml.arange(64)[:, None] < x.shape[0])
  return padded_gemv


run_time_windows = _padded_gemv(range)
static_windows = _padded_gemv(ml.static_range)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=(1,))
def half_accumulator(a, b, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  part = ml.zeros((64, 128), jnp.float16)
  c[...] = ml.dot(a_s, b_s, part).astype(jnp.float32)      # the bf16 dot


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=(1,))
def transposed_accumulator(a, b, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  total = ml.zeros((128, 64), jnp.float32)
  c[...] = ml.dot(a_s, b_s, total)                         # the (128, 64) accumulator


def test_small_m_and_accumulator_hints_name_the_kernels_buffers_and_shapes():
  x, w = _rand((4, 128), 7, F16), _rand((128, 128), 8, F16)
  # the small-m dot was MG501 (hinted as the fixed form below); since probe 47e the compiler pads its 4 rows
  np.testing.assert_allclose(decode_gemv(x, w, interpret=True), _dot(x, w), rtol=1e-5, atol=1e-5)
  assert "@mosaic_gpu" in _export(decode_gemv, S(x.shape, F16), S(w.shape, F16))
  # the hint followed (one 64-row window a k step, the rows that exist stored with a mask)
  np.testing.assert_allclose(decode_gemv_fixed(x, w, interpret=True), _dot(x, w), rtol=1e-5, atol=1e-5)
  assert "@mosaic_gpu" in _export(decode_gemv_fixed, S(x.shape, F16), S(w.shape, F16))
  # k-step windows of one buffer, static or at run-time starts k * 64 (whole tiles: probe 45b), both compute
  for kernel in (run_time_windows, static_windows):
    np.testing.assert_allclose(kernel(x, w, interpret=True), _dot(x, w), rtol=1e-5, atol=1e-5)
    assert "@mosaic_gpu" in _export(kernel, S(x.shape, F16), S(w.shape, F16))
  a, b = _rand((64, 64), 9, jnp.bfloat16), _rand((64, 128), 10, jnp.bfloat16)
  with pytest.raises(mg.UnsupportedDtypeError) as e:
    half_accumulator.check(S(a.shape, a.dtype), S(b.shape, b.dtype))
  assert e.value.lineno == _line_of("# the bf16 dot")
  assert e.value.message == "ml.dot accumulates bfloat16 products in float32, not float16"
  assert e.value.hint == "accumulate in jnp.float32: part = ml.zeros((64, 128), jnp.float32)"
  a = a.astype(F16)
  with pytest.raises(mg.ShapeMismatchError) as e:
    transposed_accumulator.check(S(a.shape, F16), S(b.shape, F16))
  assert e.value.lineno == _line_of("# the (128, 64) accumulator")
  assert e.value.message == "ml.dot's acc has shape (128, 64), but a_s @ b_s is (64, 128)"
  assert e.value.hint == "accumulate in a (64, 128) tensor: total = ml.zeros((64, 128), jnp.float32)"
