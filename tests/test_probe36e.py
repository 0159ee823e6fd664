"""Probe 36e (LLM inference kernels as vLLM/SGLang/llama.cpp users write them): rotary embeddings
of head dims 64/80/96 in the interleaved (GPT-J) layout, KV-cache appends, paged decode, sampling,
penalties, cross-entropy, fused residual + RMS norm, SwiGLU/GeGLU and per-token quantisation."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


# ---------------------------------------------------------------- v[::k] of a short vector (a head of 64/80/96)
@mg.mgpu_kernel(out_shape=lambda x, pos, cos, sin: (S(x.shape[:2] + (x.shape[2] // 2,), F32),) * 2,
                grid=lambda x, pos, cos, sin: (x.shape[0], x.shape[1]))
def rope_pairs_1d(x, pos, cos, sin, even, odd):
  t = ml.program_id(0)
  h = ml.program_id(1)
  p = pos[t]
  c = cos.at[p][...]
  s = sin.at[p][...]
  v = x.at[t, h][...].astype(jnp.float32)
  xe = v[::2]
  xo = v[1::2]
  even.at[t, h][...] = xe * c - xo * s
  odd.at[t, h][...] = xo * c + xe * s


def _rope_pairs_inputs(d, heads=2, tokens=5, positions=16):
  rng = np.random.default_rng(36)
  x = rng.standard_normal((tokens, heads, d)).astype(np.float32)
  pos = rng.integers(0, positions, tokens).astype(np.int32)
  ang = rng.standard_normal((positions, d // 2))
  return x, pos, np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def _rope_pairs_reference(x, pos, cos, sin):
  c, s = cos[pos][:, None, :], sin[pos][:, None, :]
  xe, xo = x[..., 0::2], x[..., 1::2]
  return xe * c - xo * s, xo * c + xe * s


@pytest.mark.parametrize("d", [64, 80, 96, 16])
def test_a_strided_slice_of_a_short_vector_is_computed_in_registers(d):
  """`v[::2]` of a 64-, 80- or 96-element head (a vector under 128 elements whose half is a multiple
  of 8, which registers hold) was MG003, "strided slices of a register tensor are not supported",
  though the docs promise it: it is now padded with zeros to a multiple of 256, reshaped and sliced."""
  args = _rope_pairs_inputs(d)
  got = rope_pairs_1d(*args, interpret=True)
  for g, w in zip(got, _rope_pairs_reference(*args)):
    np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6, atol=1e-6)
  _export(rope_pairs_1d, *[S(a.shape, a.dtype) for a in args])


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
@pytest.mark.parametrize("d", [64, 80, 96])
def test_a_strided_slice_of_a_short_vector_on_the_gpu(d):
  args = _rope_pairs_inputs(d)
  got = rope_pairs_1d(*args)
  want = rope_pairs_1d(*args, interpret=True)
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2,), x.dtype))
def odd_of_24(x, out):
  v = x[...]
  out[...] = v[1::2] * 2


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2,), x.dtype))
def odd_of_24_padded(x, out):
  v = x[...]
  p = ml.concatenate([v, ml.zeros((8,), v.dtype)], axis=-1)
  out.at[ml.ds(0, 16)].store(p[1::2] * 2, mask=ml.arange(16) < 12)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2), x.dtype))
def odd_columns(x, out):
  v = x[...]
  out[...] = v[:, 1::2]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2), x.dtype))
def odd_columns_padded(x, out):
  v = x[...]
  p = ml.concatenate([v, ml.zeros((8, 16), v.dtype)], axis=-1)
  out.at[:, ml.ds(0, 32)].store(p[..., 1::2], mask=ml.arange(32)[None, :] < 24)


def test_a_strided_slice_registers_cannot_hold_computes_and_the_hint_works():
  """The result's shape, not the stride, is what registers cannot hold: the message said "strided slices
  are not supported" (they are) and hinted a strided window of the ref, which moves 128 elements at least; then it
  said so, with hints that pad the tile; since probe 47a the slices are computed padded, as the hints pad them."""
  x = np.arange(24, dtype=np.float32)
  np.testing.assert_array_equal(odd_of_24(x, interpret=True), x[1::2] * 2)
  x2 = np.arange(8 * 48, dtype=np.float32).reshape(8, 48)
  np.testing.assert_array_equal(odd_columns(x2, interpret=True), x2[:, 1::2])
  x = np.arange(24, dtype=np.float32)             # the hints, followed
  np.testing.assert_array_equal(odd_of_24_padded(x, interpret=True), x[1::2] * 2)
  x2 = np.arange(8 * 48, dtype=np.float32).reshape(8, 48)
  np.testing.assert_array_equal(odd_columns_padded(x2, interpret=True), x2[:, 1::2])
  _export(odd_of_24_padded, S((24,), F32))
  _export(odd_columns_padded, S((8, 48), F32))


# ---------------------------------------------------------------- a window strided in its last dimension
@mg.mgpu_kernel(out_shape=lambda x, pos, cos, sin: x, grid=lambda x, pos, cos, sin: (x.shape[0], x.shape[1]))
def rope_pair_axis(x, pos, cos, sin, out):      # x: (tokens, heads, d // 2, 2), the pairs an axis
  t = ml.program_id(0)
  h = ml.program_id(1)
  p = pos[t]
  c = cos.at[p][...]
  s = sin.at[p][...]
  xe = x.at[t, h, :, 0][...]
  xo = x.at[t, h, :, 1][...]
  out.at[t, h, :, 0][...] = xe * c - xo * s
  out.at[t, h, :, 1][...] = xo * c + xe * s


def test_a_short_strided_window_computes():
  """The error was at `c = cos.at[p][...]`, a contiguous row, and hinted padding cos's window; then at the
  strided read, padded in the hint; since probe 51g the strided reads are read padded to 128 elements and
  the stores written so: the rotation checked against NumPy."""
  rng = np.random.default_rng(3)
  x = rng.standard_normal((5, 2, 32, 2)).astype(np.float32)
  pos = rng.integers(0, 16, 5).astype(np.int32)
  cos, sin = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((16, 32)).astype(np.float32)
  got = np.asarray(rope_pair_axis(x, pos, cos, sin, interpret=True))
  c, s = cos[pos][:, None], sin[pos][:, None]
  want = np.stack([x[..., 0] * c - x[..., 1] * s, x[..., 1] * c + x[..., 0] * s], -1)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  _export(rope_pair_axis, S((5, 2, 32, 2), F32), S((5,), jnp.int32), S((16, 32), F32), S((16, 32), F32))


# ---------------------------------------------------------------- a gather of rows narrower than a warp
@mg.mgpu_kernel(out_shape=lambda x, pos, cos, sin: x,
                grid=lambda x, pos, cos, sin: (ml.cdiv(x.shape[0], 64), x.shape[1]))
def rope_neox_rows(x, pos, cos, sin, out):      # x: (tokens, heads, d), cos/sin: (positions, d // 2)
  t = ml.program_id(0)
  h = ml.program_id(1)
  half = x.shape[2] // 2
  rows = t * 64 + ml.arange(64)
  inside = rows < x.shape[0]
  p = pos.at[ml.ds(t * 64, 64)].load(mask=inside, other=0)
  c = cos[p, :]
  s = sin.at[p, :].load(mask=inside[:, None], other=0.0)
  v = x.at[ml.ds(t * 64, 64), h, :].load(mask=inside[:, None], other=0.0).astype(jnp.float32)
  x1 = v[:, :half]
  x2 = v[:, half:]
  o = ml.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=1)
  out.at[ml.ds(t * 64, 64), h, :].store(o.astype(out.dtype), mask=inside[:, None])


@mg.mgpu_kernel(out_shape=lambda t, ids, s: S((ids.shape[0], 24), t.dtype))
def gather_window_rows(t, ids, s, out):         # a run-time window of 24 columns of each row
  out[...] = t.at[:, ml.ds(s[0], 24)][ids[...], :]


def _rope_rows_inputs(d, dtype, tokens=100, heads=2, positions=512):
  rng = np.random.default_rng(7)
  x = jnp.asarray(rng.standard_normal((tokens, heads, d)), dtype)
  pos = rng.integers(0, positions, tokens).astype(np.int32)
  ang = rng.standard_normal((positions, d // 2))
  return x, pos, np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def _rope_rows_reference(x, pos, cos, sin):
  h = x.shape[-1] // 2
  c, s = cos[pos][:, None, :], sin[pos][:, None, :]
  x1, x2 = np.asarray(x[..., :h], np.float32), np.asarray(x[..., h:], np.float32)
  return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)


@pytest.mark.parametrize("d", [80, 96, 48])
def test_a_gather_of_rows_narrower_than_a_warp_reads_wider_rows(d):
  """`cos[pos, :]` of a table 40 (or 48, 24) columns wide (RoPE's cos/sin cache of a head of 80 or 96)
  was MG204, "this gather ... needs columns a multiple of 32": the rows are now read 32 (or 128)
  columns wide, the columns past the row's end clamped to its last, and the asked ones kept."""
  args = _rope_rows_inputs(d, F32)
  np.testing.assert_allclose(np.asarray(rope_neox_rows(*args, interpret=True)), _rope_rows_reference(*args),
                             rtol=1e-6, atol=1e-6)
  _export(rope_neox_rows, *[S(a.shape, a.dtype) for a in args])
  bf = _rope_rows_inputs(d, jnp.bfloat16)
  _export(rope_neox_rows, *[S(a.shape, a.dtype) for a in bf])


def test_a_narrow_gather_through_a_run_time_window_stays_inside_the_row():
  t = np.arange(100 * 40, dtype=np.float32).reshape(100, 40)
  ids = np.random.default_rng(3).integers(0, 100, 64).astype(np.int32)
  for start in (0, 5, 16):
    got = gather_window_rows(t, ids, np.array([start], np.int32), interpret=True)
    np.testing.assert_array_equal(np.asarray(got), t[ids, start:start + 24])
  assert "contiguous=True" not in gather_window_rows.typed_ir(S((100, 40), F32), S((64,), jnp.int32),
                                                              S((1,), jnp.int32))
  _export(gather_window_rows, S((100, 40), F32), S((64,), jnp.int32), S((1,), jnp.int32))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
@pytest.mark.parametrize("d", [80, 96])
@pytest.mark.parametrize("dtype", [F32, jnp.bfloat16])
def test_a_gather_of_narrow_rows_on_the_gpu(d, dtype):
  args = _rope_rows_inputs(d, dtype)
  np.testing.assert_allclose(np.asarray(rope_neox_rows(*args), np.float32),
                             np.asarray(rope_neox_rows(*args, interpret=True), np.float32), rtol=1e-2, atol=1e-2)
  t = np.arange(100 * 40, dtype=np.float32).reshape(100, 40)
  ids = np.random.default_rng(3).integers(0, 100, 64).astype(np.int32)
  s = np.array([5], np.int32)
  np.testing.assert_array_equal(np.asarray(gather_window_rows(t, ids, s)), t[ids, 5:29])


@mg.mgpu_kernel(out_shape=lambda cos, ids: S((4, cos.shape[1]), cos.dtype))
def four_narrow_rows(cos, ids, out):
  out[...] = cos[ids[...], :]


def test_a_gather_registers_cannot_hold_names_its_table_in_the_hint():
  """The hint wrote `v = t[...]` for a table named cos. (Since probe 48e the 4 ids read whole index padded, to 8
  rows: a (100, 16) table's gather of them is (8, 16), which registers hold; an 8-column table's is not.)"""
  e = expect(four_narrow_rows, [S((100, 8), F32), S((4,), jnp.int32)], mg.LayoutError, "cos[ids[...], :]",
             "this gather of shape (4, 8) spreads each row's index along the row: that needs columns a multiple"
             " of 32 (one per lane of a warp), and rows a multiple of 4 unless the columns are a multiple of 128")
  assert e.hint.startswith("take 32 columns and drop the extra ones at the store: v = cos[ids[:, None],"), e.hint
  t = np.arange(100 * 16, dtype=np.float32).reshape(100, 16)
  ids = np.array([3, 99, -1, 50], np.int32)
  np.testing.assert_array_equal(four_narrow_rows(t, ids, interpret=True), t[ids])


# ---------------------------------------------------------------- jnp.split of a register tensor
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2), x.dtype), grid=lambda x: (x.shape[0],))
def swiglu_split(x, out):
  r = ml.program_id(0)
  v = x.at[r][...].astype(jnp.float32)
  a, b = jnp.split(v, 2)
  out.at[r][...] = (a * ml.sigmoid(a) * b).astype(out.dtype)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2), x.dtype), grid=lambda x: (x.shape[0],))
