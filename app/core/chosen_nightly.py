"""Which nightly to call "chosen", for the dashboard's timeline and ``sweepbot deps status``.

Before a bump, the chosen nightly is the newest one containing every merge commit (what the
bump would pin). Once a bump has happened, the chosen nightly is the one the bump pinned: later
nightlies that also contain everything are shown too, labelled as such, but never as "chosen"
(a bump happens once; they are not what the config runs). Pure: tags in, labels out.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class NightlyLabels:
    chosen: str | None  # the nightly the bump chose (after a bump: the pinned one)
    pinned: str | None  # the tag the config key pins now
    newest_containing: str | None  # after a bump, a newer nightly with every dependency, if any
    bumped: bool

    def describe_newest(self) -> str | None:
        if not self.newest_containing:
            return None
        return (
            f"{self.newest_containing} also contains every dependency; not bumped to "
            "(a bump happens once; /bump or a new dependency allows the next)"
        )


def tag_of(image: str | None) -> str | None:
    """``repo:tag`` -> ``tag`` (None for no image or no tag)."""
    if not image or ":" not in image.rsplit("/", 1)[-1]:
        return None
    return image.rsplit(":", 1)[-1]


def label_nightlies(
    *, pinned_image: str | None, newest_tag: str | None, bumped_image: str | None
) -> NightlyLabels:
    """``newest_tag``: the newest nightly containing every merge commit (the watch's evaluation);
    ``bumped_image``: the image of the bump that happened (committed or already pinned), if any."""
    pinned = tag_of(pinned_image)
    bumped = tag_of(bumped_image)
    if bumped is None:
        return NightlyLabels(chosen=newest_tag, pinned=pinned, newest_containing=None, bumped=False)
    # After a bump the pinned nightly is the chosen one (the bump's, unless someone re-pinned since).
    chosen = pinned or bumped
    newer = newest_tag if newest_tag and newest_tag != chosen else None
    log.debug(
        "nightly_labels", chosen=chosen, newest_containing=newer, reason="bumped: the pin is the choice"
    )
    return NightlyLabels(chosen=chosen, pinned=pinned, newest_containing=newer, bumped=True)
