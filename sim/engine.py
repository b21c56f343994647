"""Background threads of a running sim: the runner fleet clock and the webhook sender."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time

import httpx

from sim.world import Delivery, World

HOOKSHOT_UA = "GitHub-Hookshot/sim"


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class Engine:
    """Runs `world.tick()` and sends pending webhook deliveries until stopped."""

    def __init__(self, world: World) -> None:
        self.world = world
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._hooks_wake = threading.Event()
        world.add_wakeup(self._wake)
        world.add_wakeup(self._hooks_wake)
        self._threads = [
            threading.Thread(target=self._fleet_loop, name="sim-fleet", daemon=True),
            threading.Thread(target=self._hook_loop, name="sim-webhooks", daemon=True),
        ]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        self._hooks_wake.set()
        for t in self._threads:
            if t.is_alive():
                t.join(timeout)

    def _fleet_loop(self) -> None:
        while not self._stop.is_set():
            wait = self.world.tick()
            self._wake.wait(timeout=1.0 if wait is None else max(0.001, min(wait, 1.0)))
            self._wake.clear()

    def _hook_loop(self) -> None:
        with httpx.Client(timeout=self.world.settings.webhook_timeout) as client:
            while not self._stop.is_set():
                pending = self._next_pending()
                if pending is None:
                    self._hooks_wake.wait(timeout=0.5)
                    self._hooks_wake.clear()
                    continue
                self.send(client, pending)

    def _next_pending(self) -> Delivery | None:
        with self.world.lock:
            for d in self.world.deliveries:
                if d.status == "pending":
                    d.status = "sending"
                    return d
        return None

    def send(self, client: httpx.Client, d: Delivery) -> None:
        s = self.world.settings
        url = s.webhook_url
        if not url:
            d.status = "no-url"
            return
        body = json.dumps(d.payload).encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": HOOKSHOT_UA,
            "X-GitHub-Event": d.event,
            "X-GitHub-Delivery": d.guid,
            "X-GitHub-Hook-ID": str(self.world.hook_id),
            "X-GitHub-Hook-Installation-Target-Type": "integration" if d.installation_id else "repository",
            "X-Hub-Signature-256": sign(s.webhook_secret, body),
        }
        d.delivered_at = time.time()
        started = time.monotonic()
        # One attempt, as GitHub makes (it never retries a failed delivery; webhook_retries > 1
        # only for tests of a receiver's idempotence).
        for attempt in range(1, max(1, s.webhook_retries) + 1):
            if self._stop.is_set():
                break
            d.attempts = attempt
            try:
                r = client.post(url, content=body, headers=headers)
                d.response_status = r.status_code
                if r.status_code < 500:
                    d.status = "delivered" if r.status_code < 300 else "failed"
                    d.duration = time.monotonic() - started
                    return
            except httpx.HTTPError as exc:
                d.response_status = None
                d.error = str(exc)
            if attempt < s.webhook_retries:
                time.sleep(min(0.05 * 2**attempt, 1.0))
        d.duration = time.monotonic() - started
        d.status = "failed"
