"""Probe 68a (attention as model authors write it beyond examples/attention.py: FlashMLA's latent-attention decode,
paged and split-KV with its combine, MTP, weight absorption, DeepSeek-V3.2's indexer and sparse MLA; NSA's
compression, top-k block selection, gathered blocks, sliding window and gated mix; gpt-oss's sinks and their
gradient; StreamingLLM; Gemma 2's softcap forward and backward; Triton's fused-attention backward; GQA/MQA; varlen;
prefix-LM and document masks; T5's bucketed bias; dropout by a counter-based hash; float8, int8 and block-sparse
attention; what sits around attention in a model): a corpus of 58 kernels in 76 cases (probe68a_*.py), each checked
in interpret mode against a float32 jnp reference and exported for CUDA; the legitimate refusals met, at the user's
line with a hint that works when followed; and the classes fixed (design note 225): (1) a register tile's column
window at a run-time start had a message that named no mistake; (2) MG402's hint for a 512-column p @ v beside
pipelined stages cut tiles that padding brings back; (3) pages gathered into registers past SMEM got a hint with no
form for a gather; (4) an 8-bit B stored (k, n) (FA3's float8 p @ v) was MG501, now transposed by the compiler;
(5) jnp forms named every operand `x`; (6) jax.nn.dot_product_attention's hint was the generic one."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where
from probe_util import line_of
from probe68a_lib import online_step
from probe68a_cases import CASES, K, mla_split_inputs, mla_split_ref

S = jax.ShapeDtypeStruct
F32, BF16 = jnp.float32, jnp.bfloat16

# The cases a legitimate refusal meets (tested below, each with its error); every other case must compute.
REFUSED = {"mla_split_h16", "mla_split_h64", "mla_shared_h16", "mla_shared_h128", "mla_paged_split_combine",
           "mla_vsplit_h16", "mla_paged_gather", "mla_paged_gather_fixed", "nsa_gate_mix", "dkdv_ragged_unmasked",
           "nsa_compress_mlp"}
OK = sorted(set(CASES) - REFUSED)


def _relerr(got, want):
  got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
  assert got.shape == want.shape, (got.shape, want.shape)
  return float(np.max(np.abs(got - want)) / max(1e-6, float(np.max(np.abs(want)))))


def _pairs(got, want):
  got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
  assert len(got) == len(want)
  return zip(got, want)


def _check(run, make, ref, tol, seed=0):
  args = make(seed)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.KernelWarning)
    for g, w in _pairs(run(*args, interpret=True), ref(*args)):
      assert _relerr(g, w) <= tol, _relerr(g, w)
    jax.export.export(jax.jit(run), platforms=["cuda"])(*[S(a.shape, a.dtype) for a in args]).mlir_module()


@pytest.mark.parametrize("name", OK)
def test_corpus_matches_its_reference_and_builds(name):
  """Each kernel against its float32 jnp reference in interpret mode (the GPU's numerics), its module built."""
  _check(*CASES[name])


GPU_TWINS = ["mla_vsplit_h64", "mla_split_h64_halves", "mla_paged_split_combine_s1", "mla_two_halves", "nsa_selected_tiles", "nsa_fused_select", "sink_gqa",
             "softcap_fwd_causal", "bwd_softcap_causal", "varlen_qk", "t5_bidirectional", "dropout_hash",
             "decode_gqa_one_token", "dq_atomic", "fp8_attention", "sage_int8", "block_sparse_s2", "mla_mtp",
             "nsa_group_selected", "fused_bwd_causal", "dkdv_ragged_dropout", "prefill_192_128_bq128",
             "chunked_prefill", "reshape_and_cache", "decode_small_pages_4"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_TWINS)
def test_gpu_corpus_matches_its_reference_and_interpret_mode(name):
  """The GPU against the float32 reference, and against interpret mode (the same numerics: closer still)."""
  run, make, ref, tol = CASES[name]
  args = make(1)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.KernelWarning)
    on_gpu, interpreted = jax.jit(run)(*args), run(*args, interpret=True)
  for g, w in _pairs(on_gpu, ref(*args)):
    assert _relerr(g, w) <= max(tol, 1e-3), (name, _relerr(g, w))
  for g, i in _pairs(on_gpu, interpreted):
    assert _relerr(g, i) <= max(tol, 1e-3), (name, "against interpret mode", _relerr(g, i))


