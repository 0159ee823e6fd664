"""Probe 44b (control flow and integer index arithmetic in data-dependent kernels): the 8/16-bit wrap check
follows values a loop carries (a uint8 counter of a while loop, a for loop's running count) and narrows them
by the loop's condition and an if's test (frontend/narrow_loops.py); a left shift by a run-time amount names
the first value past its dtype; lax.scan with keywords gets the loop hint; `reversed(range(n, 0, -2))` of a
run-time n runs; `x[i:]` at a run-time i hints the masked window of the elements it has."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, U8 = jnp.float32, jnp.uint8


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _col_of(text):
  with open(__file__) as f:
    line = next(line for line in f if text in line and "_line_of" not in line and "_col_of" not in line)
  return line.index(text)


def _expect(kernel, specs, at, message, hint=None, cls=mg.KernelTypeError):
  with pytest.raises(cls) as info:
    kernel.check(*specs)
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of(at), _col_of(at)), e
  assert e.message == message, e.message
  if hint is not None:
    assert e.hint == hint, e.hint
  return e


def _wrap_message(text, name, rng, past, use, line, bound):
  return (f"{text} is computed in {name} ({rng}), where it can reach {past} and wrap (as jnp's {name} arithmetic"
          f" does), and {use} at line {line} use{'' if use == 'the loop' else 's'} it as {bound}")


# ---------------------------------------------------------------- narrow counters a loop carries
@mg.mgpu_kernel(out_shape=lambda x, s: S((1,), x.dtype))
def while_steps_past(x, s, out):
  i = s[0]
  acc = 0.0
  while i < 200:                                       # the stepping condition
    acc += x[i]
    i = i + 100                                        # 199 + 100 wraps to 43: the loop goes on
  out[0] = acc


@mg.mgpu_kernel(out_shape=lambda x, s: S((1,), x.dtype))
def for_counts_past(x, s, out):
  c = s[0] * 0
  acc = 0.0
  for k in range(300):
    acc += x[c]                                        # the count read
    c = c + 1                                          # 300 trips: c wraps at 255
  out[0] = acc


@mg.mgpu_kernel(out_shape=lambda x, s: S((1,), x.dtype))
def while_steps_fixed(x, s, out):
  i = s[0].astype(jnp.int32)
  acc = 0.0
  while i < 200:
    acc += x[i]
    i = i + 100
  out[0] = acc


@mg.mgpu_kernel(out_shape=lambda x, s: S((1,), x.dtype))
def for_counts_fixed(x, s, out):
  c = (s[0] * 0).astype(jnp.int32)
  acc = 0.0
  for k in range(300):
    acc += x[c]
    c = c + 1
  out[0] = acc


@mg.mgpu_kernel(out_shape=lambda x, n: S((4,), x.dtype))
def counters_in_range(x, n, out):
  """uint8 counters that never leave uint8: bounded by the while condition, a short static loop, an if."""
  i = n[0] * 0
  a = 0.0
  while i < n[0]:
    a += x[i + 1]                                      # i <= 254 here: i + 1 <= 255
    i += 1
  c = n[0] * 0
  b = 0.0
  for k in range(4):
    c = c + 1
    b += x[c]                                          # c <= 4
  k = n[1]
  d = 0.0
  while k:
    d += x[k - 1]                                      # k >= 1 here
    k = k - 1
  j = n[2]
  e = 0.0
  for t in range(n[3]):
    if j < 100:
      j = j + 1                                        # j <= 99 here
    e += x[j]
  out[0] = a
  out[1] = b
  out[2] = d
  out[3] = e


def _counters_want(x, n):
  n = [int(v) for v in n]
  j, e = n[2], 0.0
  for _ in range(n[3]):
    j = j + 1 if j < 100 else j
    e += x[j]
  return [x[1:n[0] + 1].sum(), x[1:5].sum(), x[:n[1]].sum(), e]


def test_loop_carried_narrow_counters_wrap_check():
  """The while loop's `i + 100` (carried round to its condition) and the for loop's `c + 1` (carried to the
  next trip's read) were not reported; the in-range counters of `counters_in_range` were (i + 1, c + 1: can
  reach 256), or would have been once carries were followed without the loop's condition and trip count. A carry's
  update is widened where the carry starts: widened in place (`i.astype(jnp.int32) + 100`) the carry changes type."""
  rng = "0..255"
  _expect(while_steps_past, [S((1024,), F32), S((1,), U8)], "i + 100",
          _wrap_message("i + 100", "uint8", rng, 299, "the while loop's condition", _line_of("the stepping cond"),
                        "a bound"),
          "widen i where it starts, before the loop: i = s[0].astype(jnp.int32) (a value a loop carries keeps the type"
          " it enters with; an index in uint8 is widened to int32 only where it is used, after the arithmetic)")
  _expect(for_counts_past, [S((1024,), F32), S((1,), U8)], "c + 1",
          _wrap_message("c + 1", "uint8", rng, 256, "the window", _line_of("the count read"), "an index"),
          "widen c where it starts, before the loop: c = (s[0] * 0).astype(jnp.int32) (a value a loop carries keeps"
          " the type it enters with; an index in uint8 is widened to int32 only where it is used, after the"
          " arithmetic)")
  x = np.arange(1024, dtype=np.float32)               # the hints followed
  for s in (0, 150, 199, 255):
    got = while_steps_fixed(jnp.asarray(x), jnp.array([s], U8), interpret=True)
    np.testing.assert_array_equal(np.asarray(got), [sum(x[i] for i in range(s, 200, 100))])
  got = for_counts_fixed(jnp.asarray(x), jnp.array([7], U8), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), [x[:300].sum()])
  x = np.random.default_rng(0).standard_normal(1024).astype(np.float32)
  for n in ([0, 0, 0, 0], [7, 3, 98, 5], [255, 255, 200, 3], [3, 1, 250, 0]):
    got = counters_in_range(jnp.asarray(x), jnp.array(n, U8), interpret=True)
    np.testing.assert_allclose(np.asarray(got), _counters_want(x, n), rtol=1e-5, atol=1e-5)
  counters_in_range.check(S((1024,), F32), S((4,), U8))


@mg.mgpu_kernel(out_shape=lambda x, n: S((1,), x.dtype), grid=(1,))
def strided_int16(x, n, out):
  j = n[0] % 1000
  acc = 0.0
  for k in range(8):
    acc += x[j]                                        # at most 999 + 7 * 4000 = 28999
    j = j + 4000                                       # 32999 after the last trip: carried to no read
  out[0] = acc


def test_a_static_loops_last_update_reaches_only_its_result():
  """The last trip's `j + 4000` (32999, past int16) was taken round to the next trip's read, which never runs."""
  strided_int16.check(S((1 << 15,), F32), S((1,), jnp.int16))
  x = np.arange(1 << 15, dtype=np.float32)
  got = strided_int16(jnp.asarray(x), jnp.array([1234], jnp.int16), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), [sum(x[234 + 4000 * k] for k in range(8))])


@mg.mgpu_kernel(out_shape=lambda x, n: S((64,), F32), grid=(1,))
def loop_index_narrowed(x, n, out):
  for i in range(64):
    out[i] = x[i.astype(jnp.uint8) * 2]                # at most 126
  for i in range(n[0]):
    out[i] = out[i] + x[i.astype(jnp.uint8) + 1]       # i < n[0] <= 255: at most 255


def test_a_loop_index_cast_to_8_bits_keeps_its_range():
  """`i.astype(jnp.uint8) * 2` of `for i in range(64)` was MG003 "can reach 510": the loop's index had int32's range."""
  loop_index_narrowed.check(S((256,), F32), S((1,), U8))
  x = np.arange(256, dtype=np.float32)
  got = loop_index_narrowed(jnp.asarray(x), jnp.array([10], U8), interpret=True)
  want = x[np.arange(64) * 2]
  want[:10] += x[1:11]
  np.testing.assert_array_equal(np.asarray(got), want)


@mg.mgpu_kernel(out_shape=lambda x, s: S((2,), F32), grid=(1,))
def guarded_selects(x, s, out):
  head = s[0]
  acc = 0.0
  for k in range(s[1]):
    acc += x[head]
    head = ml.where(head == 255, 0, head + 1)         # a ring index: h + 1 is taken only below 255
  out[0] = acc
  out[1] = x[ml.where(s[2] < 250, s[2] + 5, s[2])]


@mg.mgpu_kernel(out_shape=lambda x, s: S((2,), F32), grid=(1,))
def guarded_branches(x, s, out):
  out[0] = 0.0
  if s[0] < 10:
    out[0] = x[s[0] * 20]                              # s[0] read again under its test: at most 180
  d = s[1] % 16
  acc = 0.0
  for k in range(100):
    d = (d + 1) % 16                                   # at most 16 before the %
    acc += x[d * 16]
  out[1] = acc


@mg.mgpu_kernel(out_shape=lambda x, s: S((1,), F32), grid=(1,))
def unguarded_select(x, s, out):
  out[0] = x[ml.where(s[0] < 100, s[0] + 200, 0)]    # the unguarded select


def test_a_select_that_guards_the_wrap_is_not_one():
  """`ml.where(h == 255, 0, h + 1)` was MG003 "h + 1 ... can reach 256": the select takes h + 1 only where it fits;
  so were `s[0] * 20` under `if s[0] < 10:` (can reach 5100) and a loop's `(d + 1) % 16` (can reach 256)."""
  guarded_selects.check(S((256,), F32), S((3,), U8))
  guarded_branches.check(S((256,), F32), S((2,), U8))
  x = np.arange(256, dtype=np.float32)
  got = guarded_branches(jnp.asarray(x), jnp.array([7, 200], U8), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), [x[140], sum(x[((200 % 16 + k) % 16) * 16] for k in range(1, 101))])
  x = np.arange(256, dtype=np.float32)
  got = guarded_selects(jnp.asarray(x), jnp.array([250, 10, 252], U8), interpret=True)
  ring = [(250 + k) % 256 for k in range(10)]
  np.testing.assert_array_equal(np.asarray(got), [x[ring].sum(), x[252]])
  _expect(unguarded_select, [S((256,), F32), S((1,), U8)], "s[0] + 200",
          _wrap_message("s[0] + 200", "uint8", "0..255", 455, "the window", _line_of("the unguarded select"),
                        "an index"))


