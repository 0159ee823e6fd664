"""The examples run: the quickstart script and the notebook (executed cell by cell)."""
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_quickstart_script_shows_ir_and_a_located_diagnostic():
  r = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py")],
                     capture_output=True, text=True, timeout=600)
  assert r.returncode == 0, r.stderr
  assert "mgpu_dsl.CopyDtypeError" in r.stdout
  assert "quickstart.py:" in r.stdout and "hint:" in r.stdout
  if "backend cpu" in r.stdout:
    assert "kernel @double" in r.stdout and "custom call present: True" in r.stdout


def test_quickstart_notebook_executes():
  nbformat = pytest.importorskip("nbformat")
  nbclient = pytest.importorskip("nbclient")
  nb = nbformat.read(ROOT / "examples" / "quickstart.ipynb", as_version=4)
  env_cwd = str(ROOT / "examples")
  client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                   resources={"metadata": {"path": env_cwd}})
  client.execute()
  outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
  assert "scale_rows matches x * 3" in outputs
  assert "CopyDtypeError" not in outputs or "[MG101]" in outputs
  assert "[MG101]" in outputs


def _execute(name):
  nbformat = pytest.importorskip("nbformat")
  nbclient = pytest.importorskip("nbclient")
  nb = nbformat.read(ROOT / "examples" / name, as_version=4)
  assert all(c.get("id") for c in nb.cells), f"{name}: every cell needs an id"
  client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                   resources={"metadata": {"path": str(ROOT / "examples")}})
  client.execute()
  return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs), nb


def test_matmul_notebook_executes_and_shows_the_benchmark_plot():
  text, nb = _execute("matmul.ipynb")
  assert "matmul matches jnp.dot" in text and "kernel @matmul" in text
  images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
  assert images, "the benchmark plot is not displayed"


def test_softmax_notebook_executes():
  text, _ = _execute("softmax.ipynb")
  assert "max abs error against jax.nn.softmax" in text and "rows1x4_row" in text


def test_check_command_passes_on_the_examples():
  r = subprocess.run([sys.executable, "-m", "mgpu_dsl", "check", str(ROOT / "examples")],
                     capture_output=True, text=True, timeout=600)
  assert r.returncode == 0, r.stdout + r.stderr
  assert "no errors" in r.stdout and "matmul_bias_gelu" in r.stdout


def test_attention_notebook_executes():
  text, _ = _execute("attention.ipynb")
  assert "causal attention matches the reference" in text and "dv: relative error" in text
