"""The git object store: git-identical SHAs, and compare on random DAGs with merges."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.gitgraph import ObjectStore, Signature, TreeEntry, blob_sha, compare


def test_blob_and_empty_tree_shas_match_git() -> None:
    assert blob_sha(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"
    assert ObjectStore().put_tree([]) == "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary to cross-check")
def test_commit_sha_matches_git_binary(tmp_path: Path) -> None:
    store = ObjectStore()
    files = {"a.txt": ("100644", store.put_blob(b"one\n")), "dir/b.txt": ("100644", store.put_blob(b"two\n"))}
    tree = store.build_tree(files)
    sig = Signature("Sim Bot", "bot@sim", 1782864000)
    sha = store.put_commit(tree, [], sig, sig, "first")
    env = {
        "GIT_AUTHOR_NAME": "Sim Bot",
        "GIT_AUTHOR_EMAIL": "bot@sim",
        "GIT_AUTHOR_DATE": "1782864000 +0000",
        "GIT_COMMITTER_NAME": "Sim Bot",
        "GIT_COMMITTER_EMAIL": "bot@sim",
        "GIT_COMMITTER_DATE": "1782864000 +0000",
        "HOME": str(tmp_path),
        "PATH": "/usr/bin:/bin",
    }
    subprocess.run(["git", "init", "-q", str(tmp_path / "r")], check=True, env=env)
    (tmp_path / "r" / "dir").mkdir()
    (tmp_path / "r" / "a.txt").write_text("one\n")
    (tmp_path / "r" / "dir" / "b.txt").write_text("two\n")
    subprocess.run(["git", "-C", str(tmp_path / "r"), "add", "."], check=True, env=env)
    subprocess.run(
        [
            "git",
            "-C",
            str(tmp_path / "r"),
            "-c",
            "commit.gpgsign=false",
            "commit",
            "-q",
            "--cleanup=verbatim",
            "-m",
            "first",
        ],
        check=True,
        env=env,
    )
    out = subprocess.run(
        ["git", "-C", str(tmp_path / "r"), "rev-parse", "HEAD", "HEAD^{tree}"],
        check=True,
        env=env,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert out[1] == tree
    # git adds a trailing newline to -m messages; the sim stores messages verbatim
    sha_nl = store.put_commit(tree, [], sig, sig, "first\n")
    assert out[0] == sha_nl
    assert sha != sha_nl


def test_tree_rejects_unknown_blob() -> None:
    from sim.gitgraph import GitError

    with pytest.raises(GitError):
        ObjectStore().put_tree([TreeEntry("100644", "x", "0" * 40)])


# -- property test: compare against a reference ancestry computation -------------------------------


def _ref_ancestors(parents: dict[int, list[int]], n: int) -> set[int]:
    out, stack = set(), [n]
    while stack:
        c = stack.pop()
        if c not in out:
            out.add(c)
            stack.extend(parents[c])
    return out


@st.composite
def dags(draw: st.DrawFn) -> dict[int, list[int]]:
    """Random commit DAGs: each node has 0-2 parents among earlier nodes (merges and forks)."""
    n = draw(st.integers(min_value=1, max_value=14))
    parents: dict[int, list[int]] = {0: []}
    for i in range(1, n):
        k = draw(st.integers(min_value=0 if i > 3 else 1, max_value=min(2, i)))
        ps = draw(st.lists(st.integers(min_value=0, max_value=i - 1), min_size=k, max_size=k, unique=True))
        parents[i] = ps
    return parents


@settings(max_examples=150, deadline=None)
@given(dag=dags(), data=st.data())
def test_compare_matches_reference_on_random_dags(dag: dict[int, list[int]], data: st.DataObject) -> None:
    store = ObjectStore()
    tree = store.put_tree([])
    shas: dict[int, str] = {}
    for i in sorted(dag):
        sig = Signature("t", "t@sim", 1_700_000_000 + i)
        shas[i] = store.put_commit(tree, [shas[p] for p in dag[i]], sig, sig, f"c{i}")
    a = data.draw(st.sampled_from(sorted(dag)))
    b = data.draw(st.sampled_from(sorted(dag)))
    anc_a, anc_b = _ref_ancestors(dag, a), _ref_ancestors(dag, b)
    cmp = compare(store, shas[a], shas[b])
    assert cmp.ahead_by == len(anc_b - anc_a)
    assert cmp.behind_by == len(anc_a - anc_b)
    expected = "identical" if a == b else "ahead" if a in anc_b else "behind" if b in anc_a else "diverged"
    assert cmp.status == expected
    assert {s for s in cmp.commits} == {shas[i] for i in anc_b - anc_a}
    # commits are listed parents-first
    pos = {s: k for k, s in enumerate(cmp.commits)}
    for i in anc_b - anc_a:
        for p in dag[i]:
            if shas[p] in pos:
                assert pos[shas[p]] < pos[shas[i]]
    common = anc_a & anc_b
    if not common:
        assert cmp.merge_base is None
    else:
        # the merge base is a common ancestor that no other common ancestor descends from
        inv = {v: k for k, v in shas.items()}
        assert cmp.merge_base is not None
        mb = inv[cmp.merge_base]
        assert mb in common
        assert not any(mb in _ref_ancestors(dag, c) - {c} for c in common)