# ---------------------------------------------------------------- a shift by a run-time amount
@mg.mgpu_kernel(out_shape=lambda x, s: S((64,), x.dtype))
def shifted_window(x, s, out):
  out[...] = x.at[ml.ds(1 << s[0], 64)][...]          # the shifted window


@pytest.mark.parametrize("dtype,past", [(jnp.uint8, 256), (jnp.int8, 256), (jnp.int16, 65536), (jnp.uint16, 65536)])
def test_a_run_time_shift_names_the_first_value_past_its_dtype(dtype, past):
  """`1 << s[0]` of a uint8 s said "can reach 2147483647" (int32's end, where jnp computes in uint8); of an int16
  or uint16 s it was not reported (1 << 15 is -32768 in int16, 1 << 16 is 0)."""
  info = jnp.iinfo(dtype)
  name = jnp.dtype(dtype).name
  _expect(shifted_window, [S((1 << 17,), F32), S((1,), dtype)], "1 << s[0]",
          _wrap_message("1 << s[0]", name, f"{info.min}..{info.max}", past, "the window",
                        _line_of("the shifted window"), "an index"),
          f"widen it before the arithmetic: 1 << s[0].astype(jnp.int32) (an index in {name} is widened to int32 only"
          " where it is used, after the arithmetic)")


