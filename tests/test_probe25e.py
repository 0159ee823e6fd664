"""Probe 25e (sixteenth session, second regression hunt): one-element masked loads that failed
the CUDA export, loops over dicts, messages at the wrong line or in the batched view, hints that
failed when followed."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- masked loads of one element
@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=(1,))
def masked_one_2d(x, s, out):
  c = s.at[0:1, 0:1].load(mask=s.at[0:1, 0:1][...] > 0, other=0.0)
  out[...] = x[...] * c


@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=lambda x, s: (x.shape[0] // 128,))
def masked_one_past_end(x, s, out):
  i = ml.program_id(0)
  c = s.at[ml.ds(i, 1)].load(mask=i + ml.arange(1) < s.shape[0], other=0.0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * c


def test_masked_loads_of_one_element_run_and_export():
  """The (1, 1) masked load ran in interpret mode and failed the export (MG900); the (1,) one past
  the array's end was MG204 blaming the other operand."""
  x, s = jnp.ones((8, 128), F32), jnp.full((2, 2), 3.0, F32)
  np.testing.assert_array_equal(np.asarray(masked_one_2d(x, s, interpret=True)), np.full((8, 128), 3.0))
  assert "mosaic_gpu" in _export(masked_one_2d, S(x.shape, F32), S(s.shape, F32))
  np.testing.assert_array_equal(np.asarray(masked_one_2d(x, -s, interpret=True)), np.zeros((8, 128)))
  got = masked_one_past_end(jnp.ones(512, F32), jnp.arange(3.0, dtype=F32), interpret=True)
  np.testing.assert_array_equal(np.asarray(got)[::128], [0.0, 1.0, 2.0, 0.0])      # s[3] is past the end: other
  assert "mosaic_gpu" in _export(masked_one_past_end, S((512,), F32), S((3,), F32))


# ---------------------------------------------------------------- loops over dicts
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def loop_over_dict(x, out):
  d = {"a": 1.0, "b": 2.0}
  acc = ml.zeros((128,), jnp.float32)
  for w in d.values():
    acc = acc + x[...] * w
  for k, w in d.items():
    acc = acc + x[...] * (w if k == "a" else 0.0)
  for k in d:
    acc = acc + d[k]
  out[...] = acc


def test_for_loops_unroll_over_a_dict_and_its_views():
  x = jnp.arange(128, dtype=F32)
  np.testing.assert_allclose(np.asarray(loop_over_dict(x, interpret=True)), np.asarray(x * 4.0 + 3.0))


