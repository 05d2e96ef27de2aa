"""engine.sources.codex_agents: a spawn_agent subagent's own rollout read and linked to the call that started it
(lines shortened from Codex 0.171's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.sources.codex import read_codex
from engine.sources.codex_agents import child_rollout, parent_thread
from tests.engine.sources.test_codex import META, USER, _event, _item, _record, _usage

PARENT, CHILD = "01a21b26-f6af-7582-8d0c-a50072895442", "01a21b26-f767-7393-9a43-f41d3fbca5ab"


def _rollout(folder: Path, thread: str, rows: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rollout-2026-11-27T03-57-48-{thread}.jsonl"
    path.write_text("".join(json.dumps({"timestamp": f"2026-11-27T03:57:{i:02d}.000Z", "ordinal": i, **row},
                                       separators=(",", ":")) + "\n" for i, row in enumerate(rows)), encoding="utf-8")
    return path


def _parent_rows() -> list[dict[str, Any]]:
    meta = {"type": "session_meta", "payload": {**META["payload"], "id": PARENT, "source": "exec"}}
    spawn = _item({"type": "function_call", "name": "spawn_agent", "namespace": "collaboration", "call_id": "call_4e",
                   "arguments": '{"task_name": "worker", "message": "Run echo sub", "fork_turns": "none"}'})
    started = _event("item_completed", thread_id=PARENT, item={
        "type": "SubAgentActivity", "model": "gpt-6.2-sol", "id": "call_4e", "kind": "started",
        "agent_thread_id": CHILD, "agent_path": "/root/worker"})
    done = _event("item_completed", thread_id=PARENT, item={
        "type": "SubAgentActivity", "model": None, "id": "subagent-completed-x", "kind": "completed",
        "agent_thread_id": CHILD, "agent_path": "/root/worker"})
    return [meta, USER, spawn, _record("resp_1", _usage(15192, 15088, 11)), started,
            _item({"type": "function_call_output", "call_id": "call_4e", "output": '{"task_name":"/root/worker"}'}),
            done, _event("item_completed", item={"type": "CommandExecution"})]


def _child_rows(parent: str = PARENT) -> list[dict[str, Any]]:
    meta = {"type": "session_meta", "payload": {**META["payload"], "id": CHILD, "parent_thread_id": parent, "source": {
        "subagent": {"thread_spawn": {"parent_thread_id": parent, "depth": 1, "agent_path": "/root/worker"}}}}}
    task = _item({"type": "agent_message", "author": "/root", "recipient": "/root/worker",
                  "content": [{"type": "input_text", "text": "Message Type: NEW_TASK\nPayload:\n"}]})
    return [meta, {"type": "inter_agent_communication_metadata", "payload": {"trigger_turn": True}}, task,
            _item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "All done."}]}),
            _record("resp_c", _usage(14385, 4206, 2))]


def test_the_subagent_rollout_is_read_and_linked_to_its_spawn_call(tmp_path: Path) -> None:
    day = tmp_path / "sessions" / "2026" / "11" / "27"
    path = _rollout(day, PARENT, _parent_rows())
    child = _rollout(day, CHILD, _child_rows())
    src = read_codex(path)
    assert src.skipped == [] and src.notes == [] and src.ignored == {"event_msg/item_completed": 1}
    (ref,) = src.subagents
    assert (ref.id, ref.kind, ref.path, ref.parent_tool_call_id, ref.problem) == (CHILD, "task", child, "call_4e", "")
    assert ref.session is not None and [c.request_id for c in ref.session.calls] == ["resp_c"]
    (out,) = [m for m in src.messages if m["role"] == "tool"]
    assert out["subagent"] == {"id": CHILD, "agent_path": "/root/worker"}
    assert [c["function"]["name"] for m in src.messages for c in m.get("tool_calls") or []] == [
        "collaboration.spawn_agent"]
    assert read_codex(path, subagents=False).subagents == [] and parent_thread(child) == PARENT
    assert parent_thread(path) == ""


def test_a_subagent_started_after_midnight_is_found_in_its_own_day(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    path = _rollout(sessions / "2026" / "11" / "27", PARENT, _parent_rows())
    child = _rollout(sessions / "2026" / "11" / "28", CHILD, _child_rows())
    assert child_rollout(path, CHILD) == child
    assert child_rollout(path, "../../etc") is None  # not a thread id: never a pattern


def test_a_missing_subagent_or_one_of_another_parent_is_a_note(tmp_path: Path) -> None:
    day = tmp_path / "sessions" / "2026" / "11" / "27"
    path = _rollout(day, PARENT, _parent_rows())
    src = read_codex(path)
    (ref,) = src.subagents
    assert ref.session is None and ref.path is None and "is missing" in ref.problem
    assert src.notes == [f"{ref.problem} (started by call call_4e)"] and src.skipped == []
    _rollout(day, CHILD, _child_rows(parent="01a21b26-0000-0000-0000-000000000000"))
    (other,) = read_codex(path).subagents
    assert other.session is None and "as its parent, not this session" in other.problem
