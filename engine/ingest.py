"""Turn another agent's session file into a ctxbench session folder.

``import_source(path, session_dir)`` detects the format (or takes the one given), reads the file
with that agent's reader (one shape: :class:`engine.sources.model.SourceSession`) and writes:

- ``history.jsonl``: the messages still in the context after the last compaction;
- ``dialog/YYYY-MM-DD.jsonl``: the messages a compaction removed (the dialog archive);
- ``session.json``: the summary of the last compaction, the system prompt and tools where the source
  has them, and an ``import`` record (format, source, skipped lines with their reasons, the inferred
  prefix region, subagents, offloaded results, the source's aggregate figures);
- ``events.jsonl``: one ``context`` record per provider call in call order — the snapshot the live
  app would have drawn, with ``provider_prompt_tokens`` (the whole prompt as the provider counted
  it, cached part included), ``cache_read_tokens``, ``cache_write_tokens`` (null where the source
  has no such figure), ``completion_tokens``, ``model``, ``ts``, ``window`` — and one ``compaction``
  record per compaction (``trigger``, ``tokens_before``, ``tokens_after``, ``summary``, ``cost``);
- ``tool_results/<hex>.txt``: copies of the results the agent persisted to files, linked from
  their tool messages (``offload``);
- ``subagents/<id>/``: each subagent as its own session folder, linked from the tool message that
  answered the Task call (``subagent``).

mini-swe-agent and plain OpenAI logs go through :func:`engine.transcript.import_openai_log`.
The source's own folders are only read. The session is built in a temporary folder and renamed
into place at the end: nothing partial is left behind.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.context.calibration import SourceCalibrator
from engine.context.conversation import Session
from engine.context.snapshots import RunningHistory, build_snapshot, snapshot_from_totals
from engine.context.tokens import FOLLOW_MEMO, Estimator, HeuristicEstimator, TokenCache
from engine.context.window import ModelInfo, import_window
from engine.model.call_meta import beside_of
from engine.model.events import Outcome
from engine.model.messages import Message, new_id, now_iso
from engine.model.records import CompactionRecord, ContextRecord, Record, compaction_records, parse_record
from engine.model.snapshot import WindowInfo
from engine.sources.detect import detect_format
from engine.sources.formats import LOG_FORMATS
from engine.sources.join import join_captures
from engine.sources.model import (
    INFERRED,
    ProviderCall,
    RequestPrefix,
    SourceChanges,
    SourceError,
    SourceFormat,
    SourceSession,
    open_regular,
)
from engine.sources.readers import read_source
from engine.store import archive
from engine.store.config import Settings
from engine.store.fsutil import Fingerprints, fsync_dir, json_loads
from engine.store.staging import collection_paused, staging_folder
from engine.transcript import TranscriptError, import_openai_log, parse_transcript

SUBAGENTS_DIR = "subagents"
FILE = "file"  # a prefix read from the file as it was sent (Claude Code's request shapes, Codex's instructions)
RESULTS_DIR = "tool_results"  # engine.context.offload.RESULTS_DIR, without importing asyncio for it


@dataclass
class SourceImportReport:
    """What an import read and wrote; ``to_json`` is what ``ctxbench import`` prints."""

    format: SourceFormat
    session_id: str
    path: Path
    source: Path
    messages: int  # every message read (in the context at the end, plus archived by compactions)
    live_messages: int
    archived_messages: int
    calls: int
    reported_calls: int  # calls with the provider's prompt tokens
    compactions: list[dict[str, Any]] = field(default_factory=list)
    subagents: list[dict[str, Any]] = field(default_factory=list)
    offloaded: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    model: str = ""
    window: int = 0
    window_source: str = ""
    inferred_prefix_tokens: int | None = None
    inferred_prefix_label: str = ""
    inferred_prefix_by: str = ""  # who gave the prefix figure when not inferred from the provider's ("" = inferred)
    aggregate: dict[str, Any] | None = None
    off_chain: int = 0
    layout: str = ""  # the container shape of an OpenAI-format log (json-list | json-object | jsonl)
    snapshots: int = 0
    ignored: dict[str, int] = field(default_factory=dict)  # record type -> lines left out on purpose
    prefix_source: str = ""  # "file" (the system prompt and tools as sent), "inferred", or "" (none)
    system_prompt_tokens: int | None = None  # the last call's, where the file holds the prefix
    tool_definitions: list[dict[str, Any]] = field(default_factory=list)  # the last request's, largest first
    agent_cost_usd: float | None = None  # the agent's own cost (Claude Code's cost-state)
    agent_cost_by_model: dict[str, float] = field(default_factory=dict)

    def describe(self) -> str:
        lines = [
            f"Imported {self.messages} messages ({self.format}) from {self.source.name} as session {self.session_id}: "
            f"{self.live_messages} in the context, {self.archived_messages} archived by "
            f"{len(self.compactions)} compaction(s).",
            f"{self.calls} provider calls, {self.reported_calls} with the provider's prompt tokens.",
        ]
        if self.inferred_prefix_tokens is not None:
            lines.append(
                f"{self.inferred_prefix_label} (not in the file): {self.inferred_prefix_tokens} tokens, "
                f"{self.inferred_prefix_by or 'inferred'}."
            )
        if self.prefix_source == "file":
            lines.append(f"System prompt {self.system_prompt_tokens} tokens and {len(self.tool_definitions)} tool "
                         f"definition(s) {sum(t['tokens'] for t in self.tool_definitions)} tokens, "
                         "as sent (from the file).")
        if self.agent_cost_usd is not None:
            lines.append(f"The agent's own cost: ${self.agent_cost_usd:,.4f}.")
        if self.subagents:
            lines.append(f"{len(self.subagents)} subagent session(s).")
        if self.ignored:
            lines.append(f"Left out on purpose {sum(self.ignored.values())} line(s): " + ", ".join(
                f"{k} {v}" for k, v in sorted(self.ignored.items(), key=lambda kv: -kv[1])))
        if self.skipped:
            lines.append(f"Skipped {len(self.skipped)}: " + "; ".join(self.skipped[:5]))
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(type="import", path=str(self.path), source=str(self.source), skipped_lines=len(self.skipped),
                    ignored_lines=sum(self.ignored.values()), description=self.describe())
        return data


# --------------------------------------------------------------------------- context records


@dataclass
class _Ctx:
    settings: Settings
    estimator: Estimator
    win: WindowInfo
    system_tokens: int = 0
    tools_tokens: int = 0
    prefix: int | None = None  # inferred system/tools tokens (the source does not have them)
    prefix_in_system: bool = True


def _window(src: SourceSession, settings: Settings, model_info: ModelInfo | None) -> WindowInfo:
    if src.window:
        return WindowInfo(int(src.window), settings.max_tokens, src.window_source or "source")
    largest = max((c.prompt_tokens or 0 for c in src.calls), default=0)
    return import_window(settings, None, src.model, model_info, largest)


def tool_server(name: str) -> str:
    """The MCP server of a tool named ``mcp__<server>__<tool>``; "" for the agent's own tools."""
    if name.startswith("mcp__"):
        server, sep, _ = name[5:].partition("__")
        return server if sep else ""
    return ""


