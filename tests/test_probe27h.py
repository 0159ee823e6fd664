"""Probe 27h (the less-travelled corners: printing, atomics, random numbers, helpers, autotune):
print's f-string fields lost their nested spec fields and conversions, `sep=None` printed "None",
`flush=` was refused, and interpret mode printed a float32 scalar with float64's digits; an
atomic on a one-element SMEM window gave a layout error whose hint did not help, and atomics'
dtype hints named the wrong operation; a seed of a narrow integer dtype got a hint that did not
fit; `async def` helpers ran as plain ones; autotune's configs=None and a timer that returned no
number escaped as raw Python errors."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32


def _raises(fn):
  with pytest.raises(mg.KernelError) as info:
    fn()
  return info.value


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


def _lines(capsys):
  return [l.split("] ", 1)[1] for l in capsys.readouterr().out.splitlines() if l.startswith("[program")]


# ---------------------------------------------------------------- print
WIDTH = 8


@mg.mgpu_kernel(out_shape=lambda x: x)
def nested_specs(x, out, *, name: ml.constexpr = "abc"):
  w = 6
  print(f"[{x[0]:{w}.2f}] [{name!r}] [{name:>{w}}] [{x[1].astype(jnp.int32):+0{WIDTH}d}]")
  out[...] = x[...]


def test_print_fills_nested_spec_fields_and_applies_conversions(capsys):
  x = jnp.arange(128, dtype=I32)
  nested_specs(x.astype(F32) + 0.25, interpret=True)
  assert _lines(capsys) == ["[  0.25] ['abc'] [   abc] [+0000001]"]
  text = nested_specs.mlir(S((128,), F32))
  assert "%6.2f" in text                        # the GPU's printf gets the width too
  _export(nested_specs, S((128,), F32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def runtime_spec_field(x, out):
  w = x[1]
  print(f"{x[0]:{w}}")
  out[...] = x[...]


def test_print_spec_field_of_a_runtime_value_is_an_error():
  expect(runtime_spec_field, [S((128,), I32)], mg.KernelTypeError, "w}}",
         "the format spec's field {w} is a scalar: a spec is fixed when compiling",
         hint="compute the width or precision from static values (constexprs, shapes)")


@mg.mgpu_kernel(out_shape=lambda x: x)
def print_keywords(x, out):
  print("a", x[0], sep=None, end=None, flush=True)
  print("b", x[0], sep="-", end="!\n")
  out[...] = x[...]


def test_print_takes_none_for_sep_and_end_and_flush(capsys):
  print_keywords(jnp.arange(128, dtype=I32), interpret=True)
  assert _lines(capsys) == ["a 0", "b-0!"]
  _export(print_keywords, S((128,), I32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def print_sep_number(x, out):
  print("c", x[0], sep=5)
  out[...] = x[...]


def test_print_sep_that_is_not_text_is_an_error():
  expect(print_sep_number, [S((128,), I32)], mg.KernelTypeError, "print(",
         "print's sep must be a string or None, not a Python int", hint="sep=' '")


@mg.mgpu_kernel(out_shape=lambda x: x)
def print_scalars(x, out):
  print(x[1], x[1].astype(jnp.float16), f"{x[1]=}")
  out[...] = x[...]


def test_interpret_prints_a_scalar_with_its_dtypes_digits(capsys):
  x = jnp.arange(128, dtype=F32) / 100          # x[1] is float32(0.01)
  print_scalars(x, interpret=True)
  assert _lines(capsys) == ["0.01 0.01 x[1]=0.01"]


# ---------------------------------------------------------------- atomics
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((256,), x.dtype), grid=lambda x: (x.shape[0] // 256,))
def float_min(x, out):
  i = ml.program_id(0)
  ml.atomic_min(out.at[...], x.at[ml.ds(i * 256, 256)][...])


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((256,), I32), grid=lambda x: (x.shape[0] // 256,))
def float_min_as_bits(x, out):                 # float_min's hint followed
  i = ml.program_id(0)
  ml.atomic_min(out.at[...], ml.bitcast(x.at[ml.ds(i * 256, 256)][...], jnp.int32))


def test_float32_atomic_min_hint_names_min_and_works_when_followed():
  x = np.random.default_rng(0).random(1024).astype(np.float32)
  # (float_min was MG106, whose hint float_min_as_bits follows; since probe 39c it computes, element by element)
  np.testing.assert_array_equal(np.asarray(float_min(jnp.asarray(x), interpret=True)), x.reshape(4, 256).min(0))
  got = np.asarray(float_min_as_bits(jnp.asarray(x), interpret=True)).view(np.float32)
  np.testing.assert_array_equal(got, x.reshape(4, 256).min(0))
  _export(float_min_as_bits, S((1024,), F32))


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((1,), I32))
def smem_one_element_window(x, out):
  h = ml.smem((1,), jnp.int32)
  h[0] = 0
  ml.atomic_max(h.at[ml.ds(0, 1)], ml.max(x[...]))
  out[0] = h[0]


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((1,), I32))
def smem_one_element_plain(x, out):              # smem_one_element_window's hint followed
  h = ml.smem((1,), jnp.int32)
  h[0] = 0
  h[0] = ml.maximum(h[0], ml.max(x[...]))
  out[0] = h[0]


def test_scalar_atomic_into_a_one_element_smem_window_is_the_single_element_error():
  expect(smem_one_element_window, [S((128,), I32)], mg.KernelTypeError, "ml.atomic_max",
         "ml.atomic_max on a single SMEM element: a scalar is the same in every thread, so update it plainly",
         hint="buf[i] = ml.maximum(buf[i], v) (or make the value a tensor to combine threads)")
  x = jnp.arange(128, dtype=I32) - 7
  assert int(smem_one_element_plain(x, interpret=True)[0]) == 120
  _export(smem_one_element_plain, S((128,), I32))


# ---------------------------------------------------------------- random numbers
@mg.mgpu_kernel(out_shape=lambda s: jax.ShapeDtypeStruct((128,), jnp.uint32))
def narrow_seed(s, out):
  out[...] = ml.randint(s[0], ml.arange(128))


@mg.mgpu_kernel(out_shape=lambda s: jax.ShapeDtypeStruct((128,), jnp.uint32))
def narrow_seed_converted(s, out):             # narrow_seed's hint followed
  out[...] = ml.randint(s[0].astype(jnp.int32), ml.arange(128))


@mg.mgpu_kernel(out_shape=lambda s: jax.ShapeDtypeStruct((128,), jnp.uint32))
def float_seed(s, out):
  out[...] = ml.randint(s[0], ml.arange(128))


def test_seed_of_a_narrow_integer_dtype_is_widened_and_a_float_seed_hints_the_conversion():
  # an int16 seed is widened by its sign, as Triton's (probe 27a); it equals the int32 seed
  s = jnp.asarray([-3, 0, 0, 0], jnp.int16)
  got = narrow_seed(s, interpret=True)
  from mgpu_dsl.frontend.ops.random import philox_reference
  want = [philox_reference((-3) & 0xFFFFFFFF, 0xFFFFFFFF, o)[0] for o in range(128)]
  np.testing.assert_array_equal(np.asarray(got), np.asarray(want, np.uint32))
  np.testing.assert_array_equal(np.asarray(narrow_seed_converted(s, interpret=True)), np.asarray(got))
  _export(narrow_seed, S((4,), jnp.int16))
  e = expect(float_seed, [S((4,), F32)], mg.KernelTypeError, "ml.randint",
             "a random seed must be a Python int or an integer scalar, got a scalar (float32)")
  assert e.hint == "convert it: s[0].astype(jnp.int32), or pass a Python int"


# ---------------------------------------------------------------- helpers
@ml.inline
async def coroutine_helper(v):
  return v


@mg.mgpu_kernel(out_shape=lambda x: x)
def calls_coroutine(x, out):
  out[...] = coroutine_helper(x[...])


def test_async_helper_is_refused():
  e = _raises(lambda: calls_coroutine.check(S((128,), F32)))
  assert type(e) is mg.UnsupportedSyntaxError
  assert e.message == "@ml.inline decorates a plain def function, not an async def"
  assert e.hint == "write `def coroutine_helper(...)`: kernel code has no coroutines"


# ---------------------------------------------------------------- autotune
def _copy_kernel():
  @mg.mgpu_kernel(out_shape=lambda x, *, bm: x, grid=lambda x, *, bm: (x.shape[0] // bm,))
  def copy(x, out, *, bm: ml.constexpr = 128):
    i = ml.program_id(0)
    out.at[ml.ds(i * bm, bm)][...] = x.at[ml.ds(i * bm, bm)][...]
  return copy


@pytest.mark.parametrize("configs, shown", [(None, "None"), (dict(bm=64), "{'bm': 64}"), ("bm", "'bm'")])
def test_autotune_configs_that_are_not_a_collection_are_a_signature_error(configs, shown):
  e = _raises(lambda: mg.autotune(configs=configs)(_copy_kernel()))
  assert type(e) is mg.SignatureError
  assert e.message == f"autotune configs must be a non-empty list of dicts of constexprs, got {shown}"


def test_autotune_configs_from_a_generator_still_work():
  tuned = mg.autotune(configs=(dict(bm=b) for b in (64, 128)))(_copy_kernel())
  x = jnp.arange(256, dtype=F32)
  np.testing.assert_array_equal(tuned(x, interpret=True), x)


def test_autotune_timer_that_returns_no_number_is_a_signature_error():
  tuned = mg.autotune(configs=[dict(bm=64), dict(bm=128)], timer=lambda fn, *a: "fast")(_copy_kernel())
  e = _raises(lambda: tuned.best_config(jnp.ones(256, F32)))
  assert type(e) is mg.SignatureError
  assert e.message == "autotune copy: the timer returned 'fast', not a number of seconds"
  times = iter([2.0, np.float32(1.0)])
  tuned = mg.autotune(configs=[dict(bm=64), dict(bm=128)], timer=lambda fn, *a: next(times))(_copy_kernel())
  assert tuned.best_config(jnp.ones(256, F32)) == {"bm": 128}


# ---------------------------------------------------------------- builtins kernels do not call
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((128,), x.dtype), grid=(2,))
def picks_by_getattr(x, out, *, op: ml.constexpr = "max"):
  i = ml.program_id(0)
  getattr(ml, "atomic_" + op)(out.at[...], x.at[ml.ds(i * 128, 128)][...])


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((128,), x.dtype), grid=(2,))
def picked_outside(x, out, *, update: ml.constexpr):     # picks_by_getattr's hint followed
  i = ml.program_id(0)
  update(out.at[...], x.at[ml.ds(i * 128, 128)][...])


def test_unsupported_builtin_is_named_as_a_builtin_and_the_hint_works():
  e = expect(picks_by_getattr, [S((256,), I32)], mg.UnknownNameError, "getattr(ml",
             "the Python builtin getattr() is not supported in a kernel")
  assert all(f" {b}," in e.hint for b in ("len", "list", "max", "min")) and "pass it as a constexpr" in e.hint
  x = jnp.arange(256, dtype=I32)
  got = picked_outside(x, update=getattr(ml, "atomic_max"), interpret=True)
  np.testing.assert_array_equal(got, np.arange(128, 256))
  _export(lambda x: picked_outside(x, update=ml.atomic_max), S((256,), I32))


# ---------------------------------------------------------------- SMEM planning: windows of one buffer
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((x.shape[0] // 4, 128), x.dtype))
def four_row_windows(x, out):
  buf = ml.smem((16, 128))
  for t in ml.range(x.shape[0] // 16, stages=2):
    for j in ml.static_range(4):
      ml.copy(x.at[ml.ds(t * 16 + j * 4, 4)], buf.at[ml.ds(j * 4, 4)])
    v = buf[...]
    out.at[ml.ds(t * 4, 4)][...] = v[0:4] + v[4:8] + v[8:12] + v[12:16]


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((64, 64), F32))
def four_row_windows_of_a_dot_operand(a, b, out):
  a_s, b_s = ml.smem((64, 64), a.dtype), ml.smem((64, 64), b.dtype)
  ml.copy(a, a_s)
  acc = ml.zeros((64, 64), F32)
  for t in ml.range(b.shape[0] // 64, stages=2):
    for j in ml.static_range(16):
      ml.copy(b.at[ml.ds(t * 64 + j * 4, 4)], b_s.at[ml.ds(j * 4, 4)])
    acc = ml.dot(a_s, b_s, acc)
  out[...] = acc


def test_windows_of_one_buffer_need_whole_tiles_only_where_a_dot_reads_it():
  x = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)
  got = four_row_windows(jnp.asarray(x), interpret=True)
  np.testing.assert_allclose(got, x.reshape(4, 4, 4, 128).sum(1).reshape(16, 128), rtol=1e-6, atol=1e-6)
  _export(four_row_windows, S((64, 128), F32))
  expect(four_row_windows_of_a_dot_operand, [S((64, 64), jnp.bfloat16), S((128, 64), jnp.bfloat16)],
         mg.LayoutError, "b_s.at[ml.ds(j * 4, 4)]",
         "b_s.at[ml.ds(j * 4, 4)] slices the rows or columns of b_s, which is tiled for the tensor cores")
