"""Probe 67b's cases: each kernel of probe67b_kernels with its inputs and reference."""
import jax.numpy as jnp
import numpy as np

import types

import probe67b_kernels
import probe67b_more
import probe67b_ssm

K = types.SimpleNamespace(**{**vars(probe67b_kernels), **vars(probe67b_ssm), **vars(probe67b_more)})


def _rng(seed):
  return np.random.default_rng(seed)


def qkv(seed, h=2, t=256, dk=64, dv=64, dtype=K.BF16, scale=0.3):
  r = _rng(seed)
  return tuple(jnp.asarray(r.standard_normal((h, t, d)) * scale, dtype) for d in (dk, dk, dv))


def _chunk(c):
  return lambda q, k, v, interpret=False: K.la_chunk(q, k, v, interpret=interpret, C=c)


def _squeeze(r):
  return r[0][:, 0], r[1]


CASES = {
  "la_chunk64_bf16": (_chunk(64), lambda s: qkv(s), lambda q, k, v: K.la_ref(q, k, v)[0], 3e-2),
  "la_chunk64_f16": (_chunk(64), lambda s: qkv(s, dtype=K.F16), lambda q, k, v: K.la_ref(q, k, v)[0], 3e-2),
  "la_chunk_ragged": (K.la_chunk_ragged, lambda s: qkv(s, t=200, dk=128, dv=128, scale=0.2),
                      lambda q, k, v: K.la_ref(q, k, v)[0], 3e-2),
  "la_chunk128_states": (K.la_chunk128_states,
                         lambda s: qkv(s) + (jnp.asarray(_rng(s + 9).standard_normal((2, 64, 64)), K.F32),),
                         lambda q, k, v, s0: K.la_ref(q, k, v, s0=s0), 3e-2),
  "la_recurrent": (K.la_recurrent, lambda s: qkv(s, t=40), lambda q, k, v: K.la_ref(q, k, v)[0], 1e-4),
  "la_decode": (K.la_decode,
                lambda s: tuple(jnp.asarray(_rng(s).standard_normal((4, 64)), K.BF16) for _ in range(3))
                + (jnp.asarray(_rng(s + 1).standard_normal((4, 64, 64)), K.F32),),
                lambda q, k, v, st: _squeeze(K.la_ref(q[:, None], k[:, None], v[:, None], s0=st)), 1e-5),
  "retention_recurrent": (K.retention_recurrent, lambda s: qkv(s, h=3, t=40), K.retention_ref, 1e-4),
  "retention_chunk": (K.retention_chunk, lambda s: qkv(s, h=3), K.retention_ref, 3e-2),
  "simple_gla_chunk": (K.simple_gla_chunk,
                       lambda s: qkv(s) + (jnp.asarray(-_rng(s + 5).random((2, 256)) * 0.1, K.F32),),
                       K.simple_gla_ref, 3e-2),
  "gla_chunk_ragged": (K.gla_chunk_ragged,
                       lambda s: qkv(s, t=150, dk=128) + (jnp.asarray(-_rng(s + 5).random((2, 150, 128)) * 0.05, K.F32),),
                       K.gla_ref, 3e-2),
  "gla_recurrent": (K.gla_recurrent,
                    lambda s: qkv(s, t=24) + (jnp.asarray(-_rng(s + 5).random((2, 24, 64)) * 0.1, K.F32),
                                              jnp.asarray(_rng(s + 6).standard_normal((2, 64, 64)), K.F32)),
                    lambda q, k, v, g, s0: K.la_ref(q, k, v, decay=np.exp(np.asarray(g)), s0=s0), 1e-4),
}


def _beta(seed, h, t):
  return jnp.asarray(_rng(seed).random((h, t)) * 0.5 + 0.2, K.F32)


def _mamba(seed, bsz=2, t=48, d=256, n=16, dtype=K.F32):
  r = _rng(seed)
  x = jnp.asarray(r.standard_normal((bsz, t, d)), dtype)
  dt = jnp.asarray(r.standard_normal((bsz, t, d)) * 0.5 - 2.0, dtype)
  at = jnp.asarray(-np.exp(r.standard_normal((n, d)) * 0.5), K.F32)
  b, c = (jnp.asarray(r.standard_normal((bsz, t, n)), dtype) for _ in range(2))
  dd, dtb = (jnp.asarray(r.standard_normal(d) * 0.3, K.F32) for _ in range(2))
  return x, dt, at, b, c, dd, dtb, jnp.asarray(r.standard_normal((bsz, t, d)), dtype)


