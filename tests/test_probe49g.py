"""Probe 49g: Triton's random numbers as ported kernels write them. `tl.philox` with four counter words (FlagGems'
dropout), `tl.uint_to_uniform_float` and `tl.pair_uniform_to_normal` were MG002 (the first with a hint whose numbers
were not tl.rand's), `n_rounds=` an unexpected keyword, and int64 offsets (`pid.to(tl.int64) * BLOCK + ...`), 8- and
16-bit offsets, scalar offsets (`tl.rand(seed, pid)`), a seed per element and a seed loaded as a (1,) tensor were
rejected. Each now draws Triton's numbers: Philox4x32 checked against Random123's known answers and a NumPy
reference, interpret mode bit for bit with the GPU (the GPU test)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend.ops.random import philox_reference
from locate import expect

S = jax.ShapeDtypeStruct
F32, F16, I32, U32 = jnp.float32, jnp.float16, jnp.int32, jnp.uint32
M32 = 0xFFFFFFFF


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return str(jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module())


def _uniform(words):
  """Triton's uint_to_uniform_float of uint32 words (numpy)."""
  i = np.asarray(words, np.uint64).astype(np.uint32).view(np.int32)
  return np.where(i < 0, ~i, i).astype(np.float32) * np.float32(4.6566127342e-10)


def _philox(k0, k1, c0, c1=0, c2=0, c3=0, rounds=10):
  """Philox4x32 of numpy arrays through the Python-int reference (elementwise)."""
  f = np.vectorize(lambda *a: philox_reference(*a, rounds=rounds), otypes=[np.uint64] * 4)
  return [w.astype(np.uint32) for w in f(k0, k1, c0, c1, c2, c3)]


# ---------------------------------------------------------------- tl.philox: Random123's known answers
# (philox4x32_10 in Random123's kat_vectors: counter, key -> the four words)
KAT = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
       ((M32, M32, M32, M32), (M32, M32), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
       ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]


@mg.mgpu_kernel(out_shape=lambda c, *, seed: S((4, c.shape[1]), U32))
def philox_words(c, out, *, seed: ml.constexpr):
  c0 = c.at[0, :][...]
  w = ml.philox(seed, c0, c.at[1, :][...], c.at[2, :][...], c.at[3, :][...])
  for k in ml.static_range(4):
    out[k, :] = w[k]


@mg.mgpu_kernel(out_shape=lambda x, c1: (S((128,), U32),) * 4)
def philox_mixed(x, c1: ml.scalar, a, b, d, e, *, R: ml.constexpr = 10):
  i = ml.arange(0, 128)
  a[...], b[...], d[...], e[...] = ml.philox(-3, i, c1, 0xABCDEF01, i * 7, n_rounds=R)


@mg.mgpu_kernel(out_shape=lambda x, s: (S((4,), U32), S((64,), U32)), grid=(2,))
def philox_of_scalars(x, s: ml.scalar, words, per_seed):
  pid = ml.program_id(0)
  w = ml.philox(s, 0x243F6A88, 0x85A308D3, 0x13198A2E, pid + 0x03707343)     # scalar words: scalar results
  ml.store(words.at[pid * 2], w[0])
  ml.store(words.at[pid * 2 + 1], w[3])
  seeds = x.at[ml.ds(pid * 32, 32)][...]
  ml.store(per_seed.at[ml.ds(pid * 32, 32)], ml.randint(seeds, pid))       # a seed per element, one offset


