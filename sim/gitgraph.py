"""A content-addressed git object store with git-compatible SHAs, and graph queries.

Pure data structures: no I/O, no clock. SHAs are computed exactly like git
(sha1 of "<type> <len>\\0<body>"), so a commit made here has the SHA git would give it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


class GitError(Exception):
    """A git-level rule was broken (unknown object, bad tree entry, ...)."""


@dataclass(frozen=True)
class Signature:
    name: str
    email: str
    date: int  # unix seconds, UTC
    tz: str = "+0000"

    def render(self) -> str:
        return f"{self.name} <{self.email}> {self.date} {self.tz}"


@dataclass(frozen=True)
class TreeEntry:
    mode: str  # "100644", "100755", "040000", "160000", "120000"
    name: str
    sha: str

    @property
    def type(self) -> str:
        if self.mode == "040000":
            return "tree"
        if self.mode == "160000":
            return "commit"
        return "blob"


@dataclass(frozen=True)
class Commit:
    sha: str
    tree: str
    parents: tuple[str, ...]
    author: Signature
    committer: Signature
    message: str


def _hash(kind: str, body: bytes) -> str:
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).hexdigest()


def blob_sha(data: bytes) -> str:
    return _hash("blob", data)


def _tree_body(entries: list[TreeEntry]) -> bytes:
    # git sorts tree entries by name, with directories compared as if they ended in "/"
    def key(e: TreeEntry) -> bytes:
        return e.name.encode() + (b"/" if e.mode == "040000" else b"")

    out = b""
    for e in sorted(entries, key=key):
        mode = "40000" if e.mode == "040000" else e.mode
        out += f"{mode} {e.name}".encode() + b"\0" + bytes.fromhex(e.sha)
    return out


def _commit_body(
    tree: str, parents: tuple[str, ...], author: Signature, committer: Signature, message: str
) -> bytes:
    lines = [f"tree {tree}"] + [f"parent {p}" for p in parents]
    lines += [f"author {author.render()}", f"committer {committer.render()}", "", message]
    return "\n".join(lines).encode()


@dataclass
class ObjectStore:
    blobs: dict[str, bytes] = field(default_factory=dict)
    trees: dict[str, tuple[TreeEntry, ...]] = field(default_factory=dict)
    commits: dict[str, Commit] = field(default_factory=dict)

    # -- writes -------------------------------------------------------------------------
    def put_blob(self, data: bytes) -> str:
        sha = blob_sha(data)
        self.blobs[sha] = data
        return sha

    def put_tree(self, entries: list[TreeEntry]) -> str:
        names = [e.name for e in entries]
        if len(set(names)) != len(names):
            raise GitError("duplicate entry names in tree")
        for e in entries:
            if not e.name or "/" in e.name:
                raise GitError(f"invalid tree entry name {e.name!r}")
            if e.type == "blob" and e.sha not in self.blobs:
                raise GitError(f"blob {e.sha} not found")
            if e.type == "tree" and e.sha not in self.trees:
                raise GitError(f"tree {e.sha} not found")
        sha = _hash("tree", _tree_body(entries))
        self.trees[sha] = tuple(sorted(entries, key=lambda e: e.name))
        return sha

    def put_commit(
        self, tree: str, parents: list[str], author: Signature, committer: Signature, message: str
    ) -> str:
        if tree not in self.trees:
            raise GitError(f"tree {tree} not found")
        for p in parents:
            if p not in self.commits:
                raise GitError(f"parent commit {p} not found")
        body = _commit_body(tree, tuple(parents), author, committer, message)
        sha = _hash("commit", body)
        self.commits[sha] = Commit(sha, tree, tuple(parents), author, committer, message)
        return sha

    # -- path-level helpers ---------------------------------------------------------------
    def flatten(self, tree_sha: str, prefix: str = "") -> dict[str, tuple[str, str]]:
        """Map every file path under a tree to (mode, blob sha)."""
        out: dict[str, tuple[str, str]] = {}
        for e in self.trees[tree_sha]:
            path = f"{prefix}{e.name}"
            if e.type == "tree":
                out.update(self.flatten(e.sha, path + "/"))
            else:
                out[path] = (e.mode, e.sha)
        return out

    def build_tree(self, files: dict[str, tuple[str, str]]) -> str:
        """Build nested trees from {path: (mode, blob sha)}; returns the root tree sha."""
        children: dict[str, dict[str, tuple[str, str]]] = {}
        entries: list[TreeEntry] = []
        for path, (mode, sha) in files.items():
            head, _, rest = path.partition("/")
            if rest:
                children.setdefault(head, {})[rest] = (mode, sha)
            else:
                entries.append(TreeEntry(mode, head, sha))
        for name, sub in children.items():
            entries.append(TreeEntry("040000", name, self.build_tree(sub)))
        return self.put_tree(entries)

    def lookup(self, tree_sha: str, path: str) -> TreeEntry | None:
        """Find the entry at `path` (a file or a directory) under a root tree."""
        parts = [p for p in path.strip("/").split("/") if p]
        current = tree_sha
        entry: TreeEntry | None = None
        for i, part in enumerate(parts):
            entry = next((e for e in self.trees[current] if e.name == part), None)
            if entry is None:
                return None
            if i < len(parts) - 1:
                if entry.type != "tree":
                    return None
                current = entry.sha
        return entry

    def object_type(self, sha: str) -> str | None:
        if sha in self.commits:
            return "commit"
        if sha in self.trees:
            return "tree"
        if sha in self.blobs:
            return "blob"
        return None

    # -- graph queries ----------------------------------------------------------------------
    def ancestors(self, sha: str) -> set[str]:
        """All commits reachable from sha, itself included."""
        seen: set[str] = set()
        stack = [sha]
        while stack:
            c = stack.pop()
            if c in seen:
                continue
            seen.add(c)
            stack.extend(self.commits[c].parents)
        return seen

    def merge_base(self, a: str, b: str) -> str | None:
        """Best common ancestor (one that is not an ancestor of another common ancestor).

        With several best candidates (criss-cross merges) the most recent by committer date is
        picked, then the smallest sha, so the answer is deterministic.
        """
        common = self.ancestors(a) & self.ancestors(b)
        if not common:
            return None
        dominated: set[str] = set()
        for c in common:
            for p in self.commits[c].parents:
                dominated |= self.ancestors(p) & common
        best = [c for c in common if c not in dominated]
        best.sort(key=lambda c: (-self.commits[c].committer.date, c))
        return best[0]

    def commits_between(self, base: str, head: str) -> list[str]:
        """Commits reachable from head but not from base, oldest first (like `git log base..head`)."""
        wanted = self.ancestors(head) - self.ancestors(base)
        # topological order (parents first), ties broken by committer date then sha
        pending = {c: sum(1 for p in self.commits[c].parents if p in wanted) for c in wanted}
        children: dict[str, list[str]] = {}
        for c in wanted:
            for p in self.commits[c].parents:
                if p in wanted:
                    children.setdefault(p, []).append(c)
        ready = sorted(
            (c for c, n in pending.items() if n == 0), key=lambda c: (self.commits[c].committer.date, c)
        )
        order: list[str] = []
        while ready:
            c = ready.pop(0)
            order.append(c)
            for ch in children.get(c, []):
                pending[ch] -= 1
                if pending[ch] == 0:
                    ready.append(ch)
            ready.sort(key=lambda c: (self.commits[c].committer.date, c))
        return order


@dataclass(frozen=True)
class Comparison:
    status: str  # ahead | behind | identical | diverged
    ahead_by: int
    behind_by: int
    merge_base: str | None
    commits: list[str]  # base..head, oldest first


def compare(store: ObjectStore, base: str, head: str) -> Comparison:
    """GitHub's compare semantics: ahead_by = |head - base|, behind_by = |base - head|."""
    anc_base = store.ancestors(base)
    anc_head = store.ancestors(head)
    ahead = anc_head - anc_base
    behind = anc_base - anc_head
    if not ahead and not behind:
        status = "identical"
    elif not behind:
        status = "ahead"
    elif not ahead:
        status = "behind"
    else:
        status = "diverged"
    return Comparison(
        status, len(ahead), len(behind), store.merge_base(base, head), store.commits_between(base, head)
    )
