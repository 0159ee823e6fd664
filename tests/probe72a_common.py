"""Probe 72a's shared pieces: the CASES form (name -> (kernel, make(seed) -> (args, kwargs), reference(*args,
**kwargs), tolerance)), random inputs drawn with NumPy, and the runner each corpus module's cases go through
(interpret mode against the reference, then jax.export for CUDA)."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32
NEG = -1e30          # the log-space "minus infinity" warp-ctc and k2 use where -inf would make inf - inf


def rng_of(seed):
  return np.random.default_rng(7200 + seed)


def normal(seed, shape, scale=1.0):
  return (rng_of(seed).standard_normal(shape) * scale).astype(np.float32)


def log_softmax_np(x, axis=-1):
  m = x.max(axis=axis, keepdims=True)
  return (x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))).astype(np.float32)


def lse_np(*xs):
  m = np.maximum.reduce(xs)
  m = np.where(np.isfinite(m), m, 0)
  return m + np.log(sum(np.exp(x - m) for x in xs))


def sigmoid_np(x):
  return 1 / (1 + np.exp(-x))


def registry():
  cases = {}

  def case(name, kernel, make, ref, tol=1e-5):
    assert name not in cases, name
    cases[name] = (kernel, make, ref, tol)
  return cases, case


def specs(args):
  return [S(np.shape(a), np.asarray(a).dtype) for a in args]


def quiet(run):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.KernelWarning)
    return run()


def compare(name, got, want, tol):
  got, want = (got, want) if isinstance(got, (tuple, list)) else ((got,), (want,))
  assert len(got) == len(want), name
  for g, w in zip(got, want):
    g, w = np.asarray(g), np.asarray(w)
    assert g.shape == w.shape, (name, g.shape, w.shape)
    assert g.dtype == w.dtype, (name, g.dtype, w.dtype)
    if tol == 0 or not np.issubdtype(w.dtype, np.floating):
      np.testing.assert_array_equal(g, w, err_msg=name)
    else:
      np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=name)


def export(kernel, args, **kw):
  return jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*specs(args)).mlir_module()


def run_case(name, c, seed=0, do_export=True):
  kernel, make, ref, tol = c
  args, kw = make(seed)
  compare(name, quiet(lambda: kernel(*args, **kw, interpret=True)), ref(*args, **kw), tol)
  if do_export:
    quiet(lambda: export(kernel, args, **kw))
