"""Cluster mistakes proved while compiling (frontend/cluster_checks.py): once caught only in
interpret mode, while the CUDA export built them (the GPU would fault, hang or race)."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend import errors as E

from locate import expect, where

S = jax.ShapeDtypeStruct
X = S((512, 64), jnp.float32)
G = lambda x: (x.shape[0] // 128,)


def _x():
  return np.arange(512 * 64, dtype=np.float32).reshape(512, 64)


def _swapped(x):
  return x.reshape(2, 2, 128, 64)[:, ::-1].reshape(512, 64)


def _export(kernel, *specs):
  return jax.export.export(jax.jit(kernel), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- (c) a peer outside the cluster
@mg.mgpu_kernel(out_shape=lambda x: x, grid=G, cluster=(2,))
def peer_past_cluster(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  ml.cluster_sync()
  got = ml.smem((128, x.shape[1]))
  got[...] = ml.cluster_ref(buf, i + 1)[...]
  ml.cluster_sync()
  ml.copy(got, out.at[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=G, cluster=(2,))
def peer_in_cluster(x, out):          # peer_past_cluster with its hint followed
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  ml.cluster_sync()
  got = ml.smem((128, x.shape[1]))
  got[...] = ml.cluster_ref(buf, (ml.program_id(0) + 1) % 2)[...]
  ml.cluster_sync()
  ml.copy(got, out.at[ml.ds(i * 128, 128)])


def test_cluster_ref_of_a_cta_outside_the_cluster_is_an_error_while_compiling():
  expect(peer_past_cluster, [X], E.IndexOutOfBoundsError, "ml.cluster_ref(buf, i + 1)",
         "the CTA index of this ml.cluster_ref is 2 in program (1, 0, 0), outside the cluster's 2 CTAs"
         " along axis 0",
         hint="CTAs of the cluster are numbered 0 to 1 along axis 0: this CTA's own is ml.program_id(0) % 2,"
              " its neighbour's (ml.program_id(0) + 1) % 2")
  x = _x()
  np.testing.assert_array_equal(np.asarray(peer_in_cluster(x, interpret=True)), _swapped(x))
  assert "cluster" in _export(peer_in_cluster, X)


# ---------------------------------------------------------------- (b) syncs some CTAs skip
@mg.mgpu_kernel(out_shape=lambda x: x, grid=G, cluster=(2,))
def sync_in_branch(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  if i % 2 == 0:
    ml.cluster_sync()
  ml.copy(buf, out.at[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=G, cluster=(2,))
def sync_in_loop(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  for _ in ml.range(i % 2 + 1):
    ml.cluster_sync()
  ml.copy(buf, out.at[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=G, cluster=(2,))
def sync_out_of_branch(x, out):       # sync_in_branch with its hint followed
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  ml.cluster_sync()
  ml.copy(buf, out.at[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=G, cluster=(2,))
def sync_on_both_sides(x, out):       # every CTA syncs once, at one place or the other: fine
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  if i % 2 == 0:
    ml.cluster_sync()
  else:
    ml.cluster_sync()
  got = ml.smem((128, x.shape[1]))
  got[...] = ml.cluster_ref(buf, (i + 1) % 2)[...]
  ml.cluster_sync()
  ml.copy(got, out.at[ml.ds(i * 128, 128)])


HANG_HINT = ("call ml.cluster_sync() the same number of times in every CTA of a cluster: move it out of the"
             " branch (or loop) whose condition (or trip count) differs between them")


def test_cluster_sync_only_some_ctas_of_a_cluster_reach_is_an_error_while_compiling():
  expect(sync_in_branch, [X], E.ClusterSyncError, "ml.cluster_sync()",
         "program (0, 0, 0) reaches this ml.cluster_sync() but program (1, 0, 0) of its cluster does not (it"
         " calls ml.cluster_sync() 0 times, program (0, 0, 0) once): the CTAs of a cluster wait for each other"
         " there, so on the GPU this hangs", hint=HANG_HINT)
  expect(sync_in_loop, [X], E.ClusterSyncError, "ml.cluster_sync()",
         "program (1, 0, 0) reaches this ml.cluster_sync() but program (0, 0, 0) of its cluster does not (it"
         " calls ml.cluster_sync() once, program (1, 0, 0) 2 times): the CTAs of a cluster wait for each"
         " other there, so on the GPU this hangs", hint=HANG_HINT)
  x = _x()
  np.testing.assert_array_equal(np.asarray(sync_out_of_branch(x, interpret=True)), x)
  assert "cluster" in _export(sync_out_of_branch, X)


def test_cluster_sync_in_a_branch_waits_for_the_loads_before_it():
  # every CTA syncs once (at one of two places): accepted, and the load into buf lands before the
  # sync inside the branch (it waited only at a top-level sync: the peer read buf before it landed)
  x = _x()
  np.testing.assert_array_equal(np.asarray(sync_on_both_sides(x, interpret=True)), _swapped(x))
  assert "cluster" in _export(sync_on_both_sides, X)


# ---------------------------------------------------------------- (a) a peer's buffer read before a sync
@mg.mgpu_kernel(out_shape=lambda x: x, grid=G, cluster=(2,))
def read_before_sync(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  got = ml.smem((128, x.shape[1]))
  got[...] = ml.cluster_ref(buf, (i + 1) % 2)[...]
  ml.cluster_sync()
  ml.copy(got, out.at[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=G, cluster=(2,))
def write_before_sync(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  buf[...] = ml.zeros((128, x.shape[1]), jnp.float32)
  ml.cluster_ref(buf, (i + 1) % 2)[...] = x.at[ml.ds(i * 128, 128)][...]
  ml.cluster_sync()
  ml.copy(buf, out.at[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=G, cluster=(2,))
def other_half(x, out):               # the peer writes rows 0:64 in this phase; 64:128 are read
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  ml.cluster_sync()
  got = ml.smem((128, x.shape[1]))
  got.at[ml.ds(64, 64)][...] = ml.cluster_ref(buf, (i + 1) % 2).at[ml.ds(64, 64)][...]
  buf.at[ml.ds(0, 64)][...] = x.at[ml.ds(i * 128, 64)][...] * 2
  got.at[ml.ds(0, 64)][...] = buf.at[ml.ds(0, 64)][...]
  ml.cluster_sync()
  ml.copy(got, out.at[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,), cluster=(2,))
def peer_row_before_sync(x, out):     # row 0 was written before the sync, row 1 after it
  i = ml.program_id(0)
  buf = ml.smem((2, 128), jnp.float32)
  buf.at[0][...] = x.at[ml.ds(i * 128, 128)][...]
  ml.cluster_sync()
  buf.at[1][...] = x.at[ml.ds(i * 128, 128)][...]
  a = ml.cluster_ref(buf, 1 - i).at[0][...]
  b = ml.cluster_ref(buf, 1 - i).at[1][...]
  out.at[ml.ds(i * 128, 128)][...] = a + b
  ml.cluster_sync()


def test_peer_buffer_used_before_a_cluster_sync_is_a_race_while_compiling():
  e = expect(read_before_sync, [X], E.RaceError, "ml.cluster_ref(buf",
             "program (0, 0, 0) reads buf of program (1, 0, 0) (ml.cluster_ref) while that program may still"
             " be writing it: no ml.cluster_sync() comes between its write of buf and this access",
             hint="call ml.cluster_sync() after the write of buf and before this ml.cluster_ref access")
  assert any(f":{where(read_before_sync, 'ml.copy(x.at')[0]}:" in n and "(1, 0, 0) writes buf here" in n
             for n in e.notes)
  expect(write_before_sync, [X], E.RaceError, "ml.cluster_ref(buf",
         "program (0, 0, 0) writes buf of program (1, 0, 0) (ml.cluster_ref) while that program may still"
         " be writing it: no ml.cluster_sync() comes between its write of buf and this access")
  expect(peer_row_before_sync, [S((256,), jnp.float32)], E.RaceError, "ml.cluster_ref(buf, 1 - i).at[1]",
         "program (0, 0, 0) reads buf of program (1, 0, 0) (ml.cluster_ref) while that program may still"
         " be writing it: no ml.cluster_sync() comes between its write of buf and this access")
  x = _x()      # the hint followed is the documented swap (peer_in_cluster); half-written buffers pass
  want = _swapped(x).copy()
  want[np.arange(512) % 128 < 64] = x[np.arange(512) % 128 < 64] * 2
  np.testing.assert_array_equal(np.asarray(other_half(x, interpret=True)), want)
  assert "cluster" in _export(other_half, X)


# ---------------------------------------------------------------- (d) no sync after the last peer read
@mg.mgpu_kernel(out_shape=lambda x: x, grid=G, cluster=(2,))
def no_final_sync(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  ml.cluster_sync()
  got = ml.smem((128, x.shape[1]))
  got[...] = ml.cluster_ref(buf, (i + 1) % 2)[...]
  ml.copy(got, out.at[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=G, cluster=(2,))
def final_sync(x, out):               # no_final_sync with its hint followed
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  ml.cluster_sync()
  got = ml.smem((128, x.shape[1]))
  got[...] = ml.cluster_ref(buf, (i + 1) % 2)[...]
  ml.copy(got, out.at[ml.ds(i * 128, 128)])
  ml.cluster_sync()


def test_peer_buffer_read_with_no_cluster_sync_before_the_end_is_a_race_while_compiling():
  expect(no_final_sync, [X], E.RaceError, "ml.cluster_ref(buf",
         "program (0, 0, 0) uses another CTA's SMEM here (ml.cluster_ref), but no ml.cluster_sync() follows"
         " before the kernel ends: the other CTA may exit, and its SMEM be reused, while it is read",
         hint="end the kernel with ml.cluster_sync() (after the last ml.cluster_ref access), so no CTA exits"
              " while a peer still reads or writes its SMEM")
  x = _x()
  np.testing.assert_array_equal(np.asarray(final_sync(x, interpret=True)), _swapped(x))
  assert "cluster" in _export(final_sync, X)
