"""Hints that work when followed: each diagnostic's hint, applied literally to the kernel it
was raised for, gives a kernel that checks clean and computes the right numbers in interpret
mode; and docs/errors.md shows each example's hint as the compiler prints it."""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

import test_errors_doc as doc
from locate import expect

S = jax.ShapeDtypeStruct
F32, F16 = jnp.float32, jnp.float16


def test_errors_doc_shows_each_hint_as_printed(tmp_path):
  text = open(doc.DOC).read()
  for code, (_, source, _) in doc.sections().items():
    body = text[text.index(f"## {code} "):]
    block = next(b.group(2) for b in doc.BLOCK.finditer(body) if b.group(1) == "text")
    shown = re.search(r"^hint: (.*)$", block, re.M)
    if shown is None:
      continue
    e = doc.first_error(source, str(tmp_path))
    assert e.hint == shown.group(1), code


# ---------------------------------------------------------------------------- MG103 (a store)
@mg.mgpu_kernel(out_shape=lambda x, y: x)
def overwrite(x, y, out):
  buf = ml.smem((128,))
  ml.copy(x, buf)
  buf[...] = y[...]
  ml.copy(buf, out)


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def overwrite_fixed(x, y, out):          # the hint, followed
  buf = ml.smem((128,))
  ml.copy(x, buf)
  buf[...] = y[...].astype(jnp.float32)
  ml.copy(buf, out)


def test_store_dtype_conflict_hint_converts_the_value():
  expect(overwrite, [S((128,), F32), S((128,), F16)], mg.DtypeConflictError, "buf[...] = y[...]",
         "buf (SMEM, inferred dtype) would be float16 here (store of float16), but line"
         f" {overwrite.fn.__code__.co_firstlineno + 3} already made it float32 (copy from x)",
         hint="convert the stored value to float32: buf[...] = y[...].astype(jnp.float32); giving buf"
              " an explicit dtype does not convert it")
  x, y = jnp.arange(128, dtype=F32), jnp.arange(128, dtype=F16) + 1
  overwrite_fixed.check(S((128,), F32), S((128,), F16))
  np.testing.assert_array_equal(np.asarray(overwrite_fixed(x, y, interpret=True)), np.asarray(y, np.float32))


# ---------------------------------------------------------------------------- MG103 (a copy)
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float16))
def copy_back(x, out):
  buf = ml.smem((128, 64))
  ml.copy(x, buf)
  ml.copy(buf, out)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float16))
def copy_back_fixed(x, out):
  buf = ml.smem((128, 64))
  ml.copy(x, buf)
  half = ml.smem((128, 64), jnp.float16)
  half[...] = buf[...].astype(jnp.float16)
  ml.copy(half, out)


def test_copy_dtype_conflict_hint_gives_the_other_dtype_its_own_buffer():
  expect(copy_back, [S((128, 64), F32)], mg.DtypeConflictError, "ml.copy(buf, out)",
         "buf (SMEM, inferred dtype) would be float16 here (copy buf -> out), but line"
         f" {copy_back.fn.__code__.co_firstlineno + 3} already made it float32 (copy from x)",
         hint="copies never convert: copy the float16 data into a buffer of its own,"
              " ml.smem((128, 64), jnp.float16), and convert between the two in registers with .astype(...)")
  x = jnp.arange(128 * 64, dtype=F32).reshape(128, 64) / 64
  copy_back_fixed.check(S((128, 64), F32))
  np.testing.assert_array_equal(np.asarray(copy_back_fixed(x, interpret=True)), np.asarray(x.astype(F16)))


# ---------------------------------------------------------------------------- MG106
@mg.mgpu_kernel(out_shape=lambda x: x)
def increment(x, out):
  out[...] = x[...] + 1


@mg.mgpu_kernel(out_shape=lambda x: x)
def increment_fixed(x, out):
  out[...] = (x[...].astype(jnp.int32) + 1).astype(jnp.int8)


def test_int8_arithmetic_hint_upcasts_the_loaded_value_not_the_ref():
  x = jnp.arange(128, dtype=jnp.int8)      # (probe 38g: 8-bit + wraps as jnp's, computed in 32 bits)
  np.testing.assert_array_equal(np.asarray(increment(x, interpret=True)), np.asarray(x + 1))
  increment_fixed.check(S((128,), jnp.int8))
  np.testing.assert_array_equal(np.asarray(increment_fixed(x, interpret=True)), np.asarray(x + 1))


# ---------------------------------------------------------------------------- MG302
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def swap(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128,), jnp.float32)
  buf[...] = x.at[ml.ds(i * 128, 128)][...]
  out.at[ml.ds(i * 128, 128)][...] = ml.cluster_ref(buf, 1 - i)[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,), cluster=(2,))
