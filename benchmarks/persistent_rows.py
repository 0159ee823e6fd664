"""Long rows on the H200: the persistent row kernels (each CTA walks rows, loading its next row
into the SMEM chunks this row frees) against the one-row-a-CTA kernels they may replace, XLA,
and the `a * 2` copy of the same input.

    python benchmarks/persistent_rows.py [--shape 1024x32768 ...]

GB/s by kernel time (bytes of x read + y written, CUPTI median of 20), every result checked first.
"""
import argparse
import os
import sys

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import layernorm as LN  # noqa: E402
import softmax as SM  # noqa: E402
import mgpu_dsl as mg  # noqa: E402

F32 = jnp.float32


def rms_reference(x, w, b, eps=1e-5):
  xf = x.astype(F32)
  return (xf * jax.lax.rsqrt((xf * xf).mean(-1, keepdims=True) + eps) * w.astype(F32)).astype(x.dtype)


def cases():
  out = [("copy (a * 2)", None, lambda x, w, b: x * 2)]
  smax = lambda x, w, b: jax.nn.softmax(x.astype(F32), -1)
  out += [("softmax XLA", smax, lambda x, w, b: smax(x, w, b).astype(x.dtype)),
          ("softmax default", smax, lambda x, w, b: SM.softmax(x))]
  for chunks in (4, 8, 16):
    for programs in (None, 128):
      out.append((f"softmax persistent c{chunks} p{programs or 'sms'}", smax,
                  lambda x, w, b, c=chunks, p=programs: SM.softmax_persistent(x, chunks=c, programs=p)))
  out += [("layernorm XLA", LN.reference, LN.reference),
          ("layernorm default", LN.reference, lambda x, w, b: LN.layernorm(x, w, b))]
  for chunks in (4, 8, 16):
    out.append((f"layernorm persistent c{chunks}", LN.reference,
                lambda x, w, b, c=chunks: LN.layernorm_persistent(x, w, b, chunks=c)[0]))
  out += [("rmsnorm XLA", rms_reference, rms_reference),
          ("rmsnorm SMEM rows (default past 16384)", rms_reference,
           lambda x, w, b: LN.layernorm_smem(x, w, b, center=False)[0])]
  for chunks in (4, 8):
    out.append((f"rmsnorm persistent c{chunks}", rms_reference,
                lambda x, w, b, c=chunks: LN.layernorm_persistent(x, w, b, chunks=c, center=False)[0]))
  return out


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--shape", action="append", default=None)
  ap.add_argument("--dtype", action="append", default=None)
  args = ap.parse_args()
  shapes = [tuple(int(v) for v in s.split("x")) for s in (args.shape or ["1024x32768"])]
  dtypes = [jnp.dtype(d) for d in (args.dtype or ["float32", "bfloat16"])]
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; GB/s by kernel time (ratio to copy)")
  for shape in shapes:
    for dt in dtypes:
      k = jax.random.split(jax.random.key(0), 3)
      x = (jax.random.normal(k[0], shape, F32) * 3 + 1).astype(dt)
      w = jax.random.normal(k[1], shape[1:], F32).astype(dt)
      b = jax.random.normal(k[2], shape[1:], F32).astype(dt)
      nbytes = 2 * x.size * x.dtype.itemsize
      copy = None
      for name, ref, fn in cases():
        try:
          f = jax.jit(fn)
          if ref is not None:
            err = float(jnp.abs(f(x, w, b).astype(F32) - ref(x, w, b).astype(F32)).max())
            assert err < (2e-3 if dt == F32 else 0.1), f"max abs error {err}"
          gbs = nbytes / mg.bench(f, x, w, b) / 1e9
          copy = copy or gbs
          print(f"{'x'.join(map(str, shape)):11s} {dt.name:9s} {name:34s} {gbs:6.0f} GB/s ({gbs / copy:.2f})",
                flush=True)
        except Exception as e:  # noqa: BLE001  (a variant that cannot run is reported, not fatal)
          print(f"{'x'.join(map(str, shape)):11s} {dt.name:9s} {name:34s} failed: {type(e).__name__}: "
                f"{str(e)[:160]}", flush=True)


if __name__ == "__main__":
  main()
