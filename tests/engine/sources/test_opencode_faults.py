"""OpenCode databases as a hostile machine leaves them (issue 26, items 4, 6 and the OpenCode part of 8): a
malformed row, a missing column, flipped bytes, a database that cannot be opened or stays locked, times that are
no times. Each time the other sessions are still listed and counted, the bad one is named with the reason,
nothing hangs, and nothing is written beside the database."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from engine.sources import discovery, follow, opencode, opencode_summary, sqlite_read
from engine.sources.discovery import ScanProblem, SourceEntry
from engine.sources.follow import Follower
from engine.sources.model import SourceError
from engine.sources.opencode import (
    DatabaseBusy,
    OpenCodeReader,
    latest_session,
    list_sessions,
    opencode_path,
    read_opencode,
)
from engine.store.config import Settings
from tests.engine.sources.test_opencode import Db, assistant, tokens, user

REPO = Path(__file__).resolve().parents[3]
NO_HANG = 10.0  # seconds: far above what any of these reads takes; only proves that nothing waits for ever


def sessions(db: Db, n: int, prefix: str = "ses_") -> list[str]:
    """``n`` top-level sessions, each with two calls."""
    ids = []
    for i in range(n):
        sid = f"{prefix}{i:02d}"
        db.session(sid, title=f"session {i}")
        user(db, f"msg_{sid}_1", f"question {i}", sid=sid)
        assistant(db, f"msg_{sid}_2", f"msg_{sid}_1", tokens(100 + i, 5), text="first", sid=sid)
        user(db, f"msg_{sid}_3", "more", sid=sid)
        assistant(db, f"msg_{sid}_4", f"msg_{sid}_3", tokens(200 + i, 5), text="second", sid=sid)
        ids.append(sid)
    return ids


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home" / ".local" / "share" / "opencode").mkdir(parents=True)
    return tmp_path / "home"


def folder_of(home: Path) -> Path:
    return home / ".local" / "share" / "opencode"


def scan(home: Path, *, refresh: bool = False) -> tuple[dict[str, SourceEntry], list[ScanProblem], float]:
    problems: list[ScanProblem] = []
    start = time.monotonic()
    entries = discovery.scan_sources(Settings(), refresh=refresh, env={"HOME": str(home)}, home=home,
                                     index=home.parent / "sources-index.json", problems=problems)
    return {e.session_id: e for e in entries}, problems, time.monotonic() - start


def files_of(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file of ``folder`` with its size and mtime."""
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()}


def closed(db: Db) -> None:
    """Close the writer (OpenCode quitting): the last connection checkpoints and removes -wal and -shm."""
    db.conn.close()


# --------------------------------------------------------------------------- malformed JSON


