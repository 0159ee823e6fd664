"""Probe 49d: kernels as JAX citizens, what probe 48d left. `jax.debug.print` and Pallas's `pl.debug_print` in a
kernel were MG003 (their hint wrote the print(f"...") they mean); a `with jax.named_scope(...)` (a profiler
annotation, `jax.ensure_compile_time_eval()`) around part of a kernel's body was MG001; `jnp.astype(x, dtype)` was
MG003; and under jax_enable_x64 an int64 NumPy or JAX scalar (`x + jnp.int64(5)`, `x * np.int64(3)`) met an integer
as an int32 (its value past int32 an MG003), where jnp computes in int64."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from locate import expect

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, I32, I64, BF16 = jnp.float32, jnp.int32, jnp.int64, jnp.bfloat16


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _exports(kernel, *specs):
  """Builds for CUDA (the real Mosaic GPU module, verified) as jax.export does."""
  return jax.export.export(jax.jit(lambda *a: kernel(*a)), platforms=["cuda"])(*specs).mlir_module()


def _lines(out):
  return [ln for ln in out.splitlines() if ln.startswith("[program")]


# ---------------------------------------------------------------- jax.debug.print and pl.debug_print
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def debug_printed(x, y):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64)][...]
  jax.debug.print("block {} max {m:.2f}", i, m=ml.max(v), ordered=True)
  pl.debug_print("sum={}", ml.sum(v))
  ml.debug_print("min={}", ml.min(v))          # (Pallas's name, as a port spelt with ml. writes it)
  jax.debug.print("no values")
  y.at[ml.ds(i * 64, 64)][...] = v * 2


def test_jax_debug_print_and_pl_debug_print_print_as_print(capsys):
  """Each program prints its lines, in its order, with the format's fields filled as an f-string's."""
  x = np.arange(192, dtype=np.float32)
  got = debug_printed(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), x * 2)
  want = []
  for i in range(3):
    p, v = f"[program ({i}, 0, 0)]", x[i * 64:(i + 1) * 64]
    want += [f"{p} block {i} max {v.max():.2f}", f"{p} sum={np.float32(v.sum())}", f"{p} min={v.min()}",
             f"{p} no values"]
  assert _lines(capsys.readouterr().out) == want
  spec = S((192,), F32)
  assert "gpu.printf" in debug_printed.mlir(spec)
  assert "mosaic_gpu" in _exports(debug_printed, spec)


FMT = "pid {}"


@mg.mgpu_kernel(out_shape=lambda x: x)
def debug_print_named_format(x, y):
  jax.debug.print(FMT, ml.program_id(0))
  y[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def debug_print_too_few(x, y):
  v = x[...]
  jax.debug.print("{} and {}", ml.sum(v))
  y[...] = v


@mg.mgpu_kernel(out_shape=lambda x: x)
def debug_print_run_time_format(x, y):
  v = x[...]
  pl.debug_print(v, v)
  y[...] = v


def test_debug_print_format_from_a_name_and_its_mistakes(capsys):
  x = np.arange(64, dtype=np.float32)
  debug_print_named_format(x, interpret=True)
  assert _lines(capsys.readouterr().out) == ["[program (0, 0, 0)] pid 0"]
  spec = [S((64,), F32)]
  expect(debug_print_too_few, spec, mg.KernelTypeError, "jax.debug.print(",
         "jax.debug.print's format '{} and {}' is not one a kernel reads with these arguments",
         hint='fields "{}", "{0}" or "{name}" with a spec ("{:.3f}"), one per argument: or write print(f"...") with'
              ' the values in the f-string')
  expect(debug_print_run_time_format, spec, mg.KernelTypeError, "v, v)",
         "pl.debug_print takes a format string first, got a register tensor",
         hint='pl.debug_print("i={} x={}", i, x), or print(...) with values and f-strings')


# ---------------------------------------------------------------- jax.debug.breakpoint and callbacks
@mg.mgpu_kernel(out_shape=lambda x: x)
def debug_stops(x, y):
  acc = x[...] * 3
  jax.debug.breakpoint(num_frames=1)
  y[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: x)
def calls_back(x, y):
  v = x[...]
  jax.debug.callback(print, v)
  y[...] = v


@mg.mgpu_kernel(out_shape=lambda x: x)
def traced_flag(x, y):
  v = x[...]
  jax.debug.print("{}", v, ordered=v[0] > 0)
  y[...] = v


def test_jax_debug_breakpoint_is_breakpoint_and_callbacks_say_why_not(monkeypatch):
  """jax.debug.breakpoint() ran while tracing (a check or a CUDA export stopped in JAX's debugger, reading stdin);
  it is breakpoint(): interpret mode stops with the kernel's values, the GPU's build ignores it."""
  from mgpu_dsl.lowering import interpret as interp
  seen = []
  monkeypatch.setattr(interp, "open_debugger", lambda values, where: seen.append(values))
  x = np.arange(64, dtype=np.float32)
  np.testing.assert_array_equal(np.asarray(debug_stops(x, interpret=True)), x * 3)
  (values,), = [seen]
  np.testing.assert_array_equal(values["acc"], x * 3)
  assert "mosaic_gpu" in _exports(debug_stops, S((64,), F32))
  spec = [S((64,), F32)]
  expect(calls_back, spec, mg.KernelTypeError, "jax.debug.callback(",
         "jax.debug.callback cannot run inside a kernel: the kernel runs on the GPU, where there is no Python to call"
         " back", hint='print the values, print(f"v={v}") or jax.debug.print("v={}", v) (on the GPU and in interpret'
                       ' mode); stop at breakpoint() in interpret mode; or call back outside the kernel, on its outputs')
  expect(traced_flag, spec, mg.KernelTypeError, "v[0] > 0", "jax.debug.print's ordered= must be static, got a scalar",
         hint="leave it out: jax.debug.print's flags choose how JAX orders its callbacks, which a kernel has none of")


# ---------------------------------------------------------------- with jax.named_scope(...) in a kernel
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def scoped(x, y):
  r = ml.ds(ml.program_id(0) * 64, 64)
  with jax.named_scope("load"):
    v = x.at[r][...]
  with jax.named_scope("compute"), jax.profiler.TraceAnnotation("step"):
    w = v * 2
    if ml.program_id(0) == 1:
      w = w + 1
  with jax.ensure_compile_time_eval():
    c = 3.0
  for i in range(4):
    with jax.named_scope(f"round{i}"):      # (a run-time loop's index in the scope's name)
      w = w + c
      if i == 1:                            # (a break under the scope: was MG001 "break in a pipelined loop")
        break
  y.at[r][...] = w


@mg.mgpu_kernel(out_shape=lambda x: x)
def scoped_typo(x, y):
  with jax.named_scope(nmae):     # noqa: F821
    y[...] = x[...]


def test_named_scopes_around_part_of_a_kernel_trace_their_bodies():
  x = np.random.default_rng(0).standard_normal(192).astype(np.float32)
  want = x * 2 + np.where(np.arange(192) // 64 == 1, 1, 0) + 6
  np.testing.assert_allclose(np.asarray(scoped(x, interpret=True)), want, rtol=1e-6)
  assert "mosaic_gpu" in _exports(scoped, S((192,), F32))
  expect(scoped_typo, [S((64,), F32)], mg.UnknownNameError, "nmae", "name 'nmae' is not defined")


# ---------------------------------------------------------------- helpers under @jax.jit, named_call, checkpoint
@jax.jit
def jitted_act(v):
  return jnp.tanh(v) * 2


@jax.named_call
def named_shift(v):
  return v + 1


@jax.jit
def fori_body(i, acc):
  return acc + i


@jax.jit
def jitted_typo(v):
  return v.nonexistent()


@mg.mgpu_kernel(out_shape=lambda x: x)
def jax_helpers(x, o):
  @functools.partial(jax.jit, static_argnames="k")
  def scale(v, k):
    return v * k

  @jax.checkpoint
  def wave(v):
    return jnp.sin(v)

  v = x[...]
  o[...] = named_shift(scale(jitted_act(v), k=3.0)) + wave(v) + jax.lax.fori_loop(0, 4, fori_body, v)


@mg.mgpu_kernel(out_shape=lambda x: x)
def jitted_mistake(x, o):
  o[...] = jitted_typo(x[...])


mapped_square = jax.jit(jax.vmap(lambda r: r * r))


@mg.mgpu_kernel(out_shape=lambda x: x)
def vmapped_helper(x, o):
  o[...] = mapped_square(x[...])


def test_helpers_under_jax_transformations_are_inline_helpers():
  """A helper decorated with @jax.jit, @jax.named_call or @jax.checkpoint (at module level or in the body) was MG003
  ("cannot take a register tensor inside a kernel") or MG001 ("a nested function"); it is the function it wraps,
  traced into the kernel as an @ml.inline helper (a mistake in it reported at its own line)."""
  x = np.linspace(-1, 1, 128).astype(np.float32)
  got = np.asarray(jax_helpers(x, interpret=True))
  np.testing.assert_allclose(got, np.tanh(x) * 6 + 1 + np.sin(x) + x + 6, rtol=1e-5, atol=1e-6)
  assert "mosaic_gpu" in _exports(jax_helpers, S((128,), F32))
  with pytest.raises(mg.KernelTypeError) as info:
    jitted_mistake.check(S((128,), F32))
  e = info.value
  assert e.message == "a register tensor has no attribute 'nonexistent'" and e.hint
  assert (e.lineno, e.col_offset) == (jitted_typo.__wrapped__.__code__.co_firstlineno + 2, 9)    # the helper's line
  # (jax.vmap's and jax.grad's wrappers compute another function of the same arguments: not unwrapped)
  expect(vmapped_helper, [S((8, 128), F32)], mg.KernelTypeError, "mapped_square(",
         "<lambda> cannot take a register tensor inside a kernel")


# ---------------------------------------------------------------- jnp.astype
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, BF16))
def array_api_astype(x, y):
  y[...] = jnp.astype(x[...] * 2, jnp.bfloat16, copy=False)


def test_jnp_astype_is_the_method():
  x = np.random.default_rng(1).standard_normal((8, 128)).astype(np.float32)
  got = np.asarray(array_api_astype(x, interpret=True))
  np.testing.assert_array_equal(got, np.asarray(jnp.astype(x * 2, BF16)))


# ---------------------------------------------------------------- int64 scalars under jax_enable_x64
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, I64),) * 5)
def int64_scalars(x, a, b, c, d, e):
  v = x[...]
  a[...] = v + jnp.int64(2 ** 40)                      # past int32: was MG003
  b[...] = v * np.int64(3)                             # int64 in jnp: was int32 (MG102 at the store)
  c[...] = jnp.where(v > 0, v, jnp.int64(-1)) << 33
  d[...] = v.astype(jnp.uint32) + jnp.int64(1)         # uint32 with int64: int64
  e[...] = (v > 0) + np.int64(2 ** 35)                   # a bool with int64: int64


@mg.mgpu_kernel(out_shape=lambda x: S((4,), I64), grid=lambda x: (4,))
def int64_scalar_offsets(x, o):
  pid = ml.program_id(0)
  o[pid] = jnp.maximum(x[pid], jnp.int64(0)) * np.int64(2 ** 33) + pid


@mg.mgpu_kernel(out_shape=lambda x: x)
def int64_into_int32(x, o):
  o[...] = x[...] + jnp.int64(5)


@pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64")
def test_int64_scalars_promote_as_jnp_under_x64():
  x = np.arange(64, dtype=np.int32) - 5
  x4 = np.array([3, -2, 7, 0], np.int32)
  with jax.enable_x64(True):
    got = int64_scalars(x, interpret=True)
    want = [jnp.asarray(x) + jnp.int64(2 ** 40), jnp.asarray(x) * np.int64(3),
            jnp.where(x > 0, jnp.asarray(x), jnp.int64(-1)) << 33, jnp.asarray(x).astype(jnp.uint32) + jnp.int64(1),
            (jnp.asarray(x) > 0) + np.int64(2 ** 35)]
    for g, w in zip(got, want):
      assert g.dtype == w.dtype == I64
      np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    got = int64_scalar_offsets(x4, interpret=True)
    np.testing.assert_array_equal(np.asarray(got), np.maximum(x4, 0).astype(np.int64) * 2 ** 33 + np.arange(4))
    assert "mosaic_gpu" in _exports(int64_scalars, S((64,), I32))
    assert "mosaic_gpu" in _exports(int64_scalar_offsets, S((4,), I32))
    expect(int64_into_int32, [S((64,), I32)], mg.StoreDtypeError, "o[...]",
           "cannot store x[...] + jnp.int64(5) (int64) into o (GMEM, int32): no implicit conversion",
           hint="convert explicitly: o[...] = (x[...] + jnp.int64(5)).astype(jnp.int32)")
  np.testing.assert_array_equal(np.asarray(int64_into_int32(x, interpret=True)), x + 5)   # (x64 off: int32)


B40 = 2 ** 40


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, I64), S(x.shape, I64), S(x.shape, I64)))
def int64_builders(x, a, b, c):
  v = x[...]
  a[...] = jnp.arange(B40, B40 + 128, 2, dtype=jnp.int64) + v      # a start past int32: was MG003
  b[...] = jnp.arange(-B40 + 64, -B40, -1, dtype="int64")
  c[...] = jnp.array(v, dtype=jnp.int64) * B40                       # (jnp.array of a register value: was MG003)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I64))
def int64_scan(x, o):
  o[...] = jnp.cumsum(x[...].astype(jnp.int64) * 2 ** 31)


def test_int64_aranges_and_arrays_under_x64():
  x = np.arange(64, dtype=np.int32) - 5
  with jax.enable_x64(True):
    got = int64_builders(x, interpret=True)
    want = [np.arange(B40, B40 + 128, 2, dtype=np.int64) + x, np.arange(-B40 + 64, -B40, -1, dtype=np.int64),
            x.astype(np.int64) * B40]
    for g, w in zip(got, want):
      assert g.dtype == I64
      np.testing.assert_array_equal(np.asarray(g), w)
    assert "mosaic_gpu" in _exports(int64_builders, S((64,), I32))
    # (an int64 scan was MG106, hinting a scan in int32; it computes since probe 51b)
    got = int64_scan(x, interpret=True)
    assert got.dtype == I64
    np.testing.assert_array_equal(got, np.cumsum(x.astype(np.int64) * 2 ** 31))
    assert "mosaic_gpu" in _exports(int64_scan, S((64,), I32))


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_debug_prints_scopes_and_int64_scalars(capfd):
  x = np.arange(192, dtype=np.float32)
  np.testing.assert_array_equal(np.asarray(jax.block_until_ready(debug_printed(x))), x * 2)
  out = capfd.readouterr().out
  assert "block 0 max 63.00" in out and "no values" in out
  y = np.random.default_rng(2).standard_normal(192).astype(np.float32)
  np.testing.assert_allclose(np.asarray(scoped(y)), np.asarray(scoped(y, interpret=True)), rtol=1e-6)
  h = np.linspace(-1, 1, 128).astype(np.float32)
  np.testing.assert_allclose(np.asarray(jax_helpers(h)), np.asarray(jax_helpers(h, interpret=True)), rtol=1e-5,
                             atol=1e-5)
  xi = np.arange(64, dtype=np.int32) - 5
  with jax.enable_x64(True):
    for g, w in zip(int64_scalars(xi), int64_scalars(xi, interpret=True)):
      np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    x4 = np.array([3, -2, 7, 0], np.int32)
    np.testing.assert_array_equal(np.asarray(int64_scalar_offsets(x4)),
                                  np.asarray(int64_scalar_offsets(x4, interpret=True)))
    for g, w in zip(int64_builders(xi), int64_builders(xi, interpret=True)):
      np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