# ---------------------------------------------------------------- messages
@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32), grid=lambda x: (x.shape[0] // 128,))
def zero_then_add(x, out):
  i = ml.program_id(0)
  out[...] = ml.zeros((128,), jnp.float32)
  ml.atomic_add(out, x.at[ml.ds(i * 128, 128)][...])


def test_zeroing_before_atomics_in_every_program_notes_the_atomic_update():
  """The note 'program (0, 0, 0)'s atomic update' pointed at the plain write's line."""
  e = expect(zero_then_add, [S((512,), F32)], mg.RaceError, "out[...] =",
             "program (1, 0, 0) writes out[0] here while program (0, 0, 0) adds to it with atomics: programs run in"
             " no fixed order, so the sum depends on timing")
  line = zero_then_add.fn.__code__.co_firstlineno + 4
  assert e.notes[0].endswith(f":{line}:2: program (0, 0, 0)'s atomic update"), e.notes


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8, x.shape[1] // 128))
def both_axes_rounded_down(x, out):
  i, j = ml.program_id(0), ml.program_id(1)
  out.at[ml.ds(i * 8, 8), ml.ds(j * 128, 128)][...] = x.at[ml.ds(i * 8, 8), ml.ds(j * 128, 128)][...]


def test_an_output_covered_in_part_along_rows_of_a_2d_grid_hints_per_axis():
  """Rows rounded down on a 2-D grid got the 1-D rows grid, which dropped the columns when followed."""
  e = expect(both_axes_rounded_down, [S((60, 256), F32)], mg.UncoveredOutputError, "out.at[",
             "out[56:60, :] is never written: none of the 14 programs of grid (7, 2) writes it, so 1024 of 15360"
             " elements of out would stay uninitialised")
  assert e.hint.startswith("out's dimension 0 (60) is covered only in part: launch ml.cdiv(n, t) programs")
  e = expect(both_axes_rounded_down, [S((60, 300), F32)], mg.UncoveredOutputError, "out.at[",
             "out[:, 256:300] is never written: none of the 14 programs of grid (7, 2) writes it, so 3664 of 18000"
             " elements of out would stay uninitialised")
  assert e.hint.startswith("out's dimensions 0 (60) and 1 (300) are covered only in part")


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def masked_store(x, out):
  v = x[...]
  out.store(v, mask=v > 0)


def test_an_uncovered_output_under_vmap_shows_the_kernels_shape_and_batch_element():
  """It showed out[1:2, 5:6] of 384 elements, where the kernel's out is (128,)."""
  with pytest.raises(mg.UncoveredOutputError) as info:
    jax.vmap(lambda a: masked_store(a, interpret=True))(jnp.ones((3, 128), F32).at[1, 5].set(-1.0))
  e = info.value
  assert e.message.startswith("out[5:6] is never written") and "1 of 128 elements" in e.message, e.message
  assert "in batch element 1 of jax.vmap" in e.notes


@ml.inline
def add3(a, b, c):
  return a + b + c


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def misspelt_keyword(x, out):
  out[...] = add3(a=x[...], b=1.0, d=2.0)


@mg.mgpu_kernel(out_shape=lambda x, f: x, grid=(8,))
def int_ternary(x, f, out):
  i = ml.program_id(0)
  s = 2 if f[i] > 0 else 3
  out.at[i][...] = x.at[i][...] * s


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def nine_stages(x, out):
  buf = ml.smem((8, 128))
  acc = ml.zeros((8, 128), jnp.float32)
  for k in ml.range(x.shape[0] // 8, stages=9):
    ml.copy(x.at[ml.ds(k * 8, 8)], buf)
    acc = acc + buf[...]
  out.at[0:8][...] = acc


def test_messages_name_the_unknown_keyword_the_int_ternary_and_the_stage_cap():
  spec = [S((128,), F32)]
  expect(misspelt_keyword, spec, mg.KernelTypeError, "add3(",
         "add3(...): got an unexpected keyword argument 'd'", hint="add3(a, b, c)")
  # a conditional expression on a run-time value runs as an if statement since probe 44e: Python ints, weakly typed
  x, f = np.arange(8 * 128, dtype=np.float32).reshape(8, 128), np.array([1, 0, -2, 3, 0, 0, 5, -1], np.int32)
  np.testing.assert_array_equal(int_ternary(x, f, interpret=True), x * np.where(f > 0, 2, 3)[:, None])
  expect(nine_stages, [S((128, 128), F32)], mg.KernelTypeError, "9)",
         "stages must be a static int from 1 to 8, got 9",
         hint="use at most 8 stages (3 or 4 usually hide the loads' latency): ml.range(n, stages=4)")


# ---------------------------------------------------------------- matmul practitioners' messages
@mg.mgpu_kernel(out_shape=lambda x, w: S((64, 2), F32))
def first_two_columns(x, w, o):
  x_s, w_s = ml.smem(x.shape), ml.smem(w.shape)
  ml.copy(x, x_s)
  ml.copy(w, w_s)
  s = ml.dot(x_s, w_s)
  o[...] = s[:, 0:2]


@mg.mgpu_kernel(out_shape=lambda x, w: S((64, 2), F32))
def first_two_columns_staged(x, w, o):
  x_s, w_s = ml.smem(x.shape), ml.smem(w.shape)
  ml.copy(x, x_s)
  ml.copy(w, w_s)
  s = ml.dot(x_s, w_s)
  buf = ml.smem((64, 64), jnp.float32)
  buf[...] = s
  o[...] = buf.at[:, 0:2][...]


@mg.mgpu_kernel(out_shape=lambda a, bt: S((384, 64), F32), block=384)
def rows_384(a, bt, c):
  a_s, b_s = ml.smem((384, 64)), ml.smem((64, 64))
  ml.copy(a, a_s)
  ml.copy(bt, b_s)
  c[...] = ml.dot(a_s, b_s.T)


@mg.mgpu_kernel(out_shape=lambda a: S((64, 384), F32))
def cols_384(a, c):                   # a last axis past the box: one box of (64, 2, 192) since probe 56c
  a_s = ml.smem((64, 384))
  ml.copy(a, a_s)
  c[...] = a_s[...].astype(F32)


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32))
def acc_from_a_number(a, b, c):
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  acc = 0.0
  for kk in range(2):
    ml.copy(a.at[:, ml.ds(kk * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(kk * 64, 64)], b_s)
    if True:
      acc += ml.dot(a_s, b_s)
    if False:
      acc = ml.dot(a_s, b_s, acc)
  c[...] = acc


def test_matmul_messages_give_hints_that_work():
  f16 = lambda *s: S(s, jnp.float16)
  e = expect(first_two_columns, [f16(64, 64), f16(64, 64)], mg.LayoutError, "s[:, 0:2]",
             "columns 0:2 do not start and end on the tensor-core layout's 8-column tiles")
  assert e.hint.endswith("stage the tile through SMEM and read the window there: buf = ml.smem((64, 64),"
                         " jnp.float32); buf[...] = s; buf.at[:, 0:2][...]"), e.hint
  x = rand.normal(rand.key(0), (64, 64)).astype(jnp.float16)
  w = rand.normal(rand.key(1), (64, 64)).astype(jnp.float16)
  np.testing.assert_allclose(np.asarray(first_two_columns_staged(x, w, interpret=True)),
                             np.asarray((x.astype(F32) @ w.astype(F32))[:, :2]), rtol=1e-5, atol=1e-5)
  assert "mosaic_gpu" in _export(first_two_columns_staged, f16(64, 64), f16(64, 64))
  # a's 384 rows were MG401 (hinted as two windows of 192); since probe 52i they are TMAs of 256 and 128 rows
  a = rand.normal(rand.key(2), (384, 64)).astype(jnp.float16)
  np.testing.assert_allclose(np.asarray(rows_384(a, w, interpret=True)),
                             np.asarray(a.astype(F32) @ w.astype(F32).T), rtol=1e-3, atol=1e-3)
  assert "mosaic_gpu" in _export(rows_384, f16(384, 64), f16(64, 64))
  # a's 384 columns were MG401 too; since probe 56c they are one box of (64, 2, 192)
  a = rand.normal(rand.key(3), (64, 384)).astype(jnp.float16)
  np.testing.assert_array_equal(np.asarray(cols_384(a, interpret=True)), np.asarray(a.astype(F32)))
  assert "mosaic_gpu" in _export(cols_384, f16(64, 384))
  # acc = 0.0 made a tensor by a range(2) loop was MG005 ("start it as a tensor"); since probe 57g the loop is
  # unrolled, as Python runs it (probe 57g's tests keep the MG005 of a run-time trip count)
  a = rand.normal(rand.key(4), (64, 128)).astype(jnp.float16)
  b = rand.normal(rand.key(5), (128, 64)).astype(jnp.float16)
  np.testing.assert_allclose(np.asarray(acc_from_a_number(a, b, interpret=True)),
                             np.asarray(a.astype(F32) @ b.astype(F32)), rtol=2e-3, atol=2e-3)
  assert "mosaic_gpu" in _export(acc_from_a_number, f16(64, 128), f16(128, 64))


# ---------------------------------------------------------------- third regression hunt
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def int_element(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i, 1)].load(mask=i + ml.arange(1) < 3, other=0.0)
  out.at[ml.ds(i, 1)][...] = v


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(16,))
def f8_element(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i, 1)].load(mask=i + ml.arange(1) < 9, other=-2.0)
  out.at[ml.ds(i, 1)][...] = v


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((12,), x.dtype), grid=(16,))
def masked_element_store(x, out):
  i = ml.program_id(0)
  offs = i + ml.arange(1)
  out.at[ml.ds(i, 1)].store(x.at[ml.ds(i, 1)][...] + 1, mask=offs < 12)


