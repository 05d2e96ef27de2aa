"""The agent sessions on this machine, for ``ctxbench sources``.

Where each agent keeps them:

- Claude Code: ``~/.claude/projects/<project>/<session>.jsonl``, ``~/.config/claude/projects/``, and
  the ``projects`` folder of every folder named in ``$CLAUDE_CONFIG_DIR`` (comma-separated);
- Codex: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`` (``~/.codex/sessions`` by default); a subagent's
  rollout (a ``spawn_agent`` thread: its ``session_meta`` names its parent) is counted with its parent when the
  parent is listed (``subagents``; the parent's import reads it), else listed on its own;
- Gemini CLI: ``~/.gemini/tmp/<project>/chats/session-*.jsonl`` (``$GEMINI_CLI_HOME`` instead of the home
  when set);
- Pi: ``~/.pi/agent/sessions/--<cwd>--/*.jsonl`` (``$PI_CODING_AGENT_DIR`` instead of ``~/.pi/agent`` when
  set);
- Copilot CLI: ``~/.copilot/session-state/<session uuid>/events.jsonl`` (``$COPILOT_HOME`` instead of ``~/.copilot``
  when set), titled by ``workspace.yaml``'s name, else the first prompt;
- Cline: ``~/.cline/data/sessions/<id>/<id>.messages.json`` (as Cline finds it: ``$CLINE_SESSION_DATA_DIR``, else
  ``$CLINE_DATA_DIR/sessions``, else ``$CLINE_DIR/data/sessions``);
- OpenCode: the SQLite database ``${XDG_DATA_HOME:-~/.local/share}/opencode/opencode*.db``: one row per
  top-level session (its path ``<db>#<session id>``); a child session (a ``task`` subagent, ``parent_id``) is
  counted with its parent (``subagents``, and its cost in the parent's);
- Kilo CLI: the same, in ``${XDG_DATA_HOME:-~/.local/share}/kilo/kilo*.db`` (OpenCode's schema; a cost of 0 is
  Kilo's for a model it has no price for: unknown);
- recordings of ``ctxbench record`` / ``ctxbench proxy`` (:mod:`engine.capture`):
  ``<data dir>/captures/capture-*.jsonl`` (a rolled-over capture is listed once, by its first part; its summary
  reads every part), titled by the first prompt the recorded agent sent;
- any folder named in the ``source_dirs`` setting (``os.pathsep``-separated), searched for all of them.

Each file is summarised by a light pass (only the lines that carry usage are parsed): started,
last activity, provider calls, last prompt tokens, window and how full it is, and — for Claude Code
files that have ``cost-state`` lines (2.1.3xx) — the agent's own cost in USD (the last line's
``totalCostUSD``; OpenCode: the session's ``cost``). The summaries are
kept in ``sources-index.json`` in the data dir with each file's size and mtime, so a second scan
re-reads only the files that changed. Files are only read, never locked or moved.

An OpenCode database's key is the size and mtime of the database and of its ``-wal`` file (where OpenCode's
writes land first); when it changed, each session is read again only if its own rows changed (the session's
``time_updated`` and its messages' count and newest ``time_updated``, its children's too). A database that
stays locked by another process (1 s in all), or cannot be read (damaged, a table or column missing, not a
database), is a problem of the scan with the reason; its sessions are shown as the index had them (said so)
and it is read again at the next scan. A session that cannot be summarised is a problem of its own; the
others are listed all the same.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from engine.capture.files import CAPTURE_DIR, captures_dir
from engine.model.text import printable
from engine.sources import capture, cline, copilot, gemini_cli, kilo, opencode, pi, qwen_code, sqlite_read
from engine.sources import model as source_model
from engine.sources.claude_code import SYNTHETIC_MODEL, usage_prompt, window_for_model
from engine.sources.codex import same_total
from engine.sources.model import (
    SourceError,
    capped_lines,
    dict_at,
    float_or_none,
    int_or_none,
    iso,
    open_regular,
    read_on,
    shown_path,
)
from engine.store.config import Settings, data_dir
from engine.store.fsutil import atomic_write_bytes

Agent = Literal["claude-code", "codex", "gemini-cli", "opencode", "pi", "proxy-capture", "copilot-cli", "cline",
                "qwen-code", "kilo"]
INDEX_FILE = "sources-index.json"
INDEX_VERSION = 6  # 2: entries carry the first prompt (title); 3: the agent's own cost; 4: no interruption title;
# 5: Codex 0.1xx titled by its first user message item, its project from world_state / turn_context; 6: a Codex
# subagent's parent (parent_id)
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
    subagents: int = 0  # child sessions counted with this one (OpenCode's task subagents, Codex's spawn_agent threads)
    parent_id: str = ""  # the session a subagent's file belongs to (Codex), counted with it when it is listed

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
    pi_dir = env.get("PI_CODING_AGENT_DIR")
    roots.append(("pi", (Path(pi_dir).expanduser() if pi_dir else home / ".pi" / "agent") / "sessions"))
    copilot_home = env.get("COPILOT_HOME")
    roots.append(("copilot-cli", (Path(copilot_home).expanduser() if copilot_home else home / ".copilot")
                  / "session-state"))
    roots.append(("cline", cline_sessions(env, home)))
    roots.append(("qwen-code", home / ".qwen" / "projects"))
    data_home = env.get("XDG_DATA_HOME")
    roots.append(("opencode", (Path(data_home).expanduser() if data_home else home / ".local" / "share") / "opencode"))
    roots.append(("kilo", (Path(data_home).expanduser() if data_home else home / ".local" / "share") / "kilo"))
    own_data = env.get("CTXBENCH_DATA_DIR")
    roots.append(("proxy-capture", Path(own_data) / CAPTURE_DIR if own_data else captures_dir()))
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


def cline_sessions(env: Mapping[str, str], home: Path) -> Path:
    """Cline's sessions folder, found as Cline 3.0.65 finds it (its environment variables, else ``~/.cline``)."""
    if folder := (env.get("CLINE_SESSION_DATA_DIR") or "").strip():
        return Path(folder).expanduser()
    if data := (env.get("CLINE_DATA_DIR") or "").strip():
        return Path(data).expanduser() / "sessions"
    base = (env.get("CLINE_DIR") or "").strip()
    return (Path(base).expanduser() if base else home / ".cline") / "data" / "sessions"


