"""The grammar of the benchmark repo's matrix CLI, `generate_sweep_configs.py`, and the bot's command.

`e2e-tests.yml` runs ``generate_sweep_configs.py $GENERATE_COMMAND`` with the dispatch input
``generate-cli-command`` (word-split by the shell, unquoted). Its usage, as documented in the
repo's `.github/workflows/README.md` (tests/fixtures/inferencex/docs/workflows-README.md):

    test-config  --config-files F [F ...] [--runner-config R] [--no-evals | --evals-only]
                 [--all-evals] --config-keys K [K ...] [--conc C [C ...]]
    full-sweep   --config-files F [F ...] [--runner-config R] [--no-evals | --evals-only]
                 [--all-evals] [--model-prefix ...] [--precision ...] [--framework ...]
                 [--runner-type ...] [--seq-lens {1k1k,8k1k} ...] [--step-size N]
                 [--max-conc N] [--max-tp N] [--max-ep N] [--single-node] [--multi-node]

plus what the same document uses in its prose and examples for full-sweep: ``--min-conc`` and
``--scenario-type agentic-coding``. There is no ``--tp`` and test-config has no ``--seq-lens``:
a test-config command selects keys and concurrencies only. ``--all-evals`` cannot be combined
with ``--no-evals``. argparse is the parser (the repo's script is argparse-based, which is why
its usage reads as it does); errors raise ``CliGrammarError`` instead of exiting.
"""

from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

SEQ_LEN_CHOICES = ("1k1k", "8k1k")
SCENARIO_TYPES = ("fixed-seq-len", "agentic-coding")
EVAL_MODES = ("default", "none", "only", "all")  # default | --no-evals | --evals-only | --all-evals
_REPO_PATH = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_./-]{0,254}$")


class CliGrammarError(ValueError):
    """A generate-cli-command the repo's CLI would reject; the message says what and how to fix it."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise CliGrammarError(f"{self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        # `-h` would print and exit; a dispatch input asking for help is a mistake, not a run.
        raise CliGrammarError(f"{self.prog}: {message or 'help requested'}".strip())


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _common(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--config-files", nargs="+", required=True, metavar="CONFIG_FILES")
    sub.add_argument("--runner-config", metavar="RUNNER_CONFIG")
    evals = sub.add_mutually_exclusive_group()
    evals.add_argument("--no-evals", action="store_true")
    evals.add_argument("--evals-only", action="store_true")
    sub.add_argument("--all-evals", action="store_true")


@functools.lru_cache(maxsize=1)
def build_parser() -> argparse.ArgumentParser:
    """The parser, built once (building it costs more than parsing; parse_args does not mutate it)."""
    parser = _Parser(prog="generate_sweep_configs.py", add_help=True)
    subs = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    full = subs.add_parser("full-sweep")
    _common(full)
    for flag in ("--model-prefix", "--precision", "--framework", "--runner-type"):
        full.add_argument(flag, nargs="+")
    full.add_argument("--seq-lens", nargs="+", choices=SEQ_LEN_CHOICES)
    full.add_argument("--step-size", type=_positive)
    full.add_argument("--min-conc", type=_positive)
    full.add_argument("--max-conc", type=_positive)
    full.add_argument("--max-tp", type=_positive)
    full.add_argument("--max-ep", type=_positive)
    full.add_argument("--single-node", action="store_true")
    full.add_argument("--multi-node", action="store_true")
    full.add_argument("--scenario-type", choices=SCENARIO_TYPES)
    test = subs.add_parser("test-config")
    _common(test)
    test.add_argument("--config-keys", nargs="+", required=True, metavar="CONFIG_KEYS")
    test.add_argument("--conc", nargs="+", type=_positive, metavar="CONC")
    return parser


@dataclass(frozen=True)
class CliCommand:
    """A parsed command; list fields are empty when the flag was not given."""

    command: str  # "test-config" | "full-sweep"
    config_files: tuple[str, ...]
    config_keys: tuple[str, ...] = ()
    conc: tuple[int, ...] = ()
    seq_lens: tuple[str, ...] = ()
    evals: str = "default"  # EVAL_MODES
    all_evals: bool = False
    runner_config: str | None = None
    filters: dict[str, object] = field(default_factory=dict)  # the other full-sweep options


def parse_command(text: str) -> CliCommand:
    """Parse ``generate-cli-command`` as the workflow's shell and the repo's CLI would."""
    # The workflow expands $GENERATE_COMMAND unquoted: plain word splitting, no quote removal
    # (a quoted word reaches the script with its quotes). Reject what would not survive that.
    if any(ch in text for ch in "'\"\\`$;&|<>(){}\n"):
        raise CliGrammarError(
            "generate-cli-command may only hold plain words: the workflow passes it unquoted to "
            "the script, so quotes, '$', ';', '|' and the like would not mean what they say"
        )
    words = text.split()
    if not words:
        raise CliGrammarError("generate-cli-command is empty; start it with test-config or full-sweep")
    ns = build_parser().parse_args(words)
    if ns.all_evals and ns.no_evals:
        raise CliGrammarError(
            f"generate_sweep_configs.py {ns.command}: --all-evals cannot be combined with --no-evals"
        )
    if ns.command == "full-sweep":
        if ns.min_conc is not None and ns.max_conc is not None and ns.min_conc > ns.max_conc:
            raise CliGrammarError("full-sweep: --min-conc must not exceed --max-conc")
        if ns.step_size is not None and ns.step_size <= 1:
            raise CliGrammarError("full-sweep: --step-size must be greater than 1")
    evals = "none" if ns.no_evals else ("only" if ns.evals_only else "default")
    filters: dict[str, object] = {}
    if ns.command == "full-sweep":
        for name in (
            "model_prefix",
            "precision",
            "framework",
            "runner_type",
            "step_size",
            "min_conc",
            "max_conc",
            "max_tp",
            "max_ep",
            "single_node",
            "multi_node",
            "scenario_type",
        ):
            value = getattr(ns, name)
            if value not in (None, False):
                filters[name] = value
    return CliCommand(
        command=ns.command,
        config_files=tuple(ns.config_files),
        config_keys=tuple(getattr(ns, "config_keys", None) or ()),
        conc=tuple(getattr(ns, "conc", None) or ()),
        seq_lens=tuple(getattr(ns, "seq_lens", None) or ()),
        evals=evals,
        all_evals=bool(ns.all_evals),
        runner_config=ns.runner_config,
        filters=filters,
    )


def render_test_config(
    config_file: str, keys: Sequence[str], concs: Sequence[int] = (), *, evals: str = "none"
) -> str:
    """A test-config command for ``keys`` of ``config_file`` (a repo path) at ``concs``.

    ``evals`` picks the repo's eval flag (``none`` -> ``--no-evals``; the default selection
    would add eval-only jobs the bot's queue does not plan). The result always parses.
    """
    if not _REPO_PATH.match(config_file) or ".." in config_file.split("/"):
        raise CliGrammarError(f"config file {config_file!r} is not a plain path inside the repository")
    if evals not in EVAL_MODES:
        raise CliGrammarError(f"evals={evals!r} is not one of {', '.join(EVAL_MODES)}")
    words = ["test-config", "--config-files", config_file, "--config-keys", *keys]
    if concs:
        words += ["--conc", *(str(int(c)) for c in concs)]
    words += {"default": [], "none": ["--no-evals"], "only": ["--evals-only"], "all": ["--all-evals"]}[evals]
    text = " ".join(words)
    parse_command(text)  # a command we would send must be one the repo's CLI accepts
    return text
