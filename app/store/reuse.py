"""Whether a sweep point can reuse a stored result instead of running (same image, recipe fingerprint
and point; the lookups are app.store.results'), and the link a reused job shows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from app.store.results import find_reusable, find_reusable_eval


def reusable_for_point(
    session: Session,
    *,
    image: str,
    fingerprint: str,
    result_name: str,
    point: Mapping[str, Any] | None = None,
) -> Any:
    """A stored result that serves this point: its throughput result, and its eval when it runs one."""
    marks = point or {}
    eval_only = bool(marks.get("eval-only"))
    hit = (
        None
        if eval_only
        else find_reusable(session, image=image, fingerprint=fingerprint, result_name=result_name)
    )
    if hit is None and not eval_only:
        return None
    if marks.get("run-eval") or eval_only:
        # A throughput result alone does not answer an eval point (nor the reverse).
        evaluated = find_reusable_eval(session, image=image, fingerprint=fingerprint, result_name=result_name)
        if evaluated is None:
            return None
        return hit or evaluated
    return hit


def result_link(result: Any) -> str | None:
    for attr in ("run_url", "url", "html_url"):
        value = getattr(result, attr, None)
        if isinstance(value, str) and value:
            return value
    rid = getattr(result, "id", None)
    return f"result:{rid}" if rid is not None else None
