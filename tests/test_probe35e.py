"""Probe 35e (large sizes and index arithmetic): arrays near 2**31 elements (specs only), grids past
4M programs, index tensors built from program ids and ml.arange near int32's limit, run-time sizes
near 2**31 - 1, negative indices, empty and one-element arrays."""
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
from locate import builds, expect

S = jax.ShapeDtypeStruct
F16 = jnp.float16
F32 = jnp.float32
I32 = jnp.int32
BIG = S((2 ** 31 - 1,), F16)         # 4 GiB: checked, never allocated

TENSOR_HINT = ("rearrange it so that no element passes 2**31 - 1: for the tail mask of a tile of t elements,"
               " compare the positions within the tile with what is left of the array, ml.arange(t) < n - i * t"
               " (no value past n); for indices, compute in uint32 ((i * t).astype(jnp.uint32) +"
               " ml.arange(t, dtype=jnp.uint32), for values below 2**32)")


# ---------------------------------------------------------------- ml.cdiv of run-time sizes near 2**31
@mg.mgpu_kernel(out_shape=jax.ShapeDtypeStruct((6,), I32))
def cdiv_runtime(n: ml.scalar, d: ml.scalar, out):
  out[0] = ml.cdiv(n, 1024)
  out[1] = ml.cdiv(n, d)
  out[2] = ml.cdiv(-n, 1024)
  out[3] = ml.cdiv(n, -1024)
  out[4] = ml.cdiv(5000, d)
  out[5] = ml.cdiv(n.astype(jnp.uint32), 1024).astype(jnp.int32)


def _ceil(a, b):
  return -(-a // b)


CDIV_CASES = [(2 ** 31 - 1, 1024), (2 ** 31 - 5, 7), (2 ** 31 - 1, 2 ** 31 - 1), (1000, 7), (1024, 1024), (0, 3),
              (-7, 3)]


def _cdiv_want(n, d):
  return [_ceil(n, 1024), _ceil(n, d), _ceil(-n, 1024), _ceil(n, -1024), _ceil(5000, d),
          np.uint32(_ceil(n % 2 ** 32, 1024)).astype(np.int32)]


def test_cdiv_of_a_runtime_size_near_int32s_limit_does_not_wrap():
  """ml.cdiv(n, 1024) was (n + 1023) // 1024, which wrapped negative for a run-time n within 1023 of
  2**31 - 1 (-2097152 tiles for n = 2**31 - 1: a loop over them ran no trip); it is now n // 1024 plus one
  where 1024 does not divide n, exact for every int32 (and uint32) n."""
  for n, d in CDIV_CASES:
    got = np.asarray(cdiv_runtime(n, d, interpret=True))
    np.testing.assert_array_equal(got, np.asarray(_cdiv_want(n, d), np.int32), err_msg=f"n={n} d={d}")


@mg.mgpu_kernel(out_shape=jax.ShapeDtypeStruct((1,), I32))
def tiles_of_runtime_size(n: ml.scalar, out):
  c = 0
  for t in range(ml.cdiv(n, 1 << 24)):
    c += 1
  out[0] = c


def test_a_loop_over_cdiv_tiles_of_a_runtime_size_runs_every_trip():
  """The loop ran no trip for n = 2**31 - 1 (its bound wrapped negative)."""
  for n in (2 ** 31 - 1, 2 ** 31 - 2 ** 24, 5):
    assert int(tiles_of_runtime_size(n, interpret=True)[0]) == _ceil(n, 1 << 24)


@mg.mgpu_kernel(out_shape=jax.ShapeDtypeStruct((2,), I32))
def index_after_loop(a: ml.scalar, n: ml.scalar, s: ml.scalar, out):
  k = -1
  c = 0
  for k in range(a, n, s):
    c += 1
  out[0] = c
  out[1] = k


AFTER_CASES = [(-5, 2 ** 31 - 1, 805306368), (-2 ** 31, 2 ** 31 - 1, 2 ** 30 + 1), (0, 2 ** 31 - 1, 2 ** 30 + 7),
               (5, 3, 1), (-7, 20, 3)]


def _after_want(a, n, s):
  r = range(a, n, s)
  return [len(r), r[-1] if len(r) else -1]


def test_the_loop_variable_after_a_runtime_loop_whose_span_passes_int32_is_pythons():
  """Python leaves the loop variable at the last index; it was computed as start + (stop - start - 1) //
  step * step in int32, where stop - start wrapped past 2**31 (range(-5, 2**31 - 1, 805306368) left k at
  1879048187, not 1610612731). The span is now taken in uint32."""
  for a, n, s in AFTER_CASES:
    np.testing.assert_array_equal(np.asarray(index_after_loop(a, n, s, interpret=True)), _after_want(a, n, s))


@mg.mgpu_kernel(out_shape=jax.ShapeDtypeStruct((2,), I32))
def walk_back(n: ml.scalar, out):
  c = 0
  last = -7
  for off in range(n - 1, -1, -2 ** 28):
    c += 1
    last = off
  out[0] = c
  out[1] = last


BACK_CASES = [2 ** 31 - 1, 2 ** 31 - 2 ** 27, 2 ** 28 + 1, 100, 0]


def _back_want(n):
  r = range(n - 1, -1, -2 ** 28)
  return [len(r), r[-1] if len(r) else -7]


def test_a_loop_counting_down_from_near_2_31_runs_every_trip():
  """A descending run-time loop counts its trips as (a - b - 1) // s + 1; (a - b + s - 1) // s wrapped
  for a start within s - 1 of 2**31 - 1, so range(n - 1, -1, -2**28) ran no trip for n = 2**31 - 1."""
  for n in BACK_CASES:
    np.testing.assert_array_equal(np.asarray(walk_back(n, interpret=True)), _back_want(n))


# ---------------------------------------------------------------- index tensors past int32
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 1152),))
def tail_masked(x, out):
  i = ml.program_id(0)
  idx = i * 1152 + ml.arange(1152)
  m = idx < x.shape[0]
  v = x.at[ml.ds(i * 1152, 1152)].load(mask=m, other=0.0)
  out.at[ml.ds(i * 1152, 1152)].store(v * 2, mask=m)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 1152),))
