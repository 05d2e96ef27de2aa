"""The context diff (engine.context.diff): synthetic histories, a ctxbench session folder, and real
Claude Code and Codex sessions checked against figures computed here from the raw lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.context.diff import (
    CallPoint,
    CallRangeError,
    History,
    SummaryPoint,
    diff_calls,
    first_line,
    history_from_folder,
    history_from_source,
)
from engine.context.tokens import estimate_message_tokens, estimate_text_tokens
from engine.ingest import import_source
from engine.model.messages import Message
from engine.sources.readers import read_source
from engine.store import archive
from tests.engine.sources.conftest import BIG_CODEX, PERSISTED_CLAUDE, lines, raw_claude_calls, raw_codex_calls

needs_shared = pytest.mark.skipif(not PERSISTED_CLAUDE.exists(), reason="the shared sessions are not on this machine")


def msg(i: int, role: str, text: str = "", **extra: Any) -> Message:
    return {"id": f"m{i}", "ts": f"2026-01-01T00:00:{i:02d}.000+00:00", "role": role, "content": text, **extra}


def call(call_id: str, name: str, args: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def synthetic() -> list[Message]:
    return [
        msg(0, "user", "read the file\nplease"),
        msg(1, "assistant", None, tool_calls=[call("c1", "read_file", '{"path": "a.py"}')]),  # type: ignore[arg-type]
        msg(2, "tool", "print('hello')\n" * 40, tool_call_id="c1"),
        msg(3, "assistant", "It prints hello."),
        msg(4, "user", "and b.py?"),
        msg(5, "assistant", "", tool_calls=[call("c2", "grep", '{"q": "x"}')]),
        msg(6, "tool", "no match", tool_call_id="c2"),
    ]


def test_within_one_segment_only_the_new_messages_enter() -> None:
    messages = synthetic()
    h = History(messages, [CallPoint(1, 0, 1, None, 100), CallPoint(2, 0, 3, None, 400),
                           CallPoint(3, 0, 7, None, None)], [])
    d = diff_calls(h, 1, 2)
    assert [(i.kind, i.message_id, i.role, i.tool) for i in d.entered] == [
        ("message", "m1", "assistant", "read_file"), ("tool_result", "m2", "tool", "read_file")]
    assert d.left == () and d.compactions == ()
    assert [i.tokens for i in d.entered] == [estimate_message_tokens(messages[1]), estimate_message_tokens(messages[2])]
    assert d.entered_tokens == d.net_tokens == sum(estimate_message_tokens(m) for m in messages[1:3])
    assert (d.prompt_a, d.prompt_b, d.prompt_delta) == (100, 400, 300)
    assert d.entered[1].first_line == "print('hello')"
    assert d.entered[0].first_line == 'read_file({"path": "a.py"})'
    later = diff_calls(h, 2, 3)
    assert later.prompt_delta is None and later.prompt_b is None
    assert [i.message_id for i in later.entered] == ["m3", "m4", "m5", "m6"]
    back = diff_calls(h, 3, 1)  # B before A: the same items, the other way round
    assert [i.message_id for i in back.left] == ["m1", "m2", "m3", "m4", "m5", "m6"] and back.entered == ()
    assert back.net_tokens == -diff_calls(h, 1, 3).net_tokens


def test_a_compaction_between_the_calls_removes_messages_and_brings_its_summary() -> None:
    messages = synthetic()
    summary = "The user asked about a.py; it prints hello.\nMore detail."
    h = History(messages, [CallPoint(1, 0, 3, None, 500), CallPoint(2, 4, 5, 0, 120), CallPoint(3, 4, 7, 0, 160)],
                [SummaryPoint(0, summary, "auto")])
    d = diff_calls(h, 1, 2)
    assert d.compactions == (0,)
    assert [(i.kind, i.first_line, i.tokens) for i in d.entered] == [
        ("summary", "The user asked about a.py; it prints hello.", estimate_text_tokens(summary)),
        ("message", "and b.py?", estimate_message_tokens(messages[4]))]
    assert [i.message_id for i in d.left] == ["m0", "m1", "m2"]
    assert d.left_tokens == sum(estimate_message_tokens(m) for m in messages[:3])
    assert d.net_tokens == d.entered_tokens - d.left_tokens < 0
    assert (d.messages_a, d.messages_b, d.prompt_delta) == (3, 1, -380)
    same_summary = diff_calls(h, 2, 3)  # the summary is in both contexts: neither entered nor left
    assert all(i.kind != "summary" for i in same_summary.entered + same_summary.left)
    assert same_summary.compactions == ()


def test_call_numbers_out_of_range_name_the_valid_range() -> None:
    h = History(synthetic(), [CallPoint(1, 0, 1, None, 1), CallPoint(2, 0, 2, None, 2)], [], label="s")
    for bad in (0, 3, -1):
        with pytest.raises(CallRangeError, match="s has calls 1 to 2"):
            diff_calls(h, 1, bad)
    with pytest.raises(CallRangeError, match="no provider call"):
        diff_calls(History([], [], []), 1, 1)


def test_first_line_skips_blank_lines_and_cuts_long_ones() -> None:
    assert first_line(msg(0, "user", "\n\n  hello  \nworld")) == "hello"
    long = first_line(msg(0, "user", "x" * 300))
    assert len(long) == 100 and long.endswith("…")


# the regions every context record is written with (only the fields a test sets matter to it)
_REGIONS = {"window": 10_000, "max_tokens": 100, "system": 0, "summary": 0, "history_user": 0, "history_assistant": 0,
            "history_tool": 0, "tools": 0, "threshold_tokens": 8000, "estimator": "heuristic", "accuracy": "estimated"}


def _write_folder(folder: Path, live: list[Message], archived: list[Message], events: list[dict[str, Any]]) -> None:
    events = [{**_REGIONS, **e} if e.get("type") == "context" else e for e in events]
    folder.mkdir()
    (folder / "session.json").write_text(json.dumps({"title": "t"}), encoding="utf-8")
    (folder / "history.jsonl").write_text("".join(json.dumps(m) + "\n" for m in live), encoding="utf-8")
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    archive.append(folder, archived)


def test_a_ctxbench_session_folder_calls_placed_by_time_and_message_count(tmp_path: Path) -> None:
    """ctxbench's own records: message_count and ts (no message id); a compaction archived m0..m2."""
    messages = synthetic()
    ts = [m["ts"] for m in messages]
    events = [
        {"type": "context", "ts": ts[0][:-6] + ".500+00:00", "message_count": 1, "provider_prompt_tokens": 50},
        {"type": "context", "ts": ts[2][:-6] + ".500+00:00", "message_count": 3, "provider_prompt_tokens": 90},
        {"type": "compaction", "result": "summarized", "summary": "S", "trigger": "manual", "ts": ts[3]},
        {"type": "context", "ts": ts[6][:-6] + ".500+00:00", "message_count": 4, "provider_prompt_tokens": 70},
    ]
    _write_folder(tmp_path / "s", messages[3:], messages[:3], events)
    h = history_from_folder(tmp_path / "s")
    assert [m["id"] for m in h.messages] == [f"m{i}" for i in range(7)]
    assert [(c.start, c.end, c.summary, c.prompt_tokens) for c in h.calls] == [
        (0, 1, None, 50), (0, 3, None, 90), (3, 7, 0, 70)]
    d = diff_calls(h, 2, 3)
    assert [i.message_id or i.kind for i in d.entered] == ["summary", "m3", "m4", "m5", "m6"]
    assert [i.message_id for i in d.left] == ["m0", "m1", "m2"] and d.prompt_delta == -20


