"""What ``sweepbot up`` and ``sweepbot demo`` check before they start, as pure decisions.

No sockets, files or processes here: the launcher does the probing and hands the facts in; these
functions say what they mean, in the one line the operator sees (and log why).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import structlog

log = structlog.get_logger(__name__)

# Exit status of a start refused for something the operator can fix (a busy port, a second copy).
EXIT_REFUSED = 2


@dataclass(frozen=True)
class PortUse:
    """One port the stack needs: what serves there and which flag moves it."""

    host: str
    port: int
    role: str  # e.g. "the API and dashboard"
    flag: str  # e.g. "--port"


def port_taken_message(use: PortUse) -> str:
    log.debug("port_taken", host=use.host, port=use.port, flag=use.flag)
    return (
        f"port {use.port} on {use.host} ({use.role}) is already in use: stop what listens there, "
        f"or choose another port with {use.flag}"
    )


def duplicate_ports(uses: list[PortUse]) -> str | None:
    """Two roles asked for one port (``--port 8001 --sim-port 8001``): say so before binding."""
    seen: dict[int, PortUse] = {}
    for use in uses:
        if use.port in seen:
            other = seen[use.port]
            return (
                f"{other.flag} and {use.flag} are both {use.port}: {other.role} and {use.role} "
                "need a port each"
            )
        seen[use.port] = use
    return None


@dataclass(frozen=True)
class Holder:
    """What a running instance wrote into its lock file."""

    pid: int | None
    dashboard: str | None
    # The database and broker the instance's processes use (``up`` with the simulator: the world's
    # own under <data dir>/sim/); the CLI run in the same data dir reads these (app.instance).
    database_url: str | None = None
    broker_url: str | None = None


def lock_text(
    pid: int, dashboard: str, database_url: str | None = None, broker_url: str | None = None
) -> str:
    record: dict[str, object] = {"pid": pid, "dashboard": dashboard}
    if database_url:
        record["database_url"] = database_url
    if broker_url:
        record["broker_url"] = broker_url
    return json.dumps(record)


def parse_lock(text: str) -> Holder:
    """The lock file's content; an instance still starting may not have written it yet."""
    try:
        data = json.loads(text)
    except ValueError:
        return Holder(None, None)
    if not isinstance(data, dict):
        return Holder(None, None)
    pid = data.get("pid")

    def text_of(name: str) -> str | None:
        value = data.get(name)
        return value if isinstance(value, str) and value else None

    return Holder(
        pid if isinstance(pid, int) else None,
        text_of("dashboard"),
        text_of("database_url"),
        text_of("broker_url"),
    )


def already_running_message(holder: Holder, data_dir: str) -> str:
    log.debug("already_running", pid=holder.pid, dashboard=holder.dashboard, data_dir=data_dir)
    who = f" (pid {holder.pid})" if holder.pid else ""
    where = f"dashboard at {holder.dashboard}" if holder.dashboard else "still starting"
    return (
        f"sweepbot is already running on the data dir {data_dir}{who}, {where}; "
        "stop it or use --data-dir for a second one"
    )


_BIND_ERROR = re.compile(r"error while attempting to bind on address \(([^)]*)\): (.*)$", re.IGNORECASE)
_ADDRESS_IN_USE = re.compile(r"address already in use", re.IGNORECASE)


def child_failure_line(log_text: str) -> str | None:
    """The line of a child's log that says why it exited: uvicorn's bind error if there is one,
    else the last line that looks like an error (the last line at all as a fallback)."""
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    for line in reversed(lines):
        if _BIND_ERROR.search(line) or _ADDRESS_IN_USE.search(line):
            return line
    for line in reversed(lines):
        if re.search(r"error|exception|refus", line, re.IGNORECASE):
            return line
    return lines[-1] if lines else None


def is_address_in_use(line: str | None) -> bool:
    return bool(line and _ADDRESS_IN_USE.search(line))


def sim_webhook_secrets(configured: list[str], sim_secret: str) -> list[str]:
    """The secrets the bot accepts with the simulator wired in: the operator's, plus the sim's.

    The operator's come first and stay: a real sender configured beside the simulator keeps
    working (the simulator's secret is added, never substituted)."""
    out = [s for s in configured if s]
    if sim_secret not in out:
        out.append(sim_secret)
    return out