# ---------------------------------------------------------------- lax.scan with keywords
@mg.mgpu_kernel(out_shape=lambda x: S((64,), x.dtype))
def scan_by_length(x, out):
  def step(c, _):
    return c * 2.0, None
  acc, _ = lax.scan(step, x[...], None, length=4)      # the counted scan
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: S((64,), x.dtype))
def scan_reversed(x, out):
  acc, ys = lax.scan(lambda c, r: (c + r, c), ml.zeros((64,), F32), xs=x[...], reverse=True, unroll=2)  # the reversed
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, n: S((1,), F32), grid=(1,))
def lax_keywords(x, n, out):
  out[0] = lax.cond(n[0] > 0, lambda a: a * 2.0, lambda a: a, operand=x[0])                 # the old cond


@mg.mgpu_kernel(out_shape=lambda x, n: S((1,), F32), grid=(1,))
def lax_while_keywords(x, n, out):
  out[0] = lax.while_loop(cond_fun=lambda c: c < 10.0, body_fun=lambda c: c * 2.0, init_val=x[1])


def test_lax_scan_with_keywords_gets_the_loop_hint():
  """lax.scan(f, init, None, length=n), lax.scan(f, init, xs=..., reverse=True), lax.while_loop(cond_fun=...) and
  lax.cond(p, f, g, operand=x) got the generic hint."""
  # lax.scan of a static length runs unrolled since probe 49h (the loops the hints wrote)
  v = np.random.default_rng(6).standard_normal((16, 64)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(scan_by_length(v[0], interpret=True)), v[0] * 16, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(scan_reversed(v, interpret=True)), v.sum(0), rtol=1e-5, atol=1e-5)
  # lax.cond(p, f, g, operand=x) and lax.while_loop(cond_fun=..., ...) of lambdas run as the statements their
  # hints wrote since probe 48h
  x = np.random.default_rng(5).uniform(0.5, 2.0, 64).astype(np.float32)
  for n in (np.array([1], np.int32), np.array([0], np.int32)):
    np.testing.assert_array_equal(np.asarray(lax_keywords(x, n, interpret=True)), x[:1] * (2.0 if n[0] > 0 else 1.0))
    c = x[1]
    while c < 10.0:
      c = c * np.float32(2.0)
    np.testing.assert_array_equal(np.asarray(lax_while_keywords(x, n, interpret=True)), [c])


