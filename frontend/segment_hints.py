"""Hints for the segment and run functions of jax.ops and jnp (segment_sum, unique, diff, ...) that a graph
or sparse kernel reaches for: what a kernel writes instead (atomic scatters into an output, masked windows
shifted by one); jnp.searchsorted is ml.searchsorted (frontend/ops/search.py), and jax.ops.segment_sum, max and min
of register values are ml's (frontend/ops/segments.py)."""
from __future__ import annotations

_SCATTER = ("ml.segment_{name}(x[...], ids[...], num_segments=n) reduces register values (a static n, as jax.ops's);"
            " across programs, scatter the data atomically,"
            " ml.atomic_{op}(out.at[segment_ids], data, mask=segment_ids >= 0) (rows of a 2-D data:"
            " out.at[segment_ids, :]), into an output of num_segments elements: one updated only by atomics"
            " starts at {start} (as jax.ops.segment_{name}'s empty segments), and ids past its end are dropped, as"
            " jax's are (a negative one would count from the end, as jnp's .at[] does: the mask keeps it out, as"
            " jax.ops drops it)")
_OFFSETS = ("; for sorted ids given as offsets (segment g is off[g]:off[g + 1]), one program per segment"
            " reduces its windows masked to that range (docs/language.md, \"Single elements\")")

SEGMENT = {
    "segment_sum": _SCATTER.format(op="add", start="0", name="sum") + _OFFSETS,
    "segment_max": (_SCATTER.format(op="max", start="the dtype's lowest value", name="max")
                    + " (int32, uint32; a float32 max as an int32 one on keys that order as the floats do: the"
                      " MG106 hint of ml.atomic_max writes it)" + _OFFSETS),
    "segment_min": (_SCATTER.format(op="min", start="the dtype's highest value", name="min")
                    + " (int32, uint32; a float32 min as an int32 one on keys that order as the floats do: the"
                      " MG106 hint of ml.atomic_min writes it)" + _OFFSETS),
    "segment_prod": ("ml.segment_prod(x[...], ids[...], num_segments=n) multiplies register values (a static n, as"
                     " jax.ops's); across programs there is no atomic multiply: for sorted ids given as offsets, one"
                     " program per"
                     " segment multiplies its windows loaded with other=1.0 and masked to off[g]:off[g + 1],"
                     " acc = acc * window, then takes ml.cumprod(acc)[-1]"),
    "unique": ("no unique (its length depends on the data): pass a static size, jnp.unique(v, size=8, fill_value=-1)"
               " (jnp's padded form: the first 8 sorted values, the fill past their count), or across windows,"
               " for sorted values v of window s, mark each run's"
               " head, head = (pos == 0) | (v != prev) with pos = s + ml.arange(n) and prev = x.at[ml.ds(s - 1,"
               " n)].load(mask=pos >= 1, other=0), and scatter each head's value to its rank, ml.atomic_add(out.at["
               "ml.where(head, ml.cumsum(head, dtype=jnp.int32) - 1, n)], v), into an output that starts at 0 (one"
               " updated only by atomics; index n is past its end, dropped); ml.sum(head) counts them (with several"
               " programs, add each program's offset to the rank: jnp.cumsum(counts) - counts of a first kernel's"
               " per-program counts)"),
    "diff": ("read the window shifted by one, masked at the start: with j = s - 1 + ml.arange(n), prev ="
             " x.at[ml.ds(s - 1, n)].load(mask=j >= 0, other=0.0); then v - prev is jnp.diff(x, prepend=0.0)'s"
             " window at s (mask the end too where the window runs past it, j + 1 < x.shape[0])"),
}