def tool_definitions_tokens(tools: Sequence[dict[str, Any]], estimator: Estimator) -> int:
    """The tokens of a request's tool definitions: the sum of each one's (what the Tools tab lists, the chart's
    legend and every call's *Tool definitions* region show: one figure, however it is summed)."""
    return sum(estimator.tools([t]) for t in tools)


def tool_definitions(prefix: RequestPrefix, estimator: Estimator) -> list[dict[str, Any]]:
    """Each tool definition of a request with its tokens, largest first (as Claude Code's /context lists
    them), ``server`` for MCP tools."""
    out = [{"name": str(t.get("name") or "?"), "tokens": estimator.tools([t]),
            "server": tool_server(str(t.get("name") or ""))} for t in prefix.tools]
    return sorted(out, key=lambda t: (-t["tokens"], t["name"]))


@dataclass
class _Prefixes:
    """Tokens of the exact request prefixes of a source (system prompt, tool definitions), counted once each."""

    src: SourceSession
    estimator: Estimator
    counted: dict[str, tuple[int, int]] = field(default_factory=dict)

    def of(self, call: ProviderCall) -> tuple[int, int] | None:
        prefix = self.src.prefixes.get(call.prefix_key) if call.prefix_key else None
        if prefix is None:
            return None
        if prefix.key not in self.counted:
            self.counted[prefix.key] = (self.estimator.text(prefix.system) if prefix.system else 0,
                                        tool_definitions_tokens(prefix.tools, self.estimator))
        return self.counted[prefix.key]


AGENT_COUNTED = "as the agent counted them"  # a prefix figure the agent's file gives (Copilot's toolTokenCount)


def _infer_prefix(src: SourceSession, ctx: _Ctx, counts: list[int], cache: TokenCache) -> None:
    """System prompt + tool definitions the file lacks = first reported prompt − what we can count."""
    if src.tools or src.prefixes or not src.calls:
        return
    if src.tools_tokens is not None and src.system_prompt:  # the tools counted by the agent (not in the file)
        ctx.prefix, ctx.prefix_in_system = src.tools_tokens, False
        return
    first = next((c for c in src.calls if c.prompt_tokens), None)
    if first is None:
        return
    start = src.segment_start(first.message_index)
    comp = src.compaction_before(first.message_index)
    known = ctx.system_tokens + (ctx.estimator.text(comp.summary) if comp and comp.summary else 0)
    history = first.input_messages if first.input_messages is not None else None
    known += sum(cache.count(m) for m in history) if history is not None else sum(counts[start:first.message_index])
    ctx.prefix = max(0, int(first.prompt_tokens or 0) - known)
    ctx.prefix_in_system = not src.system_prompt


