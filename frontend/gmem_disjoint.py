"""When two GMEM windows of one CTA are surely apart (design note 19): the sync pass orders two
writes of the same elements (TMA stores land in no order; other threads' register writes need a
barrier) unless this module proves their windows disjoint.

Window keys are SyncPass.window's: (root id, (start, size, squeeze), ...), a run-time start keyed by
how it is computed (SyncPass.expr_key: ("pid", axis), ("bin", kind, lhs, rhs), ("c", constant),
("tile", k, pid key, num_m, num_n, group) for ml.grouped_ids' coordinates, ("v", id) for any other
value). Within one trip of a loop one key is one value; a window kept from an earlier trip of a loop
(`prev_trip`) has its loop index renamed ("prev", id) and every other value the loop computes made
opaque (("opaque", id): it may hold anything), and a window kept past the region that computed it
(`past_region`) has all of them opaque.

Two windows are apart when along some axis their starts differ by constants of at least the window
(`ds(8, 8)` and `ds(0, 8)`; `ds(i * 16, 8)` and `ds(i * 16 + 8, 8)`), or when they are the same
one-to-one function of the loop index on two different trips, scaled by at least the window along
each axis it uses: `ds(t * 8, 8)`, `ds(t // n * bm, bm), ds(t % n * bn, bn)` and
`ml.grouped_ids(t, ...)`'s tiles (the persistent and grid-stride loops' stores). Anything else (a
start from a loaded scalar, `(t % 2) * 8`, a window stored before the loop and again in it) may
overlap."""
from __future__ import annotations

from . import ir
from .ops.elementwise import BinOp


def defined_inside(o) -> set:
  """The ids of the values a region op computes inside (results of its ops, its regions' arguments)."""
  out = set()
  for r in o.regions:
    b = getattr(o, r)
    out |= {a.id for a in b.args}
    for x in ir.walk(b):
      out |= {v.id for v in x.results}
      for rr in x.regions:
        out |= {a.id for a in getattr(x, rr).args}
  return out


def _rename(key, prev: set, opaque: set):
  if isinstance(key, tuple):
    if len(key) == 2 and key[0] == "v" and isinstance(key[1], int):
      return ("prev", key[1]) if key[1] in prev else ("opaque", key[1]) if key[1] in opaque else key
    return tuple(_rename(k, prev, opaque) for k in key)
  return key


def loop_indices(loop, defs) -> set:
  """Ids of the values that differ on every trip of `loop`: a for loop's index, and a while loop's
  carries that each trip adds a positive amount to (`t += ml.num_programs(0)` of a persistent loop
  written as a while, a for loop with a break)."""
  from .ops.control import For, NumPrograms, PositiveStep, While, Yield
  if isinstance(loop, For):
    return {loop.body.args[0].id} if loop.body.args else set()
  if not isinstance(loop, While) or not loop.body.ops or not isinstance(loop.body.ops[-1], Yield):
    return set()
  cond = loop.before.ops[-1] if loop.before.ops else None
  made = {r.id: o for o in loop.body.ops for r in o.results}
  out = set()
  for k, (arg, new) in enumerate(zip(loop.body.args, loop.body.ops[-1].values)):
    o = made.get(getattr(new, "id", None))
    if not (getattr(cond, "values", None) and k < len(cond.values) and k < len(loop.before.args)
            and cond.values[k] is loop.before.args[k]):
      continue        # the body's carry is not the one the condition tested, forwarded as it is
    if getattr(o, "kind", None) != BinOp.ADD:
      continue
    for a, b in ((o.lhs, o.rhs), (o.rhs, o.lhs)):
      if a is arg and (isinstance(b, int) and not isinstance(b, bool) and b > 0 or isinstance(
          defs.get(getattr(b, "id", None)), (NumPrograms, PositiveStep))):
        out.add(arg.id)
  return out


def prev_trip(window, loop, defs=None):
  """`window` (of an op in loop `loop`) as seen by a later trip of the loop."""
  index = loop_indices(loop, defs or {})
  return _rename(window, index, defined_inside(loop) - index)


def past_region(window, o):
  """`window` (of an op inside region op `o`) as seen after `o`."""
  return _rename(window, set(), defined_inside(o))


def _strip(key):
  """A key with its earlier trips' loop indices read as this trip's."""
  if isinstance(key, tuple):
    if len(key) == 2 and key[0] == "prev":
      return ("v", key[1])
    return tuple(_strip(k) for k in key)
  return key


def _const(k):
  if isinstance(k, int) and not isinstance(k, bool):
    return k
  if isinstance(k, tuple) and len(k) == 2 and k[0] == "c" and isinstance(k[1], int) and not isinstance(k[1], bool):
    return k[1]
  return None


