"""Structured logs (structlog): one JSON line per event; secrets and signatures never appear."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

_SECRET_KEYS = re.compile(r"(secret|token|signature|password|private_key|authorization)", re.I)


def _redact(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in list(event):
        if _SECRET_KEYS.search(key):
            event[key] = "[redacted]"
    return event


class _Stderr:
    """Whatever ``sys.stderr`` is at write time (a captured or replaced stream is never kept)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure(level: str = "INFO", json_lines: bool = True) -> None:
    logging.basicConfig(format="%(message)s", stream=_Stderr(), level=level.upper(), force=True)
    for chatty in ("alembic", "httpx", "urllib3", "celery.app.trace"):
        logging.getLogger(chatty).setLevel(max(logging.WARNING, logging.getLevelName(level.upper())))
    renderer: Any = structlog.processors.JSONRenderer() if json_lines else structlog.dev.ConsoleRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _redact,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
