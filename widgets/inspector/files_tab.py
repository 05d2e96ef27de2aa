"""The "Tool results" tab: the offloaded ``tool_results/`` files in a sortable, filterable table
and a :class:`FileViewer` (:class:`OffloadPanel`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from engine.model.text import format_bytes
from engine.workbench.rows import FileRow
from widgets.formatting import local_time_text
from widgets.inspector.file_viewer import FileViewer

Index = QModelIndex | QPersistentModelIndex
SORT_ROLE = Qt.ItemDataRole.UserRole + 10

class _FilesModel(QAbstractTableModel):
    HEADERS = ("Tool", "Size", "Lines", "Created", "Referring message", "File")

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.files: list[FileRow] = []

    def rowCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.files)

    def columnCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.HEADERS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.HEADERS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        f = self.files[index.row()]
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 0:
                return f.tool or "?"
            if col == 1:
                return format_bytes(f.size)
            if col == 2:
                return f"{f.lines:,}"
            if col == 3:
                return local_time_text(f.created)
            if col == 4:
                mid = f.message_id
                if f.message_preview:
                    return f.message_preview
                return mid[:10] + ("…" if len(mid) > 10 else "") if mid else "— (none)"
            if col == 5:
                return Path(f.path).name
        if role == SORT_ROLE:
            if col == 1:
                return f.size
            if col == 2:
                return f.lines
            if col == 3:
                return f.created
            return str(self.data(index, Qt.ItemDataRole.DisplayRole)).lower()
        if role == Qt.ItemDataRole.ToolTipRole:
            return f.path
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (1, 2):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.UserRole:
            return f
        return None

    def set_files(self, files: Sequence[FileRow]) -> None:
        self.beginResetModel()
        self.files = list(files)
        self.endResetModel()

    def add(self, file: FileRow) -> None:
        for i, f in enumerate(self.files):
            if f.path == file.path:
                self.files[i] = file
                self.dataChanged.emit(self.index(i, 0), self.index(i, len(self.HEADERS) - 1))
                return
        n = len(self.files)
        self.beginInsertRows(QModelIndex(), n, n)
        self.files.append(file)
        self.endInsertRows()

    def row_of(self, path: str) -> int:
        for i, f in enumerate(self.files):
            if f.path == path:
                return i
        return -1


class _FilesFilter(QSortFilterProxyModel):
    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:
        text = self.filterRegularExpression().pattern().lower()
        if not text:
            return True
        f: FileRow = self.sourceModel().files[source_row]  # type: ignore[attr-defined]
        hay = " ".join((f.tool, f.path, f.message_id, f.message_preview)).lower()
        return text in hay


class OffloadPanel(QWidget):
    """Offloaded tool results: a sortable, filterable table above the file viewer."""

    file_requested = Signal(str)
    message_activated = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session_dir: Path | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter by tool, file or message")
        self.filter_edit.setClearButtonEnabled(True)
        self.summary_label = QLabel("No offloaded tool results")
        head = QHBoxLayout()
        head.addWidget(self.summary_label, 1)
        head.addWidget(self.filter_edit, 1)
        layout.addLayout(head)
        self.model = _FilesModel(self)
        self.proxy = _FilesFilter(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(SORT_ROLE)
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(3, Qt.SortOrder.DescendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 8)
        self.table.setAlternatingRowColors(True)
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(4, QHeaderView.ResizeMode.Stretch)
        self.viewer = FileViewer()
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(self.viewer)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 2)
        layout.addWidget(split, 1)
        self.filter_edit.textChanged.connect(self._on_filter)
        self.table.selectionModel().currentRowChanged.connect(self._on_current)
        self.table.doubleClicked.connect(self._on_double_click)

    def _on_filter(self, text: str) -> None:
        self.proxy.setFilterFixedString(text)

    def _file_at(self, proxy_index: QModelIndex) -> FileRow | None:
        if not proxy_index.isValid():
            return None
        src = self.proxy.mapToSource(proxy_index)
        return self.model.files[src.row()]

    def _on_current(self, current: QModelIndex, _previous: QModelIndex) -> None:
        f = self._file_at(current)
        if f is not None and f.path != self.viewer.path():
            self.file_requested.emit(f.path)

    def _on_double_click(self, index: QModelIndex) -> None:
        f = self._file_at(index)
        if f is not None and index.column() == 4 and f.message_id:
            self.message_activated.emit(f.message_id)

    def _update_summary(self) -> None:
        files = self.model.files
        if not files:
            self.summary_label.setText("No offloaded tool results")
            return
        total = sum(f.size for f in files)
        plural = "s" if len(files) != 1 else ""
        self.summary_label.setText(f"{len(files):,} file{plural} · {format_bytes(total)}")

    def set_files(self, files: Sequence[FileRow]) -> None:
        self.model.set_files(files)
        self._update_summary()
        if self.viewer.path() and self.model.row_of(self.viewer.path()) < 0:
            self.viewer.clear()

    def add_file(self, file: FileRow) -> None:
        self.model.add(file)
        self._update_summary()

    def select(self, path: str) -> bool:
        row = self.model.row_of(path)
        if row < 0:
            return False
        pidx = self.proxy.mapFromSource(self.model.index(row, 0))
        if not pidx.isValid():
            self.filter_edit.clear()
            pidx = self.proxy.mapFromSource(self.model.index(row, 0))
        sm = self.table.selectionModel()
        sm.blockSignals(True)
        self.table.setCurrentIndex(pidx)
        self.table.selectRow(pidx.row())
        sm.blockSignals(False)
        self.table.scrollTo(pidx)
        return True

    def abs_path(self, path: str) -> Path | None:
        p = Path(path)
        if p.is_absolute():
            return p
        return self.session_dir / p if self.session_dir is not None else None

    def show_file(self, path: str, text: str) -> None:
        self.select(path)
        row = self.model.row_of(path)
        detail = ""
        if row >= 0:
            f = self.model.files[row]
            detail = f"{f.tool or '?'} · {format_bytes(f.size)} · {f.lines:,} lines"
        self.viewer.show_text(path, text, self.abs_path(path), detail)
