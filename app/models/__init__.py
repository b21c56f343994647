"""All ORM tables, one module per domain, re-exported here for Alembic and callers."""

from app.db import Base
from app.models.core import AuditEntry, Delivery, DeliveryStatus, Heartbeat, HttpCacheEntry

__all__ = ["AuditEntry", "Base", "Delivery", "DeliveryStatus", "Heartbeat", "HttpCacheEntry"]

# Domain tables (each module owned by its capability) register themselves on Base.metadata.
from app.models import dispatchruns as dispatchruns  # noqa: E402
from app.models import heads as heads  # noqa: E402
from app.models import nightly as nightly  # noqa: E402
from app.models import redelivery as redelivery  # noqa: E402
from app.models import results as results  # noqa: E402
from app.models import runnerctl as runnerctl  # noqa: E402
from app.models import sessions as sessions  # noqa: E402
from app.models import sweeps as sweeps  # noqa: E402
from app.models import tracking as tracking  # noqa: E402
