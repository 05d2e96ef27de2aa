"""engine.agent: the loop, driven through the real litellm HTTP path against the scripted fake server.

The model is ``tests/fakeserver.py`` on 127.0.0.1 (streamed SSE); the session, the tools, the offload
files and the compaction are real, on disk under ``tmp_path``.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from engine.agent import (
    INTERRUPTED_RESULT,
    Agent,
    AgentBusyError,
    context_snapshot,
    default_system_prompt,
    unanswered_calls,
)
from engine.context.conversation import Session
from engine.context.request import MISSING_RESULT, build_request, wire_history
from engine.llm.client import LLMConfig
from engine.model import messages as m
from engine.model.events import (
    CompactionEvent,
    CompactionStarted,
    ContextUpdated,
    ErrorEvent,
    Event,
    MessageAdded,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
)
from engine.store.config import Settings
from engine.tools.registry import ToolBox
from tests import fakeserver as fs
from tests.conftest import SUMMARY

pytestmark = pytest.mark.usefixtures("fast_retries")


class Rig:
    """A session folder, a workspace, an agent on the fake server, and the events it emitted."""

    def __init__(
        self, tmp_path: Path, server: fs.FakeLLMServer, *, approve: Any = None, **settings: Any
    ) -> None:
        settings.setdefault("context_window", 100_000)
        settings.setdefault("max_tokens", 256)
        self.settings = Settings().replace(**settings)
        self.workspace = tmp_path / "ws"
        self.workspace.mkdir(exist_ok=True)
        self.session_dir = tmp_path / "session"
        exists = self.session_dir.exists()
        self.session = Session.load(self.session_dir) if exists else Session.create(self.session_dir, "t")
        self.server = server
        self.events: list[Event] = []
        self.config = LLMConfig(
            model="openai/fake-model",
            api_base=server.base_url,
            api_key="sk-test",
            max_tokens=256,
            max_retries=2,
        )
        self.toolbox = ToolBox(
            self.workspace,
            self.session_dir,
            allow_write=self.settings.allow_write,
            allow_shell=self.settings.allow_shell,
            approve=approve,
        )
        self.agent = Agent(
            self.session, self.settings, llm_config=self.config, toolbox=self.toolbox, emit=self.events.append
        )

    def of(self, kind: type[Event]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    def types(self, skip: tuple[str, ...] = ("text_delta", "state")) -> list[str]:
        return [e.type for e in self.events if e.type not in skip]

    def roles(self) -> list[str]:
        return [x["role"] for x in self.session.messages]

    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.server.requests if r.body is not None]

    async def wait_for(self, pred: Any, timeout: float = 10.0) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while not pred():
            if loop.time() > end:
                raise AssertionError(f"timed out; events: {self.types(skip=())}")
            await asyncio.sleep(0.01)


def assert_wire_valid(messages: list[dict[str, Any]]) -> None:
    """What providers demand: each assistant's tool calls answered right after it; no stray result."""
    pending: list[str] = []
    for msg in messages:
        if msg["role"] == "tool":
            assert msg["tool_call_id"] in pending, f"tool result without its call: {msg}"
            pending.remove(msg["tool_call_id"])
            continue
        assert not pending, f"tool calls without results before {msg['role']}: {pending}"
        if msg["role"] == "assistant":
            pending = [c["id"] for c in msg.get("tool_calls") or []]
    assert not pending, f"tool calls without results at the end: {pending}"


def fill(session: Session, turns: int, chars: int) -> None:
    for i in range(turns):
        session.extend([m.user(f"question {i} " + "q" * chars), m.assistant(f"answer {i} " + "a" * chars)])


# --------------------------------------------------------------------------- the request (pure)


