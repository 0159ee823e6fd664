"""Index vectors copied for each use (frontend/remat.py) never move a read of memory into a loop: a row statistic
read once before a loop and stretched into tiles inside it (attention's backward: its LSE and delta rows before the
key loop) stays read once. Probe 51f's `(n, 1)` rows made once counted `v[:, None]` and its stretch into a tile as
two orientations, so the read was copied to its uses inside the loop and repeated every trip (session 40, found by
comparing the examples' MLIR)."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


@mg.mgpu_kernel(out_shape=lambda x, lse: S(x.shape, F32))
def minus_row_stat(x, lse, out):
  r = ml.arange(128)
  ok = r < lse.shape[0]
  l = ml.load(lse.at[r], mask=ok, other=0.0) * 1.4426950408889634
  d = ml.load(lse.at[r], mask=ok, other=0.0)
  for j in range(x.shape[1] // 128):
    t = x.at[:, ml.ds(j * 128, 128)][...]
    out.at[:, ml.ds(j * 128, 128)][...] = (t - l[:, None]) * d[:, None]


def _loop_body(text: str) -> str:
  return text[text.index(" = for ") if " = for " in text else text.index("for "):]


def test_a_row_read_before_a_loop_is_not_read_again_inside_it():
  specs = (S((128, 512), F32), S((100,), F32))
  body = _loop_body(minus_row_stat.typed_ir(*specs))
  assert "maskedload" not in body, body
  x = np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32)
  lse = np.random.default_rng(1).standard_normal(100).astype(np.float32)
  got = minus_row_stat(x, lse, interpret=True)
  pad = np.zeros(128, np.float32)
  pad[:100] = lse
  np.testing.assert_allclose(got, (x - (pad * np.float32(1.4426950408889634))[:, None]) * pad[:, None], rtol=1e-6)
  assert "mosaic_gpu" in jax.export.export(jax.jit(lambda *a: minus_row_stat(*a)), platforms=["cuda"])(
      *specs).mlir_module()
