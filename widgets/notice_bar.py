"""One dismissable line of news above the chat (errors, repairs, import reports, exports, /context)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QWidget

from widgets.theme import Palette


class NoticeBar(QFrame):
    """One dismissable line of news above the chat (errors, repairs, import reports, /context)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("NoticeBar")
        row = QHBoxLayout(self)
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
        self.close_button.clicked.connect(self.hide)
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

    def _style(self) -> None:
        pal = self._pal
        if pal is None:
            return
        color = {"error": pal.error, "warning": pal.warning}.get(self.level, pal.link)
        self.setStyleSheet(
            f"#NoticeBar {{ border: 1px solid {color}; border-left: 4px solid {color}; border-radius: 4px; "
            f"background: {pal.panel}; }} #NoticeBar QLabel {{ color: {pal.text}; }}"
        )


__all__ = ["NoticeBar"]
