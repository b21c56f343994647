"""Upstream dependency tracking: watches, dependency state, nightlies, containment, readiness.

Pure pieces first (reference parsing, the containment search, the readiness decision, the status
comment), then the glue that loads state, asks GitHub (conditionally: a 304 is free) and the
registry, and applies decisions. Handlers for ``pull_request`` and ``push`` are registered on this
module's ``router`` (composed by app/flows/handlers.py).

Cost rule: a poll cycle in which nothing changed makes no rate-limited GitHub call. Dependency
and recipe PRs are read with ``If-None-Match``; compare answers are cached forever; the status
comment is only written when its text changed; files are only read when a head moved.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, cast

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.adapters.github import session_gateway
from app.core.routing import HandlerContext, HandlerSkipped, Router, TransientError
from app.flows.botconfig import DEFAULT_TAG_PATTERN, BotConfig, read_bot_config, stored_config
from app.models.tracking import (
    Bump,
    CompareResult,
    Dependency,
    DepState,
    ImageTag,
    StatusComment,
    Watch,
    WatchState,
)

log = structlog.get_logger(__name__)

router = Router()  # this capability's webhook handlers (app/flows/handlers.py composes them)

STATUS_MARKER = "<!-- sweepbot:status -->"
CONTAINED = ("ahead", "identical")

# ====================================================================================== pure: refs

_REPO = r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+"
_REF_TOKEN = re.compile(
    rf"(?:https?://github\.com/(?P<url_repo>{_REPO})/pull/(?P<url_num>\d+)(?:[/?#][^\s,;)]*)?)"
    rf"|(?:(?<![\w/.-])(?P<repo>{_REPO})?#(?P<num>\d+)\b)"
)
_KEYWORD = re.compile(r"(?i)(?:^|(?<=[\s*_(\[]))(?:/?depends[- ]on|requires)\s*:?")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_CONFIG_KEY_LINE = re.compile(r"(?i)^\s*config[- ]keys?\s*:\s*(?P<keys>.+)$")


@dataclass(frozen=True, order=True)
class DepRef:
    """An upstream pull request, ``owner/repo#N``."""

    repo: str
    number: int

    def __str__(self) -> str:
        return f"{self.repo}#{self.number}"

    @classmethod
    def parse(cls, token: str, default_repo: str | None = None) -> DepRef:
        """One reference (``owner/repo#N``, ``#N`` with ``default_repo``, or a PR URL); ValueError if not."""
        m = _REF_TOKEN.fullmatch(token.strip())
        if m is None:
            raise ValueError(
                f"{token!r} is not a pull request reference; write owner/repo#N "
                "(e.g. vllm-project/vllm#47269) or the PR's URL"
            )
        if m.group("url_repo"):
            return cls(m.group("url_repo"), int(m.group("url_num")))
        repo = m.group("repo") or default_repo
        if not repo:
            raise ValueError(f"{token!r} names no repository; write owner/repo#N")
        return cls(repo, int(m.group("num")))


def _prose_lines(text: str, *, keep_code: bool = False) -> list[str]:
    """Lines outside fenced code blocks and ``>`` quotes, with inline code spans blanked."""
    out: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        if line.lstrip().startswith(">"):
            continue
        out.append(line if keep_code else re.sub(r"`[^`]*`", " ", line))
    return out


def parse_dependency_refs(text: str, *, default_repo: str | None = None) -> list[DepRef]:
    """Dependencies declared in a PR body or comment, in order, without duplicates.

    A line counts when it holds ``Depends-On:``, ``depends on``, ``requires`` or ``/depends-on``;
    every reference after that keyword on the line is taken (``owner/repo#N`` or a PR URL; a bare
    ``#N`` only with ``default_repo``). Quoted lines (``>``) and code are ignored.
    """
    seen: dict[DepRef, None] = {}
    for line in _prose_lines(text or ""):
        kw = _KEYWORD.search(line)
        if kw is None:
            continue
        rest = line[kw.end() :]
        if rest.lstrip().lower().startswith("drop"):
            continue  # "/depends-on drop X" removes; parse_drop_refs reads it
        for m in _REF_TOKEN.finditer(rest):
            if m.group("url_repo"):
                ref = DepRef(m.group("url_repo"), int(m.group("url_num")))
            elif m.group("repo") or default_repo:
                ref = DepRef(m.group("repo") or str(default_repo), int(m.group("num")))
            else:
                continue
            seen.setdefault(ref, None)
    return list(seen)


def parse_refs_list(text: str, *, default_repo: str | None = None) -> list[DepRef]:
    """Every reference in ``text`` (a command's arguments), no keyword needed."""
    return parse_dependency_refs("depends-on " + " ".join((text or "").split()), default_repo=default_repo)


def parse_config_keys(text: str) -> list[str]:
    """Config keys named explicitly in a PR body: ``Config-Key: a`` / ``Config-Keys: a, b``."""
    keys: list[str] = []
    for line in _prose_lines(text or "", keep_code=True):
        m = _CONFIG_KEY_LINE.match(line)
        if m:
            for part in re.split(r"[,\s]+", m.group("keys")):
                part = part.strip().strip("`")
                if part and part not in keys:
                    keys.append(part)
    return keys


# ================================================================================ pure: containment


def is_contained(status: str) -> bool:
    """``compare(merge...tag)`` says the tag's commit contains the merge commit."""
    return status in CONTAINED


@dataclass(frozen=True)
class ContainmentSearch:
    newest: int | None  # index of the newest candidate containing everything
    first: int | None  # index of the oldest such candidate (where it first shipped)
    probes: int


def search_containing(n: int, contains: Callable[[int], bool]) -> ContainmentSearch:
    """Over candidates ``0..n-1`` ordered oldest to newest (tags of a linear main are ordered by
    their commit, so containment is monotone), find the newest and the first containing one with
    at most ``1 + ceil(log2 n)`` probes: the newest is probed first (if it lacks a merge, none
    has it), then a binary search finds where it first shipped."""
    if n <= 0:
        return ContainmentSearch(None, None, 0)
    probes = 1
    if not contains(n - 1):
        return ContainmentSearch(None, None, probes)
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi) // 2
        probes += 1
        if contains(mid):
            hi = mid
        else:
            lo = mid + 1
    return ContainmentSearch(n - 1, lo, probes)