def _mamba_dn(seed):
  x, dt, at, b, c = _mamba(seed)[:5]
  return x, dt, at.T, b, c, jnp.asarray(_rng(seed + 3).standard_normal((2, 256, 16)), K.F32)


CASES.update({
  "delta_recurrent": (K.delta_recurrent, lambda s: qkv(s, t=40) + (_beta(s, 2, 40),),
                      lambda q, k, v, b: K.delta_ref(q, k, v, b)[0], 1e-4),
  "gated_delta_recurrent": (K.gated_delta_recurrent,
                            lambda s: qkv(s, t=40, dv=128) + (_beta(s, 2, 40),
                                                              jnp.asarray(-_rng(s + 1).random((2, 40)) * 0.1, K.F32),
                                                              jnp.asarray(_rng(s + 2).standard_normal((2, 64, 128)) * 0.1, K.F32)),
                            lambda q, k, v, b, g, s0: K.delta_ref(q, k, v, b, g=g, s0=s0), 1e-4),
  "delta_chunk": (K.delta_chunk,
                  lambda s: (lambda q, k, v: (q, (k.astype(K.F32) / jnp.linalg.norm(k.astype(K.F32), axis=-1, keepdims=True)).astype(K.F16), v))(*qkv(s, t=192, dtype=K.F16)) + (_beta(s, 2, 192),),
                  lambda q, k, v, b: K.delta_ref(q, k, v, b, normalize=False)[0], 3e-2),
  "mamba_scan_f32": (K.mamba_scan, lambda s: _mamba(s), lambda *a: K.mamba_ref(*a)[0], 1e-4),
  "mamba_scan_bf16": (K.mamba_scan, lambda s: _mamba(s, dtype=K.BF16), lambda *a: K.mamba_ref(*a)[0], 1e-4),
  "mamba_scan_dn": (K.mamba_scan_dn, _mamba_dn, K.mamba_dn_ref, 1e-4),
})


def _ssd(seed, h=2, t=256):
  r = _rng(seed)
  x, b, c = (jnp.asarray(r.standard_normal((h, t, 64)) * 0.3, K.BF16) for _ in range(3))
  return x, jnp.asarray(-r.random((h, t)) * 0.1, K.F32), b, c


def _conv(seed, bsz=2, t=100, d=256):
  r = _rng(seed)
  return (jnp.asarray(r.standard_normal((bsz, t, d)), K.BF16), jnp.asarray(r.standard_normal((d, 4)) * 0.5, K.F32),
          jnp.asarray(r.standard_normal(d) * 0.1, K.F32))


CU = np.array([0, 37, 37 + 100, 37 + 100 + 64, 37 + 100 + 64 + 3], np.int32)


def _conv_varlen(seed):
  x, w, bias = _conv(seed, bsz=1, t=int(CU[-1]))
  return x[0], w, bias, jnp.asarray(CU)


def _packed(seed, h=2, dtype=K.BF16):
  r = _rng(seed)
  return tuple(jnp.asarray(r.standard_normal((int(CU[-1]), h, 64)) * 0.3, dtype) for _ in range(3))


CASES.update({
  "ssd_three_kernels": (K.ssd_three, lambda s: _ssd(s), K.ssd_ref, 3e-2),
  "causal_conv1d": (K.causal_conv1d, _conv, lambda x, w, bias: K.conv_ref(x, w, bias), 1e-5),
  "causal_conv1d_varlen": (K.causal_conv1d_varlen, _conv_varlen, lambda x, w, bias, cu: K.conv_ref(x, w, bias, cu), 1e-5),
  "la_recurrent_varlen": (K.la_recurrent_varlen, lambda s: _packed(s) + (jnp.asarray(CU),), K.varlen_ref, 1e-4),
  "gla_chunk_varlen": (K.gla_chunk_varlen,
                       lambda s: _packed(s) + (jnp.asarray(-_rng(s + 4).random((int(CU[-1]), 2)) * 0.1, K.F32), jnp.asarray(CU)),
                       lambda q, k, v, g, cu: K.varlen_ref(q, k, v, cu, decay=np.exp(np.asarray(g)))[0], 3e-2),
})


