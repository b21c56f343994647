"""Short-SHA nightly tags resolve to full upstream commits before anything is compared (pure)."""

from __future__ import annotations

from app.adapters.registry import TagPattern
from app.core.tagcommits import is_full_sha, needs_resolution, resolve_tag_commits

FULL = "75c2eef" + "0" * 33
PATTERN = TagPattern(r"nightly-(?:dev-arm64-cu13\.0\.1-)?(?P<sha>[0-9a-f]{7,40})")


def test_the_pattern_reads_both_real_spellings() -> None:
    assert PATTERN.commit_of("nightly-dev-arm64-cu13.0.1-75c2eef") == "75c2eef"  # nvidia-master at HEAD
    assert (
        PATTERN.commit_of("nightly-69715823df89b11ee684b84066390cbb9092d5c1")
        == "69715823df89b11ee684b84066390cbb9092d5c1"
    )
    assert PATTERN.commit_of("latest") is None


def test_short_shas_are_resolved_and_unresolvable_tags_left_out() -> None:
    asked: list[str] = []

    def resolve(tag: str, short: str) -> str | None:
        asked.append(short)
        return {"75c2eef": FULL, "abcdef1": "ffff" + "0" * 36}.get(short)

    pairs = [
        ("nightly-" + "1" * 40, "1" * 40),  # already full: no call
        ("nightly-dev-arm64-cu13.0.1-75c2eef", "75c2eef"),
        ("nightly-dev-arm64-cu13.0.1-abcdef1", "abcdef1"),  # resolver answered another commit
        ("nightly-dev-arm64-cu13.0.1-0000000", "0000000"),  # unknown upstream
    ]
    assert resolve_tag_commits(pairs, resolve) == [("nightly-" + "1" * 40, "1" * 40), (pairs[1][0], FULL)]
    assert asked == ["75c2eef", "abcdef1", "0000000"]
    assert is_full_sha(FULL) and not is_full_sha("75c2eef")
    assert needs_resolution("75c2eef") and not needs_resolution(FULL) and not needs_resolution("zz")
