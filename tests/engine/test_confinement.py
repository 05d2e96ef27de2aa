"""Confinement (issue 7, item 4): the file tools stay inside the workspace and the session's
``tool_results/`` and ``dialog/`` folders, whatever path a model makes up; offload file names never
come from model output.

``tests/engine/test_tools.py`` checks each refusal and its wording on a fixed list of escapes. Here:

- a property test builds paths from pieces a model could send (``..``, ``.``, absolute roots, ``~``,
  symlinks out of the roots, a symlink loop, session folders, separators, unicode, NUL, very long
  names) and runs every file tool (``write_file`` approved) on them: a result is either an error or
  something from inside; no byte of an outside file, or of the session's own files (history,
  meta, events), ever shows up, and nothing outside is created or changed;
- the cases a fixed list misses: dangling symlinks to write through, symlinks inside the session
  folders, FIFOs (reading one used to hang the turn for good), 4,096-character paths, the session's
  root files by absolute path;
- offload file names: tool-call ids, tool names and outputs full of paths never name a file; through
  a real agent turn, the only new files are ``tool_results/<32 hex>.txt`` and the index.

Markdown rendering (no remote resources, no scripts) is a GUI test (``tests/widgets``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from engine.agent import Agent
from engine.context.conversation import Session, SessionStore
from engine.context.offload import Offloader
from engine.llm.client import LLMConfig
from engine.model.messages import assistant, tool_call, tool_result, user
from engine.store import archive
from engine.store.config import Settings
from engine.store.session import SessionError
from engine.tools.registry import ToolBox
from tests import fakeserver as fs

if TYPE_CHECKING:
    from tests.engine.conftest import CaseTally

pytestmark = pytest.mark.filterwarnings("ignore:Accessing the .model_:DeprecationWarning")

OUTSIDE_MARK = "TOP-SECRET-OUTSIDE"
PRIVATE_MARK = "SESSION-PRIVATE"
HIDDEN_NAME = "hidden_outside_name"
OFFLOAD_NAME = re.compile(r"^[0-9a-f]{32}\.txt$")


async def _allow(name: str, args: dict[str, Any]) -> bool:
    return True


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every regular file under ``root`` (symlinks not followed) and its bytes."""
    out: dict[str, bytes] = {}
    for dirpath, _dirs, files in os.walk(root, followlinks=False):
        for name in files:
            p = Path(dirpath) / name
            if p.is_symlink() or not p.is_file():
                continue
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


def build_world(base: Path) -> dict[str, Path]:
    """A workspace and a session folder with every kind of trap, and an outside folder."""
    ws, session, outside = base / "ws", base / "session", base / "outside"
    for d in (ws / "src" / "deep", session / "tool_results", session / "dialog", outside / "sub"):
        d.mkdir(parents=True)
    (ws / "notes.txt").write_text("INSIDE notes\n")
    (ws / "src" / "main.py").write_text("INSIDE main\n")
    (session / "tool_results" / ("ab" * 16 + ".txt")).write_text("INSIDE offloaded\n")
    archived = json.dumps({"role": "user", "content": "INSIDE"}) + "\n"
    (session / "dialog" / "2025-01-01.jsonl").write_text(archived)
    for name in ("history.jsonl", "session.json", "events.jsonl"):
        (session / name).write_text(f'{{"x": "{PRIVATE_MARK}"}}\n')
    (outside / "secret.txt").write_text(f"{OUTSIDE_MARK} 1\n")
    (outside / f"{HIDDEN_NAME}.txt").write_text(f"{OUTSIDE_MARK} 2\n")
    (outside / "sub" / "deeper.txt").write_text(f"{OUTSIDE_MARK} 3\n")
    os.symlink(outside, ws / "escape_dir")
    os.symlink(outside / "secret.txt", ws / "escape_file")
    os.symlink(outside / "new_file.txt", ws / "dangling")  # target does not exist (yet)
    os.symlink(session, ws / "session_link")  # the session root: its private files
    os.symlink(ws / "loop_a", ws / "loop_b")
    os.symlink(ws / "loop_b", ws / "loop_a")
    os.symlink(outside / "secret.txt", session / "tool_results" / "evil.txt")
    os.symlink(outside, session / "dialog" / "evil_dir")
    os.mkfifo(ws / "pipe")
    return {"ws": ws, "session": session, "outside": outside, "base": base}


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    return build_world(tmp_path)


