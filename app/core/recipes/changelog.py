"""Appending perf-changelog entries in the benchmark repo's own format, with every field its gate knows.

The repo's `perf-changelog.yaml` is a YAML list; each entry reads

    - config-keys:
        - <key>
      scenario-type:                 (optional; `fixed-seq-len` and/or `agentic-coding`)
        - agentic-coding
      description:
        - "<double-quoted line>"
      pr-link: https://github.com/<org>/<repo>/pull/<n>     (`XXX` while the PR is open)
      evals-only: true               (optional flags, written only when true)

Fields and rules come from the repo's changelog gate (`utils/validate_perf_changelog.py` and its
`ChangelogEntry` model at InferenceX 843c6254): `config-keys` and `description` are non-empty
lists, `pr-link` is a string, the booleans `evals-only`, `all-evals`, `no-evals`, `append-only`
default to false, `eval-min-prefill-ep` is an integer >= 1, `scenario-type` a non-empty list of
`fixed-seq-len`/`agentic-coding`; `no-evals` and `append-only` cannot be combined with eval
selection fields. No other key is allowed.

Byte rules (the gate's file checks plus `git diff --check`): the old text is kept as an exact
prefix (only a missing final newline is added), entries start with `- config-keys:` at column 0,
and the new entry is separated from history by exactly one *empty* line. A whitespace-only last
line (`"  "`, which the real file has) is not empty: it is kept and one empty line follows it,
as the repo's own history does (`pr-link: ...\n  \n\n- config-keys:`). Added lines never carry
trailing whitespace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

from app.core.recipes.errors import ChangelogError, InvalidYamlError
from app.core.recipes.yamlutil import load_yaml

PENDING_PR_LINK = "XXX"
# What the gate accepts on a PR besides the PR's own link (utils/validate_perf_changelog.py).
PLACEHOLDER_RE = re.compile(r"^(?:XXX|https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/pull/XXX)$")
SCENARIO_TYPES = ("fixed-seq-len", "agentic-coding")
_KEY_RE = re.compile(r"^[A-Za-z0-9*?][A-Za-z0-9._+*?-]*$")
_URL_RE = re.compile(r"^https?://\S+$")
_PLAIN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:+@%?=&#~-]*$")
_DEP_RE = re.compile(
    r"^(?:https://github\.com/)?(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)(?:#|/pull/)(?P<num>\d+)"
    r"(?:\s*(?:@\s*(?P<sha>[0-9a-fA-F]{7,40})|\(\s*(?P<sha2>[0-9a-fA-F]{7,40})\s*\)))?$"
)
_RESOLVER = Resolver()
_STR_TAG = "tag:yaml.org,2002:str"


@dataclass(frozen=True)
class EntryFlags:
    """The optional fields of an entry besides config-keys, description and pr-link.

    Defaults are the gate's defaults, and a field at its default is not written (the repo's own
    entries only spell out what differs), so an entry parses back to exactly what was asked.
    """

    scenario_type: tuple[str, ...] = ()
    evals_only: bool = False
    all_evals: bool = False
    no_evals: bool = False
    append_only: bool = False
    eval_min_prefill_ep: int | None = None

    def as_fields(self) -> dict[str, object]:
        """The fields as they appear in the parsed YAML (only those that differ from the default)."""
        out: dict[str, object] = {}
        if self.scenario_type:
            out["scenario-type"] = list(self.scenario_type)
        for name, value in (
            ("evals-only", self.evals_only),
            ("all-evals", self.all_evals),
            ("no-evals", self.no_evals),
            ("append-only", self.append_only),
        ):
            if value:
                out[name] = True
        if self.eval_min_prefill_ep is not None:
            out["eval-min-prefill-ep"] = self.eval_min_prefill_ep
        return out

    def check(self) -> None:
        bad = [t for t in self.scenario_type if t not in SCENARIO_TYPES]
        if bad:
            raise ChangelogError(
                f"scenario-type {', '.join(map(repr, bad))} is not one the repo knows; "
                f"use {' or '.join(SCENARIO_TYPES)}"
            )
        if len(set(self.scenario_type)) != len(self.scenario_type):
            raise ChangelogError("scenario-type lists a type twice; give each type once")
        if self.eval_min_prefill_ep is not None and (
            isinstance(self.eval_min_prefill_ep, bool)
            or not isinstance(self.eval_min_prefill_ep, int)
            or self.eval_min_prefill_ep < 1
        ):
            raise ChangelogError(
                f"eval-min-prefill-ep must be an integer >= 1, got {self.eval_min_prefill_ep!r}"
            )
        eval_selection = self.evals_only or self.all_evals or self.eval_min_prefill_ep is not None
        for name, on in (("no-evals", self.no_evals), ("append-only", self.append_only)):
            if on and eval_selection:
                raise ChangelogError(
                    f"{name} cannot be combined with evals-only, all-evals or eval-min-prefill-ep "
                    "(the repo's changelog gate rejects that entry); drop one of them"
                )


NO_FLAGS = EntryFlags()


def yaml_double_quoted(value: str) -> str:
    """A YAML double-quoted scalar that reads back as exactly `value`, on one line."""
    out = ['"']
    for ch in value:
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif code < 0x20 or 0x7F <= code <= 0x9F:
            # Controls, DEL and C1 (NEL 0x85 is a YAML line break) must be escaped.
            out.append(f"\\x{code:02x}")
        elif ch in "\u2028\u2029\ufeff\ufffe\uffff" or 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _scalar(value: str) -> str:
    """Plain when it reads back as the same string (the repo writes keys and links plain)."""
    if (
        _PLAIN_RE.match(value)
        and not value.endswith(":")
        and _RESOLVER.resolve(ScalarNode, value, (True, False)) == _STR_TAG
    ):
        return value
    return yaml_double_quoted(value)


def render_entry(
    config_keys: list[str],
    description: list[str],
    pr_link: str | None,
    nl: str = "\n",
    flags: EntryFlags = NO_FLAGS,
) -> str:
    """The entry text (ending with a newline) in the repo's layout and field order."""
    lines = ["- config-keys:"]
    lines += [f"    - {_scalar(k)}" for k in config_keys]
    if flags.scenario_type:
        lines.append("  scenario-type:")
        lines += [f"    - {t}" for t in flags.scenario_type]
    lines.append("  description:")
    lines += [f"    - {yaml_double_quoted(d)}" for d in description]
    lines.append(f"  pr-link: {_scalar(pr_link) if pr_link is not None else PENDING_PR_LINK}")
    for name, value in flags.as_fields().items():
        if name != "scenario-type":
            lines.append(f"  {name}: {'true' if value is True else value}")
    return nl.join(lines) + nl


