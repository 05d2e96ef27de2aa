"""engine.sources.detect: every real file is recognised; --format names; no known format → one error."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.sources.detect import detect_format, parse_format
from engine.sources.model import FORMATS, SourceError
from tests.conftest import TRAJECTORIES
from tests.engine.sources.conftest import SESSIONS

EXPECTED = {"claude-code": "claude-code", "codex": "codex", "openhands": "openhands", "swe-agent": "swe-agent"}


def _session_files() -> list[Path]:
    return sorted(p for p in SESSIONS.rglob("*") if p.suffix in (".jsonl", ".json", ".traj"))


def test_every_shared_file_is_detected() -> None:
    files = _session_files()
    assert len(files) == 17  # 9 Claude Code (4 of them subagents), 3 Codex, 2 OpenHands, 3 SWE-agent
    for path in files:
        assert detect_format(path) == EXPECTED[path.relative_to(SESSIONS).parts[0]], path
    for path in sorted(TRAJECTORIES.glob("*.traj.json")):
        assert detect_format(path) == "mini-swe-agent"


def test_plain_openai_logs(tmp_path: Path) -> None:
    listed = tmp_path / "chat.json"
    listed.write_text('[{"role": "user", "content": "hi"}]', encoding="utf-8")
    lined = tmp_path / "chat.jsonl"
    lined.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "yo"}\n', encoding="utf-8")
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text('{"messages": [{"role": "user", "content": "hi"}]}', encoding="utf-8")
    assert [detect_format(p) for p in (listed, lined, wrapped)] == ["openai"] * 3


@pytest.mark.parametrize("text", ["", "hello world\n", '{"a": 1}\n{"b": 2}\n', "[1, 2, 3]", "\x00\x01\x02"])
def test_no_known_format_names_every_format_tried(tmp_path: Path, text: str) -> None:
    path = tmp_path / "mystery.log"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SourceError) as err:
        detect_format(path)
    message = str(err.value)
    assert "mystery.log" in message and all(name in message for name in FORMATS)


def test_format_names() -> None:
    assert [parse_format(n) for n in ("claude-code", "Codex", "swe_agent", "mini", "OpenHands")] == [
        "claude-code", "codex", "swe-agent", "mini-swe-agent", "openhands"]
    with pytest.raises(SourceError, match="claude-code, codex"):
        parse_format("gemini")
