"""Probe 57f: losses and training-side kernels written as JAX code writes them. Classes found and fixed (each test
fails before the fix):
- `jnp.take_along_axis` of a register tile clamped an index outside its axis (ml.take_along_axis's meaning) where
  jnp's default mode, "fill", gives NaN (the lowest signed / highest unsigned integer): a label past the vocabulary
  took the last column's logit, silently; its `mode=` and `fill_value=` were MG003 (jnp_moves._take_along).
- `p.at[rows, cols].add(y)` (and .set/.max/.min/.multiply/.get) of a 2-D register tensor at paired index vectors, a
  cross-entropy's gradient `jax.nn.softmax(x).at[jnp.arange(n), labels].add(-1.0)`, was MG003, whose hint wrote a
  select that did not broadcast (ops/register_at_pairs.py); `jnp.put_along_axis(..., inplace=False)` was MG003.
- `jnp.diagonal` / `jnp.diag` / `jnp.diagflat` of register tiles (CLIP's positives), `jnp.vecdot` /
  `jnp.linalg.vecdot`, `jax.lax.stop_gradient` (a z-loss's): MG003 (jnp_moves, jnp_stats, lax_forms)."""
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from probe_util import export, rnd

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _logits(n=32, v=256, seed=0):
  x = rnd((n, v), seed) * 3
  y = np.random.default_rng(seed + 1).integers(0, v, n).astype(np.int32)
  y[::5] = -100           # an ignore index (inside [-v, v): counts from the end, as jnp's)
  y[1], y[2], y[3] = v + 2, -v - 7, v - 1      # outside the row on both sides, and its last column
  return x, y


# ---------------------------------------------------------------- jnp.take_along_axis's modes
@mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[0],), F32))
def nll_take(x, y, o):
  lp = jax.nn.log_softmax(x[...], axis=-1)
  o[...] = -jnp.take_along_axis(lp, y[...][:, None], axis=-1)[:, 0]


@mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[0],), F32))
def take_from_input(x, y, o):
  o[...] = jnp.take_along_axis(x[...], y[...][:, None], axis=1)[:, 0]


@mg.mgpu_kernel(out_shape=lambda x, y: (S((x.shape[0],), F32), S((x.shape[0],), F32), S((x.shape[0],), F32)))
def take_modes(x, y, filled, clipped, unwrapped):
  v = x[...]
  i = y[...][:, None]
  filled[...] = jnp.take_along_axis(v, i, axis=1, mode="fill", fill_value=0.0)[:, 0]
  clipped[...] = jnp.take_along_axis(v, i, axis=1, mode="clip")[:, 0]
  unwrapped[...] = jnp.take_along_axis(v, i, axis=1, wrap_negative_indices=False)[:, 0]


@mg.mgpu_kernel(out_shape=lambda x, y: (S((x.shape[0], 2), jnp.int32), S((x.shape[0], 2), jnp.uint8)))
def take_ints(x, y, o_i, o_u):
  ids = y[...]
  o_i[...] = jnp.take_along_axis(x[...], ids, axis=1)
  o_u[...] = jnp.take_along_axis((x[...] % 200).astype(jnp.uint8), ids.astype(jnp.uint32), axis=1)


def test_take_along_axis_fills_outside_the_axis_as_jnp():
  """The default mode's NaN where a label lies outside the row (it was the clamped column's logit)."""
  x, y = _logits()
  got = np.asarray(nll_take(x, y, interpret=True))
  want = np.asarray(jax.jit(lambda x, y: -jnp.take_along_axis(jax.nn.log_softmax(x), y[:, None], axis=-1)[:, 0])(x, y))
  assert np.isnan(got[1]) and np.isnan(got[2]) and not np.isnan(got[3])
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  got = np.asarray(take_from_input(x, y, interpret=True))
  np.testing.assert_array_equal(got, np.asarray(jnp.take_along_axis(x, y[:, None], axis=1)[:, 0]))
  export(nll_take, x, y)


def test_take_along_axis_modes_and_fill_value():
  x, y = _logits(seed=3)
  got = take_modes(x, y, interpret=True)
  want = (jnp.take_along_axis(x, y[:, None], axis=1, mode="fill", fill_value=0.0)[:, 0],
          jnp.take_along_axis(x, y[:, None], axis=1, mode="clip")[:, 0],
          jnp.take_along_axis(x, y[:, None], axis=1, wrap_negative_indices=False)[:, 0])
  for g, w in zip(got, want):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  export(take_modes, x, y)


