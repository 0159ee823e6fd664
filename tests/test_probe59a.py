"""Probe 59a: memory-structured kernels that probe 58b's fuzzer left refused though legal (design note 193).

1. A run-time index of a strided view's axis (`x.at[::-1].at[p]`, `x.at[p, ::-2].at[q]`) was MG003: where the view
   steps over the axis from end to end, it is the plain subscript `x[n - 1 - p]` (`start + p * step`), whose bounds
   check is the view's; a part of an axis (`x.at[1:6:2].at[p]`) stays refused, its hint naming `1 + p * 2`.
2. An odd tile (rows not a multiple of 4 beside 64 columns) computed padded and stored into an SMEM buffer of its own
   shape (`xs = ml.smem((7, 64)); xs[...] = v`), then copied out by TMA or read back, was MG204: the padded value goes
   through the compiler's scratch and is copied into the buffer in windows registers hold.
3. A 3-axis block pointer of an odd block with a size-1 axis ((1, 7, 64), (7, 1, 64)) stored, or its block reshaped
   by its own shape, was MG204: the size-1 axes are dropped from the padded value as `v[0]` drops them.
4. A ragged load into an operand buffer wider than one swizzle tile (K = 1000 copied 128 columns at a time) was MG401
   (Mosaic's tiled TMA would round the array down): the kernel is traced again with such buffers, and the dot's other
   operand, split into buffers one tile wide along K (ops/split_k.py); any other use of them keeps the MG401, whose
   hint now names the one-tile-column copy.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import calling
from mgpu_dsl import language as ml
import mem_fuzz
from probe_util import export, rnd

S = jax.ShapeDtypeStruct


# ---------------------------------------------------------------------- class 1
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def _reversed_rows(x, o):
  p = ml.program_id(0)
  o.at[p][...] = x.at[::-1].at[p][...] * 2


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def _reversed_write(x, o):
  p = ml.program_id(0)
  o.at[::-1].at[p][...] = x[p] + 1


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], (x.shape[1] + 1) // 2, x.shape[2]), x.dtype),
                grid=lambda x: (x.shape[0], (x.shape[1] + 1) // 2))
def _stepped_back(x, o):
  p, q = ml.program_id(0), ml.program_id(1)
  o.at[p, q][...] = x.at[p, ::-2].at[q][...] - 1


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def _reversed_tma(x, o):
  p = ml.program_id(0)
  s = ml.smem(x.shape[1:])
  ml.copy(x.at[::-1].at[p], s)
  ml.copy(s, o.at[p])


def test_run_time_index_of_a_reversed_axis():
  """`x.at[::-1].at[p]` read, written and copied by TMA is x[::-1][p] (it was MG003); exported for CUDA."""
  x = rnd((3, 8, 128), 0)
  np.testing.assert_array_equal(np.asarray(_reversed_rows(x, interpret=True)), x[::-1] * 2)
  np.testing.assert_array_equal(np.asarray(_reversed_write(x, interpret=True)), (x + 1)[::-1])
  np.testing.assert_array_equal(np.asarray(_reversed_tma(x, interpret=True)), x[::-1])
  export(_reversed_rows, x)
  export(_reversed_tma, x)


def test_run_time_index_of_a_stepped_axis():
  """`x.at[p, ::-2].at[q]` of 7 rows (rows 6, 4, 2, 0: the axis from end to end) is x[p, 6 - 2 q]."""
  x = rnd((2, 7, 128), 1)
  np.testing.assert_array_equal(np.asarray(_stepped_back(x, interpret=True)), x[:, ::-2] - 1)
  export(_stepped_back, x)


def test_run_time_index_past_a_reversed_view_is_out_of_bounds():
  """A program index past the reversed axis names no element of the array either: MG203 at the read."""
  @mg.mgpu_kernel(out_shape=lambda x: S(x.shape[1:], x.dtype), grid=(5,))
  def past(x, o):
    o[...] = x.at[::-1].at[ml.program_id(0)][...]

  with pytest.raises(mg.IndexOutOfBoundsError) as e:
    past.check(S((4, 128), jnp.float32))
  assert e.value.code == "MG203" and "program (4" in e.value.message


def test_run_time_index_of_part_of_an_axis_names_the_element():
  """`x.at[2:7:2].at[p]` (elements 2, 4, 6 of 8: a p of 3 would be 8, of -1 0, neither checked against the view)
  stays MG003, its hint the subscript to write."""
  @mg.mgpu_kernel(out_shape=lambda x: S(x.shape[1:], x.dtype), grid=(3,))
  def part(x, o):
    p = ml.program_id(0)
    o[...] = x.at[2:7:2].at[p][...]

  with pytest.raises(mg.KernelTypeError) as e:
    part.check(S((8, 128), jnp.float32))
  assert e.value.code == "MG003" and "2 + p * 2" in e.value.hint and "0..2" in e.value.hint


# ---------------------------------------------------------------------- class 2
def _odd_into_smem(R, C, tma=True):
  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], R),))
  def odd(x, o):
    i = ml.program_id(0)
    xs = ml.smem((R, C))
    rows = i * R + ml.arange(R) < x.shape[0]
    v = x.at[ml.ds(i * R, R), :].load(mask=rows[:, None], other=0)
    xs[...] = v * 2 - ml.max(v, axis=1, keepdims=True)
    if tma:
      ml.copy(xs, o.at[ml.ds(i * R, R), :])
    else:
      o.at[ml.ds(i * R, R), :].store(xs[...] + 1, mask=rows[:, None])
  return odd


@pytest.mark.parametrize("R,C,dt,tma", [(7, 64, np.float32, True), (5, 48, np.float16, True),
                                        (7, 64, np.float32, False), (3, 32, np.int32, True)], ids=str)
def test_odd_tile_stored_into_smem(R, C, dt, tma):
  """Class 2: an odd tile computed padded (a masked read, a row max broadcast back) stored into SMEM of its own shape,
  then copied out by TMA or read back and stored under the mask (it was MG204)."""
  x = (rnd((21, C), 2) * 8).astype(dt)
  k = _odd_into_smem(R, C, tma)
  want = x * 2 - x.max(1, keepdims=True) + (0 if tma else 1)
  np.testing.assert_allclose(np.asarray(k(x, interpret=True)).astype(np.float32), want.astype(np.float32),
                             rtol=1e-3)
  if dt is np.float32:
    export(k, x)


# ---------------------------------------------------------------------- class 3
def _block3(R, C, mid=False, reshape=False):
  blk = (R, 1, C) if mid else (1, R, C)

  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (
      (x.shape[0], ml.cdiv(x.shape[1], R)) if not mid else (ml.cdiv(x.shape[0], R), x.shape[1])))
  def block3(x, o):
    a, b = ml.program_id(0), ml.program_id(1)
    B, M, N = x.shape
    off = (a, b * R, 0) if not mid else (a * R, b, 0)
    bp = ml.make_block_ptr(base=x, shape=(B, M, N), strides=(M * N, N, 1), offsets=off, block_shape=blk,
                           order=(2, 1, 0))
    ob = ml.make_block_ptr(base=o, shape=(B, M, N), strides=(M * N, N, 1), offsets=off, block_shape=blk,
                           order=(2, 1, 0))
    v = ml.load(bp, boundary_check=(0, 1, 2), padding_option="zero")
    if reshape:
      ml.store(ob, (ml.reshape(v, (R, C)) * 2).reshape(blk), boundary_check=(0, 1, 2))
    else:
      ml.store(ob, v * 2 + 1, boundary_check=(0, 1, 2))
  return block3


@pytest.mark.parametrize("R,C,dt", [(7, 64, np.float32), (5, 48, np.float16), (3, 80, np.int32), (7, 64, np.int8)],
                         ids=str)
def test_three_axis_block_pointer_of_an_odd_block_stored(R, C, dt):
  """Class 3: a (1, R, C) block loaded and stored through 3-axis pointers with every axis checked (it was MG204)."""
  x = (rnd((2, 20, C), 3) * 8).astype(dt)
  k = _block3(R, C)
  np.testing.assert_array_equal(np.asarray(k(x, interpret=True)), x * 2 + 1)
  if dt is np.float32:
    export(k, x)


def test_three_axis_block_reshaped_and_middle_unit_axis():
  """Class 3: `ml.reshape(v, (7, 64))` of the padded (1, 7, 64) block and back, and a (7, 1, 64) block (its size-1
  axis in the middle: the window's middle axis indexed away)."""
  x = rnd((2, 20, 64), 4)
  np.testing.assert_array_equal(np.asarray(_block3(7, 64, reshape=True)(x, interpret=True)), x * 2)
  y = rnd((20, 3, 64), 5)
  np.testing.assert_array_equal(np.asarray(_block3(7, 64, mid=True)(y, interpret=True)), y * 2 + 1)


# ---------------------------------------------------------------------- class 4
def _ragged_k(BK, bt=False, stages=None, extra=False):
  @mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0] if bt else b.shape[1]), jnp.float32),
                  grid=lambda a, b: (a.shape[0] // 64,))
  def ragged_k(a, b, c):
    i = ml.program_id(0)
    a_s = ml.smem((64, BK))
    b_s = ml.smem((64, BK)) if bt else ml.smem((BK, 64))
    acc = ml.zeros((64, 64), jnp.float32)
    for k in ml.range(ml.cdiv(a.shape[1], BK), stages=stages or 1):
      ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * BK, BK)], a_s)
      if bt:
        ml.copy(b.at[:, ml.ds(k * BK, BK)], b_s)
        acc = ml.dot(a_s, b_s.T, acc)
      else:
        ml.copy(b.at[ml.ds(k * BK, BK), :], b_s)
        acc = acc + ml.dot(a_s, b_s)
    if extra:
      acc = acc + a_s[...].astype(jnp.float32)[:, :64]
    c.at[ml.ds(i * 64, 64), :][...] = acc
  return ragged_k


