"""Random row-wise kernels (reductions, broadcasts, keepdims, index grids, vectors from memory),
each checked three ways: it builds a verified Mosaic GPU module, interpret mode matches numpy
evaluating the same program, and (on the GPU, -m gpu) the GPU matches interpret mode.

A kernel is a chain of statements over a block of R rows of x: tiles (R, C), row vectors (R,),
column vectors (C,) and scalars, combined the ways users combine them. The generator writes
the kernel's source and the numpy program side by side. Bug hunts:
    MGPU_DSL_FUZZ_ROWWISE=500 python -m pytest -q tests/test_fuzz_rowwise.py
"""
import importlib.util
import os
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

N = int(os.environ.get("MGPU_DSL_FUZZ_ROWWISE", "12"))
HEADER = """import jax, jax.numpy as jnp
import mgpu_dsl as mg
from mgpu_dsl import language as ml

@mg.mgpu_kernel(out_shape=lambda x, w: (x, jax.ShapeDtypeStruct((x.shape[0],), jnp.float32)),
                grid=lambda x, w: (x.shape[0] // {R},))
def k(x, w, out, rows_out):
  i = ml.program_id(0)
  t0 = x.at[ml.ds(i * {R}, {R}), :][...].astype(jnp.float32)
  c0 = w[...].astype(jnp.float32)
"""


class Program:
  """Parallel kernel source and numpy source over blocks: numpy arrays carry a leading block
  axis (G), so a tile is (G, R, C), a row vector (G, R), a column vector (G, C), a scalar (G,)."""

  def __init__(self, rng, R, C):
    self.rng, self.R, self.C = rng, R, C
    self.k, self.n = [], []
    self.vars = {"tile": ["t0"], "row": [], "col": ["c0"], "scalar": []}
    self.count = 0

  def new(self, kind, kexpr, nexpr):
    name = f"{kind[0]}{self.count + 1}"
    self.count += 1
    self.k.append(f"  {name} = {kexpr}")
    self.n.append(f"{name} = {nexpr}")
    self.vars[kind].append(name)

  def pick(self, kind):
    return self.rng.choice(self.vars[kind])

  def step(self):
    r = self.rng
    choices = ["tile_bin", "tile_row", "tile_col", "tile_fn", "row_red", "col_red", "scalar_red",
               "tile_keep", "tile_iota", "tile_where", "row_bin"]
    if not self.vars["row"]:
      choices = [c for c in choices if c not in ("tile_row", "row_bin")]
    what = r.choice(choices)
    op = r.choice(["+", "-", "*"])
    if what == "tile_bin":
      a, b = self.pick("tile"), self.pick("tile")
      self.new("tile", f"{a} {op} {b}", f"{a} {op} {b}")
    elif what == "tile_row":
      a, v = self.pick("tile"), self.pick("row")
      self.new("tile", f"{a} {op} {v}[:, None]", f"{a} {op} {v}[:, :, None]")
    elif what == "tile_col":
      a, v = self.pick("tile"), self.pick("col")
      self.new("tile", f"{a} {op} {v}[None, :]", f"{a} {op} {v}[:, None, :]")
    elif what == "tile_fn":
      a = self.pick("tile")
      fn = r.choice([("ml.tanh", "np.tanh"), ("ml.exp", "np.exp"), ("ml.abs", "np.abs")])
      arg = f"{a} * 0.1" if fn[0] == "ml.exp" else a
      self.new("tile", f"{fn[0]}({arg})", f"{fn[1]}({arg})")
    elif what == "row_red":
      a = self.pick("tile")
      red = r.choice(["sum", "max", "min"])
      self.new("row", f"ml.{red}({a}, axis=1)", f"np.{red}({a}, axis=2)")
    elif what == "col_red":
      a = self.pick("tile")
      red = r.choice(["sum", "max", "min"])
      self.new("col", f"ml.{red}({a}, axis=0)", f"np.{red}({a}, axis=1)")
    elif what == "scalar_red":
      a = self.pick(r.choice(["tile", "col"] + (["row"] if self.vars["row"] else [])))
      red = r.choice(["sum", "max"])
      axes = "(1, 2)" if a.startswith("t") else "1"
      self.new("scalar", f"ml.{red}({a})", f"np.{red}({a}, axis={axes})")
    elif what == "tile_keep":
      a = self.pick("tile")
      self.new("tile", f"{a} - ml.max({a}, axis=1, keepdims=True)", f"{a} - np.max({a}, axis=2, keepdims=True)")
    elif what == "tile_iota":
      a = self.pick("tile")
      self.new("tile", f"{a} + (ml.arange({self.R})[:, None] * {self.C} + ml.arange({self.C})[None, :]).astype(jnp.float32) * 0.001",
               f"{a} + (np.arange({self.R})[:, None] * {self.C} + np.arange({self.C})[None, :])[None].astype(np.float32) * 0.001")
    elif what == "tile_where":
      a, v = self.pick("tile"), self.pick("col")
      self.new("tile", f"ml.where({a} > 0, {a}, {v}[None, :])", f"np.where({a} > 0, {a}, {v}[:, None, :])")
    elif what == "row_bin":
      a, b = self.pick("row"), self.pick("row")
      self.new("row", f"ml.maximum({a}, {b}) {op} 1.0", f"np.maximum({a}, {b}) {op} 1.0")

  def finish(self):
    t = self.vars["tile"][-1]
    parts_k, parts_n = [t], [t]
    if self.vars["scalar"]:
      s = self.vars["scalar"][-1]
      parts_k.append(f"ml.tanh({s} * 0.01)")
      parts_n.append(f"np.tanh({s} * 0.01)[:, None, None]")
    row = self.vars["row"][-1] if self.vars["row"] else None
    self.k.append(f"  out.at[ml.ds(i * {self.R}, {self.R}), :][...] = ({' + '.join(parts_k)}).astype(out.dtype)")
    self.n.append(f"out = {' + '.join(parts_n)}")
    if row:
      self.k.append(f"  rows_out.at[ml.ds(i * {self.R}, {self.R})][...] = {row}")
      self.n.append(f"rows_out = {row}")
    else:
      self.k.append(f"  rows_out.at[ml.ds(i * {self.R}, {self.R})][...] = ml.sum(t0, axis=1)")
      self.n.append("rows_out = np.sum(t0, axis=2)")


