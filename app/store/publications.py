"""Merged PRs whose publication on main needs a human (app.core.publication), from the sweeps' state."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.publication import PROBLEMS
from app.models.sweeps import Sweep

SCAN = 500  # the newest sweeps looked at (a publication is kept on the PR's last label sweep)


def publication_problems(session: Session, limit: int = 10) -> list[tuple[Sweep, dict[str, Any]]]:
    """(sweep, its kept publication) for the newest merges main did not publish verifiably."""
    out: list[tuple[Sweep, dict[str, Any]]] = []
    for sweep in session.scalars(select(Sweep).order_by(Sweep.id.desc()).limit(SCAN)):
        pub = (sweep.filters or {}).get("publication")
        if isinstance(pub, dict) and pub.get("kind") in PROBLEMS:
            out.append((sweep, pub))
            if len(out) >= limit:
                break
    return out


def problem_counts(session: Session) -> dict[str, int]:
    """How many of the newest merges are in each runbook case (every case present, zero included)."""
    found = Counter(str(pub.get("kind")) for _, pub in publication_problems(session, limit=SCAN))
    return {kind: found.get(kind, 0) for kind in PROBLEMS}
