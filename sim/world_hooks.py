"""Webhook deliveries: the outbox the engine sends from, redelivery, and the hook-deliveries listing."""

from __future__ import annotations

import uuid
from typing import Any

from sim.models import Delivery, SimError
from sim.world_base import WorldBase


class Hooks(WorldBase):
    def record_delivery(self, event: str, payload: dict[str, Any]) -> None:
        """A rendered webhook joins the outbox (or is dropped, as a receiver that is down loses it)."""
        d = Delivery(self.next_id(), str(uuid.uuid4()), event, payload.get("action"), payload, self.now())
        d.installation_id = (payload.get("installation") or {}).get("id")
        d.repository_id = (payload.get("repository") or {}).get("id")
        if self.drop_next_deliveries > 0:
            self.drop_next_deliveries -= 1
            d.status = "dropped"
        elif not self.settings.webhook_url:
            d.status = "no-url"
        self.deliveries.append(d)
        if d.status == "pending" and self.duplicate_deliveries:
            dup = Delivery(self.next_id(), d.guid, event, d.action, payload, self.now(), duplicate_of=d.guid)
            self.deliveries.append(dup)
        self._wake()

    def redeliver(self, guid: str) -> Delivery:
        with self.lock:
            orig = next((d for d in self.deliveries if d.guid == guid), None)
            if orig is None:
                raise SimError(404, f"delivery {guid} not found")
            return self._redeliver(orig)

    def redeliver_id(self, delivery_id: int) -> Delivery:
        """``POST .../deliveries/{delivery_id}/attempts``: send that delivery again (same GUID)."""
        with self.lock:
            orig = next((d for d in self.deliveries if d.id == delivery_id), None)
            if orig is None or orig.status in ("no-url", "pending", "sending"):
                raise SimError(404, "Not Found")
            return self._redeliver(orig)

    def hook_deliveries(self, repo: str | None = None, app: bool = False) -> list[Delivery]:
        """Deliveries GitHub attempted, newest first: an App's (those with an installation), or
        one repository's webhook's. A dropped delivery is a failed attempt (the receiver was down)."""
        with self.lock:
            out = []
            for d in self.deliveries:
                if d.status in ("no-url", "pending", "sending") or d.duplicate_of:
                    continue
                if app and d.installation_id is None:
                    continue
                if repo is not None and (d.payload.get("repository") or {}).get("full_name") != repo:
                    continue
                out.append(d)
            return sorted(out, key=lambda d: -d.id)

    def _redeliver(self, orig: Delivery) -> Delivery:
        with self.lock:
            d = Delivery(
                self.next_id(), orig.guid, orig.event, orig.action, orig.payload, self.now(), redelivery=True
            )
            d.installation_id, d.repository_id = orig.installation_id, orig.repository_id
            if not self.settings.webhook_url:
                d.status = "no-url"
            self.deliveries.append(d)
            self._wake()
            return d