def _specs(name):
  run, make, _, _ = CASES[name]
  return getattr(run, "kernel", run), [S(a.shape, a.dtype) for a in make(0)], getattr(run, "kw", {})


# ---------------------------------------------------------------- legitimate refusals, at the user's line
def _error(kernel, specs, kw):
  with pytest.raises(mg.KernelError) as info:
    kernel.check(*specs, **kw)
  return info.value


@pytest.mark.parametrize("name", ["mla_shared_h16", "mla_split_h16", "mla_vsplit_h16", "mla_paged_split_combine"])
def test_sixteen_heads_of_a_576_wide_latent_cache_fit_with_one_stage_as_the_hint_says(name):
  """FlashMLA's 16 query heads are padded to a 64-row tile (the padded copy and the 64-row products' row windows are
  SMEM scratches of the compiler's): with two stages of a 64 x 576 cache block that is past the limit, at the dot
  that tips it, and the hint's stages=1 fits (and computes: mla_paged_split_combine_s1 in the corpus, and below)."""
  run, make, ref, tol = CASES[name]
  kernel, specs, kw = _specs(name) if name != "mla_paged_split_combine" else (
      K.mla_paged_split, [S(a.shape, a.dtype) for a in make(0)], dict(dv=512, splits=2, scale=0.07))
  e = _error(kernel, specs, kw)
  assert (type(e), e.code) == (mg.SmemCapacityError, "MG402")
  assert e.filename == kernel.fn.__code__.co_filename and "ml.dot(" in e.loc.source_line, e.render()
  assert e.hint == "use stages=1 (no loads ahead of use: the loop then runs unpipelined), or smaller tiles"
  if name == "mla_shared_h16":
    _check(lambda *a, interpret=False: kernel(*a, interpret=interpret, **{**kw, "stages": 1}), make, ref, tol)


def test_a_three_output_gate_is_no_tensor_core_dot_and_the_hint_pads_it():
  kernel, specs, kw = _specs("nsa_gate_mix")
  e = _error(kernel, specs, kw)
  assert e.code == "MG501", e.render()
  assert (e.lineno, e.col_offset) == where(kernel, "ml.dot(xt, wg.at[h][...])")
  assert e.message == "ml.dot needs n (columns of b) to be a multiple of 16 and at most 256, got 3"
  assert e.hint.startswith("pad n to a multiple of 16"), e.hint


def test_128_heads_against_a_576_wide_cache_do_not_fit_and_the_hint_says_how_far():
  kernel, specs, kw = _specs("mla_shared_h128")
  e = _error(kernel, specs, kw)
  assert type(e) is mg.SmemCapacityError and e.code == "MG402"
  assert (e.lineno, e.col_offset) == where(kernel, "ml.smem((bkv, d))")
  assert e.hint.startswith("use smaller tiles: the buffers are 325648 bytes past the limit"), e.hint