def _files(agent: Agent | None, folder: Path,
           problems: list[ScanProblem] | None = None) -> Iterable[tuple[Agent, Path]]:
    """The session files under ``folder`` (the walk never follows a linked folder, so a link loop ends). A file
    whose format must be read from its first lines (a folder of the ``source_dirs`` setting) and that cannot be
    read (a FIFO, a device) is added to ``problems``."""
    if not folder.is_dir():
        return
    if agent in ("codex", None):
        for path in _walk(folder.rglob("rollout-*.jsonl"), folder, problems):
            yield "codex", path
    if agent == "gemini-cli":
        for path in _walk(folder.glob("*/chats/session-*.jsonl"), folder, problems):
            yield "gemini-cli", path
    if agent == "pi":
        for path in _walk(folder.glob("*/*.jsonl"), folder, problems):
            yield "pi", path
    if agent == "copilot-cli":
        for path in _walk(folder.glob("*/events.jsonl"), folder, problems):
            yield "copilot-cli", path
    if agent == "cline":
        for path in _walk(folder.glob("*/*" + cline.MESSAGES_SUFFIX), folder, problems):
            yield "cline", path
    if agent == "qwen-code":
        for path in _walk(folder.glob("*/chats/*.jsonl"), folder, problems):
            yield "qwen-code", path
    if agent == "proxy-capture":
        for path in _walk(folder.glob("capture-*.jsonl"), folder, problems):
            if not _capture_part(path):
                yield "proxy-capture", path
    if agent in ("opencode", None):
        for path in folder.glob("opencode*.db" if agent else "**/opencode*.db"):
            if agent or opencode.is_opencode_source(path):
                yield "opencode", path
    if agent in ("kilo", None):
        for path in folder.glob("kilo*.db" if agent else "**/kilo*.db"):
            if agent or kilo.is_kilo_source(path):
                yield "kilo", path
    if agent in ("claude-code", None):
        pattern = "*/*.jsonl" if agent == "claude-code" else "**/*.jsonl"
        for path in _walk(folder.glob(pattern), folder, problems):
            if "subagents" in path.parts or path.name.startswith(("rollout-", "agent-")):
                continue
            try:
                kind = _jsonl_agent(path) if agent is None else "claude-code"
            except SourceError as exc:
                if problems is not None:
                    problems.append(ScanProblem("unknown", str(path), _reason(exc, path)))
                continue
            if kind in ("claude-code", "gemini-cli", "pi", "copilot-cli", "qwen-code") or (
                    kind == "proxy-capture" and not _capture_part(path)):
                yield cast(Agent, kind), path


def _walk(paths: Iterable[Path], folder: Path, problems: list[ScanProblem] | None) -> Iterator[Path]:
    """``paths`` (a glob of ``folder``) until the walk fails (a folder that vanished or cannot be listed): what it
    found until then, the failure added to ``problems``."""
    try:
        yield from paths
    except OSError as exc:
        if problems is not None:
            problems.append(ScanProblem("unknown", str(folder), f"cannot list: {exc.strerror or exc}"))


def _looks_claude(path: Path) -> bool:
    try:
        return _jsonl_agent(path) == "claude-code"
    except SourceError:
        return False


def _jsonl_agent(path: Path) -> str | None:
    """The format of a JSONL file's first JSON object line (``claude-code``, ``gemini-cli``, …), or None (also
    when it cannot be opened); SourceError when it is no regular file (a FIFO, a device: never read)."""
    from engine.sources.detect import _jsonl_kind

    try:
        with open_regular(path) as fh:
            for n, raw in enumerate(capped_lines(fh, name=path.name)):
                if n >= 20:
                    return None
                obj = _loads(raw)
                if obj:
                    return _jsonl_kind(obj)
    except OSError:
        return None
    return None


