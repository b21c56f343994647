"""In-place edit of a config key's `image:` pin: one line changes, every other byte stays.

The edit works on the YAML event stream, not on a re-dump: the image scalar's exact character
span is taken from the parser's marks and replaced, keeping comments, flow-style items, key
order, quoting, CRLF/LF and the absence of a final newline untouched. The result is verified
before it is returned: exactly one physical line differs, and the new document's event stream
equals the old one except for that single scalar (which resolves to the new string and is not
anchored or aliased), so re-parsing shows only that value changed.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Callable
from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    CollectionStartEvent,
    DocumentStartEvent,
    Event,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
)
from yaml.nodes import ScalarNode

from app.core.recipes.errors import (
    EditError,
    InvalidImageError,
    InvalidRecipeError,
    InvalidYamlError,
    NoImageError,
    UnknownKeyError,
)
from app.core.recipes.yamlutil import SafeLoader, yaml_error_summary

_STR_TAG = "tag:yaml.org,2002:str"
_RESOLVER = yaml.resolver.Resolver()
# An image reference is one token: registry/repo[:tag][@digest], or enroot's registry#repo[:tag]
# (`nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc2`, 17 of the 152 NVIDIA pins at InferenceX HEAD).
# No spaces, quotes or controls.
_IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+#-]{0,510}$")
# enroot: a registry host (has a '.' or ':' or is localhost), one '#', then the repository path.
_ENROOT_RE = re.compile(
    r"^(?:[A-Za-z0-9.-]+\.[A-Za-z0-9.-]+|[A-Za-z0-9.-]+:\d+|localhost)#[a-z0-9][^#@]*(?:@.+)?$"
)
# Plain scalars that need no quoting in block or flow context (':' only when not followed by space;
# '#' only after a non-space, where YAML does not start a comment).
_PLAIN_SAFE_RE = re.compile(r"^[A-Za-z0-9_./][A-Za-z0-9_./:@+#-]*$")


@functools.lru_cache(maxsize=8)
def _events(text: str, pure: bool = False) -> tuple[Event, ...]:
    # Cached: bumping many keys of one file (tests, batch bumps) parses the original once.
    loader = yaml.SafeLoader if pure else SafeLoader
    try:
        return tuple(yaml.parse(text, Loader=loader))
    except yaml.YAMLError as exc:
        raise InvalidYamlError(
            f"the master config is not valid YAML: {yaml_error_summary(exc)}; fix the syntax and retry"
        ) from exc


def _skip(events: tuple[Event, ...], i: int) -> int:
    """Index just past the node that starts at events[i]."""
    if isinstance(events[i], CollectionStartEvent):
        depth = 0
        while True:
            ev = events[i]
            if isinstance(ev, CollectionStartEvent):
                depth += 1
            elif isinstance(ev, (MappingEndEvent, SequenceEndEvent)):
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
    return i + 1


def _mapping_pairs(events: tuple[Event, ...], start: int) -> list[tuple[int, int]]:
    """(key index, value index) pairs of the mapping whose MappingStartEvent is events[start]."""
    pairs = []
    i = start + 1
    while not isinstance(events[i], MappingEndEvent):
        value = _skip(events, i)
        pairs.append((i, value))
        i = _skip(events, value)
    return pairs


def _start(ev: Event) -> Any:
    """The event's start mark (both parsers always set it; typed Optional in the stubs)."""
    if ev.start_mark is None:
        raise EditError("the YAML parser gave no position for the image; edit by hand")
    return ev.start_mark


def _end(ev: Event) -> Any:
    if ev.end_mark is None:
        raise EditError("the YAML parser gave no position for the image; edit by hand")
    return ev.end_mark


def _scalar_is(ev: Event, text: str) -> bool:
    return isinstance(ev, ScalarEvent) and ev.value == text


def _resolves_to_str(ev: ScalarEvent) -> bool:
    if ev.tag is not None:
        return ev.tag in (_STR_TAG, "!")
    return _RESOLVER.resolve(ScalarNode, ev.value, ev.implicit) == _STR_TAG


