"""docs/architecture.md stays true: it names every migration and every table, and nothing else.

The module table lists the migration chain and the data-model table lists the tables; both drifted
once (migrations up to 0011 named while 0016 existed, tables hidden behind "..."). This compares
them with ``migrations/versions/`` and the models' metadata.
"""

from __future__ import annotations

import re
from pathlib import Path

from app.models import Base

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "architecture.md").read_text()


def _section(title: str) -> str:
    start = DOC.index(f"## {title}")
    nxt = DOC.find("\n## ", start + 1)
    return DOC[start : nxt if nxt != -1 else len(DOC)]


def test_the_doc_names_every_migration_in_order() -> None:
    files = sorted(p.stem for p in (ROOT / "migrations" / "versions").glob("[0-9]*.py"))
    line = next(ln for ln in DOC.splitlines() if ln.startswith("| `migrations/versions/`"))
    named = re.findall(r"`(\d{4}_[a-z0-9_]+)`", line)
    assert named == files, f"docs/architecture.md names {named}; migrations/versions/ has {files}"


def test_the_data_model_table_names_every_table_and_no_other() -> None:
    rows = [ln for ln in _section("Data model").splitlines() if ln.startswith("| `")]
    named = {name for row in rows for name in re.findall(r"`([a-z_]+)`", row.split("|")[1])}
    tables = set(Base.metadata.tables)
    assert not tables - named, f"tables missing from docs/architecture.md: {sorted(tables - named)}"
    assert not named - tables, (
        f"docs/architecture.md names tables that do not exist: {sorted(named - tables)}"
    )
    assert not any("..." in row.split("|")[1] for row in rows), "name every table; no '...'"
