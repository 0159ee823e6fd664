"""jax.vmap of a kernel: one launch over a batched grid, on the GPU and in interpret mode alike.

A kernel call goes through `jax.custom_batching.custom_vmap`. Under `jax.vmap` its rule
compiles a batched specialisation (frontend/compile.py `Batch`): the batch dimensions of
every level are folded into a grid axis the kernel leaves at 1, each program works on its
slice with the kernel's own shapes, and unbatched inputs are shared, not copied. Nested
vmap adds a level each time; `in_axes`/`out_axes` other than 0 are JAX's moveaxis around
the rule. A kernel whose grid uses all three axes runs the batch as a `jax.lax.map` loop
(one launch per element) instead, and a batch past the 65535 CTAs a launch takes along y and z
runs as a `jax.lax.map` over chunks of that many (one launch each).
"""
from __future__ import annotations

import math

from . import calling, pytree_inputs, wrap
from .frontend import compile as fc, hw


def call(kernel, args, constexprs, interpret, levels=(), hit=None, site=None):
  """The outputs (a list) of `kernel` on `args`; `levels` are the batch levels already
  folded into the specialisation (outermost first): ((size, batched inputs), ...); `site`: the call site
  its interpreted runs note (default: the caller's, at the outermost level)."""
  import jax
  hit = hit or kernel._compile(args, constexprs, levels)
  n_out = len(hit["out_specs"])
  if not calling.tracing(args):                                # an eager call: no transformation
    return list(kernel._run(hit, args, interpret))

  @jax.custom_batching.custom_vmap
  def run(*xs):
    return tuple(kernel._run(hit, xs, interpret))

  @run.def_vmap
  def rule(axis_size, in_batched, *xs):
    outs = batched(kernel, xs, constexprs, interpret, levels, axis_size, tuple(in_batched))
    return tuple(outs), (True,) * n_out

  from .bench import caller_loc
  at = None if levels else caller_loc()          # the user's call, noted by MG009 (JAX differentiates and
  rule.mgpu_kernel = (kernel.__name__, kernel.parsed.loc, at)   # transposes jaxprs after it has returned)
  wrap.guard_transpose()                         # (jax.grad transposing this call: MG009)
  # Outside the custom_vmap, which JAX cannot linearize: jax.grad sees the call's outputs known and
  # their tangents missing, an MG009 only where one is used (wrap.no_derivative).
  inputs = pytree_inputs.user_inputs(kernel, len(args))      # (a pytree input: its parameter, as called)
  with wrap.call_site(site or (None if levels else _call_note(kernel, args, constexprs))):
    outs = wrap.no_derivative(run, kernel.__name__, kernel.parsed.loc, inputs, at)(*args)
  return wrap.varying_like(args, outs)          # (inside jax.shard_map: varying as its inputs are)


def _call_note(kernel, args, constexprs):
  """(file, line, note) of the user's call, for interpret mode's run-time errors under a trace
  (raised later, when the program runs: mgpu_dsl/jit_errors.py), as an eager call's errors have."""
  from .bench import caller_loc
  at = caller_loc()
  if at is None or not at.lineno:
    return None
  return at.filename, at.lineno, calling.call_note(at, args, kernel.parsed.ref_params, constexprs)


def batched(kernel, xs, constexprs, interpret, levels, size, in_batched):
  """One more batch level (size `size`, outermost) over a call at `levels`."""
  import jax
  if not isinstance(size, int):     # jax.export's shape polymorphism: a symbolic batch
    from .bench import caller_loc
    from .frontend import errors as E
    raise E.SignatureError(
        calling.cap(f"{kernel.__name__}: jax.vmap over a batch of symbolic size {size}; a kernel is compiled"
                    f" for concrete shapes"), caller_loc(),
        hint="export once per batch size you need (concrete jax.ShapeDtypeStruct specs), or pad the batch"
             " to a few fixed sizes")
  import jax.numpy as jnp
  xs = _as_jax_takes_them(kernel, xs)
  lead = (size,) + tuple(n for n, _ in levels)
  if size == 0:                      # nothing to launch: empty outputs of the right shapes
    spec = kernel._specialise(unbatched_specs(xs, ((size, in_batched),) + tuple(levels)), constexprs)
    return [jnp.zeros(lead + tuple(s.shape), s.dtype) for s in spec.out_specs]
  xs, in_batched = list(xs), list(in_batched)
  for i in (kernel.input_output_aliases or {}):   # an aliased output is batched: so is its input
    if not in_batched[i]:                          # (inner levels did the same for theirs)
      xs[i] = jnp.broadcast_to(xs[i], (size,) + tuple(xs[i].shape))
      in_batched[i] = True
  in_batched = tuple(in_batched)
  new = ((size, in_batched),) + tuple(levels)
  grid = kernel._grid_of(unbatched_specs(xs, new), constexprs)
  axis = _free_axis(grid)
  chunk = None if axis is None else _chunk(axis, size, levels)
  if axis is not None and chunk is None:
    return call(kernel, xs, constexprs, interpret, new)

  site = _chunked_note(size, chunk, levels)

  def one(sliced):
    it = iter(sliced)
    full = [next(it) if b else x for x, b in zip(xs, in_batched)]
    return tuple(call(kernel, full, constexprs, interpret, levels, site=site))
  return list(jax.lax.map(one, [x for x, b in zip(xs, in_batched) if b], batch_size=chunk))


