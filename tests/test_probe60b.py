"""Probe 60b: kernels of the open-source Triton op libraries (FlagGems' ATen ops, Liger-Kernel's fused losses and
norms, Unsloth's rope, cross-entropy and GLUs) written the way their authors write them, ported with `from mgpu_dsl
import language as tl` (refs indexed where Triton adds offsets to pointers, `x_ptr.at[row, cols]`), each against a
NumPy / jnp reference in interpret mode and exported for CUDA, at realistic and odd shapes (vocabularies of 32000,
50257 and 128256 columns in chunks, hidden 4096 and 11008, odd row counts, bfloat16 / float16 / float32).

Fixed classes (each was refused though the authors write it):
(1) Math functions of Python numbers: Unsloth's `tl.math.erf(tl.math.rsqrt(2.0) * x)`, a GELU's
    `tl.sqrt(2.0 / math.pi)`, `tl.exp(float("-inf"))`, `ml.atan2(1.0, 2.0)` were MG003 "should be computed in Python";
    they are float32 numbers computed while tracing, as Triton's scalar tensor and jnp's weak float32 compute them
    (frontend/ops/number_math.py).
(2) A helper of static arguments whose body calls the language (FlagGems' `tle.program_id(0)`, a module of
    `def program_id(axis): return tl.program_id(axis).to(tl.int64)`; a lambda, a namespace's function, a static
    method) ran as Python and failed at its own line with MG003 "can only be used inside an @mgpu_kernel function";
    it is traced as an inline helper (frontend/calls.py static_call).
(3) `tl.range(..., num_stages=s)` over register loads whose body calls a module-level alias of a library function
    (Liger's `from triton.language.extra.libdevice import tanh`) or a plain helper was taken for a loop that might
    make TMA loads: MG502 "found no TMA load to pipeline"; such names are seen through (frontend/loop_bounds.py).

The refusals kept (right, with what to write): a store into an input (MG303, alias an output), Triton's pointer
arithmetic (MG003, index the ref), `num_warps=` at the call (MG006, block=), a bfloat16 tile times a float32 0-d
input (MG104: jnp's result depends on what the call passes), an int32 `tl.scalar` stride times an int64 program id
(MG104), a sum over lanes a load filled with -inf (MG953, interpret mode)."""
import math
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as tl
from probe_util import export, rnd

import probe60b_cases_a
import probe60b_cases_b
import probe60b_cases_c
import probe60b_cases_d
from probe60b_cases_c import _gelu_tanh
from probe60b_common import S, BF16, F32, _MODE, CASES, tanh, rsqrt, tle, close


# the corpus's four parts register their cases in CASES when imported, in this order
_PARTS = (probe60b_cases_a, probe60b_cases_b, probe60b_cases_c, probe60b_cases_d)


# ================================================================ the corpus: every kernel above against its reference
_NAMES = list(CASES)
_GROUPS = {f"{_NAMES[i]}..{_NAMES[min(i + 12, len(_NAMES) - 1)]}": _NAMES[i:i + 13] for i in range(0, len(_NAMES), 13)}


@pytest.mark.parametrize("group", list(_GROUPS))
def test_library_kernels_match_their_references_and_export(group):
  """Thirteen kernels a test (each about 0.1 to 0.5 s: the slow tier holds them all)."""
  for name in _GROUPS[group]:
    try:
      CASES[name]()
    except Exception as e:
      raise AssertionError(f"{name}: {type(e).__name__}: {e}") from e


# ================================================================ (1) math of Python numbers
@mg.mgpu_kernel(out_shape=lambda x: (x, S(x.shape, F32), S(x.shape, jnp.int32)))
def number_math(x_ptr, o_ptr, f_ptr, i_ptr):
  x = x_ptr[...]
  o_ptr[...] = x * tl.math.rsqrt(2.0) + tl.sqrt(2.0 / math.pi) + tl.exp(float("-inf"))
  f_ptr[...] = tl.zeros(x.shape, tl.float32) + tl.atan2(1.0, 2.0) + tl.math.pow(2.0, 0.5) + tl.fmod(-7.5, 2.0) \
      + tl.log(4)
  i_ptr[...] = tl.zeros(x.shape, tl.int32) + tl.abs(-3) + tl.fmod(-7, 3)


