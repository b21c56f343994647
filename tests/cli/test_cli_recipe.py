"""`sweepbot recipe plan|bump|changelog` through typer's CliRunner on every real config key."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from unittest import mock

import pytest
import typer
import typer.testing
import yaml
from typer.testing import CliRunner

from app.cli.recipe import recipe_app
from app.core.recipes import parse_master
from tests.recipe_helpers import (
    BUMPED_IMAGE,
    MASTER_FILES,
    SEED_KEY,
    event_values,
    fixture_path,
    fixture_text,
    is_single_node_fixed,
    reference_plan,
)

app = typer.Typer()
app.add_typer(recipe_app, name="recipe")
runner = CliRunner()
# typer's CliRunner rebuilds the command on every invoke (~10 ms); the per-key loops run
# hundreds of invocations, so build it once and hand that to the runner (patched per call only).
_COMMAND = typer.main.get_command(app)
NEW_IMAGE = "vllm/vllm-openai-rocm:nightly-0123456789abcdef0123456789abcdef01234567"


def _run(*args: str) -> tuple[int, str, str]:
    with mock.patch.object(typer.testing, "_get_command", lambda _app: _COMMAND):
        result = runner.invoke(app, ["recipe", *args])
    # The bytes: Result.stdout folds CRLF into LF, which would hide a byte-exactness bug.
    return result.exit_code, result.stdout_bytes.decode("utf-8"), result.stderr_bytes.decode("utf-8")


def _entry_lines(lines: list[str], key: str) -> range:
    """Lines of a top-level entry: its key line up to the next column-0 key (found by regex)."""
    start = next(i for i, line in enumerate(lines) if re.match(rf"{re.escape(key)}:(\s|$)", line))
    stop = next((i for i in range(start + 1, len(lines)) if re.match(r"[^\s#]", lines[i])), len(lines))
    return range(start, stop)


def _expected_bump(text: str, key: str, old_image: str, new_image: str) -> str:
    """The file with only the key's `image:` line edited, found without app.core.recipes."""
    lines = text.splitlines(keepends=True)
    for i in _entry_lines(lines, key):
        if re.match(r"\s+image:\s", lines[i]):
            assert lines[i].count(old_image) == 1
            lines[i] = lines[i].replace(old_image, new_image)
            return "".join(lines)
    raise AssertionError(f"no image line for {key}")


def _entry_data(text: str, key: str) -> object:
    lines = text.splitlines(keepends=True)
    chunk = "".join(lines[i] for i in _entry_lines(lines, key))
    return yaml.load(chunk, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))[key]


@pytest.mark.parametrize("name", MASTER_FILES)
def test_bump_every_key_changes_exactly_that_line_and_value(name: str) -> None:
    path = str(fixture_path(name))
    text = fixture_text(name)
    master = parse_master(text)
    before = event_values(text)
    for key, entry in master.items():
        code, out, err = _run("bump", path, key, NEW_IMAGE)
        assert code == 0, (key, err)
        # Byte for byte: the old file with the image replaced on that one line, nothing else.
        assert out == _expected_bump(text, key, entry["image"], NEW_IMAGE), key
        # Re-parsed, the entry differs only in its image, and the whole event stream only there.
        assert _entry_data(out, key) == {**entry, "image": NEW_IMAGE}, key
        after = event_values(out)
        changed = [(x, y) for x, y in zip(before, after, strict=True) if x != y]
        assert len(after) == len(before), key
        assert changed == [(("ScalarEvent", entry["image"]), ("ScalarEvent", NEW_IMAGE))], key
    assert len(master) >= (16 if name.startswith("amd-") else 1)


def test_bump_seed_key_reproduces_the_real_commit_and_in_place_rewrites(tmp_path: Path) -> None:
    target = tmp_path / "amd-master.yaml"
    shutil.copy(fixture_path("amd-master.f8f9b66.yaml"), target)
    code, out, err = _run("bump", str(target), SEED_KEY, BUMPED_IMAGE, "--in-place")
    assert (code, out, err) == (0, "", "")
    new = target.read_text()
    assert parse_master(new)[SEED_KEY]["image"] == BUMPED_IMAGE
    real = fixture_text("amd-master.b4cec7f.yaml")
    assert f"  image: {BUMPED_IMAGE}\n" in new and f"  image: {BUMPED_IMAGE}\n" in real


def test_bump_output_is_byte_exact_for_crlf_and_no_final_newline(tmp_path: Path) -> None:
    target = tmp_path / "m.yaml"
    target.write_bytes(b"k:\r\n  image: a/b:1 # pin\r\n  model: m")
    code, out, _ = _run("bump", str(target), "k", "a/b:2")
    assert code == 0 and out == "k:\r\n  image: a/b:2 # pin\r\n  model: m"


