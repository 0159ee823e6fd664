"""A pytest plugin that records the kernels a test run calls, for the mutation fuzzer's corpus (tests/mut_corpus.json).

    MUT_RECORD=/tmp/calls.jsonl python -m pytest -q -p mut_corpus_record tests/test_X.py   (benchmarks/ on sys.path)

Each interpret-mode call of a module-level kernel of tests/ or examples/ appends one line: the module's path, the
kernel's name, its inputs' shapes, dtypes and integer ranges (the fuzzer draws inputs from them) and its constexprs
when they are plain Python values. `benchmarks/probe_mut_fuzz.py --corpus` turns the lines into the corpus."""
from __future__ import annotations

import json
import os

import numpy as np

_seen: set = set()


def _plain(v):
  return v is None or isinstance(v, (bool, int, float, str))


def _input(a):
  a = np.asarray(a)
  d = {"shape": list(a.shape), "dtype": a.dtype.name}
  if a.dtype.kind in "iu" and a.size:
    d["lo"], d["hi"] = int(a.min()), int(a.max())
  return d


def pytest_configure(config):
  from mgpu_dsl import kernel as K
  out = os.environ["MUT_RECORD"]
  call = K.KernelFunction.__call__

  def recording(self, *args, interpret=None, **constexprs):
    fn = self.fn
    path = fn.__code__.co_filename
    key = (path, fn.__qualname__)
    if (key not in _seen and "<locals>" not in fn.__qualname__ and interpret
        and all(hasattr(a, "shape") and hasattr(a, "dtype") for a in args)
        and all(_plain(v) for v in constexprs.values())
        and sum(int(np.prod(np.shape(a))) for a in args) <= 1 << 18):
      _seen.add(key)
      rec = {"path": os.path.relpath(path), "name": fn.__name__, "line": fn.__code__.co_firstlineno,
             "inputs": [_input(a) for a in args], "constexprs": constexprs}
      with open(out, "a") as f:
        f.write(json.dumps(rec) + "\n")
    return call(self, *args, interpret=interpret, **constexprs)

  K.KernelFunction.__call__ = recording
