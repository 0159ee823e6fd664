"""Probe 15 (helpers porting and attacking kernels from the docs): what compiled wrongly or
failed (a masked (m, 1) window past the array's end beside a dot result, an element of a dot
result, ml.full of shape (), reads of another program's writes) and the messages and hints that
misled (dtype hints, narrow rows, column slices, Triton/Pallas/NumPy habits)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct
F32, F16 = jnp.float32, jnp.float16


def _ab():
  k = rand.split(rand.key(0), 3)
  a = rand.normal(k[0], (128, 64), F16)
  b = rand.normal(k[1], (64, 128), F16)
  c = rand.normal(k[2], (200, 4), F32)
  return a, b, c, a.astype(F32) @ b.astype(F32)


@mg.mgpu_kernel(out_shape=lambda a, b, c, *, block: (S((128, 128), F32), S((200, 1), F32)),
                block=lambda a, b, c, *, block: block)
def dot_plus_masked_column(a, b, c, o, m, *, block: ml.constexpr):
  a_s, b_s = ml.smem((128, 64), F16), ml.smem((64, 128), F16)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  rows = ml.arange(128) + 100
  v = c.at[ml.ds(100, 128), ml.ds(0, 1)].load(mask=(rows < c.shape[0])[:, None], other=0.0)   # (128, 1)
  o[...] = acc + v
  mx = ml.max(acc, axis=1, keepdims=True)                      # (128, 1)
  m.at[ml.ds(0, 128), ml.ds(0, 1)][...] = mx
  ml.store(m.at[ml.ds(100, 128), ml.ds(0, 1)], mx, mask=(rows < m.shape[0])[:, None])   # over rows 100:128


@pytest.mark.parametrize("block", [128, 256])
def test_masked_column_window_past_the_end_beside_a_dot(block):
  """Was MG900 at export (a masked access folding its value's size-1 axis); interpret was right."""
  a, b, c, ref = _ab()
  col = jnp.zeros((128,)).at[:100].set(c[100:, 0])
  o, m = dot_plus_masked_column(a, b, c, block=block, interpret=True)
  np.testing.assert_allclose(o, ref + col[:, None], rtol=1e-3, atol=1e-2)
  mx = ref.max(1)
  np.testing.assert_allclose(m[:, 0], jnp.concatenate([mx[:100], mx[:100]]), rtol=1e-3, atol=1e-2)
  jax.export.export(jax.jit(lambda a, b, c: dot_plus_masked_column(a, b, c, block=block)),
                    platforms=["cuda"])(S(a.shape, F16), S(b.shape, F16), S(c.shape, F32))


@mg.mgpu_kernel(out_shape=lambda a, b, *, block: S((128,), F32), block=lambda a, b, *, block: block)
def element_of_a_dot(a, b, o, *, block: ml.constexpr):
  a_s, b_s = ml.smem((128, 64), F16), ml.smem((64, 128), F16)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  o[...] = ml.full((128,), 0.0, F32) + acc[100, 3] + acc[127, 127]


@pytest.mark.parametrize("block", [128, 256])
def test_an_element_of_a_dot_result(block):
  """language.md lists x[i, j]; a tensor-core result was MG204 (its scratch tiled)."""
  a, b, _, ref = _ab()
  got = element_of_a_dot(a, b, block=block, interpret=True)
  np.testing.assert_allclose(got, jnp.full((128,), ref[100, 3] + ref[127, 127]), rtol=1e-3, atol=1e-2)
  jax.export.export(jax.jit(lambda a, b: element_of_a_dot(a, b, block=block)),
                    platforms=["cuda"])(S(a.shape, F16), S(b.shape, F16))


@mg.mgpu_kernel(out_shape=lambda x: x)
def broadcast_3d(x, o):
  v = x[...]
  w = v * 2
  o[...] = w + v[0][None, :, :]


def test_a_3d_broadcast_along_its_leading_axis():
  """Was MG204 (twelfth session: reported at the broadcast); probe 37e broadcasts along leading (or
  trailing) axes as the 2-D broadcast of the merged axes, between two reshapes."""
  x = np.random.default_rng(15).standard_normal((2, 8, 64)).astype(np.float32)
  np.testing.assert_array_equal(broadcast_3d(x, interpret=True), x * 2 + x[0][None])
  jax.export.export(jax.jit(broadcast_3d), platforms=["cuda"])(S((2, 8, 64), F32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def helper_inside(x, o):
  @ml.inline
  def twice(v):
    return v * 2
  o[...] = twice(x[...])


def test_a_helper_defined_in_a_kernel_is_traced_where_it_is_called():
  """It was MG001 (a nested function); probe 38g: a def (or a lambda) in the body is a helper."""
  x = jnp.arange(128, dtype=F32)
  np.testing.assert_array_equal(helper_inside(x, interpret=True), x * 2)


@pytest.mark.gpu
@pytest.mark.parametrize("block", [128, 256])
def test_probe15_gpu(block):
  a, b, c, ref = _ab()
  col = jnp.zeros((128,)).at[:100].set(c[100:, 0])
  o, m = jax.jit(lambda a, b, c: dot_plus_masked_column(a, b, c, block=block))(a, b, c)
  np.testing.assert_allclose(o, ref + col[:, None], rtol=1e-3, atol=1e-2)
  mx = ref.max(1)
  np.testing.assert_allclose(m[:, 0], jnp.concatenate([mx[:100], mx[:100]]), rtol=1e-3, atol=1e-2)
  got = jax.jit(lambda a, b: element_of_a_dot(a, b, block=block))(a, b)
  np.testing.assert_allclose(got, jnp.full((128,), ref[100, 3] + ref[127, 127]), rtol=1e-3, atol=1e-2)


@mg.mgpu_kernel(out_shape=lambda a, bt, w: S((128, 128), F32))
def int_dot_times_float_scales(a, bt, w, o):
  a_s, bt_s = ml.smem((128, 128), jnp.int8), ml.smem((128, 128), jnp.int8)
  ml.copy(a, a_s)
  ml.copy(bt, bt_s)
  acc = ml.dot(a_s, bt_s.T, ml.zeros((128, 128), jnp.int32))
  o[...] = acc * w[...][None, :]


def test_an_int_accumulator_times_float_scales_computes_in_float_as_jnp():
  """MG104's hint said w[...][None, :].astype(jnp.int32): followed, float scales in (0, 1)
  truncated to 0 and the kernel returned zeros (probe 15). Since probe 33a the int32 side takes the
  float's dtype, as jnp's promotion does."""
  a = rand.randint(rand.key(7), (128, 128), -8, 8, jnp.int8)
  bt = rand.randint(rand.key(8), (128, 128), -8, 8, jnp.int8)
  w = rand.uniform(rand.key(9), (128,), F32)
  want = (a.astype(jnp.int32) @ bt.astype(jnp.int32).T) * w[None, :]
  np.testing.assert_allclose(int_dot_times_float_scales(a, bt, w, interpret=True), want, rtol=1e-6)


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32))
def dot_of_transposed_ref(a, b, o):
  a_s, b_s = ml.smem((64, 64), F16), ml.smem((64, 64), F16)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  o[...] = ml.dot(a_s, ml.transpose(b_s))


def test_transposing_an_smem_operand_is_the_free_view():
  """The hint said b_s[...], and ml.dot then rejected a register B (probe 15); then it hinted the view b_s.T,
  which ml.transpose(b_s) of a 2-D SMEM buffer now is (probe 46c)."""
  a = jnp.asarray(np.random.default_rng(0).standard_normal((64, 64)), F16)
  b = jnp.asarray(np.random.default_rng(1).standard_normal((64, 64)), F16)
  dot_of_transposed_ref.check(S((64, 64), F16), S((64, 64), F16))
  want = np.asarray(a, np.float32) @ np.asarray(b, np.float32).T
  np.testing.assert_allclose(dot_of_transposed_ref(a, b, interpret=True), want, rtol=1e-2, atol=1e-2)


@mg.mgpu_kernel(out_shape=lambda l: S(l.shape, F32))
def router_top2(logits, w):
  srt = ml.sort(logits[...], descending=True)                        # (64, 8): 8 experts
  keep = ml.arange(srt.shape[1])[None, :] < 2
  m = ml.max(ml.where(keep, srt, -1e30), axis=1)
  e = ml.where(keep, ml.exp(srt - m[:, None]), 0.0)
  w[...] = e / ml.sum(e, axis=1)[:, None]


@mg.mgpu_kernel(out_shape=lambda l: S(l.shape, F32))
def router_top2_32_wide(logits, w):
  t = logits.at[:, ml.ds(0, 32)].load(mask=ml.arange(32)[None, :] < logits.shape[1], other=float("-inf"))
  srt = ml.sort(t, descending=True)
  keep = ml.arange(32)[None, :] < 2
  m = ml.max(ml.where(keep, srt, -1e30), axis=1)
  e = ml.where(keep, ml.exp(srt - m[:, None]), 0.0)
  w[...] = (e / ml.sum(e, axis=1)[:, None])[:, :8]


def test_rows_narrower_than_a_warp_compile_and_the_old_hints_32_wide_read_works():
  """8 experts: MG204 pointed at the load and its hint (mask columns of the full rows) could not
  be followed, the full rows being 8 wide (probe 15). Now at the ml.max, and the hint's
  32-wide masked read works."""
  builds(router_top2, S((64, 8), F32))     # (now compiled: tiles narrower than a warp take fewer lanes a row, tests/test_narrow_rows.py)
  x = jnp.asarray(np.random.RandomState(0).randn(64, 8), F32)
  s = -jnp.sort(-x, axis=1)
  p = jnp.exp(s[:, :2] - s[:, :1])
  want = jnp.zeros((64, 8)).at[:, :2].set(p / p.sum(1, keepdims=True))
  np.testing.assert_allclose(router_top2_32_wide(x, interpret=True), want, rtol=1e-5)
  jax.export.export(jax.jit(router_top2_32_wide), platforms=["cuda"])(S((64, 8), F32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def doubled(x, out):
  out[...] = x[...] * 2


@mg.mgpu_kernel(out_shape=lambda x: x)
def calls_a_kernel(x, out):
  y = doubled(x)
  out[...] = y[...]


def test_a_kernel_called_from_a_kernel_says_so():
  """It said 'doubled cannot take a GMEM ref inside a kernel' (probe 15)."""
  e = expect(calls_a_kernel, [S((128,), F32)], mg.KernelTypeError, "doubled(x)",
             "a kernel cannot call another kernel (doubled): kernels are launched from JAX, one grid each")
  assert "@ml.inline" in e.hint


@mg.mgpu_kernel(out_shape=lambda x: (S((), F32), S((), jnp.int32)))
def running_max_from_full(x, out, count):
  m = ml.full((), -1e30, F32)                    # a scalar, as jnp.full((), ...) is a 0-d array
  n = ml.zeros((), jnp.int32)
  for c in range(x.shape[0] // 128):
    m = ml.maximum(m, ml.max(x.at[ml.ds(c * 128, 128)][...]))
    n = n + 1
  out[...] = m
  count[...] = n


def test_full_of_an_empty_shape_is_a_scalar():
  """ml.full((), v, dtype) was MG003 'a tuple of positive Python ints, got ()' (probe 15)."""
  x = rand.normal(rand.key(2), (512,), F32)
  m, n = running_max_from_full(x, interpret=True)
  assert float(m) == float(x.max()) and int(n) == 4
  jax.export.export(jax.jit(running_max_from_full), platforms=["cuda"])(S((512,), F32))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128 - 1,), input_output_aliases={0: 0})
def shift_left_in_place(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128 + 128, 128)][...]     # program i + 1 overwrites these in place
  out.at[ml.ds(i * 128, 128)][...] = v * 2.0


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,), input_output_aliases={0: 0})
def scale_in_place(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * 2.0
  out.at[ml.ds(i * 128, 128)][...] = out.at[ml.ds(i * 128, 128)][...] + 1.0   # its own elements


def test_reading_elements_another_program_writes_in_place_is_a_race_at_compile_time():
  """Interpret mode saw it (MG951) but export passed: the grid check counted writes only (probe 15)."""
  expect(shift_left_in_place, [S((1024,), F32)], mg.RaceError, "x.at[ml.ds(i * 128 + 128, 128)][...]",
         "program (0, 0, 0) reads x[128], the memory of out (aliased), while program (1, 0, 0) writes out[128]:"
         " programs run in no fixed order, so the value read depends on timing")
  scale_in_place.check(S((1024,), F32))
  x = jnp.arange(1024, dtype=F32)
  np.testing.assert_array_equal(scale_in_place(x, interpret=True), x * 2.0 + 1.0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 2), F32), grid=lambda x: (x.shape[0] // 16,))
def top2_weights_sliced(x, w_out):
  i = ml.program_id(0)
  top = ml.sort(x.at[ml.ds(i * 16, 16), :][...], axis=-1, descending=True)
  keep = ml.arange(64)[None, :] < 2
  e = ml.where(keep, ml.exp(top - ml.max(top, axis=1, keepdims=True)), 0.0)
  w = e / ml.sum(e, axis=1, keepdims=True)
  w_out.at[ml.ds(i * 16, 16), :][...] = w[:, :2]           # (16, 2): 32 elements


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 2), F32), grid=lambda x: (x.shape[0] // 16,))
def top2_weights_masked_store(x, w_out):
  i = ml.program_id(0)
  top = ml.sort(x.at[ml.ds(i * 16, 16), :][...], axis=-1, descending=True)
  keep = ml.arange(64)[None, :] < 2
  e = ml.where(keep, ml.exp(top - ml.max(top, axis=1, keepdims=True)), 0.0)
  w = e / ml.sum(e, axis=1, keepdims=True)
  w_out.at[ml.ds(i * 16, 16), ml.ds(0, 64)].store(w, mask=ml.arange(64)[None, :] < 2)


def test_the_narrow_tile_hint_stores_with_a_mask_where_slicing_cannot():
  """'slice only to store: t[:, :k]' gave a (16, 2) tile, itself MG204 (probe 15); the hint stored with a mask. Since
  probe 45a the (16, 2) slice, 32 elements, is read back whole as their vector and stored: both compute (the hint's
  text for a slice of more elements: tests/test_probe26.py)."""
  x = rand.normal(rand.key(0), (64, 64))
  s = -jnp.sort(-x, axis=1)[:, :2]
  p = jnp.exp(s - s[:, :1])
  np.testing.assert_allclose(top2_weights_masked_store(x, interpret=True), p / p.sum(1, keepdims=True), rtol=1e-5)
  np.testing.assert_allclose(top2_weights_sliced(x, interpret=True), p / p.sum(1, keepdims=True), rtol=1e-5)
  jax.export.export(jax.jit(top2_weights_masked_store), platforms=["cuda"])(S((64, 64), F32))


# ---------------------------------------------------------------- Triton / Pallas / NumPy habits (probe G)
@mg.mgpu_kernel(out_shape=lambda x: S((16, 128), F32))
def reshape_numpy_style(x, o):
  v = x[...]                                   # (2048,)
  o[...] = v.reshape(16, 128) + v.reshape(-1, 128) * 0.0 + v.reshape((16, -1)) * 0.0


def test_reshape_takes_sizes_as_arguments_and_one_minus_one():
  x = jnp.arange(2048, dtype=F32)
  np.testing.assert_array_equal(reshape_numpy_style(x, interpret=True), x.reshape(16, 128))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(8,))
