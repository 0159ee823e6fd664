"""An integer `acc + ml.dot(a, b)` is chained, `ml.dot(a, b, acc)` (frontend/int_dot_chain.py, design note 207).

Async fuzzer 61c's int8 seeds 306, 693, 894, 997 and 1046 (tests/async_fuzz2.py) were wrong on an H100, right in
interpret mode: each a fresh int8 dot over 32-byte swizzled operands in a pipelined loop, its product added to an
accumulator. The wrong values were the product plus, in each thread, one of its own result registers (the zeros the
instruction started from read one register). Written chained, each was right; so integer sums (exact) are chained by
the compiler. The root cause, a fresh accumulator's registers sharing one zero register, is mended in the lowering
(each register its own opaque copy): with the chaining off, the five seeds were right on an H100 (fiftieth session,
benchmarks/probe_s49_int8.py --unchained), so a fresh int8 dot whose product is still added on (`acc + d * 1`) is no
longer refused (session 49's MG501).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import async_fuzz2
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend import ir as kir
from probe_util import export

S = jax.ShapeDtypeStruct
SEEDS = (306, 693, 894, 997, 1046)


def _ints(shape, seed, dtype=jnp.int8):
  return jnp.asarray(np.random.default_rng(seed).integers(-8, 8, shape), dtype)


@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 64), jnp.int32 if a.dtype == jnp.int8 else jnp.float32))
def plus_in_loop(a, b, o):
  a_s = ml.smem((128, 64), a.dtype)
  b_s = ml.smem((64, 64), b.dtype)
  acc = ml.zeros((128, 64), jnp.int32 if a.dtype == jnp.int8 else jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[:, ml.ds(k * 64, 64)], b_s)
    acc += ml.dot(a_s, b_s.T, out_dtype=acc.dtype)
  o[...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: (S((128, 64), jnp.int32), S((128, 64), jnp.int32)))
def product_used_twice(a, b, o, p):
  a_s = ml.smem((128, 64), jnp.int8)
  b_s = ml.smem((64, 64), jnp.int8)
  acc = ml.zeros((128, 64), jnp.int32)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  d = ml.dot(a_s, b_s.T, out_dtype=jnp.int32)
  acc = acc + ml.full((128, 64), 3, jnp.int32) + d
  o[...] = acc
  p[...] = d * 2


@mg.mgpu_kernel(out_shape=lambda a, b, c: S((128, 64), jnp.int32))
def addend_loaded_after(a, b, c, o):
  a_s = ml.smem((128, 64), jnp.int8)
  b_s = ml.smem((64, 64), jnp.int8)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  d = ml.dot(a_s, b_s.T, out_dtype=jnp.int32)
  y = c[...]
  o[...] = y + d


def _ir(kernel, *args):
  return kir.dump(kernel._compile(list(args), {})["kernel"])


def _ops(text):
  return [line.split("  #")[0].strip() for line in text.splitlines()]


def test_an_integer_product_added_to_the_accumulator_is_chained():
  a, b = _ints((128, 128), 0), _ints((64, 128), 1)
  ops = _ops(_ir(plus_in_loop, a, b))
  dots = [o for o in ops if " = dot " in o]
  assert len(dots) == 1 and "acc=None" not in dots[0], dots
  assert not any("kind=add" in o and "int32, wgmma" in o for o in ops), ops
  want = np.asarray(a, np.int64) @ np.asarray(b, np.int64).T
  np.testing.assert_array_equal(plus_in_loop(a, b, interpret=True), want)
  export(plus_in_loop, a, b)


def test_a_float_product_added_to_the_accumulator_is_not_chained():
  a, b = _ints((128, 128), 2, jnp.float16), _ints((64, 128), 3, jnp.float16)
  ops = _ops(_ir(plus_in_loop, a, b))
  assert any(" = dot " in o and "acc=None" in o for o in ops), ops     # (WGMMA's rounding of acc + a @ b differs)
  want = np.asarray(a, np.float32) @ np.asarray(b, np.float32).T
  np.testing.assert_allclose(plus_in_loop(a, b, interpret=True), want)


def test_a_product_used_twice_or_added_to_a_later_value_is_kept_apart():
  a, b, c = _ints((128, 64), 4), _ints((64, 64), 5), _ints((128, 64), 6, jnp.int32)
  d = np.asarray(a, np.int64) @ np.asarray(b, np.int64).T
  assert any("acc=None" in o for o in _ops(_ir(product_used_twice, a, b)))
  o, p = product_used_twice(a, b, interpret=True)
  np.testing.assert_array_equal(o, d + 3)
  np.testing.assert_array_equal(p, 2 * d)
  assert any("acc=None" in o for o in _ops(_ir(addend_loaded_after, a, b, c)))
  np.testing.assert_array_equal(addend_loaded_after(a, b, c, interpret=True), np.asarray(c) + d)


@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 32), jnp.int32))
def scaled_fresh_product(a, b, o, *, stages: ml.constexpr = 3):
  b_s = ml.smem((32, 32), jnp.int8)
  acc = ml.zeros((128, 32), jnp.int32)
  a_reg = a[...]
  for k in ml.range(b.shape[1] // 32, stages=stages):
    ml.copy(b.at[:, ml.ds(k * 32, 32)], b_s)
    d = ml.dot(a_reg, b_s.T, out_dtype=jnp.int32)
    acc = acc + d * 2
  o[...] = acc


def test_a_fresh_int8_product_added_on_in_a_pipelined_loop_computes():
  """`acc = acc + d * 2` of a fresh int8 product over 32-column K steps, pipelined (session 49 refused it, MG501):
  interpret mode and the exported module, pipelined and not, against NumPy."""
  a, b = _ints((128, 32), 7), _ints((32, 64), 8)
  want = 2 * (np.asarray(a, np.int64) @ np.asarray(b, np.int64).reshape(32, 2, 32).sum(1).T)
  for stages in (3, 1):
    np.testing.assert_array_equal(scaled_fresh_product(a, b, stages=stages, interpret=True), want)
    export(scaled_fresh_product, a, b, stages=stages)


def _fresh_dot_kernel(dtype):
  out = jnp.int32 if dtype == jnp.int8 else jnp.float32

  def fresh_dot(a, b, o):
    a_s = ml.smem((128, 64), dtype)
    b_s = ml.smem((64, 64), dtype)
    ml.copy(a, a_s)
    ml.copy(b, b_s)
    o[...] = ml.dot(a_s, b_s.T, out_dtype=out)
  return mg.mgpu_kernel(out_shape=lambda a, b: S((128, 64), out))(fresh_dot)


@pytest.mark.parametrize("dtype", [jnp.int8, jnp.float16])
def test_a_constant_integer_accumulator_takes_a_register_of_its_own_each(dtype, tmp_path, monkeypatch):
  """lowering/mma.py `_own_registers`: every register of a fresh int32 accumulator is its own opaque `mov` (ptxas
  misread a shared zero register, design note 207); 128x64 int32 on one warpgroup is 64 registers a thread. Float
  accumulators keep Mosaic GPU's zeros."""
  monkeypatch.setenv("MGPU_DSL_DUMP", str(tmp_path))
  k = _fresh_dot_kernel(dtype)
  k.check(S((128, 64), dtype), S((64, 64), dtype))
  (mlir,) = [open(p).read() for p in tmp_path.glob("fresh_dot-*.mlir")]
  assert mlir.count("mov.b32 $0, $1;") == (64 if dtype == jnp.int8 else 0)
  a, b = _ints((128, 64), 13, dtype), _ints((64, 64), 14, dtype)
  np.testing.assert_array_equal(k(a, b, interpret=True), np.asarray(a, np.int64) @ np.asarray(b, np.int64).T)


