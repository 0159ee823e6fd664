"""Probe 31a (Pallas Mosaic GPU users porting kernels): JAX's spellings a Pallas kernel uses
(jnp.dot's preferred_element_type and precision, functools.partial kernels, array methods, jnp and
lax shape functions) accepted where mgpu_dsl has the same thing, or refused with the mgpu_dsl form."""
import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F16, F32 = jnp.float16, jnp.float32


# ---------------------------------------------------------------- ml.dot takes jnp.dot's keywords
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32))
def dot_preferred(a_ref, b_ref, o_ref):
  a_s = ml.smem((64, 64), F16)
  b_s = ml.smem((64, 64), F16)
  ml.copy(a_ref, a_s)
  ml.copy(b_ref, b_s)
  o_ref[...] = ml.dot(a_s, b_s, preferred_element_type=jnp.float32, precision=lax.Precision.HIGHEST)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F16))
def dot_preferred_f16(a_ref, b_ref, o_ref):
  a_s = ml.smem((64, 64), F16)
  b_s = ml.smem((64, 64), F16)
  ml.copy(a_ref, a_s)
  ml.copy(b_ref, b_s)
  o_ref[...] = ml.dot(a_s, b_s, preferred_element_type=jnp.float16)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32))
def dot_highest_f32(a_ref, b_ref, o_ref):
  a_s = ml.smem((64, 32), F32)
  b_s = ml.smem((64, 32), F32)
  ml.copy(a_ref, a_s)
  ml.copy(b_ref, b_s)
  o_ref[...] = ml.dot(a_s, b_s.T, precision=lax.Precision.HIGHEST)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32))
def dot_both_dtypes(a_ref, b_ref, o_ref):
  a_s = ml.smem((64, 64), F16)
  b_s = ml.smem((64, 64), F16)
  ml.copy(a_ref, a_s)
  ml.copy(b_ref, b_s)
  o_ref[...] = ml.dot(a_s, b_s, out_dtype=jnp.float32, preferred_element_type=jnp.float16)


def test_ml_dot_takes_preferred_element_type_as_its_accumulator_dtype():
  """It was MG003 (an unexpected keyword): jnp.dot's and lax.dot_general's name of out_dtype,
  which a Pallas kernel passes to every dot."""
  a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float16)
  b = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float16)
  want = a.astype(np.float32) @ b.astype(np.float32)
  got = np.asarray(dot_preferred(a, b, interpret=True))
  np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
  assert dot_preferred_f16.typed_ir(S((64, 64), F16), S((64, 64), F16)).count("f16") > 0
  np.testing.assert_allclose(np.asarray(dot_preferred_f16(a, b, interpret=True), np.float32), want, rtol=2e-2,
                             atol=5e-2)


def test_precision_highest_on_float32_operands_is_refused_as_ieee_is():
  expect(dot_highest_f32, [S((64, 32), F32), S((64, 32), F32)], mg.UnsupportedDtypeError,
         "ml.dot(a_s, b_s.T, precision", "ml.dot with precision=Precision.HIGHEST: the tensor cores read float32"
         " operands as TF32 (10 mantissa bits), lax.Precision.DEFAULT's meaning on the GPU")
  expect(dot_both_dtypes, [S((64, 64), F16), S((64, 64), F16)], mg.KernelTypeError, "ml.dot(a_s, b_s, out",
         "ml.dot got out_dtype=float32 and preferred_element_type=float16: they name the same thing, the"
         " accumulator's dtype", hint="pass one of them")


# ---------------------------------------------------------------- jnp.dot and friends name the ml.dot call
@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32))
def jnp_dot_loaded(a_ref, b_ref, o_ref):
  a_s = ml.smem((64, 64), F16)
  k_s = ml.smem((64, 64), F16)
  ml.copy(a_ref, a_s)
  ml.copy(b_ref, k_s)
  o_ref[...] = lax.dot_general(a_s[...], k_s[...], (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F16))
