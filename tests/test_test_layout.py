"""tests/core holds only pure tests: no database, broker, web app, subprocess or simulator.

The pure core is checked by tests that need nothing but the code (docs/architecture.md, "Tests
follow the layout"); tests that start processes or servers, or use a database, live in
tests/flows, tests/web, tests/cli or tests/e2e. Mutation testing (tools/mutation.py) relies on this:
a core rule must be killed by a test next to it, not by one far away.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What makes a test impure: a database, a process, a broker, a server or the network.
IMPURE_MODULES = (
    "app.db", "sqlalchemy", "subprocess", "multiprocessing", "celery", "kombu", "workers", "redis",
    "psycopg", "socket", "httpx", "fastapi", "starlette", "uvicorn", "devstack",
)  # fmt: skip
IMPURE_FIXTURES = {"db_session", "sqlite_url", "pg_url", "client", "sim"}


def _impure(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found: list[str] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            if any(name == m or name.startswith(m + ".") for m in IMPURE_MODULES):
                found.append(f"{path.name}:{getattr(node, 'lineno', 0)} imports {name}")
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            used = {a.arg for a in node.args.args} & IMPURE_FIXTURES
            found += [f"{path.name}:{node.lineno} {node.name} uses the {u} fixture" for u in sorted(used)]
    return found


def test_tests_core_is_pure() -> None:
    found = [hit for path in sorted((ROOT / "tests" / "core").glob("*.py")) for hit in _impure(path)]
    assert not found, "move these to tests/flows, tests/web, tests/cli or tests/e2e:\n" + "\n".join(found)


def test_the_check_sees_an_impure_test(tmp_path: Path) -> None:
    planted = tmp_path / "test_planted.py"
    planted.write_text("import subprocess\nfrom app.db import session_scope\n\ndef test_x(db_session): ...\n")
    assert len(_impure(planted)) == 3
