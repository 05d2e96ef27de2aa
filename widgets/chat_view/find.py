"""Find in the conversation: :class:`ChatFinder` searches the rows' plain text (not the laid-out
documents, so 10,000 messages take milliseconds), case-insensitively; :class:`FindMixin` gives
:class:`ChatView` its find API (scroll to a hit, paint all hits lightly and the current one strongly).

A hit is ``(row key, k)``: the k-th occurrence in the row's searched text — the message's content
(what the row's last document shows: the markdown text of a message, the result of a tool call)."""

from __future__ import annotations

import bisect
from typing import Any

from PySide6.QtCore import QPointF

from engine.model.messages import content_text
from widgets.chat_view.layout import RowLayout, is_attachment
from widgets.chat_view.model import ChatItem, ChatModel
from widgets.chat_view.selection import Highlight

HIT_LIGHT = "#fde68a"
HIT_CURRENT = "#f59e0b"
HIT_LIGHT_DARK = "#715c1a"
HIT_CURRENT_DARK = "#c2740a"


def occurrences(text: str, needle: str) -> list[int]:
    """Start offsets of the non-overlapping occurrences of ``needle`` (both lower case) in ``text``."""
    out: list[int] = []
    if not needle:
        return out
    i = text.find(needle)
    while i >= 0:
        out.append(i)
        i = text.find(needle, i + len(needle))
    return out


class ChatFinder:
    """The hits of one query over a :class:`ChatModel`, and which one is current."""

    def __init__(self, model: ChatModel) -> None:
        self._model = model
        self._texts: dict[str, tuple[int, str]] = {}  # key → (version, lower-case text)
        self.query = ""
        self.rows: list[tuple[str, int]] = []  # (key, hits in the row), in row order
        self._starts: list[int] = []  # global index of each row's first hit
        self.total = 0
        self.current = -1
        self._keys: set[str] = set()

    def _text(self, item: ChatItem) -> str:
        cached = self._texts.get(item.key)
        if cached is not None and cached[0] == item.version:
            return cached[1]
        text = content_text((item.msg or {}).get("content")).lower() if item.kind == "message" else ""
        self._texts[item.key] = (item.version, text)
        return text

    def search(self, query: str) -> int:
        """Search ``query`` (case-insensitive); the current hit becomes the first. Returns the count."""
        self.query = query
        needle = query.lower()
        self.rows, self._starts, self.total, self.current = [], [], 0, -1
        self._keys = set()
        if not needle:
            return 0
        for item in self._model.items():
            text = self._text(item)
            n = text.count(needle) if needle in text else 0
            if n:
                self._starts.append(self.total)
                self.rows.append((item.key, n))
                self._keys.add(item.key)
                self.total += n
        if len(self._texts) > 2 * max(1, self._model.rowCount()):
            self._texts.clear()
        self.current = 0 if self.total else -1
        return self.total

    def step(self, forward: bool = True) -> int:
        """Move to the next (or previous) hit, wrapping around; returns the current index."""
        if self.total:
            self.current = (self.current + (1 if forward else -1)) % self.total
        return self.current

    def hit(self, index: int | None = None) -> tuple[str, int] | None:
        """The hit at ``index`` (default: the current one) as ``(row key, k)``."""
        i = self.current if index is None else index
        if not 0 <= i < self.total:
            return None
        r = bisect.bisect_right(self._starts, i) - 1
        key, _n = self.rows[r]
        return key, i - self._starts[r]

    def clear(self) -> None:
        self.search("")

    def row_hits(self, key: str) -> bool:
        return key in self._keys


def doc_hits(lay: RowLayout, needle: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each occurrence of ``needle`` (lower case) in the row's last document."""
    if not lay.docs or not needle:
        return []
    text = lay.docs[-1][1].toPlainText().lower()
    return [(i, i + len(needle)) for i in occurrences(text, needle)]


def hit_highlights(lay: RowLayout, needle: str, current: int, dark: bool) -> dict[int, list[Highlight]]:
    """The find hits of a row to paint: all lightly, the ``current``-th (-1: none) strongly."""
    hits = doc_hits(lay, needle)
    if not hits:
        return {}
    light, strong = (HIT_LIGHT_DARK, HIT_CURRENT_DARK) if dark else (HIT_LIGHT, HIT_CURRENT)
    marks: list[Highlight] = [(s, e, strong if i == current else light, None) for i, (s, e) in enumerate(hits)]
    return {len(lay.docs) - 1: marks}


def hit_y(lay: RowLayout, needle: str, k: int) -> float | None:
    """The y (row coordinates) of the line holding the k-th hit of the row's last document."""
    hits = doc_hits(lay, needle)
    if not hits:
        return None
    start = hits[min(k, len(hits) - 1)][0]
    origin, doc = lay.docs[-1]
    block = doc.findBlock(start)
    rect = doc.documentLayout().blockBoundingRect(block)
    y = rect.top()
    layout = block.layout()
    if layout is not None and layout.lineCount():
        line = layout.lineForTextPosition(start - block.position())
        if line.isValid():
            y += line.y()
    return QPointF(origin).y() + y


class FindMixin:
    """The find API of :class:`ChatView` (see :mod:`widgets.chat_view`)."""

    _finder: ChatFinder

    def find_text(self, query: str, keep: int = -1) -> tuple[int, int]:
        """Search the conversation and show the first hit (or the ``keep``-th, clamped: searching
        again after the conversation changed). Returns ``(current index, count)``."""
        total = self._finder.search(query)
        if keep >= 0 and total:
            self._finder.current = min(keep, total - 1)
        self._show_hit()
        return self._finder.current, self._finder.total

    def find_step(self, forward: bool = True) -> tuple[int, int]:
        self._finder.step(forward)
        self._show_hit()
        return self._finder.current, self._finder.total

    def find_clear(self) -> None:
        self._finder.clear()
        self.viewport().update()  # type: ignore[attr-defined]

    def find_state(self) -> tuple[int, int]:
        return self._finder.current, self._finder.total

    def current_hit(self) -> tuple[str, int] | None:
        return self._finder.hit()

    def _show_hit(self) -> None:
        view: Any = self
        hit = self._finder.hit()
        if hit is None:
            view.viewport().update()
            return
        key, k = hit
        item = view.item(key)
        if item is not None and (item.role == "tool" or is_attachment(item)) and not item.expanded:
            view.set_tool_expanded(key, True)
        view.scroll_to_hit(key, hit_y(view.layouter().layout(item, view.row_width()), self._finder.query.lower(), k))

    def _find_highlights(self, item: ChatItem, lay: RowLayout, dark: bool) -> dict[int, list[Highlight]]:
        f = self._finder
        if not f.total or not f.row_hits(item.key):
            return {}
        hit = f.hit()
        current = hit[1] if hit is not None and hit[0] == item.key else -1
        return hit_highlights(lay, f.query.lower(), current, dark)
