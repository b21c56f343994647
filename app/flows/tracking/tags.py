"""Nightly tags and containment facts: list an image's tags from its registry (conditionally),
resolve short-SHA tags to full upstream commits once, and ask GitHub's compare API once per pair
ever (ancestry never changes)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import structlog
from sqlalchemy.orm import Session

from app.adapters.github.errors import NotFound
from app.adapters.registry import (
    DbEtagCache,
    RegistryError,
    TagPattern,
    client_for,
    parse_image,
    registry_overrides,
)
from app.core.bot_config import DEFAULT_TAG_PATTERN, BotConfig
from app.core.tagcommits import is_full_sha
from app.flows.tracking.ports import CompareGateway
from app.store import tags as tag_store

log = structlog.get_logger(__name__)


@dataclass
class TagState:
    present: list[tuple[str, str]]  # (tag, commit) matching the pattern, oldest first
    names: set[str]  # every present tag name
    ok: bool = True
    error: str | None = None


@dataclass(frozen=True)
class ImageSourceOf:
    """How to list an image's tags: the pattern, the registry kind and URL, the upstream repo."""

    pattern: str
    kind: str | None
    url: str | None
    source_repo: str | None

    @property
    def memo_key(self) -> str:
        return f"{self.pattern}|{self.kind}|{self.url}"


def image_source_of(cfg: BotConfig, image_repo: str) -> ImageSourceOf:
    src = cfg.image_source(image_repo)
    if src is None:
        return ImageSourceOf(DEFAULT_TAG_PATTERN, None, None, None)
    return ImageSourceOf(src.tag_pattern, src.registry, src.url, src.source_repo)


def _image_source(cfg: BotConfig, image_repo: str) -> tuple[str, str | None, str | None, str | None]:
    """(pattern, kind, url, source repo); the tuple form app.flows.nightly.watch reads."""
    src = image_source_of(cfg, image_repo)
    return src.pattern, src.kind, src.url, src.source_repo


@dataclass(frozen=True)
class TrustedRegistries:
    """The registries a listing may contact: hosts of images the default branch pins (the caller
    says which) or lists under ``images:``, and the ``images:`` urls (app.core.egress)."""

    hosts: frozenset[str]
    urls: tuple[str, ...] = ()


def trusted_registries(cfg: BotConfig, default_branch_images: Iterable[str]) -> TrustedRegistries:
    """From the default branch only: ``default_branch_images`` are image repos read there."""
    hosts: set[str] = set()
    for name in [*default_branch_images, *(src.name for src in cfg.images)]:
        try:
            hosts.add(parse_image(name).host)
        except ValueError:
            continue
    return TrustedRegistries(frozenset(hosts), tuple(src.url for src in cfg.images if src.url))


def _known(session: Session, image_repo: str, tp: TagPattern, error: str) -> TagState:
    known = tag_store.known_tags(session, image_repo)
    return TagState(
        [(r.tag, c) for r in known if (c := tp.commit_of(r.tag))],
        {r.tag for r in known},
        ok=False,
        error=error,
    )


def refresh_tags(
    session: Session,
    image_repo: str,
    *,
    pattern: str,
    trusted: TrustedRegistries,
    registry_kind: str | None = None,
    registry_url: str | None = None,
    http: httpx.Client | None = None,
) -> TagState:
    """List the image's tags, store new ones, mark vanished ones deleted; matching tags oldest first.

    When the registry cannot be read (or may not be contacted), the tags known so far are the
    answer (``ok=False``)."""
    ref = parse_image(image_repo)
    tp = TagPattern(pattern)
    try:
        client = client_for(
            ref,
            kind=registry_kind,
            url=registry_url,
            overrides=registry_overrides(),
            http=http,
            cache=DbEtagCache(session),
            trusted_hosts=trusted.hosts,
            configured_urls=trusted.urls,
        )
    except RegistryError as exc:
        log.warning("registry_refused", image=image_repo, error=str(exc))
        return _known(session, image_repo, tp, str(exc))
    try:
        listing = client.list_tags(ref.repository)
    except RegistryError as exc:
        log.warning("registry_list_failed", image=image_repo, error=str(exc))
        return _known(session, image_repo, tp, str(exc))
    finally:
        client.close()
    present = tag_store.record_listing(
        session,
        image_repo,
        [(t.name, t.digest, t.pushed_at) for t in listing.tags],
        changed=listing.changed,
        commit_of=tp.commit_of,
        now=datetime.now(UTC),
    )
    return TagState(
        [(r.tag, c) for r in present if (c := tp.commit_of(r.tag))], {t.name for t in listing.tags}
    )


def compare_status(session: Session, gw: CompareGateway, repo: str, base: str, head: str) -> str:
    """``compare(base...head).status``, asked of GitHub once per pair ever (ancestry never changes)."""
    cached = tag_store.cached_compare(session, repo, base, head)
    if cached is not None:
        return cached
    try:
        data = gw.compare(repo, base, head)
        status = str(data.get("status") or "unknown")
        ahead, behind = int(data.get("ahead_by") or 0), int(data.get("behind_by") or 0)
    except NotFound:
        status, ahead, behind = "not_found", 0, 0
    tag_store.store_compare(session, repo, base, head, status=status, ahead=ahead, behind=behind)
    return status


def full_commit(
    session: Session, gw: CompareGateway, upstream: str, image_repo: str, tag: str, short: str
) -> str | None:
    """The full upstream commit of a short-SHA tag: stored on the tag's row once resolved (commits
    never change), else asked of the upstream repo once."""
    row = tag_store.tag_row(session, image_repo, tag)
    if row is not None and is_full_sha(row.commit_sha) and str(row.commit_sha).startswith(short):
        return str(row.commit_sha)
    sha = gw.resolve_commit(upstream, short)
    log.info("tag_commit_resolved", image=image_repo, tag=tag, short=short, commit=sha, repo=upstream)
    if sha and row is not None and is_full_sha(sha) and sha.startswith(short):
        row.commit_sha = sha
        session.flush()
    return sha
