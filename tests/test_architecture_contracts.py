"""The import contracts can fail: each planted violation breaks the contract that forbids it.

A contract that a typo, a renamed package or a missing ``include_external_packages`` made vacuous
would pass forever; so the source tree is copied, one module that breaks the rule is planted in the
copy, and ``lint-imports`` must report it (the real tree passes in test_architecture.py).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _contract(ident: str) -> dict[str, Any]:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c.get("id") == ident)


def _lint_with_plant(
    tmp_path: Path, contract: str, plants: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    tree = tmp_path / "tree"
    for package in ("app", "workers", "sim", "devstack"):
        if (ROOT / package).is_dir():
            shutil.copytree(ROOT / package, tree / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    for rel, text in plants.items():
        (tree / rel).write_text(text)
    script = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(script), "--no-cache", "--contract", contract],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)},
    )


# What the pure core must never reach (issue 30): every I/O library the project depends on, the
# standard library's network/process/file-system modules, and the settings loader.
MUST_FORBID = {
    "app.settings", "app.db", "app.models", "sqlalchemy", "psycopg", "redis", "celery", "kombu",
    "github", "httpx", "fastapi", "uvicorn", "socket", "subprocess", "os", "http",
}  # fmt: skip


def test_the_pure_core_contract_names_every_io_library() -> None:
    forbidden = set(_contract("pure-core")["forbidden_modules"])
    assert forbidden >= MUST_FORBID, sorted(MUST_FORBID - forbidden)


def test_every_forbidden_module_planted_in_the_core_is_reported(tmp_path: Path) -> None:
    forbidden = [str(m) for m in _contract("pure-core")["forbidden_modules"]]
    planted = "".join(f"import {m}\n" for m in forbidden)
    out = _lint_with_plant(tmp_path, "pure-core", {"app/core/planted_io.py": planted})
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    reported = out.stdout
    missed = [m for m in forbidden if f"app.core.planted_io -> {m}" not in reported]
    assert not missed, f"planted imports the contract did not report: {missed}\n{reported[-3000:]}"


@pytest.mark.parametrize(
    ("rel", "text", "edge"),
    [
        (
            "app/core/planted_up.py",
            "import app.flows.scheduler.tick\n",
            "app.core.planted_up -> app.flows.scheduler.tick",
        ),
        (
            "app/store/planted_up.py",
            "import app.flows.scheduler.tick\n",
            "app.store.planted_up -> app.flows.scheduler.tick",
        ),
        ("app/flows/planted_up.py", "import app.web.main\n", "app.flows.planted_up -> app.web.main"),
    ],
)
def test_an_upward_import_breaks_the_layers(tmp_path: Path, rel: str, text: str, edge: str) -> None:
    out = _lint_with_plant(tmp_path, "layers", {rel: text})
    assert out.returncode == 1 and edge in out.stdout, out.stdout[-3000:] + out.stderr[-2000:]


# The flow packages (issue 30): a planted import from a lower package into a higher one, or between
# two packages of one layer, breaks ``flow-packages``; a flat module outside every package too.
@pytest.mark.parametrize(
    ("rel", "text", "reported"),
    [
        (
            "app/flows/repo/planted_up.py",
            "import app.flows.sweeps.request\n",
            "app.flows.repo.planted_up -> app.flows.sweeps.request",
        ),
        (
            "app/flows/sweeps/planted_up.py",
            "from app.flows.scheduler import tick\n",
            "app.flows.sweeps.planted_up -> app.flows.scheduler.tick",
        ),
        (
            "app/flows/tracking/planted_up.py",
            "import app.flows.nightly.watch\n",
            "app.flows.tracking.planted_up -> app.flows.nightly.watch",
        ),
        (
            "app/flows/scheduler/planted_across.py",
            "import app.flows.results.collect\n",
            "app.flows.scheduler.planted_across -> app.flows.results.collect",
        ),
        ("app/flows/planted_flat.py", "", "app.flows.planted_flat"),
    ],
    ids=[
        "repo-imports-sweeps",
        "sweeps-import-scheduler",
        "tracking-imports-nightly",
        "across-a-layer",
        "flat",
    ],
)
def test_an_upward_import_between_flow_packages_breaks_them(
    tmp_path: Path, rel: str, text: str, reported: str
) -> None:
    clean = _lint_with_plant(tmp_path / "clean", "flow-packages", {})
    assert clean.returncode == 0, clean.stdout[-3000:] + clean.stderr[-2000:]
    out = _lint_with_plant(tmp_path / "broken", "flow-packages", {rel: text})
    assert out.returncode == 1 and reported in out.stdout, out.stdout[-3000:] + out.stderr[-2000:]
