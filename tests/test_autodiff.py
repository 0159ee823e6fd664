"""Differentiating kernels: a clear error without a backward; the jax.custom_vjp pattern of
docs/autodiff.md, run from the page itself, matches jnp's gradient."""
import importlib.util
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg

import kernels as K

DOC = os.path.join(os.path.dirname(__file__), "..", "docs", "autodiff.md")
S = jax.ShapeDtypeStruct


@pytest.fixture(scope="module")
def example(tmp_path_factory):
  """The first python block of docs/autodiff.md, imported from a file (kernels need source)."""
  block = re.findall(r"```python\n(.*?)```", open(DOC).read(), re.S)[0]
  path = tmp_path_factory.mktemp("autodiff") / "autodiff_example.py"
  path.write_text(block)
  spec = importlib.util.spec_from_file_location("autodiff_example", path)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


def x(n=4096):
  return rand.normal(rand.key(0), (n,), jnp.float32)


def test_grad_of_a_kernel_in_interpret_mode_is_a_clear_error():
  with pytest.raises(mg.DifferentiationError) as info:
    jax.grad(lambda v: K.double(v, interpret=True).sum())(jnp.ones((256, 64), jnp.float32))
  assert info.value.message == ("jax cannot differentiate the kernel double: mgpu_dsl kernels have no"
                                " automatic derivative")
  assert "jax.custom_vjp" in info.value.hint and "docs/autodiff.md" in info.value.hint
  assert info.value.lineno == K.double.parsed.loc.lineno


def test_grad_of_a_kernel_under_jit_in_interpret_mode_is_a_clear_error():
  with pytest.raises(mg.KernelError, match="cannot differentiate the kernel double"):
    jax.jit(jax.grad(lambda v: K.double(v, interpret=True).sum()))(jnp.ones((256, 64), jnp.float32))


def test_grad_of_a_kernel_exported_for_the_gpu_is_a_clear_error():
  f = jax.jit(jax.grad(lambda v: K.double(v).sum()))
  with pytest.raises(mg.KernelError, match="cannot differentiate the kernel double"):
    jax.export.export(f, platforms=["cuda"])(S((256, 64), jnp.float32))


def test_a_kernel_not_on_the_differentiated_path_is_fine():
  y = jnp.ones((256, 64), jnp.float32)
  g = jax.grad(lambda s: (s * K.double(y, interpret=True)).sum())(2.0)
  assert float(g) == pytest.approx(2.0 * 256 * 64)


def test_custom_vjp_pair_of_kernels_matches_jnp(example, monkeypatch):
  monkeypatch.setenv("MGPU_DSL_INTERPRET", "1")
  loss = lambda f: (lambda v: jnp.sin(f(v)).sum())
  want = jax.grad(loss(lambda v: v * v))(x())
  np.testing.assert_allclose(np.asarray(jax.grad(loss(example.kernel_square))(x())), np.asarray(want),
                             rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.asarray(jax.jit(jax.grad(loss(example.kernel_square)))(x())),
                             np.asarray(want), rtol=1e-5, atol=1e-5)


def test_custom_vjp_pair_exports_both_kernels_for_cuda(example):
  f = jax.jit(jax.grad(lambda v: jnp.sin(example.kernel_square(v)).sum()))
  text = jax.export.export(f, platforms=["cuda"])(S((4096,), jnp.float32)).mlir_module()
  assert text.count("stablehlo.custom_call @mosaic_gpu") == 2
  assert "@square(" in text and "@square_vjp(" in text


@pytest.mark.gpu
def test_custom_vjp_pair_of_kernels_matches_jnp_on_the_gpu(example):
  loss = lambda f: (lambda v: jnp.sin(f(v)).sum())
  want = jax.grad(loss(lambda v: v * v))(x())
  got = jax.jit(jax.grad(loss(example.kernel_square)))(x())
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