class ContextRecorder:
    """The ``context`` records of a source's calls, one call at a time, in call order: what an import
    writes for all of them, and what a followed view writes for each call the file gains (the calibration
    goes on from the calls before; the messages' counts are kept and recounted from where they changed)."""

    def __init__(self, src: SourceSession, ctx: _Ctx) -> None:
        self.src, self.ctx = src, ctx
        self.cache = TokenCache(ctx.estimator)
        self.counts: list[int] = []
        self.running = RunningHistory()  # the counts' running totals by role and the messages' ids
        self._inferred = False
        self.calibrator = SourceCalibrator()
        self.segment = 0  # the segment (compactions before + 1) of the last call recorded
        self.summaries: dict[int, int] = {}
        self.prefixes = _Prefixes(src, ctx.estimator)
        self.base = (ctx.system_tokens, ctx.tools_tokens)
        self.last: dict[str, Any] | None = None  # the record of the last call made

    def changed_from(self, index: int) -> None:
        """Messages from ``index`` on were replaced: their counts are made again when needed."""
        del self.counts[index:]
        self.running.truncate(index)

    def _count_to(self, end: int) -> None:
        fresh = self.src.messages[len(self.counts):end]
        if not fresh:
            return
        counts = [self.cache.count(m) for m in fresh]
        self.counts.extend(counts)
        self.running.extend(fresh, counts)

    def _infer_once(self) -> None:
        if self._inferred:
            return
        self._inferred = True
        ctx, src = self.ctx, self.src
        if not src.calls or not any(c.prompt_tokens for c in src.calls):
            self._inferred = False  # no figure to infer from yet (a followed file may bring one)
            return
        self._count_to(len(src.messages))
        _infer_prefix(src, ctx, self.counts, self.cache)
        system = ctx.system_tokens + (ctx.prefix or 0 if ctx.prefix_in_system else 0)
        tools = ctx.tools_tokens + (ctx.prefix or 0 if not ctx.prefix_in_system else 0)
        self.base = (system, tools)
        if ctx.prefix is not None:  # the provider's own size of the prefix, from its first figure
            self.calibrator.exact_prefix, self.calibrator.prefix_known = system + tools, True

    def record(self, call: ProviderCall) -> dict[str, Any]:
        src, ctx = self.src, self.ctx
        self._infer_once()
        exact = self.prefixes.of(call)
        system, tools = exact if exact is not None else self.base
        calibrator = self.calibrator
        if exact is not None:  # the prefix as sent, counted by the estimator
            calibrator.exact_prefix, calibrator.prefix_known = system + tools, False
        win = ctx.win
        if call.max_tokens or call.window:  # the call's own (the window line its record draws)
            win = replace(win, max_tokens=call.max_tokens or win.max_tokens,
                          context_window=call.window or win.context_window)
        end = min(call.message_index, len(src.messages))
        history: Sequence[Message] | None = None
        if call.input_messages is not None:  # the request as sent, whole: counted as it is
            history = call.input_messages
            hcounts = [self.cache.count(m) for m in history]
        else:  # a stretch of the messages: its running totals, however long the context has grown
            start = src.segment_start(end)
            self._count_to(end)
        comp = src.compaction_before(end)
        segment = comp.index + 1 if comp is not None else 0
        if segment != self.segment:
            self.segment = segment
            calibrator.restart()  # the scale starts again from what the provider reports after it
        if comp is not None and comp.index not in self.summaries:
            self.summaries[comp.index] = ctx.estimator.text(comp.summary) if comp.summary else 0
        summary = self.summaries.get(comp.index, 0) if comp is not None else 0
        actual = call.prompt_tokens
        exact_system = exact is not None or (ctx.prefix is not None and ctx.prefix_in_system and not ctx.system_tokens)
        # the tool definitions inferred from the provider's first figure (the file holds the system prompt, not the
        # tools): that count, never scaled by the calibration (the legend and the call's tooltip show one figure)
        exact_tools = exact is not None or (ctx.prefix is not None and not ctx.prefix_in_system
                                            and not ctx.tools_tokens)
        if history is not None:
            snap = build_snapshot(
                window=win, system_tokens=system, summary_tokens=summary, tools_tokens=tools, history=history,
                history_counts=hcounts, estimator_name=ctx.estimator.name,
                threshold_ratio=ctx.settings.compact_threshold_ratio, calibrator=calibrator,
                provider_prompt_tokens=actual, model=call.model or src.model, ts=call.ts, call_index=call.index,
                exact_system=exact_system, exact_tools=exact_tools)
            snap.message_tokens = []  # the record holds none (what to_json would copy)
            message_count = len(history)
        else:
            snap = snapshot_from_totals(
                window=win, system_tokens=system, summary_tokens=summary, tools_tokens=tools,
                history_tokens=self.running.totals(start, end), history_ids=(ids := self.running.ids_of(start, end)),
                estimator_name=ctx.estimator.name, threshold_ratio=ctx.settings.compact_threshold_ratio,
                calibrator=calibrator, provider_prompt_tokens=actual, model=call.model or src.model, ts=call.ts,
                call_index=call.index, exact_system=exact_system, exact_tools=exact_tools)
            message_count = end - start
        data = snap.to_json()
        data.update(
            type="context", message_count=message_count, message_tokens=[],
            message_id=src.messages[end]["id"] if end < len(src.messages) else None,
            provider_prompt_tokens=actual, segment=segment,
            exact_input=call.input_messages is not None, source_format=src.format,
            prefix_tokens=ctx.prefix if exact is None else system + tools,
            prefix_source=FILE if exact is not None else (INFERRED if ctx.prefix is not None else None),
            prefix_key=call.prefix_key or None, **call_figures(call, ctx.win.context_window),
            prompt_unlike_file=call.prompt_unlike_file)
        if call.cost_usd is not None:  # the agent's own price of the call (ATIF's cost_usd)
            data["agent_cost_usd"] = call.cost_usd
        if isinstance(actual, int) and actual > 0:
            named: Sequence[str] = tuple(str(m.get("id")) for m in history) if history is not None else \
                self.running.named_ids(start, end, ids)
            if call.prompt_unlike_file:  # the figure counts what the file does not hold: no scale learnt from it
                calibrator.record_unlike(snap.raw_prompt_tokens, actual, named, (system, summary, tools),
                                         transient=call.prompt_transient)
            else:
                calibrator.record(snap.raw_prompt_tokens, actual, named, (system, summary, tools))
        self.last = data
        return data


