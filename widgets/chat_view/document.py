"""Markdown that loads nothing: :class:`SafeTextDocument`."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QRectF, QUrl
from PySide6.QtGui import QTextDocument, QTextFormat


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


def code_blocks(doc: QTextDocument) -> list[tuple[int, int, str]]:
    """The code blocks of a markdown document: ``(first block position, end position, code)``.
    Consecutive code lines of the same language are one block; the code has no fences."""
    out: list[tuple[int, int, str]] = []
    lang_prop = QTextFormat.Property.BlockCodeLanguage
    fence_prop = QTextFormat.Property.BlockCodeFence
    block = doc.begin()
    current: list[str] = []
    start = end = 0
    lang: object = None
    while block.isValid():
        fmt = block.blockFormat()
        is_code = fmt.hasProperty(fence_prop) or fmt.hasProperty(lang_prop)
        this_lang = fmt.property(lang_prop) if is_code else None
        if current and (not is_code or this_lang != lang):
            out.append((start, end, "\n".join(current)))
            current = []
        if is_code:
            if not current:
                start, lang = block.position(), this_lang
            current.append(block.text().replace("\u2028", "\n"))
            end = block.position() + block.length() - 1
        block = block.next()
    if current:
        out.append((start, end, "\n".join(current)))
    return out


def block_rect(doc: QTextDocument, start: int, end: int) -> QRectF:
    """The bounding rectangle (document coordinates) of the blocks from ``start`` to ``end``."""
    lay = doc.documentLayout()
    first = lay.blockBoundingRect(doc.findBlock(start))
    last = lay.blockBoundingRect(doc.findBlock(end))
    return first.united(last)
