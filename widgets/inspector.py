"""The inspector: everything that left the context, and how it left.

Four tabs, all fed with plain data by the app (the inspector never reads files itself):

- **Tool results** — the session's offloaded ``tool_results/`` files (tool, size, lines, created,
  the message that refers to it) and a viewer with line numbers, search, copy and "open with the
  system app" (``QDesktopServices``).
- **Archive** — the dialog archive: days → messages (time, role, tokens, preview), the full message,
  search across days (the app answers ``archive_search_requested`` with hits) and restore of the
  checked messages into the context (``restore_requested`` with their ids).
- **Summary** — the current summary (markdown, rendered without loading any resource).
- **Compactions** — the compaction event log, with the summary / reason of the selected event.

Public API of :class:`Inspector`
--------------------------------
Signals:
    file_requested(str)             a tool-result file was chosen: answer with show_file(path, text)
    message_activated(str)          show this message in the chat (referring message, archive row)
    archive_day_requested(str)      a day was expanded: answer with set_archive_messages(day, msgs)
    archive_search_requested(str)   answer with set_archive_hits(query, hits)
    restore_requested(list)         ids of archived messages to put back into the context
Methods:
    set_session_dir(path | None)    base folder for the files' relative paths ("open with system app")
    set_offloaded_files(files)      dicts {"path", "size", "lines", "created", "tool", "message_id"}
                                    (optional "message_preview")
    add_offloaded_file(file)
    open_file(path)                 select the file (Tool results tab) and emit file_requested
    show_file(path, text)           show a file's text in the viewer
    set_archive_days(days)          "YYYY-MM-DD" strings
    set_archive_messages(day, messages, tokens_by_id=None)
    set_archive_hits(query, hits)   dicts {"day", "message", "snippet"}
    checked_archive_ids() -> list[str]
    set_summary(text, tokens=None)
    set_compaction_events(events) / add_compaction_event(event)   CompactionEvent dicts
    show_tab(name)                  "files" | "archive" | "summary" | "compactions"
    set_palette(palette)
Sub-widgets (tests): files_view, viewer, archive_tree, archive_view, summary_view, log_table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QRect,
    QSize,
    QSortFilterProxyModel,
    Qt,
    QUrl,
    Signal,
)
from PySide6.QtGui import (
    QColor,
    QDesktopServices,
    QFontDatabase,
    QGuiApplication,
    QKeySequence,
    QPainter,
    QPaintEvent,
    QResizeEvent,
    QShortcut,
    QTextCharFormat,
    QTextCursor,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTableView,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QTextEdit,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.model.messages import content_text, preview
from widgets.chat_view import SafeTextDocument
from widgets.formatting import local_datetime, pretty_arguments
from widgets.theme import Palette, format_bytes, format_tokens, palette

Index = QModelIndex | QPersistentModelIndex
SORT_ROLE = Qt.ItemDataRole.UserRole + 10
MAX_HIGHLIGHTS = 2000


def _local_time(ts: Any, fmt: str = "%Y-%m-%d %H:%M") -> str:
    dt = local_datetime(ts)
    if dt is None:
        return ts if isinstance(ts, str) else ""
    return dt.strftime(fmt)


# ------------------------------------------------------------------------------------ file viewer
class _LineNumbers(QWidget):
    def __init__(self, editor: CodeView) -> None:
        super().__init__(editor)
        self._editor = editor

    def sizeHint(self) -> QSize:
        return QSize(self._editor.line_number_width(), 0)

    def paintEvent(self, event: QPaintEvent) -> None:
        self._editor.paint_line_numbers(self, event)


class CodeView(QPlainTextEdit):
    """Read-only monospace text with a line-number gutter."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self._gutter = _LineNumbers(self)
        self._gutter_bg = QColor("#f3f4f6")
        self._gutter_fg = QColor("#6b7280")
        self.blockCountChanged.connect(self._update_margin)
        self.updateRequest.connect(self._on_update_request)
        self._update_margin()

    def set_colors(self, bg: str, fg: str) -> None:
        self._gutter_bg = QColor(bg)
        self._gutter_fg = QColor(fg)
        self._gutter.update()

    def line_number_width(self) -> int:
        digits = len(str(max(1, self.blockCount())))
        return 12 + self.fontMetrics().horizontalAdvance("9") * max(3, digits)

    def _update_margin(self, _count: int = 0) -> None:
        self.setViewportMargins(self.line_number_width(), 0, 0, 0)

    def _on_update_request(self, rect: QRect, dy: int) -> None:
        if dy:
            self._gutter.scroll(0, dy)
        else:
            self._gutter.update(0, rect.y(), self._gutter.width(), rect.height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        cr = self.contentsRect()
        self._gutter.setGeometry(QRect(cr.left(), cr.top(), self.line_number_width(), cr.height()))

    def paint_line_numbers(self, gutter: QWidget, event: QPaintEvent) -> None:
        painter = QPainter(gutter)
        painter.fillRect(event.rect(), self._gutter_bg)
        painter.setPen(self._gutter_fg)
        painter.setFont(self.font())
        block = self.firstVisibleBlock()
        number = block.blockNumber()
        top = round(self.blockBoundingGeometry(block).translated(self.contentOffset()).top())
        bottom = top + round(self.blockBoundingRect(block).height())
        width = gutter.width() - 6
        height = self.fontMetrics().height()
        while block.isValid() and top <= event.rect().bottom():
            if block.isVisible() and bottom >= event.rect().top():
                painter.drawText(0, top, width, height, Qt.AlignmentFlag.AlignRight, str(number + 1))
            block = block.next()
            top = bottom
            bottom = top + round(self.blockBoundingRect(block).height())
            number += 1
        painter.end()


class FileViewer(QWidget):
    """Viewer for one text file: line numbers, search (highlight all, next/previous), copy, open."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.opener: Callable[[QUrl], bool] = QDesktopServices.openUrl
        self._path = ""
        self._abs_path: Path | None = None
        self._matches: list[QTextCursor] = []
        self._current = -1
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        top = QHBoxLayout()
        self.title = QLabel("No file selected")
        self.title.setWordWrap(True)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        top.addWidget(self.title, 1)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy the selection, or the whole file when nothing is selected")
        self.open_button = QPushButton("Open with system app")
        top.addWidget(self.copy_button)
        top.addWidget(self.open_button)
        layout.addLayout(top)
        search = QHBoxLayout()
        self.search_edit = QLineEdit()
        self.search_edit.setPlaceholderText("Search in file (Enter: next, Shift+Enter: previous)")
        self.search_edit.setClearButtonEnabled(True)
        self.prev_button = QPushButton("↑")
        self.next_button = QPushButton("↓")
        for b in (self.prev_button, self.next_button):
            b.setFixedWidth(32)
        self.prev_button.setToolTip("Previous match")
        self.next_button.setToolTip("Next match")
        self.count_label = QLabel("")
        search.addWidget(self.search_edit, 1)
        search.addWidget(self.prev_button)
        search.addWidget(self.next_button)
        search.addWidget(self.count_label)
        layout.addLayout(search)
        self.text_view = CodeView()
        layout.addWidget(self.text_view, 1)
        self.copy_button.clicked.connect(self.copy)
        self.open_button.clicked.connect(self.open_external)
        self.search_edit.textChanged.connect(self._on_query)
        self.search_edit.returnPressed.connect(self.next_match)
        self.next_button.clicked.connect(self.next_match)
        self.prev_button.clicked.connect(self.previous_match)
        sc = QShortcut(QKeySequence("Shift+Return"), self.search_edit)
        sc.setContext(Qt.ShortcutContext.WidgetShortcut)
        sc.activated.connect(self.previous_match)
        find = QShortcut(QKeySequence.StandardKey.Find, self)
        find.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        find.activated.connect(self.search_edit.setFocus)
        self._highlight = QColor("#fde68a")
        self._current_color = QColor("#f59e0b")
        self._update_buttons()

    def set_palette(self, pal: Palette) -> None:
        self.text_view.set_colors(pal.panel, pal.muted)
        self._highlight = QColor("#fde68a") if not pal.dark else QColor("#854d0e")
        self._current_color = QColor("#f59e0b") if not pal.dark else QColor("#ca8a04")
        self._apply_highlights()

    def path(self) -> str:
        return self._path

    def text(self) -> str:
        return self.text_view.toPlainText()

    def show_text(self, path: str, text: str, abs_path: Path | None = None, detail: str = "") -> None:
        self._path = path
        self._abs_path = abs_path
        self.title.setText(path + (f"  —  {detail}" if detail else ""))
        self.text_view.setPlainText(text)
        self._on_query(self.search_edit.text())
        self._update_buttons()

    def clear(self) -> None:
        self._path = ""
        self._abs_path = None
        self.title.setText("No file selected")
        self.text_view.clear()
        self._matches = []
        self._current = -1
        self.count_label.setText("")
        self._update_buttons()

    def _update_buttons(self) -> None:
        self.copy_button.setEnabled(bool(self._path))
        self.open_button.setEnabled(self._abs_path is not None)
        self.open_button.setToolTip(
            str(self._abs_path) if self._abs_path is not None else "The session folder is not known"
        )

    # --- search
    def _on_query(self, query: str) -> None:
        self._matches = []
        self._current = -1
        doc = self.text_view.document()
        if query:
            cursor = QTextCursor(doc)
            while True:
                cursor = doc.find(query, cursor)
                if cursor.isNull():
                    break
                self._matches.append(QTextCursor(cursor))
                if len(self._matches) >= 100_000:
                    break
        if self._matches:
            self._current = 0
            self._goto_current()
        self._apply_highlights()
        self._update_count()

    def _update_count(self) -> None:
        query = self.search_edit.text()
        if not query:
            self.count_label.setText("")
        elif not self._matches:
            self.count_label.setText("no match")
        else:
            self.count_label.setText(f"{self._current + 1} of {len(self._matches):,}")

    def match_count(self) -> int:
        return len(self._matches)

    def current_match_line(self) -> int:
        """1-based line number of the current match (0 when none)."""
        if self._current < 0:
            return 0
        return self._matches[self._current].blockNumber() + 1

    def find(self, query: str) -> int:
        self.search_edit.setText(query)
        return len(self._matches)

    def next_match(self) -> None:
        if self._matches:
            self._current = (self._current + 1) % len(self._matches)
            self._goto_current()
            self._apply_highlights()
            self._update_count()

    def previous_match(self) -> None:
        if self._matches:
            self._current = (self._current - 1) % len(self._matches)
            self._goto_current()
            self._apply_highlights()
            self._update_count()

    def _goto_current(self) -> None:
        cur = self._matches[self._current]
        self.text_view.setTextCursor(cur)
        self.text_view.centerCursor()

    def _apply_highlights(self) -> None:
        sels = []
        for i, cur in enumerate(self._matches[:MAX_HIGHLIGHTS]):
            sel = QTextEdit.ExtraSelection()
            fmt = QTextCharFormat()
            fmt.setBackground(self._current_color if i == self._current else self._highlight)
            sel.format = fmt
            sel.cursor = cur
            sels.append(sel)
        if self._current >= MAX_HIGHLIGHTS:
            sel = QTextEdit.ExtraSelection()
            fmt = QTextCharFormat()
            fmt.setBackground(self._current_color)
            sel.format = fmt
            sel.cursor = self._matches[self._current]
            sels.append(sel)
        self.text_view.setExtraSelections(sels)

    # --- copy / open
    def copy(self) -> str:
        cursor = self.text_view.textCursor()
        text = cursor.selectedText().replace("\u2029", "\n") if cursor.hasSelection() else self.text()
        QGuiApplication.clipboard().setText(text)
        return text

    def open_external(self) -> bool:
        if self._abs_path is None:
            return False
        return bool(self.opener(QUrl.fromLocalFile(str(self._abs_path))))


# ------------------------------------------------------------------------------------ files table
class _FilesModel(QAbstractTableModel):
    HEADERS = ("Tool", "Size", "Lines", "Created", "Referring message", "File")

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.files: list[dict[str, Any]] = []

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
                return str(f.get("tool") or "?")
            if col == 1:
                return format_bytes(f.get("size"))
            if col == 2:
                return f"{int(f.get('lines') or 0):,}"
            if col == 3:
                return _local_time(f.get("created"))
            if col == 4:
                mid = str(f.get("message_id") or "")
                prev = str(f.get("message_preview") or "")
                if prev:
                    return prev
                return mid[:10] + ("…" if len(mid) > 10 else "") if mid else "— (none)"
            if col == 5:
                return Path(str(f.get("path") or "")).name
        if role == SORT_ROLE:
            if col == 1:
                return int(f.get("size") or 0)
            if col == 2:
                return int(f.get("lines") or 0)
            if col == 3:
                return str(f.get("created") or "")
            return str(self.data(index, Qt.ItemDataRole.DisplayRole)).lower()
        if role == Qt.ItemDataRole.ToolTipRole:
            return str(f.get("path") or "")
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (1, 2):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.UserRole:
            return f
        return None

    def set_files(self, files: Sequence[dict[str, Any]]) -> None:
        self.beginResetModel()
        self.files = [dict(f) for f in files]
        self.endResetModel()

    def add(self, file: dict[str, Any]) -> None:
        for i, f in enumerate(self.files):
            if f.get("path") == file.get("path"):
                self.files[i] = dict(file)
                self.dataChanged.emit(self.index(i, 0), self.index(i, len(self.HEADERS) - 1))
                return
        n = len(self.files)
        self.beginInsertRows(QModelIndex(), n, n)
        self.files.append(dict(file))
        self.endInsertRows()

    def row_of(self, path: str) -> int:
        for i, f in enumerate(self.files):
            if f.get("path") == path:
                return i
        return -1


class _FilesFilter(QSortFilterProxyModel):
    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:
        text = self.filterRegularExpression().pattern().lower()
        if not text:
            return True
        f = self.sourceModel().files[source_row]  # type: ignore[attr-defined]
        hay = " ".join(str(f.get(k) or "") for k in ("tool", "path", "message_id", "message_preview")).lower()
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

    def _file_at(self, proxy_index: QModelIndex) -> dict[str, Any] | None:
        if not proxy_index.isValid():
            return None
        src = self.proxy.mapToSource(proxy_index)
        return self.model.files[src.row()]

    def _on_current(self, current: QModelIndex, _previous: QModelIndex) -> None:
        f = self._file_at(current)
        if f is not None and f.get("path") != self.viewer.path():
            self.file_requested.emit(str(f.get("path") or ""))

    def _on_double_click(self, index: QModelIndex) -> None:
        f = self._file_at(index)
        if f is not None and index.column() == 4 and f.get("message_id"):
            self.message_activated.emit(str(f["message_id"]))

    def _update_summary(self) -> None:
        files = self.model.files
        if not files:
            self.summary_label.setText("No offloaded tool results")
            return
        total = sum(int(f.get("size") or 0) for f in files)
        plural = "s" if len(files) != 1 else ""
        self.summary_label.setText(f"{len(files):,} file{plural} · {format_bytes(total)}")

    def set_files(self, files: Sequence[dict[str, Any]]) -> None:
        self.model.set_files(files)
        self._update_summary()
        if self.viewer.path() and self.model.row_of(self.viewer.path()) < 0:
            self.viewer.clear()

    def add_file(self, file: dict[str, Any]) -> None:
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
            detail = (
                f"{f.get('tool') or '?'} · {format_bytes(f.get('size'))} · {int(f.get('lines') or 0):,} lines"
            )
        self.viewer.show_text(path, text, self.abs_path(path), detail)


# --------------------------------------------------------------------------------------- archive
def _message_text(msg: dict[str, Any]) -> str:
    parts = [content_text(msg.get("content"))]
    if msg.get("reasoning_content"):
        parts.insert(0, "[reasoning]\n" + str(msg["reasoning_content"]) + "\n[/reasoning]")
    for c in msg.get("tool_calls") or ():
        fn = c.get("function") or {}
        args = pretty_arguments(str(fn.get("arguments") or ""))
        parts.append(f"[tool call {c.get('id', '')}] {fn.get('name', '?')}\n{args}")
    return "\n\n".join(p for p in parts if p)


class ArchivePanel(QWidget):
    """The dialog archive: days → messages; full view; search across days; restore checked messages."""

    day_requested = Signal(str)
    search_requested = Signal(str)
    restore_requested = Signal(list)
    message_activated = Signal(str)

    COLS = ("Time", "Role", "Tokens", "Preview")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        search = QHBoxLayout()
        self.search_edit = QLineEdit()
        self.search_edit.setPlaceholderText("Search all archived days (Enter)")
        self.search_edit.setClearButtonEnabled(True)
        self.search_button = QPushButton("Search")
        self.back_button = QPushButton("Show days")
        self.back_button.setVisible(False)
        search.addWidget(self.search_edit, 1)
        search.addWidget(self.search_button)
        search.addWidget(self.back_button)
        layout.addLayout(search)
        self.status = QLabel("The archive is empty")
        layout.addWidget(self.status)
        self.tree = QTreeWidget()
        self.tree.setColumnCount(len(self.COLS))
        self.tree.setHeaderLabels(list(self.COLS))
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        header = self.tree.header()
        header.setStretchLastSection(True)
        fm = self.tree.fontMetrics()
        header.resizeSection(0, fm.horizontalAdvance("2025-11-21 00:00:00") + 60)
        header.resizeSection(1, fm.horizontalAdvance("assistant") + 24)
        header.resizeSection(2, fm.horizontalAdvance("1,000,000") + 20)
        self.view = QPlainTextEdit()
        self.view.setReadOnly(True)
        self.view.setPlaceholderText("Select a message to read it in full")
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.tree)
        split.addWidget(self.view)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        layout.addWidget(split, 1)
        bottom = QHBoxLayout()
        self.checked_label = QLabel("")
        self.restore_button = QPushButton("Restore checked into the context")
        self.restore_button.setEnabled(False)
        bottom.addWidget(self.checked_label, 1)
        bottom.addWidget(self.restore_button)
        layout.addLayout(bottom)
        self._days: dict[str, QTreeWidgetItem] = {}
        self._loaded: set[str] = set()
        self._checked: dict[str, dict[str, Any]] = {}
        self._hits_mode = False
        self._query = ""
        self._all_days: list[str] = []
        self._day_cache: dict[str, tuple[list[dict[str, Any]], dict[str, int]]] = {}
        self.search_edit.returnPressed.connect(self._on_search)
        self.search_button.clicked.connect(self._on_search)
        self.back_button.clicked.connect(self.show_days)
        self.tree.itemExpanded.connect(self._on_expanded)
        self.tree.currentItemChanged.connect(self._on_current)
        self.tree.itemChanged.connect(self._on_item_changed)
        self.tree.itemDoubleClicked.connect(self._on_double_click)
        self.restore_button.clicked.connect(self._on_restore)

    # --- days view
    def set_days(self, days: Iterable[str]) -> None:
        self._hits_mode = False
        self.back_button.setVisible(False)
        self.tree.blockSignals(True)
        self.tree.clear()
        self._days = {}
        self._loaded = set()
        self._day_cache = {}  # new days: messages are asked for again when a day is expanded
        for day in sorted(set(days), reverse=True):
            item = QTreeWidgetItem([day, "", "", "(expand to load)"])
            item.setData(0, Qt.ItemDataRole.UserRole, {"day": day})
            item.setChildIndicatorPolicy(QTreeWidgetItem.ChildIndicatorPolicy.ShowIndicator)
            f = item.font(0)
            f.setBold(True)
            item.setFont(0, f)
            self.tree.addTopLevelItem(item)
            self._days[day] = item
        self.tree.blockSignals(False)
        n = len(self._days)
        self.status.setText(f"{n} archived day{'s' if n != 1 else ''}" if n else "The archive is empty")
        self._all_days = list(self._days)
        self._update_checked()

    def show_days(self) -> None:
        self.search_edit.blockSignals(True)
        self.search_edit.clear()
        self.search_edit.blockSignals(False)
        days = list(self._all_days)
        cached = dict(self._day_cache)
        self.set_days(days)  # back from search results: the days as they were, loaded ones filled in
        for day, (messages, tokens) in cached.items():
            self.set_messages(day, messages, tokens, expand=False)

    def _message_item(
        self, msg: dict[str, Any], tokens: int | None, day: str, snippet: str = ""
    ) -> QTreeWidgetItem:
        role = str(msg.get("role") or "?")
        when = _local_time(msg.get("ts"), "%H:%M:%S")
        text = snippet or preview(msg, 160)
        item = QTreeWidgetItem([when if not self._hits_mode else f"{day} {when}", role,
                                format_tokens(tokens) if tokens is not None else "", text])
        item.setData(0, Qt.ItemDataRole.UserRole, {"day": day, "message": msg, "tokens": tokens})
        item.setTextAlignment(2, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        mid = str(msg.get("id") or "")
        item.setCheckState(0, Qt.CheckState.Checked if mid in self._checked else Qt.CheckState.Unchecked)
        item.setToolTip(3, text)
        return item

    def set_messages(
        self,
        day: str,
        messages: Sequence[dict[str, Any]],
        tokens_by_id: dict[str, int] | None = None,
        expand: bool = True,
    ) -> None:
        tokens_by_id = tokens_by_id or {}
        self._day_cache[day] = (list(messages), dict(tokens_by_id))
        if self._hits_mode:
            return
        parent = self._days.get(day)
        self.tree.blockSignals(True)
        if parent is None:
            parent = QTreeWidgetItem([day, "", "", ""])
            parent.setData(0, Qt.ItemDataRole.UserRole, {"day": day})
            f = parent.font(0)
            f.setBold(True)
            parent.setFont(0, f)
            self.tree.addTopLevelItem(parent)
            self._days[day] = parent
        parent.takeChildren()
        for msg in messages:
            parent.addChild(self._message_item(msg, tokens_by_id.get(str(msg.get("id") or "")), day))
        total = sum(tokens_by_id.get(str(m.get("id") or ""), 0) for m in messages)
        parent.setText(2, format_tokens(total) if tokens_by_id else "")
        parent.setTextAlignment(2, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        parent.setText(3, f"{len(messages):,} message{'s' if len(messages) != 1 else ''}")
        self._loaded.add(day)
        if expand:
            parent.setExpanded(True)
        self.tree.blockSignals(False)

    def _on_expanded(self, item: QTreeWidgetItem) -> None:
        data = item.data(0, Qt.ItemDataRole.UserRole) or {}
        day = data.get("day")
        if day and "message" not in data and day not in self._loaded:
            self.day_requested.emit(day)

    # --- search
    def _on_search(self) -> None:
        query = self.search_edit.text().strip()
        if query:
            self._query = query
            self.status.setText(f"Searching for “{query}”…")
            self.search_requested.emit(query)

    def set_hits(self, query: str, hits: Sequence[dict[str, Any]]) -> None:
        self._hits_mode = True
        self._query = query
        self.back_button.setVisible(True)
        self.tree.blockSignals(True)
        self.tree.clear()
        for hit in hits:
            msg = hit.get("message") or {}
            self.tree.addTopLevelItem(self._message_item(msg, None, str(hit.get("day") or ""),
                                                         " ".join(str(hit.get("snippet") or "").split())))
        self.tree.blockSignals(False)
        days = {str(h.get("day") or "") for h in hits}
        self.status.setText(
            f"{len(hits):,} hit{'s' if len(hits) != 1 else ''} for “{query}” in {len(days)} day"
            f"{'s' if len(days) != 1 else ''}" if hits else f"No archived message contains “{query}”"
        )

    # --- selection, full view, restore
    def _on_current(self, current: QTreeWidgetItem | None, _prev: QTreeWidgetItem | None) -> None:
        if current is None:
            return
        data = current.data(0, Qt.ItemDataRole.UserRole) or {}
        msg = data.get("message")
        if not msg:
            return
        head = f"{data.get('day', '')} {_local_time(msg.get('ts'), '%H:%M:%S')} · {msg.get('role', '?')}"
        if data.get("tokens") is not None:
            head += f" · {format_tokens(data['tokens'])} tokens"
        if msg.get("tool_call_id"):
            head += f" · result of {msg['tool_call_id']}"
        self.view.setPlainText(head + "\n\n" + _message_text(msg))
        if self._query:
            cursor = self.view.document().find(self._query)
            if not cursor.isNull():
                self.view.setTextCursor(cursor)

    def _on_item_changed(self, item: QTreeWidgetItem, column: int) -> None:
        if column != 0:
            return
        data = item.data(0, Qt.ItemDataRole.UserRole) or {}
        msg = data.get("message")
        if not msg:
            return
        mid = str(msg.get("id") or "")
        if not mid:
            return
        if item.checkState(0) == Qt.CheckState.Checked:
            self._checked[mid] = msg
        else:
            self._checked.pop(mid, None)
        self._update_checked()

    def _update_checked(self) -> None:
        n = len(self._checked)
        self.checked_label.setText(f"{n} message{'s' if n != 1 else ''} checked" if n else "")
        self.restore_button.setEnabled(n > 0)

    def checked_ids(self) -> list[str]:
        return list(self._checked)

    def set_checked(self, message_id: str, checked: bool) -> bool:
        """Check or uncheck a message shown in the tree (tests, keyboard)."""
        for item in self._iter_items():
            data = item.data(0, Qt.ItemDataRole.UserRole) or {}
            if str((data.get("message") or {}).get("id") or "") == message_id:
                item.setCheckState(0, Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
                return True
        return False

    def _iter_items(self) -> Iterable[QTreeWidgetItem]:
        for i in range(self.tree.topLevelItemCount()):
            top = self.tree.topLevelItem(i)
            yield top
            for j in range(top.childCount()):
                yield top.child(j)

    def _on_restore(self) -> None:
        ids = self.checked_ids()
        if ids:
            self.restore_requested.emit(ids)

    def clear_checked(self) -> None:
        self._checked.clear()
        self.tree.blockSignals(True)
        for item in self._iter_items():
            if (item.data(0, Qt.ItemDataRole.UserRole) or {}).get("message"):
                item.setCheckState(0, Qt.CheckState.Unchecked)
        self.tree.blockSignals(False)
        self._update_checked()

    def _on_double_click(self, item: QTreeWidgetItem, _col: int) -> None:
        data = item.data(0, Qt.ItemDataRole.UserRole) or {}
        msg = data.get("message")
        if msg and msg.get("id"):
            self.message_activated.emit(str(msg["id"]))


# --------------------------------------------------------------------------------- summary, log
class SummaryPanel(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        head = QHBoxLayout()
        self.label = QLabel("No summary yet: nothing has been compacted in this session")
        self.copy_button = QPushButton("Copy")
        head.addWidget(self.label, 1)
        head.addWidget(self.copy_button)
        layout.addLayout(head)
        self.view = QTextEdit()
        self.view.setReadOnly(True)
        self._doc = SafeTextDocument(self.view)
        self.view.setDocument(self._doc)
        layout.addWidget(self.view, 1)
        self._text = ""
        self.copy_button.clicked.connect(lambda: QGuiApplication.clipboard().setText(self._text))
        self.copy_button.setEnabled(False)

    def set_summary(self, text: str, tokens: int | None = None) -> None:
        self._text = text or ""
        if self._text.strip():
            self._doc.set_markdown(self._text)
            suffix = f" · {format_tokens(tokens)} tokens" if tokens is not None else ""
            self.label.setText("Current summary" + suffix)
        else:
            self._doc.setPlainText("")
            self.label.setText("No summary yet: nothing has been compacted in this session")
        self.copy_button.setEnabled(bool(self._text.strip()))

    def text(self) -> str:
        return self._text

    def document(self) -> SafeTextDocument:
        return self._doc


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
            _local_time(ev.get("ts"), "%Y-%m-%d %H:%M:%S"),
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


# --------------------------------------------------------------------------------------- inspector
class Inspector(QTabWidget):
    """Tabs: Tool results, Archive, Summary, Compactions (see the module docstring)."""

    file_requested = Signal(str)
    message_activated = Signal(str)
    archive_day_requested = Signal(str)
    archive_search_requested = Signal(str)
    restore_requested = Signal(list)

    TABS = ("files", "archive", "summary", "compactions")

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

    def set_offloaded_files(self, files: Sequence[dict[str, Any]]) -> None:
        self.files.set_files(files)

    def add_offloaded_file(self, file: dict[str, Any]) -> None:
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

    def set_archive_hits(self, query: str, hits: Sequence[dict[str, Any]]) -> None:
        self.archive.set_hits(query, hits)

    def checked_archive_ids(self) -> list[str]:
        return self.archive.checked_ids()

    def set_summary(self, text: str, tokens: int | None = None) -> None:
        self.summary.set_summary(text, tokens)

    def set_compaction_events(self, events: Sequence[dict[str, Any]]) -> None:
        self.log.set_events(events)

    def add_compaction_event(self, event: dict[str, Any]) -> None:
        self.log.add_event(event)


__all__ = [
    "ArchivePanel",
    "CodeView",
    "CompactionLogPanel",
    "FileViewer",
    "Inspector",
    "OffloadPanel",
    "SummaryPanel",
]
