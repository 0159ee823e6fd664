"""Probe 26a (boundaries): windows of a view that left the view silently read and wrote the array's
neighbouring rows; masked SMEM loads rejected for elements their mask keeps off; hints that fail
when followed (a clamped write start, a race hint's 125-element tile, a float `other` for int32
data) or say too little (a masked window wholly past the end in an ml.static_range trip)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect, where

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


def _interpret_error(kernel, cls, at, *args, nth=0, **kw):
  """The interpret-mode error of kernel(*args): its class, code and place; returned for its text."""
  with pytest.raises(mg.KernelError) as info:
    kernel(*args, interpret=True, **kw)
  e = info.value
  assert type(e) is cls, f"{type(e).__name__}: {e}"
  assert e.code == cls.code
  assert (e.lineno, e.col_offset) == where(kernel, at, nth), e.render()
  assert e.hint
  return e


X100 = jnp.arange(100 * 128, dtype=F32).reshape(100, 128)
ROWS64 = lambda x: S((64, 128), F32)


# ---------------------------------------------------------------- windows of a view past its end
@mg.mgpu_kernel(out_shape=ROWS64)
def view_ds_read(x, out):
  out[...] = x.at[0:50].at[ml.ds(0, 64)][...]


@mg.mgpu_kernel(out_shape=ROWS64)
def view_ds_copy(x, out):
  buf = ml.smem((64, 128), F32)
  ml.copy(x.at[0:50].at[ml.ds(0, 64)], buf)
  ml.copy(buf, out)


VIEW_MESSAGE = ("ml.ds(0, 64) is out of bounds for dimension 0 of x.at[0:50] (size 50), which ends inside x: a"
                " window may leave a view only where the view reaches x's end")
VIEW_HINT = ("TMA copies and masks stop only at x's own ends, not a view's: window x itself, x.at[ml.ds(0, 64)],"
             " with a mask that keeps the view's part (.load(mask=ml.arange(64)[:, None] < 50, other=0),"
             " .store(value, mask=ml.arange(64)[:, None] < 50)), or make the view as large as the window")


def test_a_window_of_a_view_past_the_views_end_is_rejected():
  # x.at[0:50].at[ml.ds(0, 64)] read rows 50..63 of x, unmasked or by TMA, with no error
  spec = S((100, 128), F32)
  expect(view_ds_read, [spec], mg.IndexOutOfBoundsError, "x.at[0:50].at[ml.ds(0, 64)]", VIEW_MESSAGE,
         hint=VIEW_HINT)
  expect(view_ds_copy, [spec], mg.IndexOutOfBoundsError, "x.at[0:50].at[ml.ds(0, 64)]", VIEW_MESSAGE,
         hint=VIEW_HINT)
  # the hint followed: the view's rows, zeros past them
  want = jnp.where(jnp.arange(64)[:, None] < 50, X100[:64], 0)
  np.testing.assert_array_equal(view_hint_followed(X100, interpret=True), want)
  _export(view_hint_followed, spec)


@mg.mgpu_kernel(out_shape=ROWS64)
def view_hint_followed(x, out):
  out[...] = x.at[ml.ds(0, 64)].load(mask=ml.arange(64)[:, None] < 50, other=0)


@mg.mgpu_kernel(out_shape=lambda x: S((128, 16), F32), grid=(1,))
def store_past_a_view(x, out):
  buf = ml.smem((64, 16), F32)
  ml.copy(x.at[ml.ds(0, 64)], buf)
  top = out.at[ml.ds(0, 40)]
  ml.copy(buf, top.at[ml.ds(0, 64)])
  ml.copy(buf, out.at[ml.ds(64, 64)])


def test_a_tma_store_past_a_views_end_is_rejected():
  # 64 rows into a 40-row view of out wrote rows 40..63 of out
  expect(store_past_a_view, [S((128, 16), F32)], mg.IndexOutOfBoundsError, "top.at[ml.ds(0, 64)]",
         "ml.ds(0, 64) is out of bounds for dimension 0 of top (size 40), which ends inside out: a window may"
         " leave a view only where the view reaches out's end",
         hint="TMA copies and masks stop only at out's own ends, not a view's: window out itself,"
              " out.at[ml.ds(0, 64)], with a mask that keeps the view's part (.load(mask=ml.arange(64)[:, None] <"
              " 40, other=0), .store(value, mask=ml.arange(64)[:, None] < 40)), or make the view as large as the"
              " window")


@mg.mgpu_kernel(out_shape=ROWS64)
def view_runtime_start(x, out):
  v = x.at[0:50]
  out[...] = v.at[ml.ds(ml.program_id(0), 64)][...]


@mg.mgpu_kernel(out_shape=ROWS64)
def view_masked_past(x, out, *, upto: ml.constexpr):
  v = x.at[ml.ds(ml.program_id(0) + 10, 50)]
  idx = ml.arange(64)
  out[...] = v.at[ml.ds(0, 64)].load(mask=idx[:, None] < upto, other=0.0)


@mg.mgpu_kernel(out_shape=lambda x: S((128, 16), F32), grid=(1,))
def store_past_a_runtime_view(x, out):
  buf = ml.smem((64, 16), F32)
  ml.copy(x.at[ml.ds(0, 64)], buf)
  top = out.at[ml.ds(ml.program_id(0) * 64, 40)]
  ml.copy(buf, top.at[ml.ds(0, 64)])
  ml.copy(buf, out.at[ml.ds(64, 64)])


VIEW_RUNTIME_HINT = ("a window may leave a view only where the view reaches {0}'s end (TMA copies and masks stop"
                     " only at {0}'s own ends): check the run-time starts (ml.ds, program ids) of the view and of"
                     " its windows, or window {0} itself with a mask keeping the view's part")


def test_a_run_time_window_past_a_views_end_is_caught_in_interpret_mode():
  e = _interpret_error(view_runtime_start, mg.OutOfBoundsError, "v.at[ml.ds(ml.program_id(0), 64)]", X100)
  assert e.message == ("v.at[ml.ds(ml.program_id(0), 64)] is x[0:64, 0:128], outside the view x[0:50, 0:128] it"
                       " is a window of")
  assert e.hint == VIEW_RUNTIME_HINT.format("x")
  # a mask on past the view's end (row 60 of a 50-row view), inside x: it read x's rows 60..69
  e = _interpret_error(view_masked_past, mg.OutOfBoundsError, "v.at[ml.ds(0, 64)]", X100, upto=60)
  assert e.message == ("a masked access reaches x[60, 0]: the mask is on there, but it is outside the view"
                       " x[10:60, 0:128] it is a window of")
  # the mask kept to the view: the view's rows
  got = view_masked_past(X100, upto=50, interpret=True)
  np.testing.assert_array_equal(got, jnp.where(jnp.arange(64)[:, None] < 50, X100[10:74], 0))
  _export(lambda x: view_masked_past(x, upto=50), S((100, 128), F32))
  # a TMA store of 64 rows into a 40-row view: it wrote out's rows 40..63
  e = _interpret_error(store_past_a_runtime_view, mg.OutOfBoundsError, "ml.copy(buf, top.at",
                       jnp.ones((128, 16), F32))
  assert e.message == ("top.at[ml.ds(0, 64)] is out[0:64, 0:16], outside the view out[0:40, 0:16] it is a window"
                       " of")
  assert e.hint == VIEW_RUNTIME_HINT.format("out")
  # where the view reaches the array's end, its windows may run past it (TMA reads zeros there)
  want = jnp.concatenate([X100, jnp.zeros((28, 128), F32)])
  np.testing.assert_array_equal(view_at_the_end(X100, interpret=True), want)
  _export(view_at_the_end, S((100, 128), F32))
  np.testing.assert_array_equal(static_view_at_the_end(X100, interpret=True), want[64:128])
  _export(static_view_at_the_end, S((100, 128), F32))


@mg.mgpu_kernel(out_shape=lambda x: S((128, 128), F32), grid=lambda x: (2,))
def view_at_the_end(x, out):
  i = ml.program_id(0)
  buf = ml.smem((64, 128), F32)
  v = x.at[ml.ds(i * 64, 64)]          # the last view runs past x's 100 rows
  ml.copy(v.at[ml.ds(0, 64)], buf)     # TMA: zeros past x's end
  ml.copy(buf, out.at[ml.ds(i * 64, 64)])


@mg.mgpu_kernel(out_shape=lambda x: S((64, 128), F32))
def static_view_at_the_end(x, out):
  buf = ml.smem((64, 128), F32)
  ml.copy(x.at[ml.ds(64, 36)].at[ml.ds(0, 64)], buf)    # the view ends where x does
  ml.copy(buf, out)


# ---------------------------------------------------------------- masked SMEM loads
@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32))
def smem_half_masked(x, out):
  buf = ml.smem((128,), F32)
  buf.at[ml.ds(0, 64)][...] = x[...]
  idx = ml.arange(128)
  out[...] = buf.load(mask=idx < 64, other=-1.0)


def test_a_masked_smem_load_reads_only_what_its_mask_keeps():
  # MG601: buf[64:128] is read before anything writes it (the mask keeps it off)
  x = jnp.arange(64, dtype=F32)
  np.testing.assert_array_equal(smem_half_masked(x, interpret=True),
                                jnp.concatenate([x, jnp.full((64,), -1.0, F32)]))
  _export(smem_half_masked, S((64,), F32))


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), F32))
def smem_masked_by_data(x, n, out):
  buf = ml.smem((128,), F32)
  buf.at[ml.ds(0, 64)][...] = x[...]
  out[...] = buf.load(mask=ml.arange(128) < n[0], other=-1.0)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32))
def smem_mask_too_wide(x, out):
  buf = ml.smem((128,), F32)
  buf.at[ml.ds(0, 64)][...] = x[...]
  out[...] = buf.load(mask=ml.arange(128) < 96, other=-1.0)


def test_a_masked_smem_load_of_unwritten_elements_names_the_mask():
  message = "buf[64:128] is read before anything writes it: SMEM starts with garbage"
  expect(smem_masked_by_data, [S((64,), F32), S((1,), I32)], mg.UninitializedReadError, "buf.load(", message,
         hint="the mask cannot be proved to keep buf[64:128] off (it is not a condition on ml.arange and"
              " constants): fill buf first, with ml.copy(x.at[...], buf) or buf[...] = value, on every path"
              " to this read")
  expect(smem_mask_too_wide, [S((64,), F32)], mg.UninitializedReadError, "buf.load(",
         "buf[64:96] is read before anything writes it: SMEM starts with garbage",
         hint="the mask is on for elements of buf[64:96]: turn it off there, or fill buf first, with"
              " ml.copy(x.at[...], buf) or buf[...] = value, on every path to this read")


# ---------------------------------------------------------------- a clamped write, the race hint's tile
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def unmasked_tail_write(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)].load(
      mask=i * 128 + ml.arange(128) < x.shape[0], other=0.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def clamped_write(x, out):
  s = ml.minimum(ml.program_id(0) * 128, 872)
  out.at[ml.ds(s, 128)][...] = x.at[ml.ds(s, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def race_hint_followed(x, out):
  mask = ml.program_id(0) * 128 + ml.arange(128) < 1000
  v = x.at[ml.ds(ml.program_id(0) * 128, 128)].load(mask=mask, other=0)
  out.at[ml.ds(ml.program_id(0) * 128, 128)].store(v, mask=mask)


def test_a_write_past_the_end_is_not_hinted_a_clamp_and_the_race_hint_has_a_valid_tile():
  spec = S((1000,), F32)
  # the clamp made programs 6 and 7 both write out[872:896]
  expect(unmasked_tail_write, [spec], mg.IndexOutOfBoundsError, "out.at[ml.ds(i * 128, 128)][...] =",
         "this register write touches out[896:1024] in program (7, 0, 0), outside out's shape (1000,)",
         hint="mask it to the elements inside: out.at[ml.ds(i * 128, 128)].store(value,"
              " mask=i * 128 + ml.arange(128) < out.shape[0]) (read an input's tail the same way,"
              " .load(mask=..., other=0)); or guard the access (if i * 128 + 128 <= 1000:)")
  # its hint was out.at[ml.ds(ml.program_id(0) * 125, 125)]: a 125-element register vector, MG204
  expect(clamped_write, [spec], mg.RaceError, "out.at[ml.ds(s, 128)]",
         "program (6, 0, 0) and program (7, 0, 0) both write out[872]: programs run in no fixed order, so the"
         " result depends on timing",
         hint="give each program its own window of out: windows of 128 rows (a register tile needs a multiple of"
              " 8) cover its 1000 rows, the last one partial: out.at[ml.ds(ml.program_id(0) * 128,"
              " 128)].store(value, mask=ml.program_id(0) * 128 + ml.arange(128) < 1000), and read the matching"
              " window of the inputs the same way (.load(mask=..., other=0)); where programs add partial results"
              " into the same elements (split-K), add them atomically: ml.atomic_add(ref, value) or"
              " ml.copy(buf, ref, reduce=\"add\")")
  x = rand.normal(rand.key(0), (1000,), F32)
  np.testing.assert_array_equal(race_hint_followed(x, interpret=True), x)
  _export(race_hint_followed, spec)


# ---------------------------------------------------------------- a masked window wholly past the end
@mg.mgpu_kernel(out_shape=lambda x: S((), F32))
def chunks_past_the_end(x, out):
  acc = ml.zeros((128,), F32)
  for c in ml.static_range(4):
    idx = c * 128 + ml.arange(128)
    acc = acc + x.at[ml.ds(c * 128, 128)].load(mask=idx < x.shape[0], other=0.0)
  out[...] = ml.sum(acc)


@mg.mgpu_kernel(out_shape=lambda x: S((), F32))
def chunks_skipped(x, out):
  acc = ml.zeros((128,), F32)
  for c in ml.static_range(4):
    if c * 128 < x.shape[0]:
      idx = c * 128 + ml.arange(128)
      acc = acc + x.at[ml.ds(c * 128, 128)].load(mask=idx < x.shape[0], other=0.0)
  out[...] = ml.sum(acc)


def test_a_masked_window_wholly_past_the_end_says_how_to_skip_it():
  expect(chunks_past_the_end, [S((300,), F32)], mg.IndexOutOfBoundsError, "x.at[ml.ds(c * 128, 128)]",
         "ml.ds(384, 128) is out of bounds for dimension 0 of x (size 300)",
         hint="the window has no element inside x (dimension 0 has size 300; it lies wholly past the end), so"
              " neither a mask nor a TMA copy has anything to move: skip it with a test known while compiling,"
              " `if c * 128 < x.shape[0]:` around the chunk that uses it (in an ml.static_range loop, the trips"
              " past the end; where the chunk still needs what a masked load reads there, all its other=, give it"
              " that in an else: branch, v = ml.full(v's shape, other, dtype)), or loop with a run-time"
              " range(...), whose trips there the mask keeps off")
  x = rand.normal(rand.key(1), (300,), F32)
  np.testing.assert_allclose(chunks_skipped(x, interpret=True), jnp.sum(x), rtol=1e-5)
  _export(chunks_skipped, S((300,), F32))


# ---------------------------------------------------------------- narrow int32 tiles
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 8), ml.cdiv(x.shape[1], 16)))
def narrow_int_tile(x, out):
  i, j = ml.program_id(0), ml.program_id(1)
  r, c = i * 8 + ml.arange(8), j * 16 + ml.arange(16)
  m = (r[:, None] < x.shape[0]) & (c[None, :] < x.shape[1])
  out.at[ml.ds(i * 8, 8), ml.ds(j * 16, 16)].store(
      x.at[ml.ds(i * 8, 8), ml.ds(j * 16, 16)].load(mask=m, other=0) * 2, mask=m)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 8), ml.cdiv(x.shape[1], 16)))
def narrow_int_tile_followed(x, out):
  i, j = ml.program_id(0), ml.program_id(1)
  r, c = i * 8 + ml.arange(8), j * 16 + ml.arange(32)
  m = (r[:, None] < x.shape[0]) & (c[None, :] < x.shape[1]) & (ml.arange(32)[None, :] < 16)
  out.at[ml.ds(i * 8, 8), ml.ds(j * 16, 32)].store(
      x.at[ml.ds(i * 8, 8), ml.ds(j * 16, 32)].load(mask=m, other=0) * 2, mask=m)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (ml.cdiv(x.shape[0], 8),))
def narrow_int_rowmax(x, out):
  i = ml.program_id(0)
  r = i * 8 + ml.arange(8)
  v = x.at[ml.ds(i * 8, 8), ml.ds(0, 16)].load(mask=r[:, None] < x.shape[0], other=0)
  out.at[ml.ds(i * 8, 8)].store(ml.max(v, axis=1), mask=r < x.shape[0])


def test_a_narrow_int_tiles_row_max_compiles():
  builds(narrow_int_rowmax, S((7, 16), I32))     # (now compiled: tiles narrower than a warp take fewer lanes a row, tests/test_narrow_rows.py)


def test_a_narrow_int_tile_under_index_masks_compiles_and_its_hint_still_works():
  # it was MG204 (the masks' broadcasts asked for the row-wise layout); since probe 30c the masks
  # are computed at the tile's shape (frontend/index_grids.py), and the hinted form works too
  x = jnp.arange(7 * 11, dtype=I32).reshape(7, 11)
  np.testing.assert_array_equal(narrow_int_tile(x, interpret=True), x * 2)
  _export(narrow_int_tile, S((7, 11), I32))
  np.testing.assert_array_equal(narrow_int_tile_followed(x, interpret=True), x * 2)
  _export(narrow_int_tile_followed, S((7, 11), I32))
