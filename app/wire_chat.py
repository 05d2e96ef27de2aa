"""Wiring of find in the conversation (issue 13): the Edit → Find… action (Ctrl+F), the
:class:`FindBar` above the chat, and the find bar ↔ :class:`ChatView` connection.

:func:`wire_chat` is called once from ``MainWindow._connect``; its state is a :class:`ChatWiring`
stored as ``window.chat_wiring``. The search runs over the chat model's plain text as the query
changes; when the conversation changes (a session loaded, messages added) the hits are searched
again at the next step, keeping the current index where it was.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QKeySequence, QShortcut
from PySide6.QtWidgets import QApplication, QMenu, QWidget

from widgets.find_bar import FindBar

if TYPE_CHECKING:
    from app.window_base import WindowBase


class ChatWiring(QObject):
    """The find bar and its slots (see the module docstring)."""

    def __init__(self, window: WindowBase) -> None:
        super().__init__(window)
        self.window = window
        self.chat = window.chat
        self.bar = FindBar()
        column = self.chat.parentWidget()
        layout: Any = column.layout() if column is not None else None
        if layout is not None:
            layout.insertWidget(layout.indexOf(self.chat), self.bar)
        self.find_action = QAction("&Find…", window)
        self.find_action.setShortcut(QKeySequence(QKeySequence.StandardKey.Find))
        self.find_action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        self.find_action.setToolTip("Find in the conversation")
        self.find_action.triggered.connect(self.open)
        window.addAction(self.find_action)
        edit = self._edit_menu()
        if edit is not None:
            edit.addSeparator()
            edit.addAction(self.find_action)
        self._dirty = False
        self.bar.search_changed.connect(self._on_search_changed)
        self.bar.next_requested.connect(lambda: self._step(True))
        self.bar.previous_requested.connect(lambda: self._step(False))
        self.bar.closed.connect(self._on_closed)
        self._key = QKeySequence(QKeySequence.StandardKey.Find)
        app = QApplication.instance()
        if isinstance(app, QApplication):
            app.focusChanged.connect(self._on_focus_changed)
        model = self.chat.chat_model()
        model.modelReset.connect(self._on_model_changed)
        model.rowsInserted.connect(self._on_model_changed)
        model.rowsRemoved.connect(self._on_model_changed)

    def _edit_menu(self) -> QMenu | None:
        for action in self.window.menuBar().actions():
            menu = action.menu()
            if isinstance(menu, QMenu) and action.text().replace("&", "") == "Edit":
                return menu
        return None

    def _on_focus_changed(self, _old: QWidget | None, new: QWidget | None) -> None:
        """A widget with its own Ctrl+F (the inspector's file viewer) keeps it: the window's shortcut
        steps aside while the focus is inside it (two matching shortcuts would both be ambiguous)."""
        own = False
        w = new
        while w is not None and w is not self.window and not own:
            own = any(sc.key().matches(self._key) == QKeySequence.SequenceMatch.ExactMatch
                      for sc in w.findChildren(QShortcut, options=Qt.FindChildOption.FindDirectChildrenOnly))
            w = w.parentWidget()
        want = QKeySequence() if own else self._key
        if self.find_action.shortcut() != want:
            self.find_action.setShortcut(want)

    def open(self) -> None:
        self.bar.open_bar()

    def _on_search_changed(self, text: str) -> None:
        current, total = self.chat.find_text(text)
        self._dirty = False
        self.bar.set_result(current, total)

    def _step(self, forward: bool) -> None:
        if self._dirty:
            self.chat.find_text(self.bar.text(), keep=self.chat.find_state()[0])
            self._dirty = False
        current, total = self.chat.find_step(forward)
        self.bar.set_result(current, total)

    def _on_model_changed(self, *_args: Any) -> None:
        if self.bar.isVisible() and self.bar.text():
            self._dirty = True

    def _on_closed(self) -> None:
        self.chat.find_clear()
        self.chat.setFocus(Qt.FocusReason.OtherFocusReason)


def wire_chat(window: WindowBase) -> ChatWiring:
    """Add find in the conversation to ``window`` (see the module docstring)."""
    wiring = ChatWiring(window)
    window.chat_wiring = wiring  # type: ignore[attr-defined]
    return wiring


__all__ = ["ChatWiring", "wire_chat"]
