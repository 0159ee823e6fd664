"""Probe 35a (known leftovers, fixed as classes): Python's int and float as dtypes with jax_enable_x64,
constexpr keywords through jax.vmap, weak typing through shape ops, outputs only atomics update with
no programs (or in loops of no trips), a 64-row ml.dot with several warpgroups, narrow tiles read padded."""
import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, F16, I32 = jnp.float32, jnp.float16, jnp.int32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _line_of(fn, text):
  lines, first = inspect.getsourcelines(fn)
  return next(first + n for n, line in enumerate(lines) if text in line)


# ---------------------------------------------------------------- int and float as dtypes under x64
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int64 if jax.config.jax_enable_x64 else I32))
def to_int(x, out):
  out[...] = x[...].astype(int)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int64 if jax.config.jax_enable_x64 else I32))
def int_zeros(x, out):
  out[...] = ml.zeros(x.shape, int) + x[...].astype(int)


@mg.mgpu_kernel(out_shape=lambda x: x)
def to_float(x, out):
  out[...] = x[...].astype(float).astype(jnp.float32)


def test_int_as_a_dtype_is_int64_with_x64_as_in_jnp():
  """x.astype(int) was int32 with jax_enable_x64 on, where jnp's is int64: storing it into the int64
  output jnp's dtype asks for was an MG102, and ml.zeros(shape, int) met int64 values as MG104."""
  x = jnp.arange(128, dtype=F32) * 1.5 - 40
  with jax.enable_x64(True):
    for k in (to_int, int_zeros):
      got = k(x, interpret=True)
      assert got.dtype == jnp.int64 == x.astype(int).dtype
      np.testing.assert_array_equal(got, x.astype(int))
      _export(k, S((128,), F32))
  got = to_int(x, interpret=True)          # the same kernel without x64: int32, as jnp's (another compile)
  assert got.dtype == I32 == x.astype(int).dtype
  np.testing.assert_array_equal(got, x.astype(int))


def test_float_as_a_dtype_with_x64_is_float64_which_kernels_lack():
  """x.astype(float) with x64 on was float32 silently, where jnp's is float64."""
  with jax.enable_x64(True):
    expect(to_float, [S((128,), F32)], mg.UnsupportedDtypeError, "x[...].astype(float)",
           "the conversion (.astype / ml.cast): float is float64 with jax_enable_x64 on (as in jnp), and kernels"
           " have no float64", hint="name the dtype: jnp.float32 (what float is without jax_enable_x64; the GPU's"
           " float64 units are a fraction of its float32 ones)")
  x = jnp.linspace(-2, 2, 128, dtype=F32)
  np.testing.assert_array_equal(to_float(x, interpret=True), x)        # without x64: float32, as jnp's


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int64))
def cumsum_int(x, out):
  out[...] = ml.cumsum(x[...], dtype=int)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int64))
def cumsum_int64(x, out):
  out[...] = ml.cumsum(x[...].astype(jnp.int64))


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int64))
def cumsum_widened(x, out):
  out[...] = ml.cumsum(x[...], dtype=jnp.int32).astype(jnp.int64)


def test_an_int64_scan_computes():
  """ml.cumsum(x, dtype=int) with x64 asks for int64 (jnp's): it hinted scanning in int32 (MG106) until probe 51b,
  which scans 64-bit integers by ml.associative_scan's steps."""
  x = jnp.arange(128, dtype=I32)
  with jax.enable_x64(True):
    for kernel in (cumsum_int, cumsum_int64):
      got = kernel(x, interpret=True)
      assert got.dtype == jnp.int64
      np.testing.assert_array_equal(got, jnp.cumsum(x, dtype=int))
      _export(kernel, S((128,), I32))
    got = cumsum_widened(x, interpret=True)                  # the hint, followed
    assert got.dtype == jnp.int64
    np.testing.assert_array_equal(got, jnp.cumsum(x, dtype=int))
    _export(cumsum_widened, S((128,), I32))


