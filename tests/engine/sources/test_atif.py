"""engine.sources.atif: ATIF trajectories (Harbor's RFC 0001, v1.0 … v1.7) — steps to messages, per-step metrics
to calls, subagents, the differences between versions, and bad input refused with the reason.

The real files are Harbor's own golden trajectories (tests/engine/sources/data/atif/README.md); their figures are
computed here by direct JSON parsing, never through the reader."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from engine.sources.atif import read_atif, read_document
from engine.sources.claude_code import read_claude_code
from engine.sources.codex import read_codex
from engine.sources.detect import detect_format, parse_format
from engine.sources.model import SourceError

DATA = Path(__file__).resolve().parent / "data" / "atif"
SUMMARIZATION = DATA / "terminus-2-summarization" / "trajectory.json"
OPENHANDS = DATA / "openhands-hello-world.trajectory.json"
LINEAR = DATA / "terminus-2-linear" / "trajectory.json"
CONTINUED = DATA / "terminus-2-linear" / "trajectory.cont-1.json"
REAL = sorted(DATA.rglob("*.json"))
HARBOR = DATA / "harbor-0.25.0"  # Harbor 0.25.0's own converters run on the real sessions of ../shared (README.md)


def raw_calls(path: Path) -> list[dict[str, Any]]:
    """The file's agent steps that are calls (not copied from an earlier trajectory), with their metrics, then those
    of the files it continues in (``continued_trajectory_ref``, beside it)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    own = [s.get("metrics") or {} for s in doc["steps"] if s["source"] == "agent" and not s.get("is_copied_context")]
    ref = doc.get("continued_trajectory_ref")
    return own + (raw_calls(path.parent / ref) if ref and (path.parent / ref).is_file() else [])


def test_the_real_trajectories_are_there_and_detected() -> None:
    assert len(REAL) == 11
    assert {json.loads(p.read_text())["schema_version"] for p in REAL} == {"ATIF-v1.5", "ATIF-v1.7"}
    assert {detect_format(p) for p in REAL} == {"atif"}
    assert parse_format("atif") == "atif" and parse_format("harbor") == "atif"


@pytest.mark.parametrize("path", REAL, ids=lambda p: str(p.relative_to(DATA)))
def test_calls_equal_the_files_step_metrics(path: Path) -> None:
    raw = raw_calls(path)
    src = read_atif(path)
    assert len(src.calls) == len(raw) > 0
    assert [c.prompt_tokens for c in src.calls] == [m.get("prompt_tokens") for m in raw]
    assert [c.completion_tokens for c in src.calls] == [m.get("completion_tokens") for m in raw]
    assert [c.cache_read_tokens for c in src.calls] == [m.get("cached_tokens") for m in raw]
    assert [c.cost_usd for c in src.calls] == [m.get("cost_usd") for m in raw]
    extras = [m.get("extra") or {} for m in raw]  # ATIF has no cache-write figure of its own: Harbor's extra
    assert [c.cache_write_tokens for c in src.calls] == [e.get("cache_creation_input_tokens") for e in extras]
    assert [c.reasoning_tokens for c in src.calls] == [e.get("reasoning_output_tokens") for e in extras]
    assert src.agent_cost_usd == pytest.approx(sum(m.get("cost_usd") or 0 for m in raw))
    assert src.skipped == [] and src.format == "atif"