def call_figures(call: ProviderCall, window: int) -> dict[str, Any]:
    """The figures of a call's record that the source gives (and a later line of the same call may raise)."""
    return {"cache_read_tokens": call.cache_read_tokens, "cache_write_tokens": call.cache_write_tokens,
            "completion_tokens": call.completion_tokens, "reasoning_tokens": call.reasoning_tokens,
            "cache_write_1h_tokens": call.cache_write_1h_tokens, "window": call.window or window,
            "request_id": call.request_id, "cache_breakpoints": call.cache_breakpoints,
            **({"billed_beside": beside} if (beside := beside_of(call.iterations)) else {}),
            **({"cache_miss": call.cache_miss.to_json()} if call.cache_miss else {}),
            **({"attribution": call.attribution.to_json()} if call.attribution else {})}


def _context_records(src: SourceSession, ctx: _Ctx) -> list[dict[str, Any]]:
    recorder = ContextRecorder(src, ctx)
    return [recorder.record(call) for call in src.calls]


def context_records(src: SourceSession, settings: Settings | None = None,
                    estimator: Estimator | None = None) -> list[dict[str, Any]]:
    """The ``context`` records an import writes for ``src`` (one per provider call), without writing."""
    settings = settings or Settings()
    estimator = estimator or HeuristicEstimator()
    win = _window(src, settings, None)
    ctx = _Ctx(settings, estimator, win, estimator.text(src.system_prompt) if src.system_prompt else 0,
               estimator.tools(src.tools) if src.tools else 0)
    return _context_records(src, ctx)


def _compaction_records(src: SourceSession) -> list[dict[str, Any]]:
    out = []
    prev = 0
    # a compaction's call that is also a call of the session or of a Task subagent (each written with its own
    # record) is counted there: ``cost_separate`` False (engine.usage.costs.folder_cost)
    counted = {id(c) for c in src.calls} | {id(c) for ref in src.subagents if ref.kind == "task" and ref.session
                                            for c in ref.session.calls}
    for comp in src.compactions:
        archived = src.messages[prev:comp.message_index]
        cost = comp.cost
        out.append({
            "type": "compaction", "id": new_id(), "trigger": comp.trigger, "trigger_source": comp.trigger_source,
            "tokens_before": comp.tokens_before, "tokens_after": comp.tokens_after,
            "tokens_before_source": comp.tokens_before_source if comp.tokens_before is not None else "",
            "tokens_after_source": "first provider call after the compaction" if comp.tokens_after is not None else "",
            "messages_compacted": len(archived), "messages_kept": comp.messages_after, "duration_ms": 0.0,
            "post_tokens": comp.post_tokens, "cost_usd": comp.cost_usd, "placed_by": comp.placed_by,
            "dropped_tokens": comp.dropped_tokens,
            "result": (Outcome.SUMMARIZED if comp.summary else Outcome.REPLACED).value, "summary": comp.summary,
            "reason": "",
            "archive_day": str(archived[-1].get("ts") or "")[:10] if archived else "", "ts": comp.ts,
            "calls_before": comp.calls_before, "source_format": src.format,
            "cost": None if cost is None else {
                "prompt_tokens": cost.prompt_tokens, "completion_tokens": cost.completion_tokens,
                "cache_read_tokens": cost.cache_read_tokens, "cache_write_tokens": cost.cache_write_tokens,
                "cache_write_1h_tokens": cost.cache_write_1h_tokens, "reasoning_tokens": cost.reasoning_tokens,
                "model": cost.model, "ts": cost.ts, "request_id": cost.request_id,
                "completion_placeholder": cost.completion_placeholder,
                "cost_separate": id(cost) not in counted},
        })
        prev = comp.message_index
    return out


