"""Probe 69a (optimizer and training-step kernels as PyTorch, apex, bitsandbytes, Liger and optax authors write them:
fused Adam/AdamW/Lion/Adafactor/LAMB/SGD steps over flat buffers, mixed precision with master weights and found_inf
flags, global-norm clipping in two passes or by tickets, 8-bit block-wise states, stochastic rounding, EMA, Muon's
Newton-Schulz, label-smoothed cross-entropy forward and backward in place): the corpus (tests/probe69a_adam.py,
probe69a_amp.py, probe69a_quant.py, probe69a_triton.py, probe69a_more.py, probe69a_edges.py, probe69a_extra.py), each
kernel checked in interpret mode against its NumPy reference (bit-exact for integer and rounding paths) and exported
for CUDA; the legitimate refusals met, at the user's line with the hint that works; and the classes fixed (design
note 227): the race of a flag several programs may set (torch.amp's found_inf) hinted as the atomic update it must
be, Triton's `ptr + offsets` with the offsets written inline hinted with the user's own offsets, a gather from an
SMEM buffer hinted as the gather from the GMEM array it was copied from, take_along_axis of a tile of an odd width
(NLL's target logit) computed, and jax.tree's utilities over a kernel's pytrees traced per leaf."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where
import probe69a_adam
import probe69a_amp
import probe69a_edges
import probe69a_extra
import probe69a_more
import probe69a_quant
import probe69a_triton

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32
CASES = {**probe69a_adam.CASES, **probe69a_amp.CASES, **probe69a_quant.CASES, **probe69a_triton.CASES,
         **probe69a_more.CASES, **probe69a_edges.CASES, **probe69a_extra.CASES}


def _relerr(got, want):
  got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
  assert got.shape == want.shape, (got.shape, want.shape)
  assert np.array_equal(np.isfinite(got), np.isfinite(want)), "non-finite elements differ"
  fin = np.isfinite(want)
  if not fin.any():
    return 0.0
  return float(np.max(np.abs(got[fin] - want[fin])) / max(1e-6, float(np.max(np.abs(want[fin])))))


def _compare(name, got, want, tol):
  got, want = jax.tree.leaves(got), jax.tree.leaves(want)
  assert len(got) == len(want), name
  for g, w in zip(got, want):
    if tol == 0:                     # integer and rounding paths: bit for bit
      assert np.asarray(g).dtype == np.asarray(w).dtype, (name, np.asarray(g).dtype, np.asarray(w).dtype)
      np.testing.assert_array_equal(np.asarray(g).view(np.uint8), np.asarray(w).view(np.uint8), err_msg=name)
    else:
      assert _relerr(g, w) <= tol, (name, _relerr(g, w))


def _specs(args):
  return jax.tree.map(lambda a: S(np.shape(a), np.asarray(a).dtype), list(args))


def test_corpus_size():
  assert len(CASES) >= 80, len(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_matches_its_reference_and_builds(name):
  """Each kernel against its reference in interpret mode, then its Mosaic GPU module built for CUDA (a verifier error
  or an InternalError there fails the test). Two-kernel steps (clipping's passes, LAMB's stages) build each kernel."""
  kernel, make, ref, tol = CASES[name]
  args, kw = make(0)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.KernelWarning)
    _compare(name, kernel(*args, **kw, interpret=True), ref(*args, **kw), tol)
    jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*_specs(args)).mlir_module()


GPU_TWINS = ["adam_scalar_hparams", "adamw_0d_and_1elem_arrays", "lion_lucidrains", "adagrad_tma_2d",
             "amp_unscale_found_inf", "adamw_bf16_params_f32_master", "clip_global_norm_partials",
             "clip_grad_norm_last_ticket", "stochastic_round_bf16_philox", "lamb_trust_ratio_per_row",
             "adam8bit_blockwise_linear", "momentum8bit_dynamic_code", "muon_newton_schulz_64x128",
             "ce_label_smoothing_fwd_bwd_bf16", "liger_cross_entropy_bf16_v2051", "adam_persistent_tiles",
             "apex_lamb_two_stage_tensor_ids", "amp_flag_atomic_max_hint_followed", "dequant_code_table_gmem_gather", "dequant_code_table_smem_gather",
             "ce_jnp_take_along_axis_v100", "take_along_three_per_row_odd_width", "optax_adamw_jax_tree_map"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_TWINS)
def test_gpu_corpus_matches_its_reference(name):
  """The GPU twins: integer and rounding results bit for bit; float ones within the tolerance (the GPU's float32
  division and sqrt are an ulp off IEEE's, design note 64; bf16 dots add in another order)."""
  kernel, make, ref, tol = CASES[name]
  args, kw = make(1)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", mg.KernelWarning)
    got = jax.jit(lambda *a: kernel(*a, **kw))(*args)
  if name == "momentum8bit_dynamic_code":     # a quantised state: the nearest code may flip at a tie by an ulp
    got, want = jax.tree.leaves(got), jax.tree.leaves(ref(*args, **kw))
    assert np.mean(np.asarray(got[1]) != want[1]) < 0.01
    _compare(name, (got[0], got[2]), (want[0], want[2]), 1e-5)
    return
  _compare(name, got, ref(*args, **kw), tol if tol == 0 else max(tol, 2e-2))


# ---------------------------------------------------------------- a flag several programs may set (found_inf)
B = 256


@mg.mgpu_kernel(out_shape=lambda g: S((1,), I32), grid=lambda g: (g.shape[0] // 256,))
def flag_by_program(g, flag):
  pid = ml.program_id(0)
  if pid > 0:
    flag[0] = 1


@mg.mgpu_kernel(out_shape=lambda g, f: f, grid=lambda g, f: (g.shape[0] // 256,), input_output_aliases={1: 0})
def found_inf_if(g, f, flag):
  pid = ml.program_id(0)
  x = g.at[ml.ds(pid * 256, 256)][...]
  bad = ml.sum((~ml.isfinite(x)).astype(jnp.int32))
  if bad > 0:
    ml.store(flag.at[0], 1.0)


@mg.mgpu_kernel(out_shape=lambda g, f: f, grid=lambda g, f: (g.shape[0] // 256,), input_output_aliases={1: 0})
def overflow_0d(g, f, flag):
  pid = ml.program_id(0)
  x = g.at[ml.ds(pid * 256, 256)][...]
  if ml.max(ml.abs(x)) > 100.0:
    flag[...] = 1.0


@mg.mgpu_kernel(out_shape=lambda g: S((1,), F32), grid=lambda g: (ml.cdiv(g.shape[0], B),))
def found_inf_masked_store(g_ptr, found):
  offs = ml.program_id(0) * B + ml.arange(B)
  g = ml.load(g_ptr.at[offs], mask=offs < g_ptr.shape[0], other=0.0)
  has_inf = ml.sum(~ml.isfinite(g)) > 0
  ml.store(found.at[0], 1.0, mask=has_inf)


@mg.mgpu_kernel(out_shape=lambda g, f: f, grid=lambda g, f: (g.shape[0] // 256,), input_output_aliases={1: 0})
def found_inf_atomic(g, f, flag):     # the hint followed
  pid = ml.program_id(0)
  x = g.at[ml.ds(pid * 256, 256)][...]
  bad = ml.sum((~ml.isfinite(x)).astype(jnp.int32))
  ml.atomic_max(flag.at[0], ml.where(bad > 0, 1.0, 0.0))


def _grads(*bad, n=1024):
  g = np.random.default_rng(0).standard_normal(n).astype(np.float32)
  for i in bad:
    g[i] = np.inf
  return g


def _hint(mod, ref, cond, value, zero, where_="if"):
  return (f"several programs may set this flag, and a plain write of one element by several programs is a race:"
          f" make it an atomic update every program makes, {mod}.atomic_max({ref}, {mod}.where({cond}, {value},"
          f" {zero})) in place of the {where_} (so it ends {zero} where no program sets it: an output updated by"
          f" atomics starts at the lowest value, not at 0)")


def test_a_flag_set_under_a_condition_of_the_program_id_hints_an_atomic_max_while_compiling():
  """Before, the hint was about windows ('programs (1, 0, 0) and (2, 0, 0) differ only along grid axis 0...')."""
  expect(flag_by_program, [S((1024,), F32)], mg.RaceError, "flag[0] = 1",
         "program (1, 0, 0) and program (2, 0, 0) both write flag[0]: programs run in no fixed order, so the result"
         " depends on timing", hint=_hint("ml", "flag.at[0]", "pid > 0", "1", "0"))


@pytest.mark.parametrize("kernel, at, ref, cond", [
    (found_inf_if, "ml.store(flag.at[0], 1.0)", "flag.at[0]", "bad > 0"),
    (overflow_0d, "flag[...] = 1.0", "flag", "ml.max(ml.abs(x)) > 100.0"),
])
def test_a_found_inf_flag_under_a_data_condition_hints_an_atomic_max_in_interpret_mode(kernel, at, ref, cond):
  """torch's found_inf written as `*found_inf = 1.f` where a block has an inf: a race where two blocks have one
  (MG951 in interpret mode, the condition being data); before, the hint said to give each program its own window,
  or (a 0-d flag) to write it from one program."""
  with pytest.raises(mg.RaceError) as info:
    kernel(_grads(3, 700), np.zeros((1,) if ref != "flag" else (), np.float32), interpret=True)
  e = info.value
  assert (e.lineno, e.col_offset) == where(kernel, at), e.render()
  assert e.code == "MG951"
  assert e.hint == _hint("ml", ref, cond, "1.0", "0.0")


def test_a_masked_store_of_a_flag_hints_the_atomic_max_of_its_mask():
  with pytest.raises(mg.RaceError) as info:
    found_inf_masked_store(_grads(3, 700), interpret=True)
  e = info.value
  assert (e.lineno, e.col_offset) == where(found_inf_masked_store, "ml.store(found.at[0]"), e.render()
  assert e.hint == _hint("ml", "found.at[0]", "has_inf", "1.0", "0.0", "masked store")


def test_the_triton_found_inf_store_hints_in_triton_names():
  k = probe69a_triton.unscale_found_inf_store
  g = np.asarray(jnp.asarray(_grads(3, 4100, n=5000), jnp.bfloat16))
  with pytest.raises(mg.RaceError) as info:
    k(g, np.array([0.125], np.float32), interpret=True)
  e = info.value
  assert (e.lineno, e.col_offset) == where(k, "tl.store(found_inf_ptr, 1.0)"), e.render()
  assert e.hint == _hint("tl", "found_inf_ptr", "has_inf", "1.0", "0.0")


@pytest.mark.parametrize("bad", [(), (5,), (3, 700, 1000)])
def test_the_flag_hint_followed_computes_the_flag(bad):
  out = found_inf_atomic(_grads(*bad), np.zeros(1, np.float32), interpret=True)
  np.testing.assert_array_equal(np.asarray(out), [1.0 if bad else 0.0])
  found_inf_atomic.check(S((1024,), F32), S((1,), F32))


def _flag_make(seed):
  g = np.random.default_rng(seed).standard_normal(2048).astype(np.float32)
  g[[17, 1500]] = [np.nan, -np.inf]
  return (g, np.zeros(1, np.float32)), {}


CASES["amp_flag_atomic_max_hint_followed"] = (found_inf_atomic, _flag_make, lambda g, f: np.array([1.0], np.float32),
                                              0)


# ---------------------------------------------------------------- Triton's ptr + offsets with the offsets inline
@mg.mgpu_kernel(out_shape=lambda y: S((1,), F32), grid=(1,))
def count_valid(Y_ptr, out):
  y = ml.load(Y_ptr + ml.arange(0, 64), mask=ml.arange(0, 64) < Y_ptr.shape[0], other=-100)
  ml.store(out.at[0], ml.sum((y != -100).to(jnp.float32)))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def copy_blocks(x_ptr, o_ptr):
  pid = ml.program_id(0)
  v = ml.load(x_ptr.at[pid * 64 + ml.arange(0, 64)])
  ml.store(o_ptr + pid * 64 + ml.arange(0, 64), v)


def test_inline_offsets_are_quoted_in_the_pointer_hint():
  """Before, offsets written inline (not a name) gave the generic form: `Y_ptr.at[ml.ds(start, 64)].load(mask=mask,
  other=0.0)`, a `start` the kernel does not have and a float fill for int32 labels."""
  expect(count_valid, [S((40,), I32)], mg.KernelTypeError, "Y_ptr + ml.arange(0, 64)",
         "+ works on register values, got Y_ptr (GMEM ref) plus integer offsets: a ref is not a pointer, so offsets"
         " are not added to it",
         hint="index Y_ptr with the offsets instead of adding them: ml.load(Y_ptr.at[ml.arange(0, 64)],"
              " mask=ml.arange(0, 64) < Y_ptr.shape[0], other=-100) (a run start + ml.arange(n) moves the window it"
              " covers; other offsets gather or scatter); to add to Y_ptr's values, read it first: Y_ptr[...] + ...")


def test_a_pointer_step_inside_a_store_quotes_the_ref_as_written():
  """Before: '(for o_ptr_ptr + pid * 64 + ml.arange(n), ...)', the ref's name with `_ptr` appended."""
  e = expect(copy_blocks, [S((128,), F32)], mg.KernelTypeError, "o_ptr + pid * 64",
             "+ works on register values, got o_ptr (GMEM ref) plus the offset pid * 64: a ref is not a pointer, so"
             " it does not move by an offset")
  assert "(for o_ptr + pid * 64 + ml.arange(n), n the length of v)" in e.hint and "o_ptr_ptr" not in e.hint


def test_the_inline_offsets_hint_followed_works():
  @mg.mgpu_kernel(out_shape=lambda y: S((1,), F32), grid=(1,))
  def count_valid_at(Y_ptr, out):
    n = ml.sum((ml.load(Y_ptr.at[ml.arange(0, 64)], mask=ml.arange(0, 64) < Y_ptr.shape[0], other=-100) != -100
                ).to(jnp.float32))
    ml.store(out.at[0], n)
  y = np.arange(40, dtype=np.int32)
  y[[3, 9]] = -100
  np.testing.assert_array_equal(np.asarray(count_valid_at(y, interpret=True)), [38.0])


# ---------------------------------------------------------------- take_along_axis of a tile read padded
@pytest.mark.parametrize("m, v, k", [(16, 100, 1), (16, 100, 3), (16, 100, 8), (8, 60, 5), (16, 128, 3)])
@pytest.mark.parametrize("mode", ["ml", "fill", "clip"])
def test_take_along_axis_of_an_odd_width_tile(m, v, k, mode):
  """A (16, 100) row of logits is held padded to (16, 128); ml.take_along_axis's one-index-a-row select compared it
  with positions 0..127 unpadded, and its few-indices-a-row form took the (16, 3) indices' 32 padded columns: the
  padded trace ended and the kernel was MG204 at the call ('columns a multiple of 32'). NLL's target logit, jnp's
  take_along_axis in every mode (indices past either end included)."""
  rng = np.random.default_rng(m * v + k)
  x = rng.standard_normal((m, v)).astype(np.float32)
  ids = rng.integers(0, v, (m, k)).astype(np.int32)
  if mode != "ml":
    ids[0, 0], ids[-1, -1] = v + 3, -v - 1          # outside the axis: NaN in fill mode, clamped in clip mode

  @mg.mgpu_kernel(out_shape=lambda x, i: S(i.shape, F32), grid=(1,))
  def take(x_ref, i_ref, out):
    t = x_ref[...] * 2.0
    out[...] = (ml.take_along_axis(t, i_ref[...], axis=1) if mode == "ml" else
                jnp.take_along_axis(t, i_ref[...], axis=1, mode=mode))
  want = jnp.take_along_axis(x * 2, ids, axis=1, mode="clip" if mode == "ml" else mode)
  np.testing.assert_array_equal(np.asarray(take(x, ids, interpret=True)), np.asarray(want))
  take.check(S(x.shape, F32), S(ids.shape, I32))


# ---------------------------------------------------------------- jax.tree's utilities over a kernel's pytrees
P = {"b": (128,), "w": (64, 128)}


def _tree(seed, scale=1.0):
  return {k: np.random.default_rng(seed + i).standard_normal(s).astype(np.float32) * scale
          for i, (k, s) in enumerate(P.items())}


@mg.mgpu_kernel(out_shape=lambda p, g: p, grid=(1,))
def sgd_tree_map(params, grads, new_params):
  upd = jax.tree.map(lambda p, g: p[...] - 0.1 * g[...], params, grads)
  for k in new_params:
    new_params[k][...] = upd[k]


@mg.mgpu_kernel(out_shape=lambda g: g, grid=(1,))
def clip_global_norm_tree(grads, out):
  g = jax.tree_util.tree_map(lambda r: r[...], grads)
  sq = jax.tree.reduce(lambda a, b: a + b, jax.tree.map(lambda x: jnp.sum(x * x), g))
  leaves, treedef = jax.tree.flatten(g)
  scaled = jax.tree.unflatten(treedef, [x * jnp.minimum(1.0, 1.0 / (jnp.sqrt(sq) + 1e-6)) for x in leaves])
  for r, x in zip(jax.tree_util.tree_leaves(out), jax.tree.leaves(scaled)):
    r[...] = x


def test_jax_tree_map_over_refs_is_traced_per_leaf():
  """jax.tree.map was taken for lax.map (its name is `map`): MG003 'JAX's control flow', hinting `for j in
  range(n)`; jax.tree.leaves of refs was MG003 'has no form in a kernel'."""
  p, g = _tree(0), _tree(5)
  got = sgd_tree_map(p, g, interpret=True)
  for k in P:
    np.testing.assert_allclose(np.asarray(got[k]), p[k] - np.float32(0.1) * g[k], rtol=1e-6)
  sgd_tree_map.check({k: S(s, F32) for k, s in P.items()}, {k: S(s, F32) for k, s in P.items()})


def test_jax_tree_reduce_flatten_unflatten_and_tree_util_names():
  g = _tree(9, 0.05)
  got = clip_global_norm_tree(g, interpret=True)
  norm = np.sqrt(sum((x.astype(np.float64) ** 2).sum() for x in g.values()))
  for k in P:
    np.testing.assert_allclose(np.asarray(got[k]), g[k] * min(1.0, 1.0 / (norm + 1e-6)), rtol=1e-5)
  assert norm > 1.0          # (the clip scales)
  clip_global_norm_tree.check({k: S(s, F32) for k, s in P.items()})


def test_lax_map_keeps_its_control_flow_hint():
  @mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
  def lax_mapped(x, o):
    o[...] = jax.lax.map(lambda r: r * 2.0, x[...])
  with pytest.raises(mg.KernelTypeError) as info:
    lax_mapped.check(S((8, 128), F32))
  assert "is JAX's control flow, which a kernel writes in Python" in info.value.message


# ---------------------------------------------------------------- legitimate refusals, at the line, with the fix
def test_triton_pointer_arguments_are_refused_at_each_pointer_with_the_window():
  k = probe69a_triton.fused_adamw_ptr
  e = expect(k, [S((3000,), F32)] * 2 + [S((1,), F32)], mg.KernelTypeError, "params_ptr + offsets",
             "+ works on register values, got params_ptr (GMEM ref) plus integer offsets: a ref is not a pointer, so"
             " offsets are not added to it")
  assert e.hint.startswith("index params_ptr with the offsets instead of adding them: tl.load(params_ptr.at[offsets],"
                           " mask=mask)")


@mg.mgpu_kernel(out_shape=lambda p, g: p, grid=(2,))
def sgd_register_pipelined(p, g, p_out):
  for t in ml.range(ml.program_id(0), p.shape[0] // 64, ml.num_programs(0), stages=2):
    r = ml.ds(t * 64, 64)
    p_out[r, :] = p[r, :] - 0.1 * g[r, :]


def test_a_pipelined_loop_of_register_reads_says_to_copy_tiles():
  e = expect(sgd_register_pipelined, [S((256, 128), F32)] * 2, mg.PipelineError, "for t in ml.range(",
             "ml.range(..., stages=) found no TMA load to pipeline at the top level of this loop")
  assert "load the loop's tiles with ml.copy(gmem.at[...k...], buf) into buffers allocated before the loop" in e.hint


def test_an_in_place_update_of_a_pipelined_tile_says_to_write_a_separate_buffer():
  k = probe69a_edges.sgd_inplace_pipelined
  expect(k, [S((320, 128), F32)] * 2, mg.PipelineError, "ps[...] = ps[...] - 0.01",
         "ps is loaded by TMA in a pipelined loop, so the loop may only read it whole (ml.dot, ml.copy from it, or"
         " [...]), read windows of it into registers, or pass windows of it to ml.dot",
         hint="write results into a separate ml.smem buffer (the compiler multi-buffers it too)")
