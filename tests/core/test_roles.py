"""A collaborator's effective role (app.core.roles.effective_role): unknown answers are ``none``,
and every custom role resolved is logged with where its base role came from (an operator reads
that line to see why a custom-role maintainer could or could not approve)."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from app.core.roles import effective_role


@pytest.mark.parametrize(
    ("answer", "role"),
    [
        ({"permission": "maintain"}, "none"),  # not a legacy level: nothing granted
        ({"permission": "owner", "role_name": ""}, "none"),
        ({}, "none"),
        ({"permission": None}, "none"),
        ({"permission": "WRITE"}, "write"),
        ({"role_name": "Admin", "permission": "read"}, "admin"),
        (
            {"role_name": "x", "user": {"permissions": {"admin": False, "maintain": False, "push": True}}},
            "write",
        ),
        ({"role_name": "x", "user": {"permissions": {"pull": True}}}, "read"),
        ({"role_name": "x", "user": {"permissions": {"triage": True, "pull": True}}}, "triage"),
        ({"role_name": "x", "user": {"permissions": {"push": "yes"}}, "permission": "read"}, "read"),
        ({"role_name": "x", "user": "octocat", "permission": "write"}, "write"),
        ("admin", "none"),
    ],
)
def test_effective_role(answer: Any, role: str) -> None:
    assert effective_role(answer) == role


def test_a_custom_role_resolved_by_its_flags_is_logged() -> None:
    answer = {
        "role_name": "release-captain",
        "permission": "read",
        "user": {"permissions": {"maintain": True}},
    }
    with capture_logs() as logs:
        assert effective_role(answer) == "maintain"
    assert logs == [
        {
            "event": "custom_role_resolved",
            "log_level": "info",
            "role_name": "release-captain",
            "base": "maintain",
            "source": "user.permissions",
        }
    ]


def test_a_custom_role_resolved_by_the_legacy_permission_is_logged() -> None:
    with capture_logs() as logs:
        assert effective_role({"role_name": "auditor", "permission": "write"}) == "write"
    assert logs == [
        {
            "event": "custom_role_resolved",
            "log_level": "info",
            "role_name": "auditor",
            "base": "write",
            "source": "permission",
        }
    ]


def test_a_base_role_or_no_role_logs_nothing() -> None:
    with capture_logs() as logs:
        assert effective_role({"role_name": "write", "permission": "write"}) == "write"
        assert effective_role({"permission": "read"}) == "read"
    assert logs == []
