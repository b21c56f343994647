"""The report's "Reuse at merge" and "After merge" lines (pure), from what the sweep keeps.

``merge`` is the sweep's kept state: ``publishable`` / ``publishable_why`` (app.core.sweepway),
``reuse`` (app.core.sweepreuse's decision) and ``publication`` (app.core.publication's). The
offered ``/reuse-sweep-run <id>`` is never a line of its own here: the repo's finder reads a comment
line that is only the command as an authorization, and the bot must not look like one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core.inert import text
from app.core.sweepreuse import COMMAND

_KIND = {
    "published": "✅ published",
    "case_a": "⚠️ needs a human — runbook case A (re-run the ingest)",
    "case_b": "⚠️ needs a human — runbook case B (recovery PR with reused artifacts)",
    "needs_sweep": "⚠️ needs a human — nothing reusable to recover from",
    "pending": "⏳ waiting for main's run",
}


def reuse_section(merge: Mapping[str, Any]) -> list[str]:
    if not merge:
        return []
    out = ["", "**Reuse at merge**"]
    if "publishable" in merge:
        yes = "yes" if merge.get("publishable") else "no"
        out.append(f"- Publishable at merge: **{yes}** — {text(str(merge.get('publishable_why') or ''))}")
    reuse = merge.get("reuse") or {}
    for rid, why in sorted((reuse.get("per_run") or {}).items()):
        out.append(f"- run {rid}: {text(str(why))}")
    out += _decision_lines(reuse)
    pub = merge.get("publication") or {}
    if pub:
        link = f" ([run]({pub['run_url']}))" if pub.get("run_url") else ""
        reused = "reuse taken" if pub.get("reuse_taken") else "reuse not taken"
        out.append(
            f"- After merge: main's run {pub.get('merge_run') or ''}{link}: "
            f"{_KIND.get(str(pub.get('kind')), str(pub.get('kind')))}; {reused}; {text(str(pub.get('why')))}"
        )
        if pub.get("recovery"):
            out += [
                "",
                "  Recovery to run:",
                "",
                "  ```",
                *[f"  {ln}" for ln in str(pub["recovery"]).splitlines()],
                "  ```",
            ]
    return out


def _decision_lines(reuse: Mapping[str, Any]) -> list[str]:
    kind, why, will = reuse.get("kind"), text(str(reuse.get("why") or "")), str(reuse.get("main_will") or "")
    rid = reuse.get("run_id")
    if kind == "offer":
        return [
            f"- Offer: a maintainer (OWNER, MEMBER or COLLABORATOR) posts, as a comment of its own, the "
            f"line `{COMMAND} {rid}`; the push to main then reuses run {rid} instead of sweeping again "
            "(one sweep for this PR, not two). The bot cannot post it: its comments carry no "
            "maintainer association.",
        ]
    if kind == "authorized":
        return [f"- ✅ Reuse authorized: {why}. At merge: {will}."]
    if kind == "fails_closed":
        return [f"- ⚠️ {why}. At merge: {will}."]
    if kind == "ineligible":
        return [f"- Not reusable: {why}. At merge: {will}."]
    if kind == "pending":
        return [f"- ⏳ {why}."]
    return []
