"""Probe 58b: differential fuzzing of memory-structured kernels (TMA windows, masks, pipelines, SMEM views, dots,
atomics) against NumPy references computed from each kernel's plan (tests/mem_fuzz.py, design note 189).

Some thousands of kernels ran in interpret mode (a sample exported for CUDA); the classes found, each fixed:

1. An SMEM buffer written from a tensor-core result and stored by TMA (a matmul's epilogue `c_s[...] = acc`,
   `ml.copy(c_s, c.at[...])`) was tiled for the tensor cores as an optimisation, which made its store copy whole
   (8, 128-byte) tiles of the output: an output whose columns are no multiple of the tile (84 float32 columns) was
   MG401 on a legal kernel. Such a buffer now stays untiled where one of its copies cannot move whole tiles.
2. A strided view indexed again by a run-time scalar (`x.at[:, :, ::2].at[p]`, a program's slice of every other
   column) was MG003 "not viewed again"; on an axis the view takes whole it is the plain subscript `x[p, :, ::2]`.
   A static `ml.ds` window of a strided view (`.at[ml.ds(1, 6)]`) composes as its slice, never clipped (one that
   leaves the view is MG203, naming both).

3. Block pointers and tensor descriptors of odd blocks (`block_shape=(7, 64)`, a tile no register layout holds
   whole) were MG204, where the same window read and written under a user's mask computes padded: the boundary
   check's mask was built by reshapes the padded trace does not recompute (now `inside[:, None]`, as a user writes
   it), and a store compared the padded value's shape with the block's (now its own shape).

The corpus test runs a fixed sample of the fuzzer's plans, one or more of every family, and its deliberately
illegal plans, which must be refused with their class at their line.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
import mem_fuzz
from probe_util import export, rnd

S = jax.ShapeDtypeStruct


# ---------------------------------------------------------------------- class 1
@mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), jnp.float32),
                grid=lambda a, bt: (ml.cdiv(a.shape[0], 64), ml.cdiv(bt.shape[0], 64)))
def _ragged_epilogue(a, bt, c):
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  ml.copy(a.at[ml.ds(i * 64, 64), :], a_s)
  ml.copy(bt.at[ml.ds(j * 64, 64), :], b_s)
  c_s = ml.smem((64, 64))
  c_s[...] = ml.dot(a_s, b_s.T)
  ml.copy(c_s, c.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)])


def test_epilogue_buffer_of_a_ragged_output_is_copied_untiled():
  """Class 1: c has 84 columns (no multiple of the 32-column float32 tile): the epilogue buffer stays untiled, so
  its TMA store writes plain rows (it was MG401 at the copy); exact against NumPy and built for CUDA."""
  a, bt = rnd((100, 64), 0, np.float16), rnd((84, 64), 1, np.float16)
  got = np.asarray(_ragged_epilogue(a, bt, interpret=True))
  np.testing.assert_allclose(got, a.astype(np.float32) @ bt.astype(np.float32).T, rtol=1e-5, atol=1e-4)
  export(_ragged_epilogue, a, bt)


@pytest.mark.gpu
def test_epilogue_buffer_of_a_ragged_output_on_gpu():
  """Class 1 on the GPU: the untiled epilogue buffer, written from the WGMMA layout and stored by TMA, gives the
  product (interpret mode does not model SMEM layouts)."""
  a, bt = rnd((100, 64), 0, np.float16), rnd((84, 64), 1, np.float16)
  got = np.asarray(jax.jit(_ragged_epilogue)(a, bt))
  np.testing.assert_allclose(got, a.astype(np.float32) @ bt.astype(np.float32).T, rtol=1e-5, atol=1e-4)


def test_epilogue_buffer_of_whole_tiles_stays_tiled():
  """Class 1's rule keeps the tiling where the copies take it: at 128 columns the epilogue buffer is tiled for the
  tensor cores, as before; at 84 it is not (the operands a_s and b_s are tiled in both)."""
  from mgpu_dsl import calling
  a = S((128, 64), jnp.float16)
  tiled = {}
  for cols in (128, 84):
    bt = S((cols, 64), jnp.float16)
    kernel = _ragged_epilogue._compile(*calling.keyword_inputs(_ragged_epilogue, (a, bt), {}))["kernel"]
    tiled[cols] = sorted(b.name for b in kernel.smem if b.id in kernel.smem_layouts)
  assert tiled == {128: ["a_s", "b_s", "c_s"], 84: ["a_s", "b_s"]}, tiled


# ---------------------------------------------------------------------- class 2
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:2] + (x.shape[2] // 2,), x.dtype), grid=lambda x: (x.shape[0],))
def _strided_by_program(x, o):
  p = ml.program_id(0)
  o.at[p][...] = x.at[:, :, 1::2].at[p][...] * 2


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 6, x.shape[2]), x.dtype), grid=lambda x: (x.shape[0],))
def _strided_window(x, o):
  p = ml.program_id(0)
  o.at[p][...] = x.at[:, 0::2].at[p].at[ml.ds(1, 6)][...]


def test_strided_view_indexed_by_a_program_id():
  """Class 2: `x.at[:, :, 1::2].at[p]` is `x[p, :, 1::2]` (it was MG003), in interpret mode and for CUDA."""
  x = rnd((3, 16, 128), 2)
  np.testing.assert_array_equal(np.asarray(_strided_by_program(x, interpret=True)), x[:, :, 1::2] * 2)
  export(_strided_by_program, x)


def test_strided_view_static_window_composes():
  """Class 2: a static `ml.ds` window of a strided view is its slice: rows 1..6 of x[p, 0::2]."""
  x = rnd((4, 16, 128), 3)
  np.testing.assert_array_equal(np.asarray(_strided_window(x, interpret=True)), x[:, 0::2][:, 1:7])


def test_strided_view_window_leaving_it_is_reported_at_the_line():
  """A window of a strided view that leaves it (rows 30..37 of the 32 at a step of 2 of 64) is not clipped: an
  IndexOutOfBoundsError at the view, naming the window and the view (it said "not viewed again", MG003)."""
  @mg.mgpu_kernel(out_shape=lambda x: S((8, x.shape[2]), x.dtype), grid=(1,))
  def leaves(x, o):
    o[...] = x.at[1, 0::2].at[ml.ds(30, 8)][...]

  with pytest.raises(mg.IndexOutOfBoundsError) as e:
    leaves.check(S((2, 64, 128), jnp.float32))
  line = next(k for k, t in enumerate(open(__file__).read().splitlines(), 1) if "at[ml.ds(30, 8)][...]" in t)
  assert (e.value.lineno, e.value.col_offset, e.value.code) == (line, 13, "MG203")
  assert e.value.message == ("the window ml.ds(30, 8) runs past the end of x.at[1, 0::2], which holds 32 elements"
                             " along that axis")
  assert "start it at most at 24" in e.value.hint


def test_run_time_index_of_part_of_a_strided_axis_stays_refused():
  """A run-time index of a strided view that takes part of its axis (`x.at[1:6:2].at[p]`) is not composed (a p past
  the view could name an element outside it that no bounds check sees): MG003 with the hint to index the ref itself
  with the element meant. (The whole axis reversed, `x.at[::-1].at[p]`, is x[n - 1 - p] since probe 59a.)"""
  @mg.mgpu_kernel(out_shape=lambda x: S(x.shape[1:], x.dtype), grid=(1,))
  def part(x, o):
    o[...] = x.at[1:6:2].at[ml.program_id(0)][...]

  with pytest.raises(mg.KernelTypeError) as e:
    part.check(S((8, 8, 128), jnp.float32))
  assert "index the ref itself" in e.value.hint and "1 + " in e.value.hint and "* 2" in e.value.hint


# ---------------------------------------------------------------------- class 3
def _odd_blocks(R, C):
  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], R), ml.cdiv(x.shape[1], C)))
  def odd_blocks(x, o):
    i, j = ml.program_id(0), ml.program_id(1)
    bp = ml.make_block_ptr(base=x, shape=x.shape, strides=(x.shape[1], 1), offsets=(i * R, j * C),
                           block_shape=(R, C), order=(1, 0))
    ob = ml.make_block_ptr(base=o, shape=o.shape, strides=(o.shape[1], 1), offsets=(i * R, j * C),
                           block_shape=(R, C), order=(1, 0))
    ml.store(ob, ml.load(bp, boundary_check=(0, 1), padding_option="zero") * 2, boundary_check=(0, 1))
  return odd_blocks


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 7),))
def _odd_descriptors(x, o):
  i = ml.program_id(0)
  d = ml.make_tensor_descriptor(x, shape=[x.shape[0], x.shape[1]], strides=[x.shape[1], 1], block_shape=[7, 64])
  od = ml.make_tensor_descriptor(o, shape=[o.shape[0], o.shape[1]], strides=[o.shape[1], 1], block_shape=[7, 64])
  od.store([i * 7, 0], d.load([i * 7, 0]) + 1)


@pytest.mark.parametrize("R,C,dt", [(7, 64, np.float32), (4, 48, np.float16), (5, 80, np.int32)], ids=str)
def test_block_pointers_of_odd_blocks_compute_padded(R, C, dt):
  """Class 3: a block pointer's odd block, loaded and stored with both axes checked (it was MG204 at the load)."""
  x = (rnd((20, 200), 4) * 8).astype(dt)
  k = _odd_blocks(R, C)
  np.testing.assert_array_equal(np.asarray(k(x, interpret=True)), x * 2)
  if dt is np.float32:
    export(k, x)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0], ml.cdiv(x.shape[1], 7)))
