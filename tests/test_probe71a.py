"""Probe 71a (graph analytics and sparse linear algebra as cuGraph, Gunrock, PyG, DGL, cuSPARSE-replacement and
Triton-sparse authors write them: CSR / COO / ELL / SELL / DIA / BSR SpMV and SpMM, merge-path SpMV, SDDMM, segment
reductions and softmax over CSR offsets, scatter aggregation with atomics, BFS frontiers, PageRank, connected
components, label propagation, Bellman-Ford, k-core, graph colouring, triangle counting, degree histograms, edge list
to CSR, SpGEMM row sizes, 2:4 sparsity and jagged tensors): the corpus (tests/probe71a_spmv.py, probe71a_gnn.py,
probe71a_traverse.py, probe71a_graph.py, probe71a_ragged.py), each kernel checked in interpret mode against its NumPy
reference and exported for CUDA; the classes fixed (design note 233), each with a test that fails on the code before
it."""
import contextlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
import probe71a_forms
import probe71a_gnn
import probe71a_graph
import probe71a_more
import probe71a_ragged
import probe71a_spmv
import probe71a_traverse
from probe71a_run import err, export

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32
MODULES = (probe71a_spmv, probe71a_gnn, probe71a_traverse, probe71a_graph, probe71a_ragged, probe71a_more,
           probe71a_forms)
CASES = {name: c for m in MODULES for name, c in m.CASES.items()}
X64 = set().union(*(getattr(m, "X64", ()) for m in MODULES))


def _compare(name, got, want, tol):
  """Each output within `tol` of its reference's largest finite magnitude (0: equal; infinities and NaNs where the
  reference has them)."""
  got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
  assert len(got) == len(want), name
  for g, w in zip(got, want):
    assert np.shape(g) == np.shape(w), (name, np.shape(g), np.shape(w))
    assert err(g, w) <= tol, (name, err(g, w))


def _line_of(text, path=__file__):
  with open(path) as f:
    return next(n for n, line in enumerate(f, 1) if text in line)


def _x64(name):
  return jax.enable_x64(True) if name in X64 else contextlib.nullcontext()


def _quiet(run):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.KernelWarning)
    return run()


