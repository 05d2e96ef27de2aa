"""The one shape every reader of another agent's session produces.

A :class:`SourceSession` holds

- ``messages``: OpenAI chat-format messages (the engine's :mod:`engine.model.messages` dicts, with ``id``
  and ``ts``) in the order the agent sent them, *including* those a compaction later removed;
  ``live_start`` is the index of the first message still in the context after the last compaction;
- ``calls``: the provider calls with the usage the agent recorded (``prompt_tokens`` is the whole
  prompt as the provider counted it, cached part included; a figure the source does not have is
  ``None``, never 0);
- ``compactions``: each with its trigger as the source says it, the tokens before and after, the
  summary, and what the compaction call itself cost where the source records it;
- ``subagents``: child sessions (Claude Code's Task subagents), each linked to the tool call that
  started it;
- ``offloaded``: tool results the agent moved out of the context into a file;
- ``skipped``: every line or item the reader could not use, with the reason.

Readers never write to, lock or move anything in the agent's folders.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import stat
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args

from engine.model.call_meta import CacheMiss, CallAttribution, UsageIteration
from engine.model.messages import Message
from engine.model.text import printable
from engine.store.fsutil import fast_json

SourceFormat = Literal["claude-code", "codex", "gemini-cli", "opencode", "openhands", "swe-agent", "mini-swe-agent",
                       "openai", "proxy-capture", "pi", "copilot-cli", "cline", "qwen-code", "kilo", "atif"]
FORMATS: tuple[SourceFormat, ...] = get_args(SourceFormat)

Trigger = Literal["auto", "manual", "unknown"]
TRIGGERS: tuple[Trigger, ...] = get_args(Trigger)

SubagentKind = Literal["task", "compaction"]

# how a figure was obtained (shown next to it)
PROVIDER = "provider"  # counted by the provider, recorded by the agent
INFERRED = "inferred"  # derived from provider figures minus our estimate (labelled so)
ESTIMATED = "estimated"  # our estimate only

# strict=False: a raw control character inside a JSON string (an agent that wrote a tab or a NUL unescaped) is
# read as that character, not a reason to drop the line and the call on it
_decode = json.JSONDecoder(strict=False).decode


def loads_line(raw: bytes) -> Any:
    """One JSON line (bytes) as the standard module reads it with ``strict=False``, decoded by msgspec (about twice
    as fast) wherever it reads the line (:func:`engine.store.fsutil.fast_json`: then its value is the standard
    module's): a line it refuses (a raw control character, a lone surrogate, NaN, nested too deeply, not UTF-8) is
    read by the standard module, whose exceptions (ValueError, UnicodeDecodeError, RecursionError) are the ones
    raised."""
    done, value = fast_json(raw)  # (engine.store.fsutil: the one place that decides when the fast decoder reads)
    if done:
        return value
    return _decode(raw.decode("utf-8"))


MAX_COUNT = 2**53  # a token count, a size or a time above this is no figure (and would overflow DuckDB's BIGINT sums)
MAX_LINE_BYTES = 64 * 2**20  # a longer line of a session file is skipped (said), never held whole in memory
FILE_SECONDS = 300.0  # reading one session file longer than this stops it (SourceError), so that no file stalls a scan
_MS_UTC_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
_REDACTED_RE = re.compile(r"^\[REDACTED_[A-Z_]+ len=(\d+)(?: sha=[0-9a-f]+)?\]$")


class SourceError(ValueError):
    """A file that cannot be read as the format asked for; the text says what was wrong."""


class IdMaker:
    """Message ids for one read: unique (a random 24-hex prefix + a counter), and cheaper than a uuid4
    per message on a 100 MB session."""

    def __init__(self, prefix: str | None = None) -> None:
        self._prefix = prefix or uuid.uuid4().hex[:24]  # a view's own prefix keeps ids the same across reads
        self._count = itertools.count()

    def __call__(self) -> str:
        return f"{self._prefix}{next(self._count):08x}"


def trigger_of(value: Any) -> Trigger:
    """The source's trigger word as one of :data:`TRIGGERS` (``unknown`` for anything else)."""
    text = str(value or "").strip().lower()
    return text if text in ("auto", "manual") else "unknown"  # type: ignore[return-value]


@dataclass
class Skipped:
    """A line (1-based) or item the reader did not use, and why; ``damaged``: it could not be read at all (not
    JSON, not UTF-8, too long, a value or shape no reader can take), as opposed to one of a kind the reader does not
    use or a last line the agent may still be writing."""

    line: int
    reason: str
    damaged: bool = False

    def describe(self) -> str:
        return f"line {self.line}: {self.reason}" if self.line > 0 else self.reason


@dataclass
class ProviderCall:
    """One request to the model, with the usage the agent recorded for it."""

    index: int
    prompt_tokens: int | None  # the whole prompt as the provider counted it (cached part included)
    completion_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None  # None where the source has no such figure (never 0 for "unknown")
    model: str = ""
    ts: str = ""
    window: int | None = None
    message_index: int = 0  # index in SourceSession.messages of the first message the call produced
    request_id: str = ""
    reasoning_tokens: int | None = None
    input_messages: list[Message] | None = None  # the exact model input, where the source keeps it
    max_tokens: int | None = None  # the request's output reserve (``max_tokens``), where the source records it
    prefix_key: str = ""  # key in SourceSession.prefixes of this request's system prompt + tools (exact)
    cache_write_1h_tokens: int | None = None  # the part of the cache write kept for one hour (Claude Code)
    # the output figure the file holds when it is only a streaming placeholder (``completion_tokens`` is then None:
    # unknown), e.g. Claude Code 2.1.39's compaction call: "6" for a summary of thousands of tokens
    completion_placeholder: int | None = None
    # where the request asked the provider to cache its prefix (Anthropic ``cache_control``), as a recording proxy's
    # capture saw it: [{"in": "tools" | "system" | "messages", "index", "block", "name", "role", "ttl"}]; None: unknown
    cache_breakpoints: list[dict[str, Any]] | None = None
    # why the provider's prompt figure counts what the file does not hold (a server-side web search's results, files
    # re-attached after a compaction, a request rebuilt on resuming): this call's estimate is on another basis
    prompt_unlike_file: str = ""
    prompt_transient: bool = False  # what the figure counts beyond the file is not sent again (a search's results)
    cost_usd: float | None = None  # the agent's own price of this call, where its file records one (ATIF's cost_usd)
    attribution: CallAttribution | None = None  # the skill / subagent / plugin / MCP server the call worked for
    cache_miss: CacheMiss | None = None  # the provider's own reason the prompt cache missed
    # the request's sampling iterations (``usage.iterations``); those billed beside the top-level usage (a server-side
    # compaction, an advisor) count into the call's cost, never into its prompt (engine.model.call_meta)
    iterations: tuple[UsageIteration, ...] = ()

    def billed_beside(self) -> list[UsageIteration]:
        """The iterations billed beside the top-level usage (each counted once in the call's cost)."""
        return [it for it in self.iterations if it.beside]

    def usage(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "model": self.model,
            "ts": self.ts,
        }


@dataclass
class Compaction:
    """The context was replaced by a summary (or a shorter history) at ``message_index``."""

    index: int
    trigger: Trigger
    trigger_source: str  # the word the source used, verbatim
    ts: str
    message_index: int  # messages before this index left the context
    calls_before: int  # provider calls made before it
    tokens_before: int | None
    tokens_after: int | None = None
    tokens_before_source: str = PROVIDER
    tokens_after_source: str = PROVIDER  # the first provider call after the compaction
    summary: str = ""
    cost: ProviderCall | None = None  # the summarisation call itself, where the source records it
    messages_after: int = 0  # messages kept or put in place of the old context (Codex; Claude Code's preserved)
    post_tokens: int | None = None  # the agent's own count of the context right after the compaction
    cost_usd: float | None = None  # what compacting cost in USD, as the agent's own cost records give it
    placed_by: str = "chain"  # "chain" (linked to the message before it) or "file order" (the link is missing)
    # the agent's running total of the tokens its compactions dropped (Claude Code's ``cumulativeDroppedTokens``)
    cumulative_dropped_tokens: int | None = None
    # the tokens this compaction dropped: its running total less the previous one's (:func:`dropped_tokens`)
    dropped_tokens: int | None = None


def dropped_tokens(compactions: Iterable[Compaction]) -> None:
    """Set each compaction's ``dropped_tokens``: its running total (``cumulative_dropped_tokens``) less the previous
    compaction's (0 before the first), else, where a running total is missing, the context before less the agent's
    count after (``tokens_before`` − ``post_tokens``, as Claude Code adds to its total); None when neither is known."""
    previous: int | None = 0
    for comp in compactions:
        total = comp.cumulative_dropped_tokens
        if total is not None and previous is not None and total >= previous:
            comp.dropped_tokens = total - previous
        elif comp.tokens_before is not None and comp.post_tokens is not None:
            comp.dropped_tokens = max(0, comp.tokens_before - comp.post_tokens)
        else:
            comp.dropped_tokens = None
        previous = total


@dataclass
class OffloadedResult:
    """A tool result the agent saved to a file and replaced by a preview in the context."""

    tool_call_id: str
    message_index: int
    stated_path: str  # the path as the agent wrote it into the context
    local_path: Path | None  # where the file is on this machine, when it is there
    size: int | None = None


@dataclass
class SubagentRef:
    """A child session the agent ran (Claude Code: Task subagents and the compaction call)."""

    id: str
    kind: SubagentKind
    path: Path | None  # the child's file; None when it is missing
    parent_tool_call_id: str | None = None
    session: SourceSession | None = None
    problem: str = ""


@dataclass
class RequestPrefix:
    """The system prompt and tool definitions of a request exactly as the agent recorded them sent
    (Claude Code's ``api-request-shape``; Codex's ``base_instructions``). ``tools`` are the provider's own
    tool objects (``name``, ``description``, ``input_schema`` or ``parameters``)."""

    key: str
    system: str
    tools: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class SourceSession:
    format: SourceFormat
    path: Path
    session_id: str
    messages: list[Message] = field(default_factory=list)
    live_start: int = 0
    system_prompt: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)
    calls: list[ProviderCall] = field(default_factory=list)
    compactions: list[Compaction] = field(default_factory=list)
    subagents: list[SubagentRef] = field(default_factory=list)
    offloaded: list[OffloadedResult] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    ignored: dict[str, int] = field(default_factory=dict)  # record type -> lines ignored on purpose
    prefixes: dict[str, RequestPrefix] = field(default_factory=dict)  # exact request prefixes, by key
    agent_cost_usd: float | None = None  # the agent's own running cost (Claude Code's last cost-state)
    agent_cost_by_model: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    model: str = ""
    window: int | None = None
    window_source: str = ""
    project: str = ""
    cwd: str = ""
    started: str = ""
    last_activity: str = ""
    prefix_label: str = ""  # what the inferred prefix region holds, when the source lacks it
    # the tool definitions' tokens as the agent itself counted them, where the file holds that count and not the
    # definitions (Copilot CLI's toolTokenCount): the prefix region's figure instead of one inferred from the provider's
    tools_tokens: int | None = None
    aggregate: dict[str, Any] | None = None  # totals the source keeps instead of per-call usage
    lines: int = 0  # lines (or items) read
    off_chain: int = 0  # messages on branches the conversation left (Claude Code rewinds)
    # the reader never changes a message dict once it is in ``messages``: a message that changes (a response whose
    # next line came, a subagent linked to its result) is a new dict in its place. A followed view then holds the
    # reader's dicts as they are (engine.ingest.LiveImport), not a copy of each beside them.
    fresh_on_change: bool = False
    make_id: IdMaker = field(default_factory=lambda: IdMaker(), repr=False, compare=False)

    @property
    def summary(self) -> str:
        return self.compactions[-1].summary if self.compactions else ""

    @property
    def reported_calls(self) -> int:
        return sum(1 for c in self.calls if c.prompt_tokens is not None)

    def ignore(self, kind: str) -> None:
        """Count a line of a record type this reader knows and leaves out on purpose."""
        self.ignored[kind] = self.ignored.get(kind, 0) + 1

    def segment_start(self, message_index: int) -> int:
        """Where the context that held message ``message_index`` began (the last compaction before it)."""
        start = 0
        for comp in self.compactions:
            if comp.message_index <= message_index:
                start = comp.message_index
        return start

    def compaction_before(self, message_index: int) -> Compaction | None:
        found = None
        for comp in self.compactions:
            if comp.message_index <= message_index:
                found = comp
        return found


