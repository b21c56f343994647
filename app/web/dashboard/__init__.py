"""The ops dashboard: HTML pages at ``/``, the JSON API under ``/api/``, operator actions.

``app.web.main`` mounts it with ``app.include_router(build_router())`` and serves
``app/web/dashboard/static`` at ``/static``.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter

STATIC_DIR = Path(__file__).resolve().parent / "static"


def build_router() -> APIRouter:
    from app.web.dashboard.routes import build_router as _build

    return _build()


__all__ = ["STATIC_DIR", "build_router"]
