"""Sweeps: plan a config key's points into jobs, release them onto scarce runners, follow the runs.

This module is the capability's one import for its callers (it re-exports; see the end).

Lifecycle of a job: ``queued -> dispatched -> running -> succeeded | failed | cancelled | reused``.

Concurrency contract (several workers, several beat ticks at once):

- A tick works one runner label at a time inside a short transaction that first takes that
  label's lock row (``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL: a label another tick is
  serving is skipped; on SQLite the first statement is a guarded UPDATE of the row, which takes
  the database write lock so the in-flight count read after it is current). Under that lock it
  counts the runner slots in flight, picks jobs, and claims them with a guarded
  ``UPDATE ... WHERE state='queued'``. The claim commits *before* the GitHub call.
- The dispatch then happens outside any transaction and its run id is recorded afterwards. A crash
  between claim and record leaves a ``dispatched`` job without a run id; the repair poll finds its
  run by the unique run name ``sweepbot-<sweep id>-<job id>``, or re-queues it when no run exists.
  So a job is never dispatched twice by two ticks, and never lost.

Grouping: the benchmark repo's CLI (``test-config --config-files F --config-keys K --conc C``, see
app/core/sweepcli.py) selects points by key + conc only, so one dispatch covers every point of the key at
that conc — every seq-len and tp (tp=4 and tp=8 at conc 64 share one run). Jobs of a
sweep that one dispatch covers carry the same ``group_key`` and are released together; ``slots`` is
how many runners that dispatch really occupies (all points the command expands to, even those the
sweep filtered out), and that is what counts against capacity. A template that also uses ``{seq}``
or ``{tp}`` narrows its groups accordingly.

Order: priority class, then round-robin across sweeps (the sweep served least recently first),
then the sweep's point order, which is fixed when the sweep is created (``point_order``) and stored
as each job's ``position``: largest conc first, ties in the repo's expansion order. A benchmark
job's duration grows with conc, so starting the long jobs first (longest-processing-time-first)
keeps the tail short when several sweeps share a label (docs/benchmarks.md, "Scheduler"). Views
(``sweep status``, the report) list points the way users read a curve instead: ``display_key``,
ascending conc per seq-len and tp. See docs/scheduling.md.


Where each part lives (issue 17: one direction of flow): pure decisions in ``app.core.sweepspec``
(values, checks, template, point order) and ``app.core.release`` (which queued dispatches go now);
queries in ``app.store.sweeps`` / ``jobs`` / ``runnerlabels`` / ``reuse``; one flow module per
capability: ``sweeprequest`` + ``sweepcreate`` (requesting, storing), ``sweepcancel`` (cancel,
supersede, retry, pause), ``forkapproval``, ``tick`` + ``dispatch`` (release, send), ``runtracking``
+ ``labelruns`` (following runs), ``repair`` (the poll), ``jobfinish``, ``sweepviews``. This module
only re-exports them (their event handlers are on ``runtracking.router`` and ``sweepcancel.router``).
"""

from __future__ import annotations

from app.core.sweepspec import (
    AGENTIC_SEQ,
    KEY_RE,
    LABEL_RE,
    REPO_RE,
    SHA_RE,
    SweepError,
    SweepFilters,
    dispatch_eval_flags,
    display_key,
    group_fields,
    group_key,
    point_order,
    points_digest,
    render_dispatch,
)
from app.flows.benchrepo import DEFAULT_CAPACITY, clear_capacity_cache, label_capacity, locate, master_files
from app.flows.dispatch import check_dispatch, workflow_spec
from app.flows.forkapproval import approve_pr
from app.flows.jobfinish import finish_job
from app.flows.labelruns import sweep_settings
from app.flows.repair import RepairResult, repair_jobs
from app.flows.ring import tick_later
from app.flows.runtracking import apply_workflow_job, apply_workflow_run, on_workflow_job, on_workflow_run
from app.flows.sweepcancel import (
    cancel_pr_sweeps,
    cancel_sweep,
    on_pull_request_closed,
    on_pull_request_synchronize,
    retry_job,
    retry_sweep,
    set_label_paused,
)
from app.flows.sweepcreate import create_sweep
from app.flows.sweeprequest import SweepPlan, SweepRequest, plan_for, reply_text, request_sweep
from app.flows.sweepviews import queue_snapshot, sweep_summary
from app.flows.tick import TickResult, tick
from app.store.jobs import inflight_slots
from app.store.sweeps import sweep_mode

__all__ = [
    "tick_later",
    "AGENTIC_SEQ",
    "DEFAULT_CAPACITY",
    "KEY_RE",
    "LABEL_RE",
    "REPO_RE",
    "RepairResult",
    "SHA_RE",
    "SweepError",
    "SweepFilters",
    "SweepPlan",
    "SweepRequest",
    "TickResult",
    "apply_workflow_job",
    "apply_workflow_run",
    "approve_pr",
    "cancel_pr_sweeps",
    "cancel_sweep",
    "check_dispatch",
    "clear_capacity_cache",
    "create_sweep",
    "dispatch_eval_flags",
    "display_key",
    "finish_job",
    "group_fields",
    "group_key",
    "inflight_slots",
    "label_capacity",
    "locate",
    "master_files",
    "on_pull_request_closed",
    "on_pull_request_synchronize",
    "on_workflow_job",
    "on_workflow_run",
    "plan_for",
    "point_order",
    "points_digest",
    "queue_snapshot",
    "render_dispatch",
    "repair_jobs",
    "reply_text",
    "request_sweep",
    "retry_job",
    "retry_sweep",
    "set_label_paused",
    "sweep_mode",
    "sweep_settings",
    "sweep_summary",
    "tick",
    "workflow_spec",
]
