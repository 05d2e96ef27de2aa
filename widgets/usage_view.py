"""The Usage view: what the agents on this machine spent, over a date range.

Draws a usage report (``engine.usage.report.UsageReport``: its fields read as they are, its rows plain dicts): cost or
tokens per day as bars stacked by model (pyqtgraph; the bar items are made once and updated), the
sessions (sortable: cost, calls, peak fullness, compactions, cache hit rate, the agent's own cost;
double-click opens one), the totals per project and per model, the tools whose results take the
most context, and the calls the agent attributed to a skill, a subagent type or an MCP server (the report's
``attribution`` rows: the figures ``ctxbench usage --by skill|subagent|mcp`` gives). A cost with ``+`` is a lower
bound: some calls have no price (their model is not in litellm's table).

Public API of :class:`UsageView`
--------------------------------
``UsageView(pal=…, cost_from=…)``: ``cost_from`` names the agents whose files hold their own cost (the "Agent's cost"
column's tooltip says so).
Signals:
    refresh_requested(str, str, bool)  since, until (ISO days, "" for open), update: a date was picked (applied at
                                  once, typing settles first) or Refresh was pressed (True: read new session
                                  files first) while the range is Custom
    days_requested(int, bool)     the last n days (0: all time; the engine makes the range: today, UTC, the last),
                                  update: as above — a preset was chosen, or Refresh pressed with one chosen
    session_opened(str)           the session file to open (double-click, Enter)
Methods:
    set_report(report)            show a UsageReport; ``updating`` says newer figures follow. The chart spans
                                  the report's ``first_day`` … ``last_day`` (the range asked, empty days drawn);
                                  with a preset chosen, the date boxes show the range the engine made. The tables
                                  keep the sort the user chose, the selected row and the scroll position.
                                  Its ``warnings`` and ``unreadable`` files (path, reason) are shown under
                                  the summary: "N session files could not be read (show)", the list behind
                                  the link and in the tooltip (``notes``, ``unreadable_list``)
    set_progress(text)            how far the update of an ``updating`` report has read (the engine's sentence:
                                  engine.usage.index.IndexProgress.said), in the summary until the newer figures come
    unreadable_lines() -> list[str]  "path — reason" per file that could not be read (tests)
    date_range() -> (str, str)    since, until as shown ("" for open)
    preset_days() -> int          the chosen preset's n (0: all time), -1: Custom
    set_days(n)                   choose "the last n days" (0: all) and ask for them
    set_metric("cost" | "tokens")
    set_palette(palette)
    bar_totals() -> list[float]   per day, the stacked total drawn (tests)
    series() -> list[str]         the models stacked, bottom first (tests)
    day_tooltip(index) -> str     the tooltip of day ``index`` (tests)
Tables (``sessions``, ``projects``, ``models``, ``tools``: :class:`UsageTable`, a QTableView over a
:class:`RowsModel` of plain rows, so 10,000 sessions fill at once; the header's arrow points up when the smallest
come first): ``row_count()``, ``text(row, column)``, ``tooltip(row, column)``,
``path(row)``, ``sort_by(column, order)``, ``selected_id()``, ``select_id(id)`` (a session's path; else the
first column's text). A project is the full path of its folder, shown short (``~/…``, its last folders) with
the full path in the tooltip.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from datetime import date, timedelta
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import (
    QDate,
    QModelIndex,
    QPointF,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QComboBox,
    QDateEdit,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from engine.usage.report import UsageReport, last_days
from widgets.chart_parts import SceneTips, short_tokens
from widgets.theme import Palette, palette
from widgets.usage_table import (
    PATH_ROLE,
    Column,
    UsageTable,
    int_column,
    number,
    pct_column,
    pct_text,
    project_column,
    session_cost_column,
    text_column,
    usd_column,
    usd_text,
)

ATTRIBUTION_KINDS = {"skill": "Skill", "subagent": "Subagent", "mcp": "MCP server"}  # a report's attribution kinds
MAX_MODELS = 8  # models drawn on their own; the others stack as one "other models" bar
OTHER = "other models"
COLORS = ("#2563eb", "#f59e0b", "#0d9488", "#8b5cf6", "#ec4899", "#64748b", "#16a34a", "#dc2626", "#a3a3a3")
PRESETS = (("Last 7 days", 7), ("Last 30 days", 30), ("Last 90 days", 90), ("All time", 0), ("Custom", -1))
OPEN_DATE = QDate(2000, 1, 1)  # a date edit at its minimum: the range is open on that side
DATE_SETTLE_MS = 400  # a date typed digit by digit is asked for once it settles (a calendar click: as soon)
MIN_PLOT_HEIGHT = 170  # docked in a short dock too: the bars with the day labels under them
MIN_TABLES_HEIGHT = 140  # … and a few rows of the tables


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




class UsageView(QWidget):
    """See the module docstring."""

    refresh_requested = Signal(str, str, bool)
    days_requested = Signal(int, bool)
    session_opened = Signal(str)

    def __init__(self, parent: QWidget | None = None, *, pal: Palette | None = None, cost_from: str = "") -> None:
        super().__init__(parent)
        self._pal = pal or palette()
        self._report: UsageReport | None = None
        self._progress = ""  # how far the update of the figures shown has read (set_progress)
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
        self._asked: tuple[str, str] = ("", "")  # the range last asked for (a Custom one)
        self._show_unreadable = False

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(4)
        layout.addLayout(self._build_controls())
        self._build_notes(layout)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self._build_plot())
        split.addWidget(self._build_tables(cost_from))
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        split.setChildrenCollapsible(False)
        layout.addWidget(split, 1)
        self._connect()
        self._tips = SceneTips(self.plot, self._tip_at)
        self._quiet = True
        self.preset.setCurrentIndex(1)  # the last 30 days
        self._apply_preset(30)
        self._quiet = False
        self.set_palette(self._pal)

    def _build_controls(self) -> QHBoxLayout:
        """The range (a preset, the first and last day), the metric and Refresh."""
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
        self.since_edit.setToolTip("The first day (UTC); a date picked is applied at once")
        self.until_edit.setToolTip("The last day (UTC); a date picked is applied at once")
        self._settle = QTimer(self)  # a date being typed: asked for once it settles
        self._settle.setSingleShot(True)
        self._settle.setInterval(DATE_SETTLE_MS)
        self._settle.timeout.connect(self._on_dates_settled)
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
        return row

    def _build_notes(self, layout: QVBoxLayout) -> None:
        """The summary line, the notes and the unreadable files' list under the controls."""
        self.summary = QLabel("No figures yet")
        self.summary.setWordWrap(True)
        layout.addWidget(self.summary)
        # what the figures are not (read-only index, another process updating, a damaged file rebuilt) and the
        # session files that could not be read: a line, the list behind "show" (and in the tooltip)
        self.notes = QLabel()
        self.notes.setWordWrap(True)
        self.notes.setTextFormat(Qt.TextFormat.RichText)
        self.notes.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse)
        self.notes.linkActivated.connect(self._on_notes_link)
        self.notes.hide()
        layout.addWidget(self.notes)
        self.unreadable_list = QLabel()
        self.unreadable_list.setWordWrap(True)
        self.unreadable_list.setTextFormat(Qt.TextFormat.PlainText)
        self.unreadable_list.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.unreadable_list.hide()
        layout.addWidget(self.unreadable_list)

    def _build_plot(self) -> QWidget:
        """The bars by day (a bar per model, stacked) and their legend."""
        top = QWidget()
        top_layout = QVBoxLayout(top)
        top_layout.setContentsMargins(0, 0, 0, 0)
        self._day_axis = _DayAxis("bottom")
        self._value_axis = _ValueAxis("left")
        self.plot = pg.PlotWidget(axisItems={"bottom": self._day_axis, "left": self._value_axis})
        self.plot.setMinimumHeight(MIN_PLOT_HEIGHT)  # the bars and the day labels under them, always
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
        return top

    def _build_tables(self, cost_from: str) -> QTabWidget:
        """The tables: sessions, projects, models, tools (``cost_from``: as the constructor's)."""
        self.tabs = QTabWidget()
        totals = [usd_column("Cost", "cost_usd"), int_column("Calls", "calls"),
                  int_column("Prompt tokens", "prompt_tokens"), int_column("Output tokens", "output_tokens"),
                  pct_column("Cache hits", "cache_hit_rate")]
        self.sessions = UsageTable(
            [Column("Session", lambda s: str(s.get("title") or "") or str(s.get("session_id") or "")),
             text_column("Agent", "agent"), project_column(),
             Column("Last call", lambda s: str(s.get("last_call") or "")[:16].replace("T", " "),
                    lambda s: str(s.get("last_call") or "")),
             session_cost_column(),
             usd_column("Agent's cost", "agent_cost_usd", None,
                         "The agent's own cost, from its cost records" + (f" ({cost_from})" if cost_from else "")),
             int_column("Calls", "calls"), pct_column("Peak full", "peak_fullness"),
             int_column("Compactions", "compactions"), pct_column("Cache hits", "cache_hit_rate"),
             text_column("Models", "models")],
            220, path="path", sort=(4, Qt.SortOrder.DescendingOrder))  # the dearest first
        self.projects = UsageTable([project_column(), *totals], 320)
        self.models = UsageTable([text_column("Model", "model", "(none)"), *totals,
                                  text_column("Priced as", "price_key", "no price")])
        self.tools = UsageTable([text_column("Tool", "tool"),
                                 int_column("Result tokens", "result_tokens",
                                             "Estimated tokens of the tool's results, in every session"),
                                 int_column("Results", "results"), int_column("Sessions", "sessions"),
                                 int_column("Largest result", "largest"),
                                 int_column("Tool calls", "tool_calls", "The calls the model made to the tool"),
                                 usd_column("Cost of calls", "cost_usd_of_calls", None,
                                             "What the responses that called the tool cost, each response's cost "
                                             "split evenly over its tool calls (as ctxbench tools splits it)")])
        self.attribution = UsageTable(
            [Column("Kind", lambda a: ATTRIBUTION_KINDS.get(str(a.get("kind") or ""), str(a.get("kind") or ""))),
             text_column("Name", "name"), *totals])
        self.tabs.addTab(self.sessions, "Sessions")
        self.tabs.addTab(self.projects, "Projects")
        self.tabs.addTab(self.models, "Models")
        self.tabs.addTab(self.tools, "Tools")
        self.tabs.addTab(self.attribution, "Skills · subagents · MCP")
        self.tabs.setMinimumHeight(MIN_TABLES_HEIGHT)
        return self.tabs

    def _connect(self) -> None:
        self.preset.currentIndexChanged.connect(self._on_preset)
        self.since_edit.dateChanged.connect(self._on_date_changed)
        self.until_edit.dateChanged.connect(self._on_date_changed)
        self.since_edit.editingFinished.connect(self._on_dates_settled)  # Enter, or leaving the box: at once
        self.until_edit.editingFinished.connect(self._on_dates_settled)
        for edit in (self.since_edit, self.until_edit):  # a day clicked in the calendar: at once
            edit.calendarWidget().clicked.connect(self._on_dates_settled)
        self.metric_box.currentIndexChanged.connect(self._on_metric)
        self.refresh_button.clicked.connect(self._on_refresh_clicked)
        self.sessions.activated.connect(self._on_session_activated)

    # ------------------------------------------------------------------ range

    def date_range(self) -> tuple[str, str]:
        def text(edit: QDateEdit) -> str:
            d = edit.date()
            return "" if d <= OPEN_DATE else d.toString("yyyy-MM-dd")

        return text(self.since_edit), text(self.until_edit)

    def preset_days(self) -> int:
        """The chosen preset's number of days (0: all time); -1: a Custom range."""
        return int(self.preset.currentData())

    def set_days(self, days: int, update: bool = False) -> None:
        """Choose the last ``days`` days (0: all time) and ask for them."""
        index = next((i for i, (_, n) in enumerate(PRESETS) if n == days), None)
        self._quiet = True
        if index is not None:
            self.preset.setCurrentIndex(index)
        self._quiet = False
        self._apply_preset(days)
        self._request(update)

    def _set_dates(self, since: QDate, until: QDate) -> None:
        """Show a range in the date boxes without asking for it."""
        quiet, self._quiet = self._quiet, True
        self.since_edit.setDate(since)
        self.until_edit.setDate(until)
        self._quiet = quiet
        self._asked = self.date_range()

    def _apply_preset(self, days: int) -> None:
        """The preset's range in the date boxes (the engine's definition; its report confirms it)."""
        if days >= 0:
            since, until = last_days(days)
            self._set_dates(self._qdate(since), self._qdate(until))

    def _on_preset(self, index: int) -> None:
        if self._quiet:
            return
        days = int(self.preset.itemData(index))
        if days >= 0:
            self._apply_preset(days)
            self._request()

    def _on_date_changed(self, _date: QDate) -> None:
        if not self._quiet:
            self._settle.start()  # typed digit by digit: once it settles

    def _on_dates_settled(self, *_args: Any) -> None:
        self._settle.stop()
        if self._quiet or self.date_range() == self._asked:
            return  # nothing new (Enter after a date already asked for, a preset's own dates)
        custom = len(PRESETS) - 1
        if self.preset.currentIndex() != custom:
            self._quiet = True
            self.preset.setCurrentIndex(custom)
            self._quiet = False
        self._request()

    def _request(self, update: bool = False) -> None:
        days = self.preset_days()
        if days >= 0:
            self.days_requested.emit(days, update)
            return
        self._asked = self.date_range()
        self.refresh_requested.emit(*self._asked, update)

    def _on_refresh_clicked(self) -> None:
        self._request(True)

    # ------------------------------------------------------------------ data

    def set_metric(self, metric: str) -> None:
        self.metric_box.setCurrentIndex(max(0, self.metric_box.findData(metric)))

    def _on_metric(self, _index: int) -> None:
        self._metric = str(self.metric_box.currentData())
        self._value_axis.metric = self._metric
        self._draw_bars()

    def set_report(self, report: UsageReport) -> None:
        self._report = report
        if not report.updating:
            self._progress = ""
        if self.preset_days() >= 0 and not self._settle.isActive():  # (not over a date being typed)
            # the range the engine made of the preset, in the date boxes
            self._set_dates(self._qdate(report.since), self._qdate(report.until))
        self._summarize()
        self._show_notes()
        self._build_series()
        self._draw_bars()
        self._fill_tables()

    def set_progress(self, text: str) -> None:
        """How far the update of the figures shown has read (the engine's sentence), shown in the summary while
        newer figures follow; nothing once they came."""
        if self._report is not None and self._report.updating:
            self._progress = text
            self._summarize()

    def _summarize(self) -> None:
        r = self._report if self._report is not None else UsageReport()
        total = r.total
        since, until = r.since or "the first call", r.until or "today"
        calls = int(number(total.get("calls")) or 0)
        if calls:
            text = (f"<b>{usd_text(total.get('cost_usd'), total.get('unpriced_calls'))}</b> for {calls:,} calls "
                    f"from {since} to {until} · {short_tokens(number(total.get('prompt_tokens')) or 0)} prompt, "
                    f"{short_tokens(number(total.get('output_tokens')) or 0)} output tokens · cache hits "
                    f"{pct_text(total.get('cache_hit_rate')) or '—'}")
        else:
            text = f"No agent calls from {since} to {until}"
        unpriced = int(number(total.get("unpriced_calls")) or 0)
        if unpriced:
            text += f" · {unpriced:,} call(s) of a model without a price are not counted"
        if r.updating:
            text += f" · <i>{html.escape(self._progress or 'reading new session files…')}</i>"
        if r.problem:
            text += f"<br><span style='color:{self._pal.error}'>{html.escape(r.problem)}</span>"
        self.summary.setText(text)

    def unreadable_lines(self) -> list[str]:
        """The session files that could not be read, as listed: "path — reason" each."""
        return [f"{u.get('path', '')} — {u.get('reason', '')}" for u in self._unreadable() if isinstance(u, Mapping)]

    def _unreadable(self) -> list[dict[str, Any]]:
        return self._report.unreadable if self._report is not None else []

    def _show_notes(self) -> None:
        warnings = list(self._report.warnings) if self._report is not None else []
        lines = self.unreadable_lines()
        parts = [f"<span style='color:{self._pal.warning}'>{html.escape(w)}</span>" for w in warnings]
        if lines:
            partly = sum(1 for u in self._unreadable() if isinstance(u, Mapping) and u.get("partly"))
            said = []
            if len(lines) > partly:
                whole = len(lines) - partly
                said.append(f"{'1 session file' if whole == 1 else f'{whole:,} session files'} could not be read")
            if partly:
                said.append(f"{'1 session file' if partly == 1 else f'{partly:,} session files'} read in part")
            link = "hide" if self._show_unreadable else "show"
            parts.append(f"<span style='color:{self._pal.warning}'>{' · '.join(said)}</span> "
                         f"(<a href='unreadable'>{link}</a>)")
        self.notes.setText("<br>".join(parts))
        self.notes.setToolTip(html.escape("\n".join(lines[:50] + ([f"… {len(lines) - 50} more"]
                                                                  if len(lines) > 50 else []))))
        self.notes.setVisible(bool(parts))
        self.unreadable_list.setText("\n".join(lines))
        self.unreadable_list.setVisible(bool(lines) and self._show_unreadable)

    def _on_notes_link(self, _link: str) -> None:
        self._show_unreadable = not self._show_unreadable
        self._show_notes()

    @staticmethod
    def _qdate(day: Any) -> QDate:
        d = QDate.fromString(str(day.isoformat() if isinstance(day, date) else day or "")[:10], "yyyy-MM-dd")
        return d if d.isValid() and d > OPEN_DATE else OPEN_DATE

    def _build_series(self) -> None:
        report = self._report if self._report is not None else UsageReport()
        rows = report.by_day_model
        names = [str(m.get("model") or "") for m in report.models]
        for row in rows:  # a model of the bars missing from the totals (should not happen): still drawn
            if str(row.get("model") or "") not in names:
                names.append(str(row.get("model") or ""))
        shown = names if len(names) <= MAX_MODELS + 1 else [*names[:MAX_MODELS], OTHER]
        days = sorted({str(r.get("day"))[:10] for r in rows})
        self._series = shown
        # the days drawn: the report's span (the whole range asked), else the days with calls
        first = (report.first_day or "")[:10] or (days[0] if days else "")
        last = (report.last_day or "")[:10] or (days[-1] if days else "")
        self._first = date.fromisoformat(first) if first else None
        span = (date.fromisoformat(last) - self._first).days + 1 if first and last and self._first else 0
        span = max(0, span)
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
            if not 0 <= d < span:
                continue  # outside the range drawn (the report's rows are of its range: should not happen)
            name = str(row.get("model") or "")
            s = index.get(name, index.get(OTHER, 0))
            c, t = number(row.get("cost_usd")), number(row.get("tokens")) or 0.0
            cost[s, d] += c or 0.0
            tokens[s, d] += t
            self._breakdown.setdefault(d, []).append((name, c, t, int(number(row.get("unpriced_calls")) or 0)))
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
        r = self._report if self._report is not None else UsageReport()
        for table, rows in ((self.sessions, r.sessions), (self.projects, r.projects), (self.models, r.models),
                            (self.tools, r.tools), (self.attribution, r.attribution)):
            table.set_records([x for x in rows if isinstance(x, dict)])

    # ------------------------------------------------------------------ look

    def set_palette(self, pal: Palette) -> None:
        self._pal = pal
        self.plot.setBackground(QColor(pal.background))
        for name in ("bottom", "left"):
            ax = self.plot.getPlotItem().getAxis(name)
            ax.setPen(pg.mkPen(QColor(pal.muted)))
            ax.setTextPen(pg.mkPen(QColor(pal.text)))
        if self._report is not None:
            self._summarize()
            self._show_notes()

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

    def _tip_at(self, pos: QPointF) -> str | None:
        vb = self.plot.getPlotItem().getViewBox()
        if not self.plot.sceneBoundingRect().contains(pos) or not self._days:
            return None
        x = vb.mapSceneToView(pos).x()
        index = round(x)
        return self.day_tooltip(index) if 0 <= index < len(self._days) and abs(x - index) < 0.45 else None

    def _on_session_activated(self, index: QModelIndex) -> None:
        path = self.sessions.path(index.row()) if index.isValid() else ""
        if path:
            self.session_opened.emit(path)

    # ------------------------------------------------------------------ tests

    def bar_totals(self) -> list[float]:
        return [float(v) for v in self._totals]

    def series(self) -> list[str]:
        return list(self._series)

    def days(self) -> list[str]:
        return list(self._days)


__all__ = ["PATH_ROLE", "UsageView", "usd_text"]
