"""Run probe 72b's cases and classify each: ok / wrong / crash / refused / build (python tests/probe72b_run.py [module
or case names])."""
from probe_runner import classify, err, export, load, main  # (the probe's tests and sweep import them here)

__all__ = ["MODULES", "classify", "err", "export", "load", "main"]
MODULES = ["probe72b_complex", "probe72b_fft", "probe72b_filter", "probe72b_stft", "probe72b_more", "probe72b_audio", "probe72b_triton"]

if __name__ == "__main__":
  main("probe72b_", MODULES)
