"""Probe 44d: memory accesses at offsets the GPU may find misaligned. A misaligned vector load or store
faults the H200 (CUDA_ERROR_MISALIGNED_ADDRESS, and the process's CUDA context with it), so every
register transfer moves a register's vector at once only where each of its rows starts at a multiple of
the vector (tma_starts.mark_register_starts); the GPU tests of kernels that faulted, or would fault,
without their fix are each in a function of their own (named test_gpu_..._would_fault)."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

HERE = __file__


def line_of(text: str) -> int:
  lines = open(HERE).read().splitlines()
  return next(i + 1 for i, l in enumerate(lines) if text in l and "line_of(" not in l)


def _vector_window_accesses(text):
  """Vector loads and stores of a 2-D window of a GMEM array (a strided memref)."""
  return len(re.findall(r"vector\.(?:load|store) [^\n]*strided<\[\d+, 1\][^\n]*vector<[2-9]x", text))


# ---------------------------------------------------------------- rows of a window a row stride apart
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((8, 128), x.dtype))
def masked_rows(x, out):
  r = ml.arange(8)
  out[...] = x.at[0:8, 0:128].load(mask=(r < 7)[:, None], other=0)


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((8,), jnp.float32))
def row_sums(x, out):
  out[...] = ml.sum(x.at[0:8, 0:128][...].astype(jnp.float32), axis=1)


def _odd_rows(cols, dtype):
  return jnp.asarray((np.arange(64 * cols) % 97 - 40).reshape(64, cols).astype(dtype))


def _masked_rows_ref(x):
  want = np.asarray(x)[0:8, 0:128].copy()
  want[7] = 0
  return want


def test_a_masked_window_of_rows_off_the_vector_alignment_is_read_element_by_element():
  """A 2-D masked load of a window whose rows are 129 int8 (130 float16) elements apart read each row
  with 4-element vectors: every other row's vectors were misaligned (a fault on the GPU), though the
  window starts at 0. Rows 132 float32 elements apart (16-byte multiples) keep their vectors."""
  for cols, dtype in ((129, np.int8), (130, np.float16)):
    x = _odd_rows(cols, dtype)
    assert re.search(rf"maskedload [^\n]* start_multiple={cols} ", masked_rows.typed_ir(x))
    assert _vector_window_accesses(masked_rows.mlir(x)) == 0
    np.testing.assert_array_equal(masked_rows(x, interpret=True), _masked_rows_ref(x))
  assert _vector_window_accesses(masked_rows.mlir(_odd_rows(132, np.float32))) == 2


@mg.mgpu_kernel(out_shape=lambda x: x, input_output_aliases={0: 0})
def centre_rows(x, out):
  v = x.at[0:16, 0:64][...].astype(jnp.float32)
  out.at[16:32, 0:64].store((v - ml.max(v, axis=1, keepdims=True)).astype(x.dtype), mask=(ml.arange(16) < 9)[:, None])


def _centre_rows_ref(x):
  x = np.asarray(x)
  v = x[0:16, 0:64].astype(np.float32)
  want = x.copy()
  want[16:25, 0:64] = (v - v.max(1, keepdims=True)).astype(x.dtype)[:9]
  return want


@mg.mgpu_kernel(out_shape=lambda a, b, o: jax.ShapeDtypeStruct(o.shape, o.dtype), input_output_aliases={2: 0})
def dot_into_odd_rows(a, b, o, out):
  sa, sb = ml.smem((64, 64), jnp.float16), ml.smem((64, 64), jnp.float16)
  ml.copy(a, sa)
  ml.copy(b, sb)
  out.at[:, 0:64][...] = ml.dot(sa, sb).astype(jnp.float16)


def test_row_wise_and_tensor_core_tiles_of_rows_off_the_vector_alignment_compile():
  """A row reduction of a window of odd rows, a row-wise tile stored under a mask into one, and an ml.dot
  result stored into the first 64 columns of rows of 65 float16, were MG900 "Mosaic GPU failed while compiling this Load (Store) operation: Tiled
  strides must be a multiple of the vector length": they now go element by element."""
  for cols, dtype in ((129, np.int8), (130, np.float16)):
    x = _odd_rows(cols, dtype)
    row_sums.check(x)
    np.testing.assert_allclose(row_sums(x, interpret=True),
                               np.asarray(x)[0:8, 0:128].astype(np.float32).sum(1), rtol=1e-6)
  x = _odd_rows(131, np.float16)           # a row-wise tile stored under a mask
  centre_rows.check(x)
  np.testing.assert_array_equal(centre_rows(x, interpret=True), _centre_rows_ref(x))
  a, b, o = _dot_operands()
  dot_into_odd_rows.check(a, b, o)
  np.testing.assert_allclose(dot_into_odd_rows(a, b, o, interpret=True), _dot_ref(a, b, o), rtol=1e-3)


