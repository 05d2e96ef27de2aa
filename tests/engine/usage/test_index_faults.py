"""The usage index under faults (issue 26): one bad session file never stops the others; a damaged index file is
rebuilt on its own; a held lock is waited for with a message and a limit; a read-only index answers as it is; a
data dir whose path DuckDB would take for a glob; a reader that loses a race with a writer; a Gemini CLI chat
whose last line has no newline."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engine.sources.model import SourceError
from engine.usage import index as index_mod
from engine.usage import storage
from engine.usage.index import UsageIndex
from tests.engine.usage.test_usage_index import _call, _gemini_home, _result, _update, _user

PROJECTS = Path(".claude") / "projects"


def _session(folder: Path, name: str, day: int, calls: int = 2) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = _user(1, f"2026-03-0{day}T10:00:00.000Z")
    for k in range(calls):
        text += _call(2 + 2 * k, f"2026-03-0{day}T10:00:{5 + k:02d}.000Z", tool="Bash" if k == 0 else "")
        if k == 0:
            text += _result(3, f"2026-03-0{day}T10:00:06.000Z", "tu2")
    path = folder / name
    path.write_text(text)
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    _session(home / PROJECTS / "-home-u-a", "a1.jsonl", 1)
    _session(home / PROJECTS / "-home-u-a", "a2.jsonl", 2, calls=3)
    _session(home / PROJECTS / "-home-u-b", "b1.jsonl", 3)
    return home


def _clean_totals(home: Path, root: Path) -> dict[str, Any]:
    shutil.rmtree(root, ignore_errors=True)
    ix = UsageIndex(root)
    _update(ix, home)
    return ix.totals()


# --------------------------------------------------------------------------- one bad file


@pytest.mark.parametrize("error", [ValueError("bad value"), OverflowError("too big"), TypeError("unhashable"),
                                   KeyError("type"), RecursionError("deep"), UnicodeDecodeError("utf-8", b"\xff", 0, 1,
                                                                                                "invalid"),
                                   SourceError("a2.jsonl: not a regular file (FIFO): not read"),
                                   PermissionError(13, "Permission denied")],
                         ids=lambda e: type(e).__name__)
def test_one_file_that_fails_is_said_and_the_others_go_on(home: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    real = index_mod.read_source

    def read(path: Path, fmt: Any) -> Any:
        if path.name == "a2.jsonl":
            raise error
        return real(path, fmt)

    monkeypatch.setattr(index_mod, "read_source", read)
    monkeypatch.setattr(index_mod, "ACTIVE_SECONDS", 0)  # whole reads (read_source) for every file
    ix = UsageIndex(tmp_path / "usage")
    report = _update(ix, home)
    bad = str(home / PROJECTS / "-home-u-a" / "a2.jsonl")
    assert [p for p, _ in report.failed] == [bad] and report.read == 2
    reason = report.failed[0][1]
    assert reason and (str(error.args[-1]) in reason or type(error).__name__ in reason), reason
    assert ix.totals()["calls"] == 4  # a1's and b1's calls
    assert report.to_json()["failed"] == [{"path": bad, "reason": reason}]
    monkeypatch.setattr(index_mod, "read_source", real)
    assert _update(ix, home).read == 1 and ix.totals()["calls"] == 7  # read again once it reads


@pytest.mark.parametrize("refresh", [False, True], ids=["update", "refresh"])
def test_a_file_that_cannot_be_read_again_keeps_the_rows_it_had(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refresh: bool) -> None:
    """A session file read before that fails now (here: it changed and its read raises; a locked OpenCode
    database is the same case) keeps its rows, with ``--refresh`` too: never 0 calls for it, and it is said."""
    monkeypatch.setattr(index_mod, "ACTIVE_SECONDS", 0)
    ix = UsageIndex(tmp_path / "usage")
    _update(ix, home)
    before = ix.totals()
    bad = home / PROJECTS / "-home-u-a" / "a2.jsonl"
    bad.write_text(bad.read_text() + _user(9, "2026-03-02T11:00:00.000Z"))  # changed: read again
    real = UsageIndex._read

    def read(self: UsageIndex, entry: Any, grew: bool) -> Any:
        if Path(entry.path).name == "a2.jsonl":
            raise SourceError("a2.jsonl: locked by another process")
        return real(self, entry, grew)

    monkeypatch.setattr(UsageIndex, "_read", read)
    report = _update(UsageIndex(tmp_path / "usage"), home, refresh=refresh)
    assert [p for p, _ in report.failed] == [str(bad)]
    assert "locked" in report.failed[0][1]
    assert UsageIndex(tmp_path / "usage").totals() == before  # a2's 3 calls still counted
    monkeypatch.setattr(UsageIndex, "_read", real)
    again = _update(UsageIndex(tmp_path / "usage"), home)
    assert again.read == 1 and not again.failed  # read again once it can be (its stamp was not taken)
    assert UsageIndex(tmp_path / "usage").totals() == before


def test_a_fifo_named_like_a_session_never_blocks_and_is_listed(home: Path, tmp_path: Path) -> None:
    fifo = home / PROJECTS / "-home-u-a" / "pipe.jsonl"
    os.mkfifo(fifo)
    ix = UsageIndex(tmp_path / "usage")
    started = time.monotonic()
    report = _update(ix, home)
    assert time.monotonic() - started < 10
    assert ix.totals()["calls"] == 7
    reasons = dict(report.failed)
    assert str(fifo) in reasons and reasons[str(fifo)], report.failed


def test_a_file_name_that_is_not_utf8_is_indexed_and_kept_exactly(home: Path, tmp_path: Path) -> None:
    folder = home / PROJECTS / "-home-u-a"
    raw = os.fsencode(folder) + b"/caf\xe9-\xff.jsonl"
    os.rename(folder / "a1.jsonl", raw)
    ix = UsageIndex(tmp_path / "usage")
    report = _update(ix, home)
    assert not report.failed and report.read == 3 and ix.totals()["calls"] == 7
    name = os.fsdecode(raw)
    assert name in ix.manifest().files  # the manifest keeps the exact path (surrogate escapes)
    assert (ix.root / storage.MANIFEST).read_bytes().isascii()
    assert _update(ix, home).unchanged == 3  # the same path, read back exactly: not read again
    con = ix.connect()
    try:
        paths = [r[0] for r in con.execute("SELECT path FROM sessions").fetchall()]
    finally:
        con.close()
    assert str(folder) + "/caf\\xe9-\\xff.jsonl" in paths  # shown with its bytes escaped


def test_a_number_duckdb_cannot_hold_is_null_and_counted(tmp_path: Path) -> None:
    ix = UsageIndex(tmp_path / "usage")
    con = ix.connection()
    try:
        bad = storage.load_rows(con, "t", {"n": "BIGINT", "f": "DOUBLE", "i": "INTEGER"},
                            [{"n": 2**70, "f": 1.5, "i": 3}, {"n": 5, "f": 2.0, "i": 2**40},
                             {"n": 1, "f": 0.5, "i": 1}])
        rows = con.execute("SELECT n, f, i FROM t ORDER BY f").fetchall()
    finally:
        con.close()
    assert bad == 2 and rows == [(1, 0.5, 1), (None, 1.5, 3), (5, 2.0, None)]


def test_the_scans_unreadable_files_are_listed(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.sources.discovery import ScanProblem

    real = index_mod.scan_sources

    def scan(*args: Any, problems: list[ScanProblem] | None = None, **kw: Any) -> Any:
        assert problems is not None
        problems.append(ScanProblem("claude-code", "/h/x\udcff.jsonl", "not JSON"))
        return real(*args, problems=problems, **kw)

    monkeypatch.setattr(index_mod, "scan_sources", scan)
    report = _update(UsageIndex(tmp_path / "usage"), home)
    assert ("/h/x\\xff.jsonl", "not JSON") in report.failed
    json.dumps(report.to_json(), ensure_ascii=False).encode("utf-8")  # printable as UTF-8


# --------------------------------------------------------------------------- damage


def _damage(path: Path, kind: str) -> None:
    data = path.read_bytes()
    if kind == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif kind == "flipped footer":
        path.write_bytes(data[:-60] + b"\xff" * 40 + data[-20:])
    elif kind == "flipped pages":
        mid = len(data) // 3
        path.write_bytes(data[:mid] + bytes(b ^ 0xFF for b in data[mid:mid + 200]) + data[mid + 200:])
    elif kind == "missing":
        path.unlink()
    elif kind == "zero length":
        path.write_bytes(b"")
    elif kind == "other columns":  # a Parquet file, but not of this table
        import duckdb

        path.unlink()
        con = duckdb.connect()
        con.execute(f"COPY (SELECT 1 AS x) TO '{str(path).replace(chr(39), chr(39) * 2)}' (FORMAT PARQUET)")
        con.close()
    else:
        raise AssertionError(kind)


KINDS = ["truncated", "flipped footer", "flipped pages", "missing", "zero length", "other columns"]


# flipped bytes in the pages of a small file may leave it readable (DuckDB reads it, nothing to rebuild): tried on
# a day file only, whose pages are compressed (a flipped page fails to decompress)
CASES = [(part, kind) for part in ("calls day", "sessions", "call_rollup", "session_rollup") for kind in KINDS
         if kind != "flipped pages" or part == "calls day"]


@pytest.mark.parametrize(("part", "kind"), CASES)
def test_a_damaged_index_file_is_rebuilt_by_the_update(home: Path, tmp_path: Path, part: str, kind: str) -> None:
    ix = UsageIndex(tmp_path / "usage")
    _update(ix, home)
    clean = _clean_totals(home, tmp_path / "clean")
    sessions = ix.query("session")
    m = ix.manifest()
    name = m.days["calls"]["2026-03-02"] if part == "calls day" else m.single[part]
    _damage(ix.root / name, kind)
    with open(home / PROJECTS / "-home-u-a" / "a2.jsonl", "a") as fh:  # an update that touches that day
        fh.write(_call(40, "2026-03-02T11:00:00.000Z"))
    report = UsageIndex(ix.root).update(home=home, env={})
    assert any(name in w and "rebuilt" in w for w in report.warnings), report.warnings
    assert not report.failed
    again = UsageIndex(ix.root)
    clean = _clean_totals(home, tmp_path / "clean")
    assert again.totals() == clean
    assert len(again.query("session")) == len(sessions)
    assert not (ix.root / name).exists()  # the damaged file went
    listed = again.manifest().listed()
    assert all((ix.root / n).is_file() for n in listed)


@pytest.mark.parametrize("kind", ["truncated", "missing", "zero length", "other columns"])
def test_a_damaged_index_file_is_rebuilt_by_a_query(home: Path, tmp_path: Path, kind: str) -> None:
    """No update (``usage --no-update``, the view's range change): the query names the file, rebuilds what it can
    (the rollups from the day files) and marks the session files whose rows were lost to be read again."""
    ix = UsageIndex(tmp_path / "usage")
    _update(ix, home)
    before = ix.totals()
    m = ix.manifest()
    rollup = m.single["call_rollup"]
    _damage(ix.root / rollup, kind)
    fresh = UsageIndex(ix.root)
    assert fresh.totals() == before
    assert any(rollup in n for n in fresh.notices), fresh.notices
    day = fresh.manifest().days["calls"]["2026-03-01"]
    _damage(ix.root / day, kind)
    third = UsageIndex(ix.root)
    assert third.totals()["calls"] == before["calls"] - 2  # a1's calls were in that day's file: rollups rebuilt
    assert third.read(lambda con: con.execute("SELECT count(*) FROM calls").fetchall()[0][0]) == 5
    assert any(day in n for n in third.notices) and any("read again" in n for n in third.notices), third.notices
    stale = [p for p, k in third.manifest().files.items() if k.get("stamp") is None]
    assert stale == [str(home / PROJECTS / "-home-u-a" / "a1.jsonl")]
    report = _update(third, home)
    assert report.read == 1 and third.totals() == before  # read again from its source


# --------------------------------------------------------------------------- paths, races


def test_a_data_dir_whose_path_looks_like_a_glob(home: Path, tmp_path: Path) -> None:
    decoy = UsageIndex(tmp_path / "us1age")  # what "us[1]age" matches as a glob pattern
    _session(tmp_path / "other" / PROJECTS / "-x", "x.jsonl", 4, calls=5)
    _update(decoy, tmp_path / "other")
    for name in ("us[1]age", "a*b,c{d}?"):
        ix = UsageIndex(tmp_path / name)
        assert _update(ix, home).read == 3
        assert ix.totals()["calls"] == 7 and len(ix.query("session")) == 3
        with open(home / PROJECTS / "-home-u-a" / "a1.jsonl", "a") as fh:
            fh.write(_call(50 + len(name), "2026-03-01T12:00:00.000Z"))
        assert _update(ix, home).read == 1 and UsageIndex(ix.root).totals()["calls"] == 8
        _update(ix, home, refresh=True)
        shutil.rmtree(ix.root)
        (home / PROJECTS / "-home-u-a" / "a1.jsonl").write_text(
            (home / PROJECTS / "-home-u-a" / "a1.jsonl").read_text().rsplit("\n", 2)[0] + "\n")
    assert decoy.totals()["calls"] == 5


def test_a_reader_that_loses_a_race_with_a_writer_tries_again(home: Path, tmp_path: Path) -> None:
    ix = UsageIndex(tmp_path / "usage")
    _update(ix, home)
    writer = UsageIndex(ix.root)
    runs: list[int] = []

    def query(con: Any) -> Any:
        runs.append(1)
        if len(runs) == 1:  # another process switches the manifest (and removes the old files) meanwhile
            with open(home / PROJECTS / "-home-u-a" / "a1.jsonl", "a") as fh:
                fh.write(_call(60, "2026-03-01T12:00:00.000Z"))
            writer.update(home=home, env={})
        return con.execute("SELECT sum(calls) FROM call_rollup").fetchall()[0][0]

    assert ix.read(query) == 8 and len(runs) == 2 and ix.notices == []


# --------------------------------------------------------------------------- the lock, read-only


HOLD = """import sys, time
from pathlib import Path
from engine.usage.storage import locked
with locked(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_a_held_lock_is_waited_for_with_a_message_then_given_up(home: Path, tmp_path: Path) -> None:
    ix = UsageIndex(tmp_path / "usage")
    _update(ix, home)
    before = ix.totals()
    with open(home / PROJECTS / "-home-u-a" / "a1.jsonl", "a") as fh:
        fh.write(_call(70, "2026-03-01T12:00:00.000Z"))
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(ix.root / storage.LOCK_FILE), "30"],
                              stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[3])
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        said: list[str] = []
        started = time.monotonic()
        report = ix.update(home=home, env={}, say=said.append, lock_wait=2.0)
        took = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    assert 2.0 <= took < 6
    assert said == [f"waiting for another ctxbench process (pid {holder.pid}) that is updating the usage index…"]
    assert len(report.warnings) == 1 and f"pid {holder.pid}" in report.warnings[0] and report.read == 0
    assert ix.totals() == before  # answered from the index as it is
    assert ix.update(home=home, env={}).read == 1  # the holder died: the lock is free


