"""A read-only text viewer with line numbers, search (highlighted matches), copy and "open with
the system app": :class:`FileViewer` (its editor is :class:`CodeView`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QRect, QSize, Qt, QUrl
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
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from widgets.theme import Palette

MAX_HIGHLIGHTS = 2000

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

    def current_match_line(self) -> int:
        """1-based line number of the current match (0 when none)."""
        if self._current < 0:
            return 0
        return self._matches[self._current].blockNumber() + 1

    def find(self, query: str) -> int:  # type: ignore[override]  # not QWidget.find(window id)
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
