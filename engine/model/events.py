"""Dataclass events the engine emits and the UI / CLI subscribe to.

Every event has a ``type`` (its JSON tag) and serialises with :func:`event_to_json`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from engine.model.messages import Message, now_iso
from engine.model.snapshot import ContextSnapshot


class Trigger(StrEnum):
    """What started a compaction."""

    AUTO = "auto"  # post-turn, in the background
    PROACTIVE = "proactive"  # pre-call: the next request is over the window
    REACTIVE = "reactive"  # the provider refused the request as too long
    MANUAL = "manual"  # preview → apply, undo, /clear


TRIGGERS = tuple(t.value for t in Trigger)


class Outcome(StrEnum):
    """How a compaction ended (:attr:`CompactionEvent.result`). A failed compaction has this one
    form: a :class:`CompactionEvent` whose result is ``FAILED``, recorded in events.jsonl.
    (:class:`CompactionCancelled` is not a result: a compaction stopped before it could finish
    changed nothing and records nothing.)"""

    SUMMARIZED = "summarized"
    REPLACED = "replaced"  # an import's: the agent's file replaced the conversation without a summary it holds
    DROPPED = "dropped"
    UNDONE = "undone"
    NOTHING = "nothing"
    FAILED = "failed"


class AgentState(StrEnum):
    """What the agent is doing (:class:`StateChanged`)."""

    IDLE = "idle"
    STREAMING = "streaming"
    TOOL = "tool"
    COMPACTING = "compacting"
    LOADING = "loading"  # the model library is still loading (the model's window comes from it)
    IMPORTING = "importing"  # the workbench reads another agent's session file


@dataclass
class Event:
    type: ClassVar[str] = "event"


@dataclass
class MessageAdded(Event):
    type: ClassVar[str] = "message"
    message: Message
    tokens: int = 0


@dataclass
class TextDelta(Event):
    type: ClassVar[str] = "text_delta"
    message_id: str
    text: str
    reasoning: bool = False


@dataclass
class ToolCallStarted(Event):
    type: ClassVar[str] = "tool_call_started"
    call_id: str
    name: str
    arguments: str


@dataclass
class ToolCallFinished(Event):
    type: ClassVar[str] = "tool_call_finished"
    call_id: str
    name: str
    ok: bool
    result_preview: str
    result_bytes: int
    offload_path: str | None = None


@dataclass
class ContextUpdated(Event):
    """One per LLM call (and on demand): the regions of the request."""

    type: ClassVar[str] = "context"
    snapshot: ContextSnapshot


@dataclass
class CompactionStarted(Event):
    type: ClassVar[str] = "compaction_started"
    trigger: Trigger


@dataclass
class CompactionEvent(Event):
    """A compaction that finished (applied, or fell back); recorded in events.jsonl."""

    type: ClassVar[str] = "compaction"
    trigger: Trigger
    tokens_before: int
    tokens_after: int
    messages_compacted: int
    messages_kept: int
    duration_ms: float
    result: Outcome
    summary: str = ""
    reason: str = ""
    archive_day: str = ""
    ts: str = field(default_factory=now_iso)
    id: str = ""
    # what tokens_before / tokens_after count: the prompt as sent, without the output reserve
    # (engine.model.compaction_change)
    tokens_basis: str = "prompt"


@dataclass
class CompactionCancelled(Event):
    """A running compaction was cancelled (its session closed, the app quit): nothing changed and
    nothing is recorded. Its JSON tag stays ``compaction_failed`` (what ``ctxbench run`` prints)."""

    type: ClassVar[str] = "compaction_failed"
    trigger: Trigger
    reason: str = "cancelled"



@dataclass
class ErrorEvent(Event):
    type: ClassVar[str] = "error"
    kind: str  # context_window | transient | auth | bad_request | empty_response | tool | internal | cancelled
    message: str
    retrying: bool = False
    attempt: int = 0


@dataclass
class StateChanged(Event):
    type: ClassVar[str] = "state"
    state: AgentState


@dataclass
class TurnFinished(Event):
    type: ClassVar[str] = "turn_finished"
    ok: bool
    interrupted: bool = False
    iterations: int = 0
    final_text: str = ""


def event_to_json(event: Event) -> dict[str, Any]:
    """A flat JSON object with a ``type`` field; snapshots carry ``window`` and ``regions``."""
    if isinstance(event, ContextUpdated):
        data = event.snapshot.to_json()
        data["type"] = event.type
        return data
    data = asdict(event)
    data["type"] = event.type
    return data
