"""Probe 28e (earlier probes' leftovers, fixed as classes): bool * and max/min, a bool scalar printed,
(n, 1) columns alone and their transposes, empty register slices quoted as written, kernels whose
results need no derivative, masked-window hints that keep a load a load, static shifts past the width."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


def _data(shape, dtype, seed=0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape) * 10, dtype)


# ---------------------------------------------------------------- (n, 1) columns alone, their transposes
@mg.mgpu_kernel(out_shape=lambda x: x)
def column_affine(x, o):
  o[...] = x[...] * 2.0 + 1.0


@mg.mgpu_kernel(out_shape=lambda x: S((1,), x.dtype))
def column_total(x, o):
  o[...] = ml.sum(x[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[::-1], x.dtype))
def flipped(x, o):
  o[...] = x[...].T


@mg.mgpu_kernel(out_shape=lambda v: S((1, v.shape[0]), v.dtype))
def column_then_row(v, o):
  o[...] = v[...][:, None].T


@mg.mgpu_kernel(out_shape=lambda v: S((1, v.shape[0]), v.dtype))
def column_reshaped_to_row(v, o):
  o[...] = v[...][:, None].reshape((1, v.shape[0]))


@pytest.mark.parametrize("n", [8, 64, 136, 200])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float16])
def test_short_unit_axis_tensors_alone_and_transposed(n, dtype):
  x = _data((n, 1), dtype, n)
  xn = np.asarray(x, np.float32)
  for k, arg, want in [(column_affine, x, xn * 2 + 1), (column_total, x, xn.sum(0)), (flipped, x, xn.T),
                       (flipped, x.T, xn), (column_then_row, x[:, 0], xn.T),
                       (column_reshaped_to_row, x[:, 0], xn.T)]:
    got = np.asarray(k(arg, interpret=True), np.float32)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)
    assert "mosaic_gpu" in _export(k, S(arg.shape, arg.dtype))


# ---------------------------------------------------------------- an empty register slice, as written
@mg.mgpu_kernel(out_shape=lambda x: x)
def empty_slice(x, o):
  v = x[...]
  w = v[0:0]
  o[...] = v


@mg.mgpu_kernel(out_shape=lambda x: x)
def empty_slice_of_read(x, o):
  o[...] = x[...][5:5] + 1.0


def test_empty_register_slice_quotes_the_users_expression():
  expect(empty_slice, [S((128,), F32)], mg.IndexOutOfBoundsError, "v[0:0]",
         "v[0:0] selects no elements along axis 0 (0:0 of 128)")
  expect(empty_slice_of_read, [S((128,), F32)], mg.IndexOutOfBoundsError, "x[...][5:5]",
         "x[...][5:5] selects no elements along axis 0 (5:5 of 128)")


# ---------------------------------------------------------------- bool * and max/min: and, or, and
@mg.mgpu_kernel(out_shape=lambda a, b: S((4, a.shape[0]), jnp.int32))
def bool_logic(a, b, o):
  x = a[...] > 0
  y = b[...] > 0
  o.at[0][...] = (x * y).astype(jnp.int32)
  o.at[1][...] = ml.maximum(x, y).astype(jnp.int32)
  o.at[2][...] = ml.minimum(x, y).astype(jnp.int32)
  o.at[3][...] = (ml.maximum(x, False) * True).astype(jnp.int32)


@mg.mgpu_kernel(out_shape=lambda a: a)
def bool_scalar_logic(a, o):
  i = ml.program_id(0)
  both = (i >= 0) * (i < 5)
  either = ml.maximum(i > 0, i < 5)
  o[...] = a[...] + both.astype(jnp.int32) + ml.minimum(either, i >= 0).astype(jnp.int32) * 10


def test_bool_mul_max_min_are_logic_as_numpy():
  rng = np.random.default_rng(3)
  a, b = (jnp.asarray(rng.integers(-2, 3, 128), jnp.int32) for _ in range(2))
  x, y = np.asarray(a) > 0, np.asarray(b) > 0
  assert (x * y).dtype == np.maximum(x, y).dtype == np.bool_
  want = np.stack([x * y, np.maximum(x, y), np.minimum(x, y), np.maximum(x, False) * True]).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(bool_logic(a, b, interpret=True)), want)
  assert "mosaic_gpu" in _export(bool_logic, S((128,), jnp.int32), S((128,), jnp.int32))
  np.testing.assert_array_equal(np.asarray(bool_scalar_logic(a, interpret=True)), np.asarray(a) + 11)
  assert "mosaic_gpu" in _export(bool_scalar_logic, S((128,), jnp.int32))


# ---------------------------------------------------------------- a bool scalar printed: True / False
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def print_flags(x, o):
  i = ml.program_id(0)
  first = i == 0
  print("first", first, f"{first:d} {first:.1f} {first:>3}", "%d {}")
  rows = ml.ds(i * 128, 128)
  o.at[rows][...] = x.at[rows][...]


def test_bool_scalar_prints_true_false_in_interpret_mode_and_on_the_gpu(capsys):
  print_flags(jnp.zeros((256,), F32), interpret=True)
  out = capsys.readouterr().out
  assert "[program (0, 0, 0)] first True 1 1.0   1 %d {}" in out
  assert "[program (1, 0, 0)] first False 0 0.0   0 %d {}" in out
  text = print_flags.mlir(S((256,), F32))
  # printf's words for the same line: True/False as four characters and an 'e' (the hex digit 14,
  # printed as nothing when 0 at precision 0); a bool as a float is 1.0, not sitofp's -1.0
  assert 'gpu.printf "first %c%c%c%c%.0llx %lld %.1f %3lld %%d {}\\0A"' in text
  assert "sitofp" not in text
  assert "mosaic_gpu" in _export(print_flags, S((256,), F32))


@pytest.mark.gpu
def test_bool_scalar_prints_true_false_on_the_gpu(capfd):
  jax.block_until_ready(print_flags(jnp.zeros((256,), F32)))
  out = capfd.readouterr().out
  assert "first True 1 1.0   1 %d {}" in out and "first False 0 0.0   0 %d {}" in out


# ---------------------------------------------------------------- results that need no derivative
@mg.mgpu_kernel(out_shape=lambda x, i: (x, i), grid=(2,))
def scaled_and_counted(x, i, o, oi):
  rows = ml.ds(ml.program_id(0) * 128, 128)
  o.at[rows][...] = x.at[rows][...] * 2.0
  oi.at[rows][...] = i.at[rows][...] + 1


def _uses(v, interpret=True):
  return scaled_and_counted(v, jnp.arange(256, dtype=jnp.int32), interpret=interpret)


@pytest.mark.parametrize("jit", [False, True])
def test_kernel_results_that_need_no_derivative_differentiate(jit):
  x = jnp.arange(256, dtype=F32) / 16
  sg = jax.lax.stop_gradient
  maybe_jit = jax.jit if jit else (lambda f: f)
  aux = maybe_jit(jax.value_and_grad(lambda v: ((v * v).sum(), _uses(v)), has_aux=True))
  (val, (o, oi)), g = aux(x)
  np.testing.assert_allclose(g, 2 * x)
  np.testing.assert_allclose(o, 2 * x)
  np.testing.assert_array_equal(oi, np.arange(256) + 1)
  g = maybe_jit(jax.grad(lambda v: (v * sg(_uses(v)[0])).sum() + _uses(v)[1].sum().astype(F32)))(x)
  np.testing.assert_allclose(g, 2 * x)
  g = maybe_jit(jax.vmap(jax.grad(lambda v: (v * sg(_uses(v)[0])).sum())))(jnp.stack([x, x + 1]))
  np.testing.assert_allclose(g, 2 * jnp.stack([x, x + 1]))
  h = jax.jit(jax.hessian(lambda v: (v[:4] ** 3 * sg(_uses(v)[0][:4])).sum()))(x)
  np.testing.assert_allclose(np.diagonal(h)[:4], 6 * x[:4] * 2 * x[:4], rtol=1e-5)
  exported = jax.export.export(jax.jit(jax.grad(lambda v: (v * sg(_uses(v, None)[0])).sum())),
                               platforms=["cuda"])(S((256,), F32)).mlir_module()
  assert "mosaic_gpu" in exported


@pytest.mark.parametrize("how", ["grad", "grad_jit", "vmap_grad", "jvp", "linearize"])
def test_a_used_derivative_of_a_kernel_is_still_mg009(how):
  x = jnp.arange(256, dtype=F32)
  loss = lambda v: _uses(v)[0].sum()
  run = {"grad": lambda: jax.grad(loss)(x), "grad_jit": lambda: jax.jit(jax.grad(loss))(x),
         "vmap_grad": lambda: jax.vmap(jax.grad(loss))(jnp.stack([x, x])),
         "jvp": lambda: jax.jvp(lambda v: _uses(v)[0], (x,), (x,)),
         "linearize": lambda: jax.linearize(lambda v: _uses(v)[0], x)[1](x)}[how]
  with pytest.raises(mg.DifferentiationError) as info:
    run()
  assert info.value.message == ("jax cannot differentiate the kernel scaled_and_counted: mgpu_dsl kernels"
                                " have no automatic derivative")
  assert info.value.lineno == scaled_and_counted.fn.__code__.co_firstlineno + 1


# ---------------------------------------------------------------- masked-window hints keep the access
@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), x.dtype))
def read_at_runtime_start(x, n: ml.scalar, o):
  o[...] = x[n:n + 128]


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), x.dtype))
def read_at_runtime_start_fixed(x, n: ml.scalar, o):     # its hint, followed
  o[...] = x.at[ml.ds(n, 128)].load(mask=n + ml.arange(128) < 200, other=0)


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), x.dtype))
def read_runtime_length(x, n: ml.scalar, o):
  o[...] = x[ml.ds(0, n)][:128]


@mg.mgpu_kernel(out_shape=lambda x, n: S((200,), x.dtype))
def write_at_runtime_start(x, n: ml.scalar, o):
  o[0:72] = x[0:72]
  o[n:n + 128] = x[72:200]


@mg.mgpu_kernel(out_shape=lambda x, n: S((200,), x.dtype))
def write_at_runtime_start_fixed(x, n: ml.scalar, o):    # its hint, followed
  o[0:72] = x[0:72]
  v = x[72:200]
  o.at[ml.ds(n, 128)].store(v, mask=n + ml.arange(128) < 200)


def test_masked_window_hints_rewrite_the_users_own_access():
  specs = [S((200,), F32), S((), jnp.int32)]
  x = _data((200,), F32)      # (n:n + 128 is ml.ds(n, 128) since probe 39a; past the end, its OutOfBoundsError)
  np.testing.assert_array_equal(np.asarray(read_at_runtime_start(x, 40, interpret=True)), np.asarray(x)[40:168])
  with pytest.raises(mg.OutOfBoundsError):
    read_at_runtime_start(x, 100, interpret=True)
  expect(read_runtime_length, specs, mg.KernelTypeError, "x[ml.ds(0, n)]",
         "ml.ds size must be a positive static int, got n, a run-time value: a window's size is fixed when the"
         " kernel is compiled",
         hint="take a window of fixed size and mask it to the run-time length:"
              " v = x.at[ml.ds(0, 200)].load(mask=ml.arange(200) < n, other=0)")
  np.testing.assert_array_equal(np.asarray(write_at_runtime_start(x, 72, interpret=True)), np.asarray(x))
  np.testing.assert_array_equal(np.asarray(read_at_runtime_start_fixed(x, 100, interpret=True)),
                                np.concatenate([np.asarray(x)[100:], np.zeros(28, np.float32)]))
  np.testing.assert_array_equal(np.asarray(write_at_runtime_start_fixed(x, 72, interpret=True)), np.asarray(x))
  for k in (read_at_runtime_start_fixed, write_at_runtime_start_fixed):
    assert "mosaic_gpu" in _export(k, *specs)


# ---------------------------------------------------------------- static shifts past the width: jnp's result
@mg.mgpu_kernel(out_shape=lambda n: n)
def shifted_by(n, out, *, c: ml.constexpr, op: ml.constexpr):
  out[...] = n[...] >> c if op == ">>" else n[...] << c


@mg.mgpu_kernel(out_shape=lambda n: S((2,), n.dtype))
def scalar_shifted_by(n, out, *, c: ml.constexpr):
  s = ml.sum(n[...])
  out[0] = s << c
  out[1] = s >> c


@pytest.mark.parametrize("dtype,c", [(jnp.int16, 65537), (jnp.int16, 16), (jnp.int16, 40), (jnp.int32, 40),
                                     (jnp.int32, 32), (jnp.int32, -1), (jnp.uint32, 33), (jnp.uint16, 70000),
                                     (jnp.int32, 31)], ids=str)
@pytest.mark.parametrize("op", ["<<", ">>"])
def test_a_static_shift_past_the_bit_width_is_jnps(dtype, c, op):
  n = jnp.asarray(np.random.default_rng(1).integers(-40000, 40000, 128), jnp.int32).astype(dtype)
  want = n >> c if op == ">>" else n << c           # jnp: the int converted to the type, then lax's shift
  np.testing.assert_array_equal(np.asarray(shifted_by(n, c=c, op=op, interpret=True)), np.asarray(want))
  assert "mosaic_gpu" in _export(lambda p: shifted_by(p, c=c, op=op), S((128,), dtype))


def test_a_static_shift_of_a_scalar_past_the_bit_width_is_jnps():
  n = jnp.arange(128, dtype=jnp.int32) - 100
  s = n.sum()
  np.testing.assert_array_equal(np.asarray(scalar_shifted_by(n, c=40, interpret=True)), [s << 40, s >> 40])
  assert "mosaic_gpu" in _export(lambda p: scalar_shifted_by(p, c=40), S((128,), jnp.int32))


@mg.mgpu_kernel(out_shape=lambda x: S((256,), x.dtype), grid=(2,))
def tail_read(x, o):
  i = ml.program_id(0)
  o[ml.ds(i * 128, 128)] = x[ml.ds(i * 128, 128)]


@mg.mgpu_kernel(out_shape=lambda x: S((256,), x.dtype), grid=(2,))
def tail_read_fixed(x, o):                                # its hint, followed
  i = ml.program_id(0)
  o[ml.ds(i * 128, 128)] = x.at[ml.ds(i * 128, 128)].load(mask=i * 128 + ml.arange(128) < x.shape[0], other=0)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype))
def static_past_the_end(x, o):
  o[...] = x[ml.ds(0, 128)]


def test_out_of_bounds_window_hints_mask_the_users_window_and_keep_a_read_a_read():
  expect(tail_read, [S((200,), F32)], mg.IndexOutOfBoundsError, "x[ml.ds(i * 128, 128)]",
         "this register read touches x[128:256] in program (1, 0, 0), outside x's shape (200,)",
         hint="mask it to the elements inside: x.at[ml.ds(i * 128, 128)].load(mask=i * 128 + ml.arange(128) <"
              " x.shape[0], other=0); or guard the access (if i * 128 + 128 <= 200:) or clamp its start"
              " (ml.minimum(i * 128, 72))")
  expect(static_past_the_end, [S((100,), F32)], mg.IndexOutOfBoundsError, "x[ml.ds(0, 128)]",
         "ml.ds(0, 128) is out of bounds for dimension 0 of x (size 100)",
         hint="a register read must stay inside the array: mask it to the elements inside,"
              " x.at[ml.ds(0, 128)].load(mask=ml.arange(128) < x.shape[0], other=0), or copy the window with ml.copy"
              " (TMA reads zeros past the end and drops writes there)")     # (the user's window: probe 50b)
  x = _data((200,), F32)
  np.testing.assert_array_equal(np.asarray(tail_read_fixed(x, interpret=True)),
                                np.concatenate([np.asarray(x), np.zeros(56, np.float32)]))
  assert "mosaic_gpu" in _export(tail_read_fixed, S((200,), F32))