def run(tb: ToolBox, name: str, args: dict[str, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(tb.run(name, json.dumps(args)), 10))


def assert_no_leak(text: str) -> None:
    assert OUTSIDE_MARK not in text, text[:300]
    assert PRIVATE_MARK not in text, text[:300]
    assert HIDDEN_NAME not in text, text[:300]


# --------------------------------------------------------------------------- property: any path

PIECES = st.sampled_from([
    "..", ".", "src", "deep", "notes.txt", "escape_dir", "escape_file", "dangling", "session_link", "loop_a",
    "tool_results", "dialog", "evil.txt", "evil_dir", "secret.txt", "sub", "pipe",
    "history.jsonl", "session.json", "outside", "ws", "session", "~", "", "...", "..\\..", "%2e%2e", "é",
    "x" * 300, "\x00", " ", "./..", "/",
])


@st.composite
def model_paths(draw: st.DrawFn) -> tuple[str, str]:
    """(where it starts, the rest): the test puts the world's real folders in front."""
    parts = draw(st.lists(PIECES, min_size=1, max_size=7))
    start = draw(st.sampled_from(["", "", "/", "abs_ws", "abs_session", "abs_outside", "abs_base", "~/"]))
    return start, "/".join(parts)


@pytest.fixture(scope="module")
def shared_world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One world for all examples: the tools change nothing in it but what write_file writes inside
    the workspace, which the property checks and then undoes."""
    return build_world(tmp_path_factory.mktemp("confine"))


def _dirs(root: Path) -> set[Path]:
    return {Path(d) for d, _, _ in os.walk(root, followlinks=False)}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=model_paths(), tool=st.sampled_from(["read_file", "list_dir", "search_text", "write_file"]))
def test_no_path_a_model_can_make_leads_outside(
    where: tuple[str, str], tool: str, shared_world: dict[str, Path], cases: CaseTally
) -> None:
    cases.add("confinement: generated paths")
    ws, session, outside, base = (shared_world[k] for k in ("ws", "session", "outside", "base"))
    start, rest = where
    prefix = {"abs_ws": f"{ws}/", "abs_session": f"{session}/", "abs_outside": f"{outside}/",
              "abs_base": f"{base}/"}.get(start, start)
    path = prefix + rest
    tb = ToolBox(ws, session, allow_write=True, approve=_allow)
    before_out, before_session, before_ws = _snapshot(outside), _snapshot(session), _snapshot(ws)
    dirs_before = _dirs(ws)
    args: dict[str, Any] = {"path": path}
    if tool == "search_text":
        args["pattern"] = "."
    if tool == "write_file":
        args["content"] = "WRITTEN BY THE MODEL"
    try:
        res = run(tb, tool, args)
        event(f"{tool}: {'ok' if res.ok else 'refused or failed'}")
        assert_no_leak(res.text)
        if not res.ok:
            assert res.text.startswith("error: ")
        assert _snapshot(outside) == before_out and not (outside / "new_file.txt").exists()
        assert _snapshot(session) == before_session  # write_file never writes into the session folder
        after_ws = _snapshot(ws)
        changed = {k for k in after_ws if after_ws[k] != before_ws.get(k)}
        if tool == "write_file" and res.ok:
            assert len(changed) == 1, (path, res.text, changed)
            (written,) = changed
            assert after_ws[written] == b"WRITTEN BY THE MODEL"
            assert (ws / written).resolve().is_relative_to(ws.resolve())
        else:
            assert not changed and _dirs(ws) == dirs_before
    finally:  # put the workspace back as it was for the next example
        after_ws = _snapshot(ws)
        for rel, data in after_ws.items():
            if rel not in before_ws:
                (ws / rel).unlink()
            elif data != before_ws[rel]:
                (ws / rel).write_bytes(before_ws[rel])
        for d in sorted(_dirs(ws) - dirs_before, key=lambda p: len(p.parts), reverse=True):
            d.rmdir()


# --------------------------------------------------------------------------- the cases a list misses


def test_write_through_a_dangling_symlink_is_refused(world: dict[str, Path], cases: CaseTally) -> None:
    cases.add("confinement: fixed cases")
    tb = ToolBox(world["ws"], world["session"], allow_write=True, approve=_allow)
    res = run(tb, "write_file", {"path": "dangling", "content": "x"})
    assert not res.ok and "symbolic link" in res.text
    assert not (world["outside"] / "new_file.txt").exists()
    res = run(tb, "write_file", {"path": "escape_dir/created.txt", "content": "x"})
    assert not res.ok and not (world["outside"] / "created.txt").exists()


def test_symlinks_inside_the_session_folders_do_not_lead_out(
    world: dict[str, Path], cases: CaseTally
) -> None:
    cases.add("confinement: fixed cases", 4)
    tb = ToolBox(world["ws"], world["session"])
    for tool, args in (
        ("read_file", {"path": "tool_results/evil.txt"}),
        ("list_dir", {"path": "dialog/evil_dir"}),
        ("read_file", {"path": "dialog/evil_dir/secret.txt"}),
        ("search_text", {"pattern": "SECRET", "path": "dialog"}),
    ):
        res = run(tb, tool, args)
        assert_no_leak(res.text)
    assert run(tb, "read_file", {"path": "tool_results/" + "ab" * 16 + ".txt"}).ok


def test_the_session_root_files_are_out_of_reach(world: dict[str, Path], cases: CaseTally) -> None:
    cases.add("confinement: fixed cases", 5)
    tb = ToolBox(world["ws"], world["session"])
    for path in (str(world["session"] / "history.jsonl"), "session_link/history.jsonl",
                 "tool_results/../events.jsonl", "dialog/../../session/session.json", "session_link"):
        res = run(tb, "read_file", {"path": path}) if not path.endswith("link") else run(tb, "list_dir",
                                                                                             {"path": path})
        assert not res.ok and "outside" in res.text, (path, res.text)
        assert_no_leak(res.text)


def test_reading_a_fifo_never_hangs(world: dict[str, Path], cases: CaseTally) -> None:
    """Regression: open() on a FIFO waits for a writer; the turn (and the process) hung for good."""
    cases.add("confinement: fixed cases")
    tb = ToolBox(world["ws"], world["session"])
    res = run(tb, "read_file", {"path": "pipe"})  # run() gives up after 10 s
    assert not res.ok and "not a regular file" in res.text
    assert run(tb, "search_text", {"pattern": "x"}).ok  # skips it
    assert "pipe" in run(tb, "list_dir", {}).text


def test_very_long_paths(world: dict[str, Path], cases: CaseTally) -> None:
    cases.add("confinement: fixed cases", 4)
    tb = ToolBox(world["ws"], world["session"], allow_write=True, approve=_allow)
    for path in ("../" * 2_000 + "etc/passwd", "a/" * 2_048, "é" * 200, "x" * 256):
        res = run(tb, "read_file", {"path": path})
        assert not res.ok, res.text
        assert "too long" in res.text or "longer than" in res.text or "no such" in res.text, res.text
    deep = "/".join(["d"] * 100) + "/f.txt"  # long but legal, inside
    assert run(tb, "write_file", {"path": deep, "content": "ok"}).ok
    assert run(tb, "read_file", {"path": deep}).ok


def test_session_ids_and_archive_days_never_make_paths(tmp_path: Path, cases: CaseTally) -> None:
    cases.add("confinement: fixed cases", 3)
    store = SessionStore(tmp_path / "sessions")
    for bad in ("../x", "..", "/etc", "a/b", "x\x00", ""):
        with pytest.raises(SessionError):
            store.path_for(bad)
    with pytest.raises(archive.ArchiveError):
        archive.day_path(tmp_path, "../../etc/passwd")
    folder = tmp_path / "s"
    msg = user("archived", ts="../../../../etc/cron.d/evil")  # an imported log can carry any ts
    days = archive.append(folder, [msg])
    assert [p.name for p in (folder / "dialog").iterdir()] == [f"{days[0]}.jsonl"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", days[0])


# --------------------------------------------------------------------------- offload file names

HOSTILE = st.sampled_from([
    "../../../../tmp/pwned", "/etc/passwd", "tool_results/evil.txt", "..", "a/b\\c", "x\x00y",
    "~/.ssh/id_rsa",
    "CON", "dialog/2025-01-01.jsonl", "history.jsonl", "session.json", " ", "é" * 80, "0" * 32 + ".txt",
])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    call_id=st.one_of(HOSTILE, st.text(max_size=40)),
    name=st.one_of(HOSTILE, st.text(max_size=20)),
    body=st.one_of(HOSTILE, st.text(max_size=30)),
    strategy=st.sampled_from(["truncate", "middle_out", "prune"]),
)
def test_offload_file_names_never_come_from_model_output(call_id: str, name: str, body: str, strategy: str,
                                                         cases: CaseTally) -> None:
    cases.add("confinement: offload names")
    with tempfile.TemporaryDirectory(prefix="offname-") as d:
        base = Path(d)
        s = Session.create(base / "s", "names")
        s.extend([user("go"), assistant(None, [tool_call(call_id, name, json.dumps({"path": body}))])])
        out = tool_result(call_id, (body + "\n") * 5_000, name=name)
        settings_ = Settings(offload_recent_bytes=1_000, offload_strategy=strategy, prune_protect_tokens=0,
                             prune_minimum_tokens=0)
        records = asyncio.run(Offloader(s.path, settings_).offload_session(s, [out]))
        assert records and all(OFFLOAD_NAME.match(Path(r.path).name) for r in records)
        files = sorted(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file())
        allowed = re.compile(
            r"^s/(history\.jsonl|session\.json|tool_results/(index\.jsonl|[0-9a-f]{32}\.txt))$"
        )
        assert all(allowed.match(f) for f in files), files


@pytest.mark.asyncio
async def test_an_agent_turn_with_hostile_call_ids_and_names(tmp_path: Path, server: fs.FakeLLMServer,
                                                             cases: CaseTally) -> None:
    """The model picks call ids and tool names that look like paths; the only files made are ours."""
    cases.add("confinement: offload names", 3)
    world = build_world(tmp_path / "w")
    (world["ws"] / "big.txt").write_text("".join(f"line {i} of a long file\n" for i in range(20_000)))
    before = _snapshot(tmp_path)
    session = Session.create(tmp_path / "agent-session", "hostile")
    config = LLMConfig(model="openai/fake", api_base=server.base_url, api_key="sk-x-000000", max_tokens=256)
    settings_ = Settings(context_window=100_000, max_tokens=256, offload_recent_bytes=2_000)
    agent = Agent(session, settings_, llm_config=config, toolbox=ToolBox(world["ws"], session.path),
                  emit=lambda e: None)
    server.queue(
        fs.tool_call_reply("read_file", {"path": "big.txt", "max_lines": 2000}, call_id="../../../../tmp/x"),
        fs.tool_call_reply("../../escape", {"path": "x"}, call_id="/etc/passwd"),
        fs.tool_call_reply("read_file", {"path": "escape_file"}, call_id="tool_results/evil.txt"),
        fs.text_reply("done"),
    )
    done = await agent.run_turn("read big.txt")
    assert done.ok
    session.close()
    after = _snapshot(tmp_path)
    changed = sorted(k for k in after if before.get(k) != after[k])
    allowed = re.compile(
        r"^agent-session/(history\.jsonl|session\.json|events\.jsonl|tool_results/(index\.jsonl|[0-9a-f]{32}\.txt))$"
    )
    assert changed and all(allowed.match(k) for k in changed), changed
    assert any(k.endswith(".txt") and "tool_results" in k for k in changed)  # the big read was offloaded
    results = [m for m in Session.load(session.path).messages if m["role"] == "tool"]
    assert "unknown tool '../../escape'" in results[1]["content"]
    assert "outside" in results[2]["content"]
    for r in results:
        assert_no_leak(r["content"])
