"""The figures ``/metrics`` reads from the database at scrape time, or none of them.

Counted in the database, they are right across processes (API replicas, workers). When the
database cannot be read, every one of them is *unknown*: the scrape then carries none of them and
``sweepbot_db_up 0``, the way Prometheus' own exporters report a source they could not reach
(``pg_up``, ``mysql_up``, ``redis_up``). A 0 would be a lie an alert believes (an empty queue, no
waiting delivery) and a kept value a stale one; NaN would silence ``> threshold`` alerts as
surely and poison every ``sum()`` it joins. An absent series is what ``absent()`` and
``sweepbot_db_up == 0`` alerts are written for.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from app.db import session_scope
from app.flows.ingest.deliveries import oldest_unprocessed, queue_depth, queue_progress
from app.flows.ingest.redelivery import counts
from app.models import Delivery
from app.store.attention import attention_counts
from app.store.publications import problem_counts

log = structlog.get_logger(__name__)

DEPTH_STATUSES = ("received", "queued", "processing", "retry")


@dataclass(frozen=True)
class Figures:
    stored: list[tuple[str, str, int]]  # event, status, count
    depth: dict[str, int]
    oldest: datetime | None
    consumed: datetime | None
    redeliveries: dict[str, int]
    publications: dict[str, int]  # merged PRs main did not publish verifiably, by runbook case
    attention: dict[str, int]  # what needs a human (app.store.attention), by kind


def read_figures() -> Figures:
    with session_scope() as session:
        rows = session.execute(
            select(Delivery.event, Delivery.status, func.count()).group_by(Delivery.event, Delivery.status)
        ).all()
        return Figures(
            stored=[(str(e), str(s), int(n)) for e, s, n in rows],
            depth=queue_depth(session),
            oldest=oldest_unprocessed(session),
            consumed=queue_progress(session).consumed_at,
            redeliveries=counts(session),
            publications=problem_counts(session),
            attention=attention_counts(session),
        )


class DatabaseFigures(Collector):
    """A custom collector: ``collect`` runs once per scrape."""

    def collect(self) -> Iterator[Metric]:
        try:
            figures = read_figures()
        except Exception as exc:  # the database is down (or its schema is not there yet)
            log.warning("metrics_database_unreadable", error=f"{exc.__class__.__name__}: {str(exc)[:200]}")
            yield GaugeMetricFamily("sweepbot_db_up", _UP_HELP, value=0.0)
            return
        yield GaugeMetricFamily("sweepbot_db_up", _UP_HELP, value=1.0)
        yield from figure_families(figures, datetime.now(UTC))


_UP_HELP = "1 when the database figures of this scrape were read, 0 when they are unknown (and absent)"


def figure_families(figures: Figures, t: datetime) -> Iterator[Metric]:
    stored = GaugeMetricFamily(
        "sweepbot_deliveries_stored", "Stored deliveries by event and status", labels=["event", "status"]
    )
    for event, status, count in figures.stored:
        stored.add_metric([event, status], float(count))
    yield stored
    depth = GaugeMetricFamily("sweepbot_queue_depth", "Deliveries stored but not finished", labels=["status"])
    for status in DEPTH_STATUSES:
        depth.add_metric([status], float(figures.depth.get(status, 0)))
    yield depth
    yield GaugeMetricFamily(
        "sweepbot_oldest_unprocessed_delivery_age_seconds",
        "Age of the oldest stored delivery not yet done, ignored or failed (0 when none)",
        value=(t - figures.oldest).total_seconds() if figures.oldest is not None else 0.0,
    )
    if figures.consumed is not None:
        yield GaugeMetricFamily(
            "sweepbot_delivery_consumed_age_seconds",
            "Seconds since a worker last started on deliveries",
            value=(t - figures.consumed).total_seconds(),
        )
    redeliveries = GaugeMetricFamily(
        "sweepbot_redeliveries",
        "GUIDs asked for again, by state: requested, recovered (stored since), refused by GitHub",
        labels=["state"],
    )
    for state, n in figures.redeliveries.items():
        redeliveries.add_metric([state], float(n))
    yield redeliveries
    publications = GaugeMetricFamily(
        "sweepbot_publication_problems",
        "Merged PRs main did not publish verifiably, by the runbook's case (case_a, case_b, needs_sweep)",
        labels=["case"],
    )
    for case, n in figures.publications.items():
        publications.add_metric([case], float(n))
    yield publications
    attention = GaugeMetricFamily(
        "sweepbot_needs_a_human",
        "Problems only a person can fix, by kind: pinned_deleted, registry_unreachable, "
        "dependency_missing, cannot_prioritise",
        labels=["kind"],
    )
    for kind, n in figures.attention.items():
        attention.add_metric([kind], float(n))
    yield attention
