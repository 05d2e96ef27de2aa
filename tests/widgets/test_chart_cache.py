"""The timeline's cache view and the chart's PNG / SVG export, on real sessions imported from the
shared Claude Code and Codex files (engine.sources)."""

from __future__ import annotations

import statistics
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QToolTip

from engine.ingest import import_source
from engine.model.records import CompactionRecord
from engine.model.timeline import TimelineCall
from engine.store.fsutil import read_jsonl_objects
from tests.conftest import SHARED
from widgets.chart_cache import CACHE_COLORS
from widgets.context_chart import ContextChart
from widgets.theme import LIGHT

SESSIONS = SHARED / "data" / "sessions"
CLAUDE = SESSIONS / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
CODEX = SESSIONS / "codex" / "rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl"
SVG = "{http://www.w3.org/2000/svg}"

pytestmark = pytest.mark.skipif(not CLAUDE.exists(), reason="the shared sessions are not on this machine")

def comp(line: dict) -> CompactionRecord:
    """A compaction record from its line (``result`` "summarized" unless given), as the service hands it."""
    return CompactionRecord.from_json({"result": "summarized", **line})


def set_calls(chart, records, compactions=()) -> None:
    """``chart.set_timeline`` with these record lines as the service hands them (typed: TimelineCall)."""
    chart.set_timeline([TimelineCall.from_json(r) for r in records], [comp(c) for c in compactions])



