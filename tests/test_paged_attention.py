"""examples/paged_attention.py and examples/dropout.py: interpret mode against references, CUDA
export, the IR they compile to, and the GPU (-m gpu)."""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "examples"))
import dropout as dx  # noqa: E402
import paged_attention as pa  # noqa: E402

S = jax.ShapeDtypeStruct

# inputs and reference as one program each, not a dozen eager ops a call (the CI has two cores)
make_inputs = jax.jit(pa.make_inputs, static_argnums=tuple(range(1, 9)))
reference = jax.jit(pa.reference)


def specs(args):
  return [S(a.shape, a.dtype) for a in args]


@pytest.mark.parametrize("shape,splits", [((2, 4, 2, 128, 16, 8), 2), ((1, 2, 2, 64, 32, 4), 4),
                                          ((2, 2, 1, 128, 16, 6), 3)], ids=["gqa", "mha_page32", "mqa"])
def test_interpret_matches_reference(shape, splits):
  args = make_inputs(jax.random.key(1), *shape)
  got = pa.paged_attention(*args, splits=splits, interpret=True)
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(reference(*args), np.float32),
                             atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("lengths", [[0, 64, 65, 255, 256], [1, 17, 130, 3, 200, 256, 64, 90, 48]])
def test_work_items_go_to_programs_longest_first(lengths):
  page, per_split, splits = 16, 4, 4                    # pages of 16 tokens, 4 a split, 16 a sequence
  batch = len(lengths)

  @mg.mgpu_kernel(out_shape=lambda n: jax.ShapeDtypeStruct((batch * splits, 8), jnp.int32),
                  grid=(batch * splits,))
  def schedule(n, out):
    r = ml.program_id(0)
    b, s = pa._longest_first(n, r, page, per_split, splits)
    out.at[r][...] = ml.where(ml.arange(8) == 0, b, s)

  got = np.asarray(schedule(jnp.array(lengths, jnp.int32), interpret=True))[:, :2]
  assert sorted(map(tuple, got.tolist())) == [(b, s) for b in range(batch) for s in range(splits)]
  pages = -(-np.array(lengths) // page)
  work = [min(max(pages[b] - s * per_split, 0), per_split) for b, s in got]
  assert work == sorted(work, reverse=True), work       # each program's item is no larger than the last's
  schedule.check(S((batch,), jnp.int32))


@pytest.mark.parametrize("q_regs", [False, True])
def test_tensor_core_path_reads_the_groups_query_rows_itself(q_regs):
  args = make_inputs(jax.random.key(5), 2, 12, 3, 128, 16, 8)     # 3 kv heads of 4 query heads
  got = pa.paged_attention(*args, splits=2, tensor_cores=True, q_regs=q_regs, interpret=True)
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(reference(*args), np.float32),
                             atol=2e-3, rtol=2e-3)
  hlo = jax.export.export(jax.jit(lambda *a: pa.paged_attention(*a, splits=2, tensor_cores=True, q_regs=q_regs)),
                          platforms=["cuda"])(*args).mlir_module()
  assert "@mosaic_gpu" in hlo
  assert not ("stablehlo.pad" in hlo or "dynamic_update_slice" in hlo or "scatter" in hlo)   # no padded copy


@pytest.mark.parametrize("fused", [True, False])
def test_splits_combined_by_one_kernel_or_by_xla(fused):
  args = make_inputs(jax.random.key(11), 4, 16, 4, 128, 16, 8)      # 64 (sequence, head) rows
  got = pa.paged_attention(*args, splits=4, tensor_cores=True, fused_combine=fused, interpret=True)
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(reference(*args), np.float32),
                             atol=2e-3, rtol=2e-3)
  hlo = jax.export.export(jax.jit(lambda *a: pa.paged_attention(*a, splits=4, fused_combine=fused)),
                          platforms=["cuda"])(*specs(args)).mlir_module()
  assert hlo.count("@mosaic_gpu") - hlo.count("func.func private @mosaic_gpu") == (2 if fused else 1)


def test_cache_slots_past_a_sequence_may_hold_anything():
  q, k, v, tables, lengths = make_inputs(jax.random.key(2), 2, 2, 2, 128, 16, 4, max_len=40)
  lengths = jnp.array([40, 17], jnp.int32)
  poisoned = v.at[:, tables[0, 2], 8:].set(jnp.nan).at[:, tables[1, 1], 1:].set(jnp.inf)  # past the ends
  got = pa.paged_attention(q, k, poisoned, tables, lengths, splits=2, interpret=True)
  want = reference(q, k, v, tables, lengths)
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), atol=2e-3)


def test_tensor_core_path_ignores_finite_garbage_past_a_sequence():
  # Grouped-query heads share one tensor-core tile; slots past the end are multiplied by p = 0,
  # so they may hold any finite value (the docstring asks for a cache without NaN there).
  q, k, v, tables, lengths = make_inputs(jax.random.key(6), 2, 4, 2, 128, 16, 8, max_len=70)
  lengths = jnp.array([70, 33], jnp.int32)
  junk = v.at[:, tables[0, 4], 6:].set(3e4).at[:, tables[1, 2], 1:].set(-3e4)
  junk_k = k.at[:, tables[0, 4], 6:].set(jnp.nan)
  for tc in (True, False):
    got = pa.paged_attention(q, junk_k, junk, tables, lengths, splits=2, tensor_cores=tc, interpret=True)
    want = reference(q, k, v, tables, lengths)
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), atol=2e-3)


