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
- Since 2.1.3xx the file holds what was sent: ``api-request-shape`` (the request's ``system`` blocks and
  every tool definition, keyed by ``shapeHash``), ``api-request`` (one per provider request: ``params``
  with ``max_tokens`` — the output reserve — and the ``shapeHash``; assistant lines name it as
  ``requestRef``), ``attachment`` lines (what Claude Code injects: environment, skill and agent
  listings, reminders; ``rendered`` is the text sent, ``renderedRole`` its role) and ``cost-state``
  (the agent's own running cost in USD, total and per model). With a shape, the system prompt and the
  tool definitions are exact per call (:class:`RequestPrefix`); without one (files before 2.1.3xx)
  their size is inferred from the first call (provider prompt − the messages' estimate) by the
  importer, and labelled so.
- ``compact_boundary.compactMetadata`` may name ``preservedMessages`` (messages kept across the
  compaction: they stay in the context after the summary), ``postTokens`` and ``cumulativeDroppedTokens`` (the
  running total of the tokens the compactions dropped: each compaction's own is the difference,
  :attr:`Compaction.dropped_tokens`). A boundary whose ``logicalParentUuid`` names no line of the file is placed by
  file order.
- Per call (2.1.3xx): the ``attribution*`` fields (skill, subagent type, plugin, MCP server and tool the call
  worked for), ``message.diagnostics.cache_miss_reason`` (the provider's reason the cache missed, and the tokens it
  cost) and ``message.usage.iterations`` (server-side work billed beside the top-level usage): read by
  :mod:`engine.sources.claude_code_calls` into :class:`ProviderCall`'s typed fields. A user line's ``rowSource``
  (``local``: typed; ``harness``, ``hook``, ``recorded``) is kept on its message as ``row_source``
  (:mod:`engine.sources.claude_code_build` makes the messages).
"""

from __future__ import annotations

import bisect
import itertools
import json
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.sources.claude_code_build import (
    Build,
    Line,
    LineMore,
    kept_lines,
    part_ids,
    parts_of,
    place_orphan_boundaries,
    tool_ids,
)
from engine.sources.claude_code_calls import SYNTHETIC_MODEL as SYNTHETIC_MODEL  # (one definition, for all)
from engine.sources.claude_code_calls import compaction_costs, merge_meta, merge_usage
from engine.sources.claude_code_calls import usage_prompt as usage_prompt  # (discovery reads a line's prompt by it)
from engine.sources.model import (
    LINE_ERRORS,
    LineBuffer,
    OffloadedResult,
    ProviderCall,
    RequestPrefix,
    Skipped,
    SourceChanges,
    SourceError,
    SourceSession,
    SubagentRef,
    dict_at,
    dropped_tokens,
    feed_whole,
    float_or_none,
    int_or_none,
    iso,
    json_lines,
    line_problem,
    read_regular,
    text_of,
)

READ_TYPES = frozenset({"user", "assistant", "system", "progress", "attachment", "api-request-shape",
                        "api-request", "cost-state"})
# Record types left out on purpose, and why (counted by type in the import report).
IGNORED_TYPES: dict[str, str] = {
    "summary": "a session title Claude Code shows in its resume list; not sent to the model",
    "file-history-snapshot": "Claude Code's backup of edited files for rewinds; not sent to the model",
    "queue-operation": "the prompt queue of the terminal (enqueue/dequeue); the prompt itself is a user line",
    "custom-title": "a title the user gave the session; not sent to the model",
    "tag": "a user's tag on the session; not sent to the model",
    "agent-name": "the session's display name; not sent to the model",
    "pr-link": "a pull request linked to the session; not sent to the model",
    "last-prompt": "the last prompt typed, kept for the terminal's history; it is also a user line",
    "tools-used": "the names of the tools a turn used; the calls themselves are in the assistant lines",
    "atis-latch": "an internal latch of the terminal; no content",
    "mode": "the permission mode the terminal was in; not sent to the model",
    "api-request-blob": "the wire form of injected messages; the same text is read from the attachment lines",
}
KNOWN_TYPES = READ_TYPES | frozenset(IGNORED_TYPES)
# attachments with nothing sent to the model (no ``rendered`` text), and why they are left out
IGNORED_ATTACHMENTS: dict[str, str] = {
    "prompt_snapshot": "the system prompt and tools, which api-request-shape gives exactly as sent",
    "session_context": "context the terminal keeps for itself; nothing of it is rendered to the model",
    "command_permissions": "the tools a launched skill may use unasked (``allowedTools``); not rendered to the model",
}
# attachments rendered to the model (``rendered`` text, ``renderedRole``): read as injected context rows
READ_ATTACHMENTS: dict[str, str] = {
    "environment": "the working folder, platform and git state sent with the first prompt",
    "model": "which model the session runs on, as told to the model",
    "date": "today's date, as told to the model",
    "skill_listing": "the skills the model may use",
    "agent_listing_delta": "the subagents the model may start (what changed)",
    "deferred_tools_delta": "the tools loaded on demand (what changed)",
    "auto_mode": "the permission mode, as told to the model",
    "remote_session_change": "a change of the remote session, sent as a user message",
}
KNOWN_ATTACHMENTS = frozenset(READ_ATTACHMENTS) | frozenset(IGNORED_ATTACHMENTS)
# ``system`` line subtypes: the compaction boundary is read; the others are the terminal's notices, not sent
SYSTEM_SUBTYPES: dict[str, str] = {
    "compact_boundary": "read: a compaction (its trigger, tokens before, the summary's place)",
    "stop_hook_summary": "ignored: what the stop hooks did, shown in the terminal",
    "local_command": "ignored: a slash command run in the terminal (its output is a user line if sent)",
    "turn_duration": "ignored: how long a turn took, shown in the terminal",
}
PERSISTED_RE = re.compile(r"<persisted-output>.*?Full output saved to:\s*(\S+)", re.DOTALL)
DEFAULT_WINDOW = 200_000
LARGE_WINDOW = 1_000_000
RECENT = 16  # the newest calls a feed may still change (later lines of their responses)
# the first request after a compaction, in a file that does not hold its requests: Claude Code re-attaches the files
# read last (and the todo list) after the summary, which such a file does not record (ProviderCall.prompt_unlike_file)
REATTACHED = ("the first request after a compaction holds the files Claude Code re-attached after the summary, "
              "which this file does not record")
# the kinds of the lines kept (Line.kind) as the one string each, not the copy every decoded line brings
_KINDS = {kind: kind for kind in ("user", "assistant")}
_FAMILY_RE = re.compile(r"claude-(opus|sonnet|haiku)-(\d+)")


@dataclass
class _Scan:
    lines: list[Line] = field(default_factory=list)
    parents: dict[str, str | None] = field(default_factory=dict)
    calls: dict[tuple[str, str], ProviderCall] = field(default_factory=dict)
    agent_links: dict[str, str] = field(default_factory=dict)  # agentId -> Task tool_use id
    # agentId -> its calls streamed into this file as progress records (early 2026), by (message id, request id)
    progress_calls: dict[str, dict[tuple[str, str], ProviderCall]] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    ignored: dict[str, int] = field(default_factory=dict)
    shapes: dict[str, RequestPrefix] = field(default_factory=dict)  # shapeHash -> what it holds
    requests: dict[str, tuple[str, int | None]] = field(default_factory=dict)  # id -> (shapeHash, max_tokens)
    costs: list[tuple[int, float, dict[str, Any]]] = field(default_factory=list)  # (line, total USD, per model)
    call_lines: dict[tuple[str, str], int] = field(default_factory=dict)  # call -> line of its first record
    large_beta: bool = False  # a request asked for the 1M window beta
    costed: set[int] = field(default_factory=set)  # boundaries whose cost the cost-state lines gave
    boundary_lines: list[int] = field(default_factory=list)  # line numbers of the compact_boundary lines
    models: list[str] = field(default_factory=list)
    arguments: bool = True  # tool calls' arguments made into JSON text when a line is scanned (False: "")
    last_uuid: str = ""  # the last line's uuid: the next line's parent is this string, not another copy of it
    last_key: tuple[str, str] = ("", "")  # the last assistant line's response: its next line's key is this tuple
    cwd: str = ""
    session_id: str = ""
    first_ts: str = ""
    last_ts: str = ""
    count: int = 0


def _ignore(scan: _Scan, kind: str) -> None:
    scan.ignored[kind] = scan.ignored.get(kind, 0) + 1


def _rendered_text(rendered: Any) -> str:
    """The text an attachment was sent as: ``rendered`` is a string or a list of ``{content|text}`` parts."""
    if isinstance(rendered, str):
        return rendered
    out = []
    for part in rendered if isinstance(rendered, list) else []:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict):
            value = part.get("content", part.get("text"))
            out.append(value if isinstance(value, str) else text_of(value))
    return "\n\n".join(t for t in out if t)


def _shape(scan: _Scan, obj: dict[str, Any]) -> None:
    key, shape = obj.get("shapeHash"), dict_at(obj, "shape")
    if not isinstance(key, str):
        return
    system = shape.get("system")
    text = "\n\n".join(str(b.get("text") or "") for b in system if isinstance(b, dict)) if isinstance(
        system, list) else str(system or "")
    tools = [t for t in shape.get("tools") or [] if isinstance(t, dict)] if isinstance(shape.get("tools"), list) else []
    scan.shapes[key] = RequestPrefix(key, text, tools)


def _request(scan: _Scan, obj: dict[str, Any]) -> None:
    rid, key = obj.get("id"), obj.get("shapeHash")
    betas = dict_at(obj, "params").get("betas")
    if isinstance(betas, list) and any(isinstance(b, str) and b.startswith("context-1m") for b in betas):
        scan.large_beta = True
    if isinstance(rid, str):
        max_tokens = int_or_none(dict_at(obj, "params").get("max_tokens"))
        scan.requests[rid] = (key if isinstance(key, str) else "", max_tokens)


def _cost(scan: _Scan, n: int, obj: dict[str, Any]) -> None:
    total = float_or_none(obj.get("totalCostUSD"))  # NaN, infinite, negative: no figure, the line left out
    if total is not None:
        scan.costs.append((n, total, dict_at(obj, "modelUsage")))


def _attachment(scan: _Scan, n: int, obj: dict[str, Any], uid: Any, ts: str) -> None:
    att = dict_at(obj, "attachment")
    atype = str(att.get("type") or "")
    text = _rendered_text(obj.get("rendered"))
    role = obj.get("renderedRole")
    if not isinstance(uid, str) or not text or role not in ("system", "user"):
        _ignore(scan, f"attachment:{atype or '?'}")  # IGNORED_ATTACHMENTS, or nothing rendered to the model
        return
    scan.lines.append(Line(n, uid, "attachment", ts, content=text, more=LineMore(role=str(role), attachment=atype),
                            sidechain=bool(obj.get("isSidechain"))))


def _boundary(scan: _Scan, n: int, obj: dict[str, Any], uid: str, ts: str) -> None:
    meta = dict_at(obj, "compactMetadata")
    kept = dict_at(meta, "preservedMessages").get("uuids")
    logical = obj.get("logicalParentUuid")
    scan.boundary_lines.append(n)
    scan.lines.append(Line(n, uid, "boundary", ts, more=LineMore(
        trigger=str(meta.get("trigger") or ""), pre_tokens=int_or_none(meta.get("preTokens")),
        preserved=tuple(u for u in kept if isinstance(u, str)) if isinstance(kept, list) else (),
        post_tokens=int_or_none(meta.get("postTokens")), logical_parent=logical if isinstance(logical, str) else None,
        dropped=int_or_none(meta.get("cumulativeDroppedTokens")))))


def _scan_other(scan: _Scan, n: int, obj: dict[str, Any], kind: str, uid: Any, ts: str) -> bool:
    """A line of :func:`_scan_line` that is no ``user`` or ``assistant`` line, taken; False when its kind is one
    read as a conversation line."""
    if kind not in KNOWN_TYPES:
        scan.skipped.append(Skipped(n, f"record type {kind!r} is not one this reader knows"))
    elif kind in IGNORED_TYPES:
        _ignore(scan, kind)
    elif kind == "progress":
        data = obj.get("data")
        if isinstance(data, dict) and isinstance(data.get("agentId"), str):
            tool = obj.get("parentToolUseID")
            if isinstance(tool, str):
                scan.agent_links.setdefault(data["agentId"], tool)
            _progress_call(scan, data)
    elif kind == "api-request-shape":
        _shape(scan, obj)
    elif kind == "api-request":
        _request(scan, obj)
    elif kind == "cost-state":
        _cost(scan, n, obj)
    elif kind == "attachment":
        _attachment(scan, n, obj, uid, ts)
    elif kind == "system":
        if obj.get("subtype") == "compact_boundary" and isinstance(uid, str):
            _boundary(scan, n, obj, uid, ts)
        else:
            _ignore(scan, f"system:{obj.get('subtype') or '?'}")  # notices of the terminal, not sent to the model
    else:
        return False
    return True


def _scan_line(scan: _Scan, n: int, obj: dict[str, Any]) -> None:
    kind = obj.get("type")
    kind = _KINDS.get(kind, kind) if isinstance(kind, str) else repr(kind)  # (a kept line's kind: the one string)
    uid = obj.get("uuid")
    if isinstance(uid, str):
        parent = obj.get("parentUuid") or obj.get("logicalParentUuid")
        scan.parents[uid] = (scan.last_uuid if parent == scan.last_uuid else parent) if isinstance(
            parent, str) else None
        scan.last_uuid = uid
    ts = iso(obj.get("timestamp"))
    if ts:
        scan.first_ts = scan.first_ts or ts
        scan.last_ts = ts
    if not scan.cwd and isinstance(obj.get("cwd"), str):
        scan.cwd = obj["cwd"]
    if not scan.session_id and isinstance(obj.get("sessionId"), str):
        scan.session_id = obj["sessionId"]
    if kind != "user" and kind != "assistant" and _scan_other(scan, n, obj, kind, uid, ts):
        return  # (the conversation's lines below)
    msg = obj.get("message")
    if not isinstance(uid, str) or not isinstance(msg, dict):
        scan.skipped.append(Skipped(n, f"a {kind} line without uuid or message"))
        return
    row_source, summary = obj.get("rowSource"), bool(obj.get("isCompactSummary"))
    content = msg.get("content")  # (kept as the build takes it: engine.sources.claude_code_build.parts_of)
    line = Line(n, uid, kind, ts, content=text_of(content) if summary else parts_of(kind, content, scan.arguments),
                sidechain=bool(obj.get("isSidechain")), compact_summary=summary,
                row_source=row_source if isinstance(row_source, str) else "")
    if kind == "user":
        result = obj.get("toolUseResult")
        if isinstance(result, dict) and isinstance(result.get("agentId"), str):
            answered = tool_ids(msg.get("content"), "tool_result", "tool_use_id")
            if answered:  # the Agent/Task call's result names the subagent it started (2.1.3xx)
                scan.agent_links.setdefault(result["agentId"], answered[0])
    if kind == "assistant":
        request = obj.get("requestId") or obj.get("requestRef")
        key = (str(msg.get("id") or uid), str(request or ""))
        line.key = scan.last_key = scan.last_key if key == scan.last_key else key  # (one tuple a response)
        model = sys.intern(str(msg.get("model") or ""))  # (one string a model, not one a call)
        usage = msg.get("usage")
        if model != SYNTHETIC_MODEL and isinstance(usage, dict):
            call = scan.calls.get(line.key)
            if call is None:
                call = ProviderCall(len(scan.calls), None, None, None, None, model=model, ts=ts,
                                    request_id=line.key[1])
                shape, max_tokens = scan.requests.get(str(obj.get("requestRef") or ""), ("", None))
                call.prefix_key, call.max_tokens = (shape if shape in scan.shapes else ""), max_tokens
                scan.calls[line.key] = call
                scan.call_lines[line.key] = n
                scan.models.append(model)
            merge_usage(call, usage)
            merge_meta(call, obj, msg)
    scan.lines.append(line)


def _progress_call(scan: _Scan, data: dict[str, Any]) -> None:
    """A subagent's call streamed into the parent file (``data.message``: an assistant line with its ``usage``):
    kept per agent, a call once per (message id, request id); used where no subagent file holds it."""
    outer = data.get("message")
    if not isinstance(outer, dict) or outer.get("type") != "assistant":
        return
    msg = outer.get("message")
    usage = msg.get("usage") if isinstance(msg, dict) else None
    if not isinstance(msg, dict) or not isinstance(usage, dict):
        return
    model = sys.intern(str(msg.get("model") or ""))
    if model == SYNTHETIC_MODEL:
        return
    request = str(outer.get("requestId") or "")
    key = (str(msg.get("id") or ""), request)
    calls = scan.progress_calls.setdefault(data["agentId"], {})
    call = calls.get(key)
    if call is None:
        call = calls[key] = ProviderCall(len(calls), None, None, None, None, model=model,
                                         ts=iso(outer.get("timestamp")), request_id=request)
    merge_usage(call, usage)
    merge_meta(call, outer, msg)


def _progress_child(scan: _Scan, agent_id: str, path: Path) -> SourceSession | None:
    """A subagent whose file is missing, as the calls its progress records hold (no messages); None without any."""
    calls = list(scan.progress_calls.get(agent_id, {}).values())
    if not calls:
        return None
    child = SourceSession("claude-code", path, agent_id, calls=calls, model=_most_common(c.model for c in calls))
    child.window, child.window_source = window_for_model(child.model, max(c.prompt_tokens or 0 for c in calls))
    for call in calls:
        call.window = child.window
    child.notes.append(f"no subagent file: its {len(calls)} call(s) read from the parent's progress records")
    return child


def _add_progress_calls(child: SourceSession, calls: dict[tuple[str, str], ProviderCall]) -> None:
    """The progress records' calls a subagent file does not hold, added to its calls."""
    held = {c.request_id for c in child.calls if c.request_id}
    extra = [c for (_, request), c in calls.items() if request and request not in held]
    for call in extra:
        call.index = len(child.calls)
        child.calls.append(call)
    if extra:
        child.notes.append(f"{len(extra)} call(s) read from the parent's progress records (not in this file)")


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
    _placeholder_output(cost, match.summary)


def _placeholder_output(call: ProviderCall, text: str) -> None:
    """A compaction call whose file holds only the first line of its response (Claude Code 2.1.39): its
    ``output_tokens`` is the streaming placeholder (a few tokens for a summary of thousands), not the figure; the
    output becomes unknown (``completion_placeholder`` keeps what the file says)."""
    written = len(text) * 2 // 5  # the heuristic's tokens of the summary it wrote
    if call.completion_tokens is not None and text and call.completion_tokens * 4 < written:
        call.completion_placeholder, call.completion_tokens = call.completion_tokens, None


def _link_task(session: SourceSession, agent_id: str, tool_id: str | None) -> None:
    """Mark the tool message that answered the Task call which started the subagent (a new dict in its place: a
    message is never changed in place, :attr:`SourceSession.fresh_on_change`)."""
    for i, msg in enumerate(session.messages):
        if msg.get("role") == "tool" and tool_id and msg.get("tool_call_id") == tool_id:
            session.messages[i] = {**msg, "subagent": {"id": agent_id}}


def _subagents(session: SourceSession, scan: _Scan, folder: Path) -> None:
    sub_dir = folder / "subagents"
    files = sorted(sub_dir.glob("agent-*.jsonl")) if sub_dir.is_dir() else []
    found: set[str] = set()
    for path in files:
        agent_id = path.stem.removeprefix("agent-")
        found.add(agent_id)
        try:
            child = read_claude_code(path, subagents=False)
        except (OSError, SourceError) as exc:
            session.notes.append(f"subagent file {path.name} cannot be read: {exc}")
            continue
        if agent_id.startswith("acompact"):
            _attach_compaction_cost(session, child, path)
            session.subagents.append(SubagentRef(agent_id, "compaction", path, None, child))
            continue
        tool_id = scan.agent_links.get(agent_id) or _meta_tool_id(path)
        _add_progress_calls(child, scan.progress_calls.get(agent_id, {}))
        session.subagents.append(SubagentRef(agent_id, "task", path, tool_id, child))
        _link_task(session, agent_id, tool_id)
    for agent_id, tool_id in scan.agent_links.items():
        beside = folder.parent / f"agent-{agent_id}.jsonl"  # where Claude Code before 2.1 kept them
        if agent_id not in found and beside.is_file():
            found.add(agent_id)
            try:
                child = read_claude_code(beside, subagents=False)
            except (OSError, SourceError) as exc:
                session.notes.append(f"subagent file {beside.name} cannot be read: {exc}")
                continue
            _add_progress_calls(child, scan.progress_calls.get(agent_id, {}))
            session.subagents.append(SubagentRef(agent_id, "task", beside, tool_id, child))
            _link_task(session, agent_id, tool_id)
        if agent_id not in found:
            missing = sub_dir / f"agent-{agent_id}.jsonl"
            problem = f"subagent file {missing.name} is missing (started by tool call {tool_id})"
            streamed = _progress_child(scan, agent_id, missing)
            if streamed is not None:
                problem += f"; its {len(streamed.calls)} call(s) are read from the progress records of this file"
            session.subagents.append(SubagentRef(agent_id, "task", None, tool_id, streamed, problem))
            session.skipped.append(Skipped(0, problem))


def _meta_tool_id(path: Path) -> str | None:
    """The Agent call that started a subagent, from ``agent-<id>.meta.json`` beside its file (2.1.3xx)."""
    meta = path.with_name(path.stem + ".meta.json")
    try:
        data = json.loads(read_regular(meta)) if meta.is_file() else None
    except (OSError, ValueError, RecursionError):
        return None
    tool = data.get("toolUseId") if isinstance(data, dict) else None
    return tool if isinstance(tool, str) and tool else None


def window_for_model(model: str, largest_prompt: int, *, large_beta: bool = False) -> tuple[int, str]:
    """Claude models' window as Claude Code runs them: 1M for Opus and Sonnet from the 5 family on (Claude
    Code 2.1.328's own result reports ``contextWindow: 1000000`` for claude-opus-5-5, and litellm's table
    agrees), or when the requests asked for the 1M beta (``context-1m-*``), or when a prompt was larger than
    200k; else 200k (earlier models run in Claude Code with 200k unless the 1M beta is asked for)."""
    if largest_prompt > DEFAULT_WINDOW:
        return LARGE_WINDOW, "observed"
    if large_beta:
        return LARGE_WINDOW, "request"
    match = _FAMILY_RE.search(model)
    if match and match.group(1) != "haiku" and int(match.group(2)) >= 5:
        return LARGE_WINDOW, "model"
    return DEFAULT_WINDOW, "model"


def _figures(call: ProviderCall) -> tuple[Any, ...]:
    return (call.prompt_tokens, call.completion_tokens, call.cache_read_tokens, call.cache_write_tokens,
            call.window, call.max_tokens)


class ClaudeCodeReader:
    """The incremental reader of one Claude Code session file: bytes (or complete lines) in, changes out.

    ``feed`` takes what was appended (a partial last line waits for the rest) and returns a
    :class:`SourceChanges`. A line that extends the conversation — its parent is the conversation's last
    line, it is another block of a response already in it, or it answers tool calls already in it — is
    added as it comes; anything else (a rewind to an earlier message, a second chain in the file) makes the
    reader rebuild the conversation from the lines it has scanned (never reading the file again): the same
    result as reading the whole file, which :func:`read_claude_code` does by scanning everything first
    (``bulk``) and building once. ``finish`` adds what lives beside the file (persisted tool results,
    subagent files)."""

    def __init__(self, path: Path, *, bulk: bool = False,
                 observe: Callable[[dict[str, Any]], None] | None = None, arguments: bool = True) -> None:
        self.path = Path(path)
        self.arguments = arguments  # False: tool calls' arguments left "" (the usage index's pass reads none)
        self.observe = observe  # handed every line's object too (the sources summary of the same pass)
        self.scan = _Scan(arguments=arguments)
        self.session = SourceSession("claude-code", self.path, self.path.stem, skipped=self.scan.skipped,
                                     project=self.path.parent.name,
                                     prefix_label="system prompt and tool definitions", fresh_on_change=True)
        self.bulk = bulk
        self._shapes_seen = 0
        self._largest = 0
        self._beside_mark: tuple[int, int] | None = None
        self.rebuilds = 0  # conversations rebuilt from the scanned lines (rewinds)
        self._buffer = LineBuffer()
        self._done = 0  # scan.lines the build has taken
        self._build = Build(self.session, self.scan.calls)
        self._tip: str | None = None  # the conversation's last line
        self._last_main: str | None = None  # the last line not on a sidechain (where an orphan boundary goes)
        self._keys: set[tuple[str, str]] = set()  # responses in the conversation
        self._uses: set[str] = set()  # tool calls in the conversation

    # ------------------------------------------------------------------ input
    def feed(self, data: bytes) -> SourceChanges:
        """Take appended bytes; a partial last line is kept until its newline arrives."""
        return self.feed_lines(self._buffer.lines(data))

    def feed_lines(self, lines: Iterable[bytes]) -> SourceChanges:
        """Take complete lines (each ending with its newline; a last one without it is read as torn)."""
        session, scan = self.session, self.scan
        if self.bulk:  # the whole file at once: scan now, build once when it is all there
            for n, obj in json_lines(self._buffer.counted(lines), scan.skipped, start=self._buffer.count + 1):
                if self.observe is not None:
                    self.observe(obj)
                try:
                    _scan_line(scan, n, obj)
                except LINE_ERRORS as exc:  # a field of a shape never seen: this line skipped, said
                    scan.skipped.append(line_problem(n, exc))
            scan.count = self._buffer.count
            return SourceChanges(reset=True)
        mark = (len(session.messages), len(session.calls), len(session.compactions))
        window = session.window
        first = max(0, mark[1] - RECENT)  # the calls a feed can still change (their responses' later lines)
        before = [_figures(c) for c in session.calls[first:]]
        rebuilt = False
        for n, obj in json_lines(self._buffer.counted(lines), scan.skipped, start=self._buffer.count + 1):
            if self.observe is not None:
                self.observe(obj)
            lines_before = len(scan.lines)
            try:
                _scan_line(scan, n, obj)
            except LINE_ERRORS as exc:  # a field of a shape never seen: this line skipped, said
                scan.skipped.append(line_problem(n, exc))
                del scan.lines[lines_before:]
                continue
            if len(scan.lines) > lines_before:
                rebuilt = self._take_new() or rebuilt
            else:
                self._pass_through(obj)
        scan.count = self._buffer.count
        self._derive()
        old_calls = mark[1]
        if session.window != window:
            updated = list(range(old_calls))
        else:
            updated = [first + i for i, figures in enumerate(before) if _figures(session.calls[first + i]) != figures]
        touched, comp_touched = self._build.touched, self._build.comp_touched
        self._build.touched = self._build.comp_touched = -1
        return SourceChanges(
            messages_from=0 if rebuilt else min(mark[0], touched if touched >= 0 else mark[0]),
            calls_from=old_calls, calls_updated=updated,
            compactions_from=0 if rebuilt else min(mark[2], comp_touched if comp_touched >= 0 else mark[2]),
            subagents_from=len(session.subagents))

    def finish(self, *, subagents: bool = True) -> SourceSession:
        """The whole session: a torn last line read as such, the conversation built (once, in bulk mode),
        persisted tool results and subagent files beside the file read."""
        if pending := self._buffer.rest():
            self.feed_lines([pending])
        if self.bulk:
            self._rebuild()
            self._derive()
        return self.read_beside(subagents=subagents)

    def settle(self) -> None:
        """After reading in bulk (a whole file at once: scanned, then built once), go on incrementally."""
        if self.bulk:
            self._rebuild()
            self._derive()
            self.bulk = False

    def read_beside(self, *, subagents: bool = True) -> SourceSession:
        """What lives beside the file, read again: persisted tool results, subagent files (a followed
        session gains them as it goes). The lines already fed are not read again."""
        session = self.session
        mark = self._beside_mark
        if mark is None:
            self._beside_mark = (len(session.skipped), len(session.notes))
        else:
            del session.skipped[mark[0]:]
            del session.notes[mark[1]:]
            session.offloaded.clear()
            session.subagents.clear()
            for i, msg in enumerate(session.messages):
                if "subagent" in msg:  # (a new dict without it: never changed in place)
                    session.messages[i] = {k: v for k, v in msg.items() if k != "subagent"}
        folder = self.path.with_suffix("")
        _offloaded(session, folder)
        if subagents:
            _subagents(session, self.scan, folder)
        return session

    # ------------------------------------------------------------------ the conversation
    def _extends(self, line: Line) -> bool:
        """Whether ``line`` continues the conversation as it stands (else the conversation is rebuilt)."""
        parent = self.scan.parents.get(line.uuid)
        if parent == self._tip:
            return True
        if line.kind == "assistant" and line.key in self._keys:
            return True
        if line.kind == "user" and not line.compact_summary:
            results = part_ids(line.content, "result")
            return bool(results) and all(r in self._uses for r in results)
        return False

    def _pass_through(self, obj: dict[str, Any]) -> None:
        """A line that is no message but is a link of the chain (``progress``, a notice of the terminal, an
        attachment with nothing sent): the conversation's next line may name it as its parent."""
        uid = obj.get("uuid")
        if isinstance(uid, str) and not obj.get("isSidechain"):
            if self.scan.parents.get(uid) == self._tip:
                self._tip = uid

    def _keep(self, line: Line) -> None:
        self._tip = line.uuid
        if line.key is not None:
            self._keys.add(line.key)
        if line.kind == "assistant":
            self._uses.update(part_ids(line.content, "use"))

    def _take_new(self) -> bool:
        """Add the lines scanned since the last feed; True when the conversation had to be rebuilt."""
        lines = self.scan.lines
        while self._done < len(lines):
            line = lines[self._done]
            if line.kind == "boundary" and (line.logical_parent is None or line.logical_parent not in
                                            self.scan.parents) and self._last_main is not None:
                self.scan.parents[line.uuid] = self._last_main
                self._build.placed.add(line.uuid)
            if not line.sidechain:
                self._last_main = line.uuid
            if line.sidechain and line.kind != "boundary":
                self._build.take(line, False)
            elif self._extends(line):
                self._build.take(line, True)
                self._keep(line)
            else:
                self._rebuild()
                return True
            self._done += 1
        return False

    def _rebuild(self) -> None:
        """The conversation from every line scanned so far, as a whole-file read builds it."""
        self.rebuilds += not self.bulk
        session, scan = self.session, self.scan
        session.messages.clear()
        session.compactions.clear()
        scan.costed.clear()
        session.off_chain = 0
        placed = place_orphan_boundaries(scan.lines, scan.parents)
        self._build = Build(session, scan.calls, placed)
        kept, uses = kept_lines(scan.lines, scan.parents)
        self._keys, self._uses = set(), uses  # (the tool calls _keep would gather from the kept lines, once)
        for line in scan.lines:
            self._build.take(line, line.n in kept)
            if line.n in kept:
                self._tip = line.uuid
                if line.key is not None:
                    self._keys.add(line.key)
        main = [ln for ln in scan.lines if ln.kind != "boundary" and not ln.sidechain]
        self._tip = main[-1].uuid if main else (scan.lines[-1].uuid if scan.lines else None)
        self._last_main = next((ln.uuid for ln in reversed(scan.lines) if not ln.sidechain), None)
        self._done = len(scan.lines)
        self._build.touched = self._build.comp_touched = -1

    def _derive(self) -> None:
        """The figures that follow from the lines so far: calls, compactions' calls and sizes, model, window,
        the agent's cost."""
        session, scan = self.session, self.scan
        session.session_id = scan.session_id or self.path.stem
        session.cwd, session.started, session.last_activity = scan.cwd, scan.first_ts, scan.last_ts
        session.lines = scan.count
        known = len(session.calls)
        grew = len(scan.calls) != known or len(scan.shapes) != self._shapes_seen
        if len(scan.calls) != known:  # calls are only ever added, in the order they came
            session.calls.extend(itertools.islice(scan.calls.values(), known, None))
        session.ignored = scan.ignored
        if grew:
            used = {c.prefix_key for c in session.calls}
            session.prefixes = {k: v for k, v in scan.shapes.items() if k in used}
            self._shapes_seen = len(scan.shapes)
        if scan.costs:
            _, total, per_model = scan.costs[-1]
            session.agent_cost_usd = total
            by_model = {m: float_or_none(v.get("costUSD")) for m, v in per_model.items() if isinstance(v, dict)}
            session.agent_cost_by_model = {m: v for m, v in by_model.items() if v is not None}
        compaction_costs(scan, session)
        dropped_tokens(session.compactions)
        calls = session.calls
        positions = [c.message_index for c in calls] if session.compactions else []
        ordered = all(a <= b for a, b in itertools.pairwise(positions))
        for comp in session.compactions:
            if ordered:  # calls come in the order of their messages: a bisection, not a pass per compaction
                comp.calls_before = bisect.bisect_left(positions, comp.message_index)
            else:
                comp.calls_before = sum(1 for c in calls if c.message_index < comp.message_index)
            after = next((c for c in calls[comp.calls_before:] if c.prompt_tokens), None)
            comp.tokens_after = after.prompt_tokens if after else None
            if after is not None and not after.prefix_key:  # a file that does not hold the requests (before 2.1.3xx)
                after.prompt_unlike_file = REATTACHED
        session.live_start = session.compactions[-1].message_index if session.compactions else 0
        if grew or not session.model:
            session.model = _most_common(scan.models)
        # a call's figures only grow while its response is written: the newest calls are the ones to look at
        self._largest = max(self._largest, *(c.prompt_tokens or 0 for c in calls[max(0, known - RECENT):]), 0)
        window = session.window
        session.window, session.window_source = window_for_model(session.model, self._largest,
                                                                 large_beta=scan.large_beta)
        for call in calls if session.window != window else calls[max(0, known - RECENT):]:
            call.window = session.window
        placed = self._build.placed
        session.notes = [n for n in session.notes if not n.endswith("placed by file order")]
        if placed:
            session.notes.append(f"{len(placed)} compaction boundary(ies) name a message not in the file as the "
                                 "one before them: placed by file order")


def read_claude_code(
    path: Path, *, subagents: bool = True, lines: Iterable[bytes] | None = None,
    observe: Callable[[dict[str, Any]], None] | None = None,
) -> SourceSession:
    """Read one Claude Code session file (and, with ``subagents``, its subagent files); ``lines``: its
    lines already read (kept by the caller); ``observe``: handed the object of every line of the file (not of its
    subagents' files) as the pass reads it."""
    reader = ClaudeCodeReader(Path(path), bulk=True, observe=observe)
    feed_whole(reader, reader.path, lines)
    return reader.finish(subagents=subagents)


def _most_common(values: Iterable[str]) -> str:
    counts: dict[str, int] = {}
    for v in values:
        if v:
            counts[v] = counts.get(v, 0) + 1
    return max(counts, key=lambda k: counts[k]) if counts else ""
