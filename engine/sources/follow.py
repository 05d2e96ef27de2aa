"""Following a session file that an agent is still writing: the provider calls and compactions as
they appear, read incrementally.

Three layers, none of them holding the file's lines:

- :class:`Tail` (:mod:`engine.sources.tail`, the one follower of a file every loop that reads appended lines uses)
  remembers the byte offset and reads only what was appended. A partial last line waits
  (its bytes are kept) until its newline arrives. A file that was replaced (another inode), truncated
  (smaller than the offset) or rewritten in place (its first bytes, or the bytes just before the
  offset, changed) is read again from the start, and the reset is reported. The file is opened for
  each read and closed again: never written, locked or held open.
- The format's own incremental reader (:class:`engine.sources.claude_code.ClaudeCodeReader`,
  :class:`engine.sources.codex.CodexReader`, :class:`engine.sources.gemini_cli.GeminiCliReader`, the same
  code the import runs: the format is known in one place) takes the complete lines, and its changes become
  calls and compactions: a Claude Code call's later lines (one per content block) may raise
  ``output_tokens``, and Gemini CLI writes a response's record again whole when it grows (its tool calls,
  its tokens), so the last call stays open until another call appears; a Codex call is final at once (a
  ``token_usage_record`` read after its ``token_count`` updates it); a compaction's ``tokens_after`` is the
  prompt of the first call after it.
- An OpenCode session is rows of a SQLite database, not an appended file (:data:`POLLED`): no Tail, its
  :class:`engine.sources.opencode.OpenCodeReader` is polled instead (the rows updated since the last poll,
  read-only; a busy database is no change this time). A step's call is final when its ``step-finish`` row
  is there. Rows deleted (a revert) are a ``reset`` (``rewritten``). A database that cannot be read is said
  once per problem: removed (``missing``), damaged or not OpenCode's, or locked by another process for
  :data:`LOCKED_LONG` seconds (``problem``, with the reason); polling goes on.

- :class:`Follower` joins them and decides when to report:

  * a call is reported (``call``) when it is final, or when the data the file holds now has been
    read and it is still open (then a reader sees it at once: the prompt, which is what fills the
    context, is already final). If a later line of a reported call changes a figure (Claude Code's
    output tokens), a ``call_update`` with the same ``index`` carries the new figures. Reading a
    whole file at once therefore gives each closed call once, with the full reader's figures;
  * a compaction is reported when its line is read (``compaction``); when its ``tokens_after`` is
    learnt later (the next call), a ``compaction_update`` carries it;
  * ``reset``: the file was truncated, replaced or rewritten; what follows is read from its start;
  * ``missing``: the file was deleted, or something that is not a regular file (a FIFO, a device) is at its path
    now (``reason``); said once, then nothing until it is back (then read from its start: a ``reset``).

Differences from the whole read, by construction: a Claude Code call's ``window`` is the one known when
it is reported (1M once a prompt above 200k has been seen, as the reader infers for the whole file); a
compaction reported on a branch a later rewind abandons stays reported.

Memory: the reader keeps the conversation it has read (what a view of the file shows), not the file's
lines.

Watching is polling: :data:`POLL_INTERVAL` seconds (a ``stat`` per poll, the file opened only when it
changed). No watcher library is a dependency of the engine.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from engine.sources import formats
from engine.sources.detect import HEAD_BYTES, detect_format
from engine.sources.formats import AppendedReader, RewrittenReader
from engine.sources.model import (
    Compaction,
    ProviderCall,
    SourceChanges,
    SourceError,
    SourceFormat,
)
from engine.sources.opencode import OpenCodeReader
from engine.sources.tail import CHUNK as CHUNK
from engine.sources.tail import ResetReason as ResetReason
from engine.sources.tail import Tail as Tail

POLL_INTERVAL = 0.2  # seconds between two looks at the file
# files written by appending, and those rewritten whole whose reader is fed the whole file again (Cline)
FOLLOWABLE: tuple[SourceFormat, ...] = tuple(name for name in formats.names() if name not in formats.names(
    growth="polled") and formats.FORMATS[name].appended is not None)
LOCKED_LONG = 5.0  # seconds an OpenCode database stays locked before following says so (``problem``)
POLLED: tuple[SourceFormat, ...] = formats.names(growth="polled")  # database rows: the reader is polled (no Tail)
FOLLOWED: tuple[SourceFormat, ...] = FOLLOWABLE + POLLED  # what a Follower follows

EventKind = Literal["call", "call_update", "compaction", "compaction_update", "reset", "missing", "problem"]


@dataclass(frozen=True)
class FollowEvent:
    """Something new in the followed file; ``call`` / ``compaction`` are copies (never changed later)."""

    kind: EventKind
    call: ProviderCall | None = None
    compaction: Compaction | None = None
    reason: str = ""  # for a reset; for ``missing``: why the file cannot be read now (deleted, not a regular file)


# --------------------------------------------------------------------------- the file


# --------------------------------------------------------------------------- parsers


@dataclass
class _Parsed:
    """What the lines fed since the last take produced, in file order."""

    new: list[ProviderCall | Compaction] = field(default_factory=list)
    changed_calls: dict[int, ProviderCall] = field(default_factory=dict)
    changed_compactions: dict[int, Compaction] = field(default_factory=dict)


def _figures(call: ProviderCall) -> tuple[Any, ...]:
    """What a follow event shows of a call (an update that changes none of it is not one)."""
    return (call.prompt_tokens, call.completion_tokens, call.cache_read_tokens, call.cache_write_tokens,
            call.reasoning_tokens, call.model, call.ts, call.window, call.request_id)


class _Parser:
    """The format's own incremental reader (:class:`ClaudeCodeReader`, :class:`CodexReader`,
    :class:`GeminiCliReader`: the same code the import runs), its changes turned into the follower's terms:
    new calls and compactions, calls whose figures changed, compactions whose ``tokens_after`` came."""

    def __init__(self, reader: AppendedReader | OpenCodeReader, *, open_last: bool) -> None:
        self.reader = reader
        self.open_last = open_last  # the last call stays open until another call appears (Claude Code, Gemini CLI)
        self.out = _Parsed()
        self.call_count = 0
        self.compaction_count = 0
        self._after: dict[int, int | None] = {}  # compaction -> the tokens_after reported with it
        self._shown: dict[int, tuple[Any, ...]] = {}  # call -> its figures when last taken

    @property
    def open_index(self) -> int | None:
        """A call later lines may still change."""
        return self.call_count - 1 if self.open_last and self.call_count else None

    @property
    def waiting(self) -> list[Compaction]:
        """Compactions still without their ``tokens_after``."""
        return [c for c in self.reader.session.compactions if c.tokens_after is None]

    @property
    def skipped(self) -> int:
        return len(self.reader.session.skipped)

    def take(self) -> _Parsed:
        out, self.out = self.out, _Parsed()
        return out

    def feed(self, raw: bytes) -> None:
        """One complete line (without its newline, as :class:`Tail` gives it)."""
        self.feed_lines([raw + b"\n"])

    def feed_lines(self, lines: list[bytes]) -> bool:
        """Feed complete lines; True when the reader started over (a rewritten file whose earlier part changed)."""
        reader = self.reader
        assert not isinstance(reader, OpenCodeReader)
        changes = reader.feed_lines(lines)
        self.absorb(changes)
        return changes.reset

    def absorb(self, changes: SourceChanges) -> None:
        """Turn one feed's (or poll's) changes into new and changed items."""
        if changes.reset:  # the reader started over: everything is new
            self.out = _Parsed()
            self.call_count = self.compaction_count = 0
            self._after.clear()
            self._shown.clear()
        session = self.reader.session
        for index in changes.calls_updated:
            if index < self.call_count and _figures(session.calls[index]) != self._shown.get(index):
                self._shown[index] = _figures(session.calls[index])
                self.out.changed_calls[index] = session.calls[index]
        for call in session.calls[self.call_count:]:
            self.call_count += 1
            self._shown[call.index] = _figures(call)
            self._add_new(call)
        for comp in session.compactions[self.compaction_count:]:
            self.compaction_count += 1
            self._after[comp.index] = comp.tokens_after
            self._add_new(comp)
        for comp in session.compactions[:self.compaction_count]:
            if self._after.get(comp.index) != comp.tokens_after:
                self._after[comp.index] = comp.tokens_after
                self.out.changed_compactions[comp.index] = comp

    def _add_new(self, item: ProviderCall | Compaction) -> None:
        """New items in file order: a compaction goes before the calls made after it."""
        if isinstance(item, Compaction):
            at = next((i for i, x in enumerate(self.out.new) if isinstance(x, ProviderCall)
                       and x.index >= item.calls_before), len(self.out.new))
            self.out.new.insert(at, item)
        else:
            self.out.new.append(item)


class _PolledParser(_Parser):
    """An OpenCode session: its reader polls the database's rows instead of being fed lines."""

    reader: OpenCodeReader

    def __init__(self, reader: OpenCodeReader) -> None:
        super().__init__(reader, open_last=False)  # a call is its step-finish row: final when it is there
        self._notices = DatabaseNotices()

    def pull(self) -> bool:
        """Read the rows changed since the last pull; True when the reader started over (rows were deleted)."""
        changes = self.reader.poll()
        self.absorb(changes)
        return changes.reset

    def notice(self) -> FollowEvent | None:
        """What to say about the database after a pull (see :class:`DatabaseNotices`)."""
        return self._notices.notice(self.reader)


