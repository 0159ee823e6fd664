"""`ml.device_assert(cond, msg, mask=None)` (Triton's `tl.device_assert`; session 60, MG002 before): checked by
interpret mode at every element of every program, MG950 at the call naming the condition, the first failing element
and the message; no code on the GPU (as Triton's without TRITON_DEBUG); a static condition checked while tracing."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line)


@mg.mgpu_kernel(out_shape=lambda x: S((128, 64), F32))
def summed(x, o):
  acc = ml.zeros((128, 64), F32)
  for t in ml.range(x.shape[1] // 64):
    v = x.at[:, ml.ds(t * 64, 64)][...]
    ml.device_assert(ml.isfinite(v), "finite input")
    ml.device_assert(v > 100.0, "only where masked", mask=v > 200.0)
    acc = acc + v
  ml.device_assert(x.shape[1] % 64 == 0)
  o[...] = acc


def _x():
  return np.random.default_rng(0).standard_normal((128, 256)).astype(np.float32)


def test_a_holding_assert_changes_nothing_and_builds():
  x = _x()
  np.testing.assert_allclose(np.asarray(summed(x, interpret=True)), x.reshape(128, 4, 64).sum(1), atol=1e-5)
  specs = S(x.shape, F32)
  assert "mosaic_gpu" in jax.export.export(jax.jit(summed), platforms=["cuda"])(specs).mlir_module()


def test_a_failing_assert_is_at_its_line_with_the_element_and_message():
  x = _x()
  x[7, 200] = np.inf
  with pytest.raises(mg.InterpretError) as info:
    summed(x, interpret=True)
  e = info.value
  assert e.code == "MG950" and e.filename == __file__
  assert e.lineno == _line_of('ml.device_assert(ml.isfinite(v), "finite input")') and e.col_offset == 4
  assert e.message == ("device_assert ml.isfinite(v) failed at element (7, 8) (1 of 8192 false) in program (0, 0, 0):"
                       " finite input"), e.message
  assert e.hint.startswith("the kernel's own run-time check (the GPU runs none)")


@mg.mgpu_kernel(out_shape=lambda x: x)
def static_false(x, o):
  ml.device_assert(x.shape[0] == 7, "seven rows")
  o[...] = x[...]


def test_a_static_condition_is_checked_while_tracing():
  with pytest.raises(mg.KernelError) as info:
    static_false.typed_ir(S((8, 128), F32))
  e = info.value
  assert e.code == "MG011" and e.lineno == _line_of('ml.device_assert(x.shape[0] == 7, "seven rows")')
  assert e.message == "device_assert x.shape[0] == 7 failed while tracing: seven rows", e.message


@mg.mgpu_kernel(out_shape=lambda x: x)
def message_not_text(x, o):
  ml.device_assert(x[...] > 0, 3)
  o[...] = x[...]


def test_a_message_that_is_not_text_says_so():
  with pytest.raises(mg.KernelTypeError) as info:
    message_not_text.typed_ir(S((8, 128), F32))
  assert info.value.lineno == _line_of("ml.device_assert(x[...] > 0, 3)")
  assert "message must be a static str, got int" in info.value.message


@pytest.mark.gpu
def test_gpu_runs_no_check():
  x = _x()
  x[7, 200] = np.inf            # (interpret mode stops here; the GPU computes on)
  got = np.asarray(summed(x))
  assert np.isinf(got[7, 8]) and np.allclose(np.delete(got, 7, 0), np.delete(x.reshape(128, 4, 64).sum(1), 7, 0),
                                             atol=1e-4)


@mg.mgpu_kernel(out_shape=lambda x: x)
def odd_vector(x, o):
  v = x[...]                            # (17,): read padded to 24 (ops/padded_tiles.py)
  ml.device_assert(v > 0.5, "above a half")
  o[...] = v * 2.0


def test_a_padded_value_is_checked_on_its_own_elements():
  """A (17,) read is computed padded: the check covers its 17 elements, not the padding's zeros (and the assert
  does not end the padded trace, which would make the kernel MG204)."""
  x = np.linspace(1, 2, 17).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(odd_vector(x, interpret=True)), 2 * x)
  x[16] = 0.25
  with pytest.raises(mg.InterpretError) as info:
    odd_vector(x, interpret=True)
  assert "failed at element (16,) (1 of 17 false)" in info.value.message, info.value.message
