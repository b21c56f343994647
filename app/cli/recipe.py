"""`sweepbot recipe ...`: plan a sweep, bump an image pin, append a perf-changelog entry.

Thin wrappers over app.core.recipes: read the file as bytes (so CRLF, a BOM or a missing final
newline survive), call the pure function, write bytes. Every failure is exit status 2 with one
line on stderr saying what was wrong.
"""

# No `from __future__ import annotations`: typer would re-evaluate string annotations on every
# invocation (measurable when tests run the command for each of 231 real config keys).
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from app.core.recipes import (
    EntryFlags,
    RecipeError,
    append_changelog,
    parse_master,
    seq_name,
    set_image,
)
from app.core.recipes.evals import eval_mode_from_flags, plan_all_keys, plan_with_evals
from app.core.recipes.runners import hardware_table
from app.core.recipes.topology import point_summary
from app.core.unexpanded_workflow import unexpanded_callers
from app.core.workflows import WorkflowFileError, dispatch_problems, dispatch_title, parse_workflow

if TYPE_CHECKING:
    from app.flows.scheduler.dispatch_plan import PlannedDispatch
# rich (Console, Table) is imported where a table is printed: `--json` and bump never load it.

recipe_app = typer.Typer(
    help="Benchmark-repo files: plan a config key's sweep, bump its image pin, append to the perf-changelog.",
    no_args_is_help=True,
)

EXIT_BAD_INPUT = 2


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    raise typer.Exit(EXIT_BAD_INPUT)


