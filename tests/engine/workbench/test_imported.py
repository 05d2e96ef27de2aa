"""engine.workbench.imported: what an imported Claude Code 2.1.3xx file says of the agent itself — the
system prompt and tool definitions grouped as ``/context`` groups them, the agent's own cost — as plain
data on the SessionView; a followed view sends ImportChanged when its cost grows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.context.tokens import HeuristicEstimator
from engine.workbench import events as ev
from engine.workbench.imported import FROM_FILE, INFERRED, ImportFacts, group_tools, import_facts
from engine.workbench.source_views import view_title
from tests.engine.workbench import claude_file as cf
from tests.engine.workbench.test_workbench import Rig, rig, server, settings  # noqa: F401  (fixtures)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cf.import_session(tmp_path_factory.mktemp("imported"))


def test_the_facts_of_an_imported_file(folder: Path) -> None:
    meta = json.loads((folder / "session.json").read_text(encoding="utf-8"))
    facts = import_facts(meta)
    assert isinstance(facts, ImportFacts)
    assert facts.agent == "claude-code" and facts.prefix_source == FROM_FILE
    assert facts.prefix_label == "from the file (as sent)"
    assert facts.system_prompt_tokens == meta["import"]["system_prompt_tokens"] > 0
    # built-in tools first, then each MCP server by its total, largest first
    assert [g.server for g in facts.groups] == ["", "github", "slack"]
    assert [g.label for g in facts.groups] == ["Built-in tools", "MCP server github", "MCP server slack"]
    assert [t.name for t in facts.groups[0].tools] == ["Bash", "Read"]
    assert [t.name for t in facts.groups[1].tools] == ["mcp__github__create_issue", "mcp__github__list_prs"]
    defs = meta["import"]["tool_definitions"]
    assert facts.tool_tokens == sum(d["tokens"] for d in defs)
    assert facts.groups[1].tokens == sum(d["tokens"] for d in defs if d["server"] == "github")
    assert sorted(t.name for t in facts.tools) == sorted(d["name"] for d in defs)
    assert facts.agent_cost_usd == pytest.approx(cf.TOTAL_USD)
    assert facts.agent_cost_by_model == {cf.MODEL: pytest.approx(cf.TOTAL_USD)}
    assert facts.inferred_prefix_tokens is None and facts.has_prefix


@pytest.mark.asyncio
async def test_the_view_carries_them_and_a_followed_file_sends_the_new_cost(
        rig: Rig, tmp_path: Path) -> None:  # noqa: F811
    records = cf.lines()
    cut = len(records) - 1  # the last cost-state line comes later
    path = tmp_path / "live.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records[:cut]), encoding="utf-8")
    await rig.wb.open_source(path)
    view = rig.of(ev.SessionLoaded)[-1].view
    assert view.read_only and view.imported is not None
    assert view.imported.agent_cost_usd == pytest.approx(cf.AFTER_USD)
    assert [g.server for g in view.imported.groups] == ["", "github", "slack"]
    assert [m["attachment"] for m in view.messages if m.get("attachment")] == ["skill_listing", "date"]
    assert all(m["sent_as"] == "system" for m in view.messages if m.get("attachment"))
    assert [m["content"] for m in view.messages if m.get("preserved")] == ["All 12 tests pass."]
    (comp,) = view.compactions
    assert comp.post_tokens == cf.POST_TOKENS and comp.cost_usd == pytest.approx(cf.COMPACT_USD)
    assert comp.messages_kept == 1 and comp.placed_by == "chain"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in records[cut:]))
    await rig.until(lambda: bool(rig.of(ev.ImportChanged)), timeout=10)
    (changed,) = rig.of(ev.ImportChanged)
    assert changed.facts is not None and changed.facts.agent_cost_usd == pytest.approx(cf.TOTAL_USD)
    assert changed.payload() == (changed.facts,)
    assert len(rig.of(ev.SessionLoaded)) == 1, "a cost line appended: no whole reload"


def test_a_session_that_was_not_imported_has_none() -> None:
    assert import_facts({}) is None
    assert import_facts({"import": "garbage"}) is None


def test_an_inferred_prefix_and_bad_figures() -> None:
    facts = import_facts({"import": {"format": "claude-code", "prefix_source": INFERRED,
                                     "inferred_prefix": {"tokens": 14_000, "label": "x", "region": "system"},
                                     "system_prompt_tokens": None, "tool_definitions": [],
                                     "agent_cost_usd": None, "agent_cost_by_model": {"m": "free"},
                                     "ignored": {"mode": 2, "bad": "x"}}})
    assert facts is not None
    assert facts.prefix_label.startswith("inferred")
    assert facts.inferred_prefix_tokens == 14_000 and facts.groups == () and facts.has_prefix
    assert facts.agent_cost_usd is None and facts.agent_cost_by_model == {} and facts.ignored == {"mode": 2}
    old = import_facts({"import": {"format": "codex"}})  # an import made before these figures existed
    assert old is not None and not old.has_prefix and old.prefix_label == "" and old.agent_cost_usd is None


def test_grouping_ties_and_junk() -> None:
    groups = group_tools([{"name": "b", "tokens": 5, "server": ""}, {"name": "a", "tokens": 5, "server": ""},
                          {"name": "mcp__z__x", "tokens": 1, "server": "z"},
                          {"name": "mcp__y__x", "tokens": 1, "server": "y"}, "junk", {"tokens": True}])
    assert [g.server for g in groups] == ["", "y", "z"]
    assert [t.name for t in groups[0].tools] == ["a", "b", "?"]  # ties by name; a nameless one is "?"
    assert group_tools(None) == ()


def test_the_title_of_a_view_is_a_persons_prompt_not_an_attachment() -> None:
    msgs = [{"role": "user", "content": "Skills: a, b, c", "attachment": "skill_listing", "sent_as": "system"},
            {"role": "user", "content": "Fix the bug"}]
    assert view_title(msgs, "fallback") == "Fix the bug"


def test_the_next_request_of_a_file_with_its_prefix_draws_that_prefix(folder: Path) -> None:
    from engine.agent import context_snapshot, imported_prefix_tokens
    from engine.context.conversation import Session
    from engine.store.config import Settings

    meta = json.loads((folder / "session.json").read_text(encoding="utf-8"))["import"]
    tools = sum(d["tokens"] for d in meta["tool_definitions"])
    session = Session.load(folder)
    try:
        assert imported_prefix_tokens(session) == (meta["system_prompt_tokens"], tools)
        snap = context_snapshot(session, Settings())
        # the system prompt and the tool definitions as sent, not this app's own (nor one inferred block)
        assert (snap.system, snap.tools) == (meta["system_prompt_tokens"], tools)
    finally:
        session.close()


def test_tool_definitions_have_one_size_in_the_legend_the_tooltip_and_the_tools_tab(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27: the next request's *Tool definitions* (the chart's legend), each call's region (its tooltip) and
    the Tools tab's list are one figure: the sum of each definition's tokens (it was 7,240 vs 7,244: the list
    counted whole in the calls' records, each one apart in the legend)."""
    from engine.agent import imported_prefix_tokens
    from engine.context.conversation import Session

    tools = [{**t, "description": t["description"] + "x" * i} for i, t in enumerate(cf.TOOLS)]
    monkeypatch.setattr(cf, "TOOLS", tools)
    folder = cf.import_session(tmp_path)
    meta = json.loads((folder / "session.json").read_text(encoding="utf-8"))["import"]
    listed = sum(d["tokens"] for d in meta["tool_definitions"])
    assert HeuristicEstimator().tools(tools) != listed  # the two ways of summing differ here: the test can fail
    records = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    calls = [r for r in records if r["type"] == "context" and r.get("prefix_source") == "file"]
    assert calls and all(r["tools"] == listed for r in calls)
    session = Session.load(folder)
    try:
        assert imported_prefix_tokens(session) == (meta["system_prompt_tokens"], listed)
    finally:
        session.close()
    facts = import_facts({"import": meta})
    assert facts is not None and facts.tool_tokens == listed
