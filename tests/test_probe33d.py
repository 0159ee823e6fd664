"""Probe 33d (quantisation and bit manipulation): FP8/int8/int4 quantisers, shared exponents,
hash RNGs and unsigned arithmetic written as vLLM/SGLang/TransformerEngine users write them."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, BF16 = jnp.float32, jnp.bfloat16


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- ml.where of Python numbers is weakly typed
@mg.mgpu_kernel(out_shape=lambda x: x)
def scale_by_sign(x, out):
  v = x[...]
  out[...] = v * ml.where(v > 0, 1.0, 0.5)


@mg.mgpu_kernel(out_shape=lambda x: x)
def step_uint(x, out):
  v = x[...]
  out[...] = v + ml.where(v < 5, 1, 2)


@mg.mgpu_kernel(out_shape=lambda x: x)
def times_sign(x, out):
  v = x[...]
  out[...] = v * ml.where(v > 0, 1, -1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def nested_sign(x, out):
  v = x[...]
  out[...] = v * ml.where(v > 0, 1.0, ml.where(v < -1, -1.0, 0.0))


@mg.mgpu_kernel(out_shape=lambda x: x)
def weak_carry(x, out):
  v = x[...]
  m = ml.where(v > 0, 1.0, 0.0)
  for _ in range(3):
    m = m + v
  out[...] = m


@mg.mgpu_kernel(out_shape=lambda x: x)
def typed_select(x, out):
  v = x[...]
  out[...] = v * ml.where(v > 0, np.float32(1.0), np.float32(0.5))


def _bf16(n, seed=0):
  return rand.normal(rand.key(seed), (n,), BF16)


def test_a_select_between_python_numbers_takes_the_other_operands_dtype_as_jnp():
  """jnp.where(m, 1.0, 0.5) is weakly typed: x_bf16 * it is bfloat16 (and uint32 + where(m, 1, 2)
  is uint32). It was MG104 (float32 and bfloat16 never converted implicitly)."""
  x = _bf16(1024)
  np.testing.assert_array_equal(np.asarray(scale_by_sign(x, interpret=True)), np.asarray(x * jnp.where(x > 0, 1.0, 0.5)))
  np.testing.assert_array_equal(np.asarray(nested_sign(x, interpret=True)),
                                np.asarray(x * jnp.where(x > 0, 1.0, jnp.where(x < -1, -1.0, 0.0))))
  u = jnp.asarray(np.random.default_rng(0).integers(0, 2 ** 32, 1024, dtype=np.uint64).astype(np.uint32))
  got = step_uint(u, interpret=True)
  assert got.dtype == jnp.uint32
  np.testing.assert_array_equal(np.asarray(got), np.asarray(u + jnp.where(u < 5, 1, 2)))
  for v in (x, x.astype(F32)):      # a select of Python ints meeting floats: the floats' dtype, as jnp's
    got = times_sign(v, interpret=True)
    assert got.dtype == v.dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(v * jnp.where(v > 0, 1, -1)))
  for k, a in ((scale_by_sign, x), (step_uint, u), (nested_sign, x), (times_sign, x)):
    assert "mosaic_gpu" in str(_export(k, S(a.shape, a.dtype)))


def test_a_weak_select_carried_by_a_loop_takes_the_bodys_dtype():
  """As JAX's loops promote a weakly typed carry: m starts float32 (weak), the body makes it bfloat16."""
  x = _bf16(1024, 1)
  ref = jnp.where(x > 0, 1.0, 0.0).astype(BF16)
  for _ in range(3):
    ref = ref + x
  np.testing.assert_array_equal(np.asarray(weak_carry(x, interpret=True)), np.asarray(ref))


def test_a_select_between_numpy_scalars_keeps_their_dtype():
  # (bfloat16 times float32 is float32, as jnp's since probe 47b: the store into bfloat16 is the error)
  expect(typed_select, [S((1024,), BF16)], mg.StoreDtypeError, "out[...] = v * ml.where(",
         "cannot store v * ml.where(v > 0, np.float32(1.0), np.float32(0.5)) (float32) into out (GMEM, bfloat16):"
         " no implicit conversion")


