"""Dashboard pages, JSON API shapes, and the action rules: identity, CSRF, audit."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models import AuditEntry
from app.models.sweeps import JobState, RunnerLabel, Sweep, SweepJob, SweepState
from tests.browser.seed import CONCS, KEY, NEW_IMAGE, Seeded, seed

TOKEN = "op-token-for-tests"


@pytest.fixture
def dash(
    db_session: Session, settings_env: pytest.MonkeyPatch
) -> Iterator[tuple[TestClient, Session, Seeded]]:
    settings_env.setenv("SWEEPBOT_OPERATOR_TOKENS", TOKEN)
    settings_env.setenv("SWEEPBOT_OPERATOR_BASIC", "alice:s3cret")
    settings_env.setenv("SWEEPBOT_RUNNER_CAPACITY", "mi355x=9")
    # Nothing may reach github.com: a closed loopback port makes any GitHub call fail fast.
    settings_env.setenv("SWEEPBOT_GITHUB_API_URL", "http://127.0.0.1:9/api/v3")
    from app.settings import reset_settings_cache

    reset_settings_cache()
    seeded = seed(db_session)
    from app.web.main import create_app

    with TestClient(create_app()) as client:
        yield client, db_session, seeded


def _csrf(client: TestClient) -> str:
    return str(client.get("/api/me").json()["csrf_token"])


def _sign_in(client: TestClient) -> str:
    csrf = _csrf(client)
    resp = client.post(
        "/login", data={"token": TOKEN, "csrf_token": csrf, "next": "/sweeps"}, follow_redirects=False
    )
    assert resp.status_code == 303, resp.text
    assert resp.headers["location"] == "/sweeps"
    return _csrf(client)  # sign-in issues a fresh token


def _audit(session: Session, action: str) -> list[AuditEntry]:
    session.expire_all()
    return list(
        session.scalars(select(AuditEntry).where(AuditEntry.action == action).order_by(AuditEntry.id))
    )


# ---------------------------------------------------------------------- pages


def test_every_page_renders(dash: tuple[TestClient, Session, Seeded]) -> None:
    client, _session, s = dash
    pages = {
        "/": ["Runners per label", "mi355x", "Needs a human", "KeyError"],
        "/watches": ["vllm-project/vllm#47269", "without merge", "Nightly timelines", "deleted", "diff"],
        "/sweeps": [KEY, "progress", "6/10"],
        f"/sweeps/{s.active_sweep}": ["run 9", "running", "queued"],
        "/results": [KEY],
        f"/results/{KEY}": [
            "chart-tpot",
            "chart-tput",
            "chart-images",
            "atom-minimaxm3-mxfp4-mi355x-tp4-8k1k",
        ],
        "/deliveries": ["d-0004-broken", "workflow_job"],
        f"/deliveries/{s.delivery_failed}": ["Stored payload", "SemiAnalysisAI/InferenceX", "KeyError"],
        "/audit": ["bob-maintainer", "command.depends-on"],
        "/login": ["Operator token", "Password"],
    }
    for path, needles in pages.items():
        resp = client.get(path)
        assert resp.status_code == 200, (path, resp.text[:300])
        assert resp.headers["content-type"].startswith("text/html")
        for needle in needles:
            assert needle in resp.text, (path, needle)
        # Anonymous viewers see no action forms.
        assert 'action="/api/' not in resp.text, path


def test_pages_paginate_and_filter(dash: tuple[TestClient, Session, Seeded]) -> None:
    client, _session, s = dash
    body = client.get("/api/sweeps", params={"per_page": 2}).json()
    assert [i["id"] for i in body["items"]] == [s.active_sweep, s.failed_sweep] and body["has_next"] is True
    body = client.get("/api/sweeps", params={"per_page": 2, "page": 2}).json()
    assert [i["id"] for i in body["items"]] == [s.done_sweep] and body["has_next"] is False
    assert [i["id"] for i in client.get("/api/sweeps", params={"pr": 14}).json()["items"]] == [s.failed_sweep]
    assert [i["id"] for i in client.get("/api/sweeps", params={"state": "active"}).json()["items"]] == [
        s.active_sweep
    ]
    assert client.get("/api/sweeps", params={"config_key": "nope"}).json()["items"] == []
    found = client.get("/api/deliveries", params={"q": "d-0004"}).json()["items"]
    assert [d["id"] for d in found] == ["d-0004-broken"]
    assert {
        d["status"] for d in client.get("/api/deliveries", params={"status": "done"}).json()["items"]
    } == {"done"}
    page = client.get("/sweeps", params={"state": "done"})
    assert page.status_code == 200 and f'href="/sweeps/{s.failed_sweep}"' in page.text
    assert f'href="/sweeps/{s.active_sweep}"' not in page.text


def test_api_shapes(dash: tuple[TestClient, Session, Seeded]) -> None:
    client, _session, s = dash
    ov = client.get("/api/overview").json()
    assert set(ov["health"]) >= {"database", "broker", "workers", "beat"} and ov["health"]["database"]["ok"]
    label = next(lab for lab in ov["labels"] if lab["label"] == "mi355x")
    assert (label["capacity"], label["busy"], label["free"], label["queued"]) == (9, 2, 7, 2)
    kinds = {f["kind"] for f in ov["failures"]}
    assert {"delivery", "job"} <= kinds
    assert ov["rate_limit"]["note"] == "no GitHub credentials configured"

    detail = client.get(f"/api/sweeps/{s.active_sweep}").json()
    assert detail["progress"] == {
        "total": 10,
        "finished": 6,
        "percent": 60.0,
        "by_state": {"succeeded": 6, "running": 2, "queued": 2},
    }
    assert [j["conc"] for j in detail["jobs"]] == CONCS
    assert detail["jobs"][6]["run_url"].endswith(f"/runs/{9000 + s.active_sweep * 100 + 64}")

    res = client.get(f"/api/results/{KEY}").json()
    assert res["image"] == NEW_IMAGE and res["seq"] == "8k1k"
    assert [p["conc"] for p in res["points"]] == CONCS
    assert [p["conc"] for p in res["reference_points"]] == [4, 8, 16, 32, 64]
    gap = {g["conc"]: g for g in res["gap"]}
    assert gap[32]["reference"] == pytest.approx(16.74)
    assert gap[32]["gap_pct"] == pytest.approx((gap[32]["recipe"] - 16.74) / 16.74 * 100, abs=0.01)
    assert gap[512]["verdict"] == "no reference at this conc"
    assert {p["image"] for p in res["images"]} == {NEW_IMAGE, "vllm/vllm-openai-rocm:nightly-" + "2" * 40}

    w = client.get("/api/watches").json()
    first = w["watches"]["items"]
    by_key = {item["config_key"]: item for item in first}
    bumped = by_key[KEY]
    assert bumped["bump"]["diff_url"].endswith("/commit/" + "c" * 40) and bumped["why_no_bump"] is None
    deps = {d["ref"]: d for d in bumped["dependencies"]}
    assert deps["vllm-project/vllm#47270"]["state"] == "closed" and deps["vllm-project/vllm#47270"]["dropped"]
    assert "vllm-project/vllm#47301 (open)" in by_key["dsr1-fp8-mi355x-vllm"]["why_no_bump"]
    tags = w["timelines"][0]["tags"]
    assert tags[0]["deleted"] is True and sum(t["pinned"] for t in tags) == 2

    audit = client.get("/api/audit", params={"actor": "bob-maintainer"}).json()["items"]
    assert [a["action"] for a in audit] == ["command.depends-on"]
    payload = client.get(f"/api/deliveries/{s.delivery_done}").json()["payload"]
    assert payload["repository"]["full_name"] == "SemiAnalysisAI/InferenceX"
    assert client.get("/api/deliveries/nope").status_code == 404
    assert client.get("/api/sweeps/999999").status_code == 404


def test_openapi_documents_the_api(dash: tuple[TestClient, Session, Seeded]) -> None:
    client, _session, _s = dash
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    # Every read answers a named model (not an untyped object), so clients can generate from it.
    models = {
        "/api/overview": "Overview",
        "/api/watches": "WatchesOut",
        "/api/sweeps": "Page_SweepOut_",
        "/api/sweeps/{sweep_id}": "SweepDetail",
        "/api/results/{config_key}": "ResultsKeyOut",
        "/api/deliveries": "Page_DeliveryOut_",
        "/api/deliveries/{delivery_id}": "DeliveryDetail",
        "/api/audit": "Page_AuditOut_",
    }
    for path, model in models.items():
        schema = paths[path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert schema == {"$ref": f"#/components/schemas/{model}"}, path
        assert model in spec["components"]["schemas"], model
    for path in (
        "/api/sweeps/{sweep_id}/cancel",
        "/api/sweeps/{sweep_id}/retry",
        "/api/jobs/{job_id}/retry",
        "/api/jobs/{job_id}/cancel",
        "/api/labels/{label}/pause",
        "/api/labels/{label}/resume",
        "/api/watches/{watch_id}/check",
        "/api/deliveries/{delivery_id}/replay",
    ):
        post = paths[path]["post"]
        assert {"200", "401", "403"} <= set(post["responses"]), path
    assert "/" not in paths and "/sweeps" not in paths  # HTML pages stay out of the API schema
    assert "SweepDetail" in spec["components"]["schemas"]


# ---------------------------------------------------------------------- actions: identity and CSRF


def test_action_refused_without_identity(dash: tuple[TestClient, Session, Seeded]) -> None:
    client, session, s = dash
    resp = client.post(f"/api/sweeps/{s.active_sweep}/cancel")
    assert resp.status_code == 401
    assert resp.headers.get("www-authenticate") == "Bearer"
    assert "sign in" in resp.json()["detail"]
    assert (
        client.post(
            f"/api/sweeps/{s.active_sweep}/cancel", headers={"Authorization": "Bearer wrong"}
        ).status_code
        == 401
    )
    bad_basic = base64.b64encode(b"alice:nope").decode()
    resp = client.post(
        f"/api/sweeps/{s.active_sweep}/cancel", headers={"Authorization": f"Basic {bad_basic}"}
    )
    assert resp.status_code == 401 and "www-authenticate" not in resp.headers  # never a Basic challenge
    session.expire_all()
    assert session.get_one(Sweep, s.active_sweep).state == SweepState.ACTIVE
    assert _audit(session, "dashboard.cancel_sweep") == []


def test_session_action_needs_csrf_token(dash: tuple[TestClient, Session, Seeded]) -> None:
    client, session, s = dash
    csrf = _sign_in(client)
    resp = client.post(f"/api/sweeps/{s.active_sweep}/cancel")
    assert resp.status_code == 403 and "CSRF" in resp.json()["detail"]
    resp = client.post(f"/api/sweeps/{s.active_sweep}/cancel", headers={"X-CSRF-Token": "forged"})
    assert resp.status_code == 403
    resp = client.post(
        f"/api/sweeps/{s.active_sweep}/cancel", headers={"X-CSRF-Token": csrf, "Sec-Fetch-Site": "cross-site"}
    )
    assert resp.status_code == 403
    session.expire_all()
    assert session.get_one(Sweep, s.active_sweep).state == SweepState.ACTIVE
    refused = _audit(session, "dashboard.refused")
    assert len(refused) == 3 and all(r.outcome == "refused" for r in refused)
    assert refused[0].actor.startswith("operator:token-")

    resp = client.post(f"/api/sweeps/{s.active_sweep}/cancel", headers={"X-CSRF-Token": csrf})
    assert resp.status_code == 200, resp.text
    assert resp.json()["ok"] is True
    session.expire_all()
    sweep = session.get(Sweep, s.active_sweep)
    assert sweep is not None and sweep.state == SweepState.CANCELLED
    states = set(session.scalars(select(SweepJob.state).where(SweepJob.sweep_id == s.active_sweep)))
    assert states == {JobState.SUCCEEDED, JobState.CANCELLED}
    entry = _audit(session, "dashboard.cancel_sweep")
    assert len(entry) == 1 and entry[0].outcome == "ok" and entry[0].actor == refused[0].actor
    assert entry[0].detail and entry[0].detail["via"] == "session"
    assert _audit(session, "sweep.cancel")  # the scheduler's own record of the effect


def test_form_post_with_csrf_field_redirects_with_flash(dash: tuple[TestClient, Session, Seeded]) -> None:
    client, session, s = dash
    csrf = _sign_in(client)
    resp = client.post(
        f"/api/jobs/{s.failed_job}/retry",
        data={"csrf_token": csrf, "next": "//evil.example/x"},
        follow_redirects=False,
    )
    assert (
        resp.status_code == 303 and resp.headers["location"] == f"/sweeps/{s.failed_sweep}"
    )  # no open redirect
    page = client.get(resp.headers["location"])
    assert f"job {s.failed_job} retried" in page.text
    session.expire_all()
    job = session.get(SweepJob, s.failed_job)
    assert job is not None and job.state == JobState.QUEUED
    # htmx: the CSRF header and a small HTML fragment in answer
    resp = client.post(
        f"/api/jobs/{s.failed_job}/retry", headers={"X-CSRF-Token": csrf, "HX-Request": "true"}
    )
    assert (
        resp.status_code == 200
        and 'class="flash err"' in resp.text
        and "only failed or cancelled" in resp.text
    )
    assert [e.outcome for e in _audit(session, "dashboard.retry_job")] == ["ok", "refused"]


def test_bearer_and_basic_operators_act_without_csrf(dash: tuple[TestClient, Session, Seeded]) -> None:
    client, session, s = dash
    resp = client.post("/api/labels/mi355x/pause", headers={"Authorization": f"Bearer {TOKEN}"})
    assert resp.status_code == 200 and resp.json()["message"] == "dispatch to mi355x paused"
    session.expire_all()
    assert session.get_one(RunnerLabel, "mi355x").paused is True
    basic = base64.b64encode(b"alice:s3cret").decode()
    resp = client.post("/api/labels/mi355x/resume", headers={"Authorization": f"Basic {basic}"})
    assert resp.status_code == 200
    session.expire_all()
    assert session.get_one(RunnerLabel, "mi355x").paused is False
    actors = [
        e.actor for e in _audit(session, "dashboard.pause_label") + _audit(session, "dashboard.resume_label")
    ]
    assert actors[0].startswith("operator:token-") and actors[1] == "operator:alice"
    resp = client.post(f"/api/sweeps/{s.failed_sweep}/retry", headers={"Authorization": f"Bearer {TOKEN}"})
    assert resp.status_code == 200 and resp.json()["ok"]
    assert (
        client.post("/api/sweeps/424242/cancel", headers={"Authorization": f"Bearer {TOKEN}"}).status_code
        == 404
    )
    assert (
        client.post("/api/jobs/424242/retry", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 404
    )


def test_replay_and_watch_check(dash: tuple[TestClient, Session, Seeded]) -> None:
    client, session, s = dash
    auth = {"Authorization": f"Bearer {TOKEN}"}
    resp = client.post(f"/api/deliveries/{s.delivery_failed}/replay", headers=auth)
    assert resp.status_code == 200, resp.text
    session.expire_all()
    from app.models import Delivery

    d = session.get(Delivery, s.delivery_failed)
    assert d is not None and d.status == "received" and d.error is None
    assert _audit(session, "dashboard.replay_delivery")[0].outcome == "ok"
    assert client.post("/api/deliveries/nope/replay", headers=auth).status_code == 404
    resp = client.post(f"/api/watches/{s.watch}/check", headers=auth)
    assert resp.status_code in (200, 409)  # 409 only when the broker is unreachable, which it says
    assert resp.json()["target"] == f"watch {s.watch}"
    assert _audit(session, "dashboard.check_watch")
    assert client.post("/api/watches/999/check", headers=auth).status_code == 404


def test_operator_sees_action_forms_with_csrf(dash: tuple[TestClient, Session, Seeded]) -> None:
    client, _session, s = dash
    csrf = _sign_in(client)
    page = client.get(f"/sweeps/{s.active_sweep}").text
    assert f'action="/api/sweeps/{s.active_sweep}/cancel"' in page
    assert f'name="csrf_token" value="{csrf}"' in page
    assert 'hx-headers=\'{"X-CSRF-Token": "' + csrf + "\"}'" in page
    cookie = client.cookies.get("sweepbot_session")
    assert cookie and TOKEN not in cookie  # the cookie holds the name, never the token
    resp = client.post("/logout", data={"csrf_token": csrf}, follow_redirects=False)
    assert resp.status_code == 303
    assert client.get("/api/me").json()["identity"] is None


def test_login_form_refuses_bad_credentials_and_missing_csrf(
    dash: tuple[TestClient, Session, Seeded],
) -> None:
    client, _session, _s = dash
    assert client.post("/login", data={"token": TOKEN}).status_code == 403  # login CSRF
    resp = client.post("/login", data={"token": "nope", "csrf_token": _csrf(client)})
    assert resp.status_code == 200 and "Wrong token" in resp.text
    resp = client.post(
        "/login",
        data={"username": "alice", "password": "s3cret", "csrf_token": _csrf(client)},
        follow_redirects=False,
    )
    assert resp.status_code == 303
    assert client.get("/api/me").json()["identity"]["actor"] == "operator:alice"


def test_private_dashboard_needs_sign_in(
    dash: tuple[TestClient, Session, Seeded], settings_env: pytest.MonkeyPatch
) -> None:
    client, _session, _s = dash
    settings_env.setenv("SWEEPBOT_DASHBOARD_PUBLIC", "false")
    from app.settings import reset_settings_cache

    reset_settings_cache()
    assert client.get("/api/sweeps").status_code == 401
    resp = client.get("/sweeps?state=done", follow_redirects=False)
    assert resp.status_code == 303 and resp.headers["location"] == "/login?next=%2Fsweeps%3Fstate%3Ddone"
    assert client.get("/login").status_code == 200
    assert client.get("/api/sweeps", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    _sign_in(client)
    assert client.get("/sweeps").status_code == 200


def test_tampered_session_cookie_is_ignored(dash: tuple[TestClient, Session, Seeded]) -> None:
    client, _session, s = dash
    _sign_in(client)
    raw = client.cookies.get("sweepbot_session") or ""
    client.cookies.clear()
    client.cookies.set("sweepbot_session", raw[:-3] + ("AAA" if not raw.endswith("AAA") else "BBB"))
    assert client.get("/api/me").json()["identity"] is None
    assert client.post(f"/api/sweeps/{s.active_sweep}/cancel").status_code == 401


def _rate_limit_row(session: Session, remaining: int) -> None:
    import json

    from app.flows.commands.github_status import RATE_LIMIT_KEY
    from app.models import HttpCacheEntry

    core: dict[str, Any] = {"limit": 5000, "remaining": remaining, "reset": 1_900_000_000}
    session.add(HttpCacheEntry(key=RATE_LIMIT_KEY, etag=None, body=json.dumps({"resources": {"core": core}})))
    session.commit()


def test_rate_limit_comes_from_the_shared_cache(dash: tuple[TestClient, Session, Seeded]) -> None:
    client, session, _s = dash
    _rate_limit_row(session, 4321)
    rl = client.get("/api/overview").json()["rate_limit"]
    assert (rl["remaining"], rl["limit"], rl["stale"]) == (4321, 5000, False)
    assert "4321 / 5000" in client.get("/").text


def test_results_gap_compares_only_runs_of_the_references_tp(db_session: Session) -> None:
    # tp4 and tp8 runs of one key at conc 4: the tp4 ATOM table's gap must use the tp4 run only,
    # not average it with tp8 and call their spread "noise".
    from app.models.results import Result
    from app.web.dashboard.data import results as data

    for tp, tpot in ((8, 5.0), (4, 7.5)):  # tp4 newest: its table is the one chosen
        db_session.add(
            Result(
                result_name=f"r-tp{tp}-conc4",
                config_key="minimaxm3-fp4-mi355x-vllm",
                image="img:1",
                fingerprint="f",
                model="amd/MiniMax-M3-MXFP4",
                runner="mi355x",
                isl=8192,
                osl=1024,
                conc=4,
                tp=tp,
                pp=1,
                ep=1,
                mean_tpot_ms=tpot,
                schema="raw",
            )
        )
    db_session.commit()
    out = data.results_for_key(db_session, "minimaxm3-fp4-mi355x-vllm")
    assert out.reference_name == "atom-minimaxm3-mxfp4-mi355x-tp4-8k1k"
    row = next(g for g in out.gap if g.conc == 4)
    assert (row.runs, row.recipe, row.gap_pct, row.verdict) == (1, 7.5, 0.0, "matched")


def test_results_show_the_accuracy_table_and_the_overall_verdict(
    dash: tuple[TestClient, Session, Seeded],
) -> None:
    from app.models.results import EvalResult

    client, session, _s = dash
    for filt, score, stderr in (("flexible-extract", 0.95, 0.0219), ("strict-match", 0.80, 0.0402)):
        session.add(
            EvalResult(
                result_name=f"{KEY}-c32",
                config_key=KEY,
                image=NEW_IMAGE,
                fingerprint="f" * 16,
                model="amd/MiniMax-M3-MXFP4",
                framework="vllm",
                precision="fp4",
                runner="mi355x",
                isl=8192,
                osl=1024,
                conc=32,
                tp=4,
                task="gsm8k",
                metric="exact_match",
                filter=filt,
                score=score,
                stderr=stderr,
                n=100,
                limit=100.0,
                run_url="https://github.com/o/r/actions/runs/1",
            )
        )
    session.commit()
    res = client.get(f"/api/results/{KEY}").json()
    acc = {a["filter"]: a for a in res["accuracy"]}
    assert (
        acc["flexible-extract"]["reference"] == 0.9363 and acc["flexible-extract"]["verdict"] == "not worse"
    )
    assert acc["flexible-extract"]["half_width_pts"] == pytest.approx(4.29, abs=0.01)
    assert acc["strict-match"]["verdict"] == "worse"
    assert res["verdict"].endswith("; accuracy: worse on gsm8k") and res["verdict"].startswith("latency: ")
    page = client.get(f"/results/{KEY}").text
    assert "Accuracy (lm-eval)" in page and "0.9500 ± 0.0219" in page and "limit 100" in page
    assert "wide interval" in page and "<strong>Verdict</strong>" in page


def test_cancel_queues_the_runs_to_stop_instead_of_calling_github(
    dash: tuple[TestClient, Session, Seeded], settings_env: pytest.MonkeyPatch
) -> None:
    """The request changes the database only; the runs of its in-flight jobs go to a worker
    (``sweepbot.cancel_runs``), which cancels each through the gateway as the operator."""
    import app.adapters.queue
    from app.flows.commands.operator import stop_runs
    from workers.tasks_operator import cancel_runs

    client, session, s = dash
    queued: list[tuple[str, tuple[Any, ...]]] = []

    def sent(name: str, *a: Any, **k: Any) -> bool:
        queued.append((name, a))
        return True  # the broker took it

    settings_env.setattr(app.adapters.queue, "enqueue", sent)
    session.expire_all()
    jobs = list(session.scalars(select(SweepJob).where(SweepJob.sweep_id == s.active_sweep)))
    running = sorted(int(j.run_id) for j in jobs if j.state in JobState.IN_FLIGHT and j.run_id is not None)
    waiting = next(j.id for j in jobs if j.state == JobState.QUEUED)
    assert running  # the seed has jobs running on GitHub
    headers = {"Authorization": f"Bearer {TOKEN}"}
    # A queued job has no run: cancelling it leaves nothing to stop; a second cancel is refused.
    resp = client.post(f"/api/jobs/{waiting}/cancel", headers=headers)
    assert resp.status_code == 200 and queued == []
    again = client.post(f"/api/jobs/{waiting}/cancel", headers=headers)
    assert again.status_code == 409 and "already cancelled" in again.json()["message"]

    resp = client.post(f"/api/sweeps/{s.active_sweep}/cancel", headers=headers)
    assert resp.status_code == 200 and f"stopping {len(running)} run(s) on GitHub" in resp.json()["message"]
    sweep = session.get(Sweep, s.active_sweep)
    assert sweep is not None
    actor = _audit(session, "dashboard.cancel_sweep")[-1].actor
    assert queued == [("sweepbot.cancel_runs", (sweep.repo, running, actor))]
    assert cancel_runs.name == "sweepbot.cancel_runs"

    class Gw:
        def __init__(self) -> None:
            self.cancelled: list[tuple[str, int]] = []

        def cancel_run(self, repo: str, run_id: int) -> None:
            if run_id == running[0]:
                raise RuntimeError("409 the run already finished")
            self.cancelled.append((repo, run_id))

    gw = Gw()
    errors = stop_runs(gw, sweep.repo, running)
    assert gw.cancelled == [(sweep.repo, r) for r in running[1:]]  # one failure does not stop the rest
    assert len(errors) == 1 and str(running[0]) in errors[0]
