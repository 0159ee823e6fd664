"""Row-wise kernels on the H200: softmax, layer norm forward and backward, RMS norm.

    python benchmarks/rowwise.py [--quick] [--op softmax] [--plot docs/rowwise.png]

mgpu_dsl (examples/softmax.py, layernorm.py, rmsnorm.py) against XLA (jax.nn.softmax and
jnp layer/RMS norms under jax.jit) and Pallas's GPU ops where they run. For each shape and
dtype: kernel time (jax's Mosaic GPU profiler, CUPTI, all kernels of one call, median of 20)
and wall time (median of timed loops), GB/s counting bytes read plus written, the ratio to
the `a * 2` copy bandwidth of the same input measured in the same run, and the ratio to the
best peer. Every contender's result is checked against the jnp reference first. A timing is
never an assertion.
"""
import argparse
import os
import statistics
import sys

import jax
import jax.numpy as jnp
import numpy as np

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
from common import median_time, table  # noqa: E402
import layernorm as LN  # noqa: E402
import rmsnorm as RN  # noqa: E402
import softmax as SM  # noqa: E402

SHAPES = [(4096, 4096), (8192, 8192), (32768, 1024), (1024, 32768)]
F32 = jnp.float32


def kernel_time(f, *args):
  """Median GPU seconds of one call of f (every kernel it launches), from CUPTI."""
  from jax.experimental.mosaic.gpu import profiler
  _, ms = profiler.measure(f, iterations=20)(*args)
  if ms is None:
    return float("nan")
  return statistics.median(ms if isinstance(ms, (list, tuple)) else [ms]) / 1e3


def _peers_softmax():
  out = {"XLA": lambda x: jax.nn.softmax(x.astype(F32), axis=-1).astype(x.dtype)}
  try:
    from jax.experimental.pallas.ops.gpu import softmax as pl
    out["Pallas"] = lambda x: pl.softmax(x, axis=-1)
  except Exception:  # noqa: BLE001  (a peer that does not import is reported as absent)
    pass
  return out


def _peers_layernorm():
  out = {"XLA": LN.reference}
  try:
    from jax.experimental.pallas.ops.gpu import layer_norm as pl
    # Pallas's layer_norm vmaps twice over leading axes: (batch, rows, d), so one batch of rows.
    out["Pallas"] = lambda x, w, b: pl.layer_norm(x[None], w, b)[0]
  except Exception:  # noqa: BLE001
    pass
  return out


def _peers_rmsnorm():
  out = {"XLA": RN.reference}
  try:
    from jax.experimental.pallas.ops.gpu import rms_norm as pl
    out["Pallas"] = lambda x, w: pl.rms_norm(x[None], w, jnp.zeros_like(w), eps=1e-6)[0]   # as layer_norm
  except Exception:  # noqa: BLE001
    pass
  return out


def _ln_grad(fn):
  def f(x, w, b, dy):
    _, vjp = jax.vjp(fn, x, w, b)
    return vjp(dy)
  return f


def measure(name, fn, args, ref, nbytes, tol):
  """(GB/s by kernel time, GB/s by wall time) of a checked contender, or an error string."""
  try:
    f = jax.jit(fn)
    got = jax.tree.leaves(f(*args))
    want = jax.tree.leaves(ref)
    for g, w in zip(got, want):
      g, w = np.asarray(g, np.float32), np.asarray(w, np.float32)
      err = float(np.abs(g - w).max() / (np.abs(w).max() + 1e-12))
      if not err < tol:
        return f"wrong (rel err {err:.1e})"
    kt, wt = kernel_time(f, *args), median_time(f, *args)
    return nbytes / kt / 1e9, nbytes / wt / 1e9
  except Exception as e:  # noqa: BLE001  (a contender that cannot run is reported, not fatal)
    return f"{type(e).__name__}: {str(e).splitlines()[0][:60]}"


def long_layernorm_variants(variants):
  """Layer norm of 1024 x 32768 float32 rows (the L2-bound shape of issue #8): the `x * 2` copy,
  the example's default and each (op, tag, fn(x, w, b)) of `variants`, checked against jnp and
  timed; GB/s by kernel time / wall time and the ratio to the copy, as a table."""
  shape = (1024, 32768)
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; GB/s by kernel time / by wall time")
  k = jax.random.split(jax.random.key(0), 3)
  x = jax.random.normal(k[0], shape, F32)
  w, b = (jax.random.normal(k[i], shape[1:], F32) for i in (1, 2))
  io = 2 * x.size * 4
  copy = measure("copy", lambda x: x * 2, [x], x * 2, io, 1e-6)
  ref = jax.jit(LN.reference)(x, w, b)
  rows = [("copy", "", f"{copy[0]:.0f} / {copy[1]:.0f}", "1.00")]
  for op, tag, fn in [("layer norm", "default", lambda x, w, b: LN.layernorm(x, w, b)), *variants]:
    r = measure(op, fn, [x, w, b], ref, io, 1e-4)
    ok = not isinstance(r, str)
    rows.append((op, tag, f"{r[0]:.0f} / {r[1]:.0f}" if ok else r, f"{r[0] / copy[0]:.2f}" if ok else "-"))
    print(rows[-1], flush=True)
  print(table(("kernel", "float32 1024x32768", "GB/s kernel / wall", "of copy"), rows))


