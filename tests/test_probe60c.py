"""Probe 60c: the refusals probes 59a-59c found and left, each a class a kernel author may hit (design note 199).

Now computed (interpret mode against jnp / NumPy, built for CUDA):

1. `jnp.einsum` of register tensors in general: a product of three or more labels reduced ('hd,thd->ht', a decode
   step's scores of a few heads; 'ht,thd->hd'; 'bhd,bthd->bht'; 'qhd,khd->hqk') was MG003 with an ml.dot hint. Labels
   of few elements are unrolled (frontend/einsum_general.py): each indexed away in both operands, the pieces' einsums
   stacked (a batch or free label) or summed (a contracted one, in float32 for floats). Also an implicit output
   ('ij,jk'), an ellipsis, a diagonal ('ii->i', 'ii') and three or more operands, contracted pairwise.
2. jnp.linalg's array-API aliases of jnp functions (trace, diagonal, outer, cross, matmul, tensordot,
   matrix_transpose) were MG003 "has no form"; lax.conv and lax.conv_with_general_padding too (conv_general_dilated's
   form at their defaults). A single channel held channels last (jax's default for lax.conv_transpose, NHWC) was
   MG204 naming an internal (560,) vector: it is the channels-first conv, its size-1 axes moved.
3. A name an if's two paths give two dtypes (a bool and an int, an int32 and a float32, float16 and float32) was MG003;
   it holds the dtype jnp.where(c, a, b) gives, where that dtype holds both paths' values (jnp's own rounding of an
   int32 past 2**24 into float32 included). int32 with uint32 (no such dtype in 32 bits) and int32 with float16 keep
   MG003.
4. A ref a run-time loop rebinds (an inner `for row in x2` of an outer `for row in x1`'s target) and nothing reads
   after it, nor a later trip before rebinding it, was MG005: it is each trip's own binding, as Python's.
5. A buffer split along a ragged K (probe 59a, ops/split_k.py) read whole into registers, written whole, or copied
   into a GMEM window by TMA kept MG401: its parts are read and joined, written by columns, copied part by part.

Still refused, with a hint (class, line, column, message): an einsum needing more than 64 pieces (MG003, hint: one
batch label at a time); a run-time index of a part of a strided axis (MG003, the element to index); an odd 1-D tile
through SMEM (MG204 at the arange, MG401 at a TMA copy of a row under 16 bytes); part of a split buffer read (MG401);
a ref a loop rebinds that a later trip reads (MG005, hint: name the inner loop's variable apart); jnp.fft (complex
values); lax.conv_transpose(transpose_kernel=True).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from probe_util import export, rnd

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _einsum_kernel(spec, shape, dtype, n):
  if n == 1:
    @mg.mgpu_kernel(out_shape=lambda a: S(shape, dtype), grid=(1,))
    def k(a, o):
      o[...] = jnp.einsum(spec, a[...])
  elif n == 2:
    @mg.mgpu_kernel(out_shape=lambda a, b: S(shape, dtype), grid=(1,))
    def k(a, b, o):
      o[...] = jnp.einsum(spec, a[...], b[...])
  else:
    @mg.mgpu_kernel(out_shape=lambda a, b, c: S(shape, dtype), grid=(1,))
    def k(a, b, c, o):
      o[...] = jnp.einsum(spec, a[...], b[...], c[...])
  return k


EINSUMS = [("hd,thd->ht", [(4, 32), (8, 4, 32)], np.float32), ("hd,thd->th", [(4, 32), (8, 4, 32)], np.float32),
           ("ht,thd->hd", [(4, 8), (8, 4, 32)], np.float32), ("hd,thd->t", [(4, 32), (8, 4, 32)], np.float32),
           ("hd,thd->ht", [(4, 32), (8, 4, 32)], np.float16), ("hd,thd->ht", [(4, 32), (8, 4, 32)], np.int32),
           ("bhd,bthd->bht", [(2, 4, 32), (2, 8, 4, 32)], np.float32), ("ji,jk->ik", [(8, 4), (8, 16)], np.float32),
           ("ii->i", [(32, 32)], np.float32), ("ii", [(32, 32)], np.float32),
           ("ij,jk,kl->il", [(16, 32), (32, 16), (16, 32)], np.float32)]


@pytest.mark.parametrize("spec,shapes,dt", EINSUMS, ids=lambda x: str(x) if isinstance(x, str) else None)
def test_einsum_of_register_tensors(spec, shapes, dt):
  args = [(rnd(s, i) * (4 if dt == np.int32 else 1)).astype(dt) for i, s in enumerate(shapes)]
  want = np.asarray(jnp.einsum(spec, *map(jnp.asarray, args)))
  k = _einsum_kernel(spec, want.shape, want.dtype, len(args))
  got = np.asarray(k(*args, interpret=True))
  assert got.dtype == want.dtype
  tol = 2e-2 if dt == np.float16 else 1e-5
  np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=tol, atol=tol)
  if spec in ("hd,thd->ht", "ij,jk,kl->il", "ii->i"):
    export(k, *args)


def test_einsum_implicit_output_ellipsis_and_heads_on_the_tensor_cores():
  """'ij,jk' (numpy's implicit output) and '...j,jk->...k' are the matrix product ml.dot computes (TF32 for float32);
  'qhd,khd->hqk' of float16 heads is one ml.dot per head."""
  a, b = rnd((64, 32), 1), rnd((32, 64), 2)
  for spec in ("ij,jk", "...j,jk->...k"):
    got = _einsum_kernel(spec, (64, 64), np.float32, 2)(a, b, interpret=True)
    np.testing.assert_allclose(np.asarray(got), a @ b, rtol=5e-2, atol=5e-2)
  q, k = rnd((64, 2, 64), 3, np.float16), rnd((64, 2, 64), 4, np.float16)
  want = np.einsum("qhd,khd->hqk", q.astype(np.float32), k.astype(np.float32))
  kern = _einsum_kernel("qhd,khd->hqk", (2, 64, 64), np.float16, 2)
  np.testing.assert_allclose(np.asarray(kern(q, k, interpret=True), np.float32), want, rtol=2e-2, atol=5e-2)
  export(kern, q, k)


def _softmax(s):
  e = np.exp(s - s.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda q, k, v: q, grid=(1,))
def decode_einsum(q, k, v, o):
  s = jnp.einsum("hd,thd->ht", q[...], k[...]) * 0.25
  p = jax.nn.softmax(s, axis=-1)
  o[...] = jnp.einsum("ht,thd->hd", p, v[...])


@mg.mgpu_kernel(out_shape=lambda q, k, v: q, grid=(1,))
def decode_stacked_whole(q, k, v, o):       # (probe 59b's stack of heads from whole 3-D reads: note 194 left it)
  qq, kk, vv = q[...], k[...], v[...]
  s = jnp.stack([jnp.sum(qq[h][None, :] * kk[:, h, :], axis=-1) for h in range(q.shape[0])]) * 0.25
  p = jax.nn.softmax(s, axis=-1)
  o[...] = jnp.stack([jnp.sum(p[h][:, None] * vv[:, h, :], axis=0) for h in range(q.shape[0])])


@pytest.mark.parametrize("H,T,D", [(2, 6, 32), (4, 8, 32), (2, 5, 64)])
def test_decode_attention_of_few_heads_by_einsum_and_by_stacked_heads(H, T, D):
  """A decode step of few heads over a few tokens (an odd count: computed padded): einsum's pieces and the user's own
  stack of heads from whole 3-D reads."""
  q, k, v = rnd((H, D), 1), rnd((T, H, D), 2), rnd((T, H, D), 3)
  want = np.einsum("ht,thd->hd", _softmax(np.einsum("thd,hd->ht", k, q) * 0.25), v)
  for kern in (decode_einsum, decode_stacked_whole):
    np.testing.assert_allclose(np.asarray(kern(q, k, v, interpret=True)), want, rtol=1e-5, atol=1e-5)
  if T == 6:
    export(decode_einsum, q, k, v)


@mg.mgpu_kernel(out_shape=lambda q, k: S((16, 16, 8), F32), grid=(1,))
def einsum_too_many_pieces(q, k, o):
  qq = q[...]
  kk = k[...]
  o[...] = jnp.einsum("bhd,bthd->bht", qq, kk)


def test_einsum_of_too_many_pieces_says_how_to_take_a_label_at_a_time():
  expect(einsum_too_many_pieces, [S((16, 16, 32), F32), S((16, 8, 16, 32), F32)], mg.KernelTypeError,
         "jnp.einsum", "einsum cannot take a register tensor inside a kernel",
         hint="registers hold 1-D and 2-D tensors, and this einsum is a product of 4 labels: write it one 'b' at a"
              " time, ml.stack([jnp.einsum('hd,thd->ht', qq[b, :, :], kk[b, :, :, :]) for b in range(16)], axis=0)"
              " (each a product the kernel computes), or give 'b' a grid axis and read that element's slices")


# ---------------------------------------------------------------------- jnp.linalg's aliases, lax.conv, hints
LINALG = [("trace", lambda a, b: jnp.linalg.trace(a)), ("trace1", lambda a, b: jnp.linalg.trace(a, offset=1)),
          ("diagonal", lambda a, b: jnp.linalg.diagonal(a)), ("outer", lambda a, b: jnp.linalg.outer(a[0], b[0])),
          ("matmul", lambda a, b: jnp.linalg.matmul(a, b)),
          ("tensordot", lambda a, b: jnp.linalg.tensordot(a, b, axes=1)),
          ("matrix_transpose", lambda a, b: jnp.linalg.matrix_transpose(a)),
          ("norm", lambda a, b: a / jnp.linalg.norm(a, axis=-1, keepdims=True)),
          ("conv", lambda a, b: lax.conv(a[None, None], b[:3, :3][None, None], (1, 1), "SAME")[0, 0]),
          ("conv_general_padding", lambda a, b: lax.conv_with_general_padding(
              a[None, None], b[:3, :3][None, None], (1, 1), ((1, 1), (1, 1)), None, None)[0, 0]),
          ("conv_nhwc", lambda a, b: lax.conv_general_dilated(a[None, :, :, None], b[:3, :3, None, None], (1, 1),
                                                             "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))[0, :, :, 0]),
          ("conv_transpose_nhwc", lambda a, b: lax.conv_transpose(a[:16, :16][None, :, :, None], b[:3, :3, None, None],
                                                                  (2, 2), "SAME")[0, :, :, 0])]


@pytest.mark.parametrize("name,f", LINALG, ids=[n for n, _ in LINALG])
def test_linalg_aliases_and_lax_convs(name, f):
  a, b = rnd((32, 32), 1), rnd((32, 32), 2)
  want = np.asarray(f(jnp.asarray(a), jnp.asarray(b)))

  @mg.mgpu_kernel(out_shape=lambda a, b: S(want.shape, want.dtype), grid=(1,))
  def k(a, b, o):
    o[...] = f(a[...], b[...])
  tol = 5e-2 if name in ("matmul", "tensordot") else 1e-5      # (float32 products on the tensor cores: TF32)
  np.testing.assert_allclose(np.asarray(k(a, b, interpret=True)), want, rtol=tol, atol=tol)
  if name in ("trace", "conv", "conv_transpose_nhwc"):
    export(k, a, b)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def fft_in_kernel(x, o):
  o[...] = jnp.abs(jnp.fft.rfft(x[...], axis=1))[:, :64]


@mg.mgpu_kernel(out_shape=lambda x, w: S((32, 32), F32), grid=(1,))
def conv_transpose_flipped(x, w, o):
  o[...] = lax.conv_transpose(x[...][None, None], w[...][None, None], (2, 2), "SAME",
                              dimension_numbers=("NCHW", "OIHW", "NCHW"), transpose_kernel=True)[0, 0]


def test_fft_and_a_flipped_conv_transpose_say_what_to_write():
  e = expect(fft_in_kernel, [S((64, 64), F32)], mg.KernelTypeError, "jnp.fft.rfft",
             "rfft cannot take a register tensor inside a kernel")
  assert "no complex values" in e.hint and "re = x @ C and im = -(x @ S)" in e.hint
  e = expect(conv_transpose_flipped, [S((16, 16), F32), S((3, 3), F32)], mg.KernelTypeError, "lax.conv_transpose",
             "conv_transpose cannot take a register tensor inside a kernel")
  assert "transpose_kernel=True is not taken" in e.hint and "jnp.flip(w, (0, 1))" in e.hint


def test_the_dft_the_fft_hint_writes_computes():
  """The hint's real DFT: a power spectrum of 64 points a row, against jnp.fft."""
  import math

  @mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
  def dft(x, o):
    n = 64
    kj = (ml.arange(n)[:, None] * ml.arange(n)[None, :]) % n
    c = ml.cos(2 * math.pi / n * kj.astype(F32))
    s = ml.sin(2 * math.pi / n * kj.astype(F32))
    v = x[...]
    re, im = jnp.dot(v, c), -jnp.dot(v, s)         # (TF32 on the tensor cores)
    o[...] = re * re + im * im
  x = rnd((64, 64), 5)
  want = np.abs(np.fft.fft(x, axis=1)) ** 2
  np.testing.assert_allclose(np.asarray(dft(x, interpret=True)), want, rtol=2e-2, atol=0.5)


# ---------------------------------------------------------------------- a name of two dtypes on an if's paths
@mg.mgpu_kernel(out_shape=lambda x, n: S((4,), F32), grid=(1,))
def joined_scalars(x, n, o):
  f = n[0] > 0                 # bool, or int32 on one path
  if n[1] > 1:
    f = n[2] * 3
  c = n[0]                     # int32, or float32 on one path
  if n[1] > 2:
    c = c + 0.5
  g = False
  if n[3] > 0:
    g = g or n[0]              # Python's value: an int
  o[0] = f * 1.0
  o[1] = c * 2.0
  o[2] = g * 1.0
  o[3] = 0.0


@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=(1,))
def joined_tensors(x, n, o):
  t = x[...]
  if n[1] > 1:
    t = x[...] > 0             # float32 tensor, or bool on one path
  u = x[...].astype(jnp.float16)
  if n[0] > 1:
    u = x[...] * 2             # float16, or float32 on one path
  o[...] = t * 1.0 + u


