"""Probe 25d (sixteenth session, a regression hunt on the session's own changes): hints that
failed when pasted, messages naming the wrong thing, and forms the new spreading missed."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct
F32, BF16, I32 = jnp.float32, jnp.bfloat16, jnp.int32


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- the narrow-row scatter hint, pasted
@mg.mgpu_kernel(out_shape=lambda g, ids: S((16, 6), g.dtype))
def scatter_rows(g, ids, out):
  ml.atomic_add(out.at[ids[...], :], g[...])


@mg.mgpu_kernel(out_shape=lambda g, ids: S((16, 6), g.dtype))
def scatter_rows_followed(g, ids, out):
  v = g.at[:, ml.ds(0, 32)].load(mask=ml.arange(32)[None, :] < 6, other=0)
  ml.atomic_add(out.at[ids[...][:, None], ml.arange(32)[None, :]], v)


def test_a_narrow_scatter_compiles_and_the_old_hints_wide_scatter_works():
  """It wrote ids[:, None] of the GMEM ref ids (MG203 when pasted) and src.at[rows, ...]."""
  specs = [S((128, 6), F32), S((128,), I32)]
  builds(scatter_rows, *specs)     # (now compiled: tiles narrower than a warp take fewer lanes a row, tests/test_narrow_rows.py)
  g = jnp.asarray(np.random.default_rng(0).standard_normal((128, 6)), F32)
  ids = jnp.asarray(np.random.default_rng(1).integers(0, 16, 128), I32)
  want = jnp.zeros((16, 6), F32).at[ids].add(g)
  np.testing.assert_allclose(np.asarray(scatter_rows_followed(g, ids, interpret=True)), np.asarray(want), rtol=1e-5)
  assert "mosaic_gpu" in _export(scatter_rows_followed, *specs)


# ---------------------------------------------------------------- a ternary on a run-time value, 16-bit
@mg.mgpu_kernel(out_shape=lambda x, f: x, grid=(8,))
def ternary_scale(x, f, out):
  i = ml.program_id(0)
  s = 2.0 if f[i] else 1.0
  out.at[i][...] = x.at[i][...] * s


@mg.mgpu_kernel(out_shape=lambda x, f: x, grid=(8,))
def ternary_scale_followed(x, f, out):
  i = ml.program_id(0)
  s = ml.where(f[i] != 0, 2.0, 1.0).astype(x.dtype)
  out.at[i][...] = x.at[i][...] * s


def test_the_ternary_hint_says_to_convert_for_16_bit_tensors():
  """Pasted into a bfloat16 kernel, ml.where(f[i] != 0, 2.0, 1.0) is a float32 value: MG104. Since probe 44e the
  conditional expression itself runs, as an if statement of two Python floats: weakly typed, so bfloat16 here."""
  x = jnp.ones((8, 128), BF16)
  f = jnp.array([0, 1, 0, 1, 1, 0, 0, 1], I32)
  got = ternary_scale(x, f, interpret=True)
  assert got.dtype == BF16
  np.testing.assert_array_equal(np.asarray(got, np.float32), np.where(np.asarray(f)[:, None] != 0, 2.0, 1.0) * np.ones((8, 128)))
  got = ternary_scale_followed(x, f, interpret=True)
  np.testing.assert_array_equal(np.asarray(got, np.float32), np.where(np.asarray(f)[:, None] != 0, 2.0, 1.0) * np.ones((8, 128)))


# ---------------------------------------------------------------- float8 full reductions; carried one-element tensors
@mg.mgpu_kernel(out_shape=lambda x: S((), F32))
def f8_full_max(x, out):
  out[...] = ml.max(x[...]).astype(jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x: S((), x.dtype))
def carried_then_indexed(x, out):
  t = ml.sum(x[...], keepdims=True)
  for j in range(3):
    t = t * 2.0
  out[...] = t[0, 0]


def test_a_full_float8_max_says_along_an_axis_works_and_a_carried_one_element_tensor_computes():
  expect(f8_full_max, [S((8, 128), jnp.float8_e5m2)], mg.UnsupportedDtypeError, "ml.max(",
         "ml.max of all of a float8_e5m2 tensor is not supported: the result would be an 8-bit float scalar, which"
         " the GPU cannot make (along an axis it keeps the dtype)",
         hint="convert first, ml.max(x[...].astype(jnp.float32)); or reduce along an axis, ml.max(x[...], axis=1)")
  # (a (1, 1) carry was MG204 "carry a scalar"; since probe 48a a loop carries a one-element tensor as its element)
  x = np.random.default_rng(3).standard_normal((8, 128)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(carried_then_indexed(x, interpret=True)), x.sum() * 8, rtol=1e-4)
  assert "mosaic_gpu" in _export(carried_then_indexed, S((8, 128), F32))


# ---------------------------------------------------------------- spreading in displays and loop headers
@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype))
def spread_headers(x, out):
  bounds = (1, 4)
  acc = x.at[0][...]
  for t in ml.static_range(*bounds):
    acc = acc + x.at[t][...]
  rows = (*(x.at[r][...] for r in ml.static_range(2)), acc)
  out[...] = sum(rows)


def test_loop_headers_and_displays_spread_static_tuples():
  """`for t in ml.static_range(*bounds)` and `(*a, b)` were MG001 ("star-unpacking")."""
  x = jnp.asarray(np.random.default_rng(2).standard_normal((4, 128)), F32)
  want = x[0] + x[1] + (x[0] + x[1] + x[2] + x[3])
  np.testing.assert_allclose(np.asarray(spread_headers(x, interpret=True)), np.asarray(want), rtol=1e-6)
  assert "mosaic_gpu" in _export(spread_headers, S(x.shape, x.dtype))


# ---------------------------------------------------------------- dicts: messages and Python's own reads
@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype))
def dict_rebound_in_if(x, out):
  d = {"v": x.at[0][...]}
  if ml.program_id(0) == 0:
    d = {"v": x.at[1][...]}
  out[...] = d["v"]


@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype))
def dict_reads(x, out):
  d = {"a": x.at[0][...], "b": x.at[1][...]}
  extra = d.get("c", x.at[2][...])
  out[...] = sum(d.values()) + extra + sum(v for k, v in d.items() if k == "a")


@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype))
def unknown_keyword(x, out):
  out[...] = ml.maximum(x.at[0][...], c=x.at[1][...])


@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype))
def int_keyed_spread(x, out):
  opts = {1: x.at[1][...]}
  out[...] = ml.maximum(x.at[0][...], **opts)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.int8))
def any_of_rows(x, out):
  out[...] = any(x.at[r][...] > 0 for r in range(4)).astype(jnp.int8)


def test_dict_and_builtin_messages_name_the_users_mistake():
  spec = [S((4, 128), F32)]
  x = jnp.asarray(np.random.default_rng(3).standard_normal((4, 128)), F32)
  # a dict of the same keys on both paths of a run-time if merges as a tuple does (since probe 59c; it was MG003)
  np.testing.assert_array_equal(np.asarray(dict_rebound_in_if(x, interpret=True)), np.asarray(x[1]))
  np.testing.assert_allclose(np.asarray(dict_reads(x, interpret=True)), np.asarray(x[0] + x[1] + x[2] + x[0]),
                             rtol=1e-6)
  expect(unknown_keyword, spec, mg.KernelTypeError, "ml.maximum(",
         "ml.maximum: got an unexpected keyword argument 'c'",
         hint="ml.maximum(a, b, propagate_nan=None)")     # (Triton's keyword, accepted since probe 49h)
  expect(int_keyed_spread, spec, mg.KernelTypeError, "opts)",
         "**opts spreads a dict of names, but one key is 1", hint="key the dict by the parameters' names (strings)")
  expect(any_of_rows, spec, mg.KernelTypeError, "any(",
         "any(...) of register values is Python's iteration, which kernels do not do",
         hint="combine register booleans with |: a | b | c (elementwise); whether any element of one tensor t"
              " holds is ml.any(t)")


# ---------------------------------------------------------------- the flip hint, followed along axis 1
@mg.mgpu_kernel(out_shape=lambda x: x)
def flip_columns(x, out):
  n = x.shape[1]
  out[...] = x[:, n - 1 - ml.arange(n)]


def test_the_flip_hints_axis_1_form_works():
  x = jnp.arange(8 * 128, dtype=F32).reshape(8, 128)
  np.testing.assert_array_equal(np.asarray(flip_columns(x, interpret=True)), np.asarray(x[:, ::-1]))
  assert "mosaic_gpu" in _export(flip_columns, S(x.shape, x.dtype))