# --------------------------------------------------------------------------- light summaries


def _last_ts(path: Path) -> str:
    try:
        with open_regular(path) as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - TAIL_BYTES))
            tail = fh.read(TAIL_BYTES).split(b"\n")  # at newlines only: a raw \r inside a line is the line's
    except (OSError, SourceError):
        return ""
    for raw in reversed(tail):
        if ts := iso(_loads(raw).get("timestamp")):
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
            prompt = usage_prompt(usage)  # None: a count of the line is no figure (NaN, negative, …)
            if key not in self.keys:
                self.keys.add(key)
                self.model = str(msg.get("model") or self.model)
            self.last_prompt = prompt
            self.largest = max(self.largest, prompt or 0)

    def _needles(self) -> tuple[bytes, ...]:
        """What a line must hold for :meth:`feed` to learn anything from it now (a line holding none of these is
        passed over by :meth:`feed` untouched)."""
        return ((b'"cost-state"', b'"usage"') + ((b'"user"',) if not self.title else ())
                + ((b'"timestamp"',) if not self.started else ()) + ((b'"sessionId"',) if not self.session_id else ()))

    def feed_block(self, data: bytes) -> None:
        """Take ``data``, complete lines (it ends with a newline), as :meth:`feed` would take them one by one, but
        only the lines holding one of :meth:`_needles` are handed to it: the others are passed over at the speed
        of a byte search (most of a session's bytes are tool results that say nothing here). Each needle is
        searched once per stretch of ``data`` (its next place kept until passed), so the work is linear."""
        pos, end = 0, len(data)
        found: dict[bytes, int] = {}
        while pos < end:
            hit = end
            for needle in self._needles():
                at = found.get(needle, -1)
                if at < pos:
                    at = data.find(needle, pos)
                    found[needle] = at = end if at < 0 else at
                hit = min(hit, at)
            if hit >= end:
                return
            start = data.rfind(b"\n", pos, hit) + 1 or pos
            stop = data.find(b"\n", hit) + 1 or end
            if stop - start <= source_model.MAX_LINE_BYTES + 1:  # (a longer line was cut short: not read)
                self.feed((data[start:stop],))
            pos = stop

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
LIVE_SECONDS = 120  # a file changed this recently may be growing: a scan spread over processes reads it here


def _summary_claude(path: Path) -> SourceEntry:
    """The summary of a Claude Code file; a file summarised before in this process that only grew (same
    inode, the bytes before where the last pass stopped unchanged) is read from where that pass stopped."""
    key = str(path)
    with _CLAUDE_SCANS_LOCK:
        scan = _CLAUDE_SCANS.pop(key, None)
    with open_regular(path) as fh:
        if scan is not None and not read_on(fh, scan.inode, scan.offset, scan.tail):
            scan = None
        if scan is None:
            scan = _ClaudeScan(inode=os.fstat(fh.fileno()).st_ino)
        fh.seek(scan.offset)
        rest = _scan_blocks(fh, scan, path.name)  # a partial last line: counted here, read again whole next time
    entry = scan.entry(path)
    if rest:
        partial = _ClaudeScan(**{**scan.__dict__, "keys": set(scan.keys)})
        partial.feed([rest])
        entry = partial.entry(path)
    with _CLAUDE_SCANS_LOCK:
        _CLAUDE_SCANS[key] = scan
        while len(_CLAUDE_SCANS) > CLAUDE_SCANS_KEPT:
            _CLAUDE_SCANS.popitem(last=False)
    return entry


SCAN_BLOCK = 8 * 2**20  # bytes a light pass reads at a time (cut at the last newline; a line's rest waits for more)


def _scan_blocks(fh: Any, scan: _ClaudeScan, name: str) -> bytes:
    """Feed the complete lines of ``fh`` from where it is to ``scan`` (:meth:`_ClaudeScan.feed_block`), a block at a
    time, moving ``scan.offset`` and ``scan.tail`` past them; a line longer than
    :data:`engine.sources.model.MAX_LINE_BYTES` is passed over unread (never held whole). The partial last line
    (no newline yet) is returned, not fed. Reading for longer than :data:`engine.sources.model.FILE_SECONDS` raises
    SourceError naming ``name`` (checked after each block once 4,096 lines were read, as :func:`capped_lines` does)."""
    started = time.monotonic()
    carry, skipping, lines = b"", False, 0
    while block := fh.read(SCAN_BLOCK):
        if skipping:  # the rest of an over-long line
            cut = block.find(b"\n") + 1
            _passed(scan, block[:cut] if cut else block)
            if not cut:
                continue
            block, skipping = block[cut:], False
        data = carry + block if carry else block
        cut = data.rfind(b"\n") + 1
        if cut:
            scan.feed_block(data[:cut])
            _passed(scan, data[:cut])
            lines += data.count(b"\n", 0, cut)
            if lines >= 4096 and time.monotonic() - started > source_model.FILE_SECONDS:
                raise SourceError(f"{name}: reading took more than {source_model.FILE_SECONDS:.0f} s: stopped")
        carry = data[cut:]
        if len(carry) > source_model.MAX_LINE_BYTES:
            _passed(scan, carry)
            carry, skipping = b"", True
    return b"" if skipping else carry


