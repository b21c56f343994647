"""Runner labels: how many nodes each has (the repo's runners.yaml) and the hardware code in a label."""

from __future__ import annotations

from app.core.recipes.errors import InvalidYamlError
from app.core.recipes.yamlutil import load_yaml


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


def hardware_table(runners_yaml_text: str, what: str = "runners.yaml") -> dict[str, dict[str, object]] | None:
    """runners.yaml's `hardware:` mapping (runner label -> its facts: `available-cpu-dram-mib`,
    `gpus-per-node`), which the repo's generator sizes a DRAM-offload row's `total-cpu-dram-gb`
    with; None when the file has none (InvalidYamlError, naming ``what``, when it is not YAML)."""
    data = load_yaml(runners_yaml_text, what)
    table = data.get("hardware") if isinstance(data, dict) else None
    if not isinstance(table, dict):
        return None
    return {str(k): dict(v) for k, v in table.items() if isinstance(v, dict)}


def runner_hardware(runner: str) -> str:
    """`cluster:mi355x-amds` -> `mi355x`, `mi355x` -> `mi355x` (the launchers' script code)."""
    return runner.removeprefix("cluster:").split("-", 1)[0]