@pytest.mark.parametrize(
    ("content", "key", "message"),
    [
        ("k:\n  image: a/b:1\n", "nope", "not in this master config"),
        ("k:\n  model: m\n", "k", "no `image:`"),
        ("k: [\n", "k", "not valid YAML"),
        (None, "k", "cannot read"),
    ],
)
def test_bump_errors_exit_2_with_one_line(
    tmp_path: Path, content: str | None, key: str, message: str
) -> None:
    target = tmp_path / "m.yaml"
    if content is not None:
        target.write_text(content)
    code, out, err = _run("bump", str(target), key, "a/b:2")
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize("name", MASTER_FILES)
def test_plan_json_every_key_agrees_with_the_reference(name: str) -> None:
    path = fixture_path(name)
    master = parse_master(fixture_text(name))
    planned = 0
    for key, entry in master.items():
        code, out, err = _run("plan", str(path), key, "--json")
        if is_single_node_fixed(entry):
            assert code == 0, (key, err)
            assert json.loads(out) == reference_plan(key, entry), key
            planned += 1
        else:  # multi-node and agentic keys: tests/core/test_recipes_topology.py checks their rows
            assert code == 0 and json.loads(out), (key, err)
    assert planned >= (10 if name.startswith("amd-") else 0)


def test_plan_seed_key_filters_and_table() -> None:
    path = str(fixture_path("amd-master.b4cec7f.yaml"))
    code, out, _ = _run("plan", path, SEED_KEY, "--seq", "8k1k", "--json")
    points = json.loads(out)
    assert code == 0 and [p["conc"] for p in points] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert {p["tp"] for p in points} == {4}
    code, out, _ = _run("plan", path, SEED_KEY, "--conc", "32,64", "--tp", "4", "--json")
    assert code == 0 and [p["conc"] for p in json.loads(out)] == [32, 64]
    code, out, _ = _run("plan", path, SEED_KEY, "--conc", "32")
    assert code == 0
    name = "minimaxm3_8k1k_fp4_vllm_tp4-pp1-dcp1-pcp1-ep1-dpafalse_disagg-false_spec-none_conc32_mi355x"
    assert name in out
    assert BUMPED_IMAGE in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("nope-key",), "not in this master config"),
        ((SEED_KEY, "--conc", "a,b"), "--conc takes positive integers"),
        ((SEED_KEY, "--conc", "1000"), "conc 1000 not in its search space"),
        ((SEED_KEY, "--seq", "1k1k"), "no 1k1k scenario"),
        ((SEED_KEY, "--tp", "0"), "--tp must be a positive integer"),
    ],
)
def test_plan_errors_exit_2(args: tuple[str, ...], message: str) -> None:
    code, _, err = _run("plan", str(fixture_path("amd-master.b4cec7f.yaml")), *args)
    assert code == 2 and message in err and err.count("\n") == 1


def test_plan_on_a_non_mapping_file_exits_2(tmp_path: Path) -> None:
    target = tmp_path / "m.yaml"
    target.write_text("- a\n")
    code, _, err = _run("plan", str(target), "k")
    assert code == 2 and "not a mapping" in err


def test_changelog_appends_to_the_real_tail(tmp_path: Path) -> None:
    path = fixture_path("perf-changelog.tail.yaml")
    old = fixture_text("perf-changelog.tail.yaml")
    code, out, err = _run(
        "changelog",
        str(path),
        "--key",
        SEED_KEY,
        "--key",
        "minimaxm3-fp4-mi355x-vllm-mtp",
        "--description",
        f"Bump image to {BUMPED_IMAGE}",
        "--description",
        'Says "why"',
    )
    assert code == 0, err
    assert out.startswith(old) and out.endswith("  pr-link: XXX\n")
    entry = yaml.safe_load(out)[-1]
    assert entry == {
        "config-keys": [SEED_KEY, "minimaxm3-fp4-mi355x-vllm-mtp"],
        "description": [f"Bump image to {BUMPED_IMAGE}", 'Says "why"'],
        "pr-link": "XXX",
    }
    assert out[len(old) :].startswith("\n- config-keys:\n")

    target = tmp_path / "perf-changelog.yaml"
    shutil.copy(path, target)
    link = "https://github.com/SemiAnalysisAI/InferenceX/pull/2104"
    code, out, _ = _run(
        "changelog", str(target), "--key", SEED_KEY, "--description", "x", "--pr-link", link, "--in-place"
    )
    assert code == 0 and out == ""
    assert yaml.safe_load(target.read_text())[-1]["pr-link"] == link
    assert target.read_text().startswith(old)


def test_changelog_errors_exit_2(tmp_path: Path) -> None:
    target = tmp_path / "perf-changelog.yaml"
    target.write_text("a: 1\n")
    code, _, err = _run("changelog", str(target), "--key", "k", "--description", "d")
    assert code == 2 and "not a YAML list" in err
    target.write_text("")
    code, _, err = _run("changelog", str(target), "--key", "k", "--description", "d", "--pr-link", "nope")
    assert code == 2 and "not a PR link" in err
