"""Probe 50d: JAX habits around kernels, what probe 49d left. `mgpu_kernel(name=...)` (pallas_call's name=) was
refused ("drop it"): it names the kernel in the module, its custom call and profiles; a `jax.vmap`-wrapped (or
`jax.grad`-wrapped) helper called in a kernel was MG003 whose hint said `@ml.inline` (which computes without the
map): the hint now writes the mapped computation over the whole tile; `jax.debug.print("{} {}", *pair)` (and
`**named`, print's `"...".format(*pair)` and `"..." % pair`) was MG003: a tuple or dict the kernel holds spreads
into the fields. Under jax_enable_x64 jnp's int64 indices and counts (argmax, arange, argsort, count_nonzero), int32
in a kernel, were MG102 into int64 outputs; a return under a run-time if in a `with jax.named_scope(...)` of a
helper was MG001; jax.hessian of a kernel under jax.custom_vjp was MG009 whose hint said to use jax.custom_vjp."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from locate import expect

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, I32, I64 = jnp.float32, jnp.int32, jnp.int64


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _exports(kernel, *specs):
  """Builds for CUDA (the real Mosaic GPU module, verified) as jax.export does."""
  return jax.export.export(jax.jit(lambda *a: kernel(*a)), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- name= (pallas_call's)
def _scaled(x, y):
  y[...] = x[...] * 2


@pytest.mark.parametrize("name, symbol", [("rms_norm_fwd", "rms_norm_fwd"), ("attention/fwd", "attention_fwd"),
                                          ("2d_pool", "_2d_pool")])
def test_name_names_the_kernel_in_its_module_and_custom_call(name, symbol):
  """It was MG006 ("drop name="); a name with characters a symbol has not is spelt with underscores."""
  k = mg.mgpu_kernel(out_shape=lambda x: x, name=name)(_scaled)
  x = np.random.default_rng(0).standard_normal(128).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(k(x, interpret=True)), x * 2)
  text = _exports(k, S((128,), F32))
  assert f"func.func private @{symbol}(" in text
  assert "func.func private @_scaled(" not in text
  assert k.__name__ == "_scaled"            # (the Python function keeps its name)


def test_name_must_be_a_string():
  with pytest.raises(mg.SignatureError) as info:
    mg.mgpu_kernel(out_shape=lambda x: x, name=3)(_scaled)
  e = info.value
  assert e.code == "MG006"
  assert e.message == "name= names the kernel in profiles: a string with a letter or digit, got int 3"
  assert e.hint == 'name="_scaled" (or leave it out: the def\'s name)'


# ---------------------------------------------------------------- jax.vmap and jax.grad of a helper
def _row_normalised(r):
  return r / jnp.sum(r)


def _energy(r):
  return jnp.sum(r * r)


@mg.mgpu_kernel(out_shape=lambda x: x)
def vmapped_rows(x, y):
  y[...] = jax.vmap(_row_normalised)(x[...])


@mg.mgpu_kernel(out_shape=lambda x: x)
def vmapped_columns(x, y):
  t = x[...]
  y[...] = jax.vmap(_row_normalised, in_axes=1, out_axes=1)(t)


@mg.mgpu_kernel(out_shape=lambda x: x)
def grad_helper(x, y):
  y[...] = jax.grad(_energy)(x[...])


@ml.inline
def _row_normalised_tile(t):
  return t / jnp.sum(t, axis=1, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda x: x)
def rows_as_hinted(x, y):
  y[...] = _row_normalised_tile(x[...])


def test_a_vmapped_helper_is_hinted_as_the_computation_over_the_tile():
  """The hint said to decorate the helper with @ml.inline, which computes the helper once, unmapped."""
  expect(vmapped_rows, [S((16, 32), F32)], mg.KernelTypeError, "jax.vmap(",
         "jax.vmap(_row_normalised) cannot take a register tensor inside a kernel",
         hint="jax.vmap runs _row_normalised once per slice of x[...] along axis 0, which a kernel does not do (it"
              " computes on whole tiles): write _row_normalised for the whole tile, the mapped axis kept, a slice's"
              " reductions over the other axes with keepdims=True (a slice's jnp.sum(r) is jnp.sum(x[...], axis=1,"
              " keepdims=True)), and call that (an @ml.inline helper); or loop over the slices with a static for i"
              " in range(n)")
  e = expect(vmapped_columns, [S((16, 32), F32)], mg.KernelTypeError, "jax.vmap(",
             "jax.vmap(_row_normalised, in_axes=1, out_axes=1) cannot take a register tensor inside a kernel")
  assert "along axis 1" in e.hint and "jnp.sum(t, axis=0, keepdims=True)" in e.hint
  e = expect(grad_helper, [S((64,), F32)], mg.KernelTypeError, "jax.grad(",
             "jax.grad(_energy) cannot take a register tensor inside a kernel")
  assert e.hint.startswith("a kernel has no automatic derivatives: write the derivative's formula")
  x = np.random.default_rng(1).uniform(0.5, 1.5, (16, 32)).astype(np.float32)     # what the hint writes is the map
  np.testing.assert_allclose(np.asarray(rows_as_hinted(x, interpret=True)),
                             np.asarray(jax.vmap(_row_normalised)(x)), rtol=1e-6)


# ---------------------------------------------------------------- jax.debug.print of spread arguments
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def spread_prints(x, y):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  pair = (ml.min(v), ml.max(v))
  jax.debug.print("{} {}", *pair)
  jax.debug.print("pid {} lo {} hi {:.1f}", i, *[ml.min(v), ml.max(v)])
  stats = {"m": ml.sum(v), "n": 64}
  jax.debug.print("sum={m} n={n}", **stats)
  jax.debug.print("{}/{}", *divmod(i, 2))
  print("{} {}".format(*pair))                  # (print's str.format and % spread the same)
  print("lo=%.1f hi=%.1f" % pair)
  y.at[ml.ds(i * 64, 64)][...] = v


@mg.mgpu_kernel(out_shape=lambda x: x)
def spread_too_few(x, y):
  v = x[...]
  jax.debug.print("{} {} {}", *(ml.min(v), ml.max(v)))
  y[...] = v


def test_debug_print_spreads_a_tuple_and_a_dict(capsys):
  """`*pair` and `**stats` were MG003 ("not a format a kernel reads")."""
  x = np.random.default_rng(2).integers(-50, 50, 128).astype(np.float32)     # (exact in any print)
  np.testing.assert_array_equal(np.asarray(spread_prints(x, interpret=True)), x)
  want = []
  for i in range(2):
    p, v = f"[program ({i}, 0, 0)]", x[i * 64:(i + 1) * 64]
    lo, hi = float(v.min()), float(v.max())
    want += [f"{p} {lo} {hi}", f"{p} pid {i} lo {lo} hi {hi:.1f}", f"{p} sum={float(v.sum())} n=64",
             f"{p} {i // 2}/{i % 2}", f"{p} {lo} {hi}", f"{p} lo={lo:.1f} hi={hi:.1f}"]
  assert [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[program")] == want
  spec = S((128,), F32)
  assert "gpu.printf" in spread_prints.mlir(spec)
  assert "mosaic_gpu" in _exports(spread_prints, spec)
  expect(spread_too_few, [S((128,), F32)], mg.KernelTypeError, "jax.debug.print(",     # (a spread too short)
         "jax.debug.print's format '{} {} {}' is not one a kernel reads with these arguments")


# ---------------------------------------------------------------- jnp's default integer under jax_enable_x64
I64S = lambda shape: S(shape, I64)


@mg.mgpu_kernel(out_shape=lambda x: (I64S((16,)), I64S((16, 1)), I64S((16, 32)), I64S((1,))))
def x64_indices(x, best, worst, order, flat):
  t = x[...]
  best[...] = jnp.argmax(t, axis=1)
  worst[...] = jnp.argmin(t, axis=1)[:, None]
  order[...] = jnp.argsort(t, axis=-1)
  flat[0] = jnp.argmax(t)


@mg.mgpu_kernel(out_shape=lambda x: (I64S((16, 32)), I64S((32,)), I64S((32,)), I64S((16,)), x))
def x64_aranges(x, grid_cols, cols, positions, evens, same):
  grid_cols[...] = jnp.broadcast_to(jnp.arange(32)[None, :], (16, 32))
  cols[...] = jnp.arange(32).reshape(32)
  positions[...] = jnp.arange(1, 33)
  evens[...] = jnp.arange(30, -2, -2)
  same[...] = x[...] + jnp.argmax(x[...], axis=1, keepdims=True)      # (into int32: stored as it is)


def test_x64_indices_store_into_int64_outputs_as_jnps():
  """Under jax_enable_x64 jnp's indices are int64; the kernel's were int32, MG102 into an int64 output."""
  rng = np.random.default_rng(3)
  x = rng.standard_normal((16, 32)).astype(np.float32)
  xi = rng.integers(-9, 9, (16, 32)).astype(np.int32)
  with jax.enable_x64(True):
    want = (jnp.argmax(x, axis=1), jnp.argmin(x, axis=1)[:, None], jnp.argsort(x, axis=-1), jnp.argmax(x)[None])
    for got, w in zip(x64_indices(x, interpret=True), want):
      assert got.dtype == w.dtype == jnp.int64
      np.testing.assert_array_equal(np.asarray(got), np.asarray(w))
    want = (jnp.broadcast_to(jnp.arange(32)[None, :], (16, 32)), jnp.arange(32), jnp.arange(1, 33),
            jnp.arange(30, -2, -2), (xi + jnp.argmax(xi, axis=1, keepdims=True)).astype(jnp.int32))
    for got, w in zip(x64_aranges(xi, interpret=True), want):
      assert got.dtype == w.dtype
      np.testing.assert_array_equal(np.asarray(got), np.asarray(w))
    assert "mosaic_gpu" in _exports(x64_indices, S((16, 32), F32))
    assert "mosaic_gpu" in _exports(x64_aranges, S((16, 32), I32))


@mg.mgpu_kernel(out_shape=lambda x: I64S((16,)))
def x64_int_sum(x, o):
  o[...] = jnp.sum(x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: I64S((128,)))
def x64_shifted_arange(x, o):
  o[...] = jnp.arange(128) + x[0]


def test_x64_sums_and_index_arithmetic_into_int64_stay_mg102_with_the_right_hint():
  """A kernel's sum of int32 is int32 (jnp's, under x64, sums in int64): the hint sums in int64 (it said
  .astype(jnp.int64), which keeps the int32 wraparound); arithmetic on an index stays int32, still MG102."""
  with jax.enable_x64(True):
    expect(x64_int_sum, [S((16, 32), I32)], mg.StoreDtypeError, "o[...]",
           "cannot store jnp.sum(x[...], axis=1) (int32) into o (GMEM, int64): no implicit conversion",
           hint="sum in int64: jnp.sum(x[...], axis=1, dtype=jnp.int64) (jnp under jax_enable_x64 sums int32 in"
                " int64; a kernel's sum of int32 is int32, and .astype(jnp.int64) of it keeps its int32 wraparound)")
    expect(x64_shifted_arange, [S((4,), I32)], mg.StoreDtypeError, "o[...]",
           "cannot store jnp.arange(128) + x[0] (int32) into o (GMEM, int64): no implicit conversion")
  # without x64 an int64 out_shape is int32, with jnp's warning, as jnp.zeros(n, jnp.int64) (probe 53b)
  x = np.random.default_rng(5).standard_normal((16, 32)).astype(np.float32)
  with pytest.warns(UserWarning, match="truncated to dtype int32"):
    best, _, order, _ = x64_indices(x, interpret=True)
  assert best.dtype == order.dtype == jnp.int32
  np.testing.assert_array_equal(np.asarray(best), x.argmax(1))
  np.testing.assert_array_equal(np.asarray(order), np.argsort(x, -1, kind="stable"))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_x64_indices_on_the_gpu_match_interpret_mode():
  x = np.random.default_rng(4).standard_normal((16, 32)).astype(np.float32)
  with jax.enable_x64(True):
    for got, want in zip(jax.jit(x64_indices)(x), x64_indices(x, interpret=True)):
      assert got.dtype == want.dtype == jnp.int64
      np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


# ---------------------------------------------------------------- a return under a run-time if in a named scope
@jax.jit
def _gate(v, t):
  with jax.named_scope("gate"):
    if t > 0:
      return v * 2
    else:
      with jax.named_scope("negative"):
        return v - 1


@mg.mgpu_kernel(out_shape=lambda x, t: x)
def scoped_returns(x, t, y):
  def boost(v, s):
    with jax.profiler.TraceAnnotation("boost"):
      if s > 1:
        return v + 10
    return v
  y[...] = boost(_gate(x[...], t[0]), t[0])


def test_a_return_under_a_run_time_if_in_a_named_scope_of_a_helper():
  """It was MG001 ("return under a run-time condition in an @ml.inline helper that has a path without a return"):
  the helpers' return rewriting saw through ifs only, not through a naming with."""
  x = np.random.default_rng(5).standard_normal(128).astype(np.float32)
  for t in (-1, 1, 2):
    want = x * 2 if t > 0 else x - 1
    want = want + 10 if t > 1 else want
    np.testing.assert_array_equal(np.asarray(scoped_returns(x, np.array([t], np.int32), interpret=True)), want)
  assert "mosaic_gpu" in _exports(scoped_returns, S((128,), F32), S((1,), I32))


