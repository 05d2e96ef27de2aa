"""The window reads records by attribute, never by string key (issue 29: typed records end to end), checked on the
source (AST) and on the types the service hands the window.

The records: a call (:class:`engine.model.records.ContextRecord` in a :class:`engine.model.timeline.TimelineCall`),
a compaction (:class:`engine.model.records.CompactionRecord`, its call :class:`CompactionCall`), a session of the
sessions panel, an offloaded file, a subagent's mark, what a read-only view shows, a Sources row and
a file the scan could not read (:mod:`engine.workbench.rows`),
an archive search hit
(:class:`engine.store.archive.ArchiveHit`). A ``x["field"]`` or ``x.get("field")`` in widgets/ or app/ whose key is
one of their fields fails :func:`test_widgets_and_app_read_no_record_field_by_string_key` — except the keys other
dicts the window shows share with them (:data:`SHARED`, each with the dicts that hold it).
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from engine.model.records import CompactionCall, CompactionRecord, ContextRecord
from engine.model.snapshot import ContextSnapshot
from engine.model.timeline import TimelineCall
from engine.store.archive import ArchiveHit
from engine.workbench import events, views
from engine.workbench.rows import FileRow, ProblemRow, SessionRow, SourceRow, SubagentMark, ViewSource

REPO = Path(__file__).resolve().parent.parent
RECORDS = (ContextRecord, ContextSnapshot, TimelineCall, CompactionRecord, CompactionCall, SessionRow, FileRow,
           ArchiveHit, SubagentMark, ViewSource, SourceRow, ProblemRow)
# record fields that are also keys of other dicts the window reads (not records): a read of one is not a record read
SHARED = {
    "id", "role", "ts",  # a message (engine.model.messages), a tool call, a subagent mark, a source dict
    "model", "title", "path", "window", "reason",  # a source dict / its problems, a subagent mark, session meta
    "lines", "call", "call_index", "prompt", "tool", "tools", "day", "max_tokens",  # a message's offload, a
    # subagent mark, the recorder's rows, the usage report's rows, the settings' changes (cli)
    "cost_usd", "agent_cost_usd", "prompt_tokens", "cache_read_tokens", "cache_write_tokens",  # usage rows
    "draft", "system", "history_user", "history_assistant", "history_tool",  # the palette's region colours
    "session", "calls", "subagent",  # a message's link to its subagent (``message["subagent"]``: id, session, …)
    "agent", "live", "project", "session_id",  # a usage row (the Usage view, ctxbench usage)
}


def record_fields() -> set[str]:
    """Every field and property name of the record types."""
    names: set[str] = set()
    for cls in RECORDS:
        names |= {f.name for f in dataclasses.fields(cls)}
        names |= {n for n, v in vars(cls).items() if isinstance(v, property)}
    return names


def string_keyed_reads(path: Path, keys: set[str]) -> list[str]:
    """``file:line key`` of each ``x["key"]`` / ``x.get("key", ...)`` in ``path`` whose key is in ``keys``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        key: object = None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant)):
            key = node.args[0].value
        if isinstance(key, str) and key in keys:
            out.append(f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:{node.lineno} {key}")
    return out


def test_widgets_and_app_read_no_record_field_by_string_key() -> None:
    keys = record_fields() - SHARED
    found = [hit for folder in ("widgets", "app") for path in sorted((REPO / folder).rglob("*.py"))
             for hit in string_keyed_reads(path, keys)]
    assert found == [], "read these records' fields as attributes:\n" + "\n".join(found)


def test_the_scan_finds_a_string_keyed_read(tmp_path: Path) -> None:
    keys = record_fields() - SHARED
    bad = tmp_path / "probe.py"
    bad.write_text('def f(ev, r):\n    return ev["tokens_before"], r.get("updated"), ev.get("id"), ev.trigger\n')
    assert sorted(h.split(" ")[1] for h in string_keyed_reads(bad, keys)) == ["tokens_before", "updated"]


def test_what_the_service_hands_the_window_is_typed() -> None:
    """The view models' and events' record fields are typed (no ``dict`` among them)."""
    fields = {
        views.SessionView: ("timeline", "compactions", "files", "subagents", "source"),
        views.Marker: ("event",),
        events.SessionsListed: ("sessions",),
        events.OffloadedFileAdded: ("file",),
        events.ArchiveHits: ("hits",),
        events.SourcesListed: ("sources", "problems"),
        events.CallRecorded: ("record",),
    }
    for cls, names in fields.items():
        annotations = {f.name: str(f.type) for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        for name in names:
            assert "dict" not in annotations[name], (cls.__name__, name, annotations[name])
