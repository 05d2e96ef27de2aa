"""GitHub Copilot CLI sessions: ``~/.copilot/session-state/<session uuid>/events.jsonl`` (``$COPILOT_HOME`` instead
of ``~/.copilot``), the event log of ``@github/copilot`` (pinned and checked against Copilot CLI 1.0.102).

Copilot appends one event a line, ``{type, data, id, timestamp, parentId}`` (``parentId`` chains each event to
the one before; ``agentId`` marks a sub-agent's). ``copilot --continue`` / ``--resume`` appends to the same file
after a ``session.resume``. Events read (:data:`READ_EVENTS`; the others are ignored with a reason,
:data:`IGNORED_EVENTS`, and a type of neither set is reported as unknown):

- ``session.start`` (session id, cwd, model, Copilot's version), ``session.resume``, ``session.model_change``;
- ``system.message``: the system prompt, exactly as sent (Copilot writes it again when it rebuilds it);
- ``user.message``: ``content`` as typed and ``transformedContent`` as sent (``<current_datetime>`` first): the
  message is the one sent;
- ``session.usage_record``: one provider call, its ``usage`` exact as the provider answered it —
  ``inputTokens`` (the whole prompt, cached part included), ``outputTokens``, ``cacheReadTokens``,
  ``cacheWriteTokens``, ``reasoningTokens``, ``apiCallId`` (the response id), ``maxPromptTokens`` (the window),
  ``toolTokenCount`` (the tool definitions as Copilot counted them: the definitions themselves are not in the
  file) and ``availableToolCount``;
- ``assistant.message``: text, ``reasoningText`` and ``toolRequests`` (the tool calls), tied to its call by
  ``apiCallId``; ``tool.execution_complete``: a tool's result as sent back;
- ``session.compaction_start`` / ``session.compaction_complete``: a compaction (``trigger`` ``manual`` or
  ``threshold``; ``preCompactionTokens`` / ``postCompactionTokens`` are Copilot's own local estimate;
  ``summaryContent``; ``compactionTokensUsed`` the summarisation call's usage, exact, whose response id is the
  ``model.model_call_success`` between the two). The next request starts with the summary in a user message of
  Copilot's (:func:`summary_text`, not in the file: rebuilt from its template);
- ``session.truncation``: Copilot dropped the oldest messages to fit (a compaction with no summary, the last
  ``postTruncationMessagesLength`` messages kept);
- ``session.shutdown``: the totals of the session's accounting, checked against the calls read (a note when
  they differ).

Events of a sub-agent (``agentId``) are not the main conversation: their calls are counted (paid), their
messages
left out (said). Cost: Copilot's ``cost`` is in premium requests, not dollars; the usage index prices the calls by
model name (a BYOK model no price table knows has no cost: unknown, not zero).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.model.messages import Message
from engine.sources.model import (
    ESTIMATED,
    LINE_ERRORS,
    Compaction,
    LineBuffer,
    ProviderCall,
    Skipped,
    SourceChanges,
    SourceSession,
    capped_lines,
    dict_at,
    feed_whole,
    int_or_none,
    iso,
    json_args,
    json_lines,
    line_problem,
    loads_line,
    open_regular,
)

EVENTS_FILE = "events.jsonl"
SUMMARY_HEAD = ("Some of the conversation history has been summarized to free up context.\n\nYou were originally "
                "given instructions from a user over one or more turns. Here were the user messages:\n")
READ_EVENTS = frozenset({
    "session.start", "session.resume", "session.model_change", "system.message", "user.message",
    "session.usage_record", "assistant.message", "tool.execution_complete", "session.compaction_start",
    "session.compaction_complete", "model.model_call_success", "session.truncation", "session.shutdown"})
_UI = "what the terminal shows or the agent's own bookkeeping; nothing of it is sent to the model"
# Event types left out on purpose, and why (counted as ``event/<type>``).
IGNORED_EVENTS: dict[str, str] = {
    "assistant.turn_start": "a turn's start; the calls and messages carry what it did",
    "assistant.turn_end": "a turn's end; the calls and messages carry what it did",
    "assistant.reasoning": "the reasoning as shown; assistant.message carries it (reasoningText)",
    "tool.execution_start": "a tool's start; its call is in assistant.message, its result in tool.execution_complete",
    "tool.user_requested": "a tool the person ran; its result is in tool.execution_complete",
    "model.turn_started": "the compaction call's log; its usage is in session.compaction_complete",
    "model.turn_ended": "the compaction call's log; its usage is in session.compaction_complete",
    "model.model_call_started": "the compaction call's log; its usage is in session.compaction_complete",
    "model.message": "the compaction call's answer, also in session.compaction_complete (summaryContent)",
    "model.response": "the compaction call's answer, also in session.compaction_complete (summaryContent)",
    "model.messages_snapshot": "the history the compaction summarised: the messages read before it",
    "model.call_failure": "a failed model call's log (no usage)",
    "abort": "the person stopped a turn; what was recorded before it is read",
    "session.info": _UI, "session.warning": _UI, "session.error": _UI, "session.mode_changed": _UI,
    "session.mode_notice_delivered": _UI, "session.plan_changed": _UI, "session.workspace_file_changed": _UI,
    "session.permissions_changed": _UI, "session.session_limits_changed": _UI, "session.context_changed": _UI,
    "session.remote_steerable_changed": _UI, "session.schedule_created": _UI, "session.schedule_cancelled": _UI,
    "session.schedule_rearmed": _UI, "session.autopilot_objective_changed": _UI, "session.handoff": _UI,
    "session.task_complete": _UI, "session.completion_receipt": _UI, "session.usage_checkpoint": _UI,
    "session.model_deselected": _UI, "session.auto_mode_resolved": _UI, "session.binary_asset": _UI,
    "session.context_cleared": _UI, "session.permission_recovery": _UI, "session.canvas.recorded": _UI,
    "session.canvas.removed": _UI, "session.fusion_route_failed": _UI, "session.fusion_resolved": _UI,
    "session.fusion_completed": _UI, "assistant.fusion_phase_completed": _UI, "assistant.fusion_phase_failed": _UI,
    "system.notification": _UI, "skill.invoked": _UI, "tool_search.activated": _UI, "hook.start": _UI,
    "hook.end": _UI, "human_response.recorded": _UI, "external_tool.requested": _UI,
    "mcp.oauth_recovery_completed": _UI, "permission.requested": _UI, "permission.completed": _UI,
    "permission.carriedForward": _UI, "permission.messageAuthorization": _UI,
    "permission.messageAuthorizationRead": _UI, "permission.messageAuthorizationDegraded": _UI,
    "permission.assentDetected": _UI, "permission.contextualAuthorization": _UI,
    "subagent.started": "a sub-agent's start; its calls are counted from its own usage records",
    "subagent.configured": "a sub-agent's settings", "subagent.completed": "a sub-agent's end",
    "subagent.failed": "a sub-agent's end", "subagent.selected": _UI, "subagent.deselected": _UI,
}
KNOWN_EVENTS = READ_EVENTS | frozenset(IGNORED_EVENTS)
TRIGGERS = {"manual": "manual", "threshold": "auto"}


def is_copilot_line(obj: dict[str, Any]) -> bool:
    """A line of a Copilot CLI events file: an event of a type Copilot writes, with its ``data``, ``id``,
    ``timestamp`` and ``parentId`` (none of the other agents' lines has that shape)."""
    kind = obj.get("type")
    return (isinstance(kind, str) and kind in KNOWN_EVENTS and isinstance(obj.get("data"), dict)
            and isinstance(obj.get("id"), str) and "parentId" in obj and "timestamp" in obj)


def summary_text(summary: str, prompts: list[str]) -> str:
    """The user message Copilot puts in place of the compacted history (its template, as it was sent: the person's
    prompts before it as typed, then the summary)."""
    asked = "".join(f"<user_message>\n{p}\n</user_message>\n" for p in prompts)
    return f"{SUMMARY_HEAD}{asked}\nHere is a summary of the prior context:\n<summary>\n{summary}\n</summary>\n"


def _tool_calls(requests: Any) -> list[dict[str, Any]]:
    out = []
    for req in requests if isinstance(requests, list) else []:
        if isinstance(req, dict):
            out.append({"id": str(req.get("toolCallId") or ""), "type": "function",
                        "function": {"name": str(req.get("name") or ""),
                                     "arguments": json_args(req.get("arguments") or {})}})
    return out


def tool_result_text(data: dict[str, Any]) -> str:
    """What a ``tool.execution_complete`` sends back to the model: its result, else its error's message."""
    result = dict_at(data, "result")
    if isinstance(result.get("content"), str):
        return str(result["content"])
    error = data.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or "")
    return str(error or "")