def _passed(scan: _ClaudeScan, data: bytes) -> None:
    """``data`` was read past: the scan's offset and the bytes just before it move on."""
    scan.offset += len(data)
    scan.tail = data[-64:] if len(data) >= 64 else (scan.tail + data)[-64:]


def _cost_state(raw: bytes, previous: float | None) -> float | None:
    """The ``totalCostUSD`` of a ``cost-state`` line (a running total: the last one is the session's
    cost), else ``previous``."""
    obj = _loads(raw)
    total = float_or_none(obj.get("totalCostUSD"))  # NaN, infinite, negative: no figure (the last one kept)
    if obj.get("type") != "cost-state" or total is None:
        return previous
    return total


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
    started, cwd, session_id, model, title, parent = "", "", "", "", "", ""
    calls = 0
    last_total: Any = None
    last_prompt: int | None = None
    window: int | None = None
    with open_regular(path) as fh:
        for raw in capped_lines(fh, name=path.name):
            if b'"session_meta"' in raw and not session_id:
                payload = _loads(raw).get("payload") or {}
                parent = _codex_parent(payload)
                session_id = str(payload.get("id") or "")
                cwd = str(payload.get("cwd") or "")
                started = iso(payload.get("timestamp")) or iso(_loads(raw).get("timestamp"))
            elif not title and b'"user_message"' in raw:
                payload = _loads(raw).get("payload") or {}
                message = payload.get("message") if isinstance(payload, dict) else None
                title = _codex_prompt(message) if isinstance(message, str) else ""
            elif not title and b'"response_item"' in raw and b'"user"' in raw:
                # Codex 0.1xx writes no user_message event: the person's prompt is the user message item
                title = _codex_item_prompt(_loads(raw).get("payload"))
            elif b'"turn_context"' in raw:
                payload = _loads(raw).get("payload") or {}
                model = str(payload.get("model") or model) if isinstance(payload, dict) else model
                cwd = cwd or (str(payload.get("cwd") or "") if isinstance(payload, dict) else "")
            elif not cwd and b'"world_state"' in raw:  # Codex 0.1xx: session_meta's cwd is empty
                envs = dict_at(dict_at(dict_at(_loads(raw), "payload"), "state"), "environments")
                found = [e.get("cwd") for e in dict_at(envs, "environments").values() if isinstance(e, dict)]
                cwd = next((c for c in found if isinstance(c, str) and c), "")
            elif b'"token_count"' in raw:
                payload = _loads(raw).get("payload") or {}
                info = payload.get("info") if isinstance(payload, dict) else None
                if not isinstance(info, dict):
                    continue
                window = int_or_none(info.get("model_context_window")) or window
                if same_total(info.get("total_token_usage"), last_total):
                    continue
                last_total = info.get("total_token_usage")
                calls += 1
                last = dict_at(info, "last_token_usage")
                last_prompt = int_or_none(last.get("input_tokens"))
    project = Path(cwd).name if cwd else ""
    entry = _entry("codex", project, session_id or path.stem, path, started, calls, last_prompt, window, model,
                   title)
    entry.parent_id = parent
    return entry


def _codex_parent(payload: Any) -> str:
    """The parent thread a Codex ``session_meta`` names (a ``spawn_agent`` subagent's), "" for a session of its own."""
    if not isinstance(payload, dict):
        return ""
    spawn = dict_at(dict_at(dict_at(payload, "source"), "subagent"), "thread_spawn")
    found = payload.get("parent_thread_id") or spawn.get("parent_thread_id")
    return found if isinstance(found, str) else ""


def _codex_prompt(text: str) -> str:
    """A Codex user text as a title: "" for what Codex injects (``<environment_context>``, ``<user_instructions>``,
    the ``# AGENTS.md instructions`` block)."""
    head = text.lstrip()
    return "" if not head or head.startswith(("<", "# AGENTS.md instructions")) else _one_line(text)


def _codex_item_prompt(payload: Any) -> str:
    """The person's prompt of a Codex ``response_item`` user message (its first text Codex did not inject), or ""."""
    if not isinstance(payload, dict) or payload.get("type") != "message" or payload.get("role") != "user":
        return ""
    content = payload.get("content")
    parts = content if isinstance(content, list) else [content]
    for part in parts:
        text = part.get("text") if isinstance(part, dict) else part
        title = _codex_prompt(text) if isinstance(text, str) else ""
        if title:
            return title
    return ""


