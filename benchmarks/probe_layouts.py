"""GPU differential sweep of register layouts: many small kernels (benchmarks/layout_kernels.py) over
op x shape x dtype, each run for real on the GPU and in interpret mode on the same inputs, compared
exactly (integers) or within a tolerance (floats). Interpret mode does not model Mosaic's register
layouts (design note 61: a (1024, 2) int32 tile's columns were wrong on the H200 only), so this is
the check of that class. Prints one line per mismatch or error and a summary.

  python benchmarks/probe_layouts.py                 # on the H200: GPU vs interpret, every case
  python benchmarks/probe_layouts.py --quick         # a subset (about a quarter)
  python benchmarks/probe_layouts.py --filter cast   # cases whose name holds a substring (or a regex)
  python benchmarks/probe_layouts.py --interpret-only --quick   # no GPU: interpret vs a jnp reference,
                                                     # plus a CUDA export of each kernel (builds and
                                                     # verifies the Mosaic GPU module)
Workers are processes (--jobs, default the cores less one); a case running past --timeout seconds
is killed with its worker and reported. Exit status 1 when any case failed.
"""
from __future__ import annotations

import argparse
import importlib
import multiprocessing as mp
import os
import queue
import re
import sys
import time
import traceback
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
F32, F16, BF16, I8, U8, I16, I32, U32, E4, E5 = (
    "float32", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "uint32",
    "float8_e4m3fn", "float8_e5m2")
DTYPES = (F32, F16, BF16, I8, U8, I16, I32, U32, E4, E5)
WIDTHS = (1, 2, 3, 8, 24, 48, 100, 136, 200)
RTOL = {F32: 1e-5, F16: 2e-3, BF16: 1.6e-2, E4: 0.13, E5: 0.26}


class Case:
  def __init__(self, name, kernel, inputs, kw, quick):
    self.name, self.kernel, self.inputs, self.kw, self.quick = name, kernel, inputs, kw, quick


