"""Probe 52b (the Python a kernel author writes around the tensor code). (1) Python's functional tools over a
static list of tiles, `functools.reduce(jnp.maximum, tiles)`, `functools.reduce(lambda a, b: a * 0.5 + b, tiles,
0.0)`, `map(f, tiles)`, `itertools.accumulate(tiles)`, `itertools.starmap(jnp.maximum, pairs)`, and the operator
module's functions on register values (`operator.add(a, b)`, `functools.reduce(operator.mul, tiles)`), compute as
the Python they mean (reduce, accumulate and starmap were MG003 "cannot take a list of register values", map
MG002, operator.add MG003). (2) Builtins over iterators of register values, `sum(reversed(tiles))` and
`list(zip(evens, odds))`, take their items (the first was MG003 "unsupported operand type(s) for +: 'int' and
'Value'", the second MG003). (3) An input passed as None (Triton's optional pointer, `k(x, w, None, res)` with `if
b is not None:` in the kernel) is Python's None while tracing (it was MG006 at the call, hinting a placeholder
array and a flag); a use no static test guards is MG003 at the use, in the user's words. (4) Starred unpacking,
`*_, d = x.shape`, `first, *rest = tiles`, `a, *mid, b = t`, `q0, *qs = q_ref` of a few rows, unpacks as Python's
(it was MG001 "starred unpacking is not supported in a kernel"). (5) A plain (undecorated) function of the
user's called on run-time values, in the kernel's module or another, a closure a factory made, a partial of one,
a method or a callable instance of the user's class, a module-level lambda in a dict of activations, is an inline
helper, as a def or lambda of the kernel's body already was (it was MG003 "cannot take a register tensor inside a
kernel", hinting @ml.inline); so is one as a lax.fori_loop body or an ml.associative_scan combine. (6) `for j in
range(n)` of static bounds (at most 64 trips) whose body indexes a Python list or tuple by the loop index (`tiles[j]`,
`WEIGHTS[j]`, `W[k]` of `k = 2 * j`) or grows a list (`outs.append(v)`) is unrolled, as Python runs it (it was MG003
"cannot index tiles (a Python list) with a runtime value" or MG005 "outs is rebound inside a runtime loop to a list
of 1", whose hints wrote ml.static_range). (7) `del name` (Pallas's `del scratch_ref` of a parameter the kernel does
not use) unbinds the name, as Python's; a read after it is MG004 (it was MG001 "del is not supported"). (8)
`parts[0] += v` of a list rebinds its item, as `parts[0] = parts[0] + v` does (it was MG003)."""
import functools
import inspect
import itertools
import math
import operator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where
from probe52b_helpers import make_leaky, rms_norm

