"""Following a session file that an agent is still writing: the provider calls and compactions as
they appear, read incrementally.

Three layers, none of them holding the file's lines:

- :class:`Tail` remembers the byte offset and reads only what was appended. A partial last line waits
  (its bytes are kept) until its newline arrives. A file that was replaced (another inode), truncated
  (smaller than the offset) or rewritten in place (its first bytes, or the bytes just before the
  offset, changed) is read again from the start, and the reset is reported. The file is opened for
  each read and closed again: never written, locked or held open.
- A parser per format turns complete lines into calls and compactions, with the same figures as the
  full readers (:mod:`engine.sources.claude_code`, :mod:`engine.sources.codex`):

  * Claude Code: one call per (``message.id``, ``requestId``). The prompt figures are on the first
    line of a response; its later lines (one per content block, possibly after tool results) may
    raise ``output_tokens``; each figure is the largest seen (:func:`claude_code.merge_usage`). A
    call is *final* once an assistant line of another call appears (a response's lines never come
    back after the next request's). Compactions: ``compact_boundary`` lines (and, as before Claude
    Code 2.0, a summary without one); ``tokens_after`` is the prompt of the first call after it.
  * Codex: one call per ``token_usage_record`` (newer versions) or ``token_count`` event whose
    ``total_token_usage`` changed, the two lines of one response paired as the reader does (each call
    is final at once; a record read after its ``token_count`` updates the call); ``compacted`` /
    ``context_compacted`` are compactions, their trigger inferred as the reader does (mid-turn: auto,
    in its own turn: manual), and the call after the summariser's answer (``compaction_output``) is
    the compaction's cost, not a call.

- :class:`Follower` joins them and decides when to report:

  * a call is reported (``call``) when it is final, or when the data the file holds now has been
    read and it is still open (then a reader sees it at once: the prompt, which is what fills the
    context, is already final). If a later line of a reported call changes a figure (Claude Code's
    output tokens), a ``call_update`` with the same ``index`` carries the new figures. Reading a
    whole file at once therefore gives each closed call once, with the full reader's figures;
  * a compaction is reported when its line is read (``compaction``); when its ``tokens_after`` is
    learnt later (the next call), a ``compaction_update`` carries it;
  * ``reset``: the file was truncated, replaced or rewritten; what follows is read from its start.

Differences from the full readers, by construction: a Claude Code call's ``window`` is the one known
when it is reported (1M once a prompt above 200k has been seen, as the reader infers for the whole
file); lines off the conversation's chain (rewinds) cannot be told apart while the file grows, so a
compaction on an abandoned branch is reported (the reader drops it).

Memory stays flat: the parsers keep only the open calls of the last :data:`MAX_OPEN_CALLS` keys, the
compactions still waiting for their ``tokens_after``, and a few figures.

Watching is polling: :data:`POLL_INTERVAL` seconds (a ``stat`` per poll, the file opened only when it
changed). No watcher library is a dependency of the engine.
"""

from __future__ import annotations

import json
import os
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from engine.sources.claude_code import SYNTHETIC_MODEL, merge_usage, window_for_model
from engine.sources.codex import (
    PREFIX_KEY,
    Pairing,
    base_instructions,
    call_from_record,
    call_from_usage,
    read_token_count,
)
from engine.sources.detect import HEAD_BYTES, detect_format
from engine.sources.model import (
    Compaction,
    ProviderCall,
    SourceError,
    SourceFormat,
    dict_at,
    expand_redacted,
    int_or_none,
    iso,
    text_of,
    trigger_of,
)

POLL_INTERVAL = 0.2  # seconds between two looks at the file
CHUNK = 1 << 20  # bytes read at a time
SIGNATURE = 64  # bytes compared at the start of the file and before the offset to notice a rewrite
MAX_OPEN_CALLS = 64  # call keys remembered for de-duplication (a response's lines never outlive the next call)
FOLLOWABLE: tuple[SourceFormat, ...] = ("claude-code", "codex")

EventKind = Literal["call", "call_update", "compaction", "compaction_update", "reset"]
ResetReason = Literal["truncated", "replaced", "rewritten"]
_decode = json.JSONDecoder().decode


