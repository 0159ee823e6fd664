"""Probe 61b: the refusals and rough diagnostics probes 60a-60d left (design note 204).

The classes found, each fixed:

1. A ref as a condition (`a if flag else b`, `if flag:`, `while flag:`, `not flag`, `flag and ...`, `bool(flag)`, a
   flag passed as a one-element array) was MG001 "a conditional expression on a runtime value" with an ml.where
   hint, MG003 "an if condition must be ... got a GMEM ref", "this while condition never changes", "'and'/'or' on
   register values", ".astype works on register values": each form now says "a ref is not a condition" (MG003) at
   the test, with the read that makes one (`flag[0]`; `x[i, j]` or `ml.any(x[...] != 0)` of a tile) in the user's
   own form.
2. Liger's `tl.program_id(0).to(tl.int64) * stride` of an int32 `ml.scalar` stride was MG104 (probe 52f's rule):
   jnp's promotion and Triton both give int64, and without jax_enable_x64 the int32 holds the value passed exactly
   (a Python int past int32 is refused), so it computes in int64; with x64 (a Python int through jax.jit is its low
   32 bits) it stays MG104 (test_probe60b, test_probe31c).
3. `a_s[...].astype(f32) @ b_s[...].T.astype(f32)` (the transpose before the cast, the tensor-core fuzzer's seed
   1217) was a float32 product of register chunks (MG402 at (64, 256) by (256, 256)), and `.astype(f32).T` kept its
   dead float32 transpose scratch (MG402 too): both are the widened 16-bit product ml.dot computes, the fresh
   transpose dropped.
4. MG402 pointed at the largest buffer and listed every buffer (seed 1779: sixty of them): it points at the
   allocation that takes the kernel past the limit, in allocation order, notes the largest others at their lines,
   counts repeated buffers, and where the stages cannot help names the smaller tile that fits.
5. Split-K's small accumulators ((8, 24), (8, 8)) added by ml.atomic_add were MG204 about a (192,) vector: the
   padded trace updates the padded window under the padding's and the user's masks. A float16 (8, 24) accumulator
   meeting a bias failed there too (a float32 product added to it); a padded product stored into an SMEM buffer of
   its own shape that registers hold ((256, 24)) is stored as one piece.
"""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe_util import export
from probe_util import line_of as _line

tl = ml
S = jax.ShapeDtypeStruct
X = (np.arange(128 * 128, dtype=np.float32).reshape(128, 128) % 7) - 3
ON, OFF = np.array([1], np.int32), np.array([0], np.int32)




def _refusal(kernel, *args, **kw):
  with pytest.raises(mg.KernelError) as info:
    kernel(*args, interpret=True, **kw)
  e = info.value
  assert not isinstance(e, mg.InternalError), e
  assert e.filename == __file__ and e.hint, e
  return e


# ---------------------------------------------------------------------- 1. a ref is not a condition
@mg.mgpu_kernel(out_shape=lambda x, f: x)
def ifexp_of_flag(x, f, o):
  o[...] = x[...] * 2 if f else x[...]


@mg.mgpu_kernel(out_shape=lambda x, f: x)
def ifexp_of_flag_fixed(x, f, o):
  o[...] = x[...] * 2 if f[0] else x[...]


@mg.mgpu_kernel(out_shape=lambda x, f: x)
def if_of_flag(x, f, o):
  if f:
    o[...] = x[...] * 2
  else:
    o[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x, f: x)
def elif_of_flag(x, f, o):
  if x.shape[0] > 1000:
    o[...] = x[...]
  elif f:
    o[...] = x[...] * 2
  else:
    o[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x, f: x)
def while_of_flag(x, f, o):
  o[...] = x[...]
  while f:
    o[...] = x[...] * 2


@mg.mgpu_kernel(out_shape=lambda x, f: x)
def not_of_flag(x, f, o):
  if not f:
    o[...] = x[...]
  else:
    o[...] = x[...] * 2


@mg.mgpu_kernel(out_shape=lambda x, f: x)
def and_of_flag(x, f, o):
  if f and x.shape[0] > 2:
    o[...] = x[...] * 2
  else:
    o[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x, f: x)
def bool_of_flag(x, f, o):
  if bool(f):
    o[...] = x[...] * 2
  else:
    o[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x, f: x)
def ifexp_of_view(x, f, o):
  o[...] = x[...] * (2.0 if f.at[0] else 1.0)


@mg.mgpu_kernel(out_shape=lambda x, f: x)
def ifexp_of_smem_tile(x, f, o):
  s = ml.smem((128, 128))
  s[...] = x[...]
  o[...] = s[...] if s else x[...]


