"""Probe 67a's corpus: convolution, stencil and image kernels as people port them from Triton / CUDA; the kernels
are in probe67a_convs.py and probe67a_images.py. Each case is (name, kernel, inputs(seed), constexprs,
reference(*inputs) -> expected output, tolerance)."""
import jax.numpy as jnp
import numpy as np

import probe67a_convs as C
import probe67a_images as I
import probe67a_jnp
import probe67a_more


# ---------------------------------------------------------------- the cases

def _case(name, kernel, inputs, kw, ref, tol=1e-4):
  return (name, kernel, inputs, kw, ref, tol)


def _f16(shape, seed):
  return C.rnd(shape, seed, np.float16)


CASES = [
    _case("causal_conv1d", C.causal_conv1d, lambda s: (C.rnd((2, 40, 100), s), C.rnd((40, 4), s + 1)),
          dict(BD=16, BL=64, WIDTH=4, SILU=False), lambda x, w: C.ref_causal(x, w)),
    _case("causal_conv1d_silu_bf16", C.causal_conv1d,
          lambda s: (C.rnd((2, 24, 77), s).astype(jnp.bfloat16), C.rnd((24, 4), s + 1).astype(jnp.bfloat16)),
          dict(BD=8, BL=32, WIDTH=4, SILU=True), lambda x, w: C.ref_causal(x, w, silu=True), 3e-2),
    _case("causal_conv1d_bias_silu", C.causal_conv1d_bias,
          lambda s: (C.rnd((3, 33, 130), s), C.rnd((33, 4), s + 1), C.rnd((33,), s + 2)),
          dict(BD=16, BL=64, SILU=True), lambda x, w, b: C.ref_causal(x, w, b, silu=True)),
    _case("causal_conv1d_bias", C.causal_conv1d_bias,
          lambda s: (C.rnd((2, 64, 256), s), C.rnd((64, 4), s + 1), C.rnd((64,), s + 2)),
          dict(BD=32, BL=128, SILU=False), lambda x, w, b: C.ref_causal(x, w, b)),
    _case("causal_conv1d_channel_last_f16", C.causal_conv1d_channel_last,
          lambda s: (_f16((2, 90, 48), s), _f16((4, 48), s + 1)),
          dict(BL=32, BD=32), lambda x, w: C.ref_causal(x, w, silu=True, channel_last=True), 2e-2),
    _case("conv1d_same_rows", C.conv1d_same_rows, lambda s: (_f16((5, 201), s), C.rnd((3,), s + 1)),
          dict(), lambda x, w: np.stack([np.convolve(r.astype(np.float32), w[::-1], "same") for r in x])),
    _case("depthwise_3x3_same", C.depthwise_nhwc, lambda s: (C.rnd((2, 13, 17, 24), s), C.rnd((3, 3, 24), s + 1)),
          dict(K=3, STRIDE=1, PAD=1, BW=16, BC=16), lambda x, w: C.ref_depthwise(x, w, 3, 1, 1)),
    _case("depthwise_5x5_same_s2", C.depthwise_nhwc, lambda s: (C.rnd((1, 19, 21, 32), s), C.rnd((5, 5, 32), s + 1)),
          dict(K=5, STRIDE=2, PAD=2, BW=8, BC=32), lambda x, w: C.ref_depthwise(x, w, 5, 2, 2)),
    _case("depthwise_3x3_valid_s2_f16", C.depthwise_nhwc, lambda s: (_f16((2, 15, 15, 16), s), _f16((3, 3, 16), s + 1)),
          dict(K=3, STRIDE=2, PAD=0, BW=8, BC=16), lambda x, w: C.ref_depthwise(x, w, 3, 2, 0), 2e-2),
    _case("depthwise_5x5_valid", C.depthwise_nhwc, lambda s: (C.rnd((1, 12, 40, 8), s), C.rnd((5, 5, 8), s + 1)),
          dict(K=5, STRIDE=1, PAD=0, BW=32, BC=8), lambda x, w: C.ref_depthwise(x, w, 5, 1, 0)),
    _case("depthwise_nchw_3x3_valid", C.depthwise_nchw_3x3_valid,
          lambda s: (C.rnd((6, 30, 45), s), C.rnd((6, 3, 3), s + 1)), dict(),
          lambda x, w: np.stack([sum(x[p, i:i + 28, j:j + 43] * w[p, i, j] for i in range(3) for j in range(3))
                                 for p in range(6)])),
    _case("conv2d_igemm_f16_3x3", C.conv2d_implicit_gemm, lambda s: (_f16((2, 10, 12, 32), s), _f16((3, 3, 32, 64), s + 1)),
          dict(STRIDE=1, PAD=1, BM=64, BN=64, BK=32), lambda x, w: C.ref_conv(x, w, 1, 1), 2e-2),
    _case("conv2d_igemm_bf16_s2", C.conv2d_implicit_gemm,
          lambda s: (C.rnd((1, 17, 15, 64), s).astype(jnp.bfloat16), C.rnd((3, 3, 64, 64), s + 1).astype(jnp.bfloat16)),
          dict(STRIDE=2, PAD=1, BM=64, BN=64, BK=64), lambda x, w: C.ref_conv(x, w, 2, 1), 5e-2),
    _case("conv2d_igemm_regs_f16", C.conv2d_implicit_gemm_regs,
          lambda s: (_f16((2, 9, 11, 16), s), _f16((3, 3, 16, 32), s + 1)),
          dict(STRIDE=1, PAD=1, BM=64, BN=32, BK=32), lambda x, w: C.ref_conv(x, w, 1, 1), 2e-2),
    _case("conv2d_igemm_regs_valid_5x5", C.conv2d_implicit_gemm_regs,
          lambda s: (_f16((1, 12, 12, 8), s), _f16((5, 5, 8, 16), s + 1)),
          dict(STRIDE=1, PAD=0, BM=64, BN=16, BK=64), lambda x, w: C.ref_conv(x, w, 1, 0), 2e-2),
    _case("conv1x1_nhwc", C.conv1x1, lambda s: (_f16((2, 3, 64, 32), s), _f16((32, 64), s + 1)), dict(),
          lambda x, w: np.einsum("nhwc,cd->nhwd", x.astype(np.float32), w.astype(np.float32)), 2e-2),
    _case("conv1x1_nchw_bias", C.conv1x1_nchw,
          lambda s: (_f16((2, 32, 7, 9), s), _f16((64, 32), s + 1), C.rnd((64,), s + 2)), dict(),
          lambda x, w, b: np.einsum("nchw,dc->ndhw", x.astype(np.float32), w.astype(np.float32))
          + b[None, :, None, None], 2e-2),
]

