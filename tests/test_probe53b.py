"""Probe 53b: what Pallas and jnp users write that was refused in the frontend. A kernel's refs as a star
parameter (`def kernel(*refs)`: `x_ref, o_ref = refs`), as pallas_call passes them."""
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from probe_util import S, export, rnd

F32 = jnp.float32


# ---------------------------------------------------------------- def kernel(*refs)
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def star_double(*refs):
  x_ref, o_ref = refs
  i = ml.program_id(0)
  o_ref[ml.ds(i * 64, 64), :] = x_ref[ml.ds(i * 64, 64), :] * 2.0


@mg.mgpu_kernel(out_shape=lambda x, y: (x, y))
def star_pairs(*refs):
  """Inputs, then outputs: each input plus one into its output, by zip over the halves of the tuple."""
  n = len(refs) // 2
  for r, o in zip(refs[:n], refs[n:]):
    o[...] = r[...] + 1.0


@mg.mgpu_kernel(out_shape=lambda x, w: (x, S((x.shape[0],), F32)))
def star_outputs(x_ref, w_ref, *out_refs, scale: ml.constexpr = 1.0):
  """Named inputs, the outputs a star parameter (Pallas's *residual_refs), a keyword-only constexpr."""
  y_ref, s_ref = out_refs
  y = x_ref[...] * w_ref[...][None, :] * scale
  y_ref[...] = y
  s_ref[...] = y.sum(axis=1)


def test_star_refs_compute_as_pallas_kernels():
  """`def kernel(*refs)` was MG001 ("a kernel's parameters are one named ref per input and output")."""
  x = rnd((128, 32), 0)
  np.testing.assert_array_equal(star_double(x, interpret=True), x * 2)
  y = rnd((64, 16), 1)
  a, b = star_pairs(x, y, interpret=True)
  np.testing.assert_array_equal(a, x + 1)
  np.testing.assert_array_equal(b, y + 1)
  x, w = rnd((64, 32), 2), rnd((32,), 3)
  got_y, got_s = star_outputs(x, w, scale=2.0, interpret=True)
  np.testing.assert_allclose(got_y, x * w * 2, rtol=1e-6)
  np.testing.assert_allclose(got_s, (x * w * 2).sum(1), rtol=1e-5, atol=1e-5)
  got = jax.jit(lambda x: star_double(x, interpret=True))(jnp.asarray(x[:, :16]))
  np.testing.assert_array_equal(got, x[:, :16] * 2)


def test_star_refs_build_for_cuda_and_show_their_signature():
  export(star_double, rnd((128, 32), 0))
  export(star_outputs, rnd((64, 32), 0), rnd((32,), 1))
  assert str(inspect.signature(star_outputs)) == ("(x_ref: 'jax.Array', w_ref: 'jax.Array', /, *out_refs,"
                                                  " scale: ml.constexpr = 1.0, interpret: 'bool | None' = None)")


def test_star_refs_mistakes_name_the_ref():
  """A write into an input of the tuple is still MG303, naming the user's name for it."""
  @mg.mgpu_kernel(out_shape=lambda x: x)
  def writes_input(*refs):
    x_ref, o_ref = refs
    x_ref[...] = x_ref[...] + 1.0
    o_ref[...] = x_ref[...]

  with pytest.raises(mg.InputWriteError) as info:
    writes_input.check(S((128,), F32))
  assert info.value.message.startswith("cannot write into x_ref: it is an input of the kernel")
  assert info.value.lineno == inspect.getsourcelines(writes_input.fn)[1] + 3
  with pytest.raises(mg.SignatureError) as info:         # an input too many: the refs out_shape describes
    star_double.check(S((128, 32), F32), S((128, 32), F32))
  assert info.value.message == ("star_double takes 1 input (refs[0]), then 1 output (refs[1]), but was called with"
                                " 2 inputs")


