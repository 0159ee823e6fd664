"""Probe 67a: convolution, stencil and image kernels as people port them from Triton / CUDA (the corpus in
tests/probe67a_kernels.py: causal and depthwise convs, implicit-GEMM conv2d, 1x1 convs, pooling, resizes, transposed
convs, stencils and Jacobi iterations, Sobel / box / separable filters, histograms, integral images, im2col / col2im,
layouts and uint8 / int8 images). Each kernel runs in interpret mode against a jax.lax / NumPy reference and is
exported for CUDA. The classes found and fixed:

- a gather's `other=0.0` on integer data (a bilinear resize of a uint8 image, whose taps are gathers) was MG104,
  where a plain masked load takes the whole-number float as its integer, as Triton does; every masked path now
  takes `other` by one rule (`access.whole_other`);
- ping-pong buffers in a loop of static bounds (Jacobi's `src, dst = (a, b) if it % 2 == 0 else (b, a)`, the same
  as an `if` statement, or `src, dst = dst, src` each trip) were MG003 / MG005; Python runs them with the index an
  int, and so does the kernel now (the loop unrolled, as for `bufs[it % 2]`).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

import probe67a_convs as C
import probe67a_images as I
import probe67a_kernels as K
import probe67a_more as M
from probe_util import line_of

S = jax.ShapeDtypeStruct
CASES = {c[0]: c for c in K.CASES}


def _check(case, seed=0, interpret=True):
  name, kernel, inputs, kw, ref, tol = case
  args = inputs(seed)
  got = kernel(*args, interpret=interpret, **kw) if interpret else jax.jit(lambda *a: kernel(*a, **kw))(*args)
  want = ref(*args)
  gots, wants = (got, want) if isinstance(want, tuple) else ((got,), (want,))
  assert len(gots) == len(wants)
  for g, w in zip(gots, wants):
    assert np.shape(g) == np.shape(w)
    np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=tol, atol=tol)
  return args


@pytest.mark.parametrize("name", list(CASES))
def test_corpus_in_interpret_mode_matches_the_reference(name):
  _check(CASES[name], seed=3)


@pytest.mark.parametrize("name", list(CASES))
def test_corpus_exports_for_cuda(name):
  _, kernel, inputs, kw, _, _ = CASES[name]
  specs = [S(np.shape(a), a.dtype) for a in inputs(0)]
  text = jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*specs).mlir_module()
  assert "mosaic_gpu" in text


# ---------------------------------------------------------------- a gather's other on integer data

@mg.mgpu_kernel(out_shape=lambda x, ids: S(ids.shape, jnp.float32))
def gathered(x, ids, out, *, OTHER: ml.constexpr):
  i = ids[...]
  v = ml.load(x.at[i], mask=i < x.shape[0], other=OTHER)
  out[...] = v.astype(jnp.float32)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32])
@pytest.mark.parametrize("other", [0.0, 7.0])
def test_a_gathers_whole_number_float_other_is_its_integer(dtype, other):
  x = (np.arange(200) % 100).astype(dtype)
  ids = ((np.arange(128) * 37) % 260).astype(np.int32)           # some past the end: masked off
  got = np.asarray(gathered(x, ids, OTHER=other, interpret=True))
  want = np.where(ids < 200, x[np.minimum(ids, 199)], other).astype(np.float32)
  np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("other,cls,hint", [
    (0.5, mg.DtypeMismatchError, "an integer of uint8: other=0"),
    (-1.0, mg.KernelTypeError, "other=0, the nearest"),
    (float("-inf"), mg.DtypeMismatchError, "other=0 for a max"),
])
def test_a_gathers_other_that_is_no_uint8_is_reported_at_the_load(other, cls, hint):
  x = np.arange(200).astype(np.uint8)
  ids = np.arange(128, dtype=np.int32)
  with pytest.raises(cls) as e:
    gathered(x, ids, OTHER=other, interpret=True)
  assert (e.value.lineno, e.value.col_offset) == line_of(gathered, "ml.load(x.at[i]")
  assert "the gather's other" in e.value.message and hint in e.value.hint, str(e.value)


@mg.mgpu_kernel(out_shape=lambda x, n: S((1,), jnp.int32))
def scalar_other(x, n, out, *, OTHER: ml.constexpr):
  i = n[0]
  out[0] = ml.load(x.at[i], mask=i < x.shape[0], other=OTHER)


def test_a_scalar_loads_whole_number_float_outside_its_type_is_reported():
  x = np.arange(8, dtype=np.int32)
  np.testing.assert_array_equal(np.asarray(scalar_other(x, np.array([9], np.int32), OTHER=3.0, interpret=True)), [3])
  with pytest.raises(mg.KernelTypeError) as e:        # it was int(1e10), silently
    scalar_other(x, np.array([9], np.int32), OTHER=1e10, interpret=True)
  assert (e.value.lineno, e.value.col_offset) == line_of(scalar_other, "ml.load(x.at[i]")
  assert "outside int32's range" in e.value.message and "other=2147483647, the nearest" in e.value.hint


def test_the_uint8_bilinear_resize_compiles():
  """The kernel that found the class: four gathers of a uint8 image with other=0.0."""
  _check(CASES["resize_bilinear_down_u8"], seed=5)


# ---------------------------------------------------------------- ping-pong buffers in a loop of static bounds

@pytest.mark.parametrize("spelling", ["ifexp", "if", "swap"])
@pytest.mark.parametrize("iters", [1, 2, 5])
def test_jacobi_ping_pong_buffers_run_as_python_runs_them(spelling, iters):
  u = C.rnd((64, 64), iters)
  got = np.asarray(I.jacobi_smem(u, ITERS=iters, SPELLING=spelling, interpret=True))
  np.testing.assert_allclose(got, I.ref_jacobi(u, iters), rtol=1e-5, atol=1e-5)


def test_the_ping_pong_loop_is_unrolled_and_a_plain_loop_is_not():
  ir_text = I.jacobi_smem.typed_ir(S((64, 64), jnp.float32), ITERS=5, SPELLING="ifexp")
  assert "for start=" not in ir_text                  # five trips written out
  ir_text = I.jacobi_loop_registers.typed_ir(S((64, 64), jnp.float32), ITERS=5)
  assert "for start=" in ir_text                      # chooses no ref: a run-time loop as before


@mg.mgpu_kernel(out_shape=lambda u, **k: u, grid=(1,))
def long_ping_pong(u, out, *, ITERS: ml.constexpr):
  a = ml.smem(u.shape, u.dtype)
  b = ml.smem(u.shape, u.dtype)
  ml.copy(u, a)
  for it in range(ITERS):
    src, dst = (a, b) if it % 2 == 0 else (b, a)
    dst[...] = src[...] * 0.5
  ml.copy(a, out)


def test_a_ping_pong_loop_of_many_trips_keeps_its_error():
  with pytest.raises(mg.KernelError) as e:
    long_ping_pong.typed_ir(S((64, 64), jnp.float32), ITERS=100)
  assert e.value.code == "MG003"
  assert (e.value.lineno, e.value.col_offset) == line_of(long_ping_pong, "(a, b) if it % 2 == 0 else (b, a)")
  ir_text = long_ping_pong.typed_ir(S((64, 64), jnp.float32), ITERS=4)
  assert "for start=" not in ir_text


@mg.mgpu_kernel(out_shape=lambda u, n: u, grid=(1,))
def runtime_ping_pong(u, n, out):
  a = ml.smem(u.shape, u.dtype)
  b = ml.smem(u.shape, u.dtype)
  ml.copy(u, a)
  for it in range(n[0]):
    src, dst = (a, b) if it % 2 == 0 else (b, a)
    dst[...] = src[...] * 0.5
  ml.copy(a, out)


def test_a_ping_pong_loop_of_run_time_bounds_is_still_refused():
  with pytest.raises(mg.KernelError) as e:
    runtime_ping_pong.typed_ir(S((64, 64), jnp.float32), S((1,), jnp.int32))
  assert e.value.code == "MG003"
  assert (e.value.lineno, e.value.col_offset) == line_of(runtime_ping_pong, "(a, b) if it % 2 == 0 else (b, a)")
  assert "cannot be chosen at run time" in e.value.message or "different kind" in e.value.message


# ---------------------------------------------------------------- legitimate refusals: their place and hints

def test_a_halo_tma_window_at_c_minus_1_is_refused_with_the_aligned_window():
  x = C.rnd((128, 128), 0)
  with pytest.raises(mg.KernelError) as e:
    I.separable_box_tma(x, interpret=True)
  assert e.value.code == "MG401"
  assert (e.value.lineno, e.value.col_offset) == line_of(I.separable_box_tma, "ml.copy(x.at[ml.ds(r - 1, 72)")
  assert "ml.ds(c - 4, 132)" in e.value.hint and "t.at[:, ml.ds(3 + k, n)]" in e.value.hint
  _check(CASES["box3_tma_aligned"], seed=1)         # the hint's form, written out: it compiles and computes


@mg.mgpu_kernel(out_shape=lambda u: u, grid=(1,))
def jacobi_interior_window(u, out):
  a = ml.smem(u.shape, u.dtype)
  ml.copy(u, a)
  a[1:63, 1:63] = 0.25 * (a[0:62, 1:63] + a[2:64, 1:63] + a[1:63, 0:62] + a[1:63, 2:64])
  ml.copy(a, out)


def test_an_odd_smem_window_is_read_through_the_rows_it_lies_in():
  """Left here: a (62, 62) interior of an SMEM buffer is no register tensor (MG204, whose hint grew the buffer); since
  probe 69b each window is read through the buffer rows it lies in and sliced in registers, and the sweep computes."""
  u = C.rnd((64, 64), 3)
  want = u.copy()
  want[1:63, 1:63] = np.float32(0.25) * (u[0:62, 1:63] + u[2:64, 1:63] + u[1:63, 0:62] + u[1:63, 2:64])
  np.testing.assert_array_equal(np.asarray(jacobi_interior_window(u, interpret=True)), want)
  jax.export.export(jax.jit(jacobi_interior_window), platforms=["cuda"])(S((64, 64), jnp.float32)).mlir_module()


# ---------------------------------------------------------------- GPU twins

@pytest.mark.gpu
@pytest.mark.parametrize("name", ["resize_bilinear_down_u8", "jacobi_smem_ifexp", "jacobi_smem_if",
                                  "jacobi_smem_swap", "conv2d_igemm_f16_3x3", "causal_conv1d_bias_silu",
                                  "histogram_smem", "conv1d_gemm_pipelined", "median3x3_u8_helper",
                                  "conv1d_causal_register_taps_f16"])
def test_gpu_corpus(name):
  _check(CASES[name], seed=2, interpret=False)


@pytest.mark.gpu
def test_gpu_conv_with_float32_result():
  x, w = C.rnd((1, 8, 16, 16), 1).astype(np.float16), C.rnd((3, 3, 16, 32), 2).astype(np.float16)
  got = np.asarray(jax.jit(lambda a, b: conv_f32_result(a, b, GROUPS=1, PAD="SAME"))(x, w))
  np.testing.assert_allclose(got, _conv_ref(x, w, 1, "SAME"), rtol=2e-3, atol=2e-3)


# ---------------------------------------------------------------- conv_general_dilated's preferred_element_type

def _conv_out(x, w, *, GROUPS, PAD):
  edge = 0 if PAD == "SAME" else w.shape[0] - 1
  return S((x.shape[0], x.shape[1] - edge, x.shape[2] - edge, w.shape[3]), jnp.float32)


@mg.mgpu_kernel(out_shape=_conv_out, grid=(1,))
def conv_f32_result(x, w, out, *, GROUPS: ml.constexpr, PAD: ml.constexpr):
  out[...] = jax.lax.conv_general_dilated(x[...], w[...], (1, 1), PAD, dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                          feature_group_count=GROUPS, preferred_element_type=jnp.float32)


def _conv_ref(x, w, groups, pad):
  return np.asarray(jax.lax.conv_general_dilated(jnp.asarray(x, jnp.float32), jnp.asarray(w, jnp.float32), (1, 1), pad,
                                                 dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                                 feature_group_count=groups, precision="highest"))


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16])
@pytest.mark.parametrize("groups,xs,ws,pad", [(1, (1, 8, 16, 16), (3, 3, 16, 32), "SAME"),
                                              (1, (2, 8, 8, 16), (3, 3, 16, 16), "VALID"),
                                              (64, (1, 8, 16, 64), (3, 3, 1, 64), "SAME")])
def test_a_convs_preferred_element_type_float32_keeps_the_float32_sums(dtype, groups, xs, ws, pad):
  """It was MG003 ("conv_general_dilated cannot take a register tensor"): a CNN layer's 16-bit tiles accumulated in
  float32. The result is the float32 sum, not rounded to 16 bits (dots read 16-bit operands exactly)."""
  x, w = C.rnd(xs, 1).astype(dtype), C.rnd(ws, 2).astype(dtype)
  got = np.asarray(conv_f32_result(x, w, GROUPS=groups, PAD=pad, interpret=True))
  assert got.dtype == np.float32
  np.testing.assert_allclose(got, _conv_ref(x, w, groups, pad), rtol=1e-4, atol=1e-4)   # 16-bit rounding: 1e-2
  text = jax.export.export(jax.jit(lambda a, b: conv_f32_result(a, b, GROUPS=groups, PAD=pad)),
                           platforms=["cuda"])(S(xs, x.dtype), S(ws, w.dtype)).mlir_module()
  assert "mosaic_gpu" in text


@mg.mgpu_kernel(out_shape=lambda x, w: S(x.shape[:3] + (w.shape[3],), x.dtype), grid=(1,))
def conv_own_dtype(x, w, out):
  out[...] = jax.lax.conv_general_dilated(x[...], w[...], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                          preferred_element_type=x.dtype)


def test_a_convs_preferred_element_type_of_its_own_dtype_is_the_plain_conv():
  x, w = C.rnd((1, 8, 16, 16), 1).astype(jnp.bfloat16), C.rnd((3, 3, 16, 32), 2).astype(jnp.bfloat16)
  got = np.asarray(conv_own_dtype(x, w, interpret=True), np.float32)
  np.testing.assert_allclose(got, _conv_ref(x, w, 1, "SAME"), rtol=2e-2, atol=5e-2)


@mg.mgpu_kernel(out_shape=lambda x, w: S(x.shape[:3] + (w.shape[3],), jnp.float16), grid=(1,))
def conv_narrower(x, w, out):
  out[...] = jax.lax.conv_general_dilated(x[...], w[...], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                          preferred_element_type=jnp.float16)


def test_a_convs_preferred_element_type_narrower_than_its_operands_stays_refused():
  with pytest.raises(mg.KernelError) as e:
    conv_narrower.typed_ir(S((1, 8, 16, 16), jnp.float32), S((3, 3, 16, 32), jnp.float32))
  assert e.value.code == "MG003"
  assert (e.value.lineno, e.value.col_offset) == line_of(conv_narrower, "jax.lax.conv_general_dilated(")
  assert "conv_general_dilated" in e.value.message and "im2col" in e.value.hint


# ---------------------------------------------------------------- helpers called with a static loop's index

TAPS = (0.25, 0.5, 0.25)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def taps_by_helper(x, out):
  L = x.shape[0]
  t = ml.arange(L)
  def tap(k):
    tt = t + k - 1
    return TAPS[k] * ml.load(x.at[tt], mask=(tt >= 0) & (tt < L), other=0.0)
  acc = ml.zeros((L,), jnp.float32)
  for k in range(3):
    acc += tap(k)
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def plain_helper_loop(x, out):
  def step(v, k):
    return v * 0.5 + k
  acc = x[...]
  for k in range(3):
    acc = step(acc, k)
  out[...] = acc


def test_a_helper_indexing_a_tuple_by_the_loops_index_runs_unrolled():
  x = C.rnd((256,), 4)
  p = np.pad(x, 1)
  want = 0.25 * p[:-2] + 0.5 * p[1:-1] + 0.25 * p[2:]
  np.testing.assert_allclose(np.asarray(taps_by_helper(x, interpret=True)), want, rtol=1e-6, atol=1e-6)
  assert "for start=" not in taps_by_helper.typed_ir(S((256,), jnp.float32))
  ir_text = plain_helper_loop.typed_ir(S((256,), jnp.float32))      # needs no static index: a run-time loop
  assert "for start=" in ir_text
  np.testing.assert_allclose(np.asarray(plain_helper_loop(x, interpret=True)),
                             ((x * 0.5 + 0) * 0.5 + 1) * 0.5 + 2, rtol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def helper_mutating_a_list(x, out):
  t = [x[...], x[...] * 2.0]
  def swap(i, j):
    t[i], t[j] = t[j], t[i]
  for k in range(1):
    swap(k, k + 1)
  out[...] = t[0]


def test_a_helper_changing_its_callers_list_is_refused_at_the_item_assignment():
  """Left, documented: lists are values in a kernel; the hint writes the list again (or returns the new items)."""
  with pytest.raises(mg.KernelError) as e:
    helper_mutating_a_list.typed_ir(S((256,), jnp.float32))
  assert e.value.code == "MG003"
  assert (e.value.lineno, e.value.col_offset) == line_of(helper_mutating_a_list, "t[i], t[j] = t[j], t[i]")
  assert "lists are values" in e.value.message and "t = t[:i] + [v] + t[i + 1:]" in e.value.hint


# ---------------------------------------------------------------- a tensor-core operand's window inside a tile

@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16])
def test_a_dot_operands_window_starting_inside_a_tile_names_its_starts_and_the_forms_that_compile(dtype):
  """It said to promise a multiple of 8 (ml.multiple_of) or to unroll the loop; neither holds for starts 5..8."""
  with pytest.raises(mg.KernelError) as e:
    M.conv1d_sliding.typed_ir(S((2, 128, 64), dtype), S((4, 64, 64), dtype), REGS=False)
  assert e.value.code == "MG204"
  assert (e.value.lineno, e.value.col_offset) == line_of(M.conv1d_sliding, "x_s.at[ml.ds(8 - (KT - 1) + k, 64), :]")
  assert "slices the rows or columns of x_s" in e.value.message
  hint = e.value.hint
  assert "starts at rows 5, 6, 7, 8 over the loop's trips" in hint and "multiple_of" not in hint
  assert "ml.dot(x_s[ml.ds(8 - (KT - 1) + k, 64), :], ...)" in hint
  assert "ml.copy(src.at[..., ml.ds(..., 64), :], x_s_k)" in hint
  for name in ("conv1d_causal_register_taps_f16", "conv1d_causal_tap_copies_bf16"):       # the forms it writes
    _check(CASES[name], seed=6)


@mg.mgpu_kernel(out_shape=lambda x, w, s: S((64, w.shape[1]), jnp.float32))
def aligned_window_run_time(x, w, s, out):
  a_s = ml.smem((128, 64), x.dtype)
  w_s = ml.smem(w.shape, w.dtype)
  ml.copy(x, a_s)
  ml.copy(w, w_s)
  out[...] = ml.dot(a_s.at[ml.ds(s[0], 64), :], w_s)


def test_a_run_time_start_read_from_memory_keeps_the_promise_hint():
  with pytest.raises(mg.KernelError) as e:
    aligned_window_run_time.typed_ir(S((128, 64), jnp.float16), S((64, 64), jnp.float16), S((1,), jnp.int32))
  assert e.value.code == "MG204" and "ml.ds(ml.multiple_of(s[0], 8), 64)" in e.value.hint


# ---------------------------------------------------------------- the shape sweep (tests/probe67a_sweep.py)

@pytest.mark.parametrize("seed", range(25))
def test_sweep_of_odd_shapes_strides_and_paddings_matches_the_reference(seed):
  import probe67a_sweep
  name, kw, status, msg = probe67a_sweep.run(seed, build=seed < 5)
  assert status == "ok", f"{name} {kw}: {status} {msg}"


# ---------------------------------------------------------------- a conv of few output channels

@mg.mgpu_kernel(out_shape=lambda x, w, **k: S(k["OUT"], jnp.float32), grid=(1,))
def conv_head(x, w, out, *, DN: ml.constexpr, OUT: ml.constexpr):
  out[...] = jax.lax.conv_general_dilated(x[...], w[...], (1, 1), "SAME", dimension_numbers=DN,
                                          preferred_element_type=jnp.float32)


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16, np.float32])
@pytest.mark.parametrize("o,dn,xs,ws", [
    (1, ("NHWC", "HWIO", "NHWC"), (1, 8, 16, 16), (3, 3, 16, 1)),       # a segmentation head's one channel
    (2, ("NHWC", "HWIO", "NHWC"), (2, 8, 8, 16), (3, 3, 16, 2)),
    (3, ("NHWC", "HWIO", "NHWC"), (1, 8, 16, 16), (3, 3, 16, 3)),
    (12, ("NHWC", "HWIO", "NHWC"), (1, 8, 16, 16), (3, 3, 16, 12)),
    (1, ("NCHW", "OIHW", "NCHW"), (1, 16, 8, 16), (1, 16, 3, 3)),
    (8, ("NHWC", "HWIO", "NHWC"), (1, 8, 16, 4), (3, 3, 4, 8))])
def test_a_dense_conv_of_fewer_than_16_output_channels_computes(dtype, o, dn, xs, ws):
  """It was ml.dot's MG501 at the conv's line ("n (1) of b"): each tap's product is computed 16 wide (zero weights)
  and the first o columns taken."""
  x, w = C.rnd(xs, 1).astype(dtype), C.rnd(ws, 2).astype(dtype)
  want = np.asarray(jax.lax.conv_general_dilated(jnp.asarray(x, jnp.float32), jnp.asarray(w, jnp.float32), (1, 1),
                                                 "SAME", dimension_numbers=dn, precision="highest"))
  got = np.asarray(conv_head(x, w, DN=dn, OUT=want.shape, interpret=True))
  tol = 5e-2 if dtype == np.float32 else 1e-4          # (float32 operands read as TF32, as XLA's GPU conv)
  np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
  if dtype != np.float32:
    jax.export.export(jax.jit(lambda a, b: conv_head(a, b, DN=dn, OUT=want.shape)),
                      platforms=["cuda"])(S(xs, x.dtype), S(ws, w.dtype))


@pytest.mark.gpu
def test_gpu_conv_of_one_output_channel():
  x, w = C.rnd((1, 8, 16, 16), 1).astype(np.float16), C.rnd((3, 3, 16, 1), 2).astype(np.float16)
  dn = ("NHWC", "HWIO", "NHWC")
  want = _conv_ref(x, w, 1, "SAME")
  got = np.asarray(jax.jit(lambda a, b: conv_head(a, b, DN=dn, OUT=want.shape))(x, w))
  np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)


@mg.mgpu_kernel(out_shape=lambda x, ids: S(ids.shape, jnp.int32))
def gathered_bool(x, ids, out, *, OTHER: ml.constexpr):
  i = ids[...]
  out[...] = ml.load(x.at[i], mask=i < x.shape[0], other=OTHER).astype(jnp.int32)


def test_a_bool_gathers_float_other_stays_an_error_whose_hint_is_a_bool():
  x, ids = np.arange(100) % 3 == 0, np.arange(128, dtype=np.int32)
  np.testing.assert_array_equal(np.asarray(gathered_bool(x, ids, OTHER=True, interpret=True)),
                                np.where(ids < 100, x[np.minimum(ids, 99)], True).astype(np.int32))
  with pytest.raises(mg.DtypeMismatchError) as e:
    gathered_bool(x, ids, OTHER=0.0, interpret=True)
  assert (e.value.lineno, e.value.col_offset) == line_of(gathered_bool, "ml.load(x.at[i]")
  assert e.value.message == "the gather's other (0.0) is not bool, the dtype of x" and e.value.hint == \
      "other=False (x holds bool)"


# ---------------------------------------------------------------- ml.num_sms in a grid callable

@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.num_sms(),))
def persistent_with_ml_num_sms(x, out):
  for item in range(ml.program_id(0), x.shape[0], ml.num_programs(0)):
    out[item] = x[item] * 2.0


def test_a_grid_callable_asking_ml_for_mgs_num_sms_is_told_where_it_lives():
  """A persistent conv's grid written with ml.num_sms() (mg.num_sms is the host-side call): MG006 said only "grid is
  called with the kernel's inputs"."""
  with pytest.raises(mg.SignatureError) as e:
    persistent_with_ml_num_sms.typed_ir(S((8, 128), jnp.float32))
  assert e.value.code == "MG006"
  assert (e.value.lineno, e.value.col_offset) == line_of(persistent_with_ml_num_sms, "grid=lambda x: (ml.num_sms(),)")
  assert "has no attribute 'num_sms'" in e.value.message
  assert e.value.hint.startswith("num_sms is mgpu_dsl's, not the kernel language's: mg.num_sms")
