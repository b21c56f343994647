"""Parsing both result schemas, artifact safety, and collect_job's failure reasons."""

from __future__ import annotations

import io
import json
import struct
import zipfile
import zlib
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

from app.core.artifactzip import ArtifactError, pick_result_member, safe_json_members
from app.core.resultfile import ResultFileError, parse_result

RESULT_NAME = "minimaxm3_8k1k_fp4_vllm_tp4-pp1-dcp1-pcp1-ep1-dpafalse_disagg-false_spec-none_conc32_mi355x"
# What benchmark-tmpl.yml uploads for that point when node mi355x-amds_03 ran it.
RESULT_FILENAME = RESULT_NAME.removesuffix("_mi355x") + "_mi355x-amds_03"
MEMBER = f"agg_{RESULT_FILENAME}.json"


# ------------------------------------------------------------------------------------ parsing


def test_parses_every_raw_fixture(fixtures_dir: Path) -> None:
    files = sorted((fixtures_dir / "vllm-bench").glob("*.json"))
    assert len(files) == 3
    for path in files:
        doc = json.loads(path.read_text())
        got = parse_result(path.read_bytes(), path.name, tp=8)
        assert got.schema == "raw"
        assert got.conc == doc["max_concurrency"]
        assert got.mean_tpot_ms == doc["mean_tpot_ms"] and got.p99_tpot_ms == doc["p99_tpot_ms"]
        assert got.median_ttft_ms == doc["median_ttft_ms"] and got.mean_itl_ms == doc["mean_itl_ms"]
        assert got.mean_e2el_ms is None  # the run did not ask for e2el percentiles
        assert got.total_tput == doc["total_token_throughput"]
        assert got.tput_per_gpu == pytest.approx(doc["total_token_throughput"] / 8)
        assert got.interactivity == pytest.approx(1000 / doc["mean_tpot_ms"])
        assert "request_goodput:" in doc  # the typo is tolerated, not required


def test_parses_every_seconds_fixture(fixtures_dir: Path) -> None:
    files = sorted((fixtures_dir / "inferencex").glob("*.json"))
    assert len(files) == 5
    for path in files:
        doc = json.loads(path.read_text())
        got = parse_result(path.read_bytes(), path.name, tp=8)
        assert got.schema == "aggregated"
        assert got.conc == doc["max_concurrency"]
        assert got.median_tpot_ms == pytest.approx(doc["median_tpot"] * 1000)
        assert got.p99_e2el_ms == pytest.approx(doc["p99_e2el"] * 1000)
        assert got.mean_tpot_ms is None  # not in the file: said, not invented
        assert got.total_tput == pytest.approx(doc["input_throughput"] + doc["output_throughput"])
        assert got.median_tpot_ms is not None
        assert got.interactivity == pytest.approx(1000 / got.median_tpot_ms)


def test_parses_aggregated_form_with_intvty_and_tput_per_gpu() -> None:
    agg = {
        "hw": "mi355x",
        "tp": 4,
        "conc": 32,
        "model": "amd/MiniMax-M3-MXFP4",
        "framework": "vllm",
        "mean_tpot": 0.01721,
        "median_tpot": 0.0171,
        "p99_tpot": 0.0195,
        "mean_ttft": 0.52,
        "mean_intvty": 58.1,
        "median_intvty": 58.5,
        "tput_per_gpu": 4100.0,
        "output_tput_per_gpu": 450.0,
        "Some Extra Key": [1, 2],
    }
    got = parse_result(json.dumps([agg]), "agg_x.json")
    assert got.schema == "aggregated" and got.conc == 32 and got.tp == 4
    assert got.mean_tpot_ms == pytest.approx(17.21) and got.mean_ttft_ms == pytest.approx(520.0)
    assert got.interactivity == 58.1 and got.tput_per_gpu == 4100.0


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"max_concurrency": 4, "mean_tpot_ms": "fast"}, "mean_tpot_ms"),
        ({"max_concurrency": 4, "mean_tpot_ms": -1}, "mean_tpot_ms"),
        ({"max_concurrency": 4, "p99_ttft_ms": 1.0}, "mean_tpot_ms"),
        ({"max_concurrency": 2.5, "mean_tpot_ms": 10.0}, "max_concurrency"),
        ({"hello": "world"}, "mean_tpot_ms"),
        ([1, 2], "<document>"),
    ],
)
def test_unreadable_files_name_file_and_field(doc: Any, field: str) -> None:
    with pytest.raises(ResultFileError) as info:
        parse_result(json.dumps(doc), "weird.json")
    assert info.value.file_name == "weird.json" and info.value.field_name == field
    assert "weird.json" in str(info.value) and field in str(info.value)


