"""Which way a sweep goes (app.core.sweepway): label for full sweeps, dispatch for what labels cannot say."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.recipes.evals import EvalMode
from app.core.sweepway import choose_way, targeted_filters


def _way(**kw: Any) -> Any:
    args: dict[str, Any] = {
        "configured": "label",
        "has_label_workflow": True,
        "targeted": None,
        "is_fork": False,
        "eval_mode": EvalMode.DEFAULT,
        "primary": "full-sweep-fail-fast",
        "pr_labels": [],
    }
    return choose_way(**(args | kw))


def test_a_full_sweep_goes_by_label_and_is_publishable() -> None:
    way = _way()
    assert (way.mode, way.add, way.remove, way.publishable) == ("label", (), (), True)
    assert "full-sweep-fail-fast" in way.why


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"configured": "dispatch"}, "sweep.mode: dispatch"),
        ({"targeted": targeted_filters(None, [32, 64], None, None)}, "conc=32,64 targets part of the key"),
        ({"targeted": targeted_filters("8k1k", None, None, None)}, "seq=8k1k"),
        ({"has_label_workflow": False}, "no .github/workflows/run-sweep.yml"),
        ({"is_fork": True}, "fork"),
        ({"eval_mode": EvalMode.NONE}, "evals=none has no label"),
    ],
)
def test_what_labels_cannot_say_is_dispatched_and_not_publishable(kw: dict[str, Any], why: str) -> None:
    way = _way(**kw)
    assert way.mode == "dispatch" and why in way.why and not way.publishable
    assert "not reusable at merge" in way.publishable_why


@pytest.mark.parametrize(
    ("mode", "labels", "add", "remove", "publishable"),
    [
        (EvalMode.ONLY, [], ("evals-only",), (), False),
        (EvalMode.ALL, ["evals-only"], ("all-evals",), (), False),
        (EvalMode.DEFAULT, ["evals-only", "all-evals"], (), ("evals-only", "all-evals"), True),
        (EvalMode.DEFAULT, ["agentx-fast"], (), (), False),  # a maintainer's choice, left alone
    ],
)
def test_eval_modifiers_follow_the_eval_mode(
    mode: EvalMode, labels: list[str], add: tuple[str, ...], remove: tuple[str, ...], publishable: bool
) -> None:
    way = _way(eval_mode=mode, pr_labels=labels)
    assert (way.mode, way.add, way.remove, way.publishable) == ("label", add, remove, publishable)