@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=lambda x, n: x.shape)
def masked_element_store_2d(x, n, out):
  i, j = ml.program_id(0), ml.program_id(1)
  rows, cols = i + ml.arange(1)[:, None], j + ml.arange(1)[None, :]
  v = x.at[ml.ds(i, 1), ml.ds(j, 1)][...]
  keep = (rows < n[0]) & (cols < n[1])
  out.at[ml.ds(i, 1), ml.ds(j, 1)].store(ml.where(keep, v * 2, v), mask=keep | (cols == 0))
  out.at[ml.ds(i, 1), ml.ds(j, 1)].store(-v, mask=~keep & (cols != 0))


def test_one_element_masked_loads_keep_integers_and_float8_and_stores_say_what_to_write():
  """A whole-number float other on int32 data gave float32 (16777217 -> 16777216 once converted
  back); float8 was MG106 about an ml.where the user never wrote."""
  x = jnp.array([16777217, -16777217, 2147483647, 5], I32)
  got = int_element(x, interpret=True)
  assert got.dtype == jnp.int32
  np.testing.assert_array_equal(np.asarray(got), [16777217, -16777217, 2147483647, 0])
  for dt in (jnp.float8_e4m3fn, jnp.float8_e5m2):
    y = jnp.arange(16).astype(dt)
    np.testing.assert_array_equal(np.asarray(f8_element(y, interpret=True).astype(F32)),
                                  np.where(np.arange(16) < 9, np.arange(16), -2.0))
    assert "mosaic_gpu" in _export(f8_element, S(y.shape, y.dtype))



