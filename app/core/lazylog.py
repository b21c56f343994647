"""A structlog logger imported on the first line logged.

structlog (with rich's pretty tracebacks, which it loads when rich is installed) costs ~50 ms of
CPU to import. The pure core modules the offline tools use (`sweepbot recipe dispatch`, `sweepbot
gap`: app.core.runmatch, app.core.artifacts) log only while the service runs, so they take their
logger from here and a tool call never imports structlog (bench/cli.py).
"""

from __future__ import annotations

from typing import Any


class LazyLogger:
    """``structlog.get_logger(name)``, made on first use; any logger method passes through."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._log: Any = None

    def __getattr__(self, method: str) -> Any:
        if method.startswith("_"):
            raise AttributeError(method)
        if self._log is None:
            import structlog  # lazy: the offline tools never log (start-up)

            self._log = structlog.get_logger(self._name)
        return getattr(self._log, method)


def get_logger(name: str) -> LazyLogger:
    return LazyLogger(name)
