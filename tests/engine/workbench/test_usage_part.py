"""The service's Usage part: queries off the loop, a UsageReady with plain data (first the index as it is,
then after the update), problems said in the report."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from engine.store.config import Settings
from engine.usage.index import UsageIndex
from engine.workbench.events import UsageReady
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
                     update=update or (lambda ix, s: ix.update(s, home=home, env={})))


def test_refresh_sends_the_index_as_it_is_then_the_updated_figures(tmp_path: Path) -> None:
    events: list[Any] = []
    part = _part(tmp_path, events)

    report = _run(part, "2026-03-02", None)
    assert [type(e) for e in events] == [UsageReady, UsageReady]
    first, last = events[0].report, events[1].report
    assert first.updating and first.total["calls"] == 0  # an empty index, at once
    assert not last.updating and last is report and last.total["calls"] == 1 and last.days() == ["2026-03-02"]
    assert last.index is not None and last.index["read"] == 1 and last.problem == ""
    assert events[1].payload() == (report,)


def test_refresh_without_update_reads_no_file(tmp_path: Path) -> None:
    events: list[Any] = []
    calls: list[int] = []
    part = _part(tmp_path, events, update=lambda ix, s: calls.append(1))
    _run(part, None, "bad date", update=False)
    assert calls == [] and len(events) == 1 and not events[0].report.updating and events[0].report.until is None


def test_a_failed_update_is_said_in_the_report(tmp_path: Path) -> None:
    events: list[Any] = []

    def fail(ix: UsageIndex, s: Settings) -> None:
        raise OSError("disk full")

    _run(_part(tmp_path, events, update=fail))
    assert "disk full" in events[-1].report.problem


def test_a_damaged_index_is_said_in_the_report(tmp_path: Path) -> None:
    events: list[Any] = []
    part = _part(tmp_path, events)
    day = tmp_path / "usage" / "calls" / "day=2026-03-01"
    day.mkdir(parents=True)
    (day / "data-x.parquet").write_bytes(b"not parquet")
    _run(part, update=False)
    assert "cannot query the usage index" in events[-1].report.problem


def test_the_service_holds_the_part() -> None:
    from engine.workbench.service import Workbench

    assert isinstance(Workbench(Settings()).usage, UsagePart)
