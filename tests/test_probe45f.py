"""Probe 45f (layout and shape operators as memory-bound kernels: permutes of 3-D and 4-D arrays, stacks,
strided slices, pixel shuffles): `ml.transpose(v, axes)` of a 3-D or wider tensor (and `.T`, `.mT`), slices with
steps along leading axes (`v[::2]`, `v[1::3]`), and `ml.concatenate` of `a[None]` parts (jnp.stack along a new
leading axis), each through an SMEM scratch (frontend/ops/permute.py)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _same(got, want):
  np.testing.assert_array_equal(np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64))


# ---------------------------------------------------------------- permutes of 3-D and wider tiles
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[2], x.shape[3], x.shape[1]), x.dtype),
                grid=lambda x: (x.shape[0],))
def nchw_to_nhwc(x, out):
  n = ml.program_id(0)
  out.at[n][...] = ml.transpose(x.at[n][...], (1, 2, 0))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[2], x.shape[1], x.shape[3]), x.dtype))
def bshd_to_bhsd(x, out):
  out[...] = x[...].transpose(0, 2, 1, 3)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0], x.shape[2], x.shape[1]), x.dtype), S(x.shape[::-1], x.dtype)))
def batched_and_reversed(x, bt, rev):
  v = x[...]
  bt[...] = v.mT
  rev[...] = v.T


@mg.mgpu_kernel(out_shape=lambda x, *, r: S((x.shape[0], x.shape[1] // (r * r), x.shape[2] * r, x.shape[3] * r), x.dtype),
                grid=lambda x, *, r: (x.shape[0],))
def pixel_shuffle(x, out, *, r: ml.constexpr):
  n = ml.program_id(0)
  c, h, w = x.shape[1] // (r * r), x.shape[2], x.shape[3]
  v = x.at[n][...].reshape(c, r, r, h, w)
  out.at[n][...] = v.transpose(0, 3, 1, 4, 2).reshape(c, h * r, w * r)


@mg.mgpu_kernel(out_shape=lambda x, *, r: S((x.shape[0], x.shape[1] // r, x.shape[2] // r, x.shape[3] * r * r), x.dtype),
                grid=lambda x, *, r: (x.shape[0],))
def space_to_depth(x, out, *, r: ml.constexpr):          # NHWC
  n = ml.program_id(0)
  h, w, c = x.shape[1], x.shape[2], x.shape[3]
  v = x.at[n][...].reshape(h // r, r, w // r, r, c)
  out.at[n][...] = ml.transpose(v, axes=(0, 2, 1, 3, 4)).reshape(h // r, w // r, r * r * c)


@mg.mgpu_kernel(out_shape=lambda x: x)
def identity_axes(x, out):
  out[...] = ml.transpose(x[...] * 2, (0, 1))


def _pixel_shuffle(x, r):
  n, cr, h, w = x.shape
  return x.reshape(n, cr // (r * r), r, r, h, w).transpose(0, 1, 4, 2, 5, 3).reshape(n, cr // (r * r), h * r, w * r)


def _space_to_depth(x, r):
  n, h, w, c = x.shape
  return x.reshape(n, h // r, r, w // r, r, c).transpose(0, 1, 3, 2, 4, 5).reshape(n, h // r, w // r, r * r * c)


def _input(shape, dtype, seed=0):
  rng = np.random.default_rng(seed)
  if dtype == np.bool_:
    return rng.random(shape) > 0.5
  if np.dtype(dtype) == np.int8:
    return rng.integers(-128, 128, shape).astype(np.int8)
  return rng.standard_normal(shape).astype(dtype)


DTYPES = [np.float32, np.float16, jnp.bfloat16, np.int8, np.bool_]


def _permute_cases(dtype):
  x4 = _input((2, 16, 8, 16), dtype)
  xb = _input((2, 32, 4, 24), dtype, 1)
  x3 = _input((4, 24, 16), dtype, 2)
  ps = _input((2, 16, 4, 8), dtype, 3)
  sd = _input((2, 8, 6, 16), dtype, 4)
  return [(nchw_to_nhwc, (x4,), {}, x4.transpose(0, 2, 3, 1)),
          (bshd_to_bhsd, (xb,), {}, xb.transpose(0, 2, 1, 3)),
          (batched_and_reversed, (x3,), {}, (x3.transpose(0, 2, 1), x3.transpose(2, 1, 0))),
          (pixel_shuffle, (ps,), {"r": 2}, _pixel_shuffle(ps, 2)),
          (space_to_depth, (sd,), {"r": 2}, _space_to_depth(sd, 2))]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_permutes_of_3d_and_4d_tiles_are_jnp_transposes(dtype):
  """`ml.transpose(v, (1, 2, 0))` of a (C, H, W) image, `x[...].transpose(0, 2, 1, 3)` of (B, S, H, D), the 5-D
  permutes of a pixel shuffle and a space-to-depth were MG003 ("2-D tensors swap their two axes only", its hint
  `ml.transpose(v)`, which swaps nothing there); `.mT` had no attribute and `.T` of a 3-D tile was MG003 ("takes a
  2-D register tensor"). They are jnp's, through an SMEM scratch."""
  for kernel, args, cx, want in _permute_cases(dtype):
    got = kernel(*args, interpret=True, **cx)
    for g, w in zip(got, want) if isinstance(want, tuple) else [(got, want)]:
      _same(g, w)
  x = _input((16, 64), np.float32)
  _same(identity_axes(x, interpret=True), x * 2)      # (was MG003: jnp's identity permutation)


def test_permutes_build_their_mosaic_gpu_module():
  for kernel, args, cx, _ in _permute_cases(np.float16)[::2] + _permute_cases(np.int8)[1::2]:
    assert "memref.load" in kernel.mlir(*[S(a.shape, a.dtype) for a in args], **cx)


@mg.mgpu_kernel(out_shape=lambda x: x)
def not_a_permutation(x, out):
  out[...] = ml.transpose(x[...], (0, 2, 2))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[2], x.shape[1]), x.dtype))