def test_philox_gives_random123s_known_answers():
  for ctr, (k0, k1), want in KAT:
    c = jnp.asarray(np.tile(np.asarray(ctr, np.uint32)[:, None], (1, 128)))
    got = np.asarray(philox_words(c, seed=k0 | k1 << 32, interpret=True))
    np.testing.assert_array_equal(got, np.tile(np.asarray(want, np.uint32)[:, None], (1, 128)))
    np.testing.assert_array_equal(got[:, 0], np.asarray(_philox(k0, k1, *ctr)))     # and the NumPy reference
  assert "mosaic_gpu" in _export(philox_words, S((4, 128), U32), seed=0x299F31D0A4093822)
  seeds = np.arange(64, dtype=np.uint32) * 977
  words, per_seed = philox_of_scalars(jnp.asarray(seeds), jnp.uint32(0xA4093822), interpret=True)
  ctr = (0x243F6A88, 0x85A308D3, 0x13198A2E)
  w0, w1 = (philox_reference(0xA4093822, 0, *ctr, c3) for c3 in (0x03707343, 0x03707344))
  np.testing.assert_array_equal(np.asarray(words), [w0[0], w0[3], w1[0], w1[3]])
  np.testing.assert_array_equal(np.asarray(per_seed), _philox(seeds, 0, np.repeat(np.arange(2), 32))[0])
  assert "mosaic_gpu" in _export(philox_of_scalars, S((64,), U32), S((), U32))


def test_philox_counters_of_every_kind_and_its_rounds():
  """A tensor, a run-time scalar, a Python int and a product as the four words; a negative seed sign-extends."""
  i = np.arange(128)
  for rounds in (10, 7):
    got = philox_mixed(jnp.zeros((128,), F32), 12345, R=rounds, interpret=True)
    want = _philox(M32 - 2, M32, i, 12345, 0xABCDEF01, i * 7, rounds=rounds)
    for g, w in zip(got, want):
      np.testing.assert_array_equal(np.asarray(g), w)
  assert "mosaic_gpu" in _export(philox_mixed, S((128,), F32), S((), I32), R=7)


# ---------------------------------------------------------------- FlagGems' dropout, as it is written
@mg.mgpu_kernel(out_shape=lambda x, seed, off, *, p: x, grid=lambda x, seed, off, **k: (ml.cdiv(x.shape[0], 512),))
def flaggems_dropout(X, philox_seed: ml.scalar, philox_offset: ml.scalar, Y, *, p: ml.constexpr):
  UNROLL: ml.constexpr = 4
  BLOCK: ml.constexpr = 128
  N = X.shape[0]
  philox_offset = philox_offset.to(jnp.int64)
  c0 = (philox_offset & 0xFFFFFFFF).to(jnp.uint32)
  c1 = ((philox_offset >> 32) & 0xFFFFFFFF).to(jnp.uint32)
  i4 = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
  c0 += i4.to(jnp.uint32)
  _O = c0 * 0
  r0, r1, r2, r3 = ml.philox(philox_seed, c0, c1, _O, _O)
  p_scale = 1.0 / (1.0 - p)
  off_0 = ml.program_id(0) * BLOCK * UNROLL + ml.arange(0, BLOCK)
  for k, r in ((0, r0), (1, r1), (2, r2), (3, r3)):
    off = off_0 + k * BLOCK
    x = ml.load(X.at[off], mask=off < N, other=0.0)
    keep = ml.uint_to_uniform_float(r) > p
    ml.store(Y.at[off], ml.where(keep, x * p_scale, 0.0), mask=off < N)


