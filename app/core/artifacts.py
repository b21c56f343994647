"""Which artifact of a benchmark run holds a point's result: naming and selection, pure.

The benchmark repo's job templates (tests/fixtures/inferencex/workflows/, InferenceX 843c6254) name
one job's files after ``RESULT_FILENAME`` = ``RESULT_FILENAME_BASE`` [+ ``_recipe-`` + the first 16
characters of recipe-fingerprint], where the base (app.core.recipes.points.result_base) ends in
``_conc<C>_<runner.name>``:

* single-node (`benchmark-tmpl.yml`): ``<exp>_<prec>_<fw>_tp<TP>-pp..-dcp..-pcp..-ep..-dpa<bool>
  _disagg-<bool>_spec-<mode>_conc<C>_<node>``;
* multi-node (`benchmark-multinode-tmpl.yml`): ``<exp>_<prec>_<fw>_prefill-tp..-pp..-dcp..-pcp..-ep..
  -dp<bool>-nw<n>_decode-..._disagg-<bool>_spec-<mode>_conc<c1>x<c2>..._<node>``.

``runner.name`` is the *node* that ran the job (``mi355x-amds_03``; see configs/runners.yaml), not
the runner label the matrix asked for, so the bot knows everything up to ``_conc<C>_`` (the
point's *stem*) and nothing after it. Result artifacts, per family:

| family | result artifact | its result file(s) | eval artifact |
| --- | --- | --- | --- |
| single-node fixed-seq-len | ``bmk_<RF>`` | ``agg_<RF>.json`` | ``eval_<exp-name>_<RF>`` |
| single-node agentic | ``bmk_agentic_<RF>`` | ``<RF>.json`` | ``eval_<exp-name>_<RF>`` |
| multi-node fixed-seq-len | ``bmk_<RF>`` | ``agg_<RF>_*.json``, one per conc | ``eval_<RF>`` |
| multi-node agentic | ``bmk_agentic_<RF>`` | ``<RF>_conc*.json`` | ``eval_<RF>`` |

The same jobs also upload ``server_logs_*``, ``gpu_metrics_*``, ``power_audit_*`` (a copy of the
raw and ``agg_`` files), ``agentic_*`` and ``multinode_server_logs_*``: never results here.

Nothing in this module does I/O: callers pass the artifact list they fetched and get back a
``Selection`` saying which one (or why none).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.lazylog import get_logger
from app.core.recipes.points import result_base

log = get_logger(__name__)  # structlog, imported on the first line logged (app.core.lazylog)

BMK_PREFIX = "bmk_"
AGENTIC_BMK_PREFIX = "bmk_agentic_"
AGG_PREFIX = "agg_"
# `_recipe-${RECIPE_FINGERPRINT:0:16}`: bash keeps whatever the first 16 characters are; the
# repo's generated fingerprints are hex digests.
_RECIPE_SUFFIX = re.compile(r"_recipe-(?P<fp>[0-9A-Za-z]{16})$")
# A runner node name as the repo's runners.yaml spells them (`mi355x-amds_03`, `b300-nv_01`,
# `gb200-nv_0`): letters, digits, '.', '-' and '_' — never empty, never a path.
_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def is_multinode(point: Mapping[str, Any]) -> bool:
    return "prefill" in point or bool(point.get("multinode"))


def is_agentic(point: Mapping[str, Any]) -> bool:
    return point.get("scenario-type") == "agentic-coding"


def result_stem(point: Mapping[str, Any]) -> str:
    """``RESULT_FILENAME_BASE`` of a point without its node name: ``..._conc<C>`` (no trailing ``_``),
    from the point's own fields for every family (app.core.recipes.points.result_base)."""
    return result_base(dict(point))


def bmk_prefix(point: Mapping[str, Any]) -> str:
    """``bmk_agentic_`` for agentic jobs (both templates), ``bmk_`` for fixed-seq-len ones."""
    return AGENTIC_BMK_PREFIX if is_agentic(point) else BMK_PREFIX


def result_filename(point: Mapping[str, Any], node: str, recipe_fingerprint: str = "") -> str:
    """``RESULT_FILENAME`` as the job computes it on ``node`` (the simulator names files with it)."""
    name = f"{result_stem(point)}_{node}"
    if recipe_fingerprint:
        name += f"_recipe-{recipe_fingerprint[:16]}"
    return name


def bmk_artifact_name(point: Mapping[str, Any], node: str, recipe_fingerprint: str = "") -> str:
    return bmk_prefix(point) + result_filename(point, node, recipe_fingerprint)


def result_member_names(point: Mapping[str, Any], result_filename: str) -> tuple[str, str]:
    """(the result file(s) inside a point's result artifact, as a prefix and a suffix a member's
    base name must have): `agg_<RF>.json` (single-node fixed-seq-len), `<RF>.json` (single-node
    agentic), `agg_<RF>_*.json` one per conc (multi-node fixed-seq-len), `<RF>_conc*.json` one per
    conc (multi-node agentic)."""
    if is_multinode(point):
        return (
            (f"{result_filename}_conc", ".json")
            if is_agentic(point)
            else (
                f"{AGG_PREFIX}{result_filename}_",
                ".json",
            )
        )
    return (
        (f"{result_filename}.json", "") if is_agentic(point) else (f"{AGG_PREFIX}{result_filename}.json", "")
    )


