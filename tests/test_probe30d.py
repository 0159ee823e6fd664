"""Probe 30d (the first hour of a Triton user, mistakes first): Triton kernels ported from memory
with Triton's spellings (@triton.jit, triton.Config, grid=lambda meta: ..., tl.load of offsets,
pointer increments, dim=, eviction_policy=...), each expected to be a located KernelError naming
the mgpu_dsl way."""
import inspect

import jax
import jax.numpy as jnp
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _line_of(fn, text):
  lines, first = inspect.getsourcelines(fn)
  return next(first + n for n, line in enumerate(lines) if text in line)


# ---------------------------------------------------------------- triton.* names on mg and ml
def test_triton_top_level_names_on_mg_and_ml_are_located_errors():
  """`@mg.jit`, `mg.Config(...)`, `mg.cdiv` were a raw AttributeError (module 'mgpu_dsl' has no
  attribute 'jit'): the first line a Triton user writes."""
  def use_jit():
    return mg.jit
  with pytest.raises(mg.UnknownNameError) as info:
    use_jit()
  e = info.value
  assert e.code == "MG002" and e.message == "mg has no attribute 'jit'"
  assert (e.filename, e.lineno) == (__file__, _line_of(use_jit, "return mg.jit"))
  assert e.hint.startswith("decorate the kernel with @mg.mgpu_kernel(out_shape=..., grid=...)")
  with pytest.raises(mg.UnknownNameError) as info:
    mg.Config({"BLOCK": 128}, num_warps=4)
  assert info.value.hint.startswith("a configuration is a dict of constexprs: @mg.autotune(configs=[dict(")
  with pytest.raises(mg.UnknownNameError) as info:
    ml.jit
  assert info.value.message == "ml has no attribute 'jit'"
  with pytest.raises(mg.UnknownNameError) as info:
    mg.cdiv(10, 3)
  assert info.value.hint == "it is ml.cdiv, in the kernel language: from mgpu_dsl import language as ml"
  # still AttributeErrors: hasattr and getattr with a default keep their meaning
  assert not hasattr(mg, "jit") and getattr(mg, "Config", None) is None
  with pytest.raises(AttributeError) as info:
    mg.no_such_name
  assert not isinstance(info.value, mg.KernelError)


@mg.mgpu_kernel(out_shape=lambda x: x)
def mg_program_id(x, out):
  _ = mg.program_id(0)
  out[...] = x[...]


def test_an_ml_name_looked_up_on_mg_in_a_kernel_names_ml():
  """It was 'check the spelling'."""
  expect(mg_program_id, [S((128,), F32)], mg.UnknownNameError, "mg.program_id",
         "mg has no attribute 'program_id'",
         hint="it is ml.program_id, in the kernel language: from mgpu_dsl import language as ml")


# ---------------------------------------------------------------- grid=lambda meta: ...
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda meta: (ml.cdiv(4096, meta["BLOCK"]),))
def meta_grid(x, out, BLOCK: ml.constexpr = 1024):
  pid = ml.program_id(0)
  out.at[ml.ds(pid * BLOCK, BLOCK)][...] = x.at[ml.ds(pid * BLOCK, BLOCK)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x, META: (triton.cdiv(x.shape[0], META["BLOCK"]),))  # noqa: F821
def meta_grid2(x, out, BLOCK: ml.constexpr = 1024):
  pid = ml.program_id(0)
  out.at[ml.ds(pid * BLOCK, BLOCK)][...] = x.at[ml.ds(pid * BLOCK, BLOCK)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (triton.cdiv(x.shape[0], 1024),))  # noqa: F821
def triton_cdiv_grid(x, out):
  pid = ml.program_id(0)
  out.at[ml.ds(pid * 1024, 1024)][...] = x.at[ml.ds(pid * 1024, 1024)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x, BLOCK: (ml.cdiv(x.shape[0], BLOCK),))
def named_grid(x, out, BLOCK: ml.constexpr = 1024):
  pid = ml.program_id(0)
  out.at[ml.ds(pid * BLOCK, BLOCK)][...] = x.at[ml.ds(pid * BLOCK, BLOCK)][...]


