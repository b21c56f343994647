"""A test-only handler module (loaded through SWEEPBOT_EXTRA_HANDLER_MODULES).

Event ``sweepbot_test``: sleeps ``payload.sleep`` seconds on its first attempt (so a test can kill
the worker mid-task), then appends one line to ``payload.effects`` — the observable effect whose
count proves "processed exactly once in effect".
"""

from __future__ import annotations

import time
from pathlib import Path

from app.routing import HandlerContext, router


@router.register("sweepbot_test")
def slow_effect(ctx: HandlerContext) -> None:
    payload = ctx.event.payload
    marker = Path(payload["effects"] + ".started")
    if not marker.exists():
        marker.write_text("started")
        time.sleep(float(payload.get("sleep", 0)))
    with open(payload["effects"], "a") as fh:
        fh.write(ctx.event.delivery_id + "\n")