def _events(src: SourceSession, ctx: _Ctx, recorder: ContextRecorder | None = None) -> list[dict[str, Any]]:
    recorder = recorder or ContextRecorder(src, ctx)
    contexts = [recorder.record(call) for call in src.calls]
    comps = _compaction_records(src)
    out: list[dict[str, Any]] = []
    ci = 0
    for comp, rec in zip(src.compactions, comps, strict=True):
        while ci < len(contexts) and ci < comp.calls_before:
            out.append(contexts[ci])
            ci += 1
        out.append(rec)
    out.extend(contexts[ci:])
    return out


# --------------------------------------------------------------------------- writing


def _link_offloaded(src: SourceSession, folder: Path) -> list[dict[str, Any]]:
    """Copy each persisted tool output the agent kept into tool_results/ and link it."""
    out = []
    for off in src.offloaded:
        entry: dict[str, Any] = {"tool_call_id": off.tool_call_id, "stated_path": off.stated_path,
                                 "found": off.local_path is not None, "path": None, "bytes": off.size}
        if off.local_path is not None:
            (folder / RESULTS_DIR).mkdir(exist_ok=True)
            rel = f"{RESULTS_DIR}/{uuid.uuid4().hex}.txt"
            try:
                with open_regular(off.local_path) as fh, open(folder / rel, "wb") as copy:  # never a FIFO or device
                    shutil.copyfileobj(fh, copy, 1 << 20)
            except (OSError, SourceError) as exc:
                (folder / rel).unlink(missing_ok=True)
                entry.update(found=False, problem=f"cannot be read: {getattr(exc, 'strerror', None) or exc}")
                src.notes.append(f"persisted tool output {off.local_path.name} cannot be read: "
                                 f"{getattr(exc, 'strerror', None) or exc}")
                out.append(entry)
                continue
            lines = sum(chunk.count(b"\n") for chunk in _chunks(folder / rel))
            src.messages[off.message_index]["offload"] = {
                "path": rel, "bytes": off.size, "lines": lines, "strategy": "source",
                "source_path": str(off.local_path)}
            entry["path"] = rel
        out.append(entry)
    return out


def _chunks(path: Path) -> Any:
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            yield chunk


def _write(src: SourceSession, folder: Path, settings: Settings, estimator: Estimator,
           model_info: ModelInfo | None, title: str | None,
           recorder_out: list[ContextRecorder] | None = None,
           records_out: list[Record] | None = None) -> SourceImportReport:
    win = _window(src, settings, model_info)
    ctx = _Ctx(settings, estimator, win, estimator.text(src.system_prompt) if src.system_prompt else 0,
               estimator.tools(src.tools) if src.tools else 0)
    recorder = ContextRecorder(src, ctx)
    if recorder_out is not None:
        recorder_out.append(recorder)
    meta: dict[str, Any] = {"title": title or f"{src.project or src.format} {src.session_id[:12]} (imported)",
                            "model": src.model, "system_prompt": src.system_prompt, "tools": src.tools,
                            "summary": src.summary}
    session = Session.create(folder, meta["title"], estimator=estimator, meta=meta)
    try:
        offloaded = _link_offloaded(src, folder)
        subagents = _write_subagents(src, folder, settings, estimator, model_info)  # links the Task results
        events = _events(src, ctx, recorder)
        archived = src.messages[:src.live_start]
        if archived:
            archive.append(folder, archived, dedupe=False)
        session.extend(src.messages[src.live_start:])
        records = [parse_record(e) for e in events]
        session.append_records(records)
        if records_out is not None:
            records_out.extend(records)
        report = SourceImportReport(
            format=src.format, session_id=folder.name, path=folder, source=src.path, messages=len(src.messages),
            live_messages=len(src.messages) - src.live_start, archived_messages=src.live_start, calls=len(src.calls),
            reported_calls=src.reported_calls, compactions=[e for e in events if e["type"] == "compaction"],
            subagents=subagents, offloaded=offloaded, skipped=[s.describe() for s in src.skipped], notes=src.notes,
            model=src.model, window=win.context_window, window_source=win.source,
            inferred_prefix_tokens=ctx.prefix, inferred_prefix_label=src.prefix_label if ctx.prefix is not None else "",
            inferred_prefix_by=AGENT_COUNTED if src.tools_tokens is not None and src.system_prompt else "",
            aggregate=src.aggregate, off_chain=src.off_chain, snapshots=len(src.calls), ignored=dict(src.ignored),
            agent_cost_usd=src.agent_cost_usd, agent_cost_by_model=dict(src.agent_cost_by_model))
        _report_prefix(src, report, estimator, ctx)
        session.set_meta(tools_source=FILE if report.prefix_source == FILE else (
                             "log" if src.tools else (INFERRED if ctx.prefix is not None else "none")),
                         calibrator=None, **{"import": _import_meta(src, report)})
        session.save_meta()
    finally:
        session.close()
    return report


