"""Probe 35d (mixture-of-experts and data-dependent kernels: top-k gating, expert histograms, offsets,
token permutations, grouped GEMMs over ragged segments, CSR products, embedding bags, early exits and
loops whose trip counts are read from memory). The kernels ran right in interpret mode and exported for
CUDA; what failed is below, each with the kernel a user of this theme wrote."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32
_SEG = dict(out_shape=lambda x, off: S((off.shape[0] - 1,), F32), grid=lambda x, off: (off.shape[0] - 1,))


def _segment_sums(x, off):
  return np.array([x[off[g]:off[g + 1]].sum() for g in range(len(off) - 1)], np.float32)


# ---------------------------------------------------------------- a segment's run-time length as a window size
@mg.mgpu_kernel(**_SEG)
def segment_window(x, off, out):
  g = ml.program_id(0)
  start = off[g]; end = off[g + 1]
  out[g] = ml.sum(x.at[ml.ds(start, end - start)][...])


@mg.mgpu_kernel(**_SEG)
def segment_window_followed(x, off, out):
  g = ml.program_id(0)
  start = off[g]; end = off[g + 1]
  v = x.at[ml.ds(start, 304)].load(mask=ml.arange(304) < (end - start), other=0)
  out[g] = ml.sum(v)


def test_a_run_time_window_size_is_named_as_written_and_its_hint_works():
  """The size `end - start` has no name of its own: the message and the hint called it `i`, a name
  the kernel does not have (or, worse, one it has for something else)."""
  expect(segment_window, [S((300,), F32), S((5,), I32)], mg.KernelTypeError, "x.at[ml.ds(start, end - start)]",
         "ml.ds size must be a positive static int, got end - start, a run-time value: a window's size is fixed"
         " when the kernel is compiled",
         hint="take a window of fixed size and mask it to the run-time length: v = x.at[ml.ds(start, 304)]"
              ".load(mask=ml.arange(304) < (end - start), other=0)")
  off = jnp.asarray([0, 5, 5, 200, 300], I32)
  x = jnp.asarray(np.random.default_rng(0).standard_normal(300), F32)
  got = segment_window_followed(x, off, interpret=True)
  np.testing.assert_allclose(np.asarray(got), _segment_sums(np.asarray(x), np.asarray(off)), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- a run-time slice whose start is an expression
@mg.mgpu_kernel(**_SEG)
def inner_slice(x, off, out):             # each segment without its first and last element
  g = ml.program_id(0)
  out[g] = ml.sum(x[off[g] + 1:off[g + 1] - 1])


@mg.mgpu_kernel(**_SEG)
def inner_slice_followed(x, off, out):
  g = ml.program_id(0)
  v = x.at[ml.ds(off[g] + 1, 304)].load(mask=ml.arange(304) < (ml.minimum(off[g + 1] - 1, 300) - (off[g] + 1)),
                                        other=0)
  out[g] = ml.sum(v)


def test_a_run_time_slice_hint_subtracts_a_compound_start_whole():
  """The hint's length was `ml.minimum(stop, n) - off[g] + 1`: followed, it kept two elements too many
  (a silently wrong kernel); the start is now subtracted in parentheses."""
  expect(inner_slice, [S((300,), F32), S((5,), I32)], mg.KernelTypeError, "x[off[g] + 1:off[g + 1] - 1]",
         "slice off[g] + 1:off[g + 1] - 1 of dimension 0 of x has a run-time stop: a window's size is fixed when"
         " the kernel is compiled",
         hint="take a window of fixed size and mask it to the run-time length: v = x.at[ml.ds(off[g] + 1, 304)]"
              ".load(mask=ml.arange(304) < (ml.minimum(off[g + 1] - 1, 300) - (off[g] + 1)), other=0)")
  off = np.array([0, 5, 7, 200, 300], np.int32)
  x = np.random.default_rng(1).standard_normal(300).astype(np.float32)
  got = inner_slice_followed(jnp.asarray(x), jnp.asarray(off), interpret=True)
  want = np.array([x[off[g] + 1:off[g + 1] - 1].sum() for g in range(4)], np.float32)
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- reads of an aliased input that atomics update
@mg.mgpu_kernel(out_shape=lambda c: c, grid=(4,), input_output_aliases={0: 0})
def aliased_total_read(c, out):            # each program adds the first count to it
  v = c[0]
  ml.atomic_add(out.at[0], v)


@mg.mgpu_kernel(out_shape=lambda c, before: c, grid=(4,), input_output_aliases={0: 0})
def aliased_total_read_followed(c, before, out):
  v = before[0]
  ml.atomic_add(out.at[0], v)


@mg.mgpu_kernel(out_shape=lambda c: c, grid=(4,), input_output_aliases={0: 0})
def aliased_own_rows(c, out):              # each program reads and updates only its own rows: no race
  i = ml.program_id(0)
  ml.atomic_add(out.at[ml.ds(i * 32, 32)], c.at[ml.ds(i * 32, 32)][...])


def test_a_read_of_an_aliased_input_other_programs_update_with_atomics_is_a_race_when_compiling():
  """The same read of the output was MG951 when compiling; of the input aliased to it (the same
  memory) it passed the check, and only interpret mode found the race."""
  expect(aliased_total_read, [S((4,), I32)], mg.RaceError, "c[0]",
         "c (aliased to out) is read here while other programs may still be adding to it with atomics: programs"
         " run in no fixed order, so the value read depends on timing",
         hint="an output that programs update with atomics holds the total only once the kernel has ended: read it"
              " in a second kernel (or in JAX after the call); for the values c held before the call, pass the"
              " array a second time as an input that is not aliased, and read that one")
  c = jnp.arange(4, dtype=I32) + 1
  got = aliased_total_read_followed(c, c, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(c) + np.array([4 * int(c[0]), 0, 0, 0]))
  x = jnp.arange(128, dtype=I32)
  np.testing.assert_array_equal(np.asarray(aliased_own_rows(x, interpret=True)), 2 * np.asarray(x))


# ---------------------------------------------------------------- storing expert outputs back at token rows
_UNPERMUTE = dict(out_shape=lambda y, tok: S((64, y.shape[1]), F32))
_SPECS = [S((64, 128), F32), S((64,), I32)]


@mg.mgpu_kernel(**_UNPERMUTE)
def unpermute_assign(y, tok, c):           # vLLM's tl.store(c_ptrs, acc), one row per token slot
  t = tok[...]
  c[t, :] = y[...] * 2.0


@mg.mgpu_kernel(**_UNPERMUTE)
def unpermute_masked(y, tok, c):           # padding slots (t >= 50) masked off
  t = tok[...]
  ml.store(c.at[t, :], y[...], mask=(t < 50)[:, None])


@mg.mgpu_kernel(**_UNPERMUTE)
def unpermute_masked_method(y, tok, c):
  t = tok[...]
  c.at[t, :].store(y[...] * 2.0, mask=(t < 50)[:, None])


@mg.mgpu_kernel(**_UNPERMUTE)
def unpermute_masked_followed(y, tok, c):
  t = tok[...]
  ml.atomic_add(c.at[t, :], ml.where((t < 50)[:, None], y[...], 0))


@mg.mgpu_kernel(**_UNPERMUTE)
def accumulate_at_rows(y, tok, c):
  t = tok[...]
  c[t, :] += y[...]


def test_a_store_at_token_rows_is_a_scatter_with_its_mask():
  """vLLM's unpermute, `c[t, :] = rows` and the masked `tl.store(c_ptrs, acc, mask=...)`: once errors whose
  hints were atomic adds (one of them, followed, added the rows the mask kept off). They are scatters now;
  `c[t, :] += ...` is still an error naming the atomic add."""
  e = expect(accumulate_at_rows, _SPECS, mg.UnsupportedSyntaxError, "c[t, :] +=",
             "an augmented assignment at a tensor of indices is not supported in a kernel")
  assert e.hint.startswith("accumulate with ml.atomic_add(c.at[t, :], y[...]) (jnp's c.at[t, :].add;")
  rng = np.random.default_rng(2)
  y = jnp.asarray(rng.standard_normal((64, 128)), F32)
  tok = jnp.asarray(rng.permutation(64), I32)
  t, keep = np.asarray(tok), np.asarray(tok) < 50
  want = np.zeros((64, 128), np.float32)
  want[t] = 2 * np.asarray(y)
  np.testing.assert_array_equal(np.asarray(unpermute_assign(y, tok, interpret=True)), want)
  for kernel, scale in ((unpermute_masked, 1), (unpermute_masked_method, 2), (unpermute_masked_followed, 1)):
    want = np.zeros((64, 128), np.float32)
    want[t[keep]] = scale * np.asarray(y)[keep]
    np.testing.assert_array_equal(np.asarray(kernel(y, tok, interpret=True)), want, err_msg=kernel.__name__)


# ---------------------------------------------------------------- Triton's index keywords of top-1 routing
@mg.mgpu_kernel(out_shape=lambda lg: S((lg.shape[0],), I32))
def router_return_indices(lg, ids):        # tl.max(logits, axis=1, return_indices=True)
  p, e = ml.max(lg[...], axis=1, return_indices=True)
  ids[...] = e


@mg.mgpu_kernel(out_shape=lambda lg: S((lg.shape[0],), I32))
def router_tie_left(lg, ids):
  v = lg[...]
  ids[...] = ml.argmax(v, axis=1, tie_break_left=True)


@mg.mgpu_kernel(out_shape=lambda lg: S((lg.shape[0],), I32))
def router_tie_right(lg, ids):
  v = lg[...]
  ids[...] = ml.argmax(v, 1, tie_break_left=False)


@mg.mgpu_kernel(out_shape=lambda lg: S((lg.shape[0],), I32))
def router_tie_right_followed(lg, ids):
  v = lg[...]
  ids[...] = v.shape[1] - 1 - ml.argmax(ml.flip(v, 1), 1)


def test_tritons_return_indices_and_tie_break_left_are_hinted_in_the_kernels_words():
  """The hints were `the indices are ml.argmax(x, axis)` (no name the kernel has) and, for
  tie_break_left, the bare signature; tie_break_left=False (the last index) had no way shown."""
  spec = [S((64, 64), F32)]
  lg = np.round(np.random.default_rng(3).standard_normal((64, 64))).astype(np.float32)    # many ties
  # return_indices=True and tie_break_left=True were hints until probe 47g: Triton's first index, as ml.argmax's
  for kernel in (router_return_indices, router_tie_left):
    np.testing.assert_array_equal(np.asarray(kernel(jnp.asarray(lg), interpret=True)), np.argmax(lg, axis=1))
  expect(router_tie_right, spec, mg.KernelTypeError, "ml.argmax(",
         "ml.argmax's tie_break_left= must be True, got False: the index here is the first one",
         hint="for the last index of the extreme value, take the first of the flipped axis: v.shape[1] - 1 -"
              " ml.argmax(ml.flip(v, 1), 1)")
  got = np.asarray(router_tie_right_followed(jnp.asarray(lg), interpret=True))
  np.testing.assert_array_equal(got, 63 - np.argmax(lg[:, ::-1], axis=1))


# ---------------------------------------------------------------- an expert's weights gathered into registers as B
@mg.mgpu_kernel(out_shape=lambda a, b, e: S((64, 64), F32))
def expert_b_in_registers(a, b, e, out):
  ex = e[0]
  bv = b[ex, ml.arange(64)[:, None], ml.arange(64)[None, :]]
  a_s = ml.smem((64, 64), a.dtype)
  ml.copy(a, a_s)
  out[...] = ml.dot(a_s, bv)


@mg.mgpu_kernel(out_shape=lambda a, b, e: S((64, 64), F32))
def expert_b_followed(a, b, e, out):
  ex = e[0]
  bv = b[ex, ml.arange(64)[:, None], ml.arange(64)[None, :]]
  a_s = ml.smem((64, 64), a.dtype)
  ml.copy(a, a_s)
  b_s = ml.smem((64, 64))
  b_s[...] = bv
  out[...] = ml.dot(a_s, b_s)


def test_a_register_b_operand_is_staged_in_smem():
  """The hint was `b_s[...] = b_value`, a name the kernel does not have, and no allocation; since probe 47g
  the compiler stores such a tile into a buffer of its own (Triton's tl.dot of a gathered B)."""
  rng = np.random.default_rng(4)
  a = rng.standard_normal((64, 64)).astype(np.float16)
  b = rng.standard_normal((4, 64, 64)).astype(np.float16)
  want = a.astype(np.float32) @ b[2].astype(np.float32)
  for kernel in (expert_b_followed, expert_b_in_registers):
    got = kernel(jnp.asarray(a), jnp.asarray(b), jnp.asarray([2], I32), interpret=True)
    np.testing.assert_allclose(np.asarray(got), want, rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- a grouped GEMM's tile stored at a segment's row
_GG = dict(out_shape=lambda x, w, off: S((x.shape[0], w.shape[2]), F32), grid=lambda x, w, off: (w.shape[0],))


@mg.mgpu_kernel(**_GG)
def grouped_tma_store(x, w, off, out):
  e = ml.program_id(0)
  s = off[e]; end = off[e + 1]
  a_s = ml.smem((64, 64), x.dtype); b_s = ml.smem((64, 64), x.dtype); c_s = ml.smem((64, 64), F32)
  for t in range(ml.cdiv(end - s, 64)):
    acc = ml.zeros((64, 64), F32)
    for k in range(x.shape[1] // 64):
      ml.copy(x.at[ml.ds(s + t * 64, 64), ml.ds(k * 64, 64)], a_s)
      ml.copy(w.at[e, ml.ds(k * 64, 64), :], b_s)
      acc = ml.dot(a_s, b_s, acc)
    c_s[...] = acc
    ml.copy(c_s, out.at[ml.ds(s + t * 64, 64), :])


@mg.mgpu_kernel(**_GG)
def grouped_store_followed(x, w, off, out):
  e = ml.program_id(0)
  s = off[e]; end = off[e + 1]
  a_s = ml.smem((64, 64), x.dtype); b_s = ml.smem((64, 64), x.dtype); c_s = ml.smem((64, 64), F32)
  for t in range(ml.cdiv(end - s, 64)):
    acc = ml.zeros((64, 64), F32)
    for k in range(x.shape[1] // 64):
      ml.copy(x.at[ml.ds(s + t * 64, 64), ml.ds(k * 64, 64)], a_s)
      ml.copy(w.at[e, ml.ds(k * 64, 64), :], b_s)
      acc = ml.dot(a_s, b_s, acc)
    c_s[...] = acc
    out.at[ml.ds(s + t * 64, 64), :].store(c_s[...], mask=((s + t * 64) + ml.arange(64) < end)[:, None])


def _grouped_args():
  rng = np.random.default_rng(5)
  x = rng.standard_normal((200, 128)).astype(np.float16)
  w = rng.standard_normal((4, 128, 64)).astype(np.float16)
  off = np.array([0, 70, 70, 200, 200], np.int32)        # an empty expert, segments not on 8-row tiles
  want = np.zeros((200, 64), np.float32)
  for e in range(4):
    want[off[e]:off[e + 1]] = x[off[e]:off[e + 1]].astype(np.float32) @ w[e].astype(np.float32)
  return (jnp.asarray(x), jnp.asarray(w), jnp.asarray(off)), want


def test_a_tile_stored_at_a_segment_row_hints_the_masked_store_from_registers():
  """MG401's hint offered only ml.multiple_of(start, 8), a false promise where segments start
  anywhere (interpret mode's InterpretError); the masked store from registers takes any row."""
  e = expect(grouped_tma_store, [S((200, 128), jnp.float16), S((4, 128, 64), jnp.float16), S((5,), I32)],
             mg.TmaLimitError, "ml.copy(c_s, out",
             "c_s is tiled (8, 32) for the tensor cores, so TMA copies whole tiles of out; the start of"
             " out.at[ml.ds(s + t * 64, 64), :] in dimension 0 is not provably a multiple of 8")
  assert e.hint.endswith(
      "if the start always is one, say so: ml.ds(ml.multiple_of(s + t * 64, 8), 64); where it may not be one,"
      " store the tile from registers, which takes any start, with a mask of the rows to write:"
      " out.at[ml.ds(s + t * 64, 64), :].store(c_s[...], mask=((s + t * 64) + ml.arange(64) < end)[:, None]) (end"
      " the first row not to write), or the registers c_s was filled from")
  args, want = _grouped_args()
  np.testing.assert_allclose(np.asarray(grouped_store_followed(*args, interpret=True)), want, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_the_grouped_gemms_masked_store_from_smem_on_the_gpu():
  args, want = _grouped_args()
  np.testing.assert_allclose(np.asarray(jax.jit(grouped_store_followed)(*args)), want, rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- a CSR row's nonzeros copied from its row pointer
_CSR = dict(out_shape=lambda rp, ci, val, x: S((rp.shape[0] - 1,), F32), grid=lambda rp, ci, val, x: (rp.shape[0] - 1,))


@mg.mgpu_kernel(**_CSR)
def spmv_tma(rp, ci, val, x, y):
  r = ml.program_id(0)
  start = rp[r]; end = rp[r + 1]
  v_s = ml.smem((128,), F32)
  acc = ml.zeros((128,), F32)
  for k in range(start, end, 128):
    ml.copy(val.at[ml.ds(k, 128)], v_s)
    idx = k + ml.arange(128)
    acc = acc + ml.where(idx < end, v_s[...] * x[ci.at[ml.ds(k, 128)].load(mask=idx < end, other=0)], 0.0)
  y[r] = ml.sum(acc)


@mg.mgpu_kernel(**_CSR)
def spmv_followed(rp, ci, val, x, y):
  r = ml.program_id(0)
  start = rp[r]; end = rp[r + 1]
  acc = ml.zeros((128,), F32)
  for k in range(start, end, 128):
    v = val.at[ml.ds(k, 128)].load(mask=k + ml.arange(128) < val.shape[0], other=0)
    idx = k + ml.arange(128)
    acc = acc + ml.where(idx < end, v * x[ci.at[ml.ds(k, 128)].load(mask=idx < end, other=0)], 0.0)
  y[r] = ml.sum(acc)


def test_a_tma_copy_from_a_row_pointer_hints_the_masked_register_load_in_the_kernels_words():
  """The hint ended 'or read the window into registers with ref[...]': unmasked, the last row's
  window runs past the array's end (interpret mode's OutOfBoundsError)."""
  spec = [S((5,), I32), S((300,), I32), S((300,), F32), S((50,), F32)]
  expect(spmv_tma, spec, mg.TmaLimitError, "ml.copy(val.at",
         "TMA copies need a window's start in the last dimension to fall on a 16-byte boundary (a multiple of 4"
         " float32 elements); the start of val.at[ml.ds(k, 128)] in val's last dimension is not provably one, and"
         " a misaligned start faults the GPU",
         hint="start windows at multiples of 4 (e.g. i * 128); if the start always is one, say so:"
              " ml.ds(ml.multiple_of(k, 4), 128); or read the window into registers, which takes any start, masked"
              " where it runs past the array's end: val.at[ml.ds(k, 128)].load(mask=k + ml.arange(128) <"
              " val.shape[0], other=0)")
  rng = np.random.default_rng(6)
  rp = np.array([0, 3, 3, 170, 300], np.int32)
  ci = rng.integers(0, 50, 300).astype(np.int32)
  val = rng.standard_normal(300).astype(np.float32)
  x = rng.standard_normal(50).astype(np.float32)
  want = np.array([np.sum(val[rp[r]:rp[r + 1]] * x[ci[rp[r]:rp[r + 1]]]) for r in range(4)], np.float32)
  got = spmv_followed(*map(jnp.asarray, (rp, ci, val, x)), interpret=True)
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- numpy's .item() of an offset read as a scalar
@mg.mgpu_kernel(out_shape=lambda off: S((off.shape[0] - 1,), I32), grid=lambda off: (off.shape[0] - 1,))
def segment_lengths_item(off, out):
  g = ml.program_id(0)
  out[g] = off[g + 1].item() - off[g].item()


@mg.mgpu_kernel(out_shape=lambda off: S((1,), I32))
def total_item(off, out):
  n = off.at[ml.ds(off.shape[0] - 1, 1)][...]
  out[0] = n.item()


def test_item_of_a_scalar_or_a_one_element_tensor_says_what_to_write():
  """The hint listed every method of refs and register values."""
  expect(segment_lengths_item, [S((5,), I32)], mg.KernelTypeError, "off[g + 1].item()",
         "a scalar has no attribute 'item'", hint="a scalar is already one value: write off[g + 1], without .item()")
  expect(total_item, [S((5,), I32)], mg.KernelTypeError, "n.item()",
         "a register tensor has no attribute 'item'", hint="take its element: n[0], a scalar")


# ---------------------------------------------------------------- jnp's functional update of a register histogram
@mg.mgpu_kernel(out_shape=lambda ids: S((16,), I32))
def register_counts_at(ids, counts):
  c = ml.zeros((16,), I32)
  for t in range(ids.shape[0]):
    c = c.at[ids[t]].add(1)
  counts[...] = c


@mg.mgpu_kernel(out_shape=lambda ids: S((16,), I32))
def register_counts_followed(ids, counts):
  c = ml.zeros((16,), I32)
  for t in range(ids.shape[0]):
    c = ml.where(ml.arange(16) == ids[t], c + 1, c)
  counts[...] = c


@mg.mgpu_kernel(out_shape=lambda ids: S((32,), I32))
def register_counts_many(ids, counts):
  e = ids[...]
  c = ml.zeros((32,), I32)
  c = c.at[e].add(1)
  counts[...] = c


@mg.mgpu_kernel(out_shape=lambda ids: S((32,), I32))
def register_counts_many_followed(ids, counts):
  e = ids[...]
  c = ml.zeros((32,), I32)
  c = c + ml.sum(ml.where(e[:, None] == ml.arange(32)[None, :], 1, 0), axis=0)
  counts[...] = c


def test_jnps_at_add_of_a_register_histogram_is_hinted_with_the_kernels_index_and_value():
  """The hint wrote `c.at[idx].set(y)` with `idx` and `y`, names the kernel does not have, and a select that
  counts a tensor of indices wrongly."""
  rng = np.random.default_rng(7)      # (c.at[e].add(1) of a tensor of indices is jnp's scatter since probe 49e)
  ids = rng.integers(0, 16, 100).astype(np.int32)     # (c.at[ids[t]].add(1) at a scalar computes since probe 51i)
  np.testing.assert_array_equal(np.asarray(register_counts_at(jnp.asarray(ids), interpret=True)),
                                np.bincount(ids, minlength=16))
  many = rng.integers(0, 32, 128).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(register_counts_many(jnp.asarray(many), interpret=True)),
                                np.bincount(many, minlength=32))
  ids = rng.integers(0, 16, 100).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(register_counts_followed(jnp.asarray(ids), interpret=True)),
                                np.bincount(ids, minlength=16))
  ids = rng.integers(0, 32, 128).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(register_counts_many_followed(jnp.asarray(ids), interpret=True)),
                                np.bincount(ids, minlength=32))


@mg.mgpu_kernel(out_shape=lambda y, tok: S((64, 128), F32))
def unpermute_into_input(y, tok, c):
  t = tok[...]
  y[t, :] = y[...] * 2.0
  c[...] = y[...]


def test_a_store_at_rows_of_an_input_says_it_is_read_only_before_the_scatter():
  """The scatter hint would have added into the input itself (an InputWriteError when followed)."""
  expect(unpermute_into_input, _SPECS, mg.InputWriteError, "y[t, :] =",
         "this scatter writes y, an input: inputs are read-only",
         hint="y is an input, which is read-only: scatter into an output (c) instead; scatter: c[t, :] = y[...] * 2.0"
              " (an output written only by scatters starts at 0; indices outside c are dropped, as jnp's .at[].set"
              " drops them)")


# ---------------------------------------------------------------- float token rows: the hint converts them
@mg.mgpu_kernel(out_shape=lambda y, pos: S((64, 128), F32))
def store_at_float_rows(y, pos, c):
  t = pos[...] * 1.0                       # positions computed in float
  ml.store(c.at[t, :], y[...], mask=(t < 64.0)[:, None])


@mg.mgpu_kernel(out_shape=lambda y, pos: S((64, 128), F32))
def store_at_float_rows_fixed(y, pos, c):  # its hint followed
  t = pos[...] * 1.0
  ml.store(c.at[t.astype(jnp.int32), :], y[...], mask=(t < 64.0)[:, None])


def test_a_store_at_float_rows_hints_them_converted():
  """Merging probe 35d's scatter hint dropped the conversion of float indices the older hint had
  (test_probe30e): followed, `c.at[t, :]` of a float t is an error again."""
  spec = [S((16, 128), F32), S((16,), I32)]
  expect(store_at_float_rows, spec, mg.KernelTypeError, "ml.store(c.at[t, :]",
         "a scatter's indices are integers, got t (float32) for dimension 0 of c", hint="convert them: t.astype(jnp.int32)")
  y = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
  pos = np.array([3, 70, 5, 9, 0, 63, 64, 2, 8, 10, 11, 12, 13, 14, 15, 1], np.int32)
  got = np.asarray(store_at_float_rows_fixed(y, pos, interpret=True))
  want = np.zeros((64, 128), np.float32)
  for r, p in enumerate(pos):
    if p < 64:
      want[p] = y[r]
  np.testing.assert_array_equal(got, want)
