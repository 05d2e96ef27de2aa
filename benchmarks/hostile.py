"""Hostile input, from the command line (issue 26's method): one hostile thing among good sessions per case.

``python -m benchmarks hostile`` (or ``python -m benchmarks.hostile [--json] [--tree DIR] [--only WORD]``).

Each case builds a home of its own (``HOME``, ``CTXBENCH_DATA_DIR``, ``CTXBENCH_CONFIG_DIR``, ``CLAUDE_CONFIG_DIR``,
``CODEX_HOME``, ``GEMINI_CLI_HOME``, ``XDG_DATA_HOME`` all inside it) holding the good corpus — copies of three of
the shared Claude Code sessions and two of the shared Codex rollouts, two Gemini CLI chats and an OpenCode
database of three sessions made here in the shapes the project's tests make them — plants one hostile thing,
and runs ``ctxbench`` (``python -m app.cli`` of the tree measured, ``--tree``: another checkout, such as the code
before a change) as a subprocess with a time limit (:data:`TIMEOUT`; every process in its own process group and
under a 4 GiB address-space limit, so a runaway read fails instead of taking the machine). The verdict per case:

- **crash**: a non-zero exit status (a one-line error or a traceback: one bad thing stopped the command) or
  output that is not what the command prints;
- **hang**: over the time limit;
- **silent loss**: exit 0, but a good session is missing from ``sources --json``, or ``usage --by session --json``
  counts fewer calls for a good session than the same corpus without the hostile thing (measured once per run:
  the baseline), or the hostile file's own readable calls are missing — and no warning on stderr names the file
  (a good file the case damaged may be left out, or lose calls, only when a warning names it);
- **unescaped** (terminal cases): what is printed holds a raw ESC, C0, DEL, C1 or bidi control;
- **held** otherwise.

The table per group (cases / crashes / hangs / silent loss / unescaped / held) and the total are printed, or
``--json``.
Cases run one after another (2 cores); the whole run takes a few minutes (hangs cost :data:`TIMEOUT` each).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pty
import random
import re
import resource
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.engine_bench import Figure

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "data" / "sessions"
CLAUDE_FILES = ("short.jsonl", "tool_heavy.jsonl", "subagent.jsonl")
CODEX_FILES = ("rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl",
               "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl")
BIG_CLAUDE = "258c7280-ae70-4798-800f-63464d01a85d.jsonl"  # the kill cases need a refresh that takes a while
TIMEOUT = 20.0
MEMORY_LIMIT = 4 * 1024**3
VERDICTS = ("crash", "hang", "silent loss", "unescaped", "held")

# one of each thing a terminal acts on: OSC 52 (clipboard write), OSC 0 (window title), clear screen, CR, BEL,
# backspace, DEL, C1 (8-bit CSI, OSC, ST), bidi override and isolate
CONTROLS = ("\x1b]52;c;aGVsbG8=\x07", "\x1b]0;pwned\x07", "\x1b[2J", "\r", "\x07", "\x08", "\x7f",
            "\x9b31m", "\x9d0;t\x9c", "\u202e", "\u2066", "\u2069")
HOSTILE_TEXT = "evil" + "".join(CONTROLS) + "name"
# what must never reach a terminal raw: C0 but the newline, DEL, C1, bidi controls
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


# --------------------------------------------------------------------------- generators


def claude_session(session_id: str, *, calls: int = 3, cwd: str = "/work/proj", model: str = "claude-sonnet-4-5",
                   tool: str = "Bash", prompt: str = "list the files", result: str = "a.txt\nb.txt",
                   tag: str = "h") -> list[str]:
    """A Claude Code session file's lines: a prompt, then ``calls`` responses, each but the last calling ``tool``
    and answered by its result. Every id carries ``tag`` (two files never share a call). The first call's
    ``input_tokens`` is 4242 (:func:`replace_value` puts a hostile value there)."""
    base = {"isSidechain": False, "userType": "external", "cwd": cwd, "sessionId": session_id, "version": "2.1.38",
            "gitBranch": "main"}
    lines: list[dict[str, Any]] = []
    parent: str | None = None

    def add(kind: str, sec: int, **fields: Any) -> None:
        nonlocal parent
        uid = f"{tag}-{len(lines):04d}-0000-0000-000000000000"
        lines.append({**base, "parentUuid": parent, "type": kind, "uuid": uid,
                      "timestamp": f"2026-03-01T10:{sec // 60:02d}:{sec % 60:02d}.000Z", **fields})
        parent = uid

    add("user", 0, message={"role": "user", "content": prompt})
    for i in range(calls):
        last = i == calls - 1
        content: list[dict[str, Any]] = ([{"type": "text", "text": "Done."}] if last else
                                         [{"type": "tool_use", "id": f"toolu_{tag}{i}", "name": tool,
                                           "input": {"command": "ls"}}])
        usage = {"input_tokens": 4242 if i == 0 else 10 + i, "cache_creation_input_tokens": 100,
                 "cache_read_input_tokens": 1000 * i, "output_tokens": 20 + i}
        add("assistant", 2 * i + 1, requestId=f"req_{tag}{i}",
            message={"model": model, "id": f"msg_{tag}{i}", "type": "message", "role": "assistant",
                     "content": content, "stop_reason": "end_turn" if last else "tool_use", "usage": usage})
        if not last:
            add("user", 2 * i + 2, message={"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{tag}{i}", "content": result}]})
    return [json.dumps(line, ensure_ascii=False) for line in lines]


def codex_session(session_id: str, *, calls: int = 3, cwd: str = "/work/proj", model: str = "gpt-5.3-codex",
                  tag: str = "h") -> list[str]:
    """A Codex rollout's lines: meta, turn context, a prompt, ``calls`` token counts (each twice, as Codex
    writes them) with a function call between them. The first call's ``input_tokens`` is 4242."""
    ts = "2026-03-01T11:00:00.000Z"
    out: list[dict[str, Any]] = [
        {"timestamp": ts, "type": "session_meta", "payload": {"id": session_id, "timestamp": ts, "cwd": cwd,
                                                              "originator": "codex_cli_rs", "cli_version": "0.169.0"}},
        {"timestamp": ts, "type": "turn_context", "payload": {"turn_id": f"turn-{tag}", "cwd": cwd, "model": model}},
        {"timestamp": ts, "type": "response_item",
         "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]}},
    ]
    total = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0, "reasoning_output_tokens": 0,
             "total_tokens": 0}
    for i in range(calls):
        sec = f"2026-03-01T11:00:{2 * i + 1:02d}.000Z"
        last = {"input_tokens": 4242 if i == 0 else 3000 + i, "cached_input_tokens": 1000 * i, "output_tokens": 50,
                "reasoning_output_tokens": 10, "total_tokens": 3050 + i}
        total = {k: total[k] + last[k] for k in total}
        out.append({"timestamp": sec, "type": "response_item",
                    "payload": {"type": "function_call", "name": "exec_command", "arguments": "{\"cmd\": \"ls\"}",
                                "call_id": f"call_{tag}{i}"}})
        count = {"timestamp": sec, "type": "event_msg",
                 "payload": {"type": "token_count", "info": {"total_token_usage": dict(total),
                                                             "last_token_usage": last,
                                                             "model_context_window": 258400}}}
        out += [count, count]
        out.append({"timestamp": sec, "type": "response_item",
                    "payload": {"type": "function_call_output", "call_id": f"call_{tag}{i}", "output": "a.txt"}})
    return [json.dumps(line, ensure_ascii=False) for line in out]


