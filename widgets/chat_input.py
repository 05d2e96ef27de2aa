"""The draft box: live token cost, Send (Ctrl+Enter), Stop (Esc) and slash commands with completion.

The widget never counts tokens itself: it emits ``draft_changed(text)`` (debounced) and the app
answers with :meth:`ChatInput.set_draft_tokens`.

Slash commands (typed at the start of the draft; a completion popup lists them):

==========================  ==========================================================
``/compact [instruction]``  preview a compaction; the optional instruction guides the summary
``/new``                    start a new session
``/clear``                  clear the conversation of this session
``/context``                show what fills the context window
==========================  ==========================================================

An unknown command or an argument where none is taken is refused inline with the reason; nothing
is sent and the draft stays.

Public API of :class:`ChatInput`
--------------------------------
Signals:
    send_requested(str)              a message to send (text stripped, never empty)
    command_requested(str, str)      a slash command: name without "/", argument ("" if none)
    stop_requested()                 Stop clicked or Esc pressed while busy
    draft_changed(str)               the draft changed (debounced ~120 ms) — answer with set_draft_tokens
Methods:
    set_draft_tokens(n: int | None)  show the draft's cost ("≈ 42 tokens"); None hides it
    set_busy(busy: bool)             a turn is running: Send disabled, Stop enabled
    set_error(text: str)             show a reason under the box ("" clears)
    text() / set_text(text) / clear()
    editor() -> DraftEdit            the QPlainTextEdit (focus, tests)
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QStringListModel, Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent, QKeySequence, QShortcut, QTextCursor
from PySide6.QtWidgets import (
    QCompleter,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from widgets.theme import Palette, format_tokens, palette


@dataclass(frozen=True)
class SlashCommand:
    name: str
    takes_argument: bool
    usage: str
    help: str


COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand(
        "compact", True, "/compact [instruction]", "preview a compaction (optional summary instruction)"
    ),
    SlashCommand("new", False, "/new", "start a new session"),
    SlashCommand("clear", False, "/clear", "clear this session's conversation"),
    SlashCommand("context", False, "/context", "show what fills the context window"),
)
COMMANDS_BY_NAME = {c.name: c for c in COMMANDS}


class CommandError(ValueError):
    """A slash command that cannot run; the text says why."""


def parse_command(text: str) -> tuple[str, str] | None:
    """``(name, argument)`` for a slash command, None for ordinary text; raise CommandError if invalid.

    ``//text`` escapes a message that starts with a slash: it is not a command.
    """
    stripped = text.strip()
    if not stripped.startswith("/") or stripped.startswith("//"):
        return None
    head, _, rest = stripped[1:].partition(" ")
    name = head.strip().lower()
    arg = rest.strip()
    if "\n" in head:
        name, _, more = head.partition("\n")
        arg = (more + " " + rest).strip()
    cmd = COMMANDS_BY_NAME.get(name)
    if cmd is None:
        known = ", ".join(f"/{c.name}" for c in COMMANDS)
        raise CommandError(f"Unknown command /{name or ''}: try {known} (start with // to send a slash)")
    if arg and not cmd.takes_argument:
        raise CommandError(f"/{cmd.name} takes no argument (usage: {cmd.usage})")
    return cmd.name, arg


PLACEHOLDER = "Message the agent…   Ctrl+Enter to send · Esc to stop · / for commands"


class DraftEdit(QPlainTextEdit):
    """Plain-text editor: Ctrl+Enter sends, Esc stops (or closes the completion popup)."""

    submit = Signal()
    escape = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTabChangesFocus(True)
        self.setPlaceholderText(PLACEHOLDER)
        self._completer: QCompleter | None = None

    def set_completer(self, completer: QCompleter) -> None:
        self._completer = completer
        completer.setWidget(self)
        completer.activated.connect(self._insert_completion)

    def completer(self) -> QCompleter | None:
        return self._completer

    def _insert_completion(self, completion: str) -> None:
        name = completion.split(" ", 1)[0]
        cmd = COMMANDS_BY_NAME.get(name.lstrip("/"))
        text = name + (" " if cmd is not None and cmd.takes_argument else "")
        self.setPlainText(text)
        cursor = self.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        self.setTextCursor(cursor)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        completer = self._completer
        popup = completer.popup() if completer is not None else None
        popup_open = popup is not None and popup.isVisible()
        key = event.key()
        if popup is not None and completer is not None and popup_open and key in (
            Qt.Key.Key_Enter, Qt.Key.Key_Return, Qt.Key.Key_Tab
        ):
            # let the completer pick the current row
            current = popup.currentIndex()
            if not current.isValid():
                current = completer.completionModel().index(0, 0)
            self._insert_completion(str(current.data()))
            popup.hide()
            event.accept()
            return
        if key == Qt.Key.Key_Escape:
            if popup is not None and popup_open:
                popup.hide()
            else:
                self.escape.emit()
            event.accept()
            return
        ctrl = bool(event.modifiers() & Qt.KeyboardModifier.ControlModifier)
        if key in (Qt.Key.Key_Enter, Qt.Key.Key_Return) and ctrl:
            self.submit.emit()
            event.accept()
            return
        super().keyPressEvent(event)
        self._update_completion()

    def _update_completion(self) -> None:
        if self._completer is None:
            return
        text = self.toPlainText()
        popup = self._completer.popup()
        if popup is None:
            return
        if text.startswith("/") and not text.startswith("//") and " " not in text and "\n" not in text:
            self._completer.setCompletionPrefix(text)
            if self._completer.completionCount() > 0:
                rect = self.cursorRect()
                rect.setWidth(max(320, popup.sizeHintForColumn(0) + 24))
                self._completer.complete(rect)
                popup.setCurrentIndex(self._completer.completionModel().index(0, 0))
                return
        popup.hide()


class ChatInput(QWidget):
    """Draft box with token cost, Send/Stop and slash commands (see the module docstring)."""

    send_requested = Signal(str)
    command_requested = Signal(str, str)
    stop_requested = Signal()
    draft_changed = Signal(str)

    def set_placeholder(self, text: str | None) -> None:
        """What the empty box says (None: the default — how to send); a read-only view says why it takes nothing."""
        self._edit.setPlaceholderText(PLACEHOLDER if text is None else text)

    def placeholder(self) -> str:
        return self._edit.placeholderText()

    def __init__(self, parent: QWidget | None = None, pal: Palette | None = None) -> None:
        super().__init__(parent)
        self._pal = pal or palette()
        self._busy = False
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 8)
        layout.setSpacing(4)
        self._edit = DraftEdit(self)
        self._edit.setMinimumHeight(64)
        self._edit.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        fm = self._edit.fontMetrics()
        self._edit.setMaximumHeight(fm.lineSpacing() * 10 + 16)
        self._edit.setFixedHeight(fm.lineSpacing() * 4 + 16)
        layout.addWidget(self._edit)
        model = QStringListModel([f"/{c.name}  —  {c.help}" for c in COMMANDS], self)
        completer = QCompleter(model, self)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        completer.setCompletionMode(QCompleter.CompletionMode.PopupCompletion)
        completer.setFilterMode(Qt.MatchFlag.MatchStartsWith)
        self._edit.set_completer(completer)

        row = QHBoxLayout()
        row.setSpacing(8)
        self._cost = QLabel("")
        self._cost.setToolTip("Tokens the draft will add to the next request")
        self._error = QLabel("")
        self._error.setWordWrap(True)
        self._error.setVisible(False)
        row.addWidget(self._cost)
        row.addWidget(self._error, 1)
        row.addStretch(0)
        self._stop = QPushButton("Stop")
        self._stop.setToolTip("Cancel the running turn (Esc)")
        self._stop.setEnabled(False)
        self._send = QPushButton("Send")
        self._send.setToolTip("Send the draft (Ctrl+Enter)")
        self._send.setDefault(True)
        row.addWidget(self._stop)
        row.addWidget(self._send)
        layout.addLayout(row)

        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(120)
        self._debounce.timeout.connect(lambda: self.draft_changed.emit(self._edit.toPlainText()))
        self._edit.textChanged.connect(self._on_text_changed)
        self._edit.submit.connect(self.submit)
        self._edit.escape.connect(self._on_escape)
        self._send.clicked.connect(self.submit)
        self._stop.clicked.connect(self._on_stop_clicked)
        # Ctrl+Enter also works when the focus is on the buttons
        self._shortcut = QShortcut(QKeySequence("Ctrl+Return"), self)
        self._shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self._shortcut.activated.connect(self.submit)
        self.set_palette(self._pal)
        self._update_buttons()

    # --- public API
    def editor(self) -> DraftEdit:
        return self._edit

    def text(self) -> str:
        return self._edit.toPlainText()

    def set_text(self, text: str) -> None:
        self._edit.setPlainText(text)
        cursor = self._edit.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        self._edit.setTextCursor(cursor)

    def clear(self) -> None:
        self._edit.clear()

    def set_draft_tokens(self, n: int | None) -> None:
        if n is None or not self.text().strip() or self._is_command():
            self._cost.setText("")
        else:
            self._cost.setText(f"≈ {format_tokens(n)} token{'s' if n != 1 else ''}")

    def draft_tokens_text(self) -> str:
        return self._cost.text()

    def set_busy(self, busy: bool) -> None:
        self._busy = busy
        self._update_buttons()

    def is_busy(self) -> bool:
        return self._busy

    def set_error(self, text: str) -> None:
        self._error.setText(text)
        self._error.setVisible(bool(text))

    def error_text(self) -> str:
        return self._error.text() if self._error.isVisible() else ""

    def set_palette(self, pal: Palette) -> None:
        self._pal = pal
        self._cost.setStyleSheet(f"color: {pal.muted};")
        self._error.setStyleSheet(f"color: {pal.error};")

    # --- actions
    def submit(self) -> bool:
        """Send the draft or run its command; returns True when something was emitted."""
        text = self.text()
        if not text.strip():
            return False
        try:
            cmd = parse_command(text)
        except CommandError as exc:
            self.set_error(str(exc))
            return False
        if cmd is not None:
            self.set_error("")
            self.clear()
            self.command_requested.emit(cmd[0], cmd[1])
            return True
        if self._busy:
            self.set_error("A turn is running: wait for it or press Stop (Esc)")
            return False
        body = text.strip()
        if body.startswith("//"):
            body = body[1:]
        self.set_error("")
        self.clear()
        self.send_requested.emit(body)
        return True

    def _on_escape(self) -> None:
        if self._busy:
            self.stop_requested.emit()

    def _on_stop_clicked(self) -> None:
        self.stop_requested.emit()

    def _is_command(self) -> bool:
        text = self.text().strip()
        return text.startswith("/") and not text.startswith("//")

    def _on_text_changed(self) -> None:
        if self._error.isVisible():
            self.set_error("")
        if not self.text().strip() or self._is_command():
            self._cost.setText("")
        self._update_buttons()
        self._debounce.start()

    def _update_buttons(self) -> None:
        has_text = bool(self.text().strip())
        self._send.setEnabled(has_text and (not self._busy or self._is_command()))
        self._stop.setEnabled(self._busy)
