"""The rows of the conversation as plain data: :class:`ChatItem` and the list model :class:`ChatModel`."""

from __future__ import annotations

import re
from typing import Any

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt

from engine.model.messages import content_text
from engine.model.records import CompactionRecord

# terminal escapes in tool output (colours, cursor moves, titles): ESC [ … final byte (CSI), ESC ] … BEL or
# ESC \ (OSC), the two-byte ones; shown raw they read as "□[0m" — the chat shows the text without them
_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x9b[0-?]*[ -/]*[@-~]"
                      r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?")


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (ANSI colours and the like)."""
    return _ANSI_RE.sub("", text) if ("\x1b" in text or "\x9b" in text) else text


def shown_text(content: Any) -> str:
    """A message's content as the chat shows, searches and copies it (terminal escapes removed)."""
    return strip_ansi(content_text(content))

Index = QModelIndex | QPersistentModelIndex


class ChatItem:
    """One row: a message or a compaction marker (plain data)."""

    __slots__ = (
        "event",
        "expanded",
        "height_exact",
        "key",
        "kind",
        "msg",
        "out_of_context",
        "paras",
        "paras_version",
        "reasoning_expanded",
        "streaming",
        "tokens",
        "undoable",
        "version",
    )

    def __init__(
        self,
        kind: str,
        key: str,
        msg: dict[str, Any] | None = None,
        event: CompactionRecord | None = None,
        tokens: int = 0,
    ) -> None:
        self.kind = kind  # "message" | "marker"
        self.key = key
        self.msg = msg
        self.event = event
        self.tokens = tokens
        self.version = 0
        self.expanded = False
        self.reasoning_expanded = False
        self.out_of_context = False
        self.undoable = False
        self.streaming = False
        self.height_exact = False
        self.paras: tuple[int, ...] | None = None
        self.paras_version = -1

    @property
    def role(self) -> str:
        return str((self.msg or {}).get("role") or "")

    def touch(self) -> None:
        self.version += 1
        self.height_exact = False

    def plain_text(self) -> str:
        if self.kind == "marker":
            ev = self.event
            if ev is None:
                return "Compaction (?): 0 → 0 tokens"
            return f"Compaction ({ev.trigger}): {ev.tokens_before} → {ev.tokens_after} tokens"
        msg = self.msg or {}
        text = shown_text(msg.get("content"))
        calls = msg.get("tool_calls") or []
        for c in calls:
            fn = c.get("function") or {}
            text += f"\n[tool call] {fn.get('name', '?')}({fn.get('arguments', '')})"
        return text


