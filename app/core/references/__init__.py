"""Reference curves to compare a recipe against: data with provenance, never truth.

Two kinds:

- **shipped tables** (``app/core/references/*.yaml``): published figures transcribed with their source
  URL, commit and caveat (e.g. the ATOM MiniMax-M3 MXFP4 table);
- **sibling results**: the latest stored results of the config key that differs only by
  ``framework: atom`` (same model prefix, precision, runner), built by ``sibling_reference``.

Either kind also carries **accuracy** per task (``accuracy:`` in a table: a list of
``{task, filter, score[, stderr, n, num_fewshot]}``, or the short form ``gsm8k_5shot_flexible:
0.9363``); a sibling's comes from its own stored eval results (``eval_results``), with the stderr and
sample count its result files gave. A shipped table without accuracy borrows the sibling's.

Which one applies to a config key is configuration: the repo's bot config (``.github/sweepbot.yml``,
default branch) may hold a ``references:`` mapping ``config key -> table name | "sibling" | "none"``;
without an entry the shipped table matching model, hardware, tp, isl and osl applies, and
failing that the sibling (see ``choose_reference``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import yaml

from app.core.accuracy import FILTER_ALIASES, RefAccuracy

HERE = Path(__file__).resolve().parent

# Reference column names -> normalized result field names.
_ALIASES = {
    "output_tok_s": "output_tput",
    "total_tok_s": "total_tput",
    "output_throughput": "output_tput",
    "total_token_throughput": "total_tput",
}


class ReferenceError(ValueError):
    """A reference file cannot be used; the message says what is wrong and how to fix it."""


@dataclass
class Reference:
    name: str
    engine: str
    metric: str  # the headline metric the reference publishes, a result field (mean_tpot_ms)
    points: dict[int, dict[str, float]]  # conc -> metric -> value, in result field names
    model: str | None = None
    hardware: str | None = None
    precision: str | None = None
    tp: int | None = None
    isl: int | None = None
    osl: int | None = None
    source: str | None = None
    commit: str | None = None
    caveat: str | None = None
    runs: dict[int, list[str]] = field(default_factory=dict)  # conc -> run urls (sibling results)
    accuracy: list[RefAccuracy] = field(default_factory=list)  # per task and filter, with source
    accuracy_source: str | None = None

    def value(self, conc: int, metric: str) -> float | None:
        return self.points.get(conc, {}).get(metric)

    def label(self) -> str:
        return f"{self.engine.upper()} ref" if self.engine else "ref"

    def tput_curve(self) -> dict[int, tuple[float, float]]:
        """conc -> (interactivity, throughput per GPU), where the reference publishes both."""
        return {
            c: (v["interactivity"], v["tput_per_gpu"])
            for c, v in self.points.items()
            if "interactivity" in v and "tput_per_gpu" in v
        }


def metric_field(metric: str) -> str:
    """``mean_tpot`` -> ``mean_tpot_ms``; throughput names pass through."""
    m = metric.strip().lower().replace("-", "_")
    if m.startswith(("mean_", "median_", "p99_", "std_")) and not m.endswith("_ms"):
        return f"{m}_ms"
    return _ALIASES.get(m, m)


_SHORT_ACCURACY = re.compile(r"^(?P<task>[a-z0-9]+?)(?:_(?P<shots>\d+)shot)?_(?P<filter>flexible|strict)$")


def parse_accuracy(value: Any, origin: str, source: str | None = None) -> list[RefAccuracy]:
    """A table's ``accuracy:``: a list of ``{task, filter, score, ...}`` or ``{gsm8k_5shot_strict: 0.93}``."""
    if value is None:
        return []
    out: list[RefAccuracy] = []

    def score_of(where: str, raw: Any) -> float:
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0 <= raw <= 1:
            raise ReferenceError(f"{origin}: {where} must be a score between 0 and 1, got {raw!r}")
        return float(raw)

    if isinstance(value, dict):
        for key, raw in value.items():
            m = _SHORT_ACCURACY.match(str(key))
            if m is None:
                raise ReferenceError(
                    f"{origin}: accuracy.{key}: write `<task>[_<N>shot]_<flexible|strict>: score` "
                    "(e.g. gsm8k_5shot_flexible: 0.9363) or a list of {task, filter, score}"
                )
            out.append(
                RefAccuracy(
                    task=m["task"],
                    filter=FILTER_ALIASES[m["filter"]],
                    score=score_of(f"accuracy.{key}", raw),
                    num_fewshot=int(m["shots"]) if m["shots"] else None,
                    source=source,
                )
            )
        return out
    if not isinstance(value, list):
        raise ReferenceError(f"{origin}: accuracy must be a list of {{task, filter, score}} or a mapping")
    for i, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("task"), str):
            raise ReferenceError(f"{origin}: accuracy[{i}] needs a `task`, a `filter` and a `score`")
        stderr = item.get("stderr")
        n = item.get("n")
        shots = item.get("num_fewshot")
        out.append(
            RefAccuracy(
                task=item["task"],
                filter=FILTER_ALIASES.get(str(item.get("filter", "none")), str(item.get("filter", "none"))),
                score=score_of(f"accuracy[{i}].score", item.get("score")),
                stderr=float(stderr)
                if isinstance(stderr, int | float) and not isinstance(stderr, bool)
                else None,
                n=n if isinstance(n, int) and not isinstance(n, bool) else None,
                num_fewshot=shots if isinstance(shots, int) and not isinstance(shots, bool) else None,
                metric=str(item.get("metric") or "exact_match"),
                source=str(item.get("source") or source or "") or None,
            )
        )
    return out


