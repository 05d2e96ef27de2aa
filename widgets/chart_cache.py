"""The timeline's cache view (widgets.context_chart): each call's prompt split into what the provider
read from its cache, what it wrote to it and the uncached input; the cache hit rate as a line on a
right axis (0–100 %, 100 % at the top of the tallest column); the calls that re-wrote the cached
prefix marked with a ★ (their tooltip says why the call cost more).

The figures and the judgement come from :func:`engine.context.cache.analyze`; this module only draws them.
Its plot items are created once (hidden in the region view) and updated with ``setOpts`` /
``setData``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor

from engine.context.cache import CacheSummary, analyze
from engine.model.timeline import TimelineCall
from widgets.chart_parts import COLUMN_WIDTH
from widgets.theme import Palette, format_tokens

CACHE_KEYS: tuple[str, ...] = ("cache_read", "cache_write", "uncached")  # stacking order, bottom up
CACHE_LABELS = {"cache_read": "Cache read", "cache_write": "Cache write", "uncached": "Uncached input"}
SHORT_LABELS = {"cache_read": "read", "cache_write": "written", "uncached": "uncached"}
CACHE_COLORS: dict[str, dict[str, str]] = {
    "light": {"cache_read": "#16a34a", "cache_write": "#f97316", "uncached": "#3b82f6", "rate": "#0e7490",
              "rewrite": "#dc2626"},
    "dark": {"cache_read": "#4ade80", "cache_write": "#fb923c", "uncached": "#60a5fa", "rate": "#22d3ee",
             "rewrite": "#f87171"},
}


def cache_colors(pal: Palette) -> dict[str, str]:
    return CACHE_COLORS["dark" if pal.dark else "light"]


class PercentAxis(pg.AxisItem):
    """The right axis of the cache view: the hit rate, drawn scaled so that 100 % = ``full`` tokens."""

    full: float = 1.0

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list[tuple[float, list[float]]]:
        full = self.full if self.full > 0 else 1.0
        return [(full / 4, [full * f for f in (0.0, 0.25, 0.5, 0.75, 1.0) if minVal <= full * f <= maxVal])]

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        full = self.full if self.full > 0 else 1.0
        return [f"{v * scale / full:.0%}" for v in values]


class CacheLayer:
    """The cache view's plot items on the timeline's plot (see the module docstring)."""

    def __init__(self, plot: pg.PlotItem, axis: PercentAxis, pal: Palette) -> None:
        self._plot = plot
        self._axis = axis
        self.summary = CacheSummary((), None)
        self.visible = False
        self.bars: dict[str, pg.BarGraphItem] = {}
        for key in CACHE_KEYS:
            item = pg.BarGraphItem(x=np.zeros(0), height=np.zeros(0), y0=np.zeros(0), width=COLUMN_WIDTH, pen=None,
                                   brush=QColor(cache_colors(pal)[key]))
            self.bars[key] = item
        self.rate = pg.PlotDataItem(connect="finite")
        self.rewrites = pg.ScatterPlotItem(symbol="star", size=15)
        for item in (*self.bars.values(), self.rate, self.rewrites):
            item.setVisible(False)
            plot.addItem(item)
        plot.hideAxis("right")
        self.set_palette(pal)

    def set_palette(self, pal: Palette) -> None:
        colors = cache_colors(pal)
        for key, item in self.bars.items():
            item.setOpts(brush=QColor(colors[key]), pen=None)
        self.rate.setPen(pg.mkPen(QColor(colors["rate"]), width=2))
        self.rate.setSymbolBrush(QColor(colors["rate"]))
        self.rate.setSymbolPen(None)
        self.rewrites.setBrush(QColor(colors["rewrite"]))
        self.rewrites.setPen(pg.mkPen(QColor(pal.background), width=1))
        axis = self._plot.getAxis("right")
        axis.setPen(pg.mkPen(QColor(pal.muted)))
        axis.setTextPen(pg.mkPen(QColor(colors["rate"])))

    def set_visible(self, on: bool) -> None:
        self.visible = on
        for item in (*self.bars.values(), self.rate, self.rewrites):
            item.setVisible(on)
        if on:
            self._plot.showAxis("right")
        else:
            self._plot.hideAxis("right")

    def update(self, records: Sequence[TimelineCall], after_compaction: Collection[int] = ()) -> None:
        """Recompute the figures of ``records`` (the timeline's calls) and redraw."""
        self.summary = analyze(records, after_compaction)
        calls = self.summary.calls
        n = len(calls)
        x = np.arange(1, n + 1, dtype=float)
        read = np.array([float(c.read or 0) if c.uncached is not None else 0.0 for c in calls])
        write = np.array([float(c.write or 0) if c.uncached is not None else 0.0 for c in calls])
        uncached = np.array([float(c.uncached or 0) for c in calls])
        base = np.zeros(n)
        for key, heights in zip(CACHE_KEYS, (read, write, uncached), strict=True):
            self.bars[key].setOpts(x=x, y0=base.copy(), height=heights)
            base = base + heights
        full = float(base.max()) if n and base.max() > 0 else 1.0
        self._axis.full = full
        self._axis.picture = None  # the ticks depend on ``full``: redraw them
        self._axis.update()
        rate = np.array([c.hit_rate * full if c.hit_rate is not None else math.nan for c in calls])
        dots = n <= 150 and bool(np.isfinite(rate).any())
        self.rate.setData(x, rate, symbol="o" if dots else None, symbolSize=4)
        idx = self.summary.rewrites
        self.rewrites.setData(x=[i + 1.0 for i in idx], y=[base[i] + 0.04 * full for i in idx])

    # ------------------------------------------------------------------ introspection and text
    def segments(self, index: int) -> dict[str, tuple[float, float]]:
        """Call ``index``'s segments: key → (bottom, height) in tokens."""
        return {k: (float(b.opts["y0"][index]), float(b.opts["height"][index])) for k, b in self.bars.items()}

    def rate_series(self) -> np.ndarray:
        """The hit rate of every call (0–1; NaN where unknown)."""
        return np.array([c.hit_rate if c.hit_rate is not None else math.nan for c in self.summary.calls])

    def tooltip_lines(self, index: int) -> list[str]:
        if index >= len(self.summary.calls):
            return []
        c = self.summary.calls[index]
        if c.uncached is None:
            return ["Cache: no provider figures for this call"]
        written = "not reported by this source" if c.write is None else format_tokens(c.write)
        lines = [f"Cache read: {format_tokens(c.read or 0)} · written: {written} · uncached: "
                 f"{format_tokens(c.uncached)}"]
        if c.hit_rate is not None:
            lines.append(f"Cache hit rate: {c.hit_rate:.1%}")
        if c.rewrite:
            lines.append(c.reason)
        return lines

    def header_html(self, pal: Palette) -> str:
        rate = self.summary.hit_rate()
        parts = [f"hit rate <b>{rate:.1%}</b>" if rate is not None else "no cache figures"]
        if not self.summary.has_write and self.summary.has_usage:
            parts.append(f"<span style='color:{pal.muted}'>writes not reported</span>")
        n = len(self.summary.rewrites)
        if n:
            colors = cache_colors(pal)
            parts.append(f"<span style='color:{colors['rewrite']}'>★ {n} re-write{'s' if n != 1 else ''}</span>")
        return " · ".join(parts)

    def legend_html(self, pal: Palette) -> str:
        colors = cache_colors(pal)
        keys = CACHE_KEYS if self.summary.has_write or not self.summary.has_usage else ("cache_read", "uncached")
        items = [(colors[k], "■", SHORT_LABELS[k]) for k in keys]
        items += [(colors["rate"], "━●", "hit rate"), (colors["rewrite"], "★", "re-written"),
                  (pal.marker, "▼", "compaction"), (pal.limit, "╌╌", "window")]
        return " &nbsp; ".join(
            f"<span style='white-space:nowrap'><span style='color:{c}'>{g}</span>&nbsp;{t}</span>" for c, g, t in items)


__all__ = ["CACHE_KEYS", "CACHE_LABELS", "CacheLayer", "PercentAxis", "cache_colors"]
