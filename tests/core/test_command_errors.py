"""The comment grammar as a PR author meets it (app.core.commands.parse_commands): for each line,
the command it is, its options, or the exact error reply (which must say what to write instead);
which lines are not commands at all; and the /help text's shape."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.commands import MAX_COMMANDS, help_text, is_bot, parse_commands

FIX = "write a list like conc=32,64 or a range like conc=4..256 (positive integers)"
SWEEP_USAGE = (
    "(usage: `/sweep [config=KEY] [conc=32,64 | 4..256] [seq=8k1k] [tp=4] [evals=default|none|only|all] "
    "[priority=low|normal|high]`)"
)
OPTS = "config=, conc=, seq=, tp=, evals=, priority="


def one(body: str) -> tuple[str, dict[str, Any], tuple[str, ...], str | None]:
    (cmd,) = parse_commands(body)
    return cmd.words, cmd.options, cmd.refs, cmd.error


def err(line: str) -> str | None:
    return one(line)[3]


@pytest.mark.parametrize(
    ("line", "options"),
    [
        ("/sweep conc=1..4096", {"conc": {"range": (1, 4096)}}),
        ("/sweep conc=7..7", {"conc": {"range": (7, 7)}}),
        ("/sweep conc=64,1,4096,64", {"conc": {"list": [1, 64, 4096]}}),
        ("/sweep tp=1", {"tp": 1}),
        ("/sweep tp=64 priority=low", {"tp": 64, "priority": "low"}),
        ("/sweep priority=normal", {"priority": "normal"}),
        (
            "/sweep priority=high config=dsr1-fp8-mi355x-vllm",
            {"priority": "high", "config": "dsr1-fp8-mi355x-vllm"},
        ),
        ("/sweep seq=8k1k", {"seq": "8k1k"}),
        ("/sweep evals=only", {"evals": "only"}),
    ],
)
def test_valid_options(line: str, options: dict[str, Any]) -> None:
    assert one(line) == ("/sweep", options, (), None)


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("/sweep conc=0..8", f"`conc=0..8`: the range must go up, from 1 to at most 4096: {FIX}"),
        ("/sweep conc=1..4097", f"`conc=1..4097`: the range must go up, from 1 to at most 4096: {FIX}"),
        ("/sweep conc=9..8", f"`conc=9..8`: the range must go up, from 1 to at most 4096: {FIX}"),
        ("/sweep conc=1..123456", f"`conc=1..123456`: values go up to 4096: {FIX}"),
        ("/sweep conc=123456..1", f"`conc=123456..1`: values go up to 4096: {FIX}"),
        ("/sweep conc=a..8", f"`conc=a..8` is not a range: {FIX}"),
        ("/sweep conc=8..b", f"`conc=8..b` is not a range: {FIX}"),
        ("/sweep conc=1..2..3", f"`conc=1..2..3` is not a range: {FIX}"),
        ("/sweep conc=0,8", f"`conc=0,8`: each value must be between 1 and 4096: {FIX}"),
        ("/sweep conc=8,4097", f"`conc=8,4097`: each value must be between 1 and 4096: {FIX}"),
        ("/sweep conc=8,123456", f"`conc=8,123456`: each value must be between 1 and 4096: {FIX}"),
        ("/sweep conc=8,x", f"`conc=8,x` is not a list of concurrencies: {FIX}"),
        ("/sweep conc=8,,16", f"`conc=8,,16` is not a list of concurrencies: {FIX}"),
        ("/sweep conc=²", f"`conc=²`: each value must be between 1 and 4096: {FIX}"),
        ("/sweep tp=0", "`tp=0` is not a tensor-parallel size; use an integer from 1 to 64, e.g. tp=4"),
        ("/sweep tp=65", "`tp=65` is not a tensor-parallel size; use an integer from 1 to 64, e.g. tp=4"),
        ("/sweep tp=008", "`tp=008` is not a tensor-parallel size; use an integer from 1 to 64, e.g. tp=4"),
        ("/sweep priority=urgent", "`priority=urgent` is not a priority; use priority=low, normal or high"),
        ("/sweep priority=LOW", "`priority=LOW` is not a priority; use priority=low, normal or high"),
        (
            "/sweep config=-bad",
            "`config=-bad` is not a config key; write it as in the master config, "
            "e.g. config=minimaxm3-fp4-mi355x-vllm",
        ),
        (
            "/sweep seq=long",
            "`seq=long` is not a sequence-length name; "
            "use one like `seq=8k1k`, `seq=1k1k`, `seq=<isl>_<osl>` or `seq=agentic`",
        ),
        (
            "/sweep fast",
            f"unexpected word `fast`: `/sweep` takes options as key=value ({OPTS}) "
            "or one of: approve, cancel, status",
        ),
        ("/sweep conq=8", f"unknown option `conq`. Did you mean 'conc'? Options: {OPTS}"),
        ("/sweep zzzz=8", f"unknown option `zzzz`. Options: {OPTS}"),
        ("/sweep a=b=c", f"unknown option `a`. Options: {OPTS}"),
        ("/sweep tp=4 tp=8", "option tp= is given twice; give it once"),
        ("/sweep tp=", "option tp= has no value; write tp=4"),
    ],
)
def test_sweep_option_errors(line: str, error: str) -> None:
    assert err(line) == f"{error} {SWEEP_USAGE}"


def test_evals_errors_say_every_mode() -> None:
    error = err("/sweep evals=some")
    assert error is not None and error.endswith(
        " (default: the repo's eval points beside throughput; none: throughput only; only: the eval points "
        f"without throughput; all: every point as an eval) {SWEEP_USAGE}"
    )


@pytest.mark.parametrize(
    ("line", "want"),
    [
        (
            "/depends-on vllm-project/vllm#1, https://github.com/a/b/pull/2; a/b#2",
            ("/depends-on", {}, ("vllm-project/vllm#1", "a/b#2"), None),
        ),
        (
            "/depends-on drop vllm-project/vllm#1",
            ("/depends-on drop", {}, ("vllm-project/vllm#1",), None),
        ),
        (
            "/depends-on ,a/b#1",
            (
                "/depends-on",
                {},
                (),
                "`,a/b#1` is not a pull request reference; write owner/repo#N or the PR URL, e.g. "
                "`/depends-on vllm-project/vllm#47269` (usage: `/depends-on <owner/repo>#<N> ...`)",
            ),
        ),
        (
            "/depends-on",
            (
                "/depends-on",
                {},
                (),
                "`/depends-on` needs at least one PR, e.g. `/depends-on vllm-project/vllm#47269` "
                "(usage: `/depends-on <owner/repo>#<N> ...`)",
            ),
        ),
        ("/sweep approve ABCDEF1", ("/sweep approve", {"sha": "abcdef1"}, (), None)),
        ("/sweep approve", ("/sweep approve", {}, (), None)),
        (
            "/sweep approve abcdef1 1234567",
            (
                "/sweep approve",
                {},
                (),
                "`/sweep approve` takes at most one commit SHA (7 to 40 hex digits), e.g. "
                "`/sweep approve 1a2b3c4d5e6f`; remove `abcdef1 1234567` (usage: `/sweep approve [<sha>]`)",
            ),
        ),
        (
            "/sweep approve xyz",
            (
                "/sweep approve",
                {},
                (),
                "`/sweep approve` takes at most one commit SHA (7 to 40 hex digits), e.g. "
                "`/sweep approve 1a2b3c4d5e6f`; remove `xyz` (usage: `/sweep approve [<sha>]`)",
            ),
        ),
        (
            "/sweep status now please",
            (
                "/sweep status",
                {},
                (),
                "`/sweep status` takes no arguments; remove `now please` (usage: `/sweep status`)",
            ),
        ),
        (
            "/Sweep",
            (
                "/Sweep",
                {},
                (),
                "unknown command `/Sweep`: did you mean `/sweep`? Reply `/help` for the list.",
            ),
        ),
    ],
)
def test_refs_shas_and_words(line: str, want: tuple[Any, ...]) -> None:
    assert one(line) == want


@pytest.mark.parametrize(
    "body",
    [
        "/usr/bin/env python",  # a path
        "see /sweep",  # mid-sentence
        "    /sweep",  # indented code block
        "\t/sweep",
        "> /sweep",
        "<!-- /sweep -->",
        "<!--\n/sweep\n-->",
        "```\n/sweep\n```",
        "~~~~\n/sweep\n~~~\n/sweep\n~~~~",  # a shorter fence does not close a longer one
        "```\n/sweep\n~~~\n/sweep\n```",  # nor does one of the other kind
        "```\n/sweep\n``` text\n/sweep\n```",  # nor one with text after it
    ],
)
def test_lines_that_are_not_commands(body: str) -> None:
    assert parse_commands(body) == []


def test_what_ends_a_block_and_where_commands_may_start() -> None:
    assert [c.line_no for c in parse_commands("```\nx\n```\n/sweep status")] == [4]
    assert [c.line_no for c in parse_commands("<!--\nx -->\n/sweep status")] == [3]
    assert [c.line_no for c in parse_commands("<!-- note -->\n/sweep status")] == [2]
    assert [c.line_no for c in parse_commands("text <!-- x\n/sweep status")] == [2]
    assert [c.line_no for c in parse_commands("   /sweep status\r\n/help\r/bump")] == [1, 2, 3]
    assert parse_commands("  <!--\n/sweep\n-->") == []
    assert parse_commands("") == [] and parse_commands(None) == []  # type: ignore[arg-type]


def test_more_than_max_commands_is_one_error_and_the_rest_is_ignored() -> None:
    body = "\n".join(["/sweep status"] * (MAX_COMMANDS + 3))
    cmds = parse_commands(body)
    assert len(cmds) == MAX_COMMANDS + 1
    assert all(c.error is None for c in cmds[:MAX_COMMANDS])
    last = cmds[-1]
    assert (last.words, last.line, last.line_no, last.error) == (
        "/sweep status",
        "/sweep status",
        MAX_COMMANDS + 1,
        f"more than {MAX_COMMANDS} commands in one comment; split them up",
    )
    assert len(parse_commands("\n".join(["/sweep status"] * MAX_COMMANDS))) == MAX_COMMANDS


def test_the_help_text() -> None:
    lines = help_text().split("\n")
    assert lines[:2] == [
        "**sweepbot commands** (one per line, at the start of the line, in a PR comment):",
        "",
    ]
    assert lines[-2:] == [
        "",
        "Quoted lines (`> /sweep`) and code blocks are ignored. Editing a comment does not run it again.",
    ]
    assert "- `/sweep status` — Show the progress of this PR's sweeps." in lines
    assert "- `/sweep cancel` — Cancel this PR's queued and running sweep jobs. *(write access)*" in lines
    assert (
        "- `/depends-on drop <owner/repo>#<N> ...` — Stop waiting for these upstream PRs. *(write access)*"
        in lines
    )
    assert any(ln.startswith("- `/sweep approve [<sha>]` — ") for ln in lines)
    assert "  - example: `/sweep conc=32,64 seq=8k1k`" in lines
    assert "  - `tp=4`: only points with this tensor-parallel size" in lines


@pytest.mark.parametrize(
    ("user", "bot"),
    [
        ({"login": "sweepbot[bot]", "type": "Bot"}, True),
        ({"login": "mybot"}, True),
        ({"login": "renovate[bot]", "type": "User"}, True),
        ({"login": "dependabot", "type": "Bot"}, True),
        ({"login": "octocat", "type": "User"}, False),
        ({"login": None, "type": "User"}, False),
        ({}, False),
        (None, False),
    ],
)
def test_is_bot(user: Any, bot: bool) -> None:
    assert is_bot(user, "mybot") is bot


def test_a_slash_word_only_somewhat_like_a_command_is_someone_elses() -> None:
    # "swap" is 0.67 like "sweep": below the 0.75 a typo needs, so not answered as a typo
    assert parse_commands("/swap the files") == []
    (typo,) = parse_commands("/swep")
    assert typo.error == "unknown command `/swep`: did you mean `/sweep`? Reply `/help` for the list."


def test_commands_keep_their_line_as_written_and_its_number() -> None:
    cmds = parse_commands("hello\n/usr/bin/env python\n/Sweep   now\n  /sweep status  ")
    assert [(c.line, c.line_no, c.sub) for c in cmds] == [
        ("/Sweep   now", 3, None),
        ("/sweep status", 4, "status"),
    ]


def test_a_reference_with_trailing_junk_is_refused() -> None:
    assert err("/depends-on a/b#1X") == (
        "`a/b#1X` is not a pull request reference; write owner/repo#N or the PR URL, e.g. "
        "`/depends-on vllm-project/vllm#47269` (usage: `/depends-on <owner/repo>#<N> ...`)"
    )


def test_a_user_without_a_login_is_the_bot_when_no_bot_login_is_set() -> None:
    # SWEEPBOT_BOT_LOGIN="" and a payload user with no login: the missing login reads as "", the
    # configured one, so the comment is taken for the bot's own and runs nothing (no author to check)
    assert is_bot({"type": "User"}, "") is True
    assert is_bot({"login": None, "type": "User"}, "") is True
    assert is_bot({"login": "octocat", "type": "User"}, "") is False
