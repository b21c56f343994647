"""Choosing a point's `bmk_` artifact among everything a real benchmark run uploads.

The artifact list is built the way tests/fixtures/inferencex/workflows/benchmark-tmpl.yml names
uploads (RESULT_FILENAME ends in the node that ran the job, from runners.yaml, optionally
followed by `_recipe-<16>`), plus the run-level artifacts run-sweep.yml / e2e-tests.yml add.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import yaml

from app.core.artifacts import bmk_artifact_name, parse_bmk_name, result_stem, select_bmk_artifact
from app.core.recipes import expand_points, parse_master
from tests.recipe_helpers import SEED_KEY, fixture_text

KEY = SEED_KEY


def _template_result_filename(point: dict[str, Any], node: str, fingerprint: str) -> str:
    """RESULT_FILENAME written from benchmark-tmpl.yml's `RESULT_FILENAME_BASE` line, independently."""
    text = fixture_text("workflows/benchmark-tmpl.yml")
    line = next(ln for ln in text.splitlines() if "RESULT_FILENAME_BASE:" in ln)
    env = {
        "env.EXP_NAME": point["exp-name"],
        "env.PRECISION": point["precision"],
        "env.FRAMEWORK": point["framework"],
        "env.TP": point["tp"],
        "env.PP_SIZE": point["pp"],
        "env.DCP_SIZE": point["dcp-size"],
        "env.PCP_SIZE": point["pcp-size"],
        "env.EP_SIZE": point["ep"],
        "env.DP_ATTENTION": "true" if point["dp-attn"] else "false",
        "env.DISAGG": "false",
        "env.SPEC_DECODING": point["spec-decoding"],
        "env.CONC": point["conc"],
        "runner.name": node,
    }
    template = line.split("RESULT_FILENAME_BASE:", 1)[1].strip()
    base = re.sub(r"\$\{\{\s*([\w.]+)\s*\}\}", lambda m: str(env[m.group(1)]), template)
    return f"{base}_recipe-{fingerprint[:16]}" if fingerprint else base


def _real_run_artifacts(points: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[int, str]]:
    nodes = yaml.safe_load(fixture_text("runners.yaml"))["labels"]["mi355x"]
    node_cycle = itertools.cycle(reversed(nodes))
    arts: list[dict[str, Any]] = []
    wanted: dict[int, str] = {}
    ids = itertools.count(9000)
    for i, point in enumerate(points):
        fingerprint = "0123456789abcdef0123456789abcdef" if i % 2 else ""
        rf = _template_result_filename(point, next(node_cycle), fingerprint)
        for prefix in ("server_logs_", "gpu_metrics_", "power_audit_", "bmk_", f"eval_{point['exp-name']}_"):
            arts.append({"id": next(ids), "name": prefix + rf, "expired": False, "size_in_bytes": 900})
        wanted[int(point["conc"])] = "bmk_" + rf
    for name in ("changelog-metadata", "run-stats", "results_bmk", "results_all"):
        arts.append({"id": next(ids), "name": name, "expired": False, "size_in_bytes": 10})
    return arts, wanted


def _sweep_points() -> list[dict[str, Any]]:
    master = parse_master(fixture_text("amd-master.b4cec7f.yaml"))
    return [p.to_json() for p in expand_points(master, KEY)]


def test_every_conc_of_a_sweep_gets_its_own_bmk_artifact() -> None:
    points = _sweep_points()
    assert len(points) >= 8  # conc 1..512 of the bump commit
    arts, wanted = _real_run_artifacts(points)
    for point in points:
        got = select_bmk_artifact(arts, point)
        assert got.found, got.reason
        assert got.artifact is not None and got.artifact["name"] == wanted[int(point["conc"])]
        assert got.name is not None and got.name.node.startswith("mi355x-amds_")
        assert got.name.member == f"agg_{got.name.result_filename}.json"
        # every other upload of the run is ignored, including the same point's logs and evals
        assert len(got.ignored) == len(arts) - 1


def test_node_restriction_and_missing_point() -> None:
    points = _sweep_points()
    arts, _wanted = _real_run_artifacts(points[:2])
    got = select_bmk_artifact(arts, points[0], nodes=["mi355x-amds_99"])
    assert not got.found and "no artifact bmk_" in got.reason and "_<node>" in got.reason
    missing = select_bmk_artifact(arts, points[5])
    assert not missing.found and f"conc{points[5]['conc']}_<node>" in missing.reason


def test_stem_does_not_match_a_longer_conc_or_agentic_names() -> None:
    point = _sweep_points()[0] | {"conc": 6}
    stem = result_stem(point)
    assert parse_bmk_name(f"bmk_{stem}4_mi355x-amds_01", stem) is None  # conc 64 is not conc 6
    assert parse_bmk_name(f"bmk_agentic_{stem}_mi355x-amds_01", stem) is None
    assert parse_bmk_name(f"bmk_{stem}_", stem) is None
    parsed = parse_bmk_name(f"bmk_{stem}_mi355x-amds_01_recipe-fedcba9876543210", stem)
    assert parsed is not None and (parsed.node, parsed.recipe) == ("mi355x-amds_01", "fedcba9876543210")


def test_newest_upload_of_a_point_wins_and_expired_is_a_reason() -> None:
    point = _sweep_points()[0]
    old = {"id": 1, "name": bmk_artifact_name(point, "mi355x-amds_00"), "created_at": "2026-01-01T00:00:00Z"}
    new = {"id": 2, "name": bmk_artifact_name(point, "mi355x-amds_04"), "created_at": "2026-01-01T01:00:00Z"}
    got = select_bmk_artifact([new, old], point)
    assert got.artifact is new
    gone = select_bmk_artifact([{**old, "expired": True}], point)
    assert not gone.found and "expired" in gone.reason
