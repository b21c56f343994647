"""The bot and the simulator, each from its own code, over every key of both master files: where
they disagree, a test fails (that is the point of having two).

- plans: the bot's planned points (``plan_with_evals``) against the rows the simulator's
  generator prints (``sim.matrix``, itself checked against the repo's own output), per family
  and eval mode, on the fields the generator prints (the bot's own bookkeeping fields dropped,
  an absent eval mark read as false);
- artifacts: the result artifact names the bot looks for (``bmk_artifact_name``,
  ``eval_artifact_name``) against the ones the simulator's jobs upload (``sim.naming``), per
  family, default mode, on one runner node.

Families the bot still gets wrong (issue 28) are ``xfail(strict=True)``: once the bot is right
the test passes, strict turns that into a failure, and the mark is removed.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.core.artifacts import bmk_artifact_name, eval_artifact_name
from app.core.recipes import EmptyPlanError, parse_master
from app.core.recipes.evals import EvalMode as BotMode
from app.core.recipes.evals import plan_with_evals
from sim import naming
from sim.matrix import test_config
from sim.matrix_evals import EvalMode
from sim.runs import e2e_families

FIX = Path(__file__).resolve().parent / "fixtures" / "inferencex"
FILES = ("amd-master", "nvidia-master")
FAMILIES = ("single-node", "single-node agentic", "multi-node", "multi-node agentic")
BOT_MODE = {
    EvalMode.DEFAULT: BotMode.DEFAULT,
    EvalMode.NONE: BotMode.NONE,
    EvalMode.ONLY: BotMode.ONLY,
    EvalMode.ALL: BotMode.ALL,
}
RUNNERS = yaml.safe_load((FIX / "runners.yaml").read_text())
NODE = "node-07"
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
EVAL_MARKS = ("run-eval", "eval-only", "eval-all-concs")


@functools.cache
def _text(name: str) -> str:
    return (FIX / "configs" / f"{name}.yaml").read_text()


@functools.cache
def _raw(name: str) -> dict[str, Any]:
    return yaml.load(_text(name), Loader=LOADER)


@functools.cache
def _master(name: str) -> dict[str, Any]:
    return parse_master(_text(name))


def family(config: dict[str, Any]) -> str:
    agentic = "agentic-coding" in (config.get("scenarios") or {})
    return ("multi-node" if config.get("multinode") else "single-node") + (" agentic" if agentic else "")


def _fields() -> frozenset[str]:
    """Every field the repo's generator prints (its rows in expected-plans/)."""
    found: set[str] = set()
    for path in (FIX / "expected-plans").glob("*.json"):
        for rows in json.loads(path.read_text()).values():
            for row in rows:
                found.update(row)
    return frozenset(found)


FIELDS = _fields()


def _canon(row: dict[str, Any]) -> str:
    kept = {k: v for k, v in row.items() if k in FIELDS and not (k in EVAL_MARKS and v is False)}
    if row.get("scenario-type") != "agentic-coding" or "prefill" in row:
        kept.setdefault("disagg", False)  # the templates' default for a row without the field
    return json.dumps(kept, sort_keys=True)


def _bot_plan(master: dict[str, Any], key: str, mode: EvalMode) -> list[dict[str, Any]] | str:
    try:
        return plan_with_evals(master, key, mode=BOT_MODE[mode], hardware=RUNNERS.get("hardware"))
    except EmptyPlanError:
        return []  # the generator prints no row for it in this mode; the bot says so in words
    except Exception as exc:  # noqa: BLE001 (any refusal is a disagreement, reported with its message)
        return f"{type(exc).__name__}: {exc}"


def _keys(name: str, fam: str) -> list[str]:
    return [k for k, v in _raw(name).items() if family(v) == fam]


# What the bot gets wrong, per case: empty since the planner follows the repo's generator (issue 28).
# A case the bot gets wrong again goes here with why (strict: it fails again once fixed).
PICKS = "issue 28: eval picks (concs below 16 dropped, groups across TPs, marks after --conc)"
PLAN_WRONG: dict[tuple[str, EvalMode], str] = {}
NAMES_WRONG: dict[str, str] = {}
EVAL_NAMES_WRONG: dict[str, str] = {}


def _marked(fam: str, wrong: dict[str, str]) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason=wrong[fam])] if fam in wrong else []
    return pytest.param(fam, marks=marks, id=fam)


