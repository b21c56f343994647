"""Tracking flows driven through fakes that implement only the gateway Protocol each flow declares
(app/flows/tracking/ports.py, app/flows/repo/bot_config.py, app/flows/repo/changelog_mode.py): the status
comment's writes, the bot config read, and the changelog read behind a sweep's eval mode."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.orm import Session

from app.adapters.github.errors import NotFound
from app.core.bot_config import CONFIG_PATH
from app.core.deprefs import DepRef
from app.core.sweepspec import SweepFilters
from app.flows.repo.bot_config import ConfigReader, read_bot_config
from app.flows.repo.changelog_mode import ChangelogGateway, changelog_filters
from app.flows.tracking.ports import StatusGateway
from app.flows.tracking.status_comment import publish_status
from app.models.tracking import BotConfigRecord, DepState, Watch, WatchState
from app.store.watches import ensure_watch, sync_dependencies

REPO = "SemiAnalysisAI/InferenceX"


class FakeStatus:
    """Only StatusGateway: update_comment, upsert_comment."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.gone: set[int] = set()

    def update_comment(self, repo: str, comment_id: int, body: str) -> dict[str, Any]:
        self.calls.append(("update", comment_id))
        if comment_id in self.gone:
            raise NotFound(404, "comment deleted")
        return {"id": comment_id}

    def upsert_comment(self, repo: str, number: int, marker: str, body: str) -> dict[str, Any]:
        self.calls.append(("upsert", number))
        return {"id": 100 + len(self.calls)}


def _watch(session: Session) -> Watch:
    watch = ensure_watch(session, REPO, 2104, "minimaxm3-fp4-mi355x-vllm", "body")
    sync_dependencies(session, watch, [DepRef("vllm-project/vllm", 47269)], source="body", actor="carol")
    watch.decision, watch.reason, watch.state = (
        "wait",
        "waiting for vllm-project/vllm#47269 to merge",
        WatchState.WAITING,
    )
    session.flush()
    return watch


def test_the_status_comment_is_written_once_per_text(db_session: Session) -> None:
    gw = FakeStatus()
    status: StatusGateway = gw  # the fake is all the flow needs
    watch = _watch(db_session)
    assert publish_status(db_session, status, REPO, 2104) is True
    assert publish_status(db_session, status, REPO, 2104) is False  # same text: no call at all
    assert gw.calls == [("upsert", 2104)]
    watch.dependencies[0].state, watch.dependencies[0].merge_sha = DepState.MERGED, "a" * 40
    assert publish_status(db_session, status, REPO, 2104) is True
    assert gw.calls[-1] == ("update", 101)  # edited in place
    gw.gone.add(101)  # someone deleted it: found again by its marker
    watch.reason = "something else"
    watch.decision = "blocked"
    assert publish_status(db_session, status, REPO, 2104) is True
    assert gw.calls[-2:] == [("update", 101), ("upsert", 2104)]


class FakeFiles:
    """Only ConfigReader: get_repo, get_file (plus get_pull for ChangelogGateway)."""

    def __init__(self, files: dict[tuple[str, str], str], pull: dict[str, Any] | None = None) -> None:
        self.files, self.pull, self.reads = files, pull, 0

    def get_repo(self, repo: str) -> dict[str, Any]:
        return {"default_branch": "main"}

    def get_file(self, repo: str, path: str, ref: str | None = None) -> tuple[str, str] | None:
        self.reads += 1
        text = self.files.get((path, str(ref)))
        return (text, f"blob-{len(text)}") if text is not None else None

    def get_pull(self, repo: str, number: int) -> dict[str, Any]:
        assert self.pull is not None
        return self.pull


def test_a_bad_bot_config_means_the_defaults_and_a_stored_error(db_session: Session) -> None:
    reader: ConfigReader = FakeFiles({(CONFIG_PATH, "main"): "version: 2\n"})
    cfg = read_bot_config(db_session, reader, REPO)
    assert cfg.bump.mode == "auto"  # the defaults
    rec = db_session.get(BotConfigRecord, REPO)
    assert rec is not None and rec.present and not rec.ok and "version" in str(rec.error)
    good: ConfigReader = FakeFiles({(CONFIG_PATH, "main"): "version: 1\nbump:\n  mode: pr\n"})
    assert read_bot_config(db_session, good, REPO).bump.mode == "pr"
    rec = db_session.get_one(BotConfigRecord, REPO)  # the same row object: read again, mypy forgets `not ok`
    assert rec.ok and rec.error is None and rec.config is not None
    read_bot_config(db_session, FakeFiles({}), REPO)
    rec = db_session.get_one(BotConfigRecord, REPO)
    assert rec.ok and not rec.present and rec.config is None


@pytest.mark.parametrize(("explicit", "want"), [(False, "all"), (True, "only")])
def test_sweep_filters_follow_the_changelog_unless_evals_is_given(
    db_session: Session, explicit: bool, want: str
) -> None:
    entry = '- config-keys:\n    - k\n  description:\n    - "x"\n  pr-link: XXX\n  all-evals: true\n'
    pull = {"head": {"sha": "h" * 40, "repo": {"full_name": REPO}}, "base": {"sha": "b" * 40}}
    gw: ChangelogGateway = FakeFiles(
        {("perf-changelog.yaml", "b" * 40): "", ("perf-changelog.yaml", "h" * 40): entry}, pull
    )
    given = SweepFilters(conc=(4,), evals="only")
    got = changelog_filters(db_session, gw, repo=REPO, pr_number=1, key="k", filters=given, explicit=explicit)
    assert got is not None and got.evals == want and got.conc == (4,)
    other = changelog_filters(
        db_session, gw, repo=REPO, pr_number=1, key="other", filters=None, explicit=False
    )
    assert other is None
