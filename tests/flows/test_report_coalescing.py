"""The sticky report is edited at most once per debounce window, and never to the text it shows.

Issue 19: report edits should be coalesced, one per debounce window per comment whatever the
number of job events. Every job change marks the report dirty (app.store.reports), also the ones
the report does not show: a job whose throughput job succeeded stays `running` until its result
is collected (runtracking), a run's in_progress event, a claim. The flush used to edit the comment
to the same text then.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db import session_factory
from app.flows.results.reports import flush_reports
from app.models.results import ReportState
from app.models.sweeps import JobState, Sweep, SweepJob
from app.store.reports import mark_report_dirty

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
DEBOUNCE = 30.0


class Comments:
    """The two comment calls a flush makes; every call kept with the body it sent."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def upsert_comment(self, repo: str, number: int, marker: str, body: str) -> dict[str, Any]:
        self.calls.append(("upsert", body))
        return {"id": 4242}

    def update_comment(self, repo: str, comment_id: int, body: str) -> dict[str, Any]:
        self.calls.append(("update", body))
        return {"id": comment_id}


def _sweep(session: Session) -> tuple[int, int]:
    sweep = Sweep(
        repo="acme/bench",
        pr_number=8,
        head_sha="a" * 40,
        head_ref="recipe",
        base_ref="main",
        config_key="minimaxm3-fp4-mi355x-vllm",
        image="img",
        fingerprint="f" * 16,
        points_digest="d" * 64,
        requested_by="maint",
        reason="command",
    )
    session.add(sweep)
    session.flush()
    job = SweepJob(
        sweep_id=sweep.id,
        position=0,
        point={"result-name": "p1", "conc": 64, "tp": 4, "isl": 8192, "osl": 1024},
        result_name="p1",
        runner_label="mi355x",
        seq="8k1k",
        conc=64,
        tp=4,
        group_key="conc=64",
        state=JobState.RUNNING,
        run_url="https://github.test/run/1",
    )
    session.add(job)
    session.flush()
    return sweep.id, job.id


def _change(session: Session, sweep_id: int, job_id: int, **fields: Any) -> None:
    job = session.get(SweepJob, job_id)
    assert job is not None
    for name, value in fields.items():
        setattr(job, name, value)
    mark_report_dirty(session, sweep_id)
    session.commit()


def _flush(gw: Comments, at: float) -> int:
    return flush_reports(
        session_factory(), lambda s: gw, debounce_seconds=DEBOUNCE, now=T0 + timedelta(seconds=at)
    )


def test_a_change_the_report_does_not_show_is_not_an_edit(db_session: Session) -> None:
    sweep_id, job_id = _sweep(db_session)
    mark_report_dirty(db_session, sweep_id)
    db_session.commit()
    gw = Comments()
    assert _flush(gw, 0) == 1 and [c for c, _ in gw.calls] == ["upsert"]
    # the throughput job succeeded: still `running` in the report until collection stores the result
    _change(db_session, sweep_id, job_id, run_conclusion="success")
    assert _flush(gw, 60) == 0 and len(gw.calls) == 1
    db_session.expire_all()
    state = db_session.scalars(select(ReportState)).one()
    assert state.flushed_version == state.version  # settled: not rendered again at every flush
    assert _flush(gw, 90) == 0 and len(gw.calls) == 1
    # a change it shows is edited at the next flush
    _change(db_session, sweep_id, job_id, state=JobState.SUCCEEDED)
    assert _flush(gw, 120) == 1 and [c for c, _ in gw.calls] == ["upsert", "update"]
    assert "succeeded" in gw.calls[-1][1]


def test_one_edit_per_debounce_window_whatever_the_number_of_changes(db_session: Session) -> None:
    sweep_id, job_id = _sweep(db_session)
    mark_report_dirty(db_session, sweep_id)
    db_session.commit()
    gw = Comments()
    assert _flush(gw, 0) == 1
    for second, reason in enumerate(("a", "b", "c", "d", "e"), start=1):
        _change(db_session, sweep_id, job_id, reason=f"note {reason}")
        _flush(gw, second * 5.0)  # flushes inside the window land nothing
    assert len(gw.calls) == 1
    assert _flush(gw, 30) == 1 and len(gw.calls) == 2 and "note e" in gw.calls[-1][1]
