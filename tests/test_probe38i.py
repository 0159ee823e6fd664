"""Probe 38i (training-step fused kernels: fused Adam/SGD/Lion updates in place, global-norm clipping,
cross-entropy with label smoothing and ignore_index, activation and norm backwards, int4 dequantisation
into a dot, loss scaling with inf/NaN checks, bf16/f32 master weights).

A window or other static value (`s = ml.ds(...)`) that each branch of a run-time `if`, or each trip of a
run-time loop, binds for its own use was an error at the `if` (MG003, "s is a Python DSlice after one
branch of this if and a Python DSlice after the other") or the loop (MG005), though nothing read it
after them: a multi-tensor optimizer step that picks its tensor by program id was rejected."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(fn, *specs, **kw):
  return jax.export.export(jax.jit(lambda *a: fn(*a, **kw)), platforms=["cuda"])(*specs).mlir_module()


def _rnd(shape, seed, dtype=np.float32):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------- a window per branch, per trip
@mg.mgpu_kernel(out_shape=lambda a, b, ga, gb: (a, b), input_output_aliases={0: 0, 1: 1},
                grid=lambda a, b, ga, gb: (a.shape[0] // 512 + b.shape[0] // 512,))
def multi_tensor_sgd(a, b, ga, gb, ao, bo):
  pid = ml.program_id(0)
  na = a.shape[0] // 512
  if pid < na:
    s = ml.ds(pid * 512, 512)
    ao.at[s][...] = a.at[s][...] - 0.1 * ga.at[s][...]
  else:
    s = ml.ds((pid - na) * 512, 512)
    bo.at[s][...] = b.at[s][...] - 0.1 * gb.at[s][...]


def test_a_window_bound_in_each_branch_for_its_own_use_compiles_and_computes():
  a, b, ga, gb = _rnd(1024, 0), _rnd(1536, 1), _rnd(1024, 2), _rnd(1536, 3)
  got = multi_tensor_sgd(a, b, ga, gb, interpret=True)
  np.testing.assert_allclose(np.asarray(got[0]), a - np.float32(0.1) * ga, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(got[1]), b - np.float32(0.1) * gb, rtol=1e-6)
  assert "mosaic_gpu" in _export(multi_tensor_sgd, *(S(v.shape, F32) for v in (a, b, ga, gb))).lower()


@pytest.mark.gpu
def test_multi_tensor_sgd_on_the_gpu():
  a, b, ga, gb = _rnd(1024, 0), _rnd(1536, 1), _rnd(1024, 2), _rnd(1536, 3)
  got = multi_tensor_sgd(*(jnp.asarray(v) for v in (a, b, ga, gb)))
  # (the GPU contracts a - 0.1 * g into one FMA, rounded once: an ulp from numpy's two roundings where a
  # and 0.1 * g nearly cancel; on the H200 2 of 1024 elements, 7e-9 apart)
  np.testing.assert_allclose(np.asarray(got[0]), a - np.float32(0.1) * ga, rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(np.asarray(got[1]), b - np.float32(0.1) * gb, rtol=1e-6, atol=1e-7)


@mg.mgpu_kernel(out_shape=lambda a: a)
def window_per_trip(a, out):
  s = ml.ds(0, 512)
  out.at[s][...] = a.at[s][...]
  for c in range(1, a.shape[0] // 512):
    if c % 2 == 0:
      s = ml.ds(c * 512, 512)
      out.at[s][...] = a.at[s][...] * 2
    else:
      s = ml.ds(c * 512, 512)
      out.at[s][...] = a.at[s][...] * 3


def test_a_window_rebound_on_each_trip_of_a_runtime_loop_compiles_and_computes():
  a = _rnd(2048, 4)
  want = a * np.repeat(np.array([1, 3, 2, 3], np.float32), 512)
  np.testing.assert_allclose(np.asarray(window_per_trip(a, interpret=True)), want, rtol=1e-6)
  assert "mosaic_gpu" in _export(window_per_trip, S((2048,), F32)).lower()


@mg.mgpu_kernel(out_shape=lambda a: a)
def window_read_after_loop(a, out):
  s = ml.ds(0, 512)
  for c in range(a.shape[0] // 512):
    s = ml.ds(c * 512, 512)
    out.at[s][...] = a.at[s][...] * 2
  out.at[s][...] = a.at[s][...]


@mg.mgpu_kernel(out_shape=lambda a: a)
def window_read_before_rebinding(a, out):
  s = ml.ds(0, 512)
  for c in range(1, a.shape[0] // 512 + 1):
    out.at[s][...] = a.at[s][...] * 2
    s = ml.ds(c * 512, 512)


@pytest.mark.parametrize("kernel, at", [(window_read_after_loop, "s = ml.ds(c"),
                                        (window_read_before_rebinding, "s = ml.ds(c")])
def test_a_window_a_later_trip_or_statement_reads_is_still_reported(kernel, at):
  expect(kernel, [S((2048,), F32)], mg.LoopCarryTypeError, at,
         "s is rebound inside a runtime loop to a window ml.ds(start, size); only register values and numbers"
         " can change across iterations",
         hint="use ml.static_range to unroll the loop, or compute it before the loop")


@mg.mgpu_kernel(out_shape=lambda a: a, grid=lambda a: (a.shape[0] // 512,))
def window_chosen_at_run_time(a, out):
  pid = ml.program_id(0)
  if pid % 2 == 0:
    s = ml.ds(pid * 512, 512)
  else:
    s = ml.ds((pid ^ 1) * 512 + 512, 512)
  out.at[s][...] = a.at[s][...] * 2


@mg.mgpu_kernel(out_shape=lambda a: a, grid=lambda a: (a.shape[0] // 512,))
def window_chosen_followed(a, out):
  pid = ml.program_id(0)
  if pid % 2 == 0:
    s_start = pid * 512
  else:
    s_start = (pid ^ 1) * 512 + 512
  s = ml.ds(s_start, 512)
  out.at[s][...] = a.at[s][...] * 2


def test_a_window_chosen_by_a_runtime_if_and_read_after_it_says_how_to_choose_its_start():
  line = where(window_chosen_at_run_time, "if pid % 2")[0]
  e = expect(window_chosen_at_run_time, [S((2048,), F32)], mg.KernelTypeError, "if pid % 2",
             "s is a different window ml.ds(start, 512) on each path through this if, and is read after it; a"
             " window is made while compiling, so it cannot be chosen at run time",
             hint="choose its start in each branch (s_start = ... in both) and make the window after the if:"
                  " s = ml.ds(s_start, 512)")
  assert e.notes == tuple(f"{e.filename}:{line + k}:4: s is assigned here" for k in (1, 3))
  a = _rnd(2048, 5)
  np.testing.assert_allclose(np.asarray(window_chosen_followed(a, interpret=True)), a * 2, rtol=1e-6)
  assert "mosaic_gpu" in _export(window_chosen_followed, S((2048,), F32)).lower()


# ---------------------------------------------------------------- jnp.nan_to_num's keywords in its hint
# A loss-scaling step's `jnp.nan_to_num(g, nan=0.0, posinf=1.0, neginf=-1.0)` was hinted as the call
# without keywords: followed, +-inf became +-3.4e38, not the values the call asked for.
@mg.mgpu_kernel(out_shape=lambda g: g)
def nan_to_num_keywords(g, out):
  v = g[...]
  out[...] = jnp.nan_to_num(v, nan=0.0, posinf=1.0, neginf=-1.0)


@mg.mgpu_kernel(out_shape=lambda g: g)
def nan_to_num_keywords_followed(g, out):
  v = g[...]
  out[...] = ml.where(v != v, 0.0, ml.where(v == float('inf'), 1.0, ml.where(v == -float('inf'), -1.0, v)))


@mg.mgpu_kernel(out_shape=lambda g: g)
def nan_to_num_positional(g, out):
  out[...] = ml.nan_to_num(g[...], True, 2.0, posinf=7.0)


@mg.mgpu_kernel(out_shape=lambda g: g)
def nan_to_num_positional_followed(g, out):
  out[...] = ml.where(g[...] != g[...], 2.0, ml.where(g[...] == float('inf'), 7.0, ml.where(g[...] == -float('inf'),
                                                                                      -jnp.finfo(g[...].dtype).max, g[...])))


def _non_finite(dtype):
  return jnp.asarray(np.array([np.nan, np.inf, -np.inf, 1.5, -2.0, 0.0, 3.0, -7.0] * 32, np.float32), dtype)


@pytest.mark.parametrize("dtype", [F32, jnp.bfloat16, jnp.float16])
def test_the_nan_to_num_hint_keeps_the_calls_values(dtype):
  spec = [S((256,), dtype)]
  # (jnp.nan_to_num computes since probe 47b, as the form its hint wrote)
  np.testing.assert_array_equal(np.asarray(nan_to_num_keywords(_non_finite(dtype), interpret=True), np.float32),
                                np.asarray(jnp.nan_to_num(_non_finite(dtype), nan=0.0, posinf=1.0, neginf=-1.0),
                                           np.float32))
  expect(nan_to_num_positional, spec, mg.UnknownNameError, "ml.nan_to_num", "ml has no attribute 'nan_to_num'",
         hint="no ml.nan_to_num: write ml.where(g[...] != g[...], 2.0, ml.where(g[...] == float('inf'), 7.0,"
              " ml.where(g[...] == -float('inf'), -jnp.finfo(g[...].dtype).max, g[...]))), as jnp.nan_to_num (+-inf"
              " not given become the dtype's largest finite values)")
  x = _non_finite(dtype)
  np.testing.assert_array_equal(np.asarray(nan_to_num_keywords_followed(x, interpret=True), np.float32),
                                np.asarray(jnp.nan_to_num(x, nan=0.0, posinf=1.0, neginf=-1.0), np.float32))
  np.testing.assert_array_equal(np.asarray(nan_to_num_positional_followed(x, interpret=True), np.float32),
                                np.asarray(jnp.nan_to_num(x, True, 2.0, posinf=7.0), np.float32))
  assert "mosaic_gpu" in _export(nan_to_num_keywords_followed, *spec).lower()


# ---------------------------------------------------------------- a 3-D broadcast into narrow rows
# int4 weights packed 8 a word along N unpack as `(q[:, :, None] >> (ml.arange(8) * 4)[None, None, :]) & 0xF`:
# the (r, n, 1) operand stretched to (r, n, 8) is the 2-D broadcast (r * n, 1) -> (r * n, 8), a tile of
# narrow rows the compiler holds (2 lanes a row), but the 3-D plan still asked for 32 columns: MG204.
@mg.mgpu_kernel(out_shape=lambda x, wq: S((x.shape[0], wq.shape[1] * 8), F32), grid=lambda x, wq: (x.shape[0] // 64,))
def int4_along_n_into_a_dot(x, wq, out):
  i = ml.program_id(0)
  k, n = x.shape[1], wq.shape[1] * 8
  x_s = ml.smem((64, k), jnp.bfloat16)
  w_s = ml.smem((k, n), jnp.bfloat16)
  ml.copy(x.at[ml.ds(i * 64, 64), :], x_s)
  q = wq[...]
  w = (q[:, :, None] >> (ml.arange(8) * 4)[None, None, :]) & 0xF
  w_s[...] = (w - 8).reshape(k, n).astype(jnp.bfloat16)
  out.at[ml.ds(i * 64, 64), :][...] = ml.dot(x_s, w_s)


@mg.mgpu_kernel(out_shape=lambda q, s: S(q.shape, F32), grid=lambda q, s: (q.shape[0] // 64,))
def groups_of_eight(q, s, out):
  i = ml.program_id(0)
  v = q.at[ml.ds(i * 64, 64), :][...].astype(F32)
  g = v.reshape(64, q.shape[1] // 8, 8) * s.at[ml.ds(i * 64, 64), :][...][:, :, None]
  out.at[ml.ds(i * 64, 64), :][...] = g.reshape(64, q.shape[1])


def _int4_case():
  x = jnp.asarray(_rnd((128, 64), 6), jnp.bfloat16)
  wq = np.random.default_rng(7).integers(-2**31, 2**31 - 1, (64, 8), dtype=np.int64).astype(np.int32)
  w = ((wq[:, :, None] >> (np.arange(8) * 4)) & 0xF) - 8
  return x, wq, np.asarray(x, np.float32) @ w.reshape(64, 64).astype(np.float32)


def _groups_case():
  q = np.random.default_rng(8).integers(-8, 8, (128, 128)).astype(np.int8)
  s = _rnd((128, 16), 9)
  return q, s, (q.astype(np.float32).reshape(128, 16, 8) * s[:, :, None]).reshape(128, 128)


def test_a_3d_broadcast_into_narrow_rows_compiles_and_computes():
  x, wq, want = _int4_case()
  np.testing.assert_allclose(np.asarray(int4_along_n_into_a_dot(x, wq, interpret=True)), want, rtol=1e-5, atol=1e-4)
  assert "mosaic_gpu" in _export(int4_along_n_into_a_dot, S(x.shape, jnp.bfloat16), S(wq.shape, jnp.int32)).lower()
  q, s, want = _groups_case()
  np.testing.assert_allclose(np.asarray(groups_of_eight(q, s, interpret=True)), want, rtol=1e-6)
  assert "mosaic_gpu" in _export(groups_of_eight, S(q.shape, jnp.int8), S(s.shape, F32)).lower()


@pytest.mark.gpu
def test_a_3d_broadcast_into_narrow_rows_on_the_gpu():
  x, wq, want = _int4_case()
  np.testing.assert_allclose(np.asarray(int4_along_n_into_a_dot(x, jnp.asarray(wq))), want, rtol=1e-5, atol=1e-4)
  q, s, want = _groups_case()
  np.testing.assert_allclose(np.asarray(groups_of_eight(jnp.asarray(q), jnp.asarray(s))), want, rtol=1e-6)


# ---------------------------------------------------------------- torch.clamp's bounds by keyword in ml.clamp
# Clipping an update, `ml.clamp(u, max=1.0)` (torch.clamp's keywords), was hinted `no ml.clamp: write
# ml.clip(x, y, z)`: placeholders for the call's own operands, and three of them where it passes one bound.
# Since probe 49h ml.clamp is Triton's tl.clamp, and a bound by keyword limits that side only.
@mg.mgpu_kernel(out_shape=lambda u: u)
def clamp_by_keyword(u, out):
  out[...] = ml.clamp(u[...], max=1.0)


@mg.mgpu_kernel(out_shape=lambda u: u)
def clamp_both_keywords(u, out):
  v = u[...]
  out[...] = ml.clamp(v, min=-0.5, max=0.5)


@mg.mgpu_kernel(out_shape=lambda u: u)
def clamp_by_keyword_followed(u, out):
  out[...] = ml.minimum(u[...], 1.0)


def test_ml_clamp_with_keywords_computes_with_the_calls_bounds():
  u = _rnd(256, 10) * 2
  np.testing.assert_array_equal(np.asarray(clamp_by_keyword(u, interpret=True)), np.minimum(u, 1.0))
  np.testing.assert_array_equal(np.asarray(clamp_both_keywords(u, interpret=True)), np.clip(u, -0.5, 0.5))
  np.testing.assert_array_equal(np.asarray(clamp_by_keyword_followed(u, interpret=True)), np.minimum(u, 1.0))


# ---------------------------------------------------------------- a flag every program may set, written under an if
# Triton's habit for a loss scaler's found_inf (zeroed outside, `if bad: found[0] = 1`): where no program
# found an inf, interpret mode's MG602 said to add an else: branch writing zeros, which every program then
# writes (a RaceError). The hint now writes the atomic update every program makes.
@mg.mgpu_kernel(out_shape=lambda g: S((), jnp.int32), grid=lambda g: (g.shape[0] // 8,))
def found_inf_under_if(g, found):
  i = ml.program_id(0)
  v = g.at[ml.ds(i * 8, 8), :][...]
  if ml.any(~ml.isfinite(v)):
    found[...] = 1


@mg.mgpu_kernel(out_shape=lambda g: S((), jnp.int32), grid=lambda g: (g.shape[0] // 8,))
def found_inf_as_hinted(g, found):
  i = ml.program_id(0)
  v = g.at[ml.ds(i * 8, 8), :][...]
  ml.atomic_max(found, (ml.any(~ml.isfinite(v))).astype(jnp.int32))


def test_a_flag_set_under_a_runtime_if_by_any_program_hints_the_atomic_update():
  g = _rnd((64, 128), 11)
  with pytest.raises(mg.UncoveredOutputError) as info:
    found_inf_under_if(g, interpret=True)
  e = info.value
  line, col = where(found_inf_under_if, "found[...] = 1")
  assert (e.code, e.lineno, e.col_offset) == ("MG602", line, col)
  assert e.message == (f"found[] is never written: the write into found at line {line} is under the run-time condition"
                       f" at line {line - 1}, which every program skipped, and nothing else writes it, so 1 of 1"
                       f" elements of found would stay uninitialised")
  assert e.hint == ("every program writes this same window of found where its condition holds: a flag any program"
                    " may set is an update every program makes, ml.atomic_max(found, (ml.any(~ml.isfinite(v)))"
                    ".astype(jnp.int32)) (an int32 found, outside the if; ml.atomic_add counts instead), as a plain"
                    " write in an else: branch would race with the other programs")
  for bad in ((), ((3, 3), (40, 7))):
    h = g.copy()
    for r, c in bad:
      h[r, c] = np.inf
    assert int(found_inf_as_hinted(h, interpret=True)) == int(bool(bad))
  assert "mosaic_gpu" in _export(found_inf_as_hinted, S(g.shape, F32)).lower()
  with pytest.raises(mg.UncoveredOutputError) as info:     # a window of its own per program: an else: branch
    flag_per_program_under_if(g, interpret=True)
  assert info.value.hint.startswith("write found's window on every path: add an else: branch")


@mg.mgpu_kernel(out_shape=lambda g: S((g.shape[0] // 8,), jnp.int32), grid=lambda g: (g.shape[0] // 8,))
def flag_per_program_under_if(g, found):
  i = ml.program_id(0)
  if ml.any(~ml.isfinite(g.at[ml.ds(i * 8, 8), :][...])):
    found[i] = 1


# ---------------------------------------------------------------- torch.optim's in-place tensor methods
# An AdamW step ported from torch.optim (`m.lerp_(g, 1 - b1)`, `v.mul_(b2).addcmul_(g, g, value=1 - b2)`,
# `p.addcdiv_(m, d, value=-lr)`, `p.add_(g, alpha=-lr)`) was told only which methods register values have.
@mg.mgpu_kernel(out_shape=lambda p, g, m: (p, m))
def torch_style_lerp(p, g, m, po, mo):
  gr, ma = g[...], m[...]
  ma.lerp_(gr, 0.1)
  mo[...] = ma
  po[...] = p[...]


@mg.mgpu_kernel(out_shape=lambda p, g, m: (p, m))
def torch_style_addcdiv(p, g, m, po, mo):
  w, ma = p[...], m[...]
  w.addcdiv_(ma, ml.sqrt(g[...] * g[...]) + 1e-8, value=-1e-3)
  po[...] = w
  mo[...] = ma


@mg.mgpu_kernel(out_shape=lambda p, g, m: (p, m))
def torch_style_add_alpha(p, g, m, po, mo):
  w = p[...]
  po[...] = w.add(g[...], alpha=-0.01)
  mo[...] = m[...]


@mg.mgpu_kernel(out_shape=lambda p, g, m: (p, m))
def torch_style_followed(p, g, m, po, mo):
  gr, ma, w = g[...], m[...], p[...]
  ma = ma + 0.1 * (gr - ma)
  w = w + (-1e-3) * ma / (ml.sqrt(gr * gr) + 1e-8)
  w = w + (-0.01) * gr
  po[...] = w
  mo[...] = ma


def test_torch_optims_in_place_methods_are_hinted_as_the_expressions_they_compute():
  spec = [S((256,), F32)] * 3
  expect(torch_style_lerp, spec, mg.KernelTypeError, "ma.lerp_", "a register tensor has no attribute 'lerp_'",
         hint="write ma + 0.1 * (gr - ma); rebind the name, ma = ..., as register values do not change in place"
              " (torch's .lerp_ changes its tensor)")
  expect(torch_style_addcdiv, spec, mg.KernelTypeError, "w.addcdiv_", "a register tensor has no attribute 'addcdiv_'",
         hint="write w + (-1e-3) * ma / (ml.sqrt(g[...] * g[...]) + 1e-8); rebind the name, w = ..., as register"
              " values do not change in place (torch's .addcdiv_ changes its tensor)")
  expect(torch_style_add_alpha, spec, mg.KernelTypeError, "w.add(", "a register tensor has no attribute 'add'",
         hint="write the operators: w + (-0.01) * g[...]")
  p, g, m = _rnd(256, 13), _rnd(256, 14), _rnd(256, 15)
  got = torch_style_followed(p, g, m, interpret=True)
  ma = m + np.float32(0.1) * (g - m)               # torch.optim's AdamW arithmetic, in jnp
  w = p + np.float32(-1e-3) * ma / (jnp.sqrt(g * g) + np.float32(1e-8))
  np.testing.assert_allclose(np.asarray(got[1]), ma, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(got[0]), w + np.float32(-0.01) * g, rtol=1e-6)


# ---------------------------------------------------------------- ml.fma with the call's operands
@mg.mgpu_kernel(out_shape=lambda p, g: p)
def fma_step(p, g, out):
  out[...] = ml.fma(g[...], -0.1, p[...])


def test_ml_fma_computes_with_the_calls_operands():
  """Its hint wrote `a * b + c`, placeholders for the kernel's own operands; since probe 50e ml.fma exists
  (rounded once)."""
  rng = np.random.default_rng(3)
  p, g = (rng.standard_normal(256).astype(np.float32) for _ in range(2))
  want = (g.astype(np.float64) * np.float64(np.float32(-0.1)) + p).astype(np.float32)
  np.testing.assert_array_equal(fma_step(jnp.asarray(p), jnp.asarray(g), interpret=True), want)


# ---------------------------------------------------------------- Pallas's def kernel(*refs) for a varying number of tensors
def test_a_kernel_of_star_refs_alone_is_hinted_the_flat_array_form():
  """`def multi_sgd(*refs)` (Pallas's kernels over any number of refs) was hinted as *residual_refs are:
  `def multi_sgd(out1, out2, ...)`, outputs only, with a note on residual outputs. (Since probe 53b a star
  parameter is the tuple of the refs, inputs then outputs: the kernel computes; the flat form still does.)"""
  def multi_sgd(*refs):
    n = len(refs) // 3
    for p, g, o in zip(refs[:n], refs[n:2 * n], refs[2 * n:]):
      o[...] = p[...] - 0.1 * g[...]

  k = mg.mgpu_kernel(out_shape=lambda *a: a[:1])(multi_sgd)
  p, g = (np.random.default_rng(s).standard_normal(128).astype(np.float32) for s in (0, 1))
  (got,) = k(p, g, interpret=True)
  np.testing.assert_allclose(got, p - np.float32(0.1) * g, rtol=1e-6)
  _star_refs_hint_followed()


@mg.mgpu_kernel(out_shape=lambda p, g, offs: p, grid=lambda p, g, offs: (offs.shape[0] - 1,), input_output_aliases={0: 0})
def flat_multi_tensor_sgd(p, g, offs, out):
  t = ml.program_id(0)
  start, end = offs[t], offs[t + 1]
  for c in range(start // 256, ml.cdiv(end, 256)):
    idx = c * 256 + ml.arange(256)
    m = (idx >= start) & (idx < end)
    w = p.at[ml.ds(c * 256, 256)].load(mask=m, other=0.0)
    out.at[ml.ds(c * 256, 256)].store(w - 0.1 * g.at[ml.ds(c * 256, 256)].load(mask=m, other=0.0), mask=m)


def _star_refs_hint_followed():
  ts, gs = [_rnd(n, 20 + n) for n in (700, 1200, 1100)], [_rnd(n, 30 + n) for n in (700, 1200, 1100)]
  offs = np.cumsum([0] + [t.size for t in ts]).astype(np.int32)
  got = flat_multi_tensor_sgd(jnp.concatenate(ts), jnp.concatenate(gs), offs, interpret=True)
  np.testing.assert_allclose(np.asarray(got), np.concatenate([t - np.float32(0.1) * g for t, g in zip(ts, gs)]),
                             rtol=1e-6)
  assert "mosaic_gpu" in _export(flat_multi_tensor_sgd, S((3000,), F32), S((3000,), F32), S((4,), jnp.int32)).lower()


# ---------------------------------------------------------------- a 3-D reduction over groups narrower than a warp
# Group quantisation with groups of 8 (`ml.max(ml.abs(g), axis=2)` of `g = v.reshape(r, n, 8)`) was MG204:
# the 2-D plan (r * n, 8) asked for 32 columns, where a 2-D tile of narrow rows reduces (2 lanes a row).
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, jnp.int8), S((x.shape[0], x.shape[1] // 8), F32)),
                grid=lambda x: (x.shape[0] // 64,))
def quantise_groups_of_eight(x, q, s):
  i = ml.program_id(0)
  g = x.at[ml.ds(i * 64, 64), :][...].reshape(64, x.shape[1] // 8, 8)
  m = ml.max(ml.abs(g), axis=2) / 127.0
  q.at[ml.ds(i * 64, 64), :][...] = ml.round(g / ml.maximum(m, 1e-12)[:, :, None]).reshape(64, x.shape[1]).astype(jnp.int8)
  s.at[ml.ds(i * 64, 64), :][...] = m


def _groups_of_eight_reference(x):
  g = x.reshape(x.shape[0], -1, 8)
  m = np.abs(g).max(2) * (np.float32(1) / np.float32(127.0))   # (jnp's / 127.0: XLA's product by 1/127, probe 53h)
  return np.round(g / np.maximum(m, np.float32(1e-12))[:, :, None]).reshape(x.shape).astype(np.int8), m


def test_a_3d_reduction_over_groups_narrower_than_a_warp_compiles_and_computes():
  x = _rnd((128, 128), 16)
  q, m = quantise_groups_of_eight(x, interpret=True)
  want_q, want_m = _groups_of_eight_reference(x)
  np.testing.assert_array_equal(np.asarray(m), want_m)
  assert np.abs(np.asarray(q, np.int32) - want_q).max() <= 1      # (the GPU's division: a tie may round apart)
  assert "mosaic_gpu" in _export(quantise_groups_of_eight, S(x.shape, F32)).lower()


@pytest.mark.gpu
def test_a_3d_reduction_over_groups_narrower_than_a_warp_on_the_gpu():
  x = _rnd((128, 128), 16)
  q, m = quantise_groups_of_eight(jnp.asarray(x))
  want_q, want_m = _groups_of_eight_reference(x)
  np.testing.assert_allclose(np.asarray(m), want_m, rtol=1e-6)      # (the GPU's float32 division: an ulp)
  assert np.abs(np.asarray(q, np.int32) - want_q).max() <= 1


# ---------------------------------------------------------------- a 3-D statistic kept (keepdims=True) of groups
# A softmax over groups of a row (`ml.softmax(v.reshape(r, n, c), axis=-1)`, a max and a sum kept as (r, n, 1))
# and a group mean subtracted were MG204, where the same reductions without keepdims compile; and the hint for
# ml.softmax of a 3-D tile it cannot plan wrote `ml.softmax(v2, axis=1, keepdims=True)`, a keyword it refuses.
@mg.mgpu_kernel(out_shape=lambda x, *, c: x, grid=lambda x, *, c: (x.shape[0] // 64,))
def group_softmax(x, out, *, c: ml.constexpr):
  i = ml.program_id(0)
  g = x.at[ml.ds(i * 64, 64), :][...].reshape(64, x.shape[1] // c, c)
  centred = g - ml.mean(g, axis=-1, keepdims=True)
  out.at[ml.ds(i * 64, 64), :][...] = (ml.softmax(g, axis=-1) + centred).reshape(64, x.shape[1])


def _group_softmax_reference(x, c):
  g = x.reshape(x.shape[0], -1, c)
  return (jax.nn.softmax(g, axis=-1) + g - g.mean(-1, keepdims=True)).reshape(x.shape)


@pytest.mark.parametrize("c", [8, 32])
def test_a_statistic_kept_over_groups_of_a_3d_tile_compiles_and_computes(c):
  x = _rnd((128, 128), 17)
  np.testing.assert_allclose(np.asarray(group_softmax(x, c=c, interpret=True)), _group_softmax_reference(x, c),
                             rtol=1e-5, atol=1e-6)
  assert "mosaic_gpu" in _export(group_softmax, S(x.shape, F32), c=c).lower()


@pytest.mark.gpu
@pytest.mark.parametrize("c", [8, 32])
def test_a_statistic_kept_over_groups_of_a_3d_tile_on_the_gpu(c):
  x = _rnd((128, 128), 17)
  np.testing.assert_allclose(np.asarray(group_softmax(jnp.asarray(x), c=c)), _group_softmax_reference(x, c),
                             rtol=1e-5, atol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x: x)
def softmax_of_few_rows_3d(x, out):
  out[...] = ml.softmax(x[...], axis=-1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def softmax_of_few_rows_3d_followed(x, out):
  out[...] = ml.softmax((x[...]).reshape(16, 128), axis=1).reshape(2, 8, 128)


def test_the_3d_softmax_of_few_rows_is_the_2d_one_reshaped():
  """Its hint wrote the 2-D softmax of the reshape; since probes 39a and 39e the compiler computes that itself."""
  x = _rnd((2, 8, 128), 18)
  got = np.asarray(softmax_of_few_rows_3d(x, interpret=True))
  np.testing.assert_allclose(got, jax.nn.softmax(x, -1), rtol=1e-5, atol=1e-7)
  np.testing.assert_array_equal(got, np.asarray(softmax_of_few_rows_3d_followed(x, interpret=True)))
