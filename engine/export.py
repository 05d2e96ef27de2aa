"""Export a session: the conversation as Markdown with per-message tokens, the provider calls as CSV
or JSON.

Reading needs no lock and writes nothing in the session folder (an open session can be exported):
:func:`read_session` takes ``session.json``, ``history.jsonl``, the dialog archive
(``dialog/*.jsonl``) and ``events.jsonl`` as they are on disk, skipping damaged lines (listed in
``problems``).

- **Markdown** (:func:`session_markdown`): a header (title, model, window, source, calls, totals, and
  the session's cost: the sum of its calls at litellm's prices with the calls that have none, and the
  agent's own cost where the source recorded one), then every message — archived by a compaction or
  still in the context — in order, each headed by its number, role, tokens and time; the first message
  a provider call produced also by that call's number and cost (``call 12 · $0.0345``; ``cost unknown``
  without a price; calls that produced no message are listed at the end); tool calls with their
  arguments, tool results in fenced blocks, reasoning in a collapsible block; each compaction where it
  happened, with its trigger, tokens before → after, summary, and what the compaction call cost (at
  litellm's prices from its figures, and the agent's own figure) where the source recorded it.
- **CSV / JSON** (:func:`call_rows`): one row per provider call (``context`` record of
  ``events.jsonl``) with the fields :data:`CALL_FIELDS` — the record's figures as written (``None``
  / empty where unknown) plus the cache figures derived by :mod:`engine.context.cache` and the call's
  dollar cost ``cost_usd`` from litellm's price table (:mod:`engine.usage.costs`; empty when the model has
  no price). The JSON document also holds the session's description, its compactions and its total cost.

:func:`export_session` writes one of them atomically (:func:`write_file`: temporary file + rename,
then the permissions of an ordinary new file of the user).
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from engine.context.cache import analyze
from engine.context.diff import folder_call_ends
from engine.context.tokens import Estimator, HeuristicEstimator, TokenCache
from engine.model.messages import Message, content_text
from engine.model.records import CompactionRecord, ContextRecord, compaction_records, context_records, records_json
from engine.model.snapshot import PROMPT_REGIONS
from engine.store import archive
from engine.store.archive import merge_archived
from engine.store.event_log import folder_records
from engine.store.fsutil import atomic_write_bytes, json_loads, read_jsonl_objects
from engine.usage.costs import (
    SessionCost,
    compaction_call_cost,
    folder_cost,
    price_table,
    record_cost,
    usd_text,
)
from engine.usage.prices import CallCost, PriceTable

ExportFormat = Literal["md", "csv", "json"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("md", "csv", "json")
SUFFIXES: dict[str, str] = {"md": ".md", "csv": ".csv", "json": ".json"}
JSON_KIND = "ctxbench-calls"
JSON_VERSION = 1

CALL_FIELDS: tuple[str, ...] = (
    "call", "ts", "model", "provider_prompt_tokens", "cache_read_tokens", "cache_write_tokens",
    "uncached_input_tokens", "cache_hit_rate", "cache_rewrite", "completion_tokens", "reasoning_tokens",
    "estimate_tokens", "raw_prompt_tokens", "accuracy", "window", "threshold_tokens", *PROMPT_REGIONS,
    "prefix_tokens", "prefix_source", "segment", "message_count", "message_id", "request_id", "cost_usd",
)
_RECORD_FIELDS = ("ts", "model", "provider_prompt_tokens", "cache_read_tokens", "cache_write_tokens",
                  "completion_tokens", "reasoning_tokens", "raw_prompt_tokens", "accuracy", "window",
                  "threshold_tokens", *PROMPT_REGIONS, "prefix_tokens", "prefix_source", "segment",
                  "message_count", "message_id", "request_id")


class ExportError(ValueError):
    """The folder is not a session, or the format is unknown; the text says which."""


@dataclass
class SessionExport:
    """What an export reads from a session folder."""

    folder: Path
    meta: dict[str, Any]
    messages: list[Message]  # archived and live, in conversation order
    live_ids: set[str]
    calls: list[ContextRecord]  # in call order
    compactions: list[CompactionRecord]
    problems: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        return str(self.meta.get("title") or self.folder.name)

    @property
    def model(self) -> str:
        return str(self.meta.get("model") or next((c.model for c in self.calls if c.model), ""))


def read_session(folder: Path) -> SessionExport:
    """Read a session folder for export (no lock, nothing written)."""
    folder = Path(folder)
    meta_path, history_path = folder / "session.json", folder / "history.jsonl"
    if not folder.is_dir() or not (meta_path.exists() or history_path.exists()):
        raise ExportError(f"{folder} is not a session folder (no session.json or history.jsonl in it)")
    problems: list[str] = []
    meta: dict[str, Any] = {}
    if meta_path.exists():
        try:
            loaded = json_loads(meta_path.read_bytes())
            meta = loaded if isinstance(loaded, dict) else {}
        except ValueError as exc:
            problems.append(f"session.json: not JSON ({exc})")
    live = [m for m in read_jsonl_objects(history_path, problems) if "role" in m] if history_path.exists() else []
    archived: list[Message] = []
    for day in archive.list_days(folder):
        try:
            archived.extend(archive.read_day(folder, day, problems))
        except archive.ArchiveError as exc:
            problems.append(str(exc))
    records = folder_records(folder, problems)
    return SessionExport(
        folder=folder, meta=meta, messages=merge_archived(live, archived), live_ids={str(m.get("id")) for m in live},
        calls=context_records(records), compactions=compaction_records(records), problems=problems)


# --------------------------------------------------------------------------- calls: CSV and JSON


def _after_compaction(data: SessionExport) -> set[int]:
    """Indexes of the calls that are the first after a compaction (by ``calls_before`` where recorded)."""
    out = set()
    for comp in data.compactions:
        n = comp.calls_before
        if n is not None and 0 < n < len(data.calls):
            out.add(n)
    return out


def call_rows(data: SessionExport) -> list[dict[str, Any]]:
    """One row per provider call with the fields :data:`CALL_FIELDS` (``None`` where unknown)."""
    lines = records_json(data.calls)  # the records as written: the fields the rows copy
    cache = analyze(lines, _after_compaction(data))
    table = price_table()
    rows = []
    for i, (rec, line, fig) in enumerate(zip(data.calls, lines, cache.calls, strict=True)):
        row: dict[str, Any] = {k: line.get(k) for k in _RECORD_FIELDS}
        row["call"] = i + 1
        row["estimate_tokens"] = rec.snapshot.prompt
        row["uncached_input_tokens"] = fig.uncached
        row["cache_hit_rate"] = None if fig.hit_rate is None else round(fig.hit_rate, 4)
        row["cache_rewrite"] = fig.rewrite
        cost = record_cost(line, table).usd
        row["cost_usd"] = None if cost is None else round(cost, 8)
        rows.append({k: row[k] for k in CALL_FIELDS})
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def calls_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows as CSV with a header line of :data:`CALL_FIELDS` (empty cells where unknown)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CALL_FIELDS)
    for row in rows:
        writer.writerow([_cell(row.get(k)) for k in CALL_FIELDS])
    return buf.getvalue()


def calls_json(data: SessionExport, rows: Sequence[Mapping[str, Any]] | None = None) -> str:
    """A JSON document: the session's description, the fields, one object per call, the compactions."""
    rows = call_rows(data) if rows is None else rows
    found = data.meta.get("import")
    imported: dict[str, Any] = found if isinstance(found, dict) else {}
    doc = {
        "kind": JSON_KIND, "version": JSON_VERSION,
        "session": {"id": data.folder.name, "title": data.title, "model": data.model,
                    "source_format": imported.get("format"), "source": imported.get("source"),
                    "messages": len(data.messages), "calls": len(rows), "compactions": len(data.compactions)},
        "fields": list(CALL_FIELDS),
        "calls": [dict(r) for r in rows],
        "compactions": [{k: v for k, v in c.to_json().items() if k != "type"} for c in data.compactions],
        # the session's cost (main + subagents + compaction calls, each part; the agent's own beside it)
        "cost": folder_cost(data.folder, records=rows).to_json(),
    }
    return json.dumps(doc, ensure_ascii=False, indent=1) + "\n"


