"""The embedded API process loads neither PyGithub nor psycopg (it never calls GitHub, and its
database is SQLite): ~30 MB and ~10 MB of resident memory that `sweepbot up`'s 400 MB aim
(bench/memory.py, docs/benchmarks.md "Memory") has no room for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

PROBE = """
import sys
from app.web.main import create_app
from fastapi.testclient import TestClient
with TestClient(create_app()) as client:
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code in (200, 503)
print(sorted({name.split(".")[0] for name in sys.modules} & {"github", "psycopg", "requests", "jwt"}))
"""


def test_the_embedded_api_imports_no_github_client_and_no_postgresql_driver(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEEPBOT_")}
    env.update({"SWEEPBOT_DATA_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)})
    subprocess.run([sys.executable, "-m", "app", "db", "upgrade"], env=env, cwd=tmp_path, check=True)
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
