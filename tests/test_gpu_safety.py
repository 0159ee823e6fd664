"""On the H200 (run with -m gpu): what issue 11 fixed, on the hardware, and interpret mode
against the GPU over fuzzed checker-accepted kernels.

* in-place updates through input_output_aliases (eager, jit, jit with donation) and inputs
  the kernel only reads stay untouched;
* TMA windows starting before 0 read zeros; a ceiling grid of TMA tiles covers a ragged
  output; tensor-core tiles from promised-aligned data offsets; print format specs; `%`;
* `test_fuzzed_kernels_compute_the_same_in_interpret_mode_and_on_the_gpu` draws
  MGPU_DSL_GPU_FUZZ kernels (default 100) from tests/fuzz_gen.py's generator (and pipelined
  loops from tests/test_pipeline_fuzz.py), keeps those the checker accepts and interpret
  mode runs, and compares the GPU's outputs with interpret mode's.
"""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
import fuzz_check
import fuzz_gen as fuzz
import test_pipeline_fuzz as pfuzz
from test_safety_memory import halo, two_phase
from test_safety_params import append, append_rows, rand
from test_safety_tiles import promised_rows, reference

pytestmark = pytest.mark.gpu
N_FUZZ = int(os.environ.get("MGPU_DSL_GPU_FUZZ", "100"))


# ---------------------------------------------------------------------------- parameters
def test_aliased_output_updates_in_place_eagerly_and_under_jit():
  cache, new = rand((64, 128)), rand((8, 128), seed=1)
  keep = np.asarray(cache).copy()
  want = cache.at[16:24].set(new)
  np.testing.assert_array_equal(append(cache, new), want)
  np.testing.assert_array_equal(jax.jit(append)(cache, new), want)
  np.testing.assert_array_equal(np.asarray(cache), keep)          # not donated: the caller's array stays
  step = jax.jit(lambda c, n: append_rows(c, n, pos=16), donate_argnums=0)
  np.testing.assert_array_equal(step(jnp.array(cache), new), want)


def test_a_kernel_that_only_reads_its_input_leaves_it_untouched():
  x = rand((1024, 64))
  keep = np.asarray(x).copy()
  jax.block_until_ready(jax.jit(fuzz_free_double)(x))
  np.testing.assert_array_equal(np.asarray(x), keep)


def fuzz_free_double(x):
  import kernels as K
  return K.double(x)


def test_a_tma_window_before_zero_reads_zeros_on_the_gpu():
  x = rand((256, 64))
  got = np.asarray(halo(x))
  np.testing.assert_array_equal(got, np.asarray(halo(x, interpret=True)))
  np.testing.assert_array_equal(got[:8], 0)


def test_an_output_read_after_its_tma_store_sees_the_stored_values_on_the_gpu():
  x = rand((128, 64))
  got, got2 = two_phase(x)
  np.testing.assert_array_equal(got2, x * 2 + 1)


def test_a_ceiling_grid_covers_a_ragged_output_on_the_gpu():
  import mgpu_dsl.language as ml

  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: ((x.shape[0] + 127) // 128,))
  def rows(x, out):
    i = ml.program_id(0)
    buf = ml.smem((128, 64))
    ml.copy(x.at[ml.ds(i * 128, 128)], buf)
    buf[...] = buf[...] * 2
    ml.copy(buf, out.at[ml.ds(i * 128, 128)])
  x = rand((1000, 64))
  np.testing.assert_array_equal(rows(x), x * 2)


def test_a_promised_aligned_tensor_core_tile_on_the_gpu():
  a, b = rand((128, 128), jnp.float16), rand((128, 64), jnp.float16, seed=1)
  got = promised_rows(a, b, jnp.full((128,), 24, jnp.int32))
  np.testing.assert_allclose(got, reference(a[24:88], b), rtol=1e-2, atol=1e-2)


def test_format_specs_print_on_the_gpu(capfd):
  from test_safety_diagnostics import formatted
  jax.block_until_ready(formatted(jnp.arange(128, dtype=jnp.float32)))
  out = capfd.readouterr().out
  assert "i=-003 -3.0 100% v=<tensor<128, float32>>" in out


def test_integer_remainders_floor_on_the_gpu():

  @mg.mgpu_kernel(out_shape=lambda x: x)
  def rem(x, out):
    out[...] = x[...] % 7 + x[...] // -3
  x = jnp.arange(-64, 64, dtype=jnp.int32)
  np.testing.assert_array_equal(rem(x), np.asarray(x) % 7 + np.asarray(x) // -3)


# ---------------------------------------------------------------------------- differential fuzzing
def _compare(got, want, where):
  for g, w in zip(got, want):
    g, w = np.asarray(g), np.asarray(w)
    if g.dtype.kind in "fV" or w.dtype.kind == "f" or "float" in str(g.dtype):
      np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=2e-2, atol=2e-2,
                                 equal_nan=True, err_msg=where)
    else:
      np.testing.assert_array_equal(g, w, err_msg=where)


def _accepted(program):
  kernel = fuzz_check.load(program)
  specs = [jax.ShapeDtypeStruct(s, jnp.dtype(d)) for s, d in program.specs]
  try:
    kernel.check(*specs)
    args = fuzz_check.inputs(program)
    want = kernel(*args, interpret=True)
  except mg.KernelError:
    return None
  return kernel, args, want


def test_fuzzed_kernels_compute_the_same_in_interpret_mode_and_on_the_gpu():
  ran, failures = 0, []
  for seed in range(20 * N_FUZZ):
    if ran >= N_FUZZ:
      break
    program = fuzz.generate(fuzz.RandomChooser(10_000 + seed))
    hit = _accepted(program)
    if hit is None:
      continue
    kernel, args, want = hit
    ran += 1
    try:
      got = jax.block_until_ready(kernel(*args))
      _compare(jax.tree.leaves(got), jax.tree.leaves(want), f"seed {10_000 + seed}")
    except Exception as e:   # noqa: BLE001  (report every kernel that disagrees)
      failures.append(f"--- seed {10_000 + seed}: {type(e).__name__}: {str(e)[:400]}\n{program.source}")
  assert ran >= N_FUZZ // 2, f"only {ran} accepted kernels"
  assert not failures, f"{len(failures)} of {ran} kernels disagree:\n" + "\n".join(failures[:10])


def test_fuzzed_pipelined_loops_compute_the_same_on_the_gpu():
  ran, failures = 0, []
  specs = [jax.ShapeDtypeStruct((pfuzz.M * 64, 64), jnp.float16)] * 2
  for seed in range(N_FUZZ):
    source, _ = pfuzz.generate(fuzz.RandomChooser(seed))
    kernel = fuzz_check.load(fuzz.Program(source, [], None, 5, 0))
    try:
      kernel.check(*specs)
    except mg.KernelError:
      continue
    ran += 1
    want = kernel(*pfuzz.ARGS, interpret=True)
    try:
      _compare(jax.tree.leaves(kernel(*pfuzz.ARGS)), jax.tree.leaves(want), f"seed {seed}")
    except Exception as e:   # noqa: BLE001
      failures.append(f"--- seed {seed}: {type(e).__name__}: {str(e)[:400]}\n{source}")
  assert not failures, f"{len(failures)} of {ran} pipelined kernels disagree:\n" + "\n".join(failures[:10])