def jnp_swapaxes(x, out):
  v = x[...]
  out[...] = jnp.swapaxes(v, 1, 2)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1], x.shape[2], x.shape[0]), x.dtype))
def jnp_moveaxis(x, out):
  v = x[...]
  out[...] = jnp.moveaxis(v, 0, -1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[2], x.shape[1]), x.dtype))
def jnp_transpose(x, out):
  v = x[...]
  out[...] = jnp.transpose(v, (0, 2, 1))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1], x.shape[2], x.shape[0]), x.dtype))
def moveaxis_as_hinted(x, out):
  v = x[...]
  out[...] = ml.transpose(v, (1, 2, 0))


def test_jnp_permutes_of_wider_tensors_hint_ml_transpose_with_their_axes():
  """jnp.swapaxes and jnp.moveaxis of a 3-D tile hinted "no ml.swapaxes: x.T transposes a 2-D tensor", and
  jnp.transpose(v, axes) `ml.transpose` (which took no axes); a wrong permutation said 2-D tensors swap two axes."""
  shape = [S((4, 8, 32), F32)]
  expect(not_a_permutation, shape, mg.KernelTypeError, "ml.transpose(",
         "ml.transpose(x, axes=(0, 2, 2)): axes must be a permutation of the 3 axes of x[...] (shape (4, 8, 32)),"
         " each a static int once", hint="list every axis once, in the result's order: ml.transpose(x[...], (2, 1, 0))")
  x = _input((4, 8, 32), np.float32)
  _same(moveaxis_as_hinted(x, interpret=True), np.moveaxis(x, 0, -1))
  _same(jnp_transpose(x, interpret=True), np.transpose(x, (0, 2, 1)))     # ml.transpose's since probe 46i
  _same(jnp_swapaxes(x, interpret=True), np.swapaxes(x, 1, 2))
  _same(jnp_moveaxis(x, interpret=True), np.moveaxis(x, 0, -1))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_permutes_through_a_strided_smem_view_on_the_gpu(dtype):
  """Each thread reads its elements from computed SMEM positions (RestrideLoad): a wrong position reads past the
  scratch, so these run apart."""
  for kernel, args, cx, want in _permute_cases(dtype):
    got = jax.jit(lambda *a, k=kernel, c=cx: k(*a, **c))(*args)
    for g, w in zip(got, want) if isinstance(want, tuple) else [(got, want)]:
      _same(g, w)


