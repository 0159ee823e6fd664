"""Sources, cache keys and messages found by user probes.

- A kernel's (and a helper's) source is kept from when it was decorated or first read: a file
  saved in an editor without reloading the module (a notebook) never changes what a retrace
  compiles, nor where errors point, nor the disk cache key.
- Cache keys tell 0.0 from -0.0 and find a nan constexpr again.
- A functools.partial, or a kernel decorated twice, is a KernelError at the user's line.
- Columns are characters, not UTF-8 bytes.
- Messages: forward-mode derivatives, an out_shape callable of no outputs, float64 under x64,
  a vmap batch past the grid's limit.
"""
import functools
import importlib
import os
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import deps as D
from mgpu_dsl import language as ml

from locate import expect, where

S = jax.ShapeDtypeStruct
F32 = jnp.float32
THIS = sys.modules[__name__]


# ---------------------------------------------------------------- sources kept from import
MODULE = textwrap.dedent('''\
    import mgpu_dsl as mg
    from mgpu_dsl import language as ml
    SCALE = 1.0


    @ml.inline
    def bump(v):
        return v + 1.0


    @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
    def k(x, out):
        r = ml.ds(ml.program_id(0) * 128, 128)
        out.at[r][...] = bump(x.at[r][...] * SCALE)


    @mg.mgpu_kernel(out_shape=lambda x: x)
    def bad(x, out):
        out[...] = ml.exp(x)
    ''')


@pytest.fixture
def user_module(tmp_path, monkeypatch):
  """(import a module written to a file, the file's path, write new text to it)."""
  monkeypatch.syspath_prepend(str(tmp_path))
  names = []

  def load(name, text=MODULE):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    names.append(name)
    return importlib.import_module(name), path

  def save(path, text):        # an editor's save: new text, a new mtime
    path.write_text(text)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10 ** 9))

  yield load, save
  for n in names:
    sys.modules.pop(n, None)


def test_a_retrace_after_the_file_was_edited_compiles_the_imported_text(user_module):
  load, save = user_module
  mod, path = load("edited_kmod")
  x = jnp.arange(256, dtype=F32)
  np.testing.assert_array_equal(mod.k(x, interpret=True), np.asarray(x) + 1)
  save(path, MODULE.replace("+ 1.0", "- 1000.0").replace("* SCALE", "* SCALE * 0.0"))
  mod.SCALE = 2.0                       # the kernel notices and retraces: the imported text
  assert mod.k.cache_info().retraces == 0
  np.testing.assert_array_equal(mod.k(x, interpret=True), np.asarray(x) * 2 + 1)
  assert mod.k.cache_info().retraces == 1
  y = jnp.arange(512, dtype=F32)
  np.testing.assert_array_equal(mod.k(y, interpret=True), np.asarray(y) * 2 + 1)


def test_lines_added_above_a_kernel_after_import_change_nothing(user_module):
  load, save = user_module
  mod, path = load("shifted_kmod")
  line, col = where(mod.bad, "ml.exp(x)")
  save(path, MODULE.replace("SCALE = 1.0\n", "SCALE = 1.0\n# tuned\n\n@mg.mgpu_kernel(out_shape=lambda x: x)"
                                             "\ndef zero(x, out):\n    out[...] = x[...] * 0.0\n"))
  x = jnp.arange(256, dtype=F32)
  np.testing.assert_array_equal(mod.k(x, interpret=True), np.asarray(x) + 1)
  with pytest.raises(mg.KernelTypeError) as e:       # located in the text Python runs
    mod.bad.check(S((128,), F32))
  assert (e.value.lineno, e.value.col_offset) == (line, col)
  assert e.value.loc.source_line == "    out[...] = ml.exp(x)"


def test_the_disk_cache_key_is_the_imported_text(user_module):
  load, save = user_module
  mod, path = load("keyed_kmod")
  before = D.Dependencies(mod.k.fn).fingerprint()
  save(path, MODULE.replace("+ 1.0", "+ 2.0"))
  assert D.Dependencies(mod.k.fn).fingerprint() == before
  assert "v + 1.0" in before and "v + 2.0" not in before


def test_a_reloaded_module_compiles_its_new_text(user_module):
  load, save = user_module
  mod, path = load("reloaded_kmod")
  x = jnp.arange(256, dtype=F32)
  np.testing.assert_array_equal(mod.k(x, interpret=True), np.asarray(x) + 1)
  save(path, MODULE.replace("+ 1.0", "+ 5.0"))
  mod = importlib.reload(mod)
  np.testing.assert_array_equal(mod.k(x, interpret=True), np.asarray(x) + 5)


HELPERS = textwrap.dedent('''\
    from mgpu_dsl import language as ml


    @ml.inline
    def scale(v):
        return v * 2.0
    ''')

USER = textwrap.dedent('''\
    import mgpu_dsl as mg
    from mgpu_dsl import language as ml
    from far_helpers import scale


    @mg.mgpu_kernel(out_shape=lambda x: x)
    def k(x, out):
        out[...] = scale(x[...])
    ''')


