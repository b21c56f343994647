"""The grammar of ``generate_sweep_configs.py`` as e2e-tests.yml's get-jobs runs it (the
simulator's own reading of the repo's workflows README and the script's options at 843c6254).

get-jobs runs ``generate_sweep_configs.py $GENERATE_COMMAND`` with the variable unquoted, so the
shell splits it on whitespace and nothing else (a quote stays part of its word). Two commands:

- ``test-config --config-files F.. --config-keys K.. [--conc C..] [--seq-lens S..]``;
- ``full-sweep --config-files F.. [--model-prefix P..] [--precision ..] [--framework ..]
  [--runner-type ..] [--seq-lens ..] [--step-size N] [--min-conc N] [--max-conc N] [--max-tp N]
  [--max-ep N] [--single-node] [--multi-node]``;

both with ``[--runner-config FILE] [--no-evals | --evals-only] [--all-evals]
[--runner-node-filter S] [--scenario-type fixed-seq-len|agentic-coding ..]``. ``--all-evals``
with ``--no-evals`` is refused; ``--all-evals`` alone or with ``--evals-only`` is the same mode.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
from typing import Any, NoReturn

from sim.matrix_evals import EvalMode

SEQ_LENS = ("1k1k", "8k1k")
SCENARIOS = ("fixed-seq-len", "agentic-coding")
DEFAULT_RUNNER_CONFIG = "configs/runners.yaml"


class GrammarError(ValueError):
    """The script exits with a usage error (get-jobs fails with this message)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise GrammarError(f"{self.prog}: error: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise GrammarError(f"{self.prog}: {message or 'exited'}".strip())


@dataclasses.dataclass(frozen=True)
class Command:
    name: str  # test-config | full-sweep
    config_files: tuple[str, ...]
    runner_config: str
    mode: EvalMode
    options: dict[str, Any]  # the command's other options, argparse's names (None: not given)


def _shared(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--config-files", nargs="+", required=True)
    sub.add_argument("--runner-config", default=DEFAULT_RUNNER_CONFIG)
    group = sub.add_mutually_exclusive_group()
    group.add_argument("--no-evals", action="store_true")
    group.add_argument("--evals-only", action="store_true")
    sub.add_argument("--all-evals", action="store_true")
    sub.add_argument("--runner-node-filter")
    sub.add_argument("--scenario-type", nargs="+", choices=SCENARIOS)
    sub.add_argument("--seq-lens", nargs="+", choices=SEQ_LENS)


@functools.cache  # built once: parse_args leaves the parser as it was, and building it costs ~4 ms
def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="generate_sweep_configs.py")
    subs = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    full = subs.add_parser("full-sweep")
    _shared(full)
    for flag in ("--model-prefix", "--precision", "--framework", "--runner-type"):
        full.add_argument(flag, nargs="+")
    full.add_argument("--step-size", type=int, default=2)
    for flag in ("--min-conc", "--max-conc", "--max-tp", "--max-ep"):
        full.add_argument(flag, type=int)
    full.add_argument("--single-node", action="store_true")
    full.add_argument("--multi-node", action="store_true")
    test = subs.add_parser("test-config")
    _shared(test)
    test.add_argument("--config-keys", nargs="+", required=True)
    test.add_argument("--conc", nargs="+", type=int)
    return parser


def parse(command: str) -> Command:
    words = command.split()
    if not words:
        raise GrammarError("generate-cli-command is required outside trusted changelog dispatch mode")
    ns = vars(_parser().parse_args(words))
    if ns["no_evals"] and ns["all_evals"]:
        raise GrammarError("generate_sweep_configs.py: error: --all-evals cannot be combined with --no-evals")
    if ns["command"] == "full-sweep":
        if ns["step_size"] <= 1:
            raise GrammarError("generate_sweep_configs.py: error: --step-size must be greater than 1")
        low, high = ns["min_conc"], ns["max_conc"]
        if low is not None and high is not None and low > high:
            raise GrammarError(
                "generate_sweep_configs.py: error: --min-conc must be less than or equal to --max-conc"
            )
        if not ns["single_node"] and not ns["multi_node"]:
            ns["single_node"] = ns["multi_node"] = True
    mode = (
        EvalMode.ALL
        if ns["all_evals"]
        else EvalMode.ONLY
        if ns["evals_only"]
        else EvalMode.NONE
        if ns["no_evals"]
        else EvalMode.DEFAULT
    )
    drop = {"command", "config_files", "runner_config", "no_evals", "evals_only", "all_evals"}
    return Command(
        ns["command"],
        tuple(ns["config_files"]),
        ns["runner_config"],
        mode,
        {k: v for k, v in ns.items() if k not in drop},
    )