def gemini_session(session_id: str, *, calls: int = 3, tag: str = "h", model: str = "gemini-2.5-pro") -> list[str]:
    """A Gemini CLI chat's lines (the shape tests/engine/sources/test_gemini_cli.py makes): the header, then per
    call a prompt and a response with its ``tokens``. The first call's ``input`` is 4242."""
    out: list[dict[str, Any]] = [
        {"sessionId": session_id, "projectHash": "h", "startTime": "2026-03-01T12:00:00.000Z",
         "lastUpdated": "2026-03-01T12:00:00.000Z", "kind": "main"},
        {"$set": {"messages": [{"id": f"{tag}ctx", "timestamp": "2026-03-01T12:00:00.000Z", "type": "user",
                                "content": [{"text": "<session_context>\n- **Workspace Directories:**\n  - /work/proj"
                                                     "\n</session_context>"}]}]}},
    ]
    for i in range(calls):
        out.append({"id": f"{tag}u{i}", "timestamp": f"2026-03-01T12:00:{2 * i + 1:02d}.000Z", "type": "user",
                    "content": [{"text": f"question {i}"}]})
        prompt = 4242 if i == 0 else 1000 + 100 * i
        out.append({"id": f"{tag}g{i}", "timestamp": f"2026-03-01T12:00:{2 * i + 2:02d}.000Z", "type": "gemini",
                    "content": f"answer {i}", "thoughts": [], "model": model,
                    "tokens": {"input": prompt, "output": 10, "cached": 0, "thoughts": 0, "tool": 0,
                               "total": prompt + 10}})
    return [json.dumps(line, ensure_ascii=False) for line in out]


OPENCODE_SCHEMA = """
CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL, parent_id text, slug text NOT NULL,
  directory text NOT NULL, title text NOT NULL, version text NOT NULL, cost real DEFAULT 0 NOT NULL,
  tokens_input integer DEFAULT 0 NOT NULL, tokens_output integer DEFAULT 0 NOT NULL,
  tokens_cache_read integer DEFAULT 0 NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL);
CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL, time_created integer NOT NULL,
  time_updated integer NOT NULL, data text NOT NULL);
CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL,
  time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
CREATE TABLE event (id text PRIMARY KEY, aggregate_id text NOT NULL, seq integer NOT NULL, type text NOT NULL,
  data text NOT NULL);
"""
OPENCODE_SESSIONS = ("ses_alpha", "ses_beta", "ses_gamma")


def opencode_db(path: Path, sessions: tuple[str, ...] = OPENCODE_SESSIONS, calls: int = 2, wal: bool = True,
                directory: str = "/work/proj") -> None:
    """An OpenCode database (the columns of OpenCode 1.18's schema the reader uses, as
    tests/engine/sources/test_opencode.py makes them): per session a prompt and ``calls`` assistant messages,
    each one step (step-start, text, step-finish with its tokens)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(OPENCODE_SCHEMA)
    t = 1_790_000_000_000
    for sid in sessions:
        t += 10
        conn.execute("INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, cost, "
                     "time_created, time_updated) VALUES (?, 'global', NULL, 'slug', ?, ?, '1.18.33', 0.5, ?, ?)",
                     (sid, directory, f"work on {sid}", t, t))

        def row(table: str, rid: str, data: dict[str, Any], mid: str = "", sid: str = sid) -> None:
            nonlocal t
            t += 10
            if table == "message":
                conn.execute("INSERT INTO message (id, session_id, time_created, time_updated, data) "
                             "VALUES (?, ?, ?, ?, ?)", (rid, sid, t, t, json.dumps(data)))
            else:
                conn.execute("INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) "
                             "VALUES (?, ?, ?, ?, ?, ?)", (rid, mid, sid, t, t, json.dumps(data)))

        user = f"msg_{sid}_u"
        row("message", user, {"role": "user", "time": {"created": t}, "agent": "build",
                              "model": {"providerID": "local", "modelID": "m1"}})
        row("part", f"prt_{user}_0", {"type": "text", "text": "Run a command"}, user)
        for i in range(calls):
            mid = f"msg_{sid}_a{i}"
            tok = {"total": 1000 + i, "input": 900 + i, "output": 10, "reasoning": 0, "cache": {"read": 90, "write": 0}}
            row("message", mid, {"role": "assistant", "parentID": user, "modelID": "m1", "providerID": "local",
                                 "mode": "build", "time": {"created": t, "completed": t + 5}, "cost": 0.01,
                                 "tokens": tok})
            row("part", f"prt_{mid}_0", {"type": "step-start"}, mid)
            row("part", f"prt_{mid}_1", {"type": "text", "text": f"answer {i}"}, mid)
            row("part", f"prt_{mid}_2", {"type": "step-finish", "reason": "stop", "cost": 0.01, "tokens": tok}, mid)
    conn.close()


def write_lines(path: Path, lines: list[str], *, newline_at_end: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(("\n".join(lines) + ("\n" if newline_at_end else "")).encode("utf-8", "surrogateescape"))
    return path


def replace_value(lines: list[str], key: str, value: str, old: str = "4242") -> list[str]:
    """The lines with the first ``"key": old`` written as ``"key": value`` (raw JSON text: NaN, 1e999, …)."""
    text = "\n".join(lines)
    needle = f'"{key}": {old}'
    assert needle in text, needle
    return text.replace(needle, f'"{key}": {value}', 1).split("\n")


# --------------------------------------------------------------------------- a case's home


@dataclass
class Home:
    """The folders of one case; the environment its commands run with."""

    root: Path
    tree: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def claude(self) -> Path:
        return self.home / ".claude" / "projects" / "-work-spotter"

    @property
    def codex(self) -> Path:
        return self.home / ".codex" / "sessions" / "2026" / "03" / "01"

    @property
    def gemini(self) -> Path:
        return self.home / ".gemini" / "tmp" / "proj-a" / "chats"

    @property
    def opencode(self) -> Path:
        return self.home / ".local" / "share" / "opencode" / "opencode.db"

    data: Path = field(init=False)

    def __post_init__(self) -> None:
        self.data = self.root / "data"

    @property
    def index(self) -> Path:
        return self.data / "usage"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CLAUDE_", "CODEX_", "GEMINI_", "CTXBENCH_", "XDG_"))}
        env.update(HOME=str(self.home), CTXBENCH_DATA_DIR=str(self.data), CTXBENCH_CONFIG_DIR=str(self.root / "config"),
                   CLAUDE_CONFIG_DIR=str(self.home / ".claude"), CODEX_HOME=str(self.home / ".codex"),
                   GEMINI_CLI_HOME=str(self.home), XDG_DATA_HOME=str(self.home / ".local" / "share"),
                   PYTHONPATH=str(self.tree), LITELLM_LOCAL_MODEL_COST_MAP="True",
                   PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
        return env


def build_corpus(home: Home, big: bool = False) -> None:
    """The good sessions: copies of shared Claude Code and Codex files, two Gemini CLI chats, an OpenCode database."""
    home.claude.mkdir(parents=True)
    for name in (*CLAUDE_FILES, *((BIG_CLAUDE,) if big else ())):
        shutil.copyfile(SHARED / "claude-code" / name, home.claude / name)
    home.codex.mkdir(parents=True)
    for name in CODEX_FILES:
        shutil.copyfile(SHARED / "codex" / name, home.codex / name)
    for n in range(2):
        write_lines(home.gemini / f"session-2026-03-01T12-0{n}-good000{n}.jsonl",
                    gemini_session(f"good-gemini-{n}", tag=f"gg{n}"))
    opencode_db(home.opencode)
    (home.root / "config").mkdir()


@dataclass
class Result:
    code: int | None  # None: killed at the time limit
    stdout: str
    stderr: str
    seconds: float


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _end(proc: subprocess.Popen[Any]) -> None:
    """Kill ``proc``'s process group (each command is started in a group of its own)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


# root ignores file permissions: a command meant to meet a read-only folder runs without the capabilities that
# let it (as a plain user it needs nothing)
NO_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"] if os.geteuid() == 0 else []


def start(home: Home, *args: str, readonly: bool = False, stdout: Any = subprocess.PIPE) -> subprocess.Popen[bytes]:
    """``ctxbench ARGS`` of the tree measured, in the case's home (``readonly``: obeying file permissions even as
    root)."""
    return subprocess.Popen([*(NO_OVERRIDE if readonly else []), sys.executable, "-m", "app.cli", *args],
                            cwd=home.tree, env=home.env(), stdout=stdout, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_limits)


