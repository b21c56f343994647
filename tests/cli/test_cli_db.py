"""`sweepbot db current|history`: where the database stands against the code's migrations (the
upgrade runbook in docs/operations.md uses them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from app.migrate import head_revision, history
from tests.conftest import ROOT


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEEPBOT_")}
    env.update({"PYTHONPATH": str(ROOT), "COLUMNS": "300", "SWEEPBOT_DATA_DIR": str(tmp_path / "d")})
    return subprocess.run(
        [sys.executable, "-m", "app", *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_current_says_behind_then_at_head(tmp_path: Path) -> None:
    revisions = [r for r, _, _ in history()]
    assert revisions[0] == head_revision() and len(revisions) == len(set(revisions))
    assert _run(tmp_path, "db", "upgrade", "--revision", revisions[1]).returncode == 0
    behind = _run(tmp_path, "db", "current")
    assert behind.returncode == 1, behind.stderr
    assert f"is at revision {revisions[1]}" in behind.stdout and "sweepbot db upgrade" in behind.stdout
    listed = _run(tmp_path, "db", "history").stdout.splitlines()
    assert listed[1].startswith(revisions[1]) and listed[1].endswith("<- current")
    assert _run(tmp_path, "db", "upgrade").returncode == 0
    at = _run(tmp_path, "db", "current")
    assert at.returncode == 0 and f"at revision {head_revision()} (head)" in at.stdout
