"""Probe 70b (floating-point-exact and numerically careful kernels: compensated sums, error-free transformations,
double-float arithmetic, Welford / Chan merges, online softmax and logsumexp merges with masked rows, stable forms,
polynomials, range reduction, signed zeros, NaN, subnormals, conversions at the edges, bit-level rounding): the corpus
(tests/probe70b_sums.py, probe70b_stable.py, probe70b_edges.py, probe70b_bits.py, probe70b_scalars.py,
probe70b_triton.py), each kernel checked in interpret
mode against its reference and exported for CUDA; the classes fixed (design note 231): float products contracted into
the adds they feed on the GPU (Mosaic GPU's `fastmath<contract>`), and ml.sqrt compiled to the approximate
sqrt.approx.f32; Triton's libdevice names of exact arithmetic (add_rn, mul_rn, fma_rn, nextafter, hypot, copysign,
signbit, scalbn) refused as misspellings."""
import os
import re
import subprocess
import sys
import textwrap
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
import probe70b_bits
import probe70b_edges
import probe70b_scalars
import probe70b_stable
import probe70b_sums
import probe70b_triton

S = jax.ShapeDtypeStruct
F16, F32 = jnp.float16, jnp.float32
CASES = {**probe70b_sums.CASES, **probe70b_stable.CASES, **probe70b_edges.CASES, **probe70b_bits.CASES,
         **probe70b_scalars.CASES, **probe70b_triton.CASES}


def _compare(name, got, want, tol):
  """tol 0: equal bit for bit but for NaN's payload (signed zeros compared); else within `tol` of the reference's
  largest finite magnitude, NaN where the reference is NaN and infinities equal."""
  got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
  assert len(got) == len(want), name
  for g, w in zip(got, want):
    g, w = np.asarray(g), np.asarray(w)
    assert g.shape == w.shape, (name, g.shape, w.shape)
    g, w = g.astype(np.float64), w.astype(np.float64)
    if tol == 0:
      same = ((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w))
      assert same.all(), (name, np.argwhere(~same)[:5].tolist(), g[~same][:5], w[~same][:5])
      continue
    scale = float(np.max(np.abs(np.where(np.isfinite(w), w, 0)), initial=0))
    np.testing.assert_allclose(g, w, rtol=0, atol=tol * max(1e-30, scale), equal_nan=True, err_msg=name)


def _specs(args):
  return [S(np.shape(a), a.dtype) for a in args]


def _quiet(run):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.KernelWarning)
    with np.errstate(all="ignore"):
      return run()


def _line_of(text, path=__file__):
  with open(path) as f:
    return next(n for n, line in enumerate(f, 1) if text in line)


def test_corpus_size():
  assert len(CASES) >= 60, len(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_matches_its_reference_and_builds(name):
  """Each kernel against its reference in interpret mode (bit for bit where tol is 0), then built for CUDA."""
  kernel, make, ref, tol = CASES[name]
  args, kw = make(0)
  _compare(name, _quiet(lambda: kernel(*args, **kw, interpret=True)), _quiet(lambda: ref(*args, **kw)), tol)
  _quiet(lambda: jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*_specs(args)).mlir_module())


# The GPU twins: the error-free transformations and replayed float32 algorithms bit for bit (no contraction, a
# correctly rounded sqrt), the rest within their tolerance or a few ulp where libdevice's functions or the GPU's
# division (div.full, documented) are on the path.
GPU_EXACT = ["two_sum", "fast_two_sum", "two_prod_fma", "two_prod_dekker", "veltkamp_split", "df_add", "df_mul",
             "dot2_columns", "kahan_columns", "neumaier_columns", "klein_columns", "df_accumulate",
             "pairwise_tree_rows", "horner_rounded_steps", "horner_fma_steps", "estrin_rounded_steps", "polyval_jnp",
             "cody_waite_reduce", "exact_integer_sums_f32", "min_max_signed_zeros_nan", "abs_copysign_signbit",
             "float_to_int_saturating", "int_to_float_rounding", "narrowing_casts_f16_bf16_fp8",
             "sort_argsort_nan_signed_zeros", "subnormals_kept_and_flushed", "sqrt_correctly_rounded",
             "eft_libdevice_rn_names", "interval_sum_nextafter", "scalar_eft_two_sum_two_prod_split",
             "kahan_scalar_of_elements", "scalar_casts_at_edges", "fma_rounded_once_at_halfway_points",
             "no_algebraic_folding"]
