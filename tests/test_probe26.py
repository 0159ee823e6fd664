"""Probe 26 (seventeenth session): fixes found by the session's probes of the language."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend import hw
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- SMEM at the limit
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((128,), F32))
def two_buffers(x, out, *, first: ml.constexpr, second: ml.constexpr):
  a = ml.smem((first // 4,), F32)
  b = ml.smem((second // 4,), F32)
  a.at[0:128][...] = x[...]
  b.at[0:128][...] = x[...]
  out[...] = a.at[0:128][...] + b.at[0:128][...]


def test_two_buffers_that_fill_the_smem_exactly_in_their_own_order_fit():
  """Placed largest first, the 1024-aligned 100 KiB buffer went after the other one's unaligned end
  and the plan took 16 bytes past the limit (MG402); in the kernel's order they fit exactly."""
  x = jnp.arange(128, dtype=F32)
  second = hw.SMEM_LIMIT - 102400
  np.testing.assert_array_equal(np.asarray(two_buffers(x, first=102400, second=second, interpret=True)),
                                2 * np.asarray(x))
  assert "mosaic_gpu" in _export(lambda x: two_buffers(x, first=102400, second=second), S((128,), F32))
  # 16 bytes more for b (127 KiB): no order fits; 4 bytes less for a: sizes not whole KiB in bytes
  expect(two_buffers, [S((128,), F32)], mg.SmemCapacityError, "ml.smem((second",
         f"the kernel's SMEM needs {hw.SMEM_LIMIT + 16} bytes (a 100 KiB, b 127 KiB, plus barriers and"
         f" alignment), more than the {hw.SMEM_LIMIT} bytes (227 KiB less 16 bytes) a kernel's buffers can use",
         first=102400, second=second + 16)
  expect(two_buffers, [S((128,), F32)], mg.SmemCapacityError, "ml.smem((second",
         f"the kernel's SMEM needs {hw.SMEM_LIMIT + 12} bytes (a 102396 bytes, b 127 KiB, plus barriers"
         f" and alignment), more than the {hw.SMEM_LIMIT} bytes (227 KiB less 16 bytes) a kernel's buffers can use",
         first=102396, second=second + 16)


# ---------------------------------------------------------------- float8 scalars
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((256,), F32), grid=(256,))
def f8_element_to_f32(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i, 1)][...] = x.at[ml.ds(i, 1)][...].astype(jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x, y: jax.ShapeDtypeStruct(y.shape, jnp.bfloat16))
def f8_scale(x, y, out):
  scale = x.at[0:1, 0:1][...].astype(jnp.bfloat16)      # a per-tensor scale stored as float8
  out[...] = y[...] * scale


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((1, 1), x.dtype))
def f8_scalar_max(x, out):
  out[...] = ml.maximum(x.at[0:1, 0:1][...], x.at[1:2, 0:1][...])


@pytest.mark.parametrize("dt", [jnp.float8_e4m3fn, jnp.float8_e5m2], ids=["e4m3fn", "e5m2"])
def test_float8_scalars_convert_to_wider_types_exactly(dt):
  """A one-element float8 window cast to float32 was MG106 (no scalar float8 conversion on the GPU):
  it converts from its bits, every one of the 256 patterns as jnp (NaN as NaN, -0.0, subnormals)."""
  x = jax.lax.bitcast_convert_type(jnp.arange(256, dtype=jnp.uint8), dt)
  got = np.asarray(f8_element_to_f32(x, interpret=True))
  want = np.asarray(x.astype(F32))
  assert np.array_equal(np.isnan(got), np.isnan(want))
  ok = ~np.isnan(want)
  np.testing.assert_array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))
  assert "mosaic_gpu" in _export(f8_element_to_f32, S((256,), dt))
  xs, y = jnp.full((2, 2), -1.5, dt), jnp.arange(16 * 128, dtype=F32).reshape(16, 128).astype(jnp.bfloat16)
  np.testing.assert_array_equal(np.asarray(f8_scale(xs, y, interpret=True)), np.asarray(y * jnp.bfloat16(-1.5)))
  assert "mosaic_gpu" in _export(f8_scale, S((2, 2), dt), S(y.shape, y.dtype))