def _odd_batched_block(x, o):
  b, i = ml.program_id(0), ml.program_id(1)
  B, M, N = x.shape
  bp = ml.make_block_ptr(base=x, shape=(B, M, N), strides=(M * N, N, 1), offsets=(b, i * 7, 0), block_shape=(1, 7, 64),
                         order=(2, 1, 0))
  v = ml.load(bp, boundary_check=(0, 1, 2), padding_option="zero")[0]
  o.at[b, ml.ds(i * 7, 7), :].store(v * 2, mask=(i * 7 + ml.arange(7) < M)[:, None])


def test_batched_block_pointer_of_an_odd_block_loads_padded():
  """Class 3: a 3-axis pointer's (1, 7, 64) block, its size-1 axis inserted as `v[None]` is (a reshape met the padded
  tile: MG204), read back as `v[0]`; a store through such a pointer stays MG204 (design note 189)."""
  x = rnd((2, 20, 64), 6)
  np.testing.assert_array_equal(np.asarray(_odd_batched_block(x, interpret=True)), x * 2)


def test_tensor_descriptors_of_odd_blocks_compute_padded():
  """Class 3: Triton 3's tensor descriptor of a (7, 64) block, loaded and stored (it was MG204 at the load)."""
  x = rnd((20, 64), 5)
  np.testing.assert_array_equal(np.asarray(_odd_descriptors(x, interpret=True)), x + 1)
  export(_odd_descriptors, x)


