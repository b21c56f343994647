"""The recipe YAML loader refuses alias bombs and self-references (a PR branch's file is untrusted)."""

from __future__ import annotations

import pytest
import yaml

from app.core.recipes import parse_master
from app.core.recipes.errors import InvalidYamlError
from app.core.recipes.yamlutil import MAX_EXPANDED_VALUES, SafeLoader, alias_problem, load_yaml
from tests.recipe_helpers import fixture_text


def _bomb(levels: int, width: int = 10) -> str:
    lines = [f"a0: &a0 [{', '.join(['x'] * width)}]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def test_a_billion_laughs_master_config_is_refused_with_the_reason() -> None:
    with pytest.raises(InvalidYamlError, match="more than 1,000,000 values once its aliases are expanded"):
        parse_master(_bomb(9))


def test_a_list_inside_itself_is_refused() -> None:
    with pytest.raises(InvalidYamlError, match="refers to the list or mapping it is inside"):
        load_yaml("a: &x [1, *x]\n", "the master config")


def test_the_cap_is_on_the_expansion_not_the_text() -> None:
    # six levels of ten stand for 10^7 scalars (a few hundred bytes): over; four levels, 10^5: under
    assert alias_problem(yaml.load(_bomb(4), Loader=SafeLoader), MAX_EXPANDED_VALUES) is None
    assert alias_problem(yaml.load(_bomb(6), Loader=SafeLoader), MAX_EXPANDED_VALUES) is not None
    # exactly at the boundary: a list of `limit - 1` scalars is `limit` values with itself
    flat = list(range(9))
    assert alias_problem(flat, 10) is None
    assert alias_problem([*flat, 9], 10) is not None


def test_shared_values_that_stay_small_and_the_repos_files_load_unchanged() -> None:
    text = "base: &b {tp: 8, conc: [4, 8]}\nkey1: *b\nkey2: *b\n"
    assert load_yaml(text, "t") == {
        "base": {"tp": 8, "conc": [4, 8]},
        "key1": {"tp": 8, "conc": [4, 8]},
        "key2": {"tp": 8, "conc": [4, 8]},
    }
    for name in ("amd-master.head.yaml", "nvidia-master.tail.head.yaml"):
        text = fixture_text(name)
        value = load_yaml(text, name)
        assert alias_problem(value, MAX_EXPANDED_VALUES) is None and value
