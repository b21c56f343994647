"""Which way one sweep reaches the runners, and the labels it takes (pure).

InferenceX sweeps PRs by label: exactly one primary label on the PR (``full-sweep-fail-fast`` is
the one its workflows README recommends for full sweeps) plus modifiers, and its run-sweep.yml
plans the sweep from the perf-changelog entries the PR adds. Only those ``pull_request`` runs can
be reused when the PR merges (``app.core.sweepreuse``); a dispatched e2e-tests.yml run cannot, so
main would run the whole sweep again: a PR then costs its GPU time twice. Label mode is therefore
the way for a full sweep, and ``dispatch`` stays for what a label cannot say:

* a targeted sweep on part of a key (``/sweep conc=32,64``, ``seq=``, ``tp=``): run-sweep.yml
  always runs the key's whole search space;
* ``evals=none``: the repo has no label that drops the evals of a full sweep;
* a repository without the label workflow (no ``.github/workflows/run-sweep.yml``);
* a fork PR: run-sweep.yml gets no secrets there and does not fan out.

The eval modifiers follow the sweep's eval mode (the changelog entry's ``evals-only`` /
``all-evals``, or ``/sweep evals=``): ``only`` is ``evals-only``, ``all`` is ``evals-only`` with
``all-evals`` (every eval and no throughput), ``default`` neither. ``agentx-fast`` is a
maintainer's choice the bot never adds or removes, but it makes the run unfit for reuse.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from app.core.recipes.evals import EvalMode
from app.core.sweepreuse import labels_unfit

EVAL_MODIFIERS = ("evals-only", "all-evals")
MODIFIERS = (*EVAL_MODIFIERS, "agentx-fast")
_EVAL_LABELS: dict[EvalMode, tuple[str, ...]] = {
    EvalMode.DEFAULT: (),
    EvalMode.ONLY: ("evals-only",),
    EvalMode.ALL: ("evals-only", "all-evals"),
}

Mode = Literal["label", "dispatch"]


@dataclass(frozen=True)
class SweepWay:
    mode: Mode
    why: str
    add: tuple[str, ...] = ()  # modifier labels to put on before the primary label
    remove: tuple[str, ...] = ()  # eval modifiers that ask for another eval mode
    publishable: bool = False  # can the run be reused at merge (its labels, its workflow)
    publishable_why: str = ""


def choose_way(
    *,
    configured: str,
    has_label_workflow: bool,
    targeted: str | None,
    is_fork: bool,
    eval_mode: EvalMode,
    primary: str,
    pr_labels: Collection[str],
    workflow: str = "run-sweep.yml",
) -> SweepWay:
    """The sweep's way: ``configured`` is the repo's ``sweep.mode``; ``targeted`` names the filters
    that make the sweep part of a key (None for a full sweep)."""
    no_reuse = f"a dispatched run is not reusable at merge (only {workflow} pull_request runs are)"
    if configured == "dispatch":
        return SweepWay("dispatch", "sweep.mode: dispatch in .github/sweepbot.yml", publishable_why=no_reuse)
    fallback = None
    if targeted is not None:
        fallback = f"{targeted} targets part of the key; {workflow} runs the whole key"
    elif eval_mode not in _EVAL_LABELS:
        fallback = f"evals={eval_mode.value} has no label: {workflow} always runs a full sweep's evals"
    elif not has_label_workflow:
        fallback = f"the repo has no .github/workflows/{workflow}"
    elif is_fork:
        fallback = f"a fork PR's {workflow} run gets no secrets and does not fan out"
    if fallback is not None:
        return SweepWay("dispatch", f"dispatch: {fallback}", publishable_why=no_reuse)
    wanted = _EVAL_LABELS[eval_mode]
    after = {*(lb for lb in pr_labels if lb not in EVAL_MODIFIERS), *wanted, primary}
    unfit = labels_unfit(after)
    return SweepWay(
        "label",
        f"label: {primary}" + (f" with {', '.join(wanted)}" if wanted else "") + f" starts {workflow}",
        add=tuple(lb for lb in wanted if lb not in pr_labels),
        remove=tuple(lb for lb in EVAL_MODIFIERS if lb in pr_labels and lb not in wanted),
        publishable=unfit is None,
        publishable_why=unfit or f"a {primary} {workflow} pull_request run is reusable at merge",
    )


def targeted_filters(
    seq: str | None, conc: Collection[int] | None, conc_range: object, tp: object
) -> str | None:
    """The filters of a sweep that make it part of a key, as the user wrote them (None: full)."""
    parts = []
    if seq:
        parts.append(f"seq={seq}")
    if conc:
        parts.append("conc=" + ",".join(str(c) for c in conc))
    if conc_range:
        parts.append("conc=range")
    if tp:
        parts.append(f"tp={tp}")
    return " ".join(parts) or None
