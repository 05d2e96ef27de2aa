"""Claude Code's conversation lines made into messages (:class:`Build`), for :mod:`engine.sources.claude_code`.

A user line becomes a user message (its ``rowSource`` kept as ``row_source``: ``local`` typed by the person,
``harness`` injected by Claude Code, ``hook`` from a hook, ``recorded`` replayed from a task) and tool messages
(its ``tool_result`` blocks); the lines of one response become one assistant message; a rendered attachment a user
message with its kind; a ``compact_boundary`` a :class:`Compaction` after which the preserved messages are kept;
the ``isCompactSummary`` line gives its summary.

A line is kept (a rewind rebuilds the conversation from the lines) as the build takes it (:func:`parts_of`, made when
the line is scanned): tuples holding the strings its messages hold, a tool call's input as its JSON text — not the
file's block dicts beside the messages made of them (a tool's input as a dict and again as text, a thinking block's
signature): a followed session's reader grows by its messages, not by a second copy of them.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from engine.model.messages import Message
from engine.sources.model import Compaction, ProviderCall, SourceSession, json_args, text_of, trigger_of

# a user line's ``rowSource`` (Claude Code 2.1.3xx), kept on its message as ``row_source``
ROW_SOURCES: dict[str, str] = {
    "local": "typed by the person at the terminal (or given with -p)",
    "harness": "written by Claude Code itself (a command's output, a skill's text, a compaction's notice)",
    "hook": "written by a hook",
    "recorded": "replayed from a record (a background task's notification)",
}


@dataclass(frozen=True, slots=True)
class LineMore:
    """What only an attachment or a boundary line holds (every other line shares :data:`PLAIN`)."""

    role: str = ""  # an attachment's role as sent (``renderedRole``)
    attachment: str = ""  # an attachment's type
    preserved: tuple[str, ...] = ()  # a boundary's kept messages (uuids)
    post_tokens: int | None = None
    logical_parent: str | None = None
    trigger: str = ""
    pre_tokens: int | None = None
    dropped: int | None = None  # a boundary's running total of dropped tokens (``cumulativeDroppedTokens``)


PLAIN = LineMore()


@dataclass(slots=True)
class Line:
    """One line of the file that may become part of the conversation (a message, an attachment, a boundary). The
    reader keeps one for every such line (a rewind rebuilds from them): the fields of the rare kinds are in ``more``,
    one shared :data:`PLAIN` for the user and assistant lines, not eight empty slots each."""

    n: int
    uuid: str
    kind: str  # "user" | "assistant" | "boundary" | "attachment"
    ts: str
    content: Any = None
    key: tuple[str, str] | None = None
    sidechain: bool = False
    compact_summary: bool = False
    row_source: str = ""  # a user line's ``rowSource``: local (typed), harness, hook, recorded
    more: LineMore = PLAIN

    @property
    def role(self) -> str:
        return self.more.role

    @property
    def attachment(self) -> str:
        return self.more.attachment

    @property
    def preserved(self) -> tuple[str, ...]:
        return self.more.preserved

    @property
    def post_tokens(self) -> int | None:
        return self.more.post_tokens

    @property
    def logical_parent(self) -> str | None:
        return self.more.logical_parent

    @property
    def trigger(self) -> str:
        return self.more.trigger

    @property
    def pre_tokens(self) -> int | None:
        return self.more.pre_tokens

    @property
    def dropped(self) -> int | None:
        return self.more.dropped


def tool_ids(content: Any, block_type: str, key: str) -> list[str]:
    """The ids of a line's raw ``message.content`` blocks of one type (as the file has them)."""
    if not isinstance(content, list):
        return []
    return [str(b.get(key)) for b in content if isinstance(b, dict) and b.get("type") == block_type]


