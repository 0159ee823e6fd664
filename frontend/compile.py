"""The frontend's entry point: a Python kernel function + argument specs -> `ir.Kernel`.

Runs without JAX: argument specs are `ArgSpec(shape, dtype)` pairs, with any
numpy-compatible dtype.
"""
from __future__ import annotations

import ast
import dataclasses
import numbers
import math

import numpy as np

from . import acc_fences
from . import errors as E
from . import hw
from . import ir
from . import jumps
from . import language as L
from .triton_semantics import is_triton_port, warn_divisions
from .builder import Builder
from .checks import check_kernel, mark_nonzero_divisions
from .contraction import empty_loop_errors
from .deep_walks import deep_walks, too_deep
from .mma_registers import check_mma_registers
from .carried_registers import check_carried_registers
from .narrow_sums import check_narrow_sums
from .mask_axes import check_mask_axes, with_mask_axes
from .where_axes import check_where_axes
from .tma_starts import check_minor_starts, check_tiled_starts, mark_register_starts
from .dtypes import DType, to_dtype
from .infer import unify
from .int_dot_chain import chain_integer_dots
from .layout_checks import check_layouts
from .layouts import assign_layouts
from .index_grids import grid_index_masks
from .relayout import assign_layouts_relayout
from .remat import split_index_vectors
from .loc import Loc
from .ops.atomic import accumulated_outputs, check_atomic_layouts
from .cas_start import check_cas_start
from .ops.atomic_rmw import plan_fetch_scratch
from .ops.memory import View
from .ops.permute import drop_dead_transposes
from .ops.roll import check_window_uses
from .pipeline import pipeline_loops
from .warp_specialize import release_early
from .pingpong import insert_turns
from .smem import plan_scratch, plan_smem
from .source import Source, read_function
from .sync import SyncPass
from .tracer import Tracer
from .env import local_names
from .types import DTypeVar, RefType, ScalarType, Space, resolve, resolved


@dataclasses.dataclass(frozen=True)
class ArgSpec:
  shape: tuple[int, ...]
  dtype: DType
  weak: bool = False     # a 0-d input made of a Python number (JAX's weak type): its reads are weakly typed

  @staticmethod
  def of(x, weak=False) -> "ArgSpec":
    d = to_dtype(x.dtype)
    if d is None:
      raise TypeError(f"unsupported dtype {x.dtype}")
    return ArgSpec(tuple(int(s) for s in x.shape), d, bool(weak) and not tuple(x.shape))


@dataclasses.dataclass
class ParsedKernel:
  """A kernel function's AST and signature; parsed once per function."""
  fn: object
  source: Source
  tree: ast.FunctionDef
  ref_params: list[str]
  constexpr_params: list[str]
  defaults: dict
  scope: dict
  scalar_params: tuple = ()      # ref parameters annotated ml.scalar: read as scalars at the start
  # An input passed as a pytree (a dict, tuple or NamedTuple of arrays, as pallas_call takes them): its
  # parameter -> (rebuild, its leaves' names in ref_params), `rebuild` making the structure of their refs
  # (mgpu_dsl/pytree_inputs.py expands ref_params per call structure)
  trees: dict = dataclasses.field(default_factory=dict)
  # `def kernel(*refs)` (Pallas's x_ref, o_ref = refs): the star parameter's name, taking the refs the named
  # ones leave, inputs then outputs, as a tuple; a call's count spreads it (mgpu_dsl/star_refs.py), else None
  vararg: str | None = None

  def scalar_positions(self) -> tuple[int, ...]:
    """Argument positions of the ml.scalar parameters (they are inputs)."""
    return tuple(self.ref_params.index(p) for p in self.scalar_params)

  @property
  def loc(self) -> Loc:
    return self.source.loc(self.tree)

  def option_loc(self, name: str) -> Loc:
    """Where the decorator sets `name=` (the keyword and its value), else the kernel's `def`."""
    for d in self.tree.decorator_list:
      for k in (d.keywords if isinstance(d, ast.Call) else ()):
        if k.arg == name:
          return self.source.loc(k)
    return self.loc


