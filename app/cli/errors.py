"""One-line explanations of the errors a CLI user can fix: bad settings, a database that cannot be
reached or has no schema, a malformed database URL, an ambiguous id. Pure: each takes the
exception (or the facts) and returns the line to print; the CLI prints it and exits 2.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

EXIT_USAGE = 2


def redact_url(url: str) -> str:
    """The URL with its password hidden, for messages (never print a secret)."""
    try:
        from sqlalchemy.engine import make_url  # lazy: loaded when the command runs (start-up)

        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        scheme, sep, rest = url.partition("://")
        if sep and "@" in rest:
            return f"{scheme}://***@{rest.rsplit('@', 1)[1]}"
        return url


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return text.strip()


def settings_error(exc: Exception) -> str:
    """A pydantic ValidationError (or SettingsError) as one line naming each variable."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        parts = []
        for e in errors():
            loc = ".".join(str(x) for x in e.get("loc", ()) if x != "__root__")
            msg = str(e.get("msg", "")).removeprefix("Value error, ")
            parts.append(f"SWEEPBOT_{loc.upper()}: {msg}" if loc else msg)
        if parts:
            return "configuration error: " + "; ".join(parts)
    return f"configuration error: {first_line(str(exc))}"


def database_error(exc: Exception, url: str) -> str:
    """What went wrong talking to the database at ``url``, and the fix, in one line."""
    orig = getattr(exc, "orig", None)
    text = first_line(str(orig) if orig is not None else str(exc))
    where = redact_url(url)
    lowered = text.lower()
    if "no such table" in lowered or ("relation" in lowered and "does not exist" in lowered):
        return f"the database at {where} has no sweepbot schema yet ({text}): run `sweepbot db upgrade` first"
    if "unable to open database file" in lowered and url.startswith("sqlite"):
        return (
            f"no sweepbot database at {where}: start sweepbot here (`sweepbot up`) or run `sweepbot db "
            "upgrade`, or point SWEEPBOT_DATA_DIR or SWEEPBOT_DATABASE_URL at an existing one"
        )
    return (
        f"cannot use the database at {where}: {text} (check SWEEPBOT_DATABASE_URL and that the "
        "server is running and reachable)"
    )


def url_error(exc: Exception, url: str) -> str:
    return (
        f"SWEEPBOT_DATABASE_URL {redact_url(url)!r} is not a database URL sweepbot can use "
        f"({first_line(str(exc))}): e.g. postgresql+psycopg://user:password@host:5432/sweepbot or "
        "sqlite:////absolute/path/sweepbot.sqlite3"
    )


def database_failure(exc: Exception, url: str) -> str | None:
    """The one line for a database error (None: not one). SQLAlchemy is only asked when loaded."""
    if "sqlalchemy" not in sys.modules:
        return None
    from sqlalchemy.exc import (  # lazy: already loaded by the command that failed
        ArgumentError,
        DBAPIError,
        NoSuchModuleError,
        OperationalError,
    )

    if isinstance(exc, OperationalError | DBAPIError):
        return database_error(exc, url)
    if isinstance(exc, ArgumentError | NoSuchModuleError):
        return url_error(exc, url)
    return None


def resolve_prefix(prefix: str, candidates: Sequence[str], what: str, listing: str) -> str:
    """The one id in ``candidates`` that ``prefix`` names (an exact id, or a unique prefix).

    Raises LookupError with the line to print: no match, or several (listing a few)."""
    if prefix in candidates:
        return prefix
    matches = sorted(c for c in candidates if c.startswith(prefix))
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise LookupError(f"no {what} with id {prefix!r}: see `{listing}`")
    shown = ", ".join(matches[:5]) + (", …" if len(matches) > 5 else "")
    raise LookupError(
        f"{prefix!r} matches {len(matches)} {what} ids ({shown}): give more characters of the id"
    )


def short_ids(ids: Sequence[str], minimum: int = 8) -> dict[str, str]:
    """The shortest prefix (at least ``minimum`` long) that tells each id apart from the others."""
    out: dict[str, str] = {}
    ordered = sorted(set(ids))
    for i, full in enumerate(ordered):
        length = min(minimum, len(full))
        for other in (ordered[i - 1] if i else None, ordered[i + 1] if i + 1 < len(ordered) else None):
            if other is None:
                continue
            common = 0
            for a, b in zip(full, other, strict=False):
                if a != b:
                    break
                common += 1
            length = max(length, min(len(full), common + 1))
        out[full] = full[:length]
    return out
