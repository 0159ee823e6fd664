"""Probe 33c (state-space and linear-attention kernels: Mamba-2's segment sums and SSD chunk scan,
GLA, RetNet, RWKV6, selective scans, causal conv1d): what a researcher writing them from the docs
met."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
BF16 = jnp.bfloat16


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _segsum_ref(a, q):
  cs = jnp.cumsum(a.reshape(a.shape[0], -1, q), -1)
  seg = cs[..., :, None] - cs[..., None, :]
  return jnp.where(jnp.tril(jnp.ones((q, q), bool)), jnp.exp(seg), 0.0)


# ---------------------------------------------------------------- a computed vector broadcast both ways
@mg.mgpu_kernel(out_shape=lambda a: S((a.shape[0], a.shape[1] // 64, 64, 64), F32),
                grid=lambda a: (a.shape[0], a.shape[1] // 64))
def segsum_exp(a, out):                   # Mamba-2's exp(segsum(a)) of one chunk, as jnp writes it
  h, c = ml.program_id(0), ml.program_id(1)
  cs = ml.cumsum(a.at[h, ml.ds(c * 64, 64)][...])
  i = ml.arange(64)
  out.at[h, c][...] = ml.where(i[:, None] >= i[None, :], ml.exp(cs[:, None] - cs[None, :]), 0.0)


def _ssd_inputs(h=2, length=256, seed=0):
  rng = np.random.default_rng(seed)
  x = jnp.asarray(rng.standard_normal((h, length, 64)) * 0.5, BF16)
  a = jnp.asarray(-rng.random((h, length)) * 0.05, F32)
  b = jnp.asarray(rng.standard_normal((h, length, 64)) * 0.3, BF16)
  c = jnp.asarray(rng.standard_normal((h, length, 64)) * 0.3, BF16)
  return x, a, b, c


def _ssd_intra_ref(x, a, b, c, q):
  h, length, _ = x.shape
  xf, bf, cf = (t.astype(F32).reshape(h, -1, q, 64) for t in (x, b, c))
  s = jnp.einsum("hcln,hcsn->hcls", cf, bf) * _segsum_ref(a, q)
  return jnp.einsum("hcls,hcsp->hclp", s.astype(BF16).astype(F32), xf).reshape(h, length, 64)


@mg.mgpu_kernel(out_shape=lambda x, a, b, c: S(x.shape, F32), grid=lambda x, a, b, c: (x.shape[1] // 128, x.shape[0]),
                block=256)
def ssd_intra(x, a, b, c, y):             # the SSD's diagonal blocks: (C B^T * exp(segsum)) X, on the tensor cores
  j, h = ml.program_id(0), ml.program_id(1)
  x_s, b_s, c_s = ml.smem((128, 64), x.dtype), ml.smem((128, 64), b.dtype), ml.smem((128, 64), c.dtype)
  ml.copy(x.at[h, ml.ds(j * 128, 128)], x_s)
  ml.copy(b.at[h, ml.ds(j * 128, 128)], b_s)
  ml.copy(c.at[h, ml.ds(j * 128, 128)], c_s)
  cs = ml.cumsum(a.at[h, ml.ds(j * 128, 128)][...])
  i = ml.arange(128)
  s = ml.where(i[:, None] >= i[None, :], ml.dot(c_s, b_s.T) * ml.exp(cs[:, None] - cs[None, :]), 0.0)
  y.at[h, ml.ds(j * 128, 128)][...] = ml.dot(s.astype(x.dtype), x_s)


@mg.mgpu_kernel(out_shape=lambda q, k, v, g: S(v.shape, F32), grid=lambda q, k, v, g: (1,))
def gla_chunked(q, k, v, g, o):           # gated linear attention: per-channel decay, state carried across chunks
  q_s, k_s, v_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), q.dtype), ml.smem((64, 64), v.dtype)
  qg_s, kg_s, kd_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), q.dtype), ml.smem((64, 64), q.dtype)
  st_s = ml.smem((64, 64), q.dtype)
  state = ml.zeros((64, 64), F32)
  i = ml.arange(64)
  for c in range(q.shape[0] // 64):
    ml.copy(q.at[ml.ds(c * 64, 64)], q_s)
    ml.copy(k.at[ml.ds(c * 64, 64)], k_s)
    ml.copy(v.at[ml.ds(c * 64, 64)], v_s)
    gc = ml.cumsum(g.at[ml.ds(c * 64, 64)][...], axis=0)
    last = gc[63]
    qg_s[...] = (q_s[...].astype(F32) * ml.exp(gc)).astype(q.dtype)
    kg_s[...] = (k_s[...].astype(F32) * ml.exp(-gc)).astype(q.dtype)
    kd_s[...] = (k_s[...].astype(F32) * ml.exp(last[None, :] - gc)).astype(q.dtype)
    att = ml.where(i[:, None] >= i[None, :], ml.dot(qg_s, kg_s.T), 0.0)
    st_s[...] = state.astype(q.dtype)
    o.at[ml.ds(c * 64, 64)][...] = ml.dot(qg_s, st_s, ml.dot(att.astype(q.dtype), v_s))
    state = ml.dot(kd_s.T, v_s, state * ml.exp(last)[:, None])


def _gla_inputs(t=256, seed=0):
  rng = np.random.default_rng(seed)
  q, k, v = (jnp.asarray(rng.standard_normal((t, 64)) * 0.3, BF16) for _ in range(3))
  return q, k, v, jnp.asarray(-rng.random((t, 64)) * 0.05, F32)


def _gla_ref(q, k, v, g):
  def step(s, inp):
    qt, kt, vt, gt = inp
    s = jnp.exp(gt)[:, None] * s + kt[:, None] * vt[None, :]
    return s, qt @ s
  return jax.lax.scan(step, jnp.zeros((64, 64)), tuple(t.astype(F32) for t in (q, k, v, g)))[1]


def test_a_computed_vector_broadcast_both_ways_reads_a_copy_through_smem():
  """It was MG204 ('cs is used as a row statistic ... and as a column vector'): Mamba-2's segment
  sums `cs[:, None] - cs[None, :]` of a cumsum, a row max `m[:, None] ... m[None, :]`, GLA's
  `ml.exp(last)[:, None]` of a column vector. Each use writes its orientation out, so the second
  reads a copy of the vector made through an SMEM scratch."""
  a = jnp.asarray(-np.random.default_rng(0).random((4, 256)), F32)
  np.testing.assert_allclose(segsum_exp(a, interpret=True), _segsum_ref(a, 64), rtol=1e-5, atol=1e-6)
  assert "relayoutstore" in segsum_exp.typed_ir(S(a.shape, F32))
  _export(segsum_exp, S(a.shape, F32))
  x, a, b, c = _ssd_inputs()             # at block=256: two warpgroups, the cumsum split between them
  np.testing.assert_allclose(ssd_intra(x, a, b, c, interpret=True), _ssd_intra_ref(x, a, b, c, 128), rtol=2e-2, atol=2e-2)
  _export(ssd_intra, *(S(t.shape, t.dtype) for t in (x, a, b, c)))
  q, k, v, g = _gla_inputs()
  np.testing.assert_allclose(gla_chunked(q, k, v, g, interpret=True), _gla_ref(q, k, v, g), rtol=5e-2, atol=5e-2)
  _export(gla_chunked, *(S(t.shape, t.dtype) for t in (q, k, v, g)))


@mg.mgpu_kernel(out_shape=lambda x: x)
def row_max_aligned(x, o):                # m meets the tile by NumPy's alignment: likely a missing m[:, None]
  v = x[...]
  m = ml.exp(ml.max(v, axis=1))
  o[...] = v * m[:, None] - m


@mg.mgpu_kernel(out_shape=lambda x: x)
def exp_of_row_aligned(x, o):             # (a column statistic, ml.sum(v, axis=0), so used computes: probe 53f)
  v = x[...]
  m = ml.sum(v, axis=1)
  o[...] = v * ml.exp(m)[:, None] + ml.exp(m)


def test_a_vector_aligned_by_numpy_alone_stays_an_error_whose_hint_writes_the_expression():
  """A use by NumPy's alignment alone (`- m`) is still MG204 (it is usually a missing `[:, None]`);
  the SMEM hint wrote `tmp[...] = v` for a vector with no name of its own (`ml.exp(m)`), and `v`
  was a name of the kernel's."""
  e = expect(row_max_aligned, [S((64, 64), F32)], mg.LayoutError, "v * m[:, None] - m",
             "m is used as a row statistic (one value per row) of one tile and as a column vector (one value"
             " per column) of another: a register vector lives in one of the two layouts")
  assert "tmp[...] = m;" in e.hint
  e = expect(exp_of_row_aligned, [S((64, 64), F32)], mg.LayoutError, "v * ml.exp(m)[:, None] + ml.exp(m)",
             "ml.exp(m) is used as a row statistic (one value per row) of one tile and as a column vector (one"
             " value per column) of another: a register vector lives in one of the two layouts")
  assert "tmp[...] = ml.exp(m);" in e.hint


