"""The container registry (images, tags, retention) and injected upstream performance changes."""

from __future__ import annotations

import hashlib

from sim import perf
from sim.gitgraph import GitError
from sim.models import ImageRepo, SimError, Tag
from sim.world_git import GitData


class Registry(GitData):
    def add_image(self, name: str, keep_nightlies: int | None = None) -> ImageRepo:
        with self.lock:
            img = self.images.setdefault(name, ImageRepo(name))
            if keep_nightlies is not None:
                img.keep_nightlies = keep_nightlies
            return img

    def push_tag(self, image: str, tag: str) -> Tag:
        with self.lock:
            img = self.add_image(image)
            digest = "sha256:" + hashlib.sha256(f"{image}:{tag}".encode()).hexdigest()
            t = Tag(tag, digest, self.now(), next(self._tag_seq))
            img.tags[tag] = t
            self._apply_retention(img)
            return t

    def delete_tag(self, image: str, tag: str) -> None:
        with self.lock:
            img = self.images.get(image)
            if img is None or tag not in img.tags:
                raise SimError(404, f"tag {image}:{tag} not found")
            del img.tags[tag]

    def set_retention(self, image: str, keep_nightlies: int | None) -> None:
        with self.lock:
            img = self.add_image(image)
            img.keep_nightlies = keep_nightlies
            self._apply_retention(img)

    def _apply_retention(self, img: ImageRepo) -> None:
        if img.keep_nightlies is None:
            return
        nightlies = sorted(
            (t for t in img.tags.values() if t.name.startswith("nightly")), key=lambda t: t.seq
        )
        for t in nightlies[: max(0, len(nightlies) - img.keep_nightlies)]:
            del img.tags[t.name]

    def inject_regression(
        self, repo: str, commit: str, factor: float, *, fixed_by: str | None = None, metric: str = "tpot"
    ) -> perf.Regression:
        """From upstream ``commit`` on (until ``fixed_by``), nightlies built from ``repo`` run slower."""
        with self.lock:
            if commit not in self.repo(repo).objects.commits:
                raise SimError(422, f"{commit!r} is not a commit of {repo}")
            if metric not in ("tpot", "ttft"):
                raise SimError(422, f"metric {metric!r} must be tpot or ttft")
            reg = perf.Regression(repo, commit, factor, fixed_by, metric)
            self.regressions.append(reg)
            return reg

    def fix_regression(self, reg: perf.Regression, fixed_by: str) -> perf.Regression:
        with self.lock:
            fixed = perf.Regression(reg.repo, reg.commit, reg.factor, fixed_by, reg.metric)
            self.regressions[self.regressions.index(reg)] = fixed
            return fixed

    def _contains(self, repo: str, commit: str, head: str) -> bool:
        try:
            _b, _h, cmp = self.compare(repo, commit, head)
        except (SimError, GitError, KeyError):
            return False
        return cmp.status in ("ahead", "identical")

    def image_slowdown(self, image: str) -> dict[str, float]:
        """The injected slowdowns of an image (``nightly-<sha>`` of an upstream repo's commit)."""
        sha = perf.image_commit(image)
        if sha is None or not self.regressions:
            return {}
        return perf.slowdown(self.regressions, lambda repo, c: self._contains(repo, c, sha))