@pytest.mark.parametrize(("atif", "native", "reader"), [
    ("claude-code-tool_heavy", "claude-code/tool_heavy.jsonl", read_claude_code),
    ("codex-019c8bfe", "codex/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl", read_codex),
    ("codex-019c8a70", "codex/rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl", read_codex),
])
def test_harbors_atif_of_a_real_session_has_the_calls_of_the_session_itself(atif: str, native: str,
                                                                             reader: Any) -> None:
    """Harbor's converter wrote these ATIF files from real Claude Code / Codex sessions: read as ATIF, they give the
    calls this project's reader of the agent's own file gives, figure for figure."""
    from tests.engine.sources.conftest import SESSIONS

    ours, theirs = read_atif(HARBOR / f"{atif}.trajectory.json"), reader(SESSIONS / native)
    def figures(src: Any) -> list[tuple[Any, ...]]:
        return [(c.prompt_tokens, c.completion_tokens, c.cache_read_tokens, c.model) for c in src.calls]

    assert figures(ours) == figures(theirs) and len(ours.calls) > 0
    if reader is read_claude_code:  # the cache writes (and their one-hour part) from Harbor's metrics.extra
        assert [(c.cache_write_tokens, c.cache_write_1h_tokens) for c in ours.calls] == [
            (c.cache_write_tokens, c.cache_write_1h_tokens) for c in theirs.calls]
        assert [m["role"] for m in ours.messages] == [m["role"] for m in theirs.messages]
    else:  # Codex: the reasoning tokens (Harbor's reasoning_output_tokens); no cache-write figure in either
        assert [c.reasoning_tokens for c in ours.calls] == [c.reasoning_tokens for c in theirs.calls]
        assert all(c.cache_write_tokens is None for c in ours.calls + theirs.calls)
    assert ours.notes == [] and ours.skipped == []


def test_terminus_2s_summarization_reads_its_three_subagents_and_matches_final_metrics() -> None:
    doc = json.loads(SUMMARIZATION.read_text())
    src = read_atif(SUMMARIZATION)
    assert src.model == "openai/gpt-4o" and src.session_id == doc["session_id"]
    assert [r.path.name if r.path else None for r in src.subagents] == [
        f"trajectory.summarization-1-{k}.json" for k in ("summary", "questions", "answers")]
    assert [[c.prompt_tokens for c in r.session.calls] for r in src.subagents if r.session] == [[500], [100], [700]]
    every = src.calls + [c for r in src.subagents if r.session for c in r.session.calls]
    final = doc["final_metrics"]
    assert sum(c.prompt_tokens or 0 for c in every) == final["total_prompt_tokens"] == 7802
    assert sum(c.completion_tokens or 0 for c in every) == final["total_completion_tokens"]
    assert sum(c.cost_usd or 0 for c in every) == pytest.approx(final["total_cost_usd"])
    assert src.notes == [] and src.aggregate is not None and src.aggregate["total_prompt_tokens"] == 7802
    # the answers subagent: its copied steps are messages of its context, not calls of its own
    answers = src.subagents[2].session
    assert answers is not None and len(answers.calls) == 1 and len(answers.messages) == 9
    # agent steps: assistant text and its tool call; the terminal output (no source_call_id) is the next user turn
    first = src.messages[1]
    assert first["role"] == "assistant" and first["tool_calls"][0]["function"]["name"] == "bash_command"
    assert json.loads(first["tool_calls"][0]["function"]["arguments"])["keystrokes"] == "mkdir test_dir\n"
    assert src.messages[2]["role"] == "user" and "mkdir test_dir" in src.messages[2]["content"]
    assert src.calls[0].message_index == 1 and src.calls[0].request_id == "step-2"


def test_openhands_converted_keeps_the_system_prompt_tools_and_tool_results() -> None:
    doc = json.loads(OPENHANDS.read_text())
    src = read_atif(OPENHANDS)
    assert src.system_prompt == doc["steps"][0]["message"] and len(src.system_prompt) > 10_000
    assert src.tools == doc["agent"]["tool_definitions"] and len(src.tools) == 6
    assert [m["role"] for m in src.messages] == ["user", "user", "user", "assistant", "tool", "assistant"]
    # the two system steps after the user's (OpenHands' recall): sent among the messages, named so
    assert [m.get("name") for m in src.messages[:3]] == [None, "system", "system"]
    assert src.messages[2]["content"] == "Added workspace context" and src.ignored == {}
    assert src.messages[4]["tool_call_id"] == src.messages[3]["tool_calls"][0]["id"] == "call_fake_1"
    prefix = src.prefixes["agent.tool_definitions"]  # the request prefix as recorded: system prompt + tools
    assert prefix.system == src.system_prompt and [t["name"] for t in prefix.tools] == [
        t["function"]["name"] for t in doc["agent"]["tool_definitions"]]
    assert {c.prefix_key for c in src.calls} == {"agent.tool_definitions"}
    assert read_atif(SUMMARIZATION).prefixes == {}  # no tool definitions recorded: inferred at import


