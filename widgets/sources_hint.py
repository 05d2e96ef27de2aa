"""The first-run pointer to the Sources tab: one line above an empty chat naming the other agents'
sessions found on this machine (the text comes from the engine), with a button that shows them.

Public API of :class:`SourcesHint` (a :class:`widgets.notice_bar.NoticeBar`)
---------------------------------------------------------------------------
Signals:
    show_requested()       the user wants the Sources tab
    dismissed()            the user closed the line (✕): the app remembers it
Methods:
    set_text(text)         the line to show
    text() -> str          the line shown (tests)
    set_palette(palette)
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QPushButton, QWidget

from widgets.notice_bar import NoticeBar


class SourcesHint(NoticeBar):
    """See the module docstring."""

    show_requested = Signal()
    dismissed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, name="SourcesHint")
        self.button = QPushButton("Show them in Sources")
        self.button.setToolTip("The Sources tab of the panel on the left: open any of them read-only")
        self.button.clicked.connect(self.show_requested)
        self.add_action(self.button)
        self.close_button.setToolTip("Dismiss (the Sources tab stays on the left)")

    def set_text(self, text: str) -> None:
        self.label.setText(text)

    def _on_close(self) -> None:
        super()._on_close()
        self.dismissed.emit()


__all__ = ["SourcesHint"]