@mg.mgpu_kernel(out_shape=lambda a, b, c: S((128, 64), jnp.int32))
def full_then_dot(a, b, c, o):
  a_s = ml.smem((128, 64), jnp.int8)
  b_s = ml.smem((64, 64), jnp.int8)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.full((128, 64), c[0], jnp.int32)       # every register one run-time value
  o[...] = ml.dot(a_s, b_s.T, acc)


def test_an_integer_accumulator_splat_from_a_run_time_value_takes_registers_of_its_own(tmp_path, monkeypatch):
  monkeypatch.setenv("MGPU_DSL_DUMP", str(tmp_path))
  a, b, c = _ints((128, 64), 17), _ints((64, 64), 18), jnp.asarray([5, 0], jnp.int32)
  full_then_dot.cache_clear()
  full_then_dot.check(*(S(x.shape, x.dtype) for x in (a, b, c)))
  (mlir,) = [open(p).read() for p in tmp_path.glob("full_then_dot-*.mlir")]
  assert mlir.count("mov.b32 $0, $1;") == 64
  np.testing.assert_array_equal(full_then_dot(a, b, c, interpret=True),
                                5 + np.asarray(a, np.int64) @ np.asarray(b, np.int64).T)


@pytest.mark.parametrize("seed", (1456, 1413, 1423))
def test_fresh_int8_products_not_added_on_compute(seed):
  """A fresh product that becomes the accumulator, feeds a chained dot, or sits beside a row statistic: right on
  the H100 before the chaining (session 49's fuzz run), so not refused."""
  import async_fuzz
  g = async_fuzz2.Gen(seed)
  assert "dt:int8" in g.tags
  cls, detail = async_fuzz.run(g, build=True)
  assert cls == "ok", detail


@pytest.mark.parametrize("seed", SEEDS)
def test_the_fuzz_seeds_chain_their_products_and_compute(seed):
  g = async_fuzz2.Gen(seed)
  import async_fuzz
  cls, detail = async_fuzz.run(g, build=True)
  assert cls == "ok", detail
  import fuzz_check
  kernel = fuzz_check.load(g)
  assert not any(" = dot " in o and "acc=None" in o for o in _ops(_ir(kernel, *g.args)))


@pytest.mark.gpu
@pytest.mark.parametrize("seed", SEEDS + (1456, 1413, 1423))
def test_gpu_the_fuzz_seeds_match_numpy(seed):
  import fuzz_check
  g = async_fuzz2.Gen(seed)
  got = jax.block_until_ready(jax.jit(fuzz_check.load(g))(*g.args))
  got = got if isinstance(got, (tuple, list)) else (got,)
  for x, want in zip(got, g.refs):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(want))


@pytest.mark.gpu
def test_gpu_a_chained_integer_loop_matches_numpy():
  x, y = _ints((128, 64), 15), _ints((64, 64), 16)
  np.testing.assert_array_equal(jax.jit(_fresh_dot_kernel(jnp.int8))(x, y),
                                np.asarray(x, np.int64) @ np.asarray(y, np.int64).T)
  a, b = _ints((128, 256), 9), _ints((64, 256), 10)
  want = np.asarray(a, np.int64) @ np.asarray(b, np.int64).T
  np.testing.assert_array_equal(jax.jit(plus_in_loop)(a, b), want)
  for stages in (1, 3):
    np.testing.assert_array_equal(jax.jit(scaled_fresh_product, static_argnames="stages")(
        _ints((128, 32), 11), _ints((32, 64), 12), stages=stages),
        2 * (np.asarray(_ints((128, 32), 11), np.int64)
             @ np.asarray(_ints((32, 64), 12), np.int64).reshape(32, 2, 32).sum(1).T))
