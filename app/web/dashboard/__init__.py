"""The ops dashboard: HTML pages at ``/``, the JSON API under ``/api/``, operator actions.

``app.web.main`` mounts it with ``app.include_router(routes.build_router())`` and serves
``app/web/dashboard/static`` at ``/static``.
"""

from __future__ import annotations

from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parent / "static"

__all__ = ["STATIC_DIR"]