def tail_masked_within(x, out):
  i = ml.program_id(0)
  m = ml.arange(1152) < x.shape[0] - i * 1152
  v = x.at[ml.ds(i * 1152, 1152)].load(mask=m, other=0.0)
  out.at[ml.ds(i * 1152, 1152)].store(v * 2, mask=m)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 1152),))
def tail_masked_u32(x, out):
  i = ml.program_id(0)
  idx = (i * 1152).astype(jnp.uint32) + ml.arange(1152, dtype=jnp.uint32)
  m = idx < x.shape[0]
  v = x.at[ml.ds(i * 1152, 1152)].load(mask=m, other=0.0)
  out.at[ml.ds(i * 1152, 1152)].store(v * 2, mask=m)


def test_a_tail_mask_whose_offsets_wrap_past_int32_is_reported():
  """The last tile of 2**31 - 1 elements in tiles of 1152 holds offsets up to 2147484671: they wrapped
  negative on the GPU, `idx < n` kept them, and the masked store wrote past the array's end. Only int32
  scalars were checked; index tensors (a scalar plus ml.arange) now are too."""
  expect(tail_masked, [BIG], mg.KernelTypeError, "i * 1152 + ml.arange(1152)",
         "i * 1152 + ml.arange(1152) overflows int32 in program (1864135, 0, 0): an element of it is 2147484671"
         " there, past int32's 2147483647, so the GPU wraps it to -2147482625, and the mask at line"
         f" {tail_masked.fn.__code__.co_firstlineno + 5} uses it", hint=TENSOR_HINT)
  builds(tail_masked, S((2 ** 30,), F16))             # (no tile passes 2**31 there)
  builds(tail_masked_within, BIG)                     # the two ways the hint gives
  builds(tail_masked_u32, BIG)


