"""The real Codex CLI (pinned in ``tests/agents/package.json``), run headless and offline against the scripted
Responses server of :mod:`tests.agents.scripted`; its rollout is read by :mod:`engine.sources.codex` (and
followed by :class:`engine.sources.follow.Follower`, and imported) and checked against what the server logged
as sent and answered: the ground truth.

What the pinned version does, as these tests pin it down:

- it sends no ``instructions``: the system prompt (``session_meta.base_instructions``) goes as the first
  ``developer`` input item, without the lines about tools it did not send (the ``update_plan`` bullet in
  ``codex exec``): :data:`DROPPED_WITHOUT_UPDATE_PLAN`;
- one ``token_usage_record`` and one ``token_count`` per response, with the same figures;
- a local compaction (``model_auto_compact_token_limit``) is a request without tools whose answer is a
  ``compaction_output`` message, then a ``compacted`` line.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.sources.codex import (
    IGNORED_EVENTS,
    IGNORED_ITEMS,
    IGNORED_RECORDS,
    KNOWN_EVENTS,
    KNOWN_ITEMS,
    KNOWN_TYPES,
    PREFIX_KEY,
    read_codex,
)
from engine.sources.follow import Follower
from engine.sources.model import SourceSession
from tests.agents.conftest import AgentHome, Run, agent_bin, pinned_version, raw_lines
from tests.agents.scripted import Logged, Reply, ResponsesServer, ToolCall, count_tokens

MODEL = "gpt-5.5"
SUMMARY = "SUMMARY: the three commands ran and printed step0, step1 and step2."
# the line of base_instructions Codex leaves out when it sends no update_plan tool (as in ``codex exec``)
COMPACT_LIMIT = 30_000  # model_auto_compact_token_limit: no prompt of these scenarios comes near it
BIG_OUTPUT = 40_000  # output tokens that take a response's total above it
DROPPED_WITHOUT_UPDATE_PLAN = (
    "- If you create a checklist or task list, you update item statuses incrementally as each item is completed "
    "rather than marking every item done only at the end.\n")


def shell_script(commands: int, big_output_at: int = -1) -> Callable[[dict[str, Any]], Reply]:
    """``commands`` shell calls (``exec_command``) in all, then closing texts; a request without tools
    (the summarisation of a compaction) gets :data:`SUMMARY`. The answer to the request ``big_output_at``
    (0-based, among those with tools) claims :data:`BIG_OUTPUT` output tokens, which trips an auto compaction
    at :data:`COMPACT_LIMIT` whatever the length of the paths in the prompt."""
    issued = 0
    requests = 0

    def script(body: dict[str, Any]) -> Reply:
        nonlocal issued
        nonlocal requests
        if not body.get("tools"):
            return Reply(text=SUMMARY)
        requests += 1
        big = BIG_OUTPUT if requests - 1 == big_output_at else None
        if issued < commands:
            issued += 1
            return Reply(tool_calls=[ToolCall("exec_command", {"cmd": f"echo step{issued - 1}"})], output_tokens=big)
        return Reply(text=f"Done: {issued} commands ran.")

    return script


def run_codex(home: AgentHome, server: ResponsesServer, prompt: str, *, resume: bool = False,
              config: str = "") -> Run:
    codex_home = home.home / ".codex"
    codex_home.mkdir(exist_ok=True)
    (codex_home / "config.toml").write_text(
        f'model = "{MODEL}"\nmodel_provider = "local"\n{config}\n'
        f'[model_providers.local]\nname = "local"\nbase_url = "{server.base_url}/v1"\n'
        'wire_api = "responses"\nenv_key = "LOCAL_API_KEY"\n', encoding="utf-8")
    env = home.base_env() | {"CODEX_HOME": str(codex_home), "LOCAL_API_KEY": "sk-test"}
    flags = ["--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
    args = ["exec", "resume", "--last", *flags, prompt] if resume else ["exec", *flags, prompt]
    return home.run(agent_bin("codex"), args, env, timeout=60).check()


def the_rollout(home: AgentHome) -> Path:
    (path,) = sorted((home.home / ".codex" / "sessions").glob("*/*/*/rollout-*.jsonl"))
    return path


def assert_every_type_known(path: Path, src: SourceSession) -> None:
    """Every record, item and event type in the file is one the reader reads or leaves out on purpose
    (a type a new version adds fails here), and the ignored counts are the file's own."""
    ignored: Counter[str] = Counter()
    for obj in raw_lines(path):
        kind, sub = obj["type"], (obj.get("payload") or {}).get("type")
        assert kind in KNOWN_TYPES, f"record type {kind!r} of Codex {pinned_version('codex')} is not known"
        if kind == "event_msg":
            assert sub in KNOWN_EVENTS, f"event type {sub!r} of Codex {pinned_version('codex')} is not known"
            ignored.update([f"event_msg/{sub}"] if sub in IGNORED_EVENTS else [])
        elif kind == "response_item":
            assert sub in KNOWN_ITEMS, f"item type {sub!r} of Codex {pinned_version('codex')} is not known"
            if (obj.get("metadata") or {}).get("compaction_output") is True:
                ignored["response_item/compaction_output"] += 1
            ignored.update([f"response_item/{sub}"] if sub in IGNORED_ITEMS else [])
        ignored.update([kind] if kind in IGNORED_RECORDS else [])
    assert src.skipped == []
    assert src.ignored == dict(ignored)


