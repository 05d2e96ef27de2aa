"""Marks on the timeline besides the columns: where subagents ran and the call picked for a diff.

:class:`SubagentLayer` draws one ◆ per subagent above the parent call that issued its Task call
(``call_index`` of the marks :func:`engine.workbench.subagents.subagent_marks` makes) with a dashed
band down that column; marks without a call are not drawn. :class:`SelectionLayer` outlines the call
picked as the first of a diff. Both create their plot items once and only ``setData`` afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from widgets.chart_parts import COLUMN_WIDTH
from widgets.theme import Palette

SUBAGENT_COLOR_LIGHT = "#c026d3"
SUBAGENT_COLOR_DARK = "#f0abfc"
HIT_PIXELS = 9


def subagent_color(pal: Palette) -> str:
    return SUBAGENT_COLOR_DARK if pal.dark else SUBAGENT_COLOR_LIGHT


class SubagentLayer:
    """◆ markers and bands of the subagents (see the module docstring)."""

    def __init__(self, plot: pg.PlotItem, pal: Palette) -> None:
        self.marks: list[dict[str, Any]] = []
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

    def set_marks(self, marks: Sequence[Mapping[str, Any]]) -> None:
        self.marks = [dict(m) for m in marks]

    def update(self, tops: np.ndarray) -> None:
        """Place the marks above their columns (``tops``: each column's height)."""
        self.x, self.y, self.drawn = [], [], []
        n = len(tops)
        peak = float(np.nanmax(tops)) if n else 0.0
        for i, mark in enumerate(self.marks):
            idx = mark.get("call_index")
            if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < n:
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


__all__ = ["SelectionLayer", "SubagentLayer", "subagent_color"]
