"""A PostgreSQL and a Redis of a test's own, on free loopback ports, so the test can kill and
restart them (the shared services of the suite must never be touched).

Both run from the Debian binaries (``redis-server``; ``initdb``/``pg_ctl`` under
/usr/lib/postgresql/*/bin). PostgreSQL refuses to run as root, so as root the cluster belongs to
the ``postgres`` user and is driven with ``runuser``. Every process is stopped by its pid.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from sim.server import free_port


class ServiceUnavailable(RuntimeError):
    pass


def _wait_port(port: int, timeout: float) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise ServiceUnavailable(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


class OwnRedis:
    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ServiceUnavailable("redis-server is not installed (Debian package redis-server)")
        self.binary = binary
        self.port = free_port("127.0.0.1")
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        log = open(self.workdir / "redis.log", "ab")  # noqa: SIM115  (the child keeps it)
        # No persistence: a restart loses every queued message, the harshest broker restart.
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            cwd=self.workdir,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        _wait_port(self.port, 10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)  # a crash, not a clean shutdown
            self.proc.wait(timeout=10)
        self.proc = None

    def restart(self, down_seconds: float = 1.0) -> None:
        self.stop()
        time.sleep(down_seconds)
        self.start()


class OwnPostgres:
    def __init__(self) -> None:
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        if not bins:
            raise ServiceUnavailable("PostgreSQL server binaries are missing (Debian package postgresql)")
        self.bindir = Path(bins[-1]).parent
        self.port = free_port("127.0.0.1")
        # Not under pytest's tmp_path: its parents are private to root, and the server runs as postgres.
        self.dir = Path(tempfile.mkdtemp(prefix="sweepbot-pg-"))
        self.data = self.dir / "data"
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.dir, "postgres", "postgres")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, timeout: float = 60) -> None:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, timeout=timeout, cwd=self.dir)
        if done.returncode != 0:
            raise ServiceUnavailable(f"{' '.join(args[:2])} failed: {done.stderr.decode()[-500:]}")

    def start(self) -> None:
        if not self.data.exists():
            self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.dir / "pg.log"), "-w", "start"
        )
        _wait_port(self.port, 20)

    def stop(self, mode: str = "immediate") -> None:
        """``immediate`` is a crash: no checkpoint, every connection cut."""
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, down_seconds: float = 1.0) -> None:
        self.stop()
        time.sleep(down_seconds)
        self.start()

    def remove(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
