"""Probe 31d (mgpu_dsl as a citizen of JAX): kernels under jax.jit, jax.vmap, jax.lax.scan,
custom_vjp and autotuning, as a user writes them; interpret mode's run-time errors under jit."""
import linecache
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import where

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32


# ---------------------------------------------------------------- interpret mode's run-time errors under jax.jit
@mg.mgpu_kernel(out_shape=lambda x, idx: x, grid=lambda x, idx: (x.shape[0] // 128,))
def gather_block(x, idx, out):
  i = ml.program_id(0)
  j = idx[0]
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(j * 128, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def int_shift(x, y, out):
  out[...] = x[...] << y[...]


def _raised_at(kernel, cls, at, fn, *args):
  with pytest.raises(mg.KernelError) as info:
    jax.block_until_ready(fn(*args))
  e = info.value
  assert type(e) is cls, f"{type(e).__name__}: {e}"
  assert (e.lineno, e.col_offset) == where(kernel, at), e.render()
  assert e.hint and "Traceback" not in str(e) and "CpuCallback" not in str(e)
  return e


def test_an_interpreter_error_under_jit_is_the_kernel_error_an_eager_call_raises():
  """It was a raw jax.errors.JaxRuntimeError ("INTERNAL: CpuCallback error calling callback:
  Traceback ..."), with the KernelError's text at the end of a traceback through JAX."""
  x = jnp.arange(512, dtype=F32)
  bad = jnp.array([7], I32)
  with pytest.raises(mg.KernelError) as eager:
    gather_block(x, bad, interpret=True)
  f = jax.jit(lambda x, i: gather_block(x, i, interpret=True))
  line = f.__wrapped__.__code__.co_firstlineno
  col = linecache.getline(__file__, line).index("gather_block(x, i")
  for _ in range(2):                       # the first run (compiles) and a cached one
    e = _raised_at(gather_block, mg.OutOfBoundsError, "x.at[ml.ds(j * 128, 128)][...]", f, x, bad)
    assert e.message == eager.value.message == "x[896:1024] is outside x's shape (512,)"
    assert e.notes == (f"{__file__}:{line}:{col}: the call (x: float32[512], idx: int32[1])",), e.notes
  np.testing.assert_array_equal(f(x, jnp.array([1], I32)), np.tile(np.asarray(x[128:256]), 4))
  e = _raised_at(int_shift, mg.InterpretError, "x[...] << y[...]",      # (a zero divisor: jnp's numbers, 57a)
                 jax.jit(lambda a, b: int_shift(a, b, interpret=True)),
                 jnp.ones((128,), I32), jnp.full((128,), 40, I32))
  assert e.message == "a shift by an amount outside 0..31 (undefined on the GPU)"


def test_an_interpreter_error_under_jit_of_vmap_and_scan_is_a_kernel_error():
  x = jnp.arange(512, dtype=F32)
  e = _raised_at(gather_block, mg.OutOfBoundsError, "x.at[ml.ds(j * 128, 128)][...]",
                 jax.jit(jax.vmap(lambda x, i: gather_block(x, i, interpret=True))),
                 jnp.stack([x, x]), jnp.array([[1], [9]], I32))
  assert "batch element 1" in str(e)
  _raised_at(gather_block, mg.OutOfBoundsError, "x.at[ml.ds(j * 128, 128)][...]",
             jax.jit(lambda x, i: jax.lax.scan(lambda c, _: (gather_block(c, i, interpret=True), None),
                                                x, None, length=2)[0]),
             x, jnp.array([9], I32))


# ---------------------------------------------------------------- an autotuned kernel as a value
@mg.autotune(configs=[dict(bs=256), dict(bs=128)])
@mg.mgpu_kernel(out_shape=lambda x, *, bs: x, grid=lambda x, *, bs: (x.shape[0] // bs,))
def tuned_double(x, out, *, bs: ml.constexpr = 128):
  i = ml.program_id(0)
  out.at[ml.ds(i * bs, bs)][...] = x.at[ml.ds(i * bs, bs)][...] * 2


def test_an_autotuned_kernel_copies_and_pickles_as_the_function_it_decorates():
  """pickle.dumps of a top-level @mg.autotune kernel (or of its .kernel) raised PicklingError
  ("__main__.tuned is not this kernel": the name leads to the tuner); copy.deepcopy gave a second
  tuner with its own winners."""
  import copy
  assert pickle.loads(pickle.dumps(tuned_double)) is tuned_double
  assert pickle.loads(pickle.dumps(tuned_double.kernel)) is tuned_double.kernel
  assert copy.deepcopy({"k": tuned_double})["k"] is tuned_double and copy.copy(tuned_double) is tuned_double
  x = jnp.arange(512, dtype=F32)
  np.testing.assert_array_equal(pickle.loads(pickle.dumps(tuned_double))(x, interpret=True), np.asarray(x) * 2)


# ---------------------------------------------------------------- mg.check_specs with arrays and partials
@mg.mgpu_kernel(out_shape=lambda x, *, n: x, grid=lambda x, *, n: (x.shape[0] // n,))
def declared_block_copy(x, out, *, n: ml.constexpr):
  i = ml.program_id(0)
  out.at[ml.ds(i * n, n)][...] = x.at[ml.ds(i * n, n)][...]


def test_check_specs_takes_arrays_array_constexprs_and_a_partial_of_the_kernel():
  """Declaring a second array spec, or a constexpr that is an array, raised ValueError (the
  truth value of an array is ambiguous: declared specs were compared with ==), so the file did
  not import in `python -m mgpu_dsl check`; a functools.partial of the kernel was a KernelTypeError
  showing `<mgpu_dsl.kernel.KernelFunction object at 0x...>`."""
  import functools
  from mgpu_dsl import check as C
  k = declared_block_copy
  mg.check_specs(k, jnp.ones(512, F32), n=128)
  mg.check_specs(k, jnp.zeros(512, F32), n=128)              # the same specialisation: declared once
  mg.check_specs(k, jnp.ones(1024, F32), n=128)
  mg.check_specs(k, S((512,), F32), n=np.array([128, 256]))
  mg.check_specs(k, S((512,), F32), n=np.array([128, 256]))  # and again: once
  mg.check_specs(functools.partial(k, n=256, interpret=True), S((512,), F32))
  declared = C.declared_specs(k)
  assert [(tuple(s.shape for s in specs), type(c["n"]).__name__) for specs, c in declared] == [
      (((512,),), "int"), (((1024,),), "int"), (((512,),), "ndarray"), (((512,),), "int")]
  results = C.check_kernel(k)
  assert [bool(r.errors) for r in results] == [False, False, True, False]
  assert type(results[2].errors[0]) is mg.LaunchConfigError       # n, an array, makes no grid
  assert repr(k).startswith("<mgpu_kernel declared_block_copy at 0x")


# ---------------------------------------------------------------- run-time scalars bound by keyword (a partial)
@mg.mgpu_kernel(out_shape=lambda x, alpha, beta: x, grid=lambda x, alpha, beta: (x.shape[0] // 128,))
def axpb(x, alpha: ml.scalar, beta: ml.scalar, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * alpha + beta


def test_scalars_bound_by_keyword_are_all_named_with_a_call_that_passes_them_all():
  """functools.partial(axpb, alpha=2.0)(x, beta=1.0): the hint wrote axpb(x, alpha), which,
  followed, fails on beta."""
  import functools
  x = jnp.arange(256, dtype=F32)
  want = np.asarray(x) * 2 + 1       # (probe 38g: inputs by keyword are taken, scalars too)
  np.testing.assert_array_equal(functools.partial(axpb, alpha=2.0)(x, beta=1.0, interpret=True), want)
  np.testing.assert_array_equal(axpb(x, 2.0, 1.0, interpret=True), want)


# ---------------------------------------------------------------- the checker and a demo call at import
def test_the_checker_says_a_kernel_called_at_import_runs_because_it_imports_the_file(tmp_path):
  """A file that calls its kernel at its top level (a demo) could not be imported by `python -m
  mgpu_dsl check` on a machine without a GPU: MG010's hint spoke of interpret mode only."""
  import textwrap
  from mgpu_dsl import check as C
  path = tmp_path / "demo_at_import.py"
  path.write_text(textwrap.dedent("""\
      import jax.numpy as jnp
      import mgpu_dsl as mg
      from mgpu_dsl import language as ml

      @mg.mgpu_kernel(out_shape=lambda x: x)
      def copy_it(x, out):
          out[...] = x[...]

      y = copy_it(jnp.ones(128))
      """))
  report = C.check_file(str(path))
  assert type(report.import_error) is mg.NoGpuError
  text = C.render_import_error("demo_at_import.py", report.import_error)
  assert text.splitlines()[-1] == (
      "note: python -m mgpu_dsl check imports the file, running its top-level code: call kernels under"
      ' `if __name__ == "__main__":` (the checker does not run that block) and declare what to check with'
      " mg.check_specs(kernel, *specs)")


# ---------------------------------------------------------------- autotuning a kernel with a run-time scalar
_timed = []


def _fake_timer(fn, *args):
  """Times nothing: records what it was given; the second config is the faster."""
  _timed.append(tuple(type(a).__name__ for a in args))
  return 2.0 if len(_timed) % 2 else 1.0


@mg.autotune(configs=[dict(bs=256), dict(bs=128)], timer=_fake_timer)
@mg.mgpu_kernel(out_shape=lambda x, a, *, bs: x, grid=lambda x, a, *, bs: (x.shape[0] // bs,))
def tuned_scale(x, a: ml.scalar, out, *, bs: ml.constexpr = 128):
  i = ml.program_id(0)
  out.at[ml.ds(i * bs, bs)][...] = x.at[ml.ds(i * bs, bs)][...] * a


def test_tuning_a_kernel_with_a_python_number_for_an_ml_scalar():
  """Tuning (on a GPU, or with timer=) read .shape/.dtype of every argument: a Python number for
  an ml.scalar parameter was a raw AttributeError ('float' object has no attribute 'shape'), eagerly,
  under jax.jit and for specs."""
  _timed.clear()                          # (new shapes each: winners are also kept on disk)
  assert tuned_scale.best_config(jnp.ones(1280, F32), 2.0) == {"bs": 128}
  jax.jit(lambda x: tuned_scale.best_config(x, 2.0) and x)(jnp.ones(1536, F32))   # traced: on a stand-in
  assert tuned_scale.best_config(S((1792,), F32), 2.0) == {"bs": 128}  # a spec: timed on a stand-in
  assert _timed == [("ArrayImpl", "float")] * 6, _timed


def test_an_autotuned_kernel_checks_and_shows_its_ir_as_a_kernel_does():
  """tuned.check(*specs), .typed_ir, .mlir and .cache_info were AttributeErrors: they lived on
  tuned.kernel only, where the tuned constexprs are not chosen."""
  spec = S((1024,), F32)
  tuned_scale.cache_clear()
  tuned_scale.check(spec, 2.0)                          # every config builds
  assert "grid=(8, 1, 1)" in tuned_scale.typed_ir(spec, 2.0)     # bs=128, the faster config
  assert "mosaic_gpu" in tuned_scale.mlir(spec, 2.0)
  assert tuned_scale.cache_info().currsize >= 2
  with pytest.raises(mg.SignatureError, match="bs is chosen by @mg.autotune"):
    tuned_scale.check(spec, 2.0, bs=128)
  with pytest.raises(mg.UncoveredOutputError):          # bs=256 does not cover 1152 elements
    tuned_scale.check(S((1152,), F32), 2.0)


# ---------------------------------------------------------------- a float0 cotangent passed to a kernel
@jax.custom_vjp
def double_and_count(x):
  return scale_and_count(x, interpret=True)


@mg.mgpu_kernel(out_shape=lambda x: (x, S((), I32)))
def scale_and_count(x, y, n):
  y[...] = x[...] * 2.0
  n[...] = ml.sum((x[...] > 0).astype(jnp.int32))


def _double_and_count_fwd(x):
  return scale_and_count(x, interpret=True), None


def _double_and_count_bwd(_, gs):
  return (scale_and_count(gs[1], interpret=True)[0],)    # the mistake: gs[1] is n's float0 cotangent


double_and_count.defvjp(_double_and_count_fwd, _double_and_count_bwd)


def test_a_float0_cotangent_passed_to_a_kernel_is_named_and_explained():
  """The message read `has dtype [('float0', 'V')]`, and the hint listed the supported dtypes."""
  x = jnp.arange(128, dtype=F32)
  with pytest.raises(mg.SignatureError) as info:
    jax.grad(lambda x: double_and_count(x)[0].sum())(x)
  e = info.value
  assert e.message == "scale_and_count: input 0 (x) has dtype float0, which kernels do not support"
  assert e.hint.startswith("float0 is JAX's cotangent of integer and bool values"), e.hint
  assert "leave it out of the kernel call" in e.hint


def test_interpret_given_to_check_says_check_runs_nothing():
  """kernel.check(spec, interpret=True) said only `has no constexpr parameter 'interpret'`."""
  with pytest.raises(mg.SignatureError) as info:
    declared_block_copy.check(S((512,), F32), n=128, interpret=True)
  assert info.value.message == "declared_block_copy has no constexpr parameter 'interpret'"
  assert info.value.hint == ("interpret is not a kernel option here: it chooses how a call runs (kernel(x,"
                             " interpret=True)); check, typed_ir and mlir trace and build the GPU kernel and run"
                             " nothing, so leave it out")
