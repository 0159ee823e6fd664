"""Probe 27i: a store whose mask is known while compiling writes only what the mask keeps.
The compile-time coverage proof counted a masked store as writing its whole window, so a
static mask leaving output elements unwritten (out[:, 50:] garbage on the GPU) was reported by
interpret mode only; so was a read of SMEM a masked store left unfilled."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


def _raises(fn):
  with pytest.raises(mg.KernelError) as info:
    fn()
  return info.value


# ---------------------------------------------------------------- a constant mask
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((8, 128), jnp.float32))
def columns_masked_off(x, out):
  out.store(x[...], mask=ml.arange(128)[None, :] < 50)


def test_a_static_mask_leaving_columns_unwritten_is_reported_while_compiling():
  e = expect(columns_masked_off, [S((8, 128), F32)], mg.UncoveredOutputError, "out.store(",
             "out[:, 50:128] is never written: the masked store into out (line 31) leaves the elements where its"
             " mask is false unwritten, and nothing else writes them, so 624 of 1024 elements of out would stay"
             " uninitialised",
             hint="write every element of out: put the mask into the value, ml.where(ml.arange(128)[None, :] < 50,"
                  " x[...], 0), and store that unmasked, out[...] = ..., where the window lies inside out; a window"
                  " running past out's end keeps a mask of out's own extent only, out.store(..., mask=offs <"
                  " out.shape[0]) with offs the window's positions")
  # the same error as interpret mode's
  ie = _raises(lambda: columns_masked_off(np.ones((8, 128), np.float32), interpret=True))
  assert (type(ie), ie.message, ie.lineno) == (type(e), e.message, e.lineno)
  with pytest.raises(mg.UncoveredOutputError):
    _export(columns_masked_off, S((8, 128), F32))


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((8, 128), jnp.float32))
def columns_masked_followed(x, out):
  out[...] = ml.where(ml.arange(128)[None, :] < 50, x[...], 0)


def test_the_hint_followed_compiles_and_computes():
  x = np.random.default_rng(0).standard_normal((8, 128)).astype(np.float32)
  want = np.where(np.arange(128)[None, :] < 50, x, 0)
  np.testing.assert_array_equal(np.asarray(columns_masked_followed(x, interpret=True)), want)
  assert "mosaic_gpu" in _export(columns_masked_followed, S((8, 128), F32)).lower()


# ---------------------------------------------------------------- Triton's tail mask over the grid
def _tail(off_by):
  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: ((x.shape[0] + 127) // 128,))
  def tail(x, out):
    i = ml.program_id(0)
    offs = i * 128 + ml.arange(128)
    m = offs < x.shape[0] - off_by
    v = x.at[ml.ds(i * 128, 128)].load(mask=m, other=0.0)
    out.at[ml.ds(i * 128, 128)].store(v * 2, mask=m)
  return tail


@pytest.mark.parametrize("n", [1000, 1024, 128])
def test_a_tail_mask_that_covers_the_output_stays_accepted(n):
  tail = _tail(0)
  tail.check(S((n,), F32))
  x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(tail(x, interpret=True)), x * 2)
  assert "mosaic_gpu" in _export(tail, S((n,), F32)).lower()


@pytest.mark.parametrize("n, region", [(1000, "out[999:1000]"), (1024, "out[1023:1024]")])
def test_a_tail_mask_one_short_is_reported_while_compiling(n, region):
  tail = _tail(1)
  e = _raises(lambda: tail.check(S((n,), F32)))
  assert type(e) is mg.UncoveredOutputError
  assert e.message.startswith(f"{region} is never written: the masked store into out (line ")
  assert f"so 1 of {n} elements of out would stay uninitialised" in e.message
  assert "ml.where(m, " in e.hint
  with pytest.raises(mg.UncoveredOutputError):
    _export(tail, S((n,), F32))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: ((x.shape[0] + 63) // 64, (x.shape[1] + 63) // 64))
def tiles_2d(x, out, *, cols: ml.constexpr):
  i, j = ml.program_id(0), ml.program_id(1)
  r, c = i * 64 + ml.arange(64), j * 64 + ml.arange(64)
  m = (r[:, None] < x.shape[0]) & (c[None, :] < cols)
  v = x.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)].load(mask=m, other=0.0)
  out.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)].store(v + 1, mask=m)


def test_a_2d_tail_mask_is_counted_per_program():
  x = np.random.default_rng(2).standard_normal((200, 130)).astype(np.float32)
  tiles_2d.check(S((200, 130), F32), cols=130)
  np.testing.assert_array_equal(np.asarray(tiles_2d(x, interpret=True, cols=130)), x + 1)
  assert "mosaic_gpu" in _export(lambda a: tiles_2d(a, cols=130), S((200, 130), F32)).lower()
  e = _raises(lambda: tiles_2d.check(S((200, 130), F32), cols=100))
  assert type(e) is mg.UncoveredOutputError
  assert e.message.startswith("out[:, 100:130] is never written: the masked store into out (line ")


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((4, 128), jnp.float32), grid=(4,))
def row_under_scalar_mask(x, out):
  i = ml.program_id(0)
  out.at[i].store(x.at[i][...], mask=i < 3)


def test_a_scalar_mask_on_the_program_id_is_counted():
  e = _raises(lambda: row_under_scalar_mask.check(S((4, 128), F32)))
  assert type(e) is mg.UncoveredOutputError
  assert e.message.startswith("out[3:4, :] is never written: the masked store into out (line ")


@mg.mgpu_kernel(out_shape=lambda x: x)
def data_mask(x, out):
  v = x[...]
  out.store(v, mask=v > 0)


def test_a_mask_of_data_is_left_to_interpret_mode():
  data_mask.check(S((128,), F32))
  x = np.abs(np.random.default_rng(3).standard_normal(128).astype(np.float32)) + 1
  np.testing.assert_array_equal(np.asarray(data_mask(x, interpret=True)), x)
  with pytest.raises(mg.UncoveredOutputError):
    data_mask(-x, interpret=True)


# ---------------------------------------------------------------- SMEM
@mg.mgpu_kernel(out_shape=lambda x: x)
def smem_half_filled(x, out):
  buf = ml.smem((128,), jnp.float32)
  buf.store(x[...], mask=ml.arange(128) < 64)
  out[...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def smem_filled_in_two(x, out):
  buf = ml.smem((128,), jnp.float32)
  buf.store(x[...], mask=ml.arange(128) < 64)
  buf.store(x[...] * 2, mask=ml.arange(128) >= 64)
  out[...] = buf[...]


def test_a_read_of_smem_a_static_masked_store_left_unfilled_is_reported_while_compiling():
  expect(smem_half_filled, [S((128,), F32)], mg.UninitializedReadError, "buf[...]",
         "buf[64:128] is read before anything writes it: SMEM starts with garbage",
         hint="fill buf first, with ml.copy(x.at[...], buf) or buf[...] = value, on every path to this read")
  x = np.arange(128, dtype=np.float32)
  smem_filled_in_two.check(S((128,), F32))
  np.testing.assert_array_equal(np.asarray(smem_filled_in_two(x, interpret=True)),
                                np.where(np.arange(128) < 64, x, 2 * x))
  assert "mosaic_gpu" in _export(smem_filled_in_two, S((128,), F32)).lower()


# ---------------------------------------------------------------- masks with gaps, in loops
@mg.mgpu_kernel(out_shape=lambda x: x)
def ends_only(x, out):
  a = ml.arange(128)
  out.store(x[...], mask=(a < 32) | (a >= 96))


@mg.mgpu_kernel(out_shape=lambda x: x)
def evens_then_odds(x, out, *, both: ml.constexpr):
  a = ml.arange(128)
  out.store(x[...], mask=a % 2 == 0)
  if both:
    out.store(x[...] * 2, mask=a % 2 == 1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def tail_in_a_loop(x, out, *, short: ml.constexpr):
  for t in range((x.shape[0] + 127) // 128):
    offs = t * 128 + ml.arange(128)
    m = offs < x.shape[0] - short
    out.at[ml.ds(t * 128, 128)].store(x.at[ml.ds(t * 128, 128)].load(mask=m, other=0.0), mask=m)


def test_masks_with_gaps_count_the_elements_they_keep():
  e = _raises(lambda: ends_only.check(S((128,), F32)))
  assert type(e) is mg.UncoveredOutputError
  assert e.message.startswith("out[32:96] is never written: the masked store into out (line ")
  e = _raises(lambda: evens_then_odds.check(S((128,), F32), both=False))
  assert type(e) is mg.UncoveredOutputError
  assert e.message.startswith("out[1:2] is never written: the masked store into out (line ")
  assert "so 64 of 128 elements" in e.message
  x = np.arange(128, dtype=np.float32)
  evens_then_odds.check(S((128,), F32), both=True)
  np.testing.assert_array_equal(np.asarray(evens_then_odds(x, interpret=True, both=True)),
                                np.where(np.arange(128) % 2 == 0, x, 2 * x))
  assert "mosaic_gpu" in _export(lambda a: evens_then_odds(a, both=True), S((128,), F32)).lower()


def test_a_tail_mask_in_a_loop_is_counted_per_trip():
  x = np.random.default_rng(4).standard_normal(1000).astype(np.float32)
  tail_in_a_loop.check(S((1000,), F32), short=0)
  np.testing.assert_array_equal(np.asarray(tail_in_a_loop(x, interpret=True, short=0)), x)
  assert "mosaic_gpu" in _export(lambda a: tail_in_a_loop(a, short=0), S((1000,), F32)).lower()
  e = _raises(lambda: tail_in_a_loop.check(S((1000,), F32), short=8))
  assert type(e) is mg.UncoveredOutputError
  assert e.message.startswith("out[992:1000] is never written: the masked store into out (line ")