def test_corpus_size():
  assert len(CASES) >= 60, len(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_matches_its_reference_and_builds(name):
  """Each kernel against its reference in interpret mode, then its Mosaic GPU module built for CUDA (a host driver's
  launches each; a verifier error or an InternalError there fails the test)."""
  kernel, make, ref, tol = CASES[name]
  with _x64(name):
    args, kw = make(0)
    _compare(name, _quiet(lambda: kernel(*args, **kw, interpret=True)), ref(*args, **kw), tol)
    _quiet(lambda: export(kernel, args, kw))


GPU_TWINS = ["csr_spmv_merge_path_carry_out", "coo_spmv_sorted_block_segment_sum", "sell_c32_spmv_slices",
             "bsr4x4_spmv_block_rows", "bsr2x2_spmv_pointer_pairs", "bsr64_spmm_wgmma_empty_block_row",
             "sddmm_csr_row_per_program", "gat_edge_softmax_and_aggregate_one_tile", "scatter_max_edge_parallel_atomics",
             "dgl_edge_softmax_three_launches", "bfs_top_down_queue_cas_ticket", "bfs_vertex_parallel_bool_frontier",
             "expand_visited_bitmap_atomic_or", "connected_components_hook_and_jump", "bellman_ford_float_atomic_min",
             "jones_plassmann_colouring_rounds", "triangles_vertex_two_pointer_merge", "edge_list_to_csr_count_scan_scatter",
             "spgemm_exact_row_sizes_smem_bitmap", "sparsity_2_4_compress_values_and_meta", "jagged_dense_bmm_wgmma_masked_tiles",
             "csr_spmv_vector_rows_by_nonzeros_tile", "gat_eight_heads_softmax_along_edges", "pagerank_in_lax_fori_loop",
             "union_find_roots_while_any", "enqueue_ticket_under_scalar_mask"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_TWINS)
def test_gpu_corpus_matches_its_reference(name):
  """The GPU twins (a host driver's launches run on the GPU one after another): integer results bit for bit (queues
  whose order the atomics choose are sorted by the wrappers), float sums within the tolerance (atomics add in
  another order)."""
  kernel, make, ref, tol = CASES[name]
  with _x64(name):
    args, kw = make(1)
    got = _quiet(lambda: kernel(*args, **kw) if hasattr(kernel, "steps") else jax.jit(lambda *a: kernel(*a, **kw))(*args))
    _compare(name, got, ref(*args, **kw), tol if tol == 0 else max(tol, 1e-4))


# ---------------------------------------------------------------- class 1: short runs of an ml.arange of 2 or 4
N4 = 4


@mg.mgpu_kernel(out_shape=lambda s, x: S((s.shape[0] * N4,), F32), grid=lambda s, x: (s.shape[0],))
def short_run_gather(s, x, y):
  i = ml.program_id(0)
  idx = s[i] * N4 + ml.arange(0, N4)
  y[i * N4 + ml.arange(0, N4)] = x[idx] * 2.0


@mg.mgpu_kernel(out_shape=lambda s, x: S((s.shape[0] * N4,), F32), grid=lambda s, x: (s.shape[0],))
def short_run_masked_load(s, x, y):
  i = ml.program_id(0)
  idx = s[i] * N4 + ml.arange(0, N4)
  v = ml.load(x.at[idx], mask=idx < x.shape[0], other=0.0)
  ml.store(y.at[i * N4 + ml.arange(0, N4)], v * 2.0, mask=i * N4 + ml.arange(0, N4) < y.shape[0])


@mg.mgpu_kernel(out_shape=lambda s, x: S((s.shape[0] * N4,), F32), grid=lambda s, x: (s.shape[0],))
def short_run_pointer_store(s, x, y):
  i = ml.program_id(0)
  o = i * N4 + ml.arange(0, N4)
  y.at[o].store(x[s[i] * N4 + ml.arange(0, N4)] * 2.0)


@mg.mgpu_kernel(out_shape=lambda bp, bc, bv, x: S(((bp.shape[0] - 1) * 4,), F32), grid=lambda bp, bc, bv, x: (bp.shape[0] - 1,))
def bsr4_tile_accumulator(bptr, bcols, bvals, x, y):
  """cuSPARSE's bsrmv of 4x4 blocks as a Triton port writes it: a (4, 4) accumulator of the block grid, summed after."""
  i = ml.program_id(0)
  r = ml.arange(0, 4)[:, None]
  c = ml.arange(0, 4)[None, :]
  acc = ml.zeros((4, 4), F32)
  for p in range(bptr[i], bptr[i + 1]):
    acc += ml.load(bvals.at[p, r, c]) * x[bcols[p] * 4 + c]
  y[i * 4 + ml.arange(0, 4)] = ml.sum(acc, axis=1)


def _short_inputs():
  s = np.array([3, 1, 0, 2, 5], np.int32)
  x = np.random.default_rng(3).standard_normal(24).astype(np.float32)
  return s, x, np.concatenate([x[q * 4:(q + 1) * 4] * 2 for q in s])


@pytest.mark.parametrize("kernel", [short_run_gather, short_run_masked_load, short_run_pointer_store],
                         ids=["plain_gather", "masked_load", "pointer_store"])
def test_a_run_of_an_arange_of_four_reads_and_stores(kernel):
  """`x[s + ml.arange(4)]`, Triton's `ml.load(x.at[offs], mask=offs < n, other=0)` of such a run, and a store
  through `y.at[offs].store(v)` were MG204 at the arange ("a 1-D register vector needs a multiple of 8 elements";
  the pointer store MG202, a padded trace's shape), while `ml.load(x.at[offs])` alone computed. In the trace that
  makes an odd ml.arange padded (ArangePads) a run of one is the window of its own length (gather.run_window), read
  under its mask padded as the mask (padded_masks._padded_run), and a store of a value held at its own length takes
  that length's mask (run_stores.run_store_plan)."""
  s, x, want = _short_inputs()
  np.testing.assert_array_equal(np.asarray(_quiet(lambda: kernel(s, x, interpret=True))), want)
  _quiet(lambda: jax.export.export(jax.jit(kernel), platforms=["cuda"])(S(s.shape, s.dtype), S(x.shape, x.dtype)).mlir_module())


def test_a_bsr_block_of_four_by_four_accumulates_in_a_tile():
  """The block `ml.load(bvals.at[p, r, c])` of an ml.arange(4) grid times `x[bcols[p] * 4 + c]`, carried as a (4, 4)
  tile through the block row's loop: MG204 at the product before (the grid's window was taken 8 wide in the padded
  trace, outside the block, MG203 there)."""
  args, _ = probe71a_spmv._bsr4_make(0)
  got = _quiet(lambda: bsr4_tile_accumulator(*args, interpret=True))
  np.testing.assert_allclose(np.asarray(got), probe71a_spmv._bsr4_ref(*args), rtol=0, atol=1e-5)
  _quiet(lambda: jax.export.export(jax.jit(bsr4_tile_accumulator), platforms=["cuda"])(
      *[S(a.shape, a.dtype) for a in args]).mlir_module())


@pytest.mark.gpu
def test_gpu_short_runs():
  s, x, want = _short_inputs()
  for k in (short_run_gather, short_run_masked_load, short_run_pointer_store):
    np.testing.assert_array_equal(np.asarray(jax.jit(k)(s, x)), want)
  args, _ = probe71a_spmv._bsr4_make(1)
  np.testing.assert_allclose(np.asarray(jax.jit(bsr4_tile_accumulator)(*args)), probe71a_spmv._bsr4_ref(*args),
                             rtol=0, atol=1e-4)


# ---------------------------------------------------------------- class 2: offsets arrays under the items' own bound
@mg.mgpu_kernel(out_shape=lambda rp, w: S(w.shape, F32), grid=lambda rp, w: (ml.cdiv(w.shape[0], 128),))
def degrees_of_a_block(rowptr, w, deg):
  """A lane a node: its row pointers read under `u < n`, n the nodes' count from their weights' array."""
  n = w.shape[0]
  u = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = u < n
  start = ml.load(rowptr.at[u], mask=m, other=0)
  end = ml.load(rowptr.at[u + 1], mask=m, other=0)
  ml.store(deg.at[u], (end - start).astype(F32) * ml.load(w.at[u], mask=m, other=0.0), mask=m)


@mg.mgpu_kernel(out_shape=lambda y, x: S((x.shape[0],), F32), grid=lambda y, x: (ml.cdiv(x.shape[0], 128),))
def bounded_by_a_shorter_array(y, x, o):
  u = ml.program_id(0) * 128 + ml.arange(0, 128)
  ml.store(o.at[u], ml.load(y.at[u], mask=u < x.shape[0], other=0.0), mask=u < x.shape[0])


def test_row_pointers_read_under_the_node_count_of_another_input():
  """`start = ml.load(rowptr.at[u], mask=u < n)` with `n = w.shape[0]` of the nodes' weights (n + 1 row pointers) was
  MG203 "bounds u ... by n, w.shape[0] (size 300), the size of another array", whose hint wrote both bounds for the
  mask that keeps off the last pointer only (mask_axes._offsets: a 1-D input one longer than the bound is the
  items' offsets)."""
  r = np.random.default_rng(0)
  rp = np.concatenate([[0], np.cumsum(r.integers(0, 9, 300))]).astype(np.int32)
  w = r.standard_normal(300).astype(np.float32)
  got = _quiet(lambda: degrees_of_a_block(rp, w, interpret=True))
  np.testing.assert_array_equal(np.asarray(got), np.diff(rp).astype(np.float32) * w)
  jax.export.export(jax.jit(degrees_of_a_block), platforms=["cuda"])(S(rp.shape, I32), S(w.shape, F32)).mlir_module()


def test_a_mask_bounded_by_another_inputs_size_two_apart_stays_mg203():
  """Only the offsets' n + 1 is taken: a 1-D input bounded by another's size of any other difference keeps probe
  49f's MG203 at the comparison."""
  with pytest.raises(mg.IndexOutOfBoundsError) as e:
    bounded_by_a_shorter_array.typed_ir(S((302,), F32), S((300,), F32))
  assert e.value.code == "MG203" and e.value.lineno == _line_of("ml.load(y.at[u], mask=u < x.shape[0]")
  assert "the size of another array" in str(e.value)


# ---------------------------------------------------------------- class 3: Triton's and CUDA's bit counts
@mg.mgpu_kernel(out_shape=lambda x: (x, x), grid=(1,))
def libdevice_bit_counts(x, pc, lz):
  v = x[...]
  pc[...] = ml.libdevice.popc(v)
  lz[...] = ml.extra.cuda.libdevice.clz(v)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def ml_popc(x, o):
  o[...] = ml.popc(x[...] & 255)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def ml_popc_as_hinted(x, o):
  o[...] = jax.lax.population_count(x[...] & 255)


def test_libdevice_popc_and_clz_are_laxs():
  """Triton's `libdevice.popc` / `clz` (CUDA's __popc, __clz: a colouring's first free colour, a bitmap frontier's
  count) were MG002 whose hint said "no population count here" and wrote the SWAR steps; they are lax's functions of
  the same meaning now (triton_math.LAX)."""
  x = np.random.default_rng(1).integers(-2 ** 31, 2 ** 31 - 1, 128).astype(np.int32)
  pc, lz = _quiet(lambda: libdevice_bit_counts(x, interpret=True))
  np.testing.assert_array_equal(np.asarray(pc), np.asarray(jax.lax.population_count(x)))
  np.testing.assert_array_equal(np.asarray(lz), np.asarray(jax.lax.clz(x)))
  jax.export.export(jax.jit(libdevice_bit_counts), platforms=["cuda"])(S(x.shape, I32)).mlir_module()


def test_a_missing_ml_popc_hints_laxs_function_which_computes():
  """`ml.popc(v)` stays MG002 (ml has no such name), its hint now lax's function with the call's operand (it wrote the
  SWAR steps with 'no population count here', though lax.population_count computes); the hinted form computes."""
  with pytest.raises(mg.UnknownNameError) as e:
    ml_popc.typed_ir(S((128,), I32))
  err_ = e.value
  line = "o[...] = ml.popc(x[...] & 255)"
  assert err_.code == "MG002" and err_.lineno == _line_of(line) and err_.col_offset == 11
  assert "ml has no attribute 'popc'" in str(err_)
  assert err_.hint.startswith("no ml.popc: libdevice's, ml.extra.cuda.libdevice.popc(x[...] & 255) (CUDA's __popc: an"
                              " int32 count), or jax.lax.population_count(x[...] & 255) ")
  x = np.arange(128, dtype=np.int32) * 37
  np.testing.assert_array_equal(np.asarray(ml_popc_as_hinted(x, interpret=True)),
                                np.asarray(jax.lax.population_count(x & 255)))


@pytest.mark.gpu
def test_gpu_bit_counts_and_offsets():
  x = np.random.default_rng(2).integers(-2 ** 31, 2 ** 31 - 1, 128).astype(np.int32)
  pc, lz = jax.jit(libdevice_bit_counts)(x)
  np.testing.assert_array_equal(np.asarray(pc), np.asarray(jax.lax.population_count(x)))
  np.testing.assert_array_equal(np.asarray(lz), np.asarray(jax.lax.clz(x)))
  rp = np.concatenate([[0], np.cumsum(np.arange(300) % 7)]).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(jax.jit(degrees_of_a_block)(rp, np.ones(300, np.float32))), np.diff(rp))


