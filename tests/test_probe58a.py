"""Probe 58a: kernels whose Mosaic GPU modules grew past what ptxas compiles in minutes (two of probe 57a's GPU tests
did not finish in 430 s). Integer register products past 65536 terms are a run-time loop over k through SMEM
(form_helpers.staged_dot; 161k-565k lines of MLIR unrolled), 2-D segment reductions (and `.at[ids]` updates of
register tiles) of many segments a run-time loop over the segments (form_helpers.segment_rows; 148k lines), and a
module of more than 100000 operations warns (mg.ModuleSizeWarning, a mg.KernelWarning) at the kernel's def line."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe_util import export

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _specs(*args):
  return [S(np.shape(a), a.dtype) for a in args]


def _lines(kernel, *args):
  """Lines of the kernel's Mosaic GPU module at the shapes of `args`, and the ModuleSizeWarnings its build gave."""
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    text = kernel.mlir(*_specs(*args))
  return len(text.splitlines()), [w for w in caught if issubclass(w.category, mg.ModuleSizeWarning)]


# ---------------------------------------------------------------- integer register products
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), a.dtype))
def int_dot(a, b, o):
  o[...] = jnp.dot(a[...], b[...])


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), a.dtype))
def int_matmul(a, b, o):
  o[...] = a[...] @ b[...]


PRODUCTS = [((200, 24, 128), np.int32, 1000), ((64, 32, 512), np.int32, 1 << 31), ((64, 64, 64), np.uint32, 1 << 32),
            ((48, 40, 72), np.int32, 1000)]


def _operands(m, k, n, dtype, hi, seed):
  rng = np.random.default_rng(seed)
  lo = -hi if np.dtype(dtype).kind == "i" else 0
  a = rng.integers(lo, hi, (m, k), dtype=np.int64).astype(dtype)    # (past 2**31: products wrap, as jnp's)
  b = rng.integers(lo, hi, (k, n), dtype=np.int64).astype(dtype)
  return a, b


@pytest.mark.parametrize("shape,dtype,hi", PRODUCTS, ids=lambda p: "x".join(map(str, p)) if isinstance(p, tuple)
                         else getattr(p, "__name__", str(p)))
def test_large_integer_products_are_a_run_time_loop_over_k(shape, dtype, hi):
  """jnp.dot / `@` of int32 and uint32 register tiles (no tensor cores take them) were k rank-1 updates or k-chunks
  unrolled: (200, 24) x (24, 128) 508k lines of MLIR, (64, 32) x (32, 512) 565k, (64, 64) x (64, 64) 161k. Past 65536
  terms both operands are staged in SMEM and a run-time loop over k adds each column-by-row product: jnp's numbers
  (int32 wraps), a module of a few thousand lines, no ModuleSizeWarning."""
  m, k, n = shape
  a, b = _operands(m, k, n, dtype, hi, seed=m + k + n)
  want = np.asarray(jnp.dot(a, b))
  kernel = int_dot if dtype == np.int32 else int_matmul
  np.testing.assert_array_equal(np.asarray(kernel(a, b, interpret=True)), want)
  lines, warned = _lines(kernel, a, b)
  assert lines < 20_000 and not warned, (lines, warned)
  export(kernel, a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,dtype,hi", PRODUCTS, ids=lambda p: "x".join(map(str, p)) if isinstance(p, tuple)
                         else getattr(p, "__name__", str(p)))
def test_large_integer_products_on_the_gpu(shape, dtype, hi):
  m, k, n = shape
  a, b = _operands(m, k, n, dtype, hi, seed=m + k + n + 1)
  kernel = int_dot if dtype == np.int32 else int_matmul
  np.testing.assert_array_equal(np.asarray(kernel(a, b)), np.asarray(jnp.dot(a, b)))


# ---------------------------------------------------------------- segment reductions of many segments
@mg.mgpu_kernel(out_shape=lambda x, ids: (S((100, x.shape[1]), x.dtype), S((96, x.shape[1]), x.dtype)))
def graph_messages(x, ids, total, peak):          # a graph's messages summed (and their max) per node
  m = x[...]
  total[...] = jax.ops.segment_sum(m, ids[...], num_segments=100)
  peak[...] = jax.ops.segment_max(m, ids[...], num_segments=96)


@mg.mgpu_kernel(out_shape=lambda x, ids: (S((64, x.shape[1]), x.dtype), S((64, x.shape[1]), x.dtype)))
def min_prod(x, ids, lo, pr):
  m = x[...]
  lo[...] = jax.ops.segment_min(m, ids[...], num_segments=64)
  pr[...] = jax.ops.segment_prod(m, ids[...], num_segments=64)


@mg.mgpu_kernel(out_shape=lambda y, tok: S((128, y.shape[1]), F32))
def unpermute_128(y, tok, out):                   # an MoE unpermute into 128 tokens
  out[...] = jnp.zeros((128, y.shape[1]), jnp.float32).at[tok[...]].add(y[...].astype(jnp.float32))


@mg.mgpu_kernel(out_shape=lambda x, ids, cols: (x, x))
def row_updates(x, ids, cols, hi, ones):          # `.at[ids]` of 256 rows; paired `.at[ids, cols]`
  v = x[...]
  hi[...] = v.at[ids[...]].max(v * 2)
  ones[...] = jnp.zeros_like(v).at[ids[...], cols[...]].add(1)


