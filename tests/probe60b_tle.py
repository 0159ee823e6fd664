"""FlagGems' triton_lang_extension as a port writes it (tests/test_probe60b.py): helpers of static arguments whose
bodies call the language, imported as a module and called as `tle.program_id(0)` in a kernel."""
from mgpu_dsl import language as tl


def program_id(axis):
  return tl.program_id(axis).to(tl.int64)


def num_programs(axis):
  return tl.num_programs(axis).to(tl.int64)
