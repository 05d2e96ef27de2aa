"""Claude Code sessions: ``~/.claude/projects/<project>/<session>.jsonl`` (+ ``<session>/subagents/``,
``<session>/tool-results/``).

One JSON object a line. What matters for the context:

- The conversation is the ``parentUuid`` chain ending at the last message, followed *across*
  ``compact_boundary`` lines (``parentUuid: null``, ``logicalParentUuid`` names the line before).
  Parallel tool calls hang off the chain as siblings: lines that belong to a response on the chain
  (same ``message.id``) and the results of its tool calls are kept too; other branches (rewinds)
  are left out and counted.
- A response is split over several ``assistant`` lines (one per content block) sharing
  ``message.id`` + ``requestId`` and repeating ``usage``: one provider call, one assistant message.
  Its prompt is ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``; the
  output is the largest ``output_tokens`` seen (early lines carry a streaming placeholder).
- ``toolUseResult`` is a richer copy of a tool's output the model never saw: only the
  ``tool_result`` blocks of ``message.content`` become tool messages.
- A compaction: the ``compact_boundary`` line (``compactMetadata.trigger``, ``preTokens``) and the
  next ``isCompactSummary`` user line, whose text is the summary from then on. Messages before it
  leave the context (the importer archives them).
- ``<persisted-output>`` tool results were saved to ``<session>/tool-results/<id>.txt``.
- Subagents: ``<session>/subagents/agent-<id>.jsonl`` (linked to the Task call by ``progress``
  lines' ``data.agentId`` and ``parentToolUseID``); ``agent-acompact-*.jsonl`` is the compaction's
  own summarisation call: its usage is what the compaction cost.
- The system prompt and tool definitions are not in the file: their size is inferred from the
  first call (provider prompt − the messages' estimate) by the importer, and labelled so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.model.messages import Message
from engine.sources.model import (
    Compaction,
    OffloadedResult,
    ProviderCall,
    Skipped,
    SourceSession,
    SubagentRef,
    dict_at,
    int_or_none,
    iso,
    json_args,
    read_json_lines,
    text_of,
    trigger_of,
)

KNOWN_TYPES = frozenset(
    {"user", "assistant", "system", "progress", "summary", "file-history-snapshot", "queue-operation",
     "custom-title", "tag", "agent-name", "pr-link", "last-prompt"}
)
PERSISTED_RE = re.compile(r"<persisted-output>.*?Full output saved to:\s*(\S+)", re.DOTALL)
DEFAULT_WINDOW = 200_000
LARGE_WINDOW = 1_000_000
SYNTHETIC_MODEL = "<synthetic>"


@dataclass(slots=True)
class _Line:
    n: int
    uuid: str
    kind: str  # "user" | "assistant" | "boundary"
    ts: str
    content: Any = None
    key: tuple[str, str] | None = None
    sidechain: bool = False
    compact_summary: bool = False
    trigger: str = ""
    pre_tokens: int | None = None


@dataclass
class _Scan:
    lines: list[_Line] = field(default_factory=list)
    parents: dict[str, str | None] = field(default_factory=dict)
    calls: dict[tuple[str, str], ProviderCall] = field(default_factory=dict)
    agent_links: dict[str, str] = field(default_factory=dict)  # agentId -> Task tool_use id
    skipped: list[Skipped] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    cwd: str = ""
    session_id: str = ""
    first_ts: str = ""
    last_ts: str = ""
    count: int = 0


def merge_usage(call: ProviderCall, usage: dict[str, Any]) -> None:
    """Fold one line's ``usage`` into its call: every figure is the largest seen (also used by follow)."""
    inp = int_or_none(usage.get("input_tokens")) or 0
    write = int_or_none(usage.get("cache_creation_input_tokens"))
    read = int_or_none(usage.get("cache_read_input_tokens"))
    prompt = inp + (write or 0) + (read or 0)
    call.prompt_tokens = max(call.prompt_tokens or 0, prompt)
    out = int_or_none(usage.get("output_tokens"))
    if out is not None:
        call.completion_tokens = max(call.completion_tokens or 0, out)
    if write is not None:
        call.cache_write_tokens = max(call.cache_write_tokens or 0, write)
    if read is not None:
        call.cache_read_tokens = max(call.cache_read_tokens or 0, read)


