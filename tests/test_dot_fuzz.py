"""Probe 60a: differential fuzzing of tensor-core-structured kernels (tests/dot_fuzz.py, design note 197): ml.dot /
jnp.dot / `@` of 16-bit, float32 (TF32), float8 and int8 operands by TMA, pointer grids and masked windows, transposed
SMEM views, register A operands, K loops with stages and warp specialisation, chained dots, split-K, epilogues.

The class found and fixed:

1. A TMA load into a buffer tiled for the tensor cores and wider than one tile, from an array whose columns are no
   whole tiles, was MG401 ("x1's dimension 1 (328) must then be a multiple of 64"): a matmul's B stored (K, N) at a
   ragged N, an A stored (K, M) read as `a_s.T` at a ragged M, attention's K stored (d, L) at a ragged L, an A of
   ragged K loaded 128 columns at a time beside a B from registers (where the split along K of probe 59a does not
   apply), and likewise a column window starting inside a tile. Triton and Pallas take all of these (TMA clips the
   window at the array's end). Such a load is now one TMA copy per (8, 128-byte) tile of the window, each tile's
   swizzled rows (layout_checks.by_tile_blocks, lowering/memory.py _copy_tile_blocks).
2. `jnp.dot(q, k_s[...].T)` / `a_s[...] @ b_s[...].T` / `jnp.matmul(a_s[...].T, b)` (Pallas's whole reads of SMEM
   buffers, transposed) were MG204 where the buffer had fewer than 64 rows a warpgroup ("b_s[...] of shape (32, 64)
   moves between registers and b_s, which ml.dot reads"): the dot reads the buffer's view `k_s.T`, but the register
   transpose of the read, dead, stayed and took the tensor-core layout. It is dropped now (jnp_dots._drop_transpose).
3. An (8, 8) accumulator carried through a loop and added by `ml.atomic_add` (split-K of small tiles) is MG204, a
   right refusal (a register tensor holds 128 elements or more), but its message said that a (64,) vector "needs a
   multiple of 8 elements"; it now says that such a vector is held alone only at a multiple of 128.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
import dot_fuzz
from probe_util import export

S = jax.ShapeDtypeStruct


def _ints(shape, dt, seed):
  """Small whole numbers halved: exact in every operand dtype, so the products' sums are exact."""
  return jnp.asarray(np.random.default_rng(seed).integers(-7, 8, shape) / 2, dt)


# ---------------------------------------------------------------------- ragged columns of a tiled operand's array
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.float32),
                grid=lambda a, b: (ml.cdiv(a.shape[0], 64), ml.cdiv(b.shape[1], 128)))
def _ragged_n(a, b, o):
  """A matmul whose B is stored (K, N), N = 328: its last column window (256..383) runs past the array's end."""
  i, j = ml.program_id(0), ml.program_id(1)
  a_s = ml.smem((64, 64), a.dtype)
  b_s = ml.smem((64, 128), b.dtype)
  acc = ml.zeros((64, 128), jnp.float32)
  for k in ml.range(ml.cdiv(a.shape[1], 64), stages=2):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 128, 128)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  rows, cols = i * 64 + ml.arange(64), j * 128 + ml.arange(128)
  o.at[ml.ds(i * 64, 64), ml.ds(j * 128, 128)].store(acc, mask=(rows[:, None] < o.shape[0]) & (cols[None, :] < o.shape[1]))


@mg.mgpu_kernel(out_shape=lambda at, b: S((at.shape[1], b.shape[1]), jnp.float32),
                grid=lambda at, b: (ml.cdiv(at.shape[1], 128), ml.cdiv(b.shape[1], 64)))
