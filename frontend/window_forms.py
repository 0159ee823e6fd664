"""`jax.lax.reduce_window` of a register tile (max, min, sum and product pooling), `jax.image.resize` at integer
factors and `jax.lax.conv_general_dilated` of one input channel per output channel (resize and conv, below), written in the kernel language as
XLA computes it (probe 53c; it was MG003 with a hint that gathered the taps from GMEM): the tile padded with the init
value where the padding asks (`jnp.pad`'s constant, "SAME" as lax.padtype_to_pads pads), then each tap of the window
a static slice of the padded tile whose step is the stride (`p[a:a + (o - 1) * s + 1:s, ...]`, a strided slice of
registers), combined with the init value first and then in the window's row-major order, as XLA's loop does
(form_helpers.window_taps; a 16-bit float sum or product in float32, rounded once, as XLA's CPU computes it); a
window dilation d takes every d-th element (its taps at t * d). No base dilation
(MG003 stays, with its hint); a result no register tensor holds is MG204 at the call, as any slice's.
Traced by jnp_calls.formula as the other SHAPED forms are."""
from __future__ import annotations

import itertools
import math

from .jnp_forms import _dtype, _kind
from .jnp_math import _shape
from .types import dtype_name

# the computation, by its name in lax, jnp or operator (ufunc_reduce's monoids that pooling takes)
_COMBINE = {"max": "max", "maximum": "max", "min": "min", "minimum": "min", "add": "add", "mul": "mul",
            "multiply": "mul"}


def _ints(t, rank):
  """A static tuple of `rank` ints, or None."""
  if not isinstance(t, (tuple, list)) or len(t) != rank:
    return None
  if not all(isinstance(v, int) and not isinstance(v, bool) for v in t):
    return None
  return tuple(t)


