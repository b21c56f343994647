"""Master-config parsing and sweep planning, in agreement with the benchmark repo's matrix logic.

What the benchmark repo (SemiAnalysisAI/InferenceX at 843c6254: `utils/matrix_logic/
generate_sweep_configs.py`, command `test-config`, run by `.github/workflows/e2e-tests.yml`) does
for a single-node `fixed-seq-len` config, as checked against its source:

* For every `scenarios.fixed-seq-len` item (isl/osl) and every `search-space` item, in file order:
  `conc-list` is used as given when the item has it; otherwise conc runs from `conc-start`,
  multiplied by 2, and a value that overshoots is clamped to `conc-end` (1..48 -> 1,2,4,8,16,32,48).
  Its own validation rejects an item carrying both a list and a range.
* One row per conc, in that order (one runner label per key here): the order is
  seq-len x search-space item x conc.
* Defaults: `pp`, `dcp-size`, `pcp-size` = 1, `ep` = 1 when absent, `dp-attn` = false when absent,
  `spec-decoding` = "none"; `disagg` comes from the entry (default false).
  `max-model-len` = isl + osl + 256; `exp-name` = `<model-prefix>_<seq>` with seq `1k1k`, `8k1k`,
  else `<isl>_<osl>`.
* `--seq-lens` filters by (isl, osl); `--conc` keeps only values already in the expansion.
* Multi-node keys and agentic-coding scenarios are planned by app/core/recipes/topology.py (its
  docstring has their rules); expand_points returns their rows as PlanRow objects.
* Result identity (the workflow's RESULT_FILENAME base):
  `{exp-name}_{precision}_{framework}_tp{TP}-pp{PP}-dcp{DCP}-pcp{PCP}-ep{EP}-dpa{bool}_disagg-{bool}_spec-{mode}_conc{C}_{runner}`
  with lowercase booleans.
* Launchers pick the benchmark script
  `benchmarks/single_node/<fixed_seq_len|agentic>/<prefix>_<precision>_<hw>_<framework>[_mtp].sh`
  (hw = runner label without `cluster:` and without its `-...` tail; `_mtp` when spec-decoding
  is mtp/draft_model) and fall back to the legacy name without the framework (`_trt`/`_atom`
  kept) when the tagged script does not exist.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import pickle
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from app.core.recipes import topology
from app.core.recipes.errors import (
    EmptyPlanError,
    InvalidRecipeError,
    InvalidYamlError,
    UnknownKeyError,
    UnsupportedScenarioError,
)
from app.core.recipes.yamlutil import load_yaml
from app.core.seqlen import seq_name, seq_shape

FIXED_SEQ_LEN = "fixed-seq-len"
FIXED_SCENARIO = FIXED_SEQ_LEN
AGENTIC_CODING = "agentic-coding"
SPEC_MODES = ("none", "mtp", "draft_model")
MAX_MODEL_LEN_SLACK = 256
CONC_STEP = 2

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


@functools.lru_cache(maxsize=16)
def _parsed_pickle(text: str) -> bytes:
    return pickle.dumps(load_yaml(text, "the master config"), protocol=pickle.HIGHEST_PROTOCOL)


def parse_master(text: str) -> dict[str, Any]:
    """Parse a master config (`<vendor>-master.yaml`): a mapping of config key -> entry.

    Returns a fresh object on every call (callers may mutate it); repeated parses of the same
    text are served from a small cache because the real files take ~50 ms to load.
    """
    data = pickle.loads(_parsed_pickle(text))
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise InvalidYamlError(
            f"the master config is {kind}, not a mapping of config keys; "
            "it must look like `<config-key>: {image: ..., model: ..., scenarios: ...}`"
        )
    return data


def _bool(value: bool) -> str:
    return "true" if value else "false"


@dataclass(frozen=True)
class Point:
    """One benchmark job: a config key at one seq-len, one parallelism setting and one conc."""

    config_key: str
    image: str
    model: str
    model_prefix: str
    precision: str
    framework: str
    runner: str
    isl: int
    osl: int
    tp: int
    pp: int
    dcp_size: int
    pcp_size: int
    ep: int
    dp_attn: bool
    spec_decoding: str
    conc: int
    max_model_len: int
    # Part of the result identity but not of the plan JSON (always false for single-node keys
    # unless the entry says `disagg: true`).
    disagg: bool = False

    @property
    def seq(self) -> str:
        return seq_name(self.isl, self.osl)

    @property
    def exp_name(self) -> str:
        return f"{self.model_prefix}_{self.seq}"

    @property
    def result_name(self) -> str:
        return (
            f"{self.exp_name}_{self.precision}_{self.framework}"
            f"_tp{self.tp}-pp{self.pp}-dcp{self.dcp_size}-pcp{self.pcp_size}-ep{self.ep}"
            f"-dpa{_bool(self.dp_attn)}_disagg-{_bool(self.disagg)}_spec-{self.spec_decoding}"
            f"_conc{self.conc}_{self.runner}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "config-key": self.config_key,
            "image": self.image,
            "model": self.model,
            "model-prefix": self.model_prefix,
            "precision": self.precision,
            "framework": self.framework,
            "runner": self.runner,
            "isl": self.isl,
            "osl": self.osl,
            "tp": self.tp,
            "pp": self.pp,
            "dcp-size": self.dcp_size,
            "pcp-size": self.pcp_size,
            "ep": self.ep,
            "dp-attn": self.dp_attn,
            "spec-decoding": self.spec_decoding,
            "conc": self.conc,
            "max-model-len": self.max_model_len,
            "exp-name": self.exp_name,
            "result-name": self.result_name,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], *, disagg: bool = False) -> Point:
        """Inverse of to_json (derived keys are recomputed, not trusted)."""
        try:
            return cls(
                config_key=str(data["config-key"]),
                image=str(data["image"]),
                model=str(data["model"]),
                model_prefix=str(data["model-prefix"]),
                precision=str(data["precision"]),
                framework=str(data["framework"]),
                runner=str(data["runner"]),
                isl=int(data["isl"]),
                osl=int(data["osl"]),
                tp=int(data["tp"]),
                pp=int(data["pp"]),
                dcp_size=int(data["dcp-size"]),
                pcp_size=int(data["pcp-size"]),
                ep=int(data["ep"]),
                dp_attn=bool(data["dp-attn"]),
                spec_decoding=str(data["spec-decoding"]),
                conc=int(data["conc"]),
                max_model_len=int(data["max-model-len"]),
                disagg=disagg,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidRecipeError(f"point JSON is missing or has a bad field: {exc}") from exc


# ---------------------------------------------------------------------------------------------
# Entry access and validation


def get_entry(master: dict[str, Any], key: str) -> dict[str, Any]:
    """The entry of `key`, or UnknownKeyError with close matches."""
    if key not in master:
        close = difflib.get_close_matches(key, [str(k) for k in master], n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else "; check the key and the file"
        raise UnknownKeyError(f"config key '{key}' is not in this master config{hint}")
    entry = master[key]
    if not isinstance(entry, dict):
        raise InvalidRecipeError(
            f"config key '{key}' is not a mapping (got {type(entry).__name__}); "
            "each key must map to `image`, `model`, ... `scenarios`"
        )
    return entry


def _field(entry: dict[str, Any], key: str, name: str, kind: type | tuple[type, ...]) -> Any:
    if name not in entry:
        raise InvalidRecipeError(f"config key '{key}' has no `{name}`; add it to the entry")
    value = entry[name]
    # bool is an int subclass; an int field must not accept true/false.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        want = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise InvalidRecipeError(f"config key '{key}': `{name}` must be a {want}, got {value!r}")
    return value


def _positive_int(item: dict[str, Any], key: str, name: str, default: int | None) -> int | None:
    if name not in item or item[name] is None:
        return default
    value = item[name]
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise InvalidRecipeError(
            f"config key '{key}': search-space `{name}` must be a positive integer, got {value!r}"
        )
    return value


def is_multinode(entry: dict[str, Any]) -> bool:
    return bool(entry.get("multinode", False))


def scenario_kinds(entry: dict[str, Any]) -> frozenset[str]:
    scenarios = entry.get("scenarios")
    return frozenset(str(k) for k in scenarios) if isinstance(scenarios, dict) else frozenset()


def require_single_node_fixed(key: str, entry: dict[str, Any]) -> list[Any]:
    """The `fixed-seq-len` list of a single-node key, or UnsupportedScenarioError saying why not."""
    if is_multinode(entry):
        raise UnsupportedScenarioError(
            f"config key '{key}' is multinode (`multinode: true`); sweep planning is not supported "
            "for multinode configs, only single-node fixed-seq-len ones"
        )
    scenarios = entry.get("scenarios")
    if not isinstance(scenarios, dict) or not scenarios:
        raise InvalidRecipeError(
            f"config key '{key}' has no `scenarios` mapping; add `scenarios: {{fixed-seq-len: [...]}}`"
        )
    other = sorted(str(k) for k in scenarios if k != FIXED_SEQ_LEN)
    if other:
        raise UnsupportedScenarioError(
            f"config key '{key}' has {', '.join(other)} scenarios; sweep planning is not supported "
            "for them, only single-node fixed-seq-len configs"
        )
    fixed = scenarios.get(FIXED_SEQ_LEN)
    if not isinstance(fixed, list) or not fixed:
        raise InvalidRecipeError(
            f"config key '{key}': `scenarios.fixed-seq-len` must be a non-empty list of "
            "{isl, osl, search-space} items"
        )
    return fixed


def conc_values(item: dict[str, Any], key: str = "?") -> list[int]:
    """The conc values of one search-space item: `conc-list` as given, or the doubling range."""
    has_list = item.get("conc-list") is not None
    has_range = item.get("conc-start") is not None or item.get("conc-end") is not None
    if has_list and has_range:
        raise InvalidRecipeError(
            f"config key '{key}': a search-space item has both `conc-list` and `conc-start`/`conc-end`; "
            "use one of them (the benchmark repo rejects both)"
        )
    if has_list:
        values = item["conc-list"]
        if (
            not isinstance(values, list)
            or not values
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)
        ):
            raise InvalidRecipeError(
                f"config key '{key}': `conc-list` must be a non-empty list of positive integers, "
                f"got {values!r}"
            )
        return list(values)
    start = _positive_int(item, key, "conc-start", None)
    end = _positive_int(item, key, "conc-end", None)
    if start is None or end is None:
        raise InvalidRecipeError(
            f"config key '{key}': a search-space item needs `conc-list` or both `conc-start` and `conc-end`"
        )
    if start > end:
        raise InvalidRecipeError(
            f"config key '{key}': conc-start {start} is greater than conc-end {end}; swap them"
        )
    out: list[int] = []
    conc = start
    while True:
        out.append(conc)
        if conc == end:
            return out
        conc = min(conc * CONC_STEP, end)


def _parse_seq_filter(seq: str) -> str:
    # `1024_1024` and `1k1k` name the same shape: the repo's own spelling is the one matched.
    shape = seq_shape(seq.strip())
    if shape is None:
        raise EmptyPlanError(f"unknown seq '{seq}'; use 1k1k, 8k1k or <isl>_<osl> (for example 2048_512)")
    return shape


@dataclass(frozen=True)
class PlanRow:
    """A planned multi-node or agentic row: the plan dict, with Point's `to_json`/`result_name`."""

    data: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return json.loads(json.dumps(self.data))  # a deep copy the caller may mutate

    @property
    def result_name(self) -> str:
        return str(self.data["result-name"])

    @property
    def concs(self) -> list[int]:
        conc = self.data["conc"]
        return list(conc) if isinstance(conc, list) else [int(conc)]