# ================================================================================== pure: readiness


@dataclass(frozen=True)
class DepView:
    ref: str
    state: str
    merge_sha: str | None = None
    title: str | None = None


Action = Literal["wait", "bump", "noop", "blocked", "stopped"]


@dataclass(frozen=True)
class Readiness:
    """What to do with a watch now, and why (the reason is logged and shown on the PR)."""

    action: Literal["wait", "bump", "noop", "blocked", "stopped"]
    reason: str
    image: str | None = None


def decide_readiness(
    *,
    key: str,
    deps: Sequence[DepView],
    image_repo: str | None,
    chosen_tag: str | None,
    pinned_image: str | None,
    pinned_contains: bool | None,
    bumped_image: str | None,
    bumped_covers: bool | None = None,
    config_problem: str | None = None,
) -> Readiness:
    """The one readiness decision (Renovate style: every path says why, and logs it).

    A bump happens once per image: after one, nothing more happens unless ``bumped_covers`` is
    False (a dependency added since is not in the bumped image), which allows the next bump.
    ``config_problem`` (the key is missing or archived) blocks with that explanation."""

    def out(
        action: Literal["wait", "bump", "noop", "blocked"], reason: str, image: str | None = None
    ) -> Readiness:
        log.info("readiness", key=key, action=action, reason=reason, image=image)
        return Readiness(action, reason, image)

    if bumped_image and bumped_covers is not False:
        return out("noop", f"already bumped to {bumped_image}; a bump happens once")
    if not deps:
        return out("noop", "no upstream dependencies to wait for")
    if config_problem:
        return out("blocked", config_problem)
    closed = [d.ref for d in deps if d.state == DepState.CLOSED]
    if closed:
        drops = ", ".join(f"`/depends-on drop {r}`" for r in closed)
        return out(
            "blocked",
            f"{', '.join(closed)} closed without merging; it will never ship. "
            f"If the recipe no longer needs it, comment {drops}",
        )
    waiting = [d.ref for d in deps if d.state in (DepState.OPEN, DepState.UNKNOWN)]
    if waiting:
        return out("wait", f"waiting for {', '.join(waiting)} to merge")
    no_sha = [d.ref for d in deps if not d.merge_sha]
    if no_sha:
        return out("wait", f"{', '.join(no_sha)} merged but GitHub has not reported the merge commit yet")
    if not image_repo:
        return out("blocked", f"config key {key} has no image pin to bump")
    if pinned_contains:
        return out("noop", f"the pinned image {pinned_image} already contains every dependency")
    if not chosen_tag:
        return out(
            "wait",
            f"no nightly of {image_repo} contains every merge commit yet; checking again at the next poll",
        )
    image = f"{image_repo}:{chosen_tag}"
    if pinned_image == image:
        return out("noop", f"the pin is already {image}")
    return out("bump", f"every dependency is merged and contained in {image}", image)


def archived_key_reason(key: str, path: str | None) -> str | None:
    """Why a watch stops when its key lives only under ``configs/deprecated/`` (else None)."""
    from app.core.recipes import is_archived_path

    if not path or not is_archived_path(path):
        return None
    return (
        f"config key {key} moved to `{path}`, which sweep generation no longer reads (its scenario "
        "was deprecated), so there is no pin to bump; sweepbot stopped watching it. Move the key "
        "back into an active master config (a push to this PR re-checks it) or watch a current key"
    )


# ============================================================================== pure: status comment


@dataclass(frozen=True)
class WatchView:
    key: str
    deps: Sequence[DepView]
    image_repo: str | None
    pinned_image: str | None
    pinned_missing: bool
    chosen_tag: str | None
    first_tag: str | None
    decision: Readiness | None
    bump_line: str | None = None
    dropped: Sequence[str] = field(default_factory=tuple)
    bumped: bool = False  # a bump happened: chosen_tag is the pinned nightly
    newest_containing: str | None = None  # after a bump, a newer nightly with every merge commit


def _short(sha: str | None) -> str:
    return (sha or "")[:7]


def _dep_line(d: DepView, chosen: str | None) -> str:
    if d.state == DepState.MERGED:
        where = f", contained in nightly `{chosen}`" if chosen else ", not in a nightly yet"
        return f"merged at `{_short(d.merge_sha)}`{where}" if d.merge_sha else "merged"
    if d.state == DepState.CLOSED:
        return (
            f"**closed without merge** — if the recipe can do without it, comment `/depends-on drop {d.ref}`"
        )
    if d.state == DepState.OPEN:
        return "open"
    return "not found yet (checking)"


def render_status(views: Sequence[WatchView]) -> str:
    """The sticky status comment. Deterministic (no timestamps) so an unchanged state is no edit."""
    lines = [STATUS_MARKER, "### sweepbot: upstream dependencies"]
    for v in views:
        lines += ["", f"**`{v.key}`**", "", "| dependency | state |", "| --- | --- |"]
        for d in v.deps:
            title = f" {d.title}" if d.title else ""
            lines.append(f"| {d.ref}{title} | {_dep_line(d, v.chosen_tag)} |".replace("\n", " "))
        if not v.deps:
            lines.append("| (none) | |")
        if v.dropped:
            lines.append("")
            lines.append("Dropped: " + ", ".join(v.dropped))
        lines.append("")
        if v.pinned_image:
            warn = (
                " — ⚠️ **deleted from the registry: this image can no longer be pulled**"
                if v.pinned_missing
                else ""
            )
            lines.append(f"- pinned image: `{v.pinned_image}`{warn}")
        if v.chosen_tag and v.bumped:
            lines.append(f"- nightly chosen: `{v.image_repo}:{v.chosen_tag}` (the one the bump pinned)")
            if v.newest_containing:
                lines.append(
                    f"- newer nightly also containing every merge commit: `{v.image_repo}:"
                    f"{v.newest_containing}` (not bumped to: a bump happens once)"
                )
        elif v.chosen_tag:
            first = (
                f" (first nightly containing them all: `{v.first_tag}`)"
                if v.first_tag and v.first_tag != v.chosen_tag
                else ""
            )
            lines.append(
                f"- nightly chosen: `{v.image_repo}:{v.chosen_tag}`, the newest containing every "
                f"merge commit{first}"
            )
        elif v.image_repo:
            lines.append(f"- nightly chosen: none yet (watching `{v.image_repo}`)")
        if v.bump_line:
            lines.append(f"- {v.bump_line}")
        if v.decision is not None:
            lines.append(f"- next: {_next_step(v.decision)}")
    return "\n".join(lines) + "\n"


