"""Dashboard page latency with a realistic history in PostgreSQL (a benchmark, not a test).

Creates a database of its own on the local server, migrates it, bulk-loads (COPY) 10,000 sweeps
with ~100,000 jobs, 200,000 results, 20,000 deliveries, 50,000 audit entries and 200 watches,
then requests every page and its JSON API in-process (FastAPI TestClient) a bounded number of
times and prints p50/p95 per page. The database is dropped at the end.

    .venv/bin/python bench/dashboard.py [--requests 40] [--admin-url postgresql+psycopg://postgres@127.0.0.1:5432/postgres]
        [--results 200000] [--history 1|3|10] [--only /results]

`--history N` stores N times the results (the same keys and points, N times the runs: a year of
nightlies); the results pages must cost the same whatever N.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SWEEPS = 10_000
RESULTS = 200_000
DELIVERIES = 20_000
AUDIT = 50_000
WATCHES = 200
KEYS = [
    f"{m}-{p}-{r}-{f}"
    for m in ("minimaxm3", "dsr1", "llama70b", "qwen3")
    for p in ("fp4", "fp8")
    for r in ("mi355x", "mi300x")
    for f in ("vllm", "sglang")
]  # 32 config keys
CONCS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]


def _copy(
    conn: psycopg.Connection[Any], table: str, columns: list[str], rows: Iterable[tuple[object, ...]]
) -> int:
    """COPY rows in text format (tabs/newlines/backslashes never occur in the generated values)."""
    buf = io.StringIO()
    n = 0
    for row in rows:
        buf.write("\t".join("\\N" if v is None else str(v) for v in row) + "\n")
        n += 1
    with conn.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        copy.write(buf.getvalue())
    return n


def load(url: str) -> None:
    import psycopg

    rng = random.Random(7)
    now = datetime.now(UTC)
    t0 = time.perf_counter()
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        sweep_rows = []
        job_rows = []
        job_id = 0
        for sid in range(1, SWEEPS + 1):
            key = KEYS[sid % len(KEYS)]
            created = now - timedelta(minutes=(SWEEPS - sid) * 7)
            state = "active" if sid > SWEEPS - 20 else rng.choice(["done"] * 8 + ["cancelled", "superseded"])
            image = f"vllm/vllm-openai-rocm:nightly-{(sid // 40):040x}"
            sweep_rows.append(
                (
                    sid,
                    "SemiAnalysisAI/InferenceX",
                    1000 + sid // 5,
                    "a" * 40,
                    f"branch-{sid}",
                    "main",
                    False,
                    key,
                    image,
                    "f" * 64,
                    "d" * 64,
                    "sweepbot",
                    "bump",
                    1,
                    state,
                    0,
                    created.isoformat(),
                )
            )
            for pos, conc in enumerate(CONCS):
                job_id += 1
                if state == "active":
                    jstate = "succeeded" if pos < 5 else ("running" if pos < 6 else "queued")
                else:
                    jstate = "succeeded" if rng.random() > 0.02 else "failed"
                run_id = 10_000_000 + job_id if jstate != "queued" else None
                job_rows.append(
                    (
                        job_id,
                        sid,
                        pos,
                        json.dumps({"conc": conc}),
                        f"r_{key}_conc{conc}",
                        key.split("-")[2],
                        "8k1k",
                        conc,
                        4,
                        f"{sid}:{conc}",
                        1,
                        jstate,
                        1,
                        f"run-{job_id}" if run_id else None,
                        run_id,
                        f"https://github.com/x/y/actions/runs/{run_id}" if run_id else None,
                        created.isoformat(),
                        created.isoformat() if run_id else None,
                    )
                )
        _copy(
            conn,
            "sweeps",
            [
                "id",
                "repo",
                "pr_number",
                "head_sha",
                "head_ref",
                "base_ref",
                "is_fork",
                "config_key",
                "image",
                "fingerprint",
                "points_digest",
                "requested_by",
                "reason",
                "priority",
                "state",
                "last_release",
                "created_at",
            ],
            sweep_rows,
        )
        _copy(
            conn,
            "sweep_jobs",
            [
                "id",
                "sweep_id",
                "position",
                "point",
                "result_name",
                "runner_label",
                "seq",
                "conc",
                "tp",
                "group_key",
                "slots",
                "state",
                "attempts",
                "run_name",
                "run_id",
                "run_url",
                "created_at",
                "dispatched_at",
            ],
            job_rows,
        )

        def results() -> Iterable[tuple[object, ...]]:
            for rid in range(1, RESULTS + 1):
                key = KEYS[rid % len(KEYS)]
                conc = CONCS[(rid // len(KEYS)) % len(CONCS)]
                image_no = rid * 60 // RESULTS  # 60 nightlies over the history
                tpot = 6.0 * (conc**0.35) * (1 + 0.01 * rng.random()) * (0.97 if image_no > 30 else 1.0)
                created = now - timedelta(seconds=(RESULTS - rid) * 30)
                yield (
                    rid,
                    created.isoformat(),
                    f"r_{key}_conc{conc}",
                    key,
                    f"vllm/vllm-openai-rocm:nightly-{image_no:040x}",
                    "f" * 64,
                    "amd/MiniMax-M3-MXFP4",
                    key.split("-")[3],
                    key.split("-")[1],
                    key.split("-")[2],
                    8192,
                    1024,
                    conc,
                    4,
                    1,
                    1,
                    tpot,
                    tpot * 0.99,
                    tpot * 1.2,
                    700.0 * conc**0.3,
                    3000.0 * conc**0.6 / 4,
                    1000.0 / tpot,
                    "raw",
                    rid % SWEEPS + 1,
                    f"https://github.com/x/y/actions/runs/{rid}",
                )

        _copy(
            conn,
            "results",
            [
                "id",
                "created_at",
                "result_name",
                "config_key",
                "image",
                "fingerprint",
                "model",
                "framework",
                "precision",
                "runner",
                "isl",
                "osl",
                "conc",
                "tp",
                "pp",
                "ep",
                "mean_tpot_ms",
                "median_tpot_ms",
                "p99_tpot_ms",
                "mean_ttft_ms",
                "tput_per_gpu",
                "interactivity",
                "schema",
                "sweep_id",
                "run_url",
            ],
            results(),
        )
        body = json.dumps({"action": "completed", "repository": {"full_name": "SemiAnalysisAI/InferenceX"}})
        _copy(
            conn,
            "deliveries",
            ["id", "event", "action", "repo", "status", "attempts", "body", "body_bytes", "received_at"],
            (
                (
                    str(uuid.UUID(int=i)),
                    rng.choice(["workflow_run", "workflow_job", "issue_comment", "pull_request"]),
                    "completed",
                    "SemiAnalysisAI/InferenceX",
                    "done" if i % 200 else "failed",
                    1,
                    "\\\\x" + body.encode().hex(),
                    len(body),
                    (now - timedelta(seconds=(DELIVERIES - i) * 20)).isoformat(),
                )
                for i in range(DELIVERIES)
            ),
        )
        _copy(
            conn,
            "audit_log",
            ["at", "actor", "action", "target", "outcome", "detail"],
            (
                (
                    (now - timedelta(seconds=(AUDIT - i) * 10)).isoformat(),
                    rng.choice(["sweepbot", "alice", "bob"]),
                    rng.choice(["github.issues/update-comment", "sweep.cancel", "command.sweep"]),
                    f"SemiAnalysisAI/InferenceX#{i % 400}",
                    "ok",
                    json.dumps({"n": i}),
                )
                for i in range(AUDIT)
            ),
        )
        _copy(
            conn,
            "watches",
            [
                "id",
                "repo",
                "pr_number",
                "config_key",
                "source",
                "state",
                "image_repo",
                "pinned_image",
                "created_at",
                "updated_at",
            ],
            (
                (
                    i,
                    "SemiAnalysisAI/InferenceX",
                    1000 + i,
                    KEYS[i % len(KEYS)],
                    "body",
                    "waiting" if i % 3 else "bumped",
                    "vllm/vllm-openai-rocm",
                    f"vllm/vllm-openai-rocm:nightly-{(i % 60):040x}",
                    now.isoformat(),
                    now.isoformat(),
                )
                for i in range(1, WATCHES + 1)
            ),
        )
        _copy(
            conn,
            "watch_dependencies",
            ["watch_id", "dep_repo", "dep_number", "source", "state", "dropped", "updated_at"],
            (
                (
                    i,
                    "vllm-project/vllm",
                    47000 + i * 2 + d,
                    "body",
                    ["open", "merged", "closed"][(i + d) % 3],
                    False,
                    now.isoformat(),
                )
                for i in range(1, WATCHES + 1)
                for d in range(2)
            ),
        )
        _copy(
            conn,
            "image_tags",
            ["image_repo", "tag", "commit_sha", "seq", "pushed_at", "first_seen_at"],
            (
                (
                    "vllm/vllm-openai-rocm",
                    f"nightly-{i:040x}",
                    f"{i:040x}",
                    i,
                    (now - timedelta(days=60 - i)).isoformat(),
                    now.isoformat(),
                )
                for i in range(60)
            ),
        )
        _copy(
            conn,
            "runner_labels",
            ["label", "paused", "capacity", "release_seq"],
            [("mi355x", False, 9, 0), ("mi300x", False, 16, 0)],
        )
        with conn.cursor() as cur:
            for table in (
                "sweeps",
                "sweep_jobs",
                "results",
                "audit_log",
                "watches",
                "watch_dependencies",
                "image_tags",
            ):
                cur.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"
                )
            cur.execute("ANALYZE")
        conn.commit()
    indexed = _rebuild_result_index(url)
    print(
        f"results index: {indexed}"
        if indexed is not None
        else "results index: none (code without result_points)"
    )
    print(
        f"loaded {SWEEPS} sweeps, {len(job_rows)} jobs, {RESULTS} results, {DELIVERIES} deliveries, "
        f"{AUDIT} audit entries, {WATCHES} watches in {time.perf_counter() - t0:.1f} s"
    )


def _rebuild_result_index(url: str) -> int | None:
    """COPY bypassed the ORM, which keeps the results pages' index: build it as the migration does.
    None when the code under test has no index (measuring the code before it, PYTHONPATH=...)."""
    try:
        from app.store.resultpoints import rebuild
    except ImportError:
        return None
    from sqlalchemy.orm import sessionmaker

    from app.db import engine_for

    with sessionmaker(bind=engine_for(url))() as session:
        points = rebuild(session)
        session.commit()
    return points


def measure(requests: int, only: str | None = None) -> list[tuple[str, float, float, float]]:
    from fastapi.testclient import TestClient

    from app.web.main import create_app

    key = KEYS[0]
    paths = [
        "/",
        "/api/overview",
        "/watches",
        "/api/watches",
        "/sweeps",
        "/api/sweeps",
        "/sweeps?state=active",
        "/sweeps?config_key=" + key,
        "/sweeps?page=150",
        f"/sweeps/{SWEEPS - 3}",
        f"/api/sweeps/{SWEEPS - 3}",
        "/results",
        f"/results/{key}",
        f"/api/results/{key}",
        "/deliveries",
        "/deliveries?status=failed",
        f"/deliveries/{uuid.UUID(int=DELIVERIES - 5)}",
        "/audit",
        "/audit?actor=alice&page=20",
    ]
    if only:
        paths = [p for p in paths if p.startswith(only) or p.startswith("/api" + only)]
    rows = []
    with TestClient(create_app()) as client:
        for path in paths:
            for _ in range(3):  # warm caches and the connection pool
                assert client.get(path).status_code == 200, path
            samples = []
            deadline = time.monotonic() + 60  # bounded in time as well as count
            for _ in range(requests):
                t = time.perf_counter()
                resp = client.get(path)
                samples.append((time.perf_counter() - t) * 1000)
                assert resp.status_code == 200, (path, resp.status_code)
                if time.monotonic() > deadline:
                    break
            samples.sort()
            p95 = samples[min(len(samples) - 1, int(round(0.95 * len(samples))) - 1)]
            rows.append((path, statistics.median(samples), p95, max(samples)))
    return rows


def main() -> int:
    global RESULTS
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=40, help="timed requests per page")
    parser.add_argument("--admin-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--results", type=int, default=RESULTS, help="stored results at 1x history")
    parser.add_argument("--history", type=int, default=1, help="history multiplier of the results (1, 3, 10)")
    parser.add_argument("--only", default=None, help="only the pages under this path, e.g. /results")
    args = parser.parse_args()
    RESULTS = args.results * args.history

    from sqlalchemy import create_engine, text

    name = f"sweepbot_bench_dash_{uuid.uuid4().hex[:8]}"
    admin = create_engine(args.admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = args.admin_url.rsplit("/", 1)[0] + f"/{name}"
    os.environ["SWEEPBOT_DATABASE_URL"] = url
    os.environ.setdefault("SWEEPBOT_LOG_JSON", "true")
    os.environ.setdefault("SWEEPBOT_LOG_LEVEL", "WARNING")
    os.environ.setdefault("SWEEPBOT_RUNNER_CAPACITY", "mi355x=9,mi300x=16")
    try:
        from app.migrate import upgrade

        upgrade(url)
        load(url)
        rows = measure(args.requests, args.only)
        print(f"\n{'page':<48} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
        for path, p50, p95, worst in rows:
            flag = "" if p95 < 200 else "  <-- over 200 ms"
            print(f"{path:<48} {p50:8.1f} {p95:8.1f} {worst:8.1f}{flag}")
        over = [r for r in rows if r[2] >= 200]
        print(
            f"\n{len(rows) - len(over)}/{len(rows)} pages under 200 ms at p95 ({args.requests} requests each)"
        )
        return 0 if not over else 1
    finally:
        from app.db import dispose_engines

        dispose_engines()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


if __name__ == "__main__":
    raise SystemExit(main())