def test_a_continued_trajectory_and_missing_subagent_files_are_said(tmp_path: Path) -> None:
    alone = tmp_path / "trajectory.json"  # without the file it continues in
    alone.write_bytes(LINEAR.read_bytes())
    src = read_atif(alone)
    assert [r.problem.split(":")[0] for r in src.subagents] == [
        f"trajectory_path 'trajectory.summarization-1-{k}.json'" for k in ("summary", "questions", "answers")]
    assert all(r.session is None for r in src.subagents)
    assert ("the trajectory continues in trajectory.cont-1.json (continued_trajectory_ref), not read: no such file "
            "beside trajectory.json") in src.notes
    assert len(src.calls) == 3 and not src.compactions and not any(n.startswith("final_metrics") for n in src.notes)
    cont = read_atif(CONTINUED)
    assert len(cont.calls) == 4 and len(cont.messages) == 12  # the copied steps are messages, not calls
    assert any("final_metrics.total_prompt_tokens is 7802" in n for n in cont.notes)  # the whole run's total


def _steps_text(path: Path) -> list[str]:
    return [s["message"] for s in json.loads(path.read_text(encoding="utf-8"))["steps"]]


def test_a_continued_trajectory_is_read_on_as_one_session_after_a_compaction() -> None:
    """Terminus-2's linear history (Harbor's own files): trajectory.json, then trajectory.cont-1.json after the
    hand-over — one session: the first file's messages and calls, a compaction whose context after is the
    continuation's copied steps, then its own; the calls numbered on; the last file's final_metrics (the whole run's)
    checked."""
    first, cont = read_document(json.loads(LINEAR.read_text()), LINEAR), read_atif(CONTINUED)
    src = read_atif(LINEAR)
    n = len(first.messages)
    assert [c.prompt_tokens for c in src.calls] == [682, 750, 820, 1700, 850, 850, 850]
    assert [c.index for c in src.calls] == list(range(7))
    assert [m["content"] for m in src.messages] == [m["content"] for m in first.messages + cont.messages]
    assert len({m["id"] for m in src.messages}) == len(src.messages)
    for call in src.calls:  # each call still points at the assistant message its step made
        assert src.messages[call.message_index]["role"] == "assistant"
    assert [src.messages[c.message_index]["content"] for c in src.calls[3:]] == [
        cont.messages[c.message_index]["content"] for c in cont.calls]
    [comp] = src.compactions
    copied = sum(1 for s in json.loads(CONTINUED.read_text())["steps"] if s.get("is_copied_context"))
    assert (comp.message_index, comp.calls_before, comp.messages_after) == (n, 3, copied)
    assert (comp.tokens_before, comp.tokens_after, comp.trigger_source) == (820, 1700, "continued_trajectory_ref")
    steps = _steps_text(CONTINUED)  # the summary: what the copied steps hold that the first file did not (hand-over)
    assert comp.summary.startswith("You are picking up work from a previous AI agent") and steps[0] not in comp.summary
    assert all(text in comp.summary for text in steps[1:copied])
    assert src.live_start == n and src.lines == first.lines + cont.lines
    assert src.agent_cost_usd == pytest.approx(first.agent_cost_usd + cont.agent_cost_usd)
    assert src.aggregate == {k: v for k, v in json.loads(CONTINUED.read_text())["final_metrics"].items()}
    assert not any("continued_trajectory_ref" in note for note in src.notes)
    # the whole run's 7802 against both files' steps (its summarization subagents' files are not here: said)
    assert "final_metrics.total_prompt_tokens is 7802; the steps (and subagents) read sum 6502" in src.notes
    assert sum(1 for note in src.notes if note.startswith("final_metrics.total_prompt_tokens")) == 1


def _linear_copy(tmp_path: Path, cont: dict[str, Any] | bytes) -> Path:
    (tmp_path / "trajectory.json").write_bytes(LINEAR.read_bytes())
    data = cont if isinstance(cont, bytes) else json.dumps(cont).encode()
    (tmp_path / "trajectory.cont-1.json").write_bytes(data)
    return tmp_path / "trajectory.json"


