"""GitHub's eventual consistency: what a just-made write may not yet show (pure: no I/O).

A ref, blob, tree or commit just created can be invisible to the next call for a moment (GitHub
serves reads from replicas). The documented symptom is a 404, or a 422 naming the object the call
refers to: ``pulls/create`` answering ``{"field": "head", "code": "invalid"}`` right after the
branch was pushed, ``git/create-commit`` not finding the tree it was just given. Those answers are
retried a few times after a short delay before being believed; every other 404/422 is an answer.
"""

from __future__ import annotations

from typing import Any

DELAYS: tuple[float, ...] = (0.5, 1.0, 2.0)  # seconds before each retry: ~3.5 s at worst

# Operations whose input names something an earlier call of the same work just wrote.
_AFTER_WRITE_OPS = frozenset(
    {
        "pulls/create",
        "git/create-tree",
        "git/create-commit",
        "git/create-ref",
        "git/update-ref",
        "git/get-ref",
        "git/get-commit",
        "pulls/get",
    }
)
_MISSING_WORDS = ("does not exist", "not found", "invalid", "could not be found", "no commit found")


def _messages(data: Any) -> list[str]:
    if not isinstance(data, dict):
        return [str(data or "")]
    out = [str(data.get("message") or "")]
    for err in data.get("errors") or []:
        if isinstance(err, dict):
            out.append(" ".join(str(err.get(k) or "") for k in ("field", "code", "message")))
        else:
            out.append(str(err))
    return out


def is_visibility_lag(op: str, status: int, data: Any) -> bool:
    """True when this refusal may only mean "not visible yet" and is worth a short retry."""
    if op not in _AFTER_WRITE_OPS or status not in (404, 422):
        return False
    if status == 404:
        return True
    text = " ".join(_messages(data)).lower()
    if op == "pulls/create":
        # "A pull request already exists" or "No commits between" are answers, not lag.
        if "already exists" in text or "no commits between" in text:
            return False
        errors = data.get("errors") if isinstance(data, dict) else None
        return any(
            isinstance(e, dict) and e.get("field") in ("head", "base") and e.get("code") == "invalid"
            for e in errors or []
        )
    if op == "git/update-ref" and "fast forward" in text:
        return False  # someone else moved the branch: a real conflict
    if op == "git/create-ref" and "already exists" in text:
        return False
    return any(word in text for word in _MISSING_WORDS)