CASES += [
    _case("maxpool2x2_nhwc", C.maxpool2x2_nhwc, lambda s: (C.rnd((2, 8, 16, 32), s),), dict(),
          lambda x: C.ref_pool(x, 2, 2, 0, "max")),
    _case("maxpool3x3_s2_pad1", C.maxpool_nhwc, lambda s: (C.rnd((2, 15, 15, 16), s),), dict(K=3, STRIDE=2, PAD=1, BW=8),
          lambda x: C.ref_pool(x, 3, 2, 1, "max")),
    _case("maxpool3x3_s1_valid_f16", C.maxpool_nhwc, lambda s: (_f16((1, 9, 13, 32), s),),
          dict(K=3, STRIDE=1, PAD=0, BW=16), lambda x: C.ref_pool(x, 3, 1, 0, "max"), 1e-3),
    _case("avgpool3x3_pad_include", C.avgpool_nhwc, lambda s: (C.rnd((2, 11, 11, 16), s),),
          dict(K=3, STRIDE=1, PAD=1, BW=16, INCLUDE_PAD=True), lambda x: C.ref_pool(x, 3, 1, 1, "avg")),
    _case("avgpool3x3_s2_pad_exclude", C.avgpool_nhwc, lambda s: (C.rnd((2, 12, 13, 16), s),),
          dict(K=3, STRIDE=2, PAD=1, BW=8, INCLUDE_PAD=False), lambda x: C.ref_pool(x, 3, 2, 1, "avg", False)),
    _case("global_avgpool_nchw", C.global_avgpool_nchw, lambda s: (C.rnd((3, 8, 7, 7), s),), dict(),
          lambda x: x.mean(axis=(2, 3))),
    _case("upsample_nearest2x", C.upsample_nearest2x, lambda s: (C.rnd((3, 5, 37), s),), dict(),
          lambda x: x.repeat(2, 1).repeat(2, 2)),
    _case("resize_bilinear_up", C.resize_bilinear, lambda s: (C.rnd((2, 7, 9), s),), dict(OH=17, OW=23),
          lambda x: C.ref_bilinear(x, 17, 23)),
    _case("resize_bilinear_down_u8", C.resize_bilinear, lambda s: (C.img_u8((2, 40, 50), s),), dict(OH=20, OW=25),
          lambda x: C.ref_bilinear(x, 20, 25), 1e-3),
    _case("conv_transpose_dw_s2", C.conv_transpose_depthwise_scatter,
          lambda s: (C.rnd((2, 5, 8, 16), s), C.rnd((3, 3, 16), s + 1)), dict(STRIDE=2),
          lambda x, w: C.ref_conv_transpose_dw(x, w, 2)),
    _case("laplacian2d_odd", I.laplacian2d, lambda s: (C.rnd((37, 75), s),), dict(BH=16, BW=32), I.ref_laplacian),
    _case("jacobi_smem_ifexp", I.jacobi_smem, lambda s: (C.rnd((64, 64), s),), dict(ITERS=5, SPELLING="ifexp"),
          lambda u: I.ref_jacobi(u, 5)),
    _case("jacobi_smem_if", I.jacobi_smem, lambda s: (C.rnd((64, 64), s),), dict(ITERS=4, SPELLING="if"),
          lambda u: I.ref_jacobi(u, 4)),
    _case("jacobi_smem_swap", I.jacobi_smem, lambda s: (C.rnd((64, 64), s),), dict(ITERS=3, SPELLING="swap"),
          lambda u: I.ref_jacobi(u, 3)),
    _case("jacobi_loop_registers", I.jacobi_loop_registers, lambda s: (C.rnd((64, 64), s),), dict(ITERS=7),
          lambda u: I.ref_jacobi(u, 7)),
    _case("stencil3d_7pt", I.stencil3d_7pt, lambda s: (C.rnd((6, 16, 30), s),), dict(BW=32), I.ref_lap3d),
]

