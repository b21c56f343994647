"""The flows' gateway Protocols say what each flow uses of GitHub; the real gateway must offer
every one of those methods with parameters the flows can pass.

Twice: mypy checks ``_the_real_gateway_is_each`` (this file is in mypy's ``files``): the real
gateway must fit each Protocol, names, parameters and results; and at run time each Protocol's
methods are looked up on ``GitHubGateway`` by name and parameter names (what mypy cannot see when a
flow is handed an untyped factory's gateway)."""

from __future__ import annotations

import inspect
from typing import Any, get_args, get_type_hints

import pytest

from app.adapters.github.gateway import GitHubGateway
from app.adapters.permissions import PermissionGateway
from app.flows.commands.comments import CommandGateway
from app.flows.commands.github_status import ConditionalGateway
from app.flows.ingest.redelivery import DeliveryGateway, RedeliverGateway
from app.flows.nightly.canary import (
    BranchDropper,
    BranchReader,
    CanaryBranchWriter,
    CanaryGateway,
    KeyGateway,
    LaunchGateway,
    ScriptReader,
)
from app.flows.nightly.issue import IssueGateway, NoteGateway, RangeGateway
from app.flows.nightly.watch import NightlyGateway
from app.flows.repo.bench_repo import RepoFiles
from app.flows.repo.bot_config import ConfigReader
from app.flows.repo.changelog_mode import ChangelogGateway
from app.flows.results.collect import ArtifactGateway
from app.flows.results.reports import CommentGateway
from app.flows.scheduler.dispatch import DispatchGateway
from app.flows.scheduler.repair import RepairGateway
from app.flows.scheduler.run_poll import PollGateway, RunListing
from app.flows.scheduler.run_tracking import TrackingGateway
from app.flows.scheduler.tick import TickGateway
from app.flows.sweeps.cancel import CancelGateway
from app.flows.sweeps.fork_approval import ApprovalGateway
from app.flows.sweeps.label_runs import LabelGateway
from app.flows.sweeps.request import RequestGateway
from app.flows.tracking import ports as trackports


def _the_real_gateway_is_each(
    gw: GitHubGateway,
) -> tuple[
    RepoFiles,
    DispatchGateway,
    ApprovalGateway,
    LabelGateway,
    TrackingGateway,
    CancelGateway,
    RequestGateway,
    PermissionGateway,
    BranchReader,
    KeyGateway,
    BranchDropper,
    CanaryBranchWriter,
    ScriptReader,
    LaunchGateway,
    CanaryGateway,
    RangeGateway,
    NoteGateway,
    IssueGateway,
    NightlyGateway,
    RedeliverGateway,
    DeliveryGateway,
    RunListing,
    ConfigReader,
    ChangelogGateway,
    ArtifactGateway,
    ConditionalGateway,
    CommentGateway,
    CommandGateway,
    trackports.TrackingGateway,
    TickGateway,
    PollGateway,
    RepairGateway,
]:
    """Never called: mypy checks that ``gw`` fits each Protocol of the annotation, one by one."""
    return (
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
        gw,
    )


PROTOCOLS: list[Any] = list(get_args(get_type_hints(_the_real_gateway_is_each)["return"]))


def test_each_protocol_is_checked_once() -> None:
    assert len(PROTOCOLS) == len(set(PROTOCOLS)) == 32


def _methods(protocol: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for klass in reversed(protocol.__mro__):
        if klass is object or not getattr(klass, "_is_protocol", False):
            continue
        for name, value in vars(klass).items():
            if callable(value) and not name.startswith("_"):
                found[name] = value
    return found


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=[f"{p.__module__}.{p.__name__}" for p in PROTOCOLS])
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
    """A Protocol per flow, not the whole gateway again: the widest of a sweep flow (requesting a
    sweep) and of the nightly watch (a whole pass over a key) stay small."""
    unions = (trackports.TrackingGateway, CommandGateway)  # what a watch's or a command's handling may touch
    sizes = {p.__name__: len(_methods(p)) for p in PROTOCOLS if p not in unions}
    assert sizes == {
        "RepoFiles": 3,
        "DispatchGateway": 5,
        "ApprovalGateway": 2,
        "LabelGateway": 3,
        "TrackingGateway": 3,
        "CancelGateway": 1,
        "RequestGateway": 8,
        "PermissionGateway": 1,
        "BranchReader": 1,
        "KeyGateway": 4,
        "BranchDropper": 2,
        "CanaryBranchWriter": 6,
        "ScriptReader": 1,
        "LaunchGateway": 8,
        "CanaryGateway": 11,
        "RangeGateway": 2,
        "NoteGateway": 1,
        "IssueGateway": 3,
        "NightlyGateway": 16,
        "RedeliverGateway": 1,
        "DeliveryGateway": 2,
        "RunListing": 1,
        "ConfigReader": 2,
        "ChangelogGateway": 3,
        "ArtifactGateway": 2,
        "ConditionalGateway": 1,
        "CommentGateway": 2,
        "TickGateway": 9,
        "PollGateway": 5,
        "RepairGateway": 8,
    }