@mg.mgpu_kernel(out_shape=lambda x, *, n: jax.ShapeDtypeStruct((x.shape[0] // n, 128), x.dtype),
                grid=lambda x, *, n: (x.shape[0] // n // 64,))
def rows_of_flat(x, out, *, n: ml.constexpr):
  i = ml.program_id(0)
  rows = i * 64 + ml.arange(64)
  offs = rows[:, None] * n + ml.arange(128)[None, :]
  out.at[ml.ds(i * 64, 64), :][...] = x[offs]


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((64, 128), x.dtype), grid=(1,))
def rows_past_int32(x, out):
  rows = 2 ** 15 - 32 + ml.arange(64)
  offs = rows[:, None] * 2 ** 16 + ml.arange(128)[None, :]
  out[...] = x[offs]


def test_flat_offsets_row_times_stride_past_int32_are_reported_and_in_range_ones_build():
  """A gather's flat offsets `rows * stride + cols` are checked as the tail mask's are; jnp's
  negative-index wrap that the gather adds (i + n where i < 0) no longer counts as index arithmetic
  past int32 for offsets near the end of an array of nearly 2**31 elements."""
  builds(rows_of_flat, S((2 ** 31 - 2 ** 22,), F32), n=2 ** 16)
  expect(rows_past_int32, [S((2 ** 31 - 2 ** 16,), F32)], mg.KernelTypeError, "rows[:, None] * 2 ** 16",
         "rows[:, None] * 2 ** 16 overflows int32 in program (0, 0, 0): an element of it is 2149515264 there,"
         " past int32's 2147483647, so the GPU wraps it to -2145452032, and the indices at line"
         f" {rows_past_int32.fn.__code__.co_firstlineno + 4} use it", hint=TENSOR_HINT)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 1024),))
def tail_end_shifted(x, out):
  i = ml.program_id(0)
  end = ml.minimum((i + 1) << 10, x.shape[0])
  m = (i << 10) + ml.arange(1024) < end
  out.at[ml.ds(i << 10, 1024)].store(x.at[ml.ds(i << 10, 1024)].load(mask=m, other=0.0), mask=m)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 1024),))
def pairs_shifted(x, out):
  i = ml.program_id(0)
  idx = (ml.arange(1024) + i * 1024) << 1
  m = (idx >> 1) < x.shape[0]
  out.at[ml.ds(i * 1024, 1024)].store(x.at[ml.ds(i * 1024, 1024)].load(mask=m, other=0.0), mask=m)


def test_left_shifts_that_wrap_past_int32_are_reported_as_products_are():
  """`(i + 1) << 10` is `(i + 1) * 1024`, and wraps where it does: the last tile's end became -2**31 and
  its mask kept nothing (the tile stayed unwritten). Only +, - and * were checked."""
  expect(tail_end_shifted, [BIG], mg.KernelTypeError, "(i + 1) << 10",
         "(i + 1) << 10 overflows int32 in program (2097151, 0, 0): it is 2147483648 there, past int32's"
         " 2147483647, so the GPU wraps it to -2147483648, and the mask at line"
         f" {tail_end_shifted.fn.__code__.co_firstlineno + 5} uses it")
  builds(tail_end_shifted, S((2 ** 31 - 1024,), F16))
  expect(pairs_shifted, [S((2 ** 30 + 5,), F16)], mg.KernelTypeError, "(ml.arange(1024) + i * 1024) << 1",
         "(ml.arange(1024) + i * 1024) << 1 overflows int32 in program (1048576, 0, 0): an element of it is"
         " 2147485694 there, past int32's 2147483647, so the GPU wraps it to -2147481602, and the mask at line"
         f" {pairs_shifted.fn.__code__.co_firstlineno + 5} uses it", hint=TENSOR_HINT)
  builds(pairs_shifted, S((2 ** 30 - 1024,), F16))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 1024),))
def lcg_keep(x, out):
  i = ml.program_id(0)
  idx = i * 1024 + ml.arange(1024)
  h = idx * 1103515245 + 12345
  keep = ((h >> 16) & 0x7FFF) < 16384
  inside = ml.arange(1024) < x.shape[0] - i * 1024
  v = x.at[ml.ds(i * 1024, 1024)].load(mask=inside, other=0.0)
  out.at[ml.ds(i * 1024, 1024)].store(v, mask=inside & keep)
  out.at[ml.ds(i * 1024, 1024)].store(v * 0.0, mask=inside & ~keep)