@dataclass(frozen=True)
class FollowEvent:
    """Something new in the followed file; ``call`` / ``compaction`` are copies (never changed later)."""

    kind: EventKind
    call: ProviderCall | None = None
    compaction: Compaction | None = None
    reason: str = ""  # for a reset


# --------------------------------------------------------------------------- the file


class Tail:
    """The complete lines appended to one file since the last :meth:`read`."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.offset = 0  # bytes consumed, the partial line included
        self.partial = bytearray()
        self._ident: tuple[int, int] | None = None
        self._stamp: tuple[int, int] = (-1, -1)  # (size, mtime_ns) at the last read
        self._head = b""  # the file's first bytes, as read
        self._last = b""  # the last bytes read (just before ``offset``)

    def _reset(self) -> None:
        self.offset = 0
        self.partial.clear()
        self._head = self._last = b""

    def _changed_under_us(self, fh: Any, st: os.stat_result) -> ResetReason | None:
        ident = (st.st_dev, st.st_ino)
        if self._ident is not None and ident != self._ident:
            return "replaced"
        if st.st_size < self.offset:
            return "truncated"
        if self.offset and (st.st_size, st.st_mtime_ns) != self._stamp:
            head = fh.read(len(self._head))
            fh.seek(self.offset - len(self._last))
            if head != self._head or fh.read(len(self._last)) != self._last:
                return "rewritten"
        return None

    def read(self, limit: int = CHUNK) -> tuple[list[bytes], ResetReason | None, bool]:
        """(complete lines, why the file was re-read from its start or None, whether more is waiting).

        A missing file reads as nothing (it may be being replaced)."""
        try:
            fh = open(self.path, "rb")  # closed below: never held between reads
        except FileNotFoundError:
            return [], None, False
        with fh:
            st = os.fstat(fh.fileno())
            reason = self._changed_under_us(fh, st)
            if reason is not None:
                self._reset()
            self._ident = (st.st_dev, st.st_ino)
            fh.seek(self.offset)
            data = fh.read(limit)
            self._stamp = (st.st_size, st.st_mtime_ns)
        if not data:
            return [], reason, False
        if len(self._head) < SIGNATURE:
            self._head = (self._head + data)[:SIGNATURE]
        self.offset += len(data)
        self._last = (self._last + data)[-SIGNATURE:]
        more = self.offset < st.st_size
        cut = data.rfind(b"\n")
        if cut < 0:
            self.partial += data
            return [], reason, more
        block = bytes(self.partial) + data[: cut + 1]
        self.partial = bytearray(data[cut + 1:])
        return block.splitlines(), reason, more


class LineLog:
    """The complete lines of a followed file, kept as a :class:`Tail` reads them, so that a view of
    the file is rebuilt from memory: the file is read once, then only what is appended.

    ``feed`` reads everything appended; a reset (truncated, replaced, rewritten) drops what was kept,
    and the Tail reads the file again from its start. Memory: the file's size, whatever the time."""

    def __init__(self, tail: Tail) -> None:
        self.tail = tail
        self.lines: list[bytes] = []  # each with its newline, as read_json_lines takes them
        self.size = 0  # bytes kept

    def feed(self) -> tuple[bool, bool]:
        """Read what was appended: (any complete line came, the file was reset)."""
        got = reset = False
        more = True
        while more:
            lines, why, more = self.tail.read()
            if why is not None:
                reset = True
                self.lines.clear()
                self.size = 0
            for line in lines:
                self.lines.append(line + b"\n")
                self.size += len(line) + 1
            got = got or bool(lines)
        return got, reset


# --------------------------------------------------------------------------- parsers


@dataclass
class _Parsed:
    """What the lines fed since the last take produced, in file order."""

    new: list[ProviderCall | Compaction] = field(default_factory=list)
    changed_calls: dict[int, ProviderCall] = field(default_factory=dict)
    changed_compactions: dict[int, Compaction] = field(default_factory=dict)


