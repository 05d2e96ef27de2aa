"""Marks on the timeline besides the columns: compactions, where subagents ran and the call picked for a diff.

:class:`CompactionLayer` draws one ▼ per compaction record (:class:`engine.model.records.CompactionRecord`) at its
tokens before, with a drop line to its tokens after, between the call before it and the call after it (after its
``calls_before`` calls when the record says, as an import's do, else by its time).

:class:`SubagentLayer` draws one ◆ per subagent above the parent call that issued its Task call
(``call_index`` of the marks :func:`engine.workbench.subagents.subagent_marks` makes) with a dashed
band down that column; marks without a call are not drawn. :class:`SelectionLayer` outlines the call
picked as the first of a diff. Both create their plot items once and only ``setData`` afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from engine.model.records import CompactionRecord
from engine.workbench.rows import SubagentMark
from widgets.chart_parts import COLUMN_WIDTH, Timeline, num, parse_ts
from widgets.theme import Palette

SUBAGENT_COLOR_LIGHT = "#c026d3"
SUBAGENT_COLOR_DARK = "#f0abfc"
HIT_PIXELS = 9


def subagent_color(pal: Palette) -> str:
    return SUBAGENT_COLOR_DARK if pal.dark else SUBAGENT_COLOR_LIGHT


class CompactionLayer:
    """▼ markers and drop lines of the compaction events (see the module docstring)."""

    def __init__(self, plot: pg.PlotItem) -> None:
        self.events: list[CompactionRecord] = []
        self.x: list[float] = []  # per event: between the columns of the calls before and after it
        self.drop = pg.PlotDataItem(connect="pairs")
        self.markers = pg.ScatterPlotItem(symbol="t", size=11)
        plot.addItem(self.drop)
        plot.addItem(self.markers)

    def set_palette(self, pal: Palette) -> None:
        self.drop.setPen(pg.mkPen(QColor(pal.marker), width=2))
        self.markers.setBrush(QColor(pal.marker))
        self.markers.setPen(pg.mkPen(QColor(pal.background), width=1))

    def clear(self) -> None:
        self.events = []
        self.x = []

    def add(self, event: CompactionRecord, tl: Timeline) -> None:
        """One more event, placed after its ``calls_before`` calls, else after the last call of ``tl`` made before
        its ``ts`` (after the last call when it has no time)."""
        if event.calls_before is not None:
            k = max(0, min(event.calls_before, tl.n))
        else:
            when = parse_ts(event.ts)
            if when is None:
                k = tl.n
            else:
                k = 0
                for i in range(tl.n - 1, -1, -1):
                    t = tl.times[i]
                    if t is not None and t <= when:
                        k = i + 1
                        break
        # columns sit at x = 1..n; a compaction after call k sits between columns k and k+1
        self.events.append(event)
        self.x.append(k + 0.5)

    def draw(self) -> None:
        """The markers at the tokens before, the drop lines down to the tokens after."""
        m = len(self.events)
        if not m:
            self.markers.setData(x=[], y=[])
            self.drop.setData([], [])
            return
        mx = np.array(self.x, dtype=float)
        before = np.array([num(e.tokens_before) for e in self.events])
        after = np.array([num(e.tokens_after) for e in self.events])
        self.markers.setData(x=mx, y=before)
        seg_y = np.empty(2 * m)
        seg_y[0::2] = before
        seg_y[1::2] = after
        self.drop.setData(np.repeat(mx, 2), seg_y)

    def peaks(self) -> list[float]:
        """The tokens before and after of every event (what the markers and drop lines reach)."""
        return [v for e in self.events for v in (num(e.tokens_before), num(e.tokens_after))]

    def calls_after(self, n: int) -> set[int]:
        """0-based indexes of the calls (of ``n``) that come first after a marker."""
        return {int(x - 0.5) for x in self.x if 0 < x - 0.5 < n}

    def nearest(self, vx: float, tol: float) -> int | None:
        """The event whose marker is nearest view x ``vx`` within ``tol``, or None."""
        best: tuple[float, int] | None = None
        for i, cx in enumerate(self.x):
            d = abs(cx - vx)
            if d <= tol and (best is None or d < best[0]):
                best = (d, i)
        return best[1] if best is not None else None


class SubagentLayer:
    """◆ markers and bands of the subagents (see the module docstring)."""

    def __init__(self, plot: pg.PlotItem, pal: Palette) -> None:
        self.marks: list[SubagentMark] = []
        self.x: list[float] = []  # per drawn mark: its column (x = call index + 1)
        self.y: list[float] = []
        self.drawn: list[int] = []  # index in ``marks`` of each drawn mark
        self._band = pg.PlotDataItem(connect="pairs")
        self._points = pg.ScatterPlotItem(symbol="d", size=13)
        plot.addItem(self._band)
        plot.addItem(self._points)
        self._band.setZValue(5)
        self._points.setZValue(6)
        self.set_palette(pal)

    def set_palette(self, pal: Palette) -> None:
        color = QColor(subagent_color(pal))
        self._band.setPen(pg.mkPen(color, width=2, style=Qt.PenStyle.DashLine))
        self._points.setBrush(color)
        self._points.setPen(pg.mkPen(QColor(pal.background), width=1))

    def set_marks(self, marks: Sequence[SubagentMark]) -> None:
        self.marks = list(marks)

    def update(self, tops: np.ndarray) -> None:
        """Place the marks above their columns (``tops``: each column's height)."""
        self.x, self.y, self.drawn = [], [], []
        n = len(tops)
        peak = float(np.nanmax(tops)) if n else 0.0
        for i, mark in enumerate(self.marks):
            idx = mark.call_index
            if idx is None or not 0 <= idx < n:
                continue
            top = float(tops[idx]) if not np.isnan(tops[idx]) else 0.0
            self.x.append(idx + 1.0)
            self.y.append(top + 0.06 * peak)
            self.drawn.append(i)
        self._points.setData(x=self.x, y=self.y)
        band_x = np.repeat(np.array(self.x, dtype=float), 2)
        band_y = np.zeros(2 * len(self.y))
        band_y[1::2] = self.y
        self._band.setData(band_x, band_y)

    def hit(self, vx: float, vy: float, px: float, py: float) -> int | None:
        """The mark (index in ``marks``) within a few pixels of view point (vx, vy), or None."""
        for k, (x, y) in enumerate(zip(self.x, self.y, strict=True)):
            if abs(x - vx) <= HIT_PIXELS * px and abs(y - vy) <= HIT_PIXELS * py:
                return self.drawn[k]
        return None


class SelectionLayer:
    """The outline of the call picked as a diff's first call."""

    def __init__(self, plot: pg.PlotItem, pal: Palette) -> None:
        self.index: int | None = None
        self._bar = pg.BarGraphItem(x=np.zeros(0), height=np.zeros(0), y0=np.zeros(0),
                                    width=COLUMN_WIDTH + 0.12, brush=None)
        self._bar.setZValue(4)
        plot.addItem(self._bar)
        self.set_palette(pal)

    def set_palette(self, pal: Palette) -> None:
        self._bar.setOpts(pen=pg.mkPen(QColor(pal.link), width=2), brush=QColor(0, 0, 0, 0))

    def update(self, tops: np.ndarray) -> None:
        idx = self.index
        if idx is None or not 0 <= idx < len(tops):
            self._bar.setOpts(x=np.zeros(0), height=np.zeros(0), y0=np.zeros(0))
            return
        top = float(tops[idx]) if not np.isnan(tops[idx]) else 0.0
        self._bar.setOpts(x=np.array([idx + 1.0]), height=np.array([top]), y0=np.zeros(1))


__all__ = ["CompactionLayer", "SelectionLayer", "SubagentLayer", "subagent_color"]
