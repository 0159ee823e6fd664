"""In-place updates tile by tile over 2-D tiles: a pipelined loop whose tile t has rows
`t // per * bm` and columns `t % per * bn` loads and stores windows that no two trips share (t
differs, so the pair (t // per, t % per) does), which frontend/pipeline_hazards.py now proves; it
rejected these (MG502) for `//` and `%` in window starts. Windows that other trips do meet stay
rejected, with a hint that names the in-place fix."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
SHAPES = [(256, 256), (256, 128), (128, 512)]        # per = 2, 1 (t // 1, t % 1), 4
IN_PLACE_HINT = ("use stages=1 (or range()) for a loop that reads back what it writes; an in-place update"
                 " may stay pipelined when no two trips share a tile (ml.ds(t * bm, bm), or rows t // n * bm,"
                 " columns t % n * bn)")


@mg.mgpu_kernel(out_shape=lambda p: p, grid=lambda p, **_: (4,), input_output_aliases={0: 0})
def scale_inplace(p, po, *, store: ml.constexpr = "tma", ws: ml.constexpr = False):
  per = p.shape[1] // 128
  ps = ml.smem((32, 128))
  os_ = ml.smem((32, 128)) if store == "tma" else None
  for t in ml.range(ml.program_id(0), p.shape[0] // 32 * per, ml.num_programs(0), stages=2, warp_specialize=ws):
    r, c = ml.ds(t // per * 32, 32), ml.ds(t % per * 128, 128)
    ml.copy(p.at[r, c], ps)
    if store == "tma":
      os_[...] = ps[...] * 2
      ml.copy(os_, po.at[r, c])
    else:
      po.at[r, c][...] = ps[...] * 2


@mg.mgpu_kernel(out_shape=lambda p: p, grid=lambda p, **_: (3, 2), input_output_aliases={0: 0})
def scale_forms(p, po, *, form: ml.constexpr):
  """Other spellings of the same tiles: a count loop (t = pid + k * g), constant factors on either
  side, a base from before the loop (the grid's second axis picks a half of the rows)."""
  per, g = p.shape[1] // 128, ml.num_programs(0)
  half = ml.program_id(1) * (p.shape[0] // 2)
  ps = ml.smem((32, 128))
  for k in ml.range(ml.cdiv(p.shape[0] // 64 * per - ml.program_id(0), g), stages=3):
    t = ml.program_id(0) + k * g
    if form == "scaled":
      r, c = ml.ds(half + 2 * (t // per) * 16, 32), ml.ds((t % per) * 64 * 2, 128)
    else:                                              # "offset": (q + 1) * 32 - 32
      r, c = ml.ds((t // per + 1) * 32 + half - 32, 32), ml.ds(128 * (t % per), 128)
    ml.copy(p.at[r, c], ps)
    po.at[r, c][...] = ps[...] * 2


@mg.mgpu_kernel(out_shape=lambda p: p, grid=(2,), input_output_aliases={0: 0})
def grid_columns(p, po):
  """P a grid size: each program has its own column band, t // g * 32 its rows."""
  g = ml.num_programs(0)
  ps = ml.smem((32, 128))
  for t in ml.range(ml.program_id(0), p.shape[0] // 32 * 2, g, stages=2):
    r, c = ml.ds(t // g * 32, 32), ml.ds(t % g * 128, 128)
    ml.copy(p.at[r, c], ps)
    po.at[r, c][...] = ps[...] * 2


def data(shape, seed=0):
  return rand.normal(rand.key(seed), shape, F32)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("store", ["tma", "registers"])
def test_a_persistent_2d_in_place_update_is_pipelined(shape, store):
  x = data(shape)
  np.testing.assert_array_equal(scale_inplace(x, store=store, interpret=True), x * 2)
  assert "stages=2" in scale_inplace.typed_ir(S(shape, F32), store=store)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_warp_specialised_2d_in_place_update(shape):
  x = data(shape, 1)
  np.testing.assert_array_equal(scale_inplace(x, ws=True, interpret=True), x * 2)


@pytest.mark.gpu
@pytest.mark.parametrize("ws", [False, True])
@pytest.mark.parametrize("store", ["tma", "registers"])
def test_a_2d_in_place_update_on_the_gpu(store, ws):
  x = data((512, 512), 4)
  want = x * 2
  np.testing.assert_array_equal(jax.jit(lambda v: scale_inplace(v, store=store, ws=ws))(x), want)


@pytest.mark.parametrize("form", ["scaled", "offset"])
@pytest.mark.parametrize("shape", [(256, 256), (128, 512)])
def test_other_spellings_of_the_tiles(form, shape):
  x = data(shape, 2)
  np.testing.assert_array_equal(scale_forms(x, form=form, interpret=True), x * 2)


def test_a_grid_size_as_the_divisor():
  x = data((128, 256), 3)
  np.testing.assert_array_equal(grid_columns(x, interpret=True), x * 2)


# ------------------------------------------------------------------ windows other trips meet
@mg.mgpu_kernel(out_shape=lambda p: p, grid=(1,), input_output_aliases={0: 0})
def meets(p, po, *, case: ml.constexpr):
  per = p.shape[1] // 128
  ps = ml.smem((32, 128))
  for t in ml.range(1, p.shape[0] // 64 * per, stages=3):
    r, c = ml.ds(t // per * 32, 32), ml.ds(t % per * 128, 128)
    w = (r, c)
    if case == "rows_step_too_small":                  # bands 16 rows apart, 32 rows high
      r = ml.ds(t // per * 16, 32)
      w = (r, c)
    elif case == "write_next_band":                    # writes the next band: a later trip loads it
      w = (ml.ds(t // per * 32 + 32, 32), c)
    elif case == "remainder_alone":                    # rows t % 2: trips t and t + 2 share them
      r, c = ml.ds(t % 2 * 32, 32), ml.ds(0, 128)
      w = (r, c)
    elif case == "previous_tile":                      # trip t + 1 reads the tile trip t writes
      r, c = ml.ds((t - 1) // per * 32, 32), ml.ds((t - 1) % per * 128, 128)
    elif case == "divisors_differ":                    # t // 4 and t % 2: t = 4 and 6 share a tile
      r, c = ml.ds(t // 4 * 32, 32), ml.ds(t % 2 * 128, 128)
      w = (r, c)
    ml.copy(p.at[r, c], ps)
    po.at[w[0], w[1]][...] = ps[...] * 2


@pytest.mark.parametrize("case,shape", [("rows_step_too_small", (256, 128)), ("write_next_band", (256, 128)),
                                        ("remainder_alone", (256, 256)), ("previous_tile", (256, 256)),
                                        ("divisors_differ", (256, 256))])
def test_windows_that_other_trips_meet_stay_rejected(case, shape):
  expect(meets, [S(shape, F32)], mg.PipelineError, "ml.copy(p.at[r, c], ps)",
         "this pipelined load reads p, which the loop writes (through po, its alias): with stages=3 it is"
         " issued up to 2 trip(s) early, before those writes", hint=IN_PLACE_HINT, case=case)


@mg.mgpu_kernel(out_shape=lambda p: p, grid=(1,), input_output_aliases={0: 0})
def ws_rows_repeat(p, po):
  ps = ml.smem((32, 128))
  for t in ml.range(8, stages=2, warp_specialize=True):
    r = ml.ds(t // 2 * 32, 32)                         # trips 2q and 2q + 1 share their rows
    ml.copy(p.at[r, :], ps)
    po.at[r, :][...] = ps[...] * 2


def test_a_quotient_alone_does_not_keep_trips_apart():
  expect(ws_rows_repeat, [S((128, 128), F32)], mg.WarpSpecializeError, "ml.copy(p.at[r, :], ps)",
         "this load reads p, which an earlier trip of this warp-specialised loop writes (through po, its"
         " alias): the producer's loads do not wait for the consumers' stores")
