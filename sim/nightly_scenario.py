"""The nightly regression story, played on top of the seed world one named step at a time.

`NightlyRegressionStory(world).load()` (after the seed scenario is loaded) turns the nightly
regression watch on for the seed's key (`watch-nightlies:` in `.github/sweepbot.yml` on the
benchmark repo's default branch, canaries at conc 4 and 64). Its steps then play upstream vLLM
history: good nightlies one by one, a burst of five nightlies in one go whose third carries an
injected 5% decode slowdown (`World.inject_regression` at one upstream commit, PR #50123), more
bad nightlies, the fix (#50200) and the nightlies after it. The bot's watch should measure the
nightlies in idle runner time, find the change, bisect the burst, open one issue naming the first
bad nightly and the commit range, and close it once the fix's nightlies recover.

Everything is deterministic (the world's git clock and perf seed), so the same steps give the same
SHAs and numbers. tests/e2e/test_nightly_watch_sim.py plays it end to end.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sim.scenario import BENCH_REPO, IMAGE, VLLM_REPO, Step, play_next_step
from sim.world import SimError, World

KEY = "minimaxm3-fp4-mi355x-vllm"
PERF_PR = 50123
FIX_PR = 50200
SLOWDOWN = 0.05
_PR_NUMBER = re.compile(r"\(#(\d+)\)$")


def bot_config(registry_url: str | None = None) -> str:
    """`.github/sweepbot.yml` with the image source and the watch (registry URL: the sim's hub)."""
    url = f"    url: {registry_url}\n" if registry_url else ""
    return (
        "version: 1\nimages:\n"
        f"  - name: {IMAGE}\n    registry: dockerhub\n{url}    source-repo: {VLLM_REPO}\n"
        "watch-nightlies:\n"
        f"  keys:\n    - config-key: {KEY}\n      conc: [4, 64]\n      seq: 8k1k\n"
        "  budget-runner-hours-per-week: null\n"
        "  max-bisect-runs: 4\n"
        "  min-nightlies: 6\n"
    )


@dataclass
class NightlyRegressionStory:
    world: World
    registry_url: str | None = None
    good_before: int = 5  # nightlies pushed one by one before the burst
    bad_after: int = 3  # bad nightlies pushed one by one after the burst
    after_fix: int = 2  # nightlies after the fix's own nightly
    steps: list[Step] = field(default_factory=list)
    position: int = 0
    loaded: bool = False
    facts: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)

    def load(self) -> dict[str, Any]:
        w = self.world
        with w.lock:
            if w.scenario is None:
                raise SimError(409, "load the seed scenario first: the nightly story builds on its world")
            if self.loaded:
                raise SimError(409, "the nightly story is already loaded")
            w.commit_files(
                BENCH_REPO,
                "main",
                {".github/sweepbot.yml": bot_config(self.registry_url)},
                "sweepbot config: watch nightlies of minimaxm3-fp4-mi355x-vllm",
                author="alice-admin",
            )
            self.facts.update({"key": KEY, "perf_pr": PERF_PR, "fix_pr": FIX_PR, "burst": []})
            self.steps = self._build_steps()
            self.loaded = True
            return self.status()

    def _commit(self, title: str, *, tag: bool = True) -> str:
        """One upstream change as vLLM lands them: a PR (``title`` ends "(#N)") merged into main.

        The PR's branch commit carries the title without the number; main gets the merge commit
        ("Merge pull request #N ..."), which is what the nightly is built from. Which PR a commit of
        the range belongs to is the commit's associated-pulls answer (``World.pulls_with_commit``).
        """
        w = self.world
        main: list[str] = w.scenario.vllm_main
        m = _PR_NUMBER.search(title)
        assert m is not None, f"a story PR title ends with (#N): {title!r}"
        number, subject = int(m.group(1)), title[: m.start()].rstrip()
        branch = f"story/pr-{number}"
        w.set_ref(VLLM_REPO, f"refs/heads/{branch}", w.repo(VLLM_REPO).refs["refs/heads/main"], create=True)
        w.commit_files(
            VLLM_REPO, branch, {f"vllm/changes/{len(main):03d}.txt": title + "\n"}, subject, author="vllm-dev"
        )
        w.open_pull(VLLM_REPO, branch, "main", subject, user="vllm-dev", number=number)
        sha = w.merge_pull(VLLM_REPO, number, merger="vllm-maintainer")
        main.append(sha)
        if tag:
            self.world.push_tag(IMAGE, f"nightly-{sha}")
        return sha

    def _build_steps(self) -> list[Step]:
        steps: list[Step] = []
        for i in range(self.good_before):
            title = f"[Core] steady improvement {i} (#{49000 + i})"
            steps.append(Step(f"good-nightly-{i}", f"a good nightly: {title}", self._nightly(title)))
        steps.append(
            Step(
                "burst-with-regression",
                f"five nightlies at once; #{PERF_PR} (in the third one's commits) slows decode by "
                f"{SLOWDOWN:.0%}",
                self._burst,
            )
        )
        for i in range(self.bad_after):
            title = f"[Core] more work {i} (#{50160 + i})"
            steps.append(
                Step(f"bad-nightly-{i}", f"a nightly with the regression: {title}", self._nightly(title))
            )
        steps.append(Step("fix", f"#{FIX_PR} reverts the slowdown; its nightly", self._fix))
        for i in range(self.after_fix):
            title = f"[Core] after the fix {i} (#{50210 + i})"
            steps.append(
                Step(f"fixed-nightly-{i}", f"a nightly after the fix: {title}", self._nightly(title))
            )
        return steps

    def _nightly(self, title: str) -> Callable[[], dict[str, Any]]:
        def run() -> dict[str, Any]:
            sha = self._commit(title)
            return {"commit": sha, "tag": f"nightly-{sha}"}

        return run

    def _burst(self) -> dict[str, Any]:
        burst = [
            self._commit("[Docs] Update README (#50101)"),
            self._commit("[CI] Pin the ROCm base image (#50110)"),
        ]
        self._commit("[Misc] Tidy imports (#50115)", tag=False)
        bad = self._commit(f"[Perf] Rework the MoE kernel launch (#{PERF_PR})", tag=False)
        self.world.inject_regression(VLLM_REPO, bad, SLOWDOWN)
        burst += [
            self._commit("[Model] Minor MiniMax-M3 cleanup (#50130)"),
            self._commit("[Core] Scheduler stats (#50140)"),
            self._commit("[CI] Flaky test fix (#50150)"),
        ]
        self.facts.update(
            {
                "burst": burst,
                "bad_commit": bad,
                "last_good_tag": f"nightly-{burst[1]}",
                "first_bad_tag": f"nightly-{burst[2]}",
            }
        )
        return {"tags": [f"nightly-{s}" for s in burst], "regression_at": bad}

    def _fix(self) -> dict[str, Any]:
        sha = self._commit(f"[Bugfix] Revert the MoE launch rework (#{FIX_PR})")
        self.world.fix_regression(self.world.regressions[-1], sha)
        self.facts["fix_commit"] = sha
        self.facts["recovered_tag"] = f"nightly-{sha}"
        return {"commit": sha, "tag": f"nightly-{sha}"}

    def step(self) -> dict[str, Any]:
        with self.world.lock:
            if not self.loaded:
                raise SimError(409, "load the nightly story before stepping it")
            return play_next_step(self)

    def status(self) -> dict[str, Any]:
        return {
            "name": "nightly",
            "loaded": self.loaded,
            "position": self.position,
            "steps": [
                {"name": s.name, "description": s.description, "done": i < self.position}
                for i, s in enumerate(self.steps)
            ],
            "history": self.history,
            "facts": self.facts,
        }