@pytest.mark.gpu
def test_gpu_weak_selects():
  x = _bf16(1024, 2)
  np.testing.assert_array_equal(np.asarray(scale_by_sign(x)), np.asarray(scale_by_sign(x, interpret=True)))
  np.testing.assert_array_equal(np.asarray(weak_carry(x)), np.asarray(weak_carry(x, interpret=True)))
  u = jnp.arange(1024, dtype=jnp.uint32) * jnp.uint32(4194301)
  np.testing.assert_array_equal(np.asarray(step_uint(u)), np.asarray(step_uint(u, interpret=True)))


# ---------------------------------------------------------------- an atomic max of a tensor into one element
@mg.mgpu_kernel(out_shape=lambda x: S((4,), jnp.uint32), grid=lambda x: (x.shape[0] // 128,))
def block_max(x, o):
  i = ml.program_id(0)
  ml.atomic_max(o.at[i % 4], x.at[ml.ds(i * 128, 128)][...])


def test_a_tensor_atomic_into_one_element_is_reduced_with_the_atomics_own_operation():
  """The hint said ml.atomic_max(out.at[i], ml.sum(x)): followed, it takes the max of the sums."""
  expect(block_max, [S((1024,), jnp.uint32)], mg.ShapeMismatchError, "ml.atomic_max(",
         "ml.atomic_max of a tensor of shape (128,) into a single element",
         hint="reduce it first: ml.atomic_max(o.at[i % 4], ml.max(x.at[ml.ds(i * 128, 128)][...]))")


# ---------------------------------------------------------------- jnp.copysign of a number
@mg.mgpu_kernel(out_shape=lambda x: x)
def unit_sign(x, out):
  out[...] = jnp.copysign(1.0, x[...])


@mg.mgpu_kernel(out_shape=lambda x: x)
def unit_sign_followed(x, out):
  out[...] = ml.where(ml.bitcast(x[...], jnp.int32) < 0, -1.0, 1.0)


def test_copysign_of_a_number_computes_as_jnp():
  """The hint wrote -ml.abs(1.0), itself an error (ml.abs of a Python number); then the call was MG003 with the
  hint's form; since probe 53h the number is a tensor of x's dtype and the call computes, as the form does."""
  x = jnp.asarray([-0.0, 0.0, -2.0, 3.0, np.nan, -np.inf] + [1.0] * 122, F32)
  np.testing.assert_array_equal(np.asarray(unit_sign(x, interpret=True)), np.asarray(jnp.copysign(1.0, x)))
  np.testing.assert_array_equal(np.asarray(unit_sign_followed(x, interpret=True)), np.asarray(jnp.copysign(1.0, x)))


# ---------------------------------------------------------------- Triton's dtype names
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float8_e4m3fn))
def to_fp8(x, out):
  out[...] = x[...].to(ml.float8e4nv)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float8_e4m3fn))
def cast_e4b15(x, out):
  out[...] = x[...].astype(ml.float8e4b15)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float8_e5m2))
def cast_e5(x, out):
  out[...] = x[...].astype(ml.float8e5)


def test_tritons_dtype_names_are_written_as_jnps():
  """.to(ml.float8e4nv)'s hint wrote .astype(ml.float8e4nv), itself MG002; ml.float8e4b15 (an e4m3 with
  bias 15) was offered ml.float8_e5m2 as a near spelling."""
  # .to(ml.float8e4nv) and ml.float8e5 were MG003 and MG002 until probe 47g: Triton's names of e4m3fn and e5m2
  x = jnp.linspace(-440.0, 440.0, 1024, dtype=F32)
  for kernel, dt in ((to_fp8, jnp.float8_e4m3fn), (cast_e5, jnp.float8_e5m2)):
    np.testing.assert_array_equal(np.asarray(kernel(x, interpret=True)).view(np.uint8),
                                  np.asarray(x.astype(dt)).view(np.uint8))
  expect(cast_e4b15, [S((1024,), F32)], mg.UnknownNameError, "ml.float8e4b15", "ml has no attribute 'float8e4b15'",
         hint="Triton's float8e4b15 is not a Hopper format here: the 8-bit floats are jnp.float8_e4m3fn (Triton's"
              " float8e4nv) and jnp.float8_e5m2 (float8e5)")