def test_tritons_meta_grid_callable_is_rewritten_in_the_hint():
  """Its hint was "grid is called with the kernel's inputs (and the constexprs it names)", after
  "TypeError: JAX does not support string indexing"."""
  with pytest.raises(mg.SignatureError) as info:
    meta_grid.check(S((4096,), F32))
  hint = info.value.hint
  assert hint == ("Triton's grid callable takes a dict of the constexprs (meta); here a grid callable takes the"
                  " kernel's inputs, and each constexpr it needs as a parameter of that name: grid=lambda x, BLOCK:"
                  " (ml.cdiv(4096, BLOCK),)")
  with pytest.raises(mg.SignatureError) as info:
    meta_grid2.check(S((4096,), F32))
  assert info.value.hint.endswith("grid=lambda x, BLOCK: (ml.cdiv(x.shape[0], BLOCK),)")
  with pytest.raises(mg.SignatureError) as info:
    triton_cdiv_grid.check(S((4096,), F32))
  assert info.value.hint.startswith("triton.cdiv is ml.cdiv here")
  named_grid.check(S((4096,), F32))           # the hint, followed


def test_triton_launch_of_a_lambda_grid_shows_its_source():
  """The hint showed `grid=<function <lambda> at 0x7f...>`."""
  with pytest.raises(mg.SignatureError) as info:
    named_grid[lambda meta: (ml.cdiv(4096, meta["BLOCK"]),)](jnp.ones((4096,), F32))
  e = info.value
  assert e.message.startswith("named_grid[lambda ...]: an mgpu_dsl kernel takes no grid at the call")
  assert "0x" not in e.hint and "grid=lambda x, BLOCK: (ml.cdiv(4096, BLOCK),))" in e.hint


# ---------------------------------------------------------------- autotune configs
def test_autotune_config_of_launch_options_is_reported_at_the_decorator():
  """A config with num_warps= was reported at the first call, as the kernel having no constexpr
  'num_warps'; and autotune stacked under the kernel decorator printed a function's repr."""
  def tuned():
    @mg.autotune(configs=[{"BLOCK": 1024, "num_warps": 4}, {"BLOCK": 512, "num_warps": 8}])
    @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x, BLOCK: (x.shape[0] // BLOCK,))
    def add(x, out, BLOCK: ml.constexpr = 1024):
      pid = ml.program_id(0)
      out.at[ml.ds(pid * BLOCK, BLOCK)][...] = x.at[ml.ds(pid * BLOCK, BLOCK)][...]
    return add
  with pytest.raises(mg.SignatureError) as info:
    tuned()
  e = info.value
  assert e.lineno == _line_of(tuned, "@mg.autotune")
  assert e.message == ("autotune config {'BLOCK': 1024, 'num_warps': 4} names 'num_warps', which is not a constexpr"
                       " parameter of add")
  assert e.hint.startswith("threads per CTA are the decorator's block=")

  def misspelt():
    @mg.autotune(configs=[{"BLOKC": 1024}])
    @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x, BLOCK: (x.shape[0] // BLOCK,))
    def add(x, out, BLOCK: ml.constexpr = 1024):
      pid = ml.program_id(0)
      out.at[ml.ds(pid * BLOCK, BLOCK)][...] = x.at[ml.ds(pid * BLOCK, BLOCK)][...]
  with pytest.raises(mg.SignatureError) as info:
    misspelt()
  assert info.value.hint.startswith("did you mean BLOCK?")

  def swapped():
    @mg.mgpu_kernel(out_shape=lambda x: x)
    @mg.autotune(configs=[{"BLOCK": 1024}])
    def add(x, out, BLOCK: ml.constexpr = 1024):
      out[...] = x[...]
  with pytest.raises(mg.SignatureError) as info:
    swapped()
  assert info.value.message == ("@mg.autotune decorates an @mg.mgpu_kernel function, got the plain function add"
                                " (decorated in the wrong order?)")


# ---------------------------------------------------------------- tl.load / tl.store of computed offsets
@mg.mgpu_kernel(out_shape=lambda x: x)
def load_at_offsets(x, out):
  offs = ml.arange(128)
  v = ml.load(x.at[offs], mask=offs < 100, other=0.0)
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda x: x)
def store_at_offsets(x, out):
  offs = ml.arange(128)
  ml.store(out.at[offs], x[...], mask=offs < 100)


@mg.mgpu_kernel(out_shape=lambda x: x)
def load_of_a_gathered_value(x, out):
  offs = ml.arange(128)
  v = ml.load(x[offs], mask=offs < 100, other=0.0)
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda x: x)
def hint_followed(x, out):
  offs = ml.arange(128)
  out[...] = ml.where(offs < 100, x[offs], 0.0)


