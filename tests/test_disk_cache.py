"""The disk cache of traced kernels: shared between processes, rebuilt when damaged,
skipped when a value the kernel reads has no stable text form."""
import glob
import os
import re
import subprocess
import sys
import textwrap
import types

import jax
import jax.numpy as jnp
import pytest

import mgpu_dsl as mg
from mgpu_dsl import cache as C
from mgpu_dsl import language as ml
from mgpu_dsl.frontend import ir

S = jax.ShapeDtypeStruct
F32 = jnp.float32
THIS = sys.modules[__name__]
SCALE = 2.0
SETTINGS = types.SimpleNamespace(scale=2.0)      # an object: no stable text form


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
  monkeypatch.setenv("MGPU_DSL_CACHE_DIR", str(tmp_path))
  return tmp_path


def canonical(text):
  """IR text with its value ids renumbered in order of appearance (ids differ per trace)."""
  ids = {}
  return re.sub(r"%\d+", lambda m: ids.setdefault(m.group(), f"%v{len(ids)}"), text)


def entries(d):
  return sorted(glob.glob(os.path.join(d, "traced", "*.pkl")))


def fresh(fn):
  """A new KernelFunction of `fn`: empty in-memory cache."""
  return mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))(fn)


def _scaled(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * SCALE


def _settings(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * SETTINGS.scale


SCRIPT = textwrap.dedent("""
    import jax, jax.numpy as jnp
    import mgpu_dsl as mg
    from mgpu_dsl import language as ml

    @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
    def triple(x, out):
        i = ml.program_id(0)
        buf = ml.smem((128, x.shape[1]))
        ml.copy(x.at[ml.ds(i * 128, 128)], buf)
        buf[...] = buf[...] * 3
        ml.copy(buf, out.at[ml.ds(i * 128, 128)])

    text = triple.typed_ir(jax.ShapeDtypeStruct((256, 64), jnp.float32))
    print("disk_hits", triple.cache_info().disk_hits)
    print(text)
""")


def test_a_second_process_reads_the_traced_kernel_from_disk(tmp_path):
  (tmp_path / "triple_kernel.py").write_text(SCRIPT)
  env = dict(os.environ, MGPU_DSL_CACHE_DIR=str(tmp_path / "cache"), JAX_PLATFORMS="cpu")
  run = lambda: subprocess.run([sys.executable, "triple_kernel.py"], cwd=tmp_path, env=env,
                               capture_output=True, text=True, check=True).stdout
  first, second = run(), run()
  assert first.startswith("disk_hits 0\n") and second.startswith("disk_hits 1\n")
  assert first.split("\n", 1)[1] == second.split("\n", 1)[1]
  assert len(entries(tmp_path / "cache")) == 1


def test_a_damaged_entry_is_rebuilt_not_trusted(cache_dir):
  k = fresh(_scaled)
  want = canonical(k.typed_ir(S((256,), F32)))
  [path] = entries(cache_dir)
  good = open(path, "rb").read()
  for damage in (good[:-10], good[:-5] + b"xxxxx", b"not a cache entry", b""):
    with open(path, "wb") as f:
      f.write(damage)
    k.cache_clear()
    hits = k.cache_info().disk_hits
    assert canonical(k.typed_ir(S((256,), F32))) == want
    assert k.cache_info().disk_hits == hits            # traced again
    rewritten = open(path, "rb").read()                # and written back whole: the next trace loads it
    assert rewritten.startswith(C.TRACED_HEADER) and rewritten != damage
    k.cache_clear()
    assert canonical(k.typed_ir(S((256,), F32))) == want and k.cache_info().disk_hits == hits + 1
  k.cache_clear()
  k.typed_ir(S((256,), F32))
  assert k.cache_info().disk_hits == 1


def test_an_entry_that_does_not_unpickle_is_ignored(tmp_path):
  path, key = str(tmp_path / "e.pkl"), "k" * 64
  payload = b"\x80\x05garbage"
  import hashlib
  blob = C.TRACED_HEADER + key.encode() + b"\n" + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
  open(path, "wb").write(blob)
  assert C.load_traced(path, key, ir.Kernel) is None


def test_an_entry_of_another_key_is_ignored(tmp_path):
  path = str(tmp_path / "e.pkl")
  assert C.store_traced(path, "a" * 64, ir.Kernel.__new__(ir.Kernel))
  assert C.load_traced(path, "b" * 64, ir.Kernel) is None
  assert isinstance(C.load_traced(path, "a" * 64, ir.Kernel), ir.Kernel)


def test_rebinding_a_global_makes_a_new_entry(cache_dir, monkeypatch):
  k = fresh(_scaled)
  k.typed_ir(S((256,), F32))
  monkeypatch.setattr(THIS, "SCALE", 5.0)
  assert "rhs=5.0" in k.typed_ir(S((256,), F32))
  assert len(entries(cache_dir)) == 2
  assert k.cache_info().disk_hits == 0


def test_a_kernel_reading_an_object_is_not_cached_on_disk(cache_dir):
  k = fresh(_settings)
  k.typed_ir(S((256,), F32))
  assert entries(cache_dir) == []


@pytest.mark.parametrize("value", ["0", "off", "OFF", "false"])
def test_the_cache_can_be_turned_off(tmp_path, monkeypatch, value):
  monkeypatch.setenv("MGPU_DSL_CACHE_DIR", value)
  assert C.cache_dir() is None
  fresh(_scaled).typed_ir(S((256,), F32))
  assert not os.path.exists(os.path.join(os.getcwd(), value, "traced"))


def test_default_cache_dir_is_the_users_cache_folder(monkeypatch, tmp_path):
  monkeypatch.delenv("MGPU_DSL_CACHE_DIR")
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  assert C.cache_dir() == os.path.join(str(tmp_path), "mgpu_dsl")


def test_writes_leave_no_temporary_files(cache_dir):
  fresh(_scaled).typed_ir(S((128,), F32))
  assert [os.path.basename(p) for p in glob.glob(os.path.join(cache_dir, "traced", "*"))] == [
      os.path.basename(p) for p in entries(cache_dir)]


def test_the_compiler_digest_covers_every_module_of_the_package():
  """Cached kernels are keyed by a digest of the compiler's sources: every module counts, the
  op families' subpackage too (once it did not, and a changed op kept its stale kernels)."""
  import importlib
  import pkgutil
  import mgpu_dsl
  hashed = set(C.source_files())
  missing = []
  for m in pkgutil.walk_packages(mgpu_dsl.__path__, "mgpu_dsl."):
    spec = importlib.util.find_spec(m.name)
    if spec.origin and spec.origin.endswith(".py") and spec.origin not in hashed:
      missing.append(m.name)
  assert not missing
  assert any(p.endswith(os.path.join("ops", "elementwise.py")) for p in hashed)
