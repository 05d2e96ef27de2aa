"""The "Tools" tab: the tokens each tool put into the session (:class:`ToolsPanel`).

A table of the tools — calls, argument tokens, result tokens, share of the session's history — and
the largest tool results, each a link to its message: double-click (or Enter) emits
``message_activated(str)`` (the window scrolls the chat there); a result that a compaction archived
also emits ``archived_message_requested(day, id)`` (the inspector shows it in the Archive tab).
The figures are :class:`engine.context.attribution.Attribution`'s (what ``ctxbench tools`` prints),
computed by the service off the loop thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from widgets.theme import format_tokens

if TYPE_CHECKING:
    from engine.context.attribution import Attribution

EMPTY_TEXT = "No tool calls in this session"
RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter


def _table(cols: tuple[str, ...]) -> QTableWidget:
    table = QTableWidget(0, len(cols))
    table.setHorizontalHeaderLabels(list(cols))
    table.verticalHeader().setVisible(False)
    table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 8)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setAlternatingRowColors(True)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    table.horizontalHeader().setStretchLastSection(True)
    return table


def _cell(text: str, right: bool = False, tip: str = "") -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    if right:
        item.setTextAlignment(RIGHT)
    if tip:
        item.setToolTip(tip)
    return item


class ToolsPanel(QWidget):
    """Tokens by tool and the largest tool results (see the module docstring)."""

    message_activated = Signal(str)
    archived_message_requested = Signal(str, str)  # day, message id

    TOOL_COLS = ("Tool", "Calls", "Argument tokens", "Result tokens", "Share")
    RESULT_COLS = ("Tokens", "Tool", "Where", "First line")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        self.label = QLabel("Open a session to see the tokens by tool")
        self.label.setWordWrap(True)
        layout.addWidget(self.label)
        self.table = _table(self.TOOL_COLS)
        self.results_label = QLabel("Largest tool results (double-click: show the message)")
        self.results = _table(self.RESULT_COLS)
        lower = QWidget()
        lower_layout = QVBoxLayout(lower)
        lower_layout.setContentsMargins(0, 0, 0, 0)
        lower_layout.addWidget(self.results_label)
        lower_layout.addWidget(self.results, 1)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(lower)
        layout.addWidget(split, 1)
        self.attribution: Attribution | None = None
        self._links: list[tuple[str, str]] = []  # per result row: (message id, "live" | archive day)
        self.results.cellDoubleClicked.connect(lambda row, _col: self.activate_result(row))
        self.results.cellActivated.connect(lambda row, _col: self.activate_result(row))

    def clear(self) -> None:
        self.attribution = None
        self._links = []
        self.table.setRowCount(0)
        self.results.setRowCount(0)
        self.label.setText("Open a session to see the tokens by tool")

    def set_attribution(self, attribution: Attribution, locations: Mapping[str, str] | None = None) -> None:
        """Show ``attribution``; ``locations``: message id → "live" or the archive day that holds it."""
        self.attribution = attribution
        where = dict(locations or {})
        calls = sum(t.calls for t in attribution.tools)
        if attribution.tools:
            self.label.setText(
                f"{calls:,} tool call{'s' if calls != 1 else ''} · {format_tokens(attribution.tool_tokens)} tokens "
                f"from tools = {attribution.tool_share * 100:.1f}% of the session's "
                f"{format_tokens(attribution.history_tokens)} ({attribution.messages:,} messages, "
                "those compacted away included; estimated)")
        else:
            self.label.setText(EMPTY_TEXT)
        self.table.setRowCount(len(attribution.tools))
        for row, t in enumerate(attribution.tools):
            cells = [_cell(t.tool), _cell(f"{t.calls:,}", True, f"{t.results:,} results"),
                     _cell(format_tokens(t.argument_tokens), True), _cell(format_tokens(t.result_tokens), True),
                     _cell(f"{t.share * 100:.1f}%", True)]
            for col, item in enumerate(cells):
                self.table.setItem(row, col, item)
        self.results.setRowCount(len(attribution.largest))
        self._links = []
        for row, r in enumerate(attribution.largest):
            place = where.get(r.message_id, "live")
            self._links.append((r.message_id, place))
            label = "in the context" if place == "live" else f"archived {place}"
            cells = [_cell(format_tokens(r.tokens), True), _cell(r.tool), _cell(label),
                     _cell(r.first_line, tip=f"message #{r.index + 1} · {r.message_id}")]
            for col, item in enumerate(cells):
                self.results.setItem(row, col, item)

    def tool_row(self, row: int) -> list[str]:
        """The texts of one tool row (tests, accessibility)."""
        return [(self.table.item(row, c) or QTableWidgetItem()).text() for c in range(self.table.columnCount())]

    def result_link(self, row: int) -> tuple[str, str]:
        """(message id, "live" | archive day) of a largest-result row."""
        return self._links[row]

    def activate_result(self, row: int) -> None:
        """Follow the link of a largest-result row (what a double-click does)."""
        if not 0 <= row < len(self._links):
            return
        message_id, place = self._links[row]
        if not message_id:
            return
        if place != "live":
            self.archived_message_requested.emit(place, message_id)
        self.message_activated.emit(message_id)


__all__ = ["ToolsPanel"]