def _ragged_m_transposed(at, b, o):
  """A stored (K, M), M = 200, read as `a_s.T`: its columns are the product's rows, 128 a tile."""
  i, j = ml.program_id(0), ml.program_id(1)
  a_s = ml.smem((64, 128), at.dtype)
  b_s = ml.smem((64, 64), b.dtype)
  acc = ml.zeros((128, 64), jnp.float32)
  for k in range(ml.cdiv(at.shape[0], 64)):
    ml.copy(at.at[ml.ds(k * 64, 64), ml.ds(i * 128, 128)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 64, 64)], b_s)
    acc = ml.dot(a_s.T, b_s, acc)
  rows, cols = i * 128 + ml.arange(128), j * 64 + ml.arange(64)
  o.at[ml.ds(i * 128, 128), ml.ds(j * 64, 64)].store(acc, mask=(rows[:, None] < o.shape[0]) & (cols[None, :] < o.shape[1]))


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.float32), grid=lambda a, b: (ml.cdiv(a.shape[0], 64),))
def _ragged_k_register_b(a, b, o):
  """A of K = 200 loaded 128 columns at a time; B loaded by Triton's pointer grid (registers: no split along K)."""
  i = ml.program_id(0)
  a_s = ml.smem((64, 128), a.dtype)
  acc = ml.zeros((64, 64), jnp.float32)
  for k in range(ml.cdiv(a.shape[1], 128)):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 128, 128)], a_s)
    rk = k * 128 + ml.arange(128)
    bv = ml.load(b.at[rk[:, None], ml.arange(64)[None, :]], mask=rk[:, None] < b.shape[0], other=0.0)
    acc = ml.dot(a_s, bv, acc)
  rows = i * 64 + ml.arange(64)
  o.at[ml.ds(i * 64, 64), :].store(acc, mask=(rows < o.shape[0])[:, None])


CASES = {     # kernel, input shapes, reference, TMA copies at least (one a tile of the ragged window's buffer)
    "ragged_n": (_ragged_n, [(100, 192), (192, 328)], lambda a, b: a @ b, 16),
    "ragged_m_transposed": (_ragged_m_transposed, [(128, 200), (128, 64)], lambda at, b: at.T @ b, 16),
    "ragged_k_register_b": (_ragged_k_register_b, [(64, 200), (200, 64)], lambda a, b: a @ b, 16),
}


def _args(name, dt=jnp.bfloat16):
  kernel, shapes, ref, _ = CASES[name]
  args = [_ints(s, dt, k) for k, s in enumerate(shapes)]
  want = ref(*[np.asarray(x, np.float64) for x in args])
  return kernel, args, want


@pytest.mark.parametrize("name", sorted(CASES))
def test_ragged_columns_of_a_tiled_operand_load_compute(name):
  """Each was MG401 ("dimension 1 (328) must then be a multiple of 64"): now one TMA copy a tile, against NumPy."""
  kernel, args, want = _args(name)
  got = kernel(*args, interpret=True)
  np.testing.assert_array_equal(np.asarray(got, np.float64), want)


@pytest.mark.parametrize("name", sorted(CASES))
def test_ragged_columns_of_a_tiled_operand_load_export(name):
  """The tile-at-a-time copies build for CUDA: one async copy per (8, 128-byte) tile of the window."""
  kernel, args, _ = _args(name)
  specs = [S(a.shape, a.dtype) for a in args]
  export(kernel, *specs)
  assert kernel.mlir(*specs).count("cp.async.bulk.tensor") >= CASES[name][3]


def test_a_column_window_starting_inside_a_tile_is_loaded_a_tile_at_a_time():
  """`kt.at[:, ml.ds(8, 128)]` of keys stored (d, L): a static start inside a tile of the tiled k_s, two tiles wide
  (was MG401: "this window starts at 8 in dimension 1, inside a tile")."""
  q, kt = _ints((64, 64), jnp.float16, 0), _ints((64, 200), jnp.float16, 1)

  @mg.mgpu_kernel(out_shape=lambda q, kt: S((64, 128), jnp.float32), grid=(1,))
  def off_tile(q, kt, o):
    q_s = ml.smem((64, 64), q.dtype)
    k_s = ml.smem((64, 128), kt.dtype)
    ml.copy(q, q_s)
    ml.copy(kt.at[:, ml.ds(8, 128)], k_s)
    o[...] = ml.dot(q_s, k_s)
  got = off_tile(q, kt, interpret=True)
  want = np.asarray(q, np.float64) @ np.asarray(kt, np.float64)[:, 8:136]
  np.testing.assert_array_equal(np.asarray(got, np.float64), want)
  export(off_tile, q, kt)