def test_an_inline_helper_edited_in_another_file_before_its_first_use_compiles_as_imported(user_module):
  # @ml.inline keeps its text when it decorates, as @mgpu_kernel does: the edit is not compiled
  # until the module is reloaded (before, the edited text was read at the first trace).
  load, save = user_module
  helpers, path = load("far_helpers", HELPERS)
  mod, _ = load("far_user", USER)
  save(path, HELPERS.replace("2.0", "3.0"))            # Python still runs `v * 2.0`
  x = jnp.arange(128, dtype=F32)
  np.testing.assert_array_equal(mod.k(x, interpret=True), np.asarray(x) * 2)


# ---------------------------------------------------------------- float keys
Z = 0.0


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def recip_global(x, out):
  r = ml.ds(ml.program_id(0) * 128, 128)
  out.at[r][...] = 1.0 / (x.at[r][...] * Z)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def recip(x, out, *, f: ml.constexpr):
  r = ml.ds(ml.program_id(0) * 128, 128)
  out.at[r][...] = 1.0 / (x.at[r][...] * f)


def test_rebinding_a_global_from_0_to_minus_0_recompiles(monkeypatch):
  recip_global.cache_clear()
  x = jnp.ones(128, F32)
  monkeypatch.setattr(THIS, "Z", 0.0)
  assert np.all(np.asarray(recip_global(x, interpret=True)) == np.inf)
  monkeypatch.setattr(THIS, "Z", -0.0)
  assert np.all(np.asarray(recip_global(x, interpret=True)) == -np.inf)
  assert recip_global.cache_info().retraces == 1
  monkeypatch.setattr(THIS, "Z", float("nan"))
  recip_global(x, interpret=True)
  monkeypatch.setattr(THIS, "Z", float("nan"))         # another nan object: the same value
  retraces = recip_global.cache_info().retraces
  recip_global(x, interpret=True)
  assert recip_global.cache_info().retraces == retraces


def test_constexprs_0_and_minus_0_are_two_specialisations_and_nan_is_one():
  recip.cache_clear()
  x = jnp.ones(128, F32)
  assert np.all(np.asarray(recip(x, f=0.0, interpret=True)) == np.inf)
  assert np.all(np.asarray(recip(x, f=-0.0, interpret=True)) == -np.inf)
  info = recip.cache_info()
  assert (info.currsize, info.misses - info.hits) == (2, 2)
  misses = info.misses
  for _ in range(3):
    assert np.all(np.isnan(np.asarray(recip(x, f=float("nan"), interpret=True))))
  assert recip.cache_info().misses == misses + 1
  assert recip.cache_info().currsize == 3
  recip(x, f=(0.0, -0.0)[1], interpret=True)
  assert recip.cache_info().misses == misses + 1


def test_value_keys_and_same():
  assert D.value_key(0.0) != D.value_key(-0.0)
  assert D.value_key(float("nan")) == D.value_key(float("nan"))
  assert D.value_key((0.0, 1)) != D.value_key((-0.0, 1))
  assert D.value_key(np.float32(0.0)) != D.value_key(np.float32(-0.0))
  assert D.value_key(2) != D.value_key(2.0) != D.value_key(True)
  assert not D.same(0.0, -0.0) and D.same(float("nan"), float("nan"))
  assert not D.same((1, 0.0), (1, -0.0)) and D.same((1, 0.5), (1, 0.5))


# ---------------------------------------------------------------- what @mgpu_kernel decorates
def _raw(x, out, s):
  out[...] = x[...] * s


def test_a_partial_is_a_signature_error_at_the_decorating_line():
  with pytest.raises(mg.SignatureError) as e:
    mg.mgpu_kernel(functools.partial(_raw, s=2.0), out_shape=lambda x: x)  # the line
  line = sys._getframe().f_code.co_firstlineno + 2
  assert (e.value.filename, e.value.lineno, e.value.col_offset) == (__file__, line, 4)
  assert e.value.message == "@mgpu_kernel takes a def function, got functools.partial(_raw, s=2.0)"
  assert e.value.hint == ("make s a constexpr, keyword-only after a bare * (def _raw(..., *, s)): a partial"
                          " may bind a kernel's constexprs by keyword (or pass them by keyword at the call)")


def test_decorating_twice_is_a_signature_error_at_the_outer_decorator():
  with pytest.raises(mg.SignatureError) as e:
    @mg.mgpu_kernel(out_shape=lambda x: x)
    @mg.mgpu_kernel(out_shape=lambda x: x)
    def twice(x, out):
      out[...] = x[...] * 2.0
  line = sys._getframe().f_code.co_firstlineno + 2      # the outer decorator
  assert (e.value.filename, e.value.lineno, e.value.col_offset) == (__file__, line, 4)
  assert e.value.message == "@mgpu_kernel decorates twice, which is already an @mgpu_kernel"
  assert e.value.hint == "decorate once: remove the second @mgpu_kernel (pass all options to one)"


# ---------------------------------------------------------------- columns in characters
@mg.mgpu_kernel(out_shape=lambda x: x)
def accents(x, out):
  print("héllo→wörld", 1); out[...] = ml.exp(x)