def test_math_of_python_numbers_is_float32_computed_while_tracing():
  """Each was MG003 "tl.rsqrt of a Python number should be computed in Python". Triton makes the number a float32
  scalar tensor, jnp a weak float32: the float32 value, which leaves a bfloat16 tile bfloat16 (jnp's weak typing)."""
  x = rnd((256,), 1, BF16)
  o, f, i = number_math(x, interpret=True)
  assert o.dtype == BF16
  c1, c2 = float(np.float32(1 / np.sqrt(np.float32(2.0)))), float(np.float32(np.sqrt(np.float32(2.0 / math.pi))))
  want = jnp.asarray(x) * c1 + c2 + 0.0                       # jnp's weak Python floats: bfloat16 steps
  np.testing.assert_array_equal(np.asarray(o, np.float32), np.asarray(want, np.float32))
  f32 = np.float32
  np.testing.assert_array_equal(np.asarray(f), np.full(256, f32(np.arctan2(f32(1), f32(2))) + f32(np.sqrt(f32(2)))
                                                     + f32(np.fmod(f32(-7.5), f32(2))) + f32(np.log(f32(4)))))
  np.testing.assert_array_equal(np.asarray(i), np.full(256, 3 + int(math.fmod(-7, 3)), np.int32))   # 3 + -1
  export(number_math, x)


# ================================================================ (2) helpers of static arguments calling the language
import probe60b_tle  # noqa: E402  (a module of helpers, FlagGems' tle)


def _pid_def(axis):
  return tl.program_id(axis).to(tl.int64)


class _Ext:
  @staticmethod
  def program_id(axis):
    return tl.program_id(axis).to(tl.int64)


_pid_lambda = lambda axis: tl.program_id(axis).to(tl.int64)      # noqa: E731
_HELPERS = {"module": probe60b_tle.program_id, "namespace_def": types.SimpleNamespace(program_id=_pid_def).program_id,
            "namespace_lambda": tle.program_id, "lambda": _pid_lambda, "staticmethod": _Ext.program_id}