def _next_step(decision: Readiness) -> str:
    if decision.action == "wait":
        return f"{decision.reason}."
    if decision.action == "blocked":
        return f"blocked: {decision.reason}."
    if decision.action == "stopped":
        return f"**stopped watching**: {decision.reason}."
    if decision.action == "bump":
        return f"bumping the pin to `{decision.image}` and queueing the sweep."
    return f"nothing to do: {decision.reason}."


# ======================================================================================== glue


def _now() -> datetime:
    return datetime.now(UTC)


def bot_config(session: Session, gw: Any, repo: str) -> BotConfig:
    """The stored config, read from the default branch once when never read (pushes refresh it)."""
    cfg = stored_config(session, repo)
    if cfg is None:
        cfg = read_bot_config(session, gw, repo)
    return cfg


def _watches_for_pr(session: Session, repo: str, pr_number: int) -> list[Watch]:
    return list(
        session.scalars(
            select(Watch).where(Watch.repo == repo, Watch.pr_number == pr_number).order_by(Watch.id)
        )
    )


def ensure_watch(session: Session, repo: str, pr_number: int, key: str, source: str) -> Watch:
    watch = session.scalar(
        select(Watch).where(Watch.repo == repo, Watch.pr_number == pr_number, Watch.config_key == key)
    )
    if watch is None:
        watch = Watch(repo=repo, pr_number=pr_number, config_key=key, source=source, state=WatchState.WAITING)
        session.add(watch)
        session.flush()
        log.info("watch_created", repo=repo, pr=pr_number, key=key, source=source)
    return watch


def sync_dependencies(
    session: Session,
    watch: Watch,
    refs: Sequence[DepRef],
    *,
    source: str,
    actor: str | None,
    authoritative: bool = False,
) -> tuple[list[str], list[str]]:
    """Add ``refs``; with ``authoritative`` (a re-read PR body) drop ``source`` deps no longer listed.

    A dependency dropped by a command stays dropped even if the body still lists it.
    """
    added: list[str] = []
    removed: list[str] = []
    current = {(d.dep_repo, d.dep_number): d for d in watch.dependencies}
    wanted = {(r.repo, r.number) for r in refs}
    for ref in refs:
        dep = current.get((ref.repo, ref.number))
        if dep is None:
            dep = Dependency(
                dep_repo=ref.repo,
                dep_number=ref.number,
                source=source,
                state=DepState.UNKNOWN,
                dropped=False,
                added_by=actor,
            )
            watch.dependencies.append(dep)
            added.append(str(ref))
        elif dep.dropped and source == "command":
            dep.dropped, dep.dropped_by, dep.source, dep.added_by = False, None, source, actor
            added.append(str(ref))
    if authoritative:
        for (repo, number), dep in current.items():
            if dep.source == source and not dep.dropped and (repo, number) not in wanted:
                dep.dropped, dep.dropped_by = True, f"{source} edit"
                removed.append(dep.ref)
    session.flush()
    return added, removed


def refresh_dependency(gw: Any, dep: Dependency) -> bool:
    """Read the upstream PR conditionally (a 304 is free); a merged PR is final and not re-read."""
    from app.adapters.github import NotFound

    if dep.state == DepState.MERGED and dep.merge_sha:
        return False
    try:
        got = gw.get_pull_conditional(dep.dep_repo, dep.dep_number)
    except NotFound:
        changed = dep.state != DepState.UNKNOWN
        dep.state = DepState.UNKNOWN
        return changed
    data = got.data if isinstance(got.data, dict) else {}
    if data.get("merged") or data.get("merged_at"):
        state = DepState.MERGED
    elif data.get("state") == "closed":
        state = DepState.CLOSED
    else:
        state = DepState.OPEN
    merge_sha = data.get("merge_commit_sha") if state == DepState.MERGED else None
    title = str(data.get("title") or "")[:400] or None
    changed = (state, merge_sha) != (dep.state, dep.merge_sha)
    dep.state, dep.merge_sha, dep.title = state, merge_sha, title
    if changed:
        dep.updated_at = _now()
        log.info("dependency_changed", dep=dep.ref, state=state, merge_sha=merge_sha)
    return changed


def compare_status(session: Session, gw: Any, repo: str, base: str, head: str) -> str:
    """``compare(base...head).status``, asked of GitHub once per pair ever (ancestry never changes)."""
    from app.adapters.github import NotFound

    cached = session.get(CompareResult, (repo, base, head))
    if cached is not None:
        return cached.status
    try:
        data = gw.compare(repo, base, head)
        status = str(data.get("status") or "unknown")
        ahead, behind = int(data.get("ahead_by") or 0), int(data.get("behind_by") or 0)
    except NotFound:
        status, ahead, behind = "not_found", 0, 0
    session.add(
        CompareResult(repo=repo, base=base, head=head, status=status, ahead_by=ahead, behind_by=behind)
    )
    session.flush()
    return status


