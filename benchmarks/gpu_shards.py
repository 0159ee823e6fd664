"""The GPU test suite in parallel shards: one device visit instead of three.

    python3 benchmarks/gpu_shards.py [--shards N] [--timeout S] [--part K/M] [PYTEST_ARGS...]

The suite's time is mostly compilation (CPU), so N pytest processes share the one GPU, each
allocating memory as it goes (no preallocation). Tests are dealt round-robin by node id, so every
shard gets a mix of heavy and light files. `--part K/M` runs the K-th of M interleaved parts of the tests
(K from 1): the whole suite (about 2000 tests, session 51) takes more than one visit's 600 s.
Logs: $OUT/shard_K.log; a summary is printed.
"""
import argparse
import os
import signal
import subprocess
import sys
import time


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--shards", type=int, default=6)
  ap.add_argument("--timeout", type=float, default=480.0)
  ap.add_argument("--part", default="1/1", help="K/M: the K-th (from 1) of M interleaved parts of the tests")
  ap.add_argument("paths", nargs="*", default=["tests"])
  args = ap.parse_args()
  out = os.environ.get("OUT", "/tmp/out")
  os.makedirs(out, exist_ok=True)
  base = [sys.executable, "-u", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu"]
  listing = subprocess.run(base + ["--collect-only"] + args.paths, capture_output=True, text=True)
  ids = sorted(l.strip() for l in listing.stdout.splitlines() if "::" in l)
  if not ids:
    print("no GPU tests collected:\n" + listing.stdout[-3000:] + listing.stderr[-3000:])
    return 1
  k, m = (int(x) for x in args.part.split("/"))
  ids = ids[k - 1::m]
  print(f"{len(ids)} GPU tests (part {k} of {m}) in {args.shards} shards", flush=True)
  env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
  procs = []
  t0 = time.time()
  for k in range(args.shards):
    log = open(os.path.join(out, f"shard_{k}.log"), "w")
    procs.append((subprocess.Popen(base + ids[k::args.shards], stdout=log,
                                   stderr=subprocess.STDOUT, env=env), log))
  def stop(signum, _frame):      # a step's timeout TERMs this process: its shards must not outlive it
    for p, _ in procs:           # (they would share the GPU with the next step's timings)
      p.kill()
    sys.exit(128 + signum)
  signal.signal(signal.SIGTERM, stop)
  rc = 0
  for k, (p, log) in enumerate(procs):
    left = max(1.0, args.timeout - (time.time() - t0))
    try:
      p.wait(timeout=left)
    except subprocess.TimeoutExpired:
      p.kill()
      p.wait()
    log.close()
    rc = rc or p.returncode
    with open(os.path.join(out, f"shard_{k}.log")) as f:
      lines = f.read().splitlines()
    tail = [l for l in lines if l.startswith(("FAILED", "ERROR")) or " passed" in l
            or " failed" in l or "error" in l.lower()[:40]]
    print(f"== shard {k} rc={p.returncode} {time.time() - t0:.0f}s")
    print("\n".join(tail[-30:]) if tail else "\n".join(lines[-5:]))
  return rc


if __name__ == "__main__":
  sys.exit(main())
