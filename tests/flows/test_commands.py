"""The comment grammar: what is a command, strict errors that say the fix, /help from the grammar."""

from __future__ import annotations

from typing import Any, cast

import pytest
from sqlalchemy.orm import Session

from app.core.commands import GRAMMAR, help_text, is_bot, parse_commands
from app.flows.commands.comments import RUNNERS, CommandGateway, handle_comment


def one(body: str) -> Any:
    cmds = parse_commands(body)
    assert len(cmds) == 1, cmds
    return cmds[0]


def test_sweep_with_every_option() -> None:
    cmd = one("/sweep config=minimaxm3-fp4-mi355x-vllm conc=64,32 seq=8k1k tp=4 priority=high")
    assert cmd.error is None and (cmd.name, cmd.sub) == ("sweep", None)
    assert cmd.options == {
        "config": "minimaxm3-fp4-mi355x-vllm",
        "conc": {"list": [32, 64]},
        "seq": "8k1k",
        "tp": 4,
        "priority": "high",
    }
    assert one("/sweep conc=4..256").options["conc"] == {"range": (4, 256)}
    assert one("/sweep").options == {} and one("/sweep").needs_write


@pytest.mark.parametrize(
    ("body", "sub"), [("/sweep status", "status"), ("/sweep cancel", "cancel"), ("/sweep approve", "approve")]
)
def test_sweep_subcommands(body: str, sub: str) -> None:
    cmd = one(body)
    assert cmd.error is None and cmd.sub == sub
    assert cmd.needs_write == (sub != "status")


def test_depends_on_and_drop() -> None:
    cmd = one("/depends-on vllm-project/vllm#47269 https://github.com/vllm-project/vllm/pull/47270")
    assert cmd.error is None and cmd.refs == ("vllm-project/vllm#47269", "vllm-project/vllm#47270")
    drop = one("/depends-on drop vllm-project/vllm#47270")
    assert drop.sub == "drop" and drop.refs == ("vllm-project/vllm#47270",)
    assert one("/bump").error is None and one("/help").error is None and not one("/help").needs_write


def test_only_lines_that_start_with_a_command_count() -> None:
    body = "\n".join(
        [
            "Thanks! Could someone run /sweep on this?",
            "> /sweep conc=32",
            ">/sweep",
            "```",
            "/sweep conc=64",
            "```",
            "~~~~",
            "/bump",
            "~~~~",
            "    /sweep indented code",
            "\t/sweep tabbed code",
            "<!-- /sweep in a comment -->",
            "see /usr/bin/env and /etc",
            "",
            "  /sweep conc=8",
        ]
    )
    cmds = parse_commands(body)
    assert [(c.words, c.line_no) for c in cmds] == [("/sweep", 15)]
    assert cmds[0].options["conc"] == {"list": [8]}
    assert parse_commands("/sweep status\r\n/help\r\n") and len(parse_commands("/sweep status\r\n/help")) == 2


@pytest.mark.parametrize(
    ("body", "fix"),
    [
        ("/sweep conc=abc", "write a list like conc=32,64 or a range like conc=4..256"),
        ("/sweep conc=256..4", "the range must go up"),
        ("/sweep conc=0,32", "between 1 and"),
        ("/sweep cnoc=32", "Did you mean 'conc'?"),
        ("/sweep conc=32 conc=64", "given twice"),
        ("/sweep seq=8k", "seq=8k1k"),
        ("/sweep tp=four", "e.g. tp=4"),
        ("/sweep priority=urgent", "priority=low, normal or high"),
        ("/sweep config=../etc", "e.g. config=minimaxm3-fp4-mi355x-vllm"),
        ("/sweep now", "takes options as key=value"),
        ("/sweep conc=", "has no value"),
        ("/sweep status please", "takes no arguments"),
        ("/bump now", "takes no arguments"),
        ("/depends-on", "needs at least one PR"),
        ("/depends-on vllm#1", "write owner/repo#N or the PR URL"),
        ("/swep conc=32", "did you mean `/sweep`?"),
        ("/depends_on vllm-project/vllm#1", "did you mean `/depends-on`?"),
    ],
)
def test_malformed_commands_say_the_fix(body: str, fix: str) -> None:
    cmd = one(body)
    assert cmd.error is not None and fix in cmd.error
    if cmd.spec is not None:
        assert cmd.spec.usage() in cmd.error


def test_help_is_generated_from_the_grammar() -> None:
    text = help_text()
    for spec in GRAMMAR:
        assert f"`{spec.usage()}`" in text
        for opt in spec.options:
            assert f"`{opt.name}={opt.placeholder}`" in text
    assert (
        "/sweep [config=KEY] [conc=32,64 | 4..256] [seq=8k1k] [tp=4] [evals=default|none|only|all] "
        "[priority=low|normal|high]" in text
    )
    # Every example in the help parses cleanly: the help cannot teach a command the parser rejects.
    for spec in GRAMMAR:
        if spec.example:
            assert one(spec.example).error is None


def test_bots_are_recognized() -> None:
    assert is_bot({"login": "sweepbot[bot]", "type": "Bot"}, "sweepbot[bot]")
    assert is_bot({"login": "dependabot[bot]", "type": "User"}, "sweepbot[bot]")
    assert is_bot({"login": "ci-helper", "type": "Bot"}, "sweepbot[bot]")
    assert is_bot({"login": "mybot", "type": "User"}, "mybot")
    assert not is_bot({"login": "alice", "type": "User"}, "sweepbot[bot]")


class NoCalls:
    """Stands in for the session and the gateway of a comment the handler must ignore: any use fails."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected call {name}")


# Typed as what they stand in for (a cast: NoCalls implements nothing, and needs not).
NO_SESSION = cast(Session, NoCalls())
NO_GATEWAY = cast(CommandGateway, NoCalls())


def _payload(
    body: str, *, action: str = "created", pr: bool = True, login: str = "alice", kind: str = "User"
) -> dict[str, Any]:
    issue: dict[str, Any] = {"number": 7}
    if pr:
        issue["pull_request"] = {"url": "x"}
    user = {"login": login, "type": kind}
    return {
        "action": action,
        "issue": issue,
        "comment": {"id": 99, "body": body, "user": user},
        "repository": {"full_name": "acme/bench"},
        "sender": user,
    }


@pytest.mark.parametrize(
    "payload",
    [
        _payload("/sweep", action="edited"),
        _payload("/sweep", pr=False),
        _payload("/sweep", login="sweepbot[bot]", kind="Bot"),
        _payload("/sweep", login="renovate[bot]"),
        _payload("> /sweep\n```\n/sweep\n```"),
    ],
    ids=["edited", "issue-not-pr", "itself", "other-bot", "quoted-and-code"],
)
def test_handler_ignores_without_any_github_call(payload: dict[str, Any]) -> None:
    out = handle_comment(NO_SESSION, NO_GATEWAY, payload, bot_login="sweepbot[bot]")
    assert out.status == "ignored" and out.reason


def test_every_command_of_the_grammar_has_a_runner() -> None:
    """The grammar (app.core.commands) and the flow's table of what runs each command agree."""
    assert sorted(RUNNERS) == sorted(spec.words for spec in GRAMMAR)
