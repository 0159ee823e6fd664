"""Two-operand jnp.einsum specs that are not a matrix product ml.dot takes (probe 49b): outer products
('ij,jk->ijk', 'i,j->ij'), elementwise products ('ij,ij->ij', 'ij,i->ij') and row dots ('ij,ij->i'), as a Pallas
kernel writes them. Computed as jnp's meaning spelled in registers: each operand's axes permuted into one order of
the labels (the output's, then the contracted ones) and given size-1 axes for the labels it lacks, the two multiplied
(float32 for 16-bit floats, as XLA's dot accumulates them) and the contracted axes summed, then converted to jnp's
dtype (`preferred_element_type=`, else the operands' promoted dtype). The broadcast product is held in registers:
one of more than _MOST elements is MG003 writing it. A 3-D product reduced is only 'ij,jk->ik' (chunked_product, also
jnp.dot's and `@`'s where ml.dot does not take the tiles: (48, 40) by (40, 72)); others keep MG003."""
from __future__ import annotations

_MOST = 1 << 15


def two_operand_spec(spec, values, kwargs):
  """(the two operands' labels, the result's) of jnp.einsum's `spec` of two `values` ('ij,jk->ik': (['ij', 'jk'],
  'ik')), or None: an ellipsis, an implicit output, another count of operands, keywords besides
  preferred_element_type, precision and optimize."""
  extra = {k: v for k, v in kwargs.items() if k not in ("preferred_element_type", "precision", "optimize")}
  if extra or not isinstance(spec, str) or len(values) != 2 or "->" not in spec or "." in spec:
    return None
  ins, out = spec.replace(" ", "").split("->")
  parts = ins.split(",")
  return (parts, out) if len(parts) == 2 else None


def einsum_products(tracer, node, spec, values, kwargs):
  """The einsum as broadcast products summed, or None (the call's MG003 and its hint stand)."""
  from .jnp_forms import _dtype, _kind
  if (got := two_operand_spec(spec, values, kwargs)) is None:
    return None
  parts, out = got
  from .ops.padded_tiles import true_shape
  shapes = [getattr(getattr(v, "type", None), "shape", None) for v in values]
  shapes = [tuple(true_shape(tracer.b, v)) if isinstance(s, tuple) else s for v, s in zip(values, shapes)]
  if any(not isinstance(s, tuple) for s in shapes) or any(
      len(set(p)) != len(p) or not p.isalpha() for p in parts) or len(set(out)) != len(out) or not out.isalpha() \
      and out or any(len(p) != len(s) for p, s in zip(parts, shapes)):
    return None
  if any(_kind(v) not in ("float", "int") for v in values) or not set(out) <= set(parts[0]) | set(parts[1]):
    return None
  size = {}
  for p, s in zip(parts, shapes):
    for c, n in zip(p, s):
      if size.setdefault(c, n) != n:
        _sizes_differ(tracer, node, spec, shapes, c, size[c], n)
  gone = [c for c in parts[0] + parts[1] if c not in out]
  order = list(out) + list(dict.fromkeys(gone))
  full = next((p for p in parts if set(p) == set(order)), None)
  if gone and full is not None and list(full) != order:
    order = list(full)      # ('t,td->d': the product in the operand's own order, summed over t: no transpose)
  total = 1
  for c in order:
    total *= size[c]
  if gone and len(order) > 2:   # (a 3-D product reduced: the layouts take only chunked_product's shape of it)
    return _matrix_product(tracer, node, parts, out, values, kwargs)
  if total > _MOST:
    _too_many(tracer, node, spec, parts, order, size, total)
  from .ops.promotion import arithmetic_in
  da, db = (_dtype(v) for v in values)
  d = da if da == db else arithmetic_in(da, db)
  if d is None:
    return None
  want = kwargs.get("preferred_element_type")
  wide = _kind(values[0]) == "float" and str(d) in ("float16", "bfloat16")
  terms = []
  for i, p in enumerate(parts):
    mine = [c for c in order if c in p]
    perm = tuple(p.index(c) for c in mine)
    t = f"{{{i}}}" if str(_dtype(values[i])) == ("float32" if wide else str(d)) else \
        f"{{{i}}}.astype(ml.{'float32' if wide else d})"
    if perm != tuple(range(len(p))):
      t = f"ml.transpose({t}, {perm!r})"
    if len(mine) != len(order):
      t = f"{t}[{', '.join(':' if c in p else 'None' for c in order)}]"
    terms.append(t)
  form = f"{terms[0]} * {terms[1]}"
  if len(order) > len(out):
    axes = tuple(k for k, c in enumerate(order) if c not in out)
    form = f"ml.sum({form}, axis={axes if len(axes) > 1 else axes[0]!r})"
    kept = [c for c in order if c in out]
    if kept != list(out):     # (the sum's labels in the operand's order: the result put in the output's)
      form = f"ml.transpose({form}, {tuple(kept.index(c) for c in out)!r})"
  form = f"({form}).astype({'{2}' if want is not None else f'ml.{d}'})"
  from .jnp_calls import trace_form
  return trace_form(tracer, node, form, [*values, want], [tracer.text(n) for n in node.args[1:3]])