# ---------------------------------------------------------------- class 1: a register column window at a run-time start
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 64), x.dtype), grid=lambda x: (x.shape[1] // 64,))
def run_time_columns(x, o):
  c = ml.program_id(0)
  t = x[...] * 2.0
  o.at[:, ml.ds(0, 64)][...] = t[:, c * 64:(c + 1) * 64]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 64 * (x.shape[1] // 64)), x.dtype), grid=lambda x: (x.shape[1] // 64,))
def run_time_columns_fixed(x, o):
  c = ml.program_id(0)
  t = x[...] * 2.0
  o.at[:, ml.ds(c * 64, 64)][...] = jax.lax.dynamic_slice_in_dim(t, c * 64, 64, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((64, x.shape[1]), x.dtype), grid=lambda x: (1,))
def run_time_rows(x, o, *, r: ml.constexpr):
  t = x[...] * 2.0
  for c in ml.range(r, r + 1):
    o[...] = t[c * 64:(c + 1) * 64]


def test_a_run_time_column_window_of_a_register_tile_names_its_bounds_and_a_window_that_works():
  """`t[:, c * 64:(c + 1) * 64]` (FlashMLA's value columns of a program, `kv[:, c * bn:(c + 1) * bn]`) was MG003
  'a register tensor is sliced with static ints and a step of 1' (the rule, not the mistake) with a hint for static
  bounds; it is now the run-time bounds' error rows have, whose hint takes the window with lax.dynamic_slice_in_dim
  (which works: below) or through an SMEM buffer."""
  e = expect(run_time_columns, [S((64, 128), F32)], mg.KernelTypeError, "t[:, c * 64:(c + 1) * 64]",
             "a window of t needs static bounds; this one starts or ends at a run-time value")
  assert e.code == "MG003"
  assert e.hint == ("take the window with jax.lax.dynamic_slice_in_dim(t, c * 64, 64, axis=1) (a gather in"
                    " registers: a start past 64 is clamped to it, as jax does); or store t into an SMEM buffer and"
                    " read the window there: buf = ml.smem((64, 128), jnp.float32); buf[...] = t; then"
                    " buf.at[:, ml.ds(c * 64, 64)][...]"), e.hint
  e = expect(run_time_rows, [S((192, 64), F32)], mg.KernelTypeError, "t[c * 64:(c + 1) * 64]",
             "a window of t needs static bounds; this one starts or ends at a run-time value", r=1)
  assert "jax.lax.dynamic_slice_in_dim(t, c * 64, 64, axis=0)" in e.hint and "buf.at[ml.ds(c * 64, 64)]" in e.hint
  x = np.random.default_rng(0).standard_normal((64, 192)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(run_time_columns_fixed(x, interpret=True)), 2 * x, rtol=1e-6)
  jax.export.export(jax.jit(run_time_columns_fixed), platforms=["cuda"])(S(x.shape, x.dtype)).mlir_module()


def test_mla_by_page_gathers_slicing_its_values_per_program_meets_that_error():
  kernel, specs, kw = _specs("mla_paged_gather")
  e = _error(kernel, specs, kw)
  assert (type(e), e.code) == (mg.KernelTypeError, "MG003")
  assert (e.lineno, e.col_offset) == line_of(K.kv_cols, "kv[:, c * bn:(c + 1) * bn]")       # (in the helper)
  assert e.notes[0].endswith(f":{where(kernel, 'kv_cols(kv, c, bn, fixed)')[0]}:60: in this call of kv_cols")
  assert e.message == "a window of kv needs static bounds; this one starts or ends at a run-time value"
  assert e.hint.startswith("take the window with jax.lax.dynamic_slice_in_dim(kv, c * bn, 128, axis=1)"), e.hint


# ---------------------------------------------------------------- class 2: MG402 of a 512-column p @ v
WIDE_HINT = ("split the dot by hand, or compute fewer rows per program: a buffer of 128 KiB without which the kernel"
             " fits, wide dot scratch, joins the products of an ml.dot of more than 256 columns, which the tensor cores"
             " compute 256 columns at a time; one accumulator a piece needs no join (acc0 = ml.dot(a, b_s.at[:,"
             " 0:256], acc0), acc1 = ml.dot(a, b_s.at[:, 256:512], acc1), or b_s.at[0:256].T of a buffer stored (n,"
             " k)), each stored into its columns of the output")


def test_a_512_column_p_at_v_beside_pipelined_stages_gets_the_wide_dot_hint_which_fits():
  """FlashMLA's 64 heads x 512 latent columns: `ml.dot(p, c_s, acc)` joins its two 256-column products through a
  128 KiB wide dot scratch. MG402's hint said to cut the user's tiles to a quarter (q's 64 rows to 16, which the dot
  pads back to 64: still past the limit); the scratch's own hint was given only where it was the largest buffer of a
  kernel without pipelined loops. It is now given wherever the kernel fits without that scratch, and it works."""
  kernel, specs, kw = _specs("mla_split_h64")
  e = _error(kernel, specs, kw)
  assert (type(e), e.code) == (mg.SmemCapacityError, "MG402")
  assert e.hint == WIDE_HINT, e.hint
  _check(*CASES["mla_split_h64_halves"])          # mla_decode_split_dims(halves=True): the hint followed


def test_the_largest_buffer_keeps_its_wording():
  """Where the wide dot scratch is the largest buffer of a kernel without pipelined loops, the hint says so."""
  @mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (1,))
  def wide(a, b, o):
    a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
    ml.copy(a, a_s)
    ml.copy(b, b_s)
    o[...] = ml.dot(a_s, b_s)

  with pytest.raises(mg.SmemCapacityError) as info:
    wide.check(S((128, 64), BF16), S((64, 1024), BF16))
  assert info.value.hint.startswith("split the dot by hand, or compute fewer rows per program: the largest buffer,"
                                    " wide dot scratch, joins"), info.value.hint


# ---------------------------------------------------------------- class 3: MG402 of whole pages gathered into registers
def test_pages_gathered_into_registers_past_smem_get_the_page_copy_hint_which_fits():
  """Pallas's paged form at MLA's 576 columns, `kv = pages[ids].reshape(2 * 64, 576)`: the pages read into registers
  are joined through a scratch as large as they are, which ml.dot stores into SMEM once more. MG402's hint said to
  read pieces straight from the ref (ref.at[rows, ml.ds(a, n)][...]), which a page gather has no form of; it now
  copies the pages by TMA into one buffer, in the user's names, and that kernel (mla_paged_copy) computes."""
  kernel, specs, kw = _specs("mla_paged_gather_fixed")
  e = _error(kernel, specs, kw)
  assert (type(e), e.code) == (mg.SmemCapacityError, "MG402")
  assert "page gather scratch 144 KiB" in e.message, e.message
  assert e.hint == ("copy the pages into an SMEM buffer by TMA instead of gathering them into registers: the largest"
                    " buffer, page gather scratch, joins the pages a gather pages[ids] reads, as large as they are (and"
                    " ml.dot stores them into SMEM once more); buf = ml.smem((128, 576)), then for k in"
                    " ml.static_range(2): ml.copy(pages.at[ids[k]], buf.at[ml.ds(k * 64, 64)]), and pass buf (buf.T"
                    " for keys) to ml.dot; fewer pages a step where that is still too large"
                    " (examples/paged_attention.py)"), e.hint
  assert "mla_paged_copy2" in OK
  _check(*CASES["mla_paged_copy2"])


def test_a_partial_key_block_stored_from_registers_is_mg203_with_the_mask_that_works():
  """The backward at 200 tokens, dK and dV of the last 64-key block stored whole from registers: MG203 names the
  rows past the end and writes the masked store, which the corpus's dkdv_ragged_dropout follows and which computes."""
  kernel, specs, kw = _specs("dkdv_ragged_unmasked")
  e = _error(kernel, specs, kw)
  assert (type(e), e.code) == (mg.IndexOutOfBoundsError, "MG203")
  assert (e.lineno, e.col_offset) == where(kernel, "dk.at[h, ml.ds(j * bkv, bkv)][...] = dk_acc * scale")
  assert e.hint.startswith("mask it to the elements inside: dk.at[h, ml.ds(j * bkv, bkv)].store(dk_acc * scale,"
                           " mask=(j * bkv + ml.arange(64))[:, None] < dk.shape[1])"), e.hint
  assert "dkdv_ragged_dropout" in OK


# ---------------------------------------------------------------- class 4: an 8-bit B stored (k, n)
def test_fa3_float8_p_at_v_with_v_as_stored_is_transposed_by_the_compiler():
  """FlashAttention-3's float8 forward: `ml.dot((p * 448.0).astype(E4M3), v_s, acc * alpha[:, None])` (probe68a_lib's
  online_step with p_scale=448.0) with v_s copied
  by TMA as V is stored, (keys, head_dim). The tensor cores read 8-bit operands K-major only: it was MG501, whose hint
  transposed the tile by hand. As for float32 since probe 67b, the compiler now stores it once into an (n, k) buffer
  read as its view .T (each trip: the loop's stage), and the kernel computes (the corpus's fp8_attention)."""
  run, make, ref, tol = CASES["fp8_attention"]
  args = make(0)
  ir = run.kernel.typed_ir(*[S(a.shape, a.dtype) for a in args], **run.kw)
  line = line_of(online_step, "acc = ml.dot((p * p_scale")[0]      # (the helper's dot, p_scale=448.0 here)
  at = f"# probe68a_lib.py:{line}"
  buf = next(x.split(":")[0].strip() for x in ir.splitlines() if "float8_e4m3fn> = smemalloc" in x and x.endswith(at))
  view = next(x.split(":")[0].strip() for x in ir.splitlines() if f"view ref={buf} " in x and "transpose=True" in x)
  assert any("= dot a=" in x and f"b={view} " in x for x in ir.splitlines()), ir
  _check(run, make, ref, tol)


@pytest.mark.parametrize("dtype", [jnp.int8, jnp.float8_e5m2])
def test_an_8bit_b_stored_k_by_n_computes_beside_an_smem_a_and_an_accumulator(dtype):
  """The same for a weight (in, out) of int8 or e5m2 beside an SMEM A, in a loop over k with an accumulator: each
  trip's tile transposed once."""
  @mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.int32 if a.dtype == jnp.int8 else F32),
                  grid=lambda a, b: (1,))
  def kn(a, b, c):
    a_s, b_s = ml.smem((64, 128), a.dtype), ml.smem((128, b.shape[1]), b.dtype)
    acc = ml.zeros((64, b.shape[1]), jnp.int32 if a.dtype == jnp.int8 else F32)
    for k in ml.range(a.shape[1] // 128, stages=2):
      ml.copy(a.at[:, ml.ds(k * 128, 128)], a_s)
      ml.copy(b.at[ml.ds(k * 128, 128), :], b_s)
      acc = ml.dot(a_s, b_s, acc)
    c[...] = acc

  r = np.random.default_rng(5)
  if dtype == jnp.int8:
    a, b = (jnp.asarray(r.integers(-128, 128, sh), dtype) for sh in ((64, 256), (256, 64)))
  else:
    a, b = (jnp.asarray(r.standard_normal(sh), dtype) for sh in ((64, 256), (256, 64)))
  want = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
  np.testing.assert_allclose(np.asarray(kn(a, b, interpret=True), np.float64), want, rtol=1e-5, atol=1e-3)
  jax.export.export(jax.jit(kn), platforms=["cuda"])(S(a.shape, a.dtype), S(b.shape, b.dtype)).mlir_module()


# ---------------------------------------------------------------- class 5: jnp forms' operands named as the user wrote them
@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32), grid=lambda x, w: (1,))
def gemv_rows(x, w, o):
  xv = x[...]
  wv = w[...]
  o[...] = jnp.dot(xv, wv, preferred_element_type=F32)