def _joined_want(x, n):
  f = n[2] * 3 if n[1] > 1 else int(n[0] > 0)
  c = n[0] + 0.5 if n[1] > 2 else n[0]
  g = (False or n[0]) if n[3] > 0 else False
  t = (x > 0).astype(np.float32) if n[1] > 1 else x
  u = x * 2 if n[0] > 1 else x.astype(np.float16).astype(np.float32)
  return np.array([f, c * 2, g * 1.0, 0], np.float32), t + u


@pytest.mark.parametrize("n", [(0, 0, 5, 0), (1, 2, 5, 1), (2, 3, -4, 1), (3, 1, 0, 0)], ids=str)
def test_a_name_of_two_dtypes_on_an_ifs_paths_holds_jnp_wheres_dtype(n):
  x = rnd((128,), 1)
  nn = np.array(list(n) + [0] * 4, np.int32)
  ws, wt = _joined_want(x, nn)
  np.testing.assert_array_equal(np.asarray(joined_scalars(x, nn, interpret=True)), ws)
  np.testing.assert_allclose(np.asarray(joined_tensors(x, nn, interpret=True)), wt, rtol=1e-6)


def test_joined_dtypes_build_for_cuda():
  export(joined_scalars, rnd((128,), 1), np.zeros(8, np.int32))
  export(joined_tensors, rnd((128,), 1), np.zeros(8, np.int32))


