"""The dashboard as an operator reads it (issue 29): Results shows the sweep the PR report
discusses, not the newest nightly canary; sweeps link to their PR, report comment and results;
the fleet's runner column names the runner; times carry their zone; the audit log can hide the
canaries' plumbing and group by sweep; the pages fit a phone."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.models.results import ReportState
from app.models.sweeps import CANARY_REASON, SweepState
from app.store.audit import record
from app.web.dashboard.data.fleet import named_runners
from tests.browser.seed import KEY, NEW_IMAGE, OLD_IMAGE, REPO, Seeded, _jobs, _store_results, _sweep
from tests.web.test_dashboard import dash  # noqa: F401  (the fixture)

Dash = tuple[TestClient, Session, Seeded]
CANARY_IMAGE = "vllm/vllm-openai-rocm:nightly-" + "9" * 40
BASE = "http://127.0.0.1:9"  # the fixture's SWEEPBOT_GITHUB_API_URL without /api/v3


def _canary(session: Session) -> int:
    """A nightly canary of the key, measured after every PR sweep (its results are the newest)."""
    sweep = _sweep(session, image=CANARY_IMAGE, state=SweepState.DONE, created=datetime.now(UTC), pr=0)
    sweep.reason = CANARY_REASON
    _store_results(
        session,
        CANARY_IMAGE,
        sweep.id,
        seed=3,
        job_ids=_jobs(session, sweep, ["succeeded"] * 10, sweep.created_at),
    )
    session.commit()
    return sweep.id


def _report(session: Session, sweep_id: int, comment_id: int | None = 555) -> None:
    session.add(
        ReportState(repo=REPO, pr_number=12, config_key=KEY, sweep_id=sweep_id, comment_id=comment_id)
    )
    session.commit()


def test_results_show_the_sweep_the_report_discusses_not_the_newest_canary(dash: Dash) -> None:  # noqa: F811
    client, session, s = dash
    _canary(session)
    res = client.get(f"/api/results/{KEY}").json()
    assert res["image"] == NEW_IMAGE and res["sweep_id"] == s.active_sweep, "a canary is not the default"
    _report(session, s.done_sweep)  # the PR's report discusses the older sweep
    res = client.get(f"/api/results/{KEY}").json()
    assert (res["image"], res["sweep_id"], res["sweep_pr"]) == (OLD_IMAGE, s.done_sweep, f"{REPO}#12")
    page = client.get(f"/results/{KEY}").text
    assert f'href="/sweeps/{s.done_sweep}"' in page and f"the report on {REPO}#12 discusses" in page
    asked = client.get(f"/api/results/{KEY}", params={"image": CANARY_IMAGE}).json()
    assert asked["image"] == CANARY_IMAGE and asked["sweep_id"] is None, "an image asked for is shown"


def test_sweeps_link_to_their_pr_report_comment_and_results(dash: Dash) -> None:  # noqa: F811
    client, session, s = dash
    canary = _canary(session)
    _report(session, s.active_sweep, comment_id=555)
    items = {i["id"]: i for i in client.get("/api/sweeps").json()["items"]}
    pr = f"{BASE}/{REPO}/pull/12"
    assert items[s.active_sweep]["pr_url"] == pr
    assert items[s.active_sweep]["report_url"] == f"{pr}#issuecomment-555"
    assert items[s.failed_sweep]["report_url"] is None, "PR 14 has no report comment"
    assert items[canary]["pr_url"] is None and items[canary]["report_url"] is None
    assert (
        items[canary]["results_url"]
        == f"/results/{KEY}?image={CANARY_IMAGE.replace('/', '%2F').replace(':', '%3A')}"
    )
    page = client.get("/sweeps").text
    assert f'href="{pr}#issuecomment-555"' in page and f'href="{pr}"' in page
    detail = client.get(f"/sweeps/{s.active_sweep}").text
    assert "report comment" in detail and items[s.active_sweep]["results_url"].replace("&", "&amp;") in detail


def test_the_fleet_queue_names_the_runner_it_is_placed_on() -> None:
    queue: list[dict[str, Any]] = [
        {"job": 1, "runner": 11},
        {"job": 2, "runner": None},
        {"job": 3, "runner": 12},
    ]
    named = named_runners(queue, [{"id": 11, "name": "mi355x-amds_00"}])
    assert [q["runner_name"] for q in named] == ["mi355x-amds_00", "", "#12"]


def test_times_say_their_zone(dash: Dash) -> None:  # noqa: F811
    client, _session, _s = dash
    for path in ("/sweeps", "/audit", "/deliveries"):
        page = client.get(path).text
        assert " UTC</time>" in page, path


def test_the_audit_log_hides_canary_plumbing_and_groups_by_sweep(dash: Dash) -> None:  # noqa: F811
    client, session, s = dash
    record(
        session, actor="sweepbot", action="github.git/create-ref", target=f"{REPO}:heads/sweepbot/canary/k/n1"
    )
    record(session, actor="sweepbot", action="sweep.create", target=f"{REPO}#0", detail={"sweep": 99})
    record(session, actor="sweepbot", action="github.git/create-blob", target=REPO)
    record(
        session, actor="sweepbot", action="sweep.label", target=f"{REPO}#12", detail={"sweep": s.active_sweep}
    )
    record(session, actor="sweepbot", action="canary.queue", target=f"{REPO}:{KEY}", detail={"sweep": 99})
    record(session, actor="alice", action="dashboard.pause", target=None)
    session.commit()
    kept = {a["action"] for a in client.get("/api/audit", params={"hide_plumbing": True}).json()["items"]}
    assert {"sweep.label", "canary.queue", "dashboard.pause", "github.git/update-ref"} <= kept
    assert not kept & {"github.git/create-ref", "github.git/create-blob", "sweep.create"}
    every = {a["action"] for a in client.get("/api/audit").json()["items"]}
    assert {"github.git/create-ref", "github.git/create-blob", "sweep.create"} <= every
    page = client.get("/audit", params={"plumbing": "hide"}).text
    assert "sweepbot/canary/" not in page and "sweep.label" in page and 'value="hide" checked' in page

    grouped = client.get("/audit", params={"group": "sweep"}).text
    heads = [grouped.index(f'<a href="/sweeps/{n}">Sweep {n}</a>') for n in (s.active_sweep, 99)]
    assert heads[1] < heads[0], "groups in order of their newest entry (the canary's queueing)"
    assert grouped.index("Not about a sweep") < heads[1], "the newest entry is about no sweep"
    assert grouped.index("sweep.label") > heads[0], "an entry sits under its sweep's heading"
    assert "Not about a sweep" not in client.get("/audit").text, "not grouped unless asked"


def test_the_pages_fit_a_phone() -> None:
    base = Path("app/web/dashboard/templates/base.html").read_text()
    css = Path("app/web/dashboard/static/dashboard.css").read_text()
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in base
    phone = css[css.index("@media (max-width: 720px)") :]
    assert "table { display: block; max-width: 100%; overflow-x: auto;" in phone
