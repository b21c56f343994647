"""Hostile YAML is refused within a bounded amount of work: an alias bomb ("billion laughs"), a
self-referencing alias, deep nesting and an over-size text each raise ``YAMLLimitError`` after a
number of composed nodes set by the caps, never after the document's expansion. The bound is
counted in composer steps (and the load runs in a thread the test waits on by event), not timed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from app.core import safeyaml
from app.core.safeyaml import YAMLLimitError, load_capped

CAPS = {"max_bytes": 128 * 1024, "max_depth": 32, "max_nodes": 50_000}


def billion_laughs(levels: int = 9, width: int = 10) -> str:
    """``width ** (levels - 1)`` strings in ~40·levels·width bytes."""
    lines = ['a0: &a0 "lol"']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join([*lines, f"watches: *a{levels - 1}"])


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many nodes the composer was asked for during the load (the work done)."""
    count = [0]
    original = safeyaml._CappedLoader.compose_node

    def counted(self: Any, parent: Any, index: Any) -> Any:
        count[0] += 1
        return original(self, parent, index)

    monkeypatch.setattr(safeyaml._CappedLoader, "compose_node", counted)
    yield count


def _load_in_thread(text: str) -> BaseException | object:
    """Load on a thread; the test waits for it by event (a runaway load fails the test, not the suite)."""
    done = threading.Event()
    outcome: list[BaseException | object] = []

    def run() -> None:
        try:
            outcome.append(load_capped(text, **CAPS))
        except BaseException as exc:  # noqa: BLE001 - handed to the test as the outcome
            outcome.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(120), "the load did not finish: the caps do not bound it"
    return outcome[0]


@pytest.mark.parametrize(
    ("what", "text", "words", "max_steps"),
    [
        ("billion laughs", billion_laughs(), "more than 50000 values once its aliases", 200),
        ("wide alias bomb", billion_laughs(levels=3, width=400), "more than 50000 values", 2_000),
        ("self-referencing alias", "a: &a [1, *a]", "refers to the node it is inside", 10),
        ("deep flow nesting", "watches: " + "[" * 20_000 + "]" * 20_000, "deeper than 32 levels", 40),
        (
            "deep block nesting",
            "".join(f"{'  ' * i}k{i}:\n" for i in range(200)) + "  " * 200 + "x",
            "deeper than 32",
            80,  # a key and a value per level
        ),
        ("over the byte cap", "# " + "x" * (128 * 1024), "over the 131072-byte cap", 0),
    ],
)
def test_hostile_documents_are_refused_after_bounded_work(
    what: str, text: str, words: str, max_steps: int, steps: list[int]
) -> None:
    outcome = _load_in_thread(text)
    assert isinstance(outcome, YAMLLimitError), (what, outcome)
    assert words in str(outcome), str(outcome)
    assert steps[0] <= max_steps, f"{what}: {steps[0]} composer steps"


def test_what_a_real_config_does_is_loaded_as_safe_load_does(steps: list[int]) -> None:
    text = "shared: &s {mode: pr}\nbump: *s\nwatches:\n  - config-key: k\n    depends-on: [o/r#1]\n"
    assert load_capped(text, **CAPS) == yaml.safe_load(text)
    # Aliases within the cap are fine: 8 ** 4 = 4,096 values expanded.
    small = billion_laughs(levels=5, width=8)
    assert load_capped(small, **CAPS) == yaml.safe_load(small)


def test_invalid_yaml_is_still_a_yaml_error() -> None:
    with pytest.raises(yaml.YAMLError):
        load_capped("a: [\n", **CAPS)
