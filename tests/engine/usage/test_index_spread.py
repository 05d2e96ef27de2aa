"""Issue 28: the first index and the sources scan spread over worker processes, and lines decoded by orjson, give
exactly what one process reading with the standard ``json`` module gives, on every shared session."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from engine.sources import discovery, session_summary, spread
from engine.sources import model as source_model
from engine.sources.discovery import scan_sources
from engine.sources.readers import read_source
from engine.usage import index as index_mod
from engine.usage import rows as rows_mod
from engine.usage import storage
from engine.usage.index import UsageIndex
from engine.usage.prices import load_table
from tests.conftest import SHARED

SESSIONS = SHARED / "data" / "sessions"
CLAUDE = SESSIONS / "claude-code"
CODEX = SESSIONS / "codex"
_STDLIB = json.JSONDecoder(strict=False).decode


def _shared_home(tmp_path: Path, copies: int = 1) -> Path:
    """A HOME holding every shared Claude Code session (subagents included) and Codex rollout, ``copies`` times
    (each copy in a project folder of its own), with old mtimes (no file is being written)."""
    home = tmp_path / "home"
    for k in range(copies):
        projects = home / ".claude" / "projects" / f"-home-u-shared-{k}"
        shutil.copytree(CLAUDE, projects, ignore=shutil.ignore_patterns("*.md", "LICENSE"))
        day = home / ".codex" / "sessions" / "2026" / "02" / f"{k + 1:02d}"
        day.mkdir(parents=True)
        for src in sorted(CODEX.glob("rollout-*.jsonl")):
            shutil.copyfile(src, day / src.name)
    old = time.time() - 2 * index_mod.ACTIVE_SECONDS
    for root, dirs, files in os.walk(home):
        for name in dirs + files:
            os.chmod(Path(root) / name, 0o755)
            os.utime(Path(root) / name, (old, old))
    return home


def _shared_lines() -> list[bytes]:
    return [raw for path in sorted(SESSIONS.rglob("*.jsonl")) for raw in path.read_bytes().splitlines()]


def test_loads_line_is_the_standard_module_on_every_shared_line() -> None:
    lines = _shared_lines()
    assert len(lines) > 1000
    for raw in lines:
        assert source_model.loads_line(raw) == _STDLIB(raw.decode("utf-8"))


@pytest.mark.parametrize("raw", [
    b'{"n": 18446744073709551616}', b'{"n": -9223372036854775809}', b'{"n": 123456789012345678901234567890}',
    b'{"t": "a\tb\x00c"}', b'{"t": "\\ud800"}', b'{"n": NaN, "i": Infinity}', b'{"n": 1e400}',
    b'{"a": 1, "a": 2}', b'{"f": 0.1, "g": -0.0, "h": 1E2, "i": 9223372036854775807}', b'[1, 2]', b'"text"',
])
def test_loads_line_where_orjson_differs_or_refuses(raw: bytes) -> None:
    """Integers past 64 bits (orjson makes them floats), raw control characters, lone surrogates, NaN: the
    standard module's value, of the same types."""
    got, want = source_model.loads_line(raw), _STDLIB(raw.decode("utf-8"))
    assert repr(got) == repr(want)


@pytest.mark.parametrize("raw", [b'{"a": ', b"\xff\xfe{}", b"[" * 100_000, b'{"a": 1} x'])
def test_loads_line_raises_as_the_standard_module(raw: bytes) -> None:
    def outcome(fn: Any) -> str:
        try:
            fn()
        except (ValueError, RecursionError) as exc:
            return f"{type(exc).__name__}: {exc}"
        return "read"

    assert outcome(lambda: source_model.loads_line(raw)) == outcome(lambda: _STDLIB(raw.decode("utf-8")))


def _all_rows(root: Path) -> dict[str, list[str]]:
    con = UsageIndex(root).connect()
    try:
        out = {}
        for table in ("calls", "tool_results", "sessions", "call_rollup", "tool_rollup", "session_rollup"):
            cur = con.execute(f"SELECT * FROM {table}")
            out[table] = sorted(map(repr, cur.fetchall()))
        return out
    finally:
        con.close()


