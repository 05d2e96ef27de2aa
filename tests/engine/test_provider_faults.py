"""Provider faults through the agent (issue 7, item 3): real HTTP against ``tests/fakeserver.py``.

Timeouts (before the first chunk and mid-stream), 429 with Retry-After (seconds, HTTP date,
``retry-after-ms``, capped), 5xx, connection resets before and during a stream (text and tool
calls), malformed SSE, a refused connection, and faults during the compaction summary call.

What each test checks: retries are bounded (and only happen while nothing has streamed); the events
tell the UI what is going on (``ErrorEvent`` with ``retrying`` and the delay, one final error,
``StateChanged`` back to idle, one ``TurnFinished``); no message is stored or announced twice;
the history stays valid for the next request, and the next turn works.
"""

from __future__ import annotations

import asyncio
import email.utils
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from engine.agent import Agent, unanswered_calls
from engine.context.conversation import Session
from engine.context.request import build_request
from engine.llm import client as llm
from engine.llm.client import LLMConfig
from engine.model import messages as m
from engine.model.events import (
    CompactionEvent,
    ErrorEvent,
    Event,
    MessageAdded,
    StateChanged,
    TextDelta,
    TurnFinished,
)
from engine.store import archive
from engine.store.config import Settings
from engine.tools.registry import ToolBox
from tests import fakeserver as fs
from tests.conftest import SUMMARY

pytestmark = [
    pytest.mark.filterwarnings("ignore:Accessing the .model_:DeprecationWarning"),
    pytest.mark.usefixtures("fast_retries"),
]

class Rig:
    def __init__(self, tmp_path: Path, api_base: str, *, timeout: float = 10.0, max_retries: int = 2,
                 **settings: Any) -> None:
        settings.setdefault("context_window", 100_000)
        settings.setdefault("max_tokens", 256)
        self.settings = Settings().replace(**settings)
        (tmp_path / "ws").mkdir(exist_ok=True)
        folder = tmp_path / "session"
        self.session = Session.load(folder) if folder.exists() else Session.create(folder, "faults")
        self.events: list[Event] = []
        self.config = LLMConfig(model="openai/fake", api_base=api_base, api_key="sk-faults-0000",
                                max_tokens=256, timeout=timeout, max_retries=max_retries)
        toolbox = ToolBox(tmp_path / "ws", folder)
        self.agent = Agent(self.session, self.settings, llm_config=self.config, toolbox=toolbox,
                           emit=self.events.append)

    async def turn(self, text: str = "hello") -> TurnFinished:
        return await self.agent.run_turn(text)

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    def final_errors(self) -> list[ErrorEvent]:
        return [e for e in self.of(ErrorEvent) if not e.retrying]

    def retries(self) -> list[ErrorEvent]:
        return [e for e in self.of(ErrorEvent) if e.retrying]

    def roles(self) -> list[str]:
        return [x["role"] for x in self.session.messages]

    def check(self) -> None:
        """No duplicates in the history or in the events; valid for the wire; disk = memory; idle."""
        ids = [x["id"] for x in self.session.messages]
        assert len(ids) == len(set(ids)), "a message is stored twice"
        added = [e.message["id"] for e in self.of(MessageAdded)]
        assert len(added) == len(set(added)), "a message was announced twice"
        archived = {x["id"] for d in archive.list_days(self.session.path)
                    for x in archive.read_day(self.session.path, d)}
        assert set(added) <= set(ids) | archived, "an announced message is nowhere"
        assert unanswered_calls(self.session.messages) == []
        pending: list[str] = []
        for msg in build_request("", "", self.session.messages):
            if msg["role"] == "tool":
                assert msg["tool_call_id"] in pending
                pending.remove(msg["tool_call_id"])
            else:
                assert not pending
                pending = [c["id"] for c in msg.get("tool_calls") or []]
        assert not pending
        again = Session.load(self.session.path)
        assert again.load_report.clean and [x["id"] for x in again.messages] == ids
        states = [e.state for e in self.of(StateChanged)]
        assert states and states[-1] == "idle"
        assert len(self.of(TurnFinished)) == len({id(e) for e in self.of(TurnFinished)})


# --------------------------------------------------------------------------- timeouts