def finish(proc: subprocess.Popen[bytes], started: float, timeout: float | None = None) -> Result:
    """Wait for ``proc`` until ``timeout`` (:data:`TIMEOUT`) after ``started``; killed then (``code`` None)."""
    timeout = TIMEOUT if timeout is None else timeout
    try:
        out, err = proc.communicate(timeout=max(0.1, timeout - (time.monotonic() - started)))
    except subprocess.TimeoutExpired:
        _end(proc)
        out, err = proc.communicate()
        return Result(None, out.decode("utf-8", "replace") if out else "", err.decode("utf-8", "replace"),
                      time.monotonic() - started)
    return Result(proc.returncode, (out or b"").decode("utf-8", "surrogateescape"),
                  err.decode("utf-8", "surrogateescape"), time.monotonic() - started)


def ctxbench(home: Home, *args: str, timeout: float | None = None, readonly: bool = False) -> Result:
    t0 = time.monotonic()
    return finish(start(home, *args, readonly=readonly), t0, timeout)


# --------------------------------------------------------------------------- verdicts


@dataclass
class Verdict:
    verdict: str
    detail: str = ""


@dataclass
class Baseline:
    """What the good corpus gives, read by the tree measured: its sessions' paths and calls per session."""

    paths: set[str]
    calls: dict[str, int]  # "agent session_id" → calls
    total: int


def _sessions(result: Result, home: Home) -> set[str]:
    """The sessions' paths, relative to the case's folder (every case has its own)."""
    prefix = str(home.root) + "/"
    docs = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    return {d["path"].removeprefix(prefix) for d in docs if d.get("type", "source") == "source"}  # not "unreadable"


def _usage(result: Result) -> tuple[dict[str, int], int]:
    doc = json.loads(result.stdout)
    calls: dict[str, int] = {}
    for g in doc["groups"]:
        key = f"{g.get('agent')} {g.get('session_id')}"
        calls[key] = calls.get(key, 0) + int(g["calls"])
    return calls, int((doc.get("total") or {}).get("calls") or 0)


def measure_baseline(tree: Path, work: Path) -> Baseline:
    home = Home(Path(tempfile.mkdtemp(prefix="baseline-", dir=work)), tree)
    build_corpus(home)
    src = ctxbench(home, "sources", "--json", timeout=120)
    use = ctxbench(home, "usage", "--by", "session", "--json", timeout=120)
    if src.code != 0 or use.code != 0:
        raise RuntimeError(f"the good corpus does not read: {src.stderr[-300:]} {use.stderr[-300:]}")
    calls, total = _usage(use)
    return Baseline(_sessions(src, home), calls, total)


def _failed(result: Result, what: str) -> Verdict | None:
    if result.code is None:
        return Verdict("hang", f"{what}: over {TIMEOUT:.0f} s")
    if result.code != 0 or "Traceback" in result.stderr:
        last = (result.stderr.strip().splitlines() or ["(no message)"])[-1]
        return Verdict("crash", f"{what}: exit {result.code}: {last[:160]}")
    return None


@dataclass
class Planted:
    """What a case planted: ``token`` is in the hostile file's name (a warning naming it contains it); ``damaged``
    are good paths it damaged (their sessions may go if a warning names them); ``expect``: session key → calls the
    hostile file still holds readably (fewer, unless named, is a loss)."""

    token: str
    damaged: tuple[str, ...] = ()
    expect: dict[str, int] = field(default_factory=dict)
    helpers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    readonly: bool = False  # the commands obey file permissions (see NO_OVERRIDE)
    shortened: bool = False  # the damage removed calls from a good file (truncated): only its listing is checked
    damaged_keys: tuple[str, ...] = ()  # usage keys of the damaged files' sessions where no clean copy names them


def _named(stderr: str, *names: str) -> bool:
    text = stderr.replace("\\", "")
    return any(n and (n in stderr or n in text) for n in names)


def scan_verdict(home: Home, planted: Planted, base: Baseline) -> Verdict:
    """``sources --json`` then ``usage --by session --json``: the good sessions all there, with all their calls."""
    src = ctxbench(home, "sources", "--json", readonly=planted.readonly)
    if bad := _failed(src, "sources"):
        return bad
    try:
        paths = _sessions(src, home)
    except (ValueError, KeyError) as exc:
        return Verdict("crash", f"sources printed something else: {exc}")
    rel = [d.removeprefix(str(home.root) + "/") for d in planted.damaged]
    damaged = {p for p in base.paths if any(p == d or p.startswith(d + "#") for d in rel)}
    said = src.stderr + "".join(line for line in src.stdout.splitlines() if '"type": "source"' not in line)
    excused = damaged if _named(said, planted.token, *(Path(d).name for d in planted.damaged)) else set()
    missing = sorted(base.paths - paths - excused)
    if missing:
        return Verdict("silent loss", f"sources: {len(missing)} good session(s) missing: {Path(missing[0]).name}")
    use = ctxbench(home, "usage", "--by", "session", "--json", readonly=planted.readonly)
    if bad := _failed(use, "usage"):
        return bad
    try:
        calls, _ = _usage(use)
    except (ValueError, KeyError, TypeError) as exc:
        return Verdict("crash", f"usage printed something else: {exc}")
    said = use.stderr + json.dumps(json.loads(use.stdout).get("index"), ensure_ascii=False)  # or in its report
    named = _named(said, planted.token, *(Path(d).name for d in planted.damaged))
    damaged_keys = _damaged_keys(home, planted, base) if named or planted.shortened else set()
    short = {k: (calls.get(k, 0), n) for k, n in base.calls.items() if calls.get(k, 0) < n and k not in damaged_keys}
    short |= {k: (calls.get(k, 0), n) for k, n in planted.expect.items() if calls.get(k, 0) < n and not named}
    if short:
        key, (got, want) = next(iter(short.items()))
        return Verdict("silent loss", f"usage: {len(short)} session(s) short, {key}: {got} of {want} calls")
    return Verdict("held")


def _damaged_keys(home: Home, planted: Planted, base: Baseline) -> set[str]:
    """The usage keys of the sessions in damaged files (read from the clean copies: ids do not change)."""
    keys = set(planted.damaged_keys)
    for key in base.calls:
        agent, sid = key.split(" ", 1)
        for d in planted.damaged:
            if sid in d or (agent == "opencode" and "opencode.db" in d) or _file_session(Path(d)) == sid:
                keys.add(key)
    return keys


def _file_session(path: Path) -> str:
    """The session id a shared file's clean copy names (Claude Code: ``sessionId``; Codex: ``session_meta``)."""
    source = SHARED / ("claude-code" if path.suffix == ".jsonl" and not path.name.startswith("rollout-") else
                       "codex") / path.name
    if not source.is_file():
        return ""
    with source.open(encoding="utf-8") as fh:
        for line in fh:
            with contextlib.suppress(ValueError):
                obj = json.loads(line)
                sid = obj.get("sessionId") or (obj.get("payload") or {}).get("id")
                if isinstance(sid, str):
                    return sid
    return ""


def terminal_verdict(result: Result, what: str, stream: str = "stdout", shown: bool = True) -> Verdict:
    """Held when ``stream`` has no raw control character (else "unescaped") and, with ``shown``, still names the
    hostile text (escaped, not dropped: else "silent loss")."""
    if bad := _failed(result, what):
        return bad
    text = result.stdout if stream == "stdout" else result.stderr
    if m := RAW_CONTROL.search(text):
        return Verdict("unescaped", f"{what}: raw {m.group()!r} on {stream}")
    if shown and "evil" not in text:
        return Verdict("silent loss", f"{what}: the names are not shown at all")
    return Verdict("held")


# --------------------------------------------------------------------------- cases


@dataclass
class Case:
    group: str
    name: str
    run: Callable[[Home, Baseline], Verdict]
    quick: bool = False  # cheap and fixed in the tree: the smoke test runs it


CASES: list[Case] = []