@mg.mgpu_kernel(out_shape=lambda x, f: x)
def if_of_input_tile(x, f, o):
  o[...] = x[...]
  if x:
    o[...] = x[...] * 2


_FLAG = "a ref is not a condition: f is a GMEM ref (int32[1]), which names memory, not a value"


@pytest.mark.parametrize("kernel, text, words, hint", [
    (ifexp_of_flag, "f else", _FLAG, "read its value: x[...] * 2 if f[0] else x[...]"),
    (if_of_flag, "if f:", _FLAG, "read its value: if f[0]:"),
    (elif_of_flag, "elif f:", _FLAG, "read its value: elif f[0]:"),
    (while_of_flag, "while f:", _FLAG, "read its value: while f[0]:"),
    (not_of_flag, "not f:", _FLAG, "read its value: not f[0]"),
    (and_of_flag, "if f and", _FLAG, "read its value: f[0]"),
    (bool_of_flag, "bool(f)", _FLAG, "read its value: bool(f[0])"),
    (ifexp_of_view, "f.at[0]", "a ref is not a condition: f.at[0] is a GMEM ref (int32[])",
     "read its value: 2.0 if f[0] else 1.0"),
    (ifexp_of_smem_tile, "s else", "a ref is not a condition: s is an SMEM ref (float32[128, 128])",
     "read a value: s[...] if s[i, j] else x[...] (one element), or choose per element with ml.where(s[...] != 0,"
     " s[...], x[...])"),
    (if_of_input_tile, "if x:", "a ref is not a condition: x is a GMEM ref (float32[128, 128])",
     "read a value: if x[i, j]: (one element), or reduce every element to one truth value: if ml.any(x[...] != 0):"),
], ids=["ifexp", "if", "elif", "while", "not", "and", "bool", "view", "smem", "tile"])
def test_a_ref_as_a_condition_says_so_and_hints_the_read(kernel, text, words, hint):
  e = _refusal(kernel, X, ON)
  assert (type(e), e.code) == (mg.KernelTypeError, "MG003")
  line, col = _line(kernel, text)
  at = re.search(r"\b[fsx]\b", text).start()
  assert (e.lineno, e.col_offset) == (line, col + at)       # (at the ref itself)
  assert e.message.startswith(words), e.message
  assert e.hint == hint


def test_the_hinted_read_computes():
  for f, k in ((ON, 2), (OFF, 1)):
    np.testing.assert_array_equal(ifexp_of_flag_fixed(X, f, interpret=True), X * k)
  export(ifexp_of_flag_fixed, X, ON)


@pytest.mark.gpu
def test_the_hinted_read_gpu():
  for f, k in ((ON, 2), (OFF, 1)):
    np.testing.assert_array_equal(jax.jit(ifexp_of_flag_fixed)(X, f), X * k)


# ---------------------------------------------------------------------- 2. an int64 program id times an int32 stride
@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=(8,))
def liger_rows(X_ptr, X_stride: tl.scalar, Y_ptr):
  row = tl.program_id(0).to(tl.int64)
  cols = tl.arange(0, 256)
  x = tl.load(X_ptr.at[row * X_stride + cols])
  tl.store(Y_ptr.at[row * X_stride + cols], x * 2)


@mg.mgpu_kernel(out_shape=lambda s: S((8,), jnp.int32), grid=(8,))
def wide_offsets(stride: tl.scalar, o):      # row * stride past 2**31: int64's value, not int32's wrap
  row = tl.program_id(0).to(tl.int64)
  o[tl.program_id(0)] = ((row * stride) >> 20).astype(jnp.int32)


@mg.mgpu_kernel(out_shape=lambda s: S((8,), jnp.int32), grid=(8,))
def wide_offsets_of_input(stride, o):         # a 0-d input read: int64 too
  row = tl.program_id(0).to(tl.int64)
  o[tl.program_id(0)] = ((row * stride[...]) >> 20).astype(jnp.int32)


def test_an_int64_program_id_times_an_int32_stride_computes_in_int64():
  x = np.arange(8 * 256, dtype=np.float32) % 11
  for stride in (256, np.int32(256), jnp.int32(256)):
    np.testing.assert_array_equal(liger_rows(x, stride, interpret=True), x * 2)
  np.testing.assert_array_equal(jax.jit(lambda v, s: liger_rows(v, s, interpret=True))(x, 256), x * 2)
  want = np.arange(8, dtype=np.int32) * 1024               # (2**30 * row) >> 20; int32 would wrap at row 2
  np.testing.assert_array_equal(wide_offsets(2 ** 30, interpret=True), want)
  np.testing.assert_array_equal(wide_offsets_of_input(np.int32(2 ** 30), interpret=True), want)
  export(liger_rows, x, np.int32(256))
  export(wide_offsets, np.int32(2 ** 30))


