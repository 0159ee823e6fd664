"""Probe 26 (control flow): loop bounds past int32, Python numbers carried by loops and ifs
(weakly typed, as in JAX), reversed/zip/enumerate of a runtime range, divmod of scalars, and the
hint for a ref chosen at run time."""
import jax
import jax.numpy as jnp
import numpy as np

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, BF16, I32, U32 = jnp.float32, jnp.bfloat16, jnp.int32, jnp.uint32
X128 = S((128,), F32)


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- 1. static loop bounds past int32
BIG = ("this loop's stop uses the Python int {}, which does not fit in int32: kernels compute in 32 bits"
       " (a larger constant would silently lose its high bits)")
COUNTS = ("a runtime loop counts in int32: keep its bounds below 2**31 (count further with two nested loops:"
          " for hi in range(a): for lo in range(b)), or unroll it with ml.static_range if it is short")


@mg.mgpu_kernel(out_shape=lambda x, *, stop: S((), I32))
def count_to(x, out, *, stop: ml.constexpr):
  cnt = 0
  for c in range(2**31 - 3, stop):
    cnt = cnt + 1
  out[...] = cnt


@mg.mgpu_kernel(out_shape=lambda x, *, b: S((), I32))
def count_b(x, out, *, b: ml.constexpr):
  cnt = 0
  for c in range(b):
    cnt = cnt + 1
  out[...] = cnt


@mg.mgpu_kernel(out_shape=lambda n: S((), I32))
def runtime_start(n, out):
  cnt = 0
  for c in range(n[...], 2**31 + 1):
    cnt = cnt + 1
  out[...] = cnt


@mg.mgpu_kernel(out_shape=lambda n: S((), I32))
def ml_range_past(n, out):
  cnt = 0
  for c in ml.range(2**31 - 1, 2**31 + 1):
    cnt = cnt + 1
  out[...] = cnt


@mg.mgpu_kernel(out_shape=lambda n: S((), I32))
def wrapping_step(n, out):
  cnt = 0
  for c in range(0, 2**31 - 1, 2**30):
    cnt = cnt + 1
  out[...] = cnt


def test_a_static_loop_bound_past_int32_is_reported_at_the_header():
  # interpret mode died with InternalError MG900 (OverflowError); the CUDA export wrapped the index
  expect(count_to, [X128], mg.KernelTypeError, "stop):", BIG.format(2**31 + 1), hint=COUNTS, stop=2**31 + 1)
  expect(count_b, [X128], mg.KernelTypeError, "b):", BIG.format(2**40), hint=COUNTS, b=2**40)
  expect(runtime_start, [S((), I32)], mg.KernelTypeError, "2**31 + 1", BIG.format(2**31 + 1), hint=COUNTS)
  expect(ml_range_past, [S((), I32)], mg.KernelTypeError, "2**31 + 1", BIG.format(2**31 + 1), hint=COUNTS)
  expect(wrapping_step, [S((), I32)], mg.KernelTypeError, "range(0, 2**31",
         "this loop steps its index from 1073741824 to 2147483648, which does not fit in int32: the loop counts"
         " in int32, so the index would wrap and the loop would not end", hint=COUNTS)
  # the hint followed: bounds below 2**31 count to the end
  x = jnp.ones((128,), F32)
  assert int(count_to(x, stop=2**31 - 1, interpret=True)) == 2
  assert int(count_b(x, b=5, interpret=True)) == 5
  _export(lambda a: count_to(a, stop=2**31 - 1), X128)