@pytest.mark.gpu
def test_gpu_vectors_broadcast_both_ways_match_interpret_mode():
  a = jnp.asarray(-np.random.default_rng(1).random((4, 256)), F32)
  np.testing.assert_allclose(np.asarray(jax.jit(segsum_exp)(a)), np.asarray(segsum_exp(a, interpret=True)),
                             rtol=1e-5, atol=1e-6)
  x, a, b, c = _ssd_inputs(seed=2)        # block=256: wrong on the H200 until the split scan's fix
  np.testing.assert_allclose(np.asarray(jax.jit(ssd_intra)(x, a, b, c)), np.asarray(ssd_intra(x, a, b, c, interpret=True)),
                             rtol=2e-2, atol=2e-2)
  q, k, v, g = _gla_inputs(seed=1)
  np.testing.assert_allclose(np.asarray(jax.jit(gla_chunked)(q, k, v, g)), _gla_ref(q, k, v, g), rtol=5e-2, atol=5e-2)


# ---------------------------------------------------------------- ml.<name> of jax.nn's and jnp's functions
@mg.mgpu_kernel(out_shape=lambda x: x)
def dt_softplus(x, o):                    # Mamba's dt = softplus(dt + bias)
  o[...] = ml.softplus(x[...] + 1.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def dt_softplus_followed(x, o):           # dt_softplus's hint followed
  y = x[...] + 1.0
  o[...] = ml.maximum(y, 0) + ml.log1p(ml.exp(-ml.abs(y)))


@mg.mgpu_kernel(out_shape=lambda x: x)
def gate_silu(x, o):
  o[...] = x[...] * ml.silu(x[...])


@mg.mgpu_kernel(out_shape=lambda x: S((64, 64), F32))
def chunk_matmul(x, o):
  o[...] = ml.matmul(x[...], x[...].T)


@mg.mgpu_kernel(out_shape=lambda x: x)
def triton_clamp(x, o):
  o[...] = ml.clamp(x[...], 0.0, 1.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def log_add(x, o):
  o[...] = ml.logaddexp(x[...], 0.0)


def test_ml_names_of_jax_nn_and_jnp_functions_hint_what_to_write():
  """`ml.softplus` and `ml.silu` said 'check the spelling' (jax.nn.softplus had the formula);
  `ml.matmul` said 'did you mean ml.maximum?', `ml.logaddexp` the reduction ml.logsumexp."""
  x = jnp.linspace(-30.0, 30.0, 128, dtype=F32)       # ml.softplus is a builtin since probe 51j
  np.testing.assert_allclose(dt_softplus(x, interpret=True), jax.nn.softplus(x + 1.0), rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(dt_softplus_followed(x, interpret=True), jax.nn.softplus(x + 1.0), rtol=1e-6, atol=1e-6)
  expect(gate_silu, [S((128,), F32)], mg.UnknownNameError, "ml.silu", "ml has no attribute 'silu'",
         hint="no ml.silu: write x[...] * ml.sigmoid(x[...])")
  e = expect(chunk_matmul, [S((64, 64), BF16)], mg.UnknownNameError, "ml.matmul", "ml has no attribute 'matmul'")
  assert e.hint.startswith("no ml.matmul: tensor-core products are ml.dot(a_s, b_s, acc)")
  x = jnp.linspace(-2.0, 2.0, 128, dtype=F32)           # ml.clamp is Triton's tl.clamp since probe 49h
  np.testing.assert_array_equal(np.asarray(triton_clamp(x, interpret=True)), np.clip(np.asarray(x), 0.0, 1.0))
  expect(log_add, [S((128,), F32)], mg.UnknownNameError, "ml.logaddexp", "ml has no attribute 'logaddexp'",
         hint="no ml.logaddexp: write ml.where(x[...] == 0.0, x[...] + 0.6931471805599453, ml.maximum(x[...], 0.0) +"
              " ml.log1p(ml.exp(-ml.abs(x[...] - 0.0))))")


# ---------------------------------------------------------------- a float32 state buffer beside bfloat16 operands
@mg.mgpu_kernel(out_shape=lambda q: S((64, 64), F32), grid=lambda q: (1,))
def state_in_f32_smem(q, o):             # linear attention's state S = k^T v, kept in SMEM for q @ S
  q_s, st_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), F32)
  ml.copy(q.at[ml.ds(0, 64)], q_s)
  st_s[...] = ml.dot(q_s.T, q_s)
  o[...] = ml.dot(q_s, st_s)


@mg.mgpu_kernel(out_shape=lambda q: S((64, 64), F32), grid=lambda q: (1,))
def state_in_bf16_smem(q, o):            # state_in_f32_smem's hint followed
  q_s, st_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), jnp.bfloat16)
  ml.copy(q.at[ml.ds(0, 64)], q_s)
  st_s[...] = ml.dot(q_s.T, q_s).astype(jnp.bfloat16)
  o[...] = ml.dot(q_s, st_s)


