"""engine.sources.session_summary: the light pass over one session file (a Claude Code file read by blocks and
resumed where the last pass stopped; the titles of Claude Code and Codex files)."""

from __future__ import annotations

import itertools
import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest

from engine.sources import model, session_summary
from engine.sources.claude_code_calls import PROMPT_FIELDS
from engine.sources.tail import Tail
from tests.engine.sources.conftest import BIG_CLAUDE, CLAUDE


def _kept(path: Path) -> Tail:
    """The Tail of the light pass kept for ``path``."""
    tail = session_summary._CLAUDE_SCANS[str(path)].source
    assert tail is not None
    return tail


def test_a_grown_claude_code_file_is_summarised_from_where_the_last_pass_stopped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The light pass resumes at the end of the last complete line it read: the summary of every step equals a
    fresh pass over the file as it is then (a partial last line included), and only the new bytes are read. A
    file rewritten in place, or shorter, is read whole again."""
    lines = BIG_CLAUDE.read_bytes().splitlines(keepends=True)
    path = tmp_path / "s.jsonl"
    monkeypatch.setattr(session_summary, "_CLAUDE_SCANS", OrderedDict())

    def fresh() -> session_summary.SourceEntry:  # a pass over the whole file; the kept one left as it was
        kept = session_summary._CLAUDE_SCANS.pop(str(path), None)
        entry = session_summary._summary_claude(path)
        del session_summary._CLAUDE_SCANS[str(path)]
        if kept is not None:
            session_summary._CLAUDE_SCANS[str(path)] = kept
        return entry

    fed: list[int] = []  # a line decoded and taken: 1
    real_take = session_summary._ClaudeScan.take

    def counting(self: session_summary._ClaudeScan, obj: Any) -> None:
        fed.append(1)
        real_take(self, obj)

    monkeypatch.setattr(session_summary._ClaudeScan, "take", counting)
    cuts = [0, 7, 60, len(lines) // 2, len(lines) - 3, len(lines)]
    path.write_bytes(b"".join(lines[:cuts[1]]))
    session_summary._summary_claude(path)
    for start, end in itertools.pairwise(cuts[1:]):
        chunk = b"".join(lines[start:end])
        with open(path, "ab") as fh:  # a line cut in two: its first half now, the rest with the next step
            fh.write(chunk[: len(chunk) - 40])
        half = session_summary._summary_claude(path)
        assert half == fresh()
        with open(path, "ab") as fh:
            fh.write(chunk[len(chunk) - 40:])
        offset = _kept(path).offset
        fed.clear()
        whole = session_summary._summary_claude(path)
        assert sum(fed) <= end - start + 1  # the appended lines (and the one cut in two), not the file
        assert whole == fresh() and offset > 0
        assert _kept(path).offset == path.stat().st_size and _kept(path).waiting == b""
    assert whole.calls > 100 and whole.agent_cost_usd is None and whole.title
    # rewritten in place (same inode), longer: read whole again, not from the old offset
    other = (CLAUDE / "tool_heavy.jsonl").read_bytes()
    with open(path, "r+b") as fh:
        fh.write(other + b"\n" * max(0, path.stat().st_size - len(other) + 10))
    assert session_summary._summary_claude(path) == fresh()
    # cut shorter
    with open(path, "r+b") as fh:
        fh.truncate(len(other))
    assert session_summary._summary_claude(path) == fresh()


def test_the_title_skips_claude_codes_interruption_note(tmp_path: Path) -> None:
    def user(n: int, content: Any) -> str:
        return json.dumps({"type": "user", "uuid": f"u{n}", "sessionId": "s", "timestamp": "2026-03-01T10:00:00Z",
                           "message": {"role": "user", "content": content}}) + "\n"

    path = tmp_path / "s.jsonl"
    path.write_text(user(1, [{"type": "text", "text": "[Request interrupted by user for tool use]"}])
                    + user(2, "[Request interrupted by user]") + user(3, "fix the flaky test"))
    assert session_summary.summarize("claude-code", path).title == "fix the flaky test"


def test_a_codex_0_169_rollout_is_titled_by_its_first_prompt_in_its_working_folder(tmp_path: Path) -> None:
    # Codex 0.169 writes no user_message event and an empty session_meta cwd: the prompt is the first user
    # message item that Codex did not inject, the folder is world_state's
    def line(kind: str, payload: dict[str, Any]) -> str:
        line = {"timestamp": "2026-11-25T00:00:00.000Z", "ordinal": 0, "type": kind, "payload": payload}
        return json.dumps(line) + "\n"

    def user(*texts: str) -> str:
        return line("response_item", {"type": "message", "role": "user",
                                      "content": [{"type": "input_text", "text": t} for t in texts]})

    path = tmp_path / "rollout-2026-11-25T00-00-00-019c.jsonl"
    path.write_text(
        line("session_meta", {"id": "019c", "cwd": "", "cli_version": "0.169.0"})
        + line("world_state", {"full": True, "state": {"environments": {"environments": {
            "local": {"cwd": "/home/me/work", "status": "available"}}}}})
        + user("# AGENTS.md instructions for /home/me/work\n\n<INSTRUCTIONS>be brief</INSTRUCTIONS>",
               "<environment_context>\n  <cwd>/home/me/work</cwd>\n</environment_context>")
        + line("event_msg", {"type": "item_completed", "item": {"type": "UserMessage"}})
        + user("  rename the   flag\nand run the tests")
        + user("a later prompt"))
    entry = session_summary.summarize("codex", path)
    assert entry.title == "rename the flag and run the tests"
    assert entry.project == "work" and entry.session_id == "019c"
    older = tmp_path / "rollout-old.jsonl"  # an older rollout: its user_message event, its session_meta cwd
    older.write_text(line("session_meta", {"id": "old", "cwd": "/home/me/other"})
                     + line("event_msg", {"type": "user_message", "message": "<environment_context>x"})
                     + line("event_msg", {"type": "user_message", "message": "fix it"}))
    entry = session_summary.summarize("codex", older)
    assert (entry.title, entry.project) == ("fix it", "other")


@pytest.mark.parametrize("block", [7, 4096, 250_000, session_summary.SCAN_BLOCK])
def test_the_light_pass_by_blocks_finds_what_a_pass_line_by_line_finds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    """The light pass reads blocks and hands :meth:`_ClaudeScan.feed` only the lines holding what it looks for:
    its summary equals the one of every line fed, whatever the block size (lines cut across blocks, a block
    shorter than a line), an over-long line passed over unread and a partial last line counted."""
    monkeypatch.setattr(session_summary, "_CLAUDE_SCANS", OrderedDict())
    monkeypatch.setattr(session_summary, "SCAN_BLOCK", block)
    lines = BIG_CLAUDE.read_bytes().splitlines(keepends=True)
    long_line = b'{"type":"user","message":{"content":"' + b"x" * 300_000 + b'"}}\n'
    monkeypatch.setattr(model, "MAX_LINE_BYTES", 200_000)
    data = b"".join(lines[:5]) + long_line + b"".join(lines[5:]) + lines[-1][:-20]  # a partial last line
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    every = session_summary._ClaudeScan()
    for raw in data.splitlines(keepends=True)[:-1]:
        if len(raw) <= 200_001:
            every.feed([raw])
    every.feed([data.splitlines(keepends=True)[-1]])
    assert session_summary._summary_claude(path) == every.entry(path) and every.entry(path).calls > 100
    assert _kept(path).offset == len(data) and _kept(path).waiting == lines[-1][:-20]  # (read, waits for its end)


def test_the_light_pass_reads_lines_orjson_reads_otherwise_as_the_standard_module(tmp_path: Path) -> None:
    """A call line the block pass decodes with orjson directly, unless orjson would read it otherwise than the
    standard module (a NaN, a count past 64 bits, a raw control character): those lines give the figures of a
    pass that decodes every line with the standard module."""
    def call(n: int, usage: str, text: str = "ok") -> bytes:
        return (b'{"type":"assistant","uuid":"a%d","requestId":"r%d","timestamp":"2026-11-01T10:00:0%d.000Z",'
                b'"sessionId":"s","message":{"id":"m%d","model":"claude-sonnet-4-5","content":[{"type":"text",'
                b'"text":"%s"}],"usage":%s}}\n' % (n, n, n, n, text.encode(), usage.encode()))

    path = tmp_path / "s.jsonl"
    path.write_bytes(
        call(1, '{"input_tokens":10,"cache_read_input_tokens":90}')
        + call(2, '{"input_tokens":NaN,"cache_read_input_tokens":90}')  # orjson refuses it: no prompt figure
        + call(3, '{"input_tokens":12345678901234567890123,"cache_read_input_tokens":1}')  # past 64 bits
        + call(4, '{"input_tokens":7,"cache_read_input_tokens":3}', text="tab\there")  # a raw tab in a string
        + call(5, '{"input_tokens":20,"cache_read_input_tokens":5}'))
    every = session_summary._ClaudeScan()
    for raw in path.read_bytes().splitlines(keepends=True):
        every.take(json.JSONDecoder(strict=False).decode(raw.decode()))
    entry = session_summary._summary_claude(path)
    assert entry == every.entry(path) and entry.calls == 5 and entry.last_prompt_tokens == 25
    assert every.largest == 100  # (the count past 64 bits is no figure: MAX_COUNT)


def test_a_call_line_read_from_its_named_fields_gives_what_the_whole_line_gives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the start and the session id are known, a line is read from only the fields the light pass uses
    (msgspec: its content passed over); a ``user`` line while the title is wanted, and every line msgspec would read
    otherwise than the standard module or that is not UTF-8, are read whole as before. The summary equals the one of
    every line decoded whole, and only those lines were."""
    monkeypatch.setattr(session_summary, "_CLAUDE_SCANS", OrderedDict())

    def line(**fields: Any) -> bytes:
        return json.dumps({"sessionId": "s", "timestamp": "2026-11-01T10:00:00.000Z", **fields}).encode() + b"\n"

    def call(n: int, usage: str = '{"input_tokens":10,"cache_read_input_tokens":90}', model: str = "claude-opus-4-5",
             text: bytes = b"ok", extra: bytes = b"") -> bytes:
        return (b'{"type":"assistant","uuid":"a%d","requestId":"r%d","timestamp":"2026-11-01T10:00:0%d.000Z",'
                b'"sessionId":"s","message":{"id":"m%d","model":"%s","content":[{"type":"text","text":"%s"}],'
                b'"usage":%s}%s}\n' % (n, n, n % 10, n, model.encode(), text, usage.encode(), extra))

    whole_lines = [
        call(3, text=b"caf\xc3"),  # not UTF-8 in the content: the standard module refuses the line
        call(4, usage='{"input_tokens":1e400,"cache_read_input_tokens":1}'),  # past a double: inf, no figure
        call(5, usage='{"input_tokens":NaN,"cache_read_input_tokens":1}'),
        call(6, text=b"\\ud800 lone"),  # a lone surrogate escape
        call(7, text=b"raw\ttab"),  # a raw control character: read as it is by the readers
        b'{"type":"assistant","uuid":"a8","message":"a string"}\n',
        line(type="user", message={"role": "user", "content": "assistant"}),  # the title, still wanted
        b'[{"type":"assistant"}]\n',
        line(type="cost-state", totalCostUSD=float("nan")),  # NaN: the last figure kept
    ]
    typed_lines = [
        call(1), call(2, model="<synthetic>"), call(9, usage='{"input_tokens":12345678901234567890123}'),
        call(10, usage='{"input_tokens":1}', extra=b',"message":{"id":"m10b","model":"claude-sonnet-4-5",'
             b'"usage":{"input_tokens":40,"cache_read_input_tokens":2}}'),  # a repeated key: the last value
        b'{"type":"assistant","uuid":"a11","requestId":null,"message":null}\n',
        b'{"type":"assistant","uuid":"a12","message":{"model":"claude-opus-4-5","usage":{"input_tokens":3}}}\n',
        line(type="cost-state", totalCostUSD=0.25), line(type="cost-state", totalCostUSD="0.5"),
        line(type="cost-state", totalCostUSD=-1), line(type="cost-state", totalCostUSD=None),
        call(13, text="caf\u00e9 \u2713".encode()),  # UTF-8: read from its fields
        line(type="user", message={"role": "user", "content": "assistant"}),  # the title known: nothing to learn
        line(type="result", totalCostUSD=9.0),  # another kind holding the cost's key
        line(type="progress", data={"message": {"message": {"role": "assistant", "usage": {"input_tokens": 5}}}}),
    ]
    first = line(type="user", isMeta=True, message={"role": "user", "content": "fix the parser"})  # no title
    lines = [first, *whole_lines, *typed_lines, call(14)]
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(lines))
    every = session_summary._ClaudeScan()
    for raw in lines:
        every.take(session_summary._loads(raw))
    decoded: list[bytes] = []
    fast_json = session_summary.fast_json

    def counted(raw: bytes) -> tuple[bool, Any]:
        decoded.append(raw)
        return fast_json(raw)

    monkeypatch.setattr(session_summary, "fast_json", counted)
    entry = session_summary._summary_claude(path)
    assert entry == every.entry(path)
    assert (entry.calls, entry.agent_cost_usd, entry.title) == (10, 0.25, "assistant")
    assert decoded == [first, *whole_lines]  # the others were read from their named fields only
    assert session_summary._Usage.__struct_fields__ == PROMPT_FIELDS  # (its values are the prompt's, in this order)
