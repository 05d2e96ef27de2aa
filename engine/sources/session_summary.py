"""The light pass over one agent session file, for ``ctxbench sources`` (:mod:`engine.sources.discovery`): a
:class:`SourceEntry` (started, last activity, provider calls, last prompt tokens, window and how full it is, model,
title, the agent's own cost) from only the lines that carry usage.

Claude Code files are read a block at a time by byte search (:class:`_ClaudeScan`), resumable: a long-lived
process keeps the pass of the :data:`CLAUDE_SCANS_KEPT` files it read last (:data:`_CLAUDE_SCANS`), so a file that
grew is read from where the last pass stopped. Codex and Gemini CLI files are read here line by line; Pi, Copilot
CLI, Cline, Qwen Code and the recording proxy's captures by their readers' ``light_summary``.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from engine.sources import model as source_model
from engine.sources.claude_code_calls import SYNTHETIC_MODEL, prompt_of, usage_prompt
from engine.sources.entry import Agent, SourceEntry
from engine.sources.lazy import LazyModule
from engine.sources.model import (
    SourceError,
    SourceSession,
    capped_lines,
    dict_at,
    float_or_none,
    int_or_none,
    iso,
    open_regular,
)
from engine.sources.tail import Tail, appended_blocks, holding, lines_holding
from engine.store.fsutil import fast_json, typed_json

if TYPE_CHECKING:
    from engine.sources import capture, claude_code, cline, codex, copilot, gemini_cli, pi, qwen_code
else:  # each imported when a summary first needs it (engine.sources.lazy)
    capture, claude_code, cline, codex = (LazyModule(n) for n in ("capture", "claude_code", "cline", "codex"))
    copilot, gemini_cli, pi, qwen_code = (LazyModule(n) for n in ("copilot", "gemini_cli", "pi", "qwen_code"))

TAIL_BYTES = 65536
# what a line must hold for the light pass to look at it once the start, the session id and the title are known: a
# call (an ``assistant`` record) or the agent's running cost (a ``cost-state`` record's ``totalCostUSD``: a record
# without one teaches nothing; found 1.5× faster than ``"cost-state"``, whose letters are the text's commonest)
_COST_STATE, _ASSISTANT = b'"totalCostUSD"', b'"assistant"'


class _Usage(msgspec.Struct):
    """A usage's :data:`engine.sources.claude_code_calls.PROMPT_FIELDS`, in its order (its values taken as a tuple)."""

    input_tokens: Any = None
    cache_creation_input_tokens: Any = None
    cache_read_input_tokens: Any = None


class _CallMessage(msgspec.Struct):
    id: Any = None
    model: Any = None
    usage: _Usage | None = None  # (not an object: the line is read whole)


class _CallLine(msgspec.Struct):
    """What :meth:`_ClaudeScan.take` reads of an ``assistant`` or a ``cost-state`` line once it knows the start and
    the session id (decoded by :func:`engine.store.fsutil.typed_json`: the rest of the line, its content, is passed
    over; an absent field and a null both None, as ``dict.get`` gives them)."""

    type: Any = None
    uuid: Any = None
    requestId: Any = None  # (the record's own keys)
    totalCostUSD: Any = None
    message: _CallMessage | None = None


_CALL_LINE = msgspec.json.Decoder(_CallLine).decode


def _last_ts(path: Path) -> str:
    try:
        with open_regular(path) as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - TAIL_BYTES))
            tail = fh.read(TAIL_BYTES).split(b"\n")  # at newlines only: a raw \r inside a line is the line's
    except (OSError, SourceError):
        return ""
    for raw in reversed(tail):
        if ts := iso(_loads(raw).get("timestamp")):
            return ts
    return ""