# ---------------------------------------------------------------- 2-D tables of constants in a kernel
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] - 2, x.shape[1] - 2), x.dtype))
def sobel_x(x_ref, o_ref):
  """A 3x3 stencil of its taps as a table, `k[di, dj]` of static indices."""
  k = jnp.array([[-1., 0., 1.], [-2., 0., 2.], [-1., 0., 1.]])
  h, w = o_ref.shape
  acc = jnp.zeros((h, w), jnp.float32)
  for di in range(3):
    for dj in range(3):
      acc += k[di, dj] * x_ref[di:di + h, dj:dj + w]
  o_ref[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: x)
def mix3(x_ref, o_ref):
  """A small lookup matrix applied to rows of three channels."""
  m = jnp.array([[0.5, 0.25, 0.25], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]], dtype=jnp.float32)
  o_ref[...] = jnp.dot(x_ref[...], m)


@mg.mgpu_kernel(out_shape=lambda x: x)
def add_rows(x_ref, o_ref):
  o_ref[...] = x_ref[...] + np.array([[1, 2, 3, 4]] * 8)


def test_2d_tables_are_register_tiles_of_their_numbers():
  """`jnp.array([[...]])` of numbers in a kernel was MG003 ("returned an array of shape (3, 3) while tracing")."""
  x = rnd((34, 66), 0)
  k = np.array([[-1., 0., 1.], [-2., 0., 2.], [-1., 0., 1.]], np.float32)
  want = sum(k[a, b] * x[a:a + 32, b:b + 64] for a in range(3) for b in range(3))
  np.testing.assert_allclose(sobel_x(x, interpret=True), want, rtol=1e-5, atol=1e-5)
  x = rnd((128, 3), 1)
  m = np.array([[0.5, 0.25, 0.25], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]], np.float32)
  np.testing.assert_allclose(mix3(x, interpret=True), x @ m, rtol=1e-5, atol=1e-5)
  xi = np.arange(32, dtype=np.int32).reshape(8, 4)
  got = add_rows(xi, interpret=True)
  assert got.dtype == jnp.int32          # NumPy's int64 table is jnp's int32 (x64 off)
  np.testing.assert_array_equal(got, xi + np.array([1, 2, 3, 4]))


@mg.mgpu_kernel(out_shape=lambda x: x)
def rotate_rows(x_ref, o_ref):
  """A table's transpose in a product (`rot.T` of a (2, 2) table was MG204, a register transpose of 2 columns)."""
  rot = jnp.array([[0., -1.], [1., 0.]])
  o_ref[...] = jnp.dot(x_ref[...], rot.T)


def test_a_tables_transpose_is_the_transposed_table():
  x = rnd((128, 2), 3)
  np.testing.assert_array_equal(rotate_rows(x, interpret=True), x @ np.array([[0., 1.], [-1., 0.]], np.float32))
  export(rotate_rows, x)


def test_2d_tables_build_for_cuda():
  export(sobel_x, rnd((34, 66), 0))
  export(mix3, rnd((128, 3), 1))


W2 = np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)     # a module's tables, as stencils and small mixes keep them
TAPS = np.array([0.25, 0.5, 0.25])
LEVELS = np.linspace(-1.0, 1.0, 16).astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda x, p: (S((64, 2), F32), S((x.shape[0] - 2,), F32), S(p.shape, F32)))
def module_tables(x_ref, p_ref, mixed, smooth, levels):
  """`x @ W2`, `TAPS[k]` in a range loop, `LEVELS[codes]`: a module's NumPy tables met by register values."""
  mixed[...] = jnp.dot(x_ref[0:64, 0:2], W2) + W2[0, 1]
  n = smooth.shape[0]
  acc = jnp.zeros((n,), jnp.float32)
  for k in range(3):
    acc += TAPS[k] * x_ref[k:k + n, 0]
  smooth[...] = acc
  levels[...] = LEVELS[p_ref[...].astype(jnp.int32) & 0xF]


@mg.mgpu_kernel(out_shape=lambda x: x)
def taps_iterated(x_ref, o_ref):
  """`for t in TAPS:` of a module's NumPy array (was MG001 "iterating over anything but range(...)"): its numbers."""
  acc = jnp.zeros(x_ref.shape, jnp.float32)
  for k, t in enumerate(TAPS):
    acc = acc + t * x_ref[...] ** k
  o_ref[...] = acc


