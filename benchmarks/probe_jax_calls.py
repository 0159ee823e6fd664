"""Kernels inside the JAX programs users write, on the GPU against interpret mode (session 41, after XLA's
dynamic-slice fusion was found to break aliased calls on slices): slices, transposes, broadcasts and constants as
operands, calls in scan / fori_loop / cond / while_loop / checkpoint / vmap bodies, results updated into larger
arrays, donated and aliased inputs, chained kernels. Each line says OK or how the GPU's result differs.

    python benchmarks/probe_jax_calls.py
"""

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml


@mg.mgpu_kernel(out_shape=lambda x: x)
def scale2(x, out):
  out[...] = x[...] * 2 + 1


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def rows8(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 8, 8), :][...] = x.at[ml.ds(i * 8, 8), :][...] - 3


@mg.mgpu_kernel(out_shape=lambda c, v: c, input_output_aliases={0: 0})
def put_column(c, v, out):
  out[:, 0] = v[...]


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def add2(x, y, out):
  out[...] = x[...] + y[...]


def cases(interp):
  s2 = lambda x: scale2(x, interpret=interp)
  r8 = lambda x: rows8(x, interpret=interp)
  pc = lambda c, v: put_column(c, v, interpret=interp)
  a2 = lambda x, y: add2(x, y, interpret=interp)
  return {
      "slice operand x[3:67]": (lambda x, v: s2(x[3:67]), None),
      "strided slice x[::2]": (lambda x, v: s2(x[::2]), None),
      "transposed operand x.T": (lambda x, v: s2(x.T), None),
      "broadcast operand": (lambda x, v: s2(jnp.broadcast_to(v[:8], (64, 8))), None),
      "constant operand": (lambda x, v: s2(jnp.ones((64, 8), jnp.float32) * 3), None),
      "reshaped operand": (lambda x, v: s2(x.reshape(8, 128)), None),
      "result into a larger array": (lambda x, v: x.at[8:72].set(s2(x[:64])), None),
      "result added at an offset": (lambda x, v: jax.lax.dynamic_update_slice(x, r8(x[16:80]), (jnp.int32(8), 0)), None),
      "scan of calls over row blocks": (lambda x, v: jax.lax.scan(lambda c, xb: (c + 1, r8(xb) + c), 0.0,
                                                                 x.reshape(8, 16, 8))[1].reshape(128, 8), None),
      "fori_loop carrying the call": (lambda x, v: jax.lax.fori_loop(0, 3, lambda i, y: r8(y), x), None),
      "cond with a call in one branch": (lambda x, v: jax.lax.cond(v[0] > -1e9, lambda y: s2(y), lambda y: y, x), None),
      "while_loop of calls": (lambda x, v: jax.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, r8(c[1])),
                                                             (0, x))[1], None),
      "checkpointed call": (lambda x, v: jax.checkpoint(lambda y: s2(y) * 2)(x), None),
      "vmap over a batch of slices": (lambda x, v: jax.vmap(s2)(x.reshape(4, 32, 8)[:, 1:17]), None),
      "aliased call on a donated-like temp": (lambda x, v: pc(x * 1.0, v), None),
      "aliased call, input used again": (lambda x, v: pc(x, v) + x, None),
      "aliased call in a scan over slices": (lambda x, v: jax.lax.scan(lambda c, cv: (c, pc(*cv)), 0,
                                                                      (x.reshape(4, 32, 8), v.reshape(4, 32)))[1], None),
      "chained kernels": (lambda x, v: a2(s2(x), r8(x)), None),
      "same operand twice": (lambda x, v: a2(x, x), None),
      "operand sliced twice, overlapping": (lambda x, v: a2(x[:64], x[32:96]), None),
  }


def main():
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.standard_normal((128, 8)).astype(np.float32))
  v = jnp.asarray(np.arange(128, dtype=np.float32))
  ref, gpu = cases(True), cases(False)
  for name in gpu:
    try:
      want = np.asarray(jax.jit(ref[name][0])(x, v))
    except Exception as e:
      print(f"{name}: interpret mode raised {type(e).__name__}: {str(e)[:200]}", flush=True)
      continue
    try:
      got = np.asarray(jax.jit(gpu[name][0])(x, v))
      bad = np.argwhere(~np.isclose(got, want, rtol=1e-6, atol=1e-6))
      print(f"{name}: " + ("OK" if not len(bad) else f"WRONG at {len(bad)} of {want.size} (first "
            f"{bad[:3].tolist()}: got {got[tuple(bad[0])]} want {want[tuple(bad[0])]})"), flush=True)
    except Exception as e:
      print(f"{name}: {type(e).__name__}: {str(e)[:300]}", flush=True)


if __name__ == "__main__":
  main()