# ---------------------------------------------------------------- constexpr keywords through jax.vmap
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x, block_rows: (x.shape[0] // block_rows,))
def scale(x, out, *, block_rows: ml.constexpr, factor: ml.constexpr = 2.0):
  i = ml.program_id(0)
  buf = ml.smem((block_rows, x.shape[1]))
  ml.copy(x.at[ml.ds(i * block_rows, block_rows)], buf)
  buf[...] = buf[...] * factor
  ml.copy(buf, out.at[ml.ds(i * block_rows, block_rows)])


def _vmapped(x):
  return jax.vmap(scale)(x, block_rows=128, factor=3.0)


def test_a_constexpr_keyword_through_vmap_is_a_signature_error_at_the_call():
  """jax.vmap maps keyword arguments along axis 0: it raised JAX's raw ValueError ('vmap was requested
  to map its argument along axis 0, which implies that its rank should be at least 1') about 128."""
  x = jnp.arange(4 * 256 * 64, dtype=F32).reshape(4, 256, 64)
  with pytest.raises(mg.KernelError) as info:
    _vmapped(x)
  e = info.value
  assert type(e) is mg.SignatureError and e.code == "MG006"
  assert (e.filename, e.lineno) == (__file__, _line_of(_vmapped, "jax.vmap(scale)"))
  assert e.message == ("jax.vmap maps every keyword argument along axis 0 (its in_axes name positional"
                       " arguments only), so scale's keyword arguments block_rows=128, factor=3.0 cannot be passed"
                       " through it")
  assert e.hint.startswith("bind them before mapping: jax.vmap(functools.partial(scale, block_rows=128,"
                           " factor=3.0))(x), or map a function that calls the kernel:")
  # the hint, followed (with interpret mode, as this machine has no GPU)
  got = jax.vmap(functools.partial(scale, block_rows=128, factor=3.0, interpret=True))(x)
  np.testing.assert_array_equal(got, x * 3.0)
  got = jax.vmap(lambda x: scale(x, block_rows=128, factor=3.0, interpret=True))(x)
  np.testing.assert_array_equal(got, x * 3.0)
  np.testing.assert_array_equal(jax.jit(scale, static_argnames=("block_rows", "interpret"))(x[0], block_rows=128, interpret=True),
                                x[0] * 2)                     # no vmap: keywords bind as before


def _vmapped_partial(x):
  return jax.vmap(functools.partial(scale, factor=3.0))(x, block_rows=128)


def test_a_constexpr_keyword_through_vmap_of_a_partial_names_the_kernel():
  """inspect.signature of a functools.partial of the kernel made the message say 'the kernel's'."""
  with pytest.raises(mg.SignatureError) as info:
    _vmapped_partial(jnp.ones((4, 256, 64), F32))
  e = info.value
  assert (e.filename, e.lineno) == (__file__, _line_of(_vmapped_partial, "jax.vmap(functools"))
  assert "so scale's keyword argument block_rows=128 cannot be passed through it" in e.message
  assert e.hint.startswith("bind it before mapping: jax.vmap(functools.partial(scale, block_rows=128))(x)")


# ---------------------------------------------------------------- weak types through shape ops
@mg.mgpu_kernel(out_shape=lambda x, y: y)
def weak_reshaped(x, y, out):
  w = ml.where(x[...] > 0, 1.0, 0.5).reshape(8, 16).reshape(128)     # weak, as jnp.where of Python floats
  out[...] = y[...] * w


@mg.mgpu_kernel(out_shape=lambda x, y: S((128, 64), F16))
def weak_expanded(x, y, out):
  w = ml.where(x[...] > 0, 1.0, 0.5)
  out[...] = ml.broadcast_to(y[...][:, None], (128, 64)) * w[:, None]


@mg.mgpu_kernel(out_shape=lambda x, y: S((128, 64), F16))
def weak_transposed(x, y, out):
  m = ml.where(ml.arange(64)[:, None] < ml.arange(128)[None, :], 2.0, 0.5)      # (64, 128)
  out[...] = ml.full((128, 64), 3.0, F16) * m.T * y[...][:, None]


@mg.mgpu_kernel(out_shape=lambda x, y: y)
def weak_int_times_float(x, y, out):
  t = (ml.arange(128) * 0.5).reshape(8, 16)        # int32 with a Python float: weak float32, as jnp's
  out[...] = y[...] * ml.concatenate([t[:4], t[4:]]).reshape(128)


def test_weak_values_stay_weak_through_shape_ops_as_in_jnp():
  """A Python-number-typed (weak) value lost its weak type at reshape, [:, None], .T, concatenate, and
  int * 0.5 was strongly float32: each met a float16 tensor as MG104, where jnp computes in float16."""
  x, y = jnp.linspace(-1, 1, 128, dtype=F32), jnp.linspace(0, 3, 128, dtype=F16)
  a = jnp.arange(128)
  refs = {weak_reshaped: y * jnp.where(x > 0, 1.0, 0.5).reshape(8, 16).reshape(128),
          weak_expanded: jnp.broadcast_to(y[:, None], (128, 64)) * jnp.where(x > 0, 1.0, 0.5)[:, None],
          weak_transposed: jnp.full((128, 64), 3.0, F16)
          * jnp.where(jnp.arange(64)[:, None] < jnp.arange(128)[None, :], 2.0, 0.5).T * y[:, None],
          weak_int_times_float: y * jnp.concatenate([(a * 0.5).reshape(8, 16)[:4], (a * 0.5).reshape(8, 16)[4:]]).reshape(128)}
  for k, ref in refs.items():
    got = k(x, y, interpret=True)
    assert got.dtype == ref.dtype == F16, k.__name__
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(ref, np.float32))
    _export(k, S((128,), F32), S((128,), F16))