def swiglu_split_as_hinted(x, out):
  r = ml.program_id(0)
  v = x.at[r][...].astype(jnp.float32)
  a, b = v[0:1024], v[1024:2048]
  out.at[r][...] = (a * ml.sigmoid(a) * b).astype(out.dtype)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 3), x.dtype), grid=lambda x: (x.shape[0] // 8,))
def thirds(x, out):
  i = ml.program_id(0)
  a, b, c = jnp.split(x.at[ml.ds(i * 8, 8)][...], 3, axis=1)
  out.at[ml.ds(i * 8, 8)][...] = a + b + c


def test_jnp_split_of_a_register_tensor_computes_as_the_slices_it_means():
  """The hint was Triton's split of a last axis of 2 (a[..., 0]) and windows of a ref, not the slices of
  the tensor split (which compile, through SMEM); then (probe 36f) an MG003 whose hint wrote the slices. Since
  probe 49a jnp.split is ml.split's namesake (probe 46k), the slices themselves."""
  x = jnp.asarray(np.random.default_rng(5).standard_normal((3, 2048)), jnp.bfloat16)
  a, b = x[:, :1024].astype(F32), x[:, 1024:].astype(F32)
  want = np.asarray((jax.nn.silu(a) * b).astype(jnp.bfloat16), np.float32)
  for kernel in (swiglu_split, swiglu_split_as_hinted):
    np.testing.assert_allclose(np.asarray(kernel(x, interpret=True), np.float32), want, rtol=1e-2, atol=1e-2)
  y = np.random.default_rng(6).standard_normal((16, 384)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(thirds(y, interpret=True)), y[:, :128] + y[:, 128:256] + y[:, 256:],
                             rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- a plain scatter into an aliased output
@mg.mgpu_kernel(out_shape=lambda x, ids: x, grid=lambda x, ids: (x.shape[0],), input_output_aliases={0: 0})
def penalty_scatter(x, ids, out, *, pen: ml.constexpr = 1.3):
  b = ml.program_id(0)
  tok = ids.at[b][...]
  v = x[b, tok]
  out[b, tok] = ml.where(v > 0, v / pen, v * pen)


@mg.mgpu_kernel(out_shape=lambda x, ids: x, grid=lambda x, ids: (x.shape[0],), input_output_aliases={0: 0})
def penalty_as_hinted(x, ids, out, *, pen: ml.constexpr = 1.3):
  b = ml.program_id(0)
  for j in range(ids.shape[1]):
    t = ids[b, j]
    v = x[b, t]
    out[b, t] = ml.where(v > 0, v / pen, v * pen)


@mg.mgpu_kernel(out_shape=lambda g, ids: S((ids.shape[0], g.shape[1]), g.dtype))
def scatter_into_zeros(g, ids, out):
  out[ids[...], :] = g[...]


def test_a_plain_scatter_into_an_aliased_output_keeps_the_other_values():
  """A repetition penalty written as `out[b, tok] = ...` into logits updated in place was hinted
  `ml.atomic_add(out.at[b, tok], ...)` "into an output that starts at 0" (followed, it added the penalised
  logits to them), then an error with a loop as its hint. It is a scatter now: the aliased output keeps
  the logits it does not write; an output of its own starts at 0."""
  rng = np.random.default_rng(0)
  x = rng.standard_normal((3, 1024)).astype(np.float32)
  ids = np.stack([rng.choice(1024, 64, replace=False) for _ in range(3)]).astype(np.int32)
  want = x.copy()
  for b in range(3):
    v = want[b, ids[b]]
    want[b, ids[b]] = np.where(v > 0, v / np.float32(1.3), v * np.float32(1.3))
  np.testing.assert_allclose(np.asarray(penalty_as_hinted(x, ids, interpret=True)), want, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(penalty_scatter(x, ids, interpret=True)), want, rtol=1e-6)
  g = rng.standard_normal((64, 128)).astype(np.float32)
  rows = rng.permutation(64).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(scatter_into_zeros(g, rows, interpret=True)),
                                np.zeros((64, 128), np.float32)[np.argsort(rows)] + g[np.argsort(rows)])


# ---------------------------------------------------------------- jax.random inside a kernel
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.int32), grid=lambda x: (x.shape[0],))
def gumbel_with_a_key(x, out):
  r = ml.program_id(0)
  v = x.at[r][...]
  g = jax.random.gumbel(jax.random.key(0), v.shape)
  out[r] = ml.argmax(v + g)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.int32), grid=lambda x: (x.shape[0],))
