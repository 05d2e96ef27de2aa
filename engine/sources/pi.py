"""Pi sessions: ``~/.pi/agent/sessions/--<cwd with / as ->--/<ISO time>_<uuid>.jsonl`` (the coding agent of
``@mariozechner/pi-coding-agent``; session format version 3, pinned and checked against Pi 0.73.1).

Pi's ``SessionManager`` appends one JSON object a line (it rewrites the file only to migrate an older version):
a *header* ``{type: "session", version, id, timestamp, cwd, parentSession?}`` first, then *entries*
``{type, id, parentId, timestamp, …}`` forming a tree: the conversation is the path from the last entry (the
leaf) back to the root, as Pi's ``buildSessionContext`` walks it; entries off that path are branches the
conversation left (``/tree``, ``/fork``).

Entry types (:data:`READ_ENTRIES`, :data:`IGNORED_ENTRIES`):

- ``message``: ``message.role`` ``user`` (text and image blocks), ``assistant`` (``text``, ``thinking`` and
  ``toolCall`` blocks; ``api``, ``provider``, ``model``, ``usage``, ``stopReason``, ``responseId``),
  ``toolResult`` (``toolCallId``, content blocks, ``isError``), ``bashExecution`` (a ``!`` command the user
  ran, sent as a user message unless ``excludeFromContext``), ``custom`` (an extension's message, sent as a user
  message);
- ``compaction``: ``{summary, firstKeptEntryId, tokensBefore, details, fromHook}``: the context becomes the
  summary (a user message, :data:`COMPACTION_SUMMARY_PREFIX`), the path's messages from ``firstKeptEntryId``
  on, then what follows;
- ``branch_summary``: ``{fromId, summary}``: a user message (:data:`BRANCH_SUMMARY_PREFIX`) where the
  conversation came back from a branch; ``custom_message``: an extension's message sent as a user message;
- ``model_change`` (the model), and the entries of no use here: ``thinking_level_change``, ``custom``,
  ``label``, ``session_info``.

Usage: one provider call per assistant message, identified by its ``responseId``, in file order (those on a
branch the conversation left included: they were paid for). ``usage.input`` is the
uncached prompt, ``cacheRead`` / ``cacheWrite`` the cache figures, so the whole prompt is
``input + cacheRead + cacheWrite``; ``output`` includes reasoning tokens; ``cost.total`` is Pi's own price of
the call (summed as the agent's cost). An errored or aborted response is a call (with its usage, if any) but no
message: Pi does not send it again. The compaction's own summarisation request is recorded nowhere (no cost).
Pi does not record the trigger of a compaction (auto or ``/compact``): it is ``unknown``. The system prompt and
tool definitions are not in the file: their size is inferred by the importer. The model's window is read from
``models.json`` beside the sessions folder (a custom provider's ``contextWindow``) when it names the model.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.model.messages import Message
from engine.sources.model import (
    LINE_ERRORS,
    PROVIDER,
    Compaction,
    LineBuffer,
    ProviderCall,
    Skipped,
    SourceChanges,
    SourceSession,
    _decode,
    capped_lines,
    dict_at,
    feed_whole,
    float_or_none,
    int_or_none,
    iso,
    json_args,
    json_lines,
    line_problem,
    open_regular,
    read_regular,
)

COMPACTION_SUMMARY_PREFIX = ("The conversation history before this point was compacted into the following "
                             "summary:\n\n<summary>\n")
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"
BRANCH_SUMMARY_PREFIX = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
BRANCH_SUMMARY_SUFFIX = "</summary>"

HEADER = "session"
READ_ENTRIES = frozenset({"message", "compaction", "branch_summary", "custom_message", "model_change"})
# Entry types left out on purpose, and why (counted as ``entry/<type>``).
IGNORED_ENTRIES: dict[str, str] = {
    "thinking_level_change": "the reasoning level setting; what it cost is in the calls' own figures",
    "custom": "an extension's saved state; not sent to the model",
    "label": "a bookmark the user put on an entry; not sent to the model",
    "session_info": "the session's display name; not sent to the model",
}
KNOWN_ENTRIES = READ_ENTRIES | frozenset(IGNORED_ENTRIES)
READ_ROLES = frozenset({"user", "assistant", "toolResult", "bashExecution", "custom", "branchSummary",
                        "compactionSummary"})
FAILED_STOPS = frozenset({"error", "aborted"})  # responses Pi leaves out of the next request


def record_kind(obj: dict[str, Any]) -> str:
    """``session`` (the header), an entry type, or "" for a line that is neither."""
    kind = obj.get("type")
    if not isinstance(kind, str) or not isinstance(obj.get("id"), str):
        return ""
    if kind == HEADER:
        return HEADER
    return kind if "parentId" in obj else ""


def is_pi_line(obj: dict[str, Any]) -> bool:
    """A line of a Pi session: its header (``type: session`` with ``version`` and ``cwd``) or an entry of a type
    Pi writes (``id``, ``parentId``, ``timestamp``)."""
    kind = obj.get("type")
    if kind == HEADER:
        return isinstance(obj.get("id"), str) and "cwd" in obj and "version" in obj
    return (isinstance(kind, str) and kind in KNOWN_ENTRIES and isinstance(obj.get("id"), str)
            and "parentId" in obj and "timestamp" in obj)


# --------------------------------------------------------------------------- entries to messages


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, list):
        return content
    return [] if content is None or content == "" else [content]


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return ""
    if block.get("type") == "image":
        return f"[image: {block.get('mimeType') or ''}]".replace(": ]", "]")
    text = block.get("text")
    return text if isinstance(text, str) else ""


def _text(content: Any) -> str:
    return "\n".join(t for t in (_block_text(b) for b in _blocks(content)) if t)


def bash_execution_text(msg: dict[str, Any]) -> str:
    """A ``bashExecution`` message as the user text Pi sends (its ``bashExecutionToText``)."""
    output = msg.get("output")
    text = f"Ran `{msg.get('command') or ''}`\n"
    text += f"```\n{output}\n```" if output else "(no output)"
    if msg.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif isinstance(msg.get("exitCode"), int) and msg["exitCode"] != 0:
        text += f"\n\nCommand exited with code {msg['exitCode']}"
    if msg.get("truncated") and msg.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {msg['fullOutputPath']}]"
    return text


def _assistant(msg: dict[str, Any], ts: str) -> Message:
    texts, thoughts, calls = [], [], []
    for block in _blocks(msg.get("content")):
        if not isinstance(block, dict):
            texts.append(_block_text(block))
        elif block.get("type") == "toolCall":
            calls.append({"id": str(block.get("id") or ""), "type": "function",
                          "function": {"name": str(block.get("name") or ""),
                                       "arguments": json_args(block.get("arguments") or {})}})
        elif block.get("type") == "thinking":
            if isinstance(block.get("thinking"), str) and block["thinking"]:
                thoughts.append(block["thinking"])
        elif text := _block_text(block):
            texts.append(text)
    out: Message = {"role": "assistant", "content": "".join(texts), "ts": ts}
    if calls:
        out["tool_calls"] = calls
    if thoughts:
        out["reasoning_content"] = "\n".join(thoughts)
    return out


def convert_message(msg: dict[str, Any], ts: str) -> list[Message]:
    """A ``message`` entry's message as the OpenAI-format messages Pi sends for it ([] when it sends none)."""
    role = msg.get("role")
    if role == "user":
        return [{"role": "user", "content": _text(msg.get("content")), "ts": ts}]
    if role == "assistant":
        return [] if msg.get("stopReason") in FAILED_STOPS else [_assistant(msg, ts)]
    if role == "toolResult":
        return [{"role": "tool", "tool_call_id": str(msg.get("toolCallId") or ""), "content": _text(msg.get("content")),
                 "ts": ts}]
    if role == "bashExecution":
        if msg.get("excludeFromContext"):  # a ``!!`` command: shown, never sent
            return []
        return [{"role": "user", "content": bash_execution_text(msg), "ts": ts}]
    if role == "custom":
        return [{"role": "user", "content": _text(msg.get("content")), "ts": ts}]
    if role == "branchSummary":
        text = BRANCH_SUMMARY_PREFIX + str(msg.get("summary") or "") + BRANCH_SUMMARY_SUFFIX
        return [{"role": "user", "content": text, "ts": ts}]
    if role == "compactionSummary":
        return [{"role": "user", "content": summary_text(str(msg.get("summary") or "")), "ts": ts}]
    return []