@dataclass
class _ClaudeScan:
    """The light pass over a Claude Code file, resumable: what it found so far and where it stopped (its
    ``source``, the file's :class:`engine.sources.tail.Tail`). Kept per file by a long-lived process
    (:data:`_CLAUDE_SCANS`), so that a file that grew is read from there, not whole."""

    source: Tail | None = None  # (None: a pass over lines another reader decoded, which reads no file itself)
    keys: set[tuple[str, str]] = field(default_factory=set)
    started: str = ""
    cwd: str = ""
    session_id: str = ""
    model: str = ""
    title: str = ""
    last_prompt: int | None = None
    largest: int = 0
    cost: float | None = None

    def feed(self, lines: Iterable[bytes]) -> None:
        """Take raw lines: those that may hold something :meth:`take` learns from (their bytes hold one of
        :meth:`_needles`) are decoded, once, and taken; the others are passed over."""
        for raw in lines:
            if any(needle in raw for needle in self._needles()):
                self.take(_loads(raw))

    def take(self, obj: dict[str, Any]) -> None:
        """Learn from one line's object (the light pass's, or a reader's that reads every line: one definition of
        the summary, whichever pass makes it)."""
        kind = obj.get("type")
        if kind == "cost-state":
            self.cost = _cost_total(obj.get("totalCostUSD"), self.cost)
            return
        if not self.title and kind == "user":
            self.title = _claude_prompt(obj)
        if (not self.started and "timestamp" in obj) or (not self.session_id and "sessionId" in obj):
            self.started = self.started or iso(obj.get("timestamp"))
            self.session_id = self.session_id or str(obj.get("sessionId") or "")
            self.cwd = self.cwd or str(obj.get("cwd") or "")
        if kind != "assistant":
            return
        msg = obj.get("message")
        if isinstance(msg, dict) and isinstance(usage := msg.get("usage"), dict):
            self._call(usage_prompt(usage), msg.get("model"), msg.get("id"), obj.get("uuid"), obj.get("requestId"))

    def _call(self, prompt: int | None, model: Any, message_id: Any, uuid: Any, request_id: Any) -> None:
        """Learn from an ``assistant`` line whose message holds a usage: its prompt (None: a count of the line is no
        figure: NaN, negative, …), the message's model and id, the line's uuid and request id."""
        if model == SYNTHETIC_MODEL:
            return
        key = (str(message_id or uuid), str(request_id or ""))
        if key not in self.keys:
            self.keys.add(key)
            self.model = str(model or self.model)
        self.last_prompt = prompt
        self.largest = max(self.largest, prompt or 0)

    def _take_typed(self, raw: bytes) -> bool:
        """Take ``raw`` from only the fields :class:`_CallLine` names, when that is all :meth:`take` would read of it:
        any line once the start and the session id are known, but a ``user`` line while the title is wanted (of
        another kind than ``assistant`` and ``cost-state`` — a subagent's progress naming its assistant — nothing is
        learnt then). False when the line is to be read whole (the title, the start or the id still wanted, a line
        msgspec does not read as the standard module)."""
        if not (self.started and self.session_id) or (line := typed_json(_CALL_LINE, raw)) is None:
            return False
        kind = line.type
        if kind == "assistant":
            if (msg := line.message) is not None and (usage := msg.usage) is not None:
                self._call(prompt_of(*msgspec.structs.astuple(usage)), msg.model, msg.id, line.uuid, line.requestId)
        elif kind == "cost-state":
            self.cost = _cost_total(line.totalCostUSD, self.cost)
        elif kind == "user" and not self.title:
            return False
        return True

    def _needles(self) -> tuple[bytes, ...]:
        """What a line's bytes must hold for :meth:`take` to learn anything from it now (a line holding none of these
        is passed over untouched): an ``assistant`` record (the calls) or a ``cost-state`` record's total, and, until
        found, a ``user`` record (the title), a timestamp, a session id. (A JSON string holds a quote only escaped, so
        these quoted words are found only as a key or a whole value.)"""
        return ((_COST_STATE, _ASSISTANT) + ((b'"user"',) if not self.title else ())
                + ((b'"timestamp"',) if not self.started else ()) + ((b'"sessionId"',) if not self.session_id else ()))

    def feed_block(self, data: bytes) -> None:
        """Take ``data``, complete lines (it ends with a newline), as :meth:`feed` would take them one by one: only
        the lines holding one of :meth:`_needles` are looked at (:func:`engine.sources.tail.holding`: the others are
        passed over at the speed of a byte search; most of a session's bytes are tool results and progress lines that
        say nothing here), each decoded and taken at once: only the fields :class:`_CallLine` names when they are all
        that is read of it (:meth:`_take_typed`), else whole."""
        take, typed = self.take, self._take_typed
        for raw in holding(data, self._needles):
            if typed(raw):
                continue
            done, obj = fast_json(raw)  # (else the standard module says what it makes of the line)
            take(obj if done and obj.__class__ is dict else _loads(raw))

    def entry(self, path: Path) -> SourceEntry:
        window, _ = claude_code.window_for_model(self.model, self.largest)
        project = Path(self.cwd).name if self.cwd else path.parent.name
        entry = _entry("claude-code", project, self.session_id or path.stem, path, self.started, len(self.keys),
                       self.last_prompt, window, self.model, self.title)
        entry.agent_cost_usd = self.cost
        return entry