@dataclass(frozen=True)
class BmkName:
    """A parsed result artifact name (``bmk_`` or ``bmk_agentic_``) of one job."""

    artifact_name: str
    result_filename: str  # the name without its prefix
    stem: str  # up to and including ``_conc<C>``
    node: str  # runner.name of the node that ran the job
    recipe: str | None  # the 16-character recipe suffix, when present
    point: Mapping[str, Any] | None = None  # whose artifact (decides the member names)

    @property
    def member(self) -> str:
        """The single JSON file of a single-node artifact (``agg_<RF>.json`` / agentic ``<RF>.json``)."""
        head, tail = result_member_names(self.point or {}, self.result_filename)
        return head + tail

    def members(self, names: Iterable[str]) -> list[str]:
        """The point's result files among an artifact's member names (a multi-node job uploads
        one per concurrency), in name order; never a power-audit or raw file."""
        head, tail = result_member_names(self.point or {}, self.result_filename)
        out = []
        for name in names:
            base = name.rsplit("/", 1)[-1]
            if base.startswith(head) and base.endswith(tail) and (tail or base == head):
                out.append(name)
        return sorted(out)


def parse_bmk_name(
    name: str, stem: str, prefix: str = BMK_PREFIX, point: Mapping[str, Any] | None = None
) -> BmkName | None:
    """``name`` parsed as ``<prefix><stem>_<node>[_recipe-<16>]``, or None when it is not that point's."""
    if not name.startswith(prefix) or (prefix == BMK_PREFIX and name.startswith(AGENTIC_BMK_PREFIX)):
        return None
    rest = name[len(prefix) :]
    if not rest.startswith(stem + "_"):
        return None
    tail = rest[len(stem) + 1 :]
    recipe = None
    m = _RECIPE_SUFFIX.search(tail)
    if m is not None:
        recipe, tail = m.group("fp"), tail[: m.start()]
    if not _NODE.match(tail) or "_conc" in tail:
        # `_conc` in the tail means a longer stem (conc 6 vs conc 64 share a prefix only with
        # a digit, which the `_` after the stem already rules out; this guards other fields).
        return None
    return BmkName(name, rest, stem, tail, recipe, point)


@dataclass(frozen=True)
class Selection:
    """The outcome of choosing a point's artifact: ``artifact`` or a ``reason`` it is missing."""

    artifact: Mapping[str, Any] | None
    name: BmkName | None
    reason: str
    ignored: tuple[str, ...] = ()  # other artifacts of the run, by name (never results)

    @property
    def found(self) -> bool:
        return self.artifact is not None


