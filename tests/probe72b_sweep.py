"""Probe 72b's corpus at block=256 and block=512 (two and four warpgroups): each case that is one kernel rebuilt with
the block size, checked against the same reference and exported (python tests/probe72b_sweep.py [256 512])."""
from probe_runner import sweep
from probe72b_run import MODULES

if __name__ == "__main__":
  sweep(MODULES)
