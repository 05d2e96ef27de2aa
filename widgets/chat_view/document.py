"""Markdown that loads nothing: :class:`SafeTextDocument`."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QUrl
from PySide6.QtGui import QTextDocument


class SafeTextDocument(QTextDocument):
    """A QTextDocument that loads nothing: every resource request (images, style sheets, any scheme)
    is refused and recorded in ``refused``. Markdown is parsed without raw HTML."""

    MARKDOWN_FEATURES = (
        QTextDocument.MarkdownFeature.MarkdownDialectGitHub | QTextDocument.MarkdownFeature.MarkdownNoHTML
    )

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.refused: list[str] = []

    def loadResource(self, type: int, name: QUrl | str) -> Any:
        self.refused.append(name.toString() if isinstance(name, QUrl) else name)
        return None

    def set_markdown(self, text: str) -> None:
        self.setMarkdown(text, self.MARKDOWN_FEATURES)
