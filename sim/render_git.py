"""JSON shapes of git objects and repository contents (REST)."""

from __future__ import annotations

import base64
from typing import Any

from sim.models import Repo, iso
from sim.render import api, html, node_id, user
from sim.world_state import WorldState as World


def git_commit(world: World, repo: Repo, sha: str) -> dict[str, Any]:
    c = repo.objects.commits[sha]
    u = f"{api(world)}/repos/{repo.full_name}"

    def sig(s: Any) -> dict[str, Any]:
        return {"name": s.name, "email": s.email, "date": iso(s.date)}

    return {
        "sha": sha,
        "node_id": node_id("C_", sha),
        "url": f"{u}/git/commits/{sha}",
        "html_url": f"{html(world)}/{repo.full_name}/commit/{sha}",
        "author": sig(c.author),
        "committer": sig(c.committer),
        "message": c.message,
        "tree": {"sha": c.tree, "url": f"{u}/git/trees/{c.tree}"},
        "parents": [
            {
                "sha": p,
                "url": f"{u}/git/commits/{p}",
                "html_url": f"{html(world)}/{repo.full_name}/commit/{p}",
            }
            for p in c.parents
        ],
        "verification": {
            "verified": False,
            "reason": "unsigned",
            "signature": None,
            "payload": None,
            "verified_at": None,
        },
    }


def rest_commit(world: World, repo: Repo, sha: str) -> dict[str, Any]:
    """The `commit` schema (as in compare's commits and base_commit)."""
    c = repo.objects.commits[sha]
    u = f"{api(world)}/repos/{repo.full_name}"
    g = git_commit(world, repo, sha)
    author = world.users.get(c.author.name)
    committer = world.users.get(c.committer.name)
    return {
        "url": f"{u}/commits/{sha}",
        "sha": sha,
        "node_id": node_id("C_", sha),
        "html_url": f"{html(world)}/{repo.full_name}/commit/{sha}",
        "comments_url": f"{u}/commits/{sha}/comments",
        "commit": {
            "url": g["url"],
            "author": g["author"],
            "committer": g["committer"],
            "message": c.message,
            "comment_count": 0,
            "tree": g["tree"],
            "verification": g["verification"],
        },
        "author": user(world, author.login) if author else None,
        "committer": user(world, committer.login) if committer else None,
        "parents": g["parents"],
    }


def git_tree(world: World, repo: Repo, sha: str, recursive: bool = False) -> dict[str, Any]:
    u = f"{api(world)}/repos/{repo.full_name}"
    entries = []

    def walk(tsha: str, prefix: str) -> None:
        for e in repo.objects.trees[tsha]:
            item: dict[str, Any] = {"path": prefix + e.name, "mode": e.mode, "type": e.type, "sha": e.sha}
            if e.type == "blob":
                item["size"] = len(repo.objects.blobs[e.sha])
                item["url"] = f"{u}/git/blobs/{e.sha}"
            elif e.type == "tree":
                item["url"] = f"{u}/git/trees/{e.sha}"
            entries.append(item)
            if recursive and e.type == "tree":
                walk(e.sha, prefix + e.name + "/")

    walk(sha, "")
    return {"sha": sha, "url": f"{u}/git/trees/{sha}", "tree": entries, "truncated": False}


def git_ref(world: World, repo: Repo, ref: str) -> dict[str, Any]:
    sha = repo.refs[ref]
    u = f"{api(world)}/repos/{repo.full_name}"
    return {
        "ref": ref,
        "node_id": node_id("REF_", f"{repo.id}{ref}"),
        "url": f"{u}/git/{ref}",
        "object": {"type": "commit", "sha": sha, "url": f"{u}/git/commits/{sha}"},
    }


def content_file(world: World, repo: Repo, path: str, blob: str, ref: str) -> dict[str, Any]:
    data = repo.objects.blobs[blob]
    u = f"{api(world)}/repos/{repo.full_name}"
    h = f"{html(world)}/{repo.full_name}/blob/{ref}/{path}"
    git_url = f"{u}/git/blobs/{blob}"
    self_url = f"{u}/contents/{path}?ref={ref}"
    return {
        "type": "file",
        "encoding": "base64",
        "size": len(data),
        "name": path.rsplit("/", 1)[-1],
        "path": path,
        "content": base64.encodebytes(data).decode(),
        "sha": blob,
        "url": self_url,
        "git_url": git_url,
        "html_url": h,
        "download_url": f"{html(world)}/{repo.full_name}/raw/{ref}/{path}",
        "_links": {"self": self_url, "git": git_url, "html": h},
    }


def content_dir(world: World, repo: Repo, path: str, tree: str, ref: str) -> list[dict[str, Any]]:
    u = f"{api(world)}/repos/{repo.full_name}"
    out = []
    for e in repo.objects.trees[tree]:
        p = f"{path.strip('/')}/{e.name}" if path.strip("/") else e.name
        self_url = f"{u}/contents/{p}?ref={ref}"
        git_url = f"{u}/git/{'trees' if e.type == 'tree' else 'blobs'}/{e.sha}"
        h = f"{html(world)}/{repo.full_name}/{'tree' if e.type == 'tree' else 'blob'}/{ref}/{p}"
        out.append(
            {
                "type": "dir" if e.type == "tree" else "file",
                "size": len(repo.objects.blobs[e.sha]) if e.type == "blob" else 0,
                "name": e.name,
                "path": p,
                "sha": e.sha,
                "url": self_url,
                "git_url": git_url,
                "html_url": h,
                "download_url": f"{html(world)}/{repo.full_name}/raw/{ref}/{p}" if e.type == "blob" else None,
                "_links": {"self": self_url, "git": git_url, "html": h},
            }
        )
    return out