def test_arithmetic_on_float8_scalars_says_to_convert_them_first():
  """The hint said to pass the scalar as a (1,) array, which is the same one-element tensor again."""
  expect(f8_scalar_max, [S((2, 2), jnp.float8_e5m2)], mg.UnsupportedDtypeError, "ml.maximum(",
         "ml.maximum with the float8_e5m2 scalar x.at[0:1, 0:1][...]: an 8-bit float scalar has no arithmetic on"
         " the GPU (it converts to wider types, not back)",
         hint="compute in float32: (x.at[0:1, 0:1][...]).astype(jnp.float32), or meet it with a tensor operand"
              " (it is then broadcast)")


@pytest.mark.gpu
def test_gpu_float8_scalars_convert_exactly():
  for dt in (jnp.float8_e4m3fn, jnp.float8_e5m2):
    x = jax.lax.bitcast_convert_type(jnp.arange(256, dtype=jnp.uint8), dt)
    got, want = np.asarray(f8_element_to_f32(x)), np.asarray(x.astype(F32))
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(want)].view(np.uint32), want[~np.isnan(want)].view(np.uint32))


# ---------------------------------------------------------------- atomics of one element
@mg.mgpu_kernel(out_shape=lambda t: jax.ShapeDtypeStruct((8,), F32), grid=(32,))
def atomic_keepdims(t, out, *, window: ml.constexpr):
  i = ml.program_id(0)
  v = ml.sum(t.at[i][...], keepdims=True)          # (1,): the row's sum, stretched
  if window:
    ml.atomic_add(out.at[ml.ds(i % 8, 1)], v)
  else:
    ml.atomic_add(out.at[i % 8], v)


@mg.mgpu_kernel(out_shape=lambda t: jax.ShapeDtypeStruct((8,), F32), grid=(32,))
def scatter_one(t, out):
  i = ml.program_id(0)
  ml.atomic_add(out.at[i % 8 + ml.arange(1)], ml.sum(t.at[i][...], keepdims=True))


@pytest.mark.parametrize("window", [True, False], ids=["window", "element"])
def test_atomics_of_a_keepdims_sum_into_one_element_add_its_scalar(window):
  """A (1,) keepdims sum added into a (1,) window was MG204 (a (1,) tensor has no register layout),
  and into an element MG202 "reduce it first" (it was reduced)."""
  t = rand.normal(rand.key(0), (32, 128), F32)
  got = atomic_keepdims(t, window=window, interpret=True)
  np.testing.assert_allclose(np.asarray(got), np.asarray(t.sum(1).reshape(4, 8).sum(0)), rtol=1e-5, atol=1e-4)
  assert "mosaic_gpu" in _export(lambda t: atomic_keepdims(t, window=window), S((32, 128), F32))


def test_a_scatter_through_one_index_says_to_update_the_element():
  expect(scatter_one, [S((32, 128), F32)], mg.KernelTypeError, "ml.atomic_add(",
         "ml.atomic_add through one index (out indexed to shape (1,)) updates a single element: a scatter updates"
         " a tensor of them",
         hint="update the element with a scalar index and value: ml.atomic_add(out.at[i], s), under `if 0 <= i < n:`"
              " where i may fall outside (s a scalar: ml.sum(x), or v[0] of a one-element v)")


# ---------------------------------------------------------------- slices of a whole axis
@mg.mgpu_kernel(out_shape=lambda a, b, *, full: jax.ShapeDtypeStruct((128, 256), F32))
def epilogue_pieces(a, b, c, *, full: ml.constexpr):
  a_s, b_s = ml.smem((128, 64)), ml.smem((64, 256))
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  c_s = ml.smem((128, 64), F32)
  for e in ml.static_range(4):
    c_s[...] = acc[:, e * 64:(e + 1) * 64] if full else acc[0:128, e * 64:(e + 1) * 64]
    ml.copy(c_s, c.at[:, ml.ds(e * 64, 64)])


def test_a_slice_of_every_row_written_out_moves_no_data():
  """`acc[0:128, cols]` of a 128-row dot result went through a 128 KiB SMEM scratch (enough to
  overflow a Pallas-style epilogue) where `acc[:, cols]` takes the columns in registers."""
  specs = (S((128, 64), jnp.float16), S((64, 256), jnp.float16))
  ir_full, ir_rows = (epilogue_pieces.typed_ir(*specs, full=f) for f in (True, False))
  assert ir_rows.count("smemalloc") == ir_full.count("smemalloc") == 3
  a = rand.normal(rand.key(1), (128, 64), jnp.float16)
  b = rand.normal(rand.key(2), (64, 256), jnp.float16)
  want = np.asarray(a.astype(F32) @ b.astype(F32))
  np.testing.assert_allclose(np.asarray(epilogue_pieces(a, b, full=False, interpret=True)), want, rtol=1e-3, atol=1e-3)
  assert "mosaic_gpu" in _export(lambda a, b: epilogue_pieces(a, b, full=False), *specs)