def build_cases():
  """Every case: (name, kernel name, inputs as (shape, dtype, kind), constexprs). `kind`: "v" values,
  "ids:N" indices in [0, N)."""
  cases, seen = [], set()

  def add(kernel, inputs, quick=False, **kw):
    inputs = tuple((tuple(s), d, *k) for s, d, *k in inputs)
    desc = ",".join("x".join(map(str, s)) + ":" + d for s, d, *_ in inputs)
    extra = ",".join(f"{k}={getattr(v, '__name__', v)}" for k, v in sorted(kw.items()))
    name = f"{kernel}[{desc}{';' + extra if extra else ''}]"
    if name not in seen:
      seen.add(name)
      cases.append(Case(name, kernel, inputs, kw, quick))

  narrow = (1, 2, 3, 24, 100)
  for w in WIDTHS:                                   # loads and stores
    for d in DTYPES:
      add("ident", [((128, w), d)], quick=w in narrow and d in (F32, F16, I8, U32, E4))
    for d in (F32, BF16, I16, I32, U32):
      add("affine", [((128, w), d)], quick=w in (2, 3, 100) and d in (F32, I16))
      add("affine", [((256, w), d)])
    for d in (F32, I8, BF16):
      add("ident", [((128 * w,), d)], quick=w == 3 and d == I8)
      add("ident", [((2, 64, w), d)], quick=w in (2, 3) and d == F32)
      add("tail_rows", [((300, w), d)], R=128, quick=w in (1, 3, 24) and d != BF16)
      add("tail_rows", [((600, w), d)], R=256, wgs=2, quick=w == 3 and d == F32)
  for n in (1000, 300, 4100):
    for d in (F32, F16, I8):
      for b in (256, 1024):
        add("tail1d", [((n,), d)], B=b, quick=n == 300 and b == 256)
  for m, c in ((3, 8), (24, 32), (100, 128), (136, 256), (200, 256)):
    for d in (F32, BF16, I32, I8):
      add("tail_cols", [((128, m), d)], C=c, quick=m in (3, 100) and d in (F32, I8))

  ops = ("sum", "max", "min", "mean", "argmax", "argmin")       # reductions
  for k, w in enumerate(WIDTHS):
    for j, d in enumerate((F32, BF16, I32, I8, U8, F16)):
      for axis in (0, 1):
        op = ops[(k + j + axis) % len(ops)]
        add("reduce", [((128, w), d)], op=op, axis=axis, keepdims=bool((k + axis) % 2),
            quick=w in (2, 3, 100) and j < 3)
      add("reduce", [((128, w), d)], op="sum", axis=1, keepdims=False, quick=w == 2 and d == I32)
    add("reduce", [((128, w), F32)], op="sum", axis=None, keepdims=False)
    add("reduce", [((128 * w,), I32)], op=ops[k % len(ops)], axis=0, keepdims=False)
  for w in (8, 24, 48, 100, 136, 200, 1024):                    # row statistics
    for d in (F32, BF16):
      for r in (8, 16, 128):
        if (r * w) % 128 == 0 or r == 128:
          add("row_stats", [((256, w), d)], R=r, quick=r == 128 and w in (24, 100) and d == F32)
      add("row_stats", [((512, w), d)], R=256, wgs=2, quick=w == 1024 and d == F32)
      add("softmax_rows", [((8, w), d)], quick=w == 24 and d == F32)
      add("softmax_rows", [((128, w), d)])
  for w in WIDTHS:
    for d in (F32, F16, I32):
      add("col_stats", [((128, w), d)], quick=w in (2, 3, 100) and d == F32)

  for m in (8, 64, 128, 256):                                  # broadcasting
    for n in WIDTHS:
      for d in (F32, I32, F16):
        add("outer", [((m,), d), ((n,), d)], quick=m == 128 and n in (2, 3, 100) and d == F32)
      add("outer", [((m, 1), F32), ((1, n), F32)], quick=m == 64 and n == 3)
      add("widen", [((m,), I32)], w=n, quick=m == 128 and n in (1, 3, 24))
    add("as_column", [((m * 8,), F32)], quick=m == 8)
    add("as_column", [((m,), I16)])
  for w in WIDTHS:
    for m in (16, 128):
      add("index_grid", [((m, w), F32)], quick=m == 128 and w in (2, 3))
    for d in (F32, I8, U8, BF16, E4, I16):
      add("select", [((128, w), d), ((128, w), d)], quick=w in (2, 100) and d in (I8, F32))
    add("where_rows", [((128, w), F32), ((128,), I32)], quick=w == 3)

  for shape in ((4, 64, 2), (8, 64, 1), (2, 64, 3), (16, 8, 8), (2, 128, 4), (4, 32, 24)):
    for d in (I32, I8, F16):
      add("index_grid3", [(shape, d)], quick=d == I32)
  for w in (1, 2, 3, 4, 8, 24):
    for d in (I32, F16, I8, "bool"):
      add("masked_flatten", [((300, w), d)], R=128, quick=d == I32 and w in (1, 2, 3))
  for shape, a, b in (((128, 8), 1, 4), ((256, 8), 0, 2), ((256, 6), 2, 4), ((128, 16), 3, 6), ((512, 8), 4, 6),
                      ((128, 64), 8, 11), ((1024, 4), 1, 2), ((128, 200), 100, 136)):
    for d in (F32, F16, I8, I32):
      add("col_window", [(shape, d)], a=a, b=b, quick=d in (F32, I8) and a < 3)
  reshapes = {(16, 128): [(1024, 2), (16, 64, 2), (2048,), (128, 16), (512, 4)],
              (128, 24): [(64, 48), (384, 8), (3072,), (128, 2, 12)],
              (128, 2): [(256,), (64, 4)], (1024, 2): [(2048,), (16, 128)], (2048,): [(1024, 2), (128, 16)]}
  for src, dsts in reshapes.items():
    for dst in dsts:
      for d in (I32, F16, I8, F32):
        add("reshape", [(src, d)], shape=dst, quick=d == I32)
  for shape in [(128, w) for w in (8, 24, 48, 136)] + [(64, 64), (32, 128), (1024, 2), (16, 64)]:
    for d in (F32, F16, I8, I16, U32):
      add("transpose", [(shape, d)], quick=d in (F32, I8) and shape in ((128, 24), (1024, 2)))
  for w in WIDTHS[1:]:
    for d in (I32, F16, I8, F32):
      add("columns", [((128, w), d)], j=1, quick=w in (2, 3, 24) and d in (I32, I8))
      add("columns", [((1024 if w <= 2 else 128, w), d)], j=0)
      add("row_of", [((128, w), d)], j=5, quick=w == 100 and d == F32)
      if w >= 3:
        add("col_slice", [((128, w), d)], a=1, b=w - 1, quick=w == 24 and d == I32)
  for w in (1, 2, 3, 8, 64):
    for d in (I32, F16, I8):
      add("interleave", [((128, w), d)], quick=w in (2, 3) and d == I32)

  for a in DTYPES:                                             # casts
    for b in DTYPES:
      add("cast", [((128, 24), a)], to=b, quick=a in (F32, I32, E4) or b in (F16, U8))
      if a in (I32, F32, I8) or b in (I8, F16):
        add("cast", [((1024, 2), a)], to=b)
        add("cast", [((128, 3), a)], to=b)

  for w in (2, 8, 32, 128, 256):                               # sorts and scans
    for d in (F32, I32, BF16, I8, U32):
      add("sort", [((128 if w <= 32 else 16, w), d)], descending=w % 3 == 2,
          quick=w in (2, 32) and d in (F32, I8))
  for n in (256, 1024):
    add("sort", [((n,), F32)], descending=False, quick=n == 256)
  for w in (1, 2, 3, 8, 24, 100):
    for d in (F32, I32, F16, I8):
      for axis in (0, 1):
        add("scan", [((128, w), d)], axis=axis, quick=w in (2, 3) and d in (F32, I8))
  for d_ in (8, 32, 128, 200):                                 # gathers
    for d in (F32, BF16, I8):
      add("gather_rows", [((500, d_), d), ((128,), I32, "ids:500")], quick=d_ in (32, 200) and d == F32)
  add("gather_rows", [((1000,), F32), ((128,), I32, "ids:1000")], quick=True)
  for w in (2, 3, 8, 24, 100):
    add("gather_grid", [((50, w), F32), ((128, w), I32, "ids:50")], quick=w in (3, 100))
  for w in (1, 2, 3, 8, 24):
    for d in (F32, F16, I8):
      add("gather_flat", [((128 * 32,), d), ((128, w), I32, "ids:32")], quick=w in (2, 3) and d == F32)
  for k in (16, 64):                                           # tensor-core results
    for n in (8, 16, 24, 64, 128, 256):
      for d in (F16, BF16):
        add("dot_stats", [((64, k), d), ((k, n), d), ((n,), F32)], quick=k == 64 and n in (8, 24) and d == F16)
  return cases


