"""Interpret mode (lowering/interpret.py): kernels run on the CPU, checked against jnp.

No GPU: every kernel here goes through the public API with interpret=True (or
MGPU_DSL_INTERPRET=1), so the same typed IR the GPU would get is run by numpy.
"""
import copy
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand as rnd
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend import ops as O
from mgpu_dsl.lowering import interpret as interp

import kernels as K

RTOL = {jnp.float32: 1e-6, jnp.float16: 2e-3, jnp.bfloat16: 1.6e-2}


def rand(shape, dtype=jnp.float32, seed=0):
  return rnd.normal(rnd.key(seed), shape, dtype)


def close(got, want, dtype=jnp.float32):
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                             rtol=RTOL[dtype], atol=RTOL[dtype])


def def_line(kfn) -> int:
  lines, first = inspect.getsourcelines(kfn.fn)
  return first + next(i for i, l in enumerate(lines) if l.lstrip().startswith("def "))


def line_of(kfn, text) -> int:
  lines, first = inspect.getsourcelines(kfn.fn)
  return first + next(i for i, l in enumerate(lines) if text in l)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,), interpret=True)
def double(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, 64))
  ml.copy(x.at[ml.ds(i * 128, 128), :], buf)
  buf[...] = buf[...] * 2
  ml.copy(buf, out.at[ml.ds(i * 128, 128), :])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,), interpret=True)
def elementwise(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  v = buf[...]
  r = ml.where(v > 0, ml.exp(v), ml.maximum(v * 0.5, -1.0))
  buf[...] = (r.astype(jnp.float32) * 3.0 + 1.0).astype(x.dtype)
  ml.copy(buf, out.at[ml.ds(i * 128, 128)])


def test_design_double():
  x = rand((1024, 64))
  np.testing.assert_array_equal(double(x), x * 2)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float16, jnp.bfloat16])
def test_elementwise_dtypes(dtype):
  x = rand((256, 64), dtype)
  v = x
  r = jnp.where(v > 0, jnp.exp(v), jnp.maximum(v * dtype(0.5), dtype(-1.0)))
  want = (r.astype(jnp.float32) * 3.0 + 1.0).astype(dtype)
  got = elementwise(x)
  assert got.dtype == dtype and got.shape == x.shape
  close(got, want, dtype)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float16, jnp.bfloat16])
def test_shared_fused_kernel(dtype):
  x, y = rand((128, 64), dtype, 1), rand((128, 64), dtype, 2)
  a, b = x.astype(jnp.float32), y.astype(jnp.float32)
  want = jnp.where(a > 0, jnp.exp(a) * b, jnp.maximum(a, b) - 1.0).astype(dtype)
  close(K.fused(x, y, interpret=True), want, dtype)


def test_narrow_floats_round_after_every_op():
  @mg.mgpu_kernel(out_shape=lambda x: x, interpret=True)
  def k(x, out):
    out[...] = (x[...] + 1.0) - 1.0
  x = jnp.full((128,), 1e-3, jnp.float16)      # 1 + 1e-3 rounds to 1.0009765625 in f16
  np.testing.assert_array_equal(k(x), (x + jnp.float16(1)) - jnp.float16(1))
  assert float(k(x)[0]) != 1e-3


