"""(a) of the context chart (:mod:`widgets.context_chart`): the next request as one stacked horizontal bar.

:class:`RequestBar` draws, under the chart's title, the header (prompt + reserve + draft of the window, the
accuracy, whose window it is, over the threshold or the window), the bar (system, summary, history shades, tool
definitions, draft, output reserve, free), the auto-compaction threshold and the hard limit as vertical lines, and
the legend (tokens, % of the window, how each region was obtained). Fitted to the data, the bar has its own scale
and the lines past it are named at its right end. Plot items are created once; updates only call ``setOpts``.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout

from engine.model.snapshot import ContextSnapshot
from widgets.chart_parts import Legend, TokenAxis, short_tokens
from widgets.theme import REGION_ORDER, Palette, format_tokens, percent

ACCURACY_LABELS = {
    "estimated": "estimated (heuristic, no provider report yet)",
    "exact": "exact (model tokenizer)",
    "calibrated": "calibrated on the provider's count",
}


class RequestBar:
    """The header, the bar with its threshold and window lines, and the legend, added to ``layout`` in that
    order (see the module docstring)."""

    def __init__(self, layout: QVBoxLayout, pal: Palette) -> None:
        self.header = QLabel("No request yet")
        self.header.setWordWrap(True)
        self.header.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(self.header)
        self.axis = TokenAxis("bottom")
        self.plot = pg.PlotWidget(axisItems={"bottom": self.axis})
        self.plot.setFixedHeight(64)
        self.plot.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        bp = self.plot.getPlotItem()
        bp.hideAxis("left")
        bp.setMenuEnabled(False)
        bp.hideButtons()
        bp.setMouseEnabled(x=False, y=False)
        bp.getViewBox().setDefaultPadding(0.0)
        bp.setYRange(-0.5, 0.5, padding=0)
        bp.layout.setContentsMargins(4, 2, 10, 0)
        n = len(REGION_ORDER)
        self.item = pg.BarGraphItem(
            x0=np.zeros(n), width=np.zeros(n), y=np.zeros(n), height=0.9, pen=None,
            brushes=[QColor(pal.regions[k]) for k in REGION_ORDER],
        )
        bp.addItem(self.item)
        self.threshold_line = pg.InfiniteLine(angle=90, movable=False)
        self.limit_line = pg.InfiniteLine(angle=90, movable=False)
        bp.addItem(self.threshold_line)
        bp.addItem(self.limit_line)
        self.offscale = pg.TextItem("", anchor=(1, 0.5))  # fitted: the lines past the bar's scale, named
        self.offscale.setVisible(False)
        bp.addItem(self.offscale, ignoreBounds=True)
        layout.addWidget(self.plot)
        self.legend = Legend()
        layout.addWidget(self.legend)

    def set_palette(self, pal: Palette) -> None:
        """Re-colour the bar, its lines, its axis and its legend (the plate under the lines' names too)."""
        self.plot.setBackground(QColor(pal.background))
        for name in ("bottom", "left"):
            ax = self.plot.getPlotItem().getAxis(name)
            ax.setPen(pg.mkPen(QColor(pal.muted)))
            ax.setTextPen(pg.mkPen(QColor(pal.text)))
        self.item.setOpts(brushes=[QColor(pal.regions[k]) for k in REGION_ORDER])
        self.threshold_line.setPen(pg.mkPen(QColor(pal.threshold), width=2, style=Qt.PenStyle.DashLine))
        self.limit_line.setPen(pg.mkPen(QColor(pal.limit), width=2.5))
        self.legend.set_palette(pal)
        plate = QColor(pal.background)
        plate.setAlpha(225)  # the lines' names stay readable over the bar
        self.offscale.fill = pg.mkBrush(plate)
        self.offscale.update()

    def segments(self) -> dict[str, tuple[float, float]]:
        """Region → (start, width) in tokens, as drawn."""
        x0 = self.item.opts["x0"]
        w = self.item.opts["width"]
        return {k: (float(x0[i]), float(w[i])) for i, k in enumerate(REGION_ORDER)}

    def show(self, s: ContextSnapshot | None, draft: int | None, fitted: bool, pal: Palette) -> None:
        """Draw the next request ``s`` (None: none yet), its draft replaced by ``draft`` when given, on the whole
        window's scale or (``fitted``) on the bar's own."""
        if s is None:
            self._show_none()
            return
        regions = s.detailed_regions(draft)
        widths = np.array([float(regions[k]) for k in REGION_ORDER])
        x0 = np.concatenate(([0.0], np.cumsum(widths)[:-1]))
        self.item.setOpts(x0=x0, width=widths)
        window = max(1, s.window)
        used = sum(regions[k] for k in REGION_ORDER if k != "free")
        self.threshold_line.setVisible(True)
        self.limit_line.setVisible(True)
        self.threshold_line.setValue(s.threshold_tokens)
        self.limit_line.setValue(s.window)
        self.plot.getPlotItem().setXRange(0, self._scale(s, used, fitted, pal), padding=0)
        accuracy = s.region_accuracy()
        for key in REGION_ORDER:
            self.legend.set_row(key, regions[key], percent(regions[key], window))
            self.legend.set_accuracy(key, accuracy[key])
        self.legend.set_row("threshold", s.threshold_tokens, percent(s.threshold_tokens, window))
        self.legend.set_row("limit", s.window, "100.0%")
        self.header.setText(_header_html(s, regions, used, pal))

    def _show_none(self) -> None:
        n = len(REGION_ORDER)
        self.item.setOpts(x0=np.zeros(n), width=np.zeros(n))
        self.threshold_line.setVisible(False)
        self.limit_line.setVisible(False)
        self.header.setText("No request yet")
        for key in Legend.KEYS:
            self.legend.set_row(key, 0, "—")
            self.legend.set_accuracy(key, "")
        self.offscale.setVisible(False)
        self.plot.getPlotItem().setXRange(0, 1, padding=0)

    def _scale(self, s: ContextSnapshot, used: int, fitted: bool, pal: Palette) -> float:
        """The bar's right end: past the window, or (``fitted``) just past what the request uses, the lines past
        it named there."""
        if not fitted:
            self.offscale.setVisible(False)
            return max(max(1, s.window), used) * 1.01
        right = max(1.0, used * 1.05)
        past = []
        if s.threshold_tokens > right:
            past.append((pal.threshold, f"threshold {short_tokens(s.threshold_tokens)}"))
        if s.window > right:
            past.append((pal.limit, f"window {short_tokens(s.window)}"))
        self.offscale.setHtml(" · ".join(f"<span style='color:{c}'>{html.escape(t)}</span>" for c, t in past) + " →")
        self.offscale.setPos(right, 0)
        self.offscale.setVisible(bool(past))
        return right


def _header_html(s: ContextSnapshot, regions: dict[str, int], used: int, pal: Palette) -> str:
    """The line above the bar: prompt + reserve (+ draft) of the window, the accuracy, whose window it is, and
    whether the request is over the compaction threshold or the window."""
    acc = ACCURACY_LABELS.get(s.accuracy, s.accuracy)
    parts = [
        f"<b>{format_tokens(s.prompt)}</b> prompt + {format_tokens(s.reserve)} reserve"
        + (f" + {format_tokens(regions['draft'])} draft" if regions["draft"] else "")
        + f" of <b>{format_tokens(s.window)}</b> ({percent(used, max(1, s.window))})",
        f"<span style='color:{pal.muted}'>{acc}</span>",
    ]
    if s.window_source == "observed":  # no figure for the model (yet): the window its prompts show, not the model's
        whose = f" ({html.escape(s.model)})" if s.model else ""
        parts.append(f"<span style='color:{pal.muted}'>window observed from the prompts{whose}</span>")
    elif s.model:  # whose window it is (an imported session's: the model that made it)
        parts.append(f"<span style='color:{pal.muted}'>window of {html.escape(s.model)}</span>")
    if used > s.window:
        parts.append(
            f"<span style='color:{pal.error}'><b>over the window by "
            f"{format_tokens(used - s.window)}</b></span>"
        )
    elif used > s.threshold_tokens:
        parts.append(f"<span style='color:{pal.warning}'><b>over the compaction threshold</b></span>")
    return " · ".join(parts)
