"""The process-tree launcher's small pieces: generated secrets and child log files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest


def test_generated_secrets_are_created_owner_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from devstack.launcher import _secret

    # Even if nothing tightens the mode afterwards, the file never exists with the umask's mode.
    monkeypatch.setattr(Path, "chmod", lambda self, mode: None)
    old = os.umask(0o022)
    try:
        value = _secret(tmp_path, "operator-token")
    finally:
        os.umask(old)
    path = tmp_path / "operator-token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert _secret(tmp_path, "operator-token") == value  # kept across restarts


def test_starting_a_child_leaves_no_log_file_open_in_the_parent(tmp_path: Path) -> None:
    from devstack.launcher import Stack

    def open_logs() -> list[str]:
        out = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith(str(tmp_path)):
                out.append(target)
        return out

    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc")
    running = Stack(api_url="http://127.0.0.1:9", env=dict(os.environ), log_dir=tmp_path)
    proc = running.start_process("help", "--help")
    try:
        assert open_logs() == []
    finally:
        proc.wait(timeout=60)
    assert (tmp_path / "help.log").exists()