def _signature(ev: Event) -> tuple[object, ...]:
    """What an event means for the loaded data, without position or presentation.

    Quoting style and flow/block layout do not change the data except through tag resolution,
    which `implicit` captures. Dict access because this runs once per event per bump.
    """
    d = ev.__dict__
    return (type(ev), d.get("anchor"), d.get("tag"), d.get("implicit"), d.get("value"))


@functools.lru_cache(maxsize=8)
def _signatures(text: str, pure: bool = False) -> tuple[tuple[object, ...], ...]:
    return tuple(_signature(ev) for ev in _events(text, pure))


def _parse_all(text: str) -> list[Event]:
    loader = SafeLoader(text)
    try:
        out = []
        while loader.check_event():
            out.append(loader.get_event())
        return out
    finally:
        loader.dispose()


@functools.lru_cache(maxsize=8)
def _root_pairs(text: str, pure: bool = False) -> list[tuple[int, int]]:
    """(key, value) event indexes of the root mapping (cached per text, like _events)."""
    events = _events(text, pure)
    docs = sum(1 for ev in events if isinstance(ev, DocumentStartEvent))
    if docs != 1:
        raise InvalidYamlError(
            f"the master config holds {docs} YAML documents; it must be exactly one mapping"
        )
    # StreamStart, DocumentStart, then the root node.
    if not isinstance(events[2], MappingStartEvent):
        raise InvalidYamlError("the master config is not a mapping of config keys")
    return _mapping_pairs(events, 2)


