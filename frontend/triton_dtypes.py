"""Triton's dtype names (`tl.float8e4nv`, `tl.fp16`) as a ported kernel writes them, and the jnp dtype
each is here: the `.to(tl.float8e4nv)` hint writes `.astype(jnp.float8_e4m3fn)`, not the Triton name
(which `ml` does not have), and `ml.float8e4b15` is not offered e5m2 as a near spelling."""
from __future__ import annotations

import re

# Triton's name -> jnp's (None: a format Hopper's kernels here do not have)
NAMES = {"float8e4nv": "float8_e4m3fn", "float8e5": "float8_e5m2", "float8e4b15": None, "float8e4b8": None,
         "float8e5b16": None, "fp8e4nv": "float8_e4m3fn", "fp8e5": "float8_e5m2", "fp16": "float16",
         "bf16": "bfloat16", "fp32": "float32", "float": "float32", "fp64": "float64"}


def hint(name: str) -> str | None:
  """The MG002 hint for `ml.<name>` where `name` is a Triton dtype name, else None."""
  if name not in NAMES:
    return None
  jnp_name = NAMES[name]
  if jnp_name is None:
    return (f"Triton's {name} is not a Hopper format here: the 8-bit floats are jnp.float8_e4m3fn (Triton's"
            f" float8e4nv) and jnp.float8_e5m2 (float8e5)")
  if jnp_name == "float64":
    return "no float64 in kernels: compute in jnp.float32"
  return f"write jnp.{jnp_name} (Triton's {name})"


def as_jnp(text: str) -> str:
  """A dtype as written (`tl.float8e4nv`, `ml.fp16`) with a Triton name replaced by jnp's."""
  m = re.fullmatch(r"\s*(?:\w+\.)?(\w+)\s*", text)
  if m is None or NAMES.get(m.group(1)) in (None, "float64"):
    return text
  return f"jnp.{NAMES[m.group(1)]}"
