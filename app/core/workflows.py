"""A GitHub Actions workflow file as the bot needs it: dispatch inputs, run-name; pure.

Read from the benchmark repo at the dispatch ref (``.github/workflows/<file>``), a workflow tells:

- whether it can be dispatched at all (an ``on: workflow_dispatch`` trigger), and which inputs it
  declares there (``required``, ``type``, ``default``, ``options``). GitHub refuses a dispatch
  with an input the workflow does not declare, without a required one, or to a workflow with no
  ``workflow_dispatch`` trigger (422); checking first turns that into a clear error before any
  runner time is asked for;
- its ``run-name``, which GitHub evaluates into the run's ``display_title`` (e2e-tests.yml:
  ``e2e Test - ${{ inputs.test-name || inputs.generate-cli-command || ... }}``), the only place a
  dispatched run carries the bot's unique run name.

``render_run_name`` evaluates the small expression subset run-names use: ``${{ a || b || 'x' }}``
over dotted context paths and string literals (an unknown path is empty, as in GitHub).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

WORKFLOWS_DIR = ".github/workflows"
MAX_DISPATCH_INPUTS = 25  # GitHub's limit on workflow_dispatch inputs
INPUT_TYPES = ("string", "boolean", "choice", "number", "environment")
_EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.S)
_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_*][A-Za-z0-9_-]*)*$")


class WorkflowFileError(ValueError):
    """The workflow file cannot be read as a workflow; the message says where."""


class DispatchInputError(ValueError):
    """Inputs the target workflow would refuse; the message lists every problem and the fix."""

    def __init__(self, workflow: str, problems: list[str]) -> None:
        super().__init__(f"{workflow}: " + "; ".join(problems))
        self.workflow = workflow
        self.problems = problems


@dataclass(frozen=True)
class WorkflowInput:
    name: str
    required: bool = False
    type: str = "string"
    default: Any = None
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorkflowSpec:
    path: str
    name: str
    run_name: str | None
    dispatchable: bool  # has an `on: workflow_dispatch` trigger
    inputs: dict[str, WorkflowInput] = field(default_factory=dict)
    triggers: tuple[str, ...] = ()

    @property
    def file_name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def workflow_path(workflow: str) -> str:
    """The repo path of a workflow given by file name (what the dispatch API takes)."""
    if "/" in workflow or workflow.startswith(".") or not workflow.endswith((".yml", ".yaml")):
        raise WorkflowFileError(
            f"workflow {workflow!r} must be a file name in {WORKFLOWS_DIR}, e.g. e2e-tests.yml"
        )
    return f"{WORKFLOWS_DIR}/{workflow}"


def _triggers(doc: Mapping[Any, Any]) -> Any:
    # YAML 1.1 (PyYAML) reads the bare key `on` as the boolean True.
    if "on" in doc:
        return doc["on"]
    return doc.get(True)


def parse_workflow(text: str, path: str) -> WorkflowSpec:
    try:
        # libyaml: the real e2e-tests.yml is 700 lines; the pure-Python loader takes ~0.2 s on it
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise WorkflowFileError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise WorkflowFileError(f"{path} is not a workflow (no top-level mapping)")
    on = _triggers(doc)
    if isinstance(on, str):
        triggers: dict[str, Any] = {on: None}
    elif isinstance(on, list):
        triggers = {str(t): None for t in on}
    elif isinstance(on, dict):
        triggers = {str(k): v for k, v in on.items()}
    else:
        raise WorkflowFileError(f"{path} has no `on:` triggers")
    inputs: dict[str, WorkflowInput] = {}
    dispatchable = "workflow_dispatch" in triggers
    wd = triggers.get("workflow_dispatch") or {}
    raw_inputs = (wd.get("inputs") if isinstance(wd, dict) else None) or {}
    if not isinstance(raw_inputs, dict):
        raise WorkflowFileError(f"{path}: on.workflow_dispatch.inputs is not a mapping")
    for name, spec in raw_inputs.items():
        spec = spec if isinstance(spec, dict) else {}
        kind = str(spec.get("type") or "string")
        inputs[str(name)] = WorkflowInput(
            name=str(name),
            required=bool(spec.get("required", False)),
            type=kind if kind in INPUT_TYPES else "string",
            default=spec.get("default"),
            options=tuple(str(o) for o in spec.get("options") or ()),
        )
    run_name = doc.get("run-name")
    return WorkflowSpec(
        path=path,
        name=str(doc.get("name") or path),
        run_name=str(run_name) if run_name is not None else None,
        dispatchable=dispatchable,
        inputs=inputs,
        triggers=tuple(triggers),
    )


def dispatch_problems(spec: WorkflowSpec, inputs: Mapping[str, Any]) -> list[str]:
    """Everything GitHub (or the workflow) would refuse about dispatching ``inputs``; [] when fine."""
    if not spec.dispatchable:
        return [
            f"{spec.file_name} has no workflow_dispatch trigger (its triggers: "
            f"{', '.join(spec.triggers) or 'none'}); dispatch a workflow that declares one, "
            "e.g. e2e-tests.yml, or use sweep mode 'label'"
        ]
    problems: list[str] = []
    declared = ", ".join(sorted(spec.inputs)) or "none"
    unknown = sorted(set(inputs) - set(spec.inputs))
    if unknown:
        problems.append(
            f"input(s) {', '.join(unknown)} not declared by its workflow_dispatch (declared: {declared}); "
            "remove them from SWEEPBOT_DISPATCH_INPUTS"
        )
    for name, decl in spec.inputs.items():
        if decl.required and decl.default is None and name not in inputs:
            problems.append(f"required input {name} is missing; add it to SWEEPBOT_DISPATCH_INPUTS")
    for name, value in inputs.items():
        if name not in spec.inputs:
            continue
        decl = spec.inputs[name]
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if decl.type == "boolean" and text not in ("true", "false"):
            problems.append(f"input {name} is a boolean: send 'true' or 'false', not {text!r}")
        elif decl.type == "choice" and decl.options and text not in decl.options:
            problems.append(f"input {name} must be one of {', '.join(decl.options)}, not {text!r}")
        elif decl.type == "number":
            try:
                float(text)
            except ValueError:
                problems.append(f"input {name} is a number, not {text!r}")
    if len(inputs) > MAX_DISPATCH_INPUTS:
        problems.append(f"{len(inputs)} inputs sent; GitHub takes at most {MAX_DISPATCH_INPUTS}")
    return problems


def validate_dispatch(spec: WorkflowSpec, inputs: Mapping[str, Any]) -> None:
    problems = dispatch_problems(spec, inputs)
    if problems:
        raise DispatchInputError(spec.file_name, problems)


def _lookup(context: Mapping[str, Any], path: str) -> Any:
    node: Any = context
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _evaluate(expr: str, context: Mapping[str, Any]) -> str:
    for alt in expr.split("||"):
        alt = alt.strip()
        if len(alt) >= 2 and alt[0] == alt[-1] == "'":
            value: Any = alt[1:-1].replace("''", "'")
        elif _PATH.match(alt):
            value = _lookup(context, alt)
        else:
            value = None  # an operator we do not model: treat as empty, never guess
        if value not in (None, "", False, 0):
            return str(value).lower() if isinstance(value, bool) else str(value)
    return ""


def render_run_name(spec: WorkflowSpec, context: Mapping[str, Any]) -> str:
    """The ``display_title`` GitHub gives a run of ``spec`` with ``context`` (``inputs``, ``github``)."""
    if spec.run_name is None:
        return spec.name
    return _EXPR.sub(lambda m: _evaluate(m.group(1), context), spec.run_name).strip()


def dispatch_title(spec: WorkflowSpec, inputs: Mapping[str, Any]) -> str:
    """``display_title`` of a ``workflow_dispatch`` run of ``spec`` with ``inputs``."""
    return render_run_name(spec, {"inputs": dict(inputs), "github": {"event": {"inputs": dict(inputs)}}})
