"""The fleet page: each runner, its labels, the job it holds and why; the queue in effective-priority
order with the score's parts; from the state the controller's handler stores
(app/flows/scheduler/runner_hook.py),
driven here by workflow_job deliveries against a fake runners API."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.flows.scheduler.runner_hook import facts_from_json, facts_to_json, handle
from app.models.runnerctl import RunnerController
from tests.flows.test_runnerctl import FakeRunners, hook
from tests.web.test_dashboard import Seeded, dash  # noqa: F401  (the fixture)

REPO = "SemiAnalysisAI/InferenceX"
T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)


def labels(score: str, n: int) -> list[str]:
    return ["self-hosted", "mi355x", f"ci-job-{score}-{n:032x}", "ci-attempt-1"]


def test_the_fleet_page_shows_runners_their_jobs_and_the_queue_in_priority_order(
    dash: tuple[TestClient, Session, Seeded],  # noqa: F811  (the fixture imported above)
) -> None:
    client, session, _ = dash
    gw = FakeRunners(
        (1, "mi355x-amds_00", ["self-hosted", "mi355x", "<b>odd</b>"]),
        (2, "mi355x-amds_01", ["self-hosted", "mi355x"]),
    )
    gw.r[2]["busy"] = True
    for i, (score, age) in enumerate([("1.000", 30), ("3.000", 1), ("2.000", 5)], start=1):
        payload: dict[str, Any] = {
            **hook("queued", 100 + i, labels(score, i)),
            "repository": {"full_name": REPO},
        }
        handle(session, gw, REPO, payload, T0 - timedelta(minutes=age))
    handle(session, gw, REPO, {**hook("queued", 200, ["mi355x"]), "repository": {"full_name": REPO}}, T0)
    session.commit()
    row = session.get(RunnerController, REPO)
    assert row is not None and facts_to_json(facts_from_json(row.facts)) == row.facts, "the facts round-trip"
    html = client.get("/fleet").text
    assert "mi355x-amds_00" in html and "mi355x-amds_01" in html
    assert "&lt;b&gt;odd&lt;/b&gt;" in html and "<b>odd</b>" not in html, "labels are rendered inert"
    queue = html[html.index("fleet-queue") :]
    order = [int(x) for x in re.findall(r"<tr><td>(\d+)</td>", queue)]
    assert order[0] == 102, "score 3.000 first"
    assert set(order) == {101, 102, 103}
    assert "effective priority" in html, "each decision says why"
    assert "this job cannot be prioritised: re-dispatch it" in html
    runners = html[html.index("fleet-runners") : html.index("fleet-queue")]
    assert f"ci-job-3.000-{2:032x}" in runners, "the runner given the top job shows its label"
    top = queue[queue.index("<tr><td>102</td>") :].split("</tr>", 1)[0]
    assert re.search(r"<td>mi355x-amds_0[01]</td>", top), "the queue's runner column names the runner"