def _sizes_differ(tracer, node, spec, shapes, label, n1, n2):
  """MG202 at the call: a label naming axes of two sizes, as jnp's ValueError says."""
  from . import errors as E
  raise E.ShapeMismatchError(
      f"jnp.einsum({spec!r}) of shapes {shapes[0]} and {shapes[1]}: label {label!r} names axes of sizes {n1} and {n2}",
      tracer.loc(node), hint=f"a label names axes of one size in every operand; give the two {label!r} axes one size, "
      f"or name them apart (a new letter) if they are different axes")


def _matrix_product(tracer, node, parts, out, values, kwargs):
  """A matrix-product spec ml.dot did not take, 'ij,jk->ik' (operands and result as held), too large for one broadcast
  product: chunked_product's sum; None for another spec."""
  (sa, sb), shared = parts, set(parts[0]) & set(parts[1])
  if len(sa) != 2 or len(sb) != 2 or len(out) != 2 or len(shared) != 1 or shared & set(out) or \
      kwargs.get("precision") is not None:
    return None
  c = shared.pop()
  i, j = (p[1 - p.index(c)] for p in (sa, sb))
  if set(out) != {i, j}:
    return None
  if sa.index(c) != 1 or sb.index(c) != 0 or out != i + j:
    return None                 # (a transposed operand or result: chunked_product's note)
  return chunked_product(tracer, node, *values, kwargs.get("preferred_element_type"))


def _too_many(tracer, node, spec, parts, order, size, total):
  """MG003 at the call: a broadcast product larger than registers hold, with the product written as broadcasts and
  a loop that writes it in pieces."""
  from . import errors as E
  names = [tracer.text(n) for n in node.args[1:3]]
  terms = []
  for name, p in zip(names, parts):
    mine = [c for c in order if c in p]
    perm = tuple(p.index(c) for c in mine)
    t = name if perm == tuple(range(len(p))) else f"ml.transpose({name}, {perm})"
    terms.append(t if len(mine) == len(order) else f"{t}[{', '.join(':' if c in p else 'None' for c in order)}]")
  shape = tuple(size[c] for c in order)
  raise E.KernelTypeError(
      f"jnp.einsum({spec!r}) is a broadcast product of shape {shape} ({total} elements), more than a kernel holds in "
      f"registers ({_MOST})", tracer.loc(node),
      hint=f"it is {terms[0]} * {terms[1]} (summed over the labels not in the output); compute it in pieces, a "
      f"slice of the first axis at a time in a loop, storing each piece")


_ACC_MOST = 1 << 15      # (an int32 (200, 128) product: probe 57a; it was 1 << 14)


_UNROLLED_MOST = 1 << 16  # (m * k * n of an integer product unrolled in registers: (64, 64) x (64, 64) was 161k lines)
_CARRIED_MOST = 1 << 13  # (elements of the accumulator staged_dot's loop carries: 64 registers a thread of 128)


