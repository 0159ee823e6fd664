"""Probe 35c (a Triton user porting the tutorials with `from mgpu_dsl import language as tl`): vector
add, softmax, dropout, layer norm, grouped and persistent matmuls, attention, libdevice math and
the shape, reduction and atomic names; the idioms they wrote first, and what the messages said."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as tl
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32

SCALE = tl.constexpr(2.0)      # Triton's global constant: was a raw TypeError ('_Constexpr' object is not callable)


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- tl.constexpr(value)
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (tl.cdiv(x.shape[0], 256),))
def scaled(x, out):
  BLOCK = tl.constexpr(256)
  pid = tl.program_id(0)
  offs = pid * BLOCK + tl.arange(0, BLOCK)
  v = tl.load(x.at[tl.ds(pid * BLOCK, BLOCK)], mask=offs < x.shape[0], other=0.0)
  tl.store(out.at[tl.ds(pid * BLOCK, BLOCK)], v * SCALE, mask=offs < x.shape[0])


def test_constexpr_called_on_a_value_is_that_value():
  """`tl.constexpr(256)` in a kernel was 'tl.constexpr is not callable' (MG003); at module level, a
  raw TypeError."""
  x = rand.normal(rand.key(0), (700,), F32)
  np.testing.assert_array_equal(scaled(x, interpret=True), np.asarray(x) * 2.0)
  assert "mosaic_gpu" in str(_export(scaled, S((700,), F32)))
  assert SCALE == 2.0


# ---------------------------------------------------------------- tl.multiple_of of an index vector
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (tl.cdiv(x.shape[0], 256),))
def hinted_offsets(x, out, BLOCK: tl.constexpr = 256):
  pid = tl.program_id(0)
  start = tl.multiple_of(pid * BLOCK, BLOCK)
  offs = tl.multiple_of(start + tl.arange(0, BLOCK), BLOCK)     # the matmul tutorial's offs_am
  mask = offs < x.shape[0]
  v = tl.load(x.at[tl.ds(start, BLOCK)], mask=mask, other=0.0)
  tl.store(out.at[tl.ds(start, BLOCK)], v + 1.0, mask=mask)


@mg.mgpu_kernel(out_shape=lambda x: x)
def hinted_floats(x, out):
  out[...] = tl.multiple_of(x[...], 2)


def test_multiple_of_an_index_vector_is_the_vector():
  """It was 'an index here must be an integer scalar ... only a read of a GMEM ref takes a tensor of
  indices', with a hint about scatters."""
  x = rand.normal(rand.key(1), (600,), F32)
  np.testing.assert_array_equal(hinted_offsets(x, interpret=True), np.asarray(x) + 1.0)
  assert "mosaic_gpu" in str(_export(hinted_offsets, S((600,), F32)))
  expect(hinted_floats, [S((256,), F32)], mg.KernelTypeError, "tl.multiple_of(x[...], 2)",
         "tl.multiple_of promises integers (a start or offsets), got x[...] of float32",
         hint="drop tl.multiple_of: it changes no value")


# ---------------------------------------------------------------- messages in the kernel's own name
def leaky_relu(x):
  return tl.where(x >= 0, x, 0.01 * x)


_made = {"tl": tl}
exec(compile("def generated_relu(x):\n  return tl.where(x >= 0, x, 0.01 * x)\n", "<generated>", "exec"), _made)
generated_relu = _made["generated_relu"]


@mg.mgpu_kernel(out_shape=lambda x: x)
def undecorated_helper(x, out):
  out[...] = leaky_relu(x[...])


@mg.mgpu_kernel(out_shape=lambda x: x)
def unreadable_helper(x, out):
  out[...] = generated_relu(x[...])