def parse(fn) -> ParsedKernel:
  src, tree, scope = read_function(fn, "@mgpu_kernel")
  a = tree.args
  inner = getattr(fn, "__wrapped__", None)
  if inner is not None and (a.vararg or a.kwarg):   # @mgpu_kernel over @logged (functools.wraps): its wrapper
    name = getattr(inner, "__name__", "the kernel")
    raise E.UnsupportedSyntaxError(
        f"@mgpu_kernel decorates {tree.name}, the wrapper another decorator made around {name}: a kernel is"
        f" read from its def's source, so the wrapper's body would be the kernel", src.loc(tree),
        hint=f"put @mg.mgpu_kernel(...) right above `def {name}` (below the other decorator, which then wraps"
             f" the kernel and runs around each call)")
  if a.vararg and not a.kwarg and not a.defaults and all(p.annotation is None for p in a.posonlyargs + a.args):
    # def kernel(*refs), def kernel(x_ref, *out_refs), as pallas_call's kernels: a tuple of the refs the named
    # parameters leave (mgpu_dsl/star_refs.py spreads it per call)
    return dataclasses.replace(parse_named(fn, src, tree, scope), vararg=a.vararg.arg)
  if a.vararg or a.kwarg:
    star = a.vararg or a.kwarg
    kind = f"*{a.vararg.arg}" if a.vararg else f"**{a.kwarg.arg}"
    named = ", ".join(p.arg for p in a.posonlyargs + a.args)
    raise E.UnsupportedSyntaxError(
        f"{kind} in a kernel signature: a kernel's parameters are one named ref per input and output",
        src.loc(star),
        hint=(f"list every ref parameter by name, def {tree.name}({named + ', ' if named else ''}out1, out2, ...):"
              f" outputs only some calls want (Pallas's *residual_refs) are written by every call, and the"
              f" caller drops those it does not need"
              if a.vararg and named else
              f"list every ref parameter by name, the inputs then the outputs, def {tree.name}(x, y, out): for a"
              f" number of tensors that varies (a multi-tensor optimizer step), pass them as one flat array,"
              f" jnp.concatenate([t.ravel() for t in ts]), with each tensor's start in an int32 offsets array that"
              f" the programs read (start = offs[t], end = offs[t + 1]), or call the kernel once per tensor"
              if a.vararg else
              f"name the compile-time constants as keyword-only parameters, def {tree.name}(..., *, block:"
              f" ml.constexpr), and pass them by keyword"))
  return parse_named(fn, src, tree, scope)


