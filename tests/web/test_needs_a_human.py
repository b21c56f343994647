"""The overview's "Needs a human" and ``/metrics`` raise what only a person can fix: a pinned
image deleted from the registry, a registry the bot cannot read, a dependency that does not
exist, a job the runner controller cannot prioritise (app.store.attention)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.models.runnerctl import RunnerController
from app.models.tracking import Dependency, DepState, Watch, WatchState
from app.settings import reset_settings_cache

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _watch(session: Session, pr: int, **fields: Any) -> Watch:
    w = Watch(repo="o/r", pr_number=pr, config_key=f"key-{pr}", source="body", **fields)
    session.add(w)
    session.flush()
    return w


def _seed(session: Session) -> None:
    _watch(session, 1, pinned_image="vllm/vllm-openai-rocm:gone", pinned_missing_since=NOW)
    _watch(
        session,
        2,
        image_repo="vllm/vllm-openai-rocm",
        registry_error="connect: refused",
        registry_error_since=NOW,
    )
    w3 = _watch(session, 3, state=WatchState.BLOCKED)
    session.add(
        Dependency(
            watch_id=w3.id,
            dep_repo="vllm-project/vllm",
            dep_number=99999,
            source="body",
            state=DepState.MISSING,
        )
    )
    # Finished or dropped: nobody needs to act.
    _watch(session, 4, state=WatchState.CLOSED, pinned_missing_since=NOW, registry_error="x")
    session.add(
        Dependency(
            watch_id=w3.id,
            dep_repo="vllm-project/vllm",
            dep_number=1,
            source="body",
            state=DepState.MISSING,
            dropped=True,
        )
    )
    notice = {
        "job": 77,
        "run": 5,
        "text": "this job cannot be prioritised: re-dispatch it",
        "why": "no ci-job- label",
    }
    session.add(
        RunnerController(
            repo="o/r", facts={}, view={"runners": [], "queue": [], "notices": [notice]}, updated_at=NOW
        )
    )
    session.commit()


@pytest.fixture
def client(db_session: Session, settings_env: pytest.MonkeyPatch) -> Any:
    settings_env.setenv("SWEEPBOT_GITHUB_API_URL", "http://127.0.0.1:9/api/v3")
    settings_env.setenv("SWEEPBOT_BROKER_URL", "redis://127.0.0.1:1/0")
    reset_settings_cache()
    _seed(db_session)
    from app.web.main import create_app

    with TestClient(create_app()) as c:
        yield c


def test_overview_lists_each_problem_once_with_what_to_do(client: TestClient) -> None:
    failures = client.get("/api/overview").json()["failures"]
    by_kind: dict[str, list[str]] = {}
    for f in failures:
        by_kind.setdefault(f["kind"], []).append(f["summary"])
    assert len(by_kind["pinned_deleted"]) == 1
    assert "vllm/vllm-openai-rocm:gone was deleted from the registry" in by_kind["pinned_deleted"][0]
    assert len(by_kind["registry"]) == 1 and "cannot be read" in by_kind["registry"][0]
    assert "connect: refused" in by_kind["registry"][0]
    (dep,) = by_kind["dependency"]
    assert "vllm-project/vllm#99999, which does not exist" in dep and "/depends-on drop" in dep
    (job,) = by_kind["runner_job"]
    assert "job 77 (run 5)" in job and "re-dispatch it" in job and "no ci-job- label" in job


def _gauge(text: str, kind: str) -> float:
    line = next(x for x in text.splitlines() if x.startswith(f'sweepbot_needs_a_human{{kind="{kind}"}}'))
    return float(line.rpartition(" ")[2])


def test_metrics_count_the_same_problems(client: TestClient) -> None:
    text = client.get("/metrics").text
    assert _gauge(text, "pinned_deleted") == 1.0
    assert _gauge(text, "registry_unreachable") == 1.0
    assert _gauge(text, "dependency_missing") == 1.0
    assert _gauge(text, "cannot_prioritise") == 1.0