# ---------------------------------------------------------------- a constant lookup table indexed by a tensor
NF4 = (-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
       -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
       0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0)
NF4_NP = np.asarray(NF4, np.float32)
NF4_JNP = jnp.asarray(NF4, F32)


@mg.mgpu_kernel(out_shape=lambda p: S(p.shape, F32))
def nf4_indexed(p, out):
  out[...] = NF4_NP[p[...].astype(jnp.int32) & 0xF]


@mg.mgpu_kernel(out_shape=lambda p: S(p.shape, F32))
def nf4_list_indexed(p, out):
  b = p[...].astype(jnp.int32) & 0xF
  out[...] = NF4[b]


@mg.mgpu_kernel(out_shape=lambda p: S(p.shape, F32))
def nf4_selected(p, out):
  idx = p[...].astype(jnp.int32) & 0xF
  r = ml.zeros(idx.shape, jnp.float32)
  for k in ml.static_range(16):
    r = ml.where(idx == k, NF4_JNP[k], r)
  out[...] = r


@mg.mgpu_kernel(out_shape=lambda p, t: S(p.shape, F32))
def nf4_gathered(p, t, out):
  b = p[...].astype(jnp.int32) & 0xF
  out[...] = t[b]


def test_a_constant_table_indexed_by_a_tensor_says_how_to_look_it_up():
  """NF4's levels indexed by nibbles: the hint said only 'index Python tuples with static ints'."""
  # (since probe 53b a module's NumPy table of at most 64 numbers is the register table jnp.asarray makes of it)
  expect(nf4_list_indexed, [S((1024,), jnp.uint8)], mg.KernelTypeError, "NF4[b]",
         "cannot index NF4 (a Python tuple) with a runtime value",
         hint="a table indexed by a tensor: select its entries, r = ml.zeros(b.shape, jnp.float32), then for k in"
              " ml.static_range(16): r = ml.where(b == k, NF4[k], r) (one select per entry); or pass the table to"
              " the kernel as an input array, t, and gather from it: t[b]")
  p = jnp.asarray(np.random.default_rng(3).integers(0, 256, 1024).astype(np.uint8))
  want = NF4_NP[np.asarray(p).astype(np.int32) & 15]
  np.testing.assert_array_equal(np.asarray(nf4_selected(p, interpret=True)), want)
  np.testing.assert_array_equal(np.asarray(nf4_indexed(p, interpret=True)), want)
  np.testing.assert_array_equal(np.asarray(nf4_gathered(p, NF4_JNP, interpret=True)), want)


# ---------------------------------------------------------------- 8-bit arithmetic of two register values
@mg.mgpu_kernel(out_shape=lambda a, b: a)
def add_bytes(a, b, out):
  out[...] = a[...] + b[...]


@mg.mgpu_kernel(out_shape=lambda a, b: a)
def add_bytes_followed(a, b, out):
  out[...] = (a[...].astype(jnp.int32) + b[...].astype(jnp.int32)).astype(jnp.uint8)


def test_8bit_arithmetic_of_two_tensors_upcasts_both():
  """The hint upcast the first operand only: followed, a[...].astype(jnp.int32) + b[...] was MG104."""
  a = jnp.arange(1024, dtype=jnp.int32).astype(jnp.uint8)
  b = (jnp.arange(1024, dtype=jnp.int32) * 7).astype(jnp.uint8)
  # (probe 38g: 8-bit + is jnp's, wrapping, computed in 32 bits)
  np.testing.assert_array_equal(np.asarray(add_bytes(a, b, interpret=True)), np.asarray(a + b))
  np.testing.assert_array_equal(np.asarray(add_bytes_followed(a, b, interpret=True)), np.asarray(a + b))


# ---------------------------------------------------------------- Triton's conversion keywords
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, BF16))
def truncate_bf16(x, out):
  out[...] = ml.cast(x[...], jnp.bfloat16, fp_downcast_rounding="rtz")


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, BF16))
def nearest_bf16(x, out):
  out[...] = x[...].astype(jnp.bfloat16, fp_downcast_rounding="rtne", copy=False)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.uint32))
