"""Probe 55a: order statistics of a padded row. `jnp.median(v)` (`jnp.quantile`, `jnp.percentile`, and the NaN-skipping
ones) of a row of 100 elements read as 128 lanes with `other=float('inf')` sorted the padding last, so interpret
mode's sort check (probe 54e) saw nothing wrong, but the statistic ranked all 128 lanes: a silently wrong median.
Such a sort is now MG953 at the user's call (lowering/interpret_pad_sorts.py `_rank_error`), with the hint to fill
the padding with NaN and skip it (`jnp.nanmedian`), which counts only the row's elements and stays fine."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import where

S = jax.ShapeDtypeStruct


@mg.mgpu_kernel(grid=lambda x: (x.shape[0],), out_shape=lambda x: S((x.shape[0],), x.dtype))
def row_median(x, o):
  i = ml.program_id(0)
  c = ml.arange(128)
  v = x.at[i, c].load(mask=c < x.shape[1], other=float("inf"))
  o.at[i].store(jnp.median(v))


@mg.mgpu_kernel(grid=lambda x: (x.shape[0] // 8,), out_shape=lambda x: S((x.shape[0],), x.dtype))
def row_stat(x, o, *, fill: ml.constexpr = float("inf"), kind: ml.constexpr = 0):
  i = ml.program_id(0)
  r = i * 8 + ml.arange(8)
  c = ml.arange(128)
  v = x.at[r[:, None], c[None, :]].load(mask=c[None, :] < x.shape[1], other=fill)
  if kind == 0:
    o.at[ml.ds(i * 8, 8)][...] = jnp.quantile(v, 0.9, axis=1)
  elif kind == 1:
    o.at[ml.ds(i * 8, 8)][...] = jnp.percentile(v, 25.0, axis=1)
  elif kind == 2:
    o.at[ml.ds(i * 8, 8)][...] = jnp.nanmedian(v, axis=1)
  else:
    o.at[ml.ds(i * 8, 8)][...] = jnp.nanpercentile(v, 25.0, axis=1)


def _rows(seed, shape):
  return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _raises(kernel, args, kw, at, message, hint):
  with pytest.raises(mg.MaskedReductionError) as info:
    kernel(*args, **kw, interpret=True)
  e = info.value
  assert e.code == "MG953" and isinstance(e, mg.InterpretError)
  assert (e.lineno, e.col_offset) == where(kernel, at), e.render()
  assert e.message == message
  assert e.hint == hint
  assert "Traceback" not in str(e)


def test_median_of_a_row_padded_with_inf_is_mg953():
  _raises(row_median, [_rows(1, (4, 100))], {}, "jnp.median(v)",
          "jnp.median ranks lanes the masked load at line 22 kept off past the end of x, filled with"
          " other=float('inf') (inf): in program (0, 0, 0) it ranks all 128 lanes, not the 100 elements of data, so"
          " the position it reads is the wrong one",
          "fill the padding with NaN and skip it: other=float('nan') in the masked load at line 22 and jnp.nanmedian")


@pytest.mark.parametrize("kind,fill,name", [(0, float("inf"), "jnp.quantile(v, 0.9, axis=1)"),
                                            (1, float("-inf"), "jnp.percentile(v, 25.0, axis=1)"),
                                            (2, 0.0, "jnp.nanmedian(v, axis=1)")])
def test_quantiles_of_padded_rows_are_mg953_whatever_the_fill(kind, fill, name):
  with pytest.raises(mg.MaskedReductionError) as info:
    row_stat(_rows(2, (16, 100)), fill=fill, kind=kind, interpret=True)
  e = info.value
  assert e.code == "MG953" and (e.lineno, e.col_offset) == where(row_stat, name), e.render()
  assert "it ranks all 128 lanes, not the 100 elements of data" in e.message
  nan = name.split("(")[0].split(".")[1]
  assert e.hint.endswith("jnp." + (nan if nan.startswith("nan") else "nan" + nan))


def test_nan_padding_skipped_by_nan_statistics_counts_only_the_row_where_inf_padding_is_mg953():
  x = _rows(3, (16, 100))
  for kind, ref in [(2, lambda x: np.median(x, 1)), (3, lambda x: np.percentile(x, 25, 1))]:
    got = row_stat(x, fill=float("nan"), kind=kind, interpret=True)
    np.testing.assert_allclose(np.asarray(got), ref(x), rtol=1e-5, atol=1e-6)
    with pytest.raises(mg.MaskedReductionError, match="ranks all 128 lanes"):
      row_stat(x, kind=kind, interpret=True)
  full = _rows(4, (16, 128))      # (full rows: no padding to rank)
  np.testing.assert_allclose(np.asarray(row_stat(full, kind=0, interpret=True)), np.quantile(full, 0.9, 1),
                             rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- a plain store beside atomic scatters
@mg.mgpu_kernel(grid=lambda x: (x.shape[0],), out_shape=lambda x: S((128,), x.dtype))
def zero_then_scatter(x, o):
  i = ml.program_id(0)
  if i == 0:
    o[...] = ml.zeros((128,), ml.float32)
  ml.atomic_add(o.at[ml.arange(128)], x.at[i][...])


@mg.mgpu_kernel(grid=lambda x: (x.shape[0],), out_shape=lambda x: S((256,), x.dtype))
def tail_then_scatter(x, o):
  i = ml.program_id(0)
  if i == 1:
    o.at[ml.ds(64, 128)][...] = x.at[1][...]
  ml.atomic_add(o.at[128 + ml.arange(128)], x.at[i][...])


@mg.mgpu_kernel(grid=lambda x: (x.shape[0],), out_shape=lambda x: S((256,), x.dtype))
def apart(x, o):
  i = ml.program_id(0)
  if i == 0:
    o.at[ml.ds(0, 128)][...] = x.at[0][...]
  ml.atomic_add(o.at[128 + ml.arange(128)], x.at[i][...])


@mg.mgpu_kernel(grid=lambda x: (x.shape[0],), out_shape=lambda x: S(x.shape, x.dtype))
def own_rows(x, o):
  i = ml.program_id(0)
  o.at[i][...] = x.at[i][...]
  ml.atomic_add(o.at[i, ml.arange(128)], x.at[i][...])


HINT = ("an output updated with atomics starts at 0: drop the plain write of o (to start elsewhere, pass the start in"
        " as an input aliased to o), or make it an atomic update too")


@pytest.mark.parametrize("kernel,at,element", [(zero_then_scatter, "o[...]", "o[0]"),
                                               (tail_then_scatter, "o.at[ml.ds(64, 128)]", "o[128]")])
def test_plain_store_overlapping_atomic_scatters_is_mg951_at_compile_time(kernel, at, element):
  x = _rows(5, (4, 128))
  with pytest.raises(mg.RaceError) as info:
    kernel.check(S(x.shape, x.dtype))
  e = info.value
  assert e.code == "MG951"
  assert (e.lineno, e.col_offset) == where(kernel, at), e.render()
  first = "(0, 0, 0)" if kernel is zero_then_scatter else "(1, 0, 0)"
  other = "(1, 0, 0)" if kernel is zero_then_scatter else "(0, 0, 0)"
  assert e.message == (f"program {first} writes {element} here while program {other} adds to it with atomics:"
                       " programs run in no fixed order, so the sum depends on timing")
  assert e.hint == HINT
  # apart windows, and each program's own row, still compile and compute what NumPy does
  apart.check(S(x.shape, x.dtype))
  own_rows.check(S(x.shape, x.dtype))
  np.testing.assert_allclose(np.asarray(apart(x, interpret=True)), np.concatenate([x[0], x.sum(0)]), rtol=1e-5)
  np.testing.assert_allclose(np.asarray(own_rows(x, interpret=True)), 2 * x, rtol=1e-6)
