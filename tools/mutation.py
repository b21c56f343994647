"""Mutation testing of the core decisions with mutmut: ``make mutation`` (not in CI: minutes a module).

For each module of ``MODULES`` it copies the tree into a scratch folder (mutmut writes its mutants
beside the code, and the work tree stays untouched), points mutmut at that one module and the tests
that exercise it, runs every mutant, and prints the kill rate per module. A survivor is either
killed by a new test or written down in ``tools/mutation_equivalents.txt`` as equivalent (the mutant
behaves exactly like the original), with why; the rate counts non-equivalent mutants only, and a
mutant no selected test reaches ("no tests") or that times out counts as not killed.

    .venv/bin/python tools/mutation.py                 # every module
    .venv/bin/python tools/mutation.py approval gap    # some of them (names as in MODULES)
    .venv/bin/python tools/mutation.py --json out.json # also the survivors, for a report

Equivalents are keyed by module, function and the mutated line's text (the first line ``mutmut
show`` marks ``+``), not by mutmut's numbering, so they survive unrelated edits of the module.
Run it under ``nice -n 10`` (``make mutation`` does) and never two at once: it is CPU-bound.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import fnmatch
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENTS = Path(__file__).with_name("mutation_equivalents.txt")


@dataclass(frozen=True)
class Target:
    """One module under mutation: the file, the fast tests that exercise it, and optionally only
    some of its functions (a guard inside a flows module, whose other code needs PostgreSQL)."""

    path: str
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()  # empty: every function of the file


# THE module list (short name -> target): rename a module here and nowhere else. Per module only the
# fast pure tests that cover it (tests/core mostly; mutmut then runs, per mutant, only the tests that
# called the mutated function), so a module takes minutes. Left out on purpose: the generator-parity
# tests (tests/core/test_dispatch_jobs.py, seconds a test) and PostgreSQL-backed flows tests.
MODULES: dict[str, Target] = {
    "approval": Target(
        "app/core/approval.py",
        (
            "tests/core/test_approval_clock.py",
            "tests/core/test_approval_messages.py",
            "tests/core/test_approval_prefix.py",
            "tests/core/test_inert.py",
        ),
    ),
    "runmatch": Target(
        "app/core/runmatch.py",
        (
            "tests/core/test_runmatch_*.py",
            "tests/core/test_matrixerrors.py",
            "tests/core/test_failures.py",
            "tests/core/test_family_matching.py",
            "tests/core/test_inferencex_contract.py",
        ),
    ),
    "artifacts": Target(
        "app/core/artifacts.py",
        (
            "tests/core/test_artifacts.py",
            "tests/core/test_artifact_selection.py",
            "tests/core/test_evals.py",
            "tests/core/test_family_matching.py",
        ),
    ),
    "gap": Target(
        "app/core/gap.py",
        (
            "tests/core/test_gap.py",
            "tests/core/test_gap_identity.py",
            "tests/core/test_gap_edges.py",
            "tests/core/test_evals.py",
        ),
    ),
    "accuracy": Target(
        "app/core/accuracy.py", ("tests/core/test_accuracy_rules.py", "tests/core/test_evals.py")
    ),
    "release_policy": Target(
        "app/core/release_policy.py",
        ("tests/core/test_release_policy.py", "tests/core/test_release_policy_edges.py"),
    ),
    "readiness": Target(
        "app/core/readiness.py",
        ("tests/core/test_readiness_rules.py", "tests/core/test_tracking_readiness.py"),
    ),
    "bumpplan": Target(
        "app/core/bumpplan.py",
        (
            "tests/core/test_bump_plan.py",
            "tests/core/test_bump_plan_edges.py",
            "tests/core/test_bump_texts.py",
            "tests/core/test_bump_recipes.py",
            "tests/core/test_githubtext.py",
        ),
    ),
    "changepoint": Target(
        "app/core/changepoint.py",
        ("tests/core/test_changepoint.py", "tests/core/test_changepoint_*.py"),
    ),
    "commands": Target(
        "app/core/commands.py",
        (
            "tests/core/test_command_errors.py",
            "tests/core/test_inert.py",
            "tests/core/test_seqlen.py",
            "tests/flows/test_commands.py",
        ),
    ),
    "roles": Target("app/core/roles.py", ("tests/core/test_roles.py", "tests/core/test_github_rules.py")),
    "budget": Target("app/core/budget.py", ("tests/core/test_budget.py", "tests/core/test_budget_edges.py")),
    "redelivery": Target("app/core/redelivery.py", ("tests/core/test_redelivery_boundaries.py",)),
    # the two guards that live in flows/store code (PostgreSQL tests, ~10-20 s a mutant): only the
    # guard's functions are mutated
    "ingest_guard": Target(
        "app/flows/ingest/deliveries.py", ("tests/web/test_ingest.py",), functions=("_settle", "_retry_later")
    ),
    "dispatch_guard": Target(
        "app/store/jobs.py",
        ("tests/flows/test_retry_run_match.py", "tests/flows/test_requeue_refund.py"),
        functions=("requeue",),
    ),
}

STATUS_LINE = re.compile(r"^\s*(?P<name>\S+): (?P<status>.+?)\s*$")


@dataclass
class ModuleResult:
    name: str
    total: int = 0
    killed: int = 0
    equivalent: int = 0
    survivors: list[dict[str, str]] = field(default_factory=list)
    other: dict[str, int] = field(default_factory=dict)  # timeout, no tests, suspicious ...
    seconds: float = 0.0

    @property
    def rate(self) -> float | None:
        counted = self.total - self.equivalent
        return None if counted <= 0 else self.killed / counted


def load_equivalents(path: Path = EQUIVALENTS) -> set[tuple[str, str, str]]:
    """``module | function | mutated line | why`` lines; '#' starts a comment."""
    found: set[tuple[str, str, str]] = set()
    if not path.exists():
        return found
    for line in path.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [p.strip() for p in line.split(" | ")]
        if len(parts) < 4 or not parts[3]:
            raise SystemExit(f"{path}: every line is 'module | function | mutated line | why': {line!r}")
        found.add((parts[0], parts[1], parts[2]))
    return found


def _tests(patterns: tuple[str, ...]) -> list[str]:
    files: list[str] = []
    for pattern in patterns:
        matched = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob(pattern))
        if not matched:
            raise SystemExit(f"no test file matches {pattern!r}: fix MODULES in {__file__}")
        files += matched
    return files


def _tree_files() -> list[str]:
    """The work tree as git sees it (tracked and untracked, not ignored): what the tests may read."""
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return [f for f in out.stdout.splitlines() if (ROOT / f).is_file()]


def _scratch(module: str, tests: list[str]) -> Path:
    work = Path(tempfile.mkdtemp(prefix="sweepbot-mutation-"))
    files = _tree_files()
    for rel in files:
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, work / rel)
    tops = sorted({rel.split("/", 1)[0] for rel in files} - {"pyproject.toml"})
    config = {
        "source_paths": [module],
        "also_copy": tops,
        "pytest_add_cli_args_test_selection": tests,
        "pytest_add_cli_args": ["-p", "no:xdist", "-p", "no:cacheprovider", "-q"],
    }
    with (work / "pyproject.toml").open("a") as fh:
        fh.write("\n[tool.mutmut]\n")
        for key, value in config.items():
            fh.write(f"{key} = {json.dumps(value)}\n")
    return work


def _functions(work: Path, module: str) -> dict[str, list[str]]:
    """Every function of mutmut's mutated copy of ``module`` (the original is ``*__mutmut_orig``,
    each mutant ``*__mutmut_N``) by name, as source lines: read once, instead of a ``mutmut show``
    subprocess (a second each) per survivor."""
    path = work / "mutants" / module
    source = path.read_text()
    # split once: ast.get_source_segment splits the whole file again per call, and a mutated file
    # holds a function per mutant (runmatch: 1347 of them in 41k lines, minutes of re-splitting)
    lines = [ln.encode() for ln in _LINE.findall(source)]
    found: dict[str, list[str]] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "__mutmut_" in node.name:
            found[node.name] = _segment(lines, node).splitlines()
    return found


# A source line with its end, as ast splits them (\r\n, \r or \n; not the form feed str.splitlines
# also takes), so that the line numbers and byte offsets of the ast nodes index into it.
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def _segment(lines: list[bytes], node: ast.stmt) -> str:
    """``ast.get_source_segment(source, node)`` from the file's lines split once (offsets are in
    UTF-8 bytes, as ast gives them)."""
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    start, end = node.col_offset, node.end_col_offset
    if first == last:
        return lines[first][start:end].decode()
    body = [lines[first][start:], *lines[first + 1 : last], lines[last][:end]]
    return b"".join(body).decode()


def _mutated_line(functions: dict[str, list[str]], mutant: str) -> tuple[str, str]:
    """The mutant's function and its mutated line (the first line ``mutmut show`` marks ``+``)."""
    leaf = mutant.rsplit(".", 1)[-1]
    base = leaf.split("__mutmut_")[0]
    function = base.removeprefix("x_")
    orig = [ln.replace(f"{base}__mutmut_orig", base) for ln in functions.get(f"{base}__mutmut_orig", [])]
    mutated = [ln.replace(leaf, base) for ln in functions.get(leaf, [])]
    added = [
        ln[1:].strip()
        for ln in difflib.unified_diff(orig, mutated, lineterm="", n=0)
        if ln.startswith("+") and not ln.startswith("+++")
    ]
    return function, (added[0] if added else "")