def cast_bits(x, out):
  out[...] = ml.cast(x[...], jnp.uint32, bitcast=True)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float16))
def truncate_f16(x, out):
  out[...] = x[...].astype(jnp.float16, fp_downcast_rounding="rtz")


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, BF16))
def to_truncated(x, out):
  out[...] = x[...].to(jnp.bfloat16, fp_downcast_rounding="rtz")


def _awkward_f32(n=1024, seed=4):
  rng = np.random.default_rng(seed)
  f = (rng.standard_normal(n) * np.exp2(rng.integers(-130, 128, n))).astype(np.float32)
  f[:8] = [np.nan, np.inf, -np.inf, 3.4028235e38, -3.4028235e38, 1e-45, -0.0, 1.00390625]
  return jnp.asarray(f)


def _truncated(x):
  top = jax.lax.bitcast_convert_type(jax.lax.bitcast_convert_type(x, jnp.uint32) & jnp.uint32(0xFFFF0000), F32)
  return jnp.where(jnp.isnan(x), x.astype(BF16), top.astype(BF16))


def test_cast_takes_tritons_rounding_and_bitcast_keywords():
  """ml.cast(x, dtype, fp_downcast_rounding=..., bitcast=...) (tl.cast's signature) and .astype(..., copy=False)
  (jnp's) were MG003 'unexpected keyword argument' with the hint ml.cast(x, dtype)."""
  x = _awkward_f32()
  bits = lambda a: np.asarray(a).view(np.uint16)
  np.testing.assert_array_equal(bits(truncate_bf16(x, interpret=True)), bits(_truncated(x)))
  np.testing.assert_array_equal(bits(nearest_bf16(x, interpret=True)), bits(x.astype(BF16)))
  np.testing.assert_array_equal(np.asarray(cast_bits(x, interpret=True)),
                                np.asarray(jax.lax.bitcast_convert_type(x, jnp.uint32)))
  assert "mosaic_gpu" in str(_export(truncate_bf16, S((1024,), F32)))
  # float32 -> float16 toward zero was MG106 here; since probe 39c it computes (test_probe39c checks its values)
  got = np.asarray(truncate_f16(x, interpret=True)).astype(np.float32)
  f = np.asarray(x)
  ok = np.isnan(f) | (np.abs(got) <= np.abs(f)) & (np.sign(got) * np.sign(f) >= 0)
  assert ok.all()


def test_to_keeps_the_rounding_mode():
  """.to(dtype, fp_downcast_rounding='rtz')'s hint dropped the keyword: followed, it rounded to nearest. Since
  probe 47g .to is .astype, with Triton's keywords."""
  x = _awkward_f32()
  bits = lambda a: np.asarray(a).view(np.uint16)
  np.testing.assert_array_equal(bits(to_truncated(x, interpret=True)), bits(_truncated(x)))


@pytest.mark.gpu
def test_gpu_truncating_cast():
  x = _awkward_f32(4096, 5)
  np.testing.assert_array_equal(np.asarray(truncate_bf16(x)).view(np.uint16), np.asarray(_truncated(x)).view(np.uint16))


# ---------------------------------------------------------------- int4 and float8_e8m0fnu: no kernel dtype
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 32,), jnp.float8_e8m0fnu))
def mx_scales(x, out):
  out[...] = ml.max(ml.abs(x[...].reshape(-1, 32)), axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 32,), jnp.uint8))
def mx_exponents(x, out):
  amax = ml.max(ml.abs(x[...].reshape(-1, 32)), axis=1)
  out[...] = ((ml.bitcast(amax, jnp.uint32) >> 23) & 0xFF).astype(jnp.uint8)


@mg.mgpu_kernel(out_shape=lambda q: S(q.shape, jnp.int8))
def widen_int4(q, out):
  out[...] = q[...].astype(jnp.int8)


@mg.mgpu_kernel(out_shape=lambda q: q)
def narrow_to_int4(q, out):
  out[...] = q[...].astype(jnp.int4).astype(jnp.int32)