def test_a_jnp_dot_names_its_operands_buffers_after_the_users_values():
  """NSA's compression by a linear layer, `jnp.dot(x, w[...])` of 8 blocks by a (1024, 64) weight: past the SMEM
  limit, whose message named the compiler's buffers `x padded to 64 rows` and `x_s` (every operand of a jnp form was
  `x` in its messages), and whose hint cut `x_s`, a buffer the user never wrote. They are named after the user's
  values now (`xv`, `wv_s`), and the hint says what that buffer is and what cutting it means."""
  e = _error(gemv_rows, [S((8, 1024), BF16), S((1024, 64), BF16)], {})
  assert (type(e), e.code) == (mg.SmemCapacityError, "MG402")
  assert e.message.startswith("the kernel's SMEM needs 262144 bytes (wv_s 128 KiB, xv padded to 64 rows 128 KiB, the"
                              " 64-row product of jnp.dot(xv, wv, preferred_element_type=F32) scratch"), e.message
  assert e.hint.startswith("use smaller tiles: wv_s of shape (512, 64) instead of (1024, 64) (the buffer the compiler"
                           " stores ml.dot's register operand wv into; its rows are k: the dot becomes a loop of dots"
                           " over k adding into one accumulator)"), e.hint
  kernel, specs, kw = _specs("nsa_compress_mlp")
  e = _error(kernel, specs, kw)
  assert "xv" not in e.message and "x padded to 64 rows" in e.message     # (its own x: the user's name)
  assert "register operand w[...] into; its rows are k" in e.hint, e.hint


