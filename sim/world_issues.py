"""Issues, comments (on issues and pull requests alike) and reactions."""

from __future__ import annotations

from typing import Any

from sim.models import REACTIONS, Comment, Event, Issue, Reaction, Repo, SimError
from sim.world_actions import Actions


class Issues(Actions):
    def _take_number(self, repo: Repo, number: int | None) -> int:
        if number is None:
            number = repo.next_number
        if number in repo.pulls or number in repo.issues or number in repo.deleted_issues:
            raise SimError(422, f"number {number} is already used in {repo.full_name}")
        repo.next_number = max(repo.next_number, number + 1)
        return number

    def add_comment(self, full_name: str, number: int, user: str, body: str) -> Comment:
        with self.lock:
            repo = self.repo(full_name)
            if number not in repo.pulls:
                raise SimError(404, "Not Found")
            self.add_user(user)
            now = self.now()
            c = Comment(self.next_id(), number, user, body, now, now)
            repo.comments[c.id] = c
            self.emit(Event("issue_comment", "created", repo, user, c))
            return c

    def open_issue(
        self, full_name: str, title: str, body: str, user: str, labels: list[str] | None = None
    ) -> Issue:
        with self.lock:
            repo = self.repo(full_name)
            if not title.strip():
                raise SimError(
                    422,
                    "Validation Failed",
                    [{"resource": "Issue", "code": "missing_field", "field": "title"}],
                )
            self.add_user(user)
            now = self.now()
            issue = Issue(
                self._take_number(repo, None),
                self.next_id(),
                title,
                body,
                user,
                now,
                now,
                labels=list(labels or []),
            )
            repo.issues[issue.number] = issue
            return issue

    def issue(self, full_name: str, number: int) -> Issue:
        repo = self.repo(full_name)
        issue = repo.issues.get(number)
        if issue is None:
            if number in repo.deleted_issues:
                # GitHub's answer to a caller who may read the repository (one who may not gets
                # its 404 before this: api_common._repo).
                raise SimError(410, "This issue was deleted")
            raise SimError(404, "Not Found")
        return issue

    def delete_issue(self, full_name: str, number: int) -> None:
        """A maintainer deletes a plain issue (GitHub's web UI or GraphQL ``deleteIssue``; REST has
        no delete): it is listed no more, its number is answered 410 "This issue was deleted" and
        never given again, and its comments go with it."""
        with self.lock:
            repo = self.repo(full_name)
            self.issue(full_name, number)
            del repo.issues[number]
            repo.deleted_issues.add(number)
            repo.comments = {k: c for k, c in repo.comments.items() if c.issue_number != number}

    def update_issue(self, full_name: str, number: int, **fields: Any) -> Issue:
        with self.lock:
            issue = self.issue(full_name, number)
            now = self.now()
            if "title" in fields and fields["title"] is not None:
                issue.title = str(fields["title"])
            if "body" in fields and fields["body"] is not None:
                issue.body = str(fields["body"])
            state = fields.get("state")
            if state is not None:
                if state not in ("open", "closed"):
                    raise SimError(422, f"state must be open or closed, not {state!r}")
                if state == "closed" and issue.state == "open":
                    issue.closed_at = now
                    issue.state_reason = str(fields.get("state_reason") or "completed")
                elif state == "open" and issue.state == "closed":
                    issue.closed_at, issue.state_reason = None, "reopened"
                issue.state = state
            issue.updated_at = now
            return issue

    def comment(self, full_name: str, comment_id: int) -> Comment:
        c = self.repo(full_name).comments.get(comment_id)
        if c is None:
            raise SimError(404, "Not Found")
        return c

    def edit_comment(self, full_name: str, comment_id: int, body: str, user: str | None = None) -> Comment:
        with self.lock:
            repo = self.repo(full_name)
            c = self.comment(full_name, comment_id)
            old = c.body
            c.body, c.updated_at = body, self.now()
            self.emit(
                Event(
                    "issue_comment", "edited", repo, user or c.user, c, {"changes": {"body": {"from": old}}}
                )
            )
            return c

    def add_reaction(self, full_name: str, comment_id: int, user: str, content: str) -> tuple[Reaction, bool]:
        if content not in REACTIONS:
            raise SimError(422, f"reaction content must be one of {', '.join(REACTIONS)}")
        with self.lock:
            c = self.comment(full_name, comment_id)
            for r in c.reactions:
                if r.user == user and r.content == content:
                    return r, False
            r = Reaction(self.next_id(), user, content, self.now())
            c.reactions.append(r)
            return r, True