# A line's content as the build takes it (:func:`parts_of`), made once when the line is scanned: the blocks' dicts
# (a tool call's input, a thinking block's signature, the fields no message holds) are not kept beside the messages
# made of them; the strings are the messages' own. A tuple of parts, or a user line's string:
#   ("text", text) | ("thinking", text) | ("redacted", characters) | ("use", id, name, arguments as JSON text)
#   | ("result", tool_use_id, text or a tuple of ("text", text) / ("image",), is_error) | ("image",) | ("document",)
Parts = tuple[tuple[Any, ...], ...]


def _result_parts(block: dict[str, Any]) -> str | tuple[tuple[Any, ...], ...]:
    content = block.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    parts: list[tuple[Any, ...]] = []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, dict) and part.get("type") == "text":
            parts.append(("text", str(part.get("text") or "")))
        elif isinstance(part, dict) and part.get("type") == "image":
            parts.append(("image",))
        elif isinstance(part, str):
            parts.append(("text", part))
    if all(p[0] == "text" for p in parts):
        return "\n".join(p[1] for p in parts)
    return tuple(parts)


def _block_part(block: dict[str, Any], arguments: bool) -> tuple[Any, ...] | None:
    btype = block.get("type")
    if btype == "text":
        return ("text", str(block.get("text") or ""))
    if btype == "thinking":
        return ("thinking", str(block.get("thinking") or ""))
    if btype == "redacted_thinking":
        return ("redacted", len(str(block.get("data") or "")))
    if btype in ("tool_use", "server_tool_use"):
        return ("use", str(block.get("id") or ""), sys.intern(str(block.get("name") or "")),  # (a name: one string)
                json_args(block.get("input")) if arguments else "")
    if btype == "tool_result":
        return ("result", str(block.get("tool_use_id") or ""), _result_parts(block), bool(block.get("is_error")))
    if btype == "image":
        return ("image",)
    if btype == "document":
        return ("document",)
    return None


def parts_of(kind: str, content: Any, arguments: bool = True) -> str | Parts:
    """What the build takes of a ``user`` or ``assistant`` line's ``message.content`` (``arguments``: tool calls'
    input made into JSON text, else ""): the messages made from the parts equal those made from the content."""
    if kind == "user" and isinstance(content, str):
        return content
    if not isinstance(content, list):
        if kind == "user":
            return ()
        content = [{"type": "text", "text": str(content or "")}]
    return tuple(p for p in (_block_part(b, arguments) for b in content if isinstance(b, dict)) if p is not None)


def part_ids(parts: Any, kind: str) -> list[str]:
    """The tool-call ids of a line's parts of one ``kind``: ``"use"``, the calls an assistant line makes;
    ``"result"``, those a user line answers."""
    return [p[1] for p in parts if p[0] == kind] if isinstance(parts, tuple) else []


def _result_content(result: str | tuple[tuple[Any, ...], ...]) -> str | list[dict[str, Any]]:
    if isinstance(result, str):
        return result
    return [{"type": "text", "text": p[1]} if p[0] == "text" else
            {"type": "image_url", "image_url": {"url": "about:blank#image-not-imported"}} for p in result]


def _user_messages(line: Line) -> list[Message]:
    content = line.content
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    out: list[Message] = []
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, tuple) else ():
        kind = part[0]
        if kind == "result":
            msg: Message = {"role": "tool", "tool_call_id": part[1], "content": _result_content(part[2])}
            if part[3]:
                msg["is_error"] = True
            out.append(msg)
        elif kind == "text":
            parts.append({"type": "text", "text": part[1]})
        elif kind == "image":
            parts.append({"type": "image_url", "image_url": {"url": "about:blank#image-not-imported"}})
        elif kind == "document":
            parts.append({"type": "text", "text": "[document not imported]"})
    if parts:
        plain = all(p["type"] == "text" for p in parts)
        text = "\n".join(p["text"] for p in parts) if plain else parts
        out.append({"role": "user", "content": text})
    return out


