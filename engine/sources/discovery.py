"""The agent sessions on this machine, for ``ctxbench sources``.

Where each agent keeps them:

- Claude Code: ``~/.claude/projects/<project>/<session>.jsonl``, ``~/.config/claude/projects/``, and
  the ``projects`` folder of every folder named in ``$CLAUDE_CONFIG_DIR`` (comma-separated);
- Codex: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`` (``~/.codex/sessions`` by default);
- Gemini CLI: ``~/.gemini/tmp/<project>/chats/session-*.jsonl`` (``$GEMINI_CLI_HOME`` instead of the home
  when set);
- OpenCode: the SQLite database ``${XDG_DATA_HOME:-~/.local/share}/opencode/opencode*.db``: one row per
  top-level session (its path ``<db>#<session id>``); a child session (a ``task`` subagent, ``parent_id``) is
  counted with its parent (``subagents``, and its cost in the parent's);
- any folder named in the ``source_dirs`` setting (``os.pathsep``-separated), searched for all of them.

Each file is summarised by a light pass (only the lines that carry usage are parsed): started,
last activity, provider calls, last prompt tokens, window and how full it is, and — for Claude Code
files that have ``cost-state`` lines (2.1.3xx) — the agent's own cost in USD (the last line's
``totalCostUSD``; OpenCode: the session's ``cost``). The summaries are
kept in ``sources-index.json`` in the data dir with each file's size and mtime, so a second scan
re-reads only the files that changed. Files are only read, never locked or moved.

An OpenCode database's key is the size and mtime of the database and of its ``-wal`` file (where OpenCode's
writes land first); when it changed, each session is read again only if its own rows changed (the session's
``time_updated`` and its messages' count and newest ``time_updated``, its children's too). A database that is
busy is skipped this scan (its sessions as the index had them) and read at the next one; never an error.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from engine.sources import gemini_cli, opencode
from engine.sources.claude_code import SYNTHETIC_MODEL, window_for_model
from engine.sources.model import SourceError, dict_at, int_or_none, iso, read_on
from engine.store.config import Settings, data_dir
from engine.store.fsutil import atomic_write_bytes

Agent = Literal["claude-code", "codex", "gemini-cli", "opencode"]
INDEX_FILE = "sources-index.json"
INDEX_VERSION = 4  # 2: entries carry the first prompt (title); 3: the agent's own cost; 4: no interruption title
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
    subagents: int = 0  # child sessions counted with this one (OpenCode's task subagents)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ScanProblem:
    """A session file (or database) the scan could not read: skipped, never stopping the others. ``path`` as
    the scan found it; ``reason`` says what was wrong, for a person."""

    agent: str
    path: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        return f"{self.path}: {self.reason}"


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
    gemini_home = env.get("GEMINI_CLI_HOME")
    roots.append(("gemini-cli", (Path(gemini_home).expanduser() if gemini_home else home) / ".gemini" / "tmp"))
    data_home = env.get("XDG_DATA_HOME")
    roots.append(("opencode", (Path(data_home).expanduser() if data_home else home / ".local" / "share") / "opencode"))
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
    if agent == "gemini-cli":
        for path in folder.glob("*/chats/session-*.jsonl"):
            yield "gemini-cli", path
    if agent in ("opencode", None):
        for path in folder.glob("opencode*.db" if agent else "**/opencode*.db"):
            if agent or opencode.is_opencode_source(path):
                yield "opencode", path
    if agent in ("claude-code", None):
        pattern = "*/*.jsonl" if agent == "claude-code" else "**/*.jsonl"
        for path in folder.glob(pattern):
            if "subagents" in path.parts or path.name.startswith(("rollout-", "agent-")):
                continue
            kind = _jsonl_agent(path) if agent is None else "claude-code"
            if kind in ("claude-code", "gemini-cli"):
                yield cast(Agent, kind), path


def _looks_claude(path: Path) -> bool:
    return _jsonl_agent(path) == "claude-code"


def _jsonl_agent(path: Path) -> str | None:
    """The format of a JSONL file's first JSON object line (``claude-code``, ``gemini-cli``, …), or None."""
    from engine.sources.detect import _jsonl_kind

    try:
        with open(path, "rb") as fh:
            for _ in range(20):
                raw = fh.readline()
                if not raw:
                    return None
                try:
                    obj = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(obj, dict):
                    return _jsonl_kind(obj)
    except OSError:
        return None
    return None


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


