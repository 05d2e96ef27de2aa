"""Rows laid out as drawing operations: :class:`RowLayouter` turns a :class:`ChatItem` into a
:class:`RowLayout` (text runs, bubbles, markdown documents, clickable hotspots) at a given width,
keeps one cached layout per row (a bounded LRU), estimates the height of rows not laid out yet and
answers hit tests. Painting the operations is :mod:`widgets.chat_view.paint`."""

from __future__ import annotations

import json
import math
import re
from collections import OrderedDict
from typing import Any

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QFont, QFontDatabase, QFontMetrics, QTextDocument, QTextOption

from engine.model.messages import media_count
from engine.model.records import CompactionRecord
from engine.model.text import format_bytes
from widgets.chat_view.document import SafeTextDocument, block_rect, code_blocks
from widgets.chat_view.model import ChatItem, ChatModel, shown_text
from widgets.formatting import format_usd, local_datetime, parse_arguments, pretty_arguments
from widgets.theme import Palette, format_tokens, palette

RESULT_MAX_LINES = 300
RESULT_MAX_CHARS = 30_000
ARGS_MAX_LINES = 80
# rows kept laid out (their text documents included: ~11 KB a row in C++ and Python), the most recently drawn: a few
# screens — LAYOUT_SCREENS times the view's height in rows, at least LAYOUT_MIN rows, at most LAYOUT_CACHE (a 4K
# screen shows ~60 one-line rows); a row scrolled back to is laid out again. 400 made a ten-minute follow keep 2–3 MB
# more as the new rows filled it; 150 in any window, 1.2 MB more than three screens of the benchmark's window.
LAYOUT_CACHE = 150
LAYOUT_MIN = 40
LAYOUT_SCREENS = 3
COPY_LABEL = "Copy"
PAD = 10
MARGIN_X = 10
MARGIN_Y = 4
ACCENT = 3
RADIUS = 6.0
ATTACHMENT_PAD = 5
MARKER_INSET = 0.08  # of the row's width, each side of a compaction marker's box
PRESERVED_FLAG = "kept across the compaction"


class Op:
    """One drawing operation of a laid-out row (coordinates relative to the row's top-left)."""

    __slots__ = ("a", "b", "c", "d", "kind")

    def __init__(self, kind: str, a: Any = None, b: Any = None, c: Any = None, d: Any = None) -> None:
        self.kind = kind
        self.a, self.b, self.c, self.d = a, b, c, d


class RowLayout:
    """A row laid out: drawing operations, clickable hotspots, documents (for link hit tests), height."""

    __slots__ = ("codes", "docs", "height", "hotspots", "ops")

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.hotspots: list[tuple[QRectF, str, str]] = []  # rect, action, payload
        self.docs: list[tuple[QPointF, QTextDocument]] = []
        self.codes: list[tuple[int, int, int, str]] = []  # doc index, start, end, the code to copy
        self.height = 0

    def code_at(self, doc: int, pos: int) -> str | None:
        """The code of the code block holding position ``pos`` of document ``doc``, if any."""
        for d, start, end, code in self.codes:
            if d == doc and start <= pos <= end:
                return code
        return None


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


# a user message that is only text the agent wrapped in its own tags (Claude Code's reminders, a background
# task's notification, a slash command's echo) is context the agent injected, not words a person wrote
_INJECTED_RE = re.compile(
    r"\A(?:\s*<(system-reminder|task-notification|local-command-stdout|local-command-stderr|command-name|"
    r"command-message|command-args|local-command-caveat|user-prompt-submit-hook)>.*?</\1>)+\s*\Z", re.DOTALL)


def injected_kind(msg: dict[str, Any]) -> str:
    """"system reminder", "task notification" … for a user message that holds only injected tags; else ""."""
    if msg.get("role") != "user" or msg.get("tool_calls"):
        return ""
    text = shown_text(msg.get("content"))
    found = _INJECTED_RE.match(text) if text.lstrip().startswith("<") else None
    if found is None:
        return ""
    tag = re.match(r"\s*<([a-z-]+)>", text)
    return (tag.group(1) if tag else "injected").replace("-", " ")


