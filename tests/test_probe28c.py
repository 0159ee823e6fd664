"""Probe 28c (stencils, convolutions, pooling and windowed access): masked halo stores and masked
halo reads of an aliased input left out of the compile-time race proof (the export accepted what
interpret mode rejected), and hints for the natural forms of windowed access that, followed
literally, failed again: a small tile's window moved to 0 or past its SMEM buffer, a halo TMA
window starting off 16 bytes, a strided TMA window, `v[1::2]` hinted as `[0::2]`."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


def _three(x):
  p = np.pad(np.asarray(x), 1)
  return p[:-2] + p[1:-1] + p[2:]


# ---------------------------------------------------------------- masked halos in the race proof
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def halo_store(x, out):
  i = ml.program_id(0)
  idx = i * 128 - 8 + ml.arange(144)
  inside = (idx >= 0) & (idx < x.shape[0])
  v = x.at[ml.ds(i * 128 - 8, 144)].load(mask=inside, other=0.0)
  out.at[ml.ds(i * 128 - 8, 144)].store(v, mask=inside)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def own_part_store(x, out):              # the halo read, only the program's own part written
  i = ml.program_id(0)
  idx = i * 128 - 8 + ml.arange(144)
  v = x.at[ml.ds(i * 128 - 8, 144)].load(mask=(idx >= 0) & (idx < x.shape[0]), other=0.0)
  out.at[ml.ds(i * 128 - 8, 144)].store(v * 2, mask=(idx >= i * 128) & (idx < i * 128 + 128))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,), input_output_aliases={0: 0})
def in_place_stencil(x, out):
  i = ml.program_id(0)
  idx = i * 128 + ml.arange(128)
  left = x.at[ml.ds(i * 128 - 1, 128)].load(mask=idx >= 1, other=0.0)
  out.at[ml.ds(i * 128, 128)][...] = left + x.at[ml.ds(i * 128, 128)][...]


def test_masked_halo_stores_that_overlap_are_a_race_while_compiling():
  # the masks are known while compiling, so the elements they keep are certain writes
  expect(halo_store, [S((512,), F32)], mg.RaceError, "out.at[ml.ds(i * 128 - 8, 144)].store(",
         "program (0, 0, 0) and program (1, 0, 0) both write out[120]: programs run in no fixed order, so the"
         " result depends on timing")
  x = jnp.asarray(np.random.default_rng(0).standard_normal(512), F32)
  np.testing.assert_array_equal(own_part_store(x, interpret=True), np.asarray(x) * 2)
  _export(own_part_store, S((512,), F32))


def test_a_masked_halo_read_of_an_aliased_input_is_a_race_while_compiling():
  expect(in_place_stencil, [S((512,), F32)], mg.RaceError, "x.at[ml.ds(i * 128 - 1, 128)].load(",
         "program (1, 0, 0) reads x[127], the memory of out (aliased), while program (0, 0, 0) writes out[127]:"
         " programs run in no fixed order, so the value read depends on timing")


# ---------------------------------------------------------------- a small tile's hint keeps its window
K = 4


@mg.mgpu_kernel(out_shape=lambda x, w: x, grid=lambda x, w: (x.shape[0] // 8, x.shape[1] // 128))
def causal_conv(x, w, out):              # Mamba's depthwise conv1d: each output reads the K - 1 before it
  d, t = ml.program_id(0), ml.program_id(1)
  ts = t * 128 + ml.arange(128)
  ww = w.at[ml.ds(d * 8, 8), :][...]
  acc = ml.zeros((8, 128), jnp.float32)
  for k in ml.static_range(K):
    v = x.at[ml.ds(d * 8, 8), ml.ds(t * 128 - (K - 1) + k, 128)].load(mask=(ts - (K - 1) + k >= 0)[None, :], other=0.0)
    acc = acc + v * ww[:, k][:, None]
  out.at[ml.ds(d * 8, 8), ml.ds(t * 128, 128)][...] = acc


@mg.mgpu_kernel(out_shape=lambda x, w: x, grid=lambda x, w: (x.shape[0] // 8, x.shape[1] // 128))
def causal_conv_hinted(x, w, out):
  d, t = ml.program_id(0), ml.program_id(1)
  ts = t * 128 + ml.arange(128)
  ww = w.at[ml.ds(d * 8, 8), ml.ds(0, 32)].load(mask=ml.arange(32)[None, :] < 4, other=0)
  acc = ml.zeros((8, 128), jnp.float32)
  for k in ml.static_range(K):
    v = x.at[ml.ds(d * 8, 8), ml.ds(t * 128 - (K - 1) + k, 128)].load(mask=(ts - (K - 1) + k >= 0)[None, :], other=0.0)
    acc = acc + v * ww[:, k][:, None]
  out.at[ml.ds(d * 8, 8), ml.ds(t * 128, 128)][...] = acc


def _causal_conv(x, w):
  x, w = np.asarray(x), np.asarray(w)
  p = np.pad(x, ((0, 0), (K - 1, 0)))
  return sum(w[:, k:k + 1] * p[:, k:k + x.shape[1]] for k in range(K))


def test_a_small_window_of_weights_computes_as_does_its_old_hint():
  # Its hint said w.at[ml.ds(0, 8), ml.ds(0, 32)] (every program would read the first channels' weights), then kept
  # the window's start; the (8, 4) window read whole is now held as the vector of its 32 elements, ww[:, k] picked
  # an element at a time (tests/test_probe45a.py), and the kernel computes.
  specs = [S((16, 256), F32), S((16, K), F32)]
  rng = np.random.default_rng(1)
  x, w = (jnp.asarray(rng.standard_normal(s.shape), F32) for s in specs)
  np.testing.assert_allclose(causal_conv(x, w, interpret=True), _causal_conv(x, w), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(causal_conv_hinted(x, w, interpret=True), _causal_conv(x, w), rtol=1e-5, atol=1e-5)
  _export(causal_conv_hinted, *specs)


@mg.mgpu_kernel(out_shape=lambda x, w: x, grid=lambda x, w: (x.shape[1] // 128,))
def conv_rows(x, w, out):                # a 3 x 3 conv down a column of tiles, halos by TMA
  j = ml.program_id(0)
  buf = ml.smem((18, 144))
  for t in ml.range(x.shape[0] // 16, stages=2):
    ml.copy(x.at[ml.ds(t * 16 - 1, 18), ml.ds(j * 128 - 4, 144)], buf)
    v = buf[...]
    acc = ml.zeros((16, 128), jnp.float32)
    for a in ml.static_range(3):
      for b in ml.static_range(3):
        acc = acc + w[a, b] * v[a:a + 16, 3 + b:131 + b]
    out.at[ml.ds(t * 16, 16), ml.ds(j * 128, 128)][...] = acc


@mg.mgpu_kernel(out_shape=lambda x, w: x, grid=lambda x, w: (x.shape[1] // 128,))
def conv_rows_hinted(x, w, out):
  j = ml.program_id(0)
  buf = ml.smem((20, 160))
  for t in ml.range(x.shape[0] // 16, stages=2):
    ml.copy(x.at[ml.ds(t * 16 - 1, 20), ml.ds(j * 128 - 4, 160)], buf)
    v = buf.load(mask=(ml.arange(20)[:, None] < 18) & (ml.arange(160)[None, :] < 144), other=0)
    acc = ml.zeros((16, 128), jnp.float32)
    for a in ml.static_range(3):
      for b in ml.static_range(3):
        acc = acc + w[a, b] * v[a:a + 16, 3 + b:131 + b]
    out.at[ml.ds(t * 16, 16), ml.ds(j * 128, 128)][...] = acc


def test_a_small_tile_of_an_smem_buffer_computes_and_its_old_hint_still_works():
  # it said buf.at[ml.ds(0, 20), ml.ds(0, 160)], a window past the buffer's end (MG203)
  specs = [S((64, 256), F32), S((3, 3), F32)]
  # since probe 50a an SMEM tile no register tensor holds is read padded, row by row: the kernel as written computes
  # (it was MG204 with the hint the kernel below follows); a zero-padded 3 x 3 convolution, as the halos' TMA reads
  xs = np.random.default_rng(5).standard_normal((64, 256)).astype(np.float32)
  ws = np.random.default_rng(6).standard_normal((3, 3)).astype(np.float32)
  xp = np.pad(xs, 1)
  want = sum(ws[a, b] * xp[a:a + 64, b:b + 256] for a in range(3) for b in range(3))
  conv_rows.check(*specs)
  np.testing.assert_allclose(np.asarray(conv_rows(xs, ws, interpret=True)), want, rtol=1e-5, atol=1e-5)
  rng = np.random.default_rng(2)
  x, w = (np.asarray(rng.standard_normal(s.shape), np.float32) for s in specs)
  p = np.pad(x, 1)
  want = sum(w[a, b] * p[a:a + 64, b:b + 256] for a in range(3) for b in range(3))
  np.testing.assert_allclose(conv_rows_hinted(x, w, interpret=True), want, rtol=1e-4, atol=1e-4)
  _export(conv_rows_hinted, *specs)


# ---------------------------------------------------------------- a halo TMA window off 16 bytes
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def halo_copy(x, out):
  i = ml.program_id(0)
  buf = ml.smem((132,))
  ml.copy(x.at[ml.ds(i * 128 - 1, 132)], buf)
  out.at[ml.ds(i * 128, 128)][...] = buf.at[ml.ds(0, 128)][...] + buf.at[ml.ds(1, 128)][...] + buf.at[ml.ds(2, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def halo_copy_hinted(x, out):
  i = ml.program_id(0)
  buf = ml.smem((136,))
  ml.copy(x.at[ml.ds(i * 128 - 4, 136)], buf)
  out.at[ml.ds(i * 128, 128)][...] = sum(buf.at[ml.ds(3 + k, 128)][...] for k in ml.static_range(3))


@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype))
def static_halo_copy(x, out):
  buf = ml.smem((136,))
  ml.copy(x.at[ml.ds(-1, 136)], buf)
  out[...] = buf.at[ml.ds(0, 128)][...]


def test_a_halo_copy_off_16_bytes_is_hinted_as_a_wider_aligned_window():
  # it said "start windows at multiples of 4 (e.g. i * 132); or read the window into registers with
  # ref[...]": an unmasked read of a window before the array's start (MG203), then 132 elements (MG204)
  expect(halo_copy, [S((1024,), F32)], mg.TmaLimitError, "ml.copy(x.at",
         "TMA copies need a window's start in the last dimension to fall on a 16-byte boundary (a multiple of 4"
         " float32 elements); the start of x.at[ml.ds(i * 128 - 1, 132)] in x's last dimension is not provably one"
         " (it is -1 in some program), and a misaligned start faults the GPU",
         hint="widen the window to start at a multiple of 4: ml.ds(i * 128 - 4, 136) (a TMA copy reads zeros before"
              " the array's start and past its end), into a buffer 136 wide there, whose elements 3 to 135 are the"
              " window asked for (buf.at[ml.ds(3, 132)]; a neighbour's tap of a stencil is buf.at[ml.ds(3 + k, n)]);"
              " or read it into registers with a masked load, .load(mask=..., other=0), whose start may be anything")
  expect(static_halo_copy, [S((256,), F32)], mg.TmaLimitError, "ml.copy(x.at",
         "TMA copies need a window's start in the last dimension to fall on a 16-byte boundary; this window of"
         " x.at[ml.ds(-1, 136)] starts at element -1 (-1 x 4 bytes), which would fault on the GPU",
         hint="widen the window to start at a multiple of 4: ml.ds(-4, 140) (a TMA copy reads zeros before the"
              " array's start and past its end), into a buffer 140 wide there, whose elements 3 to 139 are the"
              " window asked for (buf.at[ml.ds(3, 136)]; a neighbour's tap of a stencil is buf.at[ml.ds(3 + k, n)]);"
              " or read it into registers with a masked load, .load(mask=..., other=0), whose start may be anything")
  x = np.random.default_rng(3).standard_normal(1024).astype(np.float32)
  np.testing.assert_allclose(halo_copy_hinted(x, interpret=True), _three(x), rtol=1e-6, atol=1e-6)
  _export(halo_copy_hinted, S((1024,), F32))


# ---------------------------------------------------------------- strided access
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2,), x.dtype))
def odd_elements(x, out):
  v = x[...] * 2
  out[...] = v[1::2]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2,), x.dtype))
def odd_elements_hinted(x, out):
  v = x[...] * 2
  out[...] = v.reshape(128, 2)[:, 1]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1]), x.dtype), grid=lambda x: (x.shape[0] // 8,))
def pool_copy(x, out):                   # x (h, w // 2, 2): a 1 x 2 max pool
  i = ml.program_id(0)
  a, b = ml.smem((8, x.shape[1])), ml.smem((8, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 8, 8), :, 0], a)
  ml.copy(x.at[ml.ds(i * 8, 8), :, 1], b)
  out.at[ml.ds(i * 8, 8), :][...] = ml.maximum(a[...], b[...])


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1]), x.dtype), grid=lambda x: (x.shape[0] // 8,))
def pool_copy_hinted(x, out):
  i = ml.program_id(0)
  a, b = ml.smem((8, x.shape[1])), ml.smem((8, x.shape[1]))
  a[...] = x.at[ml.ds(i * 8, 8), :, 0][...]
  b[...] = x.at[ml.ds(i * 8, 8), :, 1][...]
  out.at[ml.ds(i * 8, 8), :][...] = ml.maximum(a[...], b[...])


def test_strided_hints_take_the_slices_start_and_work_in_registers():
  # v[1::2] was hinted x.at[..., :, 0][...] "for [0::2]": the even elements; it is now that reshape itself
  # (test_probe32d); a stride to a length the registers cannot hold (12 of 24) was MG204, computed padded since
  # probe 47a
  x = np.random.default_rng(4).standard_normal(256).astype(np.float32)
  np.testing.assert_array_equal(odd_elements(x, interpret=True), x[1::2] * 2)
  np.testing.assert_array_equal(odd_elements_hinted(x, interpret=True), x[1::2] * 2)
  _export(odd_elements_hinted, S((256,), F32))
  x = np.random.default_rng(5).standard_normal(24).astype(np.float32)
  np.testing.assert_array_equal(odd_elements(x, interpret=True), x[1::2] * 2)


def test_a_strided_tma_window_is_hinted_as_a_register_read():
  # it said "copy a window that keeps the last dimension, e.g. x.at[i, :]", a (256, 2) window
  spec = S((16, 256, 2), F32)
  expect(pool_copy, [spec], mg.TmaLimitError, "ml.copy(x.at[ml.ds(i * 8, 8), :, 0], a)",
         "TMA copies need the last dimension of x.at[ml.ds(i * 8, 8), :, 0] to be contiguous, but it is indexed by"
         " a single element",
         hint="read it into registers with ref[...] instead (a register access moves elements 2 apart, one a"
              " thread), or copy a window that keeps the last dimension (its index a slice, x.at[ml.ds(i * 8, 8),"
              " :, :]) into a buffer of that shape")
  x = np.random.default_rng(5).standard_normal(spec.shape).astype(np.float32)
  np.testing.assert_array_equal(pool_copy_hinted(x, interpret=True), x.max(axis=2))
  _export(pool_copy_hinted, spec)


# ---------------------------------------------------------------- a shift by a whole chunk
@mg.mgpu_kernel(out_shape=lambda x: x)
def shift_by_a_chunk(x, out):            # out[i] = x[i - 128], zeros before
  for c in ml.static_range(x.shape[0] // 128):
    idx = c * 128 + ml.arange(128)
    out.at[ml.ds(c * 128, 128)][...] = x.at[ml.ds(c * 128 - 128, 128)].load(mask=idx >= 128, other=0.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def shift_by_a_chunk_hinted(x, out):
  for c in ml.static_range(x.shape[0] // 128):
    idx = c * 128 + ml.arange(128)
    if c * 128 - 128 + 128 > 0:
      v = x.at[ml.ds(c * 128 - 128, 128)].load(mask=idx >= 128, other=0.0)
    else:
      v = ml.full((128,), 0.0, jnp.float32)
    out.at[ml.ds(c * 128, 128)][...] = v


def test_a_window_wholly_before_the_start_is_hinted_with_its_value_kept():
  # following "skip it ... around the chunk that uses it" dropped the chunk's store: MG602
  expect(shift_by_a_chunk, [S((256,), F32)], mg.IndexOutOfBoundsError, "x.at[ml.ds(c * 128 - 128, 128)]",
         "ml.ds(-128, 128) is out of bounds for dimension 0 of x (size 256)",
         hint="the window has no element inside x (dimension 0 has size 256; it lies wholly before the start), so"
              " neither a mask nor a TMA copy has anything to move: skip it with a test known while compiling,"
              " `if c * 128 - 128 + 128 > 0:` around the chunk that uses it (in an ml.static_range loop, the trips"
              " before the start; where the chunk still needs what a masked load reads there, all its other=, give"
              " it that in an else: branch, v = ml.full(v's shape, other, dtype)), or loop with a run-time"
              " range(...), whose trips there the mask keeps off")
  x = np.random.default_rng(6).standard_normal(256).astype(np.float32)
  np.testing.assert_array_equal(shift_by_a_chunk_hinted(x, interpret=True), np.concatenate([np.zeros(128, np.float32), x[:128]]))
  _export(shift_by_a_chunk_hinted, S((256,), F32))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def in_place_stencil_hinted(x, out):     # in_place_stencil without the alias
  i = ml.program_id(0)
  idx = i * 128 + ml.arange(128)
  left = x.at[ml.ds(i * 128 - 1, 128)].load(mask=idx >= 1, other=0.0)
  out.at[ml.ds(i * 128, 128)][...] = left + x.at[ml.ds(i * 128, 128)][...]


def test_an_in_place_stencils_race_hints_a_new_output():
  e = expect(in_place_stencil, [S((512,), F32)], mg.RaceError, "x.at[ml.ds(i * 128 - 1, 128)].load(",
             "program (1, 0, 0) reads x[127], the memory of out (aliased), while program (0, 0, 0) writes out[127]:"
             " programs run in no fixed order, so the value read depends on timing")
  assert e.hint.endswith("; for a stencil updated in place, write a new output instead of aliasing x to out (drop"
                         " input_output_aliases), so every program reads x's old values")
  x = np.random.default_rng(7).standard_normal(512).astype(np.float32)
  np.testing.assert_array_equal(in_place_stencil_hinted(x, interpret=True), x + np.concatenate([np.zeros(1, np.float32), x[:-1]]))
  _export(in_place_stencil_hinted, S((512,), F32))


# ---------------------------------------------------------------- a negative ml.ds start in SMEM
@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype))
def smem_tail(x, out):
  buf = ml.smem((256,))
  ml.copy(x, buf)
  out[...] = buf.at[ml.ds(-128, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype))
def smem_tail_hinted(x, out):
  buf = ml.smem((256,))
  ml.copy(x, buf)
  out[...] = buf.at[ml.ds(128, 128)][...]


def test_a_negative_smem_window_start_says_it_is_not_counted_from_the_end():
  expect(smem_tail, [S((256,), F32)], mg.IndexOutOfBoundsError, "buf.at[ml.ds(-128, 128)]",
         "ml.ds(-128, 128) is out of bounds for dimension 0 of buf (size 256)",
         hint="dimension 0 of buf has size 256; an SMEM buffer's windows start inside it (ml.ds's start is not"
              " counted from the end, as a negative slice bound is): for its last 128 elements write"
              " ml.ds(128, 128) (or buf.at[-128:]); for a halo before the data, allocate buf with 128 more"
              " elements along dimension 0, fill it from 128 on, and shift its windows by 128")
  x = np.random.default_rng(8).standard_normal(256).astype(np.float32)
  np.testing.assert_array_equal(smem_tail_hinted(x, interpret=True), x[128:])
  _export(smem_tail_hinted, S((256,), F32))
