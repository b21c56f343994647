"""The architecture, checked: layers point one way, no import cycles, no imports hidden inside
functions, and modules and functions small enough to read (docs/architecture.md).

Each check has a baseline of what is known to be left; a baseline entry that no longer offends
fails too, so the baselines only ever shrink.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
# A function-level import is allowed only with a comment on its line saying why (e.g. "# lazy: ...").
LAZY_MARK = "# lazy:"

BASELINE = Path(__file__).with_name("architecture_baseline.txt")


def _baseline(section: str) -> set[str]:
    """What is known to be left, by section ('[cycles]', '[inner-imports]', '[sizes]'); shrinks to empty."""
    current, found = "", set()
    for line in BASELINE.read_text().splitlines():
        line = line.strip()
        if line.startswith("["):
            current = line
        elif line and not line.startswith("#") and current == section:
            found.add(line)
    return found


PACKAGES = ("app", "workers", "devstack")


def _app_files(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> Iterator[Path]:
    for base in packages:
        yield from sorted((root / base).rglob("*.py"))


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_the_layer_contracts_hold() -> None:
    """`lint-imports` over pyproject's contracts: entry points -> flows -> adapters/store -> core."""
    script = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]


def _cycles(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> set[str]:
    """Strongly connected components of the module import graph (every import, at any depth),
    each as its sorted module names joined by ' '."""
    sys.path.insert(0, str(root))
    try:
        graph = grimp.build_graph(*packages, cache_dir=None)
    finally:
        sys.path.remove(str(root))
    mods = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & set(mods)) for m in mods}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: set[str] = set()
    counter = 0

    def visit(root: str) -> None:  # iterative Tarjan: the graph is deep enough to hit recursion limits
        nonlocal counter
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(edges[child])))
                    break
                if child in on:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = set()
                    while True:
                        top = stack.pop()
                        on.discard(top)
                        comp.add(top)
                        if top == node:
                            break
                    if len(comp) > 1:
                        found.add(" ".join(sorted(comp)))

    for m in mods:
        if m not in index:
            visit(m)
    return found


def _ratchet(found: set[str], section: str, what: str) -> None:
    known = _baseline(section)
    new = sorted(found - known)
    assert not new, f"{what}: {new}"
    stale = sorted(known - found)
    assert not stale, f"fixed: remove these lines from {BASELINE.name} {section}: {stale}"


def test_no_import_cycles() -> None:
    _ratchet(_cycles(), "[cycles]", "import cycles (one line per cycle)")


def _inner_imports(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> set[str]:
    found = set()
    for path in _app_files(root, packages):
        source = path.read_text()
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(node):
                if (
                    isinstance(inner, ast.Import | ast.ImportFrom)
                    and LAZY_MARK not in lines[inner.lineno - 1]
                ):
                    names = inner.module if isinstance(inner, ast.ImportFrom) else inner.names[0].name
                    found.add(f"{_module_name(path, root)}:{node.name}:{names}")
    return found


def test_no_imports_inside_functions() -> None:
    _ratchet(
        _inner_imports(),
        "[inner-imports]",
        f"imports inside functions (move them up, or mark '{LAZY_MARK} why')",
    )


def _oversized(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> set[str]:
    found = set()
    for path in _app_files(root, packages):
        source = path.read_text()
        lines = source.splitlines()
        name = _module_name(path, root)
        if len(lines) > MAX_MODULE_LINES and "# size:" not in source[:2000]:
            found.add(name)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES and "# size:" not in lines[node.lineno - 1]:
                    found.add(f"{name}:{node.name}")
    return found


def test_modules_and_functions_stay_small() -> None:
    """Over the limits only with a '# size: why' comment (module: near its top; function: on its def)."""
    _ratchet(
        _oversized(),
        "[sizes]",
        f"over {MAX_MODULE_LINES} lines per module / {MAX_FUNCTION_LINES} per function",
    )


def test_the_checks_find_offenders_in_a_made_up_tree(tmp_path: Path) -> None:
    """Each check can fail: a small tree with one cycle, one hidden import and one long function.
    (Its own package name: grimp would otherwise find the already imported ``app``.)"""
    pkg = tmp_path / "madeup"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import madeup.b\n")
    (pkg / "b.py").write_text("def f() -> None:\n    import madeup.a\n")
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES + 1))
    (pkg / "c.py").write_text(
        "def long() -> None:\n" + body + "\n\ndef lazy() -> None:\n    import json  # lazy: ok\n"
    )
    made_up = ("madeup",)
    assert _cycles(tmp_path, made_up) == {"madeup.a madeup.b"}
    assert _inner_imports(tmp_path, made_up) == {"madeup.b:f:madeup.a"}
    assert _oversized(tmp_path, made_up) == {"madeup.c:long"}
