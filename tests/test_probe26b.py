"""Probe 26b (the fifth regression hunt's findings on static containers and conditions): `d |= ...`
and an aliased `taps += [...]` that silently differed from Python, builtins refusing a dict's static
keys, messages of missing keys and nested lists, print(*parts), and a one-element tensor as a
condition."""
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct
F32 = jnp.float32
ROWS = S((3, 256), F32)
X = jnp.stack([jnp.full((256,), 1.0), jnp.full((256,), 10.0), jnp.full((256,), 5.0)])


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


def _runs(kernel, want, **kw):
  np.testing.assert_array_equal(kernel(X, interpret=True, **kw), want)
  _export(lambda a: kernel(a, **kw), ROWS)


# ---------------------------------------------------------------- d |= {...}: refused, as d.update is
@mg.mgpu_kernel(out_shape=lambda x, *, w: S((256,), x.dtype))
def dict_ior(x, out, *, w: ml.constexpr):
  d = {"a": x.at[0][...]}
  e = d
  if w == "ior":
    d |= {"a": x.at[2][...]}
  elif w == "or":
    d = d | {"a": x.at[2][...]}
  elif w == "spread":
    d = {**d, "a": x.at[2][...]}
  out[...] = e["a"] + d["a"]


def test_a_dicts_or_assignment_is_refused_as_its_update_is():
  # d |= {...} rebound d to a new dict, so e (the same dict in Python) kept the old entry: 1 + 5,
  # where Python gives 5 + 5
  expect(dict_ior, [ROWS], mg.KernelTypeError, "d |=",
         "d |= ...: dicts in a kernel are fixed once built (values while tracing, as tuples are: a change in"
         " place would happen once, while tracing, whatever run-time if or loop it is in), so |= cannot change d",
         w="ior", hint="build a new one: d = d | {'a': x.at[2][...]}, or d = {**d, 'k': v}")
  for w in ("or", "spread"):                 # the hint, followed: a new dict, e keeps the old one as in Python
    _runs(dict_ior, X[0] + X[2], w=w)


# ---------------------------------------------------------------- taps += [v] where another name holds taps
@mg.mgpu_kernel(out_shape=lambda x, *, w: S((256,), x.dtype))
def list_iadd(x, out, *, w: ml.constexpr):
  taps = [x.at[0][...]]
  first = taps
  if w == "iadd":
    taps += [x.at[1][...]]
  elif w == "new":
    taps = taps + [x.at[1][...]]
  elif w == "copy":
    first = list(taps)
    taps += [x.at[1][...]]
  out[...] = sum(first) + len(first) + len(taps)


@mg.mgpu_kernel(out_shape=lambda x: S((256,), x.dtype))
def list_in_tuple(x, out):
  taps = [x.at[0][...]]
  pair = (taps, 2.0)
  taps += [x.at[1][...]]
  out[...] = sum(pair[0]) + pair[1]


@mg.mgpu_kernel(out_shape=lambda x: S((256,), x.dtype))
def list_grown(x, out):
  taps = []
  for i in ml.static_range(3):
    taps += [x.at[i][...] * (i + 1)]
  out[...] = sum(taps)


@ml.inline
def _add(taps, v):
  taps += [v]
  return taps


@mg.mgpu_kernel(out_shape=lambda x, *, w: S((256,), x.dtype))
def list_helper(x, out, *, w: ml.constexpr):
  taps = [x.at[0][...]]
  first = taps if w == "alias" else [x.at[2][...]]
  taps = _add(taps, x.at[1][...])
  out[...] = sum(taps) + sum(first)


def test_an_augmented_list_another_name_holds_is_refused_naming_both():
  # first = taps; taps += [v]: Python extends the one list (first sees v), the kernel rebound taps,
  # so first silently kept one item (2.0 where Python gives 13.0)
  msg = ("taps += ... changes the list taps in place in Python, and first holds that same list, bound at"
         " line {}; in a kernel lists are values, fixed once built: taps += ... makes a new list, so first"
         " would keep the old items")
  hint = "write taps = taps + [x.at[1][...]] (a new list, as in Python: first stays as it was), or give first a copy: "
  expect(list_iadd, [ROWS], mg.KernelTypeError, "taps += [x.at[1]", msg.format(where(list_iadd, "first = taps")[0]),
         w="iadd", hint=hint + "first = list(taps)")
  expect(list_in_tuple, [ROWS], mg.KernelTypeError, "taps += [x.at[1]",      # a tuple holding it, too
         msg.replace("first", "pair").format(where(list_in_tuple, "pair = ")[0]),
         hint=hint.replace("first", "pair") + "list(taps) where pair gets it")
  _runs(list_iadd, X[0] + 1 + 2, w="new")           # the hint, followed: Python's numbers
  _runs(list_iadd, X[0] + 1 + 2, w="copy")
  _runs(list_grown, X[0] + 2 * X[1] + 3 * X[2])   # growing a list nobody else holds still works
  _runs(list_helper, X[0] + X[1] + X[2], w="own")  # taps = add(taps, v): rebound by the call, no alias
  with pytest.raises(mg.KernelTypeError) as info:        # at the helper's line, naming the caller's name
    list_helper.check(ROWS, w="alias")
  e, first = info.value, inspect.getsourcelines(_add.fn)[1]
  assert (e.lineno, e.col_offset) == (first + 2, 2)
  assert e.message == ("taps += ... changes the list taps in place in Python, and first holds that same list, bound"
                       f" at line {where(list_helper, 'first = taps')[0]} in the caller; in a kernel lists are"
                       " values, fixed once built: taps += ... makes a new list, so first would keep the old items")
  assert e.hint == ("write taps = taps + [v] (a new list, as in Python: first stays as it was), or give first a"
                    " copy: list(taps) where first gets it")