def test_ml_star_reads_in_the_kernels_alias():
  """'kernels call ml.* functions' stayed ml.* where the rest of the hint said tl. (A plain function of the user's
  is an inline helper since probe 52b: one made by exec, whose source cannot be read, keeps the hint.)"""
  x = np.linspace(-2, 2, 256, dtype=np.float32)
  np.testing.assert_allclose(np.asarray(undecorated_helper(x, interpret=True)), np.where(x >= 0, x, 0.01 * x))
  expect(unreadable_helper, [S((256,), F32)], mg.KernelTypeError, "generated_relu(x[...])",
         "generated_relu cannot take a register tensor inside a kernel",
         hint="kernels call tl.* functions on register values; decorate a helper of your own with @tl.inline to"
              " call it here")


# ---------------------------------------------------------------- Triton names with hints that named no way
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def xor_rows(x, out):
  out[...] = tl.xor_sum(x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def xor_rows_folded(x, out):
  v = x[...]
  h = v.shape[1] // 2
  for _ in tl.static_range(7):
    v = v ^ tl.roll(v, -h, axis=1)
    h = h // 2
  out[...] = v[:, 0]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2,), x.dtype))
def split_pairs(x, out):
  a, b = tl.split(tl.reshape(x[...], (x.shape[0] // 2, 2)))
  out[...] = a - b


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2,), x.dtype))
def split_pairs_indexed(x, out):
  v = tl.reshape(x[...], (x.shape[0] // 2, 2))
  out[...] = v[..., 0] - v[..., 1]


def test_xor_sum_and_split_hints_name_the_way_and_it_works():
  """tl.xor_sum said 'check the spelling'; tl.split's hint named windows of a ref (halves), not the
  pairs of a last axis of 2 that Triton's split takes."""
  x = np.asarray(rand.randint(rand.key(2), (64, 128), 0, 1 << 20), np.int32)
  np.testing.assert_array_equal(xor_rows_folded(x, interpret=True), np.bitwise_xor.reduce(x, axis=1))
  # (tl.xor_sum was this hint's UnknownNameError until probe 52d added ml.xor_sum, Triton's)
  np.testing.assert_array_equal(xor_rows(x, interpret=True), np.bitwise_xor.reduce(x, axis=1))
  y = np.asarray(rand.normal(rand.key(3), (256,), F32))
  np.testing.assert_array_equal(split_pairs_indexed(y, interpret=True), y[0::2] - y[1::2])
  # (tl.split was this hint's UnknownNameError until probe 46k added ml.split, Triton's: the pairs of a last axis)
  np.testing.assert_array_equal(split_pairs(y, interpret=True), y[0::2] - y[1::2])


@mg.mgpu_kernel(out_shape=lambda x: x)
def nan_policy(x, out):
  out[...] = tl.minimum(x[...], 0.0, propagate_nan=tl.PropagateNan.ALL)


@mg.mgpu_kernel(out_shape=lambda x: x)
def nan_flag(x, out):
  out[...] = tl.minimum(x[...], 0.0, propagate_nan=True)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.int32))
def first_max(x, out):
  out[...] = tl.argmax(x[...], axis=1, tie_break_left=False)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.int32))
def last_max(x, out):
  v = x[...]
  out[...] = v.shape[1] - 1 - tl.argmax(tl.flip(v, 1), 1)


def test_triton_keywords_of_the_only_behaviour_say_drop_them():
  """tl.PropagateNan said 'check the spelling'; tie_break_left= gave only the signature. Since probe 49h
  tl.PropagateNan exists and tl.minimum takes it (NaN propagates, which both policies allow)."""
  x = np.array(rand.normal(rand.key(3), (256,), F32))
  x[::7] = np.nan
  np.testing.assert_array_equal(np.asarray(nan_policy(x, interpret=True)), np.minimum(x, 0.0))
  expect(nan_flag, [S((256,), F32)], mg.KernelTypeError, "tl.minimum(",
         "tl.minimum's propagate_nan must be tl.PropagateNan.NONE or .ALL, got True",
         hint="drop propagate_nan= (NaN always propagates, Triton's PropagateNan.ALL)")
  expect(first_max, [S((64, 128), F32)], mg.KernelTypeError, "tl.argmax(",
         "tl.argmax's tie_break_left= must be True, got False: the index here is the first one",
         hint="for the last index of the extreme value, take the first of the flipped axis: x[...].shape[1] - 1"
              " - tl.argmax(tl.flip(x[...], 1), 1)")
  x = np.round(np.asarray(rand.normal(rand.key(4), (64, 128), F32)))    # many ties
  np.testing.assert_array_equal(last_max(x, interpret=True), 127 - np.argmax(x[:, ::-1], axis=1))