def summary_text(summary: str) -> str:
    """A compaction's summary as the user message Pi sends in place of the old context."""
    return COMPACTION_SUMMARY_PREFIX + summary + COMPACTION_SUMMARY_SUFFIX


def _prompt_tokens(usage: dict[str, Any]) -> int | None:
    parts = [int_or_none(usage.get(k)) for k in ("input", "cacheRead", "cacheWrite")]
    if parts[0] is None:
        return None
    return sum(p or 0 for p in parts)


# --------------------------------------------------------------------------- models.json


def models_file(path: Path) -> Path | None:
    """``<agent dir>/models.json`` of a session at ``<agent dir>/sessions/<folder>/<file>.jsonl``; None elsewhere."""
    if path.parent.parent.name == "sessions":
        return path.parent.parent.parent / "models.json"
    return None


def configured_windows(path: Path) -> dict[tuple[str, str], tuple[int | None, int | None]]:
    """(provider, model id) -> (contextWindow, maxTokens) of the custom models in ``models.json`` beside the
    sessions folder of ``path`` (empty when there is none or it cannot be read)."""
    where = models_file(Path(path))
    out: dict[tuple[str, str], tuple[int | None, int | None]] = {}
    if where is None:
        return out
    try:
        data = _decode(read_regular(where).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return out
    for name, provider in dict_at(data, "providers").items():
        models = provider.get("models") if isinstance(provider, dict) else None
        for spec in models if isinstance(models, list) else []:
            if isinstance(spec, dict) and isinstance(spec.get("id"), str):
                out[(str(name), spec["id"])] = (int_or_none(spec.get("contextWindow")),
                                                int_or_none(spec.get("maxTokens")))
    return out


# --------------------------------------------------------------------------- the reader


class PiReader:
    """The incremental reader of one Pi session file: bytes (or complete lines) in, changes out.

    Entries are kept by id; after each feed the conversation is the path from the last entry to the root. When
    it only grew (the old leaf is on the new path), what the new entries add is appended; when the leaf moved
    to another branch, the session is derived again from the new path (``reset``)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        stem = self.path.stem
        self.session = SourceSession("pi", self.path, stem.split("_", 1)[-1],
                                     prefix_label="system prompt and tool definitions")
        self._buffer = LineBuffer()
        self._n = 0
        self._entries: dict[str, dict[str, Any]] = {}  # entry id -> the entry (its line's object)
        self._line_of: dict[str, int] = {}
        self._leaf = ""
        self._path: list[str] = []  # the entry ids of the conversation, root first
        self._kept: dict[str, list[Message]] = {}  # entry id -> its messages, as derived (for compactions)
        self._windows: dict[tuple[str, str], tuple[int | None, int | None]] | None = None
        self._provider = ""
        self._call_of: dict[str, int] = {}  # assistant entry id -> its call's index in session.calls
        self._call_lines: list[int] = []  # the line of each call (parallel to session.calls)
        self._updated: set[int] = set()
        self._touched = -1  # the first compaction whose figures changed in this feed (-1: none)
        self._end_of: dict[str, int] = {}  # entry id on the path -> len(session.messages) once it was applied
        self._last_model = ""  # of the last call that names one
        self._last_window: int | None = None  # of the last call with a window
        self._unplaced: set[str] = set()  # assistant entries whose call is not placed on the path (yet)
        self._message_entries = 0  # message entries in the file
        self._messages_on_path = 0  # message entries on the path

    # ------------------------------------------------------------------ input
    def feed(self, data: bytes) -> SourceChanges:
        """Take appended bytes; a partial last line is kept until its newline arrives."""
        return self.feed_lines(self._buffer.lines(data))

    def feed_lines(self, lines: Iterable[bytes]) -> SourceChanges:
        """Take complete lines (each ending with its newline; a last one without it is read as torn)."""
        session = self.session
        mark = (len(session.messages), len(session.calls), len(session.compactions))
        self._updated, self._touched = set(), -1
        for n, obj in json_lines(lines, session.skipped, start=self._n + 1):
            self._n = n
            session.lines = n
            try:
                self._line(n, obj)
            except LINE_ERRORS as exc:  # a field of a shape never seen: this line skipped, said
                session.skipped.append(line_problem(n, exc))
        new = self._grown()
        if new is not None:
            self._path.extend(new)
            for eid in new:
                self._apply(eid)
            self._derive()
            touched = mark[2] if self._touched < 0 else min(mark[2], self._touched)
            return SourceChanges(messages_from=mark[0], calls_from=mark[1], compactions_from=touched,
                                 calls_updated=sorted(i for i in self._updated if i < mark[1]), subagents_from=0)
        # the leaf moved to another branch: derived again
        self._path = self._path_to(self._leaf)
        self._rederive()
        self._derive()
        return SourceChanges(reset=True)

    def finish(self) -> SourceSession:
        """The whole session: a last line without its newline read as it is (or reported torn)."""
        if pending := self._buffer.rest():
            self.feed_lines([pending])
        return self.session

    # ------------------------------------------------------------------ lines
    def _line(self, n: int, obj: dict[str, Any]) -> None:
        session = self.session
        kind = record_kind(obj)
        ts = iso(obj.get("timestamp"))
        if ts:
            session.started = session.started or ts
            session.last_activity = max(session.last_activity, ts)
        if kind == HEADER:
            if not self._entries and not session.cwd:
                session.session_id = str(obj["id"])
                session.cwd = str(obj.get("cwd") or "")
                session.started = ts or session.started
                if obj.get("parentSession"):
                    session.notes.append(f"forked from {obj['parentSession']}")
            return
        if not kind:
            session.skipped.append(Skipped(n, "a line of no entry type Pi writes (a session header, or an entry "
                                              "with id and parentId)"))
            return
        if kind in IGNORED_ENTRIES:
            session.ignore(f"entry/{kind}")
        elif kind not in READ_ENTRIES:
            session.skipped.append(Skipped(n, f"entry type {kind!r} is not one this reader knows"))
            return
        elif kind == "message":
            role = dict_at(obj, "message").get("role")
            if not isinstance(role, str) or role not in READ_ROLES:
                session.skipped.append(Skipped(n, f"message role {role!r} is not one this reader knows"))
                return
            self._message_entries += 1
            if role == "assistant":  # a call, in file order, on the conversation's path or not (it was paid)
                self._call(n, obj, dict_at(obj, "message"), ts)
        eid = str(obj["id"])
        self._entries[eid] = obj
        self._line_of[eid] = n
        self._leaf = eid

    def _grown(self) -> list[str] | None:
        """The entries from the old leaf (excluded) to the new one, when the new leaf descends from the old one
        (the usual append: only the new entries are walked); None when the leaf moved to another branch."""
        old = self._path[-1] if self._path else None
        out: list[str] = []
        seen: set[str] = set()
        current = self._entries.get(self._leaf)
        while current is not None:
            eid = str(current["id"])
            if eid == old:
                out.reverse()
                return out
            if eid in seen:  # a loop of parent links (a damaged file)
                break
            seen.add(eid)
            out.append(eid)
            parent = current.get("parentId")
            current = self._entries.get(parent) if isinstance(parent, str) else None
        if old is None:
            out.reverse()
            return out
        return None

    def _path_to(self, leaf: str) -> list[str]:
        path: list[str] = []
        seen: set[str] = set()
        current = self._entries.get(leaf)
        while current is not None:
            eid = str(current["id"])
            if eid in seen:  # a loop of parent links (a damaged file): the path ends there
                break
            seen.add(eid)
            path.append(eid)
            parent = current.get("parentId")
            current = self._entries.get(parent) if isinstance(parent, str) else None
        path.reverse()
        return path

    # ------------------------------------------------------------------ the path to the session
    def _rederive(self) -> None:
        session = self.session
        session.messages.clear()
        session.compactions.clear()
        session.live_start = 0
        self._kept.clear()
        self._end_of.clear()
        self._messages_on_path = 0
        self._unplaced = set(self._call_of)
        for eid in self._path:
            self._apply(eid)


    def _add(self, eid: str, msgs: list[Message]) -> None:
        session = self.session
        for msg in msgs:
            msg["id"] = session.make_id()
            session.messages.append(msg)
        self._kept[eid] = msgs

    def _apply(self, eid: str) -> None:
        entry = self._entries[eid]
        kind = entry["type"]
        ts = iso(entry.get("timestamp"))
        try:
            if kind == "message":
                msg = dict_at(entry, "message")
                self._messages_on_path += 1
                index = self._call_of.get(eid)
                if index is not None and self.session.calls[index].message_index != len(self.session.messages):
                    self.session.calls[index].message_index = len(self.session.messages)
                    self._updated.add(index)
                self._add(eid, convert_message(msg, ts))
            elif kind == "compaction":
                self._compaction(entry, ts)
            elif kind == "branch_summary" and entry.get("summary"):
                self._add(eid, [{"role": "user", "ts": ts, "content": BRANCH_SUMMARY_PREFIX + str(entry["summary"])
                                 + BRANCH_SUMMARY_SUFFIX}])
            elif kind == "custom_message":
                self._add(eid, [{"role": "user", "content": _text(entry.get("content")), "ts": ts}])
            elif kind == "model_change":
                self._provider = str(entry.get("provider") or self._provider)
                self.session.model = str(entry.get("modelId") or self.session.model)
        except LINE_ERRORS as exc:
            self.session.skipped.append(line_problem(self._line_of.get(eid, 0), exc))
        self._end_of[eid] = len(self.session.messages)

    def _place_off_path(self) -> None:
        """A call on a branch the conversation left is placed where its branch leaves the path."""
        calls = self.session.calls
        for eid in list(self._unplaced):
            if eid in self._end_of:
                self._unplaced.discard(eid)
                continue
            index = self._call_of[eid]
            at, seen = 0, set()
            current = self._entries.get(eid)
            while current is not None and str(current["id"]) not in seen:
                seen.add(str(current["id"]))
                parent = current.get("parentId")
                if isinstance(parent, str) and parent in self._end_of:
                    at = self._end_of[parent]
                    break
                current = self._entries.get(parent) if isinstance(parent, str) else None
            if calls[index].message_index != at:
                calls[index].message_index = at
                self._updated.add(index)

    def _call(self, n: int, entry: dict[str, Any], msg: dict[str, Any], ts: str) -> None:
        session = self.session
        usage = dict_at(msg, "usage")
        failed = msg.get("stopReason") in FAILED_STOPS and not int_or_none(usage.get("totalTokens"))
        model = str(msg.get("model") or "")
        self._provider = str(msg.get("provider") or self._provider)
        window, max_tokens = self._window(self._provider, model)
        call = ProviderCall(
            index=len(session.calls), prompt_tokens=None if failed else _prompt_tokens(usage),
            completion_tokens=None if failed else int_or_none(usage.get("output")),
            cache_read_tokens=None if failed else int_or_none(usage.get("cacheRead")),
            cache_write_tokens=None if failed else int_or_none(usage.get("cacheWrite")),
            model=model, ts=ts, window=window, message_index=len(session.messages),
            request_id=str(msg.get("responseId") or ""), max_tokens=max_tokens)
        session.calls.append(call)
        self._last_model = model or self._last_model
        self._last_window = window or self._last_window
        self._call_of[str(entry["id"])] = call.index
        self._unplaced.add(str(entry["id"]))
        self._call_lines.append(n)
        cost = float_or_none(dict_at(usage, "cost").get("total"))
        if cost is not None:
            session.agent_cost_usd = (session.agent_cost_usd or 0.0) + cost
            session.agent_cost_by_model[model] = session.agent_cost_by_model.get(model, 0.0) + cost

    def _compaction(self, entry: dict[str, Any], ts: str) -> None:
        """The context becomes the summary, the path's messages from ``firstKeptEntryId`` to here, then on."""
        session = self.session
        first_kept = entry.get("firstKeptEntryId")
        here = self._path.index(str(entry["id"]))
        at = next((i for i, eid in enumerate(self._path[:here]) if eid == first_kept), here)
        kept = [dict(m) for eid in self._path[at:here] for m in self._kept.get(eid, [])]
        hook = bool(entry.get("fromHook"))
        comp = Compaction(
            index=len(session.compactions), trigger="unknown",
            trigger_source="not recorded by Pi (auto or /compact)" + ("; written by an extension" if hook else ""),
            ts=ts, message_index=len(session.messages),
            calls_before=bisect.bisect_left(self._call_lines, self._line_of.get(str(entry["id"]), 0)),
            tokens_before=int_or_none(entry.get("tokensBefore")), tokens_before_source=PROVIDER,
            summary=str(entry.get("summary") or ""), messages_after=1 + len(kept))
        session.compactions.append(comp)
        self._add(str(entry["id"]), [{"role": "user", "content": summary_text(comp.summary), "ts": ts}])
        for msg in kept:
            msg["id"] = session.make_id()
            session.messages.append(msg)
        session.live_start = comp.message_index

    def _window(self, provider: str, model: str) -> tuple[int | None, int | None]:
        if self._windows is None:
            self._windows = configured_windows(self.path)
        return self._windows.get((provider, model), (None, None))

    def _derive(self) -> None:
        session = self.session
        if self._unplaced:
            self._place_off_path()
        for comp in session.compactions:  # the first call after it (None until it is made)
            after = session.calls[comp.calls_before].prompt_tokens if comp.calls_before < len(session.calls) else None
            if after != comp.tokens_after:
                comp.tokens_after = after
                self._touched = comp.index if self._touched < 0 else min(self._touched, comp.index)
        session.model = self._last_model or session.model
        if self._last_window:
            session.window, session.window_source = self._last_window, "models.json"
        elif session.model:
            window, _ = self._window(self._provider, session.model)
            session.window, session.window_source = window, "models.json" if window else ""
        if session.cwd and not session.project:
            session.project = Path(session.cwd).name
        session.off_chain = self._message_entries - self._messages_on_path


def read_pi(path: Path, *, lines: Iterable[bytes] | None = None) -> SourceSession:
    """Read one Pi session file; ``lines``: its lines already read (kept by the caller)."""
    reader = PiReader(Path(path))
    feed_whole(reader, path, lines)
    return reader.finish()


@dataclass
class LightSummary:
    """What Sources lists of a Pi file, from a light pass (only the header, the assistant lines with usage and
    the first prompt are parsed): every call in the file counted (branches included)."""

    session_id: str = ""
    started: str = ""
    cwd: str = ""
    calls: int = 0
    last_prompt: int | None = None
    model: str = ""
    window: int | None = None
    title: str = ""
    cost_usd: float | None = None


def light_summary(path: Path) -> LightSummary:
    """The :class:`LightSummary` of the Pi session at ``path`` (SourceError / OSError when it cannot be read)."""
    out = LightSummary(session_id=Path(path).stem.split("_", 1)[-1])
    provider = ""
    with open_regular(path) as fh:
        for raw in capped_lines(fh, name=Path(path).name):
            if b'"usage"' in raw and b'"assistant"' in raw:
                obj = _loads(raw)
                msg = dict_at(obj, "message")
                if obj.get("type") == "message" and msg.get("role") == "assistant":
                    usage = dict_at(msg, "usage")
                    out.calls += 1
                    out.last_prompt = _prompt_tokens(usage)
                    out.model = str(msg.get("model") or out.model)
                    provider = str(msg.get("provider") or provider)
                    cost = float_or_none(dict_at(usage, "cost").get("total"))
                    if cost is not None:
                        out.cost_usd = (out.cost_usd or 0.0) + cost
            elif not out.started and b'"session"' in raw:
                obj = _loads(raw)
                if obj.get("type") == HEADER and isinstance(obj.get("id"), str):
                    out.session_id, out.started = obj["id"], iso(obj.get("timestamp"))
                    out.cwd = str(obj.get("cwd") or "")
            elif not out.title and b'"user"' in raw:
                out.title = first_prompt(_loads(raw))
    if out.model:
        out.window = configured_windows(Path(path)).get((provider, out.model), (None, None))[0]
    return out


def _loads(raw: bytes) -> dict[str, Any]:
    try:
        obj = _decode(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return {}
    return obj if isinstance(obj, dict) else {}


def first_prompt(obj: dict[str, Any]) -> str:
    """The text of a person's prompt entry ("" for any other line)."""
    msg = dict_at(obj, "message")
    if obj.get("type") != "message" or msg.get("role") != "user":
        return ""
    return _text(msg.get("content"))


__all__ = ["IGNORED_ENTRIES", "KNOWN_ENTRIES", "READ_ENTRIES", "READ_ROLES", "LightSummary", "PiReader",
           "bash_execution_text", "configured_windows", "convert_message", "first_prompt", "is_pi_line",
           "light_summary", "read_pi", "record_kind", "summary_text"]
