"""The Usage view: what the agents on this machine spent, over a date range.

Draws a usage report as plain data (the dict of ``engine.usage.report.UsageReport.to_json()``): cost or
tokens per day as bars stacked by model (pyqtgraph; the bar items are made once and updated), the
sessions (sortable: cost, calls, peak fullness, compactions, cache hit rate, the agent's own cost;
double-click opens one), the totals per project and per model, and the tools whose results take the
most context. A cost with ``+`` is a lower bound: some calls have no price (their model is not in
litellm's table).

Public API of :class:`UsageView`
--------------------------------
Signals:
    refresh_requested(str, str, bool)  since, until (ISO days, "" for open), update: the range changed
                                  (False) or Refresh was pressed (True: read new session files first)
    session_opened(str)           the session file to open (double-click, Enter)
Methods:
    set_report(report)            show a report (dict); ``updating`` says newer figures follow
    date_range() -> (str, str)    since, until as chosen ("" for open)
    set_days(n)                   choose "the last n days" (0: all) and ask for them
    set_metric("cost" | "tokens")
    set_palette(palette)
    bar_totals() -> list[float]   per day, the stacked total drawn (tests)
    series() -> list[str]         the models stacked, bottom first (tests)
    day_tooltip(index) -> str     the tooltip of day ``index`` (tests)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, timedelta
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QDate, QPointF, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDateEdit,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from widgets.chart_parts import short_tokens
from widgets.formatting import format_usd
from widgets.theme import Palette, palette

MAX_MODELS = 8  # models drawn on their own; the others stack as one "other models" bar
OTHER = "other models"
COLORS = ("#2563eb", "#f59e0b", "#0d9488", "#8b5cf6", "#ec4899", "#64748b", "#16a34a", "#dc2626", "#a3a3a3")
PRESETS = (("Last 7 days", 7), ("Last 30 days", 30), ("Last 90 days", 90), ("All time", 0), ("Custom", -1))
OPEN_DATE = QDate(2000, 1, 1)  # a date edit at its minimum: the range is open on that side
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
PATH_ROLE = Qt.ItemDataRole.UserRole + 2


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def usd_text(value: Any, unpriced: Any = 0) -> str:
    """"$1.23", "$1.23+" when some calls have no price, "unknown" when none has one."""
    v = _num(value)
    if v is None:
        return "unknown" if unpriced else ""
    return format_usd(v) + ("+" if unpriced else "")


def _pct(value: Any) -> str:
    v = _num(value)
    return "" if v is None else f"{100 * v:.0f} %"


def _int(value: Any) -> str:
    v = _num(value)
    return "" if v is None else f"{int(v):,}"


class _Item(QTableWidgetItem):
    """A cell that sorts by its number (None last) or its text."""

    def __lt__(self, other: QTableWidgetItem) -> bool:
        a, b = self.data(SORT_ROLE), other.data(SORT_ROLE)
        if isinstance(a, int | float) or isinstance(b, int | float):
            return (a if isinstance(a, int | float) else float("-inf")) < (
                b if isinstance(b, int | float) else float("-inf"))
        return self.text().lower() < other.text().lower()


class _DayAxis(pg.AxisItem):
    """Day numbers as MM-DD (the view keeps the first day)."""

    first: date | None = None

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        out = []
        for v in values:
            if self.first is None or abs(v - round(v)) > 1e-6 or v < 0:
                out.append("")
            else:
                out.append((self.first + timedelta(days=round(v))).strftime("%m-%d"))
        return out


class _ValueAxis(pg.AxisItem):
    """Dollars or tokens."""

    metric = "cost"

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        if self.metric == "cost":
            return [f"${v * scale:,.2f}" if spacing < 1 else f"${v * scale:,.0f}" for v in values]
        return [short_tokens(v * scale) for v in values]


def _table(headers: Sequence[str], first_width: int = 160) -> QTableWidget:
    t = QTableWidget(0, len(headers))
    t.setHorizontalHeaderLabels(list(headers))
    t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    t.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    t.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    t.verticalHeader().hide()
    t.setAlternatingRowColors(True)
    t.setWordWrap(False)
    header = t.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
    header.resizeSection(0, first_width)
    header.setStretchLastSection(True)
    return t


def _header_tip(table: QTableWidget, column: int, tip: str) -> None:
    item = table.horizontalHeaderItem(column)
    if item is not None:
        item.setToolTip(tip)


def _fill(table: QTableWidget, rows: Sequence[Sequence[tuple[str, Any]]], paths: Sequence[str] = ()) -> None:
    """Each cell a (text, sort value); numbers right-aligned."""
    table.setSortingEnabled(False)
    table.setRowCount(len(rows))
    for r, row in enumerate(rows):
        for c, (text, key) in enumerate(row):
            item = _Item(text)
            item.setData(SORT_ROLE, key)
            if isinstance(key, int | float):
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            if c == 0 and r < len(paths):
                item.setData(PATH_ROLE, paths[r])
                item.setToolTip(f"{text}\n{paths[r]}\n(double-click: open it read-only)")
            table.setItem(r, c, item)
    table.setSortingEnabled(True)


class UsageView(QWidget):
    """See the module docstring."""

    refresh_requested = Signal(str, str, bool)
    session_opened = Signal(str)

    def __init__(self, parent: QWidget | None = None, *, pal: Palette | None = None) -> None:
        super().__init__(parent)
        self._pal = pal or palette()
        self._report: dict[str, Any] = {}
        self._first: date | None = None
        self._days: list[str] = []
        self._series: list[str] = []
        self._values = np.zeros((0, 0))
        self._cost = np.zeros((0, 0))
        self._tokens = np.zeros((0, 0))
        self._totals = np.zeros(0)
        self._breakdown: dict[int, list[tuple[str, float | None, float, int]]] = {}
        self._metric = "cost"
        self._quiet = False

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(4)
        row = QHBoxLayout()
        self.preset = QComboBox()
        for label, days in PRESETS:
            self.preset.addItem(label, days)
        self.since_edit = QDateEdit()
        self.until_edit = QDateEdit()
        for edit, open_text in ((self.since_edit, "first call"), (self.until_edit, "today")):
            edit.setCalendarPopup(True)
            edit.setDisplayFormat("yyyy-MM-dd")
            edit.setMinimumDate(OPEN_DATE)
            edit.setSpecialValueText(open_text)  # shown at the minimum date: open on that side
        self.metric_box = QComboBox()
        self.metric_box.addItem("Cost (USD)", "cost")
        self.metric_box.addItem("Tokens", "tokens")
        self.refresh_button = QPushButton("Refresh")
        row.addWidget(self.preset)
        row.addWidget(QLabel("from"))
        row.addWidget(self.since_edit)
        row.addWidget(QLabel("to"))
        row.addWidget(self.until_edit)
        row.addSpacing(12)
        row.addWidget(self.metric_box)
        row.addStretch(1)
        row.addWidget(self.refresh_button)
        layout.addLayout(row)
        self.summary = QLabel("No figures yet")
        self.summary.setWordWrap(True)
        layout.addWidget(self.summary)

        split = QSplitter(Qt.Orientation.Vertical)
        top = QWidget()
        top_layout = QVBoxLayout(top)
        top_layout.setContentsMargins(0, 0, 0, 0)
        self._day_axis = _DayAxis("bottom")
        self._value_axis = _ValueAxis("left")
        self.plot = pg.PlotWidget(axisItems={"bottom": self._day_axis, "left": self._value_axis})
        p = self.plot.getPlotItem()
        p.setMenuEnabled(False)
        p.hideButtons()
        p.setMouseEnabled(x=False, y=False)
        p.showGrid(y=True, alpha=0.15)
        self._bars = [pg.BarGraphItem(x=[], height=[], y0=[], width=0.8, pen=None) for _ in range(MAX_MODELS + 1)]
        for bar in self._bars:
            p.addItem(bar)
            bar.setVisible(False)
        top_layout.addWidget(self.plot, 1)
        self.legend = QLabel()
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        top_layout.addWidget(self.legend)
        split.addWidget(top)

        self.tabs = QTabWidget()
        self.sessions = _table(["Session", "Agent", "Project", "Last call", "Cost", "Agent's cost", "Calls",
                                "Peak full", "Compactions", "Cache hits", "Models"], 220)
        _header_tip(self.sessions, 5, "The agent's own cost, from its cost records (Claude Code)")
        self.projects = _table(["Project", "Cost", "Calls", "Prompt tokens", "Output tokens", "Cache hits"])
        self.models = _table(["Model", "Cost", "Calls", "Prompt tokens", "Output tokens", "Cache hits", "Priced as"])
        self.tools = _table(["Tool", "Result tokens", "Results", "Sessions", "Largest result"])
        _header_tip(self.tools, 1, "Estimated tokens of the tool's results, in every session")
        self.tabs.addTab(self.sessions, "Sessions")
        self.tabs.addTab(self.projects, "Projects")
        self.tabs.addTab(self.models, "Models")
        self.tabs.addTab(self.tools, "Tools")
        split.addWidget(self.tabs)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        layout.addWidget(split, 1)

        self.preset.currentIndexChanged.connect(self._on_preset)
        self.since_edit.editingFinished.connect(self._on_dates_edited)
        self.until_edit.editingFinished.connect(self._on_dates_edited)
        self.metric_box.currentIndexChanged.connect(self._on_metric)
        self.refresh_button.clicked.connect(self._on_refresh_clicked)
        self.sessions.itemActivated.connect(self._on_session_activated)
        self.plot.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self._quiet = True
        self.preset.setCurrentIndex(1)  # the last 30 days
        self._apply_preset(30)
        self._quiet = False
        self.set_palette(self._pal)

    # ------------------------------------------------------------------ range

    def date_range(self) -> tuple[str, str]:
        def text(edit: QDateEdit) -> str:
            d = edit.date()
            return "" if d <= OPEN_DATE else d.toString("yyyy-MM-dd")

        return text(self.since_edit), text(self.until_edit)

    def set_days(self, days: int, update: bool = False) -> None:
        """Choose the last ``days`` days (0: all time) and ask for them."""
        index = next((i for i, (_, n) in enumerate(PRESETS) if n == days), None)
        self._quiet = True
        if index is not None:
            self.preset.setCurrentIndex(index)
        self._quiet = False
        self._apply_preset(days)
        self._request(update)

    def _apply_preset(self, days: int) -> None:
        if days < 0:
            return
        today = QDate.currentDate()
        self.since_edit.setDate(today.addDays(-(days - 1)) if days else OPEN_DATE)
        self.until_edit.setDate(OPEN_DATE)

    def _on_preset(self, index: int) -> None:
        if self._quiet:
            return
        days = int(self.preset.itemData(index))
        if days >= 0:
            self._apply_preset(days)
            self._request()

    def _on_dates_edited(self) -> None:
        custom = len(PRESETS) - 1
        if self.preset.currentIndex() != custom:
            self._quiet = True
            self.preset.setCurrentIndex(custom)
            self._quiet = False
        self._request()

    def _request(self, update: bool = False) -> None:
        self.refresh_requested.emit(*self.date_range(), update)

    def _on_refresh_clicked(self) -> None:
        self._request(True)

    # ------------------------------------------------------------------ data

    def set_metric(self, metric: str) -> None:
        self.metric_box.setCurrentIndex(max(0, self.metric_box.findData(metric)))

    def _on_metric(self, _index: int) -> None:
        self._metric = str(self.metric_box.currentData())
        self._value_axis.metric = self._metric
        self._draw_bars()

    def set_report(self, report: Mapping[str, Any]) -> None:
        self._report = dict(report)
        self._summarize()
        self._build_series()
        self._draw_bars()
        self._fill_tables()

    def _summarize(self) -> None:
        r = self._report
        total = r.get("total") or {}
        since, until = r.get("since") or "the first call", r.get("until") or "today"
        calls = int(_num(total.get("calls")) or 0)
        if calls:
            text = (f"<b>{usd_text(total.get('cost_usd'), total.get('unpriced_calls'))}</b> for {calls:,} calls "
                    f"from {since} to {until} · {short_tokens(_num(total.get('prompt_tokens')) or 0)} prompt, "
                    f"{short_tokens(_num(total.get('output_tokens')) or 0)} output tokens · cache hits "
                    f"{_pct(total.get('cache_hit_rate')) or '—'}")
        else:
            text = f"No agent calls from {since} to {until}"
        unpriced = int(_num(total.get("unpriced_calls")) or 0)
        if unpriced:
            text += f" · {unpriced:,} call(s) of a model without a price are not counted"
        if r.get("updating"):
            text += " · <i>reading new session files…</i>"
        if r.get("problem"):
            text += f"<br><span style='color:{self._pal.error}'>{r['problem']}</span>"
        self.summary.setText(text)

    def _build_series(self) -> None:
        rows = self._report.get("by_day_model") or []
        names = [str(m.get("model") or "") for m in self._report.get("models") or []]
        for row in rows:  # a model of the bars missing from the totals (should not happen): still drawn
            if str(row.get("model") or "") not in names:
                names.append(str(row.get("model") or ""))
        shown = names if len(names) <= MAX_MODELS + 1 else [*names[:MAX_MODELS], OTHER]
        days = sorted({str(r.get("day"))[:10] for r in rows})
        self._series = shown
        self._first = date.fromisoformat(days[0]) if days else None
        span = (date.fromisoformat(days[-1]) - self._first).days + 1 if days and self._first else 0
        self._days = [(self._first + timedelta(days=i)).isoformat() for i in range(span)] if self._first else []
        self._day_axis.first = self._first
        # values[metric][series, day]
        cost = np.zeros((len(shown), span))
        tokens = np.zeros((len(shown), span))
        index = {n: i for i, n in enumerate(shown)}
        self._breakdown = {}
        for row in rows:
            if self._first is None:
                break
            d = (date.fromisoformat(str(row.get("day"))[:10]) - self._first).days
            name = str(row.get("model") or "")
            s = index.get(name, index.get(OTHER, 0))
            c, t = _num(row.get("cost_usd")), _num(row.get("tokens")) or 0.0
            cost[s, d] += c or 0.0
            tokens[s, d] += t
            self._breakdown.setdefault(d, []).append((name, c, t, int(_num(row.get("unpriced_calls")) or 0)))
        self._cost, self._tokens = cost, tokens

    def _draw_bars(self) -> None:
        values = self._cost if self._metric == "cost" else self._tokens
        n = values.shape[1] if values.size else len(self._days)
        x = np.arange(n, dtype=float)
        base = np.zeros(n)
        width = 0.8 if n < 120 else 1.0
        for i, bar in enumerate(self._bars):
            if i < len(self._series) and n:
                h = values[i]
                bar.setOpts(x=x, height=h, y0=base.copy(), width=width, brush=QColor(COLORS[i % len(COLORS)]))
                bar.setVisible(True)
                base = base + h
            else:
                bar.setOpts(x=np.zeros(0), height=np.zeros(0), y0=np.zeros(0))
                bar.setVisible(False)
        self._values = values
        self._totals = base
        p = self.plot.getPlotItem()
        p.setXRange(-0.6, max(n, 7) - 0.4, padding=0)
        top = float(base.max()) if n else 0.0
        p.setYRange(0, top * 1.08 if top > 0 else 1, padding=0)
        self.plot.getPlotItem().getAxis("left").picture = None  # the labels follow the metric
        self.plot.getPlotItem().getAxis("left").update()
        legend = " &nbsp; ".join(f"<span style='color:{COLORS[i % len(COLORS)]}'>■</span> {name or '(no model)'}"
                                 for i, name in enumerate(self._series))
        self.legend.setText(legend)

    def _fill_tables(self) -> None:
        r = self._report
        sessions = r.get("sessions") or []
        rows: list[list[tuple[str, Any]]] = []
        paths = []
        for s in sessions:
            cost, agent = _num(s.get("cost_usd")), _num(s.get("agent_cost_usd"))
            title = str(s.get("title") or "") or str(s.get("session_id") or "")
            rows.append([(title, None), (str(s.get("agent") or ""), None), (str(s.get("project") or ""), None),
                         (str(s.get("last_call") or "")[:16].replace("T", " "), str(s.get("last_call") or "")),
                         (usd_text(cost, s.get("unpriced_calls")), cost if cost is not None else -1.0),
                         (usd_text(agent), agent if agent is not None else -1.0),
                         (_int(s.get("calls")), _num(s.get("calls")) or 0),
                         (_pct(s.get("peak_fullness")), _num(s.get("peak_fullness")) or -1.0),
                         (_int(s.get("compactions")), _num(s.get("compactions")) or 0),
                         (_pct(s.get("cache_hit_rate")), _num(s.get("cache_hit_rate")) or -1.0),
                         (str(s.get("models") or ""), None)])
            paths.append(str(s.get("path") or ""))
        _fill(self.sessions, rows, paths)
        self.sessions.sortItems(4, Qt.SortOrder.DescendingOrder)

        def totals(key: str, extra: bool = False) -> list[list[tuple[str, Any]]]:
            out = []
            for g in r.get(key + "s") or []:
                cost = _num(g.get("cost_usd"))
                row = [(str(g.get(key) or "") or "(none)", None),
                       (usd_text(cost, g.get("unpriced_calls")), cost if cost is not None else -1.0),
                       (_int(g.get("calls")), _num(g.get("calls")) or 0),
                       (_int(g.get("prompt_tokens")), _num(g.get("prompt_tokens")) or 0),
                       (_int(g.get("output_tokens")), _num(g.get("output_tokens")) or 0),
                       (_pct(g.get("cache_hit_rate")), _num(g.get("cache_hit_rate")) or -1.0)]
                if extra:
                    row.append((str(g.get("price_key") or "no price"), None))
                out.append(row)
            return out

        _fill(self.projects, totals("project"))
        _fill(self.models, totals("model", extra=True))
        _fill(self.tools, [[(str(t.get("tool") or ""), None),
                            (_int(t.get("result_tokens")), _num(t.get("result_tokens")) or 0),
                            (_int(t.get("results")), _num(t.get("results")) or 0),
                            (_int(t.get("sessions")), _num(t.get("sessions")) or 0),
                            (_int(t.get("largest")), _num(t.get("largest")) or 0)] for t in r.get("tools") or []])
        for table in (self.projects, self.models):
            table.sortItems(1, Qt.SortOrder.DescendingOrder)
        self.tools.sortItems(1, Qt.SortOrder.DescendingOrder)

    # ------------------------------------------------------------------ look

    def set_palette(self, pal: Palette) -> None:
        self._pal = pal
        self.plot.setBackground(QColor(pal.background))
        for name in ("bottom", "left"):
            ax = self.plot.getPlotItem().getAxis(name)
            ax.setPen(pg.mkPen(QColor(pal.muted)))
            ax.setTextPen(pg.mkPen(QColor(pal.text)))
        if self._report:
            self._summarize()

    # ------------------------------------------------------------------ hover, double-click

    def day_tooltip(self, index: int) -> str:
        if not 0 <= index < len(self._days):
            return ""
        parts = sorted(self._breakdown.get(index, []), key=lambda p: -(p[1] or 0.0))
        lines = [self._days[index]]
        if not parts:
            return "\n".join([*lines, "no calls"])
        known = [p[1] for p in parts if p[1] is not None]
        cost = sum(known) if known else None
        unpriced = sum(p[3] for p in parts)
        lines.append(f"{usd_text(cost, unpriced)} · {short_tokens(sum(p[2] for p in parts))} tokens")
        lines += [f"  {name or '(no model)'}: {usd_text(c, u)} · {short_tokens(t)} tokens" for name, c, t, u in parts]
        return "\n".join(lines)

    def _on_mouse_moved(self, pos: QPointF) -> None:
        vb = self.plot.getPlotItem().getViewBox()
        if not self.plot.sceneBoundingRect().contains(pos) or not self._days:
            return
        x = vb.mapSceneToView(pos).x()
        index = round(x)
        if 0 <= index < len(self._days) and abs(x - index) < 0.45:
            QToolTip.showText(self.plot.mapToGlobal(self.plot.mapFromScene(pos)), self.day_tooltip(index), self.plot)
        else:
            QToolTip.hideText()

    def _on_session_activated(self, item: QTableWidgetItem) -> None:
        first = self.sessions.item(item.row(), 0)
        path = str(first.data(PATH_ROLE) or "") if first is not None else ""
        if path:
            self.session_opened.emit(path)

    # ------------------------------------------------------------------ tests

    def bar_totals(self) -> list[float]:
        return [float(v) for v in self._totals]

    def series(self) -> list[str]:
        return list(self._series)

    def days(self) -> list[str]:
        return list(self._days)


__all__ = ["UsageView", "usd_text"]