def _check_inputs(config_keys: list[str], description: list[str], pr_link: str | None) -> None:
    if not config_keys:
        raise ChangelogError("a changelog entry needs at least one config key (--key)")
    for key in config_keys:
        if not isinstance(key, str) or not _KEY_RE.match(key):
            raise ChangelogError(
                f"'{key}' is not a config key; use the master-config key, e.g. minimaxm3-fp4-mi355x-vllm"
            )
    if not description:
        raise ChangelogError("a changelog entry needs at least one description line (--description)")
    for line in description:
        if not isinstance(line, str) or not line.strip():
            raise ChangelogError("description lines must be non-empty text")
    if pr_link is not None and not (_URL_RE.match(pr_link) or PLACEHOLDER_RE.match(pr_link)):
        raise ChangelogError(
            f"'{pr_link}' is not a PR link; use https://github.com/<org>/<repo>/pull/<n>, or XXX "
            "(what omitting it writes) while the PR has no number"
        )


def separator_for(text: str, nl: str = "\n") -> str:
    """What goes between `text` and a new entry so that exactly one empty line separates them.

    Only a missing final newline and empty lines are ever added: a whitespace-only last line is
    history and stays; more than one trailing empty line cannot be fixed without deleting bytes,
    so nothing is added then (the entry still starts at column 0 and parses).
    """
    if not text:
        return ""
    out = "" if text.endswith(("\n", "\r")) else nl
    last = (text + out).splitlines()[-1]
    return out if last == "" else out + nl