# ---------------------------------------------------------------- range() with static bounds
@mg.mgpu_kernel(out_shape=lambda a, b, **k: jax.ShapeDtypeStruct((64, 128), F32))
def pallas_epilogue(a, b, c, *, case: ml.constexpr, trips: ml.constexpr = 2):
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 128))
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  bufs = (ml.smem((64, 64), F32), ml.smem((64, 64), F32))
  scales = (1.0, 2.0)
  for e in range(trips):
    if case == 1:
      bufs[e][...] = acc[:, 0:64]
      ml.copy(bufs[e], c.at[:, ml.ds(e * 64, 64)])
    elif case == 2:
      c.at[:, ml.ds(e * 64, 64)][...] = acc[:, 0:64] * scales[e]
    else:
      c.at[ml.ds(e * 32, 32), :][...] = acc[e * 32:(e + 1) * 32, :]


def test_a_runtime_value_from_a_range_with_static_bounds_says_to_unroll_it():
  """Pallas unrolls `for e in range(2)`; here it was a run-time loop, and the messages of what then
  needed a Python int did not say so (indexing tuples of buffers or numbers, windows of a tensor). Since probe
  52b such a loop of at most 64 trips is unrolled, as Python runs it; a longer one keeps the messages."""
  from locate import where
  a = rand.normal(rand.key(1), (64, 64), jnp.float16)
  b = rand.normal(rand.key(2), (64, 128), jnp.float16)
  acc = np.asarray(a, np.float32) @ np.asarray(b, np.float32)
  wants = {1: np.tile(acc[:, :64], (1, 2)), 2: np.concatenate([acc[:, :64], acc[:, :64] * 2], axis=1)}
  for case, want in wants.items():
    np.testing.assert_allclose(np.asarray(pallas_epilogue(a, b, case=case, interpret=True)), want, rtol=1e-3,
                               atol=1e-3)
  np.testing.assert_allclose(np.asarray(pallas_epilogue(a, b, case=3, interpret=True))[:64], acc, rtol=1e-3, atol=1e-3)
  line = where(pallas_epilogue, "for e in range(trips)")[0]
  unroll = (f"unroll the loop at line {line}: for e in ml.static_range(trips) makes e a Python int (range(trips),"
            f" even with static bounds, is a run-time loop); or ")
  specs = (S((64, 64), jnp.float16), S((64, 128), jnp.float16))
  e1 = expect(pallas_epilogue, specs, mg.KernelTypeError, "bufs[e][...] =",
              "cannot index bufs (a Python tuple of SMEM buffers) with a runtime value", case=1, trips=65)
  e2 = expect(pallas_epilogue, specs, mg.KernelTypeError, "scales[e]",
              "cannot index scales (a Python tuple) with a runtime value", case=2, trips=65)
  e3 = expect(pallas_epilogue, specs, mg.KernelTypeError, "acc[e * 32",
              "a window of acc needs static bounds; this one starts or ends at a run-time value", case=3, trips=65)
  for e in (e1, e2, e3):
    assert e.hint.startswith(unroll), e.hint


# ---------------------------------------------------------------- while on Python values
@mg.mgpu_kernel(out_shape=lambda x: x)
def halving(x, o):
  acc = x[...]
  rem = 64
  while rem > 0:                       # Pallas's ragged_dot epilogue: powers of two of what is left
    acc = acc + (1 << int(math.log2(rem)))
    rem //= 2
  o[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: x)
def until_positive(x, o):
  i = 0
  done = False
  while not done:                      # starts as a Python value, becomes a run-time one
    done = x[i] > 0.0
    i = i + 1
  o[...] = x[...] * i.astype(F32)


@mg.mgpu_kernel(out_shape=lambda x: x)
def spins(x, o, *, k: ml.constexpr):
  v = x[...]
  t = 0
  while t >= 0:
    t = t + k
    v = v * 2
  o[...] = v


