"""The OpenCode reader on small databases built here (the relevant columns of OpenCode 1.18's schema)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks.hostile import OPENCODE_SCHEMA
from engine.sources import opencode, sqlite_read
from engine.sources.detect import detect_format
from engine.sources.model import SourceError, SourceSession
from engine.sources.opencode import (
    CLEARED_OUTPUT,
    COMPACTION_QUESTION,
    OpenCodeReader,
    latest_session,
    list_sessions,
    opencode_path,
    read_opencode,
    split_path,
)
from engine.sources.readers import read_source

SCHEMA = OPENCODE_SCHEMA  # the columns of OpenCode 1.18's schema the reader uses (one copy, the benchmark's)
T0 = 1_790_000_000_000
SID = "ses_main"
CHILD = "ses_child"


class Db:
    """A database and the rows added to it, each ``add`` one transaction (as OpenCode writes them)."""

    def __init__(self, path: Path, wal: bool = True) -> None:
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        if wal:
            self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.executescript(SCHEMA)
        self.t = T0
        self.n = 0
        self.actions: list[tuple[str, tuple[Any, ...]]] = []

    def tick(self) -> int:
        self.t += 10
        return self.t

    def session(self, sid: str, parent: str | None = None, title: str = "a session") -> None:
        t = self.tick()
        self._do("INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, cost, "
                 "time_created, time_updated) VALUES (?, 'global', ?, 'slug', '/work/proj', ?, '1.18.33', 0.5, ?, ?)",
                 (sid, parent, title, t, t))

    def message(self, mid: str, data: dict[str, Any], sid: str = SID) -> None:
        t = self.tick()
        self._do("INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)",
                 (mid, sid, t, t, json.dumps(data)))

    def part(self, pid: str, mid: str, data: dict[str, Any] | str, sid: str = SID) -> None:
        t = self.tick()
        raw = data if isinstance(data, str) else json.dumps(data)
        self._do("INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) "
                 "VALUES (?, ?, ?, ?, ?, ?)", (pid, mid, sid, t, t, raw))

    def update_part(self, pid: str, data: dict[str, Any], touch: bool = True) -> None:
        if touch:
            self._do("UPDATE part SET data = ?, time_updated = ? WHERE id = ?", (json.dumps(data), self.tick(), pid))
        else:
            self._do("UPDATE part SET data = ? WHERE id = ?", (json.dumps(data), pid))

    def _do(self, sql: str, args: tuple[Any, ...]) -> None:
        self.conn.execute(sql, args)
        self.actions.append((sql, args))


def tokens(inp: int, out: int, read: int = 0, write: int = 0) -> dict[str, Any]:
    return {"total": inp + out + read + write, "input": inp, "output": out, "reasoning": 0,
            "cache": {"read": read, "write": write}}


def user(db: Db, mid: str, text: str, sid: str = SID, **part: Any) -> None:
    db.message(mid, {"role": "user", "time": {"created": db.t}, "agent": "build",
                     "model": {"providerID": "local", "modelID": "m1"}}, sid)
    db.part(f"prt_{mid}_0", mid, {"type": "text", "text": text, **part}, sid)


def assistant(db: Db, mid: str, parent: str, tok: dict[str, Any], *, text: str = "",
              tool: tuple[str, str, dict[str, Any], str] | None = None, sid: str = SID, summary: bool = False,
              child: str | None = None) -> None:
    """One assistant message with one step: step-start, text or a tool part, step-finish."""
    info: dict[str, Any] = {"role": "assistant", "parentID": parent, "modelID": "m1", "providerID": "local",
                            "mode": "build", "time": {"created": db.t}, "cost": 0.01, "tokens": tok}
    if summary:
        info |= {"summary": True, "mode": "compaction", "agent": "compaction"}
    db.message(mid, info, sid)
    db.part(f"prt_{mid}_0", mid, {"type": "step-start"}, sid)
    if text:
        db.part(f"prt_{mid}_1", mid, {"type": "text", "text": text}, sid)
    if tool:
        call_id, name, args, output = tool
        running = {"type": "tool", "tool": name, "callID": call_id,
                   "state": {"status": "running", "input": args, "time": {"start": db.t}}}
        db.part(f"prt_{mid}_1", mid, running, sid)
        meta: dict[str, Any] = {"sessionId": child} if child else {}
        db.update_part(f"prt_{mid}_1", {**running, "state": {"status": "completed", "input": args, "output": output,
                                                            "title": "", "metadata": meta,
                                                            "time": {"start": db.t, "end": db.t + 5}}})
    db.part(f"prt_{mid}_2", mid, {"type": "step-finish", "reason": "stop", "cost": 0.01, "tokens": tok}, sid)
    db.part(f"prt_{mid}_3", mid, {"type": "snapshot", "snapshot": "abc"}, sid)
    db.conn.execute("UPDATE message SET data = json_set(data, '$.time.completed', ?), time_updated = ? WHERE id = ?",
                    (db.t, db.tick(), mid))


def full_session(db: Db) -> None:
    """Two calls, a task with a child session, an auto compaction and a call after it."""
    db.session(SID)
    user(db, "msg_01", "Run a command")
    assistant(db, "msg_02", "msg_01", tokens(100, 10, read=0, write=50),
              tool=("call_1", "bash", {"command": "echo hi"}, "hi\n"))
    db.session(CHILD, parent=SID, title="child work (@general subagent)")
    user(db, "msg_c1", "CHILD TASK", sid=CHILD)
    assistant(db, "msg_c2", "msg_c1", tokens(30, 3, read=70), text="child done", sid=CHILD)
    assistant(db, "msg_03", "msg_01", tokens(20, 5, read=150),
              tool=("call_2", "task", {"prompt": "CHILD TASK"}, "<task>child done</task>"), child=CHILD)
    db.message("msg_04", {"role": "user", "time": {"created": db.t}, "agent": "build"})
    db.part("prt_msg_04_0", "msg_04", {"type": "compaction", "auto": True, "overflow": False})
    assistant(db, "msg_05", "msg_04", tokens(200, 20, read=9), text="SUMMARY", summary=True)
    user(db, "msg_06", "Continue if you have next steps", synthetic=True)
    assistant(db, "msg_07", "msg_06", tokens(60, 2, read=9), text="Done.")


@pytest.fixture
def db(tmp_path: Path) -> Db:
    return Db(tmp_path / "opencode.db")


def key(src: SourceSession) -> Any:
    return (src.messages, src.calls, [(c.index, c.trigger, c.message_index, c.calls_before, c.tokens_before,
                                       c.tokens_after, c.summary, c.cost) for c in src.compactions],
            [(r.id, r.parent_tool_call_id, r.session and (r.session.messages, r.session.calls)) for r in src.subagents],
            src.live_start, src.skipped, src.ignored)


def test_read_whole(db: Db) -> None:
    full_session(db)
    src = read_opencode(opencode_path(db.path, SID))
    assert src.format == "opencode" and src.session_id == SID and src.cwd == "/work/proj" and src.model == "m1"
    assert [(m["role"], m["content"]) for m in src.messages] == [
        ("user", "Run a command"), ("assistant", ""), ("tool", "hi\n"), ("assistant", ""),
        ("tool", "<task>child done</task>"), ("user", COMPACTION_QUESTION), ("assistant", "SUMMARY"),
        ("user", "Continue if you have next steps"), ("assistant", "Done.")]
    assert all(m["id"] and m["ts"] for m in src.messages)
    # the whole prompt is input + cache read + cache write (OpenCode stores input without the cached part)
    assert [(c.prompt_tokens, c.cache_read_tokens, c.cache_write_tokens, c.completion_tokens, c.message_index)
            for c in src.calls] == [(150, 0, 50, 10, 1), (170, 150, 0, 5, 3), (69, 9, 0, 2, 8)]
    (comp,) = src.compactions
    assert (comp.trigger, comp.message_index, comp.calls_before, comp.tokens_before, comp.tokens_after) == (
        "auto", 5, 2, 170, 69)
    assert comp.summary == "SUMMARY" and comp.cost is not None and comp.cost.prompt_tokens == 209
    assert src.live_start == 5
    (ref,) = src.subagents
    assert ref.id == CHILD and ref.parent_tool_call_id == "call_2" and ref.session is not None
    assert [c.prompt_tokens for c in ref.session.calls] == [100]
    assert src.ignored == {"part/snapshot": 4} and src.skipped == []
    assert src.agent_cost_usd == 0.5


def test_polled_after_each_row_ends_as_read_whole(db: Db, tmp_path: Path) -> None:
    full_session(db)
    whole = read_opencode(opencode_path(db.path, SID))
    replay = Db(tmp_path / "replay.db")
    reader: OpenCodeReader | None = None
    for sql, args in db.actions:
        replay.conn.execute(sql, args)
        if reader is None:
            if replay.conn.execute("SELECT 1 FROM session WHERE id = ?", (SID,)).fetchone() is None:
                continue
            reader = OpenCodeReader(replay.path, SID)
        before = (len(reader.session.messages), len(reader.session.calls))
        changes = reader.poll()
        assert not changes.reset
        assert changes.messages_from <= len(reader.session.messages) and changes.calls_from <= before[1]
    # the replay misses the UPDATEs full_session made directly (time.completed): make them too
    for row in db.conn.execute("SELECT id, time_updated, data FROM message"):
        replay.conn.execute("UPDATE message SET data = ?, time_updated = ? WHERE id = ?", (row[2], row[1], row[0]))
    assert reader is not None
    reader.poll()
    assert key(reader.session) == key(whole)
    assert reader.poll().nothing(reader.session)


def test_poll_reports_what_changed(db: Db) -> None:
    db.session(SID)
    user(db, "msg_01", "hello")
    reader = OpenCodeReader(db.path, SID)
    first = reader.poll()
    assert (first.messages_from, first.calls_from, first.reset) == (0, 0, False)
    assert reader.poll().nothing(reader.session)
    assistant(db, "msg_02", "msg_01", tokens(10, 1), text="hi")
    changes = reader.poll()
    assert (changes.messages_from, changes.calls_from, len(reader.session.calls)) == (1, 0, 1)
    db.conn.execute("DELETE FROM part WHERE message_id = 'msg_02'")
    db.conn.execute("DELETE FROM message WHERE id = 'msg_02'")
    assert reader.poll().reset and reader.session.calls == []


def test_a_locked_database_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = Db(tmp_path / "opencode.db", wal=False)  # a rollback journal: a writer's exclusive lock blocks readers
    full_session(db)
    monkeypatch.setattr(sqlite_read, "BUSY_TIMEOUT", 0.01)
    db.conn.execute("BEGIN EXCLUSIVE")
    threading.Timer(0.3, lambda: db.conn.execute("COMMIT")).start()
    start = time.monotonic()
    src = read_opencode(opencode_path(db.path, SID))
    assert time.monotonic() - start >= 0.25 and len(src.calls) == 3


def test_a_lock_that_lasts_is_no_change_when_following(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = Db(tmp_path / "opencode.db", wal=False)
    full_session(db)
    monkeypatch.setattr(sqlite_read, "BUSY_TIMEOUT", 0.01)
    monkeypatch.setattr(sqlite_read, "RETRIES", 2)
    reader = OpenCodeReader(db.path, SID)
    reader.poll()
    db.conn.execute("BEGIN EXCLUSIVE")
    try:
        assert reader.poll().nothing(reader.session)  # tried again next time, not an error
        assert reader.busy and "locked by another process" in reader.problem and str(db.path) in reader.problem
        with pytest.raises(opencode.DatabaseBusy, match="locked"):
            read_opencode(opencode_path(db.path, SID))
    finally:
        db.conn.execute("COMMIT")


def test_json_not_parsed_yet_is_read_at_the_next_poll(db: Db) -> None:
    db.session(SID)
    user(db, "msg_01", "hello")
    db.message("msg_02", {"role": "assistant", "parentID": "msg_01", "modelID": "m1", "time": {"created": db.t}})
    db.part("prt_half", "msg_02", '{"type": "text", "te')
    reader = OpenCodeReader(db.path, SID)
    reader.poll()
    assert any("prt_half" in s.reason for s in reader.session.skipped)
    db.t += 60_000  # much later rows: the half-written one is still read again
    db.part("prt_later", "msg_02", {"type": "step-finish", "reason": "stop", "cost": 0, "tokens": tokens(5, 1)})
    reader.poll()
    db.update_part("prt_half", {"type": "text", "text": "hi there"}, touch=False)
    reader.poll()
    assert reader.session.skipped == [] and reader.session.messages[-1]["content"] == "hi there"


def test_paths_listing_and_detection(db: Db) -> None:
    full_session(db)
    assert split_path(opencode_path(db.path, SID)) == (db.path, SID)
    assert split_path(db.path) == (db.path, None)
    assert latest_session(db.path) == SID  # the most recent top-level session, not the child
    assert read_opencode(db.path).session_id == SID
    listed = {i.id: (i.parent_id, i.title, i.directory) for i in list_sessions(db.path)}
    assert listed == {SID: (None, "a session", "/work/proj"),
                      CHILD: (SID, "child work (@general subagent)", "/work/proj")}
    assert detect_format(db.path) == "opencode" and detect_format(opencode_path(db.path, SID)) == "opencode"
    assert read_source(db.path, "opencode").calls == read_opencode(db.path).calls
    with pytest.raises(SourceError, match="no session"):
        read_opencode(opencode_path(db.path, "ses_nope"))


def test_parts_known_ignored_and_unknown(db: Db) -> None:
    db.session(SID)
    user(db, "msg_01", "look")
    db.part("prt_msg_01_1", "msg_01", {"type": "text", "text": "not sent", "ignored": True})
    db.part("prt_msg_01_2", "msg_01", {"type": "file", "mime": "image/png", "filename": "a.png", "url": "data:"})
    db.message("msg_02", {"role": "assistant", "parentID": "msg_01", "modelID": "m1", "time": {"created": db.t},
                          "finish": "stop"})
    db.part("prt_msg_02_0", "msg_02", {"type": "step-start"})
    db.part("prt_msg_02_1", "msg_02", {"type": "reasoning", "text": "thinking", "time": {"start": 1}})
    db.part("prt_msg_02_2", "msg_02", {"type": "tool", "tool": "read", "callID": "c1", "state": {
        "status": "completed", "input": {"path": "x"}, "output": "big", "title": "", "metadata": {},
        "time": {"start": 1, "end": 2, "compacted": 3}}})
    db.part("prt_msg_02_3", "msg_02", {"type": "patch", "hash": "h", "files": []})
    db.part("prt_msg_02_4", "msg_02", {"type": "hologram"})
    db.part("prt_msg_02_5", "msg_02", {"type": "step-finish", "reason": "stop", "cost": 0, "tokens": tokens(5, 1)})
    db.part("prt_msg_02_6", "msg_02", {"type": "step-start"})
    db.part("prt_msg_02_7", "msg_02", {"type": "tool", "tool": "bash", "callID": "c2", "state": {
        "status": "error", "input": {}, "error": "boom", "time": {"start": 1, "end": 2}}})
    db.part("prt_msg_02_8", "msg_02", {"type": "step-finish", "reason": "stop", "cost": 0, "tokens": tokens(7, 1)})
    src = read_opencode(db.path)
    assert src.messages[0]["content"] == "look\n[Attached image/png: a.png]"
    assert src.messages[1]["reasoning_content"] == "thinking" and src.messages[2]["content"] == CLEARED_OUTPUT
    assert src.messages[4]["content"] == "boom"  # the second step of the same message
    assert [(c.prompt_tokens, c.message_index) for c in src.calls] == [(5, 1), (7, 3)]
    assert src.ignored == {"part/text (ignored: not sent)": 1, "part/patch": 1}
    assert [s.reason for s in src.skipped] == ["part prt_msg_02_4: unknown part type 'hologram'"]