def parse_reference(text: str, origin: str) -> Reference:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ReferenceError(f"{origin}: not valid YAML ({' '.join(str(exc).split())})") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("points"), list):
        raise ReferenceError(
            f"{origin}: expected a mapping with a 'points:' list of {{conc: N, metric: value}}"
        )
    raw_tp = doc.get("tp")
    tp = raw_tp if isinstance(raw_tp, int) and not isinstance(raw_tp, bool) else None  # true is no tp
    points: dict[int, dict[str, float]] = {}
    for i, item in enumerate(doc["points"]):
        conc = item.get("conc") if isinstance(item, dict) else None
        if isinstance(conc, bool) or not isinstance(conc, int) or conc < 1:
            raise ReferenceError(f"{origin}: points[{i}] needs an integer 'conc' >= 1")
        values: dict[str, float] = {}
        for key, value in item.items():
            if key == "conc":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ReferenceError(f"{origin}: points[{i}].{key} must be a number, got {value!r}")
            values[_ALIASES.get(str(key), str(key))] = float(value)
        if "mean_tpot_ms" in values and values["mean_tpot_ms"] > 0:
            values.setdefault("interactivity", 1000.0 / values["mean_tpot_ms"])
        if "total_tput" in values and tp is not None and tp > 0:
            values.setdefault("tput_per_gpu", values["total_tput"] / tp)
        points[int(item["conc"])] = values
    prov: dict[str, Any] = doc["provenance"] if isinstance(doc.get("provenance"), dict) else {}
    metric = metric_field(str(doc.get("metric") or "mean_tpot_ms"))
    source = prov.get("source") or doc.get("source")
    accuracy = parse_accuracy(
        doc.get("accuracy", prov.get("accuracy")), origin, str(source) if source else None
    )
    return Reference(
        name=str(doc.get("name") or Path(origin).stem),
        engine=str(doc.get("engine") or ""),
        metric=metric,
        points=points,
        model=doc.get("model"),
        hardware=doc.get("hardware"),
        precision=doc.get("precision"),
        tp=tp,
        isl=doc.get("isl"),
        osl=doc.get("osl"),
        source=source,
        commit=prov.get("commit"),
        caveat=" ".join(str(prov["caveat"]).split()) if prov.get("caveat") else None,
        accuracy=accuracy,
        accuracy_source=str(source) if accuracy and source else None,
    )


def load_reference(path: str | Path) -> Reference:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReferenceError(f"{p}: cannot read the reference file ({exc.strerror})") from exc
    return parse_reference(text, str(p))


@lru_cache(maxsize=1)
def shipped_references() -> tuple[Reference, ...]:
    return tuple(load_reference(p) for p in sorted(HERE.glob("*.yaml")))


def shipped_reference(name: str) -> Reference | None:
    return next((r for r in shipped_references() if r.name == name), None)


def find_shipped(
    *, model: str | None, hardware: str | None, tp: int | None, isl: int | None, osl: int | None
) -> Reference | None:
    """The shipped table for the same model, hardware, tp and sequence lengths, if one exists."""
    for ref in shipped_references():
        if (ref.model, ref.hardware, ref.tp, ref.isl, ref.osl) == (model, hardware, tp, isl, osl):
            return ref
    return None