def _summary_gemini(path: Path) -> SourceEntry:
    """A Gemini CLI file: one call per ``gemini`` record with ``tokens`` (a record written again when it grows
    is the same call: its ``id``)."""
    started, session_id, model, title = "", "", "", ""
    prompts: dict[str, int | None] = {}  # record id -> its prompt, in the order the calls came
    with open_regular(path) as fh:
        for raw in capped_lines(fh, name=path.name):
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
    """A line's JSON object; {} when it is none (not JSON, not UTF-8, nested too deeply, longer than
    :data:`engine.sources.model.MAX_LINE_BYTES`). A raw control character inside a string is read as it is (as the
    readers do)."""
    if len(raw) > source_model.MAX_LINE_BYTES:
        return {}
    try:
        obj = source_model.loads_line(raw)
    except (ValueError, RecursionError):
        return {}
    return obj if isinstance(obj, dict) else {}


def _entry(agent: Agent, project: str, session_id: str, path: Path, started: str, calls: int,
           last_prompt: int | None, window: int | None, model: str, title: str = "") -> SourceEntry:
    full = round(100.0 * last_prompt / window, 1) if last_prompt is not None and window else None
    return SourceEntry(agent, project, session_id, str(path), started, _last_ts(path) or started, calls,
                       last_prompt, window, full, model, title)


def _summary_pi(path: Path) -> SourceEntry:
    """A Pi file (:func:`engine.sources.pi.light_summary`): one call per assistant message with usage."""
    found = pi.light_summary(path)
    entry = _entry("pi", Path(found.cwd).name if found.cwd else path.parent.name, found.session_id, path, found.started,
                   found.calls, found.last_prompt, found.window, found.model, _one_line(found.title))
    entry.agent_cost_usd = found.cost_usd
    return entry


def _summary_copilot(path: Path) -> SourceEntry:
    """A Copilot CLI events file (:func:`engine.sources.copilot.light_summary`): one call per usage record."""
    found = copilot.light_summary(path)
    return _entry("copilot-cli", Path(found.cwd).name if found.cwd else path.parent.name, found.session_id, path,
                  found.started, found.calls, found.last_prompt, found.window, found.model, _one_line(found.title))


def _summary_cline(path: Path) -> SourceEntry:
    """A Cline document (:func:`engine.sources.cline.light_summary`): titled by the meta's prompt."""
    found = cline.light_summary(path)
    entry = _entry("cline", Path(found.cwd).name if found.cwd else path.parent.name, found.session_id, path,
                   found.started, found.calls, found.last_prompt, None, found.model, _one_line(found.title))
    entry.last_activity = found.last_activity or entry.last_activity
    entry.agent_cost_usd = found.cost_usd
    return entry


def _summary_qwen_code(path: Path) -> SourceEntry:
    """A Qwen Code file (:func:`engine.sources.qwen_code.light_summary`): one call per ``api_response`` event
    (summary calls apart); the project is the folder it ran in."""
    found = qwen_code.light_summary(path)
    project = Path(found.cwd).name if found.cwd else path.parent.parent.name
    return _entry("qwen-code", project, found.session_id, path, found.started, found.calls, found.last_prompt, None,
                  found.model, _one_line(found.title))


def _capture_part(path: Path) -> bool:
    """Whether ``path`` is a rolled-over part of a capture (``capture-….2.jsonl``: read with its first part)."""
    head, _, tail = path.stem.rpartition(".")
    return bool(head) and tail.isdigit()


def _summary_capture(path: Path) -> SourceEntry:
    """A capture of the recording proxy (:func:`engine.sources.capture.light_summary`, every part, resumable): its
    calls, the last one's prompt, the model's window where it is known (Claude, Gemini), titled by the first prompt
    the agent sent; the project is the folder the recorded agent ran in, else its program's name."""
    found = capture.light_summary(path)
    window: int | None = None
    if found.model.startswith("claude"):
        window = window_for_model(found.model, found.largest)[0]
    elif found.model.startswith(("gemini", "gemma", "models/")):
        window = gemini_cli.window_for_model(found.model)
    project = Path(found.cwd).name if found.cwd else found.agent
    entry = _entry("proxy-capture", project, found.session_id or path.stem, path, iso(found.started) or found.started,
                   found.calls, found.last_prompt, window, found.model, _one_line(found.title))
    entry.last_activity = iso(found.last_activity) or entry.last_activity
    return entry


def summarize(agent: Agent, path: Path) -> SourceEntry:
    if agent == "proxy-capture":
        return _summary_capture(path)
    if agent == "pi":
        return _summary_pi(path)
    if agent == "copilot-cli":
        return _summary_copilot(path)
    if agent == "cline":
        return _summary_cline(path)
    if agent == "qwen-code":
        return _summary_qwen_code(path)
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