# --------------------------------------------------------------------------- Markdown


def _fence(text: str, lang: str = "") -> str:
    """A fenced block longer than any run of backticks in ``text``."""
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text.rstrip(chr(10))}\n{fence}"


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.strip().splitlines())


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "—"


def _usd(value: float) -> str:
    return f"${value:,.4f}"


def _cost_fact(cost: SessionCost) -> str:
    """The session's cost at litellm's prices and its parts, for the header."""
    total = cost.total
    if total.usd is None:
        return f"unknown for its {total.calls:,} calls ({total.problem or 'no price'})"
    text = f"{usd_text(total.usd)} for {total.calls:,} calls at litellm's prices ({cost.breakdown()})"
    if total.unpriced:
        text += f" (+ {total.unpriced:,} calls without a price: {total.problem or 'no price'})"
    return text


def _header(data: SessionExport, counts: Sequence[int], total: SessionCost | None = None) -> list[str]:
    reported = [c for c in data.calls if c.provider_prompt_tokens is not None]
    found = data.meta.get("import")
    imported: dict[str, Any] = found if isinstance(found, dict) else {}
    window = next((c.snapshot.window for c in reversed(data.calls) if c.snapshot.window), None)
    lines = [f"# {data.title}", ""]
    facts = [("Model", data.model or "—"), ("Window", _n(window)),
             ("Messages", f"{len(data.messages):,} ({len(data.live_ids):,} in the context, "
                          f"{len(data.messages) - len(data.live_ids):,} archived by compaction)"),
             ("Message tokens", f"{sum(counts):,} (estimated)"),
             ("Provider calls", f"{len(data.calls):,} ({len(reported):,} with the provider's prompt tokens)"),
             ("Compactions", f"{len(data.compactions):,}")]
    if imported.get("format"):
        facts.insert(1, ("Imported from", f"{imported.get('format')}: `{imported.get('source', '')}`"))
    if reported:
        last = reported[-1]
        facts.append(("Last prompt (provider)", f"{last.provider_prompt_tokens:,} tokens"))
    if total is not None and total.total.calls:
        facts.append(("Cost", _cost_fact(total)))
    if total is not None and total.agent_usd is not None:
        facts.append(("The agent's own cost", usd_text(total.agent_usd)))
    lines += [f"- **{k}:** {v}" for k, v in facts]
    return lines


