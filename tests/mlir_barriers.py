"""The named barriers of a Mosaic GPU module's text (lowering/barriers.py writes them as NVVM ops)."""
import re

_OP = re.compile(r"nvvm\.barrier(\.arrive)? id = %(\S+) number_of_threads = %c(\d+)_i32")


def named_barriers(text: str) -> list[tuple[str, int | None, int]]:
  """(kind, barrier number or None where it is computed, threads) of each `nvvm.barrier` ("sync")
  and `nvvm.barrier.arrive` ("arrive"), in order."""
  out = []
  for arrive, which, threads in _OP.findall(text):
    m = re.fullmatch(r"c(\d+)_i32(_\d+)?", which)
    out.append(("arrive" if arrive else "sync", int(m.group(1)) if m else None, int(threads)))
  return out
