"""jnp's index grids and the masks made of them, built in a kernel (probe 53i; each was MG003 "returned an array of
shape ... while tracing", or "meshgrid cannot take a register tensor"): `jnp.eye(N, M, k, dtype)` and
`jnp.identity(n, dtype)` (a diagonal: the row index plus k equal to the column index), `jnp.tri(N, M, k, dtype)` (a
causal mask's lower triangle: the column index at most the row index plus k), `jnp.indices(dimensions, dtype,
sparse)` (each axis's index, broadcast over the others unless sparse), and `jnp.meshgrid(x, y, indexing=, sparse=)`
of two register vectors (jnp.arange(16), a tile's coordinates). Each is `ml.arange` of its axis compared or broadcast,
as jax builds them from iotas, in jnp's dtype (float32 for eye, identity and tri, int32 for indices, where the dtype
is left out). Traced by jnp_calls.formula as the other SHAPED forms are: (the parameters a form reads, a function of
the bound arguments giving (the form, its operands) or None, where the call's MG003 stands)."""
from __future__ import annotations

import numpy as np


def _size(n) -> bool:
  return isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_)) and n >= 1


def _offset(k) -> bool:
  return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


def _diagonal(op):
  """jnp.eye (op '==') and jnp.tri (op '<='): the column index `op` the row index plus k, as dtype (float32)."""
  def make(a):
    n, m, k, dtype = a["N"], a["M"], a["k"], a["dtype"]
    m = n if m is None else m
    if not (_size(n) and _size(m) and _offset(k)) or a.get("device") is not None:
      return None
    row = "ml.arange({0})[:, None]" if k == 0 else "(ml.arange({0})[:, None] + {2})"
    return (f"(ml.arange({{1}})[None, :] {op} {row}).astype({{3}})",
            [int(n), int(m), int(k), "float32" if dtype is None else dtype])
  return make


def _identity(a):
  return _diagonal("==")({"N": a["n"], "M": None, "k": 0, "dtype": a["dtype"]})


def _axis(i, rank):
  return ", ".join(":" if j == i else "None" for j in range(rank))


def _indices(a):
  dims, dtype, sparse = a["dimensions"], a["dtype"], a["sparse"]
  if not isinstance(dims, (tuple, list)) or not 1 <= len(dims) <= 2 or not all(_size(n) for n in dims) or \
      not isinstance(sparse, (bool, np.bool_)):
    return None
  shape, rank = tuple(int(n) for n in dims), len(dims)
  parts = []
  for i, n in enumerate(shape):
    grid = f"ml.arange({n})" if rank == 1 else f"ml.arange({n})[{_axis(i, rank)}]"
    if not sparse and rank > 1:
      grid = f"ml.broadcast_to({grid}, {shape!r})"
    parts.append(grid if dtype is None else f"{grid}.astype({{0}})")
  # (a tuple of the axes' grids: `r, c = jnp.indices((16, 32))` unpacks jnp's (2, 16, 32) array so; sparse as jnp's)
  return f"({', '.join(parts)},)", [dtype]


def _meshgrid(a):
  xs, sparse, indexing = a["xi"], a["sparse"], a["indexing"]
  shapes = [getattr(getattr(x, "type", None), "shape", None) for x in xs]
  if not 1 <= len(xs) <= 2 or any(s is None or len(s) != 1 for s in shapes) or indexing not in ("xy", "ij") or \
      not isinstance(sparse, (bool, np.bool_)):
    return None
  if len(xs) == 1:
    return "({0},)", list(xs)
  order = (1, 0) if indexing == "xy" else (0, 1)      # 'xy': x along the columns, y along the rows (jnp's default)
  shape = tuple(shapes[i][0] for i in order)
  parts = []
  for i in range(2):
    grid = f"{{{i}}}[{_axis(order.index(i), 2)}]"
    parts.append(grid if sparse else f"ml.broadcast_to({grid}, {shape!r})")
  return f"[{', '.join(parts)}]", list(xs)        # (a list, as jnp's)


FORMS = {
    ("jnp", "eye"): (("N", "M", "k", "dtype", "device"), _diagonal("==")),
    ("jnp", "tri"): (("N", "M", "k", "dtype"), _diagonal("<=")),
    ("jnp", "identity"): (("n", "dtype"), _identity),
    ("jnp", "indices"): (("dimensions", "dtype", "sparse"), _indices),
    ("jnp", "meshgrid"): (("xi", "sparse", "indexing", "copy"), _meshgrid),
}
BUILDERS = ("eye", "tri", "identity", "indices")     # of static arguments only: built in the kernel
