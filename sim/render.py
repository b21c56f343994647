"""JSON shapes of GitHub objects, for REST responses and webhook payloads.

Webhook schemas (octokit) forbid unknown keys, so the hook_* shapes carry exactly the documented
key set; REST responses may carry more, so they reuse those shapes and add what REST documents.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
from typing import Any

from sim.models import Comment, Issue, Pull, Repo, iso
from sim.world_state import WorldState as World


def api(world: World) -> str:
    return world.settings.base_url.rstrip("/") + "/api/v3"


def html(world: World) -> str:
    return world.settings.base_url.rstrip("/")


def node_id(kind: str, ident: int | str) -> str:
    return base64.b64encode(f"{kind}{ident}".encode()).decode().rstrip("=")


def user(world: World, login: str) -> dict[str, Any]:
    u = world.add_user(login)
    a, h = api(world), html(world)
    return {
        "login": u.login,
        "id": u.id,
        "node_id": node_id("U_", u.id),
        "avatar_url": f"{h}/avatars/{u.login}",
        "gravatar_id": "",
        "url": f"{a}/users/{u.login}",
        "html_url": f"{h}/{u.login}",
        "followers_url": f"{a}/users/{u.login}/followers",
        "following_url": f"{a}/users/{u.login}/following{{/other_user}}",
        "gists_url": f"{a}/users/{u.login}/gists{{/gist_id}}",
        "starred_url": f"{a}/users/{u.login}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{a}/users/{u.login}/subscriptions",
        "organizations_url": f"{a}/users/{u.login}/orgs",
        "repos_url": f"{a}/users/{u.login}/repos",
        "events_url": f"{a}/users/{u.login}/events{{/privacy}}",
        "received_events_url": f"{a}/users/{u.login}/received_events",
        "type": u.type,
        "site_admin": False,
    }


def organization(world: World, login: str) -> dict[str, Any]:
    """The ``organization`` object of a webhook payload (shape of octokit's common schema)."""
    u = world.add_user(login, type="Organization")
    a, h = api(world), html(world)
    return {
        "login": u.login,
        "id": u.id,
        "node_id": node_id("O_", u.id),
        "url": f"{a}/orgs/{u.login}",
        "repos_url": f"{a}/orgs/{u.login}/repos",
        "events_url": f"{a}/orgs/{u.login}/events",
        "hooks_url": f"{a}/orgs/{u.login}/hooks",
        "issues_url": f"{a}/orgs/{u.login}/issues",
        "members_url": f"{a}/orgs/{u.login}/members{{/member}}",
        "public_members_url": f"{a}/orgs/{u.login}/public_members{{/member}}",
        "avatar_url": f"{h}/avatars/{u.login}",
        "description": "",
    }


def repo_lite(world: World, repo: Repo) -> dict[str, Any]:
    a, h = api(world), html(world)
    u = f"{a}/repos/{repo.full_name}"
    return {
        "id": repo.id,
        "node_id": node_id("R_", repo.id),
        "name": repo.name,
        "full_name": repo.full_name,
        "private": repo.private,
        "owner": user(world, repo.owner),
        "html_url": f"{h}/{repo.full_name}",
        "description": repo.description,
        "fork": False,
        "url": u,
        "forks_url": f"{u}/forks",
        "keys_url": f"{u}/keys{{/key_id}}",
        "collaborators_url": f"{u}/collaborators{{/collaborator}}",
        "teams_url": f"{u}/teams",
        "hooks_url": f"{u}/hooks",
        "issue_events_url": f"{u}/issues/events{{/number}}",
        "events_url": f"{u}/events",
        "assignees_url": f"{u}/assignees{{/user}}",
        "branches_url": f"{u}/branches{{/branch}}",
        "tags_url": f"{u}/tags",
        "blobs_url": f"{u}/git/blobs{{/sha}}",
        "git_tags_url": f"{u}/git/tags{{/sha}}",
        "git_refs_url": f"{u}/git/refs{{/sha}}",
        "trees_url": f"{u}/git/trees{{/sha}}",
        "statuses_url": f"{u}/statuses/{{sha}}",
        "languages_url": f"{u}/languages",
        "stargazers_url": f"{u}/stargazers",
        "contributors_url": f"{u}/contributors",
        "subscribers_url": f"{u}/subscribers",
        "subscription_url": f"{u}/subscription",
        "commits_url": f"{u}/commits{{/sha}}",
        "git_commits_url": f"{u}/git/commits{{/sha}}",
        "comments_url": f"{u}/comments{{/number}}",
        "issue_comment_url": f"{u}/issues/comments{{/number}}",
        "contents_url": f"{u}/contents/{{+path}}",
        "compare_url": f"{u}/compare/{{base}}...{{head}}",
        "merges_url": f"{u}/merges",
        "archive_url": f"{u}/{{archive_format}}{{/ref}}",
        "downloads_url": f"{u}/downloads",
        "issues_url": f"{u}/issues{{/number}}",
        "pulls_url": f"{u}/pulls{{/number}}",
        "milestones_url": f"{u}/milestones{{/number}}",
        "notifications_url": f"{u}/notifications{{?since,all,participating}}",
        "labels_url": f"{u}/labels{{/name}}",
        "releases_url": f"{u}/releases{{/id}}",
        "deployments_url": f"{u}/deployments",
    }


def hook_repository(world: World, repo: Repo, int_times: bool = False) -> dict[str, Any]:
    d = repo_lite(world, repo)
    h = html(world)
    created: Any = int(repo.created_at) if int_times else iso(repo.created_at)
    pushed_ts = repo.pushed_at or repo.created_at
    pushed: Any = int(pushed_ts) if int_times else iso(pushed_ts)
    open_prs = sum(1 for p in repo.pulls.values() if p.state == "open")
    d.update(
        {
            "created_at": created,
            "updated_at": iso(pushed_ts),
            "pushed_at": pushed,
            "git_url": f"git://{h.split('://', 1)[-1]}/{repo.full_name}.git",
            "ssh_url": f"git@sim:{repo.full_name}.git",
            "clone_url": f"{h}/{repo.full_name}.git",
            "svn_url": f"{h}/{repo.full_name}",
            "homepage": None,
            "size": 0,
            "stargazers_count": 0,
            "watchers_count": 0,
            "language": "Python",
            "has_issues": True,
            "has_projects": False,
            "has_downloads": True,
            "has_wiki": False,
            "has_pages": False,
            "forks_count": 0,
            "mirror_url": None,
            "archived": False,
            "disabled": False,
            "open_issues_count": open_prs,
            "license": None,
            "forks": 0,
            "open_issues": open_prs,
            "watchers": 0,
            "default_branch": repo.default_branch,
            "is_template": False,
            "topics": [],
            "visibility": "private" if repo.private else "public",
            "web_commit_signoff_required": False,
            "custom_properties": {},
        }
    )
    return d


def rest_repository(world: World, repo: Repo) -> dict[str, Any]:
    d = hook_repository(world, repo)
    d.update(
        {
            "permissions": {"admin": False, "maintain": False, "push": True, "triage": True, "pull": True},
            "network_count": 0,
            "subscribers_count": 0,
            "allow_merge_commit": True,
            "allow_squash_merge": True,
            "allow_rebase_merge": True,
            "has_discussions": False,
        }
    )
    return d


def _author_association(world: World, repo: Repo, login: str) -> str:
    return world.author_association(repo.full_name, login)


def _pr_urls(world: World, repo: Repo, n: int) -> dict[str, str]:
    u = f"{api(world)}/repos/{repo.full_name}"
    return {
        "url": f"{u}/pulls/{n}",
        "html_url": f"{html(world)}/{repo.full_name}/pull/{n}",
        "diff_url": f"{html(world)}/{repo.full_name}/pull/{n}.diff",
        "patch_url": f"{html(world)}/{repo.full_name}/pull/{n}.patch",
        "issue_url": f"{u}/issues/{n}",
        "commits_url": f"{u}/pulls/{n}/commits",
        "review_comments_url": f"{u}/pulls/{n}/comments",
        "review_comment_url": f"{u}/pulls/comments{{/number}}",
        "comments_url": f"{u}/issues/{n}/comments",
    }


def pull_request(world: World, repo: Repo, pr: Pull) -> dict[str, Any]:
    """Full pull request object (valid both as REST `pull-request` and in webhook payloads).

    ``mergeable`` is null until GitHub's background job has computed it (``mergeable_delay_s``
    simulated seconds after opening or a push): the opened/synchronize payloads carry null."""
    urls = _pr_urls(world, repo, pr.number)
    head_sha = world.pull_head_sha(pr)
    base_sha = repo.refs.get(f"refs/heads/{pr.base_ref}", "")
    mergeable = world.mergeable(pr)
    status_url = f"{api(world)}/repos/{repo.full_name}/statuses/{head_sha}"
    d: dict[str, Any] = {
        **{k: v for k, v in urls.items() if k in ("url",)},
        "id": pr.id,
        "node_id": node_id("PR_", pr.id),
        **{k: v for k, v in urls.items() if k in ("html_url", "diff_url", "patch_url", "issue_url")},
        "number": pr.number,
        "state": pr.state,
        "locked": False,
        "title": pr.title,
        "user": user(world, pr.user),
        "body": pr.body,
        "created_at": iso(pr.created_at),
        "updated_at": iso(pr.updated_at),
        "closed_at": iso(pr.closed_at) if pr.closed_at else None,
        "merged_at": iso(pr.merged_at) if pr.merged_at else None,
        "merge_commit_sha": pr.merge_commit_sha,
        "assignee": None,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        "labels": [label(world, repo, name) for name in pr.labels],
        "milestone": None,
        **{
            k: v
            for k, v in urls.items()
            if k in ("commits_url", "review_comments_url", "review_comment_url", "comments_url")
        },
        "statuses_url": status_url,
        **_head_and_base(world, repo, pr, head_sha, base_sha),
        "_links": {
            "self": {"href": urls["url"]},
            "html": {"href": urls["html_url"]},
            "issue": {"href": urls["issue_url"]},
            "comments": {"href": urls["comments_url"]},
            "review_comments": {"href": urls["review_comments_url"]},
            "review_comment": {"href": urls["review_comment_url"]},
            "commits": {"href": urls["commits_url"]},
            "statuses": {"href": status_url},
        },
        "author_association": _author_association(world, repo, pr.user),
        "auto_merge": None,
        "active_lock_reason": None,
        "draft": False,
        "merged": pr.merged,
        "mergeable": mergeable,
        "rebaseable": mergeable,
        "mergeable_state": "clean" if mergeable else "unknown",
        "merged_by": user(world, pr.merged_by) if pr.merged_by else None,
        "comments": sum(1 for c in repo.comments.values() if c.issue_number == pr.number),
        "review_comments": 0,
        "maintainer_can_modify": False,
        **_diff_stats(world, repo, pr, head_sha, base_sha),
    }
    return d


def _head_and_base(world: World, repo: Repo, pr: Pull, head_sha: str, base_sha: str) -> dict[str, Any]:
    hrepo = world.repos.get(pr.head_repo, repo)
    return {
        "head": {
            "label": f"{hrepo.owner}:{pr.head_ref}",
            "ref": pr.head_ref,
            "sha": head_sha,
            "user": user(world, hrepo.owner if not pr.head_repo_deleted else pr.user),
            # a deleted fork: GitHub answers head.repo null
            "repo": hook_repository(world, hrepo) if not pr.head_repo_deleted else None,
        },
        "base": {
            "label": f"{repo.owner}:{pr.base_ref}",
            "ref": pr.base_ref,
            "sha": base_sha,
            "user": user(world, repo.owner),
            "repo": hook_repository(world, repo),
        },
    }


def _diff_stats(world: World, repo: Repo, pr: Pull, head_sha: str, base_sha: str) -> dict[str, int]:
    """commits / additions / deletions / changed_files of the PR's diff against its base."""
    hrepo = world.repos.get(pr.head_repo, repo)
    changed = additions = deletions = commits = 0
    if (
        head_sha
        and base_sha
        and head_sha in repo.objects.commits
        or (head_sha and hrepo and head_sha in hrepo.objects.commits)
    ):
        files = changed_files(world, repo, pr)
        changed = len(files)
        additions = sum(f["additions"] for f in files)
        deletions = sum(f["deletions"] for f in files)
        src = hrepo if head_sha in hrepo.objects.commits else repo
        mb = src.objects.merge_base(base_sha, head_sha) if base_sha in src.objects.commits else None
        commits = len(src.objects.commits_between(mb, head_sha)) if mb else 1
    return {"commits": commits, "additions": additions, "deletions": deletions, "changed_files": changed}


def pull_request_simple(world: World, repo: Repo, pr: Pull) -> dict[str, Any]:
    d = pull_request(world, repo, pr)
    for k in (
        "merged",
        "mergeable",
        "rebaseable",
        "mergeable_state",
        "merged_by",
        "comments",
        "review_comments",
        "maintainer_can_modify",
        "commits",
        "additions",
        "deletions",
        "changed_files",
    ):
        d.pop(k, None)
    return d


def changed_files(world: World, repo: Repo, pr: Pull) -> list[dict[str, Any]]:
    """Files of the PR's diff (merge base -> head), like `GET /pulls/{n}/files`."""
    head_sha = world.pull_head_sha(pr)
    hrepo = world.repos.get(pr.head_repo, repo)
    store = hrepo.objects if head_sha in hrepo.objects.commits else repo.objects
    base_sha = repo.refs.get(f"refs/heads/{pr.base_ref}", "")
    if pr.merged and pr.merge_commit_sha:
        base_sha = repo.objects.commits[pr.merge_commit_sha].parents[0]
    if base_sha not in store.commits or head_sha not in store.commits:
        return []
    mb = store.merge_base(base_sha, head_sha) or base_sha
    return diff_files(world, repo, store, mb, head_sha)


def diff_files(world: World, repo: Repo, store: Any, base: str, head: str) -> list[dict[str, Any]]:
    a = store.flatten(store.commits[base].tree)
    b = store.flatten(store.commits[head].tree)
    out = []
    for path in sorted(set(a) | set(b)):
        if a.get(path) == b.get(path):
            continue
        old = store.blobs[a[path][1]].decode(errors="replace").splitlines() if path in a else []
        new = store.blobs[b[path][1]].decode(errors="replace").splitlines() if path in b else []
        diff = list(difflib.unified_diff(old, new, lineterm="", n=3))
        adds = sum(1 for line in diff if line.startswith("+") and not line.startswith("+++"))
        dels = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
        status = "added" if path not in a else "removed" if path not in b else "modified"
        sha = b[path][1] if path in b else a[path][1]
        out.append(
            {
                "sha": sha,
                "filename": path,
                "status": status,
                "additions": adds,
                "deletions": dels,
                "changes": adds + dels,
                "blob_url": f"{html(world)}/{repo.full_name}/blob/{head}/{path}",
                "raw_url": f"{html(world)}/{repo.full_name}/raw/{head}/{path}",
                "contents_url": f"{api(world)}/repos/{repo.full_name}/contents/{path}?ref={head}",
                "patch": "\n".join(diff[2:]),
            }
        )
    return out


def reactions_summary(world: World, repo: Repo, c: Comment) -> dict[str, Any]:
    d: dict[str, Any] = {
        "url": f"{api(world)}/repos/{repo.full_name}/issues/comments/{c.id}/reactions",
        "total_count": len(c.reactions),
    }
    for k in ("+1", "-1", "laugh", "confused", "heart", "hooray", "eyes", "rocket"):
        d[k] = sum(1 for r in c.reactions if r.content == k)
    return d


def hook_comment(world: World, repo: Repo, c: Comment) -> dict[str, Any]:
    u = f"{api(world)}/repos/{repo.full_name}"
    return {
        "url": f"{u}/issues/comments/{c.id}",
        "html_url": f"{html(world)}/{repo.full_name}/pull/{c.issue_number}#issuecomment-{c.id}",
        "issue_url": f"{u}/issues/{c.issue_number}",
        "id": c.id,
        "node_id": node_id("IC_", c.id),
        "user": user(world, c.user),
        "created_at": iso(c.created_at),
        "updated_at": iso(c.updated_at),
        "author_association": _author_association(world, repo, c.user),
        "performed_via_github_app": None,
        "body": c.body,
        "reactions": reactions_summary(world, repo, c),
    }


def rest_comment(world: World, repo: Repo, c: Comment) -> dict[str, Any]:
    return hook_comment(world, repo, c)


def label(world: World, repo: Repo, name: str) -> dict[str, Any]:
    lid = int(hashlib.sha256(f"{repo.full_name}:{name}".encode()).hexdigest()[:8], 16)
    return {
        "id": lid,
        "node_id": node_id("LA_", lid),
        "url": f"{api(world)}/repos/{repo.full_name}/labels/{name}",
        "name": name,
        "color": "ededed",
        "default": False,
        "description": None,
    }


def _issue_common(world: World, repo: Repo, item: Pull | Issue, kind: str) -> dict[str, Any]:
    """The issue shape both a PR (as an issue) and a plain issue share; ``kind``: pull | issues."""
    u = f"{api(world)}/repos/{repo.full_name}"
    n = item.number
    return {
        "url": f"{u}/issues/{n}",
        "repository_url": u,
        "labels_url": f"{u}/issues/{n}/labels{{/name}}",
        "comments_url": f"{u}/issues/{n}/comments",
        "events_url": f"{u}/issues/{n}/events",
        "html_url": f"{html(world)}/{repo.full_name}/{kind}/{n}",
        "id": item.id + 1 if kind == "pull" else item.id,
        "node_id": node_id("I_", item.id),
        "number": n,
        "title": item.title,
        "user": user(world, item.user),
        "labels": [],
        "state": item.state,
        "locked": False,
        "assignee": None,
        "assignees": [],
        "milestone": None,
        "comments": sum(1 for c in repo.comments.values() if c.issue_number == n),
        "created_at": iso(item.created_at),
        "updated_at": iso(item.updated_at),
        "closed_at": iso(item.closed_at) if item.closed_at else None,
        "author_association": _author_association(world, repo, item.user),
        "active_lock_reason": None,
        "body": item.body,
    }


def hook_issue(world: World, repo: Repo, pr: Pull) -> dict[str, Any]:
    """A pull request as the `issue` of an issue_comment payload."""
    d = _issue_common(world, repo, pr, "pull")
    d["labels"] = [label(world, repo, name) for name in pr.labels]
    u, h, n = f"{api(world)}/repos/{repo.full_name}", f"{html(world)}/{repo.full_name}", pr.number
    d["draft"] = False
    d["pull_request"] = {
        "url": f"{u}/pulls/{n}",
        "html_url": f"{h}/pull/{n}",
        "diff_url": f"{h}/pull/{n}.diff",
        "patch_url": f"{h}/pull/{n}.patch",
        "merged_at": iso(pr.merged_at) if pr.merged_at else None,
    }
    d["reactions"] = {"url": f"{u}/issues/{n}/reactions", "total_count": 0} | {r: 0 for r in _REACTION_KEYS}
    return d


_REACTION_KEYS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "eyes", "rocket")


def rest_issue(world: World, repo: Repo, issue: Issue) -> dict[str, Any]:
    """A plain issue as ``GET /repos/{owner}/{repo}/issues/{n}`` returns it (no ``pull_request``)."""
    d = _issue_common(world, repo, issue, "issues")
    d["labels"] = [{"name": name, "color": "ededed", "default": False} for name in issue.labels]
    d["state_reason"] = issue.state_reason
    return d


def reaction(world: World, r: Any) -> dict[str, Any]:
    return {
        "id": r.id,
        "node_id": node_id("REA_", r.id),
        "user": user(world, r.user),
        "content": r.content,
        "created_at": iso(r.created_at),
    }
