"""Start the whole service as one process tree: API, worker and beat (and, without GitHub
credentials, the simulated GitHub), used by ``sweepbot up`` and ``sweepbot demo``.

The children are ordinary ``sweepbot api|worker|beat`` processes; this module only builds their
environment, waits for them to be healthy, and stops them (bounded waits) when it stops.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console

from app.settings import Settings, get_settings

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
}


@dataclass
class Stack:
    api_url: str
    env: dict[str, str]
    operator_token: str | None = None
    sim: Any = None  # sim.server.SimServer when the simulator is in use
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    log_dir: Path | None = None

    @property
    def dashboard_url(self) -> str:
        return self.api_url + "/"

    def start_process(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        assert self.log_dir is not None
        # The child gets its own copy of the descriptor; the parent's is closed right away.
        with open(self.log_dir / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "app", *args],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs[name] = proc
        return proc

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


def sim_environment(sim: Any, data_dir: Path, api_url: str) -> dict[str, str]:
    """Point the bot at the simulator: GitHub API, registries, OAuth, fast cadences."""
    webhook_secret = _secret(data_dir, "sim-webhook-secret")
    sim.world.settings.webhook_url = api_url + "/webhooks/github"
    sim.world.settings.webhook_secret = webhook_secret
    sim.world.oauth_clients["sweepbot-dashboard"] = "sim-oauth-secret"
    return {
        "SWEEPBOT_GITHUB_API_URL": sim.github_api_url,
        "SWEEPBOT_GITHUB_TOKEN": sim.world.settings.default_token,
        "SWEEPBOT_WEBHOOK_SECRETS": webhook_secret,
        "SWEEPBOT_REGISTRY_URLS": (
            f"docker.io={sim.url}/hub,ghcr.io={sim.url},registry-1.docker.io={sim.url}/hub"
        ),
        "SWEEPBOT_OAUTH_CLIENT_ID": "sweepbot-dashboard",
        "SWEEPBOT_OAUTH_CLIENT_SECRET": "sim-oauth-secret",
        "SWEEPBOT_OAUTH_BASE_URL": sim.url,
        "SWEEPBOT_OAUTH_ALLOWED_ORG": "SemiAnalysisAI",
        **SIM_CADENCE,
    }


def wait_healthy(url: str, stack: Stack, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if "api" in stack.dead():
            raise RuntimeError(f"the API process exited; see {stack.log_dir}/api.log")
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
    """API + worker + beat as child processes; ``sim`` (a started SimServer) wires in the simulator."""
    from app.migrate import upgrade

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
        env.update(sim_environment(sim, data_dir, api_url))
    if not settings.operator_tokens and "SWEEPBOT_OPERATOR_TOKENS" not in (extra_env or {}):
        operator_token = _secret(data_dir, "operator-token")
        env["SWEEPBOT_OPERATOR_TOKENS"] = operator_token
    if settings.session_secret is None:
        env["SWEEPBOT_SESSION_SECRET"] = _secret(data_dir, "session-secret")
    env.update(extra_env or {})
    upgrade(env["SWEEPBOT_DATABASE_URL"])
    running = Stack(api_url=api_url, env=env, operator_token=operator_token, sim=sim, log_dir=log_dir)
    try:
        running.start_process("api", "api", "--host", host, "--port", str(port), "--no-migrate")
        running.start_process("worker", "worker", *worker_args)
        running.start_process("beat", "beat")
        wait_healthy(api_url, running)
        yield running
    finally:
        running.stop()


def run_stack(*, host: str, port: int, sim_port: int, console: Console) -> int:
    """``sweepbot up``: run until interrupted or until a child process dies."""
    settings = get_settings()
    sim = None
    if not has_credentials(settings):
        from sim.server import SimServer
        from sim.world import SimSettings

        sim = SimServer(settings=SimSettings(time_scale=0.01), host=host, port=sim_port).start()
    stop = {"now": False}

    def _stop(*_: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    try:
        with stack(host=host, port=port, sim=sim) as running:
            if sim is not None:
                from sim.scenario import SeedScenario

                # Loaded once the bot listens, so it hears the recipe PR being opened.
                SeedScenario(sim.world).load()
            console.print(
                "[bold green]sweepbot is up[/bold green] "
                f"({'simulated GitHub' if sim else settings.github_api_url})"
            )
            console.print(f"  dashboard      {running.dashboard_url}")
            console.print(f"  webhooks       {running.api_url}/webhooks/github")
            console.print(f"  API docs       {running.api_url}/docs")
            console.print(f"  metrics        {running.api_url}/metrics")
            if running.operator_token:
                console.print(f"  operator token {running.operator_token}  (sign in on the dashboard to act)")
            if sim is not None:
                console.print(
                    f"  simulated GitHub {sim.url}  (seed world loaded; to play the story: stop this, "
                    "then `make demo`)"
                )
            console.print(f"  logs           {running.log_dir}")
            console.print("Ctrl-C stops everything.")
            while not stop["now"]:
                dead = running.dead()
                if dead:
                    console.print(f"[red]{', '.join(dead)} exited[/red]; see the logs in {running.log_dir}")
                    return 1
                time.sleep(0.5)
    except RuntimeError as exc:
        console.print(f"[red]{exc}[/red]")
        if sim is not None:
            sim.stop()
        return 1
    return 0
