"""Probe 46f: the kernel as a JAX citizen, part five. A jax.vmap whose batch (nested batches multiplied) is past
the 65535 CTAs a launch takes along the grid axis it folds into runs as a jax.lax.map over chunks, one launch each
(mgpu_dsl/batching.py; it was MG007 saying to chunk it by hand); what a jax.custom_vjp or jax.custom_jvp rule
defined with symbolic_zeros=True hands over in place of an array (a SymbolicZero, a CustomVJPPrimal), and an
abstract value (x.aval), passed to a kernel are an MG006 at the call (mgpu_dsl/stand_ins.py; a raw TypeError
from inside the interpreter or JAX before)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend import hw

F32 = jnp.float32
S = jax.ShapeDtypeStruct
HERE = __file__
Zero = jax.custom_derivatives.SymbolicZero


def line_of(text: str) -> int:
  """The line of this file holding `text`."""
  lines = open(HERE).read().splitlines()
  return next(i + 1 for i, l in enumerate(lines) if text in l and "line_of(" not in l)


def col_of(text: str, sub: str) -> int:
  return open(HERE).read().splitlines()[line_of(text) - 1].index(sub)


def rand(shape, seed):
  return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------- batches past a grid axis's CTAs
@mg.mgpu_kernel(out_shape=lambda x, b: x, grid=(1,))
def row_bias(x, b, out):
  """One token's row: the kernel a user vmaps over every token of a batch."""
  out[...] = x[...] * 2 + b[...]


@mg.mgpu_kernel(out_shape=lambda x: S((), x.dtype), grid=(1,))
def row_total(x, out):
  out[...] = ml.sum(x[...])


@mg.mgpu_kernel(out_shape=lambda c, v: c, input_output_aliases={0: 0}, grid=(1,))
def put_first(c, v, out):
  out[0] = v[...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 16, 1, 2))
def halves_along_z(x, out):
  """Its grid uses z, so a batch folds into y."""
  r = ml.ds(ml.program_id(0) * 16, 16)
  c = ml.ds(ml.program_id(2) * 32, 32)
  out.at[r, c][...] = x.at[r, c][...] * 3


@pytest.fixture
def small_grid(monkeypatch):
  """CUDA's 65535 CTAs along y and z as 8, so that a batch of 20 runs as chunks in interpret mode at once."""
  monkeypatch.setattr(hw, "MAX_GRID", (2 ** 31 - 1, 8, 8))


def test_a_vmap_past_the_grid_axis_limit_runs_in_chunks(small_grid):
  """jax.vmap of 20 rows, 8 CTAs a launch: launches of 8, 8 and 4, an unbatched input shared by all."""
  x, b = rand((20, 64), 0), rand((64,), 1)
  y = jax.vmap(lambda x: row_bias(x, b, interpret=True))(x)
  np.testing.assert_allclose(y, 2 * x + b, rtol=1e-6)
  y = jax.jit(jax.vmap(lambda x: row_total(x, interpret=True), in_axes=1))(x.T)
  np.testing.assert_allclose(y, x.sum(1), rtol=1e-5, atol=1e-5)


def test_nested_vmaps_past_the_limit_together_chunk_the_outer_batch(small_grid):
  """5 x 4 = 20 CTAs along z: the outer batch runs two elements a launch (8 CTAs), the inner one whole; a batch
  folded into y (the kernel's grid uses z) the same."""
  x = rand((5, 4, 64), 2)
  y = jax.vmap(jax.vmap(lambda x, b: row_bias(x, b, interpret=True), in_axes=(0, None)))(x, x[:, 0])
  np.testing.assert_allclose(y, 2 * x + x[:, :1], rtol=1e-6)
  x = rand((11, 32, 64), 3)
  np.testing.assert_allclose(jax.vmap(lambda x: halves_along_z(x, interpret=True))(x), 3 * x, rtol=1e-6)


def test_an_aliased_output_past_the_limit_keeps_its_inputs_other_elements(small_grid):
  c, v = rand((19, 8), 4), np.arange(19, dtype=np.float32)
  y = jax.jit(jax.vmap(lambda c, v: put_first(c, v, interpret=True)))(c, v)
  np.testing.assert_allclose(y[:, 0], v)
  np.testing.assert_allclose(y[:, 1:], c[:, 1:])
  y = jax.vmap(lambda c, v: put_first(c, v, interpret=True), in_axes=(None, 0))(c[0], v)   # (broadcast, chunked)
  np.testing.assert_allclose(y[:, 0], v)
  np.testing.assert_allclose(y[:, 1:], np.broadcast_to(c[0, 1:], (19, 7)))


