"""PyGithub, unmodified except for base_url, performs each operation the bot needs against the sim."""

from __future__ import annotations

import io
import json
import time
import zipfile
from typing import cast

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from github import Auth, Github, GithubException, GithubIntegration, InputGitTreeElement
from github.WorkflowRun import WorkflowRun

from sim.server import SimServer
from tests.helpers.wait import wait_for
from tests.sim.conftest import TEST_CONFIG, client, gh_as

BENCH = "SemiAnalysisAI/InferenceX"
KEY = "minimaxm3-fp4-mi355x-vllm"


def test_contents_and_git_data_commit_flow(seeded: SimServer, gh: Github) -> None:
    repo = gh.get_repo(BENCH)
    pr = repo.get_pull(2104)
    branch = pr.head.ref
    master = repo.get_contents(".github/configs/amd-master.yaml", ref=branch)
    assert not isinstance(master, list)
    text = master.decoded_content.decode()
    assert "nightly-4559c43a9526597c00cbcc4f59979496500268d1" in text
    new_text = text.replace("nightly-4559c43a9526597c00cbcc4f59979496500268d1", "nightly-" + "a" * 40)

    ref = repo.get_git_ref(f"heads/{branch}")
    head = repo.get_git_commit(ref.object.sha)
    blob = repo.create_git_blob(new_text, "utf-8")
    assert repo.get_git_blob(blob.sha).size == len(new_text.encode())
    tree = repo.create_git_tree(
        [InputGitTreeElement(".github/configs/amd-master.yaml", "100644", "blob", sha=blob.sha)],
        base_tree=head.tree,
    )
    commit = repo.create_git_commit("Bump image", tree, [head])
    ref.edit(commit.sha)  # fast-forward, no force
    assert repo.get_git_ref(f"heads/{branch}").object.sha == commit.sha
    assert repo.get_pull(2104).head.sha == commit.sha
    got = repo.get_contents(".github/configs/amd-master.yaml", ref=branch)
    assert not isinstance(got, list) and got.decoded_content.decode() == new_text
    # exactly one changed file and one changed line in the commit
    cmp = repo.compare(head.sha, commit.sha)
    assert (cmp.status, cmp.ahead_by, cmp.behind_by) == ("ahead", 1, 0)
    assert [f.filename for f in cmp.files] == [".github/configs/amd-master.yaml"]
    assert (cmp.files[0].additions, cmp.files[0].deletions) == (1, 1)

    # a non-fast-forward update is refused with 422, as GitHub does; force goes through
    sibling = repo.create_git_commit("sibling", tree, [head])
    with pytest.raises(GithubException) as exc:
        ref.edit(sibling.sha)
    assert exc.value.status == 422
    ref.edit(sibling.sha, force=True)

    new_ref = repo.create_git_ref("refs/heads/sweepbot/bump-x", commit.sha)
    with pytest.raises(GithubException) as dup:
        repo.create_git_ref("refs/heads/sweepbot/bump-x", commit.sha)
    assert dup.value.status == 422
    assert [r.ref for r in repo.get_git_matching_refs("heads/sweepbot/")] == ["refs/heads/sweepbot/bump-x"]
    new_ref.delete()
    assert list(repo.get_git_matching_refs("heads/sweepbot/")) == []

    # contents PUT creates a commit on the branch
    res = repo.create_file("notes/hello.txt", "add a note", "hi\n", branch="main")
    assert res["commit"].sha == repo.get_git_ref("heads/main").object.sha
    tree_listing = repo.get_git_tree(res["commit"].sha, recursive=True)
    assert "notes/hello.txt" in [e.path for e in tree_listing.tree]