def _report_prefix(src: SourceSession, report: SourceImportReport, estimator: Estimator, ctx: _Ctx) -> None:
    last = next((c for c in reversed(src.calls) if c.prefix_key in src.prefixes), None)
    if last is not None:
        prefix = src.prefixes[last.prefix_key]
        report.prefix_source = FILE
        report.system_prompt_tokens = estimator.text(prefix.system) if prefix.system else 0
        report.tool_definitions = tool_definitions(prefix, estimator)
    elif ctx.prefix is not None:
        report.prefix_source = INFERRED


def _import_meta(src: SourceSession, report: SourceImportReport) -> dict[str, Any]:
    return {
        "source": str(src.path), "format": src.format, "imported": now_iso(), "session_id": src.session_id,
        "skipped": report.skipped, "notes": report.notes, "window": report.window,
        "window_source": report.window_source, "off_chain": src.off_chain, "aggregate": src.aggregate,
        "inferred_prefix": None if report.inferred_prefix_tokens is None else {
            "tokens": report.inferred_prefix_tokens, "label": report.inferred_prefix_label, "source": INFERRED,
            "region": "system" if not src.system_prompt else "tools"},
        "subagents": report.subagents, "offloaded": report.offloaded, "cwd": src.cwd, "project": src.project,
        "ignored": report.ignored, "prefix_source": report.prefix_source,
        "system_prompt_tokens": report.system_prompt_tokens, "tool_definitions": report.tool_definitions,
        "agent_cost_usd": report.agent_cost_usd, "agent_cost_by_model": report.agent_cost_by_model,
    }


def _write_subagents(src: SourceSession, folder: Path, settings: Settings, estimator: Estimator,
                     model_info: ModelInfo | None) -> list[dict[str, Any]]:
    out = []
    for ref in src.subagents:
        if ref.kind != "task" or ref.session is None:
            continue
        child_dir = folder / SUBAGENTS_DIR / ref.id
        child_dir.parent.mkdir(exist_ok=True)
        child = _write(ref.session, child_dir, settings, estimator, model_info, f"subagent {ref.id}")
        rel = f"{SUBAGENTS_DIR}/{ref.id}"
        for msg in src.messages:
            if isinstance(msg.get("subagent"), dict) and msg["subagent"].get("id") == ref.id:
                msg["subagent"].update(session=rel, model=child.model, calls=child.calls)
        out.append({"id": ref.id, "path": rel, "session": rel, "file": None if ref.path is None else str(ref.path),
                    "parent_tool_call_id": ref.parent_tool_call_id, "calls": child.calls,
                    "reported_calls": child.reported_calls, "messages": child.messages, "model": child.model,
                    "prompt_tokens": [c.prompt_tokens for c in ref.session.calls]})
    return out


def import_source(
    path: Path,
    *,
    session_dir: Path,
    fmt: SourceFormat | None = None,
    title: str | None = None,
    settings: Settings | None = None,
    estimator: Estimator | None = None,
    model_info: ModelInfo | None = None,
    lines: Sequence[bytes] | None = None,
) -> SourceImportReport:
    """Import ``path`` (of format ``fmt``, detected when None) as a new session at ``session_dir``;
    ``lines``: a followed file's lines already read (see :func:`engine.sources.readers.read_source`)."""
    path = Path(path)
    settings = settings or Settings()
    estimator = estimator or HeuristicEstimator()
    fmt = fmt or _detect(path)
    final = Path(session_dir)
    if final.exists() and (not final.is_dir() or any(final.iterdir())):
        raise SourceError(f"cannot import into {final}: it already exists")
    if fmt in LOG_FORMATS:  # a log the importer reads (engine.importer), not a source with a reader
        return _import_openai(path, final, fmt, title, settings, estimator, model_info)
    with collection_paused():
        return _import_read(path, final, fmt, title, settings, estimator, model_info, lines)


def _import_read(path: Path, final: Path, fmt: SourceFormat, title: str | None, settings: Settings,
                 estimator: Estimator, model_info: ModelInfo | None,
                 lines: Sequence[bytes] | None) -> SourceImportReport:
    src = read_source(path, fmt, lines)
    join_captures(src)  # a recording proxy's capture of the same calls: their exact prefix (engine.sources.join)
    if not src.messages and not src.calls:
        raise SourceError(f"{path.name}: no message or provider call could be read as {fmt} "
                          f"({len(src.skipped)} line(s) skipped)")
    if final.exists():
        final.rmdir()
    parent = final.parent
    # built in a hidden folder held by this process, renamed into place at the end; one an interrupted import left
    # (no process holds it) is removed here
    with staging_folder(parent) as tmp:
        report = _write(src, tmp, settings, estimator, model_info, title)
        os.rename(tmp, final)
        fsync_dir(parent)
    report.path = final
    report.session_id = final.name
    for sub in report.subagents:
        sub["path"] = str(final / sub["session"])
    return report