def test_module_numpy_tables_meet_register_values():
  """A global NumPy table in `x @ W`, `x * W`, `jnp.dot(x, W)` was MG003 ("pass the array to the kernel as an
  input"); `TAPS[k]` in a range loop MG003 ("cannot index TAPS with a runtime value"); `LEVELS[codes]` likewise."""
  x = rnd((130, 2), 0)
  p = np.random.default_rng(1).integers(0, 256, 1024).astype(np.uint8)
  mixed, smooth, levels = module_tables(x, p, interpret=True)
  np.testing.assert_allclose(mixed, x[:64] @ W2 + W2[0, 1], rtol=1e-6)
  np.testing.assert_allclose(smooth, 0.25 * x[:-2, 0] + 0.5 * x[1:-1, 0] + 0.25 * x[2:, 0], rtol=1e-6)
  np.testing.assert_array_equal(levels, LEVELS[p.astype(np.int32) & 15])
  export(module_tables, x, p)
  x = rnd((128,), 2)
  np.testing.assert_allclose(taps_iterated(x, interpret=True), 0.25 + 0.5 * x + 0.25 * x * x, rtol=1e-6, atol=1e-6)



@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] - 2, x.shape[1] - 2), x.dtype))
def nested_taps(x_ref, o_ref):
  """A stencil's taps as a nested list, `k[i][j]` in two range loops (the inner one was MG003)."""
  k = [[1, 2, 1], [2, 4, 2], [1, 2, 1]]
  h, w = o_ref.shape
  acc = jnp.zeros((h, w), jnp.float32)
  for i in range(3):
    for j in range(3):
      acc += k[i][j] / 16 * x_ref[i:i + h, j:j + w]
  o_ref[...] = acc


def test_nested_list_taps_unroll_their_loops():
  x = rnd((18, 130), 4)
  k = np.outer([1, 2, 1], [1, 2, 1]) / 16
  want = sum(k[a, b] * x[a:a + 16, b:b + 128] for a in range(3) for b in range(3))
  np.testing.assert_allclose(nested_taps(x, interpret=True), want, rtol=1e-5, atol=1e-5)
  export(nested_taps, x)

# ---------------------------------------------------------------- v.sum(promote_integers=False)
@mg.mgpu_kernel(out_shape=lambda x: (S((8,), x.dtype), S((), x.dtype), S((8,), jnp.int32)))
def narrow_sums(x_ref, rows, total, wide):
  v = x_ref[...]
  rows[...] = v.sum(axis=1, promote_integers=False)
  total[...] = v.sum(promote_integers=False)
  wide[...] = v.sum(1, promote_integers=True)


def test_sum_method_takes_promote_integers():
  """`v.sum(promote_integers=False)` as a method was MG003 ("unexpected keyword argument"); jnp.sum took it."""
  for d in (np.int8, np.int16):
    x = np.random.default_rng(0).integers(0, 100, (8, 128)).astype(d)
    r, t, w = narrow_sums(x, interpret=True)
    assert r.dtype == d and t.dtype == d
    np.testing.assert_array_equal(r, jnp.sum(x, axis=1, promote_integers=False))
    np.testing.assert_array_equal(t, jnp.sum(x, promote_integers=False))
    np.testing.assert_array_equal(w, jnp.sum(x, axis=1).astype(jnp.int32))
  export(narrow_sums, np.zeros((8, 128), np.int8))


# ---------------------------------------------------------------- del under a run-time if
@mg.mgpu_kernel(out_shape=lambda x: x)
def del_in_branch(x_ref, o_ref):
  v = x_ref[...]
  if x_ref[0] > 0:
    del v
  o_ref[...] = v


@mg.mgpu_kernel(out_shape=lambda x: x)
def del_in_else(x_ref, o_ref):
  v = x_ref[...] * 2.0
  if x_ref[0] > 0:
    o_ref[...] = v
  else:
    del v
  o_ref[...] = v + 1.0


@mg.mgpu_kernel(out_shape=lambda x: x)
def del_and_rebind(x_ref, o_ref):
  v = x_ref[...]
  if x_ref[0] > 0:
    del v
    v = x_ref[...] * 3.0
  o_ref[...] = v


