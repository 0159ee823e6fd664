"""The sweeps of test_builtin_numbers.py and test_library_arguments.py (session 60): kernels of one call each,
written to a module under pytest's tmp_path and traced; what reaches the user as anything but a KernelError in its
words (an InternalError, MG900, or a Python exception) is collected."""
import importlib.util

import jax
import jax.numpy as jnp

import mgpu_dsl as mg

S = jax.ShapeDtypeStruct


def escapes(tmp_path, name, imports, calls, shape):
  """[(key, what reached the user)] for each `calls` item (key, expression): a kernel `o[...] = x[...]` after `r =
  expression`, traced at a float32 `x` of `shape`."""
  lines = list(imports) + ["import mgpu_dsl as mg", "K = {}"]
  for n, (key, expr) in enumerate(calls):
    lines += ["@mg.mgpu_kernel(out_shape=lambda x: x)", f"def k{n}(x, o):", f"  r = {expr}", "  o[...] = x[...]",
              f"K[{key!r}] = k{n}"]
  path = tmp_path / f"{name}.py"
  path.write_text("\n".join(lines) + "\n")
  spec = importlib.util.spec_from_file_location(name, path)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  bad = []
  for key, k in mod.K.items():
    try:
      k.typed_ir(S(shape, jnp.float32))
    except mg.InternalError as e:
      bad.append((key, str(e).splitlines()[0]))
    except mg.KernelError:
      pass
    except Exception as e:                    # noqa: BLE001 (what reached the user)
      bad.append((key, f"{type(e).__name__}: {e}"))
  return bad