def _mamba2_step(seed, h=4, p=64, n=128):
  r = _rng(seed)
  return (jnp.asarray(r.standard_normal((h, p, n)), K.F32), jnp.asarray(r.standard_normal((h, p)), K.BF16),
          jnp.asarray(r.standard_normal(h), K.F32), jnp.asarray(-r.random(h), K.F32),
          jnp.asarray(r.standard_normal(n), K.BF16), jnp.asarray(r.standard_normal(n), K.BF16),
          jnp.asarray(r.standard_normal(h), K.F32))


CASES.update({
  "fla_fused_chunk": (lambda q, k, v, interpret=False: (lambda o, ht: (o.sum(0), ht))(
                          *K.fla_fused_chunk(q, k, v, interpret=interpret, scale=0.125, BT=64, BK=64, BV=64)),
                      lambda s: qkv(s, h=2, t=200, dk=128, dv=128),
                      lambda q, k, v: tuple(K.la_ref(np.asarray(q, np.float32) * 0.125, k, v)), 3e-2),
  "chunk_fwd_h_o": (K.chunk_two,
                    lambda s: qkv(s, t=200) + (jnp.asarray(-_rng(s + 5).random((2, 200)) * 0.1, K.F32),),
                    lambda q, k, v, g: K.la_ref(q, k, v, decay=np.exp2(np.asarray(g)))[0], 3e-2),
  "la_pallas": (K.la_pallas, lambda s: qkv(s), lambda q, k, v: K.la_ref(q, k, v)[0], 3e-2),
  "retention_parallel": (K.retention_parallel, lambda s: qkv(s, h=3, t=128), K.retention_parallel_ref, 3e-2),
  "mamba2_state_update": (K.mamba2_state_update, _mamba2_step, K.mamba2_update_ref, 1e-5),
  "la_recurrent_two_heads": (K.la_recurrent_two_heads,
                             lambda s: tuple(qkv(s, h=2, t=24)[:2]) + (qkv(s + 1, h=4, t=24)[2],), K.two_heads_ref, 1e-4),
})


def _mamba_t(seed, t=128, d=256, n=16):
  r = _rng(seed)
  return (jnp.asarray(r.standard_normal((t, d)), K.BF16), jnp.asarray(r.standard_normal((t, d)) * 0.5 - 2.0, K.BF16),
          jnp.asarray(-np.exp(r.standard_normal((n, d)) * 0.5), K.F32),
          jnp.asarray(r.standard_normal((t, n)), K.F32), jnp.asarray(r.standard_normal((t, n)), K.F32))


def _mamba_assoc(seed, t=128, d=256):
  r = _rng(seed)
  return (jnp.asarray(r.standard_normal((t, d)), K.F32), jnp.asarray(r.standard_normal((t, d)) * 0.5 - 2.0, K.F32),
          jnp.asarray(-np.exp(r.standard_normal(d) * 0.5), K.F32),
          jnp.asarray(r.standard_normal(t), K.F32), jnp.asarray(r.standard_normal(t), K.F32))


CASES.update({
  "la_chunk128_d128": (_chunk(128), lambda s: qkv(s, dk=128, dv=128, scale=0.2), lambda q, k, v: K.la_ref(q, k, v)[0], 3e-2),
  "mamba_scan_buffered": (K.mamba_scan_buffered, _mamba_t, K.mamba_buffered_ref, 1e-4),
  "mamba_assoc_scan": (K.mamba_assoc_scan, _mamba_assoc, K.mamba_assoc_ref, 1e-4),
  "la_chunk_bwd_dkdv": (K.la_chunk_bwd_dkdv, lambda s: qkv(s) + (qkv(s + 1)[0],), K.la_bwd_ref, 3e-2),
})


def _normed_keys(q, k, v):
  kf = k.astype(K.F32)
  return q, (kf / jnp.linalg.norm(kf, axis=-1, keepdims=True)).astype(k.dtype), v


