"""Which agent wrote a session file: looked up from its first lines (JSONL) or its top level (JSON)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from engine.sources.atif import is_atif_document
from engine.sources.capture import is_capture_line
from engine.sources.cline import is_cline_document, is_cline_meta
from engine.sources.copilot import is_copilot_line
from engine.sources.kilo import is_kilo_source
from engine.sources.model import (
    FORMATS,
    SourceError,
    SourceFormat,
    _decode,
    dict_at,
    head_regular,
    not_regular,
    read_regular,
)
from engine.sources.opencode import is_opencode_source, split_path
from engine.sources.pi import is_pi_line
from engine.sources.qwen_code import is_qwen_line

HEAD_BYTES = 1 << 20  # enough for the first lines of any of these formats
CLAUDE_TYPES = frozenset({"user", "assistant", "system", "summary", "file-history-snapshot", "progress",
                          "queue-operation", "attachment", "api-request-shape", "api-request", "api-request-blob",
                          "cost-state", "last-prompt", "tools-used", "atis-latch", "mode"})
CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
GEMINI_TYPES = frozenset({"user", "gemini", "info", "error", "warning"})


def parse_format(name: str) -> SourceFormat:
    """A ``--format`` value; SourceError naming the formats that exist."""
    key = name.strip().lower().replace("_", "-")
    aliases = {"claude": "claude-code", "swe": "swe-agent", "sweagent": "swe-agent", "mini": "mini-swe-agent",
               "minisweagent": "mini-swe-agent", "open-hands": "openhands",
               "copilot": "copilot-cli", "harbor": "atif"}
    key = aliases.get(key, key)
    if key not in FORMATS:
        raise SourceError(f"unknown format {name!r} (formats: {', '.join(FORMATS)})")
    return key


def _jsonl_kind(obj: dict[str, Any]) -> SourceFormat | None:
    kind = obj.get("type")
    if not isinstance(kind, str):
        kind = None  # ``"type": []`` and the like: no type (never hashed)
    if kind in ("capture", "exchange") and is_capture_line(obj):  # the recording proxy's (engine.capture)
        return "proxy-capture"
    if kind in CODEX_TYPES and "payload" in obj:
        return "codex"
    if is_qwen_line(obj):  # Claude-Code-like keys, Gemini-shaped parts: before Claude Code's test
        return "qwen-code"
    if kind in CLAUDE_TYPES and ("uuid" in obj or "sessionId" in obj or "messageId" in obj or "leafUuid" in obj):
        return "claude-code"
    if _is_gemini_cli(obj):
        return "gemini-cli"
    if is_pi_line(obj):
        return "pi"
    if is_copilot_line(obj):
        return "copilot-cli"
    if isinstance(obj.get("role"), str):
        return "openai"
    return None


def _is_gemini_cli(obj: dict[str, Any]) -> bool:
    """A Gemini CLI session line: its header (``sessionId`` + ``projectHash``), a ``$set`` or ``$rewindTo``
    patch, or a message record (``id``, ``timestamp`` and a ``type`` of Gemini CLI's)."""
    if isinstance(obj.get("sessionId"), str) and isinstance(obj.get("projectHash"), str):
        return True
    if isinstance(obj.get("$set"), dict) or isinstance(obj.get("$rewindTo"), str):
        return True
    kind = obj.get("type")
    return isinstance(kind, str) and kind in GEMINI_TYPES and isinstance(obj.get("id"), str) and "timestamp" in obj


def _json_kind(obj: Any) -> SourceFormat | None:
    if is_atif_document(obj):  # its schema_version says so ("ATIF-v1.x"): read, or refused with the reason
        return "atif"
    if is_cline_document(obj) or is_cline_meta(obj):  # before the generic ``messages`` list below
        return "cline"
    if isinstance(obj, dict):
        history = obj.get("history")
        if isinstance(history, list) and (
            "trajectory" in obj or "info" in obj or "environment" in obj
            or any(isinstance(h, dict) and "agent" in h for h in history[:5])
        ):
            return "swe-agent"
        if isinstance(obj.get("messages"), list):
            info = dict_at(obj, "info")
            fmt = str(obj.get("trajectory_format") or "")
            if fmt.startswith("mini-swe-agent") or (isinstance(info.get("config"), dict) and "agent" in info["config"]):
                return "mini-swe-agent"
            return "openai"
        if isinstance(obj.get("events"), list):
            obj = obj["events"]
        elif isinstance(obj.get("role"), str):
            return "openai"
    if isinstance(obj, list):
        items = [e for e in obj[:20] if isinstance(e, dict)]
        if items and any(("action" in e or "observation" in e) and ("source" in e or "id" in e) for e in items):
            return "openhands"
        if items and all(isinstance(e.get("role"), str) for e in items):
            return "openai"
    return None


def detect_format(path: Path) -> SourceFormat:
    """The format of ``path``; SourceError naming every format tried when none fits."""
    path = Path(path)
    tried = ", ".join(FORMATS)
    _regular_or_raise(path)  # a FIFO or a device is never opened (an open of a FIFO would wait for a writer)
    if is_kilo_source(path):  # OpenCode's schema in Kilo's database (``kilo.db`` or ``kilo.db#ses_…``)
        return "kilo"
    if is_opencode_source(path):  # an SQLite database (``opencode.db`` or ``opencode.db#ses_…``)
        return "opencode"
    try:
        head = head_regular(path, HEAD_BYTES)
        whole = len(head) < HEAD_BYTES
    except OSError as exc:
        raise SourceError(f"{path}: cannot read: {exc.strerror or exc}") from None
    text = head.lstrip(b"\xef\xbb\xbf").lstrip()
    if not text:
        raise SourceError(f"{path.name}: the file is empty (tried {tried})")
    if text[:1] in (b"[", b"{"):
        if whole or text[:1] == b"[" or path.suffix in (".json", ".traj"):
            try:
                kind = _json_kind(_loads(head if whole else read_regular(path)))
            except (ValueError, RecursionError, OSError):
                kind = None
            if kind is not None:
                return kind
        for raw in text.splitlines()[:50]:
            try:
                obj = _loads(raw)
            except (ValueError, RecursionError):
                continue
            if isinstance(obj, dict) and (kind := _jsonl_kind(obj)) is not None:
                return kind
    raise SourceError(
        f"{path.name}: not a session file of any known format (tried {tried}): "
        "no Claude Code or Codex line, OpenHands event, SWE-agent history, ATIF schema_version or chat message found"
    )


def _loads(data: bytes) -> Any:
    """JSON as the readers take it (a raw control character inside a string read as it is); ValueError or
    RecursionError when it is none."""
    return _decode(data.decode("utf-8-sig"))


def _regular_or_raise(path: Path) -> None:
    """SourceError when ``path`` (an OpenCode ``<db>#<session>``: its database) is there but no regular file."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        try:
            mode = os.stat(split_path(path)[0]).st_mode
        except OSError:
            return  # missing: said by whoever opens it
    kind = not_regular(mode)
    if kind is not None:
        raise SourceError(f"{path.name}: not a regular file ({kind}): not read")