def _segment_inputs(seed):
  rng = np.random.default_rng(seed)
  x = rng.standard_normal((256, 64)).astype(np.float32)
  ids = rng.integers(-3, 104, 256).astype(np.int32)          # (some dropped, some segments empty)
  xs = (1 + 0.05 * rng.standard_normal((256, 64))).astype(np.float32)
  ids2 = rng.integers(-2, 70, 256).astype(np.int32)
  y = rng.standard_normal((128, 32)).astype(jnp.bfloat16)
  tok = rng.integers(0, 128, 128).astype(np.int32)
  xi = rng.integers(-100, 100, (256, 64)).astype(np.int32)
  rows = rng.integers(-300, 300, 256).astype(np.int32)        # (negative ones count from the end; past -256 dropped)
  cols = rng.integers(-70, 70, 256).astype(np.int32)
  return (x, ids), (xs, ids2), (y, tok), (xi, rows, cols)


def _segment_wants(args):
  (x, ids), (xs, ids2), (y, tok), (xi, rows, cols) = args
  return [[jax.ops.segment_sum(x, ids, 100), jax.ops.segment_max(x, ids, 96)],
          [jax.ops.segment_min(xs, ids2, 64), jax.ops.segment_prod(xs, ids2, 64)],
          [jnp.zeros((128, 32)).at[tok].add(y.astype(np.float32))],
          [jnp.asarray(xi).at[rows].max(xi * 2), jnp.zeros_like(xi).at[rows, cols].add(1)]]


SEGMENT_KERNELS = [graph_messages, min_prod, unpermute_128, row_updates]


def _compare(got, want, exact):
  for g, w in zip(got if isinstance(got, tuple) else (got,), want):
    if exact:
      np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    else:
      np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


def test_many_segments_are_a_run_time_loop_over_the_segments():
  """Segment reductions of a tile's rows were one select and one reduction of the whole tile per segment, unrolled:
  100 + 96 segments of a (256, 64) tile 148k lines, 128 tokens of an unpermute 39k. Past 2**19 terms (segments times
  the tile's elements) the segments are a run-time loop, each row stored into SMEM at its offset and read back:
  jax's numbers (max and min exact, an empty segment the identity, ids outside dropped), a few thousand lines."""
  args = _segment_inputs(21)
  for kernel, a, want in zip(SEGMENT_KERNELS, args, _segment_wants(args)):
    _compare(kernel(*a, interpret=True), want, exact=kernel is row_updates)
    if kernel is graph_messages:          # (the maxima exact; empty segments -inf, as jax's)
      np.testing.assert_array_equal(np.asarray(kernel(*a, interpret=True)[1]), np.asarray(want[1]))
    lines, warned = _lines(kernel, *a)
    assert lines < 20_000 and not warned, (kernel.__name__, lines, warned)
    export(kernel, *a)


@pytest.mark.gpu
def test_many_segments_on_the_gpu():
  args = _segment_inputs(22)
  for kernel, a, want in zip(SEGMENT_KERNELS, args, _segment_wants(args)):
    _compare(kernel(*a), want, exact=kernel is row_updates)
    if kernel is graph_messages:
      np.testing.assert_array_equal(np.asarray(kernel(*a)[1]), np.asarray(want[1]))


# ---------------------------------------------------------------- the size guard
@mg.mgpu_kernel(out_shape=lambda x: x)
def unrolled(x, o):
  v = x[...]
  for _ in ml.static_range(700):
    v = v * 0.5 + ml.sin(v)                       # the line most of the module comes from
  o[...] = v


@mg.mgpu_kernel(out_shape=lambda x: x)
def looped(x, o):
  v = x[...]
  for _ in ml.range(400):
    v = v * 0.5 + ml.sin(v)
  o[...] = v


def test_a_very_large_module_warns_at_the_def_line():
  """A module of more than 100000 operations (the examples' largest has 10.2k) is a mg.ModuleSizeWarning, a
  mg.KernelWarning, at the kernel's def line: its size, the line most of it comes from, and the run-time loop as
  the hint; the same loop as ml.range builds a small module and no warning. Not an error: both compute."""
  import inspect
  x = np.random.default_rng(3).standard_normal((128, 256)).astype(np.float32)
  lines, warned = _lines(unrolled, x)
  assert len(warned) == 1, warned
  w = warned[0]
  src, first = inspect.getsourcelines(unrolled.fn)
  def_line = first + next(i for i, t in enumerate(src) if t.lstrip().startswith("def "))
  body_line = first + next(i for i, t in enumerate(src) if "most of the module" in t)
  assert issubclass(w.category, mg.KernelWarning) and w.filename == __file__ and w.lineno == def_line
  text = str(w.message)
  import re
  got = re.search(r"module of unrolled has (\d+) operations \(more than 100000, (\d+) of them from line (\d+)\)", text)
  assert got and int(got.group(1)) > 100000 and int(got.group(3)) == body_line, text
  assert int(got.group(2)) > int(got.group(1)) // 2 and lines > int(got.group(1)) // 2, text
  assert "hint: a loop over ml.static_range" in text and "ml.range(n)" in text, text
  assert issubclass(mg.RegisterSpillWarning, mg.KernelWarning) and issubclass(mg.PrecisionWarning, mg.KernelWarning)
  small, none = _lines(looped, x)
  assert small < 2_000 and not none, (small, none)
  want = x
  for _ in range(400):
    want = want * np.float32(0.5) + np.sin(want)
  np.testing.assert_allclose(np.asarray(looped(x, interpret=True)), want, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_the_looped_kernel_on_the_gpu():
  x = np.random.default_rng(4).standard_normal((128, 256)).astype(np.float32)
  want = x
  for _ in range(400):
    want = want * np.float32(0.5) + np.sin(want)
  np.testing.assert_allclose(np.asarray(looped(x)), want, rtol=1e-4, atol=1e-4)