GPU_CLOSE = ["online_softmax_chunks_masked_rows", "split_k_combine_masked_splits", "welford_columns",
             "chan_merge_of_block_partials", "nan_through_reductions_and_argmax", "log1p_expm1_small",
             "sin_cos_large_args", "stochastic_round_bf16_given_bits"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_EXACT + GPU_CLOSE)
def test_gpu_corpus_matches_its_reference(name):
  kernel, make, ref, tol = CASES[name]
  args, kw = make(1)
  got = _quiet(lambda: jax.jit(lambda *a: kernel(*a, **kw))(*args))
  _compare(name, got, _quiet(lambda: ref(*args, **kw)), 0 if name in GPU_EXACT else max(tol, 4e-6))


# ---------------------------------------------------------------- class 1: no contraction of the kernel's arithmetic
def _float_ops(text):
  return re.findall(r"arith\.(?:mulf|addf|subf) [^\n]*", text)


@pytest.mark.parametrize("name", ["two_prod_dekker", "veltkamp_split", "horner_rounded_steps", "estrin_rounded_steps",
                                  "cody_waite_reduce", "bf16_per_op_rounding"])
def test_float_sums_and_products_are_rounded_apart_in_the_export(name):
  """Mosaic GPU's FragmentedArray operators mark +, - and * `fastmath<contract>`, and LLVM then fused a product into
  the add or subtraction it feeds (fma.rn.f32, the product unrounded): Dekker's split `t - (t - a)` of `t = 4097 * a`
  gave `a` on the GPU, Horner's, Estrin's and Cody-Waite's steps other bits than interpret mode and NumPy. The
  kernel's arithmetic carries no fastmath flag now (LLVM's NVPTX backend then emits mul.rn / add.rn, which ptxas does
  not contract either)."""
  kernel, make, _, _ = CASES[name]
  args, kw = make(0)
  text = str(kernel.mlir(*_specs(args), **kw))
  ops = _float_ops(text)
  assert ops and not [o for o in ops if "contract" in o], [o for o in ops if "contract" in o][:3]


@mg.mgpu_kernel(out_shape=lambda a, b, c: a)
def axpy_rows(a, b, c, o):
  o[...] = a[...] * b[...] + c[...] - a[...] * b[...]


def test_a_times_b_plus_c_minus_a_times_b_is_c_rounded_in_both_modes():
  """`a * b + c - a * b`: interpret mode rounds each step (NumPy's and eager jnp's numbers); the export now asks
  for the same steps, so the GPU no longer returns the products' rounding errors."""
  r = np.random.default_rng(0)
  a, b, c = (r.standard_normal((8, 128)).astype(np.float32) for _ in range(3))
  want = (a * b + c) - a * b
  np.testing.assert_array_equal(np.asarray(axpy_rows(a, b, c, interpret=True)), want)
  ops = _float_ops(str(axpy_rows.mlir(*_specs((a, b, c)))))
  assert len(ops) >= 4 and not [o for o in ops if "contract" in o]


@pytest.mark.gpu
def test_gpu_a_times_b_plus_c_minus_a_times_b():
  r = np.random.default_rng(1)
  a, b, c = (r.standard_normal((8, 128)).astype(np.float32) for _ in range(3))
  np.testing.assert_array_equal(np.asarray(jax.jit(axpy_rows)(a, b, c)), (a * b + c) - a * b)


