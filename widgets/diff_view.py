"""The context diff between two provider calls (:class:`DiffView`, shown in :class:`DiffDialog`).

It draws an :class:`engine.context.diff.ContextDiff` that the service computed (``diff_calls(a, b)``
→ ``diff_ready``): both calls' provider prompt figures and their difference, the messages in each
context, the estimated tokens that entered and left, then each item that entered and each that left
(the compaction summary, messages, tool results) with its tokens, role / tool, position and first line.
A message row is a link: double-click or Enter emits ``message_activated(str)`` (the window scrolls
the chat there); a summary row emits ``summary_activated(int)`` (the compaction's number).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QDialog, QLabel, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from widgets.theme import format_tokens

if TYPE_CHECKING:
    from engine.context.diff import ContextDiff, DiffItem

RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
ROLE = Qt.ItemDataRole.UserRole


def items_text(n: int) -> str:
    return f"{n:,} item{'s' if n != 1 else ''}"


def signed(n: int) -> str:
    return f"{n:+,}".replace("-", "−")


def item_kind(item: DiffItem) -> str:
    if item.kind == "summary":
        return "compaction summary"
    if item.kind == "tool_result":
        return f"tool result · {item.tool}" if item.tool else "tool result"
    return f"{item.role} → {item.tool}" if item.tool else item.role


def headline(diff: ContextDiff) -> str:
    comps = len(diff.compactions)
    between = f" · {comps} compaction{'s' if comps != 1 else ''} between them" if comps else ""
    return f"Call {diff.a} → call {diff.b}{between}"


def figures(diff: ContextDiff) -> list[str]:
    """The figures above the lists: the provider's prompt, messages, estimated tokens in and out."""
    lines = []
    if diff.prompt_delta is not None:
        lines.append(f"Provider prompt: {format_tokens(diff.prompt_a)} → {format_tokens(diff.prompt_b)} tokens "
                     f"({signed(diff.prompt_delta)})")
    else:
        lines.append(f"Provider prompt: call {diff.a} {format_tokens(diff.prompt_a)}, "
                     f"call {diff.b} {format_tokens(diff.prompt_b)} (not known for both)")
    lines.append(f"Messages in the context: {diff.messages_a:,} → {diff.messages_b:,}")
    lines.append(f"Entered {format_tokens(diff.entered_tokens)} tokens ({items_text(len(diff.entered))}), left "
                 f"{format_tokens(diff.left_tokens)} ({items_text(len(diff.left))}), net {signed(diff.net_tokens)} "
                 "(estimated)")
    return lines


class DiffView(QWidget):
    """What entered and what left the context between two calls (see the module docstring)."""

    message_activated = Signal(str)
    summary_activated = Signal(int)

    COLS = ("Tokens", "What", "#", "First line")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        self.title = QLabel("Pick two calls on the timeline")
        font = self.title.font()
        font.setBold(True)
        self.title.setFont(font)
        self.figures = QLabel("")
        self.figures.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.tree = QTreeWidget()
        self.tree.setColumnCount(len(self.COLS))
        self.tree.setHeaderLabels(list(self.COLS))
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        header = self.tree.header()
        fm = self.tree.fontMetrics()
        header.resizeSection(0, fm.horizontalAdvance("Entered (000 items)") + 40)
        header.resizeSection(1, fm.horizontalAdvance("assistant → Bash, Read") + 20)
        header.resizeSection(2, fm.horizontalAdvance("#0000") + 16)
        header.setStretchLastSection(True)
        layout.addWidget(self.title)
        layout.addWidget(self.figures)
        layout.addWidget(self.tree, 1)
        self.diff: ContextDiff | None = None
        self.tree.itemDoubleClicked.connect(lambda item, _col: self.activate(item))
        self.tree.itemActivated.connect(lambda item, _col: self.activate(item))

    def set_diff(self, diff: ContextDiff) -> None:
        self.diff = diff
        self.title.setText(headline(diff))
        self.figures.setText("\n".join(figures(diff)))
        self.tree.clear()
        for title, items, sign in (("Entered", diff.entered, "+"), ("Left", diff.left, "−")):
            total = sum(i.tokens for i in items)
            count = f"{title} ({items_text(len(items))})"
            top = QTreeWidgetItem([f"{sign if total else ''}{format_tokens(total)}", count, "",
                                   "" if items else "nothing"])
            font = top.font(1)
            font.setBold(True)
            for col in (0, 1):
                top.setFont(col, font)
            top.setTextAlignment(0, RIGHT)
            top.addChildren([self._row(item, sign) for item in items])
            self.tree.addTopLevelItem(top)
            top.setExpanded(True)

    def _row(self, item: DiffItem, sign: str) -> QTreeWidgetItem:
        where = "" if item.kind == "summary" else f"#{item.index + 1}"
        row = QTreeWidgetItem([f"{sign}{format_tokens(item.tokens)}", item_kind(item), where, item.first_line])
        row.setTextAlignment(0, RIGHT)
        row.setTextAlignment(2, RIGHT)
        row.setData(0, ROLE, item)
        row.setToolTip(3, item.first_line + (f"\n{item.message_id} — double-click to show it in the chat"
                                             if item.message_id else ""))
        return row

    def section(self, title: str) -> QTreeWidgetItem:
        """The "Entered" or "Left" top-level row."""
        for i in range(self.tree.topLevelItemCount()):
            top = self.tree.topLevelItem(i)
            if top is not None and top.text(1).startswith(title):
                return top
        raise KeyError(title)

    def activate(self, row: QTreeWidgetItem) -> None:
        """Follow a row's link (what a double-click does)."""
        item = row.data(0, ROLE)
        if item is None:
            return
        if item.kind == "summary":
            self.summary_activated.emit(item.index)
        elif item.message_id:
            self.message_activated.emit(item.message_id)


class DiffDialog(QDialog):
    """A non-modal window around a :class:`DiffView` (one per main window, reused)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Context diff")
        self.setModal(False)
        self.resize(760, 560)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.view = DiffView(self)
        layout.addWidget(self.view)

    def set_diff(self, diff: ContextDiff) -> None:
        self.view.set_diff(diff)
        self.setWindowTitle(f"Context diff — {headline(diff)}")


__all__ = ["DiffDialog", "DiffView", "figures", "headline"]
