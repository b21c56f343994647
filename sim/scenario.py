"""The seed story, built into a World and played forward one named step at a time.

`SeedScenario(world).load()` builds: the benchmark repo SemiAnalysisAI/InferenceX (master config,
perf-changelog, runners, workflow, benchmark script), its users and permissions, upstream
vllm-project/vllm with PRs #47269 and #47270 on a linear main, the Docker Hub repo
vllm/vllm-openai-rocm with `nightly-<sha>` tags (vLLM keeps 14), the mi355x fleet, and the recipe
PR whose body depends on both vLLM PRs. `.step()` plays the next event. Everything (git dates
included) is deterministic, so the same seed gives the same SHAs, events and perf numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import yaml

from sim.getjobs import assign_evals
from sim.world import SimError, World

BENCH_REPO = "SemiAnalysisAI/InferenceX"
VLLM_REPO = "vllm-project/vllm"
IMAGE = "vllm/vllm-openai-rocm"
ATOM_IMAGE = "rocm/atom-dev"
WORKFLOW = "e2e-tests.yml"
E2E_PATH = f".github/workflows/{WORKFLOW}"
MASTER_PATH = ".github/configs/amd-master.yaml"
SCRIPT_PATH = "benchmarks/single_node/fixed_seq_len/minimaxm3_fp4_mi355x_vllm.sh"
RECIPE_BRANCH = "minimaxm3-fp4-mi355x-vllm-int4-qr"
SEED_KEY = "minimaxm3-fp4-mi355x-vllm"
OLD_PIN = "nightly-4559c43a9526597c00cbcc4f59979496500268d1"
# The other keys the story can be played on (``SeedScenario(key=...)``): a multi-node key and an
# agentic-coding key of the world's master config (neighbours copied from the real file at f8f9b66).
STORY_KEYS = (SEED_KEY, "dsv4-fp4-mi355x-atom-disagg", "kimik2.5-fp4-mi355x-vllm-agentic")
DEP_A, DEP_B = 47269, 47270

MAINTAINERS = {"alice-admin": "admin", "bob-maintainer": "maintain", "carol-writer": "write"}
OUTSIDER = "dave-outside"
BOT = "sweepbot[bot]"

RECIPE_BODY = """\
Close the high-concurrency gap vs the ATOM recipe on MiniMax-M3 MXFP4 MI355X (vLLM, TP4, 8k1k).

- Add INT4 quantized all-reduce and fp8 KV cache to the benchmark script.
- 8k1k only: one TP4 sweep, conc 1..512 (1k1k is deprecated).

The knobs only work on a nightly that carries both upstream fixes:

requires vllm-project/vllm#47269
Depends-On: vllm-project/vllm#47270
"""

KNOBS = """\
export VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=INT4
export VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16=0
export VLLM_ROCM_QUICK_REDUCE_QUANTIZATION_MIN_SIZE_KB=256
"""


def data_files() -> dict[str, str]:
    """The benchmark repo's files shipped in sim/data/inferencex (dot-github -> .github)."""
    root = resources.files("sim") / "data" / "inferencex"
    out: dict[str, str] = {}

    def walk(node: Any, prefix: str) -> None:
        for child in node.iterdir():
            name = ".github" if child.name == "dot-github" else child.name
            if child.is_dir():
                walk(child, f"{prefix}{name}/")
            else:
                out[f"{prefix}{name}"] = child.read_text()

    walk(root, "")
    return out


def runner_counts(runners_yaml: str) -> dict[str, int]:
    doc = yaml.safe_load(runners_yaml) or {}
    return {
        label: len(nodes)
        for label, nodes in (doc.get("labels") or {}).items()
        if not label.startswith("cluster:")
    }


def runner_nodes(runners_yaml: str) -> dict[str, list[str]]:
    doc = yaml.safe_load(runners_yaml) or {}
    return {
        str(label): [str(n) for n in nodes or []]
        for label, nodes in (doc.get("labels") or {}).items()
        if not str(label).startswith("cluster:")
    }


def recipe_master(master: str) -> str:
    """The recipe PR's master config: the vllm key drops 1k1k (exactly the lines of that block)."""
    start = master.index("minimaxm3-fp4-mi355x-vllm:\n")
    block_start = master.index("    - isl: 1024\n", start)
    block_end = master.index("    - isl: 8192\n", block_start)
    return master[:block_start] + master[block_end:]


RELEASE_PIN = "v0.21.0"  # the vLLM release another story key runs on main


def pinned_master(master: str, key: str, tag: str) -> str:
    """``master`` with ``key``'s `image:` line, and only it, set to ``IMAGE:tag``."""
    start = master.index(f"\n{key}:\n") + 1
    line_start = master.index("  image: ", start)
    line_end = master.index("\n", line_start)
    return master[:line_start] + f"  image: {IMAGE}:{tag}" + master[line_end:]