def test_not_json_names_the_file() -> None:
    with pytest.raises(ResultFileError, match="bad.json"):
        parse_result(b"{not json", "bad.json")


# ------------------------------------------------------------------------------------ the zip


def _zip(members: dict[str, bytes], symlink: str | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        if symlink:
            info = zipfile.ZipInfo(symlink)
            info.external_attr = 0o120777 << 16
            zf.writestr(info, "/etc/passwd")
    return buf.getvalue()


@lru_cache(maxsize=2)
def zip_bomb(name: str, size: int = 1 << 30) -> bytes:
    """A valid zip whose one member inflates to ``size`` zero bytes (1 GB), built in ~1 MB of memory.

    Deflate output after a full flush does not depend on earlier input, so one compressed 16 MiB
    segment repeated 64 times is the deflate stream of 1 GiB of zeros.
    """
    chunk = bytes(1 << 24)
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    comp.compress(chunk)
    comp.flush(zlib.Z_FULL_FLUSH)
    segment = comp.compress(chunk) + comp.flush(zlib.Z_FULL_FLUSH)
    reps = size // len(chunk)
    data = segment * reps + comp.flush(zlib.Z_FINISH)
    crc = 0
    for _ in range(reps):
        crc = zlib.crc32(chunk, crc)
    fname = name.encode()
    local = (
        struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(data), size, len(fname), 0) + fname
    )
    central = (
        struct.pack(
            "<IHHHHHHIIIHHHHHII",
            0x02014B50,
            20,
            20,
            0,
            8,
            0,
            0,
            crc,
            len(data),
            size,
            len(fname),
            0,
            0,
            0,
            0,
            0,
            0,
        )
        + fname
    )
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central), len(local) + len(data), 0)
    return local + data + central + end


def test_safe_members_reads_only_expected_json() -> None:
    blob = _zip({f"{RESULT_NAME}.json": b'{"a": 1}', "server.log": b"x" * 100, "other.json": b"{}"})
    got = safe_json_members(blob, wanted=[f"{RESULT_NAME}.json"])
    assert list(got) == [f"{RESULT_NAME}.json"]
    assert pick_result_member(got, RESULT_NAME)[1] == b'{"a": 1}'


@pytest.mark.parametrize("bad", ["../evil.json", "a/../../evil.json", "/etc/evil.json", "a\\..\\evil.json"])
def test_path_traversal_refuses_the_artifact(bad: str) -> None:
    with pytest.raises(ArtifactError, match="refusing the artifact"):
        safe_json_members(_zip({f"{RESULT_NAME}.json": b"{}", bad: b"{}"}))


def test_symlink_member_refuses_the_artifact() -> None:
    with pytest.raises(ArtifactError, match="symlink"):
        safe_json_members(_zip({f"{RESULT_NAME}.json": b"{}"}, symlink="link.json"))


def test_one_gigabyte_zip_bomb_is_refused_without_inflating() -> None:
    bomb = zip_bomb(f"{RESULT_NAME}.json")
    assert len(bomb) < 2 * 1024 * 1024
    info = zipfile.ZipFile(io.BytesIO(bomb)).infolist()[0]
    assert info.file_size == 1 << 30
    with pytest.raises(ArtifactError, match="cap"):
        safe_json_members(bomb)
    with pytest.raises(
        ArtifactError, match="zip bomb"
    ):  # even under a generous size cap, the ratio catches it
        safe_json_members(bomb, max_member_bytes=2 << 30, max_total_bytes=2 << 30)


