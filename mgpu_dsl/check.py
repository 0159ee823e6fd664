"""Check kernels without a GPU: declare argument specs beside a kernel, check them in CI.

In the kernel's module, after the kernel::

    @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
    def double(x, out):
        ...

    mg.check_specs(double, jax.ShapeDtypeStruct((1024, 64), jnp.float32))
    mg.check_specs(double, jax.ShapeDtypeStruct((1024, 64), jnp.bfloat16))

then ``python -m mgpu_dsl check kernels.py`` traces, checks and builds every
declared specialisation (the Mosaic GPU module is built and verified on the CPU)
and prints each mistake at its line. Declaring specs costs nothing at import.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib.util
import itertools
import os
import sys
import traceback
from typing import TYPE_CHECKING

from .calling import constexpr_text
from .frontend import errors as E
from .kernel import KernelFunction

if TYPE_CHECKING:
  from .autotune import Autotuner

_DECLARED: dict[KernelFunction, list[tuple[tuple, dict]]] = {}
_DECLARED_IN: dict[KernelFunction, set[str]] = {}    # the files whose check_specs calls declared them
_SPEC_FILE: dict[tuple[int, int], set] = {}           # (id of a kernel, index of a spec) -> the files declaring it
_modules = itertools.count()


def check_specs(kernel: KernelFunction | Autotuner, *specs, **constexprs) -> KernelFunction | Autotuner:
  """Declare one specialisation of `kernel` for `python -m mgpu_dsl check`.

  `specs` are the kernel's inputs as `jax.ShapeDtypeStruct`s (or arrays; a Python number
  for an `ml.scalar` parameter),
  `constexprs` its compile-time constants, exactly as `kernel.check` takes
  them. Call it once per specialisation worth checking::

      mg.check_specs(row_block_sum, jax.ShapeDtypeStruct((512, 64), jnp.float16), n=4)

  An `@mg.autotune`d kernel declares one specialisation per config (each config
  merged into `constexprs`), so the checker builds every config the tuner may pick.

  Returns `kernel`. Nothing is traced until the checker runs.
  """
  from .autotune import Autotuner
  if isinstance(kernel, functools.partial) and isinstance(kernel.func, (KernelFunction, Autotuner)):
    # functools.partial(kernel, n=4): its arguments first, as a call of it passes them (interpret=
    # chooses how a call runs, not what is checked)
    bound = {k: v for k, v in kernel.keywords.items() if k != "interpret"}
    return check_specs(kernel.func, *kernel.args, *specs, **{**bound, **constexprs}) and kernel
  if isinstance(kernel, Autotuner):
    for cfg in kernel.configs:
      check_specs(kernel.kernel, *specs, **constexprs, **cfg)
    return kernel
  from .bench import caller_loc
  if not isinstance(kernel, KernelFunction):
    raise E.KernelTypeError(f"mg.check_specs takes an @mgpu_kernel function first, got {kernel!r}", caller_loc(),
                            hint="mg.check_specs(kernel, jax.ShapeDtypeStruct((1024,), jnp.float32), n=4)")
  import jax
  leaves = [l for s in specs for l in (jax.tree.leaves(s) if isinstance(s, (dict, list, tuple)) or
                                       hasattr(s, "__dataclass_fields__") else [s])]   # (pytree inputs too)
  for s in leaves:     # arrays' specs, or Python numbers for ml.scalar parameters (as kernel.check)
    if not (hasattr(s, "shape") and hasattr(s, "dtype")) and not isinstance(s, (bool, int, float)):
      raise E.KernelTypeError(f"mg.check_specs: each spec needs .shape and .dtype"
                              f" (a jax.ShapeDtypeStruct), or is a Python number for an ml.scalar parameter;"
                              f" got {s!r}", caller_loc(),
                              hint="jax.ShapeDtypeStruct((1024,), jnp.float32) for an input of 1024 float32")
  declared = _DECLARED.setdefault(kernel, [])
  _DECLARED_IN.setdefault(kernel, set()).add(_caller_file())
  entry = (tuple(specs), dict(constexprs))
  keys = [_entry_key(*e) for e in declared]
  if _entry_key(*entry) not in keys:       # a module imported twice declares its specs twice
    declared.append(entry)
    keys.append(_entry_key(*entry))
  _SPEC_FILE.setdefault((id(kernel), keys.index(_entry_key(*entry))), set()).add(_caller_file())
  return kernel


def _entry_key(specs, constexprs):
  """A declared specialisation as a comparable key: arrays by shape and dtype (`==` on two arrays,
  or on a constexpr that is one, is elementwise, and its truth raised ValueError), constexprs as the
  kernel's cache keys them."""
  import jax
  from .deps import value_key
  one = lambda s: (("spec", tuple(s.shape), str(s.dtype)) if hasattr(s, "shape") and hasattr(s, "dtype")
                   else value_key(s))
  tree = lambda s: ("tree", str(jax.tree.structure(s)), tuple(map(one, jax.tree.leaves(s))))    # a pytree input
  spec = tuple(tree(s) if isinstance(s, (dict, list, tuple)) or hasattr(s, "__dataclass_fields__") else one(s)
               for s in specs)
  return spec, tuple(sorted((k, value_key(v)) for k, v in constexprs.items()))


