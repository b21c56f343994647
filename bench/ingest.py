"""Ingest benchmark: the real ``POST /webhooks/github`` against a bare 202 endpoint, same run.

Both servers run on loopback as real uvicorn processes; the real one stores into PostgreSQL and
rings Redis. Payloads are the real fixture payloads (sizes as GitHub sends them) with valid
signatures and fresh delivery ids. Two phases per server:

1. closed loop: N concurrent clients for a bounded number of requests -> requests/s;
2. open loop at a fixed rate (default 200 requests/s) for a bounded time -> p50 / p99 ack latency.

The closed loop runs in rounds, the two servers alternating, so drifting load from other work on
the machine hits both alike; the median round's ratio is the figure. Prints the load average.
Needs PostgreSQL and Redis on 127.0.0.1.

    .venv/bin/python bench/ingest.py [--requests 3000] [--concurrency 32] [--rate 200] [--seconds 10]
                                     [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "github" / "webhooks"
SECRET = "bench-secret"
PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"

BARE_APP = """
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
app = FastAPI()
@app.post("/webhooks/github")
async def receive(request: Request) -> JSONResponse:
    await request.body()
    return JSONResponse({"status": "accepted"}, status_code=202)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def payloads() -> list[tuple[str, bytes]]:
    found = [
        (p.parent.name, p.read_bytes()) for p in sorted(FIXTURES.glob("*/*.json")) if p.parent.name != "ping"
    ]
    if not found:
        raise SystemExit(f"no webhook payloads under {FIXTURES}")
    return found