def test_several_pages_fill_one_pipelined_tensor_core_operand():
  args = specs(make_inputs(jax.random.key(3), 2, 8, 2, 128, 16, 8))
  ir = pa.paged_attention_parts_mma.typed_ir(*args, splits=2, group=4)
  assert "stages=2" in ir and "index=[%" in ir
  copies = [l for l in ir.splitlines() if " copy src=" in l and "slot=0 " not in l]
  assert len(copies) >= 16          # 4 pages of K and of V, in the prologue and the prefetch
  mlir = pa.paged_attention_parts_mma.mlir(*args, splits=2, group=4)
  assert "wgmma" in mlir and "cp.async.bulk.tensor" in mlir


def test_page_table_entries_drive_pipelined_tma_loads():
  args = specs(make_inputs(jax.random.key(3), 2, 4, 2, 128, 16, 6))
  ir = pa.paged_attention_parts.typed_ir(*args, splits=3)       # 2 entries a split: read from GMEM
  tables = next(l.split()[1] for l in ir.splitlines() if "block_tables:" in l)
  assert "stages=4" in ir and f"scalarread ref={tables} " in ir    # a pure read: pipelined
  args = specs(make_inputs(jax.random.key(3), 2, 4, 2, 128, 16, 8))
  ir = pa.paged_attention_parts.typed_ir(*args, splits=2)       # 4 entries a split: staged in SMEM
  assert "stages=4" in ir and "scalarload" in ir and f"scalarread ref={tables} " not in ir
  mlir = pa.paged_attention_parts.mlir(*args, splits=2)
  assert "cp.async.bulk.tensor" in mlir and "scf.for" in mlir


def test_paged_attention_exports_for_cuda():
  args = specs(make_inputs(jax.random.key(4), 8, 16, 4, 128, 16, 64))
  txt = jax.export.export(jax.jit(lambda *a: pa.paged_attention(*a, splits=8)), platforms=["cuda"])(*args)
  assert "@mosaic_gpu" in txt.mlir_module()


def test_dropout_is_reproducible_and_matches_the_philox_reference():
  x = rand.normal(rand.key(5), (2500,), jnp.float32)
  a = np.asarray(dx.dropout(x, 7, p=0.25, interpret=True))
  np.testing.assert_array_equal(a, np.asarray(dx.dropout(x, 7, p=0.25, interpret=True)))
  keep = dx.reference_mask(2500, 7, 0.25)
  np.testing.assert_allclose(a, np.where(keep, np.asarray(x) / 0.75, 0.0), rtol=1e-6)
  assert 0.7 < keep.mean() < 0.8


def test_dropout_exports_for_cuda():
  txt = jax.export.export(jax.jit(dx.dropout), platforms=["cuda"])(S((5000,), jnp.float32), S((), jnp.int32))
  assert "@mosaic_gpu" in txt.mlir_module()


@pytest.mark.gpu
@pytest.mark.parametrize("shape,splits", [((8, 16, 4, 128, 16, 64), 8), ((4, 8, 8, 128, 32, 32), 4),
                                          ((2, 4, 2, 128, 16, 8), 2)], ids=["gqa", "mha_page32", "small"])
@pytest.mark.parametrize("tc,opts", [(True, {}), (True, {"q_regs": False}), (True, {"q_regs": True, "stages": 2}),
                                     (True, {"fused_combine": False}), (False, {})],
                         ids=["tensor_cores", "tensor_cores_q_smem", "tensor_cores_stages2", "tensor_cores_xla_combine",
                              "cuda_cores"])
def test_gpu_matches_reference_and_interpret(shape, splits, tc, opts):
  args = make_inputs(jax.random.key(6), *shape)
  got = np.asarray(pa.paged_attention(*args, splits=splits, tensor_cores=tc, **opts), np.float32)
  np.testing.assert_allclose(got, np.asarray(reference(*args), np.float32), atol=2e-3, rtol=2e-3)
  if shape[0] <= 2:
    # Within two float16 ulps of the output: the GPU's exp and numpy's differ in the last bits.
    interpreted = pa.paged_attention(*args, splits=splits, tensor_cores=tc, interpret=True, **opts)
    np.testing.assert_allclose(got, np.asarray(interpreted, np.float32), atol=5e-4, rtol=2e-3)


@pytest.mark.gpu
def test_gpu_dropout_is_bit_exact_with_interpret_mode():
  x = rand.normal(rand.key(8), (10000,), jnp.float32)
  np.testing.assert_array_equal(np.asarray(jax.jit(dx.dropout)(x, 123)),
                                np.asarray(dx.dropout(x, 123, interpret=True)))
