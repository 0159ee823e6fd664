"""Probe 46a (odd windows on both sides of an assignment, and index forms): `math.floor(f)`, `math.ceil(f)` and
`math.trunc(f)` of a run-time scalar are ints, as Python's, so they index."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, BF16, I32 = jnp.float32, jnp.bfloat16, jnp.int32


# ---------------------------------------------------------------- math.floor / ceil / trunc of a run-time scalar
@mg.mgpu_kernel(out_shape=lambda x, f, n: (S((5,), x.dtype), S((7,), I32)))
def math_rounded_index(x, f, n, out, ints):
  g = f[0]
  out[0] = x[math.floor(g)]
  out[1] = x[math.ceil(g * 2.0) - 1]
  out[2] = x[math.trunc(f[1].astype(jnp.bfloat16)) + 8]
  out[3] = x.at[ml.ds(math.floor(g), 4)][...].sum()
  out[4] = x[math.floor(n[0] / 3) + 8]                 # of an integer quotient: n // 3, exactly
  ints[0] = math.floor(f[1])
  ints[1] = math.ceil(f[1])
  ints[2] = math.trunc(f[1])
  ints[3] = math.ceil(n[1] / 64)                     # of an integer quotient: ml.cdiv(n, 64), exactly
  ints[4] = math.floor(n[1] / 64)
  ints[5] = math.floor(n[0])                         # of an integer: itself
  ints[6] = math.ceil(n[0] / -4)


def _math_rounded_want(x, fa, na):
  g, h = float(fa[0]), float(fa[1])
  hb = float(np.asarray(fa[1:2]).astype(BF16)[0])
  n0, n1 = int(na[0]), int(na[1])
  out = [x[math.floor(g)], x[math.ceil(float(np.float32(g) * np.float32(2))) - 1], x[math.trunc(hb) + 8],
         x[math.floor(g):math.floor(g) + 4].sum(), x[n0 // 3 + 8]]
  ints = [math.floor(h), math.ceil(h), math.trunc(h), -(-n1 // 64), n1 // 64, n0, -(n0 // 4)]
  return np.array(out, np.float32), np.array(ints, np.int32)


def test_math_floor_ceil_trunc_of_a_run_time_scalar_are_ints_that_index():
  """math.floor(f) of a float scalar was MG003 (hinted ml.floor, whose float result no index takes); Python's
  math.floor, ceil and trunc give ints: an int32 here, the whole number toward -inf, +inf or 0. Of a true division
  of integers (math.ceil(n / 64)) the exact integer quotient (n // 64, ml.cdiv(n, 64)): float32's rounds past
  2**24."""
  x = np.arange(16, dtype=np.float32) * 10 + 1
  for f, n in (([2.6, -1.5], [7, 2**24 + 1]), ([3.0, 1.25], [-5, 64]), ([0.5, -2.0], [0, -65])):
    fa, na = np.array(f, np.float32), np.array(n, np.int32)
    got, ints = math_rounded_index(x, fa, na, interpret=True)
    want, want_ints = _math_rounded_want(x, fa, na)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, err_msg=str(f))
    np.testing.assert_array_equal(np.asarray(ints), want_ints, err_msg=str((f, n)))
  ir = math_rounded_index.typed_ir(S((16,), F32), S((2,), F32), S((2,), I32))
  assert "floor" in ir and "ceil" in ir and "scalar<int32> = cast" in ir, ir
  jax.export.export(jax.jit(math_rounded_index), platforms=["cuda"])(S((16,), F32), S((2,), F32), S((2,), I32))
  # Python's math.floor takes one number, not an array: of a register tensor it stays MG003, hinting ml.floor
  expect(math_floor_of_a_tensor, [S((128,), F32)], mg.KernelTypeError, "math.floor(x[...])",
         "floor cannot take a register tensor inside a kernel",
         hint="use ml.floor: kernels call ml.* functions on register values")


@mg.mgpu_kernel(out_shape=lambda x: x)
def math_floor_of_a_tensor(x, o):
  o[...] = math.floor(x[...])


@pytest.mark.gpu
def test_gpu_math_floor_ceil_trunc_index():
  x = np.arange(16, dtype=np.float32) * 10 + 1
  for f, n in (([2.6, -1.5], [7, 2**24 + 1]), ([3.0, 1.25], [-5, 64]), ([0.5, -2.0], [0, -65])):
    fa, na = np.array(f, np.float32), np.array(n, np.int32)
    got, ints = math_rounded_index(jnp.asarray(x), jnp.asarray(fa), jnp.asarray(na))
    want, want_ints = _math_rounded_want(x, fa, na)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, err_msg=str(f))
    np.testing.assert_array_equal(np.asarray(ints), want_ints, err_msg=str((f, n)))


# ---------------------------------------------------------------- strided views x.at[::2], read and written whole
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0] // 2, x.shape[1]), x.dtype), S((16,), x.dtype),
                                     S((x.shape[0], x.shape[1]), x.dtype)))
def strided_views(x, even_minus_odd, picks, o):
  ev, od = x.at[::2], x.at[1::2]                       # (32, 32) views of a (64, 32) input
  even_minus_odd[...] = ev[...] - od[...] * ev.shape[0]
  picks[0:8] = x.at[3, 1::2][0:8]                      # a view indexed again: x[3, 1:17:2]
  picks[8:16] = x.at[0, ::-1].at[::2][...][0:8]        # views of views compose, as numpy's slices
  o[...] = ml.zeros(o.shape, o.dtype)
  o.at[::2][...] = od[...]                             # written through a view: a scatter at rows 0, 2, ...
  o.at[1::2].at[:, 8:16][...] = ev[:, 0:8] * 2
  o[5, ::4] = x.at[2, ml.ds(1, 8, 3)][...]             # Pallas's pl.ds(start, size, stride) of a static start


def _strided_views_want(x):
  o = np.zeros_like(x)
  o[::2] = x[1::2]
  o[1::2][:, 8:16] = x[::2][:, 0:8] * 2
  o[5, ::4] = x[2, 1:23:3]
  return x[::2] - x[1::2] * 32, np.concatenate([x[3, 1::2][0:8], x[0, ::-1][::2][0:8]]), o


def test_strided_views_of_refs_read_and_write_as_the_plain_subscripts():
  """x.at[::2] was MG003 (views take steps of 1), where x[::2] reads (the window that covers it, then the strided
  view in registers) and out[::2] = v writes (a scatter at those rows): a strided view is held as its ref and
  index, read or written whole as the plain subscript, with .shape as numpy's; static views and indices of it
  compose (x.at[::2].at[0:8] is x.at[0:16:2])."""
  x = np.random.default_rng(4).standard_normal((64, 32)).astype(np.float32)
  for got, want in zip(strided_views(x, interpret=True), _strided_views_want(x)):
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
  jax.export.export(jax.jit(strided_views), platforms=["cuda"])(S((64, 32), F32))


@mg.mgpu_kernel(out_shape=lambda v, w, i: (S((16, 40), v.dtype), S((4, 24, 40), v.dtype)))
def strided_row_stores(v, w, i, grid, cube):
  grid[...] = ml.zeros(grid.shape, grid.dtype)
  grid[7, ::5] = v[...]                                # one row's every 5th column
  grid[i[0], 2::5] = v[...] * 2                        # a run-time row
  grid[-1, 4::5] = 1.5                                 # a number, a row from the end
  cube[...] = ml.zeros(cube.shape, cube.dtype)
  cube[1, 8:, 3::5] = w[...]                           # numpy's basic indexing: (16, 8), not the axes reordered
  cube[2, 5:21, ::5] = w[...] * 2                      # beside a window of another axis


def _strided_row_stores_want(v, w, i):
  grid, cube = np.zeros((16, 40), v.dtype), np.zeros((4, 24, 40), v.dtype)
  grid[7, ::5] = v
  grid[i[0], 2::5] = v * 2
  grid[-1, 4::5] = 1.5
  cube[1, 8:, 3::5] = w
  cube[2, 5:21, ::5] = w * 2
  return grid, cube


def test_strided_stores_beside_an_index_of_another_axis():
  """out[::2] = v wrote (a scatter at those positions) only with every other axis whole: grid[7, ::5] = v (an int or
  a run-time row beside the step) and cube[1, 8:, 3::5] = w were MG003. The other axes' ints and windows are taken
  as a view first (an index array beside an int would move its axis first, where numpy's basic indexing keeps it),
  then the stepped axis is the scatter's."""
  rng = np.random.default_rng(5)
  v, w = rng.standard_normal(8).astype(np.float32), rng.standard_normal((16, 8)).astype(np.float32)
  for row in (3, 7):
    i = np.array([row], np.int32)
    for got, want in zip(strided_row_stores(v, w, i, interpret=True), _strided_row_stores_want(v, w, i)):
      np.testing.assert_array_equal(np.asarray(got), want)
  jax.export.export(jax.jit(strided_row_stores), platforms=["cuda"])(S((8,), F32), S((16, 8), F32), S((1,), I32))


@mg.mgpu_kernel(out_shape=lambda x: S((16,), x.dtype))
def strided_view_masked(x, o):
  o[...] = x.at[::2].load(mask=ml.arange(16) < 10, other=0.0)


def test_a_strided_view_used_otherwise_says_to_index_the_ref():
  """A strided view is read or written whole; a masked load (or a TMA copy, a .T) through it cannot move a window
  of consecutive elements: a KernelTypeError at the view, naming the plain subscript."""
  expect(strided_view_masked, [S((32,), F32)], mg.KernelTypeError, "x.at[::2].load",
         "x.at[::2] is a strided view (its elements are not consecutive in memory): it is read whole ([...]) or"
         " written whole ([...] = v), not used through .load",
         hint="index the ref itself in one subscript, x[::2] (a read) or x[::2] = v (a write of a GMEM output);"
              " for a masked or TMA access, move the step-1 window that covers the elements and slice the register"
              " tensor, or give the array an axis of the step outside the kernel (x.reshape(..., n // k, k)) and"
              " index it with an int")


@pytest.mark.gpu
def test_gpu_strided_views_and_row_stores():
  x = np.random.default_rng(4).standard_normal((64, 32)).astype(np.float32)
  for got, want in zip(strided_views(jnp.asarray(x)), _strided_views_want(x)):
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
  rng = np.random.default_rng(5)
  v, w = rng.standard_normal(8).astype(np.float32), rng.standard_normal((16, 8)).astype(np.float32)
  i = np.array([3], np.int32)
  for got, want in zip(strided_row_stores(jnp.asarray(v), jnp.asarray(w), jnp.asarray(i)),
                       _strided_row_stores_want(v, w, i)):
    np.testing.assert_array_equal(np.asarray(got), want)


# ---------------------------------------------------------------- numbers stored into windows no register tensor holds
@mg.mgpu_kernel(out_shape=lambda x, s: (x, S((3, 24, 40), x.dtype), S((9, 9), I32), S((5, 20), x.dtype)))
def odd_fills(x, s, o, cube, small, stat):
  o[...] = x[...]
  o[0:33] = 0                                          # 33 elements: [0:32] and [25:33]
  o[40:85] = x[0]                                      # a run-time scalar
  o[s[0]:s[0] + 37] = -1.5                             # at a run-time start
  buf = ml.smem((64,), x.dtype)
  buf[...] = x[0:64]
  buf[5:50] = 2.0                                      # in SMEM
  o[100:164] = buf[...]
  cube[...] = 0.5                                      # a whole output of 2880 elements
  cube[1, 3:20, 2:39] = ml.zeros((17, 37), cube.dtype)  # ml.zeros at the window's shape: its number
  small[...] = -1
  small[2:7, 1:8] = 3
  stat[...] = ml.full(stat.shape, s[1].astype(stat.dtype), stat.dtype)


def _odd_fills_want(x, s):
  o = x.copy()
  o[0:33] = 0
  o[40:85] = x[0]
  o[s[0]:s[0] + 37] = -1.5
  buf = x[0:64].copy()
  buf[5:50] = 2
  o[100:164] = buf
  cube = np.full((3, 24, 40), 0.5, x.dtype)
  cube[1, 3:20, 2:39] = 0
  small = np.full((9, 9), -1, np.int32)
  small[2:7, 1:8] = 3
  return o, cube, small, np.full((5, 20), s[1], x.dtype)


@mg.mgpu_kernel(out_shape=lambda x: S((33,), BF16))
def odd_fill_of_another_dtype(x, o):
  o[...] = ml.zeros((33,), F32)


def test_a_number_stored_into_a_window_no_register_tensor_holds_fills_it():
  """o[0:33] = 0 was MG204 (the number made into a (33,) vector, which registers do not hold; probe 45h stored up to
  32 such elements one at a time): the window is covered by windows registers hold, overlapping at the end (a
  number stored twice is the same), along the last axis [0:32] and [n - 8:n], along the rows multiples of the rows a
  tile needs; in GMEM and SMEM, at static and run-time starts. ml.zeros/ml.full made at the window's shape and
  stored whole is its number (of another dtype it keeps its error)."""
  rng = np.random.default_rng(6)
  for dt in (np.float32, BF16):
    x = rng.standard_normal(200).astype(dt)
    for start in (7, 150):
      s = np.array([start, 3], np.int32)
      for got, want in zip(odd_fills(x, s, interpret=True), _odd_fills_want(x, s)):
        np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32), err_msg=str(start))
  jax.export.export(jax.jit(odd_fills), platforms=["cuda"])(S((200,), BF16), S((2,), I32))
  expect(odd_fill_of_another_dtype, [S((4,), F32)], mg.StoreDtypeError, "o[...] = ml.zeros",
         "cannot store ml.zeros((33,), F32) (float32) into o (GMEM, bfloat16): no implicit conversion")


