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

_OUTPUT_REF = re.compile(r"needs\.get-jobs\.outputs\.([\w-]+)")
_STEP_REF = re.compile(r"steps\.([\w-]+)\.outputs\.([\w-]+)")
_ECHO_LINE = re.compile(r"""^\s*echo\s+["']?([\w-]+)=\$\{?(\w+)\}?["']?""")
_SKIP_IF = re.compile(r"^\$\{\{\s*needs\.get-jobs\.outputs\.([\w-]+)\s*!=\s*'([^']*)'\s*\}\}$")


@dataclasses.dataclass(frozen=True)
class MatrixFailure:
    """A matrix job GitHub fails before running it: its id, its `name:` (the caller's name) and
    the annotation GitHub writes on its check run."""

    job_id: str
    caller: str
    message: str


def assigns(var: str, script: str) -> bool:
    """Whether a line of the bash ``script`` sets ``var`` (``VAR=``, ``export VAR=``, ...)."""
    for line in script.splitlines():
        words = line.strip().split()
        while (
            words
            and words[0] in ("export", "local", "readonly", "declare")
            or (words and words[0].startswith("-"))
        ):
            words = words[1:]
        if words and words[0].startswith(f"{var}="):
            return True
    return False


def _empty_outputs(get_jobs: dict[str, Any]) -> set[str]:
    """get-jobs' outputs whose step echoes a variable nothing sets: bash expands it to ''."""
    empty: set[str] = set()
    steps = {
        str(st.get("id")): st for st in get_jobs.get("steps") or [] if isinstance(st, dict) and st.get("id")
    }
    for output, ref in (get_jobs.get("outputs") or {}).items():
        m = _STEP_REF.search(str(ref))
        step = steps.get(m.group(1)) if m else None
        if m is None or step is None:
            continue
        script = str(step.get("run") or "")
        known = set(get_jobs.get("env") or {}) | set(step.get("env") or {})
        for line in script.splitlines():
            echo = _ECHO_LINE.match(line)
            if echo and echo.group(1) == m.group(2):
                var = echo.group(2)
                if var not in known and not assigns(var, script):
                    empty.add(str(output))
    return empty


def unexpanded_jobs(text: str) -> dict[str, str]:
    """Job id -> `name:` of the matrix jobs whose get-jobs output is '' and whose `if:` lets them
    run with it (the simulator's own reading of the file; one it cannot read has none)."""
    try:
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    except yaml.YAMLError:
        return {}
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    get_jobs = jobs.get("get-jobs") if isinstance(jobs, dict) else None
    if not isinstance(jobs, dict) or not isinstance(get_jobs, dict):
        return {}
    empty = _empty_outputs(get_jobs)
    out: dict[str, str] = {}
    for job_id, job in jobs.items():
        matrix = ((job or {}).get("strategy") or {}).get("matrix") if isinstance(job, dict) else None
        ref = (
            _OUTPUT_REF.search(str((matrix or {}).get("config") or "")) if isinstance(matrix, dict) else None
        )
        if ref is None or ref.group(1) not in empty:
            continue
        cond = _SKIP_IF.match(str(job.get("if") or "").strip())
        if cond and cond.group(1) == ref.group(1) and cond.group(2) == "":
            continue  # `!= ''` skips the job on an empty output
        out[str(job_id)] = str(job.get("name") or job_id)
    return out


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
    """The matrix jobs of the workflow at ``path`` that cannot evaluate, in the file's order
    (``unexpanded_jobs``); the node tree gives where each matrix expression starts, as GitHub's
    annotation names it."""
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
