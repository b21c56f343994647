"""Run the sim in a background thread (tests, `sweepbot demo`)."""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType

import uvicorn

from sim.app import create_sim_app
from sim.world import SimSettings, World


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class SimServer:
    """`with SimServer() as sim:` serves the sim on 127.0.0.1:<free port> until the block ends."""

    def __init__(
        self,
        world: World | None = None,
        settings: SimSettings | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        startup_timeout: float = 10.0,
    ) -> None:
        self.world = world or World(settings)
        self.host = host
        self.port = port or free_port(host)
        self.url = f"http://{host}:{self.port}"
        self.world.settings.base_url = self.url
        self.github_api_url = self.url + "/api/v3"
        self.app = create_sim_app(self.world)
        self._startup_timeout = startup_timeout
        config = uvicorn.Config(
            self.app, host=host, port=self.port, log_level="warning", lifespan="on", access_log=False
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    def start(self) -> SimServer:
        self._thread = threading.Thread(target=self._server.run, name="sim-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self._startup_timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"sim server did not start on {self.url}")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                self._server.force_exit = True
                self._thread.join(2.0)

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