MAX_REPLACED = 50  # more changed messages than this at the end of a followed view: the folder is written again


@dataclass
class LivePlan:
    """What one feed of a followed source changes in its view folder (worked out off the loop; applied on
    it by :meth:`LiveImport.apply`): messages replaced in place (same ids) and added at the end, the records
    of the new calls, the last call's record with new figures, the import record when it changed."""

    replaced: list[Message] = field(default_factory=list)
    added: list[Message] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    updated: ContextRecord | None = None
    meta: dict[str, Any] | None = None
    live: list[Message] | None = None  # after a compaction: the messages still in the context (the rest archived)
    summary: str = ""  # after a compaction: the summary now in the context

    @property
    def empty(self) -> bool:
        return not (self.replaced or self.added or self.records or self.updated or self.meta or self.live)

    @property
    def compactions(self) -> list[CompactionRecord]:
        return compaction_records(self.records)


def _last_record_offset(path: Path, call_index: int) -> int:
    """Where the last line of ``path`` starts when it is the context record of call ``call_index`` (it can
    then be written again in place); else -1."""
    try:
        data = path.read_bytes()
    except OSError:
        return -1
    start = data.rfind(b"\n", 0, len(data) - 1) + 1
    try:
        last = parse_record(json_loads(data[start:]))
    except ValueError:  # not JSON, or not a record
        return -1
    return start if isinstance(last, ContextRecord) and last.snapshot.call_index == call_index else -1


