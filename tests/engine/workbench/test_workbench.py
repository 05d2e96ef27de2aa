"""engine.workbench.Workbench on a plain asyncio loop, against the scripted fake server (real HTTP).

No Qt: the service's listener is a list; intents return tasks that the test awaits.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import pytest_asyncio

from engine.context.conversation import Session, SessionStore
from engine.llm import client as llm
from engine.model import messages as m
from engine.model.events import StateChanged, TextDelta, TurnFinished
from engine.store import archive
from engine.store.config import Settings
from engine.workbench import events as ev
from engine.workbench.service import Workbench
from tests import fakeserver as fs
from tests.memkeyring import MemoryKeyring

T = TypeVar("T")


@pytest.fixture
def server() -> Iterator[fs.FakeLLMServer]:
    with fs.FakeLLMServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llm, "RETRY_BASE_DELAY", 0.01)
    monkeypatch.setattr(llm, "RETRY_MAX_DELAY", 0.05)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-fakeserver-key")


@pytest.fixture
def settings(server: fs.FakeLLMServer) -> Settings:
    return Settings().replace(
        model="openai/fake",
        api_base=server.base_url,
        context_window=8_000,
        max_tokens=256,
        max_retries=1,
        auto_compact=False,
        summary_mode="digest",
    )


class Rig:
    """A Workbench whose events are collected in a list."""

    def __init__(self, settings: Settings, workspace: Path, store: SessionStore | None = None) -> None:
        self.events: list[Any] = []
        self.wb = Workbench(settings, workspace=workspace, store=store, listener=self.events.append)

    def of(self, kind: type[T]) -> list[T]:
        return [e for e in self.events if isinstance(e, kind)]

    def notices(self, level: str | None = None) -> list[str]:
        return [n.text for n in self.of(ev.Notice) if level is None or n.level == level]

    async def until(self, predicate: Callable[[], bool], timeout: float = 15.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                await asyncio.sleep(0.01)

    async def idle(self, timeout: float = 15.0) -> None:
        await self.until(lambda: not self.wb.tasks.names() or self.wb.tasks.names() == ["warmup"], timeout)


@pytest_asyncio.fixture
async def rig(settings: Settings, tmp_path: Path) -> AsyncIterator[Rig]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    r = Rig(settings, workspace)
    yield r
    await r.wb.shutdown()


def make_session(store: SessionStore, n_turns: int = 2, title: str = "existing", filler: int = 0) -> Session:
    session = store.create(title)
    for i in range(n_turns):
        call = m.tool_call(f"c{i}", "read_file", json.dumps({"path": f"f{i}.txt"}))
        session.extend([
            m.user(f"question {i}"),
            m.assistant(None, [call]),
            m.tool_result(f"c{i}", f"contents of f{i}.txt" + " lorem ipsum" * filler, name="read_file"),
            m.assistant(f"answer {i}"),
        ])
    session.close()
    return session


async def opened(rig: Rig, session_id: str) -> ev.SessionLoaded:
    task = rig.wb.open_session(session_id)
    assert task is not None
    await task
    return rig.of(ev.SessionLoaded)[-1]


# --------------------------------------------------------------------------- turns


@pytest.mark.asyncio
async def test_a_turn_runs_and_its_events_come_out_typed(rig: Rig, server: fs.FakeLLMServer) -> None:
    await rig.wb.new_session()
    server.queue(fs.text_reply("Hello from the fake model"))
    assert rig.wb.send("hi")
    assert not rig.wb.send("again")  # one turn at a time
    assert "a turn is running: wait for it or press Stop" in rig.notices("warning")
    turn = rig.wb.task("turn")
    assert turn is not None
    await turn
    assert rig.wb.session is not None
    assert [x["role"] for x in rig.wb.session.messages] == ["user", "assistant"]
    assert rig.wb.session.messages[-1]["content"] == "Hello from the fake model"
    assert [b.busy for b in rig.of(ev.BusyChanged)] == [True, False]
    assert "".join(d.text for d in rig.of(TextDelta)) == "Hello from the fake model"
    assert rig.of(TurnFinished)[-1].ok
    assert [s.state for s in rig.of(StateChanged)][-1] == "idle"
    assert len(rig.of(ev.CallRecorded)) == 1 and rig.of(ev.CallRecorded)[0].record.snapshot.message_tokens == []
    assert rig.of(ev.LastCall)[-1].reported is not None
    state = rig.of(ev.ContextStateChanged)[-1].state
    assert state.live_ids == [str(x["id"]) for x in rig.wb.session.messages]
    assert rig.events.index(rig.of(ev.SnapshotChanged)[-1]) > rig.events.index(rig.of(ev.BusyChanged)[-1])


@pytest.mark.asyncio
async def test_the_sessions_list_after_a_turn_is_read_off_the_event_loop(rig: Rig, server: fs.FakeLLMServer) -> None:
    import threading

    await rig.wb.new_session()
    listed_on: list[str] = []
    real_list = rig.wb.store.list

    def listing() -> Any:
        listed_on.append(threading.current_thread().name)
        return real_list()

    rig.wb.store.list = listing  # type: ignore[method-assign]
    before = len(rig.of(ev.SessionsListed))
    server.queue(fs.text_reply("Hello"))
    assert rig.wb.send("title me")
    turn = rig.wb.task("turn")
    assert turn is not None
    await turn
    await rig.until(lambda: len(rig.of(ev.SessionsListed)) > before)
    assert listed_on and threading.main_thread().name not in listed_on
    assert rig.wb.session is not None
    assert rig.wb.session.id in [s.id for s in rig.of(ev.SessionsListed)[-1].sessions]


@pytest.mark.asyncio
async def test_stop_cancels_a_streaming_turn(rig: Rig, server: fs.FakeLLMServer) -> None:
    await rig.wb.new_session()
    server.queue(fs.stream(fs.text("Partial "), fs.text("answer"), hang_after=2))
    assert rig.wb.send("go")
    await rig.until(lambda: len(rig.of(TextDelta)) == 2)
    rig.wb.stop()
    await rig.until(lambda: not rig.wb.busy)
    assert rig.wb.session is not None
    last = rig.wb.session.messages[-1]
    assert last["role"] == "assistant" and last["content"] == "Partial answer" and last["interrupted"] is True
    assert rig.of(TurnFinished)[-1].interrupted and rig.of(ev.BusyChanged)[-1].busy is False


@pytest.mark.asyncio
@pytest.mark.parametrize("allowed", [True, False])
async def test_approvals_are_answered_through_futures(
    settings: Settings, tmp_path: Path, server: fs.FakeLLMServer, allowed: bool
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    rig = Rig(settings.replace(allow_shell=True), workspace)
    await rig.wb.new_session()
    server.queue(fs.tool_call_reply("run_shell", {"command": "echo hi > out.txt"}, call_id="s1"),
                 fs.text_reply("Done."))
    assert rig.wb.send("run it")
    await rig.until(lambda: bool(rig.of(ev.ApprovalRequested)))
    asked = rig.of(ev.ApprovalRequested)[-1]
    assert asked.tool == "run_shell" and json.loads(asked.arguments) == {"command": "echo hi > out.txt"}
    assert rig.wb.pending_approvals() == [asked.request_id]
    rig.wb.answer_approval(asked.request_id, allowed)
    turn = rig.wb.task("turn")
    assert turn is not None
    await turn
    assert (workspace / "out.txt").exists() is allowed
    assert rig.wb.pending_approvals() == [] and rig.of(ev.ApprovalsWithdrawn)  # the turn's end withdraws
    assert rig.wb.session is not None and rig.wb.session.messages[-1]["content"] == "Done."
    await rig.wb.shutdown()


@pytest.mark.asyncio
async def test_stop_withdraws_an_open_approval(settings: Settings, tmp_path: Path, server: fs.FakeLLMServer) -> None:
    rig = Rig(settings.replace(allow_shell=True), tmp_path)
    await rig.wb.new_session()
    server.queue(fs.tool_call_reply("run_shell", {"command": "echo hi > out.txt"}, call_id="s1"))
    assert rig.wb.send("run it")
    await rig.until(lambda: bool(rig.of(ev.ApprovalRequested)))
    rid = rig.of(ev.ApprovalRequested)[-1].request_id
    rig.wb.stop()
    await rig.until(lambda: not rig.wb.busy)
    assert rig.wb.pending_approvals() == [] and not (tmp_path / "out.txt").exists()
    rig.wb.answer_approval(rid, True)  # a late answer changes nothing
    assert rig.wb.session is not None and rig.wb.session.messages[-1].get("interrupted")
    await rig.wb.shutdown()


# --------------------------------------------------------------------------- compaction


@pytest.mark.asyncio
async def test_clear_goes_through_the_compactor_and_undo_brings_it_back(rig: Rig) -> None:
    session = make_session(rig.wb.store)
    view = (await opened(rig, session.id)).view
    ids = list(view.state.live_ids)
    rig.wb.run_command("clear")
    await rig.idle()
    state = rig.of(ev.ContextStateChanged)[-1].state
    assert state.live_ids == [] and state.summary == "" and state.undo_id is not None
    marker = rig.of(ev.CompactionFinished)[-1].marker
    assert marker.undoable and marker.after_id == ids[-1] and marker.event.result == "dropped"
    assert marker.event.reason.startswith("/clear") and marker.event.messages_compacted == len(ids)
    archived = [x["id"] for day in archive.list_days(session.path) for x in archive.read_day(session.path, day)]
    assert archived == ids  # nothing left the context without being archived
    assert rig.wb.session is not None and len(rig.wb.session.compaction_events()) == 1  # recorded once
    task = rig.wb.undo_compaction()
    assert task is not None
    await task
    assert rig.of(ev.ContextStateChanged)[-1].state.live_ids == ids
    assert rig.of(ev.CompactionFinished)[-1].marker.event.result == "undone"
    assert [x["id"] for x in Session.load(session.path).messages] == ids


@pytest.mark.asyncio
async def test_clear_of_an_empty_conversation_says_so(rig: Rig) -> None:
    await rig.wb.new_session()
    task = rig.wb.clear_session()
    assert task is not None
    await task
    assert "the conversation is already empty" in rig.notices("info") and not rig.of(ev.CompactionFinished)


@pytest.mark.asyncio
async def test_preview_apply_and_undo(rig: Rig) -> None:
    session = make_session(rig.wb.store, 4, filler=300)
    await opened(rig, session.id)
    ids = [str(x["id"]) for x in Session.load(session.path).messages]
    assert rig.wb.start_preview("keep the file names")
    await rig.idle()
    assert [e.instruction for e in rig.of(ev.PreviewStarted)] == ["keep the file names"]
    preview = rig.of(ev.PreviewReady)[-1].preview
    assert preview.plan.needed and rig.wb.preview is preview
    rig.wb.edit_preview("## Goal\nedited")
    assert rig.of(ev.PreviewAfter)[-1].snapshot.summary > 0
    task = rig.wb.apply_preview()
    assert task is not None
    await task
    assert rig.of(ev.PreviewClosed) and rig.wb.preview is None
    assert rig.wb.session is not None and rig.wb.session.undo_stack()
    assert [str(x["id"]) for x in rig.wb.session.messages] != ids
    assert rig.of(ev.CompactionFinished)[-1].marker.event.result == "summarized"
    task = rig.wb.undo_compaction()
    assert task is not None
    await task
    assert [str(x["id"]) for x in rig.wb.session.messages] == ids and not rig.wb.session.undo_stack()
    assert rig.wb.apply_preview() is None
    assert "there is no preview to apply" in rig.of(ev.PreviewFailed)[-1].reason


@pytest.mark.asyncio
async def test_restore_brings_a_tool_result_back_with_its_call(rig: Rig) -> None:
    session = make_session(rig.wb.store)
    await opened(rig, session.id)
    task = rig.wb.clear_session()
    assert task is not None
    await task
    await rig.idle()
    rig.wb.search_archive("contents of f0")
    hits = rig.of(ev.ArchiveHits)[-1]
    tool_id = hits.hits[0].message_id
    assert hits.query == "contents of f0" and len(hits.hits) == 1
    restore = rig.wb.restore_messages([tool_id])
    assert restore is not None
    await restore
    assert rig.wb.session is not None
    roles = [rig.wb.session.get(i)["role"] for i in rig.of(ev.ContextStateChanged)[-1].state.live_ids]
    assert roles == ["assistant", "tool"]
    day = archive.list_days(session.path)[0]
    rig.wb.load_archive_day(day)
    loaded = rig.of(ev.ArchiveMessages)[-1]
    assert loaded.day == day and set(loaded.tokens) == {str(x["id"]) for x in loaded.messages}


# --------------------------------------------------------------------------- draft, inspector, sessions


@pytest.mark.asyncio
async def test_the_draft_is_counted_and_its_snapshot_throttled(rig: Rig) -> None:
    session = make_session(rig.wb.store, 1)
    await opened(rig, session.id)
    assert rig.wb.session is not None
    text = "x" * 1000
    before = len(rig.of(ev.SnapshotChanged))
    counts = [rig.wb.count_draft(text[: 200 * (i + 1)]) for i in range(5)]  # five keystrokes, no await
    assert counts[-1] == rig.wb.session.estimator.text(text)
    assert [d.tokens for d in rig.of(ev.DraftTokens)] == counts
    assert len(rig.of(ev.SnapshotChanged)) == before and rig.wb.throttle.pending
    await rig.until(lambda: not rig.wb.throttle.pending)
    snaps = rig.of(ev.SnapshotChanged)[before:]
    assert len(snaps) == 1 and snaps[0].snapshot.draft == counts[-1]  # one update, with the last draft
    rig.wb.session.calibrator.record(1000, 500, [], (0, 0, 0))  # the provider counts half
    assert rig.wb.count_draft(text) == round(rig.wb.session.estimator.text(text) * 0.5)


@pytest.mark.asyncio
async def test_offloaded_files_are_read_only_inside_the_session(rig: Rig, tmp_path: Path) -> None:
    session = make_session(rig.wb.store, 1)
    name = "0123456789abcdef0123456789abcdef.txt"
    (session.path / "tool_results").mkdir()
    (session.path / "tool_results" / name).write_text("full output\n")
    await opened(rig, session.id)
    rig.wb.read_offloaded(str(session.path / "tool_results" / name))
    assert rig.of(ev.FileLoaded)[-1] == ev.FileLoaded(f"tool_results/{name}", "full output\n")
    for bad in ("session.json", "tool_results/../session.json", "../secret.txt"):
        rig.wb.read_offloaded(bad)
        assert "not an offloaded tool result" in rig.notices("error")[-1]
    assert len(rig.of(ev.FileLoaded)) == 1


@pytest.mark.asyncio
async def test_an_open_session_is_locked_against_a_second_service(
    rig: Rig, settings: Settings, tmp_path: Path
) -> None:
    session = make_session(rig.wb.store, 1)
    await opened(rig, session.id)
    other = Rig(settings, tmp_path, store=rig.wb.store)
    task = other.wb.open_session(session.id)
    assert task is not None
    await task
    assert other.wb.session is None and "open in another ctxbench process" in other.notices("error")[-1]
    await rig.wb.shutdown()  # the first one lets go: now it opens
    loaded = await opened(other, session.id)
    assert loaded.view.id == session.id and other.wb.session is not None
    await other.wb.shutdown()


@pytest.mark.asyncio
async def test_import_opens_the_transcript_and_refuses_a_broken_one(rig: Rig, tmp_path: Path) -> None:
    good = tmp_path / "chat.jsonl"
    good.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "hello"}\n')
    await rig.wb.import_transcript(good)
    view = rig.of(ev.SessionLoaded)[-1].view
    assert [x["content"] for x in view.messages] == ["hi", "hello"]
    assert [s.state for s in rig.of(StateChanged)][:2] == ["importing", "idle"]
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": \n')
    before = [s.id for s in rig.wb.store.list()]
    await rig.wb.import_transcript(bad)
    assert "broken.jsonl" in rig.notices("error")[-1]
    assert [s.id for s in rig.wb.store.list()] == before


@pytest.mark.asyncio
async def test_deleting_the_open_session_opens_another(rig: Rig) -> None:
    older = make_session(rig.wb.store, 1, "older")
    newer = make_session(rig.wb.store, 1, "newer")
    await opened(rig, newer.id)
    await rig.wb.delete_session(newer.id)
    assert rig.of(ev.SessionLoaded)[-1].view.id == older.id and not newer.path.exists()
    assert [s.id for s in rig.of(ev.SessionsListed)[-1].sessions] == [older.id]


@pytest.mark.asyncio
async def test_slash_commands(rig: Rig) -> None:
    await rig.wb.new_session()
    rig.wb.run_command("context")
    assert rig.notices("info")[-1].startswith("Context: ") and "  Free: " in rig.notices("info")[-1]
    rig.wb.run_command("nope")
    assert rig.notices("error")[-1] == "unknown command /nope"


# --------------------------------------------------------------------------- API keys


@pytest.mark.asyncio
async def test_without_an_environment_key_the_keyring_key_is_used(
    rig: Rig, server: fs.FakeLLMServer, memory_keyring: MemoryKeyring, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    await rig.wb.new_session()
    assert rig.wb.api_key_status().startswith("No key for openai")
    secret = "sk-test-keyring-0123456789abcdef"
    assert rig.wb.store_api_key(secret)
    assert memory_keyring.store[("ctxbench", "openai")] == secret
    assert rig.wb.api_key_status() == "A key for openai is stored in the OS keyring"
    assert rig.wb.agent is not None and rig.wb.agent.config.api_key == secret  # the agent was remade with it
    server.queue(fs.text_reply("ok"))
    assert rig.wb.send("hi")
    turn = rig.wb.task("turn")
    assert turn is not None
    await turn
    assert server.requests[-1].headers.get("authorization") == f"Bearer {secret}"
    assert rig.wb.forget_api_key() and ("ctxbench", "openai") not in memory_keyring.store
    assert rig.wb.api_key_status().startswith("No key for openai")


@pytest.mark.asyncio
async def test_the_environment_key_wins_over_the_keyring(
    rig: Rig, memory_keyring: MemoryKeyring
) -> None:
    await rig.wb.new_session()
    assert rig.wb.store_api_key("sk-test-keyring-0123456789abcdef")
    assert rig.wb.api_key_status() == "A key for openai comes from the environment OPENAI_API_KEY"
    assert rig.wb.agent is not None and rig.wb.agent.config.api_key == "sk-test-fakeserver-key"