@pytest.mark.parametrize("BK,bt,stages,dt", [(128, False, None, np.float16), (192, True, 2, jnp.bfloat16),
                                             (128, True, 3, np.float16), (64, True, 2, np.float32)], ids=str)
def test_ragged_k_wider_than_a_tile_is_split(BK, bt, stages, dt):
  """Class 4: K = 1000 copied BK columns at a time into operand buffers wider than one swizzle tile (it was MG401 at
  the copy): traced again with each buffer, and the dot's other one, split into buffers one tile wide along K, one
  copy and one dot per part; in interpret mode against NumPy and built for CUDA (float32: tiles of 32 columns)."""
  a = rnd((128, 1000), 6).astype(dt)
  b = rnd((64, 1000) if bt else (1000, 64), 7).astype(dt)
  k = _ragged_k(BK, bt, stages)
  want = np.asarray(a, np.float32) @ (np.asarray(b, np.float32).T if bt else np.asarray(b, np.float32))
  np.testing.assert_allclose(np.asarray(k(a, b, interpret=True)), want, rtol=1e-2, atol=5e-2)
  export(k, a, b)
  kernel = k._compile(*calling.keyword_inputs(k, (S(a.shape, a.dtype), S(b.shape, b.dtype)), {}))["kernel"]
  w = 32 if dt is np.float32 else 64
  k_widths = sorted(x.type.shape[-1] if x.name.startswith("a_s") or bt else x.type.shape[-2] for x in kernel.smem)
  assert k_widths == [w] * (2 * BK // w), [(x.name, x.type.shape) for x in kernel.smem]


def test_split_buffer_read_whole_into_registers_computes():
  """A split buffer read into registers too (`a_s[...]`) kept MG401 here; since probe 60c its whole read is its parts
  read and joined (tests/test_probe60c.py holds the part of one that still keeps MG401 and its hint)."""
  a, b = rnd((128, 1000), 6, np.float16), rnd((1000, 64), 7, np.float16)
  A, B = a.astype(np.float32), b.astype(np.float32)
  last = np.concatenate([A[:, 896:], np.zeros((128, 24), np.float32)], axis=1)    # (the last K window, zero-filled)
  np.testing.assert_allclose(np.asarray(_ragged_k(128, extra=True)(a, b, interpret=True)), A @ B + last[:, :64],
                             rtol=1e-2, atol=5e-2)
def test_split_buffer_used_otherwise_computes_at_64_rows():
  """The same at 64 rows, and built for CUDA: it was MG401 (hint: the one-tile-column copy, the jnp.pad) until
  probes 60a and 60c (60c reads a split buffer whole as its parts; where a split retry still gives up, 60a loads
  the buffer a tile at a time, layout_checks.by_tile_blocks)."""
  a, b = rnd((64, 1000), 6).astype(np.float16), rnd((1000, 64), 7).astype(np.float16)
  k = _ragged_k(128, extra=True)
  af = np.asarray(a, np.float32)
  want = af @ np.asarray(b, np.float32) + af[:, 896:960]       # (a_s[:, :64] after the loop: K's last window's)
  np.testing.assert_allclose(np.asarray(k(a, b, interpret=True)), want, rtol=1e-2, atol=5e-2)
  export(k, a, b)


@pytest.mark.gpu
def test_probe59a_kernels_on_the_gpu():
  """The classes' kernels on the GPU against NumPy (interpret mode does not model SMEM layouts or TMA boxes)."""
  x = rnd((3, 8, 128), 0)
  np.testing.assert_array_equal(np.asarray(jax.jit(_reversed_tma)(x)), x[::-1])
  np.testing.assert_array_equal(np.asarray(jax.jit(_reversed_rows)(x)), x[::-1] * 2)
  y = rnd((21, 64), 2)
  np.testing.assert_allclose(np.asarray(jax.jit(_odd_into_smem(7, 64))(y)), y * 2 - y.max(1, keepdims=True), rtol=1e-5)
  z = rnd((2, 20, 64), 3)
  np.testing.assert_array_equal(np.asarray(jax.jit(_block3(7, 64))(z)), z * 2 + 1)
  a, b = rnd((128, 1000), 6, np.float16), rnd((1000, 64), 7, np.float16)
  for k in (_ragged_k(128), _ragged_k(128, stages=3)):     # (split along K: tile-wide buffers, WGMMA per part)
    np.testing.assert_allclose(np.asarray(jax.jit(k)(a, b)), a.astype(np.float32) @ b.astype(np.float32),
                               rtol=1e-2, atol=5e-2)


# ---------------------------------------------------------------------- the fuzzer's new forms
CORPUS = [("views", 7), ("views", 10), ("tile", 6), ("tile", 27), ("tile", 76), ("tile", 180), ("matmul", 171),
          ("matmul", 180)]


@pytest.mark.parametrize("family,seed", CORPUS, ids=[f"{f}-{s}" for f, s in CORPUS])
def test_mem_fuzz_new_forms(family, seed):
  gen = mem_fuzz.Gen(seed, family=family, illegal=False)
  cls, detail = mem_fuzz.run(gen, build=False)
  assert cls == "ok", f"{cls}: {detail}\n{gen.source}"
