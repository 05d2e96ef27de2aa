"""Issue 27 item 3 on the files today's real agents write (tests/agents: pinned npm packages, run headless and
offline against the project's scripted servers): each agent's session — with its compaction where the agent can be
made to compact headless — opened in the real window (offscreen) and through the CLI, and every figure that names
the same fact compared as :mod:`tests.app.test_figures_agree` compares them on the shared sessions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.main_window import MainWindow
from engine.sources.detect import detect_format
from engine.sources.readers import read_source
from tests.agents import test_claude_code as cc
from tests.agents import test_codex as cx
from tests.agents import test_gemini_cli as gm
from tests.agents import test_opencode as oc
from tests.agents import test_pi as pi
from tests.agents.conftest import AgentHome, agent_home
from tests.app.test_figures_agree import (
    _check_basis,
    _check_compactions,
    _check_cost,
    _check_tool_definitions,
    _check_tool_results,
    _cli_tools,
)
from tests.app.test_sources_window import open_source, win

__all__ = ["agent_home", "win"]


def _claude_code(home: AgentHome) -> Path:
    with cc.AnthropicServer(cc.script) as server:
        cc.claude(home, server, "-p", "TOOLS2 FILL the window")  # two tool calls, then an automatic compaction
    return cc.session_file(home)


def _codex(home: AgentHome) -> Path:
    with cx.ResponsesServer(cx.shell_script(3, big_output_at=2)) as server:
        cx.run_codex(home, server, "Run three commands", config=f"model_auto_compact_token_limit = {cx.COMPACT_LIMIT}")
    return cx.the_rollout(home)


def _gemini_cli(home: AgentHome) -> Path:
    with gm.GeminiServer(gm.shell_script(2, big_at=4)) as server:  # the resumed run compresses the chat
        gm.run_gemini(home, server, "Run two commands")
        gm.run_gemini(home, server, "Run two more", resume=True, clock=gm.CLOCK + 20_000)
    return gm.the_session(home)


def _opencode(home: AgentHome) -> Path:
    with oc.ChatServer(oc.shell_script(3, big_at=1)) as server:  # an automatic compaction between two calls
        oc.run_opencode(home, server, "Run three commands")
    return oc.the_db(home)  # its latest session, as Sources opens it


def _pi(home: AgentHome) -> Path:
    with pi.ChatServer(pi.shell_script(2)) as server:
        pi.configure(home, server)
        pi.run_pi(home, "Run two commands")
        pi.run_pi(home, "Run them again", resume=True)
    return pi.the_session(home)


AGENTS: dict[str, tuple[Callable[[AgentHome], Path], int]] = {  # how a session is made, its compactions
    "claude-code": (_claude_code, 1),
    "codex": (_codex, 1),
    "gemini-cli": (_gemini_cli, 1),
    "opencode": (_opencode, 1),
    "pi": (_pi, 0),
}


@pytest.mark.parametrize("agent", list(AGENTS))
def test_every_figure_of_a_fact_is_the_same_in_every_view_for_each_real_agent(
        qtbot: Any, win: MainWindow, agent_home: AgentHome, agent: str) -> None:
    make, compactions = AGENTS[agent]
    path = make(agent_home)
    src = read_source(path, detect_format(path))
    assert src.format == agent and src.calls and len(src.compactions) == compactions
    open_source(qtbot, win, path)
    cli = _cli_tools(path)
    cost = _check_cost(win, path, cli)
    assert cost.total.calls >= len(src.calls)
    _check_tool_results(qtbot, win, cli)
    _check_tool_definitions(win)
    if agent == "claude-code":  # 2.1.332 counts the tokens each compaction dropped: the views' line is not vacuous
        assert all(c.dropped_tokens for c in src.compactions)
    assert _check_compactions(win, compactions) == compactions
    _check_basis(win)
