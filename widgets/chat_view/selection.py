"""Text selection in the chat: positions inside a row's documents, the selection between two of them,
the ranges to paint per document, the selected text, and the code blocks of a markdown document.

A position is ``(row, doc, pos)``: the row in the model, the index of the document in the row's
:class:`RowLayout` ``docs`` and the character position in that document (QTextDocument positions).
A selection may span several rows: the first row from its position to the end, every row between
in full, the last row up to its position."""

from __future__ import annotations

from typing import NamedTuple

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QTextCursor, QTextDocument

from widgets.chat_view.layout import RowLayout

Highlight = tuple[int, int, str, str | None]  # start, end, background, foreground (None: unchanged)


class TextPos(NamedTuple):
    row: int
    doc: int
    pos: int


def doc_end(doc: QTextDocument) -> int:
    return max(0, doc.characterCount() - 1)


def hit_doc(lay: RowLayout, local: QPointF, clamp: bool = False) -> tuple[int, int] | None:
    """The document and character under ``local`` (row coordinates). With ``clamp``, a point between
    or beside the documents gives the nearest position (start of the next one, end of the one above)."""
    best: tuple[int, int] | None = None
    for i, (origin, doc) in enumerate(lay.docs):
        size = doc.size()
        rect = QRectF(origin, size)
        if rect.contains(local) or (clamp and rect.top() <= local.y() <= rect.bottom()):
            pos = doc.documentLayout().hitTest(local - origin, Qt.HitTestAccuracy.FuzzyHit)
            return i, max(0, min(pos, doc_end(doc)))
        if clamp:
            if local.y() < rect.top():
                return best if best is not None else (i, 0)
            best = (i, doc_end(doc))
    return best


def word_range(doc: QTextDocument, pos: int) -> tuple[int, int]:
    cur = QTextCursor(doc)
    cur.setPosition(pos)
    cur.select(QTextCursor.SelectionType.WordUnderCursor)
    return cur.selectionStart(), cur.selectionEnd()


def block_range(doc: QTextDocument, pos: int) -> tuple[int, int]:
    block = doc.findBlock(pos)
    return block.position(), block.position() + max(0, block.length() - 1)


def doc_text(doc: QTextDocument, start: int, end: int) -> str:
    cur = QTextCursor(doc)
    cur.setPosition(max(0, min(start, doc_end(doc))))
    cur.setPosition(max(0, min(end, doc_end(doc))), QTextCursor.MoveMode.KeepAnchor)
    return cur.selectedText().replace("\u2029", "\n").replace("\u2028", "\n")


class ChatSelection:
    """The anchor (where the press was) and the focus (where the mouse is) of a selection."""

    def __init__(self) -> None:
        self.anchor: TextPos | None = None
        self.focus: TextPos | None = None

    def clear(self) -> None:
        self.anchor = self.focus = None

    def set(self, anchor: TextPos, focus: TextPos) -> None:
        self.anchor, self.focus = anchor, focus

    def ordered(self) -> tuple[TextPos, TextPos] | None:
        if self.anchor is None or self.focus is None or self.anchor == self.focus:
            return None
        a, b = self.anchor, self.focus
        return (a, b) if a <= b else (b, a)

    def is_empty(self) -> bool:
        return self.ordered() is None

    def rows(self) -> tuple[int, int] | None:
        o = self.ordered()
        return (o[0].row, o[1].row) if o is not None else None

    def shift_rows(self, first: int, count: int) -> None:
        """Rows were inserted (count > 0) at ``first`` or removed (count < 0) from ``first``."""
        for name in ("anchor", "focus"):
            p: TextPos | None = getattr(self, name)
            if p is None or p.row < first:
                continue
            if count < 0 and p.row < first - count:
                self.clear()
                return
            setattr(self, name, TextPos(p.row + count, p.doc, p.pos))

    def ranges(self, row: int, lay: RowLayout) -> dict[int, tuple[int, int]]:
        """The selected range of each document of ``row`` (laid out as ``lay``)."""
        o = self.ordered()
        if o is None or not o[0].row <= row <= o[1].row:
            return {}
        a, b = o
        out: dict[int, tuple[int, int]] = {}
        for i, (_origin, doc) in enumerate(lay.docs):
            start = a.pos if (row == a.row and i == a.doc) else 0
            end = b.pos if (row == b.row and i == b.doc) else doc_end(doc)
            if (row == a.row and i < a.doc) or (row == b.row and i > b.doc):
                continue
            if end > start:
                out[i] = (start, min(end, doc_end(doc)))
        return out