def test_tl_load_and_store_of_offsets_written_with_at_move_the_window():
  """ml.load(x.at[offs], mask=, other=) and ml.store(out.at[offs], v, mask=) of a run of offsets were errors
  whose hints wrote the window; they now move it (twenty-ninth session). A masked store that leaves part of
  out unwritten is MG602, as the window's own is; ml.load of a value already read is still an error."""
  spec = [S((128,), F32)]
  x = jnp.arange(128, dtype=F32)
  want = jnp.where(jnp.arange(128) < 100, x, 0)
  assert (load_at_offsets(x, interpret=True) == want).all()
  expect(store_at_offsets, spec, mg.UncoveredOutputError, "ml.store(out.at[offs]",
         "out[100:128] is never written: the masked store into out (line 169) leaves the elements where its mask"
         " is false unwritten, and nothing else writes them, so 28 of 128 elements of out would stay uninitialised")
  expect(load_of_a_gathered_value, spec, mg.KernelTypeError, "ml.load(x[offs]",
         "ml.load needs a ref (a parameter, an ml.smem buffer or a view), got a register tensor",
         hint="x[offs] is already in registers (reading a ref gives register values): use it as it is, or select"
              " with the mask, ml.where(offs < 100, x[offs], 0.0)")
  assert (hint_followed(x, interpret=True) == want).all()


# ---------------------------------------------------------------- pointer increments and 2-D offsets
@mg.mgpu_kernel(out_shape=lambda a: S((128, 64), F32), grid=(1,))
def pointer_increment(a, c):
  a_ptrs = a.at[ml.ds(0, 128), ml.ds(0, 64)]
  acc = ml.zeros((128, 64), F32)
  for k in range(4):
    acc += a_ptrs[...].astype(F32)
    a_ptrs += 64
  c[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), x.dtype), grid=(1,))
def row_pointer(x, out):
  row = ml.program_id(0)
  out[...] = ml.load(x + row * x.shape[1])


@mg.mgpu_kernel(out_shape=lambda a: S((128, 64), F32), grid=(1,))
def pointer_grid(a, c):
  offs_m = ml.arange(128)
  offs_k = ml.arange(64)
  a_ptrs = a + (offs_m[:, None] * a.shape[1] + offs_k[None, :])
  c[...] = ml.load(a_ptrs)


@mg.mgpu_kernel(out_shape=lambda a: S((128, 64), F32), grid=(1,))
def window_per_step(a, c):
  acc = ml.zeros((128, 64), F32)
  for k in range(4):
    acc += a.at[:, ml.ds(k * 64, 64)][...].astype(F32)
  c[...] = acc


def test_tritons_pointer_increment_names_the_window_per_step():
  """`a_ptrs += 64` on a ref said "read it into registers first: a_ptrs[...]", which adds 64 to its
  values; a 2-D grid of pointer offsets was hinted a 1-D window of n elements."""
  e = expect(pointer_increment, [S((128, 256), jnp.float16)], mg.KernelTypeError, "a_ptrs += 64",
             "+ works on register values, got a_ptrs (GMEM ref) plus the offset 64: a ref is not a pointer, so it"
             " does not move by an offset")
  assert e.hint.startswith("index the window each step needs instead of moving a_ptrs: a.at[:, ml.ds(k * BLOCK,"
                           " BLOCK)] in the loop over k")
  assert e.hint.endswith("to add to a_ptrs's values, write through it: a_ptrs[...] += 64")
  e = expect(row_pointer, [S((8, 128), F32)], mg.KernelTypeError, "x + row * x.shape[1]",
             "+ works on register values, got x (GMEM ref) plus the offset row * x.shape[1]: a ref is not a"
             " pointer, so it does not move by an offset")
  assert "a row, x.at[row] (for x_ptr + row * stride)" in e.hint
  e = expect(pointer_grid, [S((128, 64), F32)], mg.KernelTypeError, "a + (offs_m",
             "+ works on register values, got a (GMEM ref) plus integer offsets: a ref is not a pointer, so offsets"
             " are not added to it")
  assert e.hint.startswith("index a by dimension with the offsets' vectors instead of adding them (refs have no"
                           " strides: a's rows are its first index, so a.shape[1] goes): ml.load(a.at[offs_m[:,"
                           " None], offs_k[None, :]], mask=mask, other=0.0)")     # (session 40p: the user's vectors)
  a = jnp.arange(128 * 256, dtype=jnp.float16).reshape(128, 256) % 7
  ref = sum(a[:, k * 64:(k + 1) * 64].astype(F32) for k in range(4))
  assert (window_per_step(a, interpret=True) == ref).all()


