"""Sources in the service: read-only views of real agent sessions, live follow, Continue, subagents.

Real shared session files (copied into tmp_path where a test writes them); the service on a plain
asyncio loop with its events collected.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from engine.model.records import CompactionRecord
from engine.sources.readers import read_source
from engine.workbench import events as ev
from engine.workbench.rows import ProblemRow, ViewSource
from engine.workbench.source_views import views_root
from tests.engine.workbench.test_workbench import Rig, rig, server, settings  # noqa: F401  (fixtures)

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "sessions"
BIG = SHARED / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
KINDS = [
    ("claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl", "claude-code"),
    ("claude-code/subagent.jsonl", "claude-code"),
    ("codex/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl", "codex"),
    ("openhands/basic.json", "openhands"),
    ("swe-agent/function_calling_simple.traj", "swe-agent"),
]


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is not here")
    return path


class Shown:
    """What a window following the events shows: message ids and timeline columns."""

    def __init__(self, r: Rig) -> None:
        self.rig = r
        self.seen = 0
        self.messages: list[str] = []
        self.calls: list[Any] = []
        self.loads = 0
        self.incremental = 0
        self.retracted = 0
        self.compactions: list[CompactionRecord] = []

    def update(self) -> None:
        for e in self.rig.events[self.seen:]:
            if isinstance(e, ev.SessionLoaded):
                self.loads += 1
                self.messages = [str(m.get("id")) for m in e.view.messages]
                self.calls = [r.snapshot.provider_prompt_tokens for r in e.view.timeline]
                self.compactions = list(e.view.compactions)
            elif isinstance(e, ev.CompactionFinished):
                self.compactions.append(e.marker.event)
            elif isinstance(e, ev.MessagesRetracted):
                self.retracted += len(e.ids)
                assert self.messages[-len(e.ids):] == e.ids, "only the last messages are retracted"
                del self.messages[-len(e.ids):]
            elif isinstance(e, ev.MessageAdded):
                self.incremental += 1
                self.messages.append(str(e.message.get("id")))
            elif isinstance(e, ev.CallRecorded):
                self.calls.append(e.record.snapshot.provider_prompt_tokens)
        self.seen = len(self.rig.events)


def _loaded(r: Rig) -> Any:
    return r.of(ev.SessionLoaded)[-1].view


@pytest.mark.asyncio
@pytest.mark.parametrize(("name", "fmt"), KINDS)
async def test_each_shared_kind_opens_read_only(rig: Rig, name: str, fmt: str) -> None:  # noqa: F811
    path = _need(SHARED / name)
    src = read_source(path, fmt)  # type: ignore[arg-type]
    await rig.wb.open_source(path)
    view = _loaded(rig)
    assert view.read_only and view.source is not None and view.source.path == str(path) and view.source.format == fmt
    assert view.source.following == (fmt in ("claude-code", "codex"))
    assert len(view.messages) == len(src.messages)
    assert len(view.timeline) == len(src.calls) > 0
    assert view.path.parent == views_root()
    # the service refuses what would change it
    assert rig.wb.send("hello") is False
    assert rig.wb.start_preview() is False
    assert rig.wb.undo_compaction() is None
    assert any("read-only" in t for t in rig.notices("warning"))
    assert rig.wb.agent is not None and rig.wb.busy is False
    # leaving the view removes its folder
    folder = view.path
    await rig.wb.new_session()
    assert not folder.exists()
    assert rig.wb.view is None
    follows = [e.following for e in rig.of(ev.FollowChanged)]
    assert follows == ([True, False] if fmt in ("claude-code", "codex") else [])


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


@pytest.mark.asyncio
async def test_a_growing_file_is_followed_nothing_twice(rig: Rig, tmp_path: Path) -> None:  # noqa: F811
    lines = _lines(_need(BIG))
    live = tmp_path / "live.jsonl"
    start = len(lines) // 3
    end = start + 120
    live.write_bytes(b"".join(lines[:start]))
    shown = Shown(rig)
    await rig.wb.open_source(live)
    shown.update()
    first = list(shown.messages)
    at = start
    for burst in (30, 1, 25, 40):  # bursts of appended lines
        with open(live, "ab") as fh:
            fh.write(b"".join(lines[at:at + burst]))
        at += burst
        await asyncio.sleep(0.6)
    line = lines[at]  # one line written in two pieces, the second later
    with open(live, "ab") as fh:
        fh.write(line[: len(line) // 2])
    await asyncio.sleep(0.6)
    with open(live, "ab") as fh:
        fh.write(line[len(line) // 2:])
    at += 1
    with open(live, "ab") as fh:
        fh.write(b"".join(lines[at:end]))
    final = read_source(live, "claude-code")

    def caught_up() -> bool:
        shown.update()
        return len(shown.messages) == len(final.messages) and len(shown.calls) == len(final.calls)

    await rig.until(caught_up, timeout=20)
    await asyncio.sleep(0.8)  # nothing more comes
    shown.update()
    assert len(shown.messages) == len(set(shown.messages)) == len(final.messages)
    assert shown.calls == [c.prompt_tokens for c in final.calls]
    assert len(shown.messages) > len(first)
    assert shown.incremental > 0, "appended lines come as new messages, not only as whole reloads"
    assert shown.loads == 1, "no whole reload when lines are only appended (no compaction in this range)"
    # the view keeps its folder (refreshed in place), and only that one is on disk
    assert rig.wb.session is not None and rig.wb.session.path == _loaded(rig).path
    assert [p.name for p in views_root().iterdir()] == [rig.wb.session.path.name]


@pytest.mark.asyncio
async def test_a_followed_view_s_ledger_keeps_no_key_a_message(rig: Rig, tmp_path: Path) -> None:  # noqa: F811
    """The view's session counts its messages (the next request's history) as they come, each new one a dict of its
    own: its ledger keeps no key of each message and a bounded memo of shapes (a key and a memo entry a message were
    held for as long as the file grew), with the counts a fresh count gives."""
    from engine.context.tokens import FOLLOW_MEMO, TokenCache, TokenLedger

    lines = _lines(_need(BIG))
    live = tmp_path / "live.jsonl"
    start = len(lines) // 2
    live.write_bytes(b"".join(lines[:start]))
    shown = Shown(rig)
    await rig.wb.open_source(live)
    with open(live, "ab") as fh:
        fh.write(b"".join(lines[start:start + 200]))
    final = read_source(live, "claude-code")

    def caught_up() -> bool:
        shown.update()
        return len(shown.messages) == len(final.messages)

    await rig.until(caught_up, timeout=20)
    assert shown.incremental > 0
    session = rig.wb.session
    assert session is not None
    ledger = session.ledger
    assert not getattr(ledger, "_keys", None) and len(ledger.cache._memo) <= FOLLOW_MEMO
    fresh = TokenLedger(TokenCache(session.estimator), session.messages)
    assert ledger.counts == fresh.counts and ledger.total == fresh.total


@pytest.mark.asyncio
async def test_a_truncated_and_rewritten_file_is_read_again(rig: Rig, tmp_path: Path) -> None:  # noqa: F811
    live = tmp_path / "live.jsonl"
    shutil.copyfile(_need(SHARED / "claude-code" / "tool_heavy.jsonl"), live)
    await rig.wb.open_source(live)
    loads = len(rig.of(ev.SessionLoaded))
    other = _need(SHARED / "claude-code" / "short.jsonl").read_bytes()
    with open(live, "r+b") as fh:  # in place: same inode, shorter
        fh.truncate(0)
        fh.write(other)
    want = read_source(live, "claude-code")
    await rig.until(lambda: len(rig.of(ev.SessionLoaded)) > loads, timeout=10)
    view = _loaded(rig)
    assert [m.get("content") for m in view.messages] == [m.get("content") for m in want.messages]
    assert len(view.timeline) == len(want.calls)


@pytest.mark.asyncio
async def test_continue_makes_a_writable_session_and_offers_the_preview(rig: Rig) -> None:  # noqa: F811
    path = _need(SHARED / "claude-code" / "tool_heavy.jsonl")
    await rig.wb.open_source(path)
    shown = _loaded(rig)
    task = rig.wb.continue_source()
    assert task is not None
    await task
    view = _loaded(rig)
    assert not view.read_only and view.path.parent == rig.wb.store.root
    assert [m.get("content") for m in view.messages] == [m.get("content") for m in shown.messages]
    assert not shown.path.exists()
    # the test settings' window is 8,000 tokens: the preview is offered
    assert rig.of(ev.PreviewStarted)
    assert any("over the 8,000-token window" in t for t in rig.notices("warning"))
    assert rig.wb.continue_source() is None  # nothing to continue now


@pytest.mark.asyncio
async def test_a_subagent_opens_with_its_own_calls_and_back(rig: Rig) -> None:  # noqa: F811
    await rig.wb.open_source(_need(BIG))
    parent = _loaded(rig)
    links = [m["subagent"] for m in parent.messages if isinstance(m.get("subagent"), dict)]
    rel = next(s["session"] for s in links if s.get("session"))
    task = rig.wb.open_subagent(rel)
    assert task is not None
    await task
    child = _loaded(rig)
    assert child.read_only and child.source is not None and child.source.subagent == rel
    assert rig.wb.doc.view is not None and rig.wb.doc.view.parent["kind"] == "source"
    assert child.title == f"subagent {rel.split('/')[-1]}"
    assert parent.title.startswith("Work on bead spotter-fum") and child.source.parent == parent.title
    assert 0 < len(child.timeline) < len(parent.timeline)
    assert child.timeline[0].snapshot.model.startswith("claude-haiku")
    assert rig.wb.send("hi") is False
    back = rig.wb.open_parent()
    assert back is not None
    await back
    again = _loaded(rig)
    assert again.read_only and again.source is not None and again.source.path == str(BIG)
    assert len(again.timeline) == len(parent.timeline)
    assert [p.name for p in views_root().iterdir()] == [again.path.name]
    assert rig.wb.open_subagent("../x") is None


@pytest.mark.asyncio
async def test_scan_lists_the_sources_with_their_figures(
    rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    home = tmp_path / "home"
    project = home / ".claude" / "projects" / "-work-spotter"
    project.mkdir(parents=True)
    shutil.copyfile(_need(SHARED / "claude-code" / "short.jsonl"), project / "short.jsonl")
    codex = home / ".codex" / "sessions" / "2026" / "02" / "23"
    codex.mkdir(parents=True)
    name = "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"
    shutil.copyfile(_need(SHARED / "codex" / name), codex / name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    rows = await rig.wb.scan_sources()
    assert {r.agent for r in rows} == {"claude-code", "codex"}
    claude = next(r for r in rows if r.agent == "claude-code")
    assert claude.title == "mix phx.server doesnt seem to start"
    assert claude.percent_full == 12.7 and claude.live is True  # just copied: modified now
    assert rig.of(ev.SourcesListed)[-1].sources == rows


@pytest.mark.asyncio
async def test_the_scan_says_which_files_it_could_not_read(
        rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    import os

    home = tmp_path / "home"
    project = home / ".claude" / "projects" / "-work-spotter"
    project.mkdir(parents=True)
    shutil.copyfile(_need(SHARED / "claude-code" / "short.jsonl"), project / "short.jsonl")
    os.mkfifo(project / "pipe.jsonl")
    odd = project / os.fsdecode(b"odd-\xff.jsonl")
    odd.symlink_to("/dev/zero")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    rows = await asyncio.wait_for(rig.wb.scan_sources(), 20)
    assert [r.path for r in rows] == [str(project / "short.jsonl")]  # the others are still listed
    listed = rig.of(ev.SourcesListed)[-1]
    assert listed.sources == rows
    assert sorted(listed.problems, key=lambda p: p.path) == [
        ProblemRow("claude-code", str(odd), str(project / "odd-\\xff.jsonl"),
                   "not a regular file (a character device): not read"),
        ProblemRow("claude-code", str(project / "pipe.jsonl"), str(project / "pipe.jsonl"),
                   "not a regular file (a FIFO (named pipe)): not read")]


@pytest.mark.asyncio
async def test_a_followed_file_that_is_deleted_is_said_once_and_followed_again(
        rig: Rig, tmp_path: Path) -> None:  # noqa: F811
    import os

    live = tmp_path / "live.jsonl"
    shutil.copyfile(_need(SHARED / "claude-code" / "short.jsonl"), live)
    await rig.wb.open_source(live)
    loads = len(rig.of(ev.SessionLoaded))
    live.unlink()
    said = "following live.jsonl: deleted: no file at this path now; the view shows it as last read, and goes on " \
           "when it can be read again"
    await rig.until(lambda: said in rig.notices("warning"), timeout=10)
    await asyncio.sleep(0.6)
    assert rig.notices("warning").count(said) == 1  # once, not at every look
    assert rig.wb.session is not None and rig.wb.view is not None  # the view stays
    back = tmp_path / "back.jsonl"
    shutil.copyfile(_need(SHARED / "claude-code" / "tool_heavy.jsonl"), back)
    os.replace(back, live)
    want = read_source(live, "claude-code")
    await rig.until(lambda: len(rig.of(ev.SessionLoaded)) > loads, timeout=10)
    assert len(_loaded(rig).timeline) == len(want.calls)


@pytest.mark.asyncio
async def test_a_subagent_of_an_imported_session_and_back(rig: Rig) -> None:  # noqa: F811
    await rig.wb.import_transcript(_need(BIG))
    await rig.until(lambda: bool(rig.of(ev.SessionLoaded)))
    parent = _loaded(rig)
    assert not parent.read_only
    rel = next(m["subagent"]["session"] for m in parent.messages
               if isinstance(m.get("subagent"), dict) and m["subagent"].get("session"))
    task = rig.wb.open_subagent(rel)
    assert task is not None
    await task
    child = _loaded(rig)
    assert child.read_only and child.path == parent.path / rel
    assert rig.wb.doc.view is not None
    assert rig.wb.doc.view.parent == {"kind": "session", "id": parent.id, "title": parent.title}
    assert child.source is not None and child.source.parent == parent.title
    assert child.source.path.endswith(".jsonl")  # the subagent's own file: it can be continued
    assert rig.wb.send("hi") is False
    back = rig.wb.open_parent()
    assert back is not None
    await back
    again = _loaded(rig)
    assert again.id == parent.id and not again.read_only and (parent.path / rel).is_dir()


@pytest.mark.asyncio
async def test_stale_view_folders_are_removed(rig: Rig) -> None:  # noqa: F811
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = views_root() / f"{gone.stdout.strip()}-abcdef123456"
    (stale / "dialog").mkdir(parents=True)
    ours = views_root() / f"{__import__('os').getpid()}-000000000000"  # this process's: in use, kept
    ours.mkdir()
    await rig.wb.open_source(_need(SHARED / "claude-code" / "short.jsonl"))
    assert not stale.exists() and ours.exists()


@pytest.mark.asyncio
async def test_a_compaction_written_while_followed_shows(rig: Rig, tmp_path: Path) -> None:  # noqa: F811
    """The compaction comes once with its figures; the messages it archived are merged back by time,
    which can reorder earlier messages (then the view is sent whole, as for a reset)."""
    lines = _lines(_need(BIG))
    boundary = next(i for i, ln in enumerate(lines) if b'"compact_boundary"' in ln)
    live = tmp_path / "live.jsonl"
    live.write_bytes(b"".join(lines[:boundary - 20]))
    shown = Shown(rig)
    await rig.wb.open_source(live)
    assert _loaded(rig).compactions == []
    at = boundary - 20
    for burst in (15, 6, 3, 30, 30):  # the boundary, its summary, then the next calls
        with open(live, "ab") as fh:
            fh.write(b"".join(lines[at:at + burst]))
        at += burst
        await asyncio.sleep(0.6)
    final = read_source(live, "claude-code")
    assert len(final.compactions) == 1

    def caught_up() -> bool:
        shown.update()
        return (len(shown.messages) == len(final.messages) and len(shown.calls) == len(final.calls)
                and [c.tokens_after for c in shown.compactions] == [final.compactions[0].tokens_after])

    await rig.until(caught_up, timeout=20)
    await asyncio.sleep(0.6)
    shown.update()
    assert len(shown.messages) == len(set(shown.messages)) == len(final.messages)
    event = shown.compactions[0]
    assert (event.tokens_before, event.tokens_after) == (final.compactions[0].tokens_before,
                                                               final.compactions[0].tokens_after)
    state = rig.of(ev.ContextStateChanged)[-1].state
    assert state.summary and len(state.live_ids) < len(shown.messages)  # what it took out is out of the context


@pytest.mark.asyncio
async def test_a_codex_compaction_written_while_followed_comes_as_a_marker(
    rig: Rig, tmp_path: Path  # noqa: F811
) -> None:
    path = _need(SHARED / "codex" / "rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl")
    lines = _lines(path)
    boundary = next(i for i, ln in enumerate(lines) if b'"type":"compacted"' in ln)
    live = tmp_path / path.name
    live.write_bytes(b"".join(lines[:boundary - 10]))
    shown = Shown(rig)
    await rig.wb.open_source(live)
    at = boundary - 10
    for burst in (5, 5, 5, 10, 40, 40):
        with open(live, "ab") as fh:
            fh.write(b"".join(lines[at:at + burst]))
        at += burst
        await asyncio.sleep(0.6)
    final = read_source(live, "codex")

    def caught_up() -> bool:
        shown.update()
        return len(shown.calls) == len(final.calls) and len(shown.compactions) == len(final.compactions) == 1

    await rig.until(caught_up, timeout=20)
    shown.update()
    assert shown.loads == 1 and len(rig.of(ev.CompactionFinished)) == 1  # a marker, no reload
    assert shown.compactions[0].tokens_after == final.compactions[0].tokens_after is not None
    assert len(shown.messages) == len(set(shown.messages)) == len(final.messages)


def test_view_folders_are_private_and_memory_backed_where_the_system_allows() -> None:
    """A followed view is rewritten on every refresh: on Linux it lives in /dev/shm, in a folder
    only this user can enter (one per data dir); elsewhere under the data dir."""
    import os
    import stat

    from engine.store.config import data_dir

    root = views_root()
    if not Path("/dev/shm").is_dir() or not hasattr(os, "getuid"):
        assert root == data_dir() / "views"
        return
    assert root.parent.parent == Path("/dev/shm") and root.parent.name.startswith(f"ctxbench-{os.getuid()}-")
    mode = stat.S_IMODE(root.parent.stat().st_mode)
    assert mode == 0o700 and root.parent.stat().st_uid == os.getuid()
    assert views_root() == root  # the same data dir: the same folder


@pytest.mark.asyncio
async def test_a_view_opened_before_litellm_is_read_again_with_the_models_window(
    rig: Rig, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """A SWE-agent trajectory names its model but no window and reports no prompt tokens: opened before
    litellm is loaded it can only be drawn against the window it observed; once litellm is ready the
    view is read again and drawn against the model's own window (as File → Open does)."""
    from engine.llm import client as llm

    path = _need(SHARED / "swe-agent" / "marshmallow-1867.function_calling.traj")
    await rig.wb.open_source(path)
    first = _loaded(rig)
    assert first.state.snapshot.window < 16_384  # observed: the smallest multiple of 1024 that held it
    seen: list[str] = []

    def model_info(model: str, n_ctx: int | None = None) -> dict[str, int]:
        seen.append(model)
        return {"max_input_tokens": 128_000, "max_output_tokens": 16_384}

    monkeypatch.setattr(llm, "model_info", model_info)
    rig.wb.runtime.llm_ready = True
    rig.wb.sources.reread_observed_view()
    await rig.until(lambda: _loaded(rig) is not first)
    await rig.idle()
    again = _loaded(rig)
    assert seen == ["gpt-4o"] and again.read_only and again.state.snapshot.window == 128_000
    assert len(again.messages) == len(first.messages)
    rig.wb.sources.reread_observed_view()  # the window is the model's now: nothing to read again
    await rig.idle()
    assert _loaded(rig) is again