def uniform_with_a_legacy_key(x, out):
  r = ml.program_id(0)
  u = jax.random.uniform(jax.random.PRNGKey(0), (1024,))
  out[r] = ml.argmax(x.at[r][...] + u)


@mg.mgpu_kernel(out_shape=lambda x, seed: (S((x.shape[0],), jnp.int32), S(x.shape, F32)),
                grid=lambda x, seed: (x.shape[0],))
def gumbel_as_hinted(x, seed: ml.scalar, out, g_out):
  r = ml.program_id(0)
  offsets = r * x.shape[1] + ml.arange(x.shape[1])
  g = -ml.log(-ml.log(ml.rand(seed, offsets)))
  g_out.at[r][...] = g
  out[r] = ml.argmax(x.at[r][...] + g)


def test_jax_random_in_a_kernel_is_a_located_error_naming_ml_rand():
  """`jax.random.key(0)` in a kernel was MG900 (NotImplementedError: the key's .item() while tracing)."""
  hint = ("pass a seed (an ml.scalar parameter; jax.random.bits(key, dtype=jnp.uint32) outside the kernel) and"
          " draw ml.rand(seed, offsets), one offset an element (a Gumbel sample is"
          " -ml.log(-ml.log(ml.rand(seed, offsets))), a normal one ml.randn(seed, offsets), uint32 bits"
          " ml.randint(seed, offsets))")     # (ml.randn's Box-Muller written out before probe 49g)
  expect(gumbel_with_a_key, [S((2, 1024), F32)], mg.KernelTypeError, "jax.random.key(0)",
         "key(...) made a PRNG key while tracing: a kernel draws random numbers with ml.rand (Philox,"
         " counter-based), not with jax.random's keys", hint=hint)
  expect(uniform_with_a_legacy_key, [S((2, 1024), F32)], mg.KernelTypeError, "jax.random.PRNGKey(0)",
         "PRNGKey(...) made a PRNG key while tracing: a kernel draws random numbers with ml.rand (Philox,"
         " counter-based), not with jax.random's keys", hint=hint)
  x = np.random.default_rng(1).standard_normal((2, 1024)).astype(np.float32)
  ids, g = gumbel_as_hinted(x, jnp.int32(7), interpret=True)
  np.testing.assert_array_equal(np.asarray(ids), np.argmax(x + np.asarray(g), axis=1))
  assert np.all(np.isfinite(np.asarray(g)))
  _export(gumbel_as_hinted, S((2, 1024), F32), S((), jnp.int32))


