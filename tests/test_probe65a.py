"""Probe 65a: jnp's promotion through chains of ops, weak types included (tests/promotion_chains.py).

Each case is a chain the generator found computing another dtype than jnp's (an MG011 at the kernel's own assert,
or a value that was not jnp's) before the fixes: the kernel runs in interpret mode and its dtype and values are
compared with the same statements evaluated eagerly by jnp; a few are built for CUDA (jax.export), and GPU twins run
them on Hopper.
"""
from __future__ import annotations

import importlib.util
import itertools
import os
import re
import sys
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

sys.path.insert(0, os.path.dirname(__file__))
import diff_fuzz  # noqa: E402


N = 128

# (id, consumer dtypes t0, t1 (None: unused), statements; `r` is stored). m is a bool tensor.
CASES = [
    # a weakly typed value meeting a NumPy or JAX scalar takes its dtype (was int32 / float32)
    ("weak_floordiv_np_int16", ("int16", None), ["w = jnp.where(m, 1, 2)", "r = w // np.int16(3) + t0"]),
    ("weak_times_jnp_bf16", ("bfloat16", None), ["w = jnp.where(m, 1.5, 0.5)", "v = w * jnp.bfloat16(1.5)", "r = v + t0"]),
    ("weak_scalar_minus_np_f16", ("float16", None), ["w = jnp.where(m, 2.0, 1.0)", "r = (w - jnp.float16(0.5)) * t0"]),
    # a select of a typed scalar and a Python number: the typed scalar's dtype, or a weak float (was int32 / float32)
    ("select_int8_number", ("int8", None), ["s = jnp.where(m, jnp.int8(3), 2)", "r = s + t0"]),
    ("select_number_uint8", ("uint8", None), ["s = ml.where(m, -3, np.uint8(4))", "r = s * t0"]),
    ("select_f16_bool", ("float16", None), ["s = jnp.where(m, jnp.float16(1.5), True)", "r = s - t0"]),
    ("select_float_uint32_weak", ("float16", None), ["s = jnp.where(m, 1.5, jnp.uint32(6))", "r = s * jnp.zeros((), jnp.bfloat16) + t0"]),
    # a weak float meeting a strong integer stays weak (was float32 with the next float16)
    ("weak_float_plus_u8", ("uint8", "float16"), ["v = jnp.where(m, 1.5, 0.5) + t0", "r = v * t1"]),
    # NumPy scalar arithmetic in the scalar's dtype, wrapping (was the Python int 343, weak)
    ("np_uint8_power_wraps", ("int8", None), ["c = np.uint8(7) ** 3", "r = c / t0"]),
    ("np_int16_times_number", ("uint8", None), ["c = np.int16(-4) * 3", "r = c + t0"]),
    ("np_int32_negated", ("uint8", None), ["c = -np.int32(5)", "r = c - t0"]),
    # jnp functions of static scalars: the NumPy/JAX scalar's dtype, a weak result weak (were int32 / strong float32)
    ("jnp_sign_np_uint8", ("int8", None), ["c = jnp.sign(np.uint8(7))", "r = c + t0"]),
    ("jnp_square_jnp_bf16", ("float16", None), ["c = jnp.square(jnp.bfloat16(1.5))", "r = c * t0"]),
    ("jnp_sqrt_number_weak", ("bfloat16", None), ["r = jnp.sqrt(2.0) * t0"]),
    # loop results of a weak carry stay weak (were strong)
    ("for_float_carry", ("float16", None), ["acc = 0.0", "for j in range(3):", "  acc = acc * 0.5 + 1",
                                            "r = acc + t0"]),
    ("for_weak_tensor_carry", ("float16", None), ["acc = jnp.where(m, 0.0, 1.0)", "for j in range(3):",
                                                  "  acc = acc * 0.5 + m", "r = acc - t0"]),
    ("fori_weak_full", ("bfloat16", None), ["acc = lax.fori_loop(0, 3, lambda k, a: a * 0.5, ml.full((128,), 2.0))",
                                            "r = acc * t0"]),
    ("fori_weak_int", ("int8", None), ["acc = lax.fori_loop(0, 3, lambda k, a: a + m, jnp.where(m, 0, 1))",
                                       "r = ml.minimum(acc, t0)"]),
    ("while_float_carry", ("float16", None), ["acc = 1.0", "k = 0", "while k < 3:", "  acc = acc * 0.5", "  k += 1",
                                              "r = acc * t0"]),
    # *_like of a weak value is weak (was strong)
    ("zeros_like_weak", ("int16", None), ["z = jnp.zeros_like(jnp.where(m, 1, 2))", "r = z + 1 + t0"]),
    ("ones_like_weak", ("bfloat16", None), ["o = jnp.ones_like(jnp.where(m, 1.5, 0.5))", "r = o * t0"]),
    # a reduction of a weak scalar is strong; a strong result computed through a weak step is strong (were weak)
    ("sum_of_weak_scalar", ("bfloat16", None), ["acc = 0.0", "for j in range(3):", "  acc = acc * 0.5 + 1",
                                                "r = jnp.sum(acc) * t0"]),
    ("weak_over_np_f32", ("bfloat16", None), ["r = jnp.where(m, 1.5, 0.5) / np.float32(2) + t0"]),
    # ** with a NumPy or JAX scalar, and jnp's weak types through ** (were float32 / uint8 / strong)
    ("int_pow_jnp_bf16", ("int32", None), ["r = jnp.abs(t0) ** jnp.bfloat16(1.5)"]),
    ("np_int16_pow_u8", ("uint8", None), ["c = np.int16(-2) + 1", "r = c ** (t0 % 4)"]),
    ("int_pow_float_weak", ("int16", "float16"), ["v = (jnp.abs(t0) + 1) ** -1.5", "r = v * t1"]),
    ("bool_pow_int_strong", ("int8", None), ["r = m ** 2 + t0"]),
    ("weak_pow_int16_strong", ("int16", "bfloat16"), ["r = jnp.where(m, 1.5, 0.5) ** (t0 % 3) + t1"]),
]


