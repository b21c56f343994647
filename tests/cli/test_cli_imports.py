"""The offline tools (`sweepbot recipe ...`, `sweepbot gap`) import nothing of the service: no web
framework, ORM, broker, simulator or GitHub client, nor the settings, database or flows. Checked on
the modules a real run loaded (sys.modules at exit, in a subprocess), not on a clock; bench/cli.py
measures the CPU per call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

MASTER = ROOT / "tests/fixtures/inferencex/amd-master.head.yaml"
KEY = "dsr1-fp4-mi355x-sglang"
REFERENCE = ROOT / "app/core/references/atom-minimaxm3-mxfp4-mi355x-tp4-8k1k.yaml"
SERVICE = (
    "fastapi", "starlette", "uvicorn", "sqlalchemy", "alembic", "celery", "kombu", "redis", "github",
    "httpx", "sim", "app.db", "app.settings", "app.models", "app.flows", "app.store", "app.adapters",
    "app.web", "devstack", "workers",
)  # fmt: skip

# Runs the CLI as `sweepbot` does, then prints the top-level names of every module it loaded.
PROBE = """
import atexit, json, sys
atexit.register(lambda: sys.__stdout__.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n"))
sys.argv = ["sweepbot", *sys.argv[1:]]
from app.cli import main
main()
"""


def _loaded(tmp_path: Path, *args: str) -> set[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEEPBOT_")}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("MODULES "))
    return set(json.loads(line.removeprefix("MODULES ")))


def _results(folder: Path) -> Path:
    for conc in (32, 64):
        doc = {"model_id": "amd/MiniMax-M3-MXFP4", "max_concurrency": conc, "mean_tpot_ms": 20.0}
        (folder / f"r{conc}.json").write_text(json.dumps(doc))
    return folder


# `recipe dispatch` fills the SWEEPBOT_DISPATCH_* templates (read alone, not the settings) with the
# dispatch planner, which is pure over them (its package's __init__ imports nothing); still no ORM,
# broker, web framework or simulator.
DISPATCH_NEEDS = {"app.flows", "app.flows.scheduler", "app.flows.scheduler.dispatch_plan"}

# Every third-party package an offline call may load, and nothing more: typer (below 0.29: no
# pydantic parameter layer) and its two small dependencies, PyYAML, orjson (the result files). Not
# pydantic (settings or typer._adapters: 0.16 s), structlog (50 ms, with rich's tracebacks) nor rich
# (typer loads it for help and usage errors only; a table output loads it, not these).
THIRD_PARTY_ALLOWED = {"typer", "annotated_doc", "shellingham", "yaml", "orjson", "cython_runtime"}


def _third_party(loaded: set[str]) -> set[str]:
    tops = {m.split(".")[0] for m in loaded}
    return {t for t in tops if t not in sys.stdlib_module_names and not t.startswith("_") and t != "app"}


@pytest.mark.parametrize(
    ("args", "allowed"),
    [
        (["recipe", "plan", str(MASTER), KEY, "--json"], set()),
        (["recipe", "dispatch", str(MASTER), KEY, "--json"], DISPATCH_NEEDS),
        (["recipe", "bump", str(MASTER), KEY, "rocm/sglang:v1"], set()),
        (["gap", "--results", "<results>", "--reference", str(REFERENCE)], set()),
    ],
)
def test_offline_tools_load_no_service_module(tmp_path: Path, args: list[str], allowed: set[str]) -> None:
    args = [str(_results(tmp_path)) if a == "<results>" else a for a in args]
    loaded = _loaded(tmp_path, *args)
    assert "app.cli.recipe" in loaded or "app.cli.report" in loaded  # the probe saw the tool run
    service = sorted(m for m in loaded - allowed if any(m == s or m.startswith(s + ".") for s in SERVICE))
    assert service == [], service
    assert _third_party(loaded) <= THIRD_PARTY_ALLOWED, sorted(_third_party(loaded) - THIRD_PARTY_ALLOWED)
    assert "typer" in loaded and "yaml" in loaded  # the allowance is not vacuous: the probe sees them


def test_an_operating_command_still_loads_the_database(tmp_path: Path) -> None:
    # The probe can see a service import: `deps status` loads the ORM (and fails: no database).
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEEPBOT_")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, "deps", "status"], cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    line = next(x for x in out.stdout.splitlines() if x.startswith("MODULES "))
    assert "sqlalchemy" in json.loads(line.removeprefix("MODULES "))