# ---------------------------------------------------------------- torch's and Triton's keywords
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def sum_dim(x, out):
  out[...] = ml.sum(x[...], dim=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def evict_last(x, out):
  offs = ml.arange(128)
  v = x.at[ml.ds(0, 128)].load(mask=offs < 100, other=0.0, eviction_policy="evict_last")
  out.at[ml.ds(0, 128)].store(v, mask=offs < 128, cache_modifier=".cg")


def test_foreign_keywords_name_the_keyword_to_write_or_drop():
  """`dim=` got the signature alone; Triton's cache hints likewise."""
  expect(sum_dim, [S((64, 128), F32)], mg.KernelTypeError, "ml.sum(",
         "ml.sum: got an unexpected keyword argument 'dim'",
         hint="write axis= for dim=: ml.sum(x, axis=None, keepdims=False, dtype=None, where=None, initial=None,"
              " promote_integers=True)")
  # Triton's cache hints were "drop eviction_policy=" until probe 48g: those that only tune caching are taken
  import numpy as np
  x = np.random.default_rng(5).standard_normal(128).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(evict_last(x, interpret=True)), np.where(np.arange(128) < 100, x, 0))


# ---------------------------------------------------------------- int64 offsets, element_ty, expand_dims
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 1024),))
def int64_offsets(x, out):
  offs = ml.program_id(0) * 1024 + ml.arange(0, 1024).astype(ml.int64)
  mask = offs < x.shape[0]
  v = x.at[ml.ds(ml.program_id(0) * 1024, 1024)].load(mask=mask, other=0.0)
  out.at[ml.ds(ml.program_id(0) * 1024, 1024)].store(v, mask=mask)


@mg.mgpu_kernel(out_shape=lambda x: x)
def element_ty(x, out):
  out[...] = x[...].astype(x.dtype.element_ty)


@mg.mgpu_kernel(out_shape=lambda x: x)
def expand_dims(x, out):
  v = ml.sum(x[...], axis=1)
  out[...] = x[...] - ml.expand_dims(v, 1)


def test_int64_offsets_widen_the_int32_side():
  """The hint narrowed the int64 side back to int32: (...).astype(ml.int64).astype(jnp.int32); then it was MG104
  hinting the int32 side widened, which the compiler does since probe 47b (jnp's int32 + int64 is int64)."""
  import numpy as np
  x = np.random.default_rng(0).standard_normal(5000).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(int64_offsets(x, interpret=True)), x)
  int64_offsets.check(S((5000,), F32))