def _locate_image(text: str, key: str, pure: bool = False) -> int:
    """Index of `key`'s image value ScalarEvent in `_events(text, pure)`."""
    events = _events(text, pure)
    pairs = _root_pairs(text, pure)
    matches = [(k, v) for k, v in pairs if _scalar_is(events[k], key)]
    if not matches:
        names = [str(getattr(events[k], "value", "")) for k, _ in pairs]
        close = difflib.get_close_matches(key, names, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else "; check the key and the file"
        raise UnknownKeyError(f"config key '{key}' is not in this master config{hint}")
    if len(matches) > 1:
        raise EditError(
            f"config key '{key}' is defined {len(matches)} times in this file; remove the duplicate first"
        )
    value_index = matches[0][1]
    entry = events[value_index]
    if isinstance(entry, AliasEvent):
        raise EditError(f"config key '{key}' is an alias (*{entry.anchor}); edit the anchored entry instead")
    if not isinstance(entry, MappingStartEvent):
        raise InvalidRecipeError(f"config key '{key}' is not a mapping; it cannot carry an image")
    inner = _mapping_pairs(events, value_index)
    images = [(k, v) for k, v in inner if _scalar_is(events[k], "image")]
    if not images:
        inherited = any(_scalar_is(events[k], "<<") for k, _ in inner)
        why = " (it comes through a `<<` merge; edit the anchored entry)" if inherited else ""
        raise NoImageError(
            f"config key '{key}' has no `image:` of its own{why}; add `image: <repo>:<tag>` to the entry"
        )
    if len(images) > 1:
        raise EditError(f"config key '{key}' has `image:` twice; remove the duplicate first")
    index = images[0][1]
    ev = events[index]
    if isinstance(ev, AliasEvent):
        raise EditError(f"config key '{key}': `image` is an alias (*{ev.anchor}); edit the anchor instead")
    if not isinstance(ev, ScalarEvent):
        raise NoImageError(f"config key '{key}': `image` is not a string; set it to `<repo>:<tag>`")
    if ev.anchor is not None or ev.tag is not None:
        raise EditError(f"config key '{key}': `image` carries an anchor or tag; edit that line by hand")
    if not _resolves_to_str(ev):
        raise NoImageError(
            f"config key '{key}': `image` is {ev.value or 'empty'!s}, not an image reference; "
            "set it to `<repo>:<tag>`"
        )
    if (ev.style or "") in ("|", ">") or _start(ev).line != _end(ev).line:
        raise EditError(f"config key '{key}': `image` spans several lines; put it on one line, then bump")
    return index


def _span_ok(text: str, ev: ScalarEvent) -> bool:
    """The marks really delimit the scalar (guards against index-unit surprises)."""
    raw = text[_start(ev).index : _end(ev).index]
    if not ev.style:
        return raw == ev.value
    if not raw or raw[0] != ev.style or raw[-1] != ev.style:
        return False
    try:
        return bool(yaml.load(raw, Loader=SafeLoader) == ev.value)
    except yaml.YAMLError:
        return False


def _double_quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _renderings(value: str, style: str | None) -> list[str]:
    """Candidate spellings of the new value, keeping the old quoting style when possible."""
    if style == "'":  # style is None (PyYAML) or '' (libyaml) for plain scalars
        return ["'" + value.replace("'", "''") + "'", _double_quoted(value)]
    if style == '"':
        return [_double_quoted(value)]
    plain_ok = (
        _PLAIN_SAFE_RE.match(value) is not None
        and not value.endswith(":")
        and _RESOLVER.resolve(ScalarNode, value, (True, False)) == _STR_TAG
    )
    return ([value] if plain_ok else []) + [_double_quoted(value)]


_LINE_BREAKS = ("\n", "\r", "\x85", "\u2028", "\u2029", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e")


def _check_target(ev: Event, new_image: str) -> str | None:
    if not (
        isinstance(ev, ScalarEvent) and ev.value == new_image and ev.anchor is None and _resolves_to_str(ev)
    ):
        return "the edited value does not read back as the new image"
    return None


def _compare(
    before: tuple[tuple[object, ...], ...] | list[tuple[object, ...]],
    after: list[Event],
    index: int,
    new_image: str,
) -> str | None:
    """Events equal one for one, except `index`, which must be the new image string."""
    if len(after) != len(before):
        return "the edited file has a different structure"
    problem = _check_target(after[index], new_image)
    if problem:
        return problem
    after_sigs = [_signature(ev) for ev in after]
    if after_sigs[:index] != list(before[:index]) or after_sigs[index + 1 :] != list(before[index + 1 :]):
        return "the edit changed another value"
    return None


def _verify_full(new: str, before: tuple[tuple[object, ...], ...], index: int, new_image: str) -> str | None:
    try:
        after = _parse_all(new)
    except yaml.YAMLError as exc:
        return f"the edited file does not parse ({yaml_error_summary(exc)})"
    return _compare(before, after, index, new_image)


def _verify_entry(
    text: str, new: str, pure: bool, index: int, delta: int, new_image: str
) -> str | None | bool:
    """Re-parse only the edited top-level entry; False when that shortcut cannot be trusted here.

    The master config is a block mapping whose keys start at column 0, so an entry ends where
    the next key begins. The shortcut is used only after checking that parsing the *old* entry
    text on its own yields exactly the events the full parse gave for it; since the prefix before
    the entry and the text after it are byte-identical, the new entry then parses in the full
    document as it does on its own. Everything else falls back to a full re-parse.
    """
    events = _events(text, pure)
    sigs = _signatures(text, pure)
    root = events[2]
    if not isinstance(root, MappingStartEvent) or root.flow_style:
        return False
    keys = [k for k, _ in _root_pairs(text, pure)]
    # The root entry containing the image: the last key starting before it.
    pos = max(i for i, k in enumerate(keys) if k <= index)
    first = keys[pos]
    last = keys[pos + 1] if pos + 1 < len(keys) else len(events) - 3  # MappingEnd, DocEnd, StreamEnd
    start = _start(events[first])
    if start.column != 0:
        return False
    stop = _start(events[last]).index if pos + 1 < len(keys) else len(text)
    try:
        old_alone = _parse_all(text[start.index : stop])
    except yaml.YAMLError:
        return False
    inner = old_alone[3:-3]
    if (
        len(old_alone) != (last - first) + 6
        or not isinstance(old_alone[2], MappingStartEvent)
        or [_signature(ev) for ev in inner] != list(sigs[first:last])
    ):
        return False
    try:
        new_alone = _parse_all(new[start.index : stop + delta])
    except yaml.YAMLError as exc:
        return f"the edited entry does not parse ({yaml_error_summary(exc)})"
    if len(new_alone) != len(old_alone):
        return "the edited entry has a different structure"
    return _compare(sigs[first:last], new_alone[3:-3], index - first, new_image)


def _verify(
    text: str,
    new: str,
    pure: bool,
    index: int,
    span: tuple[int, int],
    rendered: str,
    new_image: str,
    *,
    entry_shortcut: bool = True,
) -> str | None:
    """None when `new` differs from `text` exactly as intended, else the reason it does not.
    ``entry_shortcut``: the text is a master config (re-parse only the edited top-level entry)."""
    start, end = span
    # One physical line changes: the old span lies on one line (checked when locating it) and
    # the replacement holds no line break; every byte outside the span is the old text's.
    if any(b in rendered or b in text[start:end] for b in _LINE_BREAKS):
        return "the edit would change more than one line"
    if new[:start] != text[:start] or new[start + len(rendered) :] != text[end:]:
        return "the edit touched bytes outside the image value"
    if entry_shortcut:
        local = _verify_entry(text, new, pure, index, len(rendered) - (end - start), new_image)
        if local is not False:
            return local if isinstance(local, str) else None
    return _verify_full(new, _signatures(text, pure), index, new_image)


def validate_image(new_image: str) -> str:
    if not isinstance(new_image, str) or not _IMAGE_RE.match(new_image):
        raise InvalidImageError(
            f"'{new_image}' is not an image reference; use one token like repo/name:tag, "
            "repo@sha256:<hex> or enroot's registry#repo/name:tag"
        )
    if "#" in new_image and not _ENROOT_RE.match(new_image):
        raise InvalidImageError(
            f"'{new_image}' has a '#' but is not an enroot reference; write it as "
            "registry#repo/path:tag with a registry host before a single '#', "
            "e.g. nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc2"
        )
    return new_image


def current_image(text: str, key: str) -> str:
    """The key's image pin as written (raises like set_image for unknown keys / no image)."""
    events = _events(text)
    index = _locate_image(text, key)
    value = events[index]
    assert isinstance(value, ScalarEvent)
    return str(value.value)


def set_image(text: str, key: str, new_image: str) -> str:
    """Return `text` with `key`'s `image:` value replaced by `new_image`, changing one line only.

    Setting the image it already has returns `text` unchanged. Raises UnknownKeyError,
    NoImageError, InvalidYamlError, InvalidImageError or EditError (all RecipeError) with a
    one-line reason; never returns an edit that failed its verification.
    """
    validate_image(new_image)
    return replace_scalar(
        text, lambda pure: _locate_image(text, key, pure=pure), new_image, f"config key '{key}'"
    )


def replace_scalar(
    text: str, locate: Callable[[bool], int], new_value: str, what: str, *, master: bool = True
) -> str:
    """``text`` with the one-line string scalar that ``locate(pure)`` finds (its index in
    ``_events(text, pure)``) replaced by ``new_value``, every other byte kept, the result verified
    (one line differs; re-parsed, only that value changed). ``master``: the text is a master
    config (the edited entry alone is re-parsed when that is safe). ``what`` names the value in
    errors."""
    events = _events(text)
    pure = False
    index = locate(False)
    ev = events[index]
    assert isinstance(ev, ScalarEvent)
    if not _span_ok(text, ev):
        # The C parser's marks did not line up with this text; the pure-Python parser's do.
        pure = True
        events = _events(text, pure=True)
        index = locate(True)
        ev = events[index]
        assert isinstance(ev, ScalarEvent)
        if not _span_ok(text, ev):
            raise EditError(f"{what}: could not find the exact text of the value; edit by hand")
    if ev.value == new_value:
        return text
    start, end = _start(ev).index, _end(ev).index
    reason = "no safe spelling"
    for rendered in _renderings(new_value, ev.style):
        candidate = text[:start] + rendered + text[end:]
        problem = _verify(
            text, candidate, pure, index, (start, end), rendered, new_value, entry_shortcut=master
        )
        if problem is None:
            return candidate
        reason = problem
    raise EditError(f"{what}: refusing the image edit because {reason}; edit by hand")