def _full_commit(
    session: Session, gw: Any, upstream: str, image_repo: str, tag: str, short: str
) -> str | None:
    """The full upstream commit of a short-SHA tag: stored on the tag's row once resolved (commits
    never change), else asked of the upstream repo once."""
    from app.core.tagcommits import is_full_sha

    row = session.scalar(select(ImageTag).where(ImageTag.image_repo == image_repo, ImageTag.tag == tag))
    if row is not None and is_full_sha(row.commit_sha) and str(row.commit_sha).startswith(short):
        return str(row.commit_sha)
    sha = gw.resolve_commit(upstream, short)
    log.info("tag_commit_resolved", image=image_repo, tag=tag, short=short, commit=sha, repo=upstream)
    if sha and row is not None and is_full_sha(sha) and sha.startswith(short):
        row.commit_sha = sha
        session.flush()
    return sha


@dataclass
class TagState:
    present: list[tuple[str, str]]  # (tag, commit) matching the pattern, oldest first
    names: set[str]  # every present tag name
    ok: bool = True
    error: str | None = None


def refresh_tags(
    session: Session,
    image_repo: str,
    *,
    pattern: str,
    registry_kind: str | None = None,
    registry_url: str | None = None,
    http: Any = None,
) -> TagState:
    """List the image's tags, store new ones, mark vanished ones deleted; matching tags oldest first."""
    from app.adapters.registry import (
        DbEtagCache,
        RegistryError,
        TagPattern,
        client_for,
        parse_image,
        registry_overrides,
    )

    ref = parse_image(image_repo)
    client = client_for(
        ref,
        kind=registry_kind,
        url=registry_url,
        overrides=registry_overrides(),
        http=http,
        cache=DbEtagCache(session),
    )
    try:
        listing = client.list_tags(ref.repository)
    except RegistryError as exc:
        log.warning("registry_list_failed", image=image_repo, error=str(exc))
        known = list(
            session.scalars(
                select(ImageTag).where(ImageTag.image_repo == image_repo, ImageTag.deleted_at.is_(None))
            )
        )
        tp = TagPattern(pattern)
        ordered = sorted(known, key=lambda r: (r.seq, r.id))
        return TagState(
            [(r.tag, c) for r in ordered if (c := tp.commit_of(r.tag))],
            {r.tag for r in ordered},
            ok=False,
            error=str(exc),
        )
    finally:
        client.close()
    tp = TagPattern(pattern)
    now = _now()
    rows = {r.tag: r for r in session.scalars(select(ImageTag).where(ImageTag.image_repo == image_repo))}
    next_seq = max((r.seq for r in rows.values()), default=0) + 1
    names = {t.name for t in listing.tags}
    # Registries list newest first (Docker Hub) or lexically (OCI): number new tags oldest first.
    for remote in reversed(listing.tags):
        row = rows.get(remote.name)
        if row is None:
            row = ImageTag(
                image_repo=image_repo,
                tag=remote.name,
                commit_sha=tp.commit_of(remote.name),
                digest=remote.digest,
                pushed_at=remote.pushed_at,
                seq=next_seq,
                first_seen_at=now,
            )
            next_seq += 1
            session.add(row)
            rows[remote.name] = row
        if listing.changed:
            row.last_seen_at = now
        if row.deleted_at is not None:
            row.deleted_at = None
        if remote.pushed_at and row.pushed_at is None:
            row.pushed_at = remote.pushed_at
    for name, row in rows.items():
        if name not in names and row.deleted_at is None:
            row.deleted_at = now
            log.info("image_tag_deleted", image=image_repo, tag=name)
    session.flush()
    present = [r for r in rows.values() if r.tag in names]

    def order(r: ImageTag) -> tuple[float, int]:
        ts = r.pushed_at.replace(tzinfo=r.pushed_at.tzinfo or UTC).timestamp() if r.pushed_at else 0.0
        return ts, r.seq

    present.sort(key=order)
    return TagState([(r.tag, c) for r in present if (c := tp.commit_of(r.tag))], names)


@dataclass
class Evaluation:
    watch_id: int
    decision: Readiness
    bumped: bool = False
    message: str | None = None


def _image_source(cfg: BotConfig, image_repo: str) -> tuple[str, str | None, str | None, str | None]:
    src = cfg.image_source(image_repo)
    if src is None:
        return DEFAULT_TAG_PATTERN, None, None, None
    return src.tag_pattern, src.registry, src.url, src.source_repo


def refresh_pin(
    session: Session, gw: Any, watch: Watch, pull: dict[str, Any] | None, cfg: BotConfig
) -> str | None:
    """Re-read the key's ``image:`` at the PR head, only when the head moved (files cost calls).

    Returns why there is no pin to bump (the key is missing, archived to ``configs/deprecated/``,
    or has no ``image:``), else None. An unchanged head keeps the earlier answer for free."""
    from app.core.recipes import RecipeError, current_image

    if pull is not None:
        from app.core.payloads import DELETED_FORK, head_of

        head = head_of(pull, watch.repo)
        if not head.readable:
            log.info("pin_unreadable", watch_id=watch.id, reason=DELETED_FORK)
            return DELETED_FORK
        head_sha, head_repo = head.sha, str(head.repo)
    else:
        branch = str(gw.get_repo(watch.repo).get("default_branch") or "main")
        ref = gw.get_ref(watch.repo, f"heads/{branch}")
        head_sha, head_repo = str((ref or {}).get("object", {}).get("sha") or ""), watch.repo
    if head_sha and head_sha == watch.head_sha:
        if watch.pinned_image:
            return None
        if watch.decision in ("blocked", "stopped") and watch.reason:
            return watch.reason  # the config problem found at this very head
    from app.core.recipes import AmbiguousKeyError
    from app.flows.bump import locate_config

    try:
        loc, text = locate_config(
            gw, head_repo, head_sha or None, watch.config_key, cfg, hint=watch.config_path
        )
    except AmbiguousKeyError as exc:
        watch.head_sha, watch.pinned_image = head_sha or None, None
        return str(exc)
    watch.head_sha = head_sha or None
    if text is None or not loc.found:
        watch.pinned_image = None
        if loc.archived and loc.path:
            watch.config_path = loc.path  # where it moved: the status comment and dashboard say so
        log.warning("config_key_not_found", repo=watch.repo, key=watch.config_key, reason=loc.reason)
        return str(loc.reason)
    watch.config_path = loc.path
    try:
        watch.pinned_image = current_image(text, watch.config_key)
    except RecipeError as exc:
        log.warning("pin_unreadable", key=watch.config_key, error=str(exc))
        watch.pinned_image = None
        return f"the `image:` of config key {watch.config_key} in {loc.path} cannot be read: {exc}"
    if not watch.pinned_image:
        return f"config key {watch.config_key} in {loc.path} has no `image:` to bump"
    return None


