"""Which benchmark script a single-node key runs, and so which keys a PR's changed scripts touch.

Launchers (benchmark repo SemiAnalysisAI/InferenceX at 843c6254) pick
`benchmarks/single_node/<fixed_seq_len|agentic>/<prefix>_<precision>_<hw>_<framework>[_mtp].sh`
(hw = runner label without `cluster:` and without its `-...` tail; `_mtp` when spec-decoding is
mtp/draft_model) and fall back to the legacy name without the framework (`_trt`/`_atom` kept)
when the tagged script does not exist.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from app.core.recipes.master import AGENTIC_CODING, FIXED_SEQ_LEN, is_multinode, scenario_kinds, spec_modes
from app.core.recipes.runners import runner_hardware

SCRIPT_DIRS = {FIXED_SEQ_LEN: "fixed_seq_len", AGENTIC_CODING: "agentic"}
SCRIPT_ROOT = "benchmarks/single_node"


def script_candidates(entry: dict[str, Any]) -> dict[str, str | None]:
    """Benchmark scripts a single-node entry may run.

    Maps each path to None for a framework-tagged script, or for a legacy untagged script to the
    tagged path whose absence makes the launcher fall back to it.
    """
    out: dict[str, str | None] = {}
    if is_multinode(entry):
        return out
    prefix, precision = entry.get("model-prefix"), entry.get("precision")
    runner, framework = entry.get("runner"), entry.get("framework")
    if not (
        isinstance(prefix, str)
        and isinstance(precision, str)
        and isinstance(runner, str)
        and isinstance(framework, str)
    ):
        return out
    base = f"{prefix}_{precision}_{runner_hardware(runner)}"
    legacy_fw = f"_{framework}" if framework in ("trt", "atom") else ""
    for kind in sorted(scenario_kinds(entry)):
        subdir = SCRIPT_DIRS.get(kind)
        if subdir is None:
            continue
        for mode in sorted(spec_modes({"scenarios": {kind: entry["scenarios"][kind]}})):
            # Launchers disagree on whether draft_model maps to `_mtp`; accept both spellings.
            for spec in {"mtp": ["_mtp"], "draft_model": ["_mtp", ""]}.get(mode, [""]):
                tagged = f"{SCRIPT_ROOT}/{subdir}/{base}_{framework}{spec}.sh"
                legacy = f"{SCRIPT_ROOT}/{subdir}/{base}{legacy_fw}{spec}.sh"
                out[tagged] = None
                if legacy != tagged and legacy not in out:
                    out[legacy] = tagged
    return out


def keys_for_paths(
    changed_paths: Iterable[str],
    master: dict[str, Any],
    *,
    existing_paths: Collection[str] | None = None,
) -> set[str]:
    """Master-config keys whose benchmark script is among `changed_paths`.

    Keys are matched by their fields, not by parsing the key name (keys carry suffixes such as
    `-mtp`, `-agentic-hicache`): `<prefix>_<precision>_<hw>_<framework>[_mtp].sh` under
    `benchmarks/single_node/fixed_seq_len/` (or `agentic/` for agentic keys). A legacy untagged
    script (`dsr1_fp4_mi355x.sh`) is what a launcher runs only when the tagged one is missing;
    pass `existing_paths` (the repo's file list at the PR head) to apply that rule, otherwise a
    legacy script counts for every key that could fall back to it.
    """
    changed = {p.removeprefix("./") for p in changed_paths}
    existing = set(existing_paths) if existing_paths is not None else None
    hits: set[str] = set()
    for key, entry in master.items():
        if not isinstance(entry, dict):
            continue
        for path, tagged in script_candidates(entry).items():
            if path not in changed:
                continue
            if tagged is not None and existing is not None and tagged in existing:
                continue
            hits.add(str(key))
    return hits
