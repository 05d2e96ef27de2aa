"""One dismissable line of news above the chat (errors, repairs, import reports, exports, /context); the
first-run pointer to Sources (:mod:`widgets.sources_hint`) is one with an action button."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QWidget

from widgets.theme import Palette


class NoticeBar(QFrame):
    """One dismissable line of news above the chat (errors, repairs, import reports, /context)."""

    def __init__(self, parent: QWidget | None = None, *, name: str = "NoticeBar") -> None:
        super().__init__(parent)
        self.setObjectName(name)
        self._row = row = QHBoxLayout(self)
        row.setContentsMargins(10, 6, 6, 6)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row.addWidget(self.label, 1)
        self.close_button = QToolButton()
        self.close_button.setText("✕")
        self.close_button.setToolTip("Dismiss")
        self.close_button.setAutoRaise(True)
        self.close_button.clicked.connect(self._on_close)
        row.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        self.level = "info"
        self._pal: Palette | None = None
        self.hide()

    def show_notice(self, level: str, text: str, pal: Palette) -> None:
        self.level = level
        self._pal = pal
        self.label.setText(text)
        self._style()
        self.show()

    def set_palette(self, pal: Palette) -> None:
        self._pal = pal
        self._style()

    def add_action(self, button: QWidget) -> None:
        """A button between the text and the ✕."""
        self._row.insertWidget(self._row.indexOf(self.close_button), button, 0, Qt.AlignmentFlag.AlignVCenter)

    def text(self) -> str:
        return self.label.text()

    def _on_close(self) -> None:
        self.hide()

    def _style(self) -> None:
        pal = self._pal
        if pal is None:
            return
        color = {"error": pal.error, "warning": pal.warning}.get(self.level, pal.link)
        name = self.objectName()
        self.setStyleSheet(
            f"#{name} {{ border: 1px solid {color}; border-left: 4px solid {color}; border-radius: 4px; "
            f"background: {pal.panel}; }} #{name} QLabel {{ color: {pal.text}; }}"
        )


__all__ = ["NoticeBar"]
