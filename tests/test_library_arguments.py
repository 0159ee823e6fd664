"""jnp / lax / jax.nn / jax.scipy.special functions a kernel computes, called with arguments their forms cannot take
(session 60): `lax.expand_dims(v, 2)` (dimensions a tuple), `jnp.permute_dims(v, w)`, `lax.round(v, w)` were
internal errors (the form maker's TypeError); each is a KernelTypeError at the call naming the arguments and the
parameters. The sweep calls every such function with a register value beside another, or beside a number."""
import jax
import jax.numpy as jnp
import pytest

import mgpu_dsl as mg
from mgpu_dsl.frontend.jnp_calls import SHAPED
from call_sweeps import escapes

S = jax.ShapeDtypeStruct
_LIBS = ("jnp", "jax.lax", "jax.nn", "jax.scipy.special")


@mg.mgpu_kernel(out_shape=lambda x: x)
def expand_by_int(x, o):
  o[...] = x[...] + jax.lax.expand_dims(x[...], 2)[..., 0]


def test_a_form_refusing_its_arguments_is_at_the_call():
  with pytest.raises(mg.KernelTypeError) as info:
    expand_by_int.typed_ir(S((8, 128), jnp.float32))
  e = info.value
  assert e.filename == __file__ and e.lineno == expand_by_int.__wrapped__.__code__.co_firstlineno + 2
  assert e.message == ("jax.lax.expand_dims does not take these arguments: array=a float32 (8, 128) tensor,"
                       " dimensions=2"), e.message
  assert e.hint.startswith("call it as jax.lax.expand_dims(array, dimensions) with arguments"), e.hint


def test_no_library_function_reaches_an_internal_error(tmp_path):
  calls = [((f"{lib}.{name}", args), f"{lib}.{name}({args})") for lib, name in sorted(k for k in SHAPED if k[0] in _LIBS)
           for args in ("x[...], x[...]", "x[...], 2")]
  bad = escapes(tmp_path, "library_calls", ["import jax, jax.numpy as jnp, jax.nn, jax.lax, jax.scipy.special"], calls,
                (8, 128))
  assert not bad, bad[:10]