def is_attachment(item: ChatItem) -> bool:
    """A message the agent injected into the context (Claude Code's attachments: skill and agent
    listings, environment, date, …; a user message that is only a ``<system-reminder>`` or a
    ``<task-notification>``), not one a person wrote: a compact row, its text on a click."""
    if item.kind != "message":
        return False
    msg = item.msg or {}
    return bool(msg.get("attachment")) or bool(injected_kind(msg))


def attachment_title(msg: dict[str, Any], tokens: int, expanded: bool = False) -> str:
    """"▸ ◇ skill listing · 1,620 tokens · injected as system"."""
    kind = str(msg.get("attachment") or injected_kind(msg) or "attachment").replace("_", " ").replace("-", " ")
    parts = [f"{'▾' if expanded else '▸'} ◇ {kind}"]
    if tokens:
        parts.append(f"{format_tokens(tokens)} tokens")
    if msg.get("sent_as") in ("system", "user"):
        parts.append(f"injected as {msg['sent_as']}")
    return " · ".join(parts)


def marker_line(ev: CompactionRecord) -> str:
    """A compaction marker's figures: before → after (the first call after, for an import), messages
    compacted and kept, and — for ctxbench's own compactions — how long it took."""
    change = ev.change()  # one basis in every view (engine.model.compaction_change)
    line = (
        f"{change.text(format_tokens)}{' ⚠' if change.grows else ''} · "
        f"{ev.messages_compacted:,} messages compacted, "
        f"{ev.messages_kept or 0:,} kept"
    )
    if not ev.source_format:  # an import records no duration of its own
        line += f" · {ev.duration_ms / 1000:.1f} s"
    return line


def marker_agent_line(ev: CompactionRecord) -> str:
    """What the agent's own records add to an imported compaction (its count right after compacting,
    what compacting cost in USD, placed by file order), or ""."""
    parts = []
    if ev.post_tokens is not None:
        parts.append(f"{format_tokens(ev.post_tokens)} right after (the agent's count)")
    if ev.cost_usd is not None:
        parts.append(f"cost {format_usd(ev.cost_usd)}")
    if ev.placed_by == "file order":
        parts.append("placed by file order")
    return " · ".join(parts)


