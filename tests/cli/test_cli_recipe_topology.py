"""sweepbot recipe plan on a multi-node key, through the console script."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.recipe_helpers import fixture_path


def test_cli_plans_a_multinode_key() -> None:
    path = fixture_path("nvidia-master.dsv4-gb300-trt-mtp.head.yaml")
    args = [sys.executable, "-m", "app", "recipe", "plan", str(path), "dsv4-fp4-gb300-dynamo-trt-mtp"]
    done = subprocess.run([*args, "--json"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert [r["conc"] for r in json.loads(done.stdout)][:2] == [[8], [10]]
    table = subprocess.run(args, capture_output=True, text=True, check=False)
    assert table.returncode == 0 and "P1xTP4/EP4 D4xTP8/EP8" in table.stdout
