"""Transposed SMEM operands (`buf.T`) and register A operands of ml.dot: numbers in interpret mode,
the Mosaic GPU module and CUDA export on the CPU, the GPU against both (-m gpu), and the
diagnostics of their misuse."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand as rnd
import mgpu_dsl as mg
from mgpu_dsl import language as ml
import mma_kernels as K
from locate import expect

S = jax.ShapeDtypeStruct
F16 = jnp.float16
DTYPES = [jnp.float16, jnp.bfloat16]


def rand(key, shape, dtype):
  return rnd.normal(rnd.key(key), shape, dtype)


def f32(x):
  return np.asarray(x, np.float32)


def chain_ref(a, b, c):
  s = jnp.asarray(f32(a) @ f32(b).T).astype(a.dtype)
  return f32(s) @ f32(c)


# (name, kernel, shapes, reference)
CASES = [
    ("a_bT_pipelined", K.dot_bt, [(128, 256), (256, 256)], lambda a, b: f32(a) @ f32(b).T),
    ("aT_b", K.dot_at, [(64, 128), (64, 128)], lambda a, b: f32(a).T @ f32(b)),
    ("registers_a", K.dot_chain, [(128, 64), (128, 64), (128, 64)], chain_ref),
    ("two_in_flight", K.two_dots_in_flight, [(128, 64)] * 3,
     lambda a, b, c: f32(a) @ f32(c).T - (f32(a) @ f32(b).T).max(1, keepdims=True)),
    ("overwrite_operand", K.overwrite_after_dot, [(128, 64), (64, 64)], lambda a, b: f32(a) @ f32(b).T),
    ("narrow_bT_8", K.dot_narrow_bt, [(64, 128), (8, 128)], lambda a, b: f32(a) @ f32(b).T),
    ("narrow_bT_24", K.dot_narrow_bt, [(128, 64), (24, 64)], lambda a, b: f32(a) @ f32(b).T),
    ("kT_only_pipelined", K.scores_kt_only, [(64, 64), (256, 64)],
     lambda q, k: sum(f32(q) @ f32(k[j * 64:(j + 1) * 64]).T for j in range(4))),
    ("peer_tiled_smem", K.peer_partial_sums, [(128, 64), (64, 64)],
     lambda a, b: (lambda p: p + np.concatenate([p[64:], p[:64]]))(f32(a) @ f32(b))),
    ("pipelined_from_1_bT", K.tiles_from_one, [(128, 256), (128, 256)],
     lambda a, bt: f32(a)[:, 64:] @ f32(bt)[:, 64:].T),
    ("pipelined_step_2", K.even_k_tiles, [(128, 256), (256, 128)],
     lambda a, b: sum(f32(a)[:, k:k + 64] @ f32(b)[k:k + 64] for k in (0, 128))),
    ("block256_row_max", K.two_warpgroup_row_max, [(256, 64), (64, 128)], lambda a, b: (f32(a) @ f32(b)).max(1)),
    ("k_substeps", K.k_substeps, [(128, 128), (128, 128)], lambda a, b: f32(a) @ f32(b)),
    ("window_rows_bT", K.window_rows_bt, [(192, 64), (256, 64)], lambda a, bt: f32(a)[64:] @ f32(bt)[128:].T),
    ("window_rows_2wg", K.window_rows_two_warpgroups, [(512, 64), (64, 128)], lambda a, b: f32(a)[256:] @ f32(b)),
    ("two_phase_loops", K.two_phase_loops, [(128, 320), (320, 128)],
     lambda a, b: (f32(a)[:, :128] @ f32(b)[:128]) * 0.5 + f32(a)[:, 128:] @ f32(b)[128:]),
    ("rows_of_result", K.peer_rows_of_result, [(128, 64), (64, 64)],
     lambda a, b: np.tile((lambda p: p[8:16] + p[72:80])(f32(a) @ f32(b)), (2, 1))),
]
IDS = [c[0] for c in CASES]


def args_of(shapes, dtype):
  return [rand(i, s, dtype) for i, s in enumerate(shapes)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name,kernel,shapes,ref", CASES, ids=IDS)
def test_interpret_matches_numpy(name, kernel, shapes, ref, dtype):
  args = args_of(shapes, dtype)
  got = kernel(*args, interpret=True)
  np.testing.assert_allclose(got, ref(*args), rtol=2e-2, atol=2e-2 * np.abs(ref(*args)).max())


@pytest.mark.parametrize("name,kernel,shapes,ref", CASES, ids=IDS)
def test_cuda_export_has_the_wgmma_calls(name, kernel, shapes, ref):
  specs = [S(s, F16) for s in shapes]
  text = kernel.mlir(*specs)
  assert "wgmma.mma_async" in text
  exported = jax.export.export(jax.jit(kernel), platforms=["cuda"])(*specs)
  assert "mosaic_gpu" in exported.mlir_module()


def test_transposed_view_is_a_view_with_the_swapped_shape():
  text = K.dot_bt.typed_ir(S((128, 128), F16), S((128, 128), F16))
  assert "ref<SMEM, 64x128, float16, T> = view" in text and "transpose=True" in text


def test_pipelined_transposed_operand_reads_this_iterations_stage():
  text = K.dot_bt.typed_ir(S((128, 256), F16), S((128, 256), F16), stages=3)
  line = next(x for x in text.splitlines() if "transpose=True" in x)
  assert "ref<SMEM, 3x128x64" not in line and "index=[%" in line    # a stage index first


@pytest.mark.parametrize("stages,ws", [(2, False), (3, False), (3, True)])
def test_a_loop_reading_its_loads_only_through_transposed_views_waits_for_its_dots(stages, ws):
  """A dot reading k_s.T reads k_s: the refill waits for it (DotWait) and reuses the previous
  iteration's stage. Once the loop counted no read at all and refilled the stage in use."""
  q, k = rand(1, (64, 64), F16), rand(2, (256, 64), F16)
  got = K.scores_kt_only(q, k, stages=stages, ws=ws, interpret=True)     # a RaceError before
  np.testing.assert_allclose(got, sum(f32(q) @ f32(k[j * 64:(j + 1) * 64]).T for j in range(4)), rtol=1e-3,
                             atol=1e-3)
  text = K.scores_kt_only.typed_ir(S((64, 64), F16), S((256, 64), F16), stages=stages, ws=ws)
  assert "dotwait pending=1" in text


