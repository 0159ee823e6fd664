"""The hint for JAX's control flow called in a kernel (lax.fori_loop, lax.while_loop, lax.cond, as a
Pallas kernel writes its loops), written with the call's own bounds, functions and carry: the Python
statement that is a kernel's control flow, with each plain function to decorate @ml.inline."""
from __future__ import annotations

import re

from .random_hints import prng_hint

# JAX's control flow -> the Python statement a kernel writes (where the call's form is not plain)
LAX_CONTROL = {
    "fori_loop": "for j in range(lower, upper): acc = ... (ml.range(..., stages=s) to pipeline its loads)",
    "scan": ("a for loop carrying the state: carry = init; for j in ml.static_range(n): carry, y = f(carry, xs[j]);"
             " store each step's y (out[j] = y); a running sum, product, max or min is ml.cumsum(x, axis=0)"
             " (ml.cumprod, ml.cummax, ml.cummin)"),
    "while_loop": "while cond: state = ... (the condition a scalar)",
    "cond": "if pred: ... else: ... (the predicate a scalar), or ml.where(pred, a, b) for tensors",
    "switch": "if index == 0: ... elif index == 1: ...",
    "map": "for j in range(n): ..."}


def _helpers(fns, texts) -> str:
  """The note asking to decorate the plain Python functions among `fns` (written as `texts`)."""
  from .inline import LocalFunction
  from .language import Inline
  plain = list(dict.fromkeys(t.strip() for f, t in zip(fns, texts) if callable(f) and not isinstance(f, (Inline, LocalFunction))
                             and t.strip().isidentifier()))
  if not plain:
    return ""
  return f" (decorate {' and '.join(plain)} with @ml.inline: a kernel calls its own helpers so)"


def _called(fn: str, args: str) -> str:
  """`fn(args)` as code: a lambda of no parameters called with none is its body, another lambda is
  called in place, `(lambda i, a: a * 2)(j, carry)`."""
  import re
  bare = re.fullmatch(r"lambda\s*:\s*(.*)", fn, re.S)
  if bare and not args:
    return bare.group(1)
  return f"({fn})({args})" if fn.startswith("lambda") else f"{fn}({args})"


def _kernel_spelling(text: str) -> str:
  """An argument as written, with jnp's array builders spelt as the kernel's (jnp.zeros((), jnp.float32)
  -> 0.0, jnp.zeros((64,), jnp.float32) -> ml.zeros((64,), jnp.float32), jnp.arange(n) -> ml.arange(n))."""
  text = text.strip()
  m = re.fullmatch(r"(?:jnp|np|jax\.numpy)\.(zeros|ones)\(\(\)(?:,\s*(?:dtype=)?(?:jnp|np)\.(\w+))?\)", text)
  if m:
    one = "1" if m.group(1) == "ones" else "0"
    return one if m.group(2) and "int" in m.group(2) else f"{one}.0"
  m = re.fullmatch(r"(?:jnp|np|jax\.numpy)\.(float32|int32)\(([^()]*)\)", text)
  if m:
    v = m.group(2).strip()
    return f"{v}.0" if m.group(1) == "float32" and v.lstrip("-").isdigit() else v
  return re.sub(r"\b(?:jnp|np|jax\.numpy)\.(zeros|full|arange)\(", r"ml.\1(", text)


# the parameters of JAX's control flow a hint is written from, in order (jax.lax's names), and those it may leave out
_PARAMS = {"fori_loop": ("lower", "upper", "body_fun", "init_val"), "while_loop": ("cond_fun", "body_fun", "init_val"),
           "scan": ("f", "init", "xs", "length", "reverse")}
_IGNORED = {"fori_loop": ("unroll",), "scan": ("unroll",)}
_DEFAULTS = {"xs": "None", "length": "None", "reverse": "False"}


def _positional(name, pos, args, kw, kw_args):
  """`name`'s arguments as positional ones (texts and values), its keywords put in their places
  (lax.scan(f, init, xs, length=n, reverse=True)); None where a keyword is not one the hint reads."""
  params = _PARAMS.get(name)
  if not kw:
    return pos, args
  if name == "cond" and set(kw) == {"operand"} and len(pos) == 3:     # lax.cond(p, f, g, operand=x): JAX's old form
    return list(pos) + [kw["operand"]], list(args) + [None] * (3 - len(args)) + [(kw_args or {}).get("operand")]
  if params is None or any(k not in params[len(pos):] and k not in _IGNORED.get(name, ()) for k in kw):
    return None
  texts, values = list(pos), list(args) + [None] * (len(pos) - len(args))
  for i, p in enumerate(params[len(pos):], len(pos)):
    if p not in kw and not any(q in kw for q in params[i + 1:]):
      break
    if p not in kw and p not in _DEFAULTS:
      return None
    texts.append(kw.get(p, _DEFAULTS.get(p)))
    values.append((kw_args or {}).get(p))
  return texts, values