@mg.mgpu_kernel(out_shape=lambda x, y: y)
def strong_reshaped(x, y, out):
  w = (x[...] * 2).reshape(8, 16).reshape(128)      # x is float32: strong, as in jnp
  out[...] = y[...] * w


def test_a_strong_value_through_a_reshape_still_needs_a_conversion():
  # (float16 times float32 is float32, as jnp's since probe 47b: the store into float16 is the error)
  expect(strong_reshaped, [S((128,), F32), S((128,), F16)], mg.StoreDtypeError, "out[...] = y[...] * w",
         "cannot store y[...] * w (float32) into out (GMEM, float16): no implicit conversion")


@pytest.mark.gpu
def test_gpu_weak_values_through_shape_ops():
  x, y = jnp.linspace(-1, 1, 128, dtype=F32), jnp.linspace(0, 3, 128, dtype=F16)
  for k in (weak_reshaped, weak_expanded, weak_transposed, weak_int_times_float):
    np.testing.assert_array_equal(np.asarray(k(x, y), np.float32), np.asarray(k(x, y, interpret=True), np.float32))


# ---------------------------------------------------------------- outputs only atomics update, no programs
@mg.mgpu_kernel(out_shape=lambda src, dst, x, *, n: S((n, x.shape[1]), x.dtype),
                grid=lambda src, dst, x, *, n: (ml.cdiv(src.shape[0], 128),))
def scatter_edges(src, dst, x, out, *, n: ml.constexpr):
  i = ml.program_id(0)
  ok = i * 128 + ml.arange(128) < src.shape[0]
  s = src.at[ml.ds(i * 128, 128)].load(mask=ok, other=0)
  d = dst.at[ml.ds(i * 128, 128)].load(mask=ok, other=-10**6)      # (dropped: outside out)
  ml.atomic_add(out.at[d, :], x[s, :])