# ---------------------------------------------------------------- 2. a Python number carried is weakly typed
@mg.mgpu_kernel(out_shape=lambda x: S((), x.dtype))
def loop_total(x, out):
  t = 0.0
  for c in range(x.shape[0] // 128):
    t = t + ml.sum(x.at[ml.ds(c * 128, 128)][...])
  out[...] = t


@mg.mgpu_kernel(out_shape=lambda x: S((), x.dtype))
def if_total(x, out):
  t = 0.0
  if ml.program_id(0) == 0:
    t = ml.sum(x[...])
  out[...] = t


@mg.mgpu_kernel(out_shape=lambda x: S((), x.dtype))
def nested_total(x, out):
  t = 0.0
  i = 0
  while i < x.shape[0] // 256:
    t = t * 0.5
    for d in range(2):
      if d == 0:
        t = t + ml.sum(x.at[ml.ds(i * 256 + d * 128, 128)][...])
    i = i + 1
  out[...] = t


@mg.mgpu_kernel(out_shape=lambda x: S((), x.dtype))
def uint_total(x, out):
  s = 0
  for c in range(x.shape[0] // 128):
    s = s + ml.sum(x.at[ml.ds(c * 128, 128)][...])
  out[...] = s


@mg.mgpu_kernel(out_shape=lambda x: S((), x.dtype))
def strong_total(x, out):
  t = ml.full((), 0.0, F32)
  for c in range(x.shape[0] // 128):
    t = t + ml.sum(x.at[ml.ds(c * 128, 128)][...])
  out[...] = t


@mg.mgpu_kernel(out_shape=lambda x: S((), x.dtype))
def strong_if(x, out):
  t = ml.full((), 0.0, F32)
  if ml.program_id(0) == 0:
    t = ml.sum(x[...])
  out[...] = t


def test_a_python_number_carried_takes_the_dtype_the_body_gives_it():
  # t = 0.0 carried was fixed as float32: the bfloat16 sum added to it was MG104, and an if setting
  # it to a bfloat16 sum MG003 ("scalar<bfloat16> ... scalar<float32>"); JAX's loops and cond
  # promote a weakly typed carry to the body's dtype
  x = (jnp.arange(384) % 7).astype(BF16)
  for got, want in ((loop_total(x, interpret=True), x.astype(F32).sum()), (if_total(x, interpret=True), x.sum()),
                    (nested_total(x[:256], interpret=True), x[:128].astype(F32).sum())):
    assert got.dtype == BF16
    np.testing.assert_allclose(np.float32(got), np.float32(want), rtol=1e-2)
  for k in (loop_total, if_total, nested_total):
    _export(k, S((384,), BF16))
  u = jnp.arange(384, dtype=U32)
  got = uint_total(u, interpret=True)
  assert got.dtype == U32 and int(got) == int(u.sum())
  _export(uint_total, S((384,), U32))


def test_a_strongly_typed_carry_keeps_its_dtype():
  # (t + a bfloat16 sum is float32, as jnp's since probe 47b: t stays float32, and the store is the mistake)
  expect(strong_total, [S((384,), BF16)], mg.StoreDtypeError, "out[...] = t",
         "cannot store t (float32) into out (GMEM, bfloat16): no implicit conversion")
  # (a bfloat16 sum on one path of an if and a float32 on the other is float32 after it, as jnp.where's: probe
  # 60c; it was MG003 at the sum), so the store into the bfloat16 output is the mistake here too
  expect(strong_if, [S((384,), BF16)], mg.StoreDtypeError, "out[...] = t",
         "cannot store t (float32) into out (GMEM, bfloat16): no implicit conversion")


# ---------------------------------------------------------------- 3. reversed / zip / enumerate of a runtime range
@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), F32))
def horner(x, n, out):
  acc = ml.zeros((128,), F32)
  for c in reversed(range(n[...])):
    acc = acc * 2.0 + x.at[ml.ds(c * 128, 128)][...]
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), F32))
def horner_up(x, n, out):
  acc = ml.zeros((128,), F32)
  for k in range(n[...]):
    c = n[...] - 1 - k
    acc = acc * 2.0 + x.at[ml.ds(c * 128, 128)][...]
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), F32))
def horner_from(x, n, out):
  acc = ml.zeros((128,), F32)
  for c in reversed(range(1, n[...])):
    acc = acc * 2.0 + x.at[ml.ds(c * 128, 128)][...]
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), F32))
def zipped(x, n, out):
  acc = ml.zeros((128,), F32)
  for c, w in zip(range(n[...]), (1.0, 2.0, 3.0, 4.0)):
    acc = acc + w * x.at[ml.ds(c * 128, 128)][...]
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), F32))
def numbered(x, n, out):
  acc = ml.zeros((128,), F32)
  for i, c in enumerate(range(n[...])):
    acc = acc + x.at[ml.ds(c * 128, 128)][...]
  out[...] = acc


SPECS3 = [S((512,), F32), S((), I32)]
ONLY_UP = "{}() cannot take a runtime loop: {} has a run-time bound, and a runtime loop only counts upwards over its own index"


