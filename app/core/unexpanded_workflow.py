"""Which matrix jobs of a workflow GitHub never expands, read from the file; pure.

e2e-tests.yml's matrix jobs take their rows from a `get-jobs` output
(``config: ${{ fromJson(needs.get-jobs.outputs.<output>) }}``), each output is a step's output
(``${{ steps.<step>.outputs.<name> }}``), and the step writes it from a shell variable
(``echo "<name>=$VAR"`` into ``$GITHUB_OUTPUT``). A variable neither the script nor the step's or
the job's ``env:`` assigns is empty under bash, so the output is ``''``; a job whose ``if:`` does
not skip that (``!= '[]'`` does not) is failed by GitHub before it has a runner (``fromJson('')``
cannot evaluate) and none of its matrix jobs exist. At InferenceX 843c6254 that is
`test-sweep-evals` (``eval /``): get-jobs writes ``eval-config=$EVALS`` and never sets ``EVALS``.

Those jobs hold no runner, so a dispatch's slots leave them out (app/core/dispatchjobs.py). What
GitHub reports for them is app/core/unexpanded_jobs.py's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

GET_JOBS = "get-jobs"
_FROM_OUTPUT = re.compile(r"^\$\{\{\s*fromJson\(\s*needs\.get-jobs\.outputs\.([\w-]+)\s*\)\s*\}\}$", re.I)
_STEP_OUTPUT = re.compile(r"^\$\{\{\s*steps\.([\w-]+)\.outputs\.([\w-]+)\s*\}\}$")
_ECHO = re.compile(r"""echo\s+["']?([\w-]+)=\$\{?(\w+)\}?["']?""")
_ASSIGNS = r"(?m)^\s*(?:export\s+|local\s+|readonly\s+|declare\s+(?:-\w+\s+)*)?{var}="
_NOT_EQUAL = re.compile(r"^(?:\$\{\{)?\s*needs\.get-jobs\.outputs\.([\w-]+)\s*!=\s*'([^']*)'\s*(?:\}\})?$")


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _empty_outputs(get_jobs: Mapping[str, Any]) -> dict[str, str]:
    """get-jobs' outputs written from a variable nothing assigns (the empty string), with that
    variable."""
    job_env = set(_mapping(get_jobs.get("env")))
    written: dict[tuple[str, str], str] = {}  # (step id, step output) -> the variable echoed
    assigned: dict[str, set[str]] = {}  # step id -> the variables its env or script sets
    for step in get_jobs.get("steps") or []:
        step = _mapping(step)
        step_id, script = str(step.get("id") or ""), str(step.get("run") or "")
        if not step_id or not script:
            continue
        names = job_env | set(_mapping(step.get("env")))
        for output, var in _ECHO.findall(script):
            written[(step_id, output)] = var
            if assigns(var, script):
                names.add(var)
        assigned[step_id] = names
    empty: dict[str, str] = {}
    for output, value in _mapping(get_jobs.get("outputs")).items():
        m = _STEP_OUTPUT.match(str(value).strip())
        var = written.get((m.group(1), m.group(2))) if m else None
        if m and var is not None and var not in assigned.get(m.group(1), set()):
            empty[str(output)] = var
    return empty


def _runs_when_empty(job: Mapping[str, Any], output: str) -> bool:
    """Whether the job's ``if:`` lets it run when ``output`` is ``''`` (a condition this reader
    does not evaluate is taken to let it run)."""
    cond = str(job.get("if") or "").strip()
    m = _NOT_EQUAL.match(cond)
    return not cond or m is None or m.group(1) != output or m.group(2) != ""


def assigns(var: str, script: str) -> bool:
    """Whether the shell ``script`` assigns ``var`` anywhere (``VAR=``, ``export VAR=``, ...)."""
    return re.search(_ASSIGNS.format(var=re.escape(var)), script) is not None


def unexpanded_findings(text: str) -> dict[str, dict[str, str]]:
    """Job id -> what was found, of the workflow's matrix jobs that get an empty matrix, in the
    file's order: the job's name (``name:``, the prefix GitHub gives its jobs: ``eval /``; the id
    when it has none), and the get-jobs output and the variable it is written from
    (``{"name": "eval /", "output": "eval-config", "variable": "EVALS"}``); none when the text is
    no workflow this reader knows. JSON: a sweep stores it (app.flows.repo.bench_repo)."""
    try:
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return {}
    jobs = _mapping(_mapping(doc).get("jobs"))
    get_jobs = _mapping(jobs.get(GET_JOBS))
    if not get_jobs:
        return {}
    empty = _empty_outputs(get_jobs)
    out: dict[str, dict[str, str]] = {}
    for job_id, job in jobs.items():
        job = _mapping(job)
        config = _mapping(_mapping(job.get("strategy")).get("matrix")).get("config")
        m = _FROM_OUTPUT.match(str(config or "").strip())
        if m and m.group(1) in empty and _runs_when_empty(job, m.group(1)):
            name = str(job.get("name") or job_id)
            out[str(job_id)] = {"name": name, "output": m.group(1), "variable": empty[m.group(1)]}
    return out


def unexpanded_jobs(text: str) -> dict[str, str]:
    """Job id -> name of the workflow's matrix jobs that get an empty matrix, in the file's order
    (``unexpanded_findings``). The simulator plays these jobs from the same reading."""
    return {job_id: found["name"] for job_id, found in unexpanded_findings(text).items()}


def unexpanded_callers(text: str) -> frozenset[str]:
    """The names of the workflow's matrix jobs that get an empty matrix (``unexpanded_jobs``)."""
    return frozenset(unexpanded_jobs(text).values())
