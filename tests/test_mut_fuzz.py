"""Probe 60d's mutation fuzzer of diagnostics (tests/mut_fuzz.py), a fixed sample of its seeds: every mutant of a
corpus kernel runs or fails with a KernelError at the user's line, with a code and a hint (no escape). The driver
benchmarks/probe_mut_fuzz.py runs thousands (design note 200)."""
import ast
import os
import random

import pytest

import mgpu_dsl as mg
from mgpu_dsl.frontend.loc import Loc
import mut_fuzz

# Seeds of quick mutants (0.1 s or less each on a loaded 2-core machine), one in three exported for CUDA
SEEDS = (6, 7, 13, 14, 15, 16, 30, 34, 36, 55, 58, 59, 86, 88, 89, 99, 100, 101, 102, 107, 109, 110, 112, 116,
         142, 143, 144, 145, 151, 152, 153, 154, 172, 178, 179, 180, 183, 185, 186, 187, 188, 192, 193, 194, 195, 199,
         201, 202, 208, 209, 221, 223, 226, 227, 228, 229, 230, 231, 232, 233, 234, 235, 236, 237, 238)


@pytest.mark.parametrize("part", range(8))
def test_a_fixed_sample_of_mutants_has_no_escape(part):
  seeds = SEEDS[part::8]
  got = [mut_fuzz.run_seed(s, export=s % 3 == 0) for s in seeds]
  bugs = [(s, g) for s, g in zip(seeds, got) if g[0] in mut_fuzz.BUGS]
  assert not bugs, bugs
  classes = [g[0] for g in got]
  assert classes.count("refused") >= len(seeds) // 2 and set(classes) <= {"ran", "refused"}, classes


def test_the_sample_holds_legal_mutants_too():
  got = [mut_fuzz.run_seed(s, export=False)[0] for s in (143, 178, 179, 195, 234)]
  assert got.count("ran") >= 1, got      # the fuzzer makes legal mutants as well as refused ones


def test_every_mutation_kind_makes_mutants_python_compiles():
  cases = mut_fuzz.corpus()
  assert len(cases) >= 60
  made, want = set(), set(mut_fuzz.Mutator.KINDS) - {"input", "constexpr"}
  rng = random.Random(0)
  for case in sorted(cases, key=lambda c: os.path.getsize(os.path.join(mut_fuzz.ROOT, c["path"])))[:40]:
    if made == want:
      break
    with open(os.path.join(mut_fuzz.ROOT, case["path"])) as f:
      src = f.read()
    m = mut_fuzz.Mutator(src, case["name"])
    for kind in mut_fuzz.Mutator.KINDS:
      if kind in ("input", "constexpr"):
        continue
      got = getattr(m, "m_" + kind)(rng)
      if got is not None and got[0] != src:
        try:
          compile(got[0], "<mutant>", "exec")
        except SyntaxError:
          continue
        ast.parse(got[0])
        made.add(kind)
  assert made == want


def test_call_mutations_change_the_inputs_or_constexprs():
  case = {"path": "tests/kernels.py", "name": "double", "inputs": [{"shape": [512, 64], "dtype": "float32"}],
          "constexprs": {"n": 4}}
  seen = {mut_fuzz.mutate_call(case, random.Random(s))[1].split()[0] for s in range(60)}
  assert {"input", "constexpr", "an"} <= seen
  assert case["inputs"][0]["shape"] == [512, 64] and case["constexprs"] == {"n": 4}     # a copy is mutated


def test_the_classifier_flags_what_reaches_a_user_unlocated_or_unhinted():
  path = "/tmp/user.py"
  own = os.path.join(mut_fuzz.ROOT, "frontend", "tracer.py")
  assert mut_fuzz.check_error(mg.KernelTypeError("m", Loc(path, 3, 0), hint="h"), path)[0] == "refused"
  assert mut_fuzz.check_error(mg.KernelTypeError("m", Loc(own, 3, 0), hint="h"), path)[0] == "badloc"
  assert mut_fuzz.check_error(mg.KernelTypeError("m", Loc(path, 3, 0)), path)[0] == "nohint"
  assert mut_fuzz.check_error(mg.KernelTypeError("m %12", Loc(path, 3, 0), hint="h"), path)[0] == "badtext"
  assert mut_fuzz.check_error(mg.InternalError("m", Loc(path, 3, 0), hint="h"), path)[0] == "internal"


@pytest.mark.parametrize("body, want", [
    ("  o[...] = x[...] * 2\n", "ran"),
    ("  o[...] = y[...]\n", "refused"),
])
def test_the_classifier_runs_and_locates(body, want):
  src = ("import mgpu_dsl as mg\nfrom mgpu_dsl import language as ml\n\n"
         "@mg.mgpu_kernel(out_shape=lambda x: x)\ndef k(x, o):\n" + body)
  case = {"path": "tests/kernels.py", "name": "k", "inputs": [{"shape": [64, 64], "dtype": "float32"}]}
  cls, detail = mut_fuzz.classify(case, src)
  assert cls == want, detail
  if want == "refused":
    assert detail.startswith("MG002 line 6:"), detail


def test_a_users_own_python_error_is_not_counted_as_an_escape():
  src = ("import mgpu_dsl as mg\nraise ValueError('mine')\n\n"
         "@mg.mgpu_kernel(out_shape=lambda x: x)\ndef k(x, o):\n  o[...] = x[...]\n")
  case = {"path": "tests/kernels.py", "name": "k", "inputs": [{"shape": [64, 64], "dtype": "float32"}]}
  assert mut_fuzz.classify(case, src) == ("pyerr", "ValueError: mine")


def test_an_out_shape_helpers_own_error_is_a_located_refusal():
  src = ("import mgpu_dsl as mg\n\ndef shape(x):\n  raise ValueError('mine')\n\n"
         "@mg.mgpu_kernel(out_shape=shape)\ndef k(x, o):\n  o[...] = x[...]\n")
  case = {"path": "tests/kernels.py", "name": "k", "inputs": [{"shape": [64, 64], "dtype": "float32"}]}
  cls, detail = mut_fuzz.classify(case, src)
  assert cls == "refused" and "mine" in detail, detail