def test_take_along_axis_integer_fills_and_uint32_indices():
  """The lowest int32 and the highest uint8 outside the row; uint32 indices are int32 bits, as jnp's."""
  x = np.arange(64 * 128, dtype=np.int32).reshape(64, 128)
  ids = np.array([-1, 0, 5, 127, 128, -128, -129, 3] * 8, np.int32)
  ids = np.stack([ids, ids[::-1]], 1)
  got = take_ints(x, ids, interpret=True)
  want = (jnp.take_along_axis(x, ids, axis=1),
          jnp.take_along_axis((x % 200).astype(jnp.uint8), ids.astype(jnp.uint32), axis=1))
  for g, w in zip(got, want):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


_X64 = textwrap.dedent('''
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp, numpy as np, mgpu_dsl as mg
    S = jax.ShapeDtypeStruct

    @mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[0],), jnp.float32))
    def take(x, y, o):
        o[...] = jnp.take_along_axis(x[...], y[...][:, None], -1)[:, 0]

    x = np.random.default_rng(0).standard_normal((32, 512)).astype(np.float32)
    y = np.random.default_rng(1).integers(0, 512, 32).astype(np.int64)
    y[::5], y[1], y[2], y[3] = -100, 600, -2 ** 40, 2 ** 33 + 7
    got, want = take(x, y, interpret=True), jnp.take_along_axis(x, y[:, None], -1)[:, 0]
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    print("ok")
''')


def test_take_along_axis_of_int64_labels_wraps_them_to_int32_as_jnp(tmp_path):
  """jnp converts 64-bit indices to int32 (wrapping) before its fill: -2**40 is column 0, 2**33 + 7 column 7."""
  script = tmp_path / "x64.py"
  script.write_text(_X64)
  env = dict(os.environ, MGPU_DSL_CACHE_DIR="off", JAX_PLATFORMS="cpu")
  r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
  assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


@mg.mgpu_kernel(out_shape=lambda x, y: (S(x.shape[:1], F32), S(y.shape, x.dtype)))
def sequence_logps(x, y, o, per):
  v = x[...]
  lab = y[...]
  mask = lab != -100
  lp = jax.nn.log_softmax(v, axis=-1)
  o[...] = jnp.sum(jnp.take_along_axis(lp, jnp.where(mask, lab, 0)[..., None], axis=-1)[..., 0] * mask, axis=-1)
  per[...] = ml.take_along_axis(v, lab[..., None], axis=2)[..., 0]


def test_take_along_axis_of_a_computed_3d_tensor_one_index_a_row():
  """DPO's per-sequence log-probs, jnp.take_along_axis of a (b, t, v) log-softmax at (b, t, 1) labels: MG003 ("gathers
  from a GMEM ref") before; a select along the last axis, as a 2-D tile's."""
  x = rnd((4, 16, 128), 11) * 2
  y = np.random.default_rng(12).integers(0, 128, (4, 16)).astype(np.int32)
  y[:, :3] = -100
  got = sequence_logps(x, y, interpret=True)
  lp = jax.nn.log_softmax(x, -1)
  want = (jnp.sum(jnp.take_along_axis(lp, jnp.where(y != -100, y, 0)[..., None], -1)[..., 0] * (y != -100), -1),
          jnp.take_along_axis(x, y[..., None], axis=2, mode="clip")[..., 0])
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
  export(sequence_logps, x, y)