class DatabaseNotices:
    """What to say about a followed OpenCode database after a poll of its reader, once per problem (again after it
    was read well in between): ``missing`` when it was removed, ``problem`` when it cannot be read (damaged, a
    table or column missing) or has stayed locked by another process for :data:`LOCKED_LONG` seconds; None
    otherwise. One wording for ``ctxbench follow`` and the window's followed view."""

    def __init__(self) -> None:
        self._told = ""  # the problem last said (kind + reason), "" when the last poll read the database

    def notice(self, reader: OpenCodeReader) -> FollowEvent | None:
        if not reader.problem:
            self._told = ""
            return None
        if not os.path.lexists(reader.db):
            key, event = "missing", FollowEvent("missing", reason=f"deleted: no database at {reader.db} now")
        elif reader.busy:
            waited = time.monotonic() - (reader.failing_since or time.monotonic())
            if waited < LOCKED_LONG:
                return None  # a lock held a moment: OpenCode writing
            key, event = "locked", FollowEvent("problem", reason=f"{reader.db}: locked by another process for "
                                                                 f"{waited:.0f} s (following goes on when it is free)")
        else:
            key, event = reader.problem, FollowEvent("problem", reason=f"{reader.problem} (following goes on; "
                                                                       "nothing is read until it can be)")
        if key == self._told:
            return None
        self._told = key
        return event