def fresh_copy(msg: Message) -> Message:
    """``msg`` as a new dict to change (its ``tool_calls`` a new list): a message the reader has made is never changed
    in place (:attr:`SourceSession.fresh_on_change`), as a followed view holds the dicts it was handed."""
    out = dict(msg)
    if isinstance(out.get("tool_calls"), list):
        out["tool_calls"] = list(out["tool_calls"])
    return out


def _merge_assistant(msg: Message, content: Any) -> None:
    for part in content if isinstance(content, tuple) else ():
        kind = part[0]
        if kind == "text":
            msg["content"] = (msg.get("content") or "") + ("\n" if msg.get("content") else "") + part[1]
        elif kind == "thinking":
            prev = msg.get("reasoning_content") or ""
            msg["reasoning_content"] = prev + ("\n" if prev else "") + part[1]
        elif kind == "redacted":
            prev = msg.get("reasoning_content") or ""
            msg["reasoning_content"] = prev + f"[redacted thinking: {part[1]} characters]"
        elif kind == "use":
            call = {"id": part[1], "type": "function", "function": {"name": part[2], "arguments": part[3]}}
            msg.setdefault("tool_calls", []).append(call)


def place_orphan_boundaries(lines: list[Line], parents: dict[str, str | None]) -> set[str]:
    """A boundary whose ``logicalParentUuid`` names no line of the file (or names none) is linked to the
    conversation line before it in the file: the file order says where the compaction happened.
    Returns those boundaries' uuids."""
    placed: set[str] = set()
    last: str | None = None
    for ln in lines:
        if ln.kind == "boundary":
            if last is not None and (ln.logical_parent is None or ln.logical_parent not in parents):
                parents[ln.uuid] = last
                placed.add(ln.uuid)
            last = ln.uuid
        elif not ln.sidechain:
            last = ln.uuid
    return placed


def _chain(lines: list[Line], parents: dict[str, str | None]) -> set[str]:
    """The uuids on the conversation's chain, from its last message back to the start."""
    convo = [ln for ln in lines if ln.kind != "boundary"]
    if not convo:
        return set()
    main = [ln for ln in convo if not ln.sidechain]
    cur: str | None = (main or convo)[-1].uuid
    seen: set[str] = set()
    while cur is not None and cur not in seen:
        seen.add(cur)
        cur = parents.get(cur)
    return seen


def kept_lines(lines: list[Line], parents: dict[str, str | None]) -> tuple[set[int], set[str]]:
    """Line numbers of the conversation: the chain plus the parallel-call siblings hanging off it; and the ids of
    the tool calls its assistant lines make."""
    chain = _chain(lines, parents)
    keys = {ln.key for ln in lines if ln.uuid in chain and ln.key is not None}
    kept = {ln.n for ln in lines if ln.uuid in chain or (ln.key is not None and ln.key in keys)}
    uses = set()
    for ln in lines:
        if ln.n in kept and ln.kind == "assistant":
            uses.update(part_ids(ln.content, "use"))
    for ln in lines:
        if ln.kind == "user" and ln.n not in kept:
            results = part_ids(ln.content, "result")
            if results and all(r in uses for r in results):
                kept.add(ln.n)
    return kept, uses


