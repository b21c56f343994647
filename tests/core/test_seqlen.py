"""The one sequence-length naming rule, and that every place that names a shape uses it."""

from __future__ import annotations

from app.core import seqlen
from app.core.recipes import master
from app.web.dashboard.data.results import shape_name


def test_named_shapes_and_the_exp_name_rule() -> None:
    assert seqlen.seq_name(1024, 1024) == "1k1k"
    assert seqlen.seq_name(8192, 1024) == "8k1k"
    # Every other shape is <isl>_<osl>, as the benchmark repo's exp-name has it (not "1k8k").
    assert seqlen.seq_name(1024, 8192) == "1024_8192"
    assert seqlen.seq_name(2048, 2048) == "2048_2048"


def test_recipes_and_dashboard_name_shapes_by_the_same_rule() -> None:
    assert master.seq_name is seqlen.seq_name
    for isl, osl in ((1024, 1024), (8192, 1024), (1024, 8192), (1000, 500)):
        assert shape_name(isl, osl) == seqlen.seq_name(isl, osl)
    assert shape_name(None, 1024) is None  # agentic-coding results have no shape
