"""Prometheus metrics (prometheus-client). Multi-process safe when PROMETHEUS_MULTIPROC_DIR is set."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

DELIVERIES = Counter(
    "sweepbot_deliveries_total", "Webhook deliveries by event and outcome", ["event", "outcome"]
)
INGEST_TO_DONE = Histogram(
    "sweepbot_delivery_ingest_to_done_seconds",
    "Seconds from a delivery being stored to its processing finishing",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900),
)
TASK_FAILURES = Counter("sweepbot_task_failures_total", "Task failures by task and kind", ["task", "kind"])
QUEUE_DEPTH = Gauge("sweepbot_queue_depth", "Deliveries stored but not finished", ["status"])
GITHUB_CALLS = Counter(
    "sweepbot_github_calls_total", "GitHub API calls by operation and status", ["operation", "status"]
)
JOBS = Gauge("sweepbot_jobs", "Sweep jobs by state", ["state"])
REDELIVERIES = Counter(
    "sweepbot_redeliveries_requested_total",
    "Webhook deliveries GitHub failed to send that the bot asked to redeliver, by hook and outcome",
    ["hook", "outcome"],
)
PUBLICATION_PROBLEMS = Gauge(
    "sweepbot_publication_problems",
    "Merged PRs main did not publish verifiably, by the runbook's case (case_a, case_b, needs_sweep)",
    ["case"],
)
REDELIVERY_STATE = Gauge(
    "sweepbot_redeliveries",
    "GUIDs asked for again, by state: requested, recovered (stored since), refused by GitHub",
    ["state"],
)