def _caller_file() -> str:
  """The file of the first frame outside this module: where check_specs was called."""
  f = sys._getframe(1)
  while f is not None and f.f_code.co_filename == __file__:
    f = f.f_back
  return os.path.abspath(f.f_code.co_filename) if f is not None else ""


def declared_specs(kernel: KernelFunction) -> list[tuple[tuple, dict]]:
  """The (specs, constexprs) pairs declared for `kernel` with `check_specs`."""
  return list(_DECLARED.get(kernel, ()))


@dataclasses.dataclass
class Result:
  """One specialisation of one kernel, checked."""
  kernel: KernelFunction
  specs: tuple
  constexprs: dict
  errors: list = dataclasses.field(default_factory=list)    # KernelErrors, in program order
  crash: BaseException | None = None                        # any other exception: a bug

  @property
  def ok(self) -> bool:
    return not self.errors and self.crash is None

  @property
  def title(self) -> str:
    import jax
    one = lambda s: (repr(s) if isinstance(s, (bool, int, float)) else
                     f"{_dtype_name(s.dtype)}[{','.join(str(int(n)) for n in s.shape)}]")
    args = [one(s) if hasattr(s, "shape") or isinstance(s, (bool, int, float)) else   # a pytree input: its leaves'
            str(jax.tree.map(lambda l: _Shown(one(l)), s)) for s in self.specs]
    args += [f"{k}={constexpr_text(v)}" for k, v in self.constexprs.items()]
    return f"{self.kernel.__name__}({', '.join(args)})"


class _Shown(str):
  """A leaf's text, shown without quotes inside its pytree's repr."""
  def __repr__(self):
    return str(self)


@dataclasses.dataclass
class FileReport:
  path: str
  results: list = dataclasses.field(default_factory=list)
  skipped: list = dataclasses.field(default_factory=list)    # kernels with no declared specs
  import_error: BaseException | None = None

  @property
  def ok(self) -> bool:
    return self.import_error is None and all(r.ok for r in self.results)


def _dtype_name(dtype) -> str:
  return getattr(dtype, "name", None) or str(dtype)


def check_kernel(kernel: KernelFunction, first: int = 0, seen: set | None = None,
                 only_file: str | None = None) -> list[Result]:
  """Check every specialisation declared for `kernel` (from the `first`-th on; not those in `seen`,
  the (kernel, index) pairs an earlier file of the same run checked; with `only_file`, those that
  file declared)."""
  out = []
  for n, (specs, constexprs) in enumerate(declared_specs(kernel)):
    if n < first or seen is not None and (id(kernel), n) in seen:
      continue
    if only_file is not None and only_file not in _SPEC_FILE.get((id(kernel), n), ()):
      continue
    if seen is not None:
      seen.add((id(kernel), n))
    r = Result(kernel, specs, constexprs)
    try:
      kernel.check(*specs, **constexprs)
    except E.KernelError as e:
      r.errors = list(e.errors)
    except Exception as e:   # noqa: BLE001  (reported as a crash, never hidden)
      r.crash = e
    out.append(r)
  return out


def load_module(path: str, reuse: bool = False):
  """Import the Python file `path` as a fresh module (its `__main__` block does not run); with
  `reuse`, the module an earlier file of the same run imported from it (not a second copy)."""
  stem = os.path.splitext(os.path.basename(path))[0]
  package = _package_name(path)
  if package is not None:         # a file of a package: imported as package.module (relative imports work)
    root = os.path.abspath(path)
    for _ in range(package.count(".") + 1):
      root = os.path.dirname(root)
    folders = [f for f in (root, os.path.dirname(os.path.abspath(path))) if f not in sys.path]
    sys.path[:0] = folders        # the package's root, and the file's own folder (its neighbours)
    try:
      if not reuse:
        sys.modules.pop(package, None)
      return importlib.import_module(package)
    except ImportError as e:      # the package itself not importable: as a plain file, below
      sys.modules.pop(package, None)
      if getattr(e, "name", None) and not (package + ".").startswith(e.name + "."):
        raise                     # the module's own missing dependency: that is the error to show
    finally:
      for f in folders:
        sys.path.remove(f)
  loaded = sys.modules.get(stem)
  if reuse and loaded is not None and os.path.abspath(getattr(loaded, "__file__", "") or "") == os.path.abspath(path):
    return loaded
  name = stem if stem.isidentifier() and stem not in sys.modules else f"_mgpu_dsl_check_{next(_modules)}_{stem}"
  spec = importlib.util.spec_from_file_location(name, path)
  if spec is None or spec.loader is None:
    raise ImportError(f"cannot import {path}: not a Python file")
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module
  folder = os.path.dirname(os.path.abspath(path))
  added = folder not in sys.path
  if added:
    sys.path.insert(0, folder)       # so the file can import its neighbours
  try:
    spec.loader.exec_module(module)
  except BaseException:
    sys.modules.pop(name, None)
    raise
  finally:
    if added:
      sys.path.remove(folder)
  return module


