"""User-facing diagnostics: one class per class of mistake, each with a stable code.

Every error carries the user's location and renders as::

    mgpu_dsl.CopyDtypeError: kernels.py:14:4: cannot copy x (GMEM, float32) into buf (SMEM, float16): element types differ
        ml.copy(x.at[i], buf)
        ^~~~~~~~~~~~~~~~~~~~~
    hint: allocate buf as float32 (or leave dtype out to infer it), ...

The classes are exported from ``mgpu_dsl`` and their ``__module__`` says so, so
a traceback names them as users import them.
"""
from __future__ import annotations

from . import hw
from .loc import Loc, UNKNOWN


class KernelError(Exception):
  """Base of every error a kernel author can meet. Carries a source location."""
  code = "MG000"

  def __init__(self, message: str, loc: Loc = UNKNOWN, hint: str | None = None,
               *, notes: tuple[str, ...] = ()):
    self.message = message
    self.loc = loc
    self.hint = hint
    self.notes = tuple(notes)
    self.errors: list[KernelError] = [self]   # all errors of one check pass
    super().__init__(message)

  filename = property(lambda self: self.loc.filename)
  lineno = property(lambda self: self.loc.lineno)
  col_offset = property(lambda self: self.loc.col_offset)
  end_lineno = property(lambda self: self.loc.end_lineno)
  end_col_offset = property(lambda self: self.loc.end_col_offset)

  def render(self) -> str:
    """`file:line:col: message [code]`, the source line, a caret span, notes, hint."""
    out = [f"{self.loc}: {self.message} [{self.code}]"]
    src = self.loc.source_line
    if src:
      out.append("    " + src.rstrip())
      col = self.loc.col_offset
      if self.loc.end_lineno == self.loc.lineno and self.loc.end_col_offset:
        width = max(1, self.loc.end_col_offset - col)
      else:
        width = max(1, len(src.rstrip()) - col)
      pad = "".join(c if c == "\t" else " " for c in src[:col])     # tabs kept: the caret lines up
      out.append("    " + pad + "^" + "~" * (width - 1))
    out.extend(f"note: {n}" for n in self.notes)
    if self.hint:
      out.append(f"hint: {self.hint}")
    return "\n".join(out)

  def __str__(self):
    text = self.render()
    rest = self.errors[1:]
    if rest:
      text += f"\n\n{len(rest)} more error(s) in this kernel:"
      for e in rest:
        text += f"\n\n{type(e).__name__}: " + e.render()
    return text


def _error(name: str, code: str, doc: str) -> type[KernelError]:
  cls = type(name, (KernelError,), {"code": code, "__doc__": doc})
  cls.__module__ = "mgpu_dsl"
  return cls


KernelError.__module__ = "mgpu_dsl"

# Language and Python-level mistakes.
UnsupportedSyntaxError = _error("UnsupportedSyntaxError", "MG001", "Python the DSL does not support.")
UnknownNameError = _error("UnknownNameError", "MG002", "A name that is not defined in the kernel or its module.")
KernelTypeError = _error("KernelTypeError", "MG003", "A value of the wrong kind (ref, tensor, scalar) for an operation.")
UnboundNameError = _error("UnboundNameError", "MG004", "A name possibly unbound here (defined in one branch or inside a loop).")
LoopCarryTypeError = _error("LoopCarryTypeError", "MG005", "A loop-carried value whose type changes across iterations.")
SignatureError = _error("SignatureError", "MG006", "A kernel called with arguments that do not match its parameters.")
LaunchConfigError = _error("LaunchConfigError", "MG007", "An invalid grid, block or cluster.")
SourceUnavailableError = _error("SourceUnavailableError", "MG008", "A kernel or helper whose Python source cannot be read (exec, a REPL string).")
DifferentiationError = _error("DifferentiationError", "MG009", "jax.grad (or another derivative) of a kernel call, which has no automatic derivative.")
StaticAssertionError = _error("StaticAssertionError", "MG011", "An assert (or raise) of the kernel's own that fails while tracing, on static values (shapes, dtypes, constexprs).")
NoGpuError = _error("NoGpuError", "MG010", "A GPU-only tool (mg.bench) or a kernel call (not interpreted) where JAX sees no GPU, or a call mg.bench could not time.")

