"""Probe 45i (leftovers of probe 45b: tensor-core and memory mistakes that passed silently or were falsely
rejected). A 256x256 float32 accumulator at block=128 (512 registers a thread, of 255) passed the check,
which looked only at one 64xn WGMMA instruction: it is MG403 at the dot, hinting block=256 with a 128-row
tile or a 64-row tile. Register reads and writes of a tensor-core operand's window at a run-time start
proven whole tiles (`a_s.at[ml.ds(t * 64, 64)][...]` in a `range` loop) were MG204, though Mosaic GPU's
tiled transfers take a memref sliced by whole tiles at a run-time start: they compute. A vector copied
into row 0 of an (8, k) operand buffer is MG601 still (the proof does not follow rows through the
product), its hint now saying what fills the buffer whole: a TMA copy of a window past the vector's end."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import warnings

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F16, F32 = jnp.float16, jnp.float32


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _col_of(text, marker):
  with open(__file__) as f:
    return next(line for line in f if marker in line and "_col_of" not in line).index(text)


def _rand(shape, seed, dtype=np.float16):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _f32(x):
  return np.asarray(x, np.float32)


def _specs(*arrays):
  return [S(x.shape, x.dtype) for x in arrays]


# ---------------------------------------------------------------- an accumulator past a thread's registers
def _tiled_matmul(bm, block):
  @mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32),
                  grid=lambda a, b: (a.shape[0] // bm, b.shape[1] // 256), block=block)
  def tiled(a, b, c):
    i, j = ml.program_id(0), ml.program_id(1)
    a_s, b_s = ml.smem((bm, 64)), ml.smem((64, 256))
    acc = ml.zeros((bm, 256), F32)
    for k in range(a.shape[1] // 64):
      ml.copy(a.at[ml.ds(i * bm, bm), ml.ds(k * 64, 64)], a_s)
      ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 256, 256)], b_s)
      acc = ml.dot(a_s, b_s, acc)                                     # the big accumulator
    c.at[ml.ds(i * bm, bm), ml.ds(j * 256, 256)][...] = acc
  return tiled


@mg.mgpu_kernel(out_shape=lambda a, b, w: S((a.shape[0], w.shape[1]), F32), grid=lambda a, b, w: (a.shape[0] // 128,))
def chained_wide(a, b, w, o):
  i = ml.program_id(0)
  a_s, b_s, w_s = ml.smem((128, a.shape[1])), ml.smem(b.shape), ml.smem(w.shape)
  ml.copy(a.at[ml.ds(i * 128, 128)], a_s)
  ml.copy(b, b_s)
  ml.copy(w, w_s)
  p = ml.dot(a_s, b_s)
  o.at[ml.ds(i * 128, 128)][...] = ml.dot(p.astype(F16), w_s)          # the register A dot


def _spill_warning(kernel, *specs):
  """The one RegisterSpillWarning `kernel.check(*specs)` issues (the kernel builds: a spill is slow, not wrong)."""
  with pytest.warns(mg.RegisterSpillWarning) as got:
    kernel.check(*specs)
  spills = [w for w in got if issubclass(w.category, mg.RegisterSpillWarning)]
  assert len(spills) == 1, [str(w.message) for w in spills]
  return spills[0]


def test_an_accumulator_past_a_threads_registers_is_a_spill_warning_at_the_dot():
  specs = [S((512, 128), F16), S((128, 512), F16)]
  w = _spill_warning(_tiled_matmul(256, 128), *specs)
  assert (w.filename, w.lineno) == (__file__, _line_of("# the big accumulator"))
  text = str(w.message)
  assert f":{_line_of('# the big accumulator')}:{_col_of('ml.dot(a_s', '# the big acc')}:" in text.splitlines()[0]
  assert ("this ml.dot's 256x256 float32 accumulator lives in registers whole: 512 registers a thread"
          " (all 256 rows on one warpgroup of block=128); a CTA of 128 threads is compiled for 255"
          " registers a thread, so ptxas spills it to local memory (it computes, several times slower) [MG403]") in text
  assert ("hint: use block=256 with a 128x256 tile a program (its rows split over 2 warpgroups: 128 registers"
          " a thread), or a 64x256 tile a program at block=128 (128 registers a thread)") in text
  # the same tile over two warpgroups still needs 256 a thread; 128 rows at block=256 (the hint) fit
  assert "256 registers a thread (128 rows on each of 2 warpgroups)" in str(
      _spill_warning(_tiled_matmul(256, 256), *specs).message)
  with warnings.catch_warnings():
    warnings.simplefilter("error", mg.RegisterSpillWarning)
    _tiled_matmul(128, 256).check(*specs)
    _tiled_matmul(64, 128).check(*specs)
  # a register A operand counts beside the accumulator: 192 + 96 of 128-row tiles at block=128
  a, b, w = _rand((128, 64), 1), _rand((64, 192), 2), _rand((192, 192), 3)
  got = _spill_warning(chained_wide, *_specs(a, b, w))
  assert got.lineno == _line_of("# the register A dot")
  assert ("this ml.dot's 128x192 float32 accumulator lives in registers whole: 192 registers a thread (all 128 rows"
          " on one warpgroup of block=128), and its register A operand 128x192 float16 96 more;") in str(got.message)
  assert "hint: use block=256 to split its rows over 2 warpgroups (144 registers a thread)" in str(got.message)
  # as an error where the user asks for one (python -W error::mgpu_dsl.RegisterSpillWarning)
  with warnings.catch_warnings():
    warnings.simplefilter("error", mg.RegisterSpillWarning)
    with pytest.raises(mg.RegisterSpillWarning):
      _tiled_matmul(256, 128).check(S((1024, 128), F16), S((128, 512), F16))


# ---------------------------------------------------------------- register transfers of run-time windows of tiles
def _windows(rows, block):
  @mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=(1,), block=block)
  def windows(a, b, c):
    a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
    ml.copy(a, a_s)
    ml.copy(b, b_s)
    for t in range(a.shape[0] // rows):                 # a run-time loop: each window's start t * rows
      w = a_s.at[ml.ds(t * rows, rows)]
      w[...] = w[...] * 2                                # written back through registers
    c[...] = ml.dot(a_s, b_s)
    for t in range(a.shape[0] // rows):
      c.at[ml.ds(t * rows, rows)][...] += a_s.at[ml.ds(t * rows, rows)][...].astype(F32)
  return windows


def test_register_transfers_of_run_time_windows_of_whole_tiles_compute():
  a, b = _rand((256, 64), 4), _rand((64, 64), 5)
  a2 = _f32(a) * 2
  want = a2 @ _f32(b) + a2
  k = _windows(64, 128)
  np.testing.assert_allclose(k(a, b, interpret=True), want, rtol=1e-5, atol=1e-3)
  mlir = k.mlir(*_specs(a, b))
  # (the window a memref sliced by whole tiles at a run-time start: its offset known at run time only)
  assert "offset: ?" in mlir and "scf.for" in mlir
  # two warpgroups: each its 64 rows of a 128-row window
  mlir = _windows(128, 256).mlir(*_specs(a, b))
  assert "offset: ?" in mlir


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=(1,))
def eight_row_windows(a, b, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = ml.dot(a_s, b_s)
  for t in range(a.shape[0] // 8):
    c.at[ml.ds(t * 8, 8)][...] += a_s.at[ml.ds(t * 8, 8)][...].astype(F32)      # the 8-row read


def test_register_reads_of_narrower_windows_hint_64_row_windows_not_static_ones():
  # (whole tiles, but not a warpgroup's 64 rows: a static window would not do either; the hint said one would)
  a, b = _rand((128, 64), 8), _rand((64, 64), 9)
  with pytest.raises(mg.LayoutError) as e:
    eight_row_windows.check(*_specs(a, b))
  err = e.value
  assert (err.lineno, err.col_offset) == (_line_of("# the 8-row read"), _col_of("a_s.at[", "# the 8-row read"))
  assert err.message == ("a_s.at[ml.ds(t * 8, 8)] slices the rows or columns of a_s, which is tiled for the tensor"
                         " cores")
  assert err.hint == ("register reads and writes of a_s take windows of 64 rows (a warpgroup's tensor-core rows) by"
                      " 128 bytes of columns, not transposed, at static starts or run-time ones proven multiples of"
                      " them (ml.ds(t * 64, 64) in a loop): read or write 64-row windows, or a_s whole, a_s[...],"
                      " and slice or join the value in registers")


# ---------------------------------------------------------------- a vector in row 0 of an (8, k) operand buffer
@mg.mgpu_kernel(out_shape=lambda a, x: S((a.shape[0],), F32), grid=(1,))
def gemv_row0(a, x, o):
  a_s = ml.smem(a.shape, a.dtype)
  row_s = ml.smem((8, x.shape[0]), x.dtype)
  ml.copy(a, a_s)
  ml.copy(x, row_s.at[0])
  y = ml.dot(a_s, row_s.T)                     # the row-0 product
  o[...] = y[:, 0]


@mg.mgpu_kernel(out_shape=lambda a, x: S((a.shape[0],), F32), grid=(1,))
def gemv_whole(a, x, o):
  a_s = ml.smem(a.shape, a.dtype)
  row_s = ml.smem((8, x.shape[1]), x.dtype)
  ml.copy(a, a_s)
  ml.copy(x.at[ml.ds(0, 8)], row_s)
  o[...] = ml.dot(a_s, row_s.T)[:, 0]


def test_a_vector_in_one_row_of_an_operand_buffer_hints_filling_it_whole_by_tma():
  a, x = _rand((64, 128), 6), _rand((128,), 7)
  with pytest.raises(mg.UninitializedReadError) as e:
    gemv_row0.check(*_specs(a, x))
  err = e.value
  assert (err.lineno, err.col_offset) == (_line_of("# the row-0 product"), _col_of("ml.dot(a_s", "# the row-0"))
  assert err.message == "row_s[1:8, :] is read before anything writes it: SMEM starts with garbage"
  assert err.hint == ("ml.dot reads all of row_s, every row and column of its tile, and SMEM starts with garbage:"
                      " fill it whole by TMA from an array of fewer rows, ml.copy(x.at[ml.ds(0, 8)], row_s) (a"
                      " vector as a (1, 128) array, x.reshape(1, 128) outside the kernel): the TMA engine reads"
                      " zeros past x's end, so the other rows are 0")
  # the hint followed
  np.testing.assert_allclose(gemv_whole(a, x.reshape(1, 128), interpret=True), _f32(a) @ _f32(x), rtol=1e-5, atol=1e-3)
  assert "wgmma" in gemv_whole.mlir(*_specs(a, x.reshape(1, 128)))


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
def test_gpu_register_transfers_of_run_time_windows_of_whole_tiles_match_numpy():
  a, b = _rand((256, 64), 4), _rand((64, 64), 5)
  a2 = _f32(a) * 2
  want = a2 @ _f32(b) + a2
  np.testing.assert_allclose(_windows(64, 128)(a, b), want, rtol=1e-3, atol=1e-2)
  np.testing.assert_allclose(_windows(128, 256)(a, b), want, rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
def test_gpu_gemv_hint_followed_matches_numpy():
  a, x = _rand((64, 128), 6), _rand((128,), 7)
  np.testing.assert_allclose(gemv_whole(a, x.reshape(1, 128)), _f32(a) @ _f32(x), rtol=1e-3, atol=1e-2)