def recipe_body(key: str) -> str:
    """The recipe PR's body: the seed's, or for another key the same two dependencies."""
    if key == SEED_KEY:
        return RECIPE_BODY
    return (
        f"Move {key} to the vLLM nightly channel.\n\nThe recipe needs a nightly that carries both "
        f"upstream fixes:\n\nrequires {VLLM_REPO}#{DEP_A}\nDepends-On: {VLLM_REPO}#{DEP_B}\n"
    )


def recipe_script(script: str) -> str:
    marker = "export VLLM_ROCM_USE_AITER=1\n"
    serve = "  --block-size 64 \\\n"
    return script.replace(marker, marker + KNOBS).replace(serve, serve + "  --kv-cache-dtype fp8 \\\n")


@dataclass
class Step:
    name: str
    description: str
    run: Callable[[], dict[str, Any]]


def play_next_step(story: Any) -> dict[str, Any]:
    """Run a loaded story's next step (``steps``, ``position``, ``history``); the caller holds the lock."""
    if story.position >= len(story.steps):
        return {"done": True, "step": None, "position": story.position}
    s = story.steps[story.position]
    result = s.run()
    story.position += 1
    entry = {
        "step": s.name,
        "description": s.description,
        "result": result,
        "position": story.position,
        "done": story.position >= len(story.steps),
    }
    story.history.append(entry)
    return entry


