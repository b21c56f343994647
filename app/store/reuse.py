"""Whether a sweep point can reuse a stored result instead of running (same image, recipe fingerprint
and point; the lookups are app.store.results'), and the link a reused job shows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from app.store.results import newest_reusable


@dataclass(frozen=True)
class PointLookup:
    """One point to look up: the sweep's image and recipe fingerprint, the point's name and marks."""

    image: str
    fingerprint: str
    result_name: str
    point: Mapping[str, Any] | None = field(default=None, compare=False)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.image, self.fingerprint, self.result_name)

    @property
    def eval_only(self) -> bool:
        return bool((self.point or {}).get("eval-only"))

    @property
    def needs_eval(self) -> bool:
        return self.eval_only or bool((self.point or {}).get("run-eval"))


def reusable_for_points(session: Session, lookups: Sequence[PointLookup]) -> list[Any]:
    """``reusable_for_point`` of each lookup, in order, in two queries whatever their number (the
    tick looks up the head of every queued sweep at once)."""
    results = newest_reusable(session, [p.key for p in lookups if not p.eval_only])
    # A throughput result alone does not answer an eval point (nor the reverse).
    wants_eval = [p.key for p in lookups if p.needs_eval and (p.eval_only or p.key in results)]
    evals = newest_reusable(session, wants_eval, evals=True) if wants_eval else {}
    out: list[Any] = []
    for p in lookups:
        hit = None if p.eval_only else results.get(p.key)
        if hit is None and not p.eval_only:
            out.append(None)
        elif p.needs_eval:
            evaluated = evals.get(p.key)
            out.append(None if evaluated is None else hit or evaluated)
        else:
            out.append(hit)
    return out


def reusable_for_point(
    session: Session,
    *,
    image: str,
    fingerprint: str,
    result_name: str,
    point: Mapping[str, Any] | None = None,
) -> Any:
    """A stored result that serves this point: its throughput result, and its eval when it runs one."""
    return reusable_for_points(session, [PointLookup(image, fingerprint, result_name, point)])[0]


def result_link(result: Any) -> str | None:
    for attr in ("run_url", "url", "html_url"):
        value = getattr(result, attr, None)
        if isinstance(value, str) and value:
            return value
    rid = getattr(result, "id", None)
    return f"result:{rid}" if rid is not None else None