def _read(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        _fail(f"cannot read {path}: {exc.strerror or exc}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        _fail(f"{path} is not UTF-8 text (byte {exc.start}); save it as UTF-8")


def _write_stdout(text: str) -> None:
    # Bytes, not click.echo: the output must be the file byte for byte (no newline added).
    stream = sys.stdout
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        stream.flush()
        buffer.write(text.encode("utf-8"))
        buffer.flush()
    else:
        stream.write(text)
        stream.flush()


def _write_in_place(path: Path, text: str) -> None:
    """Atomic replace in the same directory, keeping the file's permission bits."""
    directory = path.resolve().parent
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
        os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        _fail(f"cannot write {path}: {exc.strerror or exc}")


def _parse_conc(value: str | None) -> list[int] | None:
    if value is None:
        return None
    out: list[int] = []
    for part in value.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) <= 0:
            _fail(f"--conc takes positive integers separated by commas (e.g. 32,64), got '{value}'")
        out.append(int(part))
    return out


RUNNERS_YAML = "runners.yaml"


def _runners_hardware(file: Path, runners: Path | None) -> dict | None:
    """runners.yaml's `hardware:` (the DRAM-offload budget): ``--runners``, else a runners.yaml
    beside FILE or one level up (the repo keeps it in configs/ with the master files)."""
    candidates = (
        [runners] if runners is not None else [file.parent / RUNNERS_YAML, file.parent.parent / RUNNERS_YAML]
    )
    for path in candidates:
        if path is not None and path.is_file():
            try:
                hardware = hardware_table(_read(path), str(path))
            except RecipeError as exc:
                _fail(str(exc))
            if runners is not None and hardware is None:
                _fail(
                    f"{path} has no `hardware:` mapping "
                    "(runner label -> available-cpu-dram-mib, gpus-per-node)"
                )
            return hardware
    if runners is not None:
        _fail(f"cannot read {runners}: no such file")
    return None


@recipe_app.command("plan")
def plan(
    file: Annotated[Path, typer.Argument(help="Master config, e.g. configs/amd-master.yaml.")],
    key: Annotated[
        str | None, typer.Argument(help="Config key, e.g. minimaxm3-fp4-mi355x-vllm (or --all-keys).")
    ] = None,
    all_keys: Annotated[
        bool, typer.Option("--all-keys", help="Every key of FILE: one JSON object, key -> its rows.")
    ] = False,
    seq: Annotated[str | None, typer.Option(help="Only this seq-len: 1k1k, 8k1k or <isl>_<osl>.")] = None,
    conc: Annotated[str | None, typer.Option(help="Only these concurrencies, e.g. 32,64.")] = None,
    tp: Annotated[int | None, typer.Option(help="Only this tensor-parallel size.")] = None,
    runners: Annotated[
        Path | None,
        typer.Option(help="runners.yaml for the DRAM-offload budget (default: beside FILE or one level up)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON array, one object per point.")
    ] = False,
    no_evals: Annotated[bool, typer.Option("--no-evals", help="Throughput only, no eval points.")] = False,
    evals_only: Annotated[
        bool, typer.Option("--evals-only", help="Only the selected eval points, without throughput.")
    ] = False,
    all_evals: Annotated[
        bool, typer.Option("--all-evals", help="Every point as an eval only (implies --evals-only).")
    ] = False,
) -> None:
    """List the benchmark points the repo's generator (`test-config`) makes for KEY, or for every
    key with --all-keys (single-node, multi-node, agentic).

    Each point says whether it also runs the accuracy eval (`run-eval`) and whether it runs only
    the eval (`eval-only`), as the repo's eval selection and eval modes decide. With --all-keys
    the rows carry exactly the generator's fields; a key the bot cannot plan is `{"error": ...}`.
    """
    if (key is None) == (not all_keys):
        _fail("give a config KEY or --all-keys (not both)")
    if all_keys and (seq or conc or tp is not None):
        _fail("--all-keys plans every key whole; drop --seq, --conc and --tp (or name one KEY)")
    if tp is not None and tp <= 0:
        _fail(f"--tp must be a positive integer, got {tp}")
    conc_filter = _parse_conc(conc)
    text = _read(file)
    hardware = _runners_hardware(file, runners)
    try:
        mode = eval_mode_from_flags(no_evals=no_evals, evals_only=evals_only, all_evals=all_evals)
        master = parse_master(text)
        if all_keys:
            _print_all_keys(plan_all_keys(master, mode, hardware), as_json)
            return
        assert key is not None
        points = plan_with_evals(master, key, seq=seq, conc=conc_filter, tp=tp, mode=mode, hardware=hardware)
    except RecipeError as exc:
        _fail(str(exc))
    if as_json:
        _write_stdout(json.dumps(points, indent=2) + "\n")
        return
    _print_points(key, points, mode.value)


def _print_all_keys(plans: dict, as_json: bool) -> None:
    if as_json:
        _write_stdout(json.dumps(plans, indent=1) + "\n")
        return
    from rich.console import Console  # lazy: only a table printed needs rich (start-up)
    from rich.table import Table  # lazy: only a table printed needs rich (start-up)

    table = Table(title=f"{len(plans)} config keys", title_justify="left")
    for column in ("key", "rows", "evals", "error"):
        table.add_column(column, justify="right" if column in ("rows", "evals") else "left")
    for name, rows in plans.items():
        if isinstance(rows, dict):
            table.add_row(name, "", "", str(rows["error"]))
        else:
            table.add_row(name, str(len(rows)), str(sum(1 for r in rows if r.get("run-eval"))), "")
    Console(width=230).print(table)


def _print_points(key: str, points: list, mode: str) -> None:
    from rich.console import Console  # lazy: only a table printed needs rich (start-up)
    from rich.table import Table  # lazy: only a table printed needs rich (start-up)

    evals = sum(1 for p in points if p.get("run-eval"))
    table = Table(
        title=f"{key}: {len(points)} points, {evals} with evals ({mode} eval mode)",
        title_justify="left",
    )
    for column in ("seq", "tp", "ep", "dp-attn", "spec", "pp/dcp/pcp", "conc", "eval", "result-name"):
        table.add_column(column, justify="right" if column in ("tp", "ep", "conc") else "left")
    for p in points:
        if "isl" in p and "prefill" not in p:
            row = [
                seq_name(p["isl"], p["osl"]),
                str(p["tp"]),
                str(p["ep"]),
                str(p["dp-attn"]).lower(),
                p["spec-decoding"],
                f"{p['pp']}/{p['dcp-size']}/{p['pcp-size']}",
                str(p["conc"]),
            ]
        else:  # multi-node rows and agentic points
            s = point_summary(p)
            seq = seq_name(p["isl"], p["osl"]) if "isl" in p else s["seq"]
            row = [seq, s["topology"], "", "", s["spec"], "", s["conc"]]
        eval_mark = ("eval only" if p.get("eval-only") else "eval") if p.get("run-eval") else ""
        table.add_row(*row, eval_mark, p["result-name"])
    console = Console(width=230)
    console.print(f"image: {points[0]['image']}" if points else "no points")
    console.print(table)


def _repo_root(path: Path) -> Path | None:
    """The checkout holding ``path``: the nearest parent with a .github/workflows directory."""
    for parent in [path.resolve().parent, *path.resolve().parents]:
        if (parent / ".github" / "workflows").is_dir():
            return parent
    return None


@recipe_app.command("dispatch")
def dispatch(
    file: Annotated[
        Path, typer.Argument(help="Master config; a relative path is the path inside the repository.")
    ],
    key: Annotated[str, typer.Argument(help="Config key, e.g. minimaxm3-fp4-mi355x-vllm.")],
    seq: Annotated[str | None, typer.Option(help="Only this seq-len: 1k1k, 8k1k or <isl>_<osl>.")] = None,
    conc: Annotated[str | None, typer.Option(help="Only these concurrencies, e.g. 32,64.")] = None,
    head_ref: Annotated[str, typer.Option(help="The PR's head branch (the dispatch ref).")] = "main",
    head_sha: Annotated[str | None, typer.Option(help="The PR's head sha (the `ref` input).")] = None,
    workflow_file: Annotated[
        Path | None,
        typer.Option(
            help="Workflow to check the inputs against; default: the checkout's .github/workflows/<workflow>."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON array, one object per dispatch.")
    ] = False,
) -> None:
    """The workflow, ref and inputs of every dispatch the bot would make for a sweep of KEY."""
    from app.core.sweepspec import DispatchTemplates, SweepError  # lazy: when the command runs (start-up)
    from app.flows.scheduler.dispatch_plan import PLACEHOLDER_SHA, plan_dispatches  # lazy: start-up

    conc_filter = _parse_conc(conc)
    text = _read(file)
    root = _repo_root(file)
    config_file = _path_in_repo(file, root)
    try:
        # the SWEEPBOT_DISPATCH_* templates alone, not the settings (pydantic-settings: bench/cli.py)
        settings = DispatchTemplates.from_environ(os.environ)
        wf_path = workflow_file or _checkout_workflow(root, settings.dispatch_workflow)
        planned = plan_dispatches(
            settings,
            parse_master(text),
            key,
            config_file,
            seq=seq,
            conc=conc_filter,
            head_ref=head_ref,
            head_sha=head_sha or PLACEHOLDER_SHA,
            # slots leave out the matrix jobs the workflow never expands (app.core.unexpanded_workflow)
            unexpanded=unexpanded_callers(_read(wf_path)) if wf_path is not None else frozenset(),
        )
    except (RecipeError, SweepError) as exc:
        _fail(str(exc))
    if not planned:
        _fail(f"{key}: the plan has no points")
    checked = _check_against_workflow(planned, wf_path)
    if head_sha is None:
        _show_placeholder(planned, PLACEHOLDER_SHA)
    if as_json:
        _write_stdout(json.dumps([p.to_json() for p in planned], indent=2) + "\n")
        return
    _print_dispatches(key, planned, checked)


def _path_in_repo(file: Path, root: Path | None) -> str:
    """The `--config-files` value: a relative FILE already is one; an absolute one is made relative
    to its checkout."""
    if not file.is_absolute():
        return file.as_posix()
    if root is None:
        _fail(f"{file} is not inside a checkout with .github/workflows/; pass the path in the repository")
    return file.resolve().relative_to(root).as_posix()


def _checkout_workflow(root: Path | None, workflow: str) -> Path | None:
    """The checkout's own copy of the dispatched workflow, when there is one (and its name is not
    a template)."""
    if root is None or "{" in workflow:
        return None
    candidate = root / ".github" / "workflows" / workflow
    return candidate if candidate.is_file() else None


def _check_against_workflow(planned: "list[PlannedDispatch]", wf_path: Path | None) -> str:
    """Fail on a dispatch the workflow would refuse; give each its run title. Says what was checked."""
    if wf_path is None:
        return "not checked (no workflow file found; pass --workflow-file)"
    try:
        spec = parse_workflow(_read(wf_path), str(wf_path))
    except WorkflowFileError as exc:
        _fail(str(exc))
    for item in planned:
        problems = dispatch_problems(spec, item.inputs)
        if problems:
            _fail(f"{item.workflow} would refuse the dispatch {item.run_name}: " + "; ".join(problems))
        item.title = dispatch_title(spec, item.inputs)
    return f"checked against {wf_path}"


def _show_placeholder(planned: "list[PlannedDispatch]", placeholder: str) -> None:
    """Without --head-sha the plan used a placeholder sha: show it as `<head-sha>`."""
    for item in planned:
        item.inputs = {k: v.replace(placeholder, "<head-sha>") for k, v in item.inputs.items()}
        item.title = item.title.replace(placeholder, "<head-sha>") if item.title else None


def _print_dispatches(key: str, planned: "list[PlannedDispatch]", checked: str) -> None:
    from rich.console import Console  # lazy: only the text output needs rich (start-up)

    console = Console(width=220)
    total = sum(len(p.points) for p in planned)
    console.print(f"{key}: {total} point(s) in {len(planned)} dispatch(es); inputs {checked}")
    for item in planned:
        console.print(
            f"\n[bold]{item.run_name}[/bold]  {item.workflow} @ {item.ref}  "
            f"({len(item.points)} point(s), {item.slots} runner slot(s))",
            highlight=False,
        )
        for name, value in item.inputs.items():
            console.print(f"  {name}: {value}", highlight=False, markup=False)
        if item.title:
            console.print(f"  run title: {item.title}", highlight=False, markup=False)


@recipe_app.command("bump")
def bump(
    file: Annotated[Path, typer.Argument(help="Master config holding KEY.")],
    key: Annotated[str, typer.Argument(help="Config key whose image pin changes.")],
    image: Annotated[str, typer.Argument(help="New image, e.g. vllm/vllm-openai-rocm:nightly-<sha>.")],
    in_place: Annotated[
        bool, typer.Option("--in-place", help="Rewrite FILE instead of printing it.")
    ] = False,
) -> None:
    """Change KEY's `image:` value; exactly one line of FILE changes."""
    text = _read(file)
    try:
        new_text = set_image(text, key, image)
    except RecipeError as exc:
        _fail(str(exc))
    if in_place:
        if new_text != text:
            _write_in_place(file, new_text)
        return
    _write_stdout(new_text)


@recipe_app.command("changelog")
def changelog(
    file: Annotated[Path, typer.Argument(help="perf-changelog.yaml.")],
    key: Annotated[list[str], typer.Option("--key", help="Config key the entry is about (repeatable).")],
    description: Annotated[
        list[str], typer.Option("--description", help="One description line (repeatable).")
    ],
    pr_link: Annotated[
        str | None,
        typer.Option("--pr-link", help="PR URL, or XXX while the PR has no number (the default)."),
    ] = None,
    scenario_type: Annotated[
        list[str] | None,
        typer.Option(
            "--scenario-type", help="Restrict the sweep to fixed-seq-len or agentic-coding (repeatable)."
        ),
    ] = None,
    evals_only: Annotated[bool, typer.Option("--evals-only", help="Run only the eval jobs.")] = False,
    all_evals: Annotated[
        bool, typer.Option("--all-evals", help="Run evals for every fixed-seq-len config.")
    ] = False,
    no_evals: Annotated[bool, typer.Option("--no-evals", help="Run no eval jobs.")] = False,
    append_only: Annotated[
        bool,
        typer.Option("--append-only", help="Run only points added since the last curve, then append them."),
    ] = False,
    eval_min_prefill_ep: Annotated[
        int | None,
        typer.Option("--eval-min-prefill-ep", help="Drop multi-node eval rows whose prefill ep is lower."),
    ] = None,
    in_place: Annotated[
        bool, typer.Option("--in-place", help="Rewrite FILE instead of printing it.")
    ] = False,
) -> None:
    """Append a perf-changelog entry at the end of FILE in the repo's format (every field its gate knows)."""
    text = _read(file)
    flags = EntryFlags(
        scenario_type=tuple(scenario_type or ()),
        evals_only=evals_only,
        all_evals=all_evals,
        no_evals=no_evals,
        append_only=append_only,
        eval_min_prefill_ep=eval_min_prefill_ep,
    )
    try:
        new_text = append_changelog(
            text, config_keys=key, description=description, pr_link=pr_link, flags=flags
        )
    except RecipeError as exc:
        _fail(str(exc))
    if in_place:
        _write_in_place(file, new_text)
        return
    _write_stdout(new_text)