@pytest.mark.asyncio
async def test_timeout_before_the_first_chunk_is_retried_then_reported(tmp_path: Path,
                                                                       server: fs.FakeLLMServer) -> None:
    rig = Rig(tmp_path, server.base_url, timeout=0.4, max_retries=1)
    server.queue(fs.stream(fs.text("never"), hang_after=0), fs.stream(fs.text("never"), hang_after=0),
                 fs.text_reply("not asked"))
    await llm.ready()  # litellm's import (seconds on a busy machine) is not part of the timeout
    t0 = time.monotonic()
    done = await rig.turn()
    assert time.monotonic() - t0 < 8
    assert not done.ok and len(server.requests) == 2 and server.pending == 1  # 1 try + 1 retry
    (retry,) = rig.retries()
    assert retry.kind == "transient" and retry.attempt == 1 and "timed out" in retry.message
    assert "retrying in" in retry.message
    (final,) = rig.final_errors()
    assert final.kind == "transient" and "timed out" in final.message and final.attempt == 2
    assert rig.roles() == ["user"] and rig.of(TextDelta) == []
    rig.check()


@pytest.mark.asyncio
async def test_timeout_mid_stream_keeps_the_partial_and_does_not_retry(tmp_path: Path,
                                                                       server: fs.FakeLLMServer) -> None:
    rig = Rig(tmp_path, server.base_url, timeout=0.5)
    server.queue(fs.stream(fs.text("Half "), fs.text("an answer"), fs.text(" lost"), hang_after=2),
                 fs.text_reply("must not be asked"))
    done = await rig.turn()
    assert not done.ok and len(server.requests) == 1 and rig.retries() == []
    (final,) = rig.final_errors()
    assert final.kind == "transient" and "timed out" in final.message
    assert rig.roles() == ["user", "assistant"]
    partial = rig.session.messages[-1]
    assert partial["content"] == "Half an answer" and partial["interrupted"] is True
    assert {d.message_id for d in rig.of(TextDelta)} == {partial["id"]}
    rig.check()
    # the next turn sends the partial once, and works
    done = await rig.turn("go on")
    assert done.ok and rig.roles() == ["user", "assistant", "user", "assistant"]
    sent = server.requests[-1].body
    assert sent is not None and [x["content"] for x in sent["messages"][1:]] == [
        "hello", "Half an answer", "go on"]
    rig.check()


# --------------------------------------------------------------------------- 429