def evaluate_watch(
    session: Session,
    gw: Any,
    watch: Watch,
    *,
    pull: dict[str, Any] | None = None,
    pull_changed: bool = True,
    http: Any = None,
    tag_memo: dict[str, TagState] | None = None,
    publish: bool = True,
) -> Evaluation:
    """Refresh what may have changed, decide, and act (bump once; update the status comment)."""
    from app.adapters.registry import TagPattern, parse_image
    from app.flows.bump import DONE_STATES

    cfg = bot_config(session, gw, watch.repo)
    problem: str | None = None
    if pull_changed:
        problem = refresh_pin(session, gw, watch, pull, cfg)
    deps = [d for d in watch.dependencies if not d.dropped]
    for dep in deps:
        refresh_dependency(gw, dep)

    image_repo = parse_image(watch.pinned_image).image_repo if watch.pinned_image else None
    watch.image_repo = image_repo
    chosen: str | None = None
    first: str | None = None
    pinned_contains: bool | None = None
    bumped_covers: bool | None = None
    pinned_missing = False
    bump = session.scalar(
        select(Bump).where(Bump.watch_id == watch.id, Bump.state.in_(DONE_STATES)).order_by(Bump.id.desc())
    )
    merged = [d for d in deps if d.state == DepState.MERGED and d.merge_sha]
    if image_repo:
        pattern, kind, url, source_repo = _image_source(cfg, image_repo)
        memo_key = f"{image_repo}|{pattern}|{kind}|{url}"
        tags = tag_memo.get(memo_key) if tag_memo is not None else None
        if tags is None:
            tags = refresh_tags(
                session, image_repo, pattern=pattern, registry_kind=kind, registry_url=url, http=http
            )
            if tag_memo is not None:
                tag_memo[memo_key] = tags
        pinned_tag = parse_image(watch.pinned_image or "").tag
        pinned_missing = bool(tags.ok and pinned_tag and pinned_tag not in tags.names)
        if pinned_missing and watch.pinned_missing_since is None:
            watch.pinned_missing_since = _now()
            log.warning("pinned_image_deleted", repo=watch.repo, pr=watch.pr_number, image=watch.pinned_image)
        elif not pinned_missing:
            watch.pinned_missing_since = None
        repos = {d.dep_repo for d in deps}
        upstream = source_repo or (next(iter(repos)) if len(repos) == 1 else None)
        # Only dependencies of the repo the image is built from can be checked for containment.
        needed = [d.merge_sha for d in merged if d.dep_repo == upstream and d.merge_sha]
        if upstream and needed and len(merged) == len(deps):

            def contains_all(commit: str) -> bool:
                return all(is_contained(compare_status(session, gw, upstream, m, commit)) for m in needed)

            from app.core.tagcommits import resolve_tag_commits

            def full(tag: str, short: str) -> str | None:
                return _full_commit(session, gw, upstream, image_repo, tag, short)

            def commit_of(tag: str | None) -> str | None:
                captured = TagPattern(pattern).commit_of(tag) if tag else None
                resolved = resolve_tag_commits([(tag, captured)], full) if tag and captured else []
                return resolved[0][1] if resolved else None

            # Short-SHA tags (nightly-dev-...-75c2eef) are compared by their full upstream commit.
            cands = resolve_tag_commits(tags.present, full)
            found = search_containing(len(cands), lambda i: contains_all(cands[i][1]))
            chosen = cands[found.newest][0] if found.newest is not None else None
            first = cands[found.first][0] if found.first is not None else None
            pin_sha = commit_of(pinned_tag)
            if pin_sha:
                pinned_contains = contains_all(pin_sha)
            bumped_tag = parse_image(bump.image).tag if bump is not None else None
            bumped_sha = commit_of(bumped_tag)
            if bumped_sha:
                # Cached compares: free after the first time. False only when a dependency added
                # after the bump is missing from the bumped image; that allows the next bump.
                bumped_covers = contains_all(bumped_sha)
        for dep in deps:
            dep.contained_in = first if dep in merged and first else None
    if bump is not None and len(merged) < len(deps):
        bumped_covers = False  # a dependency added after the bump has not even merged yet
    decision = decide_readiness(
        key=watch.config_key,
        deps=[DepView(d.ref, d.state, d.merge_sha, d.title) for d in deps],
        image_repo=image_repo,
        chosen_tag=chosen,
        pinned_image=watch.pinned_image,
        pinned_contains=pinned_contains,
        bumped_image=bump.image if bump is not None else None,
        bumped_covers=bumped_covers,
        config_problem=problem,
    )
    watch.chosen_tag, watch.first_containing_tag = chosen, first
    archived = archived_key_reason(watch.config_key, watch.config_path) if problem else None
    if archived is not None and bump is None:
        # Blocking would wait forever on a file sweep generation no longer reads: stop, and say so.
        log.info("watch_stopped_archived", repo=watch.repo, key=watch.config_key, path=watch.config_path)
        decision = Readiness("stopped", archived)
    result = Evaluation(watch.id, decision)
    if decision.action == "bump" and decision.image:
        from app.flows.bump import bump_watch

        outcome = bump_watch(session, gw, watch, image=decision.image, deps=merged, config=cfg, pull=pull)
        result.bumped = outcome.state == "committed"
        result.message = outcome.message
        if outcome.state in ("committed", "already"):
            watch.state = WatchState.BUMPED
            watch.pinned_image = decision.image
            decision = Readiness("noop", outcome.message, decision.image)
        else:
            watch.state = WatchState.BLOCKED
            decision = Readiness("blocked", outcome.message, decision.image)
        result.decision = decision
    elif bump is not None and decision.action == "noop":
        watch.state = WatchState.BUMPED
    elif decision.action == "stopped":
        watch.state = WatchState.ARCHIVED
    else:
        watch.state = {"wait": WatchState.WAITING, "blocked": WatchState.BLOCKED}.get(
            decision.action, WatchState.DONE
        )
    watch.decision, watch.reason = decision.action, decision.reason
    watch.checked_at = _now()
    session.flush()
    if publish and watch.pr_number:
        publish_status(session, gw, watch.repo, watch.pr_number)
    return result