def _scan_line(scan: _Scan, n: int, obj: dict[str, Any]) -> None:
    kind = obj.get("type") if isinstance(obj.get("type"), str) else repr(obj.get("type"))
    uid = obj.get("uuid")
    if isinstance(uid, str):
        parent = obj.get("parentUuid") or obj.get("logicalParentUuid")
        scan.parents[uid] = parent if isinstance(parent, str) else None
    ts = iso(obj.get("timestamp"))
    if ts:
        scan.first_ts = scan.first_ts or ts
        scan.last_ts = ts
    if not scan.cwd and isinstance(obj.get("cwd"), str):
        scan.cwd = obj["cwd"]
    if not scan.session_id and isinstance(obj.get("sessionId"), str):
        scan.session_id = obj["sessionId"]
    if kind not in KNOWN_TYPES:
        scan.skipped.append(Skipped(n, f"record type {kind!r} is not one this reader knows"))
        return
    if kind == "progress":
        data = obj.get("data")
        if isinstance(data, dict) and isinstance(data.get("agentId"), str):
            tool = obj.get("parentToolUseID")
            if isinstance(tool, str):
                scan.agent_links.setdefault(data["agentId"], tool)
        return
    if kind == "system":
        if obj.get("subtype") == "compact_boundary" and isinstance(uid, str):
            meta = dict_at(obj, "compactMetadata")
            scan.lines.append(
                _Line(n, uid, "boundary", ts, trigger=str(meta.get("trigger") or ""),
                      pre_tokens=int_or_none(meta.get("preTokens")))
            )
        return
    if kind not in ("user", "assistant"):
        return
    msg = obj.get("message")
    if not isinstance(uid, str) or not isinstance(msg, dict):
        scan.skipped.append(Skipped(n, f"a {kind} line without uuid or message"))
        return
    line = _Line(n, uid, kind, ts, content=msg.get("content"), sidechain=bool(obj.get("isSidechain")),
                 compact_summary=bool(obj.get("isCompactSummary")))
    if kind == "assistant":
        line.key = (str(msg.get("id") or uid), str(obj.get("requestId") or ""))
        model = str(msg.get("model") or "")
        usage = msg.get("usage")
        if model != SYNTHETIC_MODEL and isinstance(usage, dict):
            call = scan.calls.get(line.key)
            if call is None:
                call = ProviderCall(len(scan.calls), None, None, None, None, model=model, ts=ts,
                                    request_id=line.key[1])
                scan.calls[line.key] = call
                scan.models.append(model)
            merge_usage(call, usage)
    scan.lines.append(line)


def _chain(scan: _Scan) -> set[str]:
    """The uuids on the conversation's chain, from its last message back to the start."""
    convo = [ln for ln in scan.lines if ln.kind != "boundary"]
    if not convo:
        return set()
    main = [ln for ln in convo if not ln.sidechain]
    cur: str | None = (main or convo)[-1].uuid
    seen: set[str] = set()
    while cur is not None and cur not in seen:
        seen.add(cur)
        cur = scan.parents.get(cur)
    return seen


def _tool_ids(content: Any, block_type: str, key: str) -> list[str]:
    if not isinstance(content, list):
        return []
    return [str(b.get(key)) for b in content if isinstance(b, dict) and b.get("type") == block_type]


def _kept(scan: _Scan) -> set[int]:
    """Line numbers of the conversation: the chain plus the parallel-call siblings hanging off it."""
    chain = _chain(scan)
    keys = {ln.key for ln in scan.lines if ln.uuid in chain and ln.key is not None}
    kept = {ln.n for ln in scan.lines if ln.uuid in chain or (ln.key is not None and ln.key in keys)}
    uses = set()
    for ln in scan.lines:
        if ln.n in kept and ln.kind == "assistant":
            uses.update(_tool_ids(ln.content, "tool_use", "id"))
    for ln in scan.lines:
        if ln.kind == "user" and ln.n not in kept:
            results = _tool_ids(ln.content, "tool_result", "tool_use_id")
            if results and all(r in uses for r in results):
                kept.add(ln.n)
    return kept


def _result_content(block: dict[str, Any]) -> str | list[dict[str, Any]]:
    content = block.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, dict) and part.get("type") == "text":
            parts.append({"type": "text", "text": str(part.get("text") or "")})
        elif isinstance(part, dict) and part.get("type") == "image":
            parts.append({"type": "image_url", "image_url": {"url": "about:blank#image-not-imported"}})
        elif isinstance(part, str):
            parts.append({"type": "text", "text": part})
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def _user_messages(line: _Line) -> list[Message]:
    content = line.content
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    out: list[Message] = []
    parts: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        btype = block.get("type")
        if btype == "tool_result":
            msg: Message = {"role": "tool", "tool_call_id": str(block.get("tool_use_id") or ""),
                            "content": _result_content(block)}
            if block.get("is_error"):
                msg["is_error"] = True
            out.append(msg)
        elif btype == "text":
            parts.append({"type": "text", "text": str(block.get("text") or "")})
        elif btype == "image":
            parts.append({"type": "image_url", "image_url": {"url": "about:blank#image-not-imported"}})
        elif btype == "document":
            parts.append({"type": "text", "text": "[document not imported]"})
    if parts:
        plain = all(p["type"] == "text" for p in parts)
        text = "\n".join(p["text"] for p in parts) if plain else parts
        out.append({"role": "user", "content": text})
    return out