@mg.mgpu_kernel(out_shape=lambda x, *, pid: (x, S((1,), jnp.int32)), grid=lambda x, **k: (x.shape[0] // 128,))
def tle_kernel(x_ptr, o_ptr, n_ptr, *, pid: tl.constexpr):
  p = pid(0)
  offs = p * 128 + tl.arange(0, 128)
  tl.store(o_ptr.at[offs], tl.load(x_ptr.at[offs]) + p.to(tl.float32))
  tl.store(n_ptr.at[0], probe60b_tle.num_programs(0).to(tl.int32), mask=p == 0)


@pytest.mark.parametrize("how", list(_HELPERS))
def test_a_helper_of_static_arguments_calling_the_language_is_traced(how):
  """FlagGems' `tle.program_id(0)` ran as Python on its static argument, and `tl.program_id` there raised MG003
  "can only be used inside an @mgpu_kernel function" at the helper's line: it is an inline helper now."""
  x = rnd((512,), 2)
  o, n = tle_kernel(x, pid=_HELPERS[how], interpret=True)
  np.testing.assert_array_equal(np.asarray(o), x + np.repeat(np.arange(4, dtype=np.float32), 128))
  assert int(np.asarray(n)[0]) == 4
  if how == "module":
    export(tle_kernel, x, pid=_HELPERS[how])


def _fails_in_python(n):
  return tl.zeros((n,), tl.float32) if n > 0 else [][0]


@mg.mgpu_kernel(out_shape=lambda x: x)
def static_helper_error(x_ptr, o_ptr):
  o_ptr[...] = x_ptr[...] + _fails_in_python(0)


def test_a_static_helpers_own_python_error_is_still_reported_as_one():
  with pytest.raises(mg.KernelTypeError) as info:
    static_helper_error.check(S((128,), F32))
  e = info.value
  assert (e.lineno - static_helper_error.fn.__code__.co_firstlineno, e.col_offset) == (2, 28)
  assert "_fails_in_python(...) of static values failed while tracing: IndexError" in str(e)


# ================================================================ (3) num_stages= over register loads
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: x, grid=lambda x, **k: (x.shape[0],))
def staged_helper_loop(x_ptr, y_ptr, *, BLOCK: tl.constexpr):
  row = tl.program_id(0)
  N = x_ptr.shape[1]
  for off in tl.range(0, N, BLOCK, num_stages=2):
    cols = off + tl.arange(0, BLOCK)
    v = tl.load(x_ptr.at[row, cols], mask=cols < N, other=0.0)
    tl.store(y_ptr.at[row, cols], _gelu_tanh(v) * rsqrt(4.0), mask=cols < N)


def test_num_stages_over_register_loads_sees_through_library_aliases_and_helpers():
  """A bare `tanh(...)` (Liger's libdevice import) or a plain helper in the loop was taken for a call that might
  make a TMA load, so num_stages=2 asked for a pipeline: MG502 "found no TMA load to pipeline"."""
  x = rnd((3, 1000), 3)
  y = staged_helper_loop(x, BLOCK=256, interpret=True)
  close(y, np.asarray(jax.nn.gelu(x, approximate=True)) * 0.5, 1e-5)
  export(staged_helper_loop, x, BLOCK=256)
  from mgpu_dsl.frontend.loop_bounds import _helper_makes_no_load, _library_function

  def copies(a, b):
    tl.copy(a, b)

  def calls_copies(a, b):
    return copies(a, b)
  assert _library_function(tanh) and _library_function(np.exp) and not _library_function(tl.copy)
  assert _helper_makes_no_load(_gelu_tanh) and not _helper_makes_no_load(copies)
  assert not _helper_makes_no_load(calls_copies) and not _helper_makes_no_load(print)


# ================================================================ (4) Triton's debugging names, tl.assume, autotune keys
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def debugging_names(x_ptr, o_ptr):
  pid = tl.program_id(0)
  tl.assume(pid >= 0)
  offs = pid * 128 + tl.arange(0, 128)
  v = tl.load(x_ptr.at[offs])
  tl.static_print("BLOCK", 128, v)
  tl.device_print("pid", pid)
  tl.store(o_ptr.at[offs], v * 2)


@mg.mgpu_kernel(out_shape=lambda x: x)
def assume_of_a_number(x_ptr, o_ptr):
  tl.assume(x_ptr[...])
  o_ptr[...] = x_ptr[...]


def test_static_print_device_print_and_assume_are_tritons(capsys):
  """Each was MG002 "tl has no attribute ..." whose hint wrote print(...) or dropped tl.assume."""
  x = rnd((256,), 5)
  np.testing.assert_array_equal(np.asarray(debugging_names(x, interpret=True)), x * 2)
  out = capsys.readouterr().out.splitlines()
  assert out.count("BLOCK 128 tensor<128, float32>") == 1             # once, while tracing (a value: its type)
  assert "[program (0, 0, 0)] pid 0" in out and "[program (1, 0, 0)] pid 1" in out
  export(debugging_names, x)
  e, line, col = _error(lambda: assume_of_a_number.check(S((128,), F32)), assume_of_a_number)
  assert (type(e), e.code, line, col) == (mg.KernelTypeError, "MG003", 2, 12)
  assert "tl.assume takes a condition (a comparison), got" in str(e) and e.hint == "tl.assume(pid >= 0)"


@mg.mgpu_kernel(out_shape=lambda x, n, *, BLOCK: x, grid=lambda x, n, *, BLOCK: (tl.cdiv(x.shape[0], BLOCK),))
def keyed(x_ptr, n: tl.scalar, o_ptr, *, BLOCK: tl.constexpr):
  offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
  m = offs < x_ptr.shape[0]
  tl.store(o_ptr.at[offs], tl.load(x_ptr.at[offs], mask=m) + n, mask=m)


def test_autotune_takes_tritons_key_of_argument_names():
  """FlagGems' `@triton.autotune(configs=..., key=["M", "N"])`: it was MG006 "key= must be a callable"."""
  tuned = mg.autotune(configs=[dict(BLOCK=256), dict(BLOCK=1024)], key=["M", "n"])(keyed)
  x = rnd((3000,), 6)
  np.testing.assert_array_equal(np.asarray(tuned(x, 2.0, interpret=True)), x + 2)
  k1, k2 = (tuned._tuning_key([x, v], {}) for v in (2.0, 3.0))
  assert k1 != k2                      # a named run-time scalar separates tunings, as Triton's key
  plain = mg.autotune(configs=[dict(BLOCK=256)])(keyed)
  assert plain._tuning_key([x, 2.0], {}) == plain._tuning_key([x, 3.0], {})


# ================================================================ (6) a dtype called on a number: Liger's online softmax
@mg.mgpu_kernel(out_shape=lambda X, *, BLOCK_SIZE: X, grid=lambda X, **k: (X.shape[0],))
def liger_softmax_multi_block(X_ptr, Y_ptr, *, BLOCK_SIZE: tl.constexpr):
  row_id = tl.program_id(0)
  n_cols = X_ptr.shape[1]
  offs = tl.arange(0, BLOCK_SIZE)
  m = tl.float32(-float("inf"))
  d = tl.float32(0.0)
  for start in tl.range(0, n_cols, BLOCK_SIZE):
    idx = start + offs
    mask = idx < n_cols
    xblk = tl.load(X_ptr.at[row_id, idx], mask=mask, other=-float("inf"), cache_modifier=".ca")
    blk_max = tl.max(xblk, axis=0)
    new_m = tl.maximum(m, blk_max)
    d = d * tl.exp(m - new_m) + tl.sum(tl.exp(xblk - new_m), axis=0)
    m = new_m
  for start in tl.range(0, n_cols, BLOCK_SIZE):
    idx = start + offs
    mask = idx < n_cols
    xblk = tl.load(X_ptr.at[row_id, idx], mask=mask, other=-float("inf"), cache_modifier=".ca")
    tl.store(Y_ptr.at[row_id, idx], (tl.exp(xblk - m) / d).to(Y_ptr.dtype.element_ty), mask=mask, cache_modifier=".cs")


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, F32), S(x.shape, jnp.int32), x))
def dtype_calls(x_ptr, f_ptr, i_ptr, b_ptr):
  x = x_ptr[...]
  f_ptr[...] = x * tl.float32(0.1)                  # a float32 scalar: bfloat16 * float32 is float32, as jnp's
  i_ptr[...] = tl.zeros(x.shape, tl.int32) + tl.int32(7)
  b_ptr[...] = x * tl.bfloat16(0.1)                 # a bfloat16 scalar: 0.1 rounded to bfloat16 first


