"""Probe 48d: mgpu_dsl kernels as JAX citizens, under jax_enable_x64 and JAX's transformations. A pipelined
`ml.range(..., stages=s)` (warp-specialised too) whose run-time bounds are int64 (an x64 `cu_seqlens[b]`, a
`jnp.int64(k)`) was MG003 ("a pipelined loop's run-time bounds must be 32-bit integers"); it counts its trips in
int32, as every pipelined loop's stages do, and its index is int64, as a plain loop's over the same bounds."""
from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, I64, BF16 = jnp.float32, jnp.int64, jnp.bfloat16


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _rand(shape, seed, dtype=np.float32):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _exports(kernel, *specs):
  """Builds for CUDA (the real Mosaic GPU module, verified) as jax.export does."""
  return jax.export.export(jax.jit(lambda *a: kernel(*a)), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- pipelined loops of int64 bounds
@mg.mgpu_kernel(out_shape=lambda x, cu: S((cu.shape[0] - 1, x.shape[1]), F32), grid=lambda x, cu: (cu.shape[0] - 1,))
def varlen_sums(x, cu, out):
  b = ml.program_id(0)
  buf = ml.smem((16, x.shape[1]), F32)
  acc = ml.zeros((x.shape[1],), F32)
  for t in ml.range(cu[b], cu[b + 1], 16, stages=2):    # int64 cu_seqlens under jax_enable_x64
    ml.copy(x.at[ml.ds(t, 16)], buf)
    rows = t + ml.arange(16)
    acc = acc + ml.sum(ml.where((rows < cu[b + 1])[:, None], buf[...], 0.0), axis=0)
  out.at[b][...] = acc


def _varlen_sums(x, cu):
  return np.stack([x[cu[b]:cu[b + 1]].sum(0) for b in range(len(cu) - 1)])


@mg.mgpu_kernel(out_shape=lambda a, b, k: S((a.shape[0], b.shape[1]), F32),
                grid=lambda a, b, k: (a.shape[0] // 64, b.shape[1] // 128))
def matmul_k(a, b, k, out):
  i, j = ml.program_id(0), ml.program_id(1)
  a_s = ml.smem((64, 64), BF16)
  b_s = ml.smem((64, 128), BF16)
  acc = ml.zeros((64, 128), F32)
  for kk in ml.range(0, k[...], 64, stages=3):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(kk, 64)], a_s)
    ml.copy(b.at[ml.ds(kk, 64), ml.ds(j * 128, 128)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  out.at[ml.ds(i * 64, 64), ml.ds(j * 128, 128)][...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b, k: S((a.shape[0], b.shape[1]), F32),
                grid=lambda a, b, k: (a.shape[0] // 64, b.shape[1] // 128))
def matmul_k_ws(a, b, k, out):
  i, j = ml.program_id(0), ml.program_id(1)
  a_s = ml.smem((64, 64), BF16)
  b_s = ml.smem((64, 128), BF16)
  acc = ml.zeros((64, 128), F32)
  for kk in ml.range(k[...] // 64, stages=2, warp_specialize=True):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(kk * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(kk * 64, 64), ml.ds(j * 128, 128)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  out.at[ml.ds(i * 64, 64), ml.ds(j * 128, 128)][...] = acc


@mg.mgpu_kernel(out_shape=lambda x, n: (S((1, x.shape[1]), F32), S((2,), I64)))
def decay_and_index(x, n, out, last):
  buf = ml.smem((8, x.shape[1]), F32)
  acc = ml.zeros((8, x.shape[1]), F32)
  for i in ml.range(n[0] - 1, -1, -1, stages=2):       # counting down
    ml.copy(x.at[ml.ds(i * 8, 8)], buf)
    acc = acc * 0.5 + buf[...]
  i = n[1] * 0 - 1
  c = n[1] * 0
  for i in ml.range(1, n[1], 2, stages=2):
    ml.copy(x.at[ml.ds(i * 8, 8)], buf)
    c += i * 2 ** 32                                   # int64 arithmetic on the index
  out[...] = ml.sum(acc, axis=0, keepdims=True)
  last[0] = i                                          # the index after the loop, as Python leaves it
  last[1] = c


def _decay_and_index(x, n):
  acc = np.zeros((8, x.shape[1]), np.float32)
  for i in range(n[0] - 1, -1, -1):
    acc = acc * 0.5 + x[i * 8:i * 8 + 8]
  i, c = -1, 0
  for i in range(1, n[1], 2):
    c += i * 2 ** 32
  return acc.sum(0, keepdims=True), np.array([i, c], np.int64)


def test_pipelined_loop_of_int64_bounds_has_an_int64_index():
  x = _rand((224, 128), 0)
  cu = np.array([0, 5, 40, 40, 100, 208], np.int64)
  with jax.enable_x64(True):
    got = varlen_sums(x, cu, interpret=True)
    text = varlen_sums.mlir(S(x.shape, F32), S(cu.shape, I64))
    assert "mosaic_gpu" in _exports(varlen_sums, S(x.shape, F32), S(cu.shape, I64))
  np.testing.assert_allclose(got, _varlen_sums(x, cu), rtol=1e-5, atol=1e-5)
  assert "arith.trunci" in text and "i32 to i64" in text      # trips counted in int32, the index int64


@pytest.mark.parametrize("kernel", [matmul_k, matmul_k_ws])
def test_pipelined_dot_loop_of_an_int64_k(kernel):
  a, b = _rand((64, 256), 1, BF16), _rand((256, 128), 2, BF16)
  with jax.enable_x64(True):
    got = kernel(a, b, np.int64(192), interpret=True)
    assert "mosaic_gpu" in _exports(kernel, S(a.shape, BF16), S(b.shape, BF16), S((), I64))
  want = np.asarray(a, np.float32)[:, :192] @ np.asarray(b, np.float32)[:192]
  np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


def test_pipelined_loops_of_int64_bounds_counting_down_and_the_index_after():
  x = _rand((64, 128), 3)
  with jax.enable_x64(True):
    for n in ([5, 8], [1, 1]):
      got, last = decay_and_index(x, np.array(n, np.int64), interpret=True)
      want, want_last = _decay_and_index(x, n)
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
      assert last.dtype == np.int64
      np.testing.assert_array_equal(last, want_last)
    assert "mosaic_gpu" in _exports(decay_and_index, S(x.shape, F32), S((2,), I64))


@mg.mgpu_kernel(out_shape=lambda x, s: S((8, x.shape[1]), F32))
def strided_sum(x, s, out):
  buf = ml.smem((8, x.shape[1]), F32)
  acc = ml.zeros((8, x.shape[1]), F32)
  for r in ml.range(0, x.shape[0], s[...], stages=2):      # static bounds, an int64 run-time step
    ml.copy(x.at[ml.ds(r, 8)], buf)
    acc += buf[...]
  out[...] = acc


def test_pipelined_loop_of_static_bounds_and_an_int64_step():
  """(The int64 trip count compared two Python ints: an InternalError, StopIteration.)"""
  x = _rand((64, 128), 13)
  with jax.enable_x64(True):
    for s in (16, 24, 100):
      np.testing.assert_allclose(strided_sum(x, np.int64(s), interpret=True),
                                 sum(x[r:r + 8] for r in range(0, 64, s)), rtol=1e-5, atol=1e-5)
    assert "mosaic_gpu" in _exports(strided_sum, S(x.shape, F32), S((), I64))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_pipelined_loops_of_int64_bounds():
  x = _rand((224, 128), 4)
  a, b = _rand((128, 512), 5, BF16), _rand((512, 256), 6, BF16)
  with jax.enable_x64(True):
    cu = np.array([0, 5, 40, 40, 100, 208], np.int64)
    np.testing.assert_allclose(jax.jit(varlen_sums)(x, cu), _varlen_sums(x, cu), rtol=1e-5, atol=1e-5)
    want = np.asarray(a, np.float32)[:, :448] @ np.asarray(b, np.float32)[:448]
    for kernel in (matmul_k, matmul_k_ws):
      np.testing.assert_allclose(jax.jit(kernel)(a, b, jnp.int64(448)), want, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(jax.jit(strided_sum)(x[:64], np.int64(24)), sum(x[r:r + 8] for r in range(0, 64, 24)),
                               rtol=1e-5, atol=1e-5)
    for n in ([5, 8], [1, 1]):
      got, last = jax.jit(decay_and_index)(x[:64], np.array(n, np.int64))
      want, want_last = _decay_and_index(x[:64], n)
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
      np.testing.assert_array_equal(last, want_last)


# ---------------------------------------------------------------- ml functions and helpers called through JAX
@ml.inline
def doubled(v):
  return v * 2


def _raised_here(run, cls, message):
  """`run()` raises `cls` at the line that called it (the one above), with exactly `message` and a hint."""
  line = sys._getframe(1).f_lineno - 1
  with pytest.raises(mg.KernelError) as info:
    run()
  e = info.value
  assert type(e) is cls and e.code == cls.code
  assert (e.filename, e.lineno) == (__file__, line), e.render()
  assert e.message == message and e.hint
  return e


def test_helpers_and_ml_functions_through_jax_transformations_point_at_the_users_line():
  """jax.jit(helper)(x), jax.eval_shape(helper, ...), jax.vmap(ml.exp)(x) call them from JAX's tracing: the
  error pointed into JAX (partial_eval.py:2312, linear_util.py) instead of the line of the call."""
  x = np.ones((8, 128), np.float32)
  helper = "doubled is an @ml.inline helper: call it from an @mgpu_kernel function"
  run = lambda: jax.jit(doubled)(x)
  e = _raised_here(run, mg.KernelTypeError, helper)
  assert e.col_offset == len("  run = lambda: ")
  run = lambda: jax.eval_shape(doubled, S((8, 128), F32))
  _raised_here(run, mg.KernelTypeError, helper)
  run = lambda: jax.vmap(lambda v: doubled(v) + 1)(x)
  e = _raised_here(run, mg.KernelTypeError, helper)
  assert e.col_offset == len("  run = lambda: jax.vmap(lambda v: ")
  run = lambda: jax.vmap(ml.exp)(x)
  _raised_here(run, mg.KernelTypeError, "ml.exp can only be used inside an @mgpu_kernel function")
  run = lambda: jax.lax.scan(lambda c, v: (c, ml.sum(v)), 0.0, x)
  e = _raised_here(run, mg.KernelTypeError, "ml.sum can only be used inside an @mgpu_kernel function")
  assert e.col_offset == len("  run = lambda: jax.lax.scan(lambda c, v: (c, ")


# ---------------------------------------------------------------- shape-only questions build nothing
@mg.mgpu_kernel(out_shape=lambda x: (x, S((1, x.shape[1]), F32)), grid=lambda x: (x.shape[0] // 64,))
def scaled_and_colmax(x, out, colmax):
  r = ml.ds(ml.program_id(0) * 64, 64)
  v = x.at[r][...]
  out.at[r][...] = v * 3
  ml.atomic_max(colmax.at[0], ml.max(v, axis=0).astype(F32))


def test_shape_only_transformations_build_no_mosaic_gpu_module(monkeypatch):
  """jax.eval_shape, jax.make_jaxpr and jax.jit(f).trace built every kernel's Mosaic GPU module (for a large
  kernel, most of a first call's compile time) though they ask for shapes only; the module is built when the
  call is lowered (jax.jit's compile, jax.export), once per specialisation."""
  from mgpu_dsl.lowering import kernel as lk
  built, build = [], lk.build
  monkeypatch.setattr(lk, "build", lambda k: built.append(k.name) or build(k))
  spec = S((320, 128), BF16)
  f = lambda x: [o * 2 for o in scaled_and_colmax(x)]
  got = jax.eval_shape(f, spec)
  assert [(o.shape, o.dtype) for o in got] == [((320, 128), BF16), ((1, 128), F32)]
  assert "kernel=scaled_and_colmax" in str(jax.make_jaxpr(f)(spec))
  jax.jit(f).trace(spec)
  got = jax.eval_shape(jax.vmap(f), S((3, 320, 128), BF16))
  assert [(o.shape, o.dtype) for o in got] == [((3, 320, 128), BF16), ((3, 1, 128), F32)]
  jax.eval_shape(jax.grad(lambda x: jax.lax.stop_gradient(scaled_and_colmax(x)[0]).astype(F32).sum() + x.sum()),
                 S((320, 128), F32))
  assert built == []
  text = jax.export.export(jax.jit(f), platforms=["cuda"])(spec).mlir_module()
  assert built == ["scaled_and_colmax"] and "mosaic_gpu" in text and "func.func private @scaled_and_colmax" in text
  jax.export.export(jax.jit(f), platforms=["cuda"])(spec)
  assert built == ["scaled_and_colmax"]          # (the specialisation's module, built once)
  x = _rand((320, 128), 7, BF16)
  got = jax.jit(lambda x: scaled_and_colmax(x, interpret=True))(x)
  np.testing.assert_array_equal(got[0], (x * 3).astype(BF16))
  np.testing.assert_array_equal(got[1], np.asarray(x, np.float32).max(0, keepdims=True))


@mg.mgpu_kernel(out_shape=lambda x, g: x, grid=lambda x, g: (x.shape[0] // 64,))
def scaled_vjp(x, g, dx):
  r = ml.ds(ml.program_id(0) * 64, 64)
  dx.at[r][...] = g.at[r][...] * 3


@jax.custom_vjp
def tripled(x):
  return scaled_and_colmax(x)[0]


tripled.defvjp(lambda x: (tripled(x), x), lambda x, g: (scaled_vjp(x, g),))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_compiled_calls_built_when_lowered():
  """The compiled call under each transformation: its module is built at lowering (or by the primitive's impl,
  where JAX evaluates a traced call eagerly: jax.vmap's custom_vmap outside jax.jit)."""
  x = _rand((320, 128), 8)
  xs = _rand((3, 320, 128), 9)
  want_max = lambda x: x.max(-2, keepdims=True)
  out, colmax = jax.jit(scaled_and_colmax)(x)
  np.testing.assert_allclose(out, x * 3, rtol=1e-6)
  np.testing.assert_allclose(colmax, want_max(x), rtol=1e-6)
  for run in (jax.vmap(scaled_and_colmax), jax.jit(jax.vmap(scaled_and_colmax))):
    out, colmax = run(xs)
    np.testing.assert_allclose(out, xs * 3, rtol=1e-6)
    np.testing.assert_allclose(colmax, want_max(xs), rtol=1e-6)
  total = jax.jit(lambda xs: jax.lax.scan(lambda c, v: (c + tripled(v), None), jnp.zeros_like(xs[0]), xs)[0])(xs)
  np.testing.assert_allclose(total, xs.sum(0) * 3, rtol=1e-5, atol=1e-5)
  grad = jax.jit(jax.grad(lambda xs: jax.lax.scan(lambda c, v: (c + jnp.sin(tripled(v)).sum(), None), 0.0, xs)[0]))
  np.testing.assert_allclose(grad(xs), np.cos(xs * 3) * 3, rtol=1e-4, atol=1e-4)
  mesh = jax.make_mesh((1,), ("b",), axis_types=(jax.sharding.AxisType.Auto,))
  sharded = jax.jit(jax.shard_map(lambda v: scaled_and_colmax(v)[0], mesh=mesh, in_specs=jax.P("b"), out_specs=jax.P("b")))
  np.testing.assert_allclose(sharded(x), x * 3, rtol=1e-6)


# ---------------------------------------------------------------- MG009's stop_gradient hint for pytree inputs
@mg.mgpu_kernel(out_shape=lambda x, p, q: x)
def affine_tree(x, p, q, out):
  out[...] = x[...] * p["w"][...][None, :] + p["b"][...] + q[1][...]


def test_mg009_hint_names_a_pytree_input_as_the_call_passes_it():
  """Its stop_gradient call listed the dict's leaves as inputs of their own, affine_tree(stop_gradient(x),
  stop_gradient(p['b']), stop_gradient(p['w']), ...), a call of the wrong arity; it is the call as written."""
  x, w = _rand((8, 128), 10), _rand((128,), 11)
  p, q = {"w": w, "b": np.float32(0.5)}, (np.float32(1.0), _rand((8, 128), 12))
  loss = lambda w: affine_tree(x, {"w": w, "b": p["b"]}, q, interpret=True).sum()
  with pytest.raises(mg.DifferentiationError) as info:
    jax.grad(loss)(w)
  sg = "jax.lax.stop_gradient"
  assert info.value.hint.endswith(f"affine_tree({sg}(x), {sg}(p), {sg}(q)); see docs/autodiff.md")
  followed = lambda w: affine_tree(*jax.lax.stop_gradient((x, {"w": w, "b": p["b"]}, q)), interpret=True).sum() + w.sum()
  np.testing.assert_array_equal(jax.grad(followed)(w), np.ones_like(w))


# ---------------------------------------------------------------- jax.lax.platform_dependent
@mg.mgpu_kernel(out_shape=lambda x: x)
def squared(x, out):
  out[...] = x[...] * x[...]


def test_platform_dependent_kernel_branch():
  """The cuda branch of jax.lax.platform_dependent runs the kernel, the default branch jnp; an export for cuda and
  cpu together lowers the cuda branch for the CPU too (JAX's cond lowering), which is MG010: its hint says so."""
  x = _rand((8, 128), 14)
  f = lambda a: jax.lax.platform_dependent(a, cuda=squared, default=lambda a: a * a)
  np.testing.assert_allclose(jax.jit(f)(x), x * x, rtol=1e-6)
  assert "mosaic_gpu" in jax.export.export(jax.jit(f), platforms=["cuda"])(S(x.shape, F32)).mlir_module()
  with pytest.raises(mg.NoGpuError) as info:
    jax.export.export(jax.jit(f), platforms=["cuda", "cpu"])(S(x.shape, F32))
  e, line = info.value, sys._getframe().f_lineno - 1
  assert e.code == "MG010" and (e.filename, e.lineno, e.col_offset) == (__file__, squared.fn.__code__.co_firstlineno + 1, 0)
  assert e.message == ("squared runs on an NVIDIA Hopper GPU (it is a Mosaic GPU kernel), but the call is being compiled"
                       " for cuda, cpu: a Mosaic GPU kernel has no lowering for the other platforms")
  assert e.notes == (f"{__file__}:{line}:4: the call compiled for cuda, cpu",)
  assert e.hint.startswith("export for platforms=['cuda'] alone (also where the call sits in jax.lax.platform_dependent's"
                           " cuda branch: JAX lowers every branch for every platform of an export, so export the function"
                           " once per platform); ")
