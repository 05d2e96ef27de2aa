"""LineLog: a followed file's lines kept in memory as a Tail reads them; the readers read the log
instead of the file and give exactly what they give reading the file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.sources.follow import LineLog, Tail
from engine.sources.model import SourceFormat, SourceSession
from engine.sources.readers import read_source
from tests.conftest import SHARED

SESSIONS = SHARED / "data" / "sessions"
FILES: list[tuple[SourceFormat, Path]] = [
    ("claude-code", SESSIONS / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"),
    ("claude-code", SESSIONS / "claude-code" / "subagent.jsonl"),
    ("codex", SESSIONS / "codex" / "rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"),
]


def _shape(s: SourceSession) -> tuple[object, ...]:
    return (
        [(m.get("role"), m.get("content"), m.get("tool_calls")) for m in s.messages],
        [(c.prompt_tokens, c.cache_read_tokens, c.completion_tokens) for c in s.calls],
        [(c.trigger, c.summary, c.tokens_before) for c in s.compactions],
        s.live_start, s.model, s.window, len(s.skipped),
    )


@pytest.mark.parametrize(("fmt", "source"), FILES)
def test_reading_the_log_is_reading_the_file(tmp_path: Path, fmt: SourceFormat, source: Path) -> None:
    if not source.exists():
        pytest.skip(f"{source} is not here")
    data = source.read_bytes()
    copy = tmp_path / source.name
    if (source.with_suffix("")).is_dir():
        shutil.copytree(source.with_suffix(""), tmp_path / source.stem)
    cut = data.rfind(b"\n", 0, len(data) // 2) + 1
    copy.write_bytes(data[:cut] + data[cut:cut + 40])  # half the file and a torn line
    log = LineLog(Tail(copy))
    got, reset = log.feed()
    assert got and not reset and log.size == cut  # the torn line waits
    with copy.open("ab") as fh:
        fh.write(data[cut + 40:])
    got, reset = log.feed()
    assert got and not reset and log.size == len(data) and b"".join(log.lines) == data
    assert _shape(read_source(copy, fmt, log.lines)) == _shape(read_source(copy, fmt))


def test_a_reset_drops_what_was_kept(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n')
    log = LineLog(Tail(path))
    assert log.feed() == (True, False) and len(log.lines) == 2
    path.write_bytes(b'{"b": 1}\n')  # truncated and rewritten
    got, reset = log.feed()
    assert got and reset and log.lines == [b'{"b": 1}\n'] and log.size == 9
    assert log.feed() == (False, False)
