"""The server-side SVG charts: points, accessibility cues, axes, and their failure modes."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from app.web.dashboard.charts import Axis, Series, fmt, line_chart, nice_ticks, short_image

NS = {"s": "http://www.w3.org/2000/svg"}


def _points(svg: str) -> dict[str, list[tuple[float, float]]]:
    root = ET.fromstring(svg)
    out: dict[str, list[tuple[float, float]]] = {}
    for group in root.iterfind(".//s:g[@class='series']", NS):
        out[group.get("data-series", "")] = [
            (float(p.get("data-x", "nan")), float(p.get("data-y", "nan")))
            for p in group.iterfind("s:g[@class='pt']", NS)
        ]
    return out


def test_chart_has_every_point_in_order_with_titles() -> None:
    recipe = Series("recipe", [(64, 24.1), (1, 6.2), (32, 17.2), (4, 7.6)])
    ref = Series("ATOM ref", [(4, 7.5), (32, 16.74), (64, 25.0)])
    svg = line_chart([recipe, ref], title="TPOT", x=Axis("concurrency", log2=True), y=Axis("ms", zero=True))
    pts = _points(svg)
    assert pts == {
        "recipe": [(1, 6.2), (4, 7.6), (32, 17.2), (64, 24.1)],
        "ATOM ref": [(4, 7.5), (32, 16.74), (64, 25.0)],
    }
    assert "<title>ATOM ref: concurrency 32, ms 16.74</title>" in svg
    assert 'role="img"' in svg and "<desc" in svg


def _child(element: ET.Element, path: str) -> ET.Element:
    found = element.find(path, NS)
    assert found is not None, f"no {path} under {element.tag}"
    return found


def test_series_differ_by_marker_and_dash_not_only_colour() -> None:
    svg = line_chart(
        [Series("a", [(1, 1), (2, 2)]), Series("b", [(1, 2), (2, 3)])], title="t", x=Axis("x"), y=Axis("y")
    )
    root = ET.fromstring(svg)
    groups = root.findall(".//s:g[@class='series']", NS)
    dashes = [_child(g, "s:path").get("stroke-dasharray") for g in groups]
    assert dashes[0] is None and dashes[1]  # solid vs dashed
    first_marker = [child.tag for child in _child(groups[0], "s:g[@class='pt']")]
    second_marker = [child.tag for child in _child(groups[1], "s:g[@class='pt']")]
    assert first_marker[0] != second_marker[0]  # circle vs square
    labels = [t.text for t in root.iterfind(".//s:text[@class='direct-label']", NS)]
    assert labels == ["a", "b"]  # each line is named where it ends


def test_log2_axis_ticks_are_the_concurrencies_and_positions_double_evenly() -> None:
    svg = line_chart(
        [Series("r", [(1, 5), (2, 6), (4, 7), (8, 8)])], title="t", x=Axis("conc", log2=True), y=Axis("ms")
    )
    xs = [float(m) for m in re.findall(r"class=\"pt\"[^>]*><circle cx=\"([\d.]+)\"", svg)]
    gaps = {round(b - a, 1) for a, b in zip(xs, xs[1:], strict=False)}
    assert len(gaps) == 1  # equal spacing per doubling
    for tick in ("1", "2", "4", "8"):
        assert f">{tick}</text>" in svg


def test_text_is_escaped_and_empty_charts_say_so() -> None:
    svg = line_chart([Series("<b>&", [(1, 1)])], title="a<b", x=Axis("x"), y=Axis("y"))
    ET.fromstring(svg)  # well-formed
    assert "<b>" not in svg and "&lt;b&gt;&amp;" in svg
    empty = line_chart([Series("r", [])], title="TPOT", x=Axis("x", log2=True), y=Axis("y"))
    assert "no data yet" in empty and 'class="pt"' not in empty


def test_bad_inputs_are_refused_clearly() -> None:
    with pytest.raises(ValueError, match="log2 x axis needs positive"):
        line_chart([Series("r", [(0, 1), (2, 2)])], title="t", x=Axis("x", log2=True), y=Axis("y"))
    with pytest.raises(ValueError, match="finite"):
        nice_ticks(float("nan"), 1.0)


def test_helpers() -> None:
    assert nice_ticks(0, 17.3) == [0, 5, 10, 15, 20]
    assert nice_ticks(3, 3)[0] < 3 < nice_ticks(3, 3)[-1]
    assert fmt(17.214) == "17.21" and fmt(512) == "512" and fmt(1234.5) == "1234.5" and fmt(0) == "0"
    assert short_image("vllm/vllm-openai-rocm:nightly-" + "ab" * 20) == "nightly-ababab" + "a"
    assert short_image("rocm/atom:v1.2") == "v1.2"