def test_register_a_operand_takes_the_wgmma_layout():
  text = K.dot_chain.typed_ir(*[S((128, 64), F16)] * 3)
  assert "tensor<128x128, float16, wgmma> = cast" in text


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name,kernel,shapes,ref", CASES, ids=IDS)
def test_gpu_matches_interpret_and_numpy(name, kernel, shapes, ref, dtype):
  args = args_of(shapes, dtype)
  got = jax.jit(kernel)(*args)
  want = kernel(*args, interpret=True)
  np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
  np.testing.assert_allclose(got, ref(*args), rtol=2e-2, atol=2e-2 * np.abs(want).max())


# ---------------------------------------------------------------- diagnostics
def test_narrow_b_stored_k_by_n_is_padded_with_zero_columns():
  """n = 8 of a b stored (k, n) was MG501 (hinting b stored (n, k)); since probe 47e b's columns are padded."""
  rng = np.random.default_rng(4)
  a, b = (jnp.asarray(rng.standard_normal(s), F16) for s in ((64, 128), (128, 8)))
  np.testing.assert_allclose(np.asarray(K.dot_narrow_b(a, b, interpret=True)),
                             np.asarray(a, np.float32) @ np.asarray(b, np.float32), rtol=1e-3, atol=1e-3)



@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 128), jnp.float32))
def transpose_of_gmem(a, b, out):
  a_s = ml.smem(a.shape)
  ml.copy(a, a_s)
  out[...] = ml.dot(a_s, b.T)


def test_transpose_of_a_gmem_ref_is_rejected():
  e = expect(transpose_of_gmem, [S((128, 64), F16)] * 2, mg.KernelTypeError, "b.T",
             "b.T: only this CTA's SMEM buffers have a transposed view, not GMEM refs")
  assert "buf = ml.smem((128, 64), jnp.float16); ml.copy(b, buf)" in e.hint   # the user's ref, shape, dtype


@mg.mgpu_kernel(out_shape=lambda a: a)
def transpose_of_registers(a, out):
  out[...] = a[...].T


