"""The app <-> sim contracts (pyproject `[tool.importlinter]`) can fail: each is run by
`lint-imports` over a made-up tree holding the same top-level packages, clean and then with one
planted import that breaks it (tests/test_architecture.py runs them over the real tree)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = "The product does not run the simulator: app and workers never import sim or devstack"
SIMULATOR = "The simulator is a second opinion: sim never imports the product or devstack"


def _contracts() -> dict[str, dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["name"]: c for c in config["contracts"]}


def _toml_list(values: list[str]) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


def _tree(tmp: Path, contract: dict[str, Any], planted: tuple[str, str] | None) -> Path:
    for package in ("app", "app/core", "workers", "sim", "devstack"):
        (tmp / package).mkdir(parents=True, exist_ok=True)
        (tmp / package / "__init__.py").write_text("")
    (tmp / "devstack" / "wiring.py").write_text("import app.core\nimport sim\n")  # allowed: both
    if planted:
        path, line = planted
        (tmp / path).write_text(line + "\n")
    (tmp / "pyproject.toml").write_text(
        "[tool.importlinter]\n"
        'root_packages = ["app", "workers", "sim", "devstack"]\n\n'
        "[[tool.importlinter.contracts]]\n"
        f'name = "{contract["name"]}"\n'
        f'type = "{contract["type"]}"\n'
        f"source_modules = {_toml_list(contract['source_modules'])}\n"
        f"forbidden_modules = {_toml_list(contract['forbidden_modules'])}\n"
    )
    return tmp


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(script), "--config", str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("name", "planted"),
    [
        (PRODUCT, ("app/core/planted.py", "import sim")),
        (PRODUCT, ("workers/planted.py", "from devstack import wiring")),
        (SIMULATOR, ("sim/planted.py", "from app import core")),
        (SIMULATOR, ("sim/planted.py", "import devstack.wiring")),
    ],
    ids=["app-imports-sim", "workers-import-devstack", "sim-imports-app", "sim-imports-devstack"],
)
def test_a_planted_import_breaks_the_contract(tmp_path: Path, name: str, planted: tuple[str, str]) -> None:
    contract = _contracts()[name]
    clean = _lint(_tree(tmp_path / "clean", contract, None))
    assert clean.returncode == 0, clean.stdout[-3000:] + clean.stderr[-2000:]
    broken = _lint(_tree(tmp_path / "broken", contract, planted))
    assert broken.returncode != 0 and "BROKEN" in broken.stdout, broken.stdout[-3000:]