S = jax.ShapeDtypeStruct
F16, BF16, F32 = jnp.float16, jnp.bfloat16, jnp.float32


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _input(shape, dtype=F32, seed=0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def _parts(x, n=4):
  """The kernels' tiles: n row blocks of x, as float32."""
  return np.asarray(x, np.float32).reshape(n, -1, x.shape[-1])


# ---------------------------------------------------------------- functools.reduce, map, accumulate, starmap
@mg.mgpu_kernel(out_shape=lambda x: S((8, x.shape[1]), x.dtype), grid=(1,))
def reduce_max(x, o):
  tiles = [x[i * 8:(i + 1) * 8, :] for i in range(4)]
  o[...] = functools.reduce(jnp.maximum, tiles)


@mg.mgpu_kernel(out_shape=lambda x: S((8, x.shape[1]), F32), grid=(1,))
def reduce_decayed(x, o, *, decay: ml.constexpr = 0.5):
  tiles = [x[i * 8:(i + 1) * 8, :].astype(jnp.float32) for i in range(4)]
  o[...] = functools.reduce(lambda a, b: a * decay + b, tiles, 0.0)


@mg.mgpu_kernel(out_shape=lambda x: S((8, x.shape[1]), x.dtype), grid=(1,))
def reduce_operators(x, o):
  tiles = [x[i * 8:(i + 1) * 8, :] for i in range(4)]
  o[...] = functools.reduce(operator.add, tiles) + functools.reduce(operator.mul, tiles[:2]) + operator.sub(
      tiles[2], operator.neg(tiles[3]))


@mg.mgpu_kernel(out_shape=lambda x: S((8, x.shape[1]), F32), grid=(1,))
def mapped_and_accumulated(x, o):
  tiles = list(map(lambda i: x[i * 8:(i + 1) * 8, :].astype(jnp.float32), range(4)))
  squares = map(jnp.square, tiles)
  running = list(itertools.accumulate(tiles, jnp.maximum))
  o[...] = sum(squares) + running[-1] * 2.0 + sum(itertools.accumulate(tiles[:2], initial=1.0))


@mg.mgpu_kernel(out_shape=lambda x: S((8, x.shape[1]), x.dtype), grid=(1,))
def paired_maxima(x, o):
  tiles = [x[i * 8:(i + 1) * 8, :] for i in range(4)]
  pairs = list(zip(tiles[::2], tiles[1::2]))
  o[...] = sum(itertools.starmap(jnp.maximum, pairs)) + sum(reversed(tiles))


@mg.mgpu_kernel(out_shape=lambda x: S((8, x.shape[1]), x.dtype), grid=(1,))
def transposed_pairs(x, o):
  tiles = [x[i * 8:(i + 1) * 8, :] for i in range(4)]
  firsts, seconds = zip(*[(a, b) for a, b in zip(tiles, reversed(tiles))])
  o[...] = sum(firsts, start=tiles[0]) - sum(seconds[:2]) + jnp.array(tiles).sum(0) - jnp.asarray(
      tiles, jnp.float32).max(axis=0).astype(x.dtype)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def clipped_in_a_loop(x, o):
  r = ml.ds(ml.program_id(0) * 8, 8)
  acc = x[r, :]
  for _ in range(3):                                 # a run-time loop carrying what the reduce gives
    acc = functools.reduce(operator.add, [acc, acc * 0.5])
  o[r, :] = jnp.where(operator.gt(acc, 0.0), acc, 0.0)


def test_functools_reduce_of_tiles_computes_as_python_folds_them():
  """They were MG003 "reduce cannot take a list of register values inside a kernel"."""
  x = _input((32, 128), BF16, seed=1)
  t = _parts(x)
  np.testing.assert_array_equal(np.asarray(reduce_max(x, interpret=True), np.float32), t.max(0))
  want = np.zeros_like(t[0])
  for v in t:
    want = want * 0.5 + v
  np.testing.assert_allclose(np.asarray(reduce_decayed(x, interpret=True)), want, rtol=1e-6, atol=1e-6)
  x32 = _input((32, 128), F32, seed=2)
  t = _parts(x32)
  np.testing.assert_allclose(np.asarray(reduce_operators(x32, interpret=True)),
                             t.sum(0) + t[0] * t[1] + t[2] + t[3], rtol=1e-5, atol=1e-5)
  for k in (reduce_max, reduce_decayed, reduce_operators):
    k.check(S((32, 128), BF16))


def test_map_accumulate_starmap_and_builtins_over_iterators_of_tiles():
  """map was MG002 ("the Python builtin map() is not supported"), accumulate and starmap MG003, sum(reversed(tiles))
  MG003 "unsupported operand type(s) for +: 'int' and 'Value'" and list(zip(evens, odds)) MG003."""
  x = _input((32, 128), F32, seed=3)
  t = _parts(x)
  run = np.maximum.accumulate(t, axis=0)
  np.testing.assert_allclose(np.asarray(mapped_and_accumulated(x, interpret=True)),
                             (t * t).sum(0) + run[-1] * 2 + (1 + 1 + t[0] + 1 + t[0] + t[1]), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.asarray(paired_maxima(x, interpret=True)),
                             np.maximum(t[0], t[1]) + np.maximum(t[2], t[3]) + t.sum(0), rtol=1e-5, atol=1e-5)
  want = np.asarray(x, np.float64) * 1.5 ** 3
  np.testing.assert_allclose(np.asarray(clipped_in_a_loop(x, interpret=True)), np.maximum(want, 0), rtol=1e-5)
  np.testing.assert_allclose(np.asarray(transposed_pairs(x, interpret=True)), t[0] + t.sum(0) - t[3] - t[2]
                             + t.sum(0) - t.max(0), rtol=1e-5, atol=1e-5)
  # (MG003 "cannot unpack a Python zip"; sum(start=) MG001; jnp.array(tiles) MG003 "array cannot take a list")
  for k in (mapped_and_accumulated, paired_maxima, clipped_in_a_loop, transposed_pairs):
    k.check(S((32, 128), F16))
  assert "mosaic_gpu" in jax.export.export(jax.jit(paired_maxima), platforms=["cuda"])(S((32, 128), F16)).mlir_module()


# ---------------------------------------------------------------- their mistakes, in the user's words
@mg.mgpu_kernel(out_shape=lambda x: S((8, 128), x.dtype), grid=(1,))
def reduce_mismatched(x, o):
  tiles = [x[i * 8:(i + 1) * 8, :] for i in range(3)] + [x[0:8, 0:64]]
  o[...] = functools.reduce(operator.add, tiles)


@mg.mgpu_kernel(out_shape=lambda x: S((8, 128), x.dtype), grid=(1,))
def reduce_of_nothing(x, o, *, n: ml.constexpr = 0):
  o[...] = functools.reduce(jnp.maximum, [x[i * 8:(i + 1) * 8, :] for i in range(n)])


@mg.mgpu_kernel(out_shape=lambda x: S((8, 128), x.dtype), grid=(1,))
def reduce_of_a_tensor(x, o):
  o[...] = functools.reduce(jnp.maximum, x[0:8, :])


def test_mistakes_in_a_reduce_name_the_users_values():
  spec = [S((32, 128), F32)]
  expect(reduce_mismatched, spec, mg.ShapeMismatchError, "functools.reduce(operator.add, tiles)",
         "+ on the running value of shape (8, 128) and tiles[3] of shape (8, 64): the shapes do not broadcast"
         " (axis 1 of the result would be both 128 and 64)")
  expect(reduce_of_nothing, spec, mg.KernelTypeError, "functools.reduce(",
         "functools.reduce of an empty [x[i * 8:(i + 1) * 8, :] for i in range(n)] with no initial value",
         hint="pass an initial value, functools.reduce(jnp.maximum, [x[i * 8:(i + 1) * 8, :] for i in range(n)],"
              " initial), as Python requires")
  expect(reduce_of_a_tensor, spec, mg.KernelTypeError, "functools.reduce(",
         "functools.reduce iterates a register tensor, which a kernel does not do",
         hint="iterate a static tuple or list of values (parts = [t[i] for i in ml.static_range(n)]), or reduce the"
              " tensor with ml.sum, ml.max, ...")


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_functional_tools_on_the_gpu_match_numpy():
  x = _input((32, 128), F32, seed=4)
  t = _parts(x)
  np.testing.assert_allclose(np.asarray(paired_maxima(x)), np.maximum(t[0], t[1]) + np.maximum(t[2], t[3])
                             + t.sum(0), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.asarray(clipped_in_a_loop(x)), np.maximum(np.asarray(x) * 1.5 ** 3, 0), rtol=1e-5)


# ---------------------------------------------------------------- inputs passed as None
@mg.mgpu_kernel(out_shape=lambda x, w, b, r: x, grid=lambda x, *a: (x.shape[0] // 8,))
def add_norm(x_ref, w_ref, b_ref, res_ref, o_ref, *, eps: ml.constexpr = 1e-5):
  """Layer norm with an optional bias and an optional residual added first."""
  rows = ml.ds(ml.program_id(0) * 8, 8)
  v = x_ref[rows, :].astype(jnp.float32)
  if res_ref is not None:
    v = v + res_ref[rows, :].astype(jnp.float32)
  mu = jnp.mean(v, axis=-1, keepdims=True)
  var = jnp.mean((v - mu) ** 2, axis=-1, keepdims=True)
  y = (v - mu) * jax.lax.rsqrt(var + eps) * w_ref[...]
  y = y + b_ref[...] if b_ref is not None else y
  o_ref[rows, :] = y.astype(o_ref.dtype)


def _add_norm(x, w, b, r):
  v = np.asarray(x, np.float64) + (0 if r is None else np.asarray(r, np.float64))
  y = (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + 1e-5) * np.asarray(w, np.float64)
  return y + (0 if b is None else np.asarray(b, np.float64))


def test_inputs_passed_as_none_switch_features_off():
  """`add_norm(x, w, None, None)` was MG006 "input 2 (b_ref) is None; kernel inputs are arrays"."""
  x, r = _input((32, 128), seed=5), _input((32, 128), seed=6)
  w, b = _input((128,), seed=7), _input((128,), seed=8)
  for bias, res in ((b, r), (None, r), (b, None), (None, None)):
    np.testing.assert_allclose(np.asarray(add_norm(x, w, bias, res, interpret=True)), _add_norm(x, w, bias, res),
                               rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(np.asarray(add_norm(x, w, b_ref=None, res_ref=r, interpret=True)),
                             _add_norm(x, w, None, r), rtol=1e-4, atol=1e-4)
  jitted = jax.jit(lambda x, w, r: add_norm(x, w, None, r, interpret=True))
  np.testing.assert_allclose(np.asarray(jitted(x, w, r)), _add_norm(x, w, None, r), rtol=1e-4, atol=1e-4)
  specs = (S((32, 128), BF16), S((128,), F32))
  add_norm.check(*specs, None, None)
  exported = jax.export.export(jax.jit(lambda x, w: add_norm(x, w, None, None)), platforms=["cuda"])(*specs)
  assert "mosaic_gpu" in exported.mlir_module()


@mg.mgpu_kernel(out_shape=lambda x, b: x, grid=(1,))
def reads_none_shape(x, b, o):
  o[...] = x[...] * b.shape[0]


@mg.mgpu_kernel(out_shape=lambda x, b: x, grid=(1,))
def offsets_none(x, b, o):
  o[...] = x[...] + ml.load(b + ml.arange(128))


@mg.mgpu_kernel(out_shape=lambda x, b: x, grid=(1,))
def copies_none(x, b, o):
  s = ml.smem((128,))
  ml.copy(b, s)
  o[...] = x[...] + s[...]


def _add_bias(acc, bias):
  return acc + bias[...]


@mg.mgpu_kernel(out_shape=lambda x, b: x, grid=(1,))
def none_into_a_helper(x, b_ref, o):
  o[...] = _add_bias(x[...], b_ref)


def test_an_unguarded_use_of_an_input_passed_as_none_is_reported_at_the_use():
  """They said "b has no attribute 'shape'" (MG002, hint "check the spelling"), "+ cannot take a Python
  NoneType" and "ml.copy source must be a ref ..., got a Python NoneType"."""
  hint = ("guard its uses with `if b is not None:` (a static test: each call compiles the kernel for what it"
          " passes), or pass an array for b")
  spec = [S((128,), F32), None]
  expect(reads_none_shape, spec, mg.KernelTypeError, "b.shape", "b.shape uses b, an input the call passed as None",
         hint=hint)
  expect(offsets_none, spec, mg.KernelTypeError, "b + ml.arange(128)",
         "b + ml.arange(128) uses b, an input the call passed as None", hint=hint)
  expect(copies_none, spec, mg.KernelTypeError, "ml.copy(b, s)", "ml.copy(b, s) uses b, an input the call passed as"
         " None", hint=hint)
  x = _input((128,), seed=9)
  np.testing.assert_allclose(np.asarray(reads_none_shape(x, x, interpret=True)), 128 * np.asarray(x), rtol=1e-6)
  with pytest.raises(mg.KernelTypeError) as info:       # in a helper: named as the helper and the kernel name it
    none_into_a_helper.check(S((128,), F32), None)
  e = info.value
  lines, first = inspect.getsourcelines(_add_bias)
  assert (e.lineno, e.col_offset) == (first + 1, lines[1].index("bias[...]"))
  assert e.message == "bias[...] uses bias, which is b_ref, an input the call passed as None"
  assert e.hint == ("guard its uses with `if bias is not None:` (a static test: each call compiles the kernel for"
                    " what it passes), or pass an array for b_ref")


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_inputs_passed_as_none_on_the_gpu_match_numpy():
  x, r, w = _input((32, 128), seed=10), _input((32, 128), seed=11), _input((128,), seed=12)
  for res in (r, None):
    np.testing.assert_allclose(np.asarray(add_norm(x, w, None, res)), _add_norm(x, w, None, res), rtol=1e-4,
                               atol=1e-4)


# ---------------------------------------------------------------- starred unpacking
@mg.mgpu_kernel(out_shape=lambda x, h: x, grid=lambda x, h: (x.shape[0] // 8,))
def starred_parts(x, heads, o):
  *_, d = x.shape
  n_heads, *rest = heads.shape
  r = ml.ds(ml.program_id(0) * 8, 8)
  first, *others = [x[r, i * 32:(i + 1) * 32] for i in range(d // 32)]
  a, *mid, b = others
  h0, *hs = heads                                    # the rows of a (4, 128) ref, windows as heads.at[k]
  bias = h0[...] + sum(h[...] for h in hs) * len(rest)
  o[r, :] = jnp.concatenate([first * n_heads, a, *mid, b + sum(mid)], axis=1) + bias


CONFIG = {"scale": 2.0, "shift": 1.0}


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def unpacked_config(x, o):
  scale, shift = CONFIG.values()
  (first, *_), *rest = CONFIG.items()
  o[...] = x[...] * scale + shift + len(first) + len(rest)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def starred_too_few(x, o):
  a, b, *rest, c = x.shape
  o[...] = x[...]


def test_starred_unpacking_unpacks_as_python():
  """Each was MG001 "starred unpacking is not supported in a kernel", hinting indexing."""
  x, h = _input((16, 128), seed=13), _input((4, 128), seed=14)
  xs, hs = np.asarray(x), np.asarray(h)
  p = [xs[:, i * 32:(i + 1) * 32] for i in range(4)]
  want = np.concatenate([p[0] * 4, p[1], p[2], p[3] + p[2]], axis=1) + (hs[0] + hs[1:].sum(0) * 1)
  np.testing.assert_allclose(np.asarray(starred_parts(x, h, interpret=True)), want, rtol=1e-5, atol=1e-5)
  starred_parts.check(S((16, 128), BF16), S((4, 128), BF16))
  np.testing.assert_array_equal(np.asarray(unpacked_config(x, interpret=True)), xs * 2 + 1 + 5 + 1)   # (MG003:
  # "cannot unpack a Python dict_values into 2 names")
  expect(starred_too_few, [S((8, 128), F32)], mg.KernelTypeError, "a, b, *rest, c",
         "cannot unpack a Python tuple of 2 values into 3 names and a starred one (Python's ValueError: not enough values"
         " to unpack)", hint="unpack at most 2 names besides the starred one")


# ---------------------------------------------------------------- plain functions of the user's as helpers
leaky = make_leaky(0.1)                    # a closure a factory made, at module level
ACTIVATIONS = {"relu": lambda v: jnp.maximum(v, 0.0), "leaky": leaky, "none": None}


def _scaled(v, k=2.0):
  return v * k / math.sqrt(v.shape[-1])


def _load_rows(ref, i, rows=8):
  return ref[ml.ds(i * rows, rows), :]


def _store_rows(ref, i, v, rows=8):
  ref[ml.ds(i * rows, rows), :] = v


class _Shift:
  def __init__(self, c):
    self.c = c

  def __call__(self, v):
    return v + self.c

  def twice(self, v):
    return v * 2 + self.c


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x, **k: (x.shape[0] // 8,))
def plain_helpers(x, o, *, act: ml.constexpr = "relu"):
  i = ml.program_id(0)
  v = _load_rows(x, i).astype(jnp.float32)
  y, ms = rms_norm(v, eps=1e-5)
  f = ACTIVATIONS[act]
  y = f(y) if f is not None else y
  y = y + functools.partial(_scaled, k=1.0)(v) + _Shift(1.0)(v) + _Shift(0.5).twice(ms)
  _store_rows(o, i, y.astype(o.dtype))


def _plain_body(j, acc):
  return acc * 0.5 + 1.0


def _plain_combine(p, q):
  return jnp.maximum(p, q)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def plain_loop_and_scan(x, o):
  v = x[...]
  o[...] = jax.lax.fori_loop(0, 3, _plain_body, v) + ml.associative_scan(_plain_combine, v, axis=1)


def _plain_reference(x, act):
  v = np.asarray(x, np.float64)
  ms = (v * v).mean(-1, keepdims=True)
  y = v / np.sqrt(ms + 1e-5)
  y = {"relu": lambda t: np.maximum(t, 0), "leaky": lambda t: np.where(t > 0, t, 0.1 * t), "none": lambda t: t}[act](y)
  return y + v / math.sqrt(v.shape[-1]) + v + 1.0 + ms * 2 + 0.5


def test_plain_functions_of_the_user_are_inline_helpers():
  """Each call was MG003 "... cannot take a register tensor inside a kernel" (hint: decorate it @ml.inline)."""
  x = _input((16, 128), seed=15)
  for act in ("relu", "leaky", "none"):
    np.testing.assert_allclose(np.asarray(plain_helpers(x, act=act, interpret=True)), _plain_reference(x, act),
                               rtol=1e-4, atol=1e-4)
  plain_helpers.check(S((16, 128), BF16), act="leaky")
  v = np.asarray(x, np.float64)[:8]
  want = ((v * 0.5 + 1) * 0.5 + 1) * 0.5 + 1 + np.maximum.accumulate(v, axis=1)
  np.testing.assert_allclose(np.asarray(plain_loop_and_scan(x[:8], interpret=True)), want, rtol=1e-5, atol=1e-5)
  plain_loop_and_scan.check(S((8, 128), F32))


def _reshaped(v):
  return v.reshape(3, -1)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def plain_helper_mistake(x, o):
  o[...] = _reshaped(x[...])


def test_a_mistake_in_a_plain_helper_is_reported_at_its_line():
  """It was MG003 at the call ("_reshaped cannot take a register tensor inside a kernel"); the helper's own
  mistake is reported at its line, with a note at the call."""
  with pytest.raises(mg.ShapeMismatchError) as info:
    plain_helper_mistake.check(S((8, 128), F32))
  e = info.value
  lines, first = inspect.getsourcelines(_reshaped)
  assert (e.filename, e.lineno, e.col_offset) == (__file__, first + 1, lines[1].index("v.reshape"))
  assert e.message == "cannot reshape x[...] of shape (8, 128) (1024 elements) to (3, -1): 1024 is not a multiple of 3"
  assert e.hint == "a reshape keeps the number of elements: the sizes besides -1 must divide it"
  line, col = where(plain_helper_mistake, "_reshaped(x[...])")
  assert f"{__file__}:{line}:{col}: in this call of _reshaped" in e.notes, e.notes


def _scaled_parts(v):
  for k in range(2):
    yield v * k


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def calls_a_generator(x, o):
  o[...] = sum(_scaled_parts(x[...]))


def test_a_generator_helper_is_reported_at_its_yield():
  """It said "_scaled_parts(...) gives no value: _scaled_parts has no return statement with a value"."""
  with pytest.raises(mg.UnsupportedSyntaxError) as info:
    calls_a_generator.check(S((8, 128), F32))
  e = info.value
  lines, first = inspect.getsourcelines(_scaled_parts)
  assert (e.filename, e.lineno, e.col_offset) == (__file__, first + 2, lines[2].index("yield"))
  assert e.message == "_scaled_parts yields its values: a generator is not a helper a kernel can call"
  assert e.hint == ("return them instead, as a list or tuple built in _scaled_parts (return [..., ...]), and iterate"
                    " that")


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_plain_helpers_on_the_gpu_match_numpy():
  x = _input((16, 128), seed=16)
  np.testing.assert_allclose(np.asarray(plain_helpers(x, act="leaky")), _plain_reference(x, "leaky"), rtol=1e-4,
                             atol=1e-4)


# ---------------------------------------------------------------- range loops whose body needs a static index
TAPS = (0.5, 0.25, 0.125, 0.0625)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x, **k: (x.shape[0] // 8,))
def range_over_tiles(x, o, *, parts: ml.constexpr = 4):
  r = ml.ds(ml.program_id(0) * 8, 8)
  width = x.shape[1] // parts
  tiles = [x[r, j * width:(j + 1) * width].astype(jnp.float32) for j in range(parts)]
  acc = jnp.zeros((8, width), jnp.float32)
  for j in range(parts):
    k = (j + 1) % parts
    acc += tiles[j] * TAPS[j] + tiles[k] * TAPS[k]
  outs = []
  for j in range(parts):
    outs.append(acc * (j + 1))
  o[r, :] = jnp.concatenate(outs, axis=-1).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda x: S((8, 2), x.dtype), grid=(1,))
def range_too_long_to_unroll(x, o):
  cols = [x[:, j:j + 1] for j in range(x.shape[1])]
  acc = cols[0]
  for j in range(1, x.shape[1]):
    acc = acc + cols[j]
  o[...] = jnp.concatenate([acc, acc], axis=1)


def test_a_range_loop_whose_body_needs_a_static_index_is_unrolled():
  """The first loop was MG003 "cannot index tiles (a Python list) with a runtime value", the second MG005 "outs is
  rebound inside a runtime loop to a list of 1"; a loop of more than 64 trips keeps its error and hint."""
  x = _input((16, 128), BF16, seed=17)
  t = np.asarray(x, np.float32).reshape(16, 4, 32)
  acc = sum(t[:, j] * TAPS[j] + t[:, (j + 1) % 4] * TAPS[(j + 1) % 4] for j in range(4))
  want = np.concatenate([acc * (j + 1) for j in range(4)], axis=1)
  np.testing.assert_allclose(np.asarray(range_over_tiles(x, interpret=True), np.float32), want, rtol=2e-2, atol=2e-2)
  range_over_tiles.check(S((16, 128), BF16))
  expect(range_too_long_to_unroll, [S((8, 100), F32)], mg.KernelTypeError, "cols[j]",
         "cannot index cols (a Python list) with a runtime value")


# ---------------------------------------------------------------- del
@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=lambda x, s: (x.shape[0] // 8,))
def deletes_unused(x_ref, scratch_ref, o_ref):
  del scratch_ref                                    # Pallas's habit for a parameter the kernel does not use
  r = ml.ds(ml.program_id(0) * 8, 8)
  v = x_ref[r, :]
  tmp, v = v, v * 2
  del tmp
  o_ref[r, :] = v


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def reads_after_del(x, o):
  v = x[...]
  del v
  o[...] = v * 2


def test_del_unbinds_names_as_python():
  """`del scratch_ref` was MG001 "del is not supported in a kernel" (hint: drop the del)."""
  x = _input((16, 128), seed=18)
  np.testing.assert_array_equal(np.asarray(deletes_unused(x, x[:1], interpret=True)), 2 * np.asarray(x))
  deletes_unused.check(S((16, 128), F16), S((1, 128), F16))
  line = where(reads_after_del, "del v")[0]
  expect(reads_after_del, [S((8, 128), F32)], mg.UnboundNameError, "v * 2", f"v is read after `del v` (line {line})",
         hint="read v before the del, or drop the del")


# ---------------------------------------------------------------- augmented assignment of a list's item
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def list_items_updated(x, o):
  r = ml.ds(ml.program_id(0) * 8, 8)
  parts = [x[r, i * 64:(i + 1) * 64] for i in range(2)]
  parts[0] += 1.0
  parts[-1] *= 2.0
  for _ in range(2):                     # a run-time loop carrying the list
    parts[1] -= parts[0]
  if ml.program_id(0) == 1:              # a run-time if merging it
    parts[0] += 10.0
  o[r, :] = jnp.concatenate(parts, axis=1)


def test_augmented_assignment_of_a_list_item():
  """`parts[0] += 1.0` was MG003 "parts is a Python list: lists in a kernel are values, so an item cannot be
  assigned" (hint: rebuild it)."""
  x = _input((16, 128), seed=19)
  xs = np.asarray(x, np.float64)
  a, b = xs[:, :64] + 1, xs[:, 64:] * 2
  want = np.concatenate([a, b - 2 * a], 1)
  want[8:16, :64] += 10
  np.testing.assert_allclose(np.asarray(list_items_updated(x, interpret=True)), want, rtol=1e-5, atol=1e-5)
  list_items_updated.check(S((16, 128), BF16))