def case(group: str, name: str, quick: bool = False) -> Callable[[Callable[[Home, Baseline], Verdict]],
                                                                  Callable[[Home, Baseline], Verdict]]:
    def add(fn: Callable[[Home, Baseline], Verdict]) -> Callable[[Home, Baseline], Verdict]:
        CASES.append(Case(group, name, fn, quick))
        return fn
    return add


def planted_case(group: str, name: str, plant: Callable[[Home], Planted], quick: bool = False) -> None:
    """A case that plants something, then runs the scan verdict (helper processes ended after it)."""
    def run(home: Home, base: Baseline) -> Verdict:
        planted = plant(home)
        try:
            return scan_verdict(home, planted, base)
        finally:
            for helper in planted.helpers:
                _end(helper)
    CASES.append(Case(group, name, run, quick))


HOSTILE_NUMBERS = {"NaN": "NaN", "Infinity": "Infinity", "-5": "-5", "2^70": str(2**70), "1e999": "1e999",
                   "text": '"12"', "null": "null", "a list": "[1]"}


def _claude_file(home: Home, token: str, lines: list[str], *, newline_at_end: bool = True) -> Path:
    return write_lines(home.claude / f"{token}.jsonl", lines, newline_at_end=newline_at_end)


def _add_claude_number_cases() -> None:
    for label, raw in HOSTILE_NUMBERS.items():
        def plant(home: Home, raw: str = raw, label: str = label) -> Planted:
            token = f"hostile-cc-{re.sub(r'[^a-z0-9]', '', label.lower())}"
            _claude_file(home, token, replace_value(claude_session(f"{token}-id", tag=token), "input_tokens", raw))
            return Planted(token)
        planted_case("Claude Code", f"input_tokens {label}", plant, quick=label in ("NaN", "-5"))
    for label, raw in (("NaN", "NaN"), ("2^70", str(2**70))):
        def plant_out(home: Home, raw: str = raw, label: str = label) -> Planted:
            token = f"hostile-cc-out{re.sub(r'[^a-z0-9]', '', label.lower())}"
            _claude_file(home, token, replace_value(claude_session(f"{token}-id", tag=token), "output_tokens", raw,
                                                    old="20"))
            return Planted(token)
        planted_case("Claude Code", f"output_tokens {label}", plant_out)


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _add_line_cases() -> None:
    """Damaged lines in a Claude Code, Codex and Gemini CLI file (planted beside the good ones)."""
    def plant_deep_last(home: Home) -> Planted:
        token = "hostile-cc-deep"
        lines = claude_session(f"{token}-id", tag=token)
        _claude_file(home, token, [*lines, '{"type": "user", "message": ' + _deep(20_000) + "}"])
        return Planted(token, expect={f"claude-code {token}-id": 3})
    planted_case("Claude Code", "last line nested 20,000 deep", plant_deep_last, quick=True)

    def plant_deep_middle(home: Home) -> Planted:
        token = "hostile-cc-deepmid"
        lines = claude_session(f"{token}-id", tag=token)
        _claude_file(home, token, [lines[0], _deep(50_000), *lines[1:]])
        return Planted(token, expect={f"claude-code {token}-id": 3})
    planted_case("Claude Code", "a line nested 50,000 deep mid-file", plant_deep_middle)

    def plant_raw_control(home: Home) -> Planted:
        token = "hostile-cc-rawctl"
        lines = claude_session(f"{token}-id", tag=token, result="a\x01b")
        _claude_file(home, token, [line.replace("\\u0001", "\x01") for line in lines])
        return Planted(token, expect={f"claude-code {token}-id": 3})
    planted_case("Claude Code", "a raw control character in a JSON string", plant_raw_control, quick=True)

    def plant_no_newline(home: Home) -> Planted:
        token = "hostile-cc-nonl"
        _claude_file(home, token, claude_session(f"{token}-id", tag=token), newline_at_end=False)
        return Planted(token, expect={f"claude-code {token}-id": 3})
    planted_case("Claude Code", "last line without a newline", plant_no_newline)

    def plant_shapes(home: Home) -> Planted:
        token = "hostile-cc-shapes"
        lines = claude_session(f"{token}-id", tag=token, calls=4)
        odd = ["[]", "null", "42", '"text"', '{"type": "assistant", "message": []}',
               '{"type": "assistant", "message": {"usage": "many", "id": 5, "content": 7}, "requestId": []}',
               '{"type": ["user"], "uuid": {}}']
        _claude_file(home, token, [lines[0], *odd, *lines[1:]])
        return Planted(token, expect={f"claude-code {token}-id": 4})
    planted_case("Claude Code", "lines of the wrong shape (array, null, usage as text)", plant_shapes, quick=True)

    def plant_latin1(home: Home) -> Planted:
        token = "hostile-cc-latin1"
        lines = claude_session(f"{token}-id", tag=token, result="caf\udce9")  # written as the byte 0xE9
        _claude_file(home, token, lines)
        return Planted(token, expect={f"claude-code {token}-id": 3})
    planted_case("Claude Code", "a byte that is not UTF-8 in a JSON string", plant_latin1)

    def plant_bom(home: Home) -> Planted:
        token = "hostile-cc-bom"
        lines = claude_session(f"{token}-id", tag=token)
        _claude_file(home, token, ["\ufeff" + lines[0], *lines[1:]])
        return Planted(token, expect={f"claude-code {token}-id": 3})
    planted_case("Claude Code", "a byte-order mark before the first line", plant_bom)

    def plant_huge_line(home: Home) -> Planted:
        token = "hostile-cc-hugeline"
        path = home.claude / f"{token}.jsonl"
        with path.open("wb") as fh:
            fh.write(("\n".join(claude_session(f"{token}-id", tag=token)) + "\n").encode())
            fh.write(b'{"type": "user", "message": {"role": "user", "content": "')
            chunk = b"A" * (1024 * 1024)
            for _ in range(100):
                fh.write(chunk)  # 100 MB without a newline (deleted with the case)
        return Planted(token, expect={f"claude-code {token}-id": 3})
    planted_case("Claude Code", "a line of 100 MB without a newline", plant_huge_line)

    def plant_binary(home: Home) -> Planted:
        token = "hostile-cc-binary"
        (home.claude / f"{token}.jsonl").write_bytes(random.Random(7).randbytes(1024 * 1024))
        return Planted(token)
    planted_case("Claude Code", "1 MB of random bytes named .jsonl", plant_binary)

    def plant_empty(home: Home) -> Planted:
        token = "hostile-cc-empty"
        (home.claude / f"{token}.jsonl").write_bytes(b"")
        (home.claude / f"{token}-blank.jsonl").write_bytes(b"\n" * 100_000)
        return Planted(token)
    planted_case("Claude Code", "an empty file and a file of empty lines", plant_empty, quick=True)

    for label, mutate in (("truncated mid-line", _truncate), ("bytes flipped", _flip), ("lines shuffled", _shuffle)):
        def plant_damaged(home: Home, mutate: Callable[[Path], None] = mutate) -> Planted:
            victim = home.claude / "subagent.jsonl"
            mutate(victim)
            return Planted("subagent.jsonl", damaged=(str(victim),), shortened=mutate is _truncate)
        planted_case("Claude Code", f"a good file {label}", plant_damaged)

    # Codex
    for label, raw in (("NaN", "NaN"), ("Infinity", "Infinity"), ("-5", "-5"), ("2^70", str(2**70)),
                       ("text", '"12"')):
        def plant_codex(home: Home, raw: str = raw, label: str = label) -> Planted:
            token = f"hostile-cx-{re.sub(r'[^a-z0-9]', '', label.lower())}"
            lines = replace_value(codex_session(f"{token}-id", tag=token), "input_tokens", raw)
            write_lines(home.codex / f"rollout-2026-03-01T11-00-00-{token}.jsonl", lines)
            return Planted(token)
        planted_case("Codex", f"input_tokens {label}", plant_codex, quick=label == "NaN")

    def plant_codex_deep(home: Home) -> Planted:
        token = "hostile-cx-deep"
        lines = codex_session(f"{token}-id", tag=token)
        write_lines(home.codex / f"rollout-2026-03-01T11-00-00-{token}.jsonl",
                    [*lines, '{"type": "event_msg", "payload": ' + _deep(20_000) + "}"])
        return Planted(token, expect={f"codex {token}-id": 3})
    planted_case("Codex", "last line nested 20,000 deep", plant_codex_deep, quick=True)

    def plant_codex_shapes(home: Home) -> Planted:
        token = "hostile-cx-shapes"
        lines = codex_session(f"{token}-id", tag=token)
        odd = ['{"type": "event_msg", "payload": null}', '{"type": "event_msg", "payload": {"type": "token_count", '
               '"info": [1, 2]}}', '{"type": "turn_context", "payload": {"model": 5}}', "[]"]
        write_lines(home.codex / f"rollout-2026-03-01T11-00-00-{token}.jsonl", [*lines[:3], *odd, *lines[3:]])
        return Planted(token, expect={f"codex {token}-id": 3})
    planted_case("Codex", "lines of the wrong shape (payload null, info a list)", plant_codex_shapes, quick=True)

    for label, mutate in (("truncated mid-line", _truncate), ("bytes flipped", _flip)):
        def plant_codex_damaged(home: Home, mutate: Callable[[Path], None] = mutate) -> Planted:
            victim = home.codex / CODEX_FILES[1]
            mutate(victim)
            return Planted(CODEX_FILES[1], damaged=(str(victim),), shortened=mutate is _truncate)
        planted_case("Codex", f"a good rollout {label}", plant_codex_damaged)

    # Gemini CLI
    for label, raw in (("NaN", "NaN"), ("Infinity", "Infinity"), ("-5", "-5"), ("2^70", str(2**70)),
                       ("text", '"12"')):
        def plant_gemini(home: Home, raw: str = raw, label: str = label) -> Planted:
            token = f"hostile-gm-{re.sub(r'[^a-z0-9]', '', label.lower())}"
            lines = replace_value(gemini_session(f"{token}-id", tag=token), "input", raw)
            write_lines(home.gemini / f"session-2026-03-01T12-00-{token}.jsonl", lines)
            return Planted(token)
        planted_case("Gemini CLI", f"tokens.input {label}", plant_gemini, quick=label == "NaN")

    for label, raw in (('"type": []', "[]"), ('"type": {}', "{}"), ('"type": 5', "5")):
        def plant_gemini_type(home: Home, raw: str = raw, label: str = label) -> Planted:
            token = f"hostile-gm-type{re.sub(r'[^a-z0-9]', '', label)}x"
            lines = gemini_session(f"{token}-id", tag=token)
            lines.insert(3, json.dumps({"id": f"{token}odd", "timestamp": "2026-03-01T12:00:01.500Z",
                                        "content": "x"})[:-1] + f', "type": {raw}}}')
            write_lines(home.gemini / f"session-2026-03-01T12-00-{token}.jsonl", lines)
            return Planted(token, expect={f"gemini-cli {token}-id": 3})
        planted_case("Gemini CLI", f"a record with {label}", plant_gemini_type, quick=raw == "[]")

    def plant_gemini_deep(home: Home) -> Planted:
        token = "hostile-gm-deep"
        lines = gemini_session(f"{token}-id", tag=token)
        write_lines(home.gemini / f"session-2026-03-01T12-00-{token}.jsonl",
                    [*lines, '{"$set": ' + _deep(20_000) + "}"])
        return Planted(token, expect={f"gemini-cli {token}-id": 3})
    planted_case("Gemini CLI", "last line nested 20,000 deep", plant_gemini_deep, quick=True)

    def plant_gemini_no_newline(home: Home) -> Planted:
        token = "hostile-gm-nonl"
        write_lines(home.gemini / f"session-2026-03-01T12-00-{token}.jsonl",
                    gemini_session(f"{token}-id", tag=token), newline_at_end=False)
        return Planted(token, expect={f"gemini-cli {token}-id": 3})
    planted_case("Gemini CLI", "last line without a newline", plant_gemini_no_newline)

    def plant_gemini_shapes(home: Home) -> Planted:
        token = "hostile-gm-shapes"
        lines = gemini_session(f"{token}-id", tag=token)
        odd = ['{"$set": []}', '{"$set": {"messages": 5}}', '{"id": "x", "type": "gemini", "tokens": [1]}',
               '{"id": "y", "type": "user", "content": 7}', "null"]
        write_lines(home.gemini / f"session-2026-03-01T12-00-{token}.jsonl", [*lines[:2], *odd, *lines[2:]])
        return Planted(token, expect={f"gemini-cli {token}-id": 3})
    planted_case("Gemini CLI", "records of the wrong shape ($set a list, tokens a list)", plant_gemini_shapes)

    for label, mutate in (("truncated mid-line", _truncate), ("bytes flipped", _flip)):
        def plant_gemini_damaged(home: Home, mutate: Callable[[Path], None] = mutate) -> Planted:
            victim = home.gemini / "session-2026-03-01T12-01-good0001.jsonl"
            mutate(victim)
            return Planted("good0001", damaged=(str(victim),), shortened=mutate is _truncate,
                           damaged_keys=("gemini-cli good-gemini-1",))
        planted_case("Gemini CLI", f"a good chat {label}", plant_gemini_damaged)


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 3 // 5])


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    rng = random.Random(26)
    for _ in range(200):
        data[rng.randrange(len(data))] ^= 0xFF
    path.write_bytes(bytes(data))