# ---------------------------------------------------------------- strided slices along leading axes
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0] // 2, x.shape[1]), x.dtype), S((x.shape[0] // 3, x.shape[1]), x.dtype),
                                     S((x.shape[0] // 2, x.shape[1] // 2), x.dtype)))
def strided_rows(x, even, third, corner):
  v = x[...]
  even[...] = v[::2] + v[1::2]
  third[...] = v[1::3]
  corner[...] = v[1::2, ::-2]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2, x.shape[2]), x.dtype), grid=lambda x: (1,))
def strided_3d(x, out):
  out[...] = x[...][::2, 3]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2, x.shape[1]), x.dtype))
def strided_too_small(x, out):
  out[...] = x[...][::2]


def test_strided_slices_of_leading_axes_are_strided_views():
  """`v[::2]`, `v[1::3]` of a tile and `v[1::2, ::-2]` were MG003 ("strided slices (step 2) of a register tensor are not
  supported"), whose hint reshaped the array outside the kernel; only a last axis took a step."""
  x = _input((48, 64), np.float32, 5)
  even, third, corner = strided_rows(x, interpret=True)
  _same(even, x[::2] + x[1::2])
  _same(third, x[1::3])
  _same(corner, x[1::2, ::-2])
  for dtype in (np.float16, np.int8, np.bool_):
    x3 = _input((4, 8, 64), dtype, 6)
    _same(strided_3d(x3, interpret=True), x3[::2, 3])
  assert "memref.load" in strided_rows.mlir(S((48, 64), jnp.bfloat16))


def test_a_strided_slice_registers_cannot_hold_computes():
  # ((4, 48) of an (8, 48) tile was MG204 naming a (16, 48) tile that works; since probe 47a it is computed padded)
  for shape in [(8, 48), (16, 48)]:
    x = _input(shape, np.float32, 7)
    _same(strided_too_small(x, interpret=True), x[::2])


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_strided_slices_through_a_strided_smem_view_on_the_gpu():
  x = _input((48, 64), np.float32, 5)
  even, third, corner = jax.jit(strided_rows)(x)
  _same(even, x[::2] + x[1::2])
  _same(third, x[1::3])
  _same(corner, x[1::2, ::-2])
  x3 = _input((4, 8, 64), np.int8, 6)
  _same(jax.jit(strided_3d)(x3), x3[::2, 3])


# ---------------------------------------------------------------- jnp.stack along a new leading axis
@mg.mgpu_kernel(out_shape=lambda a, b: S((3,) + a.shape, a.dtype))
def stack_leading(a, b, out):
  u, v = a[...], b[...]
  out[...] = ml.concatenate([u[None], v.reshape((1,) + b.shape), (u - v)[None, :, :]], axis=0)


@mg.mgpu_kernel(out_shape=lambda a, b: S((2,) + a.shape, a.dtype))
def jnp_stack(a, b, out):
  out[...] = jnp.stack([a[...], b[...]])


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], 2, a.shape[1]), a.dtype))
def jnp_stack_middle(a, b, out):
  u, v = a[...], b[...]
  out[...] = jnp.stack((u, v), axis=1)