# ---------------------------------------------------------------------- the corpus
FAMILIES = sorted(set(mem_fuzz.Gen.FAMILIES))
CORPUS = [(f, s) for f in FAMILIES for s in (1, 2)] + [("tile", s) for s in (3, 4, 5)] + [
    ("matmul", s) for s in (3, 4)]
ILLEGAL = [(f, s) for f, s in (("tile", 10), ("matmul", 11), ("loop", 12), ("smem", 13), ("views", 14))]


@pytest.mark.parametrize("family,seed", CORPUS, ids=[f"{f}-{s}" for f, s in CORPUS])
def test_mem_fuzz_corpus(family, seed):
  gen = mem_fuzz.Gen(seed, family=family, illegal=False)
  cls, detail = mem_fuzz.run(gen, build=CORPUS.index((family, seed)) % 3 == 0)
  assert cls == "ok", f"{cls}: {detail}\n{gen.source}"


@pytest.mark.parametrize("family,seed", ILLEGAL, ids=[f"{f}-{s}" for f, s in ILLEGAL])
def test_mem_fuzz_illegal_plans_are_refused_at_their_line(family, seed):
  gen = mem_fuzz.Gen(seed, family=family, illegal=True)
  cls, detail = mem_fuzz.run(gen, build=False)
  assert cls == "refused" and detail == gen.illegal[0], f"{cls}: {detail}\n{gen.source}"


def test_mem_fuzz_references_catch_a_wrong_element():
  """The harness can fail: one element of a reference moved by 1 is "wrong", for a plain and a matmul plan."""
  for family in ("tile", "matmul"):
    gen = mem_fuzz.Gen(1, family=family, illegal=False)
    name, ref = gen.outs[0]
    ref = ref.copy()
    ref.reshape(-1)[-1] += 1
    gen.outs[0] = (name, ref)
    assert mem_fuzz.run(gen, build=False)[0] == "wrong", family


@pytest.mark.gpu
@pytest.mark.parametrize("family,seed", CORPUS, ids=[f"{f}-{s}" for f, s in CORPUS])
def test_mem_fuzz_corpus_on_gpu(family, seed):
  gen = mem_fuzz.Gen(seed, family=family, illegal=False)
  got = jax.jit(mem_fuzz.diff_fuzz.load(gen))(*gen.args)
  got = got if isinstance(got, (tuple, list)) else (got,)
  for g, w in zip(got, gen.refs):
    bad = mem_fuzz.compare(np.asarray(g), w, dot="dot" in gen.tags)
    assert bad is None, f"{bad}\n{gen.source}"