# ---------------------------------------------------------------------------- one case
def make_inputs(case):
  import jax.numpy as jnp
  rng = np.random.default_rng(zlib.crc32(case.name.encode()))
  out = []
  for shape, d, *kind in case.inputs:
    if kind and kind[0].startswith("ids:"):
      a = rng.integers(0, int(kind[0][4:]), shape)
    elif d == "bool":
      a = rng.random(shape) < 0.5
    elif d.startswith("float"):
      a = np.round(rng.standard_normal(shape) * 8, 2)
    elif d.startswith("uint"):
      a = rng.integers(0, 120, shape)
    else:
      a = rng.integers(-60, 60, shape)
    out.append(jnp.asarray(a).astype(d))
  return out


def reference(case, xs):
  """jnp's result, for the interpret-only sweep."""
  import jax.numpy as jnp
  import layout_kernels as K
  kw = case.kw
  name = case.kernel
  x = xs[0]
  f32 = lambda a: a.astype(jnp.float32)
  if name in ("ident", "tail1d", "tail_rows", "tail_cols"):
    return [x]
  if name == "affine":
    return [x * 3 + 1]
  if name == "reduce":
    return [K._reduce(x, **kw)]
  if name == "row_stats":
    v = f32(x)
    m = v.sum(1) / v.shape[1]
    s = 1 / jnp.sqrt(((v - m[:, None]) ** 2).sum(1) / v.shape[1] + 1e-5)
    return [(v - m[:, None]) * s[:, None], m, s]
  if name == "col_stats":
    v = f32(x)
    return [v.sum(0), v - v.max(0, keepdims=True)]
  if name == "softmax_rows":
    import jax
    return [jax.nn.softmax(f32(x), axis=-1)]
  if name == "outer":
    return [(x[:, None] if x.ndim == 1 else x) * 2 + (xs[1][None, :] if x.ndim == 1 else xs[1])]
  if name == "widen":
    return [jnp.broadcast_to(x[:, None], (x.shape[0], kw["w"]))]
  if name == "as_column":
    return [x[:, None]]
  if name == "index_grid":
    m, n = x.shape
    g = jnp.arange(m)[:, None] * n + jnp.arange(n)[None, :]
    return [jnp.where(x > 0, g, -g)]
  if name == "select":
    return [jnp.where(x > xs[1], x, xs[1])]
  if name == "where_rows":
    return [jnp.where(xs[1][:, None] > 0, x, 0)]
  if name == "index_grid3":
    a, b, c = x.shape
    g = np.arange(a)[:, None, None] * 10000 + np.arange(b)[None, :, None] * 100 + np.arange(c)
    return [g + x.astype(jnp.int32)]
  if name == "masked_flatten":
    return [x.reshape(-1)]
  if name == "col_window":
    a, b = kw["a"], kw["b"]
    return [x[:, a:b], x.at[:, a:b].set(x[:, :b - a])]
  if name == "reshape":
    return [x.reshape(kw["shape"])]
  if name == "transpose":
    return [x.T]
  if name == "columns":
    return [jnp.stack([x[:, kw["j"]], x[:, -1]])]
  if name == "row_of":
    return [x[kw["j"]]]
  if name == "col_slice":
    return [x[:, kw["a"]:kw["b"]]]
  if name == "interleave":
    return [jnp.repeat(x, 2, axis=1)]
  if name == "cast":
    return [x.astype(kw["to"])]
  if name == "sort":
    s = jnp.sort(x, axis=-1, descending=kw["descending"])
    return [s, jnp.argsort(x, axis=-1, descending=kw["descending"], stable=True)]
  if name == "scan":
    return [K._cumsum(x, axis=kw["axis"]), jnp.asarray(np.maximum.accumulate(np.asarray(x), axis=kw["axis"]))]
  if name == "gather_rows":
    return [x[xs[1]]]
  if name == "gather_grid":
    return [x[xs[1], jnp.arange(xs[1].shape[1])[None, :]]]
  if name == "gather_flat":
    return [x[jnp.arange(xs[1].shape[0])[:, None] * 32 + xs[1]]]
  if name == "dot_stats":
    acc = jnp.dot(f32(x), f32(xs[1]))
    return [acc.max(1), acc.sum(0), acc - acc.max(1, keepdims=True) + xs[2][None, :]]
  raise KeyError(name)


