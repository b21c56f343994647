"""Waiting on real state (a file, a row, a simulator run) instead of sleeping a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(
    cond: Callable[[], object], what: str = "condition", timeout: float = 20.0, every: float = 0.02
) -> None:
    """Return as soon as ``cond()`` is true; fail saying ``what`` once ``timeout`` seconds passed."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)
