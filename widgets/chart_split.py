"""The timeline's columns and lines drawn in two parts (issue 28: the window follows in proportion to what was
appended): the calls before a cut, drawn once and then kept as drawn (each item's ``DeviceCoordinateCache``) for as
long as the view's range stays (it is taken in steps, :func:`widgets.chart_parts.x_range`), and the calls from the
cut on, drawn again with each new call. Drawn whole, a new call drew every column and both lines again: at 6,000
calls about 12 of the chart's 17 ms a call (the dotted estimate's line alone 5.6 ms), at 1,000 calls 4 ms.

- :class:`Cut` says where the frozen part ends: under :data:`SPLIT_FROM` calls nothing is frozen; after a reset of
  the calls (a new timeline) or once the live part would hold more than :data:`LIVE_MAX` calls, the cut moves to the
  last call, and the frozen part is drawn again once. The last call is always live: a followed call's figures grow
  (``update_last_call``).
- :class:`SplitBars`, :class:`SplitCurve`: one region's columns, one line, as two pyqtgraph items that draw the
  same as one: the columns side by side; the line's live part starts at the frozen part's last point (the join is
  drawn by both). What the chart asks of them (data, visibility, pen and brush) is said to both.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg

from widgets.chart_parts import downsample_when_dense

SPLIT_FROM = 512  # fewer calls than this are drawn whole (a few ms)
LIVE_MAX = 256  # the most calls drawn again with each new call: then the cut moves to the last one


class Cut:
    """Where the frozen part of the timeline ends: the calls before :attr:`at` (``stale``: the calls before it
    changed, the frozen part is drawn again)."""

    def __init__(self) -> None:
        self.at = 0
        self.stale = True

    def place(self, n: int) -> bool:
        """The cut for ``n`` calls; True when the frozen part is to be drawn again."""
        if n < SPLIT_FROM:
            at = 0
        elif self.stale or n - self.at > LIVE_MAX or self.at > n - 1:
            at = n - 1
        else:
            at = self.at
        moved = self.stale or at != self.at
        self.at, self.stale = at, False
        return moved


class SplitBars:
    """One region's stacked columns (pyqtgraph ``BarGraphItem`` options) as a frozen and a live item."""

    def __init__(self, plot: Any, **opts: Any) -> None:
        self.frozen = pg.BarGraphItem(**opts)
        self.live = pg.BarGraphItem(**opts)
        self.items = (self.frozen, self.live)
        for item in self.items:
            plot.addItem(item)

    def set(self, x: np.ndarray, y0: np.ndarray, height: np.ndarray, cut: int, moved: bool) -> None:
        """Columns at ``x`` from ``y0`` of ``height``; those before ``cut`` set only when ``moved``."""
        if moved:
            self.frozen.setOpts(x=x[:cut], y0=y0[:cut].copy(), height=height[:cut].copy())
        self.live.setOpts(x=x[cut:], y0=y0[cut:].copy(), height=height[cut:].copy())

    def setOpts(self, **opts: Any) -> None:
        for item in self.items:
            item.setOpts(**opts)

    def setVisible(self, on: bool) -> None:
        for item in self.items:
            item.setVisible(on)

    def isVisible(self) -> bool:
        return bool(self.live.isVisible())

    @property
    def opts(self) -> dict[str, Any]:
        """The options of the whole region (the two items' columns, in order)."""
        both = dict(self.live.opts)
        for key in ("x", "y0", "height"):
            both[key] = np.concatenate([np.asarray(self.frozen.opts[key]), np.asarray(self.live.opts[key])])
        return both


class SplitCurve:
    """One line of the timeline (a ``PlotDataItem``, its gaps not joined) as a frozen and a live item."""

    def __init__(self, plot: Any) -> None:
        self.frozen = pg.PlotDataItem(connect="finite")
        self.live = pg.PlotDataItem(connect="finite")  # (a few hundred points at most: every one drawn — pyqtgraph's
        self.live.setDownsampling(auto=False)  # "peak" draws nothing of a line of fewer points than its factor)
        self.items = (self.frozen, self.live)
        for item in self.items:
            plot.addItem(item)

    @property
    def curves(self) -> tuple[Any, Any]:
        return self.frozen.curve, self.live.curve

    def set(self, x: np.ndarray, y: np.ndarray, cut: int, moved: bool, **opts: Any) -> None:
        """The line through ``(x, y)``: the points before ``cut`` (drawn by their extremes when denser than the
        pixels) set only when ``moved``; the others, every one, with ``opts`` (symbols)."""
        if moved:
            downsample_when_dense(self.frozen, y[:cut])
            self.frozen.setData(x[:cut], y[:cut])
        start = max(0, cut - 1)  # (the join: the frozen part's last point)
        self.live.setData(x[start:], y[start:], **opts)

    def getData(self) -> tuple[np.ndarray, np.ndarray]:
        """The points drawn, the join once."""
        fx, fy = self.frozen.getData()
        lx, ly = self.live.getData()
        if fx is None or not len(fx):
            return lx, ly
        return np.concatenate([fx, lx[1:]]), np.concatenate([fy, ly[1:]])

    def setPen(self, pen: Any) -> None:
        for item in self.items:
            item.setPen(pen)

    def setSymbolBrush(self, brush: Any) -> None:
        for item in self.items:
            item.setSymbolBrush(brush)

    def setSymbolPen(self, pen: Any) -> None:
        for item in self.items:
            item.setSymbolPen(pen)

    def setVisible(self, on: bool) -> None:
        for item in self.items:
            item.setVisible(on)

    def isVisible(self) -> bool:
        return bool(self.live.isVisible())


__all__ = ["LIVE_MAX", "SPLIT_FROM", "Cut", "SplitBars", "SplitCurve"]
