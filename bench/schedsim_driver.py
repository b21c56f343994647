"""The event loop of bench/schedsim.py: the bot's real code driven on the sim's virtual clock."""

from __future__ import annotations

import contextlib
import heapq
import itertools
import random
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from bench.schedsim import (
    KEY,
    LABEL,
    POLL_OPS,
    REPORT_OPS,
    Config,
    Figures,
    VirtualClock,
    idle_share,
    lower_bound,
    percentile,
    pr_master,
    utc,
)
from bench.schedsim_idle import IdleSample, idle_causes

BOT = "bench"
MAX_LOOPS = 2_000_000


class Driver:
    def __init__(self, cfg: Config, tmp: str) -> None:
        import time

        self.cfg = cfg
        self.tmp = tmp
        self.rng = random.Random(cfg.seed)
        self.clock = VirtualClock(float(int(time.time())))
        self.t0 = self.clock.now
        self.tasks: list[tuple[str, tuple[Any, ...]]] = []
        self.patches: list[tuple[Any, str, Any]] = []
        self.samples: list[tuple[float, int, int]] = []
        self.idle_samples: list[IdleSample] = []
        self.cursor = 0
        self.due: list[tuple[float, int, Any]] = []  # (due time, seq, delivery) webhooks in flight
        self.seq = itertools.count()
        self.dropped = 0
        self.job_events = 0
        self.injected: Counter[str] = Counter()
        self.violations = 0
        self.budget_modes: Counter[str] = Counter()
        self.max_hour_calls = 0
        self.violation_log: list[tuple[float, int, int]] = []
        self.loops = 0
        self.next_lost = cfg.runner_lost_every
        self.runs_seen: set[int] = set()
        self.cancel_at: list[tuple[float, int]] = []  # (time, sim run id) runs to cancel through the API
        self.sweeps: dict[int, int] = {}  # pr index -> sweep id
        self.user_cancel: dict[int, float] = {}  # pr index -> time its sweep is cancelled
        self.server: Any = None
        # wall time of the loop's start and of the last progress line, jobs final then (loop sets them)
        self.wall0 = self.progress_at = 0.0
        self.progress_done = 0

    # ------------------------------------------------------------------ setup

    def _patch(self, obj: Any, name: str, value: Any) -> None:
        self.patches.append((obj, name, getattr(obj, name)))
        setattr(obj, name, value)

    def setup(self) -> None:
        import sys
        import time

        import sim.world
        from sim.scenario import SeedScenario
        from sim.server import SimServer
        from sim.world import SimSettings, World

        # the world's modules read the virtual clock (the server and engine threads keep real time)
        for name, module in list(sys.modules.items()):
            if name.startswith(("sim.world", "sim.models")) and getattr(module, "time", None) is time:
                self._patch(module, "time", self.clock)
        assert sim.world is not None
        world = World(SimSettings(time_scale=1.0, seed=self.cfg.seed, rate_limit=self.cfg.rate_limit))
        self.server = SimServer(world=world).start()
        self.world = world
        scenario = SeedScenario(world, evals_assigned=self.cfg.evals_assigned)
        scenario.load()
        self.repo = scenario.facts["bench_repo"]
        self.master_path = scenario.facts["master_path"]
        self._make_prs()
        import os

        os.environ["SWEEPBOT_GITHUB_API_URL"] = self.server.github_api_url
        from app import db
        from app.adapters import queue
        from app.migrate import upgrade
        from app.settings import get_settings, reset_settings_cache

        db.dispose_engines()
        reset_settings_cache()
        self.settings = get_settings()
        upgrade(self.settings.database_url)
        self.factory = db.session_factory()
        from app.flows.repo.bot_config import read_bot_config

        with self.factory() as s:  # as the push's delivery would: the stored config the sweeps read
            read_bot_config(s, self.gw(s), self.repo)
            s.commit()
        import app.flows.results.collect
        import app.flows.results.reports
        import app.flows.scheduler.repair
        import app.flows.scheduler.tick
        import app.flows.sweeps.request
        from app.flows.ingest.handlers import composed

        composed()  # every module that binds enqueue is imported before it is replaced
        assert app.flows.results.collect and app.flows.results.reports and app.flows.scheduler.repair
        assert app.flows.sweeps.request and app.flows.scheduler.tick
        original = queue.enqueue
        for module in list(sys.modules.values()):  # every `from app.adapters.queue import enqueue`
            if getattr(module, "__name__", "").startswith(("app.", "workers.")) and (
                getattr(module, "enqueue", None) is original
            ):
                self._patch(module, "enqueue", self._enqueue)
        self._patch(queue, "enqueue", self._enqueue)
        import app.flows.scheduler.run_poll as runpoll

        self._patch(runpoll, "time", self.clock)
        from app.flows.repo.bench_repo import clear_capacity_cache
        from app.flows.scheduler import dispatch

        clear_capacity_cache()
        dispatch._workflow_cache.clear()  # a second run in this process starts cold too
        self.world.reset_calls()  # count the bot's calls only, not the scenario's setup

    def _make_prs(self) -> None:
        w = self.world
        # This bench measures the bot's own dispatches and its dispatch-time hold: the repo's bot
        # config says `dispatch` (label mode, the default, would leave the sweeps to run-sweep.yml).
        w.commit_files(
            self.repo,
            "main",
            {".github/sweepbot.yml": "version: 1\nsweep:\n  mode: dispatch\n"},
            "sweepbot: dispatch e2e-tests.yml",
            author="carol-writer",
            emit_push=False,
        )
        master = w.read_file(self.repo, self.master_path, "main")
        text = master.decode() if isinstance(master, bytes) else str(master)
        base = w.resolve(w.repo(self.repo), "main")
        self.prs: list[int] = []
        self.priority: list[str] = []
        arrivals, t = [], 0.0
        for i in range(self.cfg.prs):
            branch = f"bench-{i}"
            w.set_ref(self.repo, f"refs/heads/{branch}", base, pusher="carol-writer")
            tag = f"nightly-{i:040x}"
            w.commit_files(
                self.repo,
                branch,
                {self.master_path: pr_master(text, tag, self.cfg.conc_end)},
                f"bench recipe {i}",
                author="carol-writer",
                emit_push=False,
            )
            pr = w.open_pull(self.repo, branch, "main", f"bench PR {i}", user="carol-writer")
            self.prs.append(pr.number)
            self.priority.append("high" if i % self.cfg.high_every == self.cfg.high_every - 1 else "normal")
            if i >= self.cfg.burst:
                t += self.rng.expovariate(1.0 / self.cfg.mean_gap_s)
            arrivals.append(0.0 if i < self.cfg.burst else t)
        self.arrivals = arrivals
        # sweeps cancelled by their PR: spread over the PRs, halfway through their expected work
        for k in range(self.cfg.user_cancels):
            i = (k * 7 + 3) % self.cfg.prs
            self.user_cancel[i] = arrivals[i] + 1800.0
        w.deliveries.clear()

    def close(self) -> None:
        from app import db

        if self.server is not None:
            self.server.stop()
        for obj, name, value in reversed(self.patches):
            setattr(obj, name, value)
        db.dispose_engines()

    # ------------------------------------------------------------------ the bot's side

    def _enqueue(self, task: str, *args: Any) -> None:
        self.tasks.append((task, args))

    def gw(self, session: Any) -> Any:
        from app.adapters.github.gateway import gateway

        return gateway(self.settings, session)

    def _request(self, i: int) -> None:
        from app.flows.sweeps.request import request_sweep

        with self.factory() as s:
            req = request_sweep(
                s,
                self.gw(s),
                repo=self.repo,
                pr_number=self.prs[i],
                config_key=KEY,
                requested_by=BOT,
                reason="api",
                priority=self.priority[i],
            )
            self.sweeps[i] = req.sweep.id
            s.commit()

    def _deliver(self, d: Any) -> None:
        """What a worker does with a stored delivery (app.flows.ingest.deliveries): its handlers,
        one session."""
        from app.core.routing import Event, HandlerContext, HandlerSkipped, TransientError
        from app.flows.ingest.deliveries import delivery_gateways
        from app.flows.ingest.handlers import composed
        from app.flows.scheduler import run_tracking as runtracking

        router = composed()
        if self.cfg.strategy == "baseline":
            runtracking.clear_run_jobs_cache()  # main read the run's jobs on every ambiguous event
        with self.factory() as session:
            event = Event(d.guid, d.event, d.action, d.payload)
            ctx = HandlerContext(session=session, event=event, gateways=delivery_gateways(session, event))
            try:
                for handler in router.handlers_for(d.event, d.action):
                    with contextlib.suppress(HandlerSkipped):
                        handler(ctx)
                session.commit()
            except TransientError:
                session.rollback()
                heapq.heappush(self.due, (self.clock.now + 60.0, next(self.seq), d))  # the worker retries
                return
        for callback in ctx.after_commit:
            callback()

    def _run_tasks(self) -> bool:
        from app.flows.results import collect as results

        ran = False
        while self.tasks:
            task, args = self.tasks.pop(0)
            if task == "sweepbot.collect_job":
                with self.factory() as s:
                    results.collect_job(s, self.gw(s), int(args[0]))
                    s.commit()
                ran = True
            elif task == "sweepbot.scheduler_tick":
                self.tick_wanted = True
        return ran

    def _tick(self) -> bool:
        from app.flows.scheduler.tick import tick

        res = tick(self.factory, self.gw)
        self._check_inflight()
        return bool(res.dispatched_runs)

    def _check_inflight(self) -> None:
        from app.store.jobs import inflight_slots

        with self.factory() as s:
            held = inflight_slots(s, LABEL)
        with self.world.lock:
            busy = sum(
                1
                for j in self.world.jobs.values()
                if j.label == LABEL and j.status in ("queued", "in_progress")
            )
        runners = len(self.world.runners.get(LABEL, []))
        if held > runners or busy > runners:
            self.violations += 1
            self.violation_log.append((self.clock.now - self.t0, held, busy))

    def _repair(self) -> None:
        if self.cfg.strategy == "baseline":
            self._baseline_repair()
            return
        from app.flows.scheduler import run_poll as runpoll
        from app.flows.scheduler.repair import repair_jobs

        repair_jobs(self.factory, self.gw)
        with self.factory() as s:
            decision = runpoll.load_budget(s).decision or {}
        self.budget_modes[str(decision.get("mode") or "none")] += 1
        self._note_hour()

    def _note_hour(self) -> None:
        with self.world.lock:
            used = max((b.used for b in self.world.budgets.values()), default=0)
        self.max_hour_calls = max(self.max_hour_calls, used)

    def _baseline_repair(self) -> None:
        """main before this change: one get-workflow-run per in-flight job per poll (a run is
        skipped only once seen completed), then the rest of the repair poll."""
        from sqlalchemy import select

        from app.flows.scheduler.run_tracking import apply_workflow_run
        from app.models.sweeps import JobState, Sweep, SweepJob

        with self.factory() as s:
            rows = s.execute(
                select(SweepJob.id, SweepJob.run_id, Sweep.repo)
                .join(Sweep, Sweep.id == SweepJob.sweep_id)
                .where(SweepJob.state.in_(JobState.IN_FLIGHT), SweepJob.run_id.is_not(None))
                .where((SweepJob.run_conclusion.is_(None)) | (SweepJob.run_conclusion != "success"))
                .order_by(SweepJob.id)
            ).all()
        done: set[int] = set()
        for _job_id, run_id, repo in rows:
            assert run_id is not None  # the query keeps only jobs with a run
            if run_id in done:
                continue
            after: list[Callable[[], None]] = []
            with self.factory() as s:
                gw = self.gw(s)
                run = gw.get_run(repo, int(run_id))
                apply_workflow_run(s, gw, run, after_commit=after, settings=self.settings)
                s.commit()
            if run.get("status") == "completed":
                done.add(int(run_id))
            for callback in after:
                callback()

    def _flush(self) -> None:
        from sqlalchemy import update

        from app.flows.results import reports
        from app.models.results import ReportState

        if self.cfg.strategy == "baseline":
            # main looked the sticky comment up before every edit (list + edit): forget its id
            with self.factory() as s:
                s.execute(update(ReportState).values(comment_id=None))
                s.commit()
        reports.flush_reports(
            self.factory, self.gw, debounce_seconds=self.cfg.debounce_s, now=utc(self.clock.now)
        )

    # ------------------------------------------------------------------ injections

    def _inject_before_tick(self) -> None:
        every = self.cfg.runner_lost_every
        if every <= 0:
            return
        with self.world.lock:
            started = sum(
                1 for j in self.world.jobs.values() if j.label == LABEL and j.started_at is not None
            )
            if started + 1 >= self.next_lost and self.world.faults.runner_lost_next == 0:
                self.world.faults.runner_lost_next = 1  # the next job to start loses its runner
                self.next_lost += every
                self.injected["runner_lost"] += 1

    def _inject_after_tick(self) -> None:
        every = self.cfg.system_cancel_every
        with self.world.lock:
            fresh = [
                r
                for r in self.world.runs.values()
                if r.status == "in_progress" and r.id not in self.runs_seen
            ]
        for run in sorted(fresh, key=lambda r: r.id):
            self.runs_seen.add(run.id)
            if every > 0 and len(self.runs_seen) % every == 0:
                self.cancel_at.append((self.clock.now + 240.0, run.id))

    def _system_cancels(self) -> None:
        now = self.clock.now
        for when, run_id in [c for c in self.cancel_at if c[0] <= now]:
            self.cancel_at.remove((when, run_id))
            run = self.world.runs.get(run_id)
            if run is not None and run.status != "completed":
                self.world.cancel_run(run_id)
                self.injected["run_cancelled"] += 1

    def _user_cancels(self) -> None:
        from app.flows.sweeps.cancel import cancel_sweep

        for i, when in list(self.user_cancel.items()):
            if self.t0 + when <= self.clock.now and i in self.sweeps:
                with self.factory() as s:
                    cancel_sweep(
                        s, self.gw(s), self.sweeps[i], actor=BOT, reason="bench: the PR cancelled its sweep"
                    )
                    s.commit()
                del self.user_cancel[i]
                self.injected["user_cancel"] += 1

    # ------------------------------------------------------------------ the loop

    def _intake(self) -> None:
        """New sim deliveries: the job events are sent (some never arrive), the rest is not ours."""
        fresh = self.world.deliveries[self.cursor :]
        self.cursor += len(fresh)
        for d in fresh:
            if d.event not in ("workflow_job", "workflow_run"):
                continue
            self.job_events += 1
            if self.rng.random() < self.cfg.webhook_drop:
                self.dropped += 1
                continue
            heapq.heappush(self.due, (d.created_at + self.cfg.webhook_delay_s, next(self.seq), d))

    def _settle(self) -> None:
        """Everything that happens at this instant: deliveries due, tasks, ticks, the fleet."""
        for _ in range(200):
            moved = False
            self._intake()
            while self.due and self.due[0][0] <= self.clock.now:
                self._deliver(heapq.heappop(self.due)[2])
                moved = True
            moved |= self._run_tasks()
            if self.tick_wanted:
                self.tick_wanted = False
                # A tick with no runner free does nothing (the scheduler frees a slot only after
                # the fleet did): skip it, the bench's wall time is mostly ticks.
                if self.world.free_runners(LABEL) > 0:
                    moved |= self._tick()
            self._inject_before_tick()
            self.world.tick()
            self._inject_after_tick()
            self._intake()
            if not moved and not self.tasks and not self.tick_wanted:
                return

    def _sample(self) -> None:
        from sqlalchemy import func, select

        from app.models.sweeps import JobState, Sweep, SweepJob, SweepState
        from app.store.jobs import inflight_slots

        queued_widths = (
            select(func.max(SweepJob.slots))
            .join(Sweep, Sweep.id == SweepJob.sweep_id)
            .where(SweepJob.state == JobState.QUEUED, Sweep.state == SweepState.ACTIVE)
            .group_by(SweepJob.sweep_id, SweepJob.group_key)
        )
        # Every job of the bench is on LABEL: both counts are ranges of the (label, state) index,
        # not scans of every job so far (a sample is taken at every event).
        with self.factory() as s:
            waiting = s.scalar(
                select(func.count(SweepJob.id))
                .join(Sweep, Sweep.id == SweepJob.sweep_id)
                .where(
                    SweepJob.runner_label == LABEL,
                    SweepJob.state == JobState.QUEUED,
                    Sweep.state == SweepState.ACTIVE,
                )
            )
            open_jobs = s.scalar(
                select(func.count(SweepJob.id)).where(
                    SweepJob.runner_label == LABEL,
                    SweepJob.state.in_((JobState.QUEUED, *JobState.IN_FLIGHT)),
                )
            )
            held = inflight_slots(s, LABEL)
            narrowest = min((max(1, int(n or 1)) for n in s.scalars(queued_widths)), default=0)
        with self.world.lock:
            busy = sum(1 for j in self.world.jobs.values() if j.label == LABEL and j.status == "in_progress")
            queued = sum(1 for j in self.world.jobs.values() if j.label == LABEL and j.status == "queued")
        self.samples.append((self.clock.now, busy, int(waiting or 0)))
        self.idle_samples.append(IdleSample(self.clock.now, busy, queued, held, int(waiting or 0), narrowest))
        self._note_hour()
        self.open_jobs = int(open_jobs or 0)

    def _progress(self) -> None:
        """Every minute of wall time, one line on stderr: how far the run got, and how fast."""
        import sys
        import time

        wall = time.monotonic()
        if wall - self.progress_at < 60.0:
            return
        done = self.jobs_final()
        rate = (done - self.progress_done) / ((wall - self.progress_at) / 60.0)
        self.progress_at, self.progress_done = wall, done
        print(
            f"[{self.cfg.strategy}] wall {wall - self.wall0:.0f} s, "
            f"simulated {self.clock.now - self.t0:.0f} s: "
            f"{done} jobs final, {self.samples[-1][2] if self.samples else 0} queued, "
            f"{self.open_jobs} open; {rate:.0f} jobs/min",
            file=sys.stderr,
            flush=True,
        )

    def jobs_final(self) -> int:
        from sqlalchemy import func, select

        from app.models.sweeps import JobState, SweepJob

        with self.factory() as s:
            return int(
                s.scalar(select(func.count(SweepJob.id)).where(SweepJob.state.in_(JobState.FINAL))) or 0
            )

    def _next_time(self, beats: dict[str, float]) -> float:
        now = self.clock.now
        times = list(beats.values())
        if self.due:
            times.append(self.due[0][0])
        if self.next_arrival < self.cfg.prs:
            times.append(self.t0 + self.arrivals[self.next_arrival])
        times += [self.t0 + t for t in self.user_cancel.values()]
        times += [t for t, _ in self.cancel_at]
        with self.world.lock:
            times += [
                j.ends_at_real
                for j in self.world.jobs.values()
                if j.status == "in_progress" and j.ends_at_real
            ]
        later = [t for t in times if t > now]
        return min(later) if later else now + 1.0

    def loop(self) -> None:
        cfg = self.cfg
        self.next_arrival = 0
        self.tick_wanted = False
        self.open_jobs = 0
        import time

        self.wall0 = self.progress_at = time.monotonic()
        self.progress_done = 0
        beats = {
            "repair": self.t0 + cfg.repair_interval_s,
            "tick": self.t0 + cfg.scheduler_interval_s,
            "flush": self.t0 + cfg.debounce_s,
        }
        while self.loops < MAX_LOOPS:
            self.loops += 1
            now = self.clock.now
            while self.next_arrival < cfg.prs and self.t0 + self.arrivals[self.next_arrival] <= now:
                self._request(self.next_arrival)
                self.next_arrival += 1
                self.tick_wanted = True
            self._user_cancels()
            self._system_cancels()
            self._settle()
            if now >= beats["repair"]:
                self._repair()
                beats["repair"] += cfg.repair_interval_s
                self._settle()
            if now >= beats["tick"]:
                self.tick_wanted = True
                beats["tick"] += cfg.scheduler_interval_s
                self._settle()
            if now >= beats["flush"]:
                self._flush()
                beats["flush"] += cfg.debounce_s
            self._sample()
            self._progress()
            if self.next_arrival >= cfg.prs and self.open_jobs == 0 and not self.due and not self.tasks:
                self._flush()  # the final state of every report lands
                break
            self.clock.now = self._next_time(beats)
        self.end = self.clock.now

    # ------------------------------------------------------------------ figures

    def figures(self) -> Figures:
        from sqlalchemy import func, select

        from app.core.unexpanded_jobs import eval_not_run
        from app.models.results import EvalResult
        from app.models.sweeps import SweepJob

        cfg = self.cfg
        sweep_pr = {sid: i for i, sid in self.sweeps.items()}
        with self.world.lock:
            spans = []
            for j in self.world.jobs.values():
                if j.label != LABEL or j.started_at is None or j.completed_at is None:
                    continue
                name = str(self.world.runs[j.run_id].inputs.get("test-name") or "")
                parts = name.split("-")
                sweep_id = int(parts[1]) if len(parts) >= 3 and parts[1].isdigit() else -1
                spans.append((j.started_at - self.t0, j.completed_at - self.t0, sweep_pr.get(sweep_id, -1)))
            calls = self.world.call_summary()
            runners = len(self.world.runners.get(LABEL, []))
        work: defaultdict[int, float] = defaultdict(float)
        longest: dict[int, float] = {}
        first: dict[int, float] = {}
        for a, b, i in spans:
            work[i] += b - a
            longest[i] = max(longest.get(i, 0.0), b - a)
            first[i] = min(first.get(i, a), a)
        makespan = max((b for _, b, _ in spans), default=0.0)
        bound = lower_bound(self.arrivals, dict(work), longest, runners)
        high = [
            first[i] - self.arrivals[i] for i in range(cfg.prs) if self.priority[i] == "high" and i in first
        ]
        with self.factory() as s:
            states = dict(
                s.execute(select(SweepJob.state, func.count(SweepJob.id)).group_by(SweepJob.state)).all()
            )
            planned = [
                r
                for r in s.execute(select(SweepJob.id, SweepJob.point, SweepJob.reason))
                if r[1].get("run-eval")
            ]
            scored = set(s.scalars(select(EvalResult.job_id)))
        jobs = sum(states.values())
        evals = {"planned": len(planned), "scored": sum(r[0] in scored for r in planned)}
        evals["not_run"] = sum(eval_not_run(r[2]) for r in planned)  # the workflow never ran them
        by_op = calls["by_operation"]

        def counted(ops: tuple[str, ...]) -> int:
            return sum(n for op in ops for status, n in by_op.get(op, {}).items() if status != "304")

        poll, report = counted(POLL_OPS), counted(REPORT_OPS)
        limited = calls["rate_limited"]
        edits = sum(
            n for op in ("issues/update-comment", "issues/create-comment") for n in by_op.get(op, {}).values()
        )
        return Figures(
            strategy=cfg.strategy,
            jobs=jobs,
            points=jobs,
            runners=runners,
            makespan_s=round(makespan, 1),
            lower_bound_s=round(bound, 1),
            ratio=round(makespan / bound, 4) if bound else 0.0,
            idle_share_while_queued=round(idle_share(self.samples, runners), 4),
            idle_causes=idle_causes(self.idle_samples, runners),
            p95_high_first_wait_s=round(percentile(high, 0.95), 1),
            max_high_first_wait_s=round(max(high, default=0.0), 1),
            calls_total=calls["total"],
            calls_rate_limited=limited,
            calls_not_modified=calls["not_modified"],
            calls_per_job=round(limited / jobs, 3) if jobs else 0.0,
            poll_calls_per_job=round(poll / jobs, 3) if jobs else 0.0,
            report_calls_per_job=round(report / jobs, 3) if jobs else 0.0,
            webhook_path_calls_per_job=round((limited - poll) / jobs, 3) if jobs else 0.0,
            report_edits=edits,
            job_events=self.job_events,
            inflight_violations=self.violations,
            states={str(k): int(v) for k, v in states.items()},
            eval_points=evals,
            by_operation=by_op,
            dropped_deliveries=self.dropped,
            injected=dict(self.injected),
            loops=self.loops,
            budget_modes=dict(self.budget_modes),
            max_hour_calls=self.max_hour_calls,
        )