def control_hint(name, pos, args, target, taken=frozenset(), kw=None, kw_args=None) -> str | None:
  """`name`(...) with positional arguments `pos` (as written) and `args` (their values), keywords `kw`
  (as written) and `kw_args` (their values); `target`: the name its result is bound to, if any; `taken`:
  the names of the kernel's file, which a loop counter the hint introduces avoids. None where the
  call's form is not plain."""
  bound = _positional(name, pos, args, kw, kw_args)
  if bound is None:
    return None
  pos, args = bound
  carry = target or "carry"
  then = "" if target else f"; then use {carry} where the call stood"
  if name == "fori_loop" and len(pos) == 4:
    lo, hi, body, init = (_kernel_spelling(p) for p in pos)
    i = next((n for n in ("j", "k", "step", "it", "trip") if n not in taken and n != carry), "trip")
    start = f"{carry} = {init}; " if init != carry else ""
    return (f"{start}for {i} in range({lo}, {hi}): {carry} = {_called(body, f'{i}, {carry}')}"
            + _helpers(args[2:3], pos[2:3]) + then + " (ml.range(..., stages=s) pipelines its loads)")
  if name == "while_loop" and len(pos) == 3:
    cond, body, init = (_kernel_spelling(p) for p in pos)
    start = f"{carry} = {init}; " if init != carry else ""
    return (f"{start}while {_called(cond, carry)}: {carry} = {_called(body, carry)}" + _helpers(args[:2], pos[:2])
            + then)
  if name == "cond" and len(pos) >= 3:
    pred, yes, no = (p.strip() for p in pos[:3])
    ops = ", ".join(p.strip() for p in pos[3:])
    return (f"if {pred}: {carry} = {_called(yes, ops)} else: {carry} = {_called(no, ops)} (a run-time if on a scalar; for"
            f" tensors, ml.where({pred}, a, b))" + _helpers(args[1:3], pos[1:3]) + then)
  if name == "scan" and 3 <= len(pos) <= 5 and (pos[2].strip() != "None" or len(pos) > 3 and pos[3].strip() != "None"):
    body, init, xs = (_kernel_spelling(p) for p in pos[:3])
    length = pos[3].strip() if len(pos) > 3 else "None"
    reverse = len(pos) > 4 and pos[4].strip() not in ("False", "0", "None")
    i = next((n for n in ("j", "k", "step", "it", "trip") if n not in taken and n != carry), "trip")
    c = "carry" if not target or "," in target else target
    ys = target.split(",")[1].strip() if target and target.count(",") == 1 else "ys"
    counted = re.fullmatch(r"(?:ml\.arange|range)\(([^,()]+)\)", xs)     # a scan over 0..n-1: the counter itself
    if xs == "None":                                              # lax.scan(f, init, None, length=n): no xs
      loop, x = f"range({length})", "None"
    else:
      loop, x = (f"range({counted.group(1)})", i) if counted else _scan_rows(xs, i)
    if reverse:                                                   # (ys[j] is still step j's y, as lax.scan's)
      loop = f"reversed({loop})"
    return (f"{c} = {init}; for {i} in {loop}: {c}, y = {_called(body, f'{c}, {x}')}"
            f"; then store each step's y where {ys}[{i}] goes (out[{i}] = y, or a row of an ml.smem buffer)"
            + _helpers(args[:1], pos[:1]) + "; a running sum, product, max or min along an axis is one call,"
            " ml.cumsum(x, axis=0) (ml.cumprod, ml.cummax, ml.cummin)")
  return None


