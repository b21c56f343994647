"""Benchmark-repo file logic: master configs, sweep planning, the image pin edit, the changelog.

Pure functions over file text and parsed data; no I/O. See the module docstrings for how each
rule was checked against the benchmark repo (SemiAnalysisAI/InferenceX).
"""

from app.recipes.changelog import (
    PENDING_PR_LINK,
    append_changelog,
    changelog_description_for_bump,
    render_entry,
    yaml_double_quoted,
)
from app.recipes.errors import (
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
from app.recipes.locate import (
    MASTER_CONFIG_DIRS,
    MASTER_CONFIG_GLOBS,
    KeyLocation,
    is_archived_path,
    is_master_config_path,
    locate_key,
)
from app.recipes.master import (
    Point,
    conc_values,
    expand_points,
    get_entry,
    keys_changed,
    keys_for_paths,
    parse_master,
    plannable_keys,
    recipe_fingerprint,
    runner_capacity,
    runner_hardware,
    script_candidates,
    seq_name,
    sibling_key,
)
from app.recipes.pin import current_image, set_image, validate_image

__all__ = [
    "MASTER_CONFIG_DIRS",
    "MASTER_CONFIG_GLOBS",
    "PENDING_PR_LINK",
    "AmbiguousKeyError",
    "ChangelogError",
    "EditError",
    "EmptyPlanError",
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
    "runner_capacity",
    "runner_hardware",
    "script_candidates",
    "seq_name",
    "set_image",
    "sibling_key",
    "validate_image",
    "yaml_double_quoted",
]