# ---------------------------------------------------------------- reversed ranges of a negative step
@mg.mgpu_kernel(out_shape=lambda x, n: S((4,), x.dtype))
def reversed_descending(x, n, out):
  a = 0.0
  for i in reversed(range(n[0], 0, -2)):               # the reversed countdown
    a = a * 2.0 + x[i]
  b = 0.0
  for i in range(n[0], n[1], -3)[::-2]:
    b = b * 2.0 + x[i]
  c = 0.0
  for i in range(n[0], n[1], -1)[::2]:
    c = c * 2.0 + x[i]
  d = 0.0
  for i in reversed(range(n[0], n[1], -1)):
    d = d * 2.0 + x[i]
  out[0] = a
  out[1] = b
  out[2] = c
  out[3] = d


def _reversed_want(x, n):
  out = []
  for it in (reversed(range(n[0], 0, -2)), range(n[0], n[1], -3)[::-2], range(n[0], n[1], -1)[::2],
             reversed(range(n[0], n[1], -1))):
    a = 0.0
    for i in it:
      a = a * 2.0 + x[i]
    out.append(a)
  return np.array(out, np.float32)


_COUNTDOWNS = ([9, 2], [10, 0], [0, 5], [1, 1], [12, -1], [63, 40])


def test_reversed_range_of_a_negative_step_runs():
  """Was MG001 "reversed() cannot take a runtime loop: range(n[0], 0, -2) has a run-time bound"."""
  x = (np.arange(64) % 7).astype(np.float32)
  for n in _COUNTDOWNS:
    for dtype in (jnp.int32, jnp.int16):
      got = reversed_descending(jnp.asarray(x), jnp.array(n, dtype), interpret=True)
      np.testing.assert_array_equal(np.asarray(got), _reversed_want(x, n))
  assert "scf.for" in reversed_descending.mlir(S((64,), F32), S((2,), jnp.int32))


@mg.mgpu_kernel(out_shape=lambda x, n: S((1,), F32), grid=(1,))
def reversed_pipelined(x, n, out):
  b = 0.0
  for i in reversed(ml.range(n[0], 0, -3)):            # the reversed runtime loop
    b = b * 0.5 + x[i]
  out[0] = b


@mg.mgpu_kernel(out_shape=lambda x, n: S((64,), F32), grid=(1,))
def reversed_tma_pipeline(x, n, out):
  acc = ml.zeros((64,), F32)
  buf = ml.smem((8, 64), F32)
  for t in reversed(ml.range(n[1], n[0], stages=2)):
    ml.copy(x.at[ml.ds(t * 8, 8), :], buf)
    acc = acc * 0.5 + ml.sum(buf[...], axis=0)
  out[...] = acc


def _pipeline_want(x, n):
  acc = np.zeros(64, np.float32)
  for t in reversed(range(n[1], n[0])):
    acc = acc * 0.5 + x[t * 8:(t + 1) * 8].sum(0)
  return acc


