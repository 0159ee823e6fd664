"""Probe 31b (scientific and HPC kernels: stencils, convolutions, sparse products, histograms,
scans, transposes of odd shapes, complex pairs, Monte Carlo, uint8 images, odd reductions, float64
inputs): hints that did not work when followed."""
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect, expect_call

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- a red-black update in place
@mg.mgpu_kernel(out_shape=lambda u, *, color: u, grid=lambda u, *, color: (u.shape[0] // 128,),
                input_output_aliases={0: 0})
def red_black(u, out, *, color: ml.constexpr):
  i = ml.program_id(0)
  idx = i * 128 + ml.arange(128)
  left = u.at[ml.ds(i * 128 - 1, 128)].load(mask=idx >= 1, other=0.0)
  right = u.at[ml.ds(i * 128 + 1, 128)].load(mask=idx + 1 < u.shape[0], other=0.0)
  out.at[ml.ds(i * 128, 128)].store(0.5 * (left + right), mask=idx % 2 == color)


@mg.mgpu_kernel(out_shape=lambda u, *, color: u, grid=lambda u, *, color: (u.shape[0] // 128,),
                input_output_aliases={0: 0})
def red_black_masked(u, out, *, color: ml.constexpr):
  i = ml.program_id(0)
  idx = i * 128 + ml.arange(128)
  left = u.at[ml.ds(i * 128 - 1, 128)].load(mask=(idx % 2 == color) & (idx >= 1), other=0)
  right = u.at[ml.ds(i * 128 + 1, 128)].load(mask=(idx % 2 == color) & (idx + 1 < u.shape[0]), other=0)
  out.at[ml.ds(i * 128, 128)].store(0.5 * (left + right), mask=idx % 2 == color)


def test_a_read_racing_with_a_masked_store_in_place_hints_the_masked_read():
  """The hint said only to drop input_output_aliases: a red-black update then leaves the other
  colour's elements unwritten (MG602). Masking the read as the store is masked is the fix."""
  e = expect(red_black, [S((1024,), F32)], mg.RaceError, "u.at[ml.ds(i * 128 + 1, 128)]",
             "program (0, 0, 0) reads u[128], the memory of out (aliased), while program (1, 0, 0) writes"
             " out[128]: programs run in no fixed order, so the value read depends on timing", color=0)
  assert e.hint.endswith("; where each program writes only the elements its mask keeps (a red-black or"
                         " checkerboard update) and uses what it reads only there, mask the read the same way,"
                         " .load(mask=(idx % 2 == color) & (idx + 1 < u.shape[0]), other=0): a masked-off"
                         " element is never read"), e.hint


@pytest.mark.parametrize("color", [0, 1])
def test_the_masked_red_black_update_builds_and_matches_numpy(color):
  x = jnp.asarray(np.random.default_rng(0).standard_normal(1024), F32)
  y = np.asarray(red_black_masked(x, color=color, interpret=True))
  p = np.pad(np.asarray(x), 1)
  want = np.where(np.arange(1024) % 2 == color, 0.5 * (p[:-2] + p[2:]), np.asarray(x))
  np.testing.assert_allclose(y, want, rtol=1e-6)
  assert "mosaic_gpu" in str(_export(red_black_masked, S((1024,), F32), color=color))


# ---------------------------------------------------------------- TMA tiles of an image whose rows are not 16 bytes
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def invert_tiles(x, out):
  per_row = ml.cdiv(x.shape[1], 128)
  a = ml.smem((16, 128))
  b = ml.smem((16, 128))
  for t in ml.range(ml.program_id(0), ml.cdiv(x.shape[0], 16) * per_row, ml.num_programs(0), stages=2):
    rows, cols = ml.ds(t // per_row * 16, 16), ml.ds(t % per_row * 128, 128)
    ml.copy(x.at[rows, cols], a)
    b[...] = (255 - a[...].astype(jnp.int32)).astype(jnp.uint8)
    ml.copy(b, out.at[rows, cols])


def test_a_tma_copy_of_rows_not_16_bytes_apart_hints_the_padding_and_a_masked_read():
  """The hint said "pad the array's last dimension, or read it into registers with ref[...]": an
  unmasked read of the last tile, past the array's end, is MG203, and the padding was not said."""
  expect(invert_tiles, [S((100, 999), jnp.uint8)], mg.TmaLimitError, "ml.copy(x.at[rows, cols], a)",
         "TMA copies need x.at[rows, cols]'s rows to be a multiple of 16 bytes apart; its last dimension is"
         " 999 x 1 bytes",
         hint="pad x's rows to 1008 elements outside the kernel, jnp.pad(x, ((0, 0), (0, 9))), and slice the"
              " result back; or read the window into registers instead, x.at[rows, cols][...]"
              " (x.at[rows, cols].load(mask=..., other=0) where it may run past x's end; a pipelined loop,"
              " ml.range(..., stages=), needs a TMA load: make it a plain range)")
  expect(invert_tiles, [S((16, 99), F32)], mg.TmaLimitError, "ml.copy(x.at[rows, cols], a)",
         "TMA copies need x.at[rows, cols]'s rows to be a multiple of 16 bytes apart; its last dimension is"
         " 99 x 4 bytes")


def test_the_padded_image_inverts_as_numpy_does():
  img = np.random.default_rng(1).integers(0, 256, (100, 999)).astype(np.uint8)
  y = invert_tiles(jnp.pad(jnp.asarray(img), ((0, 0), (0, 9))), interpret=True)[:, :999]
  np.testing.assert_array_equal(np.asarray(y), 255 - img)
  assert "mosaic_gpu" in str(_export(invert_tiles, S((100, 1008), jnp.uint8)))


# ---------------------------------------------------------------- 2x2 pooling of a uint8 image in registers
@mg.mgpu_kernel(out_shape=lambda x, *, op: S((x.shape[0] // 2, x.shape[1] // 2), x.dtype),
                grid=lambda x, *, op: (x.shape[0] // 2,))
def pool_pairs(x, out, *, op: ml.constexpr):
  r = ml.program_id(0)
  a = x.at[2 * r][...].reshape(x.shape[1] // 2, 2)
  b = x.at[2 * r + 1][...].reshape(x.shape[1] // 2, 2)
  if op == "max":
    out.at[r][...] = ml.max(ml.maximum(a, b), axis=1)
  else:
    out.at[r][...] = ml.min(ml.minimum(a, b), axis=1)


def test_uint8_pairs_pooled_by_a_reshape_compile():
  for op in ("max", "min"):
    builds(pool_pairs, S((16, 256), jnp.uint8), op=op)     # (now compiled: tiles narrower than a warp take fewer lanes a row, tests/test_narrow_rows.py)


# ---------------------------------------------------------------- a filter's taps passed as a jax array constexpr
@mg.mgpu_kernel(out_shape=lambda x, *, taps: x, grid=lambda x, *, taps: (ml.cdiv(x.shape[0], 128),))
def convolve(x, out, *, taps: ml.constexpr):
  i = ml.program_id(0)
  idx = i * 128 + ml.arange(128)
  acc = ml.zeros((128,), jnp.float32)
  for k in ml.static_range(len(taps)):
    j = idx + k - len(taps) // 2
    acc = acc + taps[k] * x.at[ml.ds(i * 128 + k - len(taps) // 2, 128)].load(mask=(j >= 0) & (j < x.shape[0]),
                                                                               other=0.0)
  out.at[ml.ds(i * 128, 128)].store(acc, mask=idx < x.shape[0])


def test_a_jax_array_of_taps_as_a_constexpr_hints_numpy_or_a_tuple():
  """The hint was `taps=v.item()`, which raises for an array of three taps."""
  taps = jnp.asarray([0.25, 0.5, 0.25], F32)
  x = jnp.asarray(np.random.default_rng(2).standard_normal(1000), F32)
  with pytest.raises(mg.SignatureError) as info:
    convolve(x, taps=taps, interpret=True)
  assert info.value.message.endswith("constexpr taps is a jax array (float32[3]); a constexpr must be a Python value")
  assert info.value.hint == ("pass its values as a NumPy array, taps=np.asarray(v), or a tuple,"
                             " taps=tuple(v.tolist()) (v the array you passed: float32[3]); or, for values known"
                             " only at run time, pass it as an input of the kernel and read its elements there")
  want = np.convolve(np.asarray(x), np.asarray(taps)[::-1], mode="same")
  for hinted in (np.asarray(taps), tuple(taps.tolist())):
    np.testing.assert_allclose(np.asarray(convolve(x, taps=hinted, interpret=True)), want, rtol=1e-5, atol=1e-6)
  with pytest.raises(mg.SignatureError) as info:
    convolve(x, taps=jnp.float32(0.5), interpret=True)
  assert info.value.hint.startswith("pass a Python number or tuple, e.g. taps=v.item()")


# ---------------------------------------------------------------- complex arrays: (re, im) pairs of float32
@mg.mgpu_kernel(out_shape=lambda z: z)
def complex_square(z, out):
  out[...] = z[...] * z[...]


@mg.mgpu_kernel(out_shape=lambda re, im: S(re.shape, jnp.complex64))
def complex_out(re, im, out):
  out[...] = re[...]


@mg.mgpu_kernel(out_shape=lambda ar, ai, br, bi: (ar, ar))
def complex_product(ar, ai, br, bi, re, im):
  a, b, c, d = ar[...], ai[...], br[...], bi[...]
  re[...] = a * c - b * d
  im[...] = a * d + b * c


def test_a_complex_input_or_output_hints_its_real_and_imaginary_parts():
  """Both hints only listed the supported dtypes."""
  e = expect_call(complex_square, [S((128,), jnp.complex64)], mg.SignatureError, "def complex_square",
             "complex_square: input 0 (z) has dtype complex64, which kernels do not support")
  assert e.hint.startswith("pass its real and imaginary parts as two float32 inputs, jnp.real(z) and jnp.imag(z),"
                           " compute on the pairs (a product is (ar * br - ai * bi, ar * bi + ai * br)), and rebuild a"
                           " complex result outside the kernel, jax.lax.complex(re, im)"), e.hint
  e = expect(complex_out, [S((128,), F32)] * 2, mg.SignatureError, "out_shape=lambda re, im",
             "out_shape gives an output mgpu_dsl cannot make: unsupported dtype complex64")
  assert e.hint.startswith("make its real and imaginary parts two float32 outputs"), e.hint
  rng = np.random.default_rng(3)
  a = (rng.standard_normal(256) + 1j * rng.standard_normal(256)).astype(np.complex64)
  b = (rng.standard_normal(256) + 1j * rng.standard_normal(256)).astype(np.complex64)
  re, im = complex_product(jnp.real(a), jnp.imag(a), jnp.real(b), jnp.imag(b), interpret=True)
  np.testing.assert_allclose(np.asarray(jax.lax.complex(re, im)), a * b, rtol=1e-5, atol=1e-6)


_X64_LATE = textwrap.dedent('''
    import jax, jax.numpy as jnp, numpy as np, mgpu_dsl as mg
    from mgpu_dsl import language as ml

    @mg.mgpu_kernel(out_shape=lambda x: x)
    def dbl(x, out):
        out[...] = x[...] * 2

    x = np.arange(128, dtype=np.float64)
    assert dbl(x, interpret=True).dtype == jnp.float32      # float64 is float32 without x64
    jax.config.update("jax_enable_x64", True)
    try:
        dbl(x, interpret=True)
    except mg.SignatureError as e:
        assert "input 0 (x) has dtype float64" in e.message, e.message
        assert "x.astype(np.float32)" in e.hint, e.hint
    else:
        raise AssertionError("float64 accepted")
    try:
        mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct(x.shape, jnp.float64))(dbl.fn).check(
            jax.ShapeDtypeStruct((128,), jnp.float32))
    except mg.SignatureError as e:
        assert "y.astype(jnp.float64)" in e.hint, e.hint
    else:
        raise AssertionError("a float64 output accepted")
    print("ok")
''')


def test_float64_after_turning_x64_on_is_named_as_the_input_it_is(tmp_path):
  """Whether float64 is supported was cached from the first call, before x64 was on: the second call
  then failed later, as "dbl: an input mgpu_dsl cannot take: unsupported dtype float64", naming no
  input, with only the list of dtypes as its hint."""
  script = tmp_path / "x64_late.py"
  script.write_text(_X64_LATE)
  env = dict(os.environ, MGPU_DSL_CACHE_DIR="off", JAX_PLATFORMS="cpu")
  r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
  assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


# ---------------------------------------------------------------- a global max of signed floats with atomics
@mg.mgpu_kernel(out_shape=lambda x: S((), F32), grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def float_atomic_max(x, out):
  i = ml.program_id(0)
  idx = i * 128 + ml.arange(128)
  ml.atomic_max(out, ml.max(x.at[ml.ds(i * 128, 128)].load(mask=idx < x.shape[0], other=float("-inf"))))


@mg.mgpu_kernel(out_shape=lambda x: S((), jnp.int32), grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def float_atomic_max_as_int(x, out):
  i = ml.program_id(0)
  idx = i * 128 + ml.arange(128)
  b = ml.bitcast(ml.max(x.at[ml.ds(i * 128, 128)].load(mask=idx < x.shape[0], other=float("-inf"))), jnp.int32)
  ml.atomic_max(out, ml.where(b >= 0, b, b ^ 0x7FFFFFFF))


def test_a_float32_atomic_max_hints_keys_that_order_negative_floats_too():
  """The hint kept only non-negative floats as their int32 bits: a max of negative values (all of
  them below zero) came out wrong that way."""
  # (float_atomic_max was MG106 with this hint, which float_atomic_max_as_int follows; since probe 39c a float32
  # max works, as two integer maxima on the float's bits)
  rng = np.random.default_rng(4)
  for x in (rng.standard_normal(1000) - 10.0, rng.standard_normal(1000)):
    k = float_atomic_max_as_int(jnp.asarray(x, F32), interpret=True)
    got = jax.lax.bitcast_convert_type(jnp.where(k >= 0, k, k ^ 0x7FFFFFFF), jnp.float32)
    assert float(got) == np.float32(x).max()
    assert float(float_atomic_max(jnp.asarray(x, F32), interpret=True)) == np.float32(x).max()
  assert "mosaic_gpu" in str(_export(float_atomic_max_as_int, S((1000,), F32)))
  assert "mosaic_gpu" in str(_export(float_atomic_max, S((1000,), F32)))


# ---------------------------------------------------------------- stream compaction across programs
@mg.mgpu_kernel(out_shape=lambda x: (x, S((), jnp.int32)), grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def compact_with_old_value(x, out, count):
  i = ml.program_id(0)
  offs = i * 128 + ml.arange(128)
  v = x.at[ml.ds(i * 128, 128)].load(mask=offs < x.shape[0], other=0.0)
  keep = (v > 0) & (offs < x.shape[0])
  base = ml.atomic_add(count, ml.sum(keep))
  pos = base + ml.cumsum(keep, dtype=jnp.int32) - 1
  ml.atomic_add(out.at[ml.where(keep, pos, x.shape[0])], v)


@mg.mgpu_kernel(out_shape=lambda x: S((ml.cdiv(x.shape[0], 128),), jnp.int32), grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def count_kept(x, counts):
  i = ml.program_id(0)
  offs = i * 128 + ml.arange(128)
  v = x.at[ml.ds(i * 128, 128)].load(mask=offs < x.shape[0], other=0.0)
  counts[i] = ml.sum((v > 0) & (offs < x.shape[0]))


@mg.mgpu_kernel(out_shape=lambda x, offsets: x, grid=lambda x, offsets: (ml.cdiv(x.shape[0], 128),))
def place_kept(x, offsets, out):
  i = ml.program_id(0)
  offs = i * 128 + ml.arange(128)
  v = x.at[ml.ds(i * 128, 128)].load(mask=offs < x.shape[0], other=0.0)
  keep = (v > 0) & (offs < x.shape[0])
  pos = offsets[i] + ml.cumsum(keep, dtype=jnp.int32) - 1
  ml.atomic_add(out.at[ml.where(keep, pos, x.shape[0])], v)


def test_an_atomic_old_value_compacts_and_so_do_two_kernels():
  """The hint said "or read the array after a barrier in one program": programs have no barrier
  between them; a compaction across programs counts, scans outside, and places. Since probe 48c a single
  element's atomic_add returns its old value, so Triton's one-kernel compaction works too (the kept elements
  in the programs' order, whichever that is)."""
  x = jnp.asarray(np.random.default_rng(5).standard_normal(1000), F32)
  y1, n = compact_with_old_value(x, interpret=True)
  kept1 = np.asarray(x)[np.asarray(x) > 0]
  assert int(n) == len(kept1) and np.array_equal(np.sort(np.asarray(y1)[:len(kept1)]), np.sort(kept1))
  counts = count_kept(x, interpret=True)
  y = place_kept(x, jnp.cumsum(counts) - counts, interpret=True)
  kept = np.asarray(x)[np.asarray(x) > 0]
  np.testing.assert_array_equal(np.asarray(y)[:len(kept)], kept)
  np.testing.assert_array_equal(np.asarray(y)[len(kept):], 0)
  assert int(counts.sum()) == len(kept)
  assert "mosaic_gpu" in str(_export(place_kept, S((1000,), F32), S((8,), jnp.int32)))


# ---------------------------------------------------------------- a scalar stencil's neighbours outside the array
@mg.mgpu_kernel(out_shape=lambda x: x)
def scalar_left(x, out):
  for i in range(x.shape[0]):
    out[i] = x[i - 1] + x[i]


@mg.mgpu_kernel(out_shape=lambda x: x)
def scalar_right(x, out):
  for i in range(x.shape[0]):
    out[i] = x[i] + x[i + 1]


@mg.mgpu_kernel(out_shape=lambda x: x)
def scalar_left_hinted(x, out):
  for i in range(x.shape[0]):
    out[i] = ml.where(i - 1 >= 0, x[ml.maximum(i - 1, 0)], 0.0) + x[i]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def scalar_rows(x, out):
  r = ml.program_id(0)
  for j in range(x.shape[1]):
    out[r, j] = x[r, j + 1] - x[r, j]


def test_a_scalar_read_before_the_start_hints_the_lower_bound():
  """x[i - 1] at i = 0 was hinted `if i < x.shape[0]` and `ml.minimum(i, n - 1)`: the upper bound,
  which leaves the read at -1."""
  spec = [S((256,), F32)]
  e = expect(scalar_left, spec, mg.IndexOutOfBoundsError, "x[i - 1]", "x[-1] is read, outside x's shape (256,)")
  assert e.hint == ("guard the read (if i - 1 >= 0:) or clamp its index, x[ml.maximum(i - 1, 0)]"
                    " (ml.where(i - 1 >= 0, ..., 0.0) to read 0 there)")
  e = expect(scalar_right, [S((16,), F32)], mg.IndexOutOfBoundsError, "x[i + 1]",
             "x[16] is read, outside x's shape (16,)")
  assert e.hint == ("guard the read (if i + 1 < x.shape[0]:) or clamp its index, x[ml.minimum(i + 1, x.shape[0] - 1)]"
                    " (ml.where(i + 1 < x.shape[0], ..., 0.0) to read 0 there), or pass a longer x")
  e = expect(scalar_rows, [S((4, 16), F32)], mg.IndexOutOfBoundsError, "x[r, j + 1]",
             "x[0, 16] is read in program (0, 0, 0), outside x's shape (4, 16)")
  assert e.hint.startswith("guard the read (if j + 1 < x.shape[1]:) or clamp its index,"
                           " x[r, ml.minimum(j + 1, x.shape[1] - 1)]"), e.hint
  x = np.random.default_rng(6).standard_normal(256).astype(np.float32)
  y = scalar_left_hinted(jnp.asarray(x), interpret=True)
  np.testing.assert_allclose(np.asarray(y), x + np.concatenate([[0], x[:-1]]), rtol=1e-6)
  assert "mosaic_gpu" in str(_export(scalar_left_hinted, *spec))


# ---------------------------------------------------------------- jnp.roll, jnp.pad, jnp.convolve in a stencil
@mg.mgpu_kernel(out_shape=lambda x, *, fn: x)
def jnp_stencil(x, out, *, fn: ml.constexpr):
  v = x[...]
  if fn == "roll":
    out[...] = 0.5 * (jnp.roll(v, 1) + jnp.roll(v, -1))
  elif fn == "pad":
    p = jnp.pad(v, 1)
    out[...] = p[:-2] + p[2:]
  else:
    out[...] = jnp.convolve(v, v, mode="same")


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def stencil_as_hinted(x, out):
  s = ml.program_id(0) * 128
  n = 128
  j = s - 1 + ml.arange(n)
  left = x.at[ml.ds(s - 1, n)].load(mask=(j >= 0) & (j < x.shape[0]), other=0.0)
  j = s + 1 + ml.arange(n)
  right = x.at[ml.ds(s + 1, n)].load(mask=(j >= 0) & (j < x.shape[0]), other=0.0)
  wrapped = x[(s + ml.arange(n) - 1) % x.shape[0]]
  out.at[ml.ds(s, n)].store(left + right + wrapped, mask=s + ml.arange(n) < x.shape[0])


def test_jnp_shifts_in_a_kernel_hint_shifted_windows_and_wrapped_gathers():
  """jnp.roll, jnp.pad and jnp.convolve were hinted "kernels call ml.* functions on register
  values", none of which shifts a tile. jnp.pad's zeros compute since probe 51g."""
  e = expect(jnp_stencil, [S((256,), F32)], mg.KernelTypeError, "jnp.convolve(",
             "convolve cannot take a register tensor inside a kernel", fn="convolve")
  assert e.hint.startswith("sum the taps over shifted windows"), e.hint
  x = np.random.default_rng(7).standard_normal(1000).astype(np.float32)
  v = x[:256]         # a vector's jnp.roll computes as ml.roll since probe 46i (hinted so in probe 46a)
  pv = np.pad(v, 1)
  np.testing.assert_allclose(np.asarray(jnp_stencil(v, fn="pad", interpret=True)), pv[:-2] + pv[2:], rtol=1e-6)
  np.testing.assert_allclose(np.asarray(jnp_stencil(v, fn="roll", interpret=True)),
                             0.5 * (np.roll(v, 1) + np.roll(v, -1)), rtol=1e-6)
  p = np.pad(x, 1)
  np.testing.assert_allclose(np.asarray(stencil_as_hinted(jnp.asarray(x), interpret=True)),
                             p[:-2] + p[2:] + np.roll(x, 1), rtol=1e-6)
  assert "mosaic_gpu" in str(_export(stencil_as_hinted, S((1000,), F32)))


# ---------------------------------------------------------------- the last trip of a long loop
@mg.mgpu_kernel(out_shape=lambda x: x)
def forward_difference(x, out):
  for i in range(x.shape[0]):
    out[i] = x[i + 1] - x[i]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def row_shift(x, out):
  r = ml.program_id(0) * 8
  for c in range(x.shape[1] // 128):
    out.at[ml.ds(r, 8), ml.ds(c * 128, 128)][...] = x.at[ml.ds(r, 8), ml.ds(c * 128 + 1, 128)][...]


def test_a_read_past_the_end_on_a_long_loops_last_trip_is_found_while_compiling():
  """Past the evaluation budget only a loop's first trip was evaluated exactly: x[i + 1] at the last
  i (and a window one column past the end on the last trip) compiled and exported, read past the
  array on the GPU, and only interpret mode said so."""
  expect(forward_difference, [S((256,), F32)], mg.IndexOutOfBoundsError, "x[i + 1]",
         "x[256] is read, outside x's shape (256,)")
  e = expect(row_shift, [S((64, 8192), F32)], mg.IndexOutOfBoundsError, "x.at[ml.ds(r, 8), ml.ds(c * 128 + 1, 128)][...]",
             "this register read touches x[0:8, 8065:8193] in program (0, 0, 0) when c = 63, outside x's shape"
             " (64, 8192)")
  assert e.hint
