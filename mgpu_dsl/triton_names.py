"""Triton's habits outside the kernel body, each a located KernelError (or hint) naming the mgpu_dsl
way: `triton.*` names looked up on `mg` or `ml` (`@mg.jit`, `mg.Config`, `mg.cdiv`), Triton's
`grid=lambda meta: ... meta['BLOCK']` callables and `kernel[grid](...)` launches, strides and sizes
passed as arguments, autotune configurations that name launch options; and messages in the name the
kernel's module gives the language (`tl`)."""
from __future__ import annotations

import ast
import re

from .frontend import errors as E

_DECORATE = ("decorate the kernel with @mg.mgpu_kernel(out_shape=..., grid=...) (import mgpu_dsl as mg): out_shape"
             " describes the outputs it returns, grid= the programs (a tuple, or a callable of the inputs)")
# Triton's top-level (triton.*) names, looked up on mg or ml, and what to write instead.
TRITON = {
    "jit": _DECORATE,
    "Config": ("a configuration is a dict of constexprs: @mg.autotune(configs=[dict(BLOCK=128), dict(BLOCK=256)]);"
               " launch options are not tuned per config (threads per CTA are the decorator's block=, a multiple of"
               " 128; pipelining is ml.range(n, stages=s) in the kernel)"),
    "heuristics": ("no heuristics decorator: compute the constexpr from the inputs at the call, k(x, BLOCK=...), or"
                   " in the kernel from the shapes (x.shape[0] is a Python int there)"),
    "next_power_of_2": "no mg.next_power_of_2: 1 << (n - 1).bit_length() is the next power of two of an int n >= 1",
    "testing": ("no mg.testing: time a kernel with mg.bench(fn, *args) (GPU kernel time, as triton.testing.do_bench)"
                " or mg.bench_wall, and compare results with np.testing.assert_allclose"),
    "do_bench": "mg.bench(fn, *args) is the GPU kernel time of fn(*args), in seconds (mg.bench_wall: wall time)",
}


def missing(module, name: str):
  """The error for `module.name` (a module-level __getattr__): a located UnknownNameError that is
  also an AttributeError (so hasattr and getattr with a default keep working) for Triton's names
  and, on mg, for the language's; None for others."""
  from .frontend.language import __all__ as lang
  from .frontend.loc import user_loc
  mod = "mg" if module == "mgpu_dsl" else "ml"
  if name in TRITON:
    hint = TRITON[name]
  elif mod == "mg" and name in lang:
    hint = f"it is ml.{name}, in the kernel language: from mgpu_dsl import language as ml"
  else:
    return None
  cls = type("UnknownNameError", (E.UnknownNameError, AttributeError), {})
  cls.__module__, cls.__qualname__ = "mgpu_dsl", "UnknownNameError"
  return cls(f"{mod} has no attribute {name!r}", user_loc(), hint=hint)


def module_getattr(module):
  def __getattr__(name):
    e = missing(module, name)
    if e is None:
      raise AttributeError(f"module {module!r} has no attribute {name!r}")
    raise e
  return __getattr__


# ---------------------------------------------------------------- grid=lambda meta: ...
def _lambda_of(loc, fn) -> ast.Lambda | None:
  """The callable's source as an ast.Lambda: from the decorator's argument where it is one line,
  else from the callable's own source."""
  from .grid_hints import callable_texts
  for text in callable_texts(loc, fn):
    for t in (text, text.rstrip().rstrip(",)")):
      try:
        tree = ast.parse(t)
      except SyntaxError:
        continue
      code = getattr(fn, "__code__", None)      # (not another lambda on the line: bench(lambda: k[grid](x)))
      args = list(code.co_varnames[:code.co_argcount]) if code is not None else None
      fits = lambda n: args is None or [a.arg for a in n.args.posonlyargs + n.args.args] == args
      found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and fits(n)]
      launched = [n.slice for n in ast.walk(tree) if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Lambda)
                  and fits(n.slice)]
      if len(found) == 1 or len(launched) == 1:    # (kernel[lambda meta: ...](x) inside another lambda)
        return found[0] if len(found) == 1 else launched[0]
  return None