def test_masked_stores_of_one_element_store_their_scalar_under_the_mask():
  """Triton's BLOCK=1 store (`out.at[ml.ds(i, 1)].store(v, mask=i < n)`) was refused (seventeenth
  session: a scalar store under a run-time if on the mask's scalar)."""
  x = jnp.arange(16, dtype=F32)
  np.testing.assert_array_equal(np.asarray(masked_element_store(x, interpret=True)), np.arange(12) + 1.0)
  assert "mosaic_gpu" in _export(masked_element_store, S((16,), F32))
  y, n = jnp.arange(1, 49, dtype=F32).reshape(6, 8), jnp.array([4, 5], I32)
  r, c = np.arange(6)[:, None], np.arange(8)[None, :]
  want = np.where((r < 4) & (c < 5), np.asarray(y) * 2, np.where(c == 0, np.asarray(y), -np.asarray(y)))
  np.testing.assert_array_equal(np.asarray(masked_element_store_2d(y, n, interpret=True)), want)
  assert "mosaic_gpu" in _export(masked_element_store_2d, S((6, 8), F32), S((2,), I32))


@pytest.mark.gpu
def test_gpu_masked_stores_of_one_element():
  x = jnp.arange(16, dtype=F32)
  np.testing.assert_array_equal(np.asarray(masked_element_store(x)), np.arange(12) + 1.0)
  y, n = jnp.arange(1, 49, dtype=F32).reshape(6, 8), jnp.array([4, 5], I32)
  np.testing.assert_array_equal(np.asarray(masked_element_store_2d(y, n)),
                                np.asarray(masked_element_store_2d(y, n, interpret=True)))


@mg.mgpu_kernel(out_shape=lambda x: x)
def stage_300(x, out):
  buf = ml.smem((300,), jnp.float32)
  ml.copy(x, buf)
  ml.copy(buf, out)


@mg.mgpu_kernel(out_shape=lambda x: x)
def stage_300_followed(x, out):
  buf = ml.smem((300,), jnp.float32)
  ml.copy(x.at[ml.ds(0, 256)], buf.at[ml.ds(0, 256)])
  ml.copy(x.at[ml.ds(256, 44)], buf.at[ml.ds(256, 44)])
  ml.copy(buf.at[ml.ds(0, 256)], out.at[ml.ds(0, 256)])
  ml.copy(buf.at[ml.ds(256, 44)], out.at[ml.ds(256, 44)])


