"""ml.exp2(x, approx=True, emulate=share): a share of the exponentials by a polynomial on the FMA units.

The emitted PTX is run here by a small interpreter of its instructions (float32 numpy, directed rounding
done by hand), so the test checks the instructions the GPU will run, not a model of them."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct


@mg.mgpu_kernel(out_shape=lambda x, **_: x)
def exp2_tile(x, out, *, share: ml.constexpr):
  out[...] = ml.exp2(x[...], approx=True, emulate=share)


@mg.mgpu_kernel(out_shape=lambda x: x)
def emulate_bad(x, out):
  out[...] = ml.exp2(x[...], approx=True, emulate=2)


@mg.mgpu_kernel(out_shape=lambda x: x)
def emulate_exact(x, out):
  out[...] = ml.exp2(x[...], emulate=0.5)


def _f32(x):
  return np.float32(x)


def _imm(s):
  if s.startswith("0f"):
    return np.uint32(int(s[2:], 16)).view(np.float32)
  return int(s)


def run_ptx(ptx: str, x: np.ndarray) -> np.ndarray:
  """Run the emitted block on each element of float32 `x` ($1 in, $0 out)."""
  body = [l.strip().rstrip(";") for l in ptx.splitlines() if l.strip() and not l.strip().startswith((".reg", "{", "}"))]
  out = np.empty_like(x)
  for n, v in enumerate(x):
    r = {"$1": np.float32(v)}
    get = lambda a: r[a] if a in r else _imm(a)
    for line in body:
      op, args = line.split(None, 1)
      d, *a = [s.strip() for s in args.split(",")]
      a = [get(s) for s in a]
      with np.errstate(all="ignore"):
        if op == "max.ftz.NaN.f32":
          r[d] = np.float32(np.nan) if np.isnan(a).any() else _f32(max(a))
        elif op == "min.ftz.NaN.f32":
          r[d] = np.float32(np.nan) if np.isnan(a).any() else _f32(min(a))
        elif op == "add.rm.ftz.f32":
          exact = np.float64(a[0]) + np.float64(a[1])
          near = _f32(exact)
          r[d] = np.nextafter(near, np.float32(-np.inf)) if np.float64(near) > exact else near
        elif op == "sub.ftz.f32":
          r[d] = _f32(a[0] - a[1])
        elif op == "fma.rn.ftz.f32":
          r[d] = _f32(np.float64(a[0]) * np.float64(a[1]) + np.float64(a[2]))
        elif op == "mul.ftz.f32":
          r[d] = _f32(a[0] * a[1])
        elif op == "mov.b32":
          src = a[0]
          r[d] = np.asarray(src).view(np.uint32 if np.asarray(src).dtype == np.float32 else np.float32)[()]
        elif op == "mad.lo.s32":
          r[d] = np.uint32((int(a[0]) * a[1] + a[2]) % 2**32)
        else:
          raise AssertionError(f"an instruction this test does not know: {line}")
    out[n] = r["$0"]
  return out


def test_the_polynomial_instructions_give_exp2_within_1e4():
  from mgpu_dsl.lowering.fast_math import EXP2_POLY_PTX
  x = np.concatenate([np.linspace(-126, 127.9, 4001), np.random.default_rng(0).uniform(-30, 30, 2000)])
  x = x.astype(np.float32)
  got = run_ptx(EXP2_POLY_PTX, x).astype(np.float64)
  want = np.exp2(x.astype(np.float64))
  assert np.max(np.abs(got / want - 1)) < 1e-4
  exact = np.arange(-126, 128, dtype=np.float32)            # integers: 2 ** n exactly
  np.testing.assert_array_equal(run_ptx(EXP2_POLY_PTX, exact), np.exp2(exact.astype(np.float64)).astype(np.float32))


def test_the_polynomial_keeps_ex2_approx_ftz_edges():
  from mgpu_dsl.lowering.fast_math import EXP2_POLY_PTX
  x = np.array([-np.inf, -1000, -150, -126.5, np.nan, 128, 1000, np.inf, 0.0, -0.0], np.float32)
  got = run_ptx(EXP2_POLY_PTX, x)
  np.testing.assert_array_equal(got[:4], 0.0)      # below 2 ** -126: zero, as .ftz flushes
  assert np.isnan(got[4])
  assert np.all(np.isposinf(got[5:8]))
  assert got[8] == 1.0 and got[9] == 1.0


def test_interpret_mode_is_the_approximate_exp2():
  x = jnp.linspace(-20, 20, 4096, dtype=jnp.float32).reshape(32, 128)
  got = exp2_tile(x, share=0.25, interpret=True)
  np.testing.assert_array_equal(got, exp2_tile(x, share=0, interpret=True))
  np.testing.assert_allclose(got, np.exp2(np.asarray(x, np.float64)), rtol=1e-6)


@pytest.mark.parametrize("share, poly, mufu", [(0, 0, 1), (1, 1, 0), (0.25, 1, 1)])
def test_the_share_of_registers_takes_the_polynomial(share, poly, mufu):
  text = exp2_tile.mlir(S((64, 128), jnp.float32), share=share)
  n_poly, n_mufu = text.count("add.rm.ftz.f32"), text.count("ex2.approx.ftz.f32")
  assert (n_poly > 0) == bool(poly) and (n_mufu > 0) == bool(mufu)
  if share == 0.25:
    assert n_poly * 3 == n_mufu                    # one register in four, spread evenly


def test_emulate_exports_for_cuda():
  f = jax.jit(lambda x: exp2_tile(x, share=0.5))
  text = jax.export.export(f, platforms=["cuda"])(S((128, 128), jnp.float32)).mlir_module()
  assert "mosaic_gpu" in text


def test_emulated_registers_are_spread_evenly():
  from mgpu_dsl.frontend.ops.fast_math import emulated_registers
  assert emulated_registers(8, 0.25) == [False, False, False, True] * 2
  assert sum(emulated_registers(64, 0.3)) == 19 and all(emulated_registers(5, 1.0))
  assert not any(emulated_registers(5, 0.0))


def test_emulate_out_of_range_is_located():
  expect(emulate_bad, [S((128,), jnp.float32)], mg.KernelTypeError, "ml.exp2(",
         "ml.exp2's emulate is the share of elements computed on the FMA units, a Python number from 0 to 1,"
         " got 2", hint="ml.exp2(x[...], approx=True, emulate=0.25) (a quarter by polynomial); 0 (the default)"
         " for none")


def test_emulate_needs_approx():
  e = expect(emulate_exact, [S((128,), jnp.float32)], mg.KernelTypeError, "ml.exp2(",
             "ml.exp2's emulate replaces the approximate instruction: it needs approx=True")
  assert re.search(r"approx=True, emulate=0\.5\)$", e.hint)


@pytest.mark.gpu
@pytest.mark.parametrize("share", [0.25, 0.5, 1.0])
def test_gpu_emulated_exp2_within_1e4(share):
  rng = np.random.default_rng(3)
  x = rng.uniform(-125, 127, (64, 128)).astype(np.float32)
  x[0, :8] = [-np.inf, -200, -126.5, np.nan, 128, np.inf, 0, -1]
  got = np.asarray(jax.jit(lambda a: exp2_tile(a, share=share))(jnp.asarray(x))).astype(np.float64)
  want = np.exp2(x.astype(np.float64))
  np.testing.assert_array_equal(got[0, :3], 0.0)
  assert np.isnan(got[0, 3]) and np.all(np.isposinf(got[0, 4:6])) and got[0, 6] == 1 and got[0, 7] == 0.5
  ok = np.isfinite(want) & (want > 2.0 ** -126)
  ok[0, :8] = False
  np.testing.assert_allclose(got[ok], want[ok], rtol=1e-4)
