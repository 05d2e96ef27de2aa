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
    stream_delta(message_id, text, reasoning=False)          append streamed text
    end_stream(message_id)                                   drop the streaming flag
    set_tokens(tokens_by_id)                                 per-message token counts
    add_compaction_marker(event, undoable=True, after_message_id=None) -> marker id
    update_compaction_marker(marker_id, event=None, undoable=None)
    remove_compaction_marker(marker_id)
    set_out_of_context(message_ids)      shown dimmed with an "archived" tag (no longer sent)
    set_tool_expanded(message_id, expanded)
    set_call_running(call_id, running)   "(running…)" on the call while its tool runs
    scroll_to_message(message_id) / scroll_to_bottom()
    set_palette(palette)
    clear(); flush() (lay out and paint now); row_count(); message_ids(); marker_ids(); item(key) -> ChatItem | None
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