class ChatModel(QAbstractListModel):
    """The rows of the conversation. Keeps key → row and call id → (name, arguments) maps."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._items: list[ChatItem] = []
        self._rows: dict[str, int] = {}
        self._calls: dict[str, tuple[str, str]] = {}
        self._results: set[str] = set()
        self.running: set[str] = set()
        # the message rows by their flag: shown in the context (``in_keys``) or out of it (``out_keys``); who sets
        # an item's ``out_of_context`` moves its key (:meth:`set_out`)
        self.in_keys: set[str] = set()
        self.out_keys: set[str] = set()
        self.marker_keys: set[str] = set()  # the compaction markers' rows

    # --- Qt model API
    def rowCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._items)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._items):
            return None
        item = self._items[index.row()]
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.AccessibleTextRole):
            return item.plain_text()
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable

    # --- data API
    def items(self) -> list[ChatItem]:
        return self._items

    def item_at(self, row: int) -> ChatItem:
        return self._items[row]

    def row_of(self, key: str) -> int:
        return self._rows.get(key, -1)

    def item(self, key: str) -> ChatItem | None:
        row = self._rows.get(key, -1)
        return self._items[row] if row >= 0 else None

    def call_info(self, call_id: str) -> tuple[str, str] | None:
        return self._calls.get(call_id)

    def has_result(self, call_id: str) -> bool:
        return call_id in self._results

    def is_running(self, call_id: str) -> bool:
        return call_id in self.running

    def row_of_call(self, call_id: str) -> int:
        """Row of the assistant message that made the call (searched from the end), -1 if none."""
        for i in range(len(self._items) - 1, -1, -1):
            msg = self._items[i].msg
            if msg and msg.get("role") == "assistant":
                for c in msg.get("tool_calls") or ():
                    if isinstance(c, dict) and str(c.get("id") or "") == call_id:
                        return i
        return -1

    def _note(self, msg: dict[str, Any]) -> None:
        for c in msg.get("tool_calls") or ():
            if isinstance(c, dict) and c.get("id"):
                fn = c.get("function") or {}
                self._calls[str(c["id"])] = (str(fn.get("name") or "?"), str(fn.get("arguments") or ""))
        if msg.get("role") == "tool" and msg.get("tool_call_id"):
            self._results.add(str(msg["tool_call_id"]))

    def reset(self, items: list[ChatItem]) -> None:
        self.beginResetModel()
        self._items = items
        self._rows = {it.key: i for i, it in enumerate(items)}
        self._calls = {}
        self._results = set()
        self.running = set()
        self.in_keys = {it.key for it in items if it.kind == "message" and not it.out_of_context}
        self.out_keys = {it.key for it in items if it.kind == "message" and it.out_of_context}
        self.marker_keys = {it.key for it in items if it.kind == "marker"}
        for it in items:
            if it.msg is not None:
                self._note(it.msg)
        self.endResetModel()

    def insert(self, row: int, item: ChatItem) -> None:
        if item.key in self._rows:
            raise ValueError(f"duplicate chat row id {item.key!r}")
        row = max(0, min(row, len(self._items)))
        self.beginInsertRows(QModelIndex(), row, row)
        self._items.insert(row, item)
        if row == len(self._items) - 1:
            self._rows[item.key] = row
        else:
            self._reindex(row)
        if item.msg is not None:
            self._note(item.msg)
        if item.kind == "message":
            (self.out_keys if item.out_of_context else self.in_keys).add(item.key)
        elif item.kind == "marker":
            self.marker_keys.add(item.key)
        self.endInsertRows()

    def remove(self, key: str) -> bool:
        row = self._rows.get(key, -1)
        if row < 0:
            return False
        self.beginRemoveRows(QModelIndex(), row, row)
        del self._items[row]
        del self._rows[key]
        self.in_keys.discard(key)
        self.out_keys.discard(key)
        self.marker_keys.discard(key)
        self._reindex(row)
        self.endRemoveRows()
        return True

    def set_out(self, item: ChatItem, out: bool) -> bool:
        """Flag a message row out of the context (or back in); False when it already was (nothing to draw)."""
        if item.out_of_context == out:
            return False
        item.out_of_context = out
        item.touch()
        (self.in_keys if out else self.out_keys).discard(item.key)
        (self.out_keys if out else self.in_keys).add(item.key)
        return True

    def _reindex(self, start: int) -> None:
        for i in range(start, len(self._items)):
            self._rows[self._items[i].key] = i

    def changed_many(self, keys: list[str]) -> None:
        """As :meth:`changed` for each of ``keys``, told to the views once per run of adjacent rows (a session
        loaded with thousands of messages out of the context: one notice, not thousands)."""
        rows = sorted(r for r in (self._rows.get(k, -1) for k in keys) if r >= 0)
        for row in rows:
            item = self._items[row]
            if item.msg is not None:
                self._note(item.msg)
        start = 0
        for i in range(1, len(rows) + 1):
            if i == len(rows) or rows[i] != rows[i - 1] + 1:
                self.dataChanged.emit(self.index(rows[start], 0), self.index(rows[i - 1], 0))
                start = i

    def changed(self, key: str) -> QModelIndex:
        row = self._rows.get(key, -1)
        if row < 0:
            return QModelIndex()
        item = self._items[row]
        if item.msg is not None:
            self._note(item.msg)
        idx = self.index(row, 0)
        self.dataChanged.emit(idx, idx)
        return idx
