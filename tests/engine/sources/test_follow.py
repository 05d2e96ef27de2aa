"""Following a growing session file (engine.sources.follow): the file is appended by the test, the
follower polled, and what it reports compared with the full readers on the same bytes."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from engine.sources.follow import Follower, FollowEvent, Tail
from engine.sources.model import Compaction, ProviderCall, SourceError
from engine.sources.readers import read_source
from tests.engine.sources.conftest import (
    BIG_CLAUDE,
    BIG_CODEX,
    CLAUDE,
    PERSISTED_CLAUDE,
    claude_files,
    codex_files,
    raw_claude_calls,
    raw_codex_calls,
)


def call_fields(c: ProviderCall) -> tuple[Any, ...]:
    return (c.index, c.prompt_tokens, c.completion_tokens, c.cache_read_tokens, c.cache_write_tokens, c.model,
            c.ts, c.window, c.request_id, c.reasoning_tokens)


def comp_fields(c: Compaction) -> tuple[Any, ...]:
    return (c.index, c.trigger, c.trigger_source, c.tokens_before, c.tokens_after, c.calls_before, c.ts)


class Seen:
    """What a consumer of the events ends up with; fails on anything reported twice."""

    def __init__(self) -> None:
        self.calls: dict[int, ProviderCall] = {}
        self.compactions: dict[int, Compaction] = {}
        self.kinds: list[str] = []
        self.resets: list[str] = []

    def take(self, events: list[FollowEvent]) -> list[FollowEvent]:
        for e in events:
            self.kinds.append(e.kind)
            if e.kind == "call":
                assert e.call is not None and e.call.index not in self.calls, "a call reported twice"
                assert e.call.index == len(self.calls), "calls out of order"
                self.calls[e.call.index] = e.call
            elif e.kind == "call_update":
                assert e.call is not None and e.call.index in self.calls, "an update of a call never reported"
                assert call_fields(e.call) != call_fields(self.calls[e.call.index]), "an update that changes nothing"
                self.calls[e.call.index] = e.call
            elif e.kind == "compaction":
                assert e.compaction is not None and e.compaction.index not in self.compactions
                self.compactions[e.compaction.index] = e.compaction
            elif e.kind == "compaction_update":
                assert e.compaction is not None and e.compaction.index in self.compactions
                self.compactions[e.compaction.index] = e.compaction
            else:
                assert e.kind == "reset"
                self.resets.append(e.reason)
                self.calls.clear()
                self.compactions.clear()
        return events

    def call_list(self) -> list[tuple[Any, ...]]:
        return [call_fields(self.calls[i]) for i in sorted(self.calls)]

    def comp_list(self) -> list[tuple[Any, ...]]:
        return [comp_fields(self.compactions[i]) for i in sorted(self.compactions)]


def expected(path: Path, fmt: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    src = read_source(path, fmt)  # type: ignore[arg-type]
    return [call_fields(c) for c in src.calls], [comp_fields(c) for c in src.compactions]


def file_lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


# --------------------------------------------------------------------------- the real sessions


@pytest.mark.parametrize("path", [BIG_CLAUDE, PERSISTED_CLAUDE, BIG_CODEX], ids=lambda p: p.name[:20])
def test_a_real_session_fed_line_by_line_gives_the_full_readers_calls(tmp_path: Path, path: Path) -> None:
    fmt = "codex" if "rollout" in path.name else "claude-code"
    target = tmp_path / path.name
    target.touch()
    follower, seen = Follower(target, fmt), Seen()  # type: ignore[arg-type]
    for line in file_lines(path):
        append(target, line)
        seen.take(follower.poll())
    calls, comps = expected(path, fmt)
    assert seen.call_list() == calls
    assert seen.comp_list() == comps
    assert len(comps) == 1 and comps[0][4] is not None  # the compaction, with its tokens_after
    assert seen.resets == []
    if fmt == "claude-code":  # the output tokens of a response arrive on its last line: updates
        assert 0 < seen.kinds.count("call_update") < len(calls)
        assert [c["prompt"] for c in raw_claude_calls(path)] == [c[1] for c in seen.call_list()]
    else:
        assert seen.kinds.count("call_update") == 0
        assert [c["prompt"] for c in raw_codex_calls(path)] == [c[1] for c in seen.call_list()]


@pytest.mark.parametrize("path", claude_files() + codex_files(), ids=lambda p: p.name[:20])
def test_a_whole_file_read_at_once_reports_each_call_once_with_its_final_figures(path: Path) -> None:
    fmt = "codex" if "rollout" in path.name else "claude-code"
    seen = Seen()
    seen.take(Follower(path).poll())
    assert (seen.call_list(), seen.comp_list()) == expected(path, fmt)
    assert "call_update" not in seen.kinds and "compaction_update" not in seen.kinds


def test_a_file_appended_in_bursts_is_followed_nothing_twice(tmp_path: Path) -> None:
    rng = random.Random(13)
    data = PERSISTED_CLAUDE.read_bytes()
    target = tmp_path / "s.jsonl"
    target.touch()
    follower, seen = Follower(target, "claude-code"), Seen()
    at = 0
    while at < len(data):
        step = rng.choice([1, 17, 500, 4096, 60_000, 300_000])  # bursts that cut lines anywhere
        append(target, data[at:at + step])
        at += step
        seen.take(follower.poll())
        assert follower.tail.offset == min(at, len(data))
    assert (seen.call_list(), seen.comp_list()) == expected(PERSISTED_CLAUDE, "claude-code")


# --------------------------------------------------------------------------- lines and calls


def claude_line(uid: str, msg_id: str, out: int, *, req: str = "req_1", prompt: int = 1000,
                parent: str | None = None) -> bytes:
    obj = {"type": "assistant", "uuid": uid, "parentUuid": parent, "sessionId": "s", "requestId": req,
           "timestamp": "2026-02-10T22:57:57.941Z",
           "message": {"id": msg_id, "model": "claude-opus-4-6", "role": "assistant",
                       "content": [{"type": "text", "text": "hello"}],
                       "usage": {"input_tokens": 3, "cache_creation_input_tokens": 7,
                                 "cache_read_input_tokens": prompt - 10, "output_tokens": out}}}
    return (json.dumps(obj) + "\n").encode()


def tool_result_line(uid: str) -> bytes:
    obj = {"type": "user", "uuid": uid, "parentUuid": None, "sessionId": "s", "timestamp": "2026-02-10T22:58:00.000Z",
           "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}}
    return (json.dumps(obj) + "\n").encode()


def test_a_line_written_in_two_pieces_waits_for_its_end(tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    line = claude_line("u1", "msg_1", 5)
    target.write_bytes(line[:40])
    follower = Follower(target, "claude-code")
    assert follower.poll() == []
    assert bytes(follower.tail.partial) == line[:40]
    append(target, line[40:-1])  # all but the newline: still not complete
    assert follower.poll() == []
    append(target, b"\n")
    events = follower.poll()
    assert [e.kind for e in events] == ["call"]
    assert events[0].call is not None and events[0].call.prompt_tokens == 1000
    assert follower.poll() == []  # nothing twice
    assert follower.tail.partial == bytearray()


def test_a_calls_later_lines_raise_its_output_as_one_update(tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    target.write_bytes(claude_line("u1", "msg_1", 1))
    follower, seen = Follower(target, "claude-code"), Seen()
    assert [e.kind for e in seen.take(follower.poll())] == ["call"]  # at once: its prompt is known
    append(target, tool_result_line("u2") + claude_line("u3", "msg_1", 1))  # same output: no update
    assert seen.take(follower.poll()) == []
    append(target, claude_line("u4", "msg_1", 441))
    events = seen.take(follower.poll())
    assert [e.kind for e in events] == ["call_update"]
    assert events[0].call is not None and events[0].call.completion_tokens == 441
    # the next request's line makes the first call final; an update of it then is impossible
    append(target, claude_line("u5", "msg_2", 1, req="req_2", prompt=2000) + claude_line("u6", "msg_2", 9, req="req_2"))
    events = seen.take(follower.poll())
    assert [e.kind for e in events] == ["call"]
    assert events[0].call is not None and events[0].call.completion_tokens == 9  # read together: one line
    assert follower._reported_calls == {1}


def test_a_compaction_is_reported_then_its_tokens_after(tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    boundary = {"type": "system", "subtype": "compact_boundary", "uuid": "b1", "parentUuid": None,
                "logicalParentUuid": "u1", "timestamp": "2026-02-10T23:00:00.000Z",
                "compactMetadata": {"trigger": "auto", "preTokens": 167_000}}
    summary = {"type": "user", "uuid": "s1", "parentUuid": "b1", "isCompactSummary": True,
               "timestamp": "2026-02-10T23:00:01.000Z", "message": {"role": "user", "content": "the summary"}}
    target.write_bytes(claude_line("u1", "msg_1", 5) + (json.dumps(boundary) + "\n").encode()
                       + (json.dumps(summary) + "\n").encode())
    follower, seen = Follower(target, "claude-code"), Seen()
    events = seen.take(follower.poll())
    assert [e.kind for e in events] == ["call", "compaction"]
    comp = events[1].compaction
    assert comp is not None and (comp.trigger, comp.tokens_before, comp.tokens_after) == ("auto", 167_000, None)
    assert comp.summary == "the summary" and comp.calls_before == 1
    append(target, claude_line("u2", "msg_2", 5, req="req_2", prompt=30_000, parent="s1"))
    events = seen.take(follower.poll())
    assert [e.kind for e in events] == ["compaction_update", "call"]
    assert events[0].compaction is not None and events[0].compaction.tokens_after == 30_000
    append(target, claude_line("u3", "msg_3", 5, req="req_3", prompt=31_000, parent="u2"))
    assert [e.kind for e in seen.take(follower.poll())] == ["call"]  # tokens_after is reported once


def codex_lines(n_calls: int, start: int = 0) -> bytes:
    out = []
    for i in range(start, start + n_calls):
        info = {"total_token_usage": {"input_tokens": 1000 * (i + 1), "output_tokens": 10 * (i + 1)},
                "last_token_usage": {"input_tokens": 1000 + i, "cached_input_tokens": 500, "output_tokens": 10,
                                     "reasoning_output_tokens": 2},
                "model_context_window": 258_400}
        line = {"timestamp": "2026-02-24T09:50:57.088Z", "type": "event_msg",
                "payload": {"type": "token_count", "info": info, "rate_limits": None}}
        out += [json.dumps(line, separators=(",", ":"))] * 2  # Codex writes each token_count twice
    return ("\n".join(out) + "\n").encode()


def test_codex_each_token_count_pair_is_one_final_call(tmp_path: Path) -> None:
    target = tmp_path / "rollout.jsonl"
    meta = {"timestamp": "2026-02-24T09:50:00.000Z", "type": "turn_context", "payload": {"model": "gpt-5.3-codex"}}
    target.write_bytes((json.dumps(meta) + "\n").encode() + codex_lines(3))
    follower, seen = Follower(target), Seen()
    seen.take(follower.poll())
    assert follower.format == "codex"
    assert [c[1] for c in seen.call_list()] == [1000, 1001, 1002]
    assert {c[5] for c in seen.call_list()} == {"gpt-5.3-codex"}
    half = codex_lines(1, start=3)
    append(target, half[:30])
    assert follower.poll() == []
    append(target, half[30:])
    assert [e.kind for e in seen.take(follower.poll())] == ["call"]
    assert seen.calls[3].cache_write_tokens is None and seen.calls[3].window == 258_400


# --------------------------------------------------------------------------- truncated, replaced, rewritten


def test_a_truncated_and_rewritten_file_is_read_again_from_its_start(tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    target.write_bytes(claude_line("u1", "msg_1", 5) + claude_line("u2", "msg_2", 5, req="req_2"))
    follower, seen = Follower(target, "claude-code"), Seen()
    seen.take(follower.poll())
    assert len(seen.calls) == 2
    with open(target, "r+b") as fh:  # truncated in place (same inode), then something shorter written
        fh.truncate(0)
    append(target, claude_line("u9", "msg_9", 7, req="req_9", prompt=5000))
    events = seen.take(follower.poll())
    assert [e.kind for e in events] == ["reset", "call"]
    assert seen.resets == ["truncated"]
    assert seen.call_list()[0][:3] == (0, 5000, 7)


def test_a_file_rewritten_in_place_longer_than_before_is_noticed(tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    target.write_bytes(claude_line("u1", "msg_1", 5))
    follower, seen = Follower(target, "claude-code"), Seen()
    seen.take(follower.poll())
    new = claude_line("x1", "msg_x", 3, req="req_x", prompt=9000) * 1 + claude_line("x2", "msg_y", 4, req="req_y")
    with open(target, "r+b") as fh:  # same inode, larger: only the content tells
        fh.write(new)
    events = seen.take(follower.poll())
    assert events[0].kind == "reset" and seen.resets == ["rewritten"]
    assert [c[1] for c in seen.call_list()] == [9000, 1000]


def test_a_replaced_file_is_read_again_from_its_start(tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    target.write_bytes(claude_line("u1", "msg_1", 5) + claude_line("u2", "msg_2", 5, req="req_2"))
    follower, seen = Follower(target, "claude-code"), Seen()
    seen.take(follower.poll())
    other = tmp_path / "new.jsonl"
    other.write_bytes(claude_line("z1", "msg_z", 2, req="req_z", prompt=4000) * 3)
    os.replace(other, target)  # another inode at the same path
    events = seen.take(follower.poll())
    assert [e.kind for e in events] == ["reset", "call"]
    assert seen.resets == ["replaced"] and seen.call_list()[0][1] == 4000
    target.unlink()  # gone for a moment (an agent rotating it): said once, then the new file from its start
    assert follower.poll() == [FollowEvent("missing", reason="deleted: no file at this path now")]
    assert follower.poll() == []
    target.write_bytes(claude_line("w1", "msg_w", 2, req="req_w", prompt=6000))
    events = seen.take(follower.poll())
    assert [e.kind for e in events] == ["reset", "call"] and seen.call_list()[0][1] == 6000


# --------------------------------------------------------------------------- new only, formats, memory


def test_new_only_reports_only_what_is_appended(tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    target.write_bytes(claude_line("u1", "msg_1", 1) + claude_line("u2", "msg_2", 1, req="req_2"))
    follower = Follower(target, "claude-code", new_only=True)
    assert follower.poll() == []
    append(target, claude_line("u3", "msg_2", 50, req="req_2"))  # the backlog's open call grows: not new
    assert follower.poll() == []
    append(target, claude_line("u4", "msg_3", 1, req="req_3", prompt=3000))
    events = follower.poll()
    assert [(e.kind, e.call.index if e.call else None) for e in events] == [("call", 2)]
    assert events[0].call is not None and events[0].call.prompt_tokens == 3000


def test_new_only_on_an_empty_file_reports_everything_appended(tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    target.touch()
    follower = Follower(target, new_only=True)
    assert follower.poll() == [] and follower.format is None  # not known until a line is there
    append(target, claude_line("u1", "msg_1", 1))
    assert [e.kind for e in follower.poll()] == ["call"]
    assert follower.format == "claude-code"


def test_formats_that_are_not_appended_are_refused() -> None:
    with pytest.raises(SourceError, match="not followed"):
        Follower(Path("x.json"), "openhands")
    traj = next((CLAUDE.parent / "swe-agent").glob("*.traj"))
    with pytest.raises(SourceError, match="swe-agent files are not followed"):
        Follower(traj).poll()


def test_many_calls_followed_one_by_one_are_each_reported_once(tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    target.touch()
    follower, seen = Follower(target, "claude-code"), Seen()
    for i in range(200):
        append(target, claude_line(f"u{i}", f"msg_{i}", 1, req=f"r{i}") + tool_result_line(f"t{i}"))
        seen.take(follower.poll())
    parser = follower.parser
    assert parser is not None and len(seen.calls) == 200
    assert len(parser.reader.session.calls) == 200  # the reader the import runs, fed only what was appended
    assert follower._held == [] and follower._reported_calls == {199}


def test_many_calls_read_at_once_are_all_reported(tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    target.write_bytes(b"".join(claude_line(f"u{i}", f"msg_{i}", 1, req=f"r{i}", prompt=1000 + i) for i in range(50)))
    seen = Seen()
    seen.take(Follower(target, "claude-code").poll())
    assert [c[1] for c in seen.call_list()] == [1000 + i for i in range(50)]


def test_following_never_writes_to_the_file(tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    target.write_bytes(claude_line("u1", "msg_1", 1))
    os.chmod(target, 0o444)
    before = os.stat(target)
    follower = Follower(target)
    assert [e.kind for e in follower.poll()] == ["call"]
    after = os.stat(target)
    assert (after.st_mtime_ns, after.st_size, after.st_mode) == (before.st_mtime_ns, before.st_size, before.st_mode)


def test_tail_reads_in_chunks_and_says_more_is_waiting(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_bytes(b"one\ntwo\nthree\n")
    tail = Tail(target)
    assert tail.read(limit=6) == ([b"one"], None, True)
    assert tail.read(limit=6) == ([b"two"], None, True)
    assert tail.read(limit=6) == ([b"three"], None, False)
    assert tail.read() == ([], None, False)


# --------------------------------------------------------------------------- Gemini CLI and OpenCode


def gemini_file(tmp_path: Path) -> tuple[Path, bytes]:
    from tests.engine.sources.test_gemini_cli import _write, resumed_and_compressed

    whole = _write(tmp_path / "whole", resumed_and_compressed())
    return whole, whole.read_bytes()


def test_a_gemini_cli_file_followed_line_by_line_gives_the_full_readers_calls(tmp_path: Path) -> None:
    whole, data = gemini_file(tmp_path)
    target = tmp_path / "chats" / whole.name
    target.parent.mkdir()
    target.touch()
    follower, seen = Follower(target), Seen()
    assert follower.poll() == [] and follower.format is None  # empty: not known yet
    for line in data.splitlines(keepends=True):
        append(target, line)
        seen.take(follower.poll())
    assert follower.format == "gemini-cli"
    calls, comps = expected(whole, "gemini-cli")
    assert seen.call_list() == calls and seen.comp_list() == comps
    assert len(comps) == 1 and comps[0][4] == 900 and len(calls) == 4  # the compression, its tokens_after
    assert seen.kinds.count("compaction_update") == 1 and seen.resets == []
    # in random bursts (lines cut anywhere), and read whole at once: the same
    for seed in range(3):
        rng = random.Random(seed)
        burst = tmp_path / f"burst{seed}.jsonl"
        burst.touch()
        follower, seen = Follower(burst, "gemini-cli"), Seen()
        at = 0
        while at < len(data):
            step = rng.randint(1, 400)
            append(burst, data[at:at + step])
            at += step
            seen.take(follower.poll())
        assert (seen.call_list(), seen.comp_list()) == (calls, comps)
    seen = Seen()
    seen.take(Follower(whole).poll())
    assert (seen.call_list(), seen.comp_list()) == (calls, comps)
    assert "call_update" not in seen.kinds and "compaction_update" not in seen.kinds


def test_a_gemini_cli_record_written_again_updates_its_call(tmp_path: Path) -> None:
    from tests.engine.sources.test_gemini_cli import _gemini, _tokens, one_turn

    rows = one_turn()
    target = tmp_path / "session-x.jsonl"
    target.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in rows[:5]))
    follower, seen = Follower(target), Seen()
    assert [e.kind for e in seen.take(follower.poll())] == ["call"]  # at once: its prompt is known
    append(target, json.dumps(rows[5]).encode() + b"\n")  # the same record, its tool call added: same figures
    assert seen.take(follower.poll()) == []
    grown = dict(rows[5], tokens=_tokens(1000, 0, 12))
    append(target, json.dumps(grown).encode() + b"\n")
    events = seen.take(follower.poll())
    assert [e.kind for e in events] == ["call_update"]
    assert events[0].call is not None and events[0].call.completion_tokens == 12
    append(target, b"".join(json.dumps(r).encode() + b"\n" for r in rows[6:]))
    append(target, json.dumps(_gemini("g2", 4, _tokens(1100, 1000, 3), text="Done!")).encode() + b"\n")
    assert [e.kind for e in seen.take(follower.poll())] == ["call"]  # g2, and its second write no update
    assert seen.calls[1].prompt_tokens == 1100 and seen.calls[1].cache_read_tokens == 1000


def opencode_actions(tmp_path: Path) -> tuple[Any, Path]:
    from tests.engine.sources.test_opencode import Db, full_session

    source = Db(tmp_path / "source.db")
    full_session(source)
    return source, source.path


def sync_updates(source: Any, replay: Any) -> None:
    """The UPDATEs full_session makes outside its actions (messages' time.completed)."""
    for row in source.conn.execute("SELECT id, time_updated, data FROM message"):
        replay.conn.execute("UPDATE message SET data = ?, time_updated = ? WHERE id = ?", (row[2], row[1], row[0]))


def test_an_opencode_session_followed_row_by_row_gives_the_full_readers_calls(tmp_path: Path) -> None:
    from engine.sources.opencode import opencode_path
    from tests.engine.sources.test_opencode import SID, Db

    source, _ = opencode_actions(tmp_path)
    replay = Db(tmp_path / "opencode.db")
    follower, seen = Follower(opencode_path(replay.path, SID)), Seen()
    for sql, args in source.actions:
        replay.conn.execute(sql, args)
        if replay.conn.execute("SELECT 1 FROM session WHERE id = ?", (SID,)).fetchone() is not None:
            seen.take(follower.poll())
    sync_updates(source, replay)
    seen.take(follower.poll())
    assert follower.format == "opencode"
    calls, comps = expected(opencode_path(source.path, SID), "opencode")
    assert seen.call_list() == calls and seen.comp_list() == comps
    assert len(calls) == 3 and len(comps) == 1 and comps[0][4] == 69  # the compaction and its tokens_after
    assert seen.kinds.count("compaction_update") == 1 and seen.resets == []
    assert follower.poll() == []  # nothing twice
    seen = Seen()
    seen.take(Follower(source.path, "opencode").poll())  # the database alone: its latest top-level session
    assert (seen.call_list(), seen.comp_list()) == (calls, comps)


def test_an_opencode_session_new_only_and_a_revert(tmp_path: Path) -> None:
    from engine.sources.opencode import opencode_path
    from tests.engine.sources.test_opencode import SID, Db, assistant, tokens, user

    db = Db(tmp_path / "opencode.db")
    db.session(SID)
    user(db, "msg_01", "hello")
    assistant(db, "msg_02", "msg_01", tokens(10, 1), text="hi")
    follower = Follower(opencode_path(db.path, SID), new_only=True)
    assert follower.poll() == []  # what the session holds is not reported
    user(db, "msg_03", "again")
    assistant(db, "msg_04", "msg_03", tokens(20, 1, read=5), text="hi again")
    events = follower.poll()
    assert [(e.kind, e.call.index if e.call else None) for e in events] == [("call", 1)]
    assert events[0].call is not None and events[0].call.prompt_tokens == 25
    assert follower.poll() == []
    db.conn.execute("DELETE FROM part WHERE message_id IN ('msg_03', 'msg_04')")  # a revert: rows deleted
    db.conn.execute("DELETE FROM message WHERE id IN ('msg_03', 'msg_04')")
    events = follower.poll()
    assert [e.kind for e in events] == ["reset", "call"] and events[0].reason == "rewritten"
    assert events[1].call is not None and (events[1].call.index, events[1].call.prompt_tokens) == (0, 10)


def test_an_opencode_session_that_is_not_there(tmp_path: Path) -> None:
    from engine.sources.opencode import opencode_path
    from tests.engine.sources.test_opencode import SID, Db

    db = Db(tmp_path / "opencode.db")
    db.session(SID)
    with pytest.raises(SourceError, match="no session ses_nope"):
        Follower(opencode_path(db.path, "ses_nope")).poll()
    assert Follower(opencode_path(tmp_path / "missing.db", SID)).poll() == []  # no database yet: wait
