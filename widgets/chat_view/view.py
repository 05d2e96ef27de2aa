"""The conversation view: :class:`ChatView`, a virtualised scroll area over a :class:`ChatModel`.

It keeps one integer height per row in a :class:`HeightIndex` and lays out (:class:`RowLayouter`)
and paints (:func:`paint_row`) only the rows on screen, so appending to or streaming into a long
conversation costs O(log n), not a relayout of every row. See :mod:`widgets.chat_view` for the API.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from PySide6.QtCore import QEvent, QModelIndex, QPointF, QRect, QRectF, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QColor, QGuiApplication, QKeyEvent, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QAbstractScrollArea, QFrame, QMenu, QWidget

from engine.model.messages import content_text
from engine.model.records import CompactionRecord
from widgets.chat_view.find import ChatFinder, FindMixin
from widgets.chat_view.height_index import HeightIndex
from widgets.chat_view.interaction import InteractionMixin
from widgets.chat_view.layout import RowLayout, RowLayouter, is_attachment
from widgets.chat_view.model import ChatItem, ChatModel
from widgets.chat_view.paint import paint_row
from widgets.chat_view.selection import ChatSelection, Highlight
from widgets.theme import Palette, palette

RESIZE_DELAY_MS = 60  # rows are re-measured once a resize settles


class ChatView(InteractionMixin, FindMixin, QAbstractScrollArea):
    """The conversation view (see :mod:`widgets.chat_view` for the API)."""

    open_offload = Signal(str)
    summary_requested = Signal(object)  # the marker's CompactionRecord
    undo_requested = Signal(str)
    link_activated = Signal(str)
    subagent_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None, pal: Palette | None = None) -> None:
        super().__init__(parent)
        self._model = ChatModel(self)
        self._layouter = RowLayouter(self._model, self.font())
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
        self._resize_timer = QTimer(self)
        self._resize_timer.setSingleShot(True)
        self._resize_timer.setInterval(RESIZE_DELAY_MS)
        self._resize_timer.timeout.connect(self._remeasure_all)
        self._marker_seq = 0
        self._painting = False
        self.paints = 0
        self._selection = ChatSelection()
        self._press: QPointF | None = None
        self._dragging = False
        self._triple_until = False
        self._last_menu: QMenu | None = None
        self._finder = ChatFinder(self._model)
        self.set_palette(pal or palette())

    # --- helpers
    def chat_model(self) -> ChatModel:
        return self._model

    def layouter(self) -> RowLayouter:
        return self._layouter

    def row_width(self) -> int:
        return max(200, self.viewport().width())

    def row_count(self) -> int:
        return self._model.rowCount()

    def message_ids(self) -> list[str]:
        return [it.key for it in self._model.items() if it.kind == "message"]

    def item(self, key: str) -> ChatItem | None:
        return self._model.item(key)

    def set_palette(self, pal: Palette) -> None:
        self._pal = pal
        self._layouter.set_palette(pal)
        self.viewport().update()

    def row_rect(self, key: str) -> QRectF:
        """The row's rectangle in viewport coordinates (may be outside the viewport)."""
        row = self._model.row_of(key)
        if row < 0:
            return QRectF()
        top = self._heights.prefix(row) - self.verticalScrollBar().value()
        return QRectF(0, top, self.row_width(), self._heights.a[row])

    def visible_keys(self) -> list[str]:
        out: list[str] = []
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
        markers: Iterable[CompactionRecord] = (),
        placed: Iterable[tuple[CompactionRecord, bool, str | None]] = (),
        live: Collection[str] | None = None,
    ) -> None:
        """Replace the conversation. ``markers`` are compaction records placed by timestamp; ``placed`` are
        (record, undoable, after message id) placed as :meth:`add_compaction_marker` one after the other would
        place them (a session's markers: one reset of the model, not one insertion each); ``live``: the ids in
        the context, every other message shown out of it from the start (as :meth:`set_out_of_context` after)."""
        tokens_by_id = tokens_by_id or {}
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
            items.insert(self._position_by_ts(items, ev.ts), mk)
        self._place_markers(items, placed)
        if live is not None:
            for it in items:
                it.out_of_context = it.kind == "message" and it.key not in live
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
        it.streaming = False
        it.msg = msg
        if tokens is not None:
            it.tokens = int(tokens)
        it.touch()
        self._model.changed(key)
        self._refresh_calls_of(it)

    def remove_message(self, message_id: str) -> bool:
        return self._model.remove(message_id)

    def stream_delta(self, message_id: str, text: str, reasoning: bool = False) -> None:
        """Append streamed text to an assistant message (created if unknown). The text is in the row at
        once; the row is laid out again at the next paint, so however fast deltas come, a long answer
        is laid out at most once per paint (Qt coalesces the update requests), not once per delta."""
        it = self._model.item(message_id)
        if it is None:
            it = ChatItem("message", message_id, msg={"role": "assistant", "content": "", "id": message_id})
            it.streaming = True
            self._model.insert(self._model.rowCount(), it)
        msg = dict(it.msg or {})
        if reasoning:
            msg["reasoning_content"] = str(msg.get("reasoning_content") or "") + text
        else:
            content = msg.get("content")
            msg["content"] = (content if isinstance(content, str) else content_text(content)) + text
        it.msg = msg
        it.streaming = True
        it.touch()
        row = self._model.row_of(message_id)
        if self._row_visible(row):
            self.viewport().update()  # the paint measures the row (rows on screen are measured first)
        else:
            self._measure(row, exact=False)  # off screen: a cheap estimate keeps the scroll range right

    def end_stream(self, message_id: str) -> None:
        """Drop the 'streaming' flag of the message."""
        it = self._model.item(message_id)
        if it is not None and it.streaming:
            it.streaming = False
            it.touch()
            self._model.changed(message_id)

    def flush(self) -> None:
        """Lay out and paint the rows on screen now (what the next turn of the event loop would do)."""
        self.viewport().repaint()

    def set_tokens(self, tokens_by_id: dict[str, int]) -> None:
        for key, tokens in tokens_by_id.items():
            it = self._model.item(key)
            if it is not None and it.tokens != tokens:
                it.tokens = int(tokens)
                it.touch()
                self._model.changed(key)

    def set_out_of_context(self, message_ids: Iterable[str]) -> None:
        ids = set(message_ids)
        self._flag_out_of_context(lambda key: key in ids)

    def set_in_context(self, live_ids: Collection[str]) -> None:
        """Every message not in ``live_ids`` out of the context. The window says it with each context state, a few
        times a second while a session is followed: the rows to flip are found from the rows shown in the context
        and ``live_ids`` (set operations of the context's size), not by a pass over every row (11,000 rows when a
        long session is followed, most of them out of the context)."""
        model = self._model
        live = live_ids if isinstance(live_ids, set | frozenset) else set(live_ids)
        back_in = model.out_keys & live
        gone_out = model.in_keys - live
        flipped = []
        for keys, out in ((back_in, False), (gone_out, True)):
            for key in keys:
                it = model.item(key)
                if it is not None and model.set_out(it, out):
                    flipped.append(key)
        model.changed_many(flipped)

    def _flag_out_of_context(self, out: Callable[[str], bool]) -> None:
        flipped = []
        for it in self._model.items():
            if it.kind == "message" and self._model.set_out(it, out(it.key)):
                flipped.append(it.key)
        self._model.changed_many(flipped)

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
    def _marker_item(self, event: CompactionRecord, undoable: bool) -> ChatItem:
        key = event.id
        if not key:
            self._marker_seq += 1
            key = f"compaction-{self._marker_seq}-{uuid.uuid4().hex[:8]}"
        it = ChatItem("marker", key, event=event)
        it.undoable = undoable
        return it

    def _place_markers(self, items: list[ChatItem],
                       placed: Iterable[tuple[CompactionRecord, bool, str | None]]) -> None:
        by_key = {it.key: it for it in items}
        for event, undoable, after in placed:
            mk = self._marker_item(event, undoable)
            known = by_key.get(mk.key)
            if known is not None:  # as add_compaction_marker: the marker already there is updated
                if known.kind == "marker":
                    known.event, known.undoable = event, undoable
                    known.touch()
                continue
            anchor = by_key.get(after) if after is not None else None
            items.insert(items.index(anchor) + 1 if anchor is not None else len(items), mk)
            by_key[mk.key] = mk

    @staticmethod
    def _position_by_ts(items: Sequence[ChatItem], ts: Any) -> int:
        if not isinstance(ts, str) or not ts:
            return len(items)
        for i in range(len(items) - 1, -1, -1):
            it = items[i]
            other = (it.msg or {}).get("ts") if it.kind == "message" else (it.event.ts if it.event else None)
            if isinstance(other, str) and other <= ts:
                return i + 1
        return 0 if items and isinstance((items[0].msg or {}).get("ts"), str) else len(items)

    def add_compaction_marker(
        self, event: CompactionRecord, undoable: bool = True, after_message_id: str | None = None
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
        self, marker_id: str, event: CompactionRecord | None = None, undoable: bool | None = None
    ) -> None:
        it = self._model.item(marker_id)
        if it is None or it.kind != "marker":
            return
        if event is None and (undoable is None or undoable == it.undoable):
            return  # as drawn (the window says every marker's state with each context state: a few a second)
        if event is not None:
            it.event = event
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
        """The compaction markers' ids in row order (the window asks with every context state: the model's few
        marker keys sorted, not a pass over every row)."""
        model = self._model
        return sorted(model.marker_keys, key=model.row_of)

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
        self._set_scroll(sb.maximum())  # repaints through scrollContentsBy when the value changes

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
            h = self._layouter.layout(item, width).height
            item.height_exact = True
        else:
            h = self._layouter.estimate_height(item, width)
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
        self._selection.clear()
        width = self.row_width()
        self._width = width
        self._heights.reset(self._layouter.estimate_height(it, width) for it in self._model.items())
        self._update_scrollbar()
        self.viewport().update()

    def _on_rows_inserted(self, _parent: QModelIndex, first: int, last: int) -> None:
        self._selection.shift_rows(first, last - first + 1)
        width = self.row_width()
        items = self._model.items()
        if first == len(self._heights):
            for r in range(first, last + 1):
                self._heights.append(self._layouter.estimate_height(items[r], width))
        else:
            a = self._heights.a
            new = [self._layouter.estimate_height(items[r], width) for r in range(first, last + 1)]
            self._heights.reset([*a[:first], *new, *a[first:]])
        at_end = last == len(items) - 1
        if self._stick and at_end:
            self._measure_tail(first, last, width)
        self._update_scrollbar()
        if self._stick:
            self._set_scroll(self.verticalScrollBar().maximum())  # scrolls the pixels (scrollContentsBy)
        if at_end:
            self._update_from(first)
        else:
            self.viewport().update()

    def _measure_tail(self, first: int, last: int, width: int) -> None:
        """New rows at the bottom of a view that sticks to it: lay out exactly the ones that will be on
        screen now, so that the scroll is final before the paint (no second scroll inside it)."""
        items = self._model.items()
        room = 2 * self.viewport().height()
        r = last
        while r >= first and room > 0:
            self._exact(items[r], r, width)
            room -= self._heights.a[r]
            r -= 1

    def _update_from(self, row: int) -> None:
        """Repaint from the top of ``row`` to the bottom of the viewport (rows above it did not move,
        or were moved by a scroll of the pixels)."""
        top = self._heights.prefix(row) - self.verticalScrollBar().value()
        vp = self.viewport()
        if top < vp.height():
            vp.update(QRect(0, max(0, top), vp.width(), vp.height() - max(0, top)))

    def _on_rows_removed(self, _parent: QModelIndex, first: int, last: int) -> None:
        self._selection.shift_rows(first, first - last - 1)
        self._heights.remove(first, last)  # (rows taken from the end, as while following: a few sums made again)
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
        self._update_from(max(0, top.row()))

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
        self._layouter.invalidate()
        self._heights.reset(self._layouter.estimate_height(it, width) for it in self._model.items())
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
        """Paint the rows in the exposed rectangle (after a scroll, Qt moved the other pixels)."""
        self.paints += 1
        self._painting = True
        p = QPainter(self.viewport())
        try:
            self._paint(p, event.rect())
        finally:
            p.end()
            self._painting = False

    def _paint(self, p: QPainter, clip: QRect) -> None:
        pal = self._pal
        p.fillRect(clip, QColor(pal.background))
        items = self._model.items()
        if not items:
            p.setPen(QColor(pal.muted))
            p.drawText(self.viewport().rect(), Qt.AlignmentFlag.AlignCenter, "No messages yet")
            return
        width = self.row_width()
        if self._measure_around_viewport(width) and clip != self.viewport().rect():
            self.viewport().update()  # rows moved: the pixels kept from before are stale
        y0 = self.verticalScrollBar().value()
        row = self._heights.find(y0 + max(0, clip.top()))
        y = self._heights.prefix(row) - y0
        r = row
        while r < len(items) and y <= clip.bottom():
            it = items[r]
            lay = self._layouter.layout(it, width)
            dimmed = it.out_of_context and it.kind == "message"
            paint_row(p, QPointF(0, y), lay, pal, selected=it.key == self._current, dimmed=dimmed,
                      highlights=self._highlights(r, it, lay))
            y += self._heights.a[r]
            r += 1

    def _highlights(self, row: int, item: ChatItem, lay: RowLayout) -> dict[int, list[Highlight]] | None:
        """Find hits and the selection of a row, by document index (None: nothing to mark)."""
        marks = self._find_highlights(item, lay, self._pal.dark)
        ranges = self._selection.ranges(row, lay)
        if ranges:
            qp = self.palette()
            bg = qp.color(QPalette.ColorRole.Highlight).name()
            fg = qp.color(QPalette.ColorRole.HighlightedText).name()
            for i, (start, end) in ranges.items():
                marks.setdefault(i, []).append((start, end, bg, fg))
        return marks or None

    def scroll_to_hit(self, key: str, y: float | None) -> None:
        """Scroll so that row ``key`` — the line at ``y`` in it, if given — is visible."""
        row = self._model.row_of(key)
        if row < 0:
            return
        self._measure(row, exact=True)
        self._stick = False
        top = self._heights.prefix(row)
        vh = self.viewport().height()
        sb = self.verticalScrollBar()
        target = top + (y if y is not None else 0)
        visible = sb.value() <= target and target + 24 <= sb.value() + vh
        if not visible:
            self._set_scroll(int(max(0, target - vh / 3)))
        self.viewport().update()

    def _measure_around_viewport(self, width: int) -> bool:
        """Measure exactly the rows on screen and one page above and below, so that a row is exact
        before it scrolls into view. Rows above the viewport shift it: the scroll value follows, so
        what the user reads stays in place; the first visible row keeps its top. True when rows moved."""
        items = self._model.items()
        vh = self.viewport().height()
        sb = self.verticalScrollBar()
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
        return changed or bool(shift)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._layouter.set_fonts(self.font())
            self._width = -1  # force a re-measure of every row
            self._remeasure_all()

    def _exact(self, item: ChatItem, row: int, width: int) -> int:
        """Lay a row out exactly and store its height; returns the change."""
        h = self._layouter.layout(item, width).height
        item.height_exact = True
        return self._heights.set(row, h)

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        self._layouter.keep_screens(self.viewport().height())  # a few screens of rows kept laid out
        self._update_scrollbar()
        if self._stick:
            self._set_scroll(self.verticalScrollBar().maximum())
        if self.row_width() != self._width:
            self._resize_timer.start()

    def scrollContentsBy(self, dx: int, dy: int) -> None:
        if not self._painting:  # a scroll decided while painting is painted by that paint (_paint)
            self.viewport().scroll(dx, dy)  # move the pixels; Qt repaints only what is exposed

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
        return item, self._layouter.hit(item, self.row_width(), local)

    def click(self, key: str, local: QPointF) -> bool:
        """Click at ``local`` (row coordinates) on row ``key``: what a mouse release does (tests)."""
        item = self._model.item(key)
        if item is None:
            return False
        self._current = key
        hit = self._layouter.hit(item, self.row_width(), local)
        if hit is not None:
            self.activate(item, hit[0], hit[1])
        self.viewport().update()
        return hit is not None

    def hotspots(self, key: str) -> list[tuple[QRectF, str, str]]:
        """The clickable areas of a row in row coordinates (tests, accessibility)."""
        item = self._model.item(key)
        if item is None:
            return []
        return list(self._layouter.layout(item, self.row_width()).hotspots)

    def _base_key_press(self, event: QKeyEvent) -> None:
        QAbstractScrollArea.keyPressEvent(self, event)

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
            self.summary_requested.emit(item.event)
        elif action == "undo":
            self.undo_requested.emit(item.key)
        elif action == "subagent":
            self.subagent_requested.emit(payload)
        elif action == "copycode":
            lay = self._layouter.layout(item, self.row_width())
            index = int(payload)
            if 0 <= index < len(lay.codes):
                QGuiApplication.clipboard().setText(lay.codes[index][3])
        elif action == "link":
            url = QUrl(payload)
            if url.scheme() in ("http", "https"):
                self.link_activated.emit(url.toString())

    def _row_actions(self, item: ChatItem) -> list[tuple[str, Any]]:
        """The row's own context-menu actions (after the copy actions)."""
        out: list[tuple[str, Any]] = []
        if item.kind == "message" and (item.role == "tool" or is_attachment(item)):
            out.append(("Collapse" if item.expanded else "Expand",
                        lambda: self.set_tool_expanded(item.key, not item.expanded)))
            off = (item.msg or {}).get("offload")
            if isinstance(off, dict) and off.get("path"):
                out.append(("Open full output", lambda: self.open_offload.emit(str(off["path"]))))
        sub = (item.msg or {}).get("subagent") if item.kind == "message" else None
        if isinstance(sub, dict) and sub.get("session"):
            out.append(("Open subagent session", lambda: self.subagent_requested.emit(str(sub["session"]))))
        if item.kind == "marker" and item.event is not None and item.event.summary:
            out.append(("Open summary", lambda: self.summary_requested.emit(item.event)))
        return out

    def copy_item(self, key: str) -> str:
        it = self._model.item(key)
        text = it.plain_text() if it is not None else ""
        QGuiApplication.clipboard().setText(text)
        return text
