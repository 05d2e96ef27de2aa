"""The lines of a session's ``events.jsonl``, typed: one frozen dataclass per kind of line.

Two kinds are written (:mod:`engine.store.session` is their one writer):

- :class:`ContextRecord` (``"type": "context"``): one provider call, the :class:`ContextSnapshot` of its request
  without the per-message counts, how many messages it held and, for an import, the figures the agent's file
  gave (cache, output, reasoning tokens, request id, ...).
- :class:`CompactionRecord` (``"type": "compaction"``): a compaction that finished (ours, from a
  :class:`engine.model.events.CompactionEvent`, or one an import found in the agent's file).

:func:`parse_record` reads one decoded line and dispatches on its ``type``; a line it cannot take raises
:class:`RecordError` naming what is wrong (the readers skip that line and say so:
:func:`engine.store.event_log.read_records`).
Each record's :meth:`to_json` is the line as written; fields a record does not declare (an import's extra
facts, a field a newer or older version wrote) are kept in ``extra`` and written back unchanged, so a line
read and written again is the same line. Lines already on disk in older shapes read: a compaction without
``tokens_basis``, ``id`` or ``ts``, a context record without ``message_count`` or with ``prefix_source`` null.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.model.compaction_change import PROMPT, REQUEST, CompactionChange, compaction_change
from engine.model.events import CompactionEvent, Outcome, event_to_json
from engine.model.snapshot import ContextSnapshot

CONTEXT = "context"
COMPACTION = "compaction"

# what ContextSnapshot.to_json adds beyond its fields (recomputed from them, never read back)
_DERIVED = frozenset({"regions", "history", "overflow"})
_SNAPSHOT_FIELDS = frozenset(ContextSnapshot.__dataclass_fields__)
# an import's per-call figures from the agent's file (None: the file did not say)
CALL_FIGURES = ("completion_tokens", "cache_read_tokens", "cache_write_tokens", "cache_write_1h_tokens",
                "reasoning_tokens")
_NULLABLE = frozenset({"message_id", "request_id", *CALL_FIGURES})


class RecordError(ValueError):
    """A line of events.jsonl that is not a record: the message names the problem; ``kind`` is the line's record
    type when it has a known one (its fields are what is wrong), ``detail`` the problem without it."""

    def __init__(self, detail: str, kind: str = "") -> None:
        super().__init__(f"{kind} record: {detail}" if kind else detail)
        self.kind = kind
        self.detail = detail


def _number(obj: Mapping[str, Any], key: str, *, optional: bool = True) -> int | None:
    value = obj.get(key)
    if value is None:
        if optional:
            return None
        raise RecordError(f"field {key!r} is missing")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RecordError(f"field {key!r} must be a number, got {str(value)[:40]!r}")
    return int(value)


def _text(obj: Mapping[str, Any], key: str, default: str = "") -> str:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise RecordError(f"field {key!r} must be a string, got {type(value).__name__}")
    return value


def _real(obj: Mapping[str, Any], key: str) -> float | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RecordError(f"field {key!r} must be a number, got {str(value)[:40]!r}")
    return float(value)


def _optional_text(obj: Mapping[str, Any], key: str) -> str | None:
    return None if obj.get(key) is None else _text(obj, key)


_SCALARS = (str, int, float, bool, type(None))
_recent_extras: tuple[dict[str, Any], ...] = ()  # the last few records' extra fields (see _shared_extra)
_RECENT_EXTRAS = 4


def _item(key: str, value: Any) -> tuple[str, type, Any]:
    return key, type(value), repr(value) if type(value) is float else value  # (-0.0 and 0.0 apart, as written)


def _shared_extra(extra: dict[str, Any]) -> dict[str, Any]:
    """``extra``, or an identical dict a recent record holds: one dict for the calls that write the same fields (a
    followed view's calls of one segment: ``segment``, ``exact_input``, ``prefix_tokens``… alike), not one a call. The
    same keys in the same order, each value of the same type and equal, scalars only; a record's ``extra`` is never
    changed (the record is frozen: :func:`dataclasses.replace` gives a new one the same dict)."""
    global _recent_extras
    if not all(type(v) in _SCALARS for v in extra.values()):
        return extra
    items = [_item(k, v) for k, v in extra.items()]
    recent = _recent_extras  # (one read: another thread may set a new tuple meanwhile, never change this one)
    for held in recent:
        if len(held) == len(extra) and [_item(k, v) for k, v in held.items()] == items:
            return held
    _recent_extras = (extra, *recent[:_RECENT_EXTRAS - 1])
    return extra


@dataclass(frozen=True, slots=True)  # (slots: one a call, for as long as a followed session grows)
class ContextRecord:
    """One provider call (a ``context`` line): its request's snapshot and the figures known of the call."""

    snapshot: ContextSnapshot
    message_count: int | None = None  # messages the request held (older lines lack it)
    message_id: str | None = None  # an import's: the first message after the request (None: the end)
    source_format: str = ""  # an import's: the agent's file format ("" for ctxbench's own calls)
    completion_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cache_write_1h_tokens: int | None = None
    reasoning_tokens: int | None = None
    request_id: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # fields this type does not declare, as written

    kind = CONTEXT

    @property
    def model(self) -> str:
        return self.snapshot.model

    @property
    def provider_prompt_tokens(self) -> int | None:
        return self.snapshot.provider_prompt_tokens

    @property
    def ts(self) -> str:
        return self.snapshot.ts

    @classmethod
    def from_snapshot(cls, snapshot: ContextSnapshot, message_count: int | None = None) -> ContextRecord:
        """The record of a call ctxbench made (:meth:`ContextSnapshot.call_record`)."""
        return cls.from_json(snapshot.call_record(message_count))

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ContextRecord:
        try:
            snapshot = ContextSnapshot.from_json(dict(obj))
        except ValueError as exc:
            raise RecordError(str(exc)) from None
        declared = {"message_count", "message_id", "source_format", "request_id", *CALL_FIGURES}
        extra = {k: v for k, v in obj.items()
                 if k not in _SNAPSHOT_FIELDS and k not in _DERIVED and k != "type"
                 and (k not in declared or (v is None and k in _NULLABLE))}  # a null as written stays one
        if obj.get("prefix_source") is None and "prefix_source" in obj:
            extra["prefix_source"] = None  # an import wrote null: written back as it was
        extra = _shared_extra(extra)
        figures = {key: _number(obj, key) for key in CALL_FIGURES}
        message_id = obj.get("message_id")
        return cls(snapshot=snapshot, message_count=_number(obj, "message_count"),
                   message_id=None if message_id is None else str(message_id),
                   source_format=_text(obj, "source_format"), request_id=_optional_text(obj, "request_id"),
                   extra=extra, **figures)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": CONTEXT}
        data.update(self.snapshot.to_json())
        data["message_tokens"] = [list(p) for p in self.snapshot.message_tokens]
        data.update(self.extra)  # the nulls are overwritten below by a value set since (dataclasses.replace)
        for key in ("message_count", "message_id", "request_id", *CALL_FIGURES):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        if self.source_format:
            data["source_format"] = self.source_format
        return data


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class CompactionCall:
    """What a compaction's own provider call consumed, as an import's file gave it (:attr:`CompactionRecord.call`):
    each figure None when the file did not say (or wrote something not a number)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    completion_placeholder: int | None = None  # the streaming placeholder a file holds instead of the output
    model: str = ""

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> CompactionCall:
        model = obj.get("model")
        return cls(prompt_tokens=_whole(obj.get("prompt_tokens")),
                   completion_tokens=_whole(obj.get("completion_tokens")),
                   cache_read_tokens=_whole(obj.get("cache_read_tokens")),
                   cache_write_tokens=_whole(obj.get("cache_write_tokens")),
                   completion_placeholder=_whole(obj.get("completion_placeholder")),
                   model=model if isinstance(model, str) else "")


@dataclass(frozen=True)
class CompactionRecord:
    """A compaction that finished (a ``compaction`` line): ours or one an import found in the agent's file."""

    trigger: str
    result: Outcome
    tokens_before: int | None = None  # an import's: None when the file did not say
    tokens_after: int | None = None
    messages_compacted: int = 0
    messages_kept: int | None = None
    duration_ms: float = 0.0
    summary: str = ""
    reason: str = ""
    archive_day: str = ""
    ts: str = ""
    id: str = ""
    tokens_basis: str = ""  # "prompt" (engine.model.compaction_change); older lines lack it
    source_format: str = ""  # an import's: the agent's file format
    cost: Mapping[str, Any] | None = None  # an import's: the figures of the compaction's own provider call
    cost_usd: float | None = None  # an import's: what compacting cost, by the agent's own figure
    calls_before: int | None = None  # an import's: how many of the session's calls came before it
    extra: Mapping[str, Any] = field(default_factory=dict)  # fields this type does not declare, as written

    kind = COMPACTION

    @property
    def call(self) -> CompactionCall | None:
        """The compaction's own provider call (an import's ``cost``), typed; None when the record has none."""
        return None if self.cost is None else CompactionCall.from_json(self.cost)

    # what an import's file adds (kept in ``extra``, read here once with their types checked)
    @property
    def post_tokens(self) -> int | None:
        """The agent's own count of the context right after compacting (Claude Code 2.1.3xx)."""
        return _whole(self.extra.get("post_tokens"))

    @property
    def dropped_tokens(self) -> int | None:
        """The tokens this compaction dropped, by the agent's running total
        (:func:`engine.sources.model.dropped_tokens`)."""
        return _whole(self.extra.get("dropped_tokens"))

    @property
    def placed_by(self) -> str:
        """"file order" when the boundary's link was missing and the file's order placed it, else ""/"chain"."""
        value = self.extra.get("placed_by")
        return value if isinstance(value, str) else ""

    @property
    def applied(self) -> bool:
        """The compaction changed the context (summarized, replaced, dropped)."""
        return self.result in (Outcome.SUMMARIZED, Outcome.REPLACED, Outcome.DROPPED)

    def change(self) -> CompactionChange:
        """The before → after every view shows (:func:`engine.model.compaction_change.event_change`)."""
        basis = self.tokens_basis or (PROMPT if self.source_format else REQUEST)
        return compaction_change(self.tokens_before, self.tokens_after, basis)

    @classmethod
    def from_event(cls, event: CompactionEvent) -> CompactionRecord:
        return cls.from_json(event_to_json(event))

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> CompactionRecord:
        result = obj.get("result")
        if result not in _OUTCOMES:
            raise RecordError(f"field 'result' must be one of {', '.join(_OUTCOMES)}, got {str(result)[:40]!r}")
        cost = obj.get("cost")
        if cost is not None and not isinstance(cost, dict):
            raise RecordError(f"field 'cost' must be an object, got {type(cost).__name__}")
        duration, usd = _real(obj, "duration_ms"), _real(obj, "cost_usd")
        extra = {k: v for k, v in obj.items() if k not in _COMPACTION_FIELDS and k != "type"
                 and (v is None or k not in ("cost", "cost_usd", "calls_before"))}
        return cls(trigger=_text(obj, "trigger"), result=Outcome(result),
                   tokens_before=_number(obj, "tokens_before"), tokens_after=_number(obj, "tokens_after"),
                   messages_compacted=_number(obj, "messages_compacted") or 0,
                   messages_kept=_number(obj, "messages_kept"), duration_ms=duration or 0.0,
                   summary=_text(obj, "summary"), reason=_text(obj, "reason"),
                   archive_day=_text(obj, "archive_day"), ts=_text(obj, "ts"), id=_text(obj, "id"),
                   tokens_basis=_text(obj, "tokens_basis"), source_format=_text(obj, "source_format"),
                   cost=None if cost is None else dict(cost), cost_usd=usd,
                   calls_before=_number(obj, "calls_before"), extra=extra)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "type": COMPACTION, "trigger": self.trigger, "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after, "messages_compacted": self.messages_compacted,
            "messages_kept": self.messages_kept, "duration_ms": self.duration_ms, "result": self.result.value,
            "summary": self.summary, "reason": self.reason, "archive_day": self.archive_day, "ts": self.ts,
            "id": self.id}
        if self.tokens_basis:
            data["tokens_basis"] = self.tokens_basis
        if self.source_format:
            data["source_format"] = self.source_format
        if self.cost is not None or "cost" in self.extra:
            data["cost"] = None if self.cost is None else dict(self.cost)
        for key in ("cost_usd", "calls_before"):
            if getattr(self, key) is not None or key in self.extra:
                data[key] = getattr(self, key)
        data.update((k, v) for k, v in self.extra.items() if k not in ("cost", "cost_usd", "calls_before"))
        return data