def _merge_assistant(msg: Message, content: Any) -> None:
    for block in content if isinstance(content, list) else [{"type": "text", "text": str(content or "")}]:
        if not isinstance(block, dict):
            continue
        btype = block.get("type")
        if btype == "text":
            msg["content"] = (msg.get("content") or "") + ("\n" if msg.get("content") else "") + str(
                block.get("text") or "")
        elif btype == "thinking":
            prev = msg.get("reasoning_content") or ""
            msg["reasoning_content"] = prev + ("\n" if prev else "") + str(block.get("thinking") or "")
        elif btype == "redacted_thinking":
            prev = msg.get("reasoning_content") or ""
            msg["reasoning_content"] = prev + f"[redacted thinking: {len(str(block.get('data') or ''))} characters]"
        elif btype in ("tool_use", "server_tool_use"):
            call = {"id": str(block.get("id") or ""), "type": "function",
                    "function": {"name": str(block.get("name") or ""), "arguments": json_args(block.get("input"))}}
            msg.setdefault("tool_calls", []).append(call)


@dataclass
class _Build:
    session: SourceSession
    open_assistant: dict[tuple[str, str], Message] = field(default_factory=dict)
    calls_seen: set[tuple[str, str]] = field(default_factory=set)


def _add(build: _Build, msg: Message, line: _Line) -> None:
    msg["id"] = build.session.make_id()
    msg["ts"] = line.ts or build.session.last_activity
    build.session.messages.append(msg)


def _build_messages(scan: _Scan, session: SourceSession, kept: set[int]) -> None:
    build = _Build(session)
    for line in scan.lines:
        if line.key is not None and line.key not in build.calls_seen:
            build.calls_seen.add(line.key)
            call = scan.calls.get(line.key)
            if call is not None:
                call.message_index = len(session.messages)
        if line.n not in kept:
            if line.kind != "boundary":
                session.off_chain += 1
            continue
        if line.kind == "boundary":
            session.compactions.append(Compaction(
                index=len(session.compactions), trigger=trigger_of(line.trigger), trigger_source=line.trigger,
                ts=line.ts, message_index=len(session.messages), calls_before=0,
                tokens_before=line.pre_tokens))
            build.open_assistant.clear()
        elif line.kind == "user" and line.compact_summary:
            last = session.compactions[-1] if session.compactions else None
            if last is None or last.summary or last.message_index != len(session.messages):
                # a summary without its boundary line (how Claude Code wrote compactions before 2.0)
                last = Compaction(index=len(session.compactions), trigger="unknown", trigger_source="",
                                  ts=line.ts, message_index=len(session.messages), calls_before=0,
                                  tokens_before=None)
                session.compactions.append(last)
            last.summary = text_of(line.content)
        elif line.kind == "user":
            for msg in _user_messages(line):
                _add(build, msg, line)
        elif line.key is not None:
            found = build.open_assistant.get(line.key)
            if found is None:
                found = {"role": "assistant", "content": None}
                build.open_assistant[line.key] = found
                _add(build, found, line)
            _merge_assistant(found, line.content)


def _offloaded(session: SourceSession, folder: Path) -> None:
    for i, msg in enumerate(session.messages):
        if msg.get("role") != "tool":
            continue
        text = msg["content"] if isinstance(msg.get("content"), str) else ""
        match = PERSISTED_RE.search(text) if "<persisted-output>" in text else None
        if not match:
            continue
        stated = match.group(1)
        local = folder / "tool-results" / Path(stated).name
        found = local if local.is_file() else None
        session.offloaded.append(OffloadedResult(
            str(msg.get("tool_call_id") or ""), i, stated, found, found.stat().st_size if found else None))
        if found is None:
            session.notes.append(f"persisted tool output {Path(stated).name} is not in {local.parent}")