def _mamba_varlen(seed, d=128, n=16):
  r = _rng(seed)
  t = int(CU[-1])
  return (jnp.asarray(r.standard_normal((t, d)), K.F32), jnp.asarray(r.standard_normal((t, d)) * 0.5 - 2.0, K.F32),
          jnp.asarray(-np.exp(r.standard_normal((n, d)) * 0.5), K.F32),
          jnp.asarray(r.standard_normal((t, n)), K.F32), jnp.asarray(r.standard_normal((t, n)), K.F32), jnp.asarray(CU),
          jnp.asarray(r.standard_normal((len(CU) - 1, n, d)), K.F32))


CASES.update({
  "gated_delta_chunk": (K.gated_delta_chunk,
                        lambda s: _normed_keys(*qkv(s, t=192, dtype=K.F16)) + (
                            _beta(s, 2, 192), jnp.asarray(-_rng(s + 1).random((2, 192)) * 0.05, K.F32),
                            jnp.asarray(_rng(s + 2).standard_normal((2, 64, 64)) * 0.1, K.F32)),
                        lambda q, k, v, b, g, s0: K.delta_ref(q, k, v, b, g=g, s0=s0, normalize=False), 3e-2),
  "wy_inverse_static": (lambda k, b, interpret=False: K.wy_inverse(k, b, interpret=interpret, UNROLL=True), lambda s: (_normed_keys(*qkv(s, t=64, dtype=K.F16))[1], _beta(s, 2, 64)),
                        K.wy_inverse_ref, 2e-2),
  "la_normalised_recurrent": (K.la_normalised_recurrent, lambda s: qkv(s, t=24), K.la_normalised_ref, 1e-4),
  "mamba_scan_varlen": (K.mamba_scan_varlen, _mamba_varlen, K.mamba_varlen_ref, 1e-4),
  "lightning_subchunk": (K.lightning_subchunk, lambda s: qkv(s, h=2, t=128) + (jnp.asarray([0.05, 0.2], K.F32),),
                         K.lightning_ref, 3e-2),
})


def _gdn_decode(seed, h=4):
  r = _rng(seed)
  q, k, v = (jnp.asarray(r.standard_normal((h, 64)), K.BF16) for _ in range(3))
  return (q, k, v, jnp.asarray(r.random(h) * 0.5 + 0.2, K.F32), jnp.asarray(-r.random(h) * 0.1, K.F32),
          jnp.asarray(r.standard_normal((h, 64, 64)) * 0.1, K.BF16))


def _gdn_decode_ref(q, k, v, b, g, st):
  o, s = K.delta_ref(q[:, None], k[:, None], v[:, None], b[:, None], g=np.asarray(g)[:, None], s0=np.asarray(st, np.float32))
  return o[:, 0], np.asarray(jnp.asarray(s).astype(K.BF16), np.float32)


def _conv_update(seed):
  r = _rng(seed)
  return (jnp.asarray(r.standard_normal((3, 256)), K.BF16), jnp.asarray(r.standard_normal((3, 256, 3)), K.BF16),
          jnp.asarray(r.standard_normal((256, 4)), K.F32))


def _conv_update_ref(x, cs, w):
  win = np.concatenate([np.asarray(cs, np.float32), np.asarray(x, np.float32)[:, :, None]], 2)
  acc = (win * np.asarray(w)[None]).sum(2)
  return acc / (1 + np.exp(-acc)), np.asarray(jnp.asarray(win[:, :, 1:]).astype(K.BF16), np.float32)


def _ema_ref(x, a):
  x, a = np.asarray(x, np.float32), np.asarray(a)
  out, h = np.zeros(x.shape, np.float32), np.zeros(x.shape[1], np.float32)
  for t in range(x.shape[0]):
    out[t] = h = a * h + x[t]
  return out


def _packed_flat(seed):
  return tuple(t[:, 0] for t in _packed(seed, h=1)) + (jnp.asarray(CU),)


def _ssd128(seed):
  r = _rng(seed)
  x, b, c = (jnp.asarray(r.standard_normal((2, 256, d)) * 0.3, K.BF16) for d in (64, 128, 128))
  return x, jnp.asarray(-r.random((2, 256)) * 0.05, K.F32), b, c


