"""Every resource of the world together: the chain of resource modules, each adding one area.

    WorldBase (tables, ids, clocks, listeners) -> Hooks (deliveries) -> Identity (users, tokens,
    apps, roles) -> GitData (repos, git) -> Registry (images, regressions) -> Fleet (runners,
    job outcomes) -> Actions (workflows, dispatch, runs) -> Issues (issues, comments, reactions)
    -> Pulls (pull requests) -> Sweeps (run-sweep.yml) -> WorldState

The renderers (sim.render*, sim.hookrender) read a WorldState; `sim.world.World` is a WorldState
with its listeners attached (the webhook renderer, run-sweep.yml's trigger).
"""

from __future__ import annotations

from sim.world_sweeps import Sweeps


class WorldState(Sweeps):
    """The whole simulated GitHub + registry + runners state, without listeners."""
