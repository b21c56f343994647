"""How `sweepbot demo` tells the story: the lines a person cares about (no git plumbing, no echo of
the bot's own writes), times that never go backwards, full lines in a file, and the end in plain
text (checks, gap and accuracy tables, links) with the JSON summary on the last line alone."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from app.settings import reset_settings_cache
from devstack import demo
from devstack.story import StoryReport, accuracy_table, report_table
from devstack.storytext import audit_event, delivery_event, ending, plain_table
from devstack.storytimeline import Timeline

BOT = "sweepbot-sim[bot]"
GAP_MD = [
    "| conc | vLLM | ATOM ref | gap | verdict |",
    "| ---: | ---: | ---: | ---: | --- |",
    "| 4 | **101.0** | 100.0 | +1.00% | matched |",
    "| 64 | 1200.5 | [1100.0](http://x/ref) | +9.14% | `behind` |",
]
ACC_MD = [
    "| task | filter | conc | vLLM (± stderr, n) | ATOM ref | diff | verdict |",
    "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    "| gsm8k | strict-match | 64 | 0.9500 ± 0.0060 (n=1319) | 0.9600 | -1.00 pp | within noise |",
]
LINKS = {"PR": "http://sim/o/r/pull/12", "report": "http://sim/o/r/pull/12#issuecomment-7"}


def test_git_plumbing_canary_branches_and_reactions_are_not_told() -> None:
    for action, target in [
        ("github.git/create-blob", "o/r"),
        ("github.git/create-tree", "o/r"),
        ("github.git/create-commit", "o/r"),
        ("github.git/create-ref", "o/r:heads/sweepbot/canary/nightly-1"),
        ("github.git/delete-ref", "o/r:heads/sweepbot/canary/nightly-1"),
        ("github.reactions/create-for-issue-comment", "o/r comment 3"),
        ("github.actions/add-custom-labels-to-self-hosted-runner-for-repo", "o/r runner 2"),
        ("sweep.create", "o/r#0"),
        ("sweep.dispatch", "o/r#0"),
    ]:
        assert audit_event(1.0, "sweepbot", action, target, "ok") is None, action
    bump = audit_event(2.0, "sweepbot", "github.git/update-ref", "o/r:heads/recipe", "ok", "alice")
    assert bump is not None and (bump.who, bump.what) == (
        "bot",
        "pushed a commit to o/r:heads/recipe (asked by @alice)",
    )
    sweep = audit_event(3.0, "sweepbot", "sweep.create", "o/r#12", "ok")
    assert sweep is not None and sweep.what == "sweep.create o/r#12"


def test_the_echo_of_the_bots_own_push_or_comment_is_not_told_twice() -> None:
    repo = {"repository": {"full_name": "o/r"}}
    assert (
        delivery_event(1.0, "push", None, {**repo, "ref": "refs/heads/x", "sender": {"login": BOT}}, BOT)
        is None
    )
    canary = {**repo, "ref": "refs/heads/sweepbot/canary/n1", "sender": {"login": "alice"}}
    assert delivery_event(1.0, "push", None, canary, BOT) is None
    mine = {**repo, "issue": {"number": 12}, "sender": {"login": BOT}}
    assert delivery_event(1.0, "issue_comment", "created", mine, BOT) is None
    theirs = delivery_event(1.0, "issue_comment", "created", {**mine, "sender": {"login": "bob"}}, BOT)
    assert theirs is not None and theirs.what == "@bob commented on #12"
    synced = {**repo, "pull_request": {"number": 12}, "sender": {"login": BOT}}
    assert delivery_event(1.0, "pull_request", "synchronize", synced, BOT) is None
    merged = {**repo, "pull_request": {"number": 47269, "merged": True}, "sender": {"login": "m"}}
    said = delivery_event(1.0, "pull_request", "closed", merged, BOT)
    assert said is not None and said.what == "PR #47269 merged"
    run = {**repo, "workflow_run": {"name": "Run Sweep", "conclusion": "success"}}
    said = delivery_event(1.0, "workflow_run", "completed", run, BOT)
    assert said is not None and said.what == "run of Run Sweep completed (success)"


class _FakeWorld:
    def __init__(self, deliveries: list[Any]) -> None:
        self.lock = threading.Lock()
        self.deliveries = deliveries


class _Rows:
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def scalars(self) -> _Rows:
        return self

    def all(self) -> list[Any]:
        return self.rows


class _FakeSession:
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def __enter__(self) -> _FakeSession:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, _query: Any) -> _Rows:
        seen, self.rows = self.rows, []
        return _Rows(seen)


def _factory(rows: list[Any]) -> Any:
    """A stand-in for the session factory: each session answers the rows once."""
    return lambda: _FakeSession(rows)


def _stamps(lines: list[str]) -> list[float]:
    return [float(line[1:7]) for line in lines]


def test_times_never_go_backwards_and_a_second_timeline_goes_on_with_the_first_ones_clock() -> None:
    t0 = 1_000_000.0
    # A webhook seen at +5.0 s, then an audit row the bot wrote at +3.0 s (read on the next pump).
    world = _FakeWorld(
        [
            SimpleNamespace(
                event="pull_request",
                action="closed",
                created_at=t0 + 5.0,
                payload={"repository": {"full_name": "o/r"}, "pull_request": {"number": 1, "merged": True}},
            )
        ]
    )
    row = SimpleNamespace(
        id=1,
        at=datetime.fromtimestamp(t0 + 3.0, UTC),
        actor="sweepbot",
        action="sweep.create",
        target="o/r#12",
        outcome="ok",
        caused_by=None,
    )
    lines: list[str] = []
    first = Timeline(world, _factory([]), lines.append, started=t0, bot_login=BOT)
    first.pump()
    second_rows = [row]
    first.factory = _factory(second_rows)
    first.pump()
    first.close()
    assert "PR #1 merged o/r" in lines[0] and "sweep.create o/r#12" in lines[1] and len(lines) == 2
    assert _stamps(lines) == [5.0, 5.0]  # the row written earlier is shown at the time already shown

    after = Timeline(world, _factory([]), lines.append, bot_login=BOT)
    after.follow(first)
    after.pump()  # nothing the first one showed is shown again
    after.event(audit_event(4.0, "sweepbot", "canary.queue", "n1", "ok"))  # type: ignore[arg-type]
    after.close()
    assert len(lines) == 3 and _stamps(lines)[-1] == 5.0 and "canary.queue" in lines[-1]


def test_markdown_tables_read_as_aligned_plain_text() -> None:
    body = "intro\n\n" + "\n".join(GAP_MD) + "\n\nGap = ...\n\n" + "\n".join(ACC_MD) + "\n"
    assert report_table(body) == GAP_MD and accuracy_table(body) == ACC_MD
    table = plain_table(GAP_MD)
    assert table[0].split() == ["conc", "vLLM", "ATOM", "ref", "gap", "verdict"]
    assert set(table[1]) == {"-", " "}
    assert table[3].split() == ["64", "1200.5", "1100.0", "+9.14%", "behind"]  # no link, no code marks
    assert "**" not in "".join(table) and "|" not in "".join(table)
    gap_column = table[0].index("gap")
    assert all(line[gap_column] in "+-g" for line in table)  # one column, one position


def test_the_ending_has_both_tables_and_the_links() -> None:
    out = ending({"report_table": GAP_MD, "accuracy_table": ACC_MD, "links": LINKS})
    text = "\n".join(out)
    assert "Gap against the reference:" in text and "Accuracy:" in text and "gsm8k" in text
    assert "  PR      http://sim/o/r/pull/12" in out
    assert "  report  http://sim/o/r/pull/12#issuecomment-7" in out
    assert "Accuracy: none" in ending({"report_table": GAP_MD})


def test_lines_are_cut_to_a_terminal_only() -> None:
    assert demo.line_width(Console(file=StringIO())) == 0
    assert demo.line_width(Console(file=StringIO(), force_terminal=True, width=50)) == 50


def _fake_demo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`demo` with the stack, the simulator and both stories replaced: only its output is tested."""
    monkeypatch.setenv("SWEEPBOT_DATA_DIR", str(tmp_path))
    sim = SimpleNamespace(world=object(), url="http://127.0.0.1:1", stop=lambda: None)
    monkeypatch.setattr(demo, "SimServer", lambda **_: SimpleNamespace(start=lambda: sim))
    monkeypatch.setattr(demo, "SeedScenario", lambda *_a, **_k: object())
    monkeypatch.setattr(demo, "check_ports", lambda _uses: None)

    @contextmanager
    def fake_stack(**_: Any) -> Iterator[Any]:
        yield SimpleNamespace(dashboard_url="http://127.0.0.1:2/", log_dir=tmp_path, operator_token="")

    monkeypatch.setattr(demo, "stack", fake_stack)
    report = StoryReport()
    report.add("one status comment", True, "1 status comment(s) on #12 " + "x" * 150)
    report.summary = {"report_table": GAP_MD, "accuracy_table": ACC_MD, "links": LINKS}

    def stories(console: Console, *_: Any) -> tuple[StoryReport, dict[str, float]]:
        console.print("[   1.0s] sim           step 1: " + "y" * 150, markup=False, soft_wrap=True)
        return report, {"bump_committed": 1.5}

    monkeypatch.setattr(demo, "_play_both_stories", stories)