def _mutmut() -> str:
    return str(Path(sys.executable).with_name("mutmut"))


def run_module(name: str, equivalents: set[tuple[str, str, str]], children: int = 1) -> ModuleResult:
    target = MODULES[name]
    module = target.path
    result = ModuleResult(name)
    work = _scratch(module, _tests(target.tests))
    dotted = module.removesuffix(".py").replace("/", ".")
    # mutmut names a mutant module.x_function__mutmut_N (a method: module.xǁClassǁmethod__mutmut_N)
    only = [f"{dotted}.x_{f}__mutmut_*" for f in target.functions]
    started = time.monotonic()
    try:
        run = subprocess.run(
            [_mutmut(), "run", "--max-children", str(children), *only],
            cwd=work,
            capture_output=True,
            text=True,
        )
        listing = subprocess.run(
            [_mutmut(), "results", "--all", "true"], cwd=work, capture_output=True, text=True
        )
        if "failed to collect stats" in run.stdout + run.stderr or (run.returncode and not listing.stdout):
            # the unmutated tests must pass first: mutmut says which failed
            raise SystemExit(f"mutmut could not run {module}'s tests:\n{(run.stdout + run.stderr)[-4000:]}")
        functions = _functions(work, module)
        for line in listing.stdout.splitlines():
            m = STATUS_LINE.match(line)
            if m is None or (only and not any(fnmatch.fnmatch(m.group("name"), o) for o in only)):
                continue
            result.total += 1
            status = m.group("status")
            if status == "killed":
                result.killed += 1
            elif status in ("survived", "no tests"):
                # no tests: no selected test calls the function, so nothing can kill it (not killed)
                function, mutated = _mutated_line(functions, m.group("name"))
                if (dotted, function, mutated) in equivalents:
                    result.equivalent += 1
                else:
                    result.survivors.append(
                        {"mutant": m.group("name"), "function": function, "line": mutated, "status": status}
                    )
            else:
                result.other[status] = result.other.get(status, 0) + 1
    finally:
        result.seconds = time.monotonic() - started
        shutil.rmtree(work, ignore_errors=True)
    return result