@mg.mgpu_kernel(out_shape=lambda x, n: S((2,), F32), grid=(1,))
def int_and_uint(x, n, o):
  c = n[0]
  if n[1] > 1:
    c = n[2].astype(jnp.uint32)
  o[0] = c.astype(F32)
  o[1] = 0.0


@mg.mgpu_kernel(out_shape=lambda x, n: S((2,), F32), grid=(1,))
def int_and_half(x, n, o):
  c = n[0]
  if n[1] > 1:
    c = x[0].astype(jnp.float16)
  o[0] = c.astype(F32)
  o[1] = 0.0


def test_dtypes_no_jnp_where_holds_both_of_keep_mg003():
  specs = [S((128,), F32), S((8,), jnp.int32)]
  expect(int_and_uint, specs, mg.KernelTypeError, "c = n[2]",
         "c is a uint32 scalar after this assignment but an int32 scalar on the other path through the if at line"
         f" {int_and_uint.fn.__code__.co_firstlineno + 3}", hint="convert it after this assignment: c = c.astype(jnp.int32)")
  expect(int_and_half, specs, mg.KernelTypeError, "c = x[0]",
         "c is a float16 scalar after this assignment but an int32 scalar on the other path through the if at line"
         f" {int_and_half.fn.__code__.co_firstlineno + 3}")