def _events(source: Path, folder: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    import_source(source, session_dir=folder)
    events = read_jsonl_objects(folder / "events.jsonl")
    return [e for e in events if e["type"] == "context"], [e for e in events if e["type"] == "compaction"]


@pytest.fixture(scope="module")
def claude(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return _events(CLAUDE, tmp_path_factory.mktemp("cache") / "cc")


@pytest.fixture(scope="module")
def codex(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return _events(CODEX, tmp_path_factory.mktemp("cache") / "codex")


@pytest.fixture
def chart(qtbot: Any) -> ContextChart:
    c = ContextChart(pal=LIGHT)
    qtbot.addWidget(c)
    c.resize(520, 640)
    c.show()
    qtbot.waitExposed(c)
    return c


def _plot_items(chart: ContextChart) -> list[int]:
    return [id(item) for item in chart._tl_plot.getPlotItem().items]


def test_toggle_shows_cache_segments_equal_to_the_records(chart: ContextChart, qtbot: Any, claude: Any) -> None:
    records, compactions = claude
    set_calls(chart, records, compactions)
    chart.flush()
    items = _plot_items(chart)
    assert chart.cache_available() and chart.cache_button.isEnabled() and not chart.cache_view()
    qtbot.mouseClick(chart.cache_button, Qt.MouseButton.LeftButton)
    assert chart.cache_view()
    assert not any(bar.isVisible() for bar in chart._tl_bars.values())
    for i, rec in enumerate(records):
        read, write, prompt = rec["cache_read_tokens"], rec["cache_write_tokens"], rec["provider_prompt_tokens"]
        seg = chart.cache_segments(i)
        assert seg["cache_read"] == (0, read)
        assert seg["cache_write"] == (read, write)
        assert seg["uncached"] == (read + write, prompt - read - write)
        assert chart.hit_rate_series()[i] == pytest.approx(read / prompt)
    assert "hit rate" in chart.timeline_header_text()
    assert chart._tl_plot.getPlotItem().getAxis("right").isVisible()
    qtbot.mouseClick(chart.cache_button, Qt.MouseButton.LeftButton)
    assert not chart.cache_view() and all(bar.isVisible() for bar in chart._tl_bars.values())
    assert not chart._tl_plot.getPlotItem().getAxis("right").isVisible()
    chart.set_cache_view(True)
    chart.append_call(TimelineCall.from_json(records[-1]))
    chart.flush()
    assert chart.cache_segments(len(records))["cache_read"] == (0, records[-1]["cache_read_tokens"])
    assert _plot_items(chart) == items  # the same plot items throughout: only setOpts / setData


def test_rewrite_markers_where_expected(chart: ContextChart, claude: Any) -> None:
    records, compactions = claude
    writes = [r["cache_write_tokens"] for r in records if r["cache_write_tokens"]]
    median = statistics.median(writes)
    expected = [i for i, r in enumerate(records)
                if r["cache_write_tokens"] > 3 * median and r["cache_write_tokens"] > 0.1 * r["provider_prompt_tokens"]]
    assert expected == [0, 5, 6, 10, 71, 84, 85]
    set_calls(chart, records, compactions)
    assert chart.rewrite_calls() == []  # the region view marks nothing
    chart.set_cache_view(True)
    assert chart.rewrite_calls() == expected
    xs = [x for x, _ in chart.rewrite_marker_positions()]
    assert xs == [i + 1 for i in expected]
    for (_, y), i in zip(chart.rewrite_marker_positions(), expected, strict=True):
        assert y > records[i]["provider_prompt_tokens"]  # above its column
    after = chart.column_tooltip(71)
    assert "Cache re-written: 21,155 tokens written" in after and "first call after a compaction" in after
    assert "Input cost" in after
    assert "first call of the session" in chart.column_tooltip(0)
    assert "re-written" not in chart.column_tooltip(1) and "Cache hit rate: 95.0%" in chart.column_tooltip(1)
    assert "★ 7 re-writes" in chart.timeline_header_text()
    assert "re-written" in chart._tl_legend.text()


def test_codex_shows_read_and_uncached_only(chart: ContextChart, codex: Any) -> None:
    records, compactions = codex
    assert records and all(r["cache_write_tokens"] is None for r in records)
    set_calls(chart, records, compactions)
    chart.set_cache_view(True)
    assert chart.cache_view()
    for i, rec in enumerate(records):
        seg = chart.cache_segments(i)
        read, prompt = rec["cache_read_tokens"], rec["provider_prompt_tokens"]
        assert seg["cache_read"] == (0, read)
        assert seg["cache_write"][1] == 0
        assert seg["uncached"] == (read, prompt - read)
    uncached = [r["provider_prompt_tokens"] - r["cache_read_tokens"] for r in records]
    median = statistics.median([u for u in uncached if u])
    expected = [i for i, u in enumerate(uncached)
                if u > 3 * median and u > 0.5 * records[i]["provider_prompt_tokens"]]
    assert chart.rewrite_calls() == expected  # cache misses, judged on the uncached input
    assert [x for x, _ in chart.rewrite_marker_positions()] == [i + 1 for i in expected]
    legend = chart._tl_legend.text()
    assert "&nbsp;read</span>" in legend and "&nbsp;uncached</span>" in legend
    assert "&nbsp;written</span>" not in legend
    assert "writes not reported" in chart.timeline_header_text()
    assert "written: not reported" in chart.column_tooltip(0)


def test_inferred_prefix_is_labelled(chart: ContextChart, claude: Any) -> None:
    records, compactions = claude
    assert records[0]["prefix_source"] == "inferred"
    set_calls(chart, records, compactions)
    chart.flush()
    assert chart.system_label() == "System prompt + tools (inferred)"
    assert chart._inferred_label.isVisible() and chart._inferred_label.textItem.toPlainText() == "inferred"
    own = [{k: v for k, v in r.items() if k not in ("prefix_source", "prefix_tokens", "cache_read_tokens",
                                                       "cache_write_tokens")} for r in records[:3]]
    set_calls(chart, own)
    chart.flush()
    assert chart.system_label() == "System prompt" and not chart._inferred_label.isVisible()
    assert not chart.cache_available() and not chart.cache_button.isEnabled()
    chart.set_cache_view(True)
    chart.flush()
    assert not chart.cache_view()


@pytest.mark.parametrize("cache_view", [False, True])
def test_png_decodes_at_the_chart_size(chart: ContextChart, claude: Any, cache_view: bool) -> None:
    set_calls(chart, *claude)
    chart.set_cache_view(cache_view)
    data = chart.export_image("png")
    image = QImage.fromData(data, "PNG")
    assert not image.isNull()
    assert (image.width(), image.height()) == (chart._tl_plot.width(), chart._tl_plot.height())
    assert len({image.pixel(x, image.height() // 2) for x in range(0, image.width(), 4)}) > 3  # not blank


def test_svg_parses_with_paths(chart: ContextChart, claude: Any) -> None:
    set_calls(chart, *claude)
    chart.set_cache_view(True)
    data = chart.export_image("svg")
    root = ET.fromstring(data)
    assert root.tag == f"{SVG}svg"
    paths = list(root.iter(f"{SVG}path"))
    assert len(paths) > 20
    assert CACHE_COLORS["light"]["rate"] in data.decode("utf-8")  # the hit-rate line is in the file
    with pytest.raises(ValueError, match="png or svg"):
        chart.export_image("gif")


def test_hovering_a_rewrite_star_says_why(chart: ContextChart, claude: Any) -> None:
    set_calls(chart, *claude)
    chart.set_cache_view(True)
    vb = chart._tl_plot.getPlotItem().getViewBox()
    vb.autoRange()
    x, y = chart.rewrite_marker_positions()[3]  # call 11: the prompt grew by 29,709 tokens
    star = vb.mapViewToScene(QPointF(x, y))
    assert chart._hit(star) == ("call", 10)
    chart._tips.show_at(star)
    text = QToolTip.text()
    assert text.startswith("Call 11") and "Cache re-written: 29,709 tokens written" in text
    assert "the prompt grew by 29,709 tokens" in text and "5.4× the previous call's" in text


def test_the_providers_cache_miss_reason_is_the_same_line_in_both_views(chart: ContextChart) -> None:
    """Claude Code 2.1.332's ``diagnostics.cache_miss_reason`` (a record's ``cache_miss``): the call tooltip gives it
    in the region view, and in the cache view as the re-write's cause — one text, from the engine."""
    from engine.context.cache import cache_miss_line
    from tests.widgets.test_context_chart import record

    records = [{**record(i), "cache_read_tokens": 8_000 if i else 0, "cache_write_tokens": 0 if i else 9_000}
               for i in range(4)]
    records[2] = {**records[2], "cache_miss": {"reason": "tools_changed", "tokens": 1234}}
    set_calls(chart, records)
    chart.flush()
    line = cache_miss_line(records[2])
    assert line == "Cache miss (the provider's reason): the tool definitions changed (1,234 tokens missed the cache)"
    assert line in chart.column_tooltip(2) and "Cache miss" not in chart.column_tooltip(1)
    chart.set_cache_view(True)
    chart.flush()
    assert 2 in chart.rewrite_calls()
    assert line in chart.column_tooltip(2) and chart.column_tooltip(2).count("Cache miss") == 1