def _shuffle(path: Path) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    random.Random(26).shuffle(lines)
    path.write_bytes(b"".join(lines))


# --------------------------------------------------------------------------- OpenCode


def _opencode_sql(sql: str, *args: Any) -> Callable[[Home], Planted]:
    """Run ``sql`` (statements split at ``;``, each given ``args``) on the case's database; ses_beta is damaged."""
    def plant(home: Home) -> Planted:
        conn = sqlite3.connect(home.opencode, isolation_level=None)
        for statement in sql.split(";"):
            conn.execute(statement, args)
        conn.close()
        return Planted("opencode.db", damaged=(f"{home.opencode}#ses_beta",))
    return plant


def _add_opencode_cases() -> None:
    planted_case("OpenCode", "malformed part.data (not JSON)",
                 _opencode_sql("UPDATE part SET data = '{\"type\": \"text\", \"te' WHERE id = 'prt_msg_ses_beta_a0_1'"),
                 quick=True)
    planted_case("OpenCode", "part.data a JSON array",
                 _opencode_sql("UPDATE part SET data = '[1, 2]' WHERE id = 'prt_msg_ses_beta_a0_2'"))
    planted_case("OpenCode", "message.data malformed",
                 _opencode_sql("UPDATE message SET data = '{\"role\": ' WHERE id = 'msg_ses_beta_a1'"))
    for label, value in (("-1", -1), ("1e30", 1e30), ("text", "soon")):
        planted_case("OpenCode", f"time values {label} (parts and messages)", _opencode_sql(
            "UPDATE part SET time_created = ?, time_updated = ? WHERE session_id = 'ses_beta';"
            "UPDATE message SET time_created = ?, time_updated = ? WHERE session_id = 'ses_beta'",
            value, value), quick=label == "-1")
        planted_case("OpenCode", f"session time_updated {label}", _opencode_sql(
            "UPDATE session SET time_created = ?, time_updated = ? WHERE id = 'ses_beta'", value, value))
    for label, raw in (("NaN", "NaN"), ("-5", "-5"), ("2^70", str(2**70))):
        planted_case("OpenCode", f"tokens.input {label}", _opencode_sql(
            "UPDATE message SET data = replace(data, '\"input\": 900', ?) WHERE session_id = 'ses_beta';"
            "UPDATE part SET data = replace(data, '\"input\": 900', ?) WHERE session_id = 'ses_beta'",
            f'"input": {raw}'))

    def plant_missing_column(home: Home) -> Planted:
        conn = sqlite3.connect(home.opencode, isolation_level=None)
        conn.execute("ALTER TABLE part DROP COLUMN time_updated")
        conn.close()
        return Planted("opencode.db", damaged=(str(home.opencode),))
    planted_case("OpenCode", "a missing column (part.time_updated)", plant_missing_column)

    def plant_flipped(home: Home) -> Planted:
        _checkpoint(home.opencode)
        data = bytearray(home.opencode.read_bytes())
        rng = random.Random(26)
        for _ in range(64):
            data[rng.randrange(100, len(data))] ^= 0xFF
        home.opencode.write_bytes(bytes(data))
        return Planted("opencode.db", damaged=(str(home.opencode),))
    planted_case("OpenCode", "bytes flipped in the database", plant_flipped)

    def plant_garbage(home: Home) -> Planted:
        _checkpoint(home.opencode)
        home.opencode.write_bytes(random.Random(3).randbytes(64 * 1024))
        return Planted("opencode.db", damaged=(str(home.opencode),))
    planted_case("OpenCode", "a database that cannot be opened (not SQLite)", plant_garbage, quick=True)

    def plant_truncated(home: Home) -> Planted:
        _checkpoint(home.opencode)
        _truncate(home.opencode)
        return Planted("opencode.db", damaged=(str(home.opencode),))
    planted_case("OpenCode", "the database truncated", plant_truncated)

    def plant_locked(home: Home, wal: bool) -> Planted:
        if not wal:
            _checkpoint(home.opencode)
            conn = sqlite3.connect(home.opencode, isolation_level=None)
            conn.execute("PRAGMA journal_mode=DELETE")
            conn.close()
        pragma = "PRAGMA locking_mode=EXCLUSIVE; " if wal else ""
        code = (f"import sqlite3, sys, time\nc = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
                f"c.executescript({pragma!r})\nc.execute('BEGIN EXCLUSIVE')\n"
                "c.execute(\"UPDATE session SET title = 'locked' WHERE id = 'ses_alpha'\")\n"
                "print('locked', flush=True)\ntime.sleep(120)\n")
        helper = subprocess.Popen([sys.executable, "-c", code, str(home.opencode)], stdout=subprocess.PIPE,
                                  start_new_session=True)
        assert helper.stdout is not None
        helper.stdout.readline()
        return Planted("opencode.db", damaged=(str(home.opencode),), helpers=[helper])
    planted_case("OpenCode", "a database held locked (BEGIN EXCLUSIVE)", lambda home: plant_locked(home, False),
                 quick=True)
    planted_case("OpenCode", "a WAL database held in exclusive locking mode", lambda home: plant_locked(home, True))

    def plant_read_only(home: Home) -> Planted:
        for name in ("opencode.db-wal", "opencode.db-shm"):  # cleanly closed: no -wal, no -shm beside it
            assert not (home.opencode.parent / name).exists(), name
        _read_only(home.opencode.parent)
        return Planted("opencode.db", readonly=True)
    planted_case("OpenCode", "a read-only folder, the database cleanly closed (no -shm)", plant_read_only,
                 quick=True)

    def plant_bad_second_db(home: Home) -> Planted:
        (home.opencode.parent / "opencode-hostile.db").write_bytes(b"SQLite format 3\x00" + b"\xff" * 4096)
        return Planted("opencode-hostile.db")
    planted_case("OpenCode", "a second database that is damaged", plant_bad_second_db)