# dtype mistakes.
CopyDtypeError = _error("CopyDtypeError", "MG101", "A copy between refs whose element types differ.")
StoreDtypeError = _error("StoreDtypeError", "MG102", "A register value stored into a ref of another dtype.")
DtypeConflictError = _error("DtypeConflictError", "MG103", "Two uses of an SMEM buffer infer different dtypes.")
DtypeMismatchError = _error("DtypeMismatchError", "MG104", "An operation on values of different dtypes.")
DtypeInferenceError = _error("DtypeInferenceError", "MG105", "An SMEM buffer whose dtype nothing determines.")
UnsupportedDtypeError = _error("UnsupportedDtypeError", "MG106", "An operation the hardware does not support on this dtype.")

# shape mistakes.
CopyShapeError = _error("CopyShapeError", "MG201", "A copy between refs of different shapes.")
ShapeMismatchError = _error("ShapeMismatchError", "MG202", "An operation on or a store of tensors of different shapes.")
IndexOutOfBoundsError = _error("IndexOutOfBoundsError", "MG203", "A static index or slice outside a ref's shape.")
LayoutError = _error("LayoutError", "MG204", "A register tensor shape the register layouts cannot hold.")

# memory-space mistakes.
CopySpaceError = _error("CopySpaceError", "MG301", "A copy between memory spaces that has no hardware path (GMEM -> GMEM).")
ClusterRefError = _error("ClusterRefError", "MG302", "ml.cluster_ref or multicast of anything but SMEM, or outside a cluster.")
ClusterSyncError = _error("ClusterSyncError", "MG304", "An ml.cluster_sync() that the CTAs of a cluster call different numbers of times (a hang on the GPU).")
InputWriteError = _error("InputWriteError", "MG303", "A write into a kernel input (inputs are read-only unless aliased to an output).")

# TMA and SMEM limits.
TmaLimitError = _error("TmaLimitError", "MG401", "A copy the TMA engine cannot do (box, rank, 16-byte rules).")
SmemCapacityError = _error("SmemCapacityError", "MG402", f"SMEM buffers larger than the {hw.SMEM_WORDS} a kernel may use.")
RegisterCapacityError = _error("RegisterCapacityError", "MG403",
                               "A register value far larger than a thread's registers can hold.")

# Tensor cores.
MmaOperandError = _error("MmaOperandError", "MG501", "ml.dot operands the tensor cores cannot take (space, shape, tiling).")
PipelineError = _error("PipelineError", "MG502", "A loop ml.range(..., stages=) cannot pipeline.")
WarpSpecializeError = _error("WarpSpecializeError", "MG503",
                             "A kernel with a warp-specialised loop has work one of its roles cannot do.")

# What memory holds: reads of memory nothing wrote, outputs left unwritten. Reported while
# compiling where the grid and the index arithmetic prove it, else by interpret mode.
UninitializedReadError = _error("UninitializedReadError", "MG601", "A read of memory nothing wrote before it (SMEM, or an output before the program wrote it).")
UncoveredOutputError = _error("UncoveredOutputError", "MG602", "Output elements that no program writes.")


# Found while running in interpret mode (lowering/interpret.py).
InterpretError = _error("InterpretError", "MG950", "A kernel that goes wrong at run time in interpret mode (a hang, a division by zero).")


def _interp_error(name, code, doc):
  cls = type(name, (InterpretError,), {"code": code, "__doc__": doc})
  cls.__module__ = "mgpu_dsl"
  return cls


RaceError = _interp_error("RaceError", "MG951", "A data race the GPU would not report (programs writing the same output, a read before its copy landed).")
OutOfBoundsError = _interp_error("OutOfBoundsError", "MG952", "A dynamic index outside a buffer (undefined behaviour on the GPU).")
MaskedReductionError = _interp_error("MaskedReductionError", "MG953", "A reduction whose result the lanes a masked load kept off past an array's end change (Triton's tail: other=0 under a max).")


class InternalError(KernelError):
  """A failure inside mgpu_dsl itself, at the user's line. Please report it."""
  code = "MG900"
  default_hint = "this is a bug in mgpu_dsl, not in your kernel; please report it with the kernel"

  def __init__(self, message: str, loc: Loc = UNKNOWN, hint: str | None = None, *, notes=()):
    super().__init__(message, loc, hint or self.default_hint, notes=notes)

  @classmethod
  def wrap(cls, what: str, exc: Exception, loc: Loc) -> "InternalError":
    """`what` failed with `exc`: raise the result `from exc`, so bug reports keep the cause."""
    lines = str(exc).strip().splitlines()
    detail = lines[0][:300] if lines else ""
    return cls(f"{what}: {type(exc).__name__}: {detail}", loc)


InternalError.__module__ = "mgpu_dsl"