def test_columns_are_characters_after_non_ascii_text():
  e = expect(accents, [S((128,), F32)], mg.KernelTypeError, "ml.exp(x)",
             "ml.exp works on register values, got x (GMEM ref)")
  assert e.end_col_offset == e.col_offset + len("ml.exp(x)")
  assert e.render().split("\n")[2] == "    " + " " * e.col_offset + "^" + "~" * (len("ml.exp(x)") - 1)


# ---------------------------------------------------------------- messages
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def double(x, out):
  r = ml.ds(ml.program_id(0) * 128, 128)
  out.at[r][...] = x.at[r][...] * 2.0


@pytest.mark.parametrize("mode", ["jacfwd", "jvp"])
def test_forward_mode_derivatives_point_at_custom_jvp(mode):
  f = lambda v: double(v, interpret=True)
  x = jnp.ones(128, F32)
  with pytest.raises(mg.DifferentiationError) as e:
    jax.jacfwd(f)(x) if mode == "jacfwd" else jax.jvp(f, (x,), (x,))
  assert (e.value.lineno, e.value.col_offset) == (double.fn.__code__.co_firstlineno + 1, 0)
  assert e.value.message == ("jax cannot differentiate the kernel double: mgpu_dsl kernels have no"
                             " automatic derivative")
  assert "jax.custom_vjp" in e.value.hint
  assert "for forward mode (jax.jvp, jax.jacfwd) use jax.custom_jvp" in e.value.hint


@mg.mgpu_kernel(out_shape=lambda x: ())
def no_outputs(x):
  v = x[...]


def test_an_out_shape_callable_of_no_outputs_says_so():
  with pytest.raises(mg.LaunchConfigError) as e:
    no_outputs.check(S((128,), F32))
  line, col = where(no_outputs, "out_shape=lambda x: ()")
  assert (e.value.lineno, e.value.col_offset) == (line, col)
  assert e.value.message == ("the out_shape callable returned no outputs (a tuple of 0 items); a kernel"
                             " returns at least one array")


@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=lambda x, s: (x.shape[0] // 128,))
def axpb(x, s: ml.scalar, out):
  r = ml.ds(ml.program_id(0) * 128, 128)
  out.at[r][...] = x.at[r][...] * s


def test_a_python_float_under_jit_with_x64_is_float32_and_a_float64_array_says_x64_is_on():
  """A Python float through jax.jit (a weak float64 scalar with x64) is a float32 scalar, as when
  the kernel is called eagerly; a float64 array under jit is an error whose hint names x64."""
  before = jax.config.jax_enable_x64
  jax.config.update("jax_enable_x64", True)
  try:
    x = jnp.ones(128, jnp.float32)
    np.testing.assert_array_equal(axpb(x, 0.5, interpret=True), np.full(128, 0.5, np.float32))
    np.testing.assert_array_equal(jax.jit(lambda x, s: axpb(x, s, interpret=True))(x, 0.5),
                                  np.full(128, 0.5, np.float32))
    with pytest.raises(mg.SignatureError) as e:
      jax.jit(lambda x, s: axpb(x, s, interpret=True))(x, np.float64(0.5))
    np.testing.assert_array_equal(jax.jit(lambda x, s: axpb(x, jnp.float32(s), interpret=True))(x, 0.5),
                                  np.full(128, 0.5, np.float32))
  finally:
    jax.config.update("jax_enable_x64", before)
  assert e.value.message == "axpb: input 1 (s) has dtype float64, which kernels do not support"
  assert e.value.hint.startswith("jax_enable_x64 is on, so float64 values stay float64 under a transformation:"
                                 " pass jnp.float32(s)")


def test_a_vmap_past_the_limit_maps_over_chunks_as_its_old_hint_said():
  """(MG007 before probe 46f, whose hint said to chunk it with jax.lax.map: the vmap now does so itself)"""
  x = S((70000, 128), F32)
  ours = jax.export.export(jax.jit(jax.vmap(double)), platforms=["cuda"])(x).mlir_module()
  hint = jax.export.export(jax.jit(lambda xs: jax.lax.map(double, xs, batch_size=65535)),
                           platforms=["cuda"])(x).mlir_module()
  assert ours.count("custom_call @mosaic_gpu") == hint.count("custom_call @mosaic_gpu") == 2


def test_the_caret_keeps_the_lines_tabs(user_module):
  load, _ = user_module
  mod, _ = load("tabbed", "import mgpu_dsl as mg\nfrom mgpu_dsl import language as ml\n\n\n"
                          "@mg.mgpu_kernel(out_shape=lambda x: x)\ndef k(x, out):\n"
                          "\tout[...] = x[...] * undefined_name\n")
  with pytest.raises(mg.UnknownNameError) as e:
    mod.k.check(S((128,), F32))
  assert (e.value.lineno, e.value.col_offset) == (7, 21)
  source, caret = e.value.render().splitlines()[1:3]
  assert source == "    \tout[...] = x[...] * undefined_name"
  assert caret == "    \t" + " " * 20 + "^" + "~" * 13