def append_changelog(
    text: str,
    *,
    config_keys: list[str],
    description: list[str],
    pr_link: str | None,
    flags: EntryFlags = NO_FLAGS,
) -> str:
    """Append one entry at the physical end of a perf-changelog, keeping `text` as an exact prefix.

    Line endings follow the file (CRLF stays CRLF). The result is parsed back and must be the
    old list plus exactly this entry; otherwise ChangelogError.
    """
    _check_inputs(config_keys, description, pr_link)
    flags.check()
    try:
        old = load_yaml(text, "the perf-changelog")
    except InvalidYamlError as exc:
        raise ChangelogError(str(exc)) from exc
    if old is None:
        old = []
    if not isinstance(old, list):
        raise ChangelogError(
            f"the perf-changelog is a {type(old).__name__}, not a YAML list of entries; "
            "check that this is perf-changelog.yaml"
        )
    nl = "\r\n" if "\r\n" in text else "\n"
    out = text + separator_for(text, nl) + render_entry(config_keys, description, pr_link, nl, flags)

    expected: dict[str, object] = {
        "config-keys": list(config_keys),
        "description": list(description),
        "pr-link": pr_link if pr_link is not None else PENDING_PR_LINK,
        **flags.as_fields(),
    }
    try:
        new = load_yaml(out, "the appended perf-changelog")
    except InvalidYamlError as exc:
        raise ChangelogError(f"appending would break the file ({exc}); fix the file's end by hand") from exc
    if not isinstance(new, list) or len(new) != len(old) + 1 or new[:-1] != old or new[-1] != expected:
        raise ChangelogError(
            "appending at the end would change earlier entries (the file's last entry is not "
            "closed at column 0); fix the file's end by hand"
        )
    return out


def replace_pending_link(text: str, entry: str, pr_link: str) -> tuple[str, str]:
    """Swap the `XXX` pr-link of `entry` (text the bot appended, found once in `text`) for `pr_link`.

    Returns (new text, new entry). Only the entry's own `pr-link:` line changes, so the file's
    diff against its base still only adds lines. Raises ChangelogError when the entry is not
    found exactly once or carries no placeholder link.
    """
    if not _URL_RE.match(pr_link) or PLACEHOLDER_RE.match(pr_link):
        raise ChangelogError(f"'{pr_link}' is not a PR link to write into the entry")
    if not entry or text.count(entry) != 1:
        raise ChangelogError(
            "the entry to fix is not in the perf-changelog exactly once; fix its pr-link by hand"
        )
    lines = entry.splitlines(keepends=True)
    hits = [
        i
        for i, line in enumerate(lines)
        if PLACEHOLDER_RE.match(line.strip().removeprefix("pr-link:").strip())
        and line.startswith("  pr-link:")
    ]
    if len(hits) != 1:
        raise ChangelogError("the entry has no pending (XXX) pr-link to fix")
    line = lines[hits[0]]
    ending = line[len(line.rstrip("\r\n")) :]
    lines[hits[0]] = f"  pr-link: {_scalar(pr_link)}{ending}"
    new_entry = "".join(lines)
    at = text.index(entry)
    return text[:at] + new_entry + text[at + len(entry) :], new_entry


def changelog_description_for_bump(image: str, deps: list[str]) -> list[str]:
    """Description lines for an image bump: the new image, then one line per dependency.

    `deps` items are `owner/repo#N`, optionally with the merge commit as `owner/repo#N@<sha>` or
    `owner/repo#N (<sha>)`, or a PR URL. The sha is shortened to 7 characters.
    """
    lines = [f"Bump image to {image}"]
    for dep in deps:
        match = _DEP_RE.match(dep.strip())
        if not match:
            raise ChangelogError(
                f"'{dep}' is not a dependency reference; use owner/repo#N or owner/repo#N@<merge-sha>"
            )
        sha = match.group("sha") or match.group("sha2")
        ref = f"{match.group('repo')}#{match.group('num')}"
        lines.append(f"Brings {ref} ({sha[:7].lower()})" if sha else f"Brings {ref}")
    return lines