_CLAUDE_SCANS: OrderedDict[str, _ClaudeScan] = OrderedDict()  # most recently read last
CLAUDE_SCANS_KEPT = 16
_CLAUDE_SCANS_LOCK = threading.Lock()


def _summary_claude(path: Path) -> SourceEntry:
    """The summary of a Claude Code file; a file summarised before in this process that only grew (its Tail: the
    same file, not shorter, the bytes at its start and where the last pass stopped unchanged) is read from where that
    pass stopped."""
    key = str(path)
    with _CLAUDE_SCANS_LOCK:
        scan = _CLAUDE_SCANS.pop(key, None)
    tail = scan.source if scan is not None else None
    if scan is None or tail is None:
        tail = Tail(path)
        scan = _ClaudeScan(source=tail)
    with open_regular(path) as fh:
        scan = _scan_blocks(fh, scan, tail, path.name)
    entry = scan.entry(path)
    if rest := tail.waiting:  # a partial last line: counted here, read again whole next time
        partial = _ClaudeScan(**{**scan.__dict__, "keys": set(scan.keys)})
        partial.feed([rest])
        entry = partial.entry(path)
    with _CLAUDE_SCANS_LOCK:
        _CLAUDE_SCANS[key] = scan
        while len(_CLAUDE_SCANS) > CLAUDE_SCANS_KEPT:
            _CLAUDE_SCANS.popitem(last=False)
    return entry


SCAN_BLOCK = 8 * 2**20  # bytes a light pass reads at a time (cut at the last newline; a line's rest waits for more)


def _scan_blocks(fh: Any, scan: _ClaudeScan, tail: Tail, name: str) -> _ClaudeScan:
    """Feed the lines appended to the file ``fh`` since ``scan`` stopped to it (:meth:`_ClaudeScan.feed_block`), read
    by its ``tail`` a block at a time (:func:`engine.sources.tail.appended_blocks`: its time cap); the scan that holds
    them is returned (a new one when the file was replaced, truncated or rewritten: read again from its start). A line
    longer than :data:`engine.sources.model.MAX_LINE_BYTES` is passed over unread (never held whole); the partial last
    line (no newline yet) waits in the Tail."""
    for block, reset in appended_blocks(tail, fh, name=name, block=SCAN_BLOCK):
        if reset is not None:
            scan = _ClaudeScan(source=tail)
        if block:
            scan.feed_block(block)
    return scan


def _cost_total(value: Any, previous: float | None) -> float | None:
    """A ``cost-state`` line's ``totalCostUSD`` ``value`` (a running total: the last one is the session's cost) when
    it is a figure, else ``previous``."""
    total = float_or_none(value)  # NaN, infinite, negative: no figure (the last one kept)
    return previous if total is None else total


