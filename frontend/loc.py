"""Source locations: every typed-IR op carries one (the user's file, line, column)."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Loc:
  filename: str
  lineno: int
  col_offset: int           # 0-based, as in Python's ast
  end_lineno: int | None = None
  end_col_offset: int | None = None
  source_line: str = ""     # the text of line `lineno`, for rendering

  def __str__(self):
    return f"{self.filename}:{self.lineno}:{self.col_offset}"

  @property
  def short(self) -> str:
    import os
    return f"{os.path.basename(self.filename)}:{self.lineno}"


UNKNOWN = Loc("<unknown>", 0, 0)
