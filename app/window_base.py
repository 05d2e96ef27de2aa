"""The main window's parts as the wiring modules (``app/wire_*.py``) see them: :class:`WindowBase` declares them,
:class:`app.main_window.MainWindow` builds them. The wiring modules import this module, not
:mod:`app.main_window` (which imports them): the app has no import cycle."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QSettings, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDockWidget, QMainWindow

from app.controller import Controller
from engine.model.records import CompactionRecord
from engine.model.snapshot import ContextSnapshot
from engine.model.timeline import TimelineCall
from widgets.chat_input import ChatInput
from widgets.chat_view import ChatView
from widgets.inspector import Inspector
from widgets.sessions_panel import SessionsPanel
from widgets.status_bar import ContextStatusBar
from widgets.theme import Palette, ThemeWatcher


@dataclass
class ChartData:
    """What the context chart draws, kept by the window while the chart is not built yet (it is built after the
    first paint) and handed to it when it is: the next request, the calls, the compactions, the draft's tokens."""

    snapshot: ContextSnapshot | None = None
    timeline: list[TimelineCall] = field(default_factory=list)
    compactions: list[CompactionRecord] = field(default_factory=list)
    draft: int | None = None


class WindowBase(QMainWindow):
    """The parts of the workbench window (built by :class:`app.main_window.MainWindow`)."""

    closed = Signal()

    controller: Controller
    pal: Palette
    _theme: ThemeWatcher
    chart: Any  # widgets.context_chart.ContextChart once built (pyqtgraph is imported after the first show)
    chart_dock: QDockWidget
    sessions: SessionsPanel
    chat: ChatView
    input: ChatInput
    inspector: Inspector
    status: ContextStatusBar
    compact_action: QAction
    undo_action: QAction
    sessions_action: QAction
    settings_action: QAction

    def ensure_chart(self) -> Any:
        """The chart, built on first use."""
        raise NotImplementedError

    def window_settings(self) -> QSettings:
        """Where the window keeps its layout and small choices."""
        raise NotImplementedError


__all__ = ["ChartData", "WindowBase"]
