"""The service's Usage part: queries off the loop, a UsageReady with plain data (first the index as it is,
then after the update, how far the update has read between them: UsageProgress), problems said in the report; a
quiet (live) refresh says only what is new and does not replace a running one."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from engine.store.config import Settings
from engine.usage import storage
from engine.usage.index import IndexProgress, IndexReport, UsageIndex
from engine.workbench.events import UsageProgress, UsageReady
from engine.workbench.tasks import TaskGroup
from engine.workbench.usage import UsagePart
from tests.engine.usage.test_usage_index import _call, _user


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    folder = home / ".claude" / "projects" / "-home-u-proj"
    folder.mkdir(parents=True)
    (folder / "s1.jsonl").write_text(_user(1, "2026-03-01T10:00:00.000Z") + _call(2, "2026-03-01T10:00:05.000Z")
                                     + _user(3, "2026-03-02T10:00:00.000Z") + _call(4, "2026-03-02T10:00:05.000Z"))
    return home


def _run(part: UsagePart, *args: Any, **kw: Any) -> Any:
    async def go() -> Any:
        return await part.refresh(*args, **kw)

    return asyncio.run(go())


def _part(tmp_path: Path, events: list[Any], update: Any = None) -> UsagePart:
    home = _home(tmp_path)
    return UsagePart(TaskGroup(), events.append, lambda: Settings(), index=UsageIndex(tmp_path / "usage"),
                     update=update or (lambda ix, s, told: ix.update(s, home=home, env={}, progress=told)))


def test_refresh_sends_the_index_as_it_is_then_the_updated_figures(tmp_path: Path) -> None:
    events: list[Any] = []
    part = _part(tmp_path, events)

    report = _run(part, "2026-03-02", None)
    assert [type(e) for e in events] == [UsageReady, UsageProgress, UsageReady]  # (how far the update read)
    size = next((tmp_path / "home").rglob("s1.jsonl")).stat().st_size
    assert events[1].progress == IndexProgress(1, 1, size, size)
    events.pop(1)
    first, last = events[0].report, events[1].report
    assert first.updating and first.total["calls"] == 0  # an empty index, at once
    assert not last.updating and last is report and last.total["calls"] == 1 and last.days() == ["2026-03-02"]
    assert last.index is not None and last.index["read"] == 1 and last.problem == ""
    assert events[1].payload() == (report,)


def test_refresh_without_update_reads_no_file(tmp_path: Path) -> None:
    events: list[Any] = []
    calls: list[int] = []
    part = _part(tmp_path, events, update=lambda ix, s, told: calls.append(1))
    _run(part, None, "bad date", update=False)
    assert calls == [] and len(events) == 1 and not events[0].report.updating and events[0].report.until is None


def test_a_failed_update_is_said_in_the_report(tmp_path: Path) -> None:
    events: list[Any] = []

    def fail(ix: UsageIndex, s: Settings, told: Any = None) -> None:
        raise OSError("disk full")

    _run(_part(tmp_path, events, update=fail))
    assert "disk full" in events[-1].report.problem


def test_a_damaged_index_file_is_rebuilt_and_said_in_the_report(tmp_path: Path) -> None:
    events: list[Any] = []
    part = _part(tmp_path, events)
    before = _run(part)
    rollup = tmp_path / "usage" / part.index.manifest().single["call_rollup"]
    rollup.write_bytes(b"not parquet")
    after = _run(part, update=False)
    assert after.problem == "" and after.total == before.total
    assert any(rollup.name in w and "rebuilt" in w for w in after.warnings), after.warnings


def test_an_index_that_cannot_be_read_or_rebuilt_is_said_in_the_report(tmp_path: Path) -> None:
    events: list[Any] = []
    part = _part(tmp_path, events)
    _run(part)
    rollup = tmp_path / "usage" / part.index.manifest().single["call_rollup"]
    rollup.write_bytes(b"not parquet")
    part.index.lock_wait = 0.2
    with storage.locked(tmp_path / "usage" / storage.LOCK_FILE):  # another process updates: no rebuild now
        report = _run(part, update=False)
    assert "cannot query the usage index" in report.problem and str(tmp_path / "usage") in report.problem
    assert any("could not be rebuilt now" in w for w in report.warnings), report.warnings


def test_every_report_carries_what_the_last_update_could_not_read(tmp_path: Path) -> None:
    events: list[Any] = []
    part = _part(tmp_path, events)
    bad = tmp_path / "home" / ".claude" / "projects" / "-home-u-proj" / "bad.jsonl"
    bad.mkdir()  # a folder named like a session file: unreadable, said, the others go on
    (tmp_path / "home" / ".claude" / "projects" / "-home-u-proj" / "s2.jsonl").write_text(
        _user(1, "2026-03-03T10:00:00.000Z") + _call(2, "2026-03-03T10:00:05.000Z"))
    report = _run(part)
    assert report.total["calls"] == 3
    assert [u["path"] for u in report.unreadable] == [str(bad)] and report.unreadable[0]["reason"]
    later = _run(part, "2026-03-03", None, update=False)  # a range change: the same list
    assert later.unreadable == report.unreadable


def test_the_service_holds_the_part() -> None:
    from engine.workbench.service import Workbench

    assert isinstance(Workbench(Settings()).usage, UsagePart)


def _quiet(part: UsagePart) -> Any:
    return _run(part, None, None, update=True, quiet=True)


def test_a_quiet_refresh_says_nothing_when_the_update_read_nothing(tmp_path: Path) -> None:
    events: list[Any] = []
    part = _part(tmp_path, events, update=lambda ix, s, told: IndexReport(files=3, unchanged=3))
    assert _quiet(part) is None and events == []  # no "index as it is" first, nothing after: no repaint


def test_a_quiet_refresh_sends_the_figures_once_when_a_file_grew(tmp_path: Path) -> None:
    events: list[Any] = []
    part = _part(tmp_path, events)
    _run(part)  # the user's first look: the index is up to date
    events.clear()
    assert _quiet(part) is None and events == []  # nothing changed since
    s1 = tmp_path / "home" / ".claude" / "projects" / "-home-u-proj" / "s1.jsonl"
    with s1.open("a") as f:  # the agent works on
        f.write(_user(5, "2026-03-02T11:00:00.000Z") + _call(6, "2026-03-02T11:00:05.000Z"))
    report = _quiet(part)
    assert [type(e) for e in events] == [UsageReady] and events[0].report is report
    assert not report.updating and report.index["read"] == 1 and report.total["calls"] == 3


def test_a_quiet_refresh_says_new_failures_and_problems_once(tmp_path: Path) -> None:
    events: list[Any] = []
    failing = IndexReport(files=1, failed=[("/x/a.jsonl", "not JSON")])
    part = _part(tmp_path, events, update=lambda ix, s, told: failing)
    assert _quiet(part) is not None and len(events) == 1  # a file that does not read: said
    assert _quiet(part) is None and len(events) == 1  # the same one again: nothing new

    def fail(ix: UsageIndex, s: Settings, told: Any = None) -> None:
        raise OSError("disk full")

    part._update = fail
    assert _quiet(part) is not None and "disk full" in events[-1].report.problem


def test_a_quiet_refresh_does_not_replace_a_running_one(tmp_path: Path) -> None:
    events: list[Any] = []
    started, release = threading.Event(), threading.Event()

    def slow(ix: UsageIndex, s: Settings, told: Any = None) -> IndexReport:
        started.set()
        release.wait(10)
        return IndexReport(read=1)

    part = _part(tmp_path, events, update=slow)

    async def go() -> Any:
        task = part.refresh(None, None, update=True)  # the user's
        assert task is not None
        await asyncio.to_thread(started.wait, 10)
        assert part.refresh(None, None, update=True, quiet=True) is None  # skipped: the user's one answers
        assert part.tasks.get("usage") is task
        release.set()
        return await task

    report = asyncio.run(go())
    assert events[-1].report is report and report.index["read"] == 1
    assert [e.report.updating for e in events] == [True, False]



def test_the_last_n_days_end_today_in_utc_and_the_chart_spans_the_whole_range(tmp_path: Path,
                                                                             monkeypatch: Any) -> None:
    from datetime import date

    from engine.usage import report as report_mod

    monkeypatch.setattr(report_mod, "today_utc", lambda: date(2026, 3, 10))
    events: list[Any] = []
    part = _part(tmp_path, events)
    report = _run(part, "2026-01-01", "2026-01-02", days=30)  # days win over since / until
    assert (report.since, report.until) == ("2026-02-09", "2026-03-10")  # today the last: no day to come
    assert (report.first_day, report.last_day) == ("2026-02-09", "2026-03-10")
    assert report.total["calls"] == 2
    everything = _run(part, days=0, update=False)
    assert (everything.since, everything.until) == (None, None)
    assert (everything.first_day, everything.last_day) == ("2026-03-01", "2026-03-10")  # first call … today
