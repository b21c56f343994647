"""InferenceX's runner-label contract for its priority scheduler, read from a job's labels (pure).

With the repo variable ``PRIORITY_SCHEDULER_ENABLED`` set to ``true`` every GPU job of
``benchmark-tmpl.yml`` / ``benchmark-multinode-tmpl.yml`` asks, in its ``runs-on``, for
``self-hosted``, its runner label, ``ci-job-<score>-<32-hex queue token>`` and
``ci-attempt-<run attempt>`` (plus ``ci-skip-queue-pr-<n>`` for the ``skip_queue`` PR label, and
``nodes:<N>`` when node slots are on). Runners carry only their hardware and identity labels; a
controller adds the chosen job's scheduling labels to one idle runner so that GitHub's rule (an
idle runner takes the oldest queued job whose labels are a subset of its own) hands exactly that
job to that runner. ``ci-lease-…`` marks the runners reserved together for a ``nodes:N`` job.

Labels are case-insensitive at GitHub; everything here compares them lowercased.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

JOB_PREFIX = "ci-job-"
ATTEMPT_PREFIX = "ci-attempt-"
SKIP_PREFIX = "ci-skip-queue-pr-"
LEASE_PREFIX = "ci-lease-"
NODES_PREFIX = "nodes:"
CLUSTER_PREFIX = "cluster:"
SCHEDULING_PREFIXES = (JOB_PREFIX, ATTEMPT_PREFIX, SKIP_PREFIX, LEASE_PREFIX, NODES_PREFIX)
# Labels that name one job (or one lease): left on an idle runner they are stale. ``ci-attempt-N``
# and ``nodes:N`` alone admit no job (every contract job also needs its own ``ci-job-`` label), so
# an idle runner keeps them until a different value is wanted: one label write a job saved.
IDENTIFYING_PREFIXES = (JOB_PREFIX, SKIP_PREFIX, LEASE_PREFIX)

_JOB = re.compile(r"^ci-job-(?P<score>-?[0-9]+(?:\.[0-9]+)?)-(?P<token>[0-9a-f]{32})$")
_ATTEMPT = re.compile(r"^ci-attempt-(?P<n>[1-9][0-9]*)$")
_SKIP = re.compile(r"^ci-skip-queue-pr-(?P<n>[1-9][0-9]*)$")
_NODES = re.compile(r"^nodes:(?P<n>[1-9][0-9]*)$")

CANNOT_PRIORITISE = "this job cannot be prioritised: re-dispatch it"


def norm(labels: Iterable[str]) -> frozenset[str]:
    return frozenset(label.strip().lower() for label in labels)


def is_scheduling(label: str) -> bool:
    return label.lower().startswith(SCHEDULING_PREFIXES)


def is_identifying(label: str) -> bool:
    return label.lower().startswith(IDENTIFYING_PREFIXES)


def base_labels(labels: Iterable[str]) -> frozenset[str]:
    """A job's or runner's labels without the scheduling ones (what hardware it needs or has)."""
    return frozenset(label for label in norm(labels) if not is_scheduling(label))


def clusters(labels: Iterable[str]) -> frozenset[str]:
    return frozenset(label for label in norm(labels) if label.startswith(CLUSTER_PREFIX))


def lease_label(token: str, attempt: int) -> str:
    """The one label every runner of a ``nodes:N`` job's lease carries (deterministic)."""
    return f"{LEASE_PREFIX}{token}-{attempt}"


@dataclass(frozen=True)
class ContractLabels:
    """What a job's ``runs-on`` says under the contract."""

    job_label: str
    score: float
    token: str
    attempt: int
    attempt_label: str
    skip_pr: int | None
    skip_label: str | None
    nodes: int
    nodes_label: str | None
    needs: frozenset[str]  # its labels minus the scheduling ones: what a runner must carry

    def scheduling(self) -> frozenset[str]:
        """The labels a runner must be given for GitHub to hand it this job."""
        extra = {self.skip_label, self.nodes_label} - {None}
        return frozenset({self.job_label, self.attempt_label, *(x for x in extra if x)})


@dataclass(frozen=True)
class Unprioritisable:
    """A job with no usable ``ci-job-`` label: GitHub's FIFO runs it; the bot reports it once."""

    reason: str


def _one(labels: frozenset[str], prefix: str, pattern: re.Pattern[str]) -> tuple[re.Match[str] | None, str]:
    found = sorted(label for label in labels if label.startswith(prefix))
    if len(found) > 1:
        return None, f"it carries {len(found)} {prefix}… labels ({', '.join(found)}); one is expected"
    if not found:
        return None, ""
    match = pattern.fullmatch(found[0])
    return match, "" if match else f"its label {found[0]!r} is not of the form the templates write"


def read_contract(labels: Iterable[str]) -> ContractLabels | Unprioritisable:
    """The scheduling facts of a queued job's labels, or why it has none usable."""
    return _read(tuple(labels))


@lru_cache(maxsize=65536)  # a controller reads the same queued jobs' labels every round
def _read(labels: tuple[str, ...]) -> ContractLabels | Unprioritisable:
    got = norm(labels)
    job, problem = _one(got, JOB_PREFIX, _JOB)
    if job is None:
        return Unprioritisable(
            problem
            or "it was queued without a ci-job-<score>-<token> label "
            "(PRIORITY_SCHEDULER_ENABLED was not true when it was queued)"
        )
    attempt, problem = _one(got, ATTEMPT_PREFIX, _ATTEMPT)
    if attempt is None:
        return Unprioritisable(problem or "it has a ci-job- label but no ci-attempt-<n> label")
    skip, problem = _one(got, SKIP_PREFIX, _SKIP)
    if problem:
        return Unprioritisable(problem)
    nodes, problem = _one(got, NODES_PREFIX, _NODES)
    if problem:
        return Unprioritisable(problem)
    return ContractLabels(
        job_label=job.group(0),
        score=float(job.group("score")),
        token=job.group("token"),
        attempt=int(attempt.group("n")),
        attempt_label=attempt.group(0),
        skip_pr=int(skip.group("n")) if skip else None,
        skip_label=skip.group(0) if skip else None,
        nodes=int(nodes.group("n")) if nodes else 1,
        nodes_label=nodes.group(0) if nodes else None,
        needs=base_labels(got),
    )


def compatible(needs: frozenset[str], runner_labels: Iterable[str]) -> bool:
    """GitHub's AND-matching on what is not scheduling: the job's needs all on the runner."""
    return needs <= base_labels(runner_labels)