def test_with_x64_a_python_int_stride_stays_mg104():
  with jax.enable_x64(True):
    with pytest.raises(mg.DtypeMismatchError) as info:
      wide_offsets.check(S((), jnp.int32))
  e = info.value
  line, col = _line(wide_offsets, "((row * stride)")
  assert e.code == "MG104" and (e.lineno, e.col_offset) == (line, col + 2)
  assert "* on row (int64) and stride (int32)" in e.message and "stride.astype(jnp.int64)" in e.hint


@pytest.mark.gpu
def test_an_int64_program_id_times_an_int32_stride_gpu():
  x = jnp.arange(8 * 256, dtype=jnp.float32) % 11
  np.testing.assert_array_equal(jax.jit(liger_rows)(x, 256), x * 2)
  np.testing.assert_array_equal(wide_offsets(2 ** 30), np.arange(8, dtype=np.int32) * 1024)


# ---------------------------------------------------------------------- 3. a widened operand transposed before its cast
def _widened(form):
  @mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[form == "both"], bt.shape[0]), jnp.float32))
  def k(a, bt, o):
    a_s, b_s = ml.smem(a.shape, a.dtype), ml.smem(bt.shape, bt.dtype)
    ml.copy(a, a_s)
    ml.copy(bt, b_s)
    if form == "T.astype":
      o[...] = a_s[...].astype(jnp.float32) @ b_s[...].T.astype(jnp.float32)
    elif form == "astype.T":
      o[...] = a_s[...].astype(jnp.float32) @ b_s[...].astype(jnp.float32).T
    elif form == "jnp.dot":
      o[...] = jnp.dot(a_s[...].astype(jnp.float32), b_s[...].T.astype(jnp.float32))
    elif form == "lax.dot + 1":
      o[...] = jax.lax.dot(a_s[...].astype(jnp.float32), b_s[...].T.astype(jnp.float32)) + 1.0
    else:          # A transposed: a_s holds (k, m)
      o[...] = jnp.matmul(a_s[...].T.astype(jnp.float32), b_s[...].T.astype(jnp.float32))
  return k


_FORMS = ["T.astype", "astype.T", "jnp.dot", "lax.dot + 1", "both"]
_WIDENED = {f: _widened(f) for f in _FORMS}


@pytest.mark.parametrize("form", _FORMS)
def test_a_16_bit_tile_transposed_then_widened_is_an_ml_dot_operand(form):
  rng = np.random.default_rng(3)
  a = rng.integers(-3, 4, (64, 256)).astype(jnp.bfloat16)
  if form == "both":
    a = rng.integers(-3, 4, (256, 64)).astype(jnp.bfloat16)
  bt = rng.integers(-3, 4, (256, 256)).astype(jnp.bfloat16)
  want = (a.astype(np.float32).T if form == "both" else a.astype(np.float32)) @ bt.astype(np.float32).T
  got = _WIDENED[form](a, bt, interpret=True)       # (was MG402: a float32 product's, or a transpose's, scratch)
  np.testing.assert_array_equal(np.asarray(got), want + (1 if form == "lax.dot + 1" else 0))
  if form in ("T.astype", "both"):
    export(_WIDENED[form], a, bt)


def test_the_fuzzers_seed_1217_computes():
  import dot_fuzz
  assert dot_fuzz.run(dot_fuzz.Gen(1217), build=False)[0] == "ok"


@pytest.mark.gpu
def test_a_16_bit_tile_transposed_then_widened_gpu():
  rng = np.random.default_rng(4)
  a = rng.integers(-3, 4, (64, 256)).astype(jnp.bfloat16)
  bt = rng.integers(-3, 4, (256, 256)).astype(jnp.bfloat16)
  got = jax.jit(_WIDENED["T.astype"])(a, bt)
  np.testing.assert_array_equal(np.asarray(got), a.astype(np.float32) @ bt.astype(np.float32).T)


# ---------------------------------------------------------------------- 4. MG402 at the allocation past the limit
@mg.mgpu_kernel(out_shape=lambda x: x)
def three_buffers(x, o, *, rows: ml.constexpr = 128):
  a_s = ml.smem((rows, 256), jnp.float32)
  b_s = ml.smem((64, 256), jnp.float32)
  c_s = ml.smem((64, 256), jnp.float32)
  ml.copy(x.at[ml.ds(0, rows)], a_s)
  ml.copy(x.at[ml.ds(0, 64)], b_s)
  ml.copy(x.at[ml.ds(64, 64)], c_s)
  o.at[ml.ds(0, 64)][...] = a_s.at[ml.ds(0, 64)][...] + b_s[...] + c_s[...]
  o.at[ml.ds(64, 64)][...] = b_s[...]


