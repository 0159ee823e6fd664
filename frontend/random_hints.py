"""Hints for random numbers drawn the JAX or Pallas way in a kernel (probe 49g): jax.random's keys (made while
tracing, or of a run-time seed) and Pallas TPU's stateful PRNG (`pltpu.prng_seed`, `prng_random_bits`,
`stateful_uniform`, ...). A kernel's numbers are counter-based (Philox, frontend/ops/random.py): no key, no state,
one offset an element, so each hint keeps the seed and writes the ml.* draw of the same distribution."""
from __future__ import annotations

DRAWS = ("ml.rand(seed, offsets) for uniform floats in [0, 1), ml.randint for uint32 bits, ml.randn for normals;"
         " one offset an element, i * n + ml.arange(n)")

KEY = ("pass a seed (an ml.scalar parameter; jax.random.bits(key, dtype=jnp.uint32) outside the kernel) and"
       " draw ml.rand(seed, offsets), one offset an element (a Gumbel sample is"
       " -ml.log(-ml.log(ml.rand(seed, offsets))), a normal one ml.randn(seed, offsets), uint32 bits"
       " ml.randint(seed, offsets))")

# Pallas TPU's stateful PRNG: each draw and the ml.* one that gives its distribution
_STATEFUL = {"prng_random_bits": "ml.randint", "stateful_bits": "ml.randint", "stateful_uniform": "ml.rand",
             "stateful_normal": "ml.randn", "sample_block": "ml.rand"}


def _seed(text: str | None) -> str:
  return text if text and (text.isidentifier() or text.replace("[", "").replace("]", "").replace("_", "")
                           .isalnum()) else "seed"


def key_hint(name: str, pos: list) -> str | None:
  """jax.random.<name>(...) of run-time values in a kernel (`jax.random.key(seed)`, `fold_in(key, i)`)."""
  if name in ("key", "PRNGKey", "wrap_key_data"):
    s = _seed(pos[0] if pos else None)
    return (f"keep {s} as the seed and draw from it, no key: ml.rand({s}, offsets) for uniform floats in [0, 1),"
            f" ml.randint({s}, offsets) for uint32 bits, ml.randn({s}, offsets) for normals (jax.random.uniform,"
            f" bits, normal), one offset an element, i * n + ml.arange(n)")
  if name in ("fold_in", "split"):
    return ("a kernel has no keys to fold or split: another stream is another seed (seed + i) or other offsets"
            " under one seed (i * n + ml.arange(n)); draw " + DRAWS)
  return None


def prng_hint(name: str, pos: list) -> str | None:
  """Pallas TPU's `pltpu.prng_seed(s)` and its stateful draws."""
  if name == "prng_seed":
    s = _seed(pos[0] if len(pos) == 1 else None)
    return (f"a kernel's random numbers have no state to seed: drop the call and draw from {s} directly,"
            f" ml.randint({s}, offsets) for random bits (prng_random_bits's), ml.rand({s}, offsets) for uniform"
            f" floats, ml.randn({s}, offsets) for normals, one offset an element: i * n + ml.arange(n)")
  if name in _STATEFUL:
    return (f"draw {_STATEFUL[name]}(seed, offsets), one offset an element (i * n + ml.arange(n)), from the seed"
            f" prng_seed was given (counter-based: no state)")
  return None