def _checkpoint(db: Path) -> None:
    """Fold the WAL into the database file (so that damage to the file is damage to the data)."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()


# --------------------------------------------------------------------------- the filesystem


def _add_file_cases() -> None:
    for label, folder in (("Claude Code projects", "claude"), ("Codex sessions", "codex"),
                          ("Gemini CLI chats", "gemini")):
        def plant_fifo(home: Home, folder: str = folder) -> Planted:
            name = {"claude": "hostile-fifo.jsonl", "codex": "rollout-2026-03-01T11-00-00-hostile-fifo.jsonl",
                    "gemini": "session-2026-03-01T12-00-hostile-fifo.jsonl"}[folder]
            os.mkfifo(getattr(home, folder) / name)
            return Planted("hostile-fifo")
        planted_case("files", f"a FIFO named *.jsonl in the {label} folder", plant_fifo, quick=True)

    for device in ("/dev/zero", "/dev/urandom"):
        def plant_device(home: Home, device: str = device) -> Planted:
            token = f"hostile-dev{Path(device).name}"
            (home.claude / f"{token}.jsonl").symlink_to(device)
            (home.codex / f"rollout-2026-03-01T11-00-00-{token}.jsonl").symlink_to(device)
            return Planted(token)
        planted_case("files", f"session files linked to {device}", plant_device, quick=True)

    def plant_loop(home: Home) -> Planted:
        (home.claude / "hostile-loop").symlink_to(home.claude)
        (home.claude.parent / "hostile-loop2").symlink_to(home.claude.parent)
        (home.claude / "hostile-self.jsonl").symlink_to(home.claude / "hostile-self.jsonl")
        return Planted("hostile-self")
    planted_case("files", "symlink loops (folders and a file linked to itself)", plant_loop, quick=True)

    def plant_dangling(home: Home) -> Planted:
        (home.claude / "hostile-dangling.jsonl").symlink_to(home.root / "nowhere.jsonl")
        (home.claude / "hostile-dir.jsonl").mkdir()
        return Planted("hostile-dangling")
    planted_case("files", "a dangling link and a folder named *.jsonl", plant_dangling, quick=True)

    def plant_non_utf8(home: Home) -> Planted:
        folder = Path(os.fsdecode(bytes(home.claude.parent) + b"/-work-caf\xe9"))
        folder.mkdir()
        token = "hostile-latin1"
        write_lines(Path(os.fsdecode(bytes(folder) + b"/" + token.encode() + b"-\xff.jsonl")),
                    claude_session(f"{token}-id", tag=token, cwd="/work/caf\ufffd"))  # the text is UTF-8
        return Planted(token, expect={f"claude-code {token}-id": 3})
    planted_case("files", "a folder and a file name that are not UTF-8 (Claude Code)", plant_non_utf8, quick=True)

    def plant_non_utf8_gemini(home: Home) -> Planted:
        chats = Path(os.fsdecode(bytes(home.gemini.parent.parent) + b"/proj-\xfe/chats"))
        token = "hostile-gmlatin1"
        write_lines(Path(os.fsdecode(bytes(chats) + b"/session-2026-03-01T12-00-" + token.encode() + b"\xff.jsonl")),
                    gemini_session(f"{token}-id", tag=token))
        return Planted(token, expect={f"gemini-cli {token}-id": 3})
    planted_case("files", "a folder and a file name that are not UTF-8 (Gemini CLI)", plant_non_utf8_gemini,
                 quick=True)

    def plant_many(home: Home) -> Planted:
        many = home.claude.parent / "-work-many"
        many.mkdir()
        for n in range(2000):
            (many / f"hostile-many-{n:05d}.jsonl").write_bytes(b"")
        return Planted("hostile-many")
    planted_case("files", "2,000 empty session files", plant_many)


# --------------------------------------------------------------------------- the usage index


def _built(home: Home, big: bool = False) -> tuple[Result, int]:
    """The index built once (``usage --json``); its call total."""
    result = ctxbench(home, "usage", "--json", timeout=120)
    total = json.loads(result.stdout)["total"]["calls"] if result.code == 0 else -1
    return result, int(total)


def _answer(home: Home, expected: int, *args: str, readonly: bool = False, what: str = "usage") -> Verdict:
    result = ctxbench(home, "usage", "--json", *args, readonly=readonly)
    if bad := _failed(result, what):
        return bad
    try:
        calls = int(json.loads(result.stdout)["total"]["calls"] or 0)
    except (ValueError, KeyError, TypeError) as exc:
        return Verdict("crash", f"{what} printed something else: {exc}")
    if calls < expected and "warning" not in result.stderr:
        return Verdict("silent loss", f"{what}: {calls} of {expected} calls, no warning")
    return Verdict("held")


def _add_index_cases() -> None:
    kill_points: list[tuple[str, float]] = [(f"at {at} s", at) for at in (0.2, 0.5, 1.0)]
    kill_points += [(f"at {share:.0%} of its time", -share) for share in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)]
    for label, at in kill_points:
        @case("usage index", f"kill -9 of usage --refresh {label}, then usage")
        def killed(home: Home, base: Baseline, at: float = at) -> Verdict:
            shutil.copyfile(SHARED / "claude-code" / BIG_CLAUDE, home.claude / BIG_CLAUDE)
            built, expected = _built(home)
            if bad := _failed(built, "usage (first build)"):
                return bad
            if at < 0:  # a share of what a whole refresh takes here
                whole = ctxbench(home, "usage", "--refresh", "--json", timeout=120)
                if bad := _failed(whole, "usage --refresh"):
                    return bad
                at = -at * whole.seconds
            proc = start(home, "usage", "--refresh", "--json")
            time.sleep(at)
            _end(proc)
            return _answer(home, expected)

    @case("usage index", "usage --no-update while another process rebuilds")
    def during(home: Home, base: Baseline) -> Verdict:
        shutil.copyfile(SHARED / "claude-code" / BIG_CLAUDE, home.claude / BIG_CLAUDE)
        built, expected = _built(home)
        if bad := _failed(built, "usage (first build)"):
            return bad
        t0 = time.monotonic()
        proc = start(home, "usage", "--refresh", "--json")
        worst = Verdict("held")
        try:
            for _ in range(4):
                time.sleep(0.25)
                verdict = _answer(home, expected, "--no-update", what="usage --no-update")
                if verdict.verdict != "held":
                    worst = verdict
                    break
        finally:
            if (bad := _failed(finish(proc, t0), "usage --refresh")) and worst.verdict == "held":
                worst = bad
        return worst

    @case("usage index", "two usage --refresh at once")
    def twice(home: Home, base: Baseline) -> Verdict:
        t0 = time.monotonic()
        procs = [start(home, "usage", "--refresh", "--json") for _ in range(2)]
        for proc in procs:
            result = finish(proc, t0)
            if bad := _failed(result, "usage --refresh"):
                return bad
            if int(json.loads(result.stdout)["total"]["calls"]) < base.total:
                return Verdict("silent loss", "a concurrent refresh answered fewer calls")
        return Verdict("held")

    for label, damage in (("truncated to half", lambda p: _truncate_to(p, 0.5)),
                          ("emptied", lambda p: _truncate_to(p, 0)),
                          ("overwritten with garbage", lambda p: p.write_bytes(b"PAR1" + b"\x00" * 300 + b"PAR1"))):
        for changed in (False, True):
            name = f"a day file {label}" + (", then a session file changed" if changed else "")

            @case("usage index", name, quick=label == "truncated to half" and not changed)
            def damaged(home: Home, base: Baseline, damage: Callable[[Path], Any] = damage,
                        changed: bool = changed) -> Verdict:
                built, expected = _built(home)
                if bad := _failed(built, "usage (first build)"):
                    return bad
                days = sorted(home.index.glob("calls/day=*/*.parquet"))
                if not days:
                    return Verdict("crash", "no day file was written")
                damage(days[0])
                if changed:
                    path = home.claude / CLAUDE_FILES[0]
                    os.utime(path, (time.time() + 5, time.time() + 5))
                return _answer(home, expected)

    for label, target in (("the file list (files.json) truncated", "files.json"),
                          ("a rollup file emptied", "call_rollup*.parquet"),
                          ("the sessions file emptied", "sessions*.parquet")):
        @case("usage index", label)
        def damaged_meta(home: Home, base: Baseline, target: str = target) -> Verdict:
            built, expected = _built(home)
            if bad := _failed(built, "usage (first build)"):
                return bad
            found = sorted(home.index.glob(target))  # rollups: one name, or one per generation
            if not found:
                return Verdict("error", f"harness: no {target} in the index (its layout changed)")
            _truncate_to(found[-1], 0.5 if target.endswith(".json") else 0)
            return _answer(home, expected)

    @case("usage index", "a data dir path containing [x]", quick=True)
    def brackets(home: Home, base: Baseline) -> Verdict:
        home.data = home.root / "data[x]" / "d*?"
        return scan_verdict(home, Planted("data[x]"), base)

    @case("usage index", "another process holds the index lock")
    def lock_held(home: Home, base: Baseline) -> Verdict:
        built, expected = _built(home)
        if bad := _failed(built, "usage (first build)"):
            return bad
        os.utime(home.claude / CLAUDE_FILES[0], (time.time() + 5, time.time() + 5))  # something to update
        code = ("import fcntl, sys, time\nf = open(sys.argv[1], 'a+')\nfcntl.flock(f.fileno(), fcntl.LOCK_EX)\n"
                "print('locked', flush=True)\ntime.sleep(120)\n")
        helper = subprocess.Popen([sys.executable, "-c", code, str(home.index / ".lock")], stdout=subprocess.PIPE,
                                  start_new_session=True)
        try:
            assert helper.stdout is not None
            helper.stdout.readline()
            result = ctxbench(home, "usage", "--json")
            if result.code is None:
                return Verdict("hang", f"usage: over {TIMEOUT:.0f} s")
            if result.code != 0:  # a refusal that says why is what a held lock should give
                return (Verdict("held", "refused with a message") if "lock" in result.stderr.lower() else
                        Verdict("crash", (result.stderr.strip().splitlines() or [""])[-1][:160]))
            calls = int(json.loads(result.stdout)["total"]["calls"] or 0)
            if calls < expected and "warning" not in result.stderr:
                return Verdict("silent loss", f"{calls} of {expected} calls, no warning")
            return Verdict("held")
        finally:
            _end(helper)

    @case("usage index", "a read-only index (nothing changed)", quick=True)
    def read_only(home: Home, base: Baseline) -> Verdict:
        built, expected = _built(home)
        if bad := _failed(built, "usage (first build)"):
            return bad
        _read_only(home.data)
        return _answer(home, expected, readonly=True)


def _truncate_to(path: Path, share: float) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * share)])


def _read_only(folder: Path) -> None:
    """``folder`` and everything in it read-only (undone by :func:`_remove`)."""
    for path in [*folder.rglob("*"), folder]:
        if not path.is_symlink():
            path.chmod(0o555 if path.is_dir() else 0o444)


# --------------------------------------------------------------------------- the terminal


def _hostile_terminal_file(home: Home) -> Path:
    token = "hostile-term"
    lines = claude_session(f"{token}-{HOSTILE_TEXT}", tag=token, cwd=f"/work/{HOSTILE_TEXT}", model=HOSTILE_TEXT,
                           tool=HOSTILE_TEXT, prompt=HOSTILE_TEXT, result=HOSTILE_TEXT)
    return _claude_file(home, token, lines)


def _add_terminal_cases() -> None:
    commands: list[tuple[str, Callable[[Path], list[str]]]] = [
        ("sources", lambda f: ["sources"]),
        ("usage --by project", lambda f: ["usage", "--by", "project"]),
        ("usage --by model", lambda f: ["usage", "--by", "model"]),
        ("usage --by tool", lambda f: ["usage", "--by", "tool"]),
        ("usage --by session", lambda f: ["usage", "--by", "session"]),
        ("tools FILE", lambda f: ["tools", str(f)]),
        ("diff FILE 1 3", lambda f: ["diff", str(f), "1", "3"]),
        ("sources --json", lambda f: ["sources", "--json"]),
        ("tools FILE --json", lambda f: ["tools", str(f), "--json"]),
    ]
    for label, argv in commands:
        @case("terminal", f"control characters in names: {label}", quick=True)
        def printed(home: Home, base: Baseline, argv: Callable[[Path], list[str]] = argv,
                    label: str = label) -> Verdict:
            return terminal_verdict(ctxbench(home, *argv(_hostile_terminal_file(home))), label)

    @case("terminal", "control characters in a file name: sources", quick=True)
    def file_name(home: Home, base: Baseline) -> Verdict:
        write_lines(home.claude / f"hostile-{HOSTILE_TEXT}.jsonl", claude_session("hostile-fn-id", tag="fn"))
        return terminal_verdict(ctxbench(home, "sources"), "sources")

    @case("terminal", "control characters in the name of a file that fails: stderr")
    def warned(home: Home, base: Baseline) -> Verdict:
        os.mkfifo(home.claude / f"hostile-{HOSTILE_TEXT}.jsonl")
        return terminal_verdict(ctxbench(home, "usage"), "usage warnings", stream="stderr", shown=False)

    @case("terminal", "control characters in names: follow FILE", quick=True)
    def follow(home: Home, base: Baseline) -> Verdict:
        path = _hostile_terminal_file(home)
        t0 = time.monotonic()
        proc = start(home, "follow", str(path))
        time.sleep(3.0)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        return terminal_verdict(finish(proc, t0), "follow")

    @case("terminal", "control characters in names: import, then inspect", quick=True)
    def inspect(home: Home, base: Baseline) -> Verdict:
        path = _hostile_terminal_file(home)
        folder = home.root / "imported"
        imported = ctxbench(home, "import", str(path), "--session", str(folder), "--no-model-info")
        if (bad := terminal_verdict(imported, "import", shown=False)).verdict != "held":
            return bad
        return terminal_verdict(ctxbench(home, "inspect", "--session", str(folder), "--context-window", "200000"),
                                "inspect")

    @case("terminal", "control characters in a session: export -o - to a terminal")
    def export(home: Home, base: Baseline) -> Verdict:
        path = _hostile_terminal_file(home)
        folder = home.root / "imported"
        imported = ctxbench(home, "import", str(path), "--session", str(folder), "--no-model-info")
        if (bad := terminal_verdict(imported, "import", shown=False)).verdict != "held":
            return bad
        return terminal_verdict(_on_a_terminal(home, "export", "--session", str(folder), "--format", "md", "-o", "-"),
                                "export to a terminal")


def _on_a_terminal(home: Home, *args: str) -> Result:
    """``ctxbench ARGS`` with its stdout on a pseudo-terminal (what a person's terminal would receive)."""
    master, slave = pty.openpty()
    t0 = time.monotonic()
    proc = start(home, *args, stdout=slave)
    os.close(slave)
    chunks: list[bytes] = []
    while time.monotonic() - t0 < TIMEOUT:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the other side closed
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(master)
    result = finish(proc, t0)
    text = b"".join(chunks).decode("utf-8", "surrogateescape").replace("\r\n", "\n")  # the pty's own CR
    return Result(result.code, text, result.stderr, result.seconds)


_add_claude_number_cases()
_add_line_cases()
_add_opencode_cases()
_add_file_cases()
_add_index_cases()
_add_terminal_cases()
GROUPS = tuple(dict.fromkeys(c.group for c in CASES))


# --------------------------------------------------------------------------- the run


@dataclass
class Outcome:
    group: str
    name: str
    verdict: str
    detail: str
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"group": self.group, "case": self.name, "verdict": self.verdict, "detail": self.detail,
                "seconds": round(self.seconds, 2)}


