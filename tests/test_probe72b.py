"""Probe 72b (signal-processing, complex-number and spectral kernels as cuFFT-replacement, torchaudio, cuSignal,
VkFFT-style Triton ports and JAX users write them: complex numbers as (re, im) pairs or interleaved last axes, radix-2
/ radix-4 / Stockham FFTs, bit reversal, DFTs and DCTs as matmuls, FIR / IIR filters, resampling, STFT framing and
overlap-add, mel filterbanks, correlations, Goertzel, an FFT convolution pipeline): the corpus (tests/probe72b_complex.py,
probe72b_fft.py, probe72b_filter.py, probe72b_stft.py), each kernel checked in interpret mode against its NumPy
reference and exported for CUDA; the classes fixed (design note 237), each with a test that fails on the code before
it."""
import cmath
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
import probe72b_audio
import probe72b_complex
import probe72b_fft
import probe72b_filter
import probe72b_more
import probe72b_stft
import probe72b_triton
from probe72b_run import err, export

S = jax.ShapeDtypeStruct
F32, F16 = jnp.float32, jnp.float16
MODULES = (probe72b_complex, probe72b_fft, probe72b_filter, probe72b_stft, probe72b_more, probe72b_audio, probe72b_triton)
CASES = {name: c for m in MODULES for name, c in m.CASES.items()}


def _line_of(text, path=__file__):
  with open(path) as f:
    return next(n for n, line in enumerate(f, 1) if text in line)


def _quiet(run):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.KernelWarning)
    return run()


def _export(kernel, *args, **kw):
  specs = [S(np.shape(a), np.asarray(a).dtype) for a in args]
  return jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*specs).mlir_module()


def _error(kernel, specs, cls, code, line_text, col_text, message, hint=None):
  """The diagnostic of `kernel` at `specs`: its class, code, line and column (of col_text in the line), message."""
  with pytest.raises(cls) as info:
    kernel.typed_ir(*specs)
  e = info.value
  assert e.code == code, (e.code, str(e))
  assert e.filename == __file__ and e.lineno == _line_of(line_text), (e.filename, e.lineno, str(e))
  with open(__file__) as f:
    assert e.col_offset == f.readlines()[e.lineno - 1].index(col_text), (e.col_offset, str(e))
  assert message in e.message, e.message
  if hint is not None:
    assert hint in e.hint, e.hint
  return e


def _close(got, want, tol):
  got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert np.shape(g) == np.shape(w), (np.shape(g), np.shape(w))
    assert err(g, w) <= tol, err(g, w)