@pytest.mark.asyncio
async def test_an_opencode_session_is_followed_from_its_live_database(rig: Rig, tmp_path: Path) -> None:  # noqa: F811
    """OpenCode keeps its sessions in SQLite: the view polls the session's rows (read-only) and gains the new
    messages and calls without a reload; the compaction comes once the call after it is there."""
    from engine.sources.opencode import opencode_path, read_opencode
    from tests.engine.sources.test_opencode import SID, Db, assistant, tokens, user

    db = Db(tmp_path / "opencode.db")
    db.session(SID)
    user(db, "msg_01", "Run a command")
    assistant(db, "msg_02", "msg_01", tokens(100, 10, write=50), tool=("call_1", "bash", {"command": "ls"}, "a\n"))
    path = opencode_path(db.path, SID)
    shown = Shown(rig)
    await rig.wb.open_source(path)
    shown.update()
    assert shown.loads == 1 and len(shown.calls) == 1
    assert rig.wb.view is not None and rig.wb.view.describe().following
    user(db, "msg_03", "and another")
    assistant(db, "msg_04", "msg_03", tokens(20, 5, read=150), text="done")
    final = read_opencode(path)

    def caught_up() -> bool:
        shown.update()
        return len(shown.calls) == len(final.calls) and len(shown.messages) == len(final.messages)

    await rig.until(caught_up, timeout=20)
    assert shown.loads == 1 and shown.incremental > 0  # no reload: the new rows came as changes
    assert shown.calls == [c.prompt_tokens for c in final.calls]
    assert shown.messages == [str(m["id"]) for m in final.messages]


