"""Probe 56g, the theme's kernels that computed and built before the probe's fixes (and must keep doing so):
GroupNorm + SiLU (NHWC, NCHW, Triton's looped and masked statistics, Stable Diffusion's 32 groups of 10 channels),
AdaLN and DiT's modulation, timestep embeddings (odd dims, an MLP), GEGLU / SwiGLU halves, qk-norm and rotary (half
split, interleaved, 2-D for patches, Flux's 2x2 rotations), patchify / unpatchify / space-to-depth, nearest
upsampling, cross-attention over 77 keys, classifier-free guidance (with rescale), Swin's shifted-window masks and
cyclic shift, patch merging; each in interpret mode against NumPy and exported for CUDA."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special as sps

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe_util import export, f32, rnd

S = jax.ShapeDtypeStruct
F32 = jnp.float32
CASES = []


def case(name, kernel, args, ref, tol=1e-4, **kw):
  CASES.append(pytest.param(kernel, args, ref, tol, kw, id=name.split()[0]))


# 1 GroupNorm + SiLU NHWC, one program per (batch, group) -- Pallas style, reshape
@mg.mgpu_kernel(out_shape=lambda x, w, b, *, G: x, grid=lambda x, w, b, *, G: (x.shape[0],))
def gn_silu_nhwc(x, w, b, o, *, G: ml.constexpr, eps: ml.constexpr = 1e-5):
  n = ml.program_id(0)
  v = x[n].astype(jnp.float32)                 # (HW, C)
  HW, C = v.shape
  g = v.reshape(HW, G, C // G)
  mean = jnp.mean(g, axis=(0, 2), keepdims=True)
  var = jnp.mean((g - mean) ** 2, axis=(0, 2), keepdims=True)
  y = ((g - mean) * jax.lax.rsqrt(var + eps)).reshape(HW, C)
  y = y * w[...].astype(F32)[None, :] + b[...].astype(F32)[None, :]
  o[n] = jax.nn.silu(y).astype(o.dtype)

def gn_ref(x, w, b, G, eps=1e-5):
  x = f32(x); N, HW, C = x.shape
  g = x.reshape(N, HW, G, C // G)
  m = g.mean(axis=(1, 3), keepdims=True); v = ((g - m) ** 2).mean(axis=(1, 3), keepdims=True)
  y = ((g - m) / np.sqrt(v + eps)).reshape(N, HW, C) * f32(w) + f32(b)
  return y / (1 + np.exp(-y))

x = rnd((2, 64, 32), 1, jnp.bfloat16); w = rnd((32,), 2); b = rnd((32,), 3)
case("gn_silu_nhwc", gn_silu_nhwc, (x, w, b), gn_ref(x, w, b, 8), tol=3e-2, G=8)

# 2 GroupNorm NCHW: x (N, C, HW), reshape per group
@mg.mgpu_kernel(out_shape=lambda x, w, b, *, G: x, grid=lambda x, w, b, *, G: (x.shape[0],))
def gn_silu_nchw(x, w, b, o, *, G: ml.constexpr, eps: ml.constexpr = 1e-5):
  n = ml.program_id(0)
  v = x[n].astype(F32)             # (C, HW)
  C, HW = v.shape
  g = v.reshape(G, (C // G) * HW)
  mean = g.mean(axis=1, keepdims=True)
  var = g.var(axis=1, keepdims=True)
  y = ((g - mean) / jnp.sqrt(var + eps)).reshape(C, HW)
  y = y * w[...][:, None] + b[...][:, None]
  o[n] = (y * jax.nn.sigmoid(y)).astype(o.dtype)

def gn_nchw_ref(x, w, b, G, eps=1e-5):
  xx = np.transpose(f32(x), (0, 2, 1))
  return np.transpose(gn_ref(xx, w, b, G, eps), (0, 2, 1))

x = rnd((2, 32, 64), 4); 
case("gn_silu_nchw", gn_silu_nchw, (x, w, b), gn_nchw_ref(x, w, b, 8), tol=1e-4, G=8)

# 3 GroupNorm NCHW Triton-style: program per (n, group), loop over HW blocks accumulating sums
@mg.mgpu_kernel(out_shape=lambda x, w, b, *, G, BLOCK: x, grid=lambda x, w, b, *, G, BLOCK: (x.shape[0], G))
def gn_loop(x, w, b, o, *, G: ml.constexpr, BLOCK: ml.constexpr, eps: ml.constexpr = 1e-6):
  n = ml.program_id(0); g = ml.program_id(1)
  C = x.shape[1]; HW = x.shape[2]; CG = C // G
  s = ml.zeros((CG, BLOCK), F32); ss = ml.zeros((CG, BLOCK), F32)
  for i in range(HW // BLOCK):
    v = x[n, ml.ds(g * CG, CG), ml.ds(i * BLOCK, BLOCK)].astype(F32)
    s += v; ss += v * v
  cnt = CG * HW
  mean = ml.sum(s) / cnt
  var = ml.sum(ss) / cnt - mean * mean
  rstd = ml.rsqrt(var + eps)
  wv = w[ml.ds(g * CG, CG)].astype(F32); bv = b[ml.ds(g * CG, CG)].astype(F32)
  for i in range(HW // BLOCK):
    v = x[n, ml.ds(g * CG, CG), ml.ds(i * BLOCK, BLOCK)].astype(F32)
    y = (v - mean) * rstd * wv[:, None] + bv[:, None]
    o[n, ml.ds(g * CG, CG), ml.ds(i * BLOCK, BLOCK)] = (y * ml.sigmoid(y)).astype(o.dtype)

x = rnd((2, 32, 256), 5, jnp.bfloat16)
case("gn_loop", gn_loop, (x, w, b), gn_nchw_ref(x, w, b, 4, 1e-6), tol=3e-2, G=4, BLOCK=64)

# 4 AdaLN modulate: x (B, T, D), shift/scale (B, D)
@mg.mgpu_kernel(out_shape=lambda x, sh, sc: x, grid=lambda x, sh, sc: (x.shape[0], x.shape[1] // 64))
def adaln(x, sh, sc, o):
  b = ml.program_id(0); t = ml.program_id(1)
  v = x[b, ml.ds(t * 64, 64), :].astype(F32)
  mu = v.mean(-1, keepdims=True)
  var = ((v - mu) ** 2).mean(-1, keepdims=True)
  xn = (v - mu) * jax.lax.rsqrt(var + 1e-6)
  y = xn * (1 + sc[b].astype(F32)) + sh[b].astype(F32)
  o[b, ml.ds(t * 64, 64), :] = y.astype(o.dtype)

def adaln_ref(x, sh, sc):
  x = f32(x); mu = x.mean(-1, keepdims=True); var = x.var(-1, keepdims=True)
  return (x - mu) / np.sqrt(var + 1e-6) * (1 + f32(sc)[:, None]) + f32(sh)[:, None]

x = rnd((2, 128, 64), 6, jnp.bfloat16); sh = rnd((2, 64), 7, jnp.bfloat16); sc = rnd((2, 64), 8, jnp.bfloat16)
case("adaln", adaln, (x, sh, sc), adaln_ref(x, sh, sc), tol=5e-2)


# 6 timestep embedding
@mg.mgpu_kernel(out_shape=lambda t, *, dim: S((t.shape[0], dim), jnp.float32))
def temb(t, o, *, dim: ml.constexpr, max_period: ml.constexpr = 10000):
  half = dim // 2
  freqs = jnp.exp(-math.log(max_period) * jnp.arange(half, dtype=jnp.float32) / half)
  args = t[...].astype(jnp.float32)[:, None] * freqs[None]
  o[...] = jnp.concatenate([jnp.cos(args), jnp.sin(args)], axis=-1)

def temb_ref(t, dim, mp=10000):
  half = dim // 2
  fr = np.exp(-math.log(mp) * np.arange(half, dtype=np.float32) / half).astype(np.float32)
  a = f32(t)[:, None] * fr[None]
  return np.concatenate([np.cos(a), np.sin(a)], -1)
t = (np.arange(16) * 61.0).astype(np.float32)
case("temb", temb, (t,), temb_ref(t, 256), tol=2e-3, dim=256)

# 7 GEGLU halves of one matrix
@mg.mgpu_kernel(out_shape=lambda h: S((h.shape[0], h.shape[1] // 2), h.dtype), grid=lambda h: (h.shape[0] // 64,))
def geglu(h, o):
  i = ml.program_id(0)
  v = h[ml.ds(i * 64, 64), :].astype(F32)
  a, gate = jnp.split(v, 2, axis=-1)
  o[ml.ds(i * 64, 64), :] = (a * jax.nn.gelu(gate, approximate=False)).astype(o.dtype)

h = rnd((128, 256), 12, jnp.bfloat16)
hh = f32(h); a_, g_ = hh[:, :128], hh[:, 128:]
case("geglu", geglu, (h,), a_ * 0.5 * g_ * (1 + sps.erf(g_ / np.sqrt(2))), tol=3e-2)


# 8 SwiGLU with a dot: x (M, K) @ w (K, 2F), silu(gate) * value
@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1] // 2), x.dtype), grid=lambda x, w: (x.shape[0] // 64,))
def swiglu_mm(x, w, o):
  i = ml.program_id(0)
  F = w.shape[1] // 2
  xs = ml.smem((64, x.shape[1]), x.dtype); ws = ml.smem(w.shape, w.dtype)
  ml.copy(x.at[ml.ds(i * 64, 64), :], xs); ml.copy(w, ws)
  acc = ml.dot(xs, ws)
  gate = acc[:, :F]; val = acc[:, F:]
  o[ml.ds(i * 64, 64), :] = (jax.nn.silu(gate) * val).astype(o.dtype)

xm = rnd((128, 64), 13, jnp.bfloat16); wm = (rnd((64, 256), 14) * 0.1).astype(jnp.bfloat16)
acc = f32(xm) @ f32(wm)
case("swiglu_mm", swiglu_mm, (xm, wm), acc[:, :128] / (1 + np.exp(-acc[:, :128])) * acc[:, 128:], tol=3e-2)

# 9 qk-norm (RMS per head) then rotary (half-split), q (T, H*Dh)
@mg.mgpu_kernel(out_shape=lambda q, w, cos, sin, *, H: q, grid=lambda q, w, cos, sin, *, H: (q.shape[0] // 64,))
def qknorm_rope(q, w, cos, sin, o, *, H: ml.constexpr):
  i = ml.program_id(0)
  T, HD = q.shape; D = HD // H
  v = q[ml.ds(i * 64, 64), :].astype(F32).reshape(64, H, D)
  v = v * jax.lax.rsqrt(jnp.mean(v * v, axis=-1, keepdims=True) + 1e-6) * w[...].astype(F32)
  c = cos[ml.ds(i * 64, 64), :][:, None, :]; s = sin[ml.ds(i * 64, 64), :][:, None, :]
  x1 = v[..., : D // 2]; x2 = v[..., D // 2:]
  rot = jnp.concatenate([-x2, x1], axis=-1)
  o[ml.ds(i * 64, 64), :] = (v * c + rot * s).reshape(64, HD).astype(o.dtype)

def qk_ref(q, w, cos, sin, H):
  T, HD = q.shape; D = HD // H
  v = f32(q).reshape(T, H, D)
  v = v / np.sqrt((v * v).mean(-1, keepdims=True) + 1e-6) * f32(w)
  rot = np.concatenate([-v[..., D // 2:], v[..., :D // 2]], -1)
  return (v * cos[:, None] + rot * sin[:, None]).reshape(T, HD)

T, H, D = 128, 4, 64
q = rnd((T, H * D), 1, jnp.bfloat16); w = rnd((D,), 2)
ang = np.arange(T)[:, None] * (1.0 / 10000 ** (np.arange(0, D, 2) / D))[None]
ang = np.concatenate([ang, ang], -1).astype(np.float32)
cos, sin = np.cos(ang), np.sin(ang)
case("qknorm_rope", qknorm_rope, (q, w, cos, sin), qk_ref(q, w, cos, sin, H), tol=5e-2, H=H)

# 10 2-D rotary for image patches: grid hxw, first half dims by row pos, second by col pos (interleaved pairs)
@mg.mgpu_kernel(out_shape=lambda x, *, gw: x, grid=lambda x, *, gw: (x.shape[0] // 64,))
def rope2d(x, o, *, gw: ml.constexpr, theta: ml.constexpr = 100.0):
  i = ml.program_id(0)
  N, D = x.shape
  tok = i * 64 + jnp.arange(64)
  r = (tok // gw).astype(F32); c = (tok % gw).astype(F32)
  q = D // 4
  inv = 1.0 / theta ** (jnp.arange(q, dtype=F32) / q)
  ar = r[:, None] * inv[None, :]; ac = c[:, None] * inv[None, :]
  ang = jnp.concatenate([ar, ac], axis=-1)     # (64, D/2)
  v = x[ml.ds(i * 64, 64), :].astype(F32)
  xe = v[:, 0::2]; xo = v[:, 1::2]
  ye = xe * jnp.cos(ang) - xo * jnp.sin(ang)
  yo = xe * jnp.sin(ang) + xo * jnp.cos(ang)
  o[ml.ds(i * 64, 64), :] = jnp.stack([ye, yo], axis=-1).reshape(64, D).astype(o.dtype)

def rope2d_ref(x, gw, theta=100.0):
  N, D = x.shape; tok = np.arange(N); r = tok // gw; c = tok % gw; q = D // 4
  inv = (1.0 / theta ** (np.arange(q, dtype=np.float32) / q)).astype(np.float32)
  ang = np.concatenate([r[:, None] * inv, c[:, None] * inv], -1)
  v = f32(x); xe, xo = v[:, 0::2], v[:, 1::2]
  ye = xe * np.cos(ang) - xo * np.sin(ang); yo = xe * np.sin(ang) + xo * np.cos(ang)
  return np.stack([ye, yo], -1).reshape(N, D)
x = rnd((256, 64), 3)
case("rope2d", rope2d, (x,), rope2d_ref(x, 16), tol=1e-4, gw=16)

# 11 patchify: img (H, W, C) -> (H/p*W/p, p*p*C); program per patch row
@mg.mgpu_kernel(out_shape=lambda img, *, p: S(((img.shape[0] // p) * (img.shape[1] // p), p * p * img.shape[2]), img.dtype),
                grid=lambda img, *, p: (img.shape[0] // p,))
def patchify(img, o, *, p: ml.constexpr):
  i = ml.program_id(0)
  H, W, C = img.shape; nw = W // p
  v = img[ml.ds(i * p, p), :, :]                # (p, W, C)
  v = v.reshape(p, nw, p, C).transpose(1, 0, 2, 3).reshape(nw, p * p * C)
  o[ml.ds(i * nw, nw), :] = v

def patch_ref(img, p):
  H, W, C = img.shape
  return img.reshape(H // p, p, W // p, p, C).transpose(0, 2, 1, 3, 4).reshape(-1, p * p * C)
img = rnd((32, 32, 8), 4)
case("patchify", patchify, (img,), patch_ref(img, 4), p=4)

# 12 unpatchify
@mg.mgpu_kernel(out_shape=lambda t, *, p, h, w, c: S((h * p, w * p, c), t.dtype), grid=lambda t, *, p, h, w, c: (h,))
def unpatchify(t, o, *, p: ml.constexpr, h: ml.constexpr, w: ml.constexpr, c: ml.constexpr):
  i = ml.program_id(0)
  v = t[ml.ds(i * w, w), :]                     # (w, p*p*c)
  v = v.reshape(w, p, p, c)
  v = jnp.einsum("wpqc->pwqc", v).reshape(p, w * p, c)
  o[ml.ds(i * p, p), :, :] = v

tt = patch_ref(img, 4)
case("unpatchify", unpatchify, (tt,), img, p=4, h=8, w=8, c=8)

# 13 nearest upsample 2x NHWC
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 2 * x.shape[1], 2 * x.shape[2], x.shape[3]), x.dtype), grid=lambda x: (x.shape[0], x.shape[1]))
def up_nearest(x, o):
  n = ml.program_id(0); h = ml.program_id(1)
  v = x[n, h]                                   # (W, C)
  v = jnp.repeat(v, 2, axis=0)                  # (2W, C)
  o[n, 2 * h] = v
  o[n, 2 * h + 1] = v

xu = rnd((2, 8, 16, 32), 5, jnp.bfloat16)
case("up_nearest", up_nearest, (xu,), np.repeat(np.repeat(f32(xu), 2, 1), 2, 2))


# 17 CFG combine: eps (2B, ...) -> uncond + s * (cond - uncond)
@mg.mgpu_kernel(out_shape=lambda e: S((e.shape[0] // 2,) + e.shape[1:], e.dtype), grid=lambda e: (e.shape[0] // 2,))
def cfg(e, o, *, scale: ml.constexpr = 7.5):
  b = ml.program_id(0); B = e.shape[0] // 2
  u = e[b].astype(F32); c = e[b + B].astype(F32)
  o[b] = (u + scale * (c - u)).astype(o.dtype)
e = rnd((4, 64, 128), 8, jnp.bfloat16)
case("cfg", cfg, (e,), f32(e[:2]) + 7.5 * (f32(e[2:]) - f32(e[:2])), tol=1e-1)

# 18 CFG with jnp.split of a whole read
@mg.mgpu_kernel(out_shape=lambda e, s: S((e.shape[0] // 2, e.shape[1]), e.dtype))
def cfg_split(e, s, o):
  u, c = jnp.split(e[...].astype(F32), 2, axis=0)
  o[...] = (u + s[0] * (c - u)).astype(o.dtype)
e2 = rnd((16, 256), 9, jnp.bfloat16); s = np.array([5.0], np.float32)
case("cfg_split", cfg_split, (e2, s), f32(e2[:8]) + 5 * (f32(e2[8:]) - f32(e2[:8])), tol=1e-1)

# 19 cross-attention, 77 keys padded to 128, head dim 64, q tile 64
@mg.mgpu_kernel(out_shape=lambda q, k, v: q, grid=lambda q, k, v: (q.shape[0] // 64,))
def xattn(q, k, v, o):
  i = ml.program_id(0)
  L = k.shape[0]; D = q.shape[1]
  qs = ml.smem((64, D), q.dtype); ks = ml.smem((128, D), k.dtype); vs = ml.smem((128, D), v.dtype)
  ml.copy(q.at[ml.ds(i * 64, 64)], qs)
  ml.copy(k.at[ml.ds(0, 128)], ks)
  ml.copy(v.at[ml.ds(0, 128)], vs)
  s = ml.dot(qs, ks.T) * (1.0 / math.sqrt(D))
  cols = ml.arange(128)
  s = ml.where(cols[None, :] < L, s, -jnp.inf)
  p = ml.softmax(s, axis=1)
  o[ml.ds(i * 64, 64), :] = ml.dot(p.astype(v.dtype), vs).astype(o.dtype)

def attn_ref(q, k, v, bias=None):
  s = f32(q) @ f32(k).T / np.sqrt(q.shape[-1])
  if bias is not None: s = s + bias
  s = s - s.max(-1, keepdims=True); p = np.exp(s); p /= p.sum(-1, keepdims=True)
  return p @ f32(v)
q = rnd((128, 64), 1, jnp.bfloat16); k = rnd((77, 64), 2, jnp.bfloat16); v = rnd((77, 64), 3, jnp.bfloat16)
case("xattn", xattn, (q, k, v), attn_ref(q, k, v), tol=3e-2)

# 20 cross-attention, jnp style: whole K/V read, register dots, head dim 40 (SD1.5)
@mg.mgpu_kernel(out_shape=lambda q, k, v: q, grid=lambda q, k, v: (q.shape[0] // 64,))
def xattn_jnp(q, k, v, o):
  i = ml.program_id(0)
  qq = q[ml.ds(i * 64, 64), :].astype(F32)
  s = qq @ k[...].astype(F32).T / math.sqrt(q.shape[1])
  p = jax.nn.softmax(s, axis=-1)
  o[ml.ds(i * 64, 64), :] = (p @ v[...].astype(F32)).astype(o.dtype)
q = rnd((128, 40), 1, jnp.float32); k = rnd((77, 40), 2); v = rnd((77, 40), 3)
case("xattn_jnp40", xattn_jnp, (q, k, v), attn_ref(q, k, v), tol=2e-3)


# 23 GroupNorm SD sizes: C=320, G=32 (Cg=10), HW=64, NHWC
@mg.mgpu_kernel(out_shape=lambda x, w, b: x, grid=lambda x, w, b: (x.shape[0],))
def gn_sd(x, w, b, o, *, G: ml.constexpr = 32):
  n = ml.program_id(0)
  v = x[n].astype(F32)
  HW, C = v.shape
  g = v.reshape(HW, G, C // G)
  mean = g.mean(axis=(0, 2), keepdims=True)
  var = g.var(axis=(0, 2), keepdims=True)
  y = ((g - mean) * jax.lax.rsqrt(var + 1e-5)).reshape(HW, C) * w[...] + b[...]
  o[n] = jax.nn.silu(y).astype(o.dtype)

def gn_ref(x, w, b, G, eps=1e-5):
  x = f32(x); N, HW, C = x.shape
  g = x.reshape(N, HW, G, C // G)
  m = g.mean(axis=(1, 3), keepdims=True); v = ((g - m) ** 2).mean(axis=(1, 3), keepdims=True)
  y = ((g - m) / np.sqrt(v + eps)).reshape(N, HW, C) * f32(w) + f32(b)
  return y / (1 + np.exp(-y))
x = rnd((2, 64, 320), 8, jnp.bfloat16); w = rnd((320,), 9); b = rnd((320,), 10)
case("gn_sd", gn_sd, (x, w, b), gn_ref(x, w, b, 32), tol=3e-2)

# 24 AdaLN DiT hidden 1152 with 6-way modulation chunk: c (B, 6*D)
@mg.mgpu_kernel(out_shape=lambda x, c: x, grid=lambda x, c: (x.shape[0], x.shape[1] // 16))
def dit_mod(x, c, o):
  b = ml.program_id(0); t = ml.program_id(1)
  D = x.shape[2]
  shift, scale, gate = jnp.split(c[b, : 3 * D].astype(F32), 3)
  v = x[b, ml.ds(t * 16, 16), :].astype(F32)
  mu = jnp.mean(v, axis=-1, keepdims=True); var = jnp.var(v, axis=-1, keepdims=True)
  y = (v - mu) / jnp.sqrt(var + 1e-6) * (1 + scale[None]) + shift[None]
  o[b, ml.ds(t * 16, 16), :] = (v + gate * y).astype(o.dtype)

def dit_ref(x, c):
  D = x.shape[2]; v = f32(x); cc = f32(c)
  sh, sc, g = cc[:, :D], cc[:, D:2 * D], cc[:, 2 * D:3 * D]
  y = (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + 1e-6) * (1 + sc[:, None]) + sh[:, None]
  return v + g[:, None] * y
x = rnd((2, 32, 1152), 11, jnp.bfloat16); c = rnd((2, 6 * 1152), 12, jnp.bfloat16)
case("dit_mod", dit_mod, (x, c), dit_ref(x, c), tol=1e-1)

# 25 timestep embedding diffusers-style: flip_sin_to_cos, downscale_freq_shift=1, odd dim zero-padded
@mg.mgpu_kernel(out_shape=lambda t, *, dim: S((t.shape[0], dim), jnp.float32))
def temb_diff(t, o, *, dim: ml.constexpr, shift: ml.constexpr = 1.0):
  half = dim // 2
  exponent = -math.log(10000) * jnp.arange(0, half, dtype=jnp.float32) / (half - shift)
  emb = t[...][:, None].astype(jnp.float32) * jnp.exp(exponent)[None, :]
  emb = jnp.concatenate([jnp.cos(emb), jnp.sin(emb)], axis=-1)
  if dim % 2 == 1:
    emb = jnp.pad(emb, ((0, 0), (0, 1)))
  o[...] = emb

def temb_diff_ref(t, dim, shift=1.0):
  half = dim // 2
  ex = (-math.log(10000) * np.arange(half, dtype=np.float32) / np.float32(half - shift)).astype(np.float32)
  e = t[:, None].astype(np.float32) * np.exp(ex)[None]
  e = np.concatenate([np.cos(e), np.sin(e)], -1)
  if dim % 2: e = np.pad(e, ((0, 0), (0, 1)))
  return e
t = (np.arange(8) * 123.0).astype(np.float32)
case("temb_diff256", temb_diff, (t,), temb_diff_ref(t, 256), tol=2e-3, dim=256)
case("temb_diff321", temb_diff, (t,), temb_diff_ref(t, 321), tol=2e-3, dim=321)
ti = np.arange(8, dtype=np.int32) * 97
case("temb_int_t", temb_diff, (ti,), temb_diff_ref(ti, 256), tol=2e-3, dim=256)

# 26 MAE 2-D sincos pos embed computed in kernel: grid g x g, dim D
@mg.mgpu_kernel(out_shape=lambda x, *, g: S((g * g, x.shape[1]), jnp.float32))
def pos2d(x, o, *, g: ml.constexpr):
  D = x.shape[1]
  i = jnp.arange(g * g)
  gh = (i // g).astype(jnp.float32); gw = (i % g).astype(jnp.float32)
  omega = 1.0 / 10000 ** (jnp.arange(D // 4, dtype=jnp.float32) / (D / 4.0))
  def emb1d(pos):
    out = pos[:, None] * omega[None, :]
    return jnp.concatenate([jnp.sin(out), jnp.cos(out)], axis=1)
  o[...] = jnp.concatenate([emb1d(gw), emb1d(gh)], axis=1) + x[...] * 0

def pos2d_ref(g, D):
  i = np.arange(g * g); gh = (i // g).astype(np.float32); gw = (i % g).astype(np.float32)
  om = (1.0 / 10000 ** (np.arange(D // 4, dtype=np.float32) / (D / 4.0))).astype(np.float32)
  e = lambda p: np.concatenate([np.sin(p[:, None] * om), np.cos(p[:, None] * om)], 1)
  return np.concatenate([e(gw), e(gh)], 1)
xx = np.zeros((256, 128), np.float32)
case("pos2d", pos2d, (xx,), pos2d_ref(16, 128), tol=2e-3, g=16)


# 28 cyclic shift (Swin shifted windows) with jnp.roll on two axes
@mg.mgpu_kernel(out_shape=lambda x: x)
def cyc_shift(x, o, *, s: ml.constexpr = 4):
  o[...] = jnp.roll(x[...], shift=(-s, -s), axis=(0, 1))
xs = rnd((16, 16, 32), 2)
case("cyc_shift", cyc_shift, (xs,), np.roll(xs, (-4, -4), (0, 1)))

# 29 shifted-window attention mask computed in-kernel: region ids
@mg.mgpu_kernel(out_shape=lambda x, *, H, ws, s: S(((H // ws) ** 2, ws * ws, ws * ws), jnp.float32), grid=lambda x, *, H, ws, s: ((H // ws) ** 2,))
def swin_mask(x, o, *, H: ml.constexpr, ws: ml.constexpr, s: ml.constexpr):
  w = ml.program_id(0)
  nw = H // ws
  wr = w // nw; wc = w % nw
  t = jnp.arange(ws * ws)
  r = wr * ws + t // ws; c = wc * ws + t % ws
  rr = jnp.where(r < H - ws, 0, jnp.where(r < H - s, 1, 2))
  cc = jnp.where(c < H - ws, 0, jnp.where(c < H - s, 1, 2))
  rid = rr * 3 + cc
  o[w] = jnp.where(rid[:, None] != rid[None, :], -100.0, 0.0)

def swin_mask_ref(H, ws, s):
  img = np.zeros((H, H)); cnt = 0
  for hs in (slice(0, -ws), slice(-ws, -s), slice(-s, None)):
    for wsl in (slice(0, -ws), slice(-ws, -s), slice(-s, None)):
      img[hs, wsl] = cnt; cnt += 1
  mw = img.reshape(H // ws, ws, H // ws, ws).transpose(0, 2, 1, 3).reshape(-1, ws * ws)
  return np.where(mw[:, None, :] != mw[:, :, None], -100.0, 0.0).astype(np.float32)
case("swin_mask8", swin_mask, (xx,), swin_mask_ref(16, 8, 4), H=16, ws=8, s=4)
case("swin_mask7", swin_mask, (xx,), swin_mask_ref(14, 7, 3), H=14, ws=7, s=3)

# 30 Flux-style rope: x reshaped (..., D/2, 1, 2), freqs_cis (T, D/2, 2, 2)
@mg.mgpu_kernel(out_shape=lambda x, f: x, grid=lambda x, f: (x.shape[0] // 32,))
def flux_rope(x, f, o):
  i = ml.program_id(0)
  v = x[ml.ds(i * 32, 32)].astype(F32)              # (32, D)
  fc = f[ml.ds(i * 32, 32)]                          # (32, D/2, 2, 2)
  xr = v.reshape(32, -1, 1, 2)
  out = fc[..., 0] * xr[..., 0] + fc[..., 1] * xr[..., 1]
  o[ml.ds(i * 32, 32)] = out.reshape(32, -1).astype(o.dtype)

T, D = 64, 64
ang = np.arange(T)[:, None] * (1.0 / 10000 ** (np.arange(0, D, 2) / D))[None]
fcis = np.stack([np.cos(ang), -np.sin(ang), np.sin(ang), np.cos(ang)], -1).reshape(T, D // 2, 2, 2).astype(np.float32)
xf = rnd((T, D), 3, jnp.bfloat16)
xr = f32(xf).reshape(T, -1, 1, 2)
ref = (fcis[..., 0] * xr[..., 0] + fcis[..., 1] * xr[..., 1]).reshape(T, D)
case("flux_rope", flux_rope, (xf, fcis), ref, tol=3e-2)

# 31 pixel unshuffle (space-to-depth) r=2, NHWC, program per output row
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2, x.shape[1] // 2, 4 * x.shape[2]), x.dtype), grid=lambda x: (x.shape[0] // 2,))
def s2d(x, o):
  i = ml.program_id(0)
  v = x[ml.ds(2 * i, 2)]                              # (2, W, C)
  W, C = v.shape[1], v.shape[2]
  o[i] = v.reshape(2, W // 2, 2, C).transpose(1, 0, 2, 3).reshape(W // 2, 4 * C)
xp = rnd((8, 16, 32), 4)
case("s2d", s2d, (xp,), xp.reshape(4, 2, 8, 2, 32).transpose(0, 2, 1, 3, 4).reshape(4, 8, 128))


# 33 Triton-style GroupNorm stats: program per (n, g), masked channel block (Cg=10 -> 16) over HW loop
@mg.mgpu_kernel(out_shape=lambda x, *, G: (S((x.shape[0], G), F32), S((x.shape[0], G), F32)),
                grid=lambda x, *, G: (x.shape[0], G))
def gn_stats(x, mean, rstd, *, G: ml.constexpr, BLOCK_C: ml.constexpr = 16, BLOCK_HW: ml.constexpr = 64):
  n = ml.program_id(0); g = ml.program_id(1)
  HW, C = x.shape[1], x.shape[2]; CG = C // G
  c = g * CG + ml.arange(BLOCK_C)
  cm = ml.arange(BLOCK_C) < CG
  acc = ml.zeros((BLOCK_HW, BLOCK_C), F32); acc2 = ml.zeros((BLOCK_HW, BLOCK_C), F32)
  for s in range(0, HW, BLOCK_HW):
    r = s + ml.arange(BLOCK_HW)
    m = (r[:, None] < HW) & cm[None, :]
    v = ml.load(x.at[n, r[:, None], c[None, :]], mask=m, other=0.0).to(F32)
    acc += v; acc2 += v * v
  cnt = CG * HW
  mu = ml.sum(acc) / cnt
  var = ml.sum(acc2) / cnt - mu * mu
  mean[n, g] = mu
  rstd[n, g] = ml.rsqrt(var + 1e-5)

x = rnd((2, 100, 320), 1, jnp.bfloat16)
xx = f32(x).reshape(2, 100, 32, 10)
mu = xx.mean(axis=(1, 3)); var = xx.var(axis=(1, 3))
case("gn_stats", gn_stats, (x,), (mu, 1 / np.sqrt(var + 1e-5)), tol=1e-3, G=32)

# 34 cross attn with masked key load (77 keys) Triton style, head dim 64
@mg.mgpu_kernel(out_shape=lambda q, k, v: q, grid=lambda q, k, v: (q.shape[0] // 64,))
def xattn_mask(q, k, v, o, *, BN: ml.constexpr = 128):
  i = ml.program_id(0)
  L = k.shape[0]
  n = ml.arange(BN)
  qq = q[ml.ds(i * 64, 64), :]
  kk = ml.load(k.at[n[:, None], ml.arange(64)[None, :]], mask=(n < L)[:, None], other=0.0)
  vv = ml.load(v.at[n[:, None], ml.arange(64)[None, :]], mask=(n < L)[:, None], other=0.0)
  s = ml.dot(qq, kk.T) * 0.125
  s = ml.where((n < L)[None, :], s, float("-inf"))
  p = ml.exp(s - ml.max(s, axis=1)[:, None])
  l = ml.sum(p, axis=1)
  o[ml.ds(i * 64, 64), :] = (ml.dot(p.to(v.dtype), vv) / l[:, None]).to(o.dtype)

def attn_ref(q, k, v):
  s = f32(q) @ f32(k).T / np.sqrt(q.shape[-1])
  p = np.exp(s - s.max(-1, keepdims=True)); return (p / p.sum(-1, keepdims=True)) @ f32(v)
q = rnd((128, 64), 1, jnp.bfloat16); k = rnd((77, 64), 2, jnp.bfloat16); v = rnd((77, 64), 3, jnp.bfloat16)
case("xattn_mask", xattn_mask, (q, k, v), attn_ref(q, k, v), tol=3e-2)

# 35 CFG with guidance rescale (std over non-batch dims)
@mg.mgpu_kernel(out_shape=lambda c, u: c, grid=lambda c, u: (c.shape[0],))
def cfg_rescale(c, u, o, *, s: ml.constexpr = 7.5, phi: ml.constexpr = 0.7):
  b = ml.program_id(0)
  cc = c[b].astype(F32); uu = u[b].astype(F32)
  g = uu + s * (cc - uu)
  r = g * (jnp.std(cc) / jnp.std(g))
  o[b] = (phi * r + (1 - phi) * g).astype(o.dtype)
c = rnd((2, 64, 128), 4); u = rnd((2, 64, 128), 5)
g = u + 7.5 * (c - u); st = lambda a: a.reshape(2, -1).std(1)[:, None, None]
case("cfg_rescale", cfg_rescale, (c, u), 0.7 * g * st(c) / st(g) + 0.3 * g, tol=1e-3)

# 36 AdaLN chunk into 6 with jnp.split of the register tile, per-program batch item
@mg.mgpu_kernel(out_shape=lambda x, c: x, grid=lambda x, c: (x.shape[0],))
def adaln6(x, c, o):
  b = ml.program_id(0)
  sh1, sc1, g1, sh2, sc2, g2 = jnp.split(c[b].astype(F32), 6, axis=-1)
  v = x[b].astype(F32)
  mu = v.mean(-1, keepdims=True); var = v.var(-1, keepdims=True)
  y = (v - mu) * jax.lax.rsqrt(var + 1e-6)
  y = y * (1 + sc1) + sh1
  o[b] = (v + g1 * y + g2 * (y * (1 + sc2) + sh2)).astype(o.dtype)
x = rnd((2, 64, 128), 6); cm = rnd((2, 6 * 128), 7)
vv = x; y = (vv - vv.mean(-1, keepdims=True)) / np.sqrt(vv.var(-1, keepdims=True) + 1e-6)
ch = [cm[:, i * 128:(i + 1) * 128][:, None] for i in range(6)]
y = y * (1 + ch[1]) + ch[0]
case("adaln6", adaln6, (x, cm), vv + ch[2] * y + ch[5] * (y * (1 + ch[4]) + ch[3]), tol=1e-3)

# 37 Swin patch merging: x (H, W, C) -> (H/2, W/2, 4C) with strided slices in registers + LN
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2, x.shape[1] // 2, 4 * x.shape[2]), x.dtype), grid=lambda x: (x.shape[0] // 2,))
def patch_merge(x, o):
  i = ml.program_id(0)
  v = x[ml.ds(2 * i, 2)].astype(F32)             # (2, W, C)
  x0 = v[0, 0::2]; x1 = v[1, 0::2]; x2 = v[0, 1::2]; x3 = v[1, 1::2]
  m = jnp.concatenate([x0, x1, x2, x3], axis=-1)   # (W/2, 4C)
  mu = m.mean(-1, keepdims=True); var = m.var(-1, keepdims=True)
  o[i] = ((m - mu) / jnp.sqrt(var + 1e-5)).astype(o.dtype)
xm = rnd((8, 16, 32), 8)
m = np.concatenate([xm[0::2, 0::2], xm[1::2, 0::2], xm[0::2, 1::2], xm[1::2, 1::2]], -1)
case("patch_merge", patch_merge, (xm,), (m - m.mean(-1, keepdims=True)) / np.sqrt(m.var(-1, keepdims=True) + 1e-5), tol=1e-4)

# 38 nearest upsample of 3-D with repeat twice
@mg.mgpu_kernel(out_shape=lambda x: S((2 * x.shape[0], 2 * x.shape[1], x.shape[2]), x.dtype))
def up_rep(x, o):
  o[...] = jnp.repeat(jnp.repeat(x[...], 2, axis=0), 2, axis=1)
x3 = rnd((8, 8, 32), 9, jnp.bfloat16)
case("up_rep", up_rep, (x3,), np.repeat(np.repeat(f32(x3), 2, 0), 2, 1))

# 39 qk-norm + interleaved rope with reshape (T, H, D/2, 2)
@mg.mgpu_kernel(out_shape=lambda q, w, cs, sn: q, grid=lambda q, w, cs, sn: (q.shape[0] // 16,))
def qk_rope_il(q, w, cs, sn, o, *, H: ml.constexpr = 4):
  i = ml.program_id(0)
  D = q.shape[1] // H
  v = q[ml.ds(i * 16, 16)].astype(F32).reshape(16, H, D)
  ms = jnp.mean(jnp.square(v), axis=-1, keepdims=True)
  v = v * jax.lax.rsqrt(ms + 1e-6) * w[...]
  p = v.reshape(16, H, D // 2, 2)
  a = p[..., 0]; bb = p[..., 1]
  c = cs[ml.ds(i * 16, 16)][:, None, :]; s = sn[ml.ds(i * 16, 16)][:, None, :]
  out = jnp.stack([a * c - bb * s, a * s + bb * c], axis=-1).reshape(16, H * D)
  o[ml.ds(i * 16, 16)] = out.astype(o.dtype)
T, H, D = 64, 4, 64
q = rnd((T, H * D), 10, jnp.bfloat16); w = rnd((D,), 11)
ang = (np.arange(T)[:, None] * (1.0 / 10000 ** (np.arange(0, D, 2) / D))[None]).astype(np.float32)
cs, sn = np.cos(ang), np.sin(ang)
v = f32(q).reshape(T, H, D); v = v / np.sqrt((v * v).mean(-1, keepdims=True) + 1e-6) * w
a, bb = v[..., 0::2], v[..., 1::2]
ref = np.stack([a * cs[:, None] - bb * sn[:, None], a * sn[:, None] + bb * cs[:, None]], -1).reshape(T, H * D)
case("qk_rope_il", qk_rope_il, (q, w, cs, sn), ref, tol=5e-2)

# 40 qk-norm head dim 72 (PixArt: 1152 = 16 x 72)
@mg.mgpu_kernel(out_shape=lambda q, w: q, grid=lambda q, w: (q.shape[0] // 8,))
def qknorm72(q, w, o, *, H: ml.constexpr = 16):
  i = ml.program_id(0)
  D = q.shape[1] // H
  v = q[ml.ds(i * 8, 8)].astype(F32).reshape(8, H, D)
  v = v * jax.lax.rsqrt(jnp.mean(v * v, axis=-1, keepdims=True) + 1e-6) * w[...].astype(F32)
  o[ml.ds(i * 8, 8)] = v.reshape(8, H * D).astype(o.dtype)
q = rnd((32, 1152), 1, jnp.bfloat16); w = rnd((72,), 2, jnp.bfloat16)
v = f32(q).reshape(32, 16, 72); ref = (v / np.sqrt((v * v).mean(-1, keepdims=True) + 1e-6) * f32(w)).reshape(32, 1152)
case("qknorm72", qknorm72, (q, w), ref, tol=5e-2)

# 41 timestep MLP: temb (B=8) -> linear -> silu -> linear (small M dots)
@mg.mgpu_kernel(out_shape=lambda t, w1, w2: S((t.shape[0], w2.shape[1]), jnp.float32))
def temb_mlp(t, w1, w2, o):
  half = w1.shape[0] // 2
  fr = jnp.exp(-math.log(10000.0) * jnp.arange(half, dtype=jnp.float32) / half)
  a = t[...].astype(F32)[:, None] * fr[None]
  e = jnp.concatenate([jnp.cos(a), jnp.sin(a)], axis=-1)
  h = jax.nn.silu(jnp.dot(e.astype(jnp.bfloat16), w1[...], preferred_element_type=jnp.float32))
  o[...] = jnp.dot(h.astype(jnp.bfloat16), w2[...], preferred_element_type=jnp.float32)
t = np.arange(8, dtype=np.float32) * 111; w1 = (rnd((256, 128), 3) * 0.05).astype(jnp.bfloat16); w2 = (rnd((128, 128), 4) * 0.05).astype(jnp.bfloat16)
half = 128; fr = np.exp(-math.log(10000.0) * np.arange(half, dtype=np.float32) / half).astype(np.float32)
a = t[:, None] * fr; e = np.concatenate([np.cos(a), np.sin(a)], -1)
hh = f32(jnp.asarray(e).astype(jnp.bfloat16)) @ f32(w1); hh = hh / (1 + np.exp(-hh))
ref = f32(jnp.asarray(hh).astype(jnp.bfloat16)) @ f32(w2)
case("temb_mlp", temb_mlp, (t, w1, w2), ref, tol=3e-2)

# 42 GEGLU Triton-style: column blocks of the two halves
@mg.mgpu_kernel(out_shape=lambda h: S((h.shape[0], h.shape[1] // 2), h.dtype), grid=lambda h: (h.shape[0] // 32, h.shape[1] // 2 // 64))
def geglu_t(h, o):
  i = ml.program_id(0); j = ml.program_id(1)
  F = h.shape[1] // 2
  rows = i * 32 + ml.arange(32)
  cols = j * 64 + ml.arange(64)
  a = ml.load(h.at[rows[:, None], cols[None, :]]).to(F32)
  g = ml.load(h.at[rows[:, None], F + cols[None, :]]).to(F32)
  gelu = 0.5 * g * (1 + ml.tanh(0.7978845608 * (g + 0.044715 * g * g * g)))
  ml.store(o.at[rows[:, None], cols[None, :]], (a * gelu).to(o.dtype))
h = rnd((64, 512), 5, jnp.bfloat16)
hh = f32(h); aa, gg = hh[:, :256], hh[:, 256:]
case("geglu_t", geglu_t, (h,), aa * 0.5 * gg * (1 + np.tanh(0.7978845608 * (gg + 0.044715 * gg ** 3))), tol=3e-2)

# 43 SwiGLU interleaved gate/value columns
@mg.mgpu_kernel(out_shape=lambda h: S((h.shape[0], h.shape[1] // 2), h.dtype))
def swiglu_il(h, o):
  v = h[...].astype(F32)
  o[...] = (jax.nn.silu(v[:, ::2]) * v[:, 1::2]).astype(o.dtype)
h = rnd((16, 256), 6, jnp.bfloat16); hh = f32(h)
case("swiglu_il", swiglu_il, (h,), hh[:, ::2] / (1 + np.exp(-hh[:, ::2])) * hh[:, 1::2], tol=3e-2)

# 44 modulate 77 text tokens (odd T)
@mg.mgpu_kernel(out_shape=lambda x, sh, sc: x, grid=lambda x, sh, sc: (x.shape[0],))
def mod77(x, sh, sc, o):
  b = ml.program_id(0)
  v = x[b].astype(F32)
  y = jax.nn.standardize(v, axis=-1, epsilon=1e-6)
  o[b] = (y * (1 + sc[b][None, :]) + sh[b][None, :]).astype(o.dtype)
x = rnd((2, 77, 128), 7, jnp.bfloat16); sh = rnd((2, 128), 8); sc = rnd((2, 128), 9)
v = f32(x); y = (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + 1e-6)
case("mod77", mod77, (x, sh, sc), y * (1 + sc[:, None]) + sh[:, None], tol=5e-2)

# 45 DiT final layer: modulate, linear (dot), unpatchify one row of patches
@mg.mgpu_kernel(out_shape=lambda x, c, w: S((x.shape[0], 16 * 2, 16 * 2, 4), jnp.float32), grid=lambda x, c, w: (x.shape[0], 16))
def dit_final(x, c, w, o):
  b = ml.program_id(0); r = ml.program_id(1)
  D = x.shape[2]
  sh = c[b, :D].astype(F32); sc = c[b, D:].astype(F32)
  v = x[b, ml.ds(r * 16, 16), :].astype(F32)          # (16 patches, D)
  y = jax.nn.standardize(v, axis=-1, epsilon=1e-6) * (1 + sc) + sh
  p = jnp.dot(y.astype(jnp.bfloat16), w[...], preferred_element_type=F32)     # (16, 2*2*4)
  p = p.reshape(16, 2, 2, 4).transpose(1, 0, 2, 3).reshape(2, 32, 4)
  o[b, ml.ds(r * 2, 2)] = p
x = rnd((2, 256, 128), 10, jnp.bfloat16); c = rnd((2, 256), 11); w = (rnd((128, 16), 12) * 0.1).astype(jnp.bfloat16)
v = f32(x); y = (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + 1e-6) * (1 + c[:, None, 128:]) + c[:, None, :128]
p = f32(jnp.asarray(y).astype(jnp.bfloat16)) @ f32(w)     # (2, 256, 16)
ref = p.reshape(2, 16, 16, 2, 2, 4).transpose(0, 1, 3, 2, 4, 5).reshape(2, 32, 32, 4)
case("dit_final", dit_final, (x, c, w), ref, tol=5e-2)


@pytest.mark.parametrize("kernel,args,ref,tol,kw", CASES)
def test_theme_kernel_matches_numpy_and_builds(kernel, args, ref, tol, kw):
  out = kernel(*args, interpret=True, **kw)
  outs, refs = (out, ref) if isinstance(out, tuple) else ((out,), (ref,))
  for o, r in zip(outs, refs):
    np.testing.assert_allclose(f32(o), f32(r), rtol=tol, atol=tol)
  export(kernel, *args, **kw)


def test_enough_kernels():
  assert len(CASES) >= 30
