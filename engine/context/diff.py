"""Context diff: what entered and what left the context between two provider calls.

A session's :class:`History` is every message in conversation order (those a compaction removed
included), the provider calls — each a :class:`CallPoint`: the slice ``messages[start:end]`` that was
in its context, and the compaction summary that stood in front of it — and the compactions'
summaries (:class:`SummaryPoint`). :func:`diff_calls` compares two calls: each message, tool result
and summary in one context and not the other, with its tokens (the per-message counts the timeline
draws: the heuristic estimator unless another is given), and the totals beside the provider's figures of both calls.

Histories come from a ctxbench session folder (:func:`history_from_folder`: its own sessions and
imported ones) or from a reader's :class:`engine.sources.model.SourceSession`
(:func:`history_from_source`, typed by a protocol so that this layer does not import the readers).
A call that the source records with its exact model input (SWE-agent) is taken as the slice of the
conversation it ends, like the others. Calls are numbered from 1, as the timeline and ``ctxbench
export`` number them. Tokens are counted on demand and memoised: a diff costs the messages that
differ, not the session.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from engine.context.tokens import Estimator, HeuristicEstimator
from engine.model.events import Outcome
from engine.model.messages import Message, content_text
from engine.model.messages import tool_calls_of as tool_calls_of  # (its home: a light module)
from engine.model.records import ContextRecord
from engine.store import archive
from engine.store.event_log import folder_records
from engine.store.fsutil import read_jsonl_objects

ItemKind = Literal["message", "tool_result", "summary"]
FIRST_LINE_CHARS = 100


class CallRangeError(ValueError):
    """A call number outside the session's calls; the text gives the valid range."""


@dataclass(frozen=True)
class CallPoint:
    """One provider call: ``messages[start:end]`` and summary ``summary`` (None: none) were its context."""

    number: int  # 1-based
    start: int
    end: int
    summary: int | None
    prompt_tokens: int | None  # the whole prompt as the provider counted it; None when unknown
    ts: str = ""
    model: str = ""


@dataclass(frozen=True)
class SummaryPoint:
    """The summary a compaction put in front of the context."""

    index: int  # the compaction's number, from 0
    text: str
    trigger: str = ""
    ts: str = ""


# --------------------------------------------------------------------------- the history


class History:
    """Messages, calls and summaries of one session, with per-message tokens counted on demand."""

    def __init__(self, messages: Sequence[Message], calls: Sequence[CallPoint], summaries: Sequence[SummaryPoint],
                 estimator: Estimator | None = None, label: str = "") -> None:
        self.messages: tuple[Message, ...] = tuple(messages)
        self.calls: tuple[CallPoint, ...] = tuple(calls)
        self.summaries: tuple[SummaryPoint, ...] = tuple(summaries)
        self.estimator: Estimator = estimator or HeuristicEstimator()
        self.label = label
        self._counts: list[int | None] = [None] * len(self.messages)
        self._summary_counts: dict[int, int] = {}
        self._names: dict[str, str] | None = None

    def tokens(self, index: int) -> int:
        """Tokens of message ``index`` (memoised)."""
        count = self._counts[index]
        if count is None:
            count = self._counts[index] = self.estimator.message(self.messages[index])
        return count

    def summary_tokens(self, index: int) -> int:
        count = self._summary_counts.get(index)
        if count is None:
            text = self.summaries[index].text
            count = self._summary_counts[index] = self.estimator.text(text) if text else 0
        return count

    def tool_names(self) -> dict[str, str]:
        """tool_call_id → tool name, from the assistants' tool calls."""
        if self._names is None:
            names: dict[str, str] = {}
            for msg in self.messages:
                if msg.get("tool_calls"):
                    for call_id, name, _args in tool_calls_of(msg):
                        if call_id:
                            names[call_id] = name
            self._names = names
        return self._names

    def call(self, number: int) -> CallPoint:
        """Call ``number`` (1-based); CallRangeError saying the valid range."""
        if not self.calls:
            raise CallRangeError(f"{self.label or 'the session'} has no provider call to compare")
        if not 1 <= number <= len(self.calls):
            raise CallRangeError(f"call {number} is out of range: {self.label or 'the session'} has calls "
                                 f"1 to {len(self.calls)}")
        return self.calls[number - 1]

    def tool_of(self, msg: Message) -> str:
        """The tool a tool result answers, or the tools an assistant message calls (comma-separated)."""
        if msg.get("role") == "tool":
            call_id = msg.get("tool_call_id")
            found = self.tool_names().get(call_id) if isinstance(call_id, str) else None
            name = msg.get("name")
            return found or (name if isinstance(name, str) else "")
        return ", ".join(dict.fromkeys(name for _id, name, _args in tool_calls_of(msg)))