def pallas_program_id(x, out):
  i = pl.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32))
def lax_fori_loop(x, out):
  out[...] = jax.lax.fori_loop(0, 4, twice_plus, ml.zeros((128,), F32))


@ml.inline
def twice_plus(j, acc):
  return acc * 2 + 1


def test_foreign_functions_name_the_mgpu_dsl_spelling():
  spec = [S((1024,), F32)]
  e = expect(pallas_program_id, spec, mg.KernelTypeError, "pl.program_id(0)",
             "pl.program_id is Pallas's; an mgpu_dsl kernel calls ml.* functions")
  assert e.hint == "write ml.program_id(0)"
  # jax.lax.fori_loop of an @ml.inline body runs as the loop its hint wrote (probe 48h)
  np.testing.assert_array_equal(np.asarray(lax_fori_loop(jnp.zeros((1024,), F32), interpret=True)), np.full(128, 15.0))


def test_triton_launch_syntax_is_a_signature_error():
  with pytest.raises(mg.SignatureError) as info:
    doubled[(8,)](jnp.ones((128,), F32))
  assert "takes no grid at the call" in info.value.message and "grid=(8,)" in info.value.hint


@mg.mgpu_kernel(out_shape=lambda x, n: x)
def cdiv_of_a_ref(x, n, out):
  tiles = ml.cdiv(n, 128)
  out[...] = x[...] * tiles