def test_continuations_in_a_chain_a_loop_and_a_bad_one(tmp_path: Path) -> None:
    doc = json.loads(CONTINUED.read_text())
    chain = tmp_path / "chain"
    chain.mkdir()
    path = _linear_copy(chain, {**doc, "continued_trajectory_ref": "trajectory.cont-2.json"})
    (chain / "trajectory.cont-2.json").write_text(json.dumps(doc))
    src = read_atif(path)
    assert len(src.calls) == 3 + 4 + 4 and len(src.compactions) == 2
    assert [c.calls_before for c in src.compactions] == [3, 7] and src.live_start == src.compactions[1].message_index
    loop = tmp_path / "loop"
    loop.mkdir()
    src = read_atif(_linear_copy(loop, {**doc, "continued_trajectory_ref": "trajectory.json"}))
    assert len(src.calls) == 7 and ("the trajectory continues in trajectory.json (continued_trajectory_ref), not read: "
                                    "a file this trajectory already read (a loop)") in src.notes
    bad = tmp_path / "bad"
    bad.mkdir()
    src = read_atif(_linear_copy(bad, b"{ not json"))
    assert len(src.calls) == 3 and not src.compactions
    assert any(n.startswith("the trajectory continues in trajectory.cont-1.json (continued_trajectory_ref), cannot "
                            "be read: trajectory.cont-1.json: not valid JSON") for n in src.notes)
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    src = read_atif(_linear_copy(wrong, {**doc, "steps": [{"step_id": 1, "source": "agent"}]}))
    assert len(src.calls) == 3 and any("cannot be read" in n and "message" in n for n in src.notes)
    assert not any(n.startswith("final_metrics") for n in src.notes)  # the first file's own totals, which agree
    # a chain whose second continuation is bad: the first two files joined, checked against the second's totals
    (chain / "trajectory.cont-2.json").write_text(json.dumps({**doc, "final_metrics": {"total_prompt_tokens": 1}}))
    (chain / "trajectory.cont-1.json").write_text(json.dumps({**doc, "continued_trajectory_ref": "cont-3.json"}))
    (chain / "cont-3.json").write_text(json.dumps({**doc, "steps": [{"step_id": 1, "source": "agent"}],
                                                   "final_metrics": {"total_prompt_tokens": 1}}))  # read, refused
    src = read_atif(path)
    assert len(src.calls) == 7 and src.aggregate == doc["final_metrics"]
    assert "final_metrics.total_prompt_tokens is 7802; the steps (and subagents) read sum 6502" in src.notes
    assert any(n.startswith("the trajectory continues in cont-3.json (continued_trajectory_ref), cannot be read")
               for n in src.notes)


def test_a_last_continuation_without_final_metrics_leaves_the_whole_runs_total_unknown(tmp_path: Path) -> None:
    doc = json.loads(CONTINUED.read_text())
    del doc["final_metrics"]
    src = read_atif(_linear_copy(tmp_path, doc))
    assert len(src.calls) == 7 and src.aggregate is None
    assert not any(n.startswith("final_metrics") for n in src.notes)  # (not the first file's 2252 against all 7)


def test_a_continuation_s_subagents_keep_their_links(tmp_path: Path) -> None:
    """Two files each naming a subagent of the same id: the continuation's is renamed, its message follows."""
    sub = doc_of("ATIF-v1.5", [user(1), agent(2, metrics={"prompt_tokens": 10})])
    ref = {"session_id": "helper", "trajectory_path": "helper.json"}
    (tmp_path / "helper.json").write_text(json.dumps(sub))
    steps = [user(1), agent(2, metrics={"prompt_tokens": 100}, observation={"results": [
        {"content": "done", "subagent_trajectory_ref": [ref]}]})]
    (tmp_path / "trajectory.json").write_text(json.dumps(doc_of("ATIF-v1.5", steps,
                                                                continued_trajectory_ref="cont.json")))
    (tmp_path / "cont.json").write_text(json.dumps(doc_of("ATIF-v1.5", steps)))
    src = read_atif(tmp_path / "trajectory.json")
    assert [r.id for r in src.subagents] == ["helper", "helper-2"]
    assert [m["subagent"]["id"] for m in src.messages if "subagent" in m] == ["helper", "helper-2"]
    assert all(r.session is not None and len(r.session.calls) == 1 for r in src.subagents)


