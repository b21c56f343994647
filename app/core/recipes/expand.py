"""A master-config key expanded into sweep points, in agreement with the benchmark repo's matrix logic.

What the benchmark repo (SemiAnalysisAI/InferenceX at 843c6254: `utils/matrix_logic/
generate_sweep_configs.py`, command `test-config`, run by `.github/workflows/e2e-tests.yml`) does
for a single-node `fixed-seq-len` config, as checked against its source, step by step as
`expand_points` does it:

1. The key's shared fields (`_KeyFields`): image, model, model-prefix, precision, framework,
   runner; `disagg` from the entry (default false).
2. For every `scenarios.fixed-seq-len` item (isl/osl, `_seq_len_scenarios`) and every
   `search-space` item in it, in file order, the item's parallelism (`_Parallelism`): `pp`,
   `dcp-size`, `pcp-size`, `ep` = 1 when absent, `dp-attn` = false when absent,
   `spec-decoding` = "none".
3. Its conc values (`conc_values`): `conc-list` as given when the item has it; otherwise conc runs
   from `conc-start`, multiplied by 2, and a value that overshoots is clamped to `conc-end`
   (1..48 -> 1,2,4,8,16,32,48). Its own validation rejects an item carrying both.
4. One point per conc (`_item_points`), so the order is seq-len x search-space item x conc (one
   runner label per key here); `max-model-len` = isl + osl + 256.
5. The filters (`_filter_points`): `--seq-lens` by (isl, osl), then tp, then `--conc` keeps only
   values already in the expansion; a value that matches nothing is an error naming what exists.

Multi-node keys and agentic-coding scenarios are planned as the generator plans them
(app/core/recipes/matrix.py has their rules); expand_points returns their rows as PlanRow
objects, filtered alike (a seq filter `agentic` keeps the agentic-coding rows).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from app.core.recipes.errors import EmptyPlanError, InvalidRecipeError, UnsupportedScenarioError
from app.core.recipes.master import (
    SPEC_MODES,
    get_entry,
    is_single_node_fixed,
    positive_int,
    require_single_node_fixed,
    required_field,
)
from app.core.recipes.matrix import Hardware, conc_values, matrix_rows
from app.core.recipes.points import MAX_MODEL_LEN_SLACK, PlanRow, Point, row_result_name
from app.core.seqlen import AGENTIC_SEQ, seq_name, seq_shape

# Search-space fields that define a point.
_POINT_FIELDS = frozenset(
    {
        "tp",
        "pp",
        "dcp-size",
        "pcp-size",
        "ep",
        "dp-attn",
        "spec-decoding",
        "conc-start",
        "conc-end",
        "conc-list",
    }
)

# Fields the benchmark repo accepts on single-node fixed-seq-len items that change how a point is
# served but not which points exist or their identity; they still feed recipe_fingerprint.
_PASSTHROUGH_FIELDS = frozenset(
    {
        "router",
        "srt-recipe",
        "attn-dp-size",
        "num-speculative-tokens",
        "max-num-batched-tokens",
        "moe-backend",
    }
)


def _parse_seq_filter(seq: str) -> str:
    # `1024_1024` and `1k1k` name the same shape: the repo's own spelling is the one matched.
    shape = seq_shape(seq.strip())
    if shape is None:
        raise EmptyPlanError(f"unknown seq '{seq}'; use 1k1k, 8k1k or <isl>_<osl> (for example 2048_512)")
    return shape


def with_identity(row: dict[str, Any], key: str) -> dict[str, Any]:
    """A generated row with the bot's own fields: its config key, result name, multi-node flag."""
    out = {**row, "config-key": key, "result-name": row_result_name(row)}
    if "prefill" in row:
        out["multinode"] = True
    return out


def _expand_other(master: dict[str, Any], key: str, hardware: Hardware | None) -> list[PlanRow]:
    """Rows of any key as the repo's generator makes them (app/core/recipes/matrix.py), in its order."""
    return [PlanRow(with_identity(r, key)) for r in matrix_rows(master, key, hardware=hardware)]


def plan_dicts(
    master: dict[str, Any],
    key: str,
    *,
    seq: str | None = None,
    conc: list[int] | None = None,
    hardware: Hardware | None = None,
) -> list[dict[str, Any]]:
    """Every row the generator's `test-config` makes for ``key`` (its `--conc` applied), with the
    bot's identity fields; ``seq`` keeps that shape only; a filter matching nothing is an error."""
    rows = _filter_rows(_expand_other(master, key, hardware), key, seq, conc, None)
    return [r.to_json() for r in rows]


def _row_seq(r: PlanRow) -> str:
    return seq_name(r.data["isl"], r.data["osl"]) if "isl" in r.data else AGENTIC_SEQ