# ---------------------------------------------------------------- class 2: ml.sqrt correctly rounded
def test_sqrt_is_compiled_to_the_correctly_rounded_instruction():
  """ml.sqrt (and x ** 0.5, jnp.sqrt) was math.sqrt, which Mosaic GPU links to libdevice's __nv_sqrtf; its
  __CUDA_PREC_SQRT reflection is 0 there, so the PTX was sqrt.approx.f32 (a last bit off NumPy's and jnp's root in
  about a fifth of the values). Tensors, scalars and 16-bit floats (widened, rounded once) are sqrt.rn.f32 now."""
  kernel, make, _, _ = CASES["sqrt_correctly_rounded"]
  args, _ = make(0)
  text = str(kernel.mlir(*_specs(args)))
  assert "sqrt.rn.f32" in text and "math.sqrt" not in text

  @mg.mgpu_kernel(out_shape=lambda x: (S((), F32), S((), F16)), grid=(1,))
  def scalar_roots(x, o, h):
    o[...] = ml.sqrt(ml.sum(x[...]))
    h[...] = ml.sqrt(ml.sum(x[...]).astype(F16))
  x = np.arange(1024, dtype=np.float32).reshape(8, 128) * 0.37
  got = scalar_roots(x, interpret=True)
  s = np.float32(np.sum(x.astype(np.float64)))
  np.testing.assert_allclose(np.asarray(got[0]), np.sqrt(s), rtol=1e-6)
  text = str(scalar_roots.mlir(S(x.shape, F32)))
  assert text.count("sqrt.rn.f32") == 2 and "math.sqrt" not in text


PTX_SCRIPT = textwrap.dedent("""
  import mgpu_dsl as mg
  import jax, jax.numpy as jnp
  from mgpu_dsl import language as ml
  S = jax.ShapeDtypeStruct

  @mg.mgpu_kernel(out_shape=lambda a, b, c: (a, a, a))
  def k(a, b, c, o1, o2, o3):
    x, y = a[...], b[...]
    o1[...] = x * y + c[...]
    t = x * 4097.0
    o2[...] = t - (t - x)
    o3[...] = ml.sqrt(x)
  mg.ptxas_info(k, *[S((8, 128), jnp.float32)] * 3)
""")


def test_the_ptx_has_no_fused_multiply_add_and_no_approximate_sqrt(tmp_path):
  """With JAX's CUDA plugin (a deviceless compile, docs/tooling.md), the PTX itself: mul.rn / add.rn / sub.rn, no
  fma.rn.f32 and no sqrt.approx.f32 (before: `x * y + c` and Dekker's `t - x` were fma.rn.f32, ml.sqrt
  sqrt.approx.f32)."""
  pytest.importorskip("jax_plugins.xla_cuda12")
  env = {**os.environ, "MOSAIC_GPU_DUMP_PTX": "1", "MOSAIC_GPU_DUMP_TO": str(tmp_path), "MGPU_DSL_CACHE_DIR": "off"}
  script = tmp_path / "ptx_kernels.py"               # (a file: the kernel's source is read from it)
  script.write_text(PTX_SCRIPT)
  subprocess.run([sys.executable, str(script)], env=env, check=True, capture_output=True, timeout=600)
  ptx = "".join(p.read_text() for p in tmp_path.glob("*.ptx"))
  assert "mul.rn.f32" in ptx and "sqrt.rn.f32" in ptx, ptx[:2000]
  assert "fma.rn.f32" not in ptx and "sqrt.approx" not in ptx


# ---------------------------------------------------------------- class 3: Triton's libdevice names of exact arithmetic
@pytest.mark.parametrize("name", ["add_rn", "sub_rn", "mul_rn", "fma_rn", "nextafter", "copysign", "signbit", "hypot",
                                  "scalbn", "ldexp"])