# --------------------------------------------------------------------------- real sessions


def _claude_raw_figures(path: Path) -> dict[str, Any]:
    """The compaction's summary and the tool results before it, by direct parsing of the raw lines."""
    objs = lines(path)
    boundary = next(n for n, o in enumerate(objs) if o.get("subtype") == "compact_boundary")
    summary_obj = next(o for o in objs[boundary:] if o.get("isCompactSummary"))
    content = summary_obj["message"]["content"]
    summary = content if isinstance(content, str) else "\n".join(p["text"] for p in content if p.get("type") == "text")
    calls = raw_claude_calls(path)
    last_before = max(i for i, c in enumerate(calls) if c["line"] < boundary)
    results = []
    for obj in objs[:calls[last_before]["line"]]:
        parts = obj["message"]["content"] if obj.get("type") == "user" else None
        for part in parts if isinstance(parts, list) else []:
            if part.get("type") == "tool_result":
                results.append(part["tool_use_id"])
    return {"summary": summary, "before": last_before + 1, "results": results, "calls": calls}


@needs_shared
def test_claude_code_calls_on_either_side_of_the_compaction() -> None:
    raw = _claude_raw_figures(PERSISTED_CLAUDE)
    a = raw["before"]
    h = history_from_source(read_source(PERSISTED_CLAUDE, "claude-code"))
    assert len(h.calls) == len(raw["calls"])
    d = diff_calls(h, a, a + 1)
    assert d.compactions == (0,)
    assert (d.prompt_a, d.prompt_b) == (raw["calls"][a - 1]["prompt"], raw["calls"][a]["prompt"])
    assert d.prompt_delta == raw["calls"][a]["prompt"] - raw["calls"][a - 1]["prompt"] < -100_000
    [entered] = d.entered  # the first call after the compaction sees only the summary
    assert entered.kind == "summary" and entered.tokens == len(raw["summary"]) * 2 // 5
    left_results = [i for i in d.left if i.kind == "tool_result"]
    by_id = {str(m.get("id")): m for m in h.messages}
    assert [by_id[i.message_id]["tool_call_id"] for i in left_results] == raw["results"]
    assert d.left_tokens == sum(estimate_message_tokens(m) for m in h.messages[:d.messages_a])
    assert d.messages_b == 0 and d.net_tokens == entered.tokens - d.left_tokens


