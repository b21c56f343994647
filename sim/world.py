"""The simulated GitHub + registry + runners: `World`, the state (sim.world_state) with its listeners.

The world emits an `Event` for everything GitHub sends a webhook for; its listeners are, in order,
the webhook renderer (sim.hookrender: event -> payload -> a delivery in the outbox) and the repo's
run-sweep.yml (sim.world_sweeps: a `pull_request` event may start a sweep run).

The objects (`Job`, `Run`, `SimError`, ...) are defined in sim.models and importable from here.
"""

from __future__ import annotations

from sim.hookrender import HookRenderer
from sim.models import (
    EPOCH,
    PERMISSIONS,
    REACTIONS,
    App,
    Artifact,
    Budget,
    Comment,
    Delivery,
    Event,
    Faults,
    ImageRepo,
    Installation,
    Issue,
    Job,
    Pull,
    Reaction,
    Repo,
    Run,
    Runner,
    SimError,
    SimSettings,
    Tag,
    TokenInfo,
    User,
    Workflow,
    iso,
)
from sim.world_state import WorldState

__all__ = [
    "EPOCH",
    "PERMISSIONS",
    "REACTIONS",
    "App",
    "Artifact",
    "Budget",
    "Comment",
    "Delivery",
    "Event",
    "Faults",
    "ImageRepo",
    "Installation",
    "Issue",
    "Job",
    "Pull",
    "Reaction",
    "Repo",
    "Run",
    "Runner",
    "SimError",
    "SimSettings",
    "Tag",
    "TokenInfo",
    "User",
    "Workflow",
    "World",
    "iso",
]


class World(WorldState):
    def __init__(self, settings: SimSettings | None = None) -> None:
        super().__init__(settings)
        self.listeners += [HookRenderer(self), self.run_sweep_on]
        self.add_user(self.settings.default_token_user, type="Bot")
        self.add_token(self.settings.default_token, login=self.settings.default_token_user)