class LineBuffer:
    """Appended bytes cut into complete lines for an incremental reader: a partial last line waits for its
    newline; :meth:`counted` numbers the lines as they pass, across feeds (blank ones included)."""

    def __init__(self, limit: int | None = None) -> None:
        self.pending = b""
        self.count = 0  # lines passed through counted()
        # a line longer than this is kept as its first limit + 1 bytes (json_lines skips it)
        self.limit = MAX_LINE_BYTES if limit is None else limit
        self._overlong = False  # the pending line passed the limit: what follows, up to its newline, is dropped

    def lines(self, data: bytes) -> list[bytes]:
        """The complete lines ``data`` finishes (each with its newline); an over-long one as its first
        ``limit + 1`` bytes and a newline (never held whole)."""
        if self._overlong:
            end = data.find(b"\n")
            if end < 0:
                return []
            self._overlong = False
            out = [self.pending + b"\n"]
            self.pending = b""
            return out + self.lines(data[end + 1:])
        data = self.pending + data
        cut = data.rfind(b"\n") + 1
        self.pending = data[cut:]
        if len(self.pending) > self.limit:
            self.pending, self._overlong = self.pending[:self.limit + 1], True
        return [line + b"\n" for line in data[:cut].split(b"\n")[:-1]] if cut else []

    def rest(self) -> bytes:
        """The partial last line, taken (at the end of a file: a torn line, read as such)."""
        rest, self.pending = self.pending, b""
        if self._overlong:
            self._overlong = False
            return rest + b"\n"  # over-long: skipped as such, not as a torn line
        return rest

    def counted(self, lines: Iterable[bytes]) -> Iterator[bytes]:
        for raw in lines:
            self.count += 1
            yield raw


