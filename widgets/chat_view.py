"""The conversation: a model/view list with a painting delegate (no widget per message).

Thousands of messages scroll smoothly because a row is only data (:class:`ChatItem`, held by the
:class:`ChatModel` list model) until it is painted: :class:`ChatView` is a virtualised scroll area
that keeps one integer height per row in a Fenwick tree (:class:`HeightIndex`) and asks the
:class:`ChatDelegate` to lay out and paint only the rows on screen (markdown via
:class:`SafeTextDocument`, one cached layout per row in a bounded LRU). Rows never painted have an
estimated height, made exact one page before they scroll into view, so appending, streaming and
scrolling cost O(log n) whatever the length of the conversation.

Rows:
- **user / assistant messages** — a bubble with a header (role, time, flags, tokens) and the text;
  assistant text is markdown, streamed with a throttled redraw; an assistant's tool calls are listed
  under its text; ``reasoning_content`` is a collapsible block.
- **tool results** — a collapsible tool-call block: tool name and arguments, the result as it stands
  in the context (cut), and, when the full output was offloaded, a link that emits
  ``open_offload(path)``.
- **compaction markers** — inline where the compaction happened: trigger, tokens before → after,
  messages compacted / kept, "Open summary" and "Undo" links.

Markdown never loads a resource (no remote or local images, no HTML): see :class:`SafeTextDocument`.

Public API of :class:`ChatView`
-------------------------------
Methods:
    set_messages(messages, tokens_by_id=None, markers=())   replace everything
    append_message(msg, tokens=0)                            O(1); also for a streaming placeholder
    update_message(msg, tokens=None)                         replace a message by its ``id``
    remove_message(message_id)
    stream_delta(message_id, text, reasoning=False)          append streamed text (throttled redraw)
    end_stream(message_id)                                   flush and drop the streaming flag
    set_tokens(tokens_by_id)                                 per-message token counts
    add_compaction_marker(event, undoable=True, after_message_id=None) -> marker id
    update_compaction_marker(marker_id, event=None, undoable=None)
    remove_compaction_marker(marker_id)
    set_out_of_context(message_ids)      shown dimmed with an "archived" tag (no longer sent)
    set_tool_expanded(message_id, expanded)
    set_call_running(call_id, running)   "(running…)" on the call while its tool runs
    scroll_to_message(message_id) / scroll_to_bottom()
    set_palette(palette)
    clear(); flush(); row_count(); message_ids(); marker_ids(); item(key) -> ChatItem | None
    copy_item(key) -> str                copy a row's text to the clipboard
Introspection (tests, accessibility):
    row_rect(key) -> QRectF; visible_keys() -> list[str]; is_at_bottom() -> bool
    hotspots(key) -> [(QRectF, action, payload)]; click(key, local_pos) -> bool
Signals:
    open_offload(str)            path of an offloaded tool result ("tool_results/<hex>.txt")
    summary_requested(dict)      "Open summary" on a compaction marker (the event dict)
    undo_requested(str)          "Undo" on a compaction marker (the marker id)
    link_activated(str)          an http(s) link in a message was clicked (the app decides)
"""

from __future__ import annotations

import json
import math
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

from PySide6.QtCore import (
    QAbstractListModel,
    QEvent,
    QModelIndex,
    QPersistentModelIndex,
    QPointF,
    QRectF,
    QSize,
    Qt,
    QTimer,
    QUrl,
    Signal,
)
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QColor,
    QFont,
    QFontDatabase,
    QFontMetrics,
    QGuiApplication,
    QKeyEvent,
    QKeySequence,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPalette,
    QPen,
    QTextDocument,
    QTextOption,
)
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QFrame,
    QMenu,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from engine.model.messages import content_text, media_count
from widgets.formatting import local_datetime, parse_arguments, pretty_arguments
from widgets.theme import Palette, format_bytes, format_tokens, palette

Index = QModelIndex | QPersistentModelIndex

ITEM_ROLE = Qt.ItemDataRole.UserRole + 1
STREAM_INTERVAL_MS = 80
RESULT_MAX_LINES = 300
RESULT_MAX_CHARS = 30_000
ARGS_MAX_LINES = 80
LAYOUT_CACHE = 400


class SafeTextDocument(QTextDocument):
    """A QTextDocument that loads nothing: every resource request (images, style sheets, any scheme)
    is refused and recorded in ``refused``. Markdown is parsed without raw HTML."""

    MARKDOWN_FEATURES = (
        QTextDocument.MarkdownFeature.MarkdownDialectGitHub | QTextDocument.MarkdownFeature.MarkdownNoHTML
    )

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.refused: list[str] = []

    def loadResource(self, type: int, name: QUrl) -> Any:
        self.refused.append(name.toString())
        return None

    def set_markdown(self, text: str) -> None:
        self.setMarkdown(text, self.MARKDOWN_FEATURES)


class ChatItem:
    """One row: a message or a compaction marker (plain data)."""

    __slots__ = (
        "event",
        "expanded",
        "height",
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
        "width",
    )

    def __init__(
        self,
        kind: str,
        key: str,
        msg: dict[str, Any] | None = None,
        event: dict[str, Any] | None = None,
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
        self.height = 0
        self.height_exact = False
        self.width = 0
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
            ev = self.event or {}
            return (
                f"Compaction ({ev.get('trigger', '?')}): {ev.get('tokens_before', 0)} → "
                f"{ev.get('tokens_after', 0)} tokens"
            )
        msg = self.msg or {}
        text = content_text(msg.get("content"))
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

    # --- Qt model API
    def rowCount(self, parent: Index = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._items)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._items):
            return None
        item = self._items[index.row()]
        if role == ITEM_ROLE:
            return item
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
        self.endInsertRows()

    def remove(self, key: str) -> bool:
        row = self._rows.get(key, -1)
        if row < 0:
            return False
        self.beginRemoveRows(QModelIndex(), row, row)
        del self._items[row]
        del self._rows[key]
        self._reindex(row)
        self.endRemoveRows()
        return True

    def _reindex(self, start: int) -> None:
        for i in range(start, len(self._items)):
            self._rows[self._items[i].key] = i

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


# ------------------------------------------------------------------------------------------- layout
class _Op:
    """One drawing operation of a laid-out row (coordinates relative to the row's top-left)."""

    __slots__ = ("a", "b", "c", "d", "kind")

    def __init__(self, kind: str, a: Any = None, b: Any = None, c: Any = None, d: Any = None) -> None:
        self.kind = kind
        self.a, self.b, self.c, self.d = a, b, c, d


class _RowLayout:
    __slots__ = ("docs", "height", "hotspots", "ops")

    def __init__(self) -> None:
        self.ops: list[_Op] = []
        self.hotspots: list[tuple[QRectF, str, str]] = []  # rect, action, payload
        self.docs: list[tuple[QPointF, QTextDocument]] = []
        self.height = 0


