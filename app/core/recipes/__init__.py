"""Benchmark-repo file logic: master configs, sweep planning, the image pin edit, the changelog.

Pure functions over file text and parsed data; no I/O. See the module docstrings for how each
rule was checked against the benchmark repo (SemiAnalysisAI/InferenceX).
"""

from app.core.recipes.changelog import (
    NO_FLAGS,
    PENDING_PR_LINK,
    SCENARIO_TYPES,
    EntryFlags,
    append_changelog,
    changelog_description_for_bump,
    render_entry,
    replace_pending_link,
    separator_for,
    yaml_double_quoted,
)
from app.core.recipes.errors import (
    AmbiguousKeyError,
    ChangelogError,
    EditError,
    EmptyPlanError,
    InvalidImageError,
    InvalidRecipeError,
    InvalidYamlError,
    NoImageError,
    RecipeError,
    UnknownKeyError,
    UnsupportedScenarioError,
)
from app.core.recipes.expand import conc_values, expand_points
from app.core.recipes.identity import recipe_fingerprint, sibling_key
from app.core.recipes.locate import (
    MASTER_CONFIG_DIRS,
    MASTER_CONFIG_GLOBS,
    KeyLocation,
    is_archived_path,
    is_master_config_path,
    locate_key,
)
from app.core.recipes.master import get_entry, keys_changed, parse_master, plannable_keys
from app.core.recipes.pin import current_image, set_image, validate_image
from app.core.recipes.points import Point
from app.core.recipes.runners import runner_capacity, runner_hardware
from app.core.recipes.scripts import keys_for_paths, script_candidates
from app.core.seqlen import seq_name

__all__ = [
    "MASTER_CONFIG_DIRS",
    "MASTER_CONFIG_GLOBS",
    "NO_FLAGS",
    "PENDING_PR_LINK",
    "SCENARIO_TYPES",
    "AmbiguousKeyError",
    "ChangelogError",
    "EditError",
    "EmptyPlanError",
    "EntryFlags",
    "InvalidImageError",
    "InvalidRecipeError",
    "InvalidYamlError",
    "KeyLocation",
    "NoImageError",
    "Point",
    "RecipeError",
    "UnknownKeyError",
    "UnsupportedScenarioError",
    "append_changelog",
    "changelog_description_for_bump",
    "conc_values",
    "current_image",
    "expand_points",
    "get_entry",
    "is_archived_path",
    "is_master_config_path",
    "keys_changed",
    "keys_for_paths",
    "locate_key",
    "parse_master",
    "plannable_keys",
    "recipe_fingerprint",
    "render_entry",
    "replace_pending_link",
    "runner_capacity",
    "runner_hardware",
    "script_candidates",
    "separator_for",
    "seq_name",
    "set_image",
    "sibling_key",
    "validate_image",
    "yaml_double_quoted",
]