def compare(got, want, what):
  """None when equal (within the dtype's tolerance), else a short description of the difference."""
  got, want = list(got), list(want)
  if len(got) != len(want):
    return f"{what}: {len(got)} outputs, expected {len(want)}"
  for k, (g, w) in enumerate(zip(got, want)):
    dt = str(w.dtype)
    g, w = np.asarray(g), np.asarray(w)
    if g.shape != w.shape:
      return f"{what}: output {k} shape {g.shape}, expected {w.shape}"
    if dt in RTOL:
      g64, w64 = g.astype(np.float64), w.astype(np.float64)
      scale = max(1.0, float(np.nanmax(np.abs(w64))) if w64.size else 1.0)
      bad = ~(np.isclose(g64, w64, rtol=RTOL[dt], atol=RTOL[dt] * scale) | (np.isnan(g64) & np.isnan(w64)))
    else:
      bad = g != w
    if bad.any():
      i = tuple(int(t[0]) for t in np.nonzero(bad))
      return f"{what}: output {k}: {int(bad.sum())} of {bad.size} differ, first at {i}: {g[i]} vs {w[i]}"
  return None


def run_case(case, interpret_only):
  """('ok' | 'mismatch' | 'reject' | 'error', text)."""
  import jax
  import mgpu_dsl as mg
  import layout_kernels as K
  kernel = getattr(K, case.kernel)
  xs = make_inputs(case)
  try:
    got = kernel(*xs, interpret=True, **case.kw)
  except mg.KernelError as e:
    kind = "error" if e.code == "MG900" or isinstance(e, mg.InterpretError) else "reject"
    return kind, f"{type(e).__name__} [{e.code}]: {e.message[:200]}"
  got = list(jax.tree.leaves(got))
  if interpret_only:
    bad = compare(got, jax.tree.leaves(reference(case, xs)), "interpret vs jnp")
    if bad:
      return "mismatch", bad
    specs = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in xs]
    jax.export.export(jax.jit(lambda *a: kernel(*a, **case.kw)), platforms=["cuda"])(*specs)
    return "ok", ""
  gpu = list(jax.tree.leaves(kernel(*xs, **case.kw)))
  bad = compare(gpu, got, "GPU vs interpret")
  return ("mismatch", bad) if bad else ("ok", "")