@dataclass
class SeedScenario:
    world: World
    variant: str = "seed"  # "seed" | "both-merge"
    # The real e2e-tests.yml (843c6254) never assigns EVALS, so its `eval /` job fails unexpanded;
    # True seeds a fixed copy whose get-jobs assigns it (sim.getjobs.assign_evals).
    evals_assigned: bool = False
    # the config key the recipe PR is about (STORY_KEYS): the seed's, a multi-node or an agentic one
    key: str = SEED_KEY
    steps: list[Step] = field(default_factory=list)
    position: int = 0
    loaded: bool = False
    history: list[dict[str, Any]] = field(default_factory=list)
    vllm_main: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.variant not in ("seed", "both-merge"):
            raise SimError(422, f"unknown variant {self.variant!r}: use 'seed' or 'both-merge'")
        if self.key not in STORY_KEYS:
            raise SimError(422, f"unknown story key {self.key!r}: use one of {', '.join(STORY_KEYS)}")

    @property
    def branch(self) -> str:
        return RECIPE_BRANCH if self.key == SEED_KEY else f"{self.key}-nightly"

    # -- building ---------------------------------------------------------------------------------------
    def load(self) -> dict[str, Any]:
        w = self.world
        with w.lock:
            if self.loaded:
                raise SimError(409, "scenario already loaded; create a new World to load it again")
            w.scenario = self
            files = data_files()
            w.add_org(BENCH_REPO.split("/")[0])
            w.add_org("vllm-project")
            w.add_user(BOT, type="Bot")
            for login in [*MAINTAINERS, OUTSIDER]:
                w.add_user(login)
                w.add_token(f"token-{login}", login=login)
            for login in MAINTAINERS:
                w.add_org_member(BENCH_REPO.split("/")[0], login, team="inferencex-maintainers")

            self._recipe_branch(self._load_bench(files), files)
            self._load_vllm()
            self._load_registry()
            recipe = self._open_recipe_pr()
            self.facts.update(
                {
                    "bench_repo": BENCH_REPO,
                    "recipe_pr": recipe.number,
                    "recipe_branch": self.branch,
                    "vllm_repo": VLLM_REPO,
                    "deps": [DEP_A, DEP_B],
                    "image": IMAGE,
                    "config_key": self.key,
                    "master_path": MASTER_PATH,
                }
            )
            self.steps = self._build_steps()
            self.loaded = True
            return self.status()

    def _load_bench(self, files: dict[str, str]) -> str:
        """The benchmark repo: its files, its workflows, its fleet; returns main's first commit."""
        w = self.world
        w.add_repo(BENCH_REPO, description="Open-source continuous inference benchmarking")
        if self.evals_assigned:
            files = files | {E2E_PATH: assign_evals(files[E2E_PATH])}
        if self.key != SEED_KEY:
            # another story key runs a vLLM release on main: the image repository a bump may pin
            # is the default branch's (docs/security.md), so the recipe PR only moves its tag
            files = files | {MASTER_PATH: pinned_master(files[MASTER_PATH], self.key, RELEASE_PIN)}
        for login, perm in MAINTAINERS.items():
            w.set_permission(BENCH_REPO, login, perm)
        w.set_permission(BENCH_REPO, OUTSIDER, "read")
        w.set_permission(BENCH_REPO, BOT, "write")
        base = w.commit_files(
            BENCH_REPO, "main", files, "Initial import of the benchmark configs", author="alice-admin"
        )
        # the repo's own workflows (real files, sim/data/.../workflows): name as each file says
        for path in sorted(f for f in files if f.startswith(".github/workflows/")):
            doc = yaml.safe_load(files[path]) or {}
            w.add_workflow(BENCH_REPO, path, str(doc.get("name") or path))
        w.runner_nodes = runner_nodes(files[".github/configs/runners.yaml"])
        for label, count in runner_counts(files[".github/configs/runners.yaml"]).items():
            w.set_runners(label, count)

        return base

    def _recipe_branch(self, base: str, files: dict[str, str]) -> None:
        """The recipe PR's same-repo branch, touching the vllm key and its script (another story
        key: that key's image line, from the release on main to vLLM's nightly channel)."""
        w = self.world
        w.set_ref(BENCH_REPO, f"refs/heads/{self.branch}", base, pusher="carol-writer")
        if self.key != SEED_KEY:
            w.commit_files(
                BENCH_REPO,
                self.branch,
                {MASTER_PATH: pinned_master(files[MASTER_PATH], self.key, OLD_PIN)},
                f"{self.key}: vLLM nightly channel",
                author="carol-writer",
            )
            return
        w.commit_files(
            BENCH_REPO,
            RECIPE_BRANCH,
            {
                MASTER_PATH: recipe_master(files[MASTER_PATH]),
                SCRIPT_PATH: recipe_script(files[SCRIPT_PATH]),
            },
            "minimaxm3 fp4 mi355x vllm: INT4 quick reduce + fp8 KV, 8k1k conc 1..512",
            author="carol-writer",
        )

    def _open_recipe_pr(self) -> Any:
        w = self.world
        title = (
            "minimaxm3-fp4-mi355x-vllm: INT4 quick reduce + fp8 KV cache, 8k1k conc 1..512"
            if self.key == SEED_KEY
            else f"{self.key}: vLLM nightly channel"
        )
        recipe = w.open_pull(
            BENCH_REPO,
            self.branch,
            "main",
            title,
            recipe_body(self.key),
            user="carol-writer",
            number=2104,
        )
        return recipe

    def _load_vllm(self) -> None:
        """Upstream vLLM: a linear main with several commits and two feature PRs."""
        w = self.world
        w.add_repo(VLLM_REPO, description="A high-throughput and memory-efficient inference engine")
        w.set_permission(VLLM_REPO, "vllm-maintainer", "admin")
        for i, msg in enumerate(
            [
                "[ROCm] Enable AITER MoE for MXFP4",
                "[Core] Scheduler cleanup",
                "[Model] MiniMax-M3 Quark MXFP4 support (#45794)",
                "[CI] Bump ROCm base image",
            ]
        ):
            self.vllm_main.append(
                w.commit_files(
                    VLLM_REPO,
                    "main",
                    {f"vllm/changes/{i:03d}.txt": f"{msg}\n", "README.md": f"vLLM rev {i}\n"},
                    msg,
                    author="vllm-maintainer",
                )
            )
        w.set_ref(VLLM_REPO, "refs/heads/rocm-int4-quick-reduce", self.vllm_main[-1], pusher="rocm-dev")
        w.commit_files(
            VLLM_REPO,
            "rocm-int4-quick-reduce",
            {"vllm/distributed/quick_reduce.py": "QUANTIZATION = ('INT4', 'INT6', 'INT8')\n"},
            "[ROCm] INT4 quick all-reduce for MI355X",
            author="rocm-dev",
        )
        w.open_pull(
            VLLM_REPO,
            "rocm-int4-quick-reduce",
            "main",
            "[ROCm] INT4 quick all-reduce for MI355X",
            "Adds INT4 quantized quick all-reduce on gfx950.",
            user="rocm-dev",
            number=DEP_A,
        )
        w.set_ref(VLLM_REPO, "refs/heads/minimax-m3-fp8-kv", self.vllm_main[-1], pusher="rocm-dev")
        w.commit_files(
            VLLM_REPO,
            "minimax-m3-fp8-kv",
            {"vllm/attention/minimax_msa.py": "SUPPORTED_KV_DTYPES = ('auto', 'fp8')\n"},
            "[Model] fp8 KV cache for MiniMax-M3 MSA",
            author="rocm-dev",
        )
        w.open_pull(
            VLLM_REPO,
            "minimax-m3-fp8-kv",
            "main",
            "[Model] fp8 KV cache for MiniMax-M3 MSA",
            "fp8 KV cache for the MSA attention backend.",
            user="rocm-dev",
            number=DEP_B,
        )

    def _load_registry(self) -> None:
        """The registry: the old pin (not a commit of this sim's vLLM graph) and nightlies of main."""
        w = self.world
        w.add_image(IMAGE, keep_nightlies=14)
        w.push_tag(IMAGE, OLD_PIN)
        if self.key != SEED_KEY:
            w.push_tag(IMAGE, RELEASE_PIN)  # what main pins the story's key to
        for sha in self.vllm_main[:3]:
            w.push_tag(IMAGE, f"nightly-{sha}")
        w.push_tag(ATOM_IMAGE, "MiniMax-M3-20260623")

    def _build_steps(self) -> list[Step]:
        w = self.world

        def advance(msg: str, tag: bool) -> dict[str, Any]:
            sha = w.commit_files(
                VLLM_REPO,
                "main",
                {f"vllm/changes/{len(self.vllm_main):03d}.txt": msg + "\n"},
                msg,
                author="vllm-maintainer",
            )
            self.vllm_main.append(sha)
            if tag:
                w.push_tag(IMAGE, f"nightly-{sha}")
            return {"commit": sha, "tag": f"nightly-{sha}" if tag else None}

        def nightly_of_previous() -> dict[str, Any]:
            sha = self.vllm_main[3]
            w.push_tag(IMAGE, f"nightly-{sha}")
            out = advance("[Bugfix] Fix ROCm graph capture", tag=False)
            out["tag"] = f"nightly-{sha}"
            return out

        def merge(n: int) -> dict[str, Any]:
            sha = w.merge_pull(VLLM_REPO, n, merger="vllm-maintainer")
            self.facts[f"merge_{n}"] = sha
            self.vllm_main.append(sha)
            return {"merged": n, "merge_commit_sha": sha}

        def close(n: int) -> dict[str, Any]:
            w.close_pull(VLLM_REPO, n, user="vllm-maintainer")
            return {"closed": n, "merged": False}

        def drop() -> dict[str, Any]:
            c = w.add_comment(BENCH_REPO, 2104, "bob-maintainer", f"/depends-on drop {VLLM_REPO}#{DEP_B}")
            return {"comment_id": c.id, "by": "bob-maintainer"}

        steps = [
            Step(
                "nightly-before-merge",
                "a nightly of a main commit from before #47269 merges",
                nightly_of_previous,
            ),
            Step("merge-47269", "vllm-project/vllm#47269 merges", lambda: merge(DEP_A)),
            Step(
                "nightly-after-47269",
                "main moves on; its nightly contains #47269",
                lambda: advance("[Perf] Tune fused MoE configs for gfx950", tag=True),
            ),
        ]
        if self.variant == "seed":
            steps += [
                Step(
                    "close-47270", "vllm-project/vllm#47270 is closed without merging", lambda: close(DEP_B)
                ),
                Step("drop-47270", "a maintainer comments /depends-on drop vllm-project/vllm#47270", drop),
                Step(
                    "nightly-contains-rest",
                    "a newer nightly containing #47269",
                    lambda: advance("[Kernel] MXFP4 GEMM tuning", tag=True),
                ),
            ]
        else:
            steps += [
                Step("merge-47270", "vllm-project/vllm#47270 merges", lambda: merge(DEP_B)),
                Step(
                    "nightly-contains-both",
                    "a nightly containing both merge commits",
                    lambda: advance("[Kernel] MXFP4 GEMM tuning", tag=True),
                ),
            ]
        return steps

    # -- playing -----------------------------------------------------------------------------------------
    def step(self) -> dict[str, Any]:
        with self.world.lock:
            if not self.loaded:
                raise SimError(409, "load the scenario before stepping it")
            return play_next_step(self)

    def play(self) -> list[dict[str, Any]]:
        out = []
        while self.position < len(self.steps):
            out.append(self.step())
        return out

    def status(self) -> dict[str, Any]:
        return {
            "name": "seed",
            "variant": self.variant,
            "loaded": self.loaded,
            "position": self.position,
            "steps": [
                {"name": s.name, "description": s.description, "done": i < self.position}
                for i, s in enumerate(self.steps)
            ],
            "history": self.history,
            "facts": self.facts,
        }


def load(world: World, name: str, variant: str | None = None) -> dict[str, Any]:
    if name != "seed":
        raise SimError(404, f"unknown scenario {name!r}: the sim ships 'seed' (variants: seed, both-merge)")
    return SeedScenario(world, variant or "seed").load()


def driver(world: World) -> SeedScenario:
    sc = getattr(world, "scenario", None)
    if sc is None:
        raise SimError(409, "no scenario loaded: POST /_admin/scenario/seed/load first")
    assert isinstance(sc, SeedScenario)
    return sc
