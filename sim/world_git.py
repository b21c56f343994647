"""Repositories and their git data: commits, trees, blobs, refs, contents and compare."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from sim.gitgraph import GitError, Signature, compare
from sim.models import Event, Repo, SimError
from sim.world_identity import Identity


class GitData(Identity):
    def add_repo(
        self,
        full_name: str,
        default_branch: str = "main",
        private: bool = False,
        description: str | None = None,
    ) -> Repo:
        with self.lock:
            if full_name in self.repos:
                return self.repos[full_name]
            owner, _, name = full_name.partition("/")
            if not owner or not name:
                raise SimError(422, f"repository name must be owner/name, got {full_name!r}")
            if owner not in self.users:
                self.add_user(owner, type="Organization")
            repo = Repo(
                self.next_id(), owner, name, default_branch, private, description, created_at=self.now()
            )
            self.repos[full_name] = repo
            for inst in self.installations.values():
                if full_name in inst.repos:
                    repo.installation_id = inst.id
            return repo

    def signature(self, login: str) -> Signature:
        u = self.add_user(login)
        return Signature(u.name or login, u.email or f"{login}@users.sim", self.git_now())

    def commit_files(
        self,
        full_name: str,
        branch: str,
        files: Mapping[str, str | bytes | None],
        message: str,
        author: str = "sim",
        emit_push: bool = True,
    ) -> str:
        """Commit on top of `branch` (created from nothing if absent); a value None deletes."""
        with self.lock:
            repo = self.repo(full_name)
            ref = f"refs/heads/{branch}"
            parent = repo.refs.get(ref)
            current: dict[str, tuple[str, str]] = {}
            if parent:
                current = repo.objects.flatten(repo.objects.commits[parent].tree)
            for path, content in files.items():
                path = path.strip("/")
                if content is None:
                    current.pop(path, None)
                    continue
                data = content.encode() if isinstance(content, str) else content
                current[path] = ("100644", repo.objects.put_blob(data))
            tree = repo.objects.build_tree(current)
            sig = self.signature(author)
            sha = repo.objects.put_commit(tree, [parent] if parent else [], sig, sig, message)
            self.set_ref(full_name, ref, sha, force=True, pusher=author, emit_push=emit_push)
            return sha

    def set_ref(
        self,
        full_name: str,
        ref: str,
        sha: str,
        force: bool = False,
        pusher: str | None = None,
        emit_push: bool = True,
        create: bool = False,
    ) -> None:
        with self.lock:
            repo = self.repo(full_name)
            if sha not in repo.objects.commits:
                raise SimError(422, "Object does not exist")
            old = repo.refs.get(ref)
            if create and old is not None:
                raise SimError(422, "Reference already exists")
            if old is not None and not force and old != sha and old not in repo.objects.ancestors(sha):
                raise SimError(422, "Update is not a fast forward")
            repo.refs[ref] = sha
            repo.pushed_at = self.now()
            if emit_push and old != sha:
                extra = {"ref": ref, "before": old, "after": sha, "forced": force}
                self.emit(Event("push", None, repo, pusher or self.settings.default_token_user, None, extra))
            if ref.startswith("refs/heads/"):
                self._on_branch_moved(repo, ref[len("refs/heads/") :], old, sha)

    def delete_ref(self, full_name: str, ref: str) -> None:
        with self.lock:
            repo = self.repo(full_name)
            if ref not in repo.refs:
                raise SimError(422, "Reference does not exist")
            del repo.refs[ref]

    def resolve(self, repo: Repo, ref: str | None) -> str:
        """Resolve a branch name, full ref, tag or commit sha to a commit sha."""
        ref = ref or repo.default_branch
        for cand in (ref, f"refs/heads/{ref}", f"refs/tags/{ref}"):
            if cand in repo.refs:
                return repo.refs[cand]
        if len(ref) >= 7:
            matches = [c for c in repo.objects.commits if c.startswith(ref)]
            if len(matches) == 1:
                return matches[0]
        raise SimError(404, f"No commit found for the ref {ref}")

    def read_file(self, full_name: str, path: str, ref: str | None = None) -> bytes | None:
        with self.lock:
            repo = self.repo(full_name)
            sha = self.resolve(repo, ref)
            entry = repo.objects.lookup(repo.objects.commits[sha].tree, path)
            if entry is None or entry.type != "blob":
                return None
            return repo.objects.blobs[entry.sha]

    def compare(self, full_name: str, base: str, head: str) -> Any:
        with self.lock:
            repo = self.repo(full_name)
            b, h = self.resolve(repo, base), self.resolve(repo, head)
            try:
                return b, h, compare(repo.objects, b, h)
            except (GitError, KeyError) as exc:
                raise SimError(404, f"Not Found: {exc}") from exc

    def ref_visible(self, repo: Repo, ref: str) -> bool:
        """False while a just-created ref is still invisible (eventual consistency)."""
        until = repo.ref_visible_at.get(ref)
        if until is None:
            return True
        if time.monotonic() >= until:
            repo.ref_visible_at.pop(ref, None)
            return True
        return False

    def _on_branch_moved(self, repo: Repo, branch: str, old: str | None, new: str) -> None:
        """A branch moved: nothing follows branches at this layer (sim.world_pulls: open PRs do)."""