def swap_fixed(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128,), jnp.float32)
  buf[...] = x.at[ml.ds(i * 128, 128)][...]
  ml.cluster_sync()
  out.at[ml.ds(i * 128, 128)][...] = ml.cluster_ref(buf, 1 - i)[...]
  ml.cluster_sync()


def test_cluster_ref_hint_asks_for_the_cluster_and_its_syncs():
  expect(swap, [S((256,), F32)], mg.ClusterRefError, "ml.cluster_ref(buf",
         "ml.cluster_ref along axis 0, but the kernel's cluster is (1, 1, 1)",
         hint="launch with @mgpu_kernel(..., cluster=(2,)) or larger along that axis, and put"
              " ml.cluster_sync() between the peers' writes of buf and these reads, and again after the"
              " last read (a CTA must not exit while a peer reads its SMEM)")
  x = jnp.arange(256, dtype=F32)
  swap_fixed.check(S((256,), F32))
  np.testing.assert_array_equal(np.asarray(swap_fixed(x, interpret=True)),
                                np.asarray(jnp.concatenate([x[128:], x[:128]])))


# ---------------------------------------------------------------------------- MG951
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def copy(x, out):
  out[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def copy_fixed(x, out):
  out.at[ml.ds(ml.program_id(0) * 64, 64)][...] = x.at[ml.ds(ml.program_id(0) * 64, 64)][...]


def test_race_hint_sizes_the_window_to_the_output_and_grid():
  expect(copy, [S((128,), F32)], mg.RaceError, "out[...]",
         "program (0, 0, 0) and program (1, 0, 0) both write out[0]: programs run in no fixed order, so"
         " the result depends on timing",
         hint="give each program its own window of out: 2 programs split its 128 rows into 64 each, e.g."
              " out.at[ml.ds(ml.program_id(0) * 64, 64)], and read the matching window of the inputs"
              "; where programs add partial results into the same elements (split-K), add them atomically:"
              " ml.atomic_add(ref, value) or ml.copy(buf, ref, reduce=\"add\")")
  x = jnp.arange(128, dtype=F32)
  copy_fixed.check(S((128,), F32))
  np.testing.assert_array_equal(np.asarray(copy_fixed(x, interpret=True)), np.asarray(x))


@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=(4,))
def data_dependent_window(x, s, out):
  start = s[0] * ml.program_id(0)        # s holds 0: every program writes rows 0:64
  out.at[ml.ds(start, 64)][...] = x.at[ml.ds(start, 64)][...]


def test_the_interpret_mode_race_hint_sizes_the_window_to_the_output_and_grid():
  """Interpret mode's race hint said out.at[ml.ds(ml.program_id(0) * 128, 128)] whatever the sizes."""
  x = jnp.arange(256, dtype=jnp.float32)
  with pytest.raises(mg.RaceError) as e:
    data_dependent_window(x, jnp.zeros((1,), jnp.int32), interpret=True)
  assert e.value.hint.startswith("give each program its own window of out: 4 programs split its 256 rows into"
                                 " 64 each, e.g. out.at[ml.ds(ml.program_id(0) * 64, 64)], and read the matching"
                                 " window of the inputs; where the place comes from data")     # (s[0] is data)


@mg.mgpu_kernel(out_shape=lambda p: jax.ShapeDtypeStruct((p.shape[0], 2), jnp.float32), grid=lambda p: (p.shape[0] // 64,))
def top2_sliced(p, w):
  i = ml.program_id(0)
  top = ml.sort(p.at[ml.ds(i * 64, 64), :][...], descending=True)[:, :2]
  w.at[ml.ds(i * 64, 64), :][...] = top / ml.sum(top, axis=1, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda p: jax.ShapeDtypeStruct((p.shape[0], 2), jnp.float32), grid=lambda p: (p.shape[0] // 64,))
def top2_masked(p, w):
  i = ml.program_id(0)
  t = ml.sort(p.at[ml.ds(i * 64, 64), :][...], descending=True)
  keep = ml.where(ml.arange(t.shape[1])[None, :] < 2, t, 0.0)
  w.at[ml.ds(i * 64, 64), :][...] = (t / ml.sum(keep, axis=1, keepdims=True))[:, :2]


def test_a_top_k_of_a_few_columns_compiles_and_so_does_the_old_hints_mask():
  """Reducing a (64, 2) tile along its rows was MG204 (now compiled: tiles narrower than a warp take fewer lanes a row, tests/test_narrow_rows.py)."""
  spec = jax.ShapeDtypeStruct((128, 64), jnp.float32)
  top2_sliced.check(spec)
  p = jax.nn.softmax(rand.normal(rand.key(0), (128, 64)), -1)
  s = -np.sort(-np.asarray(p), axis=1)[:, :2]
  np.testing.assert_allclose(top2_sliced(p, interpret=True), s / s.sum(1, keepdims=True), rtol=1e-6)
  np.testing.assert_allclose(top2_masked(p, interpret=True), s / s.sum(1, keepdims=True), rtol=1e-6)
