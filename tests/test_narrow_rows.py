"""Tiles narrower than a warp (8 or 16 columns: a router's experts, one-hot bins, pooled pairs) reduced and
broadcast along their rows: the ROWS layout with fewer than 32 lanes a row (Layout.lanes), 32 // lanes rows
a warp. These kernels were MG204 before (the hint asked to pad to 32 columns); each is checked here against
a jnp reference in interpret mode, for its layout in the typed IR, and on the GPU against interpret mode."""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

sys.path.insert(0, os.path.dirname(__file__))
import test_hints_followed as hf  # noqa: E402
import test_probe15 as p15  # noqa: E402
import test_probe23 as p23  # noqa: E402
import test_probe24b as p24b  # noqa: E402
import test_probe25d as p25d  # noqa: E402
import test_probe26a as p26a  # noqa: E402
import test_probe27f as p27f  # noqa: E402
import test_probe29d as p29d  # noqa: E402
import test_probe29g as p29g  # noqa: E402
import test_probe30c as p30c  # noqa: E402
import test_probe31b as p31b  # noqa: E402
import test_probe31e as p31e  # noqa: E402
import test_probe33c as p33c  # noqa: E402
import test_probe36e as p36e  # noqa: E402
import test_probe37b as p37b  # noqa: E402
import test_probe_messages as pm  # noqa: E402

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def router_softmax(x, out):
  i = ml.program_id(0)
  t = x.at[ml.ds(i * 128, 128), :][...].astype(jnp.float32)
  m = ml.max(t, axis=1)
  e = ml.exp(t - m[:, None])
  out.at[ml.ds(i * 128, 128), :][...] = (e / ml.sum(e, axis=1)[:, None]).astype(out.dtype)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), I32), S((x.shape[0],), F32)), grid=lambda x: (x.shape[0] // 128,))
def top1(x, idx, val):
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 128, 128), :], buf)
  t = buf[...]
  idx.at[ml.ds(i * 128, 128)][...] = ml.argmax(t, axis=1)
  val.at[ml.ds(i * 128, 128)][...] = ml.max(t, axis=1).astype(jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x, w: x, grid=lambda x, w: (x.shape[0] // 64,))
def rmsnorm_narrow(x, w, out):
  i = ml.program_id(0)
  t = x.at[ml.ds(i * 64, 64), :][...].astype(jnp.float32)
  r = ml.rsqrt(ml.mean(t * t, axis=1) + 1e-6)
  out.at[ml.ds(i * 64, 64), :][...] = (t * r[:, None] * w[...][None, :].astype(jnp.float32)).astype(out.dtype)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32))
def colsum(x, out):
  out[...] = ml.sum(x[...].astype(jnp.float32), axis=0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def softmax_tma(x, out):                 # through SMEM both ways, bf16 in and out
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 128, 128), :], buf)
  buf[...] = ml.softmax(buf[...].astype(jnp.float32), axis=1).astype(buf.dtype)
  ml.copy(buf, out.at[ml.ds(i * 128, 128), :])


@mg.mgpu_kernel(out_shape=lambda x, w, b: x)
def layernorm_24(x, w, b, out):
  t = x[...]
  mu = ml.mean(t, axis=1, keepdims=True)
  var = ml.mean((t - mu) ** 2, axis=1, keepdims=True)
  out[...] = (t - mu) * ml.rsqrt(var + 1e-5) * w[...][None, :] + b[...][None, :]


