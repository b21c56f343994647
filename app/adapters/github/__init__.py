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

from app.adapters.github.base import Conditional
from app.adapters.github.errors import Conflict, Forbidden, GitHubError, NotFound
from app.adapters.github.gateway import GitHubGateway, gateway, session_gateway

__all__ = [
    "Conditional",
    "Conflict",
    "Forbidden",
    "GitHubError",
    "GitHubGateway",
    "NotFound",
    "gateway",
    "session_gateway",
]
