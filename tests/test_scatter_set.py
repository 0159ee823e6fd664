"""Plain scatters: `out[ids, :] = rows`, `out.at[ids, :].store(v, mask=m)` and `ml.store(out.at[ids], v,
mask=m)` store at computed places, as jnp's `.at[ids].set(v, mode="drop")`: indices outside are dropped, an
output written only by scatters starts at 0, an aliased one keeps the elements it does not write, and two
programs storing to one place is interpret mode's RaceError."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32


@mg.mgpu_kernel(out_shape=lambda x, i: x, grid=lambda x, i: (x.shape[0] // 128,))
def permute_rows(x, i, out):
  p = ml.program_id(0)
  out[i.at[ml.ds(p * 128, 128)][...], :] = x.at[ml.ds(p * 128, 128), :][...]


@mg.mgpu_kernel(out_shape=lambda x, i: x, grid=lambda x, i: (x.shape[0] // 128,))
def store_positive(x, i, out):
  p = ml.program_id(0)
  v = x.at[ml.ds(p * 128, 128), :][...]
  out.at[i.at[ml.ds(p * 128, 128)][...], :].store(v, mask=v > 0)


@mg.mgpu_kernel(out_shape=lambda x, i, *, n: x, grid=lambda x, i, *, n: (x.shape[0] // 128,))
def store_first_rows(x, i, out, *, n: ml.constexpr):
  p = ml.program_id(0)
  rows = p * 128 + ml.arange(128)
  ml.store(out.at[i.at[ml.ds(p * 128, 128)][...], :], x.at[ml.ds(p * 128, 128), :][...], mask=(rows < n)[:, None])


@mg.mgpu_kernel(out_shape=lambda x, i: S((300,), F32), grid=lambda x, i: (x.shape[0] // 128,))
def scatter_row_sums(x, i, out):
  p = ml.program_id(0)
  out[i.at[ml.ds(p * 128, 128)][...]] = ml.sum(x.at[ml.ds(p * 128, 128), :][...], axis=1)


@mg.mgpu_kernel(out_shape=lambda y: y, grid=(1,))
def transpose_by_pairs(y, out):
  r = ml.arange(128)[:, None] + ml.zeros((128, 128), jnp.int32)
  c = ml.arange(128)[None, :] + ml.zeros((128, 128), jnp.int32)
  out[c, r] = y[...]


@mg.mgpu_kernel(out_shape=lambda cache, new, slots: cache, grid=(1,), block=256, input_output_aliases={0: 0})
def write_cache(cache, new, slots, out):      # vLLM's reshape_and_cache: rows at their slots, in place
  out[slots[...], :] = new[...]


@mg.mgpu_kernel(out_shape=lambda v, i: S((256,), F32), grid=(2,))
def both_programs_store(v, i, out):
  out[i[...]] = v[...] + ml.program_id(0)      # (different values: the same ones are no race since probe 57g)


@mg.mgpu_kernel(out_shape=lambda v, i: S((256,), F32), grid=(1,))
def fill_then_scatter(v, i, out):
  out[...] = ml.full((256,), -1.0, F32)
  out[i[...]] = v[...]


@mg.mgpu_kernel(out_shape=lambda v, i: S((256,), jnp.bool_), grid=(1,))
def scatter_flags(v, i, out):
  out[i[...]] = v[...] > 0


def _data(dtype=F32, rows=256, places=300, seed=0):
  k1, k2 = rand.split(rand.key(seed))
  x = (rand.normal(k1, (rows, 64), F32) * 10).astype(dtype)
  ids = rand.permutation(k2, places)[:rows].astype(I32)      # some past the output's rows: dropped
  return x, ids


def _cases(dtype=F32):
  x, ids = _data(dtype)
  zeros = jnp.zeros_like(x)
  yield permute_rows, (x, ids), {}, zeros.at[ids].set(x, mode="drop")
  yield store_positive, (x, ids), {}, zeros.at[ids].set(jnp.where(x > 0, x, 0), mode="drop")
  yield store_first_rows, (x, ids), {"n": 200}, zeros.at[ids[:200]].set(x[:200], mode="drop")
  xf = x.astype(F32)
  yield scatter_row_sums, (xf, ids), {}, jnp.zeros(300, F32).at[ids].set(xf.sum(1))
  y = rand.normal(rand.key(9), (128, 128), F32)
  yield transpose_by_pairs, (y,), {}, y.T
  cache = jnp.arange(512 * 64, dtype=F32).reshape(512, 64).astype(dtype)
  slots = rand.permutation(rand.key(3), 512)[:256].astype(I32)
  yield write_cache, (cache, x, slots), {}, cache.at[slots].set(x)
  v = jnp.arange(128, dtype=F32) + 1
  yield fill_then_scatter, (v, ids[:128]), {}, jnp.full(256, -1.0, F32).at[ids[:128]].set(v, mode="drop")


def _close(got, want, dtype):
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                             rtol=1e-5 if dtype == F32 else 1e-2, atol=1e-3)


@pytest.mark.parametrize("case", range(7))
def test_scatters_match_jnp_in_interpret_mode(case):
  kernel, args, kw, want = list(_cases())[case]
  _close(kernel(*args, interpret=True, **kw), want, F32)


@pytest.mark.parametrize("case", range(7))
def test_scatters_export_for_cuda(case):
  kernel, args, kw, _ = list(_cases())[case]
  specs = [S(a.shape, a.dtype) for a in args]
  exported = jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*specs)
  assert "mosaic_gpu" in exported.mlir_module()


def test_two_programs_storing_to_one_place_is_a_race():
  v = jnp.arange(128, dtype=F32)
  ids = jnp.arange(128, dtype=I32)
  with pytest.raises(mg.RaceError) as info:
    both_programs_store(v, ids, interpret=True)
  assert "both access out[0]" in info.value.message
  assert info.value.hint.startswith("each place a scatter writes must come from one program")


def test_a_scatter_into_an_input_names_the_output():
  expect(scatter_into_input, [S((128,), F32), S((128,), I32)], mg.InputWriteError, "v[i[...]] = out[...]",
         "this scatter writes v, an input: inputs are read-only",
         hint="v is an input, which is read-only: scatter into an output (out) instead; scatter: out[i[...]] ="
              " out[...] (an output written only by scatters starts at 0; indices outside out are dropped, as"
              " jnp's .at[].set drops them)")


@mg.mgpu_kernel(out_shape=lambda v, i: v, grid=(1,))
def scatter_into_input(v, i, out):
  v[i[...]] = out[...]


@mg.mgpu_kernel(out_shape=lambda x, i: S((300, 64), jnp.bool_), grid=lambda x, i: (x.shape[0] // 128,))
def flag_rows(x, i, out):
  p = ml.program_id(0)
  out[i.at[ml.ds(p * 128, 128)][...], :] = x.at[ml.ds(p * 128, 128), :][...] > 0


@mg.mgpu_kernel(out_shape=lambda m, x, i: m, grid=(1,), input_output_aliases={0: 0})
def mark_in_place(m, x, i, out):
  out.at[i[...], :].store(x[...] > 0, mask=x[...] > 1)


def _bool_cases():
  x, ids = _data(F32)
  v, places = x[:128, 0], rand.permutation(rand.key(7), 256)[:128].astype(I32)
  yield scatter_flags, (v, places), jnp.zeros(256, bool).at[places].set(v > 0)
  yield flag_rows, (x, ids), jnp.zeros((300, 64), bool).at[ids].set(x > 0, mode="drop")
  m = rand.bernoulli(rand.key(3), 0.5, (300, 64))
  xs, i = x[:128] / 10, ids[:128]
  yield mark_in_place, (m, xs, i), m.at[i].set(jnp.where(xs > 1, xs > 0, m[i]), mode="drop")


@pytest.mark.parametrize("case", range(3))
def test_bool_scatters_match_jnp_in_interpret_mode_and_export(case):
  """A bool output written by scatters starts False (its zeros are bools at the kernel's boundary, where
  the kernel sees bytes); an aliased one keeps the input's flags."""
  kernel, args, want = list(_bool_cases())[case]
  got = kernel(*args, interpret=True)
  assert got.dtype == jnp.bool_
  np.testing.assert_array_equal(got, want)
  exported = jax.export.export(jax.jit(kernel), platforms=["cuda"])(*[S(a.shape, a.dtype) for a in args])
  assert "mosaic_gpu" in exported.mlir_module()