# ---------------------------------------------------------------- the old value of an atomic, under tl
@mg.mgpu_kernel(out_shape=lambda x: S((2,), jnp.int32), grid=(4,))
def last_program(x, counter):
  count = tl.atomic_add(counter.at[0], 1)
  if count == tl.num_programs(0) - 1:          # Triton's "the last program finishes": None == 3 was False
    tl.atomic_add(counter.at[1], 5)


@mg.mgpu_kernel(out_shape=lambda x: S((2,), jnp.int32), grid=(4,))
def last_program_inline(x, counter):
  if tl.atomic_add(counter.at[0], 1) == 3:
    tl.atomic_add(counter.at[1], 5)


def test_the_old_value_of_a_tl_atomic_is_the_last_programs_ticket():
  """Under `tl` the check that names a call returning nothing looked for `ml.` in the text: the
  comparison with None was False while tracing, and the branch silently vanished (the kernel compiled,
  ran, and never did the last program's work). Since probe 48c the old value is returned: the last
  program does it."""
  for k in (last_program, last_program_inline):
    np.testing.assert_array_equal(k(np.zeros(256, np.float32), interpret=True), [4, 5])


# ---------------------------------------------------------------- hints that read the call as ml.* only
@mg.mgpu_kernel(out_shape=lambda x: x)
def half_written(x, o):
  offs = tl.arange(0, 256)
  tl.store(o.at[:], x[...] * 2, mask=offs < 100)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.int32), block=256)
def column_argmax(x, o):
  a = tl.smem((128, 64), tl.float16)
  a[...] = x[...]
  acc = tl.dot(a, a.T)
  o[...] = tl.argmax(acc, axis=0)


def test_tl_calls_are_read_as_the_language_in_hints():
  """tl.store(ref, value, mask=) was read as ref.store(value): the hint selected the ref
  (tl.where(offs < 100, o.at[:], 0)); tl.argmax across split rows was hinted as tl.max."""
  expect(half_written, [S((256,), F32)], mg.UncoveredOutputError, "tl.store(",
         "o[100:256] is never written: the masked store into o (line 5) leaves the elements where its mask is false"
         " unwritten, and nothing else writes them, so 156 of 256 elements of o would stay uninitialised"
         .replace("line 5", f"line {half_written.fn.__code__.co_firstlineno + 3}"),
         hint="write every element of o: put the mask into the value, tl.where(offs < 100, x[...] * 2, 0), and store"
              " that unmasked, o.at[:][...] = ..., where the window lies inside o; a window running past o's end keeps"
              " a mask of o's own extent only, o.at[:].store(..., mask=offs < o.shape[0]) with offs the window's"
              " positions")
  # tl.argmax across split rows was MG204 (its hint, tl.argmax(acc.T, axis=1), read as the language); since
  # probe 62a the warpgroups combine their parts
  x = np.random.default_rng(3).integers(-3, 4, (128, 64)).astype(np.float16)
  acc = x.astype(np.float32) @ x.astype(np.float32).T
  np.testing.assert_array_equal(np.asarray(column_argmax(jnp.asarray(x), interpret=True)), acc.argmax(0))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 256,))
def padded_window(x, o):
  i = tl.program_id(0)
  o.at[tl.ds(i * 256, 256)][...] = jnp.pad(x.at[tl.ds(i * 256, 256)][...], 300, mode="reflect")[:256]