# --------------------------------------------------------------------------- per version (shortened real steps)


def doc_of(version: str, steps: list[dict[str, Any]], **root: Any) -> dict[str, Any]:
    return {"schema_version": version, "session_id": "s1", "agent": {"name": "terminus-2", "version": "2.0.0",
            "model_name": "openai/gpt-4o"}, "steps": steps, **root}


def user(n: int, text: str = "Create hello.txt") -> dict[str, Any]:
    return {"step_id": n, "source": "user", "message": text}


def agent(n: int, **fields: Any) -> dict[str, Any]:
    return {"step_id": n, "source": "agent", "message": fields.pop("message", "ok"), **fields}


def read_doc(tmp_path: Path, doc: dict[str, Any], name: str = "trajectory.json") -> Any:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return read_atif(path)


@pytest.mark.parametrize(("version", "prompt", "noted"), [("ATIF-v1.0", 700, True), ("ATIF-v1.1", 700, True),
                                                          ("ATIF-v1.2", 200, False), ("ATIF-v1.7", 200, False)])
def test_before_v1_2_cached_tokens_above_the_prompt_are_apart_from_it(tmp_path: Path, version: str, prompt: int,
                                                                      noted: bool) -> None:
    src = read_doc(tmp_path, doc_of(version, [user(1), agent(2, metrics={"prompt_tokens": 200, "cached_tokens": 500,
                                                                       "completion_tokens": 9})]))
    assert src.calls[0].prompt_tokens == prompt and src.calls[0].cache_read_tokens == 500
    assert any("before v1.2" in n for n in src.notes) is noted


def test_v1_1_root_extra_and_v1_2_system_observations(tmp_path: Path) -> None:
    steps = [user(1), agent(2, metrics={"prompt_tokens": 50}),
             {"step_id": 3, "source": "system", "message": "Environment reset",
              "observation": {"results": [{"content": "the workspace was restored to its checkpoint"}]}}]
    src = read_doc(tmp_path, doc_of("ATIF-v1.2", steps, extra={"harness": "x"}))
    assert [m["role"] for m in src.messages] == ["user", "assistant", "user"]
    assert src.messages[-1]["content"] == "the workspace was restored to its checkpoint"


def test_v1_3_and_v1_4_token_ids_count_where_the_figure_is_missing(tmp_path: Path) -> None:
    steps = [user(1), agent(2, metrics={"completion_token_ids": [5, 6, 7]}),
             agent(3, metrics={"prompt_token_ids": list(range(40)), "completion_tokens": 2}),
             agent(4, metrics={"prompt_tokens": 12, "prompt_token_ids": [1, 2]})]
    src = read_doc(tmp_path, doc_of("ATIF-v1.4", steps))
    assert [(c.prompt_tokens, c.completion_tokens) for c in src.calls] == [(None, 3), (40, 2), (12, None)]


def test_v1_5_tool_definitions_and_copied_context(tmp_path: Path) -> None:
    tools = json.loads(OPENHANDS.read_text())["agent"]["tool_definitions"][:2]
    doc = doc_of("ATIF-v1.5", [user(1), agent(2, is_copied_context=True, metrics={"prompt_tokens": 9}),
                               agent(3, metrics={"prompt_tokens": 30})])
    doc["agent"]["tool_definitions"] = tools
    src = read_doc(tmp_path, doc)
    assert src.tools == tools and [c.prompt_tokens for c in src.calls] == [30]
    assert len(src.messages) == 3 and src.calls[0].message_index == 2