def _stdout_lines(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: str) -> list[str]:
    """`sweepbot demo ARGS` on the faked stack, its stdout a pipe (not a terminal): the lines."""
    _fake_demo(monkeypatch, tmp_path)
    cli = typer.Typer()
    cli.command("demo")(demo.demo_command)
    cli.command("other")(lambda: None)
    try:
        result = CliRunner().invoke(cli, ["demo", *args])
    finally:
        reset_settings_cache()
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def test_piped_demo_prints_full_lines_the_tables_links_and_json_last(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    lines = _stdout_lines(monkeypatch, tmp_path, "--until-done")
    assert any(line.endswith("y" * 150) for line in lines)  # not cut to 80 columns in a pipe
    assert any(line.endswith("x" * 150) and line.startswith("ok ") for line in lines)
    assert "Accuracy:" in lines and "  PR      http://sim/o/r/pull/12" in lines
    summary = json.loads(lines[-1])
    assert summary["ok"] is True and summary["links"] == LINKS and summary["marks"] == {"bump_committed": 1.5}


def test_demo_json_prints_only_the_summary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    lines = _stdout_lines(monkeypatch, tmp_path, "--json")
    assert len(lines) == 1 and json.loads(lines[0])["checks"][0]["name"] == "one status comment"


def test_demo_key_plays_the_story_on_that_key_in_dispatch_mode(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`--key` seeds the world for that key (SeedScenario(key=...)); an unknown key, or another
    key in label mode (the sim plays no agentic run-sweep.yml job), is refused before anything
    starts."""
    _fake_demo(monkeypatch, tmp_path)
    seeded: list[str] = []

    def scenario(*_a: Any, **k: Any) -> object:
        seeded.append(k["key"])
        return object()

    monkeypatch.setattr(demo, "SeedScenario", scenario)
    cli = typer.Typer()
    cli.command("demo")(demo.demo_command)
    cli.command("other")(lambda: None)
    agentic = "kimik2.5-fp4-mi355x-vllm-agentic"
    try:
        ok = CliRunner().invoke(cli, ["demo", "--json", "--sweep-mode", "dispatch", "--key", agentic])
        label = CliRunner().invoke(cli, ["demo", "--json", "--key", agentic])
        unknown = CliRunner().invoke(cli, ["demo", "--json", "--sweep-mode", "dispatch", "--key", "nope"])
    finally:
        reset_settings_cache()
    assert ok.exit_code == 0, ok.output
    assert seeded == [agentic]
    assert label.exit_code == 2 and "--sweep-mode dispatch" in label.output
    assert unknown.exit_code == 2 and "unknown --key 'nope'" in unknown.output