def _package_name(path: str) -> str | None:
  """`pkg.sub.mod` for a file inside package folders (each with an __init__.py), else None."""
  folder, parts = os.path.dirname(os.path.abspath(path)), [os.path.splitext(os.path.basename(path))[0]]
  if parts[0] == "__init__" or not os.path.isfile(os.path.join(folder, "__init__.py")):
    return None
  while os.path.isfile(os.path.join(folder, "__init__.py")):
    name = os.path.basename(folder)
    if not name.isidentifier():
      return None
    parts.insert(0, name)
    folder = os.path.dirname(folder)
  return ".".join(parts) if all(p.isidentifier() for p in parts) else None


def kernels_of(module, declared_before=None) -> list[KernelFunction]:
  """The kernels a module defines, plus those it declared specs for, in definition order.

  `declared_before` (the kernels declared before the module was imported) also picks
  up kernels the module declared without defining them (imported or made by exec), but not
  those that modules it imports declared (their own files report them).
  """
  def mine(k):
    return getattr(k.fn, "__module__", None) == module.__name__

  here = os.path.abspath(getattr(module, "__file__", "") or "")

  def declared_here(k):        # new specs, declared by this file (for a kernel defined elsewhere too)
    return len(_DECLARED.get(k, ())) > declared_before.get(k, 0) and here in _DECLARED_IN.get(k, ())

  from .autotune import Autotuner
  found = [v.kernel if isinstance(v, Autotuner) else v for v in vars(module).values()]
  out = [v for v in found if isinstance(v, KernelFunction) and mine(v)]
  out += [k for k in _DECLARED if k not in out and (
      mine(k) if declared_before is None else declared_here(k))]
  return list(dict.fromkeys(out))      # a kernel bound to two names is checked once


def check_file(path: str, seen: set | None = None) -> FileReport:
  """Import `path` and check every declared specialisation of every kernel in it. `seen`: the
  specialisations earlier files of one run checked (a run's files import each other)."""
  report = FileReport(path)
  before = {k: len(v) for k, v in _DECLARED.items()}
  try:
    module = load_module(path, reuse=seen is not None)
  except BaseException as e:   # noqa: BLE001  (a file that does not import is a failed check)
    if isinstance(e, KeyboardInterrupt):
      raise
    report.import_error = e
    return report
  for kernel in kernels_of(module, before):
    mine = getattr(kernel.fn, "__module__", None) == module.__name__
    if kernel not in _DECLARED:
      report.skipped.append(kernel)
    else:         # a kernel of another file: the specs this file added to it
      here = None if mine else os.path.abspath(getattr(module, "__file__", "") or "")
      report.results.extend(check_kernel(kernel, 0 if mine else before.get(kernel, 0), seen, here))
  return report


# ---------------------------------------------------------------------------- rendering
def render_error(e: E.KernelError, *, relative: bool = True) -> str:
  """`ClassName: file:line:col: message [CODE]`, the source line, a caret, notes and hint.

  With `relative`, a file under the working directory is named by its relative path.
  """
  text = f"{type(e).__name__}: {e.render()}"
  if relative and os.path.isabs(e.filename):
    rel = os.path.relpath(e.filename)
    if not rel.startswith(os.pardir):
      text = text.replace(e.filename + ":", rel + ":")
  return text


def render_crash(e: BaseException) -> str:
  tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
  return f"crash (a bug in mgpu_dsl; please report it):\n{tb.rstrip()}"


def render_import_error(path: str, e: BaseException) -> str:
  if isinstance(e, E.KernelError):     # e.g. a kernel run in interpret mode at import
    text = f"{path}: cannot import:\n" + "\n\n".join(render_error(x) for x in e.errors)
    if isinstance(e, E.NoGpuError):    # a demo call at the file's top level, which the checker runs
      text += ("\nnote: python -m mgpu_dsl check imports the file, running its top-level code: call kernels"
               " under `if __name__ == \"__main__\":` (the checker does not run that block) and declare what"
               " to check with mg.check_specs(kernel, *specs)")
    return text
  if isinstance(e, SyntaxError):
    return f"{path}: cannot import: SyntaxError: {e.filename}:{e.lineno}:{e.offset}: {e.msg}"
  frames = [f for f in traceback.extract_tb(e.__traceback__)
            if os.path.abspath(f.filename) == os.path.abspath(path)]
  where = f" (at {path}:{frames[-1].lineno})" if frames else ""
  return f"{path}: cannot import{where}: {type(e).__name__}: {e}"


def to_json(e: E.KernelError) -> dict:
  return {"class": type(e).__name__, "code": e.code, "file": e.filename, "line": e.lineno,
          "column": e.col_offset, "message": e.message, "hint": e.hint, "notes": list(e.notes),
          "rendered": render_error(e)}
