"""What probe 69a's corpus modules share: their CASES registry's entry maker and NumPy helpers for inputs and
references. Each module keeps its own CASES: name -> (kernel, make(seed) -> (args, constexprs),
reference(*args, **constexprs), tolerance); a tolerance of 0 is bit-exact."""
import jax.numpy as jnp
import numpy as np


def registrar(cases):
  def case(name, kernel, make, ref, tol):
    cases[name] = (kernel, make, ref, tol)
  return case


def f32(x):
  return np.asarray(x, np.float32)


def bf16(x):
  return np.asarray(jnp.asarray(x, jnp.bfloat16))


def rnd(seed, n, scale=1.0, dtype=np.float32):
  return (np.random.default_rng(seed).standard_normal(n) * scale).astype(dtype)


S = __import__("jax").ShapeDtypeStruct
F32, BF16, F16, I32, I8, U8, U32 = (jnp.float32, jnp.bfloat16, jnp.float16, jnp.int32, jnp.int8, jnp.uint8,
                                    jnp.uint32)
NS = (3.4445, -4.7750, 2.0315)      # Muon's quintic Newton-Schulz coefficients


def ns_reference(g, steps, eps=1e-7, inside=False, tall=False):
  """Muon's Newton-Schulz iteration as the kernels compute it: bf16 operands, float32 products, each result rounded
  to bf16 where the kernel rounds it; `inside`: normalised by sqrt(sum + eps), else by norm + eps; `tall`: a matrix
  of more rows than columns is transposed first and back at the end."""
  a, b, c = NS
  x = f32(g)
  tall = tall and x.shape[0] > x.shape[1]
  x = x.T if tall else x
  s = (x.astype(np.float64) ** 2).sum()
  xb = f32(bf16(x / (np.sqrt(s + eps) if inside else np.sqrt(s) + eps)))
  for _ in range(steps):
    A = xb @ xb.T
    Ab = f32(bf16(A))
    B = f32(bf16(b * A + c * (Ab @ Ab)))
    xb = f32(bf16(a * xb + B @ xb))
  return bf16(xb.T if tall else xb)