@mg.mgpu_kernel(out_shape=lambda x, ids: x, grid=lambda x, ids: (x.shape[0],), input_output_aliases={0: 0})
def penalty_at_set(x, ids, out, *, pen: ml.constexpr = 1.3):
  b = ml.program_id(0)
  tok = ids.at[b][...]
  v = x[b, tok]
  out.at[b, tok].set(ml.where(v > 0, v / pen, v * pen))


@mg.mgpu_kernel(out_shape=lambda g, ids: S((ids.shape[0], g.shape[1]), g.dtype))
def set_into_zeros(g, ids, out):
  out.at[ids[...], :].set(g[...])


def test_jnp_at_set_of_an_indexed_ref_gets_the_scatter_hint_in_its_words():
  """`out.at[b, tok].set(v)` (jnp's update) was hinted the generic "ml.atomic_add(out.at[ids, :], rows) (the
  output starts at 0)", also for an output aliased to the logits, where an add is wrong."""
  specs = [S((3, 1024), F32), S((3, 64), jnp.int32)]
  expect(penalty_at_set, specs, mg.KernelTypeError, "out.at[b, tok].set(",
         "out.at[b, tok] is indexed by tensors: it has no .set; it is read ([...], a gather) or updated atomically"
         " (a scatter)",
         hint="scatter: out[b, tok] = ml.where(v > 0, v / pen, v * pen) (the elements it does not write keep x's"
              " values (input_output_aliases); indices outside out are dropped, as jnp's .at[].set drops them)")
  e = expect(set_into_zeros, [S((64, 128), F32), S((64,), jnp.int32)], mg.KernelTypeError, "out.at[ids[...], :].set(",
             "out.at[ids[...], :] is indexed by tensors: it has no .set; it is read ([...], a gather) or updated"
             " atomically (a scatter)")
  assert e.hint.startswith("scatter: out[ids[...], :] = g[...] (an output written only by scatters starts at 0;"), e.hint