# ---------------------------------------------------------------- class 6: jax.nn.dot_product_attention's hint
@mg.mgpu_kernel(out_shape=lambda q, k, v: S(q.shape, q.dtype), grid=lambda q, k, v: (q.shape[0],))
def library_attention(q, k, v, o):
  b = ml.program_id(0)
  o.at[b][...] = jax.nn.dot_product_attention(q.at[b][...], k.at[b][...], v.at[b][...], is_causal=True)


@mg.mgpu_kernel(out_shape=lambda q, k, v: S(q.shape, q.dtype), grid=lambda q, k, v: (q.shape[0],))
def library_attention_written_out(q, k, v, o):
  b = ml.program_id(0)
  qt, kt, vt = q.at[b][...], k.at[b][...], v.at[b][...]
  s = jnp.einsum("tnh,snh->nts", qt, kt, preferred_element_type=jnp.float32) * (1 / q.shape[3] ** 0.5)
  s = jnp.where(jnp.tril(jnp.ones((q.shape[1], k.shape[1]), bool)), s, -1e30)
  p = jax.nn.softmax(s, axis=-1).astype(vt.dtype)
  o.at[b][...] = jnp.einsum("nts,snh->tnh", p, vt, preferred_element_type=jnp.float32).astype(o.dtype)