def test_a_hash_of_positions_that_wraps_by_design_may_make_a_mask():
  """An LCG of the positions (`idx * 1103515245 + 12345`, its bits taken with >> and &) wraps in every
  program by design; the keep mask made from it is not index arithmetic (the tensor check would have
  reported it once its wraps reached the store's mask)."""
  builds(lcg_keep, S((4096,), F32))
  x = jnp.arange(1, 4097, dtype=F32)
  h = (np.arange(4096, dtype=np.int64) * 1103515245 + 12345) % 2 ** 32
  keep = ((h >> 16) & 0x7FFF) < 16384
  np.testing.assert_array_equal(np.asarray(lcg_keep(x, interpret=True)), np.where(keep, np.asarray(x), 0.0))


# ---------------------------------------------------------------- grids past the evaluated 4M programs
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 256),))
def tail_end_256(x, out):
  i = ml.program_id(0)
  end = ml.minimum((i + 1) * 256, x.shape[0])
  idx = i * 256 + ml.arange(256)
  v = x.at[ml.ds(i * 256, 256)].load(mask=idx < end, other=0.0)
  out.at[ml.ds(i * 256, 256)].store(v, mask=idx < end)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 384),))
def tail_masked_384(x, out):
  i = ml.program_id(0)
  idx = i * 384 + ml.arange(384)
  v = x.at[ml.ds(i * 384, 384)].load(mask=idx < x.shape[0], other=0.0)
  out.at[ml.ds(i * 384, 384)].store(v, mask=idx < x.shape[0])


def test_index_arithmetic_that_wraps_is_found_in_grids_too_large_to_evaluate():
  """Grids of more than 4,194,304 programs were not evaluated at all, so the wrap the last program makes
  (8388608 programs of 256 elements over 2**31 - 1) went unreported; their corner and middle programs
  are now evaluated for it."""
  expect(tail_end_256, [BIG], mg.KernelTypeError, "(i + 1) * 256",
         "(i + 1) * 256 overflows int32 in program (8388607, 0, 0): it is 2147483648 there, past int32's"
         " 2147483647, so the GPU wraps it to -2147483648, and the mask at line"
         f" {tail_end_256.fn.__code__.co_firstlineno + 5} uses it")
  expect(tail_masked_384, [BIG], mg.KernelTypeError, "i * 384 + ml.arange(384)",
         "i * 384 + ml.arange(384) overflows int32 in program (5592405, 0, 0): an element of it is 2147483903"
         " there, past int32's 2147483647, so the GPU wraps it to -2147483393, and the mask at line"
         f" {tail_masked_384.fn.__code__.co_firstlineno + 4} uses it", hint=TENSOR_HINT)
  builds(tail_masked_384, S((2 ** 31 - 2 ** 20,), F16))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 256),))
def unmasked_tiles(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 256, 256)][...] = x.at[ml.ds(i * 256, 256)][...] * 2


def test_a_window_past_the_end_is_found_in_grids_too_large_to_evaluate():
  """The last of 4194305 programs (2**30 + 5 elements in unmasked 256-element tiles) reads and writes past
  the arrays' ends; grids past 4,194,304 programs were not evaluated, so only the GPU would have seen it
  (interpret mode cannot run such sizes in practice). Their corner and middle programs now are."""
  expect(unmasked_tiles, [S((2 ** 30 + 5,), F16)], mg.IndexOutOfBoundsError, "x.at[ml.ds(i * 256, 256)][...]",
         "this register read touches x[1073741824:1073742080] in program (4194304, 0, 0), outside x's shape"
         " (1073741829,)",
         hint="mask it to the elements inside: x.at[ml.ds(i * 256, 256)].load(mask=i * 256 + ml.arange(256) <"
              " x.shape[0], other=0); or guard the access (if i * 256 + 256 <= 1073741829:) or clamp its start"
              " (ml.minimum(i * 256, 1073741573))")
  builds(unmasked_tiles, S((2 ** 30 + 256,), F16))


