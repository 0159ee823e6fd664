"""Probe 28d (mixture-of-experts and ragged pipelines driven by data): register indexing with a
uint32 index of 2**31 or more (or an int64 one past int32), which read the element its low 32 bits
name as a negative int32, where jnp clamps to the last element."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- register indexing by unsigned / wide indices
@mg.mgpu_kernel(out_shape=lambda x, i: S((8,), F32))
def pick_eight(x, i, out):
  v = x[...]
  acc = ml.zeros((8,), F32)
  for k in ml.static_range(8):
    acc = ml.where(ml.arange(8) == k, v[i[k]], acc)
  out[...] = acc


def _jnp_scalar_indexing(x, idx):
  return np.array([np.asarray(jnp.asarray(x)[k]) for k in idx], np.float32)


def test_a_uint32_register_index_past_2_31_clamps_to_the_last_element_as_jnp():
  x = np.random.RandomState(0).randn(128).astype(np.float32)
  idx = np.array([0, 5, 2 ** 31, 2 ** 31 + 7, 2 ** 32 - 1, 127, 128, 3], np.uint32)
  got = pick_eight(jnp.asarray(x), jnp.asarray(idx), interpret=True)
  want = _jnp_scalar_indexing(x, [jnp.uint32(k) for k in idx])
  np.testing.assert_array_equal(np.asarray(got), want)
  assert want[2] == x[127]            # (it read x[0]: 2**31 as the int32 -2**31, wrapped and clamped)
  assert "mosaic_gpu" in _export(pick_eight, S((128,), F32), S((8,), jnp.uint32))


def test_an_int64_register_index_past_int32_clamps_as_jnp():
  with jax.enable_x64(True):
    x = np.random.RandomState(1).randn(128).astype(np.float32)
    idx = np.array([0, 5, -1, 2 ** 32, 2 ** 32 + 3, -2 ** 32, 2 ** 40, -2 ** 33 + 1], np.int64)
    got = pick_eight(jnp.asarray(x), jnp.asarray(idx), interpret=True)
    want = _jnp_scalar_indexing(x, [jnp.int64(k) for k in idx])
    np.testing.assert_array_equal(np.asarray(got), want)
    assert "mosaic_gpu" in _export(pick_eight, S((128,), F32), S((8,), jnp.int64))


# ---------------------------------------------------------------- .astype of a weakly typed loop carry
@mg.mgpu_kernel(out_shape=lambda c: S(c.shape, I32), grid=lambda c: (c.shape[0],))
def prefix_int8_cast_carry(c, out):
  p = ml.program_id(0)
  s = 0
  for q in range(p):
    s = s.astype(jnp.int32) + c[q]
  out[p] = s


@mg.mgpu_kernel(out_shape=lambda c: S(c.shape, I32), grid=lambda c: (c.shape[0],))
def prefix_int8(c, out):
  p = ml.program_id(0)
  s = 0
  for q in range(p):
    s = s + c[q]
  out[p] = s


@mg.mgpu_kernel(out_shape=lambda c: S(c.shape, I32), grid=lambda c: (c.shape[0],))
def prefix_int8_as_hinted(c, out):
  p = ml.program_id(0)
  s = 0
  for q in range(p):
    s = s + c[q].astype(jnp.int32)
  out[p] = s


def test_astype_of_a_weakly_typed_carry_is_that_dtype_and_8bit_hints_name_the_8bit_operand():
  spec = S((10,), jnp.int8)
  # s.astype(jnp.int32) stayed weak, took int8 from c[q]: "+ is not supported on int8", with the hint
  # s.astype(jnp.int32).astype(jnp.int32); then int32 + int8 was MG104, and is int32 since probe 47b, as jnp's
  c = np.random.RandomState(3).randint(-50, 50, size=10).astype(np.int8)
  got = prefix_int8_cast_carry(jnp.asarray(c), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.cumsum(c.astype(np.int32)) - c)
  # the hint named the carry s (an int8 only because it met c[q]): followed, s.astype(jnp.int32) + c[q]
  # was the error above
  # (probe 38g: s + c[q] is int8 arithmetic, jnp's, so the int8 sum meets the int32 output)
  expect(prefix_int8, [spec], mg.StoreDtypeError, "out[p] = s",
         "cannot store s (int8) into out[p] (GMEM, int32): no implicit conversion",
         hint="convert explicitly: (s).astype(jnp.int32)")
  c = np.random.RandomState(2).randint(0, 50, size=10).astype(np.int8)
  got = prefix_int8_as_hinted(jnp.asarray(c), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.cumsum(c.astype(np.int32)) - c)
  assert "mosaic_gpu" in _export(prefix_int8_as_hinted, spec)


# ---------------------------------------------------------------- race hints: a window a program, in words that work
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(48,))
def pairs_share_a_row(x, out):
  r = ml.program_id(0) * 4 // 3            # windows [0, 2), [1, 3), [2, 4), [4, 6), ...
  out.at[ml.ds(r, 2)][...] = x.at[ml.ds(r, 2)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(32,))
def pairs_share_a_row_as_hinted(x, out):
  out.at[ml.ds(ml.program_id(0) * 2, 2)][...] = x.at[ml.ds(ml.program_id(0) * 2, 2)][...]


@mg.mgpu_kernel(out_shape=lambda z, x, e, r: z, grid=lambda z, x, e, r: (x.shape[0],), input_output_aliases={0: 0})
def dispatch_to_slots(z, x, e, r, buf):
  t = ml.program_id(0)
  slot = r[t]
  if slot < 8:
    buf.at[e[t] * 8 + slot][...] = x.at[t][...]


def test_the_race_hint_says_a_tile_rule_only_when_it_binds_a_tail_only_when_partial_and_a_grid_that_runs():
  # was: "windows of 2 rows (a register tile needs a multiple of 1) cover its 64 rows, the last one partial,
  # launching 32 programs (grid=lambda x: (ml.cdiv(x.shape[0], 2),)): out.at[...].store(value, mask=...)"
  hint = ("give each program its own window of out: windows of 2 rows cover its 64 rows, launching 32 programs"
          " (grid=(32,)): out.at[ml.ds(ml.program_id(0) * 2, 2)][...] = value, and read the matching window of"
          " the inputs")
  e = expect(pairs_share_a_row, [S((64, 128), F32)], mg.RaceError, "out.at[ml.ds(r, 2)][...] =",
             "program (0, 0, 0) and program (1, 0, 0) both write out[1, 0]: programs run in no fixed order, so"
             " the result depends on timing")
  assert e.hint.startswith(hint + ";"), e.hint
  x = rand.normal(rand.key(0), (64, 128), F32)
  np.testing.assert_array_equal(np.asarray(pairs_share_a_row_as_hinted(x, interpret=True)), np.asarray(x))
  assert "mosaic_gpu" in _export(pairs_share_a_row_as_hinted, S((64, 128), F32))


def test_interpret_modes_race_hint_for_slots_from_data_launches_a_grid_that_runs():
  rs = np.random.RandomState(3)
  x = rs.randn(24, 128).astype(np.float32)
  experts = rs.randint(0, 4, 24).astype(np.int32)
  with pytest.raises(mg.RaceError) as info:      # every token sent to slot 0 of its expert
    dispatch_to_slots(jnp.zeros((32, 128), F32), jnp.asarray(x), jnp.asarray(experts),
                      jnp.zeros((24,), I32), interpret=True)
  assert info.value.hint == (
      "give each program its own window of buf: windows of 2 rows cover its 32 rows, launching 16 programs"
      " (grid=(16,)): buf.at[ml.ds(ml.program_id(0) * 2, 2)][...] = value, and read the matching window of the"
      " inputs; where the place comes from data and repeats (buf[seg[k]] = v), accumulate instead:"
      " ml.atomic_add(buf.at[seg[k]], v) into a zeroed output (repeated places add up)")


# ---------------------------------------------------------------- a grid rounded down to no programs
@mg.mgpu_kernel(out_shape=lambda ids, w: S((8, 128), I32), grid=lambda ids, w: (w.shape[0] // 128,))
def expert_max_rounded_down(ids, w, out):
  t = ml.program_id(0)
  ml.atomic_max(out.at[ids[t]], w.at[ml.ds(t * 128, 128)][...])


def _grid_of_kernel_args(ids, w):
  n = w.shape[0] // 128
  return (n,)


@mg.mgpu_kernel(out_shape=lambda ids, w: S((8, 128), I32), grid=_grid_of_kernel_args)
def expert_max_named_grid(ids, w, out):
  t = ml.program_id(0)
  ml.atomic_max(out.at[ids[t]], w.at[ml.ds(t * 128, 128)][...])


@mg.mgpu_kernel(out_shape=lambda ids, w: S((8, 128), I32), grid=lambda ids, w: (ml.cdiv(w.shape[0], 128),))
def expert_max_as_hinted(ids, w, out):
  t = ml.program_id(0)
  n = w.shape[0]
  v = w.at[ml.ds(t * 128, 128)].load(mask=t * 128 + ml.arange(128) < n, other=np.iinfo(np.int32).min)
  ml.atomic_max(out.at[ids[t]], v)


def test_a_grid_rounded_down_to_nothing_hints_the_users_own_callable_rounded_up():
  specs = [S((32,), I32), S((32,), I32)]
  # was grid=lambda x: (ml.cdiv(x.shape[0], 128),): a callable of one input, for a kernel of two (MG006)
  expect(expert_max_rounded_down, specs, mg.LaunchConfigError, "grid=lambda ids, w",
         "grid must be 1 to 3 positive ints, got (0,)",
         hint="the grid callable gave no programs along an axis for these inputs (fewer rows than one program's"
              " tile, with //): round up, grid=lambda ids, w: (ml.cdiv(w.shape[0], 128),), and mask the last"
              " tile's accesses (or pad the input)")
  expect(expert_max_named_grid, specs, mg.LaunchConfigError, "grid=_grid_of_kernel_args",
         "grid must be 1 to 3 positive ints, got (0,)",
         hint="the grid callable gave no programs along an axis for these inputs (fewer rows than one program's"
              " tile, with //): round up, grid=lambda ids, w: (ml.cdiv(ids.shape[0], 128),), and mask the last"
              " tile's accesses (or pad the input)")
  ids = np.array([3], np.int32)
  w = np.arange(32, dtype=np.int32) - 7
  got = np.asarray(expert_max_as_hinted(jnp.asarray(ids), jnp.asarray(w), interpret=True))
  assert got[3].tolist() == w.tolist() + [np.iinfo(np.int32).min] * 96
  assert "mosaic_gpu" in _export(expert_max_as_hinted, *specs)


# ---------------------------------------------------------------- rows a warp does not divide: the MG204 hint
L = 64


@mg.mgpu_kernel(out_shape=lambda off, v: S((off.shape[0] - 1, L, v.shape[1]), v.dtype),
                grid=lambda off, v: (off.shape[0] - 1,))
def jagged_to_padded(off, v, out):
  b = ml.program_id(0)
  a, e = off[b], off[b + 1]
  rows = ml.arange(L)[:, None]
  out.at[b][...] = v.at[ml.ds(a, L), :].load(mask=rows < e - a, other=0.0)


@mg.mgpu_kernel(out_shape=lambda off, v: S((off.shape[0] - 1, L, v.shape[1]), v.dtype),
                grid=lambda off, v: (off.shape[0] - 1,))
def jagged_to_padded_as_hinted(off, v, out):
  b = ml.program_id(0)
  a, e = off[b], off[b + 1]
  rows, cols = ml.arange(L)[:, None], ml.arange(64)[None, :]
  t = v.at[ml.ds(a, L), ml.ds(0, 64)].load(mask=(rows < e - a) & (cols < 48), other=0.0)
  out.at[b, :, ml.ds(0, 64)].store(t, mask=cols < 48)


def test_rows_of_48_columns_under_a_row_mask_compile_as_does_the_masked_read_64_wide():
  # it was MG204 hinting the 64-wide read; since probe 30c a row mask of index vectors is computed
  # at the narrow tile's shape (frontend/index_grids.py), so the kernel as written compiles
  specs = [S((5,), I32), S((100, 48), F32)]
  off = np.array([0, 10, 10, 80, 100], np.int32)
  v = np.random.RandomState(4).randn(100, 48).astype(np.float32)
  want = np.zeros((4, L, 48), np.float32)
  for i, (a, b) in enumerate(zip(off[:-1], off[1:])):
    want[i, :min(b - a, L)] = v[a:a + min(b - a, L)]
  for k in (jagged_to_padded, jagged_to_padded_as_hinted):
    got = k(jnp.asarray(off), jnp.asarray(v), interpret=True)
    np.testing.assert_array_equal(np.asarray(got), want)
    assert "mosaic_gpu" in _export(k, *specs)


# ---------------------------------------------------------------- CSR rows gathered in chunks narrower than a warp
def _spmv_rows(chunk):
  @mg.mgpu_kernel(out_shape=lambda rp, ci, va, x: S((rp.shape[0] - 1,), F32),
                  grid=lambda rp, ci, va, x: (ml.cdiv(rp.shape[0] - 1, 8),))
  def spmv(rp, ci, va, x, y):
    p = ml.program_id(0)
    inside = p * 8 + ml.arange(8) < rp.shape[0] - 1
    a = rp.at[ml.ds(p * 8, 8)].load(mask=inside, other=0)
    e = rp.at[ml.ds(p * 8 + 1, 8)].load(mask=inside, other=0)
    acc = ml.zeros((8, chunk), F32)
    for c in range(ml.cdiv(ml.max(e - a), chunk)):
      k = a[:, None] + c * chunk + ml.arange(chunk)[None, :]
      acc = acc + ml.where(k < e[:, None], va[k] * x[ci[k]], 0.0)
    y.at[ml.ds(p * 8, 8)].store(ml.sum(acc, axis=1), mask=inside)
  return spmv


spmv_chunks_of_16 = _spmv_rows(16)
spmv_chunks_of_32 = _spmv_rows(32)


def test_a_gather_by_csr_chunks_of_16_compiles_and_chunks_of_32_work():
  specs = [S((22,), I32), S((1000,), I32), S((1000,), F32), S((500,), F32)]
  builds(spmv_chunks_of_16, *specs)     # (now compiled: tiles narrower than a warp take fewer lanes a row, tests/test_narrow_rows.py)
  rs = np.random.RandomState(5)
  nnz = rs.randint(0, 90, 21)
  nnz[2], nnz[5] = 0, 64
  rp = np.concatenate([[0], np.cumsum(nnz)]).astype(np.int32)
  ci = rs.randint(0, 500, rp[-1]).astype(np.int32)
  va, x = rs.randn(rp[-1]).astype(np.float32), rs.randn(500).astype(np.float32)
  got = spmv_chunks_of_32(jnp.asarray(rp), jnp.asarray(ci), jnp.asarray(va), jnp.asarray(x), interpret=True)
  want = np.array([(va[a:b] * x[ci[a:b]]).sum() for a, b in zip(rp[:-1], rp[1:])], np.float32)
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
  assert "mosaic_gpu" in _export(spmv_chunks_of_32, S((22,), I32), S((int(rp[-1]),), I32),
                                 S((int(rp[-1]),), F32), S((500,), F32))


# ---------------------------------------------------------------- break in a while on Python values
@mg.mgpu_kernel(out_shape=lambda first, x: S((x.shape[0], 128), F32), grid=lambda first, x: (x.shape[0],))
def find_expert_break(first, x, out):
  e = ml.program_id(0)
  j = 0
  while j < 10:
    if first[j] == e:
      break
    j += 1
  out.at[e][...] = x.at[e][...] * j.astype(F32)


@mg.mgpu_kernel(out_shape=lambda first, x: S((x.shape[0], 128), F32), grid=lambda first, x: (x.shape[0],))
def find_expert_as_hinted(first, x, out):
  e = ml.program_id(0)
  j = 0
  found = 0
  while (j < 10) & (found == 0):
    found = ml.where(first[j] == e, 1, found)
    if found == 0:
      j += 1
  out.at[e][...] = x.at[e][...] * j.astype(F32)


def test_a_break_in_a_while_on_python_values_hints_the_while_condition_not_a_while():
  # was: "this loop is unrolled while tracing, ...; for a run-time exit, loop with while and fold the exit
  # into its condition" (it is a while)
  # the break now ends the loop at run time (frontend/jumps.py): it and the hinted form agree
  first = np.array([3, 3, 1, 0, 2, 2, 2, 9, 9, 9], np.int32)
  got = find_expert_break(jnp.asarray(first), jnp.ones((4, 128), F32), interpret=True)
  want = [next((j for j in range(10) if first[j] == e), 10) for e in range(4)]
  np.testing.assert_array_equal(np.asarray(got), np.repeat(np.array(want, np.float32)[:, None], 128, 1))
  got = find_expert_as_hinted(jnp.asarray(first), jnp.ones((4, 128), F32), interpret=True)
  want = [next((j for j in range(10) if first[j] == e), 10) for e in range(4)]
  np.testing.assert_array_equal(np.asarray(got), np.repeat(np.array(want, np.float32)[:, None], 128, 1))
  assert "mosaic_gpu" in _export(find_expert_as_hinted, S((10,), I32), S((4, 128), F32))