# ---------------------------------------------------------------- jax.hessian of a kernel under jax.custom_vjp
@mg.mgpu_kernel(out_shape=lambda x: x)
def _square(x, y):
  y[...] = x[...] * x[...]


@mg.mgpu_kernel(out_shape=lambda x, g: x)
def _square_bwd(x, g, dx):
  dx[...] = 2 * x[...] * g[...]


@jax.custom_vjp
def _sq_vjp(x):
  return _square(x, interpret=True)


_sq_vjp.defvjp(lambda x: (_square(x, interpret=True), x), lambda x, g: (_square_bwd(x, g, interpret=True),))


@jax.custom_jvp
def _sq_jvp(x):
  return _square(x, interpret=True)


@_sq_jvp.defjvp
def _sq_jvp_rule(p, t):
  return _sq_jvp(p[0]), 2 * p[0] * t[0]


def test_hessian_of_a_custom_vjp_kernel_says_to_use_custom_jvp():
  """MG009's hint said to wrap the call in a jax.custom_vjp, which it already was."""
  x = np.random.default_rng(6).standard_normal(8).astype(np.float32)
  for loss, rule in ((lambda a: jnp.sum(_sq_vjp(a) * a), "forward"),
                     (lambda a: jnp.sum(jax.grad(lambda b: jnp.sum(_sq_vjp(b) * b))(a)), "backward")):
    with pytest.raises(mg.DifferentiationError) as info:
      jax.hessian(loss)(x) if rule == "forward" else jax.grad(loss)(x)
    e = info.value
    assert e.code == "MG009"
    assert e.hint.startswith(f"the call is in a jax.custom_vjp's {rule}, which a second derivative (jax.hessian,"
                             " jax.jacfwd of jax.grad) differentiates in turn, and JAX takes a custom_vjp's"
                             " derivative once: define the derivative with jax.custom_jvp instead")
  got = jax.hessian(lambda a: jnp.sum(_sq_jvp(a) * a))(x)       # what the hint writes: every order
  np.testing.assert_allclose(np.asarray(got), np.asarray(jax.hessian(lambda a: jnp.sum(a * a * a))(x)), rtol=1e-5)