def _can_write_despite(folder: Path) -> bool:
    probe = folder / ".probe"
    try:
        probe.write_text("x")
    except OSError:
        return False
    probe.unlink()
    return True


def test_a_read_only_index_answers_as_it_is(home: Path, tmp_path: Path) -> None:
    ix = UsageIndex(tmp_path / "usage")
    _update(ix, home)
    before = ix.totals()
    modes = {p: p.stat().st_mode for p in [ix.root, *ix.root.rglob("*")] if p.is_dir()}
    for p in modes:
        p.chmod(0o555)
    try:
        if _can_write_despite(ix.root):
            pytest.skip("the tests run with the right to write anywhere (root): see the unshare test")
        report = _update(UsageIndex(ix.root), home)
        assert report.warnings == [] and report.unchanged == 3 and UsageIndex(ix.root).totals() == before
        with open(home / PROJECTS / "-home-u-a" / "a1.jsonl", "a") as fh:
            fh.write(_call(80, "2026-03-01T12:00:00.000Z"))
        report = _update(UsageIndex(ix.root), home)
        (warning,) = report.warnings
        assert "read-only" in warning and "1 session file" in warning
        assert UsageIndex(ix.root).totals() == before
    finally:
        for p, mode in modes.items():
            p.chmod(mode)


