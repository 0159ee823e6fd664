"""Hints for the image and convolution functions of jax.lax, jax.image and jnp that a vision or
stencil kernel reaches for (reduce_window, conv_general_dilated, median, gradient, interp, resize):
what a kernel writes instead, tap by tap (masked windows or gathers of the taps, ml.sort, SMEM
tiles for ml.dot)."""
from __future__ import annotations

from .nan_name_hints import TEXTS as NAN_TEXTS  # ml.median and jnp.median: one hint

# jnp.pad's other modes, after its zeros (and jnp.roll's wrap-around) in missing.py's hint
PAD_MODES = ("; jnp.pad's mode='edge' gathers at clamped indices, x[ml.clip(s + ml.arange(n) - 1, 0, x.shape[0] - 1)],"
             " and mode='reflect' at reflected ones, j = s + ml.arange(n) - 1 then x[ml.where(j < 0, -j, j)] (and"
             " 2 * (x.shape[0] - 1) - j past the end); a register tile v shifts by one column with its first"
             " column repeated as ml.concatenate([v[:, :1], v[:, :-1]], axis=1), reflected as"
             " ml.concatenate([v[:, 1:2], v[:, :-1]], axis=1)")
_POOL = ("reduce_window computes in a kernel on a register tile of 1 to 3 axes with a static window, strides and"
         " padding, max, min, add or mul, and no base dilation (probe 53c); otherwise combine the window's taps yourself,"
         " each a strided slice of the tile padded with the init value, p = jnp.pad(v, pads, constant_values=init),"
         " acc = ml.maximum(acc, p[a * d:a * d + (o - 1) * s + 1:s]) for tap a of dilation d, or a masked gather of"
         " the output tile's source pixels: with r, c the tile's output rows and columns (r = i * bm + ml.arange(bm)), for a in"
         " ml.static_range(kh): for b in ml.static_range(kw): rr = stride * r + a - pad; cc = stride * c + b - pad;"
         " inside = (rr[:, None] >= 0) & (rr[:, None] < x.shape[0]) & (cc[None, :] >= 0) & (cc[None, :] <"
         " x.shape[1]); acc = ml.maximum(acc, x.at[rr[:, None], cc[None, :]].load(mask=inside,"
         " other=float('-inf'))) (a max pool; a sum adds with other=0.0, an average divides by kh * kw or by"
         " the count of the taps inside)")
_CONV = ("conv_general_dilated computes in a kernel where each output channel reads one input channel (a single"
         " channel's stencil, conv(v[None, None], w[None, None], ...), or a depthwise conv, feature_group_count ="
         " channels, as Mamba's causal conv1d) or every one (feature_group_count 1, channels first or last: a"
         " product a tap), without lhs dilation or batch groups (probes 53c, 56c); for other groupings of channels sum the taps, each a window of x shifted by the tap and masked at the edges: for a in"
         " ml.static_range(kh): for b in ml.static_range(kw): acc = acc + w.at[a, b][...] * x.at[..shifted by"
         " (a - pad, b - pad)..].load(mask=inside, other=0.0) (channels last, a depthwise conv's weights a (c,)"
         " vector a tap); with many input channels, im2col: store the taps' values into an SMEM tile (pixels,"
         " kh * kw * c_in, padded with zero columns to a multiple of 64) and ml.dot it with the weights reshaped"
         " to (kh * kw * c_in, c_out) outside the kernel")
IMAGE = {
    "reduce_window": _POOL,
    **dict.fromkeys(("conv_general_dilated", "conv", "conv_with_general_padding", "conv_transpose"), _CONV),
    "median": NAN_TEXTS["median"],     # (one text with ml.median's: nan_name_hints)
    "gradient": ("no gradient: central differences of the windows shifted by one, (next - prev) / 2 with next ="
                 " x.at[ml.ds(s + 1, n)].load(mask=j + 1 < x.shape[0], other=0.0) and prev = x.at[ml.ds(s - 1,"
                 " n)].load(mask=j - 1 >= 0, other=0.0) for j = s + ml.arange(n), and the one-sided differences at"
                 " the two ends selected in with ml.where(j == 0, ...)"),
    "interp": ("no interp: find each query's interval by counting the sorted points at or below it, i ="
               " ml.clip(ml.sum((xp[None, :] <= q[:, None]).astype(jnp.int32), axis=1) - 1, 0, xp.shape[0] - 2)"
               " (xp a register vector), gather xp[i], xp[i + 1], fp[i], fp[i + 1] from the refs and blend,"
               " fp0 + (q - xp0) / (xp1 - xp0) * (fp1 - fp0) (clip q to xp's ends first for jnp's end values)"),
    "resize": ("jax.image.resize computes in a kernel at integer factors with 'nearest' and scaled up by 2 with"
               " 'linear' / 'bilinear' (probe 53c); for others compute each output pixel's source coordinate, sy = (r + 0.5) * (H / OH) - 0.5"
               " (clipped at 0), y0 = ml.minimum(ml.floor(sy).astype(jnp.int32), H - 1), y1 = ml.minimum(y0 + 1,"
               " H - 1), fy = sy - y0, and the same along the columns; gather the four neighbours,"
               " x[y0[:, None], x0[None, :]] and so on, and blend them with the fractions ('nearest' gathers"
               " x[(r * H // OH)[:, None], (c * W // OW)[None, :]])"),
}

# lax.conv_transpose computes (window_forms.conv_transpose, probe 57a) but for a kernel flipped by transpose_kernel=
IMAGE["conv_transpose"] = (
    "lax.conv_transpose computes in a kernel as jax defines it (conv_general_dilated with lhs_dilation = strides and"
    " its transposed padding) where that conv does: a single channel (channels first, dimension_numbers=('NCHW',"
    " 'OIHW', 'NCHW')), a depthwise or dense conv; transpose_kernel=True is not"
    " taken: flip the kernel's spatial axes and swap its I and O axes yourself (of an HWIO kernel w,"
    " jnp.swapaxes(jnp.flip(w, (0, 1)), 2, 3), outside the kernel or on the register tile) and call it without")
# jnp.fft (probe 60c): complex results, which no register holds
_FFT = ("kernels hold no complex values, and jnp.fft's transforms are complex: a DFT of n points along the last"
        " axis of x is two real products with its cosine and sine matrices, re = x @ C and im = -(x @ S), with"
        " kj = (ml.arange(n)[:, None] * ml.arange(n)[None, :]) % n, C = ml.cos(2 * math.pi / n * kj) and S ="
        " ml.sin(2 * math.pi / n * kj) (a power spectrum is re * re + im * im; an rfft keeps C's and S's first"
        " n // 2 + 1 columns); or take the FFT outside the kernel and pass its real and imaginary parts in")
IMAGE.update(dict.fromkeys(("fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "fftn", "ifftn", "rfft2", "irfft2",
                            "rfftn", "irfftn", "hfft", "ihfft"), _FFT))
IMAGE.update(dict.fromkeys(("fftshift", "ifftshift"), (
    "no jnp.fft.fftshift: it is a roll by n // 2 along each axis (ifftshift by -(n // 2)), v = ml.concatenate([v[:,"
    " n - n // 2:], v[:, :n - n // 2]], axis=1) for the last axis of a register tile (the ref read at the shifted"
    " window is cheaper)")))
