"""Start the whole service as one process tree: API, worker and beat (and, without GitHub
credentials, the simulated GitHub), used by ``sweepbot up`` and ``sweepbot demo``.

The children are ordinary ``sweepbot api|worker|beat`` processes (on the embedded SQLite stack
beat is a thread of the worker, ``worker --beat``); this module only builds their
environment, waits for them to be healthy, and stops them (bounded waits) when it stops.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console

from app.instance import instance_text
from app.preflight import (
    EXIT_REFUSED,
    PortUse,
    already_running_message,
    child_failure_line,
    duplicate_ports,
    is_address_in_use,
    lock_text,
    parse_lock,
    port_taken_message,
    sim_webhook_secrets,
)
from app.settings import Settings, get_settings
from sim.scenario import BENCH_REPO, SeedScenario
from sim.server import SimServer
from sim.world import SimSettings

ROOT = Path(__file__).resolve().parent.parent

# Cadences for a stack driven by the simulator: fast enough to watch the story happen.
SIM_CADENCE = {
    "SWEEPBOT_POLL_INTERVAL": "2",
    "SWEEPBOT_SCHEDULER_INTERVAL": "1",
    "SWEEPBOT_JOB_REPAIR_INTERVAL": "5",
    "SWEEPBOT_REAPER_INTERVAL": "3",
    "SWEEPBOT_REAPER_GRACE_SECONDS": "5",
    "SWEEPBOT_REPORT_DEBOUNCE_SECONDS": "1",
    "SWEEPBOT_DELIVERY_LEASE_SECONDS": "30",
    "SWEEPBOT_GITHUB_SECONDS_BETWEEN_REQUESTS": "0",
    "SWEEPBOT_GITHUB_SECONDS_BETWEEN_WRITES": "0",
    "SWEEPBOT_REDELIVERY_INTERVAL": "10",
    "SWEEPBOT_NIGHTLY_WATCH_INTERVAL": "2",
}


@dataclass
class Stack:
    api_url: str
    env: dict[str, str]
    operator_token: str | None = None
    sim: Any = None  # sim.server.SimServer when the simulator is in use
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    log_dir: Path | None = None
    args: dict[str, tuple[str, ...]] = field(default_factory=dict)  # how each child was started
    command: tuple[str, ...] = (sys.executable, "-m", "app")

    @property
    def dashboard_url(self) -> str:
        return self.api_url + "/"

    def start_process(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        assert self.log_dir is not None
        # The child gets its own copy of the descriptor; the parent's is closed right away.
        with open(self.log_dir / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                [*self.command, *args],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs[name] = proc
        self.args[name] = args
        return proc

    def restart(self, name: str) -> subprocess.Popen[bytes]:
        """Start a child that exited again, as it was started."""
        return self.start_process(name, *self.args[name])

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[name]
        if proc.poll() is None:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=15)

    def dead(self) -> list[str]:
        return [name for name, proc in self.procs.items() if proc.poll() is not None]

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        if self.sim is not None:
            self.sim.stop()


def has_credentials(settings: Settings) -> bool:
    return settings.github_token is not None or settings.github_app_id is not None


def _secret(data_dir: Path, name: str) -> str:
    """A random secret kept in the data dir, so restarts keep sessions and webhook signatures valid."""
    path = data_dir / name
    if path.exists():
        return path.read_text().strip()
    value = secrets.token_urlsafe(24)
    # Created owner-only: writing first and chmod-ing after leaves it readable under the umask.
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as fh:
        fh.write(value)
    return value


class StartRefused(RuntimeError):
    """The stack cannot start for a reason the operator can fix; the message says how."""

    exit_code = EXIT_REFUSED


def sim_environment(
    sim: Any, data_dir: Path, api_url: str, configured_secrets: list[str] | None = None
) -> dict[str, str]:
    """Point the bot at the simulator: GitHub API, registries, OAuth, fast cadences.

    The operator's ``SWEEPBOT_WEBHOOK_SECRETS`` are kept; the simulator's secret is added."""
    webhook_secret = _secret(data_dir, "sim-webhook-secret")
    sim.world.settings.webhook_url = api_url + "/webhooks/github"
    sim.world.settings.webhook_secret = webhook_secret
    sim.world.oauth_clients["sweepbot-dashboard"] = "sim-oauth-secret"
    return {
        "SWEEPBOT_GITHUB_API_URL": sim.github_api_url,
        "SWEEPBOT_GITHUB_TOKEN": sim.world.settings.default_token,
        "SWEEPBOT_WEBHOOK_SECRETS": ",".join(sim_webhook_secrets(configured_secrets or [], webhook_secret)),
        "SWEEPBOT_REGISTRY_URLS": (
            f"docker.io={sim.url}/hub,ghcr.io={sim.url},registry-1.docker.io={sim.url}/hub"
        ),
        "SWEEPBOT_OAUTH_CLIENT_ID": "sweepbot-dashboard",
        "SWEEPBOT_OAUTH_CLIENT_SECRET": "sim-oauth-secret",
        "SWEEPBOT_OAUTH_BASE_URL": sim.url,
        "SWEEPBOT_OAUTH_ALLOWED_ORG": "SemiAnalysisAI",
        # GitHub never retries a failed delivery, and neither does the simulator: the bot asks the
        # benchmark repo's webhook (the one the simulator sends from) for what it missed.
        "SWEEPBOT_REDELIVERY_HOOKS": f"{BENCH_REPO}:{sim.world.hook_id}",
        **SIM_CADENCE,
    }


def port_is_free(host: str, port: int) -> bool:
    """Whether a server could bind ``host:port`` now (with SO_REUSEADDR, as uvicorn binds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def check_ports(uses: list[PortUse]) -> None:
    """Refuse to start, in one line, when a port the stack needs is taken."""
    clash = duplicate_ports(uses)
    if clash:
        raise StartRefused(clash)
    for use in uses:
        if not port_is_free(use.host, use.port):
            raise StartRefused(port_taken_message(use))


@contextmanager
def instance_lock(data_dir: Path, name: str, dashboard: str) -> Iterator[Callable[[Settings], None]]:
    """Hold ``<data dir>/<name>.lock`` while running: a second ``up`` (or ``demo``) on the same
    data dir is refused with where the first one's dashboard is. The kernel drops the lock when
    the process dies, so a crash never leaves a stale one. Yields ``record(settings)``, which
    writes the database and broker the instance uses into the lock (the CLI reads them:
    app.instance)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / f"{name}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = parse_lock(os.pread(fd, 4096, 0).decode(errors="replace"))
            raise StartRefused(already_running_message(holder, str(data_dir))) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, lock_text(os.getpid(), dashboard).encode(), 0)

        def record(settings: Settings) -> None:
            text = instance_text(os.getpid(), dashboard, settings.database_url, settings.broker_url)
            os.ftruncate(fd, 0)
            os.pwrite(fd, text.encode(), 0)

        yield record
    finally:
        os.close(fd)  # closing releases the lock


def _child_exited(stack: Stack, name: str) -> RuntimeError:
    """Why a child exited, from its log: printed, not only left in the file."""
    assert stack.log_dir is not None
    path = stack.log_dir / f"{name}.log"
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, path.stat().st_size - 64 * 1024))
            line = child_failure_line(fh.read().decode(errors="replace"))
    except OSError:
        line = None
    if is_address_in_use(line) and name == "api":
        return StartRefused(f"the API could not bind its port ({line}): choose another with --port")
    return RuntimeError(f"the {name} process exited: {line or 'no output'} (log: {path})")


def wait_healthy(url: str, stack: Stack, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if "api" in stack.dead():
            raise _child_exited(stack, "api")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the API at {url} did not become healthy within {timeout:.0f}s")


@contextmanager
def stack(
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    sim: Any = None,
    extra_env: dict[str, str] | None = None,
    worker_args: tuple[str, ...] = (),
    settings: Settings | None = None,
) -> Iterator[Stack]:
    """API, worker and beat as child processes (beat inside the worker on the embedded SQLite
    stack); ``sim`` (a started SimServer) wires in the simulator."""
    settings = settings or get_settings()
    data_dir = Path(settings.data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    log_dir = data_dir / "logs"
    log_dir.mkdir(exist_ok=True)
    api_url = f"http://{host}:{port}"
    env = {k: v for k, v in os.environ.items()}
    env.update(
        {
            "SWEEPBOT_DATA_DIR": str(data_dir),
            "SWEEPBOT_DATABASE_URL": settings.database_url,
            "SWEEPBOT_BROKER_URL": settings.broker_url,
            "PYTHONPATH": str(ROOT),
        }
    )
    operator_token = None
    if sim is not None:
        configured = [secret.get_secret_value() for secret in settings.webhook_secrets]
        env.update(sim_environment(sim, data_dir, api_url, configured))
    if not settings.operator_tokens and "SWEEPBOT_OPERATOR_TOKENS" not in (extra_env or {}):
        operator_token = _secret(data_dir, "operator-token")
        env["SWEEPBOT_OPERATOR_TOKENS"] = operator_token
    if settings.session_secret is None:
        env["SWEEPBOT_SESSION_SECRET"] = _secret(data_dir, "session-secret")
    env.update(extra_env or {})
    # Migrations run in a child process: alembic and SQLAlchemy (~20 MB) then never load into this
    # long-lived parent (bench/memory.py, docs/benchmarks.md "Memory").
    migrate = subprocess.run(
        [sys.executable, "-m", "app", "db", "upgrade"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if migrate.returncode != 0:
        raise RuntimeError(f"database migrations failed: {(migrate.stderr or migrate.stdout).strip()[-800:]}")
    running = Stack(api_url=api_url, env=env, operator_token=operator_token, sim=sim, log_dir=log_dir)
    try:
        running.start_process("api", "api", "--host", host, "--port", str(port), "--no-migrate")
        if settings.is_embedded:
            # One node, one worker: beat runs as a thread of it, not as a 4th process (~80 MB RSS,
            # bench/memory.py). With PostgreSQL and Redis more workers may join the same broker,
            # and beat stays a process of its own, as in production (exactly one beat).
            running.start_process("worker", "worker", "--beat", *worker_args)
        else:
            running.start_process("worker", "worker", *worker_args)
            running.start_process("beat", "beat")
        wait_healthy(api_url, running)
        yield running
    finally:
        running.stop()


def sim_world_settings(settings: Settings) -> Settings:
    """``up`` with the simulator: the database is bound to the simulated world.

    Every start seeds a new world, so every start gets a new embedded database (and broker) under
    ``<data dir>/sim/``: the database never points at comments the world never had, and the seed
    deliveries never pile up. A database of a real deployment in the same data dir is untouched.
    An operator's explicit ``SWEEPBOT_DATABASE_URL`` cannot be bound to a throw-away world, so it is
    refused with the fix rather than silently mixed with simulated data."""
    if os.environ.get("SWEEPBOT_DATABASE_URL"):
        raise StartRefused(
            "no GitHub credentials are set, so `up` runs a fresh simulated GitHub with its own "
            "database under <data dir>/sim/, but SWEEPBOT_DATABASE_URL is set: unset it to use the "
            "simulator, or set SWEEPBOT_GITHUB_TOKEN (or a GitHub App) to use that database"
        )
    data_dir = Path(settings.data_dir).resolve()
    world_dir = data_dir / "sim"
    shutil.rmtree(world_dir, ignore_errors=True)
    world_dir.mkdir(parents=True)
    broker = settings.broker_url
    if not os.environ.get("SWEEPBOT_BROKER_URL"):
        broker = f"sqla+sqlite:///{world_dir / 'broker.sqlite3'}"
    return settings.model_copy(
        update={"database_url": f"sqlite:///{world_dir / 'sweepbot.sqlite3'}", "broker_url": broker}
    )


def run_stack(*, host: str, port: int, sim_port: int, console: Console) -> int:
    """``sweepbot up``: run until interrupted or until a child process dies.

    Refusals the operator can fix (a second instance on this data dir, a busy port) are one line
    on stderr and exit status 2; nothing is started then."""
    err = Console(stderr=True)
    settings = get_settings()
    data_dir = Path(settings.data_dir).resolve()
    use_sim = not has_credentials(settings)
    sim: Any = None
    stop = {"now": False}

    def _stop(*_: object) -> None:
        stop["now"] = True

    try:
        with instance_lock(data_dir, "up", f"http://{host}:{port}/") as record:
            ports = [PortUse(host, port, "the API and dashboard", "--port")]
            if use_sim:
                ports.append(PortUse(host, sim_port, "the simulated GitHub", "--sim-port"))
            check_ports(ports)
            signal.signal(signal.SIGINT, _stop)
            signal.signal(signal.SIGTERM, _stop)
            if use_sim:
                settings = sim_world_settings(settings)
                sim = SimServer(settings=SimSettings(time_scale=0.01), host=host, port=sim_port).start()
            record(settings)
            with stack(host=host, port=port, sim=sim, settings=settings) as running:
                if sim is not None:
                    # Loaded once the bot listens, so it hears the recipe PR being opened.
                    SeedScenario(sim.world).load()
                _print_up(console, running, sim, settings)
                return supervise(running, lambda: stop["now"], err)
    except StartRefused as exc:
        err.print(str(exc), markup=False, highlight=False, soft_wrap=True)
        return exc.exit_code
    except RuntimeError as exc:
        err.print(str(exc), markup=False, highlight=False, soft_wrap=True)
        return 1
    finally:
        if sim is not None:
            sim.stop()
    return 0


# A worker or beat that exits is started again this many times (a crash at start, a lost broker
# connection); the API, or one more exit, stops everything: either way the operator is told.
MAX_RESTARTS = 3


def supervise(running: Stack, stopping: Callable[[], bool], err: Console, poll: float = 0.5) -> int:
    """Watch the children until ``stopping()``: a dead worker or beat is restarted (said, with
    why it exited), up to MAX_RESTARTS times each; a dead API, or a child past its restarts, stops
    the stack (said). 0 when stopped on request, 1 when a child's death stopped it."""
    restarts = dict.fromkeys(running.procs, 0)
    while not stopping():
        for name in running.dead():
            why = _child_exited(running, name)
            if name != "api" and restarts.get(name, 0) < MAX_RESTARTS:
                restarts[name] = restarts.get(name, 0) + 1
                err.print(
                    f"{why}; restarting it ({restarts[name]}/{MAX_RESTARTS})", markup=False, highlight=False
                )
                running.restart(name)
                continue
            err.print(f"{why}; stopping everything", markup=False, highlight=False, soft_wrap=True)
            return 1
        time.sleep(poll)
    return 0


def _print_up(console: Console, running: Stack, sim: Any, settings: Settings) -> None:
    where = "simulated GitHub" if sim else settings.github_api_url
    console.print(f"[bold green]sweepbot is up[/bold green] ({where})")
    lines = [
        f"  dashboard        {running.dashboard_url}",
        f"  webhooks         {running.api_url}/webhooks/github",
        f"  API docs         {running.api_url}/docs",
        f"  metrics          {running.api_url}/metrics",
    ]
    if running.operator_token:
        lines.append(f"  operator token   {running.operator_token}  (sign in on the dashboard to act)")
    if sim is not None:
        lines.append(f"  simulated GitHub {sim.url}  (a new seed world, with its own database, each start)")
        lines.append("  to play the story: stop this, then `make demo`")
    lines.append(f"  logs             {running.log_dir}")
    lines.append("Ctrl-C stops everything.")
    for line in lines:
        # soft_wrap: a long token or URL is never broken by an inserted newline (copy-paste safe)
        console.print(line, markup=False, highlight=False, soft_wrap=True)
