"""Pull requests: opening, mergeability, merging, closing, labels, and following head branches."""

from __future__ import annotations

import time
from typing import Any

from sim.gitgraph import compare
from sim.models import Event, Pull, Repo, SimError
from sim.world_issues import Issues


class Pulls(Issues):
    def open_pull(
        self,
        full_name: str,
        head: str,
        base: str,
        title: str,
        body: str = "",
        user: str | None = None,
        number: int | None = None,
        head_repo: str | None = None,
    ) -> Pull:
        with self.lock:
            repo = self.repo(full_name)
            user = user or self.settings.default_token_user
            self.add_user(user)
            if ":" in head:
                owner, _, head = head.partition(":")
                if head_repo is None:
                    head_repo = next(
                        (
                            r.full_name
                            for r in self.repos.values()
                            if r.owner == owner and r.name == repo.name
                        ),
                        full_name,
                    )
            head_repo = head_repo or full_name
            hrepo = self.repo(head_repo)
            if f"refs/heads/{head}" not in hrepo.refs:
                raise SimError(
                    422,
                    "Validation Failed",
                    [{"resource": "PullRequest", "field": "head", "code": "invalid"}],
                )
            if f"refs/heads/{base}" not in repo.refs:
                raise SimError(
                    422,
                    "Validation Failed",
                    [{"resource": "PullRequest", "field": "base", "code": "invalid"}],
                )
            for p in repo.pulls.values():
                if (
                    p.state == "open"
                    and p.head_ref == head
                    and p.head_repo == head_repo
                    and p.base_ref == base
                ):
                    raise SimError(422, f"A pull request already exists for {hrepo.owner}:{head}.")
            n = self._take_number(repo, number)
            now = self.now()
            pr = Pull(n, self.next_id(), title, body, user, head_repo, head, base, now, now)
            self._recompute_mergeable(pr)
            repo.pulls[n] = pr
            self._pull_event(repo, pr, "opened", sender=user)
            return pr

    def _recompute_mergeable(self, pr: Pull) -> None:
        pr.mergeable_at = time.monotonic() + self.faults.mergeable_delay_s * self.settings.time_scale

    def mergeable(self, pr: Pull) -> bool | None:
        """null while GitHub's background job computes it (after opening, after each push)."""
        if pr.state != "open" or time.monotonic() < pr.mergeable_at:
            return None
        return True

    def pull(self, full_name: str, number: int) -> Pull:
        pr = self.repo(full_name).pulls.get(number)
        if pr is None:
            raise SimError(404, "Not Found")
        return pr

    def pull_head_sha(self, pr: Pull) -> str:
        if pr.head_sha_frozen and (pr.state != "open" or pr.head_repo_deleted):
            return pr.head_sha_frozen
        hrepo = self.repos.get(pr.head_repo)
        sha = hrepo.refs.get(f"refs/heads/{pr.head_ref}") if hrepo else None
        return sha or pr.head_sha_frozen or ""

    def author_association(self, full_name: str, login: str) -> str:
        """GitHub's author_association; an App's bot account is never a member or collaborator."""
        repo = self.repo(full_name)
        known = self.users.get(login)
        if known is not None and known.type == "Bot":
            return "NONE"
        perm = self.permission(full_name, login)
        if login == repo.owner:
            return "OWNER"
        if perm in ("admin", "maintain", "write"):
            return "MEMBER"
        if login in repo.collaborators and perm != "none":
            return "COLLABORATOR"
        return "CONTRIBUTOR" if perm == "read" else "NONE"

    def pull_commits(self, full_name: str, number: int) -> list[str]:
        """GET /pulls/{n}/commits: the head's commits the base does not have, oldest first (a merged
        PR's: those its merge brought in, from the merge commit's first parent)."""
        with self.lock:
            repo = self.repo(full_name)
            pr = self.pull(full_name, number)
            head = self.pull_head_sha(pr)
            objects = repo.objects
            if head not in objects.commits:
                hrepo = self.repos.get(pr.head_repo)
                objects = hrepo.objects if hrepo else objects
            if pr.merged and pr.merge_commit_sha in repo.objects.commits:
                base = repo.objects.commits[str(pr.merge_commit_sha)].parents[0]
            else:
                base = self.repo_base_sha(pr)
            mine = objects.ancestors(head) - (objects.ancestors(base) if base in objects.commits else set())
            ordered: list[str] = []
            left = set(mine)
            while left:  # parents before children, ties by committer date
                ready = [c for c in left if not set(objects.commits[c].parents) & left]
                first = min(ready, key=lambda c: (objects.commits[c].committer.date, c))
                ordered.append(first)
                left.discard(first)
            return ordered

    def pull_base_sha(self, pr: Pull) -> str:
        return self.repo_base_sha(pr)

    def repo_base_sha(self, pr: Pull) -> str:
        for repo in self.repos.values():
            if pr in repo.pulls.values():
                return repo.refs.get(f"refs/heads/{pr.base_ref}", "")
        return ""

    def merge_pull(
        self,
        full_name: str,
        number: int,
        merger: str | None = None,
        commit_title: str | None = None,
        sha: str | None = None,
        method: str = "merge",
    ) -> str:
        """Merge as GitHub does: a merge commit (``merge``), or ``squash``: one commit on the base
        with the merged tree, the PR's own commits staying off the base branch."""
        with self.lock:
            repo = self.repo(full_name)
            pr = self.pull(full_name, number)
            merger = merger or self.settings.default_token_user
            if pr.state != "open":
                raise SimError(405, "Pull Request is not mergeable")
            head_sha = self.pull_head_sha(pr)
            if sha and sha != head_sha:
                raise SimError(409, "Head branch was modified. Review and try the merge again.")
            hrepo = self.repo(pr.head_repo)
            # bring the head's objects over when the head lives in a fork
            if hrepo is not repo:
                for c in hrepo.objects.ancestors(head_sha):
                    if c not in repo.objects.commits:
                        repo.objects.commits[c] = hrepo.objects.commits[c]
                repo.objects.blobs.update(hrepo.objects.blobs)
                repo.objects.trees.update(hrepo.objects.trees)
            base_ref = f"refs/heads/{pr.base_ref}"
            base_sha = repo.refs[base_ref]
            cmp = compare(repo.objects, base_sha, head_sha)
            base_files = repo.objects.flatten(repo.objects.commits[base_sha].tree)
            head_files = repo.objects.flatten(repo.objects.commits[head_sha].tree)
            if cmp.merge_base is None:
                raise SimError(405, "Pull Request is not mergeable")
            mb_files = repo.objects.flatten(repo.objects.commits[cmp.merge_base].tree)
            merged_files = dict(base_files)
            for path in set(head_files) | set(mb_files):
                h, m, b = head_files.get(path), mb_files.get(path), base_files.get(path)
                if h == m:
                    continue
                if b != m and b != h:
                    raise SimError(405, "Pull Request is not mergeable (merge conflict)")
                if h is None:
                    merged_files.pop(path, None)
                else:
                    merged_files[path] = h
            tree = repo.objects.build_tree(merged_files)
            sig = self.signature(merger)
            title = commit_title or f"Merge pull request #{number} from {hrepo.owner}/{pr.head_ref}"
            parents = [base_sha] if method == "squash" else [base_sha, head_sha]
            merge_sha = repo.objects.put_commit(tree, parents, sig, sig, f"{title}\n\n{pr.title}")
            now = self.now()
            pr.state, pr.merged, pr.merged_at, pr.merged_by = "closed", True, now, merger
            pr.merge_commit_sha, pr.closed_at, pr.updated_at, pr.head_sha_frozen = (
                merge_sha,
                now,
                now,
                head_sha,
            )
            self.set_ref(full_name, base_ref, merge_sha, pusher=merger)
            self._pull_event(repo, pr, "closed", sender=merger)
            return merge_sha

    def pulls_with_commit(self, full_name: str, sha: str) -> list[Pull]:
        """GitHub's commit -> pulls answer: for a commit on the default branch, the merged PR that
        introduced it (its merge commit, or a commit of its branch); for any other commit, the open
        and merged PRs whose head contains it."""
        with self.lock:
            repo = self.repo(full_name)
            main = repo.refs.get(f"refs/heads/{repo.default_branch}")
            on_default = bool(main) and sha in repo.objects.ancestors(str(main))
            out: list[Pull] = []
            for pr in sorted(repo.pulls.values(), key=lambda x: x.number):
                if on_default and not pr.merged:
                    continue
                if pr.merge_commit_sha == sha:
                    out.append(pr)
                    continue
                head = self.pull_head_sha(pr)
                if not head or head not in repo.objects.commits:
                    continue
                if pr.merged and pr.merge_commit_sha in repo.objects.commits:
                    base = repo.objects.commits[str(pr.merge_commit_sha)].parents[0]
                else:
                    base = repo.refs.get(f"refs/heads/{pr.base_ref}", "")
                below = repo.objects.ancestors(base) if base in repo.objects.commits else set()
                if sha in repo.objects.ancestors(head) - below:
                    out.append(pr)
            return out

    def close_pull(self, full_name: str, number: int, user: str | None = None) -> Pull:
        with self.lock:
            repo = self.repo(full_name)
            pr = self.pull(full_name, number)
            if pr.state == "closed":
                return pr
            now = self.now()
            pr.head_sha_frozen = self.pull_head_sha(pr)
            pr.state, pr.closed_at, pr.updated_at = "closed", now, now
            self._pull_event(repo, pr, "closed", sender=user or self.settings.default_token_user)
            return pr

    def update_pull(
        self,
        full_name: str,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        state: str | None = None,
        user: str | None = None,
    ) -> Pull:
        with self.lock:
            repo = self.repo(full_name)
            pr = self.pull(full_name, number)
            if title is not None:
                pr.title = title
            if body is not None:
                pr.body = body
            pr.updated_at = self.now()
            if state == "closed":
                self.close_pull(full_name, number, user)
            elif state == "open" and pr.state == "closed" and not pr.merged:
                pr.state, pr.closed_at = "open", None
                self._pull_event(repo, pr, "reopened", sender=user or self.settings.default_token_user)
            return pr

    def edit_pull_body(self, full_name: str, number: int, body: str, user: str) -> Pull:
        """``user`` edits the PR's description: GitHub sends ``pull_request`` ``edited`` with the
        editor as ``sender`` and the old text under ``changes.body.from``."""
        with self.lock:
            repo = self.repo(full_name)
            pr = self.pull(full_name, number)
            old = pr.body
            pr.body, pr.updated_at = body, self.now()
            self._pull_event(repo, pr, "edited", sender=user, changes={"body": {"from": old}})
            return pr

    def _on_branch_moved(self, repo: Repo, branch: str, old: str | None, new: str) -> None:
        for r in self.repos.values():
            for pr in r.pulls.values():
                if pr.state == "open" and pr.head_repo == repo.full_name and pr.head_ref == branch and old:
                    pr.updated_at = self.now()
                    self._recompute_mergeable(pr)  # GitHub recomputes it after every push
                    self._pull_event(
                        r, pr, "synchronize", sender=self.settings.default_token_user, before=old, after=new
                    )

    def remove_label(self, full_name: str, number: int, label: str, sender: str) -> list[str]:
        """Take a label off a PR: a `pull_request.unlabeled` event (404 when not there, as on GitHub)."""
        with self.lock:
            repo = self.repo(full_name)
            pr = repo.pulls.get(number)
            if pr is None or label not in pr.labels:
                raise SimError(404, "Label does not exist")
            pr.labels.remove(label)
            pr.updated_at = self.now()
            self._pull_event(repo, pr, "unlabeled", sender=sender, label=label)
            self._wake()
            return list(pr.labels)

    def add_labels(self, full_name: str, number: int, labels: list[str], sender: str) -> list[str]:
        """Label a PR; each newly added label is a `pull_request.labeled` event (as on GitHub)."""
        with self.lock:
            repo = self.repo(full_name)
            pr = repo.pulls.get(number)
            if pr is None:
                raise SimError(404, "Not Found")
            for label in labels:
                if label in pr.labels:
                    continue  # GitHub keeps one and sends no event
                pr.labels.append(label)
                pr.updated_at = self.now()
                self._pull_event(repo, pr, "labeled", sender=sender, label=label)
            self._wake()
            return list(pr.labels)

    def delete_repo(self, full_name: str) -> None:
        """Delete a repository (a fork): its open PRs elsewhere keep their head, with no repo."""
        with self.lock:
            repo = self.repo(full_name)
            for other in self.repos.values():
                if other is repo:
                    continue
                for pr in other.pulls.values():
                    if pr.head_repo != full_name:
                        continue
                    # GitHub keeps the head commits in the base repository (refs/pull/N/head).
                    pr.head_sha_frozen = self.pull_head_sha(pr)
                    other.objects.commits.update(repo.objects.commits)
                    other.objects.trees.update(repo.objects.trees)
                    other.objects.blobs.update(repo.objects.blobs)
                    pr.head_repo_deleted = True
            del self.repos[full_name]

    def _pull_event(self, repo: Repo, pr: Pull, action: str, sender: str, **extra: Any) -> None:
        self.emit(Event("pull_request", action, repo, sender, pr, extra))