def _view(session: Session, watch: Watch) -> WatchView:
    deps = [d for d in watch.dependencies if not d.dropped]
    from app.flows.bump import DONE_STATES

    bump = session.scalar(
        select(Bump).where(Bump.watch_id == watch.id, Bump.state.in_(DONE_STATES)).order_by(Bump.id.desc())
    )
    bump_line = None
    if bump is not None and bump.state == "superseded":
        bump_line = (
            f"bumped `{bump.config_key}` to `{bump.image}` in PR #{bump.bump_pr_number}, since superseded "
            "by a newer bump of this key (that PR was closed)"
        )
    elif bump is not None and bump.state == "committed":
        where = f"PR #{bump.bump_pr_number}" if bump.bump_pr_number else f"branch `{bump.branch}`"
        bump_line = (
            f"bumped `{bump.config_key}` to `{bump.image}` in commit `{_short(bump.commit_sha)}` "
            f"on {where}" + ("; sweep requested" if bump.sweep_requested else "")
        )
    elif bump is not None and bump.state == "already":
        bump_line = f"the pin is already `{bump.image}` on the branch"
    decision: Readiness | None = None
    if watch.decision in ("wait", "bump", "noop", "blocked", "stopped"):
        decision = Readiness(cast(Action, watch.decision), watch.reason or "")
    from app.core.nightlies import label_nightlies

    labels = label_nightlies(
        pinned_image=watch.pinned_image,
        newest_tag=watch.chosen_tag,
        bumped_image=bump.image if bump is not None and bump.state in ("committed", "already") else None,
    )
    return WatchView(
        key=watch.config_key,
        deps=[DepView(d.ref, d.state, d.merge_sha, d.title) for d in deps],
        image_repo=watch.image_repo,
        pinned_image=watch.pinned_image,
        pinned_missing=watch.pinned_missing_since is not None,
        chosen_tag=labels.chosen,
        first_tag=watch.first_containing_tag,
        decision=decision,
        bump_line=bump_line,
        dropped=tuple(d.ref for d in watch.dependencies if d.dropped),
        bumped=labels.bumped,
        newest_containing=labels.newest_containing,
    )


def publish_status(session: Session, gw: Any, repo: str, pr_number: int) -> bool:
    """Create or edit the sticky status comment; no call at all when its text did not change."""
    from app.adapters.github import NotFound

    watches = [w for w in _watches_for_pr(session, repo, pr_number) if w.dependencies]
    if not watches:
        return False
    body = render_status([_view(session, w) for w in watches])
    digest = hashlib.sha256(body.encode()).hexdigest()
    rec = session.scalar(
        select(StatusComment).where(StatusComment.repo == repo, StatusComment.pr_number == pr_number)
    )
    if rec is not None and rec.body_sha == digest:
        return False
    comment: dict[str, Any] | None = None
    if rec is not None and rec.comment_id:
        try:
            comment = gw.update_comment(repo, rec.comment_id, body)
        except NotFound:
            comment = None
    if comment is None:
        comment = gw.upsert_comment(repo, pr_number, STATUS_MARKER, body)
    if rec is None:
        rec = StatusComment(repo=repo, pr_number=pr_number)
        session.add(rec)
    rec.comment_id, rec.body_sha, rec.updated_at = int(comment["id"]), digest, _now()
    session.flush()
    return True


# ================================================================================= PR / push flows


def target_keys(gw: Any, repo: str, pull: dict[str, Any], cfg: BotConfig) -> list[str]:
    """The config keys a recipe PR is about: named in its body, or touched in a master config, or
    whose benchmark script it touches."""
    from app.core.recipes import (
        RecipeError,
        is_archived_path,
        is_master_config_path,
        keys_changed,
        keys_for_paths,
        parse_master,
    )

    explicit = parse_config_keys(str(pull.get("body") or ""))
    if explicit:
        return explicit
    number = int(pull["number"])
    from app.core.payloads import DELETED_FORK, head_of

    head = head_of(pull, repo)
    if not head.readable:
        log.info("pr_keys_unreadable", repo=repo, number=number, reason=DELETED_FORK)
        return []
    head_repo, head_sha = str(head.repo), head.sha
    base_sha = str((pull.get("base") or {}).get("sha") or "")
    paths = [str(f.get("filename")) for f in gw.list_pull_files(repo, number)]
    keys: list[str] = []
    masters: dict[str, Any] = {}
    for path in paths:
        if not is_master_config_path(path) or is_archived_path(path):
            continue
        got = gw.get_file(head_repo, path, ref=head_sha)
        if got is None:
            continue
        old = gw.get_file(repo, path, ref=base_sha) if base_sha else None
        try:
            changed = keys_changed(old[0] if old else "", got[0])
            masters.update(parse_master(got[0]))
        except RecipeError as exc:
            log.warning("master_unreadable", path=path, error=str(exc))
            continue
        keys += sorted(k for k in changed if k in masters and k not in keys)
    scripts = [p for p in paths if p.startswith("benchmarks/")]
    if scripts:
        from app.flows.bump import read_master_configs

        if not masters:
            for text in read_master_configs(gw, head_repo, head_sha, cfg).values():
                try:
                    masters.update(parse_master(text))
                except RecipeError:
                    continue
        found = keys_for_paths(scripts, masters)
        if not found:
            # A script of a key archived to configs/deprecated/: watch it anyway, so the PR gets
            # the clear "archived" explanation instead of silence.
            archived: dict[str, Any] = {}
            for text in read_master_configs(gw, head_repo, head_sha, cfg, archived=True).values():
                try:
                    archived.update(parse_master(text))
                except RecipeError:
                    continue
            found = keys_for_paths(scripts, archived)
        keys += sorted(k for k in found if k not in keys)
    return keys