def rewrite(lam: ast.Lambda, inputs, constexprs) -> tuple[str, list, list]:
  """`lam` the mgpu_dsl way: each `meta['K']` (or `meta.K` of a constexpr K) read as the parameter K,
  after the kernel's inputs; `triton.cdiv` as ml.cdiv. (its text, the dict parameters it read, the
  names read that are not constexprs)."""
  params = [a.arg for a in lam.args.posonlyargs + lam.args.args]
  used = []

  class Rewrite(ast.NodeTransformer):
    def visit_Subscript(self, node):
      self.generic_visit(node)
      if (isinstance(node.value, ast.Name) and node.value.id in params and isinstance(node.slice, ast.Constant)
              and isinstance(node.slice.value, str) and node.slice.value.isidentifier()):
        used.append((node.value.id, node.slice.value))
        return ast.Name(node.slice.value, ast.Load())
      return node

    def visit_Attribute(self, node):
      self.generic_visit(node)
      if isinstance(node.value, ast.Name) and node.value.id in params and node.attr in constexprs:
        used.append((node.value.id, node.attr))
        return ast.Name(node.attr, ast.Load())
      if isinstance(node.value, ast.Name) and node.value.id == "triton" and node.attr == "cdiv":
        return ast.Attribute(ast.Name("ml", ast.Load()), "cdiv", ast.Load())
      return node

  body = Rewrite().visit(lam.body)
  metas = list(dict.fromkeys(m for m, _ in used))
  names = list(dict.fromkeys(k for _, k in used))
  keep = [p for p in params if p not in metas and p not in inputs] if metas else []
  new = ast.Lambda(ast.arguments([], [ast.arg(a) for a in [*inputs, *keep, *names]], None, [], [], None, []), body)
  return ast.unparse(new), metas, [k for k in names if k not in constexprs]


def meta_hint(loc, fn, inputs, constexprs, what) -> str | None:
  """For Triton's `grid=lambda meta: (triton.cdiv(n, meta['BLOCK']),)`: the callable rewritten the
  mgpu_dsl way, naming the kernel's inputs (`inputs`, their parameter names) and the constexprs it
  reads as parameters; None when the callable reads no parameter as a dict of constexprs."""
  lam = _lambda_of(loc, fn)
  if lam is None:
    return None
  text, metas, unknown = rewrite(lam, inputs, constexprs)
  if not metas:
    return None
  return (f"Triton's {what} callable takes a dict of the constexprs ({', '.join(metas)}); here a {what} callable"
          f" takes the kernel's inputs, and each constexpr it needs as a parameter of that name: {what}={text}"
          + (f" ({', '.join(unknown)} must be a constexpr parameter of the kernel: {unknown[0]}: ml.constexpr)"
             if unknown else ""))


def launch_grid_text(loc, grid, inputs, constexprs) -> str:
  """Triton's `kernel[grid]` subscript, as the decorator's grid= would say it: a tuple as it is, a
  lambda from the caller's source, rewritten (meta['BLOCK'] -> a BLOCK parameter)."""
  if not callable(grid):
    return repr(grid)
  lam = _lambda_of(loc, grid)
  if lam is not None:
    return rewrite(lam, inputs, constexprs)[0]
  return f"lambda {', '.join(inputs) or 'x'}, **kw: (...)"


def name_hint(e: Exception) -> str | None:
  """For a NameError of Triton's module in a callable (`triton.cdiv` in a grid): ml's name."""
  m = re.match(r"name '(triton|tl)' is not defined", str(e)) if isinstance(e, NameError) else None
  if m is None:
    return None
  return (f"{m.group(1)}.cdiv is ml.cdiv here (from mgpu_dsl import language as ml; it works in grid= and"
          f" out_shape= callables)")