def _claude_prompt(obj: dict[str, Any]) -> str:
    """The text of a person's prompt line (not a tool result, a meta line or a command's output), or ""."""
    if obj.get("type") != "user" or obj.get("isMeta") or obj.get("isCompactSummary") or obj.get("isSidechain"):
        return ""
    content = dict_at(obj, "message").get("content")
    if isinstance(content, list):
        texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        content = next((t for t in texts if isinstance(t, str)), "")
    if not isinstance(content, str) or content.lstrip().startswith(("<", "[Request interrupted by user")):
        return ""  # a command's tags, or Claude Code's note that the person stopped a response: no title
    return _one_line(content)


def _one_line(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _summary_codex(path: Path) -> SourceEntry:
    started, cwd, session_id, model, title, parent = "", "", "", "", "", ""
    calls = 0
    last_total: Any = None
    last_prompt: int | None = None
    window: int | None = None

    def needles() -> tuple[bytes, ...]:  # what a line must hold for a branch below to take it now
        return ((b'"token_count"', b'"turn_context"') + ((b'"session_meta"',) if not session_id else ())
                + ((b'"user_message"', b'"response_item"') if not title else ()) + ((b'"world_state"',) if not cwd
                                                                                    else ()))

    with open_regular(path) as fh:
        for raw in lines_holding(fh, needles, name=path.name, partial=True):
            if b'"session_meta"' in raw and not session_id:
                payload = _loads(raw).get("payload") or {}
                parent = _codex_parent(payload)
                session_id = str(payload.get("id") or "")
                cwd = str(payload.get("cwd") or "")
                started = iso(payload.get("timestamp")) or iso(_loads(raw).get("timestamp"))
            elif not title and b'"user_message"' in raw:
                payload = _loads(raw).get("payload") or {}
                message = payload.get("message") if isinstance(payload, dict) else None
                title = _codex_prompt(message) if isinstance(message, str) else ""
            elif not title and b'"response_item"' in raw and b'"user"' in raw:
                # Codex 0.1xx writes no user_message event: the person's prompt is the user message item
                title = _codex_item_prompt(_loads(raw).get("payload"))
            elif b'"turn_context"' in raw:
                payload = _loads(raw).get("payload") or {}
                model = str(payload.get("model") or model) if isinstance(payload, dict) else model
                cwd = cwd or (str(payload.get("cwd") or "") if isinstance(payload, dict) else "")
            elif not cwd and b'"world_state"' in raw:  # Codex 0.1xx: session_meta's cwd is empty
                envs = dict_at(dict_at(dict_at(_loads(raw), "payload"), "state"), "environments")
                found = [e.get("cwd") for e in dict_at(envs, "environments").values() if isinstance(e, dict)]
                cwd = next((c for c in found if isinstance(c, str) and c), "")
            elif b'"token_count"' in raw:
                payload = _loads(raw).get("payload") or {}
                info = payload.get("info") if isinstance(payload, dict) else None
                if not isinstance(info, dict):
                    continue
                window = int_or_none(info.get("model_context_window")) or window
                if codex.same_total(info.get("total_token_usage"), last_total):
                    continue
                last_total = info.get("total_token_usage")
                calls += 1
                last = dict_at(info, "last_token_usage")
                last_prompt = int_or_none(last.get("input_tokens"))
    project = Path(cwd).name if cwd else ""
    entry = _entry("codex", project, session_id or path.stem, path, started, calls, last_prompt, window, model,
                   title)
    entry.parent_id = parent
    return entry


def _codex_parent(payload: Any) -> str:
    """The parent thread a Codex ``session_meta`` names (a ``spawn_agent`` subagent's), "" for a session of its own."""
    if not isinstance(payload, dict):
        return ""
    spawn = dict_at(dict_at(dict_at(payload, "source"), "subagent"), "thread_spawn")
    found = payload.get("parent_thread_id") or spawn.get("parent_thread_id")
    return found if isinstance(found, str) else ""


def _codex_prompt(text: str) -> str:
    """A Codex user text as a title: "" for what Codex injects (``<environment_context>``, ``<user_instructions>``,
    the ``# AGENTS.md instructions`` block)."""
    head = text.lstrip()
    return "" if not head or head.startswith(("<", "# AGENTS.md instructions")) else _one_line(text)


def _codex_item_prompt(payload: Any) -> str:
    """The person's prompt of a Codex ``response_item`` user message (its first text Codex did not inject), or ""."""
    if not isinstance(payload, dict) or payload.get("type") != "message" or payload.get("role") != "user":
        return ""
    content = payload.get("content")
    parts = content if isinstance(content, list) else [content]
    for part in parts:
        text = part.get("text") if isinstance(part, dict) else part
        title = _codex_prompt(text) if isinstance(text, str) else ""
        if title:
            return title
    return ""


def _summary_gemini(path: Path) -> SourceEntry:
    """A Gemini CLI file: one call per ``gemini`` record with ``tokens`` (a record written again when it grows
    is the same call: its ``id``)."""
    started, session_id, model, title = "", "", "", ""
    prompts: dict[str, int | None] = {}  # record id -> its prompt, in the order the calls came
    with open_regular(path) as fh:
        for raw in capped_lines(fh, name=path.name):
            if b'"tokens"' in raw and b'"gemini"' in raw:
                obj = _loads(raw)
                gid = obj.get("id")
                if obj.get("type") == "gemini" and isinstance(obj.get("tokens"), dict) and isinstance(gid, str):
                    prompts[gid] = int_or_none(obj["tokens"].get("input"))
                    model = str(obj.get("model") or model)
            elif not session_id and b'"projectHash"' in raw:
                obj = _loads(raw)
                if isinstance(obj.get("sessionId"), str):
                    session_id = str(obj["sessionId"])
                    started = iso(obj.get("startTime"))
            elif not title and b'"user"' in raw and b'"$set"' not in raw:
                title = _gemini_prompt(_loads(raw))
    project = path.parent.parent.name if path.parent.name == "chats" else ""
    last_prompt = next(reversed(prompts.values())) if prompts else None
    stem = path.stem.removeprefix("session-")
    return _entry("gemini-cli", project, session_id or stem, path, started, len(prompts), last_prompt,
                  gemini_cli.window_for_model(model) if model else None, model, title)


def _gemini_prompt(obj: dict[str, Any]) -> str:
    """The text of a person's prompt record (not tool results nor the ``<session_context>``), or ""."""
    if obj.get("type") != "user" or not isinstance(obj.get("id"), str):
        return ""
    content = obj.get("content")
    parts = content if isinstance(content, list) else [content]
    texts = [p if isinstance(p, str) else p.get("text") for p in parts if isinstance(p, str | dict)]
    text = next((t for t in texts if isinstance(t, str) and t.strip()), "")
    return "" if text.lstrip().startswith("<") else _one_line(text)


def _loads(raw: bytes) -> dict[str, Any]:
    """A line's JSON object; {} when it is none (not JSON, not UTF-8, nested too deeply, longer than
    :data:`engine.sources.model.MAX_LINE_BYTES`). A raw control character inside a string is read as it is (as the
    readers do)."""
    if len(raw) > source_model.MAX_LINE_BYTES:
        return {}
    try:
        obj = source_model.loads_line(raw)
    except (ValueError, RecursionError):
        return {}
    return obj if isinstance(obj, dict) else {}


def _entry(agent: Agent, project: str, session_id: str, path: Path, started: str, calls: int,
           last_prompt: int | None, window: int | None, model: str, title: str = "") -> SourceEntry:
    full = round(100.0 * last_prompt / window, 1) if last_prompt is not None and window else None
    return SourceEntry(agent, project, session_id, str(path), started, _last_ts(path) or started, calls,
                       last_prompt, window, full, model, title)


def _summary_pi(path: Path) -> SourceEntry:
    """A Pi file (:func:`engine.sources.pi.light_summary`): one call per assistant message with usage."""
    found = pi.light_summary(path)
    entry = _entry("pi", Path(found.cwd).name if found.cwd else path.parent.name, found.session_id, path, found.started,
                   found.calls, found.last_prompt, found.window, found.model, _one_line(found.title))
    entry.agent_cost_usd = found.cost_usd
    return entry


def _summary_copilot(path: Path) -> SourceEntry:
    """A Copilot CLI events file (:func:`engine.sources.copilot.light_summary`): one call per usage record."""
    found = copilot.light_summary(path)
    return _entry("copilot-cli", Path(found.cwd).name if found.cwd else path.parent.name, found.session_id, path,
                  found.started, found.calls, found.last_prompt, found.window, found.model, _one_line(found.title))


def _summary_cline(path: Path) -> SourceEntry:
    """A Cline document (:func:`engine.sources.cline.light_summary`): titled by the meta's prompt."""
    found = cline.light_summary(path)
    entry = _entry("cline", Path(found.cwd).name if found.cwd else path.parent.name, found.session_id, path,
                   found.started, found.calls, found.last_prompt, None, found.model, _one_line(found.title))
    entry.last_activity = found.last_activity or entry.last_activity
    entry.agent_cost_usd = found.cost_usd
    return entry


def _summary_qwen_code(path: Path) -> SourceEntry:
    """A Qwen Code file (:func:`engine.sources.qwen_code.light_summary`): one call per ``api_response`` event
    (summary calls apart); the project is the folder it ran in; its subagents, the files of its subagents' folder
    (read with it when it is opened or imported)."""
    found = qwen_code.light_summary(path)
    project = Path(found.cwd).name if found.cwd else path.parent.parent.name
    entry = _entry("qwen-code", project, found.session_id, path, found.started, found.calls, found.last_prompt, None,
                   found.model, _one_line(found.title))
    try:
        entry.subagents = len(qwen_code.subagent_files(path, found.session_id or path.stem))
    except OSError:  # a subagents' folder that cannot be listed: the reader says so when the session is opened
        pass
    return entry


def _summary_capture(path: Path) -> SourceEntry:
    """A capture of the recording proxy (:func:`engine.sources.capture.light_summary`, every part, resumable): its
    calls, the last one's prompt, the model's window where it is known (Claude, Gemini), titled by the first prompt
    the agent sent; the project is the folder the recorded agent ran in, else its program's name."""
    found = capture.light_summary(path)
    window: int | None = None
    if found.model.startswith("claude"):
        window = claude_code.window_for_model(found.model, found.largest)[0]
    elif found.model.startswith(("gemini", "gemma", "models/")):
        window = gemini_cli.window_for_model(found.model)
    project = Path(found.cwd).name if found.cwd else found.agent
    entry = _entry("proxy-capture", project, found.session_id or path.stem, path, iso(found.started) or found.started,
                   found.calls, found.last_prompt, window, found.model, _one_line(found.title))
    entry.last_activity = iso(found.last_activity) or entry.last_activity
    return entry


def summarize_read(agent: Agent, path: Path, observe: Callable[[dict[str, Any]], None] | None = None,
                   ) -> tuple[SourceEntry, SourceSession]:
    """A session file's Sources summary (what :func:`summarize` gives) and its session as
    :func:`engine.sources.readers.read_source` reads it. A Claude Code file is read once: the reader hands every
    line's object to the light pass's :meth:`_ClaudeScan.take` (one definition of the summary), and to ``observe``
    when given; the other formats' light pass is a pass of its own (``observe`` is not called)."""
    from engine.sources.claude_code import read_claude_code
    from engine.sources.readers import read_source

    if agent != "claude-code":
        return summarize(agent, path), read_source(path, agent)
    with open_regular(path):  # (what cannot be opened, or is no regular file, said as the light pass says it)
        scan = _ClaudeScan()
    try:
        session = read_claude_code(path, observe=scan.take if observe is None else _both(scan.take, observe))
    except OSError as exc:
        raise SourceError(f"{path.name}: cannot read: {exc.strerror or exc}") from None
    return scan.entry(path), session


def _both(first: Callable[[dict[str, Any]], None],
          then: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def take(obj: dict[str, Any]) -> None:
        first(obj)
        then(obj)
    return take


def summarize(agent: Agent, path: Path) -> SourceEntry:
    """The light pass of ``path`` as the format registry declares it for ``agent``."""
    from engine.sources.formats import light_summary

    return light_summary(agent, path)
