"""Dashboard sign-ins the server knows of: a session cookie authenticates only while its row is
here, so signing out (which deletes the row) revokes the cookie everywhere it was saved.

Keep in step with migrations/versions/0018_session_revocation.py.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class DashboardSession(Base):
    __tablename__ = "dashboard_sessions"

    # SHA-256 (hex) of the random session id the signed cookie carries: the table alone holds
    # nothing a browser could present.
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user: Mapped[str] = mapped_column(String(200))
    via: Mapped[str] = mapped_column(String(16))  # "session" (form) or "github" (OAuth)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
