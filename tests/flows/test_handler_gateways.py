"""Every webhook handler names the gateway it needs (``HandlerContext[Session, SomeProtocol]``,
the Protocol of the flows it calls), so mypy checks the handler's body against that Protocol; the
processing flow hands every handler a context holding the real gateway.

mypy checks ``SERVED_BY_THE_REAL_CONTEXT`` (this file is in mypy's ``files``): each handler must
accept ``HandlerContext[Session, GitHubGateway]``, which it does only if ``GitHubGateway`` fits the
handler's Protocol (the context is covariant in its gateway). At run time: that list is every
handler the application composes, and each names its session and gateway types."""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy.orm import Session

from app.adapters.github.gateway import GitHubGateway
from app.core.routing import Event, HandlerContext
from app.flows.commands import comments as commands
from app.flows.commands import heads
from app.flows.ingest.handlers import composed
from app.flows.results import merge_reuse as mergereuse
from app.flows.scheduler import run_tracking as runtracking
from app.flows.scheduler import runner_hook as runnerhook
from app.flows.sweeps import cancel as sweepcancel
from app.flows.tracking import ports as trackports
from app.flows.tracking import watches as tracking

SERVED_BY_THE_REAL_CONTEXT: list[Callable[[HandlerContext[Session, GitHubGateway]], None]] = [
    commands.on_issue_comment_created,
    heads.on_pull_request_head,
    runtracking.on_workflow_job,
    runtracking.on_workflow_run,
    runnerhook.on_gpu_job,
    sweepcancel.on_pull_request_synchronize,
    sweepcancel.on_pull_request_closed,
    tracking.on_pull_request,
    tracking.on_push,
    mergereuse.on_sweep_run_completed,
    mergereuse.on_reuse_comment,
    mergereuse.on_merged,
]


def _composed_handlers() -> set[Any]:
    router = composed()
    return {h for event, action in router.known_events() for h in router.handlers_for(event, action)}


def test_every_composed_handler_is_checked_against_the_real_context() -> None:
    assert set(SERVED_BY_THE_REAL_CONTEXT) == _composed_handlers()


def _context_of(handler: Any) -> tuple[Any, ...]:
    ctx = typing.get_type_hints(handler)["ctx"]
    assert typing.get_origin(ctx) is HandlerContext, f"{handler.__qualname__}: ctx is {ctx!r}"
    return typing.get_args(ctx)


def test_each_handler_names_its_session_and_the_gateway_of_the_flows_it_calls() -> None:
    """A bare ``HandlerContext`` would leave ``ctx.gateway()`` untyped (Any): each names both."""
    assert {h.__qualname__: _context_of(h) for h in SERVED_BY_THE_REAL_CONTEXT} == {
        "on_issue_comment_created": (Session, commands.CommandGateway),
        "on_pull_request_head": (Session, object),  # records the head: needs no GitHub
        "on_workflow_job": (Session, runtracking.TrackingGateway),
        "on_workflow_run": (Session, runtracking.TrackingGateway),
        "on_gpu_job": (Session, runnerhook.ControllerGateway),
        "on_pull_request_synchronize": (Session, sweepcancel.CancelGateway),
        "on_pull_request_closed": (Session, sweepcancel.CancelGateway),
        "on_pull_request": (Session, trackports.TrackingGateway),
        "on_push": (Session, trackports.TrackingGateway),
        "on_sweep_run_completed": (Session, mergereuse.MergeGateway),
        "on_reuse_comment": (Session, mergereuse.MergeGateway),
        "on_merged": (Session, mergereuse.MergeGateway),
    }


def test_a_context_without_a_gateway_factory_refuses_to_make_one() -> None:
    ctx: HandlerContext[None, object] = HandlerContext(session=None, event=_event())
    with pytest.raises(LookupError, match="no gateway factory"):
        ctx.gateway("alice")


def test_the_context_makes_one_gateway_per_actor() -> None:
    made: list[str] = []

    def factory(actor: str) -> object:
        made.append(actor)
        return object()

    ctx: HandlerContext[None, object] = HandlerContext(session=None, event=_event(), gateways=factory)
    assert ctx.gateway() is ctx.gateway("sweepbot")
    assert ctx.gateway("alice") is not ctx.gateway()
    assert made == ["sweepbot", "alice"]


def _event() -> Event:
    return Event(delivery_id="d1", name="push", action=None, payload={})