def test_a_stencil_hint_reads_a_tl_ds_window():
  """The hint wrote the placeholders s and n where the window was written with tl.ds (only ml.ds was read).
  (jnp.pad's zeros of a vector compute since probe 51g, its reflection since probe 56f; one wider than the vector
  is still this MG003.)"""
  expect(padded_window, [S((1024,), F32)], mg.KernelTypeError, "jnp.pad(",
         "jnp.pad of a register tensor pads with one constant, or by mode 'edge', 'reflect', 'symmetric' or 'wrap',"
         " along any axis by static widths: this call's width, wider than the axis it reflects or wraps, is not"
         " computed in a kernel",
         hint="read the neighbours from memory at shifted windows, masked at the edges: with j = (i * 256) - 1 +"
              " tl.arange(256), x.at[tl.ds((i * 256) - 1, 256)].load(mask=(j >= 0) & (j < x.shape[0]), other=0.0)"
              " is the window at (i * 256) shifted by one, 0 outside x (jnp.pad's zeros); for jnp.roll's"
              " wrap-around, gather at wrapped indices, x[((i * 256) + tl.arange(256) - 1) % x.shape[0]]; jnp.pad's"
              " mode='edge' gathers at clamped indices, x[tl.clip((i * 256) + tl.arange(256) - 1, 0, x.shape[0] - 1)],"
              " and mode='reflect' at reflected ones, j = (i * 256) + tl.arange(256) - 1 then x[tl.where(j < 0, -j, j)]"
              " (and 2 * (x.shape[0] - 1) - j past the end); a register tile v shifts by one column with its first"
              " column repeated as tl.concatenate([v[:, :1], v[:, :-1]], axis=1), reflected as"
              " tl.concatenate([v[:, 1:2], v[:, :-1]], axis=1)")


# ---------------------------------------------------------------- Triton's parameter order
@mg.mgpu_kernel(out_shape=lambda x, *a: x, grid=lambda x, *a: (tl.cdiv(x.shape[0], 1024),))
def seeded_dropout(x_ptr, output_ptr, p, seed, BLOCK_SIZE: tl.constexpr = 1024):
  pid = tl.program_id(axis=0)
  offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
  mask = offsets < x_ptr.shape[0]
  x = tl.load(x_ptr.at[tl.ds(pid * BLOCK_SIZE, BLOCK_SIZE)], mask=mask)
  output = tl.where(tl.rand(seed, offsets) > p, x / (1 - p), 0.0)
  tl.store(output_ptr.at[tl.ds(pid * BLOCK_SIZE, BLOCK_SIZE)], output, mask=mask)


@mg.mgpu_kernel(out_shape=lambda x, *a: x, grid=lambda x, *a: (tl.cdiv(x.shape[0], 1024),))
def seeded_dropout_reordered(x_ptr, p: tl.scalar, seed: tl.scalar, output_ptr, BLOCK_SIZE: tl.constexpr = 1024):
  pid = tl.program_id(axis=0)
  offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
  mask = offsets < x_ptr.shape[0]
  x = tl.load(x_ptr.at[tl.ds(pid * BLOCK_SIZE, BLOCK_SIZE)], mask=mask)
  output = tl.where(tl.rand(seed, offsets) > p, x / (1 - p), 0.0)
  tl.store(output_ptr.at[tl.ds(pid * BLOCK_SIZE, BLOCK_SIZE)], output, mask=mask)


def test_an_output_parameter_among_the_inputs_names_the_order():
  """The tutorial's `def _seeded_dropout(x_ptr, output_ptr, p, seed)` called with (x, p, seed) said only
  that output_ptr was a float, to be passed as a 0-d array or annotated tl.scalar."""
  x = rand.normal(rand.key(5), (3000,), F32)
  with pytest.raises(mg.SignatureError) as info:
    seeded_dropout(x, 0.5, 123, interpret=True)
  e = info.value
  assert e.message == "_seeded_dropout: input 1 (output_ptr) is float 0.5; kernel inputs are arrays".replace(
      "_seeded_dropout", "seeded_dropout")
  assert e.hint.startswith("output_ptr is named as an output, but a kernel's parameters are its inputs, then its"
                           " outputs (the ones out_shape describes, returned rather than passed): def"
                           " seeded_dropout(x_ptr, p, seed, output_ptr, ...), called with the inputs only.")
  y = np.asarray(seeded_dropout_reordered(x, 0.5, 123, interpret=True))
  kept = y != 0
  np.testing.assert_allclose(y[kept], 2 * np.asarray(x)[kept], rtol=1e-6)
  assert 0.4 < kept.mean() < 0.6


