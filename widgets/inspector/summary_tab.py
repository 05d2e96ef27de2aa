"""The "Summary" tab: the current summary as markdown that loads nothing (:class:`SummaryPanel`)."""

from __future__ import annotations

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QTextEdit, QVBoxLayout, QWidget

from widgets.chat_view import SafeTextDocument
from widgets.theme import format_tokens


class SummaryPanel(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        head = QHBoxLayout()
        self.label = QLabel("No summary yet: nothing has been compacted in this session")
        self.copy_button = QPushButton("Copy")
        head.addWidget(self.label, 1)
        head.addWidget(self.copy_button)
        layout.addLayout(head)
        self.view = QTextEdit()
        self.view.setReadOnly(True)
        self._doc = SafeTextDocument(self.view)
        self.view.setDocument(self._doc)
        layout.addWidget(self.view, 1)
        self._text = ""
        self._tokens: int | None = None
        self._shown = False  # set_summary called once (the label and the document made)
        self.copy_button.clicked.connect(lambda: QGuiApplication.clipboard().setText(self._text))
        self.copy_button.setEnabled(False)

    def set_summary(self, text: str, tokens: int | None = None) -> None:
        same = (text or "") == self._text and self._shown  # every context update says it again: not rendered again
        self._shown = True
        self._tokens = tokens
        self._text = text or ""
        if self._text.strip():
            if not same:
                self._doc.set_markdown(self._text)
            suffix = f" · {format_tokens(tokens)} tokens" if tokens is not None else ""
            self.label.setText("Current summary" + suffix)
        else:
            self._doc.setPlainText("")
            self.label.setText("No summary yet: nothing has been compacted in this session")
        self.copy_button.setEnabled(bool(self._text.strip()))

    def text(self) -> str:
        return self._text

    def document(self) -> SafeTextDocument:
        return self._doc