def test_v1_6_content_parts_in_messages_and_results(tmp_path: Path) -> None:
    parts = [{"type": "text", "text": "What is in this image?"},
             {"type": "image", "source": {"media_type": "image/png", "path": "images/step_1_input.png"}}]
    steps = [{"step_id": 1, "source": "user", "message": parts},
             agent(2, tool_calls=[{"tool_call_id": "c1", "function_name": "screenshot", "arguments": {}}],
                   observation={"results": [{"source_call_id": "c1", "content": [
                       {"type": "image", "source": {"media_type": "image/jpeg", "path": "images/s.jpg"}}]}]},
                   metrics={"prompt_tokens": 80})]
    src = read_doc(tmp_path, doc_of("ATIF-v1.6", steps))
    assert src.messages[0]["content"] == "What is in this image?\n[image: images/step_1_input.png (image/png)]"
    assert src.messages[2] == {**src.messages[2], "role": "tool", "tool_call_id": "c1",
                               "content": "[image: images/s.jpg (image/jpeg)]"}


def test_v1_7_embedded_subagents_by_trajectory_id(tmp_path: Path) -> None:
    child = doc_of("ATIF-v1.7", [user(1, "find the file"), agent(2, metrics={"prompt_tokens": 300, "cost_usd": 0.01})],
                   trajectory_id="search-1")
    del child["session_id"]  # v1.7: optional (an embedded subagent inherits the run's)
    steps = [user(1), agent(2, tool_calls=[{"tool_call_id": "t1", "function_name": "delegate", "arguments": {},
                                            "extra": {"timeout": 30}}],
                            observation={"results": [{"source_call_id": "t1", "content": "found it",
                                                      "subagent_trajectory_ref": [{"trajectory_id": "search-1"}],
                                                      "extra": {"score": 0.9}}]},
                            metrics={"prompt_tokens": 100, "cost_usd": 0.002})]
    src = read_doc(tmp_path, doc_of("ATIF-v1.7", steps, trajectory_id="root", subagent_trajectories=[child]))
    ref = src.subagents[0]
    assert ref.id == "search-1" and ref.parent_tool_call_id == "t1" and ref.problem == ""
    assert ref.session is not None and [c.prompt_tokens for c in ref.session.calls] == [300]
    assert src.messages[2]["subagent"] == {"id": "search-1"} and src.messages[2]["role"] == "tool"


def test_v1_6_refs_by_session_id_only_cannot_be_resolved(tmp_path: Path) -> None:
    steps = [user(1), agent(2, observation={"results": [{"subagent_trajectory_ref": [{"session_id": "sub-9"}]}]})]
    src = read_doc(tmp_path, doc_of("ATIF-v1.6", steps))
    assert src.subagents[0].session is None and "session_id only" in src.subagents[0].problem
    missing = read_doc(tmp_path, doc_of("ATIF-v1.7", [user(1), agent(2, observation={"results": [
        {"subagent_trajectory_ref": [{"trajectory_id": "nowhere"}]}]})]), "b.json")
    assert "not among the embedded subagent_trajectories" in missing.subagents[0].problem


def test_v1_7_llm_call_count(tmp_path: Path) -> None:
    steps = [user(1), agent(2, llm_call_count=0, tool_calls=[{"tool_call_id": "d", "function_name": "run",
                                                               "arguments": {}}]),
             agent(3, llm_call_count=3, metrics={"prompt_tokens": 3000, "completion_tokens": 90, "cost_usd": 0.3}),
             agent(4, llm_call_count=1, metrics={"prompt_tokens": 1200})]
    src = read_doc(tmp_path, doc_of("ATIF-v1.7", steps))
    assert [(c.prompt_tokens, c.completion_tokens, c.cost_usd) for c in src.calls] == [
        (None, 90, 0.3), (1200, None, None)]
    assert any("sum 3 LLM calls" in n for n in src.notes) and sum(src.ignored.values()) == 1


def test_v1_7_context_management_replace_is_a_compaction(tmp_path: Path) -> None:
    steps = [user(1), agent(2, metrics={"prompt_tokens": 9000}),
             {"step_id": 3, "source": "system", "message": "Context compaction performed",
              "observation": {"results": [{"content": "Summary: the user wants hello.txt"}]},
              "extra": {"context_management": {"type": "compaction", "boundary": "replace"}}},
             user(4, "go on"), agent(5, metrics={"prompt_tokens": 800})]
    src = read_doc(tmp_path, doc_of("ATIF-v1.7", steps))
    comp = src.compactions[0]
    assert (comp.summary, comp.tokens_before, comp.tokens_after, comp.trigger_source) == (
        "Summary: the user wants hello.txt", 9000, 800, "compaction")
    assert src.live_start == comp.message_index == 2 and [m["content"] for m in src.messages[2:3]] == ["go on"]