def test_transpose_of_a_register_tensor_goes_through_smem():
  a = np.arange(128 * 128).astype(np.float16).reshape(128, 128)
  np.testing.assert_array_equal(np.asarray(transpose_of_registers(a, interpret=True)), a.T)
  assert "transposestore" in transpose_of_registers.typed_ir(S((128, 128), F16))


@mg.mgpu_kernel(out_shape=lambda a: a)
def transpose_of_3d(a, out):
  a_s = ml.smem((2, 64, 64))
  ml.copy(a, a_s)
  out[...] = ml.dot(a_s.at[0], a_s.T)


def test_transpose_of_a_3d_buffer_is_rejected():
  e = expect(transpose_of_3d, [S((2, 64, 64), F16)], mg.KernelTypeError, "a_s.T",
             "a_s.T: .T transposes 2-D windows, got shape (2, 64, 64)")
  assert e.hint == "index the leading dimensions away first: buf.at[stage].T"


@mg.mgpu_kernel(out_shape=lambda a: S((64, 64), jnp.float32))
def view_of_transpose(a, out):
  a_s = ml.smem((64, 64))
  ml.copy(a, a_s)
  t = a_s.T
  out[...] = ml.dot(a_s, t.at[0:64])


def test_slicing_a_transposed_view_is_rejected():
  e = expect(view_of_transpose, [S((64, 64), F16)], mg.KernelTypeError, "t.at[0:64]",
             "t is transposed (.T); slice a buffer before transposing it, not after")
  assert e.hint == "buf.at[stage].T instead of buf.T.at[stage]"


@mg.mgpu_kernel(out_shape=lambda a: a)
def copy_of_transpose(a, out):
  a_s = ml.smem(a.shape)
  ml.copy(a, a_s)
  ml.copy(a_s.T, out)


def test_copying_a_transposed_view_is_rejected():
  e = expect(copy_of_transpose, [S((64, 64), F16)], mg.KernelTypeError, "ml.copy(a_s.T, out)",
             "cannot copy a_s.T: TMA copies move windows as they are stored; a transposed view (.T) is an"
             " ml.dot operand, or read and written from registers")
  assert e.hint.startswith("copy the buffer itself, and transpose in registers: buf.T[...]")


@mg.mgpu_kernel(out_shape=lambda a: a)
def read_of_transpose(a, out):
  a_s = ml.smem(a.shape)
  ml.copy(a, a_s)
  out[...] = a_s.T[...]


def test_reading_a_transposed_view_into_registers_transposes():
  a = np.arange(64 * 64, dtype=np.float16).reshape(64, 64)
  np.testing.assert_array_equal(np.asarray(read_of_transpose(a, interpret=True)), a.T)


@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 128), jnp.float32))
def register_a_f32(a, b, out):
  b_s = ml.smem(b.shape)
  ml.copy(b, b_s)
  x = a[...].astype(jnp.float32)
  out[...] = ml.dot(x, b_s)


def test_register_a_operand_of_float32_is_rejected_with_astype_hint():
  e = expect(register_a_f32, [S((128, 64), F16), S((64, 128), F16)], mg.UnsupportedDtypeError,
             "ml.dot(x, b_s)", "ml.dot takes operand a from registers in bfloat16 or float16 only, got x (float32)")
  assert e.hint == "convert it to b's dtype: ml.dot(x.astype(jnp.float16), ...)"


@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 128), jnp.float32))
def register_b(a, b, out):
  a_s = ml.smem(a.shape)
  ml.copy(a, a_s)
  out[...] = ml.dot(a_s, b[...])


def test_register_b_operand_is_stored_into_smem():
  """A register b was MG501; since probe 47e the compiler stores it into an SMEM buffer the dot reads."""
  rng = np.random.default_rng(3)
  a, b = (jnp.asarray(rng.standard_normal(s), F16) for s in ((128, 64), (64, 128)))
  np.testing.assert_allclose(np.asarray(register_b(a, b, interpret=True)),
                             np.asarray(a, np.float32) @ np.asarray(b, np.float32), rtol=1e-3, atol=1e-3)


def ir_lines(kernel, *specs):
  return [line.strip() for line in kernel.typed_ir(*specs).splitlines()]


