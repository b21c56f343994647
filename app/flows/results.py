"""Collect: a finished job's artifact -> one normalized result row per point.

Pure parts (no I/O): ``safe_json_members`` reads an artifact zip defensively (size cap, only the
expected JSON members, no path traversal, no symlinks, no zip bombs) and ``parse_result`` turns
either result schema into a ``ParsedResult``:

- benchmark_serving's raw form: ``{mean,median,std,p99}_{ttft,tpot,itl,e2el}_ms``, throughputs in
  tok/s, ``max_concurrency`` (also the InferenceX fork with its ``"request_goodput:"`` typo);
- the aggregated form: the same latencies in seconds without ``_ms`` (``median_tpot``), optional
  ``*_intvty`` (tok/s/user) and ``tput_per_gpu``.

Keys are normalized before lookup (case, spaces, dashes, trailing colons), unknown keys are
ignored, and a value that is present but not a finite non-negative number fails the file with a
reason naming the file and the field.

``collect_job`` is the side-effecting shell: download, parse, store, finish the job, mark the
report dirty. A file that cannot be understood fails *that job* with the reason; GitHub outages
raise ``TransientError`` so the task is retried.
"""

from __future__ import annotations

import io
import lzma
import math
import posixpath
import stat
import zipfile
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core import safejson
from app.models.results import EvalResult, Result

log = structlog.get_logger(__name__)

MAX_ARTIFACT_BYTES = 16 * 1024 * 1024  # a result artifact is a few KB; 16 MB is generous
MAX_MEMBER_BYTES = 4 * 1024 * 1024  # one result JSON
MAX_TOTAL_BYTES = 16 * 1024 * 1024  # everything we agree to decompress from one artifact
MAX_RATIO = 100.0  # JSON compresses ~5-10x; 100x and more is a bomb, not a result
MAX_MEMBERS = 2000
RESULT_MAX_DEPTH = 16  # result files are flat records (depth 1-2); deeper is not a result file
MAX_COUNT = 2**31 - 1  # counts (conc, completed) are stored in 32-bit integer columns
MAX_TP = 1024


class ArtifactError(ValueError):
    """The artifact is unsafe or does not hold the expected result file."""


class ResultFileError(ValueError):
    """A result file cannot be understood; the message names the file and the field."""

    def __init__(self, file_name: str, field_name: str, problem: str) -> None:
        super().__init__(f"{file_name}: field {field_name!r}: {problem}")
        self.file_name = file_name
        self.field_name = field_name


# ---------------------------------------------------------------------------------------- the zip


def _unsafe_name(name: str) -> str | None:
    """Why a member name is unsafe to even consider, or None."""
    if "\\" in name:
        return "has a backslash"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "is an absolute path"
    if any(part == ".." for part in name.split("/")):
        return "escapes the artifact with '..'"
    if "\x00" in name:
        return "has a NUL byte"
    return None