def _call_md(number: int, cost: CallCost) -> str:
    return f"call {number} · " + ("cost unknown" if cost.usd is None else _usd(cost.usd))


def _message_md(n: int, msg: Message, tokens: int, live: bool, calls: Sequence[str] = ()) -> list[str]:
    role = str(msg.get("role") or "?")
    name = f" `{msg['name']}`" if role == "tool" and msg.get("name") else ""
    where = "" if live else " · archived"
    ts = str(msg.get("ts") or "")
    lines = ["", f"### {n}. {role}{name} · {tokens:,} tokens{where}" + (f" · {ts}" if ts else "")
             + "".join(f" · {c}" for c in calls), ""]
    reasoning = msg.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning.strip():
        lines += ["<details><summary>Reasoning</summary>", "", _quote(reasoning), "", "</details>", ""]
    text = content_text(msg.get("content"))
    if text.strip():
        lines.append(_fence(text) if role == "tool" else text.strip())
    for call in msg.get("tool_calls") or []:
        fn = call.get("function") or {} if isinstance(call, dict) else {}
        lines += ["", f"**Tool call** `{fn.get('name', '?')}` (`{call.get('id', '')}`)", "",
                  _fence(str(fn.get("arguments") or ""), "json")]
    offload = msg.get("offload")
    if isinstance(offload, dict) and offload.get("path"):
        lines += ["", f"*Full output: `{offload['path']}` ({_n(offload.get('bytes'))} bytes)*"]
    return lines


def _compaction_md(comp: CompactionRecord, table: PriceTable | None = None) -> list[str]:
    change = comp.change()  # the before → after every view shows (engine.model.compaction_change)
    lines = ["", "---", "", f"## Compaction ({comp.trigger or '?'}) · {change.text()} · "
             f"{_n(comp.messages_compacted)} messages archived" + (f" · {comp.ts}" if comp.ts else ""), ""]
    if change.grows:
        lines += [f"*⚠ {change.warning()}.*", ""]
    summary = comp.summary.strip()
    if summary:
        lines += ["<details><summary>Summary</summary>", "", _quote(summary), "", "</details>"]
    call, agent_usd = comp.call, comp.cost_usd
    if call is not None and call.prompt_tokens is not None:
        priced = compaction_call_cost(comp, table)
        placeholder = call.completion_tokens is None and call.completion_placeholder is not None
        out = (f"unknown (the file holds only a streaming placeholder, {call.completion_placeholder})"
               if placeholder else f"{_n(call.completion_tokens)}")
        usd = "" if priced is None or priced.usd is None else \
            f" · {_usd(priced.usd)}{'+ (without the output)' if placeholder else ''} at litellm's prices"
        lines += ["", f"*The compaction call: {_n(call.prompt_tokens)} prompt + {out} completion tokens"
                      f"{usd}.*"]
    if agent_usd is not None:
        lines += ["", f"*What compacting cost, by the agent's own figure: {_usd(agent_usd)}.*"]
    return [*lines, "", "---"]


