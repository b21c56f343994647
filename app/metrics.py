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
GITHUB_CALLS = Counter(
    "sweepbot_github_calls_total", "GitHub API calls by operation and status", ["operation", "status"]
)
JOBS = Gauge("sweepbot_jobs", "Sweep jobs by state", ["state"])
REDELIVERIES = Counter(
    "sweepbot_redeliveries_requested_total",
    "Webhook deliveries GitHub failed to send that the bot asked to redeliver, by hook and outcome",
    ["hook", "outcome"],
)
# Figures counted in the database (stored deliveries, queue depth, redeliveries by state, ages)
# are read at scrape time by app/web/dbmetrics.py, and absent while the database is down.