def summarize_opencode(db: Path, cached: Mapping[str, Any] | None = None,
                       agent: Literal["opencode", "kilo"] = "opencode") -> dict[str, Any]:
    """Every top-level session of an OpenCode database (``agent``: or Kilo's, the same schema) as
    ``{session id: {"key": …, "entry": …}}``; a session whose key is in ``cached`` unchanged is not read again.
    A session that cannot be summarised (a damaged page of its rows, a value of a shape nothing foresaw) is
    ``{"key": …, "problem": reason}``, with the cached ``entry`` when there is one (shown as of the last read);
    the others are summarised all the same. SourceError when the database cannot be read now
    (:class:`engine.sources.sqlite_read.DatabaseBusy` when it stayed locked; else damaged, not OpenCode's: the
    reason)."""
    from engine.sources.model import LINE_ERRORS

    cached = cached or {}

    def work(conn: sqlite3.Connection) -> dict[str, Any]:
        sessions = {str(r["id"]): dict(r) for r in conn.execute("SELECT * FROM session")}
        stats = {str(r[0]): [int_or_none(r[1]) or 0, int_or_none(r[2]) or 0] for r in conn.execute(
            f"SELECT session_id, count(*), max({sqlite_read.time_order('time_updated')}) FROM message "
            "GROUP BY session_id")}
        children: dict[str, list[str]] = {}
        for sid, row in sessions.items():
            parent = row.get("parent_id")
            if parent and parent in sessions:
                children.setdefault(str(parent), []).append(sid)

        def key(sid: str) -> list[Any]:
            return [_key_value(sessions[sid].get("time_updated")), *stats.get(sid, [0, 0])]

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
            try:
                entry = _opencode_entry(conn, db, row, [sessions[c] for c in kids], stats.get(sid, [0, 0])[1], agent)
            except sqlite3.DatabaseError as exc:
                if not opencode.is_corrupt(exc):
                    raise  # a lock, a missing column: the database's problem, not this session's
                out[sid] = _session_problem(k, old, f"its rows cannot be read: {exc}")
                continue
            except LINE_ERRORS as exc:
                out[sid] = _session_problem(k, old, f"cannot be summarised ({type(exc).__name__}: {str(exc)[:80]})")
                continue
            out[sid] = {"key": k, "entry": entry.to_json()}
        return out

    return sqlite_read.with_retries(db, work)


def _session_problem(key: list[Any], old: Any, reason: str) -> dict[str, Any]:
    """The index item of a session that could not be summarised: the reason, and its last entry if any."""
    item: dict[str, Any] = {"key": key, "problem": reason}
    if isinstance(old, dict) and isinstance(old.get("entry"), dict):
        item["entry"] = old["entry"]
    return item


def _key_value(value: Any) -> Any:
    """A column's value as the index can keep it (JSON) and compare with the next scan's."""
    return value if value is None or (isinstance(value, int | str) and not isinstance(value, bool)) else repr(value)