# ---------------------------------------------------------------- TMA coordinates past int32
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((2, 128, 64), x.dtype), grid=(2,))
def halo_u32(x, out):
  i = ml.program_id(0)
  s = (i * 128).astype(jnp.uint32) - 5
  buf = ml.smem((128, 64))
  ml.copy(x.at[ml.ds(s, 128), :], buf)
  ml.copy(buf, out.at[i])


def _launch_text(kernel, *specs):
  text = kernel.mlir(*specs)
  return text[text.index("gpu.launch"):]


def test_a_uint32_tma_start_of_2_31_or_more_is_past_the_end_on_the_gpu_too():
  """A uint32 window start wraps to 2**32 - 5 in program 0: past x's end, so interpret mode (jnp's
  uint32) reads zeros; the lowering sign-extended it to index -5 and TMA (int32 coordinates) read rows
  0..122 into buf[5:]. Run-time TMA starts are now zero-extended when unsigned and clamped to
  [-size, dim], where a window lies wholly outside the array as it does at the start itself."""
  x = jnp.arange(512 * 64, dtype=F32).reshape(512, 64)
  got = np.asarray(halo_u32(x, interpret=True))
  np.testing.assert_array_equal(got[0], 0)
  np.testing.assert_array_equal(got[1], np.asarray(x[123:251]))
  text = _launch_text(halo_u32, S((512, 64), F32))
  assert "arith.index_castui" in text and "arith.minsi" in text and "%c512" in text, text


_X64_TMA = textwrap.dedent('''
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp, mgpu_dsl as mg
    from mgpu_dsl import language as ml

    @mg.mgpu_kernel(out_shape=lambda x, s: jax.ShapeDtypeStruct((128, 64), x.dtype))
    def window64(x, s: ml.scalar, out):
        buf = ml.smem((128, 64))
        ml.copy(x.at[ml.ds(s, 128), :], buf)
        ml.copy(buf, out)

    S = jax.ShapeDtypeStruct
    x = jnp.arange(512 * 64, dtype=jnp.float32).reshape(512, 64)
    assert float(jnp.abs(window64(x, jnp.int64(2 ** 32 + 5), interpret=True)).max()) == 0.0
    text = window64.mlir(S((512, 64), jnp.float32), S((), jnp.int64))
    text = text[text.index("gpu.launch"):]
    assert "arith.maxsi" in text and "arith.minsi" in text and "%c512" in text, text
    if any(d.platform == "gpu" for d in jax.devices()):
        for s in (2 ** 32 + 5, -2 ** 32 + 5, 7, -5):
            got = jax.jit(window64)(x, jnp.int64(s))
            assert (got == window64(x, jnp.int64(s), interpret=True)).all(), s
    print("ok")
''')


def test_an_int64_tma_start_past_int32_is_clamped_not_truncated(tmp_path):
  """With jax_enable_x64 an int64 start of 2**32 + 5 was truncated to the int32 coordinate 5: TMA read
  rows 5..132 where the window lies past x's end (zeros in interpret mode). (In a subprocess: x64 is
  process-wide; on a machine with a GPU it also compares the GPU with interpret mode.)"""
  script = tmp_path / "x64_tma.py"
  script.write_text(_X64_TMA)
  env = dict(os.environ, MGPU_DSL_CACHE_DIR="off")
  r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
  assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr[-3000:]