def test_reading_an_older_dot_leaves_the_newer_one_in_flight():
  lines = ir_lines(K.two_dots_in_flight, *[S((128, 64), F16)] * 3)
  waits = [line.split("#")[0].strip() for line in lines if line.startswith("dotwait")]
  assert waits == ["dotwait pending=1", "dotwait pending=0"]
  # No CTA barrier after a wait: the buffers the dots read are never written again.
  assert not any(line.startswith("barrier") for line in lines)
  a, b, c = args_of([(128, 64)] * 3, F16)
  got = K.two_dots_in_flight(a, b, c, interpret=True)
  s1, s2 = f32(a) @ f32(b).T, f32(a) @ f32(c).T
  np.testing.assert_allclose(got, s2 - s1.max(1, keepdims=True), rtol=1e-5, atol=1e-3)


def test_overwriting_what_a_dot_read_meets_the_other_warpgroups_first():
  lines = ir_lines(K.overwrite_after_dot, S((128, 64), F16), S((64, 64), F16))
  ops = [line.split("= ")[-1].split()[0] if " = " in line else line.split()[0] for line in lines[1:]]
  i = ops.index("dotwait")
  assert ops[i + 1:].index("barrier") < ops[i + 1:].index("store")     # before the store, not at the wait
  a, b = args_of([(128, 64), (64, 64)], F16)
  want = (f32(a) @ f32(b).T).astype(np.float16)
  np.testing.assert_allclose(K.overwrite_after_dot(a, b, interpret=True), want)


@mg.mgpu_kernel(out_shape=lambda a: a)
def store_into_transpose(a, out):
  a_s = ml.smem(a.shape)
  a_s.T[...] = a[...]
  ml.copy(a_s, out)


def test_writing_a_transposed_view_transposes():
  a = np.arange(64 * 64, dtype=np.float16).reshape(64, 64)
  np.testing.assert_array_equal(np.asarray(store_into_transpose(a, interpret=True)), a.T)


@mg.mgpu_kernel(out_shape=lambda a: S((128, 128), jnp.float32), cluster=(2,), grid=(2,))
def transpose_of_peer(a, out):
  a_s = ml.smem(a.shape)
  ml.copy(a, a_s)
  ml.cluster_sync()
  out[...] = ml.dot(a_s, ml.cluster_ref(a_s, 1).T)


def test_transpose_of_another_ctas_buffer_is_rejected():
  e = expect(transpose_of_peer, [S((128, 64), F16)], mg.KernelTypeError, "ml.cluster_ref(a_s, 1).T",
             "ml.cluster_ref(a_s, 1).T: only this CTA's SMEM buffers have a transposed view, not another CTA's SMEM")
  assert "buf = ml.smem((128, 64), jnp.float16); buf[...] = ml.cluster_ref(a_s, 1)[...])" in e.hint
  assert "ml.dot(a_s, buf.T)" in e.hint


@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 128), jnp.float32))
def register_a_1d(a, b, out):
  b_s = ml.smem(b.shape)
  ml.copy(b, b_s)
  out[...] = ml.dot(a[...], b_s)


def test_register_a_operand_must_be_2d():
  e = expect(register_a_1d, [S((1024,), F16), S((64, 128), F16)], mg.MmaOperandError,
             "ml.dot(a[...], b_s)", "ml.dot operand a must be 2-D, got shape (1024,)")
  assert e.hint == "pass an (m, k) tile"


@mg.mgpu_kernel(out_shape=lambda x: x)
def exp2_approx_f16(x, out):
  out[...] = ml.exp2(x[...], approx=True)


def test_approximate_exp2_of_float16_is_rejected_with_a_float32_hint():
  e = expect(exp2_approx_f16, [S((128, 64), F16)], mg.UnsupportedDtypeError, "ml.exp2(x[...], approx=True)",
             "ml.exp2(..., approx=True) works on float32, got x[...] (float16)")
  assert e.hint == "compute in float32: ml.exp2(x[...].astype(jnp.float32), approx=True)"


@mg.mgpu_kernel(out_shape=lambda x: x)
def exp2_approx_not_bool(x, out):
  out[...] = ml.exp2(x[...], approx="fast")


