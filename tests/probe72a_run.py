"""Runs probe 72a's corpus outside pytest: `python tests/probe72a_run.py [module ...] [-k name]`, one line a case
(ok, or the exception's class, code and first line), and the counts."""
import importlib
import sys
import time
import traceback

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from probe72a_common import run_case  # noqa: E402

MODULES = ["probe72a_dp", "probe72a_align", "probe72a_cells", "probe72a_scans", "probe72a_more", "probe72a_extra", "probe72a_odd"]


def main(argv):
  only = argv[argv.index("-k") + 1] if "-k" in argv else None
  names = [a for a in argv if a.startswith("probe72a_")] or MODULES
  counts = {}
  for m in names:
    for name, c in importlib.import_module(m).CASES.items():
      if only and only not in name:
        continue
      t = time.time()
      try:
        run_case(name, c)
        status = "ok"
      except AssertionError as e:
        status = "WRONG " + str(e).splitlines()[0][:300] if str(e) else "WRONG"
        traceback.print_exc(limit=-2)
      except Exception as e:     # noqa: BLE001: the probe classifies every failure
        code = getattr(e, "code", "")
        status = f"{type(e).__name__} {code} {str(e)[:600]}"
        if not code:
          traceback.print_exc()
      key = status.split(" ")[0] + (" " + status.split(" ")[1] if not status.startswith(("ok", "WRONG")) else "")
      counts[key] = counts.get(key, 0) + 1
      print(f"{name:50s} {time.time() - t:5.1f}s {status}", flush=True)
  print(counts)


if __name__ == "__main__":
  main(sys.argv[1:])
