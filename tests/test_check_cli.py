"""`python -m mgpu_dsl check`: the CI / pre-commit checker, run as users run it."""
import json
import subprocess
import sys
import textwrap

import pytest

HEADER = """\
import jax, jax.numpy as jnp
import mgpu_dsl as mg
from mgpu_dsl import language as ml

"""

GOOD = HEADER + """\
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def double(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  buf[...] = buf[...] * 2
  ml.copy(buf, out.at[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda x: x)
def undeclared(x, out):
  out[...] = x[...]


mg.check_specs(double, jax.ShapeDtypeStruct((1024, 64), jnp.float32))
mg.check_specs(double, jax.ShapeDtypeStruct((256, 64), jnp.bfloat16))

if __name__ == "__main__":
  raise SystemExit("the checker must not run this")
"""

BAD = HEADER + """\
@mg.mgpu_kernel(out_shape=lambda x: x)
def stage(x, out):
  buf = ml.smem((128, 64), jnp.float16)
  ml.copy(x, buf)
  y = x[...] * scale
  ml.copy(buf, out)


mg.check_specs(stage, jax.ShapeDtypeStruct((128, 64), jnp.float32))
"""


def run(*args, cwd):
  p = subprocess.run([sys.executable, "-m", "mgpu_dsl", *args], cwd=cwd, capture_output=True,
                     text=True, timeout=300)
  return p.returncode, p.stdout, p.stderr


@pytest.fixture
def files(tmp_path):
  (tmp_path / "good.py").write_text(GOOD)
  (tmp_path / "bad.py").write_text(BAD)
  return tmp_path


def test_a_clean_file_exits_0_and_lists_each_specialisation(files):
  rc, out, err = run("check", "good.py", cwd=files)
  assert rc == 0, out + err
  assert out.splitlines() == [
      "good.py: double(float32[1024,64]): ok",
      "good.py: double(bfloat16[256,64]): ok",
      "good.py: undeclared: skipped (no specs declared)",
      "checked 2 specialisations in 1 file: no errors; 1 kernel(s) skipped (no specs declared)",
  ]


def test_a_file_with_mistakes_exits_1_and_prints_each_at_its_line(files):
  rc, out, _ = run("check", "good.py", "bad.py", "-q", cwd=files)
  assert rc == 1
  assert textwrap.dedent("""\
      bad.py: stage(float32[128,64]): 3 errors
      CopyDtypeError: bad.py:8:2: cannot copy x (GMEM, float32) into buf (SMEM, float16): element types differ [MG101]
            ml.copy(x, buf)
            ^~~~~~~~~~~~~~~
      hint: allocate buf as float32""") in out
  assert textwrap.dedent("""\
      UnknownNameError: bad.py:9:15: name 'scale' is not defined [MG002]
            y = x[...] * scale
                         ^~~~~""") in out
  assert "CopyDtypeError: bad.py:10:2: cannot copy buf (SMEM, float16) into out (GMEM, float32)" in out
  assert "good.py" not in out                   # -q: only errors and the summary
  assert out.splitlines()[-1] == ("checked 3 specialisations in 2 files: 3 error(s) in 1 of them;"
                                 " 1 kernel(s) skipped (no specs declared)")


def test_json_output_and_required_specs(files):
  rc, out, _ = run("check", "--format", "json", "--require-specs", str(files), cwd=files)
  assert rc == 1
  records = {(r["file"].rsplit("/", 1)[-1], r.get("specialisation") or r["kernel"]): r
             for r in json.loads(out)}
  assert records[("good.py", "double(float32[1024,64])")]["status"] == "ok"
  assert records[("good.py", "undeclared")]["status"] == "skipped"
  bad = records[("bad.py", "stage(float32[128,64])")]
  assert [(e["class"], e["code"], e["line"], e["column"]) for e in bad["errors"]] == [
      ("CopyDtypeError", "MG101", 8, 2), ("UnknownNameError", "MG002", 9, 15),
      ("CopyDtypeError", "MG101", 10, 2)]


def test_usage_errors_exit_2(files):
  assert run(cwd=files)[0] == 2
  rc, _, err = run("check", "missing.py", cwd=files)
  assert rc == 2 and "no such file or directory: missing.py" in err


def test_a_file_that_does_not_import_fails_the_check(files):
  (files / "broken.py").write_text(HEADER + "raise RuntimeError('boom')\n")
  rc, out, _ = run("check", "broken.py", cwd=files)
  assert rc == 1
  assert "broken.py: cannot import (at broken.py:5): RuntimeError: boom" in out
  assert out.strip().splitlines()[-1] == "checked 0 specialisations in 1 file: 1 file(s) could not be imported"


