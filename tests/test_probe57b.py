"""Probe 57b: dynamic-programming and recurrent kernels (CTC, Viterbi, edit distances by rows and anti-diagonals,
RNN-T lattices, LSTM and GRU cells and sequences, minGRU / minLSTM scans, linear recurrences in blocks, lax.scan and
fori_loop carries, run-time lengths). The classes found, each a test that fails without its fix:

(1) lax.scan over a counter that does not start at 0, `jnp.arange(1, T)` (the first step computed before the scan,
as CTC's alpha and an RNN's h0 from row 0 are), or of a step (`jnp.arange(0, L, 2)`): MG003 past 64 steps, MG204
("a 1-D register vector needs a multiple of 8 elements") below, where `jnp.arange(n)` ran. Now the trip counter
range(a, b, s) of either form (frontend/lax_flow.py, `_counted`).
(2) lax.scan over reads of windows of a ref, `(a[:, cols], b[:, cols])` (each program its columns) or `x[b]` (a
batch row), past 64 steps: MG003, where whole reads `a[...]` ran a row a step. Now the rows of the view
`a.at[:, cols]`, read a row a step, in every form the whole reads take (computed elementwise, ys stacked, reverse).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from probe_util import export

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _ab(shape, seed):
  r = np.random.default_rng(seed)
  return r.uniform(0.9, 1.0, shape).astype(np.float32), r.standard_normal(shape).astype(np.float32)


def _linrec(a, b, axis=0, reverse=False):
  a, b = np.moveaxis(a, axis, 0).astype(np.float64), np.moveaxis(b, axis, 0).astype(np.float64)
  order = range(a.shape[0] - 1, -1, -1) if reverse else range(a.shape[0])
  h, out = np.zeros(a.shape[1:]), np.zeros(a.shape)
  for t in order:
    h = a[t] * h + b[t]
    out[t] = h
  return np.moveaxis(out, 0, axis)


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


# ---------------------------------------------------------------- (1) counters from 1, or of a step
@mg.mgpu_kernel(out_shape=lambda a, b: b, grid=lambda a, b: (a.shape[1] // 128,))
def scan_from_step_one(a, b, out):
  c = ml.ds(ml.program_id(0) * 128, 128)
  h0 = b[0, c]
  out[0, c] = h0

  def f(h, t):
    h = a[t, c] * h + b[t, c]
    out[t, c] = h
    return h, None
  lax.scan(f, h0, jnp.arange(1, a.shape[0]))


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0] // 2, a.shape[1]), F32), grid=lambda a, b: (a.shape[1] // 128,))
def scan_every_other_step(a, b, out):
  c = ml.ds(ml.program_id(0) * 128, 128)

  def f(h, t):
    h = a[t, c] * h + b[t, c]
    out[t // 2, c] = h
    return h, None
  lax.scan(f, jnp.zeros((128,), F32), jnp.arange(0, a.shape[0], 2))


@mg.mgpu_kernel(out_shape=lambda a, b: (b, S((b.shape[0] - 1,), F32)))
def scan_from_one_with_ys(a, b, out, sums):
  """a short scan (unrolled) over jnp.arange(1, n), a tuple carry (h, step count), ys stacked."""
  out[0, :] = b[0, :]

  def f(carry, t):
    h, k = carry
    h = a[t, :] * h + b[t, :]
    out[t, :] = h
    return (h, k + 1), jnp.sum(h)
  (h, k), ys = lax.scan(f, (b[0, :], 0), jnp.arange(1, a.shape[0]))
  sums[...] = ys


def test_scans_over_counters_from_one_or_of_a_step_run():
  """Were MG003 (past 64 steps) and MG204 (below: `jnp.arange(1, 20)` made a vector of 19 elements)."""
  for L in (100, 20):
    a, b = _ab((L, 256), L)
    np.testing.assert_allclose(scan_from_step_one(a, b, interpret=True), _linrec(a, b), rtol=1e-5, atol=1e-5)
    export(scan_from_step_one, a, b)
  a, b = _ab((200, 128), 3)
  np.testing.assert_allclose(scan_every_other_step(a, b, interpret=True), _linrec(a[::2], b[::2]), rtol=1e-5,
                             atol=1e-5)
  export(scan_every_other_step, a, b)
  a, b = _ab((24, 128), 4)
  got, sums = scan_from_one_with_ys(a, b, interpret=True)
  want = _linrec(a, b)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(sums, want[1:].sum(1), rtol=1e-4, atol=1e-4)
  export(scan_from_one_with_ys, a, b)


# ---------------------------------------------------------------- (2) reads of windows of refs as xs
@mg.mgpu_kernel(out_shape=lambda a, b: b, grid=lambda a, b: (a.shape[1] // 128,))
def scan_column_windows(a, b, out):
  c = ml.ds(ml.program_id(0) * 128, 128)

  def f(h, x):
    at, bt, t = x
    h = at * h + bt
    out[t, c] = h
    return h, None
  lax.scan(f, jnp.zeros((128,), F32), (a[:, c], b[:, c], jnp.arange(a.shape[0])))


@mg.mgpu_kernel(out_shape=lambda a, b: b, grid=lambda a, b: (a.shape[0],))
def scan_batch_rows(a, b, out):
  i = ml.program_id(0)

  def f(h, x):
    at, bt, t = x
    h = at * h + bt
    out[i, t, :] = h
    return h, None
  lax.scan(f, jnp.zeros((a.shape[2],), F32), (a[i], b[i], jnp.arange(a.shape[1])))


@mg.mgpu_kernel(out_shape=lambda a, b: b, grid=lambda a, b: (a.shape[1] // 128,))
def scan_windows_stacked(a, b, out):
  c = ml.ds(ml.program_id(0) * 128, 128)

  def f(h, ab):
    h = ab[0] * h + ab[1]
    return h, h
  _, ys = lax.scan(f, jnp.zeros((128,), F32), (a[:, c], b[:, c]))
  out[:, c] = ys


@mg.mgpu_kernel(out_shape=lambda a, b: b, grid=lambda a, b: (a.shape[1] // 128,))
def scan_windows_computed_reversed(a, b, out):
  c = ml.ds(ml.program_id(0) * 128, 128)

  def f(h, x):
    at, bt, t = x
    h = at * h + bt
    out[t, c] = h
    return h, None
  lax.scan(f, jnp.zeros((128,), F32), (jnp.exp(jnp.log(a[:, c])), b[:, c] * 2.0, jnp.arange(a.shape[0])),
           reverse=True)


@mg.mgpu_kernel(out_shape=lambda a, ids: S((1, a.shape[1]), F32))
def scan_gathered_rows(a, ids, out):
  h, _ = lax.scan(lambda h, x: (h + x, None), jnp.zeros((128,), F32), a[ids[...]])
  out[0, :] = h


def test_scans_over_reads_of_windows_read_a_row_a_step():
  """Were MG003 ("lax.scan is JAX's control flow, which a kernel writes in Python") past 64 steps."""
  a, b = _ab((100, 256), 10)
  np.testing.assert_allclose(scan_column_windows(a, b, interpret=True), _linrec(a, b), rtol=1e-5, atol=1e-5)
  export(scan_column_windows, a, b)
  np.testing.assert_allclose(scan_windows_stacked(a, b, interpret=True), _linrec(a, b), rtol=1e-5, atol=1e-5)
  export(scan_windows_stacked, a, b)
  np.testing.assert_allclose(scan_windows_computed_reversed(a, b, interpret=True), _linrec(a, 2 * b, reverse=True),
                             rtol=1e-5, atol=1e-5)
  export(scan_windows_computed_reversed, a, b)
  a3, b3 = _ab((2, 100, 128), 11)
  np.testing.assert_allclose(scan_batch_rows(a3, b3, interpret=True), _linrec(a3, b3, axis=1), rtol=1e-5, atol=1e-5)
  export(scan_batch_rows, a3, b3)
  # a short scan of windows (read into registers) computes as before
  a, b = _ab((16, 256), 12)
  np.testing.assert_allclose(scan_column_windows(a, b, interpret=True), _linrec(a, b), rtol=1e-5, atol=1e-5)


def test_a_scan_over_gathered_rows_keeps_its_mg003_and_hint():
  e = expect(scan_gathered_rows, [S((100, 128), F32), S((100,), jnp.int32)], mg.KernelTypeError, "lax.scan(",
             "lax.scan is JAX's control flow, which a kernel writes in Python")
  assert "ml.static_range(a[ids[...]].shape[0])" in e.hint and "(carry, a[ids[...]][" in e.hint, e.hint


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_scans_over_counters_and_windows():
  a, b = _ab((100, 256), 10)
  for k in (scan_from_step_one, scan_column_windows, scan_windows_stacked):
    np.testing.assert_allclose(jax.jit(k)(a, b), _linrec(a, b), rtol=1e-4, atol=1e-4)
  a3, b3 = _ab((2, 100, 128), 11)
  np.testing.assert_allclose(jax.jit(scan_batch_rows)(a3, b3), _linrec(a3, b3, axis=1), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- (3) lax's dynamic slicing at run-time positions
@mg.mgpu_kernel(out_shape=lambda x, i: (S((8, 128), F32), S((8, 16), F32), S((8,), F32), S((8,), F32),
                                        S((8, 32), F32), S((8, 8, 128), F32), S((8, 16, 32), F32)))
def dynamic_reads(x, i, rows, cols, clipped, wrapped, win, row_win, col_win):
  v = x[...] * 2.0
  for k in range(8):
    rows[k, :] = lax.dynamic_index_in_dim(v, i[k], axis=0, keepdims=False)
    cols[k, :] = lax.dynamic_index_in_dim(v, i[k], axis=1)[:, 0]
    clipped[k] = jnp.take(v[0, :], i[k], mode="clip")
    wrapped[k] = jnp.take(v[0, :], i[k], mode="wrap")
    win[k, :] = lax.dynamic_slice(v[0, :], (i[k],), (32,))
    row_win[k] = lax.dynamic_slice(v, (i[k], 0), (8, 128))
    col_win[k] = lax.dynamic_slice_in_dim(v, i[k], 32, axis=1)


def _dynamic_reads_ref(x, i):
  v = jnp.asarray(x) * 2.0
  fs = (lambda j: lax.dynamic_index_in_dim(v, j, axis=0, keepdims=False),
        lambda j: lax.dynamic_index_in_dim(v, j, axis=1)[:, 0], lambda j: jnp.take(v[0], j, mode="clip"),
        lambda j: jnp.take(v[0], j, mode="wrap"), lambda j: lax.dynamic_slice(v[0], (j,), (32,)),
        lambda j: lax.dynamic_slice(v, (j, 0), (8, 128)), lambda j: lax.dynamic_slice_in_dim(v, j, 32, axis=1))
  return [np.stack([np.asarray(f(int(j))) for j in i]) for f in fs]


@mg.mgpu_kernel(out_shape=lambda x, i: (S((8, 16, 128), F32), S((8, 128), F32), S((8, 128), F32),
                                        S((8, 16, 128), F32)))
def dynamic_updates(x, i, rows, elems, wins, row_wins):
  v = x[...]
  u = x[1, 0:32] * 0 - 5.0 + jnp.arange(32).astype(F32)
  r = x[0:8, :] * 0 - 5.0 + jnp.arange(8).astype(F32)[:, None]
  for k in range(8):
    rows[k] = lax.dynamic_update_index_in_dim(v, v[0, :] * 0 - 5.0, i[k], 0)
    elems[k, :] = lax.dynamic_update_index_in_dim(v[0, :], jnp.float32(-5.0), i[k], 0)
    wins[k, :] = lax.dynamic_update_slice(v[0, :], u, (i[k],))
    row_wins[k] = lax.dynamic_update_slice(v, r, (i[k], 0))


def _dynamic_updates_ref(x, i):
  v = jnp.asarray(x)
  u = v[1, 0:32] * 0 - 5.0 + jnp.arange(32.0)
  r = v[0:8] * 0 - 5.0 + jnp.arange(8.0)[:, None]
  fs = (lambda j: lax.dynamic_update_index_in_dim(v, v[0] * 0 - 5.0, j, 0),
        lambda j: lax.dynamic_update_index_in_dim(v[0], jnp.float32(-5.0), j, 0),
        lambda j: lax.dynamic_update_slice(v[0], u, (j,)), lambda j: lax.dynamic_update_slice(v, r, (j, 0)))
  return [np.stack([np.asarray(f(int(j))) for j in i]) for f in fs]


@mg.mgpu_kernel(out_shape=lambda lp: S((lp.shape[1],), F32))
def lattice_in_registers(lp, o):
  """a (T, C) tile held whole, its lattice carried by a fori_loop: row t - 1 read, row t written."""
  x = lp[...]
  lat = lax.dynamic_update_index_in_dim(jnp.zeros_like(x), x[0], 0, 0)

  def body(t, lat):
    prev = lax.dynamic_index_in_dim(lat, t - 1, keepdims=False)
    row = jnp.logaddexp(prev, jnp.roll(prev, 1)) + lax.dynamic_index_in_dim(x, t, keepdims=False)
    return lax.dynamic_update_index_in_dim(lat, row, t, 0)
  lat = lax.fori_loop(1, x.shape[0], body, lat)
  o[...] = lax.dynamic_index_in_dim(lat, x.shape[0] - 1, keepdims=False)


def _lattice(x):
  lat = np.zeros(x.shape)
  lat[0] = x[0]
  for t in range(1, x.shape[0]):
    lat[t] = np.logaddexp(lat[t - 1], np.roll(lat[t - 1], 1)) + x[t]
  return lat[-1]


@mg.mgpu_kernel(out_shape=lambda x, i: S((4, 8, 128), F32))
def dynamic_slice_3d(x, i, o):
  o[...] = lax.dynamic_slice(x[...], (i[0], 0, 0), (4, 8, 128))


_IDX = np.array([-1, 200, 5, -16, -17, 15, 16, 0], np.int32)


def test_lax_dynamic_slices_and_updates_at_run_time_positions():
  """Were MG003 ("dynamic_index_in_dim cannot take a register tensor inside a kernel"; jnp.take of a scalar index
  with mode= too): each is the register gather or select of lax's window, its start clamped as lax clamps it
  (negative indices from the end; the indices above run past both ends)."""
  x = np.random.default_rng(0).standard_normal((16, 128)).astype(np.float32)
  for kernel, ref in ((dynamic_reads, _dynamic_reads_ref), (dynamic_updates, _dynamic_updates_ref)):
    for g, w in zip(kernel(x, _IDX, interpret=True), ref(x, _IDX)):
      np.testing.assert_array_equal(g, w)
    export(kernel, x, _IDX)
  lp = np.random.default_rng(1).standard_normal((16, 128)).astype(np.float32)
  np.testing.assert_allclose(lattice_in_registers(lp, interpret=True), _lattice(lp), rtol=1e-5, atol=1e-5)
  export(lattice_in_registers, lp)


def test_a_3d_dynamic_slice_of_a_register_tensor_is_lax_s():
  """Probe 57b kept this MG003; probe 57d's run-time starts (jnp_dynamic.slice_form) take any rank: lax's clamp."""
  x = np.random.default_rng(3).standard_normal((16, 8, 128)).astype(np.float32)
  for s in (-1, 3, 12, 14, 40):
    got = dynamic_slice_3d(x, np.array([s], np.int32), interpret=True)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(lax.dynamic_slice(x, (s, 0, 0), (4, 8, 128))))
  export(dynamic_slice_3d, x, np.zeros((1,), np.int32))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_lax_dynamic_slices_and_updates():
  x = np.random.default_rng(0).standard_normal((16, 128)).astype(np.float32)
  for kernel, ref in ((dynamic_reads, _dynamic_reads_ref), (dynamic_updates, _dynamic_updates_ref)):
    for g, w in zip(jax.jit(kernel)(x, _IDX), ref(x, _IDX)):
      np.testing.assert_array_equal(g, w)
  lp = np.random.default_rng(1).standard_normal((16, 128)).astype(np.float32)
  np.testing.assert_allclose(jax.jit(lattice_in_registers)(lp), _lattice(lp), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- (4) .at[...] reads and updates of jnp's modes
@mg.mgpu_kernel(out_shape=lambda x, i: (S((8, 128), F32), S((8,), F32), S((8,), F32), S((4,), F32),
                                        S((8, 128), F32), S((8, 128), F32)))
def at_modes(x, i, mins, filled, nans, static, ids_clipped, tile_clipped):
  v = x[0, :]
  w = x[0:16, :]
  for k in range(8):
    mins[k, :] = v.at[i[k]].min(x[1, :][3], mode="clip")
    filled[k] = v.at[i[k]].get(mode="fill", fill_value=-7.0)
    nans[k] = v.at[i[k]].get(mode="fill")
    t = w.at[i[k], 5].set(-1.0, mode="clip")
    tile_clipped[k, :] = t[15, :] + t[0, :]
  static[0] = v.at[200].get(mode="fill")
  static[1] = v.at[-200].get(mode="fill", fill_value=3.0)
  static[2] = v.at[200].get()
  static[3] = v.at[-1].get(mode="fill")
  ids = jnp.arange(128) * 3 - 64
  for k in range(8):
    ids_clipped[k, :] = jnp.zeros((128,), F32).at[ids].add(v, mode="clip") + k


def _at_modes_ref(x, i):
  v, w, ids = jnp.asarray(x[0]), jnp.asarray(x[:16]), jnp.arange(128) * 3 - 64
  rows = lambda f: np.stack([np.asarray(f(int(j))) for j in i])
  return (rows(lambda j: v.at[j].min(x[1, 3], mode="clip")), rows(lambda j: v.at[j].get(mode="fill", fill_value=-7.0)),
          rows(lambda j: v.at[j].get(mode="fill")),
          np.array([v.at[200].get(mode="fill"), v.at[-200].get(mode="fill", fill_value=3.0), v.at[200].get(),
                    v.at[-1].get(mode="fill")]),
          np.stack([np.asarray(jnp.zeros(128).at[ids].add(v, mode="clip") + k) for k in range(8)]),
          rows(lambda j: w.at[j, 5].set(-1.0, mode="clip")[15] + w.at[j, 5].set(-1.0, mode="clip")[0]))


def test_at_updates_with_mode_clip_and_reads_with_mode_fill():
  """`v.at[t].min(y, mode="clip")` and `v.at[t].get(mode="fill")` at single positions were MG003 ("a register tensor
  has no attribute 'at'"), `v.at[200].get()` MG203 (jnp clamps it), `.at[ids].add(y, mode="clip")` MG003 ("mode='clip'
  is not taken"): ops/register_at.py clamps the index for "clip" and reads fill_value (NaN) outside for "fill"."""
  x = np.random.default_rng(5).standard_normal((16, 128)).astype(np.float32)
  idx = np.array([-1, -129, 128, 200, 0, 3, -128, 127], np.int32)
  for g, w in zip(at_modes(x, idx, interpret=True), _at_modes_ref(x, idx)):
    np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
  export(at_modes, x, idx)


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_at_modes():
  x = np.random.default_rng(5).standard_normal((16, 128)).astype(np.float32)
  idx = np.array([-1, -129, 128, 200, 0, 3, -128, 127], np.int32)
  for g, w in zip(jax.jit(at_modes)(x, idx), _at_modes_ref(x, idx)):
    np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- not fixed: a one-column slice kept 2-D
@mg.mgpu_kernel(out_shape=lambda a, b: b)
def carry_last_column(a, b, out):
  h = jnp.zeros((8, 1), F32)
  for k in range(a.shape[1] // 128):
    c = ml.ds(k * 128, 128)
    p = jnp.cumprod(a[:, c], axis=1)
    hb = p * (h + jnp.cumsum(b[:, c] / p, axis=1))
    out[:, c] = hb
    h = hb[:, -1:]


@mg.mgpu_kernel(out_shape=lambda a, b: b)
def carry_last_column_as_hinted(a, b, out):
  h = jnp.zeros((8, 1), F32)
  for k in range(a.shape[1] // 128):
    c = ml.ds(k * 128, 128)
    p = jnp.cumprod(a[:, c], axis=1)
    hb = p * (h + jnp.cumsum(b[:, c] / p, axis=1))
    out[:, c] = hb
    h = hb[:, 127][:, None]


def test_a_one_column_slice_kept_2d_is_mg204_whose_hint_keeps_the_axis():
  """`hb[:, -1:]` (a block's last column as the next block's carry) stays MG204; its hint now writes the column
  kept 2-D, `hb[:, 127][:, None]`, which computes."""
  e = expect(carry_last_column, [S((8, 512), F32)] * 2, mg.LayoutError, "hb[:, -1:]",
             "columns 127:128 do not start and end on the tensor-core layout's 8-column tiles")
  assert "hb[:, 127][:, None] keeps its axis" in e.hint, e.hint
  a, b = _ab((8, 512), 20)
  np.testing.assert_allclose(carry_last_column_as_hinted(a, b, interpret=True), _linrec(a, b, axis=1), rtol=1e-4,
                             atol=1e-4)
  export(carry_last_column_as_hinted, a, b)


@mg.mgpu_kernel(out_shape=lambda x, i: (S((8, 32), F32), S((8, 128), F32), S((8, 128), F32), S((8, 128), F32)))
def unsigned_positions(x, i, win, row, upd, at_set):
  v = x[...] * 2.0
  for k in range(8):
    win[k, :] = lax.dynamic_slice(v[0, :], (i[k],), (32,))
    row[k, :] = lax.dynamic_index_in_dim(v, i[k], keepdims=False)
    upd[k, :] = lax.dynamic_update_slice(v[0, :], v[1, 0:32], (i[k],))
    at_set[k, :] = v[0, :].at[i[k]].set(1.0)


def test_uint32_positions_are_clamped_or_dropped_as_lax_and_jnp_do():
  """A uint32 start or index (below 2**31) was MG104 at the forms' comparisons with int32 positions (`.at[i].set`
  of a uint32 `i` too, before this probe)."""
  x = np.random.default_rng(6).standard_normal((16, 128)).astype(np.float32)
  idx = np.array([0, 5, 15, 16, 100, 127, 128, 200], np.uint32)
  v = jnp.asarray(x) * 2.0
  fs = (lambda j: lax.dynamic_slice(v[0], (j,), (32,)), lambda j: lax.dynamic_index_in_dim(v, j, keepdims=False),
        lambda j: lax.dynamic_update_slice(v[0], v[1, 0:32], (j,)), lambda j: v[0].at[j].set(1.0))
  for g, f in zip(unsigned_positions(x, idx, interpret=True), fs):
    np.testing.assert_array_equal(g, np.stack([np.asarray(f(jnp.uint32(j))) for j in idx]))
  export(unsigned_positions, x, idx)
