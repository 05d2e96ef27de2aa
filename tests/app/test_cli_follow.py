"""``ctxbench follow`` as a subprocess: it prints what the file holds, then each call the test appends,
and ends with status 0 on SIGTERM / SIGINT. Runs in the GUI pytest process (``-p no:asyncio``)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.sources.readers import read_source
from tests.conftest import REPO, SHARED

CLAUDE = SHARED / "data" / "sessions" / "claude-code"
TOOL_HEAVY = CLAUDE / "tool_heavy.jsonl"
CODEX = SHARED / "data" / "sessions" / "codex"
BIG_CODEX = CODEX / "rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"
CALL_FIELDS = ("provider_prompt_tokens", "cache_read_tokens", "cache_write_tokens", "completion_tokens", "window",
               "model", "ts")


class Follow:
    """A running ``ctxbench follow``; its stdout lines arrive on a queue as they are printed."""

    def __init__(self, *args: str) -> None:
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
        self.proc = subprocess.Popen([sys.executable, "-m", "app.cli", "follow", "--interval", "0.05", *args],
                                     cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def take(self, n: int, timeout: float = 10) -> list[dict[str, Any]]:
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < n:
            try:
                out.append(json.loads(self.lines.get(timeout=max(0.01, deadline - time.monotonic()))))
            except queue.Empty:
                raise AssertionError(f"{len(out)} of {n} lines after {timeout}s; stderr: {self.stderr()}") from None
        return out

    def quiet(self, seconds: float) -> list[str]:
        time.sleep(seconds)
        out = []
        while not self.lines.empty():
            out.append(self.lines.get())
        return out

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(running)"
        return self.proc.stderr.read() if self.proc.stderr else ""

    def handling(self, sig: int, timeout: float = 60.0) -> bool:
        """Wait until the process catches ``sig`` (its handler installed: Linux's SigCgt mask), so that a signal sent
        now is handled, not the default action of a process still importing on a loaded machine."""
        status = Path(f"/proc/{self.proc.pid}/status")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                caught = next(line for line in status.read_text().splitlines() if line.startswith("SigCgt:"))
            except (OSError, StopIteration):
                return True  # no /proc here: nothing to wait on
            if int(caught.split()[1], 16) >> (sig - 1) & 1:
                return True
            time.sleep(0.05)
        return False

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.handling(sig), f"the process never caught signal {sig}: {self.stderr()}"
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=10)
        self._reader.join(timeout=5)
        return code


@pytest.fixture
def running() -> Iterator[list[Follow]]:
    started: list[Follow] = []
    yield started
    for f in started:
        if f.proc.poll() is None:
            f.proc.kill()
            f.proc.wait()


def start(running: list[Follow], *args: str) -> Follow:
    f = Follow(*args)
    running.append(f)
    return f


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)
        fh.flush()


def test_prints_what_the_file_holds_then_each_appended_call(tmp_path: Path, running: list[Follow]) -> None:
    lines = lines_of(TOOL_HEAVY)
    full = read_source(TOOL_HEAVY, "claude-code")
    # the file up to the second call's first line; the rest is appended while following
    second = next(i for i, ln in enumerate(lines) if full.calls[1].request_id.encode() in ln)
    target = tmp_path / "session.jsonl"
    target.write_bytes(b"".join(lines[:second]))
    f = start(running, str(target))
    first = f.take(1)
    assert first[0]["type"] == "call" and first[0]["index"] == 0
    assert {k: first[0][k] for k in CALL_FIELDS} == {
        "provider_prompt_tokens": full.calls[0].prompt_tokens, "cache_read_tokens": full.calls[0].cache_read_tokens,
        "cache_write_tokens": full.calls[0].cache_write_tokens, "completion_tokens": full.calls[0].completion_tokens,
        "window": 200_000, "model": full.calls[0].model, "ts": full.calls[0].ts}
    assert f.quiet(0.3) == []
    got: list[dict[str, Any]] = []
    for line in lines[second:]:
        t0 = time.monotonic()
        append(target, line[: len(line) // 2])  # every line in two pieces
        time.sleep(0.02)
        append(target, line[len(line) // 2:])
        new = f.quiet(0.15)
        got += [json.loads(x) for x in new]
        assert time.monotonic() - t0 < 5
    calls = {g["index"]: g for g in [first[0], *got] if g["type"] in ("call", "call_update")}
    assert [g["index"] for g in [first[0], *got] if g["type"] == "call"] == list(range(len(full.calls)))
    assert [calls[c.index]["completion_tokens"] for c in full.calls] == [c.completion_tokens for c in full.calls]
    assert [calls[c.index]["provider_prompt_tokens"] for c in full.calls] == [c.prompt_tokens for c in full.calls]
    assert f.stop() == 0


def codex_call_lines(lines: list[bytes]) -> list[int]:
    """Indices of the lines that make a Codex call: a token_count whose total_token_usage changed."""
    out, prev = [], None
    for i, line in enumerate(lines):
        obj = json.loads(line)
        payload = obj.get("payload") or {}
        if obj.get("type") == "event_msg" and payload.get("type") == "token_count" and payload.get("info"):
            total = payload["info"]["total_token_usage"]
            if total != prev:
                out.append(i)
            prev = total
    return out


def test_a_new_call_is_printed_within_a_second(tmp_path: Path, running: list[Follow]) -> None:
    target = tmp_path / "rollout-x.jsonl"
    codex = lines_of(BIG_CODEX)
    calls = [i for i in codex_call_lines(codex) if i > 200][:3]
    target.write_bytes(b"".join(codex[:200]))
    f = start(running, str(target), "--new-only")
    assert f.quiet(0.5) == []  # what the file holds is not printed
    at = 200
    for i in calls:
        append(target, b"".join(codex[at:i]))  # what comes before the call: nothing to print
        assert f.quiet(0.2) == []
        t0 = time.monotonic()
        append(target, codex[i])
        out = f.take(1, timeout=1.0)  # fails unless printed within 1 s of the line's end
        assert time.monotonic() - t0 < 1.0
        assert out[0]["type"] == "call"
        assert out[0]["provider_prompt_tokens"] == json.loads(codex[i])["payload"]["info"]["last_token_usage"][
            "input_tokens"]
        at = i + 1
    assert f.stop(signal.SIGINT) == 0


def test_codex_compaction_lines(tmp_path: Path, running: list[Follow]) -> None:
    full = read_source(BIG_CODEX, "codex")
    f = start(running, str(BIG_CODEX))
    out = f.take(len(full.calls) + 1, timeout=20)
    comps = [o for o in out if o["type"] == "compaction"]
    assert comps == [{
        "type": "compaction", "index": 0, "trigger": "auto", "trigger_source": "inferred: mid-turn",
        "tokens_before": 209_950, "tokens_after": 48_297, "calls_before": full.compactions[0].calls_before,
        "ts": full.compactions[0].ts}]
    assert out.index(comps[0]) == full.compactions[0].calls_before  # between the calls before and after it
    assert [o["provider_prompt_tokens"] for o in out if o["type"] == "call"] == [c.prompt_tokens for c in full.calls]
    assert all(o["cache_write_tokens"] is None and o["window"] == 258_400 for o in out if o["type"] == "call")
    assert f.quiet(0.3) == []
    assert f.stop() == 0
    assert BIG_CODEX.stat().st_size == 1_041_630  # only read


def test_sigterm_with_nothing_to_print_ends_with_status_0(tmp_path: Path, running: list[Follow]) -> None:
    target = tmp_path / "empty.jsonl"
    target.touch()
    f = start(running, str(target))
    assert f.quiet(0.5) == []
    assert f.proc.poll() is None  # still following
    assert f.stop(signal.SIGTERM) == 0
    assert f.proc.stderr is not None and f.proc.stderr.read() == ""


def test_a_truncated_file_prints_a_reset_and_its_new_calls(tmp_path: Path, running: list[Follow]) -> None:
    target = tmp_path / "session.jsonl"
    target.write_bytes(TOOL_HEAVY.read_bytes())
    f = start(running, str(target))
    assert [o["type"] for o in f.take(4)] == ["call"] * 4
    target.write_bytes(b"")
    time.sleep(0.2)
    target.write_bytes(b"".join(lines_of(CLAUDE / "short.jsonl")))
    out = f.take(2)
    assert [o["type"] for o in out] == ["reset", "call"] and out[0]["reason"] == "truncated"
    assert out[1]["index"] == 0
    assert f.stop() == 0


def test_a_deleted_file_is_said_once_and_followed_again_when_it_is_back(tmp_path: Path,
                                                                         running: list[Follow]) -> None:
    target = tmp_path / "session.jsonl"
    target.write_bytes(TOOL_HEAVY.read_bytes())
    f = start(running, str(target))
    assert [o["type"] for o in f.take(4)] == ["call"] * 4
    target.unlink()
    assert f.take(1) == [{"type": "missing", "reason": "deleted: no file at this path now"}]
    assert f.quiet(0.3) == []  # said once, not at every poll
    os.mkfifo(target)  # something that is no regular file in its place: said, never opened
    assert f.take(1) == [{"type": "missing", "reason": "not a regular file (a FIFO (named pipe)): not read"}]
    back = tmp_path / "back.jsonl"
    back.write_bytes(b"".join(lines_of(CLAUDE / "short.jsonl")))
    os.replace(back, target)  # the session again (at once: no moment without a file)
    out = f.take(2)
    assert [o["type"] for o in out] == ["reset", "call"] and out[0]["reason"] == "replaced" and out[1]["index"] == 0
    assert f.stop() == 0


def test_a_file_that_cannot_be_followed_is_one_error_line(tmp_path: Path) -> None:
    missing = subprocess.run([sys.executable, "-m", "app.cli", "follow", str(tmp_path / "nope.jsonl")], cwd=REPO,
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"ctxbench: error: no file at {tmp_path / 'nope.jsonl'}"
    traj = next((SHARED / "data" / "sessions" / "swe-agent").glob("*.traj"))
    other = subprocess.run([sys.executable, "-m", "app.cli", "follow", str(traj)], cwd=REPO,
                           capture_output=True, text=True, timeout=60)
    assert other.returncode == 1 and "swe-agent files are not followed" in other.stderr


def test_a_gemini_cli_file(tmp_path: Path, running: list[Follow]) -> None:
    from tests.engine.sources.test_gemini_cli import _write, resumed_and_compressed

    whole = _write(tmp_path / "whole", resumed_and_compressed())
    full = read_source(whole, "gemini-cli")
    lines = lines_of(whole)
    target = tmp_path / "chats" / whole.name
    target.parent.mkdir()
    target.write_bytes(b"".join(lines[:5]))  # the first call
    f = start(running, str(target))
    first = f.take(1)
    assert first[0]["type"] == "call" and first[0]["provider_prompt_tokens"] == full.calls[0].prompt_tokens
    assert first[0]["cache_write_tokens"] is None and first[0]["window"] == 1_048_576
    cut = next(i for i, ln in enumerate(lines) if b"<state_snapshot>" in ln) + 1  # up to the compression
    for line in lines[5:cut]:
        append(target, line)
        time.sleep(0.02)
    out = f.take(full.compactions[0].calls_before - 1 + 1)  # the calls before it, and the compression
    assert out[-1]["type"] == "compaction" and (out[-1]["tokens_before"], out[-1]["tokens_after"]) == (600_000, None)
    append(target, b"".join(lines[cut:]))
    out += f.take(2)  # its tokens_after (the next call's prompt), and that call
    assert [o["type"] for o in out[-2:]] == ["compaction_update", "call"] and out[-2]["tokens_after"] == 900
    assert [o["provider_prompt_tokens"] for o in [first[0], *out] if o["type"] == "call"] == [
        c.prompt_tokens for c in full.calls]
    assert f.quiet(0.2) == []
    assert f.stop() == 0


def test_an_opencode_session(tmp_path: Path, running: list[Follow]) -> None:
    from engine.sources.opencode import opencode_path
    from tests.engine.sources.test_opencode import SID, Db, assistant, tokens, user

    db = Db(tmp_path / "opencode.db")
    db.session(SID)
    user(db, "msg_01", "hello")
    assistant(db, "msg_02", "msg_01", tokens(10, 1, write=5), text="hi")
    f = start(running, str(opencode_path(db.path, SID)))
    first = f.take(1)
    assert first[0]["type"] == "call" and (first[0]["index"], first[0]["provider_prompt_tokens"]) == (0, 15)
    assert first[0]["cache_write_tokens"] == 5 and first[0]["model"] == "m1"
    assert f.quiet(0.2) == []
    user(db, "msg_03", "again")  # rows inserted while followed (another connection, as OpenCode writes)
    assistant(db, "msg_04", "msg_03", tokens(20, 2, read=15), text="hi again")
    out = f.take(1)
    db.message("msg_05", {"role": "user", "time": {"created": db.t}, "agent": "build"})
    db.part("prt_msg_05_0", "msg_05", {"type": "compaction", "auto": True, "overflow": False})
    assistant(db, "msg_06", "msg_05", tokens(200, 20), text="SUMMARY", summary=True)
    out += f.take(1)
    assert f.quiet(0.2) == []  # the summary's own call is the compaction's cost, not a call
    assistant(db, "msg_07", "msg_05", tokens(30, 3), text="Done.")
    out += f.take(2)
    assert [(o["type"], o["index"]) for o in out] == [("call", 1), ("compaction", 0), ("compaction_update", 0),
                                                      ("call", 2)]
    assert (out[1]["trigger"], out[1]["tokens_before"], out[1]["tokens_after"], out[1]["calls_before"]) == (
        "auto", 35, None, 2)
    assert out[2]["tokens_after"] == 30
    whole = read_source(opencode_path(db.path, SID), "opencode")
    calls = [first[0], *[o for o in out if o["type"] == "call"]]
    assert [c["provider_prompt_tokens"] for c in calls] == [c.prompt_tokens for c in whole.calls] == [15, 35, 30]
    assert f.quiet(0.2) == []
    assert f.stop(signal.SIGINT) == 0
    missing = subprocess.run([sys.executable, "-m", "app.cli", "follow", f"{tmp_path / 'nope.db'}#{SID}"], cwd=REPO,
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "no file at" in missing.stderr