# ---------------------------------------------------------------- windows longer than an (empty) dimension
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (max(1, x.shape[0] // 8),))
def rows_of_eight(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 8, 8), :][...] = x.at[ml.ds(i * 8, 8), :][...]


def test_a_window_longer_than_its_dimension_is_not_hinted_a_guard_or_a_negative_clamp():
  """For a (0, 128) or (4, 128) x the hint said `guard the access (if i * 8 + 8 <= 0:) or clamp its start
  (ml.minimum(i * 8, -8))`: the guard never holds and the clamp starts before 0."""
  mask = ("mask it to the elements inside: x.at[ml.ds(i * 8, 8), :].load(mask=(i * 8 + ml.arange(8))[:, None]"
          " < x.shape[0], other=0); or ")
  # (0, 128): the call returns the empty output without a launch, so check() has no kernel (probe 35f)
  expect(rows_of_eight, [S((0, 128), F32)], mg.LaunchConfigError, "out_shape=",
         "every output of this call is empty (out_shape gives (0, 128)): a call on arrays returns them without a"
         " launch, whatever the grid, and there is no kernel to check or build")
  assert rows_of_eight(jnp.zeros((0, 128), F32), interpret=True).shape == (0, 128)
  expect(rows_of_eight, [S((4, 128), F32)], mg.IndexOutOfBoundsError, "x.at[ml.ds(i * 8, 8), :][...]",
         "this register read touches x[0:8, 0:128], outside x's shape (4, 128)",
         hint=mask + "take a window of at most 4 elements along dimension 0")


# ---------------------------------------------------------------- negative ml.ds starts
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((128,), x.dtype))
def last_128_ds(x, out):
  out[...] = x.at[-1, ml.ds(-128, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((128,), x.dtype))
def last_128_fixed(x, out):
  out[...] = x.at[-1, ml.ds(x.shape[1] - 128, 128)][...]


def test_a_negative_literal_ds_start_is_hinted_as_the_window_from_the_end():
  """`ml.ds(-128, 128)` (NumPy's x[-128:] habit) was hinted `start it inside, ml.ds(s, 128) with s > -128`;
  the hint now says ml.ds does not count from the end and writes the window that does."""
  expect(last_128_ds, [S((2, 256), F32)], mg.IndexOutOfBoundsError, "x.at[-1, ml.ds(-128, 128)]",
         "ml.ds(-128, 128) is out of bounds for dimension 1 of x (size 256)",
         hint="the window has no element inside x (dimension 1 has size 256; it lies wholly before the start), so"
              " neither a mask nor a TMA copy has anything to move: ml.ds's start does not count from the end as a"
              " negative index does; the window 128:256 is ml.ds(x.shape[1] - 128, 128) (or the slice -128:)")
  x = jnp.arange(512, dtype=F32).reshape(2, 256)
  np.testing.assert_array_equal(np.asarray(last_128_fixed(x, interpret=True)), np.asarray(x[-1, -128:]))


# ---------------------------------------------------------------- GPU
@mg.mgpu_kernel(out_shape=lambda x, ids: jax.ShapeDtypeStruct((ids.shape[0], x.shape[1]), x.dtype))
def gather_rows(x, ids, out):
  out[...] = x[ids[...], :]


@pytest.mark.gpu
def test_gpu_cdiv_and_negative_gather_indices_match_python_and_jnp():
  """The lowering paths this probe changed: ml.cdiv's floor-plus-remainder form, the loop variable after a
  run-time loop computed in uint32, a descending loop's trip count, and the gather's negative-index wrap written i + (n where i < 0)."""
  for n, d in CDIV_CASES:
    np.testing.assert_array_equal(np.asarray(jax.jit(cdiv_runtime)(n, d)), np.asarray(_cdiv_want(n, d), np.int32))
  assert int(jax.jit(tiles_of_runtime_size)(2 ** 31 - 1)[0]) == _ceil(2 ** 31 - 1, 1 << 24)
  for a, n, s in AFTER_CASES:
    np.testing.assert_array_equal(np.asarray(jax.jit(index_after_loop)(a, n, s)), _after_want(a, n, s))
  for n in BACK_CASES:
    np.testing.assert_array_equal(np.asarray(jax.jit(walk_back)(n)), _back_want(n))
  x = jnp.arange(64 * 128, dtype=F32).reshape(64, 128)
  ids = jnp.asarray(np.random.default_rng(0).integers(-64, 64, 128), I32)
  np.testing.assert_array_equal(np.asarray(jax.jit(gather_rows)(x, ids)), np.asarray(x[ids]))


@pytest.mark.gpu
def test_gpu_tma_windows_at_uint32_starts_past_2_31_match_interpret_mode():
  x = jnp.arange(512 * 64, dtype=F32).reshape(512, 64)
  np.testing.assert_array_equal(np.asarray(jax.jit(halo_u32)(x)), np.asarray(halo_u32(x, interpret=True)))
