"""The planned values of a master-config key: a single-node `Point`, a multi-node or agentic `PlanRow`.

A point's result identity is the workflow's RESULT_FILENAME base (benchmark repo
SemiAnalysisAI/InferenceX at 843c6254, `.github/workflows/benchmark-tmpl.yml`):
`{exp-name}_{precision}_{framework}_tp{TP}-pp{PP}-dcp{DCP}-pcp{PCP}-ep{EP}-dpa{bool}_disagg-{bool}_spec-{mode}_conc{C}_{runner}`
with lowercase booleans, `exp-name` = `<model-prefix>_<seq>` (app/core/seqlen.py names the seq).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.core.recipes.errors import InvalidRecipeError
from app.core.seqlen import seq_name

MAX_MODEL_LEN_SLACK = 256  # max-model-len = isl + osl + 256, the repo's rule for every point


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
            "disagg": self.disagg,
            "result-name": self.result_name,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], *, disagg: bool | None = None) -> Point:
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
                disagg=bool(data.get("disagg", False)) if disagg is None else disagg,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidRecipeError(f"point JSON is missing or has a bad field: {exc}") from exc


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


def _worker_part(w: dict[str, Any], role: str) -> str:
    return (
        f"{role}-tp{w['tp']}-pp{w.get('pp', 1)}-dcp{w.get('dcp-size', 1)}-pcp{w.get('pcp-size', 1)}"
        f"-ep{w.get('ep', 1)}-dp{_bool(bool(w.get('dp-attn', False)))}-nw{w['num-worker']}"
    )


def result_base(row: dict[str, Any]) -> str:
    """``RESULT_FILENAME_BASE`` of a generated row up to its node name (``..._conc<C>``).

    Single-node rows (fixed-seq-len and agentic, `benchmark-tmpl.yml`):
    `<exp>_<prec>_<fw>_tp<TP>-pp<PP>-dcp<DCP>-pcp<PCP>-ep<EP>-dpa<bool>_disagg-<bool>_spec-<mode>_conc<C>`
    (agentic jobs are dispatched with `disagg: false`). Multi-node rows
    (`benchmark-multinode-tmpl.yml`): `<exp>_<prec>_<fw>_prefill-tp..-pp..-dcp..-pcp..-ep..-dp<bool>-nw<n>
    _decode-..._disagg-<bool>_spec-<mode>_conc<c1>x<c2>...`.
    """
    head = f"{row['exp-name']}_{row['precision']}_{row['framework']}"
    spec = row.get("spec-decoding", "none")
    if "prefill" in row:
        conc = row["conc"] if isinstance(row["conc"], list) else [row["conc"]]
        concs = "x".join(str(int(c)) for c in conc)
        return (
            f"{head}_{_worker_part(row['prefill'], 'prefill')}_{_worker_part(row['decode'], 'decode')}"
            f"_disagg-{_bool(bool(row.get('disagg', False)))}_spec-{spec}_conc{concs}"
        )
    disagg = False if row.get("scenario-type") == "agentic-coding" else bool(row.get("disagg", False))
    return (
        f"{head}_tp{int(row['tp'])}-pp{int(row.get('pp', 1))}-dcp{int(row.get('dcp-size', 1))}"
        f"-pcp{int(row.get('pcp-size', 1))}-ep{int(row.get('ep', 1))}"
        f"-dpa{_bool(bool(row.get('dp-attn', False)))}"
        f"_disagg-{_bool(disagg)}_spec-{spec}_conc{int(row['conc'])}"
    )


def row_result_name(row: dict[str, Any]) -> str:
    """A generated row's identity: ``result_base`` with its runner label for the node name."""
    return f"{result_base(row)}_{row['runner']}"
