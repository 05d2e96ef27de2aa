"""Wiring of the Sources part of the window (issue 13): the Sources tab of the sessions panel, the
read-only line above the chat input, the live state in the status bar, subagent links, and the
agent's own cost of an imported session (its cost records) in the status bar.

The first-run pointer (issue 27): while an empty ctxbench session is shown and the scan found other
agents' sessions, a line above the chat names them (:class:`widgets.sources_hint.SourcesHint`) with a
button to the Sources tab; once the tab was shown or the line dismissed it stays away (``window.ini``).
A source view shown makes the sessions list have no current row, so a click on any ctxbench session
(the one shown before included) opens it.

:func:`wire_sources` is called once from ``MainWindow._connect`` (after the window's own
connections, so its slots run after the window's ``session_loaded``). It keeps its state on a
:class:`SourcesWiring` stored as ``window.sources_wiring``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QFileSystemWatcher, QObject
from PySide6.QtWidgets import QLabel

from engine.sources.formats import cost_recorded_by, listed_places
from engine.workbench.imported import ImportFacts
from engine.workbench.rows import ProblemRow, SourceRow
from engine.workbench.source_views import found_sessions_text
from engine.workbench.views import SessionView
from widgets.readonly_bar import ReadOnlyBar
from widgets.sources_hint import SourcesHint

HINT_KEY = "hints/sources_seen"  # in window.ini: the Sources tab was shown, or the pointer dismissed

if TYPE_CHECKING:
    from app.window_base import WindowBase


class SourcesWiring(QObject):
    """The slots (see the module docstring)."""

    def __init__(self, window: WindowBase) -> None:
        super().__init__(window)
        self.window = window
        self.controller = window.controller
        self.bar = ReadOnlyBar()
        self.live_label = QLabel()
        self.live_label.hide()
        window.status.addPermanentWidget(self.live_label)
        column = window.input.parentWidget()
        layout = column.layout() if column is not None else None
        if layout is not None:
            layout.insertWidget(layout.indexOf(window.input), self.bar)  # type: ignore[attr-defined]
        self.hint = SourcesHint()
        self.hint.set_palette(window.pal)
        chat_column: Any = window.chat.parentWidget()
        chat_layout = chat_column.layout() if chat_column is not None else None
        if chat_layout is not None:
            chat_layout.insertWidget(chat_layout.indexOf(window.chat), self.hint)
        self.hint_seen = bool(window.window_settings().value(HINT_KEY, False, type=bool))
        self.counts: dict[str, int] = {}
        self.view: SessionView | None = None
        self._scanning = False
        # the followed file: its change notifications wake the service's follow loop at once (it also
        # polls, for file systems that send none)
        self.watcher = QFileSystemWatcher(self)
        self.watcher.fileChanged.connect(self._on_file_changed)
        self._connect()

    def _connect(self) -> None:
        w, c = self.window, self.controller
        sources = w.sessions.sources
        sources.set_known(listed_places(), cost_recorded_by())  # (where Sources looks, whose cost it shows)
        sources.source_opened.connect(self._on_source_opened)
        sources.continue_requested.connect(self._on_continue_path)
        sources.refresh_requested.connect(self._on_refresh)
        w.sessions.tabs.currentChanged.connect(self._on_tab_changed)
        self.bar.continue_requested.connect(self._on_continue)
        self.bar.parent_requested.connect(self._on_parent)
        self.hint.show_requested.connect(self._on_hint_show_requested)
        self.hint.dismissed.connect(self._mark_hint_seen)
        c.message_added.connect(self._update_hint)
        c.sources_listed.connect(self._on_sources_listed)
        c.session_loaded.connect(self._on_session_loaded)
        c.follow_changed.connect(self._on_follow_changed)
        c.imported_changed.connect(self._on_imported_changed)
        c.messages_retracted.connect(self._on_messages_retracted)
        c.busy_changed.connect(self._on_busy_changed)
        if hasattr(w.chat, "subagent_requested"):
            w.chat.subagent_requested.connect(self._on_subagent_requested)

    # --- intents
    def _on_source_opened(self, path: str) -> None:
        self.controller.open_source(path)

    def _on_continue_path(self, path: str) -> None:
        self.controller.continue_source(path)

    def _on_continue(self) -> None:
        self.controller.continue_source()

    def _on_parent(self) -> None:
        self.controller.open_parent()

    def _on_refresh(self) -> None:
        self.controller.scan_sources(True)

    def _on_subagent_requested(self, rel: str) -> None:
        self.controller.open_subagent(rel)

    def _on_tab_changed(self, index: int) -> None:
        if self.window.sessions.tabs.widget(index) is not self.window.sessions.sources:
            return
        self._mark_hint_seen()
        if not self._scanning:
            self._scanning = True
            self.controller.start_source_scans()  # now, then every 30 s (the index keeps rescans cheap)

    def _on_hint_show_requested(self) -> None:
        w = self.window
        w.sessions_action.setChecked(True)  # the panel may have been hidden (View → Sessions)
        w.sessions.tabs.setCurrentWidget(w.sessions.sources)
        w.sessions.sources.setFocus()

    def _mark_hint_seen(self) -> None:
        if not self.hint_seen:
            self.hint_seen = True
            settings = self.window.window_settings()
            settings.setValue(HINT_KEY, True)
            settings.sync()
        self._update_hint()

    def _update_hint(self, *_args: Any) -> None:
        """The pointer shows over an empty ctxbench session while other agents' sessions were found."""
        view = self.view
        empty = view is not None and not view.read_only and not self.window.chat.message_ids()
        show = bool(self.counts) and empty and not self.hint_seen
        if show:
            self.hint.set_text(found_sessions_text(self.counts))
        self.hint.setVisible(show)

    # --- what the service says
    def _on_sources_listed(self, rows: list[SourceRow], problems: list[ProblemRow]) -> None:
        self.window.sessions.sources.set_sources(rows)
        self.window.sessions.sources.set_problems(problems)
        if self.view is not None and self.view.source is not None and self.view.source.path:
            self.window.sessions.sources.set_current(self.view.source.path)
        counts: dict[str, int] = {}
        for row in rows:
            agent = row.agent
            if agent:
                counts[agent] = counts.get(agent, 0) + 1
        self.counts = counts
        self._update_hint()

    def _on_session_loaded(self, view: SessionView) -> None:
        self.view = view
        w = self.window
        read_only = view.read_only
        source = view.source if read_only else None
        self.bar.set_view(source, view.title)
        w.input.setEnabled(not read_only)
        w.input.set_placeholder("Read-only: this is the agent's own session — Continue in ctxbench to talk to it"
                                if read_only else None)
        w.compact_action.setEnabled(not read_only and not self.controller.busy)
        w.undo_action.setEnabled(w.undo_action.isEnabled() and not read_only)
        if read_only:
            w.sessions.remove_session(view.id)  # a view is not one of the ctxbench sessions
            w.sessions.clear_current()  # so a click on the session shown before opens it again
            name = (source.agent if source is not None else "") or "agent"
            w.setWindowTitle(f"{name}: {view.title} (read-only) — Context Workbench")
            if source is not None and source.path:
                w.sessions.sources.set_current(source.path)
        self._on_imported_changed(view.imported)
        if source is None:
            self._on_follow_changed(False, "", False)
        else:
            self._on_follow_changed(source.following, source.path, source.live)
        self._update_hint()

    def _on_imported_changed(self, facts: ImportFacts | None) -> None:
        """The agent's own cost of an imported session (None: not imported, or no cost records)."""
        if facts is None:
            self.window.status.set_agent_cost(None)
        else:
            self.window.status.set_agent_cost(facts.agent_cost_usd, facts.agent_cost_by_model)

    def _on_file_changed(self, path: str) -> None:
        if path not in self.watcher.files() and Path(path).exists():
            self.watcher.addPath(path)  # replaced (a new inode): watch the new file
        self.controller.file_changed(path)

    def _watch(self, path: str) -> None:
        if self.watcher.files() != ([path] if path else []):
            if self.watcher.files():
                self.watcher.removePaths(self.watcher.files())
            if path and Path(path).exists():
                self.watcher.addPath(path)

    def _on_follow_changed(self, following: bool, path: str, live: bool) -> None:
        if path or not following:
            self._watch(path if following else "")
        self.bar.set_following(following, live)
        self.live_label.setText(("● live" if live else "○ following") if following else "")
        self.live_label.setStyleSheet(f"color: {'#2e9d4f' if live else 'gray'}; font-weight: bold; padding: 0 6px;")
        self.live_label.setToolTip("following the agent's session file: new lines appear as they are written"
                                   if following else "")
        self.live_label.setVisible(following)

    def _on_messages_retracted(self, ids: list[str]) -> None:
        for key in ids:
            self.window.chat.remove_message(key)

    def _on_busy_changed(self, busy: bool) -> None:
        if self.view is not None and self.view.read_only:
            self.window.compact_action.setEnabled(False)


def wire_sources(window: WindowBase) -> SourcesWiring:
    """Connect the Sources part of ``window`` (see the module docstring)."""
    wiring = SourcesWiring(window)
    window.sources_wiring = wiring  # type: ignore[attr-defined]
    return wiring


__all__ = ["SourcesWiring", "wire_sources"]
