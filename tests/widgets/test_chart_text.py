"""widgets.chart_text alone: a call's tooltip, the timeline's header and legend, the lines across the chart."""

from __future__ import annotations

import math

import numpy as np

from engine.model.timeline import TimelineCall
from tests.widgets.test_context_chart import record
from widgets.chart_parts import Timeline
from widgets.chart_text import FAR, across, column_tooltip, thin, timeline_header, timeline_legend
from widgets.theme import LIGHT


def _timeline(n: int, last: dict[str, object] | None = None, **extra: object) -> Timeline:
    """``n`` calls with ``extra``; the last one also with ``last``."""
    tl = Timeline()
    for i in range(n):
        tl.append(TimelineCall.from_json({**record(i), **extra, **((last or {}) if i == n - 1 else {})}))
    return tl


def test_a_calls_tooltip_says_its_regions_its_estimate_against_the_provider_and_the_cache() -> None:
    tl = _timeline(3, cache_read_tokens=4_000)
    text = column_tooltip(tl, 1, None)
    assert text.startswith("Call 2 · 2025-11-21T10:00:01")
    assert "Reported by provider: 9,055" in text and "(estimate " in text and "Cache: read 4,000" in text
    shown = column_tooltip(tl, 1, ["Cache read 4,000 · hit rate 40 %"])  # the cache view's own lines instead
    assert "Cache read 4,000 · hit rate 40 %" in shown and "Cache: read" not in shown


def test_the_header_and_the_legend() -> None:
    empty = Timeline()
    assert timeline_header(empty, 0, LIGHT, next_request=False, cache_header=None) == "No calls yet"
    assert "the pale column" in timeline_header(empty, 0, LIGHT, next_request=True, cache_header=None)
    tl = _timeline(2)
    head = timeline_header(tl, 1, LIGHT, next_request=True, cache_header=None)
    assert head.startswith("2 calls · last estimate") and "reported <b>9,055</b>" in head and "1 compaction" in head
    cached = timeline_header(tl, 2, LIGHT, next_request=True, cache_header="hit rate <b>40 %</b>")
    assert "hit rate <b>40 %</b>" in cached and "last prompt <b>9,055</b>" in cached and "2 compactions" in cached
    assert "reported by provider" in timeline_legend(LIGHT, subagents=False, cache_legend=None)
    assert "subagent" in timeline_legend(LIGHT, subagents=True, cache_legend="cache")
    assert timeline_legend(LIGHT, subagents=False, cache_legend="cache") == "cache"


def test_a_line_across_the_chart() -> None:
    x, y = across(np.array([100.0, math.nan, 300.0]), math.nan)
    assert x[0] == -FAR and x[-1] == FAR and y[0] == 100 and y[-1] == 300  # on at the last call's value
    assert list(x[1:7]) == [0.5, 1.5, 1.5, 2.5, 2.5, 3.5] and math.isnan(y[3])  # a gap where no figure
    x, y = across(np.array([]), 500.0)
    assert list(y) == [500.0, 500.0, 500.0]


def test_a_line_across_the_chart_thinned_to_the_points_where_it_turns() -> None:
    values = np.array([100.0] * 3000 + [math.nan, math.nan] + [200.0] * 2000 + [300.0])
    x, y = across(values, 400.0)
    tx, ty = thin(x, y)
    assert len(x) == 2 * 5003 + 3 and len(tx) == 13  # each level run: its two ends; each gap: its points; each step
    assert (tx[0], ty[0], tx[-1], ty[-1]) == (-FAR, 100.0, FAR, 400.0)
    assert (tx[1], tx[-2]) == (0.5, 5003.5)  # the ends from and to FAR apart from the columns' part (dashed)
    assert list(tx[np.isnan(ty)]) == list(x[np.isnan(y)])  # the gaps kept where they were
    ends = np.isfinite(ty)
    for a, b in zip(x[np.isfinite(y)], y[np.isfinite(y)], strict=True):  # every point left out is on the line
        near = np.flatnonzero(ends & (tx <= a))[-1]
        assert ty[near] == b or a in tx
    assert thin(np.array([1.0, 2.0]), np.array([5.0, 5.0]))[0].tolist() == [1.0, 2.0]


def test_a_calls_tooltip_gives_the_providers_cache_miss_reason() -> None:
    tl = _timeline(2, last={"cache_miss": {"reason": "system_changed", "tokens": 800}})
    text = column_tooltip(tl, 1, None)
    assert "Cache miss (the provider's reason): the system prompt changed (800 tokens missed the cache)" in text
    assert "Cache miss" not in column_tooltip(tl, 0, None)
