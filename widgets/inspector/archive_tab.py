"""The "Archive" tab: days → archived messages, the full message, search across days and restore
of the checked messages (:class:`ArchivePanel`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.model.messages import Message, content_text, preview
from engine.store.archive import ArchiveHit
from widgets.formatting import local_time_text, pretty_arguments
from widgets.theme import format_tokens


@dataclass(frozen=True)
class _Entry:
    """What a row of the tree is: a day (``message`` None) or an archived message of that day, with its tokens."""

    day: str
    message: Message | None = None
    tokens: int | None = None

    @property
    def message_id(self) -> str:
        return str(self.message.get("id") or "") if self.message else ""


def _entry(item: QTreeWidgetItem) -> _Entry:
    data = item.data(0, Qt.ItemDataRole.UserRole)
    return data if isinstance(data, _Entry) else _Entry("")


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
        self._reveal: tuple[str, str] | None = None  # (day, message id) to select once the day is loaded
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
            item.setData(0, Qt.ItemDataRole.UserRole, _Entry(day))
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
        when = local_time_text(msg.get("ts"), "%H:%M:%S")
        text = snippet or preview(msg, 160)
        item = QTreeWidgetItem([when if not self._hits_mode else f"{day} {when}", role,
                                format_tokens(tokens) if tokens is not None else "", text])
        item.setData(0, Qt.ItemDataRole.UserRole, _Entry(day, msg, tokens))
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
            parent.setData(0, Qt.ItemDataRole.UserRole, _Entry(day))
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
        if self._reveal is not None and self._reveal[0] == day:
            self.reveal(*self._reveal)

    def reveal(self, day: str, message_id: str = "") -> None:
        """Show ``day`` (its messages asked for when not loaded yet) and select ``message_id`` in it."""
        if self._hits_mode:
            self.show_days()
        item = self._days.get(day)
        if item is None:
            return
        self._reveal = (day, message_id) if day not in self._loaded else None
        item.setExpanded(True)  # asks for the day's messages (day_requested) the first time
        target = item
        for j in range(item.childCount()):
            child = item.child(j)
            if child is not None and message_id and _entry(child).message_id == message_id:
                target = child
                break
        self.tree.setCurrentItem(target)
        self.tree.scrollToItem(target)

    def _on_expanded(self, item: QTreeWidgetItem) -> None:
        entry = _entry(item)
        if entry.day and entry.message is None and entry.day not in self._loaded:
            self.day_requested.emit(entry.day)

    # --- search
    def _on_search(self) -> None:
        query = self.search_edit.text().strip()
        if query:
            self._query = query
            self.status.setText(f"Searching for “{query}”…")
            self.search_requested.emit(query)

    def set_hits(self, query: str, hits: Sequence[ArchiveHit]) -> None:
        self._hits_mode = True
        self._query = query
        self.back_button.setVisible(True)
        self.tree.blockSignals(True)
        self.tree.clear()
        for hit in hits:
            self.tree.addTopLevelItem(self._message_item(hit.message, None, hit.day, " ".join(hit.snippet.split())))
        self.tree.blockSignals(False)
        days = {h.day for h in hits}
        self.status.setText(
            f"{len(hits):,} hit{'s' if len(hits) != 1 else ''} for “{query}” in {len(days)} day"
            f"{'s' if len(days) != 1 else ''}" if hits else f"No archived message contains “{query}”"
        )

    # --- selection, full view, restore
    def _on_current(self, current: QTreeWidgetItem | None, _prev: QTreeWidgetItem | None) -> None:
        if current is None:
            return
        entry = _entry(current)
        msg = entry.message
        if not msg:
            return
        head = f"{entry.day} {local_time_text(msg.get('ts'), '%H:%M:%S')} · {msg.get('role', '?')}"
        if entry.tokens is not None:
            head += f" · {format_tokens(entry.tokens)} tokens"
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
        msg = _entry(item).message
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
            if _entry(item).message_id == message_id:
                item.setCheckState(0, Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
                return True
        return False

    def _iter_items(self) -> Iterable[QTreeWidgetItem]:
        for i in range(self.tree.topLevelItemCount()):
            top = self.tree.topLevelItem(i)
            if top is None:
                continue
            yield top
            for j in range(top.childCount()):
                child = top.child(j)
                if child is not None:
                    yield child

    def _on_restore(self) -> None:
        ids = self.checked_ids()
        if ids:
            self.restore_requested.emit(ids)

    def clear_checked(self) -> None:
        self._checked.clear()
        self.tree.blockSignals(True)
        for item in self._iter_items():
            if _entry(item).message:
                item.setCheckState(0, Qt.CheckState.Unchecked)
        self.tree.blockSignals(False)
        self._update_checked()

    def _on_double_click(self, item: QTreeWidgetItem, _col: int) -> None:
        mid = _entry(item).message_id
        if mid:
            self.message_activated.emit(mid)