def test_a_while_on_python_values_runs_while_tracing():
  """`while rem > 0: ... rem //= 2` became a run-time loop carrying rem as int32, so
  `int(math.log2(rem))` was MG003; docs said a Python condition is an error, which it was not."""
  x = jnp.zeros((128,), F32)
  np.testing.assert_array_equal(np.asarray(halving(x, interpret=True)), np.full(128, 127.0))
  assert " while " not in halving.typed_ir(S((128,), F32))
  assert "mosaic_gpu" in _export(halving, S((128,), F32))
  y = jnp.array([-1.0, -2.0, 3.0] + [1.0] * 125, F32)
  np.testing.assert_array_equal(np.asarray(until_positive(y, interpret=True)), np.asarray(y) * 3)
  assert " while " in until_positive.typed_ir(S((128,), F32))
  e = expect(spins, [S((128,), F32)], mg.KernelTypeError, "t >= 0",
             "this while condition is still the Python value True after 256 trips, the most a loop on Python"
             " values may take (it runs while the kernel is traced, unrolled)", k=1)
  assert "range(n)" in e.hint


# ---------------------------------------------------------------- masked SMEM accesses
@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=(1,))
def smem_one_store(x, n: ml.scalar, out):
  buf = ml.smem((128,))
  buf[...] = x[...]
  buf.at[ml.ds(3, 1)].store(99.0, mask=ml.arange(1) < n)
  out[...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def even_only(x, out):
  buf = ml.smem((256,))
  a = ml.arange(256)
  buf.store(x[...], mask=a % 2 == 0)                 # writes the even elements
  out[...] = buf.load(mask=a % 2 == 0, other=7.0)    # reads only those


def test_masked_smem_accesses_of_one_element_and_with_gaps():
  """A masked one-element store into SMEM was MG204 at the mask (GMEM's was accepted); a static
  mask with gaps read back what it wrote and interpret mode said the odd elements were unwritten."""
  x = jnp.zeros((128,), F32)
  for n in (0, 1):
    want = np.zeros(128)
    want[3] = 99.0 if n else 0.0
    np.testing.assert_array_equal(np.asarray(smem_one_store(x, n, interpret=True)), want)
  assert "mosaic_gpu" in _export(lambda x: smem_one_store(x, 1), S((128,), F32))
  y = jnp.arange(256, dtype=F32)
  np.testing.assert_array_equal(np.asarray(even_only(y, interpret=True)),
                                np.where(np.arange(256) % 2 == 0, np.arange(256.0), 7.0))
  assert "mosaic_gpu" in _export(even_only, S((256,), F32))


# ---------------------------------------------------------------- regression hunt 6
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((128,), F32))
def aligned_after(x, out):
  a = ml.smem((hw.SMEM_LIMIT - 1024,), jnp.uint8)     # 231408 bytes: not whole KiB
  b = ml.smem((1024,), jnp.uint8)
  a.at[0:128][...] = x[...].astype(jnp.uint8)
  b.at[0:128][...] = x[...].astype(jnp.uint8)
  out[...] = a.at[0:128][...].astype(F32) + b.at[0:128][...].astype(F32)


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((x.shape[0],), x.dtype), grid=(1,))
def running_max(x, out):
  m = -1e30                                   # a Python float carried by the loop
  for c in range(x.shape[1] // 128):
    m = ml.maximum(m, ml.max(x.at[:, ml.ds(c * 128, 128)][...], axis=1))
  out[...] = m


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((1,), jnp.int32), grid=(1,))
def f8_scalar_compare(x, out):
  out[0] = ml.where(x[0] > 0.3, 1, 0)        # 0.3 rounds to float8 first, as jnp's


def test_regression_hunt_6():
  """The unaligned buffer placed first padded the other one past the limit in both orders tried;
  a running max started at -1e30 was hinted ml.zeros (max(0, ...)), in float8 an MG106 about a
  scalar cast; a float8 scalar compared with a number was refused with a hint that rounded
  differently from jnp."""
  x = jnp.arange(128, dtype=F32)
  np.testing.assert_array_equal(np.asarray(aligned_after(x, interpret=True)), 2 * np.asarray(x))
  for dt in (F32, jnp.float8_e4m3fn):     # (MG005 until probe 57g: the range(2) loop now runs as Python's)
    xs = jnp.asarray(np.random.default_rng(3).standard_normal((64, 256)), dt)
    want = -1e30
    for c in range(2):
      want = jnp.maximum(want, jnp.max(xs[:, c * 128:(c + 1) * 128], axis=1))
    np.testing.assert_array_equal(np.asarray(running_max(xs, interpret=True), F32), np.asarray(want, F32))
  y = jnp.array([0.3125] + [0] * 127, jnp.float8_e4m3fn)
  assert int(y[0] > 0.3) == 0
  np.testing.assert_array_equal(np.asarray(f8_scalar_compare(y, interpret=True)), [0])
  assert "mosaic_gpu" in _export(f8_scalar_compare, S((128,), jnp.float8_e4m3fn))