@pytest.mark.asyncio
async def test_a_followed_opencode_database_that_is_damaged_or_removed_is_said_once(
        rig: Rig, tmp_path: Path) -> None:  # noqa: F811
    """The window's followed view says what ``ctxbench follow`` says (one wording, DatabaseNotices): a database
    that cannot be read is named with the reason once, and the view keeps what it last read."""
    from engine.sources.opencode import opencode_path
    from tests.engine.sources.test_opencode import SID, Db, assistant, tokens, user

    db = Db(tmp_path / "opencode.db", wal=False)
    db.session(SID)
    user(db, "msg_01", "Run a command")
    assistant(db, "msg_02", "msg_01", tokens(100, 10, write=50), text="done")
    db.conn.close()
    await rig.wb.open_source(opencode_path(db.path, SID))
    assert rig.wb.view is not None and rig.wb.view.describe().following
    data = bytearray(db.path.read_bytes())
    data[:16] = b"not a database!\x00"
    db.path.write_bytes(bytes(data))

    def said() -> list[str]:
        return [n for n in rig.notices("warning") if n.startswith("following opencode.db") and "SQLite" in n]

    await rig.until(lambda: bool(said()), timeout=10)
    assert str(db.path) in said()[0] and "shows it as last read" in said()[0]
    await asyncio.sleep(0.6)
    assert len(said()) == 1  # once, not at every poll
    assert rig.wb.session is not None and rig.wb.view is not None  # the view stays
    db.path.unlink()
    await rig.until(lambda: any("deleted: no database at" in n for n in rig.notices("warning")), timeout=10)