def test_pulls_comments_reactions_permissions(seeded: SimServer, gh: Github) -> None:
    repo = gh.get_repo(BENCH)
    assert [p.number for p in repo.get_pulls(state="open")] == [2104]
    assert [
        p.number
        for p in repo.get_pulls(state="open", head="SemiAnalysisAI:minimaxm3-fp4-mi355x-vllm-int4-qr")
    ] == [2104]
    assert list(repo.get_pulls(state="open", base="other")) == []
    pr = repo.get_pull(2104)
    assert "requires vllm-project/vllm#47269" in pr.body
    assert sorted(f.filename for f in pr.get_files()) == [
        ".github/configs/amd-master.yaml",
        "benchmarks/single_node/fixed_seq_len/minimaxm3_fp4_mi355x_vllm.sh",
    ]

    c = pr.create_issue_comment("<!-- sweepbot:status -->\nwaiting")
    assert [x.id for x in pr.get_issue_comments()] == [c.id]
    c.edit("<!-- sweepbot:status -->\ndone")
    assert pr.get_issue_comment(c.id).body.endswith("done")
    r = c.create_reaction("eyes")
    assert r.content == "eyes"
    assert [x.content for x in c.get_reactions()] == ["eyes"]

    perms = {
        u: repo.get_collaborator_permission(u)
        for u in ("alice-admin", "bob-maintainer", "carol-writer", "dave-outside")
    }
    # the legacy field folds maintain into write, as GitHub's documented response does
    assert perms == {
        "alice-admin": "admin",
        "bob-maintainer": "write",
        "carol-writer": "write",
        "dave-outside": "read",
    }
    raw = repo.get_collaborator_role_name("bob-maintainer")
    assert raw == "maintain"

    # a bump PR from a branch, then closed with state=closed
    main = repo.get_git_ref("heads/main").object.sha
    repo.create_git_ref("refs/heads/sweepbot/bump", main)
    repo.create_file("x.txt", "x", "x\n", branch="sweepbot/bump")
    bump = repo.create_pull(base="main", head="sweepbot/bump", title="bump", body="b")
    assert bump.number == 2105
    bump.edit(state="closed")
    assert repo.get_pull(bump.number).state == "closed" and not repo.get_pull(bump.number).merged


def test_merge_and_compare_upstream(seeded: SimServer, gh: Github) -> None:
    vllm = gh_as(seeded, "alice-admin").get_repo("vllm-project/vllm")
    seeded.world.set_permission("vllm-project/vllm", "alice-admin", "admin")
    pr = vllm.get_pull(47269)
    # PyGithub types merge_commit_sha as str; GitHub sends null before the merge.
    assert not pr.merged and cast(str | None, pr.merge_commit_sha) is None
    before = vllm.get_git_ref("heads/main").object.sha
    status = pr.merge()
    assert status.merged
    pr = vllm.get_pull(47269)
    assert pr.merged and pr.merge_commit_sha == status.sha and pr.merged_by.login == "alice-admin"
    assert pr.is_merged()
    assert not vllm.get_pull(47270).is_merged()
    cmp = vllm.compare(pr.merge_commit_sha, before)
    assert (cmp.status, cmp.behind_by) == ("behind", 2)  # the merge commit and the PR's commit
    assert vllm.compare(pr.merge_commit_sha, pr.merge_commit_sha).status == "identical"
    other = vllm.get_pull(47270).head.sha
    assert vllm.compare(pr.merge_commit_sha, other).status == "diverged"
    assert vllm.compare(before, f"{pr.merge_commit_sha}").merge_base_commit.sha == before


