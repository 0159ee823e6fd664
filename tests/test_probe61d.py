"""Probe 61d: kernels as JAX functions, differentially fuzzed under composed JAX transformations (tests/jax_fuzz.py).

Every composed program runs with interpret-mode kernels on the CPU against the same program with each kernel
replaced by its jnp reference; a third of them are also exported for CUDA (serialised and deserialised where
flatbuffers is installed). The fuzzer found no class to fix (design note 206): these tests pin the compositions it
exercised, and its own ability to see a wrong result.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_fuzz as F
import mgpu_dsl as mg

X = jnp.asarray(np.random.default_rng(0).integers(-8, 8, (128, 64)) / 2, jnp.float32)
Y = X[::-1] + 1

# Seeds of tests/jax_fuzz.py, several transformations each (scan, vmap of every in_axes form, cond, switch, while,
# custom_vjp under grad, eval_shape, lax.map, jitted and vmapped kernel objects, x64, weak scalars, ...).
QUICK = [[1, 5, 16, 119, 174, 202], [585, 618, 653, 664, 900, 918], [1011, 1033, 1043, 1090, 1103, 1117],
         [1120, 1134, 1150, 1163, 1177, 1181]]
GOOD = ("ok", "refused", "invalid")


def _run(gen):
  if gen.x64:
    with jax.enable_x64(True):
      return F.run(gen), (F.cuda(gen) if gen.seed % 3 == 0 else ("ok", ""))
  return F.run(gen), (F.cuda(gen) if gen.seed % 3 == 0 else ("ok", ""))


@pytest.mark.parametrize("part", range(len(QUICK)))
def test_fuzz_seeds_match_their_jnp_programs(part):
  outs = []
  for seed in QUICK[part]:
    gen = F.Gen(seed)
    (out, why), (cout, cwhy) = _run(gen)
    assert out in GOOD, f"{gen}: {out}\n{why}"
    assert cout in ("ok", "refused"), f"{gen}: CUDA export {cout}\n{cwhy}"
    if out == "refused":         # only the kernels' own dtype rules refuse (an ml.scalar float32 meeting 16 bits)
      assert "MG104" in why or "MG102" in why, why
    outs.append(out)
  assert outs.count("ok") >= 3, outs


def test_the_fuzzer_sees_a_wrong_result():
  gen = F.Gen(5)
  case = gen.case
  def off_by_one(*a, **kw):
    return jax.tree_util.tree_map(lambda o: o + 1, case.ref(*a, **kw))
  gen.case = F.Case(case.name, case.kernel, off_by_one, case.arity, case.dtypes, case.kw, case.shapes)
  assert F.run(gen)[0] == "wrong"


def test_an_aliased_input_read_after_the_call_keeps_its_value():
  f = jax.jit(lambda a, b: (F.acc(a, b, interpret=True), a))
  out, a = f(X, Y)
  np.testing.assert_array_equal(out, X + Y)
  np.testing.assert_array_equal(a, X)
  out, a = jax.jit(jax.vmap(lambda a, b: (F.acc(a, b, interpret=True), a)))(X[None], Y[None])
  np.testing.assert_array_equal(a[0], X)
  g = jax.jit(functools.partial(F.acc, interpret=True), donate_argnums=0)
  np.testing.assert_array_equal(g(X + 0, Y), X + Y)


def test_vmap_of_no_batched_input_broadcasts_every_output():
  s, p = jax.vmap(lambda a, b: F.two(a, b, interpret=True), in_axes=None, axis_size=3)(X, Y)
  np.testing.assert_array_equal(s, jnp.broadcast_to(X + Y, (3, 128, 64)))
  np.testing.assert_array_equal(p, jnp.broadcast_to(X * Y, (3, 128, 64)))
  out = jax.vmap(lambda a, b: F.acc(a, b, interpret=True), in_axes=None, axis_size=2)(X, Y)
  np.testing.assert_array_equal(out, jnp.broadcast_to(X + Y, (2, 128, 64)))


def test_a_three_axis_grid_with_an_aliased_input_under_vmap_runs_as_a_loop():
  xs, ys = jnp.stack([X, X + 1, X - 1]), jnp.stack([Y, Y * 2, Y])
  k = functools.partial(F.grid3, interpret=True)
  for axes, a, b in (((0, 0), xs, ys), ((0, None), xs, Y), ((None, 0), X, ys), ((1, 0), jnp.moveaxis(xs, 0, 1), ys)):
    got = jax.jit(jax.vmap(k, in_axes=axes))(a, b)
    want = jax.vmap(F.CASES[6].ref, in_axes=axes)(a, b)
    for g, w in zip(got, want):
      np.testing.assert_array_equal(g, w)
  got = jax.vmap(jax.vmap(k, in_axes=(0, None)), in_axes=(None, 0))(xs, ys)
  np.testing.assert_array_equal(got[1], jnp.broadcast_to(ys[:, None], (3, 3, 128, 64)) + xs[None])


def test_batched_scalars_and_a_dict_in_axes():
  s = jnp.arange(3.0)
  out = jax.vmap(lambda a, t: F.axpb(a, t, 1.0, interpret=True), in_axes=(None, 0))(X, s)
  np.testing.assert_array_equal(out, X[None] * s[:, None, None] + 1)
  w = jnp.stack([jnp.ones(64), jnp.arange(64.0)])
  out = jax.vmap(functools.partial(F.affine, interpret=True), in_axes=(None, {"w": 0, "b": None}))(X, {"w": w, "b": Y})
  np.testing.assert_array_equal(out, X[None] * w[:, None, :] + Y)


def test_x64_batched_int_scalars_and_weak_floats():
  with jax.enable_x64(True):
    out = jax.vmap(lambda t: jax.lax.fori_loop(0, 2, lambda i, c: c + F.axpb(X, t + i, 0, interpret=True),
                                               jnp.zeros_like(X)))(jnp.arange(3))
    np.testing.assert_array_equal(out, X[None] * (2 * jnp.arange(3.0) + 1)[:, None, None])
    out = jax.vmap(jax.jit(lambda a, t: F.axpb(a, t, 1.0, interpret=True)), in_axes=(0, None))(X[None], 0.5)
    assert out.dtype == jnp.float32
    np.testing.assert_array_equal(out[0], X * 0.5 + 1)


def test_kernels_in_a_while_condition_and_a_backward_under_vmap():
  gen = F.Gen(0)
  gen.case, gen.dtype, gen.args, gen.scalars, gen.x64, gen.base = F.CASES[0], "float32", (X,), (), False, "call"
  for stack in (["while_cond"], ["custom_vjp_kbwd", "vmap"], ["custom_vjp", "scan_rev"], ["lax_map_bs", "cond"]):
    gen.stack, gen.axes, gen.sizes, gen.out_axes = stack, [0] * len(stack), [2] * len(stack), [0] * len(stack)
    assert F.run(gen) == ("ok", ""), stack


def test_an_ml_scalar_float_meeting_float16_is_refused_with_a_hint():
  with pytest.raises(mg.KernelError, match=r"MG104") as e:
    F.axpb(X.astype(jnp.float16), 0.5, 1.0, interpret=True)
  assert "alpha.astype(jnp.float16)" in e.value.hint


def test_symbolic_shapes_are_refused_with_a_hint():
  spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape("n, 64"), jnp.float32)
  with pytest.raises(mg.KernelError, match=r"symbolic dimension n.*MG006") as e:
    jax.export.export(jax.jit(F.ew), platforms=["cuda"])(spec)
  assert e.value.hint
  spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape("b, 128, 64"), jnp.float32)
  with pytest.raises(mg.KernelError, match=r"symbolic size b.*MG006"):
    jax.export.export(jax.jit(jax.vmap(F.ew)), platforms=["cuda"])(spec)


@pytest.mark.skipif(not F._FLATBUFFERS, reason="jax.export serialisation needs flatbuffers")
def test_an_exported_program_round_trips_through_serialisation():
  f = jax.jit(jax.vmap(lambda a, b: F.two(a, b)))
  exp = jax.export.export(f, platforms=["cuda"])(*[jax.ShapeDtypeStruct((2, 128, 64), jnp.float16)] * 2)
  back = jax.export.deserialize(exp.serialize())
  assert [(a.shape, a.dtype) for a in back.out_avals] == [((2, 128, 64), jnp.float16)] * 2
  assert back.platforms == ("cuda",)


@pytest.mark.gpu
@pytest.mark.parametrize("part", range(len(QUICK)))
def test_gpu_fuzz_seeds_match_their_jnp_programs(part):
  for seed in QUICK[part]:
    gen = F.Gen(seed)
    gen.interpret = False
    if gen.x64:
      with jax.enable_x64(True):
        out, why = F.run(gen)
    else:
      out, why = F.run(gen)
    assert out in GOOD, f"{gen}: {out}\n{why}"


@pytest.mark.gpu
def test_gpu_aliasing_and_batched_scalars():
  out, a = jax.jit(lambda a, b: (F.acc(a, b), a))(X, Y)
  np.testing.assert_array_equal(out, X + Y)
  np.testing.assert_array_equal(a, X)
  s = jnp.arange(3.0)
  out = jax.vmap(lambda a, t: F.axpb(a, t, 1.0), in_axes=(None, 0))(X, s)
  np.testing.assert_array_equal(out, X[None] * s[:, None, None] + 1)
  out = jax.vmap(lambda a, b: F.acc(a, b), in_axes=None, axis_size=2)(X, Y)
  np.testing.assert_array_equal(out, jnp.broadcast_to(X + Y, (2, 128, 64)))


def test_a_compiled_call_under_disable_jit_is_still_jitted():
  """The compiled path's wrapper (wrap.named_call) on the CPU, with a primitive that, like Mosaic GPU's custom call,
  has a lowering and no eager rule: under jax.disable_jit it must still be compiled, not bound op by op."""
  from jax.extend.core import Primitive
  from jax.interpreters import mlir
  from mgpu_dsl import wrap
  p = Primitive("mgpu_dsl_test_no_eager_rule")
  p.def_abstract_eval(lambda x: x)
  mlir.register_lowering(p, mlir.lower_fun(lambda x: x * 2, multiple_results=False))
  call = wrap.named_call(lambda x: p.bind(x), "twice", None)
  with jax.disable_jit():
    out = call(X)
    shape = jax.eval_shape(call, X)
  np.testing.assert_array_equal(out, 2 * X)
  assert shape.shape == X.shape


@pytest.mark.gpu
def test_gpu_a_compiled_kernel_under_disable_jit_runs_as_one_call():
  """jax.disable_jit runs a program op by op; a compiled kernel has no op-by-op form, so it stays one compiled call
  (it failed inside JAX: "Evaluation rule for 'mosaic_gpu_p' not implemented", seed 1033 on the GPU)."""
  with jax.disable_jit():
    out = F.acc(X, Y)
    batched = jax.vmap(lambda a: F.acc(a, Y))(jnp.stack([X, 2 * X]))
    shape = jax.eval_shape(lambda a: jax.vmap(lambda t: F.acc(t, Y))(a), jnp.stack([X, X]))
  np.testing.assert_array_equal(out, X + Y)
  np.testing.assert_array_equal(batched, jnp.stack([X + Y, 2 * X + Y]))
  assert shape.shape == (2, 128, 64)
