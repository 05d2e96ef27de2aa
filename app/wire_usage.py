"""Wiring of the Usage part of the window (issue 22): the Usage dock (what the agents on this machine spent,
:class:`widgets.usage_view.UsageView`) and the open session's cost so far in the status bar.

- **The Usage dock**, hidden until View → Usage (Ctrl+Shift+U), opens as a window of its own (a floating dock,
  :data:`WINDOW_SIZE` at most, over the main window; its title bar docks it as a tab beside the context chart,
  where View → Usage raises it). Its view is built when the dock is first shown (pyqtgraph); it then asks for
  the last 30 days — the engine makes the range, today (UTC) the last — reading new session files into the
  usage index first (``Controller.refresh_usage``, off the loop: engine.workbench.usage). A range change
  queries the index as it is; Refresh reads new files again. While it reads, the summary says how far it has
  come (``Controller.usage_progress``: the engine's sentence, ``IndexProgress.said``, as ``ctxbench usage`` shows
  it on a terminal). A double-clicked session opens
  as a read-only view (as Sources → Open) and the chart is raised.
- **Live figures**: while the dock is visible (not when the chart's tab is raised over it), every
  ``engine.workbench.usage.AUTO_REFRESH_SECONDS`` (and at once when it is shown again) the range is asked
  again as a *quiet* refresh: new session files are read, and a report comes only when something was read
  (an idle machine repaints nothing; the view keeps its sort, selection and scroll position). The timer
  stops when the dock is hidden and when the window closes.
- **The session's cost**: the view's :class:`engine.usage.costs.SessionCost` (main + subagents + compaction
  calls, the one figure every view shows), its main part following the timeline (every record comes priced,
  ``cost_usd``), is shown in the status bar beside the agent's own cost, updated with each call.

:func:`wire_usage` is called once from ``MainWindow._connect``; its state is ``window.usage_wiring``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QLabel

from engine.model.timeline import TimelineCall
from engine.sources.formats import cost_recorded_by
from engine.usage.costs import NONE, RunningCost, SessionCost
from engine.workbench import usage as usage_part
from engine.workbench.views import SessionView
from widgets.theme import Palette

if TYPE_CHECKING:
    from app.window_base import WindowBase
    from engine.usage.index import IndexProgress
    from engine.usage.report import UsageReport
    from widgets.usage_view import UsageView


WINDOW_SIZE = (1180, 780)  # the Usage window's size at most (less on a smaller main window)


class UsageWiring(QObject):
    """The slots (see the module docstring)."""

    def __init__(self, window: WindowBase) -> None:
        super().__init__(window)
        self.window = window
        self.controller = window.controller
        self.view: UsageView | None = None
        self.report: UsageReport | None = None
        self.records: list[TimelineCall] = []
        self.cost = SessionCost(NONE)
        self.running = RunningCost()
        self.dock = QDockWidget("Usage", window)
        self.dock.setObjectName("UsageDock")
        placeholder = QLabel("Loading…")
        placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.dock.setWidget(placeholder)
        window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.dock)
        window.tabifyDockWidget(window.chart_dock, self.dock)
        window.chart_dock.raise_()
        self.dock.hide()
        self._placed = False  # opened once as its own window (later: where the user left it)
        # checked while the Usage view is in sight: choosing it shows and raises it (a tab behind the chart included)
        self.action = QAction("&Usage (what the agents spent)", self)
        self.action.setCheckable(True)
        self.action.setShortcut(QKeySequence("Ctrl+Shift+U"))
        self.action.triggered.connect(self._on_action_triggered)
        view_menu = getattr(window, "view_menu", None)
        if view_menu is not None:
            view_menu.addAction(self.action)
        self.timer = QTimer(self)  # the live refresh, while the dock is visible
        self.timer.timeout.connect(self._on_tick)
        self.dock.visibilityChanged.connect(self._on_visibility_changed)
        window.closed.connect(self.timer.stop)
        window._theme.changed.connect(self._on_theme_changed)
        c = self.controller
        c.usage_ready.connect(self._on_usage_ready)
        c.usage_progress.connect(self._on_usage_progress)
        c.session_loaded.connect(self._on_session_loaded)
        c.call_recorded.connect(self._on_call_recorded)
        c.call_updated.connect(self._on_call_updated)

    # --- the dock
    def show(self) -> UsageView:
        """Show the Usage view in sight (building it): the first time as a window of its own over the main window;
        docked, its tab raised. Returns the view."""
        if not self._placed:
            self._placed = True
            self._float()
        self.dock.show()
        self.dock.raise_()
        if self.dock.isFloating():
            self.dock.activateWindow()
        return self.ensure_view()

    def _float(self) -> None:
        """The dock as a window of its own, centred over the main window: room for the bars and the tables."""
        w = self.window
        width = min(WINDOW_SIZE[0], max(640, w.width() * 9 // 10))
        height = min(WINDOW_SIZE[1], max(480, w.height() * 9 // 10))
        self.dock.setFloating(True)
        self.dock.resize(width, height)
        centre = w.geometry().center()
        self.dock.move(centre.x() - width // 2, centre.y() - height // 2)

    def _on_action_triggered(self, checked: bool) -> None:
        if checked:
            self.show()
        else:
            self.dock.hide()

    def ensure_view(self) -> UsageView:
        if self.view is not None:
            return self.view
        from widgets.usage_view import UsageView

        view = UsageView(pal=self.window.pal, cost_from=cost_recorded_by())
        view.refresh_requested.connect(self._on_refresh_requested)
        view.days_requested.connect(self._on_days_requested)
        view.session_opened.connect(self._on_session_opened)
        old = self.dock.widget()
        self.dock.setWidget(view)
        if old is not None:
            old.deleteLater()
        self.view = view
        if self.report is not None:
            view.set_report(self.report)
        view.set_days(30, update=True)
        return view

    def _on_visibility_changed(self, visible: bool) -> None:
        self.action.setChecked(visible)
        if not visible:
            self.timer.stop()
            return
        if self.view is None:
            self.ensure_view()  # asks for the last 30 days, reading new files first
        elif not self.timer.isActive():
            self._on_tick()  # shown again: catch up at once
        if not getattr(self.window, "_closing", False):
            self.timer.start(round(usage_part.AUTO_REFRESH_SECONDS * 1000))

    def _on_tick(self) -> None:
        if self.view is None or not self.dock.isVisible():
            self.timer.stop()
            return
        days = self.view.preset_days()
        if days >= 0:  # the last n days: made again by the engine (after midnight UTC, a day later)
            self.controller.refresh_usage(None, None, True, quiet=True, days=days)
            return
        since, until = self.view.date_range()
        self.controller.refresh_usage(since or None, until or None, True, quiet=True)

    def _on_theme_changed(self, pal: Palette) -> None:
        if self.view is not None:
            self.view.set_palette(pal)

    def _on_refresh_requested(self, since: str, until: str, update: bool) -> None:
        self.controller.refresh_usage(since or None, until or None, update)

    def _on_days_requested(self, days: int, update: bool) -> None:
        self.controller.refresh_usage(None, None, update, days=days)

    def _on_session_opened(self, path: str) -> None:
        self.controller.open_source(path)
        self.window.chart_dock.show()
        self.window.chart_dock.raise_()

    def _on_usage_ready(self, report: UsageReport) -> None:
        # as it is (rows of plain values, nobody changes them): report.to_json() would copy each row
        # (dataclasses.asdict), ~0.5 s at 10,000 sessions, on the GUI thread
        self.report = report
        if self.view is not None:
            self.view.set_report(self.report)

    def _on_usage_progress(self, progress: IndexProgress) -> None:
        if self.view is not None:
            self.view.set_progress(progress.said())

    # --- the session's cost
    def _on_session_loaded(self, view: SessionView) -> None:
        self.records = list(view.timeline)
        self.running = RunningCost(self.records)  # the main calls' cost, kept as a followed view grows
        self.cost = view.cost
        self._show_cost()

    def _on_call_recorded(self, record: TimelineCall) -> None:
        self.records.append(record)
        self.running.append(record)
        self._show_cost()

    def _on_call_updated(self, record: TimelineCall) -> None:
        if self.records:
            self.records[-1] = record
        else:
            self.records.append(record)
        self.running.replace_last(record)
        self._show_cost()

    def _show_cost(self) -> None:
        self.cost = self.cost.with_main(self.running)
        self.window.status.set_session_cost(self.cost)


def wire_usage(window: WindowBase) -> UsageWiring:
    """Connect the Usage part of ``window`` (see the module docstring)."""
    wiring = UsageWiring(window)
    window.usage_wiring = wiring  # type: ignore[attr-defined]
    return wiring


__all__ = ["UsageWiring", "wire_usage"]
