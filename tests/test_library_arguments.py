"""jnp / lax / jax.nn / jax.scipy.special functions a kernel computes, called with arguments their forms cannot take
(session 60): `lax.expand_dims(v, 2)` (dimensions a tuple), `jnp.permute_dims(v, w)`, `lax.round(v, w)` were
internal errors (the form maker's TypeError); each is a KernelTypeError at the call naming the arguments and the
parameters. The sweep calls every such function with a register value beside another, or beside a number."""
import importlib.util

import jax
import jax.numpy as jnp
import pytest

import mgpu_dsl as mg
from mgpu_dsl.frontend.jnp_calls import SHAPED

S = jax.ShapeDtypeStruct
_LIBS = ("jnp", "jax.lax", "jax.nn", "jax.scipy.special")


@mg.mgpu_kernel(out_shape=lambda x: x)
def expand_by_int(x, o):
  r = jax.lax.expand_dims(x[...], 2)
  o[...] = x[...]


def test_a_form_refusing_its_arguments_is_at_the_call():
  with pytest.raises(mg.KernelTypeError) as info:
    expand_by_int.typed_ir(S((8, 128), jnp.float32))
  e = info.value
  assert e.filename == __file__ and e.lineno == expand_by_int.__wrapped__.__code__.co_firstlineno + 2
  assert e.message == ("jax.lax.expand_dims does not take these arguments: array=a float32 (8, 128) tensor,"
                       " dimensions=2"), e.message
  assert e.hint.startswith("call it as jax.lax.expand_dims(array, dimensions) with arguments"), e.hint


def test_no_library_function_reaches_an_internal_error(tmp_path):
  lines = ["import jax, jax.numpy as jnp, jax.nn, jax.lax, jax.scipy.special", "import mgpu_dsl as mg", "K = {}"]
  n = 0
  for lib, name in sorted(k for k in SHAPED if k[0] in _LIBS):
    for args in ("x[...], x[...]", "x[...], 2"):
      n += 1
      lines += ["@mg.mgpu_kernel(out_shape=lambda x: x)", f"def k{n}(x, o):", f"  r = {lib}.{name}({args})",
                "  o[...] = x[...]", f"K[{lib + '.' + name!r}, {args!r}] = k{n}"]
  path = tmp_path / "library_calls.py"
  path.write_text("\n".join(lines) + "\n")
  spec = importlib.util.spec_from_file_location("library_calls", path)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  bad = []
  for key, k in mod.K.items():
    try:
      k.typed_ir(S((8, 128), jnp.float32))
    except mg.InternalError as e:
      bad.append((key, str(e).splitlines()[0]))
    except mg.KernelError:
      pass
    except Exception as e:                    # noqa: BLE001 (what reached the user)
      bad.append((key, f"{type(e).__name__}: {e}"))
  assert not bad, bad[:10]