def _flaggems_reference(x, seed, offset, p):
  n = x.shape[0]
  blocks = -(-n // 512)
  xx = np.zeros(blocks * 512, np.float32)
  xx[:n] = x
  out = np.zeros_like(xx)
  for b in range(blocks):
    words = _philox(seed, 0, offset + b * 128 + np.arange(128))
    for k in range(4):
      o = b * 512 + k * 128 + np.arange(128)
      out[o] = np.where(_uniform(words[k]) > np.float32(p), xx[o] * np.float32(1.0 / (1.0 - p)), 0)
  return out[:n]


def test_flaggems_dropout_draws_tritons_mask():
  x = np.random.default_rng(0).standard_normal(1100).astype(np.float32)
  got = np.asarray(flaggems_dropout(jnp.asarray(x), 77, 1000, p=0.3, interpret=True))
  np.testing.assert_allclose(got, _flaggems_reference(x, 77, 1000, 0.3), rtol=1e-6)
  assert "mosaic_gpu" in _export(flaggems_dropout, S((1100,), F32), S((), I32), S((), I32), p=0.3)


# ---------------------------------------------------------------- offsets of any integer width, and scalars
@mg.mgpu_kernel(out_shape=lambda x, seed: x, grid=lambda x, seed: (ml.cdiv(x.shape[0], 256),))
def dropout_int64_offsets(x_ptr, seed: ml.scalar, out):
  pid = ml.program_id(0).to(jnp.int64)
  offs = pid * 256 + ml.arange(0, 256)
  m = offs < x_ptr.shape[0]
  x = ml.load(x_ptr.at[offs], mask=m)
  ml.store(out.at[offs], ml.where(ml.rand(seed, offs) > 0.5, x * 2, 0.0), mask=m)


@mg.mgpu_kernel(out_shape=lambda x: (S((128,), U32),) * 3)
def narrow_offsets(x, a, b, c):
  i = ml.arange(0, 128)
  a[...] = ml.randint(5, (i - 64).to(jnp.int16))       # sign-extended, as Triton's .to(tl.uint32)
  b[...] = ml.randint(5, (i + 200).to(jnp.uint8))      # zero-extended (wrapped to 8 bits first)
  c[...] = ml.randint(5, offset=i.to(jnp.uint16), n_rounds=3)       # Triton's keywords


@mg.mgpu_kernel(out_shape=lambda x, seed: x, grid=lambda x, seed: (x.shape[0] // 64,))
def scalar_offsets(x, seed: ml.scalar, out):
  pid = ml.program_id(0)
  o = pid * 64 + ml.arange(0, 64)
  scale = ml.rand(seed, pid)                 # one number a program, Triton's tl.rand(seed, pid)
  shift = (ml.randint(seed, pid + 100) % 8).to(jnp.float32) + ml.rand(seed, 17)
  ml.store(out.at[o], ml.load(x.at[o]) * scale + shift)


def test_int64_offsets_are_their_two_words():
  x = np.random.default_rng(1).standard_normal(600).astype(np.float32)
  got = np.asarray(dropout_int64_offsets(jnp.asarray(x), 3, interpret=True))
  np.testing.assert_array_equal(got, np.where(_uniform(_philox(3, 0, np.arange(600))[0]) > 0.5, x * 2, 0))
  assert "mosaic_gpu" in _export(dropout_int64_offsets, S((600,), F32), S((), I32))


@mg.mgpu_kernel(out_shape=lambda x, base: S(x.shape, U32))
def big_offsets(x, base: ml.scalar, out):
  out[...] = ml.randint(9, base + ml.arange(0, 128).to(jnp.int64))


def test_int64_offsets_past_2_32_take_the_high_word():
  jax.config.update("jax_enable_x64", True)
  try:
    base = (5 << 32) + M32 - 60           # the low word wraps inside the block; the high word is 5, then 6
    got = np.asarray(big_offsets(jnp.zeros((128,), F32), jnp.int64(base), interpret=True))
    offs = base + np.arange(128)
    np.testing.assert_array_equal(got, _philox(9, 0, offs & M32, offs >> 32)[0])
    assert "mosaic_gpu" in _export(big_offsets, S((128,), F32), S((), jnp.int64))
  finally:
    jax.config.update("jax_enable_x64", False)


def test_narrow_and_scalar_offsets():
  i = np.arange(128)
  a, b, c = (np.asarray(v) for v in narrow_offsets(jnp.zeros((128,), F32), interpret=True))
  np.testing.assert_array_equal(a, _philox(5, 0, (i - 64) & M32)[0])
  np.testing.assert_array_equal(b, _philox(5, 0, (i + 200) % 256)[0])
  np.testing.assert_array_equal(c, _philox(5, 0, i, rounds=3)[0])
  assert "mosaic_gpu" in _export(narrow_offsets, S((128,), F32))
  x = np.random.default_rng(2).standard_normal(256).astype(np.float32)
  got = np.asarray(scalar_offsets(jnp.asarray(x), 5, interpret=True))
  scale = _uniform(_philox(5, 0, np.arange(4))[0])
  shift = (_philox(5, 0, 100 + np.arange(4))[0] % 8).astype(np.float32) + _uniform(_philox(5, 0, 17)[0])
  np.testing.assert_allclose(got, x * np.repeat(scale, 64) + np.repeat(shift, 64), rtol=1e-6)
  assert "mosaic_gpu" in _export(scalar_offsets, S((256,), F32), S((), I32))


# ---------------------------------------------------------------- tiles of odd shapes, as a Pallas kernel reads them whole
@mg.mgpu_kernel(out_shape=lambda x, seed: x)
def whole_dropout(x, seed: ml.scalar, out):
  v = x[...]
  offs = ml.arange(0, x.shape[0])
  if len(x.shape) == 2:
    offs = offs[:, None] * x.shape[1] + ml.arange(0, x.shape[1])[None, :]
  out[...] = ml.where(ml.rand(seed, offs) > 0.3, v / 0.7, 0.0)


@pytest.mark.parametrize("shape", [(100,), (130,), (7, 64), (1, 300), (3, 7)])
def test_odd_tiles_draw_their_own_numbers(shape):
  """The padded trace (a (100,) vector padded to 104, (7, 64) rows to 8) and the few-element path ((3, 7) as
  scalars) gave up at the Philox op (MG204); it is elementwise there, each word its own result."""
  x = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
  got = np.asarray(whole_dropout(jnp.asarray(x), 5, interpret=True))
  u = _uniform(_philox(5, 0, np.arange(x.size).reshape(shape))[0])
  np.testing.assert_allclose(got, np.where(u > np.float32(0.3), x / np.float32(0.7), 0), rtol=1e-6)
  assert "mosaic_gpu" in _export(whole_dropout, S(shape, F32), S((), I32))


# ---------------------------------------------------------------- seeds: one per element, one loaded as (1,)
@mg.mgpu_kernel(out_shape=lambda x, s: S(x.shape, U32), grid=lambda x, s: (x.shape[0] // 8,))
def row_seeds(x, seeds, out):
  rows = ml.program_id(0) * 8 + ml.arange(0, 8)
  cols = ml.arange(0, 128)
  s = ml.load(seeds.at[rows])
  ml.store(out.at[rows[:, None], cols[None, :]], ml.randint(s[:, None], cols[None, :]))


@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=lambda x, s: (ml.cdiv(x.shape[0], 256),))
def loaded_seed(x_ptr, seed_ptr, out):
  seed = ml.load(seed_ptr)                   # Triton's tl.load(seed_ptr): a (1,) array's one element
  offs = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = offs < x_ptr.shape[0]
  x = ml.load(x_ptr.at[offs], mask=m)
  ml.store(out.at[offs], ml.where(ml.rand(seed, offs) > 0.5, x * 2.0, 0.0), mask=m)


def test_a_seed_per_row_and_a_loaded_seed():
  rng = np.random.default_rng(3)
  s = rng.integers(-2**31, 2**31, 16).astype(np.int32)     # signed seeds sign-extend into the key's high word
  got = np.asarray(row_seeds(jnp.zeros((16, 128), F32), jnp.asarray(s), interpret=True))
  k1 = np.where(s < 0, M32, 0)[:, None]
  np.testing.assert_array_equal(got, _philox(s.astype(np.int64)[:, None] & M32, k1, np.arange(128)[None, :])[0])
  assert "mosaic_gpu" in _export(row_seeds, S((16, 128), F32), S((16,), I32))
  x = rng.standard_normal(700).astype(np.float32)
  got = np.asarray(loaded_seed(jnp.asarray(x), jnp.asarray([123], I32), interpret=True))
  np.testing.assert_array_equal(got, np.where(_uniform(_philox(123, 0, np.arange(700))[0]) > 0.5, x * 2, 0))
  assert "mosaic_gpu" in _export(loaded_seed, S((700,), F32), S((1,), I32))


# ---------------------------------------------------------------- the conversions, and the numbers' statistics
@mg.mgpu_kernel(out_shape=lambda x: (x, x, x))
def conversions(x, u, n1, n2):
  a, b, _, _ = ml.randint4x(5, ml.arange(0, x.shape[0]))
  u[...] = ml.uint_to_uniform_float(a.to(jnp.int32, bitcast=True))      # int32 words too, as Triton's
  n1[...], n2[...] = ml.pair_uniform_to_normal(ml.uint_to_uniform_float(a), ml.uint_to_uniform_float(b))


@mg.mgpu_kernel(out_shape=lambda x: (x, x), grid=lambda x: (x.shape[0] // 1024,))
def draws(x, u, n):
  offs = ml.program_id(0) * 1024 + ml.arange(0, 1024)
  a, b, _, _ = ml.philox(2024, offs, 0, 0, 0)
  ua = ml.uint_to_uniform_float(a)
  ml.store(u.at[offs], ua)
  ml.store(n.at[offs], ml.pair_uniform_to_normal(ua, ml.uint_to_uniform_float(b))[0])


def test_uint_to_uniform_float_and_pair_uniform_to_normal():
  u, n1, n2 = (np.asarray(v) for v in conversions(jnp.zeros((256,), F32), interpret=True))
  w = _philox(5, 0, np.arange(256))
  u1, u2 = _uniform(w[0]), _uniform(w[1])
  np.testing.assert_array_equal(u, u1)
  r = np.sqrt(np.float32(-2.0) * np.log(np.maximum(np.float32(1e-7), u1)))
  th = np.float32(6.283185307179586) * u2
  np.testing.assert_allclose(n1, r * np.cos(th), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(n2, r * np.sin(th), rtol=1e-5, atol=1e-6)
  assert "mosaic_gpu" in _export(conversions, S((256,), F32))


def test_statistics_of_a_hundred_thousand_draws():
  u, n = (np.asarray(v) for v in draws(jnp.zeros((100352,), F32), interpret=True))
  assert 0.0 <= u.min() and u.max() < 1.0
  assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
  assert abs(n.mean()) < 0.015 and abs(n.var() - 1.0) < 0.02
  assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.01       # neighbouring offsets are independent


# ---------------------------------------------------------------- tl.umulhi: a Philox round written by hand
@mg.mgpu_kernel(out_shape=lambda a, b: (a, a, a))
def high_words(a_ref, b_ref, o1, o2, o3):
  a, b = a_ref[...], b_ref[...]
  o1[...] = ml.umulhi(a, b)
  o2[...] = ml.umulhi(a, 12345)
  o3[...] = ml.umulhi(a, b_ref[3])


@mg.mgpu_kernel(out_shape=lambda x, seed: S((128,), U32))
def handmade_philox(x, seed: ml.scalar, out):
  c0 = ml.arange(0, 128).to(jnp.uint32)
  c1 = c2 = c3 = c0 * 0
  k0, k1 = seed.to(jnp.uint32), (seed >> 31).to(jnp.uint32)
  for _ in ml.static_range(10):
    _c0, _c2 = c0, c2
    c0 = ml.umulhi(_c2, 0xCD9E8D57) ^ c1 ^ k0
    c2 = ml.umulhi(_c0, 0xD2511F53) ^ c3 ^ k1
    c1 = _c2 * 0xCD9E8D57
    c3 = _c0 * 0xD2511F53
    k0 = k0 + 0x9E3779B9
    k1 = k1 + 0xBB67AE85
  out[...] = c0


@mg.mgpu_kernel(out_shape=lambda a: a)
def odd_high_words(a_ref, out):
  out[...] = ml.umulhi(a_ref[...], 0xD2511F53)


def _high(a, b):
  return ((np.asarray(a).astype(np.uint32).astype(np.uint64) * np.asarray(b).astype(np.uint32).astype(np.uint64))
          >> np.uint64(32)).astype(np.uint32)


def test_umulhi_is_the_products_high_word():
  rng = np.random.default_rng(7)
  for dt in (np.uint32, np.int32):         # int32 operands as their bits, as Triton's
    a, b = (rng.integers(0, 2**32, 256).astype(np.uint32).view(dt) for _ in range(2))
    g1, g2, g3 = (np.asarray(v) for v in high_words(jnp.asarray(a), jnp.asarray(b), interpret=True))
    np.testing.assert_array_equal(g1, _high(a, b).view(dt))
    np.testing.assert_array_equal(g2, _high(a, 12345).view(dt))
    np.testing.assert_array_equal(g3, _high(a, b[3]).view(dt))
    assert "mosaic_gpu" in _export(high_words, S((256,), dt), S((256,), dt))
  for seed in (77, -5):
    got = np.asarray(handmade_philox(jnp.zeros((128,), F32), seed, interpret=True))
    np.testing.assert_array_equal(got, _philox(seed & M32, M32 if seed < 0 else 0, np.arange(128))[0])
  assert "mosaic_gpu" in _export(handmade_philox, S((128,), F32), S((), I32))
  for shape in [(100,), (3, 7), (7, 64)]:      # odd tiles: padded, or element by element
    a = rng.integers(0, 2**32, shape).astype(np.uint32)
    np.testing.assert_array_equal(np.asarray(odd_high_words(jnp.asarray(a), interpret=True)), _high(a, 0xD2511F53))
    assert "mosaic_gpu" in _export(odd_high_words, S(shape, U32))


# ---------------------------------------------------------------- mistakes still fail, in the user's words
@mg.mgpu_kernel(out_shape=lambda x, r: x)
def run_time_rounds(x, r: ml.scalar, out):
  out[...] = ml.rand(1, ml.arange(0, 128), n_rounds=r)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, U32))
def wide_counter(x, out):
  w = ml.philox(1, ml.arange(0, 128).to(jnp.int64), 0, 0, 0)
  out[...] = w[0]


@mg.mgpu_kernel(out_shape=lambda x: x)
def uniform_of_floats(x, out):
  v = x[...]
  out[...] = ml.uint_to_uniform_float(v)


@mg.mgpu_kernel(out_shape=lambda x: x)
def normal_of_words(x, out):
  a, b, _, _ = ml.randint4x(1, ml.arange(0, 128))
  out[...] = ml.pair_uniform_to_normal(a, b)[0]


@mg.mgpu_kernel(out_shape=lambda x, off: S((128,), U32))
def signed_step_of_a_counter(x, philox_offset: ml.scalar, out):
  c0 = philox_offset.to(jnp.uint32)
  i4 = ml.arange(0, 128)
  c0 += i4                                   # FlagGems' line: Triton computes it in uint32
  out[...] = ml.philox(1, c0, 0, 0, 0)[0]


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def seeds_of_another_length(x, s, out):
  seeds = s[...]
  out[...] = ml.rand(seeds, ml.arange(0, 128))


def test_random_mistakes_say_what_to_write():
  V = [S((128,), F32)]
  expect(run_time_rounds, V + [S((), I32)], mg.KernelTypeError, "ml.rand(",
         "ml.rand's n_rounds must be a static int of 0 or more (Philox's rounds, Triton's n_rounds constexpr),"
         " got a scalar", hint="n_rounds=10 (the default; Triton's N_ROUNDS_DEFAULT), or a constexpr parameter:"
                               " n_rounds=N_ROUNDS")
  expect(wide_counter, V, mg.UnsupportedDtypeError, "ml.philox(",
         "ml.philox's c0 is int64: ml.philox's counters are 32-bit words (Philox4x32; Triton's 64-bit form,"
         " Philox4x64, is not supported)",
         hint="split it into two words: ml.arange(0, 128).to(jnp.int64) & 0xFFFFFFFF and"
              " ml.arange(0, 128).to(jnp.int64) >> 32, each .astype(jnp.uint32)")
  expect(uniform_of_floats, V, mg.UnsupportedDtypeError, "ml.uint_to_uniform_float(",
         "ml.uint_to_uniform_float takes random uint32 or int32 words (ml.randint's), got a register tensor"
         " (float32)", hint="ml.uint_to_uniform_float(ml.randint(seed, offsets)), or draw the floats at once:"
                            " ml.rand(seed, offsets)")
  expect(signed_step_of_a_counter, V + [S((), I32)], mg.DtypeMismatchError, "c0 += i4",
         "+ on c0 (uint32) and i4 (int32): dtypes differ and are never converted implicitly",
         hint="convert i4 to uint32, the same bits: c0 + i4.astype(jnp.uint32) wraps as uint32 (Triton's result, the"
              " low 32 bits of jnp's int64 one); for the exact value, convert both sides to int64: c0.astype(jnp.int64)"
              " and i4.astype(jnp.int64)")
  expect(seeds_of_another_length, V + [S((8,), I32)], mg.ShapeMismatchError, "ml.rand(",
         "ml.rand on seeds of shape (8,) and ml.arange(0, 128) of shape (128,): the shapes do not broadcast (axis 0 of"
         " the result would be both 8 and 128)")
  expect(high_words, [S((256,), F32)] * 2, mg.UnsupportedDtypeError, "ml.umulhi(a, b)",
         "ml.umulhi takes 32-bit integers (int32 or uint32), got float32",
         hint="convert them: ml.umulhi(a.astype(jnp.uint32), b.astype(jnp.uint32))")
  expect(normal_of_words, V, mg.UnsupportedDtypeError, "ml.pair_uniform_to_normal(",
         "ml.pair_uniform_to_normal's u1 must be uniform floats in [0, 1), got a register tensor (uint32)",
         hint="ml.pair_uniform_to_normal(ml.uint_to_uniform_float(r1), ml.uint_to_uniform_float(r2)) of words"
              " r1, r2 of ml.randint4x")


# ---------------------------------------------------------------- JAX's keys and Pallas TPU's stateful PRNG: what to write
@mg.mgpu_kernel(out_shape=lambda x, seed: x)
def key_of_a_seed(x, seed: ml.scalar, out):
  key = jax.random.key(seed)
  out[...] = x[...] + jax.random.uniform(key, x.shape)


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def pallas_tpu_prng(x, seed_ref, out):
  pltpu.prng_seed(seed_ref[0])
  out[...] = x[...] * pltpu.stateful_uniform(x.shape)


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def pallas_tpu_prng_as_hinted(x, seed_ref, out):
  out[...] = x[...] * ml.rand(seed_ref[0], ml.arange(0, 128))


def test_keys_and_stateful_draws_hint_the_counter_based_draw():
  expect(key_of_a_seed, [S((128,), F32), S((), I32)], mg.KernelTypeError, "jax.random.key(seed)",
         "key cannot take a scalar inside a kernel",
         hint="keep seed as the seed and draw from it, no key: ml.rand(seed, offsets) for uniform floats in [0, 1),"
              " ml.randint(seed, offsets) for uint32 bits, ml.randn(seed, offsets) for normals (jax.random.uniform,"
              " bits, normal), one offset an element, i * n + ml.arange(n)")
  expect(pallas_tpu_prng, [S((128,), F32), S((1,), I32)], mg.KernelTypeError, "pltpu.prng_seed(",
         "pltpu.prng_seed is Pallas's; an mgpu_dsl kernel calls ml.* functions",
         hint="a kernel's random numbers have no state to seed: drop the call and draw from seed_ref[0] directly,"
              " ml.randint(seed_ref[0], offsets) for random bits (prng_random_bits's), ml.rand(seed_ref[0], offsets)"
              " for uniform floats, ml.randn(seed_ref[0], offsets) for normals, one offset an element:"
              " i * n + ml.arange(n)")
  x = np.random.default_rng(5).standard_normal(128).astype(np.float32)
  got = np.asarray(pallas_tpu_prng_as_hinted(jnp.asarray(x), jnp.asarray([9], I32), interpret=True))
  np.testing.assert_array_equal(got, x * _uniform(_philox(9, 0, np.arange(128))[0]))


# ---------------------------------------------------------------- the GPU draws interpret mode's bits
@pytest.mark.gpu
def test_gpu_random_bits_match_interpret_mode():
  rng = np.random.default_rng(4)
  def same(a, b):        # bits exactly; a float (dropout's x / (1 - p): the GPU's division) within an ulp or two
    a, b = np.asarray(a), np.asarray(b)
    if np.issubdtype(a.dtype, np.floating):
      np.testing.assert_array_equal(a == 0, b == 0)
      np.testing.assert_allclose(a, b, rtol=3e-7, atol=0)
    else:
      np.testing.assert_array_equal(a, b)
  eq = lambda g, i: [same(a, b) for a, b in zip(g if isinstance(g, tuple) else (g,), i if isinstance(i, tuple) else (i,))]
  for ctr, (k0, k1), _ in KAT:
    c = jnp.asarray(np.tile(np.asarray(ctr, np.uint32)[:, None], (1, 128)))
    eq(philox_words(c, seed=k0 | k1 << 32), philox_words(c, seed=k0 | k1 << 32, interpret=True))
  for shape in [(100,), (130,), (7, 64), (1, 300), (3, 7)]:
    xs = jnp.asarray(rng.standard_normal(shape), F32)
    eq(whole_dropout(xs, 5), whole_dropout(xs, 5, interpret=True))
  for dt in (np.uint32, np.int32):
    a, b = (jnp.asarray(rng.integers(0, 2**32, 256).astype(np.uint32).view(dt)) for _ in range(2))
    eq(high_words(a, b), high_words(a, b, interpret=True))
  for shape in [(100,), (3, 7), (7, 64)]:
    a = jnp.asarray(rng.integers(0, 2**32, shape).astype(np.uint32))
    eq(odd_high_words(a), odd_high_words(a, interpret=True))
  for seed in (77, -5):
    eq(handmade_philox(jnp.zeros((128,), F32), seed), handmade_philox(jnp.zeros((128,), F32), seed, interpret=True))
  seeds = jnp.asarray(np.arange(64, dtype=np.uint32) * 977)
  eq(philox_of_scalars(seeds, jnp.uint32(0xA4093822)), philox_of_scalars(seeds, jnp.uint32(0xA4093822), interpret=True))
  for r in (10, 7):
    eq(philox_mixed(jnp.zeros((128,), F32), 12345, R=r), philox_mixed(jnp.zeros((128,), F32), 12345, R=r, interpret=True))
  x = jnp.asarray(rng.standard_normal(1100), F32)
  eq(flaggems_dropout(x, 77, 1000, p=0.3), flaggems_dropout(x, 77, 1000, p=0.3, interpret=True))
  eq(dropout_int64_offsets(x, 3), dropout_int64_offsets(x, 3, interpret=True))
  eq(narrow_offsets(jnp.zeros((128,), F32)), narrow_offsets(jnp.zeros((128,), F32), interpret=True))
  eq(scalar_offsets(x[:256], 5), scalar_offsets(x[:256], 5, interpret=True))
  s = jnp.asarray(rng.integers(-2**31, 2**31, 16).astype(np.int32))
  eq(row_seeds(jnp.zeros((16, 128), F32), s), row_seeds(jnp.zeros((16, 128), F32), s, interpret=True))
  eq(loaded_seed(x, jnp.asarray([123], I32)), loaded_seed(x, jnp.asarray([123], I32), interpret=True))
  jax.config.update("jax_enable_x64", True)
  try:
    base = jnp.int64((5 << 32) + M32 - 60)
    eq(big_offsets(jnp.zeros((128,), F32), base), big_offsets(jnp.zeros((128,), F32), base, interpret=True))
  finally:
    jax.config.update("jax_enable_x64", False)
  g, i = draws(jnp.zeros((8192,), F32)), draws(jnp.zeros((8192,), F32), interpret=True)
  np.testing.assert_array_equal(np.asarray(g[0]), np.asarray(i[0]))
  np.testing.assert_allclose(np.asarray(g[1]), np.asarray(i[1]), rtol=1e-5, atol=1e-5)    # libdevice's log/cos
  g, i = conversions(jnp.zeros((256,), F32)), conversions(jnp.zeros((256,), F32), interpret=True)
  np.testing.assert_array_equal(np.asarray(g[0]), np.asarray(i[0]))
  for a, b in zip(g[1:], i[1:]):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)