def test_actions_dispatch_runs_jobs_artifacts_cancel(seeded: SimServer, gh: Github) -> None:
    repo = gh.get_repo(BENCH)
    wf = repo.get_workflow("e2e-tests.yml")
    cmd = f"{TEST_CONFIG} {KEY} --conc 32 64"
    run = wf.create_dispatch(
        "minimaxm3-fp4-mi355x-vllm-int4-qr",
        {"generate-cli-command": cmd, "test-name": "sweepbot-1"},
        throw=True,
        return_run_details=True,
    )
    run_id = run.id
    wait_for(lambda: repo.get_workflow_run(run_id).status == "completed", what="run to complete")
    got = repo.get_workflow_run(run_id)
    # e2e-tests.yml's run-name is `e2e Test - ${{ inputs.test-name || ... }}`; `name` is the workflow's
    # the real e2e-tests.yml's `eval /` job cannot evaluate its matrix (get-jobs never assigns
    # EVALS; tests/sim/test_eval_matrix.py): the run fails although every benchmark job succeeded
    assert (got.conclusion, got.display_title, got.event) == (
        "failure",
        "e2e Test - sweepbot-1",
        "workflow_dispatch",
    )
    assert got.name == "End-to-End Tests"
    all_jobs = list(got.jobs())
    assert [j.name for j in all_jobs][0] == "get-jobs"
    jobs = [j for j in all_jobs if j.name not in ("get-jobs", "eval /")]
    assert len(jobs) == 2 and all(j.conclusion == "success" and j.runner_name for j in jobs)
    assert all("mi355x" in j.labels for j in jobs)
    # benchmark-tmpl.yml's job name behind the caller's: e2e-tests.yml's `single-node /` jobs pass
    # `run-eval: false`; conc 64, the slice's eval point, would have its own eval-only job under
    # `eval /`, which GitHub fails unexpanded
    assert [j.name for j in all_jobs[1:]] == [
        "single-node / p50 | minimaxm3 fp4 mi355x vllm TP4    c32",
        "single-node / p50 | minimaxm3 fp4 mi355x vllm TP4    c64",
        "eval /",
    ]
    assert all(s.name == "Complete job" for s in [j.steps[-1] for j in jobs])
    arts = list(got.get_artifacts())
    # benchmark-tmpl.yml's uploads: bmk_/server_logs_/gpu_metrics_/power_audit_ per job, named
    # after RESULT_FILENAME, which ends in the node that ran the job; no eval_ artifact; and
    # collect-results.yml's aggregate of the bmk_ artifacts, results_bmk
    stem = "minimaxm3_8k1k_fp4_vllm_tp4-pp1-dcp1-pcp1-ep1-dpafalse_disagg-false_spec-none_conc{}"
    bmk = sorted(a.name for a in arts if a.name.startswith("bmk_"))
    assert not [a.name for a in arts if a.name.startswith("eval_")]
    assert len(bmk) == 2 and len(arts) == 9 and [a.name for a in arts].count("results_bmk") == 1
    nodes = {j.runner_name for j in jobs}
    for c, name in zip((32, 64), bmk, strict=True):
        assert (
            name.startswith(f"bmk_{stem.format(c)}_") and name.rsplit("_conc", 1)[1].split("_", 1)[1] in nodes
        )
    assert sorted(a.name for a in repo.get_artifacts()) == sorted(a.name for a in arts)
    # download: 302 to a sim blob URL holding a zip with agg_<RESULT_FILENAME>.json
    bmk_art = next(a for a in arts if a.name == bmk[0])
    r = httpx.get(
        bmk_art.archive_download_url, headers={"Authorization": "token sim-token"}, follow_redirects=True
    )
    assert r.status_code == 200
    zf = zipfile.ZipFile(io.BytesIO(r.content))
    member = "agg_" + bmk_art.name.removeprefix("bmk_") + ".json"
    assert zf.namelist() == [member]
    result = json.loads(zf.read(member))
    assert result["max_concurrency"] in (32, 64) and result["completed"] == 10 * result["max_concurrency"]

    # without run details (or when the server ignores the flag) the answer is 204 and the run is found by name
    seeded.world.faults.dispatch_ignore_run_details = True
    seeded.world.settings.time_scale = 1.0  # keep this run in flight until it is cancelled
    # PyGithub's overload is wrong: with return_run_details a 204 (no details) returns True.
    ok = cast(
        bool | WorkflowRun,
        wf.create_dispatch(
            "main",
            {
                "generate-cli-command": f"{TEST_CONFIG} {KEY} --conc 512",
                "test-name": "sweepbot-2",
            },
            throw=True,
            return_run_details=True,
        ),
    )
    assert ok is True
    runs = [r for r in repo.get_workflow_runs() if r.display_title == "e2e Test - sweepbot-2"]
    assert len(runs) == 1
    runs[0].cancel()
    wait_for(lambda: repo.get_workflow_run(runs[0].id).status == "completed", what="cancel")
    assert repo.get_workflow_run(runs[0].id).conclusion == "cancelled"
    assert all(r.busy_job is None for r in seeded.world.runners["mi355x"])
    assert [r.id for r in wf.get_runs()][:2] == [runs[0].id, run_id]


def test_etag_304_spends_no_budget(seeded: SimServer) -> None:
    url = f"{seeded.github_api_url}/repos/vllm-project/vllm/pulls/47269"
    h = {"Authorization": "token sim-token"}
    first = httpx.get(url, headers=h)
    assert first.status_code == 200 and first.headers["ETag"]
    used = int(first.headers["X-RateLimit-Used"])
    for _ in range(3):
        again = httpx.get(url, headers={**h, "If-None-Match": first.headers["ETag"]})
        assert again.status_code == 304 and again.content == b""
        assert int(again.headers["X-RateLimit-Used"]) == used
    calls = seeded.world.call_summary()
    assert calls["by_operation"]["pulls/get"] == {"200": 1, "304": 3}
    assert calls["not_modified"] == 3
    # a change makes the ETag stale
    seeded.world.merge_pull("vllm-project/vllm", 47269, merger="vllm-maintainer")
    changed = httpx.get(url, headers={**h, "If-None-Match": first.headers["ETag"]})
    assert changed.status_code == 200 and int(changed.headers["X-RateLimit-Used"]) == used + 1
    # PyGithub's own conditional refresh sees the 304 too
    g = client(seeded, "sim-token")
    pr = g.get_repo("vllm-project/vllm").get_pull(47269)
    assert pr.update() is False