def _opencode_entry(conn: sqlite3.Connection, db: Path, row: dict[str, Any], kids: list[dict[str, Any]],
                    newest_message: int, agent: Literal["opencode", "kilo"] = "opencode") -> SourceEntry:
    """One session's row: its calls are the step-finish parts of its assistant messages (not a compaction's
    summary), as :class:`engine.sources.opencode.OpenCodeReader` counts them (a failed message without one is
    a call of unknown size). Each row's JSON is parsed here, never by SQLite (whose ``json_extract`` fails the
    whole query on one malformed row): a row that does not parse is left out."""
    sid = str(row["id"])
    messages = conn.execute("SELECT id, time_created, data FROM message WHERE session_id = ? "
                            f"ORDER BY {sqlite_read.time_order('time_created')}, id", (sid,)).fetchall()
    finishes: dict[str, list[dict[str, Any]]] = {}
    for r in conn.execute("SELECT message_id, data FROM part WHERE session_id = ? AND data LIKE '%step-finish%' "
                          "ORDER BY id", (sid,)):
        part = _loads_value(r[1])
        if part.get("type") == "step-finish":
            finishes.setdefault(str(r[0]), []).append(part)
    calls, last_prompt, model, provider, title = 0, None, "", "", ""
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
        provider = str(info.get("providerID") or provider)
        for part in steps:
            tokens = dict_at(part, "tokens")
            fresh = int_or_none(tokens.get("input"))
            cache = dict_at(tokens, "cache")
            if fresh is not None:
                last_prompt = fresh + (int_or_none(cache.get("read")) or 0) + (int_or_none(cache.get("write")) or 0)
    dialect = kilo.KILO if agent == "kilo" else opencode.OPENCODE
    costs = [c for c in (dialect.cost(r.get("cost")) for r in [row, *kids]) if c is not None]
    directory = str(row.get("directory") or "")
    updated = max(int_or_none(row.get("time_updated")) or 0, newest_message)
    window = dialect.window(db, provider, model)[0] if dialect.window is not None and model else None
    entry = SourceEntry(agent, Path(directory).name if directory else "", sid,
                        str(opencode.opencode_path(db, sid)), _ms(row.get("time_created")), "", calls, last_prompt,
                        window, round(100.0 * last_prompt / window, 1) if last_prompt is not None and window else None,
                        model, title or _one_line(str(row.get("title") or "")),
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


def _scan_opencode(db: Path, old: Any, refresh: bool, problems: list[ScanProblem], index: Path | None = None,
                   agent: Literal["opencode", "kilo"] = "opencode") -> tuple[dict[str, Any] | None,
                                                                             list[SourceEntry], bool]:
    """(the index record, the entries, whether anything was read) of one database. A database that cannot be
    read now — locked by another process (after :data:`engine.sources.opencode.LOCK_WAIT`), damaged, not
    OpenCode's — is added to ``problems`` with the reason, and its sessions are shown as the index had them
    (also under ``refresh``, from ``index``), said so; it is read again at the next scan. A session that could
    not be summarised is a problem of its own (``<db>#<session id>``)."""
    stamp = opencode_stamp(db)
    old = _opencode_record(old)
    if stamp is None:
        return None, [], False
    if old is not None and old.get("stamp") == stamp and not refresh:
        record, read = old, False
    else:
        try:
            sessions = summarize_opencode(db, None if refresh or old is None else old["sessions"], agent)
        except (SourceError, ValueError, TypeError, KeyError, RecursionError, OSError, sqlite3.Error) as exc:
            if not isinstance(exc, SourceError):  # not foreseen by the reader: still this database's alone
                exc = SourceError(f"{shown_path(db)}: cannot be read ({type(exc).__name__}: {exc})")
            if old is None and refresh and index is not None:
                old = _opencode_record(_load_index(index).get(str(db)))
            shown = _entries_of(old)
            reason = str(exc).removeprefix(f"{shown_path(db)}: ")
            if isinstance(exc, sqlite_read.DatabaseBusy):
                reason = "locked by another process"
            reason += "; shown as of the last read" if shown else "; not read"
            problems.append(ScanProblem(agent, str(db), reason))
            return old, shown, False  # tried again at the next scan
        record, read = {"stamp": stamp, "sessions": sessions}, True
    for sid, item in record["sessions"].items():
        if isinstance(item, dict) and isinstance(item.get("problem"), str):
            shown_as = "; shown as of the last read" if isinstance(item.get("entry"), dict) else "; not listed"
            problems.append(ScanProblem(agent, str(opencode.opencode_path(db, sid)), item["problem"] + shown_as))
    return record, _entries_of(record), read


def _opencode_record(record: Any) -> dict[str, Any] | None:
    """An index record of a database (``{"stamp": …, "sessions": {…}}``), or None when ``record`` is none."""
    return record if isinstance(record, dict) and isinstance(record.get("sessions"), dict) else None


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
    files: dict[str, Any] = data["files"]
    return files


def _index_bytes(data: dict[str, Any]) -> bytes:
    """The index as compact JSON (no fsync: a cache). A path that is not UTF-8 (Python keeps its bytes as lone
    surrogates) is written as ``\\udcff`` escapes, which read back as the same path."""
    try:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _reason(exc: BaseException, path: Path) -> str:
    """What was wrong with ``path``, for a person (its name, which a message may begin with, left out: the
    problem names the path)."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"cannot read: {exc.strerror}"
    text = str(exc) or type(exc).__name__
    if isinstance(exc, RecursionError):
        text = "nested too deeply to be read"
    elif not isinstance(exc, SourceError):
        text = f"cannot be read ({type(exc).__name__}: {text[:120]})"
    return text.removeprefix(f"{path.name}: ")


def scan_sources(settings: Settings | None = None, *, refresh: bool = False, env: Mapping[str, str] | None = None,
                 home: Path | None = None, index: Path | None = None,
                 problems: list[ScanProblem] | None = None) -> list[SourceEntry]:
    """Every session found, newest first; unchanged files (same size and mtime) come from the index. A file
    that cannot be read is left out and, when ``problems`` is given, added to it with the reason."""
    problems = problems if problems is not None else []
    index = index or index_path()
    cached = {} if refresh else _load_index(index)
    files: dict[str, Any] = {}
    entries: list[SourceEntry | None] = []  # None: summarised after the walk (its place kept)
    pending: list[tuple[Agent, Path, list[int], int]] = []  # (kind, path, stamp, place in entries)
    changed = refresh
    for agent, folder in source_roots(settings, env, home):
        for kind, path in _files(agent, folder, problems):
            key = str(path)
            if key in files:
                continue
            if kind in ("opencode", "kilo"):
                record, found, read = _scan_opencode(path, cached.get(key), refresh, problems, index,
                                                     "kilo" if kind == "kilo" else "opencode")
                if record is not None:
                    files[key] = record
                changed = changed or read
                entries += found
                continue
            try:
                st = path.stat()
            except OSError as exc:
                if os.path.lexists(path):  # a link to nothing, a folder it may not enter: said (a file gone: not)
                    problems.append(ScanProblem(kind, key, _reason(exc, path)))
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
            files[key] = {}
            pending.append((kind, path, stamp, len(entries)))
            entries.append(None)
    for (kind, path, stamp, place), done in zip(pending, _summaries(pending), strict=True):
        key = str(path)
        try:
            entry = done.result()
        except Exception as exc:  # whatever one file does, the others are still listed
            problems.append(ScanProblem(kind, key, _reason(exc, path)))
            del files[key]
            continue
        changed = True
        files[key] = {"stamp": stamp, "entry": entry.to_json()}
        entries[place] = entry
    if changed or set(files) != set(cached):
        try:
            atomic_write_bytes(index, _index_bytes({"version": INDEX_VERSION, "files": files}), durable=False)
        except OSError:
            pass  # a read-only data dir: the next scan reads everything again
    found = _with_subagents_counted(_without_resume_stubs([e for e in entries if e is not None]))
    found.sort(key=lambda e: e.last_activity or e.started, reverse=True)
    return found


def _summary_job(job: tuple[Agent, Path]) -> SourceEntry:
    return summarize(*job)


def _summaries(pending: list[tuple[Agent, Path, list[int], int]]) -> Iterator[Future[SourceEntry]]:
    """The summaries of the ``pending`` files, in their order: spread over the machine's cores when there are many
    (:func:`engine.sources.spread.spread`), but the :data:`CLAUDE_SCANS_KEPT` most recently changed Claude Code files
    of those changed in the last :data:`LIVE_SECONDS` summarised here, so that their light pass is kept for their
    growth (:data:`_CLAUDE_SCANS`)."""
    from engine.sources.spread import run_here, spread, workers_for

    if not workers_for(len(pending), sum(stamp[0] for _, _, stamp, _ in pending)):
        return (run_here(_summary_job, (kind, path)) for kind, path, _, _ in pending)
    live = time.time_ns() - LIVE_SECONDS * 10**9
    recent = sorted((stamp[1], i) for i, (kind, _, stamp, _) in enumerate(pending)
                    if kind == "claude-code" and stamp[1] >= live)
    here = {i for _, i in recent[-CLAUDE_SCANS_KEPT:]}
    far = [i for i in range(len(pending)) if i not in here]
    futures = spread(_summary_job, [pending[i][:2] for i in far], [pending[i][2][0] for i in far])
    done = {i: run_here(_summary_job, pending[i][:2]) for i in sorted(here)}  # while the workers work
    return (done[i] if i in here else next(futures) for i in range(len(pending)))


def _with_subagents_counted(entries: list[SourceEntry]) -> list[SourceEntry]:
    """A Codex subagent's rollout whose parent session is listed is counted with it (``subagents``), not listed: the
    parent's import reads it (its calls with the parent's, once). One whose parent is not listed stays listed."""
    parents = {e.session_id: e for e in entries if e.agent == "codex" and not e.parent_id}
    out = []
    for entry in entries:
        parent = parents.get(entry.parent_id) if entry.agent == "codex" and entry.parent_id else None
        if parent is None:
            out.append(entry)
        else:
            parent.subagents += 1
    return out


def _without_resume_stubs(entries: list[SourceEntry]) -> list[SourceEntry]:
    """Gemini CLI's ``--resume`` first starts a file of its own under the resumed session's id (named by the
    minute), then writes the conversation on into the resumed file: a resume in a later minute leaves that
    stub, holding the ``<session_context>`` and nothing else. Such a file (no call, no prompt) whose session id
    another file of the session holds is not listed; Gemini CLI's own session list leaves it out too."""
    held = {e.session_id for e in entries if e.agent == "gemini-cli" and (e.calls or e.title)}
    return [e for e in entries
            if not (e.agent == "gemini-cli" and not e.calls and not e.title and e.session_id in held)]


