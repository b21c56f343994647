"""GitHub REST operations served by the sim, one handler per operation id.

The table `ROUTES` (sim.api_common) maps (method, path template) to an operation id from the
OpenAPI subset (or a documented GitHub operation id for the few extra endpoints PyGithub needs) and
a handler. Handlers are plain functions of (ctx, path params) returning `Resp`; auth, budget, ETag,
faults and accounting are applied around them in `sim.app`. The handlers live by resource in
sim.api_identity, sim.api_repos, sim.api_hooks, sim.api_pulls and sim.api_actions; importing this
module registers them all.
"""

from __future__ import annotations

from sim import api_actions, api_hooks, api_identity, api_pulls, api_repos, api_runners
from sim.api_common import (
    ROUTES,
    Ctx,
    Handler,
    Identity,
    Resp,
    encode,
    error_body,
    match,
    match_any_method,
    paginate,
    route,
)

RESOURCES = (api_identity, api_repos, api_hooks, api_pulls, api_actions, api_runners)

__all__ = [
    "RESOURCES",
    "ROUTES",
    "Ctx",
    "Handler",
    "Identity",
    "Resp",
    "encode",
    "error_body",
    "match",
    "match_any_method",
    "paginate",
    "route",
]