def _staged_terms(a, b, m, k, n) -> int:
  """The terms an unrolled integer product of a and b would write: m * k * n, of the tiles grown to whole chunks
  (_grown_ints') where a padded trace holds either padded (an int32 (100, 24) x (24, 16) product was 86k lines)."""
  if all(tuple(v.type.shape) == tuple(s) for v, s in ((a, (m, k)), (b, (k, n)))):
    return m * k * n
  return -(-m // 16) * 16 * (-(-k // 16) * 16) * (-(-n // 32) * 32)


def _staged_rows(m, n) -> int:
  """Rows of a's each run-time loop of form_helpers.staged_dot takes: the most, a multiple of 8 dividing m, whose
  (rows, n) accumulator is at most _CARRIED_MOST elements (m where none is)."""
  fit = [r for r in range(8, m + 1, 8) if m % r == 0 and r * n <= _CARRIED_MOST]
  return max(fit) if fit else m


def chunked_product(tracer, node, a, b, want):
  """`a @ b` of two 2-D register tiles ml.dot does not take ((48, 40) by (40, 72), (8, 16) by (16, 32)), in
  registers: the (m, n) accumulator plus broadcast products of k-chunks of a's columns and b's rows, float32 for
  float operands (as XLA's dot accumulates 16-bit ones) and the operands' dtype for 32-bit integers, converted to
  jnp's dtype (a tile computed padded, a (40, 72) read, is sliced in its own coordinates); where no k-chunk fits
  beside the accumulator, k rank-1 updates (form_helpers.outer_dot). None where the accumulator
  is larger than _ACC_MOST elements, ml.dot's padded trace may take it (a layout error it met), or the dtypes are
  others. (Only (m, k) by (k, n): the chunks of a transposed operand would broadcast into a 3-D tensor's middle axis
  or reduce its last one, which no register layout takes.)"""
  from .jnp_forms import _dtype, _kind
  from .ops.padded_tiles import true_shape
  from .ops.promotion import arithmetic_in
  from . import form_helpers
  if tracer.b.dot_layouts is not None and node in tracer.b.dot_layouts:
    return None                 # (compile.trace tries ml.dot on padded tiles first)
  shapes = [getattr(getattr(v, "type", None), "shape", None) for v in (a, b)]
  if any(not isinstance(s, tuple) or len(s) != 2 for s in shapes):
    return None
  (m, k), (k2, n) = (tuple(true_shape(tracer.b, v)) for v in (a, b))     # (a padded tile's own shape)
  if k != k2 or m * n > _ACC_MOST:
    return None
  da, db = _dtype(a), _dtype(b)
  d = da if da == db else arithmetic_in(da, db)
  if d is None or any(_kind(v) not in ("float", "int") for v in (a, b)) or (
      _kind(a) != _kind(b)) or (_kind(a) == "int" and str(d) not in ("int32", "uint32")):
    return None
  acc = "float32" if _kind(a) == "float" else str(d)
  conv = [f"{{{i}}}" if str(_dtype(v)) == acc else f"{{{i}}}.astype(ml.{acc})" for i, v in enumerate((a, b))]
  out = "{4}" if want is not None else f"ml.{d}"
  from .jnp_calls import trace_form
  if tracer.b.no_chunks and acc == "float32":     # (chunks no layout held: the tensor cores', compile.trace)
    held = any(tuple(v.type.shape) != tuple(true_shape(tracer.b, v)) for v in (a, b))
    form = f"ml.dot({conv[0]}, {conv[1]}).astype({out})" if held else _tensor_core_form(a, b, conv, out)
    return trace_form(tracer, node, form, [a, b, None, None, want])
  if acc != "float32" and _staged_terms(a, b, m, k, n) > _UNROLLED_MOST:   # (a run-time loop over k: probe 58a)
    return trace_form(tracer, node, _staged_form(a, b, conv, m, k, n, acc, out),
                      [a, b, form_helpers.staged_dot, None, want, *_squares()])
  if acc != "float32" and getattr(tracer.b, "pad_tiles", None) is not None and tuple(a.type.shape) != (m, k) \
      and m <= 8 and m * k <= 256:
    return trace_form(tracer, node, _scalar_rows(conv, m, k, out), [a, b, None, None, want])
  padded = getattr(tracer.b, "pad_tiles", None) is not None and any(
      tuple(v.type.shape) != tuple(true_shape(tracer.b, v)) for v in (a, b))
  if acc != "float32" and (padded or not any(k % x == 0 and m * x * n <= _MOST for x in (64, 32, 16, 8, 4))) \
      and _pieces(-(-m // 16) * 16, -(-n // 32) * 32) and (padded or (m % 16, k % 16, n % 32) == (0, 0, 0)):
    return trace_form(tracer, node, _grown_ints(conv, m, k, n, acc, out),      # (more rows: whole tiles, 56a)
                      [a, b, form_helpers.chunked_dot, None, want, *_squares()])
  tracer.b.chunked.append(tracer.loc(node))
  cut = ""
  if tracer.b.no_chunks and tuple(b.type.shape) == (k, n):      # (an integer product: no tensor cores)
    conv, cut, k, n = _padded_ints(conv, m, k, n, acc, tuple(a.type.shape) == (m, k))
  # k-chunks of a power of two from 4 (the 3-D layouts take those; 2, 5 or 10 columns of a padded tile they do not),
  # else the whole k or the largest divisor that fits
  fits = [x for x in (64, 32, 16, 8, 4) if k % x == 0 and m * x * n <= _MOST]
  c = fits[0] if fits else k if m * k * n <= _MOST else max(
      x for x in range(1, k + 1) if k % x == 0 and m * x * n <= _MOST)
  if c == 1:                      # (an accumulator of more than 8192 elements: k rank-1 updates)
    return trace_form(tracer, node, f"{{2}}({conv[0]}, {conv[1]}, ml.{acc}){cut}.astype({out})",
                      [a, b, form_helpers.outer_dot, None, want])
  return trace_form(tracer, node, f"{{2}}({conv[0]}, {conv[1]}, {c}, ml.{acc}){cut}.astype({out})",
                    [a, b, form_helpers.chunked_dot, None, want])


def _staged_form(a, b, conv, m, k, n, acc, out) -> str:
  """chunked_product's integer product of more than _UNROLLED_MOST terms: form_helpers.staged_dot, a run-time loop
  over k through SMEM. Operands a padded trace holds padded ((200, 24) as (200, 32)) are grown into plain tiles
  first, m and k to multiples of 16 and n to one of 32 (zeros: the product is unchanged), the product cut back to
  the padded (m, n), as _grown_ints does."""
  x, y = conv
  if all(tuple(v.type.shape) == tuple(s) for v, s in ((a, (m, k)), (b, (k, n)))):
    return f"{{2}}({x}, {y}, {k}, {_staged_rows(m, n)}, ml.{acc}).astype({out})"
  mu, ku, nu = -(-m // 16) * 16, -(-k // 16) * 16, -(-n // 32) * 32
  return (f"{{6}}({{2}}({{5}}({x}, {mu}, {ku}), {{5}}({y}, {ku}, {nu}), {k}, {_staged_rows(mu, nu)}, ml.{acc}),"
          f" {m}, {n}).astype({out})")


def _padded_ints(conv, m, k, n, acc, pad_k):
  """chunked_product's integer product where its chunks laid out nowhere (compile.trace's `no_chunks`): chunks of a
  number of columns not a multiple of 32 (a (2, 48) by (48, 16) int32 product, (2, 48) by (48, 40)), or of 4 rows
  of k ((2, 20) by (20, 16)) broadcast into 3-D tensors no layout holds, so k is padded with zeros (a's columns,
  b's rows) to a multiple of 16 (`pad_k`: where a is held as it is, not padded by a padded trace) and n (b's
  columns) to one of 32, the product's first n columns kept (probe 51l). (conv, the slice to take, k and n.)"""
  x, y = conv
  ku, nu = -(-k // 16) * 16 if pad_k else k, -(-n // 32) * 32
  if ku != k:
    x = f"ml.concatenate([{x}, ml.zeros(({m}, {ku - k}), ml.{acc})], axis=1)"
    y = f"ml.concatenate([{y}, ml.zeros(({ku - k}, {n}), ml.{acc})], axis=0)"
  if nu != n:
    y = f"ml.concatenate([{y}, ml.zeros(({ku}, {nu - n}), ml.{acc})], axis=1)"
  return [x, y], f"[:, :{n}]" if nu != n else "", ku, nu


def _squares():
  from .ops.padded_squares import COLUMNS, GROWN, SHRUNK
  return GROWN, SHRUNK, COLUMNS


def _pieces(mu, nu):
  """(w, c) for _grown_ints' product of (mu, k) by (k, nu) tiles: pieces of w of b's columns (the widest), chunks of
  c of k, whose (mu, c) and (c, w) slices and (mu, c, w) products registers hold; None where none do."""
  for w in (v for v in range(nu, 7, -8) if nu % v == 0):
    for c in (16, 8, 4):
      if mu * c * w <= _MOST and not (mu * c) % 128 and not (c * w) % 128 and not (mu * w) % 128:
        return w, c
  return None


def _grown_ints(conv, m, k, n, acc, out) -> str:
  """chunked_product's integer product of operands a padded trace holds padded, more rows than _scalar_rows takes
  ((12, 20) by (20, 16), (100, 24) by (24, 16): the chunks of a padded tile broadcast into 3-D tensors no layout
  holds): both grown into plain tiles of whole chunks, m and k to multiples of 16 and n to one of 32 (zeros, which
  leave the product unchanged; ops/padded_squares.py), their product cut back to the padded (m, n) (probe 56a)."""
  x, y = conv
  mu, ku, nu = -(-m // 16) * 16, -(-k // 16) * 16, -(-n // 32) * 32
  w, c = _pieces(mu, nu)          # (b's columns in pieces of w where all at once are too many)
  if w == nu:
    return f"{{6}}({{2}}({{5}}({x}, {mu}, {ku}), {{5}}({y}, {ku}, {nu}), {c}, ml.{acc}), {m}, {n}).astype({out})"
  pieces = ", ".join(f"{{2}}(_a_, {{7}}(_b_, {j * w}, {w}), {c}, ml.{acc})" for j in range(nu // w))
  return (f"(lambda _a_, _b_: {{6}}(ml.concatenate([{pieces}], axis=1), {m}, {n}))({{5}}({x}, {mu}, {ku}),"
          f" {{5}}({y}, {ku}, {nu})).astype({out})")


def _scalar_rows(conv, m, k, out) -> str:
  """chunked_product's integer product of a few rows of `a` that a padded trace holds padded ((2, 20) as (4, 32),
  by (20, 16) or (24, 16): its chunks broadcast into 3-D tensors and its k went unpadded; probe 55b): row i the sum
  over j of the scalar a[i, j] times b's row j, exact in the integer accumulator, the rows put together by selects
  on an ml.arange of the rows (m <= 8, m * k <= 256 terms)."""
  x, y = conv
  rows = [" + ".join(f"{x}[{i}, {j}] * {y}[{j}]" for j in range(k)) for i in range(m)]
  form = f"({rows[m - 1]})[None, :]"
  for i in range(m - 1):
    form = f"ml.where(ml.arange({m})[:, None] == {i}, ({rows[i]})[None, :], {form})"
  return f"({form}).astype({out})"


def _tensor_core_form(a, b, conv, out) -> str:
  """chunked_product's float product as ml.dot of the float32 register tiles (compile.trace's `no_chunks`): k padded
  with zero columns of a and zero rows of b to a multiple of 8 (float32's k step), and n with zero columns of b to a
  multiple of 64 (the K-major b ml.dot stores from registers) where it is none, the product's first n columns kept
  (zeros leave the product unchanged). Operands a padded trace holds padded go to ml.dot as they are (its own
  padding, ops/padded_dots.py)."""
  (m, k), (_, n) = a.type.shape, b.type.shape
  x, y = conv
  ku, nu = -(-k // 8) * 8, n if n % 64 == 0 else -(-n // 64) * 64
  if ku != k:
    x = f"ml.concatenate([{x}, ml.zeros(({m}, {ku - k}), ml.float32)], axis=1)"
    y = f"ml.concatenate([{y}, ml.zeros(({ku - k}, {n}), ml.float32)], axis=0)"
  if nu != n:
    y = f"ml.concatenate([{y}, ml.zeros(({ku}, {nu - n}), ml.float32)], axis=1)"
  return f"ml.dot({x}, {y}){f'[:, :{n}]' if nu != n else ''}.astype({out})"


def folded_vectors(tracer, node, spec, values, nodes, kwargs):
  """jnp.einsum of two tiles and vectors scaling them (Mamba-2's chunk state, `jnp.einsum('ln,l,lp->np', B, decay,
  x)`: B scaled along l, then 'ln,lp->np'), as (the two-operand spec, its operands, their nodes): each 1-D operand
  multiplied into a tile that has its label, along that axis (the operands first promoted to one dtype, as jnp's
  einsum promotes them), which changes no product; None where the spec has another form (the call's MG003)."""
  from .jnp_calls import trace_form
  from .jnp_forms import _dtype, _kind
  extra = {k: v for k, v in kwargs.items() if k not in ("preferred_element_type", "precision", "optimize")}
  if extra or not isinstance(spec, str) or "->" not in spec or "." in spec:
    return None
  ins, out = spec.replace(" ", "").split("->")
  parts = ins.split(",")
  shapes = [getattr(getattr(v, "type", None), "shape", None) for v in values]
  if len(parts) != len(values) or len(parts) < 3 or any(
      not isinstance(s, tuple) or len(s) != len(p) or not p.isalpha() or len(set(p)) != len(p)
      for p, s in zip(parts, shapes)) or any(_kind(v) != "float" for v in values):
    return None
  tiles = [k for k, p in enumerate(parts) if len(p) >= 2]
  if len(tiles) != 2:
    return None
  from .ops.promotion import arithmetic_in
  d = _dtype(values[0])
  for v in values[1:]:
    d = d if _dtype(v) == d else arithmetic_in(d, _dtype(v))
    if d is None:
      return None
  vals, nds = list(values), list(nodes)
  for k, v in enumerate(vals):
    if _dtype(v) != d:
      vals[k], nds[k] = trace_form(tracer, node, "{0}.astype({1})", [v, d]), node
  for k, p in enumerate(parts):
    if len(p) != 1:
      continue
    into = next((t for t in tiles if p in parts[t]), None)
    if into is None:
      return None
    at = ", ".join(":" if c == p else "None" for c in parts[into])
    vals[into], nds[into] = trace_form(tracer, node, f"{{0}} * {{1}}[{at}]", [vals[into], vals[k]]), node
  return f"{parts[tiles[0]]},{parts[tiles[1]]}->{out}", [vals[t] for t in tiles], [nds[t] for t in tiles]


BATCHES = 8      # a batch label of at most this many batches unrolled (a few heads' or groups' tiles)


def batched_einsum(tracer, node, spec, values, kwargs):
  """jnp.einsum of two register tensors (3-D, or one 2-D) sharing a leading batch label that leads the output too
  ('bij,bjk->bik', 'bqd,bkd->bqk' of a few heads, 'bij,bj->bi'; probe 53i, it was MG003): the einsum of each batch's tiles, as the
  call's own function computes two 2-D operands (ml.dot, or the products summed), stacked along the batch axis.
  None where the spec is not one (the call's MG003 stands)."""
  got = two_operand_spec(spec, values, kwargs)
  shapes = [getattr(getattr(v, "type", None), "shape", None) for v in values]
  if got is None or any(s is None or len(s) not in (2, 3) for s in shapes) or 3 not in map(len, shapes) or \
      shapes[0][0] != shapes[1][0] or not 1 <= shapes[0][0] <= BATCHES:
    return None
  (x, y), out = got
  b = x[0]
  if y[0] != b or len(out) < 2 or out[0] != b or b in x[1:] + y[1:] + out[1:] or len(set(x)) != len(x) or \
      len(set(y)) != len(y) or (len(x), len(y)) != tuple(map(len, shapes)):
    return None
  fn = tracer.eval(node.func)            # (jnp.einsum, as the call names it)
  inner = f"{x[1:]},{y[1:]}->{out[1:]}"
  kw = "".join(f", {k}={{{i + 4}}}" for i, k in enumerate(kwargs))
  parts = ", ".join(f"{{2}}({{3}}, {{0}}[{i}], {{1}}[{i}]{kw})" for i in range(shapes[0][0]))
  from .jnp_calls import trace_form
  return trace_form(tracer, node, f"ml.stack([{parts}])", [*values, fn, inner, *kwargs.values()])
