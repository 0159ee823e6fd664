"""Paged decode attention on the H200: mgpu_dsl (examples/paged_attention.py) vs Pallas's
paged_attention (Triton backend) vs a jnp gather + softmax, as a fraction of the copy bandwidth
measured in the same run.

    python benchmarks/paged_attention.py [--quick]

Bandwidth counts the bytes a decode step must read once: each sequence's K and V pages up to
its length (whole pages), q and the output. Inputs are random normal, page tables a shuffled
pool, lengths random in [1, max]. Every contender is checked against the jnp reference before
it is timed. Two figures each, measured in this process: kernel time (CUPTI, jax's Mosaic GPU
profiler, median of 20; all kernels of a call summed, so our split-combining XLA op counts)
and wall time (median of timed loops of jitted calls). A timing is never an assertion.
"""
import argparse
import functools
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from common import kernel_ms, median_time, table  # noqa: E402

# (batch, heads, kv_heads, head_dim, page_size, pages_per_sequence)
SHAPES = [(32, 16, 16, 128, 16, 256), (32, 32, 8, 128, 16, 256), (64, 8, 8, 128, 64, 32)]
OURS = ([dict(tensor_cores=True)]                       # the example's defaults (splits: default_splits)
        + [dict(splits=s, stages=st, tensor_cores=True, q_regs=False) for s in (2, 4, 8) for st in (2, 3, 4)]
        + [dict(splits=s, stages=st, tensor_cores=True, q_regs=True) for s in (2, 4, 8) for st in (2, 3)]
        + [dict(splits=s, stages=2, tensor_cores=True, q_regs=False, tokens=128) for s in (2, 4)]
        + [dict(splits=4, stages=3, tensor_cores=True, q_regs=True, fused_combine=False)]  # XLA combines
        + [dict(splits=s, stages=st, tensor_cores=True, q_regs=True, longest_first=False)  # the grid's order
           for s in (2, 4, 8) for st in (2, 3)]
        + [dict(splits=s, stages=st, tensor_cores=False) for s in (2, 4, 8) for st in (2, 4)])
PALLAS = [dict(block_h=16, pages_per_compute_block=p, k_splits=s) for p in (4, 8) for s in (8, 16)]


def useful_bytes(q, k_pages, lengths):
  kv_heads, _, page, dim = k_pages.shape
  pages = np.ceil(np.asarray(lengths) / page).sum()
  kv = 2 * kv_heads * pages * page * dim * k_pages.dtype.itemsize
  return kv + 2 * q.size * q.dtype.itemsize


def best(candidates, args, want, nbytes):
  """(kernel GB/s, wall GB/s, config) of the fastest correct candidate by kernel time."""
  out, err = None, ""
  for name, fn in candidates:
    try:
      got = np.asarray(fn(*args), np.float32)
      bad = float(np.abs(got - want).max())
      if not bad < 1e-2:
        raise AssertionError(f"max abs error {bad:.3g}")
      ms = kernel_ms(fn, *args)
    except Exception as e:      # a configuration the contender cannot run: report, go on
      err = f"{type(e).__name__}: {str(e).splitlines()[0][:90]}"
      print(f"  skip {name}: {err}", flush=True)
      continue
    print(f"  {name}: {nbytes / ms / 1e6:.0f} GB/s (kernel)", flush=True)
    if out is None or ms < out[0]:
      out = (ms, fn, name)
  if out is None:
    return float("nan"), float("nan"), err
  ms, fn, name = out
  return nbytes / ms / 1e6, nbytes / (median_time(fn, *args) * 1e3) / 1e6, name


def copy_bandwidth():
  """GB/s of XLA's x * 2 over 1 GiB (bytes read + written), kernel time: the better of float16
  and float32 (XLA's float16 copy is the slower of the two on the H200)."""
  best = 0.0
  for dtype in (jnp.float16, jnp.float32):
    x = jax.random.normal(jax.random.key(0), (65536, 16384 // jnp.dtype(dtype).itemsize), dtype)
    f = jax.jit(lambda x: x * 2)
    best = max(best, 2 * x.size * x.dtype.itemsize / kernel_ms(f, x) / 1e6)
  return best


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--quick", action="store_true", help="the first shape, one configuration each")
  p.add_argument("--shape", type=int, action="append", help="only these SHAPES (indices)")
  p.add_argument("--tensor-cores", action="store_true", help="only our tensor-core configurations")
  a = p.parse_args()
  import paged_attention as ex
  print("jax", jax.__version__, jax.devices()[0].device_kind)
  copy = copy_bandwidth()
  print(f"copy (XLA x * 2, 1 GiB, best of f16 and f32): {copy:.0f} GB/s")
  rows = []
  shapes = [SHAPES[i] for i in a.shape] if a.shape else SHAPES[:1] if a.quick else SHAPES
  ours = [c for c in OURS if c["tensor_cores"]] if a.tensor_cores else OURS
  for shape in shapes:
    args = ex.make_inputs(jax.random.key(1), *shape)
    want = np.asarray(ex.reference(*args), np.float32)
    nbytes = useful_bytes(args[0], args[1], args[4])
    tag = "b{} h{} kvh{} d{} page{} max{}".format(*shape[:5], shape[4] * shape[5])
    print(tag, f"({nbytes / 1e6:.0f} MB to read)", flush=True)
    cands = [(str(c), functools.partial(ex.paged_attention, **c)) for c in (ours[:1] if a.quick else ours)
             if shape[5] % c.get("splits", 1) == 0]
    rows.append((tag, "mgpu_dsl", *best(cands, args, want, nbytes)))
    try:
      from jax.experimental.pallas.ops.gpu import paged_attention as pal
      # Pallas's paged_attention does not scale the logits (its reference neither): q comes in
      # scaled by 1/sqrt(head_dim), one small XLA multiply inside the timed function.
      def pallas(c):
        return jax.jit(lambda q, *rest: pal.paged_attention(q * (1.0 / q.shape[-1] ** 0.5), *rest, **c))
      cands = [(str(c), pallas(c)) for c in (PALLAS[:1] if a.quick else PALLAS) if shape[5] % c["k_splits"] == 0]
      rows.append((tag, "Pallas paged_attention (Triton)", *best(cands, args, want, nbytes)))
    except ImportError as e:
      rows.append((tag, "Pallas paged_attention", float("nan"), float("nan"), f"ImportError: {e}"))
    rows.append((tag, "jnp gather + softmax", *best([("jit", jax.jit(ex.reference))], args, want, nbytes)))
  print(f"\npaged decode attention, f16, GB/s of useful bytes (copy bandwidth in this run: {copy:.0f} GB/s)")
  print(table(["shape", "contender", "kernel GB/s", "wall GB/s", "of copy (kernel)", "configuration"],
              [(r[0], r[1], f"{r[2]:.0f}", f"{r[3]:.0f}", f"{r[2] / copy:.2f}", r[4]) for r in rows]))


if __name__ == "__main__":
  main()