def test_build_request_puts_system_prompt_and_summary_first() -> None:
    history = [
        m.user("hi"),
        m.assistant(None, [m.tool_call("c1", "list_dir", "{}")]),
        m.tool_result("c1", "a.txt", name="list_dir"),
        m.assistant("done"),
    ]
    req = build_request("SYSTEM TEXT", "## Goal\nx", history, archive_days=["2026-01-02"])
    assert req[0]["role"] == "system"
    assert req[0]["content"].startswith("SYSTEM TEXT")
    assert "## Goal" in req[0]["content"] and "dialog/2026-01-02.jsonl" in req[0]["content"]
    assert [x["role"] for x in req] == ["system", "user", "assistant", "tool", "assistant"]
    assert all("id" not in x and "ts" not in x for x in req)
    assert build_request("", "", [m.user("x")]) == [{"role": "user", "content": "x"}]
    assert build_request("S", "", [])[0] == {"role": "system", "content": "S"}


def test_wire_history_fills_missing_results_and_moves_stray_ones() -> None:
    history = [
        m.tool_result("ghost", "output nobody asked for"),
        m.user("go"),
        m.assistant(None, [m.tool_call("a", "list_dir", "{}"), m.tool_call("b", "read_file", "{}")]),
        m.tool_result("zzz", "stray result"),
        m.tool_result("b", "B result"),
        m.user("next"),
        m.assistant("", None),
    ]
    wire = wire_history(history)
    assert_wire_valid(wire)
    roles = [x["role"] for x in wire]
    assert roles == ["user", "user", "assistant", "tool", "tool", "user", "user", "assistant"]
    assert wire[3] == {"role": "tool", "content": "B result", "tool_call_id": "b"}
    assert wire[4]["tool_call_id"] == "a" and wire[4]["content"] == MISSING_RESULT
    assert "stray result" in wire[5]["content"] and "output nobody asked for" in wire[0]["content"]
    assert wire[-1]["content"] == ""


def test_unanswered_calls_looks_at_the_last_assistant_message() -> None:
    call_a, call_b = m.tool_call("a", "list_dir", "{}"), m.tool_call("b", "list_dir", "{}")
    assert unanswered_calls([]) == []
    assert unanswered_calls([m.user("x"), m.assistant(None, [call_a, call_b])]) == [call_a, call_b]
    assert unanswered_calls([m.assistant(None, [call_a, call_b]), m.tool_result("b", "ok")]) == [call_a]
    assert unanswered_calls([m.assistant(None, [call_a]), m.tool_result("a", "ok"), m.user("y")]) == []
    assert unanswered_calls([m.assistant("plain")]) == []


def test_default_system_prompt_teaches_the_read_more_hints() -> None:
    text = default_system_prompt()
    assert "start_line=<N>" in text and "tool_results/" in text and "dialog/" in text


# --------------------------------------------------------------------------- the loop