@pytest.mark.gpu
def test_gpu_odd_fills():
  rng = np.random.default_rng(6)
  for dt in (np.float32, BF16):
    x = rng.standard_normal(200).astype(dt)
    s = np.array([150, 3], np.int32)
    for got, want in zip(odd_fills(jnp.asarray(x), jnp.asarray(s)), _odd_fills_want(x, s)):
      np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


# ---------------------------------------------------------------- copies between windows no register tensor holds
@mg.mgpu_kernel(out_shape=lambda x, y: (S((32, 24), x.dtype), S((9, 9), x.dtype), S((5, 20), x.dtype), y),
                grid=lambda x, y: (x.shape[0] // 16,))
def odd_copies(x, y, o, corner, stat, flat):
  p = ml.program_id(0)
  buf = ml.smem((16, 24), x.dtype)
  buf[...] = x[ml.ds(p * 16, 16), :]
  o[ml.ds(p * 16, 16), :] = x[ml.ds(p * 16, 16), :] * 2
  o[ml.ds(p * 16 + 2, 9), 3:20] = buf[5:14, 1:18]      # SMEM -> GMEM, (9, 17), at a run-time row
  if p == 0:
    v = x[0:16, :] * 3
    corner[...] = v[0:9, 0:9]                          # a register slice (through its SMEM scratch)
    stat[...] = v[3:8, 4:24]
    a = ml.smem((64,), y.dtype)
    b = ml.smem((64,), y.dtype)
    a[...] = y[...]
    b[...] = y[...] * 2
    b[0:33] = a[3:36]                                  # SMEM -> SMEM
    flat[...] = b[...]
    flat[40:63] = a[0:23]


def _odd_copies_want(x, y):
  o = x * 2
  for p in range(2):
    o[p * 16 + 2:p * 16 + 11, 3:20] = x[p * 16 + 5:p * 16 + 14, 1:18]
  v = x[0:16] * 3
  flat = y * 2
  flat[0:33] = y[3:36]
  flat[40:63] = y[0:23]
  return o, v[0:9, 0:9], v[3:8, 4:24], flat


@mg.mgpu_kernel(out_shape=lambda y: y, input_output_aliases={0: 0})
def odd_copy_within_an_aliased_input(y, o):
  o[0:33] = y[3:36]                                    # (y is o's memory: not copied in pieces)


@mg.mgpu_kernel(out_shape=lambda y: y)
def odd_copy_within_a_buffer(y, o):
  a = ml.smem((64,), y.dtype)
  a[...] = y[...]
  a[0:33] = a[3:36]                                    # (pieces would read what earlier pieces wrote)
  o[...] = a[...]


def test_a_window_no_register_tensor_holds_copies_in_pieces():
  """o[0:9, 3:20] = buf[5:14, 1:18] (SMEM), b[0:33] = a[3:36] and corner[...] = v[0:9, 0:9] (a register slice, read
  from its SMEM scratch) were MG204 at the read: a window read whole and stored at once into a window of its shape
  of another buffer is read and stored in the pieces that cover it (as a fill). A copy within one buffer is not
  copied in pieces (overlapping pieces would read what earlier ones wrote): it kept its MG204 until probe 69b, which
  reads the odd SMEM window whole, through the buffer rows it lies in, before the store."""
  rng = np.random.default_rng(7)
  for dt in (np.float32, BF16):
    x, y = rng.standard_normal((32, 24)).astype(dt), rng.standard_normal(64).astype(dt)
    for got, want in zip(odd_copies(x, y, interpret=True), _odd_copies_want(x, y)):
      np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
  jax.export.export(jax.jit(odd_copies), platforms=["cuda"])(S((32, 24), BF16), S((64,), BF16))
  want = y.copy()
  want[0:33] = y[3:36].copy()
  np.testing.assert_array_equal(np.asarray(odd_copy_within_a_buffer(y, interpret=True), np.float32),
                                np.asarray(want, np.float32))
  jax.export.export(jax.jit(odd_copy_within_a_buffer), platforms=["cuda"])(S((64,), BF16))
  want = y.copy()
  want[0:33] = y[3:36].copy()
  np.testing.assert_array_equal(np.asarray(odd_copy_within_an_aliased_input(y, interpret=True), np.float32),
                                np.asarray(want, np.float32))


@pytest.mark.gpu
def test_gpu_odd_copies():
  rng = np.random.default_rng(7)
  for dt in (np.float32, BF16):
    x, y = rng.standard_normal((32, 24)).astype(dt), rng.standard_normal(64).astype(dt)
    for got, want in zip(odd_copies(jnp.asarray(x), jnp.asarray(y)), _odd_copies_want(x, y)):
      np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


# ---------------------------------------------------------------- jnp.roll of a vector: ml.roll's hint
@mg.mgpu_kernel(out_shape=lambda x: x)
def jnp_roll_of_a_vector(x, o):
  o[...] = jnp.roll(x[...], 3)


@mg.mgpu_kernel(out_shape=lambda x: x)
def ml_roll_of_a_vector(x, o):
  o[...] = ml.roll(x[...], 3)


def test_jnp_roll_of_a_vector_hints_ml_roll():
  """jnp.roll(v, 3) of a vector (no axis) was hinted to read shifted windows from memory, where ml.roll(v, 3), the
  hint a tile's jnp.roll(t, 3, axis=1) gets, computes it (any length a vector takes: 40 here)."""
  x = np.random.default_rng(8).standard_normal(40).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(ml_roll_of_a_vector(x, interpret=True)), np.roll(x, 3))
  # (the call itself computes as ml.roll since probe 46i)
  np.testing.assert_array_equal(np.asarray(jnp_roll_of_a_vector(x, interpret=True)), np.roll(x, 3))


# ---------------------------------------------------------------- 16-bit strided stores (a plain scatter's stores)
@mg.mgpu_kernel(out_shape=lambda x, i: (x, S((6, x.shape[1]), x.dtype)))
def rope_interleave_16bit(x, i, o, rows):
  a, b = x[:, 0::2], x[:, 1::2]
  o[:, 0::2] = -b                                      # RoPE's rotate-half, interleaved, written back in place
  o[:, 1::2] = a
  rows[...] = ml.zeros(rows.shape, rows.dtype)
  rows[i[0], 1::2] = a[3]


def _rope_interleave_want(x, i):
  o = np.empty_like(x)
  o[:, 0::2], o[:, 1::2] = -x[:, 1::2], x[:, 0::2]
  rows = np.zeros((6, x.shape[1]), x.dtype)
  rows[i[0], 1::2] = x[3, 0::2]
  return o, rows


def test_a_16_bit_strided_store_is_plain_stores_not_paired_atomics():
  """o[:, 1::2] = a of bfloat16 was MG204 ("ml.atomic_set ... updates pairs of neighbouring elements"): a plain
  scatter (out[1::2] = v, out[ids, :] = v) stores each element whole, which 16-bit floats take singly; only atomic
  max and min need Hopper's paired `red`."""
  x = np.random.default_rng(9).standard_normal((64, 64)).astype(BF16)
  i = np.array([4], np.int32)
  for got, want in zip(rope_interleave_16bit(x, i, interpret=True), _rope_interleave_want(x, i)):
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
  jax.export.export(jax.jit(rope_interleave_16bit), platforms=["cuda"])(S((64, 64), BF16), S((1,), I32))


@pytest.mark.gpu
def test_gpu_16_bit_strided_stores():
  for dt in (BF16, np.float16):
    x = np.random.default_rng(9).standard_normal((64, 64)).astype(dt)
    i = np.array([4], np.int32)
    for got, want in zip(rope_interleave_16bit(jnp.asarray(x), jnp.asarray(i)), _rope_interleave_want(x, i)):
      np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


@mg.mgpu_kernel(out_shape=lambda x, v: x)
def strided_store_of_a_ref(x, v, o):
  o[...] = x[...]
  o[1::2] = v


def test_a_ref_stored_through_a_step_says_to_read_it():
  """o[1::2] = v of a ref v (its [...] forgotten) said "the scatter adds a register value" with the atomic call's
  hint: a plain scatter stores, and the hint reads the ref."""
  expect(strided_store_of_a_ref, [S((64,), F32), S((32,), F32)], mg.KernelTypeError, "o[1::2]",
         "the scatter stores a register value, got a GMEM ref", hint="read the ref into registers first: ... = v[...]")


# ---------------------------------------------------------------- x[::-1] of an odd length: a hint that works
@mg.mgpu_kernel(out_shape=lambda x: x)
def reversed_odd(x, o):
  o[...] = x[::-1]


@mg.mgpu_kernel(out_shape=lambda x: x)
def reversed_odd_as_hinted(x, o):
  v = x.at[ml.ds(-4, 104)].load(mask=ml.arange(104) >= 4, other=0)[::-1]
  o.at[ml.ds(0, 104)].store(v, mask=ml.arange(104) < 100)


def test_a_reversed_read_of_an_odd_length_hints_a_padded_window():
  """x[::-1] of a (100,) array was hinted "slice a tile 32 times as long" (the multiple of 128 of a tile, where a
  vector needs one of 8, and no longer slice of x exists): the hint reverses outside the kernel or a masked window
  of 104 ending at x's end, whose first 100 elements are the reversal; followed, it computes."""
  expect(reversed_odd, [S((100,), F32)], mg.LayoutError, "x[::-1]",
         "x[::-1] of shape (100,) gives shape (100,), which registers cannot hold: a 1-D vector needs a multiple of 8"
         " elements",
         hint="reverse outside the kernel (call the kernel on x[::-1], which XLA fuses into the producer), or reverse"
              " a window of 104 that ends at the end, masked: v = x.at[ml.ds(-4, 104)].load(mask=ml.arange(104) >= 4,"
              " other=0)[::-1], whose first 100 elements are x[::-1]; store them with .store(v, mask=ml.arange(104) <"
              " 100) into a window of 104")
  x = np.random.default_rng(10).standard_normal(100).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(reversed_odd_as_hinted(x, interpret=True)), x[::-1])