def launch_error(name, grid, loc, inputs, constexprs) -> E.SignatureError:
  """`kernel[grid](...)`, Triton's launch: the grid belongs to the decorator here."""
  shown = launch_grid_text(loc, grid, inputs, constexprs)
  return E.SignatureError(
      f"{name}[{shown if not callable(grid) else 'lambda ...'}]: an mgpu_dsl kernel takes no grid at the call"
      f" (Triton's kernel[grid](...)); its grid is the decorator's grid= (a tuple, or a callable of the inputs"
      f" and constexprs), and a call returns the outputs", loc,
      hint=f"declare it on the decorator, @mg.mgpu_kernel(out_shape=..., grid={shown})"
           + ("" if callable(grid) else " (or a callable, grid=lambda x, **kw: (x.shape[0] // 128,))")
           + f", and call {name}(inputs...): outputs are returned, not passed")


# ---------------------------------------------------------------- the user's name for ml
_ML = re.compile(r"(?<![\w./\\])ml\.(?=[\w*])(?!py\b)")     # (not a file, html.escape or ml.py; ml.* too)


def in_user_alias(e: E.KernelError, scope) -> None:
  """Messages and hints say `ml.` for the language; a kernel whose module imports it under another
  name only (Triton's habit: from mgpu_dsl import language as tl) reads them in that name."""
  if not isinstance(scope, dict) or "ml" in scope:
    return
  from . import language
  names = [k for k, v in scope.items() if v is language and k.isidentifier()]
  if len(names) != 1:
    return
  alias = names[0]
  article = "an " if alias[0] in "aeiou" else "a "
  rename = lambda t: _ML.sub(alias + ".", re.sub(r"\ban (?=ml\.\w)", article, t)) if t else t
  for err in getattr(e, "errors", [e]):
    if getattr(err, "_alias", None) != alias:
      err.message, err.hint, err._alias = rename(err.message), rename(err.hint), alias


# ---------------------------------------------------------------- strides and sizes passed
_SIZE = re.compile(r"^(n|N|M|K|L|[nN]_\w+|num_\w+|\w*size\w*|\w*numel\w*|\w*_len|len_\w+)$")


def strides_hint(refs, extra, hint: str, name="k", lo=0) -> str:
  """The hint of a call whose count of inputs is off, where Triton's habit explains it: parameters
  named for strides (stride_xm), Python numbers passed past the inputs (x.stride(0), n_elements),
  preallocated outputs passed with them (`add(x, y, out, n)`)."""
  import numbers
  strides = [r for r in refs if r.startswith("stride") or r.endswith("_stride")]
  nums = [a for a in extra if isinstance(a, numbers.Number) and not isinstance(a, bool)]
  arrays = [a for a in extra if hasattr(a, "shape") and hasattr(a, "dtype")]
  if not strides and not nums:
    return hint
  if strides:
    lead = f"{', '.join(strides)} {'is' if len(strides) == 1 else 'are'} Triton's strides, which kernels do not take"
  else:
    lead = (f"{', '.join(map(repr, nums))} {'are Python numbers' if len(nums) > 1 else 'is a Python number'}, not"
            f" {'arrays' if len(nums) > 1 else 'an array'}")
  sizes = [r for r in refs if _SIZE.match(r) and r not in strides]
  n = sizes[0] if sizes else "n"
  outs = (f"; and outputs are returned, not passed: call {name} with its {lo} input{'s' if lo != 1 else ''} only"
          if arrays and nums and lo else "")
  return (f"{lead}: refs are indexed by dimension (x.at[r, ml.ds(c, n)] is row r's columns c to c + n) and know"
          f" their sizes (x.shape[0], a Python int in the kernel), so drop such parameters; a number the kernel"
          f" needs is an ml.scalar input ({n}: ml.scalar, before the outputs: one compile for every value) or a"
          f" keyword-only constexpr (*, {n}: ml.constexpr, passed by keyword){outs}. Otherwise: {hint}")