def handle_pull_request(
    session: Session, gw: Any, repo: str, action: str, pull: dict[str, Any], actor: str | None = None
) -> list[Evaluation]:
    """pull_request opened/edited/synchronize/reopened/closed."""
    number = int(pull["number"])
    watches = _watches_for_pr(session, repo, number)
    if action == "closed":
        if not watches:
            raise HandlerSkipped("no watch on this PR")
        for w in watches:
            if w.state != WatchState.CLOSED:
                w.state, w.reason = WatchState.CLOSED, "the recipe PR was closed"
        session.flush()
        return []
    refs = parse_dependency_refs(str(pull.get("body") or ""), default_repo=None)
    if not refs and not any(w.dependencies for w in watches):
        raise HandlerSkipped("the PR declares no upstream dependencies")
    cfg = bot_config(session, gw, repo)
    if refs and (not watches or action in ("opened", "reopened", "edited")):
        keys = target_keys(gw, repo, pull, cfg)
        if not keys and not watches:
            log.warning("no_target_keys", repo=repo, pr=number)
        for key in keys:
            if key not in {w.config_key for w in watches}:
                watches.append(ensure_watch(session, repo, number, key, "body"))
    for w in watches:
        sync_dependencies(session, w, refs, source="body", actor=actor, authoritative=True)
        if action == "reopened" and w.state == WatchState.CLOSED:
            w.state = WatchState.WAITING
    evals = [evaluate_watch(session, gw, w, pull=pull, publish=False) for w in watches]
    publish_status(session, gw, repo, number)
    return evals


def poll_watches(
    session: Session, gw: Any = None, *, http: Any = None, commit: bool = False
) -> dict[str, int]:
    """One poll cycle over active watches (beat). Each recipe PR and dependency is read with
    ``If-None-Match``: when nothing changed, the cycle costs no rate-limited call."""
    gw = gw or session_gateway(session)
    watches = list(
        session.scalars(select(Watch).where(Watch.state.in_(WatchState.ACTIVE)).order_by(Watch.id))
    )
    memo: dict[str, TagState] = {}
    counts = {"watches": len(watches), "bumped": 0, "errors": 0}
    pulls: dict[tuple[str, int], tuple[dict[str, Any], bool]] = {}
    for watch in watches:
        try:
            pull, changed = None, True
            if watch.pr_number:
                key = (watch.repo, watch.pr_number)
                if key not in pulls:
                    got = gw.get_pull_conditional(watch.repo, watch.pr_number)
                    pulls[key] = (got.data, got.changed)
                pull, changed = pulls[key]
                if pull.get("state") == "closed":
                    watch.state, watch.reason = WatchState.CLOSED, "the recipe PR was closed"
                    continue
            result = evaluate_watch(
                session,
                gw,
                watch,
                pull=pull,
                pull_changed=changed or not watch.pinned_image,
                http=http,
                tag_memo=memo,
            )
            counts["bumped"] += int(result.bumped)
            if commit:
                session.commit()
        except Exception as exc:
            counts["errors"] += 1
            log.exception("watch_check_failed", watch=watch.id, error=str(exc))
            if commit:
                session.rollback()
            elif not isinstance(exc, TransientError):
                raise
    return counts


def check_watch(session: Session, watch_id: int, gw: Any = None, *, http: Any = None) -> Evaluation | None:
    watch = session.get(Watch, watch_id)
    if watch is None:
        return None
    gw = gw or session_gateway(session)
    pull = None
    changed = True
    if watch.pr_number:
        got = gw.get_pull_conditional(watch.repo, watch.pr_number)
        pull, changed = got.data, got.changed
    return evaluate_watch(
        session, gw, watch, pull=pull, pull_changed=changed or not watch.pinned_image, http=http
    )


def apply_config_watches(session: Session, gw: Any, repo: str, cfg: BotConfig) -> list[Watch]:
    """Watches declared in `.github/sweepbot.yml` (source ``config``)."""
    out = []
    for spec in cfg.watches:
        watch = ensure_watch(session, repo, spec.pr or 0, spec.config_key, "config")
        refs = [DepRef.parse(r) for r in spec.depends_on]
        sync_dependencies(session, watch, refs, source="config", actor="config", authoritative=True)
        out.append(watch)
    return out


def handle_push(session: Session, gw: Any, payload: dict[str, Any]) -> list[Watch]:
    """A push to the default branch that touches the bot config re-reads it (default branch only)."""
    from app.flows.botconfig import CONFIG_PATH

    repo_info = payload.get("repository") or {}
    repo = str(repo_info.get("full_name") or "")
    default = str(repo_info.get("default_branch") or repo_info.get("master_branch") or "main")
    if payload.get("ref") != f"refs/heads/{default}":
        raise HandlerSkipped("not a push to the default branch")
    touched = {
        p
        for c in payload.get("commits") or []
        for k in ("added", "modified", "removed")
        for p in c.get(k) or []
    }
    # A push payload lists at most 20 commits: past that, the file list is incomplete, so re-read.
    listed = payload.get("commits") or []
    if listed and len(listed) < 20 and CONFIG_PATH not in touched:
        raise HandlerSkipped(f"{CONFIG_PATH} not touched")
    cfg = read_bot_config(session, gw, repo, default_branch=default)
    return apply_config_watches(session, gw, repo, cfg)


# ================================================================= command entry points (app.flows.commands)