def _row_tps(row: dict[str, Any]) -> set[int]:
    if "prefill" in row:
        return {int(row["prefill"]["tp"]), int(row["decode"]["tp"])}
    return {int(row["tp"])}


def tp_filter(rows: list[dict[str, Any]], key: str, tp: int) -> list[dict[str, Any]]:
    """The rows with ``tp`` (a multi-node row: on either worker); none is an error naming the tps."""
    kept = [r for r in rows if tp in _row_tps(r)]
    if not kept:
        have_tp = ", ".join(str(t) for t in sorted(set().union(*(_row_tps(r) for r in rows))))
        raise EmptyPlanError(f"config key '{key}' has no tp={tp} in that search space (tp: {have_tp})")
    return kept


def _filter_rows(
    rows: list[PlanRow], key: str, seq: str | None, conc: list[int] | None, tp: int | None
) -> list[PlanRow]:
    """The same filters as for single-node points; a multi-node row's conc list is narrowed."""
    out = rows
    if seq is not None:
        want = _parse_seq_filter(seq)
        out = [r for r in out if _row_seq(r) == want]
        if not out:
            have = sorted({seq_name(r.data["isl"], r.data["osl"]) for r in rows if "isl" in r.data})
            kinds = " (agentic-coding rows have no seq-len)" if any("isl" not in r.data for r in rows) else ""
            raise EmptyPlanError(
                f"config key '{key}' has no {want} scenario (it has: {', '.join(have) or 'none'}){kinds}"
            )
    if tp is not None:
        out = [PlanRow(d) for d in tp_filter([r.data for r in out], key, tp)]
    if conc:
        wanted = set(conc)
        present = {c for r in out for c in r.concs}
        missing = sorted(wanted - present)
        if missing:
            have_conc = ", ".join(str(c) for c in sorted(present))
            raise EmptyPlanError(
                f"config key '{key}': conc {', '.join(map(str, missing))} not in its search space "
                f"(available: {have_conc})"
            )
        narrowed = []
        for r in out:
            keep = [c for c in r.concs if c in wanted]
            if not keep:
                continue
            if isinstance(r.data["conc"], list):
                narrowed.append(PlanRow(with_identity({**r.data, "conc": keep}, str(r.data["config-key"]))))
            else:
                narrowed.append(r)
        out = narrowed
    return out


def expand_points(
    master: dict[str, Any],
    key: str,
    *,
    seq: str | None = None,
    conc: list[int] | None = None,
    tp: int | None = None,
    hardware: Hardware | None = None,
) -> list[Any]:
    """Expand `key`'s search space into points, in the repo's order (the steps: module docstring).

    Single-node fixed-seq-len keys give `Point`s; multi-node keys and agentic-coding scenarios
    give `PlanRow`s (topology.py). Filters: `seq` (`1k1k`, `8k1k`, `<isl>_<osl>`), `conc` (values
    kept only where the search space has them), `tp`. A filter value that matches nothing raises
    EmptyPlanError naming what exists, so a typo never silently plans zero jobs.
    """
    entry = get_entry(master, key)
    if not is_single_node_fixed(entry):
        return _filter_rows(_expand_other(master, key, hardware), key, seq, conc, tp)
    fixed = require_single_node_fixed(key, entry)
    shared = _KeyFields.read(entry, key)
    want_seq = _parse_seq_filter(seq) if seq is not None else None
    points: list[Point] = []
    for isl, osl, space in _seq_len_scenarios(fixed, key):
        for item in space:
            points += _item_points(shared, isl, osl, _Parallelism.read(item, key), conc_values(item, key))
    return _filter_points(points, key, want_seq, conc, tp)


@dataclass(frozen=True)
class _KeyFields:
    """Step 1: what every point of a key shares."""

    key: str
    image: str
    model: str
    model_prefix: str
    precision: str
    framework: str
    runner: str
    disagg: bool

    @classmethod
    def read(cls, entry: dict[str, Any], key: str) -> _KeyFields:
        return cls(
            key=key,
            image=required_field(entry, key, "image", str),
            model=required_field(entry, key, "model", str),
            model_prefix=required_field(entry, key, "model-prefix", str),
            precision=required_field(entry, key, "precision", str),
            framework=required_field(entry, key, "framework", str),
            runner=required_field(entry, key, "runner", str),
            disagg=bool(entry.get("disagg", False)),
        )