CASES += [
    _case("sobel_u8_odd", I.sobel_u8, lambda s: (C.img_u8((45, 77), s),), dict(BH=16, BW=32), I.ref_sobel, 1e-3),
    _case("box_blur_u8_r1", I.box_blur_u8, lambda s: (C.img_u8((2, 19, 33), s),), dict(BH=8, BW=32, R=1),
          lambda x: I.ref_box(x, 1), 0),
    _case("box_blur_u8_r2", I.box_blur_u8, lambda s: (C.img_u8((1, 30, 70), s),), dict(BH=16, BW=64, R=2),
          lambda x: I.ref_box(x, 2), 0),
    _case("separable_gauss_smem", I.separable_gauss_smem, lambda s: (C.rnd((50, 100), s),), dict(), I.ref_gauss),
    _case("histogram_u8", I.histogram_u8, lambda s: (C.img_u8((3001,), s),), dict(),
          lambda x: np.bincount(x, minlength=256).astype(np.int32), 0),
    _case("histogram_smem", I.histogram_smem, lambda s: (C.img_u8((7, 300), s),), dict(),
          lambda x: np.bincount(x.ravel(), minlength=256).astype(np.int32), 0),
    _case("integral_image", I.integral_image, lambda s: (C.rnd((2, 37, 51), s),), dict(),
          lambda x: x.cumsum(1).cumsum(2), 1e-3),
    _case("integral_image_u8", I.integral_image, lambda s: (C.img_u8((2, 64, 60), s),), dict(),
          lambda x: x.astype(np.float32).cumsum(1).cumsum(2), 1e-3),
    _case("integral_image_rows_loop", I.integral_image_rows_loop, lambda s: (C.rnd((20, 100), s),), dict(BW=128),
          lambda x: x.cumsum(0).cumsum(1), 1e-3),
    _case("im2col_nhwc", I.im2col_nhwc, lambda s: (C.rnd((2, 9, 11, 16), s),), dict(K=3), lambda x: I.ref_im2col(x, 3)),
    _case("col2im_atomic", I.col2im_atomic, lambda s: (C.rnd((2 * 7 * 9, 9 * 16), s),), dict(N=2, H=9, W=11, K=3),
          lambda c: I.ref_col2im(c, 2, 9, 11, 3)),
    _case("normalize_u8_nhwc_to_nchw", I.normalize_nhwc_u8_to_nchw,
          lambda s: (C.img_u8((2, 5, 50, 3), s), np.array([0.485, 0.456, 0.406], np.float32),
                     np.array([0.229, 0.224, 0.225], np.float32)), dict(), I.ref_normalize),
    _case("nchw_to_nhwc", I.nchw_to_nhwc, lambda s: (C.rnd((2, 32, 3, 64), s),), dict(), lambda x: x.transpose(0, 2, 3, 1)),
    _case("conv3x3_int8_requant", I.conv3x3_int8_requant,
          lambda s: (np.random.default_rng(s).integers(-128, 128, (3, 20, 40)).astype(np.int8),
                     np.random.default_rng(s + 1).integers(-128, 128, (3, 3)).astype(np.int8),
                     np.array([0.003], np.float32)), dict(), I.ref_int8_conv, 0),
    _case("conv1d_gemm_pipelined", I.conv1d_gemm_pipelined,
          lambda s: (_f16((2, 200, 64), s), _f16((3, 64, 64), s + 1)), dict(BM=64, BK=32, STAGES=2),
          I.ref_conv1d_dense, 3e-2),
]

CASES += [
    _case("box3_tma_aligned", I.box3_tma_aligned, lambda s: (C.rnd((128, 192), s),), dict(), I.ref_box_f),
    _case("pixel_shuffle_nhwc", I.pixel_shuffle_nhwc, lambda s: (C.rnd((2, 5, 7, 64), s),), dict(R=2),
          lambda x: I.ref_pixel_shuffle(x, 2)),
    _case("upsample_nearest_repeat_nhwc", I.upsample_nearest_repeat_nhwc, lambda s: (C.rnd((2, 3, 32, 16), s),), dict(),
          lambda x: x.repeat(2, 1).repeat(2, 2)),
    _case("resize_bilinear_nhwc_bf16", I.resize_bilinear_nhwc_bf16,
          lambda s: (C.rnd((2, 9, 13, 16), s).astype(jnp.bfloat16),), dict(OH=20, OW=27),
          lambda x: I.ref_bilinear_nhwc(x, 20, 27), 1e-3),
]

CASES += probe67a_jnp.CASES + probe67a_more.CASES