def first_line(msg: Message, limit: int = FIRST_LINE_CHARS) -> str:
    """The first non-blank line of a message (its tool calls when it has no text), cut to ``limit``."""
    text = content_text(msg.get("content"))
    if not text.strip():
        text = ", ".join(f"{name}({args})" for _id, name, args in tool_calls_of(msg))
    return cut_line(text, limit)


def cut_line(text: str, limit: int = FIRST_LINE_CHARS) -> str:
    """The first non-blank line of ``text``, stripped and cut to ``limit`` (without splitting the rest)."""
    pos, n, line = 0, len(text), ""
    while pos < n and not line:
        nl = text.find("\n", pos)
        end = n if nl < 0 else nl
        line = text[pos:min(end, pos + 4 * limit)].strip()
        pos = end + 1
    return line if len(line) <= limit else line[: limit - 1] + "…"


# --------------------------------------------------------------------------- the diff


@dataclass(frozen=True)
class DiffItem:
    """A message, tool result or summary that entered or left the context."""

    kind: ItemKind
    message_id: str  # "" for a summary
    index: int  # position in History.messages; for a summary, the compaction's number
    role: str  # "summary" for a summary
    tool: str  # a tool result's tool; an assistant message's called tools; "" otherwise
    first_line: str
    tokens: int

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "message_id": self.message_id, "index": self.index, "role": self.role,
                "tool": self.tool, "first_line": self.first_line, "tokens": self.tokens}


@dataclass(frozen=True)
class ContextDiff:
    """From call ``a`` to call ``b``: what entered, what left (each in conversation order), the totals."""

    a: int
    b: int
    entered: tuple[DiffItem, ...]
    left: tuple[DiffItem, ...]
    compactions: tuple[int, ...]  # compactions between the two calls
    prompt_a: int | None
    prompt_b: int | None
    messages_a: int
    messages_b: int

    @property
    def entered_tokens(self) -> int:
        return sum(item.tokens for item in self.entered)

    @property
    def left_tokens(self) -> int:
        return sum(item.tokens for item in self.left)

    @property
    def net_tokens(self) -> int:
        return self.entered_tokens - self.left_tokens

    @property
    def prompt_delta(self) -> int | None:
        """The provider's prompt of B minus A's, when both are known."""
        return None if self.prompt_a is None or self.prompt_b is None else self.prompt_b - self.prompt_a

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "diff", "a": self.a, "b": self.b, "compactions": list(self.compactions),
            "entered_tokens": self.entered_tokens, "left_tokens": self.left_tokens, "net_tokens": self.net_tokens,
            "provider_prompt_tokens_a": self.prompt_a, "provider_prompt_tokens_b": self.prompt_b,
            "provider_prompt_delta": self.prompt_delta, "messages_a": self.messages_a, "messages_b": self.messages_b,
            "entered": [i.to_json() for i in self.entered], "left": [i.to_json() for i in self.left],
        }


def message_item(history: History, index: int) -> DiffItem:
    msg = history.messages[index]
    role = str(msg.get("role") or "")
    return DiffItem(kind="tool_result" if role == "tool" else "message", message_id=str(msg.get("id") or ""),
                    index=index, role=role, tool=history.tool_of(msg), first_line=first_line(msg),
                    tokens=history.tokens(index))


def summary_item(history: History, index: int) -> DiffItem:
    point = history.summaries[index]
    return DiffItem(kind="summary", message_id="", index=index, role="summary", tool="",
                    first_line=cut_line(point.text), tokens=history.summary_tokens(index))


def _outside(start: int, end: int, other_start: int, other_end: int) -> Iterator[int]:
    """Indices of [start, end) not in [other_start, other_end), in order."""
    yield from range(start, min(end, other_start))
    yield from range(max(start, other_end), end)


def _only_in(history: History, one: CallPoint, other: CallPoint) -> tuple[DiffItem, ...]:
    items = [message_item(history, i) for i in _outside(one.start, one.end, other.start, other.end)]
    if one.summary is not None and one.summary != other.summary and history.summaries[one.summary].text:
        items.insert(0, summary_item(history, one.summary))
    return tuple(items)


def diff_calls(history: History, a: int, b: int) -> ContextDiff:
    """What entered and left the context from call ``a`` to call ``b`` (1-based; ``a`` may be after ``b``).

    Raises CallRangeError for a number outside the session's calls."""
    ca, cb = history.call(a), history.call(b)
    ka = -1 if ca.summary is None else ca.summary
    kb = -1 if cb.summary is None else cb.summary
    return ContextDiff(
        a=a, b=b, entered=_only_in(history, cb, ca), left=_only_in(history, ca, cb),
        compactions=tuple(range(min(ka, kb) + 1, max(ka, kb) + 1)),
        prompt_a=ca.prompt_tokens, prompt_b=cb.prompt_tokens,
        messages_a=max(0, ca.end - ca.start), messages_b=max(0, cb.end - cb.start),
    )