# ---------------------------------------------------------------------- a ref a run-time loop rebinds
ROWS = (np.arange(3 * 128, dtype=np.float32) % 7 - 3).reshape(3, 128)


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), F32), grid=(1,))
def inner_loop_of_the_same_name(x, n, o):
  acc = ml.zeros((128,), F32)
  for row in x:
    acc = acc + row[...]
    for j in ml.range(n[0]):
      for row in x:
        acc = acc + 2 * row[...]
  o[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), F32), grid=(1,))
def ref_rebound_each_trip(x, n, o):
  r = x.at[0]
  acc = r[...]
  for j in ml.range(n[0]):
    r = x.at[j + 1]
    acc = acc + r[...]
  o[...] = acc


def test_a_ref_a_run_time_loop_rebinds_for_its_own_trips_computes():
  for n in range(3):
    nn = np.array([n], np.int32)
    acc = np.zeros(128, np.float32)           # (the same text run as Python)
    for row in ROWS:
      acc = acc + row
      for j in range(n):
        for row in ROWS:
          acc = acc + 2 * row
    np.testing.assert_array_equal(np.asarray(inner_loop_of_the_same_name(ROWS, nn, interpret=True)), acc)
    np.testing.assert_array_equal(np.asarray(ref_rebound_each_trip(ROWS, nn, interpret=True)), ROWS[:n + 1].sum(0))
  export(inner_loop_of_the_same_name, ROWS, np.array([2], np.int32))


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), F32), grid=(1,))
def read_before_the_inner_loop(x, n, o):
  acc = ml.zeros((128,), F32)
  for row in x:
    for j in ml.range(n[0]):
      acc = acc + row[...]
      for row in x:
        acc = acc + 2 * row[...]
  o[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), F32), grid=(1,))
