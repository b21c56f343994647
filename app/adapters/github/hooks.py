"""Webhook deliveries: listing a hook's recorded deliveries and asking GitHub to send one again."""

from __future__ import annotations

from typing import Any

from app.adapters.github.base import GatewayBase
from app.core.redelivery import next_cursor


class HooksGateway(GatewayBase):
    """Deliveries GitHub recorded for the App's hook or a repository hook (to recover lost ones)."""

    @staticmethod
    def _hook_path(hook: str) -> tuple[str, str]:
        """(operation prefix, path) of a hook: ``app`` or ``owner/repo:hook_id``."""
        if hook == "app":
            return "apps", "/app/hook/deliveries"
        repo, _, hook_id = hook.rpartition(":")
        return "repos", f"/repos/{repo}/hooks/{int(hook_id)}/deliveries"

    def list_hook_deliveries(
        self, hook: str, cursor: str | None = None, per_page: int = 100
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of a hook's deliveries, newest first, and the next page's cursor (or None).

        The App's list needs the App's JWT (the credentials route ``/app/...`` calls to it)."""
        kind, path = self._hook_path(hook)
        params: dict[str, Any] = {"per_page": per_page}
        if cursor:
            params["cursor"] = cursor
        _, headers, data = self._call(f"{kind}/list-webhook-deliveries", "GET", path, params=params)
        link = {k.lower(): v for k, v in headers.items()}.get("link")
        return (data if isinstance(data, list) else []), next_cursor(link)

    def redeliver(self, hook: str, delivery_id: int) -> None:
        """Ask GitHub to send a recorded delivery again (same GUID); GitHub answers 202."""
        kind, path = self._hook_path(hook)
        self._write(
            f"{kind}/redeliver-webhook-delivery",
            "POST",
            f"{path}/{int(delivery_id)}/attempts",
            target=f"{hook} delivery {delivery_id}",
        )