def is_single_node_fixed(entry: dict[str, Any]) -> bool:
    return not is_multinode(entry) and scenario_kinds(entry) == {FIXED_SEQ_LEN}


def _expand_other(entry: dict[str, Any], key: str) -> list[PlanRow]:
    """Rows of a multi-node key or of a key with agentic-coding scenarios, in file order."""
    scenarios = entry.get("scenarios")
    if not isinstance(scenarios, dict) or not scenarios:
        raise InvalidRecipeError(
            f"config key '{key}' has no `scenarios` mapping; add `scenarios: {{fixed-seq-len: [...]}}`"
        )
    unknown = sorted(str(k) for k in scenarios if k not in (FIXED_SEQ_LEN, AGENTIC_CODING))
    if unknown:
        raise UnsupportedScenarioError(
            f"config key '{key}': scenario type {', '.join(unknown)} cannot be expanded into sweep "
            "points; the benchmark repo documents fixed-seq-len and agentic-coding only"
        )
    multinode = is_multinode(entry)
    rows: list[PlanRow] = []
    for kind, items in scenarios.items():
        if not isinstance(items, list) or not items:
            raise InvalidRecipeError(f"config key '{key}': `scenarios.{kind}` must be a non-empty list")
        for scenario in items:
            if not isinstance(scenario, dict):
                raise InvalidRecipeError(f"config key '{key}': `{kind}` items must be mappings")
            space = scenario.get("search-space")
            if not isinstance(space, list) or not space:
                raise InvalidRecipeError(
                    f"config key '{key}': a `{kind}` item needs a non-empty `search-space`"
                )
            if kind == FIXED_SCENARIO:
                extra = set(scenario) - topology.FIXED_SCENARIO_FIELDS
                if extra:
                    raise topology._unsupported(key, "fixed-seq-len", extra)
                isl = _field(scenario, key, "isl", int)
                osl = _field(scenario, key, "osl", int)
                agentic = None
            else:
                isl = osl = None
                agentic = topology.agentic_scenario_fields(scenario, key)
            for item in space:
                if not isinstance(item, dict):
                    raise InvalidRecipeError(f"config key '{key}': search-space items must be mappings")
                concs = conc_values(item, key)
                if multinode:
                    rows.append(
                        PlanRow(
                            topology.multinode_row(entry, key, item, concs, isl=isl, osl=osl, agentic=agentic)
                        )
                    )
                elif agentic is not None:
                    rows += [PlanRow(r) for r in topology.agentic_points(entry, key, item, concs, agentic)]
                else:  # a single-node key that also has agentic scenarios: this item as its own key
                    alone = {
                        **entry,
                        "scenarios": {FIXED_SEQ_LEN: [{"isl": isl, "osl": osl, "search-space": [item]}]},
                    }
                    rows += [PlanRow(p.to_json()) for p in expand_points({key: alone}, key)]
    return rows


