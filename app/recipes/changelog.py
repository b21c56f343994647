"""Appending perf-changelog entries in the benchmark repo's own format.

The repo's `perf-changelog.yaml` is a YAML list; each entry reads

    - config-keys:
        - <key>
      description:
        - "<double-quoted line>"
      pr-link: https://github.com/<org>/<repo>/pull/<n>     (`XXX` while the PR is open)

and entries are separated by one blank line. New entries go at the physical end; the old text
is kept as an exact prefix (only a missing final newline is added), so the diff only adds lines.
"""

from __future__ import annotations

import re

from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

from app.recipes.errors import ChangelogError, InvalidYamlError
from app.recipes.yamlutil import load_yaml

PENDING_PR_LINK = "XXX"
_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
_URL_RE = re.compile(r"^https?://\S+$")
_PLAIN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:+@%?=&#~-]*$")
_DEP_RE = re.compile(
    r"^(?:https://github\.com/)?(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)(?:#|/pull/)(?P<num>\d+)"
    r"(?:\s*(?:@\s*(?P<sha>[0-9a-fA-F]{7,40})|\(\s*(?P<sha2>[0-9a-fA-F]{7,40})\s*\)))?$"
)
_RESOLVER = Resolver()
_STR_TAG = "tag:yaml.org,2002:str"


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


def render_entry(config_keys: list[str], description: list[str], pr_link: str | None, nl: str = "\n") -> str:
    """The entry text (ending with a newline) in the repo's layout."""
    lines = ["- config-keys:"]
    lines += [f"    - {_scalar(k)}" for k in config_keys]
    lines.append("  description:")
    lines += [f"    - {yaml_double_quoted(d)}" for d in description]
    lines.append(f"  pr-link: {_scalar(pr_link) if pr_link is not None else PENDING_PR_LINK}")
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
    if pr_link is not None and not _URL_RE.match(pr_link):
        raise ChangelogError(
            f"'{pr_link}' is not a PR link; use https://github.com/<org>/<repo>/pull/<n> or omit it for XXX"
        )


def append_changelog(
    text: str, *, config_keys: list[str], description: list[str], pr_link: str | None
) -> str:
    """Append one entry at the physical end of a perf-changelog, keeping `text` as an exact prefix.

    Separator rule: a missing final newline is added; then one blank line, unless the file
    already ends with a blank or whitespace-only line (those are kept, never removed). Line
    endings follow the file (CRLF stays CRLF). The result is parsed back and must be the old
    list plus exactly this entry; otherwise ChangelogError.
    """
    _check_inputs(config_keys, description, pr_link)
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
    out = text
    if out and not out.endswith(("\n", "\r")):
        out += nl
    lines = out.splitlines()
    if lines and lines[-1].strip():
        out += nl
    out += render_entry(config_keys, description, pr_link, nl)

    expected = {
        "config-keys": list(config_keys),
        "description": list(description),
        "pr-link": pr_link if pr_link is not None else PENDING_PR_LINK,
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