def size_after_outputs_hint(name, refs, n_in: int, scalars, extra) -> str | None:
  """Triton's order, `def add(x_ptr, y_ptr, output_ptr, n_elements, BLOCK: tl.constexpr = 1024)` called
  `add(x, y, n)`: the numbers past the inputs are meant for the size (or ml.scalar) parameters after the
  outputs, not for the constexprs they would bind by position; the hint moves those parameters before the
  outputs (None where no such parameter follows the inputs, or a value passed is no number)."""
  import numbers
  from .calling import source_repr
  movers = [r for r in refs[n_in:] if r in scalars or _SIZE.match(r)]
  if not movers or n_in >= len(refs) or not all(
      isinstance(a, numbers.Number) and not isinstance(a, bool) for a in extra):
    return None
  order = list(refs[:n_in]) + movers + [r for r in refs[n_in:] if r not in movers]
  given = ", ".join(source_repr(a) for a in extra)
  return (f"{', '.join(movers)} {'follows' if len(movers) == 1 else 'follow'} {refs[n_in]}, among the outputs"
          f" (parameters are the inputs, then the outputs), so {given} would bind a constexpr: a run-time number is"
          f" an ml.scalar input, before the outputs, def {name}({', '.join(f'{r}: ml.scalar' if r in movers else r for r in order)},"
          f" ...); or drop {movers[0]} and read sizes off the refs (x_ptr.shape[0] is a Python int in the kernel)"
          .replace("x_ptr", refs[0]))


_OUT = re.compile(r"^(out|output|o|y|res|result|dst)(_?ptr|_ref)?$|^(out|output)_\w+|\w+_(out|output)(_ptr)?$", re.I)


def outputs_first_hint(name: str, refs, i: int, hint: str) -> str:
  """`hint`, led by the parameter order, where input `i` binds a parameter named as an output
  (Triton's `def k(x_ptr, output_ptr, p, seed)`: outputs are passed among the arguments there)."""
  if i >= len(refs) or not _OUT.match(refs[i]):
    return hint
  outs = [r for r in refs if _OUT.match(r)]
  order = [r for r in refs if r not in outs] + outs
  return (f"{refs[i]} is named as an output, but a kernel's parameters are its inputs, then its outputs (the ones"
          f" out_shape describes, returned rather than passed): def {name}({', '.join(order)}, ...), called with"
          f" the inputs only. Otherwise: {hint}")


# ---------------------------------------------------------------- autotune configs
_LAUNCH = {
    "num_warps": "threads per CTA are the decorator's block= (a multiple of 128: num_warps=4 is block=128),"
                 " the same for every configuration",
    "num_stages": "pipelining is per loop, a constexpr passed to ml.range(n, stages=STAGES) in the kernel: tune"
                  " that constexpr (dict(STAGES=3), with a parameter STAGES: ml.constexpr)",
    "num_ctas": "CTAs per cluster are the decorator's cluster=",
    "maxnreg": "registers are allocated by the compiler",
    "pre_hook": "no hooks: zero an output in the kernel, or alias a zeroed input (input_output_aliases)",
}


def check_configs(kernel, configs, loc):
  """Every key of every configuration names a constexpr parameter of the kernel; Triton's launch
  options (num_warps=, num_stages=) are reported with what to write."""
  params = list(kernel.parsed.constexpr_params)
  for c in configs:
    for k in c:
      if k in params:
        continue
      hint = _LAUNCH.get(k)
      if hint is None:
        import difflib
        close = difflib.get_close_matches(k, params, n=1)
        hint = (f"did you mean {close[0]}? " if close else "") + (
            f"a configuration's keys are constexpr parameters of {kernel.__name__}"
            + (f": {', '.join(params)}" if params else f" (it has none: declare one, {k}: ml.constexpr)"))
      raise E.SignatureError(f"autotune config {c!r} names {k!r}, which is not a constexpr parameter of"
                             f" {kernel.__name__}", loc, hint=hint)