# ---------------------------------------------------------------- Triton's tensor methods and shape keywords
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1], x.shape[0]), x.dtype))
def method_trans(x, o):
  o[...] = x[...].trans()


@mg.mgpu_kernel(out_shape=lambda x: S((8, x.shape[0]), x.dtype))
def method_broadcast(x, o):
  o[...] = x[...][None, :].broadcast_to(8, 256)


@mg.mgpu_kernel(out_shape=lambda x: S((8, x.shape[0]), x.dtype))
def hinted_broadcast(x, o):
  o[...] = tl.broadcast_to(x[...][None, :], (8, 256))


@mg.mgpu_kernel(out_shape=lambda x: S((8, x.shape[0]), x.dtype))
def pair_broadcast(x, o):
  a, b = tl.broadcast(x[...][None, :], tl.zeros((8, 1), tl.float32))
  o[...] = a + b


@mg.mgpu_kernel(out_shape=lambda x: S((128, 64), x.dtype))
def reorderable(x, o):
  o[...] = tl.reshape(x[...], (128, 64), can_reorder=True)


def test_triton_tensor_methods_and_shape_keywords_name_the_way():
  """x.trans() and x.broadcast_to(m, n) listed every method a tensor has; tl.broadcast said 'did you mean
  tl.broadcast_to?'; can_reorder= gave only the signature (and since probe 58d it is taken: the row-major order)."""
  xt = np.asarray(rand.normal(rand.key(5), (64, 128), F32))       # (x.trans() is tl.trans(x) since probe 51e)
  np.testing.assert_array_equal(method_trans(xt, interpret=True), xt.T)
  expect(method_broadcast, [S((256,), F32)], mg.KernelTypeError, "x[...][None, :].broadcast_to",
         "a register tensor has no attribute 'broadcast_to'", hint="write tl.broadcast_to(x[...][None, :], (8, 256))")
  x = np.asarray(rand.normal(rand.key(6), (256,), F32))
  np.testing.assert_array_equal(hinted_broadcast(x, interpret=True), np.broadcast_to(x[None], (8, 256)))
  np.testing.assert_array_equal(pair_broadcast(x, interpret=True), np.broadcast_to(x[None], (8, 256)))   # (tl.broadcast
                                                                        # computes since session 60: MG002 before)
  xr = np.asarray(rand.normal(rand.key(7), (64, 128), F32))     # (Triton's keyword is taken since probe 58d)
  np.testing.assert_array_equal(reorderable(xr, interpret=True), xr.reshape(128, 64))


# ---------------------------------------------------------------- Triton's scalar-pointer load and store with a mask
@mg.mgpu_kernel(out_shape=lambda x, m: S((4,), x.dtype), grid=(4,))
def row_means_guarded(x, m, out):
  r = tl.program_id(0)
  mean = tl.load(m.at[r + 5], mask=r + 5 < m.shape[0], other=0.0)      # rows 8 and 9 are past m's end
  v = tl.load(x.at[r + 5, 3], mask=r + 5 < x.shape[0], other=-1.0)
  tl.store(out.at[r], v - mean, mask=r < 4)
  tl.store(out.at[r + 4], 0.0, mask=r + 4 < 4)                          # never true: nothing written


@mg.mgpu_kernel(out_shape=lambda x, m: S((4,), x.dtype), grid=(4,))
def element_with_tensor_mask(x, m, out):
  r = tl.program_id(0)
  out[r] = tl.load(m.at[r], mask=m[...] > 0, other=0.0)


def _guarded_reference(x, m):
  rows = np.arange(4) + 5
  v = np.where(rows < 8, x[np.minimum(rows, 7), 3], -1.0)
  mean = np.where(rows < 8, m[np.minimum(rows, 7)], 0.0)
  return (v - mean).astype(np.float32)


