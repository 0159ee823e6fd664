"""Probe 60d's mutation fuzzer of diagnostics (tests/mut_fuzz.py): each seed mutates a valid kernel of the corpus
(tests/mut_corpus.json) the way a user could by mistake, runs the mutant in interpret mode on small inputs and exports
it for CUDA on the CPU. Bad input must give a KernelError at the user's line with a code and a hint; anything else
that reaches the user is a bug (classes "escape", "internal", "badloc", "nohint", "badtext"; the pool's "timeout"
and "died" are hangs and crashes).

  python benchmarks/probe_mut_fuzz.py --seeds 0:2000 --jobs 2          # one line per bug, then a summary by kind
  python benchmarks/probe_mut_fuzz.py --seeds 0:200 --no-export        # interpret mode only (faster)
  python benchmarks/probe_mut_fuzz.py --corpus /tmp/calls.jsonl        # rebuild tests/mut_corpus.json
  MUT_CORPUS=tests/mut_corpus_heavy.json python benchmarks/probe_mut_fuzz.py --seeds 0:1500
      # the examples' attention forwards, paged attention, a fused matmul and layernorm's backward at small shapes
      # (about 1 s a mutant; a case's "kernel" names the module's mg.mgpu_kernel(fn) when it is not fn's def)

The corpus is rebuilt from the lines benchmarks/mut_corpus_record.py writes during a test run (module-level kernels
of tests/ and the inputs they were called on) plus the examples' kernels at small shapes (EXAMPLES below); a kernel
is kept when its unmutated source runs and exports here, at most PER_FILE of a file.
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import fuzz_pool  # noqa: E402

PER_FILE = 3
_F32, _BF16, _I32 = "float32", "bfloat16", "int32"


def _x(shape, dtype=_F32):
  return {"shape": list(shape), "dtype": dtype}


EXAMPLES = [
    ("examples/quickstart.py", "double", [_x((256, 64))], {}),
    ("examples/quickstart.py", "gelu_mul", [_x((256, 64), _BF16)] * 2, {}),
    ("examples/elementwise.py", "scale", [_x((256, 256))], {}),
    ("examples/elementwise.py", "add", [_x((256, 256))] * 2, {}),
    ("examples/softmax.py", "softmax_rows", [_x((64, 256))], {"rows": 8}),
    ("examples/rmsnorm.py", "rmsnorm_rows", [_x((64, 256)), _x((256,))], {"rows": 8, "eps": 1e-6}),
    ("examples/transpose.py", "transpose", [_x((128, 128))], {}),
    ("examples/transpose.py", "transpose_tma", [_x((128, 128))], {}),
    ("examples/dropout.py", "dropout", [_x((1000,)), {"shape": [], "dtype": _I32, "lo": 1, "hi": 9}], {}),
    ("examples/layernorm.py", "layernorm_fwd", [_x((64, 256)), _x((256,)), _x((256,))], {"rows": 4, "eps": 1e-5}),
    ("examples/matmul.py", "matmul", [_x((256, 256), _BF16)] * 2, {}),
]


def build_corpus(jsonl):
  import mut_fuzz
  recs = [dict(path=p, name=n, inputs=i, constexprs=c) for p, n, i, c in EXAMPLES]
  with open(jsonl) as f:
    recs += [json.loads(line) for line in f]
  kept, per = [], {}
  for r in recs:
    if per.get(r["path"], 0) >= PER_FILE or not r["path"].startswith(("tests/", "examples/")):
      continue          # (not a fuzzer's temporary module: gone after its run)
    r = {k: r[k] for k in ("path", "name", "inputs", "constexprs")}
    with open(os.path.join(mut_fuzz.ROOT, r["path"])) as f:
      cls, detail = mut_fuzz.classify(r, f.read())
    print(f"{r['path']}:{r['name']}: {cls} {detail[:120]}", flush=True)
    if cls == "ran":
      kept.append(r)
      per[r["path"]] = per.get(r["path"], 0) + 1
  with open(mut_fuzz.CORPUS, "w") as f:
    json.dump(kept, f, indent=0)
  print(f"{len(kept)} kernels of {len(recs)} kept in {mut_fuzz.CORPUS}")


def run_seed(seed, family, on_gpu, export_every):
  """(class, family, tags, detail) of one seed (family: the mutation's kind)."""
  import mut_fuzz
  cls, kind, what, detail = mut_fuzz.run_seed(seed, export=export_every <= 1 or seed % export_every == 0)
  if family and family not in kind:
    return "skipped", kind, what, ""
  if os.environ.get("MUT_LOG"):         # every seed's line, for statistics (codes of the refusals)
    with open(os.environ["MUT_LOG"], "a") as f:
      f.write(json.dumps([seed, cls, kind, what, detail]) + "\n")
  return cls, kind, what, detail


if __name__ == "__main__":
  if "--corpus" in sys.argv:
    os.environ.setdefault("MGPU_DSL_CACHE_DIR", "off")
    build_corpus(sys.argv[sys.argv.index("--corpus") + 1])
    sys.exit(0)
  if "--jobs" not in sys.argv:
    sys.argv += ["--jobs", "2"]
  if "--export-every" not in sys.argv:
    sys.argv += ["--export-every", "0" if "--no-export" in sys.argv else "1"]
  if "--no-export" in sys.argv:
    sys.argv.remove("--no-export")
    sys.argv[sys.argv.index("--export-every") + 1] = "1000000000"
  if "--timeout" not in sys.argv:
    sys.argv += ["--timeout", "60"]
  sys.exit(fuzz_pool.main(__doc__, run_seed, "mut_fuzz", family_flag=("--kind",),
                          family_help="only mutants of this kind (int, swap_args, dtype, ...)",
                          quiet=("ran", "refused", "pyerr", "skipped"), progress=100))