@mg.mgpu_kernel(out_shape=lambda t, ids: S((ids.shape[0],), t.dtype), grid=lambda t, ids: (ids.shape[0] // 64,))
def narrow_rows_summed(t, ids, out):
  i = ml.program_id(0)
  r = ids.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = ml.sum(t[r, :], axis=1)


@mg.mgpu_kernel(out_shape=lambda t, ids: S((ids.shape[0],), t.dtype), grid=lambda t, ids: (ids.shape[0] // 64,))
def narrow_rows_summed_as_hinted(t, ids, out):
  i = ml.program_id(0)
  r = ids.at[ml.ds(i * 64, 64)][...]
  v = t[r[:, None], ml.arange(64)[None, :]]
  out.at[ml.ds(i * 64, 64)][...] = ml.sum(ml.where(ml.arange(64)[None, :] < 40, v, 0.0), axis=1)


def test_a_narrow_gather_reduced_along_its_rows_compiles_and_the_wide_gather_masked_works():
  """Its kept columns (through SMEM) still cannot be reduced along the rows: the hint read a window of
  the table (x.at[rows, ml.ds(c0, 64)]), which a gather is not; it now gathers the wide rows, masked."""
  builds(narrow_rows_summed, S((100, 40), F32), S((128,), jnp.int32))     # (now compiled: tiles narrower than a warp take fewer lanes a row, tests/test_narrow_rows.py)
  t = np.random.default_rng(2).standard_normal((100, 40)).astype(np.float32)
  ids = np.random.default_rng(3).integers(0, 100, 128).astype(np.int32)
  np.testing.assert_allclose(np.asarray(narrow_rows_summed_as_hinted(t, ids, interpret=True)), t[ids].sum(1),
                             rtol=1e-5, atol=1e-5)