def test_a_stack_along_a_new_leading_axis_is_a_concatenation():
  """`ml.concatenate([u[None], v[None]], axis=0)` was MG204 ("u[...] of shape (1, 16, 64) meets a row-wise tile
  through its size-1 axes"), whose hint said to read the tile 2-D, as it was; jnp.stack's hint said to store each
  part into its window of the output. Each part goes into its slice of the scratch as it is."""
  a, b = _input((16, 64), np.float32, 8), _input((16, 64), np.float32, 9)
  _same(stack_leading(a, b, interpret=True), np.stack([a, b, a - b]))
  assert "mosaic_gpu" in stack_leading.mlir(S((16, 64), F32), S((16, 64), F32))
  # jnp.stack is the hinted concatenation of new axes since probe 46i
  _same(jnp_stack(a, b, interpret=True), np.stack([a, b]))
  _same(jnp_stack_middle(a, b, interpret=True), np.stack([a, b], axis=1))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_a_stack_along_a_new_leading_axis_on_the_gpu():
  a, b = _input((16, 64), np.float32, 8), _input((16, 64), np.float32, 9)
  _same(jax.jit(stack_leading)(a, b), np.stack([a, b, a - b]))


# ---------------------------------------------------------------- jnp.tile of a 2-D tile
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] * 2, x.shape[1] * 3), x.dtype))
def jnp_tile(x, out):
  v = x[...]
  out[...] = jnp.tile(v, (2, 3))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] * 2, x.shape[1] * 3), x.dtype))
def tile_as_hinted(x, out):
  v = x[...]
  out[...] = ml.concatenate([ml.concatenate([v] * 2, axis=0)] * 3, axis=1)


def test_jnp_tile_of_a_2d_tile_hints_its_copies():
  """The hint was ml.tile's "ml.concatenate([x, x], axis=0) joins copies", whatever the repetitions and names."""
  x = _input((16, 64), np.float16, 10)     # (jnp.tile computes as those copies since probe 47b)
  _same(jnp_tile(x, interpret=True), np.tile(x, (2, 3)))
  _same(tile_as_hinted(x, interpret=True), np.tile(x, (2, 3)))


# ---------------------------------------------------------------- gathers from register tensors
@mg.mgpu_kernel(out_shape=lambda x, r, c, t: (S((r.shape[0], x.shape[1]), x.dtype), S((x.shape[0], c.shape[0]), x.dtype),
                                              S(t.shape, x.dtype), S((r.shape[0], c.shape[0]), x.dtype)))
def register_gathers(x, r, c, t, rows, cols, along, grid):
  v = x[...] * 2
  rows[...] = v[r[...]]
  cols[...] = v[:, c[...]]
  along[...] = ml.take_along_axis(v, t[...], axis=1)
  grid[...] = v[r[...][:, None], c[...][None, :]]