# ---------------------------------------------------------------- class 4: an element past the end, its index as written
@mg.mgpu_kernel(out_shape=lambda rp, c, x: S((rp.shape[0] - 1,), F32), grid=lambda rp, c, x: (rp.shape[0] - 1,))
def row_sums_shifted(rowptr, cols, x, y):
  """A row a program whose result is written one place on (a port's `y[row + 1]`, meant for an exclusive layout)."""
  row = ml.program_id(0)
  acc = 0.0
  for e in range(rowptr[row], rowptr[row + 1]):
    acc += x[cols[e]]
  y[row + 1] = acc


def test_an_element_written_past_the_end_hints_its_index_as_written():
  """MG203's hint for `y[row + 1] = acc` in the last program said "guard the access (if start + 1 <= 4:)", a start
  the kernel never names; it is the index as written now, `if row + 1 < y.shape[0]:` (bounds_hints._element_index;
  a read's hint also clamps it)."""
  with pytest.raises(mg.IndexOutOfBoundsError) as e:
    row_sums_shifted.typed_ir(S((5,), I32), S((12,), I32), S((4,), F32))
  err_ = e.value
  line = "  y[row + 1] = acc"
  assert err_.code == "MG203" and err_.lineno == _line_of(line) and err_.col_offset == 2
  assert "this register write touches y[4:5] in program (3, 0, 0), outside y's shape (4,)" in str(err_)
  assert err_.hint == "guard the access (if row + 1 < y.shape[0]:)"


