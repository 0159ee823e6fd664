"""@mg.autotune and mg.bench without a GPU: the first config untimed; with an injected
timer, every config that compiles is timed, the fastest kept, and its choice read back
from disk."""
import functools
import glob
import json
import logging
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.bench import has_gpu

no_gpu = pytest.mark.skipif(has_gpu(), reason="checks the behaviour without a GPU")
F32 = jnp.float32
CONFIGS = [dict(rows=128, factor=2.0), dict(rows=1024, factor=5.0), dict(rows=64, factor=3.0)]


def _scale_rows(x, out, *, rows: ml.constexpr, factor: ml.constexpr, bias: ml.constexpr = 0.0):
  i = ml.program_id(0)
  buf = ml.smem((rows, x.shape[1]))
  ml.copy(x.at[ml.ds(i * rows, rows)], buf)       # rows=1024 of 64 float32: more SMEM than a CTA has
  # (rows=512, past a TMA box, was the config that failed; it is two TMAs of 256 rows since probe 52i)
  buf[...] = buf[...] * factor + bias
  ml.copy(buf, out.at[ml.ds(i * rows, rows)])


def kernel():
  return mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x, rows: (x.shape[0] // rows,))(_scale_rows)


class FakeTimer:
  """Seconds per config, by its `rows`; records what it was asked to time."""
  def __init__(self, seconds):
    self.seconds, self.calls = seconds, []

  def __call__(self, fn, *args):
    assert isinstance(fn, functools.partial)
    self.calls.append(dict(fn.keywords))
    return self.seconds[fn.keywords["rows"]]


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
  monkeypatch.setenv("MGPU_DSL_CACHE_DIR", str(tmp_path))
  return tmp_path


def x():
  return rand.normal(rand.key(0), (1024, 64), F32)


@no_gpu
def test_without_a_gpu_the_first_config_is_used_untimed():
  tuned = mg.autotune(configs=CONFIGS)(kernel())
  a = x()
  np.testing.assert_allclose(np.asarray(tuned(a, interpret=True)), np.asarray(a) * 2.0, rtol=1e-6)
  assert tuned.best_config(a) == CONFIGS[0]


def test_interpret_mode_uses_the_first_config_without_timing():
  timer = FakeTimer({128: 1.0, 64: 0.5})
  tuned = mg.autotune(configs=CONFIGS, timer=timer)(kernel())
  assert tuned.best_config(x(), interpret=True) == CONFIGS[0]
  assert timer.calls == []


def test_other_constexprs_pass_through():
  tuned = mg.autotune(configs=CONFIGS)(kernel())
  a = x()
  np.testing.assert_allclose(np.asarray(tuned(a, bias=1.0, interpret=True)), np.asarray(a) * 2.0 + 1.0,
                             rtol=1e-6)


def test_every_config_that_compiles_is_timed_and_the_fastest_kept(caplog):
  timer = FakeTimer({128: 2e-3, 64: 1e-3})
  tuned = mg.autotune(configs=CONFIGS, timer=timer)(kernel())
  with caplog.at_level(logging.INFO, logger="mgpu_dsl"):
    assert tuned.best_config(x(), bias=1.0) == dict(rows=64, factor=3.0)
  assert timer.calls == [dict(rows=128, factor=2.0, bias=1.0, interpret=False),
                         dict(rows=64, factor=3.0, bias=1.0, interpret=False)]
  assert any("skipping rows=1024, factor=5.0: SmemCapacityError" in r.getMessage() for r in caplog.records)
  tuned.best_config(x(), bias=1.0)
  assert len(timer.calls) == 2                      # kept in memory


def test_winners_are_written_to_disk_and_read_back(cache_dir):
  k = kernel()
  mg.autotune(configs=CONFIGS, timer=FakeTimer({128: 2e-3, 64: 1e-3}))(k).best_config(x())
  [path] = glob.glob(os.path.join(cache_dir, "autotune", "_scale_rows-*.json"))
  [entry] = json.load(open(path)).values()
  assert entry["config"] == dict(rows=64, factor=3.0) and entry["index"] == 2
  assert entry["seconds"]["rows=128, factor=2.0"] == 2e-3
  assert entry["seconds"]["rows=1024, factor=5.0"].startswith("SmemCapacityError")

  def never(fn, *args):
    raise AssertionError("a winner on disk must not be timed again")
  again = mg.autotune(configs=CONFIGS, timer=never)(kernel())
  assert again.best_config(x()) == dict(rows=64, factor=3.0)
  with pytest.raises(AssertionError, match="timed again"):   # another shape is tuned anew
    again.best_config(jnp.ones((2048, 64), F32))


def test_a_winner_on_disk_for_other_configs_is_not_used(cache_dir):
  mg.autotune(configs=CONFIGS, timer=FakeTimer({128: 2e-3, 64: 1e-3}))(kernel()).best_config(x())
  other = [dict(rows=64, factor=3.0), dict(rows=128, factor=2.0)]
  timer = FakeTimer({128: 1e-3, 64: 2e-3})
  assert mg.autotune(configs=other, timer=timer)(kernel()).best_config(x()) == dict(rows=128, factor=2.0)
  assert len(timer.calls) == 2


def test_a_damaged_winners_file_is_ignored(cache_dir):
  tuned = mg.autotune(configs=CONFIGS, timer=FakeTimer({128: 2e-3, 64: 1e-3}))(kernel())
  tuned.best_config(x())
  [path] = glob.glob(os.path.join(cache_dir, "autotune", "*.json"))
  open(path, "w").write("{not json")
  timer = FakeTimer({128: 1e-3, 64: 2e-3})
  assert mg.autotune(configs=CONFIGS, timer=timer)(kernel()).best_config(x()) == CONFIGS[0]
  assert json.load(open(path))                     # rewritten


def test_when_no_config_compiles_the_first_error_is_raised():
  tuned = mg.autotune(configs=[dict(rows=1024, factor=1.0), dict(rows=1024, factor=2.0)],
                      timer=FakeTimer({}))(kernel())
  with pytest.raises(mg.SmemCapacityError):
    tuned.best_config(x())


def test_a_tuned_constexpr_in_the_call_is_a_signature_error():
  tuned = mg.autotune(configs=CONFIGS)(kernel())
  with pytest.raises(mg.SignatureError) as info:
    tuned(x(), rows=128, interpret=True)
  assert info.value.message == "_scale_rows: rows is chosen by @mg.autotune"


def test_signature_leaves_out_tuned_constexprs():
  import inspect
  tuned = mg.autotune(configs=CONFIGS)(kernel())
  assert list(inspect.signature(tuned).parameters) == ["x", "bias", "interpret"]


def test_autotune_decorates_kernels_only():
  with pytest.raises(mg.SignatureError, match="decorates an @mg.mgpu_kernel"):
    mg.autotune(configs=CONFIGS)(_scale_rows)
  with pytest.raises(mg.SignatureError, match="non-empty list"):
    mg.autotune(configs=[])(kernel())


@no_gpu
def test_bench_without_a_gpu_is_a_no_gpu_error():
  with pytest.raises(mg.NoGpuError) as info:
    mg.bench(jnp.sin, jnp.ones(8))
  assert "no GPU" in info.value.message and "bench_wall" in info.value.hint
  assert info.value.filename == __file__


def test_bench_wall_times_calls_on_any_device():
  t = mg.bench_wall(jax.jit(jnp.sin), jnp.ones(8), warmup=1, iterations=2, samples=3)
  assert isinstance(t, float) and t > 0


@pytest.mark.gpu
def test_bench_measures_kernel_time_on_the_gpu():
  import kernels as K
  t = mg.bench(K.double, jnp.ones((4096, 64), F32), iterations=5)
  assert isinstance(t, float) and 0 < t < 1


@pytest.mark.gpu
def test_autotune_on_the_gpu_times_the_configs_that_compile():
  same = [dict(rows=128, factor=2.0), dict(rows=1024, factor=2.0), dict(rows=64, factor=2.0)]
  tuned = mg.autotune(configs=same)(kernel())
  a = x()
  np.testing.assert_allclose(np.asarray(tuned(a)), np.asarray(a) * 2.0, rtol=1e-6)
  [results] = tuned.timings.values()
  assert [type(t) for _, t in results] == [float, str, float]
  assert results[1][1].startswith("SmemCapacityError")
  assert tuned.best_config(a) in (same[0], same[2])


@pytest.mark.gpu
def test_autotune_under_jit_times_on_stand_in_inputs():
  tuned = mg.autotune(configs=[dict(rows=128, factor=2.0), dict(rows=64, factor=2.0)])(kernel())
  a = x()
  np.testing.assert_allclose(np.asarray(jax.jit(tuned)(a)), np.asarray(a) * 2.0, rtol=1e-6)
  assert len(tuned.timings) == 1


TUNED_FILE = '''
import jax, jax.numpy as jnp
import mgpu_dsl as mg
from mgpu_dsl import language as ml


@mg.autotune(configs=[dict(rows=128), dict(rows=1024)])
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x, rows: (x.shape[0] // rows,))
def copy_rows(x, out, *, rows: ml.constexpr):
  i = ml.program_id(0)
  buf = ml.smem((rows, x.shape[1]))
  ml.copy(x.at[ml.ds(i * rows, rows)], buf)
  ml.copy(buf, out.at[ml.ds(i * rows, rows)])


@mg.autotune(configs=[dict(rows=128)])
@mg.mgpu_kernel(out_shape=lambda x: x)
def undeclared(x, out, *, rows: ml.constexpr):
  out[...] = x[...]


mg.check_specs(copy_rows, jax.ShapeDtypeStruct((1024, 64), jnp.float32))
'''


def test_the_checker_checks_every_config_of_an_autotuned_kernel(tmp_path):
  from mgpu_dsl.check import check_file
  path = tmp_path / "tuned_kernels.py"
  path.write_text(TUNED_FILE)
  report = check_file(str(path))
  assert [r.title for r in report.results] == ["copy_rows(float32[1024,64], rows=128)",
                                               "copy_rows(float32[1024,64], rows=1024)"]
  assert report.results[0].ok and {type(e).__name__ for e in report.results[1].errors} == {"SmemCapacityError"}
  assert [k.__name__ for k in report.skipped] == ["undeclared"]


def test_under_jit_configs_are_timed_on_concrete_stand_ins():
  seen = []

  def timer(fn, *args):
    seen.append([isinstance(a, jax.core.Tracer) for a in args] + [float(jnp.abs(args[0]).sum()) > 0])
    return {128: 2e-3, 64: 1e-3}[fn.keywords["rows"]]
  tuned = mg.autotune(configs=CONFIGS, timer=timer)(kernel())
  exported = jax.export.export(jax.jit(tuned), platforms=["cuda"])(jax.ShapeDtypeStruct((1024, 64), F32))
  assert seen == [[False, True], [False, True]]         # concrete, random (not zeros) inputs
  assert "@mosaic_gpu" in exported.mlir_module()
  assert list(tuned.best.values()) == [dict(rows=64, factor=3.0)]