class _Parser(ABC):
    """Common part: the calls still open, the compactions waiting for ``tokens_after``."""

    def __init__(self) -> None:
        self.calls: OrderedDict[Any, ProviderCall] = OrderedDict()  # key -> call, the last few only
        self.last_compaction: Compaction | None = None
        self.call_count = 0
        self.compaction_count = 0
        self.waiting: list[Compaction] = []  # compactions without tokens_after yet
        self.open_index: int | None = None  # a call later lines may still change
        self.out = _Parsed()
        self.skipped = 0  # complete lines that are not JSON objects

    def take(self) -> _Parsed:
        out, self.out = self.out, _Parsed()
        return out

    def _new_call(self, key: Any, call: ProviderCall) -> None:
        self.calls[key] = call
        while len(self.calls) > MAX_OPEN_CALLS:
            self.calls.popitem(last=False)
        self.call_count += 1
        self.out.new.append(call)

    def _new_compaction(self, comp: Compaction) -> None:
        self.compaction_count += 1
        self.waiting.append(comp)
        self.last_compaction = comp
        self.out.new.append(comp)

    def _settle_after(self, call: ProviderCall) -> None:
        """``tokens_after`` of the compactions before ``call`` (the first call after them with a prompt)."""
        if not self.waiting or not call.prompt_tokens:
            return
        still = []
        for comp in self.waiting:
            if call.index >= comp.calls_before:
                comp.tokens_after = call.prompt_tokens
                self.out.changed_compactions[comp.index] = comp
            else:
                still.append(comp)
        self.waiting = still

    def feed(self, raw: bytes) -> None:
        if not raw.strip():
            return
        try:
            obj = _decode(raw.decode("utf-8"))
        except (ValueError, RecursionError):
            self.skipped += 1
            return
        if isinstance(obj, dict):
            self.line(obj)
        else:
            self.skipped += 1

    @abstractmethod
    def line(self, obj: dict[str, Any]) -> None:
        """Take one line's object (a JSON object of the format)."""