def message_tokens(data: SessionExport, estimator: Estimator | None = None,
                   known: Mapping[str, int] | None = None) -> list[int]:
    """Tokens of every message: ``known`` (by id, as the app shows them) where given, else estimated."""
    cache = TokenCache(estimator or HeuristicEstimator())
    known = known or {}
    return [int(known[str(m.get("id"))]) if str(m.get("id")) in known else cache.count(m) for m in data.messages]


def session_markdown(data: SessionExport, estimator: Estimator | None = None,
                     known: Mapping[str, int] | None = None) -> str:
    """The session as Markdown: every message with its tokens, the cost of the call that produced it,
    compactions where they happened."""
    counts = message_tokens(data, estimator, known)
    table = price_table()
    lines_of_calls = records_json(data.calls)
    costs = [record_cost(rec, table) for rec in lines_of_calls]
    total = folder_cost(data.folder, table,
                        records=[{"cost_usd": c.usd, "cost_problem": c.problem} for c in costs])
    by_message: dict[int, list[str]] = {}  # the first message each call produced -> its calls
    ends = folder_call_ends(data.messages, data.calls)
    for number, (end, cost) in enumerate(zip(ends, costs, strict=True), 1):
        by_message.setdefault(end, []).append(_call_md(number, cost))
    lines = _header(data, counts, total)
    pending = sorted(data.compactions, key=lambda c: c.ts)
    for i, (msg, tokens) in enumerate(zip(data.messages, counts, strict=True), start=1):
        ts = str(msg.get("ts") or "")
        live = str(msg.get("id")) in data.live_ids
        # a compaction goes before the first message after it; at the same time, before a live one
        # (what the compaction put in place has its time), after an archived one
        while pending and ts and (cts := pending[0].ts) and (cts < ts or (cts == ts and live)):
            lines += _compaction_md(pending.pop(0), table)
        lines += _message_md(i, msg, tokens, live, by_message.get(i - 1, ()))
    for comp in pending:
        lines += _compaction_md(comp, table)
    if after := by_message.get(len(data.messages)):
        lines += ["", "### Calls after the last message", "", *(f"- {c}" for c in after)]
    return "\n".join(lines).rstrip("\n") + "\n"


# --------------------------------------------------------------------------- writing


def render(data: SessionExport, fmt: str, estimator: Estimator | None = None,
           known: Mapping[str, int] | None = None) -> str:
    if fmt == "md":
        return session_markdown(data, estimator, known)
    if fmt == "csv":
        return calls_csv(call_rows(data))
    if fmt == "json":
        return calls_json(data)
    raise ExportError(f"unknown export format {fmt!r} (expected one of {', '.join(EXPORT_FORMATS)})")


def default_path(folder: Path, fmt: str, directory: Path | None = None) -> Path:
    """``<session id>.md`` / ``<session id>-calls.csv`` / ``<session id>-calls.json``."""
    stem = Path(folder).name + ("" if fmt == "md" else "-calls")
    return (directory or Path.cwd()) / f"{stem}{SUFFIXES.get(fmt, '.' + fmt)}"


def _umask() -> int:
    """The process umask, read without changing it (Linux ``/proc``); 0o077 where it cannot be read."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o077


def write_file(out: Path, data: bytes) -> Path:
    """Write an exported file atomically, with the permissions a new file of the user gets (the
    session's own files stay private: the temporary file of an atomic write is 0600)."""
    out = Path(out)
    atomic_write_bytes(out, data)
    try:
        os.chmod(out, 0o666 & ~_umask())
    except OSError:
        pass
    return out


def export_session(folder: Path, fmt: str, out: Path, *, estimator: Estimator | None = None,
                   known: Mapping[str, int] | None = None) -> Path:
    """Write the session at ``folder`` as ``fmt`` to ``out`` (atomically); return ``out``."""
    if fmt not in EXPORT_FORMATS:
        raise ExportError(f"unknown export format {fmt!r} (expected one of {', '.join(EXPORT_FORMATS)})")
    text = render(read_session(folder), fmt, estimator, known)
    return write_file(out, text.encode("utf-8"))