@mg.mgpu_kernel(out_shape=lambda x, n: S((1,), F32), grid=(1,))
def reversed_uint32(x, n, out):
  b = 0.0
  for i in reversed(range(2, n[0], 3)):                # the reversed uint32 range
    b = b * 0.5 + x[i]
  out[0] = b


@mg.mgpu_kernel(out_shape=lambda x, n: S((1,), F32), grid=(1,))
def reversed_hint_followed(x, n, out):
  b = 0.0
  for k in range(ml.cdiv(n[0], 3)):
    i = n[0] - (ml.cdiv(n[0], 3) - 1 - k) * 3
    b = b * 0.5 + x[i]
  out[0] = b


def test_reversed_runtime_loops_run_or_hint_their_elements():
  """reversed(ml.range(n, 0, -3)) and reversed(ml.range(a, n, stages=2)) were MG001, the first's hint `for k in
  range(n): c = n - 1 - k` (every element, not every third); reversed(range(2, n, 3)) of a uint32 n (which the
  count-up form would wrap at n = 0) had that hint too: now the int32 conversion that runs."""
  up = "reversed() cannot take a runtime loop: {} {}, and a runtime loop only counts upwards over its own index"
  _expect(reversed_uint32, [S((256,), F32), S((1,), jnp.uint32)], "reversed(range(2, n[0], 3))",
          up.format("range(2, n[0], 3)", "has a run-time bound"),
          "convert the uint32 bounds to int32, which it takes: for i in reversed(range(2, n[0].astype(jnp.int32), 3))",
          cls=mg.UnsupportedSyntaxError)
  _expect(reversed_pipelined, [S((256,), F32), S((1,), jnp.uint32)], "reversed(ml.range(n[0], 0, -3))",
          up.format("ml.range(n[0], 0, -3)", "is a runtime loop"),
          "convert the uint32 bounds to int32, which it takes: for i in reversed(ml.range(n[0].astype(jnp.int32), 0,"
          " -3))", cls=mg.UnsupportedSyntaxError)
  x = np.random.default_rng(2).standard_normal(256).astype(np.float32)
  for n in (0, 1, 3, 100):
    want = 0.0
    for i in reversed(range(n, 0, -3)):
      want = want * 0.5 + x[i]
    got = reversed_hint_followed(jnp.asarray(x), jnp.array([n], jnp.int32), interpret=True)
    np.testing.assert_allclose(np.asarray(got)[0], want, rtol=1e-6, atol=1e-6)
    for dtype in (jnp.int32, jnp.int16):
      got = reversed_pipelined(jnp.asarray(x), jnp.array([n], dtype), interpret=True)
      np.testing.assert_allclose(np.asarray(got)[0], want, rtol=1e-6, atol=1e-6)
    got = reversed_uint32(jnp.asarray(x), jnp.array([n], jnp.int32), interpret=True)   # (int32 bounds: it runs)
    want = 0.0
    for i in reversed(range(2, n, 3)):
      want = want * 0.5 + x[i]
    np.testing.assert_allclose(np.asarray(got)[0], want, rtol=1e-6, atol=1e-6)
  xs = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
  for n in ([0, 0], [5, 0], [8, 3], [2, 6]):
    got = reversed_tma_pipeline(jnp.asarray(xs), jnp.array(n, jnp.int32), interpret=True)
    np.testing.assert_allclose(np.asarray(got), _pipeline_want(xs, n), rtol=1e-5, atol=1e-5)
  assert "scf.for" in reversed_tma_pipeline.mlir(S((64, 64), F32), S((2,), jnp.int32))


