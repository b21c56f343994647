"""The one name of a sequence-length shape (pure): the benchmark repo's exp-name rule.

``1k1k`` and ``8k1k`` for the two named shapes, else ``<isl>_<osl>``. Jobs, the sticky report, the
dashboard and the CLI all name a shape this way, so a name made in one place matches in another.
"""

from __future__ import annotations

SEQ_NAMES: dict[tuple[int, int], str] = {(1024, 1024): "1k1k", (8192, 1024): "8k1k"}


def seq_name(isl: int, osl: int) -> str:
    """`1k1k` / `8k1k` for the two named shapes, else `<isl>_<osl>` (the repo's exp-name rule)."""
    return SEQ_NAMES.get((isl, osl), f"{isl}_{osl}")