def test_shared_kernels_double_if_and_register_gmem():
  x = rand((512, 64))
  np.testing.assert_array_equal(K.double(x, interpret=True), x * 2)
  odd = (jnp.arange(512) // 128 % 2 == 1)[:, None]
  np.testing.assert_array_equal(K.scale_odd_programs(x, interpret=True), jnp.where(odd, x * 3, -x))
  xi = rand((2048,))
  close(K.add_iota(xi, interpret=True), xi + (jnp.arange(2048) % 1024).astype(jnp.float32))


def test_dynamic_loop_carries_a_register_accumulator():
  x = rand((512, 64))
  close(K.row_block_sum(x, n=4, interpret=True), x.reshape(4, 128, 64).sum(0))

  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,), interpret=True)
  def prefix(x, out):
    """Program i sums row blocks 0..i: the loop's bound is a runtime value."""
    i = ml.program_id(0)
    buf = ml.smem((128, 64))
    acc = ml.zeros((128, 64), jnp.float32)
    count = 0
    for k in range(i + 1):
      ml.copy(x.at[ml.ds(k * 128, 128)], buf)
      acc = acc + buf[...]
      count = count + 1
    buf[...] = acc / ml.full((128, 64), count, jnp.int32).astype(jnp.float32)
    ml.copy(buf, out.at[ml.ds(i * 128, 128)])

  blocks = x.reshape(4, 128, 64)
  want = jnp.cumsum(blocks, 0) / jnp.arange(1, 5, dtype=jnp.float32)[:, None, None]
  close(prefix(x), want.reshape(512, 64), jnp.float16)


