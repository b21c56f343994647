"""`sweepbot deps status [--json]` through typer's CliRunner on `app.cli.cli`, on a migrated SQLite db."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app.cli import cli
from app.models.tracking import Dependency, DepState, Watch, WatchState

REPO = "SemiAnalysisAI/InferenceX"
KEY = "minimaxm3-fp4-mi355x-vllm"
OLD = "vllm/vllm-openai-rocm:nightly-4559c43a9526597c00cbcc4f59979496500268d1"
MERGE = "0a2fcab125a19d6621436c09df7522faa79983aa"
NIGHTLY = "nightly-80ce5eeb3ea6a9baac3a419be61e9f4e5fe61b8b"

runner = CliRunner()


def _seed(session: Session) -> None:
    waiting = Watch(
        repo=REPO,
        pr_number=2104,
        config_key=KEY,
        source="body",
        state=WatchState.BLOCKED,
        image_repo="vllm/vllm-openai-rocm",
        pinned_image=OLD,
        pinned_missing_since=datetime.now(UTC),
        chosen_tag=NIGHTLY,
        first_containing_tag=NIGHTLY,
        decision="blocked",
        reason="vllm-project/vllm#47270 closed without merging",
    )
    config_watch = Watch(
        repo=REPO, pr_number=0, config_key="dsr1-fp8-mi355x-vllm", source="config", state=WatchState.WAITING
    )
    session.add_all([waiting, config_watch])
    session.flush()
    session.add_all(
        [
            Dependency(
                watch_id=waiting.id,
                dep_repo="vllm-project/vllm",
                dep_number=47269,
                source="body",
                state=DepState.MERGED,
                merge_sha=MERGE,
                contained_in=NIGHTLY,
            ),
            Dependency(
                watch_id=waiting.id,
                dep_repo="vllm-project/vllm",
                dep_number=47270,
                source="body",
                state=DepState.CLOSED,
                dropped=True,
                dropped_by="bob-maintainer",
            ),
            Dependency(
                watch_id=config_watch.id,
                dep_repo="vllm-project/vllm",
                dep_number=47301,
                source="config",
                state=DepState.OPEN,
            ),
        ]
    )
    session.commit()


def test_deps_status_json(db_session: Session) -> None:
    _seed(db_session)
    result = runner.invoke(cli, ["deps", "status", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    by_key = {r["config_key"]: r for r in rows}
    assert set(by_key) == {KEY, "dsr1-fp8-mi355x-vllm"}
    blocked = by_key[KEY]
    assert (blocked["pr"], blocked["state"], blocked["pinned_image"]) == (2104, "blocked", OLD)
    assert blocked["pinned_deleted"] is True and blocked["chosen_nightly"] == NIGHTLY
    deps = {d["ref"]: d for d in blocked["dependencies"]}
    assert deps["vllm-project/vllm#47269"] == {
        "ref": "vllm-project/vllm#47269",
        "state": "merged",
        "merge_sha": MERGE,
        "dropped": False,
        "contained_in": NIGHTLY,
        "source": "body",
    }
    assert deps["vllm-project/vllm#47270"]["dropped"] is True
    config = by_key["dsr1-fp8-mi355x-vllm"]
    assert config["pr"] is None and config["chosen_nightly"] is None
    assert [d["state"] for d in config["dependencies"]] == ["open"]


def test_deps_status_table(db_session: Session) -> None:
    _seed(db_session)
    result = runner.invoke(cli, ["deps", "status"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"{REPO}#2104  {KEY}  [blocked]" in out
    assert f"pinned:  {OLD}  (DELETED from the registry)" in out
    assert f"nightly: {NIGHTLY}" in out
    assert f"- vllm-project/vllm#47269: merged @ {MERGE[:7]}" in out
    assert "- vllm-project/vllm#47270: closed  (dropped)" in out
    assert "next:    vllm-project/vllm#47270 closed without merging" in out
    assert f"{REPO} (bot config)  dsr1-fp8-mi355x-vllm  [waiting]" in out
    assert "nightly: none yet" in out


def test_deps_status_empty_db(db_session: Session) -> None:
    result = runner.invoke(cli, ["deps", "status"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "no watches"
    result = runner.invoke(cli, ["deps", "status", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout) == []