def _time_of(ts: Any) -> str:
    dt = local_datetime(ts)
    return dt.strftime("%H:%M") if dt is not None else ""


def _args_preview(arguments: str, limit: int = 160) -> str:
    data = parse_arguments(arguments)
    if isinstance(data, dict):
        text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in data.items())
    else:
        text = arguments
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cap_lines(text: str, max_lines: int, max_chars: int) -> tuple[str, int]:
    """The first lines of ``text`` and how many lines were left out."""
    if len(text) > max_chars:
        text = text[:max_chars]
        cut_chars = True
    else:
        cut_chars = False
    lines = text.split("\n")
    total = lines
    if len(lines) > max_lines:
        return "\n".join(lines[:max_lines]), len(total) - max_lines + (1 if cut_chars else 0)
    return text, 1 if cut_chars else 0


class ChatDelegate(QStyledItemDelegate):
    """Lays out and paints rows; answers hit tests for links and toggles."""

    PAD = 10
    MARGIN_X = 10
    MARGIN_Y = 4
    ACCENT = 3
    RADIUS = 6.0

    def __init__(self, view: ChatView) -> None:
        super().__init__(view)
        self._view = view
        self._cache: OrderedDict[str, tuple[tuple[Any, ...], _RowLayout]] = OrderedDict()
        self.pal = palette()
        self.set_fonts(view.font())
        self.layouts_built = 0

    # --- fonts and palette
    def set_fonts(self, base: QFont) -> None:
        self.font = QFont(base)
        self.bold = QFont(base)
        self.bold.setBold(True)
        self.small = QFont(base)
        size = base.pointSizeF()
        if size > 0:
            self.small.setPointSizeF(max(7.0, size * 0.88))
        self.small_bold = QFont(self.small)
        self.small_bold.setBold(True)
        self.mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        if size > 0:
            self.mono.setPointSizeF(max(7.0, size * 0.92))
        self.fm = QFontMetrics(self.font)
        self.fm_small = QFontMetrics(self.small)
        self.fm_small_bold = QFontMetrics(self.small_bold)
        self.fm_mono = QFontMetrics(self.mono)
        self.invalidate()

    def set_palette(self, pal: Palette) -> None:
        self.pal = pal
        self.invalidate()

    def invalidate(self) -> None:
        self._cache.clear()

    # --- geometry helpers
    def _bubble_width(self, row_width: int) -> int:
        return max(120, row_width - 2 * self.MARGIN_X)

    def _text_width(self, row_width: int) -> int:
        return max(60, self._bubble_width(row_width) - 2 * self.PAD - self.ACCENT)

    def estimate_height(self, item: ChatItem, row_width: int) -> int:
        """A cheap height for a row not laid out yet; corrected when the row is first painted."""
        if item.kind == "marker" or item.expanded or item.reasoning_expanded:
            return self.layout(item, row_width).height
        msg = item.msg or {}
        if item.paras is None or item.paras_version != item.version:
            if item.role == "tool":
                text = content_text(msg.get("content"))
                item.paras = (text.count("\n") + 1 if text else 0,)
            else:
                text = content_text(msg.get("content"))
                item.paras = tuple(len(par) for par in text.split("\n")[:5000]) if text else ()
            item.paras_version = item.version
        base = 2 * self.MARGIN_Y + 2 * self.PAD + self.fm_small_bold.height()
        if item.role == "tool":
            lines = item.paras[0] if item.paras else 0
            h = base + 4 + self.fm_mono.lineSpacing() * (1 + min(2, lines))
            if lines > 2:
                h += self.fm_small.height()
            if isinstance(msg.get("offload"), dict):
                h += self.fm_small.height() + 4
            return h
        tw = self._text_width(row_width)
        cpl = max(10, int(tw / max(1.0, self.fm.averageCharWidth() * 1.05)))
        lines = sum(max(1, -(-n // cpl)) for n in item.paras)
        h = base + 6 + lines * self.fm.lineSpacing()
        n_calls = len(msg.get("tool_calls") or ())
        h += n_calls * (self.fm_mono.lineSpacing() + 2) + (6 if n_calls else 0)
        if msg.get("reasoning_content"):
            h += self.fm_small.height() + 4
        if media_count(msg.get("content")):
            h += self.fm_small.height() + 2
        return int(h)

    def layout(self, item: ChatItem, row_width: int) -> _RowLayout:
        """The row laid out at ``row_width``; one cached layout per row (LRU of LAYOUT_CACHE rows)."""
        sig = (item.version, row_width, item.expanded, item.reasoning_expanded, item.out_of_context,
               item.undoable, item.streaming)
        cached = self._cache.get(item.key)
        if cached is not None and cached[0] == sig:
            self._cache.move_to_end(item.key)
            return cached[1]
        if item.kind == "marker":
            lay = self._layout_marker(item, row_width)
        elif item.role == "tool":
            lay = self._layout_tool(item, row_width)
        else:
            lay = self._layout_message(item, row_width)
        self.layouts_built += 1
        self._cache[item.key] = (sig, lay)
        self._cache.move_to_end(item.key)
        if len(self._cache) > LAYOUT_CACHE:
            self._cache.popitem(last=False)
        return lay

    def _doc(self, text: str, width: int, *, markdown: bool, mono: bool = False) -> QTextDocument:
        doc = SafeTextDocument()
        doc.setDocumentMargin(0)
        doc.setDefaultFont(self.mono if mono else self.font)
        opt = QTextOption()
        opt.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        doc.setDefaultTextOption(opt)
        if markdown:
            doc.set_markdown(text)
        else:
            doc.setPlainText(text)
        doc.setTextWidth(width)
        return doc

    def _text_line(self, lay: _RowLayout, x: float, y: float, w: float, text: str, font: QFont, color: str,
                   align: Qt.AlignmentFlag = Qt.AlignmentFlag.AlignLeft) -> float:
        fm = QFontMetrics(font)
        elided = fm.elidedText(text, Qt.TextElideMode.ElideRight, int(w))
        lay.ops.append(_Op("text", QRectF(x, y, w, fm.height()), elided, font, (color, align)))
        return fm.horizontalAdvance(elided)

    def _link(self, lay: _RowLayout, x: float, y: float, text: str, action: str, payload: str,
              font: QFont | None = None) -> float:
        font = font or self.small_bold
        fm = QFontMetrics(font)
        w = fm.horizontalAdvance(text) + 2
        rect = QRectF(x, y, w, fm.height())
        f = QFont(font)
        f.setUnderline(True)
        lay.ops.append(_Op("text", rect, text, f, (self.pal.link, Qt.AlignmentFlag.AlignLeft)))
        lay.hotspots.append((rect.adjusted(-3, -2, 3, 2), action, payload))
        return w

    def _bubble_colors(self, role: str) -> tuple[str, str]:
        pal = self.pal
        if role == "user":
            return pal.user_bubble, pal.regions["history_user"]
        if role == "tool":
            return pal.tool_bubble, pal.regions["history_tool"]
        if role == "system":
            return pal.panel, pal.regions["system"]
        return pal.assistant_bubble, pal.regions["history_assistant"]

    def _header(self, lay: _RowLayout, item: ChatItem, x: float, y: float, w: float, title: str) -> float:
        pal = self.pal
        msg = item.msg or {}
        right_parts = []
        if item.tokens:
            right_parts.append(f"{format_tokens(item.tokens)} tok")
        right = " · ".join(right_parts)
        rw = self.fm_small.horizontalAdvance(right) + 4 if right else 0
        tw = self._text_line(lay, x, y, max(10, w - rw - 8), title, self.small_bold, pal.text)
        flags = []
        when = _time_of(msg.get("ts"))
        if when:
            flags.append(when)
        if item.streaming:
            flags.append("streaming…")
        if msg.get("interrupted"):
            flags.append("interrupted")
        if msg.get("pinned"):
            flags.append("pinned")
        if item.out_of_context:
            flags.append("archived — not in the context")
        if flags:
            fx = x + tw + 8
            avail = max(10, w - rw - (fx - x) - 8)
            self._text_line(lay, fx, y, avail, " · ".join(flags), self.small, pal.muted)
        if right:
            lay.ops.append(_Op("text", QRectF(x + w - rw, y, rw, self.fm_small.height()), right, self.small,
                               (pal.muted, Qt.AlignmentFlag.AlignRight)))
        return self.fm_small_bold.height()

    def _frame(self, lay: _RowLayout, item: ChatItem, row_width: int, height: float) -> None:
        bg, accent = self._bubble_colors(item.role)
        bw = self._bubble_width(row_width)
        rect = QRectF(self.MARGIN_X, self.MARGIN_Y, bw, height)
        lay.ops.insert(0, _Op("bubble", rect, bg, accent, self.pal.border))

    def _layout_message(self, item: ChatItem, row_width: int) -> _RowLayout:
        lay = _RowLayout()
        pal = self.pal
        msg = item.msg or {}
        role = item.role
        x = self.MARGIN_X + self.ACCENT + self.PAD
        y = float(self.MARGIN_Y + self.PAD)
        tw = self._text_width(row_width)
        title = {"user": "You", "assistant": "Assistant", "system": "System"}.get(role, role or "?")
        y += self._header(lay, item, x, y, tw, title) + 6
        reasoning = msg.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            glyph = "▾" if item.reasoning_expanded else "▸"
            label = f"{glyph} Reasoning ({len(reasoning):,} characters)"
            w = self._link(lay, x, y, label, "reasoning", item.key, self.small)
            del w
            y += self.fm_small.height() + 4
            if item.reasoning_expanded:
                text, more = _cap_lines(reasoning, RESULT_MAX_LINES, RESULT_MAX_CHARS)
                if more:
                    text += f"\n… {more:,} more lines"
                doc = self._doc(text, tw, markdown=False)
                doc.setDefaultFont(self.small)
                doc.setTextWidth(tw)
                lay.docs.append((QPointF(x, y), doc))
                lay.ops.append(_Op("doc", QPointF(x, y), doc, pal.muted))
                y += doc.size().height() + 6
        text = content_text(msg.get("content"))
        if text:
            doc = self._doc(text, tw, markdown=(role != "user"))
            lay.docs.append((QPointF(x, y), doc))
            lay.ops.append(_Op("doc", QPointF(x, y), doc, pal.text))
            y += doc.size().height()
        elif not msg.get("tool_calls") and not reasoning:
            placeholder = "…" if item.streaming else "(empty)"
            self._text_line(lay, x, y, tw, placeholder, self.font, pal.muted)
            y += self.fm.height()
        n_media = media_count(msg.get("content"))
        if n_media:
            y += 2
            self._text_line(lay, x, y, tw, f"[{n_media} attachment{'s' if n_media > 1 else ''} not shown]",
                            self.small, pal.muted)
            y += self.fm_small.height()
        calls = msg.get("tool_calls") or []
        if calls:
            y += 6
            model = self._view.chat_model()
            for c in calls:
                fn = c.get("function") or {}
                cid = str(c.get("id") or "")
                status = ""
                if model.is_running(cid):
                    status = "  (running…)"
                elif not model.has_result(cid):
                    status = "  (waiting…)" if item.streaming else "  (no result)"
                line = f"⚙ {fn.get('name', '?')}({_args_preview(str(fn.get('arguments') or ''))}){status}"
                self._text_line(lay, x, y, tw, line, self.mono, pal.muted)
                y += self.fm_mono.lineSpacing() + 2
        y += self.PAD
        lay.height = math.ceil(y + self.MARGIN_Y)
        self._frame(lay, item, row_width, y - self.MARGIN_Y)
        return lay

    def _layout_tool(self, item: ChatItem, row_width: int) -> _RowLayout:
        lay = _RowLayout()
        pal = self.pal
        msg = item.msg or {}
        model = self._view.chat_model()
        call_id = str(msg.get("tool_call_id") or "")
        name, arguments = model.call_info(call_id) or (str(msg.get("name") or "tool"), "")
        x = self.MARGIN_X + self.ACCENT + self.PAD
        y = float(self.MARGIN_Y + self.PAD)
        tw = self._text_width(row_width)
        result = content_text(msg.get("content"))
        n_lines = result.count("\n") + 1 if result else 0
        glyph = "▾" if item.expanded else "▸"
        right = f"{format_bytes(len(result.encode('utf-8', 'replace')))} · {n_lines:,} lines"
        if item.tokens:
            right += f" · {format_tokens(item.tokens)} tok"
        rw = self.fm_small.horizontalAdvance(right) + 4
        title = f"{glyph} ⚙ {name}"
        head_w = max(10, tw - rw - 8)
        adv = self._text_line(lay, x, y, head_w, title, self.small_bold, pal.text)
        flags = [f for f in (_time_of(msg.get("ts")), "archived — not in the context" if item.out_of_context
                             else "") if f]
        if flags and adv + 20 < head_w:
            self._text_line(lay, x + adv + 8, y, head_w - adv - 8, " · ".join(flags), self.small, pal.muted)
        lay.ops.append(_Op("text", QRectF(x + tw - rw, y, rw, self.fm_small.height()), right, self.small,
                           (pal.muted, Qt.AlignmentFlag.AlignRight)))
        lay.hotspots.append((QRectF(x - self.PAD, y - 4, tw - rw, self.fm_small_bold.height() + 8), "toggle",
                             item.key))
        y += self.fm_small_bold.height() + 4
        offload = msg.get("offload") if isinstance(msg.get("offload"), dict) else None
        if offload and offload.get("path"):
            size = format_bytes(offload.get("bytes")) if offload.get("bytes") is not None else "?"
            lines = offload.get("lines")
            note = f"✂ cut in the context · full output {size}"
            if lines:
                note += f", {int(lines):,} lines"
            adv = self._text_line(lay, x, y, tw, note, self.small, pal.warning)
            lx = x + adv + 10
            if lx + 60 > x + tw:
                y += self.fm_small.height() + 2
                lx = x
            self._link(lay, lx, y, "Open full output", "offload", str(offload["path"]), self.small_bold)
            y += self.fm_small.height() + 4
        if not item.expanded:
            args_line = _args_preview(arguments)
            if args_line:
                self._text_line(lay, x, y, tw, f"args: {args_line}", self.mono, pal.muted)
                y += self.fm_mono.lineSpacing()
            first = [ln for ln in result.split("\n", 3)[:2]]
            for ln in first:
                self._text_line(lay, x, y, tw, ln if ln else " ", self.mono, pal.text)
                y += self.fm_mono.lineSpacing()
            if n_lines > 2:
                self._text_line(lay, x, y, tw, f"… {n_lines - 2:,} more lines (click the header to expand)",
                                self.small, pal.muted)
                y += self.fm_small.height()
        else:
            if arguments:
                self._text_line(lay, x, y, tw, "Arguments", self.small_bold, pal.muted)
                y += self.fm_small_bold.height() + 2
                text, more = _cap_lines(pretty_arguments(arguments), ARGS_MAX_LINES, RESULT_MAX_CHARS)
                if more:
                    text += f"\n… {more:,} more lines"
                doc = self._doc(text, tw - 12, markdown=False, mono=True)
                h = doc.size().height()
                lay.ops.append(_Op("codebg", QRectF(x, y, tw, h + 8), pal.background, pal.border))
                lay.docs.append((QPointF(x + 6, y + 4), doc))
                lay.ops.append(_Op("doc", QPointF(x + 6, y + 4), doc, pal.text))
                y += h + 14
            self._text_line(lay, x, y, tw, "Result (as sent in the context)", self.small_bold, pal.muted)
            y += self.fm_small_bold.height() + 2
            text, more = _cap_lines(result.rstrip("\n"), RESULT_MAX_LINES, RESULT_MAX_CHARS)
            if more:
                text += f"\n… {more:,} more lines not shown here"
            doc = self._doc(text or "(empty result)", tw - 12, markdown=False, mono=True)
            h = doc.size().height()
            lay.ops.append(_Op("codebg", QRectF(x, y, tw, h + 8), pal.background, pal.border))
            lay.docs.append((QPointF(x + 6, y + 4), doc))
            lay.ops.append(_Op("doc", QPointF(x + 6, y + 4), doc, pal.text))
            y += h + 8
        y += self.PAD
        lay.height = math.ceil(y + self.MARGIN_Y)
        self._frame(lay, item, row_width, y - self.MARGIN_Y)
        return lay

    def _layout_marker(self, item: ChatItem, row_width: int) -> _RowLayout:
        lay = _RowLayout()
        pal = self.pal
        ev = item.event or {}
        bw = self._bubble_width(row_width)
        inner = bw - 2 * self.PAD
        x = self.MARGIN_X + self.PAD
        y = float(self.MARGIN_Y + 8)
        result = str(ev.get("result") or "")
        trigger = str(ev.get("trigger") or "?")
        title = f"⟲ Compaction · {trigger}" + (f" · {result}" if result else "")
        color = pal.error if result == "failed" else pal.marker
        self._text_line(lay, x, y, inner, title, self.small_bold, color, Qt.AlignmentFlag.AlignHCenter)
        y += self.fm_small_bold.height() + 2
        before = int(ev.get("tokens_before") or 0)
        after = int(ev.get("tokens_after") or 0)
        change = f" ({(after - before) / before * 100:+.0f}%)" if before else ""
        dur = float(ev.get("duration_ms") or 0) / 1000
        line = (
            f"{format_tokens(before)} → {format_tokens(after)} tokens{change} · "
            f"{int(ev.get('messages_compacted') or 0):,} messages compacted, "
            f"{int(ev.get('messages_kept') or 0):,} kept · {dur:.1f} s"
        )
        self._text_line(lay, x, y, inner, line, self.small, pal.text, Qt.AlignmentFlag.AlignHCenter)
        y += self.fm_small.height() + 2
        if ev.get("reason"):
            self._text_line(lay, x, y, inner, str(ev["reason"]), self.small,
                            pal.error if result == "failed" else pal.muted, Qt.AlignmentFlag.AlignHCenter)
            y += self.fm_small.height() + 2
        links: list[tuple[str, str]] = []
        if ev.get("summary"):
            links.append(("Open summary", "summary"))
        if item.undoable and result not in ("undone", "failed", "nothing"):
            links.append(("Undo", "undo"))
        if links:
            fm = QFontMetrics(self.small_bold)
            widths = [fm.horizontalAdvance(t) + 2 for t, _ in links]
            total = sum(widths) + 24 * (len(links) - 1)
            lx = x + (inner - total) / 2
            for (text, action), w in zip(links, widths, strict=True):
                self._link(lay, lx, y, text, action, item.key)
                lx += w + 24
            y += self.fm_small_bold.height() + 2
        y += 8
        lay.height = math.ceil(y + self.MARGIN_Y)
        rect = QRectF(self.MARGIN_X, self.MARGIN_Y, bw, y - self.MARGIN_Y)
        lay.ops.insert(0, _Op("marker", rect, color, pal.background))
        return lay

    # --- painting
    def paint_row(
        self, painter: QPainter, top_left: QPointF, item: ChatItem, row_width: int, selected: bool
    ) -> None:
        lay = self.layout(item, row_width)
        painter.save()
        painter.translate(top_left)
        if item.out_of_context and item.kind == "message":
            painter.setOpacity(0.55)
        self._replay(painter, lay, selected)
        painter.restore()

    # --- QStyledItemDelegate API (so the delegate also works in a stock QListView)
    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:
        item: ChatItem = index.data(ITEM_ROLE)
        width = max(200, option.rect.width()) if option.rect.width() > 0 else self._view.row_width()
        if item is None:
            return QSize(width, 0)
        return QSize(width, self.layout(item, width).height)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        item: ChatItem = index.data(ITEM_ROLE)
        if item is not None:
            selected = bool(option.state & QStyle.StateFlag.State_Selected)
            self.paint_row(painter, QPointF(option.rect.topLeft()), item, option.rect.width(), selected)

    def _replay(self, p: QPainter, lay: _RowLayout, selected: bool) -> None:
        pal = self.pal
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        p.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
        for op in lay.ops:
            if op.kind == "bubble":
                rect: QRectF = op.a
                p.setPen(QPen(QColor(pal.link if selected else op.d), 1.5 if selected else 1.0))
                p.setBrush(QColor(op.b))
                p.drawRoundedRect(rect.adjusted(0.5, 0.5, -0.5, -0.5), self.RADIUS, self.RADIUS)
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(QColor(op.c))
                accent = QRectF(rect.left() + 1, rect.top() + 1, self.ACCENT + 2, rect.height() - 2)
                p.drawRoundedRect(accent, 2, 2)
            elif op.kind == "marker":
                rect = op.a
                color = QColor(op.b)
                line = QColor(color)
                line.setAlpha(140)
                p.setPen(QPen(line, 1.0, Qt.PenStyle.DashLine))
                mid = rect.top() + rect.height() / 2
                p.drawLine(QPointF(rect.left(), mid), QPointF(rect.right(), mid))
                fill = QColor(color)
                fill.setAlpha(28)
                inner = rect.adjusted(rect.width() * 0.08, 0, -rect.width() * 0.08, 0)
                p.setPen(QPen(line, 1.0))
                p.setBrush(QColor(op.c))
                p.drawRoundedRect(inner, self.RADIUS, self.RADIUS)
                p.setBrush(fill)
                p.drawRoundedRect(inner, self.RADIUS, self.RADIUS)
            elif op.kind == "codebg":
                p.setPen(QPen(QColor(op.c), 1.0))
                p.setBrush(QColor(op.b))
                p.drawRoundedRect(op.a.adjusted(0.5, 0.5, -0.5, -0.5), 4, 4)
            elif op.kind == "text":
                color, align = op.d
                p.setFont(op.c)
                p.setPen(QColor(color))
                flags = int(align | Qt.AlignmentFlag.AlignVCenter) | int(Qt.TextFlag.TextSingleLine)
                p.drawText(op.a, flags, op.b)
            elif op.kind == "doc":
                doc: QTextDocument = op.b
                p.save()
                p.translate(op.a)
                ctx = QAbstractTextDocumentLayout.PaintContext()
                qp = QPalette(ctx.palette)
                qp.setColor(QPalette.ColorRole.Text, QColor(op.c))
                qp.setColor(QPalette.ColorRole.Link, QColor(pal.link))
                ctx.palette = qp
                doc.documentLayout().draw(p, ctx)
                p.restore()

    def hit(self, item: ChatItem, row_width: int, pos: QPointF) -> tuple[str, str] | None:
        lay = self.layout(item, row_width)
        for rect, action, payload in lay.hotspots:
            if rect.contains(pos):
                return action, payload
        for origin, doc in lay.docs:
            anchor = doc.documentLayout().anchorAt(pos - origin)
            if anchor:
                return "link", anchor
        return None


# --------------------------------------------------------------------------------------------- view
class HeightIndex:
    """Row heights with O(log n) prefix sums, point updates, appends and offset → row search (Fenwick)."""

    def __init__(self, heights: Iterable[int] = ()) -> None:
        self.reset(heights)

    def reset(self, heights: Iterable[int]) -> None:
        self.a = [max(1, int(h)) for h in heights]
        n = len(self.a)
        t = [0] * (n + 1)
        for i in range(1, n + 1):
            t[i] += self.a[i - 1]
            j = i + (i & -i)
            if j <= n:
                t[j] += t[i]
        self.t = t

    def __len__(self) -> int:
        return len(self.a)

    def prefix(self, i: int) -> int:
        """Sum of the first ``i`` heights (the top of row ``i``)."""
        s = 0
        t = self.t
        while i > 0:
            s += t[i]
            i -= i & -i
        return s

    def total(self) -> int:
        return self.prefix(len(self.a))

    def set(self, row: int, height: int) -> int:
        """Set a row's height; returns the change."""
        height = max(1, int(height))
        d = height - self.a[row]
        if d:
            self.a[row] = height
            i = row + 1
            n = len(self.a)
            t = self.t
            while i <= n:
                t[i] += d
                i += i & -i
        return d

    def append(self, height: int) -> None:
        height = max(1, int(height))
        self.a.append(height)
        i = len(self.a)
        self.t.append(height + self.prefix(i - 1) - self.prefix(i - (i & -i)))

    def find(self, y: int) -> int:
        """The row that contains offset ``y`` (clamped to the rows that exist)."""
        n = len(self.a)
        if n == 0:
            return 0
        pos = 0
        rem = y
        step = 1 << n.bit_length()
        t = self.t
        while step:
            nxt = pos + step
            if nxt <= n and t[nxt] <= rem:
                pos = nxt
                rem -= t[nxt]
            step >>= 1
        return min(pos, n - 1)


class ChatView(QAbstractScrollArea):
    """The conversation view (see the module docstring for the API).

    A virtualised list: it keeps one integer per row in a :class:`HeightIndex` and paints only the
    rows in the viewport through :class:`ChatDelegate`, so appending to or streaming into a long
    conversation costs O(log n), not a relayout of every row.
    """

    open_offload = Signal(str)
    summary_requested = Signal(dict)
    undo_requested = Signal(str)
    link_activated = Signal(str)

    def __init__(self, parent: QWidget | None = None, pal: Palette | None = None) -> None:
        super().__init__(parent)
        self._model = ChatModel(self)
        self._delegate = ChatDelegate(self)
        self._heights = HeightIndex()
        self._width = self.row_width()
        self._current: str | None = None
        self._stick = True
        self._adjusting = False
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.viewport().setMouseTracking(True)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._on_context_menu)
        self.verticalScrollBar().setSingleStep(40)
        self.verticalScrollBar().valueChanged.connect(self._on_scrolled)
        self._model.modelReset.connect(self._on_reset)
        self._model.rowsInserted.connect(self._on_rows_inserted)
        self._model.rowsRemoved.connect(self._on_rows_removed)
        self._model.dataChanged.connect(self._on_data_changed)
        self._stream_buffers: dict[str, list[tuple[str, bool]]] = {}
        self._stream_timer = QTimer(self)
        self._stream_timer.setSingleShot(True)
        self._stream_timer.setInterval(STREAM_INTERVAL_MS)
        self._stream_timer.timeout.connect(self.flush)
        self._resize_timer = QTimer(self)
        self._resize_timer.setSingleShot(True)
        self._resize_timer.setInterval(60)
        self._resize_timer.timeout.connect(self._remeasure_all)
        self._marker_seq = 0
        self.paints = 0
        self.set_palette(pal or palette())

    # --- helpers
    def chat_model(self) -> ChatModel:
        return self._model

    def delegate(self) -> ChatDelegate:
        return self._delegate

    def heights(self) -> HeightIndex:
        return self._heights

    def row_width(self) -> int:
        return max(200, self.viewport().width())

    def row_count(self) -> int:
        return self._model.rowCount()

    def message_ids(self) -> list[str]:
        return [it.key for it in self._model.items() if it.kind == "message"]

    def item(self, key: str) -> ChatItem | None:
        return self._model.item(key)

    def current_key(self) -> str | None:
        return self._current

    def set_palette(self, pal: Palette) -> None:
        self._pal = pal
        self._delegate.set_palette(pal)
        self.viewport().update()

    def row_rect(self, key: str) -> QRectF:
        """The row's rectangle in viewport coordinates (may be outside the viewport)."""
        row = self._model.row_of(key)
        if row < 0:
            return QRectF()
        top = self._heights.prefix(row) - self.verticalScrollBar().value()
        return QRectF(0, top, self.row_width(), self._heights.a[row])

    def visible_keys(self) -> list[str]:
        out = []
        items = self._model.items()
        if not items:
            return out
        y0 = self.verticalScrollBar().value()
        row = self._heights.find(y0)
        y = self._heights.prefix(row)
        while row < len(items) and y < y0 + self.viewport().height():
            out.append(items[row].key)
            y += self._heights.a[row]
            row += 1
        return out

    # --- data API
    def _message_item(self, msg: dict[str, Any], tokens: int) -> ChatItem:
        key = str(msg.get("id") or uuid.uuid4().hex)
        if not msg.get("id"):
            msg = {**msg, "id": key}
        return ChatItem("message", key, msg=msg, tokens=int(tokens or 0))

    def set_messages(
        self,
        messages: Sequence[dict[str, Any]],
        tokens_by_id: dict[str, int] | None = None,
        markers: Iterable[dict[str, Any]] = (),
    ) -> None:
        """Replace the conversation. ``markers`` are compaction event dicts placed by timestamp."""
        tokens_by_id = tokens_by_id or {}
        self._stream_timer.stop()
        self._stream_buffers.clear()
        items: list[ChatItem] = []
        seen: set[str] = set()
        for msg in messages:
            if msg.get("role") == "system":
                continue
            it = self._message_item(msg, tokens_by_id.get(str(msg.get("id")), 0))
            if it.key in seen:
                it.key = f"{it.key}#{len(items)}"
            seen.add(it.key)
            items.append(it)
        for ev in markers:
            mk = self._marker_item(ev, undoable=False)
            if mk.key in seen:
                continue
            seen.add(mk.key)
            items.insert(self._position_by_ts(items, ev.get("ts")), mk)
        self._current = None
        self._model.reset(items)
        self.scroll_to_bottom()

    def append_message(self, msg: dict[str, Any], tokens: int = 0) -> str:
        """Append one message and return its id: O(log n), no other row is measured."""
        if msg.get("role") == "system":
            return str(msg.get("id") or "")
        it = self._message_item(msg, tokens)
        if self._model.item(it.key) is not None:
            self.update_message(it.msg or msg, tokens)
            return it.key
        self._model.insert(self._model.rowCount(), it)
        self._refresh_calls_of(it)
        return it.key

    def update_message(self, msg: dict[str, Any], tokens: int | None = None) -> None:
        """Replace the message with the same ``id`` (appends it when unknown)."""
        key = str(msg.get("id") or "")
        it = self._model.item(key)
        if it is None:
            self.append_message(msg, tokens or 0)
            return
        self._stream_buffers.pop(key, None)  # the final message supersedes streamed text
        it.streaming = False
        it.msg = msg
        if tokens is not None:
            it.tokens = int(tokens)
        it.touch()
        self._model.changed(key)
        self._refresh_calls_of(it)

    def remove_message(self, message_id: str) -> bool:
        self._stream_buffers.pop(message_id, None)
        return self._model.remove(message_id)

    def stream_delta(self, message_id: str, text: str, reasoning: bool = False) -> None:
        """Append streamed text to an assistant message (created if unknown); redraw is throttled."""
        if self._model.item(message_id) is None:
            it = ChatItem("message", message_id, msg={"role": "assistant", "content": "", "id": message_id})
            it.streaming = True
            self._model.insert(self._model.rowCount(), it)
        self._stream_buffers.setdefault(message_id, []).append((text, reasoning))
        if not self._stream_timer.isActive():
            self._stream_timer.start()

    def end_stream(self, message_id: str) -> None:
        """Apply what is buffered and drop the 'streaming' flag of the message."""
        self.flush()
        it = self._model.item(message_id)
        if it is not None and it.streaming:
            it.streaming = False
            it.touch()
            self._model.changed(message_id)

    def flush(self) -> None:
        """Apply buffered stream deltas now."""
        self._stream_timer.stop()
        buffers, self._stream_buffers = self._stream_buffers, {}
        for key, parts in buffers.items():
            it = self._model.item(key)
            if it is None or it.msg is None:
                continue
            msg = dict(it.msg)
            text = "".join(t for t, r in parts if not r)
            reasoning = "".join(t for t, r in parts if r)
            if text:
                content = msg.get("content")
                msg["content"] = (content if isinstance(content, str) else content_text(content)) + text
            if reasoning:
                msg["reasoning_content"] = str(msg.get("reasoning_content") or "") + reasoning
            it.msg = msg
            it.streaming = True
            it.touch()
            self._model.changed(key)

    def set_tokens(self, tokens_by_id: dict[str, int]) -> None:
        for key, tokens in tokens_by_id.items():
            it = self._model.item(key)
            if it is not None and it.tokens != tokens:
                it.tokens = int(tokens)
                it.touch()
                self._model.changed(key)

    def set_out_of_context(self, message_ids: Iterable[str]) -> None:
        ids = set(message_ids)
        for it in self._model.items():
            if it.kind != "message":
                continue
            flag = it.key in ids
            if it.out_of_context != flag:
                it.out_of_context = flag
                it.touch()
                self._model.changed(it.key)

    def set_call_running(self, call_id: str, running: bool) -> None:
        """Mark a tool call as running (ToolCallStarted) or done (ToolCallFinished)."""
        model = self._model
        if running == (call_id in model.running):
            return
        if running:
            model.running.add(call_id)
        else:
            model.running.discard(call_id)
        row = model.row_of_call(call_id)
        if row >= 0:
            item = model.item_at(row)
            item.touch()
            model.changed(item.key)

    def set_tool_expanded(self, message_id: str, expanded: bool) -> None:
        it = self._model.item(message_id)
        if it is not None and it.expanded != expanded:
            it.expanded = expanded
            it.touch()
            self._model.changed(message_id)

    # --- markers
    def _marker_item(self, event: dict[str, Any], undoable: bool) -> ChatItem:
        key = str(event.get("id") or "")
        if not key:
            self._marker_seq += 1
            key = f"compaction-{self._marker_seq}-{uuid.uuid4().hex[:8]}"
        it = ChatItem("marker", key, event=dict(event))
        it.undoable = undoable
        return it

    @staticmethod
    def _position_by_ts(items: Sequence[ChatItem], ts: Any) -> int:
        if not isinstance(ts, str) or not ts:
            return len(items)
        for i in range(len(items) - 1, -1, -1):
            it = items[i]
            other = (it.msg or {}).get("ts") if it.kind == "message" else (it.event or {}).get("ts")
            if isinstance(other, str) and other <= ts:
                return i + 1
        return 0 if items and isinstance((items[0].msg or {}).get("ts"), str) else len(items)

    def add_compaction_marker(
        self, event: dict[str, Any], undoable: bool = True, after_message_id: str | None = None
    ) -> str:
        """Insert a compaction marker (after ``after_message_id``, else at the end); returns its id."""
        it = self._marker_item(event, undoable)
        if self._model.item(it.key) is not None:
            self.update_compaction_marker(it.key, event, undoable)
            return it.key
        if after_message_id is not None and self._model.row_of(after_message_id) >= 0:
            row = self._model.row_of(after_message_id) + 1
        else:
            row = self._model.rowCount()
        self._model.insert(row, it)
        return it.key

    def update_compaction_marker(
        self, marker_id: str, event: dict[str, Any] | None = None, undoable: bool | None = None
    ) -> None:
        it = self._model.item(marker_id)
        if it is None or it.kind != "marker":
            return
        if event is not None:
            it.event = dict(event)
        if undoable is not None:
            it.undoable = undoable
        it.touch()
        self._model.changed(marker_id)

    def remove_compaction_marker(self, marker_id: str) -> bool:
        it = self._model.item(marker_id)
        if it is None or it.kind != "marker":
            return False
        return self._model.remove(marker_id)

    def marker_ids(self) -> list[str]:
        return [it.key for it in self._model.items() if it.kind == "marker"]

    # --- scrolling
    def scroll_to_message(self, message_id: str) -> bool:
        row = self._model.row_of(message_id)
        if row < 0:
            return False
        self._measure(row, exact=True)
        self._stick = False
        self._current = message_id
        self._set_scroll(self._heights.prefix(row))
        self.viewport().update()
        return True

    def scroll_to_bottom(self) -> None:
        self._stick = True
        self._update_scrollbar()
        sb = self.verticalScrollBar()
        self._set_scroll(sb.maximum())
        self.viewport().update()

    def is_at_bottom(self) -> bool:
        sb = self.verticalScrollBar()
        return sb.value() >= sb.maximum() - 4

    def clear(self) -> None:
        self.set_messages([])

    # --- model → heights
    def _measure(self, row: int, exact: bool) -> int:
        """Re-measure a row and update the index; keeps the first visible row in place."""
        item = self._model.item_at(row)
        width = self.row_width()
        if exact:
            h = self._delegate.layout(item, width).height
            item.height_exact = True
            item.width = width
        else:
            h = self._delegate.estimate_height(item, width)
        old_top = self._heights.prefix(row)
        delta = self._heights.set(row, h)
        if delta:
            sb = self.verticalScrollBar()
            self._update_scrollbar()
            if self._stick:
                self._set_scroll(sb.maximum())
            elif old_top + max(h - delta, 1) <= sb.value():
                # the row is above the viewport: keep what the user is reading where it is
                self._set_scroll(sb.value() + delta)
        return h

    def _on_reset(self) -> None:
        width = self.row_width()
        self._width = width
        self._heights.reset(self._delegate.estimate_height(it, width) for it in self._model.items())
        self._update_scrollbar()
        self.viewport().update()

    def _on_rows_inserted(self, _parent: QModelIndex, first: int, last: int) -> None:
        width = self.row_width()
        items = self._model.items()
        if first == len(self._heights):
            for r in range(first, last + 1):
                self._heights.append(self._delegate.estimate_height(items[r], width))
        else:
            a = self._heights.a
            new = [self._delegate.estimate_height(items[r], width) for r in range(first, last + 1)]
            self._heights.reset(a[:first] + new + a[first:])
        self._update_scrollbar()
        if self._stick:
            self._set_scroll(self.verticalScrollBar().maximum())
        self.viewport().update()

    def _on_rows_removed(self, _parent: QModelIndex, first: int, last: int) -> None:
        a = self._heights.a
        self._heights.reset(a[:first] + a[last + 1:])
        if self._current is not None and self._model.item(self._current) is None:
            self._current = None
        self._update_scrollbar()
        self.viewport().update()

    def _on_data_changed(self, top: QModelIndex, bottom: QModelIndex, _roles: Any = None) -> None:
        for row in range(top.row(), bottom.row() + 1):
            if not 0 <= row < len(self._heights):
                continue
            item = self._model.item_at(row)
            visible = self._row_visible(row)
            self._measure(row, exact=visible or item.height_exact)
        self.viewport().update()

    def _row_visible(self, row: int) -> bool:
        y0 = self.verticalScrollBar().value()
        top = self._heights.prefix(row)
        return top < y0 + self.viewport().height() and top + self._heights.a[row] > y0

    def _remeasure_all(self) -> None:
        width = self.row_width()
        if width == self._width:
            return
        anchor_row = self._heights.find(self.verticalScrollBar().value()) if len(self._heights) else 0
        self._width = width
        self._delegate.invalidate()
        self._heights.reset(self._delegate.estimate_height(it, width) for it in self._model.items())
        self._update_scrollbar()
        if self._stick:
            self._set_scroll(self.verticalScrollBar().maximum())
        elif len(self._heights):
            self._set_scroll(self._heights.prefix(anchor_row))
        self.viewport().update()

    def _update_scrollbar(self) -> None:
        sb = self.verticalScrollBar()
        vh = self.viewport().height()
        self._adjusting = True
        try:
            sb.setRange(0, max(0, self._heights.total() - vh))
            sb.setPageStep(max(1, vh))
        finally:
            self._adjusting = False

    def _set_scroll(self, value: int) -> None:
        sb = self.verticalScrollBar()
        self._adjusting = True
        try:
            sb.setValue(value)
        finally:
            self._adjusting = False

    def _on_scrolled(self, _value: int) -> None:
        if not self._adjusting:
            self._stick = self.is_at_bottom()
        self.viewport().update()

    def _refresh_calls_of(self, it: ChatItem) -> None:
        """A tool result arrived: the assistant row that made the call drops its '(no result)' note."""
        msg = it.msg or {}
        if msg.get("role") != "tool":
            return
        cid = str(msg.get("tool_call_id") or "")
        items = self._model.items()
        row = self._model.row_of(it.key)
        for i in range(row - 1, max(-1, row - 200), -1):
            other = items[i]
            if other.kind == "message" and other.role == "assistant":
                if any(str(c.get("id") or "") == cid for c in (other.msg or {}).get("tool_calls") or ()):
                    other.touch()
                    self._model.changed(other.key)
                    break

    # --- painting
    def paintEvent(self, event: QPaintEvent) -> None:
        self.paints += 1
        p = QPainter(self.viewport())
        pal = self._pal
        p.fillRect(self.viewport().rect(), QColor(pal.background))
        items = self._model.items()
        if not items:
            p.setPen(QColor(pal.muted))
            p.drawText(self.viewport().rect(), Qt.AlignmentFlag.AlignCenter, "No messages yet")
            p.end()
            return
        width = self.row_width()
        vh = self.viewport().height()
        sb = self.verticalScrollBar()
        # 1. measure exactly the rows on screen and one page above and below, so that a row is exact
        #    before it scrolls into view. Rows above the viewport shift it: the scroll value follows,
        #    so what the user reads stays in place; the first visible row keeps its top.
        y0 = sb.value()
        first = self._heights.find(y0)
        changed = False
        shift = 0
        for r in range(self._heights.find(max(0, y0 - vh)), first):
            shift += self._exact(items[r], r, width)
        y = self._heights.prefix(first)
        r = first
        while r < len(items) and y < y0 + 2 * vh:
            changed = bool(self._exact(items[r], r, width)) or changed
            y += self._heights.a[r]
            r += 1
        if changed or shift:
            self._update_scrollbar()
            if self._stick:
                self._set_scroll(sb.maximum())
            elif shift:
                self._set_scroll(y0 + shift)
            y0 = sb.value()
        row = self._heights.find(y0)
        # 2. paint
        y = self._heights.prefix(row) - y0
        r = row
        while r < len(items) and y < vh:
            it = items[r]
            self._delegate.paint_row(p, QPointF(0, y), it, width, it.key == self._current)
            y += self._heights.a[r]
            r += 1
        p.end()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._delegate.set_fonts(self.font())
            self._width = -1  # force a re-measure of every row
            self._remeasure_all()

    def _exact(self, item: ChatItem, row: int, width: int) -> int:
        """Lay a row out exactly and store its height; returns the change."""
        h = self._delegate.layout(item, width).height
        item.height_exact = True
        item.width = width
        return self._heights.set(row, h)

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        self._update_scrollbar()
        if self._stick:
            self._set_scroll(self.verticalScrollBar().maximum())
        if self.row_width() != self._width:
            self._resize_timer.start()

    def scrollContentsBy(self, dx: int, dy: int) -> None:
        self.viewport().update()

    # --- input
    def row_at(self, pos: QPointF) -> int:
        if not len(self._heights):
            return -1
        y = self.verticalScrollBar().value() + pos.y()
        if y < 0 or y >= self._heights.total():
            return -1
        return self._heights.find(int(y))

    def _hit_at(self, pos: QPointF) -> tuple[ChatItem, tuple[str, str] | None] | None:
        row = self.row_at(pos)
        if row < 0:
            return None
        item = self._model.item_at(row)
        top = self._heights.prefix(row) - self.verticalScrollBar().value()
        local = QPointF(pos.x(), pos.y() - top)
        return item, self._delegate.hit(item, self.row_width(), local)

    def click(self, key: str, local: QPointF) -> bool:
        """Click at ``local`` (row coordinates) on row ``key``: what a mouse release does (tests)."""
        item = self._model.item(key)
        if item is None:
            return False
        self._current = key
        hit = self._delegate.hit(item, self.row_width(), local)
        if hit is not None:
            self.activate(item, hit[0], hit[1])
        self.viewport().update()
        return hit is not None

    def hotspots(self, key: str) -> list[tuple[QRectF, str, str]]:
        """The clickable areas of a row in row coordinates (tests, accessibility)."""
        item = self._model.item(key)
        if item is None:
            return []
        return list(self._delegate.layout(item, self.row_width()).hotspots)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        event.accept()  # the click is handled on release

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return super().mouseReleaseEvent(event)
        self.setFocus(Qt.FocusReason.MouseFocusReason)
        found = self._hit_at(event.position())
        if found is None:
            return
        item, hit = found
        self._current = item.key
        if hit is not None:
            self.activate(item, hit[0], hit[1])
        self.viewport().update()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        found = self._hit_at(event.position())
        hand = found is not None and found[1] is not None
        self.viewport().setCursor(Qt.CursorShape.PointingHandCursor if hand else Qt.CursorShape.ArrowCursor)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        sb = self.verticalScrollBar()
        key = event.key()
        if event.matches(QKeySequence.StandardKey.Copy) and self._current:
            self.copy_item(self._current)
        elif key == Qt.Key.Key_Home:
            self._stick = False
            sb.setValue(0)
        elif key == Qt.Key.Key_End:
            self.scroll_to_bottom()
        elif key == Qt.Key.Key_PageDown:
            sb.setValue(sb.value() + sb.pageStep())
        elif key == Qt.Key.Key_PageUp:
            sb.setValue(sb.value() - sb.pageStep())
        elif key == Qt.Key.Key_Down:
            sb.setValue(sb.value() + sb.singleStep())
        elif key == Qt.Key.Key_Up:
            sb.setValue(sb.value() - sb.singleStep())
        else:
            super().keyPressEvent(event)

    def activate(self, item: ChatItem, action: str, payload: str) -> None:
        """Carry out a click on a hotspot."""
        if action == "toggle":
            self.set_tool_expanded(item.key, not item.expanded)
        elif action == "reasoning":
            item.reasoning_expanded = not item.reasoning_expanded
            item.touch()
            self._model.changed(item.key)
        elif action == "offload":
            self.open_offload.emit(payload)
        elif action == "summary":
            self.summary_requested.emit(dict(item.event or {}))
        elif action == "undo":
            self.undo_requested.emit(item.key)
        elif action == "link":
            url = QUrl(payload)
            if url.scheme() in ("http", "https"):
                self.link_activated.emit(url.toString())

    def _on_context_menu(self, pos: Any) -> None:
        found = self._hit_at(QPointF(pos))
        if found is None:
            return
        item = found[0]
        menu = QMenu(self)
        menu.addAction("Copy text", lambda: self.copy_item(item.key))
        if item.kind == "message" and item.role == "tool":
            menu.addAction("Collapse" if item.expanded else "Expand",
                           lambda: self.set_tool_expanded(item.key, not item.expanded))
            off = (item.msg or {}).get("offload")
            if isinstance(off, dict) and off.get("path"):
                menu.addAction("Open full output", lambda: self.open_offload.emit(str(off["path"])))
        if item.kind == "marker" and (item.event or {}).get("summary"):
            menu.addAction("Open summary", lambda: self.summary_requested.emit(dict(item.event or {})))
        menu.popup(self.viewport().mapToGlobal(pos))

    def copy_item(self, key: str) -> str:
        it = self._model.item(key)
        text = it.plain_text() if it is not None else ""
        QGuiApplication.clipboard().setText(text)
        return text
