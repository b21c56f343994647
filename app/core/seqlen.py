"""The one name of a sequence-length shape (pure): the benchmark repo's exp-name rule.

``1k1k`` and ``8k1k`` for the two named shapes, else ``<isl>_<osl>``; agentic-coding points have no
isl/osl and are named ``agentic``. Jobs, the sticky report, the dashboard, the CLI, the command
grammar and the dispatch checks all name and check a shape here, so a name accepted in one place
matches in another.
"""

from __future__ import annotations

import re

SEQ_NAMES: dict[tuple[int, int], str] = {(1024, 1024): "1k1k", (8192, 1024): "8k1k"}
AGENTIC_SEQ = "agentic"  # the seq of agentic-coding points, which have no isl/osl
SEQ_HINT = "use 1k1k, 8k1k, <isl>_<osl> (for example 2048_512) or agentic"

# Six digits a side: no real shape is longer, and a name is echoed and carried in run names.
_SHAPE_RE = re.compile(r"^(?:(?P<named>1k1k|8k1k)|(?P<isl>\d{1,6})_(?P<osl>\d{1,6}))$")


def seq_name(isl: int, osl: int) -> str:
    """`1k1k` / `8k1k` for the two named shapes, else `<isl>_<osl>` (the repo's exp-name rule)."""
    return SEQ_NAMES.get((isl, osl), f"{isl}_{osl}")


def seq_shape(value: str) -> str | None:
    """The repo's spelling of an isl/osl shape name (``1024_1024`` -> ``1k1k``), or None if
    ``value`` names no shape (``2k1k`` is not a name the repo makes; ``agentic`` has no shape)."""
    match = _SHAPE_RE.match(value)
    if match is None:
        return None
    if match.group("named"):
        return value
    return seq_name(int(match.group("isl")), int(match.group("osl")))


def is_seq_filter(value: str) -> bool:
    """Whether ``value`` may select points by sequence length: a shape name or ``agentic``."""
    return value == AGENTIC_SEQ or seq_shape(value) is not None