def test_if_on_program_id_and_2d_grid():
  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128, x.shape[1] // 64),
                  interpret=True)
  def tiles(x, out):
    i, j = ml.program_id(0), ml.program_id(1)
    buf = ml.smem((128, 64))
    ml.copy(x.at[ml.ds(i * 128, 128), ml.ds(j * 64, 64)], buf)
    v = buf[...]
    if j == ml.num_programs(1) - 1:
      v = v + 100.0
    else:
      v = v - (i * 10).astype(jnp.float32)
    buf[...] = v
    ml.copy(buf, out.at[ml.ds(i * 128, 128), ml.ds(j * 64, 64)])

  x = rand((384, 192))
  i = (jnp.arange(384) // 128)[:, None].astype(jnp.float32)
  last = (jnp.arange(192) // 64 == 2)[None, :]
  close(tiles(x), jnp.where(last, x + 100, x - i * 10))


def test_constexpr_parameters():
  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x, n: (x.shape[0] // (128 * n),), interpret=True)
  def scale(x, out, *, n: ml.constexpr):
    i = ml.program_id(0)
    for r in ml.static_range(n):
      row = (i * n + r) * 128
      out.at[ml.ds(row, 128)][...] = x.at[ml.ds(row, 128)][...] * n
  x = rand((1024,))
  np.testing.assert_array_equal(scale(x, n=4), x * 4)
  np.testing.assert_array_equal(scale(x, n=2), x * 2)


def test_inside_jit_and_vmap():
  x = rand((256, 64))
  np.testing.assert_array_equal(jax.jit(double)(x), x * 2)
  np.testing.assert_array_equal(jax.jit(lambda a: double(a + 1.0) - 1.0)(x), (x + 1) * 2 - 1)
  xs = jnp.stack([x, -x])
  np.testing.assert_array_equal(jax.vmap(double)(xs), xs * 2)


def test_env_var_turns_interpret_mode_on(monkeypatch):
  calls = []
  run = interp.run
  monkeypatch.setattr(interp, "run", lambda *a: calls.append(a) or run(*a))
  monkeypatch.setenv("MGPU_DSL_INTERPRET", "1")
  x = rand((256, 64))
  np.testing.assert_array_equal(K.double(x), x * 2)
  assert len(calls) == 1


def test_integer_semantics_match_the_gpu():
  spec = lambda x: (x, x, x, jax.ShapeDtypeStruct(x.shape, jnp.int32))

  @mg.mgpu_kernel(out_shape=lambda x, f: spec(x), interpret=True)
  def ints(x, f, q, r, w, c):
    v = x[...]
    q[...] = v // 3          # arith.floordivsi: floor
    r[...] = v % -3          # floors, as in Python: the sign of the divisor
    w[...] = v * 1000000     # int32 wraps
    c[...] = f[...].astype(jnp.int32)   # truncates toward zero, saturates, NaN -> 0

  x = jnp.arange(-64, 64, dtype=jnp.int32) * 77777
  f = jnp.array([2.7, -2.7, 1e10, -1e10, jnp.nan, 0.5, -0.5, 3.0] * 16, jnp.float32)
  q, r, w, c = ints(x, f)
  xn = np.asarray(x)
  np.testing.assert_array_equal(q, np.floor_divide(xn, 3))
  np.testing.assert_array_equal(r, np.mod(xn, -3))
  assert all(int(a) // -3 * -3 + int(b) == int(a) for a, b in zip(xn, np.asarray(r)))
  np.testing.assert_array_equal(w, (xn.astype(np.int64) * 1000000).astype(np.int32))
  np.testing.assert_array_equal(c[:8], [2, -2, 2**31 - 1, -2**31, 0, 0, 0, 3])


def test_unary_ops_arange_and_minimum():
  @mg.mgpu_kernel(out_shape=lambda x: (x,) * 4, interpret=True)
  def un(x, a, b, c, d):
    v = ml.abs(x[...]) + 0.5
    a[...] = ml.sqrt(v) + ml.rsqrt(v)
    b[...] = ml.log(v) - ml.exp2(-v)
    c[...] = ml.tanh(-x[...])
    d[...] = ml.minimum(ml.arange(128).astype(jnp.float32), 64.0)
  x = rand((128,))
  a, b, c, d = un(x)
  v = np.abs(np.asarray(x)) + 0.5
  np.testing.assert_allclose(a, np.sqrt(v) + 1 / np.sqrt(v), rtol=1e-6)
  np.testing.assert_allclose(b, np.log(v) - np.exp2(-v), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(c, np.tanh(-np.asarray(x)), rtol=1e-6)
  np.testing.assert_array_equal(d, np.minimum(np.arange(128), 64))


def test_tma_copies_clip_at_the_edge_and_unwritten_outputs_are_poison():
  x = rand((300, 64))                    # the last tile is partly outside x
  @mg.mgpu_kernel(out_shape=lambda x: x, grid=(3,), interpret=True)
  def ragged(x, out):
    i = ml.program_id(0)
    buf = ml.smem((128, 64))
    ml.copy(x.at[ml.ds(i * 128, 128)], buf)
    buf[...] = buf[...] * 2
    ml.copy(buf, out.at[ml.ds(i * 128, 128)])
  np.testing.assert_array_equal(ragged(x), x * 2)

  @mg.mgpu_kernel(out_shape=lambda x: x, interpret=True)
  def half(x, out):
    out.at[0:128][...] = x.at[0:128][...]
  with pytest.raises(mg.UncoveredOutputError, match=r"out\[128:256\] is never written"):
    half(rand((256,)))         # unwritten output elements are rejected, never returned as poison


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,), cluster=(2,),
                interpret=True)
def swap(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, 64))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  ml.cluster_sync()
  out.at[ml.ds(i * 128, 128)][...] = ml.cluster_ref(buf, (i + 1) % 2)[...]
  ml.cluster_sync()


def test_cluster_ref_reads_the_peer_ctas_smem():
  x = rand((512, 64))
  np.testing.assert_array_equal(swap(x), x.reshape(2, 2, 128, 64)[:, ::-1].reshape(512, 64))


def test_shared_swap_pairs_kernel():
  x = rand((512, 64))
  np.testing.assert_array_equal(K.swap_pairs(x, interpret=True),
                                x.reshape(2, 2, 128, 64)[:, ::-1].reshape(512, 64))


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), jnp.float32),
                grid=lambda a, b: (a.shape[0] // 128, b.shape[1] // 128), interpret=True)
def matmul(a, b, out):
  i, j = ml.program_id(0), ml.program_id(1)
  a_s = ml.smem((128, 64))
  b_s = ml.smem((64, 128))
  acc = ml.zeros((128, 128), jnp.float32)
  for k in range(a.shape[1] // 64):
    ml.copy(a.at[ml.ds(i * 128, 128), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 128, 128)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  o = ml.smem((128, 128), jnp.float32)
  o[...] = acc
  ml.copy(o, out.at[ml.ds(i * 128, 128), ml.ds(j * 128, 128)])


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_matmul_with_dot(dtype):
  a, b = rand((256, 256), dtype, 1), rand((256, 384), dtype, 2)
  want = jnp.dot(a, b, preferred_element_type=jnp.float32)
  np.testing.assert_allclose(matmul(a, b), want, rtol=1e-4, atol=1e-4)


def test_dot_operand_overwritten_while_the_dot_runs_is_a_race():
  a, b = rand((128, 256), jnp.float16), rand((256, 128), jnp.float16)
  hit = matmul._compile((a, b), {})
  kernel = copy.deepcopy(hit["kernel"])
  loop = next(o for o in kernel.body.ops if isinstance(o, O.For))
  loop.body.ops[:] = [o for o in loop.body.ops if not isinstance(o, O.DotWait)]
  with pytest.raises(interp.RaceError, match="while an ml.dot may still be reading it") as e:
    interp.run(kernel, [a, b], hit["out_specs"])
  assert e.value.lineno == line_of(matmul, "ml.copy(a.at")
  assert f":{line_of(matmul, 'ml.dot(')}:" in str(e.value)
  a, b = rand((128, 64), jnp.float16), b[:64]      # one iteration: the result is read after the loop
  hit = matmul._compile((a, b), {})
  kernel = copy.deepcopy(hit["kernel"])
  loop = next(o for o in kernel.body.ops if isinstance(o, O.For))
  loop.body.ops[:] = [o for o in loop.body.ops if not isinstance(o, O.DotWait)]
  with pytest.raises(interp.RaceError, match="read before its ml.dot finished") as e:
    interp.run(kernel, [a, b], hit["out_specs"])
  assert e.value.lineno == line_of(matmul, "o[...] = acc")


def test_tma_store_after_a_barrier_still_needs_a_fence():
  @mg.mgpu_kernel(out_shape=lambda x: (x, jax.ShapeDtypeStruct((128, 64), x.dtype)), interpret=True)
  def k(x, out, top):
    buf = ml.smem((256, 64), jnp.float32)
    buf[...] = x[...] * 2
    top[...] = buf.at[0:128][...]      # another window: the sync pass inserts a Barrier
    ml.copy(buf, out)
  x = rand((256, 64))
  np.testing.assert_array_equal(k(x)[0], x * 2)


# ---------------------------------------------------------------- race reports
def test_two_programs_writing_the_same_rows_is_a_race():
  @mg.mgpu_kernel(out_shape=lambda x, o: jax.ShapeDtypeStruct((128, 64), x.dtype), grid=(2,), interpret=True)
  def racy(x, offsets, out):
    buf = ml.smem((128, 64))
    ml.copy(x.at[0:128], buf)
    ml.copy(buf, out.at[ml.ds(ml.max(offsets[...]), 128)])    # a window from data: found at run time
  with pytest.raises(interp.RaceError) as e:
    racy(rand((256, 64)), jnp.zeros((128,), jnp.int32))
  assert e.value.lineno == line_of(racy, 'ml.copy(buf, out')    # at the access that races (was the def)
  assert isinstance(e.value, mg.KernelError) and e.value.code == "MG951"
  assert "(0, 0, 0)" in str(e.value) and "(1, 0, 0)" in str(e.value) and "out[0, 0]" in str(e.value)
  assert f":{line_of(racy, 'ml.copy(buf, out')}:" in str(e.value)     # the note names the copy


def test_read_before_the_async_copy_landed_is_located():
  x = rand((256, 64))
  hit = double._compile((x,), {})
  kernel = copy.deepcopy(hit["kernel"])
  kernel.body.ops[:] = [o for o in kernel.body.ops if not isinstance(o, O.WaitLoad)]
  with pytest.raises(interp.RaceError, match="read before its async copy landed") as e:
    interp.run(kernel, [x], hit["out_specs"])
  assert e.value.lineno == line_of(double, "buf[...] = buf[...] * 2")
  assert f":{line_of(double, 'ml.copy(x.at')}:" in str(e.value)
  np.testing.assert_array_equal(double(x), x * 2)      # the cached kernel is untouched


def test_tma_store_without_fence_is_a_race():
  x = rand((256, 64))
  hit = double._compile((x,), {})
  kernel = copy.deepcopy(hit["kernel"])
  kernel.body.ops[:] = [o for o in kernel.body.ops if not isinstance(o, O.CommitShared)]
  with pytest.raises(interp.RaceError, match="without a fence") as e:
    interp.run(kernel, [x], hit["out_specs"])
  assert e.value.lineno == line_of(double, "ml.copy(buf, out")


def test_race_inside_jit_is_reported_through_the_callback():
  @mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((128,), x.dtype), grid=(2,), interpret=True)
  def racy(x, out):
    out.at[0:128][...] = x.at[0:128][...]
  with pytest.raises(Exception, match="MG951"):
    jax.block_until_ready(jax.jit(racy)(rand((256,))))


def test_cluster_peers_touching_smem_between_syncs_is_a_race():
  # (the peer's index is read from data: known only at run time, so left to interpret mode)
  @mg.mgpu_kernel(out_shape=lambda x, one: x, grid=(2,), cluster=(2,), interpret=True)
  def k(x, one, out):
    i = ml.program_id(0)
    buf = ml.smem((128,), jnp.float32)
    buf[...] = x.at[ml.ds(i * 128, 128)][...]
    out.at[ml.ds(i * 128, 128)][...] = ml.cluster_ref(buf, (i + ml.max(one[...])) % 2)[...]
    ml.cluster_sync()
  with pytest.raises(interp.RaceError, match="between the same two ml.cluster_sync") as e:
    k(rand((256,)), jnp.ones((128,), jnp.int32))
  write, read = line_of(k, "buf[...] = x.at"), line_of(k, "ml.cluster_ref(buf")
  assert {e.value.lineno} | {int(n.split(":")[1]) for n in e.value.notes if "the call (" not in n} == {write, read}


def test_cta_exiting_while_its_peer_reads_its_smem_is_a_race():
  @mg.mgpu_kernel(out_shape=lambda x, one: x, grid=(2,), cluster=(2,), interpret=True)
  def k(x, one, out):
    i = ml.program_id(0)
    buf = ml.smem((128,), jnp.float32)
    buf[...] = x.at[ml.ds(i * 128, 128)][...]
    ml.cluster_sync()
    out.at[ml.ds(i * 128, 128)][...] = ml.cluster_ref(buf, (i + ml.max(one[...])) % 2)[...]
  with pytest.raises(interp.RaceError, match="may already have exited") as e:
    k(rand((256,)), jnp.ones((128,), jnp.int32))   # (a run-time peer index: left to interpret mode)
  assert "ml.cluster_sync()" in e.value.hint


def test_cluster_sync_in_only_some_ctas_hangs():
  @mg.mgpu_kernel(out_shape=lambda x, zero: x, grid=(2,), cluster=(2,), interpret=True)
  def k(x, zero, out):
    i = ml.program_id(0)
    out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]
    if i == ml.max(zero[...]):
      ml.cluster_sync()
  with pytest.raises(interp.InterpretError, match="hangs") as e:
    k(rand((256,)), jnp.zeros((128,), jnp.int32))   # (a run-time condition: left to interpret mode)
  assert e.value.lineno == line_of(k, "ml.cluster_sync()")


def test_dynamic_index_out_of_bounds_is_located():
  @mg.mgpu_kernel(out_shape=lambda x, s: x, grid=(2,), interpret=True)
  def k(x, start, out):
    i = ml.program_id(0)
    s = ml.max(start[...])                 # an offset read from data: known only at run time
    out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(s + i * 64, 128)][...]
  with pytest.raises(interp.OutOfBoundsError, match=r"x\[192:320\]") as e:
    k(rand((256,)), jnp.full((128,), 128, jnp.int32))
  assert e.value.lineno == line_of(k, "x.at[ml.ds(s + i * 64")
