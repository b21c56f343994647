"""Matrix jobs GitHub failed unexpanded (app/core/unexpanded_jobs.py) and their classification.

The annotation forms are GitHub's as quoted in public threads: quarkusio/quarkus#46708 (an empty
output, `fromJson('')`), github/docs#33721 and bittide/bittide-hardware#265 (other bad JSON),
emqx/emqx#16727 (a reusable workflow named `owner/repo/path@sha`).
"""

from __future__ import annotations

from typing import Any

from app.core.runmatch import classify_failure
from app.core.unexpanded_jobs import (
    caller_of,
    covering,
    defect_of,
    eval_not_run,
    not_run_reason,
    predicted_defects,
    unexpanded_candidates,
)
from app.core.unexpanded_workflow import unexpanded_findings
from tests.conftest import FIXTURES

E2E = ".github/workflows/e2e-tests.yml (Line: 636, Col: 25)"
EMPTY = (
    f"Error when evaluating 'strategy' for job 'test-sweep-evals'. {E2E}: Error parsing fromJson,{E2E}: "
    f"Error reading JToken from JsonReader. Path '', line 0, position 0.,{E2E}: Unexpected value ''"
)
QUARKUS = (
    "Error when evaluating 'strategy' for job 'native-tests'. .github/workflows/ci-actions-incremental.yml "
    "(Line: 1242, Col: 15): Error parsing fromJson,.github/workflows/ci-actions-incremental.yml (Line: 1242, "
    "Col: 15): Error reading JToken from JsonReader. Path '', line 0, position 0.,"
    ".github/workflows/ci-actions-incremental.yml (Line: 1242, Col: 15): Unexpected value ''"
)
EMQX = (
    "Error when evaluating 'strategy' for job 'ct'. emqx/emqx/.github/workflows/run_test_cases.yaml@51e685e9"
    " (Line: 144, Col: 9): matrix must define at least one vector"
)
SINGLE = {"model-prefix": "minimaxm3", "runner": "mi355x", "tp": 4, "conc": 32, "isl": 8192, "osl": 1024}
MULTI = {"prefill": {"tp": 4}, "decode": {"tp": 8}, "conc": [8, 16], "isl": 8192, "osl": 1024}
AGENTIC = {"scenario-type": "agentic-coding", "tp": 8, "conc": 4}


def _job(name: str, **kw: Any) -> dict[str, Any]:
    return {"id": 9, "name": name, "status": "completed", "conclusion": "failure", "steps": []} | kw


def _note(message: str) -> list[dict[str, Any]]:
    return [{"annotation_level": "failure", "message": message}]


def test_only_failed_caller_jobs_without_steps_are_candidates() -> None:
    bench = "single-node / p50 | minimaxm3 fp4 mi355x vllm TP4    c32"
    jobs = [
        _job("eval /"),
        _job("get-jobs", steps=[{"name": "Run get-jobs", "conclusion": "failure"}]),
        _job(bench),  # a benchmark job: classified by classify_failure, not here
        _job("multi-node eval /", conclusion="success"),
        _job("agentic eval /", status="in_progress", conclusion=None),
    ]
    assert [j["name"] for j in unexpanded_candidates(jobs)] == ["eval /"]


def test_the_defect_is_read_from_githubs_annotation() -> None:
    defect = defect_of(_job("eval /"), _note(EMPTY))
    assert defect is not None
    assert (defect.caller, defect.job_id, defect.section, defect.file) == (
        "eval /",
        "test-sweep-evals",
        "strategy",
        ".github/workflows/e2e-tests.yml",
    )
    quarkus = defect_of(_job("native tests"), _note(QUARKUS))
    assert quarkus is not None and quarkus.file == ".github/workflows/ci-actions-incremental.yml"
    emqx = defect_of(_job("ct"), _note(EMQX))
    assert emqx is not None and emqx.file == "emqx/emqx/.github/workflows/run_test_cases.yaml"
    assert defect_of(_job("eval /"), _note("Process completed with exit code 1.")) is None
    assert defect_of(_job("eval /"), []) is None


def test_each_point_is_run_by_the_caller_the_real_file_gives_its_family() -> None:
    assert caller_of(SINGLE, eval_job=True) == "eval /"
    assert caller_of(SINGLE, eval_job=False) == "single-node /"
    assert caller_of(MULTI, eval_job=True) == "multi-node eval /"
    assert caller_of(AGENTIC, eval_job=True) == "agentic eval /"
    assert caller_of(MULTI | AGENTIC, eval_job=True) == "multi-node agentic eval /"
    assert caller_of(MULTI | AGENTIC, eval_job=False) == "multi-node agentic /"