def test_cdiv_of_a_ref_names_ml_cdiv():
  """It said '+ works on register values', naming an operator the user did not write (probe 15)."""
  expect(cdiv_of_a_ref, [S((128,), F32), S((), jnp.int32)], mg.KernelTypeError, "ml.cdiv(n, 128)",
         "ml.cdiv works on register values, got n (GMEM ref)", hint="read it into registers first: n[...]")


@mg.mgpu_kernel(out_shape=lambda x: S((16,), x.dtype))
def row_sums_of_a_reshape(x, o):
  o[...] = ml.sum(x[...].reshape(16, 128), axis=1)


@pytest.mark.parametrize("shape", [(2048,), (8, 256)])
def test_a_reshape_that_moves_a_reduced_tiles_rows_goes_through_smem(shape):
  """(2048,) -> (16, 128) then a row sum was MG900 (IndexError) and (8, 256) -> (16, 128) MG900 at
  export (Mosaic GPU cannot reshape the row layout), then MG204 at the reshape (probe 15); since
  probe 30a the reshape moves the elements through an SMEM scratch (frontend/relayout.py)."""
  row_sums_of_a_reshape.check(S(shape, F32))
  assert "relayoutstore" in row_sums_of_a_reshape.typed_ir(S(shape, F32))
  x = rand.normal(rand.key(0), shape, F32)
  np.testing.assert_allclose(row_sums_of_a_reshape(x, interpret=True), np.asarray(x).reshape(16, 128).sum(1),
                             rtol=1e-5, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128, 1))
def second_axis_on_a_1d_grid(x, out):
  i = ml.program_id(1)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * 2


def test_program_id_of_an_axis_of_one_program_is_named_in_a_note():
  """The errors named only the store; the cause was ml.program_id(1) of a grid axis of one program (probe 15; on a
  grid of one axis, grid=(n,), it is MG203 at the ml.program_id since probe 51a: tests/test_probe51a.py)."""
  with pytest.raises(mg.UncoveredOutputError) as info:
    second_axis_on_a_1d_grid.check(S((1024,), F32))
  assert any("ml.program_id(1) is 0 in every program: the grid has 1 program along axis 1 (grid (8, 1))" in n
             for n in info.value.notes)


def test_every_unknown_decorator_option_is_named():
  with pytest.raises(mg.SignatureError) as info:
    @mg.mgpu_kernel(out_shape=lambda x: x, num_warps=8, num_stages=3)
    def triton_options(x, out):
      out[...] = x[...]
  assert info.value.message == "@mgpu_kernel has no options num_stages=, num_warps="
  assert "ml.range(n, stages=s)" in info.value.hint and "num_warps=4 is block=128" in info.value.hint