@pytest.mark.asyncio
async def test_tool_loop_runs_until_a_final_answer(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    rig = Rig(tmp_path, server)
    (rig.workspace / "notes.txt").write_text("alpha line\nbeta line\n", encoding="utf-8")
    server.queue(
        fs.tool_call_reply("read_file", {"path": "notes.txt"}, call_id="call_1"),
        fs.tool_call_reply("search_text", {"pattern": "beta"}, call_id="call_2", preface="Searching. "),
        fs.text_reply("The notes mention alpha and beta."),
    )
    done = await rig.agent.run_turn("What do the notes say?")

    assert done.ok and done.iterations == 3 and done.final_text == "The notes mention alpha and beta."
    assert rig.types() == [
        "message",  # user
        "context", "message", "tool_call_started", "message", "tool_call_finished",
        "context", "message", "tool_call_started", "message", "tool_call_finished",
        "context", "message",
        "turn_finished",
    ]
    assert rig.roles() == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    started = rig.of(ToolCallStarted)
    assert [(s.call_id, s.name) for s in started] == [("call_1", "read_file"), ("call_2", "search_text")]
    finished = rig.of(ToolCallFinished)
    assert all(f.ok and f.offload_path is None for f in finished)
    assert "alpha line" in rig.session.messages[2]["content"]
    assert "notes.txt:2: beta line" in rig.session.messages[4]["content"]
    deltas = "".join(e.text for e in rig.of(TextDelta))
    assert "Searching. " in deltas and "The notes mention" in deltas
    assert {e.message_id for e in rig.of(TextDelta)} <= {x["id"] for x in rig.session.messages}

    bodies = rig.bodies()
    assert len(bodies) == 3
    for body in bodies:
        assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
        assert [t["function"]["name"] for t in body["tools"]] == ["read_file", "list_dir", "search_text"]
        assert body["messages"][0]["role"] == "system"
        assert_wire_valid(body["messages"])
    assert "alpha line" in json.dumps(bodies[1]["messages"])

    # one snapshot per call, with the provider's prompt tokens beside the estimate
    snaps = [e.snapshot for e in rig.of(ContextUpdated)]
    assert [s.call_index for s in snaps] == [0, 1, 2]
    for snap, body in zip(snaps, bodies, strict=True):
        assert snap.provider_prompt_tokens == fs.prompt_chars(body) // 4
        assert snap.raw_prompt_tokens > 0
        assert sum(snap.regions().values()) == snap.window
    # each snapshot is what was predicted before the call: raw for the first, then calibrated on
    # the earlier reports — never on the call's own report, so the recorded error is real
    assert snaps[0].accuracy == "estimated" and snaps[0].prompt == snaps[0].raw_prompt_tokens
    for snap in snaps[1:]:
        assert snap.accuracy == "calibrated"
        assert abs(snap.prompt - snap.provider_prompt_tokens) / snap.provider_prompt_tokens < 0.1
    stored = rig.session.snapshots()
    assert [s.provider_prompt_tokens for s in stored] == [s.provider_prompt_tokens for s in snaps]
    # the history on disk is what the events said
    reloaded = Session.load(rig.session_dir)
    assert [x["id"] for x in reloaded.messages] == [e.message["id"] for e in rig.of(MessageAdded)]
    assert reloaded.messages[1]["usage"]["prompt_tokens"] == snaps[0].provider_prompt_tokens


@pytest.mark.asyncio
async def test_big_tool_result_is_offloaded_and_the_hint_can_be_followed(
    tmp_path: Path, server: fs.FakeLLMServer
) -> None:
    rig = Rig(tmp_path, server, offload_recent_bytes=2_000)
    lines = [f"line {i:04d} " + "x" * 30 for i in range(1, 501)]
    (rig.workspace / "big.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    server.queue(
        fs.tool_call_reply("read_file", {"path": "big.txt", "max_lines": 500}, call_id="call_big"),
        fs.text_reply("It is long."),
    )
    assert (await rig.agent.run_turn("Read big.txt")).ok

    fin = rig.of(ToolCallFinished)[0]
    assert fin.offload_path is not None and fin.offload_path.startswith("tool_results/")
    assert fin.result_bytes > 15_000
    full = (rig.session_dir / fin.offload_path).read_text(encoding="utf-8")
    assert "line 0500" in full
    cut = rig.session.messages[2]
    assert cut["offload"]["path"] == fin.offload_path
    assert len(cut["content"].encode()) < 3_000
    history_bytes = (rig.session_dir / "history.jsonl").read_text(encoding="utf-8")
    assert "line 0400" not in history_bytes  # cut before it was first written
    assert fin.offload_path in json.dumps(rig.bodies()[1]["messages"])

    # the model follows the read-more hint in the next turn
    hint = re.search(r"start_line=(\d+)", cut["content"])
    assert hint is not None
    start = int(hint.group(1))
    server.queue(
        fs.tool_call_reply("read_file", {"path": fin.offload_path, "start_line": start, "max_lines": 3},
                           call_id="call_more"),
        fs.text_reply("Read on."),
    )
    assert (await rig.agent.run_turn("Continue reading")).ok
    more = rig.session.messages[-2]
    assert more["role"] == "tool" and more["tool_call_id"] == "call_more"
    assert lines[start - 1] in more["content"]  # the tool's own numbered output
    assert "error" not in more["content"].split("\n", 1)[0]


@pytest.mark.asyncio
async def test_proactive_compaction_before_a_call_that_would_overflow(
    tmp_path: Path, server: fs.FakeLLMServer
) -> None:
    rig = Rig(tmp_path, server, context_window=6_000)
    fill(rig.session, 6, 2_000)
    before = len(rig.session.messages)
    server.queue(
        fs.text_reply(SUMMARY, when={"tools": False}), fs.text_reply("Answer.", when={"tools": True})
    )
    done = await rig.agent.run_turn("And now?")
    if rig.agent.auto_task is not None:
        await rig.agent.auto_task
    assert done.ok
    started = rig.of(CompactionStarted)
    compactions = rig.of(CompactionEvent)
    assert [s.trigger for s in started][:1] == ["proactive"]
    assert compactions[0].trigger == "proactive" and compactions[0].result == "summarized"
    assert compactions[0].tokens_after < compactions[0].tokens_before
    assert compactions[0].messages_compacted > 0
    assert rig.types().index("compaction") < rig.types().index("context")
    main = [b for b in rig.bodies() if b.get("tools")]
    assert len(main) == 1
    assert "Summary of the earlier conversation" in main[0]["messages"][0]["content"]
    assert "## Critical Context" in main[0]["messages"][0]["content"]
    assert len(rig.session.messages) < before + 2
    assert rig.session.archive_days()  # what left the context is in dialog/
    assert rig.session.compaction_events()[0].trigger == "proactive"
    snap = rig.of(ContextUpdated)[0].snapshot
    assert snap.used <= snap.window


@pytest.mark.asyncio
async def test_proactive_compaction_keeps_the_question_being_asked(
    tmp_path: Path, server: fs.FakeLLMServer
) -> None:
    # the new question alone is larger than the reserve (10% of the window): it must still be sent
    rig = Rig(tmp_path, server, context_window=6_000)
    fill(rig.session, 6, 2_000)
    question = "Please explain the failing separability test in detail. " * 55
    server.queue(
        fs.text_reply(SUMMARY, when={"tools": False}), fs.text_reply("Answer.", when={"tools": True})
    )
    done = await rig.agent.run_turn(question)
    assert done.ok
    main = [b for b in rig.bodies() if b.get("tools")]
    assert len(main) == 1
    sent = main[0]["messages"]
    assert [m["role"] for m in sent][:2] == ["system", "user"]
    assert sent[1]["content"] == question
    assert_wire_valid(sent)


@pytest.mark.asyncio
async def test_reactive_compaction_after_a_context_window_error_then_retry(
    tmp_path: Path, server: fs.FakeLLMServer
) -> None:
    rig = Rig(tmp_path, server)
    fill(rig.session, 3, 100)
    server.queue(fs.context_length_exceeded(), fs.text_reply("Fits now."))
    done = await rig.agent.run_turn("Go on")
    assert done.ok and done.final_text == "Fits now."
    comp = rig.of(CompactionEvent)
    assert [(c.trigger, c.result) for c in comp] == [("reactive", "dropped")]
    assert comp[0].messages_compacted > 0
    first, second = rig.bodies()
    assert len(second["messages"]) < len(first["messages"])
    assert "Emergency compression" in second["messages"][0]["content"]
    assert rig.session.messages[-2]["content"] == "Go on"  # the current question survives
    assert not [e for e in rig.of(ErrorEvent) if not e.retrying]


@pytest.mark.asyncio
async def test_reactive_path_gives_up_cleanly_when_nothing_can_be_dropped(
    tmp_path: Path, server: fs.FakeLLMServer
) -> None:
    rig = Rig(tmp_path, server)
    server.default = fs.context_length_exceeded()
    done = await rig.agent.run_turn("x" * 200)
    assert not done.ok and not done.interrupted
    errors = rig.of(ErrorEvent)
    assert errors and errors[-1].kind == "context_window"
    assert "nothing is left to compact" in errors[-1].message
    assert [c.result for c in rig.of(CompactionEvent)] == ["failed"]
    assert len(server.requests) == 1
    assert rig.roles() == ["user"]
    assert rig.types()[-1] == "turn_finished"


@pytest.mark.asyncio
async def test_reactive_retries_are_bounded(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    rig = Rig(tmp_path, server)
    fill(rig.session, 8, 50)
    server.default = fs.context_length_exceeded()
    done = await rig.agent.run_turn("again")
    assert not done.ok
    assert len(server.requests) == 3  # the call and two retries
    assert [c.trigger for c in rig.of(CompactionEvent)] == ["reactive", "reactive"]
    assert "still too long after 2 emergency compactions" in rig.of(ErrorEvent)[-1].message


@pytest.mark.asyncio
async def test_iterations_per_turn_are_bounded(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    rig = Rig(tmp_path, server, max_iterations=3)
    server.default = fs.tool_call_reply("list_dir", {}, call_id="call_loop")
    done = await rig.agent.run_turn("Loop forever")
    assert not done.ok and done.iterations == 3
    assert len(server.requests) == 3
    err = rig.of(ErrorEvent)[-1]
    assert err.kind == "max_iterations" and "max_iterations = 3" in err.message
    assert rig.roles() == ["user"] + ["assistant", "tool"] * 3
    assert_wire_valid(build_request("", "", rig.session.messages))


@pytest.mark.asyncio
async def test_auth_error_ends_the_turn_without_retry(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    rig = Rig(tmp_path, server)
    server.queue(fs.unauthorized(), fs.text_reply("never sent"))
    done = await rig.agent.run_turn("hello")
    assert not done.ok
    err = rig.of(ErrorEvent)
    assert len(err) == 1 and err[0].kind == "auth" and "API key" in err[0].message
    assert "sk-test" not in err[0].message
    assert len(server.requests) == 1 and server.pending == 1
    assert rig.roles() == ["user"]


@pytest.mark.asyncio
async def test_transient_error_is_retried_and_reported(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    rig = Rig(tmp_path, server)
    server.queue(fs.server_error(), fs.text_reply("Recovered."))
    done = await rig.agent.run_turn("hello")
    assert done.ok and done.final_text == "Recovered."
    retry = rig.of(ErrorEvent)
    assert len(retry) == 1 and retry[0].retrying and retry[0].kind == "transient" and retry[0].attempt == 1
    assert len(rig.of(ContextUpdated)) == 1


@pytest.mark.asyncio
async def test_auto_compaction_runs_after_the_turn(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    rig = Rig(tmp_path, server, context_window=12_000, compact_threshold_ratio=0.5)
    fill(rig.session, 5, 2_000)  # about 8,000 tokens: over the threshold, under the window
    server.queue(
        fs.text_reply("Short answer.", when={"tools": True}), fs.text_reply(SUMMARY, when={"tools": False})
    )
    done = await rig.agent.run_turn("Summarize later")
    assert done.ok and not rig.of(CompactionEvent)  # nothing before the call
    assert rig.agent.auto_task is not None
    event = await rig.agent.auto_task
    assert isinstance(event, CompactionEvent) and event.trigger == "auto" and event.result == "summarized"
    assert rig.types()[-3:] == ["turn_finished", "compaction_started", "compaction"]
    assert rig.session.summary.startswith("## Goal")
    assert rig.session.messages[-1]["content"] == "Short answer."


@pytest.mark.asyncio
async def test_a_crash_left_tool_call_is_answered_before_the_next_turn(
    tmp_path: Path, server: fs.FakeLLMServer
) -> None:
    session = Session.create(tmp_path / "session", "t")
    session.extend([m.user("first"), m.assistant(None, [m.tool_call("c_crash", "list_dir", "{}")])])
    session.close()
    rig = Rig(tmp_path, server)
    server.queue(fs.text_reply("ok"))
    assert (await rig.agent.run_turn("second")).ok
    assert rig.roles() == ["user", "assistant", "tool", "user", "assistant"]
    repaired = rig.session.messages[2]
    assert repaired["tool_call_id"] == "c_crash" and repaired["interrupted"] is True
    assert repaired["content"] == INTERRUPTED_RESULT
    assert_wire_valid(rig.bodies()[0]["messages"])


@pytest.mark.asyncio
async def test_one_turn_at_a_time(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    rig = Rig(tmp_path, server)
    server.queue(fs.stream(fs.text("slow"), hang_after=1))
    task = asyncio.create_task(rig.agent.run_turn("one"))
    await rig.wait_for(lambda: rig.of(TextDelta))
    with pytest.raises(AgentBusyError):
        await rig.agent.run_turn("two")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# --------------------------------------------------------------------------- cancellation


@pytest.mark.asyncio
async def test_cancel_mid_stream_keeps_the_partial_text(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    rig = Rig(tmp_path, server)
    server.queue(fs.stream(fs.text("Partial "), fs.text("answer"), hang_after=2))
    task = asyncio.create_task(rig.agent.run_turn("Tell me"))
    await rig.wait_for(lambda: "answer" in "".join(e.text for e in rig.of(TextDelta)))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert server.client_disconnected.wait(5)  # the stream was closed
    last = rig.events[-1]
    assert isinstance(last, TurnFinished) and last.interrupted and not last.ok
    assert rig.roles() == ["user", "assistant"]
    partial = rig.session.messages[1]
    assert partial["content"] == "Partial answer" and partial["interrupted"] is True
    assert partial["id"] == rig.of(TextDelta)[0].message_id
    assert Session.load(rig.session_dir).messages[1]["interrupted"] is True  # durable

    server.queue(fs.text_reply("Fine."))
    assert (await rig.agent.run_turn("Continue")).ok
    sent = rig.bodies()[-1]["messages"]
    assert_wire_valid(sent)
    assert [x["role"] for x in sent] == ["system", "user", "assistant", "user"]
    assert sent[2]["content"] == "Partial answer"


@pytest.mark.asyncio
async def test_cancel_after_a_streamed_tool_call_gives_it_a_result(
    tmp_path: Path, server: fs.FakeLLMServer
) -> None:
    rig = Rig(tmp_path, server)
    server.queue(
        fs.stream(
            fs.tool_call_delta(0, id="call_9", name="list_dir", arguments='{"path": "."}'),
            fs.text("thinking"),
            hang_after=2,
        )
    )
    task = asyncio.create_task(rig.agent.run_turn("List"))
    await rig.wait_for(lambda: rig.of(TextDelta))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert rig.roles() == ["user", "assistant", "tool"]
    call_msg, result = rig.session.messages[1], rig.session.messages[2]
    assert call_msg["interrupted"] is True and call_msg["tool_calls"][0]["id"] == "call_9"
    assert result["tool_call_id"] == "call_9" and "interrupted" in result["content"]
    assert not rig.of(ToolCallStarted)  # it never ran
    assert_wire_valid(build_request("", "", Session.load(rig.session_dir).messages))


@pytest.mark.asyncio
async def test_cancel_while_a_tool_runs(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    async def yes(name: str, args: dict[str, Any]) -> bool:
        return True

    rig = Rig(tmp_path, server, allow_shell=True, approve=yes)
    server.queue(
        fs.stream(
            fs.tool_call_delta(0, id="c_ls", name="list_dir", arguments="{}"),
            fs.tool_call_delta(1, id="c_sleep", name="run_shell", arguments='{"command": "sleep 30"}'),
            fs.tool_call_delta(2, id="c_never", name="list_dir", arguments="{}"),
            finish_reason="tool_calls",
        )
    )
    task = asyncio.create_task(rig.agent.run_turn("Sleep"))
    await rig.wait_for(lambda: len(rig.of(ToolCallStarted)) == 2)
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    assert rig.roles() == ["user", "assistant", "tool", "tool", "tool"]
    results = {x["tool_call_id"]: x for x in rig.session.messages[2:]}
    assert "(0 entries)" in results["c_ls"]["content"] or "entries" in results["c_ls"]["content"]
    assert results["c_sleep"]["content"] == INTERRUPTED_RESULT and results["c_sleep"]["interrupted"]
    assert results["c_never"]["content"] == INTERRUPTED_RESULT
    assert [f.call_id for f in rig.of(ToolCallFinished)] == ["c_ls"]
    assert_wire_valid(build_request("", "", rig.session.messages))


@pytest.mark.asyncio
async def test_connection_lost_mid_stream_keeps_the_partial_and_ends_the_turn(
    tmp_path: Path, server: fs.FakeLLMServer
) -> None:
    rig = Rig(tmp_path, server)
    server.queue(fs.stream(fs.text("half an "), fs.text("answer"), delay=0.05, reset_after=2))
    done = await rig.agent.run_turn("Talk")
    assert not done.ok
    assert rig.of(ErrorEvent)[-1].kind in ("transient", "other")
    assert len(server.requests) == 1  # never retried once text had streamed
    assert rig.roles() == ["user", "assistant"]
    kept = rig.session.messages[1]
    assert kept["interrupted"] is True and kept["content"].startswith("half an")


# --------------------------------------------------------------------------- snapshots


@pytest.mark.asyncio
async def test_snapshot_matches_what_inspect_computes_from_disk(
    tmp_path: Path, server: fs.FakeLLMServer
) -> None:
    rig = Rig(tmp_path, server, context_window=50_000)
    server.queue(fs.text_reply("Hi there."))
    await rig.agent.run_turn("Hello")
    live = rig.agent.snapshot(draft="a draft message")
    assert live.draft > 0 and sum(live.regions().values()) + live.draft == live.window
    rig.session.close()
    reopened = Session.load(rig.session_dir)
    at_rest = context_snapshot(reopened, Settings())  # no override: the stored window is used
    assert at_rest.window == 50_000 and at_rest.reserve == 256
    assert at_rest.regions() == rig.agent.snapshot().regions()
    assert at_rest.accuracy == "calibrated"
    assert reopened.meta["model"] == "openai/fake-model"
    assert [t["function"]["name"] for t in reopened.meta["tools"]] == ["read_file", "list_dir", "search_text"]


# --------------------------------------------------------------------------- approval


@pytest.mark.asyncio
async def test_write_needs_approval_and_a_refusal_is_a_tool_result(
    tmp_path: Path, server: fs.FakeLLMServer
) -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    async def decide(name: str, args: dict[str, Any]) -> bool:
        asked.append((name, args))
        return args["path"] == "ok.txt"

    rig = Rig(tmp_path, server, allow_write=True)
    rig.agent = Agent(
        rig.session,
        rig.settings,
        llm_config=rig.config,
        toolbox=rig.toolbox,
        emit=rig.events.append,
        approve=decide,
    )
    server.queue(
        fs.tool_call_reply("write_file", {"path": "no.txt", "content": "x"}, call_id="w1"),
        fs.tool_call_reply("write_file", {"path": "ok.txt", "content": "yes"}, call_id="w2"),
        fs.text_reply("Wrote one file."),
    )
    done = await rig.agent.run_turn("Write two files")
    assert done.ok
    assert [a[1]["path"] for a in asked] == ["no.txt", "ok.txt"]
    assert not (rig.workspace / "no.txt").exists()
    assert (rig.workspace / "ok.txt").read_text(encoding="utf-8") == "yes"
    fin = rig.of(ToolCallFinished)
    assert [f.ok for f in fin] == [False, True]
    refused = rig.session.messages[2]
    assert refused["tool_error"] is True and "did not approve" in refused["content"]
    assert "write_file" in [t["function"]["name"] for t in rig.bodies()[0]["tools"]]


# --------------------------------------------------------------------------- empty streams (issue 10.1)


@pytest.mark.asyncio
async def test_an_empty_stream_is_explained_by_one_unstreamed_request(
    tmp_path: Path, server: fs.FakeLLMServer
) -> None:
    """llama.cpp's server closes an overflowing streamed request with HTTP 200 and no chunk; the
    same request unstreamed gets the real 400, and the reactive path compacts and retries."""
    rig = Rig(tmp_path, server)
    fill(rig.session, 3, 100)
    server.queue(fs.empty_stream(), fs.context_length_exceeded(), fs.text_reply("Fits now."))
    done = await rig.agent.run_turn("Go on")
    assert done.ok and done.final_text == "Fits now."
    streamed = [b.get("stream") is True for b in rig.bodies()]
    assert streamed == [True, False, True]  # the probe is the same request, unstreamed
    assert rig.bodies()[1]["messages"] == rig.bodies()[0]["messages"]
    assert [(c.trigger, c.result) for c in rig.of(CompactionEvent)] == [("reactive", "dropped")]
    answers = [x for x in rig.session.messages if x["role"] == "assistant"]
    assert all(m.content_text(x.get("content")).strip() for x in answers)
    assert rig.session.messages[-1]["content"] == "Fits now."


@pytest.mark.asyncio
async def test_a_stream_overflow_like_llama_cpp_server_takes_the_reactive_path(
    tmp_path: Path, server: fs.FakeLLMServer
) -> None:
    server.max_prompt_chars = 6_000  # the first turn fits, the third does not
    server.stream_overflow = "empty"
    server.default = fs.text_reply("Short answer.")
    rig = Rig(tmp_path, server)  # the window it is told (100,000) is far above the server's
    for i in range(4):
        done = await rig.agent.run_turn(f"turn {i}: " + " ".join(str(n) for n in range(250)))
        assert done.ok and done.final_text == "Short answer.", rig.types(skip=())
    stored = [x for x in rig.session.messages if x["role"] == "assistant"]
    assert stored and all(x["content"] == "Short answer." for x in stored)  # older ones were archived
    assert {c.trigger for c in rig.of(CompactionEvent)} == {"reactive"}


@pytest.mark.asyncio
async def test_an_empty_probe_ends_the_turn_with_an_error_and_stores_nothing(
    tmp_path: Path, server: fs.FakeLLMServer
) -> None:
    rig = Rig(tmp_path, server)
    server.queue(fs.empty_stream(), fs.empty_stream())
    done = await rig.agent.run_turn("hello")
    assert not done.ok and not done.interrupted and done.final_text == ""
    errors = [e for e in rig.of(ErrorEvent) if not e.retrying]
    assert len(errors) == 1 and errors[0].kind == "empty_response"
    assert "ended the stream without an answer (no text, no tool call, no usage report)" in errors[0].message
    assert "unstreamed returned no answer either" in errors[0].message
    assert rig.roles() == ["user"]
    assert len(server.requests) == 2


@pytest.mark.asyncio
async def test_a_probe_that_answers_is_the_answer(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    rig = Rig(tmp_path, server)
    server.queue(fs.empty_stream(), fs.text_reply("From the retry."))
    done = await rig.agent.run_turn("hello")
    assert done.ok and done.final_text == "From the retry."
    assert "".join(e.text for e in rig.of(TextDelta)) == "From the retry."  # the chat shows it
    assert rig.roles() == ["user", "assistant"]
    assert len(rig.of(ContextUpdated)) == 1
    assert rig.of(ContextUpdated)[0].snapshot.provider_prompt_tokens is not None


@pytest.mark.asyncio
async def test_a_finished_answer_with_no_text_is_not_stored(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    rig = Rig(tmp_path, server)
    server.queue(fs.stream(fs.reasoning("thinking..."), finish_reason="stop"))
    done = await rig.agent.run_turn("hello")
    assert not done.ok
    err = [e for e in rig.of(ErrorEvent) if not e.retrying]
    assert len(err) == 1 and err[0].kind == "empty_response"
    assert "empty answer (only 11 characters of reasoning), finish reason stop" in err[0].message
    assert rig.roles() == ["user"]
    assert len(server.requests) == 1  # a finish reason came: the stream was not dropped
