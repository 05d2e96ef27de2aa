"""The inspector itself: a tab widget holding one panel per tab (:class:`Inspector`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QPlainTextEdit,
    QTableView,
    QTableWidget,
    QTabWidget,
    QTextEdit,
    QTreeWidget,
    QWidget,
)

from engine.model.records import CompactionRecord
from engine.store.archive import ArchiveHit
from engine.workbench.rows import FileRow
from widgets.inspector.archive_tab import ArchivePanel
from widgets.inspector.compactions_tab import CompactionLogPanel
from widgets.inspector.file_viewer import FileViewer
from widgets.inspector.files_tab import OffloadPanel
from widgets.inspector.summary_tab import SummaryPanel
from widgets.inspector.tools_tab import ToolsPanel
from widgets.theme import Palette, palette


class Inspector(QTabWidget):
    """Tabs: Tool results, Archive, Summary, Compactions, Tools (see the module docstring)."""

    file_requested = Signal(str)
    message_activated = Signal(str)
    archive_day_requested = Signal(str)
    archive_search_requested = Signal(str)
    restore_requested = Signal(list)

    TABS = ("files", "archive", "summary", "compactions", "tools")

    def __init__(self, parent: QWidget | None = None, pal: Palette | None = None) -> None:
        super().__init__(parent)
        self.files = OffloadPanel()
        self.archive = ArchivePanel()
        self.summary = SummaryPanel()
        self.log = CompactionLogPanel()
        self.addTab(self.files, "Tool results")
        self.addTab(self.archive, "Archive")
        self.addTab(self.summary, "Summary")
        self.addTab(self.log, "Compactions")
        self.tools = ToolsPanel()
        self.addTab(self.tools, "Tools")
        self.tools.message_activated.connect(self.message_activated)
        self.tools.archived_message_requested.connect(self.show_archived)
        self.log.archive_day_requested.connect(self.show_archived)
        self.files.file_requested.connect(self.file_requested)
        self.files.message_activated.connect(self.message_activated)
        self.archive.day_requested.connect(self.archive_day_requested)
        self.archive.search_requested.connect(self.archive_search_requested)
        self.archive.restore_requested.connect(self.restore_requested)
        self.archive.message_activated.connect(self.message_activated)
        self.set_palette(pal or palette())

    # sub-widgets for tests and wiring
    @property
    def files_view(self) -> QTableView:
        return self.files.table

    @property
    def viewer(self) -> FileViewer:
        return self.files.viewer

    @property
    def archive_tree(self) -> QTreeWidget:
        return self.archive.tree

    @property
    def archive_view(self) -> QPlainTextEdit:
        return self.archive.view

    @property
    def summary_view(self) -> QTextEdit:
        return self.summary.view

    @property
    def log_table(self) -> QTableWidget:
        return self.log.table

    def set_palette(self, pal: Palette) -> None:
        self.files.viewer.set_palette(pal)
        self.log.set_palette(pal)

    def show_tab(self, name: str) -> None:
        self.setCurrentIndex(self.TABS.index(name))

    def set_session_dir(self, path: str | Path | None) -> None:
        self.files.session_dir = Path(path) if path is not None else None

    def set_offloaded_files(self, files: Sequence[FileRow]) -> None:
        self.files.set_files(files)

    def add_offloaded_file(self, file: FileRow) -> None:
        self.files.add_file(file)

    def open_file(self, path: str) -> None:
        self.show_tab("files")
        self.files.select(path)
        self.file_requested.emit(path)

    def show_file(self, path: str, text: str) -> None:
        self.show_tab("files")
        self.files.show_file(path, text)

    def set_archive_days(self, days: Iterable[str]) -> None:
        self.archive.set_days(days)

    def set_archive_messages(self, day: str, messages: Sequence[dict[str, Any]],
                             tokens_by_id: dict[str, int] | None = None) -> None:
        self.archive.set_messages(day, messages, tokens_by_id)

    def set_archive_hits(self, query: str, hits: Sequence[ArchiveHit]) -> None:
        self.archive.set_hits(query, hits)

    def checked_archive_ids(self) -> list[str]:
        return self.archive.checked_ids()

    def set_summary(self, text: str, tokens: int | None = None) -> None:
        self.summary.set_summary(text, tokens)

    def set_compaction_events(self, events: Sequence[CompactionRecord]) -> None:
        self.log.set_events(events)

    def add_compaction_event(self, event: CompactionRecord) -> None:
        self.log.add_event(event)

    def clear_details(self) -> None:
        """Another session is shown: every pane that showed something of the previous one is emptied
        (the file viewer, the archived message and the checks and search over the archive, the
        compaction's details, the Tools tab); the lists are then filled with the new session's."""
        self.files.viewer.clear()
        self.files.table.clearSelection()
        self.archive.view.clear()
        self.archive.clear_checked()
        self.archive.search_edit.clear()
        self.log.table.clearSelection()
        self.log.table.setCurrentCell(-1, -1)
        self.log.detail.clear()
        self.log.archive_button.setEnabled(False)
        self.tools.clear()

    def show_archived(self, day: str, message_id: str = "") -> None:
        """The Archive tab at ``day`` (its messages asked for when not loaded), ``message_id`` selected."""
        self.show_tab("archive")
        self.archive.reveal(day, message_id)

    def show_compaction(self, event: CompactionRecord) -> None:
        """The Compactions tab with ``event`` selected (its details: cost, summary, archive day)."""
        self.show_tab("compactions")
        self.log.select_event(event.id)