def sibling_reference(rows: Iterable[Any], *, name: str, engine: str = "atom") -> Reference | None:
    """A reference from stored results of the sibling key: the newest result per conc."""
    latest: dict[int, Any] = {}
    for row in rows:
        cur = latest.get(row.conc)
        if cur is None or row.id > cur.id:
            latest[row.conc] = row
    if not latest:
        return None
    fields = (
        "mean_tpot_ms",
        "median_tpot_ms",
        "p99_tpot_ms",
        "mean_ttft_ms",
        "p99_ttft_ms",
        "mean_itl_ms",
        "mean_e2el_ms",
        "output_tput",
        "total_tput",
        "tput_per_gpu",
        "interactivity",
    )
    points = {
        c: {f: float(getattr(r, f)) for f in fields if getattr(r, f, None) is not None}
        for c, r in latest.items()
    }
    any_row = next(iter(latest.values()))
    return Reference(
        name=name,
        engine=engine,
        metric="mean_tpot_ms",
        points=points,
        model=any_row.model,
        hardware=any_row.runner,
        precision=any_row.precision,
        tp=any_row.tp,
        isl=any_row.isl,
        osl=any_row.osl,
        source=f"latest results of {name}",
        caveat=None,
        runs={c: [r.run_url] for c, r in latest.items() if r.run_url},
    )


def sibling_accuracy(rows: Iterable[Any], *, name: str) -> list[RefAccuracy]:
    """Accuracy from a sibling key's stored eval results: the newest row per task and filter."""
    latest: dict[tuple[str, str], Any] = {}
    for row in rows:
        key = (row.task, row.filter)
        if key not in latest or row.id > latest[key].id:
            latest[key] = row
    return [
        RefAccuracy(
            task=r.task,
            filter=r.filter,
            score=float(r.score),
            stderr=r.stderr,
            n=r.n,
            num_fewshot=r.num_fewshot,
            metric=r.metric,
            source=f"eval of {name}" + (f" ({r.run_url})" if r.run_url else ""),
        )
        for r in latest.values()
    ]


class SiblingRows(Protocol):
    """Where the sibling key's stored rows come from (the store implements it over the database)."""

    def results(self, config_key: str, *, isl: int | None, osl: int | None, tp: int | None) -> Iterable[Any]:
        """Stored results of ``config_key`` (narrowed by isl, osl and tp where given)."""
        ...

    def evals(self, config_key: str, *, tp: int | None) -> Iterable[Any]:
        """Stored eval scores of ``config_key`` (at ``tp`` when given)."""
        ...


def _with_sibling_accuracy(rows: SiblingRows, ref: Reference, sibling: str, tp: int | None) -> Reference:
    acc = sibling_accuracy(rows.evals(sibling, tp=tp), name=sibling)
    if acc:
        ref.accuracy = acc
        ref.accuracy_source = f"latest eval results of {sibling}"
    return ref


def guess_sibling_key(config_key: str, framework: str = "atom") -> str:
    """``minimaxm3-fp4-mi355x-vllm`` -> ``minimaxm3-fp4-mi355x-atom`` (the repo's key naming)."""
    head, sep, _tail = config_key.rpartition("-")
    return f"{head}-{framework}" if sep else f"{config_key}-{framework}"


def choose_reference(
    siblings: SiblingRows | None,
    *,
    config_key: str,
    model: str | None,
    hardware: str | None,
    tp: int | None,
    isl: int | None,
    osl: int | None,
    configured: Mapping[str, str] | None = None,
) -> Reference | None:
    """Which reference applies to ``config_key`` (see the module docstring for the rule).

    ``siblings`` reads the sibling key's stored rows; without it no sibling is consulted."""
    choice = (configured or {}).get(config_key)
    if choice == "none":
        return None
    if choice and choice != "sibling":
        ref = shipped_reference(choice)
        if ref is None:
            names = ", ".join(r.name for r in shipped_references())
            raise ReferenceError(
                f"references: {config_key}: unknown table {choice!r} (shipped: {names}, "
                "or 'sibling', or 'none')"
            )
        return ref
    if choice != "sibling":
        ref = find_shipped(model=model, hardware=hardware, tp=tp, isl=isl, osl=osl)
        if ref is not None:
            if not ref.accuracy and siblings is not None:
                ref = _with_sibling_accuracy(siblings, copy.copy(ref), guess_sibling_key(config_key), tp)
            return ref
    if siblings is None:
        return None
    sibling = guess_sibling_key(config_key)
    found = sibling_reference(siblings.results(sibling, isl=isl, osl=osl, tp=tp), name=sibling)
    if found is None:  # an eval-only sibling: accuracy but no latency curve
        found = Reference(
            name=sibling, engine="atom", metric="mean_tpot_ms", points={}, tp=tp, isl=isl, osl=osl
        )
        found = _with_sibling_accuracy(siblings, found, sibling, tp)
        return found if found.accuracy else None
    return _with_sibling_accuracy(siblings, found, sibling, tp)