class RowLayouter:
    """Lays out rows (one cached layout per row), estimates heights and answers hit tests."""

    PAD = PAD
    MARGIN_X = MARGIN_X
    MARGIN_Y = MARGIN_Y
    ACCENT = ACCENT

    def __init__(self, model: ChatModel, font: QFont) -> None:
        self._model = model
        self._cache: OrderedDict[str, tuple[tuple[Any, ...], RowLayout]] = OrderedDict()
        self._kept_px = 0  # the heights of the layouts kept, summed
        self.keep_px = 0  # the pixels of rows kept laid out beyond LAYOUT_MIN rows (the view's: keep_screens); 0: any
        self.pal = palette()
        self.set_fonts(font)
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
        self._kept_px = 0

    def keep_screens(self, view_height: int) -> None:
        """Keep laid out the rows of :data:`LAYOUT_SCREENS` views of ``view_height`` pixels (at least
        :data:`LAYOUT_MIN` rows, at most :data:`LAYOUT_CACHE`): a few screens, whatever the window's height."""
        self.keep_px = LAYOUT_SCREENS * max(0, int(view_height))

    # --- geometry helpers
    def _bubble_width(self, row_width: int) -> int:
        return max(120, row_width - 2 * self.MARGIN_X)

    def _text_width(self, row_width: int) -> int:
        return max(60, self._bubble_width(row_width) - 2 * self.PAD - self.ACCENT)

    def estimate_height(self, item: ChatItem, row_width: int) -> int:
        """A cheap height for a row not laid out yet; corrected when the row is first painted."""
        if item.kind == "marker" or item.expanded or item.reasoning_expanded or is_attachment(item):
            return self.layout(item, row_width).height  # a collapsed attachment is one line: no document
        msg = item.msg or {}
        if item.paras is None or item.paras_version != item.version:
            if item.role == "tool":
                text = shown_text(msg.get("content"))
                item.paras = (text.count("\n") + 1 if text else 0,)
            else:
                text = shown_text(msg.get("content"))
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
            if isinstance(msg.get("subagent"), dict):
                h += self.fm_small_bold.height() + 4
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
        if isinstance(msg.get("subagent"), dict):
            h += self.fm_small_bold.height() + 6
        return int(h)

    def layout(self, item: ChatItem, row_width: int) -> RowLayout:
        """The row laid out at ``row_width``; one cached layout per row, the most recently drawn kept (a few screens:
        :meth:`keep_screens`; LAYOUT_MIN to LAYOUT_CACHE rows)."""
        sig = (item.version, row_width, item.expanded, item.reasoning_expanded, item.out_of_context,
               item.undoable, item.streaming)
        cached = self._cache.get(item.key)
        if cached is not None and cached[0] == sig:
            self._cache.move_to_end(item.key)
            return cached[1]
        if item.kind == "marker":
            lay = self._layout_marker(item, row_width)
        elif is_attachment(item):
            lay = self._layout_attachment(item, row_width)
        elif item.role == "tool":
            lay = self._layout_tool(item, row_width)
        else:
            lay = self._layout_message(item, row_width)
        self.layouts_built += 1
        if cached is not None:
            self._kept_px -= cached[1].height
        self._cache[item.key] = (sig, lay)
        self._cache.move_to_end(item.key)
        self._kept_px += lay.height
        cache = self._cache
        while len(cache) > LAYOUT_CACHE or (len(cache) > LAYOUT_MIN and self.keep_px and self._kept_px > self.keep_px):
            self._kept_px -= cache.popitem(last=False)[1][1].height
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

    def _text_line(self, lay: RowLayout, x: float, y: float, w: float, text: str, font: QFont, color: str,
                   align: Qt.AlignmentFlag = Qt.AlignmentFlag.AlignLeft) -> float:
        fm = QFontMetrics(font)
        elided = fm.elidedText(text, Qt.TextElideMode.ElideRight, int(w))
        lay.ops.append(Op("text", QRectF(x, y, w, fm.height()), elided, font, (color, align)))
        return fm.horizontalAdvance(elided)

    def _link(self, lay: RowLayout, x: float, y: float, text: str, action: str, payload: str,
              font: QFont | None = None) -> float:
        font = font or self.small_bold
        fm = QFontMetrics(font)
        w = fm.horizontalAdvance(text) + 2
        rect = QRectF(x, y, w, fm.height())
        f = QFont(font)
        f.setUnderline(True)
        lay.ops.append(Op("text", rect, text, f, (self.pal.link, Qt.AlignmentFlag.AlignLeft)))
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

    def _header(self, lay: RowLayout, item: ChatItem, x: float, y: float, w: float, title: str) -> float:
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
        if msg.get("preserved"):
            flags.append(PRESERVED_FLAG)
        if flags:
            fx = x + tw + 8
            avail = max(10, w - rw - (fx - x) - 8)
            self._text_line(lay, fx, y, avail, " · ".join(flags), self.small, pal.muted)
        if right:
            lay.ops.append(Op("text", QRectF(x + w - rw, y, rw, self.fm_small.height()), right, self.small,
                               (pal.muted, Qt.AlignmentFlag.AlignRight)))
        return self.fm_small_bold.height()

    def _frame(self, lay: RowLayout, item: ChatItem, row_width: int, height: float) -> None:
        bg, accent = self._bubble_colors(item.role)
        bw = self._bubble_width(row_width)
        rect = QRectF(self.MARGIN_X, self.MARGIN_Y, bw, height)
        lay.ops.insert(0, Op("bubble", rect, bg, accent, self.pal.border))

    def _layout_message(self, item: ChatItem, row_width: int) -> RowLayout:
        lay = RowLayout()
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
                lay.ops.append(Op("doc", QPointF(x, y), doc, pal.muted))
                y += doc.size().height() + 6
        text = shown_text(msg.get("content"))
        if text:
            doc = self._doc(text, tw, markdown=(role != "user"))
            lay.docs.append((QPointF(x, y), doc))
            lay.ops.append(Op("doc", QPointF(x, y), doc, pal.text))
            if role != "user" and ("```" in text or "~~~" in text or "    " in text):
                self._code_affordances(lay, doc, QPointF(x, y))
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
            model = self._model
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
        if isinstance(msg.get("subagent"), dict):
            y = self._subagent_link(lay, msg["subagent"], x, y + 4, tw)
        y += self.PAD
        lay.height = math.ceil(y + self.MARGIN_Y)
        self._frame(lay, item, row_width, y - self.MARGIN_Y)
        return lay

    def _layout_attachment(self, item: ChatItem, row_width: int) -> RowLayout:
        """Text the agent injected (an ``attachment``): one muted line naming its kind and tokens, a
        click on it shows the text (as sent)."""
        lay = RowLayout()
        pal = self.pal
        msg = item.msg or {}
        pad = ATTACHMENT_PAD
        x = self.MARGIN_X + self.ACCENT + self.PAD
        y = float(self.MARGIN_Y + pad)
        tw = self._text_width(row_width)
        right_parts = [p for p in (_time_of(msg.get("ts")),
                                   "archived — not in the context" if item.out_of_context else "",
                                   PRESERVED_FLAG if msg.get("preserved") else "") if p]
        right = " · ".join(right_parts)
        rw = self.fm_small.horizontalAdvance(right) + 4 if right else 0
        head_w = max(10, tw - rw - 8)
        self._text_line(lay, x, y, head_w, attachment_title(msg, item.tokens, item.expanded), self.small, pal.muted)
        if right:
            lay.ops.append(Op("text", QRectF(x + tw - rw, y, rw, self.fm_small.height()), right, self.small,
                              (pal.muted, Qt.AlignmentFlag.AlignRight)))
        lay.hotspots.append((QRectF(x - self.PAD, y - pad, head_w + self.PAD, self.fm_small.height() + 2 * pad),
                             "toggle", item.key))
        y += self.fm_small.height()
        if item.expanded:
            y += 4
            text, more = _cap_lines(shown_text(msg.get("content")).rstrip("\n"), RESULT_MAX_LINES, RESULT_MAX_CHARS)
            if more:
                text += f"\n… {more:,} more lines"
            doc = self._doc(text or "(empty)", tw, markdown=False)
            doc.setDefaultFont(self.small)
            doc.setTextWidth(tw)
            lay.docs.append((QPointF(x, y), doc))
            lay.ops.append(Op("doc", QPointF(x, y), doc, pal.muted))
            y += doc.size().height()
        y += pad
        lay.height = math.ceil(y + self.MARGIN_Y)
        rect = QRectF(self.MARGIN_X, self.MARGIN_Y, self._bubble_width(row_width), y - self.MARGIN_Y)
        lay.ops.insert(0, Op("bubble", rect, pal.panel, pal.regions.get("system", pal.muted), pal.border))
        return lay

    def _layout_tool(self, item: ChatItem, row_width: int) -> RowLayout:
        lay = RowLayout()
        msg = item.msg or {}
        call_id = str(msg.get("tool_call_id") or "")
        name, arguments = self._model.call_info(call_id) or (str(msg.get("name") or "tool"), "")
        x = self.MARGIN_X + self.ACCENT + self.PAD
        y = float(self.MARGIN_Y + self.PAD)
        tw = self._text_width(row_width)
        result = shown_text(msg.get("content"))
        y = self._tool_header(lay, item, x, y, tw, name, result)
        offload = msg.get("offload") if isinstance(msg.get("offload"), dict) else None
        if offload and offload.get("path"):
            y = self._offload_note(lay, offload, x, y, tw)
        if isinstance(msg.get("subagent"), dict):
            y = self._subagent_link(lay, msg["subagent"], x, y, tw)
        if not item.expanded:
            y = self._tool_preview(lay, x, y, tw, arguments, result)
        else:
            y = self._tool_details(lay, x, y, tw, arguments, result)
        y += self.PAD
        lay.height = math.ceil(y + self.MARGIN_Y)
        self._frame(lay, item, row_width, y - self.MARGIN_Y)
        return lay

    def _tool_header(self, lay: RowLayout, item: ChatItem, x: float, y: float, tw: float, name: str,
                     result: str) -> float:
        """The clickable header of a tool block (name, time, size, tokens); returns the next y."""
        pal = self.pal
        msg = item.msg or {}
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
                             else "", PRESERVED_FLAG if msg.get("preserved") else "") if f]
        if flags and adv + 20 < head_w:
            self._text_line(lay, x + adv + 8, y, head_w - adv - 8, " · ".join(flags), self.small, pal.muted)
        lay.ops.append(Op("text", QRectF(x + tw - rw, y, rw, self.fm_small.height()), right, self.small,
                          (pal.muted, Qt.AlignmentFlag.AlignRight)))
        lay.hotspots.append((QRectF(x - self.PAD, y - 4, tw - rw, self.fm_small_bold.height() + 8), "toggle",
                             item.key))
        return y + self.fm_small_bold.height() + 4

    def _offload_note(self, lay: RowLayout, offload: dict[str, Any], x: float, y: float, tw: float) -> float:
        """"cut in the context · full output …" and the "Open full output" link; returns the next y."""
        size = format_bytes(offload.get("bytes")) if offload.get("bytes") is not None else "?"
        lines = offload.get("lines")
        note = f"✂ cut in the context · full output {size}"
        if lines:
            note += f", {int(lines):,} lines"
        adv = self._text_line(lay, x, y, tw, note, self.small, self.pal.warning)
        lx = x + adv + 10
        if lx + 60 > x + tw:
            y += self.fm_small.height() + 2
            lx = x
        self._link(lay, lx, y, "Open full output", "offload", str(offload["path"]), self.small_bold)
        return y + self.fm_small.height() + 4

    def _tool_preview(self, lay: RowLayout, x: float, y: float, tw: float, arguments: str, result: str) -> float:
        """A collapsed tool block: the arguments on one line and the result's first two lines."""
        pal = self.pal
        args_line = _args_preview(arguments)
        if args_line:
            self._text_line(lay, x, y, tw, f"args: {args_line}", self.mono, pal.muted)
            y += self.fm_mono.lineSpacing()
        for ln in result.split("\n", 3)[:2]:
            self._text_line(lay, x, y, tw, ln if ln else " ", self.mono, pal.text)
            y += self.fm_mono.lineSpacing()
        n_lines = result.count("\n") + 1 if result else 0
        if n_lines > 2:
            self._text_line(lay, x, y, tw, f"… {n_lines - 2:,} more lines (click the header to expand)",
                            self.small, pal.muted)
            y += self.fm_small.height()
        return y

    def _tool_details(self, lay: RowLayout, x: float, y: float, tw: float, arguments: str, result: str) -> float:
        """An expanded tool block: the pretty-printed arguments and the result as sent (capped)."""
        if arguments:
            label_y = y
            self._text_line(lay, x, y, tw, "Arguments", self.small_bold, self.pal.muted)
            y += self.fm_small_bold.height() + 2
            text, more = _cap_lines(pretty_arguments(arguments), ARGS_MAX_LINES, RESULT_MAX_CHARS)
            if more:
                text += f"\n… {more:,} more lines"
            y = self._code_block(lay, x, y, tw, text, copy=pretty_arguments(arguments), link_y=label_y) + 6
        label_y = y
        self._text_line(lay, x, y, tw, "Result (as sent in the context)", self.small_bold, self.pal.muted)
        y += self.fm_small_bold.height() + 2
        text, more = _cap_lines(result.rstrip("\n"), RESULT_MAX_LINES, RESULT_MAX_CHARS)
        if more:
            text += f"\n… {more:,} more lines not shown here"
        return self._code_block(lay, x, y, tw, text or "(empty result)", copy=result, link_y=label_y)

    def _code_block(self, lay: RowLayout, x: float, y: float, tw: float, text: str, copy: str | None = None,
                    link_y: float | None = None) -> float:
        """Monospace text on a framed background with a "Copy" link (copies ``copy``, else the text):
        on its label's line at ``link_y`` (right-aligned, above the text), else over its first line;
        returns the y under it."""
        pal = self.pal
        doc = self._doc(text, int(tw) - 12, markdown=False, mono=True)
        h = doc.size().height()
        lay.ops.append(Op("codebg", QRectF(x, y, tw, h + 8), pal.background, pal.border))
        lay.codes.append((len(lay.docs), 0, max(0, doc.characterCount() - 1), text if copy is None else copy))
        lay.docs.append((QPointF(x + 6, y + 4), doc))
        lay.ops.append(Op("doc", QPointF(x + 6, y + 4), doc, pal.text))
        if link_y is not None:
            fm = self.fm_small_bold
            self._link(lay, x + tw - fm.horizontalAdvance(COPY_LABEL) - 4, link_y, COPY_LABEL, "copycode",
                       str(len(lay.codes) - 1), self.small_bold)
        else:
            self._copy_link(lay, x + tw - 4, y + 2, len(lay.codes) - 1)
        return y + h + 8

    def _copy_link(self, lay: RowLayout, right: float, y: float, code_index: int) -> None:
        """A small "Copy" link whose right edge is at ``right`` on a plate (over the code's first line)."""
        fm = self.fm_small_bold
        w = fm.horizontalAdvance(COPY_LABEL) + 2
        plate = QRectF(right - w - 6, y, w + 6, fm.height() + 2)
        lay.ops.append(Op("codebg", plate, self.pal.panel, self.pal.border))
        self._link(lay, right - w - 3, y + 1, COPY_LABEL, "copycode", str(code_index), self.small_bold)

    def _code_affordances(self, lay: RowLayout, doc: QTextDocument, origin: QPointF) -> None:
        """The code blocks of a markdown document (the last of ``lay.docs``): a light background and
        a "Copy" link at the top-right of each (backgrounds go under the document, the last op)."""
        index = len(lay.docs) - 1
        width = doc.textWidth()
        doc_op = len(lay.ops) - 1
        for start, end, code in code_blocks(doc):
            rect = block_rect(doc, start, end).translated(origin)
            doc_op += 1
            bg = QRectF(origin.x() - 4, rect.top() - 2, width + 8, rect.height() + 4)
            lay.ops.insert(doc_op - 1, Op("codebg", bg, self.pal.panel, self.pal.border))
            lay.codes.append((index, start, end, code))
            self._copy_link(lay, origin.x() + width, rect.top(), len(lay.codes) - 1)

    def _subagent_link(self, lay: RowLayout, sub: dict[str, Any], x: float, y: float, tw: float) -> float:
        """"Open subagent session ▸ (id, model, N calls)": emits the subagent's ``session``."""
        session = str(sub.get("session") or "")
        if not session:
            return y
        parts = [str(sub.get("id") or session.rsplit("/", 1)[-1])]
        if sub.get("model"):
            parts.append(str(sub["model"]))
        if sub.get("calls") is not None:
            parts.append(f"{int(sub['calls']):,} calls")
        label = f"Open subagent session ▸ ({', '.join(parts)})"
        label = self.fm_small_bold.elidedText(label, Qt.TextElideMode.ElideRight, int(tw))
        self._link(lay, x, y, label, "subagent", session, self.small_bold)
        return y + self.fm_small_bold.height() + 4

    def _layout_marker(self, item: ChatItem, row_width: int) -> RowLayout:
        lay = RowLayout()
        pal = self.pal
        ev = item.event
        if ev is None:  # (a marker row is always made with its record)
            return lay
        bw = self._bubble_width(row_width)
        inset = bw * MARKER_INSET  # the marker's box (paint.py) leaves this much free on each side
        inner = bw - 2 * inset - 2 * self.PAD
        x = self.MARGIN_X + inset + self.PAD
        y = float(self.MARGIN_Y + 8)
        result = str(ev.result)
        trigger = ev.trigger or "?"
        title = f"⟲ Compaction · {trigger}" + (f" · {result}" if result else "")
        color = pal.error if result == "failed" else pal.marker
        self._text_line(lay, x, y, inner, title, self.small_bold, color, Qt.AlignmentFlag.AlignHCenter)
        y += self.fm_small_bold.height() + 2
        self._text_line(lay, x, y, inner, marker_line(ev), self.small, pal.text, Qt.AlignmentFlag.AlignHCenter)
        y += self.fm_small.height() + 2
        agent = marker_agent_line(ev)
        if agent:
            self._text_line(lay, x, y, inner, agent, self.small, pal.muted, Qt.AlignmentFlag.AlignHCenter)
            y += self.fm_small.height() + 2
        if ev.reason:
            self._text_line(lay, x, y, inner, ev.reason, self.small,
                            pal.error if result == "failed" else pal.muted, Qt.AlignmentFlag.AlignHCenter)
            y += self.fm_small.height() + 2
        links: list[tuple[str, str]] = []
        if ev.summary:
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
        lay.ops.insert(0, Op("marker", rect, color, pal.background))
        return lay

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
