"""An update tells how far its reading of session files has come (``UsageIndex.update(progress=...)``): the files
and bytes of each step read, as the files are read — by worker processes (in the order they finish) or here — at
most every ``PROGRESS_SECONDS`` and once when a step has read all; the CLI and the window show it."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from engine.sources import spread
from engine.usage import index as index_mod
from engine.usage.index import IndexProgress, UsageIndex
from tests.engine.usage.test_index_spread import _force_spread, _shared_home


def _steps(told: list[IndexProgress]) -> list[list[IndexProgress]]:
    """The reports, cut where a step starts (another total, or a count that does not grow)."""
    steps: list[list[IndexProgress]] = []
    for state in told:
        last = steps[-1][-1] if steps else None
        if last is None or state.files != last.files or state.files_done <= last.files_done:
            steps.append([])
        steps[-1].append(state)
    return steps


def _sizes(home: Path) -> dict[str, int]:
    return {str(p): p.stat().st_size for p in home.rglob("*.jsonl")
            if "subagents" not in p.parts and (".codex" in p.parts or p.parent.parent.name == "projects")}


@pytest.mark.parametrize("workers", [True, False], ids=["workers", "here"])
def test_an_update_tells_the_files_and_bytes_it_has_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         workers: bool) -> None:
    home = _shared_home(tmp_path, copies=2)
    for path in sorted((home / ".claude" / "projects").glob("*-1/*.jsonl"))[:3]:
        os.utime(path)  # being written: read here after the workers' (a second step)
    _force_spread(monkeypatch, workers)
    monkeypatch.setattr(index_mod, "PROGRESS_SECONDS", 0.0)  # every file told
    told: list[IndexProgress] = []
    threads: set[str] = set()

    def progress(state: IndexProgress) -> None:
        told.append(state)
        threads.add(threading.current_thread().name)

    report = UsageIndex(tmp_path / "usage").update(home=home, env={}, progress=progress)
    sizes = _sizes(home)
    assert report.read == len(sizes) and not report.failed
    steps = _steps(told)
    assert [len(s) for s in steps] == [s[-1].files for s in steps]  # each file told once, one more each time
    for step in steps:
        assert [s.files_done for s in step] == list(range(1, step[-1].files + 1))
        assert [s.bytes_done for s in step] == sorted(s.bytes_done for s in step)
        assert step[-1].bytes_done == step[-1].bytes and len({s.bytes for s in step}) == 1
    assert sum(s[-1].files for s in steps) == report.read  # every file read, told once
    assert sum(s[-1].bytes for s in steps) == sum(sizes.values())
    if workers:
        assert len(steps) == 2 and steps[1][-1].files == 3  # the workers' step, then the 3 being written
        assert len(threads) == 2  # (the pool's thread told of the workers' files)
    else:
        assert len(steps) == 1 and threads == {threading.current_thread().name}


def test_progress_is_told_at_most_so_often_and_once_a_step_is_read(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    home = _shared_home(tmp_path, copies=2)
    _force_spread(monkeypatch, True)
    monkeypatch.setattr(index_mod, "PROGRESS_SECONDS", 3600.0)
    told: list[IndexProgress] = []
    report = UsageIndex(tmp_path / "usage").update(home=home, env={}, progress=told.append)
    assert told == [IndexProgress(report.read, report.read, sum(_sizes(home).values()),
                                  sum(_sizes(home).values()))]
    again: list[IndexProgress] = []
    assert UsageIndex(tmp_path / "usage").update(home=home, env={}, progress=again.append).read == 0
    assert again == []  # nothing to read: nothing told


def test_spread_tells_each_item_once_as_it_finishes(monkeypatch: pytest.MonkeyPatch) -> None:
    for on in (True, False):
        _force_spread(monkeypatch, on)
        done: list[int] = []
        results = [f.result() for f in spread.spread(abs, [-5, -1, -3, -2], [5, 1, 3, 2], done=done.append)]
        assert results == [5, 1, 3, 2] and sorted(done) == [0, 1, 2, 3]
