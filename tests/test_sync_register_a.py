"""A dot's A operand in registers stays in use until the dot retires (frontend/sync.py `a_rewritten`).

WGMMA reads a register A operand while it runs, and PTX leaves writing those registers before a
`wgmma.wait_group` that covers the dot undefined. A value a loop body defines lives in the same PTX
registers on every trip, so a pipelined loop (its dots stay in flight across the back edge) that
rewrites its dot's A on the next trip must retire that dot first: before the op that defines the
operand, before the same dot is issued again (Mosaic GPU copies the operand into the instruction's
own registers), or at the back edge for an operand the loop carries. Found by the tensor-core fuzzer
(tests/dot_fuzz.py seed 1140, session 47; design notes 201-202): wrong rows on an H100, right in
interpret mode, which now reports the race (MG951) where the wait is missing.
"""
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fuzz_check
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend import sync
from probe_util import export

S = jax.ShapeDtypeStruct

# tests/dot_fuzz.py's seed 1140 as generated: wrong on an H100 before the fix (the bias's fourth register a thread,
# rows 72-79, 88-95, ... of each 128: what the A rows there read while the previous trip's dot ran)
SEED_1140 = """\
import jax
import jax.numpy as jnp
import mgpu_dsl as mg
from mgpu_dsl import language as ml
S = jax.ShapeDtypeStruct


@mg.mgpu_kernel(out_shape=lambda *a: (S((2, 172, 16), jnp.float32),), grid=(2, 1, 2))
def kernel(x0, x1, x2, o0):
  i = ml.program_id(0)
  j = ml.program_id(1)
  z = ml.program_id(2)
  b_s = ml.smem((64, 48), jnp.bfloat16)
  acc = ml.full((128, 48), 0, jnp.float32)
  for k in ml.range(ml.cdiv(96, 64), stages=4):
    av = x0.at[z, ml.ds(i * 128, 128), ml.ds(k * 64, 64)].load(mask=((i * 128 + ml.arange(128))[:, None] < 172) & ((k * 64 + ml.arange(64))[None, :] < 96), other=0)
    ml.copy(x1.at[z, ml.ds(k * 64, 64), ml.ds(j * 48, 48)], b_s)
    acc = ml.dot(av, b_s, acc)
  bias = ml.load(x2.at[ml.ds(i * 128, 128)], mask=i * 128 + ml.arange(128) < 172, other=0.0)
  y = (acc + bias[:, None])
  rows = i * 128 + ml.arange(128)
  cols = j * 48 + ml.arange(48)
  ml.store(o0.at[z, rows[:, None], cols[None, :]], y, mask=(rows[:, None] < 172) & (cols[None, :] < 16))
"""
masked_a_then_masked_bias = fuzz_check.load(types.SimpleNamespace(source=SEED_1140))


def _seed_args():
  r = np.random.default_rng(1140)
  a = (r.integers(-4, 5, (2, 172, 96)) / 2).astype(jnp.bfloat16)
  b = (r.integers(-4, 5, (2, 96, 16)) / 2).astype(jnp.bfloat16)
  bias = (r.integers(-8, 9, (172,)) / 2).astype(np.float32)
  want = np.einsum("zmk,zkn->zmn", np.asarray(a, np.float32), np.asarray(b, np.float32)) + bias[None, :, None]
  return (a, b, bias), want


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.float32))
def loaded_a(a, b, o, *, where: ml.constexpr = "body"):
  """acc += A @ B over k in a pipelined loop, A read into registers: in the body ("body"), or before
  the loop and carried by it ("carried": halved each trip; "kept": yielded unchanged)."""
  b_s = ml.smem((64, b.shape[1]))
  acc = ml.zeros((a.shape[0], b.shape[1]), jnp.float32)
  a_reg = a.at[:, ml.ds(0, 64)][...]
  for k in ml.range(a.shape[1] // 64, stages=2):
    if where == "body":
      a_reg = a.at[:, ml.ds(k * 64, 64)][...]
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s)
    acc = ml.dot(a_reg, b_s, acc)
    if where == "carried":
      a_reg = (a_reg * 0.5).astype(a.dtype)
  o[...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.float32))
def invariant_a(a, b, o):
  """acc += A @ B_k over k in a pipelined loop, A read into registers once before it (names no value the loop
  assigns: not carried)."""
  b_s = ml.smem((64, b.shape[1]))
  acc = ml.zeros((a.shape[0], b.shape[1]), jnp.float32)
  a_reg = a[...]
  for k in ml.range(b.shape[0] // 64, stages=2):
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s)
    acc = ml.dot(a_reg, b_s, acc)
  o[...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.float32))
def same_a_twice(a, b, o):
  """Two dots of one register A in straight-line code: each has registers of its own."""
  b_s = ml.smem(b.shape)
  ml.copy(b, b_s)
  a_reg = a[...]
  x = ml.dot(a_reg, b_s)
  y = ml.dot(a_reg, b_s, x)
  o[...] = y