@pytest.mark.gpu
def test_reversed_runtime_loops_gpu():
  x = np.random.default_rng(2).standard_normal(256).astype(np.float32)
  for n in (0, 1, 3, 100):
    want = 0.0
    for i in reversed(range(n, 0, -3)):
      want = want * 0.5 + x[i]
    np.testing.assert_allclose(np.asarray(reversed_pipelined(jnp.asarray(x), jnp.array([n], jnp.int32)))[0], want,
                               rtol=1e-6, atol=1e-6)
  xs = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
  for n in ([0, 0], [5, 0], [8, 3], [2, 6]):
    got = reversed_tma_pipeline(jnp.asarray(xs), jnp.array(n, jnp.int32))
    np.testing.assert_allclose(np.asarray(got), _pipeline_want(xs, n), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_reversed_range_of_a_negative_step_gpu():
  x = (np.arange(64) % 7).astype(np.float32)
  for n in _COUNTDOWNS:
    got = reversed_descending(jnp.asarray(x), jnp.array(n, jnp.int32))
    np.testing.assert_array_equal(np.asarray(got), _reversed_want(x, n))


# ---------------------------------------------------------------- x[i:] at a run-time i
@mg.mgpu_kernel(out_shape=lambda x, s: S((8, 128), x.dtype))
def tails(x, s, out):
  for r in range(8):
    out[r, :] = x[r, s[r]:100]                         # the tail slice


@mg.mgpu_kernel(out_shape=lambda x, s: S((8, 128), x.dtype))
def tails_masked(x, s, out):
  for r in range(8):
    v = x.at[r, ml.ds(s[r], 104)].load(mask=ml.arange(104) < 100 - s[r], other=0)
    out[r, :] = ml.zeros((128,), F32)
    out[r, ml.ds(0, 104)] = v


@mg.mgpu_kernel(out_shape=lambda x, s: S((64,), x.dtype))
def tail_to_end(x, s, out):
  out[...] = x[s[0]:]                                  # the open tail


def _tails_want(x, s):
  want = np.zeros((8, 128), np.float32)
  for r in range(8):
    want[r, :100 - s[r]] = x[r, s[r]:100]
  return want


_TAIL_STARTS = np.array([0, 1, 5, 64, 99, 100, 3, 50], np.int32)


def test_a_slice_from_a_run_time_start_hints_its_masked_window():
  """`x[i:]` and `x[i:100]` hinted ml.ds(i, size), the size left to the user."""
  _expect(tails, [S((8, 128), F32), S((8,), jnp.int32)], "x[r, s[r]:100]",
          "slice bounds must be static ints: the start of s[r]:100 in dimension 1 of x is a run-time value, so its"
          " length, 100 - s[r], is one too: a window's size is fixed when the kernel is compiled",
          "take a window of the 100 elements it has at most and mask it to those inside: v = x.at[r, ml.ds(s[r],"
          " 104)].load(mask=ml.arange(104) < 100 - s[r], other=0) (the elements past them are 0); for a window of"
          " static size at a run-time start, x.at[r, ml.ds(s[r], size)]")
  _expect(tail_to_end, [S((64,), F32), S((1,), jnp.int32)], "x[s[0]:]",
          "slice bounds must be static ints: the start of s[0]: in dimension 0 of x is a run-time value, so its"
          " length, 64 - s[0], is one too: a window's size is fixed when the kernel is compiled",
          "take a window of the 64 elements it has at most and mask it to those inside: v = x.at[ml.ds(s[0],"
          " 64)].load(mask=ml.arange(64) < 64 - s[0], other=0) (the elements past them are 0); for a window of"
          " static size at a run-time start, x.at[ml.ds(s[0], size)]")
  x = np.random.default_rng(1).standard_normal((8, 128)).astype(np.float32)
  got = tails_masked(jnp.asarray(x), jnp.asarray(_TAIL_STARTS), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), _tails_want(x, _TAIL_STARTS))


@mg.mgpu_kernel(out_shape=lambda x, s: S((128,), F32), grid=(1,))
def smem_tail(x, s, out):
  buf = ml.smem((128,), F32)
  ml.copy(x, buf)
  out[...] = buf[s[0]:]                                # the SMEM tail


@mg.mgpu_kernel(out_shape=lambda x, s: S((128,), F32), grid=(1,))
def smem_tail_past_its_end(x, s, out):
  buf = ml.smem((128,), F32)
  ml.copy(x, buf)
  out[...] = buf.at[ml.ds(s[0], 128)].load(mask=ml.arange(128) < 128 - s[0], other=0)    # the SMEM window


@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=(1,))
def written_tail(x, s, out):
  out[...] = ml.zeros((128,), F32)
  out[s[0]:] = x[0:64]                                 # the written tail


