"""Probe 27k: a misspelt attribute in an out_shape callable reads the same, in the user's words,
whether the callable got a call's arrays, jit's tracers or typed_ir's specs (JAX's class names,
DynamicJaxprTracer or jaxlib._jax.ArrayImpl, were the message)."""
import jax
import jax.numpy as jnp
import pytest

import mgpu_dsl as mg

MESSAGE = ("the out_shape callable failed for 1 input(s) float32[128]: AttributeError: an input array has no"
           " attribute 'shap'")


@mg.mgpu_kernel(out_shape=lambda x: x.shap)
def misspelt_shape(x, o):
  o[...] = x[...]


@pytest.mark.parametrize("how", ["eager", "jit", "typed_ir"])
def test_a_misspelt_attribute_of_an_input_reads_the_same_everywhere(how):
  x = jnp.ones(128, jnp.float32)
  run = {"eager": lambda: misspelt_shape(x, interpret=True),
         "jit": lambda: jax.jit(misspelt_shape)(x),
         "typed_ir": lambda: misspelt_shape.typed_ir(jax.ShapeDtypeStruct((128,), jnp.float32))}[how]
  with pytest.raises(mg.SignatureError) as info:
    run()
  assert info.value.message == MESSAGE
  assert info.value.hint.endswith("an input has .shape, .dtype, .ndim and jnp's array methods")
