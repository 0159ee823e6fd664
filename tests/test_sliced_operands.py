"""Kernels called on slices under jax.jit: XLA's GPU compiler folds a slice feeding a custom call into it (a
"dynamic-slice fusion"); with an aliased input the kernel's result was wrong (zeros, or another array's data) and an
offset off 256 bytes failed at run time, so every call's operands pass an optimization barrier (design note 143)."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg

S = jax.ShapeDtypeStruct


@mg.mgpu_kernel(out_shape=lambda c, v: c, input_output_aliases={0: 0})
def put_column(c, v, out):
  out[:, 0] = v[...]


@mg.mgpu_kernel(out_shape=lambda c, v: c, input_output_aliases={0: 0}, grid=(1,))
def put_first(c, v, out):
  out[0] = v[...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def double(x, out):
  out[...] = x[...] * 2


def _inputs(n=1000, seed=0):
  rng = np.random.default_rng(seed)
  return rng.standard_normal((n, 8)).astype(np.float32), np.arange(n, dtype=np.float32) + 1


def _with_column(c, v):
  return np.concatenate([v[:, None], c[:, 1:]], 1)


CALLS = {
    "aliased, a tail slice": (lambda c, v: put_column(c[768:], v[768:]), lambda c, v: _with_column(c[768:], v[768:])),
    "aliased, a head slice": (lambda c, v: put_column(c[:232], v[:232]), lambda c, v: _with_column(c[:232], v[:232])),
    "aliased, an offset off 256 bytes": (lambda c, v: put_column(c[744:], v[744:]),
                                         lambda c, v: _with_column(c[744:], v[744:])),
    "vmapped and aliased, a tail slice": (lambda c, v: jax.vmap(put_first)(c[768:], v[768:]),
                                          lambda c, v: _with_column(c[768:], v[768:])),
    "lax.map(batch_size=256) of an aliased kernel": (
        lambda c, v: jax.lax.map(lambda cv: put_first(*cv), (c, v), batch_size=256), _with_column),
    "not aliased, an offset of 3 elements": (lambda c, v: double(c[3:]), lambda c, v: c[3:] * 2),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_export_puts_every_operand_behind_an_optimization_barrier(name):
  call, _ = CALLS[name]
  c, v = _inputs()
  text = jax.export.export(jax.jit(call), platforms=["cuda"])(S(c.shape, c.dtype), S(v.shape, v.dtype)).mlir_module()
  calls = re.findall(r"stablehlo\.custom_call @mosaic_gpu\w*\([^)]*\).*?: \(([^)]*)\) ->", text)
  barriers = re.findall(r"stablehlo\.optimization_barrier [^:]*: ([^\n]*?)\s+loc", text)
  assert calls
  kinds = lambda types: sorted(t.strip() for t in types.split(", "))
  for operands in calls:  # each custom call's operands, of these types, come out of a barrier
    assert any(kinds(b) == kinds(operands) for b in barriers), (operands, barriers)


@pytest.mark.parametrize("name", list(CALLS))
def test_interpret_mode_of_sliced_calls_matches_numpy(name, monkeypatch):
  call, want = CALLS[name]
  c, v = _inputs()
  monkeypatch.setenv("MGPU_DSL_INTERPRET", "1")
  got = np.asarray(jax.jit(lambda c, v: call(c, v))(c, v))     # (a new function: no trace of an export reused)
  np.testing.assert_array_equal(got, want(c, v))


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CALLS))
def test_gpu_sliced_calls_match_numpy(name):
  call, want = CALLS[name]
  c, v = _inputs()
  np.testing.assert_array_equal(np.asarray(jax.jit(call)(jnp.asarray(c), jnp.asarray(v))), want(c, v))


@pytest.mark.gpu
def test_gpu_donated_aliased_call_still_updates_in_place():
  c, v = _inputs(256)
  f = jax.jit(lambda c, v: put_column(c, v), donate_argnums=0)
  got = np.asarray(f(jnp.asarray(c), jnp.asarray(v)))
  np.testing.assert_array_equal(got, _with_column(c, v))
