"""Once a bump happened, the chosen nightly is the pinned one; a newer nightly containing every
dependency is shown beside it, labelled, never as "chosen" (timeline, /api/watches, deps status)."""

from __future__ import annotations

from app.core.chosen_nightly import label_nightlies, tag_of
from tests.browser.seed import IMAGE_REPO, KEY, NEW_IMAGE, SHAS

NEWER = f"nightly-{SHAS[5]}"
PINNED = f"nightly-{SHAS[4]}"


def test_labels_before_and_after_a_bump() -> None:
    before = label_nightlies(pinned_image=f"{IMAGE_REPO}:old", newest_tag="n2", bumped_image=None)
    assert (before.chosen, before.newest_containing, before.bumped) == ("n2", None, False)
    after = label_nightlies(pinned_image=f"{IMAGE_REPO}:n1", newest_tag="n2", bumped_image=f"{IMAGE_REPO}:n1")
    assert (after.chosen, after.pinned, after.newest_containing, after.bumped) == ("n1", "n1", "n2", True)
    assert "not bumped to" in (after.describe_newest() or "")
    same = label_nightlies(pinned_image=f"{IMAGE_REPO}:n1", newest_tag="n1", bumped_image=f"{IMAGE_REPO}:n1")
    assert same.newest_containing is None
    assert tag_of("registry:5000/vllm/x") is None and tag_of("vllm/x:nightly-1") == "nightly-1"


def test_the_status_comment_names_the_pinned_nightly_after_a_bump() -> None:
    from app.flows.tracking.watches import DepView, WatchView, render_status

    def view(pinned: str, chosen: str, bumped: bool, newest: str | None) -> WatchView:
        return WatchView(
            key=KEY,
            deps=[DepView("vllm-project/vllm#47269", "merged", "a" * 40)],
            image_repo=IMAGE_REPO,
            pinned_image=pinned,
            pinned_missing=False,
            chosen_tag=chosen,
            first_tag=None,
            decision=None,
            bumped=bumped,
            newest_containing=newest,
        )

    before = render_status([view(f"{IMAGE_REPO}:old", NEWER, False, None)])
    assert f"nightly chosen: `{IMAGE_REPO}:{NEWER}`, the newest containing every merge commit" in before
    after = render_status([view(NEW_IMAGE, PINNED, True, NEWER)])
    assert f"nightly chosen: `{IMAGE_REPO}:{PINNED}` (the one the bump pinned)" in after
    assert f"newer nightly also containing every merge commit: `{IMAGE_REPO}:{NEWER}` (not bumped to" in after
    assert f"chosen: `{IMAGE_REPO}:{NEWER}`" not in after