def _pads(padding, shape, window, strides):
  """reduce_window's `padding` as (lo, hi) pairs: "VALID", "SAME" (lax.padtype_to_pads's), or the pairs."""
  if isinstance(padding, str):
    if padding.upper() == "VALID":
      return tuple((0, 0) for _ in shape)
    if padding.upper() != "SAME":
      return None
    pads = []
    for n, w, s in zip(shape, window, strides):
      total = max((math.ceil(n / s) - 1) * s + w - n, 0)
      pads.append((total // 2, total - total // 2))
    return tuple(pads)
  if not isinstance(padding, (tuple, list)) or len(padding) != len(shape):
    return None
  pairs = tuple(_ints(p, 2) for p in padding)
  return None if None in pairs or any(lo < 0 or hi < 0 for lo, hi in pairs) else pairs


def _windows(padding, shape, window, dilation, strides):
  """(the (lo, hi) pads of each axis, the output's shape) of windows of `window` elements at `dilation` and `strides`
  over a tile of `shape` padded as `padding` says (the dilated window's, as jax pads for it: "SAME_LOWER" puts the odd
  element low), or None where that is not read here or leaves no output."""
  eff = tuple((w - 1) * d + 1 for w, d in zip(window, dilation))
  if isinstance(padding, str) and padding.upper() == "SAME_LOWER":
    padding = tuple(((t + 1) // 2, t // 2) for t in (max((math.ceil(n / s) - 1) * s + e - n, 0)
                                                      for n, e, s in zip(shape, eff, strides)))
  pads = _pads(padding, shape, eff, strides)
  if pads is None:
    return None
  out = tuple((n + lo + hi - e) // s + 1 for n, (lo, hi), e, s in zip(shape, pads, eff, strides))
  return None if min(out) < 1 else (pads, out)


def _held(shape, pads):
  """`pads` ((lo, hi) of each axis of a tile of `shape`) with the padded axes' hi ends grown, by the fewest elements,
  to a tile a register tensor holds (a multiple of 128 elements; 8 for a vector): zeros (or the init) past the last
  tap, which no tap reads. A strided slice and a computed tile need that; a padded read's own padding does not."""
  padded = [n + lo + hi for n, (lo, hi) in zip(shape, pads)]
  unit = 8 if len(padded) == 1 else 128
  axes = [d for d, (lo, hi) in enumerate(pads) if lo or hi][-2:]
  if not axes or math.prod(padded) % unit == 0:
    return tuple(pads)
  best = None
  for more in itertools.product(*(range(unit) for _ in axes)):
    grown = list(padded)
    for d, e in zip(axes, more):
      grown[d] += e
    if math.prod(grown) % unit == 0 and (best is None or math.prod(grown) < best[0]):
      best = (math.prod(grown), more)
  pads = list(pads)
  for d, e in zip(axes, best[1]):
    pads[d] = (pads[d][0], pads[d][1] + e)
  return tuple(pads)


def reduce_window(a):
  """jax.lax.reduce_window(operand, init_value, computation, window_dimensions, window_strides, padding) of one
  register tile of 1 to 3 axes (see the module)."""
  from .jnp_calls import library
  x, init, comp = a["operand"], a["init_value"], a["computation"]
  shape = _shape(a, x)
  if shape is None or not 1 <= len(shape) <= 3 or isinstance(init, (tuple, list)) or isinstance(x, (tuple, list)):
    return None
  rank = len(shape)
  lib = library(comp) if callable(comp) else None
  name = lib[1] if lib is not None else getattr(comp, "__name__", None) if getattr(
      comp, "__module__", None) in ("_operator", "operator") else None
  combine = _COMBINE.get(name)
  window = _ints(a["window_dimensions"], rank)
  strides = (1,) * rank if a["window_strides"] is None else _ints(a["window_strides"], rank)
  if combine is None or window is None or strides is None or min(window + strides) < 1:
    return None
  if a["base_dilation"] is not None and _ints(a["base_dilation"], rank) != (1,) * rank:
    return None
  dil = (1,) * rank if a["window_dilation"] is None else _ints(a["window_dilation"], rank)
  if dil is None or min(dil) < 1:
    return None
  windows = _windows(a["padding"], shape, window, dil, strides)
  if windows is None:
    return None
  pads, out = windows
  held = _held(shape, pads) if max(strides) > 1 else pads      # (strided taps slice a tile registers hold)
  tile = "{0}" if not any(lo or hi for lo, hi in pads) else f"jnp.pad({{0}}, {held!r}, constant_values={{1}})"
  taps = tuple(tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, dil, out, strides))
               for tap in itertools.product(*(range(w) for w in window)))
  from .form_helpers import window_taps
  form = f"{{3}}({tile}, {{1}}, {{2}}, {combine!r})"
  if combine in ("add", "mul") and _kind(x) == "float" and getattr(_dtype(x), "bits", 32) == 16:
    form = form.replace("{0}", "{0}.astype(jnp.float32)", 1) + ".astype({0}.dtype)"   # (summed in float32, as XLA)
  return form, [x, init, taps, window_taps]


def _conv_specs(dn, rank):
  """conv_general_dilated's dimension_numbers as (lhs, rhs, out) specs, jax's (batch or out-feature dim, feature or
  in-feature dim, then the spatial dims in the rhs string's order); None for a form not read here."""
  if dn is None:
    return (tuple(range(rank)),) * 3
  if all(hasattr(dn, k) for k in ("lhs_spec", "rhs_spec", "out_spec")):
    return tuple(tuple(getattr(dn, k)) for k in ("lhs_spec", "rhs_spec", "out_spec"))
  if not (isinstance(dn, (tuple, list)) and len(dn) == 3 and all(isinstance(t, str) and len(t) == rank for t in dn)):
    return None
  lhs, rhs, out = dn
  spatial = [c for c in rhs if c not in "OI"]
  if sorted(lhs) != sorted(out) or "N" not in lhs or "C" not in lhs or "O" not in rhs or "I" not in rhs \
      or sorted(c for c in lhs if c not in "NC") != sorted(spatial):
    return None
  return ((lhs.index("N"), lhs.index("C"), *map(lhs.index, spatial)),
          (rhs.index("O"), rhs.index("I"), *map(rhs.index, spatial)),
          (out.index("N"), out.index("C"), *map(out.index, spatial)))


def _one_channel_last(a):
  """conv()'s form of a single channel held channels last (`("NHWC", "HWIO", "NHWC")`, jax's default for
  lax.conv_transpose; probe 60c: the (h, w, 1) tile's taps were vectors no layout holds, MG204 naming a (560,)
  vector), as the channels-first conv of the same numbers: the lhs `x[..., 0][:, None]`, the kernel
  `w[..., 0, 0][None, None]`, the result `r[:, 0][..., None]` (size-1 axes moved, no data); None for others."""
  x, w = a["lhs"], a["rhs"]
  xs, ws = _shape(a, x), _shape(a, w)
  if xs is None or ws is None or len(xs) != len(ws) or not 3 <= len(xs) <= 5 or a["dimension_numbers"] is None:
    return None
  rank = len(xs)
  specs = _conv_specs(a["dimension_numbers"], rank)
  if specs is None or specs[0] != specs[2] or specs[0] != (0, rank - 1, *range(1, rank - 1)) or \
      specs[1] != (rank - 1, rank - 2, *range(rank - 2)) or (xs[-1], ws[-1], ws[-2]) != (1, 1, 1) or \
      a["feature_group_count"] != 1 or any(tuple(getattr(getattr(v, "type", None), "shape", ())) != tuple(s)
                                           for v, s in ((x, xs), (w, ws))):
    return None
  moved = {id(x): (xs[0], 1, *xs[1:-1]), id(w): (1, 1, *ws[:-2])}
  own = a.get("_shape_of")
  got = conv({**a, "dimension_numbers": None,
              "_shape_of": lambda v: moved.get(id(v)) or (own(v) if own else getattr(v.type, "shape", None))})
  if got is None or len(got[1]) < 2 or got[1][0] is not x or got[1][1] is not w:
    return None
  form = got[0].replace("{0}", "({0}[..., 0][:, None])").replace("{1}", "({1}[..., 0, 0][None, None])")
  return f"({form})[:, 0][..., None]", got[1]


def conv(a):
  """jax.lax.conv_general_dilated(lhs, rhs, window_strides, padding, ...) of register tiles where each output channel
  reads one input channel (probe 53c; it was MG003): a single channel's stencil (`conv(v[None, None], w[None, None],
  ...)`) or a depthwise conv (feature_group_count = channels, one filter each: Mamba's causal conv1d, `("NWC",
  "WIO", "NWC")`); the lhs padded with zeros (jnp.pad), each tap a strided slice of it times the tap's weights (a
  vector over the channels, broadcast), summed (form_helpers.conv_taps; to float rounding, XLA's order of the sums
  being its own; 16-bit floats in float32, rounded once). No batch groups, out spec = lhs spec; rhs dilation,
  strides and (probe 57a) lhs dilation taken (_dilated: a transposed conv). A batch of one leading is dropped first
  (x[0]), and a padded tile no register tensor holds is padded further at its end (zeros no tap reads) to one that
  does."""
  if (moved := _one_channel_last(a)) is not None:
    return moved
  x, w = a["lhs"], a["rhs"]
  xs, ws = _shape(a, x), _shape(a, w)
  if xs is None or ws is None or len(xs) != len(ws) or not 3 <= len(xs) <= 5 or _kind(x) != "float" \
      or _kind(w) != "float" or a["batch_group_count"] != 1:
    return None
  pet = _result_dtype(a["preferred_element_type"], x)
  if pet is False:
    return None
  rank, sp = len(xs), len(xs) - 2
  specs = _conv_specs(a["dimension_numbers"], rank)
  if specs is None or specs[0] != specs[2]:
    return None
  ls, rs = specs[0], specs[1]
  c, o, i = xs[ls[1]], ws[rs[0]], ws[rs[1]]
  groups = a["feature_group_count"]
  dense = groups == 1 and i == c and c > 1            # (every output channel reads every input channel)
  if not (i == 1 and o == c and groups == c) and not dense:        # (one input channel per output channel)
    return None
  strides = _ints(a["window_strides"], sp)
  rdil = (1,) * sp if a["rhs_dilation"] is None else _ints(a["rhs_dilation"], sp)
  ldil = (1,) * sp if a["lhs_dilation"] is None else _ints(a["lhs_dilation"], sp)
  if strides is None or rdil is None or ldil is None or min(strides + rdil + ldil) < 1:
    return None
  ksz = tuple(ws[d] for d in rs[2:])
  windows = _windows(a["padding"], tuple((xs[d] - 1) * e + 1 for d, e in zip(ls[2:], ldil)), ksz, rdil, strides)
  if windows is None:
    return None
  pads, out = windows
  one = ls[0] == 0 and xs[0] == 1       # (a batch of one leading: computed on x[0], a tile of one axis fewer)
  ax = [d - one for d in ls]
  src = "{0}[0]" if one else "{0}"
  if ldil != (1,) * sp:
    src, xs, pads = _dilated(src, xs, ls, ax, ldil, pads)
    if src is None:
      return None
  full = [(0, 0)] * (rank - one)
  for d, pr in zip(ax[2:], pads):
    full[d] = pr
  full = list(_held([xs[d] for d in range(one, rank)], full))     # (x[0] is computed: its padded tile held whole)
  if dense:
    got = _dense(x, w, src, ax, rs, xs, ksz, rdil, out, strides, one, o, pads, a["precision"])
    return _in_float32(got, pet)
  tile = src if not any(lo or hi for lo, hi in pads) else f"jnp.pad({src}, {tuple(full)!r})"
  bshape = tuple(c if d == ax[1] else 1 for d in range(rank - one))
  taps = []
  for tap in itertools.product(*(range(k) for k in ksz)):
    sl = [slice(None)] * (rank - one)
    for d, t, dl, n, s in zip(ax[2:], tap, rdil, out, strides):
      sl[d] = slice(t * dl, t * dl + (n - 1) * s + 1, s)
    idx = [0] * rank
    idx[rs[0]] = slice(None)
    for d, t in zip(rs[2:], tap):
      idx[d] = t
    taps.append((tuple(sl), tuple(idx)))
  from .form_helpers import conv_taps
  form = f"{{3}}({tile}, {{1}}, {{2}}, {bshape!r})" + ("[None]" if one else "")
  if getattr(_dtype(x), "bits", 32) == 16:      # (16-bit floats multiplied and summed in float32, rounded once)
    form = f"({form.replace('{0}', '{0}.astype(jnp.float32)', 1).replace('{1}', '{1}.astype(jnp.float32)', 1)})" \
        ".astype({0}.dtype)"
  return _in_float32((form, [x, w, tuple(taps), conv_taps]), pet)


def _result_dtype(pet, x):
  """conv_general_dilated's preferred_element_type (probe 67a: `preferred_element_type=jnp.float32` of 16-bit tiles,
  as a CNN's layer accumulates, was MG003): None where it is absent or the lhs's own dtype, True for float32 (the
  forms compute in float32; the result is then not rounded to the lhs's dtype), False for any other (not taken)."""
  if pet is None:
    return None
  import numpy as np
  from .dtypes import DType
  try:
    name = dtype_name(pet) if isinstance(pet, DType) else np.dtype(pet).name
  except TypeError:
    return False
  if name == dtype_name(_dtype(x)):
    return None
  return True if name == "float32" else False


def _in_float32(got, pet):
  """The form `got` with its result float32 where `pet`: its rounding to the lhs's dtype left out."""
  if not pet or got is None:
    return got
  form, args = got
  end = ".astype({0}.dtype)"
  form = form[:-len(end)] if form.endswith(end) else form
  return f"({form}).astype(jnp.float32)", args


def _dilated(src, xs, ls, ax, ldil, pads):
  """lhs dilation (a transposed conv's, `jax.lax.conv_transpose`, which is conv_general_dilated with lhs_dilation
  = its strides; probe 57a, it was MG003): each spatial axis of n elements dilated by d > 1 is `jnp.repeat` of it d
  times with all but the first of each run selected to 0, n * d elements: the (n - 1) * d + 1 of the dilated lhs and
  d - 1 zeros more at the end, which its hi padding then lacks (a slice where that padding is smaller). (The tile's
  form, its shape, the pads for it; None where a slice would leave no element.)"""
  xs, pads = list(xs), list(pads)
  tile_rank = max(ax) + 1                # (a batch of one dropped: the lhs's axes, one fewer)
  for k, (d, e) in enumerate(zip(ls[2:], ldil)):
    if e == 1:
      continue
    n, p = xs[d], ax[2 + k]
    idx = ", ".join(":" if q == p else "None" for q in range(tile_rank))
    src = f"ml.where((ml.arange({n * e}) % {e} == 0)[{idx}], jnp.repeat({src}, {e}, axis={p}), 0)"
    lo, hi = pads[k]
    if hi < e - 1:
      cut = n * e + hi - (e - 1)
      if cut < 1:
        return None, xs, pads
      src = f"({src})[{', '.join(f':{cut}' if q == p else ':' for q in range(tile_rank))}]"
      xs[d], pads[k] = cut, (lo, 0)
    else:
      xs[d], pads[k] = n * e, (lo, hi - (e - 1))
  return src, tuple(xs), tuple(pads)


def _dense(x, w, src, ax, rs, xs, ksz, rdil, out, strides, one, o, pads, precision):
  """The form of a conv mixing channels (feature_group_count 1, probe 56c): each tap a strided slice of the padded
  lhs, its pixels by its channels against the tap's (I, O) weights, ml.dot's product (form_helpers.conv_dots), summed
  over the taps in float32 and rounded once (float32 operands as ml.dot reads them, TF32, as XLA's GPU conv does by
  default; `precision=` goes to ml.dot, whose error names HIGHEST). The lhs's channels lie first or last once a batch of one is dropped
  (NCW, NWC, NCHW, NHWC; a batch of several only with channels last, its images' pixels one product's rows); a
  channels-first tile is computed channels last (moved there, and the result moved back). None otherwise."""
  nd = len(xs) - one                      # (the tile's axes, a batch of one dropped)
  chan = ax[1]
  if chan not in (0, nd - 1):
    return None
  order = list(range(nd)) if chan == nd - 1 else [*range(1, nd), 0]      # the tile's axes, channels last
  shape = [xs[d + one] for d in order]
  spatial = [order.index(d) for d in ax[2:]]
  full = [(0, 0)] * nd
  for d, pr in zip(spatial, pads):
    full[d] = pr
  full = list(_held(shape, full))
  moved = src if chan == nd - 1 else f"jnp.moveaxis({src}, 0, -1)"
  tile = moved if not any(lo or hi for lo, hi in pads) else f"jnp.pad({moved}, {tuple(full)!r})"
  taps = []
  for tap in itertools.product(*(range(k) for k in ksz)):
    sl = [slice(None)] * nd
    for d, t, dl, n, s in zip(spatial, tap, rdil, out, strides):
      sl[d] = slice(t * dl, t * dl + (n - 1) * s + 1, s)
    idx = [slice(None)] * len(xs)
    for d, t in zip(rs[2:], tap):
      idx[d] = t
    taps.append((tuple(sl), tuple(idx)))
  for d, n in zip(spatial, out):
    shape[d] = n
  shape[-1] = o
  meta = (math.prod(shape[:-1]), rs[0] < rs[1], tuple(shape))
  from .form_helpers import conv_dots
  form = f"{{3}}({tile}, {{1}}, {{2}}, {meta!r}, {{4}})"
  if chan != nd - 1:
    form = f"jnp.moveaxis({form}, -1, 0)"
  form += "[None]" if one else ""
  return f"({form}).astype({{0}}.dtype)", [x, w, tuple(taps), conv_dots, precision]


_TRANSPOSE_SPECS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
                    5: ("NHWDC", "HWDIO", "NHWDC")}