@pytest.mark.asyncio
async def test_429_retry_after_seconds_is_waited_for(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    rig = Rig(tmp_path, server.base_url)
    server.queue(fs.rate_limited(retry_after=1), fs.text_reply("After the wait."))
    t0 = time.monotonic()
    done = await rig.turn()
    assert done.ok and done.final_text == "After the wait." and time.monotonic() - t0 >= 1.0
    (retry,) = rig.retries()
    assert retry.kind == "transient" and "rate limited" in retry.message
    assert "retrying in 1.0 s" in retry.message
    assert rig.final_errors() == [] and rig.roles() == ["user", "assistant"]
    rig.check()


@pytest.mark.asyncio
async def test_429_retry_after_as_a_date_and_in_ms(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    rig = Rig(tmp_path, server.base_url)
    when = email.utils.formatdate(time.time() + 2, usegmt=True)  # "Sat, 21 Nov 2026 20:55:03 GMT"
    server.queue(
        fs.error(429, "slow down", code="rate_limit_exceeded", headers={"Retry-After": when}),
        fs.error(429, "slow down", code="rate_limit_exceeded", headers={"retry-after-ms": "300"}),
        fs.text_reply("ok"),
    )
    done = await rig.turn()
    assert done.ok
    delays = [float(e.message.rsplit("retrying in ", 1)[1].split()[0]) for e in rig.retries()]
    assert len(delays) == 2 and 0.0 <= delays[0] <= 2.1 and delays[1] == 0.3
    rig.check()


@pytest.mark.asyncio
async def test_429_retry_after_is_capped(tmp_path: Path, server: fs.FakeLLMServer,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llm, "RETRY_AFTER_CAP", 0.3)
    rig = Rig(tmp_path, server.base_url)
    server.queue(fs.rate_limited(retry_after=3600), fs.text_reply("ok"))
    t0 = time.monotonic()
    assert (await rig.turn()).ok
    assert time.monotonic() - t0 < 5
    assert "retrying in 0.3 s" in rig.retries()[0].message


@pytest.mark.asyncio
async def test_429_that_never_ends_is_bounded(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    rig = Rig(tmp_path, server.base_url, max_retries=2)
    server.default = fs.rate_limited(retry_after=0)
    done = await rig.turn()
    assert not done.ok and len(server.requests) == 3
    assert [e.attempt for e in rig.retries()] == [1, 2]
    (final,) = rig.final_errors()
    assert "rate limited" in final.message and final.attempt == 3
    assert rig.roles() == ["user"]
    rig.check()


# --------------------------------------------------------------------------- 5xx


@pytest.mark.asyncio
@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_5xx_retried_then_success_no_duplicates(
    tmp_path: Path, server: fs.FakeLLMServer, status: int
) -> None:
    rig = Rig(tmp_path, server.base_url)
    err = fs.error(status, f"upstream said {status}", type="server_error")
    server.queue(err, err, fs.text_reply("Third time lucky."))
    done = await rig.turn()
    assert done.ok and done.final_text == "Third time lucky."
    assert len(server.requests) == 3 and [e.attempt for e in rig.retries()] == [1, 2]
    # 504 is a gateway timeout: reported as one (litellm maps it so), the others as server errors
    kind = "the request timed out" if status == 504 else f"the provider had a server error ({status})"
    assert all(e.message.startswith(kind) and f"upstream said {status}" in e.message for e in rig.retries())
    assert rig.roles() == ["user", "assistant"] and len(rig.of(MessageAdded)) == 2
    rig.check()


@pytest.mark.asyncio
async def test_5xx_exhausted_ends_the_turn_with_one_clear_error(
    tmp_path: Path, server: fs.FakeLLMServer
) -> None:
    rig = Rig(tmp_path, server.base_url, max_retries=2)
    server.default = fs.server_error("the GPUs are on fire")
    done = await rig.turn()
    assert not done.ok and len(server.requests) == 3
    (final,) = rig.final_errors()
    assert final.kind == "transient" and "server error" in final.message
    assert "GPUs are on fire" in final.message
    assert rig.of(TurnFinished) == [done] and rig.roles() == ["user"]
    rig.check()
    server.default = fs.text_reply("Back.")  # the provider recovers: the next turn works
    assert (await rig.turn("again")).ok and rig.roles() == ["user", "user", "assistant"]
    rig.check()


# --------------------------------------------------------------------------- resets and malformed streams


@pytest.mark.asyncio
async def test_reset_before_the_first_chunk_is_retried(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    rig = Rig(tmp_path, server.base_url)
    server.queue(fs.stream(fs.text("lost"), reset_after=0), fs.text_reply("Recovered."))
    done = await rig.turn()
    assert done.ok and done.final_text == "Recovered." and len(server.requests) == 2
    assert rig.retries()[0].kind == "transient" and rig.roles() == ["user", "assistant"]
    assert "".join(d.text for d in rig.of(TextDelta)) == "Recovered."  # nothing of the lost attempt
    rig.check()


@pytest.mark.asyncio
async def test_reset_mid_stream_keeps_the_partial_once(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    rig = Rig(tmp_path, server.base_url)
    server.queue(fs.stream(fs.text("Once "), fs.text("upon"), fs.text(" a time"), reset_after=2),
                 fs.text_reply("must not be asked"))
    done = await rig.turn()
    assert not done.ok and len(server.requests) == 1 and rig.retries() == []
    (final,) = rig.final_errors()
    assert final.kind == "transient" and "connection" in final.message
    assert rig.session.messages[-1]["content"] == "Once upon" and rig.session.messages[-1]["interrupted"]
    rig.check()


@pytest.mark.asyncio
async def test_reset_mid_tool_call_leaves_no_dangling_call(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    rig = Rig(tmp_path, server.base_url)
    server.queue(
        fs.stream(
            fs.tool_call_delta(0, id="ok1", name="list_dir", arguments='{"path": "."}'),
            fs.tool_call_delta(1, id="cut", name="read_file", arguments='{"pa'),
            fs.tool_call_delta(1, arguments='th": "x"}'),
            reset_after=2,
        ),
        fs.text_reply("never"),
    )
    done = await rig.turn()
    assert not done.ok and len(server.requests) == 1
    calls = [c["id"] for c in rig.session.messages[1].get("tool_calls") or []]
    assert calls == ["ok1"]  # the call whose arguments were cut is not kept
    results = [x for x in rig.session.messages if x["role"] == "tool"]
    assert [r["tool_call_id"] for r in results] == ["ok1"] and results[0]["interrupted"]
    rig.check()
    server.queue(fs.text_reply("Fine."))
    assert (await rig.turn("again")).ok
    rig.check()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("garbage", "read_past"),
    [
        ("data: {this is not json\n\n", False),  # not JSON: the stream fails there
        ('data: {"choices": [{"delta": {"content": 5}}]}\n\n', True),  # JSON litellm reads past
    ],
)
async def test_malformed_sse_is_a_clear_error_and_keeps_what_came(tmp_path: Path, server: fs.FakeLLMServer,
                                                                 garbage: str, read_past: bool) -> None:
    rig = Rig(tmp_path, server.base_url)
    server.queue(fs.stream(fs.text("Good so far"), fs.raw(garbage), fs.text(" more")), fs.text_reply("never"))
    done = await rig.turn()
    assert done.ok is read_past
    if read_past:  # the answer is whole, once
        assert rig.final_errors() == [] and rig.session.messages[-1]["content"] == "Good so far more"
    else:  # what came before the bad event is kept, marked, and the error says why
        (final,) = rig.final_errors()
        assert "malformed response stream" in final.message
        assert rig.session.messages[-1]["content"] == "Good so far"
    assert len(server.requests) == 1 and rig.retries() == []
    rig.check()


@pytest.mark.asyncio
async def test_malformed_first_event_is_not_retried_forever(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    rig = Rig(tmp_path, server.base_url)
    server.default = fs.stream(fs.raw("data: {{{{\n\n"))
    done = await rig.turn()
    # a stream that cannot be read is not a transient fault: one request, no retry
    assert not done.ok and len(server.requests) == 1 and rig.retries() == []
    (final,) = rig.final_errors()
    assert "malformed response stream" in final.message
    assert rig.roles() == ["user"]
    rig.check()


@pytest.mark.asyncio
async def test_connection_refused_is_bounded(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    rig = Rig(tmp_path, f"http://127.0.0.1:{port}/v1", max_retries=2)
    t0 = time.monotonic()
    done = await rig.turn()
    assert not done.ok and time.monotonic() - t0 < 10
    assert [e.attempt for e in rig.retries()] == [1, 2]
    (final,) = rig.final_errors()
    assert final.kind == "transient" and "connection" in final.message
    rig.check()


@pytest.mark.asyncio
async def test_stop_while_waiting_to_retry(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    """Cancelling during a Retry-After wait ends the turn at once, settled and idle."""
    rig = Rig(tmp_path, server.base_url)
    server.queue(fs.rate_limited(retry_after=20), fs.text_reply("never"))
    task = asyncio.create_task(rig.turn())
    for _ in range(500):
        if rig.retries():
            break
        await asyncio.sleep(0.01)
    t0 = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - t0 < 2 and len(server.requests) == 1
    (finished,) = rig.of(TurnFinished)
    assert finished.interrupted and not finished.ok
    assert rig.roles() == ["user"]
    rig.check()


# --------------------------------------------------------------------------- the summary call


@pytest.mark.asyncio
async def test_summary_call_faults_lose_nothing(tmp_path: Path, server: fs.FakeLLMServer) -> None:
    """The background summary hits 500s: the compaction falls back (the older messages leave the
    context, archived, with a summary that says so); nothing is lost; once the provider recovers, the
    next auto compaction summarizes."""
    # the model's own summary (summary_mode "model"); in "both" a failed call leaves the digest
    rig = Rig(tmp_path, server.base_url, max_retries=1, context_window=12_000, compact_threshold_ratio=0.5,
              summary_mode="model")
    for i in range(5):
        rig.session.extend([m.user(f"question {i} " + "q" * 2_000),
                            m.assistant(f"answer {i} " + "a" * 2_000)])
    before = [x["id"] for x in rig.session.messages]
    server.queue(fs.text_reply("Short.", when={"tools": True}))
    server.default = fs.server_error("summaries are down")
    done = await rig.turn("one more")
    assert done.ok
    assert rig.agent.auto_task is not None
    event = await rig.agent.auto_task
    assert isinstance(event, CompactionEvent) and event.result == "dropped", event
    assert "summar" in event.reason
    folder = rig.session.path
    archived = {x["id"] for d in archive.list_days(folder) for x in archive.read_day(folder, d)}
    live = [x["id"] for x in rig.session.messages]
    assert set(before) <= set(live) | archived and len(live) == len(set(live))
    assert event.messages_compacted > 0 and set(before[: event.messages_compacted]) <= archived
    # the summary says what happened and where the messages are
    assert "summary call failed" in rig.session.summary and "dialog archive" in rig.session.summary
    assert "summaries are down" in rig.session.summary and "sk-faults" not in rig.session.summary
    rig.check()
    # the provider recovers: a later auto compaction summarizes
    server.default = None
    server.queue(fs.text_reply("Fine.", when={"tools": True}), fs.text_reply(SUMMARY, when={"tools": False}))
    for i in range(6):
        rig.session.extend([m.user(f"more {i} " + "q" * 2_000), m.assistant("a" * 2_000)])
    assert (await rig.turn("and again")).ok
    assert rig.agent.auto_task is not None
    recovered = await rig.agent.auto_task
    assert isinstance(recovered, CompactionEvent) and recovered.result == "summarized", recovered
    assert rig.session.summary == SUMMARY
    rig.check()