@mg.mgpu_kernel(out_shape=lambda x, at: x, grid=(1,))
def shifted(x, at, out):
  out.at[ml.ds(0, 128)][...] = x.at[ml.ds(at[...], 128)][...]      # past the end
  out.at[ml.ds(128, 128)][...] = x.at[ml.ds(0, 128)][...]


def test_a_run_time_error_in_a_chunk_says_where_its_batch_element_counts_from(small_grid):
  """Element 13 of 20 runs as element 5 of the second launch of 8: the interpreter sees the launch alone."""
  at = np.zeros(20, np.int32)
  at[13] = 200
  with pytest.raises(mg.OutOfBoundsError) as e:
    jax.vmap(lambda x, at: shifted(x, at, interpret=True))(rand((20, 256), 14), at)
  assert e.value.lineno == line_of("# past the end")
  assert e.value.notes[0] == "in program (0, 0, 0) of batch element 5"
  assert e.value.notes[-1] == ("jax.vmap's batch of 20 runs as launches of at most 8: the batch element named counts"
                               " from its launch's first")


def test_a_vmap_of_70001_rows_exports_for_cuda_as_chunks():
  """Near CUDA's own limit: a launch of 65280 rows (255 * 256, so each launch's slice starts 256-byte aligned) in a
  loop and one of the remaining 4721."""
  e = jax.export.export(jax.jit(jax.vmap(row_bias, in_axes=(0, None))), platforms=["cuda"])(
      S((70001, 32), F32), S((32,), F32))
  text = e.mlir_module()
  assert text.count("stablehlo.custom_call @mosaic_gpu") == 2
  assert "tensor<1x65280x32xf32>" in text and "tensor<4721x32xf32>" in text


@pytest.mark.gpu
def test_gpu_vmaps_past_the_grid_axis_limit_match_numpy():
  x, b = rand((70001, 32), 5), rand((32,), 6)
  np.testing.assert_allclose(jax.jit(jax.vmap(row_bias, in_axes=(0, None)))(x, b), 2 * x + b, rtol=1e-6)
  x = rand((300, 250, 32), 7)
  y = jax.jit(jax.vmap(jax.vmap(row_total)))(x)
  np.testing.assert_allclose(y, x.sum(2), rtol=1e-4, atol=1e-4)
  c, v = rand((66000, 8), 8), np.arange(66000, dtype=np.float32)
  y = jax.jit(jax.vmap(put_first), donate_argnums=0)(jnp.asarray(c), v)
  np.testing.assert_allclose(y[:, 0], v)
  np.testing.assert_allclose(y[:, 1:], c[:, 1:])


# ---------------------------------------------------------------- values standing in for arrays
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def double(x, out):
  r = ml.ds(ml.program_id(0) * 128, 128)
  out.at[r][...] = x.at[r][...] * 2


def with_symbolic_zeros(interpret, guarded=False):
  """y = (2 x, x), its backward calling the kernel on the first output's cotangent."""
  @jax.custom_vjp
  def f(x):
    return double(x, interpret=interpret), x * 1

  def fwd(x):
    return (double(x.value, interpret=interpret), x.value * 1), None

  def bwd(_, g):
    g0, g1 = g
    if guarded and isinstance(g0, Zero):
      return (g1,)
    return (double(g0, interpret=interpret) + g1,)        # g0 symbolic

  f.defvjp(fwd, bwd, symbolic_zeros=True)
  return f


SYMBOLIC = ("double: input 0 (x) is a symbolic zero (jax.custom_derivatives.SymbolicZero of float32[256]), which"
            " holds no numbers: a rule defined with symbolic_zeros=True receives one for each cotangent (or tangent)"
            " that is known to be zero")
SYMBOLIC_HINT = ("leave its term out where it is zero, `if isinstance(x, jax.custom_derivatives.SymbolicZero)`, or"
                 " make it an array first: jnp.zeros(x.shape, x.dtype)")


def test_a_symbolic_zero_cotangent_passed_to_a_kernel_is_named_at_the_call():
  """The loss uses only the second output, so the first one's cotangent is a SymbolicZero (a raw TypeError in
  the interpreter: "float() argument must be ... not 'SymbolicZero'"); the hint followed, the gradient."""
  x = rand((256,), 9)
  f = with_symbolic_zeros(True)
  with pytest.raises(mg.SignatureError) as e:
    jax.jit(jax.grad(lambda x: f(x)[1].sum()))(x)
  assert e.value.code == "MG006"
  assert (e.value.filename, e.value.lineno) == (HERE, line_of("# g0 symbolic"))
  assert e.value.col_offset == col_of("# g0 symbolic", "double(g0")
  assert e.value.message == SYMBOLIC and e.value.hint == SYMBOLIC_HINT
  g = jax.jit(jax.grad(lambda x: sum(y.sum() for y in f(x))))(x)     # both used: arrays, no error
  np.testing.assert_allclose(g, np.full_like(x, 3))
  g = jax.jit(jax.grad(lambda x: with_symbolic_zeros(True, guarded=True)(x)[1].sum()))(x)
  np.testing.assert_allclose(g, np.ones_like(x))