def safe_json_members(
    data: bytes,
    *,
    wanted: Iterable[str] | None = None,
    max_member_bytes: int = MAX_MEMBER_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    max_ratio: float = MAX_RATIO,
) -> dict[str, bytes]:
    """The ``.json`` members of an artifact zip (only ``wanted`` basenames when given).

    The whole artifact is refused when any member is unsafe (path traversal, absolute path,
    symlink), since an artifact that tries one trick cannot be trusted for the rest. Sizes are
    checked on the declared values first and then enforced while streaming, because headers lie.
    """
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError) as exc:
        raise ArtifactError(f"the artifact is not a readable zip archive ({exc})") from exc
    wanted_set = set(wanted) if wanted is not None else None
    infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
        raise ArtifactError(f"the artifact has {len(infos)} members, over the limit of {MAX_MEMBERS}")
    chosen: list[zipfile.ZipInfo] = []
    for info in infos:
        why = _unsafe_name(info.filename)
        if why is not None:
            raise ArtifactError(f"artifact member {info.filename!r} {why}; refusing the artifact")
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise ArtifactError(f"artifact member {info.filename!r} is a symlink; refusing the artifact")
        if info.is_dir() or not info.filename.lower().endswith(".json"):
            continue
        if wanted_set is not None and posixpath.basename(info.filename) not in wanted_set:
            continue
        chosen.append(info)
    out: dict[str, bytes] = {}
    total = 0
    for info in chosen:
        name = info.filename
        if info.file_size > max_member_bytes:
            raise ArtifactError(
                f"artifact member {name!r} declares {info.file_size} bytes, "
                f"over the {max_member_bytes}-byte cap"
            )
        if info.file_size > 1024 and info.file_size / max(info.compress_size, 1) > max_ratio:
            raise ArtifactError(
                f"artifact member {name!r} expands {info.file_size / max(info.compress_size, 1):.0f}x "
                f"(over {max_ratio:.0f}x): refusing a likely zip bomb"
            )
        buf = bytearray()
        try:
            with zf.open(info) as fh:
                while True:
                    chunk = fh.read(64 * 1024)
                    if not chunk:
                        break
                    buf += chunk
                    if len(buf) > max_member_bytes or total + len(buf) > max_total_bytes:
                        raise ArtifactError(
                            f"artifact member {name!r} decompresses past the size cap: "
                            "refusing a likely zip bomb"
                        )
        except (
            zipfile.BadZipFile,
            zipfile.LargeZipFile,
            OSError,
            EOFError,
            RuntimeError,
            NotImplementedError,  # a compression method zipfile cannot read (AES, PPMd ...)
            zlib.error,  # a corrupt deflate stream
            lzma.LZMAError,  # a corrupt LZMA stream
        ) as exc:
            raise ArtifactError(f"artifact member {name!r} cannot be read: {exc}") from exc
        total += len(buf)
        out[name] = bytes(buf)
    return out


def pick_result_member(members: Mapping[str, bytes], result_name: str | None) -> tuple[str, bytes]:
    """The member holding the point's result: ``<result_name>.json``, else the only JSON file."""
    if result_name:
        for name, body in members.items():
            if posixpath.basename(name) == f"{result_name}.json":
                return name, body
    if len(members) == 1:
        return next(iter(members.items()))
    expected = f"{result_name}.json" if result_name else "one result .json file"
    found = ", ".join(sorted(members)) or "no JSON files"
    raise ArtifactError(f"missing result file {expected} in the artifact (it holds: {found})")


# ---------------------------------------------------------------------------------------- parsing