def ref_read_after_the_loop(x, n, o):
  r = x.at[0]
  for j in ml.range(n[0]):
    r = x.at[1]
  o[...] = r[...]


def test_a_ref_a_later_trip_or_the_code_after_reads_keeps_mg005():
  specs = [S((3, 128), F32), S((1,), jnp.int32)]
  msg = ("row is rebound inside a runtime loop to a float32 GMEM ref of shape (128,); only register values and"
         " numbers can change across iterations")
  expect(read_before_the_inner_loop, specs, mg.LoopCarryTypeError, "row in x:", msg, nth=1,
         hint="row is read again after this loop (on a later trip of a loop around it, or after it), where Python"
              " would see the ref this `for row in ...` left in it: give this loop's variable a name of its own (for"
              " row2 in ...)")
  expect(ref_read_after_the_loop, specs, mg.LoopCarryTypeError, "r = x.at[1]", msg.replace("row", "r"))


# ---------------------------------------------------------------------- split buffers (ragged K)
def _split(mode):
  @mg.mgpu_kernel(out_shape=lambda a, b: (S((a.shape[0], b.shape[1]), F32), S((a.shape[0], 128), a.dtype)),
                  grid=lambda a, b: (a.shape[0] // 64,))
  def k(a, b, c, d):
    i = ml.program_id(0)
    a_s = ml.smem((64, 128))
    b_s = ml.smem((128, 64))
    acc = ml.zeros((64, 64), F32)
    for kk in ml.range(ml.cdiv(a.shape[1], 128)):
      ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(kk * 128, 128)], a_s)
      ml.copy(b.at[ml.ds(kk * 128, 128), :], b_s)
      if mode == "scaled":
        a_s[...] = a_s[...] * 2
      acc = acc + ml.dot(a_s, b_s)
    if mode == "part":
      acc = acc + a_s[:, 0:64].astype(F32)
    if mode == "part":
      d.at[ml.ds(i * 64, 64), :][...] = ml.zeros((64, 128), a.dtype)
    else:
      ml.copy(a_s, d.at[ml.ds(i * 64, 64), :])          # (a TMA store of the last K window)
    c.at[ml.ds(i * 64, 64), :][...] = acc
  return k


