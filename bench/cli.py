"""CPU per call of the offline tools: `sweepbot recipe plan|dispatch|bump` and `sweepbot gap`.

Scripts call these hundreds of times, so each call must cost little: the aim is under 0.3 s of
CPU per call (user + system of the child process, from getrusage), which only holds when a tool
imports none of the service (no web framework, ORM, broker, simulator; tests/cli/test_cli_imports.py
checks the import set). The baseline is `python -c pass` measured in the same run, so the ratio
says what the tool adds over starting Python on this machine, whatever its load.

    .venv/bin/python bench/cli.py [--calls 5] [--limit 0.3] [--before DIR [--before-path P]]

``--before DIR`` also times the code of another checkout (e.g. main's worktree) in the same run,
its calls interleaved with this code's so both see the same load; ``--before-path`` puts a
folder ahead of site-packages for it (main ran with typer 0.29: ``pip install --no-deps --target
P typer==0.29.2``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MASTER = ROOT / "tests/fixtures/inferencex/amd-master.head.yaml"
KEY = "dsr1-fp4-mi355x-sglang"
REFERENCE = ROOT / "app/core/references/atom-minimaxm3-mxfp4-mi355x-tp4-8k1k.yaml"


def write_results(folder: Path) -> Path:
    """Two result files of the reference's workload (benchmark_serving's raw schema)."""
    for conc, tpot in ((32, 17.2), (64, 25.1)):
        doc = {
            "model_id": "amd/MiniMax-M3-MXFP4",
            "max_concurrency": conc,
            "completed": 10 * conc,
            "total_input_tokens": 10 * conc * 7400,
            "total_output_tokens": 10 * conc * 1000,
            "mean_tpot_ms": tpot,
            "median_tpot_ms": tpot,
            "mean_ttft_ms": 900.0,
            "total_token_throughput": 9000.0,
            "output_throughput": 1100.0,
        }
        (folder / f"minimaxm3_tp4_conc{conc}.json").write_text(json.dumps(doc))
    return folder


def calls(results: Path) -> dict[str, list[str]]:
    return {
        "python -c pass (baseline)": ["-c", "pass"],
        "recipe plan --json": ["-m", "app", "recipe", "plan", str(MASTER), KEY, "--json"],
        "recipe dispatch --json": ["-m", "app", "recipe", "dispatch", str(MASTER), KEY, "--json"],
        "recipe bump": ["-m", "app", "recipe", "bump", str(MASTER), KEY, "rocm/sglang:v1"],
        "gap": ["-m", "app", "gap", "--results", str(results), "--reference", str(REFERENCE)],
    }


def cpu_of(args: list[str], root: Path = ROOT, path: str = "") -> float:
    """CPU seconds (user + system) of one child running ``python *args`` on the code at ``root``
    (``path``: folders ahead of it on sys.path); it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (path, str(root)) if p)}
    done = subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr.strip()[-400:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5, help="calls per tool (the median is shown)")
    parser.add_argument("--limit", type=float, default=0.3, help="aim: CPU seconds per call")
    parser.add_argument("--before", type=Path, help="another checkout to time in the same run")
    parser.add_argument("--before-path", default="", help="sys.path folders ahead for --before")
    opts = parser.parse_args()
    trees = {"after": (ROOT, "")}
    if opts.before is not None:
        trees = {"before": (opts.before.resolve(), opts.before_path), **trees}
    with tempfile.TemporaryDirectory() as tmp:
        planned = calls(write_results(Path(tmp)))
        samples: dict[tuple[str, str], list[float]] = {(t, n): [] for t in trees for n in planned}
        for _ in range(opts.calls):  # interleaved: every tree sees the same load
            for name, args in planned.items():
                for tree, (root, path) in trees.items():
                    samples[tree, name].append(cpu_of(args, root, path))
    medians = {key: statistics.median(values) for key, values in samples.items()}
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'call':<28}" + "".join(f" {t + ' s':>10} {'x base':>7}" for t in trees))
    worst = 0.0
    for name in planned:
        row = f"{name:<28}"
        for tree in trees:
            cpu, base = medians[tree, name], medians[tree, "python -c pass (baseline)"]
            row += f" {cpu:>10.3f} {cpu / base if base else float('nan'):>7.1f}"
        print(row)
        if not name.endswith("(baseline)"):
            worst = max(worst, medians["after", name])
    base = medians["after", "python -c pass (baseline)"]
    print(f"worst tool call {worst:.3f} s CPU (aim < {opts.limit} s); baseline {base:.3f} s")
    return 0 if worst < opts.limit else 1


if __name__ == "__main__":
    raise SystemExit(main())