# ---------------------------------------------------------------- counts under x64; a form's value named as written
@mg.mgpu_kernel(out_shape=lambda x: (I64S(()), I64S((16,)), I64S((16, 1))))
def x64_counts(x, total, per_row, kept):
  t = x[...]
  total[...] = jnp.count_nonzero(t > 0)
  per_row[...] = jnp.sum(t > 0, axis=1)
  kept[...] = jnp.count_nonzero(t, axis=1, keepdims=True)


def test_x64_counts_store_into_int64_outputs_as_jnps():
  """A count (a sum of booleans: int64 in jnp under x64, exact in int32) was MG102 into an int64 output, its
  message naming the form's temporaries (`_jnp_ml_.sum(_jnp_arg0_, ...)`)."""
  x = np.random.default_rng(7).integers(-2, 3, (16, 32)).astype(np.float32)
  with jax.enable_x64(True):
    want = (jnp.count_nonzero(x > 0), jnp.sum(x > 0, axis=1), jnp.count_nonzero(x, axis=1, keepdims=True))
    for got, w in zip(x64_counts(x, interpret=True), want):
      assert got.dtype == w.dtype == jnp.int64
      np.testing.assert_array_equal(np.asarray(got), np.asarray(w))
    assert "mosaic_gpu" in _exports(x64_counts, S((16, 32), F32))


@mg.mgpu_kernel(out_shape=lambda x: S((), F32))
def count_into_float(x, y):
  y[...] = jnp.count_nonzero(x[...] > 3)


def test_a_forms_value_is_named_as_the_user_wrote_the_call():
  expect(count_into_float, [S((16, 32), F32)], mg.StoreDtypeError, "y[...]",
         "cannot store jnp.count_nonzero(x[...] > 3) (int32) into y (GMEM, float32): no implicit conversion")