@mg.mgpu_kernel(out_shape=lambda q: S((q.shape[0] // 2,), jnp.uint8))
def pack_int4(q, out):
  v = q[...].reshape(-1, 2)
  out[...] = ((v[:, 1] << 4) | (v[:, 0] & 0xF)).astype(jnp.uint8)


def test_narrow_formats_say_how_to_pack_them():
  """An int4 or float8_e8m0fnu output, input or cast said only 'supported dtypes: ...'."""
  expect(mx_scales, [S((4096,), F32)], mg.SignatureError, "out_shape=lambda x",
         "out_shape gives an output mgpu_dsl cannot make: unsupported dtype float8_e8m0fnu",
         hint="float8_e8m0fnu is a power of two's biased exponent: make the output uint8, e = ((ml.bitcast(s,"
              " jnp.uint32) >> 23) & 0xFF).astype(jnp.uint8) of a float32 power of two s, and view it outside the"
              " kernel: jax.lax.bitcast_convert_type(y, jnp.float8_e8m0fnu); supported dtypes: float32, float16,"
              " bfloat16, float8_e4m3fn, float8_e5m2, int64, int32, int16, int8, uint32, uint16, uint8, bool")
  with pytest.raises(mg.SignatureError) as info:
    widen_int4.check(S((256,), jnp.int4))
  assert info.value.hint.startswith("int4 packs two values a byte: pass jax.lax.bitcast_convert_type(q.reshape("
                                    "*q.shape[:-1], -1, 2), jnp.uint8) for it")
  expect(narrow_to_int4, [S((256,), jnp.int32)], mg.UnsupportedDtypeError, "q[...].astype(jnp.int4)",
         "the conversion (.astype / ml.cast): int4 is not a kernel dtype",
         hint="int4 is not a kernel dtype: keep the values in int32 and pack two a byte into a uint8 output,"
              " ((hi << 4) | (lo & 0xF)).astype(jnp.uint8)")
  # the hints followed
  x = rand.normal(rand.key(5), (4096,), F32) * 100
  e = jax.lax.bitcast_convert_type(mx_exponents(x, interpret=True), jnp.float8_e8m0fnu)
  amax = jnp.abs(x.reshape(-1, 32)).max(1)
  np.testing.assert_array_equal(np.asarray(e.astype(F32)), np.asarray(2.0 ** jnp.floor(jnp.log2(amax))))
  q = jnp.asarray(np.random.default_rng(6).integers(-8, 8, 256), jnp.int32)
  packed = pack_int4(q, interpret=True)
  np.testing.assert_array_equal(np.asarray(jax.lax.bitcast_convert_type(packed, jnp.int4).reshape(256)),
                                np.asarray(q.astype(jnp.int4)))


# ---------------------------------------------------------------- ml.full and ml.zeros without a dtype
@mg.mgpu_kernel(out_shape=lambda x: x)
def doubled_fill(x, out):
  out[...] = x[...] * ml.full(x.shape, 2.0)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, F32))
def zero_start(x, out):
  acc = ml.zeros(x.shape)
  for _ in range(2):
    acc = acc + x[...].astype(F32)
  out[...] = acc + ml.full(x.shape, 3)


def test_fills_without_a_dtype_are_jnps():
  """ml.full(shape, 2.0) and ml.zeros(shape) were MG003 (missing dtype): jnp.full's fill is weakly typed,
  jnp.zeros' default float32."""
  x = _bf16(1024, 7)
  got = doubled_fill(x, interpret=True)
  assert got.dtype == BF16
  np.testing.assert_array_equal(np.asarray(got), np.asarray(x * jnp.full(x.shape, 2.0)))
  np.testing.assert_array_equal(np.asarray(zero_start(x, interpret=True)),
                                np.asarray(x.astype(F32) + x.astype(F32) + 3))
  for k in (doubled_fill, zero_start):
    assert "mosaic_gpu" in str(_export(k, S((1024,), BF16)))


# ---------------------------------------------------------------- a weakly typed value stored
@mg.mgpu_kernel(out_shape=lambda x: (x, S(x.shape, jnp.uint8)))
def masks_stored(x, out, flags):
  buf = ml.smem(x.shape, x.dtype)
  buf[...] = ml.full(x.shape, 0.5)
  out[...] = ml.where(x[...] > 0, 1.0, 0.0) + buf[...]
  flags.store(ml.where(x[...] > 0, 255, 0), mask=ml.arange(1024) < 1024)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int32))
