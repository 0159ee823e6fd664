"""Persistent, pipelined memory-bound kernels: multi-buffered loads and stores, deferred store
waits, loops that start at the program id and step by the grid, uneven tile splits."""
import re
import copy
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend import hw
from mgpu_dsl.frontend import ops as O
from mgpu_dsl.lowering import interpret as interp
from locate import expect, where

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import elementwise as ex  # noqa: E402

S = jax.ShapeDtypeStruct
X = S((4096, 1024), jnp.float32)


def loop_of(kernel):
  return next(o for o in kernel.body.ops if isinstance(o, O.For) and o.stages > 1)


def compiled(kfn, *args, **constexprs):
  return copy.deepcopy(kfn._compile(args, constexprs)["kernel"]), kfn._compile(args, constexprs)["out_specs"]


# ---------------------------------------------------------------- interpret mode
@pytest.mark.parametrize("name", list(ex.KERNELS))
@pytest.mark.parametrize("ctas,stages,specialize", [(3, 2, False), (7, 3, False), (8, 4, False), (32, 2, False),
                                                   (3, 3, True), (32, 2, True)], ids=str)
def test_persistent_kernels_match_jnp_with_uneven_tile_splits(name, ctas, stages, specialize):
  kernel, ref, dtypes = ex.KERNELS[name]
  args = ex.inputs((320, 256), dtypes)           # 20 tiles of 32 x 128
  got = kernel(*args, bm=32, bn=128, ctas=ctas, stages=stages, specialize=specialize, interpret=True)
  ex.check(got, ref(*args))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(3,))
