"""jnp's weak types through boolean operands (probe 57e's fuzzer on the CPU, session 53): in jnp's lattice bool lies
below the weak types, so `jnp.where(m, m, 94)`, `w * m` of a weakly typed `w`, `w * wf` of a weak int and a weak
float and `jnp.sqrt(w)` are weakly typed, and meeting a uint8, int8, float16 or bfloat16 value later they take its
dtype. Each kernel asserts jnp's dtype statically (MG011 where it differs) and computes jnp's numbers."""
import importlib.util
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

EXPRS = ["jnp.where(m, m, 94)", "jnp.where(m, 3, m)", "jnp.where(m, m, 2.5)", "jnp.where(m, 1, 0) * m",
         "jnp.where(m, 2, 1) * jnp.where(m, 0.5, 1.0)", "jnp.sqrt(jnp.where(m, 4, 1))", "jnp.maximum(jnp.where(m, 1, 0), m)",
         "jnp.where(m, jnp.where(m, 1, 0), m)", "jnp.where(m, 1, 0) / 2", "(m * 3) * m", "jnp.where(m, 1, 0) // 7",
         "jnp.where(m, 1.0, 0.0) * m * m"]
OTHERS = {"int8": "v", "uint8": "u", "float16": "f", "bfloat16": "g"}


def _inputs():
  r = np.random.default_rng(0)
  return (jnp.asarray(r.integers(-5, 5, (128, 64)), jnp.int8), jnp.asarray(r.integers(0, 9, (128, 64)), jnp.uint8),
          jnp.asarray(r.standard_normal((128, 64)), jnp.float16), jnp.asarray(r.standard_normal((128, 64)), jnp.bfloat16))


def _kernel(tmp_path, expr, other, want):
  src = textwrap.dedent(f"""
      import jax
      import jax.numpy as jnp
      import mgpu_dsl as mg

      @mg.mgpu_kernel(out_shape=lambda v, u, f, g: jax.ShapeDtypeStruct((128, 64), jnp.{want}))
      def kernel(v_ref, u_ref, f_ref, g_ref, o):
        v, u, f, g = v_ref[...], u_ref[...], f_ref[...], g_ref[...]
        m = v > 0
        r = ({expr}) + {other}
        assert r.dtype == jnp.{want}, "jnp: {want}"
        o[...] = r
      """)
  path = tmp_path / "weak_kernel.py"
  path.write_text(src)
  spec = importlib.util.spec_from_file_location("weak_kernel", path)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod.kernel


@pytest.mark.parametrize("expr", EXPRS)
@pytest.mark.parametrize("other", list(OTHERS))
def test_weak_results_of_boolean_operands_take_the_typed_side(tmp_path, expr, other):
  _matches_jnp(tmp_path, expr, other)     # (int8 + a weak float: float32)


def _matches_jnp(tmp_path, expr, other):
  """The kernel computing `(expr) + other` has jnp's dtype (asserted in the kernel too) and numbers; that dtype."""
  v, u, f, g = _inputs()
  want = eval(f"({expr}) + {OTHERS[other]}", {"jnp": jnp}, dict(v=v, u=u, f=f, g=g, m=v > 0))
  got = _kernel(tmp_path, expr, OTHERS[other], want.dtype.name)(v, u, f, g, interpret=True)
  assert got.dtype == want.dtype
  tol = {"float16": 2e-3, "bfloat16": 2e-2}.get(want.dtype.name, 0)
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=tol, atol=tol)
  return want.dtype.name


# jnp's joins of a weakly typed part beside a typed one (the diff fuzzer's seed 41005, session 57): the weak part takes
# the typed part's dtype (float32 and int32 before), weak parts alone join weakly and meet the typed side later.
JOINS = ["jnp.concatenate([m[:, :32] * 0.5, {o}[:, 32:]], axis=1)", "jnp.concatenate([{o}[:, :32], jnp.where(m, 1, 2)[:, 32:]], axis=1)",
         "jnp.hstack([jnp.where(m, 0.5, 2.0)[:, :16], {o}[:, 16:]])", "jnp.concatenate([m[:, :32] * 0.5, m[:, 32:]], axis=1)",
         "jnp.concatenate([jnp.where(m, 1, 2)[:, :32], m[:, 32:] * 0.5], axis=1)",
         "jnp.stack([jnp.where(m, 3, 1), {o}], axis=0)[0]"]


@pytest.mark.parametrize("expr", JOINS)
@pytest.mark.parametrize("other", list(OTHERS))
def test_joins_of_weak_parts_take_the_typed_side(tmp_path, expr, other):
  _matches_jnp(tmp_path, expr.format(o=OTHERS[other]), other)