def _dot_operands():
  rng = np.random.default_rng(0)
  a, b = (jnp.asarray(rng.integers(-3, 4, (64, 64)).astype(np.float16)) for _ in range(2))
  return a, b, jnp.asarray(rng.integers(-3, 4, (64, 65)).astype(np.float16))


def _dot_ref(a, b, o):
  want = np.asarray(o).copy()
  want[:, 0:64] = (np.asarray(a, np.float32) @ np.asarray(b, np.float32)).astype(np.float16)
  return want


@pytest.mark.gpu
def test_gpu_masked_window_of_odd_rows_would_fault():
  for cols, dtype in ((129, np.int8), (130, np.float16)):
    x = _odd_rows(cols, dtype)
    np.testing.assert_array_equal(masked_rows(x), _masked_rows_ref(x))


@pytest.mark.gpu
def test_gpu_row_wise_and_tensor_core_tiles_of_odd_rows():
  for cols, dtype in ((129, np.int8), (130, np.float16)):
    x = _odd_rows(cols, dtype)
    np.testing.assert_allclose(row_sums(x), np.asarray(x)[0:8, 0:128].astype(np.float32).sum(1), rtol=1e-6)
  x = _odd_rows(131, np.float16)
  np.testing.assert_array_equal(centre_rows(x), _centre_rows_ref(x))
  a, b, o = _dot_operands()
  np.testing.assert_allclose(dot_into_odd_rows(a, b, o), _dot_ref(a, b, o), rtol=1e-3)


# ---------------------------------------------------------------- a peer's window (ml.cluster_ref)
@mg.mgpu_kernel(out_shape=lambda x, s: jax.ShapeDtypeStruct((2, 256), x.dtype), grid=(2,), cluster=(2,))
def peer_windows(x, s, out):
  i = ml.program_id(0)
  buf = ml.smem((384,), x.dtype)
  got = ml.smem((384,), x.dtype)
  buf[...] = x.at[i][...]
  got[...] = ml.zeros((384,), x.dtype)
  ml.cluster_sync()
  v = ml.cluster_ref(buf.at[ml.ds(s[0], 256)], (i + 1) % 2)[...]
  ml.cluster_ref(got.at[ml.ds(s[1], 256)], (i + 1) % 2)[...] = v
  ml.cluster_sync()
  out.at[i][...] = got.at[ml.ds(s[1], 256)][...]


def _peer_windows_ref(x, s):
  return np.asarray(x)[:, s[0]:s[0] + 256]     # each CTA's row, moved through its peer and back


def test_a_peers_window_at_a_run_time_start_is_moved_element_by_element():
  """ml.cluster_ref of a window at a run-time start (`ml.cluster_ref(buf.at[ml.ds(s[0], 256)], peer)`) had
  no start_multiple (the view chain stopped at the peer's buffer), so it was read and written with 8-byte
  vectors at s[0] = 3: misaligned in the peer's SMEM."""
  x = jnp.asarray(np.arange(2 * 384, dtype=np.float32).reshape(2, 384) / 3)
  s = jnp.array([3, 5], jnp.int32)
  text = peer_windows.typed_ir(x, s)
  peers = re.findall(r"(%\d+): ref<SMEM, 256, float32> = clusterref", text)
  assert len(peers) == 2
  assert re.search(rf"= load ref={peers[0]} start_multiple=1 ", text)
  assert re.search(rf"\n  store ref={peers[1]} value=%\d+ start_multiple=1 ", text)
  peer = peer_windows.mlir(x, s).split("nvvm.mapa")[1]
  assert not re.search(r"vector\.(?:load|store) [^\n]*vector<[2-9]x", peer.split("nvvm.cluster")[0])
  np.testing.assert_array_equal(peer_windows(x, s, interpret=True), _peer_windows_ref(x, s))


@pytest.mark.gpu
def test_gpu_peers_window_at_odd_starts_would_fault():
  x = jnp.asarray(np.arange(2 * 384, dtype=np.float32).reshape(2, 384) / 3)
  for a, b in ((3, 5), (1, 2), (8, 4)):
    s = jnp.array([a, b], jnp.int32)
    np.testing.assert_array_equal(peer_windows(x, s), _peer_windows_ref(x, s))


