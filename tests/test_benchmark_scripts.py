"""Every benchmark script imports as it would run (`python benchmarks/X.py`: its folder first on sys.path,
fresh imports of the project's examples and benchmark modules): a name that resolves to the wrong file
(examples/matmul_fp8.py's `from matmul import` found benchmarks/matmul.py, twenty-seventh session) fails
here rather than on the GPU. The scripts' main bodies need a GPU and do not run."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks")

_PROBE = r"""
import importlib.util, os, sys, traceback
bench, root = sys.argv[1], sys.argv[2]
mine = lambda m: (getattr(m, "__file__", None) or "").startswith((bench, os.path.join(root, "examples")))
failed = []
for name in sorted(f for f in os.listdir(bench) if f.endswith(".py")):
  sys.path.insert(0, bench)
  sys.argv = [name]
  try:
    spec = importlib.util.spec_from_file_location("bench_" + name[:-3], os.path.join(bench, name))
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
  except BaseException:
    failed.append(name + ": " + traceback.format_exc(limit=-2))
  finally:
    sys.path.remove(bench)
    for k in [k for k, m in sys.modules.items() if mine(m)]:
      del sys.modules[k]
print("\n".join(failed) or "ok")
"""


def test_every_benchmark_script_imports():
  r = subprocess.run([sys.executable, "-c", _PROBE, BENCH, ROOT], capture_output=True, text=True, timeout=600,
                     env={**os.environ, "JAX_PLATFORMS": "cpu"})
  assert r.returncode == 0, r.stderr[-3000:]
  assert r.stdout.strip().endswith("ok"), r.stdout[-5000:]
  assert len([f for f in os.listdir(BENCH) if f.endswith(".py")]) > 10