# jnp's functions that promote their operands together before computing: a product or a two-operand formula of a
# weak float and a typed float is in the typed float's dtype (they were float32: session 57).
PROMOTED = ["(m * 0.5)[:, :64] @ {o}[:64, :]", "jnp.dot(m * 0.5, {o}[:64, :])",
            "jnp.matmul({o}, jnp.where(m, 1.0, 0.0)[:64, :])", "jnp.einsum('ij,jk->ik', m * 0.5, {o}[:64, :])",
            "jnp.copysign(m * 0.5, {o})", "jnp.logaddexp(m * 0.5, {o})", "jnp.heaviside({o}, m * 0.5)",
            "jnp.nextafter(m * 0.5, {o})", "jnp.float_power(m * 0.5 + 1, jnp.abs({o}))"]


@pytest.mark.parametrize("expr", PROMOTED)
@pytest.mark.parametrize("other", ["float16", "bfloat16"])
def test_promoting_functions_of_a_weak_operand_take_the_typed_dtype(tmp_path, expr, other):
  assert _matches_jnp(tmp_path, expr.format(o=OTHERS[other]), other) == other


def test_a_weak_operands_product_exports_for_cuda(tmp_path):
  kernel = _kernel(tmp_path, PROMOTED[0].format(o="g"), "g", "bfloat16")
  specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in _inputs()]
  text = jax.export.export(jax.jit(kernel), platforms=["cuda"])(*specs).mlir_module()
  assert "mosaic_gpu" in text


@pytest.mark.gpu
@pytest.mark.parametrize("expr", PROMOTED[:4] + ["jnp.logaddexp(m * 0.5, {o})"])
def test_promoting_functions_of_a_weak_operand_on_the_gpu(tmp_path, expr):
  v, u, f, g = _inputs()
  expr = expr.format(o="g")
  want = eval(f"({expr}) + g", {"jnp": jnp}, dict(g=g, m=v > 0))
  got = jax.jit(_kernel(tmp_path, expr, "g", "bfloat16"))(v, u, f, g)
  assert got.dtype == want.dtype == jnp.bfloat16
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=3e-2, atol=3e-2)


def test_the_weak_select_exports_for_cuda(tmp_path):
  kernel = _kernel(tmp_path, "jnp.where(m, 1, 0) * m", "u", "uint8")
  specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in _inputs()]
  text = jax.export.export(jax.jit(kernel), platforms=["cuda"])(*specs).mlir_module()
  assert "mosaic_gpu" in text


@pytest.mark.gpu
@pytest.mark.parametrize("expr", EXPRS[:4])
def test_weak_results_on_the_gpu(tmp_path, expr):
  v, u, f, g = _inputs()
  want = eval(f"({expr}) + u", {"jnp": jnp}, dict(u=u, m=v > 0))
  got = jax.jit(_kernel(tmp_path, expr, "u", want.dtype.name))(v, u, f, g)    # (a weak float: float32)
  assert got.dtype == want.dtype
  np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_a_weak_number_shows_jnps_dtype_and_keeps_its_weak_type(tmp_path):
  """`jnp.sqrt(2.0)` is a weak float32 in jnp (its `.dtype` float32, `x_f16 * it` float16): in a kernel the traced
  number answers `.dtype`, `.shape` and `.ndim` as jnp's 0-d value, and still meets float16 weakly."""
  src = textwrap.dedent("""
      import jax.numpy as jnp
      import mgpu_dsl as mg

      @mg.mgpu_kernel(out_shape=lambda x: x)
      def kernel(x, o):
        s = jnp.sqrt(2.0)
        n = jnp.floor(7.5).astype(int) + 0
        assert s.dtype == jnp.float32 and s.shape == () and s.ndim == 0
        assert jnp.asarray(3).dtype == jnp.int32
        o[...] = x[...] * s + n
      """)
  path = tmp_path / "weak_number.py"
  path.write_text(src)
  spec = importlib.util.spec_from_file_location("weak_number", path)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  x = jnp.asarray(np.random.default_rng(1).standard_normal((128, 64)), jnp.float16)
  got = mod.kernel(x, interpret=True)
  want = x * jnp.sqrt(2.0) + 7
  assert got.dtype == jnp.float16
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=2e-3, atol=2e-3)


def test_a_buffer_whose_dtype_is_still_inferred_meets_the_lattice():
  """A masked store into an SMEM buffer of inferred dtype selects against the buffer's values while its dtype is a
  variable: the lattice leaves it to the type rules (probe 65a's lattice raised AttributeError there, MG900)."""
  import mgpu_dsl as mg
  from mgpu_dsl import language as ml

  @mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
  def even_only(x, out):
    buf = ml.smem((256,))
    a = ml.arange(256)
    buf.store(x[...], mask=a % 2 == 0)
    out[...] = buf.load(mask=a % 2 == 0, other=7.0)

  x = jnp.arange(256, dtype=jnp.float32)
  got = np.asarray(even_only(x, interpret=True))
  want = np.where(np.arange(256) % 2 == 0, np.arange(256), 7.0)
  np.testing.assert_array_equal(got, want)
