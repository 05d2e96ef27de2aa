"""engine.importer: OpenAI-format transcripts (JSON list, JSONL, {"messages": …}) → sessions."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from engine.context.conversation import Session, SessionStore
from engine.importer import import_transcript
from engine.model.snapshot import WindowInfo
from engine.transcript import SKIPPED_FILE, TranscriptError
from tests.conftest import trajectory_files

TRAJ = trajectory_files()


def _write(tmp_path: Path, name: str, data: Any, jsonl: bool = False) -> Path:
    p = tmp_path / name
    if jsonl:
        p.write_text("\n".join(json.dumps(m) for m in data) + "\n")
    else:
        p.write_text(json.dumps(data))
    return p


SIMPLE = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "list files"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "k1", "type": "function", "function": {"name": "ls", "arguments": {"path": "."}}}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 5, "total_tokens": 45},
    },
    {"role": "tool", "tool_call_id": "k1", "content": "a.py\nb.py"},
    {"role": "assistant", "content": "Two files.", "usage": {"prompt_tokens": 70}},
]


def _store_dirs(store: SessionStore) -> list[str]:
    return sorted(p.name for p in store.root.iterdir()) if store.root.exists() else []


# --------------------------------------------------------------------------- real agent logs


def test_there_are_real_trajectories() -> None:
    assert len(TRAJ) == 3


@pytest.mark.parametrize("path", TRAJ, ids=[p.name.split(".")[0] for p in TRAJ])
def test_import_real_trajectory(path: Path) -> None:
    raw = json.loads(path.read_text())["messages"]
    store = SessionStore()
    rep = import_transcript(path, store=store, window=128_000)
    roles = [m["role"] for m in raw]
    assert rep.messages == len(raw) - 2 and rep.format == "json-object"
    assert rep.system_prompt and rep.skipped == [f"messages[{len(raw) - 1}]: role 'exit' is not part of a chat history"]
    assert rep.dropped_fields["extra"] >= roles.count("assistant") and rep.tools_source == "reconstructed"
    assert rep.snapshots == roles.count("assistant") == rep.reported_calls
    assert rep.model.startswith("deepseek/")
    s = store.open(rep.session_id)
    assert s.system_prompt == raw[0]["content"] and s.load_report.clean
    assert [m["role"] for m in s.messages] == roles[1:-1]
    for got, want in zip(s.messages, raw[1:-1], strict=True):
        assert got.get("content") == want.get("content")
        assert got.get("tool_call_id") == want.get("tool_call_id")
        assert got.get("reasoning_content") == want.get("reasoning_content")
        assert "extra" not in got and "provider_specific_fields" not in got
        for call, wcall in zip(got.get("tool_calls") or [], want.get("tool_calls") or [], strict=True):
            assert call == {"id": wcall["id"], "type": "function", "function": wcall["function"]}
        assert got["ts"] and got["id"]
    (tool,) = s.meta["tools"]
    assert tool["function"]["name"] == "bash"
    assert tool["function"]["parameters"]["properties"] == {"command": {"type": "string"}}
    skipped = [json.loads(x) for x in (s.path / SKIPPED_FILE).read_text().splitlines()]
    assert skipped[0]["message"] == raw[-1]
    # one snapshot per call, with the provider's count beside the estimate
    snaps = s.snapshots()
    actual = [m["extra"]["response"]["usage"]["prompt_tokens"] for m in raw if m["role"] == "assistant"]
    assert [x.provider_prompt_tokens for x in snaps] == actual
    assert [x.call_index for x in snaps] == list(range(len(actual)))
    assert snaps[0].accuracy == "estimated" and all(x.accuracy == "calibrated" for x in snaps[1:])
    errors = [abs(x.prompt - x.provider_prompt_tokens) / x.provider_prompt_tokens for x in snaps[1:]]
    raw_errors = [abs(x.raw_prompt_tokens - x.provider_prompt_tokens) / x.provider_prompt_tokens for x in snaps]
    assert statistics.median(errors) < 0.05 < statistics.median(raw_errors)
    assert s.calibrator.calibrated and s.meta["import"]["window"] == 128_000


def test_reasoning_run_keeps_reasoning_and_timestamps() -> None:
    path = next(p for p in TRAJ if "sqlfluff" in p.name)
    raw = json.loads(path.read_text())["messages"]
    rep = import_transcript(path, store=SessionStore(), window=128_000)
    s = Session.load(rep.path)
    assert sum(1 for m in s.messages if m.get("reasoning_content")) == sum(
        1 for m in raw if m.get("reasoning_content")
    )
    tool = next(m for m, r in zip(s.messages, raw[1:], strict=False) if r["role"] == "tool")
    assert tool["ts"].startswith("2026-04-")  # from extra.timestamp (epoch seconds)


def test_window_from_model_info_or_observed() -> None:
    path = TRAJ[0]
    seen: list[str] = []

    def info(model: str) -> dict[str, Any]:
        seen.append(model)
        return {"max_input_tokens": 64_000}

    rep = import_transcript(path, store=SessionStore(), model_info=info)
    assert seen == ["deepseek/deepseek-chat"] and rep.window == 64_000 and rep.window_source == "model"
    rep = import_transcript(path, store=SessionStore())
    assert rep.window_source == "observed" and rep.window % 1024 == 0
    biggest = max(x.provider_prompt_tokens or 0 for x in Session.load(rep.path).snapshots())
    assert rep.window >= biggest + 1024


# --------------------------------------------------------------------------- formats


@pytest.mark.parametrize("form", ["list", "jsonl", "object"])
def test_three_formats(tmp_path: Path, form: str) -> None:
    if form == "list":
        path = _write(tmp_path, "t.json", SIMPLE)
    elif form == "jsonl":
        path = _write(tmp_path, "t.jsonl", SIMPLE, jsonl=True)
    else:
        tools = [{"type": "function", "function": {"name": "ls", "description": "List a folder.", "parameters": {}}}]
        path = _write(tmp_path, "t.json", {"messages": SIMPLE, "tools": tools, "model": "gpt-4o"})
    rep = import_transcript(path, store=SessionStore(), window=WindowInfo(8000, 512, "override"))
    s = Session.load(rep.path)
    assert [m["role"] for m in s.messages] == ["user", "assistant", "tool", "assistant"]
    assert s.system_prompt == "You are terse."
    assert s.messages[1]["tool_calls"][0]["function"]["arguments"] == '{"path": "."}'
    assert s.messages[1]["usage"] == {"prompt_tokens": 40, "completion_tokens": 5, "total_tokens": 45}
    assert [x.provider_prompt_tokens for x in s.snapshots()] == [40, 70]
    if form == "object":
        assert rep.tools_source == "log" and s.meta["tools"][0]["function"]["description"] == "List a folder."
        assert rep.model == "gpt-4o"
    else:
        assert rep.tools_source == "reconstructed"
        assert s.meta["tools"][0]["function"]["parameters"]["properties"] == {"path": {"type": "string"}}


def test_legacy_function_call_becomes_a_tool_call(tmp_path: Path) -> None:
    msgs = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "function_call": {"name": "weather", "arguments": "{}"}},
        {"role": "function", "name": "weather", "content": "sunny"},
    ]
    rep = import_transcript(_write(tmp_path, "f.json", msgs), store=SessionStore(), window=4096)
    s = Session.load(rep.path)
    cid = s.messages[1]["tool_calls"][0]["id"]
    assert s.messages[2]["role"] == "tool" and s.messages[2]["tool_call_id"] == cid


def test_late_system_messages_and_other_roles_are_reported(tmp_path: Path) -> None:
    msgs = [*SIMPLE, {"role": "system", "content": "late"}, {"role": "critic", "content": "meh"}]
    rep = import_transcript(_write(tmp_path, "t.json", msgs), store=SessionStore(), window=4096)
    assert len(rep.skipped) == 2 and "index 5" in rep.skipped[0] and "'critic'" in rep.skipped[1]
    assert "Skipped 2" in rep.describe()


# --------------------------------------------------------------------------- malformed input


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("", "empty"),
        ("[1, 2", "line 1, column"),
        ('{"role": "user", "content": "a"}\n{"role": "user", "content": \n', "line 2"),
        ('{"role": "user", "content": "a"}\n\n[3]\n', "line 3: expected a JSON object"),
        ('[{"role": "user", "content": "a"}, {"content": "no role"}]', "message index 1: the message has no role"),
        ('{"messages": [{"role": "user", "content": 7}]}', "messages[0]"),
        ('{"items": []}', "without a 'messages' list"),
        ('"text"', "expected a list"),
        ('[{"role": "system", "content": "only"}]', "no user, assistant or tool message"),
        (
            '[{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]',
            "message index 0: tool call 0 has no function name",
        ),
    ],
)
def test_malformed_input_names_the_place_and_imports_nothing(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    store = SessionStore()
    with pytest.raises(TranscriptError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        import_transcript(path, store=store)
    assert _store_dirs(store) == []


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bin.json"
    path.write_bytes(b'[{"role": "user",\n "content": "\xff"}]')
    with pytest.raises(TranscriptError, match="line 2: not UTF-8"):
        import_transcript(path, store=SessionStore())


def test_failure_midway_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SessionStore()
    store.root.mkdir(parents=True)

    def boom(self: Session, *a: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(Session, "save_meta", boom)
    with pytest.raises(OSError, match="disk full"):
        import_transcript(_write(tmp_path, "t.json", SIMPLE), store=store, window=4096)
    assert _store_dirs(store) == []


def test_explicit_session_dir(tmp_path: Path) -> None:
    target = tmp_path / "here"
    rep = import_transcript(_write(tmp_path, "t.json", SIMPLE), session_dir=target, window=4096)
    assert rep.path == target and Session.load(target).meta["id"] == "here"
    with pytest.raises(TranscriptError, match="already exists"):
        import_transcript(_write(tmp_path, "t.json", SIMPLE), session_dir=target, window=4096)


@pytest.mark.asyncio
async def test_imported_session_can_be_previewed_for_compaction() -> None:
    from engine.context.compaction import Compactor
    from engine.store.config import Settings

    rep = import_transcript(TRAJ[0], store=SessionStore(), window=64_000)
    s = Session.load(rep.path)
    before = (s.path / "history.jsonl").read_bytes()

    async def summarize(messages: list[dict[str, Any]], max_tokens: int) -> str:
        sections = ["Goal", "Constraints", "Progress", "Key Decisions", "Next Steps", "Critical Context"]
        return "\n".join(f"## {name}\ntext" for name in sections)

    c = Compactor(s, Settings(max_tokens=1024), summarize, window=64_000)
    assert c.tools == s.meta["tools"] and c.snapshot().tools > 0 and c.snapshot().system > 0
    pv = await c.preview()
    assert pv.plan.needed and pv.summary.valid and pv.after.history < pv.before.history
    assert (s.path / "history.jsonl").read_bytes() == before