@mg.mgpu_kernel(out_shape=lambda x: x)
def f8_relu_wide(x, out):
  out[...] = ml.maximum(x[...], 0.0)


def test_register_capacity_of_a_widened_8bit_tile_says_it_was_widened():
  """The message named a float32 tile the user never wrote (8-bit max computes in 32 bits)."""
  expect(f8_relu_wide, [S((64, 8192), jnp.float8_e4m3fn)], mg.RegisterCapacityError, "ml.maximum(",
         "this 64x8192 float32 tile (8-bit float8_e4m3fn values widened to 32 bits, as a cast does and as 8-bit"
         " ml.maximum, ml.minimum, ml.where and comparisons compute) needs 4096 registers a thread across the"
         " CTA's 128 threads; a thread has 255")


# ---------------------------------------------------------------- regression hunt 7
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def small_tile(x, out):
  out[...] = x[...] * 2


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((x.shape[0],), x.dtype), grid=(1,))
def running_max_inf(x, out):
  m = float("-inf")
  for c in range(x.shape[1] // 128):
    m = ml.maximum(m, ml.max(x.at[:, ml.ds(c * 128, 128)][...], axis=1))
  out[...] = m


def test_hints_of_regression_hunt_7_can_be_pasted():
  """A (3, 10) tile was hinted '(8, 16)', whose 2-D mask then needed 32 columns; a running max
  started at float('-inf') was hinted ml.full(..., -inf, ...), which is no Python name."""
  x11 = np.random.default_rng(5).standard_normal((3, 11)).astype(np.float32)   # (33: read padded, probe 45g)
  np.testing.assert_array_equal(np.asarray(small_tile(x11, interpret=True)), x11 * 2)
  x = np.random.default_rng(4).standard_normal((3, 10)).astype(np.float32)    # (30 elements: its scalars, probe 45a)
  np.testing.assert_array_equal(np.asarray(small_tile(jnp.asarray(x), interpret=True)), x * 2)
  # (its MG005 hint, ml.full((8,), float('-inf'), jnp.float32): since probe 57g the range(2) loop runs as Python's)
  x = np.random.default_rng(6).standard_normal((8, 256)).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(running_max_inf(x, interpret=True)), x.max(1))