def test_approximate_exp2_flag_must_be_a_bool():
  e = expect(exp2_approx_not_bool, [S((128, 64), jnp.float32)], mg.KernelTypeError, "ml.exp2(x[...], approx=\"fast\")",
             "ml.exp2's approx must be True or False, got 'fast'")
  assert e.hint == "ml.exp2(x[...], approx=True)"


@mg.mgpu_kernel(out_shape=lambda x: x)
def exp2_both_ways(x, out):
  out[...] = ml.exp2(x[...], approx=True) - ml.exp2(x[...])


def test_approximate_exp2_lowers_to_ex2_approx_and_interprets_as_exp2():
  spec = S((128, 64), jnp.float32)
  text = exp2_both_ways.mlir(spec)
  assert "ex2.approx.ftz.f32" in text
  x = jnp.linspace(-20, 20, 128 * 64, dtype=jnp.float32).reshape(128, 64)
  np.testing.assert_allclose(exp2_both_ways(x, interpret=True), np.zeros((128, 64)), atol=0)


@pytest.mark.gpu
def test_gpu_approximate_exp2_is_within_a_few_ulp():
  x = jnp.linspace(-20, 20, 128 * 64, dtype=jnp.float32).reshape(128, 64)
  got = jax.jit(exp2_both_ways)(x)
  assert float(jnp.max(jnp.abs(got) / jnp.exp2(x))) < 1e-6


@pytest.mark.parametrize("how", ["sum0", "argmax0"])
def test_reductions_along_the_warpgroups_rows_combine_their_parts(how):
  """At block=256 each warpgroup holds its own 128 rows of a dot result: the column sums came
  out wrong on the H200 (interpret mode and .check accepted them), then were MG204; since probe 62a
  each warpgroup reduces its rows and the parts meet in SMEM (tests/test_probe62a.py)."""
  a = rnd.normal(rnd.key(1), (256, 64), F16)
  b = rnd.normal(rnd.key(2), (64, 128), F16)
  text = K.two_warpgroup_reductions.mlir(S((256, 64), F16), S((64, 128), F16), how=how)
  assert text.count("gpu.barrier") >= 2          # the parts' exchange
  got = K.two_warpgroup_reductions(a, b, how=how, interpret=True)
  np.testing.assert_allclose(got, _full_reduction_reference(a, b, how), rtol=1e-4, atol=1e-4)
  jax.export.export(jax.jit(lambda a, b: K.two_warpgroup_reductions(a, b, how=how)), platforms=["cuda"])(
      S((256, 64), F16), S((64, 128), F16))


def _full_reduction_reference(a, b, how):
  acc = np.asarray(a, np.float32) @ np.asarray(b, np.float32)
  if how in ("sum0", "argmax0"):
    return (acc.sum(axis=0) if how == "sum0" else acc.argmax(axis=0)).astype(np.float32)
  return np.full((128,), acc.sum() if how == "full" else acc.max(axis=1).sum(), np.float32)


@pytest.mark.parametrize("how", ["full", "row_stat_sum"])
def test_full_reductions_of_a_split_tile_combine_the_warpgroups_parts(how):
  a = rnd.normal(rnd.key(1), (256, 64), F16)
  b = rnd.normal(rnd.key(2), (64, 128), F16)
  text = K.two_warpgroup_reductions.mlir(S((256, 64), F16), S((64, 128), F16), how=how)
  assert text.count("gpu.barrier") >= 2          # the parts' exchange
  got = K.two_warpgroup_reductions(a, b, how=how, interpret=True)
  np.testing.assert_allclose(got, _full_reduction_reference(a, b, how), rtol=1e-4)
  jax.export.export(jax.jit(lambda a, b: K.two_warpgroup_reductions(a, b, how=how)), platforms=["cuda"])(
      S((256, 64), F16), S((64, 128), F16))


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["full", "row_stat_sum", "sum0", "argmax0"])
def test_full_reductions_of_a_split_tile_gpu(how):
  a = rnd.normal(rnd.key(1), (256, 64), F16)
  b = rnd.normal(rnd.key(2), (64, 128), F16)
  got = jax.jit(lambda a, b: K.two_warpgroup_reductions(a, b, how=how))(a, b)
  np.testing.assert_allclose(got, _full_reduction_reference(a, b, how), rtol=1e-4, atol=1e-3 if how == "sum0" else 0)