def _row(r: ModuleResult) -> str:
    rate = "n/a (no mutants)" if r.rate is None else f"{100 * r.rate:5.1f}%"
    other = ", ".join(f"{k} {v}" for k, v in sorted(r.other.items())) or "-"
    return (
        f"{r.name:<15} {r.total:>5} {r.killed:>6} {r.equivalent:>5} {len(r.survivors):>8}  "
        f"{rate:>8}  {r.seconds:6.0f}s  {other}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("modules", nargs="*", help=f"short names (default: all): {', '.join(MODULES)}")
    parser.add_argument("--json", type=Path, help="write every module's figures and survivors here")
    parser.add_argument("--children", type=int, default=1, help="mutants run at once (default 1: 2 cores)")
    args = parser.parse_args(argv)
    names = args.modules or list(MODULES)
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        parser.error(f"unknown module(s) {', '.join(unknown)}; choose from {', '.join(MODULES)}")
    equivalents = load_equivalents()
    print(f"{'module':<15} {'total':>5} {'killed':>6} {'equiv':>5} {'survived':>8}", end="")
    print(f"  {'rate':>8}  {'time':>7}  other")
    results = []
    for i, name in enumerate(names, 1):
        print(f"[{i}/{len(names)}] {name}: {MODULES[name].path} ...", file=sys.stderr, flush=True)
        r = run_module(name, equivalents, args.children)
        results.append(r)
        print(_row(r), flush=True)
        for s in r.survivors:
            print(f"    {s['status']} {s['mutant']}: {s['line']}")
    killed = sum(r.killed for r in results)
    counted = sum(r.total - r.equivalent for r in results)
    overall = killed / counted if counted else 0.0
    print(f"overall: {killed}/{counted} non-equivalent mutants killed ({100 * overall:.1f}%)")
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ | {"rate": r.rate} for r in results], indent=2))
    return 0 if counted and overall >= 0.95 else 1


if __name__ == "__main__":
    raise SystemExit(main())