def test_member_lying_about_its_size_is_refused() -> None:
    payload = json.dumps({"max_concurrency": 1, "mean_tpot_ms": 1.0, "pad": "x" * 5000}).encode()
    blob = bytearray(_zip({f"{RESULT_NAME}.json": payload}))
    # Patch the declared uncompressed size (local and central headers) down to 100 bytes.
    for sig, off in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        pos = blob.find(sig)
        blob[pos + off : pos + off + 4] = struct.pack("<I", 100)
    with pytest.raises(ArtifactError, match="cannot be read"):
        safe_json_members(bytes(blob))


def test_missing_result_file_and_not_a_zip() -> None:
    members = safe_json_members(_zip({"a.json": b"{}", "b.json": b"{}"}))
    with pytest.raises(ArtifactError, match=f"missing result file {RESULT_NAME}.json"):
        pick_result_member(members, RESULT_NAME)
    with pytest.raises(ArtifactError, match="not a readable zip"):
        safe_json_members(b"this is not a zip")


# ------------------------------------------------------------------------------------ collect_job


class FakeArtifacts:
    """The two gateway calls collect_job makes, serving one artifact for run 777."""

    def __init__(self, blob: bytes, name: str = f"bmk_{RESULT_FILENAME}") -> None:
        self.blob, self.name = blob, name

    def list_run_artifacts(self, repo: str, run_id: int) -> list[dict[str, Any]]:
        assert run_id == 777
        return [{"id": 5, "name": self.name, "size_in_bytes": len(self.blob), "expired": False}]

    def download_artifact(self, repo: str, artifact_id: int, max_bytes: int) -> bytes:
        assert len(self.blob) <= max_bytes
        return self.blob


def _job(session: Session) -> int:
    from app.models.sweeps import Sweep, SweepJob

    sweep = Sweep(
        repo="acme/bench",
        pr_number=7,
        head_sha="a" * 40,
        head_ref="recipe",
        base_ref="main",
        config_key="minimaxm3-fp4-mi355x-vllm",
        image="vllm/vllm-openai-rocm:nightly-" + "b" * 40,
        fingerprint="f" * 16,
        points_digest="d" * 64,
        requested_by="maint",
        reason="command",
    )
    session.add(sweep)
    session.flush()
    point = {
        "config-key": sweep.config_key,
        "result-name": RESULT_NAME,
        "exp-name": "minimaxm3_8k1k",
        "dcp-size": 1,
        "dp-attn": False,
        "spec-decoding": "none",
        "conc": 32,
        "tp": 4,
        "pp": 1,
        "ep": 1,
        "pcp-size": 1,
        "isl": 8192,
        "osl": 1024,
        "framework": "vllm",
        "precision": "fp4",
        "runner": "mi355x",
        "model": "amd/MiniMax-M3-MXFP4",
        "image": sweep.image,
    }
    job = SweepJob(
        sweep_id=sweep.id,
        position=0,
        point=point,
        result_name=RESULT_NAME,
        runner_label="mi355x",
        seq="8k1k",
        conc=32,
        tp=4,
        group_key="g",
        state="running",
        run_id=777,
        run_url="http://gh/acme/bench/actions/runs/777",
    )
    session.add(job)
    session.flush()
    return job.id


def recorded(session: Session, job_id: int) -> tuple[str, str | None, str | None, str]:
    """What the database says after collection: the job's (state, reason, result_url) and its
    sweep's state. Collection finishes jobs through the real ``finish_job``
    (app.flows.sweeps.job_finish); only the
    gateway is fake, so a collect that records a failure as a success fails these checks
    (``tests/mutation_collect.py`` applies such mutants and lists the tests that catch them)."""
    from app.models.sweeps import Sweep, SweepJob

    session.expire_all()
    job = session.get(SweepJob, job_id)
    assert job is not None
    sweep = session.get(Sweep, job.sweep_id)
    assert sweep is not None
    return job.state, job.reason, job.result_url, sweep.state