@mg.mgpu_kernel(out_shape=lambda x, i: S((x.shape[0], i.shape[0], x.shape[2]), x.dtype))
def middle_axis_gather(x, i, out):
  v = x[...]
  out[...] = jnp.take(v, i[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x, i: S((x.shape[0], i.shape[0], x.shape[2]), x.dtype))
def middle_axis_as_hinted(x, i, out):
  v = x[...]
  out[...] = v[:, i[...]]


def _gather_inputs(dtype):
  rng = np.random.default_rng(11)
  x = _input((16, 64), dtype, 12)
  r = rng.integers(-16, 20, 16).astype(np.int32)            # negative and past-the-end indices: jnp's clamping
  c = rng.integers(-64, 64, 128).astype(np.int16)
  t = rng.integers(0, 64, (16, 128)).astype(np.int32)
  return x, r, c, t


def _gather_refs(x, r, c, t):
  v = jnp.asarray(x) * 2 if x.dtype != np.bool_ else jnp.asarray(x)
  return v[r], v[:, c], jnp.take_along_axis(v, jnp.asarray(t), axis=1), v[r[:, None], c[None, :]]


@mg.mgpu_kernel(out_shape=lambda x, r, c, t: (S((r.shape[0], x.shape[1]), x.dtype), S((x.shape[0], c.shape[0]), x.dtype),
                                              S(t.shape, x.dtype), S((r.shape[0], c.shape[0]), x.dtype)))
def register_gathers_of_masks(x, r, c, t, rows, cols, along, grid):
  v = x[...] | False
  rows[...] = v[r[...]]
  cols[...] = v[:, c[...]]
  along[...] = ml.take_along_axis(v, t[...], axis=1)
  grid[...] = v[r[...][:, None], c[...][None, :]]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_gathers_from_register_tensors_are_jnps(dtype):
  """`v[ids]`, `v[:, ids]`, `v[rows, cols]` of a tile computed in registers were MG003 ("gathers read refs ..., not
  register tensors"), whose hint gave the kernel an extra output to gather from, and `ml.take_along_axis(v, t, 1)` of
  128 indices a row said the same; jnp.take of a register tensor hinted a GMEM ref. Each is jnp's gather now
  (negative indices from the end, others clamped), through an SMEM scratch."""
  x, r, c, t = _gather_inputs(dtype)
  kernel = register_gathers_of_masks if dtype == np.bool_ else register_gathers
  got = kernel(x, r, c, t, interpret=True)
  for g, w in zip(got, _gather_refs(x, r, c, t)):
    _same(g, w)
  assert "memref.load" in kernel.mlir(*[S(a.shape, a.dtype) for a in (x, r, c, t)])


def test_a_gather_along_a_middle_axis_and_jnp_take_hints():
  expect(middle_axis_gather, [S((4, 8, 32), F32), S((8,), jnp.int32)], mg.KernelTypeError, "jnp.take(",
         "take cannot take a register tensor inside a kernel",
         hint="write v[:, i[...]] (NumPy's advanced indexing, a gather as jnp.take's)")
  x = _input((4, 8, 32), np.float32, 13)
  i = np.random.default_rng(14).integers(0, 8, 8).astype(np.int32)
  _same(middle_axis_as_hinted(x, i, interpret=True), x[:, i])


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_gathers_from_register_tensors_through_smem_on_the_gpu(dtype):
  """Each thread loads from SMEM at positions computed from the indices (clamped into the tile): a wrong clamp
  reads past the scratch, so these run apart."""
  x, r, c, t = _gather_inputs(dtype)
  kernel = register_gathers_of_masks if dtype == np.bool_ else register_gathers
  for g, w in zip(jax.jit(kernel)(x, r, c, t), _gather_refs(x, r, c, t)):
    _same(g, w)
  x3 = _input((4, 8, 32), np.float32, 13)
  i = np.random.default_rng(14).integers(0, 8, 8).astype(np.int32)
  _same(jax.jit(middle_axis_as_hinted)(x3, i), x3[:, i])


# ---------------------------------------------------------------- jnp's and torch's shape methods and calls
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[2], x.shape[1]), x.dtype))
def shape_habits(x, out, *, how: ml.constexpr):
  v = x[...]
  if how == "swapaxes":
    out[...] = v.swapaxes(1, 2)
  elif how == "permute":
    out[...] = v.permute(0, 2, 1)
  elif how == "einsum":
    out[...] = jnp.einsum("bsd->bds", v)
  else:
    out[...] = ml.transpose(v, (0, 2, 1))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 2 * x.shape[1], x.shape[2]), x.dtype))
def repeat_middle(x, out):
  v = x[...]
  out[...] = jnp.repeat(v, 2, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 2 * x.shape[1], x.shape[2]), x.dtype))
