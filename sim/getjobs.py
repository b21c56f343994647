"""Which of e2e-tests.yml's matrix jobs GitHub cannot expand, read from the workflow file itself.

Each matrix job of e2e-tests.yml takes its rows from a `get-jobs` output
(``config: ${{ fromJson(needs.get-jobs.outputs.<name>) }}``), and get-jobs writes every output
from a shell variable (``echo "<name>=$VAR"`` into ``$GITHUB_OUTPUT``). A variable the script
never assigns (nor the step's or job's ``env:``) expands to nothing under bash, so the output is
the empty string. The job's ``if: needs.get-jobs.outputs.<name> != '[]'`` is then true, the job is
not skipped, and ``fromJson('')`` cannot evaluate: GitHub fails the job before it has a runner.
At InferenceX 843c6254 that is `test-sweep-evals` (``eval /``): get-jobs writes
``eval-config=$EVALS`` and never assigns ``EVALS``.

What GitHub reports then (docs/sim.md "Evals" gives the sources): the job, named by its `name:`,
``completed`` / ``failure`` with no steps and no runner, and one annotation on its check run,

    Error when evaluating 'strategy' for job '<job id>'. <path> (Line: L, Col: C): Error parsing
    fromJson,<path> (Line: L, Col: C): Error reading JToken from JsonReader. Path '', line 0,
    position 0.,<path> (Line: L, Col: C): Unexpected value ''

(one line; L and C are where the matrix expression starts in the file), and the run concludes
``failure``. ``assign_evals`` gives the file with ``EVALS`` assigned (a fixed workflow, for
scenarios that want the single-node evals to run).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any

import yaml

from app.core.emptymatrix import assigns, unexpanded_jobs


@dataclasses.dataclass(frozen=True)
class MatrixFailure:
    """A matrix job GitHub fails before running it: its id, its `name:` (the caller's name) and
    the annotation GitHub writes on its check run."""

    job_id: str
    caller: str
    message: str


def _get(node: Any, key: str) -> Any:
    if not isinstance(node, yaml.MappingNode):
        return None
    return next((v for k, v in node.value if getattr(k, "value", None) == key), None)


def strategy_error(job_id: str, path: str, line: int, col: int) -> str:
    """GitHub's annotation for a job whose `strategy.matrix` is ``fromJson('')``."""
    at = f"{path} (Line: {line}, Col: {col})"
    return (
        f"Error when evaluating 'strategy' for job '{job_id}'. {at}: Error parsing fromJson,{at}: "
        f"Error reading JToken from JsonReader. Path '', line 0, position 0.,{at}: Unexpected value ''"
    )


@functools.lru_cache(maxsize=32)
def matrix_failures(text: str, path: str) -> tuple[MatrixFailure, ...]:
    """The matrix jobs of the workflow at ``path`` that cannot evaluate, in the file's order: which
    ones is the file's own reading (``app.core.emptymatrix``, shared with the bot's slot count); the
    node tree gives where each matrix expression starts, as GitHub's annotation names it."""
    failing = unexpanded_jobs(text)
    if not failing:
        return ()
    root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    jobs = _get(root, "jobs")
    out: list[MatrixFailure] = []
    for key, job in jobs.value if isinstance(jobs, yaml.MappingNode) else []:
        job_id = str(key.value)
        if job_id not in failing:
            continue
        config = _get(_get(_get(job, "strategy"), "matrix"), "config")
        line, col = config.start_mark.line + 1, config.start_mark.column + 1
        out.append(MatrixFailure(job_id, failing[job_id], strategy_error(job_id, path, line, col)))
    return tuple(out)


EVALS_FILTER = (
    "x for x in d if 'prefill' not in x and x.get('scenario-type') != 'agentic-coding' "
    "and x.get('run-eval', False)"
)


def assign_evals(text: str) -> str:
    """e2e-tests.yml with get-jobs assigning ``EVALS`` (the single-node eval rows, as its
    ``MULTI_EVAL`` line assigns the multi-node ones): a fixed workflow, whose `eval /` job runs."""
    anchor = re.search(r"(?m)^([ \t]*)MULTI_EVAL=", text)
    if anchor is None or assigns("EVALS", text):
        return text
    line = (
        f'{anchor.group(1)}EVALS=$(echo "$CONFIG_JSON" | python3 -c "import sys,json; '
        f'd=json.load(sys.stdin); print(json.dumps([{EVALS_FILTER}]))" | score_matrix eval)\n'
    )
    return text[: anchor.start()] + line + text[anchor.start() :]