CASES.update({
  "la_pipelined": (lambda q, k, v, interpret=False: K.la_pipelined(q, k, v, interpret=interpret, WS=False),
                   lambda s: qkv(s), lambda q, k, v: K.la_ref(q, k, v)[0], 3e-2),
  "la_warp_specialized": (lambda q, k, v, interpret=False: K.la_pipelined(q, k, v, interpret=interpret, WS=True),
                          lambda s: qkv(s), lambda q, k, v: K.la_ref(q, k, v)[0], 3e-2),
  "wy_inverse_runtime": (lambda k, b, interpret=False: K.wy_inverse(k, b, interpret=interpret, UNROLL=False), lambda s: (_normed_keys(*qkv(s, t=64, dtype=K.F16))[1], _beta(s, 2, 64)),
                         K.wy_inverse_ref, 2e-2),
  "gdn_decode": (K.gdn_decode, _gdn_decode, _gdn_decode_ref, 1e-2),
  "conv1d_update": (K.conv1d_update, _conv_update, _conv_update_ref, 1e-5),
  "rev_cumsum": (K.rev_cumsum, lambda s: tuple(jnp.asarray(_rng(s + j).standard_normal((2, 64, 64)), K.F32) for j in (0, 1)),
                 lambda a, b: 2 * np.cumsum((np.asarray(a) - np.asarray(b))[:, ::-1], axis=1)[:, ::-1], 1e-5),
  "ema_scan_buffered": (K.ema_scan_buffered, lambda s: (jnp.asarray(_rng(s).standard_normal((256, 256)), K.BF16),
                                                        jnp.asarray(_rng(s + 1).random(256), K.F32)), _ema_ref, 1e-4),
  "la_varlen_tma": (K.la_varlen_tma, _packed_flat,
                    lambda q, k, v, cu: K.varlen_ref(q[:, None], k[:, None], v[:, None], cu)[0][:, 0], 3e-2),
  "ssd_fused128": (K.ssd_fused128, _ssd128, K.ssd_ref, 3e-2),
  "la_nk_atomic": (K.la_nk_atomic, lambda s: qkv(s, t=200, dk=128), lambda q, k, v: K.la_ref(q, k, v)[0], 3e-2),
  "gla_einsum": (K.gla_einsum, lambda s: qkv(s) + (jnp.asarray(-_rng(s + 5).random((2, 256)) * 0.1, K.F32),),
                 K.simple_gla_ref, 3e-2),
})


CASES.update({
  "la_f32": (K.la_f32, lambda s: qkv(s, dtype=K.F32), lambda q, k, v: K.la_ref(q, k, v)[0], 1e-2),
})


def _bthk(seed, b=2, t=200, h=3):
  return tuple(jnp.asarray(_rng(seed + j).standard_normal((b, t, h, 64)) * 0.3, K.BF16) for j in range(3))


def _bthk_ref(q, k, v):
  hm = lambda x, b: np.swapaxes(np.asarray(x[b], np.float32), 0, 1)       # (T, H, D) -> (H, T, D)
  return np.stack([np.swapaxes(K.la_ref(hm(q, b), hm(k, b), hm(v, b))[0], 0, 1) for b in range(q.shape[0])])


def _decayed_states(k, v, s0):
  kf, vf = (np.asarray(t, np.float32) for t in (k, v))
  s = np.asarray(s0).copy()
  for c in range(0, k.shape[1], 64):
    s = 0.9 * s + np.einsum("htk,htv->hkv", kf[:, c:c + 64], vf[:, c:c + 64])
  return s


CASES.update({
  "la_bthk": (K.la_bthk, _bthk, _bthk_ref, 3e-2),
  "state_tma": (K.state_tma, lambda s: qkv(s)[1:] + (jnp.asarray(_rng(s + 3).standard_normal((2, 64, 64)), K.F32),),
                _decayed_states, 1e-3),
})


def _ssd_groups(seed, h=4, groups=2):
  r = _rng(seed)
  x = jnp.asarray(r.standard_normal((h, 256, 64)) * 0.3, K.BF16)
  b, c = (jnp.asarray(r.standard_normal((groups, 256, 128)) * 0.3, K.BF16) for _ in range(2))
  return x, jnp.asarray(-r.random((h, 256)) * 0.05, K.F32), b, c