def test_required_fields_the_reader_does_without_are_said(tmp_path: Path) -> None:
    doc = doc_of("ATIF-v1.6", [user(1), agent(3, metrics={"prompt_tokens": 5})])
    del doc["session_id"], doc["agent"]["version"]
    src = read_doc(tmp_path, doc)
    assert len(src.calls) == 1 and src.notes == [
        "agent.version is missing (ATIF requires it): read without it",
        "session_id is missing (required before ATIF-v1.7; this file is v1.6)",
        "step_id of steps[1] is 3, not 2 (ATIF numbers the steps 1, 2, 3 …): read in file order"]
    doc["schema_version"] = "ATIF-v1.7"  # v1.7 relaxed session_id to optional
    doc["agent"]["version"] = "1"
    doc["steps"][1]["step_id"] = 2
    assert read_doc(tmp_path, doc, "b.json").notes == []


def test_v1_8_audio_parts(tmp_path: Path) -> None:
    parts = [{"type": "text", "text": "Transcribe this"},
             {"type": "audio", "source": {"media_type": "audio/wav", "path": "audio/q.wav", "duration_sec": 12.5}}]
    src = read_doc(tmp_path, doc_of("ATIF-v1.8", [{"step_id": 1, "source": "user", "message": parts},
                                                  agent(2, metrics={"prompt_tokens": 400})]))
    assert src.messages[0]["content"] == "Transcribe this\n[audio: audio/q.wav (audio/wav, 12.5 s)]"
    assert src.notes == []


def test_a_later_minor_version_is_read_with_a_notice(tmp_path: Path) -> None:
    src = read_doc(tmp_path, doc_of("ATIF-v1.9", [user(1), agent(2, metrics={"prompt_tokens": 5})]))
    assert len(src.calls) == 1
    assert any("ATIF-v1.9 is newer than the versions this reader knows" in n and "read as ATIF-v1.8" in n
               for n in src.notes)


# --------------------------------------------------------------------------- bad input


def _steps() -> list[dict[str, Any]]:
    return [user(1), agent(2, tool_calls=[{"tool_call_id": "c", "function_name": "f", "arguments": {}}])]


@pytest.mark.parametrize(("change", "needle"), [
    (lambda d: d.update(schema_version="ATIF-v2.0"), "ATIF-v2.0 is a major version this reader does not know"),
    (lambda d: d.update(schema_version="v1.5"), 'schema_version "v1.5" is not an ATIF version'),
    (lambda d: d.pop("agent"), 'no "agent" object'),
    (lambda d: d["agent"].pop("name"), "agent.name is missing"),
    (lambda d: d.pop("steps"), 'no "steps" array'),
    (lambda d: d.update(steps=[]), '"steps" is empty'),
    (lambda d: d["steps"][0].pop("source"), "steps[0] (step_id 1): source null is none of system, user, agent"),
    (lambda d: d["steps"][1].pop("message"), "steps[1] (step_id 2): no message"),
    (lambda d: d["steps"][1]["tool_calls"][0].pop("function_name"), "tool_calls[0] lacks tool_call_id or"),
    (lambda d: d["steps"][1].update(observation={"content": "x"}), 'observation without a "results" array'),
    (lambda d: d["steps"].__setitem__(0, 7), "steps[0]: not an object (7)"),
])
def test_missing_required_fields_are_named(tmp_path: Path, change: Any, needle: str) -> None:
    doc = doc_of("ATIF-v1.5", _steps())
    change(doc)
    with pytest.raises(SourceError) as err:
        read_doc(tmp_path, copy.deepcopy(doc))
    assert needle in str(err.value) and str(err.value).startswith("trajectory.json")