# --------------------------------------------------------------------------- histories from sources


class SourceCallLike(Protocol):
    @property
    def message_index(self) -> int: ...

    @property
    def prompt_tokens(self) -> int | None: ...

    @property
    def ts(self) -> str: ...

    @property
    def model(self) -> str: ...


class SourceCompactionLike(Protocol):
    @property
    def message_index(self) -> int: ...

    @property
    def summary(self) -> str: ...

    @property
    def trigger(self) -> str: ...

    @property
    def ts(self) -> str: ...


class SourceLike(Protocol):
    """What :func:`history_from_source` reads of an :class:`engine.sources.model.SourceSession`."""

    @property
    def messages(self) -> list[Message]: ...

    @property
    def calls(self) -> Sequence[SourceCallLike]: ...

    @property
    def compactions(self) -> Sequence[SourceCompactionLike]: ...


def history_from_source(src: SourceLike, estimator: Estimator | None = None, label: str = "") -> History:
    """The history of a session read from another agent's file: call ``k``'s context is the messages
    from the last compaction before it up to the first message it produced, after that compaction's
    summary (as the import draws it)."""
    starts = [c.message_index for c in src.compactions]
    summaries = [SummaryPoint(i, c.summary or "", str(c.trigger), c.ts) for i, c in enumerate(src.compactions)]
    n = len(src.messages)
    calls = []
    for number, call in enumerate(src.calls, start=1):
        end = max(0, min(call.message_index, n))
        k = bisect.bisect_right(starts, end) - 1
        calls.append(CallPoint(number, starts[k] if k >= 0 else 0, end, k if k >= 0 else None,
                               call.prompt_tokens, call.ts, call.model))
    return History(src.messages, calls, summaries, estimator, label)


def _folder_messages(folder: Path, problems: list[str]) -> list[Message]:
    history_path = folder / "history.jsonl"
    live = [m for m in read_jsonl_objects(history_path, problems) if "role" in m] if history_path.exists() else []
    archived: list[Message] = []
    for day in archive.list_days(folder):
        try:
            archived.extend(archive.read_day(folder, day, problems))
        except archive.ArchiveError as exc:
            problems.append(str(exc))
    return archive.merge_archived(live, archived)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class _FolderCalls:
    """Turns a folder's ``context`` records into CallPoints."""

    def __init__(self, messages: Sequence[Message]) -> None:
        self.n = len(messages)
        self.pos = {str(m.get("id")): i for i, m in enumerate(messages)}
        self.ts = [str(m.get("ts") or "") for m in messages]

    def end_of(self, rec: ContextRecord) -> int:
        """Where the call's context ended: the first message it produced (imports record its id), else
        the messages written before the call's time (ctxbench's own calls)."""
        mid = rec.message_id
        if mid is not None and mid in self.pos:
            return self.pos[mid]
        if rec.source_format and mid is None:
            return self.n  # an import's last call produced no message that was kept
        return bisect.bisect_right(self.ts, rec.ts) if rec.ts else self.n

    def point(self, number: int, rec: ContextRecord, summary: int | None) -> CallPoint:
        end = self.end_of(rec)
        count = rec.message_count
        start = max(0, end - count) if count is not None else 0
        return CallPoint(number, start, end, summary, rec.provider_prompt_tokens, rec.ts, rec.model)


def folder_call_ends(messages: Sequence[Message], records: Sequence[ContextRecord]) -> list[int]:
    """For each ``context`` record of a session folder, the index in ``messages`` of the first message its
    call produced (``len(messages)`` when it produced none that was kept): :attr:`CallPoint.end`."""
    finder = _FolderCalls(messages)
    return [finder.end_of(rec) for rec in records]


def history_from_folder(folder: Path, estimator: Estimator | None = None,
                        problems: list[str] | None = None) -> History:
    """The history of a ctxbench session folder (its own or imported): messages from ``history.jsonl``
    and the dialog archive, calls and compactions from ``events.jsonl`` in the order they happened.
    Damaged lines are skipped and described in ``problems``."""
    folder = Path(folder)
    problems = [] if problems is None else problems
    messages = _folder_messages(folder, problems)
    finder = _FolderCalls(messages)
    calls: list[CallPoint] = []
    summaries: list[SummaryPoint] = []
    current: int | None = None
    for rec in folder_records(folder, problems):
        if isinstance(rec, ContextRecord):
            calls.append(finder.point(len(calls) + 1, rec, current))
        elif rec.applied:
            summaries.append(SummaryPoint(len(summaries), rec.summary, rec.trigger, rec.ts))
            current = len(summaries) - 1
        elif rec.result is Outcome.UNDONE:
            current = None
    return History(messages, calls, summaries, estimator, folder.name)
