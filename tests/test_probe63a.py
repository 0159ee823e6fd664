"""Probe 63a: differential fuzzing of data-dependent and ragged kernels (tests/ragged_fuzz.py, design note 213).

The fuzzer's kernels (segment sums over CSR offsets, varlen rows, grouped GEMMs over group offsets, ragged-K weight
gradients, paged page-table loops, gathers, scatters and atomics by index vectors, MoE dispatch, CSR SpMV, persistent
group walks, stream compaction, `if`/`while` on loaded scalars) computed what NumPy computes in interpret mode, and
their CUDA exports built. Its refusals were real limits with working hints (an index of another integer type met with
an int32: MG104; a narrow unsigned difference as a loop bound, or uint32 bounds of a pipelined loop: MG003; SMEM:
MG402), but one: a `break` on a pipelined loop's own index, first in its body (`if k >= n[i]: break`, the length of a
sequence or group read from memory, as Triton's varlen loops write it), was MG001. Such a loop now takes the break as
its trip count (frontend/jumps.py `pipelined_break`, frontend/flow.py `_small_int_bound`).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from locate import builds, expect, where
import ragged_fuzz

S = jax.ShapeDtypeStruct
F16, F32, I32 = jnp.float16, jnp.float32, jnp.int32
NS = np.array([0, 1, 2, 3, 4, 7, -2], np.int32)     # trips: none, one, some, all (4 = a.shape[1] // 32), past, negative


# ---------------------------------------------------------------- a break on a pipelined loop's index: its trip count
# The kernels differ in their loop's header and its break alone: written from one template each into a module of
# their own (a file, so that diagnostics quote and locate its lines).
DOTS = """
@mg.mgpu_kernel(out_shape=lambda n, a, b: S((n.shape[0] * {rows}, b.shape[1]), F32), grid=lambda n, a, b: (n.shape[0],),
                block={block})