def test_del_under_a_runtime_if_unbinds_on_that_path():
  """`if c: del v` left v bound after the if (the old value, silently): Python's NameError on that path."""
  spec = [S((128,), F32)]
  line = lambda k, text: inspect.getsourcelines(k.fn)[1] + inspect.getsource(k.fn).splitlines().index(text)
  expect(del_in_branch, spec, mg.UnboundNameError, "v\n",
         f"v is read after the run-time if at line {line(del_in_branch, '  if x_ref[0] > 0:')}, whose body deletes"
         f" it (`del v`, line {line(del_in_branch, '    del v')}): on that path it has no value",
         hint="read v before the if, or del it on both paths (or after the if)", nth=1)
  expect(del_in_else, spec, mg.UnboundNameError, "v + 1.0",
             f"v is read after the run-time if at line {line(del_in_else, '  if x_ref[0] > 0:')}, whose else deletes"
             f" it (`del v`, line {line(del_in_else, '    del v')}): on that path it has no value")
  for x in (rnd((128,), 0), -np.abs(rnd((128,), 1))):     # rebound after the del: taken, both paths
    np.testing.assert_array_equal(del_and_rebind(x, interpret=True), x * 3 if x[0] > 0 else x)


# ---------------------------------------------------------------- v.at[a:b].set(rows of its own shape)
@mg.mgpu_kernel(out_shape=lambda x: x)
def at_shift(x_ref, o_ref):
  v = x_ref[...]
  o_ref[...] = v.at[2:4].set(v[:2])


@mg.mgpu_kernel(out_shape=lambda x: (x, x, x))
def at_ranges(x_ref, halves, rows, box):
  v = x_ref[...]
  halves[...] = v.at[:, 64:].add(v[:, :64])
  rows[...] = v.at[8:16, :].set(v[:8, :] * 2.0)
  box[...] = v.at[3, 2:10].max(v[0, :8])


def test_range_updates_by_values_of_the_range_shape():
  """`v.at[2:4].set(v[:2])` (an update of the range's own shape, from elsewhere in the tensor) was MG003."""
  x = rnd((8,), 0)
  np.testing.assert_array_equal(at_shift(x, interpret=True), jnp.asarray(x).at[2:4].set(x[:2]))
  x = jnp.asarray(rnd((16, 128), 1))
  a, b, c = at_ranges(x, interpret=True)
  np.testing.assert_array_equal(a, x.at[:, 64:].add(x[:, :64]))
  np.testing.assert_array_equal(b, x.at[8:16, :].set(x[:8, :] * 2.0))
  np.testing.assert_array_equal(c, x.at[3, 2:10].max(x[0, :8]))
  export(at_shift, rnd((8,), 0))
  export(at_ranges, rnd((16, 128), 1))



@mg.mgpu_kernel(out_shape=lambda x, ids: (S((128,), F32), S((8,), F32), S((ids.shape[0], 128), F32)))
def at_gets(x_ref, ids_ref, row, col, rows):
  x = x_ref[...]
  row[...] = x.at[3].get() + x.at[ml.program_id(0)].get(mode="promise_in_bounds")
  col[...] = x.at[:, x.shape[1] - 1].get()
  rows[...] = x.at[ids_ref[...]].get()


def test_at_get_reads_as_an_index():
  """`v.at[idx].get()` (jnp's spelling of v[idx]) was MG003 ("a register tensor has no attribute 'at'")."""
  x = rnd((8, 128), 2)
  ids = np.random.default_rng(3).integers(0, 8, 16).astype(np.int32)
  row, col, rows = at_gets(x, ids, interpret=True)
  np.testing.assert_array_equal(row, x[3] + x[0])
  np.testing.assert_array_equal(col, x[:, 127])
  np.testing.assert_array_equal(rows, x[ids])
  export(at_gets, x, ids)


# ---------------------------------------------------------------- gathers through a whole read of an input
@mg.mgpu_kernel(out_shape=lambda ids, w, x, i: (S((ids.shape[0], w.shape[1]), w.dtype),
                                                S((ids.shape[0], w.shape[1]), w.dtype), S(i.shape, x.dtype)))