@dataclass
class Build:
    """Turns the conversation's lines into messages, one line at a time (the whole file, or what was
    appended)."""

    session: SourceSession
    calls: dict[tuple[str, str], ProviderCall]
    placed: set[str] = field(default_factory=set)
    open_assistant: dict[tuple[str, str], int] = field(default_factory=dict)  # response -> its message's index
    calls_seen: set[tuple[str, str]] = field(default_factory=set)
    # the messages each line became: an index, or a list of them for a line of several (one int a line, mostly)
    by_uuid: dict[str, int | list[int]] = field(default_factory=dict)
    talk_since_boundary: bool = False  # a user or assistant message came after the last boundary
    touched: int = -1  # the lowest index of an existing message changed since the last look (-1: none)
    comp_touched: int = -1  # the same for compactions (a summary line completing its boundary)

    def add(self, msg: Message, line: Line) -> None:
        msg["id"] = self.session.make_id()
        msg["ts"] = line.ts or self.session.last_activity
        self._became(line.uuid, len(self.session.messages))
        self.session.messages.append(msg)

    def _became(self, uuid: str, index: int) -> None:
        held = self.by_uuid.get(uuid)
        if held is None:
            self.by_uuid[uuid] = index
        elif isinstance(held, int):
            self.by_uuid[uuid] = [held, index]
        else:
            held.append(index)

    def became(self, uuid: str) -> list[int]:
        """The indices of the messages the line ``uuid`` became, in the order they were made."""
        held = self.by_uuid.get(uuid)
        return [] if held is None else [held] if isinstance(held, int) else held

    def take(self, line: Line, kept: bool) -> None:
        session = self.session
        if line.key is not None and line.key not in self.calls_seen:
            self.calls_seen.add(line.key)
            call = self.calls.get(line.key)
            if call is not None:
                call.message_index = len(session.messages)
        if not kept:
            if line.kind != "boundary":
                session.off_chain += 1
            return
        if line.kind == "boundary":
            self._compaction_at(line)
        elif line.kind == "attachment":
            # the history holds user/assistant/tool roles: an attachment sent as a system message is a user
            # message with its kind and the role it was sent as
            self.add({"role": "user", "content": str(line.content), "attachment": line.attachment,
                      "sent_as": line.role}, line)
        elif line.kind == "user" and line.compact_summary:
            last = session.compactions[-1] if session.compactions else None
            if last is None or last.summary or self.talk_since_boundary:
                # a summary without its boundary line (how Claude Code wrote compactions before 2.0)
                last = Compaction(index=len(session.compactions), trigger="unknown", trigger_source="",
                                  ts=line.ts, message_index=len(session.messages), calls_before=0,
                                  tokens_before=None)
                session.compactions.append(last)
            last.summary = text_of(line.content)
            if self.comp_touched < 0 or last.index < self.comp_touched:
                self.comp_touched = last.index
        elif line.kind == "user":
            self.talk_since_boundary = True
            for msg in _user_messages(line):
                if line.row_source and msg["role"] == "user":
                    msg["row_source"] = line.row_source
                self.add(msg, line)
        elif line.key is not None:
            self.talk_since_boundary = True
            at = self.open_assistant.get(line.key)
            if at is None:
                at = len(session.messages)
                self.open_assistant[line.key] = at
                self.add({"role": "assistant", "content": None}, line)
            else:
                if self.touched < 0 or at < self.touched:
                    self.touched = at
                self._became(line.uuid, at)
                session.messages[at] = fresh_copy(session.messages[at])  # (never changed in place: see below)
            _merge_assistant(session.messages[at], line.content)

    def _compaction_at(self, line: Line) -> None:
        """The boundary: messages before it leave the context; the ones it preserved are kept after it."""
        session = self.session
        comp = Compaction(index=len(session.compactions), trigger=trigger_of(line.trigger),
                          trigger_source=line.trigger, ts=line.ts, message_index=len(session.messages),
                          calls_before=0, tokens_before=line.pre_tokens, post_tokens=line.post_tokens,
                          placed_by="file order" if line.uuid in self.placed else "chain",
                          cumulative_dropped_tokens=line.dropped)
        session.compactions.append(comp)
        self.open_assistant.clear()
        self.talk_since_boundary = False
        indices = dict.fromkeys(i for uid in line.preserved for i in self.became(uid))
        for i in indices:
            if i < len(session.messages):
                kept = {k: v for k, v in session.messages[i].items() if k not in ("id", "subagent")}
                kept.update(id=session.make_id(), preserved=True)  # the same message, still in the context
                session.messages.append(kept)
                comp.messages_after += 1