# ---------------------------------------------------------------- starts computed in floats
@mg.mgpu_kernel(out_shape=lambda x, f: jax.ShapeDtypeStruct((256,), x.dtype))
def float_start(x, f, out):
  i = (f[0] * 8).astype(jnp.int32)
  out[...] = x.at[ml.ds(i, 256)][...]


@mg.mgpu_kernel(out_shape=lambda x, f: jax.ShapeDtypeStruct((64,), x.dtype))
def float_start_copy(x, f, out):
  i = (f[0] * 8).astype(jnp.int32)
  buf = ml.smem((64,), x.dtype)
  ml.copy(x.at[ml.ds(i, 64)], buf)
  ml.copy(buf, out)


X512 = jnp.asarray(np.arange(512, dtype=np.float32) / 7 - 20)
F3 = jnp.array([0.375], jnp.float32)      # 0.375 * 8 = 3


def test_a_start_computed_in_floats_is_not_a_known_multiple():
  """`(f[0] * 8).astype(jnp.int32)` was taken for a multiple of 8 (absint.known_multiple multiplied the
  float product's factors), so a register window at it moved 8-byte vectors (at 3: misaligned) and a TMA
  copy at it passed the 16-byte check: a float's product is no integer's multiple."""
  assert re.search(r"= load ref=%\d+ start_multiple=1 ", float_start.typed_ir(X512, F3))
  np.testing.assert_array_equal(float_start(X512, F3, interpret=True), X512[3:259])
  with pytest.raises(mg.TmaLimitError) as e:
    float_start_copy.check(X512, F3)
  err = e.value
  assert err.code == "MG401" and (err.lineno, err.col_offset) == (line_of("ml.copy(x.at[ml.ds(i, 64)], buf)"), 2)
  assert "the start of x.at[ml.ds(i, 64)] in x's last dimension is not provably one" in err.message
  assert "ml.ds(ml.multiple_of(i, 4), 64)" in err.hint


@pytest.mark.gpu
def test_gpu_window_at_a_float_computed_start_would_fault():
  np.testing.assert_array_equal(float_start(X512, F3), X512[3:259])



# ---------------------------------------------------------------- starts proven through where, if, -, &
@mg.mgpu_kernel(out_shape=lambda x, s: jax.ShapeDtypeStruct((5, 64), x.dtype))
def proven_starts(x, s, out):
  a = ml.where(s[0] > 2, s[1] * 64, 0)
  if s[0] > 2:
    b = s[1] * 64
  else:
    b = s[1] * 128
  c = -(s[1] * 64) + 448
  d = s[2] & ~7
  off = s[2]
  e = off - off % 8
  bufs = ml.smem((5, 64), x.dtype)
  ml.copy(x.at[ml.ds(a, 64)], bufs.at[0])
  ml.copy(x.at[ml.ds(b, 64)], bufs.at[1])
  ml.copy(x.at[ml.ds(c, 64)], bufs.at[2])
  ml.copy(x.at[ml.ds(d, 64)], bufs.at[3])
  ml.copy(x.at[ml.ds(e, 64)], bufs.at[4])
  ml.copy(bufs, out)


@mg.mgpu_kernel(out_shape=lambda x, s: jax.ShapeDtypeStruct((64,), x.dtype))
def unproven_where(x, s, out):
  buf = ml.smem((64,), x.dtype)
  ml.copy(x.at[ml.ds(ml.where(s[0] > 2, s[1] * 64, 3), 64)], buf)
  ml.copy(buf, out)


def _proven_starts_ref(x, s):
  x, (s0, s1, s2) = np.asarray(x), (int(v) for v in s)
  starts = (s1 * 64 if s0 > 2 else 0, s1 * 64 if s0 > 2 else s1 * 128, 448 - s1 * 64, s2 & ~7, s2 - s2 % 8)
  return np.stack([x[i:i + 64] for i in starts])


def test_starts_that_where_if_negation_and_a_mask_keep_aligned_are_proven():
  """TMA copies at `ml.where(c, s * 64, 0)`, at a value either branch of a run-time `if` assigns a multiple
  of 64, at `-(s * 64) + 448`, at `s & ~7` and at `s - s % 8` were MG401 "the start ... is not provably" a
  multiple of 4 (absint.known_multiple knew no where, if, negation, & or rounding down); a where with an
  unaligned side still is."""
  s = jnp.array([3, 2, 21], jnp.int32)
  proven_starts.check(X512, s)
  np.testing.assert_array_equal(proven_starts(X512, s, interpret=True), _proven_starts_ref(X512, s))
  s = jnp.array([1, 3, 13], jnp.int32)
  np.testing.assert_array_equal(proven_starts(X512, s, interpret=True), _proven_starts_ref(X512, s))
  with pytest.raises(mg.TmaLimitError, match="not provably one"):
    unproven_where.check(X512, s)


