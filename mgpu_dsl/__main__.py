"""`python -m mgpu_dsl check FILE.py [...]` (also `mgpu-dsl check`): check kernels without a GPU.

Imports each file, finds its `@mgpu_kernel` functions and checks every
specialisation declared with `mg.check_specs(kernel, *specs, **constexprs)`:
tracing, type and legality checks, and building the verified Mosaic GPU module
on the CPU. Prints each mistake as `ClassName: file:line:col: message [CODE]`
with the source line, a caret and a hint.

Exit status: 0 when every declared specialisation is clean, 1 when any has an
error (or a file does not import), 2 for a usage error. For CI and pre-commit::

    - repo: local
      hooks:
        - id: mgpu-dsl-check
          name: mgpu_dsl kernel check
          entry: python -m mgpu_dsl check
          language: system
          types: [python]
"""
from __future__ import annotations

import argparse
import json
import os
import sys


def _parser() -> argparse.ArgumentParser:
  from . import __version__
  p = argparse.ArgumentParser(prog="python -m mgpu_dsl", description=__doc__.split("\n\n")[0])
  p.add_argument("--version", action="version", version=f"mgpu_dsl {__version__}")
  sub = p.add_subparsers(dest="command", metavar="COMMAND")
  c = sub.add_parser("check", help="check the kernels of Python files (no GPU needed)",
                     description="Check every specialisation declared with mg.check_specs in each"
                                 " file; directories are searched for *.py files.")
  c.add_argument("paths", nargs="+", metavar="FILE.py", help="Python files or directories")
  c.add_argument("-q", "--quiet", action="store_true", help="print only errors and the summary")
  c.add_argument("--require-specs", action="store_true",
                 help="treat a kernel with no declared specs as an error")
  c.add_argument("--format", choices=("text", "json"), default="text",
                 help="json: one object per checked specialisation, for tools")
  return p


def _python_files(paths, parser):
  out = []
  for path in paths:
    if os.path.isdir(path):
      for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
        out += [os.path.join(root, f) for f in sorted(files) if f.endswith(".py")]
    elif os.path.isfile(path):
      out.append(path)
    else:
      parser.error(f"no such file or directory: {path}")
  return out


def check(args, parser) -> int:
  from . import check as C
  files = _python_files(args.paths, parser)
  n_checked = n_failed = n_errors = n_unimportable = 0
  skipped, records = [], []
  failed = False
  say = (lambda *a: None) if args.format == "json" else print
  seen: set = set()            # one run: a specialisation is checked (and reported) once
  for path in files:
    report = C.check_file(path, seen)
    if report.import_error is not None:
      failed = True
      n_unimportable += 1
      say(C.render_import_error(path, report.import_error))
      records.append({"file": path, "status": "import-error",
                      "error": f"{type(report.import_error).__name__}: {report.import_error}"})
      continue
    for r in report.results:
      n_checked += 1
      rec = {"file": path, "kernel": r.kernel.__name__, "specialisation": r.title}
      if r.ok:
        if not args.quiet:
          say(f"{path}: {r.title}: ok")
        rec["status"] = "ok"
      else:
        failed = True
        n_failed += 1
        n_errors += len(r.errors) + (r.crash is not None)
        count = len(r.errors) + (r.crash is not None)
        say(f"{path}: {r.title}: {count} error{'s' if count != 1 else ''}")
        for e in r.errors:
          say(C.render_error(e) + "\n")
        if r.crash is not None:
          say(C.render_crash(r.crash) + "\n")
        rec["status"] = "error"
        rec["errors"] = [C.to_json(e) for e in r.errors]
        if r.crash is not None:
          rec["crash"] = f"{type(r.crash).__name__}: {r.crash}"
      records.append(rec)
    for k in report.skipped:
      skipped.append(k)
      failed |= args.require_specs
      if not args.quiet or args.require_specs:
        say(f"{path}: {k.__name__}: skipped (no specs declared)")
      records.append({"file": path, "kernel": k.__name__, "status": "skipped"})
  if args.format == "json":
    print(json.dumps(records, indent=2))
  else:
    summary = (f"checked {n_checked} specialisation{'s' if n_checked != 1 else ''} in"
               f" {len(files)} file{'s' if len(files) != 1 else ''}: ")
    found = [f"{n_errors} error(s) in {n_failed} of them"] if n_failed else []
    found += [f"{n_unimportable} file(s) could not be imported"] if n_unimportable else []
    summary += "; ".join(found) or "no errors"
    if skipped:
      summary += f"; {len(skipped)} kernel(s) skipped (no specs declared"
      summary += ", which --require-specs makes an error)" if args.require_specs else ")"
    print(summary)
  return 1 if failed else 0


def main(argv=None) -> int:
  parser = _parser()
  args = parser.parse_args(argv)
  if args.command != "check":
    parser.print_usage(sys.stderr)
    print("python -m mgpu_dsl: error: give a command: check FILE.py [...]", file=sys.stderr)
    return 2
  return check(args, parser)


if __name__ == "__main__":
  sys.exit(main())
