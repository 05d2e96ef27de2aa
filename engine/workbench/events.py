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

from dataclasses import dataclass, field, fields
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
    from engine.usage.index import IndexProgress
    from engine.usage.report import UsageReport
    from engine.usage.tool_costs import ToolCosts
    from engine.workbench.imported import ImportFacts
    from engine.workbench.rows import FileRow, ProblemRow, SessionRow, SourceRow
    from engine.workbench.views import ContextState, Marker, SessionView

NoticeLevel = Literal["info", "warning", "error"]


# a field the window is not handed (a guard of the service's: which session the result is of)
NOT_SENT = {"sent": False}


@dataclass
class WorkbenchEvent:
    """Base of the service's own events. The window's signal carries the event's fields in their order (typed:
    records, rows and view models, never dicts of them), but those marked ``NOT_SENT``."""

    def payload(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f.name) for f in fields(self) if f.metadata.get("sent", True))


@dataclass
class SessionsListed(WorkbenchEvent):
    sessions: list[SessionRow]


@dataclass
class SessionLoaded(WorkbenchEvent):
    view: SessionView


@dataclass
class ContextStateChanged(WorkbenchEvent):
    """After any change of the history (compaction, undo, restore, clear, the end of a turn)."""

    state: ContextState


@dataclass
class SnapshotChanged(WorkbenchEvent):
    """The next request's snapshot (throttled while streaming; the final one always comes)."""

    snapshot: ContextSnapshot


@dataclass
class CallRecorded(WorkbenchEvent):
    """An LLM call that happened: its record (the request's snapshot with the report) and its price."""

    record: TimelineCall


@dataclass
class CallUpdated(WorkbenchEvent):
    """A followed view's last call gained figures (a later line of its response raised its output tokens):
    its record again, to replace the timeline's last column."""

    record: TimelineCall


@dataclass
class LastCall(WorkbenchEvent):
    """The estimate made before the last call and the prompt tokens the provider reported."""

    predicted: int | None
    reported: int | None


@dataclass
class CompactionFinished(WorkbenchEvent):
    marker: Marker


@dataclass
class BusyChanged(WorkbenchEvent):
    busy: bool


@dataclass
class Notice(WorkbenchEvent):
    level: NoticeLevel
    text: str


@dataclass
class ApprovalRequested(WorkbenchEvent):
    request_id: str
    tool: str
    arguments: str  # JSON


@dataclass
class ApprovalsWithdrawn(WorkbenchEvent):
    """The approvals asked for are no longer awaited (their turn ended or was stopped)."""


@dataclass
class PreviewStarted(WorkbenchEvent):
    instruction: str


@dataclass
class PreviewReady(WorkbenchEvent):
    """The plan and the digest at once (``summary.model_pending``: the model's part is coming)."""

    preview: CompactionPreview


@dataclass
class PreviewSummary(WorkbenchEvent):
    """The same preview with the model's part in."""

    preview: CompactionPreview


@dataclass
class PreviewAfter(WorkbenchEvent):
    snapshot: ContextSnapshot


@dataclass
class PreviewFailed(WorkbenchEvent):
    reason: str


@dataclass
class PreviewClosed(WorkbenchEvent):
    """The compaction preview ended (applied, discarded or cancelled)."""


@dataclass
class OffloadedFileAdded(WorkbenchEvent):
    file: FileRow


@dataclass
class FileLoaded(WorkbenchEvent):
    path: str
    text: str


@dataclass
class ArchiveMessages(WorkbenchEvent):
    day: str
    messages: list[Message]
    tokens: dict[str, int] = field(default_factory=dict)


@dataclass
class ArchiveHits(WorkbenchEvent):
    query: str
    hits: list[ArchiveHit]


@dataclass
class DraftTokens(WorkbenchEvent):
    tokens: int


@dataclass
class SettingsChanged(WorkbenchEvent):
    settings: Settings


@dataclass
class ModelSuggestions(WorkbenchEvent):
    names: list[str]


@dataclass
class LlmReady(WorkbenchEvent):
    """litellm is imported (it loads in the background after start)."""


@dataclass
class SourcesListed(WorkbenchEvent):
    """The agent sessions on this machine (:class:`engine.workbench.rows.SourceRow`, newest first), and the files
    the scan could not read (:class:`engine.workbench.rows.ProblemRow`: left out, never stopping the others)."""

    sources: list[SourceRow]
    problems: list[ProblemRow] = field(default_factory=list)


@dataclass
class MessagesRetracted(WorkbenchEvent):
    """A followed view's last messages changed (a response grew, a rewind): these ids leave the chat,
    their new versions follow as ``MessageAdded`` (same ids where they are the same messages)."""

    ids: list[str]


@dataclass
class FollowChanged(WorkbenchEvent):
    """Following a source file started (``following``, its path) or stopped (False, ""); ``live``: the
    agent wrote it in the last two minutes (sent again when that changes)."""

    following: bool
    path: str
    live: bool = False


@dataclass
class DiffReady(WorkbenchEvent):
    """The context diff between two calls of the open session (:mod:`engine.workbench.analysis`)."""

    diff: ContextDiff
    session_id: str = field(default="", metadata=NOT_SENT)


@dataclass
class ToolsReady(WorkbenchEvent):
    """Tokens by tool of the open session and its largest tool results, each with where it is, and the
    dollar cost by tool (None: not computed, or the session recorded no call)."""

    attribution: Attribution
    locations: dict[str, str] = field(default_factory=dict)  # message id → "live" | archive day
    session_id: str = field(default="", metadata=NOT_SENT)
    costs: ToolCosts | None = None


@dataclass
class ImportChanged(WorkbenchEvent):
    """A followed view's import record changed (its agent's cost grew, its tools changed):
    the new :class:`engine.workbench.imported.ImportFacts` (``SessionView.imported``)."""

    facts: ImportFacts | None


@dataclass
class UsageReady(WorkbenchEvent):
    """What the agents on this machine spent over a date range (the answer to ``usage.refresh``):
    an :class:`engine.usage.report.UsageReport` (``updating``: newer figures follow)."""

    report: UsageReport


@dataclass
class UsageProgress(WorkbenchEvent):
    """How far the usage index's update has read (while a ``usage.refresh`` runs): an
    :class:`engine.usage.index.IndexProgress`; its ``said()`` is what the views show."""

    progress: IndexProgress


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
    "UsageProgress",
    "UsageReady",
    "WorkbenchEvent",
]