def test_tritons_element_ty_and_expand_dims_say_what_to_write():
  """Both were 'check the spelling'; element_ty was then a hint to drop it, and is since probe 48g the dtype."""
  import numpy as np
  v = np.random.default_rng(1).standard_normal(128).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(element_ty(v, interpret=True)), v)
  x = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)   # (ml.expand_dims since probe 46k)
  np.testing.assert_allclose(expand_dims(x, interpret=True), x - x.sum(1, keepdims=True), rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------- torch-like strides passed
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def with_strides(x, out, stride_xm, stride_xn):
  pid = ml.program_id(0)
  out.at[ml.ds(pid * 64, 64)][...] = x.at[ml.ds(pid * 64, 64)][...]


def test_strides_passed_as_in_triton_are_named_as_such():
  """The hint asked whether out and stride_xm were outputs (or inputs) of the kernel."""
  x = jnp.ones((256, 128), F32)
  for call in (lambda: with_strides.check(S((256, 128), F32)), lambda: with_strides(x, 128, 1, interpret=True)):
    with pytest.raises(mg.SignatureError) as info:
      call()
    assert info.value.hint.startswith(
        "stride_xm, stride_xn are Triton's strides, which kernels do not take: refs are indexed by dimension"
        " (x.at[r, ml.ds(c, n)] is row r's columns c to c + n)")


# ---------------------------------------------------------------- from mgpu_dsl import language as tl
def test_messages_name_the_language_as_the_kernels_module_imports_it():
  """A module importing the language as `tl` read `ml.range takes no keyword 'num_stages'` for
  its own `tl.range(0, 4, num_stages=2)` (which computes since probe 48g: Triton's tuning hint, nothing to pipeline
  there), and so for another keyword."""
  import probe30d_tl_alias as k
  import numpy as np
  x = np.random.default_rng(4).standard_normal(512).astype(np.float32)
  np.testing.assert_allclose(np.asarray(k.staged_range(x, interpret=True))[:128], x.reshape(4, 128).sum(0), rtol=1e-5)
  np.testing.assert_allclose(np.asarray(k.unrolled_range(x, interpret=True))[:128], x.reshape(4, 128).sum(0),
                             rtol=1e-5)      # (loop_unroll_factor= is dropped since probe 49h: a tuning hint)
  with pytest.raises(mg.KernelTypeError) as info:
    k.misspelt_range.check(S((512,), F32))
  e = info.value
  assert e.message == "tl.range takes no keyword 'stage'"
  assert e.hint.startswith("write stages= (Triton's num_stages is tl.range's stages): tl.range(")
  with pytest.raises(mg.KernelTypeError) as info:
    jax.jit(k.seed_ref)(jnp.ones((128,), F32), jnp.zeros((), jnp.int32))
  assert info.value.hint.startswith("pass the seed as a tl.scalar parameter (seed: tl.scalar)")
  assert "ml." not in info.value.hint


# ---------------------------------------------------------------- the tutorial's vector add, called as in Triton
@mg.mgpu_kernel(out_shape=lambda x, y: x, grid=lambda x, y: (ml.cdiv(x.shape[0], 1024),))
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: ml.constexpr):
  pid = ml.program_id(axis=0)
  offsets = pid * BLOCK_SIZE + ml.arange(0, BLOCK_SIZE)
  ml.store(output_ptr.at[ml.ds(pid * BLOCK_SIZE, BLOCK_SIZE)], offsets.astype(F32), mask=offsets < n_elements)


def test_tritons_add_called_with_its_output_and_size_says_both():
  """add_kernel(x, y, x.size, BLOCK_SIZE=1024) was hinted `pass it by keyword: add_kernel(..., )`
  (every constexpr was given already); with `out` passed too, the hint was the generic rule."""
  x = jnp.ones((4096,), F32)
  with pytest.raises(mg.SignatureError) as info:
    add_kernel(x, x, x.size, BLOCK_SIZE=1024, interpret=True)
  e = info.value
  assert e.message == ("add_kernel takes 2 inputs (x_ptr, y_ptr), then 2 outputs (output_ptr, n_elements), but was"
                       " called with 3 inputs")
  assert e.hint.startswith("4096 is a Python number, not an array: refs are indexed by dimension")
  assert "(n_elements: ml.scalar, before the outputs" in e.hint and "add_kernel(..., )" not in e.hint
  with pytest.raises(mg.SignatureError) as info:
    add_kernel(x, x, jnp.empty_like(x), x.size, BLOCK_SIZE=1024, interpret=True)
  assert "outputs are returned, not passed: call add_kernel with its 2 inputs only" in info.value.hint


@mg.mgpu_kernel(out_shape=lambda x: x)
def arange_step(x, out):
  out[...] = x[...] + ml.arange(0, 256, 2).astype(F32)


def test_arange_with_a_step_says_it_takes_none():
  """It was 'ml.arange needs a dtype such as jnp.float32, got 2'."""
  expect(arange_step, [S((128,), F32)], mg.KernelTypeError, "ml.arange(0, 256, 2)",
         "ml.arange takes no step (its third argument is a dtype), got 2",
         hint="scale a unit range: ml.arange(128) * 2 is 0, 2, ... below 256")