def _force_spread(monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    monkeypatch.setattr(spread, "MIN_BYTES", 0 if on else 2**62)
    monkeypatch.setattr(spread, "MIN_ITEMS", 2)
    monkeypatch.setattr(spread, "cores", lambda: 2)


def test_a_spread_first_index_has_exactly_the_rows_of_one_process(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Every table of a first index of the shared sessions (two copies: Claude Code with subagents, Codex) read by
    worker processes equals one read here, file by file with the readers, row for row."""
    home = _shared_home(tmp_path, copies=2)
    for path in sorted((home / ".claude" / "projects").glob("*-1/*.jsonl"))[:3]:
        os.utime(path)  # being written: read here, its reader kept (the others by workers)
    started: list[int] = []
    real = spread.workers_for

    def counted(items: int, total: int) -> int:
        n = real(items, total)
        started.append(n)
        return n

    monkeypatch.setattr(spread, "workers_for", counted)
    results = {}
    for on in (False, True):
        _force_spread(monkeypatch, on)
        root = tmp_path / f"usage-{on}"
        report = UsageIndex(root).update(home=home, env={}, entries=scan_sources(
            home=home, env={}, refresh=True, index=tmp_path / f"sources-{on}.json"))
        assert not report.failed and report.read == 2 * (len(list(CLAUDE.glob("*.jsonl")))
                                                         + len(list(CODEX.glob("rollout-*.jsonl"))))
        results[on] = _all_rows(root)
    assert started and max(started) == 2, "the spread run used no workers"
    assert results[True]["calls"] and results[True] == results[False]


def test_the_worker_read_equals_the_followed_read_on_every_shared_session(tmp_path: Path) -> None:
    """A worker's rows of a file (read whole, one-hour cache writes from the file) equal the rows of the index's own
    read of a file an agent may still be writing (its incremental reader, kept), for every shared session."""
    home = _shared_home(tmp_path)
    entries = scan_sources(home=home, env={}, refresh=True, index=tmp_path / "sources.json")
    prices = load_table()
    rows_mod.worker_start(prices)
    ix = UsageIndex(tmp_path / "usage")
    seen = 0
    for entry in entries:
        fid = rows_mod.file_id(entry.path)
        farmed = rows_mod.rows_of_file((entry, fid))
        assert farmed is not None
        session, one_hour, waiting = ix._read(entry, grew=True)  # the incremental reader's path
        assert not waiting
        mine = rows_mod.rows_of(entry, session, prices, fid, one_hour)
        whole = rows_mod.rows_of(entry, read_source(Path(entry.path), entry.agent), prices, fid)
        assert farmed[0] == mine == whole, entry.path
        seen += len(mine.calls)
    assert seen > 500


def test_a_worker_leaves_a_file_with_a_torn_last_line_to_the_index(tmp_path: Path) -> None:
    home = _shared_home(tmp_path)
    path = next((home / ".claude" / "projects").glob("*/short.jsonl"))
    with open(path, "ab") as fh:
        fh.write(b'{"type": "user", "message": {"role": "us')
    entry = next(e for e in scan_sources(home=home, env={}, refresh=True, index=tmp_path / "s.json")
                 if e.path == str(path))
    assert rows_mod.rows_of_file((entry, "f")) is None


def test_a_spread_sources_scan_lists_what_one_process_lists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _shared_home(tmp_path, copies=2)
    broken = home / ".claude" / "projects" / "-home-u-shared-0" / "broken.jsonl"
    broken.mkdir()  # a problem, said in both
    old = time.time() - 2 * index_mod.ACTIVE_SECONDS
    os.utime(broken, (old, old))  # (not among the most recently changed: the clock's tick may equal the touches')
    touched = {str(p) for p in sorted((home / ".claude" / "projects").glob("*-1/*.jsonl"))[:3]}
    for path in touched:
        os.utime(path)  # being written: two of them summarised here (their light pass kept), the rest by workers
    found = {}
    for on in (False, True):
        _force_spread(monkeypatch, on)
        monkeypatch.setattr(session_summary, "CLAUDE_SCANS_KEPT", 2)  # most files go to the workers
        session_summary._CLAUDE_SCANS.clear()
        problems: list[discovery.ScanProblem] = []
        entries = scan_sources(home=home, env={}, refresh=True, index=tmp_path / f"s-{on}.json", problems=problems)
        found[on] = ([e.to_json() for e in entries], sorted(p.to_json()["path"] for p in problems),
                     json.loads((tmp_path / f"s-{on}.json").read_bytes()))
        if on:
            assert len(session_summary._CLAUDE_SCANS) == 2 and set(session_summary._CLAUDE_SCANS) <= touched
    assert len(found[True][0]) == 2 * (len(list(CLAUDE.glob("*.jsonl"))) + len(list(CODEX.glob("rollout-*.jsonl"))))
    assert found[True] == found[False]


def _double(x: int) -> int:
    if x == 3:
        raise ValueError("three")
    return 2 * x


def test_spread_keeps_the_order_and_each_items_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    _force_spread(monkeypatch, True)
    items = list(range(8))
    out = []
    for fut in spread.spread(_double, items, [1] * 8):
        exc = fut.exception()
        out.append(str(exc) if exc else fut.result())
    assert out == [0, 2, 4, "three", 8, 10, 12, 14]
    assert spread.workers_for(8, 8) == 2
    monkeypatch.setattr(spread, "cores", lambda: 1)
    assert spread.workers_for(8, 8) == 0  # one core: read here


@pytest.mark.parametrize("kind", ["BIGINT", "INTEGER", "DOUBLE"])
def test_a_number_column_is_checked_as_value_by_value(kind: str) -> None:
    cases: list[list[Any]] = [[1, 2, None], [2**63], [2**63 - 1, -(2**63)], [-(2**63) - 1], [2**31], [True], [1.5],
                              [None], [], [1, 2.0], [float("nan")], ["12"], [1, True], [2**70, 1.0]]
    for values in cases:
        assert storage.all_fit(values, kind) == all(storage.fits(v, kind) for v in values), values


def test_a_first_index_reads_each_file_once_for_its_summary_and_its_rows(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A first index that scans for itself (no entries given) has the workers read each new file once for both its
    Sources summary and its rows (``summary_and_rows``): every table equals the one of an index made from the light
    pass's entries file by file, and the scan's own index holds the light pass's very summaries."""
    home = _shared_home(tmp_path, copies=2)
    _force_spread(monkeypatch, True)
    handed: list[int] = []
    real = UsageIndex._spread

    def spy(self: UsageIndex, todo: list[Any], prices: Any, told: Any = None) -> Any:
        handed.append(len(todo))
        return real(self, todo, prices, told)

    monkeypatch.setattr(UsageIndex, "_spread", spy)
    one = UsageIndex(tmp_path / "one-pass")
    report = one.update(home=home, env={})
    files = 2 * (len(list(CLAUDE.glob("*.jsonl"))) + len(list(CODEX.glob("rollout-*.jsonl"))))
    assert not report.failed and report.read == files
    assert handed == [0], "a file was read again after the scan"
    _force_spread(monkeypatch, False)
    light = scan_sources(home=home, env={}, refresh=True, index=tmp_path / "light.json")
    UsageIndex(tmp_path / "two-passes").update(home=home, env={}, entries=light)
    assert _all_rows(tmp_path / "one-pass") == _all_rows(tmp_path / "two-passes")
    kept = json.loads((tmp_path / "one-pass" / "sources-index.json").read_bytes())["files"]
    assert {path: known["entry"] for path, known in kept.items()} == {e.path: e.to_json() for e in light}
    again = one.update(home=home, env={})  # up to date: nothing read
    assert again.read == 0 and again.unchanged == files


def test_a_one_shot_first_index_reads_the_files_being_written_in_the_workers_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ctxbench usage`` (one update, then the process ends): the files an agent changed a moment ago are read in the
    worker processes with the others, no reader kept for a next update, and the rows are those of the window's index
    (which reads such files here and keeps their readers)."""
    home = _shared_home(tmp_path)
    fresh = sorted((home / ".claude" / "projects").glob("*/*.jsonl"))[:3]
    for path in fresh:
        os.utime(path)  # being written
    _force_spread(monkeypatch, True)
    read_here: list[str] = []
    real_read = UsageIndex._read

    def counted(self: UsageIndex, entry: Any, grew: bool) -> Any:
        read_here.append(entry.path)
        return real_read(self, entry, grew)

    monkeypatch.setattr(UsageIndex, "_read", counted)
    results = {}
    for one_shot in (False, True):
        read_here.clear()
        ix = UsageIndex(tmp_path / f"usage-{one_shot}", one_shot=one_shot)
        report = ix.update(home=home, env={})
        assert not report.failed and report.read
        if one_shot:
            assert read_here == [] and not ix._followed
        else:
            assert {str(p) for p in fresh} <= set(read_here) and ix._followed
        results[one_shot] = _all_rows(tmp_path / f"usage-{one_shot}")
    assert results[True]["calls"] and results[True] == results[False]
