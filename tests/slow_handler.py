"""A test-only handler module (loaded through SWEEPBOT_EXTRA_HANDLER_MODULES).

Event ``sweepbot_test``: sleeps ``payload.sleep`` seconds on its first attempt (so a test can kill
the worker mid-task), then appends one line to ``payload.effects`` — the observable effect whose
count proves "processed exactly once in effect".
"""

from __future__ import annotations

import time
from pathlib import Path

from app.core.routing import HandlerContext, Router, TransientError

router = Router()  # composed next to the built-in handlers (app/flows/ingest/handlers.py)


@router.register("sweepbot_test")
def slow_effect(ctx: HandlerContext) -> None:
    payload = ctx.event.payload
    marker = Path(payload["effects"] + ".started")
    if not marker.exists():
        marker.write_text("started")
        time.sleep(float(payload.get("sleep", 0)))
    with open(payload["effects"], "a") as fh:
        fh.write(ctx.event.delivery_id + "\n")


@router.register("sweepbot_flaky")
def flaky_effect(ctx: HandlerContext) -> None:
    """Fails transiently ``payload.failures`` times (GitHub 5xx, say), then has its effect once.
    ``retry_after``, ``exponential``, ``rate_limited``: the hint the error carries (default: a
    plain 5xx, retry at once)."""
    payload = ctx.event.payload
    counter = Path(payload["effects"] + ".tries")
    tries = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(tries + 1))
    if tries < int(payload["failures"]):
        raise TransientError(
            "GitHub answered 502",
            retry_after=float(payload.get("retry_after", 0)),
            exponential=bool(payload.get("exponential", False)),
            rate_limited=bool(payload.get("rate_limited", False)),
        )
    with open(payload["effects"], "a") as fh:
        fh.write(ctx.event.delivery_id + "\n")


@router.register("sweepbot_dbrace")
def racing_insert(ctx: HandlerContext) -> None:
    """Loses a race for a unique row ``payload.failures`` times (another worker inserted it first),
    then has its effect once: the database error must be retried, not recorded as ``failed``."""
    from sqlalchemy.exc import IntegrityError

    payload = ctx.event.payload
    counter = Path(payload["effects"] + ".tries")
    tries = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(tries + 1))
    if tries < int(payload["failures"]):
        raise IntegrityError("INSERT INTO watches ...", {}, Exception("UNIQUE constraint failed"))
    with open(payload["effects"], "a") as fh:
        fh.write(ctx.event.delivery_id + "\n")


@router.register("sweepbot_gate")
def gated_effect(ctx: HandlerContext) -> None:
    """The first attempt waits (up to 20 s) for ``payload.gate`` to exist; later attempts run at once."""
    import time as _time

    payload = ctx.event.payload
    marker = Path(payload["effects"] + ".first")
    if not marker.exists():
        marker.write_text("first")
        deadline = _time.monotonic() + 20
        while not Path(payload["gate"]).exists() and _time.monotonic() < deadline:
            _time.sleep(0.05)
    with open(payload["effects"], "a") as fh:
        fh.write(ctx.event.delivery_id + "\n")


@router.register("sweepbot_gates")
def per_attempt_gate(ctx: HandlerContext) -> None:
    """Attempt N marks ``<effects>.started.N`` and waits (up to 20 s) for ``<gate>.N`` to exist, so a
    test can let an older attempt finish while a newer one still holds the delivery."""
    import time as _time

    payload = ctx.event.payload
    counter = Path(payload["effects"] + ".attempts")
    attempt = (int(counter.read_text()) if counter.exists() else 0) + 1
    counter.write_text(str(attempt))
    Path(f"{payload['effects']}.started.{attempt}").write_text("started")
    deadline = _time.monotonic() + 20
    while not Path(f"{payload['gate']}.{attempt}").exists() and _time.monotonic() < deadline:
        _time.sleep(0.05)
    with open(payload["effects"], "a") as fh:
        fh.write(f"{ctx.event.delivery_id} attempt {attempt}\n")
