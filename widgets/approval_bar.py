"""Tool-call approval without a nested event loop.

When the agent wants to run a tool that needs permission (writing files, running a shell command),
the app calls :meth:`ApprovalBar.ask`; the bar appears above the draft box with the tool name and
its arguments and two buttons. The answer comes back as the ``decided`` signal — no ``exec()``, so
a qasync event loop keeps running (the app awaits a future that the signal resolves).
Several requests queue up and are shown one after another.

Public API of :class:`ApprovalBar`
----------------------------------
Signals:
    decided(str, bool)        request id, allowed
Methods:
    ask(request_id, tool, arguments, reason="")   queue a request (shown at once when idle)
    cancel(request_id)        withdraw a request (e.g. the turn was stopped); nothing is emitted
    cancel_all()
    pending() -> list[str]    ids waiting, the shown one first
    allow() / deny()          answer the shown request (same as the buttons)
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from widgets.formatting import pretty_arguments
from widgets.theme import Palette, palette


@dataclass(frozen=True)
class _Request:
    request_id: str
    tool: str
    arguments: str
    reason: str


class ApprovalBar(QFrame):
    """Asks the user to allow or deny one tool call at a time (see the module docstring)."""

    decided = Signal(str, bool)

    def __init__(self, parent: QWidget | None = None, pal: Palette | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ApprovalBar")
        self._queue: list[_Request] = []
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 8, 10, 8)
        layout.setSpacing(6)
        self._title = QLabel()
        self._title.setTextFormat(Qt.TextFormat.PlainText)
        self._title.setWordWrap(True)
        f = self._title.font()
        f.setBold(True)
        self._title.setFont(f)
        layout.addWidget(self._title)
        self._reason = QLabel()
        self._reason.setWordWrap(True)
        self._reason.setTextFormat(Qt.TextFormat.PlainText)
        layout.addWidget(self._reason)
        self._args = QPlainTextEdit()
        self._args.setReadOnly(True)
        self._args.setMaximumHeight(120)
        layout.addWidget(self._args)
        row = QHBoxLayout()
        self._more = QLabel()
        row.addWidget(self._more, 1)
        self._deny = QPushButton("Deny")
        self._allow = QPushButton("Allow")
        row.addWidget(self._deny)
        row.addWidget(self._allow)
        layout.addLayout(row)
        self._allow.clicked.connect(self.allow)
        self._deny.clicked.connect(self.deny)
        self.set_palette(pal or palette())
        self.setVisible(False)

    def set_palette(self, pal: Palette) -> None:
        self.setStyleSheet(
            f"#ApprovalBar {{ border: 1px solid {pal.warning}; border-radius: 6px; "
            f"background: {pal.panel}; }}"
        )
        self._more.setStyleSheet(f"color: {pal.muted};")

    def ask(self, request_id: str, tool: str, arguments: str, reason: str = "") -> None:
        if any(r.request_id == request_id for r in self._queue):
            return
        self._queue.append(_Request(request_id, tool, arguments, reason))
        self._show_current()

    def cancel(self, request_id: str) -> None:
        self._queue = [r for r in self._queue if r.request_id != request_id]
        self._show_current()

    def cancel_all(self) -> None:
        self._queue.clear()
        self._show_current()

    def pending(self) -> list[str]:
        return [r.request_id for r in self._queue]

    def current_text(self) -> str:
        return f"{self._title.text()}\n{self._args.toPlainText()}"

    def allow(self) -> None:
        self._answer(True)

    def deny(self) -> None:
        self._answer(False)

    def _answer(self, allowed: bool) -> None:
        if not self._queue:
            return
        req = self._queue.pop(0)
        self._show_current()
        self.decided.emit(req.request_id, allowed)

    def _show_current(self) -> None:
        if not self._queue:
            self.setVisible(False)
            return
        req = self._queue[0]
        self._title.setText(f"The agent wants to run the tool “{req.tool}”. Allow it?")
        self._reason.setText(req.reason)
        self._reason.setVisible(bool(req.reason))
        self._args.setPlainText(pretty_arguments(req.arguments))
        waiting = len(self._queue) - 1
        self._more.setText(f"{waiting} more request{'s' if waiting != 1 else ''} waiting" if waiting else "")
        self.setVisible(True)
        self._allow.setFocus()
