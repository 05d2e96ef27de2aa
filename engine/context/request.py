"""The request sent to the model: built in one place, and its size kept as a running total.

:func:`build_request` is the one function that builds the message list sent to the model: one
system message (the system prompt, then :func:`summary_block`, which says where the archive is),
then the history in wire format (:func:`wire_history`). Tools travel beside it, not in it.

:class:`WireTally` keeps ``Σ estimate_message_tokens(wire_history(history))`` up to date as the history
grows, without building the request: the pre-call budget check
(:meth:`engine.context.compaction.Compactor.over_budget`) reads it in O(1) instead of re-estimating
10,000 messages. It follows the session's :class:`~engine.context.tokens.TokenLedger`: appends are
folded in one by one; any other edit (a compaction, an undo, a clear, a replaced message) makes it
count the history once more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.context.tokens import TokenLedger, estimate_message_tokens
from engine.model import messages as m
from engine.model.messages import Message

if TYPE_CHECKING:
    from engine.store.session import StoredSession

MISSING_RESULT = "[no result was recorded for this tool call (the run that made it was interrupted)]"
ORPHAN_PREFIX = "[output of an earlier tool call whose request is no longer in the context]\n"


def summary_block(summary: str, archive_days: Sequence[str] = ()) -> str:
    """The summary as injected into the request, telling the model where the archive is."""
    if not summary.strip():
        return ""
    where = (
        "Earlier messages are kept word for word in this session's dialog archive: "
        + ", ".join(f"dialog/{d}.jsonl" for d in archive_days)
        + " (one JSON message per line, newest at the end; read them with read_file)."
        if archive_days
        else "Earlier messages are kept word for word in this session's dialog archive (dialog/)."
    )
    return f"# Summary of the earlier conversation\n\n{summary.strip()}\n\n{where}"


def system_text(system_prompt: str, summary: str, archive_days: Sequence[str] = ()) -> str:
    """The text of the request's system message ("" when there is none)."""
    block = summary_block(summary, archive_days)
    return "\n\n".join(p for p in (system_prompt.strip(), block) if p)


def missing_result(call_id: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": MISSING_RESULT}


def orphan_message(msg: Message) -> Message:
    """A tool result whose call is not in the preceding assistant message, as sent: a user message."""
    return {"role": "user", "content": ORPHAN_PREFIX + m.content_text(msg.get("content"))}


def wire_history(history: Sequence[Message]) -> list[Message]:
    """The history as sent: wire keys only, every tool call answered right after its message.

    The stored history is kept valid by the agent, but an imported log or a crash can leave a call
    without a result or a result without its call; providers reject both. On the wire only (nothing
    stored changes): a missing result is filled with a note, and a result whose call is not in the
    preceding assistant message is sent as a user message after the run of results.
    """
    out: list[Message] = []
    pending: list[str] = []
    deferred: list[Message] = []

    def close_run() -> None:
        out.extend(missing_result(cid) for cid in pending)
        pending.clear()
        out.extend(deferred)
        deferred.clear()

    for msg in history:
        role = msg.get("role")
        if role == "tool":
            cid = str(msg.get("tool_call_id") or "")
            if cid in pending:
                pending.remove(cid)
                out.append(m.to_wire(msg))
            else:
                deferred.append(orphan_message(msg))
            continue
        close_run()
        wire = m.to_wire(msg)
        if role == "assistant":
            if wire.get("content") is None and not wire.get("tool_calls"):
                wire["content"] = ""
            pending.extend(m.call_ids(msg))
        out.append(wire)
    close_run()
    return out


def build_request(
    system_prompt: str,
    summary: str,
    history: Sequence[Message],
    *,
    archive_days: Sequence[str] = (),
) -> list[Message]:
    """The one function that builds the message list sent to the model.

    One system message (the system prompt, then the summary block that says where the archive is),
    then the history in wire format (:func:`wire_history`). Tools travel beside it, not in it.
    """
    text = system_text(system_prompt, summary, archive_days)
    out: list[Message] = [{"role": "system", "content": text}] if text else []
    out.extend(wire_history(history))
    return out


@dataclass(frozen=True)
class SessionRequest:
    """The request a session's next model call sends (what :func:`build_request` makes of its
    summary and history); calling it builds that request. The pre-call budget check recognises it
    and measures the request from running totals instead of building it."""

    session: StoredSession
    system_prompt: str

    def __call__(self) -> list[Message]:
        s = self.session
        return build_request(self.system_prompt, s.summary, s.messages, archive_days=s.archive_days())


def system_message_tokens(text: str) -> int:
    """Heuristic tokens of the request's system message (0 when there is none)."""
    return estimate_message_tokens({"role": "system", "content": text}) if text else 0


def wire_delta(msg: Message) -> int:
    """estimate(to_wire(msg)) − estimate(msg): what the wire form adds or drops (0 for almost every
    message: only tool calls with missing fields, or reasoning on a non-assistant message, differ)."""
    calls = msg.get("tool_calls")
    reasoning = msg.get("reasoning_content")
    if not calls and not (reasoning and msg.get("role") != "assistant"):
        return 0
    return estimate_message_tokens(m.to_wire(msg)) - estimate_message_tokens(msg)


@dataclass
class WireTally:
    """``Σ estimate(wire_history(messages)) − Σ estimate(messages)``, kept in step with a ledger.

    :meth:`correction` adds it to the ledger's running total to give the heuristic size of the
    request's history exactly as :func:`wire_history` would send it, in O(new messages).
    """

    ledger: TokenLedger | None = None
    revision: int = -1
    seen: int = 0  # messages folded in
    closed: int = 0  # corrections of the messages seen and of the runs already closed
    pending: list[str] = field(default_factory=list)  # calls of the open run still without a result
    deferred: int = 0  # tokens of the open run's orphans, sent as user messages when it closes

    def correction(self, messages: Sequence[Message], ledger: TokenLedger) -> int:
        if ledger is not self.ledger or ledger.revision != self.revision or len(messages) < self.seen:
            self._reset(ledger)
        for i in range(self.seen, len(messages)):
            self._fold(messages[i])
        self.seen = len(messages)
        missing = sum(estimate_message_tokens(missing_result(cid)) for cid in self.pending)
        return self.closed + missing + self.deferred

    def _reset(self, ledger: TokenLedger) -> None:
        self.ledger, self.revision = ledger, ledger.revision
        self.seen = self.closed = self.deferred = 0
        self.pending = []

    def _fold(self, msg: Message) -> None:
        role = msg.get("role")
        if role == "tool":
            cid = str(msg.get("tool_call_id") or "")
            if cid in self.pending:
                self.pending.remove(cid)
                self.closed += wire_delta(msg)
            else:
                self.deferred += estimate_message_tokens(orphan_message(msg))
                self.closed -= estimate_message_tokens(msg)
            return
        self.closed += sum(estimate_message_tokens(missing_result(cid)) for cid in self.pending) + self.deferred
        self.pending, self.deferred = [], 0
        self.closed += wire_delta(msg)
        if role == "assistant":
            self.pending.extend(m.call_ids(msg))