@mg.mgpu_kernel(out_shape=lambda x, *, n=64: S((4 * n, 256), jnp.float32))
def buffers_of_a_comprehension(x, o, *, n: ml.constexpr = 64):
  bufs = [ml.smem((n, 256), jnp.float32) for _ in range(5)]
  for i in range(4):
    ml.copy(x.at[ml.ds(i * n, n)], bufs[i])
  ml.copy(x.at[ml.ds(0, n)], bufs[4])
  for i in range(4):
    o.at[ml.ds(i * n, n)][...] = bufs[i][...] + bufs[4][...]


def test_mg402_points_at_the_allocation_past_the_limit_with_the_largest_noted():
  x = (np.arange(128 * 256, dtype=np.float32).reshape(128, 256) % 5)
  e = _refusal(three_buffers, x)
  assert (type(e), e.code) == (mg.SmemCapacityError, "MG402")
  assert (e.lineno, e.col_offset) == (_line(three_buffers, "c_s = ")[0], 8)     # c_s: past the limit
  assert e.message.startswith("the kernel's SMEM needs 263168 bytes (a_s 128 KiB, b_s 64 KiB, c_s 64 KiB, plus")
  line = lambda text: f"{__file__}:{_line(three_buffers, text)[0]}:8"
  assert e.notes[:2] == (f"{line('a_s = ')}: a_s, 128 KiB, allocated here", f"{line('b_s = ')}: b_s, 64 KiB,"
                         f" allocated here")
  assert e.hint.startswith("use smaller tiles: a_s of shape (64, 256) instead of (128, 256) (64 KiB,")
  got = three_buffers(x[:128], rows=64, interpret=True)           # the hinted tile fits
  np.testing.assert_array_equal(np.asarray(got)[:64], x[:64] * 2 + x[64:128])


def test_mg402_counts_the_buffers_one_line_allocates_and_cuts_them_all():
  x = np.ones((256, 256), np.float32)
  e = _refusal(buffers_of_a_comprehension, x)
  assert (e.lineno, e.col_offset) == _line(buffers_of_a_comprehension, "ml.smem((n, 256)")
  assert "(ml.smem((n, 256), jnp.float32) 64 KiB x5, plus barriers" in e.message
  assert e.hint.startswith("use smaller tiles: ml.smem((n, 256), jnp.float32) of shape (32, 256) instead of (64, 256)"
                           " (each buffer this line allocates)")
  got = buffers_of_a_comprehension(x, n=32, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), x[:128] + np.concatenate([x[:32]] * 4))


@mg.mgpu_kernel(out_shape=lambda x: S((64, 32), jnp.float32))
def twenty_shapes(x, o):        # twenty buffers of twenty shapes, all live at once
  bufs = [ml.smem((64, 32 * (j + 1)), jnp.float32) for j in range(20)]
  for j in ml.static_range(20):
    ml.copy(x.at[:, ml.ds(0, 32 * (j + 1))], bufs[j])
  acc = ml.zeros((64, 32), jnp.float32)
  for j in ml.static_range(20):
    acc += bufs[j][:, ml.ds(0, 32)]
  o[...] = acc


def test_mg402_of_many_buffers_lists_the_first_and_counts_the_rest():
  # (it was the tensor-core fuzzer's seed 1779, a float32 einsum of chunked products, which the tensor cores
  # compute since probe 62b)
  with pytest.raises(mg.SmemCapacityError) as info:
    twenty_shapes(np.ones((64, 640), np.float32), interpret=True)
  m = info.value.message
  assert ", and 12 more, 1425408 bytes together, plus barriers" in m and len(m) < 1100, m
  h = info.value.hint          # (probe 62b: the cut buffers listed to four, the rest counted; it listed all twenty)
  assert h.startswith("use smaller tiles: no one buffer is enough; the kernel's own cut to 1/8 (") and \
      h.endswith(", and 16 more) fit, 216064 bytes in all") and len(h) < 500, h


