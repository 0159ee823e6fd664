"""Probe 22, second part (helpers writing kernels from the docs: the dtype matrix, cross-CTA work,
scans, the examples as a library, and the two reviews of the session's own changes). The first part,
tests/test_probe22.py, holds the Python of a kernel body, integers, pipelines, hints and ragged loops."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32

# ---------------------------------------------------------------- dtypes (probe of the dtype matrix)
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int32))
def mask_and_int(x, out):
  m = x[...] > 0
  out[...] = (m & 6) + (m | 2) * 10 + (m + 1) * 100


def test_a_boolean_meeting_a_python_int_computes_in_int32_as_jnp():
  x = jnp.array([-1.0, 0.0, 2.0, 3.0] * 32, F32)
  m = x > 0
  np.testing.assert_array_equal(mask_and_int(x, interpret=True), (m & 6) + (m | 2) * 10 + (m + 1) * 100)


_X64_SEED = """
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp, numpy as np, mgpu_dsl as mg
from mgpu_dsl import language as ml
SEED = 2 ** 40 + 7

@mg.mgpu_kernel(out_shape=lambda x, seed: x)
def noise_of(x, seed: ml.scalar, out):
    out[...] = ml.rand(seed, ml.arange(256))

@mg.mgpu_kernel(out_shape=lambda x: x)
def noise_fixed(x, out):
    out[...] = ml.rand(SEED, ml.arange(256))