def test_a_tail_of_smem_or_a_written_tail_hints_what_holds_there():
  """An SMEM buffer's `buf[i:]` hinted the GMEM masked window past its end, which interpret mode rejects (and that
  error's hint spoke of an ml.where the kernel does not have); a written tail's hint said the elements past are 0."""
  specs = [S((128,), F32), S((1,), jnp.int32)]
  message = ("slice bounds must be static ints: the start of s[0]: in dimension 0 of {} is a run-time value, so its"
             " length, 128 - s[0], is one too: a window's size is fixed when the kernel is compiled")
  _expect(smem_tail, specs, "buf[s[0]:]", message.format("buf"),
          "a window of buf lies inside it, so take one of static size, buf.at[ml.ds(s[0], size)] with s[0] + size <="
          " 128; or allocate buf with room for 128 elements past its end and mask the window to those inside: v ="
          " buf.at[ml.ds(s[0], 128)].load(mask=ml.arange(128) < 128 - s[0], other=0)")
  _expect(written_tail, specs, "out[s[0]:] = x[0:64]", message.format("out"),
          "take a window of the 128 elements it has at most and mask it to those inside: out.at[ml.ds(s[0],"
          " 128)].store(v, mask=ml.arange(128) < 128 - s[0]) (the elements past them are left as they are); for a"
          " window of static size at a run-time start, out.at[ml.ds(s[0], size)]")
  x = np.arange(128, dtype=np.float32)
  with pytest.raises(mg.OutOfBoundsError) as info:
    smem_tail_past_its_end(jnp.asarray(x), jnp.array([100], jnp.int32), interpret=True)
  e = info.value
  assert e.message == "buf[100:228] is outside buf's shape (128,)", e.message
  assert e.lineno == _line_of("the SMEM window"), e
  assert e.hint == ("a masked load of SMEM reads its whole window and keeps the elements its mask turns on, so the"
                    " window must lie inside the buffer (only a GMEM window may run past the end): keep its start"
                    " where it fits, ml.minimum(start, n - size), or allocate the buffer with room for the window past"
                    " its end"), e.hint


@pytest.mark.gpu
def test_masked_tail_window_past_the_end_gpu():
  """The hinted window reaches past the row's end (s[r] + 104 > 128): masked, element by element (may fault if not)."""
  x = np.random.default_rng(1).standard_normal((8, 128)).astype(np.float32)
  got = tails_masked(jnp.asarray(x), jnp.asarray(_TAIL_STARTS))
  np.testing.assert_array_equal(np.asarray(got), _tails_want(x, _TAIL_STARTS))


# ---------------------------------------------------------------- ml.cdiv and a // b * b of narrow run-time values
@mg.mgpu_kernel(out_shape=lambda x, n: S((2,), x.dtype), grid=(1,))
def narrow_tiles(x, n, out):
  acc = 0.0
  for t in range(ml.cdiv(n[0], n[1])):                 # the narrow tile count
    acc += x[t]
  out[0] = acc
  out[1] = x[n[0] // n[1] * n[1]]                      # rounded down to a multiple: at most n[0]


@mg.mgpu_kernel(out_shape=lambda x, n: S((1,), x.dtype), grid=(1,))
def narrow_quotient_product(x, n, out):
  out[0] = x[n[2] // n[1] * n[0]]                      # the quotient times another


@pytest.mark.parametrize("dtype", [jnp.uint8, jnp.int8, jnp.int16, jnp.uint16])
def test_narrow_cdiv_and_round_down_are_not_wraps(dtype):
  """ml.cdiv(n[0], n[1]) of uint8 n was MG003 "ml.cdiv(n[0], n[1]) is computed in uint8 (0..255), where it can
  reach 65025", its hint `ml.cdiv(n[0], n[1]).astype(jnp.int32) * n[1]` the compiler's own arithmetic: its
  product q * b is at most a; so is `a // b * b` (a division by a divisor that may be 0 divides by 1 at least)."""
  narrow_tiles.check(S((1 << 16,), F32), S((2,), dtype))
  name = jnp.dtype(dtype).name
  info = jnp.iinfo(dtype)
  past = info.max * info.max
  _expect(narrow_quotient_product, [S((1 << 16,), F32), S((3,), dtype)], "n[2] // n[1] * n[0]",
          _wrap_message("n[2] // n[1] * n[0]", name, f"{info.min}..{info.max}", past, "the window",
                        _line_of("the quotient times another"), "an index"),
          f"widen it before the arithmetic: (n[2] // n[1]).astype(jnp.int32) * n[0] (an index in {name} is widened to"
          " int32 only where it is used, after the arithmetic)")


def test_narrow_cdiv_runs_and_names_itself_dividing_by_zero():
  x = np.arange(256, dtype=np.float32)
  got = narrow_tiles(jnp.asarray(x), jnp.array([250, 7], U8), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), [x[:36].sum(), x[245]])
  # a zero divisor: jnp's 250 // 0 (255 in uint8), so no tile and x[255 * 0] (MG950 before probe 57a)
  got = narrow_tiles(jnp.asarray(x), jnp.array([250, 0], U8), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), [0.0, x[0]])