# ---------------------------------------------------------------------- 5. small split-K accumulators, a float16 one
def _split_k(n, masked):
  @mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], n), jnp.float32), grid=(2, 1, 2))
  def k(a, b, o):                    # a (16, 256), b (256, n): two programs a row block, each half of K
    i, s = ml.program_id(0), ml.program_id(2)
    a_s, b_s = ml.smem((8, 64), a.dtype), ml.smem((64, n), b.dtype)
    acc = ml.zeros((8, n), jnp.float32)
    for kk in ml.range(2, stages=2):
      ml.copy(a.at[ml.ds(i * 8, 8), ml.ds((s * 2 + kk) * 64, 64)], a_s)
      ml.copy(b.at[ml.ds((s * 2 + kk) * 64, 64), :], b_s)
      acc = ml.dot(a_s, b_s, acc)
    if masked:
      rows, cols = i * 8 + ml.arange(8), ml.arange(n)
      ml.atomic_add(o.at[ml.ds(i * 8, 8), :], acc, mask=(rows[:, None] < 13) & (cols[None, :] < n - 2))
    else:
      ml.atomic_add(o.at[ml.ds(i * 8, 8), :], acc)
  return k


_SPLIT_K = {(n, m): _split_k(n, m) for n in (8, 24) for m in (False, True)}


@pytest.mark.parametrize("n, masked", list(_SPLIT_K), ids=[f"n{n}{'-masked' if m else ''}" for n, m in _SPLIT_K])
def test_a_small_split_k_accumulator_is_added_atomically(n, masked):
  """(8, n) accumulators no register tensor holds: MG204 about a (192,) or (64,) vector the kernel never wrote."""
  rng = np.random.default_rng(n)
  a = rng.integers(-3, 4, (16, 256)).astype(np.float16)
  b = rng.integers(-3, 4, (256, n)).astype(np.float16)
  want = a.astype(np.float32) @ b.astype(np.float32)
  if masked:
    want[13:], want[:, n - 2:] = 0, 0
  np.testing.assert_array_equal(np.asarray(_SPLIT_K[n, masked](a, b, interpret=True)), want)
  if n == 24:
    export(_SPLIT_K[n, masked], a, b)


@mg.mgpu_kernel(out_shape=lambda a, b, bias: S((8, 24), jnp.float16))
def f16_accumulator_and_bias(a, b, bias, o):
  a_s, b_s = ml.smem((8, 64), a.dtype), ml.smem((24, 64), b.dtype)
  acc = ml.zeros((8, 24), jnp.float16)
  for k in ml.range(2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[:, ml.ds(k * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s.T, acc)
  o[...] = jax.nn.relu(acc.astype(jnp.float32) + bias[...][None, :]).astype(jnp.float16)


def test_a_float16_accumulator_of_8_by_24_meets_a_bias():
  """The padded trace's dot added a float32 product to the float16 accumulator (MG104 there; MG204 reported)."""
  rng = np.random.default_rng(5)
  a, b = (rng.integers(-3, 4, s).astype(np.float16) for s in ((8, 128), (24, 128)))
  bias = rng.integers(-3, 4, (24,)).astype(np.float32)
  want = np.maximum(a.astype(np.float32) @ b.astype(np.float32).T + bias, 0).astype(np.float16)
  np.testing.assert_array_equal(np.asarray(f16_accumulator_and_bias(a, b, bias, interpret=True)), want)
  export(f16_accumulator_and_bias, a, b, bias)


@pytest.mark.parametrize("seed", [2053, 2090, 1339, 1733, 914])
def test_the_fuzzers_small_accumulator_seeds_compute(seed):
  """914: a float32 (8, 24) B of a masked pointer grid makes the (256, 24) product padded, stored into an SMEM
  buffer of its own shape (`c_s[...] = y`, then a TMA reduction): its own part is one piece registers hold."""
  import dot_fuzz
  assert dot_fuzz.run(dot_fuzz.Gen(seed), build=seed in (2053, 914)) == ("ok", "")


@pytest.mark.gpu
def test_small_split_k_accumulators_gpu():
  rng = np.random.default_rng(6)
  a = rng.integers(-3, 4, (16, 256)).astype(np.float16)
  for (n, masked), kernel in _SPLIT_K.items():
    b = rng.integers(-3, 4, (256, n)).astype(np.float16)
    want = a.astype(np.float32) @ b.astype(np.float32)
    if masked:
      want[13:], want[:, n - 2:] = 0, 0
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(a, b)), want)
  a, b = (rng.integers(-3, 4, s).astype(np.float16) for s in ((8, 128), (24, 128)))
  bias = rng.integers(-3, 4, (24,)).astype(np.float32)
  want = np.maximum(a.astype(np.float32) @ b.astype(np.float32).T + bias, 0).astype(np.float16)
  np.testing.assert_array_equal(np.asarray(jax.jit(f16_accumulator_and_bias)(a, b, bias)), want)