# ---------------------------------------------------------------- Triton's output-first parameter order
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def softmax_output_first(output_ptr, input_ptr, BLOCK_SIZE: ml.constexpr = 1024):
  row_idx = ml.program_id(0)
  mask = ml.arange(0, BLOCK_SIZE) < input_ptr.shape[1]
  row = input_ptr.at[row_idx, ml.ds(0, BLOCK_SIZE)].load(mask=mask, other=-float("inf"))
  numerator = ml.exp(row - ml.max(row, axis=0))
  output_ptr.at[row_idx, ml.ds(0, BLOCK_SIZE)].store(numerator / ml.sum(numerator, axis=0), mask=mask)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def softmax_output_last(input_ptr, output_ptr, BLOCK_SIZE: ml.constexpr = 1024):
  row_idx = ml.program_id(0)
  mask = ml.arange(0, BLOCK_SIZE) < input_ptr.shape[1]
  row = input_ptr.at[row_idx, ml.ds(0, BLOCK_SIZE)].load(mask=mask, other=-float("inf"))
  numerator = ml.exp(row - ml.max(row, axis=0))
  output_ptr.at[row_idx, ml.ds(0, BLOCK_SIZE)].store(numerator / ml.sum(numerator, axis=0), mask=mask)


def test_tritons_output_first_order_is_named_in_the_input_write_error():
  """The hint was to alias output_ptr to an output (input_output_aliases={0: 0}), which leaves the
  real output, input_ptr by position, never written."""
  expect(softmax_output_first, [S((8, 1000), F32)], mg.InputWriteError, "output_ptr.at[row_idx",
         "cannot write into output_ptr: it is an input of the kernel, and inputs are read-only (JAX arrays are"
         " immutable)",
         hint="parameters are the inputs, then the outputs (Triton kernels often take their output first), and this"
              " kernel writes output_ptr but never input_ptr: list the outputs last, in out_shape's order, def"
              " softmax_output_first(input_ptr, output_ptr, ...) (the call passes the inputs only)")
  x = rand.normal(rand.key(0), (8, 1000), F32)
  assert jnp.abs(softmax_output_last(x, interpret=True) - jax.nn.softmax(x, -1)).max() < 1e-6


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32), grid=(1,))
def dot_trans_b(a, b, c):
  a_s = ml.smem((64, 64), jnp.float16)
  b_s = ml.smem((64, 64), jnp.float16)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = ml.dot(a_s, b_s, trans_b=True)


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32), grid=(1,))
def dot_transposed_view(a, b, c):
  a_s = ml.smem((64, 64), jnp.float16)
  b_s = ml.smem((64, 64), jnp.float16)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = ml.dot(a_s, b_s.T)


def test_tl_dot_trans_b_names_the_transposed_view():
  """Triton 2's trans_b=True got the signature alone."""
  spec = [S((64, 64), jnp.float16)] * 2
  expect(dot_trans_b, spec, mg.KernelTypeError, "ml.dot(a_s, b_s, trans_b=True)",
         "ml.dot: got an unexpected keyword argument 'trans_b'",
         hint="pass the transposed view instead of trans_b=: ml.dot(a_s, b_s.T) (no data moves); ml.dot(a, b,"
              " acc=None, *, out_dtype=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None,"
              " preferred_element_type=None, precision=None)")
  a = rand.normal(rand.key(0), (64, 64), jnp.float16)
  b = rand.normal(rand.key(1), (64, 64), jnp.float16)
  ref = jnp.dot(a, b.T, preferred_element_type=F32)
  assert jnp.abs(dot_transposed_view(a, b, interpret=True) - ref).max() < 1e-2


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32), grid=(4,))
def atomic_sem(x, out):
  pid = ml.program_id(0)
  ml.atomic_add(out, x.at[pid][...], sem="relaxed", scope="gpu")


def test_atomic_ordering_keywords_are_triton_s():
  """Triton's sem= and scope= got the signature alone; then a hint to drop them; since probe 48c they are taken."""
  import numpy as np
  x = np.random.default_rng(0).standard_normal((4, 128)).astype(np.float32)
  np.testing.assert_allclose(atomic_sem(x, interpret=True), x.sum(0), rtol=1e-5, atol=1e-5)