def usage_call(index: int, usage: dict[str, Any], ts: str, message_index: int) -> ProviderCall:
    """A ``session.usage_record``'s ``usage`` (or a compaction's ``compactionTokensUsed``) as a call."""
    return ProviderCall(
        index=index, prompt_tokens=int_or_none(usage.get("inputTokens")),
        completion_tokens=int_or_none(usage.get("outputTokens")),
        cache_read_tokens=int_or_none(usage.get("cacheReadTokens")),
        cache_write_tokens=int_or_none(usage.get("cacheWriteTokens")),
        reasoning_tokens=int_or_none(usage.get("reasoningTokens")), model=str(usage.get("model") or ""), ts=ts,
        window=int_or_none(usage.get("maxPromptTokens")), message_index=message_index,
        request_id=str(usage.get("apiCallId") or ""))


class CopilotReader:
    """The incremental reader of one Copilot CLI ``events.jsonl``: bytes (or complete lines) in, changes out. The
    file only grows, so every event is applied once, in order."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.session = SourceSession("copilot-cli", self.path, self.path.parent.name, prefix_label="tool definitions")
        self._buffer = LineBuffer()
        self._n = 0
        self._call_of: dict[str, int] = {}  # apiCallId -> index in session.calls
        self._message_of: dict[str, int] = {}  # apiCallId -> index of its first message in session.messages
        self._updated: set[int] = set()
        self._touched = 0  # the first compaction new or changed in this feed
        self._prompts: list[str] = []  # the person's prompts as typed (Copilot's summary message lists them)
        self._compacting: dict[str, Any] = {}  # the open compaction: its start's data, the call's id and usage
        self._systems = 0
        self.shutdown_totals: dict[str, dict[str, int]] = {}
        self._turn_totals: dict[str, dict[str, int]] = {}  # the usage records' totals per model (shutdown's basis)

    # ------------------------------------------------------------------ input
    def feed(self, data: bytes) -> SourceChanges:
        """Take appended bytes; a partial last line is kept until its newline arrives."""
        return self.feed_lines(self._buffer.lines(data))

    def feed_lines(self, lines: Iterable[bytes]) -> SourceChanges:
        """Take complete lines (each ending with its newline; a last one without it is read as torn)."""
        session = self.session
        mark = (len(session.messages), len(session.calls), len(session.compactions))
        self._updated, self._touched = set(), mark[2]
        for n, obj in json_lines(lines, session.skipped, start=self._n + 1):
            self._n = session.lines = n
            try:
                self._line(n, obj)
            except LINE_ERRORS as exc:  # a field of a shape never seen: this line skipped, said
                session.skipped.append(line_problem(n, exc))
        if session.cwd and not session.project:
            session.project = Path(session.cwd).name
        return SourceChanges(messages_from=mark[0], calls_from=mark[1], compactions_from=self._touched,
                             calls_updated=sorted(i for i in self._updated if i < mark[1]), subagents_from=0)

    def finish(self) -> SourceSession:
        """The whole session: a last line without its newline read as it is (or reported torn)."""
        if pending := self._buffer.rest():
            self.feed_lines([pending])
        return self.session

    # ------------------------------------------------------------------ events
    def _line(self, n: int, obj: dict[str, Any]) -> None:
        session = self.session
        kind = obj.get("type")
        if not isinstance(kind, str) or not isinstance(obj.get("data"), dict):
            session.skipped.append(Skipped(n, "not a Copilot CLI event (a type and its data)"))
            return
        ts = iso(obj.get("timestamp"))
        if ts:
            session.started = session.started or ts
            session.last_activity = max(session.last_activity, ts)
        if kind in IGNORED_EVENTS:
            session.ignore(f"event/{kind}")
            return
        if kind not in READ_EVENTS:
            session.skipped.append(Skipped(n, f"event type {kind!r} is not one this reader knows"))
            return
        data = obj["data"]
        if obj.get("agentId") and kind not in ("session.usage_record",):
            session.ignore(f"subagent/{kind}")  # a sub-agent's conversation is not the main one
            return
        getattr(self, "_" + kind.replace(".", "_"))(data, ts)

    def _session_start(self, data: dict[str, Any], ts: str) -> None:
        session = self.session
        session.session_id = str(data.get("sessionId") or session.session_id)
        session.cwd = str(dict_at(data, "context").get("cwd") or session.cwd)
        session.started = iso(data.get("startTime")) or ts or session.started
        session.model = str(data.get("selectedModel") or session.model)
        if data.get("copilotVersion"):
            session.notes.append(f"written by Copilot CLI {data['copilotVersion']}")

    def _session_resume(self, data: dict[str, Any], ts: str) -> None:
        self.session.cwd = str(dict_at(data, "context").get("cwd") or self.session.cwd)
        self.session.model = str(data.get("selectedModel") or self.session.model)

    def _session_model_change(self, data: dict[str, Any], ts: str) -> None:
        self.session.model = str(data.get("newModel") or data.get("model") or self.session.model)

    def _system_message(self, data: dict[str, Any], ts: str) -> None:
        content = data.get("content")
        if isinstance(content, str) and content != self.session.system_prompt:
            self._systems += 1
            if self._systems == 2:
                self.session.notes.append("Copilot rebuilt its system prompt during the session: the last one is shown")
            self.session.system_prompt = content

    def _user_message(self, data: dict[str, Any], ts: str) -> None:
        typed = data.get("content")
        sent = data.get("transformedContent")
        text = sent if isinstance(sent, str) else typed if isinstance(typed, str) else ""
        self._prompts.append(typed if isinstance(typed, str) else text)
        self._add({"role": "user", "content": text, "ts": ts})

    def _assistant_message(self, data: dict[str, Any], ts: str) -> None:
        msg: Message = {"role": "assistant", "content": str(data.get("content") or ""), "ts": ts}
        if calls := _tool_calls(data.get("toolRequests")):
            msg["tool_calls"] = calls
        if isinstance(data.get("reasoningText"), str) and data["reasoningText"]:
            msg["reasoning_content"] = data["reasoningText"]
        rid = str(data.get("apiCallId") or "")
        if rid and rid not in self._message_of:  # the call's first message (a response split in chunks: the first)
            self._message_of[rid] = len(self.session.messages)
            index = self._call_of.get(rid)
            if index is not None and self.session.calls[index].message_index != len(self.session.messages):
                self.session.calls[index].message_index = len(self.session.messages)
                self._updated.add(index)
        self._add(msg)

    def _tool_execution_complete(self, data: dict[str, Any], ts: str) -> None:
        self._add({"role": "tool", "tool_call_id": str(data.get("toolCallId") or ""),
                   "content": tool_result_text(data), "ts": ts})

    def _add(self, msg: Message) -> None:
        msg["id"] = self.session.make_id()
        self.session.messages.append(msg)

    def _session_usage_record(self, data: dict[str, Any], ts: str) -> None:
        session = self.session
        usage = dict_at(data, "usage")
        call = usage_call(len(session.calls), usage, ts, len(session.messages))
        call.message_index = self._message_of.get(call.request_id, call.message_index)  # its message came first
        session.calls.append(call)
        if call.request_id:
            self._call_of.setdefault(call.request_id, call.index)
        session.model = call.model or session.model
        for comp in session.compactions:  # the first call after a compaction: the size after it (the provider's)
            if comp.calls_before == call.index and comp.tokens_after is None:
                comp.tokens_after = call.prompt_tokens
                self._touched = min(self._touched, comp.index)
        if call.window:
            session.window, session.window_source = call.window, "Copilot's maxPromptTokens"
        row = self._turn_totals.setdefault(call.model, {"requests": 0, "input": 0, "output": 0})
        row["requests"] += 1
        row["input"] += call.prompt_tokens or 0
        row["output"] += call.completion_tokens or 0
        tokens, count = int_or_none(usage.get("toolTokenCount")), int_or_none(usage.get("availableToolCount"))
        if tokens is not None:  # the tool definitions as Copilot counted them (the definitions are not in the file)
            session.tools_tokens = tokens
            session.prefix_label = f"{count if count is not None else '?'} tool definitions (Copilot's toolTokenCount)"

    # ------------------------------------------------------------------ compactions
    def _session_compaction_start(self, data: dict[str, Any], ts: str) -> None:
        self._compacting = {"start": data, "at": len(self.session.messages)}

    def _model_model_call_success(self, data: dict[str, Any], ts: str) -> None:
        """The raw log of a call Copilot makes outside the turn loop: the compaction's (its response id)."""
        if self._compacting:
            self._compacting["id"] = str(dict_at(data, "modelCall").get("api_id") or "")
        else:
            self.session.ignore("event/model.model_call_success")

    def _session_compaction_complete(self, data: dict[str, Any], ts: str) -> None:
        session = self.session
        open_one, self._compacting = self._compacting, {}
        used = dict_at(data, "compactionTokensUsed")
        cost = usage_call(len(session.calls), used, ts, len(session.messages)) if used else None
        if cost is not None:
            cost.request_id = str(open_one.get("id") or "")
            cost.window = session.window
        if data.get("success") is False or data.get("outcome") not in (None, "applied"):
            outcome = data.get("outcome") or "failed"
            why = f"{outcome}, {data.get('trigger') or '?'}"
            session.notes.append(f"a compaction at {ts or '?'} was not applied ({why})"
                                 + ("; its summary call is counted as a call" if cost is not None else ""))
            if cost is not None and cost.prompt_tokens is not None:  # made and paid, its summary thrown away
                cost.prompt_unlike_file = f"the summary request of a compaction that was {outcome}"
                cost.prompt_transient = True
                session.calls.append(cost)
            return
        start = dict_at(open_one, "start")
        word = str(data.get("trigger") or start.get("trigger") or "")
        summary = str(data.get("summaryContent") or "")
        # a compaction past the threshold runs beside the turn: what the turn added meanwhile is kept after the summary
        at = open_one.get("at")
        kept = session.messages[at:] if isinstance(at, int) else []
        comp = Compaction(
            index=len(session.compactions), trigger=TRIGGERS.get(word, "unknown"),  # type: ignore[arg-type]
            trigger_source=word, ts=ts, message_index=len(session.messages), calls_before=len(session.calls),
            tokens_before=int_or_none(data.get("preCompactionTokens")), tokens_before_source=ESTIMATED,
            summary=summary, cost=cost, messages_after=1 + len(kept),
            post_tokens=int_or_none(data.get("postCompactionTokens")))
        session.compactions.append(comp)
        self._add({"role": "user", "content": summary_text(summary, self._prompts), "ts": ts})
        for msg in [{k: v for k, v in m.items() if k != "id"} for m in kept]:
            self._add(msg)
        session.live_start = comp.message_index

    def _session_truncation(self, data: dict[str, Any], ts: str) -> None:
        """Copilot dropped the oldest messages to fit: the last ``postTruncationMessagesLength`` are kept."""
        session = self.session
        kept_n = int_or_none(data.get("postTruncationMessagesLength")) or 0
        live = session.messages[session.live_start:]
        kept = [{k: v for k, v in m.items() if k != "id"} for m in live[max(0, len(live) - kept_n):]] if kept_n else []
        comp = Compaction(
            index=len(session.compactions), trigger="auto",
            trigger_source=f"truncation ({data.get('performedBy') or 'Copilot'})", ts=ts,
            message_index=len(session.messages), calls_before=len(session.calls),
            tokens_before=int_or_none(data.get("preTruncationTokensInMessages")), tokens_before_source=ESTIMATED,
            messages_after=len(kept), post_tokens=int_or_none(data.get("postTruncationTokensInMessages")))
        session.compactions.append(comp)
        for msg in kept:
            self._add(msg)
        session.live_start = comp.message_index

    def _session_shutdown(self, data: dict[str, Any], ts: str) -> None:
        """Copilot's running totals per model: checked against the turn calls read so far (its totals leave the
        compaction calls out), a note when they differ."""
        totals: dict[str, dict[str, int]] = {}
        for model, metrics in dict_at(data, "modelMetrics").items():
            usage = dict_at(metrics, "usage")
            totals[str(model)] = {"requests": int_or_none(dict_at(metrics, "requests").get("count")) or 0,
                                  "input": int_or_none(usage.get("inputTokens")) or 0,
                                  "output": int_or_none(usage.get("outputTokens")) or 0}
        self.shutdown_totals = totals
        read = self._turn_totals
        self.session.aggregate = {"shutdown": totals}
        if totals != read:
            self.session.notes.append(f"Copilot's totals at {ts or '?'} differ from the calls read: {totals} "
                                      f"(recorded) against {read} (read)")