@needs_shared
def test_the_folder_of_an_import_gives_the_same_diff_as_the_file(tmp_path: Path) -> None:
    import_source(PERSISTED_CLAUDE, session_dir=tmp_path / "cc")
    from_file = history_from_source(read_source(PERSISTED_CLAUDE, "claude-code"))
    from_folder = history_from_folder(tmp_path / "cc")
    assert [(c.start, c.end, c.summary, c.prompt_tokens) for c in from_folder.calls] == [
        (c.start, c.end, c.summary, c.prompt_tokens) for c in from_file.calls]
    for a, b in ((1, 2), (71, 72), (10, 140), (72, 143)):
        x, y = diff_calls(from_file, a, b), diff_calls(from_folder, a, b)
        # the archive orders the messages a compaction removed by time (parallel tool results may swap)
        for mine, theirs in ((x.entered, y.entered), (x.left, y.left)):
            assert sorted((i.kind, i.tokens, i.first_line) for i in mine) == sorted(
                (i.kind, i.tokens, i.first_line) for i in theirs)
        assert (x.entered_tokens, x.left_tokens, x.prompt_delta) == (y.entered_tokens, y.left_tokens, y.prompt_delta)


@needs_shared
def test_codex_remote_compaction_replaces_the_history() -> None:
    raw = raw_codex_calls(BIG_CODEX)
    objs = lines(BIG_CODEX)
    compacted = next(n for n, o in enumerate(objs) if o["type"] == "compacted")
    a = sum(1 for c in raw if c["line"] < compacted)
    src = read_source(BIG_CODEX, "codex")
    h = history_from_source(src)
    d = diff_calls(h, a, a + 1)
    assert (d.prompt_a, d.prompt_b) == (raw[a - 1]["prompt"], raw[a]["prompt"]) == (209_950, 48_297)
    assert d.compactions == (0,) and d.entered[0].kind == "summary"
    assert d.messages_a == sum(1 for i in d.left if i.kind != "summary")  # every message before it left
    assert d.left_tokens == sum(estimate_message_tokens(m) for m in h.messages[:d.messages_a])