@dataclass
class SourceChanges:
    """What one feed of an incremental reader changed in its :class:`SourceSession` (lines or rows in,
    changes out): the import feeds a reader the whole file, following feeds it what was appended.

    ``messages_from``: ``session.messages[messages_from:]`` are new or replaced (a message that grew, a
    rewind: everything from there is sent again); ``len(session.messages)`` when none changed.
    ``calls_from``: ``session.calls[calls_from:]`` are new; ``calls_updated``: indices of earlier calls whose
    figures changed. ``compactions_from`` / ``subagents_from`` likewise. ``reset``: the reader started over
    (a truncated or rewritten source): everything is new."""

    messages_from: int = 0
    calls_from: int = 0
    calls_updated: list[int] = field(default_factory=list)
    compactions_from: int = 0
    subagents_from: int = 0
    reset: bool = False

    def nothing(self, session: SourceSession) -> bool:
        """True when this feed changed nothing in ``session``."""
        return not self.reset and not self.calls_updated and (
            self.messages_from, self.calls_from, self.compactions_from, self.subagents_from) == (
            len(session.messages), len(session.calls), len(session.compactions), len(session.subagents))


# --------------------------------------------------------------------------- helpers for readers


def iso(value: Any) -> str:
    """An ISO-8601 UTC timestamp from an ISO string or epoch seconds; "" when it is neither."""
    if isinstance(value, str) and len(value) == 24 and value[23] == "Z" and _MS_UTC_RE.match(value):
        return value[:23] + "+00:00"  # the agents' usual form, already in milliseconds and UTC
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, int | float):
        if 0 < value < 1e11:
            return datetime.fromtimestamp(float(value), UTC).isoformat(timespec="milliseconds")
        return ""
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            return parsed.astimezone(UTC).isoformat(timespec="milliseconds")
        except (ValueError, OverflowError):  # not a time, or one that leaves the calendar in UTC (year 1 at +01:00)
            return ""
    return ""