class LiveImport:
    """A followed source imported once into a view folder, then kept up to date from its incremental
    reader's :class:`SourceChanges`: new messages appended, a grown response replaced in place, one record
    per new call (the calibration going on from the calls before), the last call's figures updated, the
    agent's cost and the skipped/ignored counts kept current. What cannot be applied so — a compaction, a
    rewind into what the folder holds, a reset — is answered with None: the caller writes the folder again
    from the reader's session in memory (:meth:`rewrite`), never reading the file again."""

    def __init__(self, src: SourceSession, folder: Path, settings: Settings, estimator: Estimator,
                 model_info: ModelInfo | None, title: str | None = None) -> None:
        self.src, self.settings, self.estimator = src, settings, estimator
        self.model_info, self.title = model_info, title
        self.folder = folder
        self.report = self._write_folder(folder)

    def _write_folder(self, folder: Path) -> SourceImportReport:
        kept: list[ContextRecorder] = []
        written: list[Record] = []
        report = _write(self.src, folder, self.settings, self.estimator, self.model_info, self.title, kept, written)
        self.recorder = kept[0]
        self.recorder.cache.bound(FOLLOW_MEMO)  # following counts a message once: not every shape the import counted
        self.written: list[Record] | None = written  # events.jsonl's records as written (until a session reads them)
        self.signatures = Fingerprints(self.src.messages, MAX_REPLACED)  # (only those can be replaced in place)
        self.calls = len(self.src.calls)
        self.live_start = self.src.live_start
        self.compactions = [(c.message_index, c.summary, c.tokens_after) for c in self.src.compactions]
        self.facts = self._facts()
        self.events_size = _last_record_offset(folder / "events.jsonl", self.calls - 1)
        self.pending: SourceChanges | None = None
        return report

    def rewrite(self, folder: Path) -> SourceImportReport:
        """Write the view again into ``folder`` (new) from the reader's session as it is now."""
        self.folder = folder
        self.report = self._write_folder(folder)
        self.written = None  # (a view read again reads its records)
        return self.report

    def _facts(self) -> tuple[Any, ...]:
        src = self.src
        return (src.agent_cost_usd, tuple(sorted(src.agent_cost_by_model.items())), len(src.skipped),
                tuple(sorted(src.ignored.items())))

    def follow(self, src: SourceSession) -> None:
        """The reader's session now (a polled reader builds a new one on each change)."""
        if src is not self.src:
            self.src = self.recorder.src = self.recorder.prefixes.src = src

    def _merge(self, changes: SourceChanges) -> SourceChanges:
        """The changes of this feed and of those still waiting (a compaction waiting for the call after it)."""
        held, self.pending = self.pending, None
        if held is None:
            return changes
        return SourceChanges(messages_from=min(held.messages_from, changes.messages_from),
                             calls_from=held.calls_from,
                             calls_updated=sorted({*held.calls_updated, *changes.calls_updated}),
                             compactions_from=min(held.compactions_from, changes.compactions_from),
                             reset=held.reset or changes.reset)

    def plan(self, changes: SourceChanges) -> LivePlan | None:
        """The changes to apply to the folder; None when it must be written again (see the class text)."""
        src = self.src
        changes = self._merge(changes)
        comps = [(c.message_index, c.summary, c.tokens_after) for c in src.compactions]
        known, old = self.signatures.count, len(self.compactions)
        if changes.reset or comps[:old] != self.compactions or len(src.messages) < known:
            return None  # a rewind into what is shown, a compaction's summary changed: written whole
        fresh = src.compactions[old:]
        if fresh and fresh[-1].message_index < self.live_start:
            return None  # a compaction of what was already archived: written whole
        if any(c.tokens_after is None for c in fresh):
            self.pending = changes  # it comes with its figures, once the call after it is there
            return LivePlan()
        start = min(changes.messages_from, known)
        if start < self.live_start or known - start > MAX_REPLACED:
            return None
        if any(i < self.calls - 1 for i in changes.calls_updated):
            return None  # an older call changed: not the way files grow
        plan = LivePlan()
        share = src.fresh_on_change  # the view holds the reader's own dicts, never changed in place (else copies)
        for i in range(start, known):
            if self.signatures.changed(i, src.messages[i]):
                plan.replaced.append(src.messages[i] if share else dict(src.messages[i]))
        if plan.replaced:
            self.recorder.changed_from(start)
        self.signatures.extend(added := src.messages[known:])
        plan.added.extend(added if share else map(dict, added))
        if self.calls and self.calls - 1 in changes.calls_updated and self.recorder.last is not None:
            self.recorder.last.update(call_figures(src.calls[self.calls - 1], self.recorder.ctx.win.context_window))
            plan.updated = ContextRecord.from_json(self.recorder.last)
        records = {c.index: c for c in src.compactions[old:]}
        comp_records = _compaction_records(src)[old:] if len(src.compactions) > old else []
        for call in src.calls[self.calls:]:
            while comp_records and comp_records[0]["calls_before"] <= call.index:
                plan.records.append(parse_record(comp_records.pop(0)))
            plan.records.append(parse_record(self.recorder.record(call)))
        plan.records.extend(map(parse_record, comp_records))
        if records:
            plan.live = [dict(m) for m in src.messages[src.live_start:]]
            plan.summary = src.summary
        self.calls = len(src.calls)
        self.compactions = comps
        self.live_start = src.live_start
        facts = self._facts()
        if facts != self.facts:
            self.facts = facts
            plan.meta = {"agent_cost_usd": src.agent_cost_usd, "agent_cost_by_model": dict(src.agent_cost_by_model),
                         "skipped": [s.describe() for s in src.skipped], "ignored": dict(src.ignored)}
        return plan

    def apply(self, session: Session, plan: LivePlan) -> None:
        """Write ``plan`` into the view's open session (on the thread that owns it)."""
        if plan.replaced:
            session.update_messages(plan.replaced)
        if plan.added:
            session.extend(plan.added)
        if plan.updated is not None and self.events_size >= 0:  # the last call's record, written again
            session.replace_records_from(self.events_size, [plan.updated])
        if plan.live is not None:
            session.rewrite(plan.live)  # what the compaction took out goes to the dialog archive
            session.set_summary(plan.summary)
            session.save_meta()
        for record in plan.records:
            size = session.append_records([record])
            self.events_size = size if isinstance(record, ContextRecord) else -1
        if plan.meta is not None:
            imported = dict(session.meta.get("import") or {})
            imported.update(plan.meta)
            session.set_meta(**{"import": imported})
            session.save_meta()


def _detect(path: Path) -> SourceFormat:
    """The format of ``path``; when none fits, the error also says why it is not an OpenAI log."""
    try:
        return detect_format(path)
    except SourceError as exc:
        try:
            parse_transcript(path)
        except TranscriptError as why:
            raise SourceError(f"{exc}; read as an OpenAI-format log: {why}") from None
        return "openai"  # a JSON list/object the importer can take: it names what is wrong in it


def _import_openai(path: Path, final: Path, fmt: SourceFormat, title: str | None, settings: Settings,
                   estimator: Estimator, model_info: ModelInfo | None) -> SourceImportReport:
    if final.exists():
        final.rmdir()
    try:
        rep = import_openai_log(path, session_dir=final, title=title, settings=settings, estimator=estimator,
                                model_info=model_info)
    except TranscriptError as exc:
        raise SourceError(str(exc)) from None
    return SourceImportReport(
        format=fmt, session_id=rep.session_id, path=rep.path, source=rep.source, messages=rep.messages,
        live_messages=rep.messages, archived_messages=0, calls=rep.snapshots, reported_calls=rep.reported_calls,
        skipped=rep.skipped, model=rep.model, window=rep.window, window_source=rep.window_source,
        layout=rep.format, snapshots=rep.snapshots, notes=[f"tool definitions: {rep.tools_source}"])
