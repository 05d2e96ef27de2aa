"""Parts of the context chart (widgets.context_chart): axes, the legend, the growing per-call series.

- ``TokenAxis`` / ``CallAxis``: axes labelled 32k / 1.5M, and call numbers;
- ``Legend``: rows of swatch · label · how it was obtained · tokens · % of the window, in two columns;
- ``Timeline``: growing numpy columns for the per-call series (amortised O(1) append);
- ``SceneTips``: a plot's tooltips, shown on the move and kept while the pointer rests;
- how the timeline is drawn cheaply: its x range taken in steps (``x_range``), lines of more calls than pixels
  drawn by their extremes (``downsample_when_dense``), lines set only when their points change (``set_line``),
  items kept as drawn (``kept_as_drawn``);
- small parsers of record values (``num``, ``opt_num``, ``parse_ts``) and ``swatch`` pixmaps.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QPointF, Qt
from PySide6.QtGui import QColor, QFont, QHelpEvent, QPainter, QPen, QPixmap
from PySide6.QtWidgets import QGraphicsItem, QGridLayout, QLabel, QToolTip, QWidget

from engine.model.snapshot import PROMPT_REGIONS, REGION_ACCURACY_LABELS
from engine.model.timeline import TimelineCall
from widgets.theme import REGION_LABELS, REGION_ORDER, Palette, format_tokens

TIMELINE_REGIONS: tuple[str, ...] = PROMPT_REGIONS
# One recorded LLM call: a ``context`` record of ``events.jsonl`` (the request's ContextSnapshot without the
# per-message counts, plus what the provider reported: cache figures, ...) and its price.
CallRecord = TimelineCall

COLUMN_WIDTH = 0.8  # a timeline column's width, in calls
# a region's accuracy (engine.model.snapshot.region_accuracy) as the legend marks it: a short word
ACCURACY_MARKS: dict[str, str] = {"exact": "exact", "estimated": "est.", "calibrated": "cal.", "inferred": "inferred",
                                  "set": "set"}

MIN_TIMELINE_SLOTS = 12  # the timeline's x-axis spans at least this many calls
X_PAD = 0.02  # the timeline's x range: at least this share of its span free after the next request's column …
X_ROOM = 0.08  # … and, from X_STEPS_FROM calls, this much when the range is set again (the columns reached it)
X_STEPS_FROM = 100  # fewer calls: the range fits them (a new one with each call: a short axis is quickly drawn)


def x_range(n: int, current: tuple[float, float] | None = None) -> tuple[float, float]:
    """The timeline's x range for ``n`` calls (columns at x = 1..n, the next request's at n + 1): ``current`` while
    it still holds every column with :data:`X_PAD` of the span free on the right and no more than :data:`X_ROOM`,
    else a range with :data:`X_ROOM` free. The range (so the axis, its ticks and labels) changes every few calls
    of a long session, not at each one (at 5,000 calls: once in 300). Under :data:`X_STEPS_FROM` calls, the range
    fits the columns with :data:`X_PAD` on either side (no empty slots after a short session's next request);
    under :data:`MIN_TIMELINE_SLOTS`, a fixed range: narrow columns rather than stretched ones. The left edge is
    never below x = -1 (the view's limit)."""
    if n + 1 < MIN_TIMELINE_SLOTS:
        return (0.4, MIN_TIMELINE_SLOTS + 0.6)
    left, right = 1 - COLUMN_WIDTH / 2, n + 1 + COLUMN_WIDTH / 2
    span = right - left
    room = X_ROOM if n >= X_STEPS_FROM else X_PAD
    if current is not None:
        lo, hi = current
        if lo <= left - min(X_PAD * span, 1.0) + 1e-9 and right + X_PAD * span <= hi <= right + room * span:
            return current
    return (max(-1.0, left - X_PAD * span), right + room * span)


DOWNSAMPLE_PER_PIXEL = 1.0  # a line of more calls than this per pixel is drawn by its extremes (pyqtgraph's "peak")


def downsample_when_dense(curve: pg.PlotDataItem, y: np.ndarray) -> None:
    """Draw ``curve`` (the provider's figures, the raw estimate) downsampled by its extremes when it has more
    points than pixels (pyqtgraph's auto "peak": per group of points, its highest and lowest, joined): the same
    strokes on screen from a few hundred segments instead of thousands. Only when every point is finite: pyqtgraph
    takes a group holding a gap for a gap, which would widen the line's gaps."""
    auto = bool(len(y)) and bool(np.isfinite(y).all())
    curve.opts["autoDownsampleFactor"] = DOWNSAMPLE_PER_PIXEL  # (no setter; setDownsampling turns it on or off)
    if curve.opts["autoDownsample"] != auto:
        curve.setDownsampling(auto=auto, method="peak")


def set_line(curve: pg.PlotDataItem, x: np.ndarray, y: np.ndarray) -> None:
    """``curve.setData(x, y)`` unless it holds these points already (a line whose data is set again is drawn again,
    and the whole plot with it: it spans the plot)."""
    old_x, old_y = curve.getData()
    if old_x is not None and np.array_equal(old_x, x) and np.array_equal(old_y, y, equal_nan=True):
        return
    curve.setData(x, y)


def kept_as_drawn(*items: QGraphicsItem) -> None:
    """Keep these plot items as drawn (a pixmap: ``DeviceCoordinateCache``) until they change: a new call or the
    next request's column repaints the part of the plot it changes, and what lies under it need not be drawn again
    (the left axis draws the grid across the plot; thousands of bars and line segments; dashed lines)."""
    for item in items:
        item.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)


class SceneTips(QObject):
    """A plot's tooltips: ``text_at(scene_pos)`` (None: nothing there) shown as the pointer moves, and again
    when it rests. Qt sends the view a ToolTip event when the pointer rests; left to the scene, which holds no
    item tooltips, it hides the one shown on the move (after about a second). Answered here instead."""

    def __init__(self, plot: pg.PlotWidget, text_at: Callable[[QPointF], str | None]) -> None:
        super().__init__(plot)
        self._plot = plot
        self._text_at = text_at
        plot.viewport().installEventFilter(self)
        plot.scene().sigMouseMoved.connect(self.show_at)

    def show_at(self, scene_pos: QPointF) -> None:
        """The tooltip for what is at ``scene_pos`` (hidden when nothing is)."""
        text = self._text_at(scene_pos)
        if text:
            QToolTip.showText(self._plot.mapToGlobal(self._plot.mapFromScene(scene_pos)), text, self._plot)
        else:
            QToolTip.hideText()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            self.show_at(self._plot.mapToScene(event.pos()))
            return True
        return False


def short_tokens(v: float) -> str:
    v = float(v)
    a = abs(v)
    if a >= 1_000_000:
        s = f"{v / 1_000_000:.1f}".rstrip("0").rstrip(".")
        return s + "M"
    if a >= 1000:
        s = f"{v / 1000:.1f}".rstrip("0").rstrip(".")
        return s + "k"
    return f"{v:.0f}"


class TokenAxis(pg.AxisItem):
    """An axis that labels token counts as 32k / 1.5M."""

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        return [short_tokens(v * scale) for v in values]


class CallAxis(pg.AxisItem):
    """An axis of call numbers: integers only."""

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        return [str(round(v)) if abs(v - round(v)) < 1e-6 else "" for v in values]


def num(value: Any) -> float:
    if value is None:
        return 0.0
    try:
        f = float(value)
    except (TypeError, ValueError):
        return 0.0
    return f if math.isfinite(f) else 0.0


def opt_num(value: Any) -> float:
    if value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def parse_ts(ts: Any) -> datetime | None:
    if not isinstance(ts, str) or not ts:
        return None
    try:
        parsed = datetime.fromisoformat(ts)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def swatch(color: str, line: bool = False, dashed: bool = False) -> QPixmap:
    pm = QPixmap(14, 14)
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    if line:
        pen = QPen(QColor(color), 2.5)
        if dashed:
            pen.setStyle(Qt.PenStyle.DashLine)
        p.setPen(pen)
        p.drawLine(7, 1, 7, 13)
    else:
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QColor(color))
        p.drawRoundedRect(1, 1, 12, 12, 2, 2)
    p.end()
    return pm


