"""Bad input never crashes a reader: torn last lines, lines that are not JSON, record types the reader
does not know, fields of the wrong type, missing subagent files — skipped and reported with the reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from app import cli
from engine.sources.claude_code import read_claude_code
from engine.sources.codex import read_codex
from engine.sources.openhands import read_openhands
from engine.sources.readers import read_source
from engine.sources.swe_agent import read_swe_agent
from tests.engine.sources.conftest import CLAUDE, CODEX, OPENHANDS, SWE, codex_files, raw_claude_calls

SMALL_CODEX = codex_files()[2]
WRONG = [None, 7, -1, "x", [], {}, [1, "a", None], {"type": 5}, True, 1e308]


def test_torn_last_line_bad_line_and_unknown_type_are_skipped(tmp_path: Path) -> None:
    text = (CLAUDE / "tool_heavy.jsonl").read_text(encoding="utf-8")
    rows = text.splitlines()
    rows.insert(5, "{not json at all")
    rows.insert(8, json.dumps({"type": "hologram", "uuid": "u-new", "parentUuid": None}))
    rows.insert(9, "[1, 2]")
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(rows) + "\n" + '{"type": "assistant", "message": {"id": "m', encoding="utf-8")
    src = read_claude_code(path)
    reasons = {s.line: s.reason for s in src.skipped}
    assert reasons[6].startswith("not JSON")
    assert reasons[9] == "record type 'hologram' is not one this reader knows"
    assert reasons[10] == "a JSON list, not an object"
    assert reasons[len(rows) + 1].startswith("truncated last line")
    assert len(src.calls) == len(raw_claude_calls(CLAUDE / "tool_heavy.jsonl"))


def test_codex_unknown_types_and_torn_line(tmp_path: Path) -> None:
    rows = SMALL_CODEX.read_text(encoding="utf-8").splitlines()
    rows.insert(3, json.dumps({"timestamp": "2026-02-23T19:34:26Z", "type": "telepathy", "payload": {}}))
    rows.insert(4, json.dumps({"timestamp": "2026-02-23T19:34:26Z", "type": "response_item",
                               "payload": {"type": "hologram_call", "call_id": "c"}}))
    path = tmp_path / "rollout-bad.jsonl"
    path.write_text("\n".join(rows) + '\n{"timestamp": "2026-02-23T19:40:00Z", "type": "event_msg", "pay',
                    encoding="utf-8")
    src = read_codex(path)
    reasons = [s.describe() for s in src.skipped]
    assert reasons[0] == "line 4: record type 'telepathy' is not one this reader knows"
    assert reasons[1] == "line 5: response item type 'hologram_call' is not one this reader knows"
    assert reasons[2].startswith(f"line {len(rows) + 1}: truncated last line")
    assert len(src.calls) == len(read_codex(SMALL_CODEX).calls)


def _mutated_lines(path: Path, key: str, value: Any) -> str:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        target = obj.get("message") if key.startswith("message.") and isinstance(obj.get("message"), dict) else obj
        if key.startswith("payload."):
            target = obj.get("payload") if isinstance(obj.get("payload"), dict) else obj
        name = key.split(".", 1)[-1]
        if name in target:
            target[name] = value
        out.append(json.dumps(obj))
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("key", ["message", "message.content", "message.usage", "message.id", "parentUuid",
                                 "data", "compactMetadata", "type", "timestamp", "uuid"])
def test_claude_fields_of_the_wrong_type_never_crash(tmp_path: Path, key: str) -> None:
    for n, value in enumerate(WRONG):
        path = tmp_path / f"{n}.jsonl"
        path.write_text(_mutated_lines(CLAUDE / "subagent.jsonl", key, value), encoding="utf-8")
        src = read_claude_code(path)
        assert isinstance(src.messages, list) and all(c.index == i for i, c in enumerate(src.calls))


@pytest.mark.parametrize("key", ["payload", "payload.content", "payload.info", "payload.summary", "payload.output",
                                 "payload.arguments", "payload.replacement_history", "type", "timestamp"])
def test_codex_fields_of_the_wrong_type_never_crash(tmp_path: Path, key: str) -> None:
    for n, value in enumerate(WRONG):
        path = tmp_path / f"rollout-{n}.jsonl"
        path.write_text(_mutated_lines(SMALL_CODEX, key, value), encoding="utf-8")
        src = read_codex(path)
        assert isinstance(src.messages, list)


def test_json_documents_with_wrong_shapes(tmp_path: Path) -> None:
    events = json.loads((OPENHANDS / "basic.json").read_text(encoding="utf-8"))
    for value in WRONG:
        broken = json.loads(json.dumps(events))
        broken[1]["tool_call_metadata"] = value
        broken[2]["args"] = value
        broken.append(value)
        path = tmp_path / "oh.json"
        path.write_text(json.dumps(broken), encoding="utf-8")
        src = read_openhands(path)
        assert any("not an object" in s.reason for s in src.skipped) or isinstance(value, dict)
    traj = json.loads((SWE / "function_calling_simple.traj").read_text(encoding="utf-8"))
    for value in WRONG:
        broken = json.loads(json.dumps(traj))
        broken["history"][2]["tool_calls"] = value
        broken["history"].append(value)
        broken["trajectory"] = value
        path = tmp_path / "x.traj"
        path.write_text(json.dumps(broken), encoding="utf-8")
        src = read_swe_agent(path)
        assert len(src.messages) >= 10


def test_the_import_report_lists_what_was_skipped(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rows = (CLAUDE / "short.jsonl").read_text(encoding="utf-8").splitlines()
    rows.insert(2, "garbage")
    path = tmp_path / "agent" / "s.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(rows) + "\n{\"type\": \"user\", \"mess", encoding="utf-8")
    code = cli.main(["import", str(path), "--session", str(tmp_path / "out"), "--no-model-info"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["skipped_lines"] == 2
    assert report["skipped"][0].startswith("line 3: not JSON")
    assert report["skipped"][1].startswith(f"line {len(rows) + 1}: truncated last line")
    meta = json.loads((tmp_path / "out" / "session.json").read_text(encoding="utf-8"))
    assert meta["import"]["skipped"] == report["skipped"]


def test_a_missing_subagent_file_is_in_the_report(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    session = tmp_path / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    shutil.copyfile(CLAUDE / session.name, session)
    shutil.copytree(CLAUDE / session.stem, tmp_path / session.stem)
    (tmp_path / session.stem / "subagents" / "agent-a881341.jsonl").unlink()
    code = cli.main(["import", str(session), "--session", str(tmp_path / "out"), "--no-model-info"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["reported_calls"] == 152
    assert any("agent-a881341.jsonl is missing" in s for s in report["skipped"])
    # its calls streamed into the parent as progress records: a subagent of calls only, with no file
    (sub,) = report["subagents"]
    assert sub["id"] == "a881341" and sub["file"] is None and sub["messages"] == 0 and sub["reported_calls"] > 0


def test_a_file_that_cannot_be_read(tmp_path: Path) -> None:
    from engine.sources.model import SourceError

    with pytest.raises(SourceError, match="cannot read"):
        read_source(tmp_path / "gone.jsonl", "codex")
    assert read_codex(CODEX / SMALL_CODEX.name).skipped == []