def parse_named(fn, src, tree, scope) -> ParsedKernel:
  """The kernel's named parameters: refs, constexprs, scalars and defaults (a star parameter aside)."""
  a = tree.args
  refs, consts, scalars, defaults = [], [], [], {}
  positional = a.posonlyargs + a.args
  pos_defaults = dict(zip([p.arg for p in positional][len(positional) - len(a.defaults):], a.defaults))
  if not positional + a.kwonlyargs and not a.vararg:
    raise E.SignatureError(f"{tree.name} has no parameters: a kernel takes its inputs, then one parameter per"
                           f" output (the refs it writes)", src.loc(tree),
                           hint=f"def {tree.name}(x, out): out[...] = x[...]")
  for p in positional + a.kwonlyargs:
    if p.arg == "interpret":          # the call's own keyword: the constexpr would never be passed
      raise E.SignatureError("a kernel parameter cannot be named interpret: kernel(..., interpret=True) is the"
                             " call's switch to interpret mode", src.loc(p), hint="rename the parameter")
    is_const = p in a.kwonlyargs or (p.annotation is not None and _annotation(fn, p, scope) is L.constexpr)
    if not is_const and p.annotation is None and p.arg in pos_defaults:    # def k(x, out, scale=2.0)
      text = ast.unparse(pos_defaults[p.arg])
      const = (f"annotate it, {p.arg}: ml.constexpr = {text}, or make it keyword-only, after a bare *:"
               f" def {tree.name}(..., *, {p.arg}={text})")
      raise E.SignatureError(
          f"{p.arg} has a default ({text}), but a positional parameter without ml.constexpr is a ref (an input or"
          f" output array), so {p.arg} would be taken for an array", src.loc(p),
          hint=(f"a ref parameter is always bound, one per input and output (Pallas's optional mean_ref=None"
                f" outputs are not): drop the default, {p.arg}, and give out_shape an output for it; if"
                f" {p.arg} is a compile-time option instead, {const}") if text == "None" else
          f"make it a compile-time constant: {const}")
    (consts if is_const else refs).append(p.arg)
    if not is_const and p.annotation is not None and _annotation(fn, p, scope) is L.scalar:
      scalars.append(p.arg)
  for p, d in list(pos_defaults.items()) + [(p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]:
    defaults[p] = _default(fn, p, d, src, scope)
  return ParsedKernel(fn, src, tree, refs, consts, defaults, scope, tuple(scalars))


def _default(fn, name, node, src, scope):
  """The value Python bound as `name`'s default when the def ran: a default may read the names of an
  enclosing function (`def make(c): ... def k(x, out, *, f: ml.constexpr = c)`), which are not in the
  kernel's own scope, and is not evaluated again later (as Python's is not)."""
  kw = getattr(fn, "__kwdefaults__", None) or {}
  if name in kw:
    return kw[name]
  code, pos = fn.__code__, getattr(fn, "__defaults__", None) or ()
  names = code.co_varnames[:code.co_argcount]
  if name in names and names.index(name) >= len(names) - len(pos):
    return pos[names.index(name) - (len(names) - len(pos))]
  return eval(compile(ast.Expression(node), src.filename, "eval"), scope)


def _annotation(fn, p, scope):
  """The value of parameter `p`'s annotation: the one Python evaluated (it may name an enclosing
  function's local, `cx = ml.constexpr`), else (a string, under `from __future__ import annotations`)
  its text evaluated in the kernel's scope."""
  try:
    value = (getattr(fn, "__annotations__", None) or {}).get(p.arg)
  except Exception:      # Python 3.14's lazy annotations: one names something undefined
    value = None
  if value is not None and not isinstance(value, str):
    return value
  try:
    return eval(compile(ast.Expression(p.annotation), "<annotation>", "eval"), scope)
  except Exception:
    return None


@dataclasses.dataclass(frozen=True)
class Batch:
  """A kernel run once per element of leading batch dimensions (jax.vmap): grid axis `axis`
  (1 in the kernel's own grid) counts the batch elements of every level. `sizes` are the
  levels' sizes, outermost first; `batched[level][i]` says whether input i has that level's
  dimension (outputs have all of them). Parameters then have the batch dimensions in front,
  and the kernel body sees each program's slice, with the kernel's own shapes."""
  axis: int
  sizes: tuple[int, ...]
  batched: tuple[tuple[bool, ...], ...]


def trace(pk: ParsedKernel, in_specs, out_specs, constexprs: dict, **kw) -> ir.Kernel:
  """Trace, infer and check one specialisation of a kernel.

  `aliases` ({input index: output index}) makes an input and an output one buffer; `x64`: JAX's
  64-bit mode is on (Python's int and float as dtypes are then int64 and float64, as in jnp).
  A small window read whole is held as the vector of its elements (frontend/ops/small_loads.py), which
  some ops do not take (a scan along its axis): a kernel that then fails with MG204 at such a read is traced
  again with such windows read as tiles, so that it fails as it did, at the read, with the hint that pads it.
  Before that, a kernel failing with a layout error is traced with one-element tensors met and carried as their
  elements (ops/one_element.py: a decode's (1,) running max beside a (1, 64) row), then padded (_padded_trace);
  a kernel the plain trace takes keeps its IR (one softmax row a program: its (1, 1) statistic broadcast).
  A kernel whose float jnp.dot products ml.dot did not take (traced as broadcast chunks, jnp_einsum.chunked_product)
  and that every trace fails with a layout error is traced once more with those products as ml.dot of register
  tiles (TF32 on the tensor cores, as float32 tiles of 64 rows are): a (2, 48) by (48, 16) product's chunks are a
  3-D broadcast no layout holds; else the first error stands."""
  with deep_walks():
    return _trace_kept(pk, in_specs, out_specs, constexprs, **kw)


def _trace_kept(pk, in_specs, out_specs, constexprs, **kw) -> ir.Kernel:
  try:
    kernel = _each_trace(pk, in_specs, out_specs, constexprs, **kw)
  except E.KernelError as e:
    plan = next((x.split_k for x in e.errors if getattr(x, "split_k", None)), None)
    if plan is None or kw.get("split_k"):
      raise
    try:              # (operand buffers wider than a tile along a ragged K, split: ops/split_k.py, probe 59a)
      kernel = _each_trace(pk, in_specs, out_specs, constexprs, **dict(kw, split_k=plan))
    except E.KernelError:
      try:            # (a split the kernel does not take: such loads a tile at a time, layout_checks.by_tile_blocks)
        kernel = _each_trace(pk, in_specs, out_specs, constexprs, **dict(kw, split_k={}))
      except E.KernelError:
        raise e from None
  import warnings
  for w in kernel.__dict__.pop("_warnings", ()):       # the warnings of the trace kept, issued once it is kept
    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
  return kernel


def _each_trace(pk, in_specs, out_specs, constexprs, **kw) -> ir.Kernel:
  chunks = []
  try:
    return _traced(pk, in_specs, out_specs, constexprs, chunks, **kw)
  except E.KernelError as e:
    if isinstance(e, E.InternalError) or not chunks or not any(
        isinstance(x, (E.LayoutError, E.SmemCapacityError)) for x in e.errors):
      raise     # (MG402 too: chunks' scratch past the SMEM, an (8, 128) by (128, 256) float32 einsum; probe 62b)
    first = e
  try:
    return _traced(pk, in_specs, out_specs, constexprs, None, **dict(kw, no_chunks=True))
  except E.KernelError:
    raise first from None


def _traced(pk, in_specs, out_specs, constexprs, chunks, **kw) -> ir.Kernel:
  """compile.trace's traces, the first recording in `chunks` the products it traced as chunks."""
  used, dots = [], []
  try:
    return _trace(pk, in_specs, out_specs, constexprs, small_loads=used, dot_layouts=dots, chunks=chunks, **kw)
  except E.KernelError as e:
    if isinstance(e, E.InternalError) or not (dots or any(isinstance(x, E.LayoutError) or getattr(
        x, "pads_help", False) for x in e.errors)):
      raise                 # (dots: a jnp.dot ml.dot met a layout error in, reported as MG003 with its hint)
    first = e
  kw = dict(kw, one_elements=True)    # one-element tensors as their elements (ops/one_element.py), from here on
  try:
    return _trace(pk, in_specs, out_specs, constexprs, small_loads=[], dot_layouts=[], **kw)
  except E.KernelError:
    pass                    # (then the padded traces; where all fail, the plain trace's error)
  padded = _padded_trace(pk, in_specs, out_specs, constexprs, **kw)
  if padded is not None:
    return padded
  if not used:
    raise first
  try:
    return _trace(pk, in_specs, out_specs, constexprs, small_loads=None, **dict(kw, one_elements=False))
  except E.KernelError as e:
    if isinstance(e, E.InternalError) or _at_small_reads(first, used) or not all(
        isinstance(x, E.LayoutError) for x in e.errors):
      raise               # (at the read as a tile; or a mistake the later checks found: a mask past the array's end)
    raise first from None   # (a layout error elsewhere stands where the first trace found it: probe 50a)


def _at_small_reads(e, used) -> bool:
  """Whether one of the first trace's errors stands at a small window read whole as a vector (its flattened shape),
  or says that an op takes no such vector (`held_vector`: v[a:a + 16, 3:131] of an (18, 144) read), which the trace
  that reads such windows as tiles reports at the read in the window's own shape, with the hint that pads it. An
  error elsewhere (an (8, 40) statistic a broadcast met) is the one to report: that trace failed at the read
  instead, a line the first trace had passed (probe 50a)."""
  reads = {(l.filename, l.lineno, l.col_offset) for l in used}
  return any(getattr(x, "held_vector", False) or (x.loc.filename, x.loc.lineno, x.loc.col_offset) in reads
             for x in e.errors)


def _padded_trace(pk, in_specs, out_specs, constexprs, **kw):
  """The kernel traced with short windows no register tensor holds read padded (ops/padded_tiles.py), then, where
  that fails, with 2-D windows of rows no row-wise layout takes padded too (RowPads); None where both traces fail in
  any way (the kernel then fails as traced first), but for a store of a padded value into a window of a shape it
  does not broadcast to, the user's mistake, reported in the value's own shape (probe 47a). Where either padded
  1-D reads of one length apart (a bool one beside a float one), a trace pads them all to a multiple of 16
  (WideVectors); where the kernel reads a 2-D tile of rows not a multiple of 4 whose columns registers hold (a
  (7, 128) tile of heads), one pads those too (WholeRowPads: its halves need such rows); where the kernel makes an
  ml.arange of an odd length, a last one pads those too (ArangePads)."""
  from .ops.padded_tiles import ArangePads, LeadPads, PadAbort, Pads, RowPads, WholeRowPads, WideVectors
  mixed, mistake, aranges, whole, short = False, None, False, False, False
  for pads in (Pads(), RowPads(), WideVectors(), WholeRowPads(), ArangePads(), LeadPads()):   # (then tiles of rows
    if isinstance(pads, WideVectors) and not mixed or isinstance(pads, ArangePads) and not aranges \
        or type(pads) is WholeRowPads and not whole or type(pads) is LeadPads and not short:  # no row-wise layout
      continue                                                                                 # takes: 46d)
    try:
      return _trace(pk, in_specs, out_specs, constexprs, small_loads=None, pad_tiles=pads, **kw)
    except (E.KernelError, PadAbort) as e:
      whole |= getattr(pads, "whole_rows", False)
      short |= getattr(pads, "short_rows", False)
      mixed |= pads.mixed
      aranges |= getattr(pads, "odd_aranges", False)
      if mistake is None and any(getattr(x, "padded_mistake", False) for x in getattr(e, "errors", None) or [e]):
        mistake = e       # (a store of a padded value's own shape into a window of another: the user's mistake)
  if mistake is not None:
    raise mistake
  return None


def _trace(pk: ParsedKernel, in_specs, out_specs, constexprs: dict, **kw) -> ir.Kernel:
  """One trace, its warnings recorded with the kernel it returns (`trace` issues them) rather than issued: a trace
  that fails, or one a later trace replaces, warns of nothing (probe 57c: a padded retry's RegisterSpillWarning named
  a 128x1024 accumulator, beside the plain trace's error about a block-scaled GEMM whose accumulator was 128x256)."""
  import warnings
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    kernel = _trace_once(pk, in_specs, out_specs, constexprs, **kw)
  kernel._warnings = caught
  return kernel


def _trace_once(pk: ParsedKernel, in_specs, out_specs, constexprs: dict, *, grid, block, cluster, grid_axes=3,
           batch: Batch | None = None, aliases=None, x64: bool = False, small_loads=None, pad_tiles=None,
           dot_layouts=None, one_elements=False, chunks=None, no_chunks=False, split_k=None) -> ir.Kernel:
  loc = pk.loc
  n_in, n_out = len(in_specs), len(out_specs)
  if len(pk.ref_params) != n_in + n_out:
    raise E.SignatureError(
        f"{pk.tree.name} takes {len(pk.ref_params)} ref parameters ({', '.join(pk.ref_params)}) but was"
        f" given {n_in} input(s) and out_shape describes {n_out} output(s)", loc,
        hint="parameters are the inputs, then the outputs; mark compile-time constants `name: ml.constexpr`")
  missing = [c for c in pk.constexpr_params if c not in constexprs and c not in pk.defaults]
  if missing:
    raise E.SignatureError(f"{pk.tree.name} needs constexpr argument(s) {', '.join(missing)}", loc,
                           hint=f"pass them by keyword: kernel(x, {missing[0]}=...)")
  unknown = [c for c in constexprs if c not in pk.constexpr_params]
  if unknown:
    raise E.SignatureError(f"{pk.tree.name} has no constexpr parameter {unknown[0]!r}", loc,
                           hint=f"its constexpr parameters are: {', '.join(pk.constexpr_params) or 'none'}")
  aliases = check_aliases(pk, aliases, in_specs, out_specs)
  em = Builder(cluster=cluster, block=block)
  em.x64 = x64
  em.grid_axes = grid_axes      # the grid's axes as written (ops/control.py: ml.program_id of another is MG203)
  em.small_loads = small_loads
  em.pad_tiles = pad_tiles
  em.split_k = split_k
  em.dot_layouts = dot_layouts
  em.chunked = chunks if chunks is not None else []
  em.no_chunks = no_chunks
  em.one_elements = one_elements
  em.triton_port = is_triton_port(pk.scope)     # (Triton's meanings warned of: frontend/triton_semantics.py)
  tr = Tracer(pk.source, pk.scope, em)
  params = []
  for i, (name, spec) in enumerate(zip(pk.ref_params, list(in_specs) + list(out_specs))):
    lead = _batch_dims(batch, i, n_in)
    v = ir.Value(RefType(tuple(lead) + tuple(spec.shape), spec.dtype, Space.GMEM), name)
    params.append(ir.Param(v, name, is_output=i >= n_in, loc=pk.source.loc(_arg_node(pk.tree, name))))
    tr.env[name] = v
    _check_dims(v, params[-1].loc or loc)
  em.read_only = {p.value.id for p in params if not p.is_output}
  em.weak_inputs = {p.value.id for p, s in zip(params, in_specs) if getattr(s, "weak", False)}
  em.output_refs = [p.value for p in params if p.is_output]
  em.aliased = {params[i].value.id for i in aliases}
  em.alias_of = {params[n_in + o].value.id: params[i].value for i, o in aliases.items()}   # (hints)
  if batch is not None:
    _bind_batch_slices(tr, em, batch, params, n_in, loc)
    grid = tuple(math.prod(batch.sizes) if a == batch.axis else g for a, g in enumerate(grid))
    check_grid_limits(grid, loc, batch.axis)
  em.static_grid = tuple(grid)   # (ops/memory.py: `x.shape[0] // ml.num_programs(0)` as a window's size, probe 54d)
  for root, (rebuild, leaves) in pk.trees.items():     # p['w'], p[0], p.w: the structure of its leaves' refs
    tr.env[root] = rebuild([tr.env.pop(n) for n in leaves])
    if tr.env[root] is None:                           # an input passed as None (frontend/none_inputs.py)
      em.none_inputs = getattr(em, "none_inputs", frozenset()) | {root}
  for c in pk.constexpr_params:
    v = constexprs.get(c, pk.defaults.get(c))
    tr.env[c] = _weak(v)          # np.float32(3.0) (in a tuple too, or 0-d) is a Python number here
  for name in pk.scalar_params:
    _bind_scalar_param(pk, tr, em, name, n_in)
  try:
    tr.local_names = local_names(pk.tree.body)
    tr.body = pk.tree.body
    tr.run_body(jumps.without_return(pk.tree.body))    # returns under run-time ifs: the rest in the else
  except E.InternalError as e:
    E.raise_all(tr.errors + [e])
  tr.errors.extend(_rebound_outputs(tr, em, params, {params[n_in + o].value.id: params[i].value.id
                                                     for i, o in aliases.items()}))
  if tr.errors:     # every independent mistake of the pass, plus an SMEM overflow if known
    E.raise_all(tr.errors + _smem_overflow(pk, em, params, grid, block, cluster))
  _finalize_types(em, params)
  kernel = ir.Kernel(pk.tree.name, params, em.allocs, em.block, grid, block, cluster,
                     em.num_load_slots, loc)
  kernel.globals_read = ir.Captured(tr.globals_read)
  kernel.transient_ids = frozenset(em.transient)
  kernel.page_gathers = dict(getattr(em, "page_gathers", {}))     # (MG402's hint: frontend/page_gathers.py)
  kernel.staged_b = dict(getattr(em, "staged_b", {}))    # ml.dot's B tiles from registers (ops/dot_staging.py)
  kernel.staged_b_buffers = dict(getattr(em, "staged_b_buffers", {}))     # (their buffers, for MG402's hint)
  kernel.split_k = split_k          # (a retry's plan, {} after a failed one: layout_checks.by_tile_blocks then)
  kernel.static_skips = list(getattr(tr, "static_skips", {}).values())   # (for MG602's hint)
  kernel.inline_sites = em.inline_sites            # (for notes on errors found later, interpret mode's too)
  kernel.accumulated = accumulated_outputs(kernel.body, em.defs, kernel.outputs, getattr(em, "empty_loop_atomics", None))
  check_cas_start(kernel.body, em.defs, kernel.outputs, set(em.alias_of))     # (a cas that can never store)
  kernel.aliases = aliases
  kernel.narrow_gathers = em.narrow_gathers     # (layout hints)
  kernel.index_broadcasts = em.index_broadcasts     # (layout_errors: a gather's own broadcasts)
  kernel.gathered_reads = em.gathered_reads         # (grid_memory: MG601's hint for a gather reading a table whole)
  kernel.pad_tiles = dict(em.pad_tiles or {})   # (values computed padded: their own shapes; frontend/gather_bounds.py)
  kernel.batch_axis = em.batch_axis
  if batch is not None:      # (messages of interpret mode show the kernel's own shapes and programs)
    kernel.batch_sizes = tuple(batch.sizes)
    kernel.batch_lead = {p.value.id: len(_batch_dims(batch, i, n_in)) for i, p in enumerate(params)}
  try:
    kernel.watch_signs = bool(getattr(em, "triton_divisions", None))     # (the grid walk's signs: warn_divisions)
    errors, facts = check_kernel(kernel, em.defs)   # on the program as written, before the rewrites
    warn_divisions(em, facts.nonneg_scalars)        # (a Triton port's // and % of what may be negative)
    mark_nonzero_divisions(kernel, em.defs, facts)  # (divisors the grid walk proved non-zero: no zero guard)
    errors = with_mask_axes(check_mask_axes(kernel, em.defs, pk.tree), errors) + check_where_axes(kernel, em.defs)
    chain_integer_dots(kernel.body, em.defs)     # integer acc + ml.dot(a, b) -> ml.dot(a, b, acc)
    try:
      pipelined = pipeline_loops(kernel, em)
    except E.KernelError as e:      # a loop that cannot be pipelined comes first, then the proofs
      E.raise_all([e] + errors)
    if errors:
      E.raise_all(errors)
    check_narrow_sums(kernel)      # (a warning: a 16-bit float sum over many trips)
    ir.prune_dead(kernel.body)
    if drop_dead_transposes(kernel):      # (a named widened operand the product read as its buffer's view)
      ir.prune_dead(kernel.body)
    plan_fetch_scratch(kernel, em)        # (atomics whose old value is used: ops/atomic_rmw.py)
    check_window_uses(kernel)
    split_index_vectors(kernel, em.defs)
    grid_index_masks(kernel, em.defs)
    assign_layouts_relayout(kernel, em.defs, assign_layouts)     # reshapes of row-wise tiles: via SMEM
    _each_reported(lambda: check_layouts(kernel, em.defs), lambda: check_atomic_layouts(kernel),
                   lambda: check_mma_registers(kernel), lambda: check_carried_registers(kernel),
                   lambda: check_tiled_starts(kernel, em.defs, facts),
                   lambda: check_minor_starts(kernel, em.defs, facts))
    mark_register_starts(kernel, em.defs)
    late = facts.late + empty_loop_errors(kernel, getattr(em, "empty_dot_loops", []))
    if late:                 # (a k loop that stops short of K, or runs no trips: frontend/contraction.py)
      E.raise_all(late)
    plan_scratch(kernel, em)
    end = pk.source.loc(pk.tree.body[-1])
    kernel.smem_plan = plan_smem(kernel, em.defs)
    ins, outs = kernel.inputs, kernel.outputs
    SyncPass(em.defs, block=block, explicit=pipelined.explicit, deferred=pipelined.deferred,
             group=kernel.smem_plan.group,
             alias={ins[i].value.id: outs[o].value for i, o in (kernel.aliases or {}).items()}).run(em.block, end)
    release_early(kernel)
    insert_turns(kernel)
    acc_fences.mark(kernel.body)
  except E.KernelError as e:
    E.note_inline_calls(e, em.inline_sites)
    raise
  except Warning:          # a warning the user made an error (-W error::mgpu_dsl.RegisterSpillWarning): theirs
    raise
  except RecursionError:   # (probe 71b: a chain past DEEP_WALKS frames; it was MG900, "a bug in mgpu_dsl")
    raise too_deep(loc) from None
  except Exception as e:   # a bug in a pass, not in the kernel: say so, at the kernel
    raise E.InternalError.wrap(f"mgpu_dsl failed while compiling {pk.tree.name}", e, loc) from e
  return kernel


def _each_reported(*checks) -> None:
  """Run independent checks of the laid-out kernel; raise every mistake they find at once (each
  check stops at its first), in source order."""
  found = []
  for check in checks:
    try:
      check()
    except E.KernelError as e:
      if isinstance(e, E.InternalError):
        raise
      found.extend(e.errors)
  if found:
    if len({e.filename for e in found}) == 1:
      found.sort(key=lambda e: (e.lineno or 0, e.col_offset or 0))
    E.raise_all(found)


def _check_dims(v, loc) -> None:
  """An array dimension past hw.MAX_DIM elements cannot be indexed: kernels compute indices,
  and TMA takes coordinates, in 32 bits (an index past it would wrap silently)."""
  d = next((d for d, n in enumerate(v.type.shape) if n > hw.MAX_DIM), None)
  if d is None:
    return
  shape = v.type.shape
  n = shape[d]
  split = next((k for k in (1024, 512, 256, 128) if n % k == 0), None)
  example = (f": {v.name}.reshape{tuple(shape[:d]) + (n // split, split) + tuple(shape[d + 1:])}"
             if split else " (pad it to a multiple of 1024 first)")
  raise E.SignatureError(
      f"{v.name} has {n} elements along dimension {d}, more than the {hw.MAX_DIM} (2**31 - 1) a kernel"
      f" can index along one dimension: indices and TMA coordinates are 32-bit", loc,
      hint=f"split that dimension in two outside the kernel{example}, and index both in the kernel")


def check_grid_limits(grid, loc, vmap_axis=None) -> None:
  """CUDA launches at most hw.MAX_GRID CTAs along each axis; `vmap_axis` is the axis a jax.vmap
  batch was folded into (the kernel's own grid was checked before)."""
  over = next((a for a in range(3) if grid[a] > hw.MAX_GRID[a]), None)
  if over is None:
    return
  if over == vmap_axis:
    raise E.LaunchConfigError(
        f"jax.vmap folds a batch of {grid[over]} into grid axis {over}, and a launch has at most"
        f" {hw.MAX_GRID[over]} CTAs along it", loc,
        hint=f"map over chunks of at most {hw.MAX_GRID[over]}: jax.lax.map(f, xs, batch_size={hw.MAX_GRID[over]})"
             " runs jax.vmap(f) on one chunk at a time (nested vmaps fold into the same grid axis)")
  raise E.LaunchConfigError(
      f"grid {grid} has {grid[over]} CTAs along {'xyz'[over]}; a launch has at most {hw.MAX_GRID[over]} there",
      loc, hint="put the long axis first (x takes up to 2**31 - 1), or let each program walk several tiles"
                " (a persistent loop over range(ml.program_id(0), tiles, ml.num_programs(0)))")


def _batch_dims(batch, i, n_in) -> list[int]:
  if batch is None:
    return []
  return [n for n, on in zip(batch.sizes, batch.batched) if i >= n_in or on[i]]


def _bind_batch_slices(tr, em, batch, params, n_in, loc):
  """Bind each parameter's name to this program's slice of the batched array."""
  from .builder import Call
  from .ops import control, elementwise as ew, memory
  cx = Call(em, loc)
  pid = em.emit(control.ProgramId, batch.axis, loc=loc, types=[ScalarType(DType.i32)]).result
  em.batch_axis = batch.axis
  index, stride = [], math.prod(batch.sizes)
  for n in batch.sizes:
    stride //= n
    index.append(ew.binary(cx, ew.BinOp.MOD, ew.binary(cx, ew.BinOp.FLOORDIV, pid, stride), n))
  for i, p in enumerate(params):
    mine = [b for b, on in zip(index, batch.batched) if i >= n_in or on[i]]
    if mine:
      tr.env[p.name] = memory.view(cx, p.value, tuple(mine), p.name)


def _bind_scalar_param(pk, tr, em, name, n_in) -> None:
  """An `ml.scalar` parameter is a 0-d input read once, at the start, into a scalar."""
  from .builder import Call
  from .ops.access import scalar_load
  node = next(p for p in pk.tree.args.posonlyargs + pk.tree.args.args if p.arg == name)
  loc, ref = pk.source.loc(node), tr.env[name]
  if pk.ref_params.index(name) >= n_in:
    raise E.SignatureError(f"{name} is annotated ml.scalar but is an output parameter", loc,
                           hint="ml.scalar parameters are inputs: put them before the outputs")
  if ref.type.shape != ():       # (a 0-d bool array is a flag: `if name:` tests it)
    raise E.SignatureError(
        f"{name} is annotated ml.scalar but was given an array of shape {ref.type.shape}"
        f" ({ref.type.dtype})", loc,
        hint=_scalar_param_hint(name, ref.type.shape))
  tr.env[name] = scalar_load(Call(em, loc, name), ref, name)
  em.scalar_params.add(tr.env[name].id)


def _scalar_param_hint(name, shape) -> str:
  """For an ml.scalar given an array: its one element as a 0-d array, or the array as an ordinary input."""
  if all(n == 1 for n in shape):       # a one-element array: torch's tensor([0.5]), a (1, 1) statistic
    return (f"pass its one element as a 0-d array, {name}.reshape(()), or drop the annotation and read"
            f" it in the kernel as {name}[{', '.join('0' * len(shape))}]")
  return ("pass a Python int or float, or a 0-d int, float or bool array (jnp.float32(0.5)); an array of"
          f" values is an ordinary input: drop the annotation and read it in the kernel ({name}[...], {name}[i])")


def _arg_node(tree: ast.FunctionDef, name: str):
  a = tree.args
  name = name.split("[")[0].split(".")[0]        # a pytree input's leaf (p['w'], p.w): its parameter
  return next((p for p in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg] if p is not None and p.arg == name), tree)


