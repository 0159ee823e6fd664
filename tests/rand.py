"""Test inputs drawn with NumPy behind `jax.random`'s signatures (`rand.normal(key, shape, dtype)`, ...).

`jax.random` compiles an XLA program for each shape and dtype it draws (0.3-1 s on a CI core for
`normal`); a test suite that draws a few hundred input shapes spends minutes compiling random
number generators. These draw the same distributions with NumPy's generator and copy the result to
the device: no compile. The numbers differ from jax.random's, so a test must not depend on them
beyond their distribution. Keys are `rand.key(seed)`, `jax.random.key(seed)` or
`jax.random.PRNGKey(seed)`; `rand.split` splits either.

Tests of jax.random itself (or of kernels compared bit for bit against it) keep using jax.random.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


class Key(tuple):
  """A seed path: `key(3)` is (3,), its `split` children (3, 0), (3, 1), ..."""

  def __getitem__(self, i):       # split(k)[0], as on an array of keys
    return super().__getitem__(i) if isinstance(i, slice) else Key(self + (int(i),))


def key(seed) -> Key:
  return Key((int(seed),))


PRNGKey = key


def _path(k) -> tuple:
  if isinstance(k, Key):
    return tuple(k)
  if isinstance(k, (int, np.integer)):
    return (int(k),)
  if jax.dtypes.issubdtype(getattr(k, "dtype", None), jax.dtypes.prng_key):
    k = jax.random.key_data(k)
  return tuple(int(v) for v in np.asarray(k).ravel())


def _rng(k) -> np.random.Generator:
  return np.random.default_rng(list(_path(k)))


def _shape(s) -> tuple:
  return (int(s),) if isinstance(s, (int, np.integer)) else tuple(s)


def _out(x, dtype):
  return jnp.asarray(np.asarray(x).astype(jnp.dtype(dtype)))


def split(k, num: int = 2) -> list:
  p = _path(k)
  return [Key(p + (i,)) for i in range(num)]


def fold_in(k, data: int) -> Key:
  return Key(_path(k) + (int(data),))


def numpy_normal(k, shape=()) -> np.ndarray:
  """normal's float32 numbers as a NumPy array (scale and shift them in NumPy, then jnp.asarray)."""
  return _rng(k).standard_normal(_shape(shape), dtype=np.float32)


def normal(k, shape=(), dtype=jnp.float32):
  return _out(numpy_normal(k, shape), dtype)


def uniform(k, shape=(), dtype=jnp.float32, minval=0.0, maxval=1.0):
  return _out(_rng(k).uniform(minval, maxval, _shape(shape)).astype(np.float32), dtype)


def randint(k, shape, minval, maxval, dtype=jnp.int32):
  return _out(_rng(k).integers(minval, maxval, _shape(shape)), dtype)


def bernoulli(k, p=0.5, shape=None):
  shape = np.shape(p) if shape is None else _shape(shape)
  return jnp.asarray(_rng(k).random(shape) < np.asarray(p))


def permutation(k, x):
  if isinstance(x, (int, np.integer)):
    return jnp.asarray(_rng(k).permutation(int(x)).astype(np.int32))
  return jnp.asarray(_rng(k).permutation(np.asarray(x)))


def gumbel(k, shape=(), dtype=jnp.float32):
  return _out(_rng(k).gumbel(size=_shape(shape)).astype(np.float32), dtype)


def bits(k, shape=(), dtype=jnp.uint32):
  info = np.iinfo(jnp.dtype(dtype))
  return _out(_rng(k).integers(0, int(info.max) + 1, _shape(shape), dtype=np.uint64), dtype)
