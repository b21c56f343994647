"""The sweep flows' gateway Protocols say what each flow uses of GitHub; the real gateway must
offer every one of those methods with parameters the flows can pass (mypy sees only `Any`
factories on the way in, so this checks it)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from app.adapters.github.gateway import GitHubGateway
from app.flows.benchrepo import RepoFiles
from app.flows.dispatch import DispatchGateway
from app.flows.forkapproval import ApprovalGateway
from app.flows.labelruns import LabelGateway
from app.flows.runtracking import TrackingGateway
from app.flows.sweepcancel import CancelGateway
from app.flows.sweeprequest import RequestGateway

PROTOCOLS: list[Any] = [
    RepoFiles,
    DispatchGateway,
    ApprovalGateway,
    LabelGateway,
    TrackingGateway,
    CancelGateway,
    RequestGateway,
]


def _methods(protocol: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for klass in reversed(protocol.__mro__):
        if klass is object or not getattr(klass, "_is_protocol", False):
            continue
        for name, value in vars(klass).items():
            if callable(value) and not name.startswith("_"):
                found[name] = value
    return found


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=[p.__name__ for p in PROTOCOLS])
def test_the_real_gateway_offers_what_each_flow_uses(protocol: Any) -> None:
    methods = _methods(protocol)
    assert methods, f"{protocol.__name__} names no method"
    for name, wanted in methods.items():
        real = getattr(GitHubGateway, name, None)
        assert real is not None, f"GitHubGateway has no {name} ({protocol.__name__} uses it)"
        have = inspect.signature(real).parameters
        takes_any_keyword = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in have.values())
        for param in inspect.signature(wanted).parameters.values():
            if param.kind in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL):
                assert any(p.kind is param.kind for p in have.values()), f"{name}: no {param}"
                continue
            assert param.name in have or takes_any_keyword, f"GitHubGateway.{name} has no {param.name!r}"


def test_each_flow_asks_for_few_methods() -> None:
    """A Protocol per flow, not the whole gateway again: the widest (requesting a sweep) stays small."""
    sizes = {p.__name__: len(_methods(p)) for p in PROTOCOLS}
    assert sizes == {
        "RepoFiles": 3,
        "DispatchGateway": 5,
        "ApprovalGateway": 2,
        "LabelGateway": 3,
        "TrackingGateway": 3,
        "CancelGateway": 1,
        "RequestGateway": 8,
    }