@dataclass
class _ClaudeScan:
    """The light pass over a Claude Code file, resumable: what it found so far and where it stopped (the end
    of the last complete line). Kept per file by a long-lived process (:data:`_CLAUDE_SCANS`), so that a file
    that grew is read from there, not whole."""

    inode: int = 0
    offset: int = 0
    tail: bytes = b""  # the bytes just before ``offset``: a file rewritten in place does not match them
    keys: set[tuple[str, str]] = field(default_factory=set)
    started: str = ""
    cwd: str = ""
    session_id: str = ""
    model: str = ""
    title: str = ""
    last_prompt: int | None = None
    largest: int = 0
    cost: float | None = None

    def feed(self, lines: Iterable[bytes]) -> None:
        for raw in lines:
            if b'"cost-state"' in raw:
                self.cost = _cost_state(raw, self.cost)
                continue
            if not self.title and b'"user"' in raw:
                self.title = _claude_prompt(_loads(raw))
            if (not self.started and b'"timestamp"' in raw) or (not self.session_id and b'"sessionId"' in raw):
                obj = _loads(raw)
                self.started = self.started or iso(obj.get("timestamp"))
                self.session_id = self.session_id or str(obj.get("sessionId") or "")
                self.cwd = self.cwd or str(obj.get("cwd") or "")
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
            if key not in self.keys:
                self.keys.add(key)
                self.model = str(msg.get("model") or self.model)
            self.last_prompt = prompt
            self.largest = max(self.largest, prompt)

    def entry(self, path: Path) -> SourceEntry:
        window, _ = window_for_model(self.model, self.largest)
        project = Path(self.cwd).name if self.cwd else path.parent.name
        entry = _entry("claude-code", project, self.session_id or path.stem, path, self.started, len(self.keys),
                       self.last_prompt, window, self.model, self.title)
        entry.agent_cost_usd = self.cost
        return entry


_CLAUDE_SCANS: OrderedDict[str, _ClaudeScan] = OrderedDict()  # most recently read last
CLAUDE_SCANS_KEPT = 16
_CLAUDE_SCANS_LOCK = threading.Lock()


def _summary_claude(path: Path) -> SourceEntry:
    """The summary of a Claude Code file; a file summarised before in this process that only grew (same
    inode, the bytes before where the last pass stopped unchanged) is read from where that pass stopped."""
    key = str(path)
    with _CLAUDE_SCANS_LOCK:
        scan = _CLAUDE_SCANS.pop(key, None)
    with open(path, "rb") as fh:
        if scan is not None and not read_on(fh, scan.inode, scan.offset, scan.tail):
            scan = None
        if scan is None:
            scan = _ClaudeScan(inode=os.fstat(fh.fileno()).st_ino)
        fh.seek(scan.offset)
        data = fh.read()
    cut = data.rfind(b"\n") + 1
    scan.feed(data[:cut].splitlines())
    if cut:
        scan.offset += cut
        scan.tail = data[max(0, cut - 64):cut]
    entry = scan.entry(path)
    if cut < len(data):  # a partial last line: counted in this summary, read again whole next time
        partial = _ClaudeScan(**{**scan.__dict__, "keys": set(scan.keys)})
        partial.feed([data[cut:]])
        entry = partial.entry(path)
    with _CLAUDE_SCANS_LOCK:
        _CLAUDE_SCANS[key] = scan
        while len(_CLAUDE_SCANS) > CLAUDE_SCANS_KEPT:
            _CLAUDE_SCANS.popitem(last=False)
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
    if not isinstance(content, str) or content.lstrip().startswith(("<", "[Request interrupted by user")):
        return ""  # a command's tags, or Claude Code's note that the person stopped a response: no title
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


def _summary_gemini(path: Path) -> SourceEntry:
    """A Gemini CLI file: one call per ``gemini`` record with ``tokens`` (a record written again when it grows
    is the same call: its ``id``)."""
    started, session_id, model, title = "", "", "", ""
    prompts: dict[str, int | None] = {}  # record id -> its prompt, in the order the calls came
    with open(path, "rb") as fh:
        for raw in fh:
            if b'"tokens"' in raw and b'"gemini"' in raw:
                obj = _loads(raw)
                gid = obj.get("id")
                if obj.get("type") == "gemini" and isinstance(obj.get("tokens"), dict) and isinstance(gid, str):
                    prompts[gid] = int_or_none(obj["tokens"].get("input"))
                    model = str(obj.get("model") or model)
            elif not session_id and b'"projectHash"' in raw:
                obj = _loads(raw)
                if isinstance(obj.get("sessionId"), str):
                    session_id = str(obj["sessionId"])
                    started = iso(obj.get("startTime"))
            elif not title and b'"user"' in raw and b'"$set"' not in raw:
                title = _gemini_prompt(_loads(raw))
    project = path.parent.parent.name if path.parent.name == "chats" else ""
    last_prompt = next(reversed(prompts.values())) if prompts else None
    stem = path.stem.removeprefix("session-")
    return _entry("gemini-cli", project, session_id or stem, path, started, len(prompts), last_prompt,
                  gemini_cli.window_for_model(model) if model else None, model, title)


