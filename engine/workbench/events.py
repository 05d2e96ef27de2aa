"""Typed events the Workbench service sends to its listener (the Qt bridge, the CLI, a test).

The engine's own events (:mod:`engine.model.events`) that reach the window unchanged are passed on
as they are: :class:`MessageAdded`, :class:`TextDelta`, :class:`ToolCallStarted`,
:class:`ToolCallFinished`, :class:`CompactionStarted`, :class:`CompactionCancelled`,
:class:`ErrorEvent`, :class:`TurnFinished`; :class:`StateChanged` carries the service's state
(``idle | loading | streaming | tool | compacting | importing``). The classes below are what the
service adds. Every event has :meth:`payload`: the arguments a listener that speaks positional
signals passes on (the Qt bridge maps the event's type to a signal and emits ``*payload()``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from engine.model.events import (
    CompactionCancelled,
    CompactionStarted,
    ErrorEvent,
    MessageAdded,
    StateChanged,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
)
from engine.model.messages import Message
from engine.model.snapshot import ContextSnapshot
from engine.model.timeline import TimelineCall
from engine.store.config import Settings

if TYPE_CHECKING:
    from engine.context.attribution import Attribution
    from engine.context.compaction import CompactionPreview
    from engine.context.diff import ContextDiff
    from engine.store.archive import ArchiveHit
    from engine.usage.report import UsageReport
    from engine.usage.tool_costs import ToolCosts
    from engine.workbench.imported import ImportFacts
    from engine.workbench.rows import FileRow, SessionRow
    from engine.workbench.views import ContextState, Marker, SessionView

NoticeLevel = Literal["info", "warning", "error"]


@dataclass
class WorkbenchEvent:
    """Base of the service's own events."""

    def payload(self) -> tuple[Any, ...]:
        return (self,)


@dataclass
class SessionsListed(WorkbenchEvent):
    sessions: list[SessionRow]

    def payload(self) -> tuple[Any, ...]:
        return (self.sessions,)


@dataclass
class SessionLoaded(WorkbenchEvent):
    view: SessionView

    def payload(self) -> tuple[Any, ...]:
        return (self.view,)


@dataclass
class ContextStateChanged(WorkbenchEvent):
    """After any change of the history (compaction, undo, restore, clear, the end of a turn)."""

    state: ContextState

    def payload(self) -> tuple[Any, ...]:
        return (self.state,)


@dataclass
class SnapshotChanged(WorkbenchEvent):
    """The next request's snapshot (throttled while streaming; the final one always comes)."""

    snapshot: ContextSnapshot

    def payload(self) -> tuple[Any, ...]:
        return (self.snapshot,)


@dataclass
class CallRecorded(WorkbenchEvent):
    """An LLM call that happened: its record (the request's snapshot with the report) and its price."""

    record: TimelineCall

    def payload(self) -> tuple[Any, ...]:
        return (self.record,)


@dataclass
class CallUpdated(WorkbenchEvent):
    """A followed view's last call gained figures (a later line of its response raised its output tokens):
    its record again, to replace the timeline's last column."""

    record: TimelineCall

    def payload(self) -> tuple[Any, ...]:
        return (self.record,)


@dataclass
class LastCall(WorkbenchEvent):
    """The estimate made before the last call and the prompt tokens the provider reported."""

    predicted: int | None
    reported: int | None

    def payload(self) -> tuple[Any, ...]:
        return (self.predicted, self.reported)


@dataclass
class CompactionFinished(WorkbenchEvent):
    marker: Marker

    def payload(self) -> tuple[Any, ...]:
        return (self.marker,)


@dataclass
class BusyChanged(WorkbenchEvent):
    busy: bool

    def payload(self) -> tuple[Any, ...]:
        return (self.busy,)


@dataclass
class Notice(WorkbenchEvent):
    level: NoticeLevel
    text: str

    def payload(self) -> tuple[Any, ...]:
        return (self.level, self.text)


@dataclass
class ApprovalRequested(WorkbenchEvent):
    request_id: str
    tool: str
    arguments: str  # JSON

    def payload(self) -> tuple[Any, ...]:
        return (self.request_id, self.tool, self.arguments)


@dataclass
class ApprovalsWithdrawn(WorkbenchEvent):
    def payload(self) -> tuple[Any, ...]:
        return ()


@dataclass
class PreviewStarted(WorkbenchEvent):
    instruction: str

    def payload(self) -> tuple[Any, ...]:
        return (self.instruction,)


@dataclass
class PreviewReady(WorkbenchEvent):
    """The plan and the digest at once (``summary.model_pending``: the model's part is coming)."""

    preview: CompactionPreview

    def payload(self) -> tuple[Any, ...]:
        return (self.preview,)


@dataclass
class PreviewSummary(WorkbenchEvent):
    """The same preview with the model's part in."""

    preview: CompactionPreview

    def payload(self) -> tuple[Any, ...]:
        return (self.preview,)


@dataclass
class PreviewAfter(WorkbenchEvent):
    snapshot: ContextSnapshot

    def payload(self) -> tuple[Any, ...]:
        return (self.snapshot,)


@dataclass
class PreviewFailed(WorkbenchEvent):
    reason: str

    def payload(self) -> tuple[Any, ...]:
        return (self.reason,)