def test_a_masked_load_or_store_of_one_element_is_its_scalar_under_the_condition():
  """tl.load(x.at[i], mask=i < n, other=0.0), Triton's `tl.load(ptr + i, mask=i < n)`, was MG003 ('needs a
  window of elements') with the hint 'guard a single element with an if'."""
  x = np.asarray(rand.normal(rand.key(7), (8, 128), F32))
  m = np.asarray(rand.normal(rand.key(8), (8,), F32))
  np.testing.assert_array_equal(row_means_guarded(x, m, interpret=True), _guarded_reference(x, m))
  assert "mosaic_gpu" in str(_export(row_means_guarded, S((8, 128), F32), S((8,), F32)))
  expect(element_with_tensor_mask, [S((8, 128), F32), S((8,), F32)], mg.KernelTypeError, "tl.load(",
         "tl.load of the single element m.at[r] takes a scalar condition as its mask (mask=i < n), got a register"
         " tensor",
         hint="pass a condition on scalars (mask=i < n), or guard the element with an if on one: s = 0.0, then if"
              " i < n: s = m[r]")


@pytest.mark.gpu
def test_gpu_a_masked_load_or_store_of_one_element():
  x = np.asarray(rand.normal(rand.key(7), (8, 128), F32))
  m = np.asarray(rand.normal(rand.key(8), (8,), F32))
  np.testing.assert_array_equal(np.asarray(row_means_guarded(x, m)), _guarded_reference(x, m))


# ---------------------------------------------------------------- dtype identity
@mg.mgpu_kernel(out_shape=lambda x: x)
def by_dtype_identity(x, o):
  if x.dtype is tl.float32:                     # Triton's dtypes are singletons: True there
    o[...] = x[...] * 2
  elif x.dtype is not jnp.float16:
    o[...] = x[...] * 3
  else:
    o[...] = x[...]


def test_dtype_is_a_dtype_compares_the_dtypes():
  """`x.dtype is tl.float32` was False while tracing (numpy's dtype object against ml's), so a ported
  Triton kernel silently took the other branch."""
  x = np.asarray(rand.normal(rand.key(9), (256,), F32))
  np.testing.assert_array_equal(by_dtype_identity(x, interpret=True), x * 2)
  b = x.astype(jnp.bfloat16)
  np.testing.assert_array_equal(np.asarray(by_dtype_identity(b, interpret=True), np.float32),
                                np.asarray(b * 3, np.float32))
  h = x.astype(np.float16)
  np.testing.assert_array_equal(by_dtype_identity(h, interpret=True), h)