def _filter_rows(
    rows: list[PlanRow], key: str, seq: str | None, conc: list[int] | None, tp: int | None
) -> list[PlanRow]:
    """The same filters as for single-node points; a multi-node row's conc list is narrowed."""
    out = rows
    if seq is not None:
        want = _parse_seq_filter(seq)
        out = [r for r in out if "isl" in r.data and seq_name(r.data["isl"], r.data["osl"]) == want]
        if not out:
            have = sorted({seq_name(r.data["isl"], r.data["osl"]) for r in rows if "isl" in r.data})
            kinds = " (agentic-coding rows have no seq-len)" if any("isl" not in r.data for r in rows) else ""
            raise EmptyPlanError(
                f"config key '{key}' has no {want} scenario (it has: {', '.join(have) or 'none'}){kinds}"
            )
    if tp is not None:

        def tps(r: PlanRow) -> set[int]:
            if "prefill" in r.data:
                return {int(r.data["prefill"]["tp"]), int(r.data["decode"]["tp"])}
            return {int(r.data["tp"])}

        kept = [r for r in out if tp in tps(r)]
        if not kept:
            have_tp = ", ".join(str(t) for t in sorted(set().union(*(tps(r) for r in out))))
            raise EmptyPlanError(f"config key '{key}' has no tp={tp} in that search space (tp: {have_tp})")
        out = kept
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
                narrowed.append(PlanRow({**r.data, "conc": keep}))
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
) -> list[Any]:
    """Expand `key`'s search space into points, in the repo's order.

    Single-node fixed-seq-len keys give `Point`s; multi-node keys and agentic-coding scenarios
    give `PlanRow`s (topology.py). Filters: `seq` (`1k1k`, `8k1k`, `<isl>_<osl>`), `conc` (values
    kept only where the search space has them), `tp`. A filter value that matches nothing raises
    EmptyPlanError naming what exists, so a typo never silently plans zero jobs.
    """
    entry = get_entry(master, key)
    if not is_single_node_fixed(entry):
        return _filter_rows(_expand_other(entry, key), key, seq, conc, tp)
    fixed = require_single_node_fixed(key, entry)
    image = _field(entry, key, "image", str)
    model = _field(entry, key, "model", str)
    prefix = _field(entry, key, "model-prefix", str)
    precision = _field(entry, key, "precision", str)
    framework = _field(entry, key, "framework", str)
    runner = _field(entry, key, "runner", str)
    disagg = bool(entry.get("disagg", False))
    want_seq = _parse_seq_filter(seq) if seq is not None else None
    want_conc = set(conc) if conc else None

    all_points: list[Point] = []
    for seq_item in fixed:
        if not isinstance(seq_item, dict):
            raise InvalidRecipeError(f"config key '{key}': fixed-seq-len items must be mappings")
        isl = _field(seq_item, key, "isl", int)
        osl = _field(seq_item, key, "osl", int)
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
        for item in space:
            if not isinstance(item, dict):
                raise InvalidRecipeError(f"config key '{key}': search-space items must be mappings")
            unknown = sorted(set(item) - _POINT_FIELDS - _PASSTHROUGH_FIELDS)
            if unknown:
                raise UnsupportedScenarioError(
                    f"config key '{key}': search-space field(s) {', '.join(unknown)} are not supported "
                    "for single-node fixed-seq-len planning"
                )
            item_tp = _positive_int(item, key, "tp", None)
            if item_tp is None:
                raise InvalidRecipeError(f"config key '{key}': a search-space item has no `tp`")
            dp_attn = item.get("dp-attn")
            if dp_attn is not None and not isinstance(dp_attn, bool):
                raise InvalidRecipeError(
                    f"config key '{key}': `dp-attn` must be true or false, got {dp_attn!r}"
                )
            spec = item.get("spec-decoding", "none")
            if spec not in SPEC_MODES:
                raise InvalidRecipeError(
                    f"config key '{key}': `spec-decoding` must be one of {', '.join(SPEC_MODES)}, "
                    f"got {spec!r}"
                )
            pp = _positive_int(item, key, "pp", 1)
            dcp = _positive_int(item, key, "dcp-size", 1)
            pcp = _positive_int(item, key, "pcp-size", 1)
            ep = _positive_int(item, key, "ep", 1)
            assert pp is not None and dcp is not None and pcp is not None and ep is not None
            for value in conc_values(item, key):
                all_points.append(
                    Point(
                        config_key=key,
                        image=image,
                        model=model,
                        model_prefix=prefix,
                        precision=precision,
                        framework=framework,
                        runner=runner,
                        isl=isl,
                        osl=osl,
                        tp=item_tp,
                        pp=pp,
                        dcp_size=dcp,
                        pcp_size=pcp,
                        ep=ep,
                        dp_attn=bool(dp_attn),
                        spec_decoding=str(spec),
                        conc=value,
                        max_model_len=isl + osl + MAX_MODEL_LEN_SLACK,
                        disagg=disagg,
                    )
                )

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
    if want_conc is not None:
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


