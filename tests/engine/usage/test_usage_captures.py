"""The usage index and the recording proxy's captures: a recorded Claude Code session is counted once — from the
agent's own file — though the scan lists its capture too (the capture holds the same calls)."""

from __future__ import annotations

from pathlib import Path

from engine.capture.files import captures_dir
from engine.sources import discovery
from engine.usage.index import UsageIndex
from tests.engine.sources.test_capture import claude_capture
from tests.engine.usage.test_usage_index import home  # noqa: F401  (the fixture: one Claude Code file, 2 calls)


def test_a_capture_is_listed_but_not_counted_twice(home: Path, tmp_path: Path) -> None:  # noqa: F811
    folder = captures_dir()
    folder.mkdir(parents=True, exist_ok=True)
    claude_capture(folder).rename(folder / "capture-20260301T100000Z-0000abcd.jsonl")
    listed = {e.agent for e in discovery.scan_sources(env={}, home=home, index=tmp_path / "idx.json")}
    assert listed == {"claude-code", "proxy-capture"}
    ix = UsageIndex(tmp_path / "usage")
    report = ix.update(home=home, env={})
    assert (report.files, report.read, report.calls) == (1, 1, 2)  # the Claude Code file alone
    assert ix.totals()["calls"] == 2
    (session,) = ix.query("session")
    assert session["agent"] == "claude-code"