def test_corpus_size():
  assert len(CASES) >= 60, len(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_matches_its_reference_and_builds(name):
  """Each kernel against its reference in interpret mode (within its tolerance), then its Mosaic GPU module(s) built
  for CUDA (a host pipeline's launches one by one)."""
  kernel, make, ref, tol = CASES[name]
  args, kw = make(0)
  _close(_quiet(lambda: kernel(*args, **kw, interpret=True)), ref(*args, **kw), tol)
  _quiet(lambda: export(kernel, args, kw))


GPU_TWINS = ["cmul_conj_interleaved_last_axis", "magnitude_flat_interleaved_gathers", "power_spectrum_db_top_db",
             "phase_vocoder_step_wrap_round", "fft256_radix2_register_partner_gathers",
             "fft128_stockham_smem_gmem_twiddles_scatter_set", "fft8_per_thread_unrolled_columns",
             "fft64_radix4_dif_smem_twiddles_digit_reverse", "bitrev_columns_module_constant_table",
             "dft64_matmul_gmem_matrices_f16", "cdft64_four_dots_matrix_in_kernel_bf16",
             "rfft128_half_bins_65_columns_f16", "dct2_ortho_matrix_in_smem_transposed_dot",
             "dft2d_64_chained_dots_through_smem", "fir16_shifted_masked_loads_ragged",
             "fir9_module_taps_tma_halo_smem_slices", "biquad_df2t_time_loop_lane_per_channel",
             "one_pole_iir_associative_scan", "polyphase_resample_3_over_2", "goertzel_8_bins_scalar_samples",
             "stft_power_dft_on_tensor_cores", "overlap_add_atomic_windows", "whisper_log_mel_129_bins_80_mels",
             "fft_convolution_three_launch_pipeline", "four_step_twiddles_libdevice_sinpi_cospi",
             "instantaneous_frequency_jnp_unwrap_frames", "fft128_vanderplas_vectorised_reshape_vstack",
             "cic3_decimate8_wrapping_int32_cumsum", "four_step_fft1024_32x32_tiles_transposed",
             "yin_cmnd_static_lags_first_below_threshold", "hpss_median_filters_soft_masks"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_TWINS)
def test_gpu_corpus_matches_its_reference(name):
  """The GPU twins, within the corpus's tolerances (CUDA's sin / cos / atan2 / log within a few ulp of NumPy's)."""
  kernel, make, ref, tol = CASES[name]
  args, kw = make(1)
  _close(_quiet(lambda: kernel(*args, **kw)), ref(*args, **kw), max(tol, 1e-5))


# ---------------------------------------------------------------- class 1: NumPy index tables
def _rev(n):
  b = n.bit_length() - 1
  return np.array([int(format(i, f"0{b}b")[::-1], 2) for i in range(n)], np.int32)


REV32, REV256, REV512 = _rev(32), _rev(256), _rev(512)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def columns_by_module_table(x, out):
  r = ml.ds(ml.program_id(0) * 8, 8)
  out.at[r, :][...] = x.at[r, :][...][:, REV32]


@mg.mgpu_kernel(out_shape=lambda x: (x, x, x))
def vector_by_module_table(x, gathered, from_ref, scattered):
  gathered[...] = x[...][REV256]
  from_ref[...] = x[REV256]
  scattered[REV256] = x[...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def too_long_a_table(x, out):
  out[...] = x[...][REV512]


@mg.mgpu_kernel(out_shape=lambda x, rev: x)
def too_long_a_table_followed(x, rev, out):
  out[...] = x[...][rev[...]]


def test_a_numpy_index_table_gathers_and_scatters():
  """A module's NumPy array of indices (an FFT's bit-reversal table, cuFFT's `__constant__ int rev[]`) indexing a
  register tensor, a ref or a scatter's target was MG900 ("the truth value of an array ... is ambiguous"); it is the
  register table jnp.asarray of it makes, a gather or scatter as NumPy's advanced indexing."""
  x = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(columns_by_module_table(x, interpret=True)), x[:, REV32])
  assert "mosaic_gpu" in _export(columns_by_module_table, x)
  v = np.arange(256, dtype=np.float32)
  g, f, s = vector_by_module_table(v, interpret=True)
  np.testing.assert_array_equal(np.asarray(g), v[REV256])
  np.testing.assert_array_equal(np.asarray(f), v[REV256])
  np.testing.assert_array_equal(np.asarray(s), v[np.argsort(REV256)])
  assert "mosaic_gpu" in _export(vector_by_module_table, v)


def test_a_numpy_index_table_past_a_register_table_says_what_to_write():
  """A table past 256 numbers (and 64 runs) is a located MG003 whose hint (pass it as an input) computes."""
  _error(too_long_a_table, [S((512,), F32)], mg.KernelTypeError, "MG003", "out[...] = x[...][REV512]", "x[...][REV512]",
         "x[...][REV512]: an index table of 512 numbers from outside the kernel is more than a register table holds",
         "pass it to the kernel as an int32 input and index with its read (idx = idx_ref[...], then x[idx])")
  v = np.arange(512, dtype=np.float32)
  np.testing.assert_array_equal(np.asarray(too_long_a_table_followed(v, REV512, interpret=True)), v[REV512])


# ---------------------------------------------------------------- class 2: a dot of an odd n
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2 + 1), F32), grid=lambda x: (x.shape[0] // 64,))
def rfft_real_part(x, out):
  N = x.shape[1]
  n = ml.arange(N)[:, None]
  k = ml.arange(N // 2 + 1)[None, :]
  c = ml.cos((-2.0 * math.pi / N) * ((n * k) % N).astype(F32)).astype(F16)
  rows = ml.ds(ml.program_id(0) * 64, 64)
  out.at[rows, :][...] = ml.dot(x.at[rows, :][...], c)


@mg.mgpu_kernel(out_shape=lambda x, c: S((x.shape[0], c.shape[1]), F32), grid=lambda x, c: (x.shape[0] // 64,))
def mel_of_201_bins(x, c, out):
  rows = ml.ds(ml.program_id(0) * 64, 64)
  out.at[rows, :][...] = jnp.dot(x.at[rows, :][...], c[...], preferred_element_type=F32)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2 + 1), F32), grid=lambda x: (x.shape[0] // 64,))
def rfft_of_512(x, out):
  N = x.shape[1]
  n = ml.arange(N)[:, None]
  k = ml.arange(N // 2 + 1)[None, :]
  c512 = ml.cos((-2.0 * math.pi / N) * ((n * k) % N).astype(F32)).astype(F16)
  rows = ml.ds(ml.program_id(0) * 64, 64)
  out.at[rows, :][...] = ml.dot(x.at[rows, :][...], c512)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2 + 1), F32), grid=lambda x: (x.shape[0] // 64,))
def rfft_of_512_followed(x, out):
  N = x.shape[1]
  rows = ml.ds(ml.program_id(0) * 64, 64)
  k = ml.arange(N // 2 + 1)[None, :]
  acc = ml.zeros((64, 257), jnp.float32)
  for k0 in ml.static_range(0, 512, 64):
    n = k0 + ml.arange(64)[:, None]
    c512_blk = ml.cos((-2.0 * math.pi / N) * ((n * k) % N).astype(F32)).astype(F16)
    acc = ml.dot(x.at[rows, :][...][:, k0:k0 + 64], c512_blk, acc)
  out.at[rows, :][...] = acc


@pytest.mark.parametrize("n", [128, 256, 400])
def test_a_dot_of_an_odd_n_is_computed_padded(n):
  """A real FFT's N/2 + 1 bins as a product, `ml.dot(x, C)` of a (N, N/2 + 1) matrix (65, 129 or 201 columns), was
  MG501 "n must be a multiple of 16" though a padded trace computes such products; it is the product at padded
  columns (zero columns of b), its own n kept."""
  x = np.random.default_rng(n).standard_normal((128, n)).astype(np.float16)
  k = n // 2 + 1
  ang = -2 * np.pi / n * ((np.arange(n)[:, None] * np.arange(k)[None, :]) % n)
  want = x.astype(np.float64) @ np.cos(ang).astype(np.float16).astype(np.float64)
  _close(np.asarray(_quiet(lambda: rfft_real_part(x, interpret=True))), want, 1e-3)
  assert "mosaic_gpu" in _quiet(lambda: _export(rfft_real_part, x))


def test_a_jnp_dot_of_a_gmem_matrix_of_201_columns_is_computed_padded():
  x = np.random.default_rng(1).standard_normal((128, 400)).astype(np.float16)
  c = np.random.default_rng(2).standard_normal((400, 201)).astype(np.float16)
  _close(np.asarray(_quiet(lambda: mel_of_201_bins(x, c, interpret=True))), x.astype(np.float64) @ c, 1e-3)
  assert "mosaic_gpu" in _quiet(lambda: _export(mel_of_201_bins, x, c))


def test_an_odd_n_past_the_smem_keeps_its_mg501():
  """257 columns of a 512-point DFT matrix (257 KiB of float16) fit no SMEM, padded or not: MG501 stands, whose
  hint said "split wider tiles into several dots of at most 256 columns, each a multiple of 16" (no split of 257
  is); it takes k in blocks whose b fits, which computes."""
  _error(rfft_of_512, [S((128, 512), F16)], mg.MmaOperandError, "MG501", "ml.dot(x.at[rows, :][...], c512)",
         "ml.dot", "needs n (columns of b) to be a multiple of 16 and at most 256, got 257",
         "this (512, 257) b does not: take k in blocks of 64, acc = ml.zeros((64, 257), jnp.float32), then for k0 in"
         " ml.static_range(0, 512, 64): acc = ml.dot(x.at[rows, :][...][:, k0:k0 + 64], c512_blk, acc)")
  x = np.random.default_rng(5).standard_normal((64, 512)).astype(np.float16)
  ang = -2 * np.pi / 512 * ((np.arange(512)[:, None] * np.arange(257)[None, :]) % 512)
  want = x.astype(np.float64) @ np.cos(ang).astype(np.float16).astype(np.float64)
  _close(np.asarray(_quiet(lambda: rfft_of_512_followed(x, interpret=True))), want, 1e-3)
  assert "mosaic_gpu" in _quiet(lambda: _export(rfft_of_512_followed, x))


# ---------------------------------------------------------------- class 3: libdevice's float intrinsics
ld = ml.extra.cuda.libdevice


@mg.mgpu_kernel(out_shape=lambda x, y: (x,) * 6)
def float_intrinsics(x, y, sp, cp, e10, rh, rem, l10):
  v, w = x[...], y[...]
  sp[...] = ld.sinpi(v)
  cp[...] = ld.cospi(v)
  e10[...] = ld.exp10(v)
  rh[...] = ld.rhypot(v, w)
  rem[...] = ld.remainder(v, w)
  l10[...] = ld.log10(ml.abs(v)) + ld.fast_log10f(ml.abs(w))


def test_libdevice_float_intrinsics_compute():
  """Triton ports' `libdevice.sinpi`, `cospi`, `exp10`, `rhypot`, `remainder`, `log10`, `fast_log10f` were MG002
  ("has no attribute ... check the spelling"; remainder's hint wrote a floored `a % b`); each is CUDA's meaning now:
  sinpi / cospi exact at whole and half numbers, remainder IEEE's (the quotient rounded half to even)."""
  rng = np.random.default_rng(3)
  x = rng.uniform(-4, 4, 256).astype(np.float32)
  y = rng.uniform(0.25, 2, 256).astype(np.float32) * np.where(rng.random(256) < 0.5, -1, 1).astype(np.float32)
  x[:8] = [0.0, 0.5, 1.0, -1.5, 2.0, 0.25, 0.75, 1.25]          # whole and half numbers; remainder's ties
  y[:8] = [1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5]
  sp, cp, e10, rh, rem, l10 = (np.asarray(v, np.float64) for v in float_intrinsics(x, y, interpret=True))
  xd, yd = x.astype(np.float64), y.astype(np.float64)
  np.testing.assert_allclose(sp, np.sin(np.pi * xd), atol=3e-7)
  np.testing.assert_allclose(cp, np.cos(np.pi * xd), atol=3e-7)
  assert sp[2] == 0 and sp[4] == 0 and cp[1] == 0 and cp[3] == 0 and cp[2] == -1
  np.testing.assert_allclose(e10, 10 ** xd, rtol=1e-6)
  np.testing.assert_allclose(rh, 1 / np.hypot(xd, yd), rtol=1e-6)
  np.testing.assert_array_equal(rem, [math.remainder(float(a), float(b)) for a, b in zip(x, y)])
  np.testing.assert_allclose(l10, np.log10(np.abs(xd)) + np.log10(np.abs(yd)), atol=1e-6)
  assert "mosaic_gpu" in _export(float_intrinsics, x, y)


# ---------------------------------------------------------------- class 4: jnp.unwrap, jnp.angle of real values
@mg.mgpu_kernel(out_shape=lambda p: (p, p, p, p, p))
def unwrapped(p, along_bins, along_frames, ang, centred, back):
  along_bins[...] = jnp.unwrap(p[...])
  along_frames[...] = jnp.unwrap(p[...], axis=0, period=4.0)
  ang[...] = jnp.angle(p[...], deg=True)
  centred[...] = jnp.fft.fftshift(p[...], axes=-1)
  back[...] = jnp.fft.ifftshift(jnp.fft.fftshift(p[...]))


def test_jnp_unwrap_angle_and_fftshift_of_real_values_compute():
  """jnp.unwrap (a phase vocoder's phases along frames or bins), jnp.angle of real values and jnp.fft.fftshift /
  ifftshift (a centred spectrum) were MG003 ("has no form in a kernel"; fftshift's hint wrote the concatenation);
  they are jax's definitions."""
  p = ((np.cumsum(np.random.default_rng(4).uniform(-1, 2.5, (8, 256)), axis=1) % (2 * np.pi)) - np.pi).astype(np.float32)
  bins, frames, ang, centred, back = (np.asarray(v, np.float64) for v in unwrapped(p, interpret=True))
  np.testing.assert_allclose(bins, np.unwrap(p.astype(np.float64)), atol=2e-5)
  np.testing.assert_allclose(frames, np.unwrap(p.astype(np.float64), axis=0, period=4.0), atol=2e-5)
  np.testing.assert_array_equal(ang, np.where(p < 0, 180.0, 0.0))
  np.testing.assert_array_equal(centred, np.fft.fftshift(p, axes=-1))
  np.testing.assert_array_equal(back, p)
  assert "mosaic_gpu" in _export(unwrapped, p)


# ---------------------------------------------------------------- class 5: static float arrays computed while tracing
@mg.mgpu_kernel(out_shape=lambda x: (x, x, S((x.shape[0], 128), F32)), grid=lambda x: (x.shape[0] // 8,))
def static_axes(x, windowed, weighted, low):
  r = ml.ds(ml.program_id(0) * 8, 8)
  v = x.at[r, :][...]
  windowed.at[r, :][...] = v * jnp.sin(jnp.linspace(0.0, jnp.pi, 256))[None, :]
  weighted.at[r, :][...] = v * np.fft.fftfreq(256, d=1 / 16000)[None, :]
  low.at[r, :][...] = v[:, :128] * jnp.fft.rfftfreq(256)[None, :128]


@mg.mgpu_kernel(out_shape=lambda x: x)
def static_zeros_still_hinted(x, out):
  out[...] = x[...] + np.zeros(256)


def test_a_static_float_array_a_function_computed_is_a_table():
  """A window or a frequency axis computed while tracing by a function other than jnp.array / linspace / the named
  windows (`jnp.sin(jnp.linspace(0, pi, n))`, `np.fft.fftfreq(n, d)`, `jnp.fft.rfftfreq(n)`) was MG003 ("returned an
  array of shape (256,) while tracing"); a 1-D float array of up to 256 numbers is the table jnp.asarray of it makes."""
  x = np.random.default_rng(6).standard_normal((16, 256)).astype(np.float32)
  a, b, c = (np.asarray(v) for v in static_axes(x, interpret=True))
  _close(a, x * np.sin(np.linspace(0, np.pi, 256)), 1e-6)     # (float32 sines, within an ulp or two)
  np.testing.assert_allclose(b, x * np.fft.fftfreq(256, d=1 / 16000).astype(np.float32), rtol=1e-6)
  np.testing.assert_allclose(c, x[:, :128] * np.fft.rfftfreq(256)[:128].astype(np.float32), rtol=1e-6)
  assert "mosaic_gpu" in _export(static_axes, x)
  _error(static_zeros_still_hinted, [S((256,), F32)], mg.KernelTypeError, "MG003", "out[...] = x[...] + np.zeros(256)",
         "np.zeros(256)", "np.zeros(...) returned an array of shape (256,) while tracing")


# ---------------------------------------------------------------- class 6: Python complex numbers in kernel code
@mg.mgpu_kernel(out_shape=lambda x: x)
def rotate_by_python_complex(x, out):
  out[...] = x[...] * cmath.exp(-0.25j * math.pi)


@mg.mgpu_kernel(out_shape=lambda x: (x, x))
def rotate_by_python_complex_followed(x, o_re, o_im):
  w = cmath.exp(-0.25j * math.pi)
  o_re[...] = x[...] * w.real
  o_im[...] = x[...] * w.imag


@mg.mgpu_kernel(out_shape=lambda x: x)
def cast_to_complex(x, out):
  out[...] = jnp.real(x[...].astype(jnp.complex64))


def test_a_python_complex_says_how_to_hold_complex_values():
  """`x * cmath.exp(...)`, `x * 1j`, `jnp.exp(1j * th)` were MG003 "* cannot take a Python complex" whose hint said
  "pass a register tensor, a scalar or a Python number" (a complex is a Python number); `.astype(jnp.complex64)`'s
  hint listed the kernel dtypes. Both say how to hold a complex value now, and the hinted form computes."""
  _error(rotate_by_python_complex, [S((256,), F32)], mg.KernelTypeError, "MG003",
         "out[...] = x[...] * cmath.exp(-0.25j * math.pi)", "x[...] * cmath", "* cannot take a Python complex",
         "(xr + i xi) * w for a Python complex w is (xr * w.real - xi * w.imag, xr * w.imag + xi * w.real)")
  _error(cast_to_complex, [S((256,), F32)], mg.UnsupportedDtypeError, "MG106",
         "out[...] = jnp.real(x[...].astype(jnp.complex64))", "x[...].astype", "complex64 is not a kernel dtype",
         "hold a complex value as its real and imaginary parts, two float32 tensors")
  x = np.linspace(-2, 2, 256).astype(np.float32)
  re, im = rotate_by_python_complex_followed(x, interpret=True)
  w = cmath.exp(-0.25j * math.pi)
  np.testing.assert_allclose(np.asarray(re) + 1j * np.asarray(im), x * w, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- class 7: jnp's complex methods of real arrays
@mg.mgpu_kernel(out_shape=lambda x: (x, x, x))
def real_array_methods(x, re, im, cj):
  v = x[...] * 2.0
  re[...] = v.real
  im[...] = v.imag + 1.0
  cj[...] = v.conj() + v.conjugate()


def test_complex_methods_of_a_real_tensor_are_jnps():
  """`v.real`, `v.imag`, `v.conj()` and `v.conjugate()` of a real register tensor (code ported from complex jnp to
  (re, im) pairs keeps them) were MG003 "a register tensor has no attribute 'real'" though jnp.real and jnp.conj
  computed; they are jnp's: v itself, zeros of v's dtype, v."""
  x = np.linspace(-3, 3, 256).astype(np.float32)
  re, im, cj = (np.asarray(v) for v in real_array_methods(x, interpret=True))
  np.testing.assert_array_equal(re, x * 2)
  np.testing.assert_array_equal(im, np.ones(256, np.float32))
  np.testing.assert_array_equal(cj, x * 4)
  assert "mosaic_gpu" in _export(real_array_methods, x)


# ---------------------------------------------------------------- class 8: jax.scipy.signal's 1-D convolutions
@mg.mgpu_kernel(out_shape=lambda x, h: (x, S((x.shape[0] + h.shape[0] - 1,), F32)))
def scipy_signal_1d(x, h, same, full):
  same[...] = jax.scipy.signal.convolve(x[...], h[...], mode="same")
  full[...] = jax.scipy.signal.correlate(x[...], h[...])


def test_jax_scipy_signal_convolve_and_correlate_of_vectors_compute():
  """jax.scipy.signal.convolve / correlate of two register vectors (a JAX user's FIR) were MG003 whose hint wrote the
  taps loop, though jnp.convolve and jnp.correlate computed; they are jax's 1-D definition, those functions."""
  x = np.random.default_rng(8).standard_normal(256).astype(np.float32)
  h = np.random.default_rng(9).standard_normal(16).astype(np.float32)
  same, full = (np.asarray(v, np.float64) for v in scipy_signal_1d(x, h, interpret=True))
  np.testing.assert_allclose(same, np.convolve(x.astype(np.float64), h, "same"), atol=1e-5)
  np.testing.assert_allclose(full, np.correlate(x.astype(np.float64), h, "full"), atol=1e-5)
  assert "mosaic_gpu" in _export(scipy_signal_1d, x, h)


# ---------------------------------------------------------------- class 9: a median of stacked shifts (HPSS)
@mg.mgpu_kernel(out_shape=lambda s: (s, s, s))
def median_filters(s, along_time, even, kept):
  v = s[...]
  t = ml.arange(v.shape[0])[:, None]
  w = jnp.stack([jnp.where((t - k >= 0) & (t - k < v.shape[0]), jnp.roll(v, k, axis=0), 0.0) for k in range(-2, 3)])
  along_time[...] = jnp.median(w, axis=0)
  even[...] = jnp.median(jnp.stack([v, v * 2.0, -v, v + 1.0]), axis=0)
  kept[...] = jnp.median(w, axis=0, keepdims=True)[0]


def test_a_median_of_stacked_shifts_computes():
  """librosa's HPSS median filter written as jnp.median of a stack of shifted spectrograms along axis 0 (a 3-D
  tensor) was MG003 (jnp.median took 1-D and 2-D tiles); it is a sorting network of the slices, jnp's numbers (the
  midpoint for an even count, NaN where a slice holds one)."""
  x = np.random.default_rng(10).standard_normal((32, 64)).astype(np.float32)
  x[3, 5] = np.nan
  p = np.pad(x, ((2, 2), (0, 0)))
  want = np.median(np.stack([p[2 - k:2 - k + 32] for k in range(-2, 3)]), axis=0)
  a, b, c = (np.asarray(v) for v in median_filters(x, interpret=True))
  np.testing.assert_allclose(a, want, rtol=1e-6)
  np.testing.assert_allclose(b, np.median(np.stack([x, x * 2, -x, x + 1]), axis=0), rtol=1e-6)
  np.testing.assert_array_equal(np.isnan(a), np.isnan(want))
  np.testing.assert_allclose(c, want, rtol=1e-6)
  assert "mosaic_gpu" in _export(median_filters, x)


@pytest.mark.gpu
def test_gpu_classes():
  x = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(columns_by_module_table(x)), x[:, REV32])
  x = np.random.default_rng(1).standard_normal((128, 128)).astype(np.float16)
  ang = -2 * np.pi / 128 * ((np.arange(128)[:, None] * np.arange(65)[None, :]) % 128)
  _close(np.asarray(rfft_real_part(x)), x.astype(np.float64) @ np.cos(ang).astype(np.float16).astype(np.float64), 1e-3)
  v = np.linspace(-4, 4, 256).astype(np.float32)
  w = np.full(256, 0.5, np.float32)
  sp, _, _, _, rem, _ = float_intrinsics(v, w)
  np.testing.assert_allclose(np.asarray(sp, np.float64), np.sin(np.pi * v.astype(np.float64)), atol=5e-7)
  np.testing.assert_array_equal(np.asarray(rem), [math.remainder(float(a), 0.5) for a in v])
