"""The names and the first-run text the engine gives the window for other agents' sessions."""

from __future__ import annotations

from engine.sources.formats import FORMATS
from engine.workbench.source_views import found_sessions_text


def test_the_found_sessions_line_names_each_agent_largest_first() -> None:
    assert found_sessions_text({}) == found_sessions_text({"codex": 0}) == ""
    assert found_sessions_text({"codex": 1}).startswith("Found 1 Codex session on this machine.")
    text = found_sessions_text({"codex": 3, "gemini-cli": 1, "claude-code": 1_208, "opencode": 3})
    assert text.startswith("Found 1,208 Claude Code sessions, 3 Codex sessions, 3 OpenCode sessions and "
                           "1 Gemini CLI session on this machine.")
    assert "Sources tab" in text


def test_every_agent_the_sources_scan_lists_has_a_display_name() -> None:
    from typing import get_args

    from engine.sources.discovery import Agent

    assert set(get_args(Agent)) <= set(FORMATS)
