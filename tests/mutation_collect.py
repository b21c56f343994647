"""The collect tests catch a collection that records failed jobs as succeeded (issue 17).

They once could not: the tests replaced collection's bridge to the scheduler's ``finish_job`` with a
fake that recorded the call, so breaking that bridge (or what it was told) left the suite green.
Now they run collection through the real ``finish_job`` against real rows, with only the gateway
faked, and read the job's state back from the database.

This script proves it. For each mutant it edits ``app/flows/results/collect.py`` in place, runs the collect
tests, restores the file (always, also on Ctrl-C) and reports which tests failed. A mutant that no
test kills is a blind spot: the script exits 1.

    SWEEPBOT_TEST_REDIS_DB=4 .venv/bin/python tests/mutation_collect.py
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "app" / "flows" / "collect.py"
TESTS = [
    "tests/flows/test_results.py",
    "tests/flows/test_hostile_data.py",
    "tests/flows/test_evals_collect.py",
]

# name -> (the exact original text, its mutant): each one makes collection report success.
MUTANTS = {
    # the bridge to the scheduler always finishes the job as succeeded (the old blind spot)
    "finish_job always told 'succeeded'": (
        "    finish_job(session, j.job.id, state, reason=reason, result_url=j.run_url)\n",
        '    finish_job(session, j.job.id, "succeeded", reason=reason, result_url=j.run_url)\n',
    ),
    # a failure is recorded on the job as a success, though the outcome still says failed
    "a failed job recorded as succeeded": (
        '    _finish(session, j, "failed", reason)\n',
        '    _finish(session, j, "succeeded", reason)\n',
    ),
}


def run_mutant(original: str, needle: str, mutant: str) -> list[str]:
    """The ids of the tests that fail with ``needle`` replaced by ``mutant``."""
    if original.count(needle) != 1:
        raise SystemExit(f"{TARGET}: the text to mutate is not there exactly once: {needle!r}")
    TARGET.write_text(original.replace(needle, mutant))
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", *TESTS],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        TARGET.write_text(original)
    return re.findall(r"^FAILED (\S+)", out.stdout, flags=re.M)


def main() -> int:
    original = TARGET.read_text()
    survivors = 0
    for name, (needle, mutant) in MUTANTS.items():
        failed = run_mutant(original, needle, mutant)
        verdict = f"{len(failed)} tests failed (killed)" if failed else "SURVIVED"
        print(f"mutant: {name}: {verdict}")
        for test in failed:
            print(f"    {test}")
        survivors += not failed
    assert TARGET.read_text() == original
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
