"""engine.sources.claude_code_build: Claude Code 2.1.332's user lines keep their ``rowSource`` on their messages
(lines shortened from the real file: tests.engine.sources.test_claude_code_calls)."""

from __future__ import annotations

import json
from pathlib import Path

from engine.sources.claude_code import ClaudeCodeReader, read_claude_code
from engine.sources.claude_code_build import ROW_SOURCES
from tests.engine.sources.test_claude_code_calls import the_lines


def test_user_messages_keep_their_row_source(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in the_lines()))
    src = read_claude_code(path)
    sources = {m["content"]: m.get("row_source") for m in src.messages if m["role"] == "user"}
    assert sources["EXP go"] == "local" and sources["Launching skill: greet"] == "harness"
    assert sources["a task notification"] == "recorded"
    assert {s for s in sources.values() if s} <= set(ROW_SOURCES)
    # a tool result is no prompt of anyone: its message has no row source; a summary is no message at all
    assert not any("row_source" in m for m in src.messages if m["role"] != "user")
    assert "This session is being continued…" not in sources


def _held(value: object) -> list[object]:
    """Every container and string inside ``value`` (a line's content as kept)."""
    out: list[object] = [value]
    if isinstance(value, (list, tuple)):
        for v in value:
            out += _held(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            out += [k, *_held(v)]
    return out


def test_a_line_keeps_what_the_build_takes_not_the_file_s_blocks(tmp_path: Path) -> None:
    """A followed session's lines stay in the reader (a rewind rebuilds from them): each holds its content as the
    build takes it, its strings the messages' own — no block dicts, no tool input beside its JSON text, no thinking
    signature — and the rebuild from them equals the whole read."""
    ts = "2026-11-25T10:00:00.000Z"
    usage = {"input_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 100, "output_tokens": 9}

    def line(uid: str, parent: str | None, kind: str, content: object, **extra: object) -> dict[str, object]:
        msg: dict[str, object] = {"role": kind, "content": content}
        if kind == "assistant":
            msg.update(id=extra.pop("mid"), model="claude-opus-5-5", usage=usage)
        return {"type": kind, "uuid": uid, "parentUuid": parent, "sessionId": "s", "timestamp": ts,
                "message": msg, **extra}

    edit = {"file_path": "/a.py", "old_string": "x = 1\n" * 50, "new_string": "x = 2\n" * 50}
    rows = [
        line("u1", None, "user", [{"type": "text", "text": "fix it"}, {"type": "image", "source": {"data": "AAAA"}}]),
        line("a1", "u1", "assistant", [{"type": "thinking", "thinking": "hm", "signature": "S" * 400}], mid="m1",
             requestId="r1"),
        line("a2", "a1", "assistant", [{"type": "tool_use", "id": "t1", "name": "Edit", "input": edit,
                                        "caller": {"type": "direct"}}], mid="m1", requestId="r1"),
        line("u2", "a2", "user", [{"type": "tool_result", "tool_use_id": "t1", "content": "done", "is_error": False},
                                  {"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                                   "content": [{"type": "text", "text": "a"}, {"type": "image"}]}]),
        line("a3", "u2", "assistant", [{"type": "redacted_thinking", "data": "xyz"},
                                       {"type": "text", "text": "ok"}], mid="m2", requestId="r2"),
        line("u3", "u2", "user", [{"type": "text", "text": "again"}, {"type": "document", "source": {}}]),  # a rewind
        line("a4", "u3", "assistant", "plain", mid="m3", requestId="r3"),
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in rows))
    whole = read_claude_code(path, subagents=False)
    reader = ClaudeCodeReader(path)
    for raw in path.read_bytes().splitlines(keepends=True):
        reader.feed(raw)
    fed = reader.finish(subagents=False)
    assert reader.rebuilds == 1
    assert [{k: v for k, v in m.items() if k != "id"} for m in fed.messages] == [
        {k: v for k, v in m.items() if k != "id"} for m in whole.messages]
    assert whole.messages[1]["tool_calls"][0]["function"]["arguments"] == json.dumps(edit)
    assert whole.messages[1]["reasoning_content"] == "hm"
    assert [m["content"] for m in whole.messages if m["role"] == "tool"] == ["done", [
        {"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "about:blank#image-not-imported"}}]]
    assert [m["content"] for m in whole.messages if m["role"] != "tool"][-2:] == [
        "again\n[document not imported]", "plain"] and whole.off_chain == 1
    held = [v for ln in reader.scan.lines for v in _held(ln.content)]
    assert not any(isinstance(v, (dict, list)) for v in held)
    assert "S" * 400 not in held and edit["old_string"] not in held
    arguments = next(v for v in held if isinstance(v, str) and v.startswith('{"file_path"'))
    assert any(arguments is c["function"]["arguments"] for m in fed.messages for c in m.get("tool_calls", []))


def test_a_line_s_messages_are_noted_as_an_index_and_a_list_only_for_several(tmp_path: Path) -> None:
    """The build notes which messages each line became (a compaction's preserved lines are found by it): one int a
    line that became one message (a list object per line held for ten minutes of following was 0.5 MB), a list for a
    line of several; the preserved messages come back after the boundary as before."""
    ts = "2026-11-25T10:00:00.000Z"
    usage = {"input_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 100, "output_tokens": 9}
    results = [{"type": "tool_result", "tool_use_id": t, "content": f"out {t}"} for t in ("t1", "t2")]
    rows = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "timestamp": ts,
         "message": {"role": "user", "content": "go"}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "timestamp": ts, "requestId": "r1", "message": {
            "id": "m1", "model": "claude-opus-5-5", "usage": usage, "content": [
                {"type": "tool_use", "id": t, "name": "Read", "input": {}} for t in ("t1", "t2")]}},
        {"type": "user", "uuid": "u2", "parentUuid": "a1", "timestamp": ts,
         "message": {"role": "user", "content": results}},
        {"type": "system", "subtype": "compact_boundary", "uuid": "b1", "parentUuid": None, "logicalParentUuid": "u2",
         "timestamp": ts, "compactMetadata": {"trigger": "auto", "preTokens": 100,
                                              "preservedMessages": {"uuids": ["a1", "u2"]}}},
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in rows))
    reader = ClaudeCodeReader(path)
    for raw in path.read_bytes().splitlines(keepends=True):
        reader.feed(raw)
    build = reader._build
    assert build.by_uuid == {"u1": 0, "a1": 1, "u2": [2, 3]}
    assert build.became("u2") == [2, 3] and build.became("a1") == [1] and build.became("nope") == []
    session = reader.finish(subagents=False)
    kept = session.messages[session.compactions[0].message_index:]
    assert [(m["role"], m.get("content")) for m in kept] == [
        ("assistant", None), ("tool", "out t1"), ("tool", "out t2")]
    assert all(m.get("preserved") for m in kept)


def test_a_conversation_line_holds_no_slots_of_the_rare_kinds(tmp_path: Path) -> None:
    """A user or assistant line (most of what the reader keeps) shares one empty :data:`PLAIN` for the fields only an
    attachment or a boundary has; theirs are read as before."""
    import sys

    from engine.sources.claude_code_build import PLAIN

    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in the_lines()))
    reader = ClaudeCodeReader(path)
    reader.feed(path.read_bytes())
    lines = reader.scan.lines
    talk = [ln for ln in lines if ln.kind in ("user", "assistant")]
    assert talk and all(ln.more is PLAIN for ln in talk)
    assert max(sys.getsizeof(ln) for ln in talk) <= 16 + 8 * 10 + 16  # ten slots (seventeen before)
    boundary = next(ln for ln in lines if ln.kind == "boundary")
    assert (boundary.trigger, boundary.pre_tokens, boundary.logical_parent) == ("manual", 13088, "u3")
    src = reader.finish(subagents=False)
    assert [c.tokens_before for c in src.compactions] == [13088, 12690]


def test_what_every_line_repeats_is_held_as_one_string(tmp_path: Path) -> None:
    """A followed session keeps every line: a kept line's kind, a call's model and a tool call's name are one string
    each however many lines bring them (each decoded line brings its own copy: about 0.5 MB in ten minutes of a
    followed session), and what the lines say is unchanged."""
    ts = "2026-11-25T10:00:00.000Z"
    usage = {"input_tokens": 5, "output_tokens": 9}
    rows: list[dict[str, object]] = []
    parent = None
    for i in range(4):
        rows.append({"type": "user", "uuid": f"u{i}", "parentUuid": parent, "sessionId": "s", "timestamp": ts,
                     "message": {"role": "user", "content": f"step {i}"}})
        rows.append({"type": "assistant", "uuid": f"a{i}", "parentUuid": f"u{i}", "sessionId": "s", "timestamp": ts,
                     "requestId": f"r{i}", "message": {"id": f"m{i}", "model": "claude-opus-5-5", "usage": usage,
                                                       "content": [{"type": "tool_use", "id": f"t{i}", "name": "Bash",
                                                                    "input": {"command": "ls"}}]}})
        parent = f"a{i}"
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in rows))
    reader = ClaudeCodeReader(path)
    reader.feed(path.read_bytes())
    session = reader.finish(subagents=False)
    lines = reader.scan.lines
    assert [ln.kind for ln in lines] == ["user", "assistant"] * 4
    assert len({id(ln.kind) for ln in lines}) == 2
    assert [c.model for c in session.calls] == ["claude-opus-5-5"] * 4
    assert len({id(c.model) for c in session.calls}) == 1
    names = [part[2] for ln in lines if ln.kind == "assistant" for part in ln.content if part[0] == "use"]
    assert names == ["Bash"] * 4 and len(set(map(id, names))) == 1
    assert [c["function"]["name"] for m in session.messages for c in m.get("tool_calls", [])] == ["Bash"] * 4


def test_a_message_once_made_is_never_changed_in_place(tmp_path: Path) -> None:
    """A response's next line (more text, another tool call), a subagent linked to a result: the message is a new
    dict in its place (its tool calls a new list), the one made before stays as it was — a followed view holds the
    reader's dicts as they are (:attr:`SourceSession.fresh_on_change`), not a copy of each; the messages equal a
    whole read's."""
    from engine.sources.claude_code import _link_task

    ts = "2026-11-25T10:00:00.000Z"
    usage = {"input_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 100, "output_tokens": 9}

    def part(uid: str, parent: str, block: dict[str, object]) -> dict[str, object]:
        return {"type": "assistant", "uuid": uid, "parentUuid": parent, "timestamp": ts, "requestId": "r1",
                "message": {"id": "m1", "model": "claude-opus-5-5", "usage": usage, "content": [block]}}

    rows = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "timestamp": ts,
         "message": {"role": "user", "content": "go"}},
        part("a1", "u1", {"type": "text", "text": "first"}),
        part("a2", "a1", {"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": 1}}),
        part("a3", "a2", {"type": "tool_use", "id": "t2", "name": "Task", "input": {"p": 2}}),
        {"type": "user", "uuid": "u2", "parentUuid": "a3", "timestamp": ts, "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": t, "content": f"out {t}"} for t in ("t1", "t2")]}},
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in rows))
    reader = ClaudeCodeReader(path)
    made: list[tuple[dict[str, object], str]] = []
    for raw in path.read_bytes().splitlines(keepends=True):
        reader.feed(raw)
        made += [(m, json.dumps(m)) for m in reader.session.messages]
    _link_task(reader.session, "agent-1", "t2")
    session = reader.session
    assert all(json.dumps(m) == was for m, was in made)  # every dict as it was when made
    assert session.messages[1]["content"] == "first" and [c["id"] for c in session.messages[1]["tool_calls"]] == [
        "t1", "t2"]
    assert session.messages[3]["subagent"] == {"id": "agent-1"} and "subagent" not in made[-1][0]
    linked = session.messages[3]
    reader.read_beside(subagents=False)
    reader.read_beside(subagents=False)  # (read again: the links it made before taken off, in new dicts)
    assert "subagent" not in session.messages[3] and linked["subagent"] == {"id": "agent-1"}
    whole = read_claude_code(path, subagents=False)
    assert [{k: v for k, v in m.items() if k != "id"} for m in session.messages[:3]] == [
        {k: v for k, v in m.items() if k != "id"} for m in whole.messages[:3]]
    assert session.fresh_on_change