SPLIT_SCALED, SPLIT_PART = _split("scaled"), _split("part")
A16, B16 = rnd((128, 1000), 6, np.float16), rnd((1000, 64), 7, np.float16)


def _split_want(scale):
  a, b = A16.astype(np.float32) * scale, B16.astype(np.float32)
  last = np.concatenate([a[:, 896:], np.zeros((128, 24), np.float32)], axis=1)     # (zero-filled past K)
  return a @ b, last


def test_a_split_buffer_written_read_whole_and_stored_by_tma():
  """`a_s[...] = a_s[...] * 2` of a buffer split along K = 1000 (its parts read and joined, written by columns),
  then `ml.copy(a_s, d.at[...])` (one copy per part): it was MG401."""
  got = SPLIT_SCALED(A16, B16, interpret=True)
  want, last = _split_want(2)
  np.testing.assert_allclose(np.asarray(got[0]), want, rtol=1e-2, atol=1e-1)
  np.testing.assert_array_equal(np.asarray(got[1], np.float32), last)
  export(SPLIT_SCALED, A16, B16)


def test_part_of_a_split_buffer_read_computes():
  """`a_s[:, 0:64]` of a buffer split along K = 1000: MG401 here at first; since probe 60a the split retry that gives
  up falls back to loading the buffer a tile at a time (layout_checks.by_tile_blocks), so it computes."""
  c, d = SPLIT_PART(A16, B16, interpret=True)
  want, last = _split_want(1)
  np.testing.assert_allclose(np.asarray(c), want + last[:, :64], rtol=1e-2, atol=1e-1)
  np.testing.assert_array_equal(np.asarray(d, np.float32), np.zeros((128, 128), np.float32))
  export(SPLIT_PART, A16, B16)


# ---------------------------------------------------------------------- refusals left as they were, with their hints
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), x.dtype), grid=(3,))
def part_of_a_strided_axis(x, o):
  p = ml.program_id(0)
  o[...] = x.at[2:7:2].at[p][...]