def _parser(fmt: SourceFormat, path: Path) -> _Parser:
    """The parser of a followed path in a format of :data:`FOLLOWED` (from the format registry)."""
    spec = formats.agent_format(fmt)
    if spec.growth == "polled":
        return _PolledParser(formats.polled_reader(fmt, path, subagents=False))
    return _Parser(formats.appended_reader(fmt, path), open_last=spec.follow_open_last)


# --------------------------------------------------------------------------- the follower


class Follower:
    """Calls and compactions of one growing session file, each reported once (see the module text).

    ``path``: the file, or for OpenCode ``<db>#<session id>`` (the database alone: its latest session).
    ``new_only``: what the file holds when following starts is read (to know the open call, the model,
    the window) but not reported, nor are later changes of the calls it started; only what is
    appended after is (for OpenCode: what the first poll reads is not reported).
    """

    def __init__(self, path: Path, fmt: SourceFormat | None = None, *, new_only: bool = False) -> None:
        self.path = Path(path)
        if fmt is not None and fmt not in FOLLOWED:
            raise SourceError(_not_followed(fmt))
        self.format = fmt
        self.new_only = new_only
        self.tail = Tail(self.path)
        self.parser: _Parser | None = _parser(fmt, self.path) if fmt in FOLLOWABLE else None
        self._pulls = 0  # polls of an OpenCode session
        try:
            self._backlog = self.path.stat().st_size if new_only else 0  # bytes read but not reported
        except OSError:
            self._backlog = 0
        self._reported_calls: set[int] = set()  # reported calls still open (pruned once final)
        self._reported_compactions: set[int] = set()  # reported compactions still without tokens_after
        self._held: list[tuple[ProviderCall | Compaction, bool]] = []  # (item, quiet): not reported yet

    def _ensure_parser(self) -> _Parser | None:
        if self.parser is None:
            fmt = self.format
            if fmt is None:
                try:
                    fmt = detect_format(self.path)
                except SourceError:
                    if self.path.exists() and self.path.stat().st_size >= HEAD_BYTES:
                        raise
                    return None  # empty, missing, or its first line not complete yet: wait
                if fmt not in FOLLOWED:
                    raise SourceError(f"{self.path.name}: " + _not_followed(fmt))
                self.format = fmt
            self.parser = _parser(fmt, self.path)
        return self.parser

    def poll(self) -> list[FollowEvent]:
        """Read what was appended since the last poll (never waits) and report what it completed."""
        parser = self._ensure_parser()
        if parser is None or self.format is None:
            return []
        if isinstance(parser, _PolledParser):
            return self._poll_rows(parser)
        events: list[FollowEvent] = []
        more = True
        while more:
            backlog_left = self._backlog - self.tail.offset
            lines, reset, more = self.tail.read(min(CHUNK, backlog_left) if backlog_left > 0 else CHUNK)
            if (gone := self.tail.notice()) is not None:
                events.append(FollowEvent("missing", reason=gone))
            if reset is not None and isinstance(parser.reader, RewrittenReader):
                parser.reader.restart()  # the new version is told apart from the old one by the reader itself
            elif reset is not None:
                parser = self.parser = _parser(self.format, self.path)
                self._reported_calls.clear()
                self._reported_compactions.clear()
                self._held.clear()
                self._backlog = 0
                events.append(FollowEvent("reset", reason=reset))
            if lines and parser.feed_lines([raw + b"\n" for raw in lines]):  # a rewritten file's earlier part changed
                self._reported_calls.clear()
                self._reported_compactions.clear()
                self._held.clear()
                events.append(FollowEvent("reset", reason="rewritten"))
            events += self._flush(parser, at_end=not more, quiet=0 < self.tail.offset <= self._backlog)
        return events

    def _poll_rows(self, parser: _PolledParser) -> list[FollowEvent]:
        """An OpenCode session: the rows changed since the last poll, all read (nothing is held)."""
        self._pulls += 1
        events: list[FollowEvent] = []
        if parser.pull():
            self._reported_calls.clear()
            self._reported_compactions.clear()
            self._held.clear()
            events.append(FollowEvent("reset", reason="rewritten"))
        if (notice := parser.notice()) is not None:
            events.append(notice)
        return events + self._flush(parser, at_end=True, quiet=self.new_only and self._pulls == 1)

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
            f"formats that can be followed: {', '.join(FOLLOWED)}")