def dict_at(obj: Any, key: str) -> dict[str, Any]:
    """``obj[key]`` when ``obj`` is a dict and that value is a dict too; else an empty dict (files written by
    other agents: a field of the wrong shape is read as absent, never trusted)."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def int_or_none(value: Any) -> int | None:
    """A count, size or time a file records, as an int; None when it is no such figure: not a number, a bool,
    NaN or infinite, negative, or above :data:`MAX_COUNT` (other agents' files are never trusted)."""
    if value.__class__ is int and 0 <= value <= MAX_COUNT:  # the common case, first (it runs for every figure)
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value < 0 or value > MAX_COUNT:
        return None
    return int(value)


def float_or_none(value: Any) -> float | None:
    """A finite, non-negative number (a cost, a rate) a file records, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and 0 <= number <= MAX_COUNT else None


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def not_regular(mode: int) -> str | None:
    """What a file of ``mode`` is when it is not a regular file ("a FIFO (named pipe)", …); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(path: Path | str) -> Any:
    """``path`` opened for reading in binary, only when it is a regular file (symbolic links followed): a FIFO is
    opened without blocking and refused, as are devices (``/dev/zero``), sockets and folders, with SourceError
    naming the file and what it is. Other failures raise OSError as ``open`` does."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        kind = not_regular(os.fstat(fd).st_mode)
        if kind is not None:
            raise SourceError(f"{Path(path).name}: not a regular file ({kind}): not read")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path | str) -> bytes:
    """The whole of ``path`` when it is a regular file (:func:`open_regular`: never a FIFO or a device)."""
    with open_regular(path) as fh:
        data: bytes = fh.read()
    return data


def head_regular(path: Path | str, size: int) -> bytes:
    """The first ``size`` bytes of ``path`` when it is a regular file (:func:`open_regular`)."""
    with open_regular(path) as fh:
        data: bytes = fh.read(size)
    return data


def shown_path(path: str | os.PathLike[str]) -> str:
    """``path`` for a person: bytes of a name that are not UTF-8 (kept by Python as lone surrogates, which cannot
    be printed or written as UTF-8) shown as ``\\xff`` escapes, control characters escaped
    (:func:`engine.model.text.printable`). The path itself stays as it was, to be opened."""
    return printable(os.fspath(path))


# what one line of another agent's file can raise in a reader that did not foresee its shape: the line is skipped
# with the reason (:func:`line_problem`), never the file (nor the scan)
LINE_ERRORS: tuple[type[BaseException], ...] = (TypeError, ValueError, AttributeError, KeyError, IndexError,
                                                 RecursionError, ArithmeticError)


def damaged_lines(session: SourceSession) -> list[Skipped]:
    """The lines (and OpenCode rows) of ``session`` and of its subagents that could not be read: damaged, not JSON,
    of a value or shape no reader can take; not the torn last line of a file still being written."""
    parts = [session, *(sub.session for sub in session.subagents if sub.session is not None)]
    return [item for part in parts for item in part.skipped if item.damaged]


def line_problem(n: int, exc: BaseException) -> Skipped:
    """The :class:`Skipped` of line ``n``, which a reader could not use because of ``exc`` (one of
    :data:`LINE_ERRORS`)."""
    if isinstance(exc, RecursionError):
        return Skipped(n, "not read (nested too deeply)", damaged=True)
    return Skipped(n, f"not read: a field of a shape this reader does not expect ({type(exc).__name__}: "
                      f"{str(exc)[:80]})", damaged=True)


def capped_lines(fh: Any, *, name: str = "", limit: int | None = None,
                 seconds: float | None = None) -> Iterator[bytes]:
    """The lines of the binary file ``fh`` (each with its newline; the last one may lack it), never holding more
    than ``limit`` bytes of one line: a longer line is yielded as its first ``limit + 1`` bytes and a newline
    (:func:`json_lines` then skips it as too long) and the rest of it is read past. Reading for longer than
    ``seconds`` raises SourceError naming ``name``. By default :data:`MAX_LINE_BYTES` and :data:`FILE_SECONDS`
    (as they are when reading starts)."""
    limit = MAX_LINE_BYTES if limit is None else limit
    seconds = FILE_SECONDS if seconds is None else seconds
    started = time.monotonic()
    count = 0
    while True:
        raw = fh.readline(limit + 1)
        if not raw:
            return
        if len(raw) > limit and not raw.endswith(b"\n"):
            while True:  # the rest of the over-long line: read in pieces, dropped
                more = fh.readline(limit)
                if not more or more.endswith(b"\n"):
                    break
            raw = raw + b"\n"
        yield raw
        count += 1
        if count % 4096 == 0 and time.monotonic() - started > seconds:
            raise SourceError(f"{name or 'the file'}: reading took more than {seconds:.0f} s: stopped")


def feed_whole(reader: Any, path: Path, lines: Iterable[bytes] | None = None) -> None:
    """Hand an incremental reader (its ``feed_lines``) every line of the session file ``path``, or ``lines``, the
    file's lines the caller already read: a regular file only, no line held longer than the cap
    (:func:`capped_lines`). What every line-oriented reader's whole-file ``read_…`` does before ``finish``."""
    if lines is not None:
        reader.feed_lines(lines)
        return
    with open_regular(path) as fh:
        reader.feed_lines(capped_lines(fh, name=Path(path).name))


def byte_size(n: int) -> str:
    """``64 MiB``, ``4 KiB``, ``100 bytes``."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n:,} bytes"


def expand_redacted(text: str) -> str:
    """``[REDACTED_TEXT len=N sha=…]`` (text a publisher removed) becomes a stand-in of N characters,
    so the estimate of its tokens comes from N; any other text is returned unchanged."""
    match = _REDACTED_RE.match(text) if text.startswith("[REDACTED_") else None
    if not match:
        return text
    n = int(match.group(1))
    head = f"[redacted: {n} characters]"
    return head + " " + "." * max(0, n - len(head) - 1) if n > len(head) else head


def read_json_lines(
    path: Path, skipped: list[Skipped], skip: Callable[[bytes], bool] | None = None,
    lines: Iterable[bytes] | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every JSON-object line of ``path``, streamed; bad lines go to
    ``skipped`` with the reason (a torn last line: the agent may still be writing). Lines for which
    ``skip(raw)`` is true are known to be of no use and are not parsed.

    ``lines``: the file's complete lines (each ending with its newline), already read — instead of reading
    ``path``."""
    if lines is not None:
        yield from json_lines(lines, skipped, skip)
        return
    with open_regular(path) as fh:
        yield from json_lines(capped_lines(fh, name=Path(path).name), skipped, skip)


def json_lines(
    lines: Iterable[bytes], skipped: list[Skipped], skip: Callable[[bytes], bool] | None = None, start: int = 1
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every JSON-object line of ``lines`` (numbered from ``start``); bad lines go
    to ``skipped`` with the reason. An incremental reader feeds it what was appended, numbering on."""
    for n, raw in enumerate(lines, start=start):
        if (raw[:1].isspace() and not raw.strip()) or (skip is not None and raw.endswith(b"\n") and skip(raw)):
            continue
        if len(raw) > MAX_LINE_BYTES:
            skipped.append(Skipped(n, f"a line of more than {byte_size(MAX_LINE_BYTES)}: not read", damaged=True))
            continue
        try:
            obj = loads_line(raw)
        except RecursionError:
            skipped.append(Skipped(n, "not JSON (nested too deeply)", damaged=True))
            continue
        except UnicodeDecodeError:
            skipped.append(Skipped(n, "not UTF-8 text", damaged=True))
            continue
        except ValueError as exc:
            if not raw.endswith(b"\n"):
                skipped.append(Skipped(n, "truncated last line (the agent may still be writing it)"))
            else:
                skipped.append(Skipped(n, f"not JSON ({str(exc)[:80]})", damaged=True))
            continue
        if not isinstance(obj, dict):
            skipped.append(Skipped(n, f"a JSON {type(obj).__name__}, not an object", damaged=True))
            continue
        yield n, obj


def text_of(content: Any) -> str:
    """Text of a string or a list of text parts (any of Anthropic's, OpenAI's and the Responses
    API's part types)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
        return "\n".join(out)
    return str(content)


def json_args(value: Any) -> str:
    """Tool-call arguments as the JSON string OpenAI messages carry."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def openai_tool_calls(raw_calls: Any) -> list[dict[str, Any]]:
    """OpenAI-format ``tool_calls`` as a source wrote them, kept to the fields a message carries
    (entries that are not calls are left out)."""
    calls = []
    for call in raw_calls if isinstance(raw_calls, list) else []:
        if isinstance(call, dict) and isinstance(call.get("function"), dict):
            fn = call["function"]
            calls.append({"id": str(call.get("id") or ""), "type": "function",
                          "function": {"name": str(fn.get("name") or ""), "arguments": json_args(fn.get("arguments"))}})
    return calls