def plannable_keys(master: dict[str, Any]) -> list[str]:
    """Keys whose scenarios expand_points knows (fixed-seq-len, agentic-coding), in file order."""
    out = []
    for key, entry in master.items():
        if not isinstance(entry, dict):
            continue
        kinds = scenario_kinds(entry)
        if kinds and kinds <= {FIXED_SEQ_LEN, AGENTIC_CODING}:
            out.append(str(key))
    return out


# ---------------------------------------------------------------------------------------------
# Identity, siblings, runners


def recipe_fingerprint(entry: dict[str, Any], script_text: str | None = None) -> str:
    """sha256 hex over the key's entry without `image` (canonical JSON) plus the benchmark script.

    Why: a stored result may be reused for a new request only when it was produced by the same
    image, the same point and the same recipe. The image and the point are compared separately,
    so the fingerprint deliberately leaves `image` out (a pin bump changes the image, not the
    recipe); everything else that shapes how the server is launched (search space, passthrough
    knobs, the launch script's flags/env) is in it, so editing any of it invalidates reuse.
    """
    body = {k: v for k, v in entry.items() if k != "image"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    digest = hashlib.sha256()
    digest.update(b"sweepbot-recipe-v1\0")
    digest.update(canonical.encode("utf-8"))
    # Distinguish "no script known" from an empty script.
    if script_text is None:
        digest.update(b"\0noscript")
    else:
        digest.update(b"\0script\0")
        digest.update(script_text.encode("utf-8"))
    return digest.hexdigest()


def spec_modes(entry: dict[str, Any]) -> frozenset[str]:
    """The spec-decoding modes used by the entry's search-space items (all scenario kinds)."""
    modes: set[str] = set()
    scenarios = entry.get("scenarios")
    if not isinstance(scenarios, dict):
        return frozenset()
    for items in scenarios.values():
        for seq_item in items if isinstance(items, list) else []:
            space = seq_item.get("search-space") if isinstance(seq_item, dict) else None
            for item in space if isinstance(space, list) else []:
                if isinstance(item, dict):
                    modes.add(str(item.get("spec-decoding", "none")))
    return frozenset(modes)


def _variant(entry: dict[str, Any]) -> tuple[Any, ...]:
    """Everything a reference sibling must share except the framework."""
    return (
        entry.get("model-prefix"),
        entry.get("precision"),
        entry.get("runner"),
        is_multinode(entry),
        scenario_kinds(entry),
        spec_modes(entry),
    )


def sibling_key(master: dict[str, Any], key: str, framework: str = "atom") -> str | None:
    """The config that differs from `key` only by framework (the reference engine's recipe).

    Same model-prefix, precision, runner, multinode flag, scenario kinds and spec-decoding modes
    (so a plain key never pairs with an `-mtp`, `-agentic` or `-disagg` variant unless it is one).
    The key with the framework segment swapped (`...-vllm` -> `...-atom`) wins when it qualifies;
    otherwise a unique qualifying key; None when there is none or the choice would be a guess.
    """
    entry = get_entry(master, key)
    if entry.get("framework") == framework:
        return None
    want = _variant(entry)
    candidates = [
        str(k)
        for k, v in master.items()
        if k != key and isinstance(v, dict) and v.get("framework") == framework and _variant(v) == want
    ]
    own = entry.get("framework")
    if isinstance(own, str) and f"-{own}" in key:
        head, _, tail = key.rpartition(f"-{own}")
        # Only a whole segment (`-vllm` followed by end or `-`) is the framework.
        if tail == "" or tail.startswith("-"):
            swapped = f"{head}-{framework}{tail}"
            if swapped in candidates:
                return swapped
    return candidates[0] if len(candidates) == 1 else None


def runner_capacity(runners_yaml_text: str) -> dict[str, int]:
    """Nodes per runner label from runners.yaml's `labels:` mapping (label -> list of node names)."""
    data = load_yaml(runners_yaml_text, "runners.yaml")
    labels = data.get("labels") if isinstance(data, dict) else None
    if not isinstance(labels, dict):
        raise InvalidYamlError(
            "runners.yaml has no `labels:` mapping; it must map each runner label to its node names"
        )
    out: dict[str, int] = {}
    for label, nodes in labels.items():
        if not isinstance(nodes, list):
            raise InvalidYamlError(f"runners.yaml label '{label}' must list node names")
        out[str(label)] = len(dict.fromkeys(str(n) for n in nodes))
    return out


# ---------------------------------------------------------------------------------------------
# Which keys a PR touches


SCRIPT_DIRS = {FIXED_SEQ_LEN: "fixed_seq_len", AGENTIC_CODING: "agentic"}
SCRIPT_ROOT = "benchmarks/single_node"


def runner_hardware(runner: str) -> str:
    """`cluster:mi355x-amds` -> `mi355x`, `mi355x` -> `mi355x` (the launchers' script code)."""
    return runner.removeprefix("cluster:").split("-", 1)[0]


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


def keys_changed(old_text: str, new_text: str) -> set[str]:
    """Keys whose entry differs between two versions of a master config (added/removed included).

    An empty old text stands for a file that did not exist yet.
    """
    old = parse_master(old_text) if old_text.strip() else {}
    new = parse_master(new_text) if new_text.strip() else {}
    return {str(k) for k in set(old) | set(new) if old.get(k) != new.get(k)}