@pytest.mark.asyncio
async def test_a_large_file_shows_its_current_context_first(
        rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Above PROGRESSIVE_BYTES, the first screen is the context since the last compaction, read from the end of
    the file; the whole view replaces it once the file is read, and is then followed."""
    from engine.workbench import source_views

    monkeypatch.setattr(source_views, "PROGRESSIVE_BYTES", 1 << 20)
    path = tmp_path / BIG.name
    shutil.copyfile(_need(BIG), path)
    whole = read_source(path, "claude-code")
    await rig.wb.open_source(path)
    loads = rig.of(ev.SessionLoaded)
    assert len(loads) == 2
    first, full = loads[0].view, loads[1].view
    assert first.read_only and full.read_only
    live = whole.messages[whole.live_start:]
    assert len(first.messages) == len(live) < len(full.messages) == len(whole.messages)
    assert [m["content"] for m in first.messages] == [m["content"] for m in live]
    assert len(first.timeline) < len(full.timeline) == len(whole.calls)
    assert first.timeline[-1].snapshot.provider_prompt_tokens == full.timeline[-1].snapshot.provider_prompt_tokens
    assert rig.wb.view is not None and rig.wb.view.describe().following
    assert [p.name for p in views_root().iterdir()] == [rig.wb.session.path.name]  # the first screen's folder went


@pytest.mark.asyncio
async def test_a_poll_that_keeps_failing_is_said_once_and_reloads_once_when_it_reads_again(
        rig: Rig, tmp_path: Path) -> None:  # noqa: F811
    """A reader that raises on every poll: one notice (not one every 0.25 s), the polls back off, nothing is
    rewritten while it fails; the first good poll after it writes the view once from the reader's state."""
    lines = _lines(_need(BIG))
    live = tmp_path / "live.jsonl"
    live.write_bytes(b"".join(lines[:200]))
    await rig.wb.open_source(live)
    view = rig.wb.view
    assert view is not None and view.live_source is not None
    source = view.live_source
    real_poll = source.poll
    failures = {"left": 10**9, "polls": 0}

    def poll() -> Any:
        failures["polls"] += 1
        if failures["left"] > 0:
            failures["left"] -= 1
            raise ValueError("the reader broke on a line")
        return real_poll()

    source.poll = poll  # type: ignore[method-assign]
    loads = len(rig.of(ev.SessionLoaded))
    with open(live, "ab") as fh:
        fh.write(b"".join(lines[200:230]))
    await asyncio.sleep(3.0)
    said = [t for t in rig.notices("warning") if "the reader broke on a line" in t]
    assert len(said) == 1
    assert failures["polls"] <= 6, "the polls back off while every one fails (0.25, 0.5, 1, 2 s …)"
    assert len(rig.of(ev.SessionLoaded)) == loads  # nothing rewritten while failing
    failures["left"] = 0
    final = read_source(live, "claude-code")
    await rig.until(lambda: len(rig.of(ev.SessionLoaded)) == loads + 1, timeout=10)
    assert len(rig.of(ev.SessionLoaded)[-1].view.messages) == len(final.messages)
    await asyncio.sleep(0.8)
    assert len(rig.of(ev.SessionLoaded)) == loads + 1  # once


@pytest.mark.asyncio
async def test_a_codex_subagent_opens_as_codex_and_back(rig: Rig, tmp_path: Path) -> None:  # noqa: F811
    from tests.engine.sources.test_codex_agents import CHILD, PARENT, _child_rows, _parent_rows, _rollout

    day = tmp_path / "sessions" / "2026" / "11" / "27"
    path = _rollout(day, PARENT, _parent_rows())
    child_file = _rollout(day, CHILD, _child_rows())
    await rig.wb.open_source(path)
    parent = _loaded(rig)
    (link,) = [m["subagent"] for m in parent.messages if isinstance(m.get("subagent"), dict)]
    assert link["id"] == CHILD and link["agent_path"] == "/root/worker"
    task = rig.wb.open_subagent(link["session"])
    assert task is not None
    await task
    child = _loaded(rig)
    assert child.read_only and child.source is not None
    assert (child.source.format, child.source.path) == ("codex", str(child_file))
    assert [m.get("agent_message", {}).get("author") for m in child.messages if m.get("name") == "agent"] == ["/root"]
    back = rig.wb.open_parent()
    assert back is not None
    await back
    assert (_loaded(rig).source or ViewSource("")).path == str(path)
