"""engine.store.archive: dialog/YYYY-MM-DD.jsonl append by message date, read, list, search, restore."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.model.messages import assistant, tool_call, tool_result, user
from engine.store import archive
from engine.store.archive import ArchiveError


def _at(msg: dict, ts: str) -> dict:
    msg["ts"] = ts
    return msg


def test_append_groups_by_each_messages_own_date(tmp_path: Path) -> None:
    msgs = [
        _at(user("late night"), "2025-03-01T23:59:59.000+00:00"),
        _at(assistant("next day"), "2025-03-02T00:00:01.000+00:00"),
        _at(user("tz shifts the day"), "2025-03-02T01:00:00.000+05:00"),  # 2025-03-01 20:00 UTC
    ]
    days = archive.append(tmp_path, msgs)
    assert days == ["2025-03-01", "2025-03-02"]
    assert archive.list_days(tmp_path) == ["2025-03-01", "2025-03-02"]
    first = archive.read_day(tmp_path, "2025-03-01")
    assert [m["content"] for m in first] == ["late night", "tz shifts the day"]
    lines = (tmp_path / "dialog" / "2025-03-02.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    assert rec["id"] == msgs[1]["id"] and rec["role"] == "assistant" and rec["ts"] == msgs[1]["ts"]


def test_append_keeps_tool_fields_and_dedupes(tmp_path: Path) -> None:
    call = _at(assistant(None, [tool_call("c1", "read_file", '{"path": "a.py"}')]), "2025-01-05T10:00:00+00:00")
    res = _at(tool_result("c1", "contents", name="read_file"), "2025-01-05T10:00:01+00:00")
    assert archive.append(tmp_path, [call, res]) == ["2025-01-05"]
    assert archive.append(tmp_path, [call, res]) == []  # a retried compaction stores nothing twice
    back = archive.read_day(tmp_path, "2025-01-05")
    assert back == [call, res]
    assert archive.append(tmp_path, [call], dedupe=False) == ["2025-01-05"]
    assert len(archive.read_day(tmp_path, "2025-01-05")) == 3


def test_read_day_rejects_bad_days_and_reports_torn_lines(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError, match="YYYY-MM-DD"):
        archive.read_day(tmp_path, "../../etc/passwd")
    with pytest.raises(ArchiveError, match="no archive"):
        archive.read_day(tmp_path, "2020-01-01")
    archive.append(tmp_path, [_at(user("ok"), "2025-01-01T00:00:00+00:00")])
    with open(tmp_path / "dialog" / "2025-01-01.jsonl", "ab") as fh:
        fh.write(b'{"role": "user", "cont')
    problems: list[str] = []
    assert [m["content"] for m in archive.read_day(tmp_path, "2025-01-01", problems)] == ["ok"]
    assert problems and "line 2" in problems[0]
    # appending after a torn line starts a fresh line: nothing new is lost
    archive.append(tmp_path, [_at(user("after"), "2025-01-01T00:00:01+00:00")])
    assert [m["content"] for m in archive.read_day(tmp_path, "2025-01-01")] == ["ok", "after"]


def test_list_days_empty(tmp_path: Path) -> None:
    assert archive.list_days(tmp_path) == []


def test_search_plain_regex_newest_first(tmp_path: Path) -> None:
    archive.append(
        tmp_path,
        [
            _at(user("the FileNotFoundError in src/app.py"), "2025-01-01T00:00:00+00:00"),
            _at(assistant(None, [tool_call("c", "run_shell", '{"command": "pytest -k filenotfound"}')]),
                "2025-01-02T00:00:00+00:00"),
            _at(assistant("nothing here", reasoning_content="maybe FileNotFoundError again"),
                "2025-01-03T00:00:00+00:00"),
        ],
    )
    hits = archive.search(tmp_path, "filenotfound")
    assert [h.day for h in hits] == ["2025-01-03", "2025-01-02", "2025-01-01"]
    assert "FileNotFoundError" in hits[2].snippet and hits[2].line == 1
    assert [h.day for h in archive.search(tmp_path, "filenotfound", case_sensitive=True)] == ["2025-01-02"]
    assert archive.search(tmp_path, "FILENOTFOUND", case_sensitive=True) == []
    assert [h.day for h in archive.search(tmp_path, r"src/\w+\.py", regex=True)] == ["2025-01-01"]
    assert archive.search(tmp_path, "src/\\w+", regex=False) == []
    assert len(archive.search(tmp_path, "e", limit=2)) == 2
    with pytest.raises(ArchiveError, match="bad regular expression"):
        archive.search(tmp_path, "([", regex=True)
    with pytest.raises(ArchiveError, match="empty"):
        archive.search(tmp_path, "")


def test_restore_selection_keeps_call_and_result_together(tmp_path: Path) -> None:
    u = _at(user("q"), "2025-01-01T00:00:00+00:00")
    call = _at(assistant(None, [tool_call("c1", "f", "{}"), tool_call("c2", "f", "{}")]), "2025-01-01T00:00:01+00:00")
    r1 = _at(tool_result("c1", "one"), "2025-01-01T00:00:02+00:00")
    r2 = _at(tool_result("c2", "two"), "2025-01-02T00:00:00+00:00")  # a result on the next day
    final = _at(assistant("done"), "2025-01-02T00:00:01+00:00")
    archive.append(tmp_path, [u, call, r1, r2, final])
    assert archive.restore_selection(tmp_path, [r2["id"]]) == [call, r1, r2]
    assert archive.restore_selection(tmp_path, [call["id"]]) == [call, r1, r2]
    assert archive.restore_selection(tmp_path, [final["id"], u["id"]]) == [u, final]
    with pytest.raises(ArchiveError, match="not in the archive"):
        archive.restore_selection(tmp_path, ["nope"])
    assert archive.find(tmp_path, [final["id"], u["id"]]) == [u, final]


def test_search_gives_up_a_pattern_that_backtracks_for_ever(tmp_path: Path) -> None:
    from engine.model.messages import new_message

    archive.append(tmp_path, [new_message("user", "a" * 40 + "b")])
    with pytest.raises(archive.ArchiveError, match="backtracks"):
        archive.search(tmp_path, "(a|aa)+$", regex=True)
    with pytest.raises(archive.ArchiveError, match="bad regular expression"):
        archive.search(tmp_path, "(unclosed", regex=True)
    assert len(archive.search(tmp_path, "(a|aa)+b", regex=True)) == 1
    assert len(archive.search(tmp_path, "(a|aa)+$", regex=False)) == 0  # literal: no match, no hang


def test_merged_history_keeps_an_agents_order_within_a_second_and_restated_messages_after_the_archived() -> None:
    """An imported Claude Code session after a compaction: the prompt and what Claude Code attached to it were
    written within one second (the attachment stamped a millisecond earlier); the call and result kept across the
    compaction are restated after it with their first times. The merged history is the conversation's order."""
    from engine.store.archive import merge_archived

    archived = [
        {"id": "prompt", "role": "user", "ts": "2026-11-26T23:26:23.217+00:00"},
        {"id": "env", "role": "user", "ts": "2026-11-26T23:26:23.216+00:00"},
        {"id": "call1", "role": "assistant", "ts": "2026-11-26T23:26:23.283+00:00"},
        {"id": "result1", "role": "tool", "ts": "2026-11-26T23:26:24.366+00:00"},
        {"id": "call2", "role": "assistant", "ts": "2026-11-26T23:26:25.427+00:00"},
        {"id": "result2", "role": "tool", "ts": "2026-11-26T23:26:26.444+00:00"},
    ]
    live = [
        {"id": "call2b", "role": "assistant", "ts": "2026-11-26T23:26:25.427+00:00", "preserved": True},
        {"id": "result2b", "role": "tool", "ts": "2026-11-26T23:26:26.444+00:00", "preserved": True},
        {"id": "next", "role": "user", "ts": "2026-11-26T23:26:27.521+00:00"},
    ]
    assert [m["id"] for m in merge_archived(live, archived)] == [
        "prompt", "env", "call1", "result1", "call2", "result2", "call2b", "result2b", "next"]
    # restated messages at the end of the history: every archived message still comes first
    assert [m["id"] for m in merge_archived(live[:2], archived)][-2:] == ["call2b", "result2b"]
