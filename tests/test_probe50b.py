"""Probe 50b (diagnostics in the user's words). Three classes whose messages or hints named what the compiler made
rather than what the kernel wrote:
- an unmasked register read or write past an array's end through a window the kernel holds in a name
  (`p = x.at[r, ml.arange(128)]`, then `p.load()`), an `ml.arange(...)` written inline in the window, an `ml.ds`
  window read whole (`x.at[r, ml.ds(0, 128)].load()`), or an unchecked block pointer (`ml.load(ptr)`): MG203 said
  `ml.ds(0, 128) is out of bounds` with a hint of `ref.load(mask=..., other=0)`; it now names the offsets where
  the window was made and masks the held name, the window as written, or the block pointer's boundary_check
  (frontend/memory_errors.py window_overrun);
- jnp's, lax's and jax.nn's functions mapped onto ml's, whose axis errors began `ml.cumsum: ...` (calls.py);
- hints that pad a tensor and store its first elements under a mask wrote `out.at[...]` whatever the output was
  called (frontend/ops/out_names.py)."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct
F32 = jnp.float32
XS = S((8, 100), F32)


def _x(shape=(8, 100), seed=0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), F32)


def _exports(kernel, *specs):
  jax.export.export(jax.jit(lambda *a: kernel(*a)), platforms=["cuda"])(*specs)


# ---------------------------------------------------------------- held windows past the end
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def held_read(x, o):
  r = ml.program_id(0)
  p = x.at[r, ml.arange(128)]
  v = ml.load(p)
  o[r] = ml.sum(v)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def held_read_fixed(x, o):                      # its hint, followed
  r = ml.program_id(0)
  p = x.at[r, ml.arange(128)]
  v = p.load(mask=ml.arange(128) < x.shape[1], other=0)
  o[r] = ml.sum(v)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def held_store(x, o):
  r = ml.program_id(0)
  cols = ml.arange(128)
  src = x.at[r, cols]
  dst = o.at[r, cols]
  dst.store(src.load(mask=cols < 100, other=0.0) * 2)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def held_store_fixed(x, o):
  r = ml.program_id(0)
  cols = ml.arange(128)
  src = x.at[r, cols]
  dst = o.at[r, cols]
  dst.store(src.load(mask=cols < 100, other=0.0) * 2, mask=cols < o.shape[1])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 4,))
def held_tile(x, o):
  rows = ml.program_id(0) * 4 + ml.arange(4)
  cols = ml.arange(128)
  tile = x.at[rows[:, None], cols[None, :]]
  o.at[rows[:, None], cols[None, :]].store(tile.load() * 2, mask=cols[None, :] < 100)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 4,))
def held_tile_fixed(x, o):
  rows = ml.program_id(0) * 4 + ml.arange(4)
  cols = ml.arange(128)
  tile = x.at[rows[:, None], cols[None, :]]
  o.at[rows[:, None], cols[None, :]].store(tile.load(mask=cols[None, :] < x.shape[1], other=0) * 2,
                                           mask=cols[None, :] < 100)


def test_a_held_window_past_the_end_names_the_offsets_it_was_made_with():
  expect(held_read, [XS], mg.IndexOutOfBoundsError, "ml.load(p)",
         f"the offsets ml.arange(128) of p (made at line {where(held_read, 'p = x.at')[0]}) run over 0..127 along dimension 1 of x, outside its size"
         " 100: an unmasked register read must stay inside the array",
         hint="mask the offsets to the elements inside: p.load(mask=ml.arange(128) < x.shape[1], other=0)")
  expect(held_store, [XS], mg.IndexOutOfBoundsError, "dst.store(",
         f"the offsets cols of dst (made at line {where(held_store, 'dst = o.at')[0]}) run over 0..127 along dimension 1 of o, outside its size 100:"
         " an unmasked register write must stay inside the array",
         hint="mask the offsets to the elements inside: dst.store(src.load(mask=cols < 100, other=0.0) * 2,"
              " mask=cols < o.shape[1])")
  expect(held_tile, [XS], mg.IndexOutOfBoundsError, "tile.load()",
         f"the offsets cols[None, :] of tile (made at line {where(held_tile, 'tile = x.at')[0]}) run over 0..127 along dimension 1 of x, outside its"
         " size 100: an unmasked register read must stay inside the array",
         hint="mask the offsets to the elements inside: tile.load(mask=cols[None, :] < x.shape[1], other=0)")
  x = _x()
  want = np.asarray(x)
  np.testing.assert_allclose(np.asarray(held_read_fixed(x, interpret=True)), want.sum(1), rtol=1e-5, atol=1e-4)
  np.testing.assert_array_equal(np.asarray(held_store_fixed(x, interpret=True)), want * 2)
  np.testing.assert_array_equal(np.asarray(held_tile_fixed(x, interpret=True)), want * 2)
  for k in (held_read_fixed, held_store_fixed, held_tile_fixed):
    _exports(k, XS)


# ---------------------------------------------------------------- ml.ds windows past the end
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def ds_read(x, o):
  r = ml.program_id(0)
  o[r] = ml.sum(x.at[r, ml.ds(0, 128)].load())


@mg.mgpu_kernel(out_shape=lambda x: S((4, 128), x.dtype))
def held_ds_tile(x, o):
  top = x.at[ml.ds(0, 4), ml.ds(0, 128)]
  o[...] = top.load()


@mg.mgpu_kernel(out_shape=lambda x: S((4, 128), x.dtype))
def held_ds_tile_fixed(x, o):
  top = x.at[ml.ds(0, 4), ml.ds(0, 128)]
  o[...] = top.load(mask=ml.arange(128)[None, :] < x.shape[1], other=0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def inline_offsets(x, o):
  r = ml.program_id(0)
  o[r] = ml.sum(x.at[r, ml.arange(128)].load())


def test_an_ml_ds_window_past_the_end_is_masked_in_the_users_window():
  expect(ds_read, [XS], mg.IndexOutOfBoundsError, "x.at[r, ml.ds(0, 128)].load()",
         "ml.ds(0, 128) is out of bounds for dimension 1 of x (size 100)",
         hint="a register read must stay inside the array: mask it to the elements inside, x.at[r, ml.ds(0, 128)]"
              ".load(mask=ml.arange(128) < x.shape[1], other=0), or copy the window with ml.copy (TMA reads zeros"
              " past the end and drops writes there)")
  expect(held_ds_tile, [XS], mg.IndexOutOfBoundsError, "top.load()",
         "ml.ds(0, 128) is out of bounds for dimension 1 of x (size 100)",
         hint="a register read must stay inside the array: mask it to the elements inside, top.load(mask="
              "ml.arange(128)[None, :] < x.shape[1], other=0), or copy the window with ml.copy (TMA reads zeros past"
              " the end and drops writes there)")
  expect(inline_offsets, [XS], mg.IndexOutOfBoundsError, "x.at[r, ml.arange(128)].load()",
         "the offsets ml.arange(128) run over 0..127 along dimension 1 of x, outside its size 100: an unmasked"
         " register read must stay inside the array",
         hint="mask the offsets to the elements inside: x.at[r, ml.arange(128)].load(mask=ml.arange(128) <"
              " x.shape[1], other=0)")
  x = _x()
  np.testing.assert_array_equal(np.asarray(held_ds_tile_fixed(x, interpret=True)),
                                np.pad(np.asarray(x)[:4], ((0, 0), (0, 28))))
  _exports(held_ds_tile_fixed, XS)


# ---------------------------------------------------------------- block pointers read unchecked
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def row_sums(x, o):
  r = ml.program_id(0)
  ptr = ml.make_block_ptr(x, shape=(8, 100), strides=(100, 1), offsets=(r, 0), block_shape=(1, 128), order=(1, 0))
  o[r] = ml.sum(ml.load(ptr))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def row_sums_fixed(x, o):
  r = ml.program_id(0)
  ptr = ml.make_block_ptr(x, shape=(8, 100), strides=(100, 1), offsets=(r, 0), block_shape=(1, 128), order=(1, 0))
  o[r] = ml.sum(ml.load(ptr, boundary_check=(0, 1), padding_option="zero"))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def row_copy(x, o):
  r = ml.program_id(0)
  src = ml.make_block_ptr(x, shape=(8, 100), strides=(100, 1), offsets=(r, 0), block_shape=(1, 128), order=(1, 0))
  dst = ml.make_block_ptr(o, shape=(8, 100), strides=(100, 1), offsets=(r, 0), block_shape=(1, 128), order=(1, 0))
  ml.store(dst, ml.load(src, boundary_check=(0, 1), padding_option="zero"))


def test_an_unchecked_block_pointer_past_the_end_names_its_boundary_check():
  expect(row_sums, [XS], mg.IndexOutOfBoundsError, "ml.load(ptr)",
         "ml.load(ptr) has no boundary_check: the block pointer's window covers 0..127 along dimension 1 of x,"
         " outside its size 100, and an unmasked register read must stay inside the array",
         hint="check the block pointer's bounds: ml.load(ptr, boundary_check=(0, 1), padding_option=\"zero\") reads"
              " zeros past its shape")
  expect(row_copy, [XS], mg.IndexOutOfBoundsError, "ml.store(dst",
         "ml.store(dst, ...) has no boundary_check: the block pointer's window covers 0..127 along dimension 1 of"
         " o, outside its size 100, and an unmasked register write must stay inside the array",
         hint="check the block pointer's bounds: ml.store(dst, ml.load(src, boundary_check=(0, 1), padding_option="
              "'zero'), boundary_check=(0, 1)) drops what lies past its shape")
  x = _x()
  np.testing.assert_allclose(np.asarray(row_sums_fixed(x, interpret=True)), np.asarray(x).sum(1), rtol=1e-5,
                             atol=1e-4)
  _exports(row_sums_fixed, XS)


# ---------------------------------------------------------------- jnp's functions named as the kernel calls them
@mg.mgpu_kernel(out_shape=lambda x: x)
def scan_rows(x, o):
  o[...] = jnp.cumsum(x[...], axis=2)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def softmax_rows(x, o):
  o[...] = jnp.sum(jax.nn.softmax(x[...], axis=2), axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def roll_columns(x, o):
  o[...] = jnp.roll(x[...], 1, axis=2)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def max_rows(x, o):
  o[...] = jax.lax.cummax(x[...], axis=-3)[:, 0]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def lax_row_max(x, o):
  o[...] = jax.lax.reduce_max(x[...], axes=(2,))


def test_a_jnp_functions_axis_error_names_the_function_called():
  spec = [S((64, 128), F32)]
  axes = "axes run from -2 to 1"
  expect(scan_rows, spec, mg.IndexOutOfBoundsError, "jnp.cumsum(",
         "jnp.cumsum (as ml.cumsum): axis 2 is out of range for a tensor of rank 2", hint=axes)
  expect(softmax_rows, spec, mg.IndexOutOfBoundsError, "jax.nn.softmax(",
         "jax.nn.softmax (as ml.softmax): axis 2 is out of range for a tensor of rank 2", hint=axes)
  expect(roll_columns, spec, mg.KernelTypeError, "jnp.roll(",
         "jnp.roll (as ml.roll): axis must be a static int in [-2, 2) or None, got 2")
  expect(max_rows, spec, mg.IndexOutOfBoundsError, "jax.lax.cummax(",
         "jax.lax.cummax (as ml.cummax): axis -3 is out of range for a tensor of rank 2", hint=axes)
  expect(lax_row_max, spec, mg.IndexOutOfBoundsError, "jax.lax.reduce_max(",
         "jax.lax.reduce_max (as ml.max): axis 2 is out of range for a tensor of rank 2", hint=axes)


# ---------------------------------------------------------------- the output a hint stores into, by its name
@mg.mgpu_kernel(out_shape=lambda x: S((2, 2), jnp.int32))
def square(x, o):
  v = jnp.arange(4) * jnp.arange(4)     # (not a line: a grid of aranges computes since probe 52e)
  o[...] = v.reshape(2, 2)


@mg.mgpu_kernel(out_shape=lambda x: S((2, 2), jnp.int32))
def square_fixed(x, o):
  v = jnp.arange(4) * jnp.arange(4)
  padded = ml.concatenate([v, ml.zeros((124,), v.dtype)]).reshape(64, 2)
  o.at[ml.ds(0, 64)].store(padded, mask=ml.arange(64)[:, None] < 2)


@mg.mgpu_kernel(out_shape=lambda x: (S((4,), x.dtype), S((3, 5), jnp.int32)))
def two_outputs(x, total, grid_ids):
  total[...] = x[ml.ds(0, 4)]
  ml.store(grid_ids, (jnp.arange(15) % 4).reshape(3, 5))


@mg.mgpu_kernel(out_shape=lambda x: (S((4,), x.dtype), S((3, 5), jnp.int32)))
def two_outputs_fixed(x, total, grid_ids):
  total[...] = x[ml.ds(0, 4)]
  vec = jnp.arange(15) % 4
  padded = ml.concatenate([vec, ml.zeros((625,), vec.dtype)]).reshape(128, 5)
  grid_ids.at[ml.ds(0, 128)].store(padded, mask=ml.arange(128)[:, None] < 3)


def test_a_padded_store_hint_names_the_kernels_output():
  spec = [S((256,), F32)]
  # `square`'s v.reshape(2, 2) was this MG204 too: v, read padded to 8 elements, is shaped (2, 2) as a small
  # statistic is since probe 62c, and computes
  expect(two_outputs, spec, mg.LayoutError, "(jnp.arange(15) % 4).reshape(3, 5)",
         "reshape of jnp.arange(15) % 4, a vector of 15 elements, into (3, 5): a register tensor of more than one axis"
         " needs a multiple of 128 elements (one per thread of a warpgroup; a 1-D vector only a multiple of 8)",
         hint="name it, vec = jnp.arange(15) % 4, then pad it to a length that fills the threads: padded ="
              " ml.concatenate([vec, ml.zeros((625,), vec.dtype)]).reshape(128, 5), whose first 3 rows are the"
              " reshape: store them with grid_ids.at[ml.ds(0, 128)].store(padded, mask=ml.arange(128)[:, None] < 3)")
  x = _x((256,))
  for k in (square, square_fixed):
    np.testing.assert_array_equal(np.asarray(k(x, interpret=True)), (np.arange(4) ** 2).reshape(2, 2))
  _exports(square, *spec)
  np.testing.assert_array_equal(np.asarray(two_outputs_fixed(x, interpret=True)[1]),
                                (np.arange(15) % 4).reshape(3, 5))
  for k in (square_fixed, two_outputs_fixed):
    _exports(k, *spec)


# ---------------------------------------------------------------- jnp calls traced as ml.* forms, quoted as written
@mg.mgpu_kernel(out_shape=lambda x: S((4,), F32))
def scatter_four(x, o):
  o[jnp.arange(4)] = x[jnp.arange(4)] * 2


@mg.mgpu_kernel(out_shape=lambda x: S((4,), F32))
def scatter_ramp(x, o):
  o[jnp.arange(4)] = jnp.arange(4) * 1.0


@mg.mgpu_kernel(out_shape=lambda x: S((4,), F32))
def one_hot_counts(x, o):
  o[...] = jax.nn.one_hot(jnp.arange(4), 4).sum(0)


def test_a_jnp_call_traced_as_a_form_is_quoted_as_the_kernel_wrote_it():
  # (scatter_four and scatter_ramp were MG204 quoting `jnp.arange(4)` as written; since probe 71a a run of an
  # arange of 4 reads and stores as a longer one does, so they compute)
  x = jnp.arange(256, dtype=F32) + 1
  np.testing.assert_array_equal(np.asarray(scatter_four(x, interpret=True)), np.array([2.0, 4.0, 6.0, 8.0]))
  np.testing.assert_array_equal(np.asarray(scatter_ramp(x, interpret=True)), np.arange(4.0))
  # (the (4, 4) one-hot tile, quoted so in its MG204 before, is computed padded to (4, 32) since probe 53a)
  np.testing.assert_array_equal(np.asarray(one_hot_counts(jnp.zeros((256,), F32), interpret=True)), np.ones(4))


# ---------------------------------------------------------------- lax.cond's and lax.switch's branches
@mg.mgpu_kernel(out_shape=lambda x: x)
def cond_halves(x, o):
  o[...] = jax.lax.cond(x[0] > 0, lambda: x[...], lambda: x[ml.ds(0, 128)])


@mg.mgpu_kernel(out_shape=lambda x: x)
def switch_dtypes(x, o):
  o[...] = jax.lax.switch(ml.program_id(0), [lambda v: v, lambda v: v * 2, lambda v: v.astype(jnp.int32)], x[...])


def test_lax_cond_and_switch_branches_are_named_as_written():
  spec = [S((256,), F32)]
  expect(cond_halves, spec, mg.KernelTypeError, "jax.lax.cond(",
         "the result is a float32 tensor of shape (256,) from one branch of lax.cond and a float32 tensor of shape"
         " (128,) from the other", hint="make both branches produce the same shape and dtype")
  expect(switch_dtypes, spec, mg.KernelTypeError, "jax.lax.switch(",
         "the result is a float32 tensor of shape (256,) from one branch of lax.switch and an int32 tensor of shape"
         " (256,) from another")


# ---------------------------------------------------------------- static arrays named with their module
@mg.mgpu_kernel(out_shape=lambda x: x)
def ramp(x, o):
  o[...] = x[...] * jnp.linspace(0.0, 1.0, 512)      # (longer than a static table: probe 53i made 256 one)


@mg.mgpu_kernel(out_shape=lambda x: S((4, 4), F32))
def identity(x, o):
  o[...] = np.eye(4, dtype=np.float32) * x[ml.ds(0, 4)]


def test_a_static_array_built_in_a_kernel_names_the_function_as_called():
  spec = [S((512,), F32)]
  expect(ramp, spec, mg.KernelTypeError, "jnp.linspace(",
         "jnp.linspace(...) returned an array of shape (512,) while tracing; a kernel's tensors are built with ml.*"
         " functions")
  expect(identity, spec, mg.KernelTypeError, "np.eye(",
         "np.eye(...) returned an array of shape (4, 4) while tracing; a kernel's tensors are built with ml.*"
         " functions")