def check_aliases(pk: ParsedKernel, aliases, in_specs, out_specs) -> dict:
  """`input_output_aliases`: each input index to an output index of the same shape and dtype."""
  if not aliases:
    return {}
  loc = pk.option_loc("input_output_aliases")
  hint = "input_output_aliases={input_index: output_index}, e.g. {0: 0} to update the first input in place"
  if not isinstance(aliases, dict):
    raise E.LaunchConfigError(f"input_output_aliases must be a dict, got {aliases!r}", loc, hint=hint)
  seen, out = {}, {}
  for i, o in aliases.items():
    if not all(isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_)) for x in (i, o)):
      raise E.LaunchConfigError(f"input_output_aliases maps ints to ints, got {i!r}: {o!r}", loc, hint=hint)
    i, o = int(i), int(o)              # NumPy ints too, as grid= takes them
    out[i] = o
    if not 0 <= i < len(in_specs) or not 0 <= o < len(out_specs):
      raise E.LaunchConfigError(
          f"input_output_aliases {{{i}: {o}}}: the kernel has {len(in_specs)} input(s) and"
          f" {len(out_specs)} output(s) (indices count from 0)", loc, hint=hint)
    if o in seen:
      raise E.LaunchConfigError(f"inputs {seen[o]} and {i} are both aliased to output {o}", loc,
                                hint="alias each output to at most one input")
    seen[o] = i
    a, b = in_specs[i], out_specs[o]
    if (a.shape, a.dtype) != (b.shape, b.dtype):
      names = pk.ref_params
      raise E.LaunchConfigError(
          f"input {i} ({names[i]}: {a.dtype}{list(a.shape)}) cannot alias output {o}"
          f" ({names[len(in_specs) + o]}: {b.dtype}{list(b.shape)}): an alias needs one shape and dtype",
          loc, hint="make out_shape give the aliased output the input's shape and dtype")
  return out


