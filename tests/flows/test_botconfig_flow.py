""".github/sweepbot.yml read from the default branch, stored, and honoured by the report
(the schema is in tests/core/test_botconfig.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from app.core.bot_config import BotConfig
from app.flows.repo.bot_config import read_bot_config
from app.store.bot_configs import stored_config
from tests.core.test_botconfig import ATOM_TABLE, GOOD


class _Gw:
    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.refs: list[str | None] = []

    def get_repo(self, repo: str) -> dict[str, Any]:
        return {"default_branch": "trunk"}

    def get_file(self, repo: str, path: str, ref: str | None = None) -> tuple[str, str] | None:
        self.refs.append(ref)
        return (self.files[path], "blob") if path in self.files else None


def test_read_from_default_branch_and_store_errors(db_session: Session) -> None:
    from app.models.tracking import BotConfigRecord

    gw = _Gw({".github/sweepbot.yml": "version: [\n"})
    cfg = read_bot_config(db_session, gw, "o/r")
    assert cfg == BotConfig() and gw.refs == ["trunk"]
    rec = db_session.get(BotConfigRecord, "o/r")
    assert rec is not None and not rec.ok and rec.present and "not valid YAML" in (rec.error or "")
    assert stored_config(db_session, "o/r") == BotConfig()

    gw.files[".github/sweepbot.yml"] = GOOD
    cfg = read_bot_config(db_session, gw, "o/r")
    assert cfg.bump.mode == "pr"
    assert stored_config(db_session, "o/r") == cfg
    rec = db_session.get(BotConfigRecord, "o/r")
    assert rec is not None and rec.error is None

    del gw.files[".github/sweepbot.yml"]
    assert read_bot_config(db_session, gw, "o/r") == BotConfig()
    rec = db_session.get(BotConfigRecord, "o/r")
    assert rec is not None and rec.present is False


def _report_sweep(session: Session) -> int:
    """A finished sweep of the seed key whose job points do not name the model: the shipped table
    is only picked when the repo's `references:` says so."""
    from app.models.sweeps import SweepJob
    from tests.browser.seed import CONCS, NEW_IMAGE, _store_results, _sweep

    sweep = _sweep(session, image=NEW_IMAGE, state="succeeded", created=datetime.now(UTC))
    ids = {}
    for pos, conc in enumerate(CONCS):
        job = SweepJob(
            sweep_id=sweep.id,
            position=pos,
            point={"conc": conc, "tp": 4, "seq": "8k1k"},
            result_name=(
                f"minimaxm3_fp4_vllm_tp4-pp1-dcp1-pcp1-ep1-dpafalse_disagg-false_spec-none_conc{conc}_mi355x"
            ),
            runner_label="mi355x",
            seq="8k1k",
            conc=conc,
            tp=4,
            group_key=f"{sweep.id}:{conc}",
            slots=1,
            state="succeeded",
            attempts=1,
        )
        session.add(job)
        session.flush()
        ids[conc] = job.id
    _store_results(session, NEW_IMAGE, sweep.id, 7, ids)
    session.commit()
    return sweep.id


def _store_config(session: Session, text: str) -> None:
    gw = _Gw({".github/sweepbot.yml": text})
    read_bot_config(session, gw, "SemiAnalysisAI/InferenceX")
    session.commit()


def test_configured_reference_is_honoured_by_the_report(db_session: Session) -> None:
    from app.flows.results.reports import load_report_data, render_report, render_report_data

    sweep_id = _report_sweep(db_session)
    # Without configuration: the job points do not say which model ran, so no shipped table matches.
    plain = render_report(db_session, sweep_id)
    assert "No reference applies to this config key" in plain and "ATOM ref" not in plain

    _store_config(db_session, f"references:\n  minimaxm3-fp4-mi355x-vllm: {ATOM_TABLE}\n")
    data = load_report_data(db_session, sweep_id)
    assert data.reference is not None and data.reference.name == ATOM_TABLE
    text = render_report_data(data)
    assert "vLLM vs ATOM ref" in text and f"Reference: [{ATOM_TABLE}]" in text
    row32 = next(line for line in text.splitlines() if line.startswith("| 32 |"))
    assert "16.74" in row32  # ATOM's published mean TPOT at conc 32
    assert render_report(db_session, sweep_id) == text

    # `none` switches it off again; `sibling` with no stored sibling results finds nothing either.
    for choice in ("none", "sibling"):
        _store_config(db_session, f"references:\n  minimaxm3-fp4-mi355x-vllm: {choice}\n")
        again = render_report(db_session, sweep_id)
        assert "No reference applies to this config key" in again and "16.74" not in again