# ---------------------------------------------------------------- Triton's 2-D pointer block written as x.at[r[:, None], c[None, :]]
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def pointer_block(x, o):
  pid = tl.program_id(0)
  r = pid * 64 + tl.arange(0, 64)
  c = tl.arange(0, 128)
  v = tl.load(x.at[r[:, None], c[None, :]], mask=r[:, None] < 100, other=0.0)
  o.at[tl.ds(pid * 64, 64), :][...] = v


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def pointer_block_window(x, o):
  pid = tl.program_id(0)
  r = pid * 64 + tl.arange(0, 64)
  o.at[tl.ds(pid * 64, 64), :][...] = x.at[tl.ds(pid * 64, 64), tl.ds(0, 128)].load(mask=r[:, None] < 100, other=0.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def pointer_block_gather(x, o):
  pid = tl.program_id(0)
  r = pid * 64 + tl.arange(0, 64)
  c = tl.arange(0, 128)
  o.at[tl.ds(pid * 64, 64), :][...] = tl.where(r[:, None] < 100, x[r[:, None], c[None, :]], 0.0)


def test_a_pointer_block_load_reads_the_window_it_covers():
  """Triton's 2-D block of pointers, tl.load(x.at[r[:, None], c[None, :]], mask=..., other=0.0), was an
  error whose hint wrote the window; it now reads that window (twenty-ninth session), as the window and the
  gather written by hand do."""
  x = np.asarray(rand.normal(rand.key(10), (128, 128), F32))
  want = np.where(np.arange(128)[:, None] < 100, x, 0.0)
  np.testing.assert_array_equal(pointer_block(x, interpret=True), want)
  np.testing.assert_array_equal(pointer_block_window(x, interpret=True), want)
  np.testing.assert_array_equal(pointer_block_gather(x, interpret=True), want)


# ---------------------------------------------------------------- kernel[grid](...) inside another lambda
@mg.mgpu_kernel(out_shape=lambda x, y, **kw: x, grid=lambda x, y, BLOCK_SIZE: (tl.cdiv(x.shape[0], BLOCK_SIZE),))
def add_kernel(x_ptr, y_ptr, output_ptr, BLOCK_SIZE: tl.constexpr):
  pid = tl.program_id(axis=0)
  offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
  mask = offsets < x_ptr.shape[0]
  x = tl.load(x_ptr.at[tl.ds(pid * BLOCK_SIZE, BLOCK_SIZE)], mask=mask)
  y = tl.load(y_ptr.at[tl.ds(pid * BLOCK_SIZE, BLOCK_SIZE)], mask=mask)
  tl.store(output_ptr.at[tl.ds(pid * BLOCK_SIZE, BLOCK_SIZE)], x + y, mask=mask)


def _bench(fn):
  return fn()


def test_a_launch_inside_a_benchmark_lambda_rewrites_the_grid_not_the_lambda():
  """`bench(lambda: add_kernel[grid](x, y, out))` (triton.testing.do_bench's habit)
  had its hint rewrite the benchmark's lambda as the grid: grid=lambda x_ptr, y_ptr: add_kernel[grid]."""
  x = jnp.ones((3000,), F32)
  out = jnp.empty_like(x)
  grid = lambda meta: (tl.cdiv(3000, meta["BLOCK_SIZE"]),)
  with pytest.raises(mg.SignatureError) as info:
    _bench(
        lambda: add_kernel[grid](x, x, out))
  assert info.value.hint == ("declare it on the decorator, @mg.mgpu_kernel(out_shape=..., grid=lambda x_ptr, y_ptr,"
                             " BLOCK_SIZE: (tl.cdiv(3000, BLOCK_SIZE),)), and call add_kernel(inputs...): outputs"
                             " are returned, not passed")


@mg.mgpu_kernel(out_shape=lambda x: S((4,), jnp.float32))
def float8_elements(x, o):
  for i in range(4):
    o[i] = tl.load(x.at[i + 254], mask=i + 254 < 256, other=1.0).astype(tl.float32)


@mg.mgpu_kernel(out_shape=lambda x: S((2,), x.dtype))
def static_conditions(x, o):
  o[0] = tl.load(x.at[3], mask=False, other=2.0)
  o[1] = tl.load(x.at[3], mask=True, other=2.0)


def test_a_masked_element_of_float8_or_under_a_static_condition():
  """float8 said 'tl.where with the float8_e4m3fn scalar ...' (a tl.where the user never wrote); mask=False
  said tl.where's condition is a Python bool."""
  x = rand.normal(rand.key(11), (256,), jnp.float8_e4m3fn)
  want = np.array([x[254], x[255], 1.0, 1.0], np.float32)
  np.testing.assert_array_equal(float8_elements(x, interpret=True), want)
  assert "mosaic_gpu" in str(_export(float8_elements, S((256,), jnp.float8_e4m3fn)))
  y = np.asarray(rand.normal(rand.key(12), (256,), F32))
  np.testing.assert_array_equal(static_conditions(y, interpret=True), np.array([2.0, y[3]], np.float32))


@pytest.mark.gpu
def test_gpu_a_masked_element_of_float8():
  x = rand.normal(rand.key(11), (256,), jnp.float8_e4m3fn)
  np.testing.assert_array_equal(np.asarray(float8_elements(x)), np.asarray(float8_elements(x, interpret=True)))


# ---------------------------------------------------------------- an unrolled masked element past the end
@mg.mgpu_kernel(out_shape=lambda x: S((4,), x.dtype))
def unrolled_tail(x, o):
  for i in tl.static_range(4):
    o[i] = tl.load(x.at[i + 254], mask=i + 254 < 256, other=0.0)


@mg.mgpu_kernel(out_shape=lambda x: S((4,), x.dtype))
def unrolled_tail_skipped(x, o):
  for i in tl.static_range(4):
    if i + 254 < x.shape[0]:
      o[i] = tl.load(x.at[i + 254], mask=i + 254 < 256, other=0.0)
    else:
      o[i] = 0.0


def test_an_unrolled_element_past_the_end_names_the_test_that_skips_it():
  """The hint listed the indices that exist and counted from the end; under Triton's mask the user needs
  to know no mask helps a static index (the element does not exist) and how to skip the trip."""
  expect(unrolled_tail, [S((256,), F32)], mg.IndexOutOfBoundsError, "x.at[i + 254]",
         "index 256 is out of bounds for dimension 0 of x (size 256)",
         hint="dimension 0 of x has size 256: an index there is in -256..255 (a negative one counts from the end:"
              " x.at[255] or x.at[-1] is the last); i + 254 is 256 here, known while tracing (an unrolled trip), and"
              " the element does not exist, so no mask helps: skip it with a test known then, if i + 254 <"
              " x.shape[0]:, or loop with a run-time range, whose masked accesses past the end are never made")
  x = np.asarray(rand.normal(rand.key(13), (256,), F32))
  np.testing.assert_array_equal(unrolled_tail_skipped(x, interpret=True), np.array([x[254], x[255], 0, 0], np.float32))


# ---------------------------------------------------------------- q @ k.T with k in registers (the attention tutorial)
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[0]), F32))
def scores_from_registers(x, o):
  q = x[...]
  k = x[...]
  o[...] = tl.dot(q, k.T)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[0]), F32))