# ---------------------------------------------------------------- a run-time column or row of a small tile
@mg.mgpu_kernel(out_shape=lambda x, y, i: (S((x.shape[0],), x.dtype), S((y.shape[1],), y.dtype),
                                           S((y.shape[0],), y.dtype)))
def runtime_column_of_a_small_tile(x, y, i, col, row, ycol):
  v = x[...] * 2                                       # (4, 16): 64 elements, held as their vector
  col[...] = v[:, i[0]]
  w = y[...] + 1                                       # (16, 5)
  row[...] = w[i[1], :]
  ycol[...] = w[:, i[1] - 1]


def _runtime_column_want(x, y, i):
  clamp = lambda j, n: min(max(j + n if j < 0 else j, 0), n - 1)
  w = y.astype(np.float32) + 1
  return (x[:, clamp(int(i[0]), x.shape[1])] * 2, w[clamp(int(i[1]), y.shape[0])],
          w[:, clamp(int(i[1]) - 1, y.shape[1])])


def test_a_run_time_column_of_a_small_tile_picks_its_elements():
  """v[:, i[0]] of a (4, 16) tile (too small for a register tensor of its shape: held as its elements' vector) was
  MG204 (only static indices picked its elements); a run-time index picks them too, through SMEM (or among a
  few-element statistic's scalars), counted from the end where negative and clamped past either end, as jnp's."""
  rng = np.random.default_rng(11)
  x, y = rng.standard_normal((4, 16)).astype(np.float32), rng.standard_normal((16, 5)).astype(BF16)
  for i in ([3, 2], [-1, 4], [20, 0], [15, -3]):
    ia = np.array(i, np.int32)
    for got, want in zip(runtime_column_of_a_small_tile(x, y, ia, interpret=True), _runtime_column_want(x, y, ia)):
      np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=1e-2, err_msg=str(i))
  jax.export.export(jax.jit(runtime_column_of_a_small_tile), platforms=["cuda"])(
      S((4, 16), F32), S((16, 5), BF16), S((2,), I32))