@contextlib.contextmanager
def _workdir() -> Iterator[Path]:
    work = Path(tempfile.mkdtemp(prefix="ctxbench-hostile-"))
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_cases(tree: Path = REPO, cases: list[Case] | None = None, progress: Callable[[Outcome], None] | None = None
              ) -> list[Outcome]:
    """Run ``cases`` (all) against the code in ``tree``, one after another, each in a home of its own."""
    outcomes = []
    with _workdir() as work:
        base = measure_baseline(tree, work)
        for n, c in enumerate(cases if cases is not None else CASES):
            root = work / f"case-{n:03d}"
            root.mkdir()
            home = Home(root, tree)
            build_corpus(home)
            t0 = time.monotonic()
            try:
                verdict = c.run(home, base)
            except Exception as exc:  # the harness's own problem: said, never a verdict on the code
                verdict = Verdict("error", f"harness: {type(exc).__name__}: {exc}")
            outcome = Outcome(c.group, c.name, verdict.verdict, verdict.detail, time.monotonic() - t0)
            outcomes.append(outcome)
            if progress is not None:
                progress(outcome)
            _remove(root)
    return outcomes


def _remove(root: Path) -> None:
    for path in [root, *root.rglob("*")]:  # a read-only case may have left folders without write permission
        with contextlib.suppress(OSError):
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
    shutil.rmtree(root, ignore_errors=True)