def _smem_overflow(pk, em, params, grid, block, cluster) -> list:
  """The SmemCapacityError of a kernel that has other errors, when its buffer sizes are known."""
  if any(isinstance(resolve(a.type.dtype), DTypeVar) for a in em.allocs):
    return []
  try:
    plan_smem(ir.Kernel(pk.tree.name, params, em.allocs, em.block, grid, block, cluster,
                        em.num_load_slots, pk.loc), em.defs)
  except E.SmemCapacityError as e:
    return [e]
  return []


def _weak(v):
  """A constexpr as the kernel sees it: NumPy scalars and 0-d arrays, also inside tuples and lists, as
  the Python numbers they hold (docs/language.md: constexprs passed as NumPy scalars are weak)."""
  if isinstance(v, np.generic) or isinstance(v, np.ndarray) and v.shape == ():
    return v.item()
  if type(v) in (tuple, list):
    return type(v)(_weak(x) for x in v)
  return v


def _rebound_outputs(tr, em, params, alias_of=None) -> list:
  """`out = x[...] * 2` for `out[...] = ...`: an output whose name the kernel rebinds to something
  else before anything writes it is reported at the rebinding (not as 'never written' at the def).
  An aliased output written through its input (`alias_of`: output id -> input id) is written."""
  used = {id(v) for o in ir.walk(em.block) for v in o.operands()}
  root = lambda v: getattr(em.defs.get(v.id), "ref", v) if isinstance(em.defs.get(v.id), View) else v
  written = {root(r).id for o in ir.walk(em.block) for r, a in ir.traits_of(o).effects(o)
             if r is not None and a in (ir.Access.REG_WRITE, ir.Access.TMA_WRITE)}
  out = []
  for p in params:
    now = tr.env.get(p.name)
    if (alias_of or {}).get(p.value.id) in written:
      continue
    if p.is_output and now is not p.value and id(p.value) not in used and p.name in tr.where:
      out.append(E.UncoveredOutputError(
          f"{p.name} is an output, and this assignment rebinds the name: nothing writes the output", tr.where[p.name],
          hint=f"write into it: {p.name}[...] = value (or ml.copy(buf, {p.name}.at[...]))"))
  return out


def _finalize_types(em: Builder, params) -> None:
  for alloc in em.allocs:
    d = resolve(alloc.type.dtype)
    if isinstance(d, DTypeVar):
      used = any(alloc in o.operands() for o in ir.walk(em.block))
      if not used and alloc.name in getattr(em, "empty_loop_names", ()):   # used only in a loop of no trips
        unify(d, DType.u8, d.loc, "an unused buffer")
        continue
      raise E.DtypeInferenceError(
          f"cannot infer the dtype of {alloc.name or 'this buffer'}: "
          + ("no copy or store gives it one" if used else "it is allocated but never used"),
          d.loc, hint="pass a dtype: ml.smem(shape, jnp.float32)" + ("" if used else ", or remove it"))

  def fix(v):
    v.type = resolved(v.type)

  for o in ir.walk(em.block):
    for r in o.results:
      fix(r)
    for reg in o.regions:
      for a in getattr(o, reg).args:
        fix(a)
