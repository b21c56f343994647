"""Which database the CLI reads: the one of the instance running in the same data dir.

``sweepbot up`` holds ``<data dir>/up.lock`` (an flock the kernel drops when the process dies) and
writes into it the database and broker URLs its processes use. With the simulator those are the
world's own, under ``<data dir>/sim/``, not the data dir's default ``sweepbot.sqlite3``: a CLI
reading the default would show another world than the dashboard (or advise ``db upgrade`` on a
file nobody uses). So the operating commands (``deliveries``, ``deps status``, ``queue``,
``sweep``, ``report``, ``db current``) resolve the URLs here first; an explicit
``SWEEPBOT_DATABASE_URL`` always wins, and with no instance running the defaults stand.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from urllib.parse import urlsplit

from app.preflight import Holder, lock_text, parse_lock

# The lock files of the launchers that serve a data dir's dashboard (devstack.launcher.instance_lock).
UP_LOCK = "up.lock"

# The commands that are (or start) an instance of their own: they never adopt another's database.
OWN_INSTANCE_COMMANDS = frozenset({"up", "api", "worker", "beat", "demo", "sim"})


def recordable(url: str) -> str | None:
    """``url`` if it may be written into the lock file: never one carrying a password (the
    operator's environment has it already, and a secret is not left in a file)."""
    try:
        if urlsplit(url).password:
            return None
    except ValueError:
        return None
    return url


def instance_text(pid: int, dashboard: str, database_url: str, broker_url: str) -> str:
    """What ``up`` writes into its lock once it knows which database its processes use."""
    return lock_text(pid, dashboard, recordable(database_url), recordable(broker_url))


def running_instance(data_dir: Path, lock_name: str = UP_LOCK) -> Holder | None:
    """The instance holding ``data_dir``'s lock now, or None when none runs there.

    A lock file left behind by a stopped instance is not held (the kernel released it), so it
    never redirects the CLI: the probe takes a shared lock without waiting and, when it gets one,
    drops it at once and answers None."""
    path = data_dir / lock_name
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return parse_lock(os.pread(fd, 4096, 0).decode(errors="replace"))
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def adopt_running_instance(environ: MutableMapping[str, str], command: str | None) -> Holder | None:
    """Point this process's settings at the database (and broker) of the instance running in its
    data dir, unless the command runs an instance of its own or the URL was set explicitly.

    Returns the instance adopted (None: the settings' defaults stand)."""
    if command is None or command in OWN_INSTANCE_COMMANDS or environ.get("SWEEPBOT_DATABASE_URL"):
        return None
    holder = running_instance(data_dir_of(environ))
    if holder is None or holder.database_url is None:
        return None
    environ["SWEEPBOT_DATABASE_URL"] = holder.database_url
    if holder.broker_url and not environ.get("SWEEPBOT_BROKER_URL"):
        environ["SWEEPBOT_BROKER_URL"] = holder.broker_url
    return holder


def data_dir_of(environ: Mapping[str, str]) -> Path:
    """The data dir the settings will use (``SWEEPBOT_DATA_DIR``, default ``./.sweepbot``)."""
    return Path(environ.get("SWEEPBOT_DATA_DIR") or "./.sweepbot").resolve()
