"""The worker pool of the differential fuzzers' GPU scripts (benchmarks/probe_mem_fuzz.py, probe_cf_fuzz.py): seeds
handed to spawned worker processes that share the GPU, each seed's class reported, a worker that faults, hangs or dies
replaced, and a summary by family.

A script gives `main` its own `run_seed(seed, family, on_gpu, export_every) -> (class, family, tags, detail)` (a
module-level function, so that spawned workers import it) and the test module its workers import first (jax and
mgpu_dsl, before the first seed's clock starts). Classes other than `quiet` ones are printed a line a seed."""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")


def worker(tasks, results, warm, run_seed, family, on_gpu, export_every):
  sys.path.insert(0, TESTS)
  __import__(warm)
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


def main(description, run_seed, warm, *, family_flag=("--family",), family_help="", quiet=("ok",), progress=0):
  ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--seeds", default="0:200", help="a range lo:hi of seeds")
  ap.add_argument(*family_flag, dest="family", default=None, help=family_help)
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
    p = ctx.Process(target=worker, args=(tasks, results, warm, run_seed, args.family, on_gpu, args.export_every),
                    daemon=True)
    p.start()
    procs[p.pid] = p

  def record(seed, cls, family, tags, detail):
    counts[cls] = counts.get(cls, 0) + 1
    fams.setdefault(family, {}).setdefault(cls, 0)
    fams[family][cls] += 1
    if cls not in quiet:
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
      if progress and done % progress == 0:
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
  return int(any(k not in quiet for k in counts))


def gpu_check(g, run, compare):
  """(class, detail) of generated kernel `g` on the GPU: `run(g, build=False)` first (interpret mode against the
  reference: anything but "ok" is the answer), then the kernel jitted on the GPU, each output against `g.refs` by
  `compare(got, want)` ("build" if it does not compile or launch, "wrong-gpu" if an output differs)."""
  import jax
  import numpy as np
  import mgpu_dsl as mg
  import diff_fuzz
  cls, detail = run(g, build=False)
  if cls != "ok":
    return cls, detail
  kernel = diff_fuzz.load(g)
  try:
    got = jax.block_until_ready(jax.jit(kernel)(*g.args))
  except mg.KernelError as e:
    return "build", f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
  except Exception as e:  # noqa: BLE001
    return "build", diff_fuzz.describe_exception(e)
  got = got if isinstance(got, (tuple, list)) else (got,)
  for k, (a, w) in enumerate(zip(got, g.refs)):
    bad = compare(np.asarray(a), w)
    if bad:
      return "wrong-gpu", f"output {k}: {bad}"
  return "ok", ""


def check_seed(g, run, on_gpu, build, compare):
  """(class, detail) of generated kernel `g` as the fuzzers' `run_seed` reports it: without a GPU `run(g, build=...)`
  (interpret mode against the reference, and a CUDA export where `build`), on one `gpu_check`; a refusal's class
  names its code ("refused:MG104": a real limit or a finding, the log says which)."""
  if not on_gpu:
    cls, detail = run(g, build=build)
  else:
    cls, detail = gpu_check(g, run, compare)
  if cls == "refused":
    cls = "refused:" + detail.split()[0]
  return cls, detail