def _seq_len_scenarios(fixed: list[Any], key: str) -> Iterator[tuple[int, int, list[Any]]]:
    """Step 2: each fixed-seq-len item as (isl, osl, its search space), checked as it is reached."""
    for seq_item in fixed:
        if not isinstance(seq_item, dict):
            raise InvalidRecipeError(f"config key '{key}': fixed-seq-len items must be mappings")
        isl = required_field(seq_item, key, "isl", int)
        osl = required_field(seq_item, key, "osl", int)
        space = seq_item.get("search-space")
        if not isinstance(space, list) or not space:
            raise InvalidRecipeError(
                f"config key '{key}': isl {isl}/osl {osl} needs a non-empty `search-space` list"
            )
        extra_seq = sorted(set(seq_item) - {"isl", "osl", "search-space"})
        if extra_seq:
            raise UnsupportedScenarioError(
                f"config key '{key}': fixed-seq-len field(s) {', '.join(extra_seq)} are not "
                "supported by sweep planning"
            )
        yield isl, osl, space


@dataclass(frozen=True)
class _Parallelism:
    """Step 2: one search-space item's parallelism and spec-decoding, with the repo's defaults."""

    tp: int
    pp: int
    dcp_size: int
    pcp_size: int
    ep: int
    dp_attn: bool
    spec_decoding: str

    @classmethod
    def read(cls, item: Any, key: str) -> _Parallelism:
        if not isinstance(item, dict):
            raise InvalidRecipeError(f"config key '{key}': search-space items must be mappings")
        unknown = sorted(set(item) - _POINT_FIELDS - _PASSTHROUGH_FIELDS)
        if unknown:
            raise UnsupportedScenarioError(
                f"config key '{key}': search-space field(s) {', '.join(unknown)} are not supported "
                "for single-node fixed-seq-len planning"
            )
        tp = positive_int(item, key, "tp", None)
        if tp is None:
            raise InvalidRecipeError(f"config key '{key}': a search-space item has no `tp`")
        dp_attn = item.get("dp-attn")
        if dp_attn is not None and not isinstance(dp_attn, bool):
            raise InvalidRecipeError(f"config key '{key}': `dp-attn` must be true or false, got {dp_attn!r}")
        spec = item.get("spec-decoding", "none")
        if spec not in SPEC_MODES:
            raise InvalidRecipeError(
                f"config key '{key}': `spec-decoding` must be one of {', '.join(SPEC_MODES)}, got {spec!r}"
            )
        pp = positive_int(item, key, "pp", 1)
        dcp = positive_int(item, key, "dcp-size", 1)
        pcp = positive_int(item, key, "pcp-size", 1)
        ep = positive_int(item, key, "ep", 1)
        assert pp is not None and dcp is not None and pcp is not None and ep is not None
        return cls(tp, pp, dcp, pcp, ep, bool(dp_attn), str(spec))


def _item_points(shared: _KeyFields, isl: int, osl: int, par: _Parallelism, concs: list[int]) -> list[Point]:
    """Step 4: one point per conc of a search-space item."""
    return [
        Point(
            config_key=shared.key,
            image=shared.image,
            model=shared.model,
            model_prefix=shared.model_prefix,
            precision=shared.precision,
            framework=shared.framework,
            runner=shared.runner,
            isl=isl,
            osl=osl,
            tp=par.tp,
            pp=par.pp,
            dcp_size=par.dcp_size,
            pcp_size=par.pcp_size,
            ep=par.ep,
            dp_attn=par.dp_attn,
            spec_decoding=par.spec_decoding,
            conc=value,
            max_model_len=isl + osl + MAX_MODEL_LEN_SLACK,
            disagg=shared.disagg,
        )
        for value in concs
    ]


def _filter_points(
    all_points: list[Point], key: str, want_seq: str | None, conc: list[int] | None, tp: int | None
) -> list[Point]:
    """Step 5: the seq, tp and conc filters; one that matches nothing says what the key has."""
    points = all_points
    if want_seq is not None:
        points = [p for p in points if p.seq == want_seq]
        if not points:
            have = ", ".join(dict.fromkeys(p.seq for p in all_points))
            raise EmptyPlanError(f"config key '{key}' has no {want_seq} scenario (it has: {have})")
    if tp is not None:
        with_tp = [p for p in points if p.tp == tp]
        if not with_tp:
            have = ", ".join(str(t) for t in sorted({p.tp for p in points}))
            raise EmptyPlanError(f"config key '{key}' has no tp={tp} in that search space (tp: {have})")
        points = with_tp
    if conc:
        want_conc = set(conc)
        present = {p.conc for p in points}
        missing = sorted(want_conc - present)
        if missing:
            have = ", ".join(str(c) for c in sorted(present))
            raise EmptyPlanError(
                f"config key '{key}': conc {', '.join(map(str, missing))} not in its search space "
                f"(available: {have})"
            )
        points = [p for p in points if p.conc in want_conc]
    return points
