"""Probe 40n (memory, atomics and tensor cores in decode and MoE kernels): ml.take_along_axis of an SMEM buffer
or a computed register tile with a few indices a row (a top-k's), negative indices of the register select, and
the SMEM float max hint's int32 keys written for an SMEM buffer (no out_shape; filled and decoded in the kernel)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _rand(shape, seed, dtype=F32):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def _ints(lo, hi, shape, seed):
  return jnp.asarray(np.random.default_rng(seed).integers(lo, hi, shape), I32)


# ---------------------------------------------------------------- take_along_axis of SMEM and computed tiles
@mg.mgpu_kernel(out_shape=lambda x, i, r: (S(i.shape, x.dtype), S(r.shape, x.dtype)), grid=(1,))
def along_smem(x, idx, rows, by_col, by_row):
  """A router's top-k columns of a score tile staged in SMEM, and chosen rows of each column."""
  buf = ml.smem(x.shape, x.dtype)
  ml.copy(x, buf)
  by_col[...] = ml.take_along_axis(buf, idx[...], axis=1)
  by_row[...] = ml.take_along_axis(buf, rows[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda x, i: S(i.shape, x.dtype), grid=(1,))
def along_computed(x, idx, out):
  p = ml.softmax(x[...].astype(jnp.float32), axis=-1)
  out[...] = ml.take_along_axis(p, idx[...], axis=-1).astype(out.dtype)


def _along_inputs(dt):
  x = _rand((64, 128), 1, dt)
  return x, _ints(-128, 128, (64, 8), 2), _ints(0, 64, (4, 128), 3)


@pytest.mark.parametrize("dt", [F32, jnp.bfloat16, jnp.int8])
def test_take_along_axis_of_smem_and_computed_tiles_is_jnps(dt):
  """ml.take_along_axis of an SMEM buffer was MG003 ("only GMEM refs gather", a hint of row loops), and of a
  computed tile MG003 asking for a scratch output: k indices a row are k exact selects, joined."""
  x, idx, rows = _along_inputs(dt)
  x = (x * 40).astype(dt) if dt == jnp.int8 else x
  got = along_smem(x, idx, rows, interpret=True)
  for g, w in zip(got, (jnp.take_along_axis(x, idx, axis=1), jnp.take_along_axis(x, rows, axis=0))):
    assert g.dtype == dt
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  _export(along_smem, S(x.shape, dt), S(idx.shape, I32), S(rows.shape, I32))
  if dt != jnp.int8:
    got = along_computed(x, idx, interpret=True)
    want = jnp.take_along_axis(jax.nn.softmax(x.astype(F32), axis=-1), idx, axis=-1).astype(dt)
    np.testing.assert_allclose(np.asarray(got, F32), np.asarray(want, F32), rtol=1e-2 if dt != F32 else 1e-6)
    _export(along_computed, S(x.shape, dt), S(idx.shape, I32))


@pytest.mark.gpu
def test_gpu_take_along_axis_of_smem_and_computed_tiles_is_jnps():
  for dt in (F32, jnp.bfloat16):
    x, idx, rows = _along_inputs(dt)
    got = jax.jit(along_smem)(x, idx, rows)
    for g, w in zip(got, (jnp.take_along_axis(x, idx, axis=1), jnp.take_along_axis(x, rows, axis=0))):
      np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    got = jax.jit(along_computed)(x, idx)
    want = jnp.take_along_axis(jax.nn.softmax(x.astype(F32), axis=-1), idx, axis=-1).astype(dt)
    np.testing.assert_allclose(np.asarray(got, F32), np.asarray(want, F32), rtol=1e-2, atol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x, t: S((x.shape[0],), x.dtype), grid=(1,))
def nll_pick(x, t, out):
  out[...] = ml.take_along_axis(x[...], t[...][:, None], axis=1)[:, 0]


def test_negative_indices_of_the_register_select_count_from_the_end():
  """The one-index-a-row select compared positions with the raw index: -1 selected nothing (-inf), where jnp's
  take_along_axis (and the GMEM gather) takes the last column."""
  x, t = _rand((32, 128), 4), _ints(-128, 128, (32,), 5)
  got = nll_pick(x, t, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(jnp.take_along_axis(x, t[:, None], 1)[:, 0]))
  _export(nll_pick, S(x.shape, F32), S(t.shape, I32))


@pytest.mark.gpu
def test_gpu_negative_indices_of_the_register_select_count_from_the_end():
  x, t = _rand((32, 128), 6), _ints(-128, 128, (32,), 7)
  got = jax.jit(nll_pick)(x, t)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(jnp.take_along_axis(x, t[:, None], 1)[:, 0]))


# ---------------------------------------------------------------- SMEM float max: the int32 keys' hint
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32), grid=(1,))
def smem_amax(x, out):
  buf = ml.smem((x.shape[1],), F32)
  buf[...] = ml.full((x.shape[1],), -jnp.inf, F32)
  for r in range(x.shape[0]):
    ml.atomic_max(buf, x[r, :])
  out[...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32), grid=(1,))
def smem_amax_keys(x, out):
  """smem_amax with the hint's second way followed word for word."""
  n = x.shape[1]
  buf = ml.smem((n,), jnp.int32)
  buf[...] = ml.full((n,), jnp.iinfo(jnp.int32).min, jnp.int32)
  for r in range(x.shape[0]):
    b = ml.bitcast(x[r, :], jnp.int32)
    ml.atomic_max(buf, ml.where(b >= 0, b, b ^ 0x7FFFFFFF))
  k = buf[...]
  decoded = ml.bitcast(ml.where(k >= 0, k, k ^ 0x7FFFFFFF), jnp.float32)
  out[...] = ml.where(k == jnp.iinfo(jnp.int32).min, -jnp.inf, decoded)


def test_smem_float_max_hint_keeps_the_keys_in_the_kernel():
  """The hint said to make the SMEM buffer int32 "in its out_shape" and decode outside the kernel: an SMEM
  buffer has neither; it now allocates, fills and decodes the keys in the kernel, which compiles and is jnp's."""
  with pytest.raises(mg.UnsupportedDtypeError) as info:
    smem_amax.check(S((8, 128), F32))
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("    ml.atomic_max(buf, x[r, :])"), 4)
  assert e.message == "ml.atomic_max on float32 is not supported in SMEM: Hopper's atomic max takes int32, uint32"
  assert "out_shape" not in e.hint and "outside the kernel" not in e.hint
  assert ("allocate buf int32 (ml.smem(shape, jnp.int32)), fill it first with buf[...] = ml.full(shape,"
          " jnp.iinfo(jnp.int32).min, jnp.int32), update it with ml.atomic_max(buf, ml.where(b >= 0, b,"
          " b ^ 0x7FFFFFFF)) with b = ml.bitcast(x[r, :], jnp.int32), and decode it when read, k = buf[...];"
          " ml.bitcast(ml.where(k >= 0, k, k ^ 0x7FFFFFFF), jnp.float32)") in e.hint
  for x in (_rand((8, 128), 8), jnp.zeros((0, 128), F32)):
    got = smem_amax_keys(x, interpret=True)
    want = x.max(0) if x.shape[0] else jnp.full((128,), -jnp.inf)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  _export(smem_amax_keys, S((8, 128), F32))


@pytest.mark.gpu
def test_gpu_smem_float_max_hint_keeps_the_keys_in_the_kernel():
  x = _rand((8, 128), 9)
  np.testing.assert_array_equal(np.asarray(jax.jit(smem_amax_keys)(x)), np.asarray(x.max(0)))