def test_a_defect_covers_only_the_points_of_its_caller() -> None:
    evals = defect_of(_job("eval /"), _note(EMPTY))
    assert evals is not None
    assert covering([evals], SINGLE, eval_job=True) is evals
    assert covering([evals], SINGLE, eval_job=False) is None  # the throughput job is another caller's
    assert covering([evals], MULTI, eval_job=True) is None  # multi-node eval / assigns its rows
    assert covering([evals], AGENTIC, eval_job=True) is None
    # run-sweep.yml's throughput callers carry the seq-len: only that seq-len's points
    seq = defect_of(_job("single-node 8k1k /"), _note(EMPTY))
    assert seq is not None
    assert covering([seq], SINGLE, eval_job=False) is seq
    assert covering([seq], SINGLE | {"isl": 1024}, eval_job=False) is None


def test_the_reason_says_what_was_wrong_how_to_fix_it_and_quotes_github_inert() -> None:
    defect = defect_of(_job("eval /"), _note(EMPTY))
    assert defect is not None
    reason = not_run_reason(defect, eval_job=True)
    assert reason.startswith(
        "eval not run: e2e-tests.yml's `eval /` job could not evaluate its matrix, so GitHub created none "
        "of its jobs; at InferenceX 843c6254 get-jobs writes `eval-config=$EVALS` and never sets `EVALS`."
    )
    assert "not retried" in reason and "/sweep evals=none" in reason
    assert reason.endswith(f"GitHub said: `{EMPTY}`") and eval_not_run(reason)
    # another job's empty matrix: no known cause, still the symptom
    other = not_run_reason(defect_of(_job("native tests"), _note(QUARKUS)) or defect, eval_job=False)
    assert other.startswith("not run: ci-actions-incremental.yml's `native tests` job could not evaluate")
    assert "its matrix value was empty" in other and "evals=none" not in other and not eval_not_run(other)
    # GitHub's text is quoted as code: no mention, no markup, no fence break-out
    hostile = f"{EMPTY} @maint `x` <b>![i](http://e/x)</b>"
    quoted = not_run_reason(defect_of(_job("eval /"), _note(hostile)) or defect, eval_job=True)
    said = quoted.split("GitHub said: ", 1)[1]
    assert said.startswith("``") and said.endswith("``") and "@\u2060maint" in said
    assert eval_not_run(None) is False and eval_not_run("benchmark failure: ...") is False


def test_a_defect_the_workflow_file_shows_is_built_without_githubs_annotation() -> None:
    """At 843c6254 the file says it (get-jobs' `eval-config=$EVALS`, EVALS never set): the reason
    says what and where it was read, and covers the points `eval /` would have run."""
    text = (FIXTURES / "inferencex" / "workflows" / "e2e-tests.yml").read_text()
    assert unexpanded_findings(text) == {
        "test-sweep-evals": {"name": "eval /", "output": "eval-config", "variable": "EVALS"}
    }
    found = {"eval /": {"job": "test-sweep-evals", "output": "eval-config", "variable": "EVALS"}}
    ref = "843c6254" + "0" * 32
    defects = predicted_defects({"ref": ref, "file": ".github/workflows/e2e-tests.yml", "callers": found})
    assert [(d.caller, d.job_id, d.read_at) for d in defects] == [("eval /", "test-sweep-evals", ref)]
    reason = not_run_reason(defects[0], eval_job=True)
    assert reason.startswith(
        "eval not run: e2e-tests.yml's `eval /` job could not evaluate its matrix, so GitHub created none "
        "of its jobs; get-jobs writes `eval-config=$EVALS` and never sets `EVALS`"
    )
    assert "/sweep evals=none" in reason and "GitHub said" not in reason and eval_not_run(reason)
    assert "Read from .github/workflows/e2e-tests.yml at `843c62540000` when the sweep was planned" in reason
    assert covering(defects, {"isl": 8192, "osl": 1024, "run-eval": True}, eval_job=True) is defects[0]
    assert predicted_defects(None) == [] and predicted_defects({"ref": ref, "callers": {}}) == []
    fixed = text.replace('echo "eval-config=$EVALS"', 'echo "eval-config=$SINGLE"')
    assert unexpanded_findings(fixed) == {}


def test_classify_failure_calls_an_evaluation_error_a_workflow_defect() -> None:
    failure = classify_failure(_note(EMPTY), conclusion="failure")
    assert failure.workflow_defect and not failure.infrastructure and not failure.cancelled
    lost = classify_failure(
        _note("The self-hosted runner: mi355x-amds_03 lost communication with the server."),
        conclusion="failure",
    )
    assert lost.infrastructure and not lost.workflow_defect
    bench = classify_failure(_note("Process completed with exit code 1."), conclusion="failure")
    assert not bench.infrastructure and not bench.workflow_defect