def make(seed):
  rng = random.Random(seed)
  R = rng.choice([1, 2, 4, 8])
  C = rng.choice([128, 256, 512]) if R < 4 else rng.choice([32, 64, 128, 256])
  G = rng.choice([1, 2, 3])
  p = Program(rng, R, C)
  for _ in range(rng.randint(2, 7)):
    p.step()
  p.finish()
  return R, C, G, HEADER.format(R=R) + "\n".join(p.k) + "\n", "\n".join(p.n)


def load(src, tmp_path, seed):
  path = tmp_path / f"fuzz_rowwise_{seed}.py"
  path.write_text(src)
  spec = importlib.util.spec_from_file_location(f"fuzz_rowwise_{seed}", path)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod.k


def reference(nsrc, x, w, R, G):
  env = {"np": np, "t0": x.reshape(G, R, -1).astype(np.float32), "c0": np.broadcast_to(w, (G,) + w.shape)}
  exec(nsrc, env)
  return env["out"].reshape(G * R, -1), env["rows_out"].reshape(G * R)


def inputs(seed, R, C, G):
  rng = np.random.default_rng(seed)
  return rng.standard_normal((G * R, C)).astype(np.float32), rng.standard_normal((C,)).astype(np.float32)


@pytest.mark.parametrize("seed", range(N))
def test_random_rowwise_kernel_builds_and_interprets_like_numpy(seed, tmp_path):
  R, C, G, src, nsrc = make(seed)
  k = load(src, tmp_path, seed)
  x, w = inputs(seed, R, C, G)
  S = jax.ShapeDtypeStruct
  k.check(S(x.shape, jnp.float32), S(w.shape, jnp.float32))       # a verified Mosaic GPU module
  got = k(x, w, interpret=True)
  want = reference(nsrc, x, w, R, G)
  for g, e in zip(got, want):
    np.testing.assert_allclose(np.asarray(g), e, rtol=2e-4, atol=2e-4, err_msg=src)


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(max(N, 40)))
def test_random_rowwise_kernel_on_the_gpu_matches_interpret_mode(seed, tmp_path):
  R, C, G, src, _ = make(seed)
  k = load(src, tmp_path, seed)
  x, w = inputs(seed, R, C, G)
  for g, e in zip(k(x, w), k(x, w, interpret=True)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-4, atol=1e-4, err_msg=src)
