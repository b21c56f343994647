"""A fresh clone, in a folder with nothing beside it, passes its own fixture-reading tests: the
test data lives in the repository (tests/fixtures/), not in a reference folder beside a checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import IN_CI, ROOT

pytestmark = pytest.mark.slow

# Tests that read tests/fixtures/ (webhook payloads, registry pages, benchmark results, references).
FIXTURE_READERS = ("tests/test_fixtures.py", "tests/core/test_gap.py", "tests/adapters/test_registry.py")


def test_a_fresh_clone_with_nothing_beside_it_passes_its_fixture_tests(tmp_path: Path) -> None:
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        if IN_CI:
            pytest.fail("CI=true: the suite runs from a git checkout, and git must be installed")
        pytest.skip("not a git checkout")
    alone = tmp_path / "alone"
    alone.mkdir()
    clone = alone / "sweepbot"
    subprocess.run([git, "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True, timeout=120)
    assert sorted(p.name for p in alone.iterdir()) == ["sweepbot"]  # nothing beside the clone
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEEPBOT_")}
    env.update({"PYTHONPATH": str(clone), "SWEEPBOT_DATA_DIR": str(tmp_path / "data")})
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *FIXTURE_READERS],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and "skipped" not in out.stdout, out.stdout[-1000:]
    # the clone's own code ran, not this checkout's
    probe = subprocess.run(
        [sys.executable, "-c", "import app; print(app.__file__)"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
    )
    assert probe.stdout.strip().startswith(str(clone)), probe.stdout