def test_a_dtype_called_on_a_number_is_a_scalar_of_that_dtype():
  """Liger's multi-block softmax starts its online max and sum as `tl.float32(-float("inf"))`, `tl.float32(0.0)`:
  MG003 "tl.float32 is not callable". A number given to a dtype is that dtype's scalar, as jnp.float32(c) is."""
  x = rnd((3, 70000), 7, BF16)
  y = liger_softmax_multi_block(x, BLOCK_SIZE=8192, interpret=True)
  xf = x.astype(np.float64)
  e = np.exp(xf - xf.max(1, keepdims=True))
  close(y, e / e.sum(1, keepdims=True), 1e-3)
  export(liger_softmax_multi_block, x, BLOCK_SIZE=8192)
  v = rnd((256,), 8, BF16)
  f, i, b = dtype_calls(v, interpret=True)
  np.testing.assert_array_equal(np.asarray(f), v.astype(np.float32) * np.float32(0.1))
  np.testing.assert_array_equal(np.asarray(i), np.full(256, 7, np.int32))
  np.testing.assert_array_equal(np.asarray(b, np.float32), np.asarray(jnp.asarray(v) * jnp.bfloat16(0.1), np.float32))


@mg.mgpu_kernel(out_shape=lambda X, *, BLOCK_SIZE: S((X.shape[0],), F32), grid=lambda X, **k: (X.shape[0],))
def max_of_two_scalars(X_ptr, o_ptr, *, BLOCK_SIZE: tl.constexpr):
  m = tl.float32(-float("inf"))
  blk_max = tl.max(tl.load(X_ptr.at[tl.program_id(0), tl.arange(0, BLOCK_SIZE)]), axis=0)
  new_m = tl.max(m, blk_max)
  tl.store(o_ptr.at[tl.program_id(0)], new_m)