def worker(tasks, results, interpret_only):
  sys.path.insert(0, HERE)
  importlib.import_module("layout_kernels")   # jax and mgpu_dsl, before the first case's clock starts
  by_name = {c.name: c for c in build_cases()}
  while True:
    name = tasks.get()
    if name is None:
      return
    results.put(("start", name, os.getpid(), time.time()))
    try:
      kind, text = run_case(by_name[name], interpret_only)
    except Exception as e:  # noqa: BLE001 - every raw failure is a finding
      tb = traceback.extract_tb(e.__traceback__)
      where = f" ({os.path.basename(tb[-1].filename)}:{tb[-1].lineno})" if tb else ""
      kind, text = "error", f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}{where}"
    results.put(("done", name, kind, text))


def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--quick", action="store_true", help="a subset of the cases")
  ap.add_argument("--filter", default="", help="only cases whose name matches this regex")
  ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
  ap.add_argument("--timeout", type=float, default=90.0, help="seconds a case may take")
  ap.add_argument("--interpret-only", action="store_true",
                  help="no GPU: interpret mode vs jnp, and a CUDA export of each case")
  ap.add_argument("--list", action="store_true", help="print the selected cases' names and stop")
  ap.add_argument("--show-rejects", action="store_true", help="print a line per rejected (KernelError) case too")
  args = ap.parse_args()
  sel = [c for c in build_cases() if (c.quick or not args.quick) and re.search(args.filter, c.name)]
  if args.list:
    print("\n".join(c.name for c in sel))
    return 0
  os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")   # workers share the one GPU
  os.environ.setdefault("MGPU_DSL_CACHE_DIR", "off")
  if args.interpret_only:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
  ctx = mp.get_context("spawn")
  tasks, results = ctx.Queue(), ctx.Queue()
  for c in sel:
    tasks.put(c.name)
  procs, running, counts, t0 = {}, {}, {}, time.time()

  def spawn():
    p = ctx.Process(target=worker, args=(tasks, results, args.interpret_only), daemon=True)
    p.start()
    procs[p.pid] = p

  def record(name, kind, text):
    counts[kind] = counts.get(kind, 0) + 1
    if kind != "ok" and (kind != "reject" or args.show_rejects):
      print(f"{kind.upper():8} {name}: {text}", flush=True)

  for _ in range(min(args.jobs, len(sel))):
    spawn()
  done = 0
  while done < len(sel):
    try:
      msg = results.get(timeout=1.0)
    except queue.Empty:
      msg = None
    if msg and msg[0] == "start":
      running[msg[2]] = (msg[1], msg[3])
    elif msg:
      done += 1
      record(msg[1], msg[2], msg[3])
      running = {pid: v for pid, v in running.items() if v[0] != msg[1]}
    now = time.time()
    for pid, (name, since) in list(running.items()):
      if now - since > args.timeout:
        procs.pop(pid).kill()
        del running[pid]
        done += 1
        record(name, "timeout", f"killed after {args.timeout:.0f} s")
        spawn()
    for pid, p in list(procs.items()):            # a worker that died in a case (a crash)
      if not p.is_alive() and pid in running and results.empty():
        name, _ = running.pop(pid)
        procs.pop(pid)
        done += 1
        record(name, "error", f"worker died (exit code {p.exitcode})")
        spawn()
  for _ in procs:
    tasks.put(None)
  summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
  mode = "interpret vs jnp + CUDA export" if args.interpret_only else "GPU vs interpret"
  print(f"{len(sel)} cases ({mode}) in {time.time() - t0:.0f} s: {summary}")
  return int(any(k not in ("ok", "reject") for k in counts))


if __name__ == "__main__":
  sys.exit(main())