def about(err: KernelError, buffers, *, cause: bool = False) -> KernelError:
  """Mark `err` as about these SMEM buffers (ir.Values); a `cause` (a tile shape that an op
  cannot take at all) comes before the earlier errors about the same buffers, whose fixes would
  not help (copying an (n=512) tile in pieces still leaves a dot too wide)."""
  err.about = frozenset(b.id for b in buffers)
  err.cause = cause
  return err


def causes_first(errors: list[KernelError]) -> list[KernelError]:
  """`errors` in program order, except that a cause (see `about`) moves before the first earlier
  error about one of its buffers."""
  out = list(errors)
  for e in [e for e in errors if getattr(e, "cause", False)]:
    at = out.index(e)
    first = next((i for i, x in enumerate(out[:at]) if getattr(x, "about", frozenset()) & e.about), None)
    if first is not None:
      out.insert(first, out.pop(at))
  return out


def note_inline_calls(e: KernelError, sites: dict) -> None:
  """Errors found after tracing (a race, an uninitialised read, SMEM capacity; interpret mode's) at a
  line of an @ml.inline helper: notes naming the calls of the helper that line was traced for
  (`sites`: frontend.builder.Builder.inline_sites)."""
  for err in e.errors:
    paths = sites.get((err.filename, err.lineno, err.col_offset))
    if not paths or any(" call of " in n for n in err.notes):
      continue
    calls = sorted({path[-1] for path in paths})[:4]
    which = "this call" if len(calls) == 1 else "a call"      # (traced once for each call)
    err.notes = tuple(err.notes) + tuple(f"{at}: in {which} of {name}" for at, name in calls)


def raise_all(errors: list[KernelError]):
  """Raise the first of `errors` with `.errors` holding them all (str() renders every one)."""
  errors = causes_first(errors)
  first = errors[0]
  first.errors = list(errors)
  raise first


class KernelWarning(UserWarning):
  """Base of the warnings a kernel author can meet: a kernel that compiles and computes what it says, but slowly,
  imprecisely or at a cost worth knowing. Issued at the user's line with a hint (`warn`)."""


class RegisterSpillWarning(KernelWarning):
  """A kernel that compiles and computes, but whose live register tensors at one op need more registers
  than a thread has (an ml.dot's accumulator at too few warpgroups): ptxas spills them to local memory, so
  it runs several times slower. Issued at the user's line, with the hint that fits (MG403's wording)."""


class PrecisionWarning(KernelWarning):
  """A kernel that compiles and computes what it says, but in a type too narrow for it: a float16 or bfloat16
  value a loop adds a term to on each of its many trips, rounded to 16 bits after each (a bfloat16 sum of 2048
  terms of one sign stops growing at 256 of them). Issued at the user's line with the float32 accumulation as the
  hint (frontend/narrow_sums.py)."""


class ModuleSizeWarning(KernelWarning):
  """A kernel whose Mosaic GPU module is very large (more operations than MODULE_OPS_MOST): work unrolled at compile
  time (an ml.static_range loop of many trips, a huge tile's elementwise work) that ptxas takes minutes to compile.
  Issued at the kernel's def line, naming the module's size, with the hint of a run-time loop (probe 58a)."""


class TritonSemanticsWarning(KernelWarning):
  """A kernel ported from Triton (its module imports the language as `tl`) that uses an operator whose meaning here
  is jnp's where Triton's differs: `a // b` and `a % b` of operands that may be negative (floored, where Triton
  truncates toward zero). Issued at the user's line, with both spellings that say which is meant (probe 58d)."""


MODULE_OPS_MOST = 100_000   # (the examples' largest module: 10.2k ops; on an H100 modules of 62k-66k ops build and run in
                            # 7 s (session 45); probe 58a's unrolled products, 161k-565k, did not finish in 430 s)


def warn(err: KernelError, category=RegisterSpillWarning):
  """`err`, rendered with its location and hint, as a warning at the user's line (a kernel that works, slowly)."""
  import warnings
  text = err.render()
  if type(err) is KernelError:           # (a warning of no error class: no code)
    text = text.replace(f" [{err.code}]", "", 1)
  warnings.warn_explicit(text, category, err.filename or "<kernel>", err.lineno or 0)


ALL_ERRORS = [c for c in list(globals().values())
              if isinstance(c, type) and issubclass(c, KernelError)]

__all__ = [c.__name__ for c in ALL_ERRORS] + ["KernelWarning", "RegisterSpillWarning", "PrecisionWarning",
                                              "ModuleSizeWarning", "TritonSemanticsWarning"]