class _Case:
  """A kernel of `lines` reading m (bool) and t0/t1, storing r; its reference the same lines run by jnp."""
  _count = itertools.count()

  def __init__(self, dtypes, lines, seed=0):
    rng = np.random.default_rng(seed)
    ns = {"jnp": jnp, "jax": jax, "lax": lax, "np": np}
    ins = {"m": jnp.asarray(rng.random(N) < 0.5)}
    for k, dt in enumerate(dtypes):
      if dt is None:
        continue
      if dt in ("float16", "bfloat16", "float32"):
        a = rng.standard_normal(N).astype(np.float32) * 3
        a = np.where(np.abs(a) < 0.25, 0.5, a)
      else:
        info = np.iinfo(dt)
        a = rng.integers(max(info.min, -20), min(info.max, 40) + 1, N)
        a = np.where(a == 0, 1, a)
      ins[f"t{k}"] = jnp.asarray(a, jnp.dtype(dt))
    ns.update(ins)
    exec("\n".join(ln.replace("ml.", "jnp.") for ln in lines), ns)
    self.ref = ns["r"]
    self.args = list(ins.values())
    loads = [f"  {n} = {n}_ref[...]" for n in ins]
    checks = []
    for n in dict.fromkeys(re.findall(r"^(\w+) = ", "\n".join(lines), re.M)):
      v = ns[n]
      if not isinstance(v, jax.Array):
        continue
      checks.append(f"  assert {n}.dtype == jnp.{v.dtype.name}, f'{n}: jnp {v.dtype.name}, got {{{n}.dtype}}'")
      if v.dtype.name in ("int32", "float32"):       # its weak type: what a narrow 0-d value makes of it
        narrow = "int8" if v.dtype.name == "int32" else "bfloat16"
        want = (v + jnp.zeros((), jnp.dtype(narrow))).dtype.name
        checks.append(f"  assert ({n} + jnp.zeros((), jnp.{narrow})).dtype == jnp.{want}, '{n}: weak as in jnp'")
    self.source = diff_fuzz.HEADER + (
        f"\n\n@mg.mgpu_kernel(out_shape=lambda *a: S({tuple(self.ref.shape)}, jnp.{self.ref.dtype.name}))\n"
        f"def kernel({', '.join(n + '_ref' for n in ins)}, o_ref):\n" + "\n".join(loads) + "\n"
        + "\n".join("  " + ln for ln in lines) + "\n" + "\n".join(checks)
        + f"\n  assert r.dtype == jnp.{self.ref.dtype.name}, f'jnp: {self.ref.dtype.name}, got {{r.dtype}}'\n"
        + "  o_ref[...] = r\n")

  def kernel(self):
    d = tempfile.mkdtemp(prefix="probe65a_")
    name = f"probe65a_case_{next(self._count)}"
    path = os.path.join(d, name + ".py")
    with open(path, "w") as f:
      f.write(self.source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.kernel


@pytest.mark.parametrize("dtypes,lines", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_chain_as_jnp_interpret(dtypes, lines):
  case = _Case(dtypes, lines)
  got = case.kernel()(*case.args, interpret=True)
  assert got.dtype == case.ref.dtype
  assert diff_fuzz.compare(got, case.ref) is None, diff_fuzz.compare(got, case.ref)


EXPORTED = ["weak_times_jnp_bf16", "select_int8_number", "for_float_carry", "fori_weak_full", "zeros_like_weak",
            "int_pow_jnp_bf16", "np_uint8_power_wraps"]


@pytest.mark.parametrize("name", EXPORTED)
def test_chain_exports_for_cuda(name):
  dtypes, lines = next(c[1:] for c in CASES if c[0] == name)
  case = _Case(dtypes, lines)
  specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in case.args]
  exp = jax.export.export(jax.jit(case.kernel()), platforms=["cuda"])(*specs)
  assert exp.out_avals[0].dtype == case.ref.dtype
  assert "mosaic_gpu" in exp.mlir_module()


def test_generator_chains_agree_with_jnp():
  """A slice of the generator's chains (seeds the fixes changed): all ok in interpret mode."""
  import promotion_chains as pc
  bad = []
  for seed in (0, 5, 12, 16, 82, 103, 136, 142, 196, 544, 650, 921, 1369, 1446):
    c = pc.Chain(seed, weak_probe=True)
    if c.dead:
      continue
    cls, detail = pc.run(c)
    if cls != "ok" and "ml.scalar" not in c.tags:
      bad.append((seed, cls, detail))
  assert not bad, bad


GPU = ["weak_times_jnp_bf16", "select_float_uint32_weak", "for_weak_tensor_carry", "fori_weak_int", "ones_like_weak",
       "int_pow_float_weak"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU)
def test_chain_as_jnp_gpu(name):
  dtypes, lines = next(c[1:] for c in CASES if c[0] == name)
  case = _Case(dtypes, lines)
  got = case.kernel()(*case.args)
  assert got.dtype == case.ref.dtype
  assert diff_fuzz.compare(got, case.ref) is None, diff_fuzz.compare(got, case.ref)