def jnp_dot_gmem(lhs_ref, rhs_ref, o_ref):
  o_ref[...] = jnp.dot(lhs_ref[...], rhs_ref[...])


def test_jnp_dot_computes_as_the_ml_dot_its_hint_wrote():
  """The hint was ml.dot(a_s, b_s, acc) whatever the call, then the call's own refs (b transposed where the
  contraction is over its last axis) and the staging of operands not in SMEM; since probe 48b the calls compute
  as that ml.dot (jnp.dot of float16 tiles is float16, as jnp's)."""
  rng = np.random.default_rng(0)
  a, b = (jnp.asarray(rng.standard_normal((64, 64)), F16) for _ in range(2))
  np.testing.assert_allclose(np.asarray(jnp_dot_loaded(a, b, interpret=True)),
                             np.asarray(jnp.dot(a, b.T, preferred_element_type=F32)), rtol=1e-3, atol=1e-3)
  got = jnp_dot_gmem(a, b, interpret=True)
  assert got.dtype == F16
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(jnp.dot(a, b), np.float32), rtol=1e-2, atol=1e-2)


# ---------------------------------------------------------------- pallas_call(functools.partial(kernel, ...))
def _norm_rows(x_ref, o_ref, *, eps, block_rows):
  i = ml.program_id(0)
  x = x_ref[ml.ds(i * block_rows, block_rows), :]
  m = ml.mean(x, axis=1, keepdims=True)
  v = ml.mean((x - m) * (x - m), axis=1, keepdims=True)
  o_ref[ml.ds(i * block_rows, block_rows), :] = (x - m) * ml.rsqrt(v + eps)


def _grid_rows(x, block_rows):
  return (x.shape[0] // block_rows,)


norm_small_eps = mg.mgpu_kernel(functools.partial(_norm_rows, eps=1e-5, block_rows=8), out_shape=lambda x: x,
                                grid=_grid_rows)
norm_large_eps = mg.mgpu_kernel(functools.partial(_norm_rows, eps=10.0, block_rows=16), out_shape=lambda x: x,
                                grid=_grid_rows)


def test_a_partial_binding_constexprs_by_keyword_is_a_kernel():
  """It was MG006 (@mgpu_kernel takes a def function): Pallas binds a kernel's options with
  functools.partial; each partial's values are its kernel's constexprs (two partials of one
  function are two kernels), and a call may override them."""
  x = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)

  def want(eps):
    m = x.mean(1, keepdims=True)
    return (x - m) / np.sqrt(x.var(1, keepdims=True) + eps)
  np.testing.assert_allclose(np.asarray(norm_small_eps(x, interpret=True)), want(1e-5), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(np.asarray(norm_large_eps(x, interpret=True)), want(10.0), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(np.asarray(norm_large_eps(x, eps=1.0, interpret=True)), want(1.0), rtol=1e-4,
                             atol=1e-4)
  assert "grid=(4, 1, 1)" in norm_large_eps.typed_ir(S((64, 256), F32))
  assert inspect.signature(norm_large_eps).parameters["eps"].default == 10.0
  assert "grid=(8, 1, 1)" in norm_small_eps.typed_ir(S((64, 256), F32))


# ---------------------------------------------------------------- jnp's shape functions name the kernel's form
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def jnp_expand_dims(x_ref, o_ref):
  i = ml.program_id(0)
  x = x_ref[ml.ds(i * 8, 8), :]
  o_ref[ml.ds(i * 8, 8), :] = x - jnp.expand_dims(ml.mean(x, axis=1), 1)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def jnp_roll(x_ref, o_ref):
  i = ml.program_id(0)
  o_ref[ml.ds(i * 8, 8), :] = jnp.roll(x_ref[ml.ds(i * 8, 8), :], 1, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def jnp_roll_followed(x_ref, o_ref):
  i = ml.program_id(0)
  o_ref[ml.ds(i * 8, 8), :] = ml.roll(x_ref[ml.ds(i * 8, 8), :], 1, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def jnp_tril(x_ref, o_ref):
  i = ml.program_id(0)
  o_ref[ml.ds(i * 8, 8), :] = jnp.tril(x_ref[ml.ds(i * 8, 8), :])


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 256), F32))
def jnp_one_hot(ids_ref, o_ref):
  o_ref[...] = jax.nn.one_hot(ids_ref[...], 256)


@mg.mgpu_kernel(out_shape=lambda x: S((8,), F32))
def squeeze_method(x_ref, o_ref):
  o_ref[...] = x_ref[ml.ds(0, 8), :].max(axis=1, keepdims=True).squeeze(axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def tril_on_ml(x_ref, o_ref):
  o_ref[...] = ml.tril(x_ref[...])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def clip_method(x_ref, o_ref):
  i = ml.program_id(0)
  o_ref[ml.ds(i * 8, 8), :] = x_ref[ml.ds(i * 8, 8), :].clip(-0.5, 0.5)


def test_jnp_shape_functions_hint_the_kernels_form():
  """These hints were "decorate a helper of your own with @ml.inline" (jnp calls) or "check the
  spelling" (ml names), which no Pallas user can follow: now the indexing, gather or select."""
  # (jnp.tril and jax.nn.one_hot compute as those hints' forms since probe 47b)
  x = np.random.default_rng(5).standard_normal((64, 256)).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(jnp_tril(x, interpret=True)),
                                np.concatenate([np.tril(x[i * 8:i * 8 + 8]) for i in range(8)]))
  ids = np.random.default_rng(6).integers(0, 256, 128).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(jnp_one_hot(ids, interpret=True)), np.asarray(jax.nn.one_hot(ids, 256)))
  x = np.random.default_rng(4).standard_normal((64, 256)).astype(np.float32)   # (.squeeze: a method since probe 46k)
  np.testing.assert_array_equal(np.asarray(squeeze_method(x, interpret=True)), x[:8].max(1))
  expect(tril_on_ml, [S((128,), F32)], mg.UnknownNameError, "ml.tril", "ml has no attribute 'tril'",
         hint="no ml.tril: keep the lower triangle by index, ml.where(ml.arange(n)[None, :] <= ml.arange(m)[:, None],"
              " x, 0) for an (m, n) x")


