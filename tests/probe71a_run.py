"""Run probe 71a's cases and classify each: ok / wrong / crash / refused / build (python tests/probe71a_run.py [module
or case names])."""
from probe_runner import classify, err, export, load, main  # (the probe's tests and sweep import them here)

__all__ = ["MODULES", "classify", "err", "export", "load", "main"]
MODULES = ["probe71a_spmv", "probe71a_gnn", "probe71a_traverse", "probe71a_graph", "probe71a_ragged", "probe71a_more", "probe71a_forms"]

if __name__ == "__main__":
  main("probe71a_", MODULES)
