"""Kilo CLI's database (OpenCode's schema, Kilo's dialect) on a small database made of rows Kilo 7.7.7 wrote in the
real-agent tier (tests/agents/test_kilo.py), shortened: a turn of two tool calls, an automatic compaction (its
summary's usage), the synthetic "Continue" user message, a closing call, and a task's child session."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from engine.sources import discovery, formats
from engine.sources.detect import detect_format
from engine.sources.follow import Follower
from engine.sources.kilo import KILO, configured_window, environment_details, is_kilo_source, read_kilo
from engine.sources.model import SourceError
from engine.sources.opencode import opencode_path, read_opencode
from engine.sources.readers import read_source

# the columns of Kilo 7.7.7's tables the reader uses, and its own tables
KILO_SCHEMA = """
CREATE TABLE project (id text PRIMARY KEY, worktree text NOT NULL, time_created integer NOT NULL,
  time_updated integer NOT NULL, sandboxes text NOT NULL);
CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL, parent_id text, slug text NOT NULL,
  directory text NOT NULL, path text, title text NOT NULL, version text NOT NULL, cost real DEFAULT 0 NOT NULL,
  tokens_input integer DEFAULT 0 NOT NULL, tokens_output integer DEFAULT 0 NOT NULL,
  tokens_cache_read integer DEFAULT 0 NOT NULL, agent text, model text, time_created integer NOT NULL,
  time_updated integer NOT NULL);
CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL, time_created integer NOT NULL,
  time_updated integer NOT NULL, data text NOT NULL);
CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL,
  time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
CREATE TABLE event (id text PRIMARY KEY, aggregate_id text NOT NULL, seq integer NOT NULL, type text NOT NULL,
  data text NOT NULL);
CREATE TABLE kilo_board (root_session_id text PRIMARY KEY, objective text NOT NULL, time_created integer NOT NULL,
  time_updated integer NOT NULL);
CREATE TABLE kilo_board_message (id text PRIMARY KEY, board_root_session_id text NOT NULL, seq integer NOT NULL,
  body text NOT NULL);
