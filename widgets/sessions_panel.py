"""The sessions list: new, rename, delete, open a transcript; and a Sources tab (``sources``: a
:class:`widgets.sources_list.SourcesList` of the agent sessions on this machine).

A plain view: it shows session rows (:class:`engine.workbench.rows.SessionRow`: id, title, when updated, how
many messages) and emits what the user wants; the app does it and answers with ``set_sessions`` /
``update_session``. Delete asks for confirmation in a non-modal message box (``open()``, never ``exec()``); Open
transcript uses a non-modal file dialog.

Public API of :class:`SessionsPanel`
------------------------------------
Signals:
    session_selected(str)                 the user chose a session
    new_requested()
    rename_requested(str, str)            id, new title (stripped, never empty)
    delete_requested(str)                 id, after the user confirmed
    open_transcript_requested(str)        path of a transcript file (.jsonl / .json / .traj.json)
Methods:
    set_sessions(sessions)    replace the list (newest first as given)
    update_session(session)   insert or update one
    remove_session(id)
    set_current(id)           select without emitting session_selected
    clear_current()           no row current (a source view is shown): a click on any session opens it
    set_palette(palette)      repaint (the list uses the application palette)
    current_id() -> str | None
    start_rename(id=None)     in-place editor on the row
    request_delete(id=None)   show the confirmation (returns the box, tests)
    choose_transcript()       show the file dialog (returns it, tests)
Attributes:
    tabs                      Sessions | Sources
    sources                   the SourcesList (its own signals: source_opened, continue_requested, …)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from engine.workbench.rows import SessionRow
from widgets.formatting import local_datetime
from widgets.sources_list import SourcesList

ID_ROLE = Qt.ItemDataRole.UserRole + 1
DATA_ROLE = Qt.ItemDataRole.UserRole + 2
TRANSCRIPT_FILTER = "Agent sessions and transcripts (*.jsonl *.json *.traj);;All files (*)"


def _when(ts: Any) -> str:
    dt = local_datetime(ts)
    if dt is None:
        return ""
    now = datetime.now(dt.tzinfo)
    if dt.date() == now.date():
        return dt.strftime("today %H:%M")
    return dt.strftime("%Y-%m-%d %H:%M")


class _SessionDelegate(QStyledItemDelegate):
    """Two lines per session: the title, and when / how many messages in a muted, smaller font."""

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        fm = option.fontMetrics
        return QSize(option.rect.width(), fm.height() * 2 + 10)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        title = opt.text
        opt.text = ""
        style = opt.widget.style() if opt.widget is not None else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        group = QPalette.ColorGroup.Normal
        text_color = opt.palette.color(
            group, QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text
        )
        muted = QColor(text_color)
        muted.setAlpha(150)
        rect = opt.rect.adjusted(8, 4, -8, -4)
        fm = opt.fontMetrics
        painter.save()
        bold = QFont(opt.font)
        bold.setBold(True)
        painter.setFont(bold)
        painter.setPen(text_color)
        painter.drawText(
            QRect(rect.left(), rect.top(), rect.width(), fm.height()),
            int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
            QFontMetrics(bold).elidedText(title, Qt.TextElideMode.ElideRight, rect.width()),
        )
        small = QFont(opt.font)
        if small.pointSizeF() > 0:
            small.setPointSizeF(max(7.0, small.pointSizeF() * 0.9))
        painter.setFont(small)
        painter.setPen(muted)
        sub = str(index.data(Qt.ItemDataRole.StatusTipRole) or "")
        painter.drawText(
            QRect(rect.left(), rect.top() + fm.height() + 2, rect.width(), fm.height()),
            int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
            QFontMetrics(small).elidedText(sub, Qt.TextElideMode.ElideRight, rect.width()),
        )
        painter.restore()


class SessionsPanel(QWidget):
    """List of sessions with New / Rename / Delete / Open transcript (see the module docstring)."""

    session_selected = Signal(str)
    new_requested = Signal()
    rename_requested = Signal(str, str)
    delete_requested = Signal(str)
    open_transcript_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(4, 4, 4, 4)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        outer.addWidget(self.tabs)
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.setSpacing(4)
        self.tabs.addTab(page, "Sessions")
        self.sources = SourcesList()  # the agent sessions on this machine (widgets.sources_list)
        self.tabs.addTab(self.sources, "Sources")
        self.list = QListWidget()
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.list.setEditTriggers(QAbstractItemView.EditTrigger.EditKeyPressed)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.setWordWrap(True)
        self.list.setItemDelegate(_SessionDelegate(self.list))
        layout.addWidget(self.list, 1)
        self.empty_label = QLabel("Listing the sessions…")  # "No sessions yet" once the list came and was empty
        self.empty_label.setWordWrap(True)
        layout.addWidget(self.empty_label)
        row = QHBoxLayout()
        self.new_button = QPushButton("New")
        self.rename_button = QPushButton("Rename")
        self.delete_button = QPushButton("Delete")
        for b in (self.new_button, self.rename_button, self.delete_button):
            row.addWidget(b)
        layout.addLayout(row)
        self.open_button = QPushButton("Open transcript…")
        self.open_button.setToolTip("Open a saved history.jsonl or an agent trajectory (.traj.json)")
        layout.addWidget(self.open_button)

        self._suppress = False
        self._editing: str | None = None
        self._box: QMessageBox | None = None
        self._file_dialog: QFileDialog | None = None
        self.new_button.clicked.connect(self.new_requested)
        self.rename_button.clicked.connect(lambda: self.start_rename())
        self.delete_button.clicked.connect(lambda: self.request_delete())
        self.open_button.clicked.connect(self.choose_transcript)
        self.list.currentItemChanged.connect(self._on_current)
        self.list.itemChanged.connect(self._on_item_changed)
        self.list.customContextMenuRequested.connect(self._on_menu)
        self._update_buttons()

    def set_palette(self, pal: Any) -> None:
        """The list is drawn with the application palette (set by ``theme.apply_theme``); repaint."""
        self.list.viewport().update()

    # --- data
    def _make_item(self, session: SessionRow) -> QListWidgetItem:
        item = QListWidgetItem()
        self._fill(item, session)
        return item

    def _fill(self, item: QListWidgetItem, session: SessionRow) -> None:
        title = session.title or "Untitled session"
        item.setText(title)
        item.setData(ID_ROLE, session.id)
        item.setData(DATA_ROLE, session)
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
        bits = [b for b in (_when(session.updated),) if b]
        if session.messages is not None:
            bits.append(f"{session.messages:,} messages")
        item.setToolTip(f"{title}\n" + " · ".join(bits) if bits else title)
        item.setStatusTip(" · ".join(bits))

    def set_sessions(self, sessions: Sequence[SessionRow]) -> None:
        self.empty_label.setText("No sessions yet: press New")
        current = self.current_id()
        self._suppress = True
        self.list.clear()
        for s in sessions:
            self.list.addItem(self._make_item(s))
        self._suppress = False
        if current is not None:
            self.set_current(current)
        self._update_buttons()

    def update_session(self, session: SessionRow) -> None:
        item = self._item(session.id)
        self._suppress = True
        if item is None:
            self.list.insertItem(0, self._make_item(session))
        else:
            self._fill(item, session)
        self._suppress = False
        self._update_buttons()

    def remove_session(self, session_id: str) -> None:
        item = self._item(session_id)
        if item is not None:
            self._suppress = True
            self.list.takeItem(self.list.row(item))
            self._suppress = False
        self._update_buttons()

    def session_ids(self) -> list[str]:
        return [self.list.item(i).data(ID_ROLE) for i in range(self.list.count())]

    def title_of(self, session_id: str) -> str | None:
        item = self._item(session_id)
        return item.text() if item is not None else None

    def _item(self, session_id: str) -> QListWidgetItem | None:
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.data(ID_ROLE) == session_id:
                return item
        return None

    def set_current(self, session_id: str) -> None:
        item = self._item(session_id)
        self._suppress = True
        if item is not None:
            self.list.setCurrentItem(item)
        self._suppress = False
        self._update_buttons()

    def clear_current(self) -> None:
        """No row current nor selected, without emitting: what is shown is not one of these sessions, so a
        click on any of them (the one shown before, too) opens it."""
        self._suppress = True
        self.list.setCurrentRow(-1)
        self.list.clearSelection()
        self._suppress = False
        self._update_buttons()

    def current_id(self) -> str | None:
        item = self.list.currentItem()
        return item.data(ID_ROLE) if item is not None else None

    # --- actions
    def start_rename(self, session_id: str | None = None) -> bool:
        sid = session_id or self.current_id()
        item = self._item(sid) if sid else None
        if item is None:
            return False
        self._editing = sid
        self.list.setCurrentItem(item)
        self.list.editItem(item)
        return True

    def request_delete(self, session_id: str | None = None) -> QMessageBox | None:
        sid = session_id or self.current_id()
        item = self._item(sid) if sid else None
        if item is None or sid is None:
            return None
        box = QMessageBox(self)
        box.setIcon(QMessageBox.Icon.Warning)
        box.setWindowTitle("Delete session")
        box.setText(f"Delete the session “{item.text()}”?")
        box.setInformativeText("Its history, archive and offloaded tool results are removed from disk.")
        delete = box.addButton("Delete", QMessageBox.ButtonRole.DestructiveRole)
        cancel = box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(cancel)
        box.setEscapeButton(cancel)
        box.delete_button = delete  # type: ignore[attr-defined]  # for tests and keyboard users

        def done(_result: int) -> None:
            if box.clickedButton() is delete:
                self.delete_requested.emit(sid)

        box.finished.connect(done)
        self._box = box
        box.open()
        return box

    def choose_transcript(self) -> QFileDialog:
        dlg = QFileDialog(self, "Open transcript")
        dlg.setFileMode(QFileDialog.FileMode.ExistingFile)
        dlg.setNameFilter(TRANSCRIPT_FILTER)
        dlg.fileSelected.connect(self._on_transcript_chosen)
        self._file_dialog = dlg
        dlg.open()
        return dlg

    def _on_transcript_chosen(self, path: str) -> None:
        if path:
            self.open_transcript_requested.emit(path)

    # --- slots
    def _on_current(self, current: QListWidgetItem | None, _prev: QListWidgetItem | None) -> None:
        self._update_buttons()
        if self._suppress or current is None:
            return
        self.session_selected.emit(current.data(ID_ROLE))

    def _on_item_changed(self, item: QListWidgetItem) -> None:
        if self._suppress:
            return
        sid = item.data(ID_ROLE)
        data = item.data(DATA_ROLE)
        old = (data.title if isinstance(data, SessionRow) else "") or "Untitled session"
        new = item.text().strip()
        self._editing = None
        if not new or new == old:
            self._suppress = True
            item.setText(old)
            self._suppress = False
            return
        self._suppress = True
        item.setData(DATA_ROLE, replace(data, title=new) if isinstance(data, SessionRow) else SessionRow(sid, new))
        item.setText(new)
        self._suppress = False
        self.rename_requested.emit(sid, new)

    def _on_menu(self, pos: Any) -> None:
        item = self.list.itemAt(pos)
        menu = QMenu(self)
        menu.addAction("New session", self.new_requested.emit)
        if item is not None:
            sid = item.data(ID_ROLE)
            menu.addAction("Rename", lambda: self.start_rename(sid))
            menu.addAction("Delete…", lambda: self.request_delete(sid))
        menu.addAction("Open transcript…", self.choose_transcript)
        menu.popup(self.list.viewport().mapToGlobal(pos))

    def _update_buttons(self) -> None:
        has = self.list.currentItem() is not None
        self.rename_button.setEnabled(has)
        self.delete_button.setEnabled(has)
        self.empty_label.setVisible(self.list.count() == 0)