@dataclass
class ParsedResult:
    schema: str  # "raw" | "aggregated"
    conc: int | None
    mean_tpot_ms: float | None = None
    median_tpot_ms: float | None = None
    p99_tpot_ms: float | None = None
    std_tpot_ms: float | None = None
    mean_ttft_ms: float | None = None
    median_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    mean_itl_ms: float | None = None
    median_itl_ms: float | None = None
    p99_itl_ms: float | None = None
    mean_e2el_ms: float | None = None
    median_e2el_ms: float | None = None
    p99_e2el_ms: float | None = None
    output_tput: float | None = None
    total_tput: float | None = None
    tput_per_gpu: float | None = None
    interactivity: float | None = None
    completed: int | None = None
    duration_s: float | None = None
    tp: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def metrics(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("extra")
        return data


_LAT_METRICS = ("tpot", "ttft", "itl", "e2el")
_STATS = ("mean", "median", "p99", "std")
_CONC_KEYS = ("max_concurrency", "conc", "concurrency", "max_concurrent_requests")
_OUTPUT_KEYS = ("output_throughput", "output_tput", "output_token_throughput")
_TOTAL_KEYS = ("total_token_throughput", "total_tput", "tput", "total_throughput")
_INPUT_KEYS = ("input_throughput", "input_tput")


def _norm_key(key: str) -> str:
    # "request_goodput:" (a typo in the script that writes it), "Mean TPOT (ms)", "p99-tpot-ms" ...
    k = key.strip().rstrip(":").strip().lower()
    for ch in (" ", "-", "."):
        k = k.replace(ch, "_")
    k = k.replace("(ms)", "ms").replace("(s)", "s")
    while "__" in k:
        k = k.replace("__", "_")
    return k.strip("_")


def _number(file_name: str, key: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise ResultFileError(file_name, key, f"expected a number, got the text {value!r}") from None
        else:
            raise ResultFileError(file_name, key, f"expected a number, got {type(value).__name__}")
    try:
        f = float(value)
    except OverflowError:
        raise ResultFileError(file_name, key, "the number is too large to be a measurement") from None
    if not math.isfinite(f) or f < 0:
        raise ResultFileError(file_name, key, f"expected a finite non-negative number, got {value!r}")
    return f


def parse_result(
    body: bytes | str, file_name: str, *, tp: int | None = None, gpus: int | None = None
) -> ParsedResult:
    """Parse one result file of either schema; ``gpus`` (tp*pp*pcp) derives throughput per GPU."""
    try:
        # Limits first: a 400-digit integer or 1,000 levels of nesting is an attack, not a result.
        data = safejson.loads(
            body, max_depth=RESULT_MAX_DEPTH, max_int_digits=safejson.MAX_INT_DIGITS, allow_nan=True
        )
    except safejson.JSONLimitError as exc:
        raise ResultFileError(file_name, "<document>", f"refused: {exc}") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise ResultFileError(file_name, "<document>", f"not valid JSON ({exc})") from exc
    if isinstance(data, list) and len(data) == 1 and isinstance(data[0], dict):
        data = data[0]  # aggregated files are sometimes a one-record list
    if not isinstance(data, dict):
        raise ResultFileError(file_name, "<document>", f"expected a JSON object, got {type(data).__name__}")
    keys: dict[str, tuple[str, Any]] = {}
    for raw_key, value in data.items():
        if isinstance(raw_key, str):
            keys.setdefault(_norm_key(raw_key), (raw_key, value))

    def num(*names: str) -> float | None:
        for name in names:
            if name in keys:
                original, value = keys[name]
                got = _number(file_name, original, value)
                if got is not None:
                    return got
        return None

    has_ms = any(f"{s}_{m}_ms" in keys for s in _STATS for m in _LAT_METRICS)
    has_s = any(f"{s}_{m}" in keys for s in _STATS for m in _LAT_METRICS)
    if not has_ms and not has_s:
        raise ResultFileError(
            file_name,
            "mean_tpot_ms",
            "no latency fields found (expected benchmark_serving keys like mean_tpot_ms, "
            "or aggregated keys in seconds like median_tpot)",
        )
    schema = "raw" if has_ms else "aggregated"
    out = ParsedResult(schema=schema, conc=None)
    for metric in _LAT_METRICS:
        for stat_name in _STATS:
            if schema == "raw":
                value = num(f"{stat_name}_{metric}_ms")
            else:
                seconds = num(f"{stat_name}_{metric}")
                value = seconds * 1000.0 if seconds is not None else None
            setattr(out, f"{stat_name}_{metric}_ms", value)
    if out.mean_tpot_ms is None and out.median_tpot_ms is None:
        wanted = "mean_tpot_ms" if schema == "raw" else "mean_tpot"
        raise ResultFileError(file_name, wanted, "no TPOT value (neither mean nor median is present)")
    conc = num(*_CONC_KEYS)
    if conc is not None:
        if conc != int(conc) or conc < 1 or conc > MAX_COUNT:
            raise ResultFileError(
                file_name,
                keys[next(k for k in _CONC_KEYS if k in keys)][0],
                f"expected a positive integer concurrency, got {conc}",
            )
        out.conc = int(conc)
    file_tp = num("tp", "tensor_parallel_size")
    if file_tp is not None and (file_tp != int(file_tp) or not 1 <= file_tp <= MAX_TP):
        raise ResultFileError(
            file_name, "tp", f"expected a tensor-parallel size from 1 to {MAX_TP}, got {file_tp}"
        )
    out.tp = int(file_tp) if file_tp is not None else tp
    out.output_tput = num(*_OUTPUT_KEYS)
    out.total_tput = num(*_TOTAL_KEYS)
    if out.total_tput is None:
        inp = num(*_INPUT_KEYS)
        if inp is not None and out.output_tput is not None:
            out.total_tput = inp + out.output_tput
    out.tput_per_gpu = num("tput_per_gpu", "total_tput_per_gpu")
    n_gpus = gpus or out.tp
    if out.tput_per_gpu is None and out.total_tput is not None and n_gpus:
        out.tput_per_gpu = out.total_tput / n_gpus
    out.interactivity = num("mean_intvty", "intvty", "interactivity")
    if out.interactivity is None:
        base = out.mean_tpot_ms if out.mean_tpot_ms is not None else out.median_tpot_ms
        out.interactivity = 1000.0 / base if base else None
    completed = num("completed")
    if completed is not None and completed > MAX_COUNT:
        raise ResultFileError(file_name, "completed", f"{completed:g} requests is more than any run makes")
    out.completed = int(completed) if completed is not None else None
    out.duration_s = num("duration")
    for name in ("model_id", "backend", "date", "framework", "hw", "precision"):
        if name in keys and isinstance(keys[name][1], str | int | float):
            out.extra[name] = keys[name][1]
    return out


# ---------------------------------------------------------------------------------------- points


def point_identity(job: Any) -> dict[str, Any]:
    """The point a job measures, as the plan's JSON keys (``result-name``, ``conc``, ``tp`` ...).

    Jobs carry their point either as a dict (``job.point``) or as columns; both are read.
    """
    point: dict[str, Any] = {}
    raw = getattr(job, "point", None)
    if isinstance(raw, Mapping):
        point.update(raw)
    elif raw is not None and hasattr(raw, "__dict__"):
        point.update({k.replace("_", "-"): v for k, v in vars(raw).items()})
    for attr in (
        "result_name",
        "config_key",
        "conc",
        "tp",
        "pp",
        "ep",
        "isl",
        "osl",
        "framework",
        "precision",
        "runner",
        "model",
        "image",
        "fingerprint",
    ):
        value = getattr(job, attr, None)
        if value is not None:
            point.setdefault(attr.replace("_", "-"), value)
    return point


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


# ---------------------------------------------------------------------------------------- storage


def find_reusable(session: Session, *, image: str, fingerprint: str, result_name: str) -> Result | None:
    """The newest stored result of the same point on the same image and recipe fingerprint."""
    stmt = (
        select(Result)
        .where(Result.image == image, Result.fingerprint == fingerprint, Result.result_name == result_name)
        .order_by(Result.id.desc())
        .limit(1)
    )
    return session.scalars(stmt).first()


def find_reusable_eval(
    session: Session, *, image: str, fingerprint: str, result_name: str
) -> EvalResult | None:
    """The newest stored eval score of the same point on the same image and recipe fingerprint."""
    stmt = (
        select(EvalResult)
        .where(
            EvalResult.image == image,
            EvalResult.fingerprint == fingerprint,
            EvalResult.result_name == result_name,
        )
        .order_by(EvalResult.id.desc())
        .limit(1)
    )
    return session.scalars(stmt).first()


def stored_point_columns(point: Mapping[str, Any], *, image: str, fingerprint: str) -> dict[str, Any]:
    """The columns a stored throughput result and a stored eval score share: which point they measure."""
    return {
        "result_name": str(point.get("result-name") or ""),
        "config_key": str(point.get("config-key") or ""),
        "image": image,
        "fingerprint": fingerprint,
        "model": point.get("model"),
        "framework": point.get("framework"),
        "precision": point.get("precision"),
        "runner": point.get("runner"),
        "isl": point.get("isl"),
        "osl": point.get("osl"),
    }


def store_result(
    session: Session,
    parsed: ParsedResult,
    *,
    point: Mapping[str, Any],
    image: str,
    fingerprint: str,
    provenance: Mapping[str, Any],
) -> Result:
    row = Result(
        **stored_point_columns(point, image=image, fingerprint=fingerprint),
        conc=_int(point.get("conc"), parsed.conc or 0),
        tp=_int(point.get("tp"), parsed.tp or 1),
        pp=_int(point.get("pp"), 1),
        ep=_int(point.get("ep"), 1),
        **{k: v for k, v in parsed.metrics().items() if k not in ("conc", "tp")},
        job_id=provenance.get("job_id"),
        sweep_id=provenance.get("sweep_id"),
        repo=provenance.get("repo"),
        run_id=provenance.get("run_id"),
        run_url=provenance.get("run_url"),
        artifact_id=provenance.get("artifact_id"),
        artifact_name=provenance.get("artifact_name"),
        file_name=provenance.get("file_name"),
    )
    session.add(row)
    session.flush()
    return row


# ---------------------------------------------------------------------------------------- collect


@dataclass
class CollectOutcome:
    job_id: int
    state: str  # "succeeded" | "failed" | "skipped"
    reason: str | None = None
    result_id: int | None = None
    eval_ids: list[int] = field(default_factory=list)  # stored eval_results rows


def _job_and_sweep(session: Session, job_id: int) -> tuple[Any, Any]:
    from app.models.sweeps import Sweep, SweepJob

    # Row lock (PostgreSQL): a second collect of the same job (the repair poll re-rings collection
    # while a slow one runs, a redelivered completion) waits here, then sees the stored result
    # instead of storing a duplicate that would pose as a repeated run in the gap's noise.
    job = session.get(SweepJob, job_id, with_for_update=True)
    if job is None:
        raise LookupError(f"job {job_id} does not exist")
    sweep = session.get(Sweep, job.sweep_id)
    return job, sweep


def _finish(
    session: Session, job_id: int, state: str, *, reason: str | None = None, result_url: str | None = None
) -> None:
    from app.flows.scheduler import finish_job

    finish_job(session, job_id, state, reason=reason, result_url=result_url)


def collect_job(
    session: Session, gw: Any, job_id: int, *, max_bytes: int = MAX_ARTIFACT_BYTES
) -> CollectOutcome:
    """Download, check and parse a finished job's artifact; store its result; finish the job."""
    job, sweep = _job_and_sweep(session, job_id)
    existing: Result | EvalResult | None = session.scalars(
        select(Result).where(Result.job_id == job_id).limit(1)
    ).first()
    if existing is None:  # an eval-only job stores only eval rows
        existing = session.scalars(select(EvalResult).where(EvalResult.job_id == job_id).limit(1)).first()
    if existing is not None:  # a second delivery of the same completion: converge, don't repeat
        if getattr(job, "state", None) != "succeeded":
            _finish(session, job_id, "succeeded", result_url=existing.run_url)
        return CollectOutcome(job_id, "skipped", "already collected", existing.id)
    if getattr(job, "state", None) in ("succeeded", "failed", "cancelled", "reused"):
        return CollectOutcome(job_id, "skipped", f"job is already {job.state}")
    point = point_identity(job)
    repo = str(getattr(sweep, "repo", None) or getattr(job, "repo", ""))
    run_id = getattr(job, "run_id", None) or getattr(job, "workflow_run_id", None)
    run_url = getattr(job, "run_url", None) or getattr(job, "html_url", None)
    image = str(point.get("image") or getattr(sweep, "image", "") or "")
    fingerprint = str(
        point.get("fingerprint")
        or getattr(sweep, "fingerprint", None)
        or getattr(sweep, "recipe_fingerprint", "")
        or ""
    )

    def fail(reason: str) -> CollectOutcome:
        log.warning("collect_failed", job_id=job_id, reason=reason)
        _finish(session, job_id, "failed", reason=reason, result_url=run_url)
        mark_report_dirty(session, job.sweep_id)
        return CollectOutcome(job_id, "failed", reason)

    if run_id is None:
        return fail("the job has no workflow run to collect from")
    artifacts = gw.list_run_artifacts(repo, int(run_id))
    provenance = {
        "job_id": job_id,
        "sweep_id": job.sweep_id,
        "repo": repo,
        "run_id": int(run_id),
        "run_url": run_url,
    }
    if point.get("eval-only"):
        # An eval-only job uploads no bmk_ artifact: its eval is the whole result.
        got = fetch_eval(gw, repo, int(run_id), artifacts, point, max_bytes)
        if not isinstance(got, tuple):
            return fail(got or f"run {run_id}: no eval artifact")
        rows = store_eval(
            session,
            got[1],
            point=point,
            image=image,
            fingerprint=fingerprint,
            provenance={**provenance, "artifact_id": int(got[0]["id"]), "artifact_name": got[0].get("name")},
        )
        _finish(session, job_id, "succeeded", result_url=run_url)
        mark_report_dirty(session, job.sweep_id)
        return CollectOutcome(job_id, "succeeded", None, None, [r.id for r in rows])
    from app.core.artifacts import select_bmk_artifact

    try:
        chosen = select_bmk_artifact(artifacts, point)
    except (KeyError, TypeError, ValueError) as exc:
        return fail(f"the job's point lacks a field its result name is made of: {exc}")
    if chosen.artifact is None or chosen.name is None:
        return fail(f"run {run_id}: {chosen.reason}")
    artifact = chosen.artifact
    member_name = chosen.name.member
    declared = int(artifact.get("size_in_bytes") or 0)
    if declared > max_bytes:
        return fail(f"artifact {artifact.get('name')} is {declared} bytes, over the {max_bytes}-byte cap")
    from app.adapters.github import GitHubError

    try:
        blob = gw.download_artifact(repo, int(artifact["id"]), max_bytes)
    except GitHubError as exc:
        if exc.status == 413:
            return fail(str(exc))
        raise
    try:
        members = safe_json_members(blob, wanted=[member_name])
        if not members:
            members = safe_json_members(blob)  # a differently named single result file is fine
        file_name, body = pick_result_member(members, member_name.removesuffix(".json"))
        tp = _int(point.get("tp"), 0) or None
        gpus = (tp or 1) * _int(point.get("pp"), 1) * _int(point.get("pcp-size"), 1) if tp else None
        parsed = parse_result(body, file_name, tp=tp, gpus=gpus)
        want_conc = point.get("conc")
        if isinstance(want_conc, list):  # a multi-node row: one result, at its highest conc
            want_conc = max(int(c) for c in want_conc) if want_conc else None
        if want_conc is not None and parsed.conc is not None and int(want_conc) != parsed.conc:
            raise ResultFileError(
                file_name,
                "max_concurrency",
                f"the file measured conc {parsed.conc} but the job's point is conc {want_conc}",
            )
    except (ArtifactError, ResultFileError) as exc:
        return fail(str(exc))
    evaluation: tuple[Mapping[str, Any], Any] | str | None = None
    if point.get("run-eval"):
        # Parsed before anything is stored: a bad eval file fails the job with nothing half-stored.
        # In label mode the repo's own run-sweep.yml run decides which points it evaluates, so a
        # run with no eval artifact keeps its throughput result (the report says no eval was
        # stored); in dispatch mode the bot asked for the eval, and its absence fails the job.
        in_label_mode = str((getattr(sweep, "filters", None) or {}).get("mode") or "dispatch") == "label"
        evaluation = fetch_eval(
            gw, repo, int(run_id), artifacts, point, max_bytes, required=not in_label_mode
        )
        if isinstance(evaluation, str):
            return fail(evaluation)
    row = store_result(
        session,
        parsed,
        point=point,
        image=image,
        fingerprint=fingerprint,
        provenance={
            "job_id": job_id,
            "sweep_id": job.sweep_id,
            "repo": repo,
            "run_id": int(run_id),
            "run_url": run_url,
            "artifact_id": int(artifact["id"]),
            "artifact_name": artifact.get("name"),
            "file_name": file_name,
        },
    )
    eval_ids: list[int] = []
    if evaluation is not None and not isinstance(evaluation, str):
        eval_artifact, parsed_eval = evaluation
        eval_ids = [
            r.id
            for r in store_eval(
                session,
                parsed_eval,
                point=point,
                image=image,
                fingerprint=fingerprint,
                provenance={
                    **provenance,
                    "artifact_id": int(eval_artifact["id"]),
                    "artifact_name": eval_artifact.get("name"),
                },
            )
        ]
    _finish(session, job_id, "succeeded", result_url=run_url)
    mark_report_dirty(session, job.sweep_id)
    return CollectOutcome(job_id, "succeeded", None, row.id, eval_ids)


def fetch_eval(
    gw: Any,
    repo: str,
    run_id: int,
    artifacts: Any,
    point: Mapping[str, Any],
    max_bytes: int,
    *,
    required: bool = True,
) -> tuple[Mapping[str, Any], Any] | str | None:
    """(artifact, parsed ``app.core.evals.EvalArtifact``) of the point's eval, or the reason it failed;
    None when ``required`` is false and the run uploaded no eval artifact for the point."""
    from app.adapters.github import GitHubError
    from app.core.artifacts import select_eval_artifact
    from app.core.evals import EvalFileError, parse_eval_artifact

    try:
        chosen = select_eval_artifact(artifacts, point)
    except (KeyError, TypeError, ValueError) as exc:
        return f"the job's point lacks a field its eval artifact name is made of: {exc}"
    if chosen.artifact is None:
        if not required:
            log.info("eval_missing", run_id=run_id, reason=chosen.reason)
            return None
        return f"run {run_id}: {chosen.reason}"
    artifact = chosen.artifact
    declared = int(artifact.get("size_in_bytes") or 0)
    if declared > max_bytes:
        return f"artifact {artifact.get('name')} is {declared} bytes, over the {max_bytes}-byte cap"
    try:
        blob = gw.download_artifact(repo, int(artifact["id"]), max_bytes)
    except GitHubError as exc:
        if exc.status == 413:
            return str(exc)
        raise
    try:
        parsed = parse_eval_artifact(safe_json_members(blob), point)
    except (ArtifactError, EvalFileError) as exc:
        return f"eval artifact {artifact.get('name')}: {exc}"
    log.info(
        "eval_collected",
        artifact=artifact.get("name"),
        tasks=parsed.result.tasks(),
        file=parsed.result.file_name,
        limit=parsed.result.limit,
    )
    return artifact, parsed


def store_eval(
    session: Session,
    parsed: Any,
    *,
    point: Mapping[str, Any],
    image: str,
    fingerprint: str,
    provenance: Mapping[str, Any],
) -> list[EvalResult]:
    """One ``eval_results`` row per score of a parsed eval artifact (``app.core.evals.EvalArtifact``)."""
    conc = point.get("eval-conc", point.get("conc"))
    rows = [
        EvalResult(
            **stored_point_columns(point, image=image, fingerprint=fingerprint),
            conc=_int(conc, parsed.meta.conc or 0),
            tp=_int(point.get("tp"), parsed.meta.tp or 1),
            task=score.task,
            metric=score.metric,
            filter=score.filter,
            score=score.score,
            stderr=score.stderr,
            n=score.n,
            n_original=score.n_original,
            limit=score.limit,
            num_fewshot=score.num_fewshot,
            lm_eval_version=parsed.result.lm_eval_version,
            meta_model=parsed.meta.model,
            meta_framework=parsed.meta.framework,
            job_id=provenance.get("job_id"),
            sweep_id=provenance.get("sweep_id"),
            repo=provenance.get("repo"),
            run_id=provenance.get("run_id"),
            run_url=provenance.get("run_url"),
            artifact_id=provenance.get("artifact_id"),
            artifact_name=provenance.get("artifact_name"),
            file_name=parsed.result.file_name,
        )
        for score in parsed.result.scores
    ]
    session.add_all(rows)
    session.flush()
    return rows


def mark_report_dirty(session: Session, sweep_id: int) -> None:
    from app.flows.reports import mark_report_dirty as _mark

    _mark(session, sweep_id)


def flush_reports(session_factory: Any, gw_factory: Any) -> int:
    from app.flows.reports import flush_reports as _flush

    return _flush(session_factory, gw_factory)