class Legend(QWidget):
    """Rows: swatch · label · how it was obtained (a muted word: exact, est., cal., inferred, set; the row's tooltip
    says it in full) · tokens · % of the window, in two columns (the dock stays short)."""

    KEYS: tuple[str, ...] = (*REGION_ORDER, "threshold", "limit")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        grid = QGridLayout(self)
        grid.setContentsMargins(2, 0, 2, 0)
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(1)
        grid.setColumnStretch(1, 1)
        grid.setColumnStretch(7, 1)
        grid.setColumnMinimumWidth(5, 10)  # the gap between the two columns
        per_column = -(-len(self.KEYS) // 2)
        self._swatches: dict[str, QLabel] = {}
        self._names: dict[str, QLabel] = {}
        self._tokens: dict[str, QLabel] = {}
        self._pcts: dict[str, QLabel] = {}
        self._marks: dict[str, QLabel] = {}
        labels = dict(REGION_LABELS)
        labels["threshold"] = "Auto-compaction threshold"
        labels["limit"] = "Hard limit (window)"
        for row, key in enumerate(self.KEYS):
            sw = QLabel()
            sw.setFixedSize(14, 14)
            name = QLabel(labels[key])
            tok = QLabel("0")
            tok.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            pct = QLabel("—")
            pct.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            pct.setMinimumWidth(pct.fontMetrics().horizontalAdvance("100.0%") + 4)
            for lab in (tok, pct):
                f = lab.font()
                f.setStyleHint(QFont.StyleHint.Monospace)
                f.setFamily("monospace")
                lab.setFont(f)
            mark = QLabel("")
            small = mark.font()
            small.setPointSizeF(max(6.0, small.pointSizeF() * 0.85))
            mark.setFont(small)
            r, c = row % per_column, 0 if row < per_column else 6
            grid.addWidget(sw, r, c)
            grid.addWidget(name, r, c + 1)
            grid.addWidget(mark, r, c + 2)
            grid.addWidget(tok, r, c + 3)
            grid.addWidget(pct, r, c + 4)
            self._marks[key] = mark
            self._swatches[key] = sw
            self._names[key] = name
            self._tokens[key] = tok
            self._pcts[key] = pct

    def set_palette(self, pal: Palette) -> None:
        for mark in self._marks.values():
            mark.setStyleSheet(f"color: {pal.muted}")
        for key, sw in self._swatches.items():
            if key == "threshold":
                sw.setPixmap(swatch(pal.threshold, line=True, dashed=True))
            elif key == "limit":
                sw.setPixmap(swatch(pal.limit, line=True))
            else:
                sw.setPixmap(swatch(pal.regions[key]))

    def set_row(self, key: str, tokens: int, pct: str) -> None:
        text = format_tokens(tokens)
        if self._tokens[key].text() != text:
            self._tokens[key].setText(text)
        if self._pcts[key].text() != pct:
            self._pcts[key].setText(pct)

    def set_name(self, key: str, text: str) -> None:
        if self._names[key].text() != text:
            self._names[key].setText(text)

    def name(self, key: str) -> str:
        return self._names[key].text()

    def set_accuracy(self, key: str, accuracy: str) -> None:
        """Mark how row ``key``'s tokens were obtained ("" : no mark)."""
        mark = ACCURACY_MARKS.get(accuracy, accuracy)
        if self._marks[key].text() != mark:
            self._marks[key].setText(mark)
        about = REGION_ACCURACY_LABELS.get(accuracy, accuracy)
        tip = f"{self._names[key].text()}: {about}" if about else ""
        if self._names[key].toolTip() != tip:
            for label in (self._swatches[key], self._names[key], self._marks[key], self._tokens[key]):
                label.setToolTip(tip)

    def accuracy_mark(self, key: str) -> str:
        return self._marks[key].text()

    def row_text(self, key: str) -> str:
        return f"{self._tokens[key].text()} · {self._pcts[key].text()}"


class Timeline:
    """Growing numpy columns for the per-call series (amortised O(1) append)."""

    def __init__(self) -> None:
        self.n = 0
        self.cap = 0
        self.values = np.zeros((len(TIMELINE_REGIONS), 0))
        self.provider = np.zeros(0)
        self.raw = np.zeros(0)
        self.window = np.zeros(0)
        self.threshold = np.zeros(0)
        self.records: list[CallRecord] = []
        self.cached = 0  # calls with the provider's cache-read figure
        self.times: list[datetime | None] = []
        self.version = 0  # changes with every change of the calls (what is derived from them is kept until then)
        self._peaks: tuple[int, tuple[float, float, float]] | None = None

    def clear(self) -> None:
        version = self.version
        self.__init__()  # type: ignore[misc]
        self.version = version + 1

    def _grow(self, need: int) -> None:
        if need <= self.cap:
            return
        cap = max(64, self.cap * 2, need)
        values = np.zeros((len(TIMELINE_REGIONS), cap))
        values[:, : self.n] = self.values[:, : self.n]
        self.values = values
        for name in ("provider", "raw", "window", "threshold"):
            arr = np.full(cap, math.nan)
            arr[: self.n] = getattr(self, name)[: self.n]
            setattr(self, name, arr)
        self.cap = cap

    def append(self, rec: CallRecord) -> None:
        self._grow(self.n + 1)
        i = self.n
        snap = rec.snapshot
        self.values[:, i] = [getattr(snap, key) for key in TIMELINE_REGIONS]
        prov = opt_num(snap.provider_prompt_tokens)
        self.provider[i] = prov if prov > 0 else math.nan
        self.raw[i] = snap.raw_prompt_tokens if snap.raw_prompt_tokens > 0 else math.nan
        self.window[i] = snap.window if snap.window > 0 else math.nan
        self.threshold[i] = snap.threshold_tokens if snap.threshold_tokens > 0 else math.nan
        self.records.append(rec)
        self.cached += rec.record.cache_read_tokens is not None
        self.times.append(parse_ts(snap.ts))
        self.n += 1
        self.version += 1

    def replace_last(self, rec: CallRecord) -> None:
        """The last column again, with ``rec`` (a followed call whose figures grew)."""
        if not self.n:
            return
        old = self.records[-1]
        self.n -= 1
        self.records.pop()
        self.times.pop()
        self.cached -= old.record.cache_read_tokens is not None
        self.append(rec)

    def peaks(self) -> tuple[float, float, float]:
        """The highest thing the calls draw (column tops, provider and raw figures; 0 when none), the highest
        window and the highest threshold (0 when none): worked out once per change of the calls (the next
        request changes a few times a second while a session is followed, the calls far less often)."""
        if self._peaks is not None and self._peaks[0] == self.version:
            return self._peaks[1]
        n = self.n
        out = []
        for group in ((self.provider[:n], self.raw[:n]), (self.window[:n],), (self.threshold[:n],)):
            values = [0.0]
            for series in group:
                if np.isfinite(series).any():
                    values.append(float(np.nanmax(series)))
            out.append(max(values))
        if n:
            out[0] = max(out[0], float(self.values[:, :n].sum(axis=0).max()))
        peaks = (out[0], out[1], out[2])
        self._peaks = (self.version, peaks)
        return peaks

    def total(self, i: int) -> float:
        return float(self.values[:, i].sum())
