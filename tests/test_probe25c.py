"""Probe 25c (sixteenth session, kernels as JAX citizens): jax.grad transposing a kernel call made
in a jax.custom_jvp rule (a raw NotImplementedError), and a float64 hint blaming jax.jit where no
jax.jit or Python float was involved."""
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct


@mg.mgpu_kernel(out_shape=lambda x: x)
def ksin(x, out):
  out[...] = ml.sin(x[...])


@mg.mgpu_kernel(out_shape=lambda x, t: x)
def ksin_tangent(x, t, out):
  out[...] = ml.cos(x[...]) * t[...]


@jax.custom_jvp
def fsin(x):
  return ksin(x, interpret=True)


@fsin.defjvp
def _fsin_jvp(p, t):
  return ksin(p[0], interpret=True), ksin_tangent(p[0], t[0], interpret=True)


@jax.custom_jvp
def fsin_jnp_tangent(x):
  return ksin(x, interpret=True)


@fsin_jnp_tangent.defjvp
def _fsin_jnp_jvp(p, t):
  return ksin(p[0], interpret=True), jnp.cos(p[0]) * t[0]


def _def_line(kernel):
  return kernel.fn.__code__.co_firstlineno + 1        # the def, under its decorator


def test_grad_through_a_kernel_in_a_custom_jvp_tangent_is_mg009_naming_the_kernel():
  """Forward mode works; jax.grad must transpose the tangent rule's kernel call, which JAX cannot:
  it was NotImplementedError ("Transpose rule ... for 'custom_vmap_call' not implemented")."""
  x = jnp.linspace(-1, 1, 128, dtype=jnp.float32)
  _, tan = jax.jvp(fsin, (x,), (x,))
  np.testing.assert_allclose(np.asarray(tan), np.asarray(jnp.cos(x) * x), rtol=1e-6)
  for run in (lambda: jax.grad(lambda x: fsin(x).sum())(x),
              lambda: jax.jit(jax.grad(lambda x: fsin(x).sum()))(x),
              lambda: jax.vjp(fsin, x)[1](x)):
    with pytest.raises(mg.DifferentiationError) as info:
      run()
    e = info.value
    assert e.message.startswith("jax cannot transpose the kernel ksin_tangent: jax.grad")
    assert (e.filename, e.lineno) == (__file__, _def_line(ksin_tangent))
    assert e.hint.startswith("for reverse mode give the function a jax.custom_vjp")


@mg.mgpu_kernel(out_shape=lambda x: x)
def double(x, out):
  out[...] = x[...] * 2


def test_linear_transpose_of_a_kernel_is_mg009():
  x = jnp.ones((128,), jnp.float32)
  with pytest.raises(mg.DifferentiationError) as info:
    jax.linear_transpose(lambda v: double(v, interpret=True), x)(x)
  assert info.value.message.startswith("jax cannot transpose the kernel double")


def test_the_hint_followed_a_jnp_tangent_differentiates():
  x = jnp.linspace(-1, 1, 128, dtype=jnp.float32)
  g = jax.grad(lambda x: fsin_jnp_tangent(x).sum())(x)
  np.testing.assert_allclose(np.asarray(g), np.asarray(jnp.cos(x)), rtol=1e-6)


_X64 = textwrap.dedent('''
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp, mgpu_dsl as mg
    from mgpu_dsl import language as ml

    @mg.mgpu_kernel(out_shape=lambda x, a: x)
    def mul(x, a: ml.scalar, out):
        out[...] = x[...] * a

    xs = jnp.ones((3, 128), jnp.float32)
    try:
        jax.vmap(lambda x, a: mul(x, a, interpret=True))(xs, jnp.array([1.0, 2.0, 3.0]))
    except mg.SignatureError as e:
        assert "jax.jit" not in e.hint and "a.astype(jnp.float32)" in e.hint, e.hint
    else:
        raise AssertionError("a float64 array accepted")
    y = jax.jit(lambda x, a: mul(x, a, interpret=True))(xs[0], 2.0)   # a Python float through jax.jit
    assert (y == 2.0).all()
    print("ok")
''')


def test_a_float64_array_under_vmap_gets_the_astype_hint_not_the_jit_one(tmp_path):
  """With jax_enable_x64 every traced float64 was taken for a Python float jax.jit had made 64-bit;
  only a weakly typed one is."""
  script = tmp_path / "x64.py"
  script.write_text(_X64)
  env = dict(os.environ, MGPU_DSL_CACHE_DIR="off", JAX_PLATFORMS="cpu")
  r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
  assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


# ---------------------------------------------------------------- interpret mode's messages under jax.vmap
@mg.mgpu_kernel(out_shape=lambda x, s: S((128,), x.dtype))
def window_at(x, s: ml.scalar, out):
  out[...] = x.at[ml.ds(s, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=(2,))
def overlapping(x, s: ml.scalar, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * s, 128)][...] = x.at[ml.ds(i * 128, 128)][...]


def test_vmap_interpret_errors_show_the_kernels_own_shapes_and_programs():
  """They showed the batched view: x[2, 200:328] outside x's shape (3, 256); programs (0, 0, 2) and
  (1, 0, 2) racing on out[2, 0], where the kernel's x is (256,) and program_id(2) reads 0."""
  xs = jnp.zeros((3, 256), jnp.float32)
  with pytest.raises(mg.OutOfBoundsError) as info:
    jax.vmap(lambda x, s: window_at(x, s, interpret=True))(xs, jnp.array([0, 100, 200], jnp.int32))
  assert info.value.message == "x[200:328] is outside x's shape (256,)"
  assert "in program (0, 0, 0) of batch element 2" in info.value.notes
  with pytest.raises(mg.RaceError) as info:
    jax.vmap(lambda x, s: overlapping(x, s, interpret=True))(xs, jnp.array([128, 128, 0], jnp.int32))
  e = info.value
  assert e.message.startswith("program (0, 0, 0) of batch element 2 and program (1, 0, 0) of batch element 2"
                              " both access out[0], and one writes it"), e.message
  assert e.hint.startswith("give each program its own window of out: 2 programs split its 256 rows into 128 each")
  with pytest.raises(mg.RaceError) as info:       # nested: the element of each level
    jax.vmap(jax.vmap(lambda x, s: overlapping(x, s, interpret=True), in_axes=(0, None)), in_axes=(0, 0))(
        jnp.zeros((2, 3, 256), jnp.float32), jnp.array([128, 0], jnp.int32))
  assert info.value.message.startswith("program (0, 0, 0) of batch element (1, 0) and program (1, 0, 0) of batch"
                                       " element (1, 0) both access out[0]"), info.value.message
