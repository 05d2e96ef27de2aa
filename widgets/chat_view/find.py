"""Find in the conversation: :class:`ChatFinder` searches the rows' plain text (not the laid-out
documents, so 10,000 messages take milliseconds), case-insensitively; :class:`FindMixin` gives
:class:`ChatView` its find API (scroll to a hit, paint all hits lightly and the current one strongly).

A hit is ``(row key, k)``: the k-th occurrence in the row's searched text (:func:`searched_text`). It
holds what the row's documents show, in their order — a message's text; a tool block's arguments
(pretty-printed) and result; an injected attachment's text — then what the row draws as lines and links:
each tool call of an assistant message with its arguments, a tool's name, the subagent and offloaded-file
links. Hits in the documents are painted; the others scroll their row into view."""

from __future__ import annotations

import bisect
from typing import Any

from PySide6.QtCore import QPointF

from widgets.chat_view.layout import RowLayout, is_attachment
from widgets.chat_view.model import ChatItem, ChatModel, shown_text
from widgets.chat_view.selection import Highlight
from widgets.formatting import pretty_arguments

HIT_LIGHT = "#fde68a"
HIT_CURRENT = "#f59e0b"
HIT_LIGHT_DARK = "#715c1a"
HIT_CURRENT_DARK = "#c2740a"


def _link_texts(msg: dict[str, Any]) -> list[str]:
    out: list[str] = []
    sub = msg.get("subagent")
    if isinstance(sub, dict) and sub.get("session"):
        name = str(sub.get("id") or str(sub["session"]).rsplit("/", 1)[-1])
        out.append(f"Open subagent session ({name}, {sub.get('model') or ''})")  # as the link reads
    offload = msg.get("offload")
    if isinstance(offload, dict) and offload.get("path"):
        out.append(f"Open full output {offload['path']}")
    return out


def searched_text(item: ChatItem, model: ChatModel) -> str:
    """What find searches in a row (see the module docstring); "" for a compaction marker."""
    if item.kind != "message":
        return ""
    msg = item.msg or {}
    if item.role == "tool":
        name, arguments = model.call_info(str(msg.get("tool_call_id") or "")) or (str(msg.get("name") or "tool"), "")
        parts = [pretty_arguments(arguments) if arguments else "", shown_text(msg.get("content")), name]
    else:
        parts = [shown_text(msg.get("content"))]
        for call in msg.get("tool_calls") or []:
            fn = call.get("function") or {}
            parts.append(f"{fn.get('name', '?')}({fn.get('arguments') or ''})")
    return "\n".join(p for p in [*parts, *_link_texts(msg)] if p)


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
        text = searched_text(item, self._model).lower()
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


def searched_docs(item: ChatItem, lay: RowLayout) -> list[int]:
    """The documents of a laid-out row that :func:`searched_text` begins with, in order: a tool block's
    (its arguments and its result, when expanded), else the last one (a message's text)."""
    if not lay.docs:
        return []
    return list(range(len(lay.docs))) if item.role == "tool" else [len(lay.docs) - 1]


def doc_hits(item: ChatItem, lay: RowLayout, needle: str) -> list[tuple[int, int, int]]:
    """``(document, start, end)`` of each occurrence of ``needle`` (lower case) in the searched documents."""
    if not needle:
        return []
    out: list[tuple[int, int, int]] = []
    for d in searched_docs(item, lay):
        text = lay.docs[d][1].toPlainText().lower()
        out += [(d, i, i + len(needle)) for i in occurrences(text, needle)]
    return out


def hit_highlights(item: ChatItem, lay: RowLayout, needle: str, current: int,
                   dark: bool) -> dict[int, list[Highlight]]:
    """The find hits of a row to paint: all lightly, the ``current``-th (-1: none) strongly."""
    light, strong = (HIT_LIGHT_DARK, HIT_CURRENT_DARK) if dark else (HIT_LIGHT, HIT_CURRENT)
    marks: dict[int, list[Highlight]] = {}
    for i, (d, s, e) in enumerate(doc_hits(item, lay, needle)):
        marks.setdefault(d, []).append((s, e, strong if i == current else light, None))
    return marks


def hit_y(item: ChatItem, lay: RowLayout, needle: str, k: int) -> float | None:
    """The y (row coordinates) of the line holding the k-th hit (None: not in a document: the row's top)."""
    hits = doc_hits(item, lay, needle)
    if not 0 <= k < len(hits):
        return None
    d, start, _end = hits[k]
    origin, doc = lay.docs[d]
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
        view.scroll_to_hit(key, hit_y(item, view.layouter().layout(item, view.row_width()), self._finder.query.lower(),
                                      k))

    def _find_highlights(self, item: ChatItem, lay: RowLayout, dark: bool) -> dict[int, list[Highlight]]:
        f = self._finder
        if not f.total or not f.row_hits(item.key):
            return {}
        hit = f.hit()
        current = hit[1] if hit is not None and hit[0] == item.key else -1
        return hit_highlights(item, lay, f.query.lower(), current, dark)