def _loaded_a_ref(a, b, where):
  a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
  acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
  for k in range(a.shape[1] // 64):
    ak = a[:, k * 64:(k + 1) * 64] if where == "body" else a[:, :64] * (0.5 ** k if where == "carried" else 1)
    acc += ak @ b[k * 64:(k + 1) * 64]
  return acc


def _ints(shape, seed):
  return (np.random.default_rng(seed).integers(-4, 5, shape) / 2).astype(jnp.float16)


A, B = (64, 256), (256, 64)


def _body(where):
  """The pipelined loop's body of `loaded_a` (`invariant_a` for "invariant"), one op a line (its own lines only,
  not nested ones)."""
  shapes = (S((64, 64), jnp.float16), S(B, jnp.float16)) if where == "invariant" else (S(A, jnp.float16), S(B, jnp.float16))
  ir_text = invariant_a.typed_ir(*shapes) if where == "invariant" else loaded_a.typed_ir(*shapes, where=where)
  lines = [l.rstrip() for l in ir_text.splitlines()]
  top = next(i for i, l in enumerate(lines) if " = for " in l and "stages=2" in l)
  indent = len(lines[top + 2]) - len(lines[top + 2].lstrip())
  body = []
  for l in lines[top + 2:]:
    if len(l) - len(l.lstrip()) < indent:
      break
    if len(l) - len(l.lstrip()) == indent:
      body.append(l.strip())
  return body


def _index(body, pred):
  return next(i for i, l in enumerate(body) if pred(l))


def test_a_defined_in_the_body_waits_for_the_previous_trips_dot_before_its_load():
  body = _body("body")
  load = _index(body, lambda l: " = load " in l and "float16, wgmma>" in l)
  assert body[load - 1].startswith("dotwait pending=0"), body[:load + 1]


def test_a_defined_before_the_loop_waits_before_the_dot_is_issued_again():
  body = _body("invariant")
  dot = _index(body, lambda l: " = dot " in l)
  assert any(l.startswith("dotwait pending=0") for l in body[:dot]), body[:dot + 1]


@pytest.mark.parametrize("where", ["carried", "kept"])
def test_a_carried_by_the_loop_waits_at_the_back_edge(where):
  body = _body(where)
  assert body[-1].startswith("yield ") and body[-2].startswith("dotwait pending=0"), body[-4:]


def test_two_dots_of_one_register_a_in_straight_line_code_need_no_wait_between():
  lines = [l.strip() for l in same_a_twice.typed_ir(S((64, 64), jnp.float16), S((64, 64), jnp.float16)).splitlines()]
  dots = [i for i, l in enumerate(lines) if " = dot " in l]
  assert len(dots) == 2 and not any(l.startswith("dotwait") for l in lines[dots[0]:dots[1]]), lines[dots[0]:dots[1] + 1]


def _run(where, a, b, **kw):
  if where == "invariant":
    return invariant_a(a[:, :64], b, **kw)
  return loaded_a(a, b, where=where, **kw)


WHERE = ["body", "invariant", "carried", "kept"]


@pytest.mark.parametrize("where", WHERE)
def test_interpret_mode_sees_no_race_and_the_numbers_match(where):
  a, b = _ints(A, 1), _ints(B, 2)
  np.testing.assert_array_equal(np.asarray(_run(where, a, b, interpret=True)), _loaded_a_ref(a, b, where))
  if where == "invariant":
    export(invariant_a, a[:, :64], b)
  else:
    export(loaded_a, a, b, where=where)


@pytest.mark.parametrize("where", WHERE)
def test_interpret_mode_reports_the_race_when_the_wait_is_missing(where, monkeypatch):
  """Without the rule the dot runs across the back edge while its A is rewritten: interpret mode says so (MG951) at
  the statement that rewrites it, naming the dot."""
  monkeypatch.setattr(sync.SyncPass, "a_rewritten", staticmethod(lambda st, ids: None))
  monkeypatch.setenv("MGPU_DSL_CACHE_DIR", "off")      # (traced afresh, without the rule)
  a, b = _ints(A, 1), _ints(B, 2)
  for k in (loaded_a, invariant_a):
    k.cache_clear()
  try:
    with pytest.raises(mg.KernelError) as e:
      _run(where, a, b, interpret=True)
  finally:
    for k in (loaded_a, invariant_a):
      k.cache_clear()
  assert e.value.code == "MG951" and "rewritten while an ml.dot that reads it from registers" in e.value.message
  assert any("the ml.dot is issued here" in n for n in e.value.notes)


def test_seed_1140_in_interpret_mode_and_for_cuda():
  args, want = _seed_args()
  np.testing.assert_allclose(np.asarray(masked_a_then_masked_bias(*args, interpret=True)[0]), want, rtol=1e-6)
  export(masked_a_then_masked_bias, *args)


@pytest.mark.gpu
def test_gpu_seed_1140():
  args, want = _seed_args()
  np.testing.assert_allclose(np.asarray(jax.jit(masked_a_then_masked_bias)(*args)[0]), want, rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("where", WHERE)
def test_gpu_loaded_a(where):
  a, b = _ints(A, 3), _ints(B, 4)
  np.testing.assert_array_equal(np.asarray(jax.jit(lambda x, y: _run(where, x, y))(a, b)), _loaded_a_ref(a, b, where))
