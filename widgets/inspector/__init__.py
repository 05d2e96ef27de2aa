"""The inspector: everything that left the context, and how it left (one module per tab).

Five tabs, all fed with plain data by the app (the inspector never reads files itself):

- **Tool results** — the session's offloaded ``tool_results/`` files (tool, size, lines, created,
  the message that refers to it) and a viewer with line numbers, search, copy and "open with the
  system app" (``QDesktopServices``).
- **Archive** — the dialog archive: days → messages (time, role, tokens, preview), the full message,
  search across days (the app answers ``archive_search_requested`` with hits) and restore of the
  checked messages into the context (``restore_requested`` with their ids).
- **Summary** — the current summary (markdown, rendered without loading any resource).
- **Compactions** — the compaction event log; the selected event's details: trigger, before → after,
  what compacting cost (another agent's compaction call: prompt tokens, cache read / write, completion,
  model), the reason, the whole summary, and *Show archived messages* (the Archive tab at its day).
- **Tools** — tokens by tool (calls, argument tokens, result tokens, share) and the largest tool
  results, each a link to its message (``message_activated``; archived ones also open the Archive tab);
  for an imported session, the system prompt and tool definitions sent with every request (grouped:
  built-in tools, then each MCP server), from the file (as sent) or inferred.

Public API of :class:`Inspector`
--------------------------------
Signals:
    file_requested(str)             a tool-result file was chosen: answer with show_file(path, text)
    message_activated(str)          show this message in the chat (referring message, archive row)
    archive_day_requested(str)      a day was expanded: answer with set_archive_messages(day, msgs)
    archive_search_requested(str)   answer with set_archive_hits(query, hits)
    restore_requested(list)         ids of archived messages to put back into the context
Methods:
    set_session_dir(path | None)    base folder for the files' relative paths ("open with system app")
    set_offloaded_files(files)      dicts {"path", "size", "lines", "created", "tool", "message_id"}
                                    (optional "message_preview")
    add_offloaded_file(file)
    open_file(path)                 select the file (Tool results tab) and emit file_requested
    show_file(path, text)           show a file's text in the viewer
    set_archive_days(days)          "YYYY-MM-DD" strings
    set_archive_messages(day, messages, tokens_by_id=None)
    set_archive_hits(query, hits)   dicts {"day", "message", "snippet"}
    checked_archive_ids() -> list[str]
    set_summary(text, tokens=None)
    set_compaction_events(events) / add_compaction_event(event)   CompactionRecords
    show_tab(name)                  "files" | "archive" | "summary" | "compactions" | "tools"
    show_compaction(event)          the Compactions tab with that event (by id) selected
    show_archived(day, message_id="")  the Archive tab at that day (asked for when not loaded), the message selected
    tools.set_attribution(attribution, locations, costs=None) / tools.clear()   the Tools tab (engine
                                    Attribution, message id → "live" | archive day, engine ToolCosts | None)
    tools.set_definitions(facts)    the system prompt and tool definitions (engine ImportFacts | None)
    set_palette(palette)
Sub-widgets (tests): files_view, viewer, archive_tree, archive_view, summary_view, log_table.
"""

from __future__ import annotations

from widgets.inspector.archive_tab import ArchivePanel
from widgets.inspector.compactions_tab import CompactionLogPanel
from widgets.inspector.container import Inspector
from widgets.inspector.file_viewer import CodeView, FileViewer
from widgets.inspector.files_tab import OffloadPanel
from widgets.inspector.summary_tab import SummaryPanel
from widgets.inspector.tools_tab import ToolsPanel

__all__ = [
    "ArchivePanel",
    "CodeView",
    "CompactionLogPanel",
    "FileViewer",
    "Inspector",
    "OffloadPanel",
    "SummaryPanel",
    "ToolsPanel",
]