def test_not_json_or_not_an_object(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"schema_version": "ATIF-v1.5", "steps": [')
    with pytest.raises(SourceError, match=r"a\.json: not valid JSON"):
        read_atif(tmp_path / "a.json")
    (tmp_path / "c.json").write_bytes(b'{"schema_version": "ATIF-v1.5", "x": "\xff"}')
    with pytest.raises(SourceError, match=r"c\.json: not valid JSON \('utf-8' codec can't decode"):
        read_atif(tmp_path / "c.json")
    tab = json.dumps(doc_of("ATIF-v1.5", [user(1, "a\u0001b"), agent(2)])).replace("\\u0001", "\u0001")
    (tmp_path / "d.json").write_text("\ufeff" + tab)  # a BOM, and a raw control character inside a string
    assert read_atif(tmp_path / "d.json").messages[0]["content"] == "a\u0001b"
    (tmp_path / "b.json").write_text("[1, 2]")
    with pytest.raises(SourceError, match="an ATIF trajectory is a JSON object, not a list"):
        read_atif(tmp_path / "b.json")


def test_a_subagent_file_that_is_bad_is_said_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "sub.json").write_text(json.dumps({"schema_version": "ATIF-v1.5", "steps": []}))
    steps = [user(1), agent(2, observation={"results": [{"subagent_trajectory_ref": [
        {"session_id": "s", "trajectory_path": "sub.json"}, {"session_id": "s", "trajectory_path": "s3://b/t.json"}]}]})]
    src = read_doc(tmp_path, doc_of("ATIF-v1.5", steps))
    assert [r.id for r in src.subagents] == ["s", "s-2"]  # unique folder names
    assert 'cannot be read: sub.json (subagent): no "agent" object' in src.subagents[0].problem
    assert "is not a local file" in src.subagents[1].problem


WRONG = [None, 7, -1, "x", [], {}, [1, "a", None], {"type": 5}, True, 1e308, float("nan")]
ROOT_FIELDS = ["session_id", "trajectory_id", "final_metrics", "continued_trajectory_ref", "subagent_trajectories",
               "extra", "notes"]
STEP_FIELDS = ["timestamp", "model_name", "message", "reasoning_content", "tool_calls", "observation", "metrics",
               "extra", "is_copied_context", "llm_call_count", "step_id"]
METRIC_FIELDS = ["prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "prompt_token_ids", "extra"]


@pytest.mark.parametrize("wrong", WRONG, ids=repr)
def test_a_field_of_the_wrong_type_is_read_as_absent_or_refused_never_a_crash(tmp_path: Path, wrong: Any) -> None:
    base = json.loads(OPENHANDS.read_text())
    variants: list[dict[str, Any]] = []
    for key in [*ROOT_FIELDS, "agent"]:
        variants.append({**copy.deepcopy(base), key: wrong})
    for key in ("model_name", "tool_definitions", "name"):
        doc = copy.deepcopy(base)
        doc["agent"][key] = wrong
        variants.append(doc)
    for key in STEP_FIELDS:
        doc = copy.deepcopy(base)
        doc["steps"][4][key] = wrong
        variants.append(doc)
    for key in METRIC_FIELDS:
        doc = copy.deepcopy(base)
        doc["steps"][4]["metrics"][key] = wrong
        variants.append(doc)
    for key in ("arguments", "extra"):
        doc = copy.deepcopy(base)
        doc["steps"][4]["tool_calls"][0][key] = wrong
        variants.append(doc)
    for key in ("source_call_id", "content", "subagent_trajectory_ref", "extra"):
        doc = copy.deepcopy(base)
        doc["steps"][4]["observation"]["results"][0][key] = wrong
        variants.append(doc)
    for n, doc in enumerate(variants):
        path = tmp_path / f"v{n}.json"
        path.write_text(json.dumps(doc))
        try:
            src = read_atif(path)
        except SourceError as exc:
            assert str(exc).startswith(path.name)
            continue
        assert all(c.prompt_tokens is None or isinstance(c.prompt_tokens, int) for c in src.calls)
        assert all(c.cost_usd is None or c.cost_usd == c.cost_usd for c in src.calls)  # never NaN