def _ssd_groups_ref(x, a, b, c):
  rep = lambda t: np.repeat(np.asarray(t, np.float32), x.shape[0] // b.shape[0], axis=0)
  return K.la_ref(rep(c), rep(b), x, decay=np.exp(np.asarray(a)))[0]


CASES.update({
  "la_recurrent_tma": (K.la_recurrent_tma, lambda s: qkv(s, t=24), lambda q, k, v: K.la_ref(q, k, v)[0], 1e-4),
  "delta_fused_recurrent_ptr": (K.delta_fused_recurrent_ptr, lambda s: qkv(s, t=24) + (_beta(s, 2, 24),),
                                lambda q, k, v, b: K.delta_ref(q, k, v, b)[0], 1e-4),
  "gated_delta_recurrent_d128": (K.gated_delta_recurrent,
                                 lambda s: qkv(s, t=20, dk=128, dv=128) + (
                                     _beta(s, 2, 20), jnp.asarray(-_rng(s + 1).random((2, 20)) * 0.1, K.F32),
                                     jnp.zeros((2, 128, 128), K.F32)),
                                 lambda q, k, v, b, g, s0: K.delta_ref(q, k, v, b, g=g, s0=s0), 1e-4),
  "ema_lax_scan": (K.ema_lax_scan, lambda s: (jnp.asarray(_rng(s).standard_normal((128, 256)), K.BF16),
                                              jnp.asarray(_rng(s + 1).random(256), K.F32)), _ema_ref, 1e-4),
  "ssd_fused128_groups": (K.ssd_fused128, _ssd_groups, _ssd_groups_ref, 3e-2),
})


def _retention_table(seed, b=2, h=3, t=20):
  qs = tuple(jnp.asarray(_rng(seed + j).standard_normal((b, h, t, 64)) * 0.3, K.BF16) for j in range(3))
  return qs + (jnp.asarray(np.log(K.retnet_gammas(h)), K.F32),)


def _retention_table_ref(q, k, v, lg):
  decay = np.broadcast_to(np.exp(np.asarray(lg))[:, None], q.shape[1:3])
  return np.stack([K.la_ref(q[b], k[b], v[b], decay=decay)[0] for b in range(q.shape[0])])


CASES.update({
  "retention_table": (K.retention_table, _retention_table, _retention_table_ref, 1e-4),
})


def _fla_gla(seed, b=2, t=200, h=2):
  r = _rng(seed)
  q, k, v = (jnp.asarray(r.standard_normal((b, t, h, 64)) * 0.3, K.BF16) for _ in range(3))
  graw = -r.random((b, t, h)).astype(np.float32) * 0.1
  for c in range(0, t, 64):                         # chunk-local cumsums, as fla's chunk_local_cumsum gives them
    graw[:, c:c + 64] = np.cumsum(graw[:, c:c + 64], axis=1)
  return q, k, v, jnp.asarray(graw)


def _fla_gla_ref(q, k, v, g):
  g = np.asarray(g).copy()
  for c in range(0, g.shape[1], 64):                # back to per-token log-gates
    g[:, c + 1:c + 64] = np.diff(g[:, c:c + 64], axis=1)
  hm = lambda x, b: np.swapaxes(np.asarray(x[b], np.float32), 0, 1)
  return np.stack([np.swapaxes(K.la_ref(hm(q, b), hm(k, b), hm(v, b), decay=np.exp(hm(g, b)))[0], 0, 1)
                   for b in range(q.shape[0])])


CASES.update({
  "fla_simple_gla": (K.fla_simple_gla, _fla_gla, _fla_gla_ref, 3e-2),
})


def _delta_varlen(seed):
  q, k, v = _packed(seed, h=1, dtype=K.F16)
  k = k.astype(K.F32)
  k = (k / jnp.linalg.norm(k, axis=-1, keepdims=True)).astype(K.F16)
  return q[:, 0], k[:, 0], v[:, 0], jnp.asarray(_rng(seed + 7).random(int(CU[-1])) * 0.5 + 0.2, K.F32), jnp.asarray(CU)


def _delta_varlen_ref(q, k, v, beta, cu):
  o, fin = np.zeros(v.shape, np.float32), np.zeros((len(cu) - 1, 64, 64), np.float32)
  for s in range(len(cu) - 1):
    sl = slice(int(cu[s]), int(cu[s + 1]))
    oo, ff = K.delta_ref(q[None, sl], k[None, sl], v[None, sl], beta[None, sl], normalize=False)
    o[sl], fin[s] = oo[0], ff[0]
  return o, fin


CASES.update({
  "delta_chunk_varlen": (K.delta_chunk_varlen, _delta_varlen, _delta_varlen_ref, 3e-2),
})
