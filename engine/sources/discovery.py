"""The agent sessions on this machine, for ``ctxbench sources``.

Where each agent keeps them:

- Claude Code: ``~/.claude/projects/<project>/<session>.jsonl``, ``~/.config/claude/projects/``, and
  the ``projects`` folder of every folder named in ``$CLAUDE_CONFIG_DIR`` (comma-separated);
- Codex: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`` (``~/.codex/sessions`` by default);
- any folder named in the ``source_dirs`` setting (``os.pathsep``-separated), searched for both.

Each file is summarised by a light pass (only the lines that carry usage are parsed): started,
last activity, provider calls, last prompt tokens, window and how full it is, and — for Claude Code
files that have ``cost-state`` lines (2.1.3xx) — the agent's own cost in USD (the last line's
``totalCostUSD``). The summaries are
kept in ``sources-index.json`` in the data dir with each file's size and mtime, so a second scan
re-reads only the files that changed. Files are only read, never locked or moved.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from engine.sources.claude_code import SYNTHETIC_MODEL, window_for_model
from engine.sources.model import dict_at, int_or_none, iso
from engine.store.config import Settings, data_dir
from engine.store.fsutil import atomic_write_json

Agent = Literal["claude-code", "codex"]
INDEX_FILE = "sources-index.json"
INDEX_VERSION = 3  # 2: entries carry the first prompt (title); 3: the agent's own cost
TAIL_BYTES = 65536


@dataclass
class SourceEntry:
    agent: Agent
    project: str
    session_id: str
    path: str
    started: str
    last_activity: str
    calls: int
    last_prompt_tokens: int | None
    window: int | None
    percent_full: float | None
    model: str = ""
    title: str = ""  # the first prompt (one line, cut), "" when none was found
    agent_cost_usd: float | None = None  # the agent's own cost (Claude Code's last cost-state), None: unknown

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- where


def source_roots(settings: Settings | None = None, env: Mapping[str, str] | None = None,
                 home: Path | None = None) -> list[tuple[Agent | None, Path]]:
    """(agent, folder) pairs to search; ``None`` as the agent means "either"."""
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or Path.home()) if home is None else home
    roots: list[tuple[Agent | None, Path]] = [
        ("claude-code", home / ".claude" / "projects"),
        ("claude-code", home / ".config" / "claude" / "projects"),
    ]
    for item in (env.get("CLAUDE_CONFIG_DIR") or "").split(","):
        if item.strip():
            folder = Path(item.strip()).expanduser()
            roots.append(("claude-code", folder / "projects" if (folder / "projects").is_dir() else folder))
    codex_home = env.get("CODEX_HOME")
    roots.append(("codex", (Path(codex_home).expanduser() if codex_home else home / ".codex") / "sessions"))
    for item in (settings.source_dirs if settings else "").split(os.pathsep):
        if item.strip():
            roots.append((None, Path(item.strip()).expanduser()))
    seen: set[Path] = set()
    out = []
    for agent, folder in roots:
        key = folder.resolve() if folder.exists() else folder
        if key not in seen:
            seen.add(key)
            out.append((agent, folder))
    return out


def _files(agent: Agent | None, folder: Path) -> Iterable[tuple[Agent, Path]]:
    if not folder.is_dir():
        return
    if agent in ("codex", None):
        for path in folder.rglob("rollout-*.jsonl"):
            yield "codex", path
    if agent in ("claude-code", None):
        pattern = "*/*.jsonl" if agent == "claude-code" else "**/*.jsonl"
        for path in folder.glob(pattern):
            if "subagents" in path.parts or path.name.startswith(("rollout-", "agent-")):
                continue
            if agent is None and not _looks_claude(path):
                continue
            yield "claude-code", path


def _looks_claude(path: Path) -> bool:
    from engine.sources.detect import _jsonl_kind

    try:
        with open(path, "rb") as fh:
            for _ in range(20):
                raw = fh.readline()
                if not raw:
                    return False
                try:
                    obj = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(obj, dict):
                    return _jsonl_kind(obj) == "claude-code"
    except OSError:
        return False
    return False


# --------------------------------------------------------------------------- light summaries


def _last_ts(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - TAIL_BYTES))
            tail = fh.read().splitlines()
    except OSError:
        return ""
    for raw in reversed(tail):
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict) and (ts := iso(obj.get("timestamp"))):
            return ts
    return ""


def _summary_claude(path: Path) -> SourceEntry:
    keys: set[tuple[str, str]] = set()
    started, cwd, session_id, model, title = "", "", "", "", ""
    last_prompt: int | None = None
    largest = 0
    cost: float | None = None
    with open(path, "rb") as fh:
        for raw in fh:
            if b'"cost-state"' in raw:
                cost = _cost_state(raw, cost)
                continue
            if not title and b'"user"' in raw:
                title = _claude_prompt(_loads(raw))
            if (not started and b'"timestamp"' in raw) or (not session_id and b'"sessionId"' in raw):
                obj = _loads(raw)
                started = started or iso(obj.get("timestamp"))
                session_id = session_id or str(obj.get("sessionId") or "")
                cwd = cwd or str(obj.get("cwd") or "")
            if b'"usage"' not in raw or b'"assistant"' not in raw:
                continue
            obj = _loads(raw)
            msg = dict_at(obj, "message")
            usage = msg.get("usage")
            if obj.get("type") != "assistant" or not isinstance(usage, dict) or msg.get("model") == SYNTHETIC_MODEL:
                continue
            key = (str(msg.get("id") or obj.get("uuid")), str(obj.get("requestId") or ""))
            prompt = sum(int_or_none(usage.get(k)) or 0 for k in
                         ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
            if key not in keys:
                keys.add(key)
                model = str(msg.get("model") or model)
            last_prompt = prompt
            largest = max(largest, prompt)
    window, _ = window_for_model(model, largest)
    project = Path(cwd).name if cwd else path.parent.name
    entry = _entry("claude-code", project, session_id or path.stem, path, started, len(keys), last_prompt,
                   window, model, title)
    entry.agent_cost_usd = cost
    return entry


def _cost_state(raw: bytes, previous: float | None) -> float | None:
    """The ``totalCostUSD`` of a ``cost-state`` line (a running total: the last one is the session's
    cost), else ``previous``."""
    obj = _loads(raw)
    total = obj.get("totalCostUSD")
    if obj.get("type") != "cost-state" or not isinstance(total, int | float) or isinstance(total, bool):
        return previous
    return float(total)


def _claude_prompt(obj: dict[str, Any]) -> str:
    """The text of a person's prompt line (not a tool result, a meta line or a command's output), or ""."""
    if obj.get("type") != "user" or obj.get("isMeta") or obj.get("isCompactSummary") or obj.get("isSidechain"):
        return ""
    content = dict_at(obj, "message").get("content")
    if isinstance(content, list):
        texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        content = next((t for t in texts if isinstance(t, str)), "")
    if not isinstance(content, str) or content.lstrip().startswith("<"):
        return ""
    return _one_line(content)


def _one_line(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _summary_codex(path: Path) -> SourceEntry:
    started, cwd, session_id, model, title = "", "", "", "", ""
    calls = 0
    last_total: Any = None
    last_prompt: int | None = None
    window: int | None = None
    with open(path, "rb") as fh:
        for raw in fh:
            if b'"session_meta"' in raw and not session_id:
                payload = _loads(raw).get("payload") or {}
                session_id = str(payload.get("id") or "")
                cwd = str(payload.get("cwd") or "")
                started = iso(payload.get("timestamp")) or iso(_loads(raw).get("timestamp"))
            elif not title and b'"user_message"' in raw:
                payload = _loads(raw).get("payload") or {}
                message = payload.get("message") if isinstance(payload, dict) else None
                title = _one_line(message) if isinstance(message, str) else ""
            elif b'"turn_context"' in raw:
                payload = _loads(raw).get("payload") or {}
                model = str(payload.get("model") or model) if isinstance(payload, dict) else model
            elif b'"token_count"' in raw:
                payload = _loads(raw).get("payload") or {}
                info = payload.get("info") if isinstance(payload, dict) else None
                if not isinstance(info, dict):
                    continue
                window = int_or_none(info.get("model_context_window")) or window
                if info.get("total_token_usage") == last_total:
                    continue
                last_total = info.get("total_token_usage")
                calls += 1
                last = dict_at(info, "last_token_usage")
                last_prompt = int_or_none(last.get("input_tokens"))
    project = Path(cwd).name if cwd else ""
    return _entry("codex", project, session_id or path.stem, path, started, calls, last_prompt, window, model,
                  title)


def _loads(raw: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return obj if isinstance(obj, dict) else {}


def _entry(agent: Agent, project: str, session_id: str, path: Path, started: str, calls: int,
           last_prompt: int | None, window: int | None, model: str, title: str = "") -> SourceEntry:
    full = round(100.0 * last_prompt / window, 1) if last_prompt is not None and window else None
    return SourceEntry(agent, project, session_id, str(path), started, _last_ts(path) or started, calls,
                       last_prompt, window, full, model, title)


def summarize(agent: Agent, path: Path) -> SourceEntry:
    return _summary_claude(path) if agent == "claude-code" else _summary_codex(path)


# --------------------------------------------------------------------------- index cache


def index_path() -> Path:
    return data_dir() / INDEX_FILE


def _load_index(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != INDEX_VERSION or not isinstance(data.get("files"), dict):
        return {}
    return data["files"]


def scan_sources(settings: Settings | None = None, *, refresh: bool = False, env: Mapping[str, str] | None = None,
                 home: Path | None = None, index: Path | None = None) -> list[SourceEntry]:
    """Every session found, newest first; unchanged files (same size and mtime) come from the index."""
    index = index or index_path()
    cached = {} if refresh else _load_index(index)
    files: dict[str, Any] = {}
    entries: list[SourceEntry] = []
    changed = refresh
    for agent, folder in source_roots(settings, env, home):
        for kind, path in _files(agent, folder):
            key = str(path)
            if key in files:
                continue
            try:
                st = path.stat()
            except OSError:
                continue
            stamp = [st.st_size, st.st_mtime_ns]
            old = cached.get(key)
            if isinstance(old, dict) and old.get("stamp") == stamp and isinstance(old.get("entry"), dict):
                try:
                    entry = SourceEntry(**old["entry"])
                except TypeError:
                    entry = None
                if entry is not None:
                    files[key] = old
                    entries.append(entry)
                    continue
            try:
                entry = summarize(kind, path)
            except OSError:
                continue
            changed = True
            files[key] = {"stamp": stamp, "entry": entry.to_json()}
            entries.append(entry)
    if changed or set(files) != set(cached):
        try:
            atomic_write_json(index, {"version": INDEX_VERSION, "files": files})
        except OSError:
            pass  # a read-only data dir: the next scan reads everything again
    entries.sort(key=lambda e: e.last_activity or e.started, reverse=True)
    return entries


def format_table(entries: list[SourceEntry]) -> str:
    """A plain-text table for the terminal."""
    if not entries:
        return "No agent sessions found (Claude Code: ~/.claude/projects, Codex: ~/.codex/sessions)."
    head = ("agent", "project", "session", "started", "last activity", "calls", "last prompt", "window",
            "% full", "path")
    rows = [head]
    for e in entries:
        rows.append((e.agent, e.project[:28], e.session_id[:13], e.started[:16].replace("T", " "),
                     e.last_activity[:16].replace("T", " "), str(e.calls),
                     "" if e.last_prompt_tokens is None else str(e.last_prompt_tokens),
                     "" if e.window is None else str(e.window),
                     "" if e.percent_full is None else f"{e.percent_full:.1f}", e.path))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1] for r in rows)