def linear(k) -> dict:
  """{atom: coefficient} with the constant under None: a start as a sum of scaled atoms."""
  c = _const(k)
  if c is not None:
    return {None: c}
  if isinstance(k, tuple) and len(k) == 4 and k[0] == "bin" and k[1] in (BinOp.ADD, BinOp.SUB, BinOp.MUL):
    a, b = linear(k[2]), linear(k[3])
    if k[1] == BinOp.MUL:
      for x, y in ((a, b), (b, a)):
        if set(y) <= {None}:
          return {t: v * y.get(None, 0) for t, v in x.items()}
      return {k: 1}
    sign = 1 if k[1] == BinOp.ADD else -1
    out = dict(a)
    for t, v in b.items():
      out[t] = out.get(t, 0) + sign * v
    return out
  return {k: 1}


def _minus(a: dict, b: dict) -> dict:
  out = dict(a)
  for t, v in b.items():
    out[t] = out.get(t, 0) - v
  return {t: v for t, v in out.items() if v != 0 or t is None}


def _differs(new, old) -> bool:
  """Whether two keys (this trip's and an earlier trip's) surely hold different values: an
  affine function of the loop index alone, with a non-zero coefficient."""
  d = _minus(linear(new), linear(old))
  atoms = {t: v for t, v in d.items() if t is not None}
  if d.get(None, 0) != 0 or len(atoms) != 2:
    return False
  (x, cx), (y, cy) = sorted(atoms.items(), key=lambda kv: _strip(kv[0]) != kv[0])
  return cx == -cy and _is_index(x, y)


def _is_index(x, y) -> bool:
  """Whether atom `x` is the loop index, or the index times a positive run-time value (a pipelined
  loop's step, ("step", key), its trip renumbered 0 .. n - 1; ml.num_programs, ("nprog", axis)), and
  `y` the same on an earlier trip."""
  if x[0] == "v":
    return y == ("prev", x[1])
  if x[0] == "bin" and x[1] == BinOp.MUL and y[:2] == x[:2]:
    for i, j in ((2, 3), (3, 2)):
      if isinstance(x[j], tuple) and x[j][0] in ("step", "nprog") and x[j] == y[j] and isinstance(x[i], tuple):
        return x[i][0] == "v" and y[i] == ("prev", x[i][1])
  return False


def _groups(moved: dict):
  """The sets of atoms (this trip's) that together are a one-to-one function of the loop index,
  each with the earlier trip's atoms they were compared with."""
  for x, old in moved.items():
    if _is_index(x, old):
      yield {x}
    if x[0] == "tile" and x[1] == 0:
      other = ("tile", 1) + x[2:]
      if other in moved and _differs(x[2], old[2]):
        yield {x, other}
    if x[0] == "bin" and x[1] == BinOp.FLOORDIV and (w := _const(x[3])) is not None and w > 0:
      other = ("bin", BinOp.MOD, x[2], x[3])
      if other in moved and _differs(x[2], old[2]):
        yield {x, other}


def loop_bounds(body) -> dict:
  """{index atom: (lowest, highest)} of the loops in `body` with static bounds, for the index as
  this trip's, an earlier trip's and an opaque value (frontend/sync.py passes it to `disjoint`)."""
  from .ops.control import For
  out = {}
  for o in ir.walk(body):
    if isinstance(o, For) and o.body.args and all(isinstance(v, int) for v in (o.start, o.stop, o.step)):
      r = range(o.start, o.stop, o.step)
      if len(r) and o.step:
        b = (min(r[0], r[-1]), max(r[0], r[-1]))
        out.update({(kind, o.body.args[0].id): b for kind in ("v", "prev", "opaque")})
  return out


def disjoint(old, new, bounds=None) -> bool:
  """Whether windows `old` (of a write that may still be in flight, possibly from an earlier trip)
  and `new` surely share no element. `bounds`: `loop_bounds`, the values loop indices may take."""
  if old[0] != new[0] or len(old) == 1 or len(new) == 1 or len(old) != len(new):
    return False
  bounds = bounds or {}
  moved: dict = {}           # this trip's atom -> the earlier trip's, on axes that separate when they differ
  for (s1, n1, _), (s2, n2, _) in zip(old[1:], new[1:]):
    d = _minus(linear(s2), linear(s1))
    lo = hi = d.pop(None, 0)
    paired = lambda t: t[0] in ("v", "prev") and ("prev" if t[0] == "v" else "v", t[1]) in d
    for t in [t for t in d if t in bounds and not paired(t)]:     # other loops' indices: a range
      c = d.pop(t)
      lo, hi = lo + min(c * bounds[t][0], c * bounds[t][1]), hi + max(c * bounds[t][0], c * bounds[t][1])
    if not d:
      if lo >= n1 or hi <= -n2:
        return True
      continue
    if len(d) != 2:
      continue
    (x, c), (y, c2) = sorted(d.items(), key=lambda kv: _strip(kv[0]) != kv[0])
    if _strip(x) != x or _strip(y) != x or y == x or c != -c2:
      continue
    if abs(c) + lo >= n1 and -abs(c) + hi <= -n2:   # apart whenever x differs from its earlier value
      moved[x] = y
  return any(True for _ in _groups(moved))
