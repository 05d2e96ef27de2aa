"""The "Compactions" tab: the compaction event log and the details of the selected event — trigger,
before → after (and the agent's own count right after compacting), what compacting cost (another
agent's compaction call: tokens, and USD from its cost records), the reason, the whole summary
(:class:`CompactionLogPanel`); *Show archived messages* asks for the archive day that holds the
messages it compacted (``archive_day_requested(str)``)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.model.events import Outcome
from engine.model.records import CompactionRecord
from engine.usage.costs import compaction_call_cost
from widgets.compaction_text import compaction_details, cost_line, dropped_line, placed_line, post_line, usd_line
from widgets.formatting import format_usd, local_time_text
from widgets.theme import Palette, format_tokens, palette


def _cost_cell(ev: CompactionRecord) -> str:
    """The agent's own figure of what compacting cost, else the compaction call at litellm's prices (with "+" when
    the file holds no output figure for it: a lower bound), else ""."""
    if ev.cost_usd is not None:
        return format_usd(ev.cost_usd)
    priced = compaction_call_cost(ev)
    if priced is None or priced.usd is None:
        return ""
    return format_usd(priced.usd) + ("+" if priced.problem else "")


class CompactionLogPanel(QWidget):
    COLS = ("Time", "Trigger", "Result", "Before → after", "Compacted / kept", "Duration", "Cost")

    archive_day_requested = Signal(str)

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
        self.archive_button = QPushButton("Show archived messages")
        self.archive_button.setToolTip("The messages this compaction took out of the context, in the Archive tab")
        self.archive_button.setEnabled(False)
        self.archive_button.clicked.connect(self._on_archive_button)
        lower = QWidget()
        lower_layout = QVBoxLayout(lower)
        lower_layout.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.archive_button)
        lower_layout.addLayout(row)
        lower_layout.addWidget(self.detail, 1)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(lower)
        layout.addWidget(split, 1)
        self.events: list[CompactionRecord] = []
        self._pal = palette()
        self.table.currentCellChanged.connect(self._on_current)

    def set_palette(self, pal: Palette) -> None:
        self._pal = pal
        self.set_events(list(self.events))

    def set_events(self, events: Sequence[CompactionRecord]) -> None:
        self.events = []
        self.table.setRowCount(0)
        for ev in events:
            self.add_event(ev)

    def add_event(self, ev: CompactionRecord) -> None:
        self.events.append(ev)
        row = self.table.rowCount()
        self.table.insertRow(row)
        change = ev.change()  # one basis in every view (engine.model.compaction_change)
        cells = [
            local_time_text(ev.ts, "%Y-%m-%d %H:%M:%S"),
            ev.trigger or "?",
            str(ev.result),
            change.text(format_tokens, short=True) + (" ⚠" if change.grows else ""),
            f"{ev.messages_compacted:,} / {ev.messages_kept or 0:,}",
            "—" if ev.source_format else f"{ev.duration_ms / 1000:.1f} s",
            _cost_cell(ev),
        ]
        for col, text in enumerate(cells):
            item = QTableWidgetItem(text)
            if (col == 2 and ev.result is Outcome.FAILED) or (col == 3 and change.grows):
                item.setForeground(QColor(self._pal.error if col == 2 else self._pal.warning))
            basis = f"Before → after: {change.text(format_tokens)}" if col == 3 else ""
            tip = "\n".join(t for t in (ev.reason, basis, change.warning() if col == 3 else "",
                                         post_line(ev), dropped_line(ev), usd_line(ev), cost_line(ev),
                                         placed_line(ev)) if t)
            if tip:
                item.setToolTip(tip)
            self.table.setItem(row, col, item)

    def select_event(self, event_id: str) -> bool:
        """Select the event with that id (its details show); False when it is not in the log."""
        for row, ev in enumerate(self.events):
            if event_id and ev.id == event_id:
                self.table.selectRow(row)
                self._on_current(row, 0, -1, -1)
                return True
        return False

    def current_event(self) -> CompactionRecord | None:
        row = self.table.currentRow()
        return self.events[row] if 0 <= row < len(self.events) else None

    def _on_archive_button(self) -> None:
        ev = self.current_event()
        if ev is not None and ev.archive_day:
            self.archive_day_requested.emit(ev.archive_day)

    def _on_current(self, row: int, _c: int, _pr: int, _pc: int) -> None:
        if not 0 <= row < len(self.events):
            self.archive_button.setEnabled(False)
            return
        ev = self.events[row]
        self.archive_button.setEnabled(bool(ev.archive_day))
        self.detail.setPlainText(compaction_details(ev))
