"""The runbook's case-B recovery PR, as text (pure): the entries it appends, its names.

"Append recovery entries to the end of `perf-changelog.yaml`. Never modify historical bytes.
Preserve the original `config-keys`, `description`, `evals-only`, and `scenario-type`, but use the
recovery PR URL." The original entries are those the merged PR added (main's changelog at the
merge commit less its first parent's). The carrier commit keeps the tree and takes the source
run's head as second parent, so the source SHA is in the recovery PR's commit list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.core.changelog_mode import added_entries, parse_entries
from app.core.recipes.changelog import EntryFlags, append_changelog
from app.core.sweepreuse import COMMAND

BRANCH_PREFIX = "sweepbot/recover"


def recovery_branch(pr_number: int) -> str:
    return f"{BRANCH_PREFIX}/pr-{pr_number}"


def merged_entries(before: str | None, after: str | None) -> list[Mapping[str, Any]]:
    """The changelog entries the merge added (what the recovery re-appends)."""
    return added_entries(parse_entries(before), parse_entries(after))


def _strings(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)] if value not in (None, "") else []


def append_recovery(main_text: str, entries: Sequence[Mapping[str, Any]], pr_link: str) -> str:
    """``main_text`` with each original entry appended again, linking the recovery PR."""
    text = main_text
    for e in entries:
        flags = EntryFlags(
            scenario_type=tuple(_strings(e.get("scenario-type"))),
            evals_only=bool(e.get("evals-only")),
            all_evals=bool(e.get("all-evals")),
        )
        text = append_changelog(
            text,
            config_keys=_strings(e.get("config-keys")),
            description=_strings(e.get("description")) or ["recovery"],
            pr_link=pr_link,
            flags=flags,
        )
    return text


def recovery_title(pr_number: int) -> str:
    return f"chore: recover PR #{pr_number} ingest"


def recovery_body(repo: str, pr_number: int, source: int, merge_run: int | None) -> str:
    return "\n".join(
        [
            f"Recovery of PR #{pr_number}'s publication (the runbook's case B): main's run "
            f"{merge_run or '?'} did not publish it verifiably.",
            "",
            f"A maintainer (OWNER, MEMBER or COLLABORATOR) authorizes the source run by commenting the "
            f"line `{COMMAND} {source}` on this PR; the bot then appends the recovery entry to "
            f"`perf-changelog.yaml` and attaches run {source}'s head commit as a second parent "
            "(the tree unchanged), so the push to main reuses that run without GPU work.",
        ]
    )