def _newest_first(artifacts: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    # A re-run attempt uploads the same name again; the newest upload is the one to read.
    return sorted(
        artifacts, key=lambda a: (str(a.get("created_at") or ""), int(a.get("id") or 0)), reverse=True
    )


def select_bmk_artifact(
    artifacts: Sequence[Mapping[str, Any]],
    point: Mapping[str, Any],
    *,
    nodes: Iterable[str] | None = None,
) -> Selection:
    """The one ``bmk_`` artifact of ``point`` among a run's artifacts (REST ``artifacts`` items).

    Any node name is accepted (the job may run on any node of its label); ``nodes``, when given
    (the label's node names from runners.yaml), narrows that. A recipe suffix may or may not be
    present. Every other artifact (logs, metrics, power audit, evals, other points) is ignored.
    When the same point was uploaded more than once (a re-run), the newest upload wins.
    """
    stem, prefix = result_stem(point), bmk_prefix(point)
    allowed = set(nodes) if nodes is not None else None
    matches: list[tuple[Mapping[str, Any], BmkName]] = []
    ignored: list[str] = []
    for art in artifacts:
        name = str(art.get("name") or "")
        parsed = parse_bmk_name(name, stem, prefix, point)
        if parsed is None or (allowed is not None and parsed.node not in allowed):
            ignored.append(name)
            continue
        matches.append((art, parsed))
    wanted = f"{prefix}{stem}_<node>[_recipe-<16 hex>]"
    if not matches:
        bmk = sorted(n for n in ignored if n.startswith(BMK_PREFIX))
        reason = f"no artifact {wanted} in the run (its bmk_ artifacts: {', '.join(bmk) or 'none'})"
        log.info("bmk_artifact_missing", stem=stem, artifacts=len(artifacts))
        return Selection(None, None, reason, tuple(ignored))
    live = [m for m in matches if not m[0].get("expired")]
    if not live:
        name = matches[0][1].artifact_name
        return Selection(None, matches[0][1], f"artifact {name} has expired", tuple(ignored))
    by_id = {id(a): p for a, p in live}
    newest = _newest_first([a for a, _ in live])[0]
    parsed = by_id[id(newest)]
    if len({p.artifact_name for _, p in live}) > 1:
        # Two different nodes uploaded the same point (a retried job inside one run): newest wins.
        log.info("bmk_artifact_several", stem=stem, chosen=parsed.artifact_name, count=len(live))
    reason = f"artifact {parsed.artifact_name} (node {parsed.node})"
    log.info("bmk_artifact_chosen", stem=stem, artifact=parsed.artifact_name, node=parsed.node)
    return Selection(newest, parsed, reason, tuple(ignored))


# ------------------------------------------------------------------------------------------ evals

EVAL_PREFIX = "eval_"
META_ENV = "meta_env.json"


@dataclass(frozen=True)
class EvalName:
    """A parsed ``eval_`` artifact name: ``eval_<exp-name>_<RESULT_FILENAME>`` (benchmark-tmpl.yml)."""

    artifact_name: str
    result_filename: str
    stem: str
    node: str
    recipe: str | None


@dataclass(frozen=True)
class EvalSelection:
    """The outcome of choosing a point's eval artifact: ``artifact`` or a ``reason`` it is missing."""

    artifact: Mapping[str, Any] | None
    name: EvalName | None
    reason: str

    @property
    def found(self) -> bool:
        return self.artifact is not None


def eval_head(point: Mapping[str, Any]) -> str:
    """What precedes ``RESULT_FILENAME`` in a point's eval artifact name: ``eval_<exp-name>_``
    (benchmark-tmpl.yml), ``eval_`` alone for a multi-node job (benchmark-multinode-tmpl.yml)."""
    return EVAL_PREFIX if is_multinode(point) else f"{EVAL_PREFIX}{point['exp-name']}_"


def eval_artifact_name(point: Mapping[str, Any], node: str, recipe_fingerprint: str = "") -> str:
    """The eval job's upload name (``eval_head`` + ``RESULT_FILENAME``)."""
    return eval_head(point) + result_filename(point, node, recipe_fingerprint)


def eval_stems(point: Mapping[str, Any]) -> list[str]:
    """The stems a point's eval job may carry: its own, and for a single-node agentic point also
    the one with pp/dcp/pcp 1 (e2e-tests.yml's `agentic eval /` job passes no pp, dcp-size or
    pcp-size, so the template's defaults name its files; run-sweep.yml's passes them)."""
    stems = [result_stem(point)]
    if is_agentic(point) and not is_multinode(point):
        alt = result_stem({**point, "pp": 1, "dcp-size": 1, "pcp-size": 1})
        stems += [alt] if alt not in stems else []
    return stems


def parse_eval_name(name: str, point: Mapping[str, Any]) -> EvalName | None:
    """``name`` parsed as ``eval_[<exp-name>_]<stem>_<node>[_recipe-<16>]`` (``eval_head``), or None
    when it is not the point's.

    ``eval_server_logs_*`` / ``eval_gpu_metrics_*`` (the eval-only job's logs) never parse: what
    follows ``eval_`` there is neither the exp-name nor a stem.
    """
    head = eval_head(point)
    if not name.startswith(head):
        return None
    for stem in eval_stems(point):
        parsed = parse_bmk_name(BMK_PREFIX + name[len(head) :], stem)  # same tail rules as bmk_
        if parsed is not None:
            return EvalName(name, parsed.result_filename, stem, parsed.node, parsed.recipe)
    return None


def select_eval_artifact(artifacts: Sequence[Mapping[str, Any]], point: Mapping[str, Any]) -> EvalSelection:
    """The ``eval_`` artifact of ``point`` among a run's artifacts; the newest upload wins."""
    matches = [(a, p) for a in artifacts if (p := parse_eval_name(str(a.get("name") or ""), point))]
    wanted = f"{eval_head(point)}{result_stem(point)}_<node>[_recipe-<16 hex>]"
    if not matches:
        evals = sorted(
            n
            for a in artifacts
            if (n := str(a.get("name") or "")).startswith(EVAL_PREFIX)
            and not n.startswith(("eval_server_logs_", "eval_gpu_metrics_"))
        )
        log.info("eval_artifact_missing", stem=result_stem(point), artifacts=len(artifacts))
        return EvalSelection(
            None, None, f"no artifact {wanted} in the run (its eval_ artifacts: {', '.join(evals) or 'none'})"
        )
    live = [m for m in matches if not m[0].get("expired")]
    if not live:
        return EvalSelection(None, matches[0][1], f"artifact {matches[0][1].artifact_name} has expired")
    by_id = {id(a): p for a, p in live}
    newest = _newest_first([a for a, _ in live])[0]
    parsed = by_id[id(newest)]
    log.info("eval_artifact_chosen", artifact=parsed.artifact_name, node=parsed.node)
    return EvalSelection(newest, parsed, f"artifact {parsed.artifact_name} (node {parsed.node})")