def _gemini_prompt(obj: dict[str, Any]) -> str:
    """The text of a person's prompt record (not tool results nor the ``<session_context>``), or ""."""
    if obj.get("type") != "user" or not isinstance(obj.get("id"), str):
        return ""
    content = obj.get("content")
    parts = content if isinstance(content, list) else [content]
    texts = [p if isinstance(p, str) else p.get("text") for p in parts if isinstance(p, str | dict)]
    text = next((t for t in texts if isinstance(t, str) and t.strip()), "")
    return "" if text.lstrip().startswith("<") else _one_line(text)


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
    if agent == "gemini-cli":
        return _summary_gemini(path)
    return _summary_claude(path) if agent == "claude-code" else _summary_codex(path)


# --------------------------------------------------------------------------- OpenCode


def opencode_stamp(db: Path) -> list[int] | None:
    """The index key of a database: size and mtime of the database and of its ``-wal`` file; None when gone."""
    try:
        st = db.stat()
    except OSError:
        return None
    try:
        wal = Path(f"{db}-wal").stat()
        wal_key = [wal.st_size, wal.st_mtime_ns]
    except OSError:
        wal_key = [-1, -1]
    return [st.st_size, st.st_mtime_ns, *wal_key]


def summarize_opencode(db: Path, cached: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every top-level session of an OpenCode database as ``{session id: {"key": …, "entry": …}}``; a session
    whose key is in ``cached`` unchanged is not read again. SourceError when the database cannot be read now
    (busy, not OpenCode's)."""
    cached = cached or {}

    def work(conn: sqlite3.Connection) -> dict[str, Any]:
        sessions = {str(r["id"]): dict(r) for r in conn.execute("SELECT * FROM session")}
        stats = {str(r[0]): [int(r[1]), int(r[2] or 0)] for r in conn.execute(
            "SELECT session_id, count(*), max(time_updated) FROM message GROUP BY session_id")}
        children: dict[str, list[str]] = {}
        for sid, row in sessions.items():
            parent = row.get("parent_id")
            if parent and parent in sessions:
                children.setdefault(str(parent), []).append(sid)

        def key(sid: str) -> list[Any]:
            return [sessions[sid].get("time_updated"), *stats.get(sid, [0, 0])]

        out: dict[str, Any] = {}
        for sid, row in sessions.items():
            if row.get("parent_id") and row["parent_id"] in sessions:
                continue  # a child: counted with its parent
            kids = sorted(children.get(sid, []))
            k = [key(sid), *[key(c) for c in kids]]
            old = cached.get(sid)
            if isinstance(old, dict) and old.get("key") == k and isinstance(old.get("entry"), dict):
                out[sid] = old
                continue
            entry = _opencode_entry(conn, db, row, [sessions[c] for c in kids], stats.get(sid, [0, 0])[1])
            out[sid] = {"key": k, "entry": entry.to_json()}
        return out

    return opencode.with_retries(db, work)


def _opencode_entry(conn: sqlite3.Connection, db: Path, row: dict[str, Any], kids: list[dict[str, Any]],
                    newest_message: int) -> SourceEntry:
    """One session's row: its calls are the step-finish parts of its assistant messages (not a compaction's
    summary), as :class:`engine.sources.opencode.OpenCodeReader` counts them (a failed message without one is
    a call of unknown size)."""
    sid = str(row["id"])
    messages = conn.execute("SELECT id, time_created, data FROM message WHERE session_id = ? "
                            "ORDER BY time_created, id", (sid,)).fetchall()
    finishes: dict[str, list[Any]] = {}
    for r in conn.execute("SELECT message_id, data FROM part WHERE session_id = ? AND "
                          "json_extract(data, '$.type') = 'step-finish' ORDER BY id", (sid,)):
        finishes.setdefault(str(r[0]), []).append(r[1])
    calls, last_prompt, model, title = 0, None, "", ""
    for m in messages:
        info = _loads_value(m["data"])
        mid = str(m["id"])
        if info.get("role") == "user" and not title:
            title = _opencode_prompt(conn, mid)
        if info.get("role") != "assistant" or info.get("summary") is True:
            continue
        steps = finishes.get(mid, [])
        calls += len(steps) or (1 if info.get("error") else 0)
        model = str(info.get("modelID") or model)
        for raw in steps:
            tokens = dict_at(_loads_value(raw), "tokens")
            fresh = int_or_none(tokens.get("input"))
            cache = dict_at(tokens, "cache")
            if fresh is not None:
                last_prompt = fresh + (int_or_none(cache.get("read")) or 0) + (int_or_none(cache.get("write")) or 0)
    costs = [c for c in (_float(r.get("cost")) for r in [row, *kids]) if c is not None]
    directory = str(row.get("directory") or "")
    updated = max(int_or_none(row.get("time_updated")) or 0, newest_message)
    entry = SourceEntry("opencode", Path(directory).name if directory else "", sid,
                        str(opencode.opencode_path(db, sid)), _ms(row.get("time_created")), "", calls, last_prompt,
                        None, None, model, title or _one_line(str(row.get("title") or "")),
                        sum(costs) if costs else None, len(kids))
    entry.last_activity = _ms(updated) or entry.started
    return entry


def _opencode_prompt(conn: sqlite3.Connection, message_id: str) -> str:
    for (raw,) in conn.execute("SELECT data FROM part WHERE message_id = ? ORDER BY id", (message_id,)):
        part = _loads_value(raw)
        text = part.get("text")
        if part.get("type") == "text" and not part.get("ignored") and not part.get("synthetic") and isinstance(
                text, str) and text.strip():
            return _one_line(text)
    return ""


def _loads_value(value: Any) -> dict[str, Any]:
    """A column's JSON object ({} when it is not one)."""
    return _loads(value.encode() if isinstance(value, str) else value if isinstance(value, bytes) else b"")


def _ms(value: Any) -> str:
    ms = int_or_none(value)
    return iso(ms / 1000) if ms is not None and ms > 0 else ""


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _scan_opencode(db: Path, old: Any, refresh: bool) -> tuple[dict[str, Any] | None, list[SourceEntry], bool]:
    """(the index record, the entries, whether anything was read) of one database; a busy database gives
    the index's record unchanged (read again at the next scan)."""
    stamp = opencode_stamp(db)
    old = old if isinstance(old, dict) and isinstance(old.get("sessions"), dict) else None
    if stamp is None:
        return None, [], False
    if old is not None and old.get("stamp") == stamp and not refresh:
        record, read = old, False
    else:
        try:
            sessions = summarize_opencode(db, None if refresh or old is None else old["sessions"])
        except SourceError:
            return old, _entries_of(old), False  # busy (or not readable now): as before, tried again next scan
        record, read = {"stamp": stamp, "sessions": sessions}, True
    return record, _entries_of(record), read


def _entries_of(record: dict[str, Any] | None) -> list[SourceEntry]:
    out = []
    for item in (record or {}).get("sessions", {}).values():
        try:
            out.append(SourceEntry(**item["entry"]))
        except (TypeError, KeyError):
            continue
    return out


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
                 home: Path | None = None, index: Path | None = None,
                 problems: list[ScanProblem] | None = None) -> list[SourceEntry]:
    """Every session found, newest first; unchanged files (same size and mtime) come from the index. A file
    that cannot be read is left out and, when ``problems`` is given, added to it with the reason."""
    problems = problems if problems is not None else []
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
            if kind == "opencode":
                record, found, read = _scan_opencode(path, cached.get(key), refresh)
                if record is not None:
                    files[key] = record
                changed = changed or read
                entries += found
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
            except (OSError, ValueError, RecursionError, TypeError, KeyError, AttributeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
                problems.append(ScanProblem(kind, key, reason))
                continue
            changed = True
            files[key] = {"stamp": stamp, "entry": entry.to_json()}
            entries.append(entry)
    if changed or set(files) != set(cached):
        try:
            data = {"version": INDEX_VERSION, "files": files}  # compact, no fsync: a cache
            atomic_write_bytes(index, json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8"),
                               durable=False)
        except OSError:
            pass  # a read-only data dir: the next scan reads everything again
    entries.sort(key=lambda e: e.last_activity or e.started, reverse=True)
    return entries


def format_table(entries: list[SourceEntry]) -> str:
    """A plain-text table for the terminal."""
    if not entries:
        return ("No agent sessions found (Claude Code: ~/.claude/projects, Codex: ~/.codex/sessions, "
                "Gemini CLI: ~/.gemini/tmp, OpenCode: ~/.local/share/opencode).")
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