def _plan_case(fam: str, mode: EvalMode) -> Any:
    reason = PLAN_WRONG.get((fam, mode))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(fam, mode, marks=marks, id=f"{fam}-{mode.value}")


@functools.cache
def _parsed(text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return yaml.load(text, Loader=LOADER), parse_master(text)


@functools.cache
def key_agrees(text: str, key: str, mode: EvalMode) -> bool:
    """Whether the bot plans ``key`` of the master file ``text`` in ``mode`` as the generator does
    (tests that use the simulator as the oracle of a bot rule skip the cases where the two already
    differ on the plan itself; the tests here track those)."""
    raw, master = _parsed(text)
    bot = _bot_plan(master, key, mode)
    sim = sorted(_canon(r) for r in test_config(raw, [key], RUNNERS, mode))
    return not isinstance(bot, str) and sorted(_canon(r) for r in bot) == sim


def same_point(row: dict[str, Any], point: dict[str, Any]) -> bool:
    """Whether a generator row and a bot point are the same point (the generator's fields, eval
    marks aside)."""
    marks = (*EVAL_MARKS, "eval-conc")
    return all(point.get(k, False if k == "disagg" else None) == v for k, v in row.items() if k not in marks)


def plan_disagreements(name: str, fam: str, mode: EvalMode) -> list[str]:
    raw, master = _raw(name), _master(name)
    wrong = []
    for key in _keys(name, fam):
        sim_rows = sorted(_canon(r) for r in test_config(raw, [key], RUNNERS, mode))
        bot = _bot_plan(master, key, mode)
        if isinstance(bot, str) or sorted(_canon(r) for r in bot) != sim_rows:
            wrong.append(key)
    return wrong


@pytest.mark.parametrize(("fam", "mode"), [_plan_case(f, m) for f in FAMILIES for m in EvalMode])
def test_the_bots_plan_is_the_simulators(fam: str, mode: EvalMode) -> None:
    wrong = {name: plan_disagreements(name, fam, mode) for name in FILES}
    assert not any(wrong.values()), {n: (len(w), w[:4]) for n, w in wrong.items()}


def _sim_names(rows: list[dict[str, Any]], kind: str) -> set[str]:
    names: set[str] = set()
    for _, row in e2e_families(rows):
        rf = naming.result_filename(row, NODE)
        made = naming.uploads(row, rf, lambda c: {}, dict)
        names.update(n for n in made if n.startswith(f"{kind}_") and not n.startswith(LOGS))
    return names


def _bot_names(points: list[dict[str, Any]], kind: str) -> set[str]:
    names: set[str] = set()
    for p in points:
        if kind == "bmk" and not p.get("eval-only"):
            names.add(bmk_artifact_name(p, NODE))
        if kind == "eval" and (p.get("run-eval") or p.get("eval-only")):
            names.add(eval_artifact_name(p, NODE))
    return names


LOGS = ("eval_server_logs_", "eval_gpu_metrics_")
KIND_MODE = {"bmk": EvalMode.NONE, "eval": EvalMode.DEFAULT}


def name_disagreements(name: str, fam: str, kind: str) -> list[str]:
    """Keys whose ``kind`` artifacts (``bmk``: throughput, planned without evals; ``eval``: the
    default mode's evals) the bot names otherwise than the simulator's jobs upload them."""
    raw, master = _raw(name), _master(name)
    wrong = []
    for key in _keys(name, fam):
        bot = _bot_plan(master, key, KIND_MODE[kind])
        sim = _sim_names(test_config(raw, [key], RUNNERS, KIND_MODE[kind]), kind)
        if isinstance(bot, str) or _bot_names(bot, kind) != sim:
            wrong.append(key)
    return wrong


@pytest.mark.parametrize("fam", [_marked(f, NAMES_WRONG) for f in FAMILIES])
def test_the_bot_looks_for_the_results_the_simulator_uploads(fam: str) -> None:
    wrong = {name: name_disagreements(name, fam, "bmk") for name in FILES}
    assert not any(wrong.values()), {n: (len(w), w[:4]) for n, w in wrong.items()}


@pytest.mark.parametrize("fam", [_marked(f, EVAL_NAMES_WRONG) for f in FAMILIES])
def test_the_bot_looks_for_the_evals_the_simulator_uploads(fam: str) -> None:
    wrong = {name: name_disagreements(name, fam, "eval") for name in FILES}
    assert not any(wrong.values()), {n: (len(w), w[:4]) for n, w in wrong.items()}