def _chunked_note(size, chunk, levels):
  """The user's call site with a note saying that the batch element an interpreted run's error names counts from
  its launch's first: a chunk's index is a value of the jax.lax.map loop, unknown to the interpreter."""
  site = wrap._CALL_SITE.get()
  if chunk is None or site is None:
    return None
  which = "the outermost batch element" if levels else "the batch element"
  return site + (f"jax.vmap's batch of {size} runs as launches of at most {chunk}: {which} named counts from its"
                 f" launch's first",)


def _chunk(axis, size, levels):
  """None where a batch of `size` over `levels` fits grid axis `axis` (CUDA launches at most 65535 CTAs
  along y and z); else the most elements of this level one launch takes: jax.lax.map(batch_size=...) runs
  the batch as launches of that many and one of the rest, as a user would chunk it (a vmap of 70000 rows
  was MG007, which said to)."""
  inner = math.prod(n for n, _ in levels)
  if size * inner <= hw.MAX_GRID[axis]:
    return None
  most = max(1, hw.MAX_GRID[axis] // inner)
  # XLA hands each launch its chunk as a slice of the whole array, and a Mosaic GPU call takes only buffers
  # 256-byte aligned (the H200 refused a chunk of 65535 rows of 128 bytes): chunks of a multiple of 256 / gcd(256,
  # inner) elements start every slice at a multiple of 256 bytes, whatever an element's size.
  step = 256 // math.gcd(256, inner)
  return most - most % step if most >= step else most


def _as_jax_takes_them(kernel, xs):
  """The inputs of an eager jax.vmap, which custom_vmap passes as they were given: a NumPy int64 or
  float64 array is checked as an eager call checks it (MG006 for values int32 cannot hold) and taken as
  JAX takes it (int32, float32 without jax_enable_x64), not refused as an int64 spec."""
  import numpy as np
  from . import narrowing
  numpy = [isinstance(x, (np.ndarray, np.generic)) and narrowing.narrowed(x.dtype) is not None for x in xs]
  if not any(numpy):
    return xs
  pk = kernel.parsed
  narrowing.check(xs, [], pk.ref_params, pk.tree.name, pk.loc, None)
  return [np.asarray(x, narrowing.narrowed(x.dtype)) if n else x for x, n in zip(xs, numpy)]


def batch_spec(levels, grid):
  """The frontend's Batch for `levels` over the kernel's own `grid`, or None."""
  if not levels:
    return None
  axis = _free_axis(grid)
  return fc.Batch(axis, tuple(n for n, _ in levels), tuple(b for _, b in levels))


def _free_axis(grid):
  """The grid axis a batch can take: the last one the kernel leaves at 1."""
  return next((a for a in (2, 1) if grid[a] == 1), None)


def unbatched_specs(xs, levels):
  """The kernel's own argument shapes: each input without its batch dimensions."""
  import jax
  out = []
  for i, x in enumerate(xs):
    k = sum(1 for _, on in levels if on[i])
    weak = not k and bool(getattr(x, "weak_type", False) or getattr(getattr(x, "aval", None), "weak_type", False))
    out.append(jax.ShapeDtypeStruct(tuple(x.shape[k:]), x.dtype, weak_type=weak))   # (a Python number: weak)
  return out


def batched_out_specs(out_specs, levels):
  import jax
  lead = tuple(n for n, _ in levels)
  return [jax.ShapeDtypeStruct(lead + tuple(s.shape), s.dtype) for s in out_specs]

