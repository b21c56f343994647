"""One master-config reader (issue 30): the sweep path and the tracking path find the same files.

They used to find them differently: the sweep's reader took any name ending in ``master.yaml``
under fixed directories, the tracking reader the repo's own ``*-master.yaml`` / ``*-master.yml``
names under ``bump.config-dirs``. A key kept in a ``-master.yml`` file could be bumped but not swept.
Both now read through ``app.flows.repo.recipe_files.read_master_configs``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.core.bot_config import BotConfig, NightlyKey
from app.flows.nightly.canary import key_context
from app.flows.repo.recipe_files import locate_config, read_master_configs
from app.flows.sweeps.request import request_sweep
from tests.sweep_fakes import KEY, REPO, SHA1, FakeGitHub, FakeRequest

MASTER = (FakeGitHub().files[".github/configs/amd-master.yaml"], "configs/amd-master.yml")


class _Branch(FakeRequest):
    """The tracking and nightly reads besides the files: the default branch's head (at the PR's
    head sha here) and a PR's changed files (none)."""

    def get_ref(self, repo: str, ref: str) -> dict[str, Any] | None:
        return {"object": {"sha": SHA1}}

    def list_pull_files(self, repo: str, number: int) -> list[dict[str, Any]]:
        return []


def _repo_with_yml_master() -> FakeGitHub:
    gh = FakeGitHub()
    text, path = MASTER
    del gh.files[".github/configs/amd-master.yaml"]
    gh.files[path] = text
    # not master configs by the repo's names: neither path may read them
    gh.files["configs/master.yaml"] = "not-a-key:\n  image: x\n"
    gh.files["configs/runners.yaml"] = gh.files[".github/configs/runners.yaml"]
    return gh


def test_the_reader_takes_the_repos_master_names_only() -> None:
    gh = _repo_with_yml_master()
    files = read_master_configs(FakeRequest(gh), REPO, SHA1)
    assert sorted(files) == ["configs/amd-master.yml"]
    # the bot config's directories are the default ones
    assert read_master_configs(FakeRequest(gh), REPO, SHA1, BotConfig().bump.config_dirs) == files


def test_sweep_tracking_and_nightly_paths_find_a_key_in_the_same_file(db_session: Session) -> None:
    gh = _repo_with_yml_master()
    loc, text = locate_config(_Branch(gh), REPO, SHA1, KEY, BotConfig())
    assert loc.found and loc.path == "configs/amd-master.yml" and text == MASTER[0]
    context = key_context(_Branch(gh), REPO, BotConfig(), NightlyKey.model_validate({"config-key": KEY}))
    assert context.path == loc.path
    req = request_sweep(
        db_session,
        FakeRequest(gh),
        repo=REPO,
        pr_number=7,
        config_key=KEY,
        requested_by="maint",
        reason="command",
    )
    assert req.sweep.config_path == loc.path
