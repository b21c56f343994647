"""The suite is self-contained: its data is in tests/fixtures/, and nothing reads outside the repo."""

from __future__ import annotations

import re

from tests.conftest import FIXTURES, ROOT

CODE_DIRS = ("app", "sim", "tests", "bench", "workers", "migrations")
# Any spelling that reaches the shared reference set beside a checkout.
OUTSIDE = re.compile(r"""\.\./shared|parent\s*/\s*["']shared["']|["']shared["']\s*/\s*["']fixtures["']""")


def test_no_code_reads_outside_the_repository() -> None:
    offenders = []
    for folder in CODE_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            for lineno, line in enumerate(text.splitlines(), 1):
                if OUTSIDE.search(line) and path.name != "test_fixtures.py":
                    offenders.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert offenders == []
    for name in ("Makefile", ".ci/run", ".github/workflows/ci.yml"):
        assert not OUTSIDE.search((ROOT / name).read_text(encoding="utf-8")), name


def test_fixtures_live_in_the_repository() -> None:
    assert FIXTURES == ROOT / "tests" / "fixtures"
    for sub in ("github/webhooks", "inferencex/workflows", "references", "registry", "vllm-bench"):
        assert any((FIXTURES / sub).iterdir()), sub


def test_every_fixture_folder_has_its_provenance() -> None:
    index = (FIXTURES / "README.md").read_text(encoding="utf-8")
    for folder in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        assert (folder / "README.md").is_file(), f"{folder.name}/ has no README.md with its provenance"
        assert f"`{folder.name}/" in index, f"{folder.name}/ is not in tests/fixtures/README.md"