def test_jax_nn_dot_product_attention_in_a_kernel_gets_its_formula_which_matches_jax():
  """A model's `jax.nn.dot_product_attention(q, k, v, is_causal=True)` moved into a kernel: MG003, whose hint was
  the generic 'write what it computes with ml.* functions'. It now spells out jax's own formula for (T, N, H) tiles,
  which computes jax's numbers exactly (interpret mode), and points at the online softmax for longer keys."""
  specs = [S((2, 16, 4, 32), BF16)] * 3
  e = expect(library_attention, specs, mg.KernelTypeError, "jax.nn.dot_product_attention(",
             "dot_product_attention cannot take a register tensor inside a kernel")
  assert e.hint.startswith("jax.nn.dot_product_attention has no form in a kernel: write the attention out (a kernel"
                           " is where it is written): of (T, N, H) tiles in registers, s = jnp.einsum('tnh,snh->nts',"
                           " q, k, preferred_element_type=jnp.float32) * scale"), e.hint
  assert "o = jnp.einsum('nts,snh->tnh', p, v, preferred_element_type=jnp.float32)" in e.hint
  r = np.random.default_rng(6)
  q, k, v = (jnp.asarray(r.standard_normal((2, 16, 4, 32)), BF16) for _ in range(3))
  got = library_attention_written_out(q, k, v, interpret=True)
  np.testing.assert_array_equal(np.asarray(got, np.float32),
                                np.asarray(jax.nn.dot_product_attention(q, k, v, is_causal=True), np.float32))
  jax.export.export(jax.jit(library_attention_written_out), platforms=["cuda"])(*specs).mlir_module()


@pytest.mark.gpu
def test_gpu_the_fixed_classes_compute():
  x = np.random.default_rng(1).standard_normal((64, 256)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(jax.jit(run_time_columns_fixed)(x)), 2 * x, rtol=1e-6)
  args = mla_split_inputs(2, h=64)
  got = jax.jit(lambda *a: K.mla_decode_split_dims(*a, bkv=64, scale=0.07, halves=True))(*args)
  assert _relerr(got[0], mla_split_ref(*args)[0]) < 2e-2
  run, make, ref, tol = CASES["mla_paged_copy2"]
  args = make(3)
  assert _relerr(jax.jit(run)(*args), ref(*args)) < 2e-2
