"""jax.nn's activations as a kernel writes them, with ml.* functions ({0}: the call's operand, {1}: its
parameter, where it has one): missing.form_hint fills them in with the user's own arguments. A softplus is
ml.log1p of the small exponential, as jax.nn's logaddexp computes it (ml.log(1 + e) rounds 1 + e: in bfloat16
softplus(-5) came out 0.0078, not 0.0067). A float16 or bfloat16 operand computes in float32 and rounds once
(`widened`), as XLA on the GPU computes jax.nn's definitions."""
import re

import numpy as np

ACTIVATIONS = {
    "relu": "ml.maximum({0}, 0)", "silu": "{0} * ml.sigmoid({0})", "swish": "{0} * ml.sigmoid({0})",
    "softplus": "ml.maximum({0}, 0) + ml.log1p(ml.exp(-ml.abs({0})))",
    "gelu": "0.5 * {0} * (1 + ml.tanh(0.7978845608028654 * ({0} + 0.044715 * {0} ** 3)))",
    "leaky_relu": "ml.where({0} >= 0, {0}, {1} * {0})", "elu": "ml.where({0} > 0, {0}, {1} * ml.expm1({0}))",
    "celu": "ml.where({0} > 0, {0}, {1} * ml.expm1({0} / {1}))",
    "selu": "1.0507009873554805 * ml.where({0} > 0, {0}, 1.6732632423543772 * ml.expm1({0}))",
    "relu6": "ml.clip({0}, 0.0, 6.0)", "hard_tanh": "ml.clip({0}, -1.0, 1.0)",
    "hard_sigmoid": "ml.clip({0} + 3.0, 0.0, 6.0) / 6.0", "hard_silu": "{0} * ml.clip({0} + 3.0, 0.0, 6.0) / 6.0",
    "hard_swish": "{0} * ml.clip({0} + 3.0, 0.0, 6.0) / 6.0",
    "mish": "{0} * ml.tanh(ml.maximum({0}, 0) + ml.log1p(ml.exp(-ml.abs({0}))))",
    "log_sigmoid": "-(ml.maximum(-{0}, 0) + ml.log1p(ml.exp(-ml.abs({0}))))",
}
# the activations with a parameter: (its keyword, its default), the form's {1}
ACTIVATION_PARAMS = {"leaky_relu": ("negative_slope", "0.01"), "elu": ("alpha", "1.0"), "celu": ("alpha", "1.0")}


def activation_args(name, pos, kw):
  """The arguments (as written) a form fills in: for an activation with a parameter (jax.nn.leaky_relu(x,
  0.1), elu(x, alpha=2.0)), the operand and that parameter, or its default; else the operand (also one passed
  by keyword, jax.nn.relu(x=v): jax.nn names it x), without gelu's approximate (gelu_form picks the form)."""
  if name not in ACTIVATIONS:
    return pos
  if not pos and "x" in kw:
    pos = [kw["x"]]
  if name not in ACTIVATION_PARAMS or not pos:
    return pos[:1]
  key, default = ACTIVATION_PARAMS[name]
  return [pos[0], (kw.get(key) or (pos[1] if len(pos) > 1 else default)).strip()]


def widened_pair(form, x, y):
  """`form` of operands {0} and {1} (register values, or one a Python number) widened as `widened` widens one
  operand's, where the register ones are all of one 16-bit float dtype: (the form, the operands, a number rounded
  to that dtype as jax's weak one is); else unchanged."""
  ds = {str(getattr(getattr(v, "type", None), "dtype", "")) for v in (x, y) if hasattr(v, "type")}
  if len(ds) != 1 or (d := ds.pop()) not in ("float16", "bfloat16") or not all(
      hasattr(v, "type") or isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x, y)):
    return form, [x, y]
  like = 0 if hasattr(x, "type") else 1
  t = x.type.dtype.np if like == 0 else y.type.dtype.np
  ops = [v if hasattr(v, "type") else float(np.asarray(v, t)) for v in (x, y)]
  body = widened(form, d)[1:-len(").astype({0}.dtype)")]     # (its float32 body: {0} widened, constants rounded)
  if hasattr(y, "type"):
    body = body.replace("{1}", "{1}.astype(ml.float32)")
  if like == 1:
    body = body.replace("{0}.astype(ml.float32)", "{0}")
  return f"({body}).astype({{{like}}}.dtype)", ops


def widened(form, dtype):
  """`form` of a float16 or bfloat16 operand {0} as XLA on the GPU computes jax.nn's function: in float32, rounded
  once to the operand's dtype (XLA upcasts 16-bit elementwise math and keeps the excess precision through a
  fusion), each Python float constant first rounded to that dtype (jax's weakly typed constants are; jax.nn.gelu
  rounds its sqrt(2 / pi) so). `form` unchanged for another dtype."""
  if dtype not in ("float16", "bfloat16"):
    return form
  import ml_dtypes
  import numpy as np
  t = getattr(ml_dtypes, dtype) if dtype == "bfloat16" else np.float16

  def rounded(m):
    return repr(float(np.asarray(float(m.group(0)), t)))
  body = re.sub(r"(?<![\w.{])\d+\.\d+(?:e-?\d+)?", rounded, form).replace("{0}", "{0}.astype(ml.float32)")
  return f"({body}).astype({{0}}.dtype)"


_INTEGRAL = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")


def promoted(name, form, dtype):
  """`form` of an integer or bool operand {0} as jax.nn's function computes it (probe 57e; the formula ran in
  the integer dtype: `0.044715 * x ** 3` of int8 wrapped, gelu and softmax came out silently wrong, and the
  rest were MG106 at ml.exp): jax promotes the operand to float32 first (gelu's promote_args_inexact, softplus'
  logaddexp, elu's expm1, a Python float meeting it), so the form runs on `{0}.astype(ml.float32)`; but
  hard_tanh, jnp.where of the operand and ints, is jax's where (its integer dtype, a bool's int32), and log_sigmoid is
  `-softplus(-x)` with `-x` in the operand's dtype (wrapping, as jnp's). relu keeps its form (jnp.maximum(x,
  0)); silu and swish are left alone (jax's lax.logistic refuses integers). `form` unchanged for other dtypes."""
  if dtype not in _INTEGRAL or name in ("relu", "silu", "swish"):
    return form
  if name == "hard_tanh":
    return "ml.where({0} > 1, 1, ml.where({0} < -1, -1, {0}))"      # (jax's: uint8's -1 is 255, as there)
  if name == "log_sigmoid" and dtype != "bool":
    return form.replace("{0}", "(-(-{0}).astype(ml.float32))")
  return form.replace("{0}", "{0}.astype(ml.float32)")


GELU_EXACT = "0.5 * {0} * ml.erfc(-{0} * 0.7071067811865476)"     # jax.nn.gelu's (erf loses it below -4)


def gelu_form(pos, kw) -> str:
  """jax.nn.gelu's form for its approximate (a keyword, or the second argument: jax.nn.gelu(x, False)), as
  written; the tanh form unless it is False."""
  approximate = kw.get("approximate") or (pos[1] if len(pos) > 1 else "True")
  return GELU_EXACT if approximate.strip() == "False" else ACTIVATIONS["gelu"]