# ---------------------------------------------------------------------- whole reads of SMEM buffers, transposed
@mg.mgpu_kernel(out_shape=lambda q, k: S((q.shape[0], k.shape[0]), jnp.float32), grid=(1,))
def _pallas_qk(q, k, o):
  """Pallas's `jnp.dot(q, k_ref[...].T)` with 32 keys (fewer than a warpgroup's 64 rows)."""
  q_s = ml.smem(q.shape, q.dtype)
  k_s = ml.smem(k.shape, k.dtype)
  ml.copy(q, q_s)
  ml.copy(k, k_s)
  o[...] = jnp.dot(q_s[...], k_s[...].T, preferred_element_type=jnp.float32)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), jnp.float32), grid=(1,))
def _tf32_at_b_t(a, b, o):
  """`a_s[...] @ b_s[...].T` of float32 (TF32) buffers, b of 8 rows."""
  a_s = ml.smem(a.shape, a.dtype)
  b_s = ml.smem(b.shape, b.dtype)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  o[...] = a_s[...] @ b_s[...].T


@mg.mgpu_kernel(out_shape=lambda at, b: S((at.shape[1], b.shape[1]), jnp.float32), grid=(1,))
def _a_t_matmul(at, b, o):
  """`jnp.matmul(a_s[...].T, b)` of an A stored (k, m) with k = 16 rows."""
  a_s = ml.smem(at.shape, at.dtype)
  ml.copy(at, a_s)
  o[...] = jnp.matmul(a_s[...].T, b[...], preferred_element_type=jnp.float32)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), jnp.float32), grid=(1,))
def _small_f32_register_a(a, b, o):
  """`jnp.dot(av, b_s[...].T)` of an (8, 64) float32 register A and 8 rows of b: small enough for jnp's float32
  products in registers, which read the register transpose: it must stay (dropped, interpret mode failed, MG900)."""
  b_s = ml.smem(b.shape, b.dtype)
  ml.copy(b, b_s)
  av = a[...]
  o[...] = jnp.dot(av, b_s[...].T)


READS = {
    "small_f32_register_a": (_small_f32_register_a, [((8, 64), jnp.float32), ((8, 64), jnp.float32)],
                             lambda a, b: a @ b.T),
    "pallas_qk": (_pallas_qk, [((64, 64), jnp.float16), ((32, 64), jnp.float16)], lambda q, k: q @ k.T),
    "tf32_at_b_t": (_tf32_at_b_t, [((64, 32), jnp.float32), ((8, 32), jnp.float32)], lambda a, b: a @ b.T),
    "a_t_matmul": (_a_t_matmul, [((16, 64), jnp.bfloat16), ((16, 64), jnp.bfloat16)], lambda at, b: at.T @ b),
}


@pytest.mark.parametrize("name", sorted(READS))
def test_transposed_whole_reads_of_smem_buffers_are_their_views(name):
  """Each was MG204: now the dot reads the buffer's view, no register transpose left (interpret mode, CUDA export)."""
  kernel, shapes, ref = READS[name]
  args = [_ints(s, d, k) for k, (s, d) in enumerate(shapes)]
  np.testing.assert_array_equal(np.asarray(kernel(*args, interpret=True), np.float64),
                                ref(*[np.asarray(x, np.float64) for x in args]))
  specs = [S(a.shape, a.dtype) for a in args]
  export(kernel, *specs)
  if name not in ("a_t_matmul", "small_f32_register_a"):     # (products of register tiles: the transpose stays)
    assert "transposestore" not in kernel.typed_ir(*specs)


