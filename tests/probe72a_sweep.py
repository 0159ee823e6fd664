"""Probe 72a's corpus at block=256 (two warpgroups): each case that is one kernel rebuilt with the block size, checked
against the same reference and exported (python tests/probe72a_sweep.py [256 512])."""
import importlib
import sys
import traceback

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from probe72a_common import run_case  # noqa: E402
from probe72a_run import MODULES  # noqa: E402


from probe_runner import with_block  # noqa: E402


if __name__ == "__main__":
  for block in [int(b) for b in sys.argv[1:]] or [256]:
    tally = {}
    for m in MODULES:
      for name, (kernel, make, ref, tol) in importlib.import_module(m).CASES.items():
        k = with_block(kernel, block)
        if k is None:
          continue
        try:
          run_case(name, (k, make, ref, tol))
          kind = "ok"
        except AssertionError as e:
          kind = "wrong"
          print(f"=== block={block} {name}: WRONG {str(e)[:400]}", flush=True)
        except Exception as e:     # noqa: BLE001: the sweep classifies every failure
          kind = f"{type(e).__name__} {getattr(e, 'code', '')}"
          print(f"=== block={block} {name}: {kind} {str(e)[:400]}", flush=True)
          if not getattr(e, "code", ""):
            traceback.print_exc()
        tally[kind] = tally.get(kind, 0) + 1
    print("TALLY", block, tally, flush=True)