def report_version(session: Session, job_id: int) -> int:
    """How many changes the job's sticky report has been told of (0: never marked dirty)."""
    from sqlalchemy import select

    from app.models.results import ReportState
    from app.models.sweeps import SweepJob

    job = session.get(SweepJob, job_id)
    assert job is not None
    state = session.scalars(select(ReportState).where(ReportState.sweep_id == job.sweep_id)).first()
    return state.version if state is not None else 0


RUN_URL = "http://gh/acme/bench/actions/runs/777"


def _raw(conc: int = 32, tpot: float = 17.21) -> bytes:
    return json.dumps(
        {
            "max_concurrency": conc,
            "mean_tpot_ms": tpot,
            "median_tpot_ms": tpot,
            "p99_tpot_ms": tpot * 1.1,
            "total_token_throughput": 16000.0,
            "output_throughput": 1800.0,
        }
    ).encode()


def test_collect_stores_one_row_with_identity_and_provenance(db_session: Session) -> None:
    from app.flows.results.collect import collect_job
    from app.store.results import find_reusable

    job_id = _job(db_session)
    out = collect_job(db_session, FakeArtifacts(_zip({MEMBER: _raw()})), job_id)
    assert out.state == "succeeded"
    assert recorded(db_session, job_id) == ("succeeded", None, RUN_URL, "done")
    assert report_version(db_session, job_id) > 0
    row = find_reusable(
        db_session,
        image="vllm/vllm-openai-rocm:nightly-" + "b" * 40,
        fingerprint="f" * 16,
        result_name=RESULT_NAME,
    )
    assert row is not None and row.id == out.result_id
    assert (row.conc, row.tp, row.mean_tpot_ms, row.tput_per_gpu) == (32, 4, 17.21, 4000.0)
    assert (
        row.run_url is not None
        and row.run_url.endswith("/777")
        and row.artifact_name == f"bmk_{RESULT_FILENAME}"
    )
    assert row.file_name == MEMBER and row.config_key == "minimaxm3-fp4-mi355x-vllm"
    again = collect_job(db_session, FakeArtifacts(b"unused"), job_id)
    assert again.state == "skipped" and again.result_id == out.result_id
    assert recorded(db_session, job_id) == ("succeeded", None, RUN_URL, "done")
    assert find_reusable(db_session, image="other", fingerprint="f" * 16, result_name=RESULT_NAME) is None


@pytest.mark.parametrize(
    ("blob", "reason"),
    [
        (_zip({MEMBER: _raw(), "../escape.json": b"{}"}), "escapes the artifact"),
        (zip_bomb(MEMBER), "cap"),
        (_zip({"notes.txt": b"hello"}), f"missing result file {MEMBER}"),
        (
            _zip({MEMBER: b'{"max_concurrency": 32, "mean_tpot_ms": null, "p99_tpot_ms": "?"}'}),
            f"{MEMBER}: field 'p99_tpot_ms'",
        ),
        (_zip({MEMBER: _raw(conc=64)}), "point is conc 32"),
    ],
    ids=["traversal", "zip-bomb", "missing-file", "bad-field", "wrong-conc"],
)
def test_collect_fails_the_job_cleanly(db_session: Session, blob: bytes, reason: str) -> None:
    from app.flows.results.collect import collect_job
    from app.models.results import Result

    job_id = _job(db_session)
    out = collect_job(db_session, FakeArtifacts(blob), job_id)
    assert out.state == "failed" and reason in (out.reason or "")
    assert recorded(db_session, job_id) == ("failed", out.reason, RUN_URL, "done")
    assert report_version(db_session, job_id) > 0
    assert db_session.query(Result).count() == 0