def table(outcomes: list[Outcome]) -> dict[str, dict[str, int]]:
    """Per group and in total: cases, and how many of each verdict."""
    rows: dict[str, dict[str, int]] = {}
    for group in [*dict.fromkeys(o.group for o in outcomes), "total"]:
        chosen = [o for o in outcomes if group in ("total", o.group)]
        rows[group] = {"cases": len(chosen), **{v: sum(o.verdict == v for o in chosen) for v in VERDICTS}}
        errors = sum(o.verdict == "error" for o in chosen)
        if errors:
            rows[group]["harness errors"] = errors
    return rows


def format_table(rows: dict[str, dict[str, int]]) -> str:
    head = f"{'group':14} {'cases':>6} {'crashes':>8} {'hangs':>6} {'silent loss':>12} {'unescaped':>10} {'held':>6}"
    lines = [head]
    for group, r in rows.items():
        extra = f"  ({r['harness errors']} harness errors)" if r.get("harness errors") else ""
        lines.append(f"{group:14} {r['cases']:>6} {r['crash']:>8} {r['hang']:>6} {r['silent loss']:>12} "
                     f"{r['unescaped']:>10} {r['held']:>6}{extra}")
    return "\n".join(lines)


def bench_hostile() -> list[Figure]:
    """The benchmark suite's entry: the table, each case that did not hold, and one figure per verdict."""
    as_json = "--json" in sys.argv
    outcomes = run_cases(progress=None if as_json else _print_unheld)
    rows = table(outcomes)
    if as_json:
        print(json.dumps({"type": "hostile", "tree": str(REPO), "table": rows,
                          "cases": [o.to_json() for o in outcomes]}, ensure_ascii=True))
    else:
        print(format_table(rows))
    total = rows["total"]
    return [Figure("hostile cases: crashes", total["crash"], "cases", "0", total["crash"] == 0),
            Figure("hostile cases: hangs", total["hang"], "cases", "0", total["hang"] == 0),
            Figure("hostile cases: silent loss", total["silent loss"], "cases", "0", total["silent loss"] == 0),
            Figure("hostile cases: held", total["held"], "cases", f"{total['cases']} (all)",
                   total["held"] == total["cases"])]


def _print_unheld(outcome: Outcome) -> None:
    if outcome.verdict != "held":
        print(f"  {outcome.verdict:11} {outcome.group} / {outcome.name}: {outcome.detail}", flush=True)


ALL: dict[str, Callable[[], list[Figure]]] = {"hostile": bench_hostile}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hostile", description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object: the table and every case")
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout whose ctxbench is run (default: this)")
    parser.add_argument("--only", metavar="WORD", help="only the cases whose group or name contains WORD")
    parser.add_argument("--quick", action="store_true", help="only the quick cases (what the smoke test runs)")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per case, held ones included")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))  # the case folders are removed on the way out
    chosen = [c for c in CASES if (not args.only or args.only.lower() in f"{c.group} {c.name}".lower())
              and (c.quick or not args.quick)]

    def show(outcome: Outcome) -> None:
        if args.verbose or outcome.verdict != "held":
            print(f"  {outcome.verdict:11} {outcome.seconds:5.1f} s  {outcome.group} / {outcome.name}"
                  + (f": {outcome.detail}" if outcome.detail else ""), flush=True)

    t0 = time.monotonic()
    outcomes = run_cases(args.tree.resolve(), chosen, progress=None if args.json else show)
    rows = table(outcomes)
    if args.json:
        print(json.dumps({"type": "hostile", "tree": str(args.tree), "seconds": round(time.monotonic() - t0, 1),
                          "table": rows, "cases": [o.to_json() for o in outcomes]}, ensure_ascii=True))
    else:
        print(format_table(rows))
        print(f"{len(outcomes)} cases against {args.tree} in {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