_OUTCOMES = tuple(o.value for o in Outcome)
# declared fields; a null cost, cost_usd or calls_before is kept in extra (written back as it was)
_COMPACTION_FIELDS = frozenset(CompactionRecord.__dataclass_fields__) - {"extra", "cost", "cost_usd", "calls_before"}

Record = ContextRecord | CompactionRecord
KINDS: dict[str, type[ContextRecord] | type[CompactionRecord]] = {CONTEXT: ContextRecord, COMPACTION: CompactionRecord}


def parse_record(obj: Any) -> Record:
    """The record of one decoded ``events.jsonl`` line, by its ``type``; :class:`RecordError` naming the problem
    (not an object, an unknown type, a field missing or of the wrong type)."""
    if not isinstance(obj, dict):
        raise RecordError(f"not a JSON object ({type(obj).__name__})")
    kind = obj.get("type")
    cls = KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        what = "no record type" if kind is None else f"unknown record type {str(kind)[:40]!r}"
        raise RecordError(f"{what} (expected one of {', '.join(KINDS)})")
    try:
        return cls.from_json(obj)
    except RecordError as exc:
        raise RecordError(exc.detail, cls.kind) from None


def records_json(records: Iterable[Record]) -> list[dict[str, Any]]:
    """The lines of ``records`` as written."""
    return [r.to_json() for r in records]


def context_records(records: Iterable[Record]) -> list[ContextRecord]:
    return [r for r in records if isinstance(r, ContextRecord)]


def compaction_records(records: Iterable[Record]) -> list[CompactionRecord]:
    return [r for r in records if isinstance(r, CompactionRecord)]