def _scan_rows(xs, i):
  """(the loop, the step's x) of a scan over `xs` as written: `x[j]` of a name, `(x * 2)[j]` of an expression (it
  said `x * 2[j]`), each leaf's row of a tuple, `(a[j], b[j])` (it indexed the tuple), the counter of an arange
  (probe 51j)."""
  import ast
  try:
    tree = ast.parse(xs, mode="eval").body
  except SyntaxError:
    return f"ml.static_range(({xs}).shape[0])", f"({xs})[{i}]"
  leaves = tree.elts if isinstance(tree, ast.Tuple) and tree.elts else [tree]
  rows, n = [], None
  for leaf in leaves:
    text = ast.unparse(leaf)
    counted = re.fullmatch(r"(?:ml\.arange|range)\(([^,()]+)\)", text)
    atom = isinstance(leaf, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
    rows.append(i if counted else f"{text if atom else f'({text})'}[{i}]")
    n = n or (counted.group(1) if counted else f"{text if atom else f'({text})'}.shape[0]")
  loop = f"range({n})" if re.fullmatch(r"[^.]*", n) else f"ml.static_range({n})"
  return loop, f"({', '.join(rows)})" if isinstance(tree, ast.Tuple) and tree.elts else rows[0]


def debug_print_hint(pos, kw) -> str | None:
  """jax.debug.print("x={} y={y}", x, y=y) -> print(f"x={x} y={y}"): a kernel prints with print."""
  import ast
  import string
  if not pos:
    return None
  try:
    fmt = ast.literal_eval(pos[0].strip())
    fields = list(string.Formatter().parse(fmt)) if isinstance(fmt, str) else None
  except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
    return None
  if fields is None:
    return None
  args, out, n = [p.strip() for p in pos[1:]], [], 0
  for text, field, spec, conv in fields:
    out.append(text.replace("{", "{{").replace("}", "}}"))
    if field is None:
      continue
    if field == "" or field.isdigit():
      k = n if field == "" else int(field)
      n += field == ""
      if k >= len(args):
        return None
      field = args[k]
    elif field in kw:
      field = kw[field].strip()
    else:
      return None
    out.append("{" + field + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}")
  body = "".join(out)
  q = "'" if '"' in body else '"'
  return f"write print(f{q}{body}{q}) (prints in interpret mode and on the GPU)"


_SAME_ARGS = {"program_id": "program_id", "num_programs": "num_programs", "cdiv": "cdiv",
              "multiple_of": "multiple_of", "ds": "ds", "dslice": "ds"}


def _ours(text: str) -> str:
  """An argument as written, with Pallas's and Triton's index helpers in it spelt as mgpu_dsl's."""
  import re
  return re.sub(r"\b(?:pl|plgpu|tl|triton\.language)\.(program_id|num_programs|cdiv|multiple_of|ds|dslice)\(",
                lambda m: f"ml.{_SAME_ARGS[m.group(1)]}(", text.strip())


def foreign_call_hint(name, pos, kw) -> str | None:
  """The mgpu_dsl call for a Pallas (or Triton) function called in a kernel, written with the call's
  own arguments (`pos`, `kw`: as written): pl.program_id(1) -> ml.program_id(1), pl.ds(i * 64, 64) ->
  ml.ds(i * 64, 64), plgpu.copy_gmem_to_smem(src, dst, barrier) -> ml.copy(src, dst)."""
  stride = kw.get("stride", pos[2] if len(pos) > 2 else "1").strip()
  if name in ("ds", "dslice") and stride == "1":      # a stride of 1 is ml.ds's window
    pos, kw = pos[:2], {k: v for k, v in kw.items() if k != "stride"}
  args = ", ".join([_ours(p) for p in pos] + [f"{k}={_ours(v)}" for k, v in kw.items()])
  if name in ("ds", "dslice") and stride != "1":      # pl.ds(start, size, stride): no strided windows here
    k = stride if stride.isdigit() else "k"
    return (f"ml.ds takes no stride (a window's elements are consecutive): give the array an axis of the stride"
            f" outside the kernel, x.reshape(..., n // {k}, {k}) (free in XLA), and index that axis with an int:"
            f" x.at[ml.ds(start // {k}, size), 0] reads elements start, start + {k}, ... of the original axis")
  if name in _SAME_ARGS and (name not in ("ds", "dslice") or not kw.keys() - {"start", "size"}) and len(pos) <= 2:
    return f"write ml.{_SAME_ARGS[name]}({args})"
  if name == "copy_gmem_to_smem" and len(pos) >= 2:
    return (f"write ml.copy({_ours(pos[0])}, {_ours(pos[1])}): the compiler awaits the copy before the buffer's"
            f" first read (drop the barrier and its wait)")
  if name == "copy_smem_to_gmem" and len(pos) >= 2:
    return (f"write ml.copy({_ours(pos[0])}, {_ours(pos[1])}): the compiler fences SMEM before it and waits for"
            f" the store before the buffer is reused (drop commit_smem and wait_smem_to_gmem)")
  if name == "SMEM" and 1 <= len(pos) <= 2 and not kw:
    return f"write ml.smem({args}) in the kernel body"
  if (prng := prng_hint(name, pos)) is not None:        # pltpu.prng_seed(s), pltpu.stateful_uniform(...)
    return prng
  if name == "wgmma" and len(pos) == 3:
    acc, a, b = (_ours(p) for p in pos)
    return (f"write acc = ml.dot({a}, {b}, acc) in place of accumulating into {acc}: the accumulator is a"
            f" register value (start it as ml.zeros((m, n), jnp.float32)), the wait is the compiler's")
  return None


def _spec(text):
  """(block shape text, [index expressions as text], [lambda parameters]) of a BlockSpec as written."""
  import ast
  try:
    call = ast.parse(text.strip(), mode="eval").body
  except SyntaxError:
    return None
  if not isinstance(call, ast.Call):
    return None
  kw = {k.arg: k.value for k in call.keywords}
  shape = call.args[0] if call.args else kw.get("block_shape")
  fn = call.args[1] if len(call.args) > 1 else kw.get("index_map")
  if not isinstance(shape, ast.Tuple) or not isinstance(fn, ast.Lambda) or not isinstance(fn.body, ast.Tuple) \
      or len(fn.body.elts) != len(shape.elts):
    return None
  return [ast.unparse(e) for e in shape.elts], [ast.unparse(e) for e in fn.body.elts], [a.arg for a in fn.args.args]


def _window(ref, spec, counter):
  sizes, index, params = spec
  rename = {params[0]: counter} if params else {}
  parts = []
  for b, e in zip(sizes, index):
    e = rename.get(e, e)
    parts.append(f"ml.ds(0, {b})" if e == "0" else f"ml.ds({e} * {b}, {b})" if e.isidentifier() else
                 f"ml.ds(({e}) * {b}, {b})")
  return f"{ref}.at[{', '.join(parts)}]"


def pipeline_hint(kw, refs, body, body_fn) -> str | None:
  """plgpu.emit_pipeline(body, grid=(n,), in_specs=[...], out_specs=[...])(x_ref, o_ref) -> the
  ml.range loop that copies each step's blocks into SMEM, calls the body on them and copies the
  outputs back (`kw`: the call's keywords as written; `refs`: the refs it was applied to, as written)."""
  import ast
  try:
    grid = ast.literal_eval(kw.get("grid", "").strip())
    ins = ast.parse(kw.get("in_specs", "[]").strip(), mode="eval").body
    outs = ast.parse(kw.get("out_specs", "[]").strip(), mode="eval").body
  except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
    return None
  if not (isinstance(grid, tuple) and len(grid) == 1 and isinstance(ins, (ast.List, ast.Tuple))
          and isinstance(outs, (ast.List, ast.Tuple)) and len(ins.elts) + len(outs.elts) == len(refs)):
    return None
  specs = [_spec(ast.unparse(e)) for e in list(ins.elts) + list(outs.elts)]
  if None in specs:
    return None
  n_in, counter = len(ins.elts), "step"
  bufs = [f"{r[:-4] if r.endswith('_ref') else r}_s" for r in refs]
  alloc = "; ".join(f"{b} = ml.smem(({', '.join(s[0])}{',' if len(s[0]) == 1 else ''}), {r}.dtype)"
                    for b, s, r in zip(bufs, specs, refs))
  loads = "; ".join(f"ml.copy({_window(r, s, counter)}, {b})" for r, s, b in list(zip(refs, specs, bufs))[:n_in])
  stores = "; ".join(f"ml.copy({b}, {_window(r, s, counter)})" for r, s, b in list(zip(refs, specs, bufs))[n_in:])
  steps = "; ".join(x for x in (loads, f"{body}({', '.join(bufs)})", stores) if x)
  return (f"a pipelined loop: {alloc}; for {counter} in ml.range({grid[0]}, stages=2): {steps}"
          + _helpers([body_fn], [body]))


def decorated_body_hint(deco, text, fn) -> str:
  """The hint for a function decorated with Pallas's @pl.when(cond) or @pl.loop(lower, upper) inside
  a kernel (`text`: the decorator as written; `fn`: the FunctionDef): the statement it is here."""
  import ast
  try:
    call = ast.parse(text.strip(), mode="eval").body
  except SyntaxError:
    call = None
  args = [ast.unparse(a) for a in call.args] if isinstance(call, ast.Call) and not call.keywords else None
  body = f"with the body of {fn.name} under it, one level less indented (drop the def and the decorator)"
  if deco == "when":
    cond = args[0] if args and len(args) == 1 else "cond"
    return f"Pallas's @pl.when({cond}) body is an if statement here: if {cond}:, {body}"
  params = [a.arg for a in fn.args.args]
  i = params[0] if len(params) == 1 else "i"
  bounds = ", ".join(args) if args and 1 <= len(args) <= 3 else "start, stop"
  return f"Pallas's @pl.loop(...) body is a for loop here: for {i} in range({bounds}):, {body}"