def _transpose_padding(k, s, padding):
  """jax's _conv_transpose_padding: (lo, hi) of one spatial axis of a transposed conv of a kernel k wide (dilated)
  at stride s, for 'SAME', 'VALID' or a forward conv's (lo, hi) pair; None for another padding."""
  if padding == "SAME":
    pad_len, pad_a = k + s - 2, k - 1 if s > k - 1 else math.ceil((k + s - 2) / 2)
  elif padding == "VALID":
    pad_len, pad_a = k + s - 2 + max(k - s, 0), k - 1
  elif isinstance(padding, tuple) and _ints(padding, 2) is not None:
    pads = tuple(k - p - 1 for p in padding)
    pad_len, pad_a = sum(pads), pads[0]
  else:
    return None
  return pad_a, pad_len - pad_a


def conv_transpose(a):
  """jax.lax.conv_transpose(lhs, rhs, strides, padding, ...) of register tiles (probe 57a; it was MG003): jax's own
  definition, conv_general_dilated with unit window strides, lhs_dilation = strides and its transposed padding
  (_transpose_padding of 'SAME' or 'VALID', the pairs as given unless use_consistent_padding), channels last by
  default; conv()'s form of that. Not transpose_kernel (a kernel flipped and its channels swapped)."""
  x, w = a["lhs"], a["rhs"]
  xs, ws = _shape(a, x), _shape(a, w)
  strides = _ints(a["strides"], len(xs) - 2) if xs is not None else None
  if xs is None or ws is None or len(xs) != len(ws) or strides is None or a["transpose_kernel"]:
    return None
  sp = len(xs) - 2
  dn = a["dimension_numbers"] if a["dimension_numbers"] is not None else _TRANSPOSE_SPECS.get(len(xs))
  specs = _conv_specs(dn, len(xs))
  rdil = (1,) * sp if a["rhs_dilation"] is None else _ints(a["rhs_dilation"], sp)
  if specs is None or rdil is None:
    return None
  padding = a["padding"]
  if a["use_consistent_padding"] or isinstance(padding, str) and padding in ("SAME", "VALID"):
    each = [padding] * sp if isinstance(padding, str) else list(padding)
    if len(each) != sp:
      return None
    pads = tuple(_transpose_padding((ws[d] - 1) * r + 1, s, p if isinstance(p, str) else tuple(p))
                 for d, r, s, p in zip(specs[1][2:], rdil, strides, each))
    if any(p is None for p in pads):
      return None
  else:
    pads = padding
  return conv({"lhs": x, "rhs": w, "window_strides": (1,) * sp, "padding": pads, "lhs_dilation": strides,
               "rhs_dilation": rdil, "dimension_numbers": dn, "feature_group_count": 1, "batch_group_count": 1,
               "preferred_element_type": a["preferred_element_type"], "precision": a["precision"]})