@pytest.mark.gpu
def test_gpu_runtime_column_of_a_small_tile():
  rng = np.random.default_rng(11)
  x, y = rng.standard_normal((4, 16)).astype(np.float32), rng.standard_normal((16, 5)).astype(BF16)
  for i in ([3, 2], [-1, 4], [20, 0]):
    ia = np.array(i, np.int32)
    got = runtime_column_of_a_small_tile(jnp.asarray(x), jnp.asarray(y), jnp.asarray(ia))
    want = runtime_column_of_a_small_tile(x, y, ia, interpret=True)
    for g, w in zip(got, want):
      np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(w, np.float32), err_msg=str(i))


# ---------------------------------------------------------------- a short column of a GMEM array, read or written
@mg.mgpu_kernel(out_shape=lambda x, j: (S((x.shape[0], 4), x.dtype), S((3, 8, 5), x.dtype)))
def short_columns(x, j, o, cube):
  v = x[...] * 2
  for c in range(4):
    o[:, c] = x[:, c * 2] + v[:, c]                    # 8 rows a column: a gather and a scatter, as jnp's
  cube[...] = ml.zeros(cube.shape, cube.dtype)
  cube[1, :, j[0]] = x[0:8, 3]                         # a run-time column of one row block


def _short_columns_want(x, j):
  o = np.stack([x[:, c * 2] + x[:, c] * 2 for c in range(4)], 1)
  cube = np.zeros((3, 8, 5), x.dtype)
  cube[1, :, j[0]] = x[0:8, 3]
  return o, cube


def test_a_short_column_of_an_array_is_a_gather_and_a_scatter():
  """x[:, j] and o[:, j] = v of 8 rows were MG204 (a window whose elements lie a row apart moves a multiple of 128
  elements, one a thread): fewer (a multiple of 8 but not of 128) are gathered and scattered, x[ml.arange(8), j], as
  jnp's."""
  rng = np.random.default_rng(12)
  for dt in (np.float32, BF16):
    x = rng.standard_normal((8, 16)).astype(dt)
    for jj in (0, 4):
      j = np.array([jj], np.int32)
      for got, want in zip(short_columns(x, j, interpret=True), _short_columns_want(x, j)):
        np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=1e-2)
  jax.export.export(jax.jit(short_columns), platforms=["cuda"])(S((8, 16), BF16), S((1,), I32))


@pytest.mark.gpu
def test_gpu_short_columns():
  rng = np.random.default_rng(12)
  for dt in (np.float32, BF16):
    x = rng.standard_normal((8, 16)).astype(dt)
    j = np.array([4], np.int32)
    got, want = short_columns(jnp.asarray(x), jnp.asarray(j)), short_columns(x, j, interpret=True)
    for g, w in zip(got, want):
      np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(w, np.float32))
