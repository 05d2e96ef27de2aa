"""A find bar: :class:`FindBar` — a search field, "n of m", previous / next and close buttons.

It only emits intents: ``search_changed(str)`` as the text changes, ``next_requested()`` (Enter, ▼)
and ``previous_requested()`` (Shift+Enter, ▲), ``closed()`` (Esc, ✕; the bar hides itself). The owner
answers with :meth:`FindBar.set_result`."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QToolButton, QWidget


class FindBar(QWidget):
    """Find in the conversation (see the module docstring)."""

    search_changed = Signal(str)
    next_requested = Signal()
    previous_requested = Signal()
    closed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("FindBar")
        self.edit = QLineEdit(self)
        self.edit.setPlaceholderText("Find in the conversation")
        self.edit.setClearButtonEnabled(True)
        self.edit.installEventFilter(self)
        self.count = QLabel("", self)
        self.count.setMinimumWidth(90)
        self.prev_button = self._button("▲", "Previous match (Shift+Enter)", self.previous_requested.emit)
        self.next_button = self._button("▼", "Next match (Enter)", self.next_requested.emit)
        self.close_button = self._button("✕", "Close (Esc)", self.close_bar)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(4, 2, 4, 2)
        lay.setSpacing(4)
        lay.addWidget(QLabel("Find:", self))
        lay.addWidget(self.edit, 1)
        lay.addWidget(self.count)
        lay.addWidget(self.prev_button)
        lay.addWidget(self.next_button)
        lay.addWidget(self.close_button)
        self.edit.textChanged.connect(self.search_changed.emit)
        self.hide()

    def _button(self, text: str, tip: str, slot: object) -> QToolButton:
        b = QToolButton(self)
        b.setText(text)
        b.setToolTip(tip)
        b.setAutoRaise(True)
        b.clicked.connect(slot)
        return b

    def text(self) -> str:
        return self.edit.text()

    def open_bar(self) -> None:
        """Show the bar, focus the field and select its text."""
        self.show()
        self.edit.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.edit.selectAll()
        if self.edit.text():
            self.search_changed.emit(self.edit.text())

    def close_bar(self) -> None:
        self.hide()
        self.closed.emit()

    def set_result(self, current: int, total: int) -> None:
        """Show "n of m" (``current`` is 0-based, -1 for none)."""
        if not self.edit.text():
            self.count.setText("")
        elif total == 0:
            self.count.setText("No matches")
        else:
            self.count.setText(f"{current + 1:,} of {total:,}")
        self.prev_button.setEnabled(total > 0)
        self.next_button.setEnabled(total > 0)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.edit and event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent):
            key = event.key()
            if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
                if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                    self.previous_requested.emit()
                else:
                    self.next_requested.emit()
                return True
            if key == Qt.Key.Key_Escape:
                self.close_bar()
                return True
        return super().eventFilter(watched, event)
