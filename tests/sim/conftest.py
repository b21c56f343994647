"""Fixtures for the simulator's tests: a running sim with the seed scenario loaded."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from github import Auth, Github

from sim.scenario import SeedScenario
from sim.server import SimServer
from sim.world import SimSettings

# The repo CLI's test-config for the seed master file (docs/workflows-README.md grammar)
TEST_CONFIG = "test-config --config-files .github/configs/amd-master.yaml --config-keys"

FAST = 0.0002  # real seconds per simulated second: a conc-512 job takes ~0.25 s


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(settings=SimSettings(time_scale=FAST, seed=7)) as server:
        yield server


@pytest.fixture
def seeded(sim: SimServer) -> SimServer:
    SeedScenario(sim.world).load()
    return sim


@pytest.fixture
def gh(sim: SimServer) -> Github:
    # retry=None: the sim's injected faults must reach the test, not PyGithub's retry loop
    return client(sim, "sim-token")


def client(sim: SimServer, token: str) -> Github:
    # PyGithub throttles to 4 requests/s and 1 write/s by default; the sim needs no politeness
    return Github(
        auth=Auth.Token(token),
        base_url=sim.github_api_url,
        retry=None,
        seconds_between_requests=0,
        seconds_between_writes=0,
    )


def gh_as(sim: SimServer, login: str) -> Github:
    return client(sim, f"token-{login}")
