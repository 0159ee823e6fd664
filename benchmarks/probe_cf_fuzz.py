"""GPU run of probe 59c's differential fuzzer of control-flow-structured kernels (tests/cf_fuzz.py): run-time and
static loops (zero trips, descending, stepped, nested, bounded by an outer index), while loops of data-dependent
conditions, ifs on GMEM scalars, program ids and reductions, early returns, break / continue / for-else, ml.where
masks, lax.fori_loop / while_loop / cond, helpers whose loops return, tuple carries. Each seed's kernel runs under
`jax.jit` on the GPU and in interpret mode on the same inputs, both compared with the reference its body gives when
run as Python on jnp values (exact: the fuzzer keeps every decision exact). Interpret mode runs the typed IR, not
the Mosaic GPU module, so a lowering of scf.while / scf.if / scf.for that builds but computes otherwise shows only here.

  python benchmarks/probe_cf_fuzz.py --seeds 0:2000 --jobs 14          # on the GPU machine
  python benchmarks/probe_cf_fuzz.py --seeds 0:40 --jobs 1             # no GPU: interpret mode only (+ export)
  python benchmarks/probe_cf_fuzz.py --seeds 0:500 --tag while_data    # only kernels of a feature (Gen.tags)

Classes (one line per seed that is not "ok" or an expected refusal, then a summary): "fault" (a CUDA error: the seed's
kernel faulted; its worker is replaced, as the fault poisons the process's CUDA context), "wrong-gpu" (the GPU's result
is not the reference), "wrong" (interpret mode's is not), "crash" (a raw traceback or an InternalError), "refused"
(a KernelError of a legal plan), "build" (interpret mode right, the GPU's compilation failed), "timeout" (the
seed ran past --timeout: a hang; the worker is killed), "died" (the worker process died: a fault). Workers are
processes sharing the GPU (preallocation off). Exit status 1 when any seed failed.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")


def run_seed(seed, family, on_gpu, export_every):
  """(class, family, tags, detail) of one seed."""
  import jax
  import numpy as np
  import mgpu_dsl as mg
  import diff_fuzz
  import cf_fuzz
  g = cf_fuzz.Gen(seed)
  g.family = "cf"
  tags = " ".join(sorted(g.tags))
  if family and family not in g.tags:
    return "skipped", g.family, tags, ""
  if not on_gpu:     # interpret mode (and a CUDA export of a sample: no GPU here)
    cls, detail = cf_fuzz.run(g, build=seed % export_every == 0)
    return cls, g.family, tags, detail
  cls, detail = cf_fuzz.run(g, build=False)
  if cls != "ok":
    return cls, g.family, tags, detail
  kernel = diff_fuzz.load(g)
  try:
    got = jax.block_until_ready(jax.jit(kernel)(*g.args))
  except mg.KernelError as e:
    return "build", g.family, tags, f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
  except Exception as e:  # noqa: BLE001
    return "build", g.family, tags, diff_fuzz.describe_exception(e)
  got = got if isinstance(got, (tuple, list)) else (got,)
  for k, (a, w) in enumerate(zip(got, g.refs)):
    bad = cf_fuzz.compare(np.asarray(a), w)
    if bad:
      return "wrong-gpu", g.family, tags, f"output {k}: {bad}"
  return "ok", g.family, tags, ""


def worker(tasks, results, family, on_gpu, export_every):
  sys.path.insert(0, TESTS)
  __import__("cf_fuzz")     # (jax and mgpu_dsl, before the first seed's clock starts)
  while True:
    seed = tasks.get()
    if seed is None:
      return
    results.put(("start", seed, os.getpid(), time.time()))
    try:
      out = run_seed(seed, family, on_gpu, export_every)
    except Exception as e:  # noqa: BLE001 - every raw failure is a finding
      out = ("crash", "?", "", f"{type(e).__name__}: {str(e)[:300]}")
    if "CUDA_ERROR" in out[3]:
      # A fault (an illegal instruction, address or a trap) poisons this process's CUDA context: every later seed
      # in it would fail the same way (session 45's first run: 496 "crashes" after a few faults). This seed is the
      # culprit, reported as "fault"; the worker exits and a fresh one takes the next seed.
      results.put(("done", seed, "fault") + tuple(out[1:]))
      time.sleep(0.2)
      os._exit(3)
    results.put(("done", seed) + out)


def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--seeds", default="0:200", help="a range lo:hi of seeds")
  ap.add_argument("--tag", dest="family", default=None, help="only kernels of this tag (tests/cf_fuzz.py, Gen.tags)")
  ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
  ap.add_argument("--timeout", type=float, default=120.0, help="seconds a seed may take")
  ap.add_argument("--export-every", type=int, default=5, help="without a GPU: export one seed in this many")
  ap.add_argument("--cpu", action="store_true", help="interpret mode only, even where a GPU is present")
  args = ap.parse_args()
  lo, hi = (int(v) for v in args.seeds.split(":"))
  os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")   # workers share the one GPU
  os.environ.setdefault("MGPU_DSL_CACHE_DIR", "off")
  if args.cpu:
    os.environ["JAX_PLATFORMS"] = "cpu"
  import jax
  on_gpu = not args.cpu and jax.default_backend() == "gpu"
  ctx = mp.get_context("spawn")
  tasks, results = ctx.Queue(), ctx.Queue()
  seeds = list(range(lo, hi))
  for s in seeds:
    tasks.put(s)
  procs, running, counts, fams, t0 = {}, {}, {}, {}, time.time()

  def spawn():
    p = ctx.Process(target=worker, args=(tasks, results, args.family, on_gpu, args.export_every), daemon=True)
    p.start()
    procs[p.pid] = p

  def record(seed, cls, family, tags, detail):
    counts[cls] = counts.get(cls, 0) + 1
    fams.setdefault(family, {}).setdefault(cls, 0)
    fams[family][cls] += 1
    if cls not in ("ok", "skipped"):
      print(f"SEED {seed} {cls} {family} [{tags}] :: {detail}".replace("\n", " | "), flush=True)

  for _ in range(min(args.jobs, len(seeds))):
    spawn()
  done = 0
  while done < len(seeds):
    try:
      msg = results.get(timeout=1.0)
    except queue.Empty:
      msg = None
    if msg and msg[0] == "start":
      running[msg[2]] = (msg[1], msg[3])
    elif msg:
      done += 1
      record(*msg[1:])
      if done % 100 == 0:
        print(f"... {done} seeds in {time.time() - t0:.0f} s: "
              + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())), flush=True)
      running = {pid: v for pid, v in running.items() if v[0] != msg[1]}
    now = time.time()
    for pid, (seed, since) in list(running.items()):
      if now - since > args.timeout:
        procs.pop(pid).kill()
        del running[pid]
        done += 1
        record(seed, "timeout", "?", "", f"killed after {args.timeout:.0f} s")
        spawn()
    for pid, p in list(procs.items()):            # a worker that died in a seed (a fault)
      if not p.is_alive() and pid in running and results.empty():
        seed, _ = running.pop(pid)
        procs.pop(pid)
        done += 1
        record(seed, "died", "?", "", f"worker died (exit code {p.exitcode})")
        spawn()
      elif not p.is_alive() and pid not in running:   # (a worker that left after a fault it reported)
        procs.pop(pid)
        if done < len(seeds):
          spawn()
  for _ in procs:
    tasks.put(None)
  mode = "GPU (jit) and interpret mode vs NumPy" if on_gpu else "interpret mode vs NumPy, CUDA export of a sample"
  print(f"{len(seeds)} seeds ({mode}) in {time.time() - t0:.0f} s: "
        + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
  for f, c in sorted(fams.items()):
    print(f"  {f}: " + ", ".join(f"{n} {k}" for k, n in sorted(c.items())))
  return int(any(k not in ("ok", "skipped") for k in counts))


if __name__ == "__main__":
  sys.exit(main())