def test_tritons_libdevice_names_of_exact_arithmetic_compute(name):
  """`tl.extra.cuda.libdevice.add_rn(x, y)` and its kin (how Triton ports of exact algorithms keep products out of
  sums, widen interval bounds, build EFTs) were MG002 "check the spelling" (fdim "did you mean ml.fdiv?", scalbn "ml.scalar?"): each is the
  ml or jnp function of the same meaning now (add_rn is +, which the kernel never fuses)."""
  fn = getattr(ml.extra.cuda.libdevice, name)
  arity = 1 if name == "signbit" else 3 if name == "fma_rn" else 2

  @mg.mgpu_kernel(out_shape=lambda x, y: x, grid=(1,))
  def k(x, y, o):
    u, v = x[...], y[...]
    args = (u, 3) if name in ("scalbn", "ldexp") else (u, v, u)[:arity]
    o[...] = fn(*args).astype(F32)
  r = np.random.default_rng(2)
  x, y = (r.standard_normal((8, 128)).astype(np.float32) for _ in range(2))
  want = {"add_rn": x + y, "sub_rn": x - y, "mul_rn": x * y, "fma_rn": probe70b_sums.fma32(x, y, x),
          "nextafter": np.nextafter(x, y), "copysign": np.copysign(x, y), "signbit": np.signbit(x).astype(np.float32),
          "hypot": np.hypot(x, y), "scalbn": np.ldexp(x, 3), "ldexp": np.ldexp(x, 3)}[name]
  np.testing.assert_allclose(np.asarray(k(x, y, interpret=True)), want, rtol=2e-7 if name == "hypot" else 0)
  jax.export.export(jax.jit(k), platforms=["cuda"])(*_specs((x, y))).mlir_module()


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def add_round_up(x, o):
  v = x[...]
  o[...] = ml.extra.cuda.libdevice.add_ru(v, 1.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def jnp_fma(x, o):
  v = x[...]
  o[...] = jnp.fma(v, v, 1.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def fdim_call(x, o):
  v = x[...]
  o[...] = ml.fdim(v, 1.0)         # (libdevice's fdim computes: test_libdevice_math.py)


@pytest.mark.parametrize("kernel, line, col, message, hint", [
    (add_round_up, "o[...] = ml.extra.cuda.libdevice.add_ru(v, 1.0)", 11, "has no attribute 'add_ru'",
     "no directed rounding (libdevice's add_ru rounds up): v + 1.0 rounds to nearest, never fused"),
    (jnp_fma, "o[...] = jnp.fma(v, v, 1.0)", 11, "jnp has no attribute 'fma'",
     "write ml.fma(v, v, 1.0): v * v + 1.0 rounded once"),
    (fdim_call, "o[...] = ml.fdim(v, 1.0)", 11, "has no attribute 'fdim'",
     "no ml.fdim: write ml.where(v <= 1.0, 0.0, v - 1.0)"),
])
def test_names_with_no_counterpart_hint_the_round_to_nearest_form(kernel, line, col, message, hint):
  """Directed roundings (interval arithmetic's add_ru, fma_rd, sqrt_rz), jnp.fma (not in this jax) and C's fdim
  said "check the spelling" or named a near miss (ml.fdiv): MG002 at the call with the form that computes."""
  with pytest.raises(mg.KernelError) as e:
    kernel.typed_ir(S((8, 128), F32))
  err = e.value
  assert err.code == "MG002" and err.lineno == _line_of(line) and err.col_offset == col
  assert message in str(err) and hint in err.hint, err.hint
  assert "fdim_as_hinted" in CASES     # the fdim hint's form, as the corpus keeps it


# ---------------------------------------------------------------- class 4: a ref passed to a jnp function
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def nextafter_of_a_ref(x, o):
  o[...] = jnp.nextafter(x, jnp.inf)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def nextafter_as_hinted(x, o):
  o[...] = jnp.nextafter(x[...], jnp.inf)


def test_a_ref_passed_to_a_jnp_function_hints_its_read():
  """`jnp.nextafter(x, jnp.inf)` of an input ref (the `[...]` a Pallas port forgets) said "jnp.nextafter has no form
  in a kernel" (it has one, of register values), `jnp.exp(x)` "use ml.exp" (which takes no ref either): the hint is
  the call with the ref read, which computes."""
  with pytest.raises(mg.KernelError) as e:
    nextafter_of_a_ref.typed_ir(S((8, 128), F32))
  err = e.value
  assert err.code == "MG003" and err.lineno == _line_of("o[...] = jnp.nextafter(x, jnp.inf)") and err.col_offset == 11
  assert "nextafter cannot take a GMEM ref" in str(err)
  assert err.hint.startswith("read the ref into registers first: jnp.nextafter(x[...], jnp.inf)"), err.hint
  x = np.linspace(-2, 2, 1024, dtype=np.float32).reshape(8, 128)
  np.testing.assert_array_equal(np.asarray(nextafter_as_hinted(x, interpret=True)), np.nextafter(x, np.float32(np.inf)))
