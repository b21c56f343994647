"""The one sequence-length naming rule, and that every place that names a shape uses it."""

from __future__ import annotations

from app.core import seqlen
from app.core.commands import parse_commands
from app.core.recipes import expand, points
from app.core.sweepspec import SweepError, _check_values
from app.web.dashboard.data.results import shape_name


def test_named_shapes_and_the_exp_name_rule() -> None:
    assert seqlen.seq_name(1024, 1024) == "1k1k"
    assert seqlen.seq_name(8192, 1024) == "8k1k"
    # Every other shape is <isl>_<osl>, as the benchmark repo's exp-name has it (not "1k8k").
    assert seqlen.seq_name(1024, 8192) == "1024_8192"
    assert seqlen.seq_name(2048, 2048) == "2048_2048"


def test_recipes_and_dashboard_name_shapes_by_the_same_rule() -> None:
    assert points.seq_name is seqlen.seq_name and expand.seq_name is seqlen.seq_name
    for isl, osl in ((1024, 1024), (8192, 1024), (1024, 8192), (1000, 500)):
        assert shape_name(isl, osl) == seqlen.seq_name(isl, osl)
    assert shape_name(None, 1024) is None  # agentic-coding results have no shape


SEQ_CASES = [
    # value, the shape it names (None: no shape), accepted as a seq filter
    ("1k1k", "1k1k", True),
    ("8k1k", "8k1k", True),
    ("1024_1024", "1k1k", True),  # the repo's spelling of the same shape
    ("8192_1024", "8k1k", True),
    ("2048_512", "2048_512", True),
    ("999999_1", "999999_1", True),
    ("agentic", None, True),  # agentic-coding points: no isl/osl, but a real seq to select by
    ("2k1k", None, False),  # a name the repo never makes: it would select nothing
    ("1k8k", None, False),
    ("1000000_1", None, False),  # seven digits: capped
    ("1024_", None, False),
    ("_1024", None, False),
    ("1024x1024", None, False),
    ("1K1K", None, False),
    (" 1k1k", None, False),
    ("", None, False),
]


def test_seq_shape_and_filter_table() -> None:
    for value, shape, accepted in SEQ_CASES:
        assert seqlen.seq_shape(value) == shape, value
        assert seqlen.is_seq_filter(value) is accepted, value


def test_command_grammar_and_dispatch_checks_accept_the_same_seqs() -> None:
    """One rule: `/sweep seq=...`, the sweep request check and the dispatch check agree, so a value
    the grammar accepts is never refused later (and one it refuses would never have matched)."""
    for value, _shape, accepted in SEQ_CASES:
        if not value or value != value.strip():
            continue  # not a single word in a comment
        (command,) = parse_commands(f"/sweep seq={value}")
        assert (command.error is None) is accepted, (value, command.error)
        try:
            _check_values(key="k", seq=value, head_sha="a" * 40, head_ref="h", base_ref="main", run_name="r")
            dispatchable = True
        except SweepError as exc:
            dispatchable = "seq-len" not in str(exc)
        assert dispatchable is accepted, value
