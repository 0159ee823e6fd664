"""Probe 47c: mgpu_dsl kernels as JAX citizens. A run-time loop whose bounds are int64 (with
jax_enable_x64: an int64 input, `cu_seqlens[b]`, `jnp.int64(n)`) was MG003 ("runtime loop bounds must be
32-bit integers"); it counts in int64 now, as `lax.fori_loop`'s index takes its bounds' type (and Triton's).
An input passed as a pytree (a dict, tuple or NamedTuple of arrays, as pallas_call takes them) was MG006
("kernel inputs are arrays"); its parameter is now the same structure of refs."""
from __future__ import annotations

import dataclasses
import sys
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, I32, I64 = jnp.float32, jnp.int32, jnp.int64


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _rand(shape, seed, dtype=np.float32):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _exports(kernel, *specs):
  """Builds for CUDA (the real Mosaic GPU module, verified) as jax.export does."""
  return jax.export.export(jax.jit(lambda *a: kernel(*a)), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- int64 loop bounds
@mg.mgpu_kernel(out_shape=lambda x, n: S((8, x.shape[1]), x.dtype))
def tile_sums(x, n, out):
  acc = ml.zeros((8, x.shape[1]), F32)
  for i in range(1, n[...], 2):                     # int64 under jax_enable_x64
    acc += x.at[ml.ds(i * 8, 8)][...] * (i + 1).astype(F32)
  out[...] = acc


def _tile_sums(x, n):
  return sum(x[i * 8:i * 8 + 8] * (i + 1) for i in range(1, n, 2))


def test_int64_bound_counts_in_int64():
  x = _rand((48, 128), 0)
  with jax.enable_x64(True):
    got = tile_sums(x, np.int64(6), interpret=True)
    jitted = jax.jit(lambda x, n: tile_sums(x, n, interpret=True))(x, jnp.int64(5))
    text = _exports(tile_sums, S(x.shape, F32), S((), I64))
  np.testing.assert_allclose(got, _tile_sums(x, 6), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(jitted, _tile_sums(x, 5), rtol=1e-5, atol=1e-5)
  assert "mosaic_gpu" in text


@mg.mgpu_kernel(out_shape=lambda x, cu: (S((cu.shape[0] - 1, 8, x.shape[1]), x.dtype), S((cu.shape[0] - 1,), cu.dtype)),
                grid=lambda x, cu: (cu.shape[0] - 1,))
def segments(x, cu, out, last):
  b = ml.program_id(0)
  acc = ml.zeros((8, x.shape[1]), F32)
  t = cu[b] - 1
  for t in range(cu[b + 1] - 1, cu[b] - 1, -1):     # descending, from an int64 cu_seqlens
    if t < cu[b] + 4:
      acc = acc * 0.5 + x.at[ml.ds(t * 8, 8)][...]
  out.at[b][...] = acc
  last[b] = t                                       # the index after the loop: int64, as Python leaves it


def _segments(x, cu):
  outs, lasts = [], []
  for b in range(len(cu) - 1):
    acc, t = np.zeros((8, x.shape[1]), np.float32), cu[b] - 1
    for t in range(cu[b + 1] - 1, cu[b] - 1, -1):
      if t < cu[b] + 4:
        acc = acc * 0.5 + x[t * 8:t * 8 + 8]
    outs.append(acc)
    lasts.append(t)
  return np.stack(outs), np.array(lasts)


def test_int64_bounds_descending_and_index_after_the_loop():
  x = _rand((13 * 8, 128), 1)
  with jax.enable_x64(True):
    cu = np.array([0, 3, 3, 9, 13], np.int64)
    out, last = segments(x, cu, interpret=True)
    _exports(segments, S(x.shape, F32), S(cu.shape, I64))
  want, want_last = _segments(x, cu)
  np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
  assert last.dtype == np.int64
  np.testing.assert_array_equal(last, want_last)


@mg.mgpu_kernel(out_shape=lambda x, s, e: S((2,), jnp.int64))
def count_between(x, s, e, out):
  c = 0
  k = s[...].astype(jnp.int64)
  for i in range(s[...], e[...]):                  # int32 start, int64 stop: an int64 index
    c += i * 2 ** 31                                # past int32, as the index is int64
    if i == 9:
      break
    k = i
  out[0] = c
  out[1] = k


def test_int32_and_int64_bounds_with_break():
  with jax.enable_x64(True):
    got = count_between(np.zeros(8, np.float32), np.int32(5), np.int64(12), interpret=True)
    _exports(count_between, S((8,), F32), S((), I32), S((), I64))
  np.testing.assert_array_equal(got, [sum(range(5, 10)) * 2 ** 31, 8])


@mg.mgpu_kernel(out_shape=lambda x, cu: S((cu.shape[0] - 1, x.shape[1]), F32), grid=lambda x, cu: (cu.shape[0] - 1,))
def rows_masked(x, cu, out):
  b = ml.program_id(0)
  acc = ml.zeros((x.shape[1],), F32)
  for t in range(cu[b], cu[b + 1], 64):
    v = x.at[ml.ds(t, 64)].load(mask=(t + ml.arange(64) < cu[b + 1])[:, None], other=0.0)
    acc = acc + ml.sum(v, axis=0)
  out.at[b][...] = acc


def test_int64_index_meeting_int32_computes_in_int64():
  """It was MG104 naming both ways out; since probe 47b's promotion t + ml.arange(64) is int64, as jnp's under x64."""
  x = np.random.default_rng(0).standard_normal((300, 128)).astype(np.float32)
  cu = np.array([0, 37, 100, 250, 300], np.int64)
  with jax.enable_x64(True):
    got = np.asarray(rows_masked(x, cu, interpret=True))
    _exports(rows_masked, S((300, 128), F32), S((5,), I64))
  np.testing.assert_allclose(got, np.stack([x[cu[i]:cu[i + 1]].sum(0) for i in range(4)]), rtol=1e-5, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x, n: x)
def pipelined_int64(x, n, out):
  buf = ml.smem((8, 128))
  for i in ml.range(n[...], stages=2):
    ml.copy(x.at[ml.ds(i * 8, 8)], buf)
    out.at[ml.ds(i * 8, 8)][...] = buf[...] * 2


def test_pipelined_loop_of_int64_bounds():
  """It was MG003 (a pipelined loop's bounds must be 32-bit); since probe 48d its index is int64 (tests/test_probe48d.py)."""
  x = _rand((32, 128), 3)
  with jax.enable_x64(True):
    np.testing.assert_array_equal(pipelined_int64(x, np.int64(4), interpret=True), x * 2)
    assert "mosaic_gpu" in _exports(pipelined_int64, S((32, 128), F32), S((), I64))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_int64_loops():
  x = _rand((13 * 8, 128), 2)
  with jax.enable_x64(True):
    cu = np.array([0, 3, 3, 9, 13], np.int64)
    out, last = jax.jit(segments)(x, cu)
    want, want_last = _segments(x, cu)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(last, want_last)
    np.testing.assert_allclose(jax.jit(tile_sums)(x, jnp.int64(7)), _tile_sums(x, 7), rtol=1e-5, atol=1e-5)
    got = jax.jit(count_between)(np.zeros(8, np.float32), np.int32(5), np.int64(12))
    np.testing.assert_array_equal(got, [sum(range(5, 10)) * 2 ** 31, 8])


# ---------------------------------------------------------------- int64 gather and scatter indices
@mg.mgpu_kernel(out_shape=lambda t, ids: S((ids.shape[0], t.shape[1]), t.dtype))
def embed(t, ids, out):
  out[...] = t[ids[...], :]


@mg.mgpu_kernel(out_shape=lambda t, ids, v: t, input_output_aliases={0: 0})
def scatter_add(t, ids, v, out):
  ml.atomic_add(out.at[ids[...], :], v[...])


def test_int64_indices_saturate_into_int32():
  """jax_enable_x64's default ints (jnp.array([...]), argsort) as gather or scatter indices were MG003; they
  saturate into int32, an id past int32 clamping as any id past the table does."""
  t = _rand((64, 128), 22)
  with jax.enable_x64(True):
    ids = np.array([3, 2 ** 40, -2 ** 40, -1, 2 ** 31, 63, 64, 0], np.int64)
    got = embed(t, ids, interpret=True)
    want = t[np.clip(np.where(ids < 0, ids + 64, ids), 0, 63)]
    np.testing.assert_array_equal(got, want)
    _exports(embed, S(t.shape, F32), S(ids.shape, I64))
    ok = np.array([3, 1, 3, 60, 0, 7, 63, 2], np.int64)
    v = _rand((8, 128), 23)
    want = t.copy()
    np.add.at(want, ok, v)
    np.testing.assert_allclose(scatter_add(t, ok, v, interpret=True), want, rtol=1e-6)
    _exports(scatter_add, S(t.shape, F32), S(ok.shape, I64), S(v.shape, F32))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_int64_indices():
  t = _rand((64, 128), 22)
  with jax.enable_x64(True):
    ids = np.array([3, 2 ** 40, -2 ** 40, -1, 2 ** 31, 63, 64, 0], np.int64)
    np.testing.assert_array_equal(jax.jit(embed)(t, ids), embed(t, ids, interpret=True))
    ok = np.array([3, 1, 3, 60, 0, 7, 63, 2], np.int64)
    v = _rand((8, 128), 23)
    # (row 3 takes two adds, in the atomics' order on the GPU: an ulp apart)
    np.testing.assert_allclose(jax.jit(scatter_add)(t, ok, v), scatter_add(t, ok, v, interpret=True), rtol=1e-6,
                               atol=1e-6)


# ---------------------------------------------------------------- pytree inputs
class Linear(NamedTuple):
  w: jax.Array
  b: jax.Array


@mg.mgpu_kernel(out_shape=lambda x, p: x, grid=lambda x, p: (x.shape[0] // 16,))
def affine(x, p, out):
  r = ml.ds(ml.program_id(0) * 16, 16)
  out.at[r][...] = x.at[r][...] * p.w[...][None, :] + p.b[...]     # p: a NamedTuple (or dataclass) of refs


@dataclasses.dataclass
class LinearDC:
  w: jax.Array
  b: jax.Array


jax.tree_util.register_dataclass(LinearDC, data_fields=["w", "b"], meta_fields=[])


def test_named_tuple_and_dataclass_of_weights():
  x, w, b = _rand((64, 128), 3), _rand((128,), 4), _rand((16, 128), 5)
  want = x * w + np.tile(b, (4, 1))
  for p in (Linear(w, b), LinearDC(w, b)):
    np.testing.assert_allclose(affine(x, p, interpret=True), want, rtol=1e-6)
    np.testing.assert_allclose(jax.jit(lambda x, p: affine(x, p, interpret=True))(x, p), want, rtol=1e-6)
  assert "mosaic_gpu" in _exports(affine, S(x.shape, F32), Linear(S(w.shape, F32), S(b.shape, F32)))
  assert jax.eval_shape(affine, x, Linear(w, b)).shape == x.shape


@mg.mgpu_kernel(out_shape=lambda params, x: x, grid=lambda params, x: (x.shape[0] // 16,))
def mlp_layer(params, x, out, *, act: ml.constexpr = "relu"):
  r = ml.ds(ml.program_id(0) * 16, 16)
  w, b = params["layer"]                             # a tuple inside a dict: unpacked
  h = x.at[r][...] * w.at[r][...] + b.at[r][...] * params["scale"][...]
  out.at[r][...] = ml.maximum(h, 0.0) if act == "relu" else h


def test_nested_dict_under_vmap_and_by_keyword():
  x, w, b = _rand((4, 32, 128), 6), _rand((32, 128), 7), _rand((32, 128), 8)
  params = {"layer": (w, b), "scale": 0.5}               # a Python number is a 0-d input, as on its own
  want = np.maximum(x * w + b * 0.5, 0)
  got = jax.vmap(lambda p, x: mlp_layer(p, x, interpret=True), in_axes=(None, 0))(params, x)
  np.testing.assert_allclose(got, want, rtol=1e-6)
  ws = np.stack([w, 2 * w])                              # mapped over one leaf of the pytree only
  got = jax.vmap(lambda p, x: mlp_layer(p, x, interpret=True),
                 in_axes=({"layer": (0, None), "scale": None}, None))({"layer": (ws, b), "scale": 0.5}, x[0])
  np.testing.assert_allclose(got, np.maximum(ws * x[0] + b * 0.5, 0), rtol=1e-6)
  np.testing.assert_allclose(mlp_layer(x=x[1], params=params, act="none", interpret=True), x[1] * w + b * 0.5,
                             rtol=1e-6)
  mlp_layer.check({"layer": (S(w.shape, F32), S(b.shape, F32)), "scale": S((), F32)}, S(w.shape, F32))


@mg.mgpu_kernel(out_shape=lambda x, p: x, grid=lambda x, p, bm=16: (x.shape[0] // bm,))
def rows_times(x, p, out, *, bm: ml.constexpr = 16):
  r = ml.ds(ml.program_id(0) * bm, bm)
  out.at[r][...] = x.at[r][...] * p["w"].at[r][...]


def test_a_constexpr_by_position_after_a_pytree_input():
  """The grid callable rebuilt the pytree for the count of arguments of the first call: a constexpr passed by
  position after the inputs (Triton's habit) made it read past the leaves, then and in every later call."""
  x, w = _rand((64, 128), 24), _rand((64, 128), 25)
  np.testing.assert_allclose(jax.jit(lambda x, p: rows_times(x, p, 32, interpret=True))(x, {"w": w}), x * w,
                             rtol=1e-6)
  np.testing.assert_allclose(rows_times(x, {"w": w}, interpret=True), x * w, rtol=1e-6)
  got = jax.vmap(lambda x, p: rows_times(x, p, interpret=True), in_axes=(0, {"w": None}))(np.stack([x, w]), {"w": w})
  np.testing.assert_allclose(got[1], w * w, rtol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x, p: x, grid=lambda x, p: (x.shape[0] // 16,))
def lin_fwd(x, p, y):
  r = ml.ds(ml.program_id(0) * 16, 16)
  y.at[r][...] = x.at[r][...] * p["w"].at[r][...] + p["b"].at[r][...]


@mg.mgpu_kernel(out_shape=lambda g, x, p: (x, p), grid=lambda g, x, p: (x.shape[0] // 16,))
def lin_bwd(g, x, p, dx, db, dw):                       # (x, p)'s leaves: x, then p's by sorted key
  r = ml.ds(ml.program_id(0) * 16, 16)
  gv = g.at[r][...]
  dx.at[r][...] = gv * p["w"].at[r][...]
  dw.at[r][...] = gv * x.at[r][...]
  db.at[r][...] = gv


def _lin(interpret):
  @jax.custom_vjp
  def lin(x, p):
    return lin_fwd(x, p, interpret=interpret)
  lin.defvjp(lambda x, p: (lin_fwd(x, p, interpret=interpret), (x, p)),
             lambda res, g: lin_bwd(g, *res, interpret=interpret))
  return lin


def _grads(lin, x, p):
  return jax.jit(jax.grad(lambda x, p: jnp.sum(jnp.sin(lin(x, p))), argnums=(0, 1)))(x, p)


def test_custom_vjp_with_a_dict_of_weights_through_two_kernels():
  x, w, b = _rand((32, 128), 9), _rand((32, 128), 10), _rand((32, 128), 11)
  ref = lambda x, p: x * p["w"] + p["b"]
  got = _grads(_lin(True), x, {"w": w, "b": b})
  want = _grads(ref, x, {"w": w, "b": b})
  for a, e in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
  jax.export.export(jax.jit(lambda x, p: jax.grad(lambda x, p: jnp.sum(_lin(False)(x, p)), argnums=(0, 1))(x, p)),
                    platforms=["cuda"])(S(x.shape, F32), {"w": S(w.shape, F32), "b": S(b.shape, F32)})


@mg.mgpu_kernel(out_shape=lambda x, p: x)
def wrong_key(x, p, out):
  out[...] = x[...] * p["weight"][...]


@mg.mgpu_kernel(out_shape=lambda x, p: x)
def writes_weights(x, p, out):
  p["w"][...] = x[...]
  out[...] = x[...]


def test_mistakes_in_a_pytree_input_are_at_the_users_line():
  spec = S((8, 128), F32)
  expect(wrong_key, [spec, {"w": spec}], mg.KernelTypeError, 'p["weight"]',
         "'weight' is not a key of p (its keys: 'w')",
         hint="index it with one of its keys, p['w'], or read it with a default: p.get('weight', v)")
  expect(writes_weights, [spec, {"w": spec}], mg.InputWriteError, 'p["w"][...]',
         "cannot write into p['w']: it is an input of the kernel, and inputs are read-only (JAX arrays are"
         " immutable)")


def test_a_pytree_input_with_a_leaf_that_is_no_array_names_the_leaf():
  """Was 'input 1 (p) is a dict of 2 items; kernel inputs are arrays', hinting to pass the dict's arrays one by
  one, which a pytree input no longer needs."""
  x = _rand((8, 128), 12)
  with pytest.raises(mg.SignatureError) as e:
    wrong_key(x, {"w": x, "name": "layer0"}, interpret=True)
  line = sys._getframe().f_lineno - 1
  assert (e.value.filename, e.value.lineno) == (__file__, line)      # at the call
  assert e.value.message == ("wrong_key: input 1 (p) is a pytree of arrays whose leaf p['name'] is str 'layer0'; a"
                             " pytree input holds arrays (and numbers)")
  assert e.value.hint == ("leave it out of p; a compile-time value is a constexpr, passed by keyword"
                          " (wrong_key(..., name=...) with a keyword-only parameter of that name)")


def test_check_specs_declares_pytree_inputs():
  """`mg.check_specs(kernel, spec, {'w': spec})` was MG003 ('each spec needs .shape and .dtype'), and the
  checker's title of such a specialisation a crash."""
  from mgpu_dsl import check as C
  spec = S((8, 128), F32)
  mg.check_specs(wrong_key, spec, {"weight": spec})
  mg.check_specs(wrong_key, spec, {"w": spec})
  results = C.check_kernel(wrong_key)
  assert [r.title for r in results] == ["wrong_key(float32[8,128], {'weight': float32[8,128]})",
                                        "wrong_key(float32[8,128], {'w': float32[8,128]})"]
  assert results[0].ok and [e.code for e in results[1].errors] == ["MG003"]


# ---------------------------------------------------------------- outputs named after keys they do not bind
@mg.mgpu_kernel(out_shape=lambda g, x, p: (x, p))
def grads_in_key_order_of_the_def(g, x, p, dx, dw, db):   # (x, p)'s leaves: x, p['b'], p['w']
  dx[...] = g[...] * p["w"][...]
  dw[...] = g[...] * x[...]
  db[...] = g[...]


@mg.mgpu_kernel(out_shape=lambda p, g: p)
def sgd_step(p, g, w_new, b_new, *, lr: ml.constexpr = 0.1):
  w_new[...] = p["w"][...] - lr * g["w"][...]
  b_new[...] = p["b"][...] - lr * g["b"][...]


class Moments(NamedTuple):
  m: jax.Array
  v: jax.Array


@mg.mgpu_kernel(out_shape=lambda g: Moments(g, g))
def moments(g, v_out, m_out):
  m_out[...] = g[...]
  v_out[...] = g[...] * g[...]


def test_outputs_named_after_a_key_they_do_not_bind():
  """A gradient or update kernel for a dict of weights names its outputs after the keys (dw, db; w_new, b_new)
  in the def's order; the dict's leaves bind in sorted-key order, so dw received b's gradient, silently."""
  spec = S((8, 128), F32)
  cases = [(grads_in_key_order_of_the_def, [spec, spec, {"w": spec, "b": spec}], "key", "'b'", "dw", "db",
            "a dict's outputs follow its sorted keys ('b', 'w')", "sorted-key order (b, w)"),
           (sgd_step, [{"w": spec, "b": spec}, {"w": spec, "b": spec}], "key", "'b'", "w_new", "b_new",
            "a dict's outputs follow its sorted keys ('b', 'w')", "sorted-key order (b, w)"),
           (moments, [spec], "field", "'m'", "v_out", "m_out", "Moments's outputs follow its fields' order ('m', 'v')",
            "the fields' order (m, v)")]
  for kernel, specs, what, key, param, named, rule, fix in cases:
    with pytest.raises(mg.SignatureError) as e:
      kernel.check(*specs)
    assert e.value.message == (f"out_shape's {what} {key} binds output parameter {param!r}, not {named!r}, named"
                               f" after it: {rule}, not parameter names")
    assert e.value.lineno == kernel.fn.__code__.co_firstlineno     # the decorator's out_shape=
    assert e.value.hint == f"name the output parameters in {fix}, or give out_shape a tuple in the parameters' order"


# ---------------------------------------------------------------- outputs grouped as pallas_call groups them
@mg.mgpu_kernel(out_shape=lambda x: {"sq": x, "neg": x}, grid=lambda x: (x.shape[0] // 16,))
def square_and_negate(x, o):                           # one parameter for a dict out_shape, as in pallas_call
  r = ml.ds(ml.program_id(0) * 16, 16)
  o["sq"].at[r][...] = x.at[r][...] * x.at[r][...]
  o["neg"].at[r][...] = -x.at[r][...]


class AdamState(NamedTuple):
  m: jax.Array
  v: jax.Array


@mg.mgpu_kernel(out_shape=lambda p, g, s: (p, AdamState(s.m, s.v)), grid=lambda p, g, s: (p["w"].shape[0] // 16,))
def adam_step(p, g, s, new_p, new_s, *, lr: ml.constexpr = 1e-2, b1: ml.constexpr = 0.9, b2: ml.constexpr = 0.99):
  r = ml.ds(ml.program_id(0) * 16, 16)
  gv = g["w"].at[r][...]
  m = b1 * s.m.at[r][...] + (1 - b1) * gv
  v = b2 * s.v.at[r][...] + (1 - b2) * gv * gv
  new_s.m.at[r][...] = m
  new_s.v.at[r][...] = v
  new_p["w"].at[r][...] = p["w"].at[r][...] - lr * m / (ml.sqrt(v) + 1e-8)


def _adam(p, g, s, lr=1e-2, b1=0.9, b2=0.99):
  m = b1 * s.m + (1 - b1) * g["w"]
  v = b2 * s.v + (1 - b2) * g["w"] ** 2
  return {"w": p["w"] - lr * m / (np.sqrt(v) + 1e-8)}, AdamState(m, v)


def test_output_parameters_grouped_as_pallas_call_groups_them():
  """`def k(x, o)` with a dict out_shape was MG006 ('out_shape describes 2 outputs: 3 ref parameters, but k has
  2'); pallas_call passes a tuple out_shape's items one parameter each and any other structure as one."""
  x = _rand((32, 128), 13)
  got = square_and_negate(x, interpret=True)
  np.testing.assert_allclose(got["sq"], x * x, rtol=1e-6)
  np.testing.assert_allclose(got["neg"], -x, rtol=1e-6)
  got = jax.vmap(lambda x: square_and_negate(x, interpret=True))(np.stack([x, 2 * x]))
  np.testing.assert_allclose(got["sq"][1], 4 * x * x, rtol=1e-6)
  _exports(square_and_negate, S(x.shape, F32))
  p, g = {"w": _rand((32, 128), 14)}, {"w": _rand((32, 128), 15)}
  s = AdamState(np.abs(_rand((32, 128), 16)), np.abs(_rand((32, 128), 17)))
  got = jax.jit(lambda p, g, s: adam_step(p, g, s, interpret=True))(p, g, s)
  for a, e in zip(jax.tree.leaves(got), jax.tree.leaves(_adam(p, g, s))):
    np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
  assert isinstance(got[1], AdamState)
  spec = S((32, 128), F32)
  adam_step.check({"w": spec}, {"w": spec}, AdamState(spec, spec))


@mg.mgpu_kernel(out_shape=lambda new, cache, *, pos: cache, input_output_aliases={2: 0, 3: 1})
def append_kv(new, cache, out, *, pos: ml.constexpr):     # aliases index the leaves, as pallas_call's
  out["k"].at[pos:pos + new["k"].shape[0]][...] = new["k"][...]
  out["v"].at[pos:pos + new["v"].shape[0]][...] = new["v"][...]


def test_aliases_of_pytree_leaves_update_a_kv_cache_in_place():
  cache = {"k": _rand((32, 128), 18), "v": _rand((32, 128), 19)}
  new = {"k": _rand((8, 128), 20), "v": _rand((8, 128), 21)}
  got = jax.jit(lambda n, c: append_kv(n, c, pos=16, interpret=True), donate_argnums=1)(
      new, jax.tree.map(jnp.asarray, cache))
  for name in ("k", "v"):
    want = cache[name].copy()
    want[16:24] = new[name]
    np.testing.assert_array_equal(got[name], want)
  text = _exports(lambda n, c: append_kv(n, c, pos=16), {"k": S((8, 128), F32), "v": S((8, 128), F32)},
                  {"k": S((32, 128), F32), "v": S((32, 128), F32)})
  assert "mosaic_gpu" in text


@mg.mgpu_kernel(out_shape=lambda x: {"sq": x, "neg": x})
def writes_one_of_two(x, o):
  o["sq"][...] = x[...] * x[...]


def test_a_grouped_output_left_unwritten_is_named_as_read():
  e = expect(writes_one_of_two, [S((8, 128), F32)], mg.UncoveredOutputError, "o):",
             "o['neg'] is never written: every output must be written in full")
  assert e.hint.startswith("store the results into o['neg']")


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_pytree_inputs():
  x, w, b = _rand((64, 128), 3), _rand((128,), 4), _rand((16, 128), 5)
  # (x * w + b may be one fused multiply-add on the GPU, rounded once: an ulp of the terms where they cancel)
  np.testing.assert_allclose(jax.jit(affine)(x, Linear(w, b)), x * w + np.tile(b, (4, 1)), rtol=1e-6, atol=1e-6)
  x, w, b = _rand((32, 128), 9), _rand((32, 128), 10), _rand((32, 128), 11)
  got = _grads(_lin(False), x, {"w": w, "b": b})
  want = _grads(_lin(True), x, {"w": w, "b": b})
  for a, e in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
  p, g = {"w": _rand((32, 128), 14)}, {"w": _rand((32, 128), 15)}
  s = AdamState(np.abs(_rand((32, 128), 16)), np.abs(_rand((32, 128), 17)))
  for a, e in zip(jax.tree.leaves(jax.jit(adam_step)(p, g, s)), jax.tree.leaves(_adam(p, g, s))):
    np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
  got = jax.jit(square_and_negate)(x)
  np.testing.assert_allclose(got["neg"], -x, rtol=1e-6)
  cache = {"k": _rand((32, 128), 18), "v": _rand((32, 128), 19)}
  new = {"k": _rand((8, 128), 20), "v": _rand((8, 128), 21)}
  got = jax.jit(lambda n, c: append_kv(n, c, pos=16), donate_argnums=1)(new, jax.tree.map(jnp.asarray, cache))
  for name in ("k", "v"):
    want = cache[name].copy()
    want[16:24] = new[name]
    np.testing.assert_array_equal(got[name], want)