"""
SID = "ses_de5490a66ffedKO5yr0Xbp5nFD"
CHILD = "ses_de547cec8ffeXVtPjuVmtwOwFj"
WORK = "/tmp/kilo/compact/work"
T = 1795744541922  # 2026-11-27T01:55:41.922Z
PATH = {"cwd": WORK, "root": "/"}


def tok(inp: int, out: int, read: int) -> dict[str, Any]:
    return {"total": inp + read + out, "input": inp, "output": out, "reasoning": 0, "cache": {"write": 0, "read": read}}


def asst(parent: str, t: int, tokens: dict[str, Any], finish: str, **more: Any) -> dict[str, Any]:
    return {"parentID": parent, "role": "assistant", "mode": "code", "agent": "code", "path": PATH, "cost": 0,
            "tokens": tokens, "modelID": "fake-model", "providerID": "local",
            "time": {"created": t, "completed": t + 300}, "finish": finish, **more}


def user_info(t: int) -> dict[str, Any]:
    return {"role": "user", "time": {"created": t}, "agent": "code",
            "model": {"providerID": "local", "modelID": "fake-model"}, "summary": {"diffs": []}}


def step(t: int, tokens: dict[str, Any], reason: str, cost: float = 0) -> dict[str, Any]:
    return {"reason": reason, "type": "step-finish", "time": {"start": t, "end": t + 100, "elapsed": 100},
            "metrics": {"generation": 15.5, "source": "computed"}, "tokens": tokens, "cost": cost}


def bash(call: str, command: str, output: str, t: int) -> dict[str, Any]:
    return {"type": "tool", "tool": "bash", "callID": call, "state": {
        "status": "completed", "input": {"command": command, "description": "print"}, "output": output,
        "metadata": {"output": output, "exit": 0, "description": "print", "truncated": False},
        "title": "print", "time": {"start": t, "end": t + 50}}}


SUMMARY = "## Goal\nRun shell commands and report their output.\n\n## Next Steps\nNone."
CONTINUE = "Continue if you have next steps, or stop and ask for clarification if you are unsure how to proceed."
REMINDER = "\n\n<system-reminder>\nThe active agent has changed from compaction to code.\n</system-reminder>\n"
# (message id, session, data, [(part id, data)]) as Kilo wrote them
ROWS: list[tuple[str, str, dict[str, Any], list[tuple[str, dict[str, Any]]]]] = [
    ("msg_01", SID, user_info(T), [("prt_01", {"type": "text", "text": '"Run six commands"'})]),
    ("msg_02", SID, asst("msg_01", T + 2780, tok(12612, 17, 0), "tool-calls"), [
        ("prt_02a", {"type": "step-start", "time": {"start": T + 3292}}),
        ("prt_02b", bash("call_90d8", "echo step0", "step0\n", T + 3400)),
        ("prt_02c", step(T + 3292, tok(12612, 17, 0), "tool-calls"))]),
    ("msg_03", SID, asst("msg_01", T + 4490, tok(69, 17, 27613), "tool-calls"), [
        ("prt_03a", {"type": "step-start", "time": {"start": T + 4653}}),
        ("prt_03b", bash("call_7d1e", "echo step1", "step1\n", T + 4700)),
        ("prt_03c", step(T + 4653, tok(69, 17, 27613), "tool-calls"))]),
    ("msg_04", SID, {"role": "user", "model": {"providerID": "local", "modelID": "fake-model"}, "agent": "code",
                     "time": {"created": T + 4853}, "summary": {"diffs": []}},
     [("prt_04", {"type": "compaction", "auto": True})]),
    ("msg_05", SID, asst("msg_04", T + 4891, tok(569, 35, 417), "stop", mode="compaction", agent="compaction",
                         summary=True), [
        ("prt_05a", {"type": "step-start", "time": {"start": T + 5036}}),
        ("prt_05b", {"type": "text", "text": SUMMARY, "time": {"start": T + 5113, "end": T + 5123}}),
        ("prt_05c", step(T + 5036, tok(569, 35, 417), "stop"))]),
    ("msg_06", SID, user_info(T + 5222), [
        ("prt_06a", {"type": "text", "metadata": {"compaction_continue": True}, "synthetic": True, "text": CONTINUE,
                     "time": {"start": T + 5223, "end": T + 5223}}),
        ("prt_06b", {"type": "text", "text": REMINDER, "synthetic": True})]),
    ("msg_07", SID, asst("msg_06", T + 5255, tok(12434, 5, 417), "stop"), [
        ("prt_07a", {"type": "step-start", "time": {"start": T + 5708}}),
        ("prt_07b", {"type": "text", "text": "Done: 2 commands ran.", "time": {"start": T + 5800, "end": T + 5801}}),
        ("prt_07c", step(T + 5708, tok(12434, 5, 417), "stop"))]),
]


def make_db(path: Path, *, cost: float = 0.0, rows: list[Any] | None = None) -> Path:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(KILO_SCHEMA)
    conn.execute("INSERT INTO session (id, project_id, slug, directory, path, title, version, cost, agent, model, "
                 "time_created, time_updated) VALUES (?, 'global', 'happy-canyon', ?, ?, ?, '7.7.7', ?, 'code', ?, ?, "
                 "?)",
                 (SID, WORK, WORK.lstrip("/"), "New session - 2026-11-27T01:55:27.769Z", cost,
                  json.dumps({"id": "fake-model", "providerID": "local", "variant": "default"}), T - 14000, T + 6000))
    for mid, sid, data, parts in ROWS if rows is None else rows:
        t = int(data["time"]["created"])
        conn.execute("INSERT INTO message VALUES (?, ?, ?, ?, ?)", (mid, sid, t, t + 300, json.dumps(data)))
        for i, (pid, part) in enumerate(parts):
            conn.execute("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)", (pid, mid, sid, t + i, t + i, json.dumps(part)))
    conn.close()
    return path


@pytest.fixture
def kilo_db(tmp_path: Path) -> Path:
    folder = tmp_path / "home" / ".local" / "share" / "kilo"
    folder.mkdir(parents=True)
    return make_db(folder / "kilo.db")


def env_block(when: str) -> str:
    return (f"\n\n<environment_details>\nMessage time: {when}\nWorking directory: {WORK}\nWorkspace root folder: /\n"
            "</environment_details>")


def test_calls_compaction_and_messages_as_kilo_sent_them(kilo_db: Path) -> None:
    src = read_kilo(kilo_db)
    assert src.format == "kilo" and src.session_id == SID and src.path == opencode_path(kilo_db, SID)
    assert src.skipped == [] and src.cwd == WORK and src.model == "fake-model"
    assert [(c.prompt_tokens, c.cache_read_tokens, c.completion_tokens) for c in src.calls] == [
        (12612, 0, 17), (27682, 27613, 17), (12851, 417, 5)]  # input + cache read: the whole prompt
    assert [c.request_id for c in src.calls] == ["prt_02c", "prt_03c", "prt_07c"]
    (comp,) = src.compactions
    assert comp.trigger == "auto" and comp.calls_before == 2 and comp.summary == SUMMARY
    assert (comp.tokens_before, comp.tokens_after) == (27682, 12851)
    assert comp.cost is not None and (comp.cost.prompt_tokens, comp.cost.cache_read_tokens,
                                      comp.cost.completion_tokens) == (986, 417, 35)
    assert comp.cost_usd is None  # Kilo wrote 0: no price known to it
    assert src.agent_cost_usd is None and any("wrote 0" in n for n in src.notes)
    assert "Kilo CLI does not store them" in src.prefix_label
    users = [m["content"] for m in src.messages if m["role"] == "user"]
    assert users == ['"Run six commands"\n' + env_block("2026-11-27T01:55:41Z"),
                     "What did we do so far?\n" + env_block("2026-11-27T01:55:46Z"),
                     f"{CONTINUE}\n{REMINDER}\n" + env_block("2026-11-27T01:55:47Z")]
    live = src.messages[src.live_start:]
    assert [m["role"] for m in live] == ["user", "assistant", "user", "assistant"]
    assert [m["content"] for m in src.messages if m["role"] == "tool"] == ["step0\n", "step1\n"]


def test_a_kilo_database_is_told_from_opencodes(kilo_db: Path, tmp_path: Path) -> None:
    assert detect_format(kilo_db) == "kilo" and detect_format(opencode_path(kilo_db, SID)) == "kilo"
    renamed = make_db(tmp_path / "copy.db")  # not named kilo.db: Kilo's own tables tell it
    assert is_kilo_source(renamed) and detect_format(renamed) == "kilo"
    plain = tmp_path / "opencode.db"
    conn = sqlite3.connect(plain)
    conn.executescript(KILO_SCHEMA.split("CREATE TABLE kilo_board")[0])
    conn.close()
    assert not is_kilo_source(plain) and detect_format(plain) == "opencode"
    assert read_source(kilo_db, "kilo").calls == read_kilo(kilo_db).calls
    assert read_opencode(kilo_db).format == "opencode"  # the same rows in OpenCode's dialect: no Kilo block
    assert formats.display_name("kilo") == "Kilo CLI" and "kilo" in formats.names(growth="polled", listed=True)


def test_listed_in_sources_with_title_project_time_and_no_zero_cost(kilo_db: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    problems: list[discovery.ScanProblem] = []
    (entry,) = discovery.scan_sources(env={"HOME": str(home), "CTXBENCH_DATA_DIR": str(tmp_path / "data")},
                                      home=home, index=tmp_path / "idx.json", problems=problems)
    assert problems == []
    assert (entry.agent, entry.project, entry.session_id, entry.title) == ("kilo", "work", SID, '"Run six commands"')
    assert entry.path == str(opencode_path(kilo_db, SID)) and entry.started.startswith("2026-11-27T01:55:27")
    assert entry.calls == 3 and entry.last_prompt_tokens == 12851 and entry.model == "fake-model"
    assert entry.agent_cost_usd is None  # 0 in the file: unknown
    assert entry.window is None and entry.percent_full is None  # no kilo.json: the window is unknown


def test_the_window_of_a_custom_model_is_its_limit_in_kilo_json(kilo_db: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = home / ".config" / "kilo"
    config.mkdir(parents=True)
    (config / "kilo.json").write_text(json.dumps({"provider": {"local": {"models": {
        "fake-model": {"name": "fake-model", "limit": {"context": 17000, "output": 2000}}}}}}))
    src = read_kilo(kilo_db)
    assert (src.window, src.window_source) == (17000, "kilo.json")
    (entry,) = discovery.scan_sources(env={"HOME": str(home), "CTXBENCH_DATA_DIR": str(tmp_path / "data")},
                                      home=home, index=tmp_path / "idx.json")
    assert entry.window == 17000 and entry.percent_full == round(100 * 12851 / 17000, 1)
    assert configured_window(kilo_db, "local", "other-model") == (None, "")
    assert configured_window(tmp_path / "kilo.db", "local", "fake-model") == (None, "")  # not at its place
    (config / "kilo.json").write_text("{not json")
    assert read_kilo(kilo_db).window is None


def test_a_priced_model_keeps_kilos_cost(tmp_path: Path) -> None:
    rows = [(mid, sid, data, [(pid, {**p, "cost": 0.002} if p.get("type") == "step-finish" else p)
                              for pid, p in parts]) for mid, sid, data, parts in ROWS]
    src = read_kilo(make_db(tmp_path / "kilo.db", cost=0.25, rows=rows))
    assert src.agent_cost_usd == 0.25 and src.compactions[0].cost_usd == 0.002
    assert not any("wrote 0" in n for n in src.notes)


def test_a_child_session_of_a_task_is_a_subagent(tmp_path: Path) -> None:
    task = {"type": "tool", "tool": "task", "callID": "call_bd7f", "state": {
        "status": "completed", "input": {"description": "child work", "prompt": "CHILD TASK: echo child",
                                         "subagent_type": "general"},
        "output": f'<task id="{CHILD}" state="completed">\n<task_result>\nchild done\n</task_result>\n</task>',
        "metadata": {"parentSessionId": SID, "sessionId": CHILD}, "title": "child work",
        "time": {"start": T + 3400, "end": T + 4400}}}
    rows = [ROWS[0], ("msg_02", SID, asst("msg_01", T + 2780, tok(12610, 28, 0), "tool-calls"), [
        ("prt_02a", {"type": "step-start"}), ("prt_02b", task), ("prt_02c", step(T + 3292, tok(12610, 28, 0), "x"))]),
        ("msg_c1", CHILD, user_info(T + 3000), [("prt_c1", {"type": "text", "text": "CHILD TASK: echo child"})]),
        ("msg_c2", CHILD, asst("msg_c1", T + 3100, tok(635, 2, 10063), "stop", agent="general"), [
            ("prt_c2", {"type": "text", "text": "child done"}),
            ("prt_c3", step(T + 3100, tok(635, 2, 10063), "stop"))])]
    db = make_db(tmp_path / "kilo.db", rows=rows)
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO session (id, project_id, parent_id, slug, directory, path, title, version, "
                 "time_created, time_updated) VALUES (?, 'global', ?, 's', ?, ?, 'child work (@general subagent)', "
                 "'7.7.7', ?, ?)", (CHILD, SID, WORK, WORK.lstrip("/"), T + 2999, T + 3500))
    conn.commit()
    conn.close()
    src = read_kilo(db)
    (ref,) = src.subagents
    assert ref.id == CHILD and ref.parent_tool_call_id == "call_bd7f" and ref.session is not None
    assert ref.session.format == "kilo" and [c.prompt_tokens for c in ref.session.calls] == [10698]


def test_followed_by_polling_while_kilo_writes(kilo_db: Path) -> None:
    reader = formats.polled_reader("kilo", opencode_path(kilo_db, SID))
    reader.poll()
    assert len(reader.session.calls) == 3
    conn = sqlite3.connect(kilo_db, isolation_level=None)
    t = T + 9000
    conn.execute("INSERT INTO message VALUES (?, ?, ?, ?, ?)", ("msg_08", SID, t, t, json.dumps(user_info(t))))
    conn.execute("INSERT INTO part VALUES ('prt_08', 'msg_08', ?, ?, ?, ?)",
                 (SID, t, t, json.dumps({"type": "text", "text": "again"})))
    conn.execute("INSERT INTO message VALUES (?, ?, ?, ?, ?)",
                 ("msg_09", SID, t + 5, t + 5, json.dumps(asst("msg_08", t + 5, tok(80, 3, 12830), "stop"))))
    conn.execute("INSERT INTO part VALUES ('prt_09', 'msg_09', ?, ?, ?, ?)",
                 (SID, t + 6, t + 6, json.dumps(step(t + 6, tok(80, 3, 12830), "stop"))))
    conn.close()
    changes = reader.poll()
    assert changes.calls_from == 3 and [c.prompt_tokens for c in reader.session.calls][-1] == 12910
    assert reader.session.format == "kilo" and reader.session.messages[-1]["content"].startswith("again\n\n\n<env")


def test_followed_as_kilo_when_its_format_is_found(kilo_db: Path) -> None:
    follower = Follower(opencode_path(kilo_db, SID))  # no format given: detected as Kilo's
    events = follower.poll()
    assert follower.format == "kilo"
    assert [e.call.prompt_tokens for e in events if e.kind == "call" and e.call] == [12612, 27682, 12851]
    assert [e.compaction.cost_usd for e in events if e.kind == "compaction" and e.compaction] == [None]
    assert follower.poll() == []  # nothing new


def test_bad_rows_and_tables_are_said(kilo_db: Path, tmp_path: Path) -> None:
    conn = sqlite3.connect(kilo_db, isolation_level=None)
    conn.execute("UPDATE part SET data = '{\"type\": \"text\", \"te' WHERE id = 'prt_07b'")
    conn.execute("CREATE TABLE kilo_something_new (id text)")
    conn.close()
    src = read_kilo(kilo_db)
    reasons = [s.reason for s in src.skipped]
    assert any("prt_07b" in r and "Kilo CLI may still be writing it" in r for r in reasons)
    assert any("'kilo_something_new' of this Kilo CLI version is not known" in r for r in reasons)
    assert len(src.calls) == 3  # the rest is read all the same
    broken = tmp_path / "kilo2.db"
    conn = sqlite3.connect(broken)
    conn.executescript("CREATE TABLE session (id text); CREATE TABLE message (id text); CREATE TABLE part (id text);"
                       "INSERT INTO session VALUES ('ses_x');")
    conn.close()
    with pytest.raises(SourceError, match=r"kilo2\.db"):
        read_kilo(opencode_path(broken, "ses_x"))
    (tmp_path / "kilo3.db").write_bytes(b"SQLite format 3\x00" + b"\x00" * 50)  # truncated
    with pytest.raises(SourceError):
        read_kilo(tmp_path / "kilo3.db")


def test_the_environment_block_follows_the_message() -> None:
    session = {"directory": "/repo/sub/dir", "path": "sub/dir"}
    info = {"time": {"created": 1795744546999},
            "editorContext": {"activeFile": "a.py", "visibleFiles": ["a.py", "b.py"], "openTabs": ["c.py"]}}
    assert environment_details(info, [], session) == (
        "\n\n<environment_details>\nMessage time: 2026-11-27T01:55:46Z\nWorking directory: /repo/sub/dir\n"
        "Workspace root folder: /repo\nActive file: a.py\nVisible files:\n  a.py\n  b.py\nOpen tabs:\n  c.py\n"
        "</environment_details>")
    stored = [{"type": "text", "synthetic": True, "text": "\n\n<environment_details>\nMessage time: x"}]
    assert environment_details(info, stored, session) == ""  # already in the message: not added again
    assert environment_details({"time": {"created": "soon"}}, [], session) == ""  # no time: not made up
    assert environment_details({"time": {"created": 1}}, [], {"directory": "/w", "path": None}).endswith(
        "Working directory: /w\nWorkspace root folder: /w\n</environment_details>")
    assert KILO.cost(0) is None and KILO.cost(0.5) == 0.5 and KILO.cost("x") is None
