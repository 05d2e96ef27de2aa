"""The conversation: a virtualised list that paints its rows (no widget per message).

Thousands of messages scroll smoothly because a row is only data (:class:`ChatItem`, held by the
:class:`ChatModel` list model, ``model.py``) until it is painted: :class:`ChatView` (``view.py``) is a
virtualised scroll area that keeps one integer height per row in a Fenwick tree (:class:`HeightIndex`,
``height_index.py``) and has the :class:`RowLayouter` (``layout.py``) lay out only the rows on screen
(markdown via :class:`SafeTextDocument`, ``document.py``; one cached layout per row in a bounded LRU),
which ``paint.py`` paints. Rows never painted have an estimated height, made exact one page before
they scroll into view, so appending, streaming and scrolling cost O(log n) whatever the length of
the conversation.

Rows:
- **user / assistant messages** — a bubble with a header (role, time, flags, tokens) and the text;
  assistant text is markdown, streamed (each delta shown at once: the caller throttles); an
  assistant's tool calls are listed under its text; ``reasoning_content`` is a collapsible block.
- **tool results** — a collapsible tool-call block: tool name and arguments, the result as it stands
  in the context (cut), and, when the full output was offloaded, a link that emits
  ``open_offload(path)``.
- **attachments** — text the agent injected into the context (``msg["attachment"]``: Claude Code's
  skill and agent listings, environment, date, …; ``sent_as`` the role it was sent as): one compact,
  muted row "▸ ◇ skill listing · 1,620 tokens · injected as system"; a click shows its text.
  A message a compaction kept (``msg["preserved"]``) says "kept across the compaction".
- **compaction markers** — inline where the compaction happened: trigger, tokens before → after,
  messages compacted / kept (an import: the agent's own count right after compacting, what it cost,
  "placed by file order"), "Open summary" and "Undo" links.

- **selection** — press and drag selects text (within a message and across messages), painted with
  the palette's highlight; a click without a drag still activates links; double-click selects a
  word, triple-click a paragraph; Ctrl+A selects the current (last clicked) message's text; Ctrl+C
  or the context menu's "Copy" copies the selection as plain text (``interaction.py``,
  ``selection.py``).
- **code blocks** — fenced / indented code in markdown messages and the blocks of an expanded tool
  result have a light background and a "Copy" link at their top-right that copies exactly the
  code (no fences, no language; a tool result's full text as in the context); right-click inside
  one: "Copy code block".
- **find** — ``find_text(query)`` searches every row's plain text (not the laid-out documents),
  case-insensitively; ``find_step(forward)`` moves to the next / previous hit, scrolls it into
  view (expanding a collapsed tool result) and paints all hits lightly, the current one strongly
  (``find.py``). The find bar is :class:`widgets.find_bar.FindBar`, wired in ``app/wire_chat.py``.
- **subagents** — a message carrying ``msg["subagent"] = {"id", "session", "model"?, "calls"?}``
  (an imported Claude Code Task call's result) shows "Open subagent session ▸ (id, model, N calls)";
  a click emits ``subagent_requested(session)``.

Markdown never loads a resource (no remote or local images, no HTML): see :class:`SafeTextDocument`.

Public API of :class:`ChatView`
-------------------------------
Methods:
    set_messages(messages, tokens_by_id=None, markers=())   replace everything
    append_message(msg, tokens=0)                            O(1); also for a streaming placeholder
    update_message(msg, tokens=None)                         replace a message by its ``id``
    remove_message(message_id)
    stream_delta(message_id, text, reasoning=False)          append streamed text
    end_stream(message_id)                                   drop the streaming flag
    set_tokens(tokens_by_id)                                 per-message token counts
    add_compaction_marker(event, undoable=True, after_message_id=None) -> marker id
    update_compaction_marker(marker_id, event=None, undoable=None)
    remove_compaction_marker(marker_id)
    set_out_of_context(message_ids)      shown dimmed with an "archived" tag (no longer sent)
    set_in_context(live_ids)             every message not in ``live_ids`` out of the context
    set_tool_expanded(message_id, expanded)
    set_call_running(call_id, running)   "(running…)" on the call while its tool runs
    scroll_to_message(message_id) / scroll_to_bottom()
    set_palette(palette)
    clear(); flush() (lay out and paint now); row_count(); message_ids(); marker_ids(); item(key) -> ChatItem | None
    copy_item(key) -> str                copy a row's text to the clipboard
    selected_text() -> str; has_selection(); copy_selection(); clear_selection(); select(a, b);
    select_message(key); text_pos_at(pos, clamp=False) -> TextPos | None
    copy_code_at(key, doc, pos) -> str | None   copy the code block there (None: not in one)
    find_text(query, keep=-1) -> (current, total); find_step(forward=True) -> (current, total)
    find_state() -> (current, total); current_hit() -> (key, k) | None; find_clear()
Introspection (tests, accessibility):
    row_rect(key) -> QRectF; visible_keys() -> list[str]; is_at_bottom() -> bool
    hotspots(key) -> [(QRectF, action, payload)]; click(key, local_pos) -> bool
Signals:
    open_offload(str)            path of an offloaded tool result ("tool_results/<hex>.txt")
    summary_requested(object)    "Open summary" on a compaction marker (its CompactionRecord)
    undo_requested(str)          "Undo" on a compaction marker (the marker id)
    link_activated(str)          an http(s) link in a message was clicked (the app decides)
    subagent_requested(str)      "Open subagent session ▸" (the ``session`` string, "subagents/<id>")
"""

from __future__ import annotations

from widgets.chat_view.document import SafeTextDocument
from widgets.chat_view.height_index import HeightIndex
from widgets.chat_view.layout import RowLayout, RowLayouter
from widgets.chat_view.model import ChatItem, ChatModel
from widgets.chat_view.view import ChatView

__all__ = [
    "ChatItem",
    "ChatModel",
    "ChatView",
    "HeightIndex",
    "RowLayout",
    "RowLayouter",
    "SafeTextDocument",
]