def test_a_tma_box_too_long_is_split_at_aligned_pieces():
  """The hint halved 300 float32 into 150s, which TMA refused (600 bytes is no multiple of 128); it then
  hinted 256 and the last 44, which the compiler does itself since probe 52i (a 44 of bfloat16, 88 bytes,
  is still MG401 with its pad hint: test_fourth_hunt_dicts_indices_and_tma_tails)."""
  x = jnp.arange(300, dtype=F32)
  np.testing.assert_array_equal(np.asarray(stage_300(x, interpret=True)), np.asarray(x))
  assert "mosaic_gpu" in _export(stage_300, S((300,), F32))
  np.testing.assert_array_equal(np.asarray(stage_300_followed(x, interpret=True)), np.asarray(x))
  assert "mosaic_gpu" in _export(stage_300_followed, S((300,), F32))


@mg.mgpu_kernel(out_shape=lambda x, w: S((64, 1), F32))
def one_column(x, w, o):
  x_s, w_s = ml.smem(x.shape), ml.smem(w.shape)
  ml.copy(x, x_s)
  ml.copy(w, w_s)
  s = ml.dot(x_s, w_s)
  o[...] = s[:, 5:6]


@mg.mgpu_kernel(out_shape=lambda x: x)
def tuple_carry_int(x, out):
  st = (x[...], 0)
  for k in range(3):
    st = (st[0], st[1] + 0.5)
  out[...] = st[0] * st[1]


@mg.mgpu_kernel(out_shape=lambda x: x)
def dict_comprehension(x, out):
  d = {"p": x[...], "q": x[...] * 2.0}
  e = {name: v * 3.0 for name, v in d.items()}
  f = dict(e)
  out[...] = f["p"] + f["q"]


@mg.mgpu_kernel(out_shape=lambda x: x)
def dict_item_assignment(x, out):
  d = {"p": x[...]}
  d["q"] = x[...] * 2.0
  out[...] = d["p"] + d["q"]


@mg.mgpu_kernel(out_shape=lambda x: x)
def zero_stages(x, out):
  acc = ml.zeros((128,), jnp.float32)
  for k in ml.range(1, stages=0):
    acc = acc + x[...]
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: x)
def static_range_keyword(x, out):
  acc = x[...]
  for k in ml.static_range(3, step=1):
    acc = acc + 1.0
  out[...] = acc


def test_third_hunt_messages_and_dicts():
  f16 = lambda *s: S(s, jnp.float16)
  e = expect(one_column, [f16(64, 64), f16(64, 128)], mg.LayoutError, "s[:, 5:6]",
             "columns 5:6 do not start and end on the tensor-core layout's 8-column tiles")
  assert e.hint == ("take the column as a vector: s[:, 5] (s[:, 5][:, None] keeps its axis, an (n, 1) tile that"
                    " broadcasts against the rows; into an (n, 1) output: out.at[:, 0][...] = s[:, 5])")
  e = expect(tuple_carry_int, [S((128,), F32)], mg.LoopCarryTypeError, "st = (st[0], st[1] + 0.5)",
             "st[1] enters the loop as an int32 scalar but an iteration makes it a float32 scalar")
  assert e.hint == "start it as a float before the loop: st = (st[0], 0.0) (a Python int starts an int32 carry)"
  x = jnp.arange(128, dtype=F32)
  np.testing.assert_allclose(np.asarray(dict_comprehension(x, interpret=True)), np.asarray(x * 9.0))
  # (an item assigned binds d to a new dict, as a list's does, since probe 59c: it was MG003)
  np.testing.assert_array_equal(np.asarray(dict_item_assignment(x, interpret=True)), np.asarray(x * 3.0))
  expect(zero_stages, [S((128,), F32)], mg.KernelTypeError, "0)",
         "stages must be a static int from 1 to 8, got 0",
         hint="for a loop that is not pipelined, leave stages= out (or stages=1)")
  e = expect(static_range_keyword, [S((128,), F32)], mg.UnsupportedSyntaxError, "ml.static_range(3",
             "keywords in ml.static_range(...) is not supported in a kernel")
  assert e.hint == "ml.static_range takes its bounds by position: ml.static_range(start, stop, step)"


