"""Structured logs (structlog): one JSON line per event; secrets and signatures never appear.

The API, the worker and beat all log the same way: structlog events and every stdlib record
(Celery's, kombu's, SQLAlchemy's) go through one formatter, so a fault leaves a trace in the same
JSON log. Celery's broker reconnect messages become ``broker_reconnect`` / ``broker_connection_lost``
events with the attempt number and the wait, so an outage can be followed attempt by attempt.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

_SECRET_KEYS = re.compile(r"(secret|token|signature|password|private_key|authorization)", re.I)
# Celery's consumer: "consumer: Cannot connect to redis://...: Error 111 ....\nTrying again in
# 4.00 seconds... (2/100)" and "consumer: Connection to broker lost. Trying to re-establish ...".
_RECONNECT = re.compile(
    r"Cannot connect to (?P<broker>\S+?): (?P<error>.*?)\.?\s*Trying again in (?P<wait>[\d.]+) seconds"
    r"\.*\s*\((?P<attempt>\d+)/(?P<max>[^)]+)\)",
    re.S,
)
_LOST = re.compile(r"Connection to broker lost", re.I)


def _redact(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in list(event):
        if _SECRET_KEYS.search(key):
            event[key] = "[redacted]"
    return event


def broker_event(message: str) -> dict[str, Any] | None:
    """The structured form of a Celery broker-connection message, or None (pure)."""
    m = _RECONNECT.search(message)
    if m is not None:
        limit = m.group("max").strip()
        return {
            "event": "broker_reconnect",
            "attempt": int(m.group("attempt")),
            "max_attempts": None if not limit.isdigit() else int(limit),
            "retry_in_seconds": float(m.group("wait")),
            "broker": re.sub(r"//[^@/]*@", "//**@", m.group("broker")),  # never a password
            "error": m.group("error").strip()[:300],
        }
    if _LOST.search(message):
        return {"event": "broker_connection_lost", "error": message.strip().splitlines()[0][:300]}
    return None


def _stdlib_fields(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Name the logger of a stdlib record, and turn Celery's broker messages into events."""
    record = event.get("_record")
    if isinstance(record, logging.LogRecord):
        event.setdefault("logger", record.name)
        structured = broker_event(str(event.get("event", "")))
        if structured is not None:
            event.update(structured)
    return event


class _Stderr:
    """Whatever ``sys.stderr`` is at write time (a captured or replaced stream is never kept)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure(level: str = "INFO", json_lines: bool = True) -> None:
    renderer: Any = structlog.processors.JSONRenderer() if json_lines else structlog.dev.ConsoleRenderer()
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    handler = logging.StreamHandler(_Stderr())
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, _stdlib_fields],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                _redact,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.captureWarnings(True)  # Python warnings (Celery's "running as root") are events too
    for chatty in ("alembic", "httpx", "urllib3", "celery.app.trace"):
        logging.getLogger(chatty).setLevel(max(logging.WARNING, logging.getLevelName(level.upper())))
    structlog.configure(
        processors=[*shared, _redact, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
