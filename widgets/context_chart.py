"""The live context chart: what fills the next request, and how the context grew call by call.

``ContextChart`` is a plain view: it takes the next request's ``engine.model.snapshot.ContextSnapshot``,
the recorded calls (``engine.model.timeline.TimelineCall``: a ``context`` record of ``events.jsonl`` — the
request's snapshot without the per-message counts, plus what the provider reported, e.g. its cache figures —
and its price) and compaction events
(dicts from ``dataclasses.asdict(CompactionEvent)``) and draws them; it never computes budgets itself.

(a) **Next request** — one stacked horizontal bar: system, summary, history (user / assistant / tool
shades), tool definitions, draft, output reserve, free; the auto-compaction threshold and the hard
limit (the window) as vertical lines; a legend with tokens, % of the window and the accuracy label
(estimated / exact / calibrated); each legend row marks how that region was obtained (exact, est., cal.,
inferred, set: ``engine.model.snapshot.region_accuracy``; the row's tooltip says it in full), and so does
each region line of a column's tooltip.

(b) **Timeline** — one stacked column per LLM call (system, summary, history user / assistant /
tool, tools), the provider-reported prompt tokens as a line against the estimate (the column top)
and the raw uncalibrated estimate as a dotted line, the window and threshold per call as dashed
lines drawn across the whole chart (from its left edge, over every column, on past the next request
at the next request's values), compaction events as ▼ markers with a drop line from tokens before to
tokens after; the next request is a faint column after the last call. Hovering a column or a marker shows a tooltip.

(b′) **Cache view** (the *Cache view* toggle beside the timeline's title, enabled when the calls carry
the provider's cache figures): each call's column split into cache read / cache write / uncached
input, the cache hit rate as a line on a right axis (0–100 %), and ★ on the calls that re-wrote the
cached prefix, whose tooltip says why the call cost more (``widgets.chart_cache``, figures from
``engine.context.cache``). A source whose system prompt + tools were inferred from the provider's first
figure has that region labelled "inferred" (legend, timeline, tooltip).

(c) **Marks**: ◆ above the parent call where a subagent ran (``set_subagents``; tooltip: id, model,
calls, peak and total prompt tokens; a click emits ``subagent_requested(session)``), and the outline
of the call picked as the first of a diff. Clicking a column picks it; Shift- or Ctrl-clicking a
second emits ``diff_requested(a, b)``; right-clicking a column offers *Diff with previous call* and
*Diff from call N* (the picked one). Compaction markers' tooltips say what compacting cost
(``widgets.compaction_text``).

**Fit to data** (the toggle beside *Cache view*): the timeline's y axis and the bar's x axis span the
calls and the next request instead of the whole window, and the window and threshold lines above the
scale are named at the top right ("window 1M ↑"). It is on by itself while everything drawn is under
:data:`FIT_BELOW` of the window (a 13k session in a 1M window is no flat line); a click chooses
(unticking it is the way back to the whole window) and the choice is kept.

Plot items are created once; updates only call ``setOpts``/``setData``. A setter draws at once: the
caller throttles (the controller sends at most a few snapshots a second while a turn streams). The parts:
(a) is :class:`widgets.chart_bar.RequestBar`; the compaction markers, subagent marks and the picked call are the
layers of :mod:`widgets.chart_marks`, the cache view :mod:`widgets.chart_cache`, the texts :mod:`widgets.chart_text`.

Public API
----------
Methods:
    set_snapshot(snapshot: ContextSnapshot | None)  the next request (bar (a) and ghost column)
    set_draft_tokens(n: int)                    only the draft region changes (typing)
    set_timeline(records: Sequence[CallRecord], compactions: Sequence[CompactionRecord] = ())   replace (b)
    append_call(record: CallRecord)             one more column (CallRecord: a TimelineCall)
    add_compaction(event: CompactionRecord)     one more marker
    clear()                                     empty chart
    set_palette(palette: Palette)               re-colour (theme change)
    flush()                                     redraw what changed (the setters do it themselves)
    set_cache_view(on: bool)                    the cache view (b′) or the region view (b)
    set_fit_to_data(on: bool | None)            fit to the data (True), the whole window (False), or by itself (None)
    export_image(fmt: "png" | "svg") -> bytes  the timeline plot as drawn, at its size (pyqtgraph exporters)
    set_subagents(marks: Sequence[SubagentMark]) the subagents of SessionView.subagents (with ``call_index``)
    select_call(index: int | None)              pick (outline) the first call of a diff (0-based)
    call_menu(index) -> QMenu                   the right-click menu of a column (its actions emit diff_requested)
Introspection (tests, accessibility):
    bar_segments() -> dict[str, tuple[float, float]]   region → (start, width) in tokens
    legend_text(region) -> str                 the legend row of a region ("12,345 · 9.6%")
    header_text() -> str / timeline_header_text() -> str
    column_count() -> int
    column_tops() -> ndarray                   the estimate (stack top) of every call
    provider_series() -> ndarray               provider-reported prompt tokens (NaN where unknown)
    column_tooltip(index) -> str               tooltip of call ``index`` (0-based)
    compaction_count() -> int
    cache_view() / cache_available() -> bool
    fit_to_data() -> bool                       the scale fits the data (not the whole window) now
    timeline_y_range() -> (float, float)        the timeline's y axis as set
    offscale_text() -> str                      the lines above the fitted scale, as named ("" when none)
    line_span(name) -> (float, float)           x extent of the "window" / "threshold" line
    legend_accuracy(region) -> str             the legend's mark of how a region was obtained
    cache_segments(index) -> dict[str, tuple[float, float]]   cache_read / cache_write / uncached → (bottom, height)
    hit_rate_series() -> ndarray / rewrite_calls() -> list[int] / rewrite_marker_positions()
    system_label() -> str                      the legend's name of the system region ("… (inferred)")
    compaction_tooltip(index) -> str
    compaction_x(index) -> float
    subagent_count() -> int / subagent_positions() -> list[(x, y)] / subagent_tooltip(index) -> str
    selected_call() -> int | None
Signals:
    call_clicked(int)          a timeline column was clicked (0-based call index)
    compaction_clicked(object) a compaction marker was clicked (its CompactionRecord)
    diff_requested(int, int)   diff call A → call B (numbered from 1, as the tooltips number them)
    subagent_requested(str)    a subagent mark was clicked: its ``session`` path (relative to the session folder)
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, Signal
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QMenu, QVBoxLayout, QWidget

from engine.model.records import CompactionRecord
from engine.model.snapshot import ContextSnapshot
from engine.workbench.rows import SubagentMark
from widgets.chart_bar import RequestBar
from widgets.chart_cache import CacheLayer, PercentAxis
from widgets.chart_marks import CompactionLayer, SelectionLayer, SubagentLayer
from widgets.chart_parts import (
    COLUMN_WIDTH,
    TIMELINE_REGIONS,
    CallAxis,
    CallRecord,
    SceneTips,
    TokenAxis,
    kept_as_drawn,
    set_line,
    short_tokens,
    x_range,
)
from widgets.chart_parts import Timeline as _Timeline
from widgets.chart_split import Cut, SplitBars, SplitCurve
from widgets.chart_text import across, column_tooltip, thin, timeline_header, timeline_legend
from widgets.compaction_text import compaction_tooltip as _compaction_tip
from widgets.compaction_text import subagent_tooltip as _subagent_tip
from widgets.theme import REGION_LABELS, Palette, palette

CACHE_ON_TIP = "Split each call into cache read / cache write / uncached input, with the cache hit rate"
CACHE_OFF_TIP = "No provider cache figures in these calls"
INFERRED_LABEL = "System prompt + tools (inferred)"
FIT_BELOW = 0.2  # fit to the data by itself while everything drawn is under this share of the window
FIT_TIP = ("Scale the chart to the calls and the next request instead of the whole window (lines above the scale "
           "are named at the top right); untick to see the whole window")
FIT_ROOM = 1.08  # the y axis reaches this much above the highest thing drawn


class ContextChart(QWidget):
    """Stacked bar of the next request + stacked timeline of calls (see the module docstring)."""

    call_clicked = Signal(int)
    compaction_clicked = Signal(object)  # CompactionRecord
    diff_requested = Signal(int, int)
    subagent_requested = Signal(str)

    def __init__(
        self, parent: QWidget | None = None, *, pal: Palette | None = None
    ) -> None:
        super().__init__(parent)
        self._pal = pal or palette()
        self._snapshot: ContextSnapshot | None = None
        self._draft_override: int | None = None
        self._timeline = _Timeline()
        self._dirty_bar = True
        self._dirty_timeline = True
        self._fit: bool | None = None  # the user's choice; None: by itself (FIT_BELOW)
        self._fitted = False  # the scale fits the data now
        self._offscale = ""
        self._offscale_html = ""  # the label's HTML as last set
        self._lines_of: ContextSnapshot | None = None  # the next request the lines were last drawn with
        self._x_target: tuple[float, float] | None = None  # the timeline's x range as set (x_range)
        self.redraws = 0  # number of applied updates (tests, soak)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(4)

        self._title = QLabel("Next request")
        tf = self._title.font()
        tf.setBold(True)
        self._title.setFont(tf)
        layout.addWidget(self._title)
        self._bar = RequestBar(layout, self._pal)  # (a) the next request: header, bar, legend
        self._build_timeline(layout, tf)
        self._tips = SceneTips(self._tl_plot, self._tip_at)
        self._tl_plot.scene().sigMouseClicked.connect(self._on_timeline_mouse_clicked)
        self._provider_symbols = True
        self._apply_palette()
        self.flush()

    def _build_timeline(self, layout: QVBoxLayout, tf: QFont) -> None:
        """(b) the timeline: its title row with the cache-view toggle, the plot, its legend."""
        self._tl_title = QLabel("Calls")
        self._tl_title.setFont(tf)
        layout.addSpacing(6)
        title_row = QHBoxLayout()
        title_row.setContentsMargins(0, 0, 0, 0)
        title_row.addWidget(self._tl_title)
        title_row.addStretch(1)
        self.fit_button = QCheckBox("Fit to data")  # the scale of the calls, not of the whole window
        self.fit_button.setToolTip(FIT_TIP)
        self.fit_button.toggled.connect(self._on_fit_button_toggled)
        title_row.addWidget(self.fit_button)
        self.cache_button = QCheckBox("Cache view")  # a checkable toggle that shows its state
        self.cache_button.setEnabled(False)
        self.cache_button.setToolTip(CACHE_OFF_TIP)
        self.cache_button.toggled.connect(self._on_cache_button_toggled)
        title_row.addWidget(self.cache_button)
        layout.addLayout(title_row)
        self._tl_header = QLabel("No calls yet")
        self._tl_header.setWordWrap(True)
        self._tl_header.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(self._tl_header)
        self._tl_axis_left = TokenAxis("left")
        self._tl_axis_bottom = CallAxis("bottom")
        self._tl_axis_right = PercentAxis("right")
        self._tl_plot = pg.PlotWidget(axisItems={
            "left": self._tl_axis_left, "bottom": self._tl_axis_bottom, "right": self._tl_axis_right})
        self._tl_plot.setMinimumHeight(150)
        tp = self._tl_plot.getPlotItem()
        tp.setMenuEnabled(False)
        tp.hideButtons()
        tp.setMouseEnabled(x=True, y=False)
        tp.layout.setContentsMargins(0, 4, 10, 0)
        tp.showGrid(x=False, y=True, alpha=0.25)
        tp.getViewBox().setLimits(xMin=-1)
        self._tl_bars: dict[str, SplitBars] = {}  # (each a frozen and a live part: widgets.chart_split)
        self._cut = Cut()
        for key in TIMELINE_REGIONS:
            self._tl_bars[key] = SplitBars(tp, x=np.zeros(0), height=np.zeros(0), y0=np.zeros(0), width=COLUMN_WIDTH,
                                           pen=None, brush=QColor(self._pal.regions[key]))
        nr = len(TIMELINE_REGIONS)
        self._ghost = pg.BarGraphItem(
            x=np.zeros(nr), height=np.zeros(nr), y0=np.zeros(nr), width=COLUMN_WIDTH, pen=None,
            brushes=[self._ghost_color(k) for k in TIMELINE_REGIONS],
        )
        tp.addItem(self._ghost)
        self._window_curve = pg.PlotDataItem(connect="finite")
        self._threshold_curve = pg.PlotDataItem(connect="finite")
        for item in (self._window_curve, self._threshold_curve):  # across the chart: no part of its x range
            tp.addItem(item, ignoreBounds=True)
        self._raw_curve = SplitCurve(tp)
        self._provider_curve = SplitCurve(tp)
        self._compaction_marks = CompactionLayer(tp)
        self._offscale_label = pg.TextItem("", anchor=(1, 0))  # fitted: the lines above the scale, named
        self._offscale_label.setVisible(False)
        tp.addItem(self._offscale_label, ignoreBounds=True)
        tp.getViewBox().sigRangeChanged.connect(self._place_offscale)
        self._cache = CacheLayer(tp, self._tl_axis_right, self._pal)
        self._subagents = SubagentLayer(tp, self._pal)
        self._selection = SelectionLayer(tp, self._pal)
        self._inferred_label = pg.TextItem("inferred", anchor=(0, 0.5))
        self._inferred_label.setVisible(False)
        tp.addItem(self._inferred_label)
        kept_as_drawn(self._tl_axis_left, self._tl_axis_right, *(i for b in self._tl_bars.values() for i in b.items),
                      *self._raw_curve.curves, *self._provider_curve.curves, self._window_curve.curve,
                      self._threshold_curve.curve)
        layout.addWidget(self._tl_plot, 1)
        self._tl_legend = QLabel()
        self._tl_legend.setWordWrap(True)
        self._tl_legend.setTextFormat(Qt.TextFormat.RichText)
        self._tl_legend.setMinimumHeight(self._tl_legend.fontMetrics().height() + 2)  # never under the plot
        layout.addWidget(self._tl_legend)

    # ----------------------------------------------------------------- public setters
    def set_snapshot(self, snapshot: ContextSnapshot | None) -> None:
        """Show the next request (bar (a), legend, ghost column). The snapshot shown already (the window hears
        of each twice: with the context state and on its own) and no draft over it: nothing to draw again."""
        if snapshot is not None and snapshot is self._snapshot and self._draft_override is None:
            return
        self._snapshot = snapshot
        self._draft_override = None
        self._dirty_bar = True
        self.flush()
        if self._timeline.n == 0:  # the header says what the lone (ghost) column is
            self._tl_header.setText(self._timeline_header())

    def set_draft_tokens(self, n: int) -> None:
        """Update only the draft region (the app calls it while the user types)."""
        self._draft_override = max(0, int(n))
        self._dirty_bar = True
        self.flush()

    def set_timeline(
        self,
        records: Sequence[CallRecord],
        compactions: Sequence[CompactionRecord] = (),
    ) -> None:
        """Replace the timeline with these calls (in call order) and compaction events."""
        self._timeline.clear()
        self._cut.stale = True  # (the frozen columns drawn again)
        self._selection.index = None
        for record in records:
            self._timeline.append(record)
        self._compaction_marks.clear()
        for event in compactions:
            self._compaction_marks.add(event, self._timeline)
        self._dirty_timeline = True
        self.flush()

    def append_call(self, record: CallRecord) -> None:
        """Add one column (one LLM call) to the timeline."""
        self._timeline.append(record)
        self._dirty_timeline = True
        self.flush()

    def update_last_call(self, record: CallRecord) -> None:
        """Replace the last column (a followed call whose figures grew)."""
        if self._timeline.n:
            self._timeline.replace_last(record)
            self._dirty_timeline = True
            self.flush()

    def add_compaction(self, event: CompactionRecord) -> None:
        """Add one compaction marker (after its ``calls_before`` calls, else the last call made before its ``ts``)."""
        self._compaction_marks.add(event, self._timeline)
        self._dirty_timeline = True
        self.flush()

    def clear(self) -> None:
        self._snapshot = None
        self._draft_override = None
        self._timeline.clear()
        self._cut.stale = True  # (the frozen columns drawn again)
        self._compaction_marks.clear()
        self._subagents.set_marks([])
        self._selection.index = None
        self._dirty_bar = self._dirty_timeline = True
        self.flush()

    def set_palette(self, pal: Palette) -> None:
        self._pal = pal
        self._apply_palette()
        self._dirty_bar = self._dirty_timeline = True
        self.flush()

    def flush(self) -> None:
        """Redraw the parts that changed. The timeline's ranges are set here, at once (:func:`x_range`, the y
        scale): pyqtgraph's auto range would compute them when the view is painted, and a range set in the paint
        asks for a second paint of the whole plot (two paints a new call)."""
        if self._dirty_timeline or (self._dirty_bar and self._snapshot is not self._lines_of):  # (not a draft)
            fitted = self._fit_now()
            if fitted != self._fitted:  # both scales follow
                self._fitted = fitted
                self._dirty_bar = self._dirty_timeline = True
            self._sync_fit_button()
        if self._dirty_bar:
            self._update_bar()
            self._dirty_bar = False
        if self._dirty_timeline:
            self._update_timeline()
            self._dirty_timeline = False
        self.redraws += 1

    # ----------------------------------------------------------------- introspection
    def bar_segments(self) -> dict[str, tuple[float, float]]:
        return self._bar.segments()

    def legend_text(self, region: str) -> str:
        return self._bar.legend.row_text(region)

    def header_text(self) -> str:
        return self._bar.header.text()

    def timeline_header_text(self) -> str:
        return self._tl_header.text()

    def column_count(self) -> int:
        return self._timeline.n

    def column_tops(self) -> np.ndarray:
        """The estimate (stack top) of every call."""
        return self._timeline.values[:, : self._timeline.n].sum(axis=0)

    def provider_series(self) -> np.ndarray:
        return self._timeline.provider[: self._timeline.n].copy()

    def set_fit_to_data(self, on: bool | None) -> None:
        """Fit the scales to the data (True), show the whole window (False), or choose by itself (None)."""
        self._fit = on
        self._dirty_bar = self._dirty_timeline = True
        self.flush()

    def fit_to_data(self) -> bool:
        """True while the scales fit the data rather than the whole window."""
        return self._fitted

    def timeline_y_range(self) -> tuple[float, float]:
        lo, hi = self._tl_plot.getPlotItem().getViewBox().viewRange()[1]
        return float(lo), float(hi)

    def offscale_text(self) -> str:
        """The lines above the fitted scale as the chart names them ("" when none is)."""
        return self._offscale

    def line_span(self, name: str) -> tuple[float, float]:
        """The x extent of the "window" or "threshold" line as drawn (finite points)."""
        curve = self._window_curve if name == "window" else self._threshold_curve
        x, y = curve.getData()
        if x is None or not len(x):
            return (math.nan, math.nan)
        finite = np.isfinite(np.asarray(y, dtype=float))
        xs = np.asarray(x, dtype=float)[finite]
        return (float(xs.min()), float(xs.max())) if len(xs) else (math.nan, math.nan)

    def legend_accuracy(self, region: str) -> str:
        """The legend's mark of how ``region`` was obtained (exact, est., cal., inferred, set; "" : none)."""
        return self._bar.legend.accuracy_mark(region)

    def set_cache_view(self, on: bool) -> None:
        """Show the cache view (when the calls have cache figures) or the region view."""
        self.cache_button.setChecked(on)

    def cache_view(self) -> bool:
        """True while the cache view is shown."""
        return self._cache.visible

    def cache_available(self) -> bool:
        """True when some call has the provider's cache figures (the toggle is enabled)."""
        return self._timeline.cached > 0

    def cache_segments(self, index: int) -> dict[str, tuple[float, float]]:
        """Call ``index`` in the cache view: ``cache_read`` / ``cache_write`` / ``uncached`` → (bottom, height)."""
        return self._cache.segments(index)

    def hit_rate_series(self) -> np.ndarray:
        """The cache hit rate (cache read / prompt) of every call, 0–1, NaN where unknown."""
        return self._cache.rate_series()

    def rewrite_calls(self) -> list[int]:
        """0-based indexes of the calls marked ★ as re-writes of the cached prefix (cache view)."""
        return list(self._cache.summary.rewrites) if self._cache.visible else []

    def rewrite_marker_positions(self) -> list[tuple[float, float]]:
        x, y = self._cache.rewrites.getData()
        return [(float(a), float(b)) for a, b in zip(x, y, strict=True)]

    def system_label(self) -> str:
        """The legend's name of the system region ("… (inferred)" for an imported session's prefix)."""
        return self._bar.legend.name("system")

    def export_image(self, fmt: str) -> bytes:
        """The timeline plot as it is drawn now (region or cache view), as PNG or SVG bytes, at the
        plot's size in pixels (pyqtgraph's exporters on the plot's scene, so the right axis is in)."""
        from widgets.chart_export import png_bytes, svg_bytes

        self.flush()
        scene = self._tl_plot.scene()
        scene.prepareForPaint()  # the auto-range of the data just set, as a repaint would apply it
        if fmt == "svg":
            return svg_bytes(scene)
        if fmt != "png":
            raise ValueError(f"unknown image format {fmt!r} (png or svg)")
        return png_bytes(scene, self._tl_plot.width(), self._tl_plot.height())

    def _on_cache_button_toggled(self, on: bool) -> None:
        self._dirty_timeline = True
        self.flush()

    def _on_fit_button_toggled(self, on: bool) -> None:
        self.set_fit_to_data(on)  # the user's choice, kept

    # ----------------------------------------------------------------- scale
    def _data_peak(self) -> float:
        """The highest thing drawn but the window and threshold lines: columns, provider and raw lines,
        compaction markers, the next request's column."""
        peaks = [self._timeline.peaks()[0], *self._compaction_marks.peaks()]
        if self._snapshot is not None:
            peaks.append(float(self._snapshot.prompt))
        return max(peaks)

    def _lines(self) -> tuple[float, float]:
        """The highest window and threshold drawn (0 when none)."""
        _, window, threshold = self._timeline.peaks()
        s = self._snapshot
        return max(window, float(s.window or 0) if s else 0.0), max(threshold, float(s.threshold_tokens or 0) if s
                                                                    else 0.0)

    def _fit_now(self) -> bool:
        peak, (window, threshold) = self._data_peak(), self._lines()
        top = max(window, threshold)
        if peak <= 0 or top <= peak:
            return False  # nothing drawn, or nothing above it to leave out
        return self._fit if self._fit is not None else peak < FIT_BELOW * top

    def _sync_fit_button(self) -> None:
        peak, (window, threshold) = self._data_peak(), self._lines()
        useful = peak > 0 and max(window, threshold) > peak
        b = self.fit_button
        if b.isEnabled() != useful:
            b.setEnabled(useful)
        if b.isChecked() != self._fitted:
            b.blockSignals(True)
            b.setChecked(self._fitted)
            b.blockSignals(False)

    def _scale_top(self) -> float:
        """The timeline's y top: everything drawn, or (fitted) the data and the lines just above it."""
        peak, (window, threshold) = self._data_peak(), self._lines()
        if not self._fitted:
            top = max(peak, window, threshold)
        else:
            top = max([peak, *(v for v in (window, threshold) if v <= peak * FIT_ROOM)])
        return top * FIT_ROOM if top > 0 else 1.0

    def _set_offscale(self, top: float) -> None:
        """Name the lines above the scale (fitted) at the top right of the timeline."""
        pal = self._pal
        (window, threshold), parts = self._lines(), []
        if self._fitted:
            if window > top:
                parts.append((pal.limit, f"window {short_tokens(window)} ↑"))
            if threshold > top and not self._cache.visible:
                parts.append((pal.threshold, f"threshold {short_tokens(threshold)} ↑"))
        self._offscale = " · ".join(t for _, t in parts)
        shown = " &nbsp; ".join(f"<span style='color:{c}'>{html.escape(t)}</span>" for c, t in parts)
        if shown != self._offscale_html:  # (the same names in the same colours: not laid out again)
            self._offscale_html = shown
            self._offscale_label.setHtml(shown)
        self._offscale_label.setVisible(bool(parts))
        self._place_offscale()

    def _place_offscale(self, *_args: Any) -> None:
        if not self._offscale_label.isVisible():
            return
        (_, right), (_, top) = self._tl_plot.getPlotItem().getViewBox().viewRange()
        self._offscale_label.setPos(right, top)

    def compaction_count(self) -> int:
        return len(self._compaction_marks.events)

    def compaction_x(self, index: int) -> float:
        return self._compaction_marks.x[index]

    def column_tooltip(self, index: int) -> str:
        return column_tooltip(self._timeline, index, self._cache.tooltip_lines(index) if self._cache.visible else None)

    def compaction_tooltip(self, index: int) -> str:
        return _compaction_tip(self._compaction_marks.events[index])

    def set_subagents(self, marks: Sequence[SubagentMark]) -> None:
        """Mark where subagents ran (``SessionView.subagents``: ``call_index``, ``id``, ``model``, …)."""
        self._subagents.set_marks(marks)
        self._set_timeline_legend()
        self._dirty_timeline = True
        self.flush()

    def subagent_count(self) -> int:
        return len(self._subagents.drawn)

    def subagent_positions(self) -> list[tuple[float, float]]:
        return list(zip(self._subagents.x, self._subagents.y, strict=True))

    def subagent_tooltip(self, index: int) -> str:
        return _subagent_tip(self._subagents.marks[self._subagents.drawn[index]])

    def selected_call(self) -> int | None:
        return self._selection.index

    def select_call(self, index: int | None) -> None:
        """Pick call ``index`` (0-based; None: none) as the first call of a diff."""
        self._selection.index = index if index is None or 0 <= index < self._timeline.n else None
        tl = self._timeline
        self._selection.update(np.fmax(tl.values[:, : tl.n].sum(axis=0), tl.provider[: tl.n]))

    def call_menu(self, index: int) -> QMenu:
        """The right-click menu of column ``index``: diff with the previous call, diff from the picked one."""
        menu = QMenu(self)
        prev = menu.addAction(f"Diff with previous call ({index} → {index + 1})")
        prev.setEnabled(index > 0)
        prev.triggered.connect(lambda: self.diff_requested.emit(index, index + 1))
        picked = self._selection.index
        if picked is not None and picked != index:
            frm = menu.addAction(f"Diff from call {picked + 1} (picked) → {index + 1}")
            frm.triggered.connect(lambda: self.diff_requested.emit(picked + 1, index + 1))
        pick = menu.addAction(f"Pick call {index + 1} for a diff (then Shift-click another)")
        pick.triggered.connect(lambda: self.select_call(index))
        return menu

    # ----------------------------------------------------------------- internals
    def _ghost_color(self, key: str) -> QColor:
        c = QColor(self._pal.regions[key])
        c.setAlpha(90)
        return c

    def _apply_palette(self) -> None:
        pal = self._pal
        bg = QColor(pal.background)
        fg = QColor(pal.muted)
        self._bar.set_palette(pal)
        self._tl_plot.setBackground(bg)
        for name in ("bottom", "left"):
            ax = self._tl_plot.getPlotItem().getAxis(name)
            ax.setPen(pg.mkPen(fg))
            ax.setTextPen(pg.mkPen(QColor(pal.text)))
        for key, item in self._tl_bars.items():
            item.setOpts(brush=QColor(pal.regions[key]), pen=None)
        self._ghost.setOpts(brushes=[self._ghost_color(k) for k in TIMELINE_REGIONS])
        self._window_curve.setPen(pg.mkPen(QColor(pal.limit), width=1.5, style=Qt.PenStyle.DashLine))
        self._threshold_curve.setPen(pg.mkPen(QColor(pal.threshold), width=1.5, style=Qt.PenStyle.DashLine))
        self._raw_curve.setPen(pg.mkPen(QColor(pal.estimate), width=1.5, style=Qt.PenStyle.DotLine))
        self._provider_curve.setPen(pg.mkPen(QColor(pal.provider), width=2))
        self._provider_curve.setSymbolBrush(QColor(pal.provider))
        self._provider_curve.setSymbolPen(None)
        self._compaction_marks.set_palette(pal)
        self._cache.set_palette(pal)
        self._subagents.set_palette(pal)
        self._selection.set_palette(pal)
        self._inferred_label.setColor(QColor(pal.background))
        plate = QColor(pal.background)
        plate.setAlpha(225)  # the lines' names stay readable over a column
        self._offscale_label.fill = pg.mkBrush(plate)
        self._offscale_label.update()
        self._set_timeline_legend()

    def _update_bar(self) -> None:
        s = self._snapshot
        self._bar.show(s, self._draft_override, self._fitted, self._pal)
        self._set_ghost(s)
        if s is None:
            if not self._dirty_timeline:
                self._update_lines()
        elif not self._dirty_timeline and self._lines_of is not s:  # (a draft alone: no change; else the
            self._update_lines()                                    # timeline's update draws them)

    def _set_ghost(self, s: ContextSnapshot | None) -> None:
        nr = len(TIMELINE_REGIONS)
        if s is None:
            self._ghost.setOpts(x=np.zeros(nr), y0=np.zeros(nr), height=np.zeros(nr))
            return
        heights = np.array([float(getattr(s, k)) for k in TIMELINE_REGIONS])
        y0 = np.concatenate(([0.0], np.cumsum(heights)[:-1]))
        x = np.full(nr, float(self._timeline.n + 1))
        self._ghost.setOpts(x=x, y0=y0, height=heights)

    def _update_timeline(self) -> None:
        tl = self._timeline
        n = tl.n
        x = np.arange(1, n + 1, dtype=float)
        values = tl.values[:, :n]
        base = np.zeros(n)
        moved = self._cut.place(n)  # (the calls before the cut drawn again only when it moved)
        for r, key in enumerate(TIMELINE_REGIONS):
            self._tl_bars[key].set(x, base, values[r], self._cut.at, moved)
            base = base + values[r]
        want_symbols = n <= 150
        if want_symbols != self._provider_symbols:
            self._provider_symbols = want_symbols
        provider = tl.provider[:n].copy()
        dots = want_symbols and bool(np.isfinite(provider).any())  # no figure at all (SWE-agent): no dots to bound
        raw = tl.raw[:n].copy()
        self._provider_curve.set(x, provider, self._cut.at, moved, symbol="o" if dots else None, symbolSize=5)
        self._raw_curve.set(x, raw, self._cut.at, moved)
        self._compaction_marks.draw()
        tops = np.fmax(values.sum(axis=0), tl.provider[:n])
        self._subagents.update(tops)
        self._selection.update(tops)
        if self._snapshot is not None:
            self._set_ghost(self._snapshot)
        self._update_view_mode()
        self._tl_header.setText(self._timeline_header())
        self._set_x_range(n)
        self._update_lines()

    def _set_x_range(self, n: int) -> None:
        """The timeline's x range: every column and the next request's, with room on the right that is taken in
        steps (:func:`x_range`), so that the axis and its ticks stay as they are for most new calls."""
        self._x_target = x_range(n, self._x_target)
        vb = self._tl_plot.getPlotItem().getViewBox()
        if vb.state["autoRange"][0] is not False:
            vb.enableAutoRange(axis=pg.ViewBox.XAxis, enable=False)
        lo, hi = self._x_target
        (now_lo, now_hi), _ = vb.viewRange()
        if not (math.isclose(now_lo, lo, abs_tol=1e-9) and math.isclose(now_hi, hi, abs_tol=1e-9)):
            vb.setXRange(lo, hi, padding=0)  # (a pan or zoom of the user's: back to every column, as before)

    def _update_lines(self) -> None:
        """The window and threshold lines across the chart (the calls', then the next request's) and the y axis
        (the whole window, or fitted to the data), with the lines above it named: after the calls or the next
        request changed."""
        tl, s = self._timeline, self._snapshot
        n = tl.n
        self._lines_of = s
        set_line(self._window_curve, *thin(*across(tl.window[:n], float(s.window) if s else math.nan)))
        set_line(self._threshold_curve, *thin(*across(tl.threshold[:n], float(s.threshold_tokens) if s else math.nan)))
        top = self._scale_top()
        vb = self._tl_plot.getPlotItem().getViewBox()
        if vb.state["autoRange"][1] is not False:
            vb.enableAutoRange(axis=pg.ViewBox.YAxis, enable=False)
        if vb.state["targetRange"][1] != [0, top]:
            vb.setYRange(0, top, padding=0)
        self._set_offscale(top)

    def _timeline_header(self) -> str:
        cache = self._cache.header_html(self._pal) if self._cache.visible else None
        return timeline_header(self._timeline, len(self._compaction_marks.events), self._pal,
                               next_request=self._snapshot is not None, cache_header=cache)

    def _calls_after_compaction(self) -> set[int]:
        """0-based indexes of the calls that come first after a compaction marker."""
        return self._compaction_marks.calls_after(self._timeline.n)

    def _update_view_mode(self) -> None:
        """Region columns or cache columns; the inferred-prefix label; the legend under the plot."""
        tl = self._timeline
        available = tl.cached > 0
        if self.cache_button.isEnabled() != available:
            self.cache_button.setEnabled(available)
            self.cache_button.setToolTip(CACHE_ON_TIP if available else CACHE_OFF_TIP)
        on = self.cache_button.isChecked() and available
        if on:
            self._cache.update(tl.records[: tl.n], self._calls_after_compaction())
        if on != self._cache.visible:
            self._cache.set_visible(on)
            for item in (*self._tl_bars.values(), self._ghost, self._provider_curve, self._raw_curve,
                         self._threshold_curve):
                item.setVisible(not on)
        inferred = tl.n > 0 and tl.records[-1].snapshot.prefix_source == "inferred"
        self._bar.legend.set_name("system", INFERRED_LABEL if inferred else REGION_LABELS["system"])
        self._inferred_label.setVisible(inferred and not on)
        if inferred:
            system = tl.values[TIMELINE_REGIONS.index("system"), : tl.n]
            self._inferred_label.setPos(1 - COLUMN_WIDTH / 2, float(np.median(system)) / 2)
        self._set_timeline_legend()

    def _set_timeline_legend(self) -> None:
        self._tl_legend.setText(timeline_legend(self._pal, subagents=bool(self._subagents.marks),
                                                cache_legend=self._cache.legend_html(self._pal)
                                                if self._cache.visible else None))

    # ----------------------------------------------------------------- mouse
    def _hit(self, scene_pos: QPointF) -> tuple[str, int] | None:
        vb = self._tl_plot.getPlotItem().getViewBox()
        if not vb.sceneBoundingRect().contains(scene_pos):
            return None
        p = vb.mapSceneToView(scene_pos)
        px, py = vb.viewPixelSize()
        sub = self._subagents.hit(p.x(), p.y(), px, py)
        if sub is not None:
            return ("subagent", self._subagents.drawn.index(sub))
        marker = self._compaction_marks.nearest(p.x(), max(0.45, 6 * px))
        if marker is not None:
            return ("compaction", marker)
        col = round(p.x()) - 1
        if 0 <= col < self._timeline.n and abs(p.x() - (col + 1)) <= COLUMN_WIDTH / 2 + px:
            return ("call", col)
        return None

    def _tooltip(self, hit: tuple[str, int]) -> str:
        kind, index = hit
        if kind == "compaction":
            return self.compaction_tooltip(index)
        if kind == "subagent":
            return self.subagent_tooltip(index)
        return self.column_tooltip(index)

    def _tip_at(self, scene_pos: QPointF) -> str | None:
        hit = self._hit(scene_pos)
        return self._tooltip(hit) if hit is not None else None

    def _on_timeline_mouse_clicked(self, event: Any) -> None:
        hit = self._hit(event.scenePos())
        if hit is None:
            return
        kind, index = hit
        button = event.button() if hasattr(event, "button") else Qt.MouseButton.LeftButton
        mods = event.modifiers() if hasattr(event, "modifiers") else Qt.KeyboardModifier.NoModifier
        if kind == "compaction":
            self.compaction_clicked.emit(self._compaction_marks.events[index])
        elif kind == "subagent":
            mark = self._subagents.marks[self._subagents.drawn[index]]
            if mark.session:
                self.subagent_requested.emit(mark.session)
        elif button == Qt.MouseButton.RightButton:
            self.call_menu(index).popup(self._tl_plot.mapToGlobal(self._tl_plot.mapFromScene(event.scenePos())))
        elif mods & (Qt.KeyboardModifier.ShiftModifier | Qt.KeyboardModifier.ControlModifier) and \
                self._selection.index is not None and self._selection.index != index:
            self.diff_requested.emit(self._selection.index + 1, index + 1)
        else:
            self.select_call(index)
            self.call_clicked.emit(index)