def {name}(n, a, b, out):
  i = ml.program_id(0)
  a_s = ml.smem(({rows}, 32), F16)
  b_s = ml.smem((32, b.shape[1]), F16)
  acc = ml.zeros(({rows}, b.shape[1]), F32)
  for k in ml.range(a.shape[1] // 32, {options}):
    if {test}:
      break
    ml.copy(a.at[ml.ds(i * {rows}, {rows}), ml.ds(k * 32, 32)], a_s)
    ml.copy(b.at[ml.ds(k * 32, 32), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
  out.at[ml.ds(i * {rows}, {rows}), :][...] = acc
"""
ROWS_T = """
@mg.mgpu_kernel(out_shape=lambda lens, x: S((lens.shape[0], x.shape[1]), F32), grid=lambda lens, x: (lens.shape[0],))
def {name}(lens, x, out):
  i = ml.program_id(0)
  buf = ml.smem((8, x.shape[1]), F32)
  acc = ml.zeros((x.shape[1],), F32)
  m = lens[i]
  for {index} in ml.range({range_args}, stages={stages}):
    if {test}:
      break
    ml.copy(x.at[ml.ds({row}, 8), :], buf)
    acc = acc + ml.sum(ml.where(({row} + ml.arange(8) < {limit})[:, None], buf[...], 0.0), axis=0){step}
  out.at[i][...] = acc
"""
# ---------------------------------------------------------------- a copy under an if on a page table entry
# In a pipelined loop the compiler issues the copy on every trip, ahead of it, its window at the entry read: -1 too,
# a TMA window wholly outside the pages (zeros, never read). Interpret mode agrees with NumPy; the GPU twin shows
# that such a window does not fault.
PAGES = """
@mg.mgpu_kernel(out_shape=lambda n, tab, kv: S((n.shape[0], kv.shape[2]), F32), grid=lambda n, tab, kv: (n.shape[0],))
def {name}(n, tab, kv, out):
  b = ml.program_id(0)
  k_s = ml.smem(kv.shape[1:], F32)
  acc = ml.zeros((kv.shape[2],), F32)
  for p in ml.range(n[b], stages={stages}):
    pg = tab[b, p]
    if pg >= 0:
      ml.copy(kv.at[pg], k_s)
      acc = acc + ml.sum(k_s[...], axis=0)
    else:
      acc = acc - 1.0
  out.at[b][...] = acc
"""


KERNELS = [   # name, template, its fields: one kernel each
    ("cut_ge", DOTS, dict(rows=64, block=128, options="stages=2", test="k >= n[i]")),
    ("cut_lt_reversed", DOTS, dict(rows=64, block=128, options="stages=3", test="n[i] < k")),      # k > n[i]
    ("cut_ws", DOTS, dict(rows=128, block=256, options="stages=2, warp_specialize=True", test="k >= n[i]")),
    ("cut_scaled", ROWS_T, dict(index="k", range_args="x.shape[0] // 8", stages=2, test="k * 8 >= lens[i]",
                                row="k * 8", limit="lens[i]", step="")),
    ("cut_scaled_strict", ROWS_T, dict(index="k", range_args="x.shape[0] // 8", stages=3, test="8 * k > lens[i]",
                                       row="k * 8", limit="x.shape[0]", step="")),
    ("cut_stepped", ROWS_T, dict(index="r0", range_args="0, x.shape[0], 8", stages=2, test="r0 >= lens[i]",
                                 row="r0", limit="lens[i]", step="")),       # Triton's range(0, N, BLOCK)
    ("break_on_carried", ROWS_T, dict(index="k", range_args="x.shape[0] // 8", stages=2, test="k >= m",
                                      row="k * 8", limit="x.shape[0]", step="\n    m = m - 1")),  # (stays MG001)
    ("padded_pages_2", PAGES, dict(stages=2)),
    ("padded_pages_3", PAGES, dict(stages=3)),
]


def _module():
  import importlib.util
  import os
  import sys
  import tempfile
  path = os.path.join(tempfile.mkdtemp(prefix="probe63a_"), "probe63a_kernels.py")
  with open(path, "w") as f:
    f.write("import jax\nimport mgpu_dsl as mg\nfrom mgpu_dsl import language as ml\n"
            "from jax.numpy import float16 as F16, float32 as F32\nS = jax.ShapeDtypeStruct\n")
    for name, template, fields in KERNELS:
      f.write(template.format(name=name, **fields))
  spec = importlib.util.spec_from_file_location("probe63a_kernels", path)
  mod = importlib.util.module_from_spec(spec)
  sys.modules["probe63a_kernels"] = mod
  spec.loader.exec_module(mod)
  return mod


_K = _module()
cut_ge, cut_lt_reversed, cut_ws, cut_scaled, cut_scaled_strict, cut_stepped, break_on_carried = (
    getattr(_K, k[0]) for k in KERNELS[:7])
padded_pages_2, padded_pages_3 = _K.padded_pages_2, _K.padded_pages_3


HINT = ("a pipelined loop (ml.range with stages=, warp_specialize=, pingpong=) and one with a run-time step run every"
        " trip: drop those options, or make the step static, for a break under if statements; in a pipelined loop"
        " without an else, a break on its own index first in the body (if k >= n: break) cuts its trip count instead")
MSG = "break in a pipelined loop or one with a run-time step is not supported in a kernel"


def _dot_inputs(rows=64):
  r = np.random.default_rng(0)
  a = r.integers(-2, 3, (len(NS) * rows, 128)).astype(np.float16)
  b = r.integers(-2, 3, (128, 64)).astype(np.float16)
  return a, b


def _dot_want(a, b, trips, rows=64):
  out = np.zeros((len(trips) * rows, b.shape[1]), np.float32)
  for i, t in enumerate(trips):
    t = int(np.clip(t, 0, a.shape[1] // 32))
    out[i * rows:(i + 1) * rows] = a[i * rows:(i + 1) * rows, :32 * t].astype(np.float32) @ b[:32 * t].astype(np.float32)
  return out


def _rows_inputs():
  lens = np.array([0, 1, 7, 8, 9, 40, 64, 100, -3], np.int32)
  x = np.random.default_rng(1).integers(-4, 5, (64, 32)).astype(np.float32)
  return lens, x


def _rows_want(x, lens, strict=False):
  if strict:      # tiles k with 8 k <= len: rows [0, 8 * (len // 8 + 1)), none for a negative length
    return np.stack([x[:max(0, 8 * (int(v) // 8 + 1))].sum(0) for v in lens]).astype(np.float32)
  return np.stack([x[:max(0, int(v))].sum(0) for v in lens]).astype(np.float32)


CUT = [(cut_ge, lambda n: n), (cut_lt_reversed, lambda n: n + 1)]
ROWS = [(cut_scaled, False), (cut_stepped, False), (cut_scaled_strict, True)]


@pytest.mark.parametrize("kernel,trips", CUT, ids=[k.__name__ for k, _ in CUT])
def test_a_break_on_a_pipelined_index_cuts_the_trip_count(kernel, trips):
  a, b = _dot_inputs()
  got = kernel(jnp.asarray(NS), jnp.asarray(a), jnp.asarray(b), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), _dot_want(a, b, trips(NS)))


def test_a_warp_specialised_loop_is_cut_by_its_break():
  a, b = _dot_inputs(128)
  got = cut_ws(jnp.asarray(NS), jnp.asarray(a), jnp.asarray(b), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), _dot_want(a, b, NS, 128))


@pytest.mark.parametrize("kernel,strict", ROWS, ids=[k.__name__ for k, _ in ROWS])
def test_a_break_on_a_scaled_or_stepped_index_cuts_the_trip_count(kernel, strict):
  lens, x = _rows_inputs()
  for dt in (np.int32, np.int16):       # (a narrower signed length counts the same)
    got = kernel(jnp.asarray(lens.astype(dt)), jnp.asarray(x), interpret=True)
    np.testing.assert_array_equal(np.asarray(got), _rows_want(x, lens, strict))


@pytest.mark.parametrize("kernel", [cut_ge, cut_lt_reversed, cut_ws, cut_scaled, cut_scaled_strict, cut_stepped],
                         ids=lambda k: k.__name__)
def test_cut_loops_export_for_cuda(kernel):
  if kernel in (cut_scaled, cut_scaled_strict, cut_stepped):
    specs = [S((9,), I32), S((64, 32), F32)]
  else:
    rows = 128 if kernel is cut_ws else 64
    specs = [S((len(NS),), I32), S((len(NS) * rows, 128), F16), S((128, 64), F16)]
  builds(kernel, *specs)
  jax.export.export(jax.jit(kernel), platforms=["cuda"])(*specs)
  ir = str(kernel.typed_ir(*specs))
  assert "stages=" in ir and "kind=min" in ir        # pipelined still, the trip count a minimum
  # the cut's ops (the minimum, the max of k > n, cdiv's parts) at the break's if (the pipeline's prologue at the for)
  at = {f"probe63a_kernels.py:{where(kernel, t)[0]}" for t in ("if ", "for ")}
  cut = [ln.rsplit("# ", 1)[1] for ln in ir.splitlines() if "kind=min" in ln or "kind=max" in ln]
  assert f"probe63a_kernels.py:{where(kernel, 'if ')[0]}" in cut and set(cut) <= at, cut


def test_a_break_the_trip_count_cannot_take_stays_mg001():
  # a float length (the trip count would not be an integer), a bound the body computes (a running count)
  expect(cut_scaled, [S((9,), F32), S((64, 32), F32)], mg.UnsupportedSyntaxError, "break", MSG, hint=HINT)
  expect(break_on_carried, [S((9,), I32), S((64, 32), F32)], mg.UnsupportedSyntaxError, "break", MSG, nth=1,
         hint=HINT)
  # a uint32 length: the user's own compare is reported, as it was before the cut
  expect(cut_scaled, [S((9,), jnp.uint32), S((64, 32), F32)], mg.DtypeMismatchError, "k * 8 >= lens[i]",
         ">= on k * 8 (int32) and lens[i] (uint32): dtypes differ and are never converted implicitly")


@pytest.mark.gpu
def test_gpu_cut_loops_match_numpy():
  a, b = _dot_inputs()
  for kernel, trips in CUT:
    got = jax.jit(kernel)(jnp.asarray(NS), jnp.asarray(a), jnp.asarray(b))
    np.testing.assert_array_equal(np.asarray(got), _dot_want(a, b, trips(NS)))
  a, b = _dot_inputs(128)
  np.testing.assert_array_equal(np.asarray(jax.jit(cut_ws)(jnp.asarray(NS), jnp.asarray(a), jnp.asarray(b))),
                                _dot_want(a, b, NS, 128))
  lens, x = _rows_inputs()
  for kernel, strict in ROWS:
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(jnp.asarray(lens), jnp.asarray(x))),
                                  _rows_want(x, lens, strict))


# ---------------------------------------------------------------- a copy under an if on a page table entry (PAGES)
def _pages():
  n = np.array([3, 0, 2, 1], np.int32)
  tab = np.array([[2, -1, 0], [1, 1, 1], [-1, 1, 0], [-1, -1, -1]], np.int32)
  kv = np.random.default_rng(2).integers(-4, 5, (3, 16, 64)).astype(np.float32)
  want = np.stack([sum((kv[p].sum(0) if p >= 0 else -np.ones(64)) for p in tab[b, :n[b]]) + np.zeros(64)
                   for b in range(len(n))]).astype(np.float32)
  return (n, tab, kv), want


@pytest.mark.parametrize("kernel", [padded_pages_2, padded_pages_3], ids=lambda k: k.__name__)
def test_a_copy_under_an_if_on_a_table_entry_computes(kernel):
  args, want = _pages()
  np.testing.assert_array_equal(np.asarray(kernel(*map(jnp.asarray, args), interpret=True)), want)
  jax.export.export(jax.jit(kernel), platforms=["cuda"])(*[S(a.shape, a.dtype) for a in args])


@pytest.mark.gpu
def test_gpu_a_copy_under_an_if_on_a_table_entry_does_not_fault():
  args, want = _pages()
  for kernel in (padded_pages_2, padded_pages_3):
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(*map(jnp.asarray, args))), want)


# ---------------------------------------------------------------- the fuzzer's families and refusals
SEEDS = {"compact": [0, 2], "cond": [0, 1], "gather": [0, 1], "grouped": [0, 1], "moe": [0, 4], "paged": [1, 2],
         "persist": [0, 2], "ragk": [0, 1], "segsum": [0, 1], "seqloop": [0, 1], "spmv": [0, 2], "varlen": [0, 1]}


@pytest.mark.parametrize("family", sorted(SEEDS))
def test_fuzz_families_compute_their_references(family):
  for k, seed in enumerate(SEEDS[family]):
    g = ragged_fuzz.Gen(seed, family=family)
    assert ragged_fuzz.run(g, build=k == 0) == ("ok", ""), g.source


@pytest.mark.parametrize("family", ["paged", "ragk"])
def test_fuzz_breaks_on_lengths_compute(family):
  """The `paged` loops over every table column left by `if p >= ml.cdiv(n, page): break` (and its other spellings),
  and `ragk`'s K loops of a static count left by `if c * bk >= e - s: break` (and others), pipelined and
  warp-specialised: MG001 before this probe. (Narrow unsigned lengths left narrow are MG003, as any bound of theirs.)"""
  seen = set()
  for seed in range(150):
    g = ragged_fuzz.Gen(seed, family=family)
    narrow = any(t.startswith("idx:u") for t in g.tags) and "widened" not in g.tags
    if "break" in g.tags and not narrow and not any(t.startswith("loop:") for t in g.tags):
      assert ragged_fuzz.run(g, build=len(seen) < 2) == ("ok", ""), g.source
      seen.add(next(t for t in g.tags if t.startswith("stages:")))
  assert len(seen - {"stages:1"}) >= 2, seen        # (pipelined ones among them)


REFUSALS = [   # (seed, family, code, what the message says): real limits, each with a hint the widened kernel follows
    (73, "grouped", "MG104", "dtypes differ and are never converted implicitly"),
    (165, "segsum", "MG003", "and wrap (as jnp's uint8 arithmetic does)"),
    (337, "seqloop", "MG003", "a pipelined loop counts in int32"),
]


@pytest.mark.parametrize("seed,family,code,words", REFUSALS, ids=[r[2] + ":" + r[1] for r in REFUSALS])
def test_fuzz_refusals_are_located_and_their_hints_compute(seed, family, code, words):
  g = ragged_fuzz.Gen(seed)
  assert g.family == family
  narrow = [n for n, a in g.ins if a.dtype.kind in "iu" and a.dtype != np.int32]
  assert narrow and not g.widen
  kernel = ragged_fuzz.diff_fuzz.load(g)
  with pytest.raises(mg.KernelError) as info:
    kernel(*g.args, interpret=True)
  e = info.value
  assert e.code == code and words in e.message, str(e)
  assert e.hint and "astype(jnp.int" in e.hint
  first = g.source.splitlines().index(next(ln for ln in g.source.splitlines() if ln.startswith("def kernel"))) + 1
  assert first < e.lineno <= len(g.source.splitlines())
  g.widen = set(narrow)           # the scalars read as the hints say, `x0[b].astype(jnp.int32)`
  assert ragged_fuzz.run(g, build=False) == ("ok", "")


@pytest.mark.gpu
def test_gpu_fuzz_families_match_numpy():
  for family, seeds in sorted(SEEDS.items()):
    for seed in seeds:
      g = ragged_fuzz.Gen(seed, family=family)
      got = jax.jit(ragged_fuzz.diff_fuzz.load(g))(*g.args)
      got = got if isinstance(got, (tuple, list)) else (got,)
      for o, w in zip(got, g.refs):
        assert ragged_fuzz.compare(np.asarray(o), w) is None, (family, seed)
