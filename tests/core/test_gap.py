"""The gap, its verdicts, interpolation, and ``sweepbot gap`` on the seed's figures."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypedDict

import pytest
import typer
from typer.testing import CliRunner

from app.core.gap import (
    NO_REFERENCE,
    NO_RESULT,
    NOT_ENOUGH,
    compute_gap,
    fmt_pct,
    gap_table,
    interpolate,
    reference_applies,
    tput_gap_at_equal_interactivity,
)
from app.core.references import HERE, choose_reference, load_reference, shipped_reference

SHIPPED = HERE / "atom-minimaxm3-mxfp4-mi355x-tp4-8k1k.yaml"


def _raw_result(conc: int, mean_tpot_ms: float) -> dict[str, object]:
    # The benchmark_serving raw form, as ATOM's/InferenceX's fork writes it (typo key included).
    return {
        "date": "20260701-000000",
        "backend": "vllm",
        "model_id": "amd/MiniMax-M3-MXFP4",
        "best_of": 1,
        "num_prompts": 10 * conc,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": conc,
        "duration": 600.0,
        "completed": 10 * conc,
        "total_input_tokens": 7372 * 10 * conc,
        "total_output_tokens": 921 * 10 * conc,
        "request_throughput": 0.5,
        "request_goodput:": None,
        "output_throughput": 1800.0,
        "total_token_throughput": 16000.0,
        "mean_ttft_ms": 500.0,
        "median_ttft_ms": 420.0,
        "std_ttft_ms": 100.0,
        "p99_ttft_ms": 4400.0,
        "mean_tpot_ms": mean_tpot_ms,
        "median_tpot_ms": mean_tpot_ms * 0.99,
        "std_tpot_ms": 0.5,
        "p99_tpot_ms": mean_tpot_ms * 1.15,
        "mean_itl_ms": mean_tpot_ms,
        "median_itl_ms": mean_tpot_ms,
        "std_itl_ms": 3.0,
        "p99_itl_ms": mean_tpot_ms * 2.4,
    }


@pytest.fixture
def seed_results(tmp_path: Path) -> Path:
    d = tmp_path / "results"
    d.mkdir()
    for conc, tpot in ((32, 17.21), (64, 25.13)):
        (d / f"minimaxm3_8k1k_fp4_vllm_tp4_conc{conc}.json").write_text(json.dumps(_raw_result(conc, tpot)))
    return d


def _cli() -> typer.Typer:
    from app.cli.report import gap_command

    app = typer.Typer()
    app.command("gap")(gap_command)
    app.command("noop")(lambda: None)  # two commands, so "gap" stays a subcommand
    return app


def _table_rows(output: str) -> dict[int, list[str]]:
    rows: dict[int, list[str]] = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0].isdigit() and len(cells) == 5:
            rows[int(cells[0])] = cells
    return rows


def test_gap_cli_on_seed_figures_against_shipped_atom_table(seed_results: Path) -> None:
    result = CliRunner().invoke(_cli(), ["gap", "--results", str(seed_results), "--reference", str(SHIPPED)])
    assert result.exit_code == 0, result.output
    rows = _table_rows(result.output)
    assert rows[32][1:4] == ["17.21 ms", "16.74 ms", "+2.8%"]
    assert rows[32][4] == "behind"
    # (25.13 - 25.00) / 25.00 = +0.52%: inside the 1% single-run noise band, so matched.
    assert rows[64][1:4] == ["25.13 ms", "25.00 ms", "+0.5%"]
    assert rows[64][4] == "matched"
    for conc in (4, 8, 16):
        assert rows[conc][4] == NO_RESULT
    assert "github.com/ROCm/ATOM" in result.output and "Caveat" in result.output


def test_gap_cli_with_other_metric_and_bad_inputs(seed_results: Path, tmp_path: Path) -> None:
    ok = CliRunner().invoke(
        _cli(), ["gap", "--results", str(seed_results), "--reference", str(SHIPPED), "--metric", "p99_tpot"]
    )
    assert ok.exit_code == 0, ok.output
    assert _table_rows(ok.output)[32][2] == "19.12 ms"
    (seed_results / "broken.json").write_text('{"max_concurrency": 8, "mean_tpot_ms": "fast"}')
    bad = CliRunner().invoke(_cli(), ["gap", "--results", str(seed_results), "--reference", str(SHIPPED)])
    assert bad.exit_code == 2
    assert "broken.json" in bad.output and "mean_tpot_ms" in bad.output


def test_shipped_reference_has_provenance() -> None:
    ref = shipped_reference("atom-minimaxm3-mxfp4-mi355x-tp4-8k1k")
    assert ref is not None
    assert ref.commit == "d72060af8ef86b39939b4899a09876d09606fbd5"
    assert ref.source and ref.source.startswith("https://github.com/ROCm/ATOM/blob/d72060af")
    assert ref.caveat and "re-measured" in ref.caveat
    assert ref.metric == "mean_tpot_ms" and sorted(ref.points) == [4, 8, 16, 32, 64]
    assert ref.points[64]["tput_per_gpu"] == pytest.approx(21928.25 / 4)


def test_shipped_table_matches_the_published_fixture(fixtures_dir: Path) -> None:
    fixture = load_reference(fixtures_dir / "references" / "atom-minimaxm3-mxfp4-mi355x-tp4-8k1k.yaml")
    shipped = load_reference(SHIPPED)
    assert fixture.points == shipped.points


def test_verdicts_respect_direction_and_noise() -> None:
    rows = compute_gap(
        {8: [9.0], 16: [11.0], 32: [16.8, 16.2, 17.4], 128: [40.0]}, {8: 8.78, 16: 11.73, 32: 16.74, 4: 7.5}
    )
    by = {r.conc: r for r in rows}
    assert by[8].verdict == "behind" and by[16].verdict == "ahead"  # lower TPOT is better
    matched = by[32]
    assert matched.verdict == "matched" and matched.runs == 3
    assert matched.tolerance is not None and matched.tolerance > 0.05
    assert by[128].verdict == NO_REFERENCE and by[4].verdict == NO_RESULT
    tput = compute_gap({8: [110.0]}, {8: 100.0}, metric="tput_per_gpu")
    assert tput[0].verdict == "ahead"  # more throughput is better
    tight = compute_gap({32: [17.21, 17.20, 17.22]}, {32: 16.74})
    assert tight[0].verdict == "behind"
    assert fmt_pct(0.0281) == "+2.8%" and fmt_pct(-0.004) == "-0.4%" and fmt_pct(None) == "—"


def test_interpolation_never_extrapolates() -> None:
    curve = [(100.0, 1000.0), (50.0, 3000.0), (25.0, 5000.0)]
    assert interpolate(curve, 75.0) == pytest.approx(2000.0)
    assert interpolate(curve, 100.0) == pytest.approx(1000.0)
    assert interpolate(curve, 120.0) is None and interpolate(curve, 10.0) is None
    assert interpolate([(50.0, 1.0)], 60.0) is None
    rows = tput_gap_at_equal_interactivity(curve, {4: (133.3, 1100.0), 32: (75.0, 2200.0)})
    assert rows[0].note == NOT_ENOUGH and rows[0].gap is None
    assert rows[1].recipe == pytest.approx(2000.0) and rows[1].gap == pytest.approx(-200.0 / 2200.0)


# ------------------------------------------------------------------------------------ gap_table


def _run(mean_tpot_ms: float | None, *, interactivity: float | None = None, tput: float | None = None) -> Any:
    """A stored result as gap_table reads it (attributes by result field name)."""
    return SimpleNamespace(
        mean_tpot_ms=mean_tpot_ms, p99_tpot_ms=None, interactivity=interactivity, tput_per_gpu=tput
    )


def _atom() -> Any:
    ref = shipped_reference("atom-minimaxm3-mxfp4-mi355x-tp4-8k1k")
    assert ref is not None
    return ref


def test_gap_table_lists_the_planned_concs_and_the_reference_once_a_run_has_a_value() -> None:
    ref = _atom()
    runs = [(32, _run(17.21, interactivity=58.1, tput=4000.0)), (32, _run(17.25)), (64, _run(None))]
    table = gap_table(runs, ref, tp=4, seq="8k1k", planned=[32, 64])
    assert table.applies and table.metric == "mean_tpot_ms"
    assert [r.conc for r in table.rows] == [4, 8, 16, 32, 64]  # the reference's concs joined in
    by = {r.conc: r for r in table.rows}
    assert by[32].runs == 2 and by[32].recipe == pytest.approx(17.23) and by[32].verdict == "behind"
    assert by[64].verdict == NO_RESULT and by[4].verdict == NO_RESULT  # a run without the metric
    assert table.recipe == {32: [17.21, 17.25]} and table.curve == [(58.1, 4000.0)]
    waiting = gap_table([(64, _run(None))], ref, tp=4, seq="8k1k", planned=[32, 64])
    assert [r.conc for r in waiting.rows] == [32, 64]  # nothing measured yet: only the sweep's points
    everything = gap_table([(128, _run(40.0))], ref, tp=4)  # no plan: every conc of either side
    assert [r.conc for r in everything.rows] == [4, 8, 16, 32, 64, 128]
    assert everything.rows[-1].verdict == NO_REFERENCE


def test_a_reference_for_another_tp_or_sequence_length_gives_no_gap() -> None:
    ref = _atom()  # tp 4, 8192/1024
    assert reference_applies(ref, tp=4, seq="8k1k")
    # One name per shape (app/core/seqlen.py): 8192/1024 is "8k1k" everywhere, never "8192_1024".
    assert not reference_applies(ref, tp=4, seq="8192_1024")
    assert reference_applies(ref, tp=4, seq=None)
    assert not reference_applies(ref, tp=8, seq="8k1k") and not reference_applies(ref, tp=4, seq="1k1k")
    assert not reference_applies(None, tp=4, seq="8k1k")
    for tp, seq in ((8, "8k1k"), (4, "1k1k")):
        table = gap_table([(32, _run(17.21))], ref, tp=tp, seq=seq, planned=[32])
        assert not table.applies and table.reference == {}
        assert [(r.conc, r.verdict) for r in table.rows] == [(32, NO_REFERENCE)]
    bare = gap_table([(32, _run(17.21))], None, tp=4, planned=[32])
    assert bare.metric == "mean_tpot_ms" and not bare.applies and bare.rows[0].verdict == NO_REFERENCE


def test_gap_table_compares_another_metric_when_asked() -> None:
    row = SimpleNamespace(mean_tpot_ms=17.0, p99_tpot_ms=19.12, interactivity=None, tput_per_gpu=None)
    table = gap_table([(32, row)], _atom(), tp=4, metric="p99_tpot_ms")
    by = {r.conc: r for r in table.rows}
    assert table.metric == "p99_tpot_ms" and by[32].reference == 19.12 and by[32].verdict == "matched"


# ------------------------------------------------------------------------------------ choosing


class FakeSiblings:
    """``SiblingRows`` from lists: what the store would read for the sibling key."""

    def __init__(self, results: Iterable[Any] = (), evals: Iterable[Any] = ()) -> None:
        self._results, self._evals = list(results), list(evals)
        self.asked: list[tuple[str, str]] = []

    def results(self, config_key: str, *, isl: int | None, osl: int | None, tp: int | None) -> list[Any]:
        self.asked.append(("results", config_key))
        return [r for r in self._results if (isl, osl, tp) == (r.isl, r.osl, r.tp)]

    def evals(self, config_key: str, *, tp: int | None) -> list[Any]:
        self.asked.append(("evals", config_key))
        return [e for e in self._evals if tp is None or e.tp == tp]


def _sibling_row(id: int, conc: int, tpot: float, tp: int = 4) -> Any:
    fields = dict.fromkeys(
        ("median_tpot_ms", "p99_tpot_ms", "mean_ttft_ms", "p99_ttft_ms", "mean_itl_ms", "mean_e2el_ms")
    )
    return SimpleNamespace(
        id=id, conc=conc, tp=tp, isl=8192, osl=1024, mean_tpot_ms=tpot, output_tput=None, total_tput=None,
        tput_per_gpu=None, interactivity=1000.0 / tpot, model="m", runner="mi355x", precision="fp4",
        run_url=f"https://gh/run/{id}", **fields,
    )  # fmt: skip


def _eval_row(id: int, score: float, tp: int = 4) -> Any:
    return SimpleNamespace(
        id=id, task="gsm8k", filter="flexible-extract", score=score, stderr=0.02, n=100, num_fewshot=5,
        metric="exact_match", run_url=None, tp=tp,
    )  # fmt: skip


class PointKey(TypedDict):
    """The point a reference is chosen for (choose_reference's keyword arguments but the key)."""

    model: str
    hardware: str
    tp: int
    isl: int
    osl: int


KEY = PointKey(model="m", hardware="mi355x", tp=4, isl=8192, osl=1024)


def test_the_sibling_reference_is_the_newest_sibling_run_per_conc() -> None:
    rows = FakeSiblings(
        results=[_sibling_row(1, 32, 18.0), _sibling_row(2, 32, 16.9), _sibling_row(3, 64, 25.5, tp=8)],
        evals=[_eval_row(1, 0.90), _eval_row(2, 0.93)],
    )
    ref = choose_reference(rows, config_key="x-fp4-mi355x-vllm", **KEY)  # no shipped table for model "m"
    assert ref is not None and ref.name == "x-fp4-mi355x-atom" and ref.engine == "atom"
    assert ref.points[32]["mean_tpot_ms"] == 16.9 and 64 not in ref.points  # other tp filtered
    assert ref.runs == {32: ["https://gh/run/2"]}
    assert [(a.task, a.score) for a in ref.accuracy] == [("gsm8k", 0.93)]
    assert ref.accuracy_source == "latest eval results of x-fp4-mi355x-atom"
    only_evals = choose_reference(
        FakeSiblings(evals=[_eval_row(1, 0.9)]), config_key="x-fp4-mi355x-vllm", **KEY
    )
    assert only_evals is not None and only_evals.points == {} and only_evals.accuracy[0].score == 0.9
    assert choose_reference(FakeSiblings(), config_key="x-fp4-mi355x-vllm", **KEY) is None
    assert choose_reference(None, config_key="x-fp4-mi355x-vllm", **KEY) is None  # nothing to ask


def test_configuration_decides_before_the_sibling_is_asked() -> None:
    rows = FakeSiblings(results=[_sibling_row(1, 32, 18.0)])
    atom = "atom-minimaxm3-mxfp4-mi355x-tp4-8k1k"
    assert choose_reference(rows, config_key="k", **KEY, configured={"k": "none"}) is None
    chosen = choose_reference(rows, config_key="k", **KEY, configured={"k": atom})
    assert chosen is not None and chosen.name == atom and rows.asked == []
    with pytest.raises(ValueError, match="unknown table 'nope'"):
        choose_reference(rows, config_key="k", **KEY, configured={"k": "nope"})
    # The shipped table matching the point applies; it publishes accuracy, so no sibling is read.
    shipped = choose_reference(
        rows, config_key="minimaxm3-fp4-mi355x-vllm", model="amd/MiniMax-M3-MXFP4", hardware="mi355x",
        tp=4, isl=8192, osl=1024,
    )  # fmt: skip
    assert shipped is not None and shipped.name == atom and rows.asked == []
    sibling = choose_reference(rows, config_key="k-vllm", **KEY, configured={"k-vllm": "sibling"})
    assert sibling is not None and sibling.name == "k-atom" and ("results", "k-atom") in rows.asked


def _zip(path: Path, members: dict[str, object]) -> None:
    import zipfile

    with zipfile.ZipFile(path, "w") as zf:
        for name, body in members.items():
            zf.writestr(name, json.dumps(body))


def test_gap_cli_reads_only_the_result_artifact_of_each_job(tmp_path: Path) -> None:
    # What one real job uploads (benchmark-tmpl.yml): bmk_<RF> holds agg_<RF>.json; power_audit_<RF>
    # holds the raw <RF>.json and the same agg_<RF>.json again; logs and metrics beside them.
    d = tmp_path / "downloads"
    d.mkdir()
    for conc, tpot in ((32, 17.21), (64, 25.13)):
        rf = (
            "minimaxm3_8k1k_fp4_vllm_tp4-pp1-dcp1-pcp1-ep1-dpafalse_disagg-false_spec-none"
            f"_conc{conc}_mi355x-amds_03"
        )
        raw = _raw_result(conc, tpot)
        _zip(d / f"bmk_{rf}.zip", {f"agg_{rf}.json": raw})
        _zip(d / f"power_audit_{rf}.zip", {f"{rf}.json": raw, f"agg_{rf}.json": raw})
        _zip(
            d / f"gpu_metrics_{rf}.zip", {"gpu_metrics.json": {"max_concurrency": conc, "mean_tpot_ms": 99.0}}
        )
    result = CliRunner().invoke(_cli(), ["gap", "--results", str(d), "--reference", str(SHIPPED)])
    assert result.exit_code == 0, result.output
    rows = _table_rows(result.output)
    assert rows[32][1:4] == ["17.21 ms", "16.74 ms", "+2.8%"]  # one run, not three copies of it
    assert rows[32][4] == "behind" and rows[64][4] == "matched"
    assert "n=3" not in result.output and "n=2" not in result.output