def test_a_symbolic_zero_is_named_when_exporting_for_cuda_too():
  """The compiled call: JAX's "Error interpreting argument to custom_jvp_call as a JAX value" before."""
  f = with_symbolic_zeros(None)
  with pytest.raises(mg.SignatureError) as e:
    jax.export.export(jax.jit(jax.grad(lambda x: f(x)[1].sum())), platforms=["cuda"])(S((256,), F32))
  assert e.value.message == SYMBOLIC
  assert e.value.lineno == line_of("# g0 symbolic")


def test_a_symbolic_zero_tangent_of_a_custom_jvp_rule():
  @jax.custom_jvp
  def f(x, y):
    return double(x, interpret=True) + y

  def rule(p, t):
    return f(*p), double(t[0], interpret=True) + t[1]      # t[0] symbolic

  f.defjvp(rule, symbolic_zeros=True)
  x = rand((256,), 10)
  with pytest.raises(mg.SignatureError) as e:
    jax.jvp(lambda y: f(x, y), (x,), (x,))
  assert e.value.message == SYMBOLIC
  assert (e.value.lineno, e.value.col_offset) == (line_of("# t[0] symbolic"), col_of("# t[0] symbolic", "double(t"))


def test_a_custom_vjp_primal_passed_to_a_kernel_says_to_pass_its_value():
  @jax.custom_vjp
  def f(x):
    return double(x, interpret=True)

  def fwd(x):
    return double(x, interpret=True), None        # x wrapped

  f.defvjp(fwd, lambda _, g: (2 * g,), symbolic_zeros=True)
  with pytest.raises(mg.SignatureError) as e:
    jax.grad(lambda x: f(x).sum())(rand((256,), 11))
  assert e.value.message == ("double: input 0 (x) is a jax.custom_derivatives.CustomVJPPrimal: a forward defined with"
                             " symbolic_zeros=True receives each input wrapped with whether it is differentiated")
  assert e.value.hint == "pass its array, x.value (x.perturbed says whether jax differentiates it)"
  assert e.value.lineno == line_of("# x wrapped")


def test_an_abstract_value_passed_to_a_call_says_to_check_it():
  """x.aval in a call (a raw TypeError inside the interpreter); kernel.check takes it, as a spec."""
  aval = jnp.zeros((256,), F32).aval
  with pytest.raises(mg.SignatureError) as e:
    double(aval, interpret=True)
  assert e.value.message == ("double: input 0 is an abstract value (ShapedArray float32[256]); a call runs the kernel"
                             " on arrays")
  assert "double.check(*specs)" in e.value.hint
  double.check(aval)


# ---------------------------------------------------------------- MG009's note: the call jax differentiates
def differentiated_note(fn, *args):
  """The MG009 that jax.grad of `fn` raises, and its note's location (file, line, column)."""
  with pytest.raises(mg.DifferentiationError) as e:
    fn(*args)
  note = next(n for n in e.value.notes if n.endswith(": the call that jax differentiates"))
  file, line, col = note.rsplit(": the call", 1)[0].rsplit(":", 2)
  return e.value, (file, int(line), int(col))


@pytest.mark.parametrize("how", ["scan", "cond", "fori_loop", "checkpoint"])
def test_the_call_jax_differentiates_is_the_kernels_call_inside_lax_control_under_jit(how):
  """Under jax.jit, JAX differentiates these bodies as jaxprs, after the user's call has returned: the note pointed
  into Python's contextlib (scan, cond) or at the jax.jit line (checkpoint), not at the kernel's call."""
  x = rand((256,), 12)
  bodies = {
      "scan": lambda x: jax.lax.scan(lambda c, _: (double(c, interpret=True), None), x, None, length=2)[0],  # scan
      "cond": lambda x: jax.lax.cond(x[0] > 9, lambda x: x, lambda x: double(x, interpret=True), x),  # cond
      "fori_loop": lambda x: jax.lax.fori_loop(0, 2, lambda i, x: double(x, interpret=True), x),  # fori_loop
      "checkpoint": jax.checkpoint(lambda x: double(x, interpret=True)),  # checkpoint
  }
  e, at = differentiated_note(jax.jit(jax.grad(lambda x: bodies[how](x).sum())), x)
  assert e.code == "MG009" and e.message.startswith("jax cannot differentiate the kernel double")
  assert at == (HERE, line_of(f"# {how}"), col_of(f"# {how}", "double(x" if how != "scan" else "double(c"))