def read_copilot(path: Path, *, lines: Iterable[bytes] | None = None) -> SourceSession:
    """Read one Copilot CLI ``events.jsonl``; ``lines``: its lines already read (kept by the caller)."""
    reader = CopilotReader(Path(path))
    feed_whole(reader, path, lines)
    return reader.finish()


# --------------------------------------------------------------------------- Sources


@dataclass
class LightSummary:
    """What Sources lists of a Copilot CLI session, from a light pass (only the lines that matter are parsed)."""

    session_id: str = ""
    started: str = ""
    cwd: str = ""
    calls: int = 0
    last_prompt: int | None = None
    model: str = ""
    window: int | None = None
    title: str = ""


def workspace_fields(folder: Path) -> dict[str, str]:
    """The flat ``key: value`` lines of ``workspace.yaml`` beside the events (id, cwd, name, …); {} when absent."""
    out: dict[str, str] = {}
    try:
        with open_regular(folder / "workspace.yaml") as fh:
            text = fh.read(65536).decode("utf-8", "replace")
    except (OSError, ValueError):
        return out
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key and not key.startswith((" ", "#", "-")):
            out[key.strip()] = value.strip().strip("'\"")
    return out


def light_summary(path: Path) -> LightSummary:
    """The :class:`LightSummary` of the events file at ``path`` (SourceError / OSError when it cannot be read)."""
    path = Path(path)
    out = LightSummary(session_id=path.parent.name)
    with open_regular(path) as fh:
        for raw in capped_lines(fh, name=path.name):
            if b'"session.usage_record"' in raw:
                usage = dict_at(dict_at(_loads(raw), "data"), "usage")
                out.calls += 1
                out.last_prompt = int_or_none(usage.get("inputTokens"))
                out.model = str(usage.get("model") or out.model)
                out.window = int_or_none(usage.get("maxPromptTokens")) or out.window
            elif not out.started and b'"session.start"' in raw:
                data = dict_at(_loads(raw), "data")
                out.session_id = str(data.get("sessionId") or out.session_id)
                out.started = iso(data.get("startTime"))
                out.cwd = str(dict_at(data, "context").get("cwd") or "")
                out.model = out.model or str(data.get("selectedModel") or "")
            elif not out.title and b'"user.message"' in raw:
                obj = _loads(raw)
                if obj.get("type") == "user.message" and not obj.get("agentId"):
                    out.title = str(dict_at(obj, "data").get("content") or "")
    space = workspace_fields(path.parent)
    out.cwd = out.cwd or space.get("cwd", "")
    out.title = space.get("name") or out.title
    return out


def _loads(raw: bytes) -> dict[str, Any]:
    try:
        obj = loads_line(raw)
    except (ValueError, RecursionError):
        return {}
    return obj if isinstance(obj, dict) else {}


__all__ = ["IGNORED_EVENTS", "KNOWN_EVENTS", "READ_EVENTS", "CopilotReader", "LightSummary", "is_copilot_line",
           "light_summary", "read_copilot", "summary_text", "tool_result_text", "usage_call", "workspace_fields"]