def assert_calls_are_the_servers(src: SourceSession, answered: list[Logged]) -> None:
    assert len(src.calls) == len(answered)
    for call, entry in zip(src.calls, answered, strict=True):
        usage = entry.usage
        assert call.prompt_tokens == usage["input_tokens"]  # the whole prompt, cached part included
        assert call.cache_read_tokens == usage["input_tokens_details"]["cached_tokens"]
        assert call.completion_tokens == usage["output_tokens"]
        assert call.reasoning_tokens == usage["output_tokens_details"]["reasoning_tokens"]
        assert type(call.cache_write_tokens) is int and call.cache_write_tokens == 0  # the file says 0
        assert call.model == entry.body["model"] == MODEL and call.window
        assert call.prefix_key == PREFIX_KEY
    ids = [c.request_id for c in src.calls]
    assert all(i.startswith("resp_") for i in ids) and len(set(ids)) == len(ids)


def assert_follower_agrees(path: Path, src: SourceSession) -> None:
    events = Follower(path).poll()
    calls = [e.call for e in events if e.kind == "call" and e.call is not None]
    comps = [e.compaction for e in events if e.kind == "compaction" and e.compaction is not None]

    def key(c: Any) -> tuple[Any, ...]:
        return (c.index, c.prompt_tokens, c.cache_read_tokens, c.cache_write_tokens, c.completion_tokens,
                c.window, c.request_id, c.prefix_key, c.model)

    assert [key(c) for c in calls] == [key(c) for c in src.calls]
    assert [(c.tokens_before, c.tokens_after, c.trigger, c.cost and key(c.cost)) for c in comps] == [
        (c.tokens_before, c.tokens_after, c.trigger, c.cost and key(c.cost)) for c in src.compactions]


def sent_system_prompt(entry: Logged) -> str:
    """What the request carried as its system prompt: ``instructions``, else its first developer item."""
    if entry.body.get("instructions"):
        return str(entry.body["instructions"])
    first = (entry.body.get("input") or [{}])[0]
    assert first.get("role") == "developer", first
    return "".join(part.get("text", "") for part in first.get("content") or [])


def assert_system_prompt_is_the_sent_one(src: SourceSession, answered: list[Logged]) -> None:
    prefix = src.prefixes[PREFIX_KEY]
    assert prefix.tools == []  # rollouts do not record the tool definitions
    assert src.system_prompt.startswith(prefix.system)
    for entry in answered:
        sent = sent_system_prompt(entry)
        names = {t.get("name") for t in entry.body.get("tools") or []}
        recorded = prefix.system if "update_plan" in names else prefix.system.replace(DROPPED_WITHOUT_UPDATE_PLAN, "")
        assert sent == recorded
        assert entry.system_tokens == count_tokens((entry.body.get("input") or [{}])[0].get("content"))
    assert DROPPED_WITHOUT_UPDATE_PLAN in prefix.system  # what Codex 0.169 records and does not send


