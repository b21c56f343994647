"""The simulator's own architecture checks (tests/test_architecture.py covers app/ and workers/):
no import cycles among sim modules, no imports hidden inside functions, modules and functions small.

``KNOWN`` would list what is left (an entry that no longer offends fails too); it is empty.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_architecture import LAZY_MARK, MAX_FUNCTION_LINES, MAX_MODULE_LINES

ROOT = Path(__file__).resolve().parents[2]
KNOWN: set[str] = set()  # nothing left; anything new fails


def _sim_files() -> list[Path]:
    return sorted((ROOT / "sim").rglob("*.py"))


def _name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _offences() -> set[str]:
    found: set[str] = set()
    for path in _sim_files():
        source = path.read_text()
        lines = source.splitlines()
        name = _name(path)
        if len(lines) > MAX_MODULE_LINES:
            found.add(f"size {name}")
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if (node.end_lineno or node.lineno) - node.lineno + 1 > MAX_FUNCTION_LINES:
                found.add(f"size {name}:{node.name}")
            for inner in ast.walk(node):
                if (
                    isinstance(inner, ast.Import | ast.ImportFrom)
                    and LAZY_MARK not in lines[inner.lineno - 1]
                ):
                    found.add(f"inner-import {name}:{node.name}")
    return found


def _imports(path: Path) -> set[str]:
    """The sim modules a module imports anywhere (TYPE_CHECKING blocks included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sim"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)  # `from sim import render`
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("sim"))
    return found


def _cycles() -> set[str]:
    """Pairs of sim modules that reach each other through imports."""
    modules = {_name(p): p for p in _sim_files()}
    edges = {m: _imports(p) & set(modules) for m, p in modules.items()}

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in edges[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    closure = {m: reach(m) for m in modules}
    return {
        f"cycle {' '.join(sorted((a, b)))}" for a in modules for b in edges[a] if a in closure[b] and a != b
    }


def test_sim_has_no_cycles_hidden_imports_or_oversized_code() -> None:
    found = _offences() | _cycles()
    new, fixed = sorted(found - KNOWN), sorted(KNOWN - found)
    assert not new, f"new offences: {new}"
    assert not fixed, f"fixed: remove these from KNOWN: {fixed}"
