"""Dashboard test data shaped like the sim's seed scenario (the MiniMax-M3 MI355X recipe PR).

Results go through the real parser and store (``app.core.resultfile.parse_result``,
``app.store.results.store_result``) with benchmark files from the sim's performance model
(``sim.perf.benchmark_result``); the other rows are written through the ORM, as the capabilities
that own them would leave them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from app.core.resultfile import parse_result
from app.models import Delivery, DeliveryStatus
from app.models.sweeps import JobState, RunnerLabel, Sweep, SweepJob, SweepState
from app.models.tracking import Bump, Dependency, DepState, ImageTag, Watch, WatchState
from app.store.audit import record
from app.store.results import store_result
from sim.perf import PerfInput, benchmark_result

REPO = "SemiAnalysisAI/InferenceX"
KEY = "minimaxm3-fp4-mi355x-vllm"
IMAGE_REPO = "vllm/vllm-openai-rocm"
CONCS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
SHAS = [f"{i:x}" * 40 for i in range(1, 7)]  # six nightlies, oldest first
OLD_IMAGE = f"{IMAGE_REPO}:nightly-{SHAS[1]}"
NEW_IMAGE = f"{IMAGE_REPO}:nightly-{SHAS[4]}"


@dataclass
class Seeded:
    active_sweep: int
    done_sweep: int
    failed_sweep: int
    failed_job: int
    watch: int
    delivery_failed: str
    delivery_done: str


def _store_results(session: Session, image: str, sweep_id: int, seed: int, job_ids: dict[int, int]) -> None:
    for conc in CONCS:
        raw = benchmark_result(PerfInput(framework="vllm", conc=conc, image=image), seed=seed)
        name = f"minimaxm3_fp4_vllm_tp4-pp1-dcp1-pcp1-ep1-dpafalse_disagg-false_spec-none_conc{conc}_mi355x"
        parsed = parse_result(json.dumps(raw), f"{name}.json", tp=4, gpus=4)
        point = {
            "result-name": name,
            "config-key": KEY,
            "model": "amd/MiniMax-M3-MXFP4",
            "framework": "vllm",
            "precision": "fp4",
            "runner": "mi355x",
            "isl": 8192,
            "osl": 1024,
            "conc": conc,
            "tp": 4,
        }
        run_id = 9000 + sweep_id * 100 + conc
        store_result(
            session,
            parsed,
            point=point,
            image=image,
            fingerprint="f" * 64,
            provenance={
                "job_id": job_ids.get(conc),
                "sweep_id": sweep_id,
                "repo": REPO,
                "run_id": run_id,
                "run_url": f"https://github.com/{REPO}/actions/runs/{run_id}",
                "file_name": f"{name}.json",
            },
        )


def _sweep(session: Session, *, image: str, state: str, created: datetime, pr: int = 12) -> Sweep:
    sweep = Sweep(
        repo=REPO,
        pr_number=pr,
        head_sha="a" * 40,
        head_ref="minimaxm3-fp4-mi355x-vllm-int4-qr",
        base_ref="main",
        config_key=KEY,
        config_path=".github/configs/amd-master.yaml",
        image=image,
        fingerprint="f" * 64,
        points_digest="d" * 64,
        requested_by="sweepbot",
        reason="bump",
        state=state,
        created_at=created,
    )
    session.add(sweep)
    session.flush()
    return sweep


def _jobs(session: Session, sweep: Sweep, states: list[str], created: datetime) -> dict[int, int]:
    ids: dict[int, int] = {}
    for pos, (conc, state) in enumerate(zip(CONCS, states, strict=True)):
        started = created + timedelta(minutes=5 * pos)
        running_or_done = state in (JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED)
        job = SweepJob(
            sweep_id=sweep.id,
            position=pos,
            point={"conc": conc, "tp": 4, "seq": "8k1k"},
            result_name=f"minimaxm3_fp4_vllm_conc{conc}",
            runner_label="mi355x",
            seq="8k1k",
            conc=conc,
            tp=4,
            group_key=f"{sweep.id}:{conc}",
            slots=1,
            state=state,
            attempts=1 if state != JobState.QUEUED else 0,
            run_name=f"sweepbot-{sweep.id}-{conc}" if state != JobState.QUEUED else None,
            run_id=9000 + sweep.id * 100 + conc if running_or_done else None,
            run_url=f"https://github.com/{REPO}/actions/runs/{9000 + sweep.id * 100 + conc}"
            if running_or_done
            else None,
            reason="benchmark_serving exited 1: server did not become healthy in 1800 s"
            if state == JobState.FAILED
            else None,
            created_at=created,
            dispatched_at=started if state != JobState.QUEUED else None,
            started_at=started if running_or_done else None,
            finished_at=started + timedelta(minutes=21) if state in JobState.FINAL else None,
        )
        session.add(job)
        session.flush()
        ids[conc] = job.id
    return ids


def seed(session: Session) -> Seeded:
    now = datetime.now(UTC).replace(microsecond=0)
    day = timedelta(days=1)
    # Nightly tags, oldest first; the oldest was deleted by the registry's retention.
    for i, sha in enumerate(SHAS):
        session.add(
            ImageTag(
                image_repo=IMAGE_REPO,
                tag=f"nightly-{sha}",
                commit_sha=sha,
                seq=i,
                pushed_at=now - (len(SHAS) - i) * day,
                last_seen_at=now,
                deleted_at=now - day if i == 0 else None,
            )
        )
    session.add(
        RunnerLabel(label="mi355x", paused=False, capacity=9, capacity_source="runners.yaml", release_seq=3)
    )

    watch = Watch(
        repo=REPO,
        pr_number=12,
        config_key=KEY,
        config_path=".github/configs/amd-master.yaml",
        source="body",
        state=WatchState.BUMPED,
        image_repo=IMAGE_REPO,
        pinned_image=NEW_IMAGE,
        chosen_tag=f"nightly-{SHAS[4]}",
        first_containing_tag=f"nightly-{SHAS[3]}",
        decision="bump",
        checked_at=now - timedelta(minutes=3),
    )
    session.add(watch)
    session.flush()
    session.add_all(
        [
            Dependency(
                watch_id=watch.id,
                dep_repo="vllm-project/vllm",
                dep_number=47269,
                source="body",
                state=DepState.MERGED,
                merge_sha=SHAS[3],
                title="[ROCm] INT4 quick reduce for MI355X",
                contained_in=f"nightly-{SHAS[3]}",
            ),
            Dependency(
                watch_id=watch.id,
                dep_repo="vllm-project/vllm",
                dep_number=47270,
                source="body",
                state=DepState.CLOSED,
                title="[ROCm] fp8 KV cache for MiniMax-M3",
                dropped=True,
                dropped_by="bob-maintainer",
            ),
            Bump(
                watch_id=watch.id,
                repo=REPO,
                config_key=KEY,
                image=NEW_IMAGE,
                old_image=OLD_IMAGE,
                config_path=".github/configs/amd-master.yaml",
                mode="pr_branch",
                branch="minimaxm3-fp4-mi355x-vllm-int4-qr",
                commit_sha="c" * 40,
                state="committed",
            ),
        ]
    )
    waiting = Watch(
        repo=REPO,
        pr_number=15,
        config_key="dsr1-fp8-mi355x-vllm",
        source="command",
        state=WatchState.WAITING,
        image_repo=IMAGE_REPO,
        pinned_image=OLD_IMAGE,
    )
    session.add(waiting)
    session.flush()
    session.add(
        Dependency(
            watch_id=waiting.id,
            dep_repo="vllm-project/vllm",
            dep_number=47301,
            source="command",
            state=DepState.OPEN,
            title="[ROCm] MLA decode kernel",
        )
    )

    old = _sweep(session, image=OLD_IMAGE, state=SweepState.DONE, created=now - 3 * day)
    old_ids = _jobs(session, old, [JobState.SUCCEEDED] * len(CONCS), now - 3 * day)
    _store_results(session, OLD_IMAGE, old.id, seed=1, job_ids=old_ids)
    failed = _sweep(session, image=OLD_IMAGE, state=SweepState.DONE, created=now - 2 * day, pr=14)
    failed_states = [JobState.SUCCEEDED] * 4 + [JobState.FAILED] + [JobState.CANCELLED] * 5
    failed_ids = _jobs(session, failed, failed_states, now - 2 * day)
    active = _sweep(session, image=NEW_IMAGE, state=SweepState.ACTIVE, created=now - timedelta(hours=2))
    active_states = [JobState.SUCCEEDED] * 6 + [JobState.RUNNING] * 2 + [JobState.QUEUED] * 2
    active_ids = _jobs(session, active, active_states, now - timedelta(hours=2))
    # The newest image's curve: every conc has a result (the two newest from an earlier partial run).
    _store_results(session, NEW_IMAGE, active.id, seed=2, job_ids=active_ids)

    deliveries = [
        ("d-0001-pr-opened", "pull_request", "opened", DeliveryStatus.DONE, None),
        ("d-0002-comment", "issue_comment", "created", DeliveryStatus.DONE, None),
        ("d-0003-run", "workflow_run", "completed", DeliveryStatus.IGNORED, None),
        (
            "d-0004-broken",
            "workflow_job",
            "completed",
            DeliveryStatus.FAILED,
            "KeyError: 'runner_name' in workflow_job payload",
        ),
        ("d-0005-push", "push", None, DeliveryStatus.DONE, None),
    ]
    for i, (did, event, action, status, error) in enumerate(deliveries):
        body = json.dumps(
            {
                "action": action,
                "repository": {"full_name": REPO},
                "sender": {"login": "alice-admin"},
                "number": 12,
            }
        ).encode()
        session.add(
            Delivery(
                id=did,
                event=event,
                action=action,
                repo=REPO,
                status=status,
                attempts=1 if status != DeliveryStatus.FAILED else 8,
                error=error,
                body=body,
                body_bytes=len(body),
                received_at=now - timedelta(minutes=50 - i),
                finished_at=now - timedelta(minutes=49 - i),
            )
        )
    record(
        session,
        actor="bob-maintainer",
        action="command.depends-on",
        target=f"{REPO}#12",
        detail={"drop": "vllm-project/vllm#47270"},
    )
    record(
        session,
        actor="sweepbot",
        action="github.git/update-ref",
        target=f"{REPO}:heads/minimaxm3",
        detail={"sha": "c" * 40},
    )
    session.commit()
    return Seeded(
        active_sweep=active.id,
        done_sweep=old.id,
        failed_sweep=failed.id,
        failed_job=failed_ids[16],
        watch=watch.id,
        delivery_failed="d-0004-broken",
        delivery_done="d-0001-pr-opened",
    )