@mg.mgpu_kernel(out_shape=lambda x, n: x)
def log_softmax_masked_rows(x, n, out):
  rows = ml.arange(x.shape[0])
  keep = rows < n[0]
  t = x.at[:, :].load(mask=keep[:, None], other=0.0)
  out[...] = ml.where(keep[:, None], ml.log_softmax(t, axis=1), 0.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def center_columns(x, out):
  t = x[...]
  out[...] = t - ml.mean(t, axis=0)[None, :] + ml.max(t, axis=1)[:, None]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def weighted_rows(x, out):               # 5 columns: a row a thread (vec 1, one lane a row)
  t = x[...]
  out[...] = ml.sum(t * ml.arange(1, t.shape[1] + 1)[None, :].astype(F32), axis=1) / ml.max(t, axis=1)


def _normal(shape, dtype=F32, seed=0, scale=1.0):
  return jnp.asarray((rand.numpy_normal(seed, shape) * scale).astype(jnp.dtype(dtype)))


def _ints(shape, hi, seed=0):
  return rand.randint(rand.key(seed), shape, 0, hi, I32)


def _softmax(x):
  x = np.asarray(x, np.float64)
  e = np.exp(x - x.max(1, keepdims=True))
  return e / e.sum(1, keepdims=True)


# (id, kernel, inputs, constexprs, reference of the inputs or None)
CASES = [
    ("router f32 x8", router_softmax, lambda: (_normal((512, 8), scale=30.0),), {}, lambda x: _softmax(x)),
    ("router bf16 x16", router_softmax, lambda: (_normal((512, 16), jnp.bfloat16, scale=30.0),), {},
     lambda x: _softmax(x)),
    ("top1 f32 x16", top1, lambda: (_normal((256, 16), seed=1),), {},
     lambda x: (np.argmax(x, 1), np.max(np.asarray(x, np.float32), 1))),
    ("top1 bf16 x8", top1, lambda: (_normal((256, 8), jnp.bfloat16, seed=1),), {},
     lambda x: (np.argmax(np.asarray(x, np.float32), 1), np.max(np.asarray(x, np.float32), 1))),
    ("rmsnorm x16", rmsnorm_narrow, lambda: (_normal((128, 16), seed=2), _normal((16,), seed=3)), {},
     lambda x, w: np.asarray(x) / np.sqrt((np.asarray(x, np.float64) ** 2).mean(1, keepdims=True) + 1e-6) * np.asarray(w)),
    ("colsum x16", colsum, lambda: (_normal((128, 16), seed=2),), {}, lambda x: np.asarray(x, np.float64).sum(0)),
    ("router top2 x8", p15.router_top2, lambda: (_normal((64, 8), seed=4),), {}, None),
    ("exp times row", p23.exp_times_row, lambda: (_normal((64, 16), seed=5), _normal((16,), seed=6)), {},
     lambda a, b: (np.exp(np.asarray(a, np.float64)) * np.asarray(b)).sum(1)),
    ("argmin down 24x16", p29d.argmin_down_narrow_columns, lambda: (_normal((24, 16), seed=7),), {},
     lambda x: np.argmin(x, 0)),
    ("int rowmax 7x16", p26a.narrow_int_rowmax, lambda: (_ints((7, 16), 1000, seed=8) - 500,), {},
     lambda x: np.max(x, 1)),
    ("scatter rows x6", p25d.scatter_rows, lambda: (_normal((128, 6), seed=9), _ints((128,), 16, seed=10)), {},
     lambda g, ids: np.asarray(jnp.zeros((16, 6)).at[ids].add(g))),
    ("flat scatter 8x16", p29g.flat_scatter, lambda: (_normal((8, 16), seed=11), _ints((8,), 64, seed=12)), {},
     lambda v, r: np.asarray(jnp.zeros((64 * 16,)).at[(r[:, None] * 16 + jnp.arange(16)[None, :]).ravel()].add(v.ravel()))),
    ("column max via .T", p27f.column_max_through_transpose, lambda: (_normal((8, 128), seed=13),), {},
     lambda x: np.max(x, 0)),
    ("uint8 max pool", p31b.pool_pairs, lambda: (_ints((16, 256), 256, seed=14).astype(jnp.uint8),), {"op": "max"},
     lambda x: np.asarray(x).reshape(8, 2, 128, 2).max((1, 3))),
    ("uint8 min pool", p31b.pool_pairs, lambda: (_ints((16, 256), 256, seed=15).astype(jnp.uint8),), {"op": "min"},
     lambda x: np.asarray(x).reshape(8, 2, 128, 2).min((1, 3))),
    ("expert slots x8", p31e.expert_slots, lambda: (_ints((128,), 8, seed=16), _ints((8,), 100, seed=17)), {}, None),
    ("gather 40 wide summed", p36e.narrow_rows_summed, lambda: (_normal((100, 40), seed=18), _ints((128,), 100, seed=19)),
     {}, lambda t, ids: np.asarray(t, np.float64)[np.asarray(ids)].sum(1)),
    ("selective scan state x16", p33c.selective_scan_dn,
     lambda: (_normal((32, 256), seed=22), jnp.abs(_normal((32, 256), seed=23)) * 0.1, -jnp.abs(_normal((256, 16), seed=24)),
              _normal((32, 16), seed=25), _normal((32, 16), seed=26)), {}, None),
    ("column sums 16x40", p29d.column_sums_per_batch, lambda: (_normal((4, 16, 40), seed=27),), {}, None),
    ("softmax via TMA bf16 x16", softmax_tma, lambda: (_normal((256, 16), jnp.bfloat16, seed=30, scale=10.0),), {},
     lambda x: _softmax(np.asarray(x, np.float32))),
    ("layer norm x24", layernorm_24, lambda: (_normal((64, 24), seed=32), _normal((24,), seed=33), _normal((24,), seed=34)),
     {}, lambda x, w, b: (np.asarray(x, np.float64) - np.asarray(x, np.float64).mean(1, keepdims=True))
     / np.sqrt(np.asarray(x, np.float64).var(1, keepdims=True) + 1e-5) * np.asarray(w) + np.asarray(b)),
    ("log softmax masked rows x4", log_softmax_masked_rows,
     lambda: (_normal((128, 4), seed=35, scale=5.0), jnp.array([100], I32)), {},
     lambda x, n: np.where(np.arange(128)[:, None] < 100, np.log(_softmax(x)), 0.0)),
    ("center columns x16", center_columns, lambda: (_normal((128, 16), seed=36),), {},
     lambda x: np.asarray(x, np.float64) - np.asarray(x, np.float64).mean(0)[None, :] + np.asarray(x).max(1)[:, None]),
    ("point norms x3, a row a thread", p30c.norms, lambda: (_normal((300, 3), seed=40),), {},
     lambda p: np.linalg.norm(np.asarray(p, np.float64), axis=1)),
    ("weighted rows x5 over max", weighted_rows, lambda: (rand.uniform(rand.key(41), (256, 5), F32, 0.5, 2),),
     {}, lambda x: (np.asarray(x, np.float64) * np.arange(1, 6)).sum(1) / np.asarray(x).max(1)),
    ("top-2 of a sorted row, sliced", hf.top2_sliced, lambda: (jax.nn.softmax(_normal((128, 64), seed=42), -1),), {},
     lambda p: (lambda s: s / s.sum(1, keepdims=True))(-np.sort(-np.asarray(p, np.float64), axis=1)[:, :2])),
    ("column means f16 x8", p24b.column_means, lambda: (_normal((128, 8), jnp.float16, seed=43),), {},
     lambda x: np.asarray(x, np.float64).mean(0)),
    ("column scatter x40", p37b.scatter_columns, lambda: (_normal((64, 40), seed=44), _ints((40,), 300, seed=45)), {},
     lambda v, c: (lambda w: (np.add.at(w, (slice(None), np.asarray(c)), np.asarray(v)), w)[1])(np.zeros((64, 300)))),
    ("one-hot counts x16", pm.one_hot_counts, lambda: (_ints((128,), 16, seed=20),), {},
     lambda x: np.bincount(np.asarray(x), minlength=16)),
]
IDS = [c[0] for c in CASES]


def _close(got, want, dtype):
  got = np.asarray(got, np.float64)
  if np.issubdtype(np.dtype(dtype), np.integer):
    np.testing.assert_array_equal(got, want)
  else:
    tol = {jnp.dtype(jnp.bfloat16): 2e-2, jnp.dtype(jnp.float16): 2e-3}.get(jnp.dtype(dtype), 1e-5)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("name,kernel,inputs,kw,ref", CASES, ids=IDS)
def test_interpret_matches_the_reference(name, kernel, inputs, kw, ref):
  args = inputs()
  got = kernel(*args, interpret=True, **kw)
  if ref is None:
    return      # (its own test file checks it against a reference; the GPU test against interpret mode)
  want = ref(*args)
  for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
    _close(g, w, g.dtype)


@pytest.mark.parametrize("name,kernel,inputs,kw,ref", CASES, ids=IDS)
def test_the_narrow_rows_layout_is_chosen_and_builds(name, kernel, inputs, kw, ref):
  specs = [S(a.shape, a.dtype) for a in inputs()]
  assert "lanes" in kernel.typed_ir(*specs, **kw), name      # fewer than 32 lanes a row
  kernel.check(*specs, **kw)                                  # the Mosaic GPU module builds and verifies


def test_a_router_softmax_exports_for_cuda():
  text = jax.export.export(jax.jit(router_softmax), platforms=["cuda"])(S((512, 8), F32)).mlir_module()
  assert "mosaic_gpu" in text


@pytest.mark.gpu
@pytest.mark.parametrize("name,kernel,inputs,kw,ref", CASES, ids=IDS)
def test_gpu_matches_interpret_mode(name, kernel, inputs, kw, ref):
  args = inputs()
  got = jax.jit(lambda *a: kernel(*a, **kw))(*args)
  want = kernel(*args, interpret=True, **kw)
  for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
    _close(g, np.asarray(w, np.float64), g.dtype)