@mg.mgpu_kernel(out_shape=lambda x, *, k: jax.ShapeDtypeStruct((x.shape[0], k), x.dtype),
                grid=lambda x, *, k: (x.shape[0] // 8,))
def topk_vals(x, vals, *, k: ml.constexpr):
  i = ml.program_id(0)
  s = ml.sort(x.at[ml.ds(i * 8, 8), :][...], axis=-1, descending=True)
  vals.at[ml.ds(i * 8, 8), :][...] = s[:, :k]


@mg.mgpu_kernel(out_shape=lambda cache, new, pos: cache, input_output_aliases={0: 0})
def kv_append(cache, new, pos, out):
  p = pos[0]
  out.at[p:p + new.shape[0]][...] = new[...]


def test_hints_of_the_everyday_kernels_probe():
  """`s[:, :k]` with a constexpr k was hinted a .at[] load of the register tensor s; a slice
  p:p + new.shape[0] was hinted a 64-row masked window (whose store then mismatched 8 rows)."""
  x = np.random.default_rng(3).standard_normal((16, 128)).astype(np.float32)     # ((8, 4): fewer than 128, computed)
  np.testing.assert_array_equal(np.asarray(topk_vals(jnp.asarray(x), k=4, interpret=True)), -np.sort(-x, 1)[:, :4])
  # ((8, 24): 192 elements, read back from the SMEM scratch a row at a time, held as their vector, since probe 45g)
  np.testing.assert_array_equal(np.asarray(topk_vals(jnp.asarray(x), k=24, interpret=True)), -np.sort(-x, 1)[:, :24])
  # (p:p + new.shape[0] is ml.ds(p, 8) since probe 39a)
  cache, new = jnp.ones((64, 128), F32), jnp.full((8, 128), 2.0, F32)
  got = kv_append(cache, new, jnp.asarray([16], jnp.int32), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(cache.at[16:24].set(new)))


@mg.mgpu_kernel(out_shape=lambda x: x)
def scaled_by_root(x, out, *, d: ml.constexpr):
  out[...] = x[...] * math.sqrt(d)


def test_a_python_call_of_static_values_that_fails_shows_its_arguments():
  """The hint spoke of @ml.inline and register values for math.sqrt(-1.0) of a constexpr."""
  expect(scaled_by_root, [S((128,), F32)], mg.KernelTypeError, "math.sqrt(d)",
         "sqrt(...) of static values failed while tracing: ValueError: math domain error",
         hint="it ran in Python while the kernel was traced, as sqrt(-1.0): check those values (the constexprs"
              " and shapes of this call) or compute this outside the kernel", d=-1.0)


@ml.inline
def fold_to_128(v, n):                 # Pallas-style: halve a tile until it is 128 wide
  while True:                          # a while on Python values: unrolled while tracing
    if n <= 128:
      return v
    n //= 2
    v = v[:, :n] + v[:, n:]


@ml.inline
def first_wide(v, widths):
  for i in ml.static_range(len(widths)):
    if widths[i] >= 128:
      return v * i
  return v


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((8, 128), F32), grid=(1,))
def folded(x, out):
  out[...] = first_wide(fold_to_128(x[...], x.shape[1]), (64, 96, 128, 256))


def test_a_helper_returns_from_inside_an_unrolled_loop():
  """`return` inside an unrolled while or ml.static_range of an @ml.inline helper was MG001 'under a
  run-time condition or loop'."""
  x = rand.normal(rand.key(0), (8, 512), F32)
  want = 2 * (x[:, :128] + x[:, 128:256] + x[:, 256:384] + x[:, 384:])
  np.testing.assert_allclose(np.asarray(folded(x, interpret=True)), np.asarray(want), rtol=1e-5, atol=1e-5)
  assert "mosaic_gpu" in _export(folded, S((8, 512), F32))


@mg.mgpu_kernel(out_shape=lambda x, c: x, grid=(2,))
def zero_trips(x, c, out):
  i = ml.program_id(0)
  for t in range(c[i]):                       # program 1 runs no trip (c[1] == 0)
    out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]


def test_mg602_says_when_a_runtime_loop_ran_no_trip():
  """The hint said to launch more programs, though the grid covered the output: program 1's loop
  ran no trip, so its store never ran."""
  with pytest.raises(mg.UncoveredOutputError) as info:
    zero_trips(jnp.arange(256, dtype=F32), jnp.array([1, 0], jnp.int32), interpret=True)
  e = info.value
  assert e.message.startswith("out[128:256] is never written: the write into out at line")
  assert "is in the run-time loop at line" in e.message and "which ran no trip" in e.message
  assert e.hint.startswith("write out's window on every path: write it once before the loop")


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((1,), x.dtype), grid=(1,))
def big_start(x, out):
  s = 3000000000                      # fits uint32 only
  for r in range(4):
    s = s + ml.sum(x.at[ml.ds(r * 128, 128)][...])
  out[0] = s


def test_a_loop_carry_started_at_an_int_that_fits_only_uint32():
  """`s = 3000000000` summing uint32 values was MG003 (does not fit int32); summing int32 values it
  must not silently wrap."""
  x = jnp.arange(512, dtype=jnp.uint32)
  np.testing.assert_array_equal(np.asarray(big_start(x, interpret=True)), [(3000000000 + 511 * 256) % 2 ** 32])
  assert "mosaic_gpu" in _export(big_start, S((512,), jnp.uint32))
  with pytest.raises(mg.KernelError):
    big_start.check(S((512,), jnp.int32))


@mg.mgpu_kernel(out_shape=lambda x, c: x, grid=(2,))
def masked_under_if(x, c, out):
  i = ml.program_id(0)
  idx = i * 128 + ml.arange(128)
  if c[i] > 0:
    out.at[ml.ds(i * 128, 128)].store(x.at[ml.ds(i * 128, 128)][...], mask=idx < x.shape[0])


def test_mg602_names_the_skipped_if_before_a_mask_that_is_on_everywhere():
  with pytest.raises(mg.UncoveredOutputError) as info:
    masked_under_if(jnp.arange(256, dtype=F32), jnp.array([1, 0], jnp.int32), interpret=True)
  assert "is under the run-time condition at line" in info.value.message