def test_a_small_accumulator_added_by_atomics_computes():
  """Class 3: (8, 8) partial sums of a split K added by atomics were MG204 at the loop (a (64,) vector); since probe
  61b the padded trace adds the padded accumulator under the padding's mask (ops/padded_atomics.py)."""
  @mg.mgpu_kernel(out_shape=lambda a, b: S((8, 8), jnp.float32), grid=(1,))
  def split_part(a, b, o):
    a_s = ml.smem((8, 64), jnp.float16)
    acc = ml.zeros((8, 8), jnp.float32)
    for k in range(2):
      ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
      acc = ml.dot(a_s, b.at[ml.ds(k * 64, 64), :][...], acc)
    ml.atomic_add(o, acc)
  a, b = _ints((8, 128), jnp.float16, 0), _ints((128, 8), jnp.float16, 1)
  np.testing.assert_array_equal(np.asarray(split_part(a, b, interpret=True), np.float64),
                                np.asarray(a, np.float64) @ np.asarray(b, np.float64))
  export(split_part, S((8, 128), jnp.float16), S((128, 8), jnp.float16))


# ---------------------------------------------------------------------- the corpus
SAMPLE = [0, 1, 2, 4, 8, 16, 21, 26]       # gemm of each operand path and dtype, chain, pallas, split-K, block 384


@pytest.mark.parametrize("seed", SAMPLE)
def test_fuzz_sample(seed):
  """A fixed sample of the fuzzer's kernels, each against its reference (interpret mode) and exported for CUDA."""
  g = dot_fuzz.Gen(seed)
  assert dot_fuzz.run(g, build=True) == ("ok", ""), (seed, g.source)


def test_fuzz_reference_tells_a_wrong_result():
  """The comparison fails where a kernel computes otherwise: a sample kernel's accumulator doubled is "wrong"."""
  g = dot_fuzz.Gen(SAMPLE[1])
  k = next(k for k, line in enumerate(g.lines) if line.strip().startswith("y = "))
  g.lines[k] = g.lines[k] + " * 2"
  assert dot_fuzz.run(g, build=False)[0] == "wrong"


def test_the_gpu_script_runs_a_seed_without_a_gpu():
  """benchmarks/probe_dot_fuzz.py's worker function: without a GPU, interpret mode against the reference and a CUDA
  export (what fuzz_pool's workers call for each seed)."""
  import os
  import sys
  sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
  import probe_dot_fuzz
  cls, family, tags, detail = probe_dot_fuzz.run_seed(SAMPLE[-1], None, False, 1)
  assert (cls, detail) == ("ok", "") and family == dot_fuzz.Gen(SAMPLE[-1]).family and "dot" in tags


# ---------------------------------------------------------------------- on the GPU
@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_ragged_columns_of_a_tiled_operand_load_on_gpu(name):
  """The tile-at-a-time copies on the GPU (TMA's clipping of each tile's box past the array's end)."""
  kernel, args, want = _args(name)
  np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(*args), np.float64), want)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(READS))
def test_transposed_whole_reads_of_smem_buffers_on_gpu(name):
  kernel, shapes, ref = READS[name]
  args = [_ints(s, d, k) for k, (s, d) in enumerate(shapes)]
  np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(*args), np.float64),
                                ref(*[np.asarray(x, np.float64) for x in args]))


@pytest.mark.gpu
@pytest.mark.parametrize("seed", SAMPLE)
def test_fuzz_sample_on_gpu(seed):
  """The sample under jax.jit on the GPU, against the plan's reference."""
  g = dot_fuzz.Gen(seed)
  got = jax.jit(dot_fuzz.diff_fuzz.load(g))(*g.args)
  got = got if isinstance(got, (tuple, list)) else (got,)
  for a, w in zip(got, g.refs):
    assert dot_fuzz.compare(np.asarray(a), w, g.tol_dtype) is None, seed