def _odd_1d(tma):
  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 7),))
  def odd_1d(x, o):
    i = ml.program_id(0)
    xs = ml.smem((7,))
    ok = i * 7 + ml.arange(7) < x.shape[0]
    xs[...] = x.at[ml.ds(i * 7, 7)].load(mask=ok, other=0) * 2
    if tma:
      ml.copy(xs, o.at[ml.ds(i * 7, 7)])
    else:
      o.at[ml.ds(i * 7, 7)].store(xs[...] + 1, mask=ok)
  return odd_1d


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 7),))
def odd_1d_as_hinted(x, o):
  i = ml.program_id(0)
  xs = ml.smem((8,))
  ok = (ml.arange(8) < 7) & (i * 7 + ml.arange(8) < x.shape[0])
  xs[...] = x.at[ml.ds(i * 7, 8)].load(mask=ok, other=0) * 2
  o.at[ml.ds(i * 7, 8)].store(xs[...] + 1, mask=ok)


def test_refusals_left_say_what_to_write():
  """A run-time index of a part of a strided axis (by design: an index past the view would read the array outside it
  unseen), and an odd 1-D tile through SMEM's TMA row of 28 bytes (its register read and write compute since probe
  72a; they were MG204, "a 1-D register vector needs a multiple of 8 elements")."""
  expect(part_of_a_strided_axis, [S((16, 128), F32)], mg.KernelTypeError, "x.at[2:7:2].at[p]",
         "x.at[2:7:2] takes elements 2, 4, ... of an axis of 16: a run-time index of it is not composed, since an"
         " index past the view's 3 elements could name an element of the array outside it that no bounds check sees",
         hint="index the ref itself with the element you mean, 2 + p * 2 (bounding p to 0..2 yourself), or take the"
              " view's elements whole with [...]")
  k = _odd_1d(False)      # (computes since probe 72a: the (7,) SMEM buffer stored by a masked scatter, read back
  x = rnd((21,), 3)        # element by element, padded)
  np.testing.assert_array_equal(np.asarray(k(x, interpret=True)), x * 2 + 1)
  k = _odd_1d(True)
  expect(k, [S((21,), F32)], mg.TmaLimitError, "ml.copy(xs", "TMA copies need the last dimension to span a multiple"
         " of 16 bytes; 7 x 4 bytes = 28")
  np.testing.assert_array_equal(np.asarray(odd_1d_as_hinted(x, interpret=True)), x * 2 + 1)    # (the hint followed)


@pytest.mark.gpu
def test_probe60c_kernels_on_the_gpu():
  """einsum's pieces, the joined dtypes, the loops and the split buffers (TMA stores of parts, swizzled reads) on the
  GPU against NumPy."""
  q, k, v = rnd((2, 32), 1), rnd((6, 2, 32), 2), rnd((6, 2, 32), 3)
  want = np.einsum("ht,thd->hd", _softmax(np.einsum("thd,hd->ht", k, q) * 0.25), v)
  np.testing.assert_allclose(np.asarray(jax.jit(decode_einsum)(q, k, v)), want, rtol=1e-4, atol=1e-4)
  nn = np.array([1, 2, 5, 1, 0, 0, 0, 0], np.int32)
  x = rnd((128,), 1)
  ws, wt = _joined_want(x, nn)
  np.testing.assert_array_equal(np.asarray(jax.jit(joined_scalars)(x, nn)), ws)
  np.testing.assert_allclose(np.asarray(jax.jit(joined_tensors)(x, nn)), wt, rtol=1e-6)
  np.testing.assert_array_equal(np.asarray(jax.jit(ref_rebound_each_trip)(ROWS, np.array([2], np.int32))),
                                ROWS.sum(0))
  got = jax.jit(SPLIT_SCALED)(A16, B16)
  want, last = _split_want(2)
  np.testing.assert_allclose(np.asarray(got[0]), want, rtol=1e-2, atol=1e-1)
  np.testing.assert_array_equal(np.asarray(got[1], np.float32), last)
