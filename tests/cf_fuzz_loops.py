"""Probe 59c's control-flow fuzzer (tests/cf_fuzz.py): the statements that loop (`range` / `ml.range` /
`ml.static_range` loops and their headers, `while` loops, the two-loop exit, a loop variable read after its loop, a
ref's rows), JAX's loops and conds (`lax.fori_loop`, `while_loop`, `cond`, `switch`, of lambdas and defs), and helpers
of the body whose loops return early. A mixin of `cf_fuzz.Gen`, whose names, expressions and blocks they use.
"""
from __future__ import annotations


class LoopStatements:
  """Gen's looping statements (see the module's docstring)."""

  def _range(self):
    r = self.r
    k = r.randrange(14)
    rng = r.choice(["range", "range", "ml.range"])
    n = f"n0[{r.randrange(8)}]" if r.random() < 0.6 else f"n1[pid, {r.randrange(4)}]"
    if k == 0:
      self.tags.add("for_static")
      return f"{rng}({r.randint(0, 4)})"
    if k == 1:
      self.tags.add("for_static")
      return f"{rng}({r.randint(0, 2)}, {r.randint(1, 6)}, {r.randint(1, 2)})"
    if k == 2:
      self.tags.add("for_desc")
      return f"{rng}({n} - 1, -1, -1)"
    if k == 3:
      self.tags.add("for_rt_step")
      return f"{rng}(1, {n} + 1, 2)"
    if k == 4 and self.idx:
      self.tags.add("for_dep")   # an inner loop bounded by the outer index
      return f"{rng}({r.choice(self.idx)})"
    if k == 5:
      self.tags.add("for_reversed")
      return f"reversed(range({n}))"
    m = f"n0[{r.randrange(8)}]"
    if k == 6:
      self.tags.add("for_rt_start")       # a start past the stop too: no trip
      return f"{rng}({m}, {n})"
    if k == 7:
      self.tags.add("for_desc_step")
      return f"{rng}({n} + 2, 0, -2)"
    if k == 8:
      self.tags.add("for_float_bound")
      return f"{rng}(int(jnp.abs(xs[{r.randrange(8)}])) % 4)"
    if k == 9:
      self.tags.add("for_reversed")
      return f"reversed(range({m}, {n}))"
    if k == 10:
      self.tags.add("range_slice")
      return r.choice([f"range({n})[1:]", f"range({m}, {n})[::-1]", f"range({n} + 3)[::2]", f"range(1, {n} + 2, 2)[::-1]"])
    self.tags.add("for_rt")
    return f"{rng}({n})"

  def s_for(self, depth):
    i = f"i{self.loop_ids}"
    self.loop_ids += 1
    pushed = [i]
    if self.r.random() < 0.15:
      self.tags.add("enumerate")
      rg = self._range()
      while rg.startswith("reversed") or "[" in rg:      # (enumerate of a reversed range: an iterator)
        rg = self._range()
      self.emit(f"for e{i}, {i} in enumerate({rg}, {self.r.randint(0, 2)}):")
      pushed.append(f"e{i}")
    else:
      self.emit(f"for {i} in {self._range()}:")
    self.ind += 1
    self.idx += pushed
    self.loops.append(i)
    self.block(depth + 1, self.r.randint(1, 4))
    self.loops.pop()
    del self.idx[-len(pushed):]
    self.ind -= 1
    if self.r.random() < 0.15:
      self.tags.add("for_else")
      self.emit("else:")
      self.ind += 1
      self.block(depth + 1, 1)
      self.ind -= 1

  def s_while(self, depth):
    self.tags.add("while")
    w = f"w{self.loop_ids}"
    self.loop_ids += 1
    self.whiles.append(w)
    self.emit(f"{w} = 0")
    k = self.r.randrange(4)
    if k == 0:
      c = f"{w} < n0[{self.r.randrange(8)}]"
    elif k == 1:
      self.tags.add("while_data")
      c = f"{w} < {self.r.randint(1, 5)} and {self.reduction()} < {self.fconst()}"
    elif k == 2:
      self.tags.add("while_data")
      c = f"{self.r.choice(self.S)} < {self.fconst()} and {w} < {self.r.randint(1, 5)}"
    else:      # (a bound the body cannot move: not a counter it may add to)
      c = f"{w} < {self.r.choice(['pid', f'n0[{self.r.randrange(8)}]', f'n1[pid, {self.r.randrange(4)}]'] + self.idx)} + 1"
    self.emit(f"while {c}:")
    self.ind += 1
    self.emit(f"{w} += 1")
    self.idx.append(w)
    self.loops.append(w)
    self.block(depth + 1, self.r.randint(1, 3))
    self.loops.pop()
    self.idx.pop()
    self.ind -= 1

  def s_fori(self, depth):
    self.tags.add("fori")
    t = self.r.choice(self.T)
    lo = self.r.choice(["0", "1", f"n0[{self.r.randrange(8)}]"])
    hi = self.r.choice([str(self.r.randint(0, 4)), f"n0[{self.r.randrange(8)}]", f"n1[pid, {self.r.randrange(4)}]"])
    saved = self.idx
    self.idx = ["j"]           # the lambda's body: its counter, the carry, and no GMEM reads (pure)
    body = self._pure_tensor("a")
    self.idx = saved
    self.emit(f"{t} = lax.fori_loop({lo}, {hi}, lambda j, a: {self.clipped(body)}, {t})")

  def _pure_tensor(self, carry):
    r = self.r
    a, b = carry, r.choice(self.T + [carry])
    k = r.randrange(5)
    if k == 0:
      return f"{a} + {b} * 0.5"
    if k == 1:
      return f"jnp.maximum({a}, {b}) - 1.0"
    if k == 2:
      ax = "ml.arange({})".format(self.shape[-1]) + ("[None, :]" if len(self.shape) == 2 else "")
      return f"ml.where({ax} % 4 == j % 4, {a} + 1.0, {b})"
    if k == 3:
      return f"{a} * 0.5 + j"
    return f"jnp.where({a} > {self.fconst()}, {a} - {b}, {a} + 2.0)"

  def s_switch(self, depth):
    self.tags.add("lax_switch")
    t = self.r.choice(self.T)
    self.emit(f"{t} = lax.switch({self.int_scalar()}, [lambda a: a + 1.0, lambda a: a * 0.5, lambda a: -a], {t})")

  def s_fori_def(self, depth):
    """lax.fori_loop of a def whose body branches, loops and returns early under a run-time if."""
    self.tags.add("fori_def")
    f = f"body{self.loop_ids}"
    self.loop_ids += 1
    t, sc = self.r.choice(self.T), self.r.choice(self.S)
    u = self.r.choice(self.T)
    self.emit(f"def {f}(j, ca):")
    self.emit("  a, b = ca")
    if self.r.random() < 0.5:
      self.emit(f"  if jnp.max(a) > {self.fconst()}:")
      self.emit("    return (a - 1.0, b)")
    self.emit("  if j % 2 == 0:")
    self.emit(f"    a = {self.clipped('a + ' + u)}")
    self.emit("  else:")
    self.emit("    for q in range(j):")
    self.emit("      b = b + 1.0")
    self.emit("  while b > 10.0:")
    self.emit("    b = b * 0.5")
    self.emit("  return (a, b)")
    lo = self.r.choice(["0", "1", f"n0[{self.r.randrange(8)}]"])
    hi = self.r.choice([str(self.r.randint(0, 4)), f"n0[{self.r.randrange(8)}]", f"n1[pid, {self.r.randrange(4)}]"])
    self.emit(f"{t}, {sc} = lax.fori_loop({lo}, {hi}, {f}, ({t}, {sc}))")

  def s_while_def(self, depth):
    """lax.while_loop of defs: a condition reading the carry, a body that branches."""
    self.tags.add("while_def")
    k = self.loop_ids
    self.loop_ids += 1
    t = self.r.choice(self.T)
    self.emit(f"def cond{k}(ca):")
    self.emit(f"  return (ca[1] < {self.r.randint(0, 4)}) & (jnp.min(ca[0]) < {self.fconst()})")
    self.emit(f"def step{k}(ca):")
    self.emit("  v, m = ca")
    self.emit(f"  if m % 2 == {self.r.randint(0, 1)}:")
    self.emit(f"    v = {self.clipped('v + 3.0')}")
    self.emit("  else:")
    self.emit("    v = jnp.where(v > 0.0, v, v + 6.0)")
    self.emit("  return v, m + 1")
    self.emit(f"{t}, _ = lax.while_loop(cond{k}, step{k}, ({t}, 0))")

  def s_while_tensor(self, depth):
    """A while loop on a reduction of the tensor its body grows (it ends: the body adds to every element)."""
    self.tags.add("while_tensor")
    t = self.r.choice(self.T)
    self.emit(f"while {self.r.choice(['jnp', 'ml'])}.max({t}) < {self.fconst()}:")
    self.emit(f"  {t} = {t} + {self.r.choice(['16.0', '40.5', '64.0'])}")

  def s_helper_while(self, depth):
    """A helper whose while loop returns early."""
    self.tags.add("helper_while")
    h = f"helper{self.loop_ids}"
    self.loop_ids += 1
    t = self.r.choice(self.T)
    self.emit(f"def {h}(v, n):")
    self.emit("  k = 0")
    self.emit("  while k < n:")
    self.emit("    k += 1")
    self.emit(f"    if jnp.min(v) > {self.fconst()}:")
    self.emit("      return v - k")
    self.emit(f"    v = {self.clipped('v * 2.0 + 1.0')}")
    self.emit("  return v")
    self.emit(f"{t} = {h}({t}, {self.int_scalar()})")

  def s_lastidx(self, depth):
    """A loop variable bound before the loop: after it, the last index (or its value before, no trip run)."""
    self.tags.add("loopvar_after")
    i = f"i{self.loop_ids}"
    self.loop_ids += 1
    self.emit(f"{i} = {self.r.randint(0, 3)}")
    self.emit(f"for {i} in {self._range()}:")
    self.ind += 1
    self.idx.append(i)
    self.loops.append(i)
    if self.r.random() < 0.3:
      self.tags.add("loopvar_rebound")
      self.emit(f"{i} = {i} + {self.r.randint(1, 3)}")
    self.block(depth + 1, self.r.randint(1, 2))
    self.loops.pop()
    self.ind -= 1
    c = self.r.choice(self.C)
    self.emit(f"{c} = ({c} + {i}) % 97")
    self.idx.pop()

  def s_while_walrus(self, depth):
    self.tags.add("while_walrus")
    w = f"w{self.loop_ids}"
    self.loop_ids += 1
    self.emit(f"{w} = 0")
    self.emit(f"while (m{w} := n0[{w} % 8]) > {self.r.randint(0, 2)} and {w} < {self.r.randint(1, 4)}:")
    self.ind += 1
    self.emit(f"{w} += 1")
    self.idx += [w, f"m{w}"]
    self.loops.append(w)
    self.block(depth + 1, self.r.randint(1, 2))
    self.loops.pop()
    del self.idx[-2:]
    self.ind -= 1

  def s_for_else_jump(self, depth):
    """Python's way of leaving two loops: an inner loop's else continues the outer one, then a break."""
    self.tags.add("two_loop_exit")
    i, j = f"i{self.loop_ids}", f"i{self.loop_ids + 1}"
    self.loop_ids += 2
    self.emit(f"for {i} in {self._range()}:")
    self.ind += 1
    self.idx.append(i)
    self.emit(f"for {j} in {self._range()}:")
    self.ind += 1
    self.idx.append(j)
    self.s_t(depth)
    self.emit(f"if {self.cond(1)}:")
    self.emit("  break")
    self.idx.pop()
    self.ind -= 1
    self.emit("else:")
    self.emit("  continue")
    self.s_s(depth)
    self.emit("break")
    self.idx.pop()
    self.ind -= 1

  def s_lax_while(self, depth):
    """lax.while_loop of a (tensor, counter) carry, the condition reading the tensor."""
    self.tags.add("lax_while")
    t = self.r.choice(self.T)
    bound = self.r.randint(0, 4)
    self.emit(f"{t}, _ = lax.while_loop(lambda ca: (ca[1] < {bound}) & (jnp.max(ca[0]) < {self.fconst()}),")
    self.emit(f"                        lambda ca: ({self.clipped('ca[0] * 2.0 + 1.0')}, ca[1] + 1), ({t}, 0))")

  def s_lax_cond(self, depth):
    self.tags.add("lax_cond")
    t, u = self.r.choice(self.T), self.r.choice(self.T)
    self.emit(f"{t} = lax.cond({self.cond(1)}, lambda a, b: {self.clipped('a + b')}, lambda a, b: a - 1.0, {t}, {u})")

  def s_while_true(self, depth):
    self.tags.add("while_true")
    w = f"w{self.loop_ids}"
    self.loop_ids += 1
    self.emit(f"{w} = 0")
    self.emit("while True:")
    self.ind += 1
    self.emit(f"{w} += 1")
    self.idx.append(w)
    self.emit(f"if {w} > {self.r.randint(1, 4)} or {self.cond(1)}:")     # (first: a continue cannot skip it)
    self.emit("  break")
    self.loops.append(w)
    self.block(depth + 1, self.r.randint(1, 2))
    self.loops.pop()
    self.idx.pop()
    self.ind -= 1

  def s_helper(self, depth):
    """A def in the body (an inline helper) whose loop returns early."""
    self.tags.add("helper")
    h = f"helper{self.loop_ids}"
    self.loop_ids += 1
    t = self.r.choice(self.T)
    self.emit(f"def {h}(v, n):")
    self.emit("  for k in range(n):")
    self.emit(f"    if jnp.max(v) > {self.fconst()}:")
    self.emit(f"      return {self.clipped('v * 0.5 + k')}")
    self.emit(f"    v = {self.clipped('v + 1.0')}")
    self.emit("  return v - 1.0")
    self.emit(f"{t} = {h}({t}, {self.int_scalar()})")

  def s_rows(self, depth):
    """The rows of a ref walked by `for row in x1` (or enumerate)."""
    self.tags.add("ref_rows")
    t = self.r.choice(self.T)
    if self.r.random() < 0.5:
      row = f"row{self.loop_ids}"
      self.loop_ids += 1
      self.emit(f"for {row} in x1:")
      self.emit(f"  {t} = {self.clipped(f'jnp.maximum({t}, {row}[...]) - 0.5')}")
    else:
      i = f"i{self.loop_ids}"
      self.loop_ids += 1
      self.emit(f"for {i}, row{i} in enumerate(x1):")
      self.ind += 1
      self.idx.append(i)
      self.loops.append(i)
      self.emit(f"{t} = {self.clipped(f'{t} + row{i}[...] * 0.5')}")
      self.block(depth + 1, 1)
      self.loops.pop()
      self.idx.pop()
      self.ind -= 1

  def s_static(self, depth):
    self.tags.add("static_range")
    i = f"i{self.loop_ids}"
    self.loop_ids += 1
    self.emit(f"for {i} in ml.static_range({self.r.randint(0, 3)}):")
    self.ind += 1
    self.idx.append(i)
    self.loops.append(i)
    self.block(depth + 1, self.r.randint(1, 2))
    self.loops.pop()
    self.idx.pop()
    self.ind -= 1

  def s_fori_tuple(self, depth):
    self.tags.add("fori_tuple")
    t, s = self.r.choice(self.T), self.r.choice(self.S)
    n = self.r.choice([str(self.r.randint(0, 4)), f"n0[{self.r.randrange(8)}]"])
    self.emit(f"{t}, {s} = lax.fori_loop(0, {n}, lambda j, ca: ({self.clipped('ca[0] + ca[1]')}, "
              f"jnp.maximum(ca[1] - 1.0, jnp.min(ca[0]))), ({t}, {s}))")
