"""The "Compactions" tab: the compaction event log and the summary / reason of the selected event
(:class:`CompactionLogPanel`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QPlainTextEdit,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from widgets.formatting import local_time_text
from widgets.theme import Palette, format_tokens, palette


class CompactionLogPanel(QWidget):
    COLS = ("Time", "Trigger", "Result", "Before → after", "Compacted / kept", "Duration")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        self.table = QTableWidget(0, len(self.COLS))
        self.table.setHorizontalHeaderLabels(list(self.COLS))
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 8)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setAlternatingRowColors(True)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.detail = QPlainTextEdit()
        self.detail.setReadOnly(True)
        self.detail.setPlaceholderText("Select an event to read its summary or the reason it failed")
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(self.detail)
        layout.addWidget(split, 1)
        self.events: list[dict[str, Any]] = []
        self._pal = palette()
        self.table.currentCellChanged.connect(self._on_current)

    def set_palette(self, pal: Palette) -> None:
        self._pal = pal
        self.set_events(list(self.events))

    def set_events(self, events: Sequence[dict[str, Any]]) -> None:
        self.events = []
        self.table.setRowCount(0)
        for ev in events:
            self.add_event(ev)

    def add_event(self, ev: dict[str, Any]) -> None:
        self.events.append(dict(ev))
        row = self.table.rowCount()
        self.table.insertRow(row)
        before = int(ev.get("tokens_before") or 0)
        after = int(ev.get("tokens_after") or 0)
        cells = [
            local_time_text(ev.get("ts"), "%Y-%m-%d %H:%M:%S"),
            str(ev.get("trigger") or "?"),
            str(ev.get("result") or "?"),
            f"{format_tokens(before)} → {format_tokens(after)}",
            f"{int(ev.get('messages_compacted') or 0):,} / {int(ev.get('messages_kept') or 0):,}",
            f"{float(ev.get('duration_ms') or 0) / 1000:.1f} s",
        ]
        for col, text in enumerate(cells):
            item = QTableWidgetItem(text)
            if col == 2 and ev.get("result") == "failed":
                item.setForeground(QColor(self._pal.error))
            if ev.get("reason"):
                item.setToolTip(str(ev["reason"]))
            self.table.setItem(row, col, item)

    def _on_current(self, row: int, _c: int, _pr: int, _pc: int) -> None:
        if not 0 <= row < len(self.events):
            return
        ev = self.events[row]
        parts = []
        if ev.get("reason"):
            parts.append(f"Reason: {ev['reason']}")
        if ev.get("archive_day"):
            parts.append(f"Archived to dialog/{ev['archive_day']}.jsonl")
        parts.append(str(ev.get("summary") or "(no summary)"))
        self.detail.setPlainText("\n\n".join(parts))