# ---------------------------------------------------------------- LLM building blocks' messages
@mg.mgpu_kernel(out_shape=lambda cache, pos: S((2, 4, 64), cache.dtype), grid=(2,))
def window_at_position(cache, pos, out):
  b = ml.program_id(0)
  p = pos[b]
  out.at[b][...] = cache.at[b, ml.ds(p, 4), :][...]


@mg.mgpu_kernel(out_shape=lambda logits: S((1,), jnp.float16), grid=(1,))
def scalar_cast(logits, out):
  g = logits[0]
  out[0] = (g * 2).astype(jnp.float16)


def test_a_one_element_index_and_a_scalar_cast_are_named_as_written():
  """A (1,) position was 'an index here must be an integer scalar ... only a read of a GMEM ref takes
  a tensor of indices' (it was a read) with a scatter hint; the two-step cast hint said (x)."""
  expect(window_at_position, [S((2, 16, 64), F32), S((2, 1), I32)], mg.KernelTypeError, "cache.at[",
         "an index must be an integer scalar, but p is a tensor of shape (1,) (one element)",
         hint="take its element: p[0], or read the index as a scalar where it comes from (pos[b, 0] of a (B, 1)"
              " array)")
  # (the scalar bfloat16 -> float16 cast was MG106; it now converts through float32: test_probe29c.py)
  builds(scalar_cast, S((8,), jnp.bfloat16))


# ---------------------------------------------------------------- fourth regression hunt
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def dict_cleared_in_an_if(x, out):
  d = {"a": 1.0, "b": 2.0}
  if ml.program_id(0) == 1:
    d.clear()
  out[...] = x[...] + d.get("a", 0.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def dict_membership(x, out):
  d = {"a": x[...], "b": x[...] * 2.0}
  n = len(d)
  out[...] = (d["a"] if "a" in d else d["b"]) * n + (1.0 if "c" not in d else 0.0)


@mg.mgpu_kernel(out_shape=lambda x, off: S((128,), x.dtype), grid=(1,))
def one_element_index_expr(x, off, out):
  p = off.at[ml.ds(0, 1)][...]
  out[...] = x.at[ml.ds(p * 4, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def stage_bf16_300(x, out):
  buf = ml.smem((300,), jnp.bfloat16)
  ml.copy(x, buf)
  ml.copy(buf, out)


def test_fourth_hunt_dicts_indices_and_tma_tails():
  """d.clear() in a run-time if changed d on every path (interpret gave [0, 0] for [1, 0]); the
  index hint said 'it[0]'; a bf16 TMA tail of 44 elements (88 bytes) was hinted as a piece."""
  expect(dict_cleared_in_an_if, [S((128,), F32)], mg.KernelTypeError, "d.clear",
         "d.clear: dicts in a kernel are fixed once built (values while tracing, as tuples are: a change in place"
         " would happen once, while tracing, whatever run-time if or loop it is in), so they have no .clear",
         hint="build a new one: d = {**d, 'k': v} to add or replace, d = {k: v for k, v in d.items() if k != 'a'}"
              " to drop")
  x = jnp.arange(128, dtype=F32)
  np.testing.assert_allclose(np.asarray(dict_membership(x, interpret=True)), np.asarray(x * 2 + 1.0))
  e = expect(one_element_index_expr, [S((512,), F32), S((4,), I32)], mg.KernelTypeError, "x.at[",
             "an index must be an integer scalar, but p * 4 is a tensor of shape (1,) (one element)")
  assert "(p * 4)[0] works too" in e.hint
  e = expect(stage_bf16_300, [S((300,), jnp.bfloat16)], mg.TmaLimitError, "ml.copy(x, buf)",
             "TMA copies move at most 256 elements along each dimension; this window is (300,)")
  assert e.hint.startswith("pad x to 304 elements outside the kernel (jnp.pad; TMA moves whole 16-byte units)")
