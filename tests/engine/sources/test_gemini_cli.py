"""engine.sources.gemini_cli on small hand-made lines in the shape Gemini CLI 0.61 writes: records that grow,
``$set`` patches, a resume's restated history, a rollback, a rewind, a compression; fed whole, line by line and
in random byte chunks."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from engine.sources.detect import detect_format
from engine.sources.gemini_cli import GeminiCliReader, read_gemini_cli
from engine.sources.model import SourceSession

CTX = {"id": "ctx0", "timestamp": "2026-11-25T10:00:00.000Z", "type": "user",
       "content": [{"text": "<session_context>\n- **Workspace Directories:**\n  - /p/proj\n</session_context>"}]}
HEADER = {"sessionId": "abc-123", "projectHash": "h", "startTime": "2026-11-25T10:00:00.000Z",
          "lastUpdated": "2026-11-25T10:00:00.000Z", "kind": "main"}


def _tokens(prompt: int, cached: int, out: int) -> dict[str, int]:
    return {"input": prompt, "output": out, "cached": cached, "thoughts": 0, "tool": 0, "total": prompt + out}


def _gemini(gid: str, sec: int, tokens: dict[str, int] | None, text: str = "",
            calls: Sequence[str] = ()) -> dict[str, Any]:
    rec: dict[str, Any] = {"id": gid, "timestamp": f"2026-11-25T10:00:{sec:02d}.000Z", "type": "gemini",
                           "content": text, "thoughts": [], "tokens": tokens, "model": "gemini-2.5-pro"}
    if calls:
        rec["toolCalls"] = [{"id": c, "name": "run_shell_command", "args": {"command": f"echo {c}"},
                             "status": "success", "result": [{"functionResponse": {"id": c, "name": "run_shell_command",
                                                              "response": {"output": f"out {c}"}}}]} for c in calls]
    return rec


def _user(gid: str, sec: int, text: str = "", results: Sequence[str] = ()) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"functionResponse": {"id": c, "name": "run_shell_command",
                                                         "response": {"output": f"out {c}"}}} for c in results]
    if text:
        parts.append({"text": text})
    return {"id": gid, "timestamp": f"2026-11-25T10:00:{sec:02d}.000Z", "type": "user", "content": parts}


def _history(*records: dict[str, Any]) -> list[dict[str, Any]]:
    """Records as a ``$set.messages`` list holds them: content parts, no tokens or toolCalls."""
    out = []
    for rec in records:
        content = rec["content"]
        if rec["type"] == "gemini":
            calls = rec.get("toolCalls", [])
            content = ([{"text": rec["content"]}] if rec["content"] else []) + [
                {"functionCall": {"name": c["name"], "args": c["args"], "id": c["id"]}} for c in calls]
        out.append({"id": rec["id"], "timestamp": rec["timestamp"], "type": rec["type"], "content": content})
    return out


def one_turn() -> list[dict[str, Any]]:
    g1 = _gemini("g1", 2, _tokens(1000, 0, 10))
    return [
        HEADER,
        {"$set": {"messages": [CTX], "lastUpdated": "2026-11-25T10:00:00.000Z"}},
        _user("u1", 1, "run it"),
        {"$set": {"lastUpdated": "2026-11-25T10:00:01.000Z"}},
        g1,
        _gemini("g1", 2, _tokens(1000, 0, 10), calls=["c1"]),  # the same record, grown: its tool call added
        _user("u2", 3, results=["c1"]),
        {"id": "i1", "timestamp": "2026-11-25T10:00:03.500Z", "type": "info", "content": "a notice"},
        _gemini("g2", 4, _tokens(1100, 1000, 3), text="Done."),
        {"$set": {"summary": "Ran it"}},
    ]


def _write(tmp_path: Path, rows: list[dict[str, Any]], tail: bytes = b"") -> Path:
    path = tmp_path / "chats" / "session-2026-11-25T10-00-abc12345.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in rows) + tail)
    return path


def _state(src: SourceSession) -> tuple[Any, ...]:
    messages = [{k: v for k, v in m.items() if k != "id"} for m in src.messages]
    return (messages, src.calls, src.compactions, src.live_start, src.skipped, src.ignored, src.session_id,
            src.model, src.window, src.cwd, src.off_chain, src.started, src.last_activity)


def test_one_turn(tmp_path: Path) -> None:
    path = _write(tmp_path, one_turn())
    assert detect_format(path) == "gemini-cli"
    src = read_gemini_cli(path)
    assert src.format == "gemini-cli" and src.session_id == "abc-123" and src.cwd == "/p/proj"
    assert src.project == tmp_path.name  # the folder the chats folder is in (Gemini CLI's project name)
    assert [m["role"] for m in src.messages] == ["user", "user", "assistant", "tool", "assistant"]
    assert src.messages[2]["tool_calls"][0]["id"] == "c1" and src.messages[3]["tool_call_id"] == "c1"
    assert src.messages[3]["content"] == "out c1" and src.messages[4]["content"] == "Done."
    assert all(m["ts"] and m["id"] for m in src.messages)
    c1, c2 = src.calls
    assert (c1.prompt_tokens, c1.cache_read_tokens, c1.completion_tokens, c1.cache_write_tokens) == (1000, 0, 10, None)
    assert (c2.prompt_tokens, c2.cache_read_tokens, c2.message_index) == (1100, 1000, 4)
    assert c1.message_index == 2 and c1.window == src.window == 1_048_576 and src.model == "gemini-2.5-pro"
    assert src.ignored == {"message/info": 1, "$set/summary": 1} and src.skipped == []
    assert src.started == "2026-11-25T10:00:00.000+00:00" and src.last_activity == "2026-11-25T10:00:04.000+00:00"


def test_a_grown_record_is_reported_as_replaced(tmp_path: Path) -> None:
    rows = one_turn()
    reader = GeminiCliReader(tmp_path / "s.jsonl")
    reader.feed(b"".join(json.dumps(r).encode() + b"\n" for r in rows[:5]))
    assert len(reader.session.messages) == 3 and len(reader.session.calls) == 1
    changes = reader.feed(json.dumps(rows[5]).encode() + b"\n")
    assert changes.messages_from == 2 and changes.calls_from == 1 and changes.calls_updated == []
    assert reader.session.messages[2]["tool_calls"][0]["id"] == "c1" and len(reader.session.calls) == 1
    grown = dict(rows[5], tokens=_tokens(1000, 0, 12))
    changes = reader.feed(json.dumps(grown).encode() + b"\n")
    assert changes.calls_updated == [0] and reader.session.calls[0].completion_tokens == 12
    assert reader.feed(b"").nothing(reader.session)


def test_a_partial_line_waits_and_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    rows = one_turn()
    data = json.dumps(rows[2]).encode() + b"\n"
    reader = GeminiCliReader(tmp_path / "s.jsonl")
    assert reader.feed(data[:10]).nothing(reader.session) and reader.session.messages == []
    reader.feed(data[10:])
    assert [m["content"] for m in reader.session.messages] == ["run it"]
    path = _write(tmp_path, rows, tail=b'{"id": "g9", "type": "gem')
    src = read_gemini_cli(path)
    assert [s.reason for s in src.skipped] == ["truncated last line (the agent may still be writing it)"]


def test_unknown_types_and_keys_are_skipped(tmp_path: Path) -> None:
    rows = [*one_turn(), {"id": "x", "timestamp": "2026-11-25T10:00:05.000Z", "type": "robot", "content": ""},
            {"$set": {"novelty": 1}}, {"what": 1}]
    src = read_gemini_cli(_write(tmp_path, rows))
    assert [s.line for s in src.skipped] == [11, 12, 13]
    assert "'robot'" in src.skipped[0].reason and "'novelty'" in src.skipped[1].reason


def resumed_and_compressed() -> list[dict[str, Any]]:
    """One turn; a resume (header, the history cut to the context then restated with the tool result twice);
    a second turn compressed mid-turn; a rollback to before the last exchange."""
    rows = one_turn()
    g1, u2, g2 = rows[5], rows[6], rows[8]
    restated = [*_history(CTX, rows[2], g1), dict(_history(u2)[0], id="g1"), *_history(u2, g2)]
    g3 = _gemini("g3", 11, _tokens(600_000, 599_000, 10), calls=["c3"])
    rows += [
        dict(HEADER, startTime="2026-11-25T10:00:09.000Z"),
        {"$set": {"messages": [CTX]}},
        {"$set": {"sessionId": "abc-123"}},
        {"$set": {"messages": restated}},
        _user("u3", 10, "again"),
        g3,
        {"$set": {"messages": [CTX, _user("s1", 12, "<state_snapshot>S</state_snapshot>"),
                               _history(_gemini("a1", 12, None, text="Got it. Thanks for the additional context!"))[0],
                               _user("u3b", 12, "again"), _history(dict(g3, id="g3b"))[0]]}},
        _user("u4", 13, results=["c3"]),
        _gemini("g4", 14, _tokens(900, 5, 2), text="Done again."),
    ]
    return rows


def test_resume_and_compression(tmp_path: Path) -> None:
    src = read_gemini_cli(_write(tmp_path, resumed_and_compressed()))
    assert src.skipped == [] and len(src.calls) == 4
    before = src.messages[:src.live_start]
    assert [m["role"] for m in before] == ["user", "user", "assistant", "tool", "tool", "assistant", "user",
                                           "assistant"]
    assert [m.get("tool_call_id") for m in before if m["role"] == "tool"] == ["c1", "c1"]  # sent twice after resume
    (comp,) = src.compactions
    assert comp.message_index == src.live_start == 8 and comp.calls_before == 3 and comp.trigger == "auto"
    assert (comp.tokens_before, comp.tokens_after, comp.summary) == (600_000, 900, "<state_snapshot>S</state_snapshot>")
    assert comp.messages_after == 5 and comp.cost is None
    live = src.messages[src.live_start:]
    assert [m["role"] for m in live] == ["user", "user", "assistant", "user", "assistant", "tool", "assistant"]
    assert [c.message_index for c in src.calls] == [2, 5, 7, 14]
    assert src.notes == ["resumed at 2026-11-25T10:00:09.000+00:00"]


def test_a_rollback_and_a_rewind_drop_messages(tmp_path: Path) -> None:
    rows = one_turn()
    reader = GeminiCliReader(tmp_path / "s.jsonl")
    reader.feed(b"".join(json.dumps(r).encode() + b"\n" for r in rows))
    assert len(reader.session.messages) == 5
    changes = reader.feed(json.dumps({"$set": {"messages": _history(CTX, rows[2])}}).encode() + b"\n")
    assert changes.messages_from == 2 and len(reader.session.messages) == 2
    assert changes.calls_updated == [1]  # its response is gone: it points at the end (the first already does)
    reader.feed(json.dumps(_gemini("g5", 20, _tokens(1200, 0, 1), text="Other.")).encode() + b"\n")
    changes = reader.feed(json.dumps({"$rewindTo": "u1"}).encode() + b"\n")
    assert changes.messages_from == 1 and len(reader.session.messages) == 1 and reader.session.off_chain == 2


ALL_ROWS = [one_turn(), resumed_and_compressed()]


@pytest.mark.parametrize("rows", ALL_ROWS, ids=["one-turn", "resumed-compressed"])
def test_fed_line_by_line_and_in_random_chunks_as_read_whole(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    path = _write(tmp_path, rows)
    whole = read_gemini_cli(path)
    data = path.read_bytes()
    by_line = GeminiCliReader(path)
    for line in data.splitlines(keepends=True):
        by_line.feed(line)
    assert _state(by_line.finish()) == _state(whole)
    for seed in range(5):
        rng = random.Random(seed)
        chunked = GeminiCliReader(path)
        at = 0
        while at < len(data):
            step = rng.randint(1, 120)
            chunked.feed(data[at:at + step])
            at += step
        assert _state(chunked.finish()) == _state(whole)
    lines = data.splitlines(keepends=True)
    assert _state(read_gemini_cli(path, lines=lines)) == _state(whole)
