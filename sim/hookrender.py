"""Webhook rendering: the world's events turned into GitHub's payloads, then deliveries.

`HookRenderer` is the world's first listener (sim.world): for each `Event` it renders the payload
GitHub sends for it, at that moment (so a payload shows the state the event happened in), adds
`organization`/`installation` as GitHub does, and puts it in the world's outbox
(`record_delivery`), from which sim.engine sends it.
"""

from __future__ import annotations

import base64
from typing import Any

from sim import render, render_actions
from sim.models import Comment, Event, Job, Pull, Repo, Run, User, iso
from sim.world_state import WorldState


class HookRenderer:
    def __init__(self, world: WorldState) -> None:
        self.world = world

    def __call__(self, event: Event) -> None:
        payload = self.payload(event)
        self._add_installation(payload, event.repo)
        self.world.record_delivery(event.name, payload)

    def payload(self, event: Event) -> dict[str, Any]:
        w, repo, x = self.world, event.repo, event.extra
        if event.name == "push":
            return push_payload(w, repo, x["ref"], x["before"], x["after"], event.sender, x["forced"])
        payload: dict[str, Any] = {"action": event.action}
        if event.name == "pull_request":
            pr: Pull = event.subject
            payload["number"] = pr.number
            payload["pull_request"] = render.pull_request(w, repo, pr)
        elif event.name == "issue_comment":
            c: Comment = event.subject
            payload["issue"] = render.hook_issue(w, repo, repo.pulls[c.issue_number])
            payload["comment"] = render.hook_comment(w, repo, c)
        elif event.name == "workflow_run":
            run: Run = event.subject
            payload["workflow_run"] = render_actions.hook_workflow_run(w, run)
            payload["workflow"] = render_actions.hook_workflow(w, repo, run.workflow_id)
        elif event.name == "workflow_job":
            job: Job = event.subject
            payload["workflow_job"] = render_actions.hook_workflow_job(w, job)
        else:
            raise ValueError(f"no webhook for event {event.name!r}")
        payload["repository"] = render.hook_repository(w, repo)
        payload["sender"] = render.user(w, event.sender)
        if event.name == "pull_request":
            if event.action == "synchronize":
                payload["before"], payload["after"] = x.get("before"), x.get("after")
            if x.get("label") is not None:
                payload["label"] = render.label(w, repo, x["label"])
        if event.name in ("issue_comment", "pull_request") and x.get("changes") is not None:
            payload["changes"] = x["changes"]
        return payload

    def _add_installation(self, payload: dict[str, Any], repo: Repo) -> None:
        # As GitHub does: `organization` when the owner is an organisation, `installation` when the
        # delivery is for a GitHub App installed on the repository.
        w = self.world
        if repo.owner in w.orgs or w.users.get(repo.owner, User("", 0)).type == "Organization":
            payload["organization"] = render.organization(w, repo.owner)
        if repo.installation_id:
            payload["installation"] = {
                "id": repo.installation_id,
                "node_id": base64.b64encode(f"Inst{repo.installation_id}".encode()).decode(),
            }


def push_payload(
    world: WorldState, repo: Repo, ref: str, old: str | None, new: str, pusher: str, forced: bool
) -> dict[str, Any]:
    zero = "0" * 40
    h = render.html(world)
    commits = []
    if new in repo.objects.commits:
        shas = repo.objects.commits_between(old, new) if old and old in repo.objects.commits else [new]
        for sha in shas[-20:]:
            c = repo.objects.commits[sha]
            parent = c.parents[0] if c.parents else None
            files_new = repo.objects.flatten(c.tree)
            files_old = repo.objects.flatten(repo.objects.commits[parent].tree) if parent else {}
            commits.append(
                {
                    "id": sha,
                    "tree_id": c.tree,
                    "distinct": True,
                    "message": c.message,
                    "timestamp": iso(c.committer.date),
                    "url": f"{h}/{repo.full_name}/commit/{sha}",
                    "author": {"name": c.author.name, "email": c.author.email},
                    "committer": {"name": c.committer.name, "email": c.committer.email},
                    "added": sorted(set(files_new) - set(files_old)),
                    "removed": sorted(set(files_old) - set(files_new)),
                    "modified": sorted(
                        p for p in set(files_new) & set(files_old) if files_new[p] != files_old[p]
                    ),
                }
            )
    u = world.add_user(pusher)
    repo_d = render.hook_repository(world, repo, int_times=True)
    repo_d["stargazers"] = 0
    repo_d["master_branch"] = repo.default_branch
    return {
        "ref": ref,
        "before": old or zero,
        "after": new,
        "created": old is None,
        "deleted": False,
        "forced": forced,
        "base_ref": None,
        "compare": f"{h}/{repo.full_name}/compare/{(old or zero)[:12]}...{new[:12]}",
        "commits": commits,
        "head_commit": commits[-1] if commits else None,
        "repository": repo_d,
        "pusher": {"name": u.login, "email": u.email},
        "sender": render.user(world, pusher),
    }
