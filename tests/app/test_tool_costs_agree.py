"""Issue 29 item 3: the rule "a response's cost split evenly over its tool calls" has one definition
(:func:`engine.usage.tool_costs.response_tools`), so the Usage view's cost per tool and ``ctxbench tools``'s agree.

On every shared session (Claude Code, Codex, OpenHands, SWE-agent): a real usage index is built in a temporary data
dir from the file, and each tool's ``cost_usd_of_calls`` the Usage view is given (:func:`engine.usage.report.
usage_report`) is compared with the ``calls_usd`` of ``ctxbench tools``'s engine function
(:func:`engine.usage.tool_costs.session_tool_costs` over :func:`app.cli_diff.load_session`). The view counts a
session's subagents' calls too (each subagent's file is what ``ctxbench tools`` reports on that file), and lists the
tools whose results are in the session (a tool whose calls got no result recorded is left out of its list).

Before the one definition, the index took a call's tools from its first message only: on the large Codex rollout
(several function calls of one response in several messages) ``apply_patch`` was $2.2841 in the view against
$2.3296 in ``ctxbench tools``, ``exec_command`` $4.9364 against $5.0618.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli_diff import load_session
from engine.sources.detect import detect_format
from engine.sources.discovery import SourceEntry
from engine.sources.readers import read_source
from engine.usage.costs import price_table
from engine.usage.index import UsageIndex
from engine.usage.report import usage_report
from engine.usage.tool_costs import session_tool_costs
from tests.app.test_figures_agree import SESSIONS
from tests.app.test_sources_window import SHARED, _need

CENT = 0.005  # "equal to the cent": closer than half a cent


def _cli_calls_usd(path: Path) -> dict[str, float]:
    """Each tool's ``calls_usd`` as ``ctxbench tools`` computes it for the file at ``path``."""
    history, records, _cost = load_session(path, RuntimeError)
    costs = session_tool_costs(history, records)
    return {} if costs is None else {t.tool: t.calls_usd or 0.0 for t in costs.tools}


def _view_tools(path: Path, data: Path) -> tuple[dict[str, float | None], set[str], dict[str, float | None]]:
    """The Usage view's cost per tool from a real index of ``path`` built in ``data``, the tools with results, and
    ``ctxbench usage --by tool``'s cost per tool (every tool called, with results or not)."""
    src = read_source(path, detect_format(path))
    entry = SourceEntry(agent=src.format, path=str(path), session_id=src.session_id, project="p", started="",
                        last_activity="", calls=0, last_prompt_tokens=None, window=None, percent_full=None)
    ix = UsageIndex(data / "usage", prices=price_table())
    report = ix.update(entries=[entry])
    assert not report.failed and not report.warnings, (report.failed, report.warnings)
    view = usage_report(ix, top_tools=10_000)
    with_results = ix.read(lambda con: {r[0] for r in con.execute(
        "SELECT DISTINCT tool FROM tool_results").fetchall()})
    by_tool = {str(r["tool"]): r["cost_usd_of_calls"] for r in ix.query("tool")}
    return {str(t["tool"]): t["cost_usd_of_calls"] for t in view.tools}, with_results, by_tool


@pytest.mark.parametrize("name", SESSIONS)
def test_the_usage_view_and_ctxbench_tools_split_a_response_s_cost_alike(name: str, tmp_path: Path) -> None:
    path = _need(SHARED / name)
    expected = _cli_calls_usd(path)
    src = read_source(path, detect_format(path))
    for sub in src.subagents:  # the view counts the subagents' calls: ctxbench tools on each subagent's file
        if sub.session is not None and sub.path is not None and sub.session.calls:
            for tool, usd in _cli_calls_usd(sub.path).items():
                expected[tool] = expected.get(tool, 0.0) + usd
    view, with_results, by_tool = _view_tools(path, tmp_path)
    assert set(view) == with_results
    for tool in with_results:
        shown = view[tool] or 0.0
        assert abs(shown - expected.get(tool, 0.0)) < CENT, (name, "Usage view", tool, shown, expected.get(tool))
    for tool in set(by_tool) | set(expected):
        shown = by_tool.get(tool) or 0.0
        assert abs(shown - expected.get(tool, 0.0)) < CENT, (name, "by tool", tool, shown, expected.get(tool))
    assert by_tool or not expected  # figures were compared, not only empty lists


def test_a_response_s_tools_are_all_its_assistant_messages() -> None:
    """The one rule on a hand-made history: a Codex-like response in three messages, a call that kept no message."""
    from engine.usage.tool_costs import response_tools

    def call(name: str) -> dict[str, object]:
        return {"id": name, "type": "function", "function": {"name": name, "arguments": "{}"}}

    messages = [{"role": "user", "content": "go"},
                {"role": "assistant", "content": "thinking"},
                {"role": "assistant", "content": "", "tool_calls": [call("Read"), call("Read")]},
                {"role": "tool", "tool_call_id": "Read", "content": "x"},
                {"role": "assistant", "content": "", "tool_calls": [call("Bash")]},
                {"role": "tool", "tool_call_id": "Bash", "content": "y"},
                {"role": "assistant", "content": "done"}]
    assert response_tools(messages, [1, 6, 99]) == [["Read", "Read", "Bash"], [], []]
    assert response_tools(messages, [4, 1]) == [["Bash"], ["Read", "Read", "Bash"]]  # out of order