@mg.mgpu_kernel(out_shape=lambda ids: (S((128,), I32), S((128,), F32)), grid=lambda ids: (ids.shape[0] // 128,))
def max_and_count(ids, top, count):
  i = ml.program_id(0)
  v = ids.at[ml.ds(i * 128, 128)][...]
  ml.atomic_max(top.at[ml.ds(0, 128)], v)
  ml.atomic_add(count.at[ml.ds(0, 128)], ml.full((128,), 1.0, F32))


@mg.mgpu_kernel(out_shape=lambda ids: (S((128,), I32), S((128,), F32)), grid=lambda ids: (ids.shape[0] // 128,))
def count_and_first(ids, count, first):
  i = ml.program_id(0)
  ml.atomic_add(count.at[ml.ds(0, 128)], ids.at[ml.ds(i * 128, 128)][...])
  first[...] = ml.zeros((128,), F32)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32), grid=(1,))
def column_sums(x, out):
  for j in range(x.shape[0]):
    ml.atomic_add(out.at[ml.ds(0, 128)], x.at[j][...])


def test_outputs_only_atomics_update_start_at_their_identity_with_no_programs():
  """An empty edge list made the grid (0,): MG007 'non-empty outputs would be neither written nor zeroed',
  where jnp's jnp.zeros(n).at[dst].add(...) is zeros; now no launch, the outputs at their start value."""
  x = jnp.arange(8 * 64, dtype=F32).reshape(8, 64)
  e0 = jnp.zeros((0,), I32)
  for interpret in (True, False):          # (no programs: nothing launches, on a GPU or not)
    got = scatter_edges(e0, e0, x, n=8, interpret=interpret)
    np.testing.assert_array_equal(got, jnp.zeros((8, 64), F32).at[e0].add(x[e0]))
  got = jax.jit(lambda s, d, x: scatter_edges(s, d, x, n=8, interpret=True))(e0, e0, x)
  np.testing.assert_array_equal(got, np.zeros((8, 64)))
  src, dst = jnp.array([0, 1, 2, 3] * 40, I32), jnp.array([3, 2, 1, 0] * 40, I32)
  np.testing.assert_array_equal(scatter_edges(src, dst, x, n=8, interpret=True),
                                jnp.zeros((8, 64), F32).at[dst].add(x[src]))
  top, count = max_and_count(e0, interpret=True)            # max starts at its identity, as on the GPU
  np.testing.assert_array_equal(top, np.full(128, np.iinfo(np.int32).min))
  np.testing.assert_array_equal(count, np.zeros(128))


def test_no_programs_with_an_output_written_plainly_is_still_mg007():
  with pytest.raises(mg.LaunchConfigError) as info:
    count_and_first(jnp.zeros((0,), I32), interpret=True)
  e = info.value
  assert e.code == "MG007" and e.loc.source_line.lstrip().startswith("@mg.mgpu_kernel(out_shape=lambda ids: (S((128,), I32)")
  assert e.message == ("the grid callable gave (0,) for an empty input (input 0: int32[0]); a launch needs at least"
                       " one program, and with none this call's outputs that are not updated only by atomics would"
                       " never be written")
  assert "grid=lambda ids: (max(1, ids.shape[0] // 128),)" in e.hint


def test_check_of_a_specialisation_with_no_programs_says_there_is_no_kernel():
  with pytest.raises(mg.LaunchConfigError) as info:
    scatter_edges.check(S((0,), I32), S((0,), I32), S((8, 64), F32), n=8)
  assert info.value.message == ("the grid callable gave (0,): a call returns the outputs, which only atomics update,"
                                " at their start value without a launch, and there is no kernel to check or build")


def test_an_output_only_atomics_in_a_loop_of_no_trips_update_starts_at_zero():
  """range(x.shape[0]) of 0 rows: the loop was dropped while tracing and out was MG602 'never written'."""
  x0 = jnp.zeros((0, 128), F32)
  np.testing.assert_array_equal(column_sums(x0, interpret=True), jnp.zeros(128, F32).at[:].add(x0.sum(0)))
  _export(column_sums, S((0, 128), F32))
  x = jnp.arange(3 * 128, dtype=F32).reshape(3, 128)
  np.testing.assert_array_equal(column_sums(x, interpret=True), x.sum(0))


@pytest.mark.gpu
def test_gpu_an_output_only_atomics_in_a_loop_of_no_trips_update():
  np.testing.assert_array_equal(column_sums(jnp.zeros((0, 128), F32)), np.zeros(128))


# ---------------------------------------------------------------- a 64-row ml.dot at block=256 and more
G64 = lambda a, b: (a.shape[0] // 64,)
O64 = lambda a, b: S((a.shape[0], b.shape[1]), F32)


@mg.mgpu_kernel(out_shape=O64, grid=G64, block=256)
def dot64_softmax(a, b, out):
  i = ml.program_id(0)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 128))
  ml.copy(a.at[ml.ds(i * 64, 64), :], a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  e = ml.exp(acc - ml.max(acc, axis=1)[:, None])
  out.at[ml.ds(i * 64, 64), :][...] = e / ml.sum(e, axis=1)[:, None]


@mg.mgpu_kernel(out_shape=lambda a, b: (S((a.shape[0] // 64,), F32), S((64, b.shape[1]), F32),
                                        S((a.shape[0] // 64, b.shape[1]), F32)), grid=G64, block=256)
def dot64_reductions(a, b, total, summed, colsums):
  i = ml.program_id(0)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 128))
  ml.copy(a.at[ml.ds(i * 64, 64), :], a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s[...] * 2, b_s)             # A from registers
  total[i] = ml.sum(acc)                      # a full reduction: not combined twice
  ml.atomic_add(summed, acc)                  # atomics: applied once per CTA
  colsums.at[i][...] = ml.sum(acc, axis=0)


@mg.mgpu_kernel(out_shape=O64, grid=G64, block=512)
def dot64_pipelined(a, b, out):
  i = ml.program_id(0)
  a_s, b_s, c_s = ml.smem((64, 64)), ml.smem((64, 128)), ml.smem((64, 128), F32)
  acc = ml.zeros((64, 128), F32)
  for k in ml.range(a.shape[1] // 64, stages=2):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c_s[...] = acc
  ml.copy(c_s, out.at[ml.ds(i * 64, 64), :])


@mg.mgpu_kernel(out_shape=O64, grid=G64, block=256)
def dot64_warp_specialized(a, b, out):
  i = ml.program_id(0)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 128))
  acc = ml.zeros((64, 128), F32)
  for k in ml.range(a.shape[1] // 64, stages=2, warp_specialize=True):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
  out.at[ml.ds(i * 64, 64), :][...] = acc


def _operands(k):
  a = (jnp.arange(128 * k, dtype=F32).reshape(128, k) % 5 - 2).astype(F16)
  b = (jnp.arange(k * 128, dtype=F32).reshape(k, 128) % 3 - 1).astype(F16)
  return a, b, jnp.dot(a, b, preferred_element_type=F32)


def test_a_64_row_dot_with_more_warpgroups_is_computed_whole_by_each():
  """ml.dot of 64 rows at block=256 (or 512) was MG501 (m must be a multiple of 128): each warpgroup now
  computes it whole, and so its epilogue (row statistics, full and column sums, atomics once per CTA)."""
  a, b, d = _operands(64)
  specs = [S((128, 64), F16), S((64, 128), F16)]
  np.testing.assert_allclose(dot64_softmax(a, b, interpret=True), jax.nn.softmax(d, axis=1), rtol=1e-6, atol=1e-6)
  total, summed, colsums = dot64_reductions(a, b, interpret=True)
  d2 = jnp.dot(a * 2, b, preferred_element_type=F32).reshape(2, 64, 128)
  np.testing.assert_array_equal(total, d2.sum((1, 2)))
  np.testing.assert_array_equal(summed, d2.sum(0))
  np.testing.assert_array_equal(colsums, d2.sum(1))
  for k in (dot64_softmax, dot64_reductions):
    assert "wgmma/whole" in k.typed_ir(*specs)
    _export(k, *specs)
  a, b, d = _operands(128)
  for k in (dot64_pipelined, dot64_warp_specialized):
    np.testing.assert_array_equal(k(a, b, interpret=True), d)
    _export(k, S((128, 128), F16), S((128, 128), F16))


@pytest.mark.gpu
def test_gpu_a_64_row_dot_with_more_warpgroups():
  a, b, _ = _operands(64)
  np.testing.assert_allclose(dot64_softmax(a, b), dot64_softmax(a, b, interpret=True), rtol=1e-5, atol=1e-6)
  for got, want in zip(dot64_reductions(a, b), dot64_reductions(a, b, interpret=True)):
    np.testing.assert_allclose(got, want, rtol=1e-6)
  a, b, _ = _operands(128)
  for k in (dot64_pipelined, dot64_warp_specialized):
    np.testing.assert_array_equal(k(a, b), k(a, b, interpret=True))


# ---------------------------------------------------------------- a narrow tile read padded, and its vector
@mg.mgpu_kernel(out_shape=lambda img, s: img, grid=lambda img, s: (img.shape[0],))
def channel_scale_half_padded(img, s, out):
  r = ml.program_id(0)
  m = ml.arange(32)[None, :] < 3
  t = img.at[r, :, ml.ds(0, 32)].load(mask=m, other=0)        # MG204's hint for 3 channels, followed
  out.at[r, :, ml.ds(0, 32)].store(t * s[...][None, :], mask=m)


@mg.mgpu_kernel(out_shape=lambda img, s: img, grid=lambda img, s: (img.shape[0],))
def channel_scale_padded(img, s, out):
  r = ml.program_id(0)
  m = ml.arange(32)[None, :] < 3
  t = img.at[r, :, ml.ds(0, 32)].load(mask=m, other=0)
  out.at[r, :, ml.ds(0, 32)].store(t * s.at[ml.ds(0, 32)].load(mask=ml.arange(32) < 3, other=0.0)[None, :], mask=m)


def test_a_vector_meeting_a_tile_read_padded_is_hinted_padded_too():
  """After MG204's hint for an RGB image's (W, 3) tile (read 32 columns, masked), the per-channel
  scale s[...][None, :] of shape (1, 3) met the (W, 32) tile as MG202 with only NumPy's rule as hint."""
  e = expect(channel_scale_half_padded, [S((4, 128, 3), F32), S((3,), F32)], mg.ShapeMismatchError,
             "t * s[...][None, :]", "* on t of shape (128, 32) and s[...][None, :] of shape (1, 3): the shapes do"
             " not broadcast (axis 1 of the result would be both 32 and 3)")
  assert ("read s[...][None, :] padded the same way: s.at[ml.ds(0, 32)].load(mask=ml.arange(32) < 3, other=0.0),"
          " then index it as before") in e.hint
  img = rand.uniform(rand.key(0), (4, 128, 3), F32)
  s = jnp.array([0.5, 1.0, 2.0], F32)
  np.testing.assert_array_equal(channel_scale_padded(img, s, interpret=True), img * s)     # the hint, followed
  _export(channel_scale_padded, S((4, 128, 3), F32), S((3,), F32))
