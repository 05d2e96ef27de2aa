"""Fault injection: a real child process is SIGKILLed at each dangerous step, then the parent reloads.

After every kill: no acknowledged message is lost or duplicated; the history, summary and archive
are consistent; a retried operation completes without storing anything twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from engine.context.compaction import Compactor
from engine.context.conversation import Session
from engine.model.messages import Message, assistant, tool_call, tool_result, user
from engine.model.snapshot import WindowInfo
from engine.store import archive
from engine.store.config import Settings
from tests.conftest import REPO

pytestmark = pytest.mark.slow

VALID = (
    "## Goal\\ng\\n## Constraints & Preferences\\nc\\n## Progress\\np\\n## Key Decisions\\nk\\n"
    "## Next Steps\\nn\\n## Critical Context\\nsrc/app.py"
)

PRELUDE = f"""
import asyncio, os, signal, sys
from pathlib import Path
import engine.store.archive, engine.context.offload, engine.store.session
from engine.model.snapshot import WindowInfo
from engine.context.compaction import Compactor
from engine.store.config import Settings
from engine.model.messages import user
from engine.context.conversation import Session

def die():
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)

async def llm(messages, max_tokens):
    return "{VALID}"

path = Path(sys.argv[1])
session = Session.load(path)
# the model's own summary (summary_mode "model"): these tests kill the process during its call
settings = Settings(max_tokens=100, compact_threshold_ratio=0.5, reserve_ratio=0.2, summary_mode="model")
compactor = Compactor(session, settings, llm, window=WindowInfo(2000, 100, "override"))
"""


def _turns(n: int, size: int = 300) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        out += [
            user(f"q{i} " + "u" * size),
            assistant(None, [tool_call(f"c{i}", "read_file", '{"path": "src/app.py"}')]),
            tool_result(f"c{i}", f"r{i} " + "t" * size),
            assistant(f"a{i} " + "a" * size),
        ]
    return out


def _make(tmp_path: Path, turns: int = 6) -> tuple[Path, list[str]]:
    s = Session.create(tmp_path / "s", "faults")
    s.extend(_turns(turns))  # acknowledged: extend returned
    ids = [m["id"] for m in s.messages]
    s.close()
    return s.path, ids


def _run_child(body: str, path: Path) -> subprocess.CompletedProcess[str]:
    code = PRELUDE + textwrap.dedent(body)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-c", code, str(path)], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == -signal.SIGKILL, f"child did not die as planned:\n{proc.stdout}\n{proc.stderr}"
    return proc


def _archived_ids(path: Path) -> list[str]:
    return [str(m.get("id")) for d in archive.list_days(path) for m in archive.read_day(path, d)]


def _check_nothing_lost(path: Path, acked: list[str]) -> Session:
    s = Session.load(path)
    live = [str(m["id"]) for m in s.messages]
    assert len(live) == len(set(live)), "a message is duplicated in the history"
    kept = set(live) | set(_archived_ids(path))
    lost = [i for i in acked if i not in kept]
    assert not lost, f"acknowledged messages lost: {lost}"
    return s


def _compactor(s: Session) -> Compactor:
    async def llm(messages: list[dict], max_tokens: int) -> str:
        return VALID.replace("\\n", "\n")

    settings = Settings(max_tokens=100, compact_threshold_ratio=0.5, reserve_ratio=0.2, summary_mode="model")
    return Compactor(s, settings, llm, window=WindowInfo(2000, 100, "override"))


def test_kill_between_archive_and_rewrite(tmp_path: Path) -> None:
    path, acked = _make(tmp_path)
    _run_child(
        """
        real = engine.store.archive.append
        def append_then_die(*a, **k):
            days = real(*a, **k)
            die()
        engine.store.session.archive.append = append_then_die
        asyncio.run(compactor.run_auto())
        """,
        path,
    )
    archived_before = _archived_ids(path)
    assert archived_before  # the archive step happened
    s = _check_nothing_lost(path, acked)
    assert [m["id"] for m in s.messages] == acked and s.summary == ""  # the rewrite did not
    assert s.meta["pending"] is None
    # retrying completes, and stores no message twice in the archive
    ev = asyncio.run(_compactor(s).run_auto())
    assert ev is not None and ev.result == "summarized"
    again = _check_nothing_lost(path, acked)
    arch = _archived_ids(path)
    assert len(arch) == len(set(arch)) and set(arch) | {m["id"] for m in again.messages} == set(acked)


def test_kill_after_pending_record_before_rewrite(tmp_path: Path) -> None:
    path, acked = _make(tmp_path)
    _run_child(
        """
        engine.store.session.StoredSession._write_history = lambda self, messages: die()
        asyncio.run(compactor.run_auto())
        """,
        path,
    )
    assert json.loads((path / "session.json").read_text())["pending"]  # killed mid-commit
    s = _check_nothing_lost(path, acked)
    assert [m["id"] for m in s.messages] == acked and s.summary == "" and s.undo_stack() == []
    assert any("discarded" in r for r in s.load_report.repaired)


def test_kill_after_rewrite_before_summary(tmp_path: Path) -> None:
    path, acked = _make(tmp_path)
    _run_child(
        """
        engine.store.session.StoredSession._finish_pending = lambda self: die()
        asyncio.run(compactor.run_auto())
        """,
        path,
    )
    s = _check_nothing_lost(path, acked)
    assert len(s.messages) < len(acked)
    assert s.summary.startswith("## Goal") and len(s.undo_stack()) == 1  # the commit was finished
    assert set(_archived_ids(path)) == set(acked) - {m["id"] for m in s.messages}
    # and it can be undone exactly
    asyncio.run(_compactor(s).undo())
    assert [m["id"] for m in s.messages] == acked and s.summary == ""


def test_kill_during_summary_call(tmp_path: Path) -> None:
    path, acked = _make(tmp_path)
    before = (path / "history.jsonl").read_bytes()
    _run_child(
        """
        async def dying_llm(messages, max_tokens):
            await asyncio.sleep(0)
            die()
        compactor.summarize = dying_llm
        asyncio.run(compactor.run_auto())
        """,
        path,
    )
    assert (path / "history.jsonl").read_bytes() == before
    s = _check_nothing_lost(path, acked)
    assert s.load_report.clean and s.summary == "" and _archived_ids(path) == []


def test_kill_during_offload_write(tmp_path: Path) -> None:
    s = Session.create(tmp_path / "s", "offload")
    s.extend([user("run it"), assistant(None, [tool_call("k", "run_shell", "{}")])])
    big = "".join(f"line {i:07d} " + "x" * 40 + "\n" for i in range(100_000))  # 5.5 MB
    s.append(tool_result("k", big))  # acknowledged with its full text
    acked = [m["id"] for m in s.messages]
    s.close()
    _run_child(
        """
        engine.context.offload.CHUNK_CHARS = 1 << 16
        real = engine.context.offload._encode_chunks
        def chunks_then_die(text):
            for n, chunk in enumerate(real(text)):
                if n == 3:
                    die()
                yield chunk
        engine.context.offload._encode_chunks = chunks_then_die
        asyncio.run(engine.context.offload.Offloader(path, settings).offload_session(session))
        """,
        s.path,
    )
    parts = list((s.path / "tool_results").glob("*.part"))
    assert parts and not list((s.path / "tool_results").glob("*.txt"))  # never renamed into place
    again = _check_nothing_lost(s.path, acked)
    assert [m["id"] for m in again.messages] == acked
    assert again.messages[2]["content"] == big and "offload" not in again.messages[2]
    for p in parts:
        os.utime(p, (time.time() - 120,) * 2)
    assert again.cleanup_offloads(5) == parts
    # retried: the offload completes and the full text is on disk
    from engine.context.offload import Offloader

    records = asyncio.run(Offloader(again.path, Settings()).offload_session(again))
    assert len(records) == 1
    third = Session.load(again.path)
    assert (third.path / third.messages[2]["offload"]["path"]).read_text() == big


def test_kill_mid_append_leaves_a_torn_line_that_is_moved_aside(tmp_path: Path) -> None:
    s = Session.create(tmp_path / "s", "append")
    s.close()
    proc = _run_child(
        """
        real = engine.store.session.append_bytes
        count = 0
        def torn(p, data):
            global count
            count += 1
            if count == 6:
                with open(p, "ab") as fh:
                    fh.write(data[: len(data) // 2])
                    fh.flush()
                    os.fsync(fh.fileno())
                die()
            real(p, data)
        engine.store.session.append_bytes = torn
        for i in range(10):
            msg = session.append(user(f"message {i}"))
            print(msg["id"], flush=True)  # acknowledged
        """,
        s.path,
    )
    acked = proc.stdout.split()
    assert len(acked) == 5
    again = _check_nothing_lost(s.path, acked)
    assert [m["id"] for m in again.messages] == acked
    assert again.load_report.torn_bytes > 0 and again.load_report.torn_path is not None


def test_kill_during_undo(tmp_path: Path) -> None:
    path, acked = _make(tmp_path)
    s = Session.load(path)
    asyncio.run(_compactor(s).run_auto())
    s.close()
    _run_child(
        """
        engine.store.session.StoredSession._finish_pending = lambda self: die()
        asyncio.run(compactor.undo())
        """,
        path,
    )
    again = _check_nothing_lost(path, acked)
    assert [m["id"] for m in again.messages] == acked  # the undo was finished on load
    assert again.summary == "" and again.undo_stack() == []