# ---------------------------------------------------------------- a loop bound of a one-element tile
@mg.mgpu_kernel(out_shape=lambda x, n: S((1,), F32), grid=(1,))
def tile_bound(x, n, out):
  acc = 0.0
  for i in range(n[...]):                              # the tile bound
    acc += x[i]
  out[0] = acc


def test_a_one_element_tile_as_a_loop_bound_is_named():
  """n[...] of shape (1,) was "got a register tensor of shape (1,)", its hint range(ml.max(v)) (no such v)."""
  _expect(tile_bound, [S((64,), F32), S((1,), jnp.int32)], "range(n[...])",
          "a loop bound must be an integer scalar, got n[...] of shape (1,)",
          "read one element, range(n[0]), or reduce the tensor, range(ml.max(n[...]))")


# ---------------------------------------------------------------- a narrow carry widened in the loop
@mg.mgpu_kernel(out_shape=lambda x, s: S((1,), F32), grid=(1,))
def carry_widened(x, s, out):
  acc = 0.0
  i = s[0]
  while i < s[1]:
    acc += x[i]
    i = i.astype(jnp.int32) + 7                        # the widened carry
  out[0] = acc


@mg.mgpu_kernel(out_shape=lambda x, s: S((1,), F32), grid=(1,))
def carry_widened_in_branch(x, s, out):
  acc = 0.0
  i = s[0]
  for k in range(4):
    if x[k] > 0.0:
      i = i.astype(jnp.int32) + 7                      # the branch's widened carry
    acc += x[i]
  out[0] = acc


def test_a_narrow_carry_widened_in_the_loop_is_widened_before_it():
  """MG005's hint was "convert it back at the end of the body: i = i.astype(jnp.uint8)", which wraps again."""
  hint = ("widen it before the loop: i = i.astype(jnp.int32) (a loop carries a value in the type it enters with;"
          " converting it back to uint8 wraps as that type does)")
  message = "i enters the loop as a uint8 scalar but an iteration makes it an int32 scalar"
  specs = [S((1 << 16,), F32), S((2,), U8)]
  _expect(carry_widened, specs, "i = i.astype(jnp.int32) + 7                        # the widened", message, hint,
          cls=mg.LoopCarryTypeError)
  _expect(carry_widened_in_branch, specs, "i = i.astype(jnp.int32) + 7                      # the branch's", message,
          hint, cls=mg.LoopCarryTypeError)


@pytest.mark.gpu
def test_narrow_counters_and_tiles_gpu():
  """The kernels the narrow-index check now passes, on the GPU: uint8 counters, ml.cdiv of uint8 values."""
  x = np.random.default_rng(0).standard_normal(1024).astype(np.float32)
  for n in ([0, 0, 0, 0], [7, 3, 98, 5], [255, 255, 200, 3]):
    got = counters_in_range(jnp.asarray(x), jnp.array(n, U8))
    np.testing.assert_allclose(np.asarray(got), _counters_want(x, n), rtol=1e-5, atol=1e-5)
  x = np.arange(256, dtype=np.float32)
  got = narrow_tiles(jnp.asarray(x), jnp.array([250, 7], U8))
  np.testing.assert_array_equal(np.asarray(got), [x[:36].sum(), x[245]])
  got = loop_index_narrowed(jnp.asarray(x), jnp.array([10], U8))
  want = x[np.arange(64) * 2]
  want[:10] += x[1:11]
  np.testing.assert_array_equal(np.asarray(got), want)