def fmt(r):
  return r if isinstance(r, str) else f"{r[0]:.0f} / {r[1]:.0f}"


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--quick", action="store_true", help="one shape per op")
  p.add_argument("--plot", help="write a bar chart of kernel-time GB/s to this PNG")
  p.add_argument("--op", action="append",
                 help="only these ops (softmax, softmax smem, layernorm fwd, layernorm smem, layernorm bwd, rmsnorm)")
  a = p.parse_args()
  shapes = SHAPES[:1] if a.quick else SHAPES
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; GB/s by kernel time / by wall time")
  rows, plot = [], []
  for dtype in (F32, jnp.bfloat16):
    tol = 1e-4 if dtype == F32 else 2e-2
    for shape in shapes:
      k = jax.random.split(jax.random.key(0), 4)
      x = jax.random.normal(k[0], shape, F32).astype(dtype)
      w = jax.random.normal(k[1], shape[1:], F32).astype(dtype)
      b = jax.random.normal(k[2], shape[1:], F32).astype(dtype)
      dy = jax.random.normal(k[3], shape, F32).astype(dtype)
      io = x.size * x.dtype.itemsize
      copy = measure("copy", lambda x: x * 2, [x], x * 2, 2 * io, 1e-6)
      cases = [
          ("softmax", SM.softmax, _peers_softmax(), [x], 2 * io),
          # Rows held in SMEM at every width (the default takes them only past registers' reach).
          ("softmax smem", SM.softmax_smem, _peers_softmax(), [x], 2 * io),
          ("layernorm fwd", lambda x, w, b: LN.layernorm(x, w, b), _peers_layernorm(), [x, w, b], 2 * io),
          # Rows held in SMEM at every width (the default takes them only past 16384).
          ("layernorm smem", lambda x, w, b: LN.layernorm_smem(x, w, b)[0], _peers_layernorm(), [x, w, b], 2 * io),
          ("layernorm bwd", _ln_grad(LN.layernorm), {"XLA": _ln_grad(LN.reference)}, [x, w, b, dy], 3 * io),
          ("rmsnorm", RN.rmsnorm, _peers_rmsnorm(), [x, w], 2 * io),
      ]
      for op, ours, peers, args, nbytes in cases:
        if a.op and op not in a.op:
          continue
        ref_fn = peers["XLA"]
        ref = jax.jit(ref_fn)(*args)
        mine = measure("mgpu_dsl", ours, args, ref, nbytes, tol)
        theirs = {n: measure(n, f, args, ref, nbytes, tol) for n, f in peers.items()}
        best = max((r[0] for r in theirs.values() if not isinstance(r, str)), default=float("nan"))
        ok = not isinstance(mine, str)
        cp = copy[0] if not isinstance(copy, str) else float("nan")
        rows.append((op, dtype.__name__, f"{shape[0]}x{shape[1]}", fmt(mine),
                     *(fmt(theirs.get(n, "n/a")) for n in ("XLA", "Pallas")),
                     f"{mine[0] / cp:.2f}" if ok else "-", f"{mine[0] / best:.2f}" if ok else "-"))
        if ok:
          plot.append((f"{op}\n{dtype.__name__} {shape[0]}x{shape[1]}", mine[0], best, cp))
        print(rows[-1], flush=True)
  print(table(("op", "dtype", "shape", "mgpu_dsl", "XLA", "Pallas", "vs copy", "vs best peer"), rows))
  if a.plot and plot:
    try:
      import matplotlib
    except ImportError:
      print(f"no plot: matplotlib is not installed here ({a.plot} not written)")
      return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(max(8, len(plot) * 0.8), 4))
    xs = np.arange(len(plot))
    ax.bar(xs - 0.27, [p[1] for p in plot], 0.27, label="mgpu_dsl")
    ax.bar(xs, [p[2] for p in plot], 0.27, label="best peer")
    ax.bar(xs + 0.27, [p[3] for p in plot], 0.27, label="copy (a * 2)")
    ax.set_xticks(xs, [p[0] for p in plot], fontsize=6, rotation=60)
    ax.set_ylabel("GB/s (kernel time)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(a.plot, dpi=120)
    print(f"wrote {a.plot}")


if __name__ == "__main__":
  main()
