"""The one gateway to GitHub, one module per concept.

- ``errors``: the precise exceptions an answer becomes (``NotFound``, ``Conflict``, ...);
- ``transport``: one REST call through PyGithub (counted, decoded, classified) and its client;
- ``credentials``: a token or a GitHub App's installations, each with its concurrency cap;
- ``base``: the gateway's plumbing (routing, audit of writes, pagination, ETag cache, lag);
- ``repos``, ``gitdata``, ``issues``, ``actions``, ``hooks``: one resource family each;
- ``gateway``: ``GitHubGateway`` (all of them) and ``gateway``/``session_gateway`` to get one.

The callers in this repository import from those modules; the names below keep the old
``from app.adapters.github import ...`` working for code written before the split.
"""

from importlib import import_module
from typing import Any

# Where each old name lives, loaded on first use (PEP 562) rather than here: importing
# ``app.adapters.github.errors`` (the API does, for recovery counts) must not load PyGithub
# (~30 MB resident) through this package's ``__init__``.
_HOMES = {
    "Conditional": "base",
    "Conflict": "errors",
    "Forbidden": "errors",
    "GitHubError": "errors",
    "NotFound": "errors",
    "GitHubGateway": "gateway",
    "gateway": "gateway",
    "session_gateway": "gateway",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_HOMES[name]}"), name)