def test_the_hints_compute_what_jnp_computes():
  x = np.random.default_rng(2).standard_normal((64, 256)).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(jnp_roll_followed(x, interpret=True)), np.roll(x, 1, axis=1))
  # jnp.roll and jnp.expand_dims compute as the hinted forms since probe 46i
  np.testing.assert_array_equal(np.asarray(jnp_roll(x, interpret=True)), np.roll(x, 1, axis=1))
  np.testing.assert_allclose(np.asarray(jnp_expand_dims(x, interpret=True)), x - x.mean(axis=1, keepdims=True),
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(np.asarray(clip_method(x, interpret=True)), np.clip(x, -0.5, 0.5))


# ---------------------------------------------------------------- Pallas's refs, scratch and old names
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def with_scratch_param(x_ref, o_ref, acc_ref):
  i = ml.program_id(0)
  acc_ref[...] = x_ref[ml.ds(i * 8, 8), :]
  o_ref[ml.ds(i * 8, 8), :] = acc_ref[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def ref_astype(x_ref, o_ref):
  i = ml.program_id(0)
  o_ref[ml.ds(i * 8, 8), :] = x_ref.at[ml.ds(i * 8, 8), :].astype(jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def old_pl_load(x_ref, o_ref):
  i = ml.program_id(0)
  o_ref[ml.ds(i * 8, 8), :] = pl.load(x_ref, (pl.ds(i * 8, 8), slice(None)))


def test_pallas_scratch_ref_params_and_ref_methods_get_the_mgpu_dsl_form():
  """A scratch ref after the outputs got only the out_shape count; x_ref.astype listed attributes;
  pl.load (gone from this JAX's Pallas) said "check the spelling"."""
  with pytest.raises(mg.SignatureError) as info:
    with_scratch_param.check(S((64, 256), F32))
  assert info.value.hint.endswith("; if acc_ref is scratch (Pallas's scratch_shapes), drop it from the parameters"
                                  " and allocate in the body: acc_ref = ml.smem(shape, dtype)")
  expect(ref_astype, [S((64, 256), F32)], mg.KernelTypeError, "x_ref.at[ml.ds(i * 8, 8), :].astype",
         "a GMEM ref has no attribute 'astype'",
         hint="read it into registers first: x_ref.at[ml.ds(i * 8, 8), :][...].astype(jnp.float32)")
  if not hasattr(pl, "load"):
    expect(old_pl_load, [S((64, 256), F32)], mg.UnknownNameError, "pl.load", "pl has no attribute 'load'",
           hint="write ref[...] or ml.load(ref, mask=..., other=...)")


# ---------------------------------------------------------------- jnp.zeros, lax.broadcasted_iota: the ml call
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def iota_mask(x_ref, o_ref):
  i = ml.program_id(0)
  col = jax.lax.broadcasted_iota(jnp.int32, (8, 256), 1)
  o_ref[ml.ds(i * 8, 8), :] = ml.where(col < 100, x_ref[ml.ds(i * 8, 8), :], 0.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def iota_followed(x_ref, o_ref):
  i = ml.program_id(0)
  col = ml.broadcast_to(ml.arange(256)[None, :], (8, 256))
  o_ref[ml.ds(i * 8, 8), :] = ml.where(col < 100, x_ref[ml.ds(i * 8, 8), :], 0.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def jnp_full_init(x_ref, o_ref):
  i = ml.program_id(0)
  m = jnp.full((8,), -jnp.inf)
  o_ref[ml.ds(i * 8, 8), :] = x_ref[ml.ds(i * 8, 8), :] - ml.maximum(m, ml.max(x_ref[ml.ds(i * 8, 8), :], axis=1))[:, None]


def test_array_constructors_hint_the_ml_call_with_their_arguments():
  """The hints were templates (ml.arange(n) ..., ml.full(shape, value, dtype)): now the call's own
  shape, value and dtype (jnp's default where it gave none), and the iota's axis."""
  x = np.random.default_rng(3).standard_normal((64, 256)).astype(np.float32)
  # jnp.full builds its tensor as ml.full since probe 46i (it was hinted)
  np.testing.assert_array_equal(np.asarray(jnp_full_init(x, interpret=True)), x - x.max(axis=1, keepdims=True))
  for kernel in (iota_followed, iota_mask):      # (lax.broadcasted_iota is the hinted form since probe 46i)
    np.testing.assert_array_equal(np.asarray(kernel(x, interpret=True)), np.where(np.arange(256)[None, :] < 100, x, 0))


# ---------------------------------------------------------------- lax.fori_loop and lax.cond: the Python statement
# (made by exec, without source: a plain def of the user's is a body jax.lax's control flow traces since probe 52f,
# and these hints are for the functions left)
exec("def _add_one(j, acc):\n  return acc + 1.0\n", globals())
_add_one = globals()["_add_one"]


@ml.inline
def _add_one_inline(j, acc):
  return acc + 1.0


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def pallas_fori(x_ref, o_ref):
  i = ml.program_id(0)
  acc = lax.fori_loop(0, 4, _add_one, x_ref[ml.ds(i * 8, 8), :])
  o_ref[ml.ds(i * 8, 8), :] = acc


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def pallas_fori_followed(x_ref, o_ref):
  i = ml.program_id(0)
  acc = x_ref[ml.ds(i * 8, 8), :]
  for j in range(0, 4):
    acc = _add_one_inline(j, acc)
  o_ref[ml.ds(i * 8, 8), :] = acc


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def pallas_cond(x_ref, o_ref):
  i = ml.program_id(0)
  v = lax.cond(i == 0, _add_one, _add_one, 0, x_ref[ml.ds(i * 8, 8), :])
  o_ref[ml.ds(i * 8, 8), :] = v


def test_lax_control_flow_hints_the_statement_with_the_calls_arguments():
  """The hint was a template (for j in range(lower, upper): acc = ...): now the call's bounds, body and
  carry, a loop counter the file does not use (i, j and k are taken here), and the plain function to
  decorate @ml.inline."""
  spec = [S((64, 256), F32)]
  with pytest.raises(mg.KernelTypeError) as info:
    pallas_fori.check(*spec)
  c = info.value.hint.split(" in range(0, 4)")[0].rsplit(" ", 1)[-1]     # a counter the file does not use
  assert c not in ("i", "j", "k")
  expect(pallas_fori, spec, mg.KernelTypeError, "lax.fori_loop(",
         "lax.fori_loop is JAX's control flow, which a kernel writes in Python",
         hint=f"acc = x_ref[ml.ds(i * 8, 8), :]; for {c} in range(0, 4): acc = _add_one({c}, acc) (decorate _add_one"
              " with @ml.inline: a kernel calls its own helpers so) (ml.range(..., stages=s) pipelines its loads)")
  expect(pallas_cond, spec, mg.KernelTypeError, "lax.cond(", "lax.cond is JAX's control flow, which a kernel"
         " writes in Python", hint="if i == 0: v = _add_one(0, x_ref[ml.ds(i * 8, 8), :]) else: v = _add_one(0,"
         " x_ref[ml.ds(i * 8, 8), :]) (a run-time if on a scalar; for tensors, ml.where(i == 0, a, b)) (decorate"
         " _add_one with @ml.inline: a kernel calls its own helpers so)")
  x = np.random.default_rng(4).standard_normal((64, 256)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(pallas_fori_followed(x, interpret=True)), x + 4, rtol=1e-6)


# ---------------------------------------------------------------- jax.debug.print, jnp's .at[].set
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def debug_print(x_ref, o_ref):
  i = ml.program_id(0)
  jax.debug.print("program {} max {m:.3f}", i, m=ml.max(x_ref[ml.ds(i * 8, 8), :]))
  o_ref[ml.ds(i * 8, 8), :] = x_ref[ml.ds(i * 8, 8), :]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def at_set_register(x_ref, o_ref):
  i = ml.program_id(0)
  x = x_ref[ml.ds(i * 8, 8), :]
  o_ref[ml.ds(i * 8, 8), :] = x.at[0].set(0.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def at_set_ref(x_ref, o_ref):
  i = ml.program_id(0)
  o_ref.at[ml.ds(i * 8, 8), :].set(x_ref[ml.ds(i * 8, 8), :])


def test_debug_print_and_at_updates_hint_the_kernels_spelling():
  """jax.debug.print's hint was a template; x.at[0].set(v) and ref.at[...].set(v) listed attributes. (Since probe
  49d jax.debug.print prints as the print(f"...") its hint wrote: test_probe49d checks its lines.)"""
  spec = [S((64, 256), F32)]
  debug_print.check(*spec)
  x = jnp.asarray(np.random.default_rng(2).standard_normal((64, 256)), F32)     # (probe 51i: x.at[0].set(0.0)
  want = np.asarray(x).reshape(8, 8, 256).copy()                                # computes, as its hint's select)
  want[:, 0] = 0.0
  np.testing.assert_array_equal(np.asarray(at_set_register(x, interpret=True)), want.reshape(64, 256))
  expect(at_set_ref, spec, mg.KernelTypeError, "o_ref.at", "a GMEM ref has no attribute 'set'",
         hint="write o_ref.at[ml.ds(i * 8, 8), :][...] = x_ref[ml.ds(i * 8, 8), :] (a ref is written in place)")


# ---------------------------------------------------------------- Pallas's functions: the ml call, same arguments
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def pallas_copy(x_ref, o_ref):
  i = ml.program_id(0)
  s = ml.smem((8, 256), jnp.float32)
  plgpu.copy_gmem_to_smem(x_ref.at[pl.ds(i * 8, 8)], s, None)
  o_ref[ml.ds(i * 8, 8), :] = s[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def pallas_ds(x_ref, o_ref):
  i = ml.program_id(0)
  o_ref[ml.ds(i * 8, 8), :] = x_ref[pl.ds(i * 8, 8), :]


def test_pallas_functions_hint_the_ml_call_with_their_arguments():
  """The hints were templates (write ml.ds(start, size), ml.copy(src, dst)): now the call's own
  arguments, Pallas's index helpers in them respelt, a copy's barrier dropped."""
  spec = [S((64, 256), F32)]
  expect(pallas_copy, spec, mg.KernelTypeError, "plgpu.copy_gmem_to_smem(",
         "plgpu.copy_gmem_to_smem is Pallas's; an mgpu_dsl kernel calls ml.* functions",
         hint="write ml.copy(x_ref.at[ml.ds(i * 8, 8)], s): the compiler awaits the copy before the buffer's first"
              " read (drop the barrier and its wait)")
  expect(pallas_ds, spec, mg.KernelTypeError, "pl.ds(", "pl.ds is Pallas's; an mgpu_dsl kernel calls ml.* functions",
         hint="write ml.ds(i * 8, 8)")


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def debug_print_tuple(x_ref, o_ref):
  i = ml.program_id(0)
  jax.debug.print(("program", 1), i)
  o_ref[ml.ds(i * 8, 8), :] = x_ref[ml.ds(i * 8, 8), :]


def test_debug_print_of_a_non_string_format_keeps_the_plain_hint():
  """The format hint parsed the first argument as a string whatever it was: a raw TypeError (MG900). (Since probe
  49d the error is jax.debug.print's own, at the format.)"""
  expect(debug_print_tuple, [S((64, 256), F32)], mg.KernelTypeError, '("program", 1)',
         "jax.debug.print takes a format string first, got a Python tuple",
         hint='jax.debug.print("i={} x={}", i, x), or print(...) with values and f-strings')


def test_autotuned_partial_kernels_keep_their_winners_apart(tmp_path, monkeypatch):
  """The winners file was keyed by the function's source and configs only: two partials of one
  function (eps=1e-5 and eps=10.0) shared one file of winners."""
  monkeypatch.setenv("MGPU_DSL_CACHE_DIR", str(tmp_path))
  tuned = [mg.autotune(configs=[dict(block_rows=8), dict(block_rows=16)])(
      mg.mgpu_kernel(functools.partial(_norm_rows, eps=eps), out_shape=lambda x: x, grid=_grid_rows))
      for eps in (1e-5, 10.0)]
  paths = [t._winners_path() for t in tuned]
  assert None not in paths and paths[0] != paths[1]


# ---------------------------------------------------------------- plgpu.emit_pipeline: the ml.range loop
def _double_block(x_smem, o_smem):
  o_smem[...] = x_smem[...] * 2


@ml.inline
def _double_block_inline(x_smem, o_smem):
  o_smem[...] = x_smem[...] * 2


@mg.mgpu_kernel(out_shape=lambda x: x)
def pallas_pipeline(x_ref, o_ref):
  plgpu.emit_pipeline(_double_block, grid=(8,), in_specs=[plgpu.BlockSpec((8, 256), lambda i: (i, 0))],
                      out_specs=[plgpu.BlockSpec((8, 256), lambda i: (i, 0))])(x_ref, o_ref)


@mg.mgpu_kernel(out_shape=lambda x: x)
def pallas_pipeline_followed(x_ref, o_ref):
  x_s = ml.smem((8, 256), x_ref.dtype)
  o_s = ml.smem((8, 256), o_ref.dtype)
  for t in ml.range(8, stages=2):
    ml.copy(x_ref.at[ml.ds(t * 8, 8), ml.ds(0, 256)], x_s)
    _double_block_inline(x_s, o_s)
    ml.copy(o_s, o_ref.at[ml.ds(t * 8, 8), ml.ds(0, 256)])


def test_emit_pipeline_hints_the_pipelined_loop_of_its_blocks():
  """The hint was a template (for k in ml.range(n, stages=s): ml.copy(x.at[...], buf); ...): now the
  grid, the blocks' buffers and windows from the BlockSpecs' index maps, and the body on them."""
  e = expect(pallas_pipeline, [S((64, 256), F32)], mg.KernelTypeError, "plgpu.emit_pipeline(",
             "plgpu.emit_pipeline is Pallas's; an mgpu_dsl kernel calls ml.* functions")
  assert e.hint.startswith("a pipelined loop: x_s = ml.smem((8, 256), x_ref.dtype); o_s = ml.smem((8, 256),"
                           " o_ref.dtype); for ")
  assert e.hint.endswith(" in ml.range(8, stages=2): ml.copy(x_ref.at[ml.ds(step * 8, 8), ml.ds(0, 256)], x_s);"
                         " _double_block(x_s, o_s); ml.copy(o_s, o_ref.at[ml.ds(step * 8, 8), ml.ds(0, 256)])"
                         " (decorate _double_block with @ml.inline: a kernel calls its own helpers so)")
  x = np.random.default_rng(5).standard_normal((64, 256)).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(pallas_pipeline_followed(x, interpret=True)), 2 * x)


# ---------------------------------------------------------------- @pl.when(cond) and @pl.loop(lo, hi) bodies
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def pallas_when(x_ref, o_ref):
  i = ml.program_id(0)
  o_ref[ml.ds(i * 8, 8), :] = x_ref[ml.ds(i * 8, 8), :]

  @pl.when(i == 1)
  def _():
    o_ref[ml.ds(i * 8, 8), :] = x_ref[ml.ds(i * 8, 8), :] * 3


@mg.mgpu_kernel(out_shape=lambda x: x)
def pallas_loop(x_ref, o_ref):
  @pl.loop(0, 8)
  def _(r):
    o_ref[ml.ds(r * 8, 8), :] = x_ref[ml.ds(r * 8, 8), :]


def test_pallas_when_and_loop_bodies_hint_the_statement_with_their_condition_and_bounds():
  """The hints were templates (if cond: ..., for i in range(start, stop): ...)."""
  spec = [S((64, 256), F32)]
  expect(pallas_when, spec, mg.UnsupportedSyntaxError, "pl.when(", "a nested function is not supported in a kernel",
         hint="Pallas's @pl.when(i == 1) body is an if statement here: if i == 1:, with the body of _ under it, one"
              " level less indented (drop the def and the decorator)")
  expect(pallas_loop, spec, mg.UnsupportedSyntaxError, "pl.loop(", "a nested function is not supported in a kernel",
         hint="Pallas's @pl.loop(...) body is a for loop here: for r in range(0, 8):, with the body of _ under it,"
              " one level less indented (drop the def and the decorator)")


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32))
def pallas_strided_ds(x_ref, o_ref):
  o_ref[...] = x_ref[pl.ds(0, 128, 2)]


def test_a_strided_pl_ds_is_not_hinted_as_a_plain_window():
  """pl.ds(0, 128, 2)'s hint was "write ml.ds(start, size)", which drops the stride: another window."""
  e = expect(pallas_strided_ds, [S((256,), F32)], mg.KernelTypeError, "pl.ds(",
             "pl.ds is Pallas's; an mgpu_dsl kernel calls ml.* functions")
  assert e.hint.startswith("ml.ds takes no stride (a window's elements are consecutive): give the array an axis of"
                           " the stride outside the kernel, x.reshape(..., n // 2, 2)")


def test_pallas_call_options_debug_name_and_cost_estimate_say_what_to_do():
  """They listed @mgpu_kernel's options only (name= is one since probe 50d)."""
  for option, hint in (("debug", "drop debug=: kernel.typed_ir(*specs) and kernel.mlir(*specs) print what it"
                                 " compiles to"), ("cost_estimate", "drop cost_estimate=")):   # (name= names it)
    with pytest.raises(mg.SignatureError) as info:
      mg.mgpu_kernel(out_shape=lambda x: x, **{option: None})(_norm_rows)
    assert info.value.message == f"@mgpu_kernel has no option {option}="
    assert info.value.hint.startswith(hint)
