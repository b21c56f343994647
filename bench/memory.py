"""Memory of `sweepbot up`: RSS and PSS of the whole process tree once it is healthy.

Starts `python -m app up` on loopback with ports of its own and a data dir in a temporary
directory (so the embedded default: SQLite, the SQLAlchemy broker, the simulated GitHub), waits
until /readyz says ready, samples every process of the tree with psutil for a few seconds, prints
a table per process and the totals, then stops it by its pid (SIGINT, as Ctrl-C does).

RSS counts a shared page once per process that maps it (the tree's RSS sum overstates it); PSS
divides each shared page among the processes sharing it, so the tree's PSS sum is what the tree
costs the machine. The aim is both sums under 400 MB.

    .venv/bin/python bench/memory.py [--settle 5] [--samples 5] [--limit-mb 400]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
MB = 1024 * 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Sample:
    pid: int
    role: str
    threads: int
    rss: int
    pss: int
    uss: int


def role_of(proc: psutil.Process) -> str:
    """`up`, `api`, `worker`, `beat`, or the executable for anything else (a pool child)."""
    try:
        cmd = proc.cmdline()
    except psutil.Error:
        return "?"
    for word in ("up", "api", "worker", "beat"):
        if word in cmd[1:4]:
            return word
    if "celery" in " ".join(cmd).lower() or (cmd and "app" in cmd[1:3]):
        return "child of " + (proc.parent().name() if proc.parent() else "?")
    return " ".join(cmd)[:40]


def sample_tree(root: psutil.Process) -> list[Sample]:
    out = []
    for proc in [root, *root.children(recursive=True)]:
        try:
            info = proc.memory_full_info()
            out.append(Sample(proc.pid, role_of(proc), proc.num_threads(), info.rss, info.pss, info.uss))
        except psutil.NoSuchProcess:
            continue
    return out


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float) -> float:
    started = time.monotonic()
    deadline = started + timeout
    last = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"`sweepbot up` exited with {proc.returncode} before it was ready")
        try:
            resp = httpx.get(url, timeout=2)
            if resp.status_code == 200:
                return time.monotonic() - started
            last = resp.text[:300]
        except httpx.HTTPError as exc:
            last = str(exc)
        time.sleep(0.5)
    raise SystemExit(f"{url} not ready within {timeout:.0f}s: {last}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT to the `up` process by its pid (it stops its children); SIGKILL its group if stuck."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session (start_new_session): only its tree
        proc.wait(timeout=10)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--settle", type=float, default=5.0, help="seconds to wait after ready")
    parser.add_argument("--samples", type=int, default=5, help="samples, one a second; the largest is kept")
    parser.add_argument("--limit-mb", type=float, default=400.0)
    parser.add_argument("--ready-timeout", type=float, default=120.0)
    args = parser.parse_args()

    port, sim_port = free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="sweepbot-memory-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SWEEPBOT_")}
        env.update({"SWEEPBOT_DATA_DIR": str(Path(tmp) / "data"), "PYTHONPATH": str(ROOT)})
        cmd = [sys.executable, "-m", "app", "up", "--host", "127.0.0.1", "--port", str(port)]
        proc = subprocess.Popen(
            [*cmd, "--sim-port", str(sim_port)],
            cwd=tmp,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            took = wait_ready(f"http://127.0.0.1:{port}/readyz", proc, args.ready_timeout)
            time.sleep(args.settle)
            root = psutil.Process(proc.pid)
            best: list[Sample] = []
            for _ in range(args.samples):
                current = sample_tree(root)
                if sum(s.pss for s in current) > sum(s.pss for s in best):
                    best = current
                time.sleep(1)
        finally:
            stop(proc)
    print(f"`sweepbot up` ready in {took:.1f}s; largest of {args.samples} samples after {args.settle:.0f}s:")
    print(f"{'pid':>7}  {'process':<28} {'threads':>7} {'RSS MB':>8} {'PSS MB':>8} {'USS MB':>8}")
    for s in best:
        mb = f"{s.rss / MB:8.1f} {s.pss / MB:8.1f} {s.uss / MB:8.1f}"
        print(f"{s.pid:>7}  {s.role:<28} {s.threads:>7} {mb}")
    rss, pss = sum(s.rss for s in best) / MB, sum(s.pss for s in best) / MB
    threads = sum(s.threads for s in best)
    print(f"total: {len(best)} processes, {threads} threads, RSS {rss:.0f} MB, PSS {pss:.0f} MB")
    for name, value in (("RSS", rss), ("PSS", pss)):
        print(f"aim {name} < {args.limit_mb:.0f} MB: {'met' if value < args.limit_mb else 'NOT met'}")
    return 0 if max(rss, pss) < args.limit_mb else 1


if __name__ == "__main__":
    raise SystemExit(main())
