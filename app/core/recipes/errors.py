"""Exceptions raised by the benchmark-repo file logic.

Every message is one line that says what is wrong and how to fix it, so the CLI can print it
as-is and the bot can quote it in a PR comment.
"""

from __future__ import annotations


class RecipeError(ValueError):
    """Base class: a benchmark-repo file or request cannot be handled as asked."""

    def __init__(self, message: str) -> None:
        # Keep messages on one line: they end up on stderr and in PR comments.
        super().__init__(" ".join(message.split()))


class InvalidYamlError(RecipeError):
    """The text is not valid YAML, or not the document shape the file must have."""


class InvalidRecipeError(RecipeError):
    """A config entry is malformed (missing or mistyped field)."""


class UnknownKeyError(RecipeError):
    """The config key is not in the file."""


class UnsupportedScenarioError(RecipeError):
    """The key is multinode, agentic or otherwise not a single-node fixed-seq-len recipe."""


class EmptyPlanError(RecipeError):
    """The filters asked for points that the key's search space does not contain."""


class NoImageError(RecipeError):
    """The key has no `image:` of its own to edit."""


class InvalidImageError(RecipeError):
    """The new image reference is not a single-token image name."""


class EditError(RecipeError):
    """The in-place edit cannot be done safely (or failed its own verification)."""


class ChangelogError(RecipeError):
    """The perf-changelog cannot be appended to safely."""


class AmbiguousKeyError(RecipeError):
    """The key is defined in more than one active master config file."""