def _method(m):
  """jax.image.resize's method (a string or a ResizeMethod) as 'nearest' or 'linear'; None for the others."""
  name = (m if isinstance(m, str) else getattr(m, "name", "")).lower()
  return "nearest" if name == "nearest" else "linear" if name in ("linear", "bilinear", "trilinear",
                                                                   "triangle") else None


def resize(a):
  """jax.image.resize(image, shape, method) of a register tile at static integer factors (probe 53c; it was MG003):
  'nearest' as jax's (source index floor((i + 0.5) * in / out)): each element repeated f times along an axis
  scaled up by f (jnp.repeat), every f-th from f // 2 along one scaled down by f (a strided slice); 'linear'
  ('bilinear') scaled up by 2, jax's triangle weights 3/4 and 1/4 of the two nearest elements, the edge element
  alone at the ends (form_helpers.upsample2_linear), one axis after another (16-bit floats in float32, rounded
  once; jax's einsum may round between the axes: within an ulp). Other factors and methods stay MG003 with its
  hint."""
  x, shape, method = a["image"], a["shape"], _method(a["method"])
  own = _shape(a, x)
  if own is None or method is None or not isinstance(shape, (tuple, list)) or len(shape) != len(own) or not all(
      isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape):
    return None
  form, extra = "{0}", []
  for d, (m, n) in enumerate(zip(own, shape)):
    if m == n:
      continue
    if method == "linear":
      if n != 2 * m or m < 2:
        return None
      if not extra:
        from .form_helpers import upsample2_linear
        extra.append(upsample2_linear)
      form = f"{{1}}({form}, {d})"
    elif n % m == 0:
      form = f"jnp.repeat({form}, {n // m}, axis={d})"
    elif m % n == 0:
      f = m // n
      form = f"({form})[{', '.join([':'] * d + [f'{f // 2}::{f}'])}]"
    else:
      return None
  if extra and _kind(x) == "float" and getattr(_dtype(x), "bits", 32) == 16:    # (16-bit floats blended in float32,
    form = form.replace("{0}", "{0}.astype(jnp.float32)", 1) + ".astype({0}.dtype)"   # rounded once)
  elif extra and _kind(x) != "float":
    return None
  return form, [x, *extra]


