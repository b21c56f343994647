"""The application's webhook handlers: every capability's router, composed.

Each capability keeps a ``router`` of its own handlers (``app.core.routing.Router``); this is the
one place that knows which capabilities there are. ``SWEEPBOT_EXTRA_HANDLER_MODULES`` names more
modules with a ``router`` (tests, plug-ins), added after the built-in ones.
"""

from __future__ import annotations

import importlib
from functools import lru_cache

from app.core.routing import Router
from app.flows.commands import comments as commands
from app.flows.commands import heads
from app.flows.results import merge_reuse as mergereuse
from app.flows.scheduler import run_tracking as runtracking
from app.flows.scheduler import runner_hook as runnerhook
from app.flows.sweeps import cancel as sweepcancel
from app.flows.tracking import watches as tracking

CAPABILITIES: tuple[Router, ...] = (
    tracking.router,
    runtracking.router,
    sweepcancel.router,
    commands.router,
    heads.router,
    runnerhook.router,
    mergereuse.router,
)


@lru_cache(maxsize=8)
def composed(extra_modules: tuple[str, ...] = ()) -> Router:
    """Every built-in capability's handlers, then those of ``extra_modules`` (each a module name
    whose ``router`` attribute is a ``Router``)."""
    extra = []
    for name in extra_modules:
        router = getattr(importlib.import_module(name), "router", None)
        if not isinstance(router, Router):
            raise TypeError(f"handler module {name!r} has no `router = Router()`")
        extra.append(router)
    return Router.compose((*CAPABILITIES, *extra))