def float_select_into_ints(x, out):
  out[...] = ml.where(x[...] > 0, 1.5, -2.0)


def test_a_weak_select_or_fill_stores_into_a_ref_of_its_kind():
  """As jnp's .at[...].set: ml.where(m, 1.0, 0.0) stored into bfloat16 was MG102 (float32 into bfloat16)."""
  x = _bf16(1024, 8)
  got, flags = masks_stored(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(jnp.where(x > 0, 1.0, 0.0).astype(BF16) + BF16(0.5)))
  np.testing.assert_array_equal(np.asarray(flags), np.asarray(jnp.where(x > 0, 255, 0).astype(jnp.uint8)))
  assert "mosaic_gpu" in str(_export(masks_stored, S((1024,), BF16)))
  expect(float_select_into_ints, [S((1024,), BF16)], mg.StoreDtypeError, "out[...] =",
         "cannot store ml.where(x[...] > 0, 1.5, -2.0) (float32) into out (GMEM, int32): no implicit conversion")


# ---------------------------------------------------------------- bitwise operators on floats
@mg.mgpu_kernel(out_shape=lambda x: x)
def abs_by_mask(x, out):
  out[...] = x[...] & 0x7FFFFFFF


@mg.mgpu_kernel(out_shape=lambda x: x)
def abs_by_mask_followed(x, out):
  out[...] = ml.bitcast(ml.bitcast(x[...], jnp.uint32) & 0x7FFFFFFF, jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x: x)
def exponent_of_half(x, out):
  out[...] = x[...] >> 10


def test_bitwise_operators_on_floats_offer_the_bits():
  """The hint converted the values (x.astype(jnp.int32) & 0x7FFFFFFF truncates): a float's & or >> is
  bit manipulation, ml.bitcast first."""
  expect(abs_by_mask, [S((1024,), F32)], mg.UnsupportedDtypeError, "x[...] & 0x7FFFFFFF",
         "& needs integer operands, got float32",
         hint="on the bits: ml.bitcast(x[...], jnp.uint32) (and ml.bitcast(..., jnp.float32) back to float32); on the"
              " values: x[...].astype(jnp.int32)")
  expect(exponent_of_half, [S((1024,), jnp.float16)], mg.UnsupportedDtypeError, "x[...] >> 10",
         ">> needs integer operands, got float16",
         hint="on the bits: ml.bitcast(x[...], jnp.uint16) (and ml.bitcast(..., jnp.float16) back to float16); on the"
              " values: x[...].astype(jnp.int32)")
  x = _awkward_f32(1024, 9)
  np.testing.assert_array_equal(np.asarray(abs_by_mask_followed(x, interpret=True)).view(np.uint32),
                                np.asarray(jnp.abs(x)).view(np.uint32))


@mg.mgpu_kernel(out_shape=lambda s: S((2,), BF16))
def scalar_selects_stored(s, out):
  out[0] = ml.where(s[0] > 0, 2.0, 0.5)
  out[1] = ml.where(s[0] > 0, 1, 3)


def test_a_weak_scalar_select_stores_into_an_element_of_its_kind():
  for v, want in ((1.0, [2.0, 1.0]), (-1.0, [0.5, 3.0])):
    got = scalar_selects_stored(jnp.asarray([v], F32), interpret=True)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(jnp.asarray(want, BF16)))
  assert "mosaic_gpu" in str(_export(scalar_selects_stored, S((1,), F32)))


@mg.mgpu_kernel(out_shape=lambda x: x)
def damped(x, out):
  v = x[...]
  out[...] = v * ml.exp(-ml.where(v > 0, 1.0, 0.0))


def test_math_of_a_weak_select_stays_weak():
  """jnp.exp of a weakly typed value is weakly typed: x_bf16 * ml.exp(-ml.where(m, 1.0, 0.0)) is bfloat16."""
  x = _bf16(1024, 10)
  got = damped(x, interpret=True)
  assert got.dtype == BF16
  np.testing.assert_array_equal(np.asarray(got), np.asarray(x * jnp.exp(-jnp.where(x > 0, 1.0, 0.0))))