def test_reversed_or_zipped_runtime_range_says_so():
  # said "range() outside a for statement is not supported in a kernel [MG001]", in the for header
  # reversed(range(a, n)) of a run-time n counts down, range(n - 1, a - 1, -1) (probe 33c; it was MG001)
  x, n = jnp.arange(512, dtype=F32), jnp.int32(4)
  np.testing.assert_array_equal(horner(x, n, interpret=True), sum(x[c * 128:(c + 1) * 128] * 2.0 ** c for c in range(4)))
  np.testing.assert_array_equal(horner_from(x, n, interpret=True),
                                sum(x[c * 128:(c + 1) * 128] * 2.0 ** (c - 1) for c in range(1, 4)))
  expect(zipped, SPECS3, mg.UnsupportedSyntaxError, "zip(", ONLY_UP.format("zip", "range(n[...])"),
         hint="loop over range(n[...]) and compute the other item from the loop's index (for i in range(n[...]):"
              " w = ... i ...), or read it from a ref at that index (w = w_ref[i]); a static tuple zips with a"
              " static range: zip(range(4), ws)")
  # enumerate(range(n)) of a run-time n is the loop over the range, its position computed (probe 42v; it was MG001)
  np.testing.assert_array_equal(numbered(x, n, interpret=True), sum(x[c * 128:(c + 1) * 128] for c in range(4)))
  # the reversed hint followed
  x = jnp.arange(512, dtype=F32)
  n = jnp.int32(4)
  want = sum(x[c * 128:(c + 1) * 128] * 2.0 ** c for c in range(4))
  np.testing.assert_array_equal(horner_up(x, n, interpret=True), want)
  _export(horner_up, *SPECS3)


# ---------------------------------------------------------------- 4. divmod of run-time scalars
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(5,))
def walk(x, out):
  for t in range(ml.program_id(0), x.shape[0] * x.shape[1], ml.num_programs(0)):
    i, j = divmod(t, x.shape[1])
    out.at[i, j][...] = x.at[i, j][...] * 2.0


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), I32))
def signed_divmod(x, n, out):
  q, r = divmod(n[...], -3)
  out[...] = ml.full((128,), q * 10 + r, I32)


def test_divmod_of_runtime_scalars_is_floor_division_and_modulo():
  # was MG003 "divmod cannot take a scalar inside a kernel"
  x = rand.normal(rand.key(0), (4, 6, 128), F32)
  np.testing.assert_array_equal(walk(x, interpret=True), x * 2.0)
  _export(walk, S((4, 6, 128), F32))
  q, r = divmod(7, -3)
  np.testing.assert_array_equal(signed_divmod(jnp.zeros((128,), F32), jnp.int32(7), interpret=True),
                                jnp.full((128,), q * 10 + r, I32))
  _export(signed_divmod, X128, S((), I32))


# ---------------------------------------------------------------- 5. a ref chosen at run time: the hint names the windows
@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), F32))
def pick(x, n, out):
  if n[...] > 0:
    src = x.at[ml.ds(0, 128)]
  else:
    src = x.at[ml.ds(128, 128)]
  out[...] = src[...]


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), F32))
def pick_read(x, n, out):
  if n[...] > 0:
    v = x.at[ml.ds(0, 128)][...]
  else:
    v = x.at[ml.ds(128, 128)][...]
  out[...] = v


def test_the_hint_for_a_ref_chosen_at_run_time_names_both_windows():
  # named the merged name: "(v = src[...] in one, v = src[...] in the other)"
  expect(pick, [S((512,), F32), S((), I32)], mg.KernelTypeError, "if n[...]",
         f"src is a different ref on each path through the if at line {pick.fn.__code__.co_firstlineno + 2}; a ref"
         " cannot be chosen at run time",
         hint="read or write inside each branch instead (v = x.at[ml.ds(0, 128)][...] in one, v ="
              " x.at[ml.ds(128, 128)][...] in the other), index one ref with a run-time index"
              " (ref.at[ml.ds(i * n, n)]), or choose with an ml.constexpr (an if on it is static)")
  x = jnp.arange(512, dtype=F32)
  np.testing.assert_array_equal(pick_read(x, jnp.int32(1), interpret=True), x[:128])
  np.testing.assert_array_equal(pick_read(x, jnp.int32(0), interpret=True), x[128:256])
  _export(pick_read, S((512,), F32), S((), I32))
