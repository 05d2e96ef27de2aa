"""Read an OpenAI-format transcript into a session, to inspect any agent's context without a model.

:func:`engine.importer.import_transcript` is the entry point (it sends other agents' files to
:mod:`engine.ingest`); this module is the OpenAI-format reader it and :mod:`engine.ingest` use.

Accepted input: a JSON list of messages, JSONL (one message per line), or a JSON object with a
``messages`` list (mini-swe-agent's ``.traj.json``, whose ``info`` names the model).

- The leading ``system`` (or ``developer``) messages become the session's system prompt
  (``meta["system_prompt"]``); the history keeps ``user``, ``assistant`` and ``tool`` messages with
  their OpenAI fields (``content``, ``tool_calls``, ``tool_call_id``, ``name``,
  ``reasoning_content``). Legacy ``function_call`` / role ``function`` pairs become tool calls.
- Other roles (mini-swe-agent ends with role ``exit``) and later system messages are skipped,
  reported, and kept word for word in ``import_skipped.jsonl`` in the session folder. Extra fields
  (``extra``, ``provider_specific_fields``, ``index`` inside tool calls …) are dropped and counted.
- Where an assistant message carries the provider's usage (``extra.response.usage`` or ``usage``),
  it is kept on the message and its ``prompt_tokens`` is recorded as that call's actual prompt
  size: one ContextSnapshot per assistant message (= one LLM call) goes to events.jsonl, estimated
  as the live app would (calibrated by the previous call's ratio), so the timeline shows estimate
  against reality for the whole run.
- Tool definitions come from the log when it has them, else they are reconstructed from the calls
  seen (names, argument keys and JSON types), and ``meta["tools_source"]`` says which.
- Malformed input raises :class:`TranscriptError` naming the line or index; the session is built in
  a temporary folder and renamed into place at the end, so nothing partial is ever left behind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.context.calibration import Calibrator
from engine.context.conversation import Session, SessionStore
from engine.context.snapshots import build_snapshot
from engine.context.tokens import Estimator, HeuristicEstimator, TokenCache
from engine.context.window import import_window
from engine.model.messages import Message, MessageError, new_id, now_iso
from engine.model.records import ContextRecord
from engine.model.snapshot import WindowInfo
from engine.sources.model import SourceError, read_regular
from engine.store.config import Settings
from engine.store.fsutil import append_lines, fsync_dir
from engine.store.session_load import check_message
from engine.store.staging import staging_folder

SKIPPED_FILE = "import_skipped.jsonl"
KEPT_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content")
USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


class TranscriptError(ValueError):
    """Input that is not an OpenAI-format transcript; the text names the line or index."""


@dataclass
class ImportReport:
    session_id: str
    path: Path
    source: Path
    format: str  # "json-list" | "json-object" | "jsonl"
    messages: int
    system_prompt: bool
    skipped: list[str] = field(default_factory=list)
    dropped_fields: dict[str, int] = field(default_factory=dict)
    snapshots: int = 0
    reported_calls: int = 0  # snapshots with the provider's prompt_tokens
    tools_source: str = "none"  # "log" | "reconstructed" | "none"
    model: str = ""
    window: int = 0
    window_source: str = ""

    def describe(self) -> str:
        lines = [
            f"Imported {self.messages} messages from {self.source.name} ({self.format}) "
            f"as session {self.session_id}.",
            f"{self.snapshots} LLM calls recorded, {self.reported_calls} with the provider's prompt tokens.",
        ]
        if self.system_prompt:
            lines.append("The leading system message became the session's system prompt.")
        if self.skipped:
            lines.append(f"Skipped {len(self.skipped)}: " + "; ".join(self.skipped[:5]))
        if self.dropped_fields:
            lines.append(
                "Fields not kept: " + ", ".join(f"{k} ({v}×)" for k, v in sorted(self.dropped_fields.items()))
            )
        lines.append(f"Tool definitions: {self.tools_source}.")
        return "\n".join(lines)


# --------------------------------------------------------------------------- parsing


def parse_transcript(path: Path) -> tuple[list[Any], dict[str, Any], str, Callable[[int], str]]:
    """(raw items, container object, format, where(i) naming item i) — or TranscriptError."""
    path = Path(path)
    try:
        data = read_regular(path)  # a regular file only: a FIFO or a device is refused, never read
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read: {exc}") from exc
    except SourceError as exc:
        raise TranscriptError(str(exc)) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise TranscriptError(
            f"{path.name}: line {line}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from exc
    if not text.strip():
        raise TranscriptError(f"{path.name}: the file is empty")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        if _looks_like_jsonl(text, exc):
            return _parse_jsonl(path, text)
        raise TranscriptError(
            f"{path.name}: line {exc.lineno}, column {exc.colno}: not valid JSON ({exc.msg})"
        ) from exc
    except RecursionError:
        if len(text.strip().splitlines()) > 1:
            return _parse_jsonl(path, text)  # names the line that is nested too deeply
        raise TranscriptError(f"{path.name}: not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise TranscriptError(f"{path.name}: not valid JSON ({exc})") from None
    if isinstance(obj, list):
        return obj, {}, "json-list", lambda i: f"message index {i}"
    if isinstance(obj, dict):
        msgs = obj.get("messages")
        if isinstance(msgs, list):
            return msgs, obj, "json-object", lambda i: f"messages[{i}]"
        if "role" in obj:
            return [obj], {}, "jsonl", lambda i: f"line {i + 1}"
        raise TranscriptError(f"{path.name}: a JSON object without a 'messages' list")
    raise TranscriptError(
        f"{path.name}: expected a list of messages or an object with 'messages', got {type(obj).__name__}"
    )


def _looks_like_jsonl(text: str, exc: json.JSONDecodeError) -> bool:
    if exc.msg.startswith("Extra data"):
        return True
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    try:
        return isinstance(json.loads(first), dict) and len(text.strip().splitlines()) > 1
    except (ValueError, RecursionError):
        return False


def _parse_jsonl(path: Path, text: str) -> tuple[list[Any], dict[str, Any], str, Callable[[int], str]]:
    items: list[Any] = []
    line_of: list[int] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise TranscriptError(
                f"{path.name}: line {n}: not valid JSON ({exc.msg}, column {exc.colno})"
            ) from exc
        except RecursionError:
            raise TranscriptError(f"{path.name}: line {n}: not valid JSON (nested too deeply)") from None
        except ValueError as exc:  # e.g. an integer of more than 4,300 digits
            raise TranscriptError(f"{path.name}: line {n}: not valid JSON ({exc})") from None
        line_of.append(n)
    return items, {}, "jsonl", lambda i: f"line {line_of[i]}"


# --------------------------------------------------------------------------- conversion


def _epoch_iso(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and 0 < value < 1e11:
        return datetime.fromtimestamp(float(value), UTC).isoformat(timespec="milliseconds")
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.astimezone(UTC).isoformat(timespec="milliseconds")
    return None


def _timestamp(raw: dict[str, Any]) -> str | None:
    for key in ("ts", "timestamp", "created_at", "created"):
        if key in raw and (ts := _epoch_iso(raw[key])):
            return ts
    extra = raw.get("extra")
    if isinstance(extra, dict):
        if ts := _epoch_iso(extra.get("timestamp")):
            return ts
        resp = extra.get("response")
        if isinstance(resp, dict) and (ts := _epoch_iso(resp.get("created"))):
            return ts
    return None


def _usage(raw: dict[str, Any]) -> dict[str, int] | None:
    candidates = [raw.get("usage")]
    extra = raw.get("extra")
    if isinstance(extra, dict):
        resp = extra.get("response")
        if isinstance(resp, dict):
            candidates.insert(0, resp.get("usage"))
    for usage in candidates:
        prompt = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if isinstance(usage, dict) and type(prompt) is int and prompt > 0:
            return {k: usage[k] for k in USAGE_KEYS if isinstance(usage.get(k), int)}
    return None


@dataclass
class _Converted:
    system_parts: list[str] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    skipped_raw: list[dict[str, Any]] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)


def _drop(conv: _Converted, key: str) -> None:
    conv.dropped[key] = conv.dropped.get(key, 0) + 1


def _tool_calls(raw_calls: Any, where: str, conv: _Converted) -> list[dict[str, Any]]:
    if not isinstance(raw_calls, list):
        raise TranscriptError(f"{where}: 'tool_calls' must be a list")
    calls = []
    for j, call in enumerate(raw_calls):
        if not isinstance(call, dict):
            raise TranscriptError(f"{where}: tool call {j} must be an object")
        fn = call.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise TranscriptError(f"{where}: tool call {j} has no function name")
        args = fn.get("arguments")
        if isinstance(args, dict | list):
            args = json.dumps(args, ensure_ascii=False)
            _drop(conv, "tool_calls[].function.arguments (object → JSON string)")
        elif args is None:
            args = ""
        elif not isinstance(args, str):
            raise TranscriptError(f"{where}: tool call {j} arguments must be a string or an object")
        for key in call:
            if key not in ("id", "type", "function"):
                _drop(conv, f"tool_calls[].{key}")
        cid = call.get("id")
        calls.append(
            {
                "id": str(cid) if cid is not None else "",
                "type": str(call.get("type") or "function"),
                "function": {"name": fn["name"], "arguments": args},
            }
        )
    return calls


def convert_messages(items: Sequence[Any], where: Callable[[int], str]) -> _Converted:
    """Turn raw transcript items into history messages; TranscriptError names the first bad item."""
    conv = _Converted()
    legacy: list[str] = []  # ids given to legacy function_call messages awaiting their result
    for i, raw in enumerate(items):
        here = where(i)
        if not isinstance(raw, dict):
            raise TranscriptError(f"{here}: expected a JSON object, got {type(raw).__name__}")
        role = raw.get("role")
        if not isinstance(role, str) or not role:
            raise TranscriptError(f"{here}: the message has no role")
        if role in ("system", "developer"):
            if not conv.messages:
                text = raw.get("content")
                if isinstance(text, list):
                    text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
                if text is not None and not isinstance(text, str):
                    raise TranscriptError(f"{here}: system 'content' must be text")
                conv.system_parts.append(text or "")
                continue
            conv.skipped.append(f"{here}: a {role} message after the conversation started")
            conv.skipped_raw.append({"where": here, "reason": "late system message", "message": raw})
            continue
        if role == "function":
            role = "tool"
            raw = {**raw, "role": "tool", "tool_call_id": legacy.pop(0) if legacy else ""}
        if role not in ("user", "assistant", "tool"):
            conv.skipped.append(f"{here}: role {role!r} is not part of a chat history")
            conv.skipped_raw.append({"where": here, "reason": f"role {role!r}", "message": raw})
            continue
        msg: Message = {"role": role, "content": raw.get("content")}
        content = msg["content"]
        if content is not None and not isinstance(content, str | list):
            raise TranscriptError(f"{here}: 'content' must be a string, a list of parts or null")
        if raw.get("tool_calls"):
            msg["tool_calls"] = _tool_calls(raw["tool_calls"], here, conv)
        fc = raw.get("function_call")
        if role == "assistant" and isinstance(fc, dict) and not msg.get("tool_calls"):
            cid = f"call_legacy_{i}"
            legacy.append(cid)
            msg["tool_calls"] = _tool_calls([{"id": cid, "function": fc}], here, conv)
            _drop(conv, "function_call (→ tool_calls)")
        for key in ("tool_call_id", "name", "reasoning_content"):
            value = raw.get(key)
            if value is not None:
                if not isinstance(value, str):
                    raise TranscriptError(f"{here}: {key!r} must be a string")
                msg[key] = value
        if role == "tool" and "tool_call_id" not in msg:
            msg["tool_call_id"] = ""
        for key, value in raw.items():
            legacy_done = key == "function_call" and (value is None or role == "assistant")
            if key in KEPT_KEYS or key == "usage" or legacy_done:
                continue  # kept, or a null/converted legacy field: nothing is lost
            _drop(conv, key)
        if role == "assistant" and (usage := _usage(raw)):
            msg["usage"] = usage
        ts = _timestamp(raw)
        if ts:
            msg["ts"] = ts
        msg["id"] = new_id()
        try:
            check_message(msg, here)
        except MessageError as exc:
            raise TranscriptError(str(exc)) from exc
        conv.messages.append(msg)
    _fill_timestamps(conv.messages)
    return conv


def _fill_timestamps(messages: list[Message]) -> None:
    """Messages without a time take the previous message's, or the next known one's, or now."""
    known = [m.get("ts") for m in messages]
    nxt: str | None = None
    following: list[str | None] = [None] * len(messages)
    for i in range(len(messages) - 1, -1, -1):
        following[i] = nxt
        if known[i]:
            nxt = known[i]
    prev: str | None = None
    now = now_iso()
    for i, m in enumerate(messages):
        if not m.get("ts"):
            m["ts"] = prev or following[i] or now
        prev = m["ts"]


_JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number", list: "array", dict: "object"}


def reconstruct_tools(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """OpenAI tool specs inferred from the calls seen: names, argument keys and their JSON types."""
    seen: dict[str, dict[str, Any]] = {}
    for m in messages:
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            name = str(fn.get("name") or "")
            if not name:
                continue
            info = seen.setdefault(name, {"props": {}, "required": None, "calls": 0})
            info["calls"] += 1
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except (ValueError, RecursionError):
                args = None
            keys = set(args) if isinstance(args, dict) else set()
            if isinstance(args, dict):
                for k, v in args.items():
                    info["props"].setdefault(k, {"type": _JSON_TYPES.get(type(v), "string")})
            info["required"] = keys if info["required"] is None else info["required"] & keys
    tools = []
    for name, info in seen.items():
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": "",
                    "parameters": {
                        "type": "object",
                        "properties": info["props"],
                        "required": sorted(info["required"] or ()),
                    },
                },
            }
        )
    return tools


def _model_name(container: dict[str, Any]) -> str:
    if isinstance(container.get("model"), str):
        return str(container["model"])
    info = container.get("info")
    if isinstance(info, dict):
        cfg = info.get("config")
        if isinstance(cfg, dict) and isinstance(cfg.get("model"), dict):
            name = cfg["model"].get("model_name")
            if isinstance(name, str):
                return name
    return ""


def _log_tools(container: dict[str, Any]) -> list[dict[str, Any]] | None:
    for holder in (container, container.get("info") if isinstance(container.get("info"), dict) else {}):
        tools = holder.get("tools") if isinstance(holder, dict) else None
        if isinstance(tools, list) and tools and all(isinstance(t, dict) for t in tools):
            return tools
    return None


# --------------------------------------------------------------------------- import


@dataclass
class _Log:
    """An OpenAI-format log read and converted, with what the session will be made of."""

    path: Path
    fmt: str
    conv: _Converted
    container: dict[str, Any]
    model: str
    tools: list[dict[str, Any]]
    tools_source: str
    system_prompt: str


def read_log(path: Path) -> _Log:
    """Parse and convert ``path``; TranscriptError when it holds no message to import."""
    items, container, fmt, where = parse_transcript(path)
    conv = convert_messages(items, where)
    if not conv.messages:
        raise TranscriptError(f"{path.name}: no user, assistant or tool message to import")
    tools = _log_tools(container)
    tools_source = "log" if tools else "none"
    if tools is None:
        tools = reconstruct_tools(conv.messages)
        tools_source = "reconstructed" if tools else "none"
    system_prompt = "\n\n".join(p for p in conv.system_parts if p)
    return _Log(path, fmt, conv, container, _model_name(container), tools, tools_source, system_prompt)


def _log_meta(log: _Log, final: Path, title: str | None, win: WindowInfo) -> dict[str, Any]:
    label = str(log.container.get("instance_id") or log.path.name.removesuffix(".json").removesuffix(".traj"))
    return {
        "id": final.name,
        "title": title or f"{label} (imported)",
        "model": log.model,
        "system_prompt": log.system_prompt,
        "tools": log.tools,
        "tools_source": log.tools_source,
        "import": {
            "source": str(log.path),
            "format": log.fmt,
            "imported": now_iso(),
            "skipped": len(log.conv.skipped),
            "dropped_fields": log.conv.dropped,
            "window": win.context_window,
            "window_source": win.source,
        },
    }


def import_openai_log(
    path: Path,
    *,
    store: SessionStore | None = None,
    session_dir: Path | None = None,
    title: str | None = None,
    settings: Settings | None = None,
    window: WindowInfo | int | None = None,
    model_info: Callable[[str], dict[str, Any] | None] | None = None,
    estimator: Estimator | None = None,
) -> ImportReport:
    """Import the OpenAI-format log ``path`` as a new session (in ``store``, or at ``session_dir``)."""
    path = Path(path)
    settings = settings or Settings()
    estimator = estimator or HeuristicEstimator()
    log = read_log(path)
    if session_dir is not None:
        final = Path(session_dir)
        parent = final.parent
    else:
        store = store or SessionStore()
        final = store.path_for(store.new_id())
        parent = store.root
    if final.exists():
        raise TranscriptError(f"cannot import into {final}: it already exists")
    parent.mkdir(parents=True, exist_ok=True)
    max_prompt = max((m["usage"]["prompt_tokens"] for m in log.conv.messages if m.get("usage")), default=0)
    win = import_window(settings, window, log.model, model_info, max_prompt)
    meta = _log_meta(log, final, title, win)
    snaps, reported = _write_session(log, meta, parent, final, settings, estimator, win)
    return ImportReport(
        session_id=final.name,
        path=final,
        source=path,
        format=log.fmt,
        messages=len(log.conv.messages),
        system_prompt=bool(log.system_prompt),
        skipped=log.conv.skipped,
        dropped_fields=log.conv.dropped,
        snapshots=snaps,
        reported_calls=reported,
        tools_source=log.tools_source,
        model=log.model,
        window=win.context_window,
        window_source=win.source,
    )


def _write_session(
    log: _Log, meta: dict[str, Any], parent: Path, final: Path, settings: Settings, estimator: Estimator,
    win: WindowInfo,
) -> tuple[int, int]:
    """Build the session in a temporary folder, then rename it into place: (snapshots, reported calls)."""
    with staging_folder(parent) as tmp:  # held while built; one an interrupted import left is removed
        session = Session.create(tmp, meta["title"], estimator=estimator, meta=meta)
        session.extend(log.conv.messages)
        if log.conv.skipped_raw:
            append_lines(tmp / SKIPPED_FILE, log.conv.skipped_raw)
        snaps, reported, calibrator = _call_snapshots(
            session, settings, estimator, win, log.system_prompt, log.tools, log.model
        )
        session.calibrator = calibrator
        if snaps:
            session.append_records(snaps)
        session.save_meta()
        session.close()
        os.rename(tmp, final)
        fsync_dir(parent)
    return len(snaps), reported


def _call_snapshots(
    session: Session,
    settings: Settings,
    estimator: Estimator,
    win: WindowInfo,
    system_prompt: str,
    tools: list[dict[str, Any]],
    model: str,
) -> tuple[list[ContextRecord], int, Calibrator]:
    """One snapshot per assistant message: the request that produced it (everything before it)."""
    cache = TokenCache(estimator)
    history = session.messages
    counts = [cache.count(m) for m in history]
    system_tokens = estimator.text(system_prompt) if system_prompt else 0
    tools_tokens = estimator.tools(tools)
    calibrator = Calibrator()
    out: list[ContextRecord] = []
    reported = 0
    call = 0
    for j, msg in enumerate(history):
        if msg.get("role") != "assistant":
            continue
        actual = (msg.get("usage") or {}).get("prompt_tokens")
        snap = build_snapshot(
            window=win,
            system_tokens=system_tokens,
            summary_tokens=0,
            tools_tokens=tools_tokens,
            history=history[:j],
            history_counts=counts[:j],
            estimator_name=estimator.name,
            threshold_ratio=settings.compact_threshold_ratio,
            calibrator=calibrator,
            provider_prompt_tokens=actual,
            model=model,
            ts=str(msg.get("ts") or ""),
            call_index=call,
        )
        record = ContextRecord.from_snapshot(snap, message_count=j)
        out.append(replace(record, message_id=None if msg.get("id") is None else str(msg.get("id"))))
        call += 1
        if isinstance(actual, int):
            reported += 1
            ids = [str(m.get("id")) for m in history[:j]]
            calibrator.record(snap.raw_prompt_tokens, actual, ids, (system_tokens, 0, tools_tokens))
    return out, reported, calibrator