def trip_count_kernel(x, out):
  """The trip count computed by hand; the tile index inside the body."""
  pid, g = ml.program_id(0), ml.num_programs(0)
  n = x.shape[0] // 64
  x_s, o_s = ml.smem((64, 128)), ml.smem((64, 128))
  for k in ml.range((n - pid + g - 1) // g, stages=3):
    t = pid + k * g
    ml.copy(x.at[ml.ds(t * 64, 64)], x_s)
    o_s[...] = x_s[...] + 1.0
    ml.copy(o_s, out.at[ml.ds(t * 64, 64)])


@pytest.mark.parametrize("rows", [64, 128, 192, 640, 704])
def test_runtime_trip_count_with_the_tile_index_computed_in_the_body(rows):
  x = ex.inputs((rows, 128), (jnp.float32,))[0]
  np.testing.assert_array_equal(trip_count_kernel(x, interpret=True), x + 1.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def copy_through_smem(x, out):
  """A loaded stage stored straight back by TMA: the refill waits for that store."""
  buf = ml.smem((64, 128))
  for t in ml.range(ml.program_id(0), x.shape[0] // 64, 2, stages=3):
    ml.copy(x.at[ml.ds(t * 64, 64)], buf)
    ml.copy(buf, out.at[ml.ds(t * 64, 64)])


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((64, 128), x.dtype))
def column_sums(x, out):
  """Loaded stages read into registers only (no store in the loop): a barrier guards the refill."""
  buf = ml.smem((64, 128))
  acc = ml.zeros((64, 128), jnp.float32)
  for k in ml.range(x.shape[0] // 64, stages=2):
    ml.copy(x.at[ml.ds(k * 64, 64)], buf)
    acc = acc + buf[...]
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: (x, x), grid=(2,))
def two_outputs(x, out, neg):
  """Two store buffers, two stores per iteration."""
  x_s, a_s, b_s = ml.smem((32, 128)), ml.smem((32, 128)), ml.smem((32, 128))
  for t in ml.range(ml.program_id(0), x.shape[0] // 32, 2, stages=3):
    ml.copy(x.at[ml.ds(t * 32, 32)], x_s)
    v = x_s[...]
    a_s[...] = v * 2.0
    ml.copy(a_s, out.at[ml.ds(t * 32, 32)])
    b_s[...] = -v
    ml.copy(b_s, neg.at[ml.ds(t * 32, 32)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def nested(x, out):
  """A pipelined loop inside a runtime loop: its store buffer is reused by the next outer pass."""
  x_s, o_s = ml.smem((64, 128)), ml.smem((64, 128))
  for r in range(x.shape[0] // 256):
    for t in ml.range(ml.program_id(0), 4, 2, stages=2):
      ml.copy(x.at[ml.ds(r * 256 + t * 64, 64)], x_s)
      o_s[...] = x_s[...] * 3.0
      ml.copy(o_s, out.at[ml.ds(r * 256 + t * 64, 64)])


@pytest.mark.parametrize("kfn,want", [
    (copy_through_smem, lambda x: (x,)), (two_outputs, lambda x: (2 * x, -x)), (nested, lambda x: (3 * x,))],
    ids=lambda v: getattr(v, "__name__", ""))
def test_pipelined_loops_with_stores_interpret_without_races(kfn, want):
  x = ex.inputs((512, 128), (jnp.float32,))[0]
  got = kfn(x, interpret=True)
  for g, w in zip(got if isinstance(got, tuple) else (got,), want(x)):
    np.testing.assert_array_equal(g, w)


def test_register_only_reads_of_loaded_stages_interpret():
  x = ex.inputs((640, 128), (jnp.float32,))[0]
  np.testing.assert_allclose(column_sums(x, interpret=True), x.reshape(10, 64, 128).sum(0), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- the IR
def test_store_buffers_get_one_copy_per_stage_and_a_deferred_wait():
  text = ex.scale.typed_ir(X, bm=64, bn=128, stages=3)
  assert text.count("ref<SMEM, 3x64x128, float32> = smemalloc") == 2     # x_s and o_s
  body = text[text.index("stages=3"):]
  assert "awaitstores read_only=True pending=2" in body                   # (stages - 1) stores in flight
  assert body.index("awaitstores read_only=True pending=2") < body.index("store ref=")
  assert "pending=0" not in body[:body.index("yield")]                    # no full wait in the loop
  assert body.rstrip().splitlines()[-1].strip().startswith("awaitstores read_only=True pending=0")  # at the end:
  # every store has left SMEM; the grid's completion makes their GMEM writes visible
  assert "barrier" not in body[:body.index("yield")]                      # the refill needs none


def test_deferred_wait_counts_every_store_of_an_iteration():
  text = two_outputs.typed_ir(S((512, 128), jnp.float32))
  assert "awaitstores read_only=True pending=4" in text                  # (3 - 1) iterations x 2 stores


def test_refill_of_a_stored_stage_waits_for_this_iterations_stores_only():
  text = copy_through_smem.typed_ir(S((512, 128), jnp.float32))
  body = text[text.index("stages=3"):]
  assert "awaitstores read_only=True pending=1" in body
  assert body.index("pending=1") < body.index("if cond")                  # before the refill


def test_register_reads_keep_the_barrier_before_the_refill():
  body = column_sums.typed_ir(S((640, 128), jnp.float32))
  loop = body[body.index("stages=2"):]
  assert "barrier" in loop[:loop.index("if cond")]


@mg.mgpu_kernel(out_shape=lambda a, b, c: S((64, 64), jnp.float32))
def two_dots(a, b, c, out):
  """Attention's shape of loop: a dot whose result is read, then a dot on a second loaded tile."""
  a_s, b_s, c_s = ml.smem((64, 64), jnp.float16), ml.smem((64, 64), jnp.float16), ml.smem((64, 64), jnp.float16)
  ml.copy(a, a_s)
  acc = ml.zeros((64, 64), jnp.float32)
  for k in ml.range(b.shape[0] // 64, stages=2):
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s)
    ml.copy(c.at[ml.ds(k * 64, 64)], c_s)
    s = ml.dot(a_s, b_s) * 0.125
    acc = ml.dot(s.astype(jnp.float16), c_s, acc)
  out[...] = acc


def test_a_loop_whose_dot_result_is_read_refills_as_soon_as_the_last_iterations_dots_retire():
  specs = (S((64, 64), jnp.float16), S((256, 64), jnp.float16), S((256, 64), jnp.float16))
  text = two_dots.typed_ir(*specs)
  body = text[text.index("stages=2"):text.index("yield values=[%")]
  dots = [i for i, l in enumerate(body.splitlines()) if "= dot " in l]
  lines = body.splitlines()
  refill = next(i for i, l in enumerate(lines) if l.strip().startswith("if cond"))
  assert dots[0] < refill < dots[1]                               # between the two dots
  waits = [l.split("#")[0].strip() for l in lines[dots[0]:refill] if l.strip().startswith("dotwait")]
  assert waits == ["dotwait pending=0"]                           # the first dot (and older) retired
  a, b, c = (jnp.asarray(np.random.default_rng(i).standard_normal(sp.shape), jnp.float16)
             for i, sp in enumerate(specs))
  want = sum((np.asarray(a, np.float32) @ np.asarray(b, np.float32)[k * 64:(k + 1) * 64] * 0.125)
             .astype(np.float16).astype(np.float32) @ np.asarray(c, np.float32)[k * 64:(k + 1) * 64]
             for k in range(4))
  np.testing.assert_allclose(two_dots(a, b, c, interpret=True), want, rtol=2e-2, atol=2e-2)


def test_loop_from_program_id_by_grid_counts_trips_at_run_time():
  text = ex.scale.typed_ir(X, ctas=8)
  assert "kind=floordiv" in text and "numprograms" in text
  assert "for start=0 stop=%" in text


def test_mosaic_module_waits_for_all_but_the_newest_stores():
  txt = ex.scale.mlir(X, stages=3)
  assert re.search(r"cp\.async\.bulk\.wait_group 2 \{?read", txt)    # (jax 0.11 prints "2 read")
  assert "cp.async.bulk.wait_group 0" in txt


@pytest.mark.parametrize("name", list(ex.KERNELS))
def test_persistent_kernels_export_for_cuda(name):
  kernel, _, dtypes = ex.KERNELS[name]
  specs = [X.update(dtype=d) for d in dtypes]
  exported = jax.export.export(jax.jit(kernel), platforms=["cuda"])(*specs)
  assert "@mosaic_gpu" in exported.mlir_module()


def test_num_sms_is_the_h200s_without_a_gpu():
  on_gpu = any(d.platform == "gpu" for d in jax.devices())
  assert mg.num_sms() == (jax.devices()[0].core_count if on_gpu else hw.NUM_SMS)
  assert f"grid=({mg.num_sms()}, 1, 1)" in ex.scale.typed_ir(X)


# ---------------------------------------------------------------- races the interpreter reports
@pytest.mark.parametrize("change", ["drop", "too_lax"])
def test_missing_deferred_store_wait_is_a_race(change):
  x = ex.inputs((640, 128), (jnp.float32,))[0]
  kernel, specs = compiled(ex.scale, x, bm=64, bn=128, stages=2, ctas=2)
  body = loop_of(kernel).body
  i = next(i for i, o in enumerate(body.ops) if isinstance(o, O.AwaitStores))
  if change == "drop":
    del body.ops[i]
  else:
    body.ops[i] = O.AwaitStores(True, body.ops[i].loc, pending=body.ops[i].pending + 1)
  with pytest.raises(interp.RaceError, match="overwritten while a TMA store may still be reading it") as e:
    interp.run(kernel, [x], specs)
  assert e.value.lineno == where(ex.scale, "o_s[...] = x_s")[0]
  assert f":{where(ex.scale, 'ml.copy(o_s')[0]}:" in str(e.value)      # the note names the store


def test_refill_before_the_stored_stage_is_read_is_a_race():
  x = ex.inputs((512, 128), (jnp.float32,))[0]
  kernel, specs = compiled(copy_through_smem, x)
  body = loop_of(kernel).body
  body.ops[:] = [o for o in body.ops if not isinstance(o, O.AwaitStores)]
  with pytest.raises(interp.RaceError, match="overwritten while a TMA store may still be reading it") as e:
    interp.run(kernel, [x], specs)
  assert e.value.lineno == where(copy_through_smem, "ml.copy(x.at")[0]


def test_kernel_end_waits_for_stores_of_pipelined_stages():
  x = ex.inputs((512, 128), (jnp.float32,))[0]
  kernel, specs = compiled(copy_through_smem, x)
  kernel.body.ops[:] = [o for o in kernel.body.ops if not isinstance(o, O.AwaitStores)]
  with pytest.raises(interp.RaceError, match="ends while this TMA store may still be in flight"):
    interp.run(kernel, [x], specs)


# ---------------------------------------------------------------- diagnostics
@mg.mgpu_kernel(out_shape=lambda x: x)
def in_place(x, out):
  buf = ml.smem((64, 128))
  for k in ml.range(x.shape[0] // 64, stages=2):
    ml.copy(x.at[ml.ds(k * 64, 64)], buf)
    buf[...] = buf[...] * 2
    ml.copy(buf, out.at[ml.ds(k * 64, 64)])


def test_writing_a_pipelined_load_buffer_is_rejected_with_the_two_buffer_pattern():
  e = expect(in_place, [S((256, 128), jnp.float32)], mg.PipelineError, "buf[...] = buf",   # at the write
             "buf is loaded by TMA in a pipelined loop, so the loop may only read it whole"
             " (ml.dot, ml.copy from it, or [...]), read windows of it into registers, or pass windows of"
             " it to ml.dot")
  assert "separate ml.smem buffer" in e.hint


# ---------------------------------------------------------------- on the H200
GPU_CONFIGS = [dict(), dict(bm=32, bn=128, stages=4), dict(bm=32, bn=256, stages=2, ctas=2 * hw.NUM_SMS),
               dict(bm=64, bn=128, stages=2, ctas=5), dict(specialize=True), dict(bm=32, bn=128, stages=4,
                                                                                   specialize=True, ctas=7)]


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(ex.KERNELS))
@pytest.mark.parametrize("cfg", GPU_CONFIGS, ids=str)
def test_persistent_kernels_on_the_gpu_match_interpret_mode_and_jnp(name, cfg):
  kernel, ref, dtypes = ex.KERNELS[name]
  args = ex.inputs((4160, 1024), dtypes)         # 520 tiles of 64 x 128: uneven over 132 CTAs
  got = jax.jit(lambda *a: kernel(*a, **cfg))(*args)
  ex.check(got, ref(*args))
  small = [a[:320, :256] for a in args]
  ex.check(jax.jit(lambda *a: kernel(*a, **cfg))(*small), kernel(*small, interpret=True, **cfg))


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [64, 256, 704, 4096])
def test_loops_written_by_hand_on_the_gpu(rows):
  x = ex.inputs((rows, 128), (jnp.float32,))[0]
  np.testing.assert_array_equal(jax.jit(trip_count_kernel)(x), x + 1.0)
  for kfn, want in [(copy_through_smem, (x,)), (two_outputs, (2 * x, -x)), (nested, (3 * x,))]:
    if kfn is nested and rows % 256:
      continue
    got = jax.jit(kfn)(x)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want):
      np.testing.assert_array_equal(g, w)


@pytest.mark.gpu
def test_register_only_reads_of_loaded_stages_on_the_gpu():
  x = ex.inputs((6400, 128), (jnp.float32,))[0]
  np.testing.assert_allclose(jax.jit(column_sums)(x), x.reshape(100, 64, 128).sum(0), rtol=1e-4, atol=1e-4)


@mg.mgpu_kernel(out_shape=lambda a, b: a, grid=(4,))
def too_many_stages(a, b, out):
  a_s, b_s, o_s = ml.smem((64, 128)), ml.smem((64, 128)), ml.smem((64, 128))
  for t in ml.range(ml.program_id(0), a.shape[0] // 64, 4, stages=4):
    ml.copy(a.at[ml.ds(t * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(t * 64, 64)], b_s)
    o_s[...] = a_s[...] + b_s[...]
    ml.copy(o_s, out.at[ml.ds(t * 64, 64)])


def test_a_pipelined_loop_whose_stages_do_not_fit_names_the_stages_that_do():
  # (stages=4: at stages=3 the store buffer o_s, kept once where a copy a stage overflows, fits since session 54;
  # probe 66a: the message and hint count it once)
  e = expect(too_many_stages, [S((1024, 128), jnp.float32)] * 2, mg.SmemCapacityError, "stages=4",
             "with stages=4 this loop's buffers need 295936 bytes (a_s 32 KiB, b_s 32 KiB per stage, 4 copies each;"
             " o_s 32 KiB, one copy (written and TMA-stored every trip)), more than the 232432 bytes (227 KiB less 16"
             " bytes) a kernel's buffers can use")
  # (at the loop's stages= keyword since probe 62b, the smaller step named: the loop's buffers move along t)
  assert e.hint == ("use stages=3 (230400 bytes with the kernel's other buffers); or use smaller tiles: a_s of shape"
                    " (32, 128) and b_s of shape (32, 128) and o_s of shape (32, 128) instead of (64, 128) and (64, 128)"
                    " and (64, 128) (the loop's step cut to 1/2, 2 times the trips) fits with stages=4, 148480 bytes"
                    " with the kernel's other buffers")


# ---------------------------------------------------------------- store waits in straight-line code
@mg.mgpu_kernel(out_shape=lambda x: x)
def alternating_stores(x, out):
  """Two staging buffers used in turn: each write waits only for its own buffer's last store."""
  bufs = (ml.smem((64, 128)), ml.smem((64, 128)))
  for r in ml.static_range(x.shape[0] // 64):
    bufs[r % 2][...] = x.at[ml.ds(r * 64, 64)][...] * 2.0
    ml.copy(bufs[r % 2], out.at[ml.ds(r * 64, 64)])


def test_a_write_waits_only_for_its_buffers_store_the_newer_ones_stay_in_flight():
  text = alternating_stores.typed_ir(S((256, 128), jnp.float32))
  assert text.count("awaitstores read_only=True pending=1") == 2
  assert text.count("awaitstores read_only=True pending=0") == 1         # only the kernel's end
  assert text.rstrip().splitlines()[-1].strip().startswith("awaitstores read_only=True pending=0")
  x = ex.inputs((256, 128), (jnp.float32,))[0]
  np.testing.assert_array_equal(alternating_stores(x, interpret=True), 2 * x)


def test_a_wait_that_leaves_the_buffers_own_store_in_flight_is_a_race():
  x = ex.inputs((256, 128), (jnp.float32,))[0]
  kernel, specs = compiled(alternating_stores, x)
  i = next(i for i, o in enumerate(kernel.body.ops) if isinstance(o, O.AwaitStores))
  kernel.body.ops[i] = O.AwaitStores(True, kernel.body.ops[i].loc, pending=2)
  with pytest.raises(interp.RaceError, match="overwritten while a TMA store may still be reading it"):
    interp.run(kernel, [x], specs)
