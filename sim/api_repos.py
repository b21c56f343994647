"""Repositories, contents, compare, collaborators, and git data (blobs, trees, commits, refs)."""

from __future__ import annotations

import base64
import time

from sim import render, render_git
from sim.api_common import (
    Ctx,
    Resp,
    _body,
    _repo,
    _require_write,
    paginate,
    route,
)
from sim.gitgraph import GitError, Signature
from sim.world import SimError

# -- repos and contents ----------------------------------------------------------------------------


@route("GET", "/repos/{owner}/{repo}", "repos/get")
def get_repo(ctx: Ctx, p: dict[str, str]) -> Resp:
    return Resp(200, render.rest_repository(ctx.world, _repo(ctx, p)))


@route("GET", "/repos/{owner}/{repo}/contents/{path}", "repos/get-content")
def get_content(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    ref = ctx.query.get("ref") or repo.default_branch
    sha = ctx.world.resolve(repo, ref)
    path = p["path"].strip("/")
    entry = repo.objects.lookup(repo.objects.commits[sha].tree, path)
    if entry is None:
        raise SimError(404, "Not Found")
    if entry.type == "tree":
        return Resp(200, render_git.content_dir(ctx.world, repo, path, entry.sha, ref))
    return Resp(200, render_git.content_file(ctx.world, repo, path, entry.sha, ref))


@route("GET", "/repos/{owner}/{repo}/contents", "repos/get-content")
def get_root_content(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    ref = ctx.query.get("ref") or repo.default_branch
    sha = ctx.world.resolve(repo, ref)
    return Resp(200, render_git.content_dir(ctx.world, repo, "", repo.objects.commits[sha].tree, ref))


@route("PUT", "/repos/{owner}/{repo}/contents/{path}", "repos/create-or-update-file-contents")
def put_content(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    b = _body(ctx)
    if "message" not in b or "content" not in b:
        raise SimError(422, 'Invalid request.\n\n"message" and "content" are required.')
    branch = b.get("branch") or repo.default_branch
    path = p["path"].strip("/")
    head = repo.refs.get(f"refs/heads/{branch}")
    existing = repo.objects.lookup(repo.objects.commits[head].tree, path) if head else None
    if existing is not None and b.get("sha") != existing.sha:
        raise SimError(409, f"{path} does not match {b.get('sha') or 'the missing sha'}")
    if existing is None and b.get("sha"):
        raise SimError(422, "sha given for a file that does not exist")
    try:
        data = base64.b64decode(b["content"], validate=False)
    except ValueError as exc:
        raise SimError(422, "content is not valid Base64") from exc
    author = ctx.identity.actor(ctx.world)
    sha = ctx.world.commit_files(repo.full_name, branch, {path: data}, b["message"], author=author)
    entry = repo.objects.lookup(repo.objects.commits[sha].tree, path)
    assert entry is not None
    content = render_git.content_file(ctx.world, repo, path, entry.sha, branch)
    content.pop("encoding")
    content.pop("content")
    return Resp(
        201 if existing is None else 200,
        {"content": content, "commit": render_git.git_commit(ctx.world, repo, sha)},
    )


@route("GET", "/repos/{owner}/{repo}/compare/{basehead}", "repos/compare-commits")
def compare_commits(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    if "..." not in p["basehead"]:
        raise SimError(404, "Not Found")
    base, _, head = p["basehead"].partition("...")
    b, h, cmp = ctx.world.compare(repo.full_name, base, head)
    store = repo.objects
    files = render.diff_files(ctx.world, repo, store, cmp.merge_base or b, h) if cmp.merge_base else []
    u = render.html(ctx.world) + f"/{repo.full_name}"
    try:
        per_page = max(1, min(250, int(ctx.query.get("per_page", "250"))))
        page = max(1, int(ctx.query.get("page", "1")))
    except ValueError as exc:
        raise SimError(422, "per_page and page must be integers") from exc
    shown = cmp.commits[(page - 1) * per_page : page * per_page]
    body = {
        "url": f"{render.api(ctx.world)}/repos/{repo.full_name}/compare/{base}...{head}",
        "html_url": f"{u}/compare/{base}...{head}",
        "permalink_url": f"{u}/compare/{b[:7]}...{h[:7]}",
        "diff_url": f"{u}/compare/{base}...{head}.diff",
        "patch_url": f"{u}/compare/{base}...{head}.patch",
        "base_commit": render_git.rest_commit(ctx.world, repo, b),
        "merge_base_commit": render_git.rest_commit(ctx.world, repo, cmp.merge_base or b),
        "status": cmp.status,
        "ahead_by": cmp.ahead_by,
        "behind_by": cmp.behind_by,
        "total_commits": len(cmp.commits),
        "commits": [render_git.rest_commit(ctx.world, repo, c) for c in shown],
        "files": files[:300],
    }
    return Resp(200, body)


@route(
    "GET",
    "/repos/{owner}/{repo}/collaborators/{username}/permission",
    "repos/get-collaborator-permission-level",
)
def collaborator_permission(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    ident = ctx.identity
    if ctx.world.faults.forbid_permission_check or (
        ident.kind == "user"
        and ident.login
        and ctx.world.permission(repo.full_name, ident.login) not in ("admin", "maintain", "write")
    ):
        raise SimError(403, "Must have push access to view repository collaborators.")
    if p["username"] not in ctx.world.users:
        raise SimError(404, f"{p['username']} is not a user")
    role = ctx.world.role(repo.full_name, p["username"])
    perm = ctx.world.base_role(role)  # a custom role grants its base role's permissions
    # the legacy `permission` field folds maintain into write and triage into read, as GitHub does
    legacy = {"maintain": "write", "triage": "read"}.get(perm, perm)
    u = render.user(ctx.world, p["username"])
    u["permissions"] = {
        "admin": perm == "admin",
        "maintain": perm in ("admin", "maintain"),
        "push": perm in ("admin", "maintain", "write"),
        "triage": perm in ("admin", "maintain", "write", "triage"),
        "pull": perm != "none",
    }
    u["role_name"] = role
    return Resp(200, {"permission": legacy, "role_name": role, "user": u})


# -- git data --------------------------------------------------------------------------------------


@route("POST", "/repos/{owner}/{repo}/git/blobs", "git/create-blob")
def create_blob(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    b = _body(ctx)
    if not isinstance(b.get("content"), str):
        raise SimError(422, 'Invalid request.\n\n"content" is required and must be a string.')
    enc = b.get("encoding", "utf-8")
    if enc == "base64":
        data = base64.b64decode(b["content"])
    elif enc in ("utf-8", "utf8"):
        data = b["content"].encode()
    else:
        raise SimError(422, "encoding must be utf-8 or base64")
    sha = repo.objects.put_blob(data)
    return Resp(201, {"url": f"{render.api(ctx.world)}/repos/{repo.full_name}/git/blobs/{sha}", "sha": sha})


@route("GET", "/repos/{owner}/{repo}/git/blobs/{file_sha}", "git/get-blob")
def get_blob(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    data = repo.objects.blobs.get(p["file_sha"])
    if data is None:
        raise SimError(404, "Not Found")
    return Resp(
        200,
        {
            "sha": p["file_sha"],
            "node_id": render.node_id("B_", p["file_sha"]),
            "size": len(data),
            "url": f"{render.api(ctx.world)}/repos/{repo.full_name}/git/blobs/{p['file_sha']}",
            "content": base64.encodebytes(data).decode(),
            "encoding": "base64",
        },
    )


@route("POST", "/repos/{owner}/{repo}/git/trees", "git/create-tree")
def create_tree(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    b = _body(ctx)
    items = b.get("tree")
    if not isinstance(items, list):
        raise SimError(422, 'Invalid request.\n\n"tree" is required and must be an array.')
    files: dict[str, tuple[str, str]] = {}
    base = b.get("base_tree")
    if base:
        if base not in repo.objects.trees:
            raise SimError(422, f"base_tree {base} is not a tree")
        files = repo.objects.flatten(base)
    try:
        for it in items:
            path, mode = it.get("path"), it.get("mode", "100644")
            if not path or mode not in ("100644", "100755", "040000", "160000", "120000"):
                raise SimError(422, f"tree entry needs a path and a valid mode, got {it!r}")
            if "content" in it and it["content"] is not None:
                files[path] = (mode, repo.objects.put_blob(str(it["content"]).encode()))
            elif it.get("sha") is None:
                for k in [k for k in files if k == path or k.startswith(path + "/")]:
                    del files[k]
            elif mode == "040000" or it.get("type") == "tree":
                if it["sha"] not in repo.objects.trees:
                    raise SimError(422, f"tree.sha {it['sha']} is not a valid tree")
                for k in [k for k in files if k == path or k.startswith(path + "/")]:
                    del files[k]
                for sub, v in repo.objects.flatten(it["sha"]).items():
                    files[f"{path}/{sub}"] = v
            else:
                if it["sha"] not in repo.objects.blobs:
                    raise SimError(422, f"tree.sha {it['sha']} is not a valid blob")
                files[path] = (mode, it["sha"])
        sha = repo.objects.build_tree(files)
    except GitError as exc:
        raise SimError(422, str(exc)) from exc
    return Resp(201, render_git.git_tree(ctx.world, repo, sha))


@route("GET", "/repos/{owner}/{repo}/git/trees/{tree_sha}", "git/get-tree")
def get_tree(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    sha = p["tree_sha"]
    if sha not in repo.objects.trees:
        try:
            commit = ctx.world.resolve(repo, sha)
        except SimError as exc:
            raise SimError(404, "Not Found") from exc
        sha = repo.objects.commits[commit].tree
    recursive = ctx.query.get("recursive") not in (None, "", "0", "false")
    return Resp(200, render_git.git_tree(ctx.world, repo, sha, recursive))


@route("POST", "/repos/{owner}/{repo}/git/commits", "git/create-commit")
def create_commit(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    b = _body(ctx)
    if not isinstance(b.get("message"), str) or not isinstance(b.get("tree"), str):
        raise SimError(422, 'Invalid request.\n\n"message" and "tree" are required.')
    parents = b.get("parents") or []
    sig = ctx.world.signature(ctx.identity.actor(ctx.world))
    for role in ("author", "committer"):
        if isinstance(b.get(role), dict) and b[role].get("name") and b[role].get("email"):
            s = Signature(b[role]["name"], b[role]["email"], sig.date)
            sig = s if role == "author" else sig
    try:
        sha = repo.objects.put_commit(b["tree"], list(parents), sig, sig, b["message"])
    except GitError as exc:
        raise SimError(422, str(exc)) from exc
    return Resp(201, render_git.git_commit(ctx.world, repo, sha))


@route("GET", "/repos/{owner}/{repo}/git/commits/{commit_sha}", "git/get-commit")
def get_commit(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    if p["commit_sha"] not in repo.objects.commits:
        raise SimError(404, "Not Found")
    return Resp(200, render_git.git_commit(ctx.world, repo, p["commit_sha"]))


@route(
    "GET",
    "/repos/{owner}/{repo}/commits/{commit_sha}/pulls",
    "repos/list-pull-requests-associated-with-commit",
)
def commit_pulls(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    sha = ctx.world.resolve(repo, p["commit_sha"])
    pulls = ctx.world.pulls_with_commit(repo.full_name, sha)
    return paginate(ctx, [render.pull_request_simple(ctx.world, repo, pr) for pr in pulls])


@route("GET", "/repos/{owner}/{repo}/commits/{ref}", "repos/get-commit")
def get_repo_commit(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    sha = ctx.world.resolve(repo, p["ref"])
    d = render_git.rest_commit(ctx.world, repo, sha)
    parents = repo.objects.commits[sha].parents
    d["files"] = render.diff_files(ctx.world, repo, repo.objects, parents[0], sha) if parents else []
    return Resp(200, d)


@route("GET", "/repos/{owner}/{repo}/git/ref/{ref}", "git/get-ref")
def get_ref(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    ref = "refs/" + p["ref"]
    if ref not in repo.refs or not ctx.world.ref_visible(repo, ref):
        raise SimError(404, "Not Found")
    return Resp(200, render_git.git_ref(ctx.world, repo, ref))


@route("GET", "/repos/{owner}/{repo}/git/refs/{ref}", "git/get-ref")
def get_ref_legacy(ctx: Ctx, p: dict[str, str]) -> Resp:
    # PyGithub's get_git_ref() still calls the legacy plural path; GitHub serves it too
    return get_ref(ctx, p)


@route("GET", "/repos/{owner}/{repo}/git/matching-refs/{ref}", "git/list-matching-refs")
def matching_refs(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    prefix = "refs/" + p["ref"]
    refs = sorted(r for r in repo.refs if r.startswith(prefix))
    return paginate(ctx, [render_git.git_ref(ctx.world, repo, r) for r in refs])


@route("GET", "/repos/{owner}/{repo}/git/matching-refs", "git/list-matching-refs")
def all_refs(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    return paginate(ctx, [render_git.git_ref(ctx.world, repo, r) for r in sorted(repo.refs)])


@route("GET", "/repos/{owner}/{repo}/git/refs", "git/list-matching-refs")
def list_refs(ctx: Ctx, p: dict[str, str]) -> Resp:
    return all_refs(ctx, p)


@route("POST", "/repos/{owner}/{repo}/git/refs", "git/create-ref")
def create_ref(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    b = _body(ctx)
    ref, sha = b.get("ref"), b.get("sha")
    if not isinstance(ref, str) or not ref.startswith("refs/") or ref.count("/") < 2:
        raise SimError(422, "Reference name must start with 'refs/' and have at least two slashes.")
    if not isinstance(sha, str):
        raise SimError(422, 'Invalid request.\n\n"sha" is required.')
    ctx.world.set_ref(repo.full_name, ref, sha, create=True, pusher=ctx.identity.actor(ctx.world))
    lag = ctx.world.faults.ref_lag_s
    if lag > 0:  # eventual consistency: the new ref is not visible to the next calls for a moment
        repo.ref_visible_at[ref] = time.monotonic() + lag * ctx.world.settings.time_scale
    return Resp(201, render_git.git_ref(ctx.world, repo, ref))


@route("PATCH", "/repos/{owner}/{repo}/git/refs/{ref}", "git/update-ref")
def update_ref(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    b = _body(ctx)
    ref = "refs/" + p["ref"]
    if ref not in repo.refs:
        raise SimError(422, "Reference does not exist")
    if not isinstance(b.get("sha"), str):
        raise SimError(422, 'Invalid request.\n\n"sha" is required.')
    ctx.world.set_ref(
        repo.full_name, ref, b["sha"], force=bool(b.get("force")), pusher=ctx.identity.actor(ctx.world)
    )
    return Resp(200, render_git.git_ref(ctx.world, repo, ref))


@route("DELETE", "/repos/{owner}/{repo}/git/refs/{ref}", "git/delete-ref")
def delete_ref(ctx: Ctx, p: dict[str, str]) -> Resp:
    repo = _repo(ctx, p)
    _require_write(ctx, repo)
    ctx.world.delete_ref(repo.full_name, "refs/" + p["ref"])
    return Resp(204)
