"""benchmarks/plot_attention.py reads benchmarks/attention.py's last table from a log (no GPU, no matplotlib)."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import plot_attention  # noqa: E402


def test_reads_the_last_table_with_the_tflops_columns(tmp_path):
  log = tmp_path / "attn.log"
  head = "| dtype | D | mask | seq | pass | mgpu_dsl | cuDNN | Pallas | vs cuDNN | vs best | wall ms ours | cuDNN | Pallas |"
  rule = "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  log.write_text("\n".join([
      head, rule, "| float16 | 64 | full | 4096 | fwd | 1 | 2 | nan | 0.50 | 0.50 | 9.0 | 8.0 | nan |",
      "", "Attention, each contender at its best configuration:", head, rule,
      "| float16 | 64 | full | 4096 | fwd | 473 | 481 | nan | 0.98 | 0.98 | 0.608 | 0.613 | nan |",
      "| float16 | 128 | causal | 4096 | bwd | 343 | 466 | 401 | 0.74 | 0.86 | 2.061 | 1.712 | 1.9 |"]) + "\n")
  rows = plot_attention.read_table(str(log))
  assert [r["mgpu_dsl"] for r in rows] == ["473", "343"]
  assert [r["cuDNN"] for r in rows] == ["481", "466"]      # the TFLOP/s column, not the wall time's
  assert rows[1]["Pallas"] == "401" and rows[1]["mask"] == "causal" and rows[1]["vs best"] == "0.86"


def test_a_log_without_the_table_is_refused(tmp_path):
  log = tmp_path / "attn.log"
  log.write_text("nothing here\n")
  with pytest.raises(ValueError, match="no table after"):
    plot_attention.read_table(str(log))
