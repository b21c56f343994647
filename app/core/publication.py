"""After merge (pure): did main's run publish the PR's results, and if not, which recovery.

On a push to main run-sweep.yml either reuses the authorized PR run (no GPU job runs) or sweeps
again, then ``trigger-ingest`` hands ``source-run-id`` (the artifacts' run) and ``merge-run-id``
(main's run: the changelog metadata) to InferenceX-app. The repo's runbook
(``docs/recovery-results-procedures.md``) splits a failed publication in two:

* **Case A** — the handoff holds the right pair and the artifacts are intact, only the ingest
  step failed: re-run the ingest (here: the failed ``trigger-ingest`` job of main's run; every GPU
  job there succeeded or was skipped, so ``--failed`` re-runs no GPU work).
* **Case B** — the official ingest is missing, skipped, bogus or points at the wrong source
  (setup failed closed, the run was cancelled or failed yet "published", the aggregates are
  missing): an empty recovery PR from main with one full-sweep label, a maintainer's
  ``/reuse-sweep-run <source id>``, and a recovery entry appended to ``perf-changelog.yaml``
  (the original entry's fields, the recovery PR's link) on a carrier commit whose second parent
  is the source head. Never re-run main's failed target for it.

The runbook's rule holds on every path: "workflow green without artifact identity is not a
verified recovery" — a green ``trigger-ingest`` counts only when the source run has its aggregate
artifacts (``results_bmk`` / ``eval_results_all``) and main's run its ``changelog-metadata``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from app.core.sweepreuse import AGGREGATES, COMMAND

PublicationKind = Literal["pending", "published", "case_a", "case_b", "needs_sweep"]
PROBLEMS = ("case_a", "case_b", "needs_sweep")
INGEST_JOB = "trigger-ingest"
SETUP_JOB = "setup"
METADATA = "changelog-metadata"
RULE = "workflow green without artifact identity is not a verified recovery"


@dataclass(frozen=True)
class PublicationFacts:
    repo: str
    pr_number: int
    run: Mapping[str, Any] | None  # main's run-sweep.yml push run for the merge commit
    jobs: Sequence[Mapping[str, Any]]  # that run's jobs (name, conclusion)
    merge_artifacts: Collection[str]  # that run's unexpired artifact names
    expected_source: int | None  # the PR run the bot expected main to reuse (authorized), if any
    source_artifacts: Collection[str]  # unexpired artifact names of the source run main handed on
    recovery_source: int | None = None  # a reusable PR run a case-B recovery can pin
    recovery_source_sha: str = ""
    label: str = "full-sweep-fail-fast"


@dataclass(frozen=True)
class Publication:
    kind: PublicationKind
    why: str
    reuse_taken: bool = False
    published: bool = False
    source_run: int | None = None
    merge_run: int | None = None
    recovery: str = ""  # the exact recovery to run

    @property
    def needs_human(self) -> bool:
        return self.kind in PROBLEMS


# run-sweep.yml's GPU callers (their `name:`); a skipped matrix job shows under the caller's name
# alone, a run one as `<caller> / <template job name>`. Hosted jobs (setup, collect-results /
# collect-results, trigger-ingest, ...) are not among them.
GPU_CALLERS = ("canary /", "single-node ", "multi-node ", "eval /", "agentic ", "multi-node eval /")


def _bench_jobs(jobs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [j for j in jobs if str(j.get("name") or "").startswith(GPU_CALLERS)]


def _job(jobs: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    return next((j for j in jobs if j.get("name") == name), None)


def case_a_recovery(repo: str, merge_run: int, source: int) -> str:
    return (
        f"gh run rerun {merge_run} --repo {repo} --failed   # only {INGEST_JOB}: no GPU job failed\n"
        "then verify the InferenceX-app ingest logs name "
        f"`Source run: {source}` and `Merge run:  {merge_run}`"
    )


def case_b_recovery(repo: str, pr_number: int, source: int, source_sha: str, label: str) -> str:
    return "\n".join(
        [
            f"1. open an empty recovery PR from main (RECOVERY_PR) and label it: "
            f"gh pr edit RECOVERY_PR --repo {repo} --add-label {label}",
            "2. a maintainer authorizes the source: "
            f'gh pr comment RECOVERY_PR --repo {repo} --body "{COMMAND} {source}"',
            f"3. append a recovery entry to the end of perf-changelog.yaml (PR #{pr_number}'s config-keys, "
            "description, evals-only, scenario-type; pr-link: the recovery PR), never editing earlier bytes",
            f"4. a carrier commit on top: same tree, second parent {source_sha[:12] or 'the source head'} "
            f"(git commit-tree HEAD^{{tree}} -p HEAD -p {source_sha or 'SOURCE_HEAD_SHA'}); merge once "
            "check-changelog and reuse-sweep-gate pass, then verify the new push run's ingest",
        ]
    )


def classify_publication(f: PublicationFacts) -> Publication:
    """What main's run did with the merged PR's results (see the module docstring)."""
    run = f.run
    if run is None:
        return Publication("pending", "no run-sweep.yml push run for the merge commit yet")
    rid = int(run["id"])
    if run.get("status") != "completed":
        return Publication("pending", f"main's run {rid} is {run.get('status')}", merge_run=rid)
    bench = _bench_jobs(f.jobs)
    ran = [j for j in bench if j.get("conclusion") != "skipped"]
    reuse_taken = bool(bench) and not ran
    source = f.expected_source if reuse_taken and f.expected_source else rid
    setup, ingest = _job(f.jobs, SETUP_JOB), _job(f.jobs, INGEST_JOB)
    identity = bool(set(f.source_artifacts) & set(AGGREGATES)) and METADATA in set(f.merge_artifacts)
    gpu_ok = all(j.get("conclusion") in ("success", "skipped") for j in bench)

    def made(kind: PublicationKind, why: str, *, published: bool = False, recovery: str = "") -> Publication:
        return Publication(kind, why, reuse_taken, published, source, rid, recovery)

    if ingest is not None and ingest.get("conclusion") == "success" and identity and gpu_ok:
        how = f"reused run {source}" if reuse_taken else f"main's own sweep (run {rid})"
        why = f"published from {how}: source {source} has its aggregates, run {rid} its {METADATA}"
        if f.expected_source and not reuse_taken:
            why += f"; reuse of run {f.expected_source} was expected but main swept again"
        return made("published", why, published=True)
    if ingest is not None and ingest.get("conclusion") == "failure" and identity and gpu_ok:
        why = f"{INGEST_JOB} failed with the right pair (source {source}, merge {rid}) and intact artifacts"
        return made("case_a", why, recovery=case_a_recovery(f.repo, rid, source))
    why = _case_b_why(setup, ingest, identity, gpu_ok, rid)
    if f.recovery_source is None:
        why += "; no reusable PR run to recover from: the PR's sweep must run again"
        return made("needs_sweep", why)
    recovery = case_b_recovery(f.repo, f.pr_number, f.recovery_source, f.recovery_source_sha, f.label)
    return made("case_b", why, recovery=recovery)


def _case_b_why(
    setup: Mapping[str, Any] | None, ingest: Mapping[str, Any] | None, identity: bool, gpu_ok: bool, rid: int
) -> str:
    if setup is not None and setup.get("conclusion") == "failure":
        return f"main's run {rid} failed in setup (reuse failed closed): nothing was published"
    if ingest is None or ingest.get("conclusion") in (None, "skipped", "cancelled"):
        return f"main's run {rid} never handed its results to InferenceX-app ({INGEST_JOB} did not run)"
    if ingest.get("conclusion") == "success" and not gpu_ok:
        return f"bogus publication: run {rid}'s GPU jobs failed or were cancelled yet {INGEST_JOB} succeeded"
    if not identity:
        missing = f"aggregates or {METADATA} missing"
        return f"{INGEST_JOB} of run {rid} ran without artifact identity ({missing}): {RULE}"
    return f"{INGEST_JOB} of run {rid} failed and its GPU jobs did not all succeed"
