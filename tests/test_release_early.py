"""A warp-specialised loop whose stages only dots read releases the previous stage at the first wait
that retires its dots (frontend/warp_specialize.py release_early), and interpret mode catches a
release that comes before that wait: the producer refills the stage at once (lowering/roles.py)."""
import copy
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend import ir
from mgpu_dsl.frontend import ops as O
from mgpu_dsl.lowering import interpret as interp
from locate import where

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import attention as ex  # noqa: E402

S = jax.ShapeDtypeStruct
F16 = jnp.float16


@mg.mgpu_kernel(out_shape=lambda q, k: S((q.shape[0], 64), jnp.float32), grid=lambda q, k: (q.shape[0] // 64,))
def row_max_scores(q, k, out):
  """The scores' dot read at once (a wait, then the max), then a second dot of the same stage."""
  i = ml.program_id(0)
  q_s, k_s = ml.smem((64, 64), F16), ml.smem((64, 64), F16)
  ml.copy(q.at[ml.ds(i * 64, 64)], q_s)
  m = ml.full((64,), -float("inf"), jnp.float32)
  acc = ml.zeros((64, 64), jnp.float32)
  for j in ml.range(k.shape[0] // 64, stages=2, warp_specialize=True):
    ml.copy(k.at[ml.ds(j * 64, 64)], k_s)
    s = ml.dot(q_s, k_s.T)
    m = ml.maximum(m, ml.max(s, axis=1))
    acc = ml.dot(s.astype(F16), k_s, acc)
  out.at[ml.ds(i * 64, 64)][...] = acc + m[:, None]


@mg.mgpu_kernel(out_shape=lambda q, k: S((q.shape[0], 64), jnp.float32), grid=lambda q, k: (q.shape[0] // 64,))
def scores_and_registers(q, k, out):
  """The stage also read into registers: released at the body's end, as before."""
  i = ml.program_id(0)
  q_s, k_s = ml.smem((64, 64), F16), ml.smem((64, 64), F16)
  ml.copy(q.at[ml.ds(i * 64, 64)], q_s)
  acc = ml.zeros((64, 64), jnp.float32)
  for j in ml.range(k.shape[0] // 64, stages=2, warp_specialize=True):
    ml.copy(k.at[ml.ds(j * 64, 64)], k_s)
    s = ml.dot(q_s, k_s.T)
    acc = acc + s + k_s[...].astype(jnp.float32)
  out.at[ml.ds(i * 64, 64)][...] = acc


def _ref_row_max(q, k):
  qf, kf = q.astype(jnp.float32), k.astype(jnp.float32)
  acc, m = 0.0, jnp.full((q.shape[0],), -jnp.inf)
  for j in range(k.shape[0] // 64):
    s = qf @ kf[j * 64:(j + 1) * 64].T
    m = jnp.maximum(m, s.max(axis=1))
    acc = acc + s.astype(F16).astype(jnp.float32) @ kf[j * 64:(j + 1) * 64]
  return acc + m[:, None]


def _inputs(rows=128, keys=256):
  kq, kk = rand.split(rand.key(0))
  return (rand.normal(kq, (rows, 64), F16) * 0.5,
          rand.normal(kk, (keys, 64), F16) * 0.5)


def _consumer_loop(text):
  body = text[text.index("warp_specialize=True"):]
  return body[:body.index("yield values=[%")]     # the loop body, to its yield of the carried values


def test_the_previous_stage_is_released_at_the_scores_wait_not_at_the_end():
  q, k = _inputs()
  loop = _consumer_loop(row_max_scores.typed_ir(S(q.shape, F16), S(k.shape, F16)))
  wait, release, reduce = loop.index("dotwait pending=0"), loop.index("barrierarrive"), loop.index("reduce kind=max")
  assert wait < release < reduce
  np.testing.assert_allclose(row_max_scores(q, k, interpret=True), _ref_row_max(q, k), rtol=2e-2, atol=2e-2)


def test_a_stage_read_into_registers_is_released_at_the_end():
  q, k = _inputs()
  loop = _consumer_loop(scores_and_registers.typed_ir(S(q.shape, F16), S(k.shape, F16)))
  assert loop.index("barrierarrive") > loop.rindex("binary kind=add")
  want = sum(q.astype(jnp.float32) @ k[j * 64:(j + 1) * 64].astype(jnp.float32).T
             + jnp.tile(k[j * 64:(j + 1) * 64].astype(jnp.float32), (2, 1)) for j in range(4))   # each program's k_j
  np.testing.assert_allclose(scores_and_registers(q, k, interpret=True), want, rtol=2e-2, atol=2e-2)


def _release_before_the_wait(kernel):
  """The release of the previous stage moved to just after the loop's first dot (before its wait)."""
  ws = next(o for o in kernel.body.ops if isinstance(o, O.WarpSpecialize))
  for loop in [o for o in ir.walk(ws.consumer) if isinstance(o, O.For) and o.warp_specialize]:
    ops = loop.body.ops
    at = next(i for i, o in enumerate(ops) if isinstance(o, O.If) and isinstance(o.then_block.ops[0], O.BarrierArrive))
    d = next(i for i, o in enumerate(ops) if isinstance(o, O.Dot))
    need = {id(v) for v in ops[at].operands()} | {id(v) for x in ir.walk(ops[at].then_block) for v in x.operands()}
    deps = [o for o in ops[d + 1:at] if any(id(r) in need for r in o.results)]
    need |= {id(v) for x in deps for v in x.operands()}
    deps = [o for o in ops[d + 1:at] if any(id(r) in need for r in o.results)]
    moved = deps + [ops[at]]
    ops[d + 1:at + 1] = moved + [o for o in ops[d + 1:at] if all(o is not m for m in moved)]


@pytest.mark.parametrize("stages", [2, 3])
def test_a_release_before_the_dots_wait_is_a_race_in_interpret_mode(stages):
  """The producer refills the released stage while the scores' dot may still read it."""
  q, k = _inputs()
  hit = row_max_scores._compile((q, k), {})
  kernel, specs = copy.deepcopy(hit["kernel"]), hit["out_specs"]
  _release_before_the_wait(kernel)
  with pytest.raises(interp.RaceError, match="overwritten while an ml.dot may still be reading it") as e:
    interp.run(kernel, [q, k], specs)
  assert e.value.lineno == where(row_max_scores, "ml.copy(k.at")[0]


@pytest.mark.parametrize("causal", [False, True])
def test_two_stage_warp_specialised_attention_interprets(causal):
  ks = rand.split(rand.key(1), 3)
  q, k, v = (rand.normal(x, (1, 384, 2, 128), F16) for x in ks)
  cfg = ex.Config(bq=128, bkv=128, stages=2, overlap=False, ws=True)
  got = ex.attention(q, k, v, causal, config=cfg, interpret=True)
  np.testing.assert_allclose(got.astype(jnp.float32), ex.reference(q, k, v, causal)[0].astype(jnp.float32),
                             rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_gpu_early_released_stages_match_interpret_mode():
  q, k = _inputs(rows=256, keys=1024)
  np.testing.assert_allclose(np.asarray(jax.jit(row_max_scores)(q, k)), np.asarray(row_max_scores(q, k, interpret=True)),
                             rtol=2e-2, atol=2e-2)
  ks = rand.split(rand.key(2), 3)
  q, k, v = (rand.normal(x, (2, 1024, 4, 128), F16) for x in ks)
  for causal in (False, True):
    cfg = ex.Config(bq=128, bkv=128, stages=2, overlap=False, ws=True, persistent=True)
    got = jax.jit(lambda q, k, v: ex.attention(q, k, v, causal, config=cfg))(q, k, v)
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(ex.reference(q, k, v, causal)[0], np.float32),
                               rtol=2e-2, atol=2e-2)