class ClaudeCodeParser(_Parser):
    def __init__(self) -> None:
        super().__init__()
        self.largest_prompt = 0
        self.messages_since_boundary = 0

    def line(self, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        uid = obj.get("uuid")
        ts = iso(obj.get("timestamp"))
        if kind == "system":
            if obj.get("subtype") == "compact_boundary" and isinstance(uid, str):
                meta = dict_at(obj, "compactMetadata")
                trigger = str(meta.get("trigger") or "")
                self._compaction(trigger, ts, int_or_none(meta.get("preTokens")))
                self.messages_since_boundary = 0
            return
        msg = obj.get("message")
        if kind not in ("user", "assistant") or not isinstance(uid, str) or not isinstance(msg, dict):
            return
        if kind == "user" and obj.get("isCompactSummary"):
            last = self.last_compaction
            if last is None or last.summary or self.messages_since_boundary:
                last = self._compaction("", ts, None)  # a summary without its boundary line (before 2.0)
            last.summary = text_of(msg.get("content"))
            return
        self.messages_since_boundary += 1
        if kind == "assistant":
            self._assistant(obj, msg, uid, ts)

    def _compaction(self, trigger: str, ts: str, before: int | None) -> Compaction:
        comp = Compaction(index=self.compaction_count, trigger=trigger_of(trigger), trigger_source=trigger, ts=ts,
                          message_index=0, calls_before=self.call_count, tokens_before=before)
        self._new_compaction(comp)
        self.open_index = None
        return comp

    def _assistant(self, obj: dict[str, Any], msg: dict[str, Any], uid: str, ts: str) -> None:
        key = (str(msg.get("id") or uid), str(obj.get("requestId") or ""))
        model = str(msg.get("model") or "")
        usage = msg.get("usage")
        if model == SYNTHETIC_MODEL or not isinstance(usage, dict):
            return
        call = self.calls.get(key)
        if call is None:
            call = ProviderCall(self.call_count, None, None, None, None, model=model, ts=ts, request_id=key[1])
            self._new_call(key, call)
        before = (call.prompt_tokens, call.completion_tokens, call.cache_read_tokens, call.cache_write_tokens)
        merge_usage(call, usage)
        self.largest_prompt = max(self.largest_prompt, call.prompt_tokens or 0)
        window, _ = window_for_model(call.model, self.largest_prompt)
        if call.window is None or window > call.window:
            call.window = window
        after = (call.prompt_tokens, call.completion_tokens, call.cache_read_tokens, call.cache_write_tokens)
        if after != before:
            self.out.changed_calls[call.index] = call
        self.open_index = call.index
        self._settle_after(call)


class CodexParser(_Parser):
    _WANTED = (b'"token_count"', b'"turn_context"', b"compacted", b'"task_started"', b'"token_usage_record"',
               b'"session_meta"', b'"compaction_output":true')

    def __init__(self) -> None:
        super().__init__()
        self.ts = ""
        self.model = ""
        self.window: int | None = None
        self.last_total: Any = None
        self.last_prompt: int | None = None
        self.turn_open = False
        self.compaction_pending = False
        self.prefix_key = ""  # PREFIX_KEY once session_meta gave the system prompt itself
        self.pairing = Pairing()
        self.summarising = False  # the summariser's answer was read: the next call is the compaction's
        self.compaction_cost: ProviderCall | None = None

    def feed(self, raw: bytes) -> None:
        # only these lines matter for calls and compactions; the rest (messages, tool output) is skipped unparsed
        if any(key in raw for key in self._WANTED):
            super().feed(raw)

    def line(self, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        payload = dict_at(obj, "payload")
        self.ts = iso(obj.get("timestamp")) or self.ts
        if kind == "session_meta":
            text = base_instructions(payload)
            if text and expand_redacted(text) == text:  # the text itself, not a publisher's stand-in
                self.prefix_key = PREFIX_KEY
        elif kind == "turn_context":
            self.model = str(payload.get("model") or self.model)
        elif kind == "response_item":
            if dict_at(obj, "metadata").get("compaction_output") is True:
                self.summarising = True
        elif kind == "token_usage_record":
            record = call_from_record(payload, index=self.call_count, model=self.model, ts=self.ts,
                                      window=self.window)
            if record is not None:
                same = self.pairing.record(record)
                if same is None:
                    self._take(record)
                elif same.index >= 0:
                    self.out.changed_calls[same.index] = same
        elif kind == "compacted":
            self._compacted()
        elif kind == "event_msg":
            etype = payload.get("type")
            if etype == "token_count":
                self._token_count(payload)
            elif etype == "task_started":
                self.window = int_or_none(payload.get("model_context_window")) or self.window
                self.turn_open = False
            elif etype == "context_compacted" and not self.compaction_pending:
                self._compacted()

    def _token_count(self, payload: dict[str, Any]) -> None:
        count = read_token_count(payload, self.last_total)
        if count is None:
            return
        self.window = count.window or self.window
        if not count.new:
            return
        self.last_total = count.total
        call = call_from_usage(count.info, index=self.call_count, model=self.model, ts=self.ts, window=self.window)
        waiting = self.pairing.from_record
        window_before = waiting.window if waiting is not None else None
        same = self.pairing.count(call)
        if same is None:
            self._take(call)
        elif same.index >= 0 and same.window != window_before:  # the record's call learnt its window
            self.out.changed_calls[same.index] = same

    def _take(self, call: ProviderCall) -> None:
        """A new call: the conversation's, or the summarisation of a compaction (its cost)."""
        call.prefix_key = self.prefix_key
        if self.summarising:
            call.index = -1
            call.prefix_key = ""
            self.compaction_cost = call
            self.summarising = False
            return
        self._new_call(call.index, call)
        if call.prompt_tokens:
            self.last_prompt = call.prompt_tokens
        self.turn_open = True
        self.compaction_pending = False
        self._settle_after(call)

    def _compacted(self) -> None:
        comp = Compaction(
            index=self.compaction_count, trigger="auto" if self.turn_open else "manual",
            trigger_source="inferred: mid-turn" if self.turn_open else "inferred: own turn", ts=self.ts,
            message_index=0, calls_before=self.call_count, tokens_before=self.last_prompt, cost=self.compaction_cost)
        self.compaction_cost = None
        self._new_compaction(comp)
        self.compaction_pending = True


PARSERS: dict[SourceFormat, Callable[[], _Parser]] = {"claude-code": ClaudeCodeParser, "codex": CodexParser}


# --------------------------------------------------------------------------- the follower


class Follower:
    """Calls and compactions of one growing session file, each reported once (see the module text).

    ``new_only``: what the file holds when following starts is read (to know the open call, the model,
    the window) but not reported, nor are later changes of the calls it started; only what is
    appended after is.
    """

    def __init__(self, path: Path, fmt: SourceFormat | None = None, *, new_only: bool = False) -> None:
        self.path = Path(path)
        if fmt is not None and fmt not in FOLLOWABLE:
            raise SourceError(_not_followed(fmt))
        self.format = fmt
        self.tail = Tail(self.path)
        self.parser: _Parser | None = PARSERS[fmt]() if fmt else None
        try:
            self._backlog = self.path.stat().st_size if new_only else 0  # bytes read but not reported
        except OSError:
            self._backlog = 0
        self._reported_calls: set[int] = set()  # reported calls still open (pruned once final)
        self._reported_compactions: set[int] = set()  # reported compactions still without tokens_after
        self._held: list[tuple[ProviderCall | Compaction, bool]] = []  # (item, quiet): not reported yet

    def _ensure_parser(self) -> _Parser | None:
        if self.parser is None:
            try:
                fmt = detect_format(self.path)
            except SourceError:
                if self.path.exists() and self.path.stat().st_size >= HEAD_BYTES:
                    raise
                return None  # empty, missing, or its first line not complete yet: wait
            if fmt not in FOLLOWABLE:
                raise SourceError(f"{self.path.name}: " + _not_followed(fmt))
            self.format = fmt
            self.parser = PARSERS[fmt]()
        return self.parser

    def poll(self) -> list[FollowEvent]:
        """Read what was appended since the last poll (never waits) and report what it completed."""
        parser = self._ensure_parser()
        if parser is None or self.format is None:
            return []
        events: list[FollowEvent] = []
        more = True
        while more:
            backlog_left = self._backlog - self.tail.offset
            lines, reset, more = self.tail.read(min(CHUNK, backlog_left) if backlog_left > 0 else CHUNK)
            if reset is not None:
                parser = self.parser = PARSERS[self.format]()
                self._reported_calls.clear()
                self._reported_compactions.clear()
                self._held.clear()
                self._backlog = 0
                events.append(FollowEvent("reset", reason=reset))
            for raw in lines:
                parser.feed(raw)
            events += self._flush(parser, at_end=not more, quiet=0 < self.tail.offset <= self._backlog)
        return events

    def _flush(self, parser: _Parser, *, at_end: bool, quiet: bool) -> list[FollowEvent]:
        parsed = parser.take()
        out: list[FollowEvent] = []
        for index, call in sorted(parsed.changed_calls.items()):
            if index in self._reported_calls:
                out.append(FollowEvent("call_update", call=replace(call)))
        for index, comp in sorted(parsed.changed_compactions.items()):
            if index in self._reported_compactions:
                out.append(FollowEvent("compaction_update", compaction=replace(comp)))
        self._held += [(item, quiet) for item in parsed.new]
        ready = self._held if at_end else self._final_prefix(parser)
        for item, held_quiet in ready:
            if held_quiet:
                continue
            if isinstance(item, ProviderCall):
                out.append(FollowEvent("call", call=replace(item)))
                self._reported_calls.add(item.index)
            else:
                out.append(FollowEvent("compaction", compaction=replace(item)))
                if item.tokens_after is None:
                    self._reported_compactions.add(item.index)
        self._held = self._held[len(ready):]
        self._reported_calls = {i for i in self._reported_calls if i == parser.open_index}
        self._reported_compactions &= {c.index for c in parser.waiting}
        return out

    def _final_prefix(self, parser: _Parser) -> list[tuple[ProviderCall | Compaction, bool]]:
        """The held items before the call that is still open (those after it wait with it)."""
        for i, (item, _) in enumerate(self._held):
            if isinstance(item, ProviderCall) and item.index == parser.open_index:
                return self._held[:i]
        return list(self._held)

    def follow(self, stop: Callable[[], bool], interval: float = POLL_INTERVAL) -> Iterator[FollowEvent]:
        """Events as they appear, polling every ``interval`` seconds until ``stop()`` is true."""
        while not stop():
            yield from self.poll()
            if stop():
                return
            time.sleep(interval)


def _not_followed(fmt: str) -> str:
    return (f"{fmt} files are not followed (they are not written by appending); "
            f"formats that can be followed: {', '.join(FOLLOWABLE)}")