def _pr_watches_or_create(
    session: Session, gw: Any, repo: str, pr_number: int
) -> tuple[list[Watch], dict[str, Any]]:
    pull = gw.get_pull(repo, pr_number)
    watches = _watches_for_pr(session, repo, pr_number)
    if not watches:
        cfg = bot_config(session, gw, repo)
        watches = [
            ensure_watch(session, repo, pr_number, k, "command") for k in target_keys(gw, repo, pull, cfg)
        ]
    return watches, pull


def _summary(evals: Sequence[Evaluation], watches: Sequence[Watch]) -> str:
    parts = []
    for w, e in zip(watches, evals, strict=False):
        parts.append(f"`{w.config_key}`: {e.message or e.decision.reason}")
    return "; ".join(parts)


def add_dependencies(
    session: Session, gw: Any, *, repo: str, pr_number: int, refs: list[DepRef], actor: str
) -> str:
    """``/depends-on A B``: add, re-evaluate now, and say what happens next."""
    if not refs:
        return "No dependency given: write `/depends-on owner/repo#N` (e.g. vllm-project/vllm#47269)."
    watches, pull = _pr_watches_or_create(session, gw, repo, pr_number)
    if not watches:
        return (
            "I could not tell which config key this PR is about: name it in the PR body with "
            "`Config-Key: <key>` and run the command again."
        )
    added: list[str] = []
    for w in watches:
        a, _ = sync_dependencies(session, w, refs, source="command", actor=actor)
        added += [x for x in a if x not in added]
        if w.state in (WatchState.CLOSED, WatchState.DONE):
            w.state = WatchState.WAITING
    evals = [evaluate_watch(session, gw, w, pull=pull, publish=False) for w in watches]
    publish_status(session, gw, repo, pr_number)
    head = (
        f"Added {', '.join(added)}." if added else "Already tracked: " + ", ".join(str(r) for r in refs) + "."
    )
    return f"{head} {_summary(evals, watches)}"


def drop_dependencies(
    session: Session, gw: Any, *, repo: str, pr_number: int, refs: list[DepRef], actor: str
) -> str:
    """``/depends-on drop A``: stop waiting for A, re-evaluate now (the bump may happen right away)."""
    if not refs:
        return "No dependency given: write `/depends-on drop owner/repo#N`."
    watches = _watches_for_pr(session, repo, pr_number)
    wanted = {(r.repo, r.number) for r in refs}
    dropped: list[str] = []
    for w in watches:
        for d in w.dependencies:
            if (d.dep_repo, d.dep_number) in wanted and not d.dropped:
                d.dropped, d.dropped_by = True, actor
                if d.ref not in dropped:
                    dropped.append(d.ref)
    if not dropped:
        return f"{', '.join(str(r) for r in refs)} is not a tracked dependency of this PR; nothing dropped."
    session.flush()
    pull = gw.get_pull(repo, pr_number)
    active = [w for w in watches if w.state != WatchState.CLOSED]
    evals = [evaluate_watch(session, gw, w, pull=pull, publish=False) for w in active]
    publish_status(session, gw, repo, pr_number)
    return f"Dropped {', '.join(dropped)}. {_summary(evals, active)}"


def request_bump(session: Session, gw: Any, *, repo: str, pr_number: int, actor: str) -> str:
    """``/bump``: check readiness now and bump if ready; else say what it waits for."""
    watches, pull = _pr_watches_or_create(session, gw, repo, pr_number)
    if not watches:
        return (
            "Nothing to bump: this PR declares no upstream dependency and names no config key "
            "(add `Depends-On: owner/repo#N` to the body or use `/depends-on`)."
        )
    evals = [evaluate_watch(session, gw, w, pull=pull, publish=False) for w in watches]
    publish_status(session, gw, repo, pr_number)
    return _summary(evals, watches)


def deps_status(session: Session) -> list[dict[str, Any]]:
    """Every watch with its dependencies and chosen nightly (CLI, dashboard). Once a bump has
    happened the chosen nightly is the pinned one; a newer one containing everything is listed
    apart (``newest_containing``), never as chosen."""
    from app.core.nightlies import label_nightlies

    bumped: dict[int, str] = {}
    for b in session.scalars(select(Bump).where(Bump.state.in_(("committed", "already"))).order_by(Bump.id)):
        bumped[b.watch_id] = b.image  # the newest wins
    out = []
    for w in session.scalars(select(Watch).order_by(Watch.repo, Watch.pr_number, Watch.config_key)):
        labels = label_nightlies(
            pinned_image=w.pinned_image, newest_tag=w.chosen_tag, bumped_image=bumped.get(w.id)
        )
        out.append(
            {
                "id": w.id,
                "repo": w.repo,
                "pr": w.pr_number or None,
                "config_key": w.config_key,
                "state": w.state,
                "decision": w.decision,
                "reason": w.reason,
                "image_repo": w.image_repo,
                "pinned_image": w.pinned_image,
                "pinned_deleted": w.pinned_missing_since is not None,
                "chosen_nightly": labels.chosen,
                "bumped": labels.bumped,
                "newest_containing": labels.newest_containing,
                "first_containing": w.first_containing_tag,
                "dependencies": [
                    {
                        "ref": d.ref,
                        "state": d.state,
                        "merge_sha": d.merge_sha,
                        "dropped": d.dropped,
                        "contained_in": d.contained_in,
                        "source": d.source,
                    }
                    for d in w.dependencies
                ],
            }
        )
    return out


# ============================================================================================ handlers


def on_pull_request(ctx: HandlerContext) -> None:
    payload = ctx.event.payload
    repo = ctx.event.repo
    pull = payload.get("pull_request")
    if not repo or not isinstance(pull, dict):
        raise HandlerSkipped("no repository or pull_request in the payload")
    handle_pull_request(ctx.session, ctx.gateway(), repo, str(ctx.event.action), pull, ctx.event.sender)


for _action in ("opened", "edited", "synchronize", "reopened", "closed"):
    router.register("pull_request", _action)(on_pull_request)


@router.register("push")
def on_push(ctx: HandlerContext) -> None:
    handle_push(ctx.session, ctx.gateway(), ctx.event.payload)