def table_reads(ids_ref, w_ref, x_ref, i_ref, rows, taken, along):
  rows[...] = w_ref[...][ids_ref[...]]
  taken[...] = jnp.take(w_ref[...], ids_ref[...], axis=0)
  along[...] = jnp.take_along_axis(x_ref[...], i_ref[...], axis=1)


def test_gathers_through_a_whole_read_are_gathers_from_the_input():
  """`w_ref[...][ids]` of a (4096, 128) table was MG403 (the whole table in registers); `jnp.take_along_axis(
  x_ref[...], i, axis=1)` MG003 ("gathers from a GMEM ref"): both hints wrote the gather from the ref."""
  w, x = rnd((4096, 128), 5), rnd((64, 128), 6)
  ids = np.random.default_rng(7).integers(0, 4096, 16).astype(np.int32)
  i = np.random.default_rng(8).integers(0, 128, (64, 32)).astype(np.int32)
  rows, taken, along = table_reads(ids, w, x, i, interpret=True)
  np.testing.assert_array_equal(rows, w[ids])
  np.testing.assert_array_equal(taken, w[ids])
  np.testing.assert_array_equal(along, np.take_along_axis(x, i, axis=1))
  export(table_reads, ids, w, x, i)

# ---------------------------------------------------------------- quantiles at several qs
QS = np.array([0.1, 0.5, 0.9])


@mg.mgpu_kernel(out_shape=lambda x: (S((2,), F32), S((1,), F32)))
def quartiles(x_ref, flat, one):
  x = x_ref[...]
  flat[...] = jnp.quantile(x[0], jnp.array([0.25, 0.75]))
  one[...] = jnp.median(x[1], keepdims=True) - jnp.quantile(x[1], [0.5])


@mg.mgpu_kernel(out_shape=lambda x: (S((3, 8), F32), S((3, 8), F32)))
def deciles(x_ref, rows, pct):
  x = x_ref[...]
  rows[...] = jnp.quantile(x, QS, axis=1)
  pct[...] = jnp.percentile(x, [10, 50, 90], axis=1, method="nearest")


def test_quantiles_at_an_array_of_qs():
  """`jnp.quantile(v, jnp.array([0.25, 0.75]))` (q an array, a list or a NumPy global) was MG003."""
  x = jnp.asarray(rnd((8, 128), 0))
  flat, one = quartiles(x, interpret=True)
  np.testing.assert_allclose(flat, jnp.quantile(x[0], jnp.array([0.25, 0.75])), rtol=1e-6)
  np.testing.assert_allclose(one, jnp.zeros(1), atol=1e-6)
  rows, pct = deciles(x, interpret=True)
  np.testing.assert_allclose(rows, jnp.quantile(x, QS, axis=1), rtol=1e-6)
  np.testing.assert_allclose(pct, jnp.percentile(x, jnp.array([10, 50, 90]), axis=1, method="nearest"), rtol=1e-6)
  export(quartiles, rnd((8, 128), 0))
  export(deciles, rnd((8, 128), 0))


# ---------------------------------------------------------------- int8 products of a k the tensor cores do not step by
@mg.mgpu_kernel(out_shape=lambda a, b, w: (S((a.shape[0], b.shape[1]), jnp.int32), S((a.shape[0], w.shape[0]), F32)))
def w8a8(a_ref, b_ref, w_ref, o_ref, s_ref):
  o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.int32)
  acc = jnp.einsum("mk,nk->mn", a_ref[...], w_ref[...], preferred_element_type=jnp.int32)
  s_ref[...] = acc.astype(jnp.float32) * 0.5


def _int8(shape, seed):
  return np.random.default_rng(seed).integers(-100, 100, shape).astype(np.int8)


def _w8a8_want(a, b, w):
  return a.astype(np.int32) @ b.astype(np.int32), (a.astype(np.int32) @ w.astype(np.int32).T).astype(np.float32) * 0.5


