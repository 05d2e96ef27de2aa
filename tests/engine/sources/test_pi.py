"""engine.sources.pi on small hand-made lines in the shape Pi 0.73 writes (session format 3): the entry tree, every
message role and entry type, a failed response, a compaction that keeps the recent entries, a branch the
conversation left; fed whole, line by line and in random byte chunks; detection and Sources."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from engine.sources.detect import detect_format
from engine.sources.discovery import scan_sources
from engine.sources.model import SourceSession
from engine.sources.pi import PiReader, bash_execution_text, is_pi_line, light_summary, read_pi, summary_text

T0 = "2026-11-25T10:00:{:02d}.000Z"
HEADER = {"type": "session", "version": 3, "id": "01a2-uuid", "timestamp": T0.format(0), "cwd": "/p/proj"}


def entry(eid: str, parent: str | None, kind: str = "message", sec: int = 1, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "id": eid, "parentId": parent, "timestamp": T0.format(sec), **fields}


def user(eid: str, parent: str | None, text: str, sec: int = 1) -> dict[str, Any]:
    return entry(eid, parent, sec=sec, message={"role": "user", "content": [{"type": "text", "text": text}],
                                                 "timestamp": 1})


def usage(inp: int, read: int, out: int, write: int = 0, cost: float = 0.01) -> dict[str, Any]:
    return {"input": inp, "output": out, "cacheRead": read, "cacheWrite": write,
            "totalTokens": inp + read + write + out, "cost": {"total": cost}}


def assistant(eid: str, parent: str, content: list[dict[str, Any]], use: dict[str, Any], sec: int = 2,
              stop: str = "stop", rid: str = "") -> dict[str, Any]:
    return entry(eid, parent, sec=sec, message={
        "role": "assistant", "content": content, "api": "anthropic-messages", "provider": "anth", "model": "m1",
        "usage": use, "stopReason": stop, "timestamp": 2, **({"responseId": rid} if rid else {})})


def tool_result(eid: str, parent: str, call_id: str, text: str, sec: int = 3) -> dict[str, Any]:
    return entry(eid, parent, sec=sec, message={
        "role": "toolResult", "toolCallId": call_id, "toolName": "bash",
        "content": [{"type": "text", "text": text}, {"type": "image", "mimeType": "image/png", "data": "xx"}],
        "isError": False, "timestamp": 3})


CALL = {"type": "toolCall", "id": "call_1", "name": "bash", "arguments": {"command": "ls"}}
LINES: list[dict[str, Any]] = [
    HEADER,
    entry("mc", None, "model_change", provider="anth", modelId="m1"),
    entry("tl", "mc", "thinking_level_change", thinkingLevel="off"),
    user("u1", "tl", "list files"),
    assistant("a1", "u1", [{"type": "thinking", "thinking": "let me look"}, {"type": "text", "text": "Looking."},
                           CALL], usage(100, 0, 10, write=50), rid="resp_1"),
    tool_result("t1", "a1", "call_1", "a.txt"),
    assistant("a2", "t1", [], usage(0, 0, 0, cost=0), stop="error"),  # a failed response: a call, no message
    assistant("a3", "a2", [{"type": "text", "text": "One file."}], usage(20, 160, 5), rid="resp_3"),
    entry("b1", "a3", sec=4, message={"role": "bashExecution", "command": "pwd", "output": "/p/proj",
                                       "exitCode": 2, "cancelled": False, "truncated": False, "timestamp": 4}),
    entry("b2", "b1", sec=4, message={"role": "bashExecution", "command": "ls", "output": "x", "exitCode": 0,
                                       "cancelled": False, "truncated": False, "excludeFromContext": True,
                                       "timestamp": 4}),
    entry("cm", "b2", "custom_message", sec=4, customType="ext", content="from an extension", display=False),
    entry("lb", "cm", "label", sec=4, targetId="u1", label="start"),
    entry("cu", "lb", "custom", sec=4, customType="ext", data={"x": 1}),
    entry("si", "cu", "session_info", sec=4, name="my session"),
    entry("cp", "si", "compaction", sec=5, summary="They listed files.", firstKeptEntryId="a3", tokensBefore=190,
          details={"readFiles": [], "modifiedFiles": []}, fromHook=False),
    user("u2", "cp", "more", sec=6),
    assistant("a4", "u2", [{"type": "text", "text": "Sure."}], usage(30, 150, 4), sec=7, rid="resp_4"),
]


def write(tmp_path: Path, lines: list[dict[str, Any]], name: str = "2026-11-25T10-00-00-000Z_01a2-uuid") -> Path:
    folder = tmp_path / ".pi" / "agent" / "sessions" / "--p-proj--"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in lines), encoding="utf-8")
    return path


def without_ids(session: SourceSession) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if k != "id"} for m in session.messages]


def test_every_role_and_entry_type(tmp_path: Path) -> None:
    src = read_pi(write(tmp_path, LINES))
    assert (src.session_id, src.cwd, src.project, src.model) == ("01a2-uuid", "/p/proj", "proj", "m1")
    assert src.skipped == [] and src.off_chain == 0
    assert src.ignored == {"entry/thinking_level_change": 1, "entry/label": 1, "entry/custom": 1,
                           "entry/session_info": 1}
    roles = [(m["role"], m.get("content")) for m in src.messages]
    assert roles == [
        ("user", "list files"), ("assistant", "Looking."), ("tool", "a.txt\n[image: image/png]"),
        ("assistant", "One file."), ("user", "Ran `pwd`\n```\n/p/proj\n```\n\nCommand exited with code 2"),
        ("user", "from an extension"),
        ("user", summary_text("They listed files.")),  # the compaction: the summary, then the kept entries on
        ("assistant", "One file."), ("user", "Ran `pwd`\n```\n/p/proj\n```\n\nCommand exited with code 2"),
        ("user", "from an extension"),
        ("user", "more"), ("assistant", "Sure.")]
    assert src.messages[1]["reasoning_content"] == "let me look"
    assert src.messages[1]["tool_calls"] == [{"id": "call_1", "type": "function",
                                              "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]
    assert src.messages[2]["tool_call_id"] == "call_1"
    assert len({m["id"] for m in src.messages}) == len(src.messages)
    figures = [(c.prompt_tokens, c.cache_read_tokens, c.cache_write_tokens, c.completion_tokens, c.request_id,
                c.message_index) for c in src.calls]
    assert figures == [(150, 0, 50, 10, "resp_1", 1), (None, None, None, None, "", 3), (180, 160, 0, 5, "resp_3", 3),
                       (180, 150, 0, 4, "resp_4", 11)]
    (comp,) = src.compactions
    assert (comp.trigger, comp.tokens_before, comp.tokens_after, comp.calls_before) == ("unknown", 190, 180, 3)
    assert (comp.message_index, comp.messages_after, comp.summary) == (6, 4, "They listed files.")
    assert src.live_start == 6 and comp.cost is None
    assert src.agent_cost_usd == pytest.approx(0.03) and src.agent_cost_by_model == {"m1": pytest.approx(0.03)}
    assert src.started == "2026-11-25T10:00:00.000+00:00" and src.last_activity == "2026-11-25T10:00:07.000+00:00"


def test_fed_line_by_line_and_in_byte_chunks_it_is_read_whole(tmp_path: Path) -> None:
    path = write(tmp_path, LINES)
    whole = read_pi(path)
    data = path.read_bytes()
    by_line = PiReader(path)
    seen_calls = 0
    for raw in data.splitlines(keepends=True):
        changes = by_line.feed(raw)
        assert changes.calls_from == seen_calls and not changes.reset
        seen_calls = len(by_line.session.calls)
    rng = random.Random(7)
    chunked = PiReader(path)
    at = 0
    while at < len(data):
        step = rng.randint(1, 60)
        chunked.feed(data[at:at + step])
        at += step
    for reader in (by_line, chunked):
        got = reader.finish()
        assert without_ids(got) == without_ids(whole) and got.calls == whole.calls
        assert got.compactions == whole.compactions and got.ignored == whole.ignored and got.skipped == []


def test_a_branch_the_conversation_left_is_off_the_path_but_its_calls_count(tmp_path: Path) -> None:
    """A new prompt whose parent is an earlier entry (``/tree``): the leaf's path is the conversation; the calls
    made on the branch it left were paid for: still calls, in file order."""
    lines = [*LINES[:8], user("u9", "a1", "no, do this instead", sec=8)]
    path = write(tmp_path, lines)
    src = read_pi(path)
    assert [m["content"] for m in src.messages] == ["list files", "Looking.", "no, do this instead"]
    assert src.off_chain == 3  # t1, a2, a3
    assert [c.request_id for c in src.calls] == ["resp_1", "", "resp_3"]
    assert [c.message_index for c in src.calls] == [1, 2, 2]  # where the branch left the path
    reader = PiReader(path)
    reader.feed_lines(json.dumps(o).encode() + b"\n" for o in lines[:-1])
    assert [m["content"] for m in reader.session.messages][-1] == "One file."
    changes = reader.feed(json.dumps(lines[-1]).encode() + b"\n")
    assert changes.reset and without_ids(reader.session) == without_ids(src) and reader.session.calls == src.calls


def test_lines_of_no_kind_pi_writes_are_skipped_with_the_reason(tmp_path: Path) -> None:
    lines = [*LINES[:4], entry("x1", "u1", "brand_new_kind"), entry("x2", "u1", message={"role": "alien"}),
             {"hello": 1}]
    src = read_pi(write(tmp_path, lines))
    assert [s.reason for s in src.skipped] == [
        "entry type 'brand_new_kind' is not one this reader knows", "message role 'alien' is not one this reader knows",
        "a line of no entry type Pi writes (a session header, or an entry with id and parentId)"]
    assert [s.line for s in src.skipped] == [5, 6, 7] and [m["content"] for m in src.messages] == ["list files"]


def test_a_loop_of_parent_links_ends_the_path(tmp_path: Path) -> None:
    """A damaged file whose parent links loop: the path stops where it would repeat (no endless walk)."""
    lines = [HEADER, user("u1", "u2", "one"), user("u2", "u1", "two")]
    src = read_pi(write(tmp_path, lines))
    assert [m["content"] for m in src.messages] == ["one", "two"] and src.skipped == []


def test_bash_execution_text_is_pis() -> None:
    assert bash_execution_text({"command": "x", "output": "", "cancelled": True}) == (
        "Ran `x`\n(no output)\n\n(command cancelled)")
    truncated = {"command": "x", "output": "o", "exitCode": 0, "truncated": True, "fullOutputPath": "/tmp/f"}
    assert bash_execution_text(truncated) == "Ran `x`\n```\no\n```\n\n[Output truncated. Full output: /tmp/f]"


def test_detected_and_listed_with_the_window_of_models_json(tmp_path: Path) -> None:
    path = write(tmp_path, LINES)
    assert detect_format(path) == "pi"
    assert is_pi_line(HEADER) and is_pi_line(LINES[3])
    assert not is_pi_line({"type": "message", "id": "x"}) and not is_pi_line({"sessionId": "s", "projectHash": "h"})
    (tmp_path / ".pi" / "agent" / "models.json").write_text(json.dumps({"providers": {"anth": {"models": [
        {"id": "m1", "contextWindow": 1000, "maxTokens": 100}]}}}))
    src = read_pi(path)
    assert (src.window, src.window_source) == (1000, "models.json")
    assert [c.window for c in src.calls] == [1000] * 4 and src.calls[0].max_tokens == 100
    found = light_summary(path)
    assert (found.session_id, found.calls, found.last_prompt, found.model, found.window, found.title) == (
        "01a2-uuid", 4, 180, "m1", 1000, "list files")
    (entry_,) = scan_sources(env={"HOME": str(tmp_path)}, home=tmp_path, index=tmp_path / "index.json")
    assert (entry_.agent, entry_.project, entry_.calls, entry_.percent_full, entry_.title) == (
        "pi", "proj", 4, 18.0, "list files")
    assert entry_.agent_cost_usd == pytest.approx(0.03) and entry_.path == str(path)
    moved = tmp_path / "elsewhere"
    (moved / "sessions").mkdir(parents=True)
    path.parent.rename(moved / "sessions" / path.parent.name)
    (entry_,) = scan_sources(env={"HOME": str(tmp_path), "PI_CODING_AGENT_DIR": str(moved)}, home=tmp_path,
                             index=tmp_path / "index.json")
    assert entry_.agent == "pi" and entry_.window is None  # no models.json beside the moved folder
