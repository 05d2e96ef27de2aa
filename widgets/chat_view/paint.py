"""Painting a laid-out row: replays the operations of a :class:`RowLayout` with a QPainter."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QColor,
    QPainter,
    QPalette,
    QPen,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
)

from widgets.chat_view.layout import ACCENT, MARKER_INSET, RADIUS, Op, RowLayout
from widgets.chat_view.selection import Highlight
from widgets.theme import Palette

DIMMED_OPACITY = 0.55  # a message no longer in the context


def paint_row(painter: QPainter, top_left: QPointF, lay: RowLayout, pal: Palette, *, selected: bool,
              dimmed: bool, highlights: dict[int, list[Highlight]] | None = None) -> None:
    """Paint one laid-out row with its top-left corner at ``top_left``; ``highlights`` are ranges of
    its documents (by index in ``lay.docs``) painted with their own colours (selection, find hits)."""
    doc_index = {id(doc): i for i, (_o, doc) in enumerate(lay.docs)} if highlights else {}
    painter.save()
    painter.translate(top_left)
    if dimmed:
        painter.setOpacity(DIMMED_OPACITY)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
    painter.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
    for op in lay.ops:
        if op.kind == "bubble":
            _bubble(painter, op, pal, selected)
        elif op.kind == "marker":
            _marker(painter, op)
        elif op.kind == "codebg":
            painter.setPen(QPen(QColor(op.c), 1.0))
            painter.setBrush(QColor(op.b))
            painter.drawRoundedRect(op.a.adjusted(0.5, 0.5, -0.5, -0.5), 4, 4)
        elif op.kind == "text":
            color, align = op.d
            painter.setFont(op.c)
            painter.setPen(QColor(color))
            flags = int(align | Qt.AlignmentFlag.AlignVCenter) | int(Qt.TextFlag.TextSingleLine)
            painter.drawText(op.a, flags, op.b)
        elif op.kind == "doc":
            marks = (highlights or {}).get(doc_index.get(id(op.b), -1), ())
            _document(painter, op.a, op.b, op.c, pal.link, marks)
    painter.restore()


def _bubble(p: QPainter, op: Op, pal: Palette, selected: bool) -> None:
    rect: QRectF = op.a
    p.setPen(QPen(QColor(pal.link if selected else op.d), 1.5 if selected else 1.0))
    p.setBrush(QColor(op.b))
    p.drawRoundedRect(rect.adjusted(0.5, 0.5, -0.5, -0.5), RADIUS, RADIUS)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(QColor(op.c))
    accent = QRectF(rect.left() + 1, rect.top() + 1, ACCENT + 2, rect.height() - 2)
    p.drawRoundedRect(accent, 2, 2)


def _marker(p: QPainter, op: Op) -> None:
    rect: QRectF = op.a
    color = QColor(op.b)
    line = QColor(color)
    line.setAlpha(140)
    p.setPen(QPen(line, 1.0, Qt.PenStyle.DashLine))
    mid = rect.top() + rect.height() / 2
    p.drawLine(QPointF(rect.left(), mid), QPointF(rect.right(), mid))
    fill = QColor(color)
    fill.setAlpha(28)
    inner = rect.adjusted(rect.width() * MARKER_INSET, 0, -rect.width() * MARKER_INSET, 0)
    p.setPen(QPen(line, 1.0))
    p.setBrush(QColor(op.c))
    p.drawRoundedRect(inner, RADIUS, RADIUS)
    p.setBrush(fill)
    p.drawRoundedRect(inner, RADIUS, RADIUS)


def _document(p: QPainter, origin: QPointF, doc: QTextDocument, color: str, link: str,
              marks: Sequence[Highlight] = ()) -> None:
    p.save()
    p.translate(origin)
    ctx = QAbstractTextDocumentLayout.PaintContext()
    qp = QPalette(ctx.palette)
    qp.setColor(QPalette.ColorRole.Text, QColor(color))
    qp.setColor(QPalette.ColorRole.Link, QColor(link))
    ctx.palette = qp
    if marks:
        sels = []
        for start, end, bg, fg in marks:
            sel = QAbstractTextDocumentLayout.Selection()
            cur = QTextCursor(doc)
            cur.setPosition(start)
            cur.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
            fmt = QTextCharFormat()
            fmt.setBackground(QColor(bg))
            if fg is not None:
                fmt.setForeground(QColor(fg))
            sel.cursor = cur
            sel.format = fmt
            sels.append(sel)
        ctx.selections = sels
    doc.documentLayout().draw(p, ctx)
    p.restore()