x = jnp.zeros((256,), jnp.float32)
got = noise_of(x, jnp.int64(SEED), interpret=True)
np.testing.assert_array_equal(got, noise_fixed(x, interpret=True))
print("OK")
"""


def test_an_int64_seed_under_x64_is_its_two_halves(tmp_path):
  """It was MG003 (int32/uint32 only), though the docs offer jnp.int64 with x64."""
  import subprocess
  import sys
  script = tmp_path / "seed64.py"
  script.write_text(_X64_SEED)
  r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                     env={**__import__("os").environ, "MGPU_DSL_CACHE_DIR": "off"})
  assert r.stdout.strip().endswith("OK"), r.stdout + r.stderr


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] + 2, x.shape[1]), x.dtype))
def halo_rows(x, out):
  buf = ml.smem((x.shape[0] + 2, x.shape[1]), F32)
  ml.copy(x.at[ml.ds(-1, x.shape[0] + 2), :], buf)      # zeros above and below, read by TMA
  ml.copy(buf, out)


def test_a_copy_whose_constant_start_is_before_0_builds():
  """MG900 at export: a Python slice's -1 counted from the end."""
  x = rand.normal(rand.key(3), (16, 64), F32)
  np.testing.assert_array_equal(halo_rows(x, interpret=True), jnp.pad(x, ((1, 1), (0, 0))))
  halo_rows.check(S(x.shape, F32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def masked_smem_8bit(x, out):
  buf = ml.smem((256,), x.dtype)
  ml.copy(x, buf)
  v = buf.load(mask=ml.arange(256) < 200, other=0)
  buf.store(v, mask=ml.arange(256) >= 100)           # a masked SMEM store of 8-bit values too
  out[...] = buf[...]


@pytest.mark.parametrize("dtype", [jnp.int8, jnp.uint8, jnp.float8_e4m3fn], ids=str)
def test_masked_smem_accesses_of_8_bit_values_select_in_32_bits(dtype):
  """MG106 'ml.where is not supported on int8', about an ml.where the user never wrote."""
  x = (jnp.arange(256) % 100).astype(dtype)
  want = x.at[200:].set(0)
  np.testing.assert_array_equal(np.asarray(masked_smem_8bit(x, interpret=True), np.float32),
                                np.asarray(want, np.float32))
  masked_smem_8bit.check(S(x.shape, dtype))


@mg.mgpu_kernel(out_shape=lambda x: x)
def smem_float_other(x, out):
  buf = ml.smem((256,), x.dtype)
  ml.copy(x, buf)
  out[...] = buf.load(mask=ml.arange(256) < 200, other=0.5)


def test_a_float_other_for_an_integer_smem_window_is_mg104_as_from_gmem():
  expect(smem_float_other, [S((256,), jnp.int32)], mg.DtypeMismatchError, "buf.load",
         "ml.load's other (0.5) is a float but buf is int32", hint="an integer of int32: other=0")


COEFFS = np.array([0.5, -1.0, 2.0], np.float32)


@mg.mgpu_kernel(out_shape=lambda x: x)
def horner(x, out, *, c: ml.constexpr = (np.float32(1.0), np.float32(3.0))):
  v = x[...]
  acc = ml.zeros(v.shape, v.dtype) + COEFFS[0]
  for k in ml.static_range(1, 3):
    acc = acc * v + COEFFS[k]
  out[...] = acc * c[0] + c[1]


def test_numpy_scalars_from_arrays_and_constexpr_tuples_are_numbers():
  """`+ cannot take a Python float32`: NumPy scalars indexed out of arrays or tuples."""
  x = jnp.linspace(-2, 2, 128, dtype=F32)
  want = ((0.5 * x - 1.0) * x + 2.0) * 1.0 + 3.0
  np.testing.assert_allclose(horner(x, interpret=True), want, rtol=1e-6)


def test_an_autotuned_kernel_without_a_gpu_runs_the_first_config_that_builds():
  @mg.autotune(configs=[dict(bs=256), dict(bs=128)])
  @mg.mgpu_kernel(out_shape=lambda x, *, bs: x, grid=lambda x, *, bs: (x.shape[0] // bs,))
  def scale(x, out, *, bs: ml.constexpr):
    i = ml.program_id(0)
    out.at[ml.ds(i * bs, bs)][...] = x.at[ml.ds(i * bs, bs)][...] * 2
  x = jnp.arange(384, dtype=F32)
  np.testing.assert_array_equal(scale(x, interpret=True), x * 2)
  assert scale.best_config(x, interpret=True) == {"bs": 128}


def test_bench_wall_arguments_are_checked():
  with pytest.raises(mg.KernelTypeError, match="mg.bench_wall's iterations must be an int of at least 1, got 0"):
    mg.bench_wall(jnp.sin, jnp.ones(4), iterations=0)
  with pytest.raises(mg.KernelTypeError, match="each spec needs .shape and .dtype"):
    mg.check_specs(scale_kernel, "x: float32[1024]")   # (a list is a pytree input since probe 47c)


@mg.mgpu_kernel(out_shape=lambda x: x)
def scale_kernel(x, out):
  out[...] = x[...] * 2


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int32))
def arg_keepdims(x, out):
  v = x[...]
  out[...] = ml.argmax(v, axis=1, keepdims=True) + ml.argmin(v, axis=0, keepdims=True) * 100


def test_argmax_and_argmin_keep_their_axis_as_jnp():
  """keepdims was an unexpected keyword, with a hint (axis=None) that fails on 2-D tensors."""
  x = rand.normal(rand.key(4), (64, 128), F32)
  want = jnp.argmax(x, axis=1, keepdims=True) + jnp.argmin(x, axis=0, keepdims=True) * 100
  np.testing.assert_array_equal(arg_keepdims(x, interpret=True), want)


# ---------------------------------------------------------------- cross-CTA (probe of split work)
@mg.mgpu_kernel(out_shape=lambda x, *, other: (S((8,), F32),) * 2, grid=(8,))
def own_partial(x, acc, out, *, other: ml.constexpr):
  i = ml.program_id(0)
  ml.atomic_add(acc.at[i], ml.sum(x.at[ml.ds(i * 128, 128)][...]))
  out[i] = acc[(i + other) % 8]


def test_reading_back_only_what_this_program_adds_atomically_is_no_race():
  """Any read of an atomically updated output was a race, even of elements no other program touches."""
  x = jnp.arange(1024, dtype=F32)
  acc, out = own_partial(x, other=0, interpret=True)
  np.testing.assert_array_equal(acc, x.reshape(8, 128).sum(1))
  np.testing.assert_array_equal(out, acc)
  expect(own_partial, [S((1024,), F32)], mg.RaceError, "acc[(i + other) % 8]",
         "acc is read here while other programs may still be adding to it with atomics: programs run in no"
         " fixed order, so the value read depends on timing", other=1)


def test_a_run_time_shape_a_misplaced_cluster_and_reserved_names_are_launch_errors():
  @mg.mgpu_kernel(out_shape=lambda x, n: S((n,), F32), grid=(1,))
  def head(x, n: ml.scalar, out):
    out[...] = x.at[ml.ds(0, out.shape[0])][...]
  x = jnp.ones((256,), F32)
  with pytest.raises(mg.LaunchConfigError, match="out_shape gives an output whose shape holds a run-time value"):
    jax.jit(lambda x, n: head(x, n, interpret=True))(x, 128)
  for bad in (0, (), False):
    k = mg.mgpu_kernel(scale_kernel.fn, out_shape=lambda x: x, cluster=bad)
    with pytest.raises(mg.LaunchConfigError, match="cluster must be 1 to 3 positive ints"):
      k(x, interpret=True)
  aliased = mg.mgpu_kernel(scale_kernel.fn, out_shape=lambda x: x, input_output_aliases={np.int64(0): 0})
  np.testing.assert_array_equal(aliased(x, interpret=True), 2 * x)


@mg.mgpu_kernel(out_shape=lambda x: x)
def interpret_named(x, out, *, interpret: ml.constexpr = 1):
  out[...] = x[...] * interpret


@mg.mgpu_kernel(out_shape=lambda x: x)
def no_params():
  pass


def test_a_parameter_named_interpret_and_a_kernel_of_no_parameters_are_named():
  expect(interpret_named, [S((128,), F32)], mg.SignatureError, "interpret: ml",
         "a kernel parameter cannot be named interpret: kernel(..., interpret=True) is the call's switch to"
         " interpret mode")
  with pytest.raises(mg.SignatureError, match="no_params has no parameters"):
    no_params.check(S((128,), F32))


# ---------------------------------------------------------------- scans (probe of sequence kernels)
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def scans_in_a_loop(x, out):
  for c in range(x.shape[0] // 128):
    v = x.at[ml.ds(c * 128, 128)][...]
    v = ml.cumsum(ml.cumsum(v, axis=0), axis=1)
    v = ml.cumsum(ml.cumsum(v, axis=0, reverse=True), axis=1, reverse=True)
    out.at[ml.ds(c * 128, 128)][...] = v


def test_scratches_of_one_loop_body_share_smem():
  """Four 64 KiB scan scratches in a runtime loop lived through the whole loop: MG402 (265728 bytes)."""
  x = rand.normal(rand.key(5), (256, 128), F32)
  t = x.reshape(2, 128, 128)
  t = jnp.cumsum(jnp.cumsum(t, 1), 2)
  t = jnp.flip(jnp.cumsum(jnp.flip(t, 1), 1), 1)
  t = jnp.flip(jnp.cumsum(jnp.flip(t, 2), 2), 2)
  np.testing.assert_allclose(scans_in_a_loop(x, interpret=True), t.reshape(256, 128), rtol=1e-3, atol=5e-2)
  scans_in_a_loop.check(S(x.shape, F32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def clamp_low(x, out):
  lo = jnp.finfo(x.dtype).min
  out[...] = ml.maximum(x[...], lo) + np.finfo(np.float32).eps


@mg.mgpu_kernel(out_shape=lambda x: x)
def count_down(x, out):
  for c in range(3, -1, -1):
    out[...] = x[...]


def test_numpy_scalars_from_static_attributes_and_the_count_down_hint():
  x = jnp.array([-jnp.inf, 0.0, 1.0] + [2.0] * 125, F32)
  np.testing.assert_array_equal(clamp_low(x, interpret=True),
                                jnp.maximum(x, jnp.finfo(F32).min) + jnp.finfo(F32).eps)
  # a static negative step counts down, as in Python (probe 33c; it was MG003 with this hint)
  np.testing.assert_array_equal(count_down(x, interpret=True), x)


# ---------------------------------------------------------------- review of this session's changes
@ml.inline
def next_pow2(n):
  return 1 if n <= 1 else 2 * next_pow2((n + 1) // 2)


@mg.mgpu_kernel(out_shape=lambda x: x)
def uses_recursion(x, out, *, act: ml.constexpr = None):
  out[...] = x[...] * next_pow2(3)


def test_a_recursive_helper_and_a_helper_constexpr_have_a_disk_key():
  """value_text of a helper fingerprinted its helpers again, without end (RecursionError)."""
  from mgpu_dsl import deps as D
  assert D.value_text(next_pow2).startswith("inline:")
  assert D.Dependencies(uses_recursion.fn).fingerprint() is not None


HALF = {ml.float16, ml.bfloat16}
OFFSETS = {ml.float16: 100.0, ml.bfloat16: 100.0}


@mg.mgpu_kernel(out_shape=lambda x: x)
def dtype_sets(x, out):
  v = x[...].astype(jnp.float32)
  if x.dtype in HALF:
    v = v + OFFSETS[x.dtype]
  out[...] = v.astype(x.dtype)


@mg.mgpu_kernel(out_shape=lambda x: x)
def static_tuple_in_loop(x, out):
  tile = (128,)
  shp = (128,)
  acc = ml.zeros(tile, F32)
  for i in range(2):
    w = 128
    tile = (w,)
    v = x.at[ml.ds(i * 128, 128)][...]
    shp = v.shape
    acc = acc + v
  out.at[ml.ds(0, 128)][...] = acc + ml.zeros(shp, F32) + ml.zeros(tile, F32)
  out.at[ml.ds(128, 128)][...] = acc


@mg.mgpu_kernel(out_shape=lambda x: x, input_output_aliases={0: 0})
def aliased_through_input(x, out):
  x[...] = x[...] + 1
  out = None


def test_review_of_the_sessions_changes():
  x = jnp.ones((128,), jnp.float16)
  np.testing.assert_array_equal(dtype_sets(x, interpret=True), x + 100)      # a set of DTypes finds x.dtype
  y = jnp.arange(256, dtype=F32)
  got = static_tuple_in_loop(y, interpret=True)
  np.testing.assert_array_equal(got[:128], y[:128] + y[128:])                 # tile, shp stayed static
  np.testing.assert_array_equal(aliased_through_input(y, interpret=True), y + 1)   # aliased: no MG602


@mg.mgpu_kernel(out_shape=lambda x: x)
def clamp_bf16(x, out):
  out[...] = ml.maximum(x[...], jnp.finfo(x.dtype).min) + jnp.finfo(x.dtype).eps


@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.int32))
def in_scalar(x, out):
  i = ml.program_id(0)
  out[...] = ml.where(i in (0, 1), 1, 0) + ml.zeros((128,), jnp.int32)


@mg.mgpu_kernel(out_shape=lambda x: x)
def round_digits(x, out):
  out[...] = round(x[...], 2)


@mg.mgpu_kernel(out_shape=lambda x: x)
def and_f8(x, out):
  out[...] = x[...] & x[...]


def test_docs_audit_bfloat16_finfo_and_hints():
  x = jnp.array([-jnp.inf, 0.0, 1.0] + [2.0] * 125, jnp.bfloat16)
  want = jnp.maximum(x, jnp.finfo(jnp.bfloat16).min) + jnp.finfo(jnp.bfloat16).eps
  np.testing.assert_array_equal(np.asarray(clamp_bf16(x, interpret=True), np.float32), np.asarray(want, np.float32))
  # `i in (0, 1)` of a run-time scalar is Python's value (probe 45c; it was MG001 with the hint (i == 0) | (i == 1))
  np.testing.assert_array_equal(np.asarray(in_scalar(x.astype(F32), interpret=True)), np.full(128, int(0 in (0, 1))))
  v = jnp.linspace(-3, 3, 128, dtype=F32)        # round(x, 2) is ml.round(x, 2), as numpy's (was MG003)
  np.testing.assert_array_equal(np.asarray(round_digits(v, interpret=True)),
                                np.asarray(jnp.round(v, 2)))     # (jnp's: XLA multiplies by 1/100; probe 53h)
  expect(and_f8, [S((128,), jnp.float8_e5m2)], mg.UnsupportedDtypeError, "x[...] & x[...]",
         "& needs integer operands, got float8_e5m2")


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,), input_output_aliases={0: 0})
def ws_reads_back(x, out, *, back: ml.constexpr):
  x_s, o_s = ml.smem((64, 128)), ml.smem((64, 128))
  for t in ml.range(8, 32, stages=2, warp_specialize=True):
    ml.copy(x.at[ml.ds((t - back) * 64, 64)], x_s)
    o_s[...] = x_s[...] + 1
    ml.copy(o_s, out.at[ml.ds(t * 64, 64)])


def test_a_warp_specialised_loop_reading_back_an_earlier_trips_store_is_rejected():
  """The producer's TMA load of tile t - 8 did not wait for the consumers' TMA store of it (trip t - 8):
  a race on the GPU that check and export accepted (the software pipeline waits)."""
  expect(ws_reads_back, [S((32 * 64, 128), F32)], mg.WarpSpecializeError, "ml.copy(x.at",
         "this load reads x, which an earlier trip of this warp-specialised loop writes (through out, its"
         " alias): the producer's loads do not wait for the consumers' stores", back=8)
  x = rand.normal(rand.key(6), (32 * 64, 128), F32)
  got = ws_reads_back(x, back=-1, interpret=True)      # reading ahead (a tile later trips write) is fine
  t = x.reshape(32, 64, 128)
  want = jnp.concatenate([t[:8], t[9:] + 1, jnp.ones((1, 64, 128), F32)]).reshape(x.shape)
  np.testing.assert_array_equal(got, want)


@mg.mgpu_kernel(out_shape=lambda x, r: x, grid=lambda x, r: (x.shape[0] // 128,))
def permute_own_tile(x, r, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]
  rows = r.at[ml.ds(i * 128, 128)][...]
  tile = out.at[ml.ds(i * 128, 128)]
  v = tile[rows, :]                                   # a gather of this program's own rows
  tile[...] = v


def test_a_gather_from_this_programs_own_window_of_an_output_is_no_certain_race():
  """The gather's window was taken as the whole output, read for certain: a compile-time MG951."""
  x = rand.normal(rand.key(7), (256, 64), F32)
  r = jnp.concatenate([rand.permutation(rand.key(8), 128)] * 2).astype(jnp.int32)
  want = jnp.concatenate([x[:128][r[:128]], x[128:][r[128:]]])
  np.testing.assert_array_equal(permute_own_tile(x, r, interpret=True), want)


@mg.mgpu_kernel(out_shape=lambda cache, new: cache, grid=lambda cache, new: (new.shape[0] // 8,),
                input_output_aliases={0: 0})
def append_rows(cache, new, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 8, 8), :][...] = new.at[ml.ds(i * 8, 8), :][...]


def test_an_aliased_kernel_with_no_programs_returns_its_input_unchanged():
  """MG007 'non-empty outputs would be left unwritten': an aliased output holds the input's values."""
  cache = jnp.arange(16 * 128, dtype=F32).reshape(16, 128)
  got = append_rows(cache, jnp.zeros((0, 128), F32), interpret=True)
  np.testing.assert_array_equal(got, cache)


def test_autotune_with_a_python_number_for_an_ml_scalar_and_a_symbolic_vmap_batch():
  @mg.autotune(configs=[dict(bm=64), dict(bm=128)])
  @mg.mgpu_kernel(out_shape=lambda x, a, *, bm: x, grid=lambda x, a, *, bm: (x.shape[0] // bm,))
  def scale(x, a: ml.scalar, out, *, bm: ml.constexpr):
    i = ml.program_id(0)
    out.at[ml.ds(i * bm, bm)][...] = x.at[ml.ds(i * bm, bm)][...] * a
  x = jnp.ones((256,), F32)
  assert scale.best_config(x, 2.0) == {"bm": 64}            # 'float' object has no attribute 'shape'
  b = jax.export.symbolic_shape("b")[0]
  with pytest.raises(mg.SignatureError, match="jax.vmap over a batch of symbolic size b"):
    jax.export.export(jax.jit(jax.vmap(scale_kernel)), platforms=["cuda"])(S((b, 128), F32))


# ---------------------------------------------------------------- second review
@mg.mgpu_kernel(out_shape=lambda x: (S((8,), F32),) * 2, grid=(8,))
def maybe_update_neighbour(x, acc, out):
  i = ml.program_id(0)
  s = ml.sum(x.at[ml.ds(i * 128, 128)][...])
  if s > 0.0:                                     # data-dependent: may happen
    ml.atomic_add(acc.at[(i + 1) % 8], s)
  out[i] = acc[i]


def test_a_read_racing_with_an_update_that_may_happen_stays_a_race():
  expect(maybe_update_neighbour, [S((1024,), F32)], mg.RaceError, "acc[i]",
         "acc is read here while other programs may still be adding to it with atomics: programs run in no"
         " fixed order, so the value read depends on timing")


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def filled_once(x, out):
  for i in range(4):
    tab = ml.smem((128,), F32)
    if i == 0:
      tab[...] = x.at[ml.ds(0, 128)][...]
    tmp = ml.smem((128,), F32)
    tmp[...] = tab[...] * 2
    out.at[ml.ds(i * 128, 128)][...] = tmp[...] + i.astype(F32)


def test_a_users_buffer_in_a_loop_body_keeps_the_whole_loop():
  """Only compiler scratches live from first to last use in a loop body: tab (filled on trip 0) and
  tmp shared memory, and trips 1-3 would read tmp's data on the GPU."""
  from mgpu_dsl.frontend.smem import plan_smem
  hit = filled_once._compile((S((512,), F32),), {})
  plan = plan_smem(hit["kernel"], {})
  assert len(set(plan.offsets)) == len(plan.offsets)          # every buffer its own place
  x = jnp.arange(512, dtype=F32)
  want = jnp.concatenate([x[:128] * 2 + i for i in range(4)])
  np.testing.assert_array_equal(filled_once(x, interpret=True), want)


@mg.mgpu_kernel(out_shape=lambda x: x, input_output_aliases={0: 0})
def aliased_rebound(x, out):
  out = x[...] + 1


def test_an_aliased_output_rebound_without_any_write_is_reported():
  expect(aliased_rebound, [S((128,), F32)], mg.UncoveredOutputError, "out = x",
         "out is an output, and this assignment rebinds the name: nothing writes the output")


# ---------------------------------------------------------------- the examples as a library (round 2)
def test_the_examples_refuse_inputs_they_would_get_wrong():
  import sys, os
  sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
  import attention as AT
  import paged_attention as PA
  import quickstart as QS
  q = jnp.ones((1, 128, 1, 64), jnp.float16)
  with pytest.raises(ValueError, match="sm_scale must be positive"):       # -inf masks times a negative scale: NaN
    AT.attention(q, q, q, sm_scale=-0.125, interpret=True)
  q128 = jnp.ones((1, 100, 1, 128), jnp.float16)     # (100 rows at head_dim 128 were refused: now padded)
  assert AT.attention(q128, q128, q128, interpret=True).shape == q128.shape
  with pytest.raises(ValueError, match="kv_heads dividing"):
    AT.attention(q, q[:, :, :0], q[:, :, :0], interpret=True)
  qp = jnp.ones((1, 128, 64), jnp.float16)
  pages = jnp.ones((1, 8, 16, 64), jnp.float16)
  tables, lengths = jnp.zeros((1, 8), jnp.int32), jnp.full((1,), 16, jnp.int32)
  with pytest.raises(ValueError, match="at most 64 query heads a kv head, got 128"):
    PA.paged_attention(qp, pages, pages, tables, lengths, tensor_cores=True, interpret=True)
  got = PA.paged_attention(qp[:, :4], pages, pages, tables, lengths, splits=np.int64(2), interpret=True)
  assert got.shape == (1, 4, 64)                                     # a NumPy int splits: accepted
  with pytest.raises(mg.SignatureError, match="gelu_mul needs x and y of one shape"):
    QS.gelu_mul(jnp.ones((128, 64), F32), jnp.ones((64, 64), F32), interpret=True)