# (lib, name) -> (the parameters the form reads, its maker): merged into jnp_calls.SHAPED
WINDOWS = {
    ("jax.lax", "conv_general_dilated"): (("lhs", "rhs", "window_strides", "padding", "lhs_dilation", "rhs_dilation",
                                          "dimension_numbers", "feature_group_count", "batch_group_count",
                                          "preferred_element_type", "precision"), conv),
    ("jax.lax", "conv_transpose"): (("lhs", "rhs", "strides", "padding", "rhs_dilation", "dimension_numbers",
                                     "transpose_kernel", "precision", "preferred_element_type",
                                     "use_consistent_padding"), conv_transpose),
    # (lax.conv and conv_with_general_padding: conv_general_dilated at its defaults, as jax defines them; probe 60c)
    ("jax.lax", "conv"): (("lhs", "rhs", "window_strides", "padding", "precision", "preferred_element_type"),
                          lambda a: conv({"lhs_dilation": None, "rhs_dilation": None, "dimension_numbers": None,
                                          "feature_group_count": 1, "batch_group_count": 1, **a})),
    ("jax.lax", "conv_with_general_padding"): (("lhs", "rhs", "window_strides", "padding", "lhs_dilation",
                                                "rhs_dilation", "precision", "preferred_element_type"),
                                               lambda a: conv({"dimension_numbers": None, "feature_group_count": 1,
                                                               "batch_group_count": 1, **a})),
    ("jax.image", "resize"): (("image", "shape", "method", "antialias", "precision"), resize),
    ("jax.lax", "reduce_window"): (("operand", "init_value", "computation", "window_dimensions", "window_strides",
                                    "padding", "base_dilation", "window_dilation"), reduce_window),
}