# ---------------------------------------------------------------- class 5: a grid that counts no items (an empty graph)
@mg.mgpu_kernel(out_shape=lambda rp: S((32,), I32), grid=lambda rp: ((rp.shape[0] - 1) // 256,))
def degree_histogram_rounded_down(rowptr, hist):
  v = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = v < rowptr.shape[0] - 1
  deg = ml.load(rowptr.at[v + 1], mask=m, other=0) - ml.load(rowptr.at[v], mask=m, other=0)
  ml.atomic_add(hist.at[ml.minimum(deg, 31)], 1, mask=m)


@mg.mgpu_kernel(out_shape=lambda rp: S((32,), I32), grid=lambda rp: (ml.cdiv(rp.shape[0] - 1, 256),))
def first_pointer_plainly(rowptr, o):
  o[...] = ml.zeros((32,), I32) + rowptr[0]


def test_an_atomic_histogram_of_an_empty_graph_is_its_start_value():
  """An empty graph's row pointers are one entry, [0]: `grid=lambda rp: (ml.cdiv(rp.shape[0] - 1, 256),)` gives no
  programs. The histogram only atomics update starts at 0, as for an empty edge list, but the rule took only an
  input with no elements: MG007 "grid must be 1 to 3 positive ints", whose hint rounded up with ml.cdiv, which the
  grid already did (grid_hints.no_work: axes with no `//` that come out 0 count no items)."""
  rp = np.zeros(1, np.int32)
  want = np.zeros(32, np.int32)
  np.testing.assert_array_equal(np.asarray(probe71a_graph.degree_log2_histogram(rp, interpret=True)), want)
  np.testing.assert_array_equal(np.asarray(jax.jit(probe71a_graph.degree_log2_histogram)(rp)), want)


def test_a_grid_rounded_down_to_no_programs_keeps_mg007_and_its_round_up_hint():
  """`(rp.shape[0] - 1) // 256` of 100 rows is 0 by the floor: the mistake MG007's hint rounds up (not taken as no
  items, which would return zeros for a graph of 100 nodes)."""
  with pytest.raises(mg.LaunchConfigError) as e:
    degree_histogram_rounded_down(np.arange(101, dtype=np.int32), interpret=True)
  assert e.value.code == "MG007" and "grid must be 1 to 3 positive ints, got (0,)" in str(e.value)
  assert "grid=lambda rp: (ml.cdiv(rp.shape[0] - 1, 256),)" in e.value.hint


def test_a_plain_output_of_a_grid_of_no_items_is_mg007_naming_the_axis():
  with pytest.raises(mg.LaunchConfigError) as e:
    first_pointer_plainly(np.zeros(1, np.int32), interpret=True)
  err_ = e.value
  assert err_.code == "MG007" and err_.lineno == _line_of("def first_pointer_plainly") - 1
  assert "the grid callable gave (0,) for inputs of no items (ml.cdiv(rp.shape[0] - 1, 256))" in str(err_)
  assert "grid=lambda rp: (max(1, ml.cdiv(rp.shape[0] - 1, 256)),)" in err_.hint


def _nodes_grid(rp):
  n = rp.shape[0] - 1          # the nodes, of which an empty graph has none
  return (ml.cdiv(n, 256),)


def _nodes_grid_floor(rp):
  n = rp.shape[0] - 1
  return (n // 256,)


def _histogram_of(grid):
  @mg.mgpu_kernel(out_shape=lambda rp: S((32,), I32), grid=grid)
  def histogram(rowptr, hist):
    v = ml.program_id(0) * 256 + ml.arange(0, 256)
    m = v < rowptr.shape[0] - 1
    deg = ml.load(rowptr.at[v + 1], mask=m, other=0) - ml.load(rowptr.at[v], mask=m, other=0)
    ml.atomic_add(hist.at[ml.minimum(deg, 31)], 1, mask=m)
  return histogram


def test_a_grid_function_that_counts_no_items():
  """The same rule for a grid written as a def (no `//` or `/` in it): the empty graph's histogram is zeros; a def
  that rounds down keeps MG007."""
  np.testing.assert_array_equal(np.asarray(_histogram_of(_nodes_grid)(np.zeros(1, np.int32), interpret=True)),
                                np.zeros(32, np.int32))
  with pytest.raises(mg.LaunchConfigError) as e:
    _histogram_of(_nodes_grid_floor)(np.arange(101, dtype=np.int32), interpret=True)
  assert e.value.code == "MG007" and "grid must be 1 to 3 positive ints, got (0,)" in str(e.value)


# ---------------------------------------------------------------- an odd SMEM buffer filled whole: the hint that fits
@mg.mgpu_kernel(out_shape=lambda src, dst, *, n: S((n,), I32), grid=(1,))
def labels_in_an_odd_buffer(src, dst, lab, *, n: ml.constexpr):
  L = ml.smem((n,), I32)
  L[...] = ml.arange(0, n)
  changed = True
  while changed:
    old = L[...]
    e = ml.arange(0, 128)
    m = e < src.shape[0]
    u, w = ml.load(src.at[e], mask=m, other=0), ml.load(dst.at[e], mask=m, other=0)
    ml.atomic_min(L.at[u], ml.minimum(L[u], L[w]), mask=m)
    ml.atomic_min(L.at[w], ml.minimum(L[u], L[w]), mask=m)
    changed = ml.any(L[...] != old)
  lab[...] = L[...]


def test_an_odd_smem_buffer_filled_whole_hints_a_buffer_that_holds_the_padding():
  """`L = ml.smem((100,))` filled with `ml.arange(100)` and read whole is MG204 at the arange (left: no padded trace
  grows an SMEM buffer); its hint took 104 lanes, which the (100,) buffer cannot take. It now makes the buffer 104
  long and reads its first 100 back, the corpus's connected_components_one_cta_smem_labels (which computes)."""
  with pytest.raises(mg.LayoutError) as e:
    labels_in_an_odd_buffer.typed_ir(S((70,), I32), S((70,), I32), n=100)
  err_ = e.value
  assert err_.code == "MG204" and err_.lineno == _line_of("  L[...] = ml.arange(0, n)") and err_.col_offset == 11
  assert "ml.arange(0, n) has shape (100,): a 1-D register vector needs a multiple of 8 elements" in str(err_)
  assert err_.hint.startswith("make L 104 long, ml.smem((104,), ...): fill all 104 (ml.arange(104)")
  assert "read its first 100 back as L.at[ml.ds(0, 100)]" in err_.hint
  kernel, make, ref, _ = CASES["connected_components_one_cta_smem_labels"]
  args, kw = make(0)
  np.testing.assert_array_equal(np.asarray(_quiet(lambda: kernel(*args, **kw, interpret=True))), ref(*args, **kw))
