"""A newcomer probe's hints that were wrong or did not fix the kernel when followed literally
(probe 12): each diagnostic, checked as printed, and the code its hint suggests, built for the
GPU (typed IR and a CUDA export) and run in interpret mode against jnp."""
import jax
import jax.numpy as jnp
import numpy as np

import rand
import mgpu_dsl as mg
from locate import expect
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, BF16, F16 = jnp.float32, jnp.bfloat16, jnp.float16


def exports(kernel, *specs, **constexprs):
  """The kernel builds for the GPU: its typed IR, and a CUDA export of a call."""
  kernel.typed_ir(*specs, **constexprs)
  f = jax.jit(lambda *a: kernel(*a, **constexprs))
  assert "mosaic_gpu" in jax.export.export(f, platforms=["cuda"])(*specs).mlir_module()


def rn(shape, dtype, key, scale=1.0):
  return (scale * rand.normal(rand.key(key), shape, F32)).astype(dtype)


def mm(a, b):
  return np.asarray(jnp.dot(a, b, preferred_element_type=F32))


# ---------------------------------------------------------------- 1. MG401: a TMA store into a ragged output
def _out(a, b):
  return S((a.shape[0], b.shape[1]), F16)


@mg.mgpu_kernel(out_shape=_out, grid=lambda a, b: (ml.cdiv(a.shape[0], 128), b.shape[1] // 128))
def ragged_store(a, b, c):
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((128, 64)), ml.smem((64, 128))
  acc = ml.zeros((128, 128), F32)
  for k in ml.range(ml.cdiv(a.shape[1], 64), stages=2):
    ml.copy(a.at[ml.ds(i * 128, 128), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 128, 128)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c_s = ml.smem((128, 128))
  c_s[...] = acc.astype(F16)
  ml.copy(c_s, c.at[ml.ds(i * 128, 128), ml.ds(j * 128, 128)])


@mg.mgpu_kernel(out_shape=_out, grid=lambda a, b: (ml.cdiv(a.shape[0], 128), b.shape[1] // 128))
def ragged_store_split(a, b, c):          # the hint's second way, followed
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((128, 64)), ml.smem((64, 128))
  acc = ml.zeros((128, 128), F32)
  for k in ml.range(ml.cdiv(a.shape[1], 64), stages=2):
    ml.copy(a.at[ml.ds(i * 128, 128), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 128, 128)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  y = acc.astype(F16)
  c_s0, c_s1 = ml.smem((128, 64)), ml.smem((128, 64))
  c_s0[...] = y[:, 0:64]
  c_s1[...] = y[:, 64:128]
  ml.copy(c_s0, c.at[ml.ds(i * 128, 128), ml.ds(j * 128, 64)])
  ml.copy(c_s1, c.at[ml.ds(i * 128, 128), ml.ds(j * 128 + 64, 64)])


@mg.mgpu_kernel(out_shape=lambda a, b: S((ml.cdiv(a.shape[0], 8) * 8, b.shape[1]), F16),
                grid=lambda a, b: (ml.cdiv(a.shape[0], 128), b.shape[1] // 128))
def ragged_store_enlarged(a, b, c):       # the hint's first way, followed: 304 rows, sliced to 300
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((128, 64)), ml.smem((64, 128))
  acc = ml.zeros((128, 128), F32)
  for k in ml.range(ml.cdiv(a.shape[1], 64), stages=2):
    ml.copy(a.at[ml.ds(i * 128, 128), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 128, 128)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c_s = ml.smem((128, 128))
  c_s[...] = acc.astype(F16)
  ml.copy(c_s, c.at[ml.ds(i * 128, 128), ml.ds(j * 128, 128)])


def _cols_store(a, b, c, n: ml.constexpr):
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((128, 64)), ml.smem((64, 128))
  acc = ml.zeros((128, 128), F32)
  for k in ml.range(a.shape[1] // 64, stages=2):
    ml.copy(a.at[ml.ds(i * 128, 128), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 128, 128)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c_s = ml.smem((128, 128))
  c_s[...] = acc.astype(F16)
  ml.copy(c_s, c.at[ml.ds(i * 128, 128), ml.ds(j * 128, 128)])


# b's columns padded to 256 outside the kernel, the output n = 200 columns wide
ragged_cols_store = mg.mgpu_kernel(out_shape=lambda a, b, n: S((a.shape[0], n), F16),
                                   grid=lambda a, b, n: (a.shape[0] // 128, b.shape[1] // 128))(_cols_store)
# the hint, followed: the output as wide as b (256), sliced to 200 outside the kernel
ragged_cols_store_enlarged = mg.mgpu_kernel(out_shape=lambda a, b, n: S((a.shape[0], b.shape[1]), F16),
                                            grid=lambda a, b, n: (a.shape[0] // 128, b.shape[1] // 128))(_cols_store)


def test_a_ragged_tma_store_hint_is_for_an_output():
  # (probe 46c: a store of 300 rows through a tiled buffer two tiles wide goes a row of tiles a TMA, so the
  # kernel the hint was for computes as written; the hint's two ways still do)
  a, b = rn((300, 136), F16, 1), rn((136, 256), F16, 2)
  specs = [S(a.shape, F16), S(b.shape, F16)]
  want = mm(a, b)
  exports(ragged_store, *specs)
  np.testing.assert_allclose(np.asarray(ragged_store(a, b, interpret=True), np.float32), want, rtol=2e-2, atol=2e-2)
  exports(ragged_store_split, *specs)
  got = np.asarray(ragged_store_split(a, b, interpret=True), np.float32)
  np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
  exports(ragged_store_enlarged, *specs)
  got = np.asarray(ragged_store_enlarged(a, b, interpret=True), np.float32)
  assert got.shape == (304, 256)
  np.testing.assert_allclose(got[:300], want, rtol=2e-2, atol=2e-2)


def test_a_ragged_tma_store_in_columns_computes_as_written():
  # (probe 58b: c_s, tiled only to store the tensor-core result fast, stays untiled where its TMA store cannot move
  # whole tiles of c; it was MG401 with the hint to enlarge the output, which still works)
  a, b = rn((256, 128), F16, 3), rn((128, 200), F16, 4)
  bp = jnp.pad(b, ((0, 0), (0, 56)))
  specs = [S(a.shape, F16), S(bp.shape, F16)]
  exports(ragged_cols_store, *specs, n=200)
  got = np.asarray(ragged_cols_store(a, bp, n=200, interpret=True), np.float32)
  assert got.shape == (256, 200)
  np.testing.assert_allclose(got, mm(a, b), rtol=2e-2, atol=2e-2)
  exports(ragged_cols_store_enlarged, *specs, n=200)
  got = np.asarray(ragged_cols_store_enlarged(a, bp, n=200, interpret=True), np.float32)[:, :200]
  np.testing.assert_allclose(got, mm(a, b), rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- 2. MG204: a run-time window of a dot result's buffer
@ml.inline
def _splitk(a, b, c):
  r, i = ml.program_id(0), ml.program_id(1)
  half = a.shape[1] // 2
  a_s, b_s = ml.smem((128, 64)), ml.smem((64, 128))
  acc = ml.zeros((128, 128), F32)
  for k in ml.range(half // 64, stages=2):
    ml.copy(a.at[ml.ds(i * 128, 128), ml.ds(r * half + k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(r * half + k * 64, 64), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
  part = ml.smem((128, 128), F32)
  part[...] = acc
  ml.cluster_sync()
  other = ml.cluster_ref(part, 1 - r)[...]
  ml.cluster_sync()
  return r, i, acc + other


SPLITK = dict(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32),
              grid=lambda a, b: (2, a.shape[0] // 128), cluster=(2, 1))


@mg.mgpu_kernel(**SPLITK)
def splitk_window(a, b, c):
  r, i, tot = _splitk(a, b, c)
  res = ml.smem((128, 128), F32)
  res[...] = tot
  ml.copy(res.at[ml.ds(r * 64, 64)], c.at[ml.ds(i * 128 + r * 64, 64)])


@mg.mgpu_kernel(out_shape=lambda a, b, at: S((a.shape[0], b.shape[1]), F32),
                grid=lambda a, b, at: (2, a.shape[0] // 128), cluster=(2, 1))
def splitk_loaded_window(a, b, at, c):     # a start read from memory: not provably a whole tile
  r, i, tot = _splitk(a, b, c)
  res = ml.smem((128, 128), F32)
  res[...] = tot
  ml.copy(res.at[ml.ds(at[r], 64)], c.at[ml.ds(i * 128 + r * 64, 64)])


@mg.mgpu_kernel(**SPLITK)
def splitk_branches(a, b, c):             # the hint's first way, followed
  r, i, tot = _splitk(a, b, c)
  res = ml.smem((128, 128), F32)
  res[...] = tot
  if r == 0:
    ml.copy(res.at[0:64], c.at[ml.ds(i * 128, 64)])
  else:
    ml.copy(res.at[64:128], c.at[ml.ds(i * 128 + 64, 64)])


@mg.mgpu_kernel(**SPLITK)
def splitk_masked(a, b, c):               # the hint's second way, followed
  r, i, tot = _splitk(a, b, c)
  c.at[ml.ds(i * 128, 128)].store(tot, mask=ml.arange(128)[:, None] // 64 == r)


def test_a_runtime_window_of_a_dot_results_buffer_says_why_it_is_tiled():
  a, b = rn((256, 256), F16, 1), rn((256, 128), F16, 2)
  specs = [S(a.shape, F16), S(b.shape, F16)]
  # (r * 64 is a whole number of res's 8-row tiles: the copy takes that window, probe 45b)
  expect(splitk_loaded_window, specs + [S((2,), jnp.int32)], mg.LayoutError, "res.at[ml.ds(at[r], 64)]",
         "res.at[ml.ds(at[r], 64)] slices the rows or columns of res, which is tiled for the tensor cores"
         " (8-row, 128-byte tiles) because an ml.dot result (a value in the WGMMA layout) is stored into it",
         hint="a window of a tiled buffer must start on a whole tile: if its run-time start always is one, say"
              " so, ml.ds(ml.multiple_of(at[r], 8), 64) (checked in interpret mode); else, with a static window"
              " (ml.copy takes static windows of whole tiles), a branch per start, each copying a static window"
              " of whole tiles (rows a multiple of 8, columns of 128 bytes) (res.at[0:64]); or store tot from"
              " registers, not through res, into the array's window of all 128 rows with a mask:"
              " .store(tot, mask=the elements this program writes)")
  want = mm(a, b)
  for kernel in (splitk_window, splitk_branches, splitk_masked):
    exports(kernel, *specs)
    np.testing.assert_allclose(np.asarray(kernel(a, b, interpret=True)), want, rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------- 3. MG204: an ml.dot operand rescaled in SMEM
def _scaled(block, bk, scale_b_in_smem, scale_a_in_regs=False, scale_result=False):
  @mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (1,),
                  block=block)
  def kernel(a, b, c):
    a_s, b_s = ml.smem((128, bk)), ml.smem((bk, 128))
    acc = ml.zeros((128, 128), F32)
    for k in range(a.shape[1] // bk):
      ml.copy(a.at[:, ml.ds(k * bk, bk)], a_s)
      ml.copy(b.at[ml.ds(k * bk, bk), :], b_s)
      if scale_b_in_smem:
        b_s[...] = b_s[...] * 2.0
      if scale_a_in_regs:
        acc = ml.dot(a_s[...] * 2.0, b_s, acc)
      else:
        acc = ml.dot(a_s, b_s, acc)
    if scale_result:
      c[...] = acc * 2.0
    else:
      c[...] = acc
  return kernel


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (1,), block=256)
def rescale_b(a, b, c):
  a_s, b_s = ml.smem((128, 64)), ml.smem((64, 128))
  acc = ml.zeros((128, 128), F32)
  for k in range(a.shape[1] // 64):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    b_s[...] = b_s[...] * 2.0
    acc = ml.dot(a_s, b_s, acc)
  c[...] = acc


def test_a_dot_operand_rescaled_in_smem_is_not_called_a_tensor_core_result():
  """A 64-row B tile rescaled in SMEM at block=256 was MG204 (its tile took the layout that splits
  rows among warpgroups); probe 32e has every warpgroup rescale the whole tile, so it builds, as do
  the forms the old hint gave."""
  a, b = rn((128, 256), BF16, 1), rn((256, 128), BF16, 2)
  specs = [S(a.shape, BF16), S(b.shape, BF16)]
  exports(rescale_b, *specs)
  np.testing.assert_allclose(np.asarray(rescale_b(a, b, interpret=True)), 2 * mm(a, b), rtol=1e-4, atol=1e-3)
  want = 2 * mm(a, b)
  followed = [_scaled(128, 64, True),                          # block=128
              _scaled(256, 128, True),                         # b_s of 128 rows (a k step of 128)
              _scaled(256, 64, False, scale_a_in_regs=True),   # the A operand scaled
              _scaled(256, 64, False, scale_result=True)]      # the result scaled
  for kernel in followed:
    exports(kernel, *specs)
    np.testing.assert_allclose(np.asarray(kernel(a, b, interpret=True)), want, rtol=1e-4, atol=1e-3)