def test_a_float32_buffer_filled_from_registers_hints_its_allocation_not_only_the_input():
  """The hint said only 'convert the array that fills st_s before the call', and registers fill it."""
  expect(state_in_f32_smem, [S((128, 64), BF16)], mg.DtypeMismatchError, "ml.dot(q_s, st_s)",
         "ml.dot of q_s (bfloat16) and st_s (float32): both operands must have one dtype",
         hint="give st_s the dtype of the other operand: where registers fill it, allocate it as ml.smem((64, 64),"
              " jnp.bfloat16) and store the value converted, st_s[...] = v.astype(jnp.bfloat16); where a TMA copy"
              " fills it, convert the array before the call (.astype(jnp.bfloat16), which XLA fuses into its"
              " producer): a TMA copy does not convert")
  q = jnp.asarray(np.random.default_rng(2).standard_normal((128, 64)) * 0.3, BF16)
  qf = q[:64].astype(F32)
  want = qf @ (qf.T @ qf).astype(BF16).astype(F32)
  np.testing.assert_allclose(state_in_bf16_smem(q, interpret=True), want, rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- a dot result carried into a loop that reads it
@mg.mgpu_kernel(out_shape=lambda s0, k, v, w: S((64, 64), F32), grid=lambda s0, k, v, w: (1,))
def state_from_dot_then_scan(s0, k, v, w, o):     # a state made by a dot, then RWKV-style updates per step
  s_s = ml.smem((64, 64), s0.dtype)
  ml.copy(s0, s_s)
  st = ml.dot(s_s, s_s.T)
  for t in range(k.shape[0]):
    st = w.at[t][...][:, None] * st + k.at[t][...][:, None] * v.at[t][...][None, :]
  o[...] = st


@mg.mgpu_kernel(out_shape=lambda s0, w: S((64, 64), F32), grid=lambda s0, w: (1,))
def dot_then_while(s0, w, o):
  s_s = ml.smem((64, 64), s0.dtype)
  ml.copy(s0, s_s)
  st = ml.dot(s_s, s_s.T)
  t = 0
  while t < w.shape[0]:
    st = st * w[t]
    t += 1
  o[...] = st


def _scan_inputs(seed=3, steps=16):
  rng = np.random.default_rng(seed)
  s0 = jnp.asarray(rng.standard_normal((64, 64)) * 0.3, BF16)
  k, v = (jnp.asarray(rng.standard_normal((steps, 64)) * 0.3, F32) for _ in range(2))
  return s0, k, v, jnp.asarray(rng.random((steps, 64)) * 0.5 + 0.5, F32)


def _scan_ref(s0, k, v, w):
  st = s0.astype(F32) @ s0.astype(F32).T
  for t in range(k.shape[0]):
    st = w[t][:, None] * st + k[t][:, None] * v[t][None, :]
  return st


def test_a_dot_result_carried_into_a_loop_is_awaited_before_the_loop():
  """The sync pass awaited a dot before the ops of a loop body that read its result, but a result
  carried in as the loop's initial value is read through the body's argument: no wait was inserted
  (interpret mode: 'st is read before its ml.dot finished', MG951; on the GPU, the accumulator read
  while the tensor cores still wrote it)."""
  s0, k, v, w = _scan_inputs()
  specs = [S(t.shape, t.dtype) for t in (s0, k, v, w)]
  ir = state_from_dot_then_scan.typed_ir(*specs)
  assert ir.index("dotwait") < ir.index("= for "), ir
  np.testing.assert_allclose(state_from_dot_then_scan(s0, k, v, w, interpret=True), _scan_ref(s0, k, v, w),
                             rtol=1e-4, atol=1e-4)
  _export(state_from_dot_then_scan, *specs)
  w1 = jnp.full((4,), 0.5, F32)
  np.testing.assert_allclose(dot_then_while(s0, w1, interpret=True),
                             (s0.astype(F32) @ s0.astype(F32).T) * 0.5 ** 4, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_gpu_a_dot_result_carried_into_a_loop_matches_jnp():
  s0, k, v, w = _scan_inputs(seed=4)
  np.testing.assert_allclose(np.asarray(jax.jit(state_from_dot_then_scan)(s0, k, v, w)), _scan_ref(s0, k, v, w),
                             rtol=1e-3, atol=1e-3)
  w1 = jnp.full((4,), 0.5, F32)
  np.testing.assert_allclose(np.asarray(jax.jit(dot_then_while)(s0, w1)),
                             (s0.astype(F32) @ s0.astype(F32).T) * 0.5 ** 4, rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------- a selective scan's (channels, d_state=16) state
@mg.mgpu_kernel(out_shape=lambda x, dt, a, b, c: x, grid=lambda x, dt, a, b, c: (x.shape[1] // 128,))
def selective_scan_dn(x, dt, a, b, c, y):       # h (128 channels, 16 states): too narrow a tile to reduce
  cols = ml.ds(ml.program_id(0) * 128, 128)
  a_v = a.at[cols, :][...]
  h = ml.zeros((128, 16), F32)
  for t in range(x.shape[0]):
    d = dt.at[t, cols][...]
    h = ml.exp(d[:, None] * a_v) * h + (d * x.at[t, cols][...])[:, None] * b.at[t][...][None, :]
    y.at[t, cols][...] = ml.sum(h * c.at[t][...][None, :], axis=1)


@mg.mgpu_kernel(out_shape=lambda x, dt, at, b, c: x, grid=lambda x, dt, at, b, c: (x.shape[1] // 128,))
def selective_scan_nd(x, dt, at, b, c, y):      # selective_scan_dn's hint followed: h (16, 128), a read as a.T
  cols = ml.ds(ml.program_id(0) * 128, 128)
  a_v = at.at[:, cols][...]
  h = ml.zeros((16, 128), F32)
  for t in range(x.shape[0]):
    d = dt.at[t, cols][...]
    h = ml.exp(d[None, :] * a_v) * h + (d * x.at[t, cols][...])[None, :] * b.at[t][...][:, None]
    y.at[t, cols][...] = ml.sum(h * c.at[t][...][:, None], axis=0)


def test_a_narrow_state_tile_compiles_and_the_transposed_one_works():
  """A (128, 16) state reduced along its 16 columns is MG204; the hint only padded the columns to
  32. The (16, 128) tile, its vectors broadcast the other way, is held as it is."""
  rng = np.random.default_rng(5)
  steps = 32
  x = jnp.asarray(rng.standard_normal((steps, 256)), F32)
  dt = jnp.asarray(rng.random((steps, 256)) * 0.1, F32)
  a = jnp.asarray(-rng.random((256, 16)), F32)
  b, c = (jnp.asarray(rng.standard_normal((steps, 16)), F32) for _ in range(2))
  builds(selective_scan_dn, *[S(t.shape, t.dtype) for t in (x, dt, a, b, c)])     # (now compiled: tiles narrower than a warp take fewer lanes a row, tests/test_narrow_rows.py)

  def step(h, inp):
    xt, dtt, bt, ct = inp
    h = jnp.exp(dtt[:, None] * a) * h + (dtt * xt)[:, None] * bt[None, :]
    return h, jnp.sum(h * ct[None, :], 1)
  want = jax.lax.scan(step, jnp.zeros((256, 16), F32), (x, dt, b, c))[1]
  np.testing.assert_allclose(selective_scan_nd(x, dt, a.T, b, c, interpret=True), want, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- backward scans: loops that count down
@mg.mgpu_kernel(out_shape=lambda x, dt, a, b, c, dy: S(x.shape, F32), grid=lambda x, dt, a, b, c, dy: (x.shape[1] // 128,))
def selective_scan_dx(x, dt, a, b, c, dy, dx):   # the backward of h = exp(dt a) h + dt b x, y = c h
  cols = ml.ds(ml.program_id(0) * 128, 128)
  a_v = a.at[cols][...]
  g = ml.zeros((128,), F32)
  for t in range(x.shape[0] - 1, -1, -1):
    d = dt.at[t, cols][...]
    g = g + dy.at[t, cols][...] * c[t]
    dx.at[t, cols][...] = g * d * b[t]
    g = g * ml.exp(d * a_v)


@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=lambda x, n: (1,))
def suffix_decay(x, n, y):                       # a run-time length, counted down two ways
  for t in range(x.shape[0]):
    y.at[t][...] = ml.zeros((128,), F32)
  g = ml.zeros((128,), F32)
  for t in range(n[0] - 1, -1, -1):
    g = g * 0.5 + x.at[t][...]
    y.at[t][...] = g
  for t in reversed(range(n[0])):
    y.at[t][...] = y.at[t][...] * 2.0


@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=lambda x, n: (1,))
def reversed_pipeline(x, n, y):
  buf = ml.smem((8, 128), F32)
  for c in ml.range(x.shape[0] // 8 - 1, -1, -1, stages=2):
    ml.copy(x.at[ml.ds(c * 8, 8)], buf)
    y.at[ml.ds(c * 8, 8)][...] = buf[...] + c.astype(F32)


@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=lambda x, n: (1,))
def step_zero(x, n, y):
  for t in range(4, 0, 0):
    y.at[t][...] = x.at[t][...]


def _scan_dx_inputs(seed=6, steps=64):
  rng = np.random.default_rng(seed)
  x = jnp.asarray(rng.standard_normal((steps, 256)), F32)
  dt = jnp.asarray(rng.random((steps, 256)) * 0.1, F32)
  a = jnp.asarray(-rng.random(256), F32)
  b, c = (jnp.asarray(rng.standard_normal(steps), F32) for _ in range(2))
  return x, dt, a, b, c, jnp.asarray(rng.standard_normal((steps, 256)), F32)


def _scan_dx_ref(x, dt, a, b, c, dy):
  def loss(x):
    def step(h, inp):
      xt, dtt, bt, ct = inp
      h = jnp.exp(dtt * a) * h + dtt * bt * xt
      return h, h * ct
    return jnp.sum(jax.lax.scan(step, jnp.zeros(256, F32), (x, dt, b, c))[1] * dy)
  return jax.grad(loss)(x)


def _suffix_ref(x, n):
  y = np.zeros(x.shape, np.float32)
  g = np.zeros(x.shape[1], np.float32)
  for t in range(n - 1, -1, -1):
    g = g * np.float32(0.5) + np.asarray(x[t])
    y[t] = 2 * g
  return y


def test_a_static_negative_step_counts_down_as_in_python():
  """`range(L - 1, -1, -1)` was MG003 ('range() in a kernel counts upwards'), and `reversed(range(n))`
  of a run-time n MG001: the backward of a scan walks time backwards. The loop counts its trips
  upwards and computes the index from them; a step of 0 is still an error."""
  args = _scan_dx_inputs()
  np.testing.assert_allclose(selective_scan_dx(*args, interpret=True), _scan_dx_ref(*args), rtol=1e-4, atol=1e-4)
  _export(selective_scan_dx, *(S(t.shape, t.dtype) for t in args))
  x = jnp.asarray(np.random.default_rng(7).standard_normal((64, 128)), F32)
  np.testing.assert_allclose(suffix_decay(x, jnp.asarray([40], jnp.int32), interpret=True), _suffix_ref(x, 40),
                             rtol=1e-6, atol=1e-6)
  np.testing.assert_array_equal(reversed_pipeline(x, jnp.asarray([0], jnp.int32), interpret=True),
                                x + jnp.repeat(jnp.arange(8, dtype=F32), 8)[:, None])
  _export(reversed_pipeline, S(x.shape, F32), S((1,), jnp.int32))
  expect(step_zero, [S((64, 128), F32), S((1,), jnp.int32)], mg.KernelTypeError, "range(4, 0, 0)",
         "range() arg 3 must not be zero: a step of 0 never reaches the end")


@pytest.mark.gpu
def test_gpu_loops_that_count_down_match_jnp():
  args = _scan_dx_inputs(seed=8)
  np.testing.assert_allclose(np.asarray(jax.jit(selective_scan_dx)(*args)), _scan_dx_ref(*args), rtol=1e-3, atol=1e-3)
  x = jnp.asarray(np.random.default_rng(9).standard_normal((64, 128)), F32)
  np.testing.assert_allclose(np.asarray(jax.jit(suffix_decay)(x, jnp.asarray([40], jnp.int32))), _suffix_ref(x, 40),
                             rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(np.asarray(jax.jit(reversed_pipeline)(x, jnp.asarray([0], jnp.int32))),
                                np.asarray(x + jnp.repeat(jnp.arange(8, dtype=F32), 8)[:, None]))


# ---------------------------------------------------------------- two reductions' vectors of two layouts meet
@mg.mgpu_kernel(out_shape=lambda q, k: S((64,), F32), grid=lambda q, k: (1,))
def row_and_column_sums(q, k, o):       # attention-matrix statistics: row sums meet column maxima
  q_s, k_s = ml.smem((64, 64), q.dtype), ml.smem((64, 64), k.dtype)
  ml.copy(q, q_s)
  ml.copy(k, k_s)
  s = ml.dot(q_s, k_s.T)
  o[...] = ml.sum(s, axis=1) + ml.max(s, axis=0)


def _qk(seed):
  rng = np.random.default_rng(seed)
  return tuple(jnp.asarray(rng.standard_normal((64, 64)) * 0.3, BF16) for _ in range(2))


def _row_col_ref(q, k):
  s = q.astype(F32) @ k.astype(F32).T
  return s.sum(1) + s.max(0)


def test_a_row_statistic_meeting_a_column_statistic_reads_a_copy_through_smem():
  """It was MG204 ('this reduction gives a column vector ... but it meets ..., a row statistic'): two
  vectors of the same length, as jnp adds them. The reduction's uses read a copy made through SMEM."""
  q, k = _qk(10)
  np.testing.assert_allclose(row_and_column_sums(q, k, interpret=True), _row_col_ref(q, k), rtol=1e-5, atol=1e-5)
  _export(row_and_column_sums, S(q.shape, BF16), S(k.shape, BF16))


@pytest.mark.gpu
def test_gpu_a_row_statistic_meeting_a_column_statistic_matches_jnp():
  q, k = _qk(11)
  np.testing.assert_allclose(np.asarray(jax.jit(row_and_column_sums)(q, k)), _row_col_ref(q, k), rtol=1e-4, atol=1e-4)
