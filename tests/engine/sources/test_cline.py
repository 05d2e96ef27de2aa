"""engine.sources.cline on a shortened copy of what Cline CLI 3.0.65 wrote in a real run (the system prompt cut,
the rest as written: the ``<user_input>`` wrapper, the ``[SYSTEM]`` nudge, a ``run_commands`` call and its
structured result, ``submit_and_exit``); read whole, followed while it is rewritten (a half-written version
waited on), bad input, detection, Sources and the usage index."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from engine.sources.cline import COMPACTED, ClineReader, light_summary, read_cline, user_text
from engine.sources.detect import detect_format
from engine.sources.discovery import scan_sources
from engine.sources.follow import Follower
from engine.sources.model import SourceError
from engine.store.config import Settings
from engine.usage.index import UsageIndex

SID = "1795743629858_80dvj"
SYSTEM = ("You are Cline, a careful and helpful coding agent that works in the background.\n"
          "…\nDo not ask the user questions; what happened is what the tools switch happened.")
NUDGE = ("[SYSTEM] This run is not complete until you call one of these terminal completion tools: submit_and_exit. "
         "Continue working if requirements are not met. If the task is complete, call the appropriate terminal "
         "completion tool now.")
MODEL_INFO = {"id": "fake-model", "provider": "openai-compatible"}


def metrics(inp: int, out: int, read: int, write: int = 0) -> dict[str, int]:
    return {"inputTokens": inp, "outputTokens": out, "cacheReadTokens": read, "cacheWriteTokens": write}


MESSAGES: list[dict[str, Any]] = [
    {"id": "8bb0e4fd-7a53-4e7d-be3f-cb85aa019565", "role": "user", "ts": 1795743629917, "content": [
        {"type": "text",
         "text": "<user_input mode=\"yolo\">Run echo step1 then echo step2, then finish.</user_input>"}]},
    {"id": "msg_v7U9wnJZ", "role": "user", "content": [{"type": "text", "text": NUDGE}], "ts": 1795743629920,
     "metadata": {"userRunSpan": 0}},
    {"id": "msg_to7xeYGG", "role": "assistant", "ts": 1795743629984, "modelInfo": MODEL_INFO,
     "metrics": metrics(3481, 20, 0), "content": [
         {"type": "text", "text": "Running step 1."},
         {"type": "tool_use", "id": "call_f90b51ecf06d43c785c4", "name": "run_commands",
          "input": {"commands": ["echo step1", "printf tab\\\\tend"]}}]},
    {"id": "msg_hGXC0jzL", "role": "user", "ts": 1795743630005, "content": [
        {"type": "tool_result", "tool_use_id": "call_f90b51ecf06d43c785c4", "name": "run_commands", "content": [
            {"query": "echo step1", "result": "step1\n", "success": True},
            {"query": "printf tab\\\\tend", "result": "tab\tend", "success": True}]}]},
    {"id": "msg_BZ50ayHL", "role": "assistant", "ts": 1795743630033, "modelInfo": MODEL_INFO,
     "metrics": metrics(3593, 19, 3483), "content": [
         {"type": "tool_use", "id": "call_815de8d606bc49c28af8", "name": "submit_and_exit",
          "input": {"summary": "Done: two commands ran.", "verified": True}}]},
    {"id": "msg_H5vGo7rv", "role": "user", "ts": 1795743630088, "content": [
        {"type": "tool_result", "tool_use_id": "call_815de8d606bc49c28af8", "name": "submit_and_exit",
         "content": "Submission recorded (verified): Done: two commands ran."}]},
]


def document(messages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"version": 1, "updated_at": "2026-11-27T01:40:30.103Z", "agent": "lead", "sessionId": SID,
            "origin": {"source": "cli", "mode": "user", "sessionId": SID, "version": "3.0.65"},
            "messages": copy.deepcopy(MESSAGES if messages is None else messages), "system_prompt": SYSTEM}


def meta(folder: Path, **over: Any) -> dict[str, Any]:
    usage = {"inputTokens": 3481 + 3593, "outputTokens": 39, "cacheReadTokens": 3483, "cacheWriteTokens": 0,
             "totalCost": 0}
    out: dict[str, Any] = {
        "version": 1, "session_id": SID, "source": "cli", "pid": 25573, "started_at": "2026-11-27T01:40:29.862Z",
        "ended_at": "2026-11-27T01:40:30.115Z", "exit_code": 0, "status": "completed", "interactive": False,
        "provider": "openai-compatible", "model": "fake-model", "cwd": "/work/proj", "workspace_root": "/work/proj",
        "prompt": "Run echo step1 then echo step2, then finish.",
        "metadata": {"title": "Run echo step1 then echo step2, then finish.", "totalCost": 0, "usage": usage},
        "messages_path": str(folder / f"{SID}.messages.json")}
    out.update(over)
    return out


def dump(value: Any) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode()  # as Cline writes it


def write_session(root: Path, doc: dict[str, Any] | None = None, **meta_over: Any) -> Path:
    folder = root / ".cline" / "data" / "sessions" / SID
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{SID}.json").write_bytes(dump(meta(folder, **meta_over)))
    path = folder / f"{SID}.messages.json"
    path.write_bytes(dump(document() if doc is None else doc))
    return path


def test_the_whole_session_as_sent(tmp_path: Path) -> None:
    src = read_cline(write_session(tmp_path))
    assert (src.session_id, src.model, src.cwd, src.project) == (SID, "fake-model", "/work/proj", "proj")
    assert src.system_prompt == SYSTEM and src.prefix_label == "tool definitions"  # tools are not in the file
    assert src.started == "2026-11-27T01:40:29.862+00:00" and src.last_activity == "2026-11-27T01:40:30.115+00:00"
    sent = [{k: v for k, v in m.items() if k not in ("id", "ts")} for m in src.messages]
    assert sent == [
        {"role": "user", "content": "Run echo step1 then echo step2, then finish."},  # the wrapper is not sent
        {"role": "user", "content": NUDGE},
        {"role": "assistant", "content": "Running step 1.", "tool_calls": [{
            "id": "call_f90b51ecf06d43c785c4", "type": "function", "function": {
                "name": "run_commands", "arguments": '{"commands":["echo step1","printf tab\\\\\\\\tend"]}'}}]},
        {"role": "tool", "tool_call_id": "call_f90b51ecf06d43c785c4",
         "content": '[{"query":"echo step1","result":"step1\\n","success":true},'
                    '{"query":"printf tab\\\\\\\\tend","result":"tab\\tend","success":true}]'},
        {"role": "assistant", "content": "", "tool_calls": [{
            "id": "call_815de8d606bc49c28af8", "type": "function", "function": {
                "name": "submit_and_exit", "arguments": '{"summary":"Done: two commands ran.","verified":true}'}}]},
        {"role": "tool", "tool_call_id": "call_815de8d606bc49c28af8",
         "content": "Submission recorded (verified): Done: two commands ran."}]
    figures = [(c.prompt_tokens, c.completion_tokens, c.cache_read_tokens, c.cache_write_tokens, c.message_index,
                c.model, c.request_id) for c in src.calls]
    assert figures == [(3481, 20, 0, 0, 2, "fake-model", ""), (3593, 19, 3483, 0, 4, "fake-model", "")]
    assert src.calls[0].ts == "2026-11-27T01:40:29.984+00:00"
    assert src.notes == [] and src.skipped == [] and src.ignored == {}
    assert src.agent_cost_usd is None  # Cline's 0 for a model it has no price for is no price
    assert read_cline(src.path.with_name(f"{SID}.json")).calls == src.calls  # the meta names its messages


def test_the_meta_totals_are_checked_and_a_priced_cost_taken(tmp_path: Path) -> None:
    usage = {"inputTokens": 9999, "outputTokens": 39, "cacheReadTokens": 3483, "cacheWriteTokens": 0}
    src = read_cline(write_session(tmp_path, metadata={"title": "t", "totalCost": 0.0123, "usage": usage}))
    (note,) = src.notes
    assert "inputTokens 9999 (calls: 7074)" in note and "outputTokens" not in note
    assert src.agent_cost_usd == pytest.approx(0.0123)


def test_cache_figures_outside_the_input_are_added() -> None:
    reader = ClineReader(Path(f"{SID}.messages.json"))
    msgs = copy.deepcopy(MESSAGES[:3])
    msgs[2]["metrics"] = metrics(100, 5, 800, 50)  # a provider whose input excludes the cache
    reader.feed(dump(document(msgs)))
    assert reader.finish().calls[0].prompt_tokens == 950


def test_following_a_rewritten_file_waits_on_a_half_written_version(tmp_path: Path) -> None:
    path = write_session(tmp_path, document(MESSAGES[:2]))
    follower = Follower(path, "cline")
    assert follower.poll() == []  # no call yet
    path.write_bytes(dump(document(MESSAGES[:3]))[:700])  # Cline truncates, then writes: caught half way
    assert follower.poll() == []  # not an error: waited on
    path.write_bytes(dump(document(MESSAGES[:4])))
    events = follower.poll()
    assert [(e.kind, e.call.prompt_tokens if e.call else None) for e in events] == [("call", 3481)]
    path.write_bytes(dump(document()))
    assert [(e.kind, e.call.index if e.call else None) for e in follower.poll()] == [("call", 1)]
    assert follower.poll() == []
    changed = document()
    changed["messages"][0]["content"][0]["text"] = "another prompt"  # an earlier message changed: read again
    path.write_bytes(dump(changed))
    assert [e.kind for e in follower.poll()] == ["reset", "call", "call"]


def test_the_reader_tells_what_a_new_version_adds() -> None:
    reader = ClineReader(Path(f"{SID}.messages.json"))
    first = reader.feed(dump(document(MESSAGES[:3])))
    assert (first.messages_from, first.calls_from, first.reset) == (0, 0, False)
    reader.restart()
    whole = dump(document())
    assert reader.feed(whole[:500]).nothing(reader.session) and reader.waiting  # half written: no change
    more = reader.feed(whole[500:])
    assert (more.messages_from, more.calls_from, more.reset) == (3, 1, False) and reader.waiting == ""
    assert len(reader.session.messages) == 6 and len(reader.session.calls) == 2
    reader.feed(b'{"extra": 1}\n')  # a rewrite nobody noticed: the file is read as it is now (absent here)
    assert "Extra data" in reader.waiting and len(reader.finish().calls) == 2
    assert "did not parse" in reader.finish().notes[-1]


def test_a_rewrite_the_tail_missed_is_read_from_the_file(tmp_path: Path) -> None:
    path = write_session(tmp_path)  # the whole session on disk now
    reader = ClineReader(path)
    reader.feed(dump(document(MESSAGES[:3])))
    changes = reader.feed(b"  }\n]\n")  # the end of the new version appended to the old one, as a Tail would give it
    assert reader.waiting == "" and (changes.messages_from, changes.calls_from) == (3, 1)
    assert len(reader.finish().calls) == 2


@pytest.mark.parametrize(("data", "message"), [
    (b"", "the file is empty"),
    (b'{"version": 1, "messages": [', "not a complete JSON document"),
    (b"\xff\xfe", "not a complete JSON document"),
    (b"[1, 2]", "not a Cline messages document .a JSON list"),
    (b'{"messages": [], "agent": "lead"}', "an object without sessionId"),
    (b'{"messages": {}, "agent": "lead", "sessionId": "x", "version": 1}', "fields of other types"),
])
def test_bad_documents_are_said(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "x.messages.json"
    path.write_bytes(data)
    with pytest.raises(SourceError, match=message):
        read_cline(path)


def test_bad_messages_are_skipped_and_said(tmp_path: Path) -> None:
    msgs: list[Any] = copy.deepcopy(MESSAGES)
    msgs[2]["metrics"] = {"inputTokens": "many", "outputTokens": -1}
    msgs[3]["content"].append({"type": "mystery"})
    msgs.insert(1, "not a message")
    msgs.insert(1, {"role": "tool", "content": []})
    msgs[-1]["content"] = {"not": "blocks"}
    src = read_cline(write_session(tmp_path, document(msgs)))
    assert [(s.line, s.damaged) for s in src.skipped] == [(2, False), (3, True), (8, True)]
    assert "role 'tool'" in src.skipped[0].reason and "not an object (str)" in src.skipped[1].reason
    assert "content is a dict" in src.skipped[2].reason
    assert (src.calls[0].prompt_tokens, src.calls[0].completion_tokens) == (None, None)
    assert src.ignored == {"block/mystery": 1}
    assert len(src.calls) == 2 and src.messages[-1]["role"] == "assistant"


def test_detected_and_never_taken_for_another_json_format(tmp_path: Path) -> None:
    path = write_session(tmp_path)
    assert detect_format(path) == "cline" and detect_format(path.with_name(f"{SID}.json")) == "cline"
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    events = tmp_path / "events.json"
    events.write_text(json.dumps([{"id": 1, "source": "user", "action": "message", "args": {}}]))
    assert (detect_format(chat), detect_format(events)) == ("openai", "openhands")


def test_listed_in_sources_and_counted_in_usage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    path = write_session(home)
    assert user_text('<user_input mode="act">a\n<b></user_input>') == "a\n<b>"
    (entry,) = scan_sources(env={}, home=home, index=tmp_path / "idx.json", refresh=True)
    assert (entry.agent, entry.project, entry.title, entry.calls, entry.last_prompt_tokens, entry.path) == (
        "cline", "proj", "Run echo step1 then echo step2, then finish.", 2, 3593, str(path))
    assert (entry.started, entry.last_activity) == ("2026-11-27T01:40:29.862+00:00", "2026-11-27T01:40:30.115+00:00")
    assert light_summary(path).cost_usd is None
    other = tmp_path / "other"
    monkeypatch.setenv("CLINE_DATA_DIR", str(other))
    monkeypatch.setenv("CTXBENCH_DATA_DIR", str(tmp_path / "data"))
    ix = UsageIndex(tmp_path / "usage")
    ix.update(home=home, env={})
    totals = ix.totals()
    assert (totals["calls"], totals["prompt_tokens"], totals["cost_usd"]) == (2, 7074, None)
    assert totals["unpriced_calls"] == 2
    priced = document()
    for msg in priced["messages"]:
        if "modelInfo" in msg:
            msg["modelInfo"]["id"] = "gpt-4o"
    write_session(home, priced)
    ix.update(home=home, env={})
    totals = ix.totals()
    assert totals["unpriced_calls"] == 0 and totals["cost_usd"] > 0



def test_found_in_a_folder_named_in_the_settings(tmp_path: Path) -> None:
    """A copied Cline sessions folder named in ``source_dirs`` is searched as the others are (by its file names)."""
    path = write_session(tmp_path / "archive")
    (entry,) = scan_sources(Settings(source_dirs=str(tmp_path / "archive")), env={}, home=tmp_path / "empty",
                            index=tmp_path / "idx.json", refresh=True)
    assert (entry.agent, entry.path, entry.calls) == ("cline", str(path), 2)

CONTINUED = [  # what the TUI (cline --id) added to the session, shortened from a real run
    {"id": "f1118d68-44a6-42e8-af1d-9c6309b7406d", "role": "user", "ts": 1795744096470,
     "content": [{"type": "text", "text": "<user_input mode=\"act\">Now echo again.</user_input>"}]},
    {"id": "msg_0FoKFA3c", "role": "assistant", "ts": 1795744096602, "modelInfo": MODEL_INFO,
     "metrics": metrics(5780, 4, 5698), "content": [{"type": "text", "text": "Continued: done."}]},
]


def test_a_continuation_in_the_tui_marks_the_calls_of_the_headless_run() -> None:
    reader = ClineReader(Path(f"{SID}.messages.json"))
    reader.feed(dump(document()))
    assert [c.prompt_unlike_file for c in reader.session.calls] == ["", ""] and reader.session.notes == []
    reader.restart()
    changes = reader.feed(dump(document(MESSAGES + CONTINUED)))
    src = reader.finish()
    assert (changes.reset, changes.calls_from, changes.calls_updated) == (False, 2, [0, 1])
    assert [bool(c.prompt_unlike_file) for c in src.calls] == [True, True, False]
    assert src.messages[-2]["content"] == "Now echo again." and "the last run's" in src.notes[0]
    again = read_cline_doc(MESSAGES + CONTINUED + [
        {**CONTINUED[0], "content": [{"type": "text", "text": "<user_input mode=\"plan\">And again.</user_input>"}]},
        CONTINUED[1]])
    assert [bool(c.prompt_unlike_file) for c in again.calls] == [True, True, False, False]  # TUI after TUI: kept


def read_cline_doc(messages: list[dict[str, Any]]) -> Any:
    reader = ClineReader(Path(f"{SID}.messages.json"))
    reader.feed(dump(document(messages)))
    return reader.finish()


def test_a_compaction_is_inferred_from_the_prompt_falling() -> None:
    """Real figures of a ``--compaction basic`` run (the file keeps every message; the request after the compaction
    held fewer): the calls from the fall on are marked, inferred, and said."""
    msgs: list[dict[str, Any]] = [copy.deepcopy(MESSAGES[0])]
    for n, prompt in enumerate((3476, 39258, 189423, 4075, 4157)):
        msgs.append({"id": f"a{n}", "role": "assistant", "ts": 1795744347594 + n, "modelInfo": MODEL_INFO,
                     "metrics": metrics(prompt, 12, 0), "content": [{"type": "text", "text": f"Step {n}."}]})
        msgs.append({"id": f"u{n}", "role": "user", "ts": 1795744347600 + n,
                     "content": [{"type": "text", "text": "go"}]})
    src = read_cline_doc(msgs)
    assert [bool(c.prompt_unlike_file) for c in src.calls] == [False, False, False, True, True]
    assert src.notes == [f"calls {COMPACTED}"]
    reader = ClineReader(Path(f"{SID}.messages.json"))
    reader.feed(dump(document(msgs[:7])))
    reader.restart()
    changes = reader.feed(dump(document(msgs)))
    assert changes.calls_from == 3 and changes.calls_updated == []  # the marked calls are new ones
    assert [bool(c.prompt_unlike_file) for c in reader.session.calls] == [False, False, False, True, True]


def test_a_followed_view_of_a_rewritten_file_ends_as_the_whole_import(tmp_path: Path) -> None:
    """The window's followed view (LiveSource): each version Cline writes, half-written ones between, is applied as
    a change (never a rewrite of the view), and the view ends with the whole import's records and history."""
    from engine.context.conversation import Session
    from engine.ingest import import_source
    from engine.store.config import Settings
    from engine.workbench.source_views import LiveSource, new_prefix
    from tests.engine.workbench.test_live_import import records

    path = write_session(tmp_path / "home", document(MESSAGES[:3]))
    folder = tmp_path / "view"
    live = LiveSource(path, "cline", new_prefix(), Settings(), None)
    live.open(folder)
    session = Session.load(folder)
    plans = 0
    try:
        for k in (4, 5, 6):
            whole = dump(document(MESSAGES[:k]))
            path.write_bytes(whole[:len(whole) // 2])  # caught half way through the rewrite
            plan = live.poll()
            assert plan is not None and plan.empty
            path.write_bytes(whole)
            plan = live.poll()
            assert plan is not None, "a rewrite that only added messages is a change, not a new view"
            if not plan.empty:
                plans += 1
                live.importer.apply(session, plan)
    finally:
        session.close()
    assert plans == 3
    imported = tmp_path / "whole"
    import_source(path, session_dir=imported)
    assert records(folder) == records(imported)
    history = [[{k: v for k, v in m.items() if k != "id"} for m in map(json.loads, (f / "history.jsonl").read_text()
                                                                        .splitlines())] for f in (folder, imported)]
    assert history[0] == history[1] and len(history[0]) == 6
