"""A bar chart of benchmarks/attention.py's table from its log (the GPU machine has no plotting package; this runs
where matplotlib installs: `pip install matplotlib`).

    python benchmarks/plot_attention.py docs/logs/attn_table_session53_h100.log --out docs/attention.png

Reads the last table the log prints ("each contender at its best configuration"): one group of bars a row (dtype,
head_dim, mask, seq, pass), TFLOP/s by kernel time of mgpu_dsl, cuDNN and Pallas (where run), each bar of ours
labelled with its ratio to the best peer.
"""
from __future__ import annotations

import argparse
import math


def read_table(path):
  """The rows of the log's last table as dicts keyed by its header (a name the header repeats, as the wall times'
  "cuDNN", keeps its first column: the TFLOP/s)."""
  lines = open(path).read().splitlines()
  starts = [i for i, line in enumerate(lines) if "best configuration" in line]
  if not starts:
    raise ValueError(f"{path}: no table after 'each contender at its best configuration'")
  start = starts[-1]
  rows, head = [], None
  for line in lines[start + 1:]:
    if not line.startswith("|"):
      continue
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if head is None:
      head = cells
    elif not set(cells[0]) <= {"-"}:
      rows.append({h: c for h, c in reversed(list(zip(head, cells)))})
  return rows


def number(text):
  try:
    return float(text)
  except ValueError:
    return math.nan


def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("log")
  ap.add_argument("--out", default="docs/attention.png")
  ap.add_argument("--title", default="")
  a = ap.parse_args()
  try:
    rows = read_table(a.log)
  except ValueError as e:
    raise SystemExit(str(e)) from None
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  peers = [("mgpu_dsl", "mgpu_dsl"), ("cuDNN", "cuDNN"), ("Pallas", "Pallas MGPU")]
  peers = [(k, label) for k, label in peers if any(not math.isnan(number(r[k])) for r in rows)]
  fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(rows)), 4))
  width = 0.8 / len(peers)
  for n, (key, label) in enumerate(peers):
    xs = [i + (n - (len(peers) - 1) / 2) * width for i in range(len(rows))]
    bars = ax.bar(xs, [number(r[key]) for r in rows], width, label=label)
    if key == "mgpu_dsl":
      for bar, r in zip(bars, rows):
        ax.annotate(f"{r['vs best']}x", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=7)
  ax.set_xticks(range(len(rows)), [f"{r['dtype']} D{r['D']}\n{r['mask']} {r['seq']}\n{r['pass']}" for r in rows],
                fontsize=7)
  ax.set_ylabel("TFLOP/s (kernel time)")
  ax.set_title(a.title or "attention, batch x seq 16384, 16 heads")
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(a.out, dpi=120)
  print(f"{len(rows)} rows plotted to {a.out}")


if __name__ == "__main__":
  main()