@pytest.mark.gpu
def test_gpu_starts_proven_through_where_if_negation_and_a_mask():
  for s in ([3, 2, 21], [1, 3, 13], [0, 0, 7]):
    s = jnp.array(s, jnp.int32)
    np.testing.assert_array_equal(proven_starts(X512, s), _proven_starts_ref(X512, s))


# ---------------------------------------------------------------- a false ml.multiple_of the grid decides
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((4, 256), x.dtype), grid=(4,))
def false_promise(x, out):
  i = ml.program_id(0)
  acc = ml.zeros((256,), x.dtype)
  for k in range(2):
    start = ml.multiple_of(i * 16 + k * 6, 4)
    acc += x.at[ml.ds(start, 256)][...]
  out.at[i][...] = acc


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((4, 256), x.dtype), grid=(4,))
def true_promise(x, out):
  i = ml.program_id(0)
  out.at[i][...] = x.at[ml.ds(ml.multiple_of(i * 12, 4), 256)][...]


def test_a_false_multiple_of_that_program_ids_decide_is_reported_while_compiling():
  """`ml.multiple_of(i * 16 + k * 6, 4)` is 6 at k = 1: it compiled (to vectors the GPU faults on) and
  only interpret mode reported it; the grid evaluation now does, with the program and the trip."""
  with pytest.raises(mg.KernelError) as e:
    false_promise.check(X512)
  err = e.value
  assert err.code == "MG950" and type(err).__name__ == "InterpretError"
  assert (err.lineno, err.col_offset) == (line_of("start = ml.multiple_of(i * 16 + k * 6, 4)"), 12)
  assert err.message.startswith("ml.multiple_of promises a multiple of 4, but the value is 6 in program (0, 0, 0)"
                                " (at k = 1): the compiled kernel trusts it")
  assert "make the value a multiple of 4" in err.hint
  true_promise.check(X512)
  want = np.stack([np.asarray(X512)[i * 12:i * 12 + 256] for i in range(4)])
  np.testing.assert_array_equal(true_promise(X512, interpret=True), want)


# ---------------------------------------------------------------- a multicast load's shares in SMEM
def _multicast_sum(n):
  @mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((2, 128), x.dtype), grid=(2,), cluster=(2,))
  def multicast_sum(x, out):
    buf = ml.smem((n,), x.dtype)
    acc = ml.zeros((128,), x.dtype)
    for k in ml.range(4, stages=2, warp_specialize=True):
      ml.copy(x.at[ml.ds(k * n, n)], buf, multicast=0)
      acc += ml.sum(buf[...])
    out.at[ml.program_id(0)][...] = acc
  return multicast_sum


def test_a_multicast_loads_shares_must_start_on_128_bytes_in_smem():
  """A 1-D multicast window of 32 float32 met the 8-rows-a-CTA rule, but the second CTA's share landed 64
  bytes into the buffer, which TMA's SMEM side cannot (a fault on the H200); it is a TmaLimitError whose
  hint, 64 elements, compiles and runs."""
  x = jnp.asarray(np.arange(256, dtype=np.float32) % 13)
  with pytest.raises(mg.TmaLimitError) as e:
    _multicast_sum(32).check(x)
  err = e.value
  assert err.code == "MG401" and (err.lineno, err.col_offset) == (line_of("buf, multicast=0)"), 6)
  assert ("a multicast load is split among the 2 CTAs along axis 0, so the second CTA's share of buf (16 elements"
          " of 32) lands 64 bytes into it; TMA needs each copy's SMEM side to start at a multiple of 128 bytes"
          in err.message)
  assert err.hint.startswith("make the window's first dimension a multiple of 64 (128 bytes a CTA)")
  fixed = _multicast_sum(64)
  fixed.check(x)
  want = np.broadcast_to(np.asarray(x).sum(), (2, 128))
  np.testing.assert_array_equal(fixed(x, interpret=True), want)


@pytest.mark.gpu
def test_gpu_a_multicast_load_of_128_byte_shares():
  x = jnp.asarray(np.arange(256, dtype=np.float32) % 13)
  np.testing.assert_array_equal(_multicast_sum(64)(x), np.broadcast_to(np.asarray(x).sum(), (2, 128)))