def test_collect_fails_when_the_artifact_is_missing(db_session: Session) -> None:
    from app.flows.results.collect import collect_job

    job_id = _job(db_session)
    out = collect_job(db_session, FakeArtifacts(b"", name="logs"), job_id)
    assert out.state == "failed" and "no artifact bmk_" + RESULT_NAME.removesuffix("_mi355x") + "_<node>" in (
        out.reason or ""
    )
    assert recorded(db_session, job_id) == ("failed", out.reason, RUN_URL, "done")


# ------------------------------------------------------------------------------------ the report


def _sweep_for_pr(session: Session, pr: int) -> int:
    from app.models.sweeps import Sweep

    sweep = Sweep(
        repo="acme/bench",
        pr_number=pr,
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
    return sweep.id


def select_report() -> Any:
    from sqlalchemy import select

    from app.models.results import ReportState

    return select(ReportState).where(ReportState.pr_number == 8)


def test_two_marks_racing_both_count(db_session: Session) -> None:
    # Worker 1 holds the report row in its session while worker 2 marks and commits; worker 1's
    # mark must add to worker 2's, or a flush that saw worker 2's version would settle the report
    # without worker 1's change.
    from app.db import session_factory
    from app.store.reports import mark_report_dirty

    sweep_id = _sweep_for_pr(db_session, 8)
    mark_report_dirty(db_session, sweep_id)
    db_session.commit()
    held = db_session.scalars(select_report()).one()  # kept in worker 1's identity map
    assert held.version == 1
    with session_factory()() as other:
        mark_report_dirty(other, sweep_id)
        other.commit()
    mark_report_dirty(db_session, sweep_id)  # the stale in-memory row says version 1
    db_session.commit()
    db_session.expire_all()
    assert db_session.scalars(select_report()).one().version == 3
    assert held.version == 3


def test_one_report_that_cannot_land_does_not_block_the_others(db_session: Session) -> None:
    from sqlalchemy import select

    from app.adapters.github.errors import GitHubError
    from app.db import session_factory
    from app.flows.results.reports import flush_reports
    from app.models.results import ReportState
    from app.store.reports import mark_report_dirty

    for pr in (8, 9):
        mark_report_dirty(db_session, _sweep_for_pr(db_session, pr))
    db_session.commit()

    class Gateway:
        def __init__(self) -> None:
            self.posted: list[int] = []

        def upsert_comment(self, repo: str, number: int, marker: str, body: str) -> dict[str, Any]:
            if number == 8:
                raise GitHubError(403, "Resource not accessible (the PR is locked)")
            self.posted.append(number)
            return {"id": 1000 + number}

        def update_comment(self, repo: str, comment_id: int, body: str) -> dict[str, Any]:
            raise AssertionError("no report has a comment yet: a flush posts, never edits")

    gw = Gateway()
    assert flush_reports(session_factory(), lambda s: gw, debounce_seconds=0) == 1
    assert gw.posted == [9]
    db_session.expire_all()
    rows = {r.pr_number: r for r in db_session.scalars(select(ReportState))}
    assert rows[9].flushed_version == rows[9].version and rows[9].last_error is None
    assert rows[8].flushed_version < rows[8].version, "stays dirty: the next flush tries again"
    assert "403" in (rows[8].last_error or "")


# ------------------------------------------------------------------------------------ one gap table


def test_the_report_and_the_dashboard_show_the_same_gap(db_session: Session) -> None:
    """Both come from app.core.gap.gap_table: same concs, same figures, same verdicts."""
    from app.core.gap import fmt_pct
    from app.flows.results.collect import collect_job
    from app.flows.results.reports import load_report_data, render_report_data
    from app.models.sweeps import SweepJob
    from app.web.dashboard.data.results import results_for_key

    job_id = _job(db_session)
    assert (
        collect_job(db_session, FakeArtifacts(_zip({MEMBER: _raw(tpot=17.21)})), job_id).state == "succeeded"
    )
    job = db_session.get(SweepJob, job_id)
    assert job is not None
    data = load_report_data(db_session, job.sweep_id)
    assert data.reference is not None and data.reference.name == "atom-minimaxm3-mxfp4-mi355x-tp4-8k1k"
    report = {
        int(cells[0]): (cells[3], cells[4].lstrip("🔴🟢🔵 "))
        for line in render_report_data(data).splitlines()
        if line.startswith("| ")
        and (cells := [c.strip() for c in line.strip("|").split("|")])[0].isdigit()
        and len(cells) == 5
    }
    dashboard = results_for_key(db_session, "minimaxm3-fp4-mi355x-vllm")
    shown = {
        g.conc: (fmt_pct(None if g.gap_pct is None else g.gap_pct / 100), g.verdict) for g in dashboard.gap
    }
    assert sorted(report) == sorted(shown) == [4, 8, 16, 32, 64]
    assert report == shown
    assert report[32] == ("+2.8%", "behind")


def test_the_sibling_reference_reads_the_sibling_keys_stored_rows(db_session: Session) -> None:
    from app.core.resultfile import parse_result
    from app.store.references import choose_reference
    from app.store.results import store_result

    point = {
        "result-name": "r",
        "config-key": "q-fp4-mi355x-atom",
        "conc": 32,
        "tp": 4,
        "isl": 1024,
        "osl": 1024,
    }
    for tpot, run in ((18.0, 1), (16.5, 2)):
        store_result(
            db_session,
            parse_result(_raw(tpot=tpot), "r.json"),
            point=point,
            image="img",
            fingerprint="f",
            provenance={"run_url": f"https://gh/run/{run}"},
        )
    store_result(
        db_session,
        parse_result(_raw(tpot=9.0), "r.json"),
        point={**point, "tp": 8},
        image="img",
        fingerprint="f",
        provenance={},
    )
    choose = partial(
        choose_reference, config_key="q-fp4-mi355x-vllm", model="q", hardware="mi355x", isl=1024, osl=1024
    )
    ref = choose(db_session, tp=4)
    assert ref is not None and ref.name == "q-fp4-mi355x-atom"
    assert ref.points[32]["mean_tpot_ms"] == 16.5 and ref.runs == {32: ["https://gh/run/2"]}
    assert choose(db_session, tp=2) is None
    assert choose(None, tp=4) is None


def test_collect_stores_one_row_per_conc_of_a_multinode_job(db_session: Session) -> None:
    """benchmark-multinode-tmpl.yml uploads `bmk_<RF>` holding one `agg_<RF>_*.json` per conc of
    the row (RESULT_FILENAME names the workers and `conc8x16x...`): each is stored at its conc."""
    from sqlalchemy import select

    from app.core.recipes import parse_master
    from app.core.recipes.expand import plan_dicts
    from app.flows.results.collect import collect_job
    from app.models.results import Result
    from app.models.sweeps import SweepJob
    from tests.recipe_helpers import fixture_text

    master = parse_master(fixture_text("amd-master.head.yaml"))
    (row,) = plan_dicts(master, "qwen3.5-fp8-mi355x-sglang-disagg")
    rf = row["result-name"].removesuffix("_mi355x-disagg") + "_mi355x-amds_07"
    assert (
        "_prefill-tp4-pp1-dcp1-pcp1-ep1-dpfalse-nw1_decode-tp8-" in rf
        and rf.count("_conc8x16x32x64x128_") == 1
    )
    job_id = _job(db_session)
    job = db_session.get(SweepJob, job_id)
    assert job is not None
    job.point, job.result_name = row, row["result-name"]
    db_session.flush()
    members = {f"agg_{rf}_conc{c}_gpus_12_ctx_4_gen_8.json": _raw(conc=c) for c in row["conc"]}
    members[f"{rf}_conc8_gpus_12_ctx_4_gen_8.json"] = _raw(conc=8)  # a raw file is never a result
    out = collect_job(db_session, FakeArtifacts(_zip(members), name=f"bmk_{rf}"), job_id)
    assert out.state == "succeeded", out
    stored = db_session.scalars(select(Result).where(Result.job_id == job_id)).all()
    assert sorted(r.conc for r in stored) == [8, 16, 32, 64, 128]
    assert {r.file_name for r in stored} == {n for n in members if n.startswith("agg_")}
