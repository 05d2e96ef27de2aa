"""View models of the Workbench service: plain dataclasses built from engine functions.

:class:`SessionView` is everything a window shows of one session; :class:`ContextState` what
changes when the history changes; :class:`Marker` one compaction as the chat shows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.context.conversation import Session
from engine.model.events import Outcome
from engine.model.messages import Message, preview
from engine.model.records import CompactionRecord, compaction_records, context_records
from engine.model.snapshot import PROMPT_REGIONS, ContextSnapshot
from engine.model.timeline import TimelineCall
from engine.store import archive
from engine.store.archive import merge_archived
from engine.store.session import SessionError
from engine.store.sessions import SessionInfo
from engine.usage.costs import NONE, SessionCost, folder_cost, price_table, priced_call
from engine.workbench.imported import ImportFacts, import_facts
from engine.workbench.rows import FileRow, SessionRow, SubagentMark, ViewSource
from engine.workbench.subagents import subagent_marks

if TYPE_CHECKING:
    from engine.context.offload import OffloadedFile
    from engine.workbench.source_views import SourceView


@dataclass
class Marker:
    """A compaction as the chat shows it: its record, where it goes and whether it can be undone."""

    event: CompactionRecord
    after_id: str | None  # the last message it took out of the context (None: at the end)
    undoable: bool


@dataclass
class ContextState:
    """What changes when the history changes (compaction, undo, restore, clear)."""

    live_ids: list[str]
    tokens: dict[str, int]
    snapshot: ContextSnapshot
    summary: str
    summary_tokens: int
    archive_days: list[str]
    undo_id: str | None


@dataclass
class SessionView:
    """Everything the window shows of one session, read through engine functions."""

    id: str
    title: str
    path: Path
    model: str
    messages: list[Message]  # the live history with the archived messages merged in by time
    state: ContextState
    markers: list[Marker]
    timeline: list[TimelineCall]  # one per LLM call: its record (events.jsonl) and its price
    compactions: list[CompactionRecord]  # the compaction records (events.jsonl), oldest first
    files: list[FileRow]  # offloaded tool results (the inspector's rows)
    problems: str = ""  # the load report when the folder needed repairs, else ""
    last_call: tuple[int | None, int | None] = (None, None)
    read_only: bool = False  # a view of another agent's session (or a subagent): nothing can be sent or changed
    source: ViewSource | None = None  # what a read-only view is a view of (None: a ctxbench session)
    # the import's subagents, each with the parent's call_index (engine.workbench.subagents.subagent_marks)
    subagents: list[SubagentMark] = field(default_factory=list)
    # what the imported file said of the agent itself: system prompt and tool definitions, its own cost
    # (engine.workbench.imported); None for a session that was not imported
    imported: ImportFacts | None = None
    # the session's cost: main + subagents + compaction calls, the agent's own beside it (engine.usage.costs)
    cost: SessionCost = field(default_factory=lambda: SessionCost(NONE))


def session_row(info: SessionInfo | Session) -> SessionRow:
    """The sessions panel's row of a SessionInfo or an open Session."""
    if isinstance(info, Session):
        return SessionRow(info.id, info.title, str(info.meta.get("updated") or ""), len(info.messages))
    return SessionRow(info.id, info.title, info.updated, info.message_count)


def file_row(f: OffloadedFile, session: Session | None) -> FileRow:
    """The inspector's row of an :class:`engine.store.offloads.OffloadedFile`, with its message's preview when
    ``session`` holds that message."""
    preview_text = ""
    if session is not None and f.message_id and f.message_id in session:
        preview_text = preview(session.get(f.message_id), 80)
    return FileRow(path=f.path, size=f.size, lines=f.lines, created=f.created, tool=f.tool_name,
                   message_id=f.message_id, message_preview=preview_text)


def prompt_of(record: dict[str, Any]) -> int:
    """The prompt part (every region but the output reserve and free) of a snapshot dict."""
    return sum(int(record.get(k) or 0) for k in PROMPT_REGIONS)


def call_record(snap: ContextSnapshot) -> dict[str, Any]:
    """A timeline column from a recorded call: the snapshot dict without the per-message counts."""
    return snap.call_record()


def _after_by_time(shown: list[Message], ts: str) -> str | None:
    if not ts:
        return None
    last: str | None = None
    for msg in shown:
        if str(msg.get("ts") or "") <= ts:
            last = str(msg.get("id"))
    return last