# ================================================================ refusals kept: what to write instead
@mg.mgpu_kernel(out_shape=lambda X, *, BLOCK: S((X.shape[0],), F32), grid=lambda X, **k: (X.shape[0],))
def grad_into_input(X_ptr, loss_ptr, *, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  offs = tl.arange(0, BLOCK)
  x = tl.load(X_ptr.at[pid, offs], mask=offs < X_ptr.shape[1], other=0.0)
  tl.store(X_ptr.at[pid, offs], x * 2, mask=offs < X_ptr.shape[1])
  tl.store(loss_ptr.at[pid], tl.sum(x))


@mg.mgpu_kernel(out_shape=lambda X, *, BLOCK: X, grid=lambda X, **k: (X.shape[0],))
def pointer_offsets(X_ptr, Y_ptr, *, BLOCK: tl.constexpr):
  row = tl.program_id(0)
  offs = tl.arange(0, BLOCK)
  x = tl.load(X_ptr + row * 100 + offs, mask=offs < 100)
  tl.store(Y_ptr.at[row, offs], x, mask=offs < 100)


@mg.mgpu_kernel(out_shape=lambda X, g, *, BLOCK_SIZE: X, grid=lambda X, *a, **k: (X.shape[0],), input_output_aliases={0: 0})
def element_mul_f32_scalar(X_in, grad_output_ptr, X_ptr, *, BLOCK_SIZE: tl.constexpr):
  program_id = tl.program_id(0).to(tl.int64)
  n_cols = X_ptr.shape[1]
  grad_output = tl.load(grad_output_ptr)
  for i in range(0, n_cols, BLOCK_SIZE):
    X_offsets = i + tl.arange(0, BLOCK_SIZE)
    X_block = tl.load(X_ptr.at[program_id, X_offsets], mask=X_offsets < n_cols)
    tl.store(X_ptr.at[program_id, X_offsets], X_block * grad_output, mask=X_offsets < n_cols)


@mg.mgpu_kernel(out_shape=lambda x, stride, n_cols, *, BLOCK: x, grid=lambda x, stride, n_cols, *, BLOCK: (7,))
def int64_row_times_stride(X_ptr, X_stride: tl.scalar, n_cols: tl.scalar, Y_ptr, *, BLOCK: tl.constexpr):
  row = tl.program_id(0).to(tl.int64)
  cols = tl.arange(0, BLOCK)
  x = tl.load(X_ptr.at[row * X_stride + cols], mask=cols < n_cols, other=0.0)
  tl.store(Y_ptr.at[row * X_stride + cols], x, mask=cols < n_cols)


@mg.mgpu_kernel(out_shape=lambda X, *, BLOCK_SIZE: S((X.shape[0],), F32), grid=lambda X, **k: (X.shape[0],))
def smoothing_over_padding(X_ptr, loss_ptr, *, BLOCK_SIZE: tl.constexpr):
  pid = tl.program_id(0)
  n_cols = X_ptr.shape[1]
  scaled_x_sum = 0.0
  for i in range(0, n_cols, BLOCK_SIZE):
    X_offsets = i + tl.arange(0, BLOCK_SIZE)
    X_block = tl.load(X_ptr.at[pid, X_offsets], mask=X_offsets < n_cols, other=float("-inf"))
    scaled_x_sum += tl.sum(-0.1 * X_block)
  tl.store(loss_ptr.at[pid], scaled_x_sum)


def _error(fn, kernel):
  with pytest.raises(mg.KernelError) as info:
    fn()
  e = info.value
  return e, e.lineno - kernel.fn.__code__.co_firstlineno, e.col_offset


def test_refusals_the_libraries_meet_say_what_to_write():
  x = rnd((3, 100), 4)
  e, line, col = _error(lambda: grad_into_input.check(S((3, 100), F32), BLOCK=128), grad_into_input)
  assert (type(e), e.code, line, col) == (mg.InputWriteError, "MG303", 5, 2)
  assert "cannot write into X_ptr: it is an input of the kernel, and inputs are read-only" in str(e)
  assert e.hint.endswith("alias it: input_output_aliases={0: 1}")
  e, line, col = _error(lambda: pointer_offsets.check(S((3, 100), F32), BLOCK=128), pointer_offsets)
  assert (type(e), e.code, line, col) == (mg.KernelTypeError, "MG003", 4, 14)
  assert "got X_ptr (GMEM ref) plus the offset row * 100: a ref is not a pointer" in str(e)
  assert "a row, X_ptr.at[row] (for x_ptr + row * stride)" in e.hint
  e, line, col = _error(lambda: element_mul_f32_scalar.check(S((3, 1000), BF16), S((), F32), BLOCK_SIZE=512),
                        element_mul_f32_scalar)
  assert (type(e), e.code, line, col) == (mg.DtypeMismatchError, "MG104", 8, 46)
  assert e.hint.startswith("convert the scalar, grad_output.astype(jnp.bfloat16)")
  with jax.enable_x64(True):    # (without x64 it computes in int64, as Triton: probe 61b's test_probe61b.py)
    e, line, col = _error(lambda: int64_row_times_stride.check(S((700,), F32), S((), jnp.int32), S((), jnp.int32),
                                                               BLOCK=128), int64_row_times_stride)
  assert (type(e), e.code, line, col) == (mg.DtypeMismatchError, "MG104", 4, 23)
  assert "* on row (int64) and X_stride (int32)" in str(e) and "X_stride.astype(jnp.int64)" in e.hint
  with pytest.raises(mg.SignatureError, match="has no constexpr parameter 'num_warps'") as info:
    grad_into_input(x, BLOCK=128, num_warps=8, interpret=True)
  assert "threads per CTA are block= (a multiple of 128: num_warps=4 is block=128)" in info.value.hint
  e, line, col = _error(lambda: max_of_two_scalars.check(S((3, 128), F32), BLOCK_SIZE=128), max_of_two_scalars)
  assert (type(e), e.code, line, col) == (mg.KernelTypeError, "MG003", 4, 10)      # Liger's tl.max(m, blk_max)
  assert "tl.max: axis must be a static int or a tuple of them, got a scalar" in str(e)
  assert e.hint == "tl.max reduces one tensor; the elementwise max of two is tl.maximum(m, blk_max)"
  e, line, col = _error(lambda: smoothing_over_padding(x, BLOCK_SIZE=64, interpret=True), smoothing_over_padding)
  assert (type(e), e.code, line, col) == (mg.MaskedReductionError, "MG953", 8, 20)
  assert e.hint == "reduce only the lanes the mask keeps: tl.sum(-0.1 * X_block, where=X_offsets < n_cols)"


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["ce_50257_bf16_ls", "ce_1000_f16_softcap", "ce_inplace_f32_128256",
                                  "unsloth_ce_chunks_bf16", "unsloth_ce_bwd_bf16", "ce_zloss", "geglu_exact_bf16",
                                  "geglu_bwd_bf16", "rope_llama_bf16", "unsloth_rope_f16_hd64", "rms_bf16_odd",
                                  "far_f16_odd", "argmax_32000", "gather_f16", "scatter_add", "var_mean_bf16_odd",
                                  "lsm_dim1_bf16", "sparsemax_odd", "topk_f32", "embedding_f32_odd", "group_norm_odd",
                                  "batchnorm_stats_bf16", "nonzero", "unique_sorted", "lora_down_f16_r32_oddK",
                                  "softmax_inner_bf16", "libfuncs", "norms3d_odd", "bf16_atomic", "ranges_rsqrt_number",
                                  "upsample_nearest", "mean_two_stage", "liger_ce_v1_f32", "liger_ce_v1_bf16"])
def test_library_kernel_on_the_gpu(name):
  saved = dict(_MODE)
  _MODE.clear()
  try:
    CASES[name]()
  finally:
    _MODE.update(saved)