@dataclass
class PreviewClosed(WorkbenchEvent):
    def payload(self) -> tuple[Any, ...]:
        return ()


@dataclass
class OffloadedFileAdded(WorkbenchEvent):
    file: FileRow

    def payload(self) -> tuple[Any, ...]:
        return (self.file,)


@dataclass
class FileLoaded(WorkbenchEvent):
    path: str
    text: str

    def payload(self) -> tuple[Any, ...]:
        return (self.path, self.text)


@dataclass
class ArchiveMessages(WorkbenchEvent):
    day: str
    messages: list[Message]
    tokens: dict[str, int] = field(default_factory=dict)

    def payload(self) -> tuple[Any, ...]:
        return (self.day, self.messages, self.tokens)


@dataclass
class ArchiveHits(WorkbenchEvent):
    query: str
    hits: list[ArchiveHit]

    def payload(self) -> tuple[Any, ...]:
        return (self.query, self.hits)


@dataclass
class DraftTokens(WorkbenchEvent):
    tokens: int

    def payload(self) -> tuple[Any, ...]:
        return (self.tokens,)


@dataclass
class SettingsChanged(WorkbenchEvent):
    settings: Settings

    def payload(self) -> tuple[Any, ...]:
        return (self.settings,)


@dataclass
class ModelSuggestions(WorkbenchEvent):
    names: list[str]

    def payload(self) -> tuple[Any, ...]:
        return (self.names,)


@dataclass
class LlmReady(WorkbenchEvent):
    """litellm is imported (it loads in the background after start)."""

    def payload(self) -> tuple[Any, ...]:
        return ()


@dataclass
class SourcesListed(WorkbenchEvent):
    """The agent sessions on this machine (``engine.workbench.sources.source_dict`` dicts, newest first), and the
    files the scan could not read (``{"agent", "path", "reason"}``: left out, never stopping the others)."""

    sources: list[dict[str, Any]]
    problems: list[dict[str, Any]] = field(default_factory=list)

    def payload(self) -> tuple[Any, ...]:
        return (self.sources, self.problems)


@dataclass
class MessagesRetracted(WorkbenchEvent):
    """A followed view's last messages changed (a response grew, a rewind): these ids leave the chat,
    their new versions follow as ``MessageAdded`` (same ids where they are the same messages)."""

    ids: list[str]

    def payload(self) -> tuple[Any, ...]:
        return (self.ids,)


@dataclass
class FollowChanged(WorkbenchEvent):
    """Following a source file started (``following``, its path) or stopped (False, ""); ``live``: the
    agent wrote it in the last two minutes (sent again when that changes)."""

    following: bool
    path: str
    live: bool = False

    def payload(self) -> tuple[Any, ...]:
        return (self.following, self.path, self.live)


@dataclass
class DiffReady(WorkbenchEvent):
    """The context diff between two calls of the open session (:mod:`engine.workbench.analysis`)."""

    diff: ContextDiff
    session_id: str = ""

    def payload(self) -> tuple[Any, ...]:
        return (self.diff,)


@dataclass
class ToolsReady(WorkbenchEvent):
    """Tokens by tool of the open session and its largest tool results, each with where it is, and the
    dollar cost by tool (None: not computed, or the session recorded no call)."""

    attribution: Attribution
    locations: dict[str, str] = field(default_factory=dict)  # message id → "live" | archive day
    session_id: str = ""
    costs: ToolCosts | None = None

    def payload(self) -> tuple[Any, ...]:
        return (self.attribution, self.locations, self.costs)


@dataclass
class ImportChanged(WorkbenchEvent):
    """A followed view's import record changed (its agent's cost grew, its tools changed):
    the new :class:`engine.workbench.imported.ImportFacts` (``SessionView.imported``)."""

    facts: ImportFacts | None

    def payload(self) -> tuple[Any, ...]:
        return (self.facts,)


@dataclass
class UsageReady(WorkbenchEvent):
    """What the agents on this machine spent over a date range (the answer to ``usage.refresh``):
    an :class:`engine.usage.report.UsageReport` (``updating``: newer figures follow)."""

    report: UsageReport

    def payload(self) -> tuple[Any, ...]:
        return (self.report,)


__all__ = [
    "ApprovalRequested",
    "ApprovalsWithdrawn",
    "ArchiveHits",
    "ArchiveMessages",
    "BusyChanged",
    "CallRecorded",
    "CallUpdated",
    "CompactionCancelled",
    "CompactionFinished",
    "CompactionStarted",
    "ContextStateChanged",
    "DiffReady",
    "DraftTokens",
    "ErrorEvent",
    "FileLoaded",
    "FollowChanged",
    "ImportChanged",
    "LastCall",
    "LlmReady",
    "MessageAdded",
    "MessagesRetracted",
    "ModelSuggestions",
    "Notice",
    "NoticeLevel",
    "OffloadedFileAdded",
    "PreviewAfter",
    "PreviewClosed",
    "PreviewFailed",
    "PreviewReady",
    "PreviewStarted",
    "PreviewSummary",
    "SessionLoaded",
    "SessionsListed",
    "SettingsChanged",
    "SnapshotChanged",
    "SourcesListed",
    "StateChanged",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolsReady",
    "TurnFinished",
    "UsageReady",
    "WorkbenchEvent",
]