def _attach_compaction_cost(session: SourceSession, child: SourceSession, path: Path) -> None:
    if not child.calls:
        session.notes.append(f"{path.name}: no usage recorded for the compaction call")
        return
    cost = child.calls[-1]
    free = [c for c in session.compactions if c.cost is None]
    match = next((c for c in free if cost.ts and c.ts and c.ts >= cost.ts), None) or (free[0] if free else None)
    if match is None:
        session.notes.append(f"{path.name}: a compaction call with no compaction in the session")
        return
    match.cost = cost


def _link_task(session: SourceSession, agent_id: str, tool_id: str | None) -> None:
    """Mark the tool message that answered the Task call which started the subagent."""
    for msg in session.messages:
        if msg.get("role") == "tool" and tool_id and msg.get("tool_call_id") == tool_id:
            msg["subagent"] = {"id": agent_id}


def _subagents(session: SourceSession, scan: _Scan, folder: Path) -> None:
    sub_dir = folder / "subagents"
    files = sorted(sub_dir.glob("agent-*.jsonl")) if sub_dir.is_dir() else []
    found: set[str] = set()
    for path in files:
        agent_id = path.stem.removeprefix("agent-")
        found.add(agent_id)
        try:
            child = read_claude_code(path, subagents=False)
        except OSError as exc:
            session.notes.append(f"subagent file {path.name} cannot be read: {exc}")
            continue
        if agent_id.startswith("acompact"):
            _attach_compaction_cost(session, child, path)
            session.subagents.append(SubagentRef(agent_id, "compaction", path, None, child))
            continue
        tool_id = scan.agent_links.get(agent_id)
        session.subagents.append(SubagentRef(agent_id, "task", path, tool_id, child))
        _link_task(session, agent_id, tool_id)
    for agent_id, tool_id in scan.agent_links.items():
        beside = folder.parent / f"agent-{agent_id}.jsonl"  # where Claude Code before 2.1 kept them
        if agent_id not in found and beside.is_file():
            found.add(agent_id)
            child = read_claude_code(beside, subagents=False)
            session.subagents.append(SubagentRef(agent_id, "task", beside, tool_id, child))
            _link_task(session, agent_id, tool_id)
        if agent_id not in found:
            missing = sub_dir / f"agent-{agent_id}.jsonl"
            problem = f"subagent file {missing.name} is missing (started by tool call {tool_id})"
            session.subagents.append(SubagentRef(agent_id, "task", None, tool_id, None, problem))
            session.skipped.append(Skipped(0, problem))


def window_for_model(model: str, largest_prompt: int) -> tuple[int, str]:
    """Claude models' window: 200k, or 1M when a prompt was larger than 200k (the 1M beta)."""
    if largest_prompt > DEFAULT_WINDOW:
        return LARGE_WINDOW, "observed"
    return DEFAULT_WINDOW, "model"


def read_claude_code(
    path: Path, *, subagents: bool = True, lines: Iterable[bytes] | None = None
) -> SourceSession:
    """Read one Claude Code session file (and, with ``subagents``, its subagent files); ``lines``: its
    lines already read (a followed file's :class:`engine.sources.follow.LineLog`)."""
    path = Path(path)
    scan = _Scan()
    for n, obj in read_json_lines(path, scan.skipped, lines=lines):
        scan.count = n
        _scan_line(scan, n, obj)
    session = SourceSession("claude-code", path, scan.session_id or path.stem, skipped=scan.skipped,
                            cwd=scan.cwd, started=scan.first_ts, last_activity=scan.last_ts,
                            project=path.parent.name, lines=scan.count)
    _build_messages(scan, session, _kept(scan))
    session.calls = list(scan.calls.values())
    for comp in session.compactions:
        comp.calls_before = sum(1 for c in session.calls if c.message_index < comp.message_index)
        after = next((c for c in session.calls if c.index >= comp.calls_before and c.prompt_tokens), None)
        comp.tokens_after = after.prompt_tokens if after else None
    session.live_start = session.compactions[-1].message_index if session.compactions else 0
    session.model = _most_common(scan.models)
    largest = max((c.prompt_tokens or 0 for c in session.calls), default=0)
    session.window, session.window_source = window_for_model(session.model, largest)
    for call in session.calls:
        call.window = session.window
    session.prefix_label = "system prompt and tool definitions"
    folder = path.with_suffix("")
    _offloaded(session, folder)
    if subagents:
        _subagents(session, scan, folder)
    return session


def _most_common(values: Iterable[str]) -> str:
    counts: dict[str, int] = {}
    for v in values:
        if v:
            counts[v] = counts.get(v, 0) + 1
    return max(counts, key=lambda k: counts[k]) if counts else ""
