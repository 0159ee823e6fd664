"""Probe 53i (the long tail of jnp, jax.nn and jax.scipy inside kernels). What was refused, wrong or raw:

- two lambdas of one line passed as a constexpr (`{"inc": lambda v: v + 1.0, "scale": lambda v: v * 10.0}`, a
  table of activations) shared one disk-cache key, the text of their statement: the second call ran the first's
  kernel, silently (mgpu_dsl/deps.py: a lambda's key now holds its own expression);
- a binary jnp function of a register tile and a Python number whose form applies ml.abs, ml.isinf or ml.isnan to
  the number (`jnp.hypot(x, 2.0)`, `jnp.isclose(v, 1.0)`, `jnp.heaviside(0.5, x)`) was MG003 "ml.abs of a Python
  number should be computed in Python", and `jnp.copysign(1.0, x)` / `jnp.copysign(x, -1.0)` MG003: the number is
  now a weakly typed 0-d value there (frontend/jnp_forms.py weak_numbers), copysign's sign static;
- jnp's index grids were MG003 (a static array returned while tracing, or meshgrid "cannot take a register
  tensor"): `jnp.eye`, `jnp.identity`, `jnp.tri` (masks), `jnp.indices` and `jnp.meshgrid` of two register vectors
  are now built of ml.arange (frontend/jnp_grids.py), and `jnp.linspace` (and logspace, geomspace, the windows) a
  static table of the numbers jnp computed (frontend/static_tables.py);
- 1-D signal functions were MG003: `jnp.convolve` in modes full and valid or of register taps, `jnp.correlate`,
  `jnp.diff(prepend=, append=)`, `jnp.trapezoid`, `jnp.polyval` of a list (frontend/jnp_tables.py, jnp_math.py);
- `jnp.searchsorted`, `jnp.digitize` and `jnp.interp` of a 2-D tile of queries against a register table were MG003
  (frontend/ops/search.py flattens them); `jnp.allclose`, `jnp.array_equal` MG003;
- `jnp.einsum('hqd,hkd->hqk')` of a few batches of register tiles was MG003 (frontend/jnp_einsum.py).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe_util import S, export, f32, rnd

F32, BF16, I32 = jnp.float32, jnp.bfloat16, jnp.int32


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


# ---------------------------------------------------------------- lambdas of one line as constexprs
@mg.mgpu_kernel(out_shape=lambda x, fn: S(x.shape, F32))
def apply_fn(x, o, fn: ml.constexpr):
  o[...] = fn(x[...]).astype(F32)


ACTS = {"inc": lambda v: v + 1.0, "scale": lambda v: v * 10.0, "act": lambda v: jax.nn.relu(v) - 0.5}


def test_lambdas_of_one_line_are_separate_kernels():
  x = rnd((8, 128), 0)
  for name in ("inc", "scale", "act"):
    got = apply_fn(x, fn=ACTS[name], interpret=True)
    np.testing.assert_allclose(f32(got), f32(ACTS[name](jnp.asarray(x))), rtol=1e-6, err_msg=name)


# ---------------------------------------------------------------- binary functions of a Python number
NUMBER_CASES = {
    "hypot(x, 2.0)": lambda v: jnp.hypot(v, 2.0), "hypot(3, x)": lambda v: jnp.hypot(3, v),
    "isclose(x, 1.0)": lambda v: jnp.isclose(v, 1.0, atol=0.5), "isclose(x, 0)": lambda v: jnp.isclose(v, 0),
    "copysign(1.0, x)": lambda v: jnp.copysign(1.0, v), "copysign(x, -1.0)": lambda v: jnp.copysign(v, -1.0),
    "copysign(x, -0.0)": lambda v: jnp.copysign(v, -0.0),
    "heaviside(0.5, x)": lambda v: jnp.heaviside(0.5, v), "heaviside(-1.0, x)": lambda v: jnp.heaviside(-1.0, v),
}


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_binary_functions_of_a_python_number(dtype):
  x = rnd((8, 128), 1) * 3
  x[0, :6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0]
  x = jnp.asarray(x).astype(dtype)
  for name, f in NUMBER_CASES.items():
    got = apply_fn(x, fn=f, interpret=True)
    want = f(x)
    assert want.dtype == (jnp.bool_ if "isclose" in name else dtype)
    if "isclose" not in name:      # (16-bit floats in float32, rounded once: XLA on the GPU, jnp_forms' widened)
      want = f(x.astype(F32)).astype(dtype)
    np.testing.assert_allclose(f32(got), f32(want.astype(F32)), rtol=1e-6, equal_nan=True, err_msg=name)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype))
def radius_sign(x, o):
  v = x[...]
  o[...] = jnp.hypot(v, 1.5) * jnp.copysign(1.0, v) + jnp.where(jnp.isclose(v, 0.0, atol=1e-2), 1.0, 0.0)


def test_number_forms_build_for_cuda():
  x = jnp.asarray(rnd((16, 128), 2)).astype(BF16)
  want = (jnp.hypot(x, 1.5) * jnp.copysign(1.0, x) + jnp.where(jnp.isclose(x, 0.0, atol=1e-2), 1.0, 0.0)).astype(BF16)
  np.testing.assert_allclose(f32(radius_sign(x, interpret=True)), f32(want), rtol=1e-2)
  export(radius_sign, x)
  if _gpu():
    np.testing.assert_allclose(f32(radius_sign(x)), f32(radius_sign(x, interpret=True)), rtol=1e-2)


# ---------------------------------------------------------------- index grids and masks
@mg.mgpu_kernel(out_shape=lambda a: S(a.shape, F32))
def diagonal_masks(a, o):
  v = a[...]
  o[...] = v * jnp.tri(16, 32, -1, dtype=jnp.float32) + jnp.eye(16, 32, k=3) + 2 * jnp.eye(16, 32) + \
      jnp.identity(16)[:, :1] * v


def _diagonal_masks(v):
  return v * jnp.tri(16, 32, -1, dtype=jnp.float32) + jnp.eye(16, 32, k=3) + 2 * jnp.eye(16, 32) + \
      jnp.identity(16)[:, :1] * v


@mg.mgpu_kernel(out_shape=lambda a: S(a.shape, I32))
def grids(a, o):
  r, c = jnp.indices((16, 32))
  y, x = jnp.meshgrid(jnp.arange(16), jnp.arange(32), indexing="ij")
  cs, rs = jnp.meshgrid(jnp.arange(32), jnp.arange(16))           # 'xy': (16, 32), x along the columns
  o[...] = (r * 1000 + c) + (y - x) * 7 + (cs - rs) * 3


def _grids(a):
  r, c = jnp.indices((16, 32))
  y, x = jnp.meshgrid(jnp.arange(16), jnp.arange(32), indexing="ij")
  cs, rs = jnp.meshgrid(jnp.arange(32), jnp.arange(16))
  return (r * 1000 + c) + (y - x) * 7 + (cs - rs) * 3


@mg.mgpu_kernel(out_shape=lambda a: S(a.shape[:1], F32))
def causal_rowsum(a, o):
  n = a.shape[0]
  keep = jnp.tri(n, dtype=jnp.bool_)
  o[...] = jnp.sum(jnp.where(keep, a[...], 0.0), axis=1) * jnp.linspace(0.0, 1.0, n)


def test_index_grids_and_masks():
  a = rnd((16, 32), 3)
  np.testing.assert_allclose(f32(diagonal_masks(a, interpret=True)), f32(_diagonal_masks(jnp.asarray(a))), rtol=1e-6)
  np.testing.assert_array_equal(np.asarray(grids(a, interpret=True)), np.asarray(_grids(a)))
  b = rnd((32, 32), 4)
  want = jnp.sum(jnp.where(jnp.tri(32, dtype=jnp.bool_), b, 0.0), axis=1) * jnp.linspace(0.0, 1.0, 32)
  np.testing.assert_allclose(f32(causal_rowsum(b, interpret=True)), f32(want), rtol=1e-5, atol=1e-6)
  for k, arg in ((diagonal_masks, a), (grids, a), (causal_rowsum, b)):
    export(k, arg)
    if _gpu():
      np.testing.assert_allclose(f32(k(arg)), f32(k(arg, interpret=True)), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- 1-D signal functions of rows
@mg.mgpu_kernel(out_shape=lambda a, k, mode, n: S((n,), a.dtype))
def conv_row(a, k, o, mode: ml.constexpr, n: ml.constexpr):
  o[...] = jnp.convolve(a[...], k[...], mode=mode)


@mg.mgpu_kernel(out_shape=lambda a, k, mode, n: S((n,), a.dtype))
def corr_row(a, k, o, mode: ml.constexpr, n: ml.constexpr):
  o[...] = jnp.correlate(a[...], k[...], mode=mode)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_convolve_and_correlate_modes(dtype):
  a = jnp.asarray(rnd((64,), 5)).astype(dtype)
  k = jnp.asarray(rnd((4,), 6)).astype(dtype)
  for mode, n in (("full", 67), ("same", 64), ("valid", 61)):
    wide = lambda f: f(a.astype(F32), k.astype(F32), mode=mode).astype(dtype)   # (16-bit: in float32, rounded once)
    for kern, f in ((conv_row, jnp.convolve), (corr_row, jnp.correlate)):
      got = kern(a, k, mode=mode, n=n, interpret=True)
      np.testing.assert_allclose(f32(got), f32(wide(f)), rtol=1e-2 if dtype == BF16 else 1e-5, atol=1e-5,
                                 err_msg=f"{kern.__name__} {mode}")
  export(conv_row, a, k, mode="full", n=67)
  if _gpu():
    np.testing.assert_allclose(f32(conv_row(a, k, mode="full", n=67)),
                               f32(conv_row(a, k, mode="full", n=67, interpret=True)), rtol=1e-2, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda a, x: (S(a.shape, F32), S(a.shape[1:], F32), S(a.shape[:1], F32), S(a.shape, F32)))
def row_calculus(a, x, d, tx, tdx, p):
  v = a[...]
  d[...] = jnp.diff(v, axis=0, prepend=a[0:1, :])
  tx[...] = jnp.trapezoid(v, x[...], axis=0)
  tdx[...] = jnp.trapezoid(v, dx=0.1)
  p[...] = jnp.polyval([1 / 6, 0.5, 1.0, 1.0], v) + jnp.correlate(v[0], jnp.array([0.5, -1.0, 0.25]), "same")[None, :]


def _row_calculus(a, x):
  return (jnp.diff(a, axis=0, prepend=a[0:1, :]),
          jnp.trapezoid(a, x, axis=0), jnp.trapezoid(a, dx=0.1),
          jnp.polyval(jnp.array([1 / 6, 0.5, 1.0, 1.0]), a) + jnp.correlate(a[0], jnp.array([0.5, -1.0, 0.25]), "same"))


def test_diff_ends_trapezoid_and_polyval_of_a_list():
  a = rnd((16, 32), 7)
  x = np.sort(np.random.default_rng(8).uniform(0, 1, 16)).astype(np.float32)
  for got, want in zip(row_calculus(a, x, interpret=True), _row_calculus(jnp.asarray(a), jnp.asarray(x))):
    np.testing.assert_allclose(f32(got), f32(want), rtol=1e-5, atol=1e-5)
  offsets = np.random.default_rng(9).integers(0, 100, (64,)).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(int_steps(offsets, interpret=True)), np.diff(offsets, prepend=0))
  np.testing.assert_allclose(f32(second_diff(a, interpret=True)), f32(jnp.diff(a, n=2, prepend=0.0, append=1.0)),
                             rtol=1e-6)
  export(row_calculus, a, x)
  if _gpu():
    for got, want in zip(row_calculus(a, x), row_calculus(a, x, interpret=True)):
      np.testing.assert_allclose(f32(got), f32(want), rtol=1e-5, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda o: S(o.shape, I32))
def int_steps(off, o):
  o[...] = jnp.diff(off[...], prepend=0)       # (segment lengths of offsets)


@mg.mgpu_kernel(out_shape=lambda a: a)
def second_diff(a, o):
  o[...] = jnp.diff(a[...], n=2, prepend=0.0, append=1.0)


# ---------------------------------------------------------------- a tile of queries against a register table
@mg.mgpu_kernel(out_shape=lambda x, t: (S(x.shape, I32), S(x.shape, I32), S(x.shape, F32)))
def table_lookups(x, t, pos, bins, y):
  v, knots = x[...], t[...]
  pos[...] = jnp.searchsorted(knots, v, side="right").astype(I32)
  bins[...] = jnp.digitize(v, knots).astype(I32)
  y[...] = jnp.interp(v, knots, jnp.exp(knots), left=0.0)


def _table_lookups(x, t):
  return (jnp.searchsorted(t, x, side="right"), jnp.digitize(x, t), jnp.interp(x, t, jnp.exp(t), left=0.0))


def test_a_tile_of_queries_against_a_register_table():
  t = np.sort(np.random.default_rng(10).standard_normal(24)).astype(np.float32)
  for shape in ((16, 32), (8, 128)):
    x = rnd(shape, 11) * 2
    x[0, :3] = t[:3]                           # (queries equal to knots: the sides differ there)
    for got, want in zip(table_lookups(x, t, interpret=True), _table_lookups(jnp.asarray(x), jnp.asarray(t))):
      np.testing.assert_allclose(f32(got), f32(want), rtol=1e-5, atol=1e-6)
  export(table_lookups, x, t)
  if _gpu():
    for got, want in zip(table_lookups(x, t), table_lookups(x, t, interpret=True)):
      np.testing.assert_allclose(f32(got), f32(want), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- whole-tile comparisons
@mg.mgpu_kernel(out_shape=lambda x, y: S((4,), I32))
def tile_checks(x, y, o):
  a, b = x[...], y[...]
  o[0] = jnp.allclose(a, b).astype(I32)
  o[1] = jnp.allclose(a, b, atol=1e-3).astype(I32)
  o[2] = jnp.array_equal(a, b).astype(I32)
  o[3] = jnp.where(jnp.array_equal(a, a, equal_nan=True), 1, 0)


def test_allclose_and_array_equal():
  x = rnd((8, 128), 12)
  xn = x.copy()
  xn[0, 0] = np.nan
  for a, b in ((x, x + 1e-4), (x, x), (xn, xn)):
    want = [jnp.allclose(a, b), jnp.allclose(a, b, atol=1e-3), jnp.array_equal(a, b), jnp.array_equal(a, a, equal_nan=True)]
    np.testing.assert_array_equal(np.asarray(tile_checks(a, b, interpret=True)), np.asarray(want, np.int32))
  export(tile_checks, x, x)


# ---------------------------------------------------------------- einsum of a few batches
@mg.mgpu_kernel(out_shape=lambda q, k, w: (S((2, 64, 64), q.dtype), S((2, 64), q.dtype)))
def batched_einsums(q, k, w, s, y):
  qs, ks = q[...], k[...]
  s[...] = jnp.einsum("hqd,hkd->hqk", qs, ks)
  y[...] = jnp.einsum("bij,bj->bi", qs, w[...])


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_einsum_of_a_few_batches(dtype):
  q, k, w = (jnp.asarray(rnd(s, i)).astype(dtype) for i, s in enumerate(((2, 64, 64), (2, 64, 64), (2, 64))))
  up = lambda v: v.astype(F32)        # (16-bit operands: jnp's einsum accumulates in float32, rounded once)
  want = (jnp.einsum("hqd,hkd->hqk", up(q), up(k)).astype(dtype), jnp.einsum("bij,bj->bi", up(q), up(w)).astype(dtype))
  for got, ref in zip(batched_einsums(q, k, w, interpret=True), want):
    np.testing.assert_allclose(f32(got), f32(ref), rtol=2e-2, atol=2e-2)     # (float32: ml.dot's tf32, emulated)
  export(batched_einsums, q, k, w)
  if _gpu():        # (ml.dot of float32: tf32 on the GPU, as jnp's default precision there)
    for got, ref in zip(batched_einsums(q, k, w), batched_einsums(q, k, w, interpret=True)):
      np.testing.assert_allclose(f32(got), f32(ref), rtol=2e-2, atol=5e-2)