def test_a_kernel_called_on_a_tangent_notes_the_call_jax_transposes():
  """MG009 "cannot transpose" named the kernel's def only: which of its calls (here the tangent's, not the
  primal's) JAX runs backwards was for the user to find."""
  @jax.custom_jvp
  def f(x):
    return double(x, interpret=True)

  f.defjvp(lambda p, t: (f(p[0]), double(t[0], interpret=True)))      # the tangent's call
  x = rand((256,), 13)
  for grad in (jax.grad(lambda x: f(x).sum()),
               jax.jit(jax.grad(lambda x: jax.lax.scan(lambda c, _: (f(c), None), x, None, length=2)[0].sum()))):
    with pytest.raises(mg.DifferentiationError) as e:
      grad(x)
    assert e.value.message.startswith("jax cannot transpose the kernel double")
    at = (line_of("# the tangent's call"), col_of("# the tangent's call", "double(t"))
    assert e.value.notes == (f"{HERE}:{at[0]}:{at[1]}: the call that jax transposes",)


# ---------------------------------------------------------------- a Python bool for a 0-d input
@mg.mgpu_kernel(out_shape=lambda x, on: x, grid=(2,))
def gated(x, on, out):
  r = ml.ds(ml.program_id(0) * 128, 128)
  if on[...]:
    out.at[r][...] = x.at[r][...] * 2
  else:
    out.at[r][...] = x.at[r][...] * on[...]


def test_a_python_bool_for_a_0d_input_runs_eagerly_as_under_jit():
  """jax.jit(gated)(x, True) hands the kernel a bool array; gated(x, True) called eagerly was MG006 "kernel inputs
  are arrays" (bools were left out of the Python numbers an eager call takes, for `interpret` by position)."""
  x = rand((256,), 15)
  for on in (True, False):
    want = np.asarray(jax.jit(lambda x, on: gated(x, on, interpret=True))(x, on))
    np.testing.assert_allclose(want, x * 2 if on else x * 0)
    np.testing.assert_allclose(gated(x, on, interpret=True), want)
  y = jax.vmap(lambda x: gated(x, True, interpret=True))(np.stack([x, -x]))
  np.testing.assert_allclose(y, np.stack([x, -x]) * 2)
  np.testing.assert_allclose(row_bias(x, True, interpret=True), x * 2 + 1)     # read whole: broadcast, as jnp's


@pytest.mark.gpu
def test_gpu_a_python_bool_for_a_0d_input():
  x = rand((256,), 16)
  np.testing.assert_allclose(gated(x, True), x * 2)
  np.testing.assert_allclose(gated(x, False), x * 0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x, *, rows: (x.shape[0] // rows,))
def blocked(x, out, *, rows: ml.constexpr):
  r = ml.ds(ml.program_id(0) * rows, rows)
  out.at[r][...] = x.at[r][...] * 2


def test_a_constexpr_computed_with_jnp_in_a_jitted_function_is_hinted_to_python():
  """jnp.minimum(128, x.shape[0]) under jax.jit is a traced value though it reads only shapes: the hint named only
  static_argnames, which cannot help a value the function computes."""
  x = rand((256,), 17)
  with pytest.raises(mg.SignatureError) as e:
    jax.jit(lambda x: blocked(x, rows=jnp.minimum(128, x.shape[0]), interpret=True))(x)
  assert e.value.message == ("blocked: constexpr rows is a traced value (int32[]); a constexpr must be a Python value"
                             " known when the kernel is compiled")
  assert e.value.hint.endswith("or pass a Python value (one your function computes with jnp, jnp.minimum(128,"
                               " x.shape[0]), is traced too, shapes or not: compute it with Python or NumPy,"
                               " min(128, x.shape[0]))")
  y = jax.jit(lambda x: blocked(x, rows=min(128, x.shape[0]), interpret=True))(x)    # the hint followed
  np.testing.assert_allclose(y, 2 * x)


def test_vmap_chunks_start_at_256_byte_aligned_offsets():
  """The H200 refused a chunked vmap ('Input buffer 0 is not 256-byte aligned'): XLA passes each launch its chunk
  as a slice of the whole array, so a chunk of 65535 rows of 128 bytes started the second launch mid-line. Chunks
  are a multiple of 256 / gcd(256, inner) elements, so every slice starts at a multiple of 256 bytes."""
  from mgpu_dsl import batching
  for inner in (1, 2, 3, 5, 8, 250, 255, 256):
    levels = [(inner, ())] if inner > 1 else []
    chunk = batching._chunk(1, 70001 * 300, levels)
    assert chunk * inner <= 65535 and chunk > 0
    assert chunk * inner % 256 == 0, (inner, chunk)
  assert batching._chunk(1, 100, []) is None