# ---------------------------------------------------------------- .at[rows, cols] of a register tile
@mg.mgpu_kernel(out_shape=lambda x, y: x, grid=lambda x, y: (x.shape[0] // 16,))
def ce_grad_at(x, y, dx):
  i = ml.program_id(0) * 16
  v = x[ml.ds(i, 16), :]
  lab = y[ml.ds(i, 16)]
  g = jax.nn.softmax(v, axis=-1).at[jnp.arange(v.shape[0]), lab].add(-1.0)
  dx[ml.ds(i, 16), :] = jnp.where((lab != -100)[:, None], g, 0.0)


def _ce_grad(x, y):
  g = jax.nn.softmax(x, axis=-1).at[jnp.arange(x.shape[0]), y].add(-1.0)
  return jnp.where((y != -100)[:, None], g, 0.0)


def test_cross_entropy_gradient_at_paired_indices():
  x, y = _logits()
  np.testing.assert_allclose(np.asarray(ce_grad_at(x, y, interpret=True)), np.asarray(jax.jit(_ce_grad)(x, y)),
                             rtol=1e-5, atol=1e-6)
  export(ce_grad_at, x, y)


_PAIRS = {
    "set_one_hot": lambda A, B: jnp.zeros_like(A).at[jnp.arange(A.shape[0]), B].set(1.0),
    "set_vector": lambda A, B: A.at[jnp.arange(A.shape[0]), B].set(A[:, 0]),
    "max": lambda A, B: A.at[jnp.arange(A.shape[0]), B].max(0.5),
    "min": lambda A, B: A.at[jnp.arange(A.shape[0]), B].min(A[:, 1]),
    "multiply": lambda A, B: A.at[jnp.arange(A.shape[0]), B].multiply(2.0),
    "reversed_rows": lambda A, B: A.at[jnp.arange(A.shape[0])[::-1], B].add(1.0),
    "repeated_rows": lambda A, B: A.at[B % A.shape[0], jnp.abs(B) % 7].add(A[:, 2]),
    "repeated_max": lambda A, B: A.at[B % A.shape[0], jnp.abs(B) % 7].max(A[:, 2]),
    "negative_rows": lambda A, B: A.at[(B % A.shape[0]) - 40, B].min(-1.0),
    "int32": lambda A, B: (A * 4).astype(jnp.int32).at[jnp.arange(A.shape[0]), B].add(-1),
    "no_wrap": lambda A, B: A.at[jnp.arange(A.shape[0]), B].add(-1.0, wrap_negative_indices=False),
    "get_fill": lambda A, B: A.at[jnp.arange(A.shape[0]), B].get(mode="fill", fill_value=0.0),
    "put_along_axis": lambda A, B: jnp.put_along_axis(A, B[:, None], 0.0, axis=1, inplace=False),
    "put_along_clip": lambda A, B: jnp.put_along_axis(A, B[:, None], A[:, :1] * 2, axis=1, inplace=False, mode="clip"),
}


def _pair_kernel(f):
  def kernel(a, b, o):
    o[...] = f(a[...], b[...])
  kernel.__name__ = "pairs"
  return mg.mgpu_kernel(out_shape=lambda a, b: jax.eval_shape(f, a, b))(kernel)


@pytest.mark.parametrize("name", sorted(_PAIRS))
def test_paired_updates_match_jnp(name):
  f = _PAIRS[name]
  x, y = _logits(seed=5)
  k = _pair_kernel(f)
  np.testing.assert_allclose(np.asarray(k(x, y, interpret=True), np.float64), np.asarray(jax.jit(f)(x, y), np.float64),
                             rtol=1e-6, atol=1e-6)
  export(k, x, y)


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def pairs_many_rows(x, y, o):
  v = x[...]
  o[...] = v.at[y[...] % 512, y[...]].add(-1.0)


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def pairs_bad_update(x, y, o):
  v = x[...]
  o[...] = v.at[ml.arange(32), y[...]].add(v[:, :2])


def test_paired_updates_past_256_rows_and_a_wrong_update_shape_are_errors_at_the_call():
  e = expect(pairs_many_rows, [S((512, 64), F32), S((512,), jnp.int32)], mg.KernelTypeError, "v.at[",
             "v.at[y[...] % 512, y[...]].add(-1.0) updates 512 rows of a register tile at paired index vectors: in"
             " registers, at most 256 (one reduction of the updates a row), unless the rows are the tile's own,"
             " ml.arange(512)")
  assert e.hint.endswith("ml.atomic_add(out.at[y[...] % 512, y[...]], -1.0)")
  expect(pairs_bad_update, [S((32, 64), F32), S((32,), jnp.int32)], mg.ShapeMismatchError, "v.at[",
         "v.at[ml.arange(32), y[...]].add(v[:, :2]): the update v[:, :2] of shape (32, 2) does not broadcast to the"
         " shape (32,) of the elements it updates", hint="give one update an index pair: a (32,) vector, or a number")


# ---------------------------------------------------------------- diagonals, vecdot, stop_gradient
@mg.mgpu_kernel(out_shape=lambda a, b: (S((a.shape[0],), F32), S((a.shape[0],), F32)))
def clip_rows(img, txt, li, lt):
  a = img[...].astype(F32)
  b = txt[...].astype(F32)
  a = a / jnp.linalg.norm(a, axis=-1, keepdims=True)
  b = b / jnp.sqrt(jnp.vecdot(b, b))[:, None]
  lg = jnp.dot(a, b.T) / 0.07
  li[...] = jax.nn.logsumexp(lg, axis=1) - jnp.diagonal(lg)
  lt[...] = jax.nn.logsumexp(lg, axis=0) - jnp.diag(lg)


def _clip_rows(a, b):
  a = a / jnp.linalg.norm(a, axis=-1, keepdims=True)
  b = b / jnp.linalg.norm(b, axis=-1, keepdims=True)
  lg = jnp.dot(a, b.T, precision="highest") / 0.07
  return jax.nn.logsumexp(lg, 1) - jnp.diagonal(lg), jax.nn.logsumexp(lg, 0) - jnp.diagonal(lg)


def test_clip_loss_with_diagonal_and_vecdot():
  a, b = rnd((64, 64), 7), rnd((64, 64), 8)
  for g, w in zip(clip_rows(a, b, interpret=True), _clip_rows(a, b)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-2, atol=2e-2)    # (TF32 products)
  export(clip_rows, a, b)


_FORMS = {
    "diagonal_offset": lambda A: jnp.diagonal(A, 3),
    "diagonal_below": lambda A: jnp.diagonal(A.T, -2),
    "diag_of_vector": lambda A: jnp.diag(A[0, :64]),
    "diag_of_row_sums": lambda A: jnp.diag(jnp.sum(A[:, :64], axis=1)),
    "diagflat": lambda A: jnp.diagflat(A[1, :64]),
    "vecdot_bf16": lambda A: jnp.linalg.vecdot(A.astype(jnp.bfloat16), A[::-1].astype(jnp.bfloat16)),
    "diagonal_tall": lambda A: jnp.diagonal(A.T[:, :32], -5),
    "diagonal_partial_rows": lambda A: jnp.diagonal(A[:, :64], 1),
    "diagonal_partial_columns": lambda A: jnp.diagonal(A[:, :64], -3),
    "diagonal_wide": lambda A: jnp.diag(A, 100),
    "z_loss": lambda A: 1e-4 * jnp.square(jax.lax.stop_gradient(jax.nn.logsumexp(A, axis=-1))),
}


@pytest.mark.parametrize("name", sorted(_FORMS))
def test_forms_match_jnp(name):
  f = _FORMS[name]
  def kernel(a, o):
    o[...] = f(a[...])
  k = mg.mgpu_kernel(out_shape=lambda a: jax.eval_shape(f, a))(kernel)
  x = rnd((64, 128), 9)
  want = jax.jit(f)(x)
  if name == "vecdot_bf16":     # (XLA's dot on the GPU: float32 products and sums, rounded once; the CPU's differs)
    want = jnp.linalg.vecdot(x.astype(jnp.bfloat16), x[::-1].astype(jnp.bfloat16),
                             preferred_element_type=F32).astype(jnp.bfloat16)
  np.testing.assert_allclose(np.asarray(k(x, interpret=True), np.float64), np.asarray(want, np.float64),
                             rtol=1e-5, atol=1e-5)
  export(k, x)


@pytest.mark.gpu
def test_probe57f_kernels_on_the_gpu():
  x, y = _logits()
  np.testing.assert_allclose(np.asarray(nll_take(x, y)), np.asarray(nll_take(x, y, interpret=True)), rtol=1e-4,
                             atol=1e-4)
  np.testing.assert_allclose(np.asarray(ce_grad_at(x, y)), np.asarray(jax.jit(_ce_grad)(x, y)), rtol=1e-4, atol=1e-5)
  got = take_modes(x, y)
  for g, w in zip(got, take_modes(x, y, interpret=True)):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  a, b = rnd((64, 64), 7), rnd((64, 64), 8)
  for g, w in zip(clip_rows(a, b), _clip_rows(a, b)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-2, atol=2e-2)


@mg.mgpu_kernel(out_shape=lambda s, x: S((x.shape[0],), jnp.uint32), grid=lambda s, x: (x.shape[0] // 256,))
def philox_by_uint64(seed, x, out):
  i = ml.program_id(0) * 256
  c0 = (i + ml.arange(256)).astype(jnp.uint32)
  p = c0.astype(jnp.uint64) * 0xD2511F53
  out[ml.ds(i, 256)] = (p >> 32).astype(jnp.uint32) ^ seed[0].astype(jnp.uint32)


def test_a_uint64_product_of_a_philox_port_hints_umulhi():
  """A CUDA port's `(uint64)a * b >> 32` (a Philox round's high word): MG106 whose hint names ml.umulhi."""
  e = expect(philox_by_uint64, [S((2,), jnp.int32), S((512,), F32)], mg.UnsupportedDtypeError, "c0.astype(jnp.uint64)",
             "the conversion (.astype / ml.cast): uint64 is not a kernel dtype")
  assert e.hint.startswith("for the high 32 bits of a 32-bit product (a Philox round's, a CUDA port's (uint64)a * b"
                           " >> 32) use ml.umulhi(a, b), and a * b for the low ones")
