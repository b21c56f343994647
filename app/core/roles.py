"""A collaborator's effective role from GitHub's permission answer (pure: no I/O).

``GET /repos/{owner}/{repo}/collaborators/{username}/permission`` answers ``permission`` (the
legacy level: admin, write, read or none — maintain folds into write, triage into read),
``role_name`` (the role: admin, maintain, write, triage, read, or the name of an organisation's
*custom repository role*) and ``user.permissions`` (booleans admin/maintain/push/triage/pull).
A custom role's name says nothing by itself, so it falls back to the booleans (which carry
maintain and triage) and then to the legacy ``permission``.
"""

from __future__ import annotations

from typing import Any

import structlog

log = structlog.get_logger(__name__)

BASE_ROLES = ("admin", "maintain", "write", "triage", "read")
_FROM_FLAGS = (
    ("admin", "admin"),
    ("maintain", "maintain"),
    ("push", "write"),
    ("triage", "triage"),
    ("pull", "read"),
)
_LEGACY = {"admin": "admin", "write": "write", "read": "read", "none": "none"}


def effective_role(answer: Any) -> str:
    """``admin``, ``maintain``, ``write``, ``triage``, ``read`` or ``none``."""
    if not isinstance(answer, dict):
        return "none"
    role = answer.get("role_name")
    if isinstance(role, str) and role.lower() in BASE_ROLES:
        return role.lower()
    user = answer.get("user")
    flags = user.get("permissions") if isinstance(user, dict) else None
    if isinstance(flags, dict):
        for flag, base in _FROM_FLAGS:
            if flags.get(flag) is True:
                log.info("custom_role_resolved", role_name=role, base=base, source="user.permissions")
                return base
    legacy = _LEGACY.get(str(answer.get("permission") or "none").lower(), "none")
    if role:
        log.info("custom_role_resolved", role_name=role, base=legacy, source="permission")
    return legacy