def scores_hint_followed(x, o):
  q = x[...]
  k = x[...]
  k_s = tl.smem((64, 64), jnp.float16)
  k_s[...] = k
  o[...] = tl.dot(q, k_s.T)


def test_a_register_b_operand_is_staged_as_the_hint_wrote_it():
  """The hint said 'store b's tile in SMEM: b_s[...] = b_value', with no buffer allocated and no word of
  the transposed view that q @ k.T needs; since probe 47g the compiler stages it so (Triton's tl.dot)."""
  x = np.asarray(rand.normal(rand.key(14), (64, 64), F32)).astype(np.float16)
  xf = x.astype(np.float32)
  np.testing.assert_allclose(scores_hint_followed(x, interpret=True), xf @ xf.T, rtol=1e-5, atol=1e-4)
  np.testing.assert_allclose(scores_from_registers(x, interpret=True), xf @ xf.T, rtol=1e-5, atol=1e-4)
  assert "mosaic_gpu" in str(_export(scores_from_registers, S((64, 64), jnp.float16)))


# ---------------------------------------------------------------- tl.interleave of vectors
@mg.mgpu_kernel(out_shape=lambda x: S((2 * x.shape[0],), x.dtype))
def interleaved(x, o):
  v = x[...]
  o[...] = tl.interleave(v, v * 2)


@mg.mgpu_kernel(out_shape=lambda x: S((2 * x.shape[0],), x.dtype))
def interleaved_by_hint(x, o):
  v = x[...]
  o[...] = tl.concatenate([v[..., None], (v * 2)[..., None]], axis=-1).reshape(2 * 256)


def test_interleave_hint_covers_vectors():
  """The hint wrote .reshape(m, 2 * n) only, for (m, n) tensors: a vector's interleave is .reshape(2 * n)."""
  x = np.asarray(rand.normal(rand.key(15), (256,), F32))
  np.testing.assert_array_equal(interleaved_by_hint(x, interpret=True), np.stack([x, 2 * x], -1).reshape(-1))
  # (tl.interleave was this hint's UnknownNameError until probe 46k added it)
  np.testing.assert_array_equal(interleaved(x, interpret=True), np.stack([x, 2 * x], -1).reshape(-1))
