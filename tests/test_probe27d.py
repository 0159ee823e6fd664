"""Probe 27d (mgpu_dsl as a JAX citizen): out_shape and grid callables see the same kind of
value (an array) under jax.vmap and in typed_ir/check/mlir as in a call; constexprs holding
numpy arrays are keyed by their contents (a large array's repr elides its middle, which reused
a stale kernel); the traced-constexpr hint covers jax.eval_shape."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import where

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _raises(fn):
  with pytest.raises(mg.KernelError) as info:
    fn()
  return info.value


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- callables written for arrays
@mg.mgpu_kernel(out_shape=lambda x: x.astype(jnp.float16), grid=lambda x: (x.shape[0] // 128,))
def half_double(x, o):
  rows = ml.ds(ml.program_id(0) * 128, 128)
  o.at[rows][...] = (x.at[rows][...] * 2).astype(jnp.float16)


@mg.mgpu_kernel(out_shape=lambda x: (x[:128], x.T), grid=(1,))
def head_and_transpose(x, h, t):
  h[...] = x.at[ml.ds(0, 128)][...] + 1
  t[...] = x[...] * 3


def test_out_shape_array_method_under_vmap():
  x = jnp.arange(512, dtype=F32).reshape(2, 256)
  got = jax.vmap(functools.partial(half_double, interpret=True))(x)
  assert got.dtype == jnp.float16 and got.shape == (2, 256)
  np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(x * 2, np.float16).astype(np.float32))
  assert "mosaic_gpu" in _export(jax.vmap(half_double), S((2, 256), F32))


def test_out_shape_array_method_in_typed_ir_check_mlir():
  spec = S((256,), F32)
  assert "float16" in half_double.typed_ir(spec)
  half_double.check(spec)
  assert half_double.mlir(spec)


def test_out_shape_slices_and_transpose_under_vmap():
  x = jnp.arange(512, dtype=F32).reshape(2, 256)
  h, t = jax.vmap(functools.partial(head_and_transpose, interpret=True))(x)
  np.testing.assert_array_equal(h, x[:, :128] + 1)
  np.testing.assert_array_equal(t, x * 3)
  head_and_transpose.check(S((256,), F32))


# ---------------------------------------------------------------- numpy arrays as constexprs
@mg.mgpu_kernel(out_shape=lambda x, **kw: x, grid=(2,))
def scaled_by_table(x, o, *, table: ml.constexpr):
  rows = ml.ds(ml.program_id(0) * 128, 128)
  o.at[rows][...] = x.at[rows][...] * table[1500]


def test_numpy_constexpr_keyed_by_contents():
  x = jnp.ones((256,), F32)
  a = np.ones(2000, np.float32)
  b = a.copy()
  b[1500] = 5.0                      # repr(a) == repr(b): numpy elides the middle of 2000 items
  assert repr(a) == repr(b)
  np.testing.assert_array_equal(scaled_by_table(x, table=a, interpret=True), np.ones(256))
  np.testing.assert_array_equal(scaled_by_table(x, table=b, interpret=True), np.full(256, 5.0))
  np.testing.assert_array_equal(scaled_by_table(x, table={"t": b}["t"], interpret=True), np.full(256, 5.0))
  assert scaled_by_table.cache_info().misses == 2


@mg.mgpu_kernel(out_shape=lambda x, **kw: x, grid=(2,))
def scaled_by_dict(x, o, *, cfg: ml.constexpr):
  rows = ml.ds(ml.program_id(0) * 128, 128)
  o.at[rows][...] = x.at[rows][...] * cfg["t"][1500]


def test_dict_of_numpy_constexpr_keyed_by_contents():
  x = jnp.ones((256,), F32)
  a = np.ones(2000, np.float32)
  b = a.copy()
  b[1500] = 7.0
  np.testing.assert_array_equal(scaled_by_dict(x, cfg={"t": a}, interpret=True), np.ones(256))
  np.testing.assert_array_equal(scaled_by_dict(x, cfg={"t": b}, interpret=True), np.full(256, 7.0))


# ---------------------------------------------------------------- a constexpr traced by eval_shape
@mg.mgpu_kernel(out_shape=lambda x, **kw: x, grid=(2,))
def times_n(x, o, *, n: ml.constexpr):
  rows = ml.ds(ml.program_id(0) * 128, 128)
  o.at[rows][...] = x.at[rows][...] * n


def test_traced_constexpr_hint_names_partial_and_works():
  x = S((256,), F32)
  e = _raises(lambda: jax.eval_shape(times_n, x, n=3.0))
  assert isinstance(e, mg.SignatureError) and e.message.startswith("times_n: constexpr n is a traced value")
  assert "functools.partial(times_n, n=...)" in e.hint and "jax.eval_shape" in e.hint
  assert jax.eval_shape(functools.partial(times_n, n=3.0), x).shape == (256,)     # the hint, followed
  e = _raises(lambda: jax.eval_shape(functools.partial(times_n, n=3.0), x, interpret=True))
  assert e.message == "times_n: interpret= is a traced value"
  assert "functools.partial(times_n, interpret=True)" in e.hint
  assert jax.eval_shape(functools.partial(times_n, n=3.0, interpret=True), x).shape == (256,)


# ---------------------------------------------------------------- export for another accelerator
@pytest.mark.parametrize("platform", ["rocm", "tpu"])
def test_export_for_other_accelerators_is_no_gpu_error(platform):
  e = _raises(lambda: jax.export.export(jax.jit(times_n, static_argnames=["n"]), platforms=[platform])(
      S((256,), F32), n=2.0))
  assert isinstance(e, mg.NoGpuError), f"{type(e).__name__}: {e}"
  assert e.message == (f"times_n runs on an NVIDIA Hopper GPU (it is a Mosaic GPU kernel), but the call is being"
                       f" compiled for {platform}: a Mosaic GPU kernel has no lowering there")
  assert (e.filename, e.lineno, e.col_offset) == (__file__, where(times_n, "def times_n")[0], 0)
  assert "platforms=['cuda']" in e.hint
  assert "mosaic_gpu" in _export(functools.partial(times_n, n=2.0), S((256,), F32))     # the hint, followed


# ---------------------------------------------------------------- a kernel result that needs no derivative
def test_aux_kernel_output_needs_no_derivative():
  # (was MG009 with a stop_gradient hint: the error now waits until a derivative of the output is used,
  # tests/test_probe28e.py)
  x = jnp.arange(256, dtype=F32)
  twice = functools.partial(times_n, n=2.0, interpret=True)
  for loss in (lambda v: ((v * v).sum(), twice(v)),
               lambda v: ((v * v).sum(), twice(jax.lax.stop_gradient(v)))):      # the old hint, still fine
    (val, aux), g = jax.value_and_grad(loss, has_aux=True)(x)
    np.testing.assert_allclose(g, 2 * x)
    np.testing.assert_allclose(aux, 2 * x)
    np.testing.assert_allclose(val, (x * x).sum())