def wait_up(url: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited early with {proc.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not come up in {timeout}s")


def request_for(event: str, body: bytes) -> dict[str, str]:
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest(),
        "Content-Type": "application/json",
    }


class Conn:
    """One keep-alive HTTP/1.1 connection on raw asyncio streams.

    httpx costs about a millisecond of client CPU per request, which on this 2-core machine would
    measure the load generator instead of the servers; this client costs a few microseconds.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, headers: dict[str, str], body: bytes) -> int:
        try:
            return await self._post(path, headers, body)
        except (ConnectionError, IndexError):
            # The server closed an idle keep-alive connection under us: reconnect once.
            self.writer = None
            return await self._post(path, headers, body)

    async def _post(self, path: str, headers: dict[str, str], body: bytes) -> int:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Length: {len(body)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        self.writer.write(head.encode() + body)
        status_line = await self.reader.readline()
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        if length:
            await self.reader.readexactly(length)
        return int(status_line.split()[1])


def _split(url: str) -> tuple[str, int, str]:
    parsed = urllib.parse.urlsplit(url)
    return parsed.hostname or "127.0.0.1", parsed.port or 80, parsed.path


async def closed_loop(url: str, bodies: list[tuple[str, bytes]], total: int, concurrency: int) -> float:
    host, port, path = _split(url)
    sent = 0

    async def one_client(offset: int) -> None:
        nonlocal sent
        conn = Conn(host, port)
        i = offset
        while sent < total:
            sent += 1
            event, body = bodies[i % len(bodies)]
            status = await conn.post(path, request_for(event, body), body)
            assert status == 202, status
            i += concurrency

    started = time.perf_counter()
    await asyncio.gather(*(one_client(i) for i in range(concurrency)))
    return total / (time.perf_counter() - started)


async def open_loop(url: str, bodies: list[tuple[str, bytes]], rate: float, seconds: float) -> list[float]:
    """Requests start on a fixed schedule whatever the server does (no coordinated omission)."""
    host, port, path = _split(url)
    latencies: list[float] = []
    idle: list[Conn] = []

    async def one(i: int, due: float) -> None:
        conn = idle.pop() if idle else Conn(host, port)
        event, body = bodies[i % len(bodies)]
        status = await conn.post(path, request_for(event, body), body)
        latencies.append((time.perf_counter() - due) * 1000)
        idle.append(conn)
        assert status == 202, status

    tasks = []
    t0 = time.perf_counter()
    for i in range(int(rate * seconds)):
        due = t0 + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i, due)))
    await asyncio.gather(*tasks)
    return latencies


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` so far, all its threads (0 when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces
    return (int(fields[11]) + int(fields[12])) / TICK


class Cpu:
    """CPU spent by a server process and by the PostgreSQL backends serving the bench database."""

    def __init__(self, pid: int, admin: Any, db: str) -> None:
        self.pid, self.admin, self.db = pid, admin, db

    def backends(self) -> list[int]:
        with self.admin.connect() as conn:
            rows = conn.execute(text("SELECT pid FROM pg_stat_activity WHERE datname = :db"), {"db": self.db})
            return [int(r[0]) for r in rows]

    def sample(self) -> tuple[float, dict[int, float]]:
        return cpu_seconds(self.pid), {b: cpu_seconds(b) for b in self.backends()}

    @staticmethod
    def spent(
        before: tuple[float, dict[int, float]], after: tuple[float, dict[int, float]]
    ) -> tuple[float, float]:
        """(server CPU, PostgreSQL CPU) between two samples; a backend new since ``before`` counts whole."""
        pg = sum(t - before[1].get(b, 0.0) for b, t in after[1].items())
        return after[0] - before[0], pg


def measure_rps(
    url: str, bodies: list[tuple[str, bytes]], args: argparse.Namespace, cpu: Cpu
) -> tuple[float, float, float]:
    """Closed-loop requests/s, and the server's and PostgreSQL's CPU per request in ms."""
    before = cpu.sample()
    rps = asyncio.run(closed_loop(url, bodies, args.requests, args.concurrency))
    server, pg = Cpu.spent(before, cpu.sample())
    return rps, server * 1000 / args.requests, pg * 1000 / args.requests


def measure_latency(name: str, url: str, bodies: list[tuple[str, bytes]], args: argparse.Namespace) -> float:
    lat = asyncio.run(open_loop(url, bodies, args.rate, args.seconds))
    p50, p99 = pct(lat, 50), pct(lat, 99)
    print(
        f"{name:>6}: at {args.rate:.0f} req/s for {args.seconds:.0f} s: p50 {p50:6.2f} ms  p99 {p99:6.2f} ms"
    )
    return p99


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3, help="closed-loop rounds, servers alternating")
    args = parser.parse_args()

    db = f"sweepbot_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{db}"'))
    db_url = PG_ADMIN.rsplit("/", 1)[0] + "/" + db
    env = {
        **os.environ,
        "SWEEPBOT_DATABASE_URL": db_url,
        "SWEEPBOT_BROKER_URL": "redis://127.0.0.1:6379/14",
        "SWEEPBOT_WEBHOOK_SECRETS": SECRET,
        "SWEEPBOT_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
        "SWEEPBOT_DATA_DIR": str(ROOT / ".sweepbot" / "bench"),
    }
    real_port, bare_port = free_port(), free_port()
    bare_file = ROOT / ".sweepbot" / "bench_bare_app.py"
    bare_file.parent.mkdir(parents=True, exist_ok=True)
    bare_file.write_text(BARE_APP)
    procs = [
        subprocess.Popen([sys.executable, "-m", "app", "api", "--port", str(real_port)], cwd=ROOT, env=env),
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "--app-dir",
                str(bare_file.parent),
                "bench_bare_app:app",
                "--port",
                str(bare_port),
                "--log-level",
                "warning",
                "--no-access-log",
            ],
            cwd=ROOT,
            env=env,
        ),
    ]
    try:
        wait_up(f"http://127.0.0.1:{real_port}/healthz", procs[0])
        wait_up(f"http://127.0.0.1:{bare_port}/docs", procs[1])
        bodies = payloads()
        print(
            f"payloads: {len(bodies)} real fixtures, {min(len(b) for _, b in bodies)}.."
            f"{max(len(b) for _, b in bodies)} bytes; concurrency {args.concurrency}; {load()}"
        )
        urls = {
            "bare": f"http://127.0.0.1:{bare_port}/webhooks/github",
            "real": f"http://127.0.0.1:{real_port}/webhooks/github",
        }
        for url in urls.values():  # warm up
            asyncio.run(closed_loop(url, bodies, min(200, args.requests), args.concurrency))
        # Other work on the machine drifts: the two servers alternate, and each round's ratio
        # compares runs a few seconds apart; the median round is the figure.
        cpus = {"bare": Cpu(procs[1].pid, admin, db), "real": Cpu(procs[0].pid, admin, db)}
        ratios, real_cpu, pg_cpu, bare_cpu = [], [], [], []
        for round_no in range(1, args.rounds + 1):
            bare_rps, bare_ms, _ = measure_rps(urls["bare"], bodies, args, cpus["bare"])
            real_rps, real_ms, pg_ms = measure_rps(urls["real"], bodies, args, cpus["real"])
            ratios.append(real_rps / bare_rps)
            real_cpu.append(real_ms)
            pg_cpu.append(pg_ms)
            bare_cpu.append(bare_ms)
            print(
                f"round {round_no}: bare {bare_rps:8.1f} req/s, real {real_rps:8.1f} req/s closed-loop, "
                f"ratio {ratios[-1]:.2f}; CPU per request: bare {bare_ms:.3f} ms, "
                f"real {real_ms:.3f} ms + PostgreSQL {pg_ms:.3f} ms"
            )
        measure_latency("bare", urls["bare"], bodies, args)
        p99 = measure_latency("real", urls["real"], bodies, args)
        print(
            f"throughput ratio real/bare, median of {args.rounds}: "
            f"{statistics.median(ratios):.2f} (aim >= 0.50)"
        )
        print(
            f"CPU per request, median of {args.rounds}: bare {statistics.median(bare_cpu):.3f} ms, "
            f"real {statistics.median(real_cpu):.3f} ms (API process) + "
            f"{statistics.median(pg_cpu):.3f} ms (PostgreSQL backends)"
        )
        print(f"p99 ack at {args.rate:.0f} req/s: {p99:.1f} ms (aim < 50 ms); {load()}")
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)
        from app.db import dispose_engines

        dispose_engines()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        admin.dispose()


if __name__ == "__main__":
    main()
