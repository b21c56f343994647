"""A local outbox for audit rows the database could not take.

A GitHub write that GitHub accepted while the database was down must still leave its audit row:
``record_outside`` retries for a few seconds, and when the outage outlasts that, the row goes to
an append-only file of this process (one JSON line, flushed and fsynced) instead of into the
caller's transaction, which the outage is about to roll back. The next audit write that reaches
the database drains every spool file in the directory, so the rows land late but land.

A drain claims a file by renaming it (atomic; a file another process claimed first is skipped),
inserts its rows in one transaction, and deletes it after the commit. Each row carries a
``spool_id`` in its detail, and rows already in the table are skipped, so a drain that crashed
between its commit and the delete does not insert them twice when the file is drained again.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models import AuditEntry

log = structlog.get_logger(__name__)

MAX_SPOOL_LINE_BYTES = 64 * 1024  # an audit row is a few hundred bytes; a longer line is not ours
_CLAIMED = ".draining"


@dataclass(frozen=True)
class AuditSpool:
    directory: Path

    def _own_file(self) -> Path:
        return self.directory / f"audit-{os.getpid()}.jsonl"

    def put(self, fields: dict[str, Any]) -> str:
        """Append one row (the keyword arguments of ``audit.record``); returns its spool id."""
        spool_id = uuid.uuid4().hex
        detail = dict(fields.get("detail") or {})
        detail["spool_id"] = spool_id
        row = {**fields, "detail": detail, "at": datetime.now(UTC).isoformat()}  # when it happened
        line = json.dumps(row, default=str, separators=(",", ":")) + "\n"
        self.directory.mkdir(parents=True, exist_ok=True)
        with _LOCK, self._own_file().open("a", encoding="utf-8") as out:
            out.write(line)
            out.flush()
            os.fsync(out.fileno())
        log.warning(
            "audit_spooled", action=fields.get("action"), spool_id=spool_id, file=str(self._own_file())
        )
        return spool_id

    def settle(self, spool_id: str, outcome: str, detail: dict[str, Any]) -> None:
        """The outcome of a spooled row's write, appended after it (the drain applies it)."""
        line = json.dumps({"settles": spool_id, "outcome": outcome, "detail": detail}, default=str) + "\n"
        self.directory.mkdir(parents=True, exist_ok=True)
        with _LOCK, self._own_file().open("a", encoding="utf-8") as out:
            out.write(line)
            out.flush()
            os.fsync(out.fileno())

    def pending(self) -> bool:
        """Whether any spool file waits (a stat or two: checked after each audit write)."""
        try:
            return any(p.suffix in (".jsonl", _CLAIMED) for p in self.directory.iterdir())
        except FileNotFoundError:
            return False

    def drain(self, session: Session) -> int:
        """Insert every spooled row not yet in the table, commit, delete the files; rows inserted."""
        inserted = 0
        for claimed in self._claim():
            rows, settles = _read(claimed)
            for row in rows:  # a row's outcome, when its write finished before the drain
                got = settles.pop(row["detail"]["spool_id"], None)
                if got is not None:
                    row["outcome"], row["detail"] = got[0], {**row["detail"], **got[1]}
            have = _present(session, [str(r["detail"]["spool_id"]) for r in rows] + list(settles))
            for row in rows:
                if row["detail"]["spool_id"] not in have:
                    if row["caused_by"] == row["actor"]:
                        row["caused_by"] = None  # as audit.record stores it
                    session.add(AuditEntry(**row))
                    inserted += 1
            for entry in have.values():  # rows an earlier drain inserted, settled since
                got = settles.get(str((entry.detail or {}).get("spool_id")))
                if got is not None:
                    entry.outcome, entry.detail = got[0], {**(entry.detail or {}), **got[1]}
            session.commit()
            claimed.unlink(missing_ok=True)
            log.info("audit_spool_drained", file=claimed.name, rows=len(rows), inserted=inserted)
        return inserted

    def _claim(self) -> Iterator[Path]:
        try:
            names = sorted(p for p in self.directory.iterdir() if p.suffix in (".jsonl", _CLAIMED))
        except FileNotFoundError:
            return
        for path in names:
            if path.suffix == _CLAIMED:
                if _alive(path.stem.rsplit(".", 1)[-1]):
                    continue  # another live process is draining it
                yield path  # its drainer died: ours now (rows already in are skipped)
                continue
            target = path.with_name(f"{path.name}.{os.getpid()}{_CLAIMED}")
            try:
                path.rename(target)
            except FileNotFoundError:
                continue  # another process claimed it first
            yield target


_LOCK = threading.Lock()  # one process's threads append whole lines


def _read(path: Path) -> tuple[list[dict[str, Any]], dict[str, tuple[str, dict[str, Any]]]]:
    """The file's rows, and the outcomes appended for them (spool id -> outcome, detail)."""
    rows: list[dict[str, Any]] = []
    settles: dict[str, tuple[str, dict[str, Any]]] = {}
    with path.open("rb") as src:
        for raw in src:
            line = _line(path, raw)
            if line is None:
                continue
            if isinstance(line.get("settles"), str) and isinstance(line.get("detail"), dict):
                settles[line["settles"]] = (str(line.get("outcome") or "ok"), line["detail"])
                continue
            detail = line.get("detail")
            if not isinstance(detail, dict) or "spool_id" not in detail:
                continue
            row = {k: line.get(k) for k in _FIELDS}
            if not isinstance(row["action"], str) or not isinstance(row["actor"], str):
                log.error("audit_spool_line_skipped", file=path.name, bytes=len(raw))
                continue
            row["outcome"] = row["outcome"] or "ok"  # audit.record's default
            row["at"] = _moment(line.get("at"))
            rows.append(row)
    return rows, settles


def _line(path: Path, raw: bytes) -> dict[str, Any] | None:
    if len(raw) > MAX_SPOOL_LINE_BYTES or not raw.endswith(b"\n"):
        log.error("audit_spool_line_skipped", file=path.name, bytes=len(raw))
        return None  # a torn last line (crash mid-append) or not ours
    try:
        line = json.loads(raw)
    except ValueError:
        log.error("audit_spool_line_skipped", file=path.name, bytes=len(raw))
        return None
    return line if isinstance(line, dict) else None


_FIELDS = ("actor", "action", "target", "outcome", "detail", "delivery_id", "caused_by")


def _moment(text: Any) -> datetime:
    try:
        return datetime.fromisoformat(str(text))
    except ValueError:
        return datetime.now(UTC)


def _present(session: Session, spool_ids: list[str]) -> dict[str, AuditEntry]:
    """The rows already in the table among ``spool_ids``, by spool id."""
    if not spool_ids:
        return {}
    column = AuditEntry.detail["spool_id"].as_string()
    found = session.execute(select(column, AuditEntry).where(column.in_(spool_ids))).all()
    return {str(spool_id): entry for spool_id, entry in found}


def _alive(pid_text: str) -> bool:
    try:
        os.kill(int(pid_text), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True