def markers(
    session: Session, compactions: Sequence[CompactionRecord], shown: list[Message], undo_id: str | None
) -> list[Marker]:
    """One marker per compaction (an undo updates its compaction's marker), placed after the last
    message it took out when the undo point still says which, else by time. The marker's event is the
    record (what the chat and the inspector draw)."""
    by_id: dict[str, CompactionRecord] = {}
    order: list[str] = []
    for rec in compactions:
        if rec.result is Outcome.NOTHING:
            continue
        key = rec.id or f"event-{len(order)}"
        if key not in by_id:
            order.append(key)
        by_id[key] = rec
    position = {str(m.get("id")): i for i, m in enumerate(shown)}
    out: list[Marker] = []
    for key in order:
        rec = by_id[key]
        after: str | None = None
        try:
            point = session.read_undo_point(key)
            removed = [str(m.get("id")) for m in point.get("removed") or [] if str(m.get("id")) in position]
            if removed:
                after = max(removed, key=lambda i: position[i])
        except SessionError:
            pass
        if after is None:
            after = _after_by_time(shown, rec.ts)
        out.append(Marker(rec, after, key == undo_id and rec.result is not Outcome.UNDONE))
    return out


def read_timeline(
    session: Session, problems: list[str]
) -> tuple[list[TimelineCall], list[CompactionRecord]]:
    """The recorded calls (damaged records skipped, with a problem), priced (engine.usage.costs.priced_call), and
    the compaction events."""
    records = session.read_records(problems)  # a damaged line must not take the whole timeline down
    table = price_table()
    timeline = [priced_call(r, table) for r in context_records(records)]
    return timeline, compaction_records(records)


def offloaded_files(session: Session) -> list[FileRow]:
    """The session's offloaded tool results; a file whose message left the context is previewed
    from the archive."""
    from engine.context.offload import list_offloaded

    files = [file_row(f, session) for f in list_offloaded(session.path)]
    gone = [f.message_id for f in files if f.message_id and not f.message_preview]
    if gone:
        found = {str(m.get("id")): m for m in archive.find(session.path, gone)}
        files = [replace(f, message_preview="(archived) " + preview(found[f.message_id], 70))
                 if f.message_id in found else f for f in files]
    return files


def session_view(session: Session, state: ContextState, default_model: str) -> SessionView:
    """Everything the window shows of ``session`` (its live state already computed)."""
    archived: list[Message] = []
    problems: list[str] = []
    for day in state.archive_days:
        try:
            archived.extend(archive.read_day(session.path, day, problems))
        except archive.ArchiveError as exc:
            problems.append(str(exc))
    messages = merge_archived(session.messages, archived)
    timeline, compaction_recs = read_timeline(session, problems)
    report = "" if session.load_report.clean else session.load_report.describe()
    if problems:
        report = "\n".join(p for p in (report, *problems[:5]) if p)
    last: tuple[int | None, int | None] = (None, None)
    if timeline:
        last = (timeline[-1].snapshot.prompt, timeline[-1].snapshot.provider_prompt_tokens)
    return SessionView(
        id=session.id,
        title=session.title,
        path=session.path,
        model=state.snapshot.model or default_model,
        messages=messages,
        state=state,
        markers=markers(session, compaction_recs, messages, state.undo_id),
        timeline=timeline,
        compactions=compaction_recs,
        files=offloaded_files(session),
        problems=report,
        last_call=last,
        subagents=subagent_marks(session.meta, [c.record for c in timeline], messages),
        imported=import_facts(session.meta),
        cost=folder_cost(session.path, records=timeline, events=session.read_records()),  # (read once: cached)
    )


def shown_as_view(view: SourceView, out: SessionView) -> SessionView:
    """The open session's view as a read-only view of ``view`` shows it (its title and import facts kept on
    ``view``)."""
    from engine.workbench import source_views as sv

    view.imported = out.imported
    if view.subagent:
        title = f"subagent {view.subagent.rsplit('/', 1)[-1]}"
    else:
        title = sv.view_title(out.messages, Path(view.source).name or out.title)
    view.title = title
    return replace(out, title=title, read_only=True, source=view.describe())


__all__ = [
    "ContextState",
    "FileRow",
    "Marker",
    "SessionRow",
    "SessionView",
    "call_record",
    "file_row",
    "markers",
    "merge_archived",
    "prompt_of",
    "session_row",
    "session_view",
    "shown_as_view",
]
