"""Collection on PostgreSQL: two collects of one job at once store one result."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from sqlalchemy import func, select

from tests.flows.test_results import RESULT_NAME, FakeArtifacts, _job, _raw, _zip


class SlowArtifacts(FakeArtifacts):
    def __init__(self, blob: bytes, entered: threading.Event) -> None:
        super().__init__(blob)
        self.entered = entered

    def download_artifact(self, repo: str, artifact_id: int, max_bytes: int) -> bytes:
        self.entered.set()
        time.sleep(0.5)  # the second collect starts meanwhile
        return super().download_artifact(repo, artifact_id, max_bytes)


@pytest.mark.services
def test_concurrent_collects_store_one_result(pg_clean_url: str, settings_env: pytest.MonkeyPatch) -> None:
    from app.db import session_factory
    from app.flows.results.collect import collect_job
    from app.models.results import Result
    from app.settings import reset_settings_cache

    settings_env.setenv("SWEEPBOT_DATABASE_URL", pg_clean_url)
    reset_settings_cache()
    factory = session_factory()
    with factory() as s:
        job_id = _job(s)
        s.commit()
    blob = _zip({f"{RESULT_NAME}.json": _raw()})
    entered = threading.Event()
    outcomes: list[Any] = []
    errors: list[BaseException] = []

    def collect(gw: Any) -> None:
        try:
            with factory() as s:
                outcomes.append(collect_job(s, gw, job_id))
                s.commit()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    first = threading.Thread(target=collect, args=(SlowArtifacts(blob, entered),))
    first.start()
    assert entered.wait(10)
    second = threading.Thread(target=collect, args=(FakeArtifacts(blob),))
    second.start()
    first.join(30)
    second.join(30)
    assert not errors
    assert sorted(o.state for o in outcomes) == ["skipped", "succeeded"]
    with factory() as s:
        assert s.scalar(select(func.count()).select_from(Result).where(Result.job_id == job_id)) == 1