def import_it(path: Path, tmp_path: Path) -> Any:
    from engine.ingest import import_source

    report = import_source(path, session_dir=tmp_path / "imported")
    assert report.format == "codex" and report.skipped == []
    return report


# --------------------------------------------------------------------------- scenarios


def test_three_shell_calls(agent_home: AgentHome, tmp_path: Path) -> None:
    with ResponsesServer(shell_script(3)) as server:
        run_codex(agent_home, server, "Run three commands")
    # no wall-clock bound (a loaded machine took 32 s): a retry shows in the server's calls, a hang as the run's timeout
    answered = server.calls()
    assert [e.kind for e in answered] == ["main"] * 4
    path = the_rollout(agent_home)
    src = read_codex(path)
    assert_every_type_known(path, src)
    assert_calls_are_the_servers(src, answered)
    assert_system_prompt_is_the_sent_one(src, answered)
    assert_follower_agrees(path, src)
    commands = [json.loads(c["function"]["arguments"])["cmd"] for m in src.messages for c in m.get("tool_calls") or []]
    assert commands == ["echo step0", "echo step1", "echo step2"]
    outputs = [m["content"] for m in src.messages if m["role"] == "tool"]
    assert len(outputs) == 3 and all(f"step{i}" in out for i, out in enumerate(outputs))
    assert src.cwd == str(agent_home.work) and src.model == MODEL and not src.compactions
    report = import_it(path, tmp_path)
    assert report.calls == report.reported_calls == 4


def test_a_resumed_session_appends_to_its_rollout(agent_home: AgentHome, tmp_path: Path) -> None:
    with ResponsesServer(shell_script(1)) as server:
        run_codex(agent_home, server, "Run one command")
        run_codex(agent_home, server, "And now say done", resume=True)
    answered = server.calls()
    assert len(answered) == 3  # the command and the closing text, then the resumed turn's answer
    path = the_rollout(agent_home)
    src = read_codex(path)
    assert_every_type_known(path, src)
    assert_calls_are_the_servers(src, answered)
    assert_system_prompt_is_the_sent_one(src, answered)
    assert_follower_agrees(path, src)
    assert [m["content"] for m in src.messages if m["role"] == "user" and m.get("name") != "developer"][-1] == (
        "And now say done")
    import_it(path, tmp_path)


def test_an_auto_compaction(agent_home: AgentHome, tmp_path: Path) -> None:
    with ResponsesServer(shell_script(3, big_output_at=2)) as server:
        run_codex(agent_home, server, "Run three commands", config=f"model_auto_compact_token_limit = {COMPACT_LIMIT}")
    answered = server.calls()
    main = [e for e in answered if e.body.get("tools")]
    (summarise,) = [e for e in answered if not e.body.get("tools")]
    if not main or answered.index(summarise) in (0, len(answered) - 1):
        pytest.fail(f"the compaction did not happen between two calls: {[e.kind for e in answered]}")
    path = the_rollout(agent_home)
    src = read_codex(path)
    assert_every_type_known(path, src)
    assert_calls_are_the_servers(src, main)  # the summarisation is the compaction's cost, not a call
    assert_follower_agrees(path, src)
    (comp,) = src.compactions
    at = answered.index(summarise)
    assert comp.calls_before == at and comp.trigger == "auto"  # inside the turn
    assert comp.tokens_before == main[at - 1].usage["input_tokens"]
    assert comp.tokens_after == main[at].usage["input_tokens"]
    assert comp.cost is not None
    assert (comp.cost.prompt_tokens, comp.cost.cache_read_tokens, comp.cost.completion_tokens) == (
        summarise.usage["input_tokens"], summarise.usage["input_tokens_details"]["cached_tokens"],
        summarise.usage["output_tokens"])
    assert comp.summary.endswith(SUMMARY) and src.live_start == comp.message_index
    assert SUMMARY not in [m.get("content") for m in src.messages[:comp.message_index]]
    report = import_it(path, tmp_path)
    assert len(report.compactions) == 1