def format_table(entries: list[SourceEntry]) -> str:
    """A plain-text table for the terminal."""
    if not entries:
        return ("No agent sessions found (Claude Code: ~/.claude/projects, Codex: ~/.codex/sessions, "
                "Gemini CLI: ~/.gemini/tmp, OpenCode: ~/.local/share/opencode, Pi: ~/.pi/agent/sessions, "
                "Copilot CLI: ~/.copilot/session-state, Cline: ~/.cline/data/sessions, Qwen Code: ~/.qwen/projects, "
                "Kilo CLI: ~/.local/share/kilo).")
    head = ("agent", "project", "session", "started", "last activity", "calls", "last prompt", "window",
            "% full", "path")
    rows = [head]
    for e in entries:
        rows.append((e.agent, shown_path(e.project)[:28], shown_path(e.session_id)[:13],
                     e.started[:16].replace("T", " "), e.last_activity[:16].replace("T", " "), str(e.calls),
                     "" if e.last_prompt_tokens is None else str(e.last_prompt_tokens),
                     "" if e.window is None else str(e.window),
                     "" if e.percent_full is None else f"{e.percent_full:.1f}", shown_path(e.path)))
    shown = [[printable(c) for c in r] for r in rows]  # names, paths and times from other agents' files, escaped
    widths = [max(len(r[i]) for r in shown) for i in range(len(head) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1] for r in shown)