def test_the_checker_is_usable_in_process(files):
  from mgpu_dsl import check as C
  report = C.check_file(str(files / "bad.py"))
  assert not report.ok
  [result] = report.results
  assert [type(e).__name__ for e in result.errors] == ["CopyDtypeError", "UnknownNameError",
                                                       "CopyDtypeError"]
  import mgpu_dsl as mg
  with pytest.raises(mg.KernelTypeError, match="takes an @mgpu_kernel function"):
    C.check_specs(lambda x: x)


def test_a_python_number_declares_an_ml_scalar_as_kernel_check_takes_it(tmp_path):
  (tmp_path / "scalar.py").write_text(HEADER + textwrap.dedent("""\
      @mg.mgpu_kernel(out_shape=lambda x, a: x, grid=(1,))
      def axpy(x, a: ml.scalar, out):
        out[...] = x[...] * a


      mg.check_specs(axpy, jax.ShapeDtypeStruct((128,), jnp.float32), 0.5)
      """))
  rc, out, err = run("check", "scalar.py", cwd=tmp_path)
  assert rc == 0, out + err
  assert out.splitlines()[0] == "scalar.py: axpy(float32[128], 0.5): ok"


def test_a_file_reports_the_specs_it_declares_not_those_of_the_modules_it_imports(files):
  # user.py imports good.py (which declares double's two specs) and declares one of its own
  (files / "user.py").write_text(HEADER + textwrap.dedent("""\
      from good import undeclared

      mg.check_specs(undeclared, jax.ShapeDtypeStruct((128,), jnp.float32))
      """))
  rc, out, err = run("check", "user.py", "good.py", cwd=files)
  assert rc == 0, out + err
  lines = out.splitlines()
  assert [ln for ln in lines if ln.startswith("user.py")] == ["user.py: undeclared(float32[128]): ok"]
  assert len([ln for ln in lines if ln.startswith("good.py: double")]) == 2
  assert lines[-1].startswith("checked 3 specialisations in 2 files")


def test_a_spec_declared_for_a_kernel_of_a_file_checked_earlier_is_checked(files):
  """`check good.py user.py` (or `check .`): good.py's kernel was declared before user.py added an
  int8 spec to it, which was then dropped: the run passed with a mistake in it."""
  (files / "user.py").write_text(HEADER + textwrap.dedent("""\
      from good import double

      mg.check_specs(double, jax.ShapeDtypeStruct((1024, 64), jnp.float8_e4m3fn))      # 8-bit float * 2: MG106
      """))
  for order in (("good.py", "user.py"), ("user.py", "good.py")):
    rc, out, err = run("check", *order, cwd=files)
    assert rc == 1, out + err
    assert out.count("double(float8_e4m3fn[1024,64]): 1 error") == 1, out
    assert out.count("double(float32[1024,64]): ok") == 1, out


def test_files_of_a_package_are_imported_as_its_modules(tmp_path):
  pkg = tmp_path / "mypkg"
  pkg.mkdir()
  (pkg / "__init__.py").write_text("")
  (pkg / "consts.py").write_text("BLOCK = 128\n")
  (pkg / "kernels.py").write_text(HEADER + textwrap.dedent("""\
      from .consts import BLOCK

      @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // BLOCK,))
      def double(x, out):
        i = ml.program_id(0)
        out.at[ml.ds(i * BLOCK, BLOCK)][...] = x.at[ml.ds(i * BLOCK, BLOCK)][...] * 2

      mg.check_specs(double, jax.ShapeDtypeStruct((512,), jnp.float32))
      """))
  rc, out, err = run("check", "mypkg", cwd=tmp_path)
  assert rc == 0, out + err
  assert "mypkg/kernels.py: double(float32[512]): ok" in out


def test_a_package_file_still_imports_its_neighbours_by_plain_name(tmp_path):
  pkg = tmp_path / "pkg"
  pkg.mkdir()
  (pkg / "__init__.py").write_text("")
  (pkg / "helpers.py").write_text("SCALE = 2.0\n")
  (pkg / "kern.py").write_text(HEADER + textwrap.dedent("""\
      from helpers import SCALE

      @mg.mgpu_kernel(out_shape=lambda x: x)
      def k(x, out):
        out[...] = x[...] * SCALE

      mg.check_specs(k, jax.ShapeDtypeStruct((128,), jnp.float32))
      """))
  rc, out, err = run("check", "pkg/kern.py", cwd=tmp_path)
  assert rc == 0, out + err
