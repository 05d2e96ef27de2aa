"""Mouse and keyboard of :class:`ChatView`: :class:`InteractionMixin`.

- press and drag selects text (within a message and across messages); a click without a drag
  activates what is under it (a link, a hotspot) and clears the selection;
- double-click selects a word, triple-click the paragraph (the block of the document);
- Ctrl+A selects the whole text of the current message (the one last clicked), Ctrl+C copies the
  selection as plain text (with no selection: the current message's text);
- the context menu has "Copy" (the selection), "Copy text" (the message), "Copy code block" (when
  right-clicking inside a code block) and the row's own actions.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QPointF, Qt, QTimer
from PySide6.QtGui import QGuiApplication, QKeyEvent, QKeySequence, QMouseEvent
from PySide6.QtWidgets import QApplication, QMenu

from widgets.chat_view.layout import RowLayout
from widgets.chat_view.model import ChatItem
from widgets.chat_view.selection import ChatSelection, TextPos, block_range, doc_end, doc_text, hit_doc, word_range


class InteractionMixin:
    """Selection, clicks, keys and the context menu of :class:`ChatView`."""

    _selection: ChatSelection
    _press: QPointF | None
    _dragging: bool
    _triple_until: bool

    # --- positions
    def _row_lay(self, row: int) -> tuple[ChatItem, RowLayout]:
        view: Any = self
        item = view.chat_model().item_at(row)
        return item, view.layouter().layout(item, view.row_width())

    def text_pos_at(self, pos: QPointF, clamp: bool = False) -> TextPos | None:
        """The text position under ``pos`` (viewport coordinates); with ``clamp`` the nearest one."""
        view: Any = self
        n = view.row_count()
        if not n:
            return None
        row = view.row_at(pos)
        if row < 0:
            if not clamp:
                return None
            row = 0 if pos.y() + view.verticalScrollBar().value() < 0 else n - 1
        item, lay = self._row_lay(row)
        top = view.row_rect(item.key).top()
        local = QPointF(pos.x(), pos.y() - top)
        found = hit_doc(lay, local, clamp)
        if found is None:
            if not clamp or not lay.docs:
                return None if not clamp else TextPos(row, 0, 0)
            return TextPos(row, 0, 0)
        return TextPos(row, found[0], found[1])

    # --- selection API
    def selection(self) -> ChatSelection:
        return self._selection

    def has_selection(self) -> bool:
        return not self._selection.is_empty()

    def select(self, anchor: TextPos, focus: TextPos) -> None:
        self._selection.set(anchor, focus)
        self._repaint_selection()

    def clear_selection(self) -> None:
        if self._selection.anchor is not None:
            self._selection.clear()
            self._repaint_selection()

    def select_message(self, key: str) -> bool:
        """Select the whole text of a message (all its documents)."""
        view: Any = self
        row = view.chat_model().row_of(key)
        if row < 0:
            return False
        _item, lay = self._row_lay(row)
        if not lay.docs:
            return False
        self.select(TextPos(row, 0, 0), TextPos(row, len(lay.docs) - 1, doc_end(lay.docs[-1][1])))
        return True

    def select_all(self) -> bool:
        """Select the text of every row (False: nothing to select)."""
        n = self._row_count()
        first = next((r for r in range(n) if self._row_lay(r)[1].docs), -1)  # only the ends are laid out
        last = next((r for r in range(n - 1, first - 1, -1) if self._row_lay(r)[1].docs), -1) if first >= 0 else -1
        if last < 0:
            return False
        docs = self._row_lay(last)[1].docs
        self.select(TextPos(first, 0, 0), TextPos(last, len(docs) - 1, doc_end(docs[-1][1])))
        return True

    def copy_current(self) -> str:
        """What Ctrl+C (and Edit → Copy) copies: the selection, else the current (last clicked) message."""
        view: Any = self
        if self.has_selection():
            return self.copy_selection()
        return str(view.copy_item(view._current)) if view._current else ""

    def select_current(self) -> bool:
        """What Ctrl+A (and Edit → Select All) selects: the current (last clicked) message, else everything."""
        view: Any = self
        if view._current and self.select_message(view._current):
            return True
        return self.select_all()

    def selected_text(self) -> str:
        """The selected text as plain text (rows joined by a blank line)."""
        o = self._selection.ordered()
        if o is None:
            return ""
        parts: list[str] = []
        for row in range(o[0].row, o[1].row + 1):
            if row >= self._row_count():
                break
            item, lay = self._row_lay(row)
            if o[0].row < row < o[1].row and not lay.docs:
                parts.append(item.plain_text())
                continue
            ranges = self._selection.ranges(row, lay)
            texts = [doc_text(lay.docs[i][1], s, e) for i, (s, e) in sorted(ranges.items())]
            if texts:
                parts.append("\n".join(texts))
        return "\n\n".join(parts)

    def copy_selection(self) -> str:
        text = self.selected_text()
        if text:
            QGuiApplication.clipboard().setText(text)
        return text

    def copy_code_at(self, key: str, doc: int, pos: int) -> str | None:
        """Copy the code block holding ``pos`` of document ``doc`` of row ``key`` (None: not in one)."""
        view: Any = self
        item = view.item(key)
        if item is None:
            return None
        code = view.layouter().layout(item, view.row_width()).code_at(doc, pos)
        if code is not None:
            QGuiApplication.clipboard().setText(code)
        return code

    def _row_count(self) -> int:
        return int(self.chat_model().rowCount())  # type: ignore[attr-defined]

    def _repaint_selection(self) -> None:
        self.viewport().update()  # type: ignore[attr-defined]

    # --- mouse
    def mousePressEvent(self, event: QMouseEvent) -> None:
        view: Any = self
        event.accept()  # a click is handled on release
        if event.button() != Qt.MouseButton.LeftButton:
            return
        view.setFocus(Qt.FocusReason.MouseFocusReason)
        if self._triple_until:
            self._triple_until = False
            p = self.text_pos_at(event.position())
            if p is not None:
                start, end = block_range(self._row_lay(p.row)[1].docs[p.doc][1], p.pos)
                self.select(TextPos(p.row, p.doc, start), TextPos(p.row, p.doc, end))
                self._press = None
                return
        self._press = QPointF(event.position())
        self._dragging = False

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        event.accept()
        if event.button() != Qt.MouseButton.LeftButton:
            return
        self._press = None
        p = self.text_pos_at(event.position())
        if p is None:
            return
        start, end = word_range(self._row_lay(p.row)[1].docs[p.doc][1], p.pos)
        self.select(TextPos(p.row, p.doc, start), TextPos(p.row, p.doc, end))
        self._triple_until = True
        QTimer.singleShot(QApplication.doubleClickInterval(), self._end_triple)

    def _end_triple(self) -> None:
        self._triple_until = False

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        view: Any = self
        pos = event.position()
        if self._press is not None and event.buttons() & Qt.MouseButton.LeftButton:
            if not self._dragging and (pos - self._press).manhattanLength() >= QApplication.startDragDistance():
                anchor = self.text_pos_at(self._press, clamp=True)
                if anchor is not None:
                    self._dragging = True
                    self._selection.set(anchor, anchor)
            if self._dragging:
                focus = self.text_pos_at(pos, clamp=True)
                if focus is not None:
                    self.select(self._selection.anchor or focus, focus)
                self._autoscroll(pos)
            return
        found = view._hit_at(pos)
        hand = found is not None and found[1] is not None
        if hand:
            shape = Qt.CursorShape.PointingHandCursor
        elif self.text_pos_at(pos) is not None:
            shape = Qt.CursorShape.IBeamCursor
        else:
            shape = Qt.CursorShape.ArrowCursor
        view.viewport().setCursor(shape)

    def _autoscroll(self, pos: QPointF) -> None:
        view: Any = self
        sb = view.verticalScrollBar()
        if pos.y() < 0:
            view._stick = False
            sb.setValue(sb.value() - sb.singleStep())
        elif pos.y() > view.viewport().height():
            sb.setValue(sb.value() + sb.singleStep())

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        view: Any = self
        if event.button() != Qt.MouseButton.LeftButton:
            return
        press, dragging = self._press, self._dragging
        self._press, self._dragging = None, False
        if press is None or dragging:
            return
        self.clear_selection()
        found = view._hit_at(event.position())
        if found is None:
            return
        item, hit = found
        view._current = item.key
        if hit is not None:
            view.activate(item, hit[0], hit[1])
        view.viewport().update()

    # --- keys
    def keyPressEvent(self, event: QKeyEvent) -> None:
        view: Any = self
        sb = view.verticalScrollBar()
        key = event.key()
        if event.matches(QKeySequence.StandardKey.Copy):
            self.copy_current()
        elif event.matches(QKeySequence.StandardKey.SelectAll):
            self.select_current()
        elif key == Qt.Key.Key_Escape and self.has_selection():
            self.clear_selection()
        elif key == Qt.Key.Key_Home:
            view._stick = False
            sb.setValue(0)
        elif key == Qt.Key.Key_End:
            view.scroll_to_bottom()
        elif key in (Qt.Key.Key_PageDown, Qt.Key.Key_PageUp, Qt.Key.Key_Down, Qt.Key.Key_Up):
            step = sb.pageStep() if key in (Qt.Key.Key_PageDown, Qt.Key.Key_PageUp) else sb.singleStep()
            sb.setValue(sb.value() + (step if key in (Qt.Key.Key_PageDown, Qt.Key.Key_Down) else -step))
        else:
            view._base_key_press(event)

    # --- context menu
    def _on_context_menu(self, pos: Any) -> None:
        view: Any = self
        found = view._hit_at(QPointF(pos))
        if found is None:
            return
        item = found[0]
        menu = QMenu(view)
        if self.has_selection():
            menu.addAction("Copy", self.copy_selection)
        menu.addAction("Copy text", lambda: view.copy_item(item.key))
        p = self.text_pos_at(QPointF(pos))
        if p is not None and self._row_lay(p.row)[1].code_at(p.doc, p.pos) is not None:
            menu.addAction("Copy code block", lambda: self.copy_code_at(item.key, p.doc, p.pos))
        for label, slot in view._row_actions(item):
            menu.addAction(label, slot)
        view._last_menu = menu
        menu.popup(view.viewport().mapToGlobal(pos))