def test_int8_products_of_any_k_are_padded_to_64():
  """`jnp.dot` of int8 tiles with k=48 (or 32, 96, 100) was MG003: both operands are padded with zeros along k."""
  for m, k, n in ((64, 48, 64), (16, 100, 32)):
    a, b, w = _int8((m, k), 0), _int8((k, n), 1), _int8((64, k), 2)
    got, scaled = w8a8(a, b, w, interpret=True)
    want, want_scaled = _w8a8_want(a, b, w)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(scaled, want_scaled)
  export(w8a8, _int8((64, 48), 0), _int8((48, 64), 1), _int8((64, 48), 2))


@pytest.mark.gpu
def test_gpu_int8_padded_products_and_the_new_forms_match_numpy():
  """The forms this probe opened, on the GPU: int8 products padded along k, range updates (ml.pad), 2-D tables
  and quantiles at several qs (selects and stacks), star refs."""
  for m, k, n in ((64, 48, 64), (16, 100, 32)):
    a, b, w = _int8((m, k), 0), _int8((k, n), 1), _int8((64, k), 2)
    got, scaled = w8a8(a, b, w)
    want, want_scaled = _w8a8_want(a, b, w)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(scaled, want_scaled)
  x = jnp.asarray(rnd((16, 128), 1))
  for g, i in zip(at_ranges(x), at_ranges(x, interpret=True)):
    np.testing.assert_array_equal(g, i)
  np.testing.assert_array_equal(at_shift(rnd((8,), 0)), at_shift(rnd((8,), 0), interpret=True))
  x, ids = rnd((8, 128), 2), np.random.default_rng(3).integers(0, 8, 16).astype(np.int32)
  for g, i in zip(at_gets(x, ids), at_gets(x, ids, interpret=True)):
    np.testing.assert_array_equal(g, i)
  w, x = rnd((4096, 128), 5), rnd((64, 128), 6)
  ids = np.random.default_rng(7).integers(0, 4096, 16).astype(np.int32)
  i = np.random.default_rng(8).integers(0, 128, (64, 32)).astype(np.int32)
  for g, want in zip(table_reads(ids, w, x, i), (w[ids], w[ids], np.take_along_axis(x, i, axis=1))):
    np.testing.assert_array_equal(g, want)
  x = rnd((34, 66), 0)
  np.testing.assert_allclose(sobel_x(x), sobel_x(x, interpret=True), rtol=1e-5, atol=1e-5)
  x = rnd((128, 3), 1)
  np.testing.assert_allclose(mix3(x), mix3(x, interpret=True), rtol=2e-3, atol=2e-3)     # (TF32 on the GPU)
  x = jnp.asarray(rnd((8, 128), 0))
  for kern in (quartiles, deciles):
    for g, i in zip(kern(x), kern(x, interpret=True)):
      np.testing.assert_allclose(g, i, rtol=1e-6, atol=1e-6)
  x = rnd((128, 32), 0)
  np.testing.assert_array_equal(star_double(x), x * 2)
  x, p = rnd((130, 2), 0), np.random.default_rng(1).integers(0, 256, 1024).astype(np.uint8)
  for g, i in zip(module_tables(x, p), module_tables(x, p, interpret=True)):
    np.testing.assert_allclose(g, i, rtol=2e-3, atol=2e-3)       # (a float32 dot: TF32 on the GPU)


# ---------------------------------------------------------------- out_shape of jnp.int_ without x64
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, jnp.int_), S(x.shape, float)))
def default_types(x_ref, codes, halves):
  codes[...] = (x_ref[...] * 10.0).astype(jnp.int32)
  halves[...] = x_ref[...] * 0.5


@pytest.mark.skipif(jax.config.jax_enable_x64, reason="x64 mode keeps 64-bit types")
def test_default_int_and_float_outputs_narrow_as_jnp_does():
  """`out_shape` of `jnp.int_` (or `float`) with x64 off was MG006; it is int32 (float32) with jnp's warning, as
  `jnp.zeros(n, jnp.int_)` is."""
  x = rnd((128,), 0)
  with pytest.warns(UserWarning, match="Explicitly requested dtype int64 requested in out_shape"):
    codes, halves = default_types(x, interpret=True)
  assert codes.dtype == jnp.int32 and halves.dtype == jnp.float32
  np.testing.assert_array_equal(codes, (x * 10).astype(np.int32))
  np.testing.assert_array_equal(halves, x * 0.5)