def test_a_malformed_part_is_skipped_and_named_and_the_other_sessions_are_counted(
        home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    db = Db(folder_of(home) / "opencode.db")
    ids = sessions(db, 10)
    db.part("prt_bad_1", "msg_ses_03_2", 'not json {"type": "text"', sid="ses_03")  # json_extract fails on it
    db.part("prt_bad_2", "msg_ses_03_4", '{"type": "step-finish", "tokens": {"input": 9', sid="ses_03")  # cut short
    closed(db)
    entries, problems, _ = scan(home)
    assert problems == [] and sorted(entries) == ids
    assert all(e.calls == 2 for e in entries.values())  # the cut step-finish is no call
    src = read_opencode(opencode_path(db.path, "ses_03"))
    assert len(src.calls) == 2
    assert sorted(s.reason.split(":")[0] for s in src.skipped) == ["part prt_bad_1", "part prt_bad_2"]
    assert all("not JSON" in s.reason for s in src.skipped)
    # the usage index counts every call of every session
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CTXBENCH_DATA_DIR", str(home.parent / "data"))
    monkeypatch.setenv("CTXBENCH_CONFIG_DIR", str(home.parent / "config"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert main(["usage", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"]["calls"] == 20


# --------------------------------------------------------------------------- broken databases


def test_a_missing_column_names_the_database_and_keeps_its_last_state(home: Path) -> None:
    good = Db(folder_of(home) / "opencode.db")
    good_ids = sessions(good, 3)
    bad = Db(folder_of(home) / "opencode-old.db")
    bad_ids = sessions(bad, 3, prefix="ses_old_")
    closed(good)
    entries, problems, _ = scan(home)
    assert sorted(entries) == sorted(good_ids + bad_ids) and problems == []
    bad.conn.execute("ALTER TABLE message DROP COLUMN time_updated")  # another OpenCode version's schema
    closed(bad)
    for refresh in (False, True):
        entries, problems, took = scan(home, refresh=refresh)
        assert sorted(entries) == sorted(good_ids + bad_ids) and took < NO_HANG  # as of the last read
        (problem,) = problems
        assert problem.path == str(bad.path) and problem.agent == "opencode"
        assert "no such column: time_updated" in problem.reason and "shown as of the last read" in problem.reason
    with pytest.raises(SourceError, match=r"opencode-old\.db: cannot read the database: no such column"):
        read_opencode(opencode_path(bad.path, "ses_old_01"))
    (home.parent / "sources-index.json").unlink()  # no last state: the database is a problem, not listed
    entries, problems, _ = scan(home)
    assert sorted(entries) == good_ids and [p.path for p in problems] == [str(bad.path)]
    assert problems[0].reason.endswith("; not read")


def test_flipped_bytes_and_files_that_cannot_be_opened_are_named(home: Path) -> None:
    folder = folder_of(home)
    good = Db(folder / "opencode.db")
    good_ids = sessions(good, 3)
    closed(good)
    damaged = folder / "opencode-damaged.db"
    shutil.copyfile(good.path, damaged)
    data = bytearray(damaged.read_bytes())
    rng = random.Random(26)
    for i in range(4096 + 100, len(data)):  # every page but the first (the schema) flipped here and there
        if rng.random() < 0.2:
            data[i] ^= 0xFF
    damaged.write_bytes(bytes(data))
    header = folder / "opencode-header.db"
    header.write_bytes(b"SQLite format 2\x00" + bytes(data[16:]))
    os.mkfifo(folder / "opencode-fifo.db")  # an open() of it would wait for a writer for ever
    (folder / "opencode-folder.db").mkdir()
    (folder / "opencode-empty.db").write_bytes(b"")
    entries, problems, took = scan(home)
    assert sorted(entries) == good_ids and took < NO_HANG
    reasons = {Path(p.path).name: p.reason for p in problems}
    assert set(reasons) == {"opencode-damaged.db", "opencode-header.db", "opencode-fifo.db", "opencode-folder.db",
                            "opencode-empty.db"}
    assert "malformed" in reasons["opencode-damaged.db"] or "not a database" in reasons["opencode-damaged.db"]
    assert "cannot read the database" in reasons["opencode-damaged.db"]
    assert reasons["opencode-header.db"].startswith("not an SQLite database")
    assert reasons["opencode-empty.db"].startswith("not an SQLite database")
    assert "FIFO" in reasons["opencode-fifo.db"] and "folder" in reasons["opencode-folder.db"]
    assert all(r.endswith("; not read") for r in reasons.values())
    for path in (damaged, header, folder / "opencode-fifo.db"):
        with pytest.raises(SourceError, match=re.escape(path.name)):
            read_opencode(opencode_path(path, "ses_00"))


def test_a_session_that_cannot_be_summarised_is_named_and_the_others_listed(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = Db(folder_of(home) / "opencode.db")
    ids = sessions(db, 4)
    real = opencode_summary._opencode_entry

    def entry(conn: Any, path: Path, row: dict[str, Any], *args: Any) -> SourceEntry:
        if row["id"] == "ses_02":
            raise TypeError("a value of a shape nothing foresaw")
        return real(conn, path, row, *args)

    entries, problems, _ = scan(home)
    assert sorted(entries) == ids
    monkeypatch.setattr(opencode_summary, "_opencode_entry", entry)
    user(db, "msg_new", "again", sid="ses_02")  # ses_02 changed: summarised again, and fails
    entries, problems, _ = scan(home)
    assert sorted(entries) == ids and entries["ses_02"].calls == 2  # as of the last read
    assert [(p.path, p.reason) for p in problems] == [(
        f"{db.path}#ses_02",
        "cannot be summarised (TypeError: a value of a shape nothing foresaw); shown as of the last read")]
    assert scan(home)[1] == problems  # said again while the database is unchanged (from the index)
    (home.parent / "sources-index.json").unlink()
    entries, problems, _ = scan(home)
    assert sorted(entries) == ["ses_00", "ses_01", "ses_03"] and problems[0].reason.endswith("; not listed")


# --------------------------------------------------------------------------- a lock held by another process


@pytest.fixture
def hold_lock() -> Iterator[Any]:
    """``hold(db)``: another process takes the database's exclusive lock (after adding a session, so that the
    database changed since the last scan) and keeps it until the test ends."""
    procs: list[subprocess.Popen[str]] = []

    def hold(path: Path) -> None:
        code = textwrap.dedent(f"""
            import sqlite3, sys, time
            conn = sqlite3.connect({str(path)!r}, isolation_level=None)
            conn.execute("INSERT INTO session (id, project_id, slug, directory, title, version, time_created, "
                         "time_updated) VALUES ('ses_new', 'p', 's', '/w', 'new', '1', 1790000900000, 1790000900000)")
            conn.execute("BEGIN EXCLUSIVE")
            print("locked", flush=True)
            time.sleep(120)
        """)
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"

    yield hold
    for proc in procs:
        proc.kill()
        proc.wait()


def test_a_locked_database_costs_a_second_and_keeps_its_last_state(home: Path, hold_lock: Any) -> None:
    good = Db(folder_of(home) / "opencode.db")
    good_ids = sessions(good, 2)
    closed(good)
    locked = Db(folder_of(home) / "opencode-busy.db", wal=False)  # a rollback journal: a writer's lock blocks reads
    locked_ids = sessions(locked, 10, prefix="ses_busy_")
    closed(locked)
    assert len(scan(home)[0]) == 12
    hold_lock(locked.path)
    entries, problems, took = scan(home)
    assert sorted(entries) == sorted(good_ids + locked_ids) and all(e.calls == 2 for e in entries.values())
    assert [(p.path, p.reason) for p in problems] == [
        (str(locked.path), "locked by another process; shown as of the last read")]
    assert 0.9 < took < 3.0  # LOCK_WAIT (1 s) once, not 5 × 2 s
    start = time.monotonic()
    for sid in locked_ids:  # what the usage index does next: each session read; the lock was just found
        with pytest.raises(DatabaseBusy, match=r"opencode-busy\.db: locked by another process"):
            read_opencode(opencode_path(locked.path, sid))
    assert time.monotonic() - start < 1.0  # tried once each, without waiting again
    entries, problems, _ = scan(home, refresh=True)
    assert len(entries) == 12 and "shown as of the last read" in problems[0].reason


def test_a_lock_released_within_the_wait_is_read(tmp_path: Path) -> None:
    db = Db(tmp_path / "opencode.db", wal=False)
    sessions(db, 1)
    db.conn.execute("BEGIN EXCLUSIVE")
    release = time.monotonic() + 0.4
    reader = OpenCodeReader(db.path, "ses_00")
    threading.Timer(0.4, lambda: db.conn.execute("COMMIT")).start()
    reader.poll()
    assert time.monotonic() >= release and len(reader.session.calls) == 2 and reader.problem == ""


# --------------------------------------------------------------------------- times that are no times


@pytest.mark.parametrize("bad", [-1, 1e30, "soon"])
def test_a_time_that_is_no_time_drops_nothing_and_resets_nothing(tmp_path: Path, bad: Any) -> None:
    db = Db(tmp_path / "opencode.db")
    sessions(db, 2)
    user(db, "msg_x1", "third", sid="ses_01")
    assistant(db, "msg_x2", "msg_x1", tokens(300, 7), text="third answer", sid="ses_01")
    db.conn.execute("UPDATE part SET time_updated = ? WHERE id = 'prt_msg_x2_2'", (bad,))  # its step-finish
    db.conn.execute("UPDATE part SET time_created = ? WHERE id = 'prt_msg_x1_0'", (bad,))
    db.conn.execute("UPDATE message SET time_created = ?, time_updated = ? WHERE id = 'msg_x2'", (bad, bad))
    db.conn.execute("UPDATE session SET time_updated = ? WHERE id = 'ses_01'", (bad,))
    path = opencode_path(db.path, "ses_01")
    src = read_opencode(path)
    assert [c.prompt_tokens for c in src.calls] == [101, 201, 300]  # the call whose part has the bad time
    assert [m["content"] for m in src.messages][-2:] == ["third", "third answer"]  # placed by its id
    assert sum("is not a time" in n for n in src.notes) == 3 and any("prt_msg_x2_2" in n for n in src.notes)
    reader = OpenCodeReader(db.path, "ses_01")
    reader.poll()
    for _ in range(3):
        changes = reader.poll()
        assert changes.nothing(reader.session) and not changes.reset
    follower = Follower(path)
    first = follower.poll()
    assert [e.kind for e in first] == ["call", "call", "call"]
    assistant(db, "msg_x3", "msg_x2", tokens(400, 1), text="fourth", sid="ses_01")
    assert [(e.kind, e.call and e.call.prompt_tokens) for e in follower.poll()] == [("call", 400)]
    assert follower.poll() == []
    entries = {e.session_id: e for e in discovery.scan_sources(
        Settings(source_dirs=str(tmp_path)), env={"HOME": str(tmp_path / "none")}, home=tmp_path / "none",
        index=tmp_path / "index.json")}
    assert (entries["ses_00"].calls, entries["ses_01"].calls) == (2, 4)
    assert [s.id for s in list_sessions(db.path)] == ["ses_00", "ses_01"]  # a time that is none: last
    assert latest_session(db.path) == "ses_00"


# --------------------------------------------------------------------------- nothing written beside it


def test_reading_a_closed_database_writes_nothing_beside_it(tmp_path: Path) -> None:
    for wal in (True, False):
        folder = tmp_path / ("wal" if wal else "rollback")
        folder.mkdir()
        db = Db(folder / "opencode.db", wal=wal)
        sessions(db, 2)
        closed(db)
        before = files_of(folder)
        assert list(before) == ["opencode.db"]
        path = opencode_path(db.path, "ses_01")
        assert len(read_opencode(path).calls) == 2 and len(list_sessions(db.path)) == 2
        assert opencode.is_opencode_source(path)
        assert len(Follower(path).poll()) == 2
        assert discovery.summarize_opencode(db.path)["ses_00"]["entry"]["calls"] == 2
        assert files_of(folder) == before  # no -wal, no -shm, the mtime unchanged


def test_a_wal_without_its_shm_is_read_from_a_private_copy(tmp_path: Path) -> None:
    db = Db(tmp_path / "opencode.db")
    sessions(db, 2)  # the writer still open: its rows are in -wal
    folder = tmp_path / "copy"
    folder.mkdir()
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{db.path}{suffix}", folder / f"opencode.db{suffix}")
    before = files_of(folder)
    src = read_opencode(opencode_path(folder / "opencode.db", "ses_01"))
    assert [c.prompt_tokens for c in src.calls] == [101, 201]
    assert files_of(folder) == before  # no -shm made (a read-only open would have made one)
    assert not list(Path(tempfile.gettempdir()).glob("ctxbench-opencode-*"))  # the copy removed


def test_a_database_in_a_read_only_folder_is_read(tmp_path: Path) -> None:
    """chmod 555 does not stop root (CAP_DAC_OVERRIDE): as root, the read runs in a process without that
    capability (``setpriv``), where the folder really cannot be written (checked there with ``os.access``)."""
    db = Db(tmp_path / "opencode.db")
    sessions(db, 2)
    base = Path(tempfile.mkdtemp(prefix="ctxbench-ro-"))
    try:
        base.chmod(0o755)
        for name, suffixes in (("closed", ("",)), ("nowalshm", ("", "-wal"))):
            (base / name).mkdir()
            for suffix in suffixes:
                shutil.copyfile(f"{db.path}{suffix}", base / name / f"opencode.db{suffix}")
                (base / name / f"opencode.db{suffix}").chmod(0o644)
        db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        shutil.copyfile(db.path, base / "closed" / "opencode.db")  # a closed database holds all its rows
        before = {name: files_of(base / name) for name in ("closed", "nowalshm")}
        for name in before:
            (base / name).chmod(0o555)
        code = textwrap.dedent(f"""
            import os, sys
            sys.path.insert(0, {str(REPO)!r})
            from engine.sources.opencode import read_opencode
            for name in ("closed", "nowalshm"):
                folder = os.path.join({str(base)!r}, name)
                assert not os.access(folder, os.W_OK), "the folder is writable: the test proves nothing"
                print(name, len(read_opencode(folder + "/opencode.db#ses_01").calls))
        """)
        command = [sys.executable, "-c", code]
        if os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                pytest.skip("running as root without setpriv (util-linux): no way to make a folder read-only")
            caps = "-dac_override,-dac_read_search"
            command = [setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["closed", "2", "nowalshm", "2"]
        assert {name: files_of(base / name) for name in before} == before
    finally:
        for name in ("closed", "nowalshm"):
            if (base / name).exists():
                (base / name).chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


# --------------------------------------------------------------------------- the path `sources` prints


def test_import_tools_and_diff_take_the_path_sources_prints(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    db = Db(folder_of(home) / "opencode.db")
    sessions(db, 2)
    closed(db)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("CTXBENCH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CTXBENCH_CONFIG_DIR", str(tmp_path / "config"))
    assert main(["sources", "--json"]) == 0
    paths = {obj["session_id"]: obj["path"] for obj in map(json.loads, capsys.readouterr().out.splitlines())
             if obj.get("type") == "source"}
    path = paths["ses_01"]
    assert path == f"{db.path}#ses_01"
    assert main(["import", path, "--session", str(tmp_path / "imported"), "--no-model-info"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["format"], report["calls"], report["source"]) == ("opencode", 2, path)
    assert main(["tools", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["path"] == path
    assert main(["diff", path, "1", "2", "--json"]) == 0
    diff = json.loads(capsys.readouterr().out)
    assert (diff["path"], diff["provider_prompt_tokens_a"], diff["provider_prompt_tokens_b"]) == (path, 101, 201)
    missing = f"{db.path.parent / 'gone.db'}#ses_01"
    for argv in (["import", missing, "--session", str(tmp_path / "other")], ["tools", missing],
                 ["diff", missing, "1", "2"]):
        assert main(argv) == 1
        assert "gone.db#ses_01" in capsys.readouterr().err


# --------------------------------------------------------------------------- follow


def test_follow_says_when_the_database_is_locked_damaged_or_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_read, "LOCK_WAIT", 0.1)
    monkeypatch.setattr(follow, "LOCKED_LONG", 0.3)
    db = Db(tmp_path / "opencode.db", wal=False)
    sessions(db, 1)
    follower = Follower(opencode_path(db.path, "ses_00"))
    assert [e.kind for e in follower.poll()] == ["call", "call"]
    db.conn.execute("BEGIN EXCLUSIVE")
    assert follower.poll() == []  # a lock held a moment is OpenCode writing: nothing said
    time.sleep(0.35)
    (event,) = follower.poll()
    assert event.kind == "problem" and "opencode.db: locked by another process for" in event.reason
    assert follower.poll() == []  # said once
    db.conn.execute("COMMIT")
    assert follower.poll() == []
    closed(db)
    data = bytearray(db.path.read_bytes())
    data[:16] = b"not a database!\x00"
    db.path.write_bytes(bytes(data))
    (event,) = follower.poll()
    assert event.kind == "problem" and str(db.path) in event.reason and "not an SQLite database" in event.reason
    assert follower.poll() == []
    db.path.unlink()
    (event,) = follower.poll()
    assert event.kind == "missing" and str(db.path) in event.reason
    assert follower.poll() == []
