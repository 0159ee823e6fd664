"""A grid callable that gives no programs for an empty input (an empty edge list, an empty batch)
while some output has elements. Outputs that only atomics update start at the operation's identity
(0 for add) whether or not any program runs, so when every such output is of that kind the call
returns them at that value without a launch, as `jnp.zeros(n).at[ids].add(v)` is zeros for no ids.
An output some program would write plainly has no value without programs: MG007, as before."""
from __future__ import annotations

from . import calling, grid_hints
from .frontend import errors as E


class NoPrograms(E.LaunchConfigError):
  """The grid gave no programs and some output has elements (MG007 unless every such output is
  updated only by atomics); `stand_in` is the grid with each 0 made 1, to trace the kernel at."""
  grid: tuple = ()
  stand_in: tuple = ()


def no_programs(grid, empty, args, at, grid_fn, no_items=None) -> NoPrograms:
  """`empty`: the indices of the empty inputs; `no_items`, where there are none: the text of the grid's axes that
  counted no items (an empty graph's `ml.cdiv(rp.shape[0] - 1, 256)`, grid_hints.no_work; probe 71a)."""
  what = (f"an empty input (input {empty[0]}: {calling.describe(args[empty[0]])})" if empty else
          f"inputs of no items ({no_items})")
  e = NoPrograms(
      calling.cap(f"the grid callable gave {tuple(grid)} for {what}; a launch needs at least one program, and with"
                  f" none this call's outputs that are not updated only by atomics would never be written"),
      at, hint="launch at least one program, whose masked loads then read nothing (outputs updated"
               f" only by atomics start at 0): {grid_hints.one_program_grid(at, grid, grid_fn)}; or fill the"
               " outputs outside the kernel for an empty batch (a call whose outputs are all empty"
               " returns them without a launch)")
  e.grid, e.stand_in = tuple(grid), tuple(max(1, g) if isinstance(g, int) else g for g in grid)
  return e


def start_values(kern, e: NoPrograms, args, constexprs, levels, call: bool) -> dict:
  """The compiled "specialisation" of a call with no programs: its outputs at their start values
  (`fill`: output index -> the identity of the atomics updating it), or `e` where an output with
  elements is written otherwise (or the kernel cannot be traced at the stand-in grid)."""
  from .frontend.ops.atomic import identity
  if levels:
    raise e
  spec = kern._specialise(args, constexprs, grid=e.stand_in)
  key = spec.key + ("no programs",)
  hit = kern._cache.get(key)
  if hit is None:
    try:
      zero = tuple(e.grid) + (1,) * (3 - len(e.grid))    # no programs: the checks over the grid check none
      kernel, _ = kern._trace(spec._replace(grid=zero), constexprs)
    except E.KernelError:
      raise e from None
    acc, aliased = kernel.accumulated, set((kern.input_output_aliases or {}).values())
    if any(p.value.id not in acc and k not in aliased and 0 not in tuple(s.shape)
           for k, (p, s) in enumerate(zip(kernel.outputs, spec.out_specs))):
      raise e
    fill = {k: identity(acc[p.value.id], p.value.type.dtype) for k, p in enumerate(kernel.outputs)
            if p.value.id in acc}
    hit = kern._cache[key] = {"empty": spec, "treedef": spec.treedef, "fill": fill}
  if not call:
    raise E.LaunchConfigError(
        f"the grid callable gave {e.grid}: a call returns the"
        f" outputs, which only atomics update, at their start value without a launch, and there is no kernel to"
        f" check or build", e.loc, hint="check or build a specialisation whose grid has programs")
  return hit


def nothing_to_check(kern, spec) -> None:
  """check(), mlir() and typed_ir() of a specialisation whose outputs all have no elements: a call on
  arrays returns them without a launch whatever the grid (kernel.py `_specialise`), so there is no
  kernel to check or build, MG007 as for a grid of no programs (not the kernel's trace, whose reads of
  empty inputs would be errors the call never meets)."""
  if spec.grid is None or not spec.out_specs or not all(0 in tuple(s.shape) for s in spec.out_specs):
    return
  shapes = ", ".join(str(tuple(s.shape)) for s in spec.out_specs)
  raise E.LaunchConfigError(
      f"every output of this call is empty (out_shape gives {shapes}): a call on arrays returns them"
      f" without a launch, whatever the grid, and there is no kernel to check or build",
      kern.parsed.option_loc("out_shape"), hint="check or build a specialisation whose outputs have elements")
