"""jnp.dot, jnp.matmul and `@` of two 2-D tiles where ml.dot takes them as they are (a Pallas kernel's
`jnp.dot(a_s[...], b_s[...], preferred_element_type=jnp.float32)`): b read whole from an SMEM buffer (`b_s[...]`,
or `w_s[...].T`) or, since probe 48a, a register tile (`jnp.dot(q, k.T)` of a Pallas decode's tiles read from
GMEM, which ml.dot stores into SMEM for the tensor cores where it can), a from SMEM too or a 16-bit register tile,
both float16 or bfloat16. They compute as the ml.dot
call dot_hints writes, with jnp's result dtype: `preferred_element_type=` where given, else the operands' dtype
(jnp.dot of float16 tiles is float16, accumulated in float32 and rounded once, as ml.dot's float32 result converted
is). Other products (an operand to stage in SMEM first, float32's or 8-bit's K-major layouts, another rank) keep
their MG003 and dot_hints' hint."""
from __future__ import annotations

from . import errors as E
from . import hw
from .dtypes import DType, to_dtype
from .types import RefType, Space, resolve


def _dtype(v):
  return resolve(getattr(getattr(v, "type", None), "dtype", None))


def register_dot(tracer, node, nodes, values, kwargs):
  """The product's value, traced at `node`, or None where ml.dot does not take the operands as they are."""
  extra = dict(kwargs)
  want = extra.pop("preferred_element_type", None)
  if extra.pop("precision", None) is not None or extra or len(nodes) != 2 or len(values) != 2 or any(
      isinstance(getattr(v, "type", None), RefType) for v in values):
    return None                # (a ref passed as it is: jnp takes arrays, its hint says to read it)
  (ta, va, fa), (tb, vb, fb) = (tracer._dot_operand(n, v) for n, v in zip(nodes, values))
  da, db = _dtype(va), _dtype(vb)
  if da != db or da not in hw.MMA_MN_MAJOR_DTYPES or any(
      len(getattr(v.type, "shape", ())) != 2 for v in (va, vb)):
    return None
  b_smem = isinstance(vb.type, RefType) and vb.type.space == Space.SMEM
  a_smem = isinstance(va.type, RefType) and va.type.space == Space.SMEM
  if not (b_smem or not isinstance(vb.type, RefType)) or not a_smem and (isinstance(va.type, RefType) or fa):
    return None                # (b from SMEM or registers; a from SMEM, or a register tile used as it is)
  out = DType.f32 if want is None else to_dtype(want)
  if out is None:
    return None
  form = f"ml.dot({{0}}{'.T' if fa else ''}, {{1}}{'.T' if fb else ''}, preferred_element_type={{2}})"
  if want is None:
    form = f"{form}.astype({{3}})"       # jnp.dot of float16 tiles is float16
  from .jnp_calls import trace_form
  try:
    return trace_form(tracer, node, form, [va, vb, out, da])
  except E.KernelError as e:
    if isinstance(e, E.LayoutError) and tracer.b.dot_layouts is not None:
      tracer.b.dot_layouts.append(node)     # (compile.trace tries the padded trace: a GQA group's (4, 72) product)
    return None                # (a shape ml.dot does not take: the call's MG003 and its hint)
