"""Partial tiles, masks, runtime scalars, while loops, atomics and random numbers: numbers in
interpret mode (against numpy), the IR and CUDA export on the CPU, and the GPU against the
interpreter and the reference (-m gpu)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand as rnd
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend.ops.random import philox_reference
from mgpu_dsl.lowering import control as lc

import ragged_kernels as R


def _triton_uniform(bits):
  """Triton's uint_to_uniform_float of uint32 words (ml.rand's since probe 47g)."""
  i = bits.view(np.int32)
  return np.where(i < 0, ~i, i).astype(np.float32) * np.float32(4.6566127342e-10)

S = jax.ShapeDtypeStruct


def rand(key, shape, dtype=jnp.float32):
  return rnd.normal(rnd.key(key), shape, dtype)


def ref_segment_sums(off, x):
  off = np.asarray(off)
  return np.array([np.asarray(x)[a:b].sum() for a, b in zip(off[:-1], off[1:])], np.float32)


def ref_double_until(x, limit):
  v, n = np.asarray(x), 0
  while v.max() < limit:
    v, n = v * 2, n + 1
  return v, np.int32(n)


def ref_accumulate(x):
  v = np.asarray(x).reshape(-1, 128)
  return v.reshape(-1, 4, 128).sum(0), np.int32(v.shape[0]), (v * 100).astype(np.int32).max(0)


OFFSETS = jnp.array([0, 5, 300, 300, 1000, 1024], jnp.int32)
# (name, kernel, args, reference, tolerance)
CASES = [
    ("double_tma_1000_rows", R.double_tma, lambda: [rand(0, (1000, 64))], lambda x: x * 2, 0.0),
    ("double_tma_100_rows", R.double_tma, lambda: [rand(1, (100, 32), jnp.bfloat16)], lambda x: x * 2, 0.0),
    ("double_masked_1000_rows", R.double_masked, lambda: [rand(2, (1000, 64))], lambda x: x * 2, 0.0),
    ("double_masked_f16", R.double_masked, lambda: [rand(3, (70, 256), jnp.float16)], lambda x: x * 2, 0.0),
    ("masked_pairs", R.masked_pairs, lambda: [rand(16, (300, 2), jnp.float16)], lambda x: x + 1.0, 0.0),
    ("axpb", R.axpb, lambda: [rand(4, (256, 64)), 0.5, -2.0], lambda x, a, b: x * a + b, 1e-6),
    ("segment_sums", R.segment_sums, lambda: [OFFSETS, rand(5, (1024,))], ref_segment_sums, 1e-4),
    ("double_until", R.double_until, lambda: [jnp.linspace(0.01, 1.0, 256, dtype=jnp.float32),
                                              jnp.float32(50.0)], ref_double_until, 0.0),
    ("accumulate", R.accumulate, lambda: [rand(6, (2048,))], ref_accumulate, 1e-5),
    ("column_sums_atomic", R.column_sums_atomic, lambda: [rand(7, (64, 256), jnp.bfloat16)],
     lambda x: np.asarray(x, np.float32).sum(0), 1e-4),
    ("fold_tma_reduce", R.fold_tma_reduce, lambda: [rand(8, (512, 64))],
     lambda x: np.asarray(x).reshape(4, 128, 64).sum(0), 1e-5),
    ("smem_atomics", R.smem_atomics, lambda: [jnp.arange(128, dtype=jnp.int32)],
     lambda x: np.asarray(x) * 3, 0.0),
    ("dot_from_row_4", R.dot_from_row_4, lambda: [rand(14, (300, 64), jnp.float16), rand(15, (64, 128), jnp.float16)],
     lambda a, b: np.asarray(a, np.float32)[4:68] @ np.asarray(b, np.float32), 1e-3),
    ("scalar_selects", R.scalar_selects, lambda: [jnp.array([5], jnp.int32), rand(17, (8, 128))],
     lambda n, x: np.asarray(x) * np.array([1.5 if i % 2 == 0 else (2.0 * i if i < 5 else -1.0) for i in range(8)],
                                            np.float32)[:, None]
     + np.array([1.0 if i < 5 and 2 * i > 3 else 0.0 for i in range(8)], np.float32)[:, None], 1e-6),
    ("uint32_loop_past_2_31", R.count_between, lambda: [jnp.array([2 ** 31 - 2, 2 ** 31 + 1], jnp.uint32),
                                                      jnp.zeros((128,), jnp.float32)],
     lambda n, x: np.asarray(x) + 3.0, 0.0),
    ("uint32_loop_near_2_32", R.count_between, lambda: [jnp.array([2 ** 32 - 4, 2 ** 32 - 1], jnp.uint32),
                                                      jnp.zeros((128,), jnp.float32)],
     lambda n, x: np.asarray(x) + 3.0, 0.0),
    ("random_bits", R.random_bits, lambda: [jnp.zeros((4096,), jnp.float32), 1234],
     lambda n, s: (np.array([philox_reference(s, 0, i)[0] for i in range(4096)], np.uint32),
                   _triton_uniform(np.array([philox_reference(s, 0, i)[0] for i in range(4096)], np.uint32))), 0.0),
]
IDS = [c[0] for c in CASES]


def _close(got, want, tol):
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    g, w = np.asarray(g), np.asarray(w)
    if tol == 0.0:
      np.testing.assert_array_equal(g.astype(w.dtype) if g.dtype != w.dtype else g, w)
    else:
      np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=tol, atol=tol)


@pytest.mark.parametrize("name,kernel,make_args,ref,tol", CASES, ids=IDS)
def test_interpret_matches_numpy(name, kernel, make_args, ref, tol):
  args = make_args()
  _close(kernel(*args, interpret=True), ref(*args), tol)


def _specs(args):
  return [a if isinstance(a, (int, float)) else S(a.shape, a.dtype) for a in args]


@pytest.mark.parametrize("name,kernel,make_args,ref,tol", CASES, ids=IDS)
def test_exports_for_cuda(name, kernel, make_args, ref, tol):
  specs = _specs(make_args())
  arrays = [s for s in specs if not isinstance(s, (int, float))]
  scalars = {i: s for i, s in enumerate(specs) if isinstance(s, (int, float))}

  def call(*a):
    it = iter(a)
    return kernel(*[scalars[i] if i in scalars else next(it) for i in range(len(specs))])
  txt = jax.export.export(jax.jit(call), platforms=["cuda"])(*arrays).mlir_module()
  assert "@mosaic_gpu" in txt


@pytest.mark.gpu
@pytest.mark.parametrize("name,kernel,make_args,ref,tol", CASES, ids=IDS)
def test_gpu_matches_interpret_and_numpy(name, kernel, make_args, ref, tol):
  args = make_args()
  got = jax.jit(kernel)(*args) if not any(isinstance(a, (int, float)) for a in args) else kernel(*args)
  _close(got, kernel(*args, interpret=True), tol)
  _close(got, ref(*args), tol)


# ---------------------------------------------------------------- what the GPU gets
def test_masked_accesses_are_predicated_per_register():
  txt = R.double_masked.mlir(S((1000, 64), jnp.float32))
  assert "vector.load" in txt and "vector.store" in txt     # registers all in bounds
  assert txt.count("memref.load") >= 2 and txt.count("memref.store") >= 2   # the others, per element
  assert txt.count("scf.if") >= 4


def test_scalars_are_memref_loads_and_stores():
  txt = R.segment_sums.mlir(S((6,), jnp.int32), S((1024,), jnp.float32))
  assert txt.count("memref.load") >= 2 and "memref.store" in txt


def test_uint32_loop_bounds_compare_unsigned():
  """Run-time bounds count in 64 bits (no wrap past 2**31): uint32 ones zero-extended."""
  txt = R.count_between.mlir(S((2,), jnp.uint32), S((128,), jnp.float32))
  assert "arith.extui" in txt and "arith.extsi" not in txt and ": i64 {" in txt
  txt = R.count_between.mlir(S((2,), jnp.int32), S((128,), jnp.float32))
  assert "arith.extsi" in txt and "arith.extui" not in txt and ": i64 {" in txt


def test_while_lowers_to_scf_while():
  txt = R.double_until.mlir(S((256,), jnp.float32), S((), jnp.float32))
  assert "scf.while" in txt and "scf.condition" in txt


def test_atomics_lower_to_red_and_outputs_start_at_the_identity():
  txt = R.accumulate.mlir(S((2048,), jnp.float32))
  assert "red.relaxed.gpu.add.f32" in txt and "red.relaxed.gpu.add.s32" in txt
  assert "red.relaxed.gpu.max.s32" in txt
  exported = jax.export.export(jax.jit(R.accumulate), platforms=["cuda"])(S((2048,), jnp.float32))
  assert "-2147483648" in exported.mlir_module()     # peak starts at int32's lowest value


def test_tma_reduce_is_a_reducing_bulk_copy():
  txt = R.fold_tma_reduce.mlir(S((512, 64), jnp.float32))
  assert "cp.reduce.async.bulk" in txt


def test_random_numbers_use_mul_hi():
  txt = R.random_bits.mlir(S((4096,), jnp.float32), 1)
  assert "mul.hi.u32" in txt


def test_scalar_parameters_compile_once_for_every_value():
  x = rand(9, (256, 64))
  R.axpb._cache.clear()
  for a in (0.5, 1.5, -3.0):
    np.testing.assert_allclose(np.asarray(R.axpb(x, a, 1.0, interpret=True)), np.asarray(x) * a + 1.0,
                               rtol=1e-6)
  assert len(R.axpb._cache) == 1


def test_scalar_parameters_work_inside_jit():
  x = rand(10, (256, 64))
  f = jax.jit(lambda x, a: R.axpb(x, a, 2.0, interpret=True))
  np.testing.assert_allclose(np.asarray(f(x, 3.0)), np.asarray(x) * 3 + 2, rtol=1e-6)


# ---------------------------------------------------------------- interpret-mode semantics
def test_a_masked_on_element_past_the_end_is_out_of_bounds():
  @mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
  def sloppy(x, out):
    i = ml.program_id(0)
    rows = i * 64 + ml.arange(64)
    inside = rows[:, None] < 100             # but x has 96 rows
    out.at[ml.ds(i * 64, 64)].store(x.at[ml.ds(i * 64, 64)].load(mask=inside), mask=inside)

  with pytest.raises(mg.IndexOutOfBoundsError, match=r"this masked load touches x\[64:100, 0:64\] in program"
                                                    r" \(1, 0, 0\) where its mask is on, outside x's shape"):
    sloppy(rand(11, (96, 64)), interpret=True)    # (the mask is known while compiling: probe 28h)


def test_atomics_from_many_programs_are_not_a_race_but_a_plain_write_is():
  x = rand(12, (2048,))
  R.accumulate(x, interpret=True)           # 16 programs update the same elements atomically

  @mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.float32), grid=(2,))
  def mixed(x, out):
    i = ml.program_id(0)
    if i == 0:
      out[...] = x[...]
    else:
      ml.atomic_add(out, x[...])

  with pytest.raises(mg.RaceError, match=r"writes out\[0\] here while program \(1, 0, 0\) adds to it with atomics"):
    mixed(rand(13, (128,)), interpret=True)


def test_a_while_loop_that_never_ends_is_reported(monkeypatch):
  monkeypatch.setattr(lc, "MAX_WHILE_ITERATIONS", 100)
  with pytest.raises(mg.InterpretError, match="ran 100 iterations"):
    R.double_until(jnp.zeros((256,), jnp.float32), jnp.float32(1.0), interpret=True)


# ---------------------------------------------------------------- random numbers
@pytest.mark.parametrize("key,counter,want", [
    ((0, 0), (0, 0, 0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
    ((0xffffffff, 0xffffffff), (0xffffffff,) * 4, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
    ((0xa4093822, 0x299f31d0), (0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344),
     (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)),
], ids=["zeros", "ones", "pi"])
def test_philox_reference_matches_random123_known_answers(key, counter, want):
  assert philox_reference(*key, *counter) == want


def test_negative_seeds_sign_extend_like_triton():
  bits, _ = R.random_bits(jnp.zeros((1024,), jnp.float32), -5, interpret=True)
  want = [philox_reference(-5 & 0xffffffff, 0xffffffff, i)[0] for i in range(1024)]
  np.testing.assert_array_equal(np.asarray(bits), np.array(want, np.uint32))


def test_uniform_numbers_look_uniform():
  _, u = R.random_bits(jnp.zeros((1 << 16,), jnp.float32), 7, interpret=True)
  u = np.asarray(u)
  assert u.min() >= 0.0 and u.max() < 1.0
  counts = np.histogram(u, bins=16, range=(0, 1))[0]
  expected = u.size / 16
  chi2 = ((counts - expected) ** 2 / expected).sum()
  assert chi2 < 40.0                          # 15 degrees of freedom: p < 1e-3 above ~37.7
  assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.02


def test_different_seeds_give_different_streams():
  a = np.asarray(R.random_bits(jnp.zeros((1024,), jnp.float32), 1, interpret=True)[0])
  b = np.asarray(R.random_bits(jnp.zeros((1024,), jnp.float32), 2, interpret=True)[0])
  assert (a != b).mean() > 0.99
