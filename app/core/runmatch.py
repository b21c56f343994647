"""Recognising the benchmark repo's runs and jobs, and why a job failed; pure.

Runs: a run is matched by id first (the dispatch answer, a ``workflow_run`` delivery), then by its
``display_title`` — the workflow's evaluated ``run-name`` (``e2e Test - sweepbot-12-34``);
``name`` is only the workflow's name (``End-to-End Tests``) and says nothing about the run. A retry
is dispatched under a name of its own (``sweepbot-12-34-a2``: ``attempt_run_name``), and a title
match only takes a run that fits the dispatch (``run_fits_dispatch``): one no earlier dispatch is
bound to, created after the dispatch was claimed. So a late event of a first run is never taken for
its retry, nor the retry for the first run.

Jobs: benchmark-tmpl.yml names every benchmark job

    p<priority> | <model-prefix> <precision> <runner> <framework*> TP<tp>[/PP<pp>][/DCP<n>][/PCP<n>]
    [/EP<ep>][/DPA] [<spec-decoding>] [<kv offload>] c<conc>[ | eval | | eval-only]

(*``sglang`` -> ``sgl``, ``dynamo-sglang`` -> ``dyn-sgl``, ``sglang-disagg`` -> ``sgl-disagg``), and
benchmark-multinode-tmpl.yml names a multi-node job (one job runs its whole conc list)

    p<priority> | <model-prefix> <precision> <runner> <framework*> [<n>P ](TP<tp>[/PP..][/DCP..][/PCP..]
    [/EP..][/DPA]) [x <m>D (TP<tp>...)] [<spec-decoding>] [<kv offload>] c<conc>[x<conc>...][ | eval-only]

(the ``<n>P`` prefill count and the ``x <m>D (...)`` decode part only when the row is ``disagg``).
That template is not among the fixtures (InferenceX 843c6254): the format was read from the
repo's later copy of benchmark-multinode-tmpl.yml, whose name expression takes the same fields
(there read from a ``config`` JSON input, at 843c6254 from one input per field, as e2e-tests.yml
and run-sweep.yml pass them). GitHub prefixes jobs of a called workflow with the caller's name
(``single-node /``, ``single-node 8k1k /``, ``canary /``, ``eval /``, ``multi-node /``,
``multi-node eval /``, ``multi-node 8k1k /`` ...). A job name carries no seq-len; in run-sweep.yml the
caller's name does, in e2e-tests.yml it does not, so two points that differ only in seq-len are
told apart there by the matrix order (seq-len major) and, once uploaded, by the ``bmk_`` artifact.

Failures: on GitHub, a runner that dies is reported as the failed job's check-run annotation
("The self-hosted runner: mi355x-amds_03 lost communication with the server ..."), not as a step.
``classify_failure`` reads annotations: runner lost, shutdown, never acquired or cancelled by the
system are infrastructure (retried within the limit); GitHub's "Error when evaluating '<section>'
for job '<id>'" is the workflow's defect (not retried: every run fails the same way;
``app.core.unexpanded_jobs`` says more); anything else is the benchmark's failure, quoted.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from app.core.failures import Failure, FailureClass
from app.core.lazylog import get_logger
from app.core.seqlen import seq_name

log = get_logger(__name__)  # structlog, imported on the first line logged (app.core.lazylog)

_FRAMEWORK_SHORT = {"sglang": "sgl", "dynamo-sglang": "dyn-sgl", "sglang-disagg": "sgl-disagg"}
_JOB = re.compile(
    r"p(?P<priority>-?\d+) \| (?P<prefix>\S+) (?P<precision>\S+) (?P<runner>\S+) (?P<framework>\S+)\s+"
    r"TP(?P<tp>\d+)(?P<par>(?:/(?:PP|DCP|PCP|EP)\d+|/DPA)*)"
    r"(?P<extras>(?:\s+\S+)*?)\s+c(?P<conc>\d+)(?P<eval> \| eval-only| \| eval)?\s*$"
)
_PAR = re.compile(r"/(PP|DCP|PCP|EP)(\d+)|/(DPA)")
_WORKER = r"\(TP(?P<{r}tp>\d+)(?P<{r}par>(?:/(?:PP|DCP|PCP|EP)\d+|/DPA)*)\)"
_MULTI_JOB = re.compile(
    r"p(?P<priority>-?\d+) \| (?P<prefix>\S+) (?P<precision>\S+) (?P<runner>\S+) (?P<framework>\S+)\s+"
    r"(?:(?P<pn>\d+)P )?" + _WORKER.format(r="p") + r"(?:\s+x (?P<dn>\d+)D " + _WORKER.format(r="d") + ")?"
    r"(?P<extras>(?:\s+\S+)*?)\s+c(?P<concs>\d+(?:x\d+)*)(?P<eval> \| eval-only| \| eval)?\s*$"
)
# Annotation texts GitHub writes when the machine, not the benchmark, failed.
INFRA_MESSAGES = (
    "lost communication with the server",
    "runner has received a shutdown signal",
    "the runner has been lost",
    "was not acquired by runner",
    "cancelled by the system",
    "canceled by the system",
)
# The runbook's runner-workspace signature: the checkout's cleanup cannot remove root-owned files.
WORKSPACE_MARKERS = ("eacces", "benchmark_logs")
# The runbook's provisioning signature: pyxis/enroot cannot create the container's user namespace.
PROVISIONING_RE = re.compile(r"\b(pyxis|enroot)\b.*\bnamespace", re.IGNORECASE)
MAX_QUOTE = 300
# GitHub's text when it cannot evaluate a job's section (`strategy`, `if`, `with` ...) before running it.
EVALUATION_ERROR = re.compile(r"Error when evaluating '(?P<section>[\w.-]+)' for job '(?P<job>[^']+)'\.")


# ------------------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class RunMatch:
    run: Mapping[str, Any] | None
    how: str  # "id" | "display_title" | "none"
    reason: str


# GitHub's clock against ours: a run is created after its dispatch was claimed, give or take this.
CLOCK_SLACK = timedelta(seconds=30)


def run_fits_dispatch(
    run: Mapping[str, Any], *, claimed_at: datetime | None, bound: Collection[int] = ()
) -> str | None:
    """Why a run found by its name is not the run of a dispatch claimed at ``claimed_at``, or None
    when it may be: a run ``bound`` to a dispatch already (another attempt's) is never re-bound, and
    a run created before the claim (less ``CLOCK_SLACK``) is an earlier dispatch's under that name.
    A run that says no ``created_at`` is judged by ``bound`` alone."""
    run_id = int(run.get("id") or 0)
    if run_id in bound:
        return f"run {run_id} is bound to an earlier dispatch"
    if claimed_at is not None and run.get("created_at"):
        created = _created(run)
        claimed = claimed_at if claimed_at.tzinfo else claimed_at.replace(tzinfo=UTC)
        if created < claimed - CLOCK_SLACK:
            return f"run {run_id} was created at {created:%H:%M:%S}, before the dispatch ({claimed:%H:%M:%S})"
    return None


def match_run(
    runs: Sequence[Mapping[str, Any]],
    *,
    run_id: int | None = None,
    display_title: str | None = None,
    head_sha: str | None = None,
    claimed_at: datetime | None = None,
    bound: Collection[int] = (),
) -> RunMatch:
    """The run among ``runs`` (REST or webhook shape) that is ours: by id, else by display_title.

    ``head_sha`` narrows a title match (a re-used title on another commit is not ours), and so do
    ``claimed_at`` and ``bound`` (``run_fits_dispatch``: an earlier dispatch's run under the same
    title is not this one's). Several runs still fit: the newest (highest id).
    """
    if run_id is not None:
        for run in runs:
            if int(run.get("id") or 0) == int(run_id):
                return RunMatch(run, "id", f"run {run_id}")
    unfit: list[str] = []
    if display_title:
        hits = [
            r
            for r in runs
            if str(r.get("display_title") or "") == display_title
            and (head_sha is None or str(r.get("head_sha") or "") == head_sha)
        ]
        judged = [(r, run_fits_dispatch(r, claimed_at=claimed_at, bound=bound)) for r in hits]
        unfit = [why for _, why in judged if why is not None]
        hits = [r for r, why in judged if why is None]
        if hits:
            run = max(hits, key=lambda r: int(r.get("id") or 0))
            return RunMatch(run, "display_title", f"run {run.get('id')} titled {display_title!r}")
    wanted = f"id {run_id}" if run_id is not None else ""
    if display_title:
        wanted = (wanted + " or " if wanted else "") + f"title {display_title!r}"
    left = f" ({'; '.join(unfit)})" if unfit else ""
    return RunMatch(None, "none", f"no run with {wanted or 'nothing to match'} among {len(runs)}{left}")


def match_label_run(
    runs: Sequence[Mapping[str, Any]],
    *,
    head_sha: str,
    not_before: datetime | None = None,
    ignore: Collection[int] = (),
) -> RunMatch:
    """Label mode: the repo's own sweep run (a ``pull_request`` run) for the PR's head commit.

    The newest run for that commit wins: run-sweep.yml cancels a PR's older run when a new one
    starts (its concurrency group), so the newest is the one that will run the sweep. A push to a
    PR also starts a run (``synchronize``) that runs no benchmark job while the PR has no sweep
    label: ``not_before`` (when the bot applied the label) leaves out runs created earlier, and
    ``ignore`` the runs already found to have run no benchmark job.
    """
    hits = [
        r
        for r in runs
        if str(r.get("head_sha") or "") == head_sha
        and str(r.get("event") or "pull_request") == "pull_request"
        and int(r.get("id") or 0) not in ignore
    ]
    older = [r for r in hits if not_before is not None and _created(r) < not_before]
    hits = [r for r in hits if r not in older]
    if not hits:
        why = f"; {len(older)} older than the label" if older else ""
        return RunMatch(None, "none", f"no pull_request run for {head_sha[:12]} among {len(runs)}{why}")
    run = max(hits, key=lambda r: int(r.get("id") or 0))
    return RunMatch(
        run, "head_sha", f"run {run.get('id')} ({run.get('display_title')!r}) for {head_sha[:12]}"
    )


def _created(run: Mapping[str, Any]) -> datetime:
    """A run's ``created_at``; a run without one counts as new (kept)."""
    text = str(run.get("created_at") or "")
    try:
        value = datetime.fromisoformat(text)  # reads a trailing "Z" as UTC (Python >= 3.11)
    except ValueError:
        return datetime.max.replace(tzinfo=UTC)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def has_benchmark_jobs(jobs: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a run's jobs include a benchmark job (by the template's job-name format)."""
    return any(parse_job_name(str(j.get("name") or "")) is not None for j in jobs)


def title_is_ours(display_title: str, run_names: Sequence[str]) -> bool:
    """Whether a run's title carries one of our unique run names (``sweepbot-<sweep>-<job>``)."""
    return any(display_title == n or display_title.endswith(f" - {n}") for n in run_names)


_RUN_NAME = re.compile(r"(?:^|\s)(sweepbot-\d+-\d+(?:-a\d+)?)$")


def attempt_run_name(base: str, attempt: int) -> str:
    """A dispatch's run name: ``base`` (``sweepbot-<sweep>-<job>``) for the first attempt, with an
    attempt suffix for a retry (``sweepbot-12-34-a2``), so a retry's run never carries the title
    of the run it retries."""
    return base if attempt <= 1 else f"{base}-a{attempt}"


def run_name_in_title(display_title: str) -> str | None:
    """The bot's run name at the end of a title (``e2e Test - sweepbot-12-34`` -> ``sweepbot-12-34``,
    ``... - sweepbot-12-34-a2`` -> ``sweepbot-12-34-a2``)."""
    m = _RUN_NAME.search(display_title.strip())
    return m.group(1) if m else None


# ------------------------------------------------------------------------------------- jobs


@dataclass(frozen=True)
class JobName:
    caller: str  # "single-node /", "single-node 8k1k /", "" ...
    priority: int
    model_prefix: str
    precision: str
    runner: str
    framework: str  # as written in the name (short forms)
    tp: int
    pp: int
    dcp: int
    pcp: int
    ep: int
    dpa: bool
    extras: tuple[str, ...]  # spec-decoding, kv offload words
    conc: int  # a multi-node job: the highest of its concs
    eval: str  # "" | "eval" | "eval-only"
    # A multi-node job (benchmark-multinode-tmpl.yml): its workers and its whole conc list.
    prefill: Worker | None = None
    decode: Worker | None = None  # named only for a disaggregated row
    concs: tuple[int, ...] = ()


@dataclass(frozen=True)
class Worker:
    num: int | None  # the `<n>P` / `<m>D` count (named only for a disaggregated row)
    tp: int
    pp: int
    dcp: int
    pcp: int
    ep: int
    dpa: bool


def _parallelism(text: str) -> tuple[dict[str, int], bool]:
    par = {"PP": 1, "DCP": 1, "PCP": 1, "EP": 1}
    dpa = False
    for pm in _PAR.finditer(text):
        if pm.group(3):
            dpa = True
        else:
            par[pm.group(1)] = int(pm.group(2))
    return par, dpa


def _worker(m: re.Match[str], role: str, num: str | None) -> Worker:
    par, dpa = _parallelism(m.group(f"{role}par"))
    count = int(num) if num is not None else None
    return Worker(count, int(m.group(f"{role}tp")), par["PP"], par["DCP"], par["PCP"], par["EP"], dpa)


def _eval_of(m: re.Match[str]) -> str:
    return (m.group("eval") or "").replace("|", "").strip()


def parse_job_name(name: str) -> JobName | None:
    """A benchmark job's name parsed, or None for any other job (setup, collect, ...)."""
    flat = " ".join(name.split())
    m = _JOB.search(flat)
    if m is None:
        return _parse_multinode(flat)
    par, dpa = _parallelism(m.group("par"))
    caller = flat[: m.start()].strip()
    return JobName(
        caller=caller,
        priority=int(m.group("priority")),
        model_prefix=m.group("prefix"),
        precision=m.group("precision"),
        runner=m.group("runner"),
        framework=m.group("framework"),
        tp=int(m.group("tp")),
        pp=par["PP"],
        dcp=par["DCP"],
        pcp=par["PCP"],
        ep=par["EP"],
        dpa=dpa,
        extras=tuple(m.group("extras").split()),
        conc=int(m.group("conc")),
        eval=_eval_of(m),
    )


def _parse_multinode(flat: str) -> JobName | None:
    m = _MULTI_JOB.search(flat)
    if m is None:
        return None
    prefill = _worker(m, "p", m.group("pn"))
    decode = _worker(m, "d", m.group("dn")) if m.group("dtp") else None
    concs = tuple(int(c) for c in m.group("concs").split("x"))
    return JobName(
        caller=flat[: m.start()].strip(),
        priority=int(m.group("priority")),
        model_prefix=m.group("prefix"),
        precision=m.group("precision"),
        runner=m.group("runner"),
        framework=m.group("framework"),
        tp=prefill.tp,
        pp=prefill.pp,
        dcp=prefill.dcp,
        pcp=prefill.pcp,
        ep=prefill.ep,
        dpa=prefill.dpa,
        extras=tuple(m.group("extras").split()),
        conc=max(concs),
        eval=_eval_of(m),
        prefill=prefill,
        decode=decode,
        concs=concs,
    )


def _row_worker(worker: Mapping[str, Any], *, counted: bool) -> Worker:
    return Worker(
        int(worker.get("num-worker") or 0) if counted else None,
        int(worker.get("tp") or 0),
        int(worker.get("pp") or 1),
        int(worker.get("dcp-size") or 1),
        int(worker.get("pcp-size") or 1),
        int(worker.get("ep") or 1),
        bool(worker.get("dp-attn")),
    )


def _offload_words(row: Mapping[str, Any]) -> tuple[str, ...]:
    """An agentic row's kv-offload words in its job name: `<mode> KV offload`, then the backend's
    name unless none or default."""
    if row.get("scenario-type") != "agentic-coding":
        return ()
    mode = str(row.get("kv-offloading") or "")
    backend = row.get("kv-offload-backend")
    name = str(backend.get("name") or "") if isinstance(backend, Mapping) else str(backend or "")
    words = (mode, "KV", "offload") if mode not in ("", "none") else ()
    return (*words, *((name,) if name not in ("", "none", "default") else ()))


def _extras(row: Mapping[str, Any]) -> tuple[str, ...]:
    """The words a row's job name carries between its topology and its conc."""
    spec = str(row.get("spec-decoding") or "none")
    return (*(() if spec == "none" else (spec,)), *_offload_words(row))


def point_job_name(row: Mapping[str, Any], *, eval_job: bool = False) -> JobName:
    """The name a generated row's job gets (its throughput job, or with ``eval_job`` its separate
    eval-only job), as ``parse_job_name`` reads it; no caller, priority 0 (neither is matched)."""
    framework = str(row.get("framework"))
    common: dict[str, Any] = {
        "caller": "",
        "priority": 0,
        "model_prefix": str(row.get("model-prefix")),
        "precision": str(row.get("precision")),
        "runner": str(row.get("runner")),
        "framework": _FRAMEWORK_SHORT.get(framework, framework),
        "extras": _extras(row),
        "eval": "eval-only" if eval_job else "",
    }
    if "prefill" in row:
        disagg = bool(row.get("disagg"))
        prefill = _row_worker(row["prefill"], counted=disagg)
        concs = row["conc"] if isinstance(row["conc"], list) else [row["conc"]]
        return JobName(
            **common,
            tp=prefill.tp,
            pp=prefill.pp,
            dcp=prefill.dcp,
            pcp=prefill.pcp,
            ep=prefill.ep,
            dpa=prefill.dpa,
            conc=max(int(c) for c in concs),
            prefill=prefill,
            decode=_row_worker(row["decode"], counted=True) if disagg else None,
            concs=tuple(int(c) for c in concs),
        )
    return JobName(
        **common,
        tp=int(row.get("tp", 0)),
        pp=int(row.get("pp", 1)),
        dcp=int(row.get("dcp-size", 1)),
        pcp=int(row.get("pcp-size", 1)),
        ep=int(row.get("ep", 1)),
        dpa=bool(row.get("dp-attn")),
        conc=int(row.get("conc", 0)),
    )


def job_matches_point(job: JobName, point: Mapping[str, Any], *, eval_job: bool | None = None) -> bool:
    """Whether a parsed job name is ``point``'s job (plan JSON): its throughput job, or its separate
    eval-only job (``eval /``, ``multi-node eval /``) with ``eval_job`` — by default, the job an
    ``eval-only`` point runs as."""
    if eval_job is None:
        eval_job = bool(point.get("eval-only"))
    if (job.eval == "eval-only") != eval_job:
        return False
    framework = str(point.get("framework"))
    seq = _seq_of(point)
    if (
        seq
        and any(re.fullmatch(r"\d+k\d+k", w) for w in job.caller.split())
        and seq not in job.caller.split()
    ):
        return False  # run-sweep.yml's caller names carry the seq-len
    if job.caller and ("agentic" in job.caller.split()) != (point.get("scenario-type") == "agentic-coding"):
        return False  # `agentic /`, `agentic eval /`, `multi-node agentic /` ... hold the agentic rows
    same_recipe = (
        job.model_prefix == str(point.get("model-prefix"))
        and job.precision == str(point.get("precision"))
        and job.runner == str(point.get("runner"))
        and job.framework == _FRAMEWORK_SHORT.get(framework, framework)
        # the name's spec-decoding and kv-offload words, exactly: a `none` point is not the `mtp`
        # job of its topology, a GPU-resident agentic point not the KV-offload one
        and job.extras == _extras(point)
    )
    if "prefill" in point or job.prefill is not None:
        return same_recipe and _workers_match(job, point)
    return (
        same_recipe
        and job.tp == int(point.get("tp", 0))
        and job.pp == int(point.get("pp", 1))
        and job.dcp == int(point.get("dcp-size", 1))
        and job.pcp == int(point.get("pcp-size", 1))
        and job.ep == int(point.get("ep", 1))
        and job.dpa == bool(point.get("dp-attn"))
        and job.conc == int(point.get("conc", 0))
    )


def _worker_is(got: Worker | None, want: Any, *, counted: bool) -> bool:
    if got is None or not isinstance(want, Mapping):
        return False
    return (
        (not counted or got.num == int(want.get("num-worker") or 0))
        and got.tp == int(want.get("tp") or 0)
        and got.pp == int(want.get("pp") or 1)
        and got.dcp == int(want.get("dcp-size") or 1)
        and got.pcp == int(want.get("pcp-size") or 1)
        and got.ep == int(want.get("ep") or 1)
        and got.dpa == bool(want.get("dp-attn"))
    )


def _workers_match(job: JobName, point: Mapping[str, Any]) -> bool:
    """A multi-node job: the same workers (the decode side and the counts only when disaggregated)
    and the same conc list."""
    concs = point.get("conc")
    want = tuple(int(c) for c in concs) if isinstance(concs, list | tuple) else (int(concs or 0),)
    disagg = bool(point.get("disagg"))
    if job.concs != want or (job.decode is not None) != disagg:
        return False
    if not _worker_is(job.prefill, point.get("prefill"), counted=disagg):
        return False
    return not disagg or _worker_is(job.decode, point.get("decode"), counted=True)


def _seq_of(point: Mapping[str, Any]) -> str:
    """A fixed-seq-len point's seq name (`8k1k`); agentic points have none (their exp-name
    carries tp, conc and offload words instead)."""
    if point.get("isl") is not None and point.get("osl") is not None:
        return seq_name(int(point["isl"]), int(point["osl"]))
    tail = str(point.get("exp-name") or "").rpartition("_")[2]  # `<prefix>_<seq>` (older plan dicts)
    return tail if re.fullmatch(r"\d+k\d+k", tail) else ""


def assign_jobs(
    wf_jobs: Sequence[Mapping[str, Any]],
    points: Sequence[Mapping[str, Any]],
    ranks: Sequence[int | None] | None = None,
) -> dict[int, Mapping[str, Any]]:
    """Index of each point -> its workflow job, by the real job-name format.

    A point with a rank (``ranks[i]``, its ``MatrixRank.rank``: app.core.dispatchjobs) takes the
    rank-th job its name matches, in matrix order: the run also holds the points a sweep filtered
    out, under the same names. A point without one: points that share a name (same conc,
    different seq-len in e2e-tests.yml) take the jobs in matrix order, which is the repo's
    expansion order (seq-len major), so the i-th such point gets the i-th such job (the jobs API
    lists the latest attempt of each job, in matrix order); ``points`` must then be every point of
    the dispatch the sweep has.
    """
    parsed = [(j, parse_job_name(str(j.get("name") or ""))) for j in wf_jobs]
    taken: set[int] = set()
    out: dict[int, Mapping[str, Any]] = {}
    for index, point in enumerate(points):
        rank = ranks[index] if ranks is not None else None
        if rank is None:
            continue
        named = [pos for pos, (_, name) in enumerate(parsed) if name and job_matches_point(name, point)]
        if rank < len(named):
            out[index] = parsed[named[rank]][0]
            taken.add(named[rank])
    for index, point in enumerate(points):
        if ranks is not None and ranks[index] is not None:
            continue
        for pos, (job, name) in enumerate(parsed):
            if pos not in taken and name is not None and job_matches_point(name, point):
                out[index] = job
                taken.add(pos)
                break
    return out


# ------------------------------------------------------------------------------------- failures


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_QUOTE else text[: MAX_QUOTE - 1] + "…"


TIMEOUT_MESSAGE = "exceeded the maximum execution time"


def _cancelled(messages: Sequence[str]) -> Failure:
    """A job GitHub ended ``cancelled`` that no infrastructure marker explains: a timeout
    (``timeout-minutes``; the benchmark hung or is too slow) or a cancel through the API or the UI
    (GitHub annotates a running job "The operation was canceled.", a queued one not at all). The
    bot's own cancels never get here: their jobs are final or re-queued on our side first."""
    timeout = next((m for m in messages if TIMEOUT_MESSAGE in m.lower()), None)
    if timeout is not None:
        log.info("failure_classified", kind="benchmark", marker="timeout")
        return Failure(FailureClass.BENCHMARK, _quote(f"timed out: {timeout}"))
    log.info("failure_classified", kind="cancelled", annotations=len(messages))
    said = " / ".join(messages) if messages else "no annotation"
    return Failure(FailureClass.CANCELLED, _quote(f"cancelled on GitHub ({said})"))


def classify_failure(
    annotations: Sequence[Mapping[str, Any]],
    *,
    conclusion: str | None,
    steps: Sequence[Mapping[str, Any]] = (),
) -> Failure:
    """Infrastructure or the benchmark's failure, from the failed job's check-run annotations."""
    messages = [
        str(a["message"])  # the filter below keeps only annotations with a message
        for a in annotations
        if str(a.get("annotation_level") or "failure") in ("failure", "warning") and a.get("message")
    ]
    for text in messages:
        lowered = text.lower()
        for marker in INFRA_MESSAGES:
            if marker in lowered:
                log.info("failure_classified", kind="runner lost", marker=marker)
                return Failure(FailureClass.RUNNER_LOST, _quote(text))
        if all(m in lowered for m in WORKSPACE_MARKERS):
            log.info("failure_classified", kind="runner workspace")
            return Failure(FailureClass.RUNNER_WORKSPACE, _quote(text))
        if PROVISIONING_RE.search(text):
            log.info("failure_classified", kind="provisioning")
            return Failure(FailureClass.PROVISIONING, _quote(text))
    defect = next((text for text in messages if EVALUATION_ERROR.search(text)), None)
    if defect is not None:
        log.info("failure_classified", kind="workflow_defect")
        return Failure(FailureClass.WORKFLOW_DEFECT, _quote(defect))
    if conclusion == "cancelled":
        return _cancelled(messages)
    failed_step = next(
        (str(s.get("name")) for s in steps if s.get("conclusion") == "failure" and s.get("name")), None
    )
    if messages:
        where = f" in step {failed_step!r}" if failed_step else ""
        log.info("failure_classified", kind="benchmark", step=failed_step)
        return Failure(FailureClass.BENCHMARK, _quote(f"failed{where}: " + " / ".join(messages)))
    where = f" in step {failed_step!r}" if failed_step else ""
    log.info("failure_classified", kind="benchmark", step=failed_step, annotations=0)
    return Failure(FailureClass.BENCHMARK, f"{conclusion or 'failed'}{where} (GitHub gave no annotation)")
