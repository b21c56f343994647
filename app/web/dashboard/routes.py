"""The dashboard's router: HTML pages, the JSON API under ``/api/`` behind them, operator actions
and sign-in (``pages``, ``api``, ``actions``, ``signin``).

Routes are thin: data comes from ``app.web.dashboard.data`` (read side, the same core functions
the report uses) and actions call flow functions (``app.flows.commands.operator``,
``app.flows.ingest.deliveries``),
then write an audit entry naming the operator.
"""

from __future__ import annotations

from fastapi import APIRouter

from app.web.dashboard.actions import action_routes
from app.web.dashboard.api import api_routes
from app.web.dashboard.auth import DashboardRoute
from app.web.dashboard.pages import page_routes
from app.web.dashboard.signin import signin_routes


def build_router() -> APIRouter:
    router = APIRouter(route_class=DashboardRoute)
    page_routes(router)
    api_routes(router)
    action_routes(router)
    signin_routes(router)
    return router
