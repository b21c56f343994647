"""Which eval mode a PR's perf-changelog entries ask for a config key (pure).

InferenceX (``utils/evals/EVALS.md``): "Changelog entries use ``evals-only: true`` and
``all-evals: true``. The ``all-evals`` setting implies eval-only there." The repo's run-sweep.yml
plans a PR's sweep from the entries the PR adds to ``perf-changelog.yaml`` (base...head), each
with its own fields; so does sweepbot: the sweep requested for a key on a PR uses the eval mode
of the entries that PR adds naming the key (``app.core.recipes.evals.eval_mode_from_changelog``:
``evals-only`` -> only, ``all-evals`` -> all, ``no-evals`` -> none).

* Entries the PR adds: the head's entries less the base's (as a multiset, so a PR branched from
  an older main, whose base has entries the head lacks, is read right).
* An entry names the key when one of its ``config-keys`` is the key or a wildcard matching it.
* Entries without eval fields carry no opinion (sweepbot's own bump entries are such); when none
  has one, the answer is None and the caller keeps its default.
* Entries that disagree: ``evals-only`` with ``all-evals`` is ``all`` (every point as an eval
  only, which covers the selected ones); ``no-evals`` with an eval-only entry asks for both
  throughput and evals, which is the ``default`` mode. Every answer is logged with why.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from app.core.recipes.errors import InvalidYamlError
from app.core.recipes.evals import EvalMode, EvalModeError, eval_mode_from_changelog
from app.core.recipes.yamlutil import load_yaml

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class ChangelogEvalMode:
    mode: EvalMode | None  # None: the PR's entries say nothing about evals for this key
    why: str


def parse_entries(text: str | None, what: str = "the perf-changelog") -> list[dict[str, Any]]:
    """The changelog's entries (mappings only); an unreadable file has none, and says so."""
    if not text:
        return []
    try:
        data = load_yaml(text, what)
    except InvalidYamlError as exc:
        log.warning("changelog_unreadable", what=what, error=str(exc))
        return []
    if not isinstance(data, list):
        return []
    return [e for e in data if isinstance(e, dict)]


def added_entries(
    base: Sequence[Mapping[str, Any]], head: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """Entries of ``head`` not in ``base`` (multiset difference), in head order."""
    left = list(base)
    out: list[Mapping[str, Any]] = []
    for entry in head:
        if entry in left:
            left.remove(entry)
        else:
            out.append(entry)
    return out


def names_key(entry: Mapping[str, Any], key: str) -> bool:
    keys = entry.get("config-keys")
    if not isinstance(keys, list):
        return False
    return any(isinstance(k, str) and (k == key or fnmatch.fnmatchcase(key, k)) for k in keys)


def _combine(modes: list[EvalMode]) -> tuple[EvalMode, str]:
    distinct = set(modes)
    if len(distinct) == 1:
        return modes[0], f"the entry says evals={modes[0].value}"
    if distinct == {EvalMode.ONLY, EvalMode.ALL}:
        return EvalMode.ALL, "evals-only and all-evals entries: every point as an eval only"
    return EvalMode.DEFAULT, "entries ask for throughput (no-evals) and for evals: both, the default mode"


def eval_mode_for_key(entries: Sequence[Mapping[str, Any]], key: str) -> ChangelogEvalMode:
    """The eval mode the given (added) entries ask for ``key``; see the module docstring."""
    modes: list[EvalMode] = []
    for entry in entries:
        if not names_key(entry, key):
            continue
        try:
            mode = eval_mode_from_changelog(entry)
        except EvalModeError as exc:
            log.warning("changelog_eval_fields_invalid", key=key, error=str(exc))
            continue  # the repo's gate rejects such an entry; it asks for nothing
        if mode != EvalMode.DEFAULT:
            modes.append(mode)
    if not modes:
        out = ChangelogEvalMode(None, "no entry added for the key carries evals-only, all-evals or no-evals")
    else:
        out = ChangelogEvalMode(*_combine(modes))
    log.info("changelog_eval_mode", key=key, mode=out.mode.value if out.mode else None, why=out.why)
    return out


def pr_eval_mode(base_text: str | None, head_text: str | None, key: str) -> ChangelogEvalMode:
    """The eval mode a PR's perf-changelog (at its base and head) asks for ``key``."""
    added = added_entries(parse_entries(base_text, "the base perf-changelog"), parse_entries(head_text))
    return eval_mode_for_key(added, key)