def repeat_middle_as_hinted(x, out):
  v = x[...]
  out[...] = v[:, ml.arange(16) // 2]


def test_permuting_methods_and_calls_hint_the_permute():
  """torch's v.permute(0, 2, 1) was hinted as `v.T` (Triton's 2-D permute: of a 3-D tensor, its axes reversed), jnp's
  v.swapaxes listed the methods there are, and an einsum that only permutes said to use ml.dot."""
  x = _input((4, 8, 32), np.float32, 15)
  _same(shape_habits(x, how="hinted", interpret=True), x.transpose(0, 2, 1))
  # (v.swapaxes(1, 2) was MG003 hinting that ml.transpose; since probe 51l it is jax.Array's method, and computes)
  _same(shape_habits(x, how="swapaxes", interpret=True), x.transpose(0, 2, 1))
  # (v.permute(0, 2, 1) was hinted as that ml.transpose; since probe 51e it is Triton's tl.permute, and computes)
  _same(shape_habits(x, how="permute", interpret=True), x.transpose(0, 2, 1))
  # (einsum's 'bsd->bds' was hinted as that ml.transpose; since probe 48b it computes as it)
  _same(shape_habits(x, how="einsum", interpret=True), x.transpose(0, 2, 1))


def test_jnp_repeat_along_a_middle_axis_hints_a_register_gather():
  """The hint read the tensor "from its ref with a gather, ref[ml.arange(n * r) // r]", a ref a computed tile has not."""
  x = _input((4, 8, 32), np.float32, 16)     # (jnp.repeat computes as ml.repeat since probe 47b)
  _same(repeat_middle(x, interpret=True), np.repeat(x, 2, axis=1))
  _same(repeat_middle_as_hinted(x, interpret=True), np.repeat(x, 2, axis=1))


# ---------------------------------------------------------------- plain reads of refs with steps
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0] // 2, x.shape[1]), x.dtype), S((x.shape[0] // 3, x.shape[1]), x.dtype),
                                     S((x.shape[0] // 2, x.shape[1] // 4), x.dtype), S((16, x.shape[1]), x.dtype)))
def strided_reads(x, even, third, corner, back):
  even[...] = x[::2]
  third[...] = x[1::3, :]
  corner[...] = x[1::2, 3::4]
  back[...] = x[40:8:-2]


def test_plain_reads_of_a_ref_with_steps_read_their_window():
  """`x[::2]`, `x[1::3, :]`, `x[1::2, 3::4]` and `x[40:8:-2]` of a GMEM ref were MG003 ("strided slices (step 2) are
  not supported; use a step of 1"), whose hint passed the array reshaped; the docs said to read the window and
  slice it in registers, which the compiler now does: the step-1 window covering the elements, then its view."""
  for dtype in (np.float32, np.int8, np.bool_):
    x = _input((48, 64), dtype, 17)
    got = strided_reads(x, interpret=True)
    for g, w in zip(got, (x[::2], x[1::3], x[1::2, 3::4], x[40:8:-2])):
      _same(g, w)
  assert "mosaic_gpu" in strided_reads.mlir(S((48, 64), jnp.float16))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_plain_reads_of_a_ref_with_steps_through_a_strided_smem_view_on_the_gpu():
  x = _input((48, 64), np.float16, 17)
  for g, w in zip(jax.jit(strided_reads)(x), (x[::2], x[1::3], x[1::2, 3::4], x[40:8:-2])):
    _same(g, w)


# ---------------------------------------------------------------- strided writes of an output
@mg.mgpu_kernel(out_shape=lambda a, b: (S((2 * a.shape[0], a.shape[1]), a.dtype), S((a.shape[0], 2 * a.shape[1]), a.dtype)))
def interleaved_writes(a, b, rows, cols):
  rows[::2] = a[...]
  rows[1::2] = b[...]
  cols[:, ::2] = a[...]
  cols[:, 1::2] = b[...]


def test_strided_writes_of_an_output_are_scatters_at_those_positions():
  """`out[::2] = a; out[1::2] = b` (interleaving two tiles) was MG003 ("strided slices (step 2) are not supported"):
  it is the plain scatter `out[ml.arange(n) * 2 + 1] = b` of those rows (columns)."""
  a, b = _input((48, 64), np.float32, 18), _input((48, 64), np.float32, 19)
  rows, cols = interleaved_writes(a, b, interpret=True)
  _same(rows, np.stack([a, b], 1).reshape(96, 64))
  _same(cols, np.stack([a, b], 2).reshape(48, 128))
  assert "mosaic_gpu" in interleaved_writes.mlir(S((48, 64), F32), S((48, 64), F32))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_strided_writes_of_an_output_on_the_gpu():
  a, b = _input((48, 64), np.float32, 18), _input((48, 64), np.float32, 19)
  rows, cols = jax.jit(interleaved_writes)(a, b)
  _same(rows, np.stack([a, b], 1).reshape(96, 64))
  _same(cols, np.stack([a, b], 2).reshape(48, 128))
