"""A hostile file system (issue 26): one bad value, one special file, one odd name never stops the reading of the
others, never hangs, and is said with the file's name and the reason — in each reader, in the sources scan and in
``ctxbench sources``. Copies of the shared sessions (Claude Code, Codex) and Gemini CLI lines in the shape 0.61
writes, in a fake home (never the real one)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from app import cli
from engine.sources import discovery, model
from engine.sources.claude_code import read_claude_code
from engine.sources.codex import read_codex
from engine.sources.detect import detect_format
from engine.sources.discovery import ScanProblem, scan_sources
from engine.sources.follow import Follower, Tail
from engine.sources.gemini_cli import read_gemini_cli
from engine.sources.model import SourceError
from engine.sources.readers import read_source
from engine.store.config import Settings
from tests.engine.sources.conftest import CLAUDE, codex_files, raw_claude_calls, raw_codex_calls

T = TypeVar("T")
SMALL_CODEX = codex_files()[2]
BAD_COUNTS = [float("nan"), float("inf"), -5, 2**70]
DEEP = 20_000


def promptly(fn: Callable[[], T], seconds: float = 20.0, unblock: Path | None = None) -> T:
    """``fn()`` run in a thread that must finish within ``seconds`` (a hang fails the test, never the suite: a
    reader blocked on the FIFO ``unblock`` is let go by opening its write end)."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(("ok", fn()))
        except BaseException as exc:  # handed to the test
            out.append(("raised", exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if unblock is not None:
            fd = os.open(unblock, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        pytest.fail(f"still running after {seconds} s: it hangs")
    kind, value = out[0]
    if kind == "raised":
        raise value
    return value  # type: ignore[no-any-return]


def dumps(obj: Any) -> bytes:
    """One line as the agents write it: compact JSON (NaN and Infinity as Python writes them)."""
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


# --------------------------------------------------------------------------- the files


def claude_with(value: Any, calls: tuple[int, ...], source: Path = CLAUDE / "tool_heavy.jsonl") -> bytes:
    """``source`` with the ``input_tokens`` of the calls at these indices (every line of each) set to ``value``."""
    raw = raw_claude_calls(source)
    rows = [json.loads(x) for x in source.read_text(encoding="utf-8").splitlines() if x.strip()]
    ids = [rows[raw[i]["line"]]["message"]["id"] for i in calls]
    for row in rows:
        if row.get("type") == "assistant" and row["message"]["id"] in ids:
            row["message"]["usage"]["input_tokens"] = value
    return b"".join(dumps(r) for r in rows)


def codex_with(value: Any, calls: tuple[int, ...], source: Path = SMALL_CODEX) -> bytes:
    """``source`` with the ``input_tokens`` of these calls' ``token_count`` events (both of each pair: their last and
    total usage) set to ``value``."""
    rows = [json.loads(x) for x in source.read_text(encoding="utf-8").splitlines() if x.strip()]
    index, prev = -1, None
    for row in rows:
        payload = row.get("payload") or {}
        if row["type"] != "event_msg" or payload.get("type") != "token_count" or not payload.get("info"):
            continue
        info = payload["info"]
        total = json.dumps(info["total_token_usage"])
        if total != prev:
            index, prev = index + 1, total
        if index in calls:
            info["last_token_usage"]["input_tokens"] = value
            info["total_token_usage"]["input_tokens"] = value
    return b"".join(dumps(r) for r in rows)


GEMINI_HEADER = {"sessionId": "gem-1", "projectHash": "h", "startTime": "2026-11-25T10:00:00.000Z",
                 "lastUpdated": "2026-11-25T10:00:00.000Z", "kind": "main"}


def gemini_rows(prompts: list[Any]) -> list[dict[str, Any]]:
    """A Gemini CLI session: one user prompt and one response per entry of ``prompts`` (the response's
    ``tokens.input``)."""
    rows: list[dict[str, Any]] = [GEMINI_HEADER]
    for i, prompt in enumerate(prompts):
        rows.append({"id": f"u{i}", "timestamp": f"2026-11-25T10:00:{2 * i:02d}.000Z", "type": "user",
                     "content": [{"text": f"question {i}"}]})
        rows.append({"id": f"g{i}", "timestamp": f"2026-11-25T10:00:{2 * i + 1:02d}.000Z", "type": "gemini",
                     "content": f"answer {i}", "model": "gemini-2.5-pro",
                     "tokens": {"input": prompt, "output": 7, "cached": 0, "thoughts": 0, "tool": 0, "total": 1}})
    return rows


def gemini_with(prompts: list[Any]) -> bytes:
    return b"".join(dumps(r) for r in gemini_rows(prompts))


def deep_line(prefix: bytes, suffix: bytes = b"}") -> bytes:
    """A line nested :data:`DEEP` levels deep after ``prefix`` (too deep to be parsed; 40 kB: within the last 64 kB
    the light pass reads for the last timestamp)."""
    return prefix + b"[" * DEEP + b"]" * DEEP + suffix + b"\n"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with one good session of each agent (Claude Code, Codex, Gemini CLI); tests add bad ones."""
    home = tmp_path / "home"
    claude = home / ".claude" / "projects" / "-home-me-proj"
    claude.mkdir(parents=True)
    shutil.copyfile(CLAUDE / "short.jsonl", claude / "short.jsonl")
    codex = home / ".codex" / "sessions" / "2026" / "02" / "23"
    codex.mkdir(parents=True)
    shutil.copyfile(SMALL_CODEX, codex / SMALL_CODEX.name)
    chats = home / ".gemini" / "tmp" / "proj" / "chats"
    chats.mkdir(parents=True)
    (chats / "session-2026-11-25T10-00-good0001.jsonl").write_bytes(gemini_with([1000, 1100]))
    monkeypatch.setenv("HOME", str(home))
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    return home


def claude_dir(home: Path) -> Path:
    return home / ".claude" / "projects" / "-home-me-proj"


def codex_dir(home: Path) -> Path:
    return home / ".codex" / "sessions" / "2026" / "02" / "23"


def gemini_dir(home: Path) -> Path:
    return home / ".gemini" / "tmp" / "proj" / "chats"


GOOD = {"short.jsonl", SMALL_CODEX.name, "session-2026-11-25T10-00-good0001.jsonl"}


def scan(settings: Settings | None = None) -> tuple[list[discovery.SourceEntry], list[ScanProblem]]:
    problems: list[ScanProblem] = []
    entries = promptly(lambda: scan_sources(settings or Settings(), problems=problems))
    return entries, problems


def names(entries: list[discovery.SourceEntry]) -> set[str]:
    return {Path(e.path).name for e in entries}


# --------------------------------------------------------------------------- numbers


@pytest.mark.parametrize("value", BAD_COUNTS, ids=["nan", "inf", "negative", "2^70"])
def test_a_bad_token_count_in_claude_code_is_no_figure(home: Path, value: Any) -> None:
    raw = raw_claude_calls(CLAUDE / "tool_heavy.jsonl")
    path = claude_dir(home) / "bad.jsonl"
    path.write_bytes(claude_with(value, (1, len(raw) - 1)))
    src = read_claude_code(path)
    assert [c.prompt_tokens for c in src.calls] == [None if i in (1, len(raw) - 1) else c["prompt"]
                                                   for i, c in enumerate(raw)]
    assert [c.completion_tokens for c in src.calls] == [c["output"] for c in raw]  # the rest of the call is read
    entries, problems = scan()
    assert problems == [] and names(entries) == GOOD | {"bad.jsonl"}
    entry = next(e for e in entries if e.path == str(path))
    assert (entry.calls, entry.last_prompt_tokens, entry.percent_full) == (len(raw), None, None)


@pytest.mark.parametrize("value", BAD_COUNTS, ids=["nan", "inf", "negative", "2^70"])
def test_a_bad_token_count_in_codex_is_no_figure(home: Path, value: Any) -> None:
    raw = raw_codex_calls(SMALL_CODEX)
    assert len(raw) >= 3
    path = codex_dir(home) / "rollout-2026-02-23T21-00-00-bad.jsonl"
    path.write_bytes(codex_with(value, (1, len(raw) - 1)))
    src = read_codex(path)
    # each call once (a repeated event with NaN in its total is still the repeat), the bad ones without a figure
    assert [c.prompt_tokens for c in src.calls] == [None if i in (1, len(raw) - 1) else c["prompt"]
                                                   for i, c in enumerate(raw)]
    assert [c.completion_tokens for c in src.calls] == [c["output"] for c in raw]
    entries, problems = scan()
    assert problems == [] and names(entries) == GOOD | {path.name}
    entry = next(e for e in entries if e.path == str(path))
    assert (entry.calls, entry.last_prompt_tokens, entry.percent_full) == (len(raw), None, None)


@pytest.mark.parametrize("value", BAD_COUNTS, ids=["nan", "inf", "negative", "2^70"])
def test_a_bad_token_count_in_gemini_cli_is_no_figure(home: Path, value: Any) -> None:
    path = gemini_dir(home) / "session-2026-11-25T11-00-bad00001.jsonl"
    path.write_bytes(gemini_with([1000, value, 1200, value]))
    src = read_gemini_cli(path)
    assert [c.prompt_tokens for c in src.calls] == [1000, None, 1200, None]
    assert [c.completion_tokens for c in src.calls] == [7, 7, 7, 7] and src.skipped == []
    entries, problems = scan()
    assert problems == [] and names(entries) == GOOD | {path.name}
    entry = next(e for e in entries if e.path == str(path))
    assert (entry.calls, entry.last_prompt_tokens, entry.percent_full) == (4, None, None)


def test_a_bad_cost_is_no_figure(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    rows = [json.loads(x) for x in (CLAUDE / "short.jsonl").read_text(encoding="utf-8").splitlines()]
    cost = {"type": "cost-state", "totalCostUSD": 0.25, "modelUsage": {"m": {"costUSD": 0.25}}}
    lines = [dumps(r) for r in rows] + [
        dumps(cost), dumps({**cost, "totalCostUSD": 0.5, "modelUsage": {"m": {"costUSD": -1}, "n": {"costUSD": 0.5}}}),
        dumps({**cost, "totalCostUSD": float("nan")}), dumps({**cost, "totalCostUSD": -3})]
    path.write_bytes(b"".join(lines))
    src = read_claude_code(path)
    assert src.agent_cost_usd == 0.5 and src.agent_cost_by_model == {"n": 0.5}  # the last good total; no bad figure
    assert discovery.summarize("claude-code", path).agent_cost_usd == 0.5


# --------------------------------------------------------------------------- shapes


def test_gemini_cli_type_of_a_wrong_shape_is_skipped_with_the_line(home: Path) -> None:
    rows = gemini_rows([1000, 1100])
    rows.insert(2, {"id": "x1", "timestamp": "2026-11-25T10:00:00.500Z", "type": [], "content": "?"})
    rows.insert(3, {"id": "x2", "timestamp": "2026-11-25T10:00:00.600Z", "type": {"a": 1}, "tokens": {"input": 5}})
    path = gemini_dir(home) / "session-2026-11-25T11-00-type0001.jsonl"
    path.write_bytes(b"".join(dumps(r) for r in rows))
    src = read_gemini_cli(path)
    assert [c.prompt_tokens for c in src.calls] == [1000, 1100]
    assert [s.describe() for s in src.skipped] == ["line 3: message type [] is not one this reader knows",
                                                   "line 4: message type {'a': 1} is not one this reader knows"]
    assert detect_format(path) == "gemini-cli"
    entries, problems = scan()
    assert problems == [] and names(entries) == GOOD | {path.name}


def test_codex_types_of_a_wrong_shape_are_skipped(tmp_path: Path) -> None:
    lines = SMALL_CODEX.read_bytes().splitlines(keepends=True)
    extra = [dumps({"timestamp": "2026-02-23T19:34:26Z", "type": "event_msg", "payload": {"type": []}}),
             dumps({"timestamp": "2026-02-23T19:34:26Z", "type": "response_item", "payload": {"type": {"x": 1}}}),
             dumps({"timestamp": "2026-02-23T19:34:26Z", "type": [], "payload": {}})]
    path = tmp_path / "rollout-x.jsonl"
    path.write_bytes(b"".join(lines[:3] + extra + lines[3:]))
    src = read_codex(path)
    assert len(src.calls) == len(raw_codex_calls(SMALL_CODEX))
    assert [s.line for s in src.skipped] == [4, 5, 6]


def test_a_line_nested_too_deeply_is_skipped_in_every_reader_and_the_scan(home: Path, tmp_path: Path) -> None:
    claude = claude_dir(home) / "deep.jsonl"
    claude.write_bytes((CLAUDE / "short.jsonl").read_bytes()
                       + deep_line(b'{"type":"user","timestamp":"2026-01-01T00:00:00Z","usage":'))
    codex = codex_dir(home) / "rollout-2026-02-23T21-00-00-deep.jsonl"
    codex.write_bytes(SMALL_CODEX.read_bytes() + deep_line(
        b'{"timestamp":"2026-02-23T21:00:00Z","type":"event_msg","payload":{"type":"token_count","info":'
        b'{"total_token_usage":{"input_tokens":1},"x":', b"}}}"))
    gemini = gemini_dir(home) / "session-2026-11-25T11-00-deep0001.jsonl"
    gemini.write_bytes(gemini_with([1000]) + deep_line(b'{"id":"g9","type":"gemini","tokens":'))
    for path, read, calls in ((claude, read_claude_code, len(raw_claude_calls(CLAUDE / "short.jsonl"))),
                              (codex, read_codex, len(raw_codex_calls(SMALL_CODEX))), (gemini, read_gemini_cli, 1)):
        src = promptly(lambda read=read, path=path: read(path))
        assert len(src.calls) == calls
        assert [s.reason for s in src.skipped] == ["not JSON (nested too deeply)"]
        assert detect_format(path) in ("claude-code", "codex", "gemini-cli")
    extra = tmp_path / "extra" / "p"  # a source_dirs folder: the format is read from the first lines
    extra.mkdir(parents=True)
    (extra / "first-deep.jsonl").write_bytes(deep_line(b'{"type":"user","x":') + (CLAUDE / "short.jsonl").read_bytes())
    entries, problems = scan(Settings(source_dirs=str(extra.parent)))
    assert problems == [] and names(entries) == GOOD | {claude.name, codex.name, gemini.name, "first-deep.jsonl"}


def test_a_raw_control_character_in_a_string_keeps_the_line_and_its_call(home: Path) -> None:
    rows = [json.loads(x) for x in (CLAUDE / "short.jsonl").read_text(encoding="utf-8").splitlines()]
    first = next(r for r in rows if r["type"] == "user" and isinstance(r["message"]["content"], str))
    first["message"]["content"] = "CTRL" + first["message"]["content"]
    answer = next(r for r in rows if r["type"] == "assistant" and r["message"]["content"][0].get("type") == "text")
    answer["message"]["content"][0]["text"] = "CTRL" + answer["message"]["content"][0]["text"]
    data = b"".join(dumps(r) for r in rows).replace(b"CTRL", b"\x01\t\r\x1b")  # raw, as a careless writer puts them
    path = claude_dir(home) / "ctrl.jsonl"
    path.write_bytes(data)
    src = read_claude_code(path)
    assert src.skipped == [] and len(src.calls) == len(raw_claude_calls(CLAUDE / "short.jsonl"))
    assert any(str(m.get("content") or "").startswith("\x01\t\r\x1b") for m in src.messages if m["role"] == "assistant")
    entry = discovery.summarize("claude-code", path)
    assert entry.calls == len(src.calls) and entry.title  # the light pass reads the line too
    follower = Follower(path, "claude-code")  # a carriage return inside a line does not cut it
    assert len([e for e in follower.poll() if e.kind == "call"]) == len(src.calls)
    gemini = gemini_dir(home) / "session-2026-11-25T11-00-ctrl0001.jsonl"
    gemini.write_bytes(gemini_with([1000, 1100]).replace(b"answer 1", b"ans\r\x00wer"))
    assert [c.prompt_tokens for c in read_gemini_cli(gemini).calls] == [1000, 1100]


# --------------------------------------------------------------------------- special files


def test_a_fifo_named_like_a_session_is_a_problem_not_a_hang(home: Path, tmp_path: Path) -> None:
    fifos = [claude_dir(home) / "pipe.jsonl", codex_dir(home) / "rollout-2026-02-23T21-00-00-pipe.jsonl",
             gemini_dir(home) / "session-2026-11-25T11-00-pipe0001.jsonl"]
    extra = tmp_path / "extra"
    (extra / "deeper").mkdir(parents=True)
    fifos.append(extra / "deeper" / "pipe.jsonl")  # a source_dirs folder: the format is read from its first line
    for fifo in fifos:
        os.mkfifo(fifo)
    entries, problems = scan(Settings(source_dirs=str(extra)))
    assert names(entries) == GOOD
    assert sorted(p.path for p in problems) == sorted(str(f) for f in fifos)
    assert {p.reason for p in problems} == {"not a regular file (a FIFO (named pipe)): not read"}
    fifo = fifos[0]
    with pytest.raises(SourceError, match="not a regular file"):
        promptly(lambda: detect_format(fifo), unblock=fifo)
    with pytest.raises(SourceError, match="not a regular file"):
        promptly(lambda: read_source(fifo, "claude-code"), unblock=fifo)
    events = promptly(lambda: Follower(fifo, "claude-code").poll(), unblock=fifo)
    assert [(e.kind, e.reason) for e in events] == [("missing", "not a regular file (a FIFO (named pipe)): not read")]


def test_an_import_of_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    from engine.importer import import_transcript
    from engine.transcript import TranscriptError

    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(TranscriptError, match="not a regular file"):
        promptly(lambda: import_transcript(fifo, session_dir=tmp_path / "out"), unblock=fifo)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_session_file_linked_to_a_device_is_refused_at_once(home: Path, device: str) -> None:
    links = [claude_dir(home) / "dev.jsonl", codex_dir(home) / "rollout-2026-02-23T21-00-00-dev.jsonl",
             gemini_dir(home) / "session-2026-11-25T11-00-dev00001.jsonl"]
    for link in links:
        link.symlink_to(device)
    entries, problems = scan()
    assert names(entries) == GOOD
    assert sorted(p.path for p in problems) == sorted(str(x) for x in links)
    assert {p.reason for p in problems} == {"not a regular file (a character device): not read"}
    for link, fmt in zip(links, ("claude-code", "codex", "gemini-cli"), strict=True):
        with pytest.raises(SourceError, match="a character device"):
            promptly(lambda link=link, fmt=fmt: read_source(link, fmt))
    with pytest.raises(SourceError, match="a character device"):
        promptly(lambda: detect_format(links[0]))


def test_symlink_loops_end(home: Path, tmp_path: Path) -> None:
    (claude_dir(home) / "loop").symlink_to(claude_dir(home).parent)
    (claude_dir(home).parent / "-other").symlink_to(claude_dir(home).parent)
    extra = tmp_path / "extra"
    (extra / "a").mkdir(parents=True)
    (extra / "a" / "up").symlink_to(extra)
    (extra / "self.jsonl").symlink_to(extra / "self.jsonl")  # a link to itself
    shutil.copyfile(CLAUDE / "short.jsonl", extra / "a" / "s.jsonl")
    (codex_dir(home) / "loop").symlink_to(home / ".codex" / "sessions")  # walked recursively: never followed
    entries, problems = scan(Settings(source_dirs=str(extra)))
    assert names(entries) == GOOD | {"s.jsonl"} and len(entries) == len(GOOD) + 1 and problems == []


def test_a_line_longer_than_the_cap_is_skipped_and_never_held(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model, "MAX_LINE_BYTES", 4096)
    rows = (CLAUDE / "short.jsonl").read_bytes().splitlines(keepends=True)
    huge = dumps({"type": "queue-operation", "timestamp": "2026-01-01T00:00:00Z", "content": "x" * 100_000})
    path = claude_dir(home) / "long.jsonl"
    path.write_bytes(b"".join(rows[:3]) + huge + b"".join(rows[3:]))
    calls = len(raw_claude_calls(CLAUDE / "short.jsonl"))
    src = read_claude_code(path)
    assert len(src.calls) == calls and [s.describe() for s in src.skipped] == [
        "line 4: a line of more than 4 KiB: not read"]
    assert discovery.summarize("claude-code", path).calls == calls
    assert len([e for e in Follower(path, "claude-code").poll() if e.kind == "call"]) == calls
    tail = Tail(path)  # a line with no end yet never holds more than the cap
    path.write_bytes(b'{"type":"user","x":"' + b"y" * 50_000)
    for _ in range(5):
        assert tail.read(limit=10_000)[0] == []
        assert len(tail.partial) <= 4097
    with open(path, "ab") as fh:
        fh.write(b'"}\n' + rows[0])
    lines, _, _ = tail.read()
    assert [len(x) for x in lines] == [4097, len(rows[0]) - 1]  # the long one cut (the reader skips it), the next


def test_a_file_that_takes_too_long_is_stopped(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = claude_dir(home) / "slow.jsonl"
    path.write_bytes((CLAUDE / "short.jsonl").read_bytes() + dumps({"type": "queue-operation"}) * 10_000)
    monkeypatch.setattr(model, "FILE_SECONDS", 0.0)
    entries, problems = scan()
    assert names(entries) == GOOD
    assert [(Path(p.path).name, p.reason) for p in problems] == [("slow.jsonl", "reading took more than 0 s: stopped")]


def test_names_that_are_not_utf8(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = home / ".claude" / "projects" / os.fsdecode(b"-home-\xff\xfeproj")
    folder.mkdir()
    path = folder / os.fsdecode(b"sess-\xff.jsonl")
    shutil.copyfile(CLAUDE / "short.jsonl", path)
    rollout = codex_dir(home) / os.fsdecode(b"rollout-2026-02-23T21-00-00-\xfe.jsonl")
    shutil.copyfile(SMALL_CODEX, rollout)
    entries, problems = scan()
    assert problems == [] and names(entries) == GOOD | {path.name, rollout.name}
    index = json.loads(discovery.index_path().read_bytes())  # written, and read back as the same paths
    assert str(path) in index["files"] and str(rollout) in index["files"]
    read: list[Path] = []
    real = discovery.summarize
    monkeypatch.setattr(discovery, "summarize", lambda agent, p: read.append(p) or real(agent, p))
    assert scan()[0] == entries and read == []  # from the index
    table = discovery.format_table(entries)
    assert "sess-\\xff.jsonl" in table and "\\xff\\xfeproj" in table
    table.encode("utf-8")  # printable


# --------------------------------------------------------------------------- one file never stops the others


def test_any_failure_of_one_file_is_a_problem_of_that_file(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    real = discovery.summarize

    def failing(agent: discovery.Agent, path: Path) -> discovery.SourceEntry:
        if path.name == "short.jsonl":
            raise RuntimeError("something no one foresaw")
        return real(agent, path)

    monkeypatch.setattr(discovery, "summarize", failing)
    with caplog.at_level(logging.WARNING, logger="engine.sources.discovery"):
        entries, problems = scan()
    assert names(entries) == GOOD - {"short.jsonl"}
    assert problems == [ScanProblem("claude-code", str(claude_dir(home) / "short.jsonl"),
                                    "cannot be read (RuntimeError: something no one foresaw)")]
    # the unforeseen failure (a reader's bug) leaves its traceback in the log
    logged = [r for r in caplog.records if r.name == "engine.sources.discovery"]
    assert [(r.getMessage(), r.exc_info is not None and r.exc_info[0]) for r in logged] == [
        (f"summarising {claude_dir(home) / 'short.jsonl'} failed", RuntimeError)]


def test_the_command_names_each_file_it_left_out(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for n in range(12):
        os.mkfifo(claude_dir(home) / f"pipe{n:02d}.jsonl")
    assert promptly(lambda: cli.main(["sources"])) == 0
    captured = capsys.readouterr()
    warnings = captured.err.splitlines()
    assert len(warnings) == 11
    reason = "not a regular file (a FIFO (named pipe)): not read"
    assert len(set(warnings[:10])) == 10 and set(warnings[:10]) <= {
        f"ctxbench: warning: {claude_dir(home) / f'pipe{n:02d}.jsonl'}: {reason}" for n in range(12)}
    assert warnings[10] == "ctxbench: warning: and 2 more file(s) that could not be read"
    assert len(captured.out.splitlines()) == 1 + len(GOOD)  # the table: every other session
    assert promptly(lambda: cli.main(["sources", "--json"])) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["type"] for r in rows] == ["source"] * len(GOOD) + ["unreadable"] * 12
    assert rows[-1] == {"type": "unreadable", "agent": "claude-code", "path": rows[-1]["path"], "reason": reason}


def test_swe_agent_aggregate_figures_are_validated(tmp_path: Path) -> None:
    from engine.sources.swe_agent import read_swe_agent
    from tests.engine.sources.conftest import SWE

    traj = json.loads((SWE / "function_calling_simple.traj").read_text(encoding="utf-8"))
    traj.setdefault("info", {})["model_stats"] = {"tokens_sent": float("nan"), "tokens_received": -4, "api_calls": 3,
                                                  "instance_cost": float("inf"), "total_cost": 0.5, "note": "x",
                                                  "nested": [1, 2], "flag": True, "huge": 2**70}
    path = tmp_path / "x.traj"
    path.write_text(json.dumps(traj), encoding="utf-8")
    assert read_swe_agent(path).aggregate == {"tokens_sent": None, "tokens_received": None, "api_calls": 3,
                                              "instance_cost": None, "total_cost": 0.5, "note": "x", "huge": None}