@pytest.mark.gpu
def test_gpu_bool_scatters_match_jnp():
  for kernel, args, want in _bool_cases():
    got = jax.jit(kernel)(*args)
    assert got.dtype == jnp.bool_
    np.testing.assert_array_equal(got, want)


def test_a_scatter_and_an_atomic_add_into_one_output_are_rejected():
  @mg.mgpu_kernel(out_shape=lambda v, i: S((256,), F32), grid=(1,))
  def set_and_add(v, i, out):
    out[i[...]] = v[...]
    ml.atomic_add(out.at[i[...]], v[...])
  with pytest.raises(mg.KernelTypeError) as info:
    set_and_add.check(S((128,), F32), S((128,), I32))
  assert info.value.message.startswith("out is updated with a scatter's stores and atomic add")
  assert "scatter the sum" in info.value.hint


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [F32, jnp.bfloat16, jnp.float16, jnp.int8], ids=str)
def test_gpu_scatters_match_jnp(dtype):
  for kernel, args, kw, want in _cases(dtype):
    got = jax.jit(lambda *a: kernel(*a, **kw))(*args)
    _close(got, want, dtype if kernel not in (scatter_row_sums, transpose_by_pairs, fill_then_scatter) else F32)


def test_a_scatter_under_vmap_scatters_each_batch_element_into_its_own_zeros():
  xs = rand.normal(rand.key(0), (3, 256, 64), F32)
  ids = jnp.stack([rand.permutation(rand.key(i), 300)[:256] for i in range(3)]).astype(I32)
  got = jax.vmap(lambda x, i: permute_rows(x, i, interpret=True))(xs, ids)
  want = jax.vmap(lambda x, i: jnp.zeros_like(x).at[i].set(x, mode="drop"))(xs, ids)
  np.testing.assert_array_equal(got, want)


def test_a_row_scatter_stores_each_register_in_one_vector_store():
  """A row's consecutive elements go out in one vector store where every element is kept (the rows inside
  the output; the user's mask), each element under its own bit otherwise; a transpose's places are not
  consecutive, so it stores element by element."""
  rows = [S((256, 64), F32), S((256,), I32)]
  for kernel in (permute_rows, store_positive):
    text = kernel.mlir(*rows)
    assert text.count("vector.store") > 0 and text.count("memref.store") > 0    # and the per-element fallback
  assert "vector.store" not in transpose_by_pairs.mlir(S((128, 128), F32))


@mg.mgpu_kernel(out_shape=lambda v, i: S((256,), F32), grid=(1,))
def scatter_by_call(v, i, out):
  ml.scatter(out, i[...], v[...])


def test_ml_scatter_names_the_plain_scatter():
  e = expect(scatter_by_call, [S((128,), F32), S((128,), I32)], mg.UnknownNameError, "ml.scatter",
             "ml has no attribute 'scatter'")
  assert e.hint.startswith("no ml.scatter: store at the indices, out[ids] = values")
  assert "ml.atomic_add(out.at[ids], values)" in e.hint
