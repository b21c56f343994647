"""Why a benchmark job failed, as one class, and what the bot does about it (pure).

The classes are those of InferenceX's recovery runbook (``docs/recovery-results-procedures.md``,
"Failure classification": classify by the earliest broken boundary), plus the three the bot meets
that the runbook leaves to GitHub: a runner lost mid-job, a job cancelled on GitHub, and a workflow
GitHub could not evaluate. Each class has one policy, chosen in ``POLICY``; nothing else decides
whether a failure is retried.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FailureClass(StrEnum):
    BENCHMARK = "benchmark/runtime"  # server never ready, OOM, HIP/CUDA/NCCL, no successful request
    EVAL = "eval"  # no results*.json, score validation failed, meta_env mismatch
    PROCESSING = "processing/collection"  # raw result but no agg_*.json, or the aggregate artifact absent
    RUNNER_LOST = "runner lost"  # the machine died or was shut down under the job (GitHub's annotation)
    RUNNER_WORKSPACE = "runner workspace"  # checkout cleanup EACCES under _work/.../benchmark_logs
    PROVISIONING = "provisioning"  # pyxis/enroot user-namespace signature on the node
    DISPATCH = "dispatch/handoff"  # the ingest hand-off never ran or got the wrong ids
    ETL = "etl/database"  # the right artifacts, then the app's ingest failed
    MAPPING = "mapping/data quality"  # skipped or unmapped rows after a green ingest
    PUBLICATION = "publication/provenance"  # wrong changelog, source run or merge-run identity
    CANCELLED = "cancelled"  # cancelled on GitHub (API or UI), not by the bot
    WORKFLOW_DEFECT = "workflow defect"  # GitHub could not evaluate the job: every run fails alike


class Policy(StrEnum):
    RETRY_ELSEWHERE = "retry on another runner"  # the machine failed, not the recipe
    REPORT = "report, do not retry"  # a person fixes the recipe, image, config or pipeline first
    NEVER_RETRY = "never retry"  # deterministic: a retry fails the same way and spends GPU time
    LEAVE = "leave as cancelled"  # whoever cancelled it wanted the runner back


POLICY: dict[FailureClass, Policy] = {
    FailureClass.BENCHMARK: Policy.REPORT,
    FailureClass.EVAL: Policy.REPORT,
    FailureClass.PROCESSING: Policy.REPORT,
    FailureClass.RUNNER_LOST: Policy.RETRY_ELSEWHERE,
    FailureClass.RUNNER_WORKSPACE: Policy.RETRY_ELSEWHERE,
    FailureClass.PROVISIONING: Policy.RETRY_ELSEWHERE,
    FailureClass.DISPATCH: Policy.REPORT,
    FailureClass.ETL: Policy.REPORT,
    FailureClass.MAPPING: Policy.REPORT,
    FailureClass.PUBLICATION: Policy.REPORT,
    FailureClass.CANCELLED: Policy.LEAVE,
    FailureClass.WORKFLOW_DEFECT: Policy.NEVER_RETRY,
}


@dataclass(frozen=True)
class Failure:
    kind: FailureClass
    message: str  # what GitHub said (quoted in the report), or why nothing more is known

    @property
    def policy(self) -> Policy:
        return POLICY[self.kind]

    @property
    def infrastructure(self) -> bool:
        """Retried (within the retry limit) on another runner."""
        return self.policy is Policy.RETRY_ELSEWHERE

    @property
    def cancelled(self) -> bool:
        return self.policy is Policy.LEAVE

    @property
    def workflow_defect(self) -> bool:
        return self.kind is FailureClass.WORKFLOW_DEFECT
