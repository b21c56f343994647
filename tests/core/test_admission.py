"""Who may create a watch and which image it may track (app.core.admission), as tables."""

from __future__ import annotations

import pytest

from app.core.admission import (
    AWAITING_LINE,
    approval_holds,
    body_author_of,
    bump_image_allowed,
    image_admission,
    watch_admission,
)

VLLM = "vllm/vllm-openai-rocm"
EVIL = "ghcr.io/attacker/evil-vllm"


@pytest.mark.parametrize(
    ("role", "admitted_by", "verdict", "applies", "by"),
    [
        ("admin", None, "admit", True, "author"),
        ("maintain", None, "admit", True, "author"),
        ("write", None, "admit", True, "author"),
        ("write", "bob", "admit", True, "author"),  # a writer's edit counts, even after an approval
        ("triage", None, "await", True, None),  # the lines are kept to show, nothing is polled
        ("read", None, "await", True, None),
        ("none", None, "await", True, None),
        ("read", "bob", "keep", False, "bob"),  # a non-writer's edit does not change an approved watch
        ("triage", "config", "keep", False, "config"),
    ],
)
def test_watch_admission(
    role: str, admitted_by: str | None, verdict: str, applies: bool, by: str | None
) -> None:
    out = watch_admission(body_author="author", author_role=role, admitted_by=admitted_by)
    assert (out.verdict, out.apply_body, out.admitted_by) == (verdict, applies, by)
    assert (AWAITING_LINE in out.why) is (verdict == "await")
    assert "@" not in out.why  # nobody is pinged by the status line
    assert "\n" not in out.why  # one line


@pytest.mark.parametrize(
    ("action", "sender", "changed", "author"),
    [
        ("opened", "someone", True, "pr-author"),
        ("reopened", "maint", True, "pr-author"),
        ("edited", "maint", True, "maint"),  # the sender wrote the new body
        ("edited", "maint", False, "pr-author"),  # a title edit: the body is still the author's
        ("edited", None, True, "pr-author"),
        ("synchronize", "pusher", True, "pr-author"),  # a push does not write the body
    ],
)
def test_body_author(action: str, sender: str | None, changed: bool, author: str) -> None:
    assert body_author_of(action, pr_author="pr-author", sender=sender, body_changed=changed) == author


@pytest.mark.parametrize(
    ("head", "default", "configured", "tracked", "says"),
    [
        (VLLM, VLLM, [], VLLM, "pins `vllm/vllm-openai-rocm` on the default branch"),
        (EVIL, VLLM, [], None, f"from `{VLLM}` to `{EVIL}`"),  # the attack
        ("ghcr.io/vllm/vllm-openai-rocm", VLLM, [], None, "changes its image repository"),  # host only
        ("127.0.0.1:5000/vllm/vllm-openai-rocm", VLLM, [], None, "changes its image repository"),
        (EVIL, None, [], None, "not pinned on the default branch"),  # a new key
        ("rocm/vllm-dev", None, ["rocm/vllm-dev"], "rocm/vllm-dev", "listed under `images:`"),
        ("rocm/vllm-dev", VLLM, ["rocm/vllm-dev"], "rocm/vllm-dev", "listed under `images:`"),
        (EVIL, VLLM, ["rocm/vllm-dev"], None, "changes its image repository"),
    ],
)
def test_image_admission(
    head: str, default: str | None, configured: list[str], tracked: str | None, says: str
) -> None:
    out = image_admission(key="k", head_repo=head, default_repo=default, configured=configured)
    assert out.image_repo == tracked and out.ok is (tracked is not None)
    assert says in out.why


@pytest.mark.parametrize(
    ("image_repo", "default", "configured", "ok"),
    [
        (VLLM, VLLM, [], True),
        ("rocm/vllm-dev", VLLM, ["rocm/vllm-dev"], True),
        (EVIL, VLLM, [], False),
        (EVIL, None, [], False),
        (VLLM, None, [], False),  # the key is gone from the default branch: nothing to trust
    ],
)
def test_bump_write_checks_the_image_again(
    image_repo: str, default: str | None, configured: list[str], ok: bool
) -> None:
    why = bump_image_allowed(image_repo, default_repo=default, configured=configured)
    assert (why is None) is ok
    if not ok:
        assert why is not None and image_repo in why


def test_an_image_name_from_a_pr_is_echoed_inert() -> None:
    hostile = "evil.test/x`y` @team ![i](http://t/p.png)"
    why = image_admission(key="k", head_repo=hostile, default_repo=VLLM, configured=[]).why
    assert "@team" not in why and "``" in why  # a longer fence around the backtick, the mention split


@pytest.mark.parametrize(
    ("approved", "head", "holds"),
    [
        (None, "a" * 40, True),  # admitted by a writer's own lines: no head to bind
        ("a" * 40, "a" * 40, True),
        ("a" * 40, "A" * 40, True),
        ("a" * 40, "b" * 40, False),  # a push after the approval
        ("a" * 40, "", False),  # the head cannot be read: not the approved one
    ],
)
def test_an_approval_stands_for_its_head(approved: str | None, head: str, holds: bool) -> None:
    assert approval_holds(approved_sha=approved, head_sha=head) is holds