READ_ONLY_RUN = """import json, sys
from pathlib import Path
from engine.usage.index import UsageIndex
ix = UsageIndex(Path(sys.argv[1]))
report = ix.update(home=Path(sys.argv[2]), env={})
print(json.dumps({"report": report.to_json(), "totals": ix.totals()}))
"""


def test_a_read_only_mount_answers_as_it_is(home: Path, tmp_path: Path) -> None:
    """The index's folder on a read-only mount (a bind mount in a user namespace: works as root too)."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare on this machine")
    ix = UsageIndex(tmp_path / "usage")
    _update(ix, home)
    before = ix.totals()
    with open(home / PROJECTS / "-home-u-a" / "a1.jsonl", "a") as fh:
        fh.write(_call(90, "2026-03-01T12:00:00.000Z"))
    root = str(ix.root)
    script = tmp_path / "run.py"
    script.write_text(READ_ONLY_RUN)
    cmd = ["unshare", "-rm", "sh", "-c", 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && '
           'touch "$1/probe" 2>/dev/null && exit 77; exec "$2" "$3" "$1" "$4"', "sh", root, sys.executable,
           str(script), str(home)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[3],
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])})
    if out.returncode != 0 and ("unshare" in out.stderr or "mount" in out.stderr or out.returncode == 77):
        pytest.skip(f"no read-only bind mount here: {out.stderr.strip()[-200:]}")
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.splitlines()[-1])
    warnings = result["report"]["warnings"]
    assert len(warnings) == 1 and "read-only" in warnings[0] and "1 session file" in warnings[0], warnings
    assert result["totals"] == json.loads(json.dumps(before))
    assert ix.update(home=home, env={}).read == 1  # writable again outside the namespace


# --------------------------------------------------------------------------- Gemini CLI's last line


@pytest.mark.parametrize("settled", [True, False], ids=["complete", "being-written"])
def test_a_gemini_chat_whose_last_line_has_no_newline_counts_its_last_call(tmp_path: Path, settled: bool) -> None:
    path, data = _gemini_home(tmp_path)
    path.write_bytes(data)
    whole = UsageIndex(tmp_path / "whole")
    _update(whole, tmp_path / "home")
    want = whole.totals()
    assert data.endswith(b"\n") and want["calls"] >= 2
    path.write_bytes(data.rstrip(b"\n"))  # as a chat file may end
    past = time.time() - 60
    if settled:
        os.utime(path, (past, past))
    ix = UsageIndex(tmp_path / "usage")
    report = _update(ix, tmp_path / "home")
    assert report.read == 1 and not report.failed
    if settled:  # a complete file: its last line read as it is
        assert ix.totals() == want
        assert _update(ix, tmp_path / "home").read == 0
        assert UsageIndex(ix.root).totals() == want
        return
    # changed just now: the line may be half written, it waits; the file is read again at the next update
    assert ix.totals()["calls"] <= want["calls"]
    os.utime(path, (past, past))
    assert _update(ix, tmp_path / "home").read == 1 and ix.totals() == want
    assert _update(UsageIndex(ix.root), tmp_path / "home").read == 0


@pytest.mark.parametrize("state", ["settled", "newline-missing", "cut"])
def test_a_claude_code_file_whose_last_line_has_no_newline_counts_its_last_call(home: Path, tmp_path: Path,
                                                                               state: str) -> None:
    """Claude Code killed mid-write leaves a last line without its newline and never touches the file again: that
    call is not lost for as long as the file stays as it is. A whole JSON object (only its newline missing) is
    counted at once and the file read again at the next update; a line cut while written waits for the rest."""
    path = home / PROJECTS / "-home-u-a" / "a2.jsonl"
    whole = UsageIndex(tmp_path / "whole")
    _update(whole, home)
    want = whole.totals()
    data = path.read_bytes().rstrip(b"\n")
    last = data.rfind(b"\n") + 1
    path.write_bytes(data[:last] + data[last:][:40] if state == "cut" else data)
    past = time.time() - 60
    if state == "settled":
        os.utime(path, (past, past))
    ix = UsageIndex(tmp_path / "usage")
    report = _update(ix, home)
    assert report.read == 3 and not report.failed and not report.damaged
    if state == "cut":
        assert ix.totals()["calls"] == want["calls"] - 1  # half a line: it waits
        path.write_bytes(data + b"\n")  # the agent writes the rest
        assert _update(UsageIndex(ix.root), home).read == 1
        assert UsageIndex(ix.root).totals() == want
        return
    assert ix.totals() == want
    again = _update(UsageIndex(ix.root), home).read  # a new process: read again only if the file had not settled
    assert again == (0 if state == "settled" else 1)
    assert UsageIndex(ix.root).totals() == want