# ---------------------------------------------------------------- builtins iterating a dict take its keys
@mg.mgpu_kernel(out_shape=lambda x, *, w: S((256,), x.dtype))
def dict_keys(x, out, *, w: ml.constexpr):
  d = {"b": x.at[1][...], "a": x.at[0][...]}
  if w == "sorted":
    out[...] = d[sorted(d)[0]]
  elif w == "list":
    out[...] = d[list(d)[0]]
  elif w == "tuple":
    out[...] = d[tuple(d)[1]]
  elif w == "min":
    out[...] = d[min(d)] + d[max(d)] * 2
  elif w == "reversed":
    out[...] = d[tuple(reversed(d))[0]]
  elif w == "spread":
    out[...] = d[[*d][0]]
  elif w == "zip":
    acc = x.at[2][...]
    for k, c in zip(d, (3.0, 4.0)):
      acc = acc + d[k] * c
    for i, k in enumerate(d):
      acc = acc + d[k] * i
    out[...] = acc


@pytest.mark.parametrize("w,want", [("sorted", X[0]), ("list", X[1]), ("tuple", X[0]), ("min", X[0] + 2 * X[1]),
                                    ("reversed", X[0]), ("spread", X[1]),
                                    ("zip", X[2] + 3 * X[1] + 4 * X[0] + X[0])])
def test_builtins_iterating_a_dict_of_register_values_take_its_static_keys(w, want):
  # sorted(d) was refused ("sorted cannot take a dict of register values"), as were list, tuple, min,
  # max, reversed, enumerate, zip and [*d], where `for k in d` and sorted(d.keys()) worked
  _runs(dict_keys, want, w=w)


# ---------------------------------------------------------------- a missing key, an index past the end, nested lists
@mg.mgpu_kernel(out_shape=lambda x, *, w: S((256,), x.dtype))
def static_reads(x, out, *, w: ml.constexpr):
  d = {"a": x.at[0][...], "l": [1]}
  t = (x.at[0][...], x.at[1][...])
  rows = [[x.at[0][...]], [x.at[1][...]]]
  if w == "key":
    out[...] = d["b"]
  elif w == "index":
    out[...] = t[2]
  elif w == "append":
    d["l"].append(2)
  elif w == "append_rows":
    rows[1].append(x.at[2][...])
  elif w == "followed":
    d = {**d, 'l': d['l'] + [2]}
    rows = rows[:1] + [rows[1] + [x.at[2][...]]] + rows[2:]
  out[...] = d["a"] + len(d["l"]) + sum(rows[1])


def test_a_missing_key_or_index_names_what_there_is_and_nested_appends_rebuild_the_outer_one():
  expect(static_reads, [ROWS], mg.KernelTypeError, 'd["b"]', "'b' is not a key of d (its keys: 'a', 'l')",
         w="key", hint="index it with one of its keys, d['a'], or read it with a default: d.get('b', v)")
  expect(static_reads, [ROWS], mg.KernelTypeError, "t[2]", "t[2] is out of range: t has 2 items",
         w="index", hint="index t from 0 to 1 (or from -2 to -1)")
  lists = ("lists in a kernel are fixed once built (a loop carries them as values, and a change in place would"
           " happen once, while tracing), so they have no .append")
  expect(static_reads, [ROWS], mg.KernelTypeError, 'd["l"].append', "d['l'].append: " + lists, w="append",
         hint="build a new d: d = {**d, 'l': d['l'] + [2]}")         # was d['l'] = ..., itself refused
  expect(static_reads, [ROWS], mg.KernelTypeError, "rows[1].append", "rows[1].append: " + lists,
         w="append_rows", hint="build a new rows: rows = rows[:1] + [rows[1] + [x.at[2][...]]] + rows[2:]")
  _runs(static_reads, X[0] + 2 + X[1] + X[2], w="followed")          # both hints, followed


# ---------------------------------------------------------------- print(*parts), print(**opts)
@mg.mgpu_kernel(out_shape=lambda x: x)
def print_spread(x, out):
  parts = ("row", ml.program_id(0))
  opts = {"sep": "-"}
  print(*parts, "end", **opts)
  out[...] = x[...]


def test_print_spreads_a_static_tuple_and_a_dict_of_its_options(capsys):
  # print(*parts) was refused (MG001) though any call may spread a static tuple; print(**opts) failed
  # inside the compiler (MG900)
  x = jnp.ones((128,), F32)
  np.testing.assert_array_equal(print_spread(x, interpret=True), x)
  assert capsys.readouterr().out.splitlines()[-1].endswith("row-0-end")
  _export(print_spread, S((128,), F32))


# ---------------------------------------------------------------- a one-element tensor as a condition
@mg.mgpu_kernel(out_shape=lambda x: x)
def keepdims_conditions(x, out):
  v = x[...]
  m = ml.max(v, keepdims=True)
  if m > 0.0:
    v = v * 2.0
  i = 0.0
  while ml.min(v * 0.0 + i, keepdims=True) < 2.0:
    v = v + 0.5
    i = i + 1.0
  out[...] = v


def test_a_keepdims_full_reductions_comparison_is_a_condition_as_its_scalar_is():
  # `if m > 0.0:` of m = ml.max(v, keepdims=True) was MG003 ("got a bool tensor of shape (1, 1)"),
  # though such a tensor combines, reduces and stores as its scalar does
  x = rand.normal(rand.key(0), (64, 128), F32)
  np.testing.assert_array_equal(keepdims_conditions(x, interpret=True), x * 2.0 + 0.5 + 0.5)
  np.testing.assert_array_equal(keepdims_conditions(-jnp.abs(x), interpret=True), -jnp.abs(x) + 0.5 + 0.5)
  _export(keepdims_conditions, S((64, 128), F32))
