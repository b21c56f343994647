"""PR comment commands, the grammar (pure): one table that parses comments and also writes ``/help``.

Rules (``parse_commands``):

- a command is a line that starts with ``/<name>`` (at most three leading spaces, as Markdown
  allows for a paragraph); text that merely mentions ``/sweep`` mid-sentence is not a command;
- quoted lines (``> /sweep``), fenced code blocks (```` ``` ```` / ``~~~``), indented code (four
  spaces or a tab) and HTML comments are ignored, so quoting or documenting a command never runs it;
- parsing is strict: unknown options, duplicates, malformed values and stray words are errors
  whose message says the fix.

What runs a parsed command is the flow ``app.flows.commands.comments``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.core.inert import code
from app.core.recipes.evals import EvalModeError, parse_eval_mode
from app.core.seqlen import is_seq_filter

MAX_COMMANDS = 10

# ------------------------------------------------------------------------------------------ grammar

_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_REF_RE = re.compile(
    r"^(?:https://github\.com/)?([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)(?:#|/pull/|/issues/)(\d+)/?$"
)
MAX_CONC = 4096
_SHA_ARG_RE = re.compile(r"^[0-9a-fA-F]{7,40}$")


class CommandSyntaxError(ValueError):
    pass


def _small_int(text: str, max_digits: int = 5) -> int | None:
    """An ASCII decimal of at most ``max_digits`` digits, else None ("²".isdigit() is True, and
    int() of 5,000 digits raises past Python's 4,300-digit limit)."""
    if not text or len(text) > max_digits or not text.isascii() or not text.isdigit():
        return None
    return int(text)


def _v_key(value: str) -> str:
    if not _KEY_RE.match(value):
        raise CommandSyntaxError(
            f"{code('config=' + value)} is not a config key; write it as in the master config, "
            "e.g. config=minimaxm3-fp4-mi355x-vllm"
        )
    return value


def _v_conc(value: str) -> dict[str, Any]:
    fix = "write a list like conc=32,64 or a range like conc=4..256 (positive integers)"
    if ".." in value:
        lo_s, _, hi_s = value.partition("..")
        lo, hi = _small_int(lo_s), _small_int(hi_s)
        if lo is None or hi is None:
            if lo_s.isdigit() and hi_s.isdigit():
                raise CommandSyntaxError(f"{code('conc=' + value)}: values go up to {MAX_CONC}: {fix}")
            raise CommandSyntaxError(f"{code('conc=' + value)} is not a range: {fix}")
        if lo < 1 or hi > MAX_CONC or lo > hi:
            raise CommandSyntaxError(
                f"{code('conc=' + value)}: the range must go up, from 1 to at most {MAX_CONC}: {fix}"
            )
        return {"range": (lo, hi)}
    parts = value.split(",")
    numbers = [_small_int(p) for p in parts]
    if not parts or any(n is None for n in numbers):
        if all(p.isdigit() for p in parts):
            raise CommandSyntaxError(
                f"{code('conc=' + value)}: each value must be between 1 and {MAX_CONC}: {fix}"
            )
        raise CommandSyntaxError(f"{code('conc=' + value)} is not a list of concurrencies: {fix}")
    values = sorted({n for n in numbers if n is not None})
    if values[0] < 1 or values[-1] > MAX_CONC:
        raise CommandSyntaxError(
            f"{code('conc=' + value)}: each value must be between 1 and {MAX_CONC}: {fix}"
        )
    return {"list": values}


def _v_seq(value: str) -> str:
    if not is_seq_filter(value):
        raise CommandSyntaxError(
            f"{code('seq=' + value)} is not a sequence-length name; "
            "use one like `seq=8k1k`, `seq=1k1k`, `seq=<isl>_<osl>` or `seq=agentic`"
        )
    return value


def _v_tp(value: str) -> int:
    tp = _small_int(value, 2)
    if tp is None or not 1 <= tp <= 64:
        raise CommandSyntaxError(
            f"{code('tp=' + value)} is not a tensor-parallel size; use an integer from 1 to 64, e.g. tp=4"
        )
    return tp


def _v_evals(value: str) -> str:
    try:
        return parse_eval_mode(value).value
    except EvalModeError as exc:
        raise CommandSyntaxError(
            f"{exc} (default: the repo's eval points beside throughput; none: throughput only; "
            "only: the eval points without throughput; all: every point as an eval)"
        ) from None


def _v_priority(value: str) -> str:
    if value not in ("low", "normal", "high"):
        raise CommandSyntaxError(
            f"{code('priority=' + value)} is not a priority; use priority=low, normal or high"
        )
    return value


@dataclass(frozen=True)
class OptionSpec:
    name: str
    placeholder: str
    help: str
    parse: Callable[[str], Any]


@dataclass(frozen=True)
class CommandSpec:
    name: str  # "sweep", "depends-on" ...
    sub: str | None  # "status", "drop" ... or None
    summary: str
    needs_write: bool
    options: tuple[OptionSpec, ...] = ()
    takes_refs: bool = False
    example: str = ""
    takes_sha: bool = False  # an optional commit SHA (``/sweep approve <sha>``)

    @property
    def words(self) -> str:
        return f"/{self.name}" + (f" {self.sub}" if self.sub else "")

    def usage(self) -> str:
        parts = [self.words]
        parts += [f"[{o.name}={o.placeholder}]" for o in self.options]
        if self.takes_refs:
            parts.append("<owner/repo>#<N> ...")
        if self.takes_sha:
            parts.append("[<sha>]")
        return " ".join(parts)


SWEEP_OPTIONS = (
    OptionSpec(
        "config", "KEY", "the master-config key to sweep (default: the key(s) this PR changes)", _v_key
    ),
    OptionSpec("conc", "32,64 | 4..256", "only these concurrencies, a list or an inclusive range", _v_conc),
    OptionSpec("seq", "8k1k", "only this sequence-length scenario (8k1k, 1k1k or `<isl>_<osl>`)", _v_seq),
    OptionSpec("tp", "4", "only points with this tensor-parallel size", _v_tp),
    OptionSpec(
        "evals",
        "default|none|only|all",
        "accuracy evals: the repo's default eval points beside throughput (default), throughput only "
        "(none), the eval points only (only) or every point as an eval (all)",
        _v_evals,
    ),
    OptionSpec("priority", "low|normal|high", "queue priority (default normal)", _v_priority),
)

GRAMMAR: tuple[CommandSpec, ...] = (
    CommandSpec(
        "sweep",
        None,
        "Queue a benchmark sweep of the recipe on its runners and report the gap.",
        True,
        SWEEP_OPTIONS,
        example="/sweep conc=32,64 seq=8k1k",
    ),
    CommandSpec("sweep", "status", "Show the progress of this PR's sweeps.", False),
    CommandSpec("sweep", "cancel", "Cancel this PR's queued and running sweep jobs.", True),
    CommandSpec(
        "sweep",
        "approve",
        "Approve the sweep of a fork PR for the head commit you reviewed (the head when you wrote "
        "the comment, or the commit you name, which must be the current head).",
        True,
        example="/sweep approve 1a2b3c4d5e6f",
        takes_sha=True,
    ),
    CommandSpec(
        "depends-on",
        None,
        "Wait for upstream PRs to land in a nightly before bumping the image.",
        True,
        takes_refs=True,
        example="/depends-on vllm-project/vllm#47269",
    ),
    CommandSpec(
        "depends-on",
        "drop",
        "Stop waiting for these upstream PRs.",
        True,
        takes_refs=True,
        example="/depends-on drop vllm-project/vllm#47270",
    ),
    CommandSpec(
        "depends-on",
        "approve",
        "Let the dependency lines of a PR by someone without write access count (for the head you "
        "reviewed; the image a bump pins still comes from the default branch).",
        True,
        example="/depends-on approve 1a2b3c4d5e6f",
        takes_sha=True,
    ),
    CommandSpec("bump", None, "Bump the image pin now if a nightly contains every dependency.", True),
    CommandSpec("help", None, "Show this help.", False),
)
NAMES = sorted({spec.name for spec in GRAMMAR})


def help_text() -> str:
    """The ``/help`` reply, generated from ``GRAMMAR`` (so it cannot drift from the parser)."""
    lines = ["**sweepbot commands** (one per line, at the start of the line, in a PR comment):", ""]
    for spec in GRAMMAR:
        perm = " *(write access)*" if spec.needs_write else ""
        lines.append(f"- `{spec.usage()}` — {spec.summary}{perm}")
        for opt in spec.options:
            lines.append(f"  - `{opt.name}={opt.placeholder}`: {opt.help}")
        if spec.example:
            lines.append(f"  - example: `{spec.example}`")
    lines += [
        "",
        "Quoted lines (`> /sweep`) and code blocks are ignored. Editing a comment does not run it again.",
    ]
    return "\n".join(lines)


@dataclass
class Command:
    name: str
    sub: str | None
    line: str  # the command line as written
    line_no: int
    options: dict[str, Any] = field(default_factory=dict)
    refs: tuple[str, ...] = ()
    error: str | None = None
    spec: CommandSpec | None = None

    @property
    def words(self) -> str:
        return f"/{self.name}" + (f" {self.sub}" if self.sub else "")

    @property
    def needs_write(self) -> bool:
        return self.spec.needs_write if self.spec is not None else False


def _did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def _parse_line(text: str, line_no: int) -> Command | None:
    tokens = text.split()
    head = tokens[0]
    name = head[1:]
    if name not in NAMES:
        close = difflib.get_close_matches(name.lower(), NAMES, n=1, cutoff=0.75)
        if close:  # "/swep", "/Sweep", "/depends_on": clearly meant for us
            return Command(
                name,
                None,
                text,
                line_no,
                error=(
                    f"unknown command {code(head)}: did you mean `/{close[0]}`? Reply `/help` for the list."
                ),
            )
        return None  # a path or someone else's slash command
    rest = tokens[1:]
    subs = {s.sub: s for s in GRAMMAR if s.name == name and s.sub}
    spec = next(s for s in GRAMMAR if s.name == name and s.sub is None)
    if rest and rest[0] in subs:
        spec = subs[rest[0]]
        rest = rest[1:]
    cmd = Command(name, spec.sub, text, line_no, spec=spec)
    try:
        if spec.takes_refs:
            if not rest:
                raise CommandSyntaxError(f"`{spec.words}` needs at least one PR, e.g. `{spec.example}`")
            refs = []
            for tok in rest:
                m = _REF_RE.match(tok.rstrip(",;"))
                if m is None:
                    raise CommandSyntaxError(
                        f"{code(tok)} is not a pull request reference; write owner/repo#N or the "
                        f"PR URL, e.g. `{spec.example}`"
                    )
                refs.append(f"{m.group(1)}#{m.group(2)}")
            cmd.refs = tuple(dict.fromkeys(refs))
        elif spec.takes_sha:
            if len(rest) > 1 or (rest and not _SHA_ARG_RE.match(rest[0])):
                raise CommandSyntaxError(
                    f"`{spec.words}` takes at most one commit SHA (7 to 40 hex digits), "
                    f"e.g. `{spec.example}`; remove {code(' '.join(rest))}"
                )
            if rest:
                cmd.options["sha"] = rest[0].lower()
        elif spec.options:
            by_name = {o.name: o for o in spec.options}
            for tok in rest:
                key, sep, value = tok.partition("=")
                if not sep:
                    choices = ", ".join(sorted(subs))
                    raise CommandSyntaxError(
                        f"unexpected word {code(tok)}: `/{name}` takes options as key=value "
                        f"({', '.join(o.name + '=' for o in spec.options)}) or one of: {choices}"
                    )
                if key not in by_name:
                    raise CommandSyntaxError(
                        f"unknown option {code(key)}.{_did_you_mean(key, list(by_name))} "
                        f"Options: {', '.join(o.name + '=' for o in spec.options)}"
                    )
                if key in cmd.options:
                    raise CommandSyntaxError(f"option {key}= is given twice; give it once")
                if not value:
                    raise CommandSyntaxError(
                        f"option {key}= has no value; write {key}={by_name[key].placeholder}"
                    )
                cmd.options[key] = by_name[key].parse(value)
        elif rest:
            raise CommandSyntaxError(f"`{spec.words}` takes no arguments; remove {code(' '.join(rest))}")
    except CommandSyntaxError as exc:
        cmd.error = f"{exc} (usage: `{spec.usage()}`)"
    return cmd


_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def parse_commands(body: str) -> list[Command]:
    """Every command in a comment body, in order; malformed ones carry ``error``."""
    out: list[Command] = []
    fence: str | None = None
    in_html_comment = False
    for line_no, raw in enumerate(
        (body or "").replace("\r\n", "\n").replace("\r", "\n").split("\n"), start=1
    ):
        m = _FENCE_RE.match(raw)
        if fence is not None:
            if (
                m
                and m.group(1)[0] == fence[0]
                and len(m.group(1)) >= len(fence)
                and not raw.strip()[len(m.group(1)) :]
            ):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        if in_html_comment:
            if "-->" in raw:
                in_html_comment = False
            continue
        if raw.lstrip().startswith("<!--"):
            in_html_comment = "-->" not in raw
            continue
        if raw.startswith(("    ", "\t")):
            continue  # indented code block
        text = raw.strip()
        if not text.startswith("/") or len(raw) - len(raw.lstrip(" ")) > 3:
            continue  # quotes ("> /sweep") and mid-sentence mentions never start with "/"
        cmd = _parse_line(text, line_no)
        if cmd is None:
            continue
        if len(out) >= MAX_COMMANDS:
            out.append(
                Command(
                    cmd.name,
                    cmd.sub,
                    text,
                    line_no,
                    error=f"more than {MAX_COMMANDS} commands in one comment; split them up",
                )
            )
            break
        out.append(cmd)
    return out


# ------------------------------------------------------------------------------------------ handler


def reply_marker(comment_id: int) -> str:
    return f"<!-- sweepbot:reply comment={comment_id} -->"


def is_bot(user: Mapping[str, Any] | None, bot_login: str) -> bool:
    if not isinstance(user, Mapping):
        return False
    login = str(user.get("login") or "")
    return login == bot_login or user.get("type") == "Bot" or login.endswith("[bot]")
