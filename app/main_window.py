"""The main window: sessions list, chat in the centre, context chart and inspector as docks.

It only wires: widgets draw, :class:`app.controller.Controller` runs the engine. Widget signals go
to slots named ``_on_<source>_<signal>`` that call the controller; controller signals go to
``_on_controller_<signal>`` slots that feed the widgets.

Layout: a horizontal splitter (sessions | chat column), the context chart dock and the inspector
dock on the right, a toolbar (New, Compact, Stop, Undo compaction, Settings), menus (File: New
session, Open transcript…, Export ▸ (chart PNG / SVG, session Markdown, calls CSV / JSON:
app.export_menu), Quit; Edit: Undo compaction; View: the panels, theme), and the status bar
(model, tokens used / window, estimate vs provider on the last call, state). Edit → Copy / Select
All and the Help menu (Keyboard shortcuts, About) are app.wire_help's; File → Record an agent… is
app.wire_record's. Window geometry, dock
layout and splitter sizes persist in ``window.ini`` in the config dir (QSettings, INI format). The
theme follows the system colour scheme unless the settings force light or dark.

The chart (pyqtgraph, ~1 s to import) is built right after the window is first shown, so the window
appears fast; data that arrives before it exists is kept and handed over.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QByteArray, QSettings, Qt, QTimer, QUrl
from PySide6.QtGui import QAction, QCloseEvent, QDesktopServices, QGuiApplication, QKeySequence, QShowEvent
from PySide6.QtWidgets import QApplication, QDockWidget, QHeaderView, QLabel, QSplitter, QVBoxLayout, QWidget

from app.collector import Reclaimer, give_back
from app.controller import ContextState, Controller, Marker, SessionView
from app.export_menu import ExportMenu
from app.window_base import ChartData, WindowBase
from app.wire_analysis import wire_analysis
from app.wire_chat import wire_chat
from app.wire_help import wire_help
from app.wire_record import wire_record
from app.wire_sources import wire_sources
from app.wire_usage import wire_usage
from engine.model.events import (
    CompactionCancelled,
    ErrorEvent,
    MessageAdded,
    Outcome,
    TextDelta,
    ToolCallStarted,
    TurnFinished,
)
from engine.model.records import CompactionRecord
from engine.model.snapshot import ContextSnapshot
from engine.model.timeline import TimelineCall
from engine.sources.formats import importable, spoken_list
from engine.store.archive import ArchiveHit
from engine.store.config import Settings, config_dir
from engine.tools.registry import approval_text
from engine.workbench.rows import FileRow, SessionRow
from widgets.approval_bar import ApprovalBar
from widgets.chat_input import ChatInput
from widgets.chat_view import ChatView
from widgets.inspector import Inspector
from widgets.notice_bar import NoticeBar
from widgets.sessions_panel import SessionsPanel
from widgets.status_bar import ContextStatusBar
from widgets.theme import Palette, ThemeWatcher, apply_theme

DEFAULT_SIZE = (1400, 900)
STATE_VERSION = 1
WINDOW_FILE = "window.ini"
CHART_DELAY_MS = 60


class MainWindow(WindowBase):
    """The workbench window (see the module docstring); its parts are declared by :class:`WindowBase`."""

    def __init__(self, controller: Controller, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.setWindowTitle("Context Workbench")
        self.setObjectName("MainWindow")
        self._theme = ThemeWatcher(controller.settings.theme, self)
        app = QApplication.instance()
        self.pal: Palette = (
            apply_theme(app, controller.settings.theme) if isinstance(app, QGuiApplication) else self._theme.current()
        )
        self.notices: list[tuple[str, str]] = []
        self.chart: Any = None  # widgets.context_chart.ContextChart, built after the first show
        self._chart_data = ChartData()
        self.preview_dialog: Any = None  # widgets.compaction_preview.CompactionPreview
        self.settings_dialog: Any = None
        self._model_names: list[str] = []
        self._session: SessionView | None = None
        self._reclaimer = Reclaimer(self)
        self._streaming: set[str] = set()
        self._closing = False

        # --- centre: sessions | chat column
        self.sessions = SessionsPanel()
        self.chat = ChatView(pal=self.pal)
        self.notice_bar = NoticeBar()
        self.approval = ApprovalBar(pal=self.pal)
        self.input = ChatInput(pal=self.pal)
        column = QWidget()
        col = QVBoxLayout(column)
        col.setContentsMargins(0, 4, 4, 4)
        col.setSpacing(6)
        col.addWidget(self.notice_bar)
        col.addWidget(self.chat, 1)
        col.addWidget(self.approval)
        col.addWidget(self.input)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("MainSplitter")
        self.splitter.addWidget(self.sessions)
        self.splitter.addWidget(column)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setCollapsible(1, False)
        self.splitter.setSizes([220, 560])
        self.setCentralWidget(self.splitter)

        # --- docks: context chart, inspector
        self.chart_dock = QDockWidget("Context window", self)
        self.chart_dock.setObjectName("ContextDock")
        self._chart_placeholder = QLabel("Opening the session…")
        self._chart_placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.chart_dock.setWidget(self._chart_placeholder)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.chart_dock)
        self.inspector = Inspector(pal=self.pal)
        files_header = self.inspector.files_view.horizontalHeader()  # long hex names: a fixed, elided column
        files_header.setSectionResizeMode(5, QHeaderView.ResizeMode.Interactive)
        files_header.resizeSection(5, 150)
        self.inspector_dock = QDockWidget("Inspector", self)
        self.inspector_dock.setObjectName("InspectorDock")
        self.inspector_dock.setWidget(self.inspector)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.inspector_dock)
        self.splitDockWidget(self.chart_dock, self.inspector_dock, Qt.Orientation.Vertical)
        self._layout_restored = False

        self.status = ContextStatusBar(pal=self.pal)
        self.setStatusBar(self.status)
        self.status.set_model(controller.settings.model)
        self._build_actions()
        self._connect()
        self.analysis = wire_analysis(self)  # diff, Tools tab, subagent marks (app.wire_analysis)
        self._restore_window()
        self.set_busy(False)
        self.compact_action.setEnabled(False)  # until a session is shown (its load says what applies)
        self.undo_action.setEnabled(False)

    # ------------------------------------------------------------------ construction

    def _build_actions(self) -> None:
        self.new_action = QAction("&New session", self)
        self.new_action.setShortcut(QKeySequence(QKeySequence.StandardKey.New))
        self.new_action.triggered.connect(self._on_new_action_triggered)
        self.open_action = QAction("&Open transcript…", self)
        self.open_action.setShortcut(QKeySequence(QKeySequence.StandardKey.Open))
        self.open_action.setToolTip(f"Open an agent's session ({spoken_list(importable())}) or a transcript")
        self.open_action.triggered.connect(self._on_open_action_triggered)
        self.quit_action = QAction("&Quit", self)
        self.quit_action.setShortcut(QKeySequence(QKeySequence.StandardKey.Quit))
        self.quit_action.triggered.connect(self.close)
        self.compact_action = QAction("Compact…", self)
        self.compact_action.setToolTip("Preview a compaction: the plan, the summary, before → after (/compact)")
        self.compact_action.triggered.connect(self._on_compact_action_triggered)
        self.stop_action = QAction("Stop", self)
        self.stop_action.setToolTip("Cancel the running turn (Esc in the message box)")
        self.stop_action.triggered.connect(self._on_stop_action_triggered)
        self.undo_action = QAction("&Undo compaction", self)
        self.undo_action.setToolTip("Restore the history and summary from before the latest compaction")
        self.undo_action.triggered.connect(self._on_undo_action_triggered)
        self.settings_action = QAction("Settings…", self)
        self.settings_action.setShortcut(QKeySequence(QKeySequence.StandardKey.Preferences))
        self.settings_action.triggered.connect(self._on_settings_action_triggered)

        menu = self.menuBar()
        file_menu = menu.addMenu("&File")
        file_menu.addAction(self.new_action)
        file_menu.addAction(self.open_action)
        self.export_menu = ExportMenu(self, file_menu)
        file_menu.addSeparator()
        file_menu.addAction(self.settings_action)
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        edit_menu = menu.addMenu("&Edit")
        edit_menu.addAction(self.undo_action)
        edit_menu.addAction(self.compact_action)
        edit_menu.addAction(self.stop_action)
        view_menu = self.view_menu = menu.addMenu("&View")
        view_menu.addAction(self.chart_dock.toggleViewAction())
        view_menu.addAction(self.inspector_dock.toggleViewAction())
        self.sessions_action = QAction("Sessions", self)
        self.sessions_action.setCheckable(True)
        self.sessions_action.setChecked(True)
        self.sessions_action.toggled.connect(self.sessions.setVisible)
        view_menu.addAction(self.sessions_action)

        tb = self.addToolBar("Main")
        tb.setObjectName("MainToolBar")
        tb.setMovable(False)
        tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        for action in (self.new_action, self.compact_action, self.stop_action, self.undo_action):
            tb.addAction(action)
        tb.addSeparator()
        tb.addAction(self.settings_action)

    def _connect(self) -> None:
        c = self.controller
        self.sessions.session_selected.connect(self._on_sessions_session_selected)
        self.sessions.new_requested.connect(self._on_sessions_new_requested)
        self.sessions.rename_requested.connect(self._on_sessions_rename_requested)
        self.sessions.delete_requested.connect(self._on_sessions_delete_requested)
        self.sessions.open_transcript_requested.connect(self._on_sessions_open_transcript_requested)
        self.input.send_requested.connect(self._on_input_send_requested)
        self.input.command_requested.connect(self._on_input_command_requested)
        self.input.stop_requested.connect(self._on_input_stop_requested)
        self.input.draft_changed.connect(self._on_input_draft_changed)
        self.chat.open_offload.connect(self._on_chat_open_offload)
        self.chat.summary_requested.connect(self._on_chat_summary_requested)
        self.chat.undo_requested.connect(self._on_chat_undo_requested)
        self.chat.link_activated.connect(self._on_chat_link_activated)
        self.approval.decided.connect(self._on_approval_decided)
        self.inspector.file_requested.connect(self._on_inspector_file_requested)
        self.inspector.message_activated.connect(self._on_inspector_message_activated)
        self.inspector.archive_day_requested.connect(self._on_inspector_archive_day_requested)
        self.inspector.archive_search_requested.connect(self._on_inspector_archive_search_requested)
        self.inspector.restore_requested.connect(self._on_inspector_restore_requested)
        self._theme.changed.connect(self._on_theme_changed)

        c.sessions_listed.connect(self._on_controller_sessions_listed)
        c.session_loaded.connect(self._on_controller_session_loaded)
        c.context_state.connect(self._on_controller_context_state)
        c.snapshot_changed.connect(self._on_controller_snapshot_changed)
        c.message_added.connect(self._on_controller_message_added)
        c.text_delta.connect(self._on_controller_text_delta)
        c.tool_started.connect(self._on_controller_tool_started)
        c.call_recorded.connect(self._on_controller_call_recorded)
        c.call_updated.connect(self._on_controller_call_updated)
        c.last_call.connect(self._on_controller_last_call)
        c.compaction_finished.connect(self._on_controller_compaction_finished)
        c.compaction_failed.connect(self._on_controller_compaction_failed)
        c.error.connect(self._on_controller_error)
        c.state_changed.connect(self._on_controller_state_changed)
        c.turn_finished.connect(self._on_controller_turn_finished)
        c.busy_changed.connect(self._on_controller_busy_changed)
        c.notice.connect(self._on_controller_notice)
        c.approval_requested.connect(self._on_controller_approval_requested)
        c.approvals_withdrawn.connect(self._on_controller_approvals_withdrawn)
        c.preview_started.connect(self._on_controller_preview_started)
        c.preview_ready.connect(self._on_controller_preview_ready)
        c.preview_summary.connect(self._on_controller_preview_summary)
        c.preview_after.connect(self._on_controller_preview_after)
        c.preview_failed.connect(self._on_controller_preview_failed)
        c.preview_closed.connect(self._on_controller_preview_closed)
        c.offloaded_file.connect(self._on_controller_offloaded_file)
        c.file_loaded.connect(self._on_controller_file_loaded)
        c.archive_messages.connect(self._on_controller_archive_messages)
        c.archive_hits.connect(self._on_controller_archive_hits)
        c.draft_tokens.connect(self._on_controller_draft_tokens)
        c.settings_changed.connect(self._on_controller_settings_changed)
        c.model_suggestions.connect(self._on_controller_model_suggestions)
        wire_sources(self)  # app/wire_sources.py: Sources tab, read-only views, live follow, subagents
        wire_chat(self)  # app/wire_chat.py: Edit → Find… (Ctrl+F) and the find bar above the chat
        wire_usage(self)  # app/wire_usage.py: the Usage dock, the session's cost in the status bar
        wire_help(self)  # app/wire_help.py: Edit → Copy / Select All, Help → Keyboard shortcuts, About
        wire_record(self)  # app/wire_record.py: File → Record an agent… (the recording proxy, its capture live)

    # ------------------------------------------------------------------ chart (built lazily)

    def ensure_chart(self) -> Any:
        """Build the context chart now if it is not built yet (imports pyqtgraph) and return it."""
        if self.chart is not None:
            return self.chart
        from widgets.context_chart import ContextChart

        chart = ContextChart(pal=self.pal)
        chart.compaction_clicked.connect(self._on_chart_compaction_clicked)
        chart.call_clicked.connect(self._on_chart_call_clicked)
        self.chart = chart
        self.analysis.attach_chart(chart)
        data = self._chart_data
        chart.set_timeline(data.timeline, data.compactions)
        chart.set_snapshot(data.snapshot)
        if data.draft:
            chart.set_draft_tokens(data.draft)
        chart.flush()
        if self._session is not None:
            self._show_chart()
        return chart

    def _show_chart(self) -> None:
        """The chart replaces its placeholder once it has a session's figures to draw: before, its empty
        axes (ticks 0 0 0 1 1, a -0 y axis) would show for the second the session takes to open."""
        chart = self.chart
        if chart is None or self.chart_dock.widget() is chart:
            return
        chart.flush()
        self.chart_dock.setWidget(chart)
        self._chart_placeholder.deleteLater()

    def default_layout(self) -> None:
        """The dock sizes of a first start (the right third for the chart above the inspector)."""
        width = max(560, self.width() * 45 // 100)
        self.resizeDocks([self.chart_dock], [width], Qt.Orientation.Horizontal)
        height = max(400, self.height() - 60)
        self.resizeDocks([self.chart_dock, self.inspector_dock], [height * 52 // 100, height * 48 // 100],
                         Qt.Orientation.Vertical)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._layout_restored:
            self._layout_restored = True
            self.default_layout()
        # focus on the draft box: focusing the sessions list first would make Qt pick its first row
        # as current, which reads as the user choosing that session
        self.input.editor().setFocus()
        if self.chart is None:  # after the first paint: the window appears before pyqtgraph loads
            QTimer.singleShot(CHART_DELAY_MS, self.ensure_chart)

    def _chart_snapshot(self, snap: ContextSnapshot | None) -> None:
        self._chart_data.snapshot = snap
        self._chart_data.draft = None
        if self.chart is not None:
            self.chart.set_snapshot(snap)

    # ------------------------------------------------------------------ persistence

    def window_settings(self) -> QSettings:
        folder = config_dir()
        folder.mkdir(parents=True, exist_ok=True)
        return QSettings(str(folder / WINDOW_FILE), QSettings.Format.IniFormat)

    def _restore_window(self) -> None:
        qs = self.window_settings()
        geometry = qs.value("geometry")
        if isinstance(geometry, QByteArray) and not geometry.isEmpty():
            self.restoreGeometry(geometry)
        else:
            self.resize(*DEFAULT_SIZE)
        state = qs.value("state")
        if isinstance(state, QByteArray) and not state.isEmpty():
            self._layout_restored = self.restoreState(state, STATE_VERSION)
        split = qs.value("splitter")
        if isinstance(split, QByteArray) and not split.isEmpty():
            self.splitter.restoreState(split)

    def save_window(self) -> None:
        qs = self.window_settings()
        qs.setValue("geometry", self.saveGeometry())
        qs.setValue("state", self.saveState(STATE_VERSION))
        qs.setValue("splitter", self.splitter.saveState())
        qs.sync()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.save_window()
        for dlg in (self.preview_dialog, self.settings_dialog):
            if dlg is not None:
                dlg.hide()
        self._closing = True
        super().closeEvent(event)
        self.closed.emit()

    # ------------------------------------------------------------------ helpers

    def set_busy(self, busy: bool) -> None:
        self.input.set_busy(busy)
        self.stop_action.setEnabled(busy)
        self.compact_action.setEnabled(not busy)

    def show_notice(self, level: str, text: str) -> None:
        self.notices.append((level, text))
        self.notice_bar.show_notice(level, text, self.pal)
        first = text.splitlines()[0] if text else ""
        self.status.showMessage(first, 8000)

    def _raise_inspector(self, tab: str | None = None) -> None:
        self.inspector_dock.show()
        self.inspector_dock.raise_()
        if tab is not None:
            self.inspector.show_tab(tab)

    def _update_markers(self, undo_id: str | None) -> None:
        for key in self.chat.marker_ids():
            item = self.chat.item(key)
            undone = item is not None and item.event is not None and item.event.result is Outcome.UNDONE
            self.chat.update_compaction_marker(key, undoable=key == undo_id and not undone)
        self.undo_action.setEnabled(undo_id is not None)

    def _apply_state(self, state: ContextState) -> None:
        self.chat.set_in_context(set(state.live_ids))
        self.chat.set_tokens(state.tokens)
        self.inspector.set_summary(state.summary, state.summary_tokens if state.summary else None)
        self.inspector.set_archive_days(state.archive_days)
        self._update_markers(state.undo_id)
        self._chart_snapshot(state.snapshot)
        self.status.set_snapshot(state.snapshot)

    # ------------------------------------------------------------------ actions

    def _on_new_action_triggered(self) -> None:
        self.controller.new_session()

    def _on_open_action_triggered(self) -> None:
        self.sessions.choose_transcript()

    def _on_compact_action_triggered(self) -> None:
        self.controller.start_preview("")

    def _on_stop_action_triggered(self) -> None:
        self.controller.stop()

    def _on_undo_action_triggered(self) -> None:
        self.controller.undo_compaction()

    def _on_settings_action_triggered(self) -> None:
        self.open_settings()

    def open_settings(self) -> Any:
        """Show the settings dialog (non-modal) and return it."""
        from widgets.settings_dialog import SettingsDialog

        if self.settings_dialog is None:
            dlg = SettingsDialog(self, self.controller.settings, pal=self.pal)
            dlg.settings_accepted.connect(self._on_settings_settings_accepted)
            dlg.api_key_entered.connect(self._on_settings_api_key_entered)
            dlg.api_key_forget_requested.connect(self._on_settings_api_key_forget_requested)
            self.settings_dialog = dlg
        dlg = self.settings_dialog
        dlg.set_settings(self.controller.settings)
        if self._model_names:
            dlg.set_model_suggestions(self._model_names)
        dlg.set_api_key_status(self.controller.api_key_status())
        window = self.controller.window_description()
        if window:
            dlg.set_window_info(f"{window}; override it here")
        dlg.open()
        return dlg

    def _on_settings_settings_accepted(self, settings: Settings) -> None:
        self.controller.apply_settings(settings)

    def _on_settings_api_key_entered(self, key: str) -> None:
        self.controller.store_api_key(key)

    def _on_settings_api_key_forget_requested(self) -> None:
        self.controller.forget_api_key()
        if self.settings_dialog is not None:
            self.settings_dialog.set_api_key_status(self.controller.api_key_status())

    # ------------------------------------------------------------------ widget signals

    def _on_sessions_session_selected(self, session_id: str) -> None:
        if self._session is not None and self._session.id == session_id:
            return
        self.controller.open_session(session_id)

    def _on_sessions_new_requested(self) -> None:
        self.controller.new_session()

    def _on_sessions_rename_requested(self, session_id: str, title: str) -> None:
        self.controller.rename_session(session_id, title)

    def _on_sessions_delete_requested(self, session_id: str) -> None:
        self.controller.delete_session(session_id)

    def _on_sessions_open_transcript_requested(self, path: str) -> None:
        self.controller.import_transcript(path)

    def _on_input_send_requested(self, text: str) -> None:
        if self.controller.send(text):
            self.chat.scroll_to_bottom()

    def _on_input_command_requested(self, name: str, arg: str) -> None:
        if name == "context":
            self.chart_dock.show()
            self.chart_dock.raise_()
        self.controller.run_command(name, arg)

    def _on_input_stop_requested(self) -> None:
        self.controller.stop()

    def _on_input_draft_changed(self, text: str) -> None:
        self.controller.count_draft(text)

    def _on_chat_open_offload(self, path: str) -> None:
        self._raise_inspector("files")
        self.inspector.files.select(path)
        self.controller.read_offloaded(path)

    def _on_chat_summary_requested(self, event: CompactionRecord) -> None:
        self._raise_inspector("compactions")
        events = self.inspector.log.events
        for row, ev in enumerate(events):
            if ev.id and ev.id == event.id:
                self.inspector.log.table.selectRow(row)
                break

    def _on_chat_undo_requested(self, marker_id: str) -> None:
        self.controller.undo_compaction(marker_id)

    def _on_chat_link_activated(self, url: str) -> None:
        if url.startswith(("http://", "https://")):
            QDesktopServices.openUrl(QUrl(url))

    def _on_approval_decided(self, request_id: str, allowed: bool) -> None:
        self.controller.answer_approval(request_id, allowed)

    def _on_inspector_file_requested(self, path: str) -> None:
        self.controller.read_offloaded(path)

    def _on_inspector_message_activated(self, message_id: str) -> None:
        self.chat.scroll_to_message(message_id)

    def _on_inspector_archive_day_requested(self, day: str) -> None:
        self.controller.load_archive_day(day)

    def _on_inspector_archive_search_requested(self, query: str) -> None:
        self.controller.search_archive(query)

    def _on_inspector_restore_requested(self, ids: list[str]) -> None:
        self.controller.restore_messages(list(ids))

    def _on_chart_compaction_clicked(self, event: CompactionRecord) -> None:
        key = event.id
        if key and self.chat.item(key) is not None:
            self.chat.scroll_to_message(key)
        self._on_chat_summary_requested(event)

    def _on_chart_call_clicked(self, index: int) -> None:
        timeline = self._chart_data.timeline
        if not 0 <= index < len(timeline):
            return
        rec = timeline[index].record
        target = rec.message_id
        if not target and self._session is not None:
            count = rec.message_count or 0
            ids = self.chat.message_ids()
            target = ids[min(count, len(ids) - 1)] if ids else None
        if target:
            self.chat.scroll_to_message(str(target))

    def _on_preview_apply_requested(self, summary: str) -> None:
        self.controller.apply_preview(summary)

    def _on_preview_discard_requested(self) -> None:
        self.controller.discard_preview()

    def _on_preview_regenerate_requested(self, instruction: str) -> None:
        if self.preview_dialog is not None:
            self.preview_dialog.set_busy(True)
        self.controller.regenerate_preview(instruction)

    def _on_preview_cancel_requested(self) -> None:
        self.controller.cancel_preview()

    def _on_preview_summary_edited(self, summary: str) -> None:
        self.controller.edit_preview(summary)

    def _on_theme_changed(self, pal: Palette) -> None:
        self.pal = pal
        for w in (self.chat, self.input, self.approval, self.inspector, self.status, self.notice_bar):
            w.set_palette(pal)
        self.sessions.set_palette(pal)
        if self.chart is not None:
            self.chart.set_palette(pal)
        for dlg in (self.preview_dialog, self.settings_dialog):
            if dlg is not None:
                dlg.set_palette(pal)

    # ------------------------------------------------------------------ controller signals

    def _on_controller_sessions_listed(self, sessions: list[SessionRow]) -> None:
        self.sessions.set_sessions(sessions)
        if self._session is not None:
            self.sessions.set_current(self._session.id)

    def _on_controller_session_loaded(self, view: SessionView) -> None:
        old, self._session = self._session, view
        self.export_menu.set_session(view)
        self._streaming.clear()
        self.setWindowTitle(f"{view.title} — Context Workbench")
        self.chat.set_messages(view.messages, view.state.tokens, live=set(view.state.live_ids),
                               placed=[(marker.event, marker.undoable, marker.after_id) for marker in view.markers])
        if view.id not in self.sessions.session_ids():
            self.sessions.update_session(SessionRow(view.id, view.title))
        self.sessions.set_current(view.id)
        self.inspector.clear_details()  # nothing of the session shown before stays in a pane
        self.inspector.set_session_dir(view.path)
        self.inspector.set_offloaded_files(view.files)
        self.inspector.set_compaction_events(view.compactions)
        self._chart_data.timeline = list(view.timeline)
        self._chart_data.compactions = list(view.compactions)
        if self.chart is not None:
            self.chart.set_timeline(view.timeline, view.compactions)
        self._apply_state(view.state)
        self._show_chart()
        self.status.set_model(view.model)
        self.status.set_last_call(*view.last_call)
        self.status.set_state(self.controller.state)
        self.chat.scroll_to_bottom()
        self.notice_bar.hide()
        self._reclaimer.replaced(len(old.messages) + len(old.timeline) if old is not None else 0)  # its memory back

    def _on_controller_context_state(self, state: ContextState) -> None:
        self._apply_state(state)

    def _on_controller_snapshot_changed(self, snap: ContextSnapshot) -> None:
        self._chart_snapshot(snap)
        self.status.set_snapshot(snap)

    def _on_controller_message_added(self, event: MessageAdded) -> None:
        msg = event.message  # the chat holds the session's message (it never changes a message it holds: a
        # streamed one is copied): not a copy of every message shown, for as long as a followed file grows
        key = str(msg.get("id"))
        at_bottom = self.chat.is_at_bottom()
        if key in self._streaming:
            self._streaming.discard(key)
            self.chat.update_message(msg, event.tokens)
            self.chat.end_stream(key)
        else:
            self.chat.append_message(msg, event.tokens)
        if at_bottom:
            self.chat.scroll_to_bottom()

    def _on_controller_text_delta(self, event: TextDelta) -> None:
        at_bottom = self.chat.is_at_bottom()
        self._streaming.add(event.message_id)
        self.chat.stream_delta(event.message_id, event.text, event.reasoning)
        if at_bottom:
            self.chat.scroll_to_bottom()

    def _on_controller_tool_started(self, event: ToolCallStarted) -> None:
        self.status.showMessage(f"running {event.name}…", 3000)

    def _on_controller_call_recorded(self, record: TimelineCall) -> None:
        self._chart_data.timeline.append(record)
        if self.chart is not None:
            self.chart.append_call(record)

    def _on_controller_call_updated(self, record: TimelineCall) -> None:
        timeline = self._chart_data.timeline
        if timeline:
            timeline[-1] = record
            if self.chart is not None:
                self.chart.update_last_call(record)

    def _on_controller_last_call(self, estimated: int | None, reported: int | None) -> None:
        self.status.set_last_call(estimated, reported)

    def _on_controller_compaction_finished(self, marker: Marker) -> None:
        ev = marker.event
        self._chart_data.compactions.append(ev)
        if self.chart is not None:
            self.chart.add_compaction(ev)
        self.inspector.add_compaction_event(ev)
        after = marker.after_id
        if after is not None and self.chat.item(after) is None:
            after = None
        self.chat.add_compaction_marker(ev, marker.undoable, after)
        self.undo_action.setEnabled(marker.undoable)
        QTimer.singleShot(0, give_back)  # what the compaction moved out is garbage once drawn: its memory back

    def _on_controller_compaction_failed(self, event: CompactionCancelled) -> None:
        self.status.showMessage(f"compaction ({event.trigger}) failed: {event.reason}", 8000)

    def _on_controller_error(self, event: ErrorEvent) -> None:
        if event.retrying:
            self.status.showMessage(event.message, 8000)

    def _on_controller_state_changed(self, state: str) -> None:
        self.status.set_state(state)

    def _on_controller_turn_finished(self, event: TurnFinished) -> None:
        for key in list(self._streaming):  # streamed but never stored (the call failed before any text)
            self.chat.remove_message(key)
        self._streaming.clear()
        if event.interrupted:
            self.status.showMessage("stopped: the partial answer is kept, marked interrupted", 8000)

    def _on_controller_busy_changed(self, busy: bool) -> None:
        self.set_busy(busy)
        if not busy:
            self.approval.cancel_all()

    def _on_controller_notice(self, level: str, text: str) -> None:
        self.show_notice(level, text)

    def _on_controller_approval_requested(self, request_id: str, tool: str, arguments: str) -> None:
        self.approval.ask(request_id, tool, arguments, approval_text(tool, arguments))

    def _on_controller_approvals_withdrawn(self) -> None:
        self.approval.cancel_all()

    def _preview(self) -> Any:
        from widgets.compaction_preview import CompactionPreview

        if self.preview_dialog is None:
            dlg = CompactionPreview(self, pal=self.pal)
            dlg.apply_requested.connect(self._on_preview_apply_requested)
            dlg.discard_requested.connect(self._on_preview_discard_requested)
            dlg.regenerate_requested.connect(self._on_preview_regenerate_requested)
            dlg.cancel_requested.connect(self._on_preview_cancel_requested)
            dlg.summary_edited.connect(self._on_preview_summary_edited)
            self.preview_dialog = dlg
        return self.preview_dialog

    def _on_controller_preview_started(self, instruction: str) -> None:
        dlg = self._preview()
        dlg.set_error("")
        if instruction:
            dlg.instruction_edit.setText(instruction)
        dlg.set_busy(True)
        dlg.open()

    def _on_controller_preview_ready(self, preview: Any) -> None:
        dlg = self._preview()
        plan = preview.plan
        tokens = dict(self._session.state.tokens) if self._session is not None else {}
        tokens.update({mid: n for mid, n in preview.before.message_tokens})
        dlg.set_plan(preview.before, preview.after, plan.compact, plan.keep, tokens, preview.instruction or "")
        dlg.set_summary(preview.summary.text)
        dlg.show_summary_parts(preview.summary)
        pending = bool(getattr(preview.summary, "model_pending", False))
        if pending:
            model = getattr(preview.summary, "model", "") or "the model"
            dlg.set_busy(True, f"{model} is writing its part… (Apply uses the digest shown)", apply_allowed=True)
        else:
            dlg.set_busy(False)
        dlg.show_problem(preview.plan, preview.summary)
        if not dlg.isVisible():
            dlg.open()

    def _on_controller_preview_summary(self, preview: Any) -> None:
        """The model's part arrived (the plan and the digest were shown already)."""
        dlg = self._preview()
        if dlg.set_model_text(preview.summary.text):
            dlg.set_after(preview.after)
        dlg.set_busy(False)
        dlg.show_summary_parts(preview.summary)
        dlg.show_problem(preview.plan, preview.summary)

    def _on_controller_preview_after(self, snap: ContextSnapshot) -> None:
        if self.preview_dialog is not None:
            self.preview_dialog.set_after(snap)

    def _on_controller_preview_failed(self, reason: str) -> None:
        dlg = self._preview()
        dlg.set_busy(False)
        dlg.set_error(reason)
        if not dlg.isVisible() and not reason.startswith("cancelled") and not self._closing:
            dlg.open()

    def _on_controller_preview_closed(self) -> None:
        if self.preview_dialog is not None:
            self.preview_dialog.set_busy(False)
            self.preview_dialog.hide()

    def _on_controller_offloaded_file(self, file: FileRow) -> None:
        self.inspector.add_offloaded_file(file)

    def _on_controller_file_loaded(self, path: str, text: str) -> None:
        self.inspector.show_file(path, text)

    def _on_controller_archive_messages(self, day: str, messages: list[Any], tokens: dict[str, int]) -> None:
        self.inspector.set_archive_messages(day, messages, tokens)

    def _on_controller_archive_hits(self, query: str, hits: list[ArchiveHit]) -> None:
        self.inspector.set_archive_hits(query, hits)

    def _on_controller_draft_tokens(self, n: int) -> None:
        self.input.set_draft_tokens(n if n else None)
        self._chart_data.draft = n
        if self.chart is not None:
            self.chart.set_draft_tokens(n)

    def _on_controller_settings_changed(self, settings: Settings) -> None:
        self.status.set_model(settings.model)
        if settings.theme != self._theme.mode:
            app = QApplication.instance()
            if isinstance(app, QGuiApplication):
                apply_theme(app, settings.theme)
            self._theme.set_mode(settings.theme)

    def _on_controller_model_suggestions(self, names: list[str]) -> None:
        self._model_names = list(names)
        if self.settings_dialog is not None:
            self.settings_dialog.set_model_suggestions(names)

    # ------------------------------------------------------------------ introspection (tests)

    def notice_text(self) -> str:
        return self.notice_bar.label.text() if self.notice_bar.isVisible() else ""


__all__ = ["MainWindow", "NoticeBar"]