def test_rate_limit_budget_and_exhaustion(sim: SimServer) -> None:
    sim.world.settings.rate_limit = 3
    sim.world.add_repo("o/r")
    sim.world.commit_files("o/r", "main", {"a": "1"}, "init")
    g = client(sim, "sim-token")
    g.get_repo("o/r")
    core = g.get_rate_limit().resources.core
    assert (core.limit, core.remaining) == (3, 2)
    g.get_repo("o/r")
    g.get_repo("o/r")
    with pytest.raises(GithubException) as exc:
        g.get_repo("o/r")
    assert exc.value.status == 403
    headers = exc.value.headers
    assert headers is not None and headers["x-ratelimit-remaining"] == "0"


def test_app_jwt_installation_token_exchange(seeded: SimServer) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    pub = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    seeded.world.add_app(4242, "sweepbot", pub, owner="SemiAnalysisAI")
    inst = seeded.world.add_installation(4242, "SemiAnalysisAI", [BENCH])
    integ = GithubIntegration(auth=Auth.AppAuth(4242, pem), base_url=seeded.github_api_url)
    found = integ.get_repo_installation("SemiAnalysisAI", "InferenceX")
    assert found.id == inst.id
    token = integ.get_access_token(inst.id)
    assert token.token.startswith("ghs_")
    g = Github(
        auth=Auth.AppInstallationAuth(Auth.AppAuth(4242, pem), inst.id),
        base_url=seeded.github_api_url,
        retry=None,
        seconds_between_requests=0,
        seconds_between_writes=0,
    )
    pr = g.get_repo(BENCH).get_pull(2104)
    c = pr.create_issue_comment("from the app")
    assert c.user.login == "sweepbot[bot]"
    # a JWT signed with another key is refused
    other = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        .decode()
    )
    bad = GithubIntegration(auth=Auth.AppAuth(4242, other), base_url=seeded.github_api_url)
    with pytest.raises(GithubException) as exc:
        bad.get_access_token(inst.id)
    assert exc.value.status == 401
    # an installation token cannot write to a repo outside the installation
    with pytest.raises(GithubException) as denied:
        g.get_repo("vllm-project/vllm").get_pull(47269).merge()
    assert denied.value.status == 403


def test_bad_token_and_outsider_write(seeded: SimServer) -> None:
    bad = client(seeded, "nope")
    with pytest.raises(GithubException) as exc:
        bad.get_repo(BENCH)
    assert exc.value.status == 401
    outsider = gh_as(seeded, "dave-outside").get_repo(BENCH)
    outsider.get_pull(2104).create_issue_comment("/sweep conc=32")  # commenting is allowed
    with pytest.raises(GithubException) as denied:
        outsider.create_git_ref("refs/heads/x", outsider.get_git_ref("heads/main").object.sha)
    assert denied.value.status == 403


def test_time_scale_runs_finish_fast(seeded: SimServer, gh: Github) -> None:
    start = time.monotonic()
    wf = gh.get_repo(BENCH).get_workflow("e2e-tests.yml")
    run = wf.create_dispatch(
        "minimaxm3-fp4-mi355x-vllm-int4-qr",
        {"generate-cli-command": f"{TEST_CONFIG} {KEY}"},
        throw=True,
        return_run_details=True,
    )
    wait_for(lambda: seeded.world.runs[run.id].status == "completed", what="full sweep")
    bench = [j for j in seeded.world.runs[run.id].jobs if seeded.world.jobs[j].point]
    # conc 1..512 on the recipe branch's single 8k1k item; the eval-only jobs of the default
    # selection (conc 512 and 32) are not run: the real file's `eval /` matrix does not evaluate
    assert len(bench) == 10
    assert not [j for j in bench if seeded.world.jobs[j].point["eval-only"]]
    assert time.monotonic() - start < 5
