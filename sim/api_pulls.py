"""Pull requests, issues, comments, reactions and labels."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from sim import render, render_git
from sim.api_common import (
    Ctx,
    Resp,
    _body,
    _int,
    _repo,
    _require_auth,
    _require_write,
    paginate,
    route,
)
from sim.world import REACTIONS, SimError, iso

# -- pulls -----------------------------------------------------------------------------------------


@route("GET", "/repos/{owner}/{repo}/pulls", "pulls/list")
def list_pulls(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    state = ctx.query.get("state", "open")
    if state not in ("open", "closed", "all"):
        raise SimError(422, "state must be open, closed or all")
    head, base = ctx.query.get("head"), ctx.query.get("base")
    pulls = []
    for pr in repo.pulls.values():
        if state != "all" and pr.state != state:
            continue
        if base and pr.base_ref != base:
            continue
        if head:
            owner, _, branch = head.partition(":")
            hrepo = ctx.world.repos.get(pr.head_repo)
            if not branch or not hrepo or hrepo.owner != owner or pr.head_ref != branch:
                continue
        pulls.append(pr)
    direction = ctx.query.get("direction", "desc")
    pulls.sort(
        key=lambda x: x.created_at if ctx.query.get("sort", "created") == "created" else x.updated_at,
        reverse=direction == "desc",
    )
    if direction == "desc":
        pulls.sort(key=lambda x: x.number, reverse=True)
    return paginate(ctx, [render.pull_request_simple(ctx.world, repo, pr) for pr in pulls])


@route("POST", "/repos/{owner}/{repo}/pulls", "pulls/create")
def create_pull(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_auth(ctx)
    b = _body(ctx)
    for k in ("head", "base"):
        if not isinstance(b.get(k), str):
            raise SimError(422, f'Invalid request.\n\n"{k}" is required.')
    if not b.get("title"):
        raise SimError(422, 'Invalid request.\n\n"title" is required.')
    head_ref = "refs/heads/" + str(b["head"]).rpartition(":")[2]
    if head_ref in repo.refs and not ctx.world.ref_visible(repo, head_ref):
        # what GitHub answers when the branch pushed a moment ago is not visible yet
        raise SimError(
            422, "Validation Failed", [{"resource": "PullRequest", "field": "head", "code": "invalid"}]
        )
    pr = ctx.world.open_pull(
        repo.full_name,
        b["head"],
        b["base"],
        b["title"],
        b.get("body") or "",
        user=ctx.identity.actor(ctx.world),
    )
    return Resp(201, render.pull_request(ctx.world, repo, pr))


@route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", "pulls/get")
def get_pull(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    pr = ctx.world.pull(repo.full_name, _int(p["pull_number"], "pull_number"))
    return Resp(200, render.pull_request(ctx.world, repo, pr))


@route("PATCH", "/repos/{owner}/{repo}/pulls/{pull_number}", "pulls/update")
def update_pull(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    n = _int(p["pull_number"], "pull_number")
    pr = ctx.world.pull(repo.full_name, n)
    actor = ctx.identity.actor(ctx.world)
    if actor != pr.user:
        _require_write(ctx, repo)
    b = _body(ctx)
    if b.get("state") not in (None, "open", "closed"):
        raise SimError(422, "state must be open or closed")
    ctx.world.update_pull(
        repo.full_name, n, title=b.get("title"), body=b.get("body"), state=b.get("state"), user=actor
    )
    return Resp(200, render.pull_request(ctx.world, repo, pr))


@route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/files", "pulls/list-files")
def pull_files(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    pr = ctx.world.pull(repo.full_name, _int(p["pull_number"], "pull_number"))
    return paginate(ctx, render.changed_files(ctx.world, repo, pr))


@route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/commits", "pulls/list-commits")
def pull_commits(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    shas = ctx.world.pull_commits(repo.full_name, _int(p["pull_number"], "pull_number"))
    source = ctx.world.pull(repo.full_name, _int(p["pull_number"], "pull_number")).head_repo
    store = ctx.world.repos.get(source, repo)
    return paginate(
        ctx,
        [render_git.rest_commit(ctx.world, store if s in store.objects.commits else repo, s) for s in shas],
    )


@route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/merge", "pulls/check-if-merged")
def check_merged(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    pr = ctx.world.pull(repo.full_name, _int(p["pull_number"], "pull_number"))
    return Resp(204) if pr.merged else Resp(404)  # documented without a body


@route("PUT", "/repos/{owner}/{repo}/pulls/{pull_number}/merge", "pulls/merge")
def merge_pull(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    b = _body(ctx)
    sha = ctx.world.merge_pull(
        repo.full_name,
        _int(p["pull_number"], "pull_number"),
        merger=ctx.identity.actor(ctx.world),
        commit_title=b.get("commit_title"),
        sha=b.get("sha"),
        method=str(b.get("merge_method") or "merge"),
    )
    return Resp(200, {"sha": sha, "merged": True, "message": "Pull Request successfully merged"})


# -- issues ----------------------------------------------------------------------------------------


@route("GET", "/repos/{owner}/{repo}/issues", "issues/list-for-repo")
def list_issues(ctx: Ctx, p: dict[str, str]) -> Resp:
    # As GitHub: pull requests are issues too (they carry `pull_request`); newest first by default.
    repo = _repo(ctx, p)
    state = ctx.query.get("state", "open")
    if state not in ("open", "closed", "all"):
        raise SimError(422, "state must be open, closed or all")
    creator = ctx.query.get("creator")
    items: list[tuple[float, int, dict[str, Any]]] = []
    for issue in repo.issues.values():
        items.append((issue.created_at, issue.number, render.rest_issue(ctx.world, repo, issue)))
    for pr in repo.pulls.values():
        items.append((pr.created_at, pr.number, render.hook_issue(ctx.world, repo, pr)))
    rows = [
        d
        for _, _, d in sorted(items, key=lambda t: (t[0], t[1]), reverse=ctx.query.get("direction") != "asc")
    ]
    if state != "all":
        rows = [d for d in rows if d["state"] == state]
    if creator:
        rows = [d for d in rows if d["user"]["login"] == creator]
    return paginate(ctx, rows)


@route("POST", "/repos/{owner}/{repo}/issues", "issues/create")
def create_issue(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_auth(ctx)
    b = _body(ctx)
    title = b.get("title")
    if not isinstance(title, str) or not title.strip():
        raise SimError(
            422, "Validation Failed", [{"resource": "Issue", "code": "missing_field", "field": "title"}]
        )
    body = b.get("body") or ""
    if not isinstance(body, str) or len(body) > 65536:
        raise SimError(422, "body must be a string of at most 65536 characters")
    labels = [str(x) for x in b.get("labels") or [] if isinstance(x, str)]
    issue = ctx.world.open_issue(repo.full_name, title, body, ctx.identity.actor(ctx.world), labels)
    url = f"{render.api(ctx.world)}/repos/{repo.full_name}/issues/{issue.number}"
    return Resp(201, render.rest_issue(ctx.world, repo, issue), {"Location": url})


@route("GET", "/repos/{owner}/{repo}/issues/{issue_number}", "issues/get")
def get_issue(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    n = _int(p["issue_number"], "issue_number")
    if n in repo.pulls:
        return Resp(200, render.hook_issue(ctx.world, repo, repo.pulls[n]))
    return Resp(200, render.rest_issue(ctx.world, repo, ctx.world.issue(repo.full_name, n)))


@route("PATCH", "/repos/{owner}/{repo}/issues/{issue_number}", "issues/update")
def update_issue(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_auth(ctx)
    n = _int(p["issue_number"], "issue_number")
    issue = ctx.world.issue(repo.full_name, n)
    if issue.user != ctx.identity.actor(ctx.world):
        _require_write(ctx, repo)
    b = _body(ctx)
    body = b.get("body")
    if body is not None and (not isinstance(body, str) or len(body) > 65536):
        raise SimError(422, "body must be a string of at most 65536 characters")
    fields = {k: b.get(k) for k in ("title", "body", "state", "state_reason") if k in b}
    issue = ctx.world.update_issue(repo.full_name, n, **fields)
    return Resp(200, render.rest_issue(ctx.world, repo, issue))


# -- issue comments and reactions ------------------------------------------------------------------


@route("GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments", "issues/list-comments")
def list_comments(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    n = _int(p["issue_number"], "issue_number")
    if n not in repo.pulls:
        raise SimError(404, "Not Found")
    since = ctx.query.get("since")
    comments = sorted((c for c in repo.comments.values() if c.issue_number == n), key=lambda c: c.id)
    if since:
        comments = [c for c in comments if iso(c.updated_at) >= since]
    return paginate(ctx, [render.rest_comment(ctx.world, repo, c) for c in comments])


@route("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", "issues/create-comment")
def create_comment(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_auth(ctx)
    b = _body(ctx)
    if not isinstance(b.get("body"), str) or not b["body"]:
        raise SimError(422, 'Invalid request.\n\n"body" is required.')
    if len(b["body"]) > 65536:
        raise SimError(422, "Body is too long (maximum is 65536 characters)")
    c = ctx.world.add_comment(
        repo.full_name, _int(p["issue_number"], "issue_number"), ctx.identity.actor(ctx.world), b["body"]
    )
    url = f"{render.api(ctx.world)}/repos/{repo.full_name}/issues/comments/{c.id}"
    return Resp(201, render.rest_comment(ctx.world, repo, c), {"Location": url})


@route("GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}", "issues/get-comment")
def get_comment(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    c = ctx.world.comment(repo.full_name, _int(p["comment_id"], "comment_id"))
    return Resp(200, render.rest_comment(ctx.world, repo, c))


@route("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}", "issues/update-comment")
def update_comment(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_auth(ctx)
    cid = _int(p["comment_id"], "comment_id")
    c = ctx.world.comment(repo.full_name, cid)
    actor = ctx.identity.actor(ctx.world)
    if c.user != actor:
        _require_write(ctx, repo)
    b = _body(ctx)
    if not isinstance(b.get("body"), str):
        raise SimError(422, 'Invalid request.\n\n"body" is required.')
    ctx.world.edit_comment(repo.full_name, cid, b["body"], user=actor)
    return Resp(200, render.rest_comment(ctx.world, repo, c))


@route(
    "GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", "reactions/list-for-issue-comment"
)
def list_reactions(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    c = ctx.world.comment(repo.full_name, _int(p["comment_id"], "comment_id"))
    content = ctx.query.get("content")
    rs = [r for r in c.reactions if content is None or r.content == content]
    return paginate(ctx, [render.reaction(ctx.world, r) for r in rs])


@route(
    "POST",
    "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
    "reactions/create-for-issue-comment",
)
def create_reaction(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_auth(ctx)
    b = _body(ctx)
    if b.get("content") not in REACTIONS:
        raise SimError(422, f"content must be one of {', '.join(REACTIONS)}")
    r, created = ctx.world.add_reaction(
        repo.full_name, _int(p["comment_id"], "comment_id"), ctx.identity.actor(ctx.world), b["content"]
    )
    return Resp(201 if created else 200, render.reaction(ctx.world, r))


@route("POST", "/repos/{owner}/{repo}/issues/{issue_number}/labels", "issues/add-labels")
def add_labels(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    b = _body(ctx)
    labels = b.get("labels")
    if not isinstance(labels, list) or not all(isinstance(x, str) and x for x in labels):
        raise SimError(422, "Invalid request.\n\nFor 'labels', an array of label names is required.")
    names = ctx.world.add_labels(
        repo.full_name, _int(p["issue_number"], "issue_number"), labels, ctx.identity.actor(ctx.world)
    )
    return Resp(200, [render.label(ctx.world, repo, n) for n in names])


@route("DELETE", "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}", "issues/remove-label")
def remove_label(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    names = ctx.world.remove_label(
        repo.full_name,
        _int(p["issue_number"], "issue_number"),
        unquote(p["name"]),
        ctx.identity.actor(ctx.world),
    )
    return Resp(200, [render.label(ctx.world, repo, n) for n in names])


@route("GET", "/repos/{owner}/{repo}/issues/{issue_number}/labels", "issues/list-labels-on-issue")
def list_labels(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    pr = ctx.world.pull(repo.full_name, _int(p["issue_number"], "issue_number"))
    return paginate(ctx, [render.label(ctx.world, repo, n) for n in pr.labels])
