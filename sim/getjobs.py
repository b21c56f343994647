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

GET_JOBS = "get-jobs"
_FROM_OUTPUT = re.compile(r"^\$\{\{\s*fromJson\(\s*needs\.get-jobs\.outputs\.([\w-]+)\s*\)\s*\}\}$", re.I)
_JOB_OUTPUT = re.compile(r"^\$\{\{\s*steps\.([\w-]+)\.outputs\.([\w-]+)\s*\}\}$")
_ECHO = re.compile(r"""echo\s+["']?([\w-]+)=\$\{?(\w+)\}?["']?""")
_ASSIGN = r"(?m)^\s*(?:export\s+|local\s+|readonly\s+|declare\s+(?:-\w+\s+)*)?{var}="
_NOT_EQUAL = re.compile(r"^(?:\$\{\{)?\s*needs\.get-jobs\.outputs\.([\w-]+)\s*!=\s*'([^']*)'\s*(?:\}\})?$")


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


def _scalar(node: Any) -> str:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else ""


def _env_names(*nodes: Any) -> set[str]:
    return {str(k.value) for node in nodes if isinstance(node, yaml.MappingNode) for k, _ in node.value}


def _empty_outputs(get_jobs: Any) -> set[str]:
    """get-jobs' outputs that are the empty string: written from a variable nothing assigns."""
    job_env = _get(get_jobs, "env")
    written: dict[tuple[str, str], str] = {}  # (step id, step output) -> the variable written
    assigned: dict[str, set[str]] = {}  # step id -> variables its script or env sets
    steps = _get(get_jobs, "steps")
    for step in steps.value if isinstance(steps, yaml.SequenceNode) else []:
        step_id, script = _scalar(_get(step, "id")), _scalar(_get(step, "run"))
        if not step_id or not script:
            continue
        names = _env_names(job_env, _get(step, "env"))
        for output, var in _ECHO.findall(script):
            written[(step_id, output)] = var
            if re.search(_ASSIGN.format(var=re.escape(var)), script):
                names.add(var)
        assigned[step_id] = names
    empty: set[str] = set()
    outputs = _get(get_jobs, "outputs")
    for key, value in outputs.value if isinstance(outputs, yaml.MappingNode) else []:
        m = _JOB_OUTPUT.match(_scalar(value).strip())
        var = written.get((m.group(1), m.group(2))) if m else None
        if m and var is not None and var not in assigned.get(m.group(1), set()):
            empty.add(str(key.value))
    return empty


def _runs_on_empty(job: Any, output: str) -> bool:
    """Whether the job's `if:` lets it run when ``output`` is the empty string."""
    cond = _scalar(_get(job, "if")).strip()
    if not cond:
        return True
    m = _NOT_EQUAL.match(cond)
    if m is None or m.group(1) != output:
        return True  # a condition this reader does not evaluate: the job is taken to run
    return m.group(2) != ""


def strategy_error(job_id: str, path: str, line: int, col: int) -> str:
    """GitHub's annotation for a job whose `strategy.matrix` is ``fromJson('')``."""
    at = f"{path} (Line: {line}, Col: {col})"
    return (
        f"Error when evaluating 'strategy' for job '{job_id}'. {at}: Error parsing fromJson,{at}: "
        f"Error reading JToken from JsonReader. Path '', line 0, position 0.,{at}: Unexpected value ''"
    )


@functools.lru_cache(maxsize=32)
def matrix_failures(text: str, path: str) -> tuple[MatrixFailure, ...]:
    """The matrix jobs of the workflow at ``path`` that cannot evaluate, in the file's order."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    root = yaml.compose(text, Loader=loader)
    jobs = _get(root, "jobs")
    get_jobs = _get(jobs, GET_JOBS)
    if get_jobs is None:
        return ()
    empty = _empty_outputs(get_jobs)
    out: list[MatrixFailure] = []
    for key, job in jobs.value:
        config = _get(_get(_get(job, "strategy"), "matrix"), "config")
        m = _FROM_OUTPUT.match(_scalar(config).strip())
        if m is None or m.group(1) not in empty or not _runs_on_empty(job, m.group(1)):
            continue
        line, col = config.start_mark.line + 1, config.start_mark.column + 1
        job_id = str(key.value)
        name = _scalar(_get(job, "name")) or job_id
        out.append(MatrixFailure(job_id, name, strategy_error(job_id, path, line, col)))
    return tuple(out)


EVALS_FILTER = (
    "x for x in d if 'prefill' not in x and x.get('scenario-type') != 'agentic-coding' "
    "and x.get('run-eval', False)"
)


def assign_evals(text: str) -> str:
    """e2e-tests.yml with get-jobs assigning ``EVALS`` (the single-node eval rows, as its
    ``MULTI_EVAL`` line assigns the multi-node ones): a fixed workflow, whose `eval /` job runs."""
    anchor = re.search(r"(?m)^([ \t]*)MULTI_EVAL=", text)
    if anchor is None or re.search(_ASSIGN.format(var="EVALS"), text):
        return text
    line = (
        f'{anchor.group(1)}EVALS=$(echo "$CONFIG_JSON" | python3 -c "import sys,json; '
        f'd=json.load(sys.stdin); print(json.dumps([{EVALS_FILTER}]))" | score_matrix eval)\n'
    )
    return text[: anchor.start()] + line + text[anchor.start() :]
