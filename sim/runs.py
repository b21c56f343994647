"""What a simulated `e2e-tests.yml` run executes: parse its CLI input, expand the points.

The benchmark repo's workflow turns `generate-cli-command` into a job matrix by reading the master
config at the dispatched ref; the sim does the same with the bot's own pure expansion
(`app.recipes.expand_points`), so both sides agree on what a point is.
"""

from __future__ import annotations

import dataclasses
import shlex
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sim.world import Run, World

MASTER_DIRS = (".github/configs", "configs")
_LIST_FLAGS = {"--config-keys": "keys", "--seq-lens": "seqs", "--conc": "conc"}
_SCALAR_FLAGS = {"--tp": "tp", "--config-files": "files", "--runner-type": "runner"}
# The generator's eval modes (InferenceX .github/workflows/README.md, `test-config` usage).
_BOOL_FLAGS = {"--no-evals": "no_evals", "--evals-only": "evals_only", "--all-evals": "all_evals"}


class CommandError(ValueError):
    """The workflow's `generate-cli-command` input cannot be understood."""


def parse_cli_command(command: str) -> dict[str, Any]:
    """Parse `test-config --config-keys K --seq-lens 8k1k --conc 32 64` into its parts."""
    try:
        tokens = shlex.split(command)
    except ValueError as exc:
        raise CommandError(f"generate-cli-command is not shell-quoted correctly: {exc}") from exc
    if not tokens or tokens[0] != "test-config":
        raise CommandError("generate-cli-command must start with 'test-config'")
    out: dict[str, Any] = {"keys": [], "seqs": [], "conc": [], "tp": None}
    out.update(dict.fromkeys(_BOOL_FLAGS.values(), False))
    current: str | None = None
    for tok in tokens[1:]:
        if tok in _BOOL_FLAGS:
            out[_BOOL_FLAGS[tok]] = True
            current = None
            continue
        if tok.startswith("--"):
            if tok not in _LIST_FLAGS and tok not in _SCALAR_FLAGS:
                raise CommandError(f"unknown option {tok!r} in generate-cli-command")
            current = tok
            continue
        if current is None:
            raise CommandError(f"unexpected argument {tok!r} before any option")
        if current in _LIST_FLAGS:
            out[_LIST_FLAGS[current]].append(tok)
        else:
            out[_SCALAR_FLAGS[current]] = tok
    if not out["keys"]:
        raise CommandError("generate-cli-command needs --config-keys")
    try:
        out["conc"] = [int(c) for c in out["conc"]]
        out["tp"] = int(out["tp"]) if out["tp"] is not None else None
    except ValueError as exc:
        raise CommandError(f"--conc and --tp take integers: {exc}") from exc
    return out


def _flag(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value).lower()


def result_filename(point: dict[str, Any], node: str, recipe_fingerprint: str = "") -> str:
    """`RESULT_FILENAME` as benchmark-tmpl.yml's "Launch job script" step exports it on `node`."""
    if "tp" not in point or isinstance(point.get("conc"), list):
        from app.artifacts import result_stem  # multi-node / agentic rows: the bot's own naming

        base = f"{result_stem(point)}_{node}"
        return f"{base}_recipe-{recipe_fingerprint[:16]}" if recipe_fingerprint else base
    base = (
        f"{point['exp-name']}_{point['precision']}_{point['framework']}_tp{point['tp']}"
        f"-pp{point.get('pp', 1)}-dcp{point.get('dcp-size', 1)}-pcp{point.get('pcp-size', 1)}"
        f"-ep{point.get('ep', 1)}-dpa{_flag(point.get('dp-attn', False))}"
        f"_disagg-{_flag(point.get('disagg', False))}_spec-{point.get('spec-decoding', 'none')}"
        f"_conc{point['conc']}_{node}"
    )
    return f"{base}_recipe-{recipe_fingerprint[:16]}" if recipe_fingerprint else base


def find_master_files(world: World, full_name: str, sha: str) -> list[str]:
    repo = world.repo(full_name)
    files = repo.objects.flatten(repo.objects.commits[sha].tree)
    return sorted(
        p
        for p in files
        if any(p.startswith(d + "/") and "/" not in p[len(d) + 1 :] for d in MASTER_DIRS)
        and p.endswith("master.yaml")
    )


def point_dict(point: Any) -> dict[str, Any]:
    if hasattr(point, "to_json"):
        raw = point.to_json()
    elif isinstance(point, dict):
        raw = dict(point)
    elif dataclasses.is_dataclass(point) and not isinstance(point, type):
        raw = dataclasses.asdict(point)
    elif hasattr(point, "model_dump"):
        raw = point.model_dump()
    else:
        raw = {
            k: getattr(point, k)
            for k in dir(point)
            if not k.startswith("_") and not callable(getattr(point, k))
        }
    # normalise to the dashed names of `sweepbot recipe plan --json`
    return {k.replace("_", "-"): v for k, v in raw.items()}


def plan_points(world: World, run: Run) -> list[dict[str, Any]]:
    from app.recipes import expand_points, parse_master

    cmd = run.inputs.get("generate-cli-command")
    if not cmd:
        raise CommandError("the run has no generate-cli-command input")
    parsed = parse_cli_command(str(cmd))
    masters = find_master_files(world, run.repo, run.head_sha)
    points: list[dict[str, Any]] = []
    for key in parsed["keys"]:
        source = None
        for path in masters:
            text = world.read_file(run.repo, path, run.head_sha)
            master = parse_master((text or b"").decode())
            if key in master:
                source = master
                break
        if source is None:
            raise CommandError(f"config key {key!r} not found in {', '.join(masters) or 'any master config'}")
        seqs = parsed["seqs"] or [None]
        for seq in seqs:
            for p in expand_points(source, key, seq=seq, conc=parsed["conc"] or None, tp=parsed["tp"]):
                d = point_dict(p)
                d.setdefault("config-key", key)
                points.append(d)
    return points
